// SPDX-License-Identifier: MIT
/*
 * select.c: the selection engine (gpuctl_select): reads the request, lists the devices under
 * consideration, filters them (select-filter.c), then searches the sets of the candidates left
 * for the best by a lexicographic objective (select-score.c); and the
 * selection handle. Pure: a function of the snapshot and the request, no NVML.
 * Model, constants and sources: docs/selection.md. Tests: tests/unit/test-select.c (against a
 * brute-force oracle), bench/select-bench.c.
 *
 * Decisions:
 * - A request of any struct_size is read through select_request_copy (also lease-select.c's
 *   and lease-queue.c's way in): the fields a caller's older header lacks take their defaults.
 * - Search: every set when there are at most SELECT_EXACT_ALWAYS (16) candidates, or when
 *   C(m, n) <= SELECT_EXACT_LIMIT and C(m, n) x m^2 <= SELECT_EXACT_WORK (select_is_exact);
 *   above that the heuristic (documented gap in docs/selection.md).
 * - Health WARN devices are chosen only when needed: gpuctl_select first runs with them as a
 *   filter, and again without it when that finds too few.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"
#include "mig-profile.h"
#include "select-internal.h"
#include "select.h"
#include "snapshot-internal.h"
#include "util.h"

struct gpuctl_selection {
	struct gpuctl_devset *best;              /* the chosen devices, owned */
	struct gpuctl_devset *runner_up;         /* the best other set, owned; NULL if none */
	struct gpuctl_select_score best_score;   /* score of best */
	struct gpuctl_select_score runner_score; /* score of runner_up, if any */
};

/* Whether a caller's request (of its header's struct_size) holds the pointer field. */
#define REQ_HAS(req, field)                                                                        \
	(STRUCT_SIZE_MIN(struct gpuctl_select_request, field) <= (req)->struct_size)

int select_request_copy(const struct gpuctl_select_request *req, struct gpuctl_select_request *ret)
{
	struct gpuctl_select_request c = GPUCTL_SELECT_REQUEST_INIT;

	if (!req || req->struct_size < STRUCT_SIZE_MIN(struct gpuctl_select_request, count))
		return -EINVAL;
	memcpy(&c, req, req->struct_size < sizeof(c) ? req->struct_size : sizeof(c));
	c.struct_size = sizeof(c);
	/* leased and foreign came later: a caller built against an older header does not know
	 * them (memcpy may have copied part of a pointer) */
	if (!REQ_HAS(req, leased))
		c.leased = NULL;
	if (!REQ_HAS(req, foreign))
		c.foreign = NULL;
	if (!REQ_HAS(req, pool_name)) {
		c.pool = NULL;
		c.pool_name = NULL;
	}
	if (!REQ_HAS(req, warned)) {
		c.unhealthy = NULL;
		c.warned = NULL;
	}
	if (!REQ_HAS(req, share_mem)) {
		c.within_name = NULL;
		c.share_mem = 0;
	}
	*ret = c;
	return 0;
}

static double load_of(const struct gpuctl_gpu *g, int mig)
{
	double load = 0.0;
	int64_t v, t;

	if (mig >= 0) {
		const struct gpuctl_mig *mg = &g->migs[mig];

		if (mg->valid[GPUCTL_MIG_MEMORY_USED] && mg->valid[GPUCTL_MIG_MEMORY_TOTAL] &&
		    mg->ints[GPUCTL_MIG_MEMORY_TOTAL] > 0)
			load += (double)mg->ints[GPUCTL_MIG_MEMORY_USED] /
			        (double)mg->ints[GPUCTL_MIG_MEMORY_TOTAL];
		return load;
	}
	if (select_gpu_int(g, GPUCTL_F_UTIL_GPU, &v))
		load += (double)v / 100.0;
	if (select_gpu_int(g, GPUCTL_F_MEMORY_USED, &v) &&
	    select_gpu_int(g, GPUCTL_F_MEMORY_TOTAL, &t) && t > 0)
		load += (double)v / (double)t;
	return load;
}

