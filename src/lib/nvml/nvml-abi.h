/* SPDX-License-Identifier: MIT */
/*
 * nvml-abi.h: the part of NVML's C ABI that libgpuctl uses, declared by us.
 *
 * Decisions:
 * - No nvml.h: these are our own declarations of the facts gpuctl depends on (return codes,
 *   handle type, struct layouts, enum values, function signatures). Each was checked against the
 *   public header NVIDIA ships in the CUDA toolkit, as mirrored in NVIDIA/go-nvml
 *   (gen/nvml/nvml.h; the copy read was the NVML 12.2.140 header). "since" notes give the API
 *   generation in which a symbol or field appeared, where the header says so.
 * - NVML's enums are C enums (int sized). We declare the value types as fixed 32-bit integer
 *   typedefs plus named constants, so the width we pass is explicit and no C enum conversion
 *   can surprise us.
 * - Every function gpuctl resolves has a function type here (nvml_fn_<name>_t). The loader's
 *   table fields have those types, so a call through a resolved pointer is type-checked at
 *   compile time (the systemd dlopen pattern). Versioned variants with the same signature share
 *   one type; variants whose argument struct differs get their own.
 * - Only the NVML loader, src/lib/nvml/nvml-*.c (through nvml-internal.h), includes this file.
 */
#ifndef GPUCTL_NVML_ABI_H
#define GPUCTL_NVML_ABI_H

#include <stdint.h>

/* ---- Return codes (nvmlReturn_t) ---- */
typedef int32_t nvmlReturn_t;
enum {
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
	/* nvml.h 12.x/13: 22-25 are vGPU ECC, resources, frequency, argument version */
	NVML_ERROR_DEPRECATED = 26, /* the function is deprecated by this driver */
	NVML_ERROR_NOT_READY = 27,  /* the system is not ready for the request (yet) */
	NVML_ERROR_UNKNOWN = 999,
};

/* ---- Handles ---- */
/* A device (a physical GPU or a MIG device): an opaque pointer owned by NVML. */
typedef struct nvml_device_opaque *nvmlDevice_t;

/* ---- Buffer sizes NVML guarantees to be enough ---- */
#define NVML_DEVICE_UUID_V2_BUFFER_SIZE        96 /* UUID, incl. MIG UUIDs */
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE        96 /* product name */
#define NVML_DEVICE_SERIAL_BUFFER_SIZE         30 /* board serial */
#define NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
#define NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE   80
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE     32 /* busId of the v2/v3 PCI info */
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE  16 /* busIdLegacy, and busId of v1 */

/* ---- Structs ---- */

/* PCI info as nvmlDeviceGetPciInfo_v2 and _v3 (and nvmlDeviceGetNvLinkRemotePciInfo_v2) fill
 * it; _v2 and _v3 share this layout. 68 bytes. */
typedef struct {
	char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE]; /* "0000:07:00.0" (4-hex domain) */
	uint32_t domain;                                         /* PCI domain */
	uint32_t bus;                                            /* bus number, 0..255 */
	uint32_t device;                                /* device number on the bus, 0..31 */
	uint32_t pciDeviceId;                           /* device id << 16 | vendor id */
	uint32_t pciSubSystemId;                        /* subsystem id (since NVML 2.285) */
	char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE]; /* "00000000:07:00.0" (8-hex domain) */
} nvmlPciInfo_t;

/* PCI info as the unversioned nvmlDeviceGetPciInfo and nvmlDeviceGetNvLinkRemotePciInfo of
 * old drivers fill it: the same first five words, a short busId, then four reserved words.
 * 52 bytes. */
typedef struct {
	char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE]; /* "0000:07:00.0" */
	uint32_t domain;                                   /* PCI domain */
	uint32_t bus;                                      /* bus number */
	uint32_t device;                                   /* device number */
	uint32_t pciDeviceId;                              /* device id << 16 | vendor id */
	uint32_t pciSubSystemId;                           /* subsystem id */
	uint32_t reserved[4];                              /* unused by gpuctl */
} nvmlPciInfo_v1_t;

/* nvmlDeviceGetMemoryInfo (v1): used includes the memory reserved by the driver. */
typedef struct {
	unsigned long long total; /* bytes */
	unsigned long long free;  /* bytes */
	unsigned long long used;  /* bytes, reserved included */
} nvmlMemory_t;

