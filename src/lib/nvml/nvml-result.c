// SPDX-License-Identifier: MIT
/*
 * nvml-result.c: what the result of an NVML call means for the snapshot being read (the result
 * policy), and the small steps every reader shares: whether a GPU can be asked, the call in
 * flight of a reader's call, the setters of its fields, the architecture (read for the identity,
 * and for the health facts where the field values do not say).
 *
 * Decisions:
 * - "Unavailable" (missing symbol, NOT_SUPPORTED, NOT_FOUND, NO_PERMISSION, FUNCTION_NOT_FOUND,
 *   DEPRECATED) leaves the field's valid bit clear and logs one debug line per (function,
 *   reason) per context. NOT_READY does too, and is not remembered: the field is asked for
 *   again at the next refresh. Neither is an NVML failure of the GPU (health's "nvml" check).
 *   GPU_IS_LOST marks that GPU lost and nothing more is read from it. Any other error leaves
 *   the field unavailable and logs one warning per (function, reason).
 * - PCI bus ids are rebuilt from domain/bus/device in NVML's 8-hex-digit-domain uppercase
 *   form ("00000000:07:00.0"), whatever form the driver version writes into busId.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "ctx.h"
#include "nvml-abi.h"
#include "nvml-internal.h"
#include "snapshot-internal.h"
#include "util.h"

static const char *unavailable_reason(nvmlReturn_t r)
{
	switch (r) {
	case NVML_ERROR_NOT_SUPPORTED:
		return "not supported";
	case NVML_ERROR_NOT_FOUND:
		return "not found";
	case NVML_ERROR_NO_PERMISSION:
		return "no permission";
	case NVML_ERROR_FUNCTION_NOT_FOUND:
		return "not implemented by this driver";
	case NVML_ERROR_DEPRECATED:
		return "deprecated by this driver";
	default:
		return NULL;
	}
}

static const char *where(size_t gpu, char *buf, size_t size)
{
	if (gpu == NVML_SYSTEM_SCOPE)
		return "this system";
	(void)snprintf(buf, size, "GPU %zu", gpu);
	return buf;
}

bool nvml_check_result(struct reader *rd, size_t gpu, const char *fname, nvmlReturn_t r, bool pair)
{
	char key[160], w[32];
	const char *reason;

	if (r == NVML_SUCCESS)
		return true;
	(void)snprintf(key, sizeof(key), "%s:%d", fname, (int)r);
	if (r == NVML_ERROR_GPU_IS_LOST && gpu != NVML_SYSTEM_SCOPE && !pair) {
		snapshot_set_lost(rd->snap, gpu);
		(void)snprintf(key, sizeof(key), "lost:%zu", gpu);
		ctx_log_once(rd->ctx, key, GPUCTL_LOG_WARNING,
		             "GPU %zu is lost (%s: GPU is lost); its other facts are unavailable",
		             gpu, fname);
		return false;
	}
	if (r == NVML_ERROR_NOT_READY) {
		/* The driver has no answer yet (a GPU still initialising, a counter not yet
		 * sampled): no fault of the GPU, and not lasting either, so it is asked again by
		 * the next refresh instead of being remembered as unsupported. */
		ctx_log_once(rd->ctx, key, GPUCTL_LOG_DEBUG, "%s: not ready on %s; shown as N/A",
		             fname, where(gpu, w, sizeof(w)));
		if (gpu != NVML_SYSTEM_SCOPE && !pair && gpu < rd->snap->n_gpus)
			rd->snap->gpus[gpu].nvml_not_ready++;
		return false;
	}
	reason = unavailable_reason(r);
	if (reason) {
		ctx_log_once(rd->ctx, key, GPUCTL_LOG_DEBUG, "%s: %s on %s; shown as N/A", fname,
		             reason, where(gpu, w, sizeof(w)));
		return false;
	}
	const char *s = rd->nv->sym.error_string(r);
	ctx_log_once(rd->ctx, key, GPUCTL_LOG_WARNING, "%s: %s (NVML error %d) on %s; shown as N/A",
	             fname, s ? s : "unknown error", (int)r, where(gpu, w, sizeof(w)));
	/* Recorded on the fields the call was to read (the health check's "nvml" judges those of
	 * its facts); a pair call does not say which of its GPUs failed. */
	if (gpu != NVML_SYSTEM_SCOPE && !pair && gpu < rd->snap->n_gpus) {
		char why[160];

		rd->snap->gpus[gpu].nvml_errors++;
		(void)snprintf(why, sizeof(why), "%s: %s", fname, s ? s : "unknown error");
		if ((rd->reading & rd->want) &&
		    snapshot_set_unreadable(rd->snap, gpu, rd->reading & rd->want, why) < 0)
			rd->oom = -ENOMEM;
		if (rd->reading_nvlink && snapshot_set_nvlink_unreadable(rd->snap, gpu, why) < 0)
			rd->oom = -ENOMEM;
	}
	return false;
}

