// SPDX-License-Identifier: MIT
/*
 * config-pools.c: the configuration's pools put to use: which GPUs of a snapshot each pool holds
 * (gpuctl_config_pool_map), finding a pool by name, and who may draw from it
 * (gpuctl_config_pool_allows). docs/config.md, "Pools".
 *
 * Decisions:
 * - GPU entries are resolved only here, against the snapshot in hand, and a resolution error
 *   names the file and the line of the gpus key, as a parse error would (struct parser).
 * - A GPU in two pools is an error; a GPU named twice by one pool is not.
 * - User and group names are looked up only here (nss.c), so a file naming accounts this
 *   machine lacks still parses; an entry that names no account matches nobody (logged at
 *   debug). Root may draw from every pool.
 * - A refusal is no error (returns 0) but leaves "pool 'NAME' is restricted to ..." as the
 *   context's message, for the caller to show.
 */
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config-internal.h"
#include "ctx.h"
#include "nss.h"
#include "snapshot-internal.h"
#include "util.h"

size_t gpuctl_config_pool_count(const struct gpuctl_config *cfg)
{
	return cfg ? cfg->n_pools : 0;
}

static bool pool_restricted(const struct pool *pool)
{
	return (pool->n_users > 0 || pool->n_groups > 0) && !pool->everyone;
}

int gpuctl_config_pool_get(const struct gpuctl_config *cfg, size_t i, const char **ret_name,
                           const char **ret_description, bool *ret_restricted,
                           const char *const **ret_users, const char *const **ret_groups)
{
	const struct pool *pool;

	if (!cfg || i >= cfg->n_pools)
		return -EINVAL;
	pool = &cfg->pools[i];
	if (ret_name)
		*ret_name = pool->name;
	if (ret_description)
		*ret_description = pool->description;
	if (ret_restricted)
		*ret_restricted = pool_restricted(pool);
	if (ret_users)
		*ret_users = (const char *const *)pool->users;
	if (ret_groups)
		*ret_groups = (const char *const *)pool->groups;
	return 0;
}

void gpuctl_config_pool_idle(const struct gpuctl_config *cfg, size_t i,
                             struct gpuctl_config_idle *ret)
{
	struct idle_keys ik = {0};
	const struct pool *pool = cfg && i < cfg->n_pools ? &cfg->pools[i] : NULL;

	if (cfg)
		ik = cfg->idle;
	for (int k = 0; pool && k < I__COUNT; k++)
		if (pool->idle.line[k])
			ik.s[k] = pool->idle.s[k];
	*ret = (struct gpuctl_config_idle){.idle_warn_s = ik.s[I_WARN],
	                                   .idle_release_s = ik.s[I_RELEASE],
	                                   .max_lease_age_s = ik.s[I_MAX_AGE]};
}

/* The snapshot index of a single-GPU entry, through gpuctl_ids_resolve. */
static int resolve_entry(struct parser *p, const struct gpuctl_snapshot *snap,
                         const struct gpu_entry *ge, size_t *ret)
{
	_cleanup_free_ size_t *idx = NULL;
	char msg[CTX_ERRMSG_MAX];
	size_t n = 0;
	int r;

	r = gpuctl_ids_resolve(p->ctx, snap, ge->text, &idx, &n);
	if (r < 0) {
		if (r == -ENOMEM)
			return r;
		strscpy(msg, sizeof(msg), gpuctl_errmsg(p->ctx));
		return config_perr(p, "[pool %s] gpus: %s", p->cur->name, msg);
	}
	if (n != 1)
		return config_perr(p, "[pool %s] gpus: '%s' names no single GPU", p->cur->name,
		                   ge->text);
	*ret = idx[0];
	return 0;
}

/* Gives GPU g to pool pi (a GPU named twice by one pool is fine). */
static int assign(struct parser *p, const struct gpuctl_snapshot *snap, int *map, size_t g, int pi)
{
	const struct pool *other;
	const char *uuid;

	if (map[g] < 0 || map[g] == pi) {
		map[g] = pi;
		return 0;
	}
	other = &p->cfg->pools[map[g]];
	uuid = gpuctl_gpu_str(gpuctl_snapshot_gpu(snap, g), GPUCTL_F_UUID);
	return config_perr(p, "GPU %zu%s%s%s is in two pools: '%s' (line %u) and '%s'", g,
	                   uuid ? " (" : "", uuid ? uuid : "", uuid ? ")" : "", other->name,
	                   other->key_line[P_GPUS], p->cur->name);
}

