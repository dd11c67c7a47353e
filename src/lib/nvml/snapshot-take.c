// SPDX-License-Identifier: MIT
/*
 * snapshot-take.c: taking a snapshot: which fields to read, the NVML loader's reading, and what
 * the model derives from what was read.
 *
 * Decisions:
 * - This is the only code that asks the loader (nvml-read.c) for a snapshot. The loader reads
 *   facts and returns; the facts derived from them (the pair bandwidth, topo.c) are filled here,
 *   after it, so the loader never calls the code that interprets the model.
 * - The caller names the fields it shows; only those are read, plus what identifies a GPU
 *   (ALWAYS_READ) and what the asked groups depend on (implied_fields).
 * - A refresh re-reads what changes into a copy of the previous snapshot; pair facts are not
 *   refreshed (a caller that needs them takes a snapshot).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpuinfo.h"
#include "ctx.h"
#include "driver-proc.h"
#include "nvml-loader.h"
#include "snapshot-internal.h"

#define FBIT(f) (UINT64_C(1) << (f))
#define KNOWN_FLAGS                                                                                \
	(GPUCTL_SNAP_ALL | GPUCTL_SNAP_NO_RATE_COUNTERS | GPUCTL_SNAP_NO_PROC_IDENTITY |           \
	 GPUCTL_SNAP_NVLINK_STATE | GPUCTL_SNAP_ONLY_FIELDS | GPUCTL_SNAP_NO_SYSTEM)
_Static_assert(GPUCTL__F_COUNT <= 64, "the field set is one 64-bit mask");

/* The per-GPU fields every snapshot reads: they identify a GPU to people, to -i and to the
 * pair matching of NVLink peers. */
#define ALWAYS_READ                                                                                \
	(FBIT(GPUCTL_F_INDEX) | FBIT(GPUCTL_F_UUID) | FBIT(GPUCTL_F_PCI_BUS_ID) |                  \
	 FBIT(GPUCTL_F_NAME))

/* Fields a group of reads depends on: health rules need the ECC mode, the MIG mode (the
 * nvlink-down check skips MIG GPUs) and the utilisation, which says a GPU is not in MIG mode
 * without the MIG mode's call (read_modes in nvml-device.c), the same in every command so that
 * their verdicts stay one (docs/health.md); the architecture they need is asked by
 * nvml_read_health only where the field values do not tell whether the GPU remaps rows. The
 * bandwidth model needs the architecture, the PCIe maximums and the GPU's own NUMA node (a GPU
 * attached by NVLink-C2C); MIG needs the mode. */
static uint64_t implied_fields(unsigned flags)
{
	uint64_t m = ALWAYS_READ;

	/* only the listed fields: the index needs no call; the pair matching needs bus ids */
	if ((flags & GPUCTL_SNAP_ONLY_FIELDS) && !(flags & GPUCTL_SNAP_TOPOLOGY))
		m = FBIT(GPUCTL_F_INDEX);

	if (flags & GPUCTL_SNAP_HEALTH)
		m |= FBIT(GPUCTL_F_ECC_MODE) | FBIT(GPUCTL_F_UTIL_GPU) | FBIT(GPUCTL_F_MIG_MODE);
	/* the PCIe generation only budgets the replay rate, which needs an earlier sample */
	if ((flags & GPUCTL_SNAP_HEALTH) && !(flags & GPUCTL_SNAP_NO_RATE_COUNTERS))
		m |= FBIT(GPUCTL_F_PCIE_GEN);
	if (flags & GPUCTL_SNAP_TOPOLOGY)
		m |= FBIT(GPUCTL_F_ARCHITECTURE) | FBIT(GPUCTL_F_COMPUTE_CAP) |
		     FBIT(GPUCTL_F_PCIE_GEN_MAX) | FBIT(GPUCTL_F_PCIE_WIDTH_MAX) |
		     FBIT(GPUCTL_F_GPU_NUMA_NODE);
	if (flags & GPUCTL_SNAP_MIG)
		m |= FBIT(GPUCTL_F_MIG_MODE);
	return m;
}

int gpuctl_snapshot_take_fields(struct gpuctl_ctx *ctx, unsigned flags,
                                const enum gpuctl_field *fields, size_t n_fields,
                                struct gpuctl_snapshot **ret_snap)
{
	struct gpuctl_snapshot *snap = NULL;
	uint64_t want = 0;
	int r;

