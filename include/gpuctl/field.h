/* SPDX-License-Identifier: MIT */
/*
 * field.h: every per-GPU fact a snapshot holds, as a field id, and the fields' metadata.
 *
 * Decisions:
 * - A fact NVML could not give reads as unavailable (-ENODATA), never 0; renderers are
 *   data-driven over struct gpuctl_field_info (gpuctl.h, "Decisions").
 *
 * Part of libgpuctl's public API (include <gpuctl/gpuctl.h>, which includes every header; the
 * rules that hold for all of them are there). Compiles on its own, as C and as C++
 * (tests/unit/test-headers.c).
 */
#ifndef GPUCTL_FIELD_H
#define GPUCTL_FIELD_H

#include "decls.h"

/* Exported: see gpuctl.h, "What these headers declare is libgpuctl's whole ABI". */
GPUCTL_BEGIN_DECLS

/* ---- Per-GPU fields ---- */

/* Every per-GPU fact. Integer fields are in base units: bytes, milliwatts, MHz, degrees C,
 * percent; booleans are 0/1; enums use the values documented next to them. */
enum gpuctl_field {
	/* identity (strings unless noted) */
	GPUCTL_F_INDEX,         /* int: NVML index (PCI bus order) */
	GPUCTL_F_UUID,          /* "GPU-xxxxxxxx-..." */
	GPUCTL_F_PCI_BUS_ID,    /* "00000000:07:00.0" as NVML prints it */
	GPUCTL_F_PCI_DEVICE_ID, /* int: device id << 16 | vendor id */
	GPUCTL_F_NAME,          /* "NVIDIA A100-SXM4-80GB" */
	GPUCTL_F_BRAND,         /* "Tesla", "GeForce", ... */
	GPUCTL_F_ARCHITECTURE,  /* "Ampere", "Hopper", ... */
	GPUCTL_F_COMPUTE_CAP,   /* "8.0" */
	GPUCTL_F_SERIAL,        /* board serial */
	GPUCTL_F_MINOR_NUMBER,  /* int: N of /dev/nvidiaN */
	/* memory and load */
	GPUCTL_F_MEMORY_TOTAL, /* bytes */
	GPUCTL_F_MEMORY_USED,  /* bytes */
	GPUCTL_F_MEMORY_FREE,  /* bytes */
	GPUCTL_F_UTIL_GPU,     /* percent */
	GPUCTL_F_UTIL_MEMORY,  /* percent */
	/* thermal and power */
	GPUCTL_F_TEMP,          /* C */
	GPUCTL_F_TEMP_SLOWDOWN, /* C, the GPU's slowdown threshold */
	GPUCTL_F_TEMP_SHUTDOWN, /* C, the GPU's shutdown threshold */
	GPUCTL_F_POWER_DRAW,    /* mW */
	GPUCTL_F_POWER_LIMIT,   /* mW, enforced limit */
	/* clocks */
	GPUCTL_F_CLOCK_SM,             /* MHz */
	GPUCTL_F_CLOCK_MEM,            /* MHz */
	GPUCTL_F_CLOCK_SM_MAX,         /* MHz */
	GPUCTL_F_CLOCK_MEM_MAX,        /* MHz */
	GPUCTL_F_CLOCKS_EVENT_REASONS, /* bit mask, NVML's clocks-event reason bits */
	/* PCIe */
	GPUCTL_F_PCIE_GEN, /* current generation */
	GPUCTL_F_PCIE_GEN_MAX,
	GPUCTL_F_PCIE_WIDTH, /* current lanes */
	GPUCTL_F_PCIE_WIDTH_MAX,
	GPUCTL_F_PCIE_REPLAY, /* replay counter (GPUCTL_SNAP_HEALTH) */
	/* modes */
	GPUCTL_F_PERSISTENCE_MODE, /* bool */
	GPUCTL_F_COMPUTE_MODE,     /* enum gpuctl_compute_mode */
	GPUCTL_F_ECC_MODE,         /* bool, current */
	GPUCTL_F_ECC_MODE_PENDING, /* bool, after next reboot */
	GPUCTL_F_MIG_MODE,         /* bool, current */
	GPUCTL_F_MIG_MODE_PENDING, /* bool */
	/* memory errors (GPUCTL_SNAP_HEALTH) */
	GPUCTL_F_ECC_VOL_CORRECTED,
	GPUCTL_F_ECC_VOL_UNCORRECTED,
	GPUCTL_F_ECC_AGG_CORRECTED,
	GPUCTL_F_ECC_AGG_UNCORRECTED,
	GPUCTL_F_RETIRED_SBE,       /* pages retired for multiple single-bit errors (pre-Ampere) */
	GPUCTL_F_RETIRED_DBE,       /* pages retired for double-bit errors (pre-Ampere) */
	GPUCTL_F_RETIRED_PENDING,   /* bool */
	GPUCTL_F_REMAP_CORRECTABLE, /* rows remapped for correctable errors (Ampere+) */
	GPUCTL_F_REMAP_UNCORRECTABLE, /* rows remapped for uncorrectable errors */
	GPUCTL_F_REMAP_PENDING,       /* bool */
	GPUCTL_F_REMAP_FAILURE,       /* bool */
	/* placement */
	GPUCTL_F_NUMA_NODE,     /* int: the CPU NUMA node the GPU is attached to */
	GPUCTL_F_GPU_NUMA_NODE, /* int: the GPU memory's own NUMA node (Grace systems) */
	GPUCTL_F_CPU_AFFINITY,  /* string: ideal CPUs as a Linux cpulist, "0-15,128-143" */
	/* recovery (GPUCTL_SNAP_HEALTH) */
	GPUCTL_F_RECOVERY_ACTION, /* int: the action the driver asks for: enum gpuctl_recovery */
	/* telemetry added for the exporter (and watch) */
	GPUCTL_F_TEMP_MEMORY,  /* int: memory (HBM) temperature, C */
	GPUCTL_F_UTIL_ENCODER, /* int: video encoder utilisation, percent */
	GPUCTL_F_UTIL_DECODER, /* int: video decoder utilisation, percent */
	GPUCTL_F_ENERGY,       /* int: energy used since the driver loaded, mJ */
	/* for watch's groups (nvidia-smi dmon -s v, m, t) */
	GPUCTL_F_VIOLATION_POWER,   /* int: time the power limit held the GPU below its
	                             * application clocks since the driver loaded, ns */
	GPUCTL_F_VIOLATION_THERMAL, /* int: the same for temperature, ns */
	GPUCTL_F_BAR1_TOTAL,        /* int: BAR1 aperture, bytes */
	GPUCTL_F_BAR1_USED,         /* int: BAR1 mapped, bytes */
	GPUCTL_F_PCIE_RX,           /* int: PCIe receive rate, bytes/s (NVML's 20 ms sample) */
	GPUCTL_F_PCIE_TX,           /* int: PCIe send rate, bytes/s */
	/* what nvidia-smi --query-gpu scripts ask for */
	GPUCTL_F_FAN_SPEED,        /* int: the first fan's speed, percent of its maximum */
	GPUCTL_F_PSTATE,           /* int: performance state, 0 (P0, most) to 15 */
	GPUCTL_F_POWER_MGMT_LIMIT, /* int: the software power limit, mW (nvidia-smi -pl) */
	GPUCTL__F_COUNT
};

