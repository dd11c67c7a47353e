// SPDX-License-Identifier: MIT
/*
 * config-quota.c: the quota keys of the configuration file (docs/config.md "Quotas"):
 * quota_gpus, quota_lease_length, quota_gpu_hours_day and quota_gpu_hours_week, parsed strictly
 * (config.c hands every quota_* key here), and a user's quotas in a pool resolved
 * (gpuctl_config_pool_quota). Enforcing them is select-and-lease's (src/lib/alloc-quota.c).
 *
 * Decisions:
 * - One line per key, a comma-separated list as gpus, users and groups are: a bare VALUE (the
 *   default of every user the key does not name), USER:VALUE (a name or a decimal uid) and
 *   @GROUP:VALUE (a name or a decimal gid), VALUE `unlimited` for no limit. It fits the parser's
 *   one-line "key = value" and keeps a key's whole policy on one line.
 * - A user's own entry wins; else the most generous entry of the groups the user is in (a
 *   group quota raises a default, it does not lower a member's: membership is granted by
 *   admins to give, as Slurm's and genv's per-group limits are read); else the default; else no
 *   limit. Each key on its own: a pool that gives a key replaces the global section's entries
 *   of that key entirely (as the idle keys), not entry by entry.
 * - Root has no quota (it may draw from every pool too).
 * - Names are resolved only when a quota is looked up, so a file naming accounts this machine
 *   lacks still parses; an entry that names no account matches nobody.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config-internal.h"
#include "ctx.h"
#include "parse.h"
#include "util.h"

static const char *const quota_keys[Q__COUNT] = {"quota_gpus", "quota_lease_length",
                                                 "quota_gpu_hours_day", "quota_gpu_hours_week"};

#define QUOTA_GPUS_MAX  4096      /* devices: more than any machine has */
#define QUOTA_HOURS_MAX 1000000.0 /* GPU-hours */

void config_quota_done(struct quota_keys *q)
{
	for (int k = 0; k < Q__COUNT; k++) {
		for (size_t i = 0; i < q->n[k]; i++)
			free(q->e[k][i].who);
		free(q->e[k]);
		q->e[k] = NULL;
		q->n[k] = 0;
	}
}

/* GPU-hours: decimal digits, optionally a '.' and 1-3 more. */
static bool parse_hours(const char *s, size_t len, double *ret)
{
	const char *dot = memchr(s, '.', len);
	size_t ilen = dot ? (size_t)(dot - s) : len;
	uint64_t whole = 0, frac = 0, scale = 1;

	if (!config_all_digits(s, ilen) || ilen > 7 || !config_digits_u64(s, ilen, &whole))
		return false;
	if (dot) {
		size_t flen = len - ilen - 1;

		if (flen < 1 || flen > 3 || !config_all_digits(dot + 1, flen))
			return false;
		(void)config_digits_u64(dot + 1, flen, &frac);
		for (size_t i = 0; i < flen; i++)
			scale *= 10;
	}
	*ret = (double)whole + (double)frac / (double)scale;
	return *ret <= QUOTA_HOURS_MAX;
}

/* The VALUE of an entry for key k (v[0..len)); 0, or config_perr's -EINVAL. */
static int parse_value(struct parser *p, enum quota_key k, const char *v, size_t len, double *ret)
{
	char q[QUOTE_MAX + 4], buf[32];
	uint64_t n = 0;
	int r;

	quote_text(q, sizeof(q), v, len, QUOTE_MAX);
	if (len == 9 && memcmp(v, "unlimited", 9) == 0) {
		*ret = -1;
		return 0;
	}
	switch (k) {
	case Q_GPUS:
		if (!config_all_digits(v, len) || !config_digits_u64(v, len, &n) ||
		    n > QUOTA_GPUS_MAX)
			return config_perr(p,
			                   "%s: '%s': not a number of GPUs (0 to %d, or unlimited)",
			                   quota_keys[k], q, QUOTA_GPUS_MAX);
		*ret = (double)n;
		return 0;
	case Q_LEASE_LENGTH:
		if (len >= sizeof(buf))
			r = -EINVAL;
		else {
			memcpy(buf, v, len);
			buf[len] = '\0';
			r = parse_duration(buf, &n);
		}
		if (r == -ERANGE)
			return config_perr(p, "%s: '%s': longer than 366 days", quota_keys[k], q);
		if (r < 0 || n == 0)
			return config_perr(p,
			                   "%s: '%s': not a duration (a number and s, m, h or d: "
			                   "30m, 8h, 7d; or unlimited)",
			                   quota_keys[k], q);
		*ret = (double)n;
		return 0;
	case Q_HOURS_DAY:
	case Q_HOURS_WEEK:
		if (!parse_hours(v, len, ret))
			return config_perr(p,
			                   "%s: '%s': not a number of GPU-hours (0 to 1000000, at "
			                   "most 3 decimals: 24, 0.5; or unlimited)",
			                   quota_keys[k], q);
		return 0;
	case Q__COUNT:
		break;
	}
	return config_perr(p, "internal error: bad quota key");
}

