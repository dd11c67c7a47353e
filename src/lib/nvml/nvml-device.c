// SPDX-License-Identifier: MIT
/*
 * nvml-device.c: a GPU's own fields: identity (UUID, PCI, name, ...), state (memory,
 * utilisation, temperatures, power, clocks, PCIe link, modes), what only a monitor asks for, and
 * where it sits (CPU and NUMA affinity).
 *
 * Decisions:
 * - Only the fields asked for are read (nvml_want), and nothing is read twice: fields that one
 *   call answers together are read when any of them is wanted. The ECC mode comes with the
 *   field values (nvml-health.c), and of its own call only when they did not answer.
 * - memory_used is nvmlMemory_v2's used (allocations, driver reservation excluded), as current
 *   nvidia-smi shows it; with only the v1 call it includes the reservation.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "nvml-abi.h"
#include "nvml-internal.h"
#include "snapshot-internal.h"
#include "util.h"

#define PCI_FIELDS (FBIT(GPUCTL_F_PCI_BUS_ID) | FBIT(GPUCTL_F_PCI_DEVICE_ID))

static const char *brand_name(nvmlBrandType_t b)
{
	static const char *const names[] = {
	        [NVML_BRAND_UNKNOWN] = "Unknown",
	        [NVML_BRAND_QUADRO] = "Quadro",
	        [NVML_BRAND_TESLA] = "Tesla",
	        [NVML_BRAND_NVS] = "NVS",
	        [NVML_BRAND_GRID] = "GRID",
	        [NVML_BRAND_GEFORCE] = "GeForce",
	        [NVML_BRAND_TITAN] = "Titan",
	        [NVML_BRAND_NVIDIA_VAPPS] = "NVIDIA Virtual Applications",
	        [NVML_BRAND_NVIDIA_VPC] = "NVIDIA Virtual PC",
	        [NVML_BRAND_NVIDIA_VCS] = "NVIDIA Virtual Compute Server",
	        [NVML_BRAND_NVIDIA_VWS] = "NVIDIA RTX Virtual Workstation",
	        [NVML_BRAND_NVIDIA_CLOUD_GAMING] = "NVIDIA Cloud Gaming",
	        [NVML_BRAND_QUADRO_RTX] = "Quadro RTX",
	        [NVML_BRAND_NVIDIA_RTX] = "NVIDIA RTX",
	        [NVML_BRAND_NVIDIA] = "NVIDIA",
	        [NVML_BRAND_GEFORCE_RTX] = "GeForce RTX",
	        [NVML_BRAND_TITAN_RTX] = "Titan RTX",
	};

	return b < ELEMENTSOF(names) ? names[b] : "Unknown";
}

/* Memory of a GPU or MIG device: _v2 first, v1 when _v2 is absent or refused. */
bool nvml_read_memory(struct reader *rd, size_t gpu, nvmlDevice_t dev, int64_t *total,
                      int64_t *used, int64_t *freeb)
{
	if (rd->nv->sym.memory_v2 && nvml_gpu_readable(rd, gpu)) {
		nvmlMemory_v2_t m = {.version = NVML_MEMORY_V2_VERSION};
		nvmlReturn_t r = RAW(rd, gpu, memory_v2, dev, &m);

		if (r == NVML_SUCCESS) {
			*total = (int64_t)m.total;
			*used = (int64_t)m.used;
			*freeb = (int64_t)m.free;
			return true;
		}
		if (!rd->nv->sym.memory || r == NVML_ERROR_GPU_IS_LOST)
			return nvml_check_result(rd, gpu, rd->nv->name.memory_v2, r, false);
	}
	nvmlMemory_t m = {0};
	if (!CALL(rd, gpu, memory, dev, &m))
		return false;
	*total = (int64_t)m.total;
	*used = (int64_t)m.used;
	*freeb = (int64_t)m.free;
	return true;
}

