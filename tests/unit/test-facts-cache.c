// SPDX-License-Identifier: MIT
/*
 * test-facts-cache.c: the facts cache file's reader and writer (src/lib/nvml/facts-cache.c):
 * a whole file of this boot and driver is read to its entries and written back to the same text;
 * a file of another boot or driver is -ESTALE; anything not exactly the format (one bad line, a
 * spelling the writer never makes, a fact out of range, a missing end of line) rejects the whole
 * file.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "facts-cache.h"
#include "sbuf.h"

#define BOOT  "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
#define DRV   "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  (nvsim)"
#define HEAD  "gpuctl-facts 2\nboot " BOOT "\ndriver " DRV "\n"
#define UUID0 "GPU-7678cc1a-b9d2-add0-5a60-0853a8779508"
#define LINE0 "gpu\t" UUID0 "\t00000000:07:00.0\t548540638\t89\t16\tNVIDIA A100-SXM4-80GB\n"
#define LINE1 "gpu\tGPU-f4c6dae6-f4a3-a34c-9d6d-1e4dfd37e526\t\t\t\t\t\n"

static int parse(const char *text, struct facts_cache **c)
{
	*c = NULL;
	return facts_cache_parse(text, strlen(text), BOOT, DRV, c);
}

static void test_whole_file_round_trip(void **state)
{
	const char *text = HEAD LINE0 LINE1;
	struct facts_cache *c = NULL;
	struct sbuf b = SBUF_INIT;
	const struct facts_entry *e;

	(void)state;
	assert_int_equal(parse(text, &c), 0);
	assert_int_equal(c->n, 2);
	e = facts_cache_find(c, UUID0);
	assert_non_null(e);
	assert_string_equal(e->bus, "00000000:07:00.0");
	assert_string_equal(e->name, "NVIDIA A100-SXM4-80GB");
	assert_true(e->has_device_id && e->device_id == 0x20B210DE);
	assert_true(e->has_slowdown && e->slowdown_c == 89);
	assert_true(e->has_width_max && e->width_max == 16);
	/* the second GPU: known by UUID, no fact */
	e = facts_cache_find(c, "GPU-f4c6dae6-f4a3-a34c-9d6d-1e4dfd37e526");
	assert_non_null(e);
	assert_false(e->has_device_id || e->has_slowdown || e->has_width_max || e->bus[0] ||
	             e->name[0]);
	assert_null(facts_cache_find(c, "GPU-0"));
	facts_cache_format(c, &b);
	assert_false(b.oom);
	assert_string_equal(b.p, text);
	sbuf_done(&b);
	facts_cache_free(c);
	/* no GPU at all is a file too */
	assert_int_equal(parse(HEAD, &c), 0);
	assert_int_equal(c->n, 0);
	facts_cache_free(c);
}

static void test_another_boot_or_driver(void **state)
{
	struct facts_cache *c = NULL;

	(void)state;
	assert_int_equal(facts_cache_parse(HEAD LINE0, strlen(HEAD LINE0),
	                                   "11111111-2222-3333-4444-555555555555", DRV, &c),
	                 -ESTALE);
	assert_null(c);
	/* the same boot, another driver (one upgraded without a reboot) */
	assert_int_equal(
	        facts_cache_parse(HEAD LINE0, strlen(HEAD LINE0), BOOT,
	                          "NVRM version: NVIDIA UNIX x86_64 Kernel Module  560.35.03", &c),
	        -ESTALE);
	assert_null(c);
}

static void test_not_the_format(void **state)
{
	static const char *const bad[] = {
	        "",
	        "gpuctl-facts 1\nboot " BOOT "\ndriver " DRV "\n", /* another version */
	        "gpuctl-facts 2\nboot " BOOT "\ndriver " DRV,      /* no end of line */
	        "gpuctl-facts 2\nboot 0F1E2D3C-4b5a-6978-8796-a5b4c3d2e1f0\ndriver \n", /* upper
	                                                                                   case */
	        "gpuctl-facts 2\n",                                   /* no boot */
	        "gpuctl-facts 2\nboot " BOOT "\n",                    /* no driver */
	        "gpuctl-facts 2\nboot " BOOT "\ndriver \x01\n",       /* not printable */
	        HEAD LINE0 LINE0,                                     /* a UUID twice */
	        HEAD "gpu\tGPU-1\t00000000:07:00.0\t1\t89\t16\tx",    /* cut short */
	        HEAD "gpu\tGPU-1\t0000:07:00.0\t1\t89\t16\tx\n",      /* another bus spelling */
	        HEAD "gpu\tGPU-1\t00000000:07:00.0\t1\t89\t3\tx\n",   /* no such width */
	        HEAD "gpu\tGPU-1\t00000000:07:00.0\t1\t0\t16\tx\n",   /* slowdown 0 */
	        HEAD "gpu\tGPU-1\t00000000:07:00.0\t-1\t89\t16\tx\n", /* a sign */
	        HEAD "gpu\tGPU-1\t00000000:07:00.0\t4294967296\t89\t16\tx\n", /* past 32 bits */
	        HEAD "gpu\tGPU-1\t00000000:07:00.0\t1\t89\t16\tx\ty\n",       /* a field more */
	        HEAD "gpu\tGPU-1\t00000000:07:00.0\t1\t89\t16\n",             /* a field less */
	        HEAD "gpu\tGPU-1\t\t\t\t\tbell\a\n",   /* a control character */
	        HEAD "gpu\tGPU-1\t\t\t\t\t\xff\xfe\n", /* not UTF-8 */
	        HEAD "gpu\tMIG-1\t\t\t\t\t\n",         /* not a GPU UUID */
	        HEAD "gpu\tGPU-x y\t\t\t\t\t\n",       /* not a UUID */
	        HEAD "\n",                             /* an empty line */
	        HEAD "cpu\tGPU-1\t\t\t\t\t\n",         /* another kind */
	};

	(void)state;
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		struct facts_cache *c = NULL;

		if (parse(bad[k], &c) != -EINVAL)
			fail_msg("entry %zu was taken: %s", k, bad[k]);
		assert_null(c);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_whole_file_round_trip),
	        cmocka_unit_test(test_another_boot_or_driver),
	        cmocka_unit_test(test_not_the_format),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
