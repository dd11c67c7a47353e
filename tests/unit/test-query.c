// SPDX-License-Identifier: MIT
/*
 * test-query.c: the --query and --format parsers of the CLI (src/cli/query.c).
 *
 * Expected names come from `nvidia-smi --help-query-gpu` (field names and their aliases) and
 * nvidia-smi's --format option (csv, noheader, nounits), plus docs/gpuctl.1 for gpuctl's own
 * keys, the suggestion text and the error rules (an empty entry is an error, as in nvidia-smi).
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

#include "query.h"

/* A pointer value no allocation returns: shows an out-parameter was left alone. */
static char sentinel_byte;
#define SENTINEL_STR   (&sentinel_byte)
#define SENTINEL_QUERY ((struct query *)(void *)&sentinel_byte)

/* Appends s to the string in buf (no strcat: docs/CODING_STYLE.md). */
static void append(char *buf, size_t size, const char *s)
{
	size_t used = strlen(buf), n = strlen(s);
	assert_true(used + n < size);
	memcpy(buf + used, s, n + 1);
}

static struct query *parse_ok(const char *text)
{
	struct query *q = SENTINEL_QUERY;
	char *bad = SENTINEL_STR;
	int r = query_parse(text, &q, &bad);
	assert_int_equal(r, 0);
	assert_ptr_not_equal(q, SENTINEL_QUERY);
	assert_non_null(q);
	assert_ptr_equal(bad, SENTINEL_STR); /* ret_bad untouched on success */
	assert_true(q->n >= 1);
	return q;
}

/* Parses text expecting `err`; returns the malloc'ed bad name (caller frees). */
static char *parse_fail(const char *text, int err)
{
	struct query *q = SENTINEL_QUERY;
	char *bad = NULL;
	int r = query_parse(text, &q, &bad);
	assert_int_equal(r, err);
	assert_ptr_equal(q, SENTINEL_QUERY); /* ret_query untouched on failure */
	return bad;
}

static void test_valid_lists(void **state)
{
	(void)state;
	struct query *q = parse_ok("index,uuid,name,pci.bus_id,memory.total,memory.used");
	static const enum gpuctl_field want[] = {GPUCTL_F_INDEX,        GPUCTL_F_UUID,
	                                         GPUCTL_F_NAME,         GPUCTL_F_PCI_BUS_ID,
	                                         GPUCTL_F_MEMORY_TOTAL, GPUCTL_F_MEMORY_USED};
	assert_int_equal(q->n, 6);
	for (size_t i = 0; i < q->n; i++)
		assert_int_equal(q->cols[i].field, want[i]);
	assert_string_equal(q->cols[3].name, "pci.bus_id");
	query_free(q);

	q = parse_ok("temperature.gpu");
	assert_int_equal(q->n, 1);
	assert_int_equal(q->cols[0].field, GPUCTL_F_TEMP);
	query_free(q);
}

