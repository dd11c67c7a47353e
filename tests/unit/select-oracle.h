/* SPDX-License-Identifier: MIT */
/*
 * select-oracle.h: a brute-force reading of the selection objective (docs/selection.md), for
 * tests/unit/test-select.c and bench/select-bench.c. Independent of src/lib/select/select.c: it
 * reads the snapshot through the public API only and scores a set by the plain definitions (every
 * ring permutation, every pair, every matching).
 */
#ifndef GPUCTL_SELECT_ORACLE_H
#define GPUCTL_SELECT_ORACLE_H

#include <stdbool.h>
#include <stddef.h>

#include "gpuctl/gpuctl.h"

#define ORACLE_MAX 16 /* candidates the oracle accepts */

/* The free whole GPUs to choose among, with what the objective needs. */
struct oracle_in {
	size_t m;                          /* candidates */
	size_t gpu[ORACLE_MAX];            /* snapshot index of each, ascending */
	double bw[ORACLE_MAX][ORACLE_MAX]; /* pair bandwidths */
	int numa[ORACLE_MAX];              /* NUMA node, -1 unknown */
	int socket[ORACLE_MAX];            /* socket id */
	double load[ORACLE_MAX];           /* utilisation + used memory fractions */
	bool whole[ORACLE_MAX];            /* every GPU of its known NUMA node is a candidate */
};

/* The result: best set and runner-up, as candidate positions, with their scores. */
struct oracle_out {
	size_t best[ORACLE_MAX];             /* candidate positions, ascending */
	struct gpuctl_select_score best_s;   /* its score */
	size_t second[ORACLE_MAX];           /* runner-up */
	struct gpuctl_select_score second_s; /* its score */
	bool has_second;                     /* a runner-up exists */
};

/* Fills in from snap: every GPU not lost, without uncorrectable ECC errors or a row-remap
 * failure, not in MIG mode, and not in busy[] (may be NULL). -E2BIG over ORACLE_MAX. */
int oracle_prepare(const struct gpuctl_snapshot *snap, const bool *busy, struct oracle_in *in);
/* The lexicographic best n-set (n <= in->m). */
void oracle_best(const struct oracle_in *in, size_t n, struct oracle_out *out);
/* The best ring bandwidth of any n-set (for the benchmark's quality ratio). */
double oracle_ring_of(const struct oracle_in *in, const size_t *set, size_t n);

#endif