/* Reads the identity: handle (already there), UUID, PCI, name, brand, architecture, ... */
void nvml_read_identity(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE + NVML_DEVICE_NAME_V2_BUFFER_SIZE];
	nvmlBrandType_t brand;
	int major, minor;

	const struct gpuctl_gpu *g = &rd->snap->gpus[i];

	buf[0] = '\0';
	if (nvml_want(rd, GPUCTL_F_UUID) &&
	    READ(rd, i, FBIT(GPUCTL_F_UUID), uuid, dev, buf, sizeof(buf)) && buf[0]) {
		nvml_set_str(rd, i, GPUCTL_F_UUID, buf);
		/* what this GPU cannot change, from the facts cache: not asked below */
		const struct facts_entry *e = facts_cache_find(rd->facts, buf);
		if (e)
			(void)facts_entry_apply(e, rd->snap, i, rd->want & FACTS_CACHE_FIELDS);
	}

	nvmlPciInfo_t pci = {0};
	nvmlPciInfo_v1_t pci1 = {0};
	bool have_pci = false;
	if ((!nvml_want(rd, GPUCTL_F_PCI_BUS_ID) || g->valid[GPUCTL_F_PCI_BUS_ID]) &&
	    (!nvml_want(rd, GPUCTL_F_PCI_DEVICE_ID) || g->valid[GPUCTL_F_PCI_DEVICE_ID])) {
		/* neither asked for (a refresh), or both from the facts cache */
	} else if (rd->nv->sym.pci_info) {
		have_pci = READ(rd, i, PCI_FIELDS, pci_info, dev, &pci);
	} else if (READ(rd, i, PCI_FIELDS, pci_info_v1, dev, &pci1)) {
		have_pci = true;
		pci.domain = pci1.domain;
		pci.bus = pci1.bus;
		pci.device = pci1.device;
		pci.pciDeviceId = pci1.pciDeviceId;
	}
	if (have_pci) {
		nvml_format_bus_id(buf, sizeof(buf), pci.domain, pci.bus, pci.device);
		nvml_set_str(rd, i, GPUCTL_F_PCI_BUS_ID, buf);
		nvml_set_int(rd, i, GPUCTL_F_PCI_DEVICE_ID, pci.pciDeviceId);
	}

	buf[0] = '\0';
	if (nvml_want(rd, GPUCTL_F_NAME) && !g->valid[GPUCTL_F_NAME] &&
	    READ(rd, i, FBIT(GPUCTL_F_NAME), name, dev, buf, sizeof(buf)) && buf[0])
		nvml_set_str(rd, i, GPUCTL_F_NAME, buf);
	if (nvml_want(rd, GPUCTL_F_BRAND) && READ(rd, i, FBIT(GPUCTL_F_BRAND), brand, dev, &brand))
		nvml_set_str(rd, i, GPUCTL_F_BRAND, brand_name(brand));
	if (nvml_want(rd, GPUCTL_F_ARCHITECTURE))
		nvml_read_architecture(rd, i, dev);
	if (nvml_want(rd, GPUCTL_F_COMPUTE_CAP) &&
	    READ(rd, i, FBIT(GPUCTL_F_COMPUTE_CAP), compute_cap, dev, &major, &minor)) {
		(void)snprintf(buf, sizeof(buf), "%d.%d", major, minor);
		nvml_set_str(rd, i, GPUCTL_F_COMPUTE_CAP, buf);
	}
	buf[0] = '\0';
	if (nvml_want(rd, GPUCTL_F_SERIAL) &&
	    READ(rd, i, FBIT(GPUCTL_F_SERIAL), serial, dev, buf, sizeof(buf)) && buf[0])
		nvml_set_str(rd, i, GPUCTL_F_SERIAL, buf);
	READ_UINT(rd, i, GPUCTL_F_MINOR_NUMBER, minor_number, dev);
}

/* What only a monitor asks for: violation times (with NVML's timestamp of each reading, for
 * the percentage over an interval), BAR1, PCIe throughput (KB/s -> bytes/s). */