static void test_smi_names_and_aliases(void **state)
{
	(void)state;
	/* nvidia-smi --help-query-gpu: each line gives a name and its aliases. */
	static const struct {
		const char *name;
		enum gpuctl_field field;
	} cases[] = {
	        {"gpu_uuid", GPUCTL_F_UUID},
	        {"gpu_name", GPUCTL_F_NAME},
	        {"gpu_bus_id", GPUCTL_F_PCI_BUS_ID},
	        {"gpu_serial", GPUCTL_F_SERIAL},
	        {"clocks.sm", GPUCTL_F_CLOCK_SM},
	        {"clocks.current.sm", GPUCTL_F_CLOCK_SM},
	        {"clocks.mem", GPUCTL_F_CLOCK_MEM},
	        {"clocks.current.memory", GPUCTL_F_CLOCK_MEM},
	        {"clocks.max.mem", GPUCTL_F_CLOCK_MEM_MAX},
	        {"clocks.max.memory", GPUCTL_F_CLOCK_MEM_MAX},
	        {"clocks_throttle_reasons.active", GPUCTL_F_CLOCKS_EVENT_REASONS},
	        {"clocks_event_reasons.active", GPUCTL_F_CLOCKS_EVENT_REASONS},
	        {"pcie.link.gen.gpucurrent", GPUCTL_F_PCIE_GEN},
	        {"pcie.link.gen.current", GPUCTL_F_PCIE_GEN},
	        {"retired_pages.sbe", GPUCTL_F_RETIRED_SBE},
	        {"retired_pages.single_bit_ecc.count", GPUCTL_F_RETIRED_SBE},
	        {"retired_pages.dbe", GPUCTL_F_RETIRED_DBE},
	        {"enforced.power.limit", GPUCTL_F_POWER_LIMIT},
	        {"power.limit", GPUCTL_F_POWER_MGMT_LIMIT}, /* nvidia-smi's software limit */
	        {"power.management.limit", GPUCTL_F_POWER_MGMT_LIMIT}, /* gpuctl's older name */
	        {"ecc.errors.corrected.volatile.total", GPUCTL_F_ECC_VOL_CORRECTED},
	        {"compute_mode", GPUCTL_F_COMPUTE_MODE},
	        {"persistence_mode", GPUCTL_F_PERSISTENCE_MODE},
	        /* gpuctl's own keys (the JSON keys, docs/json.md) */
	        {"memory_used", GPUCTL_F_MEMORY_USED},
	        {"power_draw", GPUCTL_F_POWER_DRAW},
	        {"cpu_affinity", GPUCTL_F_CPU_AFFINITY},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct query *q = parse_ok(cases[i].name);
		assert_int_equal(q->n, 1);
		assert_int_equal(q->cols[0].field, cases[i].field);
		assert_string_equal(q->cols[0].name, cases[i].name);
		query_free(q);
	}
}

static void test_case_and_blanks(void **state)
{
	(void)state;
	/* Case-insensitive; names kept as typed (the CSV header echoes them), blanks trimmed. */
	struct query *q = parse_ok("MEMORY.Used, Index ,\tuuid\t,  POWER_DRAW");
	assert_int_equal(q->n, 4);
	assert_int_equal(q->cols[0].field, GPUCTL_F_MEMORY_USED);
	assert_string_equal(q->cols[0].name, "MEMORY.Used");
	assert_int_equal(q->cols[1].field, GPUCTL_F_INDEX);
	assert_string_equal(q->cols[1].name, "Index");
	assert_int_equal(q->cols[2].field, GPUCTL_F_UUID);
	assert_string_equal(q->cols[2].name, "uuid");
	assert_int_equal(q->cols[3].field, GPUCTL_F_POWER_DRAW);
	assert_string_equal(q->cols[3].name, "POWER_DRAW");
	query_free(q);
}

static void test_duplicates_kept_in_order(void **state)
{
	(void)state;
	struct query *q = parse_ok("uuid,index,uuid,gpu_uuid");
	assert_int_equal(q->n, 4);
	assert_int_equal(q->cols[0].field, GPUCTL_F_UUID);
	assert_int_equal(q->cols[1].field, GPUCTL_F_INDEX);
	assert_int_equal(q->cols[2].field, GPUCTL_F_UUID);
	assert_int_equal(q->cols[3].field, GPUCTL_F_UUID);
	assert_string_equal(q->cols[3].name, "gpu_uuid");
	query_free(q);
}

static void test_empty_entries(void **state)
{
	(void)state;
	static const char *const texts[] = {
	        "", ",", "index,", ",index", "index,,uuid", "index, ,uuid", " ", "\t", "index,\t",
	};
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		char *bad = parse_fail(texts[i], -EINVAL);
		assert_non_null(bad);
		assert_string_equal(bad, ""); /* "" marks the empty entry */
		free(bad);
	}
}

