// SPDX-License-Identifier: MIT
/*
 * fuzz-kmsg.c: libFuzzer target for the kernel-log XID reader (gpuctl_xid_log_parse,
 * src/lib/health/kmsg.c) over a synthetic 4-GPU snapshot built through snapshot-internal.h.
 *
 * The input is raw kernel-log bytes (not NUL-terminated: the parser must stop at the length).
 * Properties checked beyond "no crash, no leak": the result is the number of entries the log
 * holds (a fresh log); every entry names a GPU of the snapshot and an XID in 1..99999, and its
 * text is printable; the health engine accepts the log.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpuctl/gpuctl.h"
#include "snapshot-internal.h"

#define N_GPUS 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct gpuctl_snapshot *fixture(void)
{
	static const char *const buses[N_GPUS] = {"00000000:07:00.0", "00000000:0F:00.0",
	                                          "00000001:B7:00.0", NULL};
	struct gpuctl_snapshot *s = snapshot_new_empty(N_GPUS, GPUCTL_SNAP_HEALTH);

	if (!s)
		abort();
	/* UUIDs for the reset lines ("GPU reset executed: GPU-...") */
	static const char *const uuids[N_GPUS] = {"GPU-00000000-1111-2222-3333-444444444444",
	                                          "GPU-00000001-1111-2222-3333-444444444444", NULL,
	                                          NULL};
	for (size_t i = 0; i < N_GPUS; i++)
		if ((buses[i] && snapshot_set_str(s, i, GPUCTL_F_PCI_BUS_ID, buses[i]) < 0) ||
		    (uuids[i] && snapshot_set_str(s, i, GPUCTL_F_UUID, uuids[i]) < 0))
			abort();
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct gpuctl_snapshot *snap;
	struct gpuctl_xid_log *log = NULL;
	struct gpuctl_health_report *rep = NULL;
	int r;

	if (!snap)
		snap = fixture();
	if (gpuctl_xid_log_new(&log) < 0)
		abort();
	r = gpuctl_xid_log_parse(log, snap, (const char *)data, size);
	if (r < 0 || (size_t)r != gpuctl_xid_log_count(log))
		abort();
	for (size_t i = 0; i < gpuctl_xid_log_count(log); i++) {
		size_t gpu;
		unsigned xid;
		const char *text;

		if (gpuctl_xid_log_get(log, i, &gpu, &xid, &text) < 0 || gpu >= N_GPUS - 1 ||
		    xid == 0 || xid > 99999)
			abort();
		for (const char *c = text; c && *c; c++)
			if (!isprint((unsigned char)*c))
				abort();
	}
	if (gpuctl_health_check(NULL, snap, log, NULL, &rep) < 0)
		abort();
	gpuctl_health_report_free(rep);
	gpuctl_xid_log_free(log);
	return 0;
}