/* Whether who (a user or group entry, len bytes) is a name or decimal id we accept. */
static bool who_ok(const char *who, size_t len)
{
	uint64_t id;

	if (len == 0 || len > ACCOUNT_NAME_MAX)
		return false;
	if (config_all_digits(who, len))
		return config_digits_u64(who, len, &id) && id < UINT32_MAX;
	for (size_t i = 0; i < len; i++)
		if (who[i] == ' ' || who[i] == '\t' || who[i] == ':' || who[i] == '*' ||
		    who[i] == '/' || who[i] == '@' || who[i] == ',')
			return false;
	return true;
}

/* One entry e[0..len) of key k into qk. */
static int add_entry(struct parser *p, struct quota_keys *qk, enum quota_key k, const char *e,
                     size_t len)
{
	const char *colon = memchr(e, ':', len);
	struct quota_entry ent = {.value = -1}, *v;
	char q[QUOTE_MAX + 4];
	int r;

	quote_text(q, sizeof(q), e, len, QUOTE_MAX);
	if (colon) {
		const char *who = e, *val = colon + 1, *end = e + len;
		size_t wlen = (size_t)(colon - e);

		ent.group = wlen > 0 && who[0] == '@';
		if (ent.group) {
			who++;
			wlen--;
		}
		while (wlen > 0 && (who[wlen - 1] == ' ' || who[wlen - 1] == '\t'))
			wlen--;
		if (!who_ok(who, wlen))
			return config_perr(p,
			                   "%s: '%s': not USER:VALUE or @GROUP:VALUE (a name or "
			                   "number before the ':')",
			                   quota_keys[k], q);
		while (val < end && (*val == ' ' || *val == '\t'))
			val++;
		r = parse_value(p, k, val, (size_t)(end - val), &ent.value);
		if (r < 0)
			return r;
		ent.who = strndup(who, wlen);
		if (!ent.who)
			return ctx_error(p->ctx, -ENOMEM, "out of memory");
	} else {
		r = parse_value(p, k, e, len, &ent.value);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < qk->n[k]; i++) {
		const struct quota_entry *o = &qk->e[k][i];

		if ((!o->who && !ent.who) ||
		    (o->who && ent.who && o->group == ent.group && streq(o->who, ent.who))) {
			const char *what = ent.who ? "this user or group" : "the default";

			free(ent.who);
			return config_perr(p, "%s: '%s': %s given twice", quota_keys[k], q, what);
		}
	}
	v = realloc(qk->e[k], (qk->n[k] + 1) * sizeof(*v));
	if (!v) {
		free(ent.who);
		return ctx_error(p->ctx, -ENOMEM, "out of memory");
	}
	qk->e[k] = v;
	v[qk->n[k]++] = ent;
	return 0;
}

