// SPDX-License-Identifier: MIT
/*
 * field.c: the table of per-GPU facts: JSON key, nvidia-smi --query-gpu name, CSV unit, type.
 *
 * One table serves every renderer (table, CSV, JSON, --query, later the exporter), so a field
 * is added in exactly one place. nvidia-smi names follow `nvidia-smi --help-query-gpu`; where
 * nvidia-smi knows a field under two names (old "throttle" and new "event" spellings, short
 * aliases), the aliases table maps the other spelling to the same field. A name nvidia-smi
 * gives another fact is not an alias: "pcie.link.gen.gpumax" is the GPU's own maximum, not the
 * maximum of GPU and slot that pcie.link.gen.max is (docs/nvidia-smi-csv.md).
 */
#include <errno.h>
#include <strings.h>

#include "gpuctl/gpuctl.h"

#define INT(id_, key_, smi_, unit_s_, unit_, flag_, doc_)                                          \
	[id_] = {id_, key_, smi_, unit_s_, GPUCTL_FT_INT, unit_, flag_, doc_}
#define STR(id_, key_, smi_, flag_, doc_)                                                          \
	[id_] = {id_, key_, smi_, "", GPUCTL_FT_STR, GPUCTL_FU_NONE, flag_, doc_}

static const struct gpuctl_field_info fields[GPUCTL__F_COUNT] = {
        INT(GPUCTL_F_INDEX, "index", "index", "", GPUCTL_FU_NONE, 0, "NVML index (PCI bus order)"),
        STR(GPUCTL_F_UUID, "uuid", "uuid", 0, "GPU UUID, the GPU's identity"),
        STR(GPUCTL_F_PCI_BUS_ID, "pci_bus_id", "pci.bus_id", 0,
            "PCI bus id, domain:bus:device.function"),
        INT(GPUCTL_F_PCI_DEVICE_ID, "pci_device_id", "pci.device_id", "", GPUCTL_FU_HEX, 0,
            "PCI device id << 16 | vendor id"),
        STR(GPUCTL_F_NAME, "name", "name", 0, "product name"),
        STR(GPUCTL_F_BRAND, "brand", NULL, 0, "product brand"),
        STR(GPUCTL_F_ARCHITECTURE, "architecture", NULL, 0, "GPU architecture"),
        STR(GPUCTL_F_COMPUTE_CAP, "compute_cap", "compute_cap", 0, "CUDA compute capability"),
        STR(GPUCTL_F_SERIAL, "serial", "serial", 0, "board serial number"),
        INT(GPUCTL_F_MINOR_NUMBER, "minor_number", NULL, "", GPUCTL_FU_NONE, 0,
            "N of the device node /dev/nvidiaN"),
        INT(GPUCTL_F_MEMORY_TOTAL, "memory_total", "memory.total", " [MiB]", GPUCTL_FU_BYTES, 0,
            "total memory, bytes"),
        INT(GPUCTL_F_MEMORY_USED, "memory_used", "memory.used", " [MiB]", GPUCTL_FU_BYTES, 0,
            "used memory, bytes"),
        INT(GPUCTL_F_MEMORY_FREE, "memory_free", "memory.free", " [MiB]", GPUCTL_FU_BYTES, 0,
            "free memory, bytes"),
        INT(GPUCTL_F_UTIL_GPU, "utilization_gpu", "utilization.gpu", " [%]", GPUCTL_FU_PERCENT, 0,
            "percent of time a kernel ran"),
        INT(GPUCTL_F_UTIL_MEMORY, "utilization_memory", "utilization.memory", " [%]",
            GPUCTL_FU_PERCENT, 0, "percent of time memory was read or written"),
        INT(GPUCTL_F_TEMP, "temperature_gpu", "temperature.gpu", "", GPUCTL_FU_CELSIUS, 0,
            "GPU temperature, C"),
        INT(GPUCTL_F_TEMP_SLOWDOWN, "temperature_slowdown", NULL, "", GPUCTL_FU_CELSIUS, 0,
            "temperature at which the GPU slows down, C"),
        INT(GPUCTL_F_TEMP_SHUTDOWN, "temperature_shutdown", NULL, "", GPUCTL_FU_CELSIUS, 0,
            "temperature at which the GPU shuts down, C"),
        INT(GPUCTL_F_POWER_DRAW, "power_draw", "power.draw", " [W]", GPUCTL_FU_MW, 0,
            "power draw, mW"),
        INT(GPUCTL_F_POWER_LIMIT, "power_limit", "enforced.power.limit", " [W]", GPUCTL_FU_MW, 0,
            "enforced power limit, mW"),
        INT(GPUCTL_F_CLOCK_SM, "clocks_sm", "clocks.current.sm", " [MHz]", GPUCTL_FU_MHZ, 0,
            "current SM clock, MHz"),
        INT(GPUCTL_F_CLOCK_MEM, "clocks_mem", "clocks.current.memory", " [MHz]", GPUCTL_FU_MHZ, 0,
            "current memory clock, MHz"),
        INT(GPUCTL_F_CLOCK_SM_MAX, "clocks_max_sm", "clocks.max.sm", " [MHz]", GPUCTL_FU_MHZ, 0,
            "maximum SM clock, MHz"),
        INT(GPUCTL_F_CLOCK_MEM_MAX, "clocks_max_mem", "clocks.max.memory", " [MHz]", GPUCTL_FU_MHZ,
            0, "maximum memory clock, MHz"),
        INT(GPUCTL_F_CLOCKS_EVENT_REASONS, "clocks_event_reasons", "clocks_event_reasons.active",
            "", GPUCTL_FU_HEX, 0, "active clocks-event (throttle) reason bits"),
        INT(GPUCTL_F_PCIE_GEN, "pcie_gen", "pcie.link.gen.current", "", GPUCTL_FU_NONE, 0,
            "current PCIe generation"),
        INT(GPUCTL_F_PCIE_GEN_MAX, "pcie_gen_max", "pcie.link.gen.max", "", GPUCTL_FU_NONE, 0,
            "maximum PCIe generation of GPU and slot"),
        INT(GPUCTL_F_PCIE_WIDTH, "pcie_width", "pcie.link.width.current", "", GPUCTL_FU_NONE, 0,
            "current PCIe link width, lanes"),
        INT(GPUCTL_F_PCIE_WIDTH_MAX, "pcie_width_max", "pcie.link.width.max", "", GPUCTL_FU_NONE, 0,
            "maximum PCIe link width, lanes"),
        INT(GPUCTL_F_PCIE_REPLAY, "pcie_replay_counter", NULL, "", GPUCTL_FU_NONE,
            GPUCTL_SNAP_HEALTH, "PCIe replay counter"),
        INT(GPUCTL_F_PERSISTENCE_MODE, "persistence_mode", "persistence_mode", "", GPUCTL_FU_BOOL,
            0, "persistence mode"),
        INT(GPUCTL_F_COMPUTE_MODE, "compute_mode", "compute_mode", "", GPUCTL_FU_ENUM, 0,
            "compute mode: Default, Exclusive_Process or Prohibited"),
        INT(GPUCTL_F_ECC_MODE, "ecc_mode", "ecc.mode.current", "", GPUCTL_FU_BOOL, 0,
            "ECC mode now"),
        INT(GPUCTL_F_ECC_MODE_PENDING, "ecc_mode_pending", "ecc.mode.pending", "", GPUCTL_FU_BOOL,
            0, "ECC mode after the next reboot"),
        INT(GPUCTL_F_MIG_MODE, "mig_mode", "mig.mode.current", "", GPUCTL_FU_BOOL, 0,
            "MIG mode now"),
        INT(GPUCTL_F_MIG_MODE_PENDING, "mig_mode_pending", "mig.mode.pending", "", GPUCTL_FU_BOOL,
            0, "MIG mode after the next GPU reset"),
        INT(GPUCTL_F_ECC_VOL_CORRECTED, "ecc_volatile_corrected",
            "ecc.errors.corrected.volatile.total", "", GPUCTL_FU_NONE, GPUCTL_SNAP_HEALTH,
            "corrected ECC errors since the driver loaded"),
        INT(GPUCTL_F_ECC_VOL_UNCORRECTED, "ecc_volatile_uncorrected",
            "ecc.errors.uncorrected.volatile.total", "", GPUCTL_FU_NONE, GPUCTL_SNAP_HEALTH,
            "uncorrected ECC errors since the driver loaded"),
        INT(GPUCTL_F_ECC_AGG_CORRECTED, "ecc_aggregate_corrected",
            "ecc.errors.corrected.aggregate.total", "", GPUCTL_FU_NONE, GPUCTL_SNAP_HEALTH,
            "corrected ECC errors over the GPU's life"),
        INT(GPUCTL_F_ECC_AGG_UNCORRECTED, "ecc_aggregate_uncorrected",
            "ecc.errors.uncorrected.aggregate.total", "", GPUCTL_FU_NONE, GPUCTL_SNAP_HEALTH,
            "uncorrected ECC errors over the GPU's life"),
        INT(GPUCTL_F_RETIRED_SBE, "retired_pages_sbe", "retired_pages.single_bit_ecc.count", "",
            GPUCTL_FU_NONE, GPUCTL_SNAP_HEALTH, "pages retired for single-bit errors (pre-Ampere)"),
        INT(GPUCTL_F_RETIRED_DBE, "retired_pages_dbe", "retired_pages.double_bit.count", "",
            GPUCTL_FU_NONE, GPUCTL_SNAP_HEALTH, "pages retired for double-bit errors (pre-Ampere)"),
        INT(GPUCTL_F_RETIRED_PENDING, "retired_pages_pending", "retired_pages.pending", "",
            GPUCTL_FU_YESNO, GPUCTL_SNAP_HEALTH, "a page retirement waits for the next reboot"),
        INT(GPUCTL_F_REMAP_CORRECTABLE, "remapped_rows_correctable", "remapped_rows.correctable",
            "", GPUCTL_FU_NONE, GPUCTL_SNAP_HEALTH,
            "rows remapped for correctable errors (Ampere+)"),
        INT(GPUCTL_F_REMAP_UNCORRECTABLE, "remapped_rows_uncorrectable",
            "remapped_rows.uncorrectable", "", GPUCTL_FU_NONE, GPUCTL_SNAP_HEALTH,
            "rows remapped for uncorrectable errors (Ampere+)"),
        INT(GPUCTL_F_REMAP_PENDING, "remapped_rows_pending", "remapped_rows.pending", "",
            GPUCTL_FU_YESNO, GPUCTL_SNAP_HEALTH, "a row remap waits for the next GPU reset"),
        INT(GPUCTL_F_REMAP_FAILURE, "remapped_rows_failure", "remapped_rows.failure", "",
            GPUCTL_FU_YESNO, GPUCTL_SNAP_HEALTH, "a row remap has failed"),
        INT(GPUCTL_F_NUMA_NODE, "numa_node", NULL, "", GPUCTL_FU_NONE, 0,
            "CPU NUMA node the GPU is attached to"),
        INT(GPUCTL_F_GPU_NUMA_NODE, "gpu_numa_node", NULL, "", GPUCTL_FU_NONE, 0,
            "NUMA node of the GPU's own memory (Grace systems)"),
        STR(GPUCTL_F_CPU_AFFINITY, "cpu_affinity", NULL, 0, "ideal CPUs for the GPU, a cpulist"),
        INT(GPUCTL_F_TEMP_MEMORY, "temperature_memory", "temperature.memory", "", GPUCTL_FU_CELSIUS,
            0, "memory (HBM) temperature, C"),
        INT(GPUCTL_F_UTIL_ENCODER, "utilization_encoder", "utilization.encoder", " [%]",
            GPUCTL_FU_PERCENT, 0, "percent of time the video encoder was busy"),
        INT(GPUCTL_F_UTIL_DECODER, "utilization_decoder", "utilization.decoder", " [%]",
            GPUCTL_FU_PERCENT, 0, "percent of time the video decoder was busy"),
        INT(GPUCTL_F_ENERGY, "energy_total", NULL, "", GPUCTL_FU_NONE, 0,
            "energy used since the driver loaded, mJ"),
        INT(GPUCTL_F_VIOLATION_POWER, "violation_power", NULL, "", GPUCTL_FU_NONE, 0,
            "time the power limit held the GPU below its application clocks, ns"),
        INT(GPUCTL_F_VIOLATION_THERMAL, "violation_thermal", NULL, "", GPUCTL_FU_NONE, 0,
            "time temperature held the GPU below its application clocks, ns"),
        INT(GPUCTL_F_BAR1_TOTAL, "bar1_total", NULL, " [MiB]", GPUCTL_FU_BYTES, 0,
            "BAR1 aperture, bytes"),
        INT(GPUCTL_F_BAR1_USED, "bar1_used", NULL, " [MiB]", GPUCTL_FU_BYTES, 0,
            "BAR1 mapped, bytes"),
        INT(GPUCTL_F_PCIE_RX, "pcie_rx", NULL, "", GPUCTL_FU_NONE, 0,
            "PCIe receive rate, bytes/s (NVML's 20 ms sample)"),
        INT(GPUCTL_F_PCIE_TX, "pcie_tx", NULL, "", GPUCTL_FU_NONE, 0,
            "PCIe send rate, bytes/s (NVML's 20 ms sample)"),
        INT(GPUCTL_F_RECOVERY_ACTION, "gpu_recovery_action", "gpu_recovery_action", "",
            GPUCTL_FU_NONE, GPUCTL_SNAP_HEALTH,
            "recovery the driver asks for: 0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 "
            "drain and reset, 5 recover IMEX"),
        INT(GPUCTL_F_FAN_SPEED, "fan_speed", "fan.speed", " [%]", GPUCTL_FU_PERCENT, 0,
            "the first fan's speed, percent of its maximum (N/A without fans)"),
        INT(GPUCTL_F_PSTATE, "pstate", "pstate", "", GPUCTL_FU_ENUM, 0,
            "performance state, P0 (most performance) to P15"),
        INT(GPUCTL_F_POWER_MGMT_LIMIT, "power_management_limit", "power.limit", " [W]",
            GPUCTL_FU_MW, 0, "software power limit (nvidia-smi -pl), W"),
};

