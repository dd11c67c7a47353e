/* SPDX-License-Identifier: MIT */
/* nvml-loader.h: what nvml.c offers the rest of libgpuctl (nothing here names an NVML type). */
#ifndef GPUCTL_NVML_LOADER_H
#define GPUCTL_NVML_LOADER_H

#include "ctx.h"
#include "snapshot-internal.h"

/* Reads the machine into a new snapshot (NVML must be loaded): the groups in flags and, of the
 * per-GPU fields, those in want_fields (bit 1 << field; the caller adds the fields the reading
 * itself depends on). -ENOMEM, -EIO when NVML cannot even count the GPUs; per-field and
 * per-GPU trouble never fails the snapshot. */
int nvml_read_snapshot(struct gpuctl_ctx *ctx, unsigned flags, uint64_t want_fields,
                       struct gpuctl_snapshot **ret_snap);

/* Re-reads into snap (a snapshot_copy_for_refresh() of prev, with the fields in want_fields
 * dropped) those fields of every GPU that is not lost, and the processes when flags asks for
 * them. A field prev asked for and NVML did not support on a GPU is not asked again. Handles
 * come from the context's cache, filled by the last nvml_read_snapshot (looked up by index,
 * and counted, when the cache does not fit). */
int nvml_refresh_snapshot(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *prev,
                          struct gpuctl_snapshot *snap, unsigned flags, uint64_t want_fields);

#endif /* GPUCTL_NVML_LOADER_H */