static void engine_done(struct engine *e)
{
	free(e->c);
	free(e->bw);
	free(e->ham);
	free(e->match);
	free(e->parents);
}

static int devset_of(const struct engine *e, const size_t *idx, struct gpuctl_devset **ret)
{
	struct gpuctl_devset *set = NULL;
	int r = gpuctl_devset_new(&set);

	if (r < 0)
		return r;
	for (size_t i = 0; idx && i < e->n; i++) {
		r = gpuctl_devset_add(set, e->c[idx[i]].gpu, e->c[idx[i]].mig);
		if (r < 0) {
			gpuctl_devset_free(set);
			return r;
		}
	}
	*ret = set;
	return 0;
}

bool select_is_exact(size_t m, size_t n, const struct select_opts *opts)
{
	double combos = 1.0; /* C(m, n), in floating point: no overflow */

	if (opts && opts->force_heuristic)
		return false;
	for (size_t i = 0; i < n && i < m; i++)
		combos = combos * (double)(m - i) / (double)(i + 1);
	if (opts && opts->exact_limit)
		return combos <= (double)opts->exact_limit + 0.5;
	if (m <= SELECT_EXACT_ALWAYS)
		return true;
	return combos <= (double)SELECT_EXACT_LIMIT + 0.5 &&
	       combos * (double)m * (double)m <= SELECT_EXACT_WORK;
}

/* A MIG profile the request names must parse. */
static int profile_check(struct gpuctl_ctx *ctx, const struct gpuctl_select_request *req)
{
	struct mig_profile mp;
	const char *why = NULL;

	if (!req->mig_profile || mig_profile_parse(req->mig_profile, &mp, &why) >= 0)
		return 0;
	return ctx_error(ctx, -EINVAL,
	                 "mig_profile '%.64s': not a MIG profile: %s (a name such as "
	                 "'1g.10gb', '1c.3g.20gb', '1g.24gb+me.all', '1g.24gb-me')",
	                 req->mig_profile, why ? why : "malformed");
}

/* The devices under consideration: every GPU, or every MIG device of the profile. ret_dev
 * holds room for them all (at least one entry). */
static int devices_of(const struct gpuctl_snapshot *snap, const char *mig_profile,
                      struct device **ret_dev, size_t *ret_n)
{
	struct device *dev;
	size_t n = 0, cap = 0;

	for (size_t g = 0; g < snap->n_gpus; g++)
		cap += mig_profile ? snap->gpus[g].n_migs : 1;
	dev = calloc(cap ? cap : 1, sizeof(*dev));
	if (!dev)
		return -ENOMEM;
	for (size_t g = 0; g < snap->n_gpus; g++) {
		if (!mig_profile) {
			dev[n++] = (struct device){.gpu = g, .mig = -1};
			continue;
		}
		for (size_t i = 0; i < snap->gpus[g].n_migs; i++) {
			const char *p = snap->gpus[g].migs[i].profile;

			if (p && mig_profile_matches(mig_profile, p))
				dev[n++] = (struct device){.gpu = g, .mig = (int)i};
		}
	}
	*ret_dev = dev;
	*ret_n = n;
	return 0;
}

/* Marks the candidates whose NUMA node is whole: every GPU the snapshot has on that node is a
 * candidate. Whole GPUs only; a MIG engine and an unknown node mark none. */
static void mark_whole_nodes(struct engine *e)
{
	for (size_t i = 0; i < e->m && !e->mig; i++) {
		size_t on_node = 0, cands = 0;
		int64_t v;

		if (e->c[i].numa < 0)
			continue;
		for (size_t g = 0; g < e->snap->n_gpus; g++)
			on_node += select_gpu_int(&e->snap->gpus[g], GPUCTL_F_NUMA_NODE, &v) &&
			           v == e->c[i].numa;
		for (size_t j = 0; j < e->m; j++)
			cands += e->c[j].numa == e->c[i].numa;
		e->c[i].whole = cands == on_node;
	}
}

