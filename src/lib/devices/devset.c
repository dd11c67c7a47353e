// SPDX-License-Identifier: MIT
/*
 * devset.c: device sets (gpuctl.h "Device sets and device strings"), and what the snapshot says
 * about one device of a set: its UUID, its MIG device, its label.
 *
 * Decisions:
 * - A device is a snapshot GPU index plus a MIG index (the position in that GPU's MIG list,
 *   i.e. NVML's MIG device index), -1 for the whole GPU. A set keeps insertion order, no
 *   duplicates (devices-internal.h).
 * - A label ("<gpu>" or "<gpu>:<mig>") numbers a MIG device by NVML's MIG device index
 *   (GPUCTL_MIG_INDEX), as the container toolkit's "<gpu>:<mig>" does.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "devices-internal.h"

#define DEVSET_INIT 8 /* first allocation of a set */

/* ---- Device sets ---- */

int gpuctl_devset_new(struct gpuctl_devset **ret_set)
{
	struct gpuctl_devset *s;

	if (!ret_set)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	*ret_set = s;
	return 0;
}

void gpuctl_devset_free(struct gpuctl_devset *set)
{
	if (!set)
		return;
	free(set->devs);
	free(set);
}

bool gpuctl_devset_contains(const struct gpuctl_devset *set, size_t gpu, int mig)
{
	if (!set)
		return false;
	if (mig < 0)
		mig = -1;
	for (size_t i = 0; i < set->n; i++)
		if (set->devs[i].gpu == gpu && set->devs[i].mig == mig)
			return true;
	return false;
}

int gpuctl_devset_add(struct gpuctl_devset *set, size_t gpu, int mig)
{
	if (!set)
		return -EINVAL;
	if (mig < 0)
		mig = -1;
	if (gpuctl_devset_contains(set, gpu, mig))
		return -EEXIST;
	if (set->n == set->cap) {
		size_t cap = set->cap ? set->cap * 2 : DEVSET_INIT;
		struct dev *d;

		if (cap > SIZE_MAX / sizeof(*d))
			return -ENOMEM;
		d = realloc(set->devs, cap * sizeof(*d));
		if (!d)
			return -ENOMEM;
		set->devs = d;
		set->cap = cap;
	}
	set->devs[set->n++] = (struct dev){.gpu = gpu, .mig = mig};
	return 0;
}

size_t gpuctl_devset_count(const struct gpuctl_devset *set)
{
	return set ? set->n : 0;
}

int gpuctl_devset_get(const struct gpuctl_devset *set, size_t i, size_t *ret_gpu, int *ret_mig)
{
	if (!set || i >= set->n)
		return -EINVAL;
	if (ret_gpu)
		*ret_gpu = set->devs[i].gpu;
	if (ret_mig)
		*ret_mig = set->devs[i].mig;
	return 0;
}

/* ---- One device in the snapshot ---- */

const struct gpuctl_mig *devstr_dev_mig(const struct gpuctl_snapshot *snap, struct dev d)
{
	const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, d.gpu);

	return g && d.mig >= 0 ? gpuctl_gpu_mig(g, (size_t)d.mig) : NULL;
}

/* The number "<gpu>:<mig>" strings use for a MIG device: NVML's MIG device index on its GPU
 * (GPUCTL_MIG_INDEX, the index nvmlDeviceGetMigDeviceHandleByIndex takes, which the container
 * toolkit's "<gpu>:<mig>" names), or its place in the snapshot when NVML did not say. */
int devstr_mig_nvml_index(const struct gpuctl_snapshot *snap, struct dev d)
{
	const struct gpuctl_mig *m = devstr_dev_mig(snap, d);
	int64_t v;

	if (m && gpuctl_mig_int(m, GPUCTL_MIG_INDEX, &v) == 0 && v >= 0 && v <= INT32_MAX)
		return (int)v;
	return d.mig;
}

/* The snapshot place of the MIG device of GPU g whose NVML index is idx; -1 if none. */
int devstr_mig_by_nvml_index(const struct gpuctl_snapshot *snap, size_t g, size_t idx)
{
	for (size_t m = 0; m < snap->gpus[g].n_migs && m <= INT32_MAX; m++)
		if ((size_t)devstr_mig_nvml_index(snap, (struct dev){.gpu = g, .mig = (int)m}) ==
		    idx)
			return (int)m;
	return -1;
}

/* The MIG device whose UUID is s[0..len) (compared case-insensitively), into *ret. */
bool devstr_mig_by_uuid(const struct gpuctl_snapshot *snap, const char *s, size_t len,
                        struct dev *ret)
{
	for (size_t g = 0; g < snap->n_gpus; g++)
		for (size_t m = 0; m < snap->gpus[g].n_migs; m++)
			if (devstr_eq_ci(s, len, snap->gpus[g].migs[m].uuid)) {
				*ret = (struct dev){.gpu = g, .mig = (int)m};
				return true;
			}
	return false;
}

const char *devstr_dev_uuid(const struct gpuctl_snapshot *snap, struct dev d)
{
	const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, d.gpu);
	const struct gpuctl_mig *m;

	if (!g)
		return NULL;
	if (d.mig < 0)
		return gpuctl_gpu_str(g, GPUCTL_F_UUID);
	m = gpuctl_gpu_mig(g, (size_t)d.mig);
	return m ? gpuctl_mig_uuid(m) : NULL;
}

const char *gpuctl_devset_uuid(const struct gpuctl_devset *set, const struct gpuctl_snapshot *snap,
                               size_t i)
{
	if (!set || !snap || i >= set->n)
		return NULL;
	return devstr_dev_uuid(snap, set->devs[i]);
}

void gpuctl_device_label(const struct gpuctl_snapshot *snap, size_t gpu, int mig, char *buf,
                         size_t size)
{
	if (!buf || size == 0)
		return;
	if (mig >= 0 && snap)
		(void)snprintf(buf, size, "%zu:%d", gpu,
		               devstr_mig_nvml_index(snap, (struct dev){.gpu = gpu, .mig = mig}));
	else if (mig >= 0)
		(void)snprintf(buf, size, "%zu:%d", gpu, mig);
	else
		(void)snprintf(buf, size, "%zu", gpu);
}

/* gpuctl_device_label of d, for messages. */
const char *devstr_dev_name(const struct gpuctl_snapshot *snap, struct dev d, char *buf,
                            size_t size)
{
	gpuctl_device_label(snap, d.gpu, d.mig, buf, size);
	return buf;
}

/* Whether allow admits d: d itself, or d's whole GPU when d is a MIG device. */
bool devstr_set_allows(const struct gpuctl_devset *allow, struct dev d)
{
	return gpuctl_devset_contains(allow, d.gpu, d.mig) ||
	       (d.mig >= 0 && gpuctl_devset_contains(allow, d.gpu, -1));
}

bool devstr_gpu_in_mig_mode(const struct gpuctl_snapshot *snap, size_t gpu)
{
	int64_t v = 0;

	return gpuctl_gpu_int(gpuctl_snapshot_gpu(snap, gpu), GPUCTL_F_MIG_MODE, &v) == 0 && v;
}
