// SPDX-License-Identifier: MIT
/*
 * health-watch.c: `gpuctl health --watch`: the one-shot check, repeated, printing each finding
 * when it appears (and when it clears) instead of a report.
 *
 * Decisions:
 * - Two sources of change. XIDs arrive through NVML events (gpuctl_xid_watch_wait), waited on in
 *   slices of at most 200 ms so a signal is noticed quickly; an XID is checked and printed at
 *   once (the aim is under a second from injection to finding). Everything else is read by a
 *   fresh snapshot every --interval seconds, checked with the previous snapshot as `prev`, so
 *   the rate rules (PCIe replays, growing DBE pages) work here although a one-shot check cannot
 *   apply them.
 * - Without NVML events (old driver, -EOPNOTSUPP) the kernel log is re-read at every interval
 *   instead. When NVML reports a GPU lost, a snapshot is taken at once (it marks the one lost
 *   GPU) and the event set is made again without it.
 * - A finding is printed once: its key is the GPU's UUID, the check and the severity (for XIDs
 *   also the message, so each new occurrence prints). One that is gone at the next check prints
 *   as "cleared".
 * - Lines: "TIME GPU N UUID SEVERITY CHECK MESSAGE (action: ...)", or with --format json one
 *   JSON object per line (docs/json.md). stdout is flushed after each.
 * - Exit: on SIGINT/SIGTERM/SIGHUP, with the worst verdict of the last check (0, 10, 20).
 * - After every check the state file (gpuctl_health_state_write) gets the XIDs seen and this
 *   sample, for one-shot checks (and later select and run). Writing it is best effort: a
 *   failure is said once on stderr and the watch goes on. A file there at the start that
 *   cannot be read (corrupt, cut short) is said once on stderr, then overwritten.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format.h"
#include "health-watch.h"

#define SLICE_MS 200

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

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
		    json_put(o, "message", f ? json_text(f->message) : json_null()) < 0 ||
		    json_put(o, "action", f ? json_text(f->action) : json_null()) < 0 ||
		    json_put(o, "xid", f && f->xid ? json_integer(f->xid) : json_null()) < 0) {
			json_decref(o);
			return;
		}
		char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
		if (text)
			printf("%s\n", text);
		free(text);
		json_decref(o);
	} else if (cleared) {
		printf("%s  GPU %zu  %s  OK    %s  cleared\n", when, gpu, shortu, check);
	} else {
		printf("%s  GPU %zu  %s  %-4s  %s  %s (action: %s)\n", when, gpu, shortu,
		       gpuctl_health_severity_name(f->severity), f->check, f->message, f->action);
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

int health_watch(struct cli *cli, const struct watch_args *w)
{
	struct gpuctl_snapshot *snap = NULL, *prev = NULL;
	struct gpuctl_xid_log *xids = NULL;
	struct gpuctl_xid_watch *events = NULL;
	struct seen seen = {0};
	struct sigaction sa = {.sa_handler = on_signal};
	size_t *sel = NULL, nsel = 0;
	double taken, prev_taken = 0;
	int status, r, worst = GPUCTL_HEALTH_OK;
	bool warned = false;
	const unsigned flags = GPUCTL_SNAP_HEALTH | GPUCTL_SNAP_TOPOLOGY;

	/* every interval reads the facts the checks read, and identity: nothing else is shown */
	size_t nhf;
	const enum gpuctl_field *hf = gpuctl_health_fields(&nhf);
	status = cli_snapshot_fields(cli, flags, hf, nhf, &snap);
	if (status)
		return status;
	taken = cli_now(CLOCK_MONOTONIC);
	status = cli_select_gpus(cli, snap, w->ids, &sel, &nsel);
	if (status)
		goto out;
	if (gpuctl_xid_log_new(&xids) < 0) {
		status = CLI_EXIT_FAILURE;
		cli_error("health: out of memory");
		goto out;
	}
	r = gpuctl_xid_log_read(cli->ctx, xids, snap, w->kmsg);
	if (r < 0 && (w->kmsg_named || r == -ENOMEM)) {
		cli_error("health: %s", gpuctl_errmsg(cli->ctx));
		status = CLI_EXIT_FAILURE;
		goto out;
	}
	if (w->state) {
		/* what an earlier watch of this boot recorded (NVML events are not in the log) */
		struct gpuctl_snapshot *old = NULL;
		double age;
		r = gpuctl_health_state_read(cli->ctx, w->state, snap, xids, &old, &age);
		if (r >= 0)
			gpuctl_snapshot_free(old);
		else if (r != -ENOENT && r != -EPERM)
			fprintf(stderr,
			        "gpuctl: warning: %s; what it recorded is lost (the kernel log "
			        "still shows its XIDs), --watch writes it afresh\n",
			        gpuctl_errmsg(cli->ctx));
	}
	r = gpuctl_xid_watch_new(cli->ctx, snap, &events);
	if (r < 0) {
		events = NULL;
		if (cli->verbose)
			fprintf(stderr, "gpuctl: debug: %s; re-reading the kernel log instead\n",
			        gpuctl_errmsg(cli->ctx));
	}
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	r = check_and_print(cli, w, snap, NULL, 0, xids, sel, nsel, &seen, &worst);
	if (r >= 0)
		save_state(cli, w, snap, xids, &warned);
	while (r >= 0 && !stop) {
		double next = taken + w->interval;
		bool resnap = false;

		while (!stop && cli_now(CLOCK_MONOTONIC) < next && !resnap) {
			double left_ms = (next - cli_now(CLOCK_MONOTONIC)) * 1000;
			unsigned slice = left_ms < SLICE_MS ? (unsigned)left_ms + 1 : SLICE_MS;

			if (!events) {
				struct timespec ts = {0, (long)slice * 1000000L};
				nanosleep(&ts, NULL);
				continue;
			}
			r = gpuctl_xid_watch_wait(cli->ctx, events, slice, xids);
			if (r == 1) {
				r = check_and_print(cli, w, snap, prev, taken - prev_taken, xids,
				                    sel, nsel, &seen, &worst);
				if (r >= 0)
					save_state(cli, w, snap, xids, &warned);
			} else if (r == -ENODEV)
				resnap = true, r = 0;
			if (r < 0)
				break;
		}
		if (r < 0 || stop)
			break;
		gpuctl_snapshot_free(prev);
		prev = snap;
		prev_taken = taken;
		snap = NULL;
		if (gpuctl_snapshot_take_fields(cli->ctx, flags, hf, nhf, &snap) < 0) {
			r = -EIO;
			break;
		}
		taken = cli_now(CLOCK_MONOTONIC);
		if (!events) {
			/* no NVML events: what the kernel log says now */
			gpuctl_xid_log_free(xids);
			xids = NULL;
			if (gpuctl_xid_log_new(&xids) < 0) {
				r = -ENOMEM;
				break;
			}
			(void)gpuctl_xid_log_read(cli->ctx, xids, snap, w->kmsg);
		} else {
			if (resnap) {
				gpuctl_xid_watch_free(events);
				if (gpuctl_xid_watch_new(cli->ctx, snap, &events) < 0)
					events = NULL;
			}
			r = forget_reset_gpus(cli, w, snap, xids);
			if (r < 0)
				break;
		}
		r = check_and_print(cli, w, snap, prev, taken - prev_taken, xids, sel, nsel, &seen,
		                    &worst);
		if (r >= 0)
			save_state(cli, w, snap, xids, &warned);
	}
	if (r < 0) {
		cli_error("health: --watch: %s",
		          gpuctl_errmsg(cli->ctx)[0] ? gpuctl_errmsg(cli->ctx) : strerror(-r));
		status = CLI_EXIT_FAILURE;
	} else {
		status = worst == GPUCTL_HEALTH_FAIL ? 20 : worst == GPUCTL_HEALTH_WARN ? 10 : 0;
	}
out:
	seen_free(&seen);
	gpuctl_xid_watch_free(events);
	gpuctl_xid_log_free(xids);
	gpuctl_snapshot_free(prev);
	gpuctl_snapshot_free(snap);
	free(sel);
	return status;
}