/* The engine for the kept devices (kept of the n_dev): candidates, bandwidths, tables. */
static int engine_init(struct engine *e, struct keep *keep, const struct gpuctl_snapshot *snap,
                       const struct gpuctl_select_request *req, const struct device *dev,
                       size_t n_dev, size_t kept, const int *socket)
{
	e->snap = snap;
	e->mig = req->mig_profile != NULL;
	e->n = req->count;
	e->c = calloc(kept, sizeof(*e->c));
	e->bw = calloc(kept * kept, sizeof(*e->bw));
	e->ham = calloc((size_t)1 << (RING_EXACT_MAX - 1), sizeof(*e->ham));
	e->parents = calloc(kept, sizeof(*e->parents));
	keep->best.idx = calloc(e->n, sizeof(size_t));
	keep->second.idx = calloc(e->n, sizeof(size_t));
	if (!e->c || !e->bw || !e->ham || !e->parents || !keep->best.idx || !keep->second.idx)
		return -ENOMEM;
	for (size_t i = 0; i < n_dev; i++) {
		const struct gpuctl_gpu *g = &snap->gpus[dev[i].gpu];
		struct cand *c;
		int64_t v;

		if (dev[i].reason != R_KEPT)
			continue;
		c = &e->c[e->m++];
		c->gpu = dev[i].gpu;
		c->mig = dev[i].mig;
		c->numa = select_gpu_int(g, GPUCTL_F_NUMA_NODE, &v) && v >= 0 && v < INT32_MAX
		                  ? (int)v
		                  : -1;
		c->socket = socket[dev[i].gpu];
		c->load = load_of(g, dev[i].mig);
		if (e->n_parents == 0 || e->parents[e->n_parents - 1] != c->gpu)
			e->parents[e->n_parents++] = c->gpu;
	}
	mark_whole_nodes(e);
	if (!e->mig && snap->links)
		for (size_t a = 0; a < e->m; a++)
			for (size_t b = 0; b < e->m; b++)
				e->bw[a * e->m + b] =
				        a == b ? 0.0
				               : snap->links[e->c[a].gpu * snap->n_gpus +
				                             e->c[b].gpu]
				                         .bandwidth;
	return 0;
}

/* Builds the engine, searches it and writes the best set and the runner-up into sel. */
static int choose(const struct gpuctl_snapshot *snap, const struct gpuctl_select_request *req,
                  const struct select_opts *opts, const struct device *dev, size_t n_dev,
                  size_t kept, const int *socket, struct gpuctl_selection *sel)
{
	struct engine e = {0};
	struct keep keep = {0};
	int r;

	r = engine_init(&e, &keep, snap, req, dev, n_dev, kept, socket);
	if (r < 0)
		goto out;
	if (select_is_exact(e.m, e.n, opts))
		r = select_search_exact(&e, &keep);
	else
		r = select_search_heuristic(&e, &keep);
	if (r < 0)
		goto out;
	r = devset_of(&e, keep.best.idx, &sel->best);
	if (r < 0)
		goto out;
	sel->best_score = keep.best.s;
	if (keep.second.valid) {
		r = devset_of(&e, keep.second.idx, &sel->runner_up);
		if (r < 0)
			goto out;
		sel->runner_score = keep.second.s;
	}
out:
	free(keep.best.idx);
	free(keep.second.idx);
	engine_done(&e);
	return r;
}

int select_run(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
               const struct gpuctl_select_request *user_req, const struct select_opts *opts,
               struct gpuctl_selection **ret_sel)
{
	struct gpuctl_select_request req;
	_cleanup_(gpuctl_selection_freep) struct gpuctl_selection *sel = NULL;
	_cleanup_free_ bool *only = NULL, *excluded = NULL;
	_cleanup_free_ struct device *dev = NULL;
	_cleanup_free_ int *socket = NULL;
	size_t n_dev = 0, kept;
	int r;

