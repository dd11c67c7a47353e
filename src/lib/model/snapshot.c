// SPDX-License-Identifier: MIT
/*
 * snapshot.c: the snapshot model: construction, setters, accessors, free.
 *
 * Decisions:
 * - No I/O and no calls up: the NVML loader (nvml/) fills a snapshot through the setters here,
 *   and taking one (asking the loader) is snapshot-take.c's job, so the model sits below the
 *   loader. All accessors are pure reads of the struct and accept NULL where a pointer is read.
 * - A field of a lost GPU, a field not requested by the snapshot flags, and a field NVML could
 *   not give all read the same: -ENODATA / NULL.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpuinfo.h"
#include "snapshot-internal.h"
#include "util.h"

struct gpuctl_snapshot *snapshot_new_empty(size_t n_gpus, unsigned flags)
{
	struct gpuctl_snapshot *snap = calloc(1, sizeof(*snap));

	if (!snap)
		return NULL;
	snap->flags = flags;
	snap->n_gpus = n_gpus;
	if (n_gpus > 0) {
		snap->gpus = calloc(n_gpus, sizeof(*snap->gpus));
		if (!snap->gpus)
			goto fail;
	}
	for (size_t i = 0; i < n_gpus; i++) {
		snap->gpus[i].index = i;
		snap->gpus[i].ints[GPUCTL_F_INDEX] = (int64_t)i;
		snap->gpus[i].valid[GPUCTL_F_INDEX] = true;
	}
	snap->cpu.struct_size = sizeof(snap->cpu);
	cpu_info_unknown(&snap->cpu);
	if ((flags & GPUCTL_SNAP_TOPOLOGY) && n_gpus > 0) {
		if (n_gpus > SIZE_MAX / sizeof(struct gpuctl_link) / n_gpus)
			goto fail;
		snap->links = calloc(n_gpus * n_gpus, sizeof(*snap->links));
		if (!snap->links)
			goto fail;
		for (size_t i = 0; i < n_gpus * n_gpus; i++)
			snap->links[i] = (struct gpuctl_link){
			        .level = GPUCTL_TOPO_UNKNOWN,
			        .p2p = GPUCTL_P2P_UNKNOWN,
			};
	}
	return snap;
fail:
	gpuctl_snapshot_free(snap);
	return NULL;
}

void gpuctl_snapshot_free(struct gpuctl_snapshot *snap)
{
	if (!snap)
		return;
	for (size_t i = 0; i < snap->n_gpus; i++) {
		struct gpuctl_gpu *g = &snap->gpus[i];

		for (size_t f = 0; f < GPUCTL__F_COUNT; f++) {
			free(g->strs[f]);
			free(g->unreadable_why[f]);
		}
		for (size_t m = 0; m < g->n_migs; m++) {
			free(g->migs[m].uuid);
			free(g->migs[m].profile);
		}
		free(g->migs);
		free(g->nvlink_unreadable);
		for (size_t p = 0; p < g->n_procs; p++) {
			free(g->procs[p].user);
			free(g->procs[p].command);
		}
		free(g->procs);
	}
	free(snap->gpus);
	free(snap->links);
	free(snap->driver_version);
	free(snap->nvml_version);
	free(snap);
}

static struct gpuctl_gpu *gpu_at(struct gpuctl_snapshot *snap, size_t gpu)
{
	if (!snap || gpu >= snap->n_gpus)
		return NULL;
	return &snap->gpus[gpu];
}

static void clear_unreadable(struct gpuctl_gpu *g, enum gpuctl_field f)
{
	g->unreadable &= ~(UINT64_C(1) << f);
	free(g->unreadable_why[f]);
	g->unreadable_why[f] = NULL;
}

int snapshot_set_int(struct gpuctl_snapshot *snap, size_t gpu, enum gpuctl_field f, int64_t v)
{
	struct gpuctl_gpu *g = gpu_at(snap, gpu);
	const struct gpuctl_field_info *fi = gpuctl_field_info(f);

	if (!g || !fi || fi->type != GPUCTL_FT_INT)
		return -EINVAL;
	g->ints[f] = v;
	g->valid[f] = true;
	clear_unreadable(g, f);
	return 0;
}

int snapshot_set_str(struct gpuctl_snapshot *snap, size_t gpu, enum gpuctl_field f, const char *s)
{
	struct gpuctl_gpu *g = gpu_at(snap, gpu);
	const struct gpuctl_field_info *fi = gpuctl_field_info(f);
	char *copy;

	if (!g || !fi || fi->type != GPUCTL_FT_STR || !s)
		return -EINVAL;
	copy = strdup(s);
	if (!copy)
		return -ENOMEM;
	free(g->strs[f]);
	g->strs[f] = copy;
	g->valid[f] = true;
	clear_unreadable(g, f);
	return 0;
}

int snapshot_set_unreadable(struct gpuctl_snapshot *snap, size_t gpu, uint64_t mask,
                            const char *why)
{
	struct gpuctl_gpu *g = gpu_at(snap, gpu);

	if (!g || !why)
		return -EINVAL;
	for (size_t f = 0; f < GPUCTL__F_COUNT; f++) {
		if (!(mask >> f & 1u) || g->unreadable_why[f])
			continue;
		g->unreadable_why[f] = strdup(why);
		if (!g->unreadable_why[f])
			return -ENOMEM;
		g->unreadable |= UINT64_C(1) << f;
	}
	return 0;
}

int snapshot_set_nvlink_unreadable(struct gpuctl_snapshot *snap, size_t gpu, const char *why)
{
	struct gpuctl_gpu *g = gpu_at(snap, gpu);

	if (!g || !why)
		return -EINVAL;
	if (!g->nvlink_unreadable && !(g->nvlink_unreadable = strdup(why)))
		return -ENOMEM;
	return 0;
}

void snapshot_set_lost(struct gpuctl_snapshot *snap, size_t gpu)
{
	struct gpuctl_gpu *g = gpu_at(snap, gpu);

	if (g)
		g->lost = true;
}

int snapshot_set_system(struct gpuctl_snapshot *snap, const char *driver_version,
                        const char *nvml_version)
{
	_cleanup_free_ char *d = NULL;
	_cleanup_free_ char *n = NULL;

	if (!snap)
		return -EINVAL;
	d = strdup_or_null(driver_version);
	n = strdup_or_null(nvml_version);
	if ((driver_version && !d) || (nvml_version && !n))
		return -ENOMEM;
	free(snap->driver_version);
	free(snap->nvml_version);
	snap->driver_version = TAKE_PTR(d);
	snap->nvml_version = TAKE_PTR(n);
	return 0;
}

void snapshot_set_cuda_version(struct gpuctl_snapshot *snap, int version)
{
	if (!snap)
		return;
	snap->cuda_version = version;
	snap->has_cuda_version = true;
}

struct gpuctl_mig *snapshot_add_mig(struct gpuctl_snapshot *snap, size_t gpu)
{
	struct gpuctl_gpu *g = gpu_at(snap, gpu);
	struct gpuctl_mig *n;

	if (!g)
		return NULL;
	n = realloc(g->migs, (g->n_migs + 1) * sizeof(*n));
	if (!n)
		return NULL;
	g->migs = n;
	memset(&n[g->n_migs], 0, sizeof(*n));
	return &n[g->n_migs++];
}

int mig_set_strs(struct gpuctl_mig *mig, const char *uuid, const char *profile)
{
	_cleanup_free_ char *u = strdup_or_null(uuid);
	_cleanup_free_ char *p = strdup_or_null(profile);

	if ((uuid && !u) || (profile && !p))
		return -ENOMEM;
	free(mig->uuid);
	free(mig->profile);
	mig->uuid = TAKE_PTR(u);
	mig->profile = TAKE_PTR(p);
	return 0;
}

void mig_set_int(struct gpuctl_mig *mig, enum gpuctl_mig_field f, int64_t v)
{
	if ((unsigned)f >= MIG_FIELD_COUNT)
		return;
	mig->ints[f] = v;
	mig->valid[f] = true;
}

struct gpuctl_proc *snapshot_add_proc(struct gpuctl_snapshot *snap, size_t gpu, uint32_t pid)
{
	struct gpuctl_gpu *g = gpu_at(snap, gpu);
	struct gpuctl_proc *n;

	if (!g)
		return NULL;
	n = realloc(g->procs, (g->n_procs + 1) * sizeof(*n));
	if (!n)
		return NULL;
	g->procs = n;
	memset(&n[g->n_procs], 0, sizeof(*n));
	n[g->n_procs].pid = pid;
	return &n[g->n_procs++];
}

int proc_set_strs(struct gpuctl_proc *proc, const char *user, const char *command)
{
	_cleanup_free_ char *u = strdup_or_null(user);
	_cleanup_free_ char *c = strdup_or_null(command);

	if ((user && !u) || (command && !c))
		return -ENOMEM;
	free(proc->user);
	free(proc->command);
	proc->user = TAKE_PTR(u);
	proc->command = TAKE_PTR(c);
	return 0;
}

struct gpuctl_link *snapshot_link_at(struct gpuctl_snapshot *snap, size_t a, size_t b)
{
	if (!snap || !snap->links || a >= snap->n_gpus || b >= snap->n_gpus)
		return NULL;
	return &snap->links[a * snap->n_gpus + b];
}

int snapshot_set_link(struct gpuctl_snapshot *snap, size_t a, size_t b,
                      const struct gpuctl_link *link)
{
	struct gpuctl_link *ab = snapshot_link_at(snap, a, b);
	struct gpuctl_link *ba = snapshot_link_at(snap, b, a);

	if (!ab || !ba || !link || a == b)
		return -EINVAL;
	*ab = *link;
	*ba = *link;
	return 0;
}

struct gpuctl_snapshot *snapshot_copy_for_refresh(const struct gpuctl_snapshot *prev,
                                                  unsigned flags, uint64_t drop)
{
	struct gpuctl_snapshot *snap = snapshot_new_empty(prev->n_gpus, flags);

	if (!snap)
		return NULL;
	if (snapshot_set_system(snap, prev->driver_version, prev->nvml_version) < 0)
		goto fail;
	snap->cuda_version = prev->cuda_version;
	snap->has_cuda_version = prev->has_cuda_version;
	for (size_t i = 0; i < prev->n_gpus; i++) {
		const struct gpuctl_gpu *from = &prev->gpus[i];
		struct gpuctl_gpu *to = &snap->gpus[i];

		to->lost = from->lost;
		to->nvswitch_links = from->nvswitch_links;
		to->has_nvlink_state = from->has_nvlink_state;
		to->nvlink_present = from->nvlink_present;
		to->nvlink_active = from->nvlink_active;
		to->nvlink_inactive = from->nvlink_inactive;
		if (from->nvlink_unreadable &&
		    snapshot_set_nvlink_unreadable(snap, i, from->nvlink_unreadable) < 0)
			goto fail;
		for (size_t f = 0; f < GPUCTL__F_COUNT; f++) {
			if (drop >> f & 1u)
				continue;
			/* a field this refresh does not read again keeps what made it unreadable */
			if (from->unreadable_why[f] &&
			    snapshot_set_unreadable(snap, i, UINT64_C(1) << f,
			                            from->unreadable_why[f]) < 0)
				goto fail;
			if (!from->valid[f])
				continue;
			if (from->strs[f] && !(to->strs[f] = strdup(from->strs[f])))
				goto fail;
			to->ints[f] = from->ints[f];
			to->valid[f] = true;
		}
		memcpy(to->violation_ref_us, from->violation_ref_us, sizeof(to->violation_ref_us));
	}
	return snap;
