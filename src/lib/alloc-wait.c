// SPDX-License-Identifier: MIT
/*
 * alloc-wait.c: waiting in line for a lease (gpuctl_alloc() in mode LEASE with wait;
 * docs/leases.md "Waiting"), and the verdict that comes before any wait: a request no lease
 * could ever satisfy fails at once, since waiting for it could never end. Shared declarations
 * in alloc-internal.h.
 *
 * Decisions:
 * - A waiter first fails at once when no lease could ever satisfy the request (the static
 *   filters alone leave too few devices; never_satisfiable), and a shared request at once in
 *   every mode when its size is more than its devices can ever take (alloc_never_shares).
 * - Else it registers a ticket and tries select-and-lease whenever inotify says the locks or
 *   the queue changed (and the state differs from the last failed try), or every
 *   ALLOC_WAIT_FALLBACK_MS (telemetry and foreign processes change without a file event), with a
 *   fresh snapshot and plan before every try (alloc_plan_snapshot).
 * - The caller's cancel_fd is polled with the ticket's descriptor; EINTR ends the wait too, so
 *   a signal handler of the caller (Python's KeyboardInterrupt) runs at once. Nothing stays
 *   leased and the ticket is gone after any failure.
 * - Each failed try is logged at info level.
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "alloc-internal.h"
#include "ctx.h"
#include "lease-internal.h"
#include "mig-profile.h"
#include "parse.h"
#include "util.h"

/* How often a waiter retries without a file event. */
#define ALLOC_WAIT_FALLBACK_MS 2000

/* Adds device (g, mig) to *too_small when even empty it cannot take share_mem (its memory less
 * the share margin, lease_share_capacity), and keeps the largest memory and capacity seen. */
static int share_fit(struct plan *p, size_t g, int mig, struct gpuctl_devset *too_small,
                     uint64_t *largest, uint64_t *largest_cap)
{
	const uint64_t need = (p->lreq.share_mem + SHARE_UNIT - 1) / SHARE_UNIT;
	const uint64_t cap = lease_share_capacity(p->snap, g, mig, &p->lreq);
	int64_t total = 0;

	if (mig < 0)
		(void)gpuctl_gpu_int(&p->snap->gpus[g], GPUCTL_F_MEMORY_TOTAL, &total);
	else if (p->snap->gpus[g].migs[mig].valid[GPUCTL_MIG_MEMORY_TOTAL])
		total = p->snap->gpus[g].migs[mig].ints[GPUCTL_MIG_MEMORY_TOTAL];
	if (total > 0 && (uint64_t)total > *largest)
		*largest = (uint64_t)total;
	if (cap > *largest_cap)
		*largest_cap = cap;
	if (need <= cap)
		return 0;
	int r = gpuctl_devset_add(too_small, g, mig);
	return r == -EEXIST ? 0 : r;
}

/* The request with only its static filters (outer allocation, only, exclude, NUMA node, MIG
 * profile or whole GPUs, pool; lost GPUs): leases, telemetry and health aside. */
static struct gpuctl_select_request static_filters(const struct plan *p)
{
	struct gpuctl_select_request sreq = p->req;

	sreq.min_free_mem = 0;
	sreq.share_mem = 0;
	sreq.max_util = -1;
	sreq.no_procs = false;
	sreq.allow_unhealthy = true;
	sreq.leased = NULL;
	sreq.foreign = NULL;
	return sreq;
}

/* Whether no lease could ever satisfy the request: too few devices pass its static filters.
 * 0, or -ENOSPC with "can never be satisfied: ...". */
static int never_satisfiable(struct plan *p)
{
	struct gpuctl_select_request sreq = static_filters(p);
	struct gpuctl_selection *sel = NULL;
	int r;

	r = gpuctl_select(p->ctx, p->snap, &sreq, &sel);
	gpuctl_selection_free(sel);
	if (r == -ENOSPC)
		return ctx_error_prefix(p->ctx, r, "can never be satisfied");
	return r < 0 ? r : 0;
}