static void read_monitoring(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	static const struct {
		enum gpuctl_field f;
		nvmlPerfPolicyType_t policy;
	} viol[] = {
	        {GPUCTL_F_VIOLATION_POWER, NVML_PERF_POLICY_POWER},
	        {GPUCTL_F_VIOLATION_THERMAL, NVML_PERF_POLICY_THERMAL},
	};
	static const struct {
		enum gpuctl_field f;
		nvmlPcieUtilCounter_t counter;
	} pcie[] = {
	        {GPUCTL_F_PCIE_RX, NVML_PCIE_UTIL_RX_BYTES},
	        {GPUCTL_F_PCIE_TX, NVML_PCIE_UTIL_TX_BYTES},
	};
	nvmlBAR1Memory_t bar1;
	unsigned u;

	for (size_t k = 0; k < ELEMENTSOF(viol); k++) {
		nvmlViolationTime_t vt = {0};

		if (nvml_want(rd, viol[k].f) &&
		    READ(rd, i, FBIT(viol[k].f), violation, dev, viol[k].policy, &vt) &&
		    vt.violationTime <= INT64_MAX) {
			nvml_set_int(rd, i, viol[k].f, (int64_t)vt.violationTime);
			rd->snap->gpus[i].violation_ref_us[k] = vt.referenceTime;
		}
	}
	if ((nvml_want(rd, GPUCTL_F_BAR1_TOTAL) || nvml_want(rd, GPUCTL_F_BAR1_USED)) &&
	    READ(rd, i, FBIT(GPUCTL_F_BAR1_TOTAL) | FBIT(GPUCTL_F_BAR1_USED), bar1, dev, &bar1) &&
	    bar1.bar1Total <= INT64_MAX && bar1.bar1Used <= bar1.bar1Total) {
		nvml_set_int(rd, i, GPUCTL_F_BAR1_TOTAL, (int64_t)bar1.bar1Total);
		nvml_set_int(rd, i, GPUCTL_F_BAR1_USED, (int64_t)bar1.bar1Used);
	}
	for (size_t k = 0; k < ELEMENTSOF(pcie); k++)
		if (nvml_want(rd, pcie[k].f) &&
		    READ(rd, i, FBIT(pcie[k].f), pcie_throughput, dev, pcie[k].counter, &u))
			nvml_set_int(rd, i, pcie[k].f, (int64_t)u * 1024);
}

/* Memory, utilisation, temperature, encoder and decoder shares, energy: what the GPU is doing. */
static void read_usage(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	int64_t total, used, freeb;
	nvmlUtilization_t util;
	unsigned long long ull;
	unsigned u, u2;

	if (nvml_want(rd, GPUCTL_F_MEMORY_TOTAL) || nvml_want(rd, GPUCTL_F_MEMORY_USED) ||
	    nvml_want(rd, GPUCTL_F_MEMORY_FREE)) {
		rd->reading = FBIT(GPUCTL_F_MEMORY_TOTAL) | FBIT(GPUCTL_F_MEMORY_USED) |
		              FBIT(GPUCTL_F_MEMORY_FREE);
		if (nvml_read_done(rd, nvml_read_memory(rd, i, dev, &total, &used, &freeb))) {
			nvml_set_int(rd, i, GPUCTL_F_MEMORY_TOTAL, total);
			nvml_set_int(rd, i, GPUCTL_F_MEMORY_USED, used);
			nvml_set_int(rd, i, GPUCTL_F_MEMORY_FREE, freeb);
		}
	}
	if ((nvml_want(rd, GPUCTL_F_UTIL_GPU) || nvml_want(rd, GPUCTL_F_UTIL_MEMORY)) &&
	    READ(rd, i, FBIT(GPUCTL_F_UTIL_GPU) | FBIT(GPUCTL_F_UTIL_MEMORY), utilization, dev,
	         &util)) {
		nvml_set_int(rd, i, GPUCTL_F_UTIL_GPU, util.gpu);
		nvml_set_int(rd, i, GPUCTL_F_UTIL_MEMORY, util.memory);
	}
	READ_UINT(rd, i, GPUCTL_F_TEMP, temperature, dev, NVML_TEMPERATURE_GPU);
	if (nvml_want(rd, GPUCTL_F_UTIL_ENCODER) &&
	    READ(rd, i, FBIT(GPUCTL_F_UTIL_ENCODER), encoder_util, dev, &u, &u2))
		nvml_set_int(rd, i, GPUCTL_F_UTIL_ENCODER, u);
	if (nvml_want(rd, GPUCTL_F_UTIL_DECODER) &&
	    READ(rd, i, FBIT(GPUCTL_F_UTIL_DECODER), decoder_util, dev, &u, &u2))
		nvml_set_int(rd, i, GPUCTL_F_UTIL_DECODER, u);
	if (nvml_want(rd, GPUCTL_F_ENERGY) && READ(rd, i, FBIT(GPUCTL_F_ENERGY), energy, dev, &ull))
		nvml_set_int(rd, i, GPUCTL_F_ENERGY, (int64_t)ull);
}

