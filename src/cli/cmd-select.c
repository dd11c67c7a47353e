// SPDX-License-Identifier: MIT
/*
 * cmd-select.c: `gpuctl select`: which devices should this job get? Prints them as a device
 * string for CUDA, a shell, Docker, the NVIDIA container toolkit, CDI, Kubernetes or JSON.
 *
 * Decisions:
 * - The choice is the library's (gpuctl_alloc); the strings are the library's too
 *   (gpuctl_devstr_render), so `gpuctl run` and `gpuctl select` can never disagree on either.
 * - UUIDs by default; --ids index prints NVML indices, and the forms CUDA reads then carry
 *   CUDA_DEVICE_ORDER=PCI_BUS_ID (the library adds it), never a bare index.
 * - --explain writes to stderr, so `eval "$(gpuctl select --format env --explain)"` and
 *   `$(gpuctl select)` still get exactly the device string on stdout. It shows the chosen set
 *   and the runner-up with every score component, and names the first component (in the
 *   library's comparison order) that differs: the one that decided.
 * - -n 0 is valid and prints the empty set (CUDA_VISIBLE_DEVICES= hides every GPU).
 * - Leases (docs/leases.md). Without --hold, select takes no lease: it excludes the devices
 *   leased now (when the lease directory exists), so what it prints can still be taken by
 *   someone else before it is used. --hold SECONDS first starts a holder (double fork and
 *   setsid: its own session, no terminal), which selects and leases atomically itself, so the
 *   lock and the owner record are its own (/proc/locks names it, and a record naming a pid that
 *   did not take the lock is not trusted by ps). It reports the status and device string
 *   through a pipe, then puts stdio on /dev/null, moves to / and keeps the lease for SECONDS or
 *   until SIGTERM (`gpuctl release`). select prints only after that report, so a script that
 *   reads the device string holds a lease; errors (exit 3 when all is leased) are the holder's
 *   one line on select's stderr and select's exit status.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "filters.h"
#include "format.h"
#include "parse.h"
#include "util.h"
#include "watchdog.h"

/* The longest --hold: a year. */
#define SELECT_HOLD_MAX_S (366UL * 24 * 3600)

enum {
	OPT_IDS = 0x100,
	OPT_EXPLAIN,
	OPT_HOLD,
};

static const struct option select_options[] = {
        FILTER_LONG_OPTIONS,
        CMD_OPTION_FORMAT,
        {"ids", required_argument, NULL, OPT_IDS},
        {"explain", no_argument, NULL, OPT_EXPLAIN},
        {"hold", required_argument, NULL, OPT_HOLD},
        CMD_OPTION_HELP,
        {NULL, 0, NULL, 0},
};

/* "0 (GPU-7678cc1a), 1 (GPU-f4c6dae6)" for --explain. */
static void explain_set(const struct gpuctl_snapshot *snap, const struct gpuctl_devset *set,
                        FILE *f)
{
	size_t n = gpuctl_devset_count(set);
	if (n == 0) {
		fputs("(none)", f);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		size_t gpu;
		int mig;
		char label[48], uuid[32];
		if (gpuctl_devset_get(set, i, &gpu, &mig) < 0)
			continue;
		gpuctl_device_label(snap, gpu, mig, label, sizeof(label));
		format_short_uuid(gpuctl_devset_uuid(set, snap, i), uuid, sizeof(uuid));
		fprintf(f, "%s%s (%s)", i ? ", " : "", label, uuid);
	}
}

static void explain_score(const struct gpuctl_select_score *s, FILE *f)
{
	fprintf(f,
	        "  ring bandwidth %.1f GB/s, NUMA nodes %u, sockets %u, leftover %.3f, whole NUMA "
	        "nodes taken %u, release %.3f, total pairwise %.1f GB/s, load %.3f\n",
	        s->ring_bandwidth, s->numa_nodes, s->sockets, s->leftover, s->whole_nodes_taken,
	        s->release, s->total_bandwidth, s->load);
}

/* Whether two doubles differ beyond the library's comparison tolerance (select.c: relative
 * 1e-6), so the component named is the one the library decided on. */
