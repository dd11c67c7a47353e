// SPDX-License-Identifier: MIT
/*
 * test-idle.c: src/lib/idle/idle.c, the idle tracker, on utilisation traces replayed here, one
 * sample a second (docs/idle.md): a training job with data-loading pauses, an idle notebook, an
 * evaluation loop at the threshold, ghost memory, a lease with no process, a clock that stands
 * still or steps back, a GPU lost and found again. Expected values come from the traces and the
 * rules of docs/idle.md (window 600 s, threshold 5 % strictly below, ghost above 256 MiB).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "idle-internal.h"

#define GIB  ((int64_t)1 << 30)
#define MIB  ((int64_t)1 << 20)
#define UUID "GPU-11111111-2222-3333-4444-555555555555"

static struct gpuctl_idle *tracker(uint32_t window, int threshold)
{
	struct gpuctl_idle_config cfg = GPUCTL_IDLE_CONFIG_INIT;
	struct gpuctl_idle *t = NULL;
	cfg.window_s = window;
	cfg.threshold = threshold;
	assert_int_equal(gpuctl_idle_new(&cfg, &t), 0);
	return t;
}

/* One sample of the one GPU UUID at second s. */
static void feed(struct gpuctl_idle *t, uint64_t s, int util, int64_t used, bool leased,
                 const struct idle_proc_fact *procs, size_t n)
{
	struct idle_fact f = {UUID, util, used, leased, procs, n};
	assert_int_equal(idle_feed_facts(t, s * 1000, &f, 1), 0);
}

static int get(struct gpuctl_idle *t, enum gpuctl_idle_case c, uint64_t *ms)
{
	return gpuctl_idle_get(t, UUID, c, ms);
}

static void test_defaults(void **state)
{
	struct gpuctl_idle_config cfg = GPUCTL_IDLE_CONFIG_INIT;
	struct gpuctl_idle *t = NULL;

	(void)state;
	assert_int_equal(cfg.window_s, 600);
	assert_int_equal(cfg.threshold, 5);
	assert_int_equal(cfg.ghost_bytes, 256 * MIB);
	cfg.window_s = 0;
	assert_int_equal(gpuctl_idle_new(&cfg, &t), -EINVAL);
	cfg.window_s = 1;
	cfg.threshold = 101;
	assert_int_equal(gpuctl_idle_new(&cfg, &t), -EINVAL);
	assert_int_equal(gpuctl_idle_new(NULL, &t), 0);
	assert_string_equal(gpuctl_idle_case_name(GPUCTL_IDLE_LEASE), "lease");
	assert_string_equal(gpuctl_idle_case_name(GPUCTL_IDLE_PROCESS), "process");
	assert_string_equal(gpuctl_idle_case_name(GPUCTL_IDLE_GHOST), "ghost");
	assert_null(gpuctl_idle_case_name((enum gpuctl_idle_case)3));
	assert_int_equal(get(t, GPUCTL_IDLE_LEASE, NULL), -ENOENT);
	gpuctl_idle_free(t);
	gpuctl_idle_free(NULL);
}

/* 60 s at 90 %, then 20 s at 0 % loading data, for an hour: never idle. */
static void test_busy_training(void **state)
{
	struct gpuctl_idle *t = tracker(600, 5);
	struct idle_proc_fact p = {4242, 8 * GIB, -1, true};

	(void)state;
	for (uint64_t s = 0; s < 3600; s++) {
		int util = s % 80 < 60 ? 90 : 0;
		feed(t, s, util, 9 * GIB, true, &p, 1);
		for (int c = 0; c < GPUCTL_IDLE_CASES; c++)
			assert_int_equal(get(t, (enum gpuctl_idle_case)c, NULL), 0);
		assert_int_equal(gpuctl_idle_proc(t, UUID, 4242, NULL), 0);
	}
	gpuctl_idle_free(t);
}