bool nvml_symbol_missing(struct reader *rd, const char *fname)
{
	char key[160];

	(void)snprintf(key, sizeof(key), "%s:missing", fname);
	ctx_log_once(rd->ctx, key, GPUCTL_LOG_DEBUG, "%s: not in this NVML library; shown as N/A",
	             fname);
	return false;
}

bool nvml_gpu_readable(const struct reader *rd, size_t gpu)
{
	return gpu == NVML_SYSTEM_SCOPE || (rd->handles[gpu] && !rd->snap->gpus[gpu].lost);
}

void nvml_reader_call_begin(const struct reader *rd, size_t gpu, const char *fn)
{
	const char *bus = NULL;

	if (gpu != NVML_SYSTEM_SCOPE && rd->snap && gpu < rd->snap->n_gpus &&
	    rd->snap->gpus[gpu].valid[GPUCTL_F_PCI_BUS_ID])
		bus = rd->snap->gpus[gpu].strs[GPUCTL_F_PCI_BUS_ID];
	nvml_call_begin(rd->ctx, fn, gpu == NVML_SYSTEM_SCOPE ? NVML_CALL_NO_GPU : (uint64_t)gpu,
	                bus);
}

bool nvml_read_done(struct reader *rd, bool ok)
{
	rd->reading = 0;
	return ok;
}

bool nvml_want(const struct reader *rd, enum gpuctl_field f)
{
	return rd->want >> f & 1u;
}

void nvml_set_int(struct reader *rd, size_t gpu, enum gpuctl_field f, int64_t v)
{
	(void)snapshot_set_int(rd->snap, gpu, f, v);
}

void nvml_set_str(struct reader *rd, size_t gpu, enum gpuctl_field f, const char *s)
{
	if (snapshot_set_str(rd->snap, gpu, f, s) == -ENOMEM)
		rd->oom = -ENOMEM;
}

void nvml_format_bus_id(char *buf, size_t size, uint32_t domain, uint32_t bus, uint32_t device)
{
	(void)snprintf(buf, size, "%08X:%02X:%02X.0", domain, bus & 0xff, device & 0x1f);
}

bool nvml_field_is(const struct gpuctl_gpu *g, enum gpuctl_field f, int64_t v)
{
	return g->valid[f] && g->ints[f] == v;
}

static const char *architecture_name(nvmlDeviceArchitecture_t a)
{
	switch (a) {
	case NVML_DEVICE_ARCH_KEPLER:
		return "Kepler";
	case NVML_DEVICE_ARCH_MAXWELL:
		return "Maxwell";
	case NVML_DEVICE_ARCH_PASCAL:
		return "Pascal";
	case NVML_DEVICE_ARCH_VOLTA:
		return "Volta";
	case NVML_DEVICE_ARCH_TURING:
		return "Turing";
	case NVML_DEVICE_ARCH_AMPERE:
		return "Ampere";
	case NVML_DEVICE_ARCH_ADA:
		return "Ada";
	case NVML_DEVICE_ARCH_HOPPER:
		return "Hopper";
	case NVML_DEVICE_ARCH_BLACKWELL:
		return "Blackwell";
	default:
		return NULL;
	}
}

void nvml_read_architecture(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	nvmlDeviceArchitecture_t arch;

	if (READ(rd, i, FBIT(GPUCTL_F_ARCHITECTURE), architecture, dev, &arch) &&
	    architecture_name(arch))
		nvml_set_str(rd, i, GPUCTL_F_ARCHITECTURE, architecture_name(arch));
}

int nvml_arch_rank(const struct gpuctl_gpu *g)
{
	static const char *const order[] = {"Kepler", "Maxwell", "Pascal", "Volta",    "Turing",
	                                    "Ampere", "Ada",     "Hopper", "Blackwell"};
	const char *a = g->valid[GPUCTL_F_ARCHITECTURE] ? g->strs[GPUCTL_F_ARCHITECTURE] : NULL;

	for (size_t k = 0; a && k < ELEMENTSOF(order); k++)
		if (streq(a, order[k]))
			return (int)k + 1;
	return 0;
}
