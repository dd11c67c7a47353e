/* SPDX-License-Identifier: MIT */
/*
 * topology.h: the facts about pairs of GPUs (GPUCTL_SNAP_TOPOLOGY) and the CPU the bandwidth model
 * assumed.
 *
 * Part of libgpuctl's public API (include <gpuctl/gpuctl.h>, which includes every header; the
 * rules that hold for all of them are there). Compiles on its own, as C and as C++
 * (tests/unit/test-headers.c).
 */
#ifndef GPUCTL_TOPOLOGY_H
#define GPUCTL_TOPOLOGY_H

#include <stdbool.h>
#include <stddef.h>

#include "decls.h"
#include "snapshot.h"

/* Exported: see gpuctl.h, "What these headers declare is libgpuctl's whole ABI". */
GPUCTL_BEGIN_DECLS

/* ---- Pair facts (GPUCTL_SNAP_TOPOLOGY) ---- */

/* NVML's common-ancestor levels; the numbers are NVML's own, spaced on purpose. */
enum gpuctl_topo_level {
	GPUCTL_TOPO_UNKNOWN = -1,
	GPUCTL_TOPO_INTERNAL = 0,    /* same board */
	GPUCTL_TOPO_SINGLE = 10,     /* PIX: one PCIe switch */
	GPUCTL_TOPO_MULTIPLE = 20,   /* PXB: several switches, no host bridge */
	GPUCTL_TOPO_HOSTBRIDGE = 30, /* PHB */
	GPUCTL_TOPO_NODE = 40,       /* NODE: same NUMA node, several host bridges */
	GPUCTL_TOPO_SYSTEM = 50,     /* SYS: across the SMP interconnect */
};

/* NVML's P2P status values. */
enum gpuctl_p2p_status {
	GPUCTL_P2P_UNKNOWN = -1,
	GPUCTL_P2P_OK = 0,
	GPUCTL_P2P_CHIPSET_NOT_SUPPORTED = 1,
	GPUCTL_P2P_GPU_NOT_SUPPORTED = 2,
	GPUCTL_P2P_TOPOLOGY_NOT_SUPPORTED = 3,
	GPUCTL_P2P_DISABLED_BY_REGKEY = 4,
	GPUCTL_P2P_NOT_SUPPORTED = 5,
};

/* The facts about one pair of GPUs (by snapshot index). The caller allocates it: initialise with
 * GPUCTL_LINK_INIT (struct_size lets it grow: the library writes only the first struct_size
 * bytes, so a program built against an older header gets the fields it knows). */
struct gpuctl_link {
	size_t struct_size; /* sizeof(struct gpuctl_link) */
	int level;          /* enum gpuctl_topo_level */
	int nvlinks;        /* active NVLinks between the two: direct links, or for an NVSwitch
	                     * fabric the links each GPU has into it (the smaller of the two) */
	bool nvswitch;      /* true when the NVLinks go through NVSwitches (all-to-all) */
	int p2p;            /* enum gpuctl_p2p_status, for P2P reads */
	double bandwidth;   /* modelled GB/s per direction, see docs/topology.md */
};
#define GPUCTL_LINK_INIT                                                                           \
	{                                                                                          \
		.struct_size = sizeof(struct gpuctl_link)                                          \
	}

/* Fills *ret_link for GPUs a and b (a != b): the first ret_link->struct_size bytes. -EINVAL for a
 * bad index or a struct_size that does not cover level, -ENODATA if the snapshot was taken
 * without GPUCTL_SNAP_TOPOLOGY. */
int gpuctl_snapshot_link(const struct gpuctl_snapshot *snap, size_t a, size_t b,
                         struct gpuctl_link *ret_link);

/* The nvidia-smi topo -m code of a level ("PIX", "SYS", ...); "X" for self is the caller's. */
const char *gpuctl_topo_level_code(int level);

/* The host CPU as the bandwidth model sees it (docs/topology.md, "The CPU"): read from
 * /proc/cpuinfo ($GPUCTL_CPUINFO instead, for tests and the simulator) with every
 * GPUCTL_SNAP_TOPOLOGY snapshot. The caller allocates it: initialise with GPUCTL_CPU_INIT. */
struct gpuctl_cpu {
	size_t struct_size;       /* sizeof(struct gpuctl_cpu) */
	char vendor[16];          /* cpuinfo's vendor_id ("GenuineIntel", "AuthenticAMD"), "ARM"
	                           * for an Arm-designed core; "" when unknown */
	int family;               /* x86 "cpu family"; -1 when unknown or not x86 */
	int model;                /* x86 "model", Arm "CPU part"; -1 when unknown */
	char name[96];            /* "model name" ("Intel(R) Xeon(R) Platinum 8480+"); "" if none */
	char cpu_class[24];       /* what decides the figures: "Broadwell", "Skylake", "Sapphire
	                           * Rapids", "Emerald Rapids", "AMD", "Grace", "Arm", "unknown" */
	double inter_socket_gbps; /* the link between sockets, GB/s per direction (NCCL's figure) */
	double p2p_overhead; /* divisor of P2P traffic through a CPU root complex (Intel 1.2) */
};
#define GPUCTL_CPU_INIT                                                                            \
	{                                                                                          \
		.struct_size = sizeof(struct gpuctl_cpu)                                           \
	}

/* Fills the first ret_cpu->struct_size bytes with the CPU the snapshot's bandwidth model used.
 * -EINVAL for a struct_size that does not cover vendor, -ENODATA if the snapshot was taken
 * without GPUCTL_SNAP_TOPOLOGY. */
int gpuctl_snapshot_cpu(const struct gpuctl_snapshot *snap, struct gpuctl_cpu *ret_cpu);

/* The modelled GB/s per direction of a P2P-capable pair without NVLink whose path is `level`
 * (enum gpuctl_topo_level), for the slowest PCIe link among the snapshot's GPUs: what
 * `gpuctl topo` shows per path class. -EINVAL for an unknown level, -ENODATA without topology
 * or GPUs. */
int gpuctl_snapshot_path_bandwidth(const struct gpuctl_snapshot *snap, int level, double *ret_gbps);

GPUCTL_END_DECLS

#endif /* GPUCTL_TOPOLOGY_H */
