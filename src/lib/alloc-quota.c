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

/* The ledger, opened once per allocation; NULL when there is none (said once). */
static struct gpuctl_ledger *quota_ledger(struct plan *p, struct gpuctl_ctx *ctx)
{
	struct gpuctl_ledger_options o = GPUCTL_LEDGER_OPTIONS_INIT;
	const char *path = gpuctl_config_settings(gpuctl_site_config(p->site))->ledger;
	char errsave[CTX_ERRMSG_MAX];
	int r;

	if (p->quota_ledger_tried)
		return p->quota_ledger;
	p->quota_ledger_tried = true;
	if (!path)
		path = GPUCTL_LEDGER_PATH;
	strscpy(errsave, sizeof(errsave), gpuctl_errmsg(ctx));
	r = gpuctl_ledger_open(ctx, path, &o, &p->quota_ledger);
	if (r < 0) {
		ctx_log(ctx, GPUCTL_LOG_INFO, "quotas: GPU-hour quotas not enforced: ledger %s: %s",
		        path,
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

/* GPU-hours: used in the window [since, since + len) on the pool's GPUs, in *ret. */
static int hours_used(struct qcheck *c, struct gpuctl_ledger *l, double since, double len,
                      double *ret)
{
	const struct gpuctl_snapshot *snap = c->p->snap;
	_cleanup_free_ const char **gpus = calloc(snap->n_gpus + 1, sizeof(*gpus));
	_cleanup_free_ char *name = nss_user_name(c->uid);
	size_t n = 0;
	double s = 0;
	int r;

	if (!gpus)
		return -ENOMEM;
	for (size_t g = 0; g < snap->n_gpus; g++)
		if (in_pool(c->map, g, c->idx) && lease_dev_uuid(snap, g, -1))
			gpus[n++] = lease_dev_uuid(snap, g, -1);
	if (n == 0) {
		*ret = 0;
		return 0;
	}
	r = gpuctl_ledger_user_usage(c->ctx, l, since, since + len, (int64_t)c->uid, name, gpus, n,
	                             &s);
	*ret = s / 3600.0;
	return r;
}

/* The GPU-hour quota of one window (day: is_week false): 0 or -EDQUOT. */
static int check_hours(struct qcheck *c, double limit, bool is_week, unsigned count)
{
	struct gpuctl_ledger *l;
	time_t now = time(NULL);
	double day = (double)(now / 86400) * DAY_S, since = day, used = 0, add = 0;
	char addtext[96] = "", t[3][32];
	int r;

	if (limit < 0 || !(l = quota_ledger(c->p, c->ctx)))
		return 0;
	if (is_week) /* 1970-01-01 was a Thursday: Monday is 3 days before */
		since = day - (double)(((now / 86400) + 3) % 7) * DAY_S;
	r = hours_used(c, l, since, is_week ? WEEK_S : DAY_S, &used);
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

/* The GPUs at once quota: 0 or -EDQUOT. */
static int check_gpus(struct qcheck *c, int64_t limit, unsigned count,
                      const struct gpuctl_devset *held)
{
	char list[256] = "";
	size_t n = 0, off = 0;

	if (limit < 0)
		return 0;
	for (size_t i = 0; i < gpuctl_devset_count(held); i++) {
		size_t g;
		int m;

		if (gpuctl_devset_get(held, i, &g, &m) < 0 || !in_pool(c->map, g, c->idx))
			continue;
		n++;
		if (off + 24 < sizeof(list))
			off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%zu",
			                        off ? "," : "", g);
		if (m >= 0 && off + 24 < sizeof(list))
			off += (size_t)snprintf(list + off, sizeof(list) - off, ":%d", m);
	}
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
	return ctx_error(c->ctx, -EDQUOT,
	                 "pool '%s': quota of %" PRId64
	                 " GPU%s at once for user %s: %zu held%s%s%s, "
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
