// SPDX-License-Identifier: MIT
/*
 * alloc-plan.c: the plan of gpuctl_alloc() for one snapshot: every set handed to gpuctl_select,
 * computed afresh from the snapshot it is used with (a waiter retakes the snapshot before every
 * try, alloc-wait.c). In order: the avoided GPUs, health, the outer allocation, the pool, the
 * system lease directory; for CHOOSE and PREVIEW, the devices leased or busy now.
 * docs/library.md, docs/selection.md; shared declarations in alloc-internal.h.
 *
 * Decisions:
 * - Health: FAIL devices are never chosen, WARN ones only when the request cannot be met
 *   without them (select.c), from the same report `gpuctl health` gives (gpuctl_site_health:
 *   the live verdicts, the kernel log, the health state file). allow_unhealthy skips it.
 * - The outer allocation is honoured unless ignore_outer: a program inside a Slurm job or a
 *   container chooses only among what it was given. A value that cannot be read is -EINVAL:
 *   guessing would hand the job GPUs it was not given.
 * - CHOOSE and PREVIEW take no lease and exclude what is leased now and what the wait queue's
 *   waiters could use (docs/leases.md "Waiting": a waiter's devices are theirs first, as for
 *   select-and-lease, so a plain `select` does not point a job at a GPU a waiter is about to
 *   get): they read the lease directory when it exists and never create it. Devices whose lock
 *   file is unusable are excluded too (a lease never grants them). PREVIEW leaves out devices
 *   busy with processes of no lease also when the directory does not exist yet (every process
 *   is of no lease then), as the LEASE that would create it does. (LEASE excludes under
 *   DIR/select.lock, in gpuctl_select_and_lease.)
 * - NVML's "no driver" (-ENOENT) becomes -ENODEV, so -ENOENT keeps its lease-directory meaning.
 * - Logs at debug and info level which outer allocation constrained the choice and how many
 *   devices are leased; a warning names what the system lease directory kept from us.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc-internal.h"
#include "ctx.h"
#include "lease-internal.h"
#include "parse.h"
#include "util.h"

/* The no-room list's length in names. */
#define ALLOC_NO_ROOM_NAMES 8

void alloc_plan_sets_free(struct plan *p)
{
	gpuctl_devset_free(p->within);
	gpuctl_devset_free(p->pool);
	gpuctl_devset_free(p->unhealthy);
	gpuctl_devset_free(p->warned);
	gpuctl_devset_free(p->leased);
	gpuctl_devset_free(p->foreign);
	p->within = p->pool = p->unhealthy = p->warned = p->leased = p->foreign = NULL;
	p->req.within = p->req.pool = p->req.unhealthy = p->req.warned = NULL;
	p->req.leased = p->req.foreign = NULL;
	gpuctl_health_report_free(p->health);
	p->health = NULL;
	p->no_room[0] = '\0';
	p->ahead = p->n_reserved = 0;
	gpuctl_devset_free(p->sys_leased);
	p->sys_leased = NULL;
	p->sys_note[0] = '\0';
}

/* "0,1,3" (labels) for a log line. */
static void set_labels(const struct gpuctl_snapshot *snap, const struct gpuctl_devset *set,
                       char *buf, size_t size)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < gpuctl_devset_count(set); i++) {
		size_t gpu;
		int mig, n;
		char label[48];

		if (gpuctl_devset_get(set, i, &gpu, &mig) < 0)
			continue;
		gpuctl_device_label(snap, gpu, mig, label, sizeof(label));
		n = snprintf(buf + used, size - used, "%s%s", used ? "," : "", label);
		if (n < 0 || (size_t)n >= size - used)
			return;
		used += (size_t)n;
	}
}

/* req.exclude = the request's exclude plus the avoided GPUs this snapshot still lists by UUID
 * (an id the snapshot cannot resolve would make the request invalid; such a GPU is lost or
 * unnamed, and never chosen anyway). */
