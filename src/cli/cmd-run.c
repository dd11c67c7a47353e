// SPDX-License-Identifier: MIT
/*
 * cmd-run.c: `gpuctl run`: select devices (as `gpuctl select` does), then run a command on
 * them: environment, CPU and memory binding, exec, signal forwarding, exit status. This file
 * is the command: its options, their checks (every usage error before NVML), one launch, and
 * the relaunches of --retry. The plan of each child is run-plan.c's, starting and waiting for
 * the children run-exec.c's, watching their GPUs run-retry.c's (run.h lists them).
 *
 * Decisions (docs/gpuctl.1, "run", says the same for users):
 * - Leases (docs/leases.md). run selects and leases atomically (gpuctl_alloc) in
 *   the lease directory (--lease-dir, $GPUCTL_LEASE_DIR, the configuration's lease_dir,
 *   /run/gpuctl), so two concurrent runs never share a device. The lock descriptors stay open
 *   in gpuctl until every child has ended and are inherited by the children (FD_CLOEXEC
 *   cleared between fork and exec; their numbers in GPUCTL_LEASE_FDS, the directory in
 *   GPUCTL_LEASE_DIR): the lease lives while gpuctl or the job lives, so `kill -9` of gpuctl
 *   leaves the job holding it. With --each every rank inherits every descriptor (simplest
 *   correct choice): the lease of all devices ends when the last rank (and gpuctl) has ended,
 *   not device by device. The owner record names gpuctl and the first child (run-exec.c).
 *   --dry-run takes no lease: it selects as run would (excluding leased devices and, unless
 *   --ignore-foreign, devices busy without a lease) and says so.
 * - A failover (--retry) keeps the devices of the launch before locked until the new lease is
 *   taken, so those chosen again are kept (gpuctl_alloc_request.replace); the last lease ends
 *   only after any line saying why gpuctl stops.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"
#include "util.h"
#include "watchdog.h"

enum {
	OPT_EACH = 0x100,
	OPT_DRY_RUN,
	OPT_NO_BIND,
	OPT_RETRY,
	OPT_GRACE,
	OPT_RETRY_ON,
};

static const struct option run_options[] = {
        FILTER_LONG_OPTIONS,
        {"each", no_argument, NULL, OPT_EACH},
        {"dry-run", no_argument, NULL, OPT_DRY_RUN},
        {"no-bind", no_argument, NULL, OPT_NO_BIND},
        {"retry", required_argument, NULL, OPT_RETRY},
        {"grace", required_argument, NULL, OPT_GRACE},
        {"retry-on", required_argument, NULL, OPT_RETRY_ON},
        CMD_OPTION_HELP,
        {NULL, 0, NULL, 0},
};

/* ---- one launch ---- */

/* The plan of each child: one child for all the devices, or one per device with --each (the
 * ranks, with one rendezvous for this launch unless the job has its own). */
static int plan_children(struct cli *cli, struct run_args *a, const struct gpuctl_snapshot *snap,
                         const struct gpuctl_devset *set, struct run_child *kids, size_t nkids,
                         const int *fds, size_t nfds)
{
	_cleanup_free_ uint64_t *allowed = calloc(RUN_CPU_WORDS, sizeof(*allowed));
	size_t ndev = gpuctl_devset_count(set);
	int r;

	if (!allowed)
		return -ENOMEM;
	r = run_allowed_cpus(allowed);
	if (r < 0)
		return r;
	if (a->each) {
		a->master_addr = getenv("MASTER_ADDR") ? NULL : "127.0.0.1";
		a->master_port[0] = '\0';
		int pr = 0;
		/* a port free here means nothing for another host's MASTER_ADDR */
		if (a->master_addr && !getenv("MASTER_PORT"))
			pr = run_free_local_port(a->master_port, sizeof(a->master_port));
		if (pr < 0 && cli->verbose)
			cli_error("run: no MASTER_PORT for the ranks: 127.0.0.1: %s",
			          strerror(-pr));
	}
	for (size_t i = 0; i < nkids; i++) {
		if (a->each)
			r = run_plan_child(&kids[i], a, snap, set, i, i + 1, (long)i, ndev,
			                   allowed);
		else
			r = run_plan_child(&kids[i], a, snap, set, 0, ndev, -1, 0, allowed);
		if (r < 0)
			return r;
		kids[i].lease_fds = fds;
		kids[i].nlease_fds = nfds;
		if (cli->verbose && !a->dry_run) {
			cli_error("run: %s%zu: CUDA_VISIBLE_DEVICES=%s, cpus: %s, memory: %s",
			          a->each ? "rank " : "child ", i, kids[i].env[0].value,
			          kids[i].cpus_text, kids[i].mem_text);
		}
	}
	return 0;
}

