// SPDX-License-Identifier: MIT
/*
 * lease-foreign.c: foreign processes (docs/leases.md): the compute processes a snapshot shows
 * on a device that no lease accounts for, and whether they make the device busy by the lease
 * request's thresholds. Select-and-lease (lease-select.c) excludes those devices;
 * gpuctl_lease_foreign names them for gpuctl_alloc (run --dry-run), and gpuctl_foreign_scan
 * classifies every process for `gpuctl ps` by the very same rule. Tests: tests/unit/test-lease.c
 * (foreign processes), tests/cli/test_leases.py.
 *
 * Decisions:
 * - Foreign processes: a compute process on a device is a lease's only when it or an ancestor
 *   (up to ANCESTOR_MAX levels) is the pid or job_pid of a holder's record for that same device
 *   (or its whole GPU, or, for a whole GPU, one of its MIG devices), or holds the lock of one
 *   of those devices (a descriptor whose open file description has the flock, per
 *   /proc/PID/fdinfo: lease_proc_holds). Stricter than "any lease": a job that wanders onto a
 *   GPU it did not lease makes that GPU busy. A process on a MIG device that cannot be matched
 *   to one by GI/CI marks its whole GPU.
 * - The lock decides, whatever the parents: a job that daemonised itself (setsid, its parent
 *   gone) keeping the inherited lease descriptors is its lease's, and so is a process left
 *   holding a lease whose run has ended. Records are tried first (a parent walk through
 *   /proc/PID/stat); descriptors only for a process they do not account for, and only those
 *   whose link names a .lock file are looked at further (lease_proc_holds). The lock files are
 *   found by fstatat, never opened (no inotify event for waiters). Only descriptors the caller
 *   may read are seen: to another user (not root) such a process still looks foreign.
 * - A holder's record: of a HELD device, the record of the lease (lease_record_pick, the one
 *   whose pid or job_pid took the lock per /proc/locks); of a SHARED device, each live record
 *   whose pid or job_pid took one of its read locks (any live one when /proc/locks names no
 *   pid). Anyone can write a record into their own owners/<uid>/ naming their own live process
 *   and a device someone else holds: being alive and owned is not enough, or that record would
 *   make its writer's process on another's GPU look like the lease's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
	bool any = false;

	/* no counting record concerns the device: nothing to match, no parent walk (a read of
	 * /proc/PID/stat per level, up to init) */
	for (size_t i = 0; i < n && !any; i++)
		any = held_rec[i] && record_concerns(snap, v[i].uuid, g, mig);
	if (!any)
		return false;
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

/* Whether pid or one of its ancestors holds the lock of a device that concerns device (g, mig)
 * (as record_concerns: itself, its whole GPU, or for a whole GPU its MIG devices). Whoever
 * holds the flock holds the lease: no probe of the device is needed. */
