// SPDX-License-Identifier: MIT
/*
 * fuzz-cuda-visible.c: libFuzzer target for gpuctl_devstr_parse_cuda
 * (src/lib/devices/cuda-visible.c) over a fixed synthetic 6-GPU snapshot (shared UUID prefixes, two
 * GPUs in MIG mode with MIG devices, mixed compute capabilities, one GPU without a UUID), built
 * through snapshot-internal.h.
 *
 * The input is one NUL-terminated CUDA_VISIBLE_DEVICES value, read under both orders.
 * Properties beyond "no crash, no leak": parsing never fails; the set names real devices, no
 * device twice, no MIG-mode GPU whole; it has no more devices than the value has entries; the
 * ordinals of the set in that same environment are 0, 1, 2, ...; and rendering the set as
 * CUDA_VISIBLE_DEVICES (UUIDs) and parsing it again gives the same set in the same order.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpuctl/gpuctl.h"

#include "fuzz-devstr-machine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap, const char *value,
                  const char *order)
{
	struct gpuctl_devset *set = NULL, *back = NULL;
	size_t entries = 1, n;
	char *text = NULL;
	int ord[64];

	if (gpuctl_devstr_parse_cuda(ctx, snap, value, order, &set) != 0)
		abort();
	for (const char *p = value; *p; p++)
		entries += *p == ',';
	n = gpuctl_devset_count(set);
	if (n > N_GPUS + 3 || (*value && n > entries) || (!*value && n))
		abort();
	for (size_t i = 0; i < n; i++) {
		size_t g;
		int m;
		int64_t mm = 0;

		if (gpuctl_devset_get(set, i, &g, &m) != 0 || g >= N_GPUS)
			abort();
		if (m >= 0 && (size_t)m >= gpuctl_gpu_mig_count(gpuctl_snapshot_gpu(snap, g)))
			abort();
		if (m < 0 &&
		    gpuctl_gpu_int(gpuctl_snapshot_gpu(snap, g), GPUCTL_F_MIG_MODE, &mm) == 0 && mm)
			abort();
		for (size_t j = 0; j < i; j++) {
			size_t g2;
			int m2;

			if (gpuctl_devset_get(set, j, &g2, &m2) != 0 || (g2 == g && m2 == m))
				abort();
		}
	}
	if (gpuctl_devset_cuda_ordinals(ctx, snap, set, value, order, ord) != 0)
		abort();
	for (size_t i = 0; i < n; i++)
		if (ord[i] != (int)i)
			abort();
	/* Round trip through the UUID form (GPU 3 has no UUID, and CUDA takes one MIG device per
	 * process: only sets without either). */
	if (gpuctl_devstr_render(ctx, snap, set, GPUCTL_RENDER_CUDA, 0, &text) == 0) {
		size_t len = strlen(text), pre = strlen("CUDA_VISIBLE_DEVICES=");

		if (len < pre + 1 || text[len - 1] != '\n')
			abort();
		text[len - 1] = '\0';
		if (gpuctl_devstr_parse_cuda(ctx, snap, text + pre, order, &back) != 0 ||
		    gpuctl_devset_count(back) != n)
			abort();
		for (size_t i = 0; i < n; i++) {
			size_t g, g2;
			int m, m2;

			if (gpuctl_devset_get(set, i, &g, &m) ||
			    gpuctl_devset_get(back, i, &g2, &m2) || g != g2 || m != m2)
				abort();
		}
		gpuctl_devset_free(back);
		free(text);
	} else if (!gpuctl_devset_contains(set, 3, -1) &&
	           gpuctl_devset_cuda_check(ctx, snap, set) == 0) {
		/* only a GPU without a UUID, or more MIG devices than one CUDA process uses
		 * (the MIG user guide's rule), may make the CUDA form fail */
		abort();
	}
	gpuctl_devset_free(set);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct gpuctl_snapshot *snap;
	static struct gpuctl_ctx *ctx;
	static unsigned runs;
	char *s;

	if (!snap)
		snap = fixture();
	/* The context remembers every value it warned about (once per value): a fresh one now
	 * and then keeps that list, and its linear search, short. */
	if (runs++ % 256 == 0) {
		gpuctl_ctx_free(ctx);
		if (gpuctl_ctx_new(&ctx) < 0)
			abort();
	}
	s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	check(ctx, snap, s, NULL);
	check(ctx, snap, s, "PCI_BUS_ID");
	free(s);
	return 0;
}