int config_quota_set(struct parser *p, const char *key, const char *value)
{
	struct quota_keys *qk = p->cur ? &p->cur->quota : &p->cfg->quota;
	char q[QUOTE_MAX + 4], w[POOL_NAME_MAX + 16] = "";
	enum quota_key k = Q__COUNT;
	size_t pos = 0;

	if (strncmp(key, "quota_", 6) != 0)
		return 1;
	for (int i = 0; i < Q__COUNT; i++)
		if (streq(key, quota_keys[i]))
			k = (enum quota_key)i;
	if (p->cur)
		(void)snprintf(w, sizeof(w), " in [pool %s]", p->cur->name);
	quote_text(q, sizeof(q), key, strlen(key), QUOTE_MAX);
	if (k == Q__COUNT)
		return config_perr(p,
		                   "unknown key '%s'%s (expected quota_gpus, quota_lease_length, "
		                   "quota_gpu_hours_day or quota_gpu_hours_week)",
		                   q, w);
	if (qk->line[k])
		return config_perr(p, "key '%s' given twice%s (first on line %u)", key, w,
		                   qk->line[k]);
	qk->line[k] = p->line;
	if (!value[0])
		return config_perr(p, "empty value for '%s'%s", key, w);
	for (const char *s = value;;) {
		const char *comma = strchr(s, ',');
		const char *b = s, *e = comma ? comma : s + strlen(s);
		int r;

		pos++;
		while (b < e && (*b == ' ' || *b == '\t'))
			b++;
		while (e > b && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		if (b == e)
			return config_perr(p, "%s: entry %zu of the list is empty", key, pos);
		r = add_entry(p, qk, k, b, (size_t)(e - b));
		if (r < 0)
			return r;
		if (!comma)
			return 0;
		s = comma + 1;
	}
}

/* The value of key k's entries e[0..n) for uid (u its facts): < 0 no limit. */
static double resolve(const struct quota_entry *e, size_t n, uint32_t uid,
                      const struct config_user_info *u)
{
	double dflt = -1, grp = -2;
	uint64_t id;

	for (size_t i = 0; i < n; i++) {
		if (!e[i].who) {
			dflt = e[i].value;
		} else if (!e[i].group) {
			if (config_all_digits(e[i].who, strlen(e[i].who))
			            ? config_digits_u64(e[i].who, strlen(e[i].who), &id) &&
			                      id == uid
			            : u->name && streq(e[i].who, u->name))
				return e[i].value;
		} else if (config_in_group(e[i].who, u) > 0 && grp != -1) {
			/* the most generous group: no limit beats any limit */
			grp = e[i].value < 0 ? -1
			                     : (grp < 0 || e[i].value > grp ? e[i].value : grp);
		}
	}
	return grp != -2 ? grp : dflt;
}

int gpuctl_config_pool_quota(struct gpuctl_ctx *ctx, const struct gpuctl_config *cfg, size_t i,
                             uint32_t uid, struct gpuctl_config_quota *ret)
{
	_cleanup_(config_user_info_done) struct config_user_info u = {0};
	const struct pool *pool = cfg && i < cfg->n_pools ? &cfg->pools[i] : NULL;
	double v[Q__COUNT];
	int r;

	if (!ret)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	*ret = (struct gpuctl_config_quota){.gpus = -1, .gpu_hours_day = -1, .gpu_hours_week = -1};
	if (!cfg || uid == 0)
		return 0;
	r = config_user_info_get(uid, &u);
	if (r < 0)
		return ctx_error(ctx, r, "out of memory");
	for (int k = 0; k < Q__COUNT; k++) {
		const struct quota_keys *qk =
		        pool && pool->quota.line[k] ? &pool->quota : &cfg->quota;

		v[k] = resolve(qk->e[k], qk->n[k], uid, &u);
	}
	ret->gpus = v[Q_GPUS] < 0 ? -1 : (int64_t)v[Q_GPUS];
	ret->lease_length_s = v[Q_LEASE_LENGTH] < 0 ? 0 : (uint64_t)v[Q_LEASE_LENGTH];
	ret->gpu_hours_day = v[Q_HOURS_DAY];
	ret->gpu_hours_week = v[Q_HOURS_WEEK];
	return 0;
}

bool gpuctl_config_has_quota(const struct gpuctl_config *cfg)
{
	if (!cfg)
		return false;
	for (int k = 0; k < Q__COUNT; k++) {
		if (cfg->quota.line[k])
			return true;
		for (size_t i = 0; i < cfg->n_pools; i++)
			if (cfg->pools[i].quota.line[k])
				return true;
	}
	return false;
}
