/* SPDX-License-Identifier: MIT */
/*
 * driver-proc.h: what the NVIDIA driver's /proc files tell a snapshot that NVML cannot
 * (driver-proc.c says the decisions).
 */
#ifndef GPUCTL_DRIVER_PROC_H
#define GPUCTL_DRIVER_PROC_H

#include "gpuctl/context.h"
#include "snapshot-internal.h"

/* Gives each lost GPU of snap that has no PCI bus id the bus id of the driver's
 * gpus/<bus id>/information file that no other GPU of snap has, when that is unambiguous
 * (as many such files as such GPUs, in the PCI order of NVML's indices). The directory is
 * $GPUCTL_NVIDIA_PROC, else /proc/driver/nvidia. Never fails: what cannot be read or matched
 * leaves the bus id unknown (said at debug level); -ENOMEM only. */
int driver_proc_lost_bus_ids(struct gpuctl_ctx *ctx, struct gpuctl_snapshot *snap);

#endif