/* A notebook holding 4 GiB at 0 % for 15 minutes: found after one window, at 600 s. */
static void test_idle_notebook(void **state)
{
	struct gpuctl_idle *t = tracker(600, 5);
	struct idle_proc_fact p = {777, 4 * GIB, -1, true};
	uint64_t ms = 0;

	(void)state;
	for (uint64_t s = 0; s < 600; s++) {
		feed(t, s, 0, 4 * GIB, false, &p, 1);
		assert_int_equal(get(t, GPUCTL_IDLE_PROCESS, NULL), 0);
	}
	for (uint64_t s = 600; s <= 900; s++) {
		feed(t, s, 0, 4 * GIB, false, &p, 1);
		assert_int_equal(get(t, GPUCTL_IDLE_PROCESS, &ms), 1);
		assert_int_equal(ms, s * 1000);
		assert_int_equal(gpuctl_idle_proc(t, UUID, 777, &ms), 1);
		assert_int_equal(ms, s * 1000);
	}
	assert_int_equal(gpuctl_idle_watched(t, UUID, &ms), 0);
	assert_int_equal(ms, 900000);
	/* not a ghost, no lease */
	assert_int_equal(get(t, GPUCTL_IDLE_GHOST, NULL), 0);
	assert_int_equal(get(t, GPUCTL_IDLE_LEASE, NULL), 0);
	/* one busy sample ends it; the window starts again */
	feed(t, 901, 50, 4 * GIB, false, &p, 1);
	assert_int_equal(get(t, GPUCTL_IDLE_PROCESS, NULL), 0);
	feed(t, 902 + 599, 0, 4 * GIB, false, &p, 1);
	assert_int_equal(get(t, GPUCTL_IDLE_PROCESS, NULL), 0);
	gpuctl_idle_free(t);
}

/* An evaluation loop at 5 % +- 1 (4, 5, 6, 5, ...) for 20 minutes. */
static void eval_loop(int threshold, bool want_idle)
{
	struct gpuctl_idle *t = tracker(600, threshold);
	struct idle_proc_fact p = {31, 2 * GIB, -1, true};
	static const int trace[] = {4, 5, 6, 5};

	for (uint64_t s = 0; s < 1200; s++) {
		feed(t, s, trace[s % 4], 2 * GIB, false, &p, 1);
		assert_int_equal(get(t, GPUCTL_IDLE_PROCESS, NULL), want_idle && s >= 600);
	}
	gpuctl_idle_free(t);
}

static void test_eval_loop_threshold(void **state)
{
	(void)state;
	eval_loop(5, false); /* 5 and 6 are not strictly below 5 */
	eval_loop(6, false); /* 6 is not below 6 */
	eval_loop(7, true);  /* every sample below 7 */
}

/* Exactly at the threshold is not below it; one under is. */
static void test_threshold_sides(void **state)
{
	struct idle_proc_fact p = {5, GIB, -1, true};
	struct gpuctl_idle *at = tracker(60, 5), *under = tracker(60, 5);

	(void)state;
	for (uint64_t s = 0; s <= 60; s++) {
		feed(at, s, 5, GIB, false, &p, 1);
		feed(under, s, 4, GIB, false, &p, 1);
	}
	assert_int_equal(get(at, GPUCTL_IDLE_PROCESS, NULL), 0);
	assert_int_equal(get(under, GPUCTL_IDLE_PROCESS, NULL), 1);
	gpuctl_idle_free(at);
	gpuctl_idle_free(under);
}

/* A process's SM share is judged before its GPU's utilisation: an idle process beside a busy
 * one on the same GPU. */
