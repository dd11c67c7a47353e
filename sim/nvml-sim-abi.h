/* The simulator's own reading of NVML's C ABI: only the types, constants and prototypes the
 * simulated library implements. Written from NVIDIA's public nvml.h as shipped in the NVML
 * 12.2.140 developer package (mirrored in NVIDIA/go-nvml, gen/nvml/nvml.h); each group names
 * the NVML API version it was checked against. Deliberately independent of src/lib's
 * declarations (design.md section 5): two readings of the ABI catch each other's mistakes. */
#ifndef NVML_SIM_ABI_H
#define NVML_SIM_ABI_H

#include <stdint.h>

/* Return codes (nvmlReturn_t, NVML API 12; values unchanged since their introduction). */
typedef enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_UNINITIALIZED = 1,
	NVML_ERROR_INVALID_ARGUMENT = 2,
	NVML_ERROR_NOT_SUPPORTED = 3,
	NVML_ERROR_NO_PERMISSION = 4,
	NVML_ERROR_ALREADY_INITIALIZED = 5,
	NVML_ERROR_NOT_FOUND = 6,
	NVML_ERROR_INSUFFICIENT_SIZE = 7,
	NVML_ERROR_INSUFFICIENT_POWER = 8,
	NVML_ERROR_DRIVER_NOT_LOADED = 9,
	NVML_ERROR_TIMEOUT = 10,
	NVML_ERROR_IRQ_ISSUE = 11,
	NVML_ERROR_LIBRARY_NOT_FOUND = 12,
	NVML_ERROR_FUNCTION_NOT_FOUND = 13,
	NVML_ERROR_CORRUPTED_INFOROM = 14,
	NVML_ERROR_GPU_IS_LOST = 15,
	NVML_ERROR_RESET_REQUIRED = 16,
	NVML_ERROR_OPERATING_SYSTEM = 17,
	NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
	NVML_ERROR_IN_USE = 19,
	NVML_ERROR_MEMORY = 20,
	NVML_ERROR_NO_DATA = 21,
	NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
	NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
	NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
	NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
	NVML_ERROR_DEPRECATED = 26,
	NVML_ERROR_NOT_READY = 27,
	NVML_ERROR_UNKNOWN = 999,
} nvmlReturn_t;

/* Opaque handles. The simulator defines struct nvmlDevice_st itself (sim/nvml/internal.h). */
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;
/* One event (nvmlEventSetWait_v2): the device, the event type bit, the data (for an XID event
 * the XID; 999 for one NVML cannot name), and the MIG GPU/compute instance ids (0xFFFFFFFF when
 * none). 32 bytes on LP64 (NVML API 11+). */
struct nvmlEventData_st {
	nvmlDevice_t device;
	unsigned long long eventType;
	unsigned long long eventData;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
};
/* Event type bits (nvmlEventType*). */
#define NVML_EVENT_TYPE_SINGLE_BIT_ECC 0x0000000000000001ULL
#define NVML_EVENT_TYPE_DOUBLE_BIT_ECC 0x0000000000000002ULL
#define NVML_EVENT_TYPE_XID            0x0000000000000008ULL

/* Buffer sizes the API documents as always sufficient (NVML API 12). */
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE     32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE  16
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE        96
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE        96
#define NVML_DEVICE_SERIAL_BUFFER_SIZE         30
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE   80

/* nvmlPciInfo_t, used by both nvmlDeviceGetPciInfo_v2 and _v3 (NVML API 12; the 32-byte busId
 * and the 16-byte busIdLegacy date from the v2 API, pciSubSystemId from NVML 2.285). */
typedef struct nvmlPciInfo_st {
	char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE]; /* "%04X:%02X:%02X.0" */
	unsigned int domain;                                     /* 0..0xffffffff */
	unsigned int bus;                                        /* 0..0xff */
	unsigned int device;                                     /* 0..31 */
	unsigned int pciDeviceId;                                /* device id << 16 | vendor id */
	unsigned int pciSubSystemId;                             /* subsystem device id */
	char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];          /* "%08X:%02X:%02X.0" */
} nvmlPciInfo_t;

/* Memory info v1 (NVML API 1..12): used includes the driver's reservation. */
typedef struct nvmlMemory_st {
	unsigned long long total; /* bytes */
	unsigned long long free;  /* bytes */
	unsigned long long used;  /* bytes, reserved included */
} nvmlMemory_t;

