// SPDX-License-Identifier: MIT
/*
 * test-cli-options.c: each command's `--help` lists exactly the options its entry declares
 * (src/cli/cmd.h: long_options and short_options, the one declaration cmd_getopt parses with),
 * but for the internal ones the entry names (internal_options).
 *
 * The help's option column is read as the bash completion reads it (dist/gpuctl.bash): lines
 * that begin with two spaces and a dash, up to the first run of two spaces; every "--name" and
 * "-x" there is an option the help promises. tests/cli/test_cli_main.py checks the man page's
 * SYNOPSIS against the same help, so a declared option that no document shows, or a documented
 * one that the parser refuses, fails here or there. The same for --format's values, where the
 * entry lists them (cmd_parse_format).
 */
#include <ctype.h>
#include <getopt.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cmd.h"

#define NAMES_MAX 64
#define NAME_MAX_ 48

/* A set of option names: long ones without "--", short ones as one character. */
struct names {
	char v[NAMES_MAX][NAME_MAX_];
	size_t n;
};

static bool names_has(const struct names *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i], name) == 0)
			return true;
	return false;
}

static void names_add(struct names *s, const char *name, size_t len)
{
	char buf[NAME_MAX_];

	assert_true(len > 0 && len < sizeof(buf));
	memcpy(buf, name, len);
	buf[len] = '\0';
	if (names_has(s, buf))
		return;
	assert_true(s->n < NAMES_MAX);
	memcpy(s->v[s->n++], buf, len + 1);
}

/* The options of the help's option column: "  -i, --id, --only IDS   text" gives i, id, only;
 * "  --wait[=SECONDS]  text" gives wait; "  --share --mem SIZE  text" gives share, mem. */
static void help_names(const char *help, struct names *ret_long, struct names *ret_short)
{
	for (const char *line = help; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);

		if (len > 3 && line[0] == ' ' && line[1] == ' ' && line[2] == '-') {
			const char *p = line + 2, *stop = line + len;
			const char *gap = strstr(p, "  ");

			if (gap && gap < stop)
				stop = gap;
			while (p < stop) {
				size_t n;

				while (p < stop && (*p == ' ' || *p == ','))
					p++;
				n = strcspn(p, " ,");
				if (p + n > stop)
					n = (size_t)(stop - p);
				if (n > 2 && p[0] == '-' && p[1] == '-') {
					size_t k = strcspn(p + 2, "=[");

					names_add(ret_long, p + 2, k < n - 2 ? k : n - 2);
				} else if (n == 2 && p[0] == '-' && isalpha((unsigned char)p[1])) {
					names_add(ret_short, p + 1, 1);
				}
				p += n;
			}
		}
		line = end ? end + 1 : NULL;
	}
}

/* The declared options: the long table's names, and the letters of the short options. */
static void declared_names(const struct cmd_entry *e, struct names *ret_long,
                           struct names *ret_short)
{
	for (const struct option *o = e->long_options; o->name; o++) {
		bool internal = false;

		for (const char *const *i = e->internal_options; i && *i; i++)
			internal = internal || strcmp(*i, o->name) == 0;
		if (!internal)
			names_add(ret_long, o->name, strlen(o->name));
	}
	for (const char *c = e->short_options; *c; c++)
		if (isalpha((unsigned char)*c))
			names_add(ret_short, c, 1);
}

/* Counts (and prints) the names of a missing from b. */
static int missing(const char *cmd, const char *what, const struct names *a, const struct names *b,
                   const char *prefix)
{
	int bad = 0;

	for (size_t i = 0; i < a->n; i++) {
		if (names_has(b, a->v[i]))
			continue;
		print_message("gpuctl %s: %s%s %s\n", cmd, prefix, a->v[i], what);
		bad++;
	}
	return bad;
}

