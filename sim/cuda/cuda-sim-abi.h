/* The CUDA driver API subset the simulated libcuda.so.1 implements, in our own words.
 *
 * Written from NVIDIA's public CUDA Driver API reference (docs.nvidia.com/cuda/cuda-driver-api:
 * "Data types used by CUDA driver" for CUresult, CUdevice_attribute, CUuuid and CUcomputemode;
 * "Initialization", "Version Management", "Device Management", "Primary Context Management",
 * "Context Management", "Memory Management" and "Error Handling" for the functions), with the
 * numbers cross-checked against public re-declarations of cuda.h (e.g. the Zig translation of
 * CUDA 12.8's cuda.h and the JCuda CUresult class found in public repositories). NVIDIA's own
 * header is never included or copied: the simulator and the product each keep their reading of
 * the ABI so that a wrong reading on one side shows up as a disagreement (design.md section 5).
 *
 * ABI notes (same sources):
 * - CUdevice is an int ordinal; CUcontext is an opaque pointer; CUdeviceptr is 64 bits wide on
 *   64-bit hosts ("unsigned long long", CUdeviceptr_v2 since CUDA 11.3).
 * - cuda.h #defines cuCtxDestroy, cuMemAlloc, cuMemFree, cuMemGetInfo, cuDeviceTotalMem and
 *   cuDevicePrimaryCtxRelease to their _v2 symbols (since CUDA 3.2 / 11.0), cuDeviceGetUuid to
 *   cuDeviceGetUuid_v2 (since CUDA 12.0), and cuCtxCreate to cuCtxCreate_v2 up to CUDA 12 and to
 *   cuCtxCreate_v4 (a CUctxCreateParams argument added) in CUDA 13, whose driver still exports
 *   _v2; the simulator exports _v2 and the unsuffixed symbol, what gpuctl and nvsim-load call. The
 * unsuffixed symbols are the old ABI: cuDeviceTotalMem writes an unsigned int (cuda.h,
 * __CUDA_API_VERSION_INTERNAL block: "cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)");
 * cuCtxCreate and cuDevicePrimaryCtxRelease keep the _v2 signature.
 * - cuDeviceGetUuid_v2: "If the device is in MIG mode, returns its MIG UUID which uniquely
 *   identifies the subscribed MIG compute instance" (Driver API reference, cuDeviceGetUuid_v2). */
#ifndef SIM_CUDA_ABI_H
#define SIM_CUDA_ABI_H

#include <stddef.h>

typedef enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_OUT_OF_MEMORY = 2,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CUDA_ERROR_DEINITIALIZED = 4,
	CUDA_ERROR_STUB_LIBRARY = 34,
	CUDA_ERROR_DEVICE_UNAVAILABLE = 46,
	CUDA_ERROR_NO_DEVICE = 100,
	CUDA_ERROR_INVALID_DEVICE = 101,
	CUDA_ERROR_DEVICE_NOT_LICENSED = 102,
	CUDA_ERROR_INVALID_CONTEXT = 201,
	CUDA_ERROR_CONTEXT_ALREADY_CURRENT = 202,
	CUDA_ERROR_ECC_UNCORRECTABLE = 214,
	CUDA_ERROR_OPERATING_SYSTEM = 304,
	CUDA_ERROR_INVALID_HANDLE = 400,
	CUDA_ERROR_NOT_FOUND = 500,
	CUDA_ERROR_ILLEGAL_ADDRESS = 700,
	CUDA_ERROR_LAUNCH_FAILED = 719,
	CUDA_ERROR_NOT_PERMITTED = 800,
	CUDA_ERROR_NOT_SUPPORTED = 801,
	CUDA_ERROR_SYSTEM_NOT_READY = 802,
	CUDA_ERROR_TIMEOUT = 909,
	CUDA_ERROR_UNKNOWN = 999,
} CUresult;

typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef unsigned long long CUdeviceptr;

/* 16 bytes, the UUID without its "GPU-"/"MIG-" prefix (CUuuid_st { char bytes[16]; }). */
typedef struct CUuuid_st {
	char bytes[16];
} CUuuid;

typedef enum {
	CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
	CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
	CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13, /* kHz */
	CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
	CU_DEVICE_ATTRIBUTE_INTEGRATED = 18,
	CU_DEVICE_ATTRIBUTE_COMPUTE_MODE = 20, /* CUcomputemode */
	CU_DEVICE_ATTRIBUTE_ECC_ENABLED = 32,
	CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
	CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
	CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36, /* kHz */
	CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
	CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
	CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
} CUdevice_attribute;

/* CUcomputemode: the same numbers as NVML's nvmlComputeMode_t. */
enum {
	CU_COMPUTEMODE_DEFAULT = 0,
	CU_COMPUTEMODE_PROHIBITED = 2,
	CU_COMPUTEMODE_EXCLUSIVE_PROCESS = 3,
};

CUresult cuGetErrorString(CUresult error, const char **pStr);
CUresult cuGetErrorName(CUresult error, const char **pStr);
CUresult cuInit(unsigned int Flags);
CUresult cuDriverGetVersion(int *driverVersion);
CUresult cuDeviceGetCount(int *count);
CUresult cuDeviceGet(CUdevice *device, int ordinal);
CUresult cuDeviceGetName(char *name, int len, CUdevice dev);
CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev);
CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev);
CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev);
CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev);
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);
CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev);
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
CUresult cuDevicePrimaryCtxRelease(CUdevice dev);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult cuCtxDestroy(CUcontext ctx);
CUresult cuCtxDestroy_v2(CUcontext ctx);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuCtxGetCurrent(CUcontext *pctx);
CUresult cuCtxGetDevice(CUdevice *device);
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemGetInfo_v2(size_t *free, size_t *total);

/* Simulator extension (no CUDA equivalent; nvsim-load looks it up with dlsym and does without
 * it on a real driver): the GPU utilisation, in percent, this process reports on dev while it
 * has a context there. NVML adds it to the GPU's utilization.gpu. */
CUresult nvsimCudaSetUtilization(CUdevice dev, unsigned int percent);

#endif
