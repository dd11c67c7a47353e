/* The scenario model: one simulated machine as parsed and validated from sim/SCENARIO.md
 * (schema 1). Parsing builds plain C structs so the NVML functions answer without touching
 * JSON; derived facts (PCIe common ancestor, P2P status, NVLink wiring) are computed here so
 * the unit tests can check them without loading the library. */
#ifndef SIM_SCENARIO_H
#define SIM_SCENARIO_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* nvmlDeviceGpuRecoveryAction_t: NONE 0, GPU_RESET 1, NODE_REBOOT 2, DRAIN_P2P 3,
 * DRAIN_AND_RESET 4, RECOVER_IMEX 5 (nvml.h, API 13); BUS_RESET 6 and SYSTEM_REBOOT 7 were added
 * between NVML 610 and 615 (NVML API change log): the largest value a scenario may hold. */
#define SIM_RECOVERY_ACTION_MAX 7

#define SIM_MAX_GPUS     128
#define SIM_MAX_MIG      7    /* most MIG devices one GPU exposes (A100/H100: 7) */
#define SIM_MAX_LINKS    36   /* link numbers >= this are INVALID_ARGUMENT */
#define SIM_MAX_PATH     16   /* pcie_path entries */
#define SIM_MAX_CPUS     8192 /* highest CPU number + 1 a cpulist may name */
#define SIM_MAX_NODES    1024 /* highest NUMA node number + 1 */
#define SIM_MAX_SWITCHES 64   /* NVSwitch devices */
#define SIM_MAX_FILE     (16 << 20)

/* Levels and statuses use NVML's numbers so the library passes them through. */
enum sim_level {
	SIM_LEVEL_INTERNAL = 0,
	SIM_LEVEL_SINGLE = 10,
	SIM_LEVEL_MULTIPLE = 20,
	SIM_LEVEL_HOSTBRIDGE = 30,
	SIM_LEVEL_NODE = 40,
	SIM_LEVEL_SYSTEM = 50,
};

enum sim_arch {
	SIM_ARCH_KEPLER = 2,
	SIM_ARCH_MAXWELL,
	SIM_ARCH_PASCAL,
	SIM_ARCH_VOLTA,
	SIM_ARCH_TURING,
	SIM_ARCH_AMPERE,
	SIM_ARCH_ADA,
	SIM_ARCH_HOPPER,
	SIM_ARCH_BLACKWELL,
};

/* An optional integer: valid says whether the scenario gave it. */
struct sim_opt {
	bool valid;
	unsigned long long v;
};

struct sim_mig_instance {
	char profile[32];    /* "3g.40gb" */
	unsigned int gi, ci; /* GPU and compute instance ids */
	char uuid[96];       /* "MIG-..." */
	unsigned long long memory_mib;
};

/* One NVLink of one GPU, numbered from 0 in scenario order. */
struct sim_link {
	bool to_switch;           /* remote is an NVSwitch, else a GPU */
	unsigned int remote;      /* GPU index, or switch number */
	unsigned int remote_link; /* the link's number on the remote GPU (GPU links only) */
	bool down;                /* present but down (nvlink.down), both ends */
};

struct sim_gpu {
	unsigned int index;
	char uuid[48];
	char pci_bus_id[32]; /* "00000000:07:00.0" */
	unsigned int domain, bus, device, function;
	unsigned int pci_device_id; /* device << 16 | 0x10DE */
	char name[96];
	unsigned int brand; /* nvmlBrandType_t value */
	unsigned int arch;  /* enum sim_arch */
	int cc_major, cc_minor;
	char serial[32];
	bool has_serial;
	unsigned int minor_number;
	char board[64]; /* "" = none */

	unsigned long long memory_total_mib, memory_reserved_mib, memory_used_mib;
	unsigned int utilization_gpu, utilization_memory;
	unsigned int temperature_c;
	struct sim_opt temperature_slowdown_c, temperature_shutdown_c;
	struct sim_opt power_draw_mw, power_limit_mw;
	/* power limit range and boot-time limit, mW; absent: NOT_SUPPORTED / power_limit_mw */
	struct sim_opt power_limit_min_mw, power_limit_max_mw, power_limit_default_mw;
	struct sim_opt fan_speed_pct;     /* the one fan's speed; absent: no fan (NOT_SUPPORTED) */
	struct sim_opt performance_state; /* P-state 0..15; absent: P0 */
	/* absent: NOT_SUPPORTED (no HBM sensor, no video engines, no energy counter) */
	struct sim_opt temperature_memory_c, utilization_encoder, utilization_decoder, energy_mj;
	/* percent of time clocks are held back by power / by temperature; absent: NOT_SUPPORTED */
	struct sim_opt violation_power_pct, violation_thermal_pct;
	/* BAR1 aperture; total absent: NOT_SUPPORTED; used absent: 0 (never above total) */
	struct sim_opt bar1_total_mib, bar1_used_mib;
	/* PCIe throughput, KB/s; both valid or neither (pcie_throughput_kbs absent) */
	struct sim_opt pcie_rx_kbs, pcie_tx_kbs;
	struct sim_opt clock_sm, clock_mem, max_clock_sm, max_clock_mem;
	unsigned long long clocks_event_reasons;
	unsigned int pcie_gen, pcie_width, pcie_max_gen, pcie_max_width, pcie_replay;
	bool persistence_mode;
	unsigned int compute_mode; /* nvmlComputeMode_t value */
	bool has_ecc, ecc_enabled, ecc_pending;
	unsigned long long ecc_vol_corr, ecc_vol_uncorr, ecc_agg_corr, ecc_agg_uncorr;
	unsigned int retired_sbe, retired_dbe;
	bool retired_pending;
	unsigned int remap_corr, remap_uncorr;
	bool remap_pending, remap_failure;
	struct sim_opt
	        recovery_action; /* NVML_FI_DEV_GET_GPU_RECOVERY_ACTION; absent: unknown field */
	int numa_node;
	struct sim_opt gpu_numa_node;
	unsigned long *cpu_affinity; /* bitmask, cpu_words longs; NULL = unknown */
	size_t cpu_words;
	char path[SIM_MAX_PATH][32]; /* pcie_path */
	unsigned int path_len;
	bool has_mig, mig_enabled, mig_pending;
	struct sim_mig_instance mig[SIM_MAX_MIG];
	unsigned int mig_count; /* instances (0 while MIG is disabled) */
	unsigned int p2p;       /* nvmlGpuP2PStatus_t value */
	struct sim_link links[SIM_MAX_LINKS];
	unsigned int link_count;
	/* bit N: link N is disabled on this part (reduced-link SKUs): NOT_SUPPORTED, not counted */
	uint64_t nvlink_disabled;
};