fail:
	gpuctl_snapshot_free(snap);
	return NULL;
}

/* ---- public API ---- */

const char *gpuctl_snapshot_driver_version(const struct gpuctl_snapshot *snap)
{
	return snap ? snap->driver_version : NULL;
}

const char *gpuctl_snapshot_nvml_version(const struct gpuctl_snapshot *snap)
{
	return snap ? snap->nvml_version : NULL;
}

int gpuctl_snapshot_cuda_version(const struct gpuctl_snapshot *snap, int *ret_version)
{
	if (!snap || !ret_version)
		return -EINVAL;
	if (!snap->has_cuda_version)
		return -ENODATA;
	*ret_version = snap->cuda_version;
	return 0;
}

unsigned gpuctl_snapshot_flags(const struct gpuctl_snapshot *snap)
{
	return snap ? snap->flags : 0;
}

size_t gpuctl_snapshot_gpu_count(const struct gpuctl_snapshot *snap)
{
	return snap ? snap->n_gpus : 0;
}

const struct gpuctl_gpu *gpuctl_snapshot_gpu(const struct gpuctl_snapshot *snap, size_t i)
{
	if (!snap || i >= snap->n_gpus)
		return NULL;
	return &snap->gpus[i];
}

int gpuctl_gpu_int(const struct gpuctl_gpu *gpu, enum gpuctl_field f, int64_t *ret_value)
{
	const struct gpuctl_field_info *fi = gpuctl_field_info(f);

	if (!gpu || !fi || !ret_value || fi->type != GPUCTL_FT_INT)
		return -EINVAL;
	if (!gpu->valid[f])
		return -ENODATA;
	*ret_value = gpu->ints[f];
	return 0;
}