/* nvmlDeviceGetMemoryInfo_v2: versioned; used excludes reserved. 40 bytes (4 of padding after
 * version). */
typedef struct {
	uint32_t version;            /* must be NVML_MEMORY_V2_VERSION */
	unsigned long long total;    /* bytes */
	unsigned long long reserved; /* bytes set aside by driver and firmware */
	unsigned long long free;     /* bytes */
	unsigned long long used;     /* bytes allocated, reserved excluded */
} nvmlMemory_v2_t;

/* NVML's struct version tag: the struct size in the low bits, the version in bits 24..31. */
#define NVML_STRUCT_VERSION_TAG(type, ver) ((uint32_t)(sizeof(type) | ((uint32_t)(ver) << 24)))
#define NVML_MEMORY_V2_VERSION             NVML_STRUCT_VERSION_TAG(nvmlMemory_v2_t, 2)

/* nvmlDeviceGetUtilizationRates. */
typedef struct {
	uint32_t gpu;    /* percent of the sample period a kernel ran */
	uint32_t memory; /* percent of the sample period memory was read or written */
} nvmlUtilization_t;

/* Process entry of the unversioned nvmlDeviceGetComputeRunningProcesses (before MIG). */
typedef struct {
	uint32_t pid;                     /* process id (in the driver's PID namespace) */
	unsigned long long usedGpuMemory; /* bytes, or NVML_VALUE_NOT_AVAILABLE */
} nvmlProcessInfo_v1_t;

/* Process entry of nvmlDeviceGetComputeRunningProcesses_v2 and _v3 (the 12.2 header's
 * nvmlProcessInfo_t is this struct, and _v3 takes nvmlProcessInfo_t). 24 bytes. */
typedef struct {
	uint32_t pid;                     /* process id */
	unsigned long long usedGpuMemory; /* bytes, or NVML_VALUE_NOT_AVAILABLE */
	uint32_t gpuInstanceId;           /* MIG GPU instance, 0xFFFFFFFF without MIG */
	uint32_t computeInstanceId;       /* MIG compute instance, 0xFFFFFFFF without MIG */
} nvmlProcessInfo_v2_t;

/* Process entry that the first R535-branch drivers (NVML 12.2, not R530 / 12.1 as this comment
 * once said; the type keeps the old name) write from nvmlDeviceGetComputeRunningProcesses_v3:
 * the v2 fields plus the confidential-computing protected memory, 32 bytes. Later drivers went
 * back to the 24-byte entry for _v3 and moved the extra field to
 * nvmlDeviceGetRunningProcessDetailList. A driver with nvmlDeviceGetConfComputeMemSizeInfo but
 * without nvmlDeviceGetRunningProcessDetailList is of that branch (the same test nvitop's
 * libnvml.py uses). The first 24 bytes are nvmlProcessInfo_v2_t's layout. */
typedef struct {
	uint32_t pid;                                /* process id */
	unsigned long long usedGpuMemory;            /* bytes, or NVML_VALUE_NOT_AVAILABLE */
	uint32_t gpuInstanceId;                      /* MIG GPU instance */
	uint32_t computeInstanceId;                  /* MIG compute instance */
	unsigned long long usedGpuCcProtectedMemory; /* bytes of protected memory */
} nvmlProcessInfo_r530_t;

/* nvmlDeviceGetViolationStatus: how long a policy held the GPU below its application clocks.
 * The percentage over an interval is d(violationTime) / (d(referenceTime) * 1000) * 100. */
typedef struct {
	unsigned long long referenceTime; /* CPU timestamp of the reading, microseconds */
	unsigned long long violationTime; /* time held back since the driver loaded, nanoseconds */
} nvmlViolationTime_t;

/* nvmlDeviceGetBAR1MemoryInfo: the PCI BAR1 aperture the CPU and peers map GPU memory
 * through, bytes. */
typedef struct {
	unsigned long long bar1Total;
	unsigned long long bar1Free;
	unsigned long long bar1Used;
} nvmlBAR1Memory_t;

/* One entry of nvmlDeviceGetProcessUtilization: a process's share of each engine over the
 * driver's last sample. 32 bytes on LP64 (4 bytes of padding after pid). */
