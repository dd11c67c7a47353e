// SPDX-License-Identifier: MIT
/*
 * fuzz-health-state.c: libFuzzer target for the health state file parser (health_state_parse,
 * src/lib/health/health-state.c) over a synthetic 3-GPU snapshot built through snapshot-internal.h.
 *
 * The input is raw state-file bytes (not NUL-terminated), except that an input whose first
 * byte is 0x01 is the file without its end line: the rest gets "end <its CRC-32>" appended, so
 * that mutations reach the records of a format-2 file instead of stopping at the checksum.
 * Properties checked beyond "no crash, no leak": a file the parser refuses is -EBADMSG with a
 * reason and adds no XID; one it accepts adds only XIDs naming a GPU of the snapshot with a code
 * in 1..99999, and its sample has at most one record per UUID; the health engine accepts both.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuctl/gpuctl.h"
#include "snapshot-internal.h"

#define N_GPUS 3

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int health_state_parse(const char *text, size_t len, const char *boot,
                       const struct gpuctl_snapshot *snap, struct gpuctl_xid_log *xids,
                       struct gpuctl_snapshot **ret_prev, double *ret_time, char *why,
                       size_t wsize);
uint32_t health_state_crc32(const char *p, size_t n);

static struct gpuctl_snapshot *fixture(void)
{
	static const char *const uuids[N_GPUS] = {
	        "GPU-00000000-1111-2222-3333-444444444444",
	        "GPU-11111111-1111-2222-3333-444444444444", NULL, /* no UUID */
	};
	struct gpuctl_snapshot *s = snapshot_new_empty(N_GPUS, GPUCTL_SNAP_HEALTH);

	if (!s)
		abort();
	for (size_t i = 0; i < N_GPUS; i++)
		if (uuids[i] && snapshot_set_str(s, i, GPUCTL_F_UUID, uuids[i]) < 0)
			abort();
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct gpuctl_snapshot *snap;
	struct gpuctl_snapshot *prev = NULL;
	struct gpuctl_xid_log *xids = NULL;
	struct gpuctl_health_opts opts = GPUCTL_HEALTH_OPTS_INIT;
	struct gpuctl_health_report *rep = NULL;
	char *text, why[160];
	size_t len = size;
	double t = 0;
	int r;

	if (!snap)
		snap = fixture();
	text = malloc(size + 16);
	if (!text)
		abort();
	if (size > 0 && data[0] == 0x01) {
		len = size - 1;
		memcpy(text, data + 1, len);
		len += (size_t)snprintf(text + len, 16, "end %08x\n",
		                        (unsigned)health_state_crc32(text, len));
	} else {
		memcpy(text, data, size);
	}
	if (gpuctl_xid_log_new(&xids) < 0)
		abort();
	r = health_state_parse(text, len, "BOOT", snap, xids, &prev, &t, why, sizeof(why));
	free(text);
	if (r == -EBADMSG) {
		if (!why[0] || prev || gpuctl_xid_log_count(xids) != 0)
			abort();
	} else if (r < 0) {
		abort();
	}
	for (size_t i = 0; i < gpuctl_xid_log_count(xids); i++) {
		size_t gpu;
		unsigned xid;

		if (gpuctl_xid_log_get(xids, i, &gpu, &xid, NULL) < 0 || gpu >= N_GPUS - 1 ||
		    xid == 0 || xid > 99999)
			abort();
	}
	for (size_t i = 0; prev && i < prev->n_gpus; i++)
		for (size_t j = 0; j < i; j++)
			if (strcmp(gpuctl_gpu_str(&prev->gpus[i], GPUCTL_F_UUID),
			           gpuctl_gpu_str(&prev->gpus[j], GPUCTL_F_UUID)) == 0)
				abort();
	opts.prev = prev;
	opts.prev_age_s = 60;
	if (r == -EBADMSG)
		opts.state_error = why;
	if (gpuctl_health_check(NULL, snap, xids, &opts, &rep) < 0)
		abort();
	gpuctl_health_report_free(rep);
	gpuctl_snapshot_free(prev);
	gpuctl_xid_log_free(xids);
	return 0;
}
