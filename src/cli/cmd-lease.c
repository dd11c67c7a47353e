// SPDX-License-Identifier: MIT
/*
 * cmd-lease.c: `gpuctl lease init`: create the lease directory and one lock file per GPU and
 * MIG device of this machine (docs/leases.md).
 *
 * Decisions:
 * - A command word with subcommands ("lease init"), so later lease administration has a home.
 * - Only the directory's owner may create lock files (root for the shared /run/gpuctl; the
 *   user for a personal directory): the library refuses others with -EPERM and a message that
 *   says so, printed as one line, exit 1.
 * - The snapshot includes MIG devices, so each MIG device gets its own lock file; devices that
 *   appear later (MIG reconfigured) need another `lease init` (it creates only what is
 *   missing and says how many it created).
 * - A lock file that is there but unusable (a symlink, a FIFO, hard links, another owner) is
 *   never repaired here: removing one a process may hold could give its device twice. Each is
 *   named on stderr with what to do, from the lease list's reasons (the probe every grant
 *   makes), and init ends with exit 1.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "util.h"

enum {
	OPT_LEASE_DIR = 0x100,
};

static const struct option lease_options[] = {
        {"lease-dir", required_argument, NULL, OPT_LEASE_DIR},
        CMD_OPTION_HELP,
        {NULL, 0, NULL, 0},
};

/* One line per device whose lock file is unusable, with how to repair it. The count, or -1
 * (printed) when the list cannot be made. */
static int report_unusable(struct cli *cli, struct gpuctl_lease_dir *dir,
                           const struct gpuctl_snapshot *snap)
{
	_cleanup_(gpuctl_lease_list_freep) struct gpuctl_lease_list *list = NULL;
	int n = 0;

	if (gpuctl_lease_list(cli->ctx, dir, snap, &list) < 0) {
		cli_error("lease: init: %s", gpuctl_errmsg(cli->ctx));
		return -1;
	}
	for (size_t i = 0; i < gpuctl_lease_list_count(list); i++) {
		enum gpuctl_lease_state state;
		const char *why = NULL, *colon;
		size_t gpu;
		int mig;

		if (gpuctl_lease_list_get(list, i, &gpu, &mig, &state, NULL, &why) < 0 ||
		    state != GPUCTL_LEASE_UNUSABLE)
			continue;
		n++;
		why = why ? why : "unusable";
		colon = strncmp(why, "locks/", 6) == 0 ? strstr(why, ": ") : NULL;
		if (colon)
			cli_error(
			        "lease: init: '%s/%.*s': %s; remove it and run `gpuctl lease init` "
			        "again, which creates it afresh",
			        gpuctl_lease_dir_path(dir), (int)(colon - why), why, colon + 2);
		else if (mig >= 0)
			cli_error("lease: init: GPU %zu MIG device %d: %s", gpu, mig, why);
		else
			cli_error("lease: init: GPU %zu: %s", gpu, why);
	}
	return n;
}

/* DIR/config: the configuration that governs the directory (docs/config.md "Trust"), recorded
 * when it is not the default file. 0 or the exit status. */
static int record_config(struct cli *cli, struct gpuctl_lease_dir *dir)
{
	const char *cfg = gpuctl_config_path(gpuctl_site_config(cli->site));
	_cleanup_free_ char *real = cfg ? realpath(cfg, NULL) : NULL;
	bool dflt = !cfg || (real && strcmp(real, GPUCTL_CONFIG_DEFAULT_PATH) == 0);

	if (cfg && !real) {
		cli_error("lease: init: configuration %s: %s", cfg, strerror(errno));
		return CLI_EXIT_FAILURE;
	}
	if (gpuctl_lease_dir_set_config(cli->ctx, dir, dflt ? NULL : real) < 0) {
		cli_error("lease: init: %s", gpuctl_errmsg(cli->ctx));
		return CLI_EXIT_FAILURE;
	}
	printf("configuration: %s\n", dflt ? GPUCTL_CONFIG_DEFAULT_PATH " (the default)" : real);
	return 0;
}

/* The lock files of snap's devices in the lease directory, the configuration's record, and the
 * unusable lock files named; the exit status. */