struct sim_numa_node {
	int node, socket;
};

/* The CPU model nvsim exec writes into the simulated /proc/cpuinfo (SCENARIO.md, cpus.model). */
struct sim_cpu_model {
	bool present;       /* the scenario declares one */
	char vendor_id[16]; /* x86 vendor_id ("GenuineIntel"); "" for Arm */
	int family, model;  /* x86 cpu family and model; -1 when not x86 */
	int implementer;    /* Arm CPU implementer (0x41); -1 when not Arm */
	int part;           /* Arm CPU part (0xd4f); -1 when not Arm */
	char name[96];      /* model name; "" if none */
};

struct sim_pair_override {
	unsigned int a, b, value;
};

struct sim_scenario {
	char name[64];
	char *description;
	char driver_version[80], nvml_version[80];
	int cuda_driver_version;
	struct sim_numa_node *nodes;
	size_t n_nodes;
	unsigned long **node_cpus; /* per node, bitmask of cpu_words longs */
	struct sim_cpu_model cpu;  /* cpus.model */
	size_t cpu_words;
	unsigned int threads_per_core; /* cpus.threads_per_core (1 when absent) */
	struct sim_gpu *gpus;
	unsigned int n_gpus;
	bool nvswitch;
	unsigned int switches;
	char switch_bus_id[SIM_MAX_SWITCHES][32];
	struct sim_pair_override *topo_overrides, *p2p_overrides;
	size_t n_topo_overrides, n_p2p_overrides;
};

/* Parses a scenario from memory. On failure returns -EINVAL (or -ENOMEM) and writes
 * "JSON.PATH: what is wrong" (or "line L column C: ...") to err. */
int sim_scenario_parse(const char *buf, size_t len, struct sim_scenario **ret, char *err,
                       size_t errlen);
/* The same over an already parsed document (borrowed). */
int sim_scenario_from_json(json_t *root, struct sim_scenario **ret, char *err, size_t errlen);
/* Loads JSON text from memory with the simulator's limits (no NUL, no duplicate keys). */
int sim_json_load(const char *buf, size_t len, json_t **ret, char *err, size_t errlen);
void sim_scenario_free(struct sim_scenario *s);

/* Derived facts (rules in SCENARIO.md). */
unsigned int sim_common_ancestor(const struct sim_scenario *s, unsigned int a, unsigned int b);
unsigned int sim_p2p_status(const struct sim_scenario *s, unsigned int a, unsigned int b);
/* Number of links between two GPUs (direct), or both on the fabric: nonzero when connected. */
bool sim_nvlink_connected(const struct sim_scenario *s, unsigned int a, unsigned int b);

/* Deep merge: every key of src into dst, objects merged key by key, other values replaced. */
int sim_json_merge(json_t *dst, json_t *src);

/* Name tables shared with nvsim. */
int sim_brand_from_name(const char *name);
int sim_arch_from_name(const char *name);
const char *sim_arch_name(unsigned int arch);
int sim_cpulist_parse(const char *s, unsigned long **ret, size_t *ret_words);

/* Writes the scenario's CPU topology as Linux's sysfs shows it under root (root/devices/system/cpu
 * and root/bus/cpu/devices), for `nvsim exec` (GPUCTL_SYSFS) and for hwloc (HWLOC_FSROOT on the
 * directory above root). sim/sysfs.c; docs in sim/SCENARIO.md "cpus". */
int sim_sysfs_write(const struct sim_scenario *s, const char *root);
/* Writes the NVIDIA driver's per-GPU information files of the scenario's GPUs under root
 * (root/gpus/<bus id>/information, as /proc/driver/nvidia), for `nvsim exec`
 * (GPUCTL_NVIDIA_PROC). sim/procfs.c. */
int sim_procfs_write(const struct sim_scenario *s, const char *root);
/* The MIG capability table and the character device majors under proc (the machine's /proc):
 * proc/driver/nvidia-caps/mig-minors and proc/devices (GPUCTL_NVIDIA_CAPS_PROC,
 * GPUCTL_PROC_DEVICES). sim/procfs.c. */
int sim_procfs_write_caps(const struct sim_scenario *s, const char *proc);

#endif