static int plan_avoid(struct plan *p)
{
	const char *given = p->in.exclude;
	size_t len = given ? strlen(given) + 1 : 1, n = 0;
	char *buf;

	if (p->in.n_avoid == 0)
		return 0;
	for (size_t i = 0; i < p->in.n_avoid; i++)
		len += (p->in.avoid[i] ? strlen(p->in.avoid[i]) : 0) + 1;
	buf = malloc(len);
	if (!buf)
		return ctx_error(p->ctx, -ENOMEM, "out of memory");
	buf[0] = '\0';
	if (given)
		n += (size_t)snprintf(buf, len, "%s", given);
	for (size_t i = 0; i < p->in.n_avoid; i++)
		for (size_t g = 0; p->in.avoid[i] && g < gpuctl_snapshot_gpu_count(p->snap); g++) {
			const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(p->snap, g);
			const char *u = gpuctl_gpu_str(gpu, GPUCTL_F_UUID);
			if (u && !gpuctl_gpu_lost(gpu) && streq(u, p->in.avoid[i]))
				n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "," : "", u);
		}
	free(p->exclude);
	p->exclude = buf;
	p->req.exclude = buf[0] ? buf : NULL;
	return 0;
}

/* Health checks whose WARN concerns only bandwidth, which the bandwidth model already rates
 * (docs/selection.md): such a finding alone does not make selection avoid the GPU. */
static bool warn_only_rated(const struct gpuctl_health_report *rep, size_t gpu)
{
	static const char *const rated[] = {"nvlink-down"};
	bool any = false;

	for (size_t i = 0; i < gpuctl_health_finding_count(rep); i++) {
		const struct gpuctl_health_finding *f = gpuctl_health_finding(rep, i);
		bool is_rated = false;

		if (f->gpu != gpu || f->severity != GPUCTL_HEALTH_WARN)
			continue;
		for (size_t k = 0; k < sizeof(rated) / sizeof(rated[0]); k++)
			is_rated |= streq(f->check, rated[k]);
		if (!is_rated)
			return false;
		any = true;
	}
	return any;
}

/* FAIL devices go to req.unhealthy (never chosen), WARN ones to req.warned (only when needed),
 * unless their WARN is only about bandwidth. */
static int plan_health(struct plan *p)
{
	size_t n = gpuctl_snapshot_gpu_count(p->snap);
	int r;

	if (p->in.allow_unhealthy)
		return 0;
	r = gpuctl_site_health(p->ctx, p->site, p->snap, &p->health);
	if (r < 0)
		return ctx_error_prefix(p->ctx, r, "health check");
	r = gpuctl_devset_new(&p->unhealthy);
	if (r >= 0)
		r = gpuctl_devset_new(&p->warned);
	for (size_t g = 0; r >= 0 && g < n; g++) {
		int v = gpuctl_health_verdict(p->health, g);
		if (v == GPUCTL_HEALTH_FAIL)
			r = gpuctl_devset_add(p->unhealthy, g, -1);
		else if (v == GPUCTL_HEALTH_WARN && !warn_only_rated(p->health, g))
			r = gpuctl_devset_add(p->warned, g, -1);
	}
	if (r < 0)
		return ctx_error(p->ctx, r, "out of memory");
	p->req.unhealthy = p->unhealthy;
	p->req.warned = p->warned;
	return 0;
}

/* The allocation the process runs in, unless ignore_outer. */
static int plan_outer(struct plan *p)
{
	const char *source = NULL;
	char labels[512];
	int r;

	if (p->in.ignore_outer) {
		ctx_log(p->ctx, GPUCTL_LOG_INFO,
		        "ignoring the outer allocation: choosing among all "
		        "%zu GPUs",
		        gpuctl_snapshot_gpu_count(p->snap));
		return 0;
	}
	r = gpuctl_outer_allocation(p->ctx, p->snap, &p->within, &source);
	if (r == -EINVAL) {
		char why[CTX_ERRMSG_MAX];

		/* the variable is named in why; the way out is the request's */
		strscpy(why, sizeof(why), gpuctl_errmsg(p->ctx));
		return ctx_error(p->ctx, r,
		                 "outer allocation: %s (ignore_outer chooses among all GPUs)", why);
	}
	if (r < 0)
		return ctx_error_prefix(p->ctx, r, "outer allocation");
	if (!p->within) {
		ctx_log(p->ctx, GPUCTL_LOG_DEBUG,
		        "no outer allocation: choosing among all %zu GPUs",
		        gpuctl_snapshot_gpu_count(p->snap));
		return 0;
	}
	set_labels(p->snap, p->within, labels, sizeof(labels));
	ctx_log(p->ctx, GPUCTL_LOG_INFO,
	        "choosing within the outer allocation of %s: %zu device(s) [%s]",
	        source ? source : "the environment", gpuctl_devset_count(p->within), labels);
	p->req.within = p->within;
	p->req.within_name = source;
	return 0;
}

