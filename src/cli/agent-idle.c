// SPDX-License-Identifier: MIT
/*
 * agent-idle.c: the node agent's idle actions (docs/idle.md, "Acting on idle leases"): each
 * pool's idle_warn, idle_release and max_lease_age (docs/config.md), judged on the sample the
 * agent's hook sees with the exporter's one idle tracker (no sampling of its own), and the
 * ledger's "evicted" ending (docs/agent.md, "Endings").
 *
 * Decisions:
 * - A holder (one pid and start time, the ledger's key) is judged with all its devices: it is
 *   idle when every device it holds is (idle_view_lease_ms, the rule ps shows), for as long as
 *   the least idle of them. Ending a --hold holder frees all its devices, so one busy device
 *   keeps the whole hold. Its pool is its first device's.
 * - idle_warn: one line on stderr (the journal) when the holder has been idle that long, once per
 *   idle streak: a sample that finds it busy starts a new streak.
 * - idle_release: only --hold holders (owner records without a job): a `run` job's lease is the
 *   job's. max_lease_age: any lease, from its owner record's leased_since. Both go through
 *   gpuctl_lease_evict, which ends a --hold holder and takes any other lease by replacing its
 *   lock file, and leaves the holder a notice; nothing else is ever ended. quota_lease_length
 *   (docs/config.md "Quotas") as max_lease_age, for the holder's user: select --hold is refused
 *   a longer length at grant time, `run` states none and is bounded here.
 * - Shared leases are warned about, never taken back: the lock file of a shared device is every
 *   sharer's, and one sharer's age or idleness is not the others'.
 * - A failure to take a lease back is said once per streak; the agent samples and serves on.
 * - Each warning, and each lease taken back, is an on_idle event (agent-hooks.h, docs/hooks.md).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent-events.h"
#include "agent-hooks.h"
#include "agent-idle.h"
#include "cmd.h"
#include "format.h"
#include "idle-view.h"

/* A holder warned in its current idle streak. */
struct agent_idle_mark {
	char key[48]; /* PID@START */
	bool seen;    /* idle at this sample */
};

/* One holder of this sample with its devices. */
struct holder {
	char key[48];
	const struct gpuctl_lease_owner *ow; /* borrowed from the lease list */
	size_t dev[64];                      /* its devices: lease list entries */
	size_t n_dev;
	bool shared;  /* some device is SHARED */
	int64_t idle; /* ms the least idle device has been idle; -1 some is not */
	size_t gpu0;  /* the GPU of its first device (its pool) */
};

/* The lease directory of the sample, opened (never created); NULL when there is none. */
static struct gpuctl_lease_dir *open_dir(const struct exporter_view *v)
{
	const char *path = gpuctl_site_lease_dir_path(v->site);
	struct gpuctl_lease_dir *dir = NULL;
	struct stat st;

	if (!path || lstat(path, &st) < 0 || gpuctl_lease_dir_open(v->ctx, path, &dir) < 0)
		return NULL;
	return dir;
}

size_t agent_pool_index(const struct exporter_view *v, size_t g, const char **ret_name)
{
	const char *name =
	        v->pool_of && v->pool_of[g] && v->pool_of[g][0] ? v->pool_of[g] : "default";
	size_t i = SIZE_MAX;

	*ret_name = name;
	if (strcmp(name, "default") != 0 &&
	    gpuctl_config_pool_find(NULL, gpuctl_site_config(v->site), name, &i) < 0)
		i = SIZE_MAX;
	return i;
}

/* Adds entry i (owner ow) to its holder in hs (n of them, at most max): 0, or -1 when full. */
static int holder_add(struct holder *hs, size_t *n, size_t max, const struct exporter_view *v,
                      size_t i, const struct gpuctl_lease_owner *ow, bool shared)
{
	char key[48];
	struct holder *h = NULL;
	size_t g = 0;

	(void)snprintf(key, sizeof(key), "%u@%" PRIu64, ow->pid, ow->start_time);
	for (size_t k = 0; k < *n && !h; k++)
		if (!strcmp(hs[k].key, key))
			h = &hs[k];
	(void)gpuctl_lease_list_get(v->leases, i, &g, NULL, NULL, NULL, NULL);
	if (!h) {
		if (*n == max)
			return -1;
		h = &hs[(*n)++];
		*h = (struct holder){.ow = ow, .idle = INT64_MAX, .gpu0 = g};
		memcpy(h->key, key, sizeof(key));
	}
	if (h->n_dev < sizeof(h->dev) / sizeof(h->dev[0]))
		h->dev[h->n_dev++] = i;
	h->shared |= shared;
	int64_t ms = v->lease_idle_ms ? v->lease_idle_ms[i] : -1;
	if (ms < 0 || h->idle < 0)
		h->idle = -1;
	else if (ms < h->idle)
		h->idle = ms;
	return 0;
}

