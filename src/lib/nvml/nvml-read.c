// SPDX-License-Identifier: MIT
/*
 * nvml-read.c: reading a snapshot (nvml_read_snapshot) and refreshing one
 * (nvml_refresh_snapshot): the system's facts, then GPU by GPU each reader's part, then the
 * pairs.
 *
 * Decisions:
 * - The loader reads and returns: it fills a snapshot with the facts NVML gives (through
 *   snapshot-internal.h's setters) and calls nothing that interprets them. What is derived from
 *   the facts (the pair bandwidth, topo.c) is filled by whoever assembles the snapshot
 *   (snapshot-take.c); XID events are returned raw (nvml-events.c).
 * - Nothing is read twice in one snapshot, and calls that cannot succeed are not made (each
 *   reader says which). The handles are kept on the context for the refreshes that follow.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "ctx.h"
#include "nvml-abi.h"
#include "nvml-internal.h"
#include "nvml-loader.h"
#include "snapshot-internal.h"
#include "util.h"

static void read_system(struct reader *rd)
{
	char drv[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = "";
	char ver[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE] = "";
	int cuda;

	if (!CALL(rd, NVML_SYSTEM_SCOPE, driver_version, drv, sizeof(drv)))
		drv[0] = '\0';
	if (!CALL(rd, NVML_SYSTEM_SCOPE, nvml_version, ver, sizeof(ver)))
		ver[0] = '\0';
	if (snapshot_set_system(rd->snap, drv[0] ? drv : NULL, ver[0] ? ver : NULL) < 0)
		rd->oom = -ENOMEM;
	if (CALL(rd, NVML_SYSTEM_SCOPE, cuda_version, &cuda))
		snapshot_set_cuda_version(rd->snap, cuda);
}

/* GPU i's facts, reader by reader, in the order they depend on each other: the identity (the
 * PCI bus id every later call in flight names), the state (the ECC and MIG modes), the health
 * facts (after the ECC mode), placement, processes and their shares, MIG devices. */
static void read_gpu_facts(struct reader *rd, size_t i, nvmlDevice_t dev, unsigned flags)
{
	nvml_read_identity(rd, i, dev);
	nvml_read_state(rd, i, dev);
	if (flags & GPUCTL_SNAP_HEALTH)
		nvml_read_health(rd, i, dev);
	nvml_read_placement(rd, i, dev);
	if (flags & GPUCTL_SNAP_PROCESSES)
		nvml_read_processes(rd, i, dev);
	if (flags & GPUCTL_SNAP_PROC_UTIL)
		nvml_read_process_util(rd, i, dev);
	if (flags & GPUCTL_SNAP_MIG)
		nvml_read_migs(rd, i, dev);
}

static void read_gpu(struct reader *rd, size_t i, unsigned flags)
{
	nvmlDevice_t dev = NULL;
	nvmlReturn_t r = RAW(rd, i, handle_by_index, (unsigned)i, &dev);

	/* no handle: every field asked for is unreadable */
	rd->reading = rd->want;
	if (!nvml_read_done(rd, nvml_check_result(rd, i, rd->nv->name.handle_by_index, r, false)) ||
	    !dev)
		return;
	rd->handles[i] = dev;
	read_gpu_facts(rd, i, dev, flags);
	/* the link states alone (with topology, nvml_read_topology walks the links) */
	if ((flags & GPUCTL_SNAP_NVLINK_STATE) && !(flags & GPUCTL_SNAP_TOPOLOGY))
		nvml_read_nvlinks(rd, i, dev, NULL);
}

/* The number of GPUs NVML sees (nvmlDeviceGetCount); -EINVAL when NVML is not loaded, -EIO when
 * it cannot count them. */
static int count_gpus(struct reader *rd, unsigned *ret_count)
{
	unsigned count = 0;
	nvmlReturn_t r;

	if (!rd->nv)
		return ctx_error(rd->ctx, -EINVAL, "NVML is not loaded");
	r = RAW(rd, NVML_SYSTEM_SCOPE, device_count, &count);
	if (r != NVML_SUCCESS) {
		const char *s = rd->nv->sym.error_string(r);
		return ctx_error(rd->ctx, -EIO, "%s: %s", rd->nv->name.device_count,
		                 s ? s : "unknown error");
	}
	*ret_count = count;
	return 0;
}