int gpuctl_config_pool_map(struct gpuctl_ctx *ctx, const struct gpuctl_config *cfg,
                           const struct gpuctl_snapshot *snap, int **ret_pool)
{
	struct parser p = {.ctx = ctx, .cfg = (struct gpuctl_config *)cfg};
	_cleanup_free_ int *map = NULL;
	size_t n_gpus;
	int r;

	if (!snap || !ret_pool)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	n_gpus = gpuctl_snapshot_gpu_count(snap);
	map = malloc((n_gpus ? n_gpus : 1) * sizeof(*map));
	if (!map)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	for (size_t g = 0; g < n_gpus; g++)
		map[g] = -1;
	for (size_t i = 0; cfg && i < cfg->n_pools; i++) {
		/* Only read through p: the const is cast away for the shared config_perr(). */
		p.cur = &p.cfg->pools[i];
		for (size_t k = 0; k < p.cur->n_gpus; k++) {
			const struct gpu_entry *ge = &p.cur->gpus[k];
			size_t g = 0;

			p.line = ge->line;
			if (ge->range) {
				if (ge->hi >= n_gpus)
					return config_perr(
					        &p,
					        "[pool %s] gpus: '%s': no GPU with index %" PRIu64
					        " (%zu GPUs)",
					        p.cur->name, ge->text, ge->hi, n_gpus);
				for (uint64_t x = ge->lo; x <= ge->hi; x++) {
					r = assign(&p, snap, map, (size_t)x, (int)i);
					if (r < 0)
						return r;
				}
				continue;
			}
			r = resolve_entry(&p, snap, ge, &g);
			if (r < 0)
				return r;
			r = assign(&p, snap, map, g, (int)i);
			if (r < 0)
				return r;
		}
	}
	*ret_pool = TAKE_PTR(map);
	return 0;
}

int gpuctl_config_pool_find(struct gpuctl_ctx *ctx, const struct gpuctl_config *cfg,
                            const char *name, size_t *ret_index)
{
	size_t n = gpuctl_config_pool_count(cfg);
	char list[CTX_ERRMSG_MAX / 2] = "", q[QUOTE_MAX + 4];
	size_t off = 0;

	if (!name || !ret_index)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	for (size_t i = 0; i < n; i++)
		if (streq(cfg->pools[i].name, name)) {
			*ret_index = i;
			return 0;
		}
	quote_text(q, sizeof(q), name, strlen(name), QUOTE_MAX);
	if (n == 0)
		return ctx_error(ctx, -ENOENT, "no pool '%s' (no pools are configured)", q);
	for (size_t i = 0; i < n; i++) {
		int w = snprintf(list + off, sizeof(list) - off, "%s%s", i ? ", " : "",
		                 cfg->pools[i].name);

		if (w < 0 || (size_t)w >= sizeof(list) - off) {
			/* cut: end with ", ..." where there is room */
			off = off > sizeof(list) - 6 ? sizeof(list) - 6 : off;
			(void)snprintf(list + off, sizeof(list) - off, ", ...");
			break;
		}
		off += (size_t)w;
	}
	return ctx_error(ctx, -ENOENT, "no pool '%s' (pools: %s, and default)", q, list);
}

int config_user_info_get(uint32_t uid, struct config_user_info *ret)
{
	_cleanup_free_ char *buf = NULL;
	struct passwd pw;
	int r;

	*ret = (struct config_user_info){0};
	r = nss_passwd((uid_t)uid, &pw, &buf);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return 0; /* no name: matched by number only */
	ret->name = strdup(pw.pw_name);
	if (!ret->name)
		return -ENOMEM;
	ret->gid = pw.pw_gid;
	for (int n = 32;;) {
		gid_t *g = realloc(ret->groups, (size_t)n * sizeof(*g));
		int want = n;

		if (!g)
			return -ENOMEM;
		ret->groups = g;
		if (getgrouplist(ret->name, ret->gid, g, &want) >= 0) {
			ret->n_groups = want;
			return 0;
		}
		if (want <= n)
			want = n * 2;
		if (want > 65536)
			return 0; /* absurd: keep the primary group only */
		n = want;
	}
}