const char *gpuctl_gpu_str(const struct gpuctl_gpu *gpu, enum gpuctl_field f)
{
	const struct gpuctl_field_info *fi = gpuctl_field_info(f);

	if (!gpu || !fi || fi->type != GPUCTL_FT_STR || !gpu->valid[f])
		return NULL;
	return gpu->strs[f];
}

bool gpuctl_gpu_lost(const struct gpuctl_gpu *gpu)
{
	return gpu && gpu->lost;
}

size_t gpuctl_gpu_index(const struct gpuctl_gpu *gpu)
{
	return gpu ? gpu->index : 0;
}

int gpuctl_gpu_violation_percent(const struct gpuctl_gpu *before, const struct gpuctl_gpu *after,
                                 enum gpuctl_field f, double *ret_percent)
{
	size_t k;
	double pct;

	if (!before || !after || !ret_percent)
		return -EINVAL;
	if (f == GPUCTL_F_VIOLATION_POWER)
		k = 0;
	else if (f == GPUCTL_F_VIOLATION_THERMAL)
		k = 1;
	else
		return -EINVAL;
	if (!before->valid[f] || !after->valid[f] ||
	    after->violation_ref_us[k] <= before->violation_ref_us[k] ||
	    after->ints[f] < before->ints[f]) /* a counter that went back: the driver reloaded */
		return -ENODATA;
	pct = (double)(after->ints[f] - before->ints[f]) * 100.0 /
	      ((double)(after->violation_ref_us[k] - before->violation_ref_us[k]) * 1000.0);
	*ret_percent = pct > 100.0 ? 100.0 : pct;
	return 0;
}

