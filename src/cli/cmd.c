// SPDX-License-Identifier: MIT
/*
 * cmd.c: the command table and the helpers every command shares.
 *
 * Decisions:
 * - The table is alphabetical, so `gpuctl --help` lists commands in a stable order and a merge
 *   conflict between two new commands is obvious. Lookup is by exact name: no abbreviations,
 *   which would change meaning whenever a command is added.
 * - Every user-visible error goes through cli_error(), which guarantees the one-line shape
 *   "gpuctl: <what>: <why>" even when a library message contains a newline.
 * - Library failures to load NVML map to exit status 4 (no driver) when the library says
 *   -ENOENT (no library) or -ENODEV (NVML cannot initialise); everything else is 1.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "cmd.h"
#include "parse.h"
#include "sampler.h"
#include "watchdog.h"

/* Where docs/NAME.md are installed (src/cli/CMakeLists.txt: the configured prefix's DOCDIR). */
#ifndef GPUCTL_DOCDIR
#define GPUCTL_DOCDIR "/usr/local/share/doc/gpuctl"
#endif

/* one entry a line, so that a new command is one line */
/* clang-format off */
const struct cmd_entry *const cmd_table[] = {
        &cmd_agent_entry,
        &cmd_exporter_entry,
        &cmd_health_entry,
        &cmd_help_entry,
        &cmd_info_entry,
        &cmd_lease_entry,
        &cmd_list_entry,
        &cmd_ps_entry,
        &cmd_quota_entry,
        &cmd_release_entry,
        &cmd_report_entry,
        &cmd_run_entry,
        &cmd_select_entry,
        &cmd_slurm_entry,
        &cmd_top_entry,
        &cmd_topo_entry,
        &cmd_watch_entry,
        NULL,
};
/* clang-format on */

/* Exit statuses (docs/gpuctl.1, EXIT STATUS); a command's --help lists those it can end with. */
static void print_exits(FILE *f, unsigned exits)
{
	fputs("Exit status:\n"
	      "  0  success\n"
	      "  1  failure while running (NVML error, I/O error)\n"
	      "  2  usage error (bad option or argument, unknown field, unknown GPU id or pool,\n"
	      "     a configuration file that does not parse)\n",
	      f);
	if (exits & CMD_EXITS_NOMATCH)
		fputs("  3  no GPU satisfies the request\n", f);
	if (exits & CMD_EXITS_DRIVER)
		fputs("  4  no NVIDIA driver (NVML library not found or NVML cannot initialise)\n",
		      f);
	if (exits & CMD_EXITS_RETRY)
		fputs("  5  run --retry gave up: a GPU failed again and no failover was left\n", f);
	if (exits & CMD_EXITS_BUSY)
		fputs("  6  the lease directory's select.lock was held too long by another "
		      "process\n"
		      "     (the line names it; GPUCTL_LOCK_WAIT, default 10 s)\n",
		      f);
	if (exits & CMD_EXITS_HUNG)
		fputs("  7  an NVML call did not answer within GPUCTL_NVML_TIMEOUT (default 30 s;\n"
		      "     the line names the call and the GPU)\n",
		      f);
	if (exits & CMD_EXITS_LEDGER)
		fputs("  8  report: no ledger at the path (no agent has written one yet)\n", f);
	if (exits & CMD_EXITS_QUOTA)
		fputs("  9  over a quota of the pool (GPUs at once, lease length, GPU-hours; the\n"
		      "     line names it, what is used and when it frees)\n",
		      f);
	if (exits & CMD_EXITS_CONFINE)
		fputs("  11 run: a pool of the job says enforce = cgroup and the node agent did "
		      "not\n"
		      "     confine the job (the line says why); the command never started\n",
		      f);
	if (exits & CMD_EXITS_HEALTH)
		fputs("  10 health: some GPU is WARN, none FAIL\n"
		      "  20 health: some GPU is FAIL\n",
		      f);
	if (exits & CMD_EXITS_JOB)
		fputs("  once the command has started: its own status (128+N when killed by signal "
		      "N)\n",
		      f);
}

const struct cmd_entry *cmd_find(const char *name)
{
	for (size_t i = 0; cmd_table[i]; i++)
		if (strcmp(cmd_table[i]->name, name) == 0)
			return cmd_table[i];
	return NULL;
}

