/* SPDX-License-Identifier: MIT */
/*
 * snapshot-internal.h: the private layout of a snapshot and the setters that build one.
 *
 * Decisions:
 * - The NVML loader (src/lib/nvml/) fills snapshots only through these setters; unit tests,
 *   fuzzers and policy code build synthetic snapshots the same way, with no NVML at all.
 * - Every per-GPU field has a valid bit; a field never set reads as unavailable (-ENODATA/NULL).
 * - Strings are copied in; the snapshot owns everything it points to, and one
 *   gpuctl_snapshot_free() releases it all.
 * - The pair matrix is n x n, symmetric, allocated only for GPUCTL_SNAP_TOPOLOGY snapshots.
 *   Bandwidth is derived, not read: topo_fill_bandwidth() fills it from the other pair and
 *   per-GPU facts once they are read (gpuctl_snapshot_take_fields, after the loader); code that
 *   builds a snapshot with setters calls it itself.
 */
#ifndef GPUCTL_SNAPSHOT_INTERNAL_H
#define GPUCTL_SNAPSHOT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuctl/gpuctl.h"

#define MIG_FIELD_COUNT (GPUCTL_MIG_MEMORY_USED + 1)

struct gpuctl_mig {
	char *uuid;                    /* "MIG-...", NULL if NVML did not say */
	char *profile;                 /* "1g.10gb", NULL if unknown */
	int64_t ints[MIG_FIELD_COUNT]; /* by enum gpuctl_mig_field */
	bool valid[MIG_FIELD_COUNT];   /* ints[i] is set */
};

struct gpuctl_proc {
	uint32_t pid;        /* process id as the driver reports it */
	int64_t used_memory; /* bytes of GPU memory, if has_memory */
	bool has_memory;     /* used_memory is known */
	uint32_t uid;        /* owner, if has_uid */
	bool has_uid;        /* uid is known (the process exists in our PID namespace) */
	char *user;          /* owner's name, or the uid in decimal; NULL if unknown */
	char *command;       /* argv[0] without directories; NULL if unknown */
	uint32_t gi;         /* MIG GPU instance, if has_mig */
	uint32_t ci;         /* MIG compute instance, if has_mig */
	bool has_mig;        /* the process runs on a MIG device */
	int util[4];         /* by enum gpuctl_proc_engine, percent, if has_util */
	bool has_util;       /* the driver had a utilisation sample for the process */
};

struct gpuctl_gpu {
	size_t index;                  /* position in the snapshot (== NVML index) */
	bool lost;                     /* NVML said GPU_IS_LOST; unread fields unavailable */
	int64_t ints[GPUCTL__F_COUNT]; /* integer fields, by enum gpuctl_field */
	char *strs[GPUCTL__F_COUNT];   /* string fields, owned; NULL for int fields */
	bool valid[GPUCTL__F_COUNT];   /* the field holds a value */
	int nvswitch_links;            /* active NVLinks into NVSwitches (topology; with
	                                * GPUCTL_SNAP_NVLINK_STATE alone the field values' count,
	                                * or, where they do not give it, 0 or 1: whether the first
	                                * active link reaches NVSwitches) */
	struct gpuctl_mig *migs;       /* MIG devices, owned */
	size_t n_migs;                 /* entries in migs */
	struct gpuctl_proc *procs;     /* compute processes, owned */
	size_t n_procs;                /* entries in procs */
	/* Health facts that are no public field (health.c reads them): */
	unsigned nvml_errors; /* NVML calls on this GPU that failed with a real error
	                       * (not NOT_SUPPORTED & co., not GPU_IS_LOST) */
	uint64_t unreadable;  /* bit f: reading field f failed with such an error (a value
	                       * set later clears it); unreadable_why[f] says how */
	char *unreadable_why[GPUCTL__F_COUNT]; /* owned, "nvmlDeviceGetX: Unknown Error" */
	unsigned nvml_not_ready;  /* calls answered NOT_READY: N/A now, asked again next time */
	bool has_nvlink_state;    /* the NVLink states were read (GPUCTL_SNAP_TOPOLOGY or
	                           * GPUCTL_SNAP_NVLINK_STATE) */
	char *nvlink_unreadable;  /* owned: set when reading a link's state, or the first active
	                           * link's far end, failed with a real NVML error
	                           * ("nvmlDeviceGetNvLinkState: Unknown Error"); an error
	                           * counter that fails is left out of its sum, as one a link
	                           * does not support */
	int nvlink_present;       /* links NVML answered for, active or not */
	int nvlink_active;        /* of which active */
	uint64_t nvlink_inactive; /* bit k: link k answered inactive */
	/* NVLink error counters, summed over the active links (health snapshots); each sum is
	 * valid when at least one link's counter was read (NVML may support some counters of a
	 * link and not others: each is read on its own) */
	bool has_nvlink_replay, has_nvlink_recovery, has_nvlink_crc;
	uint64_t nvlink_replay;   /* DL replays, */
	uint64_t nvlink_recovery; /* DL recoveries, */
	uint64_t nvlink_crc;      /* CRC flit + CRC data errors */
	/* NVML's timestamps of the violation readings (power, thermal), microseconds; set with
	 * GPUCTL_F_VIOLATION_POWER / _THERMAL */
	uint64_t violation_ref_us[2];
};

