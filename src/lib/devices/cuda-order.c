// SPDX-License-Identifier: MIT
/*
 * cuda-order.c: CUDA's enumeration order, and which GPUs its indices count ("candidates").
 * docs/device-strings.md, "CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER".
 *
 * Decisions:
 * - Candidates: whole GPUs not in MIG mode, in CUDA's order. A GPU in MIG mode cannot be used
 *   whole by CUDA, and MIG devices are enumerated only when CUDA_VISIBLE_DEVICES names them by
 *   UUID (MIG user guide, "CUDA Device Enumeration"), so a MIG device never has an index.
 * - CUDA's order: PCI_BUS_ID sorts by PCI bus id [documented]. FASTEST_FIRST (the default and
 *   any other value) is documented only as "a simple heuristic" that puts the fastest device
 *   first; our model of it: compute capability (major, minor) descending, then maximum SM clock
 *   descending, then total memory descending, then PCI bus id ascending. A fact the snapshot
 *   lacks sorts after every known value. PCI bus ids are compared as text: NVML prints them
 *   fixed-width ("00000000:41:00.0"), so text order is numeric order.
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "devices-internal.h"

/* "8.6" -> 8, 6; false when unknown or malformed. */
static bool compute_cap(const struct gpuctl_gpu *g, long *ret_major, long *ret_minor)
{
	const char *s = gpuctl_gpu_str(g, GPUCTL_F_COMPUTE_CAP);
	char *end;
	long major, minor;

	if (!s || !isdigit((unsigned char)s[0]))
		return false;
	errno = 0;
	major = strtol(s, &end, 10);
	if (errno || *end != '.' || !isdigit((unsigned char)end[1]))
		return false;
	minor = strtol(end + 1, &end, 10);
	if (errno || *end)
		return false;
	*ret_major = major;
	*ret_minor = minor;
	return true;
}

/* Compares known-ness first (known sorts first), then the values descending. */
static int cmp_desc(bool ka, int64_t a, bool kb, int64_t b)
{
	if (ka != kb)
		return ka ? -1 : 1;
	if (!ka || a == b)
		return 0;
	return a > b ? -1 : 1;
}

static int cmp_int_field(const struct gpuctl_gpu *a, const struct gpuctl_gpu *b,
                         enum gpuctl_field f)
{
	int64_t va = 0, vb = 0;
	bool ka = gpuctl_gpu_int(a, f, &va) == 0, kb = gpuctl_gpu_int(b, f, &vb) == 0;

	return cmp_desc(ka, va, kb, vb);
}

/* PCI bus id ascending (missing last), then NVML index. */
static int cmp_bus(const struct gpuctl_gpu *a, const struct gpuctl_gpu *b)
{
	const char *ba = gpuctl_gpu_str(a, GPUCTL_F_PCI_BUS_ID);
	const char *bb = gpuctl_gpu_str(b, GPUCTL_F_PCI_BUS_ID);
	int c;

	if (!ba != !bb)
		return ba ? -1 : 1;
	if (ba && (c = strcasecmp(ba, bb)) != 0)
		return c < 0 ? -1 : 1;
	return gpuctl_gpu_index(a) < gpuctl_gpu_index(b) ? -1 : 1;
}

/* Our model of FASTEST_FIRST: see the file-top comment and docs/device-strings.md. */
static int cmp_fastest(const struct gpuctl_gpu *a, const struct gpuctl_gpu *b)
{
	long amaj = 0, amin = 0, bmaj = 0, bmin = 0;
	bool ka = compute_cap(a, &amaj, &amin), kb = compute_cap(b, &bmaj, &bmin);
	int c;

	if ((c = cmp_desc(ka, amaj, kb, bmaj)) != 0 || (c = cmp_desc(ka, amin, kb, bmin)) != 0)
		return c;
	if ((c = cmp_int_field(a, b, GPUCTL_F_CLOCK_SM_MAX)) != 0)
		return c;
	if ((c = cmp_int_field(a, b, GPUCTL_F_MEMORY_TOTAL)) != 0)
		return c;
	return cmp_bus(a, b);
}

bool devstr_order_is_pci(const char *order)
{
	return order && streq(order, "PCI_BUS_ID");
}

/* The GPUs CUDA indices count (not in MIG mode), in CUDA's order. Insertion sort: stable, no
 * comparator context needed, and machines have tens of GPUs. */
int devstr_cuda_candidates(const struct gpuctl_snapshot *snap, bool pci, size_t **ret,
                           size_t *ret_n)
{
	size_t *c = calloc(snap->n_gpus ? snap->n_gpus : 1, sizeof(*c));
	size_t n = 0;

	if (!c)
		return -ENOMEM;
	for (size_t g = 0; g < snap->n_gpus; g++) {
		size_t j = n;

		if (devstr_gpu_in_mig_mode(snap, g))
			continue;
		while (j > 0) {
			const struct gpuctl_gpu *a = &snap->gpus[c[j - 1]], *b = &snap->gpus[g];

			if ((pci ? cmp_bus(a, b) : cmp_fastest(a, b)) <= 0)
				break;
			c[j] = c[j - 1];
			j--;
		}
		c[j] = g;
		n++;
	}
	*ret = c;
	*ret_n = n;
	return 0;
}
