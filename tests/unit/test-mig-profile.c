// SPDX-License-Identifier: MIT
/*
 * test-mig-profile.c: MIG profile names (src/lib/model/mig-profile.c). Expected values come from
 * NVIDIA's documents: the MIG user guide's device names (1g.5gb, 1c.3g.20gb, 2c.3g.20gb) and
 * supported profiles (1g.5gb+me, 1g.10gb+me on A100; 1g.24gb-me, 1g.24gb+me.all, 2g.48gb+me.all,
 * 1g.24gb+gfx on RTX PRO Blackwell), go-nvlib's profile grammar (one sign, comma-separated
 * attributes of letters, digits and dots that start with a letter) and the Kubernetes device
 * plugin's resource names ('+' written '.': nvidia.com/mig-1g.5gb.me).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "mig-profile.h"

static void test_valid_names(void **state)
{
	static const struct {
		const char *name, *canonical;
		unsigned c, g, gb;
		char sign;
		size_t n_attrs;
	} cases[] = {
	        {"1g.5gb", "1g.5gb", 1, 1, 5, 0, 0},
	        {"7g.80gb", "7g.80gb", 7, 7, 80, 0, 0},
	        {"1c.3g.20gb", "1c.3g.20gb", 1, 3, 20, 0, 0},
	        {"2c.3g.20gb", "2c.3g.20gb", 2, 3, 20, 0, 0},
	        {"1c.1g.5gb", "1g.5gb", 1, 1, 5, 0, 0},
	        {"1g.5gb+me", "1g.5gb+me", 1, 1, 5, '+', 1},
	        {"1g.10gb+me", "1g.10gb+me", 1, 1, 10, '+', 1},
	        {"1g.24gb-me", "1g.24gb-me", 1, 1, 24, '-', 1},
	        {"1g.24gb+me.all", "1g.24gb+me.all", 1, 1, 24, '+', 1},
	        {"2g.48gb+me.all", "2g.48gb+me.all", 2, 2, 48, '+', 1},
	        {"1g.24gb+gfx", "1g.24gb+gfx", 1, 1, 24, '+', 1},
	        {"1c.1g.5gb+me", "1g.5gb+me", 1, 1, 5, '+', 1},
	        {"1G.5GB+ME", "1g.5gb+me", 1, 1, 5, '+', 1},
	        {"1g.24gb+me,gfx", "1g.24gb+gfx,me", 1, 1, 24, '+', 2},
	};
	char buf[64];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct mig_profile p;
		const char *why = NULL;

		if (mig_profile_parse(cases[i].name, &p, &why) != 0)
			fail_msg("'%s' refused: %s", cases[i].name, why);
		assert_int_equal(p.c, cases[i].c);
		assert_int_equal(p.g, cases[i].g);
		assert_int_equal(p.gb, cases[i].gb);
		assert_int_equal(p.sign, cases[i].sign);
		assert_int_equal(p.n_attrs, cases[i].n_attrs);
		assert_true(mig_profile_format(&p, buf, sizeof(buf)) > 0);
		assert_string_equal(buf, cases[i].canonical);
	}
}

static void test_invalid_names(void **state)
{
	static const char *const bad[] = {
	        "",
	        "1g",
	        "1g.5",
	        "g.5gb",
	        "0g.5gb",
	        "1g.0gb",
	        "1g.5gb ",
	        " 1g.5gb",
	        "1c.1g",
	        "1x.1g.5gb",
	        "1g.5gb+",
	        "1g.5gb-",
	        "1g.5gb+me+gfx",
	        "1g.5gb+me-gfx",
	        "1g.5gb+1me",
	        "1g.5gb+.me",
	        "1g.5gb+me.",
	        "1g.5gb+me..all",
	        "1g.5gb+me,me",
	        "1g.5gb+me,",
	        "1g.5gb+m e",
	        "1g.5gb+me_x",
	        "-1g.5gb",
	        "+1g.5gb",
	        "1g.5gbx",
	        "10000g.5gb",
	        "1g.5gb+abcdefghijklmnopq",
	        "1g.5gb+a,b,c,d,e,f,g,h,i",
	};
	struct mig_profile p, untouched;

	(void)state;
	memset(&untouched, 0x5a, sizeof(untouched));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *why = NULL;

		memcpy(&p, &untouched, sizeof(p));
		if (mig_profile_parse(bad[i], &p, &why) != -EINVAL)
			fail_msg("'%s' accepted", bad[i]);
		assert_non_null(why);
		assert_memory_equal(&p, &untouched, sizeof(p));
	}
}

static void test_matches(void **state)
{
	(void)state;
	assert_true(mig_profile_matches("1g.5gb", "1g.5gb"));
	assert_true(mig_profile_matches("1G.5GB", "1g.5gb"));
	assert_true(mig_profile_matches("1c.1g.5gb", "1g.5gb"));
	assert_true(mig_profile_matches("1g.24gb+gfx,me", "1g.24gb+me,gfx"));
	assert_true(mig_profile_matches("1g.24gb-me", "1g.24gb-me"));
	assert_false(mig_profile_matches("1g.24gb+me", "1g.24gb-me"));
	assert_false(mig_profile_matches("1g.24gb+me", "1g.24gb+me.all"));
	assert_false(mig_profile_matches("1g.24gb", "1g.24gb+me"));
	assert_false(mig_profile_matches("1g.5gb", "1c.2g.10gb"));
	assert_false(mig_profile_matches("2g.10gb", "1c.2g.10gb"));
	/* a name NVML gives that is not in the grammar is compared as text */
	assert_true(mig_profile_matches("odd", "ODD"));
	assert_false(mig_profile_matches("1g.5gb", NULL));
}

static void test_k8s_names(void **state)
{
	char buf[64];

	(void)state;
	assert_int_equal(mig_profile_k8s_name("1g.5gb+me", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "mig-1g.5gb.me");
	assert_int_equal(mig_profile_k8s_name("3g.20gb", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "mig-3g.20gb");
	assert_int_equal(mig_profile_k8s_name("1g.24gb+me.all", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "mig-1g.24gb.me.all");
	assert_int_equal(mig_profile_k8s_name("1g.24gb-me", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "mig-1g.24gb-me");
	assert_int_equal(mig_profile_k8s_name("1c.3g.20gb", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "mig-1c.3g.20gb");
	/* not a resource name: a comma, upper case, a non-alphanumeric end, empty */
	assert_int_equal(mig_profile_k8s_name("1g.24gb+me,gfx", buf, sizeof(buf)), -EINVAL);
	assert_int_equal(mig_profile_k8s_name("1G.5GB", buf, sizeof(buf)), -EINVAL);
	assert_int_equal(mig_profile_k8s_name("1g.5gb+", buf, sizeof(buf)), -EINVAL);
	assert_int_equal(mig_profile_k8s_name("", buf, sizeof(buf)), -EINVAL);
	assert_int_equal(mig_profile_k8s_name("1g.5gb", buf, 8), -ENOSPC);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_valid_names),
	        cmocka_unit_test(test_invalid_names),
	        cmocka_unit_test(test_matches),
	        cmocka_unit_test(test_k8s_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