/* The pool drawn from (the request's, else the default pool), and whether the user may. Nothing
 * when the configuration has no pools. */
static int plan_pool(struct plan *p)
{
	const struct gpuctl_config *cfg = gpuctl_site_config(p->site);
	const char *name = p->in.pool;
	bool dflt = !name || !name[0] || streq(name, "default");
	size_t n = gpuctl_snapshot_gpu_count(p->snap), idx = 0;
	_cleanup_free_ int *map = NULL;
	int r, want = -1;

	if (gpuctl_config_pool_count(cfg) == 0) {
		if (!dflt)
			return ctx_error(p->ctx, -EINVAL,
			                 "pool '%s': the configuration%s%s has no "
			                 "pools",
			                 name, gpuctl_config_path(cfg) ? " " : "",
			                 gpuctl_config_path(cfg) ? gpuctl_config_path(cfg) : "");
		return 0;
	}
	r = gpuctl_config_pool_map(p->ctx, cfg, p->snap, &map);
	if (r < 0)
		return r;
	if (!dflt) {
		r = gpuctl_config_pool_find(p->ctx, cfg, name, &idx);
		if (r == -ENOENT)
			return ctx_error_prefix(p->ctx, -EINVAL, "pool");
		if (r >= 0)
			r = gpuctl_config_pool_allows(p->ctx, cfg, idx, (uint32_t)geteuid());
		if (r == 0)
			return ctx_error_prefix(p->ctx, -EACCES, "pool %s: not allowed", name);
		if (r < 0)
			return r;
		want = (int)idx;
	}
	r = gpuctl_devset_new(&p->pool);
	for (size_t g = 0; r >= 0 && g < n; g++)
		if (map[g] == want)
			r = gpuctl_devset_add(p->pool, g, -1);
	if (r < 0)
		return ctx_error(p->ctx, r, "out of memory");
	p->req.pool = p->pool;
	p->req.pool_name = dflt ? "default" : name;
	return 0;
}

/* Adds one GPU's UUID to the request's exclusions (p->exclude, beside plan_avoid's). */
static int exclude_add(struct plan *p, const char *uuid)
{
	size_t have = p->exclude ? strlen(p->exclude) : (p->in.exclude ? strlen(p->in.exclude) : 0);
	char *nb = malloc(have + strlen(uuid) + 2);

	if (!nb)
		return ctx_error(p->ctx, -ENOMEM, "out of memory");
	(void)snprintf(nb, have + strlen(uuid) + 2, "%s%s%s",
	               p->exclude ? p->exclude : (p->in.exclude ? p->in.exclude : ""),
	               have ? "," : "", uuid);
	free(p->exclude);
	p->exclude = nb;
	p->req.exclude = nb;
	return 0;
}

/* Appends "label" to the list in p->sys_note after its heading (once). */
static void sys_note_add(struct plan *p, const char *heading, bool *first, const char *label)
{
	size_t l = strlen(p->sys_note);

	(void)snprintf(p->sys_note + l, sizeof(p->sys_note) - l, "%s%s", *first ? heading : ",",
	               label);
	*first = false;
}

/* The system lease directory ($GPUCTL_SYSTEM_LEASE_DIR, else the configuration's lease_dir, else
 * /run/gpuctl) when a lease directory other than it is used and it exists and is root's; else
 * NULL (plan_system_dir). */
static const char *system_dir_other(const struct plan *p)
{
	const char *mine = gpuctl_site_lease_dir_path(p->site);
	const char *sys = gpuctl_config_settings(gpuctl_site_config(p->site))->lease_dir;
	struct stat a, b;

	if (getenv("GPUCTL_SYSTEM_LEASE_DIR") && getenv("GPUCTL_SYSTEM_LEASE_DIR")[0])
		sys = getenv("GPUCTL_SYSTEM_LEASE_DIR"); /* tests: a machine of their own */
	else if (!sys)
		sys = GPUCTL_LEASE_DIR_DEFAULT;
	if (!gpuctl_site_lease_dir(p->site) || !mine || streq(mine, sys) || stat(sys, &b) < 0 ||
	    !S_ISDIR(b.st_mode) || b.st_uid != 0 ||
	    (stat(mine, &a) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino))
		return NULL;
	return sys;
}

