/* SPDX-License-Identifier: MIT */
/*
 * ps.h: `gpuctl ps`'s parts: who holds what (cmd-ps.c) and who waits (ps-waiting.c).
 */
#ifndef GPUCTL_CLI_PS_H
#define GPUCTL_CLI_PS_H

#include <stdbool.h>

#include "cmd.h"
#include "workload-filter.h"

/* ps --waiting: the live tickets in order (docs/leases.md "Waiting"), from the lease directory
 * lease_dir (NULL: the site's), as JSON or a table. The exit status. */
int ps_waiting(struct cli *cli, const char *lease_dir, bool json);

/* ---- the workloads of ps's rows (ps-workload.c) ---- */

/* WORKLOAD in the table: a label of at most this many characters, longer ones cut with "..."
 * (docs/gpuctl.1 "ps"); JSON keeps it whole. */
#define PS_WORKLOAD_WIDTH 32

/* The workloads one ps run reads: one cache (gpuctl_workloads) for every row. */
struct ps_wls {
	struct gpuctl_ctx *ctx;
	struct gpuctl_workloads *cache; /* owned; NULL: none could be made (every one unknown) */
};
int ps_wls_new(struct ps_wls *w, struct gpuctl_ctx *ctx);
void ps_wls_free(struct ps_wls *w);
/* The workload of pid (borrowed from the cache), NULL when it cannot be read. */
const struct gpuctl_workload *ps_workload_of(struct ps_wls *w, uint32_t pid);
/* A lease holder's: its job's (job_pid), else the holder's own; NULL for o NULL. */
const struct gpuctl_workload *ps_holder_workload(struct ps_wls *w,
                                                 const struct gpuctl_lease_owner *o);
/* Whether process proc of GPU g is listed on device row (g, mig): every process of the GPU on
 * its whole-GPU row (mig < 0), a MIG device's own on its row (gpuctl_proc_mig_device). */
bool ps_proc_on(const struct gpuctl_gpu *g, const struct gpuctl_proc *proc, int mig);
/* The WORKLOAD cell of a line of device (gpu, mig): the distinct labels of holder (NULL:
 * none) and, with procs, of the device's compute processes; the first, then "+N" for the
 * others; "-" for none. */
void ps_workload_cell(struct ps_wls *w, const struct gpuctl_snapshot *snap, size_t gpu, int mig,
                      const struct gpuctl_lease_owner *holder, bool procs, char *buf, size_t size);
/* Whether one workload of device (gpu, mig), its holders' or its processes', is one f keeps
 * (every device when f is not active). */
bool ps_device_matches(struct ps_wls *w, const struct wl_filter *f,
                       const struct gpuctl_snapshot *snap, size_t gpu, int mig,
                       const struct gpuctl_lease_owner *const *holders, size_t n_holders);
/* A compute process's JSON: pid, uid, user, command, used_memory and workload (docs/json.md);
 * NULL when out of memory. */
json_t *ps_proc_json(struct ps_wls *w, const struct gpuctl_proc *p);
/* The JSON `processes` of device (gpu, mig): every compute process on it with its workload
 * (docs/json.md); NULL when out of memory. */
json_t *ps_processes_json(struct ps_wls *w, const struct gpuctl_snapshot *snap, size_t gpu, int mig,
                          const struct gpuctl_foreign *foreign);

#endif /* GPUCTL_CLI_PS_H */