/* Memory info v2 (NVML API 11.5+): versioned; reserved reported apart. The caller must set
 * version to nvmlMemory_v2 = sizeof(struct) | 2 << 24. */
typedef struct nvmlMemory_v2_st {
	unsigned int version;
	unsigned long long total;
	unsigned long long reserved;
	unsigned long long free;
	unsigned long long used;
} nvmlMemory_v2_t;
#define nvmlMemory_v2 ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2U << 24)))

/* Utilisation percentages over the last sample period (NVML API 1..12). */
typedef struct nvmlUtilization_st {
	unsigned int gpu;
	unsigned int memory;
} nvmlUtilization_t;

/* Process info: v1 for the plain call, v2 for _v2, and the _v3 call uses nvmlProcessInfo_t,
 * which in NVML API 12.2 has the v2 layout (gpuInstanceId/computeInstanceId 0xFFFFFFFF when
 * MIG is off). */
typedef struct nvmlProcessInfo_v1_st {
	unsigned int pid;
	unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct nvmlProcessInfo_v2_st {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t;
typedef nvmlProcessInfo_v2_t nvmlProcessInfo_t;

/* Enable state (nvmlEnableState_t). */
typedef enum { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 } nvmlEnableState_t;

/* Brands (nvmlBrandType_t, NVML API 12.2). */
typedef enum {
	NVML_BRAND_UNKNOWN = 0,
	NVML_BRAND_QUADRO = 1,
	NVML_BRAND_TESLA = 2,
	NVML_BRAND_NVS = 3,
	NVML_BRAND_GRID = 4,
	NVML_BRAND_GEFORCE = 5,
	NVML_BRAND_TITAN = 6,
	NVML_BRAND_QUADRO_RTX = 12,
	NVML_BRAND_NVIDIA_RTX = 13,
	NVML_BRAND_NVIDIA = 14,
} nvmlBrandType_t;

/* Architectures (nvmlDeviceArchitecture_t, plain unsigned int; NVML API 12.2 up to Hopper,
 * Blackwell = 10 added in NVML API 12.8). */
typedef unsigned int nvmlDeviceArchitecture_t;
#define NVML_DEVICE_ARCH_KEPLER    2
#define NVML_DEVICE_ARCH_MAXWELL   3
#define NVML_DEVICE_ARCH_PASCAL    4
#define NVML_DEVICE_ARCH_VOLTA     5
#define NVML_DEVICE_ARCH_TURING    6
#define NVML_DEVICE_ARCH_AMPERE    7
#define NVML_DEVICE_ARCH_ADA       8
#define NVML_DEVICE_ARCH_HOPPER    9
#define NVML_DEVICE_ARCH_BLACKWELL 10
#define NVML_DEVICE_ARCH_UNKNOWN   0xffffffffU

/* Temperatures (NVML API 12.2). */
typedef enum { NVML_TEMPERATURE_GPU = 0 } nvmlTemperatureSensors_t;
typedef enum {
	NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0,
	NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1,
} nvmlTemperatureThresholds_t;

/* Compute modes (nvmlComputeMode_t). */
typedef enum {
	NVML_COMPUTEMODE_DEFAULT = 0,
	NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1,
	NVML_COMPUTEMODE_PROHIBITED = 2,
	NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3,
} nvmlComputeMode_t;

/* Clock domains (nvmlClockType_t). */
typedef enum {
	NVML_CLOCK_GRAPHICS = 0,
	NVML_CLOCK_SM = 1,
	NVML_CLOCK_MEM = 2,
	NVML_CLOCK_VIDEO = 3,
} nvmlClockType_t;

/* ECC (nvmlMemoryErrorType_t, nvmlEccCounterType_t). */
typedef enum {
	NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
	NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
} nvmlMemoryErrorType_t;
typedef enum { NVML_VOLATILE_ECC = 0, NVML_AGGREGATE_ECC = 1 } nvmlEccCounterType_t;

/* Page retirement causes (nvmlPageRetirementCause_t). */
typedef enum {
	NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0,
	NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1,
} nvmlPageRetirementCause_t;

/* MIG modes (NVML API 11+). */
#define NVML_DEVICE_MIG_DISABLE 0
#define NVML_DEVICE_MIG_ENABLE  1

/* Topology levels (nvmlGpuTopologyLevel_t; spaced by 10 on purpose). */
typedef enum {
	NVML_TOPOLOGY_INTERNAL = 0,
	NVML_TOPOLOGY_SINGLE = 10,
	NVML_TOPOLOGY_MULTIPLE = 20,
	NVML_TOPOLOGY_HOSTBRIDGE = 30,
	NVML_TOPOLOGY_NODE = 40,
	NVML_TOPOLOGY_SYSTEM = 50,
} nvmlGpuTopologyLevel_t;

/* P2P (nvmlGpuP2PStatus_t, nvmlGpuP2PCapsIndex_t; consecutive from 0). */
typedef enum {
	NVML_P2P_STATUS_OK = 0,
	NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED = 1,
	NVML_P2P_STATUS_GPU_NOT_SUPPORTED = 2,
	NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED = 3,
	NVML_P2P_STATUS_DISABLED_BY_REGKEY = 4,
	NVML_P2P_STATUS_NOT_SUPPORTED = 5,
	NVML_P2P_STATUS_UNKNOWN = 6,
} nvmlGpuP2PStatus_t;
typedef enum {
	NVML_P2P_CAPS_INDEX_READ = 0,
	NVML_P2P_CAPS_INDEX_WRITE = 1,
	NVML_P2P_CAPS_INDEX_NVLINK = 2,
	NVML_P2P_CAPS_INDEX_ATOMICS = 3,
	NVML_P2P_CAPS_INDEX_PROP = 4,
	NVML_P2P_CAPS_INDEX_UNKNOWN = 5,
} nvmlGpuP2PCapsIndex_t;

/* NVLink remote device type (nvmlIntNvLinkDeviceType_t). */
typedef enum {
	NVML_NVLINK_DEVICE_TYPE_GPU = 0x00,
	NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01,
	NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02,
	NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF,
} nvmlIntNvLinkDeviceType_t;

/* Affinity scope (nvmlAffinityScope_t, NVML API 11+). */
typedef unsigned int nvmlAffinityScope_t;
#define NVML_AFFINITY_SCOPE_NODE   0
#define NVML_AFFINITY_SCOPE_SOCKET 1

/* Prototypes of every function the simulator exports. */
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlInit(void);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t result);
nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length);
nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length);
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion);
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount);
nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length);
nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t *type);
nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t *arch);
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor);
nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length);
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization);
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                      unsigned int *temp);
nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device,
                                               nvmlTemperatureThresholds_t thresholdType,
                                               unsigned int *temp);
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power);
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit);
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock);
nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                       unsigned int *clock);
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long *clocksEventReasons);
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long *clocksThrottleReasons);
nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int *currLinkGen);
nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int *maxLinkGen);
nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int *currLinkWidth);
nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int *maxLinkWidth);
nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int *value);
nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int *utilization,
                                             unsigned int *samplingPeriodUs);
nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int *utilization,
                                             unsigned int *samplingPeriodUs);
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *energy);

/* Performance policies a clock-violation counter can be asked for (nvmlPerfPolicyType_t, NVML
 * API 12.2). The numbering has a gap: 6..9 name nothing, and the two totals sit at 10 and 11. */
typedef enum {
	NVML_PERF_POLICY_POWER = 0,              /* held back by the power cap */
	NVML_PERF_POLICY_THERMAL = 1,            /* held back by temperature */
	NVML_PERF_POLICY_SYNC_BOOST = 2,         /* held back by a sync-boost group */
	NVML_PERF_POLICY_BOARD_LIMIT = 3,        /* held back by the board's own limit */
	NVML_PERF_POLICY_LOW_UTILIZATION = 4,    /* held back because the GPU was nearly idle */
	NVML_PERF_POLICY_RELIABILITY = 5,        /* held back for board reliability */
	NVML_PERF_POLICY_TOTAL_APP_CLOCKS = 10,  /* all causes, below application clocks */
	NVML_PERF_POLICY_TOTAL_BASE_CLOCKS = 11, /* all causes, below base clocks */
} nvmlPerfPolicyType_t;

/* One reading of a violation counter (NVML API 12.2; 16 bytes). A tool samples it twice and
 * divides the growth of violationTime by the growth of referenceTime to get the share of time
 * the clocks were held below the application clocks. */
