// SPDX-License-Identifier: MIT
/*
 * test-headers.c: the public header compiles on its own, first, with nothing before it; the same
 * file is also compiled as C++ (tests/unit/CMakeLists.txt) when a C++ compiler is present.
 */
#include "gpuctl/gpuctl.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

static void test_header_usable(void **state)
{
	struct gpuctl_link link = {sizeof(link), GPUCTL_TOPO_SYSTEM, 0, false, GPUCTL_P2P_OK, 0.0};
	enum gpuctl_field f = GPUCTL_F_UUID;
	gpuctl_log_fn fn = NULL;

	(void)state;
	(void)fn;
	assert_int_equal(link.level, 50);
	assert_non_null(gpuctl_field_info(f));
	assert_int_equal(GPUCTL_SNAP_ALL, GPUCTL_SNAP_PROCESSES | GPUCTL_SNAP_TOPOLOGY |
	                                          GPUCTL_SNAP_MIG | GPUCTL_SNAP_HEALTH |
	                                          GPUCTL_SNAP_PROC_UTIL);
	assert_string_equal(GPUCTL_VERSION_STRING, "0.1.0");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_header_usable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