typedef struct {
	uint32_t pid;                 /* process id */
	unsigned long long timeStamp; /* CPU timestamp of the sample, microseconds */
	uint32_t smUtil;              /* percent */
	uint32_t memUtil;             /* percent */
	uint32_t encUtil;             /* percent */
	uint32_t decUtil;             /* percent */
} nvmlProcessUtilizationSample_t;

/* usedGpuMemory when the driver cannot say (NVML_VALUE_NOT_AVAILABLE, -1, as unsigned). */
#define NVML_VALUE_NOT_AVAILABLE_ULL ((unsigned long long)-1)
#define NVML_INVALID_INSTANCE_ID     0xFFFFFFFFu

/* ---- Enumerations ---- */

typedef uint32_t nvmlPerfPolicyType_t;
#define NVML_PERF_POLICY_POWER   0u /* held back by the power limit */
#define NVML_PERF_POLICY_THERMAL 1u /* held back by temperature */

typedef uint32_t nvmlPcieUtilCounter_t;
#define NVML_PCIE_UTIL_TX_BYTES 0u /* bytes the GPU sent */
#define NVML_PCIE_UTIL_RX_BYTES 1u /* bytes the GPU received */

typedef uint32_t nvmlEnableState_t; /* NVML_FEATURE_* */
enum { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 };

typedef uint32_t nvmlBrandType_t; /* NVML_BRAND_* */
enum {
	NVML_BRAND_UNKNOWN = 0,
	NVML_BRAND_QUADRO = 1,
	NVML_BRAND_TESLA = 2,
	NVML_BRAND_NVS = 3,
	NVML_BRAND_GRID = 4,
	NVML_BRAND_GEFORCE = 5,
	NVML_BRAND_TITAN = 6,
	NVML_BRAND_NVIDIA_VAPPS = 7,
	NVML_BRAND_NVIDIA_VPC = 8,
	NVML_BRAND_NVIDIA_VCS = 9,
	NVML_BRAND_NVIDIA_VWS = 10,
	NVML_BRAND_NVIDIA_CLOUD_GAMING = 11,
	NVML_BRAND_QUADRO_RTX = 12,
	NVML_BRAND_NVIDIA_RTX = 13,
	NVML_BRAND_NVIDIA = 14,
	NVML_BRAND_GEFORCE_RTX = 15,
	NVML_BRAND_TITAN_RTX = 16,
};

/* nvmlDeviceArchitecture_t: a plain unsigned int with #defined values in NVML (since 11.x). */
typedef uint32_t nvmlDeviceArchitecture_t;
enum {
	NVML_DEVICE_ARCH_KEPLER = 2,
	NVML_DEVICE_ARCH_MAXWELL = 3,
	NVML_DEVICE_ARCH_PASCAL = 4,
	NVML_DEVICE_ARCH_VOLTA = 5,
	NVML_DEVICE_ARCH_TURING = 6,
	NVML_DEVICE_ARCH_AMPERE = 7,
	NVML_DEVICE_ARCH_ADA = 8,
	NVML_DEVICE_ARCH_HOPPER = 9,
	NVML_DEVICE_ARCH_BLACKWELL = 10,
};
#define NVML_DEVICE_ARCH_UNKNOWN 0xFFFFFFFFu

typedef uint32_t nvmlTemperatureSensors_t;
enum { NVML_TEMPERATURE_GPU = 0 };

typedef uint32_t nvmlTemperatureThresholds_t;
enum {
	NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0,
	NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1,
};

typedef uint32_t nvmlClockType_t;
enum {
	NVML_CLOCK_GRAPHICS = 0,
	NVML_CLOCK_SM = 1,
	NVML_CLOCK_MEM = 2,
	NVML_CLOCK_VIDEO = 3,
};

typedef uint32_t nvmlComputeMode_t; /* same numbers as enum gpuctl_compute_mode */
enum {
	NVML_COMPUTEMODE_DEFAULT = 0,
	NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1,
	NVML_COMPUTEMODE_PROHIBITED = 2,
	NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3,
};

typedef uint32_t nvmlMemoryErrorType_t;
enum { NVML_MEMORY_ERROR_TYPE_CORRECTED = 0, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1 };

