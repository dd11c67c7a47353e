// SPDX-License-Identifier: MIT
/*
 * select-score.c: the selection's objective and the search over it (docs/selection.md): the
 * score of a set of candidates, the order of two scores, and which sets are scored, keeping the
 * best and the runner-up (the best set that differs from it). One file: the search calls the
 * scoring for every set it tries, and select-bench measured the two apart no faster
 * (bench/RESULTS.md, "Two builds compared").
 *
 * Decisions:
 * - Objective, compared field by field (struct gpuctl_select_score; measured on job streams,
 *   docs/selection.md): (1) ring bandwidth, the bottleneck of the best Hamiltonian ring (0 for
 *   one device), compared with a relative tolerance of 1e-6; (2) fewer NUMA nodes, then fewer
 *   sockets; (3) leftover: the maximum-weight matching of the free candidates left over (how
 *   well they still serve 2-GPU jobs, counting every pair, so single picks use up pairs
 *   whole); for MIG, the parent GPUs left untouched; (4) fewer whole NUMA nodes touched (a
 *   node all of whose GPUs are free: best fit, so a later job of a node's size still finds one
 *   whole; issue 29 item 7, bench/RESULTS.md "Job streams by size"); (5) release value: the
 *   maximum-weight matching inside the set (what it gives back to 2-GPU jobs when it ends);
 *   (6) total pairwise bandwidth; (7) load; (8) the lowest sorted index list.
 * - The tail of a score (leftover, whole nodes taken, release) is computed only for a set
 *   whose head could place.
 * - The ring of a set of up to RING_EXACT_MAX (16) devices is exact (DP over subsets per
 *   threshold); larger sets use a bounded backtracking search (a lower bound). A cheap upper
 *   bound (every ring vertex uses two of its edges) answers many sets without either, and lets
 *   the exact search skip sets that cannot win.
 * - The leftover and release matchings are one DP over all subsets of the free candidates
 *   (<= MATCH_EXACT_MAX, 16), computed once, lazily, read per set; above 16 free candidates
 *   they are greedy matchings (heaviest edge first).
 * - Exact: every set of the requested size, in lexicographic order, skipping those whose ring
 *   upper bound cannot reach the runner-up's ring (they cannot place). select.c's
 *   select_is_exact decides when the count allows it.
 * - Heuristic: greedy growth from every seed (most bandwidth to the set, then the seed's
 *   socket, then the lower load), then swaps (one in, one out) while the best set improves, at
 *   most LOCAL_MAX_PASSES passes (its gap: docs/selection.md).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "select-internal.h"
#include "util.h"

#define MATCH_EXACT_MAX 16    /* leftover matching by DP up to this many free candidates */
#define HAM_DFS_BUDGET  20000 /* steps of the backtracking cycle search above RING_EXACT_MAX */

/* <0 when a's head (ring, NUMA, sockets) is better than b's, >0 when worse. */
static int select_head_cmp(const struct gpuctl_select_score *a, const struct gpuctl_select_score *b)
{
	int r;

	if ((r = select_cmp_double(a->ring_bandwidth, b->ring_bandwidth)) != 0)
		return -r;
	if (a->numa_nodes != b->numa_nodes)
		return a->numa_nodes < b->numa_nodes ? -1 : 1;
	if (a->sockets != b->sockets)
		return a->sockets < b->sockets ? -1 : 1;
	return 0;
}

/* How many whole NUMA nodes (struct cand's whole) the set takes GPUs from. */
static unsigned whole_taken(const struct engine *e, const size_t *set)
{
	unsigned d = 0;

	for (size_t i = 0; i < e->n; i++) {
		bool seen = !e->c[set[i]].whole;

		for (size_t j = 0; j < i && !seen; j++)
			seen = e->c[set[j]].numa == e->c[set[i]].numa;
		d += !seen;
	}
	return d;
}

/* Full order: head, leftover, whole NUMA nodes touched (fewer better), release, total (higher
 * better), load (lower better), then the index list. */
