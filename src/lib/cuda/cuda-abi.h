/* SPDX-License-Identifier: MIT */
/*
 * cuda-abi.h: the few CUDA driver API declarations gpuctl's allocation probe uses, in our own
 * words (no cuda.h). Facts from the CUDA Driver API reference: CUresult is an int-sized enum
 * (0 success, 100 no device, 999 unknown); CUdevice an int; CUcontext an opaque pointer;
 * CUdeviceptr an unsigned 64-bit integer on 64-bit hosts. cuda.h maps cuMemAlloc, cuMemFree and
 * cuCtxDestroy to their _v2 symbols (the ABI since CUDA 3.2 / 4.0), and cuCtxCreate to _v2 up to
 * CUDA 12 and to cuCtxCreate_v4 (which takes a CUctxCreateParams pointer) from CUDA 13. gpuctl
 * resolves the _v2 symbols, cuCtxCreate_v2 included: drivers of CUDA 13 still export it with
 * its CUDA 12 signature, and it is the one every supported driver has.
 */
#ifndef GPUCTL_CUDA_ABI_H
#define GPUCTL_CUDA_ABI_H

#include <stddef.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef unsigned long long CUdeviceptr;

#define CUDA_SUCCESS 0

typedef CUresult cu_fn_init_t(unsigned int flags);
typedef CUresult cu_fn_device_count_t(int *count);
typedef CUresult cu_fn_device_get_t(CUdevice *device, int ordinal);
typedef CUresult cu_fn_ctx_create_t(CUcontext *ctx, unsigned int flags, CUdevice device);
typedef CUresult cu_fn_ctx_destroy_t(CUcontext ctx);
typedef CUresult cu_fn_mem_alloc_t(CUdeviceptr *ptr, size_t bytes);
typedef CUresult cu_fn_mem_free_t(CUdeviceptr ptr);
typedef CUresult cu_fn_error_name_t(CUresult error, const char **name);

#endif /* GPUCTL_CUDA_ABI_H */