typedef uint32_t nvmlEccCounterType_t;
enum { NVML_VOLATILE_ECC = 0, NVML_AGGREGATE_ECC = 1 };

/* Where a memory error happened (nvmlDeviceGetMemoryErrorCounter); gpuctl reads totals with
 * nvmlDeviceGetTotalEccErrors and keeps these only for reference. */
typedef uint32_t nvmlMemoryLocation_t;
enum {
	NVML_MEMORY_LOCATION_L1_CACHE = 0,
	NVML_MEMORY_LOCATION_L2_CACHE = 1,
	NVML_MEMORY_LOCATION_DEVICE_MEMORY = 2,
	NVML_MEMORY_LOCATION_REGISTER_FILE = 3,
};

typedef uint32_t nvmlPageRetirementCause_t;
enum {
	NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0,
	NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1,
};

/* Common PCIe ancestor of two GPUs; the same numbers as enum gpuctl_topo_level. */
typedef uint32_t nvmlGpuTopologyLevel_t;
enum {
	NVML_TOPOLOGY_INTERNAL = 0,
	NVML_TOPOLOGY_SINGLE = 10,
	NVML_TOPOLOGY_MULTIPLE = 20,
	NVML_TOPOLOGY_HOSTBRIDGE = 30,
	NVML_TOPOLOGY_NODE = 40, /* NVML_TOPOLOGY_CPU in old headers */
	NVML_TOPOLOGY_SYSTEM = 50,
};

typedef uint32_t nvmlGpuP2PCapsIndex_t;
enum {
	NVML_P2P_CAPS_INDEX_READ = 0,
	NVML_P2P_CAPS_INDEX_WRITE = 1,
	NVML_P2P_CAPS_INDEX_NVLINK = 2,
	NVML_P2P_CAPS_INDEX_ATOMICS = 3,
	NVML_P2P_CAPS_INDEX_PROP = 4, /* "PCI" in some documentation */
};

/* P2P status: 0..5 equal enum gpuctl_p2p_status; NVML's UNKNOWN (6) maps to ours (-1). */
typedef uint32_t nvmlGpuP2PStatus_t;
enum {
	NVML_P2P_STATUS_OK = 0,
	NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED = 1,
	NVML_P2P_STATUS_GPU_NOT_SUPPORTED = 2,
	NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED = 3,
	NVML_P2P_STATUS_DISABLED_BY_REGKEY = 4,
	NVML_P2P_STATUS_NOT_SUPPORTED = 5,
	NVML_P2P_STATUS_UNKNOWN = 6,
};

/* What is at the far end of an NVLink (nvmlIntNvLinkDeviceType_t). */
typedef uint32_t nvmlIntNvLinkDeviceType_t;
enum {
	NVML_NVLINK_DEVICE_TYPE_GPU = 0x00,
	NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01,
	NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02,
	NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF,
};

/* Link numbers NVML accepts: 18 in the 12.2 header, 36 in later ones (Blackwell). gpuctl walks
 * up to the larger and stops at the first link NVML refuses. */
#define NVML_NVLINK_MAX_LINKS 36

typedef uint32_t nvmlAffinityScope_t;
enum { NVML_AFFINITY_SCOPE_NODE = 0, NVML_AFFINITY_SCOPE_SOCKET = 1 };

/* ---- Field values (nvmlDeviceGetFieldValues, NVML API 9+) ---- */

/* The value of a field sample, interpreted by valueType (NVML_VALUE_TYPE_*: 0 double,
 * 1 unsigned int, 2 unsigned long, 3 unsigned long long, 4 signed long long, 5 signed int,
 * 6 unsigned short). */
typedef union {
	double dVal;
	unsigned int uiVal;
	unsigned long ulVal;
	unsigned long long ullVal;
	long long sllVal;
	int siVal;
	unsigned short usVal;
} nvmlValue_t;
/* nvmlFieldValue_t: fieldId and scopeId in; a per-field return code and the value out. */
typedef struct {
	unsigned int fieldId;
	unsigned int scopeId;
	long long timestamp;
	long long latencyUsec;
	uint32_t valueType;
	nvmlReturn_t nvmlReturn;
	nvmlValue_t value;
} nvmlFieldValue_t;
#define NVML_FI_DEV_GET_GPU_RECOVERY_ACTION 230
#define NVML_FI_DEV_MEMORY_TEMP             82 /* memory temperature, C */
/* The number of NVLinks the device has (nvml.h: "Number of NVLinks present on the device";
 * present in the NVML 12.2 header of driver 535 and in NVML 13's). */
