// SPDX-License-Identifier: MIT
/*
 * cuda.c: the CUDA allocation probe: in the calling process, dlopen("libcuda.so.1"), cuInit,
 * create a context on the one visible device, allocate and free memory, destroy the context.
 *
 * Decisions:
 * - The probe runs in the process that calls it; isolation (one child per GPU, only that GPU
 *   visible through CUDA_VISIBLE_DEVICES, a timeout, the process group killed on a hang) is the
 *   caller's: `gpuctl health --probe` re-executes itself per GPU, so a hung driver call can
 *   never hang gpuctl, and a child never inherits a half-initialised CUDA from its parent.
 * - Exactly one device must be visible: the caller names one GPU by UUID; none visible means
 *   CUDA could not see the GPU (a failure), several that the environment was not what the
 *   caller set (refused).
 * - The library is opened RTLD_NOW | RTLD_LOCAL and never closed: the process exits right after.
 */
#include <dlfcn.h>
#include <errno.h>
#include <string.h>

#include "ctx.h"
#include "cuda-abi.h"
#include "util.h"

struct cu {
	cu_fn_init_t *init;
	cu_fn_device_count_t *device_count;
	cu_fn_device_get_t *device_get;
	cu_fn_ctx_create_t *ctx_create;
	cu_fn_ctx_destroy_t *ctx_destroy;
	cu_fn_mem_alloc_t *mem_alloc;
	cu_fn_mem_free_t *mem_free;
	cu_fn_error_name_t *error_name;
};

static bool sym(void *dl, const char *name, void *ret_fn)
{
	void *p = dlsym(dl, name);

	if (!p)
		return false;
	memcpy(ret_fn, &p, sizeof(p));
	return true;
}

static int cu_error(struct gpuctl_ctx *ctx, const struct cu *cu, const char *fn, CUresult r)
{
	const char *name = NULL;

	if (!cu->error_name || cu->error_name(r, &name) != CUDA_SUCCESS)
		name = NULL;
	return ctx_error(ctx, -EIO, "%s: %s (%d)", fn, name ? name : "CUDA error", r);
}

int gpuctl_cuda_probe_here(struct gpuctl_ctx *ctx, size_t bytes)
{
	struct cu cu = {0};
	CUcontext cctx = NULL;
	CUdeviceptr ptr = 0;
	CUdevice dev = 0;
	int count = 0;
	CUresult r;
	void *dl;

	if (bytes == 0)
		return ctx_error(ctx, -EINVAL, "probe size 0");
	dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!dl)
		return ctx_error(ctx, -ENOENT, "libcuda.so.1 not found: %s", dlerror());
	(void)sym(dl, "cuGetErrorName", &cu.error_name);
	if (!sym(dl, "cuInit", &cu.init) || !sym(dl, "cuDeviceGetCount", &cu.device_count) ||
	    !sym(dl, "cuDeviceGet", &cu.device_get) || !sym(dl, "cuCtxCreate_v2", &cu.ctx_create) ||
	    !sym(dl, "cuCtxDestroy_v2", &cu.ctx_destroy) ||
	    !sym(dl, "cuMemAlloc_v2", &cu.mem_alloc) || !sym(dl, "cuMemFree_v2", &cu.mem_free))
		return ctx_error(ctx, -ENOEXEC, "libcuda.so.1 lacks the CUDA driver API");
	if ((r = cu.init(0)) != CUDA_SUCCESS)
		return cu_error(ctx, &cu, "cuInit", r);
	if ((r = cu.device_count(&count)) != CUDA_SUCCESS)
		return cu_error(ctx, &cu, "cuDeviceGetCount", r);
	if (count != 1)
		return ctx_error(ctx, count == 0 ? -ENODEV : -EINVAL,
		                 "CUDA sees %d devices where one was made visible", count);
	if ((r = cu.device_get(&dev, 0)) != CUDA_SUCCESS)
		return cu_error(ctx, &cu, "cuDeviceGet", r);
	if ((r = cu.ctx_create(&cctx, 0, dev)) != CUDA_SUCCESS)
		return cu_error(ctx, &cu, "cuCtxCreate", r);
	if ((r = cu.mem_alloc(&ptr, bytes)) != CUDA_SUCCESS) {
		(void)cu.ctx_destroy(cctx);
		return cu_error(ctx, &cu, "cuMemAlloc", r);
	}
	if ((r = cu.mem_free(ptr)) != CUDA_SUCCESS) {
		(void)cu.ctx_destroy(cctx);
		return cu_error(ctx, &cu, "cuMemFree", r);
	}
	if ((r = cu.ctx_destroy(cctx)) != CUDA_SUCCESS)
		return cu_error(ctx, &cu, "cuCtxDestroy", r);
	return 0;
}
