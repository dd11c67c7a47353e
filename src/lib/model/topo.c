// SPDX-License-Identifier: MIT
/*
 * topo.c: topology facts that need no NVML: nvidia-smi's level codes and the bandwidth model.
 *
 * Decisions (sources and worked numbers in docs/topology.md):
 * - Bandwidth is GB/s per direction for one pair in isolation. It orders pairs; it is not a
 *   benchmark prediction, and shared uplinks between several pairs are not modelled.
 * - NVLink (direct, or through NVSwitches): links x nominal per-link speed of the slower GPU's
 *   architecture. On an NVSwitch fabric "links" is the smaller of the two GPUs' switch links.
 * - Otherwise PCIe at the slower GPU's maximum link (max, not current: idle GPUs train their
 *   link down), NCCL's effective rate, or NVLink-C2C for a GPU attached to a Grace CPU; then
 *   by path: same switch full speed; through a CPU root complex divided by the CPU's P2P
 *   overhead (Intel 6/5, others 1); across sockets also capped at the CPU's inter-socket link
 *   (cpuinfo.c: NCCL's figure for the CPU model); without P2P, a pair under one switch shares
 *   the switch uplink in both directions (/ 2).
 * - INTERNAL (two GPUs on one board, K80-style) prints as "PIX": the two GPUs sit behind the
 *   board's own PCIe switch and nvidia-smi's legend has no separate code for it.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <strings.h>

#include "snapshot-internal.h"
#include "topo.h"
#include "util.h"

const char *gpuctl_topo_level_code(int level)
{
	switch (level) {
	case GPUCTL_TOPO_INTERNAL:
	case GPUCTL_TOPO_SINGLE:
		return "PIX";
	case GPUCTL_TOPO_MULTIPLE:
		return "PXB";
	case GPUCTL_TOPO_HOSTBRIDGE:
		return "PHB";
	case GPUCTL_TOPO_NODE:
		return "NODE";
	case GPUCTL_TOPO_SYSTEM:
		return "SYS";
	default:
		return "N/A";
	}
}

/* Nominal per-direction per-link NVLink speeds: NVIDIA's published per-GPU totals (both
 * directions) divided by 2 and by the link count. */
static const struct {
	const char *architecture; /* as GPUCTL_F_ARCHITECTURE names it */
	double gbps;              /* GB/s per direction per link */
} nvlink_speeds[] = {
        {"Pascal", 20.0},    /* P100: 160 GB/s over 4 links (NVLink 1) */
        {"Volta", 25.0},     /* V100: 300 GB/s over 6 links (NVLink 2) */
        {"Turing", 25.0},    /* NVLink 2 bridges (Quadro RTX / RTX 2080 Ti) */
        {"Ampere", 25.0},    /* A100: 600 GB/s over 12 links (NVLink 3) */
        {"Hopper", 25.0},    /* H100: 900 GB/s over 18 links (NVLink 4) */
        {"Blackwell", 50.0}, /* B200/GB200: 1.8 TB/s over 18 links (NVLink 5) */
};

double topo_nvlink_gbps(const char *architecture, const char *compute_cap)
{
	if (!architecture)
		return 20.0;
	/* GA10x boards (RTX 3090, A40, RTX A6000; compute capability 8.6) bridge four x4 NVLink 3
	 * links at 14.0625 GB/s each: 112.5 GB/s both directions. */
	if (strcasecmp(architecture, "Ampere") == 0 && compute_cap &&
	    strcasecmp(compute_cap, "8.0") != 0)
		return 14.0625;
	for (size_t i = 0; i < sizeof(nvlink_speeds) / sizeof(nvlink_speeds[0]); i++)
		if (strcasecmp(architecture, nvlink_speeds[i].architecture) == 0)
			return nvlink_speeds[i].gbps;
	return 20.0;
}

double topo_pcie_gbps(int gen, int width)
{
	/* NCCL's rate units per lane: Gen1 15, doubling per generation (Gen3 60, Gen4 120). */
	if (gen <= 0 || gen > 7)
		gen = 3;
	if (width <= 0 || width > 32)
		width = 16;
	return (double)width * 15.0 * (double)(1 << (gen - 1)) / 80.0;
}

static bool level_under_one_switch(int level)
{
	return level == GPUCTL_TOPO_INTERNAL || level == GPUCTL_TOPO_SINGLE ||
	       level == GPUCTL_TOPO_MULTIPLE;
}

static bool level_through_cpu(int level)
{
	return level == GPUCTL_TOPO_HOSTBRIDGE || level == GPUCTL_TOPO_NODE;
}

