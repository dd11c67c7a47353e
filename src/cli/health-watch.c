// SPDX-License-Identifier: MIT
/*
 * health-watch.c: `gpuctl health --watch`: the one-shot check, repeated, printing each finding
 * when it appears (and when it clears) instead of a report.
 *
 * Decisions:
 * - Two sources of change, each on a thread of its own, so this one never calls NVML: XIDs
 *   arrive through NVML events, waited for by the XID feed (xid-feed.h); an XID is checked
 *   and printed at once (the aim is under a second from injection to finding). Everything
 *   else is read by a fresh snapshot every --interval seconds on the sampler's thread
 *   (sampler.h), checked with the previous snapshot as `prev`, so the rate rules (PCIe
 *   replays, growing DBE pages) work here although a one-shot check cannot apply them. This
 *   thread waits on both and a signalfd.
 * - Without NVML events (old driver, -EOPNOTSUPP) the kernel log is re-read with every new
 *   snapshot instead. When NVML reports a GPU lost, the sampler takes a snapshot at once (it
 *   marks the one lost GPU) and the event set is made again from it.
 * - A hung driver call stops the snapshots only: XIDs still come (without events, the kernel
 *   log is re-read every interval while the snapshot is overdue), and once none has come for
 *   two intervals one finding of no GPU, nvml-hang, says "NVML not answering for N s", cleared
 *   by the next snapshot; it changes no verdict.
 * - What is checked, printed and recorded is the tracker's (health-track.h), which the agent
 *   runs on its samples too: a finding printed once and "cleared" when it goes, the lines on
 *   stdout (text, or with --format json one JSON object per line), the state file.
 * - Exit: on SIGINT/SIGTERM/SIGHUP, with the worst verdict of the last check (0, 10, 20); a
 *   thread still in an NVML call then is not waited for (cli_exit_now).
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format.h"
#include "health-track.h"
#include "health-watch.h"
#include "sampler.h"
#include "xid-feed.h"

/* ---- the samples (on the sampler's thread) and the loop ---- */

#define WATCH_FLAGS (GPUCTL_SNAP_HEALTH | GPUCTL_SNAP_TOPOLOGY)
/* How long the end waits for the XID feed's thread: a little more than its wait slice. */
#define FEED_STOP_WAIT_S 0.5

/* sampler_take_fn: every interval a snapshot of the facts the checks read, and identity:
 * nothing else is shown. */
static int watch_take(struct gpuctl_ctx *ctx, void *userdata, const void *prev, void **ret_data)
{
	struct gpuctl_snapshot *snap = NULL;
	size_t nhf;
	const enum gpuctl_field *hf = gpuctl_health_fields(&nhf);
	int r = gpuctl_snapshot_take_fields(ctx, WATCH_FLAGS, hf, nhf, &snap);
	(void)userdata;
	(void)prev;

	if (r >= 0)
		*ret_data = snap;
	return r;
}

static void snapshot_free(void *snap)
{
	gpuctl_snapshot_free(snap);
}

/* What the loop keeps between checks (the main thread's). */
struct watch {
	struct cli *cli;
	const struct watch_args *w;
	const struct sampler_sample *cur;  /* the latest sample (its snapshot is checked) */
	const struct sampler_sample *prev; /* the one before, NULL: none (the rate rules' prev) */
	struct health_track *track;        /* the XIDs seen, what the last check printed */
	size_t *sel, nsel;                 /* the GPUs watched */
};

/* Checks the latest snapshot with the XIDs seen, prints what changed and saves the state. */
static int check(struct watch *st)
{
	const struct gpuctl_snapshot *snap = st->cur->data;
	const struct gpuctl_snapshot *prev = st->prev ? st->prev->data : NULL;
	double age = st->prev ? st->cur->done - st->prev->done : 0;

	return health_track_check(st->cli->ctx, st->track, snap, prev, age);
}

/* Says a failure of the watch ("health: --watch: why") and returns r. */
static int failed(int r, const char *why)
{
	cli_error("health: --watch: %s", why && why[0] ? why : strerror(-r));
	return r;
}

/* Takes what the XID feed has: XIDs are checked at once; a lost GPU asks the sampler for a
 * snapshot now (*resnap: the feed is made again from it). 0; 1 when the feed has no events
 * any more (its set could not be made again: the kernel log is the source from now on); or
 * -errno (said). */
