/* Simulated CUDA driver: contexts (created and primary), the current context, device memory,
 * and the process registration that makes CUDA work visible to NVML.
 *
 * Decisions:
 * - Context handles point into one static array, so validating a handle is a range check,
 *   never a dereference of what the caller passed. The current context is per thread; the
 *   real driver keeps a per-thread stack, modelled here by its top only (cuCtxCreate makes
 *   the new context current, destroying the current one leaves none).
 * - A primary context is retained/released by reference count and destroyed (with its
 *   allocations) when the count reaches 0; cuCtxDestroy refuses it (INVALID_CONTEXT).
 * - Registration: while the process has a context on a device it is listed in
 *   procs/<pid>.json ({"pid", "devices": [{"gpu", "used_memory_bytes", "util"}]}, sim/README.md),
 *   rewritten atomically on every change and removed when the last context goes and at exit.
 *   A killed process leaves the file behind; NVML ignores registrations of dead PIDs. A forked
 *   child never removes its parent's file. A context itself uses no memory in the simulator.
 * - Free memory = total - the scenario's used memory - other live processes' registrations -
 *   this process's allocations; an allocation larger than that is OUT_OF_MEMORY.
 * - Failures: a lost GPU answers DEVICE_UNAVAILABLE to context creation, allocation and
 *   cuMemGetInfo; so do compute mode PROHIBITED, and EXCLUSIVE_PROCESS when another live
 *   process is registered on the GPU (Driver API reference, CUDA_ERROR_DEVICE_UNAVAILABLE:
 *   "often unavailable due to use of CU_COMPUTEMODE_EXCLUSIVE_PROCESS or
 *   CU_COMPUTEMODE_PROHIBITED"). `nvsim set cuda.alloc=fail[:ERROR]` makes cuMemAlloc return
 *   ERROR (default CUDA_ERROR_UNKNOWN); `cuda.alloc=hang` makes it block until the process is
 *   killed, as an allocation on a wedged GPU does. */
#include "internal.h"
#include "../util.h"

#include <signal.h>

#define MAX_CTX 1024

struct CUctx_st {
	bool used;         /* slot holds a live context */
	bool primary;      /* a device's primary context */
	unsigned int refs; /* primary: retain count */
	unsigned int dev;  /* ordinal */
};

struct alloc {
	CUdeviceptr ptr;
	unsigned long long size;
	struct CUctx_st *ctx;
};

static struct CUctx_st ctxs[MAX_CTX];
static struct CUctx_st *primary[SIM_CUDA_MAX_DEVS];
static _Thread_local struct CUctx_st *current;
static struct alloc *allocs;
static size_t n_allocs, cap_allocs;
static CUdeviceptr next_ptr = 0x7f0000000000ULL; /* addresses never reused */
static pid_t registered_by;                      /* pid that wrote procs/<pid>.json, or 0 */

static bool valid_ctx(const struct CUctx_st *c)
{
	uintptr_t base = (uintptr_t)ctxs, p = (uintptr_t)c;

	return c && p >= base && p < base + sizeof(ctxs) && (p - base) % sizeof(*c) == 0 && c->used;
}

static unsigned long long own_bytes(unsigned int dev)
{
	unsigned long long sum = 0;

	for (size_t i = 0; i < n_allocs; i++)
		if (allocs[i].ctx->dev == dev)
			sum += allocs[i].size;
	return sum;
}

static bool has_ctx(unsigned int dev)
{
	for (size_t i = 0; i < MAX_CTX; i++)
		if (ctxs[i].used && ctxs[i].dev == dev)
			return true;
	return false;
}

static void registration_path(char *path, size_t len, pid_t pid)
{
	snprintf(path, len, "%s/procs/%ld.json", sim_cu.state_dir, (long)pid);
}

