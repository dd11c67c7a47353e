// SPDX-License-Identifier: MIT
/*
 * test-format.c: value rendering of the CLI (src/cli/format.c) on snapshots built directly
 * (src/lib/model/snapshot-internal.h), no NVML.
 *
 * Expected spellings are nvidia-smi's documented --query-gpu CSV output ("81920 MiB",
 * "250.00 W", "35 %", "1410 MHz", "Enabled", "Yes", "0x20B010DE", "0x0000000000000001",
 * "[N/A]", the compute mode names), docs/json.md for JSON (base units, null when unavailable)
 * and the text table's rule in format.h (two blanks between columns, padded to the widest
 * cell, the last column not padded).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "format.h"
#include "snapshot-internal.h"

#define MIB (1024LL * 1024LL)

struct fixture {
	struct gpuctl_snapshot *snap;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	f->snap = snapshot_new_empty(3, GPUCTL_SNAP_ALL);
	if (!f->snap) {
		free(f);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	gpuctl_snapshot_free(f->snap);
	free(f);
	return 0;
}

static void set_int(struct fixture *f, size_t gpu, enum gpuctl_field field, int64_t v)
{
	assert_int_equal(snapshot_set_int(f->snap, gpu, field, v), 0);
}

static const struct gpuctl_gpu *gpu_at(struct fixture *f, size_t i)
{
	const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(f->snap, i);
	assert_non_null(g);
	return g;
}

/* Sets an int field on GPU 0 and checks its CSV spelling with and without units. */
static void check_smi(struct fixture *f, enum gpuctl_field field, int64_t v, const char *units,
                      const char *nounits)
{
	char buf[128];
	set_int(f, 0, field, v);
	memset(buf, 'x', sizeof(buf));
	format_field_smi(gpu_at(f, 0), field, true, buf, sizeof(buf));
	if (strcmp(buf, units) != 0)
		fail_msg("field %d value %lld: \"%s\", want \"%s\"", (int)field, (long long)v, buf,
		         units);
	format_field_smi(gpu_at(f, 0), field, false, buf, sizeof(buf));
	if (strcmp(buf, nounits) != 0)
		fail_msg("field %d value %lld nounits: \"%s\", want \"%s\"", (int)field,
		         (long long)v, buf, nounits);
}

static void test_smi_units(void **state)
{
	struct fixture *f = *state;
	/* MiB: bytes / 2^20, truncated (NVML's used/total in bytes, nvidia-smi prints MiB). */
	check_smi(f, GPUCTL_F_MEMORY_TOTAL, 81920 * MIB, "81920 MiB", "81920");
	check_smi(f, GPUCTL_F_MEMORY_USED, 0, "0 MiB", "0");
	check_smi(f, GPUCTL_F_MEMORY_FREE, 24564 * MIB + MIB - 1, "24564 MiB", "24564");
	/* W with two decimals from mW. */
	check_smi(f, GPUCTL_F_POWER_DRAW, 61000, "61.00 W", "61.00");
	check_smi(f, GPUCTL_F_POWER_DRAW, 61234, "61.23 W", "61.23");
	check_smi(f, GPUCTL_F_POWER_LIMIT, 250000, "250.00 W", "250.00");
	check_smi(f, GPUCTL_F_POWER_LIMIT, 0, "0.00 W", "0.00");
	/* "35 %": a blank before the percent sign. */
	check_smi(f, GPUCTL_F_UTIL_GPU, 35, "35 %", "35");
	check_smi(f, GPUCTL_F_UTIL_MEMORY, 100, "100 %", "100");
	check_smi(f, GPUCTL_F_CLOCK_SM, 1410, "1410 MHz", "1410");
	check_smi(f, GPUCTL_F_CLOCK_MEM_MAX, 10501, "10501 MHz", "10501");
	/* temperature.gpu has no unit in nvidia-smi's CSV. */
	check_smi(f, GPUCTL_F_TEMP, 30, "30", "30");
	/* Plain counts. */
	check_smi(f, GPUCTL_F_PCIE_GEN, 4, "4", "4");
	check_smi(f, GPUCTL_F_ECC_VOL_CORRECTED, 12345, "12345", "12345");
}