static void test_process_share(void **state)
{
	struct idle_proc_fact p[2] = {{1, GIB, 0, true}, {2, GIB, 95, true}};
	struct gpuctl_idle *t = tracker(10, 5);

	(void)state;
	for (uint64_t s = 0; s <= 10; s++)
		feed(t, s, 95, 2 * GIB, false, p, 2);
	assert_int_equal(gpuctl_idle_proc(t, UUID, 1, NULL), 1);
	assert_int_equal(gpuctl_idle_proc(t, UUID, 2, NULL), 0);
	assert_int_equal(gpuctl_idle_proc(t, UUID, 3, NULL), -ENOENT);
	assert_int_equal(get(t, GPUCTL_IDLE_PROCESS, NULL), 1);
	gpuctl_idle_free(t);
}

/* A process holding no memory is not case (b); one sample never finds (b). */
static void test_no_memory_one_sample(void **state)
{
	struct idle_proc_fact p = {9, 0, -1, true}, q = {9, GIB, -1, true};
	struct gpuctl_idle *t = tracker(1, 5);

	(void)state;
	feed(t, 0, 0, GIB, false, &p, 1);
	feed(t, 5, 0, GIB, false, &p, 1);
	assert_int_equal(get(t, GPUCTL_IDLE_PROCESS, NULL), 0);
	gpuctl_idle_free(t);
	t = tracker(1, 5);
	feed(t, 0, 0, GIB, false, &q, 1);
	assert_int_equal(get(t, GPUCTL_IDLE_PROCESS, NULL), 0);
	gpuctl_idle_free(t);
}

static void test_ghost(void **state)
{
	struct idle_proc_fact gone = {123, GIB, -1, false}, live = {124, GIB, -1, true};
	struct gpuctl_idle *t = tracker(600, 5);
	uint64_t ms = 1;

	(void)state;
	/* no process listed, 1 GiB used: ghost now, for 0 s */
	feed(t, 0, 0, GIB, false, NULL, 0);
	assert_int_equal(get(t, GPUCTL_IDLE_GHOST, &ms), 1);
	assert_int_equal(ms, 0);
	assert_non_null(strstr(gpuctl_idle_ghost_cause(t, UUID), "no compute process listed"));
	feed(t, 30, 0, GIB, false, NULL, 0);
	assert_int_equal(get(t, GPUCTL_IDLE_GHOST, &ms), 1);
	assert_int_equal(ms, 30000);
	/* a listed process /proc does not show */
	feed(t, 40, 0, GIB, false, &gone, 1);
	assert_int_equal(get(t, GPUCTL_IDLE_GHOST, &ms), 1);
	assert_int_equal(ms, 40000);
	assert_non_null(strstr(gpuctl_idle_ghost_cause(t, UUID), "not in /proc"));
	/* a live process: not ghost */
	feed(t, 50, 0, GIB, false, &live, 1);
	assert_int_equal(get(t, GPUCTL_IDLE_GHOST, NULL), 0);
	assert_null(gpuctl_idle_ghost_cause(t, UUID));
	/* exactly the threshold is not above it; unknown memory is never ghost */
	feed(t, 60, 0, 256 * MIB, false, NULL, 0);
	assert_int_equal(get(t, GPUCTL_IDLE_GHOST, NULL), 0);
	feed(t, 61, 0, 256 * MIB + 1, false, NULL, 0);
	assert_int_equal(get(t, GPUCTL_IDLE_GHOST, NULL), 1);
	feed(t, 62, 0, -1, false, NULL, 0);
	assert_int_equal(get(t, GPUCTL_IDLE_GHOST, NULL), 0);
	gpuctl_idle_free(t);
}

