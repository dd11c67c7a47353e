/* SPDX-License-Identifier: MIT */
/*
 * select-internal.h: what the files of the selection engine share (src/lib/select/): the
 * filter reasons, the candidates and the search state, and the calls between select.c (the
 * run), select-filter.c (which devices qualify) and select-score.c (the objective and the
 * search over it: which sets are scored). Model and constants: docs/selection.md.
 */
#ifndef GPUCTL_SELECT_INTERNAL_H
#define GPUCTL_SELECT_INTERNAL_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuctl/gpuctl.h"
#include "select.h"
#include "snapshot-internal.h"

#define REL_TOL        1e-6 /* relative tolerance on bandwidth comparisons */
#define RING_EXACT_MAX 16   /* rings of larger sets: heuristic (lower bound) */

/* Why a device was removed, in the order the filters run. */
enum reason {
	R_KEPT = 0,
	R_LOST,
	R_ECC,
	R_REMAP,
	R_UNHEALTHY,
	R_MIG_MODE,
	R_WITHIN,
	R_POOL,
	R_LEASED,
	R_FOREIGN,
	R_ONLY,
	R_EXCLUDE,
	R_NUMA,
	R_MEM,
	R_SHARE_MEM,
	R_UTIL,
	R_PROCS,
	R_WARNED,
	R__COUNT
};

/* One device under the filters: whole GPU (mig < 0) or MIG device. */
struct device {
	size_t gpu; /* snapshot index */
	int mig;    /* MIG index, -1 for the whole GPU */
	int reason; /* enum reason */
};

/* One device that passed the filters. */
struct cand {
	size_t gpu;  /* snapshot index */
	int mig;     /* MIG index on gpu, -1 for the whole GPU */
	int numa;    /* CPU NUMA node, -1 if unknown */
	int socket;  /* socket id (a representative GPU index) */
	double load; /* utilisation fraction + used memory fraction */
	bool whole;  /* every GPU of its NUMA node is a candidate (none busy or filtered) */
};

/* The search state. */
struct engine {
	const struct gpuctl_snapshot *snap; /* what we choose from */
	bool mig;                           /* choosing MIG devices */
	size_t m;                           /* candidates */
	struct cand *c;                     /* m candidates, by (gpu, mig) */
	double *bw;                         /* m x m bandwidths between candidates */
	size_t n;                           /* devices wanted */
	uint32_t *ham;                      /* DP table of the ring test, 2^(RING_EXACT_MAX-1) */
	double *match;                      /* leftover DP over subsets of candidates, or NULL */
	bool match_tried;                   /* match computed (or found too large) */
	size_t *parents;                    /* MIG: distinct parent GPUs of the candidates */
	size_t n_parents;                   /* entries in parents */
};

/* A scored set. */
struct scored {
	size_t *idx;                  /* n candidate indices, ascending; owned */
	struct gpuctl_select_score s; /* its score */
	bool valid;                   /* holds a set */
};

/* The best set so far and the runner-up. */
struct keep {
	struct scored best;   /* the best set so far */
	struct scored second; /* the best set that differs from best */
};

/* Compares two bandwidths with the relative tolerance REL_TOL: 1, 0 or -1. */
static inline int select_cmp_double(double a, double b)
{
	double tol = REL_TOL * fmax(fabs(a), fabs(b)) + 1e-12;

	if (a > b + tol)
		return 1;
	if (b > a + tol)
		return -1;
	return 0;
}

/* The bandwidth between candidates a and b. */
static inline double select_bwi(const struct engine *e, size_t a, size_t b)
{
	return e->bw[a * e->m + b];
}

/* An integer field of a GPU, when NVML gave it. */
static inline bool select_gpu_int(const struct gpuctl_gpu *g, enum gpuctl_field f, int64_t *v)
{
	if (!g->valid[f])
		return false;
	*v = g->ints[f];
	return true;
}

/* ---- select-filter.c: which devices qualify ---- */

/* Resolves req->only / req->exclude (ids) into a per-GPU flag array (NULL when not given). */
int select_resolve_ids(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap, const char *ids,
                       const char *what, bool **ret_flags);
/* Runs the filters on the n_dev devices, writing each one's reason; returns how many were
 * kept. only and excluded as select_resolve_ids gives them. */
size_t select_filter(const struct gpuctl_snapshot *snap, const struct gpuctl_select_request *req,
                     const bool *only, const bool *excluded, bool avoid_warned, struct device *dev,
                     size_t n_dev);
/* Socket of every GPU (ret_socket: snap->n_gpus entries). */
int select_sockets_of(const struct gpuctl_snapshot *snap, int *ret_socket);
/* Appends to buf (size bytes, *len used) the MIG profiles snap has, with their counts. */
void select_mig_profiles(const struct gpuctl_snapshot *snap, char *buf, size_t size, size_t *len);
/* Writes the -ENOSPC line: which filter removed which device. */
int select_no_space(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                    const struct gpuctl_select_request *req, const struct device *dev, size_t n_dev,
                    size_t kept);

/* ---- select-score.c: the objective and the search over it ---- */

/* Every n-subset of the candidates. */
int select_search_exact(struct engine *e, struct keep *k);
/* Greedy growth from every seed, then swaps. */
int select_search_heuristic(struct engine *e, struct keep *k);

#endif /* GPUCTL_SELECT_INTERNAL_H */
