// SPDX-License-Identifier: MIT
/*
 * test-headers.c: the public headers compile on their own, first, with nothing before them.
 * Built as a test, it includes the umbrella gpuctl/gpuctl.h and uses a name of each header;
 * the same file is also compiled as C++ (tests/unit/CMakeLists.txt) when a C++ compiler is
 * present. With GPUCTL_TEST_HEADER=<gpuctl/NAME.h> it includes that one header alone and
 * nothing else: tests/unit/CMakeLists.txt syntax-checks every header of include/gpuctl/ so, in
 * C with the project's warnings and in C++ (unit/header/NAME, unit/header-cxx/NAME).
 */
#ifdef GPUCTL_TEST_HEADER
#include GPUCTL_TEST_HEADER

/* something to compile beside the header (an empty translation unit is not ISO C) */
typedef int gpuctl_test_header_alone;
#else
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
	/* the umbrella includes every header: a name of each (they are ABI, so their values hold)
	 */
	assert_int_equal(GPUCTL_LOG_WARNING + GPUCTL_RENDER_JSON + GPUCTL_LEASE_SHARED, 2 + 6 + 4);
	assert_int_equal(GPUCTL_HEALTH_FAIL + GPUCTL_SITE_NO_LEASES + GPUCTL_ALLOC_LEASE,
	                 2 + 2 + 2);
	assert_int_equal(GPUCTL_WORKLOAD_SESSION + GPUCTL_WORKLOAD_NAME_MAX, 6 + 253);
	assert_int_equal(GPUCTL_LEDGER_WORKLOAD + GPUCTL_LEDGER_END_RESTART + GPUCTL_LEDGER_BY_DAY,
	                 2 + 6 + 5);
	assert_true(sizeof(struct gpuctl_select_request) > sizeof(size_t));
	assert_true(sizeof(struct gpuctl_wait_entry) > sizeof(uint64_t));
	assert_true(sizeof(struct gpuctl_config_settings) > sizeof(uint64_t));
	assert_true(sizeof(struct gpuctl_quota_use) > sizeof(size_t) + sizeof(int64_t));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_header_usable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
#endif /* GPUCTL_TEST_HEADER */
