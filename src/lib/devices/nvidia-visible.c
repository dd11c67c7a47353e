// SPDX-License-Identifier: MIT
/*
 * nvidia-visible.c: NVIDIA_VISIBLE_DEVICES read as the NVIDIA container toolkit reads it
 * (gpuctl_devstr_parse_nvidia). Fuzzed by fuzz/fuzz-nvidia-visible.c. docs/device-strings.md,
 * "NVIDIA_VISIBLE_DEVICES".
 *
 * Decisions:
 * - We follow nvidia-container-toolkit internal/config/image/cuda_image.go (DevicesFromEnvvars:
 *   entries trimmed, empty ones skipped, "void" anywhere or nothing left: void), devices.go
 *   (NewVisibleDevices: precedence void > none > all) and libnvidia-container
 *   src/cli/common.c (select_devices). "all" (any case, as libnvidia-container compares it)
 *   selects every GPU and every MIG device (select_all_devices does both), GPUs first. A MIG
 *   entry selects the MIG device only (the toolkit also injects its parent's device node, which
 *   is plumbing, not an allocated device).
 * - Indices are NVML's; UUIDs must be full (no prefixes); a bus id needs the domain
 *   ("%x:%02x:%02x.0" in matches_pci_format) and is looked up with gpuctl_ids_resolve (ids.c),
 *   which compares by value; "<gpu>:<mig>" names a MIG device by NVML indices. Anything else:
 *   -EINVAL "NVIDIA_VISIBLE_DEVICES: 'x': unknown device". Duplicates are merged. Stricter than
 *   the toolkit in corners sscanf lets through (trailing junk after a bus id, a nonzero
 *   function), never laxer.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ctx.h"
#include "devices-internal.h"

#define BUSID_MAX 64 /* longest entry tried as a PCI bus id */

static int add_all(struct gpuctl_devset *set, const struct gpuctl_snapshot *snap)
{
	int r;

	for (size_t g = 0; g < snap->n_gpus; g++)
		if ((r = gpuctl_devset_add(set, g, -1)) < 0)
			return r;
	for (size_t g = 0; g < snap->n_gpus; g++)
		for (size_t m = 0; m < snap->gpus[g].n_migs && m <= INT32_MAX; m++)
			if ((r = gpuctl_devset_add(set, g, (int)m)) < 0)
				return r;
	return 0;
}

/* A bus id with its domain ("0000:07:00.0"), found through gpuctl_ids_resolve. */
static bool nvidia_bus_entry(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                             const char *s, size_t len, struct dev *ret)
{
	char buf[BUSID_MAX];
	const char *c1 = memchr(s, ':', len), *c2;
	size_t *idx = NULL, n = 0;
	bool ok;

	if (len >= sizeof(buf) || !c1 || !(c2 = memchr(c1 + 1, ':', len - (size_t)(c1 - s) - 1)))
		return false;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (memchr(buf, ',', len) || gpuctl_ids_resolve(ctx, snap, buf, &idx, &n) < 0)
		return false;
	ok = n == 1;
	if (ok)
		*ret = (struct dev){.gpu = idx[0], .mig = -1};
	free(idx);
	return ok;
}

/* The device an entry names; false if none (the caller reports "unknown device"). */
static bool nvidia_entry(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap, const char *s,
                         size_t len, struct dev *ret)
{
	const char *colon = memchr(s, ':', len);
	size_t g, m;

	if (len > 4 && devstr_has_prefix_ci(s, len, "GPU-")) {
		for (g = 0; g < snap->n_gpus; g++)
			if (devstr_eq_ci(s, len, gpuctl_gpu_str(&snap->gpus[g], GPUCTL_F_UUID))) {
				*ret = (struct dev){.gpu = g, .mig = -1};
				return true;
			}
		return false;
	}
	if (len > 4 && devstr_has_prefix_ci(s, len, "MIG-"))
		return devstr_mig_by_uuid(snap, s, len, ret);
	if (devstr_all_digits(s, len)) {
		if (!devstr_digits_value(s, len, SIZE_MAX, &g) || g >= snap->n_gpus)
			return false;
		*ret = (struct dev){.gpu = g, .mig = -1};
		return true;
	}
	if (colon && devstr_all_digits(s, (size_t)(colon - s)) &&
	    devstr_all_digits(colon + 1, len - (size_t)(colon - s) - 1)) {
		if (!devstr_digits_value(s, (size_t)(colon - s), SIZE_MAX, &g) ||
		    !devstr_digits_value(colon + 1, len - (size_t)(colon - s) - 1, INT32_MAX, &m) ||
		    g >= snap->n_gpus || devstr_mig_by_nvml_index(snap, g, m) < 0)
			return false;
		*ret = (struct dev){.gpu = g, .mig = devstr_mig_by_nvml_index(snap, g, m)};
		return true;
	}
	return nvidia_bus_entry(ctx, snap, s, len, ret);
}

int gpuctl_devstr_parse_nvidia(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                               const char *value, struct gpuctl_devset **ret_set)
{
	_cleanup_devset_ struct gpuctl_devset *set = NULL;
	bool is_void = true, is_none = false, is_all = false;
	const char *p;
	int r;

	if (!snap || !ret_set)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	r = gpuctl_devset_new(&set);
	if (r < 0)
		return ctx_error(ctx, r, "out of memory");

	/* The special values first, as the toolkit reads them: void > none > all. */
	for (p = value; p && *value;) {
		const char *s;
		size_t len;

		devstr_next_entry(&p, &s, &len);
		if (len == 0)
			continue;
		if (len == 4 && strncmp(s, "void", 4) == 0) {
			is_void = true;
			break;
		}
		is_void = false;
		if (len == 4 && strncmp(s, "none", 4) == 0)
			is_none = true;
		else if (len == 3 && strncasecmp(s, "all", 3) == 0)
			is_all = true;
	}
	if (is_void || is_none) {
		*ret_set = TAKE_PTR(set);
		return 0;
	}
	if (is_all) {
		if ((r = add_all(set, snap)) < 0)
			return ctx_error(ctx, r, "out of memory");
		*ret_set = TAKE_PTR(set);
		return 0;
	}

	for (p = value; p;) {
		const char *s;
		size_t len;
		struct dev d = {0};

		devstr_next_entry(&p, &s, &len);
		if (len == 0)
			continue;
		if (!nvidia_entry(ctx, snap, s, len, &d)) {
			char q[QUOTE_MAX + 4];

			quote_text(q, sizeof(q), s, len, QUOTE_MAX);
			return ctx_error(ctx, -EINVAL,
			                 "NVIDIA_VISIBLE_DEVICES: '%s': unknown device", q);
		}
		r = gpuctl_devset_add(set, d.gpu, d.mig);
		if (r < 0 && r != -EEXIST)
			return ctx_error(ctx, r, "out of memory");
	}
	*ret_set = TAKE_PTR(set);
	return 0;
}
