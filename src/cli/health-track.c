// SPDX-License-Identifier: MIT
/*
 * health-track.c: the health watch's finding tracker (health-track.h): what `gpuctl health
 * --watch` and `gpuctl agent` both run on each sample, so the agent runs the watch's code, not
 * a copy of it (issue 27).
 *
 * Decisions:
 * - A finding is printed once: its key is the GPU's UUID, the check and the severity (for XIDs
 *   also the message, so each new occurrence prints). One that is gone at the next check prints
 *   as "cleared"; an XID never clears (XIDs count until the driver reloads).
 * - Lines: "TIME  GPU N  UUID  SEVERITY  CHECK  MESSAGE (action: ...)", or with JSON one object
 *   per line on stdout (docs/json.md); the text goes to the caller's stream, flushed after
 *   each line (the agent's stderr is the journal).
 * - After every check the state file (gpuctl_health_state_write) gets the XIDs seen and this
 *   sample, for one-shot checks (and select and run). Writing it is best effort: a failure is
 *   said once on stderr and the tracking goes on. A file there at the start that cannot be
 *   read (corrupt, cut short) is said once on stderr, then overwritten.
 * - Each GPU's verdict at the last check is kept by UUID, for the agent's ledger (a holder
 *   moved off a GPU that failed: docs/agent.md, "Endings").
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format.h"
#include "health-track.h"

/* The keys printed at the last check. */
struct seen {
	char **keys;
	size_t n, cap;
};

/* A GPU's verdict at the last check. */
struct verdict {
	char *uuid;
	int severity;
};

