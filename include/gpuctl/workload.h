/* SPDX-License-Identifier: MIT */
/*
 * workload.h: who a process works for: its Slurm job step, Kubernetes pod, container, systemd
 * unit or login session, read from what the kernel says of it (/proc/PID/cgroup and
 * /proc/PID/status) and, for names, from the local state its runtime keeps (docs/workloads.md).
 *
 * Part of libgpuctl's public API (include <gpuctl/gpuctl.h>, which includes every header; the
 * rules that hold for all of them are there). Compiles on its own, as C and as C++
 * (tests/unit/test-headers.c).
 *
 * A workload informs; it never grants. Anyone can name a container, unit or cgroup anything, so
 * every name is bounded (GPUCTL_WORKLOAD_NAME_MAX bytes) and may hold any byte but NUL: a
 * program that prints one escapes it for where it goes (a terminal, JSON, a Prometheus label).
 * Leases and pools decide who may use a GPU.
 */
#ifndef GPUCTL_WORKLOAD_H
#define GPUCTL_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decls.h"
#include "context.h"

/* Exported: see gpuctl.h, "What these headers declare is libgpuctl's whole ABI". */
GPUCTL_BEGIN_DECLS

/* ---- Workloads (src/lib/workload/; docs/workloads.md) ---- */

/* The most specific thing a process's cgroups say it belongs to. */
enum gpuctl_workload_kind {
	GPUCTL_WORKLOAD_UNKNOWN,   /* not readable: the process is gone, or /proc hides it */
	GPUCTL_WORKLOAD_BARE,      /* none of the below (a process of no unit, session or job) */
	GPUCTL_WORKLOAD_SLURM,     /* a Slurm job step (slurm_job, slurm_step) */
	GPUCTL_WORKLOAD_POD,       /* a container of a Kubernetes pod (pod_uid, id, runtime) */
	GPUCTL_WORKLOAD_CONTAINER, /* a container outside Kubernetes (runtime, id, name) */
	GPUCTL_WORKLOAD_UNIT,      /* a systemd service, the system's or a user's (name) */
	GPUCTL_WORKLOAD_SESSION,   /* a login session's scope (name: session-N.scope) */
};

/* The longest name, id or cgroup path kept, in bytes (longer ones are cut at a UTF-8
 * boundary: truncated is set). */
#define GPUCTL_WORKLOAD_NAME_MAX 253

/* What the library found. Library-owned, read through the pointer gpuctl_workloads_get hands
 * out (never allocate one: it grows at its end). Strings are NULL when unknown. */
struct gpuctl_workload {
	enum gpuctl_workload_kind kind;
	uint32_t pid;       /* the process (a host PID, as NVML reports it) */
	uint32_t ns_pid;    /* its PID in its innermost PID namespace (NSpid), 0 if unknown; equal
	                     * to pid outside containers */
	uint32_t uid;       /* its real uid (Status: Uid), UINT32_MAX if unknown */
	const char *cgroup; /* the cgroup path that decided the kind (as /proc/PID/cgroup has it) */
	const char *runtime; /* POD and CONTAINER: "docker", "podman", "containerd", "cri-o",
	                      * "lxc"; NULL otherwise */
	const char *id;      /* POD and CONTAINER: the container id as the runtime writes it
	                      * (lower-case hex for all but LXC, whose id is its name) */
	const char *name;    /* CONTAINER: the container's name; POD: the pod's name; UNIT: the
	                      * unit ("jupyter.service"); SESSION: the scope ("session-3.scope") */
	const char *pod_namespace; /* POD: the pod's namespace */
	const char *pod_uid;       /* POD: the pod's uid, as the API server writes it (dashes) */
	const char *container;     /* POD: the container's name in its pod */
	uint32_t slurm_job;        /* SLURM: the job id (the cgroup's job_J) */
	const char *slurm_step;    /* SLURM: "0", "1", ..., "batch", "extern", "interactive";
	                            * NULL when the process is in the job but in no step */
	uint32_t slurm_array_job;  /* SLURM: the array's job id (SLURM_ARRAY_JOB_ID), 0 if none */
	uint32_t slurm_array_task; /* SLURM: the array task id; valid when slurm_array_job != 0 */
	uint32_t unit_uid;         /* UNIT and SESSION: the user whose manager or session it is
	                            * (user@U.service, user-U.slice), UINT32_MAX for the system's */
	const char *label;         /* the short form a table shows: "slurm 4242.0",
	                            * "pod ml/trainer-7/main", "podman web-1", "unit jupyter.service",
	                            * "session 3", "bare", "?" (never NULL) */
	bool truncated;            /* some string above was cut at GPUCTL_WORKLOAD_NAME_MAX */
};

/* The kind's name as docs/workloads.md and JSON write it: "unknown", "bare", "slurm", "pod",
 * "container", "unit", "session"; NULL for a value out of range. */
const char *gpuctl_workload_kind_name(enum gpuctl_workload_kind kind);

/* A cache of workloads by (PID, start time): a process's workload is read once (its cgroup and
 * status files, its runtime's state) and then kept until it is not asked for between two
 * gpuctl_workloads_sweep calls. Not thread-safe: one thread at a time. Outlives nothing: it
 * keeps no pointer to its context. */
struct gpuctl_workloads;
int gpuctl_workloads_new(struct gpuctl_ctx *ctx, struct gpuctl_workloads **ret_wls);
void gpuctl_workloads_free(struct gpuctl_workloads *wls);

/* The workload of process pid (borrowed, valid until the next sweep or free).
 * start_ticks: the process's start time after boot in clock ticks (/proc/PID/stat field 22)
 * when the caller knows it: a cached entry of another start time is read again (the PID was
 * reused). 0 when it does not: a cached entry is then taken as it is, with no /proc read at
 * all (a PID reused between two sweeps keeps the old process's workload; docs/workloads.md
 * says how short that window is), and a new one reads /proc/PID/stat for its start time.
 * A start_ticks that is not the start time of the process now at pid (the one it named ended)
 * gives GPUCTL_WORKLOAD_UNKNOWN.
 * Always succeeds for a PID: a process that cannot be read is GPUCTL_WORKLOAD_UNKNOWN. 0, or
 * -ENOMEM, -EINVAL (pid 0). */
int gpuctl_workloads_get(struct gpuctl_ctx *ctx, struct gpuctl_workloads *wls, uint32_t pid,
                         uint64_t start_ticks, const struct gpuctl_workload **ret_wl);

/* Forgets the entries not asked for since the previous sweep (processes that ended). Returns how
 * many it forgot. */
size_t gpuctl_workloads_sweep(struct gpuctl_workloads *wls);

/* How many files under /proc, and how many of a runtime's state, this cache has read in all:
 * for benchmarks and tests of the cache (a refresh of known processes reads none). */
uint64_t gpuctl_workloads_files_read(const struct gpuctl_workloads *wls);

GPUCTL_END_DECLS

#endif /* GPUCTL_WORKLOAD_H */
