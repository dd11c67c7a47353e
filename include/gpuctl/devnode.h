/* SPDX-License-Identifier: MIT */
/*
 * devnode.h: the device nodes of a GPU or MIG device, for whoever guards them (the agent's
 * enforce = acl and enforce = cgroup: docs/agent.md).
 *
 * Part of libgpuctl's public API (include <gpuctl/gpuctl.h>, which includes every header; the
 * rules that hold for all of them are there). Compiles on its own, as C and as C++
 * (tests/unit/test-headers.c).
 *
 * Nothing here changes a node; the map only says which nodes are whose.
 */
#ifndef GPUCTL_DEVNODE_H
#define GPUCTL_DEVNODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decls.h"
#include "context.h"
#include "snapshot.h"

/* Exported: see gpuctl.h, "What these headers declare is libgpuctl's whole ABI". */
GPUCTL_BEGIN_DECLS

/* ---- Device nodes (src/lib/enforce/devnode.c; docs/agent.md, "Device nodes") ---- */

/* The character major of /dev/nvidia<minor>, /dev/nvidiactl and /dev/nvidia-modeset (fixed by
 * the NVIDIA driver; its README, "Installing the NVIDIA driver": "major number 195"). */
#define GPUCTL_DEVNODE_NVIDIA_MAJOR  195
#define GPUCTL_DEVNODE_CTL_MINOR     255 /* /dev/nvidiactl */
#define GPUCTL_DEVNODE_MODESET_MINOR 254 /* /dev/nvidia-modeset */

enum gpuctl_devnode_kind {
	GPUCTL_DEVNODE_GPU,       /* DEV_DIR/nvidia<minor>, char 195:minor */
	GPUCTL_DEVNODE_GI_ACCESS, /* DEV_DIR/nvidia-caps/nvidia-cap<N>: a MIG GPU instance's
	                           * access capability ("gpuG/giI/access N" in mig-minors) */
	GPUCTL_DEVNODE_CI_ACCESS, /* ... its compute instance's ("gpuG/giI/ciC/access N") */
	GPUCTL_DEVNODE_SHARED,    /* nvidiactl, nvidia-uvm, nvidia-uvm-tools, nvidia-modeset:
	                           * every CUDA process opens them; nobody's alone */
};

/* One device node. Library-owned, read through the pointers a map hands out. */
struct gpuctl_devnode {
	enum gpuctl_devnode_kind kind;
	const char *path; /* under the map's dev_dir: "/dev/nvidia3" */
	uint32_t major;   /* its character device number */
	uint32_t minor;
};

/* The device nodes of every GPU and MIG device of a snapshot. Never changes once made; keeps no
 * pointer to its context or snapshot. */
struct gpuctl_devnodes;

/* Reads the map of snap's devices (MIG devices need GPUCTL_SNAP_MIG) under dev_dir (NULL:
 * "/dev"; absolute, else -EINVAL). No NVML call: a GPU's minor comes from the driver's
 * /proc/driver/nvidia/gpus/<bus>/information "Device Minor:" line matched by its bus id
 * ($GPUCTL_NVIDIA_PROC replaces /proc/driver/nvidia); a MIG device's capability minors from
 * /proc/driver/nvidia-caps/mig-minors ($GPUCTL_NVIDIA_CAPS_PROC replaces the directory) and the
 * nvidia-caps major, like nvidia-uvm's, from /proc/devices ($GPUCTL_PROC_DEVICES replaces the
 * file). What cannot be read leaves those devices without nodes (gpuctl_devnodes_of says
 * -ENODATA), it does not fail the map. -EINVAL, -ENOMEM. */
int gpuctl_devnodes_read(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                         const char *dev_dir, struct gpuctl_devnodes **ret_map);
void gpuctl_devnodes_free(struct gpuctl_devnodes *map);

/* The nodes a process needs of device (gpu, mig; mig -1 for the whole GPU), the shared ones
 * aside: the GPU's node; for a MIG device the GPU's node (CUDA opens its parent GPU's), then its
 * GPU instance's and its compute instance's access capabilities. (*ret_nodes)[k], k < *ret_n,
 * borrowed from map. -ENODATA when the GPU's minor (or a MIG device's capability) is unknown,
 * -ERANGE for a device the snapshot did not have. */
int gpuctl_devnodes_of(const struct gpuctl_devnodes *map, size_t gpu, int mig,
                       const struct gpuctl_devnode *const **ret_nodes, size_t *ret_n);

/* The shared nodes every CUDA process opens and nobody guards: nvidiactl (195:255),
 * nvidia-modeset (195:254), and nvidia-uvm and nvidia-uvm-tools (minors 0 and 1 of the major
 * /proc/devices gives "nvidia-uvm"; left out when it gives none). Borrowed from map. */
void gpuctl_devnodes_shared(const struct gpuctl_devnodes *map,
                            const struct gpuctl_devnode *const **ret_nodes, size_t *ret_n);

/* The directory the map's paths are under ("/dev" by default). */
const char *gpuctl_devnodes_dev_dir(const struct gpuctl_devnodes *map);

GPUCTL_END_DECLS

#endif /* GPUCTL_DEVNODE_H */