static int take_xids(struct watch *st, struct xid_feed *feed, struct sampler *smp, bool *resnap)
{
	struct gpuctl_xid_log *xids = health_track_xids(st->track);
	size_t before = gpuctl_xid_log_count(xids);
	char err[256] = "";
	bool lost = false;
	int r = xid_feed_take(feed, xids, &lost, err, sizeof(err));

	if (r < 0)
		return failed(r, err);
	if (r == XID_FEED_NONE) {
		if (st->cli->verbose)
			fprintf(stderr, "gpuctl: debug: %s; re-reading the kernel log instead\n",
			        err);
		return 1;
	}
	if (lost) {
		*resnap = true;
		sampler_kick(smp);
	}
	if (gpuctl_xid_log_count(xids) == before)
		return 0;
	r = check(st);
	return r < 0 ? failed(r, gpuctl_errmsg(st->cli->ctx)) : 0;
}

/* A new sample: the previous becomes the rate rules' prev; the XIDs follow the new snapshot
 * (the kernel log read again, or the GPUs it shows reset forgotten); then a check. 0, or
 * -errno (said). */
static int take_sample(struct watch *st, const struct sampler_sample *m, struct xid_feed *feed,
                       bool *resnap)
{
	int r;

	if (m->status < 0)
		return failed(m->status, m->error);
	sampler_put(st->prev);
	st->prev = st->cur;
	st->cur = sampler_hold(m);
	if (feed && *resnap)
		xid_feed_rewatch(feed, m->data, sampler_hold(m));
	*resnap = false;
	r = health_track_follow(st->cli->ctx, st->track, m->data, feed != NULL);
	if (r >= 0)
		r = check(st);
	return r < 0 ? failed(r, gpuctl_errmsg(st->cli->ctx)) : 0;
}

/* Waits until the XID feed has made its event set; *ret_events says whether it could (else
 * its thread has ended and the kernel log is re-read every interval instead). Returns the
 * signal that came first, 0, or -errno (said) when the feed failed at once. */
static int feed_ready(struct watch *st, struct xid_feed *feed, const sigset_t *stop,
                      bool *ret_events)
{
	for (;;) {
		struct pollfd p = {.fd = xid_feed_fd(feed), .events = POLLIN};
		char err[256] = "";
		bool lost;
		int sig = cli_wait_fds(&p, 1, INFINITY, stop), r;

		if (sig)
			return sig;
		r = xid_feed_take(feed, health_track_xids(st->track), &lost, err, sizeof(err));
		if (r == XID_FEED_STARTING)
			continue;
		*ret_events = r == XID_FEED_EVENTS;
		if (r == XID_FEED_NONE && st->cli->verbose)
			fprintf(stderr, "gpuctl: debug: %s; re-reading the kernel log instead\n",
			        err);
		return r < 0 ? failed(r, err) : 0;
	}
}

/* The loop: samples, XIDs, the overdue finding, until a signal (0) or a failure (-errno,
 * said). feed: NULL without NVML events. */
static int watch_loop(struct watch *st, struct sampler *smp, struct xid_feed *feed,
                      const sigset_t *stop)
{
	bool overdue = false, resnap = false;
	double kmsg_next = INFINITY; /* while overdue without events: the next kernel-log read */
	int r = 0;

	while (r >= 0) {
		struct pollfd p[2] = {{.fd = sampler_fd(smp), .events = POLLIN},
		                      {.fd = feed ? xid_feed_fd(feed) : -1, .events = POLLIN}};
		const struct sampler_sample *m;
		double now;

		if (cli_wait_fds(p, 2, overdue ? kmsg_next : sampler_overdue_at(smp), stop))
			return 0;
		if (feed && p[1].revents && (r = take_xids(st, feed, smp, &resnap)) != 0) {
			if (r < 0)
				return r;
			feed = NULL; /* no events any more: the kernel log, from the next snapshot
			              */
			resnap = false;
			r = 0;
		}
		m = sampler_latest(smp);
		if (m && m->seq > st->cur->seq) {
			if (overdue && m->status == 0)
				health_track_nvml(st->track, true, 0);
			overdue = false;
			kmsg_next = INFINITY;
			r = take_sample(st, m, feed, &resnap);
		}
		sampler_put(m);
		now = cli_now(CLOCK_MONOTONIC);
		if (r < 0 || !sampler_overdue(smp, now))
			continue;
		if (!overdue) {
			health_track_nvml(st->track, false, sampler_silence(smp, now));
			overdue = true;
			kmsg_next = feed ? INFINITY : now;
		}
		if (!feed && now >= kmsg_next) {
			/* the samples wait for NVML, the kernel log does not */
			kmsg_next = now + st->w->interval;
			r = health_track_follow(st->cli->ctx, st->track, st->cur->data, false);
			if (r >= 0)
				r = check(st);
			if (r < 0)
				return failed(r, gpuctl_errmsg(st->cli->ctx));
		}
	}
	return r;
}