/* The devices held or shared in the system directory dir count as leased here: p->sys_leased,
 * named in p->sys_note ("leased there: ..."; *first stays true when none is). */
static int system_dir_leased(struct plan *p, struct gpuctl_lease_dir *dir, bool *first)
{
	struct gpuctl_lease_list *list = NULL;
	char label[48];
	int r;

	r = gpuctl_lease_list(p->ctx, dir, p->snap, &list);
	if (r >= 0)
		r = gpuctl_devset_new(&p->sys_leased);
	for (size_t i = 0; r >= 0 && i < gpuctl_lease_list_count(list); i++) {
		size_t gpu;
		int mig;
		enum gpuctl_lease_state state;

		r = gpuctl_lease_list_get(list, i, &gpu, &mig, &state, NULL, NULL);
		if (r < 0 || (state != GPUCTL_LEASE_HELD && state != GPUCTL_LEASE_SHARED))
			continue;
		r = gpuctl_devset_add(p->sys_leased, gpu, mig);
		if (r == -EEXIST)
			r = 0;
		gpuctl_device_label(p->snap, gpu, mig, label, sizeof(label));
		sys_note_add(p, "leased there: ", first, label);
	}
	gpuctl_lease_list_free(list);
	if (r < 0)
		return r;
	p->req.leased = p->sys_leased; /* LEASE: merged by select-and-lease; else by
	                                * alloc_plan_exclude_leased */
	return 0;
}

/* The GPUs of the system directory's restricted pools (the pools of the configuration dir
 * names) that the user may not draw from are excluded, named in p->sys_note after what
 * system_dir_leased noted (first: it noted nothing). Not for root, who may draw from every
 * pool. */
static int system_dir_pools(struct plan *p, struct gpuctl_lease_dir *dir, bool first)
{
	_cleanup_(gpuctl_config_freep) struct gpuctl_config *cfg = NULL;
	_cleanup_free_ char *cfg_path = NULL;
	_cleanup_free_ int *map = NULL;
	bool pfirst = true;
	char label[48];
	int r;

	r = gpuctl_lease_dir_config(p->ctx, dir, &cfg_path);
	if (r >= 0)
		r = gpuctl_config_load(p->ctx, cfg_path ? cfg_path : GPUCTL_CONFIG_DEFAULT_PATH,
		                       &cfg);
	if (r == -ENOENT && !cfg_path)
		r = 0; /* no configuration: no pools */
	if (r >= 0 && cfg && gpuctl_config_pool_count(cfg) > 0)
		r = gpuctl_config_pool_map(p->ctx, cfg, p->snap, &map);
	for (size_t g = 0; r >= 0 && map && g < gpuctl_snapshot_gpu_count(p->snap); g++) {
		const char *u = gpuctl_gpu_str(gpuctl_snapshot_gpu(p->snap, g), GPUCTL_F_UUID);
		int ok;

		if (map[g] < 0 || !u)
			continue;
		ok = gpuctl_config_pool_allows(p->ctx, cfg, (size_t)map[g], (uint32_t)geteuid());
		if (ok < 0)
			return ok;
		if (ok)
			continue;
		r = exclude_add(p, u);
		gpuctl_device_label(p->snap, g, -1, label, sizeof(label));
		sys_note_add(p,
		             first ? "in a pool not yours: " : "; in a pool not yours: ", &pfirst,
		             label);
	}
	return r;
}

/* A lease directory other than the system one (docs/leases.md "Personal lease directories"):
 * when the system directory (system_dir_other) exists and is root's, the devices leased there
 * count as leased here too, and the GPUs of its restricted pools that the user may not draw from
 * are never chosen (the pools of the configuration that directory names). Both are refused, not
 * merely warned about: a personal directory is for keeping one's own jobs apart, not for taking
 * what others hold. */
