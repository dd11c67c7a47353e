/* SPDX-License-Identifier: MIT */
/*
 * snapshot.h: the snapshot: one consistent reading of the machine, its GPUs, their MIG devices and
 * compute processes.
 *
 * Part of libgpuctl's public API (include <gpuctl/gpuctl.h>, which includes every header; the
 * rules that hold for all of them are there). Compiles on its own, as C and as C++
 * (tests/unit/test-headers.c).
 */
#ifndef GPUCTL_SNAPSHOT_H
#define GPUCTL_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decls.h"
#include "context.h"
#include "field.h"

/* Exported: see gpuctl.h, "What these headers declare is libgpuctl's whole ABI". */
GPUCTL_BEGIN_DECLS

/* ---- Snapshot ---- */

/* Never changes once taken: any number of threads may read one at once. It keeps nothing of its
 * context (the NVML handles stay in the context), so it outlives it. The GPUs, MIG devices,
 * processes and strings it hands out live as long as it does. */
struct gpuctl_snapshot;
struct gpuctl_gpu;
struct gpuctl_mig;
struct gpuctl_proc;

/* What to read beyond each GPU's identity and telemetry. Reading is done once per snapshot. */
enum gpuctl_snapshot_flags {
	GPUCTL_SNAP_BASIC = 0,           /* identity, memory, utilisation, temperature, ... */
	GPUCTL_SNAP_PROCESSES = 1u << 0, /* running compute processes (+ user, command) */
	GPUCTL_SNAP_TOPOLOGY = 1u << 1,  /* pair facts: PCIe level, NVLink, P2P */
	GPUCTL_SNAP_MIG = 1u << 2,       /* MIG devices */
	GPUCTL_SNAP_HEALTH = 1u << 3,    /* ECC, retired pages, remapped rows, PCIe replays */
	GPUCTL_SNAP_PROC_UTIL = 1u << 4, /* processes with their engine utilisation (implies
	                                  * GPUCTL_SNAP_PROCESSES; one more NVML call per GPU) */
	GPUCTL_SNAP_ALL = 0x1fu,
	/* A modifier, not a read: with GPUCTL_SNAP_HEALTH and _TOPOLOGY, leave out the NVLink
	 * error counters, which only a rate check between two samples uses (4 NVML calls per
	 * active link: 384 on a DGX A100). For a one-shot check with no earlier sample to
	 * compare with; gpuctl_alloc sets it when no health state file exists. */
	GPUCTL_SNAP_NO_RATE_COUNTERS = 1u << 5,
	/* A modifier, not a read: with GPUCTL_SNAP_PROCESSES, leave out each process's owner
	 * and command (gpuctl_proc_uid, _user and _command answer unknown), which cost a stat,
	 * a user-database lookup and a read of /proc/PID/cmdline per process. For a caller that
	 * reads /proc for them itself and keeps them between refreshes (gpuctl top). Also taken
	 * by gpuctl_snapshot_refresh. */
	GPUCTL_SNAP_NO_PROC_IDENTITY = 1u << 6,
	/* Each GPU's NVLink states, and whether its first active link reaches an NVSwitch: what
	 * the nvlink-down health check judges, without the pair facts (GPUCTL_SNAP_TOPOLOGY
	 * reads them too). About one NVML call per link. With GPUCTL_SNAP_HEALTH, also the NVLink
	 * error counters unless GPUCTL_SNAP_NO_RATE_COUNTERS. A refresh keeps the previous
	 * snapshot's. */
	GPUCTL_SNAP_NVLINK_STATE = 1u << 7,
	/* A modifier, not a read: with gpuctl_snapshot_take_fields, read the listed fields (and
	 * what the flags' reads depend on) without the UUID, PCI bus id and name every snapshot
	 * has otherwise, unless they are listed or GPUCTL_SNAP_TOPOLOGY needs the bus ids: three
	 * NVML calls per GPU fewer for a tool that prints neither (gpuctl list --query without
	 * -i). gpuctl_ids_resolve then knows the GPUs by index only. */
	GPUCTL_SNAP_ONLY_FIELDS = 1u << 8,
	/* A modifier, not a read: leave out the system facts (driver, NVML and CUDA versions:
	 * gpuctl_snapshot_driver_version and _nvml_version answer NULL, _cuda_version -ENODATA),
	 * three NVML calls fewer for a caller that shows none (gpuctl list's table). */
	GPUCTL_SNAP_NO_SYSTEM = 1u << 9,
};

