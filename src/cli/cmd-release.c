// SPDX-License-Identifier: MIT
/*
 * cmd-release.c: `gpuctl release`: end the `gpuctl select --hold` holders of the calling user
 * (docs/leases.md).
 *
 * Decisions:
 * - One of -i IDS or --all is required: a bare `gpuctl release` ending every hold of the user
 *   would be too easy to type by accident.
 * - -i names GPUs (gpuctl_ids_resolve forms); a GPU stands for itself and its MIG devices.
 * - The library signals only holders it has checked (owner, start time): a holder of another
 *   user on a named device is one line and exit 1 (nothing signalled), never a signal.
 * - Prints how many holders were ended ("released 0 holders" is not an error: the lease may
 *   have expired already). Leases of `gpuctl run` end with their job, not with release.
 * - A holder holds all its devices' locks and ending it frees them all, so `-i 6` also frees 7
 *   when one holder held both: a second line says so ("also freed: 7 (held by the same holder
 *   as 6)"), from the library's list of the devices the ended holders held
 *   (gpuctl_lease_release_freed). The first line stays as it was: scripts read it.
 * - A process of the user's that holds a lease's lock with no record accounting for it (a hold
 *   whose record was deleted, a job that kept the lease after its run ended) is a holder too:
 *   the library finds it through the kernel's locks, and each such process counts as one.
 * - --force (root only: anyone else gets one line and exit 1 before NVML is read) takes back
 *   any lease through gpuctl_lease_evict (docs/leases.md "Taking a lease back"): a --hold holder
 *   ends, a job's lease loses its lock file and the job runs on. The reason the holder is told
 *   is "release --force", followed by --reason's text; a text with a control character, or
 *   longer than a notice carries, is a usage error. First line "took back N leases", then one
 *   line per holder and device.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd.h"
#include "util.h"

enum {
	OPT_ALL = 0x100,
	OPT_LEASE_DIR,
	OPT_FORCE,
	OPT_REASON,
};

#define RELEASE_REASON_MAX 180 /* --reason's bytes: with "release --force: ", a notice's 200 */

static const struct option release_options[] = {
        CMD_OPTIONS_IDS,
        {"all", no_argument, NULL, OPT_ALL},
        {"lease-dir", required_argument, NULL, OPT_LEASE_DIR},
        {"force", no_argument, NULL, OPT_FORCE},
        {"reason", required_argument, NULL, OPT_REASON},
        CMD_OPTION_HELP,
        {NULL, 0, NULL, 0},
};

/* What the command line asks for. */
struct release_args {
	const char *ids;       /* -i, NULL: --all */
	bool all;              /* --all */
	const char *lease_dir; /* --lease-dir, NULL: the site's */
	bool force;            /* --force: take back anyone's lease (root) */
	const char *reason;    /* --reason, NULL: none */
};

/* --reason's text: 0, or the usage error's exit status. */
static int check_reason(const char *text)
{
	size_t l = strlen(text);

	if (l == 0)
		return cmd_usage_error(&cmd_release_entry, "--reason: empty text");
	if (l > RELEASE_REASON_MAX)
		return cmd_usage_error(&cmd_release_entry, "--reason: longer than %d bytes",
		                       RELEASE_REASON_MAX);
	for (size_t i = 0; i < l; i++)
		if ((unsigned char)text[i] < 0x20 || text[i] == 0x7f)
			return cmd_usage_error(&cmd_release_entry,
			                       "--reason: contains a control character");
	return 0;
}

/* The options into a, checked together: CMD_GO_ON, or the exit status to return now
 * (--help, a usage error). */
static int parse_options(struct release_args *a, int argc, char **argv)
{
	int opt;

	while ((opt = cmd_getopt(&cmd_release_entry, argc, argv)) != -1) {
		switch (opt) {
		case 'i':
			if (!optarg[0])
				return cmd_usage_error(&cmd_release_entry, "-i: empty GPU id list");
			a->ids = optarg;
			break;
		case OPT_ALL:
			a->all = true;
			break;
		case OPT_FORCE:
			a->force = true;
			break;
		case OPT_REASON:
			a->reason = optarg;
			break;
		case OPT_LEASE_DIR:
			if (!optarg[0])
				return cmd_usage_error(&cmd_release_entry,
				                       "--lease-dir: empty path");
			a->lease_dir = optarg;
			break;
		case 'h':
			cmd_usage(&cmd_release_entry, stdout);
			return CLI_EXIT_OK;
		default:
			return cmd_bad_option(&cmd_release_entry, opt, argv);
		}
	}
	if (optind < argc)
		return cmd_usage_error(&cmd_release_entry, "unexpected argument '%s'",
		                       argv[optind]);
	if (!a->ids && !a->all)
		return cmd_usage_error(&cmd_release_entry, "say which: -i IDS or --all");
	if (a->ids && a->all)
		return cmd_usage_error(&cmd_release_entry, "-i and --all conflict");
	if (a->reason && !a->force)
		return cmd_usage_error(&cmd_release_entry, "--reason needs --force");
	if (a->reason && check_reason(a->reason))
		return CLI_EXIT_USAGE;
	if (a->force && geteuid() != 0) {
		cli_error("release: --force: only root may take back a lease (you are uid %u)",
		          (unsigned)geteuid());
		return CLI_EXIT_FAILURE;
	}
	return CMD_GO_ON;
}