/* One launch: select and lease, plan, start, wait (watching the GPUs with --retry: m).
 * *ret_ran says whether the command was started; the status is then its own (or the exec
 * failure's), else gpuctl's exit status. *held: the allocation of the launch before (a
 * failover), or NULL; its devices stay locked until the new lease is taken, which keeps
 * those it chooses again (gpuctl_alloc_request.replace). On return *held is this launch's
 * allocation (the caller releases it: after a relaunch, or when gpuctl is done), or, when
 * none was made, still the one before. */
static int run_once(struct cli *cli, struct run_args *ap, const char *command,
                    struct run_monitor *m, bool *ret_ran, struct gpuctl_alloc **held)
{
	struct run_args a = *ap;
	struct gpuctl_alloc *alloc = NULL;
	struct run_child *kids = NULL;
	struct gpuctl_lease *lease = NULL;
	_cleanup_free_ int *fds = NULL;
	_cleanup_free_ char *fds_text = NULL;
	size_t nkids = 0, nfds = 0;
	int status, r;

	*ret_ran = false;
	ap->sel.req.replace = *held;
	status = filters_alloc(cli, &cmd_run_entry, &ap->sel,
	                       a.dry_run ? GPUCTL_ALLOC_PREVIEW : GPUCTL_ALLOC_LEASE,
	                       a.dry_run ? NULL : command, &alloc);
	ap->sel.req.replace = NULL;
	a.sel = ap->sel;
	if (status)
		goto out;
	/* the new lease holds what it kept: the old one lets go of the rest (the failed GPU) */
	gpuctl_alloc_free(*held);
	*held = NULL;
	const struct gpuctl_snapshot *snap = gpuctl_alloc_snapshot(alloc);
	lease = gpuctl_alloc_lease(alloc);
	if (lease) {
		nfds = gpuctl_lease_fds(lease, NULL, 0);
		fds = calloc(nfds ? nfds : 1, sizeof(*fds));
		if (!fds) {
			r = -ENOMEM;
			goto fail;
		}
		nfds = gpuctl_lease_fds(lease, fds, nfds);
		r = run_fds_list(fds, nfds, &fds_text);
		if (r < 0)
			goto fail;
		a.lease_fds_text = fds_text;
		a.lease_dir = gpuctl_alloc_lease_dir_path(alloc);
	}

	const struct gpuctl_devset *set = gpuctl_alloc_devices(alloc);
	/* one process gets them all: never more MIG devices than CUDA uses (nothing started yet;
	 * freeing the allocation below ends the lease) */
	if (!a.each && gpuctl_devset_cuda_check(cli->ctx, snap, set) < 0) {
		cli_error("run: %s; use --each (one process per device)", gpuctl_errmsg(cli->ctx));
		status = CLI_EXIT_USAGE;
		goto out;
	}
	nkids = a.each ? gpuctl_devset_count(set) : 1;
	kids = calloc(nkids, sizeof(*kids));
	if (!kids) {
		r = -ENOMEM;
		goto fail;
	}
	r = plan_children(cli, &a, snap, set, kids, nkids, fds, nfds);
	if (r < 0)
		goto fail;
	/* enforce = cgroup: each child is confined by the agent before it execs (run-confine.c) */
	const char *agent_socket = NULL;
	if (lease && !a.dry_run &&
	    (status = run_confine_plan(cli, snap, set, a.lease_dir, &agent_socket)))
		goto out;
	for (size_t i = 0; agent_socket && i < nkids; i++)
		kids[i].confine = agent_socket;
	if (a.retry) {
		r = run_monitor_init(cli, m, snap, set);
		if (r < 0)
			goto fail;
	}
	if (a.dry_run) {
		for (size_t i = 0; i < nkids; i++) {
			if (i)
				putchar('\n');
			if (a.each)
				printf("# rank %zu\n", i);
			run_print_plan(&kids[i], a.cmd, stdout);
		}
		status = CLI_EXIT_OK;
		goto out;
	}
	*ret_ran = true;
	/* from here on gpuctl is the job's parent, not a one-shot command: a hung NVML call (of
	 * --retry's checks) must not end it and orphan the job (watchdog.h) */
	cli_watchdog_pause();
	status = run_start_children(cli, kids, nkids, a.cmd, lease, a.retry ? m : NULL, a.grace_s);
	cli_watchdog_resume();
	goto out;

fail:
	if (r == -ENODATA)
		cli_error("run: a chosen device has no UUID; refusing to start with an ambiguous "
		          "device string");
	else
		cli_error("run: %s", strerror(-r));
	status = CLI_EXIT_FAILURE;
out:
	for (size_t i = 0; kids && i < nkids; i++)
		run_child_free(&kids[i]);
	free(kids);
	/* Every child has ended: the lease ends with gpuctl's descriptors, when the caller frees
	 * it (after a relaunch has its own, or when gpuctl is done). */
	if (alloc)
		*held = alloc;
	return status;
}

