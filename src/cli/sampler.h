/* SPDX-License-Identifier: MIT */
/*
 * sampler.h: a thread that takes a sample every interval (sampler.c), for the commands that
 * run until stopped (top, health --watch, the exporter). Their NVML calls are made there, so a
 * driver call that never returns stops the samples only: the screen, the event loop and the
 * signals go on, the latest sample is shown as overdue, and the program can still exit.
 *
 * Who owns what:
 * - The caller makes the thread's context and hands it over at sampler_start; from then on
 *   only the sampler's thread uses it (take runs there), and sampler_stop frees it.
 * - take's userdata is the thread's from sampler_start on, until sampler_stop returns 0.
 * - A sample never changes once published; it is reference-counted, so the consumer and the
 *   thread (which refreshes the last good sample) read it at once; the last reference frees
 *   it, on whichever thread drops it.
 */
#ifndef GPUCTL_CLI_SAMPLER_H
#define GPUCTL_CLI_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "gpuctl/gpuctl.h"

/* A sample's latest is overdue once no sample has come for more than this many intervals,
 * and at least SAMPLER_OVERDUE_MIN_S seconds (at -d 0.1, a fifth of a second late is no
 * reason to mark values stale). */
#define SAMPLER_OVERDUE_INTERVALS 2
#define SAMPLER_OVERDUE_MIN_S     1.0
/* How long a command that stops waits for a sample under way before it exits without it. */
#define SAMPLER_STOP_WAIT_S 0.2

struct sampler;

/* One sample. Read-only for everyone; valid while a reference is held. */
struct sampler_sample {
	void *data;      /* what take made; NULL when it failed */
	int status;      /* 0, or take's -errno */
	char error[256]; /* the failure: the context's message, else strerror; "" after success */
	uint64_t seq;    /* 1 for the first sample, one more for each after it */
	double started;  /* CLOCK_MONOTONIC seconds: take was called */
	double done;     /* CLOCK_MONOTONIC seconds: take returned */
	double wall;     /* CLOCK_REALTIME seconds of the same moment */
	/* private to sampler.c */
	void (*free_data)(void *data);
	unsigned refs;
};

/* Makes one sample on the sampler's thread with its context. prev: the data of the latest
 * sample that succeeded (NULL before the first), to refresh; it is shared with readers, so
 * only read. Returns 0 and sets *ret_data, or -errno with the message on ctx. */
typedef int (*sampler_take_fn)(struct gpuctl_ctx *ctx, void *userdata, const void *prev,
                               void **ret_data);

struct sampler_config {
	double interval;               /* seconds from one sample's start to the next's, > 0 */
	unsigned long max_samples;     /* take this many, then stop sampling; 0: no limit */
	struct gpuctl_ctx *ctx;        /* the thread's context (see above) */
	sampler_take_fn take;          /* makes a sample */
	void (*free_data)(void *data); /* frees what take made (on any thread) */
	/* NULL, or run on the thread as it ends, before its context is freed: for what take
	 * keeps in userdata that needs the context (an XID watch) */
	void (*finish)(struct gpuctl_ctx *ctx, void *userdata);
	void *userdata; /* take's (and finish's) */
};

/* Starts the thread (with every signal blocked in it, so signals reach the caller's threads).
 * It takes the first sample at once, then one every interval, each only once the consumer has
 * been handed the one before (sampler_latest), so a consumer sees every sample. 0, or -errno
 * (-EINVAL, -ENOMEM, -EAGAIN); on failure the context stays the caller's. */
int sampler_start(const struct sampler_config *cfg, struct sampler **ret_sampler);

/* A descriptor that is readable while a sample has come that sampler_latest has not returned
 * yet (for poll). */
int sampler_fd(const struct sampler *s);

/* A new reference to the latest sample (release it with sampler_put), or NULL before the
 * first. Clears sampler_fd's readiness and lets the thread take the next sample. */
const struct sampler_sample *sampler_latest(struct sampler *s);

/* Another reference to a sample; releases one (the last frees it). Both accept NULL. */
const struct sampler_sample *sampler_hold(const struct sampler_sample *smp);
void sampler_put(const struct sampler_sample *smp);

/* Seconds since the latest sample came (since sampler_start before the first) at now
 * (CLOCK_MONOTONIC). */
double sampler_silence(struct sampler *s, double now);
/* Whether the latest sample is overdue at now: the sampler still samples and has been silent
 * for more than SAMPLER_OVERDUE_INTERVALS intervals (and SAMPLER_OVERDUE_MIN_S). */
bool sampler_overdue(struct sampler *s, double now);
/* When it becomes overdue unless a sample comes (CLOCK_MONOTONIC); INFINITY once it has taken
 * max_samples, or while the latest sample waits to be handed out. */
double sampler_overdue_at(struct sampler *s);

/* Takes the next sample now, without waiting for the interval (a GPU was lost: look again). */
void sampler_kick(struct sampler *s);

/* Stops sampling and, once the thread has ended, frees the sampler, its context and its own
 * references (samples the caller holds stay valid until put): 0. A take that has not returned
 * within wait_s seconds is not waited for: -ETIMEDOUT, and the sampler is left as it is (call
 * again to wait more); a program that will not wait exits with _exit (cli_exit_now), since a
 * thread stuck in a driver call can be neither joined nor cancelled. Accepts NULL. */
int sampler_stop(struct sampler *s, double wait_s);

#endif /* GPUCTL_CLI_SAMPLER_H */
