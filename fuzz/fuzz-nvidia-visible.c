// SPDX-License-Identifier: MIT
/*
 * fuzz-nvidia-visible.c: libFuzzer target for gpuctl_devstr_parse_nvidia (src/lib/devstr.c) over
 * the same fixed synthetic 6-GPU snapshot as fuzz-cuda-visible.c (two GPUs in MIG mode with MIG
 * devices, one GPU without a UUID), built through snapshot-internal.h.
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
#include "snapshot-internal.h"

#define N_GPUS 6

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void set_gpu(struct gpuctl_snapshot *s, size_t i, const char *uuid, const char *bus,
                    const char *cc, int64_t clock, int mig_mode)
{
	if ((uuid && snapshot_set_str(s, i, GPUCTL_F_UUID, uuid) < 0) ||
	    snapshot_set_str(s, i, GPUCTL_F_PCI_BUS_ID, bus) < 0 ||
	    snapshot_set_str(s, i, GPUCTL_F_COMPUTE_CAP, cc) < 0 ||
	    snapshot_set_int(s, i, GPUCTL_F_CLOCK_SM_MAX, clock) < 0 ||
	    snapshot_set_int(s, i, GPUCTL_F_MIG_MODE, mig_mode) < 0)
		abort();
}

static void add_mig(struct gpuctl_snapshot *s, size_t g, const char *uuid, int gi)
{
	struct gpuctl_mig *m = snapshot_add_mig(s, g);

	if (!m || mig_set_strs(m, uuid, "1g.5gb") < 0)
		abort();
	mig_set_int(m, GPUCTL_MIG_GI, gi);
	mig_set_int(m, GPUCTL_MIG_CI, 0);
}

static struct gpuctl_snapshot *fixture(void)
{
	struct gpuctl_snapshot *s = snapshot_new_empty(N_GPUS, GPUCTL_SNAP_MIG);

	if (!s)
		abort();
	set_gpu(s, 0, "GPU-12ab0000-1111-2222-3333-444444444444", "00000000:07:00.0", "6.1", 1721,
	        0);
	set_gpu(s, 1, "GPU-1234aaaa-1111-2222-3333-444444444444", "00000000:0F:00.0", "8.6", 2100,
	        0);
	set_gpu(s, 2, "GPU-1234bbbb-1111-2222-3333-444444444444", "00000000:47:00.0", "8.0", 1410,
	        1);
	set_gpu(s, 3, NULL, "00000000:4E:00.0", "9.0", 1980, 0);
	set_gpu(s, 4, "GPU-abcdef01-1111-2222-3333-444444444444", "00000000:87:00.0", "8.0", 1410,
	        1);
	set_gpu(s, 5, "GPU-abcdef02-1111-2222-3333-444444444444", "00000000:90:00.0", "10.0", 1000,
	        0);
	add_mig(s, 2, "MIG-aaaa0000-1111-2222-3333-444444444444", 1);
	add_mig(s, 2, "MIG-aaaa0001-1111-2222-3333-444444444444", 2);
	add_mig(s, 4, "MIG-bbbb0000-1111-2222-3333-444444444444", 7);
	return s;
}

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