void cli_usage(FILE *f)
{
	fputs("Usage: gpuctl [-v|--verbose] [--config FILE] [--color WHEN] [--version] "
	      "[-h|--help]\n"
	      "              [COMMAND [ARGS]]\n"
	      "\n"
	      "Without a command, gpuctl runs 'gpuctl list' (as nvidia-smi shows the GPUs).\n"
	      "\n"
	      "Commands:\n",
	      f);
	int width = 0;
	for (size_t i = 0; cmd_table[i]; i++)
		if ((int)strlen(cmd_table[i]->name) > width)
			width = (int)strlen(cmd_table[i]->name);
	for (size_t i = 0; cmd_table[i]; i++)
		fprintf(f, "  %-*s  %s\n", width, cmd_table[i]->name, cmd_table[i]->summary);
	fputs("\n"
	      "Global options:\n"
	      "  -v, --verbose  print the library's debug messages to stderr\n"
	      "  --config FILE  the configuration file (default $GPUCTL_CONFIG, else\n"
	      "                 /etc/gpuctl/gpuctl.conf; docs/config.md)\n"
	      "  --color WHEN   colour the tables: auto (default: on a terminal, unless\n"
	      "                 NO_COLOR is set), always or never; JSON and CSV never\n"
	      "  --version      print the version and exit\n"
	      "  -h, --help     print this help and exit\n"
	      "\n"
	      "Environment:\n"
	      "  GPUCTL_NVML_LIBRARY  the NVML library to load instead of libnvidia-ml.so.1\n"
	      "  GPUCTL_LEASE_DIR     the lease directory (default: the configuration's "
	      "lease_dir,\n"
	      "                       else /run/gpuctl; docs/leases.md)\n"
	      "  GPUCTL_CONFIG        the configuration file (default /etc/gpuctl/gpuctl.conf;\n"
	      "                       /dev/null: none)\n"
	      "  GPUCTL_KMSG          the kernel log health reads XIDs from (default /dev/kmsg)\n"
	      "  GPUCTL_LEDGER        the ledger report reads (default: the configuration's\n"
	      "                       ledger, else /var/lib/gpuctl/ledger.db; docs/ledger.md)\n"
	      "  GPUCTL_HEALTH_STATE  health's state file (default: the lease directory's path\n"
	      "                       followed by -health.state, /run/gpuctl-health.state)\n"
	      "  GPUCTL_EXPORTER_TIMEOUT  exporter: idle timeout of a connection, s (default 10)\n"
	      "  GPUCTL_SYSFS         the sysfs slurm gres reads the CPU topology from (default "
	      "/sys)\n"
	      "  GPUCTL_FACTS_CACHE   the file of what GPUs cannot change until a reboot (default\n"
	      "                       $XDG_RUNTIME_DIR/gpuctl-facts; off: none)\n"
	      "  GPUCTL_NVIDIA_PROC   the driver's /proc a lost GPU's bus id and the agent's\n"
	      "                       device minors are read from (default /proc/driver/nvidia)\n"
	      "  GPUCTL_NVIDIA_CAPS_PROC  the directory of the driver's mig-minors (default\n"
	      "                       /proc/driver/nvidia-caps)\n"
	      "  GPUCTL_PROC_DEVICES  the kernel's device majors (default /proc/devices)\n"
	      "  GPUCTL_CPUINFO       the cpuinfo the bandwidth model reads the CPU from (default\n"
	      "                       /proc/cpuinfo; docs/topology.md)\n"
	      "  GPUCTL_LOCK_WAIT     seconds a command waits for select.lock before exit 6\n"
	      "                       (default 10; docs/leases.md)\n"
	      "  GPUCTL_NVML_TIMEOUT  seconds a one-shot command waits for one NVML call before\n"
	      "                       exit 7 (default 30; 0 or off: no bound)\n"
	      "  GPUCTL_SYSTEM_LEASE_DIR  the system lease directory a personal one respects\n"
	      "                       (default: the configuration's lease_dir, else /run/gpuctl)\n"
	      "  GPUCTL_WORKLOAD_ROOT the root the container runtimes' state is read under to "
	      "name\n"
	      "                       a workload (default /; a test and chroot hook;\n"
	      "                       docs/workloads.md)\n"
	      "  GPUCTL_UTMP          agent: the utmp file violation_action = notify reads the\n"
	      "                       user's terminals from (default the system's; for tests)\n"
	      "  NO_COLOR             not empty: no colour unless --color=always (no-color.org)\n"
	      "  CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, SLURM_STEP_GPUS, SLURM_JOB_GPUS\n"
	      "                       the allocation gpuctl runs in: select and run choose within\n"
	      "                       it (docs/device-strings.md, docs/slurm.md)\n"
	      "\n",
	      f);
	print_exits(f, CMD_EXITS_DRIVER | CMD_EXITS_NOMATCH | CMD_EXITS_RETRY | CMD_EXITS_BUSY |
	                       CMD_EXITS_HUNG | CMD_EXITS_LEDGER | CMD_EXITS_QUOTA |
	                       CMD_EXITS_CONFINE | CMD_EXITS_HEALTH | CMD_EXITS_JOB);
	fputs("\nRun 'gpuctl help COMMAND' or 'gpuctl COMMAND --help' for a command's options.\n"
	      "The documents named docs/NAME.md are installed in " GPUCTL_DOCDIR "/,\n"
	      "with an example configuration file, " GPUCTL_DOCDIR "/examples/gpuctl.conf.\n",
	      f);
}