/* Rewrites procs/<pid>.json from the live contexts (removes it when there is none). */
static void register_process(void)
{
	_cleanup_(json_decrefp) json_t *doc = NULL, *devices = json_array();
	pid_t pid = getpid();
	char path[4200];

	if (!sim_cu.state_dir[0] || !devices)
		return;
	for (unsigned int d = 0; d < sim_cu.n_devs; d++) {
		if (!has_ctx(d))
			continue;
		json_array_append_new(devices,
		                      json_pack("{sssIsI}", "gpu", sim_cu_uuid((CUdevice)d),
		                                "used_memory_bytes", (json_int_t)own_bytes(d),
		                                "util", (json_int_t)sim_cu.util[d]));
	}
	registration_path(path, sizeof(path), pid);
	if (json_array_size(devices) == 0) {
		if (registered_by == pid && unlink(path) == 0)
			(void)sim_gen_bump(sim_cu.state_dir);
		registered_by = 0;
		return;
	}
	doc = json_pack("{sIsO}", "pid", (json_int_t)pid, "devices", devices);
	if (!doc)
		return;
	snprintf(path, sizeof(path), "%s/procs", sim_cu.state_dir);
	(void)sim_mkdir_p(path);
	registration_path(path, sizeof(path), pid);
	if (sim_write_json_atomic(path, doc) == 0) {
		registered_by = pid;
		(void)sim_gen_bump(sim_cu.state_dir); /* the simulated NVML re-reads procs/ */
	}
}

__attribute__((destructor)) static void unregister_at_exit(void)
{
	char path[4200];

	if (registered_by && registered_by == getpid()) {
		registration_path(path, sizeof(path), registered_by);
		if (unlink(path) == 0)
			(void)sim_gen_bump(sim_cu.state_dir);
	}
}

/* Memory of visible device dev: total and in use by everyone (this process included). */
static void memory_of(unsigned int dev, unsigned long long *ret_total, unsigned long long *ret_used)
{
	const struct sim_gpu *g;
	const struct sim_mig_instance *m;
	struct sim_proc *procs = NULL;
	unsigned long long used;
	size_t n = 0;

	(void)sim_cu_device((CUdevice)dev, &g, &m);
	*ret_total = m ? m->memory_mib << 20 : (g->memory_total_mib - g->memory_reserved_mib) << 20;
	used = (m ? 0 : g->memory_used_mib << 20) + own_bytes(dev);
	if (sim_cu.state_dir[0] && sim_procs_load(sim_cu.state_dir, &procs, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			bool on = false;
			if (procs[i].pid == getpid())
				continue;
			if (m)
				on = strcasecmp(procs[i].uuid, m->uuid) == 0;
			else
				on = strcasecmp(procs[i].uuid, g->uuid) == 0;
			for (unsigned int k = 0; !m && !on && k < g->mig_count; k++)
				on = strcasecmp(procs[i].uuid, g->mig[k].uuid) == 0;
			if (on)
				used += procs[i].used_bytes;
		}
	}
	free(procs);
	*ret_used = used;
}

/* Another live process registered on dev's GPU (or its MIG devices)? */
static bool other_process_on(unsigned int dev)
{
	const struct sim_gpu *g;
	const struct sim_mig_instance *m;
	struct sim_proc *procs = NULL;
	size_t n = 0;
	bool busy = false;

	(void)sim_cu_device((CUdevice)dev, &g, &m);
	if (!sim_cu.state_dir[0] || sim_procs_load(sim_cu.state_dir, &procs, &n) < 0)
		return false;
	for (size_t i = 0; i < n && !busy; i++) {
		if (procs[i].pid == getpid())
			continue;
		busy = strcasecmp(procs[i].uuid, g->uuid) == 0;
		for (unsigned int k = 0; !busy && k < g->mig_count; k++)
			busy = strcasecmp(procs[i].uuid, g->mig[k].uuid) == 0;
	}
	free(procs);
	return busy;
}

/* Can this process use dev now? (lost GPU, compute mode) */
static CUresult usable(unsigned int dev)
{
	unsigned int gpu = sim_cu.devs[dev].gpu;
	const struct sim_gpu *g;

	sim_cu_refresh(); /* may replace sim_cu.sc: look the GPU up after it */
	g = &sim_cu.sc->gpus[gpu];
	if (sim_cu.dyn && sim_cu.dyn->gpus[gpu].lost)
		return CUDA_ERROR_DEVICE_UNAVAILABLE;
	if (g->compute_mode == CU_COMPUTEMODE_PROHIBITED)
		return CUDA_ERROR_DEVICE_UNAVAILABLE;
	if (g->compute_mode == CU_COMPUTEMODE_EXCLUSIVE_PROCESS && !has_ctx(dev) &&
	    other_process_on(dev))
		return CUDA_ERROR_DEVICE_UNAVAILABLE;
	return CUDA_SUCCESS;
}

