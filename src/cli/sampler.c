// SPDX-License-Identifier: MIT
/*
 * sampler.c: the sampler thread of the long-running commands (sampler.h): NVML is read there,
 * never on the thread that draws, serves or takes signals.
 *
 * Decisions:
 * - One thread per sampler, with its own context (contexts are one thread's at a time,
 *   gpuctl.h "Thread safety"), every signal blocked, sleeping on a condition variable of
 *   CLOCK_MONOTONIC until the next tick, a kick or a stop.
 * - Lockstep: the next sample starts at its tick, but only once the consumer has been handed
 *   the latest one, so a consumer sees every sample (top's -n, health --watch checking each
 *   snapshot) and the NVML calls per refresh are what they were on one thread. A consumer
 *   that is slow to look is therefore never reported as NVML being late: the overdue clock
 *   starts when the latest sample was handed out.
 * - Samples are published under the lock and counted with atomic references; the eventfd
 *   says "a new one", and is cleared by sampler_latest.
 * - A take that never returns (a hung driver) cannot be joined or cancelled (a thread killed
 *   in the driver could leave its locks held): sampler_stop gives up after its wait and leaves
 *   everything allocated for the caller's _exit.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "sampler.h"

struct sampler {
	struct sampler_config cfg; /* as given; cfg.ctx and cfg.userdata are the thread's */
	pthread_t thread;
	pthread_mutex_t lock;          /* guards the fields below */
	pthread_cond_t wake;           /* the thread: a stop, a kick, the latest handed out */
	pthread_cond_t ended;          /* sampler_stop: the thread has ended */
	int efd;                       /* eventfd: a sample not handed out yet */
	struct sampler_sample *latest; /* the newest sample (a reference), NULL before the first */
	struct sampler_sample *good;   /* the newest that succeeded (a reference): prev of take */
	double since;   /* CLOCK_MONOTONIC: sampler_start, then when the latest was handed out */
	bool handed;    /* latest has been handed out (true before the first: nothing to hand) */
	bool stop;      /* sampler_stop asked */
	bool kick;      /* sampler_kick asked */
	bool finished;  /* max_samples taken: no more will come */
	bool has_ended; /* the thread returned */
};

static double mono_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double wall_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct timespec timespec_of(double t)
{
	double whole = floor(t);

	return (struct timespec){.tv_sec = (time_t)whole, .tv_nsec = (long)((t - whole) * 1e9)};
}

/* Waits on cond until t (CLOCK_MONOTONIC seconds; INFINITY: no limit). */
static void wait_until(pthread_cond_t *cond, pthread_mutex_t *lock, double t)
{
	if (isinf(t)) {
		pthread_cond_wait(cond, lock);
	} else {
		struct timespec ts = timespec_of(t);
		(void)pthread_cond_timedwait(cond, lock, &ts);
	}
}

const struct sampler_sample *sampler_hold(const struct sampler_sample *smp)
{
	if (smp)
		__atomic_add_fetch(&((struct sampler_sample *)smp)->refs, 1, __ATOMIC_RELAXED);
	return smp;
}

