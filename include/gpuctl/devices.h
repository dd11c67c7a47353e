/* SPDX-License-Identifier: MIT */
/*
 * devices.h: naming devices: GPU ids, device sets and the device strings of CUDA, the NVIDIA
 * container toolkit, Slurm, Docker, CDI and Kubernetes.
 *
 * Part of libgpuctl's public API (include <gpuctl/gpuctl.h>, which includes every header; the
 * rules that hold for all of them are there). Compiles on its own, as C and as C++
 * (tests/unit/test-headers.c).
 */
#ifndef GPUCTL_DEVICES_H
#define GPUCTL_DEVICES_H

#include <stdbool.h>
#include <stddef.h>

#include "decls.h"
#include "context.h"
#include "snapshot.h"

/* Exported: see gpuctl.h, "What these headers declare is libgpuctl's whole ABI". */
GPUCTL_BEGIN_DECLS

/* ---- Choosing GPUs by id ---- */

/* Resolves a comma-separated list of GPU ids against a snapshot: an index, a full UUID, a unique
 * UUID prefix (with or without "GPU-"), or a PCI bus id in any of NVML's forms
 * ("00000000:07:00.0", "0000:07:00.0", "07:00.0"; case-insensitive). Writes the snapshot
 * indices in the order given, without duplicates. -EINVAL for a malformed, unknown or
 * ambiguous entry, with a message naming it. *ret_indices is malloc'ed (caller frees).
 * Details: blanks around entries are ignored; an empty entry or an empty list is an error; an
 * all-digit entry is always an index; a prefix without "GPU-" needs at least 4 hex digits (with
 * "GPU-" any length); "MIG-" UUIDs are refused (they name MIG devices, not GPUs). */
int gpuctl_ids_resolve(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap, const char *ids,
                       size_t **ret_indices, size_t *ret_count);

/* ---- Device sets and device strings (src/lib/devices/; rules: docs/device-strings.md) ---- */

/* An ordered list of devices: each a whole GPU or one MIG device of a GPU, named by snapshot
 * index (and MIG index on that GPU). A set refers to the snapshot it was made against, but
 * keeps no pointer to it. gpuctl_devset_add needs the set to itself; the rest only read it. */
struct gpuctl_devset;

int gpuctl_devset_new(struct gpuctl_devset **ret_set);
void gpuctl_devset_free(struct gpuctl_devset *set);
/* Appends a device; mig < 0 for the whole GPU. -EEXIST if it is in the set already. */
int gpuctl_devset_add(struct gpuctl_devset *set, size_t gpu, int mig);
size_t gpuctl_devset_count(const struct gpuctl_devset *set);
/* The i-th device; *ret_mig is -1 for a whole GPU. -EINVAL when i is out of range. */
int gpuctl_devset_get(const struct gpuctl_devset *set, size_t i, size_t *ret_gpu, int *ret_mig);
/* Whether the set holds that device. */
bool gpuctl_devset_contains(const struct gpuctl_devset *set, size_t gpu, int mig);
/* The i-th device's UUID ("GPU-..." or "MIG-...") in snap, NULL if unknown. */
const char *gpuctl_devset_uuid(const struct gpuctl_devset *set, const struct gpuctl_snapshot *snap,
                               size_t i);

/* A device's label for people, as gpuctl prints it: its NVML index, "3" for a whole GPU (mig
 * < 0), "3:1" for a MIG device (NVML's MIG device index on that GPU, which is what
 * NVIDIA_VISIBLE_DEVICES=<gpu>:<mig> and CDI names mean; mig is the device's place in the
 * snapshot). Always NUL-terminated, truncated to size. */
void gpuctl_device_label(const struct gpuctl_snapshot *snap, size_t gpu, int mig, char *buf,
                         size_t size);

/* Parses a CUDA_VISIBLE_DEVICES value as the CUDA driver does: NULL (unset) shows every
 * device; "" none; indices, GPU- UUIDs, unique UUID prefixes, MIG- UUIDs and the legacy
 * MIG-GPU-<uuid>/<gi>/<ci> form; parsing stops at the first invalid entry; a duplicate gives no
 * device at all. order is CUDA_DEVICE_ORDER's value (NULL or unknown: FASTEST_FIRST). The
 * result lists the visible devices in CUDA ordinal order. Content is never an error (CUDA
 * does not fail on it either): where parsing stopped, and why, is logged once as a warning.
 * Returns 0, or -ENOMEM. */