	if (!snap || !ret_sel || select_request_copy(user_req, &req) < 0)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	r = profile_check(ctx, &req);
	if (r < 0)
		return r;
	r = select_resolve_ids(ctx, snap, req.only, "only", &only);
	if (r < 0)
		return r;
	r = select_resolve_ids(ctx, snap, req.exclude, "exclude", &excluded);
	if (r < 0)
		return r;

	sel = calloc(1, sizeof(*sel));
	if (!sel)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	r = devices_of(snap, req.mig_profile, &dev, &n_dev);
	socket = calloc(snap->n_gpus ? snap->n_gpus : 1, sizeof(*socket));
	if (r < 0 || !socket)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	if (req.mig_profile && n_dev == 0 && req.count > 0) {
		char have[256];
		size_t len = 0;

		have[0] = '\0';
		select_mig_profiles(snap, have, sizeof(have), &len);
		return ctx_error(ctx, -ENOSPC,
		                 "mig_profile '%.64s': no MIG device of that profile on "
		                 "this machine (its MIG profiles: %s)",
		                 req.mig_profile, have);
	}
	kept = select_filter(snap, &req, only, excluded, opts && opts->avoid_warned, dev, n_dev);
	if (kept < req.count)
		return select_no_space(ctx, snap, &req, dev, n_dev, kept);

	if (req.count == 0) {
		struct engine none = {0};

		r = devset_of(&none, NULL, &sel->best);
		if (r < 0)
			return ctx_error(ctx, r, "out of memory");
		*ret_sel = TAKE_PTR(sel);
		return 0;
	}

	r = select_sockets_of(snap, socket);
	if (r < 0)
		return ctx_error(ctx, r, "out of memory");
	r = choose(snap, &req, opts, dev, n_dev, kept, socket, sel);
	if (r < 0)
		return ctx_error(ctx, r, "selection: %s", strerror(-r));
	*ret_sel = TAKE_PTR(sel);
	return 0;
}

int gpuctl_select(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                  const struct gpuctl_select_request *req, struct gpuctl_selection **ret_sel)
{
	struct gpuctl_select_request c;

	/* WARN devices only when needed: first without them, then (if that found too few) with */
	if (select_request_copy(req, &c) == 0 && c.warned && gpuctl_devset_count(c.warned) > 0) {
		struct select_opts o = {.avoid_warned = true};
		int r = select_run(ctx, snap, req, &o, ret_sel);

		if (r != -ENOSPC)
			return r;
	}
	return select_run(ctx, snap, req, NULL, ret_sel);
}

void gpuctl_selection_free(struct gpuctl_selection *sel)
{
	if (!sel)
		return;
	gpuctl_devset_free(sel->best);
	gpuctl_devset_free(sel->runner_up);
	free(sel);
}

const struct gpuctl_devset *gpuctl_selection_devices(const struct gpuctl_selection *sel)
{
	return sel ? sel->best : NULL;
}

const struct gpuctl_devset *gpuctl_selection_runner_up(const struct gpuctl_selection *sel)
{
	return sel ? sel->runner_up : NULL;
}

int gpuctl_selection_score(const struct gpuctl_selection *sel, bool runner_up,
                           struct gpuctl_select_score *ret_score)
{
	if (!sel || !ret_score ||
	    ret_score->struct_size < STRUCT_SIZE_MIN(struct gpuctl_select_score, ring_bandwidth))
		return -EINVAL;
	if (runner_up && !sel->runner_up)
		return -ENODATA;
	struct_fill(ret_score, runner_up ? &sel->runner_score : &sel->best_score,
	            sizeof(*ret_score));
	return 0;
}