static bool differs(double a, double b)
{
	return fabs(a - b) > 1e-6 * fmax(fabs(a), fabs(b)) + 1e-12;
}

/* The first component, in the library's order, on which a and b differ. */
static void explain_decider(const struct gpuctl_select_score *a,
                            const struct gpuctl_select_score *b, FILE *f)
{
	if (differs(a->ring_bandwidth, b->ring_bandwidth))
		fprintf(f, "decided by: ring bandwidth (%.1f vs %.1f GB/s, higher is better)\n",
		        a->ring_bandwidth, b->ring_bandwidth);
	else if (a->numa_nodes != b->numa_nodes)
		fprintf(f, "decided by: NUMA nodes spanned (%u vs %u, fewer is better)\n",
		        a->numa_nodes, b->numa_nodes);
	else if (a->sockets != b->sockets)
		fprintf(f, "decided by: CPU sockets spanned (%u vs %u, fewer is better)\n",
		        a->sockets, b->sockets);
	else if (differs(a->leftover, b->leftover))
		fprintf(f, "decided by: leftover (%.3f vs %.3f, higher is better)\n", a->leftover,
		        b->leftover);
	else if (a->whole_nodes_taken != b->whole_nodes_taken)
		fprintf(f,
		        "decided by: whole NUMA nodes taken (%u vs %u, fewer is better: keeps "
		        "nodes "
		        "whole for larger jobs)\n",
		        a->whole_nodes_taken, b->whole_nodes_taken);
	else if (differs(a->release, b->release))
		fprintf(f, "decided by: release value (%.3f vs %.3f, higher is better)\n",
		        a->release, b->release);
	else if (differs(a->total_bandwidth, b->total_bandwidth))
		fprintf(f,
		        "decided by: total pairwise bandwidth (%.1f vs %.1f GB/s, higher is "
		        "better)\n",
		        a->total_bandwidth, b->total_bandwidth);
	else if (differs(a->load, b->load))
		fprintf(f, "decided by: load (%.3f vs %.3f, lower is better)\n", a->load, b->load);
	else
		fputs("decided by: tie on every component; lowest index wins\n", f);
}

static void explain(const struct gpuctl_snapshot *snap, const struct gpuctl_selection *sel)
{
	struct gpuctl_select_score chosen = GPUCTL_SELECT_SCORE_INIT,
	                           runner = GPUCTL_SELECT_SCORE_INIT;
	const struct gpuctl_devset *ru = gpuctl_selection_runner_up(sel);
	FILE *f = stderr;

	fputs("chosen: ", f);
	explain_set(snap, gpuctl_selection_devices(sel), f);
	fputc('\n', f);
	bool have_chosen = gpuctl_selection_score(sel, false, &chosen) >= 0;
	if (have_chosen)
		explain_score(&chosen, f);
	if (!ru || gpuctl_selection_score(sel, true, &runner) < 0) {
		fputs("runner-up: none (no other set qualifies)\n", f);
		return;
	}
	fputs("runner-up: ", f);
	explain_set(snap, ru, f);
	fputc('\n', f);
	explain_score(&runner, f);
	if (have_chosen)
		explain_decider(&chosen, &runner, f);
}

/* What `select` prints, however it chose. */
struct select_output {
	enum gpuctl_render form;
	unsigned render_flags;
	bool explain;
};

/* Chooses (and with mode GPUCTL_ALLOC_LEASE leases), renders the device string into *ret_text
 * and prints --explain to stderr. With a lease, *ret_alloc holds it (caller frees). Returns 0
 * or the exit status (error printed). */