double topo_pair_gbps(const struct topo_end *a, const struct topo_end *b,
                      const struct gpuctl_link *link, const struct topo_cpu *cpu)
{
	double pcie;
	bool p2p_ok;

	if (link->nvlinks > 0)
		return link->nvlinks * fmin(topo_nvlink_gbps(a->architecture, a->compute_cap),
		                            topo_nvlink_gbps(b->architecture, b->compute_cap));

	pcie = fmin(a->c2c ? TOPO_C2C_GBPS : topo_pcie_gbps(a->pcie_gen_max, a->pcie_width_max),
	            b->c2c ? TOPO_C2C_GBPS : topo_pcie_gbps(b->pcie_gen_max, b->pcie_width_max));
	/* An unknown status (old driver) is read as possible, as CUDA would try it. */
	p2p_ok = link->p2p == GPUCTL_P2P_OK || link->p2p == GPUCTL_P2P_UNKNOWN;

	if (level_under_one_switch(link->level) && !a->c2c && !b->c2c)
		return p2p_ok ? pcie : pcie / 2.0;
	if (level_through_cpu(link->level) || level_under_one_switch(link->level))
		return pcie / cpu->p2p_overhead;
	/* SYSTEM, or a level NVML did not give: across the SMP interconnect. */
	return fmin(pcie, cpu->inter_socket_gbps) / cpu->p2p_overhead;
}

static struct topo_end end_of(const struct gpuctl_gpu *g)
{
	return (struct topo_end){
	        .architecture =
	                g->valid[GPUCTL_F_ARCHITECTURE] ? g->strs[GPUCTL_F_ARCHITECTURE] : NULL,
	        .compute_cap =
	                g->valid[GPUCTL_F_COMPUTE_CAP] ? g->strs[GPUCTL_F_COMPUTE_CAP] : NULL,
	        .pcie_gen_max =
	                g->valid[GPUCTL_F_PCIE_GEN_MAX] ? (int)g->ints[GPUCTL_F_PCIE_GEN_MAX] : 0,
	        .pcie_width_max = g->valid[GPUCTL_F_PCIE_WIDTH_MAX]
	                                  ? (int)g->ints[GPUCTL_F_PCIE_WIDTH_MAX]
	                                  : 0,
	        .c2c = g->valid[GPUCTL_F_GPU_NUMA_NODE] && g->ints[GPUCTL_F_GPU_NUMA_NODE] >= 0,
	};
}

static struct topo_cpu cpu_of(const struct gpuctl_snapshot *snap)
{
	return (struct topo_cpu){
	        .inter_socket_gbps =
	                snap->cpu.inter_socket_gbps > 0 ? snap->cpu.inter_socket_gbps : 10.0,
	        .p2p_overhead = snap->cpu.p2p_overhead >= 1.0 ? snap->cpu.p2p_overhead : 1.0,
	};
}

void topo_fill_bandwidth(struct gpuctl_snapshot *snap)
{
	if (!snap || !snap->links)
		return;
	struct topo_cpu cpu = cpu_of(snap);

	for (size_t a = 0; a < snap->n_gpus; a++) {
		struct topo_end ea = end_of(&snap->gpus[a]);

		for (size_t b = 0; b < snap->n_gpus; b++) {
			struct topo_end eb = end_of(&snap->gpus[b]);
			struct gpuctl_link *l = snapshot_link_at(snap, a, b);

			l->bandwidth = a == b ? 0.0 : topo_pair_gbps(&ea, &eb, l, &cpu);
		}
	}
}

int gpuctl_snapshot_path_bandwidth(const struct gpuctl_snapshot *snap, int level, double *ret_gbps)
{
	struct gpuctl_link link = {.level = level, .p2p = GPUCTL_P2P_OK};
	struct topo_end slowest = {0};
	double best = INFINITY;

	if (!snap || !ret_gbps || streq(gpuctl_topo_level_code(level), "N/A"))
		return -EINVAL;
	if (!snap->links || snap->n_gpus == 0)
		return -ENODATA;
	for (size_t i = 0; i < snap->n_gpus; i++) {
		struct topo_end e = end_of(&snap->gpus[i]);
		double p = e.c2c ? TOPO_C2C_GBPS : topo_pcie_gbps(e.pcie_gen_max, e.pcie_width_max);

		if (p < best) {
			best = p;
			slowest = e;
		}
	}
	struct topo_cpu cpu = cpu_of(snap);

	*ret_gbps = topo_pair_gbps(&slowest, &slowest, &link, &cpu);
	return 0;
}