static int plan_system_dir(struct plan *p)
{
	const char *sys = system_dir_other(p);
	struct gpuctl_lease_dir *dir = NULL;
	char tmp[sizeof(p->sys_note)];
	bool first = true;
	int r;

	if (!sys)
		return 0;
	r = gpuctl_lease_dir_open(p->ctx, sys, &dir);
	if (r < 0) {
		ctx_log(p->ctx, GPUCTL_LOG_DEBUG, "system lease directory %s not used: %s", sys,
		        gpuctl_errmsg(p->ctx));
		return 0;
	}
	r = system_dir_leased(p, dir, &first);
	if (r >= 0 && geteuid() != 0)
		r = system_dir_pools(p, dir, first);
	gpuctl_lease_dir_free(dir);
	if (r < 0)
		return ctx_error_prefix(p->ctx, r, "system lease directory %s", sys);
	if (!p->sys_note[0])
		return 0;
	ctx_log(p->ctx, GPUCTL_LOG_WARNING, "system lease directory %s: %s: not chosen in %s", sys,
	        p->sys_note, gpuctl_site_lease_dir_path(p->site));
	(void)snprintf(tmp, sizeof(tmp), "%s", p->sys_note);
	(void)snprintf(p->sys_note, sizeof(p->sys_note), "system lease directory %.80s: %.140s",
	               sys, tmp);
	return 0;
}

/* A fresh snapshot and every set computed from it (a waiter calls this before every try). */
int alloc_plan_snapshot(struct plan *p)
{
	int r;

	alloc_plan_sets_free(p);
	gpuctl_snapshot_free(p->snap);
	p->snap = NULL;
	r = gpuctl_snapshot_take_fields(p->ctx, p->flags, p->fields, p->n_fields, &p->snap);
	if (r == -ENOENT)
		r = -ENODEV; /* no driver; -ENOENT is the lease directory's */
	if (r < 0)
		return r;
	r = plan_avoid(p);
	if (r >= 0)
		r = plan_health(p);
	if (r >= 0)
		r = plan_outer(p);
	if (r >= 0)
		r = plan_pool(p);
	if (r >= 0)
		r = plan_system_dir(p);
	return r;
}

/* Appends one device to the "no room to share" list. */
static void no_room_add(struct plan *p, size_t *count, size_t gpu, int mig)
{
	size_t l = strlen(p->no_room);
	char label[48];

	if (++*count <= ALLOC_NO_ROOM_NAMES) {
		gpuctl_device_label(p->snap, gpu, mig, label, sizeof(label));
		(void)snprintf(p->no_room + l, sizeof(p->no_room) - l, "%s%s",
		               *count > 1 ? "," : "", label);
	} else if (*count == ALLOC_NO_ROOM_NAMES + 1) {
		(void)snprintf(p->no_room + l, sizeof(p->no_room) - l, ",...");
	}
}

/* CHOOSE and PREVIEW: the devices every live waiter could use go to p->leased, as
 * select-and-lease keeps them for the waiters (read without select.lock: nothing removed). */
static int exclude_reserved(struct plan *p, struct gpuctl_lease_dir *dir)
{
	_cleanup_(gpuctl_devset_freep) struct gpuctl_devset *reserved = NULL;
	int r = gpuctl_devset_new(&reserved);

	if (r < 0)
		return r;
	r = lease_queue_reserved(p->ctx, dir, p->snap, NULL, false, NULL, reserved, &p->ahead);
	if (r < 0)
		return ctx_error(p->ctx, r, "'%s/queue': %s", gpuctl_lease_dir_path(dir),
		                 strerror(-r));
	p->n_reserved = gpuctl_devset_count(reserved);
	if (lease_devset_merge(p->leased, reserved) < 0)
		return ctx_error(p->ctx, -ENOMEM, "out of memory");
	if (p->ahead)
		ctx_log(p->ctx, GPUCTL_LOG_DEBUG,
		        "%zu waiter(s) could use %zu device(s): not chosen", p->ahead,
		        p->n_reserved);
	return 0;
}

/* CHOOSE and PREVIEW: the devices leased now (and for PREVIEW, busy without a lease) go to
 * req.leased / req.foreign; with share_mem, the devices without room for it to req.leased. */
