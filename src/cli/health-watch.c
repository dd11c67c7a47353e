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
 * - A finding is printed once: its key is the GPU's UUID, the check and the severity (for XIDs
 *   also the message, so each new occurrence prints). One that is gone at the next check prints
 *   as "cleared".
 * - Lines: "TIME GPU N UUID SEVERITY CHECK MESSAGE (action: ...)", or with --format json one
 *   JSON object per line (docs/json.md). stdout is flushed after each.
 * - Exit: on SIGINT/SIGTERM/SIGHUP, with the worst verdict of the last check (0, 10, 20); a
 *   thread still in an NVML call then is not waited for (cli_exit_now).
 * - After every check the state file (gpuctl_health_state_write) gets the XIDs seen and this
 *   sample, for one-shot checks (and later select and run). Writing it is best effort: a
 *   failure is said once on stderr and the watch goes on. A file there at the start that
 *   cannot be read (corrupt, cut short) is said once on stderr, then overwritten.
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
#include "health-watch.h"
#include "sampler.h"
#include "xid-feed.h"

/* The keys printed at the last check. */
struct seen {
	char **keys;
	size_t n, cap;
};

static void seen_free(struct seen *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->keys[i]);
	free(s->keys);
	*s = (struct seen){0};
}

static bool seen_has(const struct seen *s, const char *key)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->keys[i], key) == 0)
			return true;
	return false;
}

static int seen_add(struct seen *s, const char *key)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 32;
		char **k = realloc(s->keys, cap * sizeof(*k));
		if (!k)
			return -ENOMEM;
		s->keys = k;
		s->cap = cap;
	}
	s->keys[s->n] = strdup(key);
	if (!s->keys[s->n])
		return -ENOMEM;
	s->n++;
	return 0;
}

static void now_text(char *buf, size_t size)
{
	time_t t = time(NULL);
	struct tm tm;

	if (!gmtime_r(&t, &tm) || !strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm))
		(void)snprintf(buf, size, "%lld", (long long)t);
}

static int key_of(const struct gpuctl_snapshot *snap, const struct gpuctl_health_finding *f,
                  char **ret)
{
	const char *uuid = gpuctl_gpu_str(gpuctl_snapshot_gpu(snap, f->gpu), GPUCTL_F_UUID);

	return asprintf(ret, "%s|%zu|%s|%d|%s", uuid ? uuid : "", f->gpu, f->check, f->severity,
	                f->xid ? f->message : "") < 0
	               ? -ENOMEM
	               : 0;
}

static void print_line(const struct watch_args *w, const struct gpuctl_snapshot *snap,
                       const struct gpuctl_health_finding *f, bool cleared, const char *check,
                       size_t gpu)
{
	const char *uuid = gpuctl_gpu_str(gpuctl_snapshot_gpu(snap, gpu), GPUCTL_F_UUID);
	char when[32], shortu[64] = "N/A";
	char msg[1024], act[1024];
	const char *message = f ? format_health_words(f->message, msg, sizeof(msg)) : NULL;
	const char *action = f ? format_health_words(f->action, act, sizeof(act)) : NULL;

	now_text(when, sizeof(when));
	if (uuid)
		format_short_uuid(uuid, shortu, sizeof(shortu));
	if (w->json) {
		json_t *o = json_object();

		if (json_put(o, "time", json_text(when)) < 0 ||
		    json_put(o, "index", json_integer((json_int_t)gpu)) < 0 ||
		    json_put(o, "uuid", json_string_or_null(uuid)) < 0 ||
		    json_put(o, "check", json_text(check)) < 0 ||
		    json_put(o, "severity",
		             cleared ? json_text("OK")
		                     : json_text(gpuctl_health_severity_name(f->severity))) < 0 ||
		    json_put(o, "cleared", json_boolean(cleared)) < 0 ||
		    json_put(o, "message", f ? json_text(message) : json_null()) < 0 ||
		    json_put(o, "action", f ? json_text(action) : json_null()) < 0 ||
		    json_put(o, "xid", f && f->xid ? json_integer(f->xid) : json_null()) < 0) {
			json_decref(o);
			return;
		}
		(void)json_print_line(o);
	} else if (cleared) {
		printf("%s  GPU %zu  %s  OK    %s  cleared\n", when, gpu, shortu, check);
	} else {
		printf("%s  GPU %zu  %s  %-4s  %s  %s (action: %s)\n", when, gpu, shortu,
		       gpuctl_health_severity_name(f->severity), f->check, message, action);
	}
	fflush(stdout);
}

static bool chosen(const size_t *sel, size_t nsel, size_t gpu)
{
	for (size_t k = 0; k < nsel; k++)
		if (sel[k] == gpu)
			return true;
	return false;
}

/* Records the state; says the first failure once. */
/* With NVML events the XIDs accumulate; a GPU the kernel log shows reset since the last look
 * (docs/health.md, "After a reset") starts over. */