/* Other spellings nvidia-smi accepts for the same fact. */
static const struct {
	const char *name;
	enum gpuctl_field id;
} aliases[] = {
        {"gpu_uuid", GPUCTL_F_UUID},
        {"gpu_name", GPUCTL_F_NAME},
        {"gpu_serial", GPUCTL_F_SERIAL},
        {"gpu_bus_id", GPUCTL_F_PCI_BUS_ID},
        {"clocks.sm", GPUCTL_F_CLOCK_SM},
        {"clocks.mem", GPUCTL_F_CLOCK_MEM},
        {"clocks.max.mem", GPUCTL_F_CLOCK_MEM_MAX},
        {"clocks_throttle_reasons.active", GPUCTL_F_CLOCKS_EVENT_REASONS},
        {"pcie.link.gen.gpucurrent", GPUCTL_F_PCIE_GEN},
        {"retired_pages.sbe", GPUCTL_F_RETIRED_SBE},
        {"retired_pages.dbe", GPUCTL_F_RETIRED_DBE},
        {"temperature", GPUCTL_F_TEMP},
        /* gpuctl's own earlier name: nvidia-smi's list (--help-query-gpu, drivers 590 to 610)
         * has "power.limit" only */
        {"power.management.limit", GPUCTL_F_POWER_MGMT_LIMIT},
};

const struct gpuctl_field_info *gpuctl_field_info(enum gpuctl_field id)
{
	if ((unsigned)id >= GPUCTL__F_COUNT)
		return NULL;
	return &fields[id];
}

int gpuctl_field_lookup(const char *name)
{
	if (!name)
		return -EINVAL;
	for (unsigned i = 0; i < GPUCTL__F_COUNT; i++) {
		if (strcasecmp(name, fields[i].key) == 0 ||
		    (fields[i].smi_name && strcasecmp(name, fields[i].smi_name) == 0))
			return (int)i;
	}
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (strcasecmp(name, aliases[i].name) == 0)
			return (int)aliases[i].id;
	return -EINVAL;
}