void config_user_info_done(struct config_user_info *u)
{
	free(u->name);
	free(u->groups);
}

static bool user_matches(struct gpuctl_ctx *ctx, const struct pool *pool, const char *e,
                         uint32_t uid, const struct config_user_info *u)
{
	uint64_t id;

	if (streq(e, "*"))
		return true;
	if (config_all_digits(e, strlen(e)))
		return config_digits_u64(e, strlen(e), &id) && id == uid;
	if (u->name && streq(e, u->name))
		return true;
	if (!nss_user_exists(e))
		ctx_log(ctx, GPUCTL_LOG_DEBUG,
		        "config: pool '%s': user '%s' (line %u) does not exist", pool->name, e,
		        pool->key_line[P_USERS]);
	return false;
}

int config_in_group(const char *e, const struct config_user_info *u)
{
	uint64_t id;
	gid_t gid;

	if (config_all_digits(e, strlen(e))) {
		if (!config_digits_u64(e, strlen(e), &id) || id >= UINT32_MAX)
			return 0;
		gid = (gid_t)id;
	} else if (nss_group_gid(e, &gid) < 0) {
		return -ENOENT;
	}
	if (!u->name)
		return 0;
	if (gid == u->gid)
		return 1;
	for (int i = 0; i < u->n_groups; i++)
		if (u->groups[i] == gid)
			return 1;
	return 0;
}

static bool group_matches(struct gpuctl_ctx *ctx, const struct pool *pool, const char *e,
                          const struct config_user_info *u)
{
	int r = config_in_group(e, u);

	if (r == -ENOENT)
		ctx_log(ctx, GPUCTL_LOG_DEBUG,
		        "config: pool '%s': group '%s' (line %u) does not exist", pool->name, e,
		        pool->key_line[P_GROUPS]);
	return r > 0;
}

/* Appends text to buf[size] at *off, cutting what does not fit (buf stays NUL-terminated). */
static void append(char *buf, size_t size, size_t *off, const char *text)
{
	size_t n = strlen(text);

	if (*off + 1 >= size)
		return;
	if (n > size - 1 - *off)
		n = size - 1 - *off;
	memcpy(buf + *off, text, n);
	*off += n;
	buf[*off] = '\0';
}

/* Appends "users a, b" (or "user a") of list to buf. */
static void append_list(char *buf, size_t size, size_t *off, const char *what, char *const *list,
                        size_t n)
{
	append(buf, size, off, what);
	append(buf, size, off, n == 1 ? " " : "s ");
	for (size_t i = 0; i < n; i++) {
		if (i)
			append(buf, size, off, ", ");
		append(buf, size, off, list[i]);
	}
}

static int refuse(struct gpuctl_ctx *ctx, const struct pool *pool)
{
	char buf[CTX_ERRMSG_MAX - 2 * POOL_NAME_MAX] = "";
	size_t off = 0;

	if (pool->n_users)
		append_list(buf, sizeof(buf), &off, "user", pool->users, pool->n_users);
	if (pool->n_users && pool->n_groups)
		append(buf, sizeof(buf), &off, " and ");
	if (pool->n_groups)
		append_list(buf, sizeof(buf), &off, "group", pool->groups, pool->n_groups);
	return ctx_error(ctx, 0, "pool '%s' is restricted to %s", pool->name, buf);
}

int gpuctl_config_pool_allows(struct gpuctl_ctx *ctx, const struct gpuctl_config *cfg, size_t i,
                              uint32_t uid)
{
	_cleanup_(config_user_info_done) struct config_user_info u = {0};
	const struct pool *pool;
	int r;

	if (!cfg || i >= cfg->n_pools)
		return ctx_error(ctx, -EINVAL, "no pool number %zu", i);
	pool = &cfg->pools[i];
	if (uid == 0 || !pool_restricted(pool))
		return 1;
	r = config_user_info_get(uid, &u);
	if (r < 0)
		return ctx_error(ctx, r, "out of memory");
	for (size_t k = 0; k < pool->n_users; k++)
		if (user_matches(ctx, pool, pool->users[k], uid, &u))
			return 1;
	for (size_t k = 0; k < pool->n_groups; k++)
		if (group_matches(ctx, pool, pool->groups[k], &u))
			return 1;
	return refuse(ctx, pool);
}
