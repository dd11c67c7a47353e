// SPDX-License-Identifier: MIT
/*
 * xid-watch.c: XID events from NVML as they happen (gpuctl_xid_watch_*): the raw events the
 * loader's event set returns (nvml_xid_events_*, nvml-events.c), decoded into a gpuctl_xid_log.
 *
 * Decisions:
 * - The loader owns every NVML call (creating the set, registering, waiting) and returns the
 *   GPU's snapshot index and NVML's raw event data; what the data means is decided here, above
 *   it, so the loader never calls the XID log.
 * - An event value above 99999 is no XID code (codes have at most five digits, as the kernel-log
 *   reader and the health state file also hold): it is recorded as 999, NVML's own "an XID it
 *   cannot name", which the health rules treat as an unknown XID (WARN), never dropped.
 * - Every event is recorded with the text "NVML event": NVML gives no message, and the text
 *   says where the XID came from next to the kernel log's lines.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "ctx.h"
#include "nvml-loader.h"
#include "snapshot-internal.h"

#define XID_MAX     99999u /* the largest XID code */
#define XID_UNNAMED 999u   /* NVML's code for an XID it cannot name */

struct gpuctl_xid_watch {
	struct nvml_xid_events *events; /* the loader's event set, owned */
};

/* The XID an event's data stands for. */
static unsigned xid_of(uint64_t data)
{
	return data > XID_MAX ? XID_UNNAMED : (unsigned)data;
}

int gpuctl_xid_watch_new(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                         struct gpuctl_xid_watch **ret_watch)
{
	_cleanup_free_ struct gpuctl_xid_watch *w = NULL;
	int r;

	if (!snap)
		return ctx_error(ctx, -EINVAL, "no snapshot");
	r = gpuctl_nvml_load(ctx);
	if (r < 0)
		return r;
	w = calloc(1, sizeof(*w));
	if (!w)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	r = nvml_xid_events_new(ctx, snap, &w->events);
	if (r < 0)
		return r;
	*ret_watch = TAKE_PTR(w);
	return 0;
}

void gpuctl_xid_watch_free(struct gpuctl_xid_watch *watch)
{
	if (!watch)
		return;
	nvml_xid_events_free(watch->events);
	free(watch);
}

int gpuctl_xid_watch_wait(struct gpuctl_ctx *ctx, struct gpuctl_xid_watch *watch,
                          unsigned timeout_ms, struct gpuctl_xid_log *log)
{
	struct nvml_xid_event ev;
	int r;

	if (!watch || !log)
		return ctx_error(ctx, -EINVAL, "no watch or no log");
	r = nvml_xid_events_wait(ctx, watch->events, timeout_ms, &ev);
	if (r <= 0)
		return r;
	r = gpuctl_xid_log_add(log, ev.gpu, xid_of(ev.data), "NVML event");
	if (r < 0)
		return ctx_error(ctx, r, "out of memory");
	return 1;
}
