// SPDX-License-Identifier: MIT
/*
 * cmd-top.c: `gpuctl top`, the live full-screen view of a shared GPU server: each GPU's load,
 * history, health and holder; the compute processes; the wait queue. This file has the
 * options, the sampler and signals, and the plain-text frames; the ncurses screen is
 * top-screen.c (its keys top-keys.c), the model top-model.c, the lines top-view.c.
 *
 * Decisions:
 * - --once and --batch print the same lines as plain text (no terminal needed): for scripts
 *   and tests.
 * - NVML is read by the sampler's thread (sampler.h, top_take): the screen and --batch wait in
 *   poll() on the sampler's descriptor, so keys, resizes and signals never wait for a driver
 *   call. A sample overdue (none for two intervals) leaves the last values, marked as such
 *   (top-screen.c dims them on screen); --batch prints a frame saying so every interval.
 * - With -v, --batch also says on stderr, after each frame, how many files the workload cache
 *   has read in all (gpuctl_workloads_files_read): a refresh of the same processes adds none
 *   (issue 26; tests/cli/test_workloads.py and the benchmark read it).
 * - SIGINT, SIGTERM and SIGHUP end either loop with exit 0, as `q` does. A sample still hung
 *   in NVML then is not waited for (cli_exit_now). An NVML failure is a line on the screen
 *   and another try at the next interval, not an exit.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hostproc.h"
#include "parse.h"
#include "top-screen.h"

enum {
	OPT_ONCE = 0x100,
	OPT_LEASE_DIR,
	OPT_WORKLOAD,
	OPT_IDLE_WINDOW,
};

/* ---- plain text ---- */

static void print_line(const struct top_line *l)
{
	int end = l->width;
	while (end > 0 && l->cells[end - 1].ch == ' ')
		end--;
	for (int i = 0; i < end; i++)
		putchar(l->cells[i].ch);
	putchar('\n');
}

/* The width of a plain-text frame: $COLUMNS, else 120. */
static int text_width(void)
{
	const char *c = getenv("COLUMNS");
	unsigned long w;
	if (c && parse_uint(c, 40, 1000, &w) == 0)
		return (int)w;
	return 120;
}

static int print_frame(const struct top_model *m, struct top_view *v)
{
	struct top_line l;
	int r = top_line_init(&l, text_width());

	if (r < 0)
		return r;
	top_title(&l, m, v, NULL);
	print_line(&l);
	if (top_stale_line(&l, m))
		print_line(&l);
	if (m->error[0]) {
		top_line_clear(&l);
		top_put(&l, TOP_A_FAIL, m->error);
		print_line(&l);
	}
	top_gpu_head(&l);
	print_line(&l);
	for (size_t k = 0; k < m->n_shown; k++)
		for (int part = 0; part < 2; part++) {
			top_gpu_line(&l, m, m->shown[k], part);
			print_line(&l);
		}
	putchar('\n');
	top_proc_head(&l, v);
	print_line(&l);
	for (size_t i = 0; i < v->n_order; i++) {
		top_proc_line(&l, m, &m->procs[v->order[i]]);
		print_line(&l);
	}
	putchar('\n');
	top_queue_head(&l, m);
	print_line(&l);
	for (size_t i = 0; i < top_queue_count(m); i++) {
		top_queue_line(&l, m, i);
		print_line(&l);
	}
	top_line_free(&l);
	if (m->cli->verbose && m->wls)
		fprintf(stderr,
		        "gpuctl: top: refresh %lu: workload files read in all: %" PRIu64 "\n",
		        m->refreshes, gpuctl_workloads_files_read(m->wls));
	return fflush(stdout) == 0 ? 0 : -EIO;
}

/* m->stale_s for the frame drawn at now. */
void top_mark_stale(struct top_model *m, struct sampler *smp, double now)
{
	m->stale_s = sampler_overdue(smp, now) ? sampler_silence(smp, now) : 0;
}

/* The sample after seq, when one came (a reference), else NULL. */
const struct sampler_sample *top_new_sample(struct sampler *smp, uint64_t seq)
{
	const struct sampler_sample *x = sampler_latest(smp);

	if (x && x->seq > seq)
		return x;
	sampler_put(x);
	return NULL;
}

/* --once / --batch: count frames (0: until a signal), one per sample, or one per interval
 * with the overdue mark while none comes. The signals of stop are blocked. */
