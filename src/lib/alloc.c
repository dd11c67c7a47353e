// SPDX-License-Identifier: MIT
/*
 * alloc.c: gpuctl_alloc(), the one allocation call: everything `gpuctl select`, `select --hold`
 * and `run` do before they print or start a job, composed in one place so that the command
 * line, C programs and the Python package get the same devices by the same rules
 * (docs/library.md). Tests: tests/unit/test-alloc.c, tests/cli/test_alloc_parity.py.
 *
 * Decisions:
 * - Order: the site first (with a shared lease directory it decides which configuration, and
 *   so which pools, govern the request), then one snapshot of exactly what the filters, the
 *   score and the health rules read, then the outer allocation, health, the pool, leases and
 *   the choice. Every set handed to gpuctl_select is computed afresh from the snapshot it is
 *   used with (a waiter retakes the snapshot before every try).
 * - Health: FAIL devices are never chosen, WARN ones only when the request cannot be met
 *   without them (select.c), from the same report `gpuctl health` gives (gpuctl_site_health:
 *   the live verdicts, the kernel log, the health state file). allow_unhealthy skips it.
 * - The outer allocation is honoured unless ignore_outer: a program inside a Slurm job or a
 *   container chooses only among what it was given. A value that cannot be read is -EINVAL:
 *   guessing would hand the job GPUs it was not given.
 * - CHOOSE and PREVIEW take no lease and only exclude what is leased now: they read the lease
 *   directory when it exists and never create it. Devices whose lock file is unusable are
 *   excluded too (a lease never grants them). PREVIEW leaves out devices busy with processes
 *   of no lease also when the directory does not exist yet (every process is of no lease
 *   then), as the LEASE that would create it does. LEASE is gpuctl_select_and_lease, atomic under
 *   DIR/select.lock.
 * - Waiting (LEASE with wait; docs/leases.md "Waiting"): first fails at once when no lease could
 *   ever satisfy the request (the static filters alone leave too few devices); else registers a
 *   ticket and tries select-and-lease whenever inotify says the locks or the queue changed (and
 *   the state differs from the last failed try), or every ALLOC_WAIT_FALLBACK_MS (telemetry and
 *   foreign processes change without a file event). The caller's cancel_fd is polled with the
 *   ticket's descriptor; EINTR ends the wait too, so a signal handler of the caller (Python's
 *   KeyboardInterrupt) runs at once. Nothing stays leased and the ticket is gone after any
 *   failure.
 * - NVML's "no driver" (-ENOENT) becomes -ENODEV, so -ENOENT keeps its lease-directory meaning.
 * - The NVLink error counters (4 NVML calls per active link) serve only the rate check against
 *   the health state file's earlier sample: without that file they are not read.
 * - The library only logs (debug and info): which outer allocation constrained the choice, how
 *   many devices are leased, every health finding that is not OK, each failed try of a waiter.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ctx.h"
#include "lease-internal.h"
#include "mig-profile.h"
#include "util.h"

/* How often a waiter retries without a file event, and the no-room list's length in names. */
#define ALLOC_WAIT_FALLBACK_MS 2000
#define ALLOC_NO_ROOM_NAMES    8
/* The size of the first release's request (up to n_avoid): a caller's struct_size may not be
 * smaller; fields after it (replace) keep their defaults for an older caller. */
#define ALLOC_REQUEST_V1_SIZE (offsetof(struct gpuctl_alloc_request, n_avoid) + sizeof(size_t))

struct gpuctl_alloc {
	struct gpuctl_site *site;            /* owned: the lease directory the lease is in */
	struct gpuctl_snapshot *snap;        /* owned */
	struct gpuctl_selection *sel;        /* owned */
	struct gpuctl_lease *lease;          /* owned, NULL unless LEASE */
	struct gpuctl_health_report *health; /* owned, NULL with allow_unhealthy */
	char *cuda_visible;                  /* owned: the UUIDs, comma-separated */
};

/* One request being served: the request as given (full size), what gpuctl_select is asked,
 * and the sets that request points to (owned here, recomputed per snapshot). */