static bool holds_lock(const struct gpuctl_lease_dir *dir, const struct gpuctl_snapshot *snap,
                       size_t g, int mig, pid_t pid)
{
	struct lease_lock_id ids[1 + 64];
	size_t n = 0;
	pid_t p = pid;

	for (int m = -1; m < (int)snap->gpus[g].n_migs && n < ELEMENTSOF(ids); m++) {
		if (m >= 0 && mig >= 0 && m != mig)
			continue;
		n += lease_lock_id(dir, lease_dev_uuid(snap, g, m), &ids[n]);
	}
	for (int depth = 0; n > 0 && p > 1 && depth < ANCESTOR_MAX; depth++) {
		pid_t pp = 0;

		if (lease_proc_holds(p, ids, n, NULL, NULL) > 0)
			return true;
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

/* Every process of a snapshot classified, and each device's foreign use. */
struct gpuctl_foreign {
	size_t n_gpus;
	size_t n_procs;          /* entries in foreign[] */
	size_t n_dev;            /* entries in use[] and busy[] */
	size_t *proc_base;       /* per GPU: the index of its first process in foreign[] */
	bool *foreign;           /* per process, GPU by GPU */
	uint32_t *pids;          /* per process, GPU by GPU: what was classified */
	size_t *dev_base;        /* per GPU: its whole-GPU entry in use[]; MIG m at +1+m */
	struct foreign_use *use; /* per device */
	bool *busy;              /* per device: busy by the thresholds */
};

void gpuctl_foreign_free(struct gpuctl_foreign *f)
{
	if (!f)
		return;
	free(f->proc_base);
	free(f->foreign);
	free(f->pids);
	free(f->dev_base);
	free(f->use);
	free(f->busy);
	free(f);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct gpuctl_foreign *, gpuctl_foreign_free)

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

/* A classification of snap's processes with nothing foreign yet and its bases set, or NULL
 * (out of memory). */
static struct gpuctl_foreign *foreign_new(const struct gpuctl_snapshot *snap)
{
	_cleanup_(gpuctl_foreign_freep) struct gpuctl_foreign *f = calloc(1, sizeof(*f));
	size_t n_dev = 0, n_procs = 0;

	if (!f)
		return NULL;
	f->n_gpus = snap->n_gpus;
	f->proc_base = calloc(snap->n_gpus ? snap->n_gpus : 1, sizeof(*f->proc_base));
	f->dev_base = calloc(snap->n_gpus ? snap->n_gpus : 1, sizeof(*f->dev_base));
	if (!f->proc_base || !f->dev_base)
		return NULL;
	for (size_t g = 0; g < snap->n_gpus; g++) {
		f->proc_base[g] = n_procs;
		f->dev_base[g] = n_dev;
		n_dev += 1 + snap->gpus[g].n_migs;
		n_procs += snap->gpus[g].n_procs;
	}
	f->n_dev = n_dev;
	f->n_procs = n_procs;
	f->foreign = calloc(n_procs ? n_procs : 1, sizeof(*f->foreign));
	f->pids = calloc(n_procs ? n_procs : 1, sizeof(*f->pids));
	f->use = calloc(n_dev ? n_dev : 1, sizeof(*f->use));
	f->busy = calloc(n_dev ? n_dev : 1, sizeof(*f->busy));
	if (!f->foreign || !f->pids || !f->use || !f->busy)
		return NULL;
	for (size_t g = 0, k = 0; g < snap->n_gpus; g++)
		for (size_t i = 0; i < snap->gpus[g].n_procs; i++)
			f->pids[k++] = snap->gpus[g].procs[i].pid;
	return TAKE_PTR(f);
}

/* Each device's foreign use (f->foreign[] with snap's memory) and whether lr's thresholds make
 * it busy (snap's utilisation). */
static void judge(struct gpuctl_foreign *f, const struct gpuctl_snapshot *snap,
                  const struct gpuctl_lease_request *lr)
{
	memset(f->use, 0, f->n_dev * sizeof(*f->use));
	for (size_t g = 0, proc = 0; g < snap->n_gpus; g++) {
		const struct gpuctl_gpu *gp = &snap->gpus[g];
		size_t dev = f->dev_base[g];
		int64_t util = -1;

		for (size_t i = 0; i < gp->n_procs; i++, proc++) {
			const struct gpuctl_proc *pr = &gp->procs[i];
			struct foreign_use *u =
			        &f->use[dev + 1 + (size_t)gpuctl_proc_mig_device(gp, pr)];

			if (!f->foreign[proc])
				continue;
			u->n++;
			if (!pr->has_memory || pr->used_memory < 0 ||
			    u->mem > UINT64_MAX - (uint64_t)pr->used_memory)
				u->mem = UINT64_MAX;
			else
				u->mem += (uint64_t)pr->used_memory;
		}
		(void)gpuctl_gpu_int(gp, GPUCTL_F_UTIL_GPU, &util);
		/* a MIG device's utilisation is not known: memory decides */
		for (int m = -1; m < (int)gp->n_migs; m++)
			f->busy[dev + 1 + (size_t)m] = foreign_busy(&f->use[dev + 1 + (size_t)m],
			                                            m < 0 ? (int)util : -1, lr);
	}
}

/* Whether v[i] is a holder's record of its device (the decisions above). */
static bool holders_record(const struct gpuctl_lease_dir *dir, const struct lease_locks_view *view,
                           const struct record *v, size_t n, size_t i)
{
	char reason[REASON_MAX];
	struct stat st;
	int state = lease_probe_view(dir, view, v[i].uuid, &st, NULL, reason, sizeof(reason));

	if (!lease_held(state) || !(v[i].pid_alive || v[i].job_alive))
		return false;
	if (state == GPUCTL_LEASE_HELD)
		return !v[i].shared && lease_record_pick(v, n, v[i].uuid, &st) == (ssize_t)i;
	return v[i].shared && lease_share_holder(&v[i], &st);
}

/* Classifies every process of snap against the records and lock holders of dir (NULL: none,
 * every process is foreign) and judges each device by lr's thresholds. */
static int foreign_scan(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                        const struct gpuctl_snapshot *snap, const struct gpuctl_lease_request *lr,
                        struct gpuctl_foreign **ret)
{
	_cleanup_(gpuctl_foreign_freep) struct gpuctl_foreign *f = NULL;
	struct record *recs = NULL;
	_cleanup_free_ bool *held_rec = NULL;
	size_t n_recs = 0;
	int r;

	f = foreign_new(snap);
	if (!f)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	if (dir) {
		r = lease_records_load(ctx, dir, (uid_t)-1, NULL, &recs, &n_recs);
		if (r < 0)
			return r;
		held_rec = calloc(n_recs ? n_recs : 1, sizeof(*held_rec));
		if (!held_rec) {
			lease_records_free(recs, n_recs);
			return ctx_error(ctx, -ENOMEM, "out of memory");
		}
		_cleanup_(lease_locks_view_done) struct lease_locks_view view = {0};

		lease_locks_view_read(dir, &view); /* the caller holds select.lock */
		for (size_t i = 0; i < n_recs; i++)
			held_rec[i] = holders_record(dir, &view, recs, n_recs, i);
	}
	for (size_t g = 0, proc = 0; g < snap->n_gpus; g++) {
		const struct gpuctl_gpu *gp = &snap->gpus[g];

		for (size_t i = 0; i < gp->n_procs; i++, proc++) {
			const struct gpuctl_proc *pr = &gp->procs[i];
			int mig = gpuctl_proc_mig_device(gp, pr);

			f->foreign[proc] = !dir || !belongs(snap, recs, n_recs, held_rec, g, mig,
			                                    (pid_t)pr->pid);
			/* not a record's: a holder of the lock all the same? */
			if (f->foreign[proc] && dir)
				f->foreign[proc] = !holds_lock(dir, snap, g, mig, (pid_t)pr->pid);
		}
	}
	judge(f, snap, lr);
	lease_records_free(recs, n_recs);
	*ret = TAKE_PTR(f);
	return 0;
}

int lease_foreign(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                  const struct gpuctl_snapshot *snap, const struct gpuctl_lease_request *lr,
                  struct gpuctl_devset **ret_set)
{
	_cleanup_(gpuctl_foreign_freep) struct gpuctl_foreign *f = NULL;
	struct gpuctl_devset *set = NULL;
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
	r = foreign_scan(ctx, dir, snap, lr, &f);
	for (size_t g = 0; r >= 0 && g < snap->n_gpus; g++)
		for (int m = -1; r >= 0 && m < (int)snap->gpus[g].n_migs; m++)
			if (f->busy[f->dev_base[g] + 1 + (size_t)m]) {
				r = gpuctl_devset_add(set, g, m);
				if (r < 0)
					r = ctx_error(ctx, r, "out of memory");
			}
	if (r < 0) {
		gpuctl_devset_free(set);
		return r;
	}
	*ret_set = set;
	return 0;
}

int gpuctl_lease_foreign(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                         const struct gpuctl_snapshot *snap,
                         const struct gpuctl_lease_request *lreq, struct gpuctl_devset **ret_set)
{
	struct gpuctl_lease_request lr;
	_cleanup_close_ int sfd = -1;
	int r;

	if (!snap || !ret_set)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	lease_request_copy(&lr, lreq);
	if (dir && (r = lease_select_lock_shared(ctx, dir, &sfd)) < 0)
		return r;
	return lease_foreign(ctx, dir, snap, &lr, ret_set);
}

int gpuctl_foreign_scan(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                        const struct gpuctl_snapshot *snap, const struct gpuctl_lease_request *lreq,
                        struct gpuctl_foreign **ret)
{
	struct gpuctl_lease_request lr;
	_cleanup_close_ int sfd = -1;
	int r;

	if (!snap || !ret)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	if (!(snap->flags & GPUCTL_SNAP_PROCESSES))
		return ctx_error(ctx, -EINVAL, "the snapshot was taken without its processes");
	lease_request_copy(&lr, lreq);
	if (dir && (r = lease_select_lock_shared(ctx, dir, &sfd)) < 0)
		return r;
	return foreign_scan(ctx, dir, snap, &lr, ret);
}

int gpuctl_foreign_rejudge(struct gpuctl_ctx *ctx, const struct gpuctl_foreign *prev,
                           const struct gpuctl_snapshot *snap,
                           const struct gpuctl_lease_request *lreq, struct gpuctl_foreign **ret)
{
	_cleanup_(gpuctl_foreign_freep) struct gpuctl_foreign *f = NULL;
	struct gpuctl_lease_request lr;

	if (!prev || !snap || !ret)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	if (!(snap->flags & GPUCTL_SNAP_PROCESSES))
		return ctx_error(ctx, -EINVAL, "the snapshot was taken without its processes");
	f = foreign_new(snap);
	if (!f)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	/* the same devices and the same processes on each, in the same order */
	if (f->n_gpus != prev->n_gpus || f->n_dev != prev->n_dev || f->n_procs != prev->n_procs ||
	    memcmp(f->proc_base, prev->proc_base, f->n_gpus * sizeof(*f->proc_base)) != 0 ||
	    memcmp(f->dev_base, prev->dev_base, f->n_gpus * sizeof(*f->dev_base)) != 0 ||
	    memcmp(f->pids, prev->pids, f->n_procs * sizeof(*f->pids)) != 0)
		return -ESTALE;
	memcpy(f->foreign, prev->foreign, f->n_procs * sizeof(*f->foreign));
	lease_request_copy(&lr, lreq);
	judge(f, snap, &lr);
	*ret = TAKE_PTR(f);
	return 0;
}

bool gpuctl_foreign_proc(const struct gpuctl_foreign *f, size_t gpu, size_t k)
{
	size_t end;

	if (!f || gpu >= f->n_gpus)
		return false;
	end = gpu + 1 < f->n_gpus ? f->proc_base[gpu + 1] : f->n_procs;
	return f->proc_base[gpu] + k < end && f->foreign[f->proc_base[gpu] + k];
}

/* The use[] entry of device (gpu, mig), or SIZE_MAX when there is none. */
static size_t dev_entry(const struct gpuctl_foreign *f, size_t gpu, int mig)
{
	size_t next;

	if (!f || gpu >= f->n_gpus || mig < -1)
		return SIZE_MAX;
	next = gpu + 1 < f->n_gpus ? f->dev_base[gpu + 1] : f->n_dev;
	if (f->dev_base[gpu] + 1 + (size_t)mig >= next)
		return SIZE_MAX;
	return f->dev_base[gpu] + 1 + (size_t)mig;
}

bool gpuctl_foreign_device(const struct gpuctl_foreign *f, size_t gpu, int mig)
{
	size_t e = dev_entry(f, gpu, mig);

	return e != SIZE_MAX && f->use[e].n > 0;
}

bool gpuctl_foreign_busy(const struct gpuctl_foreign *f, size_t gpu, int mig)
{
	size_t e = dev_entry(f, gpu, mig);

	return e != SIZE_MAX && f->busy[e];
}
