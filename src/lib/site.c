// SPDX-License-Identifier: MIT
/*
 * site.c: the site, i.e. the configuration and the lease directory that govern requests on this
 * machine, opened and checked together (docs/config.md "Trust", docs/leases.md); and the health
 * report as every command makes it (live verdicts, the kernel log, the health state file).
 * Tests: tests/unit/test-site.c, tests/cli/test_pools.py, test_leases.py, test_alloc.py.
 *
 * Decisions:
 * - The lease directory's path is resolved first from the argument, then $GPUCTL_LEASE_DIR,
 *   then the configuration's lease_dir, then /run/gpuctl; so the configuration is loaded first.
 * - Without GPUCTL_SITE_CREATE a missing lease directory is not created (a plain select as root
 *   must not make /run/gpuctl as a side effect) and means that nothing is leased.
 * - A shared directory (owned by someone else than the caller, who is not root) is governed by
 *   the configuration it names (DIR/config, else the default path): a user cannot bring pools
 *   of their own to a directory others share. The configuration read is identified by what was
 *   opened (device and inode), never by its path, which its owner could have swapped since. A
 *   named other file is a bad request (-EINVAL): guessing which one the user meant would hand
 *   out GPUs by the wrong rules. A governing file others could write is -EPERM.
 * - A missing named configuration file is -EINVAL, not -ENOENT: it is a mistake in the request,
 *   and -ENOENT keeps its one meaning here (a lease directory not ours to create).
 * - Lease directory errors carry "lease directory PATH: " before the reason, so every caller
 *   says them the same way.
 * - The health report reads two optional sources: a source that cannot be read is logged at
 *   debug level and is no finding (the kernel log is root's on most machines).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctx.h"
#include "util.h"

#define SITE_STATE_FILE   "gpuctl-health.state"
#define SITE_STATE_SUFFIX "-health.state"

struct gpuctl_site {
	struct gpuctl_config *config; /* the governing configuration, NULL: empty */
	char *lease_dir_path;         /* as resolved, owned */
	struct gpuctl_lease_dir *dir; /* NULL when missing or not looked at */
	char *health_state_path;      /* owned */
};

void gpuctl_site_free(struct gpuctl_site *site)
{
	if (!site)
		return;
	gpuctl_config_free(site->config);
	gpuctl_lease_dir_free(site->dir);
	free(site->lease_dir_path);
	free(site->health_state_path);
	free(site);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct gpuctl_site *, gpuctl_site_free)

const struct gpuctl_config *gpuctl_site_config(const struct gpuctl_site *site)
{
	return site ? site->config : NULL;
}

const char *gpuctl_site_lease_dir_path(const struct gpuctl_site *site)
{
	return site ? site->lease_dir_path : NULL;
}

struct gpuctl_lease_dir *gpuctl_site_lease_dir(const struct gpuctl_site *site)
{
	return site ? site->dir : NULL;
}

const char *gpuctl_site_health_state_path(const struct gpuctl_site *site)
{
	return site ? site->health_state_path : NULL;
}

int gpuctl_site_lease_defaults(const struct gpuctl_site *site, struct gpuctl_lease_request *lreq)
{
	const struct gpuctl_config_settings *set = gpuctl_config_settings(gpuctl_site_config(site));
	struct gpuctl_lease_request d = GPUCTL_LEASE_REQUEST_INIT;
	size_t size;

	/* the first release's struct ends after ignore_foreign: an older caller's smaller struct
	 * gets its own fields only */
	if (!lreq || lreq->struct_size < offsetof(struct gpuctl_lease_request, share_mem))
		return -EINVAL;
	size = lreq->struct_size < sizeof(d) ? lreq->struct_size : sizeof(d);
	d.struct_size = lreq->struct_size;
	d.busy_memory = set->busy_memory;
	d.busy_utilization = set->busy_utilization;
	d.share_margin = set->share_margin;
	d.share_margin_is_pct = set->share_margin_is_pct;
	memcpy(lreq, &d, size);
	return 0;
}

