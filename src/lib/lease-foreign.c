// SPDX-License-Identifier: MIT
/*
 * lease-foreign.c: foreign processes (docs/leases.md): the compute processes a snapshot shows
 * on a device that no lease accounts for, and whether they make the device busy by the lease
 * request's thresholds. Select-and-lease (lease.c) excludes those devices; gpuctl_lease_foreign
 * names them for `gpuctl select` and `gpuctl ps`.
 * Tests: tests/unit/test-lease.c (foreign processes), tests/cli/test_leases.py.
 *
 * Decisions:
 * - Foreign processes: a compute process on a device is a lease's only when its pid or an
 *   ancestor (up to ANCESTOR_MAX levels) is the pid or job_pid of a counting record for that
 *   same device (or its whole GPU, or, for a whole GPU, one of its MIG devices). Stricter than
 *   "any lease": a job that wanders onto a GPU it did not lease makes that GPU busy. A process
 *   on a MIG device that cannot be matched to one by GI/CI marks its whole GPU.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>

#include "ctx.h"
#include "lease-internal.h"
#include "snapshot-internal.h"
#include "util.h"

#define ANCESTOR_MAX 64 /* levels of the parent walk */

/* Whether a record for uuid concerns device (g, mig): the device itself, its whole GPU, or, for a
 * whole GPU, one of its MIG devices. */
static bool record_concerns(const struct gpuctl_snapshot *snap, const char *uuid, size_t g, int mig)
{
	const char *u = lease_dev_uuid(snap, g, -1);

	if (u && streq(u, uuid))
		return true;
	if (mig >= 0) {
		u = lease_dev_uuid(snap, g, mig);
		return u && streq(u, uuid);
	}
	for (size_t m = 0; m < snap->gpus[g].n_migs; m++) {
		u = lease_dev_uuid(snap, g, (int)m);
		if (u && streq(u, uuid))
			return true;
	}
	return false;
}

/* Whether pid or one of its ancestors is the holder or job of a counting record (held_rec[i])
 * that concerns device (g, mig). */
static bool belongs(const struct gpuctl_snapshot *snap, const struct record *v, size_t n,
                    const bool *held_rec, size_t g, int mig, pid_t pid)
{
	pid_t p = pid;

	for (int depth = 0; p > 1 && depth < ANCESTOR_MAX; depth++) {
		pid_t pp = 0;

		for (size_t i = 0; i < n; i++) {
			if (!held_rec[i] || !record_concerns(snap, v[i].uuid, g, mig))
				continue;
			if ((v[i].pid_alive && (pid_t)v[i].pid == p) ||
			    (v[i].job_alive && (pid_t)v[i].job_pid == p))
				return true;
		}
		if (lease_proc_stat(p, &pp, NULL) < 0)
			return false;
		p = pp;
	}
	return false;
}

/* A device's foreign processes: how many, and their memory (UINT64_MAX when one does not say). */
struct foreign_use {
	size_t n;
	uint64_t mem;
};

/* Whether a device with foreign use u and GPU utilisation util (-1: unknown) counts as busy. */
static bool foreign_busy(const struct foreign_use *u, int util,
                         const struct gpuctl_lease_request *lr)
{
	if (u->n == 0)
		return false;
	if (lr->busy_memory == 0 || u->mem > lr->busy_memory)
		return true;
	return lr->busy_utilization >= 0 && util > lr->busy_utilization;
}

int lease_foreign(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                  const struct gpuctl_snapshot *snap, const struct gpuctl_lease_request *lr,
                  struct gpuctl_devset **ret_set)
{
	struct gpuctl_devset *set = NULL;
	struct record *recs = NULL;
	_cleanup_free_ bool *held_rec = NULL;
	_cleanup_free_ struct foreign_use *use = NULL;
	size_t n_recs = 0, n_dev = 0;
	int r;

	r = gpuctl_devset_new(&set);
	if (r < 0)
		return ctx_error(ctx, r, "out of memory");
	if (!(snap->flags & GPUCTL_SNAP_PROCESSES)) {
		ctx_log(ctx, GPUCTL_LOG_DEBUG,
		        "leases: snapshot without processes, no foreign process detection");
		*ret_set = set;
		return 0;
	}
	r = lease_records_load(ctx, dir, (uid_t)-1, NULL, &recs, &n_recs);
	if (r < 0) {
		gpuctl_devset_free(set);
		return r;
	}
	held_rec = calloc(n_recs ? n_recs : 1, sizeof(*held_rec));
	for (size_t g = 0; g < snap->n_gpus; g++)
		n_dev += 1 + snap->gpus[g].n_migs;
	use = calloc(n_dev ? n_dev : 1, sizeof(*use));
	if (!held_rec || !use) {
		lease_records_free(recs, n_recs);
		gpuctl_devset_free(set);
		return ctx_error(ctx, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n_recs; i++) {
		char reason[REASON_MAX];

		held_rec[i] = lease_held(
		        lease_probe(dir, recs[i].uuid, false, NULL, NULL, reason, sizeof(reason)));
	}
	for (size_t g = 0, base = 0; g < snap->n_gpus; base += 1 + snap->gpus[g].n_migs, g++) {
		const struct gpuctl_gpu *gp = &snap->gpus[g];
		int64_t util = -1;

		for (size_t i = 0; i < gp->n_procs; i++) {
			const struct gpuctl_proc *pr = &gp->procs[i];
			int mig = -1;

			if (pr->has_mig)
				for (size_t m = 0; m < gp->n_migs; m++) {
					const struct gpuctl_mig *mg = &gp->migs[m];

					if (mg->valid[GPUCTL_MIG_GI] && mg->valid[GPUCTL_MIG_CI] &&
					    pr->gi == (uint64_t)mg->ints[GPUCTL_MIG_GI] &&
					    pr->ci == (uint64_t)mg->ints[GPUCTL_MIG_CI])
						mig = (int)m;
				}
			struct foreign_use *u = &use[base + 1 + (size_t)mig];

			if (belongs(snap, recs, n_recs, held_rec, g, mig, (pid_t)pr->pid))
				continue;
			u->n++;
			if (!pr->has_memory || pr->used_memory < 0 ||
			    u->mem > UINT64_MAX - (uint64_t)pr->used_memory)
				u->mem = UINT64_MAX;
			else
				u->mem += (uint64_t)pr->used_memory;
		}
		(void)gpuctl_gpu_int(gp, GPUCTL_F_UTIL_GPU, &util);
		for (int m = -1; m < (int)gp->n_migs; m++) {
			/* a MIG device's utilisation is not known: memory decides */
			if (!foreign_busy(&use[base + 1 + (size_t)m], m < 0 ? (int)util : -1, lr))
				continue;
			r = gpuctl_devset_add(set, g, m);
			if (r < 0 && r != -EEXIST) {
				lease_records_free(recs, n_recs);
				gpuctl_devset_free(set);
				return ctx_error(ctx, r, "out of memory");
			}
		}
	}
	lease_records_free(recs, n_recs);
	*ret_set = set;
	return 0;
}

int gpuctl_lease_foreign(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                         const struct gpuctl_snapshot *snap,
                         const struct gpuctl_lease_request *lreq, struct gpuctl_devset **ret_set)
{
	struct gpuctl_lease_request lr;
	_cleanup_close_ int sfd = -1;

	if (!dir || !snap || !ret_set)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	lease_request_copy(&lr, lreq);
	sfd = lease_select_lock_shared(dir);
	return lease_foreign(ctx, dir, snap, &lr, ret_set);
}
