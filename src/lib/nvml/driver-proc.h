/* SPDX-License-Identifier: MIT */
/*
 * driver-proc.h: what the NVIDIA driver's /proc files tell a snapshot that NVML cannot
 * (driver-proc.c says the decisions).
 */
#ifndef GPUCTL_DRIVER_PROC_H
#define GPUCTL_DRIVER_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuctl/context.h"
#include "snapshot-internal.h"

/* Gives each lost GPU of snap that has no PCI bus id the bus id of the driver's
 * gpus/<bus id>/information file that no other GPU of snap has, when that is unambiguous
 * (as many such files as such GPUs, in the PCI order of NVML's indices). The directory is
 * $GPUCTL_NVIDIA_PROC, else /proc/driver/nvidia. Never fails: what cannot be read or matched
 * leaves the bus id unknown (said at debug level); -ENOMEM only. */
int driver_proc_lost_bus_ids(struct gpuctl_ctx *ctx, struct gpuctl_snapshot *snap);

/* The "Bus Location:" line of an information file's text[0..len) (not NUL-terminated) as one
 * number ordered as NVML orders GPUs (domain << 16 | bus << 8 | device << 3 | function); false
 * when there is none or it is not "domain:bus:device.function" in hex. */
bool driver_proc_bus_location(const char *text, size_t len, uint64_t *ret_bus);
/* Minor numbers are below 2^20 (the kernel's MINORBITS, include/linux/kdev_t.h). */
#define DRIVER_PROC_MINOR_LIMIT (1u << 20)
/* The "Device Minor:" line of an information file's text[0..len): N of /dev/nvidiaN, decimal,
 * below DRIVER_PROC_MINOR_LIMIT; false otherwise. */
bool driver_proc_device_minor(const char *text, size_t len, uint32_t *ret_minor);
/* The device minor of each of the n GPUs at bus ids buses[] (driver_proc_bus_location's
 * numbers) from the driver's information files ($GPUCTL_NVIDIA_PROC, else
 * /proc/driver/nvidia): minors[i], UINT32_MAX when no readable file has that bus. 0, or the
 * -errno of the directory's open. */
int driver_proc_minors(const uint64_t *buses, size_t n, uint32_t *minors);
/* A bus id in any of NVML's spellings as driver_proc_bus_location's number; false if not one. */
bool driver_proc_bus_parse(const char *s, uint64_t *ret_bus);
/* bus in NVML's spelling, "00000000:4E:00.0". */
void driver_proc_bus_text(uint64_t bus, char *buf, size_t size);

#endif