int alloc_plan_exclude_leased(struct plan *p)
{
	struct gpuctl_lease_dir *dir = gpuctl_site_lease_dir(p->site);
	struct gpuctl_lease_list *list = NULL;
	size_t n_room = 0;
	int r;

	if (!dir) {
		/* no lease directory: nothing is leased, and every process is of no lease (the
		 * directory LEASE mode would create holds no record yet) */
		if (p->in.mode != GPUCTL_ALLOC_PREVIEW || p->in.ignore_foreign)
			return 0;
		r = gpuctl_lease_foreign(p->ctx, NULL, p->snap, &p->lreq, &p->foreign);
		if (r < 0)
			return r;
		p->req.foreign = p->foreign;
		return 0;
	}
	r = gpuctl_lease_list(p->ctx, dir, p->snap, &list);
	if (r >= 0)
		r = gpuctl_devset_new(&p->leased);
	for (size_t i = 0; r >= 0 && i < gpuctl_lease_list_count(list); i++) {
		size_t gpu;
		int mig;
		enum gpuctl_lease_state state;
		const struct gpuctl_lease_owner *owner;
		const char *reason;
		bool taken;

		r = gpuctl_lease_list_get(list, i, &gpu, &mig, &state, &owner, &reason);
		if (r < 0)
			break;
		/* as select-and-lease does: an unusable lock file is never granted, a shared
		 * device only to a shared request it has room for */
		taken = state == GPUCTL_LEASE_HELD || state == GPUCTL_LEASE_UNUSABLE ||
		        (state == GPUCTL_LEASE_SHARED && !p->lreq.share_mem);
		if (!taken && p->lreq.share_mem &&
		    gpuctl_lease_list_room(list, i, p->snap, &p->lreq) < p->lreq.share_mem) {
			taken = true;
			no_room_add(p, &n_room, gpu, mig);
		}
		if (taken) {
			r = gpuctl_devset_add(p->leased, gpu, mig);
			if (r == -EEXIST)
				r = 0;
		}
	}
	if (r >= 0)
		r = exclude_reserved(p, dir);
	if (r >= 0 && p->in.mode == GPUCTL_ALLOC_PREVIEW && !p->in.ignore_foreign)
		r = gpuctl_lease_foreign(p->ctx, dir, p->snap, &p->lreq, &p->foreign);
	gpuctl_lease_list_free(list);
	if (r < 0)
		return ctx_error_prefix(p->ctx, r, "lease directory %s",
		                        gpuctl_lease_dir_path(dir));
	if (r >= 0 && p->sys_leased && lease_devset_merge(p->leased, p->sys_leased) < 0)
		r = ctx_error(p->ctx, -ENOMEM, "out of memory");
	if (r < 0)
		return r;
	p->req.leased = p->leased;
	p->req.foreign = p->foreign;
	ctx_log(p->ctx, GPUCTL_LOG_DEBUG, "%zu device(s) leased in %s",
	        gpuctl_devset_count(p->leased), gpuctl_lease_dir_path(dir));
	return 0;
}

/* The -ENOSPC message of a CHOOSE/PREVIEW with the devices that had no room for a shared
 * request ("(no room to share 4 GiB: 0,3)") and the waiters whose devices were kept out. */
int alloc_no_space_with_room(struct plan *p, int r)
{
	char msg[sizeof(p->ctx->errmsg)], size[32];

	if (r != -ENOSPC || (!p->no_room[0] && !p->ahead))
		return r;
	(void)snprintf(msg, sizeof(msg), "%s", gpuctl_errmsg(p->ctx));
	if (p->no_room[0])
		r = ctx_error(p->ctx, r, "%s (no room to share %s: %s)", msg,
		              size_exact_text(p->lreq.share_mem, size, sizeof(size)), p->no_room);
	if (p->ahead) {
		/* as select-and-lease says it (lease-select.c, sal_no_space) */
		(void)snprintf(msg, sizeof(msg), "%s", gpuctl_errmsg(p->ctx));
		r = ctx_error(p->ctx, r, "%s (%zu waiter(s) ahead, who could use %zu device(s))",
		              msg, p->ahead, p->n_reserved);
	}
	return r;
}