/* The holders of the sample's leases. */
static size_t holders_of(const struct exporter_view *v, struct holder *hs, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < gpuctl_lease_list_count(v->leases); i++) {
		const struct gpuctl_lease_owner *const *owners = NULL;
		enum gpuctl_lease_state st;
		size_t n_own = 0;

		if (gpuctl_lease_list_get(v->leases, i, NULL, NULL, &st, NULL, NULL) < 0 ||
		    gpuctl_lease_list_holders(v->leases, i, &owners, &n_own) < 0)
			continue;
		for (size_t k = 0; k < n_own; k++)
			(void)holder_add(hs, &n, max, v, i, owners[k], st == GPUCTL_LEASE_SHARED);
	}
	return n;
}

/* "GPU 3" or "GPUs 3,4" (MIG devices by their GPU) of holder h into buf. */
static void devices_text(const struct exporter_view *v, const struct holder *h, char *buf,
                         size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t k = 0; k < h->n_dev && len < size; k++) {
		size_t g = 0;

		(void)gpuctl_lease_list_get(v->leases, h->dev[k], &g, NULL, NULL, NULL, NULL);
		int w = snprintf(buf + len, size - len, "%s%zu",
		                 k == 0 ? (h->n_dev > 1 ? "GPUs " : "GPU ") : ",", g);
		if (w < 0)
			break;
		len += (size_t)w;
	}
}

/* Whether holder key was warned in its current idle streak; keeps its mark for the next sample
 * when it was. */
static bool mark_keep(struct agent_idle *ai, const char *key)
{
	for (size_t i = 0; i < ai->n_marks; i++)
		if (!strcmp(ai->marks[i].key, key)) {
			ai->marks[i].seen = true;
			return true;
		}
	return false;
}

/* Marks holder key warned (out of memory: it may be warned again). */
static void mark_add(struct agent_idle *ai, const char *key)
{
	struct agent_idle_mark *m = realloc(ai->marks, (ai->n_marks + 1) * sizeof(*m));

	if (!m)
		return;
	ai->marks = m;
	(void)snprintf(m[ai->n_marks].key, sizeof(m[ai->n_marks].key), "%s", key);
	m[ai->n_marks++].seen = true;
}

/* Keeps the marks seen at this sample (idle still), for the next one. */
static void marks_sweep(struct agent_idle *ai)
{
	size_t n = 0;

	for (size_t i = 0; i < ai->n_marks; i++)
		if (ai->marks[i].seen) {
			ai->marks[n] = ai->marks[i];
			ai->marks[n++].seen = false;
		}
	ai->n_marks = n;
}

/* The on_idle event of holder h: action "warn" or "take-back" by rule (its limit), with the
 * reason a take-back gives (NULL for a warning). */
static void idle_event(struct agent_idle *ai, const struct exporter_view *v, const struct holder *h,
                       const char *action, const char *rule, uint64_t limit_s, const char *pool,
                       const char *reason)
{
	json_t *e, *gpus;
	int r = 0;

	if (!agent_hooks_wants(ai->hooks, "idle"))
		return;
	e = json_object();
	gpus = json_array();
	for (size_t k = 0; e && gpus && r == 0 && k < h->n_dev; k++) {
		size_t g = 0;
		(void)gpuctl_lease_list_get(v->leases, h->dev[k], &g, NULL, NULL, NULL, NULL);
		const char *u = gpuctl_gpu_str(gpuctl_snapshot_gpu(v->snap, g), GPUCTL_F_UUID);
		bool dup = false;
		for (size_t j = 0; u && j < json_array_size(gpus); j++)
			dup |= !strcmp(
			        json_string_value(json_object_get(json_array_get(gpus, j), "uuid")),
			        u);
		if (u && !dup)
			r = agent_events_gpu(gpus, v, u);
	}
	if (!e || !gpus || r < 0 || json_put(e, "action", json_text(action)) < 0 ||
	    json_put(e, "rule", json_text(rule)) < 0 ||
	    json_put(e, "limit_seconds", json_integer((json_int_t)limit_s)) < 0 ||
	    json_put(e, "idle_seconds", h->idle >= 0 ? json_integer(h->idle / 1000) : json_null()) <
	            0 ||
	    json_put(e, "reason", json_string_or_null(reason)) < 0 ||
	    json_put(e, "key", json_text(h->key)) < 0 ||
	    json_put(e, "pid", json_integer(h->ow->pid)) < 0 ||
	    json_put(e, "user", json_string_or_null(h->ow->user)) < 0 ||
	    json_put(e, "uid", json_integer(h->ow->uid)) < 0 ||
	    json_put(e, "label", json_string_or_null(h->ow->label)) < 0 ||
	    json_put(e, "pool", json_text(pool)) < 0 ||
	    json_put(e, "hold", json_boolean(h->ow->job_pid == 0)) < 0 ||
	    json_put(e, "shared", json_boolean(h->shared)) < 0 || json_put(e, "gpus", gpus) < 0) {
		json_decref(e);
		cli_error("agent: hook on_idle: %s (event not run)", strerror(ENOMEM));
		return;
	}
	agent_hooks_fire(ai->hooks, "idle", e);
}