static void test_smi_words(void **state)
{
	struct fixture *f = *state;
	check_smi(f, GPUCTL_F_PERSISTENCE_MODE, 1, "Enabled", "Enabled");
	check_smi(f, GPUCTL_F_PERSISTENCE_MODE, 0, "Disabled", "Disabled");
	check_smi(f, GPUCTL_F_ECC_MODE, 1, "Enabled", "Enabled");
	check_smi(f, GPUCTL_F_MIG_MODE_PENDING, 0, "Disabled", "Disabled");
	check_smi(f, GPUCTL_F_RETIRED_PENDING, 1, "Yes", "Yes");
	check_smi(f, GPUCTL_F_RETIRED_PENDING, 0, "No", "No");
	check_smi(f, GPUCTL_F_REMAP_FAILURE, 0, "No", "No");
	check_smi(f, GPUCTL_F_REMAP_PENDING, 1, "Yes", "Yes");
	/* nvidia-smi's compute mode names. */
	check_smi(f, GPUCTL_F_COMPUTE_MODE, GPUCTL_COMPUTE_DEFAULT, "Default", "Default");
	check_smi(f, GPUCTL_F_COMPUTE_MODE, GPUCTL_COMPUTE_EXCLUSIVE_PROCESS, "Exclusive_Process",
	          "Exclusive_Process");
	check_smi(f, GPUCTL_F_COMPUTE_MODE, GPUCTL_COMPUTE_PROHIBITED, "Prohibited", "Prohibited");
	check_smi(f, GPUCTL_F_COMPUTE_MODE, GPUCTL_COMPUTE_EXCLUSIVE_THREAD, "Exclusive_Thread",
	          "Exclusive_Thread");
	check_smi(f, GPUCTL_F_COMPUTE_MODE, 7, "7", "7"); /* unknown: the number */
}

static void test_smi_hex(void **state)
{
	struct fixture *f = *state;
	/* pci.device_id: "0x20B010DE" (A100), uppercase, 8 digits. */
	check_smi(f, GPUCTL_F_PCI_DEVICE_ID, 0x20B010DE, "0x20B010DE", "0x20B010DE");
	check_smi(f, GPUCTL_F_PCI_DEVICE_ID, 0x268410DE, "0x268410DE", "0x268410DE");
	check_smi(f, GPUCTL_F_PCI_DEVICE_ID, 0x10DE, "0x000010DE", "0x000010DE");
	/* clocks_event_reasons.active: 16 digits, "0x0000000000000001" when idle. */
	check_smi(f, GPUCTL_F_CLOCKS_EVENT_REASONS, 0x1, "0x0000000000000001",
	          "0x0000000000000001");
	check_smi(f, GPUCTL_F_CLOCKS_EVENT_REASONS, 0, "0x0000000000000000", "0x0000000000000000");
	check_smi(f, GPUCTL_F_CLOCKS_EVENT_REASONS, 0xA4, "0x00000000000000A4",
	          "0x00000000000000A4");
	check_smi(f, GPUCTL_F_CLOCKS_EVENT_REASONS, INT64_MAX, "0x7FFFFFFFFFFFFFFF",
	          "0x7FFFFFFFFFFFFFFF");
}

static void test_smi_strings_index_na_lost(void **state)
{
	struct fixture *f = *state;
	char buf[128];
	const char *uuid = "GPU-7678cc1a-b9d2-add0-5a60-0853a8779508";
	assert_int_equal(snapshot_set_str(f->snap, 0, GPUCTL_F_UUID, uuid), 0);
	assert_int_equal(snapshot_set_str(f->snap, 0, GPUCTL_F_NAME, "NVIDIA A100-SXM4-80GB"), 0);
	format_field_smi(gpu_at(f, 0), GPUCTL_F_UUID, true, buf, sizeof(buf));
	assert_string_equal(buf, uuid);
	format_field_smi(gpu_at(f, 0), GPUCTL_F_NAME, false, buf, sizeof(buf));
	assert_string_equal(buf, "NVIDIA A100-SXM4-80GB");

	/* Never set: "[N/A]", for every field of GPU 1 but its index, and temperature.memory,
	 * which nvidia-smi writes "N/A" (the query-gpu CSV of drivers 590 to 610 on GPUs without
	 * a memory sensor: docs/nvidia-smi-csv.md). */
	for (int id = 0; id < GPUCTL__F_COUNT; id++) {
		format_field_smi(gpu_at(f, 1), (enum gpuctl_field)id, true, buf, sizeof(buf));
		if (id == GPUCTL_F_INDEX)
			assert_string_equal(buf, "1");
		else if (id == GPUCTL_F_TEMP_MEMORY)
			assert_string_equal(buf, "N/A");
		else
			assert_string_equal(buf, "[N/A]");
	}
	/* gpu_recovery_action 0 is "None" in nvidia-smi's CSV (the same captures) */
	set_int(f, 0, GPUCTL_F_RECOVERY_ACTION, 0);
	format_field_smi(gpu_at(f, 0), GPUCTL_F_RECOVERY_ACTION, true, buf, sizeof(buf));
	assert_string_equal(buf, "None");
	format_field_smi(gpu_at(f, 1), GPUCTL__F_COUNT, true, buf, sizeof(buf));
	assert_string_equal(buf, "[N/A]");

	/* A lost GPU: what was read before the loss still shows, the rest "[GPU is lost]". */
	set_int(f, 2, GPUCTL_F_MEMORY_TOTAL, 40 * 1024 * MIB);
	snapshot_set_lost(f->snap, 2);
	assert_true(gpuctl_gpu_lost(gpu_at(f, 2)));
	format_field_smi(gpu_at(f, 2), GPUCTL_F_INDEX, true, buf, sizeof(buf));
	assert_string_equal(buf, "2");
	format_field_smi(gpu_at(f, 2), GPUCTL_F_TEMP, true, buf, sizeof(buf));
	assert_string_equal(buf, "[GPU is lost]");
	format_field_smi(gpu_at(f, 2), GPUCTL_F_UUID, true, buf, sizeof(buf));
	assert_string_equal(buf, "[GPU is lost]");
	format_field_smi(gpu_at(f, 2), GPUCTL_F_TEMP_MEMORY, true, buf, sizeof(buf));
	assert_string_equal(buf, "[GPU is lost]");
	format_field_smi(gpu_at(f, 2), GPUCTL_F_MEMORY_TOTAL, true, buf, sizeof(buf));
	assert_string_equal(buf, "40960 MiB");
}