struct gpuctl_snapshot {
	unsigned flags;            /* enum gpuctl_snapshot_flags it was taken with */
	uint64_t want;             /* per-GPU fields asked for (bit 1 << field), read or copied */
	char *driver_version;      /* "550.54.15", NULL if unknown */
	char *nvml_version;        /* "12.550.54.15", NULL if unknown */
	int cuda_version;          /* NVML encoding (12040), if has_cuda_version */
	bool has_cuda_version;     /* cuda_version is known */
	size_t n_gpus;             /* entries in gpus */
	struct gpuctl_gpu *gpus;   /* owned; indices 0..n_gpus-1 */
	struct gpuctl_link *links; /* n_gpus x n_gpus, row-major; NULL without topology */
	struct gpuctl_cpu cpu;     /* the host CPU the bandwidth model uses (with topology; the
	                            * unknown CPU until snapshot-take.c reads /proc/cpuinfo) */
};

/* A snapshot with n_gpus GPUs whose every field is unavailable (INDEX set); if flags has
 * GPUCTL_SNAP_TOPOLOGY, a pair matrix with level UNKNOWN, no NVLinks, P2P UNKNOWN. NULL on
 * allocation failure. */
struct gpuctl_snapshot *snapshot_new_empty(size_t n_gpus, unsigned flags);

/* Setters: -EINVAL for a bad index or a field of the other type, -ENOMEM. A value set clears
 * the field's unreadable mark. */
int snapshot_set_int(struct gpuctl_snapshot *snap, size_t gpu, enum gpuctl_field f, int64_t v);
int snapshot_set_str(struct gpuctl_snapshot *snap, size_t gpu, enum gpuctl_field f, const char *s);
/* Marks the fields of mask (bit 1 << field) of GPU gpu unreadable: NVML failed with a real
 * error (why: "nvmlDeviceGetX: Unknown Error") when asked for them. A field already marked
 * keeps its first reason. -EINVAL for a bad index, -ENOMEM. */
int snapshot_set_unreadable(struct gpuctl_snapshot *snap, size_t gpu, uint64_t mask,
                            const char *why);
/* The same for GPU gpu's NVLink facts (nvlink_unreadable). */
int snapshot_set_nvlink_unreadable(struct gpuctl_snapshot *snap, size_t gpu, const char *why);
void snapshot_set_lost(struct gpuctl_snapshot *snap, size_t gpu);
int snapshot_set_system(struct gpuctl_snapshot *snap, const char *driver_version,
                        const char *nvml_version);
void snapshot_set_cuda_version(struct gpuctl_snapshot *snap, int version);

/* Appends a MIG device / a process to a GPU; returns a pointer to the new entry (zeroed, all
 * facts unavailable) for the caller to fill with the helpers below, or NULL (OOM/bad index). */
struct gpuctl_mig *snapshot_add_mig(struct gpuctl_snapshot *snap, size_t gpu);
int mig_set_strs(struct gpuctl_mig *mig, const char *uuid, const char *profile);
void mig_set_int(struct gpuctl_mig *mig, enum gpuctl_mig_field f, int64_t v);
struct gpuctl_proc *snapshot_add_proc(struct gpuctl_snapshot *snap, size_t gpu, uint32_t pid);
int proc_set_strs(struct gpuctl_proc *proc, const char *user, const char *command);

/* The pair entry for (a, b); NULL if out of range or no topology. Writable. */
struct gpuctl_link *snapshot_link_at(struct gpuctl_snapshot *snap, size_t a, size_t b);
/* Sets (a, b) and (b, a) to *link. -EINVAL for a bad pair or no topology. */
int snapshot_set_link(struct gpuctl_snapshot *snap, size_t a, size_t b,
                      const struct gpuctl_link *link);

/* A snapshot of prev's GPUs for gpuctl_snapshot_refresh: system facts, every per-GPU field
 * except those in `drop` (bit 1 << field), with its unreadable mark, and the lost marks copied;
 * no MIG devices, processes or pair facts. NULL on allocation failure. */
struct gpuctl_snapshot *snapshot_copy_for_refresh(const struct gpuctl_snapshot *prev,
                                                  unsigned flags, uint64_t drop);

/* topo.c: fills the bandwidth of every pair from the pair and per-GPU facts and snap->cpu. */
void topo_fill_bandwidth(struct gpuctl_snapshot *snap);

#endif /* GPUCTL_SNAPSHOT_INTERNAL_H */