size_t gpuctl_gpu_mig_count(const struct gpuctl_gpu *gpu)
{
	return gpu ? gpu->n_migs : 0;
}

const struct gpuctl_mig *gpuctl_gpu_mig(const struct gpuctl_gpu *gpu, size_t i)
{
	if (!gpu || i >= gpu->n_migs)
		return NULL;
	return &gpu->migs[i];
}

const char *gpuctl_mig_uuid(const struct gpuctl_mig *mig)
{
	return mig ? mig->uuid : NULL;
}

const char *gpuctl_mig_profile(const struct gpuctl_mig *mig)
{
	return mig ? mig->profile : NULL;
}

int gpuctl_mig_int(const struct gpuctl_mig *mig, enum gpuctl_mig_field f, int64_t *ret_value)
{
	if (!mig || !ret_value || (unsigned)f >= MIG_FIELD_COUNT)
		return -EINVAL;
	if (!mig->valid[f])
		return -ENODATA;
	*ret_value = mig->ints[f];
	return 0;
}

size_t gpuctl_gpu_proc_count(const struct gpuctl_gpu *gpu)
{
	return gpu ? gpu->n_procs : 0;
}

const struct gpuctl_proc *gpuctl_gpu_proc(const struct gpuctl_gpu *gpu, size_t i)
{
	if (!gpu || i >= gpu->n_procs)
		return NULL;
	return &gpu->procs[i];
}

