// SPDX-License-Identifier: MIT
/*
 * alloc-quota.c: the quotas of the configuration (docs/config.md "Quotas") enforced where a lease
 * is granted: the gate select-and-lease calls under select.lock (struct lease_gate,
 * lease-select.c), for the caller and for each older waiter (one over its quota holds back
 * nobody behind it).
 *
 * Decisions:
 * - Under select.lock, so two racing requests of one user cannot both pass: the devices a user
 *   holds are those whose lock is held and of which the user has a live owner record, and a
 *   lease's record is written before select.lock is let go of.
 * - GPUs at once count the devices of the pool (a MIG device is one, a shared lease's devices
 *   count as for an exclusive one). Lease length bounds a request that states its length
 *   (select --hold SECONDS: the request's lease_length_s); `run` states none and is not refused
 *   for it (the node agent takes back a lease older than the quota: src/cli/agent-idle.c).
 * - GPU-hours come from the ledger the governing configuration names (`ledger`, else the
 *   default path; never $GPUCTL_LEDGER, which the user sets), opened read-only; none there: the
 *   hour quotas are not enforced (said once at info level). The window is the UTC calendar day
 *   and the ISO week (from Monday 00:00 UTC): a quota that "resets" at a time anyone can read,
 *   as the message says. A lease that states its length adds count * length to what is used.
 * - -EDQUOT, one line naming the pool, the quota, the user, what is used and when it frees.
 * - What counts against a quota (the devices of the pool a user holds, the GPU-hours of a
 *   window, the windows themselves, the ledger) is computed by the functions of "What counts"
 *   below, which both the check and gpuctl_quota_use() (`gpuctl quota`) call: what the command
 *   shows is what the check compares, by construction.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc-internal.h"
#include "ctx.h"
#include "lease-internal.h"
#include "nss.h"
#include "snapshot-internal.h"
#include "util.h"

#define DAY_S  86400.0
#define WEEK_S (7 * 86400.0)

/* Pool name (NULL or "default": the default pool) to its index, SIZE_MAX for the default pool;
 * false when the configuration has no such pool. */
static bool pool_index(const struct gpuctl_config *cfg, const char *name, size_t *ret)
{
	*ret = SIZE_MAX;
	if (!name || streq(name, "default"))
		return true;
	for (size_t i = 0; i < gpuctl_config_pool_count(cfg); i++) {
		const char *n = NULL;

		if (gpuctl_config_pool_get(cfg, i, &n, NULL, NULL, NULL, NULL) == 0 && n &&
		    streq(n, name)) {
			*ret = i;
			return true;
		}
	}
	return false;
}

/* Whether GPU g is in pool idx (map NULL: no pools, every GPU is the default pool's). */
static bool in_pool(const int *map, size_t g, size_t idx)
{
	if (!map)
		return idx == SIZE_MAX;
	return map[g] < 0 ? idx == SIZE_MAX : (size_t)map[g] == idx;
}

/* ---- What counts: shared by the check and gpuctl_quota_use ---- */

/* The ledger the GPU-hour quotas read: the configuration's, else the default path. */
static const char *quota_ledger_path(const struct gpuctl_config *cfg)
{
	const char *path = gpuctl_config_settings(cfg)->ledger;

	return path ? path : GPUCTL_LEDGER_PATH;
}

/* That ledger, opened read-only: 0, or -ENOENT (none there) or another -errno (message set). */
static int quota_ledger_open(struct gpuctl_ctx *ctx, const struct gpuctl_config *cfg,
                             struct gpuctl_ledger **ret)
{
	struct gpuctl_ledger_options o = GPUCTL_LEDGER_OPTIONS_INIT;

	return gpuctl_ledger_open(ctx, quota_ledger_path(cfg), &o, ret);
}

/* The start of the window of now: the UTC day, or (is_week) the ISO week, from Monday. */
static double quota_window_start(time_t now, bool is_week)
{
	double day = (double)(now / 86400) * DAY_S;

	if (!is_week)
		return day;
	/* 1970-01-01 was a Thursday: Monday is 3 days before */
	return day - (double)(((now / 86400) + 3) % 7) * DAY_S;
}

/* The devices of held in pool idx (map: the pool of each GPU, NULL: no pools). */
static uint64_t quota_held_in_pool(const struct gpuctl_devset *held, const int *map, size_t idx)
{
	uint64_t n = 0;

	for (size_t i = 0; i < gpuctl_devset_count(held); i++) {
		size_t g;
		int m;

		if (gpuctl_devset_get(held, i, &g, &m) == 0 && in_pool(map, g, idx))
			n++;
	}
	return n;
}

/* GPU-hours of uid on the GPUs of pool idx of snap in the window [since, since + len), in *ret.
 */
