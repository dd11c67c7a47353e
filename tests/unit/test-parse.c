// SPDX-License-Identifier: MIT
/*
 * test-parse.c: the pure argument parsers of src/lib/parse.c that have no other unit test:
 * seconds (gpuctl exporter --interval, gpuctl watch -d), and gpuctl_size_parse, the exported
 * face of the size parser (python/gpuctl reads min_free_mem and share_mem with it). Sizes,
 * counts, percentages and cpulists are also checked end to end (tests/cli) and by
 * fuzz/fuzz-size.c.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include <gpuctl/gpuctl.h>

#include "parse.h"

static void test_seconds(void **state)
{
	static const struct {
		const char *text;
		int r;
		double v;
	} cases[] = {
	        {"1", 0, 1.0},       {"0.1", 0, 0.1},         {"86400", 0, 86400.0},
	        {"5.25", 0, 5.25},   {"000000002", 0, 2.0},   {"0.05", -ERANGE, 0},
	        {"0", -ERANGE, 0},   {"86400.5", -ERANGE, 0}, {"", -EINVAL, 0},
	        {".5", -EINVAL, 0},  {"5.", -EINVAL, 0},      {"1e3", -EINVAL, 0},
	        {"-1", -EINVAL, 0},  {"+1", -EINVAL, 0},      {" 1", -EINVAL, 0},
	        {"1 ", -EINVAL, 0},  {"1.2.3", -EINVAL, 0},   {"0x10", -EINVAL, 0},
	        {"inf", -EINVAL, 0}, {"nan", -EINVAL, 0},     {"1000000000", -EINVAL, 0},
	        {"1s", -EINVAL, 0},
	};

	(void)state;
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		double v = -7.0;
		int r = parse_seconds(cases[k].text, 0.1, 86400, &v);

		if (r != cases[k].r)
			fail_msg("'%s': %d, expected %d", cases[k].text, r, cases[k].r);
		if (r == 0 && v != cases[k].v)
			fail_msg("'%s': %g", cases[k].text, v);
		if (r < 0 && v != -7.0)
			fail_msg("'%s': written on failure", cases[k].text);
	}
}

/* The public size parser: the values and refusals of docs/gpuctl.1 (--min-free-mem), with the
 * reason words the command line prints, and nothing written on failure. */
static void test_size_parse(void **state)
{
	static const struct {
		const char *text;
		int r;
		uint64_t v;
		const char *why; /* a word the reason must contain */
	} cases[] = {
	        {"10GiB", 0, 10ull << 30, NULL},
	        {"512MiB", 0, 512ull << 20, NULL},
	        {"1.5G", 0, 3ull << 29, NULL},
	        {"1t", 0, 1ull << 40, NULL},
	        {"7B", 0, 7, NULL},
	        {"0.5B", 0, 1, NULL}, /* rounded up: "at least" */
	        {"0", 0, 0, NULL},
	        {"10", -EINVAL, 0, "needs a unit"},
	        {"10GB", -EINVAL, 0, "unknown unit"},
	        {"", -EINVAL, 0, "not a size"},
	        {" 1G", -EINVAL, 0, "not a size"},
	        {"-1G", -EINVAL, 0, "not a size"},
	        {"99999999999TiB", -ERANGE, 0, "too large"},
	        {NULL, -EINVAL, 0, "no size"},
	};

	(void)state;
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		uint64_t v = 7;
		const char *why = NULL;
		int r = gpuctl_size_parse(cases[k].text, &v, &why);

		if (r != cases[k].r)
			fail_msg("'%s': %d, expected %d", cases[k].text, r, cases[k].r);
		if (r == 0 && (v != cases[k].v || why))
			fail_msg("'%s': %llu", cases[k].text, (unsigned long long)v);
		if (r < 0 && (v != 7 || !why || !strstr(why, cases[k].why)))
			fail_msg("'%s': value written or reason '%s'", cases[k].text,
			         why ? why : "");
	}
	assert_int_equal(gpuctl_size_parse("1G", NULL, NULL), 0);
	assert_int_equal(gpuctl_size_parse("1", NULL, NULL), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_seconds),
	        cmocka_unit_test(test_size_parse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