/* Takes back holder h's devices with reason (by rule, limit_s of pool). */
static void take_back(struct agent_idle *ai, const struct exporter_view *v, const struct holder *h,
                      const char *reason, const char *rule, uint64_t limit_s, const char *pool)
{
	struct gpuctl_lease_dir *dir = open_dir(v);
	struct gpuctl_devset *set = NULL;
	char devs[128];
	int r = dir ? gpuctl_devset_new(&set) : -ENOENT;

	for (size_t k = 0; r >= 0 && k < h->n_dev; k++) {
		size_t g = 0;
		int mig = -1;

		(void)gpuctl_lease_list_get(v->leases, h->dev[k], &g, &mig, NULL, NULL, NULL);
		r = gpuctl_devset_add(set, g, mig);
	}
	if (r >= 0)
		r = gpuctl_lease_evict(v->ctx, dir, v->snap, set, reason, NULL);
	devices_text(v, h, devs, sizeof(devs));
	if (r < 0) {
		if (!ai->failing)
			cli_error("agent: cannot take back %s from pid %u: %s (tried again every "
			          "sample)",
			          devs, h->ow->pid,
			          dir ? gpuctl_errmsg(v->ctx) : "no lease directory");
		ai->failing = true;
	} else {
		if (r > 0) { /* 0: its lease ended meanwhile, nothing to take */
			cli_error("agent: took back %s from %s (pid %u): %s", devs,
			          h->ow->user ? h->ow->user : "?", h->ow->pid, reason);
			idle_event(ai, v, h, "take-back", rule, limit_s, pool, reason);
		}
		ai->failing = false;
	}
	gpuctl_devset_free(set);
	gpuctl_lease_dir_free(dir);
}

/* Whether the holder's lease is older than its user's quota_lease_length in the pool
 * (docs/config.md "Quotas": `run` states no length, so the agent bounds it), the quota's text in
 * buf. */
static bool over_lease_length(const struct exporter_view *v, const struct holder *h, size_t pi,
                              uint64_t *ret_s, char *buf, size_t size)
{
	struct gpuctl_config_quota q;

	if (!h->ow->leased_since ||
	    gpuctl_config_pool_quota(NULL, gpuctl_site_config(v->site), pi, h->ow->uid, &q) < 0 ||
	    !q.lease_length_s || v->wall < (double)h->ow->leased_since + (double)q.lease_length_s)
		return false;
	*ret_s = q.lease_length_s;
	idle_view_duration(q.lease_length_s, buf, size);
	return true;
}