static int quota_hours_used(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l,
                            const struct gpuctl_snapshot *snap, const int *map, size_t idx,
                            uid_t uid, double since, double len, double *ret)
{
	_cleanup_free_ const char **gpus = calloc(snap->n_gpus + 1, sizeof(*gpus));
	_cleanup_free_ char *name = nss_user_name(uid);
	size_t n = 0;
	double s = 0;
	int r;

	if (!gpus)
		return -ENOMEM;
	for (size_t g = 0; g < snap->n_gpus; g++)
		if (in_pool(map, g, idx) && lease_dev_uuid(snap, g, -1))
			gpus[n++] = lease_dev_uuid(snap, g, -1);
	if (n == 0) { /* no GPU: nothing used (0 GPUs would ask for every GPU's usage) */
		*ret = 0;
		return 0;
	}
	r = gpuctl_ledger_user_usage(ctx, l, since, since + len, (int64_t)uid, name, gpus, n, &s);
	if (r < 0)
		return r;
	*ret = s / 3600.0;
	return 0;
}

/* ---- The check ---- */

/* The ledger, opened once per allocation; NULL when there is none (said once). */
static struct gpuctl_ledger *quota_ledger(struct plan *p, struct gpuctl_ctx *ctx)
{
	const struct gpuctl_config *cfg = gpuctl_site_config(p->site);
	char errsave[CTX_ERRMSG_MAX];
	int r;

	if (p->quota_ledger_tried)
		return p->quota_ledger;
	p->quota_ledger_tried = true;
	strscpy(errsave, sizeof(errsave), gpuctl_errmsg(ctx));
	r = quota_ledger_open(ctx, cfg, &p->quota_ledger);
	if (r < 0) {
		ctx_log(ctx, GPUCTL_LOG_INFO, "quotas: GPU-hour quotas not enforced: ledger %s: %s",
		        quota_ledger_path(cfg),
		        r == -ENOENT ? "none (no agent has written one)" : gpuctl_errmsg(ctx));
		p->quota_ledger = NULL;
	}
	ctx_error(ctx, 0, "%s", errsave);
	return p->quota_ledger;
}

/* GPU-hours for a message: at most 2 decimals, no trailing zeros ("98.5", "0.05", "24"). */
static const char *hours_text(double h, char *buf, size_t size)
{
	size_t n;

	(void)snprintf(buf, size, "%.2f", h);
	n = strlen(buf);
	while (n > 0 && buf[n - 1] == '0')
		buf[--n] = '\0';
	if (n > 0 && buf[n - 1] == '.')
		buf[--n] = '\0';
	return buf;
}

/* What one check knows: who, which pool, its quota and what it holds. */
struct qcheck {
	struct plan *p;
	struct gpuctl_ctx *ctx;
	uid_t uid;
	char user[64];    /* the name, or the uid in decimal */
	const char *pool; /* the pool's name */
	size_t idx;       /* its index, SIZE_MAX: default */
	int *map;         /* the pool of each GPU, NULL: no pools */
	bool self;        /* the caller (messages; its lease length counts) */
};

/* The GPU-hour quota of one window (day: is_week false): 0 or -EDQUOT. */
static int check_hours(struct qcheck *c, double limit, bool is_week, unsigned count)
{
	struct gpuctl_ledger *l;
	double since = quota_window_start(time(NULL), is_week), used = 0, add = 0;
	char addtext[96] = "", t[3][32];
	int r;

	if (limit < 0 || !(l = quota_ledger(c->p, c->ctx)))
		return 0;
	r = quota_hours_used(c->ctx, l, c->p->snap, c->map, c->idx, c->uid, since,
	                     is_week ? WEEK_S : DAY_S, &used);
	if (r < 0) {
		ctx_log(c->ctx, GPUCTL_LOG_WARNING, "quotas: ledger: %s: GPU-hours not enforced",
		        gpuctl_errmsg(c->ctx));
		return 0;
	}
	if (c->self && c->p->in.lease_length_s)
		add = (double)count * (double)c->p->in.lease_length_s / 3600.0;
	if (used < limit && (add == 0 || used + add <= limit))
		return 0;
	if (!c->self)
		return -EDQUOT;
	if (used < limit)
		(void)snprintf(addtext, sizeof(addtext),
		               ", %s more asked for (%u GPU%s for %" PRIu64 " s)",
		               hours_text(add, t[0], sizeof(t[0])), count, count == 1 ? "" : "s",
		               c->p->in.lease_length_s);
	return ctx_error(c->ctx, -EDQUOT,
	                 "pool '%s': quota of %s GPU-hours a %s for user %s: %s used%s; resets %s"
	                 "00:00 UTC",
	                 c->pool, hours_text(limit, t[1], sizeof(t[1])), is_week ? "week" : "day",
	                 c->user, hours_text(used, t[2], sizeof(t[2])), addtext,
	                 is_week ? "Monday " : "at ");
}