static void test_smi_truncates(void **state)
{
	struct fixture *f = *state;
	char buf[8];
	set_int(f, 0, GPUCTL_F_MEMORY_TOTAL, 81920 * MIB);
	memset(buf, 'x', sizeof(buf));
	format_field_smi(gpu_at(f, 0), GPUCTL_F_MEMORY_TOTAL, true, buf, 4);
	assert_string_equal(buf, "819");
	assert_int_equal(buf[4], 'x'); /* nothing past size */
	format_field_smi(gpu_at(f, 1), GPUCTL_F_MEMORY_TOTAL, true, buf, 3);
	assert_string_equal(buf, "[N");
	buf[0] = 'x';
	format_field_smi(gpu_at(f, 0), GPUCTL_F_MEMORY_TOTAL, true, buf, 0);
	assert_int_equal(buf[0], 'x');
}

static void test_json_values(void **state)
{
	struct fixture *f = *state;
	const struct gpuctl_gpu *g = gpu_at(f, 0);
	json_t *v;

	set_int(f, 0, GPUCTL_F_MEMORY_TOTAL, 81920 * MIB);
	set_int(f, 0, GPUCTL_F_POWER_DRAW, 61234);
	set_int(f, 0, GPUCTL_F_PERSISTENCE_MODE, 1);
	set_int(f, 0, GPUCTL_F_ECC_MODE, 0);
	set_int(f, 0, GPUCTL_F_REMAP_PENDING, 1);
	set_int(f, 0, GPUCTL_F_COMPUTE_MODE, GPUCTL_COMPUTE_EXCLUSIVE_PROCESS);
	set_int(f, 0, GPUCTL_F_CLOCKS_EVENT_REASONS, 0xA4);
	set_int(f, 0, GPUCTL_F_PCI_DEVICE_ID, 0x20B010DE);
	assert_int_equal(snapshot_set_str(f->snap, 0, GPUCTL_F_NAME, "NVIDIA H100 80GB HBM3"), 0);

	/* Base units: bytes, mW, the raw mask and id. */
	v = format_field_json(g, GPUCTL_F_MEMORY_TOTAL);
	assert_true(json_is_integer(v));
	assert_int_equal(json_integer_value(v), 81920 * MIB);
	json_decref(v);
	v = format_field_json(g, GPUCTL_F_POWER_DRAW);
	assert_int_equal(json_integer_value(v), 61234);
	json_decref(v);
	v = format_field_json(g, GPUCTL_F_CLOCKS_EVENT_REASONS);
	assert_int_equal(json_integer_value(v), 0xA4);
	json_decref(v);
	v = format_field_json(g, GPUCTL_F_PCI_DEVICE_ID);
	assert_int_equal(json_integer_value(v), 0x20B010DE);
	json_decref(v);
	/* Enabled/Disabled and Yes/No fields are booleans. */
	v = format_field_json(g, GPUCTL_F_PERSISTENCE_MODE);
	assert_true(json_is_true(v));
	json_decref(v);
	v = format_field_json(g, GPUCTL_F_ECC_MODE);
	assert_true(json_is_false(v));
	json_decref(v);
	v = format_field_json(g, GPUCTL_F_REMAP_PENDING);
	assert_true(json_is_true(v));
	json_decref(v);
	/* The compute mode is its name. */
	v = format_field_json(g, GPUCTL_F_COMPUTE_MODE);
	assert_string_equal(json_string_value(v), "Exclusive_Process");
	json_decref(v);
	v = format_field_json(g, GPUCTL_F_NAME);
	assert_string_equal(json_string_value(v), "NVIDIA H100 80GB HBM3");
	json_decref(v);
	v = format_field_json(g, GPUCTL_F_INDEX);
	assert_int_equal(json_integer_value(v), 0);
	json_decref(v);

	/* Unavailable: null, never 0 or "". */
	for (int id = 0; id < GPUCTL__F_COUNT; id++) {
		v = format_field_json(gpu_at(f, 1), (enum gpuctl_field)id);
		assert_non_null(v);
		if (id == GPUCTL_F_INDEX)
			assert_int_equal(json_integer_value(v), 1);
		else
			assert_true(json_is_null(v));
		json_decref(v);
	}
	v = format_field_json(g, GPUCTL__F_COUNT);
	assert_true(json_is_null(v));
	json_decref(v);
	/* An unknown compute mode is its number. */
	set_int(f, 1, GPUCTL_F_COMPUTE_MODE, 9);
	v = format_field_json(gpu_at(f, 1), GPUCTL_F_COMPUTE_MODE);
	assert_int_equal(json_integer_value(v), 9);
	json_decref(v);
}

