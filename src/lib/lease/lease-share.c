// SPDX-License-Identifier: MIT
/*
 * lease-share.c: the memory that shared leases declare (docs/leases.md "Sharing"): OFD
 * byte-range locks on a device's lock file, the scans that count them, the placing of a new
 * lease's ranges and the room a device has. It works on a lock file's descriptor; which file and
 * when (a probe, a select-and-lease under select.lock) is the caller's: lease-dir.c,
 * lease-select.c, lease.c. Tests: tests/unit/test-lease.c (shared leases), tests/cli/test_share.py.
 *
 * A shared lease holds a shared flock on the device's lock file (so no exclusive lease can be
 * taken) and, on the same open file description, OFD read locks on byte ranges of that file:
 * byte k stands for MiB k of the device's memory, and the bytes a lease locks are the memory it
 * declared. The kernel drops both with the description, so the declared total is always the
 * live leases' own, whatever the records say. Ranges are placed under select.lock, never
 * overlapping; a scan asks F_OFD_GETLK for a write lock (which any read lock conflicts with).
 *
 * Decisions:
 * - Sharing (docs/leases.md "Sharing"): declared memory is one locked byte per MiB (OFD read
 *   locks on the lock file, placed under select.lock in free ranges below the capacity), counted
 *   by F_OFD_GETLK scans: kernel truth, like the lease itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>

#include "lease-internal.h"
#include "snapshot-internal.h"
#include "util.h"

#define SHARE_RANGES_MAX 1024 /* locked ranges a scan follows; more: the device counts full */
#define SHARE_SPACE      ((uint64_t)1 << 40) /* units a scan looks at (1 EiB of memory) */

struct share_range {
	uint64_t start, end; /* units, [start, end) */
};

/* Appends the locked ranges of fd's file within [a, b) to v (*n entries). The kernel answers
 * with one conflicting lock at a time; the part left of it is asked again (recursion), the part
 * right of it by the loop. -E2BIG past SHARE_RANGES_MAX. */
static int share_collect(int fd, uint64_t a, uint64_t b, struct share_range *v, size_t *n)
{
	while (a < b) {
		struct flock q = {.l_type = F_WRLCK,
		                  .l_whence = SEEK_SET,
		                  .l_start = (off_t)a,
		                  .l_len = (off_t)(b - a)};
		uint64_t s, e;

		if (fcntl(fd, F_OFD_GETLK, &q) < 0)
			return -errno;
		if (q.l_type == F_UNLCK)
			return 0;
		if (*n >= SHARE_RANGES_MAX)
			return -E2BIG;
		s = q.l_start < (off_t)a ? a : (uint64_t)q.l_start;
		e = q.l_len <= 0 || (uint64_t)q.l_start + (uint64_t)q.l_len > b
		            ? b
		            : (uint64_t)q.l_start + (uint64_t)q.l_len;
		if (e <= s)
			return -EIO; /* a conflict always overlaps what was asked */
		v[(*n)++] = (struct share_range){s, e};
		if (s > a) {
			int r = share_collect(fd, a, s, v, n);

			if (r < 0)
				return r;
		}
		a = e;
	}
	return 0;
}

static int share_range_cmp(const void *x, const void *y)
{
	const struct share_range *a = x, *b = y;

	return a->start < b->start ? -1 : a->start > b->start;
}

/* The locked ranges of fd's file, sorted and merged (*ret_v owned by the caller), and the units
 * they cover. */
static int share_scan(int fd, struct share_range **ret_v, size_t *ret_n, uint64_t *ret_used)
{
	_cleanup_free_ struct share_range *v = calloc(SHARE_RANGES_MAX, sizeof(*v));
	size_t n = 0, m = 0;
	uint64_t used = 0;
	int r;

	if (!v)
		return -ENOMEM;
	r = share_collect(fd, 0, SHARE_SPACE, v, &n);
	if (r < 0)
		return r;
	qsort(v, n, sizeof(*v), share_range_cmp);
	for (size_t i = 0; i < n; i++) {
		if (m > 0 && v[i].start <= v[m - 1].end) {
			if (v[i].end > v[m - 1].end)
				v[m - 1].end = v[i].end;
			continue;
		}
		v[m++] = v[i];
	}
	for (size_t i = 0; i < m; i++)
		used += v[i].end - v[i].start;
	if (ret_v)
		*ret_v = TAKE_PTR(v);
	if (ret_n)
		*ret_n = m;
	*ret_used = used;
	return 0;
}

int lease_share_used(int fd, uint64_t *ret_used)
{
	return share_scan(fd, NULL, NULL, ret_used);
}

int lease_share_take(int fd, uint64_t need, uint64_t cap)
{
	_cleanup_free_ struct share_range *v = NULL;
	size_t n = 0;
	uint64_t used = 0, at = 0;
	int r = share_scan(fd, &v, &n, &used);

	if (r < 0)
		return r;
	for (size_t i = 0; need > 0 && at < cap && i <= n; i++) {
		uint64_t gap_end = i < n ? v[i].start : cap;
		uint64_t len;
		struct flock l = {.l_type = F_RDLCK, .l_whence = SEEK_SET};

		if (gap_end > cap)
			gap_end = cap;
		if (gap_end > at) {
			len = gap_end - at < need ? gap_end - at : need;
			l.l_start = (off_t)at;
			l.l_len = (off_t)len;
			if (fcntl(fd, F_OFD_SETLK, &l) < 0)
				return -errno;
			need -= len;
		}
		if (i < n && v[i].end > at)
			at = v[i].end;
	}
	return need > 0 ? -ENOSPC : 0;
}

/* A device's total memory in bytes (0 when unknown: nothing can be shared on it). */
static uint64_t device_memory(const struct gpuctl_snapshot *snap, size_t g, int mig)
{
	int64_t v = 0;

	if (mig < 0)
		(void)gpuctl_gpu_int(&snap->gpus[g], GPUCTL_F_MEMORY_TOTAL, &v);
	else if (snap->gpus[g].migs[mig].valid[GPUCTL_MIG_MEMORY_TOTAL])
		v = snap->gpus[g].migs[mig].ints[GPUCTL_MIG_MEMORY_TOTAL];
	return v > 0 ? (uint64_t)v : 0;
}

uint64_t lease_share_capacity(const struct gpuctl_snapshot *snap, size_t g, int mig,
                              const struct gpuctl_lease_request *lr)
{
	uint64_t total = device_memory(snap, g, mig), margin;

	if (!lr->share_margin_is_pct)
		margin = lr->share_margin;
	else if (lr->share_margin >= 100)
		margin = total;
	else if (total <= UINT64_MAX / 100)
		margin = (total * lr->share_margin + 99) / 100; /* rounded up: the safe side */
	else
		margin = total / 100 * lr->share_margin + total / 100;

	return margin >= total ? 0 : (total - margin) / SHARE_UNIT;
}
