// SPDX-License-Identifier: MIT
/*
 * main.c: gpuctl's entry point: global options, then dispatch to one command.
 *
 * Decisions:
 * - Global options come before the command word ("+" in the getopt string stops at the first
 *   non-option), so a command's own options never collide with them.
 * - The context is created lazily by the first command that needs NVML, so `gpuctl --help`
 *   and usage errors work on a machine without a driver.
 * - Errors are one line on stderr; the exit statuses are those of enum cli_exit.
 * - A one-shot command (CMD_EXITS_HUNG) gets the NVML watchdog (watchdog.h), armed when its
 *   context is made; freeing the context (nvmlShutdown) is bounded too, after the output.
 * - No command word runs `list`, as a bare nvidia-smi, nvitop or gpustat shows the GPUs.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "watchdog.h"

enum {
	OPT_VERSION = 0x100,
	OPT_CONFIG,
};

static const struct option global_options[] = {
        {"verbose", no_argument, NULL, 'v'},
        {"version", no_argument, NULL, OPT_VERSION},
        {"config", required_argument, NULL, OPT_CONFIG},
        CMD_OPTION_COLOR,
        CMD_OPTION_HELP,
        {NULL, 0, NULL, 0},
};

int main(int argc, char **argv)
{
	struct cli cli = {0};
	int opt, status;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+vh", global_options, NULL)) != -1) {
		switch (opt) {
		case 'v':
			cli.verbose = true;
			break;
		case OPT_CONFIG:
			if (!optarg[0]) {
				cli_error("--config: empty path (see 'gpuctl --help')");
				return CLI_EXIT_USAGE;
			}
			cli.config_path = optarg;
			break;
		case CMD_OPT_COLOR:
			if (cli_color_parse(optarg, &cli.color) < 0) {
				cli_error("--color: unknown value '%s' (auto, always or never; see "
				          "'gpuctl --help')",
				          optarg);
				return CLI_EXIT_USAGE;
			}
			break;
		case OPT_VERSION:
			printf("gpuctl %s\n", gpuctl_version(NULL, NULL, NULL));
			return cli_finish_output(CLI_EXIT_OK);
		case 'h':
			cli_usage(stdout);
			return cli_finish_output(CLI_EXIT_OK);
		default: {
			char what[512];
			cli_bad_option_text(opt, argv, what, sizeof(what));
			cli_error("%s (see 'gpuctl --help')", what);
			return CLI_EXIT_USAGE;
		}
		}
	}
	static char list_word[] = "list";
	char *list_argv[] = {list_word, NULL};
	if (optind >= argc) {
		argv = list_argv;
		argc = 1;
		optind = 0;
	}

	const struct cmd_entry *entry = cmd_find(argv[optind]);
	if (!entry) {
		cli_error("unknown command '%s' (see 'gpuctl --help')", argv[optind]);
		return CLI_EXIT_USAGE;
	}

	/* Each command runs its own getopt_long over argv[optind..]; reset the scanner. */
	int cmd_argc = argc - optind;
	char **cmd_argv = argv + optind;
	optind = 0;
	cli.oneshot = entry->exits & CMD_EXITS_HUNG;
	/* a lease taken back from the caller: said by whatever command comes next (notices.c) */
	cli_notices_show(NULL);
	status = entry->exec(&cli, cmd_argc, cmd_argv);
	gpuctl_site_free(cli.site);
	/* the output is complete before NVML is let go of, under the bound (watchdog.h) */
	status = cli_finish_output(status);
	cli_watchdog_closing(status);
	gpuctl_ctx_free(cli.ctx);
	cli_watchdog_stop();
	return status;
}