static void test_json_helpers(void **state)
{
	(void)state;
	json_t *v = json_string_or_null(NULL);
	assert_true(json_is_null(v));
	json_decref(v);
	v = json_string_or_null("x");
	assert_string_equal(json_string_value(v), "x");
	json_decref(v);
	v = json_int_or_null(-ENODATA, 5);
	assert_true(json_is_null(v));
	json_decref(v);
	v = json_int_or_null(0, -5);
	assert_int_equal(json_integer_value(v), -5);
	json_decref(v);

	json_t *o = json_object();
	assert_int_equal(json_put(o, "a", json_integer(1)), 0);
	assert_int_equal(json_integer_value(json_object_get(o, "a")), 1);
	assert_int_equal(json_put(o, "b", NULL), -ENOMEM);
	assert_null(json_object_get(o, "b"));
	json_decref(o);
}

static void test_compute_mode_names(void **state)
{
	(void)state;
	assert_string_equal(format_compute_mode(0), "Default");
	assert_string_equal(format_compute_mode(1), "Exclusive_Thread");
	assert_string_equal(format_compute_mode(2), "Prohibited");
	assert_string_equal(format_compute_mode(3), "Exclusive_Process");
	assert_null(format_compute_mode(4));
	assert_null(format_compute_mode(-1));
	assert_null(format_compute_mode(INT64_MAX));
}

static void test_short_uuid(void **state)
{
	(void)state;
	char buf[32];
	format_short_uuid("GPU-7678cc1a-b9d2-add0-5a60-0853a8779508", buf, sizeof(buf));
	assert_string_equal(buf, "GPU-7678cc1a");
	format_short_uuid("MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f", buf, sizeof(buf));
	assert_string_equal(buf, "MIG-c6d4f1ef");
	format_short_uuid(NULL, buf, sizeof(buf));
	assert_string_equal(buf, "N/A");
	format_short_uuid("GPU-12", buf, sizeof(buf));
	assert_string_equal(buf, "GPU-12");
	format_short_uuid("7678cc1a-b9d2", buf, sizeof(buf)); /* no prefix: first group */
	assert_string_equal(buf, "7678cc1a");
	format_short_uuid("GPU-0123456789abcdef", buf, sizeof(buf)); /* at most 8 digits */
	assert_string_equal(buf, "GPU-01234567");
	format_short_uuid("GPU-0123456789-ab", buf, sizeof(buf));
	assert_string_equal(buf, "GPU-01234567");
	char small[6];
	format_short_uuid("GPU-7678cc1a-b9d2", small, sizeof(small));
	assert_string_equal(small, "GPU-7");
}

/* Prints t into a string (caller frees). */
static char *table_text_color(const struct text_table *t, bool color)
{
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	assert_non_null(mem);
	text_table_print(t, mem, color);
	assert_int_equal(fclose(mem), 0);
	return text;
}