/* Loads the configuration from path (NULL: $GPUCTL_CONFIG, else the default). */
static int load_config(struct gpuctl_ctx *ctx, const char *path, struct gpuctl_config **ret_cfg)
{
	int r = gpuctl_config_load(ctx, path, ret_cfg);

	/* a named file that is missing: the request is wrong (the message names the file) */
	return r == -ENOENT ? -EINVAL : r;
}

/* The file read is the one at want (nothing read and want missing: the same). */
static bool config_is(const struct gpuctl_config *cfg, const char *want)
{
	struct stat st;

	if (!gpuctl_config_path(cfg))
		return stat(want, &st) < 0 && errno == ENOENT;
	return gpuctl_config_is_file(cfg, want) == 1;
}

/* docs/config.md "Trust": with a shared lease directory, the configuration is the one the
 * directory names, in a file only root or the directory's owner could have written. */
static int config_trust(struct gpuctl_ctx *ctx, struct gpuctl_site *site, bool named)
{
	uint32_t owner = gpuctl_lease_dir_owner(site->dir), fuid = 0, fmode = 0;
	_cleanup_free_ char *pinned = NULL;
	const char *want;
	int r;

	if (owner == (uint32_t)geteuid() || geteuid() == 0)
		return 0; /* a directory of one's own, or root: any configuration */
	r = gpuctl_lease_dir_config(ctx, site->dir, &pinned);
	if (r < 0)
		return ctx_error_prefix(ctx, r, "lease directory %s", site->lease_dir_path);
	want = pinned ? pinned : GPUCTL_CONFIG_DEFAULT_PATH;
	if (!config_is(site->config, want)) {
		if (named)
			return ctx_error(
			        ctx, -EINVAL,
			        "configuration %s: the shared lease directory %s follows %s "
			        "(gpuctl lease init); another file needs a lease directory "
			        "of your own",
			        gpuctl_config_path(site->config) ? gpuctl_config_path(site->config)
			                                         : "/dev/null (none)",
			        site->lease_dir_path, want);
		gpuctl_config_free(site->config);
		site->config = NULL;
		r = gpuctl_config_load(ctx, want, &site->config);
		if (r == -ENOENT && !pinned)
			r = 0; /* no default file: an empty configuration */
		if (r < 0)
			return r;
	}
	if (gpuctl_config_file_owner(site->config, &fuid, &fmode) == 0 &&
	    ((fuid != 0 && fuid != owner) || (fmode & (S_IWGRP | S_IWOTH))))
		return ctx_error(ctx, -EPERM,
		                 "configuration %s: %s, so it cannot govern the shared lease "
		                 "directory %s",
		                 gpuctl_config_path(site->config),
		                 fmode & (S_IWGRP | S_IWOTH) ? "writable by group or others"
		                                             : "owned by another user than root",
		                 site->lease_dir_path);
	return 0;
}

/* $GPUCTL_HEALTH_STATE, else the lease directory's path with "-health.state" appended, beside
 * it: /run/gpuctl-health.state for /run/gpuctl. Named after the directory, so that two lease
 * directories in one parent never share a state file; "/gpuctl-health.state" for "/". */
static char *state_path_beside(const char *dir)
{
	const char *env = getenv("GPUCTL_HEALTH_STATE");
	char *p = NULL;
	size_t n;

	if (env && env[0])
		return strdup(env);
	n = strlen(dir);
	while (n > 0 && dir[n - 1] == '/')
		n--;
	if (n == 0)
		return strdup(dir[0] == '/' ? "/" SITE_STATE_FILE : SITE_STATE_FILE);
	if (asprintf(&p, "%.*s" SITE_STATE_SUFFIX, (int)n, dir) < 0)
		return NULL;
	return p;
}