static int run_batch(struct top_model *m, struct top_view *v, struct sampler *smp,
                     unsigned long count, const sigset_t *stop)
{
	uint64_t seq = m->sample->seq;
	double again = 0; /* while overdue: the next frame's time */
	int status = CLI_EXIT_OK;

	for (unsigned long k = 0; count == 0 || k < count; k++) {
		if (k > 0) {
			for (;;) {
				struct pollfd p = {.fd = sampler_fd(smp), .events = POLLIN};
				double until = m->stale_s > 0 ? again : sampler_overdue_at(smp);
				const struct sampler_sample *x;

				if (cli_wait_fds(&p, 1, until, stop))
					goto out;
				if ((x = top_new_sample(smp, seq))) {
					seq = x->seq;
					(void)top_model_update(m,
					                       x); /* a failure: the error line */
					sampler_put(x);
					m->stale_s = 0;
					break;
				}
				if (sampler_overdue(smp, cli_now(CLOCK_MONOTONIC)))
					break;
			}
			top_mark_stale(m, smp, cli_now(CLOCK_MONOTONIC));
			again = cli_now(CLOCK_MONOTONIC) + v->delay;
			if (k + 1 < count || count == 0)
				putchar('\n');
		}
		if (top_view_sort(v, m) < 0 || print_frame(m, v) < 0) {
			status = CLI_EXIT_FAILURE;
			break;
		}
	}
out:
	return cli_finish_output(status);
}

/* ---- the command ---- */

static const struct option top_options[] = {
        CMD_OPTIONS_IDS,
        {"delay", required_argument, NULL, 'd'},
        {"iterations", required_argument, NULL, 'n'},
        {"batch", no_argument, NULL, 'b'},
        {"once", no_argument, NULL, OPT_ONCE},
        {"lease-dir", required_argument, NULL, OPT_LEASE_DIR},
        {"workload", required_argument, NULL, OPT_WORKLOAD},
        {"idle-window", required_argument, NULL, OPT_IDLE_WINDOW},
        CMD_OPTION_COLOR,
        CMD_OPTION_HELP,
        {NULL, 0, NULL, 0},
};

struct top_args {
	const char *ids;           /* -i: the GPUs shown, NULL: every GPU */
	double delay;              /* -d: seconds between refreshes */
	unsigned long count;       /* -n: frames to show (--once: 1), 0: until q or a signal */
	bool batch;                /* --batch, --once: plain text, no screen */
	const char *lease_dir;     /* --lease-dir, NULL: the site's */
	struct wl_filter workload; /* --workload: the processes listed */
	uint32_t idle_window;      /* --idle-window: seconds (docs/idle.md), 0 the default */
};

/* The options into a: CMD_GO_ON, or the exit status to return now (--help, a usage error). */
static int parse_options(struct cli *cli, int argc, char **argv, struct top_args *a)
{
	int opt, status;

	while ((opt = cmd_getopt(&cmd_top_entry, argc, argv)) != -1) {
		switch (opt) {
		case 'i':
			a->ids = optarg;
			break;
		case 'd':
			if ((status = cmd_parse_delay(&cmd_top_entry, "-d", optarg, &a->delay)))
				return status;
			break;
		case 'n':
			if ((status = cmd_parse_count(&cmd_top_entry, "-n", optarg, &a->count)))
				return status;
			break;
		case 'b':
			a->batch = true;
			break;
		case OPT_ONCE:
			a->batch = true;
			a->count = 1;
			break;
		case OPT_LEASE_DIR:
			if (!optarg[0])
				return cmd_usage_error(&cmd_top_entry, "--lease-dir: empty path");
			a->lease_dir = optarg;
			break;
		case OPT_WORKLOAD:
			if (wl_filter_pattern(&a->workload, optarg) < 0)
				return cmd_usage_error(&cmd_top_entry,
				                       "--workload: empty pattern (KIND:PATTERN, "
				                       "PATTERN or KIND:)");
			break;
		case OPT_IDLE_WINDOW:
			if ((status = cmd_parse_idle_window(&cmd_top_entry, optarg,
			                                    &a->idle_window)))
				return status;
			break;
		case CMD_OPT_COLOR:
			if ((status = cli_color_option(cli, &cmd_top_entry, optarg)))
				return status;
			break;
		case 'h':
			cmd_usage(&cmd_top_entry, stdout);
			return CLI_EXIT_OK;
		default:
			return cmd_bad_option(&cmd_top_entry, opt, argv);
		}
	}
	if (optind < argc)
		return cmd_usage_error(&cmd_top_entry, "unexpected argument '%s'", argv[optind]);
	if (!a->batch && (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))) {
		cli_error("top: the screen needs a terminal on stdin and stdout (--once or --batch "
		          "print plain text)");
		return CLI_EXIT_USAGE;
	}
	return CMD_GO_ON;
}

/* The sampler (NVML on its own thread, sampler.h, with a context of its own; one sample per
 * frame of -n), then the screen or the plain-text frames until the end asked for. */
