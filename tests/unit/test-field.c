// SPDX-License-Identifier: MIT
/* test-field.c: the field table answers nvidia-smi's names and our keys, and nothing else. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "gpuctl/gpuctl.h"

static void test_lookup_smi_names(void **state)
{
	(void)state;
	/* Names from `nvidia-smi --help-query-gpu`, the independent source. */
	assert_int_equal(gpuctl_field_lookup("memory.used"), GPUCTL_F_MEMORY_USED);
	assert_int_equal(gpuctl_field_lookup("pci.bus_id"), GPUCTL_F_PCI_BUS_ID);
	assert_int_equal(gpuctl_field_lookup("utilization.gpu"), GPUCTL_F_UTIL_GPU);
	assert_int_equal(gpuctl_field_lookup("temperature.gpu"), GPUCTL_F_TEMP);
	assert_int_equal(gpuctl_field_lookup("power.draw"), GPUCTL_F_POWER_DRAW);
	assert_int_equal(gpuctl_field_lookup("clocks.sm"), GPUCTL_F_CLOCK_SM);
	assert_int_equal(gpuctl_field_lookup("clocks_throttle_reasons.active"),
	                 GPUCTL_F_CLOCKS_EVENT_REASONS);
	assert_int_equal(gpuctl_field_lookup("MEMORY.TOTAL"), GPUCTL_F_MEMORY_TOTAL);
}

static void test_lookup_unknown(void **state)
{
	(void)state;
	assert_int_equal(gpuctl_field_lookup("memory"), -EINVAL);
	assert_int_equal(gpuctl_field_lookup(""), -EINVAL);
	assert_int_equal(gpuctl_field_lookup("memory.used "), -EINVAL);
	assert_int_equal(gpuctl_field_lookup(NULL), -EINVAL);
}

static void test_table_complete(void **state)
{
	(void)state;
	for (int i = 0; i < GPUCTL__F_COUNT; i++) {
		const struct gpuctl_field_info *fi = gpuctl_field_info(i);
		assert_non_null(fi);
		assert_int_equal(fi->id, i);
		assert_non_null(fi->key);
		assert_non_null(fi->doc);
		/* every key resolves to itself */
		assert_int_equal(gpuctl_field_lookup(fi->key), i);
		for (int j = 0; j < i; j++)
			assert_string_not_equal(fi->key, gpuctl_field_info(j)->key);
	}
	assert_null(gpuctl_field_info(GPUCTL__F_COUNT));
	assert_null(gpuctl_field_info((enum gpuctl_field) - 1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_lookup_smi_names),
	        cmocka_unit_test(test_lookup_unknown),
	        cmocka_unit_test(test_table_complete),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
