/* The NVML functions the simulator exports, as one X-macro list: the library numbers its call
 * counters from it and nvsim checks `nvsim fail FUNCTION` names against it. The second column
 * says whether the `*` error-injection rule applies (device queries only: not init, system,
 * count or handle lookups). */
#ifndef SIM_FUNCTIONS_H
#define SIM_FUNCTIONS_H

#define SIM_FUNCTIONS(X)                                                                           \
	X(nvmlInit_v2, 0)                                                                          \
	X(nvmlInit, 0)                                                                             \
	X(nvmlShutdown, 0)                                                                         \
	X(nvmlErrorString, 0)                                                                      \
	X(nvmlSystemGetDriverVersion, 0)                                                           \
	X(nvmlSystemGetNVMLVersion, 0)                                                             \
	X(nvmlSystemGetCudaDriverVersion_v2, 0)                                                    \
	X(nvmlSystemGetCudaDriverVersion, 0)                                                       \
	X(nvmlDeviceGetCount_v2, 0)                                                                \
	X(nvmlDeviceGetCount, 0)                                                                   \
	X(nvmlDeviceGetHandleByIndex_v2, 0)                                                        \
	X(nvmlDeviceGetHandleByIndex, 0)                                                           \
	X(nvmlDeviceGetUUID, 1)                                                                    \
	X(nvmlDeviceGetPciInfo_v3, 1)                                                              \
	X(nvmlDeviceGetPciInfo_v2, 1)                                                              \
	X(nvmlDeviceGetName, 1)                                                                    \
	X(nvmlDeviceGetBrand, 1)                                                                   \
	X(nvmlDeviceGetArchitecture, 1)                                                            \
	X(nvmlDeviceGetCudaComputeCapability, 1)                                                   \
	X(nvmlDeviceGetSerial, 1)                                                                  \
	X(nvmlDeviceGetMinorNumber, 1)                                                             \
	X(nvmlDeviceGetMemoryInfo_v2, 1)                                                           \
	X(nvmlDeviceGetMemoryInfo, 1)                                                              \
	X(nvmlDeviceGetUtilizationRates, 1)                                                        \
	X(nvmlDeviceGetTemperature, 1)                                                             \
	X(nvmlDeviceGetTemperatureThreshold, 1)                                                    \
	X(nvmlDeviceGetPowerUsage, 1)                                                              \
	X(nvmlDeviceGetEnforcedPowerLimit, 1)                                                      \
	X(nvmlDeviceGetClockInfo, 1)                                                               \
	X(nvmlDeviceGetMaxClockInfo, 1)                                                            \
	X(nvmlDeviceGetCurrentClocksEventReasons, 1)                                               \
	X(nvmlDeviceGetCurrentClocksThrottleReasons, 1)                                            \
	X(nvmlDeviceGetCurrPcieLinkGeneration, 1)                                                  \
	X(nvmlDeviceGetMaxPcieLinkGeneration, 1)                                                   \
	X(nvmlDeviceGetCurrPcieLinkWidth, 1)                                                       \
	X(nvmlDeviceGetMaxPcieLinkWidth, 1)                                                        \
	X(nvmlDeviceGetPcieReplayCounter, 1)                                                       \
	X(nvmlDeviceGetEncoderUtilization, 1)                                                      \
	X(nvmlDeviceGetDecoderUtilization, 1)                                                      \
	X(nvmlDeviceGetTotalEnergyConsumption, 1)                                                  \
	X(nvmlDeviceGetViolationStatus, 1)                                                         \
	X(nvmlDeviceGetBAR1MemoryInfo, 1)                                                          \
	X(nvmlDeviceGetPcieThroughput, 1)                                                          \
	X(nvmlDeviceGetPersistenceMode, 1)                                                         \
	X(nvmlDeviceGetComputeMode, 1)                                                             \
	X(nvmlDeviceGetEccMode, 1)                                                                 \
	X(nvmlDeviceGetMigMode, 1)                                                                 \
	X(nvmlDeviceGetTotalEccErrors, 1)                                                          \
	X(nvmlDeviceGetRetiredPages, 1)                                                            \
	X(nvmlDeviceGetRetiredPagesPendingStatus, 1)                                               \
	X(nvmlDeviceGetRemappedRows, 1)                                                            \
	X(nvmlDeviceGetFieldValues, 1)                                                             \
	X(nvmlDeviceGetMaxMigDeviceCount, 1)                                                       \
	X(nvmlDeviceGetMigDeviceHandleByIndex, 1)                                                  \
	X(nvmlDeviceIsMigDeviceHandle, 1)                                                          \
	X(nvmlDeviceGetGpuInstanceId, 1)                                                           \
	X(nvmlDeviceGetComputeInstanceId, 1)                                                       \
	X(nvmlDeviceGetDeviceHandleFromMigDeviceHandle, 1)                                         \
	X(nvmlDeviceGetComputeRunningProcesses_v3, 1)                                              \
	X(nvmlDeviceGetComputeRunningProcesses_v2, 1)                                              \
	X(nvmlDeviceGetComputeRunningProcesses, 1)                                                 \
	X(nvmlDeviceGetProcessUtilization, 1)                                                      \
	X(nvmlDeviceGetConfComputeMemSizeInfo, 1)                                                  \
	X(nvmlDeviceGetCpuAffinity, 1)                                                             \
	X(nvmlDeviceGetMemoryAffinity, 1)                                                          \
	X(nvmlDeviceGetNumaNodeId, 1)                                                              \
	X(nvmlDeviceGetTopologyCommonAncestor, 1)                                                  \
	X(nvmlDeviceGetP2PStatus, 1)                                                               \
	X(nvmlDeviceGetNvLinkState, 1)                                                             \
	X(nvmlDeviceGetNvLinkErrorCounter, 1)                                                      \
	X(nvmlDeviceGetNvLinkRemotePciInfo_v2, 1)                                                  \
	X(nvmlDeviceGetNvLinkRemoteDeviceType, 1)                                                  \
	X(nvmlEventSetCreate, 0)                                                                   \
	X(nvmlDeviceRegisterEvents, 1)                                                             \
	X(nvmlEventSetWait_v2, 0)                                                                  \
	X(nvmlEventSetFree, 0)                                                                     \
	X(nvmlDeviceGetSupportedEventTypes, 1)                                                     \
	X(nvmlInitWithFlags, 0)                                                                    \
	X(nvmlDeviceGetHandleByUUID, 0)                                                            \
	X(nvmlDeviceGetHandleByPciBusId_v2, 0)                                                     \
	X(nvmlDeviceGetHandleByPciBusId, 0)                                                        \
	X(nvmlDeviceGetIndex, 1)                                                                   \
	X(nvmlDeviceGetPciInfo, 1)                                                                 \
	X(nvmlDeviceGetGraphicsRunningProcesses_v3, 1)                                             \
	X(nvmlDeviceGetGraphicsRunningProcesses_v2, 1)                                             \
	X(nvmlDeviceGetGraphicsRunningProcesses, 1)                                                \
	X(nvmlDeviceGetMPSComputeRunningProcesses_v3, 1)                                           \
	X(nvmlDeviceGetMPSComputeRunningProcesses_v2, 1)                                           \
	X(nvmlDeviceGetMPSComputeRunningProcesses, 1)                                              \
	X(nvmlDeviceGetFanSpeed, 1)                                                                \
	X(nvmlDeviceGetFanSpeed_v2, 1)                                                             \
	X(nvmlDeviceGetNumFans, 1)                                                                 \
	X(nvmlDeviceGetPerformanceState, 1)                                                        \
	X(nvmlDeviceGetPowerState, 1)                                                              \
	X(nvmlDeviceGetPowerManagementLimit, 1)                                                    \
	X(nvmlDeviceGetPowerManagementLimitConstraints, 1)                                         \
	X(nvmlDeviceGetPowerManagementDefaultLimit, 1)                                             \
	X(nvmlDeviceGetPowerManagementMode, 1)                                                     \
	X(nvmlDeviceGetDisplayMode, 1)                                                             \
	X(nvmlDeviceGetDisplayActive, 1)                                                           \
	X(nvmlDeviceGetDriverModel, 1)                                                             \
	X(nvmlDeviceGetNvLinkVersion, 1)

enum sim_fn {
#define SIM_FN_ENUM(name, star) SIM_FN_##name,
	SIM_FUNCTIONS(SIM_FN_ENUM)
#undef SIM_FN_ENUM
	        SIM_FN__COUNT
};

#endif