static int run_top(struct cli *cli, const struct top_args *a, struct top_model *m,
                   struct top_view *v)
{
	struct top_sampling ts = {0};
	struct sampler *smp = NULL;
	struct gpuctl_ctx *sctx = NULL;
	const struct sampler_sample *first = NULL;
	sigset_t stop, old;
	int status, r;

	status = cli_context_new(cli, &sctx);
	if (status)
		return status;
	struct sampler_config cfg = {.interval = a->delay,
	                             .max_samples = a->count,
	                             .ctx = sctx,
	                             .take = top_take,
	                             .free_data = top_sample_free,
	                             .userdata = &ts};
	r = sampler_start(&cfg, &smp);
	if (r < 0) {
		gpuctl_ctx_free(sctx);
		cli_error("top: cannot start the sampler: %s", strerror(-r));
		return CLI_EXIT_FAILURE;
	}
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stop, &old);
	if (cli_first_sample(smp, "top", &stop, &first) == 0) {
		status = top_model_start(m, first);
		sampler_put(first);
		if (status == 0)
			status = a->batch ? run_batch(m, v, smp, a->count, &stop)
			                  : top_run_screen(m, v, smp, a->count, &stop);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	/* the terminal is restored; a sample hung in NVML is not waited for */
	if (sampler_stop(smp, SAMPLER_STOP_WAIT_S) < 0)
		cli_exit_now(status);
	return status;
}

static int cmd_top_exec(struct cli *cli, int argc, char **argv)
{
	struct top_args a = {.delay = 1.0, .workload = WL_FILTER_INIT};
	struct top_model m = {.lease_ifd = -1};
	struct top_view v = {.sort = TOP_COL_GPU};
	int status;

	status = parse_options(cli, argc, argv, &a);
	if (status != CMD_GO_ON)
		return status;
	/* the site first: a shared lease directory decides which configuration governs it */
	status = cli_site(cli, &cmd_top_entry, a.lease_dir, 0);
	if (status)
		return status;
	v.delay = a.delay;
	v.workload = wl_filter_active(&a.workload) ? &a.workload : NULL;
	top_model_init(&m, cli, a.ids);
	m.idle_window = a.idle_window;
	status = run_top(cli, &a, &m, &v);
	top_model_free(&m);
	free(v.order);
	return status;
}

const struct cmd_entry cmd_top_entry = {
        .name = "top",
        .long_options = top_options,
        .short_options = "+:i:d:n:bh",
        .usage = "[-i IDS] [-d SECONDS] [-n COUNT] [--once | --batch] [--lease-dir DIR] "
                 "[--workload PATTERN] [--idle-window SECONDS] [--color WHEN]",
        .summary = "live full-screen view: GPUs, holders, health, processes, the wait queue",
        .options = "  -i, --id, --only IDS\n"
                   "                        GPUs to show (and whose processes to list): "
                   "indices,\n"
                   "                        UUIDs or PCI bus ids, comma-separated (default: "
                   "all)\n"
                   "  -d, --delay SECONDS   seconds between refreshes, 0.1 to 86400 (default 1)\n"
                   "  -n, --iterations N    stop after N refreshes (default: until q or a "
                   "signal)\n"
                   "  --once                print one frame as plain text and exit\n"
                   "  -b, --batch           print a plain-text frame every interval (no "
                   "screen)\n"
                   "  --lease-dir DIR       the lease directory (default $GPUCTL_LEASE_DIR, "
                   "else the\n"
                   "                        configuration's lease_dir, else /run/gpuctl)\n"
                   "  --workload PATTERN    list only the processes of workloads that match\n"
                   "                        [KIND:]PATTERN (as for ps)\n"
                   "  --idle-window SECONDS how long a process must hold memory below 5 %\n"
                   "                        utilisation to show as idle, 1 to 604800\n"
                   "                        (default 600; docs/idle.md)\n"
                   "  --color WHEN          colour the screen: auto (unless NO_COLOR is set), "
                   "always,\n"
                   "                        never (default: the global --color, else auto)\n"
                   "  -h, --help            print this help\n"
                   "\n"
                   "Keys: arrows, PgUp/PgDn, Home/End move; Tab switches GPUs/processes; s,\n"
                   "1-9 or 0 (WORKLOAD) sort; / filters by user, command or workload; k sends\n"
                   "SIGTERM (again: SIGKILL) to the selected process, as kill(2) allows you;\n"
                   "r releases your own --hold lease;\n"
                   "h help; q quits. Mouse: a click selects (on a heading: sorts), the wheel\n"
                   "scrolls. NO_COLOR turns colours off (unless --color=always). While NVML\n"
                   "does not answer for two refreshes, the last values stay, dimmed, under\n"
                   "a line saying so.\n",
        .exec = cmd_top_exec,
        .exits = CMD_EXITS_DRIVER,
};