/* Whether a shared request can never be granted because SIZE is more than its devices can ever
 * take, shared or not: each may declare at most its memory less the share margin in all
 * (docs/leases.md, "Sharing"), whatever leases come and go. The static filters of
 * never_satisfiable, with the devices too small for SIZE left out (a request those filters
 * alone refuse is left to the usual message). 0, or -ENOSPC with "share_mem SIZE: ...: can
 * never be satisfied" naming the limit, at once in every mode: waiting could never end, and
 * "leased" would name the wrong reason. */
int alloc_never_shares(struct plan *p)
{
	struct gpuctl_select_request sreq = static_filters(p);
	_cleanup_(gpuctl_devset_freep) struct gpuctl_devset *too_small = NULL;
	struct gpuctl_selection *sel = NULL;
	uint64_t largest = 0, largest_cap = 0;
	const char *kind = p->req.mig_profile ? "MIG device" : "GPU";
	char want[32], most[32];
	int r;

	if (!p->lreq.share_mem)
		return 0;
	r = gpuctl_devset_new(&too_small);
	for (size_t g = 0; r >= 0 && g < p->snap->n_gpus; g++) {
		if (p->snap->gpus[g].lost)
			continue;
		if (!p->req.mig_profile)
			r = share_fit(p, g, -1, too_small, &largest, &largest_cap);
		for (size_t m = 0; r >= 0 && p->req.mig_profile && m < p->snap->gpus[g].n_migs;
		     m++) {
			const char *profile = p->snap->gpus[g].migs[m].profile;

			/* the devices of the profile asked for: the only candidates */
			if (profile && mig_profile_matches(p->req.mig_profile, profile))
				r = share_fit(p, g, (int)m, too_small, &largest, &largest_cap);
		}
	}
	if (r < 0)
		return ctx_error(p->ctx, -ENOMEM, "out of memory");
	if (gpuctl_devset_count(too_small) == 0)
		return 0;
	/* too few devices whatever the size: the caller's own check says so */
	r = gpuctl_select(p->ctx, p->snap, &sreq, &sel);
	gpuctl_selection_free(TAKE_PTR(sel));
	if (r < 0)
		return r == -ENOSPC ? 0 : r;
	sreq.leased = too_small;
	r = gpuctl_select(p->ctx, p->snap, &sreq, &sel);
	gpuctl_selection_free(sel);
	if (r != -ENOSPC)
		return r < 0 ? r : 0;
	(void)size_exact_text(p->lreq.share_mem, want, sizeof(want));
	if (p->lreq.share_mem > largest)
		return ctx_error(
		        p->ctx, r,
		        "share_mem %s: larger than any %s's memory (largest %s): can never be "
		        "satisfied",
		        want, kind, size_exact_text(largest, most, sizeof(most)));
	(void)size_exact_text(largest_cap * SHARE_UNIT, most, sizeof(most));
	if (p->lreq.share_mem > largest_cap * SHARE_UNIT)
		return ctx_error(
		        p->ctx, r,
		        "share_mem %s: more than any %s may share (largest %s: its memory less "
		        "share_margin): can never be satisfied",
		        want, kind, most);
	if (p->req.count == 1)
		return ctx_error(
		        p->ctx, r,
		        "share_mem %s: none of the %ss this request may use can share that "
		        "much (their memory less share_margin; largest %s): can never be "
		        "satisfied",
		        want, kind, most);
	return ctx_error(
	        p->ctx, r,
	        "share_mem %s: fewer than %u of the %ss this request may use can share that "
	        "much (their memory less share_margin; largest %s): can never be "
	        "satisfied",
	        want, p->req.count, kind, most);
}

/* LEASE with wait: in line until the devices are ours, the deadline passes, cancel_fd is ready
 * or a signal comes. */