int gpuctl_devstr_parse_cuda(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                             const char *value, const char *order, struct gpuctl_devset **ret_set);
/* Parses NVIDIA_VISIBLE_DEVICES as the NVIDIA container toolkit does: "all", "none", "void",
 * empty, NVML indices, full GPU/MIG UUIDs, PCI bus ids, "<gpu>:<mig>" pairs. -EINVAL, with a
 * message naming the entry, for anything the toolkit would refuse. */
int gpuctl_devstr_parse_nvidia(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                               const char *value, struct gpuctl_devset **ret_set);
/* The allocation gpuctl itself runs inside, from its environment: CUDA_VISIBLE_DEVICES (with
 * CUDA_DEVICE_ORDER), NVIDIA_VISIBLE_DEVICES, SLURM_STEP_GPUS, SLURM_JOB_GPUS; when several
 * are set, the devices all of them allow, in the order of the first. Writes NULL to *ret_set
 * (and to *ret_source) when none is set; else the set and the name(s) of the variable(s).
 * -EINVAL (message names the variable) for a value that cannot be read. */
int gpuctl_outer_allocation(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                            struct gpuctl_devset **ret_set, const char **ret_source);

/* Output forms of a device set (`gpuctl select --format`). */
enum gpuctl_render {
	GPUCTL_RENDER_CUDA,   /* CUDA_VISIBLE_DEVICES=GPU-...,GPU-... */
	GPUCTL_RENDER_ENV,    /* shell export lines */
	GPUCTL_RENDER_DOCKER, /* --gpus '"device=..."' */
	GPUCTL_RENDER_NVIDIA, /* NVIDIA_VISIBLE_DEVICES=... */
	GPUCTL_RENDER_CDI,    /* nvidia.com/gpu=... names */
	GPUCTL_RENDER_K8S,    /* a resources + env snippet */
	GPUCTL_RENDER_JSON,   /* docs/json.md */
};
/* Render flag: NVML indices instead of UUIDs (with CUDA_DEVICE_ORDER=PCI_BUS_ID where CUDA
 * reads them). */
#define GPUCTL_RENDER_INDICES 1u
/* Looks a render form up by name ("cuda", "env", ...); -EINVAL if unknown. */
int gpuctl_render_lookup(const char *name);
/* Renders set; *ret_text is malloc'ed, ends with a newline. */
int gpuctl_devstr_render(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                         const struct gpuctl_devset *set, enum gpuctl_render form, unsigned flags,
                         char **ret_text);
/* Whether one CUDA process given set in CUDA_VISIBLE_DEVICES uses every device of it (MIG user
 * guide, "CUDA device enumeration", by the snapshot's driver branch): before R570 a process
 * enumerates one MIG device and nothing beside it; from R570 one compute instance per GPU
 * instance, at most GPUCTL_CUDA_MIG_MAX MIG devices, whole GPUs alongside. A driver version
 * that is not known counts as before R570. 0 when it does; -EINVAL with a one-line message
 * naming the devices and the rule when it does not (then start one process per device, as
 * `gpuctl run --each` does). gpuctl_devstr_render refuses the CUDA forms of such a set. */
#define GPUCTL_CUDA_MIG_MULTI_BRANCH 570u
#define GPUCTL_CUDA_MIG_MAX          64u
int gpuctl_devset_cuda_check(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                             const struct gpuctl_devset *set);
/* How many MIG devices one CUDA process enumerates on snap's driver: 1 before R570 (or when the
 * version is not known), GPUCTL_CUDA_MIG_MAX from R570 (then one per GPU instance). */
unsigned gpuctl_cuda_mig_limit(const struct gpuctl_snapshot *snap);
/* The CUDA ordinals of set's devices inside a process whose environment has
 * CUDA_VISIBLE_DEVICES=cuda_visible and CUDA_DEVICE_ORDER=order (NULL: unset), i.e. the number
 * to pass to cudaSetDevice. ret_ordinals has gpuctl_devset_count(set) entries; a device that
 * process cannot see gets -1. */
int gpuctl_devset_cuda_ordinals(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                                const struct gpuctl_devset *set, const char *cuda_visible,
                                const char *order, int *ret_ordinals);

GPUCTL_END_DECLS

#endif /* GPUCTL_DEVICES_H */
