// SPDX-License-Identifier: MIT
/*
 * test-sampler.c: the sampler thread of the long-running commands (src/cli/sampler.c) with a
 * take of the test's own: every sample handed out in order (lockstep), prev is the latest good
 * sample, a failure keeps the message, a kick samples at once, the thread blocks every signal,
 * and a take that does not return makes the sample overdue and sampler_stop give up, then
 * finish once it returns. Waits are for events (the wakeup descriptor, the overdue flag),
 * each bounded by a generous deadline; nothing asserts how long anything took.
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "sampler.h"

#define DEADLINE_MS 30000 /* a wait that never ends fails here instead */

struct fake {
	int calls;          /* takes so far */
	int fail_every;     /* every n-th take fails with -EIO (0: none) */
	int block_fd;       /* >= 0: each take reads a byte from it first (a hung call) */
	int prevs[16];      /* the value of prev at each take, -1: NULL */
	bool signals_seen;  /* the thread's mask lacked SIGTERM, SIGINT or SIGHUP */
	pthread_t take_tid; /* the thread take ran on */
	bool tid_set;
};

/* CLOCK_MONOTONIC seconds, the sampler's clock */
static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void free_int(void *p)
{
	free(p);
}

static int fake_take(struct gpuctl_ctx *ctx, void *userdata, const void *prev, void **ret_data)
{
	struct fake *f = userdata;
	sigset_t mask;
	char byte;
	int *v;

	(void)ctx;
	pthread_sigmask(SIG_BLOCK, NULL, &mask);
	if (!sigismember(&mask, SIGTERM) || !sigismember(&mask, SIGINT) ||
	    !sigismember(&mask, SIGHUP))
		f->signals_seen = true;
	f->take_tid = pthread_self();
	f->tid_set = true;
	if (f->calls < 16)
		f->prevs[f->calls] = prev ? *(const int *)prev : -1;
	f->calls++;
	if (f->block_fd >= 0 && read(f->block_fd, &byte, 1) != 1)
		return -EIO;
	if (f->fail_every && f->calls % f->fail_every == 0)
		return -EIO;
	v = malloc(sizeof(*v));
	if (!v)
		return -ENOMEM;
	*v = f->calls;
	*ret_data = v;
	return 0;
}

static struct sampler *start(struct fake *f, double interval, unsigned long max)
{
	struct gpuctl_ctx *ctx = NULL;
	struct sampler *s = NULL;
	struct sampler_config cfg = {.interval = interval,
	                             .max_samples = max,
	                             .take = fake_take,
	                             .free_data = free_int,
	                             .userdata = f};

	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	cfg.ctx = ctx;
	assert_int_equal(sampler_start(&cfg, &s), 0);
	return s;
}

/* The next sample, waited for on the descriptor. */
static const struct sampler_sample *next_sample(struct sampler *s, uint64_t after)
{
	for (;;) {
		struct pollfd p = {.fd = sampler_fd(s), .events = POLLIN};
		const struct sampler_sample *m;

		assert_int_equal(poll(&p, 1, DEADLINE_MS), 1);
		m = sampler_latest(s);
		if (m && m->seq > after)
			return m;
		sampler_put(m);
	}
}

static void test_every_sample_in_order(void **state)
{
	struct fake f = {.block_fd = -1};
	struct sampler *s = start(&f, 0.01, 5);
	(void)state;

	for (uint64_t k = 1; k <= 5; k++) {
		const struct sampler_sample *m = next_sample(s, k - 1);
		/* lockstep: the consumer sees each one, none skipped */
		assert_int_equal(m->seq, k);
		assert_int_equal(m->status, 0);
		assert_int_equal(*(int *)m->data, (int)k);
		assert_string_equal(m->error, "");
		assert_true(m->done >= m->started);
		sampler_put(m);
	}
	/* max_samples taken: none will come, so none is overdue */
	assert_true(isinf(sampler_overdue_at(s)));
	assert_false(sampler_overdue(s, 1e12));
	assert_int_equal(sampler_stop(s, 10), 0);
	assert_int_equal(f.calls, 5);
	assert_false(f.signals_seen);
	assert_true(f.tid_set);
	assert_false(pthread_equal(f.take_tid, pthread_self()));
}

