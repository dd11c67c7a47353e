// SPDX-License-Identifier: MIT
/*
 * color.c: --color's values and whether a run colours its tables (cmd.h). Apart from cmd.c so
 * that fuzz/fuzz-options.c can link the parser without every command.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"

int cli_color_parse(const char *when, enum cli_color *ret_color)
{
	static const struct {
		const char *name;
		enum cli_color color;
	} names[] = {
	        {"auto", CLI_COLOR_AUTO},   {"tty", CLI_COLOR_AUTO},
	        {"if-tty", CLI_COLOR_AUTO}, {"always", CLI_COLOR_ALWAYS},
	        {"yes", CLI_COLOR_ALWAYS},  {"force", CLI_COLOR_ALWAYS},
	        {"never", CLI_COLOR_NEVER}, {"no", CLI_COLOR_NEVER},
	        {"none", CLI_COLOR_NEVER},
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(when, names[i].name) == 0) {
			*ret_color = names[i].color;
			return 0;
		}
	return -EINVAL;
}

bool cli_use_color(const struct cli *cli)
{
	const char *no = getenv("NO_COLOR"), *term = getenv("TERM");

	if (cli->color != CLI_COLOR_AUTO)
		return cli->color == CLI_COLOR_ALWAYS;
	if (no && no[0])
		return false;
	if (term && strcmp(term, "dumb") == 0)
		return false;
	return isatty(STDOUT_FILENO) == 1;
}