uint32_t gpuctl_proc_pid(const struct gpuctl_proc *proc)
{
	return proc ? proc->pid : 0;
}

int gpuctl_proc_used_memory(const struct gpuctl_proc *proc, int64_t *ret_bytes)
{
	if (!proc || !ret_bytes)
		return -EINVAL;
	if (!proc->has_memory)
		return -ENODATA;
	*ret_bytes = proc->used_memory;
	return 0;
}

int gpuctl_proc_uid(const struct gpuctl_proc *proc, uint32_t *ret_uid)
{
	if (!proc || !ret_uid)
		return -EINVAL;
	if (!proc->has_uid)
		return -ENODATA;
	*ret_uid = proc->uid;
	return 0;
}

const char *gpuctl_proc_user(const struct gpuctl_proc *proc)
{
	return proc ? proc->user : NULL;
}

const char *gpuctl_proc_command(const struct gpuctl_proc *proc)
{
	return proc ? proc->command : NULL;
}

int gpuctl_proc_mig(const struct gpuctl_proc *proc, uint32_t *ret_gi, uint32_t *ret_ci)
{
	if (!proc || !ret_gi || !ret_ci)
		return -EINVAL;
	if (!proc->has_mig)
		return -ENODATA;
	*ret_gi = proc->gi;
	*ret_ci = proc->ci;
	return 0;
}

int gpuctl_proc_mig_device(const struct gpuctl_gpu *gpu, const struct gpuctl_proc *proc)
{
	int mig = -1;

	if (!gpu || !proc || !proc->has_mig)
		return -1;
	for (size_t m = 0; m < gpu->n_migs; m++) {
		const struct gpuctl_mig *mg = &gpu->migs[m];

		if (mg->valid[GPUCTL_MIG_GI] && mg->valid[GPUCTL_MIG_CI] &&
		    proc->gi == (uint64_t)mg->ints[GPUCTL_MIG_GI] &&
		    proc->ci == (uint64_t)mg->ints[GPUCTL_MIG_CI])
			mig = (int)m;
	}
	return mig;
}

int gpuctl_proc_util(const struct gpuctl_proc *proc, enum gpuctl_proc_engine engine,
                     int *ret_percent)
{
	if (!proc || !ret_percent || (unsigned)engine > GPUCTL_PROC_DEC)
		return -EINVAL;
	if (!proc->has_util)
		return -ENODATA;
	*ret_percent = proc->util[engine];
	return 0;
}

int gpuctl_snapshot_cpu(const struct gpuctl_snapshot *snap, struct gpuctl_cpu *ret_cpu)
{
	if (!snap || !ret_cpu || ret_cpu->struct_size < STRUCT_SIZE_MIN(struct gpuctl_cpu, vendor))
		return -EINVAL;
	if (!(snap->flags & GPUCTL_SNAP_TOPOLOGY))
		return -ENODATA;
	struct_fill(ret_cpu, &snap->cpu, sizeof(*ret_cpu));
	return 0;
}

int gpuctl_snapshot_link(const struct gpuctl_snapshot *snap, size_t a, size_t b,
                         struct gpuctl_link *ret_link)
{
	if (!snap || !ret_link || a >= snap->n_gpus || b >= snap->n_gpus || a == b ||
	    ret_link->struct_size < STRUCT_SIZE_MIN(struct gpuctl_link, level))
		return -EINVAL;
	if (!snap->links)
		return -ENODATA;
	struct_fill(ret_link, &snap->links[a * snap->n_gpus + b], sizeof(*ret_link));
	return 0;
}