/* Reads what comes before the first check: the GPUs watched, the kernel log, the state file
 * (the tracker's). 0, or the exit status after the line. */
static int watch_begin(struct watch *st)
{
	const struct gpuctl_snapshot *snap = st->cur->data;
	int status = cli_select_gpus(st->cli, snap, st->w->ids, &st->sel, &st->nsel);
	struct health_track_config cfg = {.out = stdout,
	                                  .json = st->w->json,
	                                  .strict = st->w->strict,
	                                  .kmsg = st->w->kmsg,
	                                  .kmsg_named = st->w->kmsg_named,
	                                  .state = st->w->state,
	                                  .who = "--watch",
	                                  .sel = st->sel,
	                                  .nsel = st->nsel};
	int r;

	if (status)
		return status;
	r = health_track_new(st->cli->ctx, &cfg, snap, &st->track);
	if (r < 0) {
		cli_error("health: %s",
		          r == -ENOMEM ? "out of memory" : gpuctl_errmsg(st->cli->ctx));
		return CLI_EXIT_FAILURE;
	}
	return 0;
}

int health_watch(struct cli *cli, const struct watch_args *w)
{
	struct watch st = {.cli = cli, .w = w};
	struct sampler *smp = NULL;
	struct xid_feed *feed = NULL;
	struct gpuctl_ctx *sctx = NULL, *fctx = NULL;
	sigset_t stop, old;
	int status, r;

	/* signals are taken through a signalfd (cli_wait_fds), never in the NVML threads */
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stop, &old);
	/* the main thread's context (kernel log, state file, checks; no NVML), and the
	 * sampler's */
	status = cli_context(cli);
	if (!status)
		status = cli_context_new(cli, &sctx);
	if (status)
		goto out;
	struct sampler_config cfg = {.interval = w->interval,
	                             .ctx = sctx,
	                             .take = watch_take,
	                             .free_data = snapshot_free};
	r = sampler_start(&cfg, &smp);
	if (r < 0) {
		gpuctl_ctx_free(sctx);
		cli_error("health: --watch: cannot start the sampler: %s", strerror(-r));
		status = CLI_EXIT_FAILURE;
		goto out;
	}
	if (cli_first_sample(smp, "health", &stop, &st.cur))
		goto end; /* a signal before the first check: nothing found, 0 */
	if (st.cur->status < 0) {
		status = cli_driver_error_msg(st.cur->status, st.cur->error);
		goto end;
	}
	status = watch_begin(&st);
	if (status)
		goto end;
	/* XIDs from NVML's events, on a thread of their own (xid-feed.h) */
	status = cli_context_new(cli, &fctx);
	if (status)
		goto end;
	r = xid_feed_start(fctx, st.cur->data, sampler_hold(st.cur), &feed);
	if (r < 0) {
		feed = NULL;
		cli_error("health: --watch: cannot start the XID events: %s", strerror(-r));
		status = CLI_EXIT_FAILURE;
		goto end;
	}
	bool events = false;
	r = feed_ready(&st, feed, &stop, &events);
	if (r > 0)
		goto end; /* a signal before the first check: nothing found, 0 */
	if (r < 0) {
		status = CLI_EXIT_FAILURE;
		goto end;
	}
	r = check(&st);
	if (r < 0)
		r = failed(r, gpuctl_errmsg(cli->ctx));
	else
		r = watch_loop(&st, smp, events ? feed : NULL, &stop);
	r = r < 0 ? r : health_track_worst(st.track);
	status = r < 0                     ? CLI_EXIT_FAILURE
	         : r == GPUCTL_HEALTH_FAIL ? 20
	         : r == GPUCTL_HEALTH_WARN ? 10
	                                   : 0;
end:
	/* a thread stuck in NVML is not waited for: the process ends without it */
	if (xid_feed_stop(feed, FEED_STOP_WAIT_S) < 0 || sampler_stop(smp, SAMPLER_STOP_WAIT_S) < 0)
		cli_exit_now(status);
out:
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	sampler_put(st.prev);
	sampler_put(st.cur);
	health_track_free(st.track);
	free(st.sel);
	return status;
}
