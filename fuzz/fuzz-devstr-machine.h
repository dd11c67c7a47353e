// SPDX-License-Identifier: MIT
/*
 * fuzz-devstr-machine.h: the synthetic machine both device-string fuzzers parse against: six
 * GPUs with shared UUID prefixes (ambiguous prefixes), one without a UUID, two in MIG mode
 * with three MIG devices, and compute capabilities and clocks that make FASTEST_FIRST differ
 * from PCI order. Built with snapshot-internal.h, no NVML.
 */
#ifndef GPUCTL_FUZZ_DEVSTR_MACHINE_H
#define GPUCTL_FUZZ_DEVSTR_MACHINE_H

#include <stdint.h>
#include <stdlib.h>

#include "gpuctl/gpuctl.h"
#include "snapshot-internal.h"

#define N_GPUS 6

static void set_gpu(struct gpuctl_snapshot *s, size_t i, const char *uuid, const char *bus,
                    const char *cc, int64_t clock, int mig_mode)
{
	if ((uuid && snapshot_set_str(s, i, GPUCTL_F_UUID, uuid) < 0) ||
	    snapshot_set_str(s, i, GPUCTL_F_PCI_BUS_ID, bus) < 0 ||
	    snapshot_set_str(s, i, GPUCTL_F_COMPUTE_CAP, cc) < 0 ||
	    snapshot_set_int(s, i, GPUCTL_F_CLOCK_SM_MAX, clock) < 0 ||
	    snapshot_set_int(s, i, GPUCTL_F_MIG_MODE, mig_mode) < 0)
		abort();
}

static void add_mig(struct gpuctl_snapshot *s, size_t g, const char *uuid, int gi)
{
	struct gpuctl_mig *m = snapshot_add_mig(s, g);

	if (!m || mig_set_strs(m, uuid, "1g.5gb") < 0)
		abort();
	mig_set_int(m, GPUCTL_MIG_GI, gi);
	mig_set_int(m, GPUCTL_MIG_CI, 0);
}

static struct gpuctl_snapshot *fixture(void)
{
	struct gpuctl_snapshot *s = snapshot_new_empty(N_GPUS, GPUCTL_SNAP_MIG);

	if (!s)
		abort();
	set_gpu(s, 0, "GPU-12ab0000-1111-2222-3333-444444444444", "00000000:07:00.0", "6.1", 1721,
	        0);
	set_gpu(s, 1, "GPU-1234aaaa-1111-2222-3333-444444444444", "00000000:0F:00.0", "8.6", 2100,
	        0);
	set_gpu(s, 2, "GPU-1234bbbb-1111-2222-3333-444444444444", "00000000:47:00.0", "8.0", 1410,
	        1);
	set_gpu(s, 3, NULL, "00000000:4E:00.0", "9.0", 1980, 0);
	set_gpu(s, 4, "GPU-abcdef01-1111-2222-3333-444444444444", "00000000:87:00.0", "8.0", 1410,
	        1);
	set_gpu(s, 5, "GPU-abcdef02-1111-2222-3333-444444444444", "00000000:90:00.0", "10.0", 1000,
	        0);
	add_mig(s, 2, "MIG-aaaa0000-1111-2222-3333-444444444444", 1);
	add_mig(s, 2, "MIG-aaaa0001-1111-2222-3333-444444444444", 2);
	add_mig(s, 4, "MIG-bbbb0000-1111-2222-3333-444444444444", 7);
	return s;
}

#endif /* GPUCTL_FUZZ_DEVSTR_MACHINE_H */