/* NVML's GPU recovery action values (field NVML_FI_DEV_GET_GPU_RECOVERY_ACTION). */
enum gpuctl_recovery {
	GPUCTL_RECOVERY_NONE = 0,
	GPUCTL_RECOVERY_GPU_RESET = 1,
	GPUCTL_RECOVERY_NODE_REBOOT = 2,
	GPUCTL_RECOVERY_DRAIN_P2P = 3,
	GPUCTL_RECOVERY_DRAIN_AND_RESET = 4,
	GPUCTL_RECOVERY_RECOVER_IMEX = 5,
	GPUCTL_RECOVERY_BUS_RESET = 6,     /* NVML 615: reset the GPU's PCIe bus */
	GPUCTL_RECOVERY_SYSTEM_REBOOT = 7, /* NVML 615: reboot the whole system */
};

enum gpuctl_compute_mode {
	GPUCTL_COMPUTE_DEFAULT = 0,
	GPUCTL_COMPUTE_EXCLUSIVE_THREAD = 1, /* removed from NVML, kept for old drivers */
	GPUCTL_COMPUTE_PROHIBITED = 2,
	GPUCTL_COMPUTE_EXCLUSIVE_PROCESS = 3,
};

enum gpuctl_field_type {
	GPUCTL_FT_INT,
	GPUCTL_FT_STR,
};

/* How a field is shown to people; renderers use it, the snapshot ignores it. */
enum gpuctl_field_unit {
	GPUCTL_FU_NONE,  /* plain integer or string */
	GPUCTL_FU_BYTES, /* shown in MiB */
	GPUCTL_FU_MW,    /* shown in W with two decimals */
	GPUCTL_FU_MHZ,
	GPUCTL_FU_CELSIUS,
	GPUCTL_FU_PERCENT,
	GPUCTL_FU_BOOL,  /* Enabled / Disabled */
	GPUCTL_FU_YESNO, /* Yes / No */
	GPUCTL_FU_HEX,   /* 0x%08X */
	GPUCTL_FU_ENUM,  /* a name from the field's own table (compute mode) */
};

/* Library-owned (static), read through gpuctl_field_info(); grows at its end. */
struct gpuctl_field_info {
	enum gpuctl_field id;
	const char *key;      /* JSON key and gpuctl --query name, e.g. "memory_used" */
	const char *smi_name; /* nvidia-smi --query-gpu name, e.g. "memory.used"; NULL if none */
	const char *csv_unit; /* unit suffix of nvidia-smi's CSV header: " [MiB]", " [W]" or "" */
	enum gpuctl_field_type type;
	enum gpuctl_field_unit unit;
	unsigned snap_flag; /* the gpuctl_snapshot_flags bit needed to read it (0: always) */
	const char *doc;    /* one line for --help and docs/json.md */
};

/* Metadata of one field, NULL if id is out of range. */
const struct gpuctl_field_info *gpuctl_field_info(enum gpuctl_field id);
/* Looks a field up by our key, nvidia-smi's query name, or one of nvidia-smi's aliases
 * (case-insensitive). Returns the field id, or -EINVAL if name is unknown. */
int gpuctl_field_lookup(const char *name);

GPUCTL_END_DECLS

#endif /* GPUCTL_FIELD_H */