/* Temperature thresholds, power draw and limits, fan speed. The draw and the enforced limit
 * of their own calls only when the field values did not answer for them. */
static void read_thermal_power(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	const struct gpuctl_gpu *g = &rd->snap->gpus[i];

	if (!g->valid[GPUCTL_F_TEMP_SLOWDOWN]) /* else from the facts cache */
		READ_UINT(rd, i, GPUCTL_F_TEMP_SLOWDOWN, temp_threshold, dev,
		          NVML_TEMPERATURE_THRESHOLD_SLOWDOWN);
	READ_UINT(rd, i, GPUCTL_F_TEMP_SHUTDOWN, temp_threshold, dev,
	          NVML_TEMPERATURE_THRESHOLD_SHUTDOWN);
	if (!g->valid[GPUCTL_F_POWER_DRAW])
		READ_UINT(rd, i, GPUCTL_F_POWER_DRAW, power_usage, dev);
	if (!g->valid[GPUCTL_F_POWER_LIMIT])
		READ_UINT(rd, i, GPUCTL_F_POWER_LIMIT, power_limit, dev);
	READ_UINT(rd, i, GPUCTL_F_POWER_MGMT_LIMIT, power_mgmt_limit, dev);
	READ_UINT(rd, i, GPUCTL_F_FAN_SPEED, fan_speed, dev);
}

/* Performance state, clocks (current and maximum), clocks event reasons. */
static void read_clocks(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	unsigned long long ull;
	unsigned u;

	/* nvmlPstates_t: 0..15, and 32 for "unknown" (nvml.h), which stays N/A */
	if (nvml_want(rd, GPUCTL_F_PSTATE) && READ(rd, i, FBIT(GPUCTL_F_PSTATE), pstate, dev, &u) &&
	    u <= 15)
		nvml_set_int(rd, i, GPUCTL_F_PSTATE, u);
	READ_UINT(rd, i, GPUCTL_F_CLOCK_SM, clock, dev, NVML_CLOCK_SM);
	READ_UINT(rd, i, GPUCTL_F_CLOCK_MEM, clock, dev, NVML_CLOCK_MEM);
	READ_UINT(rd, i, GPUCTL_F_CLOCK_SM_MAX, max_clock, dev, NVML_CLOCK_SM);
	READ_UINT(rd, i, GPUCTL_F_CLOCK_MEM_MAX, max_clock, dev, NVML_CLOCK_MEM);
	if (nvml_want(rd, GPUCTL_F_CLOCKS_EVENT_REASONS) &&
	    READ(rd, i, FBIT(GPUCTL_F_CLOCKS_EVENT_REASONS), clocks_event, dev, &ull))
		nvml_set_int(rd, i, GPUCTL_F_CLOCKS_EVENT_REASONS, (int64_t)ull);
}

/* The PCIe link: generation and width, current and maximum (the maximum width, when the
 * facts cache gave it, not asked). */
