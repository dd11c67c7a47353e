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

#endif /* GPUCTL_NVML_LOADER_H */
