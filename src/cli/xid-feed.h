/* SPDX-License-Identifier: MIT */
/*
 * xid-feed.h: NVML's XID events on a thread of their own (xid-feed.c), beside the sampler
 * (sampler.h): waiting for an event is an NVML call too, and on the sampler's thread it would
 * wait behind a hung sample, so an XID that comes during a hang would be seen only after it.
 *
 * Who owns what: the feed's thread owns its context (handed over at xid_feed_start) and its
 * event set (gpuctl_xid_watch); the XIDs it has seen wait in a log of its own under a lock
 * until the main thread takes them (xid_feed_take), which appends them to the caller's log.
 */
#ifndef GPUCTL_CLI_XID_FEED_H
#define GPUCTL_CLI_XID_FEED_H

#include <stdbool.h>
#include <stddef.h>

#include "gpuctl/gpuctl.h"

struct xid_feed;
struct sampler_sample;

/* Starts the thread (every signal blocked in it) with ctx (the feed's from then on, also when
 * this fails) and makes the event set of snap's GPUs there; snap is kept alive by holder, a
 * sample reference the feed puts once the set is made. 0, or -errno (-ENOMEM, -EAGAIN). */
int xid_feed_start(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                   const struct sampler_sample *holder, struct xid_feed **ret_feed);

/* Readable while the feed has something to say (for poll). */
int xid_feed_fd(const struct xid_feed *f);

/* What xid_feed_take says of the feed (or a -errno: waiting failed, the feed has ended). */
enum {
	XID_FEED_STARTING = 0, /* the event set is being made */
	XID_FEED_EVENTS = 1,   /* it works */
	XID_FEED_NONE = 2,     /* it could not be made (no event API, no GPU with XID events:
	                        * the kernel log is the only source); the feed has ended */
};

/* What the feed has: appends the XIDs seen since the last call to log (indices of the
 * snapshot its event set was made from) and sets *ret_lost when NVML reported a GPU lost since
 * (the feed then waits for xid_feed_rewatch). Returns an XID_FEED_* state, or the -errno of a
 * failed wait; for XID_FEED_NONE and a failure, the reason is in err. -ENOMEM when log could
 * not take the XIDs. */
int xid_feed_take(struct xid_feed *f, struct gpuctl_xid_log *log, bool *ret_lost, char *err,
                  size_t errsize);

/* Makes the event set again for snap (kept alive by holder, put by the feed): after a lost
 * GPU, from the snapshot that marks it. */
void xid_feed_rewatch(struct xid_feed *f, const struct gpuctl_snapshot *snap,
                      const struct sampler_sample *holder);

/* Stops the thread and frees the feed (event set, context) once it ended: 0; -ETIMEDOUT when
 * it did not end within wait_s (an NVML call that does not return; the feed is left as it is,
 * for the caller's _exit). Accepts NULL. */
int xid_feed_stop(struct xid_feed *f, double wait_s);

#endif /* GPUCTL_CLI_XID_FEED_H */
