// SPDX-License-Identifier: MIT
/*
 * test-utf8.c: src/lib/basic/utf8.c, text for JSON. Expected values come from RFC 3629 §4 (the
 * table of well-formed byte sequences) and from Markus Kuhn's UTF-8 decoder stress test (overlong
 * forms, surrogates, code points above U+10FFFF, truncated sequences), never from the code.
 * fuzz/fuzz-json.c checks with jansson that any bytes give JSON.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "utf8.h"

#define R UTF8_REPLACEMENT

static void test_sequences(void **state)
{
	static const struct {
		const char *in;  /* bytes */
		const char *out; /* utf8_valid_copy */
	} cases[] = {
	        {"", ""},
	        {"plain ASCII", "plain ASCII"},
	        {"\xc3\xa9", "\xc3\xa9"},                 /* U+00E9, 2 bytes */
	        {"\xe2\x82\xac", "\xe2\x82\xac"},         /* U+20AC, 3 bytes */
	        {"\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80"}, /* U+1F600, 4 bytes */
	        {"\xf4\x8f\xbf\xbf", "\xf4\x8f\xbf\xbf"}, /* U+10FFFF, the last */
	        {"\xef\xbf\xbd", "\xef\xbf\xbd"},         /* U+FFFD itself */
	        {"\xff", R},                              /* never in UTF-8 */
	        {"\xfe\xff", R R},                        /* nor these */
	        {"\x80", R},                              /* a lone continuation */
	        {"\xc0\xaf", R R},                        /* overlong '/' */
	        {"\xe0\x80\xaf", R R R},                  /* overlong '/', 3 bytes */
	        {"\xed\xa0\x80", R R R},                  /* U+D800, a surrogate */
	        {"\xf4\x90\x80\x80", R R R R},            /* U+110000, too high */
	        {"\xe2\x82", R R},                        /* truncated */
	        {"a\xe2\x82"
	         "b",
	         "a" R R "b"},                                     /* truncated inside text */
	        {"\xc3\xa9\xff\xc3\xa9", "\xc3\xa9" R "\xc3\xa9"}, /* one bad byte between */
	};

	(void)state;
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		char *got = utf8_valid_copy(cases[k].in, SIZE_MAX);

		assert_non_null(got);
		assert_string_equal(got, cases[k].out);
		free(got);
	}
	/* the lengths RFC 3629's table gives, and 0 past the bytes available */
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xc3\xa9", 2), 2);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xe2\x82\xac", 3), 3);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xf0\x9f\x98\x80", 4), 4);
	assert_int_equal(utf8_seq_len((const unsigned char *)"\xe2\x82\xac", 2), 0);
	assert_int_equal(utf8_seq_len((const unsigned char *)"x", 0), 0);
}

static void test_json_quote(void **state)
{
	char *q;

	(void)state;
	/* RFC 8259 §7: quote and backslash escaped, control characters as \u00XX */
	q = utf8_json_quote("a\"b\\c\n\t\x01\x7f\xff\xc3\xa9", SIZE_MAX);
	assert_non_null(q);
	assert_string_equal(q, "\"a\\\"b\\\\c\\n\\t\\u0001\\u007f" R "\xc3\xa9\"");
	free(q);
	/* a cut inside a sequence leaves no partial sequence behind */
	q = utf8_json_quote("\xe2\x82\xac", 2);
	assert_non_null(q);
	assert_string_equal(q, "\"" R R "\"");
	free(q);
	q = utf8_json_quote("", 10);
	assert_non_null(q);
	assert_string_equal(q, "\"\"");
	free(q);
	/* the copy is cut the same way */
	q = utf8_valid_copy("abc\xc3\xa9", 4);
	assert_non_null(q);
	assert_string_equal(q, "abc" R);
	free(q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_sequences),
	        cmocka_unit_test(test_json_quote),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