#define NVML_FI_DEV_NVLINK_LINK_COUNT 91
/* Health counters as field values (the same numbers as their direct calls; ids from nvml.h, all
 * in the NVML 12.2 header of driver 535): ECC totals (single bit = corrected, double bit =
 * uncorrected; volatile, aggregate), the PCIe replay counter, remapped rows (correctable,
 * uncorrectable, pending 1/0, failure 1/0). */
#define NVML_FI_DEV_ECC_SBE_VOL_TOTAL   3
#define NVML_FI_DEV_ECC_DBE_VOL_TOTAL   4
#define NVML_FI_DEV_ECC_SBE_AGG_TOTAL   5
#define NVML_FI_DEV_ECC_DBE_AGG_TOTAL   6
#define NVML_FI_DEV_PCIE_REPLAY_COUNTER 94
#define NVML_FI_DEV_REMAPPED_COR        142
#define NVML_FI_DEV_REMAPPED_UNC        143
#define NVML_FI_DEV_REMAPPED_PENDING    144
#define NVML_FI_DEV_REMAPPED_FAILURE    145
/* Retired pages (nvml.h: "Number of retired pages because of single bit errors", "... double bit
 * errors", "If any pages are pending retirement. 1=yes. 0=no."): the counts
 * nvmlDeviceGetRetiredPages gives per cause and nvmlDeviceGetRetiredPagesPendingStatus's answer;
 * in go-nvml's first header, 2019. */
#define NVML_FI_DEV_RETIRED_SBE     29
#define NVML_FI_DEV_RETIRED_DBE     30
#define NVML_FI_DEV_RETIRED_PENDING 31
/* The ECC mode, current and pending (nvml.h: "Current ECC mode. 1=Active. 0=Inactive"), the
 * answer of nvmlDeviceGetEccMode; and one NVLink's state, the link in scopeId (nvml.h:
 * "NVLink State - Active,Inactive": NVML_NVLINK_STATE_INACTIVE 0, _ACTIVE 1, _SLEEP 2), the
 * answer of nvmlDeviceGetNvLinkState. All in the NVML 12.2 header of driver 535. */
#define NVML_FI_DEV_ECC_CURRENT      1
#define NVML_FI_DEV_ECC_PENDING      2
#define NVML_FI_DEV_NVLINK_GET_STATE 165
#define NVML_NVLINK_STATE_INACTIVE   0
#define NVML_NVLINK_STATE_ACTIVE     1
#define NVML_NVLINK_STATE_SLEEP      2
/* Power, mW (nvml.h, since the NVML 12.2 header of driver 535): the draw averaged over 1 s
 * ("supported on Ampere (except GA100) or newer"), the instant draw ("supported on all
 * architectures") and the limit enforced ("Limit currently enforced in milliwatts"). The
 * documentation of nvmlDeviceGetPowerUsage says it gives the 1 s average where there is one and
 * the instant draw on GA100 and older, and nvmlDeviceGetEnforcedPowerLimit the limit enforced:
 * the same facts. And the number of NVLinks connected to an NVSwitch (nvml.h: "Number of NVLinks
 * connected to NVSwitch"; in go-nvml's first header, 2019). */
#define NVML_FI_DEV_POWER_AVERAGE                 185
#define NVML_FI_DEV_POWER_INSTANT                 186
#define NVML_FI_DEV_POWER_CURRENT_LIMIT           190
#define NVML_FI_DEV_NVSWITCH_CONNECTED_LINK_COUNT 147

/* ---- Events (NVML API 11+) ---- */

typedef struct nvmlEventSet_st *nvmlEventSet_t;
/* nvmlEventData_t: the device, the event type bit, the data (for an XID event the XID; 999 when
 * NVML cannot name it), and the MIG GPU / compute instance ids (0xFFFFFFFF for none). */