static void read_pcie_link(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	READ_UINT(rd, i, GPUCTL_F_PCIE_GEN, pcie_gen, dev);
	READ_UINT(rd, i, GPUCTL_F_PCIE_GEN_MAX, pcie_gen_max, dev);
	READ_UINT(rd, i, GPUCTL_F_PCIE_WIDTH, pcie_width, dev);
	if (!rd->snap->gpus[i].valid[GPUCTL_F_PCIE_WIDTH_MAX])
		READ_UINT(rd, i, GPUCTL_F_PCIE_WIDTH_MAX, pcie_width_max, dev);
}

/* Persistence, compute and MIG modes (current and pending; the ECC mode comes with the field
 * values). nvml.h on nvmlDeviceGetUtilizationRates: "On MIG-enabled GPUs, querying device
 * utilization rates is not currently supported": a GPU whose utilisation was just read is not in
 * MIG mode. When the caller only reads the MIG mode for what depends on it (the health checks,
 * the MIG devices) and not to show it, that is all it is told, and the MIG mode's call is not
 * made; a caller that shows it gets the call's answer (N/A on a GPU without MIG, as nvidia-smi
 * shows it), and then an error of the call leaves the current mode known as off: the verdict,
 * which judges it, is the same whoever asks. */
static void read_modes(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	const struct gpuctl_gpu *g = &rd->snap->gpus[i];
	nvmlEnableState_t e1;
	nvmlComputeMode_t cm;
	unsigned u, u2;

	if (nvml_want(rd, GPUCTL_F_PERSISTENCE_MODE) &&
	    READ(rd, i, FBIT(GPUCTL_F_PERSISTENCE_MODE), persistence, dev, &e1))
		nvml_set_int(rd, i, GPUCTL_F_PERSISTENCE_MODE, e1 == NVML_FEATURE_ENABLED);
	if (nvml_want(rd, GPUCTL_F_COMPUTE_MODE) &&
	    READ(rd, i, FBIT(GPUCTL_F_COMPUTE_MODE), compute_mode, dev, &cm))
		nvml_set_int(rd, i, GPUCTL_F_COMPUTE_MODE, cm);
	const bool off = g->valid[GPUCTL_F_UTIL_GPU];
	const bool shown =
	        (rd->shown & FBIT(GPUCTL_F_MIG_MODE)) || nvml_want(rd, GPUCTL_F_MIG_MODE_PENDING);

	if (!nvml_want(rd, GPUCTL_F_MIG_MODE) && !nvml_want(rd, GPUCTL_F_MIG_MODE_PENDING))
		return;
	if (off && !shown) {
		nvml_set_int(rd, i, GPUCTL_F_MIG_MODE, 0);
		return;
	}
	/* with the utilisation read, an error is the pending mode's only */
	if (READ(rd, i,
	         off ? FBIT(GPUCTL_F_MIG_MODE_PENDING)
	             : FBIT(GPUCTL_F_MIG_MODE) | FBIT(GPUCTL_F_MIG_MODE_PENDING),
	         mig_mode, dev, &u, &u2)) {
		nvml_set_int(rd, i, GPUCTL_F_MIG_MODE, u == 1);
		nvml_set_int(rd, i, GPUCTL_F_MIG_MODE_PENDING, u2 == 1);
	} else if (off && (g->unreadable >> GPUCTL_F_MIG_MODE_PENDING & 1u)) {
		nvml_set_int(rd, i, GPUCTL_F_MIG_MODE, 0);
	}
}

/* The ECC mode (current and pending) of its own call, when the field values did not answer
 * for it (a driver without nvmlDeviceGetFieldValues, or one that does not know the fields). */
