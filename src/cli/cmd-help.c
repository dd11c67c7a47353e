// SPDX-License-Identifier: MIT
/*
 * cmd-help.c: `gpuctl help [COMMAND]`: the same text as `gpuctl COMMAND --help`.
 */
#include <getopt.h>

#include "cmd.h"

static const struct option help_options[] = {
        CMD_OPTION_HELP,
        {NULL, 0, NULL, 0},
};

static int cmd_help_exec(struct cli *cli, int argc, char **argv)
{
	(void)cli;
	int opt;
	while ((opt = cmd_getopt(&cmd_help_entry, argc, argv)) != -1) {
		if (opt == 'h') {
			cmd_usage(&cmd_help_entry, stdout);
			return CLI_EXIT_OK;
		}
		return cmd_bad_option(&cmd_help_entry, opt, argv);
	}
	if (optind >= argc) {
		cli_usage(stdout);
		return CLI_EXIT_OK;
	}
	if (argc - optind > 1)
		return cmd_usage_error(&cmd_help_entry, "too many arguments");
	const struct cmd_entry *entry = cmd_find(argv[optind]);
	if (!entry) {
		cli_error("help: unknown command '%s' (see 'gpuctl --help')", argv[optind]);
		return CLI_EXIT_USAGE;
	}
	cmd_usage(entry, stdout);
	return CLI_EXIT_OK;
}

const struct cmd_entry cmd_help_entry = {
        .name = "help",
        .long_options = help_options,
        .short_options = "+h",
        .usage = "[COMMAND]",
        .summary = "show the help of a command",
        .options = "  -h, --help  print this help\n",
        .exec = cmd_help_exec,
};