static int select_full_cmp(const struct engine *e, const struct gpuctl_select_score *a,
                           const size_t *ia, const struct gpuctl_select_score *b, const size_t *ib)
{
	int r = select_head_cmp(a, b);

	if (r)
		return r;
	if ((r = select_cmp_double(a->leftover, b->leftover)) != 0)
		return -r;
	if (a->whole_nodes_taken != b->whole_nodes_taken)
		return a->whole_nodes_taken < b->whole_nodes_taken ? -1 : 1;
	if ((r = select_cmp_double(a->release, b->release)) != 0)
		return -r;
	if ((r = select_cmp_double(a->total_bandwidth, b->total_bandwidth)) != 0)
		return -r;
	if ((r = select_cmp_double(a->load, b->load)) != 0)
		return r;
	for (size_t i = 0; i < e->n; i++) {
		const struct cand *x = &e->c[ia[i]], *y = &e->c[ib[i]];

		if (x->gpu != y->gpu)
			return x->gpu < y->gpu ? -1 : 1;
		if (x->mig != y->mig)
			return x->mig < y->mig ? -1 : 1;
	}
	return 0;
}

/* ---- ring bandwidth ---- */

/* Whether the k vertices with adjacency masks adj[] have a Hamiltonian cycle (k >= 3, k <=
 * RING_EXACT_MAX): paths from vertex 0, dp[mask of 1..k-1] = bitset of possible end vertices. */
static bool ham_exact(struct engine *e, const uint32_t *adj, size_t k)
{
	uint32_t full = (1u << (k - 1)) - 1, *dp = e->ham;

	memset(dp, 0, sizeof(*dp) * ((size_t)full + 1));
	for (size_t v = 1; v < k; v++)
		if (adj[0] & (1u << v))
			dp[1u << (v - 1)] |= 1u << v;
	for (uint32_t mask = 1; mask < full; mask++) {
		uint32_t ends = dp[mask];

		while (ends) {
			unsigned v = (unsigned)__builtin_ctz(ends);
			uint32_t next = (adj[v] >> 1) & ~mask & full;

			ends &= ends - 1;
			while (next) {
				unsigned u = (unsigned)__builtin_ctz(next);

				next &= next - 1;
				dp[mask | (1u << u)] |= 1u << (u + 1);
			}
		}
	}
	return (dp[full] & adj[0]) != 0;
}

/* Backtracking search for a Hamiltonian cycle in a large set (fewest free neighbours first),
 * within a step budget: true only when one was found. */
static bool ham_dfs(const struct engine *e, const size_t *set, size_t k, double t, size_t *path,
                    bool *used, size_t depth, long *budget)
{
	if (--*budget < 0)
		return false;
	if (depth == k)
		return select_bwi(e, set[path[k - 1]], set[path[0]]) >= t;
	{
		size_t best = k, best_deg = SIZE_MAX;

		/* the unvisited neighbour with the fewest unvisited neighbours (Warnsdorff) */
		for (size_t u = 0; u < k; u++) {
			size_t deg = 0;

			if (used[u] || select_bwi(e, set[path[depth - 1]], set[u]) < t)
				continue;
			for (size_t w = 0; w < k; w++)
				if (!used[w] && w != u && select_bwi(e, set[u], set[w]) >= t)
					deg++;
			if (deg < best_deg) {
				best_deg = deg;
				best = u;
			}
		}
		if (best == k)
			return false;
		used[best] = true;
		path[depth] = best;
		if (ham_dfs(e, set, k, t, path, used, depth + 1, budget))
			return true;
		/* the first choice failed: give up on this branch to keep the search bounded */
		used[best] = false;
		return false;
	}
}

/* Whether the set's threshold graph (edges >= t) has a Hamiltonian cycle. */
static bool ring_feasible(struct engine *e, const size_t *set, size_t k, double t)
{
	uint32_t adj[RING_EXACT_MAX];
	size_t min_deg = k;

	for (size_t i = 0; i < k; i++) {
		size_t deg = 0;

		if (k <= RING_EXACT_MAX)
			adj[i] = 0;
		for (size_t j = 0; j < k; j++)
			if (j != i && select_bwi(e, set[i], set[j]) >= t) {
				deg++;
				if (k <= RING_EXACT_MAX)
					adj[i] |= 1u << j;
			}
		if (deg < min_deg)
			min_deg = deg;
	}
	if (min_deg < 2)
		return false;
	if (2 * min_deg >= k) /* Dirac's theorem */
		return true;
	if (k <= RING_EXACT_MAX)
		return ham_exact(e, adj, k);

	_cleanup_free_ size_t *path = calloc(k, sizeof(*path));
	_cleanup_free_ bool *used = calloc(k, sizeof(*used));
	long budget = HAM_DFS_BUDGET;

	if (!path || !used)
		return false;
	for (size_t s = 0; s < k && budget > 0; s++) {
		memset(used, 0, k * sizeof(*used));
		path[0] = s;
		used[s] = true;
		if (ham_dfs(e, set, k, t, path, used, 1, &budget))
			return true;
	}
	return false;
}

