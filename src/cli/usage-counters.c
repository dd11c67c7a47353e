// SPDX-License-Identifier: MIT
/*
 * usage-counters.c: the exporter's per-GPU usage counters (usage-counters.h; docs/metrics.md,
 * "Usage counters").
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hostproc.h"
#include "usage-counters.h"

/* One GPU, by UUID: its totals and what the previous sample saw of it. */
struct uc_gpu {
	char *uuid;
	struct usage_totals t;
	bool held;      /* the previous sample: held */
	bool busy;      /* and its utilisation above the threshold */
	int64_t energy; /* and its energy counter, mJ (-1: unknown) */
};

struct usage_counters {
	struct uc_gpu *g;
	size_t n, cap;
	double busy_threshold; /* %, the ledger's default */
	bool have_prev;
	double prev_mono;
};

int usage_counters_new(struct usage_counters **ret)
{
	const struct gpuctl_ledger_options lo = GPUCTL_LEDGER_OPTIONS_INIT;
	struct usage_counters *uc = calloc(1, sizeof(*uc));

	if (!uc)
		return -ENOMEM;
	uc->busy_threshold = lo.busy_threshold;
	*ret = uc;
	return 0;
}

void usage_counters_free(struct usage_counters *uc)
{
	if (!uc)
		return;
	for (size_t i = 0; i < uc->n; i++)
		free(uc->g[i].uuid);
	free(uc->g);
	free(uc);
}

static struct uc_gpu *find(const struct usage_counters *uc, const char *uuid)
{
	for (size_t i = 0; i < uc->n; i++)
		if (!strcmp(uc->g[i].uuid, uuid))
			return &uc->g[i];
	return NULL;
}

/* The entry of uuid, made when new; NULL out of memory. */
static struct uc_gpu *get(struct usage_counters *uc, const char *uuid)
{
	struct uc_gpu *e = find(uc, uuid);

	if (e)
		return e;
	if (uc->n == uc->cap) {
		size_t cap = uc->cap ? 2 * uc->cap : 16;
		struct uc_gpu *g = realloc(uc->g, cap * sizeof(*g));
		if (!g)
			return NULL;
		uc->g = g;
		uc->cap = cap;
	}
	e = &uc->g[uc->n];
	*e = (struct uc_gpu){.uuid = strdup(uuid), .energy = -1};
	if (!e->uuid)
		return NULL;
	uc->n++;
	return e;
}

/* Whether a compute process of no lease on GPU g is one the agent records: alive now, of a
 * known workload (docs/agent.md, "What it records"). */
static bool foreign_holder(struct gpuctl_ctx *ctx, struct gpuctl_workloads *wls,
                           const struct gpuctl_gpu *gpu, size_t g,
                           const struct gpuctl_foreign *foreign)
{
	for (size_t k = 0; k < gpuctl_gpu_proc_count(gpu); k++) {
		uint32_t pid = gpuctl_proc_pid(gpuctl_gpu_proc(gpu, k));
		const struct gpuctl_workload *w = NULL;
		struct hostproc_stat st;

		if (!gpuctl_foreign_proc(foreign, g, k) || pid == 0 ||
		    hostproc_read_stat((pid_t)pid, &st) < 0)
			continue;
		if (gpuctl_workloads_get(ctx, wls, pid, st.start_ticks, &w) >= 0 && w &&
		    w->kind != GPUCTL_WORKLOAD_UNKNOWN)
			return true;
	}
	return false;
}

void usage_counters_held_now(struct gpuctl_ctx *ctx, struct gpuctl_workloads *wls,
                             const struct gpuctl_snapshot *snap,
                             const struct gpuctl_lease_list *leases,
                             const struct gpuctl_foreign *foreign, bool *held)
{
	size_t ngpu = gpuctl_snapshot_gpu_count(snap);

	for (size_t i = 0; leases && i < gpuctl_lease_list_count(leases); i++) {
		const struct gpuctl_lease_owner *const *owners = NULL;
		size_t g, n_own = 0;

		if (gpuctl_lease_list_get(leases, i, &g, NULL, NULL, NULL, NULL) == 0 && g < ngpu &&
		    gpuctl_lease_list_holders(leases, i, &owners, &n_own) == 0 && n_own > 0)
			held[g] = true;
	}
	for (size_t g = 0; g < ngpu; g++) {
		const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(snap, g);
		if (gpuctl_gpu_lost(gpu))
			held[g] = false;
		else if (!held[g] && foreign && wls)
			held[g] = foreign_holder(ctx, wls, gpu, g, foreign);
	}
}

/* GPU uuid's energy counter in snap, mJ; -1 when unknown, lost or gone. */
static int64_t energy_in(const struct gpuctl_snapshot *snap, const char *uuid)
{
	for (size_t g = 0; g < gpuctl_snapshot_gpu_count(snap); g++) {
		const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(snap, g);
		const char *u = gpuctl_gpu_str(gpu, GPUCTL_F_UUID);
		int64_t v;

		if (!u || strcmp(u, uuid))
			continue;
		if (gpuctl_gpu_lost(gpu) || gpuctl_gpu_int(gpu, GPUCTL_F_ENERGY, &v) < 0)
			return -1;
		return v;
	}
	return -1;
}

int usage_counters_advance(struct usage_counters *uc, const struct gpuctl_snapshot *snap,
                           double mono)
{
	double dt = uc->have_prev ? mono - uc->prev_mono : 0;

	for (size_t g = 0; g < gpuctl_snapshot_gpu_count(snap); g++) {
		const char *uuid = gpuctl_gpu_str(gpuctl_snapshot_gpu(snap, g), GPUCTL_F_UUID);
		if (uuid && !get(uc, uuid))
			return -ENOMEM;
	}
	/* a clock that did not advance adds nothing */
	for (size_t i = 0; dt > 0 && i < uc->n; i++) {
		struct uc_gpu *e = &uc->g[i];
		int64_t now;

		if (!e->held)
			continue;
		e->t.held_s += dt;
		if (e->busy)
			e->t.busy_s += dt;
		now = energy_in(snap, e->uuid);
		if (e->energy >= 0 && now >= e->energy)
			e->t.energy_j += (double)(now - e->energy) / 1000;
	}
	uc->have_prev = true;
	uc->prev_mono = mono;
	return 0;
}

void usage_counters_hold(struct usage_counters *uc, const struct gpuctl_snapshot *snap,
                         const bool *held)
{
	for (size_t i = 0; i < uc->n; i++) {
		uc->g[i].held = uc->g[i].busy = false;
		uc->g[i].energy = -1;
	}
	for (size_t g = 0; g < gpuctl_snapshot_gpu_count(snap); g++) {
		const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(snap, g);
		const char *uuid = gpuctl_gpu_str(gpu, GPUCTL_F_UUID);
		struct uc_gpu *e = uuid ? find(uc, uuid) : NULL;
		int64_t v;

		if (!e || gpuctl_gpu_lost(gpu))
			continue;
		e->held = held[g];
		e->busy = held[g] && gpuctl_gpu_int(gpu, GPUCTL_F_UTIL_GPU, &v) >= 0 &&
		          (double)v > uc->busy_threshold;
		if (gpuctl_gpu_int(gpu, GPUCTL_F_ENERGY, &v) >= 0) {
			e->energy = v;
			e->t.energy_known = true;
		}
	}
}

const struct usage_totals *usage_counters_get(const struct usage_counters *uc, const char *uuid)
{
	const struct uc_gpu *e = uc && uuid ? find(uc, uuid) : NULL;

	return e ? &e->t : NULL;
}