static int forget_reset_gpus(struct cli *cli, const struct watch_args *w,
                             const struct gpuctl_snapshot *snap, struct gpuctl_xid_log *xids)
{
	struct gpuctl_xid_log *now = NULL;
	int r = 0;

	if (gpuctl_xid_log_new(&now) < 0)
		return -ENOMEM;
	if (gpuctl_xid_log_read(cli->ctx, now, snap, w->kmsg) >= 0)
		for (size_t g = 0; g < gpuctl_snapshot_gpu_count(snap) && r >= 0; g++)
			while (r >= 0 &&
			       gpuctl_xid_log_resets(now, g) > gpuctl_xid_log_resets(xids, g))
				r = gpuctl_xid_log_forget(xids, g);
	gpuctl_xid_log_free(now);
	return r;
}

static void save_state(struct cli *cli, const struct watch_args *w,
                       const struct gpuctl_snapshot *snap, const struct gpuctl_xid_log *xids,
                       bool *warned)
{
	if (!w->state || gpuctl_health_state_write(cli->ctx, w->state, snap, xids) >= 0 || *warned)
		return;
	*warned = true;
	fprintf(stderr, "gpuctl: warning: %s; --watch goes on without recording\n",
	        gpuctl_errmsg(cli->ctx));
}

/* Checks snap and prints what is new and what cleared since *seen; *ret_worst is the worst
 * verdict of the chosen GPUs. */
static int check_and_print(struct cli *cli, const struct watch_args *w,
                           const struct gpuctl_snapshot *snap, const struct gpuctl_snapshot *prev,
                           double age, const struct gpuctl_xid_log *xids, const size_t *sel,
                           size_t nsel, struct seen *seen, int *ret_worst)
{
	struct gpuctl_health_opts opts = GPUCTL_HEALTH_OPTS_INIT;
	struct gpuctl_health_report *rep = NULL;
	struct seen now = {0};
	int r, worst = GPUCTL_HEALTH_OK;

	opts.strict = w->strict;
	opts.prev = prev;
	opts.prev_age_s = age;
	r = gpuctl_health_check(cli->ctx, snap, xids, &opts, &rep);
	if (r < 0)
		return r;
	for (size_t i = 0; i < gpuctl_health_finding_count(rep); i++) {
		const struct gpuctl_health_finding *f = gpuctl_health_finding(rep, i);
		char *key = NULL;

		if (!chosen(sel, nsel, f->gpu))
			continue;
		if (f->severity > worst)
			worst = f->severity;
		if (key_of(snap, f, &key) < 0 || seen_add(&now, key) < 0) {
			free(key);
			r = -ENOMEM;
			goto out;
		}
		if (!seen_has(seen, key))
			print_line(w, snap, f, false, f->check, f->gpu);
		free(key);
	}
	/* cleared: printed before, not found now (XIDs stay until the driver reloads) */
	for (size_t i = 0; i < seen->n; i++) {
		char check[64] = "";
		size_t gpu = 0;
		const char *p = strchr(seen->keys[i], '|');

		if (seen_has(&now, seen->keys[i]) || !p)
			continue;
		if (sscanf(p + 1, "%zu|%63[^|]", &gpu, check) == 2 &&
		    gpu < gpuctl_snapshot_gpu_count(snap) && strcmp(check, "xid") != 0)
			print_line(w, snap, NULL, true, check, gpu);
	}
	seen_free(seen);
	*seen = now;
	now = (struct seen){0};
	*ret_worst = worst;
out:
	seen_free(&now);
	gpuctl_health_report_free(rep);
	return r;
}

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
	struct gpuctl_xid_log *xids;       /* the XIDs seen */
	struct seen seen;                  /* what the last check printed */
	size_t *sel, nsel;                 /* the GPUs watched */
	bool warned;                       /* a state file write failed (said once) */
	int worst;                         /* the worst verdict of the last check */
};

/* Checks the latest snapshot with the XIDs seen, prints what changed and saves the state. */
static int check(struct watch *st)
{
	const struct gpuctl_snapshot *snap = st->cur->data;
	const struct gpuctl_snapshot *prev = st->prev ? st->prev->data : NULL;
	double age = st->prev ? st->cur->done - st->prev->done : 0;
	int r = check_and_print(st->cli, st->w, snap, prev, age, st->xids, st->sel, st->nsel,
	                        &st->seen, &st->worst);

	if (r >= 0)
		save_state(st->cli, st->w, snap, st->xids, &st->warned);
	return r;
}

/* Without NVML events: the XIDs the kernel log has now, for the latest snapshot. -ENOMEM. */
static int reread_kmsg(struct watch *st)
{
	struct gpuctl_xid_log *now = NULL;

	if (gpuctl_xid_log_new(&now) < 0)
		return -ENOMEM;
	(void)gpuctl_xid_log_read(st->cli->ctx, now, st->cur->data, st->w->kmsg);
	gpuctl_xid_log_free(st->xids);
	st->xids = now;
	return 0;
}

/* The finding that NVML is not answering (or, cleared, that it answers again): no GPU's, so
 * index and UUID are "-" (null in JSON). */