struct plan {
	struct gpuctl_ctx *ctx;
	struct gpuctl_alloc_request in;   /* the caller's request, defaults past its size */
	struct gpuctl_select_request req; /* points into the sets below */
	struct gpuctl_lease_request lreq; /* thresholds, margin, share, label, command */
	struct gpuctl_site *site;         /* owned until handed to the result */
	unsigned flags;                   /* snapshot flags */
	enum gpuctl_field fields[GPUCTL__F_COUNT + 8];
	size_t n_fields;
	struct gpuctl_snapshot *snap; /* the current snapshot, owned */
	struct gpuctl_health_report *health;
	struct gpuctl_devset *within, *pool, *unhealthy, *warned, *leased, *foreign;
	char *exclude;                    /* in.exclude plus the avoided GPUs still listed */
	char no_room[160];                /* CHOOSE/PREVIEW with share_mem: devices without room */
	struct gpuctl_devset *sys_leased; /* leased in the system lease directory (another one
	                                   * is used: plan_system_dir) */
	char sys_note[256];               /* what the system directory kept from us, for -ENOSPC */
};

/* The per-GPU fields the filters and the score read (docs/selection.md). */
static const enum gpuctl_field select_fields[] = {
        GPUCTL_F_MEMORY_TOTAL, GPUCTL_F_MEMORY_USED,  GPUCTL_F_MEMORY_FREE, GPUCTL_F_UTIL_GPU,
        GPUCTL_F_NUMA_NODE,    GPUCTL_F_CPU_AFFINITY, GPUCTL_F_MIG_MODE,
};

int gpuctl_alloc_request_init(struct gpuctl_alloc_request *req, size_t struct_size)
{
	struct gpuctl_alloc_request d = GPUCTL_ALLOC_REQUEST_INIT;

	if (!req || struct_size < ALLOC_REQUEST_V1_SIZE)
		return -EINVAL;
	d.struct_size = struct_size;
	if (struct_size > sizeof(d)) {
		/* a newer header's fields: zero is their default */
		memset((char *)req + sizeof(d), 0, struct_size - sizeof(d));
		struct_size = sizeof(d);
	}
	memcpy(req, &d, struct_size);
	return 0;
}

static void plan_sets_free(struct plan *p)
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
	gpuctl_devset_free(p->sys_leased);
	p->sys_leased = NULL;
	p->sys_note[0] = '\0';
}

static void plan_done(struct plan *p)
{
	plan_sets_free(p);
	gpuctl_snapshot_free(p->snap);
	gpuctl_site_free(p->site);
	free(p->exclude);
}

/* Whether an outer allocation variable names MIG devices ("MIG-..." or "<gpu>:<mig>"), so that
 * the snapshot must read MIG devices to resolve it. */
