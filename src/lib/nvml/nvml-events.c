// SPDX-License-Identifier: MIT
/*
 * nvml-events.c: NVML's XID events (nvml_xid_events_*), returned raw for health/xid-watch.c to
 * decode.
 *
 * Decisions:
 * - One event set for the snapshot's GPUs; each registers XID events where it supports them
 *   (mask & nvmlDeviceGetSupportedEventTypes). NOT_SUPPORTED on a GPU leaves the set usable; a
 *   set no GPU could join is -EOPNOTSUPP, so the caller falls back to the kernel log.
 * - The snapshot index of an event is found by comparing its device handle with the handles
 *   taken here (NVML index == snapshot index); an event of a device not in the set, or of
 *   another type, is no event of this set (0).
 * - eventData is returned as NVML gave it: what it means is xid-watch.c's business.
 * - GPU_IS_LOST from the wait is reported as -ENODEV: the caller takes a snapshot, which marks
 *   the one lost GPU (instead of fencing every GPU as Kubernetes' device plugin does).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "ctx.h"
#include "nvml-abi.h"
#include "nvml-internal.h"
#include "nvml-loader.h"
#include "snapshot-internal.h"

struct nvml_xid_events {
	struct nvml *nv;       /* the context's NVML (borrowed) */
	nvmlEventSet_t set;    /* owned */
	nvmlDevice_t *handles; /* per snapshot index, NULL when not registered */
	size_t n;              /* entries in handles */
};

int nvml_xid_events_new(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                        struct nvml_xid_events **ret_events)
{
	struct nvml_xid_events *w;
	struct nvml *nv = ctx->nvml;
	size_t joined = 0;
	nvmlReturn_t r;

	if (!nv)
		return ctx_error(ctx, -EINVAL, "NVML is not loaded");
	if (!nv->sym.event_set_create || !nv->sym.register_events || !nv->sym.event_set_wait ||
	    !nv->sym.event_set_free)
		return ctx_error(ctx, -EOPNOTSUPP, "this NVML library has no event API");
	w = calloc(1, sizeof(*w));
	if (!w || !(w->handles = calloc(snap->n_gpus ? snap->n_gpus : 1, sizeof(*w->handles)))) {
		free(w);
		return ctx_error(ctx, -ENOMEM, "out of memory");
	}
	w->nv = nv;
	w->n = snap->n_gpus;
	nvml_call_begin(ctx, nv->name.event_set_create, NVML_CALL_NO_GPU, NULL);
	r = nvml_call_end(ctx, nv->sym.event_set_create(&w->set));
	if (r != NVML_SUCCESS) {
		const char *s = nv->sym.error_string(r);
		nvml_xid_events_free(w);
		return ctx_error(ctx, r == NVML_ERROR_NOT_SUPPORTED ? -EOPNOTSUPP : -EIO,
		                 "nvmlEventSetCreate: %s", s ? s : "unknown error");
	}
	for (size_t i = 0; i < snap->n_gpus; i++) {
		unsigned long long types = NVML_EVENT_TYPE_XID_CRITICAL_ERROR, supported = 0;
		nvmlDevice_t dev = NULL;

		const char *bus = gpuctl_gpu_str(&snap->gpus[i], GPUCTL_F_PCI_BUS_ID);

		if (snap->gpus[i].lost)
			continue;
		nvml_call_begin(ctx, nv->name.handle_by_index, i, bus);
		if (nvml_call_end(ctx, nv->sym.handle_by_index((unsigned)i, &dev)) != NVML_SUCCESS)
			continue;
		if (nv->sym.supported_events) {
			nvml_call_begin(ctx, nv->name.supported_events, i, bus);
			if (nvml_call_end(ctx, nv->sym.supported_events(dev, &supported)) ==
			    NVML_SUCCESS)
				types &= supported;
		}
		if (!types)
			continue;
		nvml_call_begin(ctx, nv->name.register_events, i, bus);
		r = nvml_call_end(ctx, nv->sym.register_events(dev, types, w->set));
		if (r == NVML_SUCCESS) {
			w->handles[i] = dev;
			joined++;
		} else if (r != NVML_ERROR_NOT_SUPPORTED) {
			ctx_log(ctx, GPUCTL_LOG_WARNING,
			        "nvmlDeviceRegisterEvents: NVML error %d on GPU %zu", (int)r, i);
			if (r == NVML_ERROR_UNKNOWN) /* NVML: the set must be freed */
				break;
		}
	}
	if (joined == 0) {
		nvml_xid_events_free(w);
		return ctx_error(ctx, -EOPNOTSUPP, "no GPU delivers XID events through NVML");
	}
	*ret_events = w;
	return 0;
}

void nvml_xid_events_free(struct nvml_xid_events *events)
{
	if (!events)
		return;
	if (events->set && events->nv->sym.event_set_free)
		(void)events->nv->sym.event_set_free(events->set);
	free(events->handles);
	free(events);
}

int nvml_xid_events_wait(struct gpuctl_ctx *ctx, struct nvml_xid_events *events,
                         unsigned timeout_ms, struct nvml_xid_event *ret_event)
{
	nvmlEventData_t data = {0};
	nvmlReturn_t r;

	r = events->nv->sym.event_set_wait(events->set, &data, timeout_ms);
	if (r == NVML_ERROR_TIMEOUT)
		return 0;
	if (r == NVML_ERROR_GPU_IS_LOST)
		return ctx_error(ctx, -ENODEV, "nvmlEventSetWait_v2: a GPU is lost");
	if (r != NVML_SUCCESS) {
		const char *s = events->nv->sym.error_string(r);
		return ctx_error(ctx, -EIO, "nvmlEventSetWait_v2: %s", s ? s : "unknown error");
	}
	if (!(data.eventType & NVML_EVENT_TYPE_XID_CRITICAL_ERROR))
		return 0;
	for (size_t i = 0; i < events->n; i++)
		if (events->handles[i] && events->handles[i] == data.device) {
			*ret_event = (struct nvml_xid_event){.gpu = i, .data = data.eventData};
			return 1;
		}
	return 0;
}
