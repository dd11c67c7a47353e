// SPDX-License-Identifier: MIT
/*
 * test-sbuf.c: src/lib/basic/sbuf.c, the growing text: appends, printf past the first
 * allocation, the bound, the oom latch, and sbuf_done.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sbuf.h"

static void test_append(void **state)
{
	struct sbuf b = SBUF_INIT;

	(void)state;
	assert_null(b.p);
	sbuf_puts(&b, ""); /* appending nothing still gives a C string */
	assert_non_null(b.p);
	assert_string_equal(b.p, "");
	assert_int_equal(b.len, 0);
	sbuf_append(&b, "abcdef", 3);
	sbuf_puts(&b, ",");
	sbuf_printf(&b, "%d:%s", 42, "x");
	assert_string_equal(b.p, "abc,42:x");
	assert_int_equal(b.len, 8);
	assert_false(b.oom);
	/* reuse: len back to 0 keeps the allocation */
	b.len = 0;
	sbuf_printf(&b, "%s", "y");
	assert_string_equal(b.p, "y");
	sbuf_done(&b);
	assert_null(b.p);
	assert_int_equal(b.len, 0);
	sbuf_done(&b); /* twice is harmless */
}

static void test_grow(void **state)
{
	struct sbuf b = SBUF_INIT;
	char big[1000];

	(void)state;
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	for (int i = 0; i < 10; i++)
		sbuf_printf(&b, "%s|", big); /* each one longer than the first allocation */
	assert_false(b.oom);
	assert_int_equal(b.len, 10 * sizeof(big));
	assert_int_equal(strlen(b.p), b.len);
	assert_int_equal(b.p[sizeof(big) - 1], '|');
	sbuf_done(&b);
}

static void test_bound(void **state)
{
	struct sbuf b = SBUF_INIT_MAX(8);

	(void)state;
	sbuf_puts(&b, "1234567"); /* 7 bytes and the NUL: exactly the bound */
	assert_false(b.oom);
	assert_string_equal(b.p, "1234567");
	sbuf_puts(&b, "8"); /* past it: oom, the text left as it was */
	assert_true(b.oom);
	assert_string_equal(b.p, "1234567");
	b.len = 0; /* oom stays: nothing appends any more */
	sbuf_puts(&b, "x");
	assert_int_equal(b.len, 0);
	sbuf_done(&b);
	assert_false(b.oom);
	assert_int_equal(b.max, 8); /* the bound is kept */
	sbuf_printf(&b, "%s", "123456789");
	assert_true(b.oom);
	sbuf_done(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_append),
	        cmocka_unit_test(test_grow),
	        cmocka_unit_test(test_bound),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