typedef struct {
	nvmlDevice_t device;
	unsigned long long eventType;
	unsigned long long eventData;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
} nvmlEventData_t;
/* nvmlEventType* bits gpuctl registers */
#define NVML_EVENT_TYPE_XID_CRITICAL_ERROR 0x0000000000000008ULL

/* ---- Function types ---- */

typedef nvmlReturn_t nvml_fn_init_t(void);                       /* nvmlInit_v2, nvmlInit */
typedef nvmlReturn_t nvml_fn_shutdown_t(void);                   /* nvmlShutdown */
typedef const char *nvml_fn_error_string_t(nvmlReturn_t result); /* nvmlErrorString */
typedef nvmlReturn_t nvml_fn_get_count_t(unsigned int *count);   /* nvmlDeviceGetCount[_v2] */
typedef nvmlReturn_t nvml_fn_handle_by_index_t(unsigned int index, nvmlDevice_t *device);
typedef nvmlReturn_t nvml_fn_sys_string_t(char *buf, unsigned int length); /* driver/NVML ver */
typedef nvmlReturn_t nvml_fn_sys_int_t(int *value); /* nvmlSystemGetCudaDriverVersion[_v2] */

/* device → string (UUID, name, serial) */
typedef nvmlReturn_t nvml_fn_dev_string_t(nvmlDevice_t device, char *buf, unsigned int length);
/* device → one unsigned int (minor number, power, PCIe gen/width, replays, ...) */
typedef nvmlReturn_t nvml_fn_dev_uint_t(nvmlDevice_t device, unsigned int *value);
/* device → one 64-bit mask (clocks-event / throttle reasons) */
typedef nvmlReturn_t nvml_fn_dev_ull_t(nvmlDevice_t device, unsigned long long *value);
/* device → two unsigned ints (MIG mode current/pending) */
typedef nvmlReturn_t nvml_fn_dev_uint2_t(nvmlDevice_t device, unsigned int *a, unsigned int *b);

typedef nvmlReturn_t nvml_fn_pci_info_t(nvmlDevice_t device, nvmlPciInfo_t *pci);
typedef nvmlReturn_t nvml_fn_pci_info_v1_t(nvmlDevice_t device, nvmlPciInfo_v1_t *pci);
typedef nvmlReturn_t nvml_fn_brand_t(nvmlDevice_t device, nvmlBrandType_t *brand);
typedef nvmlReturn_t nvml_fn_arch_t(nvmlDevice_t device, nvmlDeviceArchitecture_t *arch);
typedef nvmlReturn_t nvml_fn_cc_t(nvmlDevice_t device, int *major, int *minor);
typedef nvmlReturn_t nvml_fn_memory_t(nvmlDevice_t device, nvmlMemory_t *memory);
typedef nvmlReturn_t nvml_fn_memory_v2_t(nvmlDevice_t device, nvmlMemory_v2_t *memory);
typedef nvmlReturn_t nvml_fn_utilization_t(nvmlDevice_t device, nvmlUtilization_t *util);
typedef nvmlReturn_t nvml_fn_temperature_t(nvmlDevice_t device, nvmlTemperatureSensors_t sensor,
                                           unsigned int *temp);
typedef nvmlReturn_t nvml_fn_temp_threshold_t(nvmlDevice_t device,
                                              nvmlTemperatureThresholds_t threshold,
                                              unsigned int *temp);
typedef nvmlReturn_t nvml_fn_clock_t(nvmlDevice_t device, nvmlClockType_t type, unsigned int *mhz);
typedef nvmlReturn_t nvml_fn_enable_state_t(nvmlDevice_t device, nvmlEnableState_t *state);
typedef nvmlReturn_t nvml_fn_compute_mode_t(nvmlDevice_t device, nvmlComputeMode_t *mode);
typedef nvmlReturn_t nvml_fn_ecc_mode_t(nvmlDevice_t device, nvmlEnableState_t *current,
                                        nvmlEnableState_t *pending);
typedef nvmlReturn_t nvml_fn_total_ecc_t(nvmlDevice_t device, nvmlMemoryErrorType_t error_type,
                                         nvmlEccCounterType_t counter_type,
                                         unsigned long long *count);