void cmd_usage(const struct cmd_entry *entry, FILE *f)
{
	fprintf(f, "Usage: gpuctl %s%s%s\n\n%s\n\n", entry->name, entry->usage[0] ? " " : "",
	        entry->usage, entry->summary);
	if (entry->options && entry->options[0])
		fprintf(f, "Options:\n%s%s\n", entry->options, entry->notes ? entry->notes : "");
	print_exits(f, entry->exits);
}

__attribute__((format(printf, 1, 0))) static void verror(const char *fmt, va_list ap)
{
	char buf[2048];
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	if (n < 0) {
		fputs("gpuctl: error (message could not be formatted)\n", stderr);
		return;
	}
	/* One line, always: a library message may carry a newline or a tab. */
	for (char *p = buf; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	fprintf(stderr, "gpuctl: %s\n", buf);
}

void cli_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	verror(fmt, ap);
	va_end(ap);
}

int cmd_usage_error(const struct cmd_entry *entry, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		buf[0] = '\0';
	cli_error("%s: %s (see 'gpuctl %s --help')", entry->name, buf, entry->name);
	return CLI_EXIT_USAGE;
}

int cmd_parse_delay(const struct cmd_entry *entry, const char *opt, const char *arg,
                    double *ret_seconds)
{
	if (parse_seconds(arg, CMD_MIN_DELAY, CMD_MAX_DELAY, ret_seconds) < 0)
		return cmd_usage_error(entry, "%s: '%s' is not a number of seconds from %g to %g",
		                       opt, arg, CMD_MIN_DELAY, CMD_MAX_DELAY);
	return 0;
}

int cmd_parse_count(const struct cmd_entry *entry, const char *opt, const char *arg,
                    unsigned long *ret_count)
{
	if (parse_uint(arg, 1, 1000000000, ret_count) < 0)
		return cmd_usage_error(entry, "%s: '%s' is not a count from 1 to 1000000000", opt,
		                       arg);
	return 0;
}

int cmd_parse_idle_window(const struct cmd_entry *entry, const char *arg, uint32_t *ret_seconds)
{
	unsigned long v;
	if (parse_uint(arg, 1, CMD_MAX_IDLE_WINDOW, &v) < 0)
		return cmd_usage_error(
		        entry, "--idle-window: '%s' is not a number of seconds from 1 to %d", arg,
		        CMD_MAX_IDLE_WINDOW);
	*ret_seconds = (uint32_t)v;
	return 0;
}

