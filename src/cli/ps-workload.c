// SPDX-License-Identifier: MIT
/*
 * ps-workload.c: the workloads of `gpuctl ps`'s rows (docs/json.md "Workloads"): who a
 * device's holders and compute processes work for, as the WORKLOAD cell, the JSON objects and
 * what --job and --workload match. cmd-ps.c has the rest of ps.
 *
 * Decisions:
 * - A device's workloads are its lease holders' (the job a holder runs, else the holder: the
 *   pid whose cgroups say who it works for) and every compute process's on it, in that order.
 *   The cell shows the first distinct label and "+N" for the N other distinct ones ("slurm
 *   4242.0 +1"): the holder's first, since it is what the lease is for; JSON has every one.
 * - One gpuctl_workloads cache for the run: a process on a GPU and on its MIG device's row,
 *   or a holder that is also a compute process, is read once. ps never sweeps it: one run,
 *   one look.
 * - A row is kept by --job/--workload when one of its workloads matches every filter given.
 */
#include <errno.h>
#include <string.h>

#include "format.h"
#include "ps.h"

/* The labels a cell counts at most (a device with more shows "+N" of this many). */
#define PS_WL_MAX 64

int ps_wls_new(struct ps_wls *w, struct gpuctl_ctx *ctx)
{
	w->ctx = ctx;
	return gpuctl_workloads_new(ctx, &w->cache);
}

void ps_wls_free(struct ps_wls *w)
{
	gpuctl_workloads_free(w->cache);
	w->cache = NULL;
}

const struct gpuctl_workload *ps_workload_of(struct ps_wls *w, uint32_t pid)
{
	const struct gpuctl_workload *wl = NULL;

	if (!w->cache || pid == 0 || gpuctl_workloads_get(w->ctx, w->cache, pid, 0, &wl) < 0)
		return NULL;
	return wl;
}

const struct gpuctl_workload *ps_holder_workload(struct ps_wls *w,
                                                 const struct gpuctl_lease_owner *o)
{
	return o ? ps_workload_of(w, o->job_pid ? o->job_pid : o->pid) : NULL;
}

bool ps_proc_on(const struct gpuctl_gpu *g, const struct gpuctl_proc *proc, int mig)
{
	return mig < 0 || gpuctl_proc_mig_device(g, proc) == mig;
}

/* Adds wl to v (n of max) unless a workload of the same label is there. */
static void add_distinct(const struct gpuctl_workload **v, size_t *n, size_t max,
                         const struct gpuctl_workload *wl)
{
	if (!wl || *n >= max)
		return;
	for (size_t i = 0; i < *n; i++)
		if (strcmp(v[i]->label, wl->label) == 0)
			return;
	v[(*n)++] = wl;
}

/* The distinct workloads of holders (n_holders) and, with procs, of the compute processes of
 * GPU gpu's device mig, into v (at most max). Their number. */
static size_t device_workloads(struct ps_wls *w, const struct gpuctl_snapshot *snap, size_t gpu,
                               int mig, const struct gpuctl_lease_owner *const *holders,
                               size_t n_holders, bool procs, const struct gpuctl_workload **v,
                               size_t max)
{
	const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, gpu);
	size_t n = 0;

	for (size_t k = 0; k < n_holders; k++)
		add_distinct(v, &n, max, ps_holder_workload(w, holders[k]));
	for (size_t i = 0; procs && g && i < gpuctl_gpu_proc_count(g); i++) {
		const struct gpuctl_proc *p = gpuctl_gpu_proc(g, i);
		if (ps_proc_on(g, p, mig))
			add_distinct(v, &n, max, ps_workload_of(w, gpuctl_proc_pid(p)));
	}
	return n;
}

void ps_workload_cell(struct ps_wls *w, const struct gpuctl_snapshot *snap, size_t gpu, int mig,
                      const struct gpuctl_lease_owner *holder, bool procs, char *buf, size_t size)
{
	const struct gpuctl_workload *v[PS_WL_MAX];
	size_t n =
	        device_workloads(w, snap, gpu, mig, &holder, holder ? 1 : 0, procs, v, PS_WL_MAX);
	char first[PS_WORKLOAD_WIDTH * 4 + 1];

	if (n == 0) {
		snprintf(buf, size, "-");
		return;
	}
	format_cell_text(v[0]->label, PS_WORKLOAD_WIDTH, first, sizeof(first));
	if (n == 1)
		snprintf(buf, size, "%s", first);
	else
		snprintf(buf, size, "%s +%zu", first, n - 1);
}

bool ps_device_matches(struct ps_wls *w, const struct wl_filter *f,
                       const struct gpuctl_snapshot *snap, size_t gpu, int mig,
                       const struct gpuctl_lease_owner *const *holders, size_t n_holders)
{
	const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, gpu);

	if (!wl_filter_active(f))
		return true;
	for (size_t k = 0; k < n_holders; k++)
		if (holders[k] && wl_filter_match(f, ps_holder_workload(w, holders[k])))
			return true;
	for (size_t i = 0; g && i < gpuctl_gpu_proc_count(g); i++) {
		const struct gpuctl_proc *p = gpuctl_gpu_proc(g, i);
		if (ps_proc_on(g, p, mig) &&
		    wl_filter_match(f, ps_workload_of(w, gpuctl_proc_pid(p))))
			return true;
	}
	return false;
}

json_t *ps_proc_json(struct ps_wls *w, const struct gpuctl_proc *p)
{
	uint32_t uid = 0;
	int64_t mem = 0;
	int ru = gpuctl_proc_uid(p, &uid), rm = gpuctl_proc_used_memory(p, &mem);
	json_t *o = json_object();

	if (!o || json_put(o, "pid", json_integer(gpuctl_proc_pid(p))) < 0 ||
	    json_put(o, "uid", json_int_or_null(ru, uid)) < 0 ||
	    json_put(o, "user", json_string_or_null(gpuctl_proc_user(p))) < 0 ||
	    json_put(o, "command", json_string_or_null(gpuctl_proc_command(p))) < 0 ||
	    json_put(o, "used_memory", json_int_or_null(rm, mem)) < 0 ||
	    json_put(o, "workload", wl_json(ps_workload_of(w, gpuctl_proc_pid(p)))) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *ps_processes_json(struct ps_wls *w, const struct gpuctl_snapshot *snap, size_t gpu, int mig,
                          const struct gpuctl_foreign *foreign)
{
	const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, gpu);
	json_t *arr = json_array();

	for (size_t i = 0; arr && g && i < gpuctl_gpu_proc_count(g); i++) {
		const struct gpuctl_proc *p = gpuctl_gpu_proc(g, i);
		if (!ps_proc_on(g, p, mig))
			continue;
		json_t *o = ps_proc_json(w, p);
		if (!o ||
		    json_put(o, "foreign", json_boolean(gpuctl_foreign_proc(foreign, gpu, i))) <
		            0 ||
		    json_array_append_new(arr, o) < 0) {
			json_decref(o);
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}