typedef struct nvmlViolationTime_st {
	unsigned long long referenceTime; /* when the reading was taken: a CPU clock, in us */
	unsigned long long violationTime; /* total time held back so far, in ns */
} nvmlViolationTime_t;
nvmlReturn_t nvmlDeviceGetViolationStatus(nvmlDevice_t device, nvmlPerfPolicyType_t perfPolicyType,
                                          nvmlViolationTime_t *violTime);

/* The BAR1 aperture, through which the CPU and peers map GPU memory (NVML API 12.2; all three in
 * bytes, free = total - used; 24 bytes). */
typedef struct nvmlBAR1Memory_st {
	unsigned long long bar1Total;
	unsigned long long bar1Free;
	unsigned long long bar1Used;
} nvmlBAR1Memory_t;
nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t *bar1Memory);

/* PCIe traffic counters (nvmlPcieUtilCounter_t, NVML API 12.2): the driver measures over a 20 ms
 * window and reports KB/s. Only these two values are defined. */
typedef enum {
	NVML_PCIE_UTIL_TX_BYTES = 0, /* GPU to host */
	NVML_PCIE_UTIL_RX_BYTES = 1, /* host to GPU */
} nvmlPcieUtilCounter_t;
nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, nvmlPcieUtilCounter_t counter,
                                         unsigned int *value);

/* One process's share of the GPU's engines over the last sample (NVML API 12.2). On LP64 the
 * struct is 32 bytes: pid, 4 bytes of padding, then the 8-byte timestamp and four percents. */
typedef struct nvmlProcessUtilizationSample_st {
	unsigned int pid;
	unsigned long long timeStamp; /* when the sample was taken: a CPU clock, in us */
	unsigned int smUtil;          /* % of SM time */
	unsigned int memUtil;         /* % of frame-buffer bandwidth */
	unsigned int encUtil;         /* % of encoder time */
	unsigned int decUtil;         /* % of decoder time */
} nvmlProcessUtilizationSample_t;
/* Sizing: with utilization NULL, or *processSamplesCount below the number of samples, the call
 * answers INSUFFICIENT_SIZE and sets the count needed. Only samples newer than
 * lastSeenTimeStamp come back; none at all is NOT_FOUND. */
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t *utilization,
                                             unsigned int *processSamplesCount,
                                             unsigned long long lastSeenTimeStamp);

/* Field values (NVML API 9+): the caller sets fieldId (and scopeId) of each entry; NVML fills a
 * per-entry return code, a value type and the value. 40 bytes on LP64. */
typedef union nvmlValue_st {
	double dVal;
	unsigned int uiVal;
	unsigned long ulVal;
	unsigned long long ullVal;
	long long sllVal;
	int siVal;
	unsigned short usVal;
} nvmlValue_t;
typedef struct nvmlFieldValue_st {
	unsigned int fieldId;
	unsigned int scopeId;
	long long timestamp;
	long long latencyUsec;
	unsigned int valueType; /* NVML_VALUE_TYPE_*: 1 unsigned int */
	nvmlReturn_t nvmlReturn;
	nvmlValue_t value;
} nvmlFieldValue_t;
#define NVML_VALUE_TYPE_UNSIGNED_INT        1
#define NVML_FI_DEV_GET_GPU_RECOVERY_ACTION 230
#define NVML_FI_DEV_MEMORY_TEMP             82 /* memory temperature, C */
#define NVML_FI_DEV_NVLINK_LINK_COUNT       91 /* NVLinks present on the device */
/* health counters as field values (each the number its direct call gives) */
#define NVML_FI_DEV_ECC_SBE_VOL_TOTAL   3   /* volatile corrected (single bit) ECC errors */
#define NVML_FI_DEV_ECC_DBE_VOL_TOTAL   4   /* volatile uncorrected (double bit) */
#define NVML_FI_DEV_ECC_SBE_AGG_TOTAL   5   /* aggregate corrected */
#define NVML_FI_DEV_ECC_DBE_AGG_TOTAL   6   /* aggregate uncorrected */
#define NVML_FI_DEV_PCIE_REPLAY_COUNTER 94  /* PCIe replays */
#define NVML_FI_DEV_REMAPPED_COR        142 /* rows remapped for correctable errors */
#define NVML_FI_DEV_REMAPPED_UNC        143 /* rows remapped for uncorrectable errors */
#define NVML_FI_DEV_REMAPPED_PENDING    144 /* a remapping pending: 1, else 0 */
#define NVML_FI_DEV_REMAPPED_FAILURE    145 /* a remapping failed: 1, else 0 */
#define NVML_FI_DEV_RETIRED_SBE         29  /* pages retired for single bit errors */
#define NVML_FI_DEV_RETIRED_DBE         30  /* pages retired for double bit errors */
#define NVML_FI_DEV_RETIRED_PENDING     31  /* a retirement pending: 1, else 0 */
/* ECC mode (nvml.h: "Current ECC mode. 1=Active. 0=Inactive", and the pending one) and one
 * NVLink's state (scopeId = the link; NVML_NVLINK_STATE_INACTIVE 0, _ACTIVE 1, _SLEEP 2), each as
 * its direct call answers it (nvmlDeviceGetEccMode, nvmlDeviceGetNvLinkState) */