/* The devices of the GPUs ids names, each with its MIG devices, into *ret_set; 0 or the exit
 * status. */
static int named_devices(struct cli *cli, const struct gpuctl_snapshot *snap, const char *ids,
                         struct gpuctl_devset **ret_set)
{
	_cleanup_(gpuctl_devset_freep) struct gpuctl_devset *set = NULL;
	_cleanup_free_ size_t *idx = NULL;
	size_t nidx = 0;
	int status, r;

	status = cli_select_gpus(cli, snap, ids, &idx, &nidx);
	if (status)
		return status;
	r = gpuctl_devset_new(&set);
	for (size_t i = 0; r >= 0 && i < nidx; i++) {
		const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, idx[i]);
		r = gpuctl_devset_add(set, idx[i], -1);
		for (size_t k = 0; r >= 0 && g && k < gpuctl_gpu_mig_count(g); k++)
			r = gpuctl_devset_add(set, idx[i], (int)k);
	}
	if (r < 0) {
		cli_error("release: %s", strerror(-r));
		return CLI_EXIT_FAILURE;
	}
	*ret_set = TAKE_PTR(set);
	return 0;
}

/* The second line of `release -i`: the devices of freed beyond those of set, by GPU index (a MIG
 * device by its UUID, after its GPU's index), and why; nothing when there are none. */
static void print_also_freed(const struct release_args *a, const struct gpuctl_snapshot *snap,
                             const struct gpuctl_devset *set, const struct gpuctl_devset *freed)
{
	size_t named = 0;
	bool any = false;

	for (size_t i = 0; i < gpuctl_devset_count(set); i++) {
		size_t g;
		int m;

		if (gpuctl_devset_get(set, i, &g, &m) == 0 && m < 0)
			named++;
	}
	for (size_t i = 0; freed && i < gpuctl_devset_count(freed); i++) {
		const struct gpuctl_gpu *gpu;
		size_t g;
		int m;

		if (gpuctl_devset_get(freed, i, &g, &m) < 0 || gpuctl_devset_contains(set, g, m))
			continue;
		gpu = gpuctl_snapshot_gpu(snap, g);
		printf("%s%zu", any ? ", " : "also freed: ", g);
		if (m >= 0) {
			const char *u = gpuctl_mig_uuid(gpuctl_gpu_mig(gpu, (size_t)m));
			printf(" (MIG device %s)", u ? u : "without a UUID");
		}
		any = true;
	}
	if (any)
		printf(" (held by the same holder as %s%s)\n", named > 1 ? "one of " : "", a->ids);
}

/* One line per lease list took back, after "took back N leases". */
static void print_taken(const struct gpuctl_lease_notices *list)
{
	size_t n = gpuctl_lease_notices_count(list);

	printf("took back %zu lease%s\n", n, n == 1 ? "" : "s");
	for (size_t i = 0; i < n; i++) {
		const struct gpuctl_lease_notice *t = gpuctl_lease_notices_get(list, i);
		char who[64];

		if (t->user)
			(void)snprintf(who, sizeof(who), "%s", t->user);
		else
			(void)snprintf(who, sizeof(who), "uid %u", t->uid);
		printf("GPU %lld (%s): from %s, pid %u: %s\n", (long long)t->index, t->device, who,
		       t->pid,
		       t->ended ? "the --hold holder was ended"
		                : "lock file replaced; its processes run on, no longer leased");
	}
}

/* Takes back the leases of a's GPUs (set; NULL: all) as root; the exit status. */
static int force_release(struct cli *cli, const struct release_args *a,
                         const struct gpuctl_snapshot *snap, struct gpuctl_lease_dir *dir,
                         const struct gpuctl_devset *set)
{
	_cleanup_(gpuctl_lease_notices_freep) struct gpuctl_lease_notices *list = NULL;
	char reason[256];
	int r;

	if (a->reason)
		(void)snprintf(reason, sizeof(reason), "release --force: %s", a->reason);
	else
		(void)snprintf(reason, sizeof(reason), "release --force");
	r = gpuctl_lease_evict(cli->ctx, dir, snap, set, reason, &list);
	if (r < 0) {
		const char *msg = gpuctl_errmsg(cli->ctx);
		cli_error("release: --force: %s", msg && msg[0] ? msg : strerror(-r));
		return r == -EAGAIN ? CLI_EXIT_BUSY : CLI_EXIT_FAILURE;
	}
	print_taken(list);
	return cli_finish_output(CLI_EXIT_OK);
}

