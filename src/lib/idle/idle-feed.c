// SPDX-License-Identifier: MIT
/*
 * idle-feed.c: a snapshot and its lease list read into the plain facts the idle tracker judges
 * (idle.c), one device at a time: each GPU that is not lost, then each of its MIG devices.
 *
 * Decisions:
 * - The only I/O is whether each listed pid is in /proc (a process NVML lists that /proc does
 *   not show is why memory may be ghost memory), asked once per process and sample: a MIG
 *   device's processes take what their GPU's pass found. Everything else is the snapshot's.
 * - A GPU's facts count every process on it, a MIG device's those NVML places on it
 *   (gpuctl_proc_mig_device). A lease counts for the device it names only.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ctx.h"
#include "idle-internal.h"
#include "util.h"

static bool pid_alive(uint32_t pid)
{
	char path[32];
	snprintf(path, sizeof(path), "/proc/%" PRIu32, pid);
	return pid > 0 && access(path, F_OK) == 0;
}

/* The lease state of device (gpu, mig) in list: HELD or SHARED. */
static bool leased(const struct gpuctl_lease_list *list, size_t gpu, int mig)
{
	size_t n = list ? gpuctl_lease_list_count(list) : 0;
	for (size_t i = 0; i < n; i++) {
		size_t g;
		int m;
		enum gpuctl_lease_state st;
		if (gpuctl_lease_list_get(list, i, &g, &m, &st, NULL, NULL) == 0 && g == gpu &&
		    m == mig)
			return st == GPUCTL_LEASE_HELD || st == GPUCTL_LEASE_SHARED;
	}
	return false;
}

/* The processes of GPU g on device mig (-1: all of the GPU's) into procs; returns how many.
 * whole: for a MIG device, the GPU's own facts (process k at whole[k]), whose liveness is taken
 * rather than asked of /proc again; NULL for the GPU itself. */
static size_t procs_of(const struct gpuctl_gpu *g, int mig, const struct idle_proc_fact *whole,
                       struct idle_proc_fact *procs)
{
	size_t n = 0;
	for (size_t k = 0; k < gpuctl_gpu_proc_count(g); k++) {
		const struct gpuctl_proc *p = gpuctl_gpu_proc(g, k);
		struct idle_proc_fact *f = &procs[n];
		int64_t mem;
		if (mig >= 0 && gpuctl_proc_mig_device(g, p) != mig)
			continue;
		f->pid = gpuctl_proc_pid(p);
		f->memory = gpuctl_proc_used_memory(p, &mem) == 0 ? mem : -1;
		if (gpuctl_proc_util(p, GPUCTL_PROC_SM, &f->sm) < 0)
			f->sm = -1;
		f->alive = whole ? whole[k].alive : pid_alive(f->pid);
		n++;
	}
	return n;
}

/* How many devices (GPUs not lost, their MIG devices) and processes snap holds. */
static void count(const struct gpuctl_snapshot *snap, size_t *ret_devs, size_t *ret_procs)
{
	size_t nd = 0, np = 0;
	for (size_t i = 0; i < gpuctl_snapshot_gpu_count(snap); i++) {
		const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, i);
		if (gpuctl_gpu_lost(g) || !gpuctl_gpu_str(g, GPUCTL_F_UUID))
			continue;
		nd += 1 + gpuctl_gpu_mig_count(g);
		np += gpuctl_gpu_proc_count(g) * (1 + gpuctl_gpu_mig_count(g));
	}
	*ret_devs = nd;
	*ret_procs = np;
}

int gpuctl_idle_feed(struct gpuctl_ctx *ctx, struct gpuctl_idle *idle, uint64_t now_ms,
                     const struct gpuctl_snapshot *snap, const struct gpuctl_lease_list *list)
{
	size_t nd, np, n = 0, used = 0;
	int r;

	if (!ctx || !idle || !snap)
		return -EINVAL;
	if (!(gpuctl_snapshot_flags(snap) & GPUCTL_SNAP_PROCESSES))
		return ctx_error(ctx, -EINVAL,
		                 "idle: the snapshot was taken without its processes");
	count(snap, &nd, &np);
	_cleanup_free_ struct idle_fact *facts = calloc(nd ? nd : 1, sizeof(*facts));
	_cleanup_free_ struct idle_proc_fact *procs = calloc(np ? np : 1, sizeof(*procs));
	if (!facts || !procs)
		return ctx_error(ctx, -ENOMEM, "idle: out of memory");
	for (size_t i = 0; i < gpuctl_snapshot_gpu_count(snap); i++) {
		const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, i);
		int64_t v;
		if (gpuctl_gpu_lost(g) || !gpuctl_gpu_str(g, GPUCTL_F_UUID))
			continue;
		const struct idle_proc_fact *whole = NULL; /* the GPU's pass, made first */
		for (int m = -1; m < (int)gpuctl_gpu_mig_count(g); m++) {
			const struct gpuctl_mig *mg = m >= 0 ? gpuctl_gpu_mig(g, (size_t)m) : NULL;
			if (mg && !gpuctl_mig_uuid(mg))
				continue;
			struct idle_fact *f = &facts[n++];
			f->uuid = mg ? gpuctl_mig_uuid(mg) : gpuctl_gpu_str(g, GPUCTL_F_UUID);
			f->util =
			        !mg && gpuctl_gpu_int(g, GPUCTL_F_UTIL_GPU, &v) == 0 ? (int)v : -1;
			if (mg)
				f->memory_used = gpuctl_mig_int(mg, GPUCTL_MIG_MEMORY_USED, &v) == 0
				                         ? v
				                         : -1;
			else
				f->memory_used =
				        gpuctl_gpu_int(g, GPUCTL_F_MEMORY_USED, &v) == 0 ? v : -1;
			f->leased = leased(list, i, m);
			f->procs = &procs[used];
			f->n_procs = procs_of(g, m, whole, &procs[used]);
			if (m < 0)
				whole = f->procs;
			used += f->n_procs;
		}
	}
	r = idle_feed_facts(idle, now_ms, facts, n);
	if (r < 0)
		return ctx_error(ctx, r, "idle: out of memory");
	return 0;
}
