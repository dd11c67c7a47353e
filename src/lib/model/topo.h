/* SPDX-License-Identifier: MIT */
/*
 * topo.h: the bandwidth model behind struct gpuctl_link.bandwidth (see docs/topology.md).
 * Pure functions of their arguments; exposed for tests and for policy code.
 */
#ifndef GPUCTL_TOPO_H
#define GPUCTL_TOPO_H

#include <stdbool.h>

#include "gpuctl/gpuctl.h"

/* What the model needs to know about one end of a pair. */
struct topo_end {
	const char *architecture; /* GPUCTL_F_ARCHITECTURE ("Ampere"), NULL if unknown */
	const char *compute_cap;  /* GPUCTL_F_COMPUTE_CAP ("8.6"), NULL if unknown */
	int pcie_gen_max;         /* GPUCTL_F_PCIE_GEN_MAX, <= 0 if unknown */
	int pcie_width_max;       /* GPUCTL_F_PCIE_WIDTH_MAX, <= 0 if unknown */
	bool c2c;                 /* attached to its CPU by NVLink-C2C instead of PCIe (Grace:
	                           * the GPU's memory is a NUMA node, GPUCTL_F_GPU_NUMA_NODE) */
};

/* What the model takes from the CPU (struct gpuctl_cpu, cpuinfo.c). */
struct topo_cpu {
	double inter_socket_gbps; /* the SMP link, GB/s per direction */
	double p2p_overhead; /* divisor of P2P through a CPU root complex (Intel 1.2, else 1) */
};

/* NVLink-C2C between a Grace CPU and its GPU, GB/s per direction: 900 GB/s both directions
 * (NVIDIA GH200 and GB200 datasheets). */
#define TOPO_C2C_GBPS 450.0

/* Nominal NVLink GB/s per direction per link for a GPU (20 when unknown). */
double topo_nvlink_gbps(const char *architecture, const char *compute_cap);
/* Effective PCIe GB/s per direction of a link (NCCL: lanes x rate / 80); Gen3 x16 if unknown. */
double topo_pcie_gbps(int gen, int width);
/* Modelled GB/s per direction between two GPUs with the given pair facts on the given CPU. */
double topo_pair_gbps(const struct topo_end *a, const struct topo_end *b,
                      const struct gpuctl_link *link, const struct topo_cpu *cpu);

#endif /* GPUCTL_TOPO_H */