static int choose(struct cli *cli, struct select_args *o, enum gpuctl_alloc_mode mode,
                  const struct select_output *out, char **ret_text, struct gpuctl_alloc **ret_alloc)
{
	struct gpuctl_alloc *alloc = NULL;
	int status, r;

	status = filters_alloc(cli, &cmd_select_entry, o, mode,
	                       mode == GPUCTL_ALLOC_LEASE ? "gpuctl select --hold" : NULL, &alloc);
	if (status)
		return status;
	const struct gpuctl_snapshot *snap = gpuctl_alloc_snapshot(alloc);
	const struct gpuctl_selection *sel = gpuctl_alloc_selection(alloc);
	/* a CUDA form is one process's devices: never more MIG devices than CUDA uses */
	if ((out->form == GPUCTL_RENDER_CUDA || out->form == GPUCTL_RENDER_ENV) &&
	    gpuctl_devset_cuda_check(cli->ctx, snap, gpuctl_alloc_devices(alloc)) < 0) {
		cli_error("select: %s; use gpuctl run --each, or a container --format",
		          gpuctl_errmsg(cli->ctx));
		gpuctl_alloc_free(alloc);
		return CLI_EXIT_USAGE;
	}
	r = gpuctl_devstr_render(cli->ctx, snap, gpuctl_alloc_devices(alloc), out->form,
	                         out->render_flags, ret_text);
	if (r < 0) {
		const char *msg = gpuctl_errmsg(cli->ctx);
		cli_error("select: cannot render the device string: %s",
		          msg && msg[0] ? msg : strerror(-r));
		status = CLI_EXIT_FAILURE;
	} else if (out->explain && mode == GPUCTL_ALLOC_LEASE) {
		/* The holder explains before it reports (its stderr then goes to /dev/null). */
		explain(snap, sel);
	} else if (out->explain) {
		/* The result first, then the reasons: flush so a terminal shows them in order. */
		fputs(*ret_text, stdout);
		fflush(stdout);
		explain(snap, sel);
		free(*ret_text);
		*ret_text = NULL;
	}
	if (status == 0 && ret_alloc)
		*ret_alloc = alloc;
	else
		gpuctl_alloc_free(alloc);
	return status;
}

static void write_full(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		len -= (size_t)w;
	}
}

/* The holder (its own session): selects and leases itself, so the lock is its own (and
 * /proc/locks names it), reports the status and device string through report_fd, then keeps
 * the lease until seconds have passed or SIGTERM/SIGINT comes. Never returns. */
__attribute__((noreturn)) static void holder_main(struct cli *cli, struct select_args *o,
                                                  const struct select_output *out,
                                                  unsigned long seconds, int report_fd)
{
	struct gpuctl_alloc *alloc = NULL;
	char *text = NULL;
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	struct sigaction ign = {.sa_handler = SIG_IGN};
	sigemptyset(&ign.sa_mask);
	sigaction(SIGHUP, &ign, NULL);
	o->wait_hangup_fd = report_fd; /* --wait: stop when the select that started us is gone */
	/* a hung NVML call ends us with exit 7: the select waiting for our word hears it */
	cli_watchdog_report_fd(report_fd);
	int status = choose(cli, o, GPUCTL_ALLOC_LEASE, out, &text, &alloc);
	cli_watchdog_report_fd(-1);
	unsigned char st = (unsigned char)status;
	fflush(NULL);
	write_full(report_fd, (const char *)&st, 1);
	if (status == 0 && text)
		write_full(report_fd, text, strlen(text));
	close(report_fd);
	free(text);
	if (status)
		_exit(status);
	/* Let go of the caller's stdout and stderr first: a select --hold in $(...) or a pipe
	 * returns when they close, which must not wait for nvmlShutdown below. */
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (devnull >= 0) {
		(void)dup2(devnull, STDIN_FILENO);
		(void)dup2(devnull, STDOUT_FILENO);
		(void)dup2(devnull, STDERR_FILENO);
		if (devnull > STDERR_FILENO)
			close(devnull);
	}
	/* Hold only the locks: release NVML (its device files on a real machine) for the hours a
	 * hold may last. The allocation holds no reference to the context. The lease is granted
	 * and reported: from here no NVML bound ends the hold (watchdog.h). */
	cli_watchdog_stop();
	gpuctl_ctx_free(cli->ctx);
	cli->ctx = NULL;

	if (chdir("/") < 0) {
		/* Nothing to do: the holder does not use its working directory. */
	}
	/* until the hold ends, or SIGTERM or SIGINT (gpuctl release) */
	(void)cli_wait_until(cli_now(CLOCK_MONOTONIC) + (double)seconds, &set);
	gpuctl_alloc_free(alloc);
	_exit(0);
}

