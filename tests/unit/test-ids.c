// SPDX-License-Identifier: MIT
/* test-ids.c: gpuctl_ids_resolve on synthetic snapshots: every id form, and every error. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "gpuctl/gpuctl.h"
#include "snapshot-internal.h"
#include "test-fixtures.h"

struct fixture {
	struct gpuctl_ctx *ctx;
	struct gpuctl_snapshot *snap;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(gpuctl_ctx_new(&f->ctx), 0);
	f->snap = fixture_snap8();
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	gpuctl_snapshot_free(f->snap);
	gpuctl_ctx_free(f->ctx);
	free(f);
	return 0;
}

/* Resolves ids and checks the result against want[] (terminated by SIZE_MAX). */
static void expect(struct fixture *f, const char *ids, const size_t *want)
{
	size_t *got = NULL, n = 99, k = 0;
	int r = gpuctl_ids_resolve(f->ctx, f->snap, ids, &got, &n);

	if (r < 0)
		fail_msg("'%s': %s", ids, gpuctl_errmsg(f->ctx));
	while (want[k] != SIZE_MAX)
		k++;
	assert_int_equal(n, k);
	for (size_t i = 0; i < k; i++)
		assert_int_equal(got[i], want[i]);
	free(got);
}

/* Expects -EINVAL with a message containing msg; the out-parameters stay untouched. */
static void expect_error(struct fixture *f, const char *ids, const char *msg)
{
	size_t *got = (size_t *)0x1, n = 99;
	int r = gpuctl_ids_resolve(f->ctx, f->snap, ids, &got, &n);

	assert_int_equal(r, -EINVAL);
	assert_ptr_equal(got, (size_t *)0x1);
	assert_int_equal(n, 99);
	if (!strstr(gpuctl_errmsg(f->ctx), msg))
		fail_msg("'%s': message '%s' lacks '%s'", ids, gpuctl_errmsg(f->ctx), msg);
}

#define L(...) ((const size_t[]){__VA_ARGS__, SIZE_MAX})

static void test_indices(void **state)
{
	struct fixture *f = *state;

	expect(f, "0", L(0));
	expect(f, "7,0,3", L(7, 0, 3));
	expect(f, "007", L(7));
	expect(f, " 1 ,\t2 ", L(1, 2));
	/* ranges, as the configuration's gpus accepts them (docs/config.md) */
	expect(f, "2-4", L(2, 3, 4));
	expect(f, "6-7,0", L(6, 7, 0));
	expect(f, "3-3", L(3));
	expect(f, "1,0-2", L(1, 0, 2));
	expect(f, " 0-7 ", L(0, 1, 2, 3, 4, 5, 6, 7));
	expect_error(f, "4-2", "'4-2': range goes backwards");
	expect_error(f, "2-9", "'2-9': no GPU with that index");
}

static void test_uuids(void **state)
{
	struct fixture *f = *state;

	expect(f, fixture_uuids[3], L(3));
	expect(f, "gpu-FEDCBA98-1111-2222-3333-444444444444", L(3));
	expect(f, "fedcba98-1111-2222-3333-444444444444", L(3)); /* no GPU- */
	expect(f, "GPU-fe", L(3));                               /* any prefix with GPU- */
	expect(f, "fedc", L(3));                                 /* 4 hex digits without */
	expect(f, "GPU-12ab", L(0));
	expect(f, "1234a", L(4));
	expect(f, "abcdef02-11", L(2));
}

static void test_bus_ids(void **state)
{
	struct fixture *f = *state;

	expect(f, "00000000:4E:00.0", L(3));
	expect(f, "0000:4e:00.0", L(3));
	expect(f, "4e:00.0", L(3));
	expect(f, "0:4E:0.0", L(3));
	expect(f, "00000001:b7:00.0", L(6));
	expect(f, "0001:B7:00.0", L(6));
}

static void test_duplicates_and_mixed(void **state)
{
	struct fixture *f = *state;

	expect(f, "3,GPU-fedc,4e:00.0,3", L(3));
	expect(f, "5,0,5,0", L(5, 0));
	expect(f, "GPU-1234a,7,0000:bd:00.0", L(4, 7));
}