/* Takes a snapshot (loads NVML first if needed). A GPU that is lost does not fail the
 * snapshot: it is marked lost (gpuctl_gpu_lost) and its unread fields are unavailable. */
int gpuctl_snapshot_take(struct gpuctl_ctx *ctx, unsigned flags, struct gpuctl_snapshot **ret_snap);
void gpuctl_snapshot_free(struct gpuctl_snapshot *snap);

/* System facts. Strings are owned by the snapshot; NULL when unavailable. */
const char *gpuctl_snapshot_driver_version(const struct gpuctl_snapshot *snap);
const char *gpuctl_snapshot_nvml_version(const struct gpuctl_snapshot *snap);
/* CUDA driver API version as NVML encodes it (e.g. 12020 for 12.2); -ENODATA if unavailable. */
int gpuctl_snapshot_cuda_version(const struct gpuctl_snapshot *snap, int *ret_version);
/* The flags the snapshot was taken with. */
unsigned gpuctl_snapshot_flags(const struct gpuctl_snapshot *snap);

size_t gpuctl_snapshot_gpu_count(const struct gpuctl_snapshot *snap);
/* Borrowed pointer, valid until the snapshot is freed; NULL if i is out of range. */
const struct gpuctl_gpu *gpuctl_snapshot_gpu(const struct gpuctl_snapshot *snap, size_t i);

/* Like gpuctl_snapshot_take, but of the per-GPU fields reads only the n_fields listed (plus
 * index, UUID, PCI bus id and name, which every snapshot has unless GPUCTL_SNAP_ONLY_FIELDS,
 * and what the flags' reads depend on); the others read as unavailable. A listed field implies its
 * group's flag (a health field implies GPUCTL_SNAP_HEALTH). fields NULL with n_fields 0 reads every
 * field but GPUCTL_F_PCIE_RX and _TX (NVML samples each for 20 ms while the caller waits). -EINVAL
 * for an unknown field id. This is how a tool that prints a few fields makes a few NVML calls. */
int gpuctl_snapshot_take_fields(struct gpuctl_ctx *ctx, unsigned flags,
                                const enum gpuctl_field *fields, size_t n_fields,
                                struct gpuctl_snapshot **ret_snap);

/* Takes a snapshot of the same GPUs as prev that re-reads only the n_fields listed (and the
 * processes with GPUCTL_SNAP_PROCESSES or _PROC_UTIL, the MIG devices of GPUs in MIG mode with
 * GPUCTL_SNAP_MIG); every other per-GPU field, and the system facts, are copied from prev. It
 * makes one device count and no system call or handle lookup (handles are kept in ctx from
 * the snapshot before), so an interval of a monitor costs the reads of what it shows. A field
 * prev asked for and a GPU did not support (prev had no failed call on it) is not asked
 * again. A GPU lost in prev stays lost and is not asked again; one lost now is marked lost.
 * -EIO when NVML cannot count the GPUs, -ESTALE when their number changed (take a snapshot),
 * -EINVAL for flags other than PROCESSES, PROC_UTIL, HEALTH and MIG (pair facts are not
 * refreshed). */
int gpuctl_snapshot_refresh(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *prev,
                            unsigned flags, const enum gpuctl_field *fields, size_t n_fields,
                            struct gpuctl_snapshot **ret_snap);

/* ---- A GPU's fields ---- */

/* Reads an integer field. Returns 0, -ENODATA when unavailable (NOT_SUPPORTED, missing symbol,
 * not requested in the snapshot flags, or the GPU is lost), -EINVAL if the field is no int. */
int gpuctl_gpu_int(const struct gpuctl_gpu *gpu, enum gpuctl_field f, int64_t *ret_value);
/* Reads a string field; NULL when unavailable or not a string field. Owned by the snapshot. */
const char *gpuctl_gpu_str(const struct gpuctl_gpu *gpu, enum gpuctl_field f);
/* True when NVML reported this GPU lost (fallen off the bus, GPU_IS_LOST). */
bool gpuctl_gpu_lost(const struct gpuctl_gpu *gpu);
/* Index of this GPU in its snapshot (== GPUCTL_F_INDEX). */
size_t gpuctl_gpu_index(const struct gpuctl_gpu *gpu);
/* Percent (0..100) of the time between two readings of GPUCTL_F_VIOLATION_POWER or
 * GPUCTL_F_VIOLATION_THERMAL (before, then after) that the GPU was held back, over NVML's own
 * timestamps of the readings. -ENODATA when either reading is unavailable or no time passed,
 * -EINVAL for another field. */
