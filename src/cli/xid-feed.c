// SPDX-License-Identifier: MIT
/*
 * xid-feed.c: the thread that waits for NVML's XID events (xid-feed.h), for health --watch.
 *
 * Decisions:
 * - The event set is made on the feed's thread (registering is NVML calls), from a snapshot
 *   the main thread hands over with a sample reference that keeps it alive.
 * - The thread waits in slices of XID_FEED_SLICE_MS (gpuctl_xid_watch_wait), so a stop is
 *   seen within one; an event is published at once (lock, append, eventfd), so the main
 *   thread checks and prints it while the sampler may be stuck in another call.
 * - A lost GPU (-ENODEV) frees the set and waits for a new snapshot (xid_feed_rewatch). A set
 *   that cannot be made ends the thread with XID_FEED_NONE (the kernel log is then the only
 *   source, as without an event API); a failed wait ends it with its -errno, which the main
 *   thread reports.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "sampler.h"
#include "xid-feed.h"

#define XID_FEED_SLICE_MS 100

struct xid_feed {
	struct gpuctl_ctx *ctx;         /* the thread's */
	struct gpuctl_xid_watch *watch; /* the thread's; NULL while it is being made */
	pthread_t thread;
	int efd;                             /* eventfd: something to take */
	pthread_mutex_t lock;                /* guards the fields below */
	pthread_cond_t cond;                 /* a snapshot to watch, a stop, the end */
	struct gpuctl_xid_log *pending;      /* XIDs the main thread has not taken */
	const struct gpuctl_snapshot *snap;  /* to make the event set from, NULL: none */
	const struct sampler_sample *holder; /* keeps snap alive */
	int status;                          /* XID_FEED_*, or the -errno of a failed wait */
	char error[256];                     /* its message */
	bool lost;                           /* NVML reported a GPU lost */
	bool stop;                           /* xid_feed_stop asked */
	bool ended;                          /* the thread returned */
};

static void say(struct xid_feed *f)
{
	(void)eventfd_write(f->efd, 1);
}

/* Ends the feed with status, r its reason (under the lock). */
static void fail(struct xid_feed *f, int status, int r)
{
	const char *msg = gpuctl_errmsg(f->ctx);

	f->status = status;
	snprintf(f->error, sizeof(f->error), "%s", msg && msg[0] ? msg : strerror(-r));
	say(f);
}

/* Makes the event set from the snapshot handed over (called and returning with the lock). */
static int make_watch(struct xid_feed *f)
{
	const struct gpuctl_snapshot *snap = f->snap;
	const struct sampler_sample *holder = f->holder;
	int r;

	f->snap = NULL;
	f->holder = NULL;
	pthread_mutex_unlock(&f->lock);
	r = gpuctl_xid_watch_new(f->ctx, snap, &f->watch);
	sampler_put(holder);
	pthread_mutex_lock(&f->lock);
	if (r < 0) {
		f->watch = NULL;
		fail(f, XID_FEED_NONE, r);
		return r;
	}
	f->status = XID_FEED_EVENTS;
	say(f);
	return 0;
}

/* Waits one slice for an event (called and returning with the lock). */
static int wait_slice(struct xid_feed *f, struct gpuctl_xid_log *got)
{
	int r;

	pthread_mutex_unlock(&f->lock);
	r = gpuctl_xid_watch_wait(f->ctx, f->watch, XID_FEED_SLICE_MS, got);
	if (r == -ENODEV) {
		gpuctl_xid_watch_free(f->watch);
		f->watch = NULL;
	}
	pthread_mutex_lock(&f->lock);
	if (r == 1) {
		size_t gpu;
		unsigned xid;
		const char *text;

		for (size_t i = 0; i < gpuctl_xid_log_count(got); i++)
			if (gpuctl_xid_log_get(got, i, &gpu, &xid, &text) == 0 &&
			    gpuctl_xid_log_add(f->pending, gpu, xid, text) < 0)
				return -ENOMEM;
		say(f);
	} else if (r == -ENODEV) {
		f->lost = true;
		say(f);
	} else if (r < 0) {
		fail(f, r, r);
		return r;
	}
	return 0;
}

