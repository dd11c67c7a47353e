/* SPDX-License-Identifier: MIT */
/* nvml-loader.h: what the NVML loader (nvml-*.c) offers the rest of libgpuctl (nothing here
 * names an NVML type). */
#ifndef GPUCTL_NVML_LOADER_H
#define GPUCTL_NVML_LOADER_H

#include "ctx.h"
#include "snapshot-internal.h"

/* Reads the machine into a new snapshot (NVML must be loaded): the groups in flags and, of the
 * per-GPU fields, those in want_fields (bit 1 << field; the caller adds the fields the reading
 * itself depends on); shown_fields: those the caller named (the others are read for what
 * depends on them, and may be known without their own call). -ENOMEM, -EIO when NVML cannot
 * even count the GPUs; per-field and per-GPU trouble never fails the snapshot. */
int nvml_read_snapshot(struct gpuctl_ctx *ctx, unsigned flags, uint64_t want_fields,
                       uint64_t shown_fields, struct gpuctl_snapshot **ret_snap);

/* Re-reads into snap (a snapshot_copy_for_refresh() of prev, with the fields in want_fields
 * dropped) those fields of every GPU that is not lost, and the processes when flags asks for
 * them. A field prev asked for and NVML did not support on a GPU is not asked again. Handles
 * come from the context's cache, filled by the last nvml_read_snapshot (looked up by index,
 * and counted, when the cache does not fit). */
int nvml_refresh_snapshot(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *prev,
                          struct gpuctl_snapshot *snap, unsigned flags, uint64_t want_fields,
                          uint64_t shown_fields);

/* NVML's XID events (nvmlEventSet*, nvml-events.c), raw: xid-watch.c decodes them into a
 * gpuctl_xid_log. */
struct nvml_xid_events;

/* One XID event as NVML delivered it. */
struct nvml_xid_event {
	size_t gpu;    /* snapshot index of the GPU it came from (one registered in the set) */
	uint64_t data; /* nvmlEventData_t.eventData, untouched: the XID as NVML reports it */
};

/* A new event set with the XID events of snap's GPUs that are not lost, where NVML supports
 * them (NVML must be loaded). -EOPNOTSUPP when the library has no event API or no GPU could
 * join, -EIO, -ENOMEM. */
int nvml_xid_events_new(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                        struct nvml_xid_events **ret_events);
/* Frees the set (nvmlEventSetFree). Accepts NULL. */
void nvml_xid_events_free(struct nvml_xid_events *events);
/* Waits up to timeout_ms for one event: 1 and *ret_event for an XID event of a GPU of the set;
 * 0 when the time passed or the event was none of those; -ENODEV when NVML reports a GPU lost
 * (which one it does not say); -EIO for other NVML errors. */
int nvml_xid_events_wait(struct gpuctl_ctx *ctx, struct nvml_xid_events *events,
                         unsigned timeout_ms, struct nvml_xid_event *ret_event);

#endif /* GPUCTL_NVML_LOADER_H */