/* Ends the holders of a's GPUs (NULL set: all) in the lease directory; the exit status. */
static int release_in(struct cli *cli, const struct release_args *a,
                      const struct gpuctl_snapshot *snap)
{
	_cleanup_(gpuctl_devset_freep) struct gpuctl_devset *set = NULL;
	_cleanup_(gpuctl_devset_freep) struct gpuctl_devset *freed = NULL;
	struct gpuctl_lease_dir *dir;
	int status, r;

	status = cli_site(cli, &cmd_release_entry, a->lease_dir, 0);
	if (status)
		return status;
	dir = gpuctl_site_lease_dir(cli->site);
	if (a->ids) {
		status = named_devices(cli, snap, a->ids, &set);
		if (status)
			return status;
	}
	if (!dir) {
		/* Nothing can be held in a directory that does not exist. */
		printf(a->force ? "took back 0 leases\n" : "released 0 holders\n");
		return cli_finish_output(CLI_EXIT_OK);
	}
	if (a->force)
		return force_release(cli, a, snap, dir, set);
	r = set ? gpuctl_lease_release_freed(cli->ctx, dir, snap, set, &freed)
	        : gpuctl_lease_release(cli->ctx, dir, snap, set);
	if (r < 0) {
		const char *msg = gpuctl_errmsg(cli->ctx);
		cli_error("release: %s", msg && msg[0] ? msg : strerror(-r));
		return CLI_EXIT_FAILURE;
	}
	printf("released %d holder%s\n", r, r == 1 ? "" : "s");
	if (set)
		print_also_freed(a, snap, set, freed);
	return cli_finish_output(CLI_EXIT_OK);
}

/* A snapshot with the MIG devices, then the release; the exit status. */
static int release_holders(struct cli *cli, const struct release_args *a)
{
	static const enum gpuctl_field fields[] = {GPUCTL_F_MIG_MODE};
	struct gpuctl_snapshot *snap = NULL;
	int status;

	status = cli_snapshot_fields(cli, GPUCTL_SNAP_MIG, fields, 1, &snap);
	if (status)
		return status;
	status = release_in(cli, a, snap);
	gpuctl_snapshot_free(snap);
	return status;
}

static int cmd_release_exec(struct cli *cli, int argc, char **argv)
{
	struct release_args a = {0};
	int status;

	status = parse_options(&a, argc, argv);
	if (status != CMD_GO_ON)
		return status;
	return release_holders(cli, &a);
}

const struct cmd_entry cmd_release_entry = {
        .name = "release",
        .long_options = release_options,
        .short_options = "+:i:h",
        .usage = "-i IDS | --all [--force [--reason TEXT]] [--lease-dir DIR]",
        .summary = "end your own `gpuctl select --hold` leases (root: take any lease back)",
        .options =
                "  -i, --id, --only IDS\n"
                "                   the GPUs whose holds to end (indices, UUIDs, UUID prefixes,\n"
                "                   PCI bus ids, comma-separated; a GPU includes its MIG devices)\n"
                "  --all            end every hold of yours\n"
                "  --force          (root) take back every lease of the GPUs, whoever holds\n"
                "                   it: a --hold holder is ended, a job's lease loses its\n"
                "                   lock file and the job runs on; the holder's next gpuctl\n"
                "                   command says so\n"
                "  --reason TEXT    with --force: why, told to the holder (one line, at most\n"
                "                   180 bytes)\n"
                "  --lease-dir DIR  the lease directory (default $GPUCTL_LEASE_DIR, else the\n"
                "                   configuration's lease_dir, else /run/gpuctl)\n"
                "  -h, --help       print this help\n"
                "\n"
                "Sends SIGTERM to your holders (checked by owner and start time), waits until\n"
                "they have exited (at most 10 s), so the GPUs are free when it returns, and\n"
                "prints how many were ended. A holder holds all its devices and ending it frees\n"
                "them all: when those go beyond -i's GPUs, a second line names them (\"also\n"
                "freed: 7 (held by the same holder as 6)\"). A named device held by another\n"
                "user's holder is exit 1 and\n"
                "nothing is signalled. Leases taken by gpuctl run end with their command. Your\n"
                "processes that hold a lease's lock without an owner record accounting for them\n"
                "(a hold whose record was deleted, a job left holding a lease after its run\n"
                "ended) are found through the kernel's locks and ended too.\n"
                "\n"
                "With --force (root only; anyone else: exit 1) the first line is \"took back\n"
                "N leases\", then one line per holder and device (docs/leases.md, \"Taking a\n"
                "lease back\").\n",
        .exec = cmd_release_exec,
        .exits = CMD_EXITS_DRIVER | CMD_EXITS_HUNG | CMD_EXITS_BUSY,
};