static struct CUctx_st *new_ctx(unsigned int dev, bool is_primary)
{
	for (size_t i = 0; i < MAX_CTX; i++)
		if (!ctxs[i].used) {
			ctxs[i] =
			        (struct CUctx_st){.used = true, .primary = is_primary, .dev = dev};
			return &ctxs[i];
		}
	return NULL;
}

/* Frees a context and its allocations; the caller re-registers. */
static void drop_ctx(struct CUctx_st *c)
{
	size_t k = 0;

	for (size_t i = 0; i < n_allocs; i++)
		if (allocs[i].ctx != c)
			allocs[k++] = allocs[i];
	n_allocs = k;
	if (c->primary)
		primary[c->dev] = NULL;
	if (current == c)
		current = NULL;
	c->used = false;
}

static CUresult ctx_create(CUcontext *pctx, CUdevice dev)
{
	const struct sim_gpu *g;
	const struct sim_mig_instance *m;
	struct CUctx_st *c;
	CUresult r;

	SIM_CU_READY_OR_RETURN();
	if (!pctx)
		return sim_cu_end(CUDA_ERROR_INVALID_VALUE);
	if ((r = sim_cu_device(dev, &g, &m)) != CUDA_SUCCESS ||
	    (r = usable((unsigned int)dev)) != CUDA_SUCCESS)
		return sim_cu_end(r);
	c = new_ctx((unsigned int)dev, false);
	if (!c)
		return sim_cu_end(CUDA_ERROR_OUT_OF_MEMORY);
	current = c;
	register_process();
	*pctx = c;
	return sim_cu_end(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	(void)flags; /* scheduling flags change nothing in the simulator */
	return ctx_create(pctx, dev);
}

SIM_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	(void)flags;
	return ctx_create(pctx, dev);
}

