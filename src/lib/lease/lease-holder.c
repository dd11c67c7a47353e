// SPDX-License-Identifier: MIT
/*
 * lease-holder.c: which devices a process holds leases on, by the kernel's word alone: the
 * node agent's socket (enforce = cgroup, docs/agent.md "Enforcement: cgroup") confines a caller to
 * exactly these, so nothing a process says or writes (an owner record, its environment) can
 * widen the set.
 *
 * Decisions:
 * - A process holds device D's lease when a descriptor of its own has an open file description
 *   with the flock on D's lock file (lease_proc_holds: /proc/PID/fdinfo, the inode confirmed by
 *   fstat of the descriptor), and that lock file is D's now (fstatat in DIR/locks, the checks of
 *   lease-dir.c: a regular file of the directory's owner with one link). A lease taken back
 *   (its lock file replaced: lease-evict.c) or dropped is therefore not held, whatever the
 *   owner records say; a job that inherited run's descriptors holds what run leased.
 * - A shared lease counts as an exclusive one: the flock is what is held, of either kind.
 * - No lock file is opened (no wake-up for waiters, docs/leases.md "Wake-ups").
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "ctx.h"
#include "lease-internal.h"

int gpuctl_lease_held_by(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                         const struct gpuctl_snapshot *snap, uint32_t pid,
                         struct gpuctl_devset **ret_set)
{
	_cleanup_free_ struct lease_lock_id *ids = NULL;
	_cleanup_free_ size_t *gpu_of = NULL;
	_cleanup_free_ int *mig_of = NULL;
	_cleanup_free_ bool *holds = NULL;
	struct gpuctl_devset *set = NULL;
	size_t n = 0, max = 0;
	int r;

	if (!dir || !snap || !ret_set || pid == 0)
		return ctx_error(ctx, -EINVAL, "lease held by: bad arguments");
	for (size_t g = 0; g < snap->n_gpus; g++)
		max += 1 + snap->gpus[g].n_migs;
	ids = calloc(max ? max : 1, sizeof(*ids));
	gpu_of = calloc(max ? max : 1, sizeof(*gpu_of));
	mig_of = calloc(max ? max : 1, sizeof(*mig_of));
	holds = calloc(max ? max : 1, sizeof(*holds));
	if (!ids || !gpu_of || !mig_of || !holds)
		return ctx_error(ctx, -ENOMEM, "lease held by: out of memory");
	for (size_t g = 0; g < snap->n_gpus; g++)
		for (int m = -1; m < (int)snap->gpus[g].n_migs; m++)
			if (lease_lock_id(dir, lease_dev_uuid(snap, g, m), &ids[n])) {
				gpu_of[n] = g;
				mig_of[n++] = m;
			}
	r = gpuctl_devset_new(&set);
	if (r < 0)
		return ctx_error(ctx, r, "lease held by: out of memory");
	(void)lease_proc_holds((pid_t)pid, ids, n, holds, NULL);
	for (size_t i = 0; i < n; i++) {
		if (!holds[i])
			continue;
		r = gpuctl_devset_add(set, gpu_of[i], mig_of[i]);
		if (r < 0 && r != -EEXIST) {
			gpuctl_devset_free(set);
			return ctx_error(ctx, r, "lease held by: out of memory");
		}
	}
	*ret_set = set;
	return 0;
}