static void test_unknown_names(void **state)
{
	(void)state;
	static const struct {
		const char *text, *bad;
	} cases[] = {
	        {"memory", "memory"},
	        {"index,memory,uuid", "memory"},
	        {"index, bogus.field ", "bogus.field"},
	        {"memory.used.", "memory.used."},
	        {"memory..used", "memory..used"},
	        {"uuid,index,nope,alsonope", "nope"}, /* the first unknown one */
	        {"index;uuid", "index;uuid"},         /* ';' is no separator */
	        {"memory used", "memory used"},
	        /* nvidia-smi's name of another fact (the GPU's own maximum generation,
	         * --help-query-gpu), no alias of pcie.link.gen.max */
	        {"pcie.link.gen.gpumax", "pcie.link.gen.gpumax"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *bad = parse_fail(cases[i].text, -EINVAL);
		assert_non_null(bad);
		assert_string_equal(bad, cases[i].bad);
		free(bad);
	}
	/* ret_bad may be NULL. */
	struct query *q = SENTINEL_QUERY;
	assert_int_equal(query_parse("index,nope", &q, NULL), -EINVAL);
	assert_int_equal(query_parse("index,,uuid", &q, NULL), -EINVAL);
	assert_ptr_equal(q, SENTINEL_QUERY);
	assert_int_equal(query_parse(NULL, &q, NULL), -EINVAL);
}

static void test_limits(void **state)
{
	(void)state;
	size_t size = QUERY_MAX_COLUMNS * 6 + 16;
	char *text = malloc(size);
	assert_non_null(text);

	/* Exactly QUERY_MAX_COLUMNS names: accepted. */
	text[0] = '\0';
	for (size_t i = 0; i < QUERY_MAX_COLUMNS; i++)
		append(text, size, i ? ",index" : "index");
	struct query *q = parse_ok(text);
	assert_int_equal(q->n, QUERY_MAX_COLUMNS);
	query_free(q);
	/* One more: -E2BIG. */
	append(text, size, ",index");
	char *bad = parse_fail(text, -E2BIG);
	free(bad);
	free(text);

	/* A name of QUERY_MAX_NAME characters is looked up (unknown); one more is too long. */
	char name[QUERY_MAX_NAME + 2];
	memset(name, 'a', sizeof(name));
	name[QUERY_MAX_NAME] = '\0';
	bad = parse_fail(name, -EINVAL);
	assert_non_null(bad);
	assert_string_equal(bad, name);
	free(bad);
	name[QUERY_MAX_NAME] = 'a';
	name[QUERY_MAX_NAME + 1] = '\0';
	bad = parse_fail(name, -E2BIG);
	if (bad)
		assert_true(strlen(bad) <= QUERY_MAX_NAME);
	free(bad);
}

static void test_snap_flags(void **state)
{
	(void)state;
	struct query *q = parse_ok("index,uuid,memory.used,temperature.gpu,power.draw");
	assert_int_equal(query_snap_flags(q), 0);
	query_free(q);
	/* ECC counters and replay counters are health facts (include/gpuctl/field.h). */
	q = parse_ok("index,ecc.errors.uncorrected.aggregate.total");
	assert_int_equal(query_snap_flags(q), GPUCTL_SNAP_HEALTH);
	query_free(q);
	q = parse_ok("pcie_replay_counter,remapped_rows.pending,uuid");
	assert_int_equal(query_snap_flags(q), GPUCTL_SNAP_HEALTH);
	query_free(q);
	assert_int_equal(query_snap_flags(NULL), 0);
}

static void test_suggest(void **state)
{
	(void)state;
	char buf[256];
	/* docs/gpuctl.1's example: "did you mean: memory.total, memory.used, memory.free?" */
	assert_int_equal(query_suggest("memory", buf, sizeof(buf)), 3);
	assert_string_equal(buf, "memory.total, memory.used, memory.free");
	/* An underscore means the user writes gpuctl's keys: suggest those. */
	assert_int_equal(query_suggest("memory_", buf, sizeof(buf)), 3);
	assert_string_equal(buf, "memory_total, memory_used, memory_free");
	/* A typo within two edits. */
	assert_true(query_suggest("temprature.gpu", buf, sizeof(buf)) >= 1);
	assert_non_null(strstr(buf, "temperature.gpu"));
	assert_true(query_suggest("uuid_", buf, sizeof(buf)) >= 1);
	assert_non_null(strstr(buf, "uuid"));
	/* At most four. */
	assert_int_equal(query_suggest("clocks", buf, sizeof(buf)), 4);
	assert_int_equal(strncmp(buf, "clocks", 6), 0);
	/* Nothing close: 0 and "". */
	memset(buf, 'x', sizeof(buf));
	assert_int_equal(query_suggest("zzzzzzzzzz", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "");
	assert_int_equal(query_suggest("me", buf, sizeof(buf)), 0); /* too short to guess */
	assert_string_equal(buf, "");
	/* A buffer too small for a second name keeps only what fits, NUL-terminated. */
	char small[sizeof("memory.total")];
	assert_int_equal(query_suggest("memory", small, sizeof(small)), 1);
	assert_string_equal(small, "memory.total");
	char exact[sizeof("memory.total") - 1]; /* no room for the NUL */
	assert_int_equal(query_suggest("memory", exact, sizeof(exact)), 0);
	assert_string_equal(exact, "");
	char tiny[4];
	assert_int_equal(query_suggest("memory", tiny, sizeof(tiny)), 0);
	assert_string_equal(tiny, "");
	assert_int_equal(query_suggest("memory", tiny, 0), 0);
}

/* ---- --format ---- */

static void format_ok(const char *text, struct format_spec start, enum list_format kind,
                      bool noheader, bool nounits)
{
	struct format_spec s = start;
	char *bad = SENTINEL_STR;
	int r = format_parse(text, &s, &bad);
	if (r != 0)
		fail_msg("format_parse(\"%s\") = %d", text, r);
	assert_ptr_equal(bad, SENTINEL_STR);
	if (s.kind != kind || s.noheader != noheader || s.nounits != nounits)
		fail_msg("format_parse(\"%s\"): kind %d noheader %d nounits %d", text, (int)s.kind,
		         s.noheader, s.nounits);
}

static void test_format_combinations(void **state)
{
	(void)state;
	const struct format_spec none = {0};
	/* Every subset of {csv, noheader, nounits} in every order (nvidia-smi's --format). */
	static const char *const words[] = {"csv", "noheader", "nounits"};
	static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
	                                {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
	for (unsigned mask = 1; mask < 8; mask++) {
		for (size_t p = 0; p < 6; p++) {
			char text[64] = "";
			for (size_t k = 0; k < 3; k++) {
				int w = perms[p][k];
				if (!(mask & (1u << w)))
					continue;
				if (text[0])
					append(text, sizeof(text), ",");
				append(text, sizeof(text), words[w]);
			}
			format_ok(text, none, (mask & 1) ? LIST_FORMAT_CSV : LIST_FORMAT_DEFAULT,
			          (mask & 2) != 0, (mask & 4) != 0);
		}
	}
	format_ok("table", none, LIST_FORMAT_TABLE, false, false);
	format_ok("json", none, LIST_FORMAT_JSON, false, false);
	format_ok("json,noheader", none, LIST_FORMAT_JSON, true, false);
	format_ok("table,nounits", none, LIST_FORMAT_TABLE, false, true);
	format_ok("CSV,NoHeader,NOUNITS", none, LIST_FORMAT_CSV, true, true);
	format_ok(" csv , noheader\t", none, LIST_FORMAT_CSV, true, false);
	format_ok("csv,csv", none, LIST_FORMAT_CSV, false, false); /* same kind twice */
}

static void test_format_keeps_earlier_modifiers(void **state)
{
	(void)state;
	/* --noheader --nounits given before --format csv survive it. */
	const struct format_spec earlier = {
	        .kind = LIST_FORMAT_DEFAULT, .noheader = true, .nounits = true};
	format_ok("csv", earlier, LIST_FORMAT_CSV, true, true);
	/* A later --format of only modifiers keeps the kind given before. */
	const struct format_spec json = {.kind = LIST_FORMAT_JSON};
	format_ok("noheader", json, LIST_FORMAT_JSON, true, false);
	/* A later kind replaces an earlier --format's kind. */
	format_ok("table", json, LIST_FORMAT_TABLE, false, false);
}

static void test_format_bad_words(void **state)
{
	(void)state;
	static const struct {
		const char *text, *bad;
	} cases[] = {
	        {"yaml", "yaml"},
	        {"csv,json", "json"},
	        {"json,table", "table"},
	        {"", ""},
	        {"csv,", ""},
	        {",csv", ""},
	        {"csv,,noheader", ""},
	        {"noheader=1", "noheader=1"},
	        {"csvx", "csvx"},
	        {"cs", "cs"},
	        {"csv;noheader", "csv;noheader"},
	        {"csv, yaml ", "yaml"},
	        {"no header", "no header"},
	        {"nounit", "nounit"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct format_spec s = {
		        .kind = LIST_FORMAT_TABLE, .noheader = false, .nounits = true};
		char *bad = NULL;
		int r = format_parse(cases[i].text, &s, &bad);
		if (r != -EINVAL)
			fail_msg("format_parse(\"%s\") = %d", cases[i].text, r);
		assert_non_null(bad);
		assert_string_equal(bad, cases[i].bad);
		free(bad);
		/* *spec is left as it was, even when a modifier came before the bad word. */
		assert_int_equal(s.kind, LIST_FORMAT_TABLE);
		assert_false(s.noheader);
		assert_true(s.nounits);
	}
	struct format_spec s = {0};
	assert_int_equal(format_parse("csv,noheader,yaml", &s, NULL), -EINVAL);
	assert_false(s.noheader);
	assert_int_equal(format_parse(NULL, &s, NULL), -EINVAL);
}

/* gpuctl watch -s and -o (dmon's groups and date/time prefix). */
static void test_watch_groups_and_prefix(void **state)
{
	unsigned mask = 0;
	char bad = 'x';
	bool d = false, t = false;

	(void)state;
	assert_int_equal(groups_parse("puc", "pucvmet", &mask, &bad), 0);
	assert_int_equal(mask, 0x7);
	assert_int_equal(bad, 0);
	assert_int_equal(groups_parse("tempucv", "pucvmet", &mask, &bad), 0);
	assert_int_equal(mask, 0x7f);
	assert_int_equal(groups_parse("cp", "pucvmet", &mask, &bad), 0);
	assert_int_equal(mask, 0x5);
	mask = 42;
	assert_int_equal(groups_parse("px", "pucvmet", &mask, &bad), -EINVAL);
	assert_int_equal(bad, 'x');
	assert_int_equal(groups_parse("pup", "pucvmet", &mask, &bad), -EEXIST);
	assert_int_equal(bad, 'p');
	assert_int_equal(groups_parse("", "pucvmet", &mask, &bad), -EINVAL);
	assert_int_equal(bad, 0);
	assert_int_equal(groups_parse("P", "pucvmet", &mask, &bad), -EINVAL);
	assert_int_equal(mask, 42);

	assert_int_equal(date_time_parse("DT", &d, &t), 0);
	assert_true(d && t);
	assert_int_equal(date_time_parse("T", &d, &t), 0);
	assert_true(!d && t);
	assert_int_equal(date_time_parse("D", &d, &t), 0);
	assert_true(d && !t);
	for (const char *const *b = (const char *const[]){"", "DD", "d", "DTT", "X", " D", NULL};
	     *b; b++)
		assert_int_equal(date_time_parse(*b, &d, &t), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_valid_lists),
	        cmocka_unit_test(test_smi_names_and_aliases),
	        cmocka_unit_test(test_case_and_blanks),
	        cmocka_unit_test(test_duplicates_kept_in_order),
	        cmocka_unit_test(test_empty_entries),
	        cmocka_unit_test(test_unknown_names),
	        cmocka_unit_test(test_limits),
	        cmocka_unit_test(test_snap_flags),
	        cmocka_unit_test(test_suggest),
	        cmocka_unit_test(test_format_combinations),
	        cmocka_unit_test(test_format_keeps_earlier_modifiers),
	        cmocka_unit_test(test_format_bad_words),
	        cmocka_unit_test(test_watch_groups_and_prefix),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
