/* SPDX-License-Identifier: MIT */
/*
 * gres.h: Slurm's view of this node's GPUs (docs/slurm.md): the node's gres.conf records for
 * gpu, read as slurmd reads them (gres_conf_parse, pure), and the node's CPU topology in Slurm's
 * abstract core numbering (cpu_topology_read, from sysfs). Part of libgpuctl's objects, not of
 * its exports; the CLI (gpuctl slurm gres), fuzz/fuzz-gres.c and the unit tests reach it through
 * gpuctl_static with src/lib on their include path, as parse.h.
 */
#ifndef GPUCTL_GRES_H
#define GPUCTL_GRES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* At most this many device files in one node's gpu records (a guard against absurd ranges). */
#define GRES_MAX_FILES 4096

/* The gpu GRES of one node, as gres.conf declares them. */
struct gres_gpus {
	char **files;        /* the device files of File=/Files= records, in Slurm's index order:
	                      * position i is the GPU Slurm calls i; owned */
	size_t n;            /* entries in files */
	bool autodetect;     /* AutoDetect (global or the node's own) is not "off" */
	bool multiple_files; /* a MultipleFiles= record (MIG devices) */
	bool no_file;        /* a gpu record without File= (Count= only) */
	bool any_record;     /* some gpu record applies to the node */
};

/* Reads gres.conf text (len bytes, need not be NUL-terminated) for node: the records whose
 * NodeName= hostlist names node, or that have no NodeName. Returns 0, -ENOMEM, or -EINVAL
 * with why[] saying what (the line number and the problem). */
int gres_conf_parse(const char *text, size_t len, const char *node, struct gres_gpus *ret,
                    char *why, size_t whylen);
void gres_gpus_free(struct gres_gpus *g);

/* Reads a whole file of at most max bytes into *ret_text (NUL-terminated; *ret_len without the
 * NUL). -errno, -EFBIG when larger. */
int gres_read_file(const char *path, size_t max, char **ret_text, size_t *ret_len);

/* This node's Slurm name: $SLURMD_NODENAME (slurmd sets it for jobs and the programs it runs),
 * else the host name up to its first dot (Slurm's default NodeName). 0, -ENAMETOOLONG when it
 * does not fit size, -EINVAL for an empty host name, or uname's -errno. */
int gres_node_name(char *buf, size_t size);

/* Whether Slurm hostlist expression expr ("node[01-04,7],gpu-a") names name. */
bool gres_hostlist_match(const char *expr, const char *name);

/* Expands a hostlist expression ("/dev/nvidia[0-3]", "a,b") into its names, in order, at most
 * max. Returns the count (>= 1), -EINVAL (malformed, or more than max names) or -ENOMEM. */
int gres_hostlist_expand(const char *expr, size_t max, char ***ret_names);

/* The node's CPUs in Slurm's abstract core numbering: cores ordered by socket, then within a
 * socket by their lowest CPU, sockets ordered by their lowest CPU (hwloc's logical order, which
 * slurmd's xcpuinfo uses). */
struct cpu_topology {
	int *core_of;           /* per CPU number: its abstract core, -1 if not online; owned */
	unsigned *socket_first; /* [s]: socket s's first abstract core, [sockets]: cores; owned */
	size_t n_cpus;          /* entries in core_of (highest online CPU + 1) */
	unsigned sockets;       /* packages */
	unsigned cores;         /* cores in all */
	unsigned threads_per_core; /* the most threads any core has */
};

/* Reads sysfs_root/devices/system/cpu (online, cpuN/topology/physical_package_id and core_id).
 * sysfs_root NULL: $GPUCTL_SYSFS, else /sys. Returns 0, -ENOMEM, or another -errno with why[]
 * naming the file. */
int cpu_topology_read(const char *sysfs_root, struct cpu_topology *ret, char *why, size_t whylen);
void cpu_topology_free(struct cpu_topology *t);

/* cores (a bitmap of abstract cores, nbits bits) widened to the whole sockets it touches, into
 * ret (as large): what Slurm >= 24.11 accepts in Cores=. Returns whether that widened it (the
 * cores were finer than their sockets). */
bool gres_cores_whole_sockets(const struct cpu_topology *t, const uint64_t *cores, uint64_t *ret,
                              size_t nbits);

/* The longest type gres_gpu_type and gres_mig_type write, with its NUL (NVML's name buffer, 96
 * bytes, plus a profile). */
#define GRES_TYPE_MAX 160

/* Slurm's AutoDetect type for an NVML product name: lower case, spaces to '_'
 * ("NVIDIA GeForce RTX 4090" -> "nvidia_geforce_rtx_4090"). 0; -EINVAL for an empty name or one
 * with a character a gres.conf record cannot carry; -ENAMETOOLONG. */
int gres_gpu_type(const char *product, char *buf, size_t size);

/* Slurm's AutoDetect type for a MIG device of profile ("1g.5gb") on a GPU named product: the
 * GPU's type cut at its first '-', '_', the profile ("nvidia_a100_1g.5gb"). As gres_gpu_type. */
int gres_mig_type(const char *product, const char *profile, char *buf, size_t size);

#endif /* GPUCTL_GRES_H */