/* The devices of held in the pool, for a message ("0,3:1"). */
static void held_list(const struct qcheck *c, const struct gpuctl_devset *held, char *list,
                      size_t size)
{
	size_t off = 0;

	list[0] = '\0';
	for (size_t i = 0; i < gpuctl_devset_count(held); i++) {
		size_t g;
		int m;

		if (gpuctl_devset_get(held, i, &g, &m) < 0 || !in_pool(c->map, g, c->idx))
			continue;
		if (off + 24 < size)
			off += (size_t)snprintf(list + off, size - off, "%s%zu", off ? "," : "", g);
		if (m >= 0 && off + 24 < size)
			off += (size_t)snprintf(list + off, size - off, ":%d", m);
	}
}

/* The GPUs at once quota: 0 or -EDQUOT. */
static int check_gpus(struct qcheck *c, int64_t limit, unsigned count,
                      const struct gpuctl_devset *held)
{
	char list[256];
	uint64_t n;

	if (limit < 0)
		return 0;
	n = quota_held_in_pool(held, c->map, c->idx);
	if (n + count <= (uint64_t)limit)
		return 0;
	if (!c->self)
		return -EDQUOT;
	if (count > (uint64_t)limit) {
		c->p->quota_never = true;
		return ctx_error(c->ctx, -EDQUOT,
		                 "pool '%s': quota of %" PRId64 " GPU%s at once for user %s: %u "
		                 "asked for, more than the quota: can never be satisfied",
		                 c->pool, limit, limit == 1 ? "" : "s", c->user, count);
	}
	held_list(c, held, list, sizeof(list));
	return ctx_error(c->ctx, -EDQUOT,
	                 "pool '%s': quota of %" PRId64 " GPU%s at once for user %s: %" PRIu64
	                 " held%s%s%s, "
	                 "%u asked for; frees when %s released",
	                 c->pool, limit, limit == 1 ? "" : "s", c->user, n, n ? " (GPU " : "", list,
	                 n ? ")" : "", count, n > 1 ? "one is" : "it is");
}

/* The lease length quota: 0 or -EDQUOT (the caller's request only). */
static int check_length(struct qcheck *c, uint64_t limit)
{
	uint64_t want = c->p->in.lease_length_s;

	if (!c->self || !limit || !want || want <= limit)
		return 0;
	c->p->quota_never = true;
	return ctx_error(c->ctx, -EDQUOT,
	                 "pool '%s': quota of %" PRIu64 " s a lease for user %s: %" PRIu64
	                 " s asked for: can never be satisfied",
	                 c->pool, limit, c->user, want);
}

static int quota_check(void *ud, struct gpuctl_ctx *ctx, uid_t uid, const char *pool_name,
                       unsigned count, const struct gpuctl_devset *held, bool self)
{
	struct plan *p = ud;
	const struct gpuctl_config *cfg = gpuctl_site_config(p->site);
	struct qcheck c = {.p = p, .ctx = ctx, .uid = uid, .self = self};
	struct gpuctl_config_quota q;
	_cleanup_free_ char *name = NULL;
	char errsave[CTX_ERRMSG_MAX];
	int r;

	if (!pool_index(cfg, pool_name, &c.idx))
		return 0; /* a waiter of a pool this file lacks: not ours to judge */
	c.pool = pool_name ? pool_name : "default";
	r = gpuctl_config_pool_quota(ctx, cfg, c.idx, (uint32_t)uid, &q);
	if (r < 0)
		return r;
	if (q.gpus < 0 && !q.lease_length_s && q.gpu_hours_day < 0 && q.gpu_hours_week < 0)
		return 0;
	name = nss_user_name(uid);
	if (name)
		strscpy(c.user, sizeof(c.user), name);
	else
		(void)snprintf(c.user, sizeof(c.user), "%u", (unsigned)uid);
	strscpy(errsave, sizeof(errsave), gpuctl_errmsg(ctx));
	if (gpuctl_config_pool_count(cfg) > 0 &&
	    gpuctl_config_pool_map(ctx, cfg, p->snap, &c.map) < 0) {
		ctx_error(ctx, 0, "%s", errsave);
		return self ? -EINVAL : 0; /* checked before (plan_pool): cannot happen */
	}
	r = check_length(&c, q.lease_length_s);
	if (r == 0)
		r = check_gpus(&c, q.gpus, count, held);
	if (r == 0)
		r = check_hours(&c, q.gpu_hours_day, false, count);
	if (r == 0)
		r = check_hours(&c, q.gpu_hours_week, true, count);
	free(c.map);
	return r;
}