#define NVML_FI_DEV_ECC_CURRENT            1
#define NVML_FI_DEV_ECC_PENDING            2
#define NVML_FI_DEV_NVLINK_GET_STATE       165
#define NVML_NVLINK_STATE_INACTIVE         0
#define NVML_NVLINK_STATE_ACTIVE           1
#define NVML_VALUE_TYPE_UNSIGNED_LONG_LONG 3
/* power (nvml.h, NVML 12.2 on): the 1 s average (Ampere but GA100, and later), the instant draw
 * (every GPU) and the limit enforced, mW, each as its direct call answers (nvmlDeviceGetPowerUsage
 * gives the average where there is one, nvmlDeviceGetEnforcedPowerLimit the limit); the NVLinks
 * that reach an NVSwitch (as nvmlDeviceGetNvLinkRemoteDeviceType would count them) */
#define NVML_FI_DEV_POWER_AVERAGE                 185
#define NVML_FI_DEV_POWER_INSTANT                 186
#define NVML_FI_DEV_POWER_CURRENT_LIMIT           190
#define NVML_FI_DEV_NVSWITCH_CONNECTED_LINK_COUNT 147
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
                                      nvmlFieldValue_t *values);
nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t *mode);
nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t *mode);
nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t *current,
                                  nvmlEnableState_t *pending);
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode,
                                  unsigned int *pendingMode);
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                         nvmlEccCounterType_t counterType,
                                         unsigned long long *eccCounts);
nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, nvmlPageRetirementCause_t cause,
                                       unsigned int *pageCount, unsigned long long *addresses);
nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device,
                                                    nvmlEnableState_t *isPending);
nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows,
                                       unsigned int *uncRows, unsigned int *isPending,
                                       unsigned int *failureOccurred);
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count);
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t *migDevice);
nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice);
nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id);
nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id);
nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
                                                          nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_v2_t *infos);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                  nvmlProcessInfo_v1_t *infos);
/* Early R535 branch (NVML 12.2); the struct argument is never filled by the simulator. */
nvmlReturn_t nvmlDeviceGetConfComputeMemSizeInfo(nvmlDevice_t device, void *memInfo);
nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int cpuSetSize,
                                      unsigned long *cpuSet);
nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t device, unsigned int nodeSetSize,
                                         unsigned long *nodeSet, nvmlAffinityScope_t scope);
nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int *node);
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                 nvmlGpuTopologyLevel_t *pathInfo);
nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2,
                                    nvmlGpuP2PCapsIndex_t p2pIndex, nvmlGpuP2PStatus_t *p2pStatus);
/* nvmlNvLinkErrorCounter_t: DL_REPLAY 0, DL_RECOVERY 1, DL_CRC_FLIT 2, DL_CRC_DATA 3,
 * DL_ECC_DATA 4 (NVML API 8+; ECC_DATA later). */
nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t device, unsigned int link,
                                             unsigned int counter,
                                             unsigned long long *counterValue);
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t *isActive);
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                 nvmlIntNvLinkDeviceType_t *pNvLinkDeviceType);
nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set);
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                      nvmlEventSet_t set);
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, struct nvmlEventData_st *data,
                                 unsigned int timeoutms);
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set);
nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *eventTypes);

/* What NVML clients other than gpuctl call (nvtop, gpustat, pynvml, nvitop), checked against the
 * NVML 13 header of go-nvml (gen/nvml/nvml.h, commit 2f9e261) and present in driver 535's
 * libnvidia-ml.so.1. */

/* nvmlInitWithFlags: nvmlInit_v2 with behaviour flags; bit 0 lets init succeed with no GPU,
 * bit 1 skips attaching to the GPUs (they attach at the handle lookups instead). */