static char *table_text(const struct text_table *t)
{
	return table_text_color(t, false);
}

/* Sizes for people: binary units, one decimal only when needed; the compact form has no blank
 * (a table cell). 1536 KiB = 1.5 MiB; 16 * 2^30 = 16 GiB exactly. */
static void test_bytes(void **state)
{
	char b[32];

	(void)state;
	format_bytes(512, b, sizeof(b));
	assert_string_equal(b, "512 B");
	format_bytes(1536ull * 1024, b, sizeof(b));
	assert_string_equal(b, "1.5 MiB");
	format_bytes_compact(1536ull * 1024, b, sizeof(b));
	assert_string_equal(b, "1.5MiB");
	format_bytes_compact(16ull << 30, b, sizeof(b));
	assert_string_equal(b, "16GiB");
	format_bytes_compact(0, b, sizeof(b));
	assert_string_equal(b, "0B");
}

/* Coloured cells: ECMA-48 SGR "ESC [ params m" before the text, "ESC [ 0 m" after it, the
 * padding outside, so the columns line up as without colour; nothing without color. */
static void test_text_table_color(void **state)
{
	(void)state;
	struct text_table *t = NULL;
	assert_int_equal(text_table_new(3, &t), 0);
	const char *const r1[] = {"0", "45C", "OK"};
	const char *const r2[] = {"10", "", "FAIL"};
	text_table_color(t, 0, "31"); /* no row yet: ignored */
	assert_int_equal(text_table_add(t, r1), 0);
	text_table_color(t, 1, "1;31");
	text_table_color(t, 2, "32");
	text_table_color(t, 7, "32"); /* no such column: ignored */
	assert_int_equal(text_table_add(t, r2), 0);
	text_table_color(t, 1, "33"); /* empty cell: nothing to colour */
	text_table_color(t, 2, "1;31");
	char *text = table_text_color(t, true);
	assert_string_equal(text, "0   \033[1;31m45C\033[0m  \033[32mOK\033[0m\n"
	                          "10       \033[1;31mFAIL\033[0m\n");
	free(text);
	text = table_text_color(t, false);
	assert_string_equal(text, "0   45C  OK\n"
	                          "10       FAIL\n");
	free(text);
	text_table_free(t);
}

static void test_text_table(void **state)
{
	(void)state;
	struct text_table *t = NULL;
	assert_int_equal(text_table_new(3, &t), 0);
	const char *const header[] = {"GPU", "NAME", "TEMP"};
	const char *const r1[] = {"10", "NVIDIA A100-SXM4-80GB", "30C"};
	const char *const r2[] = {"2", NULL, "lost"}; /* NULL prints empty */
	const char *const r3[] = {"3", "X", ""};      /* trailing empty cell: no blanks */
	const char *const r4[] = {"", "", ""};
	assert_int_equal(text_table_add(t, header), 0);
	assert_int_equal(text_table_add(t, r1), 0);
	assert_int_equal(text_table_add(t, r2), 0);
	assert_int_equal(text_table_add(t, r3), 0);
	assert_int_equal(text_table_add(t, r4), 0);
	/* Widths 3 and 21; two blanks between columns; the last column unpadded. */
	char *text = table_text(t);
	assert_string_equal(text, "GPU  NAME                   TEMP\n"
	                          "10   NVIDIA A100-SXM4-80GB  30C\n"
	                          "2                           lost\n"
	                          "3    X\n"
	                          "\n");
	free(text);
	text_table_free(t);

	/* Cells are copied: the caller's buffers may change afterwards. */
	assert_int_equal(text_table_new(2, &t), 0);
	char a[8] = "abc", b[8] = "d";
	const char *const row[] = {a, b};
	assert_int_equal(text_table_add(t, row), 0);
	a[0] = 'Z';
	b[0] = 'Z';
	text = table_text(t);
	assert_string_equal(text, "abc  d\n");
	free(text);
	text_table_free(t);

	/* No rows: nothing printed. */
	assert_int_equal(text_table_new(4, &t), 0);
	text = table_text(t);
	assert_string_equal(text, "");
	free(text);
	text_table_free(t);
	text_table_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_smi_units, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_smi_words, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_smi_hex, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_smi_strings_index_na_lost, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_smi_truncates, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_json_values, setup, teardown),
	        cmocka_unit_test(test_json_helpers),
	        cmocka_unit_test(test_compute_mode_names),
	        cmocka_unit_test(test_short_uuid),
	        cmocka_unit_test(test_text_table),
	        cmocka_unit_test(test_text_table_color),
	        cmocka_unit_test(test_bytes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
