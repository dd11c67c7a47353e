// SPDX-License-Identifier: MIT
/*
 * fuzz-nvidia-visible.c: libFuzzer target for gpuctl_devstr_parse_nvidia
 * (src/lib/devices/nvidia-visible.c) over the same fixed synthetic 6-GPU snapshot as
 * fuzz-cuda-visible.c (two GPUs in MIG mode with MIG devices, one GPU without a UUID), built
 * through snapshot-internal.h.
 *
 * The input is one NUL-terminated NVIDIA_VISIBLE_DEVICES value. Properties beyond "no crash, no
 * leak": the result is 0 or -EINVAL; on -EINVAL the out-parameter is untouched and the message
 * is one line "NVIDIA_VISIBLE_DEVICES: '...': unknown device"; on success the set names real
 * devices, none twice, and rendering it as NVIDIA_VISIBLE_DEVICES with indices and parsing that
 * again gives the same set in the same order.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpuctl/gpuctl.h"

#include "fuzz-devstr-machine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void same(const struct gpuctl_devset *a, const struct gpuctl_devset *b)
{
	if (gpuctl_devset_count(a) != gpuctl_devset_count(b))
		abort();
	for (size_t i = 0; i < gpuctl_devset_count(a); i++) {
		size_t g, g2;
		int m, m2;

		if (gpuctl_devset_get(a, i, &g, &m) || gpuctl_devset_get(b, i, &g2, &m2) ||
		    g != g2 || m != m2)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct gpuctl_snapshot *snap;
	static struct gpuctl_ctx *ctx;
	struct gpuctl_devset *set = (struct gpuctl_devset *)&snap, *back = NULL;
	char *s, *text = NULL;
	size_t n;
	int r;

	if (!snap) {
		snap = fixture();
		if (gpuctl_ctx_new(&ctx) < 0)
			abort();
	}
	s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';

	r = gpuctl_devstr_parse_nvidia(ctx, snap, s, &set);
	if (r < 0) {
		const char *m = gpuctl_errmsg(ctx);

		if (r != -EINVAL || set != (struct gpuctl_devset *)&snap || strchr(m, '\n') ||
		    strncmp(m, "NVIDIA_VISIBLE_DEVICES: '", 25) != 0 ||
		    !strstr(m, "': unknown device"))
			abort();
		free(s);
		return 0;
	}
	n = gpuctl_devset_count(set);
	for (size_t i = 0; i < n; i++) {
		size_t g;
		int m;

		if (gpuctl_devset_get(set, i, &g, &m) != 0 || g >= N_GPUS ||
		    (m >= 0 && (size_t)m >= gpuctl_gpu_mig_count(gpuctl_snapshot_gpu(snap, g))))
			abort();
		for (size_t j = 0; j < i; j++) {
			size_t g2;
			int m2;

			if (gpuctl_devset_get(set, j, &g2, &m2) != 0 || (g2 == g && m2 == m))
				abort();
		}
	}
	if (gpuctl_devstr_render(ctx, snap, set, GPUCTL_RENDER_NVIDIA, GPUCTL_RENDER_INDICES,
	                         &text) != 0)
		abort();
	n = strlen(text);
	if (n < 24 || text[n - 1] != '\n')
		abort();
	text[n - 1] = '\0';
	if (gpuctl_devstr_parse_nvidia(ctx, snap, text + strlen("NVIDIA_VISIBLE_DEVICES="),
	                               &back) != 0)
		abort();
	same(set, back);
	gpuctl_devset_free(back);
	gpuctl_devset_free(set);
	free(text);
	free(s);
	return 0;
}
