/* SPDX-License-Identifier: MIT */
/*
 * cpuinfo.h: the host CPU from /proc/cpuinfo and NCCL's per-CPU figures for the bandwidth model
 * (docs/topology.md, "The CPU").
 */
#ifndef GPUCTL_CPUINFO_H
#define GPUCTL_CPUINFO_H

#include <stddef.h>

#include "gpuctl/gpuctl.h"

/* An unknown CPU: the documented default figures (Skylake's, gpuctl's model before it read the
 * CPU). */
void cpu_info_unknown(struct gpuctl_cpu *ret);

/* Reads the first processor's entry of cpuinfo text (len bytes, need not end in NUL) and
 * classifies it. Pure; never fails: what the text does not say stays unknown, and a CPU it
 * cannot place gets the default figures. Fuzzed by fuzz/fuzz-cpuinfo.c. */
void cpu_info_parse(const char *text, size_t len, struct gpuctl_cpu *ret);

/* Reads path (NULL: $GPUCTL_CPUINFO, else /proc/cpuinfo) and parses it. 0, or -errno when the
 * file cannot be read: *ret is then the unknown CPU. -EPERM when it is not a regular file (a
 * FIFO would block the reader for ever), which the caller reports rather than passes over. */
int cpu_info_read(const char *path, struct gpuctl_cpu *ret);

#endif /* GPUCTL_CPUINFO_H */