int gpuctl_site_open(struct gpuctl_ctx *ctx, const char *config_path, const char *lease_dir,
                     unsigned flags, struct gpuctl_site **ret_site)
{
	_cleanup_(gpuctl_site_freep) struct gpuctl_site *site = NULL;
	const char *env_cfg = getenv("GPUCTL_CONFIG"), *env_dir = getenv("GPUCTL_LEASE_DIR");
	const char *path;
	struct stat st;
	int r;

	if (!ret_site || (flags & ~(unsigned)(GPUCTL_SITE_CREATE | GPUCTL_SITE_NO_LEASES)))
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	site = calloc(1, sizeof(*site));
	if (!site)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	r = load_config(ctx, config_path, &site->config);
	if (r < 0)
		return r;

	if (lease_dir && lease_dir[0])
		path = lease_dir;
	else if (env_dir && env_dir[0])
		path = env_dir;
	else if (gpuctl_config_settings(site->config)->lease_dir)
		path = gpuctl_config_settings(site->config)->lease_dir;
	else
		path = GPUCTL_LEASE_DIR_DEFAULT;
	site->lease_dir_path = strdup(path);
	site->health_state_path = state_path_beside(path);
	if (!site->lease_dir_path || !site->health_state_path)
		return ctx_error(ctx, -ENOMEM, "out of memory");

	if (flags & GPUCTL_SITE_NO_LEASES) {
		*ret_site = TAKE_PTR(site);
		return 0;
	}
	if (!(flags & GPUCTL_SITE_CREATE) && lstat(path, &st) < 0 && errno == ENOENT) {
		ctx_log(ctx, GPUCTL_LOG_DEBUG,
		        "lease directory %s does not exist: nothing is leased", path);
		*ret_site = TAKE_PTR(site);
		return 0;
	}
	r = gpuctl_lease_dir_open(ctx, path, &site->dir);
	if (r < 0)
		return r; /* its message names the directory already */
	r = config_trust(ctx, site, (config_path && config_path[0]) || (env_cfg && env_cfg[0]));
	if (r < 0)
		return r;
	*ret_site = TAKE_PTR(site);
	return 0;
}

unsigned gpuctl_health_snapshot_flags(const char *state_path)
{
	const unsigned flags = GPUCTL_SNAP_HEALTH | GPUCTL_SNAP_NVLINK_STATE;

	if (!state_path || access(state_path, F_OK) < 0)
		return flags | GPUCTL_SNAP_NO_RATE_COUNTERS;
	return flags;
}

int gpuctl_site_health(struct gpuctl_ctx *ctx, const struct gpuctl_site *site,
                       const struct gpuctl_snapshot *snap, struct gpuctl_health_report **ret_report)
{
	struct gpuctl_health_opts opts = GPUCTL_HEALTH_OPTS_INIT;
	struct gpuctl_xid_log *xids = NULL;
	struct gpuctl_snapshot *prev = NULL;
	const char *state = gpuctl_site_health_state_path(site);
	char state_error[CTX_ERRMSG_MAX];
	int r;

	if (!snap || !ret_report)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	r = gpuctl_xid_log_new(&xids);
	if (r < 0)
		return ctx_error(ctx, r, "out of memory");
	if (gpuctl_xid_log_read(ctx, xids, snap, getenv("GPUCTL_KMSG")) < 0)
		ctx_log(ctx, GPUCTL_LOG_DEBUG, "no kernel log: %s", gpuctl_errmsg(ctx));
	r = state ? gpuctl_health_state_read(ctx, state, snap, xids, &prev, &opts.prev_age_s) : 0;
	if (r == -ENOMEM) {
		gpuctl_xid_log_free(xids);
		return r;
	}
	if (r < 0)
		ctx_log(ctx, GPUCTL_LOG_DEBUG, "no recorded health state: %s", gpuctl_errmsg(ctx));
	if (r < 0 && r != -ENOENT && r != -EPERM) {
		/* a state file is there but unusable: what it recorded is not known */
		const char *m = gpuctl_errmsg(ctx);

		strscpy(state_error, sizeof(state_error), m && m[0] ? m : strerror(-r));
		opts.state_error = state_error;
	}
	opts.prev = prev;
	r = gpuctl_health_check(ctx, snap, xids, &opts, ret_report);
	for (size_t i = 0; r >= 0 && i < gpuctl_health_finding_count(*ret_report); i++) {
		const struct gpuctl_health_finding *f = gpuctl_health_finding(*ret_report, i);
		if (f->severity != GPUCTL_HEALTH_OK)
			ctx_log(ctx, GPUCTL_LOG_INFO, "GPU %zu: %s %s: %s", f->gpu,
			        gpuctl_health_severity_name(f->severity), f->check, f->message);
	}
	gpuctl_snapshot_free(prev);
	gpuctl_xid_log_free(xids);
	return r;
}