void cli_bad_option_text(int opt, char **argv, char *buf, size_t size)
{
	/* optind already points past the offending word (or its missing argument). For a long
	 * option getopt_long leaves in optopt the option's internal value, not a character, so
	 * the message quotes the word as typed. */
	const char *word = optind > 0 ? argv[optind - 1] : "?";
	const char *eq = strchr(word, '=');
	int w;

	if (opt == ':')
		w = snprintf(buf, size, "option '%s' needs an argument", word);
	else if (strncmp(word, "--", 2) == 0 && eq && optopt)
		w = snprintf(buf, size, "option '%.*s' takes no value", (int)(eq - word), word);
	else if (strncmp(word, "--", 2) != 0 && optopt > ' ' && optopt < 0x7f)
		w = snprintf(buf, size, "unknown option '-%c'", optopt);
	else
		w = snprintf(buf, size, "unknown option '%s'", word);
	if (w < 0)
		buf[0] = '\0';
}

int cmd_getopt(const struct cmd_entry *entry, int argc, char **argv)
{
	return getopt_long(argc, argv, entry->short_options, entry->long_options, NULL);
}

int cmd_parse_format(const struct cmd_entry *entry, const char *arg, int *ret_index)
{
	char list[128] = "";
	size_t n = 0, used = 0;

	for (; entry->formats[n]; n++)
		if (strcmp(arg, entry->formats[n]) == 0) {
			*ret_index = (int)n;
			return 0;
		}
	/* "text or json", "dmon, csv or jsonl" */
	for (size_t i = 0; i < n && used < sizeof(list); i++) {
		int w = snprintf(list + used, sizeof(list) - used, "%s%s",
		                 i == 0       ? ""
		                 : i + 1 == n ? " or "
		                              : ", ",
		                 entry->formats[i]);
		if (w < 0)
			break;
		used += (size_t)w;
	}
	return cmd_usage_error(entry, "--format: unknown format '%s' (%s)", arg, list);
}

int cmd_bad_option(const struct cmd_entry *entry, int opt, char **argv)
{
	/* getopt_long was called with opterr = 0: the message is ours, one line. */
	char what[512];

	cli_bad_option_text(opt, argv, what, sizeof(what));
	return cmd_usage_error(entry, "%s", what);
}

static void log_hook(void *userdata, enum gpuctl_log_level level, const char *msg)
{
	(void)userdata;
	const char *what = level == GPUCTL_LOG_WARNING ? "warning"
	                   : level == GPUCTL_LOG_INFO  ? "info"
	                                               : "debug";
	fprintf(stderr, "gpuctl: %s: %s\n", what, msg ? msg : "");
}

int cli_driver_error(struct cli *cli, int r)
{
	return cli_driver_error_msg(r, gpuctl_errmsg(cli->ctx));
}

int cli_driver_error_msg(int r, const char *msg)
{
	if (!msg || !msg[0])
		msg = strerror(-r);
	if (r == -ENOENT || r == -ENODEV) {
		const char *prefix = "no NVIDIA driver: ";
		bool has_prefix = strncmp(msg, "no NVIDIA driver", strlen("no NVIDIA driver")) == 0;
		/* Point at the override when the library did not and the user has not used it. */
		bool hint = r == -ENOENT && !strstr(msg, "GPUCTL_NVML_LIBRARY") &&
		            !getenv("GPUCTL_NVML_LIBRARY");
		cli_error("%s%s%s", has_prefix ? "" : prefix, msg,
		          hint ? " (set GPUCTL_NVML_LIBRARY to use another library)" : "");
		return CLI_EXIT_NODRIVER;
	}
	if (r == -EPERM) {
		/* an environment variable naming what cannot be read: the line names it */
		cli_error("%s", msg);
		return CLI_EXIT_FAILURE;
	}
	cli_error("NVML: %s", msg);
	return CLI_EXIT_FAILURE;
}

int cli_snapshot(struct cli *cli, unsigned flags, struct gpuctl_snapshot **ret_snap)
{
	return cli_snapshot_fields(cli, flags, NULL, 0, ret_snap);
}