static void read_ecc_mode(struct reader *rd, size_t i, nvmlDevice_t dev, uint64_t answered)
{
	const uint64_t ecc = FBIT(GPUCTL_F_ECC_MODE) | FBIT(GPUCTL_F_ECC_MODE_PENDING);
	uint64_t wanted = 0;
	nvmlEnableState_t e1, e2;

	if (nvml_want(rd, GPUCTL_F_ECC_MODE))
		wanted |= FBIT(GPUCTL_F_ECC_MODE);
	if (nvml_want(rd, GPUCTL_F_ECC_MODE_PENDING))
		wanted |= FBIT(GPUCTL_F_ECC_MODE_PENDING);
	if (wanted && (answered & wanted) != wanted && READ(rd, i, ecc, ecc_mode, dev, &e1, &e2)) {
		nvml_set_int(rd, i, GPUCTL_F_ECC_MODE, e1 == NVML_FEATURE_ENABLED);
		nvml_set_int(rd, i, GPUCTL_F_ECC_MODE_PENDING, e2 == NVML_FEATURE_ENABLED);
	}
}

/* What changes: the field values first (the ECC mode, power draw and limit, memory
 * temperature, recovery action, the health counters and the NVLink states, in one call), then
 * the steps above in NVML call order, each asking of its own call only what the field values did
 * not answer, then what only a monitor asks for. */
void nvml_read_state(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	const uint64_t answered = nvml_read_field_values(rd, i, dev);

	read_usage(rd, i, dev);
	read_thermal_power(rd, i, dev);
	read_clocks(rd, i, dev);
	read_pcie_link(rd, i, dev);
	read_modes(rd, i, dev);
	read_ecc_mode(rd, i, dev, answered);
	read_monitoring(rd, i, dev);
}

#define CPUSET_WORDS  64 /* 4096 CPUs with 64-bit longs */
#define NODESET_WORDS 16 /* 1024 NUMA nodes */
#define LONG_BITS     (8 * sizeof(unsigned long))

/* Writes a Linux cpulist ("0-15,128-143") of the set bits; false if none is set or the buffer
 * is too small. */
static bool mask_to_list(const unsigned long *mask, size_t words, char *buf, size_t size)
{
	size_t n = 0, bits = words * LONG_BITS;

	buf[0] = '\0';
	for (size_t b = 0; b < bits; b++) {
		size_t e;
		int w;

		if (b % LONG_BITS == 0 && mask[b / LONG_BITS] == 0) {
			b += LONG_BITS - 1; /* a whole empty word: most of the 4,096 CPUs */
			continue;
		}
		if (!(mask[b / LONG_BITS] >> (b % LONG_BITS) & 1ul))
			continue;
		for (e = b;
		     e + 1 < bits && (mask[(e + 1) / LONG_BITS] >> ((e + 1) % LONG_BITS) & 1ul);
		     e++)
			;
		if (e == b)
			w = snprintf(buf + n, size - n, "%s%zu", n ? "," : "", b);
		else
			w = snprintf(buf + n, size - n, "%s%zu-%zu", n ? "," : "", b, e);
		if (w < 0 || (size_t)w >= size - n)
			return false;
		n += (size_t)w;
		b = e;
	}
	return n > 0;
}

void nvml_read_placement(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	unsigned long mask[CPUSET_WORDS] = {0};
	char list[4096];

	if (nvml_want(rd, GPUCTL_F_CPU_AFFINITY) &&
	    READ(rd, i, FBIT(GPUCTL_F_CPU_AFFINITY), cpu_affinity, dev, CPUSET_WORDS, mask) &&
	    mask_to_list(mask, CPUSET_WORDS, list, sizeof(list)))
		nvml_set_str(rd, i, GPUCTL_F_CPU_AFFINITY, list);
	memset(mask, 0, sizeof(mask));
	if (nvml_want(rd, GPUCTL_F_NUMA_NODE) &&
	    READ(rd, i, FBIT(GPUCTL_F_NUMA_NODE), memory_affinity, dev, NODESET_WORDS, mask,
	         NVML_AFFINITY_SCOPE_NODE)) {
		for (size_t b = 0; b < NODESET_WORDS * LONG_BITS; b++)
			if (mask[b / LONG_BITS] >> (b % LONG_BITS) & 1ul) {
				nvml_set_int(rd, i, GPUCTL_F_NUMA_NODE, (int64_t)b);
				break;
			}
	}
	READ_UINT(rd, i, GPUCTL_F_GPU_NUMA_NODE, numa_node_id, dev);
}
