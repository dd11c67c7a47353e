// SPDX-License-Identifier: MIT
/*
 * alloc.c: gpuctl_alloc(), the one allocation call: everything `gpuctl select`, `select --hold`
 * and `run` do before they print or start a job, composed in one place so that the command
 * line, C programs and the Python package get the same devices by the same rules
 * (docs/library.md). This file is the call and its modes; the plan of one snapshot is
 * alloc-plan.c, waiting in line alloc-wait.c (alloc-internal.h). Tests:
 * tests/unit/test-alloc.c, tests/cli/test_alloc_parity.py.
 *
 * Decisions:
 * - Order: the site first (with a shared lease directory it decides which configuration, and
 *   so which pools, govern the request), then one snapshot of exactly what the filters, the
 *   score and the health rules read, then the outer allocation, health, the pool, leases and
 *   the choice.
 * - The modes: CHOOSE and PREVIEW take no lease (alloc_plan_exclude_leased says what they
 *   leave out); LEASE is gpuctl_select_and_lease, atomic under DIR/select.lock; LEASE with wait
 *   waits in line (alloc_wait_lease).
 * - The NVLink error counters (4 NVML calls per active link) serve only the rate check against
 *   the health state file's earlier sample: without that file they are not read.
 * - The library only logs (debug and info), never prints: what each step decided is logged
 *   where it is decided (alloc-plan.c, alloc-wait.c).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc-internal.h"
#include "ctx.h"
#include "lease-internal.h"
#include "util.h"

/* The size of the first release's request (up to n_avoid): a caller's struct_size may not be
 * smaller; fields after it (replace) keep their defaults for an older caller. */
#define ALLOC_REQUEST_V1_SIZE (offsetof(struct gpuctl_alloc_request, n_avoid) + sizeof(size_t))

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

static void plan_done(struct plan *p)
{
	alloc_plan_sets_free(p);
	gpuctl_snapshot_free(p->snap);
	gpuctl_site_free(p->site);
	gpuctl_ledger_free(p->quota_ledger);
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
	p->req.share_mem = r->share_mem; /* the declared memory must be free now, too */
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

	r = alloc_plan_snapshot(&p);
	if (r >= 0)
		r = alloc_never_shares(&p);
	if (r < 0)
		goto out;
	if (p.in.mode == GPUCTL_ALLOC_LEASE && p.in.wait)
		r = alloc_wait_lease(&p, &a->sel, &a->lease);
	else if (p.in.mode == GPUCTL_ALLOC_LEASE)
		r = lease_select_and_lease(ctx, gpuctl_site_lease_dir(p.site), p.snap, &p.req,
		                           &p.lreq, NULL, p.in.replace ? p.in.replace->lease : NULL,
		                           alloc_quota_gate(&p), &a->sel, &a->lease);
	else {
		r = alloc_plan_exclude_leased(&p);
		if (r >= 0)
			r = alloc_no_space_with_room(&p,
			                             gpuctl_select(ctx, p.snap, &p.req, &a->sel));
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
