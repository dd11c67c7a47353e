// SPDX-License-Identifier: MIT
/*
 * test-parse.c: the pure argument parsers of src/lib/parse.c that have no other unit test:
 * seconds (gpuctl exporter --interval, gpuctl watch -d). Sizes, counts, percentages and
 * cpulists are checked end to end (tests/cli) and by fuzz/fuzz-size.c.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

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

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_seconds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
