/* SPDX-License-Identifier: MIT */
/*
 * idle.h: idle GPUs found from samples: a lease with no process, a process that holds memory but
 * does not compute, memory held with no live process (docs/idle.md).
 *
 * Part of libgpuctl's public API (include <gpuctl/gpuctl.h>, which includes every header; the
 * rules that hold for all of them are there). Compiles on its own, as C and as C++
 * (tests/unit/test-headers.c).
 *
 * The tracker only finds and tells; nothing here releases a lease or ends a process.
 */
#ifndef GPUCTL_IDLE_H
#define GPUCTL_IDLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decls.h"
#include "context.h"
#include "snapshot.h"
#include "lease.h"

/* Exported: see gpuctl.h, "What these headers declare is libgpuctl's whole ABI". */
GPUCTL_BEGIN_DECLS

/* ---- Idle detection (src/lib/idle/; docs/idle.md) ---- */

/* The rules' settings. */
struct gpuctl_idle_config {
	size_t struct_size; /* sizeof(struct gpuctl_idle_config) */
	uint32_t window_s;  /* (b): how long a process must stay below the threshold; >= 1 */
	int threshold;      /* (b): utilisation percent (0..100) a sample must be strictly below */
	uint64_t ghost_bytes; /* (c): memory used above this with no live process is ghost memory */
};
#define GPUCTL_IDLE_CONFIG_INIT                                                                    \
	{                                                                                          \
		sizeof(struct gpuctl_idle_config), 600, 5, (uint64_t)256 * 1024 * 1024             \
	}

/* The cases (docs/idle.md). */
enum gpuctl_idle_case {
	GPUCTL_IDLE_LEASE,   /* (a) a HELD or SHARED lease with no compute process on its device */
	GPUCTL_IDLE_PROCESS, /* (b) a process holding memory below the threshold a whole window */
	GPUCTL_IDLE_GHOST,   /* (c) memory used above ghost_bytes with no live compute process */
};
#define GPUCTL_IDLE_CASES 3
/* "lease", "process", "ghost"; NULL for a value out of range. */
const char *gpuctl_idle_case_name(enum gpuctl_idle_case c);

/* A tracker: what the samples fed so far say of each device (GPU or MIG device, by UUID). Pure
 * state, no I/O of its own but the /proc look-up gpuctl_idle_feed makes; one thread at a time. */
struct gpuctl_idle;
/* cfg NULL: GPUCTL_IDLE_CONFIG_INIT. -EINVAL for a window of 0, a threshold out of 0..100 or a
 * struct_size smaller than the first release's; -ENOMEM. */
int gpuctl_idle_new(const struct gpuctl_idle_config *cfg, struct gpuctl_idle **ret);
void gpuctl_idle_free(struct gpuctl_idle *idle);

/* Feeds one sample: snap (taken with GPUCTL_SNAP_PROCESSES, else -EINVAL; with
 * GPUCTL_SNAP_PROC_UTIL a process's SM share is judged instead of its GPU's utilisation; with
 * GPUCTL_SNAP_MIG its MIG devices are tracked too), the lease list made from it (NULL: nothing
 * is leased) and now_ms, a monotonic clock in milliseconds (CLOCK_MONOTONIC). A clock that
 * stands still or steps back counts no time. Each listed process is looked up in /proc (gone:
 * it may be ghost memory). A device missing from snap or lost is forgotten: found again, it
 * starts afresh. -ENOMEM (the tracker keeps its previous state). */
int gpuctl_idle_feed(struct gpuctl_ctx *ctx, struct gpuctl_idle *idle, uint64_t now_ms,
                     const struct gpuctl_snapshot *snap, const struct gpuctl_lease_list *list);

/* Whether case c holds for device uuid in the last sample: 1 (and *ret_ms, when not NULL, how
 * long it has held by the samples fed: 0 after one sample, "at least now"), 0 when not, -ENOENT
 * for a device not in the last sample, -EINVAL for a bad case. For GPUCTL_IDLE_PROCESS, that
 * some process of the device is idle, *ret_ms the longest. */
int gpuctl_idle_get(const struct gpuctl_idle *idle, const char *uuid, enum gpuctl_idle_case c,
                    uint64_t *ret_ms);
/* Why ghost memory is likely held on device uuid (a sentence), NULL when (c) does not hold. */
const char *gpuctl_idle_ghost_cause(const struct gpuctl_idle *idle, const char *uuid);
/* Whether process pid of device uuid is idle by (b): 1 (*ret_ms as above), 0, -ENOENT. */
int gpuctl_idle_proc(const struct gpuctl_idle *idle, const char *uuid, uint32_t pid,
                     uint64_t *ret_ms);
/* How long device uuid has been watched (the first sample to the last), -ENOENT. A caller that
 * watched less than a window cannot have found (b). */
int gpuctl_idle_watched(const struct gpuctl_idle *idle, const char *uuid, uint64_t *ret_ms);

GPUCTL_END_DECLS

#endif /* GPUCTL_IDLE_H */