static CUresult ctx_destroy(CUcontext ctx)
{
	SIM_CU_READY_OR_RETURN();
	if (!valid_ctx(ctx) || ctx->primary)
		return sim_cu_end(CUDA_ERROR_INVALID_CONTEXT);
	drop_ctx(ctx);
	register_process();
	return sim_cu_end(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	return ctx_destroy(ctx);
}

SIM_EXPORT CUresult cuCtxDestroy(CUcontext ctx)
{
	return ctx_destroy(ctx);
}

SIM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	const struct sim_gpu *g;
	const struct sim_mig_instance *m;
	CUresult r;

	SIM_CU_READY_OR_RETURN();
	if (!pctx)
		return sim_cu_end(CUDA_ERROR_INVALID_VALUE);
	if ((r = sim_cu_device(dev, &g, &m)) != CUDA_SUCCESS)
		return sim_cu_end(r);
	if (!primary[dev]) {
		if ((r = usable((unsigned int)dev)) != CUDA_SUCCESS)
			return sim_cu_end(r);
		primary[dev] = new_ctx((unsigned int)dev, true);
		if (!primary[dev])
			return sim_cu_end(CUDA_ERROR_OUT_OF_MEMORY);
		register_process();
	}
	primary[dev]->refs++;
	*pctx = primary[dev];
	return sim_cu_end(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	const struct sim_gpu *g;
	const struct sim_mig_instance *m;
	CUresult r;

	sim_cu_begin();
	if ((r = sim_cu_ready()) != CUDA_SUCCESS ||
	    (r = sim_cu_device(dev, &g, &m)) != CUDA_SUCCESS)
		return sim_cu_end(r);
	if (!primary[dev] || primary[dev]->refs == 0)
		return sim_cu_end(CUDA_ERROR_INVALID_CONTEXT);
	if (--primary[dev]->refs == 0) {
		drop_ctx(primary[dev]);
		register_process();
	}
	return sim_cu_end(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
	return cuDevicePrimaryCtxRelease_v2(dev);
}

SIM_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
	SIM_CU_READY_OR_RETURN();
	if (ctx && !valid_ctx(ctx))
		return sim_cu_end(CUDA_ERROR_INVALID_CONTEXT);
	current = ctx;
	return sim_cu_end(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	SIM_CU_READY_OR_RETURN();
	if (!pctx)
		return sim_cu_end(CUDA_ERROR_INVALID_VALUE);
	*pctx = valid_ctx(current) ? current : NULL;
	return sim_cu_end(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuCtxGetDevice(CUdevice *device)
{
	SIM_CU_READY_OR_RETURN();
	if (!device)
		return sim_cu_end(CUDA_ERROR_INVALID_VALUE);
	if (!valid_ctx(current))
		return sim_cu_end(CUDA_ERROR_INVALID_CONTEXT);
	*device = (CUdevice)current->dev;
	return sim_cu_end(CUDA_SUCCESS);
}

/* Blocks forever, lock released: a wedged GPU. Signals run their handlers and come back. */
static _Noreturn void hang(void)
{
	pthread_mutex_unlock(&sim_cu.lock);
	for (;;)
		pause();
}

SIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	unsigned long long total, used;
	const struct sim_gpu_dyn *d;
	CUresult r;

	SIM_CU_READY_OR_RETURN();
	if (!valid_ctx(current))
		return sim_cu_end(CUDA_ERROR_INVALID_CONTEXT);
	if (!dptr || bytesize == 0)
		return sim_cu_end(CUDA_ERROR_INVALID_VALUE);
	if ((r = usable(current->dev)) != CUDA_SUCCESS)
		return sim_cu_end(r);
	d = sim_cu.dyn ? &sim_cu.dyn->gpus[sim_cu.devs[current->dev].gpu] : NULL;
	if (d && d->cuda_alloc == SIM_CUDA_ALLOC_FAIL)
		return sim_cu_end((CUresult)d->cuda_alloc_error);
	if (d && d->cuda_alloc == SIM_CUDA_ALLOC_HANG)
		hang();
	memory_of(current->dev, &total, &used);
	if (used > total || bytesize > total - used)
		return sim_cu_end(CUDA_ERROR_OUT_OF_MEMORY);
	if (n_allocs == cap_allocs) {
		size_t cap = cap_allocs ? cap_allocs * 2 : 64;
		struct alloc *na = realloc(allocs, cap * sizeof(*na));
		if (!na)
			return sim_cu_end(CUDA_ERROR_OUT_OF_MEMORY);
		allocs = na;
		cap_allocs = cap;
	}
	allocs[n_allocs++] = (struct alloc){next_ptr, bytesize, current};
	*dptr = next_ptr;
	next_ptr += (bytesize + 511) & ~(CUdeviceptr)511; /* 512-byte aligned, never reused */
	register_process();
	return sim_cu_end(CUDA_SUCCESS);
}

SIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	SIM_CU_READY_OR_RETURN();
	for (size_t i = 0; i < n_allocs; i++) {
		if (allocs[i].ptr != dptr)
			continue;
		allocs[i] = allocs[--n_allocs];
		register_process();
		return sim_cu_end(CUDA_SUCCESS);
	}
	return sim_cu_end(CUDA_ERROR_INVALID_VALUE);
}

SIM_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
	unsigned long long total, used;
	CUresult r;

	SIM_CU_READY_OR_RETURN();
	if (!valid_ctx(current))
		return sim_cu_end(CUDA_ERROR_INVALID_CONTEXT);
	if (!free_bytes || !total_bytes)
		return sim_cu_end(CUDA_ERROR_INVALID_VALUE);
	if ((r = usable(current->dev)) != CUDA_SUCCESS)
		return sim_cu_end(r);
	memory_of(current->dev, &total, &used);
	*total_bytes = (size_t)total;
	*free_bytes = (size_t)(used >= total ? 0 : total - used);
	return sim_cu_end(CUDA_SUCCESS);
}

SIM_EXPORT CUresult nvsimCudaSetUtilization(CUdevice dev, unsigned int percent)
{
	const struct sim_gpu *g;
	const struct sim_mig_instance *m;
	CUresult r;

	sim_cu_begin();
	if ((r = sim_cu_ready()) != CUDA_SUCCESS ||
	    (r = sim_cu_device(dev, &g, &m)) != CUDA_SUCCESS)
		return sim_cu_end(r);
	if (percent > 100)
		return sim_cu_end(CUDA_ERROR_INVALID_VALUE);
	sim_cu.util[dev] = percent;
	register_process();
	return sim_cu_end(CUDA_SUCCESS);
}