/* One holder against its pool's idle actions. */
static void judge(struct agent_idle *ai, const struct exporter_view *v, const struct holder *h)
{
	struct gpuctl_config_idle c;
	const char *pool;
	size_t pi = agent_pool_index(v, h->gpu0, &pool);
	char reason[200], d1[32], d2[32], devs[128];
	bool hold = h->ow->job_pid == 0;
	uint64_t quota_s = 0;

	gpuctl_config_pool_idle(gpuctl_site_config(v->site), pi, &c);
	/* a holder found busy (or gone) loses its mark: its next idle streak is warned again */
	bool warned = h->idle >= 0 && mark_keep(ai, h->key);
	if (h->idle >= 0 && c.idle_warn_s && (uint64_t)h->idle >= c.idle_warn_s * 1000 && !warned) {
		mark_add(ai, h->key);
		idle_view_duration((uint64_t)h->idle / 1000, d1, sizeof(d1));
		idle_view_duration(c.idle_warn_s, d2, sizeof(d2));
		devices_text(v, h, devs, sizeof(devs));
		char then[64] = "";
		if (c.idle_release_s && hold && !h->shared) {
			char d3[32];
			idle_view_duration(c.idle_release_s, d3, sizeof(d3));
			(void)snprintf(then, sizeof(then), "; released at %s", d3);
		}
		cli_error(
		        "agent: idle: %s leased by %s (pid %u%s) idle for %s (idle_warn %s of pool "
		        "%s%s)",
		        devs, h->ow->user ? h->ow->user : "?", h->ow->pid, hold ? ", --hold" : "",
		        d1, d2, pool, then);
		idle_event(ai, v, h, "warn", "idle_warn", c.idle_warn_s, pool, NULL);
	}
	if (h->shared)
		return;
	if (h->idle >= 0 && c.idle_release_s && hold &&
	    (uint64_t)h->idle >= c.idle_release_s * 1000) {
		idle_view_duration(c.idle_release_s, d1, sizeof(d1));
		(void)snprintf(reason, sizeof(reason), "idle for %s (idle_release of pool %s)", d1,
		               pool);
		take_back(ai, v, h, reason, "idle_release", c.idle_release_s, pool);
	} else if (c.max_lease_age_s && h->ow->leased_since &&
	           v->wall >= (double)h->ow->leased_since + (double)c.max_lease_age_s) {
		idle_view_duration(c.max_lease_age_s, d1, sizeof(d1));
		(void)snprintf(reason, sizeof(reason),
		               "leased for more than %s (max_lease_age of pool %s)", d1, pool);
		take_back(ai, v, h, reason, "max_lease_age", c.max_lease_age_s, pool);
	} else if (over_lease_length(v, h, pi, &quota_s, d1, sizeof(d1))) {
		(void)snprintf(
		        reason, sizeof(reason),
		        "leased for more than %s (quota_lease_length of pool %s for user %s)", d1,
		        pool, h->ow->user ? h->ow->user : "?");
		take_back(ai, v, h, reason, "quota_lease_length", quota_s, pool);
	}
}

void agent_idle_sample(struct agent_idle *ai, const struct exporter_view *v)
{
	struct holder *hs;
	size_t n, max;

	if (!v->leases || !(max = gpuctl_lease_list_count(v->leases))) {
		ai->n_marks = 0; /* no lease, no streak */
		return;
	}
	if (!(hs = calloc(max, sizeof(*hs))))
		return;
	n = holders_of(v, hs, max);
	for (size_t i = 0; i < n; i++)
		judge(ai, v, &hs[i]);
	marks_sweep(ai);
	free(hs);
}

/* Whether device uuid is GPU gpu_uuid or one of its MIG devices in snap. */
static bool on_gpu(const struct gpuctl_snapshot *snap, const char *uuid, const char *gpu_uuid)
{
	if (!strcmp(uuid, gpu_uuid))
		return true;
	for (size_t g = 0; g < gpuctl_snapshot_gpu_count(snap); g++) {
		const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(snap, g);
		const char *u = gpuctl_gpu_str(gpu, GPUCTL_F_UUID);

		if (!u || strcmp(u, gpu_uuid) != 0)
			continue;
		for (size_t m = 0; m < gpuctl_gpu_mig_count(gpu); m++) {
			const char *mu = gpuctl_mig_uuid(gpuctl_gpu_mig(gpu, m));
			if (mu && !strcmp(mu, uuid))
				return true;
		}
	}
	return false;
}

bool agent_idle_evicted(struct agent_idle *ai, const struct exporter_view *v, const char *key,
                        const char *gpu_uuid)
{
	if (!ai->notices || ai->notices_mono != v->mono) {
		struct gpuctl_lease_dir *dir = open_dir(v);

		gpuctl_lease_notices_free(ai->notices);
		ai->notices = NULL;
		ai->notices_mono = v->mono;
		if (dir && gpuctl_lease_notices_read(v->ctx, dir, UINT32_MAX, &ai->notices) < 0)
			ai->notices = NULL;
		gpuctl_lease_dir_free(dir);
	}
	for (size_t i = 0; i < gpuctl_lease_notices_count(ai->notices); i++) {
		const struct gpuctl_lease_notice *n = gpuctl_lease_notices_get(ai->notices, i);
		char k[48];

		(void)snprintf(k, sizeof(k), "%u@%" PRIu64, n->pid, n->start_time);
		if (!strcmp(k, key) && on_gpu(v->snap, n->device, gpu_uuid))
			return true;
	}
	return false;
}

void agent_idle_free(struct agent_idle *ai)
{
	free(ai->marks);
	gpuctl_lease_notices_free(ai->notices);
	*ai = (struct agent_idle){0};
}