static void test_ambiguous(void **state)
{
	struct fixture *f = *state;

	expect_error(f, "GPU-12", "'GPU-12' matches 3 GPUs (0, 4, 7): give more of the UUID");
	expect_error(f, "1234-", "");
	expect_error(f, "GPU-1234", "'GPU-1234' matches 2 GPUs (4, 7)");
	expect_error(f, "abcdef0", "matches 2 GPUs (1, 2)");
}

static void test_unknown(void **state)
{
	struct fixture *f = *state;

	expect_error(f, "8", "'8': no GPU with that index (8 GPUs: 0-7)");
	expect_error(f, "99999999999999999999999", "no GPU with that index");
	expect_error(f, "GPU-0000", "'GPU-0000': no GPU has a UUID starting with that");
	expect_error(f, "00000000:08:00.0", "'00000000:08:00.0': no GPU at PCI bus id");
	expect_error(f, "0,1,GPU-9", "'GPU-9'");
	expect_error(f, "1234", "for a UUID prefix write GPU-");
}

static void test_malformed(void **state)
{
	struct fixture *f = *state;

	expect_error(f, "", "no GPU ids given");
	expect_error(f, "  ", "no GPU ids given");
	expect_error(f, "0,,1", "entry 2 of the GPU id list is empty");
	expect_error(f, "0,", "entry 2");
	expect_error(f, ",0", "entry 1");
	expect_error(f, "abc", "too short for a UUID prefix");
	expect_error(f, "gpu0", "not a GPU index, UUID or PCI bus id");
	expect_error(f, "GPU-", "no UUID digits");
	expect_error(f, "---", "no UUID digits");
	expect_error(f, "-1", "too short for a UUID prefix");
	expect_error(f, "07:00", "not a PCI bus id");
	expect_error(f, "07:00.8", "not a PCI bus id");
	expect_error(f, "07:20.0", "not a PCI bus id");
	expect_error(f, "1:2:3:4.0", "not a PCI bus id");
	expect_error(f, "000000000:07:00.0", "not a PCI bus id");
	expect_error(f, "zz:00.0", "not a PCI bus id");
	expect_error(f, "MIG-6f3b0c0a-8c8e-5b8a-9b0a-3d7b7c1a2e11", "is a MIG device UUID");
	expect_error(f, "0 1", "not a GPU index, UUID or PCI bus id");
	expect_error(f, "x\001y", "'x?y'");
}

static void test_arguments(void **state)
{
	struct fixture *f = *state;
	size_t *got = NULL, n = 0;

	assert_int_equal(gpuctl_ids_resolve(f->ctx, NULL, "0", &got, &n), -EINVAL);
	assert_int_equal(gpuctl_ids_resolve(f->ctx, f->snap, NULL, &got, &n), -EINVAL);
	assert_int_equal(gpuctl_ids_resolve(NULL, f->snap, "9", &got, &n), -EINVAL);
	assert_int_equal(gpuctl_ids_resolve(NULL, f->snap, "1", &got, &n), 0);
	assert_int_equal(n, 1);
	free(got);
}

static void test_empty_snapshot_and_missing_facts(void **state)
{
	struct gpuctl_snapshot *s = snapshot_new_empty(2, GPUCTL_SNAP_BASIC);
	struct gpuctl_ctx *ctx = NULL;
	size_t *got = NULL, n = 0;

	(void)state;
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	assert_non_null(s);
	/* GPUs whose UUID and bus id NVML did not give are reachable by index only */
	assert_int_equal(gpuctl_ids_resolve(ctx, s, "GPU-ab", &got, &n), -EINVAL);
	assert_int_equal(gpuctl_ids_resolve(ctx, s, "00:01.0", &got, &n), -EINVAL);
	assert_int_equal(gpuctl_ids_resolve(ctx, s, "1", &got, &n), 0);
	free(got);
	gpuctl_snapshot_free(s);

	s = snapshot_new_empty(0, GPUCTL_SNAP_BASIC);
	assert_non_null(s);
	assert_int_equal(gpuctl_ids_resolve(ctx, s, "0", &got, &n), -EINVAL);
	assert_string_equal(gpuctl_errmsg(ctx), "'0': no GPU with that index (no GPUs)");
	gpuctl_snapshot_free(s);
	gpuctl_ctx_free(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_indices, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_uuids, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_bus_ids, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_duplicates_and_mixed, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_ambiguous, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_unknown, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_malformed, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_arguments, setup, teardown),
	        cmocka_unit_test(test_empty_snapshot_and_missing_facts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