/* select --hold: starts the holder (double fork, setsid) and prints what it reports once it
 * holds the lease and has written its record. Returns the exit status. */
static int hold(struct cli *cli, struct select_args *o, const struct select_output *out,
                unsigned long seconds)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		cli_error("select: --hold: pipe: %s", strerror(errno));
		return CLI_EXIT_FAILURE;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		cli_error("select: --hold: fork: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		return CLI_EXIT_FAILURE;
	}
	if (pid == 0) {
		close(p[0]);
		if (setsid() < 0)
			_exit(CLI_EXIT_FAILURE);
		pid_t h = fork();
		if (h < 0)
			_exit(CLI_EXIT_FAILURE);
		if (h == 0)
			holder_main(cli, o, out, seconds, p[1]);
		_exit(0);
	}
	close(p[1]);
	int wstatus = 0;
	while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR)
		;
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int status = 0;
	for (;;) {
		if (len + 4096 + 1 > cap) {
			size_t ncap = cap ? 2 * cap : 8192;
			char *nb = realloc(buf, ncap);
			if (!nb) {
				status = -ENOMEM;
				break;
			}
			buf = nb;
			cap = ncap;
		}
		ssize_t got = read(p[0], buf + len, cap - len - 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		len += (size_t)got;
	}
	close(p[0]);
	if (status < 0) {
		cli_error("select: out of memory");
		status = CLI_EXIT_FAILURE;
	} else if (len == 0) {
		cli_error("select: --hold: the holder process ended before it held the lease");
		status = CLI_EXIT_FAILURE;
	} else {
		status = (unsigned char)buf[0];
		buf[len] = '\0';
		if (status == 0)
			fputs(buf + 1, stdout);
	}
	free(buf);
	return status;
}

/* ---- the command ---- */

/* What the command line asks for (filters.h's struct select_args is the part run shares). */
struct select_cmd_args {
	struct select_args sel;   /* -n, the filters, the lease options */
	struct select_output out; /* --format, --ids, --explain */
	unsigned long hold_s;     /* --hold, 0: no lease */
};

/* The options into a: CMD_GO_ON, or the exit status to return now (--help, a usage error). */
static int parse_options(struct select_cmd_args *a, int argc, char **argv)
{
	int opt, status, r;

	while ((opt = cmd_getopt(&cmd_select_entry, argc, argv)) != -1) {
		status = filters_option(&cmd_select_entry, &a->sel, opt, optarg);
		if (status >= 0) {
			if (status)
				return status;
			continue;
		}
		switch (opt) {
		case CMD_OPT_FORMAT:
			r = gpuctl_render_lookup(optarg);
			if (r < 0)
				return cmd_usage_error(&cmd_select_entry,
				                       "--format: unknown format '%s' (cuda, env, "
				                       "docker, nvidia, cdi, k8s or json)",
				                       optarg);
			a->out.form = (enum gpuctl_render)r;
			break;
		case OPT_IDS:
			if (strcmp(optarg, "index") == 0)
				a->out.render_flags = GPUCTL_RENDER_INDICES;
			else if (strcmp(optarg, "uuid") == 0)
				a->out.render_flags = 0;
			else
				return cmd_usage_error(
				        &cmd_select_entry,
				        "--ids: unknown id form '%s' (uuid or index)", optarg);
			break;
		case OPT_EXPLAIN:
			a->out.explain = true;
			break;
		case OPT_HOLD:
			if (parse_uint(optarg, 1, SELECT_HOLD_MAX_S, &a->hold_s) < 0)
				return cmd_usage_error(&cmd_select_entry,
				                       "--hold: '%s' is not a number of seconds "
				                       "(1 to %lu)",
				                       optarg, SELECT_HOLD_MAX_S);
			a->sel.req.lease_length_s = a->hold_s; /* the quotas judge it */
			break;
		case 'h':
			cmd_usage(&cmd_select_entry, stdout);
			return CLI_EXIT_OK;
		default:
			return cmd_bad_option(&cmd_select_entry, opt, argv);
		}
	}
	return CMD_GO_ON;
}