void sampler_put(const struct sampler_sample *smp)
{
	struct sampler_sample *m = (struct sampler_sample *)smp;

	if (!m || __atomic_sub_fetch(&m->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	if (m->data && m->free_data)
		m->free_data(m->data);
	free(m);
}

/* One call of take, as a sample with one reference; NULL when even that cannot be made. */
static struct sampler_sample *take_one(struct sampler *s, const struct sampler_sample *prev,
                                       uint64_t seq)
{
	struct sampler_sample *m = calloc(1, sizeof(*m));
	void *data = NULL;
	int r;

	if (!m)
		return NULL;
	m->refs = 1;
	m->seq = seq;
	m->free_data = s->cfg.free_data;
	m->started = mono_now();
	r = s->cfg.take(s->cfg.ctx, s->cfg.userdata, prev ? prev->data : NULL, &data);
	m->done = mono_now();
	m->wall = wall_now();
	if (r < 0) {
		const char *msg = gpuctl_errmsg(s->cfg.ctx);
		m->status = r;
		snprintf(m->error, sizeof(m->error), "%s", msg && msg[0] ? msg : strerror(-r));
	} else {
		m->data = data;
	}
	return m;
}

/* Makes m the latest sample (and the good one when it succeeded), under the lock. */
static void publish(struct sampler *s, struct sampler_sample *m)
{
	sampler_put(s->latest);
	s->latest = m;
	if (m->status == 0) {
		sampler_put(s->good);
		s->good = (struct sampler_sample *)sampler_hold(m);
	}
	s->handed = false;
}

static void *sampler_main(void *arg)
{
	struct sampler *s = arg;
	double next = mono_now();
	uint64_t seq = 0;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		while (!s->stop && !(s->handed && (s->kick || mono_now() >= next)))
			wait_until(&s->wake, &s->lock, s->handed ? next : INFINITY);
		if (s->stop)
			break;
		s->kick = false;
		const struct sampler_sample *prev = sampler_hold(s->good);
		pthread_mutex_unlock(&s->lock);

		struct sampler_sample *m = take_one(s, prev, seq + 1);
		sampler_put(prev);
		pthread_mutex_lock(&s->lock);
		if (m) {
			seq++;
			publish(s, m);
			(void)eventfd_write(s->efd, 1);
		}
		if (s->cfg.max_samples && seq >= s->cfg.max_samples) {
			s->finished = true;
			break;
		}
		/* the next tick after this one, or an interval from now after an overrun */
		next += s->cfg.interval;
		if (next < mono_now())
			next = mono_now() + s->cfg.interval;
	}
	pthread_mutex_unlock(&s->lock);
	if (s->cfg.finish)
		s->cfg.finish(s->cfg.ctx, s->cfg.userdata);
	pthread_mutex_lock(&s->lock);
	s->has_ended = true;
	pthread_cond_broadcast(&s->ended);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

static void sampler_free(struct sampler *s)
{
	sampler_put(s->latest);
	sampler_put(s->good);
	pthread_cond_destroy(&s->wake);
	pthread_cond_destroy(&s->ended);
	pthread_mutex_destroy(&s->lock);
	close(s->efd);
	free(s);
}

int sampler_start(const struct sampler_config *cfg, struct sampler **ret_sampler)
{
	struct sampler *s;
	pthread_condattr_t ca;
	sigset_t all, old;
	int r = -ENOMEM;

	if (!cfg || !cfg->take || !cfg->ctx || !(cfg->interval > 0) || !ret_sampler)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->cfg = *cfg;
	s->handed = true;
	s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->efd < 0)
		goto free_s;
	if (pthread_condattr_init(&ca) != 0)
		goto close_efd;
	(void)pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (pthread_cond_init(&s->wake, &ca) != 0)
		goto destroy_attr;
	if (pthread_cond_init(&s->ended, &ca) != 0)
		goto destroy_wake;
	if (pthread_mutex_init(&s->lock, NULL) != 0)
		goto destroy_ended;
	pthread_condattr_destroy(&ca);
	s->since = mono_now();
	/* the thread inherits the mask: signals go to the caller's threads, never to it */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = -pthread_create(&s->thread, NULL, sampler_main, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0) {
		sampler_free(s);
		return r;
	}
	*ret_sampler = s;
	return 0;

destroy_ended:
	pthread_cond_destroy(&s->ended);
destroy_wake:
	pthread_cond_destroy(&s->wake);
destroy_attr:
	pthread_condattr_destroy(&ca);
close_efd:
	close(s->efd);
free_s:
	free(s);
	return r;
}

int sampler_fd(const struct sampler *s)
{
	return s->efd;
}

const struct sampler_sample *sampler_latest(struct sampler *s)
{
	const struct sampler_sample *m;
	eventfd_t v;

	(void)eventfd_read(s->efd, &v);
	pthread_mutex_lock(&s->lock);
	m = sampler_hold(s->latest);
	if (m && !s->handed) {
		s->handed = true;
		s->since = mono_now();
		pthread_cond_signal(&s->wake);
	}
	pthread_mutex_unlock(&s->lock);
	return m;
}

double sampler_silence(struct sampler *s, double now)
{
	double since;

	pthread_mutex_lock(&s->lock);
	since = s->latest ? s->latest->done : s->since;
	pthread_mutex_unlock(&s->lock);
	return now > since ? now - since : 0;
}

/* The seconds of silence after which the latest sample is overdue. */
static double overdue_after(const struct sampler *s)
{
	double t = SAMPLER_OVERDUE_INTERVALS * s->cfg.interval;

	return t > SAMPLER_OVERDUE_MIN_S ? t : SAMPLER_OVERDUE_MIN_S;
}

double sampler_overdue_at(struct sampler *s)
{
	double at;

	pthread_mutex_lock(&s->lock);
	at = s->finished || !s->handed ? INFINITY : s->since + overdue_after(s);
	pthread_mutex_unlock(&s->lock);
	return at;
}

bool sampler_overdue(struct sampler *s, double now)
{
	return now > sampler_overdue_at(s);
}

void sampler_kick(struct sampler *s)
{
	pthread_mutex_lock(&s->lock);
	s->kick = true;
	pthread_cond_signal(&s->wake);
	pthread_mutex_unlock(&s->lock);
}

int sampler_stop(struct sampler *s, double wait_s)
{
	double deadline = mono_now() + wait_s;

	if (!s)
		return 0;
	pthread_mutex_lock(&s->lock);
	s->stop = true;
	pthread_cond_signal(&s->wake);
	while (!s->has_ended && mono_now() < deadline)
		wait_until(&s->ended, &s->lock, deadline);
	if (!s->has_ended) {
		pthread_mutex_unlock(&s->lock);
		return -ETIMEDOUT;
	}
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
	gpuctl_ctx_free(s->cfg.ctx);
	sampler_free(s);
	return 0;
}