static int cmp_desc(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

/* Upper bound on the ring: every vertex of a ring uses two of its edges, so the ring is at most
 * the smallest second-best edge of a vertex. */
static double select_ring_upper(const struct engine *e, const size_t *set, size_t k)
{
	double ub = INFINITY;

	for (size_t i = 0; i < k; i++) {
		double b1 = -1, b2 = -1;

		for (size_t j = 0; j < k; j++) {
			double w;

			if (j == i)
				continue;
			w = select_bwi(e, set[i], set[j]);
			if (w > b1) {
				b2 = b1;
				b1 = w;
			} else if (w > b2) {
				b2 = w;
			}
		}
		ub = fmin(ub, b2);
	}
	return ub;
}

/* The bottleneck of the best ring through the set (k devices). */
static double ring_of(struct engine *e, const size_t *set, size_t k)
{
	_cleanup_free_ double *vals = NULL;
	size_t nv = 0, lo, hi;
	double ub;

	if (k <= 1)
		return 0.0;
	if (k == 2)
		return select_bwi(e, set[0], set[1]);
	if (k == 3)
		return fmin(select_bwi(e, set[0], set[1]),
		            fmin(select_bwi(e, set[0], set[2]), select_bwi(e, set[1], set[2])));
	ub = select_ring_upper(e, set, k);
	if (ring_feasible(e, set, k, ub))
		return ub;
	vals = malloc(k * (k - 1) / 2 * sizeof(*vals));
	if (!vals)
		return 0.0; /* callers treat it as the worst ring; never seen in practice */
	for (size_t i = 0; i < k; i++)
		for (size_t j = i + 1; j < k; j++) {
			double w = select_bwi(e, set[i], set[j]);

			if (w < ub)
				vals[nv++] = w;
		}
	qsort(vals, nv, sizeof(*vals), cmp_desc);
	/* distinct values, descending; feasibility is monotone in the threshold */
	{
		size_t d = 0;

		for (size_t i = 0; i < nv; i++)
			if (d == 0 || vals[d - 1] != vals[i])
				vals[d++] = vals[i];
		nv = d;
	}
	if (nv == 0)
		return 0.0;
	/* the answer is vals[x] for the smallest x that is feasible; the smallest value always is
	 * (the graph is then complete) */
	lo = 0;
	hi = nv - 1;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ring_feasible(e, set, k, vals[mid]))
			hi = mid;
		else
			lo = mid + 1;
	}
	return vals[lo];
}

/* ---- leftover ---- */

/* Maximum-weight matching of every subset of the candidates, by DP: match[mask] = max(match
 * without its lowest vertex, best pairing of the lowest vertex with another + the rest). */
static int match_table(struct engine *e)
{
	size_t size;

	e->match_tried = true;
	if (e->m > MATCH_EXACT_MAX)
		return 0;
	size = (size_t)1 << e->m;
	e->match = calloc(size, sizeof(*e->match));
	if (!e->match)
		return -ENOMEM;
	for (size_t mask = 1; mask < size; mask++) {
		unsigned low = (unsigned)__builtin_ctzl(mask);
		size_t rest = mask & (mask - 1);
		double best = e->match[rest];

		for (size_t r = rest; r; r &= r - 1) {
			unsigned j = (unsigned)__builtin_ctzl(r);
			double v = e->match[rest & ~((size_t)1 << j)] + select_bwi(e, low, j);

			if (v > best)
				best = v;
		}
		e->match[mask] = best;
	}
	return 0;
}

/* Greedy matching (heaviest pair first) of the candidates not taken. */
static double match_greedy(const struct engine *e, const bool *taken)
{
	_cleanup_free_ bool *used = calloc(e->m ? e->m : 1, sizeof(*used));
	double sum = 0.0;

	if (!used)
		return 0.0;
	for (;;) {
		double best = -1.0;
		size_t ba = 0, bb = 0;

		for (size_t a = 0; a < e->m; a++) {
			if (taken[a] || used[a])
				continue;
			for (size_t b = a + 1; b < e->m; b++)
				if (!taken[b] && !used[b] && select_bwi(e, a, b) > best) {
					best = select_bwi(e, a, b);
					ba = a;
					bb = b;
				}
		}
		if (best <= 0.0)
			return sum;
		used[ba] = used[bb] = true;
		sum += best;
	}
}