/* The operands (none) and the options together; 0 or CLI_EXIT_USAGE. */
static int check_args(struct select_cmd_args *a, int argc, char **argv)
{
	int status;

	if (optind < argc)
		return cmd_usage_error(&cmd_select_entry, "unexpected argument '%s'", argv[optind]);
	status = filters_check(&cmd_select_entry, &a->sel);
	if (status)
		return status;
	if (a->sel.req.wait && !a->hold_s)
		return cmd_usage_error(&cmd_select_entry,
		                       "--wait needs --hold (a plain select takes no lease)");
	/* CUDA reaches MIG devices only by UUID: indices in a CUDA form cannot name them */
	if (a->sel.req.mig_profile && (a->out.render_flags & GPUCTL_RENDER_INDICES) &&
	    (a->out.form == GPUCTL_RENDER_CUDA || a->out.form == GPUCTL_RENDER_ENV))
		return cmd_usage_error(
		        &cmd_select_entry,
		        "--mig with --ids index: CUDA names MIG devices only by UUID "
		        "(use --ids uuid, or --format nvidia)");
	return 0;
}

/* A plain select: chooses without a lease and prints the device string; the exit status. */
static int choose_and_print(struct cli *cli, struct select_cmd_args *a)
{
	_cleanup_free_ char *text = NULL;
	int status;

	status = choose(cli, &a->sel, GPUCTL_ALLOC_CHOOSE, &a->out, &text, NULL);
	if (status == 0 && text)
		fputs(text, stdout);
	return status;
}

static int cmd_select_exec(struct cli *cli, int argc, char **argv)
{
	struct select_cmd_args a = {.sel = SELECT_ARGS_INIT, .out = {.form = GPUCTL_RENDER_CUDA}};
	int status;

	status = parse_options(&a, argc, argv);
	if (status == CMD_GO_ON) {
		status = check_args(&a, argc, argv);
		if (!status)
			status = a.hold_s ? hold(cli, &a.sel, &a.out, a.hold_s)
			                  : choose_and_print(cli, &a);
	}
	filters_free(&a.sel);
	return status;
}

const struct cmd_entry cmd_select_entry = {
        .name = "select",
        .long_options = select_options,
        .short_options = "+:n:h",
        .usage = "-n N [FILTERS] [--format FORMAT] [--ids uuid|index] [--explain] [--hold SECONDS "
                 "[--wait[=SECONDS]]]",
        .summary = "choose the best GPUs for a job and print them as a device string",
        .options = FILTER_OPTIONS_HELP
        "  --format FORMAT       cuda (default: CUDA_VISIBLE_DEVICES=...), env (export\n"
        "                        lines), docker (--gpus), nvidia (NVIDIA_VISIBLE_DEVICES=...),\n"
        "                        cdi (nvidia.com/gpu=... names), k8s (resources and env\n"
        "                        snippet) or json (docs/json.md)\n"
        "  --ids FORM            uuid (default) or index: NVML indices, with\n"
        "                        CUDA_DEVICE_ORDER=PCI_BUS_ID where CUDA reads them\n"
        "  --explain             on stderr: the chosen set and the runner-up with their scores\n"
        "                        (ring bandwidth, NUMA nodes, sockets, leftover, whole\n"
        "                        NUMA nodes taken, release, total bandwidth, load) and the\n"
        "                        component that decided between them\n"
        "  --hold SECONDS        lease the chosen devices for SECONDS (1 to a year): a holder\n"
        "                        process keeps them until then or `gpuctl release`; the\n"
        "                        device string is printed once the lease is held\n"
        "  -h, --help            print this help\n"
        "\n"
        "Unless --ignore-outer, the choice is made within the allocation gpuctl runs in\n"
        "(CUDA_VISIBLE_DEVICES with CUDA_DEVICE_ORDER, NVIDIA_VISIBLE_DEVICES, SLURM_STEP_GPUS,\n"
        "SLURM_JOB_GPUS); -v says which variable constrained it. Devices leased in the lease\n"
        "directory are never chosen; without --hold select takes no lease itself.\n",
        .exec = cmd_select_exec,
        .exits = CMD_EXITS_DRIVER | CMD_EXITS_NOMATCH | CMD_EXITS_BUSY | CMD_EXITS_HUNG |
                 CMD_EXITS_QUOTA,
};
