// SPDX-License-Identifier: MIT
/*
 * test-version.c: the version macros of gpuctl/version.h, gpuctl_version() and CMake's
 * project(gpuctl VERSION ...) (passed in as GPUCTL_TEST_PROJECT_VERSION) all say the same.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "gpuctl/gpuctl.h"

#ifndef GPUCTL_TEST_PROJECT_VERSION
#error "tests/unit/CMakeLists.txt passes CMake's PROJECT_VERSION"
#endif

static void test_header_matches_cmake(void **state)
{
	char s[64];

	(void)state;
	(void)snprintf(s, sizeof(s), "%d.%d.%d", GPUCTL_VERSION_MAJOR, GPUCTL_VERSION_MINOR,
	               GPUCTL_VERSION_PATCH);
	assert_string_equal(s, GPUCTL_VERSION_STRING);
	assert_string_equal(GPUCTL_VERSION_STRING, GPUCTL_TEST_PROJECT_VERSION);
	assert_int_equal(GPUCTL_VERSION_NUMBER, GPUCTL_VERSION_MAJOR << 16 |
	                                                GPUCTL_VERSION_MINOR << 8 |
	                                                GPUCTL_VERSION_PATCH);
}

static void test_runtime_matches_header(void **state)
{
	unsigned major = 999, minor = 999, patch = 999;

	(void)state;
	assert_string_equal(gpuctl_version(&major, &minor, &patch), GPUCTL_TEST_PROJECT_VERSION);
	assert_int_equal(major, GPUCTL_VERSION_MAJOR);
	assert_int_equal(minor, GPUCTL_VERSION_MINOR);
	assert_int_equal(patch, GPUCTL_VERSION_PATCH);
	/* every out-parameter may be NULL */
	assert_string_equal(gpuctl_version(NULL, NULL, NULL), GPUCTL_VERSION_STRING);
	minor = 999;
	assert_non_null(gpuctl_version(NULL, &minor, NULL));
	assert_int_equal(minor, GPUCTL_VERSION_MINOR);
}

static void test_encode_orders_versions(void **state)
{
	(void)state;
	assert_true(GPUCTL_VERSION_ENCODE(0, 1, 255) < GPUCTL_VERSION_ENCODE(0, 2, 0));
	assert_true(GPUCTL_VERSION_ENCODE(0, 255, 255) < GPUCTL_VERSION_ENCODE(1, 0, 0));
	assert_int_equal(GPUCTL_VERSION_ENCODE(1, 2, 3), 0x010203);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_header_matches_cmake),
	        cmocka_unit_test(test_runtime_matches_header),
	        cmocka_unit_test(test_encode_orders_versions),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
