/* SPDX-License-Identifier: MIT */
/*
 * devices-internal.h: what the files of the devices room share. Device sets, and the strings
 * that name them to CUDA, the NVIDIA container toolkit, Docker, CDI, Kubernetes and Slurm:
 *   devset.c          device sets, and the snapshot facts of one device
 *   devstr-entry.c    the entries of a ','-separated list: splitting, comparing, digits
 *   cuda-order.c      CUDA's enumeration order (which GPUs CUDA indices count, in what order)
 *   cuda-visible.c    CUDA_VISIBLE_DEVICES
 *   nvidia-visible.c  NVIDIA_VISIBLE_DEVICES
 *   outer.c           the allocation this process was started in (environment, Slurm)
 *   render.c          device strings written for each consumer
 *   cuda-mig.c        how many MIG devices one CUDA process uses
 *   gres.c            Slurm's gres.conf (gres.h)
 * All but gres.c and outer.c are pure functions of a snapshot. The rules, with their sources,
 * are in docs/device-strings.md; [documented] marks a rule NVIDIA (or Docker, Slurm) states,
 * [observed] one taken from re-implementations that model the driver (PyTorch
 * torch/cuda/__init__.py _parse_visible_devices / _transform_uuid_to_ordinals, nvitop
 * nvitop/api/device.py).
 */
#ifndef GPUCTL_DEVICES_INTERNAL_H
#define GPUCTL_DEVICES_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "gpuctl/gpuctl.h"
#include "snapshot-internal.h"
#include "util.h"

#define QUOTE_MAX 64 /* longest entry quoted in a message */
#define INT_TEXT  24 /* room for a size_t or int in decimal */

/* A device is a snapshot GPU index plus a MIG index (the position in that GPU's MIG list, i.e.
 * NVML's MIG device index), -1 for the whole GPU. */
struct dev {
	size_t gpu; /* snapshot GPU index */
	int mig;    /* MIG index on that GPU, -1 for the whole GPU */
};

/* A set keeps insertion order, no duplicates. */
struct gpuctl_devset {
	struct dev *devs; /* the devices, in order; owned */
	size_t n;         /* entries used in devs */
	size_t cap;       /* entries allocated in devs */
};

#define _cleanup_devset_ _cleanup_(gpuctl_devset_freep)

/* ---- devset.c: one device in the snapshot ---- */

/* d's MIG device in snap; NULL for a whole GPU or one snap lacks. */
const struct gpuctl_mig *devstr_dev_mig(const struct gpuctl_snapshot *snap, struct dev d);
/* NVML's MIG device index of d (what "<gpu>:<mig>" strings use), else d.mig. */
int devstr_mig_nvml_index(const struct gpuctl_snapshot *snap, struct dev d);
/* The snapshot place of the MIG device of GPU g whose NVML index is idx; -1 if none. */
int devstr_mig_by_nvml_index(const struct gpuctl_snapshot *snap, size_t g, size_t idx);
/* The MIG device whose UUID is s[0..len) (compared case-insensitively), into *ret. */
bool devstr_mig_by_uuid(const struct gpuctl_snapshot *snap, const char *s, size_t len,
                        struct dev *ret);
/* d's UUID (the GPU's or the MIG device's); NULL when unknown. */
const char *devstr_dev_uuid(const struct gpuctl_snapshot *snap, struct dev d);
/* gpuctl_device_label of d into buf, for messages; returns buf. */
const char *devstr_dev_name(const struct gpuctl_snapshot *snap, struct dev d, char *buf,
                            size_t size);
/* Whether allow admits d: d itself, or d's whole GPU when d is a MIG device. */
bool devstr_set_allows(const struct gpuctl_devset *allow, struct dev d);
/* Whether GPU gpu of snap is in MIG mode. */
bool devstr_gpu_in_mig_mode(const struct gpuctl_snapshot *snap, size_t gpu);

/* ---- devstr-entry.c: the entries of a list ---- */

/* Next ','-separated entry of *p, blanks trimmed, into *ret_s and *ret_len. Advances *p past the
 * entry (NULL after the last one). */
void devstr_next_entry(const char **p, const char **ret_s, size_t *ret_len);
/* Whether s[0..len) starts with prefix, in any case. */
bool devstr_has_prefix_ci(const char *s, size_t len, const char *prefix);
/* Whether s[0..len) is full (not NULL), in any case. */
bool devstr_eq_ci(const char *s, size_t len, const char *full);
/* Whether s[0..len) is one or more decimal digits. */
bool devstr_all_digits(const char *s, size_t len);
/* Decimal digits s[0..len) to a value; false on overflow past max. */
bool devstr_digits_value(const char *s, size_t len, size_t max, size_t *ret);

/* ---- cuda-order.c: CUDA's enumeration order ---- */

/* Whether CUDA_DEVICE_ORDER's value order asks for PCI bus order. */
bool devstr_order_is_pci(const char *order);
/* The GPUs CUDA indices count (not in MIG mode), in CUDA's order (pci: PCI_BUS_ID), into *ret
 * (malloc'ed) and *ret_n. -ENOMEM. */
int devstr_cuda_candidates(const struct gpuctl_snapshot *snap, bool pci, size_t **ret,
                           size_t *ret_n);

#endif /* GPUCTL_DEVICES_INTERNAL_H */