static void *feed_main(void *arg)
{
	struct xid_feed *f = arg;

	pthread_mutex_lock(&f->lock);
	while (!f->stop) {
		struct gpuctl_xid_log *got = NULL;

		if (!f->watch) {
			if (f->snap) {
				if (make_watch(f) < 0)
					break;
			} else {
				pthread_cond_wait(&f->cond, &f->lock);
			}
			continue;
		}
		if (gpuctl_xid_log_new(&got) < 0) {
			fail(f, -ENOMEM, -ENOMEM);
			break;
		}
		int r = wait_slice(f, got);
		gpuctl_xid_log_free(got);
		if (r == -ENOMEM)
			fail(f, r, r);
		if (r < 0)
			break;
	}
	pthread_mutex_unlock(&f->lock);
	gpuctl_xid_watch_free(f->watch); /* before its context */
	f->watch = NULL;
	pthread_mutex_lock(&f->lock);
	f->ended = true;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

static void feed_free(struct xid_feed *f)
{
	sampler_put(f->holder);
	gpuctl_xid_log_free(f->pending);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
	close(f->efd);
	gpuctl_ctx_free(f->ctx);
	free(f);
}

int xid_feed_start(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                   const struct sampler_sample *holder, struct xid_feed **ret_feed)
{
	struct xid_feed *f = calloc(1, sizeof(*f));
	pthread_condattr_t ca;
	sigset_t all, old;
	int r;

	if (!f) {
		sampler_put(holder);
		gpuctl_ctx_free(ctx);
		return -ENOMEM;
	}
	f->ctx = ctx;
	f->snap = snap;
	f->holder = holder;
	f->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (f->efd < 0 || gpuctl_xid_log_new(&f->pending) < 0 || pthread_condattr_init(&ca) != 0) {
		if (f->efd >= 0)
			close(f->efd);
		gpuctl_xid_log_free(f->pending);
		sampler_put(holder);
		gpuctl_ctx_free(ctx);
		free(f);
		return -ENOMEM;
	}
	(void)pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	(void)pthread_mutex_init(&f->lock, NULL);
	(void)pthread_cond_init(&f->cond, &ca);
	pthread_condattr_destroy(&ca);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = -pthread_create(&f->thread, NULL, feed_main, f);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0) {
		feed_free(f);
		return r;
	}
	*ret_feed = f;
	return 0;
}

int xid_feed_fd(const struct xid_feed *f)
{
	return f->efd;
}

int xid_feed_take(struct xid_feed *f, struct gpuctl_xid_log *log, bool *ret_lost, char *err,
                  size_t errsize)
{
	struct gpuctl_xid_log *fresh = NULL;
	eventfd_t v;
	int r;

	(void)eventfd_read(f->efd, &v);
	pthread_mutex_lock(&f->lock);
	if (gpuctl_xid_log_count(f->pending) && gpuctl_xid_log_new(&fresh) < 0) {
		pthread_mutex_unlock(&f->lock);
		return -ENOMEM;
	}
	for (size_t i = 0; i < gpuctl_xid_log_count(f->pending); i++) {
		size_t gpu;
		unsigned xid;
		const char *text;

		if (gpuctl_xid_log_get(f->pending, i, &gpu, &xid, &text) == 0 &&
		    gpuctl_xid_log_add(log, gpu, xid, text) < 0) {
			pthread_mutex_unlock(&f->lock);
			gpuctl_xid_log_free(fresh);
			return -ENOMEM;
		}
	}
	if (fresh) {
		gpuctl_xid_log_free(f->pending);
		f->pending = fresh;
	}
	*ret_lost = f->lost;
	f->lost = false;
	r = f->status;
	if (r < 0 || r == XID_FEED_NONE)
		snprintf(err, errsize, "%s", f->error);
	pthread_mutex_unlock(&f->lock);
	return r;
}

void xid_feed_rewatch(struct xid_feed *f, const struct gpuctl_snapshot *snap,
                      const struct sampler_sample *holder)
{
	const struct sampler_sample *old;

	pthread_mutex_lock(&f->lock);
	old = f->holder;
	f->snap = snap;
	f->holder = holder;
	pthread_cond_signal(&f->cond);
	pthread_mutex_unlock(&f->lock);
	sampler_put(old);
}

int xid_feed_stop(struct xid_feed *f, double wait_s)
{
	struct timespec ts;

	if (!f)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)wait_s;
	ts.tv_nsec += (long)((wait_s - (double)(time_t)wait_s) * 1e9);
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&f->lock);
	f->stop = true;
	pthread_cond_broadcast(&f->cond);
	while (!f->ended)
		if (pthread_cond_timedwait(&f->cond, &f->lock, &ts) == ETIMEDOUT && !f->ended) {
			pthread_mutex_unlock(&f->lock);
			return -ETIMEDOUT;
		}
	pthread_mutex_unlock(&f->lock);
	pthread_join(f->thread, NULL);
	feed_free(f);
	return 0;
}
