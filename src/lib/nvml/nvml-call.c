// SPDX-License-Identifier: MIT
/*
 * nvml-call.c: the NVML call in flight on a context (gpuctl_nvml_call_in_flight), written
 * around every call the loader makes (nvml_call_begin, nvml_call_end) and read from any thread.
 *
 * Decisions:
 * - A call that does not return cannot be cancelled, so the library only says which call is in
 *   flight, about which GPU, since when; what to do about it (give up, mark readings stale) is
 *   for another thread of the caller to decide: the CLI's watchdog (src/cli/watchdog.c), a
 *   sampler's owner. The library prints nothing and exits never, here as elsewhere.
 * - Cheap, because every NVML call pays it (the simulator counts NVML calls, bench/ system
 *   calls): a few relaxed atomic stores around the call and one clock_gettime of
 *   CLOCK_MONOTONIC_COARSE (the vDSO: no system call; a few milliseconds coarse, nothing beside
 *   a bound in seconds). No lock, no allocation, no NVML call.
 * - The GPU's PCI bus id is copied from the snapshot being filled when it was read already
 *   (nvmlDeviceGetPciInfo comes early, just after the UUID); a reader never follows a pointer
 *   into a snapshot that the calling thread may free.
 * - Recorded: every call made for a snapshot or a refresh, nvmlInit, the XID event set's
 *   set-up. Not recorded: nvmlErrorString (a table lookup); nvmlEventSetWait, which blocks for
 *   as long as it is asked to; nvmlEventSetFree and nvmlShutdown, made by the _free
 *   functions, which take no context (nvmlShutdown by gpuctl_ctx_free: its context is gone when
 *   it returns, so a caller bounds gpuctl_ctx_free itself if it wants to).
 */
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "ctx.h"
#include "nvml-internal.h"
#include "util.h"

void nvml_call_begin(struct gpuctl_ctx *ctx, const char *fn, uint64_t gpu, const char *bus)
{
	struct ctx_nvml_call *c = &ctx->call;
	/* only this thread writes the record: a relaxed load reads its own last store */
	uint64_t s = atomic_load_explicit(&c->seq, memory_order_relaxed);
	uint64_t b[2] = {0, 0};
	struct timespec ts = {0, 0};

	if (bus)
		memcpy(b, bus, strnlen(bus, sizeof(b)));
	(void)clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	atomic_store_explicit(&c->seq, s + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&c->function, fn, memory_order_relaxed);
	atomic_store_explicit(&c->gpu, gpu, memory_order_relaxed);
	atomic_store_explicit(&c->pci_bus_id[0], b[0], memory_order_relaxed);
	atomic_store_explicit(&c->pci_bus_id[1], b[1], memory_order_relaxed);
	atomic_store_explicit(&c->since_ns, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec,
	                      memory_order_relaxed);
	atomic_store_explicit(&c->seq, s + 2, memory_order_release);
}

nvmlReturn_t nvml_call_end(struct gpuctl_ctx *ctx, nvmlReturn_t r)
{
	struct ctx_nvml_call *c = &ctx->call;
	uint64_t s = atomic_load_explicit(&c->seq, memory_order_relaxed);

	atomic_store_explicit(&c->seq, s + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&c->function, NULL, memory_order_relaxed);
	atomic_store_explicit(&c->seq, s + 2, memory_order_release);
	return r;
}

int gpuctl_nvml_call_in_flight(const struct gpuctl_ctx *ctx, struct gpuctl_nvml_call *ret_call)
{
	const struct ctx_nvml_call *c;
	struct gpuctl_nvml_call out = {.struct_size = sizeof(out), .gpu = -1};
	const char *fn = NULL;
	uint64_t gpu = NVML_CALL_NO_GPU, b[2] = {0, 0};
	int64_t since = 0;
	bool stable = false;
	struct timespec ts = {0, 0};

	if (!ctx || !ret_call ||
	    ret_call->struct_size < STRUCT_SIZE_MIN(struct gpuctl_nvml_call, seconds))
		return -EINVAL;
	c = &ctx->call;
	/* The writer holds seq odd for a few stores only, so a handful of tries always does;
	 * the bound keeps a reader from spinning should the writing thread be descheduled. */
	for (int tries = 0; tries < 100000 && !stable; tries++) {
		uint64_t s1 = atomic_load_explicit(&c->seq, memory_order_acquire);

		if (s1 & 1)
			continue;
		fn = atomic_load_explicit(&c->function, memory_order_relaxed);
		gpu = atomic_load_explicit(&c->gpu, memory_order_relaxed);
		b[0] = atomic_load_explicit(&c->pci_bus_id[0], memory_order_relaxed);
		b[1] = atomic_load_explicit(&c->pci_bus_id[1], memory_order_relaxed);
		since = atomic_load_explicit(&c->since_ns, memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		stable = atomic_load_explicit(&c->seq, memory_order_relaxed) == s1;
	}
	if (!stable)
		return -EAGAIN;
	if (!fn)
		return 0;
	_Static_assert(sizeof(out.pci_bus_id) > sizeof(b), "room for the bus id and its NUL");
	out.function = fn;
	out.gpu = gpu == NVML_CALL_NO_GPU || gpu > INT_MAX ? -1 : (int)gpu;
	memcpy(out.pci_bus_id, b, sizeof(b));
	(void)clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	out.seconds = now > since ? (double)(now - since) / 1e9 : 0.0;
	struct_fill(ret_call, &out, sizeof(out));
	return 1;
}