int gpuctl_gpu_violation_percent(const struct gpuctl_gpu *before, const struct gpuctl_gpu *after,
                                 enum gpuctl_field f, double *ret_percent);

/* ---- MIG devices (GPUCTL_SNAP_MIG) ---- */

size_t gpuctl_gpu_mig_count(const struct gpuctl_gpu *gpu);
const struct gpuctl_mig *gpuctl_gpu_mig(const struct gpuctl_gpu *gpu, size_t i);
const char *gpuctl_mig_uuid(const struct gpuctl_mig *mig);    /* "MIG-..." */
const char *gpuctl_mig_profile(const struct gpuctl_mig *mig); /* "1g.10gb", NULL if unknown */
/* GPUCTL_MIG_* integer facts; -ENODATA when unavailable. */
enum gpuctl_mig_field {
	GPUCTL_MIG_INDEX,        /* MIG device index on its parent */
	GPUCTL_MIG_GI,           /* GPU instance id */
	GPUCTL_MIG_CI,           /* compute instance id */
	GPUCTL_MIG_MEMORY_TOTAL, /* bytes */
	GPUCTL_MIG_MEMORY_USED,  /* bytes */
};
int gpuctl_mig_int(const struct gpuctl_mig *mig, enum gpuctl_mig_field f, int64_t *ret_value);

/* ---- Compute processes (GPUCTL_SNAP_PROCESSES) ---- */

size_t gpuctl_gpu_proc_count(const struct gpuctl_gpu *gpu);
const struct gpuctl_proc *gpuctl_gpu_proc(const struct gpuctl_gpu *gpu, size_t i);
uint32_t gpuctl_proc_pid(const struct gpuctl_proc *proc);
/* Bytes of GPU memory the process uses; -ENODATA when the driver does not say. */
int gpuctl_proc_used_memory(const struct gpuctl_proc *proc, int64_t *ret_bytes);
/* The owner's uid; -ENODATA when unknown (process gone, other PID namespace). */
int gpuctl_proc_uid(const struct gpuctl_proc *proc, uint32_t *ret_uid);
/* User name (or the uid in decimal when it has no name), NULL if unknown. */
const char *gpuctl_proc_user(const struct gpuctl_proc *proc);
/* Command name (argv[0] without directories), NULL if unknown. */
const char *gpuctl_proc_command(const struct gpuctl_proc *proc);
/* For a process on a MIG device: its GPU / compute instance ids; -ENODATA otherwise. */
int gpuctl_proc_mig(const struct gpuctl_proc *proc, uint32_t *ret_gi, uint32_t *ret_ci);
/* The MIG device of gpu (its place, gpuctl_gpu_mig) that process proc of gpu runs on, matched
 * by GPU and compute instance ids; -1 for a process on the whole GPU, or on a MIG device the
 * snapshot does not list (which counts for the whole GPU). */
int gpuctl_proc_mig_device(const struct gpuctl_gpu *gpu, const struct gpuctl_proc *proc);
/* A process's share of an engine in the driver's newest sample (GPUCTL_SNAP_PROC_UTIL). */
enum gpuctl_proc_engine {
	GPUCTL_PROC_SM,  /* percent of the SMs' time */
	GPUCTL_PROC_MEM, /* percent of the memory interface's time */
	GPUCTL_PROC_ENC, /* percent of the video encoder's time */
	GPUCTL_PROC_DEC, /* percent of the video decoder's time */
};
/* -ENODATA when the driver had no sample for the process (or was not asked), -EINVAL for an
 * unknown engine. */
int gpuctl_proc_util(const struct gpuctl_proc *proc, enum gpuctl_proc_engine engine,
                     int *ret_percent);

GPUCTL_END_DECLS

#endif /* GPUCTL_SNAPSHOT_H */