int nvml_read_snapshot(struct gpuctl_ctx *ctx, unsigned flags, uint64_t want_fields,
                       uint64_t shown_fields, struct gpuctl_snapshot **ret_snap)
{
	struct reader rd = {.ctx = ctx,
	                    .nv = ctx->nvml,
	                    .want = want_fields,
	                    .shown = shown_fields,
	                    .flags = flags};
	_cleanup_free_ nvmlDevice_t *handles = NULL;
	struct facts_cache *facts = NULL;
	struct gpuctl_snapshot *snap;
	unsigned count = 0;
	int e;

	e = count_gpus(&rd, &count);
	if (e < 0)
		return e;
	handles = calloc(count ? count : 1, sizeof(*handles));
	snap = snapshot_new_empty(count, flags);
	if (!handles || !snap) {
		gpuctl_snapshot_free(snap);
		return ctx_error(ctx, -ENOMEM, "out of memory");
	}
	rd.snap = snap;
	rd.handles = handles;
	if (flags & (GPUCTL_SNAP_TOPOLOGY | GPUCTL_SNAP_NVLINK_STATE)) {
		rd.nvlink_count = malloc((count ? count : 1) * sizeof(*rd.nvlink_count));
		if (!rd.nvlink_count) {
			gpuctl_snapshot_free(snap);
			return ctx_error(ctx, -ENOMEM, "out of memory");
		}
		for (size_t i = 0; i < count; i++)
			rd.nvlink_count[i] = -2;
		/* zeroed: no link's state read yet */
		rd.link_states = calloc(count ? count : 1, sizeof(*rd.link_states));
		if (!rd.link_states) {
			free(rd.nvlink_count);
			gpuctl_snapshot_free(snap);
			return ctx_error(ctx, -ENOMEM, "out of memory");
		}
	}

	if (!(flags & GPUCTL_SNAP_NO_SYSTEM))
		read_system(&rd);
	/* the facts cache is found by UUID */
	if (want_fields & FBIT(GPUCTL_F_UUID))
		rd.facts = facts = facts_cache_load(ctx);
	for (size_t i = 0; i < count; i++)
		read_gpu(&rd, i, flags);
	if (flags & GPUCTL_SNAP_TOPOLOGY)
		nvml_read_topology(&rd);
	if ((want_fields & FBIT(GPUCTL_F_UUID)) && rd.oom >= 0)
		facts_cache_update(ctx, facts, snap);
	facts_cache_free(facts);
	free(rd.nvlink_count);
	free(rd.link_states);
	if (rd.oom < 0) {
		gpuctl_snapshot_free(snap);
		return ctx_error(ctx, -ENOMEM, "out of memory");
	}
	ctx_log(ctx, GPUCTL_LOG_DEBUG, "nvml: snapshot of %u GPUs took %u NVML calls", count,
	        rd.calls);
	/* Handles stay valid until nvmlShutdown: gpuctl_snapshot_refresh reuses them. */
	free(rd.nv->handles);
	rd.nv->handles = TAKE_PTR(handles);
	rd.nv->n_handles = count;
	*ret_snap = snap;
	return 0;
}

/* The fields prev asked of GPU i and did not get although none of its calls failed: NVML
 * said NOT_SUPPORTED (or the like) for them, which holds until the driver reloads, so a
 * refresh does not ask again. With a failed call among them they are all asked again. */
static uint64_t known_unavailable(const struct gpuctl_snapshot *prev, size_t i)
{
	const struct gpuctl_gpu *g = &prev->gpus[i];
	uint64_t missing = 0;

	if (g->nvml_errors > 0 || g->nvml_not_ready > 0 || g->lost)
		return 0;
	for (size_t f = 0; f < GPUCTL__F_COUNT; f++)
		if (!g->valid[f])
			missing |= UINT64_C(1) << f;
	return missing & prev->want;
}

int nvml_refresh_snapshot(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *prev,
                          struct gpuctl_snapshot *snap, unsigned flags, uint64_t want_fields,
                          uint64_t shown_fields)
{
	struct reader rd = {.ctx = ctx,
	                    .nv = ctx->nvml,
	                    .snap = snap,
	                    .want = want_fields,
	                    .shown = shown_fields,
	                    .flags = flags};
	unsigned count = 0;
	nvmlReturn_t r;
	int e;

	/* One call guards everything kept: NVML still answers, and the GPUs are still those the
	 * handles and indices were taken for. */
	e = count_gpus(&rd, &count);
	if (e < 0)
		return e;
	if (count != snap->n_gpus)
		return ctx_error(ctx, -ESTALE, "the number of GPUs changed from %zu to %u",
		                 snap->n_gpus, count);
	if (rd.nv->n_handles != snap->n_gpus) {
		nvmlDevice_t *h = calloc(snap->n_gpus ? snap->n_gpus : 1, sizeof(*h));

		if (!h)
			return ctx_error(ctx, -ENOMEM, "out of memory");
		for (size_t i = 0; i < snap->n_gpus; i++) {
			r = RAW(&rd, i, handle_by_index, (unsigned)i, &h[i]);
			rd.reading = want_fields; /* no handle: every field asked is unreadable */
			if (!nvml_read_done(&rd,
			                    nvml_check_result(&rd, i, rd.nv->name.handle_by_index,
			                                      r, false)))
				h[i] = NULL;
		}
		free(rd.nv->handles);
		rd.nv->handles = h;
		rd.nv->n_handles = snap->n_gpus;
	}
	rd.handles = rd.nv->handles;
	for (size_t i = 0; i < snap->n_gpus; i++) {
		nvmlDevice_t dev = rd.handles[i];

		if (!nvml_gpu_readable(&rd, i))
			continue;
		rd.want = want_fields & ~known_unavailable(prev, i);
		read_gpu_facts(&rd, i, dev, flags); /* each read only when asked for */
	}
	if (rd.oom < 0)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	ctx_log(ctx, GPUCTL_LOG_DEBUG, "nvml: refresh of %zu GPUs took %u NVML calls", snap->n_gpus,
	        rd.calls);
	return 0;
}