/* ---- the command ---- */

/* The options into a: CMD_GO_ON, or the exit status to return now (--help, a usage error). */
static int parse_options(struct run_args *a, int argc, char **argv)
{
	unsigned long v;
	int opt, status;

	while ((opt = cmd_getopt(&cmd_run_entry, argc, argv)) != -1) {
		status = filters_option(&cmd_run_entry, &a->sel, opt, optarg);
		if (status >= 0) {
			if (status)
				return status;
			continue;
		}
		switch (opt) {
		case OPT_EACH:
			a->each = true;
			break;
		case OPT_DRY_RUN:
			a->dry_run = true;
			break;
		case OPT_NO_BIND:
			a->no_bind = true;
			break;
		case OPT_RETRY:
			if (parse_uint(optarg, 0, RUN_RETRY_MAX, &v) < 0)
				return cmd_usage_error(&cmd_run_entry,
				                       "--retry: '%s' is not a number of failovers "
				                       "(0 to %d)",
				                       optarg, RUN_RETRY_MAX);
			a->retry = (unsigned)v;
			break;
		case OPT_GRACE:
			if (parse_uint(optarg, 0, 3600, &v) < 0)
				return cmd_usage_error(&cmd_run_entry,
				                       "--grace: '%s' is not a number of seconds "
				                       "(0 to 3600)",
				                       optarg);
			a->grace_s = (unsigned)v;
			break;
		case OPT_RETRY_ON:
			if (strcmp(optarg, "any") && strcmp(optarg, "gpu"))
				return cmd_usage_error(&cmd_run_entry,
				                       "--retry-on: '%s' (gpu or any)", optarg);
			a->retry_any = strcmp(optarg, "any") == 0;
			break;
		case 'h':
			cmd_usage(&cmd_run_entry, stdout);
			return CLI_EXIT_OK;
		default:
			return cmd_bad_option(&cmd_run_entry, opt, argv);
		}
	}
	return CMD_GO_ON;
}

/* The options together and the command (argv[optind] on); 0 or CLI_EXIT_USAGE. */
static int check_args(struct run_args *a, int argc, char **argv)
{
	int status = filters_check(&cmd_run_entry, &a->sel);

	if (status)
		return status;
	if (optind >= argc)
		return cmd_usage_error(&cmd_run_entry, "no command given (gpuctl run -n N -- CMD)");
	if (a->dry_run && a->sel.req.wait)
		return cmd_usage_error(&cmd_run_entry, "--wait and --dry-run conflict");
	if (a->each && a->sel.req.count == 0)
		return cmd_usage_error(&cmd_run_entry, "--each with -n 0 would start nothing");
	if (a->retry && a->dry_run)
		return cmd_usage_error(&cmd_run_entry, "--retry and --dry-run conflict");
	if (a->retry && a->sel.req.count == 0)
		return cmd_usage_error(&cmd_run_entry,
		                       "--retry with -n 0: no GPU to fail over from");
	a->cmd = argv + optind;
	return 0;
}

/* Launches the job, and again after a failover (--retry); returns the exit status. */
static int run_launches(struct cli *cli, struct run_args *a)
{
	_cleanup_free_ char *command = NULL;
	struct gpuctl_alloc *held = NULL; /* the current launch's allocation (its lease) */
	int status;

	if (run_join_command(a->cmd, &command) < 0) {
		cli_error("run: out of memory");
		return CLI_EXIT_FAILURE;
	}
	for (a->attempt = 0;; a->attempt++) {
		struct run_monitor mon = {.failed = -1};
		bool ran = false;

		status = run_once(cli, a, command, &mon, &ran, &held);
		bool retry = run_retry_wanted(cli, a, &mon, ran, &status);
		run_monitor_free(&mon);
		if (!retry)
			break;
		run_retry_backoff(a);
	}
	/* the last lease ends only now, after any line saying why gpuctl stops */
	gpuctl_alloc_free(held);
	return status;
}

