// SPDX-License-Identifier: MIT
/*
 * test-parse.c: the pure argument parsers of src/lib/basic/parse.c that have no other unit test:
 * seconds (gpuctl exporter --interval, gpuctl watch -d), writing a cpulist back (gpuctl run's
 * binding, over 65,536 CPUs, where whole empty words are skipped), and gpuctl_size_parse, the
 * exported face of the size parser (python/gpuctl reads min_free_mem and share_mem with it).
 * Sizes, counts, percentages and parsing cpulists are also checked end to end (tests/cli) and
 * by fuzz/fuzz-size.c.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

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

/* GPUCTL_NVML_TIMEOUT's values (docs/gpuctl.1, ENVIRONMENT): seconds 0 to max as
 * parse_seconds reads them, or "off"; 0 and "off" are no bound. */
static void test_timeout(void **state)
{
	static const struct {
		const char *text;
		int r;
		double v;
	} cases[] = {
	        {"off", 0, 0.0},      {"0", 0, 0.0},         {"30", 0, 30.0},
	        {"0.5", 0, 0.5},      {"86400", 0, 86400.0}, {"86401", -ERANGE, 0},
	        {"OFF", -EINVAL, 0},  {"of", -EINVAL, 0},    {"offf", -EINVAL, 0},
	        {"off ", -EINVAL, 0}, {"", -EINVAL, 0},      {"abc", -EINVAL, 0},
	        {"-1", -EINVAL, 0},   {"1e9", -EINVAL, 0},   {"inf", -EINVAL, 0},
	        {"1 s", -EINVAL, 0},  {"0x10", -EINVAL, 0},  {"1000000000", -EINVAL, 0},
	};

	(void)state;
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		double v = -7.0;
		int r = parse_timeout(cases[k].text, 86400, &v);

		if (r != cases[k].r)
			fail_msg("'%s': %d, expected %d", cases[k].text, r, cases[k].r);
		if (r == 0 && v != cases[k].v)
			fail_msg("'%s': %g", cases[k].text, v);
		if (r < 0 && v != -7.0)
			fail_msg("'%s': written on failure", cases[k].text);
	}
}

/* Bits set from a list of [first, last] ranges, written back: the kernel's cpulist form. */
/* size_exact_text: the largest binary unit that divides the size (1 KiB = 1024 B, IEC
 * 80000-13), and parse_size reads the text back to the same bytes. */
static void test_size_exact_text(void **state)
{
	static const struct {
		uint64_t bytes;
		const char *text;
	} cases[] = {
	        {0, "0 B"},
	        {1000, "1000 B"},
	        {1024, "1 KiB"},
	        {1536ull * 1024 * 1024, "1536 MiB"},
	        {4ull << 30, "4 GiB"},
	        {(4ull << 30) + 1, "4294967297 B"},
	        {3ull << 40, "3 TiB"},
	        {5ull << 50, "5120 TiB"},
	};
	char buf[32];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t back = 1;
		const char *why = NULL;
		char nospace[32];
		size_t k = 0;

		assert_string_equal(size_exact_text(cases[i].bytes, buf, sizeof(buf)),
		                    cases[i].text);
		for (const char *c = buf; *c; c++)
			if (*c != ' ')
				nospace[k++] = *c;
		nospace[k] = '\0';
		assert_int_equal(parse_size(nospace, &back, &why), 0);
		assert_true(back == cases[i].bytes);
	}
}

static void test_format_cpulist(void **state)
{
	static const struct {
		unsigned ranges[4][2];
		size_t n;
		const char *want;
	} cases[] = {
	        {{{0, 0}}, 1, "0"},
	        {{{0, 3}, {8, 8}, {64, 65}}, 3, "0-3,8,64-65"},
	        {{{63, 64}}, 1, "63-64"},   /* a range across a word boundary */
	        {{{64, 127}}, 1, "64-127"}, /* exactly one whole word */
	        {{{60, 200}}, 1, "60-200"}, /* through a full word */
	        {{{127, 127}, {129, 129}}, 2, "127,129"},
	        {{{65535, 65535}}, 1, "65535"}, /* the last CPU */
	        {{{65472, 65535}}, 1, "65472-65535"},
	        {{{5, 5}, {40000, 40002}}, 2, "5,40000-40002"},
	        {{{0, 0}}, 0, ""},
	};
	static uint64_t bits[65536 / 64];
	char buf[64];

	(void)state;
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		memset(bits, 0, sizeof(bits));
		for (size_t r = 0; r < cases[k].n; r++)
			for (unsigned c = cases[k].ranges[r][0]; c <= cases[k].ranges[r][1]; c++)
				bits[c / 64] |= UINT64_C(1) << (c % 64);
		size_t len = format_cpulist(bits, 65536, buf, sizeof(buf));
		assert_string_equal(buf, cases[k].want);
		assert_int_equal(len, strlen(cases[k].want));
	}
	/* fewer bits than the array holds: what lies beyond nbits is not read */
	memset(bits, 0, sizeof(bits));
	bits[1] = UINT64_C(1) << 4; /* CPU 68 */
	bits[0] = UINT64_C(1) << 63;
	format_cpulist(bits, 68, buf, sizeof(buf));
	assert_string_equal(buf, "63");
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
	        {"10GB", 0, 10ull << 30, NULL}, /* GB is GiB (docker, Slurm, free -g) */
	        {"10G", 0, 10ull << 30, NULL},
	        {"3mb", 0, 3ull << 20, NULL},
	        {"2TB", 0, 2ull << 40, NULL},
	        {"10Gib", -EINVAL, 0, "unknown unit"}, /* neither GiB nor GB */
	        {"10GIB", -EINVAL, 0, "unknown unit"},
	        {"10GiBB", -EINVAL, 0, "unknown unit"},
	        {"10 GiB", -EINVAL, 0, "unknown unit"},
	        {"10Gi", -EINVAL, 0, "unknown unit"},
	        {"10PB", -EINVAL, 0, "unknown unit"},
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

