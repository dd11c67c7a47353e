// SPDX-License-Identifier: MIT
/*
 * nvml-mig.c: the MIG devices of a GPU with MIG enabled: index, UUID, profile, instance ids
 * and memory.
 *
 * Decisions:
 * - MIG devices are asked for only with MIG enabled; an empty slot (NOT_FOUND,
 *   INVALID_ARGUMENT) is skipped without a word.
 * - The profile ("3g.40gb") is read from the MIG device's name, the part after "MIG ".
 */
#include <string.h>

#include "nvml-abi.h"
#include "nvml-internal.h"
#include "snapshot-internal.h"

/* "NVIDIA A100-SXM4-80GB MIG 3g.40gb" -> "3g.40gb"; NULL when the name has no MIG part. */
static const char *mig_profile_of(const char *name)
{
	const char *p = NULL;

	for (const char *s = strstr(name, "MIG "); s; s = strstr(s + 1, "MIG "))
		if (s == name || s[-1] == ' ')
			p = s + 4;
	while (p && *p == ' ')
		p++;
	return p && *p ? p : NULL;
}

void nvml_read_migs(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	unsigned max = 0;

	if (!nvml_field_is(&rd->snap->gpus[i], GPUCTL_F_MIG_MODE, 1))
		return;
	if (!CALL(rd, i, max_mig_count, dev, &max))
		return;
	for (unsigned k = 0; k < max && nvml_gpu_readable(rd, i); k++) {
		char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "";
		char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = "";
		nvmlDevice_t mdev = NULL;
		struct gpuctl_mig *m;
		int64_t total, used, freeb;
		unsigned id;
		nvmlReturn_t r;

		if (!rd->nv->sym.mig_handle) {
			nvml_symbol_missing(rd, rd->nv->name.mig_handle);
			return;
		}
		r = RAW(rd, i, mig_handle, dev, k, &mdev);
		if (r == NVML_ERROR_NOT_FOUND || r == NVML_ERROR_INVALID_ARGUMENT)
			continue; /* an empty slot */
		if (!nvml_check_result(rd, i, rd->nv->name.mig_handle, r, false))
			continue;
		m = snapshot_add_mig(rd->snap, i);
		if (!m) {
			rd->oom = -ENOMEM;
			return;
		}
		mig_set_int(m, GPUCTL_MIG_INDEX, k);
		(void)CALL(rd, i, uuid, mdev, uuid, sizeof(uuid));
		(void)CALL(rd, i, name, mdev, name, sizeof(name));
		if (mig_set_strs(m, uuid[0] ? uuid : NULL, mig_profile_of(name)) < 0)
			rd->oom = -ENOMEM;
		if (CALL(rd, i, gpu_instance_id, mdev, &id))
			mig_set_int(m, GPUCTL_MIG_GI, id);
		if (CALL(rd, i, compute_instance_id, mdev, &id))
			mig_set_int(m, GPUCTL_MIG_CI, id);
		if (nvml_read_memory(rd, i, mdev, &total, &used, &freeb)) {
			mig_set_int(m, GPUCTL_MIG_MEMORY_TOTAL, total);
			mig_set_int(m, GPUCTL_MIG_MEMORY_USED, used);
		}
	}
}