static int cmd_run_exec(struct cli *cli, int argc, char **argv)
{
	struct run_args a = {.sel = SELECT_ARGS_INIT, .grace_s = RUN_GRACE_DEFAULT_S};
	int status;

	status = parse_options(&a, argc, argv);
	if (status == CMD_GO_ON) {
		status = check_args(&a, argc, argv);
		if (!status)
			status = run_launches(cli, &a);
	}
	filters_free(&a.sel);
	return status;
}

const struct cmd_entry cmd_run_entry = {
        .name = "run",
        .long_options = run_options,
        .short_options = "+:n:h",
        .usage = "-n N [FILTERS] [--each] [--dry-run] [--no-bind] [--retry N [--grace S] "
                 "[--retry-on gpu|any]] -- CMD [ARGS...]",
        .summary = "choose GPUs as select does and run a command on them",
        .options = FILTER_OPTIONS_HELP
        "  --each                one process per chosen device, each with its own\n"
        "                        CUDA_VISIBLE_DEVICES and LOCAL_RANK=RANK=i, WORLD_SIZE=\n"
        "                        LOCAL_WORLD_SIZE=N, MASTER_ADDR=127.0.0.1 and a free\n"
        "                        MASTER_PORT unless set (torchrun --standalone's); when one\n"
        "                        fails the others get SIGTERM (SIGKILL 30 s later) and the\n"
        "                        first failure's status is returned\n"
        "  --dry-run             print each process's environment changes, CPU and memory\n"
        "                        binding and command; start nothing\n"
        "  --no-bind             do not bind CPUs and memory to the GPUs' NUMA nodes\n"
        "  --retry N             failover: watch the job's GPUs; when one turns FAIL (as\n"
        "                        gpuctl health judges, XID events included) stop the job,\n"
        "                        select again without that GPU, still holding the others\n"
        "                        (kept when chosen again; docs/leases.md \"Failover\"), and\n"
        "                        relaunch it with GPUCTL_RESTART_COUNT=1, 2, ... at most N\n"
        "                        times (0-100); no replacement: one line, exit 3\n"
        "  --grace SECONDS       on failover, SIGTERM to the job's process groups, then\n"
        "                        SIGKILL after SECONDS (default 10)\n"
        "  --retry-on gpu|any    relaunch only after a GPU failure (default), or also when\n"
        "                        the job fails by itself\n"
        "  -h, --help            print this help\n",
        .notes = "\n"
                 "The command gets CUDA_VISIBLE_DEVICES=<UUIDs> (empty for -n 0),\n"
                 "CUDA_DEVICE_ORDER=PCI_BUS_ID, GPUCTL_GPUS=<index>:<UUID>,... and, when it was "
                 "set,\n"
                 "NVIDIA_VISIBLE_DEVICES=<UUIDs>. Its CPUs are those of the GPUs' affinity this "
                 "process\n"
                 "may use; memory prefers the GPUs' NUMA nodes. SIGINT, SIGTERM, SIGHUP, SIGQUIT,\n"
                 "SIGUSR1 and SIGUSR2 are forwarded to it, but one gpuctl was started ignoring\n"
                 "(nohup) stays ignored by both. gpuctl exits with its status (128+N if\n"
                 "killed by signal N; 127 command not found; 126 not executable).\n"
                 "The chosen devices are leased (docs/leases.md) until gpuctl and the command have "
                 "both\n"
                 "ended (the command inherits the lock descriptors: GPUCTL_LEASE_FDS). An unsafe "
                 "lease\n"
                 "directory is exit 1; devices all leased, exit 3. With --retry each process leads "
                 "a\n"
                 "process group of its own; exit 5: a GPU failed again and no failover was left.\n",
        .exec = cmd_run_exec,
        .exits = CMD_EXITS_DRIVER | CMD_EXITS_NOMATCH | CMD_EXITS_RETRY | CMD_EXITS_JOB |
                 CMD_EXITS_BUSY | CMD_EXITS_HUNG | CMD_EXITS_QUOTA | CMD_EXITS_CONFINE,
};