static int init_dir(struct cli *cli, const char *lease_dir, const struct gpuctl_snapshot *snap)
{
	struct gpuctl_lease_dir *dir;
	int status, r;

	status = cli_site(cli, &cmd_lease_entry, lease_dir, GPUCTL_SITE_CREATE);
	if (status)
		return status;
	dir = gpuctl_site_lease_dir(cli->site);
	r = gpuctl_lease_dir_init(cli->ctx, dir, snap);
	if (r < 0) {
		const char *msg = gpuctl_errmsg(cli->ctx);
		cli_error("lease: init: %s: %s", gpuctl_lease_dir_path(dir),
		          msg && msg[0] ? msg : strerror(-r));
		return CLI_EXIT_FAILURE;
	}
	printf("created %d lock file%s in %s\n", r, r == 1 ? "" : "s", gpuctl_lease_dir_path(dir));
	status = record_config(cli, dir);
	if (status)
		return status;
	return cli_finish_output(report_unusable(cli, dir, snap) == 0 ? CLI_EXIT_OK
	                                                              : CLI_EXIT_FAILURE);
}

/* `lease init`: a snapshot with the MIG devices, then init_dir; the exit status. */
static int lease_init(struct cli *cli, const char *lease_dir)
{
	static const enum gpuctl_field fields[] = {GPUCTL_F_MIG_MODE};
	struct gpuctl_snapshot *snap = NULL;
	int status;

	status = cli_snapshot_fields(cli, GPUCTL_SNAP_MIG, fields, 1, &snap);
	if (status)
		return status;
	status = init_dir(cli, lease_dir, snap);
	gpuctl_snapshot_free(snap);
	return status;
}

/* What the command line asks for. */
struct lease_args {
	const char *lease_dir; /* --lease-dir, NULL: the site's */
};

/* The options and the subcommand ("init", the only one) into a: CMD_GO_ON, or the exit
 * status to return now (--help, a usage error). */
static int parse_options(struct lease_args *a, int argc, char **argv)
{
	int opt;

	/* Options may come before or after "init": permute (no "+"), the operand stays. */
	while ((opt = cmd_getopt(&cmd_lease_entry, argc, argv)) != -1) {
		switch (opt) {
		case OPT_LEASE_DIR:
			if (!optarg[0])
				return cmd_usage_error(&cmd_lease_entry, "--lease-dir: empty path");
			a->lease_dir = optarg;
			break;
		case 'h':
			cmd_usage(&cmd_lease_entry, stdout);
			return CLI_EXIT_OK;
		default:
			return cmd_bad_option(&cmd_lease_entry, opt, argv);
		}
	}
	if (optind >= argc)
		return cmd_usage_error(&cmd_lease_entry, "no subcommand given (init)");
	if (strcmp(argv[optind], "init") != 0)
		return cmd_usage_error(&cmd_lease_entry, "unknown subcommand '%s' (init)",
		                       argv[optind]);
	if (optind + 1 < argc)
		return cmd_usage_error(&cmd_lease_entry, "unexpected argument '%s'",
		                       argv[optind + 1]);
	return CMD_GO_ON;
}

static int cmd_lease_exec(struct cli *cli, int argc, char **argv)
{
	struct lease_args a = {0};
	int status;

	status = parse_options(&a, argc, argv);
	if (status != CMD_GO_ON)
		return status;
	return lease_init(cli, a.lease_dir);
}

const struct cmd_entry cmd_lease_entry = {
        .name = "lease",
        .long_options = lease_options,
        .short_options = ":h",
        .usage = "init [--lease-dir DIR]",
        .summary = "create the lease directory and a lock file per GPU and MIG device",
        .options = "  --lease-dir DIR  the lease directory (default $GPUCTL_LEASE_DIR, else the\n"
                   "                   configuration's lease_dir, else /run/gpuctl)\n"
                   "  -h, --help       print this help\n"
                   "\n"
                   "Only the directory's owner may create lock files: root for the shared\n"
                   "/run/gpuctl (sudo gpuctl lease init), you for a directory of your own.\n"
                   "Prints how many lock files it created (only missing ones are created);\n"
                   "a lock file there but unusable (symlink, FIFO, hard links, another\n"
                   "owner) is named on stderr with how to repair it, and exits 1.\n"
                   "Also records which configuration file governs the directory (the one\n"
                   "read, given with gpuctl --config FILE): users of a shared directory\n"
                   "follow it and cannot name another (docs/config.md).\n",
        .exec = cmd_lease_exec,
        .exits = CMD_EXITS_DRIVER | CMD_EXITS_HUNG,
};