#define NVML_INIT_FLAG_NO_GPUS   0x1U
#define NVML_INIT_FLAG_NO_ATTACH 0x2U
nvmlReturn_t nvmlInitWithFlags(unsigned int flags);
/* Lookups: UUID (a GPU's "GPU-..." or a MIG device's "MIG-..."), PCI bus id in any of the forms
 * domain:bus:device.function, domain:bus:device or bus:device.function (hex); the plain
 * ByPciBusId is the v1 entry point of the same lookup. nvmlDeviceGetIndex gives the handle's
 * NVML index, or for a MIG device handle its index under the parent. */
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index);
/* The first PCI info layout, of the unversioned nvmlDeviceGetPciInfo: a 16-byte busId in the
 * 4-hex-digit-domain form, the ids, then four reserved words; 52 bytes. */
typedef struct nvmlPciInfo_v1_st {
	char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE]; /* "%04X:%02X:%02X.0" */
	unsigned int domain;
	unsigned int bus;
	unsigned int device;
	unsigned int pciDeviceId;
	unsigned int pciSubSystemId;
	unsigned int reserved[4];
} nvmlPciInfo_v1_t;
nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_v1_t *pci);
/* Graphics and MPS process lists: the same entries and sizing as the compute lists. */
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                      nvmlProcessInfo_t *infos);
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                                      nvmlProcessInfo_v2_t *infos);
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                   nvmlProcessInfo_v1_t *infos);
nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t device,
                                                        unsigned int *infoCount,
                                                        nvmlProcessInfo_t *infos);
nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v2(nvmlDevice_t device,
                                                        unsigned int *infoCount,
                                                        nvmlProcessInfo_v2_t *infos);
nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_v1_t *infos);
/* Fans: percent of the product's maximum; NOT_SUPPORTED on boards without a fan of their own
 * (passively cooled data-centre parts). _v2 names the fan (0-based); an index past the last fan
 * is INVALID_ARGUMENT. */
nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed);
nvmlReturn_t nvmlDeviceGetFanSpeed_v2(nvmlDevice_t device, unsigned int fan, unsigned int *speed);
nvmlReturn_t nvmlDeviceGetNumFans(nvmlDevice_t device, unsigned int *numFans);
/* Performance state (nvmlPstates_t): P0 (0, most performance) to P15 (15), 32 = unknown. */
#define NVML_PSTATE_UNKNOWN 32
nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, unsigned int *pState);
nvmlReturn_t nvmlDeviceGetPowerState(nvmlDevice_t device, unsigned int *pState);
/* Power management, all in mW: the limit set (what the power algorithm holds the board to), the
 * range it may be set in, the limit the board boots with, and whether power management is on. */
nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *limit);
nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device,
                                                          unsigned int *minLimit,
                                                          unsigned int *maxLimit);
nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device,
                                                      unsigned int *defaultLimit);
nvmlReturn_t nvmlDeviceGetPowerManagementMode(nvmlDevice_t device, nvmlEnableState_t *mode);
/* Display: DisplayMode is a monitor physically connected, DisplayActive a display initialised
 * (an X server's screen), which can be true with no monitor. */
nvmlReturn_t nvmlDeviceGetDisplayMode(nvmlDevice_t device, nvmlEnableState_t *display);
nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t device, nvmlEnableState_t *isActive);
/* Windows driver model (WDDM 0, WDM/TCC 1): for Windows only, NOT_SUPPORTED on Linux. */
nvmlReturn_t nvmlDeviceGetDriverModel(nvmlDevice_t device, unsigned int *current,
                                      unsigned int *pending);
/* NVLink version of a link, as nvmlNvlinkVersion_t: 1 = NVLink 1.0 (Pascal), 2 = 2.0 (Volta),
 * 3 = 2.2, 4 = 3.0 (Ampere), 5 = 3.1, 6 = 4.0 (Hopper), 7 = 5.0 (Blackwell); 0 is invalid. */
#define NVML_NVLINK_VERSION_1_0 1U
#define NVML_NVLINK_VERSION_2_0 2U
#define NVML_NVLINK_VERSION_3_0 4U
#define NVML_NVLINK_VERSION_4_0 6U
#define NVML_NVLINK_VERSION_5_0 7U
nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t device, unsigned int link,
                                        unsigned int *version);

#endif
