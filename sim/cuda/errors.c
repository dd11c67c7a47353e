/* CUDA error names and descriptions (values: CUDA Driver API reference, "Data types used by
 * CUDA driver", enum cudaError_enum). The descriptions are our own short wording, in the style
 * of the driver's cuGetErrorString. */
#include "errors.h"
#include "cuda-sim-abi.h"
#include "../util.h"

#include <strings.h>

static const struct {
	int code;
	const char *name; /* without "CUDA_ERROR_" (SUCCESS is "CUDA_SUCCESS") */
	const char *text;
} errors[] = {
        {CUDA_SUCCESS, "SUCCESS", "no error"},
        {CUDA_ERROR_INVALID_VALUE, "INVALID_VALUE", "invalid argument"},
        {CUDA_ERROR_OUT_OF_MEMORY, "OUT_OF_MEMORY", "out of memory"},
        {CUDA_ERROR_NOT_INITIALIZED, "NOT_INITIALIZED", "initialization error"},
        {CUDA_ERROR_DEINITIALIZED, "DEINITIALIZED", "driver shutting down"},
        {CUDA_ERROR_STUB_LIBRARY, "STUB_LIBRARY", "CUDA driver is a stub library"},
        {CUDA_ERROR_DEVICE_UNAVAILABLE, "DEVICE_UNAVAILABLE",
         "CUDA-capable device(s) is/are busy or unavailable"},
        {CUDA_ERROR_NO_DEVICE, "NO_DEVICE", "no CUDA-capable device is detected"},
        {CUDA_ERROR_INVALID_DEVICE, "INVALID_DEVICE", "invalid device ordinal"},
        {CUDA_ERROR_DEVICE_NOT_LICENSED, "DEVICE_NOT_LICENSED",
         "device doesn't have valid Grid license"},
        {CUDA_ERROR_INVALID_CONTEXT, "INVALID_CONTEXT", "invalid device context"},
        {CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "CONTEXT_ALREADY_CURRENT", "context already current"},
        {CUDA_ERROR_ECC_UNCORRECTABLE, "ECC_UNCORRECTABLE", "uncorrectable ECC error encountered"},
        {CUDA_ERROR_OPERATING_SYSTEM, "OPERATING_SYSTEM",
         "OS call failed or operation not supported on this OS"},
        {CUDA_ERROR_INVALID_HANDLE, "INVALID_HANDLE", "invalid resource handle"},
        {CUDA_ERROR_NOT_FOUND, "NOT_FOUND", "named symbol not found"},
        {CUDA_ERROR_ILLEGAL_ADDRESS, "ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
        {CUDA_ERROR_LAUNCH_FAILED, "LAUNCH_FAILED", "unspecified launch failure"},
        {CUDA_ERROR_NOT_PERMITTED, "NOT_PERMITTED", "operation not permitted"},
        {CUDA_ERROR_NOT_SUPPORTED, "NOT_SUPPORTED", "operation not supported"},
        {CUDA_ERROR_SYSTEM_NOT_READY, "SYSTEM_NOT_READY", "system not yet initialized"},
        {CUDA_ERROR_TIMEOUT, "TIMEOUT", "wait operation timed out"},
        {CUDA_ERROR_UNKNOWN, "UNKNOWN", "unknown error"},
};

int sim_cuda_error_from_name(const char *name)
{
	uint64_t v;

	if (strncasecmp(name, "CUDA_ERROR_", 11) == 0)
		name += 11;
	else if (strncasecmp(name, "CUDA_", 5) == 0)
		name += 5;
	for (size_t i = 0; i < SIM_ELEMENTSOF(errors); i++)
		if (strcasecmp(errors[i].name, name) == 0)
			return errors[i].code;
	if (sim_parse_u64(name, 999, &v) == 0)
		for (size_t i = 0; i < SIM_ELEMENTSOF(errors); i++)
			if (errors[i].code == (int)v)
				return (int)v;
	return -1;
}

const char *sim_cuda_error_name(int code)
{
	static const char *const full[] = {
#define FULL(n) "CUDA_ERROR_" #n
	        "CUDA_SUCCESS",
	        FULL(INVALID_VALUE),
	        FULL(OUT_OF_MEMORY),
	        FULL(NOT_INITIALIZED),
	        FULL(DEINITIALIZED),
	        FULL(STUB_LIBRARY),
	        FULL(DEVICE_UNAVAILABLE),
	        FULL(NO_DEVICE),
	        FULL(INVALID_DEVICE),
	        FULL(DEVICE_NOT_LICENSED),
	        FULL(INVALID_CONTEXT),
	        FULL(CONTEXT_ALREADY_CURRENT),
	        FULL(ECC_UNCORRECTABLE),
	        FULL(OPERATING_SYSTEM),
	        FULL(INVALID_HANDLE),
	        FULL(NOT_FOUND),
	        FULL(ILLEGAL_ADDRESS),
	        FULL(LAUNCH_FAILED),
	        FULL(NOT_PERMITTED),
	        FULL(NOT_SUPPORTED),
	        FULL(SYSTEM_NOT_READY),
	        FULL(TIMEOUT),
	        FULL(UNKNOWN),
#undef FULL
	};
	_Static_assert(SIM_ELEMENTSOF(full) == SIM_ELEMENTSOF(errors), "one full name per error");

	for (size_t i = 0; i < SIM_ELEMENTSOF(errors); i++)
		if (errors[i].code == code)
			return full[i];
	return NULL;
}

const char *sim_cuda_error_string(int code)
{
	for (size_t i = 0; i < SIM_ELEMENTSOF(errors); i++)
		if (errors[i].code == code)
			return errors[i].text;
	return NULL;
}
