/* Simulated NVML: events. Stubs for now: every call counts and answers NOT_SUPPORTED (after
 * the usual init/handle checks), which a real driver also returns on GPUs without event
 * support. A later health issue fills them from kmsg/state (XIDs, ECC events). */
#include "internal.h"

SIM_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
	nvmlReturn_t r = sim_begin(SIM_FN_nvmlEventSetCreate, true);

	if (r == NVML_SUCCESS)
		r = set ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_INVALID_ARGUMENT;
	return sim_end(r);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                                 nvmlEventSet_t set)
{
	(void)eventTypes;
	(void)set;
	SIM_DEVICE_CALL(nvmlDeviceRegisterEvents, device, 0);
	return sim_end(NVML_ERROR_NOT_SUPPORTED);
}

SIM_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, struct nvmlEventData_st *data,
                                            unsigned int timeoutms)
{
	nvmlReturn_t r = sim_begin(SIM_FN_nvmlEventSetWait_v2, true);

	(void)set;
	(void)data;
	(void)timeoutms;
	return sim_end(r == NVML_SUCCESS ? NVML_ERROR_NOT_SUPPORTED : r);
}

SIM_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
	nvmlReturn_t r = sim_begin(SIM_FN_nvmlEventSetFree, true);

	(void)set;
	return sim_end(r == NVML_SUCCESS ? NVML_ERROR_NOT_SUPPORTED : r);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device,
                                                         unsigned long long *eventTypes)
{
	SIM_DEVICE_CALL(nvmlDeviceGetSupportedEventTypes, device, 0);
	if (!eventTypes)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	return sim_end(NVML_ERROR_NOT_SUPPORTED);
}
