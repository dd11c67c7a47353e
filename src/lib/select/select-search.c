// SPDX-License-Identifier: MIT
/*
 * select-search.c: which sets of candidates the selection scores (docs/selection.md), keeping
 * the best and the runner-up (the best set that differs from it).
 *
 * Decisions:
 * - Exact: every set of the requested size, in lexicographic order, skipping those whose ring
 *   upper bound cannot reach the runner-up's ring (they cannot place). select.c's
 *   select_is_exact decides when the count allows it.
 * - Heuristic: greedy growth from every seed (most bandwidth to the set, then the seed's
 *   socket, then the lower load), then swaps (one in, one out) while the best set improves, at
 *   most LOCAL_MAX_PASSES passes (its gap: docs/selection.md).
 * - The tail of a score (leftover, release) is computed only for a set whose head could place.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "select-internal.h"
#include "util.h"

#define LOCAL_MAX_PASSES 8 /* swap passes of the heuristic */

/* Offers a set with its head score; computes the tail only when it could place. */
static int keep_offer(struct engine *e, struct keep *k, const size_t *set,
                      struct gpuctl_select_score *s)
{
	int r;

	if (k->second.valid && select_head_cmp(s, &k->second.s) > 0)
		return 0;
	r = select_score_tail(e, set, s);
	if (r < 0)
		return r;
	if (!k->best.valid || select_full_cmp(e, s, set, &k->best.s, k->best.idx) < 0) {
		if (k->best.valid && memcmp(set, k->best.idx, e->n * sizeof(*set)) == 0)
			return 0;
		if (k->best.valid) {
			memcpy(k->second.idx, k->best.idx, e->n * sizeof(*set));
			k->second.s = k->best.s;
			k->second.valid = true;
		}
		memcpy(k->best.idx, set, e->n * sizeof(*set));
		k->best.s = *s;
		k->best.valid = true;
	} else if (memcmp(set, k->best.idx, e->n * sizeof(*set)) != 0 &&
	           (!k->second.valid ||
	            select_full_cmp(e, s, set, &k->second.s, k->second.idx) < 0)) {
		memcpy(k->second.idx, set, e->n * sizeof(*set));
		k->second.s = *s;
		k->second.valid = true;
	}
	return 0;
}

/* Every n-subset of the candidates, in lexicographic order. */
int select_search_exact(struct engine *e, struct keep *k)
{
	_cleanup_free_ size_t *set = calloc(e->n, sizeof(*set));
	size_t n = e->n, m = e->m;

	if (!set)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		set[i] = i;
	for (;;) {
		struct gpuctl_select_score s;
		bool skip = false;
		size_t i;
		int r;

		/* a set whose ring cannot reach the runner-up's cannot place */
		if (n >= 4 && k->second.valid &&
		    select_cmp_double(select_ring_upper(e, set, n), k->second.s.ring_bandwidth) < 0)
			skip = true;
		if (!skip) {
			select_score_head(e, set, &s);
			r = keep_offer(e, k, set, &s);
			if (r < 0)
				return r;
		}
		/* next combination */
		i = n;
		while (i > 0 && set[i - 1] == m - n + i - 1)
			i--;
		if (i == 0)
			return 0;
		set[i - 1]++;
		for (size_t j = i; j < n; j++)
			set[j] = set[j - 1] + 1;
	}
}

static int cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return x < y ? -1 : x > y;
}

/* Greedy growth from every seed, then swaps (one in, one out) while the score improves. */
int select_search_heuristic(struct engine *e, struct keep *k)
{
	size_t n = e->n, m = e->m;
	_cleanup_free_ size_t *set = calloc(n, sizeof(*set));
	_cleanup_free_ size_t *trial = calloc(n, sizeof(*trial));
	_cleanup_free_ bool *in = calloc(m, sizeof(*in));
	_cleanup_free_ double *sum = calloc(m, sizeof(*sum));
	int r;

	if (!set || !trial || !in || !sum)
		return -ENOMEM;
	for (size_t seed = 0; seed < m; seed++) {
		struct gpuctl_select_score s;
		size_t have = 1;

		memset(in, 0, m * sizeof(*in));
		memset(sum, 0, m * sizeof(*sum));
		set[0] = seed;
		in[seed] = true;
		for (size_t u = 0; u < m; u++)
			sum[u] = select_bwi(e, seed, u);
		while (have < n) {
			size_t pick = m;

			for (size_t u = 0; u < m; u++) {
				int c;

				if (in[u])
					continue;
				if (pick == m) {
					pick = u;
					continue;
				}
				c = select_cmp_double(sum[u], sum[pick]);
				if (c == 0 && (e->c[u].socket == e->c[seed].socket) !=
				                      (e->c[pick].socket == e->c[seed].socket))
					c = e->c[u].socket == e->c[seed].socket ? 1 : -1;
				if (c == 0)
					c = select_cmp_double(e->c[pick].load, e->c[u].load);
				if (c > 0)
					pick = u;
			}
			set[have++] = pick;
			in[pick] = true;
			for (size_t u = 0; u < m; u++)
				sum[u] += select_bwi(e, pick, u);
		}
		qsort(set, n, sizeof(*set), cmp_size);
		select_score_head(e, set, &s);
		r = keep_offer(e, k, set, &s);
		if (r < 0)
			return r;
	}
	/* local search from the best set */
	for (int pass = 0; pass < LOCAL_MAX_PASSES && k->best.valid; pass++) {
		bool improved = false;

		memcpy(set, k->best.idx, n * sizeof(*set));
		memset(in, 0, m * sizeof(*in));
		for (size_t i = 0; i < n; i++)
			in[set[i]] = true;
		for (size_t i = 0; i < n && !improved; i++)
			for (size_t u = 0; u < m && !improved; u++) {
				struct gpuctl_select_score s;
				bool was_best;

				if (in[u])
					continue;
				memcpy(trial, set, n * sizeof(*set));
				trial[i] = u;
				qsort(trial, n, sizeof(*trial), cmp_size);
				select_score_head(e, trial, &s);
				r = keep_offer(e, k, trial, &s);
				if (r < 0)
					return r;
				was_best = memcmp(trial, k->best.idx, n * sizeof(*trial)) == 0;
				improved = was_best;
			}
		if (!improved)
			break;
	}
	return 0;
}