/* GPUCTL_NVML_TIMEOUT, and the watchdog of a one-shot command: 0 or the exit status. */
static int nvml_watchdog(struct cli *cli)
{
	const char *v = getenv("GPUCTL_NVML_TIMEOUT");
	double secs = CLI_NVML_TIMEOUT_DEFAULT;
	int r;

	if (v && v[0] && parse_timeout(v, CLI_NVML_TIMEOUT_MAX, &secs) < 0) {
		cli_error("GPUCTL_NVML_TIMEOUT: '%s' is not a number of seconds (0 to %g, or off)",
		          v, CLI_NVML_TIMEOUT_MAX);
		return CLI_EXIT_USAGE;
	}
	if (!cli->oneshot || secs == 0)
		return 0;
	r = cli_watchdog_start(cli->ctx, secs);
	/* without a thread the command still works, only unbounded, as before the bound */
	if (r < 0 && cli->verbose)
		cli_error("debug: no NVML watchdog (GPUCTL_NVML_TIMEOUT): %s", strerror(-r));
	return 0;
}

int cli_context_new(const struct cli *cli, struct gpuctl_ctx **ret_ctx)
{
	struct gpuctl_ctx *ctx = NULL;
	int r = gpuctl_ctx_new(&ctx);

	if (r < 0) {
		cli_error("cannot create context: %s", strerror(-r));
		return CLI_EXIT_FAILURE;
	}
	if (cli->verbose)
		gpuctl_ctx_set_log(ctx, log_hook, NULL);
	const char *lw = getenv("GPUCTL_LOCK_WAIT");
	double secs;
	if (lw && lw[0]) {
		if (parse_seconds(lw, 0, 3600, &secs) < 0) {
			cli_error("GPUCTL_LOCK_WAIT: '%s' is not a number of seconds (0 to 3600)",
			          lw);
			gpuctl_ctx_free(ctx);
			return CLI_EXIT_USAGE;
		}
		(void)gpuctl_ctx_set_lock_wait(ctx, secs);
	}
	*ret_ctx = ctx;
	return 0;
}

int cli_context(struct cli *cli)
{
	int status;

	if (cli->ctx)
		return 0;
	status = cli_context_new(cli, &cli->ctx);
	return status ? status : nvml_watchdog(cli);
}

int cli_site(struct cli *cli, const struct cmd_entry *entry, const char *lease_dir, unsigned flags)
{
	int r = cli_context(cli);

	if (r)
		return r;
	if (cli->site)
		return 0;
	r = gpuctl_site_open(cli->ctx, cli->config_path, lease_dir, flags, &cli->site);
	if (r < 0) {
		const char *msg = gpuctl_errmsg(cli->ctx);
		cli_error("%s: %s", entry->name, msg && msg[0] ? msg : strerror(-r));
		return r == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
	}
	/* the lease directory the command settled on: its notices, when main.c's was another */
	if (gpuctl_site_lease_dir_path(cli->site))
		cli_notices_show(gpuctl_site_lease_dir_path(cli->site));
	return 0;
}

int cli_ledger_path(struct cli *cli, const struct cmd_entry *entry, const char *given,
                    const char **ret)
{
	const char *env = getenv("GPUCTL_LEDGER");
	const struct gpuctl_config_settings *st;
	int status;

	if (given) {
		*ret = given;
		return 0;
	}
	if (env) {
		if (!env[0]) {
			cli_error("GPUCTL_LEDGER: empty path");
			return CLI_EXIT_USAGE;
		}
		*ret = env;
		return 0;
	}
	if ((status = cli_site(cli, entry, NULL, GPUCTL_SITE_NO_LEASES)))
		return status;
	st = gpuctl_config_settings(gpuctl_site_config(cli->site));
	*ret = st->ledger ? st->ledger : GPUCTL_LEDGER_PATH;
	return 0;
}

int cli_snapshot_fields(struct cli *cli, unsigned flags, const enum gpuctl_field *fields,
                        size_t n_fields, struct gpuctl_snapshot **ret_snap)
{
	int r = cli_context(cli);
	if (r)
		return r;
	r = gpuctl_snapshot_take_fields(cli->ctx, flags, fields, n_fields, ret_snap);
	if (r < 0)
		return cli_driver_error(cli, r);
	return 0;
}

