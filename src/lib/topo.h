/* SPDX-License-Identifier: MIT */
/*
 * topo.h: the bandwidth model behind struct gpuctl_link.bandwidth (see docs/topology.md).
 * Pure functions of their arguments; exposed for tests and for policy code.
 */
#ifndef GPUCTL_TOPO_H
#define GPUCTL_TOPO_H

#include "gpuctl/gpuctl.h"

/* What the model needs to know about one end of a pair. */
struct topo_end {
	const char *architecture; /* GPUCTL_F_ARCHITECTURE ("Ampere"), NULL if unknown */
	const char *compute_cap;  /* GPUCTL_F_COMPUTE_CAP ("8.6"), NULL if unknown */
	int pcie_gen_max;         /* GPUCTL_F_PCIE_GEN_MAX, <= 0 if unknown */
	int pcie_width_max;       /* GPUCTL_F_PCIE_WIDTH_MAX, <= 0 if unknown */
};

/* Inter-socket (SMP interconnect) bandwidth the model assumes, GB/s per direction. */
#define TOPO_SMP_GBPS 10.0
/* Factor for P2P traffic routed through a CPU root complex (NCCL's Intel overhead 6/5). */
#define TOPO_CPU_OVERHEAD 1.2

/* Nominal NVLink GB/s per direction per link for a GPU (20 when unknown). */
double topo_nvlink_gbps(const char *architecture, const char *compute_cap);
/* Effective PCIe GB/s per direction of a link (NCCL: lanes x rate / 80); Gen3 x16 if unknown. */
double topo_pcie_gbps(int gen, int width);
/* Modelled GB/s per direction between two GPUs with the given pair facts. */
double topo_pair_gbps(const struct topo_end *a, const struct topo_end *b,
                      const struct gpuctl_link *link);

#endif /* GPUCTL_TOPO_H */