static void test_help_lists_the_declared_options(void **state)
{
	int bad = 0;
	size_t checked = 0;

	(void)state;
	for (const struct cmd_entry *const *e = cmd_table; *e; e++) {
		struct names dl = {0}, ds = {0}, hl = {0}, hs = {0};

		assert_non_null((*e)->long_options);
		assert_non_null((*e)->short_options);
		declared_names(*e, &dl, &ds);
		help_names((*e)->options, &hl, &hs);
		bad += missing((*e)->name, "is declared but not in --help", &dl, &hl, "--");
		bad += missing((*e)->name, "is in --help but not declared", &hl, &dl, "--");
		bad += missing((*e)->name, "is declared but not in --help", &ds, &hs, "-");
		bad += missing((*e)->name, "is in --help but not declared", &hs, &ds, "-");
		checked++;
	}
	assert_int_equal(bad, 0);
	/* the seventeen commands of the README's table */
	assert_int_equal(checked, 17);
}

/* The --format line of a help text ("  --format FORMAT  text (default) or json" and its
 * continuation lines), copied into buf; false when there is none. */
static bool format_help(const char *help, char *buf, size_t size)
{
	const char *p = strstr(help, "  --format ");
	size_t len;

	if (!p)
		return false;
	len = strcspn(p + 2, "\n");
	/* continuation lines: blank up to the description column, no option */
	while (p[2 + len] == '\n' && strncmp(p + 3 + len, "   ", 3) == 0 &&
	       p[3 + len + strspn(p + 3 + len, " ")] != '-')
		len += 1 + strcspn(p + 3 + len, "\n");
	assert_true(len < size);
	memcpy(buf, p + 2, len);
	buf[len] = '\0';
	return true;
}

/* Every command whose entry lists --format's values takes each of them (its position back),
 * refuses another with the usage status, and names each in its --help. */
static void test_formats(void **state)
{
	size_t checked = 0;

	(void)state;
	for (const struct cmd_entry *const *e = cmd_table; *e; e++) {
		char line[512];
		int i = -1;

		if (!(*e)->formats)
			continue;
		assert_true(format_help((*e)->options, line, sizeof(line)));
		for (int n = 0; (*e)->formats[n]; n++) {
			assert_int_equal(cmd_parse_format(*e, (*e)->formats[n], &i), 0);
			assert_int_equal(i, n);
			if (!strstr(line, (*e)->formats[n]))
				fail_msg("gpuctl %s: --format %s is not in '%s'", (*e)->name,
				         (*e)->formats[n], line);
		}
		i = -7;
		assert_int_equal(cmd_parse_format(*e, "yaml", &i), CLI_EXIT_USAGE);
		assert_int_equal(i, -7);
		assert_int_equal(cmd_parse_format(*e, "", &i), CLI_EXIT_USAGE);
		checked++;
	}
	/* health, info, ps, quota, report, slurm, topo, watch */
	assert_int_equal(checked, 8);
}

/* The reader itself, on help lines written here: a test that could not fail would pass with a
 * reader that finds nothing. */
static void test_help_reader(void **state)
{
	struct names l = {0}, s = {0};

	(void)state;
	help_names("  -i, --id, --only IDS   the GPUs\n"
	           "  --wait[=SECONDS]  wait in line (see --hold)\n"
	           "  --share --mem SIZE  declare\n"
	           "                     continued, mentions --not-an-option\n"
	           "Filters:\n"
	           "  -n COUNT  how many\n",
	           &l, &s);
	assert_int_equal(l.n, 5);
	assert_true(names_has(&l, "id") && names_has(&l, "only") && names_has(&l, "wait"));
	assert_true(names_has(&l, "share") && names_has(&l, "mem"));
	assert_false(names_has(&l, "hold") || names_has(&l, "not-an-option"));
	assert_int_equal(s.n, 2);
	assert_true(names_has(&s, "i") && names_has(&s, "n"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_help_reader),
	        cmocka_unit_test(test_help_lists_the_declared_options),
	        cmocka_unit_test(test_formats),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