typedef nvmlReturn_t nvml_fn_retired_pages_t(nvmlDevice_t device, nvmlPageRetirementCause_t cause,
                                             unsigned int *page_count,
                                             unsigned long long *addresses);
typedef nvmlReturn_t nvml_fn_remapped_rows_t(nvmlDevice_t device, unsigned int *corrected,
                                             unsigned int *uncorrected, unsigned int *pending,
                                             unsigned int *failure);
typedef nvmlReturn_t nvml_fn_cpu_affinity_t(nvmlDevice_t device, unsigned int cpu_set_size,
                                            unsigned long *cpu_set);
typedef nvmlReturn_t nvml_fn_memory_affinity_t(nvmlDevice_t device, unsigned int node_set_size,
                                               unsigned long *node_set, nvmlAffinityScope_t scope);
typedef nvmlReturn_t nvml_fn_mig_handle_t(nvmlDevice_t device, unsigned int index,
                                          nvmlDevice_t *mig_device);
typedef nvmlReturn_t nvml_fn_procs_v2_t(nvmlDevice_t device, unsigned int *count,
                                        nvmlProcessInfo_v2_t *infos);
typedef nvmlReturn_t nvml_fn_procs_v1_t(nvmlDevice_t device, unsigned int *count,
                                        nvmlProcessInfo_v1_t *infos);
typedef nvmlReturn_t nvml_fn_common_ancestor_t(nvmlDevice_t a, nvmlDevice_t b,
                                               nvmlGpuTopologyLevel_t *level);
typedef nvmlReturn_t nvml_fn_p2p_status_t(nvmlDevice_t a, nvmlDevice_t b,
                                          nvmlGpuP2PCapsIndex_t caps, nvmlGpuP2PStatus_t *status);
typedef nvmlReturn_t nvml_fn_nvlink_state_t(nvmlDevice_t device, unsigned int link,
                                            nvmlEnableState_t *active);
typedef nvmlReturn_t nvml_fn_nvlink_remote_type_t(nvmlDevice_t device, unsigned int link,
                                                  nvmlIntNvLinkDeviceType_t *type);
typedef nvmlReturn_t nvml_fn_nvlink_remote_pci_t(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t *pci);
typedef nvmlReturn_t nvml_fn_nvlink_remote_pci_v1_t(nvmlDevice_t device, unsigned int link,
                                                    nvmlPciInfo_v1_t *pci);

/* nvmlNvLinkErrorCounter_t: DL_REPLAY 0, DL_RECOVERY 1, DL_CRC_FLIT 2, DL_CRC_DATA 3 */
typedef nvmlReturn_t nvml_fn_nvlink_error_counter_t(nvmlDevice_t device, unsigned int link,
                                                    uint32_t counter, unsigned long long *value);
typedef nvmlReturn_t nvml_fn_field_values_t(nvmlDevice_t device, int count,
                                            nvmlFieldValue_t *values);
typedef nvmlReturn_t nvml_fn_violation_t(nvmlDevice_t device, nvmlPerfPolicyType_t policy,
                                         nvmlViolationTime_t *time);
typedef nvmlReturn_t nvml_fn_bar1_t(nvmlDevice_t device, nvmlBAR1Memory_t *bar1);
/* value in KB/s over NVML's 20 ms sample */
typedef nvmlReturn_t nvml_fn_pcie_throughput_t(nvmlDevice_t device, nvmlPcieUtilCounter_t counter,
                                               unsigned int *value);
typedef nvmlReturn_t nvml_fn_process_util_t(nvmlDevice_t device,
                                            nvmlProcessUtilizationSample_t *samples,
                                            unsigned int *count, unsigned long long last_seen_us);
typedef nvmlReturn_t nvml_fn_event_set_create_t(nvmlEventSet_t *set);
typedef nvmlReturn_t nvml_fn_register_events_t(nvmlDevice_t device, unsigned long long types,
                                               nvmlEventSet_t set);
typedef nvmlReturn_t nvml_fn_event_set_wait_t(nvmlEventSet_t set, nvmlEventData_t *data,
                                              unsigned int timeout_ms);
typedef nvmlReturn_t nvml_fn_event_set_free_t(nvmlEventSet_t set);

#endif /* GPUCTL_NVML_ABI_H */