static void print_nvml(const struct watch_args *w, bool cleared, double silent_s)
{
	static const char check_id[] = "nvml-hang";
	static const char action[] = "XIDs are still checked; if it does not answer again, check "
	                             "the kernel log, then reset the GPU or reboot";
	char when[32], msg[96];

	now_text(when, sizeof(when));
	snprintf(msg, sizeof(msg), "NVML not answering for %.0f s", silent_s);
	if (w->json) {
		json_t *o = json_object();

		if (json_put(o, "time", json_text(when)) < 0 ||
		    json_put(o, "index", json_null()) < 0 || json_put(o, "uuid", json_null()) < 0 ||
		    json_put(o, "check", json_text(check_id)) < 0 ||
		    json_put(o, "severity", json_text(cleared ? "OK" : "WARN")) < 0 ||
		    json_put(o, "cleared", json_boolean(cleared)) < 0 ||
		    json_put(o, "message", cleared ? json_null() : json_text(msg)) < 0 ||
		    json_put(o, "action", cleared ? json_null() : json_text(action)) < 0 ||
		    json_put(o, "xid", json_null()) < 0) {
			json_decref(o);
			return;
		}
		(void)json_print_line(o);
	} else if (cleared) {
		printf("%s  GPU -  -  OK    %s  cleared\n", when, check_id);
	} else {
		printf("%s  GPU -  -  WARN  %s  %s (action: %s)\n", when, check_id, msg, action);
	}
	fflush(stdout);
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
	size_t before = gpuctl_xid_log_count(st->xids);
	char err[256] = "";
	bool lost = false;
	int r = xid_feed_take(feed, st->xids, &lost, err, sizeof(err));

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
	if (gpuctl_xid_log_count(st->xids) == before)
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
	if (!feed) {
		r = reread_kmsg(st);
	} else {
		if (*resnap)
			xid_feed_rewatch(feed, m->data, sampler_hold(m));
		*resnap = false;
		r = forget_reset_gpus(st->cli, st->w, m->data, st->xids);
	}
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
		r = xid_feed_take(feed, st->xids, &lost, err, sizeof(err));
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
				print_nvml(st->w, true, 0);
			overdue = false;
			kmsg_next = INFINITY;
			r = take_sample(st, m, feed, &resnap);
		}
		sampler_put(m);
		now = cli_now(CLOCK_MONOTONIC);
		if (r < 0 || !sampler_overdue(smp, now))
			continue;
		if (!overdue) {
			print_nvml(st->w, false, sampler_silence(smp, now));
			overdue = true;
			kmsg_next = feed ? INFINITY : now;
		}
		if (!feed && now >= kmsg_next) {
			/* the samples wait for NVML, the kernel log does not */
			kmsg_next = now + st->w->interval;
			r = reread_kmsg(st);
			if (r >= 0)
				r = check(st);
			if (r < 0)
				return failed(r, gpuctl_errmsg(st->cli->ctx));
		}
	}
	return r;
}

/* Reads what comes before the first check: the GPUs watched, the kernel log, the state file.
 * 0, or the exit status after the line. */
static int watch_begin(struct watch *st)
{
	const struct gpuctl_snapshot *snap = st->cur->data;
	int status = cli_select_gpus(st->cli, snap, st->w->ids, &st->sel, &st->nsel);
	int r;

	if (status)
		return status;
	if (gpuctl_xid_log_new(&st->xids) < 0) {
		cli_error("health: out of memory");
		return CLI_EXIT_FAILURE;
	}
	r = gpuctl_xid_log_read(st->cli->ctx, st->xids, snap, st->w->kmsg);
	if (r < 0 && (st->w->kmsg_named || r == -ENOMEM)) {
		cli_error("health: %s", gpuctl_errmsg(st->cli->ctx));
		return CLI_EXIT_FAILURE;
	}
	if (st->w->state) {
		/* what an earlier watch of this boot recorded (NVML events are not in the log) */
		struct gpuctl_snapshot *old = NULL;
		double age;
		r = gpuctl_health_state_read(st->cli->ctx, st->w->state, snap, st->xids, &old,
		                             &age);
		if (r >= 0)
			gpuctl_snapshot_free(old);
		else if (r != -ENOENT && r != -EPERM)
			fprintf(stderr,
			        "gpuctl: warning: %s; what it recorded is lost (the kernel log "
			        "still shows its XIDs), --watch writes it afresh\n",
			        gpuctl_errmsg(st->cli->ctx));
	}
	return 0;
}

int health_watch(struct cli *cli, const struct watch_args *w)
{
	struct watch st = {.cli = cli, .w = w, .worst = GPUCTL_HEALTH_OK};
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
	if (r < 0)
		status = CLI_EXIT_FAILURE;
	else
		status = st.worst == GPUCTL_HEALTH_FAIL   ? 20
		         : st.worst == GPUCTL_HEALTH_WARN ? 10
		                                          : 0;
end:
	/* a thread stuck in NVML is not waited for: the process ends without it */
	if (xid_feed_stop(feed, FEED_STOP_WAIT_S) < 0 || sampler_stop(smp, SAMPLER_STOP_WAIT_S) < 0)
		cli_exit_now(status);
out:
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	sampler_put(st.prev);
	sampler_put(st.cur);
	seen_free(&st.seen);
	gpuctl_xid_log_free(st.xids);
	free(st.sel);
	return status;
}