static void test_lease_without_process(void **state)
{
	struct idle_proc_fact p = {55, GIB, -1, true}, gone = {55, GIB, -1, false};
	struct gpuctl_idle *t = tracker(600, 5);
	uint64_t ms = 1;

	(void)state;
	/* leased from the first sample with no process: holds, "at least now" */
	feed(t, 0, 0, 0, true, NULL, 0);
	assert_int_equal(get(t, GPUCTL_IDLE_LEASE, &ms), 1);
	assert_int_equal(ms, 0);
	/* a job starts */
	feed(t, 10, 80, GIB, true, &p, 1);
	assert_int_equal(get(t, GPUCTL_IDLE_LEASE, NULL), 0);
	feed(t, 20, 80, GIB, true, &p, 1);
	/* its process is gone (listed, not in /proc): idle since 20 s, the last sample with one */
	feed(t, 30, 0, GIB, true, &gone, 1);
	assert_int_equal(get(t, GPUCTL_IDLE_LEASE, &ms), 1);
	assert_int_equal(ms, 10000);
	feed(t, 95, 0, 0, true, NULL, 0);
	assert_int_equal(get(t, GPUCTL_IDLE_LEASE, &ms), 1);
	assert_int_equal(ms, 75000);
	/* released */
	feed(t, 100, 0, 0, false, NULL, 0);
	assert_int_equal(get(t, GPUCTL_IDLE_LEASE, NULL), 0);
	gpuctl_idle_free(t);
}

/* A clock that stands still counts nothing; one that steps back counts nothing either. */
static void test_clock(void **state)
{
	struct idle_proc_fact p = {8, GIB, -1, true};
	struct gpuctl_idle *t = tracker(60, 5);
	uint64_t ms = 1;

	(void)state;
	for (int i = 0; i < 1000; i++)
		feed(t, 100, 0, GIB, true, &p, 1);
	assert_int_equal(get(t, GPUCTL_IDLE_PROCESS, NULL), 0);
	feed(t, 0, 0, 0, true, NULL, 0); /* back 100 s */
	assert_int_equal(get(t, GPUCTL_IDLE_LEASE, &ms), 1);
	assert_int_equal(ms, 0);
	assert_int_equal(gpuctl_idle_watched(t, UUID, &ms), 0);
	assert_int_equal(ms, 0);
	feed(t, 130, 0, 0, true, NULL, 0); /* 30 s after the last time it counted */
	assert_int_equal(get(t, GPUCTL_IDLE_LEASE, &ms), 1);
	assert_int_equal(ms, 30000);
	gpuctl_idle_free(t);
}

/* A GPU lost (absent from a sample) is forgotten; found again it starts afresh. */
static void test_lost_and_found(void **state)
{
	struct idle_proc_fact p = {77, 4 * GIB, -1, true};
	struct gpuctl_idle *t = tracker(600, 5);
	uint64_t ms = 0;

	(void)state;
	for (uint64_t s = 0; s <= 600; s++)
		feed(t, s, 0, 4 * GIB, false, &p, 1);
	assert_int_equal(get(t, GPUCTL_IDLE_PROCESS, NULL), 1);
	assert_int_equal(idle_feed_facts(t, 601000, NULL, 0), 0); /* lost */
	assert_int_equal(get(t, GPUCTL_IDLE_PROCESS, NULL), -ENOENT);
	assert_null(gpuctl_idle_ghost_cause(t, UUID));
	for (uint64_t s = 700; s < 1300; s++) {
		feed(t, s, 0, 4 * GIB, false, &p, 1);
		assert_int_equal(get(t, GPUCTL_IDLE_PROCESS, NULL), 0);
	}
	feed(t, 1300, 0, 4 * GIB, false, &p, 1);
	assert_int_equal(get(t, GPUCTL_IDLE_PROCESS, &ms), 1);
	assert_int_equal(ms, 600000);
	gpuctl_idle_free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_defaults),
	        cmocka_unit_test(test_busy_training),
	        cmocka_unit_test(test_idle_notebook),
	        cmocka_unit_test(test_eval_loop_threshold),
	        cmocka_unit_test(test_threshold_sides),
	        cmocka_unit_test(test_process_share),
	        cmocka_unit_test(test_no_memory_one_sample),
	        cmocka_unit_test(test_ghost),
	        cmocka_unit_test(test_lease_without_process),
	        cmocka_unit_test(test_clock),
	        cmocka_unit_test(test_lost_and_found),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