struct health_track {
	struct health_track_config cfg; /* state and sel point to the copies below */
	char *state;                    /* the state file, NULL: none */
	size_t *sel;                    /* the GPUs printed, NULL: every GPU */
	struct gpuctl_xid_log *xids;    /* the XIDs seen */
	struct seen seen;               /* what the last check printed */
	struct verdict *verdicts;       /* each GPU's at the last check */
	size_t n_verdicts;
	bool warned; /* a state file write failed (said once) */
	int worst;   /* the worst verdict of the selected GPUs at the last check */
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

static void verdicts_free(struct health_track *t)
{
	for (size_t i = 0; i < t->n_verdicts; i++)
		free(t->verdicts[i].uuid);
	free(t->verdicts);
	t->verdicts = NULL;
	t->n_verdicts = 0;
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

/* A line's JSON object (docs/json.md, "gpuctl health --watch --format json"; taken) to the JSON
 * output and the caller's on_line (which takes a reference); o NULL: out of memory. */
static void emit(const struct health_track *t, json_t *o, int severity)
{
	if (o && t->cfg.on_line)
		t->cfg.on_line(t->cfg.userdata, json_incref(o), severity);
	if (o && t->cfg.json) {
		(void)json_print_line(o); /* takes o */
		fflush(stdout);
		return;
	}
	json_decref(o);
}

/* The JSON object of a line; NULL: out of memory. */
static json_t *line_json(const char *when, json_t *index, const char *uuid, const char *check,
                         const char *severity, bool cleared, const char *message,
                         const char *action, unsigned xid)
{
	json_t *o = json_object();

	if (!o || json_put(o, "time", json_text(when)) < 0 || json_put(o, "index", index) < 0 ||
	    json_put(o, "uuid", json_string_or_null(uuid)) < 0 ||
	    json_put(o, "check", json_text(check)) < 0 ||
	    json_put(o, "severity", json_text(severity)) < 0 ||
	    json_put(o, "cleared", json_boolean(cleared)) < 0 ||
	    json_put(o, "message", message ? json_text(message) : json_null()) < 0 ||
	    json_put(o, "action", action ? json_text(action) : json_null()) < 0 ||
	    json_put(o, "xid", xid ? json_integer(xid) : json_null()) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* One finding's line (f NULL: check of GPU gpu cleared, a finding of severity was). */
static void print_line(const struct health_track *t, const struct gpuctl_snapshot *snap,
                       const struct gpuctl_health_finding *f, bool cleared, const char *check,
                       size_t gpu, int was)
{
	const char *uuid = gpuctl_gpu_str(gpuctl_snapshot_gpu(snap, gpu), GPUCTL_F_UUID);
	char when[32], shortu[64] = "N/A";
	char msg[1024], act[1024];
	const char *message = f ? format_health_words(f->message, msg, sizeof(msg)) : NULL;
	const char *action = f ? format_health_words(f->action, act, sizeof(act)) : NULL;

	now_text(when, sizeof(when));
	if (uuid)
		format_short_uuid(uuid, shortu, sizeof(shortu));
	if (t->cfg.json || t->cfg.on_line)
		emit(t,
		     line_json(when, json_integer((json_int_t)gpu), uuid, check,
		               cleared ? "OK" : gpuctl_health_severity_name(f->severity), cleared,
		               message, action, f ? f->xid : 0),
		     f ? f->severity : was);
	if (t->cfg.json)
		return;
	if (cleared)
		fprintf(t->cfg.out, "%s  GPU %zu  %s  OK    %s  cleared\n", when, gpu, shortu,
		        check);
	else
		fprintf(t->cfg.out, "%s  GPU %zu  %s  %-4s  %s  %s (action: %s)\n", when, gpu,
		        shortu, gpuctl_health_severity_name(f->severity), f->check, message,
		        action);
	fflush(t->cfg.out);
}

void health_track_nvml(const struct health_track *t, bool cleared, double silent_s)
{
	static const char check_id[] = "nvml-hang";
	static const char action[] = "XIDs are still checked; if it does not answer again, check "
	                             "the kernel log, then reset the GPU or reboot";
	char when[32], msg[96];

	now_text(when, sizeof(when));
	snprintf(msg, sizeof(msg), "NVML not answering for %.0f s", silent_s);
	if (t->cfg.json || t->cfg.on_line)
		emit(t,
		     line_json(when, json_null(), NULL, check_id, cleared ? "OK" : "WARN", cleared,
		               cleared ? NULL : msg, cleared ? NULL : action, 0),
		     GPUCTL_HEALTH_WARN);
	if (t->cfg.json)
		return;
	if (cleared)
		fprintf(t->cfg.out, "%s  GPU -  -  OK    %s  cleared\n", when, check_id);
	else
		fprintf(t->cfg.out, "%s  GPU -  -  WARN  %s  %s (action: %s)\n", when, check_id,
		        msg, action);
	fflush(t->cfg.out);
}

static bool chosen(const struct health_track *t, size_t gpu)
{
	if (!t->sel)
		return true;
	for (size_t k = 0; k < t->cfg.nsel; k++)
		if (t->sel[k] == gpu)
			return true;
	return false;
}

int health_track_follow(struct gpuctl_ctx *ctx, struct health_track *t,
                        const struct gpuctl_snapshot *snap, bool events)
{
	struct gpuctl_xid_log *now = NULL;
	int r = 0;

	if (gpuctl_xid_log_new(&now) < 0)
		return -ENOMEM;
	if (!events) {
		/* the XIDs the kernel log has now, for this snapshot */
		(void)gpuctl_xid_log_read(ctx, now, snap, t->cfg.kmsg);
		gpuctl_xid_log_free(t->xids);
		t->xids = now;
		return 0;
	}
	/* the XIDs accumulate; a GPU the kernel log shows reset since the last look starts
	 * over */
	if (gpuctl_xid_log_read(ctx, now, snap, t->cfg.kmsg) >= 0)
		for (size_t g = 0; g < gpuctl_snapshot_gpu_count(snap) && r >= 0; g++)
			while (r >= 0 &&
			       gpuctl_xid_log_resets(now, g) > gpuctl_xid_log_resets(t->xids, g))
				r = gpuctl_xid_log_forget(t->xids, g);
	gpuctl_xid_log_free(now);
	return r;
}

static void save_state(struct gpuctl_ctx *ctx, struct health_track *t,
                       const struct gpuctl_snapshot *snap)
{
	if (!t->state || gpuctl_health_state_write(ctx, t->state, snap, t->xids) >= 0 || t->warned)
		return;
	t->warned = true;
	fprintf(stderr, "gpuctl: warning: %s; %s goes on without recording\n", gpuctl_errmsg(ctx),
	        t->cfg.who);
}

/* Each GPU's verdict in rep, by UUID. -ENOMEM. */
static int keep_verdicts(struct health_track *t, const struct gpuctl_snapshot *snap,
                         const struct gpuctl_health_report *rep)
{
	size_t n = gpuctl_snapshot_gpu_count(snap);
	struct verdict *v = calloc(n ? n : 1, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t g = 0; g < n; g++) {
		const char *uuid = gpuctl_gpu_str(gpuctl_snapshot_gpu(snap, g), GPUCTL_F_UUID);
		v[g].severity = GPUCTL_HEALTH_OK;
		v[g].uuid = strdup(uuid ? uuid : "");
		if (!v[g].uuid) {
			for (size_t k = 0; k < g; k++)
				free(v[k].uuid);
			free(v);
			return -ENOMEM;
		}
	}
	for (size_t i = 0; i < gpuctl_health_finding_count(rep); i++) {
		const struct gpuctl_health_finding *f = gpuctl_health_finding(rep, i);
		if (f->gpu < n && f->severity > v[f->gpu].severity)
			v[f->gpu].severity = f->severity;
	}
	verdicts_free(t);
	t->verdicts = v;
	t->n_verdicts = n;
	return 0;
}

/* Prints what cleared since the last check: printed before, not found now (XIDs stay until
 * the driver reloads). */
static void print_cleared(const struct health_track *t, const struct gpuctl_snapshot *snap,
                          const struct seen *now)
{
	for (size_t i = 0; i < t->seen.n; i++) {
		char check[64] = "";
		size_t gpu = 0;
		int was = GPUCTL_HEALTH_WARN;
		const char *p = strchr(t->seen.keys[i], '|');

		if (seen_has(now, t->seen.keys[i]) || !p)
			continue;
		if (sscanf(p + 1, "%zu|%63[^|]|%d", &gpu, check, &was) >= 2 &&
		    gpu < gpuctl_snapshot_gpu_count(snap) && strcmp(check, "xid") != 0)
			print_line(t, snap, NULL, true, check, gpu, was);
	}
}

int health_track_check(struct gpuctl_ctx *ctx, struct health_track *t,
                       const struct gpuctl_snapshot *snap, const struct gpuctl_snapshot *prev,
                       double age_s)
{
	struct gpuctl_health_opts opts = GPUCTL_HEALTH_OPTS_INIT;
	struct gpuctl_health_report *rep = NULL;
	struct seen now = {0};
	int r, worst = GPUCTL_HEALTH_OK;

	opts.strict = t->cfg.strict;
	opts.prev = prev;
	opts.prev_age_s = age_s;
	r = gpuctl_health_check(ctx, snap, t->xids, &opts, &rep);
	if (r < 0)
		return r;
	for (size_t i = 0; i < gpuctl_health_finding_count(rep); i++) {
		const struct gpuctl_health_finding *f = gpuctl_health_finding(rep, i);
		char *key = NULL;

		if (!chosen(t, f->gpu))
			continue;
		if (f->severity > worst)
			worst = f->severity;
		if (key_of(snap, f, &key) < 0 || seen_add(&now, key) < 0) {
			free(key);
			r = -ENOMEM;
			goto out;
		}
		if (!seen_has(&t->seen, key))
			print_line(t, snap, f, false, f->check, f->gpu, f->severity);
		free(key);
	}
	print_cleared(t, snap, &now);
	seen_free(&t->seen);
	t->seen = now;
	now = (struct seen){0};
	t->worst = worst;
	r = keep_verdicts(t, snap, rep);
	save_state(ctx, t, snap);
out:
	seen_free(&now);
	gpuctl_health_report_free(rep);
	return r;
}

int health_track_worst(const struct health_track *t)
{
	return t->worst;
}

int health_track_verdict(const struct health_track *t, const char *uuid)
{
	for (size_t i = 0; uuid && i < t->n_verdicts; i++)
		if (strcmp(t->verdicts[i].uuid, uuid) == 0)
			return t->verdicts[i].severity;
	return -1;
}

struct gpuctl_xid_log *health_track_xids(struct health_track *t)
{
	return t->xids;
}

void health_track_free(struct health_track *t)
{
	if (!t)
		return;
	seen_free(&t->seen);
	verdicts_free(t);
	gpuctl_xid_log_free(t->xids);
	free(t->state);
	free(t->sel);
	free(t);
}

/* What an earlier watch (or agent) of this boot recorded: NVML events are not in the kernel
 * log. */
static void read_state(struct gpuctl_ctx *ctx, struct health_track *t,
                       const struct gpuctl_snapshot *snap)
{
	struct gpuctl_snapshot *old = NULL;
	double age;
	int r = gpuctl_health_state_read(ctx, t->state, snap, t->xids, &old, &age);

	if (r >= 0)
		gpuctl_snapshot_free(old);
	else if (r != -ENOENT && r != -EPERM)
		fprintf(stderr,
		        "gpuctl: warning: %s; what it recorded is lost (the kernel log still shows "
		        "its XIDs), %s writes it afresh\n",
		        gpuctl_errmsg(ctx), t->cfg.who);
}

int health_track_new(struct gpuctl_ctx *ctx, const struct health_track_config *cfg,
                     const struct gpuctl_snapshot *snap, struct health_track **ret_track)
{
	struct health_track *t = calloc(1, sizeof(*t));
	int r;

	if (!t)
		return -ENOMEM;
	t->cfg = *cfg;
	t->worst = GPUCTL_HEALTH_OK;
	if (cfg->state && !(t->state = strdup(cfg->state)))
		goto oom;
	if (cfg->sel) {
		t->sel = calloc(cfg->nsel ? cfg->nsel : 1, sizeof(*t->sel));
		if (!t->sel)
			goto oom;
		memcpy(t->sel, cfg->sel, cfg->nsel * sizeof(*t->sel));
	}
	t->cfg.state = t->state;
	t->cfg.sel = t->sel;
	if (gpuctl_xid_log_new(&t->xids) < 0)
		goto oom;
	r = gpuctl_xid_log_read(ctx, t->xids, snap, cfg->kmsg);
	if (r < 0 && (cfg->kmsg_named || r == -ENOMEM)) {
		health_track_free(t);
		return r;
	}
	if (t->state)
		read_state(ctx, t, snap);
	*ret_track = t;
	return 0;
oom:
	health_track_free(t);
	return -ENOMEM;
}
