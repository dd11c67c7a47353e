/* SPDX-License-Identifier: MIT */
/*
 * select.h: private knobs of the selection engine (src/lib/select/select.c), for its tests and its
 * benchmark (they link the static library), and the one reading of a caller's request, for the
 * rooms above (lease/). gpuctl_select() is select_run() with the defaults.
 *
 * Decisions:
 * - The search mode is a parameter, not global state: a test can force the exact search past
 *   its bound (to measure the heuristic's gap) or force the heuristic on a small machine.
 */
#ifndef GPUCTL_SELECT_H
#define GPUCTL_SELECT_H

#include <stdint.h>

#include "gpuctl/gpuctl.h"

/* Default bound of the exact search: sets of the requested size among the candidates. C(16, 8)
 * = 12,870 is the largest count on a 16-GPU machine. */
#define SELECT_EXACT_LIMIT 200000u
/* ... and when the work, C(candidates, count) x candidates^2 (each set's leftover matching),
 * stays under this; machines of at most SELECT_EXACT_ALWAYS candidates are always exact. */
#define SELECT_EXACT_WORK   20000000.0
#define SELECT_EXACT_ALWAYS 16u

struct select_opts {
	uint64_t exact_limit; /* enumerate every set when C(candidates, count) <= this */
	bool force_heuristic; /* use the heuristic whatever the count (tests, bench) */
	bool avoid_warned;    /* treat req->warned as a filter ("health WARN") */
};

/* Whether gpuctl_select enumerates every set for m candidates and a request of n (else the
 * heuristic); opts as for select_run (NULL: defaults). */
bool select_is_exact(size_t m, size_t n, const struct select_opts *opts);

/* Copies a caller's request, of any struct_size from the first release's on, into *ret, a
 * full-size request (struct_size = sizeof): the fields past the caller's struct_size keep
 * GPUCTL_SELECT_REQUEST_INIT's defaults, and the later pointer fields it does not wholly cover
 * are NULL. -EINVAL (ret untouched) when req is NULL or its struct_size does not reach count. */
int select_request_copy(const struct gpuctl_select_request *req, struct gpuctl_select_request *ret);

int select_run(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
               const struct gpuctl_select_request *req, const struct select_opts *opts,
               struct gpuctl_selection **ret_sel);

#endif /* GPUCTL_SELECT_H */
