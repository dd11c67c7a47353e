// SPDX-License-Identifier: MIT
/*
 * fuzz-ids.c: libFuzzer target for gpuctl_ids_resolve (src/lib/model/ids.c) over a synthetic 8-GPU
 * snapshot built through snapshot-internal.h (no NVML).
 *
 * The input is one NUL-terminated id list. Properties checked beyond "no crash, no leak": on
 * success every index is in range, none repeats, and there is at least one; on failure the
 * out-parameters are untouched and the message is one non-empty line.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpuctl/gpuctl.h"
#include "snapshot-internal.h"

#define N_GPUS 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct gpuctl_snapshot *fixture(void)
{
	static const char *const uuids[N_GPUS] = {
	        "GPU-12ab0000-1111-2222-3333-444444444444",
	        "GPU-abcdef01-1111-2222-3333-444444444444",
	        "GPU-abcdef02-1111-2222-3333-444444444444",
	        "GPU-fedcba98-1111-2222-3333-444444444444",
	        "GPU-1234aaaa-1111-2222-3333-444444444444",
	        "GPU-55555555-1111-2222-3333-444444444444",
	        NULL, /* a GPU whose UUID NVML did not give */
	        "GPU-1234bbbb-1111-2222-3333-444444444444",
	};
	static const char *const buses[N_GPUS] = {
	        "00000000:07:00.0", "00000000:0F:00.0", "00000000:47:00.0",
	        "00000000:4E:00.0", "00000000:87:00.0", NULL,
	        "00000001:B7:00.0", "00000000:BD:00.0",
	};
	struct gpuctl_snapshot *s = snapshot_new_empty(N_GPUS, GPUCTL_SNAP_BASIC);

	if (!s)
		abort();
	for (size_t i = 0; i < N_GPUS; i++) {
		if (uuids[i] && snapshot_set_str(s, i, GPUCTL_F_UUID, uuids[i]) < 0)
			abort();
		if (buses[i] && snapshot_set_str(s, i, GPUCTL_F_PCI_BUS_ID, buses[i]) < 0)
			abort();
	}
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct gpuctl_snapshot *snap;
	static struct gpuctl_ctx *ctx;
	size_t *idx = (size_t *)&snap, n = SIZE_MAX;
	char *s;
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

	r = gpuctl_ids_resolve(ctx, snap, s, &idx, &n);
	if (r == 0) {
		bool seen[N_GPUS] = {false};

		if (n == 0 || n > N_GPUS)
			abort();
		for (size_t i = 0; i < n; i++) {
			if (idx[i] >= N_GPUS || seen[idx[i]])
				abort();
			seen[idx[i]] = true;
		}
		free(idx);
	} else {
		const char *m = gpuctl_errmsg(ctx);

		if (r != -EINVAL || idx != (size_t *)&snap || n != SIZE_MAX || !m[0] ||
		    strchr(m, '\n'))
			abort();
	}
	free(s);
	return 0;
}