/* parse_dec: exactly the n bytes given, digits only, at most max (2^64-1 and 2^32-1 are the
 * bounds the callers use: /proc fields, lease records, cgroup ids). */
static void test_dec(void **state)
{
	(void)state;
	static const struct {
		const char *s;
		size_t n;
		uint64_t max;
		bool ok;
		uint64_t v;
	} cases[] = {
	        {"0", 1, UINT64_MAX, true, 0},
	        {"42", 2, UINT64_MAX, true, 42},
	        {"4242 ", 4, UINT64_MAX, true, 4242}, /* only the n bytes given */
	        {"007", 3, UINT64_MAX, true, 7},
	        {"18446744073709551615", 20, UINT64_MAX, true, UINT64_MAX},
	        {"18446744073709551616", 20, UINT64_MAX, false, 0},
	        {"99999999999999999999", 20, UINT64_MAX, false, 0},
	        {"4294967295", 10, UINT32_MAX, true, UINT32_MAX},
	        {"4294967296", 10, UINT32_MAX, false, 0},
	        {"10", 2, 9, false, 0},
	        {"9", 1, 9, true, 9},
	        {"5", 1, 4, false, 0},
	        {"", 0, UINT64_MAX, false, 0},
	        {"+1", 2, UINT64_MAX, false, 0},
	        {"-1", 2, UINT64_MAX, false, 0},
	        {" 1", 2, UINT64_MAX, false, 0},
	        {"1a", 2, UINT64_MAX, false, 0},
	        {"1\0002", 3, UINT64_MAX, false, 0},
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		uint64_t v = 77;
		bool ok = parse_dec(cases[k].s, cases[k].n, cases[k].max, &v);
		if (ok != cases[k].ok || v != (ok ? cases[k].v : 77))
			fail_msg("case %zu ('%s'): %d, %llu", k, cases[k].s, ok,
			         (unsigned long long)v);
	}
	uint32_t u = 5;
	assert_true(parse_dec_u32("4294967295", 10, &u));
	assert_int_equal(u, UINT32_MAX);
	assert_false(parse_dec_u32("4294967296", 10, &u));
	assert_int_equal(u, UINT32_MAX);
}

/* docs/config.md "Idle actions": N and one of s, m, h, d; a bare 0 is off; at most 366 days. */
static void test_duration(void **state)
{
	static const struct {
		const char *text;
		int r;
		uint64_t seconds;
	} cases[] = {
	        {"0", 0, 0},          {"2s", 0, 2},          {"30m", 0, 1800},
	        {"8h", 0, 28800},     {"7d", 0, 604800},     {"366d", 0, 31622400},
	        {"367d", -ERANGE, 0}, {"8785h", -ERANGE, 0}, {"0s", 0, 0},
	        {"10", -EINVAL, 0},   {"", -EINVAL, 0},      {"m", -EINVAL, 0},
	        {"1.5h", -EINVAL, 0}, {"1 h", -EINVAL, 0},   {"1h30m", -EINVAL, 0},
	        {"-1h", -EINVAL, 0},  {"1H", -EINVAL, 0},    {"1w", -EINVAL, 0},
	        {"00", -EINVAL, 0},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t v = 12345;
		int r = parse_duration(cases[i].text, &v);

		if (r != cases[i].r)
			fail_msg("'%s': %d, want %d", cases[i].text, r, cases[i].r);
		if (r == 0 && v != cases[i].seconds)
			fail_msg("'%s': %llu s", cases[i].text, (unsigned long long)v);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_seconds),         cmocka_unit_test(test_timeout),
	        cmocka_unit_test(test_size_exact_text), cmocka_unit_test(test_format_cpulist),
	        cmocka_unit_test(test_size_parse),      cmocka_unit_test(test_dec),
	        cmocka_unit_test(test_duration),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