	if (!ctx || !ret_snap || (!fields && n_fields))
		return -EINVAL;
	if (flags & ~(unsigned)KNOWN_FLAGS)
		return ctx_error(ctx, -EINVAL, "unknown snapshot flags 0x%x",
		                 flags & ~(unsigned)KNOWN_FLAGS);
	if (!fields) {
		flags &= ~(unsigned)GPUCTL_SNAP_ONLY_FIELDS; /* every field is listed */
		/* every field but the PCIe rates: NVML measures each over 20 ms while the caller
		 * waits, so only a caller that shows them asks for them */
		want = ~(FBIT(GPUCTL_F_PCIE_RX) | FBIT(GPUCTL_F_PCIE_TX));
	} else {
		for (size_t k = 0; k < n_fields; k++) {
			const struct gpuctl_field_info *fi = gpuctl_field_info(fields[k]);

			if (!fi)
				return ctx_error(ctx, -EINVAL, "unknown field id %d",
				                 (int)fields[k]);
			want |= FBIT(fields[k]);
			flags |= fi->snap_flag; /* a health field needs the health reads */
		}
	}
	if (flags & GPUCTL_SNAP_PROC_UTIL)
		flags |= GPUCTL_SNAP_PROCESSES;
	const uint64_t shown = want;
	want |= implied_fields(flags);
	r = gpuctl_nvml_load(ctx);
	if (r < 0)
		return r;
	r = nvml_read_snapshot(ctx, flags, want, shown, &snap);
	if (r < 0)
		return r;
	/* the CPU is no NVML fact: read here, with the pair facts it qualifies */
	if (flags & GPUCTL_SNAP_TOPOLOGY) {
		int rc = cpu_info_read(NULL, &snap->cpu);
		const char *env = getenv("GPUCTL_CPUINFO");

		if (rc == -EPERM) {
			gpuctl_snapshot_free(snap);
			return ctx_error(ctx, rc, "%s '%s': not a regular file",
			                 env && env[0] ? "GPUCTL_CPUINFO" : "cpuinfo",
			                 env && env[0] ? env : "/proc/cpuinfo");
		}
		if (rc < 0)
			ctx_log_once(ctx, "cpuinfo", GPUCTL_LOG_DEBUG,
			             "cannot read the CPU model (%s): the bandwidth model takes "
			             "the default CPU",
			             strerror(-rc));
	}
	/* a lost GPU's bus id, which NVML no longer gives, from the driver's list */
	if (driver_proc_lost_bus_ids(ctx, snap) < 0) {
		gpuctl_snapshot_free(snap);
		return ctx_error(ctx, -ENOMEM, "out of memory");
	}
	/* the loader reads facts; what the model derives from them is filled here */
	topo_fill_bandwidth(snap);
	snap->want = want;
	*ret_snap = snap;
	return 0;
}

/* NVLink states are kept from prev (snapshot_copy_for_refresh), not read again: a refresh
 * reads what changes every sample, within watch's budget */
#define REFRESHABLE                                                                                \
	(GPUCTL_SNAP_PROCESSES | GPUCTL_SNAP_PROC_UTIL | GPUCTL_SNAP_HEALTH | GPUCTL_SNAP_MIG |    \
	 GPUCTL_SNAP_NO_PROC_IDENTITY | GPUCTL_SNAP_NVLINK_STATE | GPUCTL_SNAP_NO_RATE_COUNTERS)

int gpuctl_snapshot_refresh(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *prev,
                            unsigned flags, const enum gpuctl_field *fields, size_t n_fields,
                            struct gpuctl_snapshot **ret_snap)
{
	struct gpuctl_snapshot *snap;
	uint64_t want = 0;
	int r;

	if (!ctx || !prev || !ret_snap || (!fields && n_fields))
		return -EINVAL;
	if (flags & ~(unsigned)REFRESHABLE)
		return ctx_error(ctx, -EINVAL, "snapshot flags 0x%x cannot be refreshed",
		                 flags & ~(unsigned)REFRESHABLE);
	if (flags & GPUCTL_SNAP_PROC_UTIL)
		flags |= GPUCTL_SNAP_PROCESSES;
	for (size_t k = 0; k < n_fields; k++) {
		const struct gpuctl_field_info *fi = gpuctl_field_info(fields[k]);

		if (!fi)
			return ctx_error(ctx, -EINVAL, "unknown field id %d", (int)fields[k]);
		want |= FBIT(fields[k]);
		flags |= fi->snap_flag;
	}
	/* what the reads depend on (ECC mode, architecture), where prev did not read it */
	const uint64_t shown = want;
	want |= implied_fields(flags) & ~prev->want;
	r = gpuctl_nvml_load(ctx);
	if (r < 0)
		return r;
	snap = snapshot_copy_for_refresh(prev, flags, want);
	if (!snap)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	snap->want = prev->want | want;
	/* no pair facts (REFRESHABLE has no GPUCTL_SNAP_TOPOLOGY, the copy no pair matrix), so
	 * no bandwidth to derive after this read */
	r = nvml_refresh_snapshot(ctx, prev, snap, flags, want, shown);
	if (r >= 0 && driver_proc_lost_bus_ids(ctx, snap) < 0)
		r = ctx_error(ctx, -ENOMEM, "out of memory");
	if (r < 0) {
		gpuctl_snapshot_free(snap);
		return r;
	}
	*ret_snap = snap;
	return 0;
}

int gpuctl_snapshot_take(struct gpuctl_ctx *ctx, unsigned flags, struct gpuctl_snapshot **ret_snap)
{
	return gpuctl_snapshot_take_fields(ctx, flags, NULL, 0, ret_snap);
}