int alloc_wait_lease(struct plan *p, struct gpuctl_selection **ret_sel,
                     struct gpuctl_lease **ret_lease)
{
	struct gpuctl_lease_dir *dir = gpuctl_site_lease_dir(p->site);
	struct gpuctl_wait_ticket *ticket = NULL;
	double t = p->in.wait_timeout_s;
	int64_t deadline = t < 0 || t > 1e12 ? INT64_MAX : monotonic_ms() + (int64_t)(t * 1000.0);
	char last[sizeof(p->ctx->errmsg)] = "";
	int64_t fallback;
	int r;

	r = never_satisfiable(p);
	if (r < 0)
		return r;
	/* select.lock too is waited for until the deadline, and the cancel descriptor ends that
	 * wait as it ends the wait in line (docs/leases.md "Bounds") */
	if (p->ctx) {
		p->ctx->lock_in_wait = true;
		p->ctx->lock_until_ms = deadline;
		p->ctx->lock_cancel_fd = p->in.cancel_fd;
	}
	r = gpuctl_wait_ticket_new(p->ctx, dir, p->snap, &p->req, &ticket);
	if (r < 0) {
		if (r != -EAGAIN && r != -ECANCELED && r != -EINTR)
			r = ctx_error_prefix(p->ctx, r, "lease directory %s",
			                     gpuctl_lease_dir_path(dir));
		goto out;
	}
	for (;;) {
		bool retry = false;

		r = lease_select_and_lease(p->ctx, dir, p->snap, &p->req, &p->lreq, ticket,
		                           p->in.replace ? p->in.replace->lease : NULL,
		                           alloc_quota_gate(p), ret_sel, ret_lease);
		/* over a quota: wait until it frees (a lease ends, the window resets) */
		if (r == 0 || (r != -ENOSPC && r != -EBUSY && r != -EDQUOT) ||
		    (r == -EDQUOT && p->quota_never))
			break;
		(void)snprintf(last, sizeof(last), "%s", gpuctl_errmsg(p->ctx));
		ctx_log(p->ctx, GPUCTL_LOG_INFO, "waiting: %s", last);
		/* the fallback counts from this try, not from the last event: events that change
		 * nothing (a reader opening the lease directory) must not put it off for ever */
		fallback = monotonic_ms() + ALLOC_WAIT_FALLBACK_MS;
		while (!retry) {
			struct pollfd pfd[2] = {
			        {.fd = p->in.cancel_fd, .events = POLLIN},
			        {.fd = gpuctl_wait_ticket_fd(ticket), .events = POLLIN}};
			int64_t now = monotonic_ms();
			int64_t left = deadline == INT64_MAX ? INT64_MAX : deadline - now;
			int64_t wait = fallback - now < left ? fallback - now : left;
			int k;

			if (left <= 0) {
				r = ctx_error(p->ctx, -ETIMEDOUT, "waited %g s: %s", t, last);
				goto out;
			}
			k = poll(pfd, 2, (int)(wait < 0 ? 0 : wait));
			if (k < 0 && errno == EINTR) {
				r = ctx_error(p->ctx, -EINTR, "waiting: interrupted by a signal");
				goto out;
			}
			if (k < 0) {
				r = ctx_error(p->ctx, -errno, "waiting: poll: %s", strerror(errno));
				goto out;
			}
			if (pfd[0].revents) {
				r = ctx_error(p->ctx, -ECANCELED, "waiting: cancelled");
				goto out;
			}
			if (k == 0 || monotonic_ms() >= fallback) {
				retry = true; /* telemetry, foreign processes, no inotify */
			} else if (pfd[1].revents & POLLIN) {
				gpuctl_wait_ticket_drain(ticket, dir);
				retry = gpuctl_wait_ticket_changed(p->ctx, dir, ticket) != 0;
			}
		}
		/* telemetry and processes may have changed: a fresh snapshot for the next try */
		r = alloc_plan_snapshot(p);
		if (r < 0)
			break;
	}
out:
	gpuctl_wait_ticket_free(ticket);
	if (p->ctx) {
		p->ctx->lock_in_wait = false;
		p->ctx->lock_cancel_fd = -1;
	}
	return r;
}