const struct lease_gate *alloc_quota_gate(struct plan *p)
{
	if (!gpuctl_config_has_quota(gpuctl_site_config(p->site)))
		return NULL;
	p->gate = (struct lease_gate){.check = quota_check, .ud = p};
	return &p->gate;
}

/* ---- gpuctl_quota_use: what the check would count now ---- */

/* The GPU-hours of the day and the week into u (hours_error set when the ledger cannot be
 * read; the context's message is kept, as the check keeps it). */
static void use_hours(struct gpuctl_ctx *ctx, const struct gpuctl_config *cfg,
                      const struct gpuctl_snapshot *snap, const int *map, size_t idx, uid_t uid,
                      struct gpuctl_quota_use *u)
{
	struct gpuctl_ledger *l = NULL;
	char errsave[CTX_ERRMSG_MAX];
	int r;

	strscpy(errsave, sizeof(errsave), gpuctl_errmsg(ctx));
	r = quota_ledger_open(ctx, cfg, &l);
	if (r >= 0)
		r = quota_hours_used(ctx, l, snap, map, idx, uid, u->day_start, DAY_S,
		                     &u->gpu_hours_day);
	if (r >= 0)
		r = quota_hours_used(ctx, l, snap, map, idx, uid, u->week_start, WEEK_S,
		                     &u->gpu_hours_week);
	gpuctl_ledger_free(l);
	if (r < 0) {
		ctx_log(ctx, GPUCTL_LOG_DEBUG, "quotas: ledger %s: %s", quota_ledger_path(cfg),
		        r == -ENOENT ? "none (no agent has written one)" : gpuctl_errmsg(ctx));
		u->hours_error = r;
		u->gpu_hours_day = u->gpu_hours_week = 0;
	}
	ctx_error(ctx, 0, "%s", errsave);
}

/* The devices of pool idx that uid holds now, into u->gpus_held. */
static int use_held(struct gpuctl_ctx *ctx, const struct gpuctl_site *site,
                    const struct gpuctl_snapshot *snap, const int *map, size_t idx, uid_t uid,
                    struct gpuctl_quota_use *u)
{
	_cleanup_(gpuctl_devset_freep) struct gpuctl_devset *held = NULL;
	const struct gpuctl_lease_dir *dir = gpuctl_site_lease_dir(site);
	int r;

	u->gpus_held = 0;
	if (!dir) /* no lease directory: nothing is held */
		return 0;
	r = lease_held_by_user(ctx, dir, snap, uid, &held);
	if (r < 0)
		return r == -ENOMEM ? ctx_error(ctx, r, "out of memory") : r;
	u->gpus_held = quota_held_in_pool(held, map, idx);
	return 0;
}

int gpuctl_quota_use(struct gpuctl_ctx *ctx, const struct gpuctl_site *site,
                     const struct gpuctl_snapshot *snap, uint32_t uid, const char *pool,
                     struct gpuctl_quota_use *ret_use)
{
	const struct gpuctl_config *cfg;
	struct gpuctl_quota_use u = GPUCTL_QUOTA_USE_INIT;
	struct gpuctl_config_quota q;
	_cleanup_free_ int *map = NULL;
	time_t now = time(NULL);
	size_t idx;
	int r;

	if (!site || !snap || !ret_use || ret_use->struct_size < sizeof(size_t))
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	cfg = gpuctl_site_config(site);
	if (!pool_index(cfg, pool, &idx)) {
		r = gpuctl_config_pool_find(ctx, cfg, pool, &idx);
		return r < 0 ? r : ctx_error(ctx, -EINVAL, "pool '%s': not found", pool);
	}
	r = gpuctl_config_pool_quota(ctx, cfg, idx, uid, &q);
	if (r < 0)
		return r;
	if (gpuctl_config_pool_count(cfg) > 0) {
		r = gpuctl_config_pool_map(ctx, cfg, snap, &map);
		if (r < 0)
			return r;
	}
	u.gpus_limit = q.gpus;
	u.lease_length_limit_s = q.lease_length_s;
	u.gpu_hours_day_limit = q.gpu_hours_day;
	u.gpu_hours_week_limit = q.gpu_hours_week;
	u.ledger = quota_ledger_path(cfg);
	u.day_start = quota_window_start(now, false);
	u.week_start = quota_window_start(now, true);
	r = use_held(ctx, site, snap, map, idx, (uid_t)uid, &u);
	if (r < 0)
		return r;
	use_hours(ctx, cfg, snap, map, idx, (uid_t)uid, &u);
	memcpy(ret_use, &u, ret_use->struct_size < sizeof(u) ? ret_use->struct_size : sizeof(u));
	return 0;
}