static void test_prev_is_the_last_good_sample(void **state)
{
	struct fake f = {.block_fd = -1, .fail_every = 2};
	struct sampler *s = start(&f, 0.01, 4);
	const struct sampler_sample *m;
	(void)state;

	m = next_sample(s, 0);
	assert_int_equal(m->status, 0);
	sampler_put(m);
	m = next_sample(s, 1); /* the second take fails */
	assert_int_equal(m->status, -EIO);
	assert_null(m->data);
	assert_string_equal(m->error, strerror(EIO)); /* no message on the context */
	sampler_put(m);
	m = next_sample(s, 2);
	assert_int_equal(m->status, 0);
	sampler_put(m);
	m = next_sample(s, 3);
	sampler_put(m);
	assert_int_equal(sampler_stop(s, 10), 0);
	/* takes 1..4 saw: nothing, sample 1, sample 1 (2 failed), sample 3 */
	assert_int_equal(f.prevs[0], -1);
	assert_int_equal(f.prevs[1], 1);
	assert_int_equal(f.prevs[2], 1);
	assert_int_equal(f.prevs[3], 3);
}

static void test_a_sample_outlives_the_sampler(void **state)
{
	struct fake f = {.block_fd = -1};
	struct sampler *s = start(&f, 0.01, 1);
	const struct sampler_sample *m = next_sample(s, 0);
	(void)state;

	assert_int_equal(sampler_stop(s, 10), 0);
	assert_int_equal(*(int *)m->data, 1);
	assert_ptr_equal(sampler_hold(m), m);
	sampler_put(m);
	sampler_put(m);
	sampler_put(NULL);
	assert_null(sampler_hold(NULL));
}

static void test_kick_samples_now(void **state)
{
	struct fake f = {.block_fd = -1};
	struct sampler *s = start(&f, 3600, 0); /* the second tick is an hour away */
	const struct sampler_sample *m;
	(void)state;

	m = next_sample(s, 0);
	sampler_put(m);
	sampler_kick(s);
	m = next_sample(s, 1);
	assert_int_equal(m->seq, 2);
	sampler_put(m);
	/* a sampler between samples stops at once */
	assert_int_equal(sampler_stop(s, 10), 0);
}

static void test_hung_take_is_overdue_and_not_waited_for(void **state)
{
	int p[2];
	struct fake f;
	struct sampler *s;
	const struct sampler_sample *m;
	struct timespec tick = {0, 10 * 1000 * 1000};
	(void)state;

	assert_int_equal(pipe(p), 0);
	f = (struct fake){.block_fd = p[0]};
	s = start(&f, 0.05, 0);
	assert_int_equal(write(p[1], "x", 1), 1); /* the first take answers */
	m = next_sample(s, 0);
	sampler_put(m);
	/* the second blocks: within the deadline the sample is overdue, having been silent
	 * for more than the threshold */
	for (int i = 0; i < DEADLINE_MS / 10 && !sampler_overdue(s, mono()); i++)
		nanosleep(&tick, NULL);
	double now = mono();
	assert_true(sampler_overdue(s, now));
	assert_true(sampler_silence(s, now) > SAMPLER_OVERDUE_MIN_S);
	assert_true(sampler_overdue_at(s) < now);
	/* no new sample meanwhile */
	m = sampler_latest(s);
	assert_int_equal(m->seq, 1);
	sampler_put(m);
	/* stop cannot wait for it */
	assert_int_equal(sampler_stop(s, 0.05), -ETIMEDOUT);
	/* once it returns the sampler can be stopped and freed */
	assert_int_equal(write(p[1], "x", 1), 1);
	assert_int_equal(sampler_stop(s, DEADLINE_MS / 1000.0), 0);
	close(p[0]);
	close(p[1]);
}

static void test_bad_config(void **state)
{
	struct sampler *s = NULL;
	struct sampler_config cfg = {.interval = 1, .take = fake_take};
	(void)state;

	assert_int_equal(sampler_start(&cfg, &s), -EINVAL); /* no context */
	assert_null(s);
	assert_int_equal(sampler_stop(NULL, 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_every_sample_in_order),
	        cmocka_unit_test(test_prev_is_the_last_good_sample),
	        cmocka_unit_test(test_a_sample_outlives_the_sampler),
	        cmocka_unit_test(test_kick_samples_now),
	        cmocka_unit_test(test_hung_take_is_overdue_and_not_waited_for),
	        cmocka_unit_test(test_bad_config),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