/* The best matching of the candidates inside the set (inside) or of those outside it: one
 * lookup in the DP table up to MATCH_EXACT_MAX candidates, else a greedy matching. */
static int match_of(struct engine *e, const size_t *set, bool inside, double *ret)
{
	_cleanup_free_ bool *taken = NULL;

	if (!e->match_tried) {
		int r = match_table(e);

		if (r < 0)
			return r;
	}
	if (e->match) {
		size_t mask = 0;

		for (size_t i = 0; i < e->n; i++)
			mask |= (size_t)1 << set[i];
		*ret = e->match[inside ? mask : ~mask & (((size_t)1 << e->m) - 1)];
		return 0;
	}
	taken = malloc((e->m ? e->m : 1) * sizeof(*taken));
	if (!taken)
		return -ENOMEM;
	for (size_t i = 0; i < e->m; i++)
		taken[i] = inside;
	for (size_t i = 0; i < e->n; i++)
		taken[set[i]] = !inside;
	*ret = match_greedy(e, taken);
	return 0;
}

static int leftover_of(struct engine *e, const size_t *set, double *ret)
{
	if (e->mig) {
		/* parent GPUs none of whose candidate MIG devices the set takes */
		unsigned untouched = 0;

		for (size_t p = 0; p < e->n_parents; p++) {
			bool touched = false;

			for (size_t i = 0; i < e->n && !touched; i++)
				touched = e->c[set[i]].gpu == e->parents[p];
			untouched += !touched;
		}
		*ret = untouched;
		return 0;
	}
	return match_of(e, set, false, ret);
}

/* Release value: the best matching inside the set (0 for MIG sets: no P2P). */
static int release_of(struct engine *e, const size_t *set, double *ret)
{
	if (e->mig) {
		*ret = 0.0;
		return 0;
	}
	return match_of(e, set, true, ret);
}

/* ---- scoring ---- */

static unsigned distinct_ints(const int *v, size_t k)
{
	unsigned d = 0;

	for (size_t i = 0; i < k; i++) {
		bool seen = false;

		for (size_t j = 0; j < i && !seen; j++)
			seen = v[j] == v[i];
		d += !seen;
	}
	return d;
}

/* Ring, NUMA nodes, sockets (the head), and the total, which is as cheap. */
static void select_score_head(struct engine *e, const size_t *set, struct gpuctl_select_score *s)
{
	int numa[64], sock[64];
	size_t k = e->n;

	memset(s, 0, sizeof(*s));
	s->ring_bandwidth = ring_of(e, set, k);
	for (size_t i = 0; i < k; i++)
		for (size_t j = i + 1; j < k; j++)
			s->total_bandwidth += select_bwi(e, set[i], set[j]);
	if (k <= ELEMENTSOF(numa)) {
		for (size_t i = 0; i < k; i++) {
			numa[i] = e->c[set[i]].numa;
			sock[i] = e->c[set[i]].socket;
		}
		s->numa_nodes = distinct_ints(numa, k);
		s->sockets = distinct_ints(sock, k);
	} else {
		_cleanup_free_ int *nv = calloc(k, sizeof(int)), *sv = calloc(k, sizeof(int));

		if (!nv || !sv)
			return; /* counts stay 0; callers never see sets this big fail here */
		for (size_t i = 0; i < k; i++) {
			nv[i] = e->c[set[i]].numa;
			sv[i] = e->c[set[i]].socket;
		}
		s->numa_nodes = distinct_ints(nv, k);
		s->sockets = distinct_ints(sv, k);
	}
}

static int select_score_tail(struct engine *e, const size_t *set, struct gpuctl_select_score *s)
{
	int r;

	s->load = 0.0;
	for (size_t i = 0; i < e->n; i++)
		s->load += e->c[set[i]].load;
	s->whole_nodes_taken = whole_taken(e, set);
	r = leftover_of(e, set, &s->leftover);
	return r < 0 ? r : release_of(e, set, &s->release);
}

/* ---- the search ---- */

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