static bool outer_names_mig(void)
{
	static const char *const vars[] = {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"};

	for (size_t i = 0; i < ELEMENTSOF(vars); i++) {
		const char *v = getenv(vars[i]);
		if (v && (strstr(v, "MIG-") || strstr(v, "mig-") || strchr(v, ':')))
			return true;
	}
	return false;
}

/* Checks the request and copies it (an older caller's smaller struct: defaults past it). */
static int plan_init(struct plan *p, struct gpuctl_ctx *ctx, const struct gpuctl_alloc_request *in)
{
	struct gpuctl_alloc_request *r = &p->in;
	size_t nh = 0;
	const enum gpuctl_field *hf;

	p->ctx = ctx;
	if (!in || in->struct_size < ALLOC_REQUEST_V1_SIZE)
		return ctx_error(ctx, -EINVAL, "invalid request (struct_size %zu)",
		                 in ? in->struct_size : (size_t)0);
	(void)gpuctl_alloc_request_init(r, sizeof(*r));
	memcpy(r, in, in->struct_size < sizeof(*r) ? in->struct_size : sizeof(*r));
	r->struct_size = sizeof(*r);
	if (r->mode != GPUCTL_ALLOC_CHOOSE && r->mode != GPUCTL_ALLOC_PREVIEW &&
	    r->mode != GPUCTL_ALLOC_LEASE)
		return ctx_error(ctx, -EINVAL, "unknown allocation mode %d", r->mode);
	if (r->wait && r->mode != GPUCTL_ALLOC_LEASE)
		return ctx_error(ctx, -EINVAL, "waiting needs a lease (mode GPUCTL_ALLOC_LEASE)");
	if (r->wait && isnan(r->wait_timeout_s))
		return ctx_error(ctx, -EINVAL, "wait timeout is not a number");
	if (r->max_util < -1 || r->max_util > 100)
		return ctx_error(ctx, -EINVAL, "max_util %d is not a percentage 0-100",
		                 r->max_util);
	if (r->numa_node < -1)
		return ctx_error(ctx, -EINVAL, "numa_node %d is not a NUMA node", r->numa_node);
	if (r->n_avoid && !r->avoid)
		return ctx_error(ctx, -EINVAL, "avoid list missing");
	if (r->replace && r->mode != GPUCTL_ALLOC_LEASE)
		return ctx_error(ctx, -EINVAL, "replacing a lease needs mode GPUCTL_ALLOC_LEASE");

	p->req = (struct gpuctl_select_request)GPUCTL_SELECT_REQUEST_INIT;
	p->req.count = r->count;
	p->req.min_free_mem = r->min_free_mem;
	/* the declared memory must be free now, too */
	if (r->share_mem > p->req.min_free_mem)
		p->req.min_free_mem = r->share_mem;
	p->req.max_util = r->max_util;
	p->req.no_procs = r->no_procs;
	p->req.only = r->only;
	p->req.exclude = r->exclude;
	p->req.numa_node = r->numa_node;
	p->req.mig_profile = r->mig_profile;
	p->req.allow_unhealthy = r->allow_unhealthy;

	p->flags = GPUCTL_SNAP_TOPOLOGY | GPUCTL_SNAP_PROCESSES;
	for (size_t i = 0; i < ELEMENTSOF(select_fields); i++)
		p->fields[p->n_fields++] = select_fields[i];
	if (!r->allow_unhealthy) {
		/* the health facts behind FAIL and WARN */
		p->flags |= GPUCTL_SNAP_HEALTH;
		hf = gpuctl_health_fields(&nh);
		for (size_t i = 0; i < nh && p->n_fields < ELEMENTSOF(p->fields); i++)
			p->fields[p->n_fields++] = hf[i];
	}
	if (r->mig_profile || (!r->ignore_outer && outer_names_mig()))
		p->flags |= GPUCTL_SNAP_MIG;
	/* Slurm's GPU numbers map to devices by their device files' minor numbers */
	if (!r->ignore_outer &&
	    (secure_getenv("SLURM_STEP_GPUS") || secure_getenv("SLURM_JOB_GPUS")))
		p->fields[p->n_fields++] = GPUCTL_F_MINOR_NUMBER;
	return 0;
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

/* A lease directory other than the system one (docs/leases.md "Personal lease directories"):
 * when the system directory ($GPUCTL_SYSTEM_LEASE_DIR, else the configuration's lease_dir, else
 * /run/gpuctl) exists and is
 * root's, the devices leased there count as leased here too, and the GPUs of its restricted
 * pools that the user may not draw from are never chosen (the pools of the configuration that
 * directory names). Both are refused, not merely warned about: a personal directory is for
 * keeping one's own jobs apart, not for taking what others hold. */
static int plan_system_dir(struct plan *p)
{
	const char *mine = gpuctl_site_lease_dir_path(p->site);
	const char *sys = gpuctl_config_settings(gpuctl_site_config(p->site))->lease_dir;
	struct gpuctl_lease_dir *dir = NULL;
	struct gpuctl_lease_list *list = NULL;
	struct gpuctl_config *cfg = NULL;
	char *cfg_path = NULL, label[48];
	int *map = NULL;
	bool first = true;
	struct stat a, b;
	int r;

	if (getenv("GPUCTL_SYSTEM_LEASE_DIR") && getenv("GPUCTL_SYSTEM_LEASE_DIR")[0])
		sys = getenv("GPUCTL_SYSTEM_LEASE_DIR"); /* tests: a machine of their own */
	else if (!sys)
		sys = GPUCTL_LEASE_DIR_DEFAULT;
	if (!gpuctl_site_lease_dir(p->site) || !mine || streq(mine, sys) || stat(sys, &b) < 0 ||
	    !S_ISDIR(b.st_mode) || b.st_uid != 0 ||
	    (stat(mine, &a) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino))
		return 0;
	r = gpuctl_lease_dir_open(p->ctx, sys, &dir);
	if (r < 0) {
		ctx_log(p->ctx, GPUCTL_LOG_DEBUG, "system lease directory %s not used: %s", sys,
		        gpuctl_errmsg(p->ctx));
		return 0;
	}
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
		sys_note_add(p, "leased there: ", &first, label);
	}
	if (r < 0)
		goto out;
	p->req.leased = p->sys_leased; /* LEASE: merged by select-and-lease; else by
	                                * plan_exclude_leased */
	if (geteuid() != 0) {
		/* its pools: root may draw from every pool */
		bool pfirst = true;

		r = gpuctl_lease_dir_config(p->ctx, dir, &cfg_path);
		if (r >= 0)
			r = gpuctl_config_load(
			        p->ctx, cfg_path ? cfg_path : GPUCTL_CONFIG_DEFAULT_PATH, &cfg);
		if (r == -ENOENT && !cfg_path)
			r = 0; /* no configuration: no pools */
		if (r >= 0 && cfg && gpuctl_config_pool_count(cfg) > 0)
			r = gpuctl_config_pool_map(p->ctx, cfg, p->snap, &map);
		for (size_t g = 0; r >= 0 && map && g < gpuctl_snapshot_gpu_count(p->snap); g++) {
			const char *u =
			        gpuctl_gpu_str(gpuctl_snapshot_gpu(p->snap, g), GPUCTL_F_UUID);
			int ok;

			if (map[g] < 0 || !u)
				continue;
			ok = gpuctl_config_pool_allows(p->ctx, cfg, (size_t)map[g],
			                               (uint32_t)geteuid());
			if (ok < 0) {
				r = ok;
				break;
			}
			if (ok)
				continue;
			r = exclude_add(p, u);
			gpuctl_device_label(p->snap, g, -1, label, sizeof(label));
			sys_note_add(p, first ? "in a pool not yours: " : "; in a pool not yours: ",
			             &pfirst, label);
		}
	}
	if (r >= 0 && p->sys_note[0])
		ctx_log(p->ctx, GPUCTL_LOG_WARNING,
		        "system lease directory %s: %s: not chosen in %s", sys, p->sys_note, mine);
out:
	if (r < 0)
		r = ctx_error_prefix(p->ctx, r, "system lease directory %s", sys);
	free(map);
	free(cfg_path);
	gpuctl_config_free(cfg);
	gpuctl_lease_list_free(list);
	gpuctl_lease_dir_free(dir);
	if (r >= 0 && p->sys_note[0]) {
		char tmp[sizeof(p->sys_note)];

		(void)snprintf(tmp, sizeof(tmp), "%s", p->sys_note);
		(void)snprintf(p->sys_note, sizeof(p->sys_note),
		               "system lease directory %.80s: %.140s", sys, tmp);
	}
	return r < 0 ? r : 0;
}

/* A fresh snapshot and every set computed from it (a waiter calls this before every try). */
static int plan_snapshot(struct plan *p)
{
	int r;

	plan_sets_free(p);
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

/* CHOOSE and PREVIEW: the devices leased now (and for PREVIEW, busy without a lease) go to
 * req.leased / req.foreign; with share_mem, the devices without room for it to req.leased. */
static int plan_exclude_leased(struct plan *p)
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

/* bytes in the largest binary unit that is exact ("4 GiB", "1536 MiB", "1000 B") */
static const char *size_text(uint64_t v, char *buf, size_t size)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	size_t u = 0;

	while (u + 1 < ELEMENTSOF(units) && v >= 1024 && v % 1024 == 0) {
		v /= 1024;
		u++;
	}
	(void)snprintf(buf, size, "%" PRIu64 " %s", v, units[u]);
	return buf;
}

/* The -ENOSPC message of a shared CHOOSE/PREVIEW with the devices that had no room
 * ("(no room to share 4 GiB: 0,3)"). */
static int no_space_with_room(struct plan *p, int r)
{
	char msg[sizeof(p->ctx->errmsg)], size[32];

	if (r != -ENOSPC || !p->no_room[0])
		return r;
	(void)snprintf(msg, sizeof(msg), "%s", gpuctl_errmsg(p->ctx));
	return ctx_error(p->ctx, r, "%s (no room to share %s: %s)", msg,
	                 size_text(p->lreq.share_mem, size, sizeof(size)), p->no_room);
}

/* Adds device (g, mig) to *too_small when even empty it cannot take share_mem (its memory less
 * the share margin, lease_share_capacity), and keeps the largest memory and capacity seen. */
static int share_fit(struct plan *p, size_t g, int mig, struct gpuctl_devset *too_small,
                     uint64_t *largest, uint64_t *largest_cap)
{
	const uint64_t need = (p->lreq.share_mem + SHARE_UNIT - 1) / SHARE_UNIT;
	const uint64_t cap = lease_share_capacity(p->snap, g, mig, &p->lreq);
	int64_t total = 0;

	if (mig < 0)
		(void)gpuctl_gpu_int(&p->snap->gpus[g], GPUCTL_F_MEMORY_TOTAL, &total);
	else if (p->snap->gpus[g].migs[mig].valid[GPUCTL_MIG_MEMORY_TOTAL])
		total = p->snap->gpus[g].migs[mig].ints[GPUCTL_MIG_MEMORY_TOTAL];
	if (total > 0 && (uint64_t)total > *largest)
		*largest = (uint64_t)total;
	if (cap > *largest_cap)
		*largest_cap = cap;
	if (need <= cap)
		return 0;
	int r = gpuctl_devset_add(too_small, g, mig);
	return r == -EEXIST ? 0 : r;
}

/* Whether no lease could ever satisfy the request: too few devices pass the static filters
 * (outer allocation, only, exclude, NUMA node, MIG profile or whole GPUs, pool; lost GPUs),
 * leases, telemetry and health aside. 0, or -ENOSPC with "can never be satisfied: ...". */
static int never_satisfiable(struct plan *p)
{
	struct gpuctl_select_request sreq = p->req;
	struct gpuctl_selection *sel = NULL;
	int r;

	sreq.min_free_mem = 0;
	sreq.max_util = -1;
	sreq.no_procs = false;
	sreq.allow_unhealthy = true;
	sreq.leased = NULL;
	sreq.foreign = NULL;
	r = gpuctl_select(p->ctx, p->snap, &sreq, &sel);
	gpuctl_selection_free(sel);
	if (r == -ENOSPC)
		return ctx_error_prefix(p->ctx, r, "can never be satisfied");
	return r < 0 ? r : 0;
}

/* Whether a shared request can never be granted because SIZE is more than its devices can ever
 * take, shared or not: each may declare at most its memory less the share margin in all
 * (docs/leases.md, "Sharing"), whatever leases come and go. The static filters of
 * never_satisfiable, with the devices too small for SIZE left out (a request those filters
 * alone refuse is left to the usual message). 0, or -ENOSPC with "--mem SIZE: ...: can never
 * be satisfied" naming the limit, at once in every mode: waiting could never end, and
 * "leased" would name the wrong reason. */
static int never_shares(struct plan *p)
{
	struct gpuctl_select_request sreq = p->req;
	_cleanup_(gpuctl_devset_freep) struct gpuctl_devset *too_small = NULL;
	struct gpuctl_selection *sel = NULL;
	uint64_t largest = 0, largest_cap = 0;
	const char *kind = p->req.mig_profile ? "MIG device" : "GPU";
	char want[32], most[32];
	int r;

	if (!p->lreq.share_mem)
		return 0;
	r = gpuctl_devset_new(&too_small);
	for (size_t g = 0; r >= 0 && g < p->snap->n_gpus; g++) {
		if (p->snap->gpus[g].lost)
			continue;
		if (!p->req.mig_profile)
			r = share_fit(p, g, -1, too_small, &largest, &largest_cap);
		for (size_t m = 0; r >= 0 && p->req.mig_profile && m < p->snap->gpus[g].n_migs;
		     m++) {
			const char *profile = p->snap->gpus[g].migs[m].profile;

			/* the devices of the profile asked for: the only candidates */
			if (profile && mig_profile_matches(p->req.mig_profile, profile))
				r = share_fit(p, g, (int)m, too_small, &largest, &largest_cap);
		}
	}
	if (r < 0)
		return ctx_error(p->ctx, -ENOMEM, "out of memory");
	if (gpuctl_devset_count(too_small) == 0)
		return 0;
	sreq.min_free_mem = 0;
	sreq.max_util = -1;
	sreq.no_procs = false;
	sreq.allow_unhealthy = true;
	sreq.foreign = NULL;
	sreq.leased = NULL;
	/* too few devices whatever the size: the caller's own check says so */
	r = gpuctl_select(p->ctx, p->snap, &sreq, &sel);
	gpuctl_selection_free(TAKE_PTR(sel));
	if (r < 0)
		return r == -ENOSPC ? 0 : r;
	sreq.leased = too_small;
	r = gpuctl_select(p->ctx, p->snap, &sreq, &sel);
	gpuctl_selection_free(sel);
	if (r != -ENOSPC)
		return r < 0 ? r : 0;
	(void)size_text(p->lreq.share_mem, want, sizeof(want));
	if (p->lreq.share_mem > largest)
		return ctx_error(p->ctx, r,
		                 "--mem %s: larger than any %s's memory (largest %s): can never be "
		                 "satisfied",
		                 want, kind, size_text(largest, most, sizeof(most)));
	(void)size_text(largest_cap * SHARE_UNIT, most, sizeof(most));
	if (p->lreq.share_mem > largest_cap * SHARE_UNIT)
		return ctx_error(
		        p->ctx, r,
		        "--mem %s: more than any %s may share (largest %s: its memory less "
		        "share_margin): can never be satisfied",
		        want, kind, most);
	if (p->req.count == 1)
		return ctx_error(p->ctx, r,
		                 "--mem %s: none of the %ss this request may use can share that "
		                 "much (their memory less share_margin; largest %s): can never be "
		                 "satisfied",
		                 want, kind, most);
	return ctx_error(p->ctx, r,
	                 "--mem %s: fewer than %u of the %ss this request may use can share that "
	                 "much (their memory less share_margin; largest %s): can never be "
	                 "satisfied",
	                 want, p->req.count, kind, most);
}

/* LEASE with wait: in line until the devices are ours, the deadline passes, cancel_fd is ready
 * or a signal comes. */
static int wait_lease(struct plan *p, struct gpuctl_selection **ret_sel,
                      struct gpuctl_lease **ret_lease)
{
	struct gpuctl_lease_dir *dir = gpuctl_site_lease_dir(p->site);
	struct gpuctl_wait_ticket *ticket = NULL;
	double t = p->in.wait_timeout_s;
	int64_t deadline = t < 0 || t > 1e12 ? INT64_MAX : monotonic_ms() + (int64_t)(t * 1000.0);
	char last[sizeof(p->ctx->errmsg)] = "";
	int64_t fallback;
	int r;

	r = never_satisfiable(p);
	if (r < 0)
		return r;
	/* select.lock too is waited for until the deadline, and the cancel descriptor ends that
	 * wait as it ends the wait in line (docs/leases.md "Bounds") */
	if (p->ctx) {
		p->ctx->lock_in_wait = true;
		p->ctx->lock_until_ms = deadline;
		p->ctx->lock_cancel_fd = p->in.cancel_fd;
	}
	r = gpuctl_wait_ticket_new(p->ctx, dir, p->snap, &p->req, &ticket);
	if (r < 0) {
		if (r != -EAGAIN && r != -ECANCELED && r != -EINTR)
			r = ctx_error_prefix(p->ctx, r, "lease directory %s",
			                     gpuctl_lease_dir_path(dir));
		goto out;
	}
	for (;;) {
		bool retry = false;

		r = lease_select_and_lease(p->ctx, dir, p->snap, &p->req, &p->lreq, ticket,
		                           p->in.replace ? p->in.replace->lease : NULL, ret_sel,
		                           ret_lease);
		if (r == 0 || (r != -ENOSPC && r != -EBUSY))
			break;
		(void)snprintf(last, sizeof(last), "%s", gpuctl_errmsg(p->ctx));
		ctx_log(p->ctx, GPUCTL_LOG_INFO, "waiting: %s", last);
		/* the fallback counts from this try, not from the last event: events that change
		 * nothing (a reader opening the lease directory) must not put it off for ever */
		fallback = monotonic_ms() + ALLOC_WAIT_FALLBACK_MS;
		while (!retry) {
			struct pollfd pfd[2] = {
			        {.fd = p->in.cancel_fd, .events = POLLIN},
			        {.fd = gpuctl_wait_ticket_fd(ticket), .events = POLLIN}};
			int64_t now = monotonic_ms();
			int64_t left = deadline == INT64_MAX ? INT64_MAX : deadline - now;
			int64_t wait = fallback - now < left ? fallback - now : left;
			int k;

			if (left <= 0) {
				r = ctx_error(p->ctx, -ETIMEDOUT, "waited %g s: %s", t, last);
				goto out;
			}
			k = poll(pfd, 2, (int)(wait < 0 ? 0 : wait));
			if (k < 0 && errno == EINTR) {
				r = ctx_error(p->ctx, -EINTR, "waiting: interrupted by a signal");
				goto out;
			}
			if (k < 0) {
				r = ctx_error(p->ctx, -errno, "waiting: poll: %s", strerror(errno));
				goto out;
			}
			if (pfd[0].revents) {
				r = ctx_error(p->ctx, -ECANCELED, "waiting: cancelled");
				goto out;
			}
			if (k == 0 || monotonic_ms() >= fallback) {
				retry = true; /* telemetry, foreign processes, no inotify */
			} else if (pfd[1].revents & POLLIN) {
				gpuctl_wait_ticket_drain(ticket, dir);
				retry = gpuctl_wait_ticket_changed(p->ctx, dir, ticket) != 0;
			}
		}
		/* telemetry and processes may have changed: a fresh snapshot for the next try */
		r = plan_snapshot(p);
		if (r < 0)
			break;
	}
out:
	gpuctl_wait_ticket_free(ticket);
	if (p->ctx) {
		p->ctx->lock_in_wait = false;
		p->ctx->lock_cancel_fd = -1;
	}
	return r;
}

/* The CUDA_VISIBLE_DEVICES value of the chosen devices. */
static int visible_devices(const struct gpuctl_snapshot *snap, const struct gpuctl_devset *set,
                           char **ret)
{
	size_t n = gpuctl_devset_count(set), len = 1, used = 0;
	char *buf;

	for (size_t i = 0; i < n; i++) {
		const char *u = gpuctl_devset_uuid(set, snap, i);
		if (!u)
			return -ENODATA;
		len += strlen(u) + 1;
	}
	buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	buf[0] = '\0';
	for (size_t i = 0; i < n; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? "," : "",
		                         gpuctl_devset_uuid(set, snap, i));
	*ret = buf;
	return 0;
}

void gpuctl_alloc_free(struct gpuctl_alloc *alloc)
{
	if (!alloc)
		return;
	gpuctl_lease_free(alloc->lease);
	gpuctl_site_free(alloc->site);
	gpuctl_selection_free(alloc->sel);
	gpuctl_health_report_free(alloc->health);
	gpuctl_snapshot_free(alloc->snap);
	free(alloc->cuda_visible);
	free(alloc);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct gpuctl_alloc *, gpuctl_alloc_free)

int gpuctl_alloc(struct gpuctl_ctx *ctx, const struct gpuctl_alloc_request *req,
                 struct gpuctl_alloc **ret_alloc)
{
	struct plan p = {0};
	_cleanup_(gpuctl_alloc_freep) struct gpuctl_alloc *a = NULL;
	int r;

	if (!ret_alloc)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	r = plan_init(&p, ctx, req);
	if (r < 0)
		goto out;
	a = calloc(1, sizeof(*a));
	if (!a) {
		r = ctx_error(ctx, -ENOMEM, "out of memory");
		goto out;
	}
	r = gpuctl_site_open(ctx, p.in.config_path, p.in.lease_dir,
	                     p.in.mode == GPUCTL_ALLOC_LEASE ? GPUCTL_SITE_CREATE : 0, &p.site);
	if (r < 0)
		goto out;
	/* the health facts every command judges (no state file: no NVLink error rate, so not
	 * its counters either) */
	if (!p.in.allow_unhealthy)
		p.flags |= gpuctl_health_snapshot_flags(gpuctl_site_health_state_path(p.site));
	p.lreq.struct_size = sizeof(p.lreq);
	(void)gpuctl_site_lease_defaults(p.site, &p.lreq); /* a whole struct: cannot fail */
	p.lreq.label = p.in.label;
	p.lreq.command = p.in.command;
	p.lreq.ignore_foreign = p.in.ignore_foreign;
	p.lreq.share_mem = p.in.share_mem;

	r = plan_snapshot(&p);
	if (r >= 0)
		r = never_shares(&p);
	if (r < 0)
		goto out;
	if (p.in.mode == GPUCTL_ALLOC_LEASE && p.in.wait)
		r = wait_lease(&p, &a->sel, &a->lease);
	else if (p.in.mode == GPUCTL_ALLOC_LEASE)
		r = lease_select_and_lease(ctx, gpuctl_site_lease_dir(p.site), p.snap, &p.req,
		                           &p.lreq, NULL, p.in.replace ? p.in.replace->lease : NULL,
		                           &a->sel, &a->lease);
	else {
		r = plan_exclude_leased(&p);
		if (r >= 0)
			r = no_space_with_room(&p, gpuctl_select(ctx, p.snap, &p.req, &a->sel));
	}
	if (r == -ENOSPC && p.sys_note[0]) {
		char msg[sizeof(ctx->errmsg)];

		(void)snprintf(msg, sizeof(msg), "%s", gpuctl_errmsg(ctx));
		r = ctx_error(ctx, r, "%s (%s)", msg, p.sys_note);
	}
	if ((r == -ENOSPC || r == -ETIMEDOUT) && p.in.replace)
		r = ctx_error_prefix(ctx, r, "no replacement");
	if (r < 0)
		goto out;
	r = visible_devices(p.snap, gpuctl_selection_devices(a->sel), &a->cuda_visible);
	if (r == -ENODATA)
		r = ctx_error(ctx, r,
		              "a chosen device has no UUID; refusing an ambiguous device "
		              "string");
	else if (r < 0)
		r = ctx_error(ctx, r, "out of memory");
	if (r < 0)
		goto out;
	a->snap = TAKE_PTR(p.snap);
	a->site = TAKE_PTR(p.site);
	a->health = TAKE_PTR(p.health);
	*ret_alloc = TAKE_PTR(a);
out:
	plan_done(&p);
	return r;
}

const struct gpuctl_snapshot *gpuctl_alloc_snapshot(const struct gpuctl_alloc *alloc)
{
	return alloc ? alloc->snap : NULL;
}

const struct gpuctl_selection *gpuctl_alloc_selection(const struct gpuctl_alloc *alloc)
{
	return alloc ? alloc->sel : NULL;
}

const struct gpuctl_devset *gpuctl_alloc_devices(const struct gpuctl_alloc *alloc)
{
	return alloc ? gpuctl_selection_devices(alloc->sel) : NULL;
}

const char *gpuctl_alloc_cuda_visible_devices(const struct gpuctl_alloc *alloc)
{
	return alloc ? alloc->cuda_visible : NULL;
}

struct gpuctl_lease *gpuctl_alloc_lease(const struct gpuctl_alloc *alloc)
{
	return alloc ? alloc->lease : NULL;
}

const char *gpuctl_alloc_lease_dir_path(const struct gpuctl_alloc *alloc)
{
	return alloc && gpuctl_site_lease_dir(alloc->site) ? gpuctl_site_lease_dir_path(alloc->site)
	                                                   : NULL;
}

const struct gpuctl_health_report *gpuctl_alloc_health(const struct gpuctl_alloc *alloc)
{
	return alloc ? alloc->health : NULL;
}
