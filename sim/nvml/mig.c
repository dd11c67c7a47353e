/* Simulated NVML: MIG mode and MIG device handles. A GPU without a scenario "mig" object
 * does not support MIG (NOT_SUPPORTED); with one, MIG devices exist only while MIG is
 * enabled. Handle rules follow the NVML reference: an index past the maximum is
 * INVALID_ARGUMENT, an index with no MIG device behind it NOT_FOUND; instance and parent
 * queries on a non-MIG handle are NOT_SUPPORTED / INVALID_ARGUMENT. */
#include "internal.h"
#include "../util.h"

SIM_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                             unsigned int *pendingMode)
{
	SIM_DEVICE_CALL(nvmlDeviceGetMigMode, device, 0);
	if (!currentMode || !pendingMode)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if (!c.g->has_mig)
		return sim_end(NVML_ERROR_NOT_SUPPORTED);
	*currentMode = c.g->mig_enabled ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
	*pendingMode = c.g->mig_pending ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
	SIM_DEVICE_CALL(nvmlDeviceGetMaxMigDeviceCount, device, 0);
	if (!count)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	/* nvml.h: zero when MIG is not supported or not enabled, and SUCCESS either way. */
	*count = c.g->has_mig && c.g->mig_enabled ? SIM_MAX_MIG : 0;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                            nvmlDevice_t *migDevice)
{
	SIM_DEVICE_CALL(nvmlDeviceGetMigDeviceHandleByIndex, device, 0);
	if (!migDevice || index >= SIM_MAX_MIG)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if (!c.g->has_mig)
		return sim_end(NVML_ERROR_NOT_SUPPORTED);
	if (index >= c.g->mig_count)
		return sim_end(NVML_ERROR_NOT_FOUND);
	*migDevice = &sim_lib.handles[c.gpu * (1 + SIM_MAX_MIG) + 1 + index];
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice)
{
	SIM_DEVICE_CALL(nvmlDeviceIsMigDeviceHandle, device, SIM_MIG_OK);
	if (!isMigDevice)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	*isMigDevice = c.m != NULL;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id)
{
	SIM_DEVICE_CALL(nvmlDeviceGetGpuInstanceId, device, SIM_MIG_OK);
	if (!id)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if (!c.m)
		return sim_end(NVML_ERROR_NOT_SUPPORTED);
	*id = c.m->gi;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id)
{
	SIM_DEVICE_CALL(nvmlDeviceGetComputeInstanceId, device, SIM_MIG_OK);
	if (!id)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if (!c.m)
		return sim_end(NVML_ERROR_NOT_SUPPORTED);
	*id = c.m->ci;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
                                                                     nvmlDevice_t *device)
{
	SIM_DEVICE_CALL(nvmlDeviceGetDeviceHandleFromMigDeviceHandle, migDevice, SIM_MIG_OK);
	if (!device || !c.m)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	*device = &sim_lib.handles[c.gpu * (1 + SIM_MAX_MIG)];
	return sim_end(NVML_SUCCESS);
}