int cli_select_gpus(struct cli *cli, const struct gpuctl_snapshot *snap, const char *ids,
                    size_t **ret_indices, size_t *ret_count)
{
	if (ids) {
		int r = gpuctl_ids_resolve(cli->ctx, snap, ids, ret_indices, ret_count);
		if (r == -EINVAL) {
			const char *msg = gpuctl_errmsg(cli->ctx);
			if (msg && msg[0])
				cli_error("--id: %s", msg);
			else
				cli_error("--id: invalid GPU id list '%s'", ids);
			return CLI_EXIT_USAGE;
		}
		if (r < 0) {
			cli_error("--id: '%s': %s", ids, strerror(-r));
			return CLI_EXIT_FAILURE;
		}
		return 0;
	}
	size_t n = gpuctl_snapshot_gpu_count(snap);
	size_t *v = calloc(n ? n : 1, sizeof(*v));
	if (!v) {
		cli_error("out of memory");
		return CLI_EXIT_FAILURE;
	}
	for (size_t i = 0; i < n; i++)
		v[i] = i;
	*ret_indices = v;
	*ret_count = n;
	return 0;
}

int cli_finish_output(int status)
{
	if (fflush(stdout) != 0 || ferror(stdout)) {
		cli_error("stdout: write error: %s", strerror(errno));
		return status ? status : CLI_EXIT_FAILURE;
	}
	return status;
}

double cli_now(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int cli_wait_until(double until, const sigset_t *stop)
{
	for (;;) {
		double wait = until - cli_now(CLOCK_MONOTONIC);
		time_t whole = (time_t)wait;
		struct timespec ts = {.tv_sec = whole,
		                      .tv_nsec = (long)((wait - (double)whole) * 1e9)};
		int sig;

		if (wait <= 0)
			return 0;
		sig = sigtimedwait(stop, NULL, &ts);
		if (sig > 0)
			return sig;
	}
}

int cli_wait_fds(struct pollfd *fds, size_t n, double until, const sigset_t *stop)
{
	struct pollfd all[CLI_WAIT_MAX_FDS + 1];
	struct signalfd_siginfo si;
	int sfd = signalfd(-1, stop, SFD_NONBLOCK | SFD_CLOEXEC), sig = 0;

	if (n > CLI_WAIT_MAX_FDS)
		n = CLI_WAIT_MAX_FDS;
	for (;;) {
		double left = until - cli_now(CLOCK_MONOTONIC);
		int ms = isinf(until) ? -1
		         : left <= 0  ? 0
		         : left > 1e6 ? 1000000000
		                      : (int)(left * 1000) + 1;
		int k;

		for (size_t i = 0; i < n; i++) {
			fds[i].revents = 0;
			all[i] = fds[i];
		}
		all[n] = (struct pollfd){.fd = sfd, .events = POLLIN};
		k = poll(all, n + 1, ms);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) /* the time came (or poll failed: nothing to wait on) */
			break;
		for (size_t i = 0; i < n; i++)
			fds[i].revents = all[i].revents;
		if (all[n].revents && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			sig = (int)si.ssi_signo;
		break;
	}
	if (sfd >= 0)
		close(sfd);
	return sig;
}

int cli_first_sample(struct sampler *s, const char *who, const sigset_t *stop,
                     const struct sampler_sample **ret_sample)
{
	bool said = false;

	for (;;) {
		struct pollfd p = {.fd = sampler_fd(s), .events = POLLIN};
		const struct sampler_sample *m;
		double now = cli_now(CLOCK_MONOTONIC);
		int sig;

		if (!said && sampler_overdue(s, now)) {
			cli_error("%s: NVML not answering for %.0f s", who,
			          sampler_silence(s, now));
			said = true;
		}
		sig = cli_wait_fds(&p, 1, said ? INFINITY : sampler_overdue_at(s), stop);
		if (sig)
			return sig;
		m = sampler_latest(s);
		if (m) {
			*ret_sample = m;
			return 0;
		}
	}
}

_Noreturn void cli_exit_now(int status)
{
	status = cli_finish_output(status);
	fflush(stderr);
	_exit(status);
}

double cli_next_tick(double tick, double interval)
{
	double now = cli_now(CLOCK_MONOTONIC);

	tick += interval;
	return tick < now ? now + interval : tick;
}

int cli_color_option(struct cli *cli, const struct cmd_entry *entry, const char *when)
{
	if (cli_color_parse(when, &cli->color) < 0)
		return cmd_usage_error(entry, "--color: unknown value '%s' (auto, always or never)",
		                       when);
	return 0;
}
