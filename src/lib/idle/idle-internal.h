/* SPDX-License-Identifier: MIT */
/*
 * idle-internal.h: the plain facts of one sample that the idle tracker judges, so unit tests
 * replay traces without a snapshot (tests/unit/test-idle.c). Not part of the public API.
 */
#ifndef GPUCTL_IDLE_INTERNAL_H
#define GPUCTL_IDLE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <gpuctl/idle.h>

/* One compute process NVML lists on a device. */
struct idle_proc_fact {
	uint32_t pid;   /* as NVML gives it */
	int64_t memory; /* bytes it uses; -1 unknown (counts as holding memory) */
	int sm;         /* its SM share, percent; -1 unknown (the device's utilisation is judged) */
	bool alive;     /* /proc shows the pid */
};

/* One device (GPU or MIG device) in one sample; a device not lost. */
struct idle_fact {
	const char *uuid;                   /* GPU-... or MIG-...; borrowed for the call */
	int util;                           /* utilisation percent; -1 unknown */
	int64_t memory_used;                /* bytes; -1 unknown */
	bool leased;                        /* a HELD or SHARED lease on this device */
	const struct idle_proc_fact *procs; /* the processes on this device */
	size_t n_procs;
};

/* The pure step of gpuctl_idle_feed: the devices of one sample at now_ms. Devices of the last
 * sample that facts lack are forgotten. 0 or -ENOMEM (state unchanged). */
int idle_feed_facts(struct gpuctl_idle *idle, uint64_t now_ms, const struct idle_fact *facts,
                    size_t n);

#endif /* GPUCTL_IDLE_INTERNAL_H */
