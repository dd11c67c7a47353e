// SPDX-License-Identifier: MIT
/*
 * test-status.c: the status page's pure parts (src/cli/status-json.c, status-history.c;
 * docs/status-page.md): a peer's origin as a browser writes it (RFC 6454, section 6.2: the
 * scheme and host in lower case, the port left out when it is the scheme's default), and the
 * 24-hour history's buckets (5 minutes each, the mean of the samples in each, null where none,
 * lost GPUs left out).
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "snapshot-internal.h"
#include "status.h"

static void origin_is(const char *url, const char *want)
{
	char buf[300];

	assert_int_equal(status_origin(url, buf, sizeof(buf)), 0);
	assert_string_equal(buf, want);
}

static void test_origin(void **state)
{
	char small[8];

	(void)state;
	origin_is("http://127.0.0.1:9409", "http://127.0.0.1:9409");
	origin_is("http://GPU2.Example:9409/gpuctl", "http://gpu2.example:9409");
	origin_is("http://gpu2:80", "http://gpu2");
	origin_is("https://gpu2:443/x", "https://gpu2");
	origin_is("https://gpu2:80", "https://gpu2:80");
	origin_is("http://[::1]:9409", "http://[::1]:9409");
	origin_is("http://[::1]", "http://[::1]");
	origin_is("http://[::1]:80", "http://[::1]");
	assert_int_equal(status_origin("gpu2:9409", small, sizeof(small)), -EINVAL);
	assert_int_equal(status_origin("http://a-long-host:1", small, sizeof(small)),
	                 -ENAMETOOLONG);
}

static struct gpuctl_snapshot *snap_of(const int64_t *util, size_t n, int lost)
{
	struct gpuctl_snapshot *s = snapshot_new_empty(n, 0);

	assert_non_null(s);
	for (size_t i = 0; i < n; i++) {
		char uuid[64];
		snprintf(uuid, sizeof(uuid), "GPU-%zu", i);
		assert_int_equal(snapshot_set_str(s, i, GPUCTL_F_UUID, uuid), 0);
		if (util[i] >= 0)
			assert_int_equal(snapshot_set_int(s, i, GPUCTL_F_UTIL_GPU, util[i]), 0);
	}
	if (lost >= 0)
		snapshot_set_lost(s, (size_t)lost);
	return s;
}

static void add(struct status_history *h, int64_t u0, int64_t u1, int lost, double wall)
{
	const int64_t util[2] = {u0, u1};
	struct gpuctl_snapshot *s = snap_of(util, 2, lost);

	assert_int_equal(status_history_add(h, s, wall), 0);
	gpuctl_snapshot_free(s);
}

/* the value of bucket k (from the end: 0 the newest) of uuid at now; NAN for null */
static double bucket(const struct status_history *h, const char *uuid, double now, size_t k)
{
	json_t *a = status_history_json(h, uuid, now);
	double v;

	assert_non_null(a);
	assert_int_equal(json_array_size(a), STATUS_BUCKETS);
	json_t *x = json_array_get(a, STATUS_BUCKETS - 1 - k);
	v = json_is_null(x) ? NAN : json_number_value(x);
	json_decref(a);
	return v;
}

static void test_history(void **state)
{
	struct status_history *h = NULL;
	const double t0 = 1800000000.0; /* a multiple of 300: a bucket starts here */

	(void)state;
	assert_int_equal(status_history_new(t0, &h), 0);
	assert_true(status_history_since(h) == t0);
	/* nothing yet: every bucket null, for a GPU never seen too */
	assert_true(isnan(bucket(h, "GPU-0", t0, 0)));
	/* three samples in the first bucket: 10, 20, 60 -> 30; GPU 1 unknown in the first */
	add(h, 10, -1, -1, t0);
	add(h, 20, 50, -1, t0 + 100);
	add(h, 60, 70, -1, t0 + 299);
	assert_true(bucket(h, "GPU-0", t0 + 299, 0) == 30.0);
	assert_true(bucket(h, "GPU-1", t0 + 299, 0) == 60.0);
	/* the next bucket: GPU 1 lost, so nothing for it; GPU 0 at 1/3 rounds to one decimal */
	add(h, 0, 99, 1, t0 + 300);
	add(h, 0, 99, 1, t0 + 400);
	add(h, 1, 99, 1, t0 + 500);
	assert_true(bucket(h, "GPU-0", t0 + 500, 0) == 0.3);
	assert_true(isnan(bucket(h, "GPU-1", t0 + 500, 0)));
	assert_true(bucket(h, "GPU-0", t0 + 500, 1) == 30.0);
	/* a day on, the first bucket's slot is reused: the old mean is not mixed in */
	add(h, 80, 80, -1, t0 + 86400);
	assert_true(bucket(h, "GPU-0", t0 + 86400, 0) == 80.0);
	assert_true(bucket(h, "GPU-0", t0 + 86400, STATUS_BUCKETS - 1) == 0.3);
	/* seen from later still, old buckets fall off the end: a gap is null */
	assert_true(isnan(bucket(h, "GPU-0", t0 + 86400 + 600, 1)));
	assert_true(bucket(h, "GPU-0", t0 + 86400 + 600, 2) == 80.0);
	status_history_free(h);
	status_history_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_origin),
	        cmocka_unit_test(test_history),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
