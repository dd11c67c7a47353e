// SPDX-License-Identifier: MIT
/*
 * select.c: the selection engine (gpuctl_select): filters, then a set search that maximises a
 * lexicographic objective. Pure: a function of the snapshot and the request, no NVML.
 * Model, constants and sources: docs/selection.md. Tests: tests/unit/test-select.c (against a
 * brute-force oracle), bench/select-bench.c.
 *
 * Decisions:
 * - Filters run in a fixed order (enum reason) and remember which one removed each device, so
 *   -ENOSPC says, in one line, what removed what. Fields NVML could not give never exclude.
 * - Pools (req->pool, docs/config.md) filter right after the outer allocation, the same way.
 * - Leases (req->leased, req->foreign; read only when struct_size covers them) are filters
 *   right after `within`: a device is removed when the set holds it, its whole GPU, or (for a
 *   whole GPU) any of its MIG devices ("leased", "in use without a lease").
 * - Objective, compared field by field (struct gpuctl_select_score; measured on job streams,
 *   docs/selection.md): (1) ring bandwidth, the bottleneck of the best Hamiltonian ring (0 for
 *   one device), compared with a relative tolerance of 1e-6; (2) fewer NUMA nodes, then fewer
 *   sockets (sockets: GPUs joined by a shared NUMA node or a non-SYS PCIe level,
 *   transitively); (3) leftover: the maximum-weight matching of the free candidates left over
 *   (how well they still serve 2-GPU jobs, counting every pair, so single picks use up pairs
 *   whole); for MIG, the parent GPUs left untouched; (4) release value: the maximum-weight
 *   matching inside the set (what it gives back to 2-GPU jobs when it ends); (5) total
 *   pairwise bandwidth; (6) load; (7) the lowest sorted index list.
 * - Search: every set when there are at most SELECT_EXACT_ALWAYS (16) candidates, or when
 *   C(m, n) <= SELECT_EXACT_LIMIT and C(m, n) x m^2 <= SELECT_EXACT_WORK (select_is_exact), with
 *   a cheap upper bound on the ring
 *   (every ring vertex uses two of its edges) to skip sets that cannot win; the ring of a set of
 *   up to 16 devices is exact (DP over subsets per threshold). Above the bound: greedy growth
 *   from every seed plus swap local search (documented gap in docs/selection.md).
 * - The leftover and release matchings are one DP over all subsets of the free candidates
 *   (<= 16), computed once, lazily, read per set; above 16 free candidates they are greedy
 *   matchings (heaviest edge first).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ctx.h"
#include "mig-profile.h"
#include "select.h"
#include "snapshot-internal.h"
#include "util.h"

#define REL_TOL          1e-6  /* relative tolerance on bandwidth comparisons */
#define RING_EXACT_MAX   16    /* rings of larger sets: heuristic (lower bound) */
#define MATCH_EXACT_MAX  16    /* leftover matching by DP up to this many free candidates */
#define HAM_DFS_BUDGET   20000 /* steps of the backtracking cycle search above RING_EXACT_MAX */
#define LOCAL_MAX_PASSES 8     /* swap passes of the heuristic */
#define MSG_MAX          480   /* -ENOSPC message */

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
	R_UTIL,
	R_PROCS,
	R_WARNED,
	R__COUNT
};

struct gpuctl_selection {
	struct gpuctl_devset *best;              /* the chosen devices, owned */
	struct gpuctl_devset *runner_up;         /* the best other set, owned; NULL if none */
	struct gpuctl_select_score best_score;   /* score of best */
	struct gpuctl_select_score runner_score; /* score of runner_up, if any */
};

/* One device that passed the filters. */
struct cand {
	size_t gpu;  /* snapshot index */
	int mig;     /* MIG index on gpu, -1 for the whole GPU */
	int numa;    /* CPU NUMA node, -1 if unknown */
	int socket;  /* socket id (a representative GPU index) */
	double load; /* utilisation fraction + used memory fraction */
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

static int cmp_double(double a, double b)
{
	double tol = REL_TOL * fmax(fabs(a), fabs(b)) + 1e-12;

	if (a > b + tol)
		return 1;
	if (b > a + tol)
		return -1;
	return 0;
}

/* <0 when a's head (ring, NUMA, sockets) is better than b's, >0 when worse. */
static int head_cmp(const struct gpuctl_select_score *a, const struct gpuctl_select_score *b)
{
	int r;

	if ((r = cmp_double(a->ring_bandwidth, b->ring_bandwidth)) != 0)
		return -r;
	if (a->numa_nodes != b->numa_nodes)
		return a->numa_nodes < b->numa_nodes ? -1 : 1;
	if (a->sockets != b->sockets)
		return a->sockets < b->sockets ? -1 : 1;
	return 0;
}

/* Full order: head, leftover, release, total (higher better), load (lower better), then the
 * index list. */
static int full_cmp(const struct engine *e, const struct gpuctl_select_score *a, const size_t *ia,
                    const struct gpuctl_select_score *b, const size_t *ib)
{
	int r = head_cmp(a, b);

	if (r)
		return r;
	if ((r = cmp_double(a->leftover, b->leftover)) != 0)
		return -r;
	if ((r = cmp_double(a->release, b->release)) != 0)
		return -r;
	if ((r = cmp_double(a->total_bandwidth, b->total_bandwidth)) != 0)
		return -r;
	if ((r = cmp_double(a->load, b->load)) != 0)
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

static double bwi(const struct engine *e, size_t a, size_t b)
{
	return e->bw[a * e->m + b];
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
		return bwi(e, set[path[k - 1]], set[path[0]]) >= t;
	{
		size_t best = k, best_deg = SIZE_MAX;

		/* the unvisited neighbour with the fewest unvisited neighbours (Warnsdorff) */
		for (size_t u = 0; u < k; u++) {
			size_t deg = 0;

			if (used[u] || bwi(e, set[path[depth - 1]], set[u]) < t)
				continue;
			for (size_t w = 0; w < k; w++)
				if (!used[w] && w != u && bwi(e, set[u], set[w]) >= t)
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
			if (j != i && bwi(e, set[i], set[j]) >= t) {
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
static double ring_upper(const struct engine *e, const size_t *set, size_t k)
{
	double ub = INFINITY;

	for (size_t i = 0; i < k; i++) {
		double b1 = -1, b2 = -1;

		for (size_t j = 0; j < k; j++) {
			double w;

			if (j == i)
				continue;
			w = bwi(e, set[i], set[j]);
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
		return bwi(e, set[0], set[1]);
	if (k == 3)
		return fmin(bwi(e, set[0], set[1]),
		            fmin(bwi(e, set[0], set[2]), bwi(e, set[1], set[2])));
	ub = ring_upper(e, set, k);
	if (ring_feasible(e, set, k, ub))
		return ub;
	vals = malloc(k * (k - 1) / 2 * sizeof(*vals));
	if (!vals)
		return 0.0; /* callers treat it as the worst ring; never seen in practice */
	for (size_t i = 0; i < k; i++)
		for (size_t j = i + 1; j < k; j++) {
			double w = bwi(e, set[i], set[j]);

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
			double v = e->match[rest & ~((size_t)1 << j)] + bwi(e, low, j);

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
				if (!taken[b] && !used[b] && bwi(e, a, b) > best) {
					best = bwi(e, a, b);
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
static void score_head(struct engine *e, const size_t *set, struct gpuctl_select_score *s)
{
	int numa[64], sock[64];
	size_t k = e->n;

	memset(s, 0, sizeof(*s));
	s->ring_bandwidth = ring_of(e, set, k);
	for (size_t i = 0; i < k; i++)
		for (size_t j = i + 1; j < k; j++)
			s->total_bandwidth += bwi(e, set[i], set[j]);
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

static int score_tail(struct engine *e, const size_t *set, struct gpuctl_select_score *s)
{
	int r;

	s->load = 0.0;
	for (size_t i = 0; i < e->n; i++)
		s->load += e->c[set[i]].load;
	r = leftover_of(e, set, &s->leftover);
	return r < 0 ? r : release_of(e, set, &s->release);
}

/* ---- best and runner-up ---- */

struct keep {
	struct scored best;   /* the best set so far */
	struct scored second; /* the best set that differs from best */
};

/* Offers a set with its head score; computes the tail only when it could place. */
static int keep_offer(struct engine *e, struct keep *k, const size_t *set,
                      struct gpuctl_select_score *s)
{
	int r;

	if (k->second.valid && head_cmp(s, &k->second.s) > 0)
		return 0;
	r = score_tail(e, set, s);
	if (r < 0)
		return r;
	if (!k->best.valid || full_cmp(e, s, set, &k->best.s, k->best.idx) < 0) {
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
	           (!k->second.valid || full_cmp(e, s, set, &k->second.s, k->second.idx) < 0)) {
		memcpy(k->second.idx, set, e->n * sizeof(*set));
		k->second.s = *s;
		k->second.valid = true;
	}
	return 0;
}

/* Every n-subset of the candidates, in lexicographic order. */
static int search_exact(struct engine *e, struct keep *k)
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
		    cmp_double(ring_upper(e, set, n), k->second.s.ring_bandwidth) < 0)
			skip = true;
		if (!skip) {
			score_head(e, set, &s);
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
static int search_heuristic(struct engine *e, struct keep *k)
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
			sum[u] = bwi(e, seed, u);
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
				c = cmp_double(sum[u], sum[pick]);
				if (c == 0 && (e->c[u].socket == e->c[seed].socket) !=
				                      (e->c[pick].socket == e->c[seed].socket))
					c = e->c[u].socket == e->c[seed].socket ? 1 : -1;
				if (c == 0)
					c = cmp_double(e->c[pick].load, e->c[u].load);
				if (c > 0)
					pick = u;
			}
			set[have++] = pick;
			in[pick] = true;
			for (size_t u = 0; u < m; u++)
				sum[u] += bwi(e, pick, u);
		}
		qsort(set, n, sizeof(*set), cmp_size);
		score_head(e, set, &s);
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
				score_head(e, trial, &s);
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

/* ---- filters ---- */

static bool gpu_int(const struct gpuctl_gpu *g, enum gpuctl_field f, int64_t *v)
{
	if (!g->valid[f])
		return false;
	*v = g->ints[f];
	return true;
}

/* Union-find root. */
static size_t uf_find(size_t *p, size_t x)
{
	while (p[x] != x)
		x = p[x] = p[p[x]];
	return x;
}

/* Socket of every GPU: GPUs sharing a known NUMA node, or with a known PCIe level below SYS,
 * are on one socket (transitively); the socket id is the smallest GPU index in it. */
static int sockets_of(const struct gpuctl_snapshot *snap, int *ret_socket)
{
	size_t n = snap->n_gpus;
	_cleanup_free_ size_t *p = calloc(n ? n : 1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		p[i] = i;
	for (size_t a = 0; a < n; a++)
		for (size_t b = a + 1; b < n; b++) {
			int64_t na, nb;
			bool join = gpu_int(&snap->gpus[a], GPUCTL_F_NUMA_NODE, &na) &&
			            gpu_int(&snap->gpus[b], GPUCTL_F_NUMA_NODE, &nb) && na == nb;

			if (!join && snap->links) {
				int lvl = snap->links[a * n + b].level;

				join = lvl >= 0 && lvl < GPUCTL_TOPO_SYSTEM;
			}
			if (join) {
				size_t ra = uf_find(p, a), rb = uf_find(p, b);

				if (ra != rb)
					p[ra > rb ? ra : rb] = ra < rb ? ra : rb;
			}
		}
	for (size_t i = 0; i < n; i++)
		ret_socket[i] = (int)uf_find(p, i);
	return 0;
}

/* The filter line's label for a reason. */
static void reason_label(const struct gpuctl_select_request *req, enum reason r, char *buf,
                         size_t size)
{
	switch (r) {
	case R_LOST:
		strscpy(buf, size, "lost or unidentified");
		break;
	case R_ECC:
		strscpy(buf, size, "uncorrectable ECC errors");
		break;
	case R_REMAP:
		strscpy(buf, size, "row-remap failure");
		break;
	case R_UNHEALTHY:
		strscpy(buf, size, "unhealthy");
		break;
	case R_WARNED:
		strscpy(buf, size, "health WARN");
		break;
	case R_MIG_MODE:
		strscpy(buf, size, "MIG mode");
		break;
	case R_WITHIN:
		strscpy(buf, size, "outside the allocation");
		break;
	case R_POOL:
		(void)snprintf(buf, size, "outside pool %s", req->pool_name ? req->pool_name : "?");
		break;
	case R_LEASED:
		strscpy(buf, size, "leased");
		break;
	case R_FOREIGN:
		strscpy(buf, size, "in use without a lease");
		break;
	case R_ONLY:
		strscpy(buf, size, "--only");
		break;
	case R_EXCLUDE:
		strscpy(buf, size, "--exclude");
		break;
	case R_NUMA:
		(void)snprintf(buf, size, "--numa %d", req->numa_node);
		break;
	case R_MEM:
		if (req->min_free_mem % (1024 * 1024) == 0)
			(void)snprintf(buf, size, "--min-free-mem %" PRIu64 "MiB",
			               req->min_free_mem / (1024 * 1024));
		else
			(void)snprintf(buf, size, "--min-free-mem %" PRIu64, req->min_free_mem);
		break;
	case R_UTIL:
		(void)snprintf(buf, size, "--max-util %d", req->max_util);
		break;
	case R_PROCS:
		strscpy(buf, size, "--no-procs");
		break;
	default:
		strscpy(buf, size, "?");
		break;
	}
}

/* Appends to a fixed message buffer, truncating ("..." marks a cut). */
static void msg_add(char *buf, size_t size, size_t *len, const char *fmt, ...) _printf_(4, 5);
static void msg_add(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int w;

	if (*len + 1 >= size)
		return;
	va_start(ap, fmt);
	w = vsnprintf(buf + *len, size - *len, fmt, ap);
	va_end(ap);
	if (w < 0)
		return;
	if ((size_t)w >= size - *len) {
		*len = size - 1;
		if (size > 4)
			memcpy(buf + size - 4, "...", 4);
		return;
	}
	*len += (size_t)w;
}

/* Whether set marks device d: d itself, d's whole GPU (a MIG device of a marked GPU), or, for
 * a whole GPU, any of its MIG devices (a GPU with a marked MIG device is not whole). */
static bool set_marks(const struct gpuctl_snapshot *snap, const struct gpuctl_devset *set,
                      size_t gpu, int mig)
{
	if (!set)
		return false;
	if (gpuctl_devset_contains(set, gpu, -1))
		return true;
	if (mig >= 0)
		return gpuctl_devset_contains(set, gpu, mig);
	for (size_t i = 0; i < snap->gpus[gpu].n_migs; i++)
		if (gpuctl_devset_contains(set, gpu, (int)i))
			return true;
	return false;
}

/* One device under the filters: whole GPU (mig < 0) or MIG device. */
struct device {
	size_t gpu; /* snapshot index */
	int mig;    /* MIG index, -1 for the whole GPU */
	int reason; /* enum reason */
};

static enum reason filter_one(const struct gpuctl_snapshot *snap,
                              const struct gpuctl_select_request *req, const bool *only,
                              const bool *excluded, bool avoid_warned, const struct device *d)
{
	const struct gpuctl_gpu *g = &snap->gpus[d->gpu];
	const struct gpuctl_mig *mg = d->mig >= 0 ? &g->migs[d->mig] : NULL;
	int64_t v;

	/* A lost GPU runs nothing and a GPU without a UUID cannot be named to CUDA: neither is
	 * ever chosen, allow_unhealthy or not. */
	if (g->lost || !gpuctl_gpu_str(g, GPUCTL_F_UUID))
		return R_LOST;
	if (!req->allow_unhealthy) {
		if (gpu_int(g, GPUCTL_F_ECC_VOL_UNCORRECTED, &v) && v > 0)
			return R_ECC;
		if (gpu_int(g, GPUCTL_F_REMAP_FAILURE, &v) && v > 0)
			return R_REMAP;
		if (set_marks(snap, req->unhealthy, d->gpu, d->mig))
			return R_UNHEALTHY;
	}
	if (!mg && gpu_int(g, GPUCTL_F_MIG_MODE, &v) && v > 0)
		return R_MIG_MODE;
	if (req->within && !gpuctl_devset_contains(req->within, d->gpu, -1) &&
	    (d->mig < 0 || !gpuctl_devset_contains(req->within, d->gpu, d->mig)))
		return R_WITHIN;
	if (req->pool && !gpuctl_devset_contains(req->pool, d->gpu, -1) &&
	    (d->mig < 0 || !gpuctl_devset_contains(req->pool, d->gpu, d->mig)))
		return R_POOL;
	if (set_marks(snap, req->leased, d->gpu, d->mig))
		return R_LEASED;
	if (set_marks(snap, req->foreign, d->gpu, d->mig))
		return R_FOREIGN;
	if (only && !only[d->gpu])
		return R_ONLY;
	if (excluded && excluded[d->gpu])
		return R_EXCLUDE;
	if (req->numa_node >= 0 && gpu_int(g, GPUCTL_F_NUMA_NODE, &v) && v != req->numa_node)
		return R_NUMA;
	if (req->min_free_mem > 0) {
		bool known = false;

		if (mg) {
			known = mg->valid[GPUCTL_MIG_MEMORY_TOTAL] &&
			        mg->valid[GPUCTL_MIG_MEMORY_USED];
			v = known ? mg->ints[GPUCTL_MIG_MEMORY_TOTAL] -
			                    mg->ints[GPUCTL_MIG_MEMORY_USED]
			          : 0;
		} else {
			known = gpu_int(g, GPUCTL_F_MEMORY_FREE, &v);
		}
		if (known && (v < 0 || (uint64_t)v < req->min_free_mem))
			return R_MEM;
	}
	if (req->max_util >= 0 && gpu_int(g, GPUCTL_F_UTIL_GPU, &v) && v > req->max_util)
		return R_UTIL;
	if (req->no_procs && (snap->flags & GPUCTL_SNAP_PROCESSES)) {
		for (size_t i = 0; i < g->n_procs; i++) {
			const struct gpuctl_proc *p = &g->procs[i];

			if (!mg)
				return R_PROCS;
			if (p->has_mig && mg->valid[GPUCTL_MIG_GI] && mg->valid[GPUCTL_MIG_CI] &&
			    p->gi == (uint64_t)mg->ints[GPUCTL_MIG_GI] &&
			    p->ci == (uint64_t)mg->ints[GPUCTL_MIG_CI])
				return R_PROCS;
		}
	}
	if (avoid_warned && set_marks(snap, req->warned, d->gpu, d->mig))
		return R_WARNED;
	return R_KEPT;
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
	if (gpu_int(g, GPUCTL_F_UTIL_GPU, &v))
		load += (double)v / 100.0;
	if (gpu_int(g, GPUCTL_F_MEMORY_USED, &v) && gpu_int(g, GPUCTL_F_MEMORY_TOTAL, &t) && t > 0)
		load += (double)v / (double)t;
	return load;
}

/* Resolves req->only / req->exclude into a per-GPU flag array (NULL when not given). */
static int resolve_ids(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap, const char *ids,
                       const char *what, bool **ret_flags)
{
	_cleanup_free_ size_t *idx = NULL;
	_cleanup_free_ bool *flags = NULL;
	size_t n = 0;
	int r;

	if (!ids) {
		*ret_flags = NULL;
		return 0;
	}
	r = gpuctl_ids_resolve(ctx, snap, ids, &idx, &n);
	if (r < 0) {
		char why[CTX_ERRMSG_MAX];

		strscpy(why, sizeof(why), gpuctl_errmsg(ctx));
		return ctx_error(ctx, r, "%s: %s", what, why);
	}
	flags = calloc(snap->n_gpus ? snap->n_gpus : 1, sizeof(*flags));
	if (!flags)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		flags[idx[i]] = true;
	*ret_flags = TAKE_PTR(flags);
	return 0;
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

/* Writes the -ENOSPC line. */
static int no_space(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                    const struct gpuctl_select_request *req, const struct device *dev, size_t n_dev,
                    size_t kept)
{
	char msg[MSG_MAX];
	size_t len = 0;
	bool mig = req->mig_profile != NULL, any = false;

	msg_add(msg, sizeof(msg), &len, "need %u %s%s, %zu qualif%s", req->count,
	        mig ? "MIG device" : "GPU", req->count == 1 ? "" : "s", kept,
	        kept == 1 ? "ies" : "y");
	for (int r = R_LOST; r < R__COUNT; r++) {
		char label[64];
		bool first = true;

		for (size_t i = 0; i < n_dev; i++) {
			if (dev[i].reason != r)
				continue;
			if (first) {
				reason_label(req, (enum reason)r, label, sizeof(label));
				msg_add(msg, sizeof(msg), &len, "%s%s: ", any ? "; " : ": ", label);
				first = false;
				any = true;
			} else {
				msg_add(msg, sizeof(msg), &len, ",");
			}
			/* NVML's MIG index, as "<gpu>:<mig>" strings spell it */
			char name[48];
			gpuctl_device_label(snap, dev[i].gpu, dev[i].mig, name, sizeof(name));
			msg_add(msg, sizeof(msg), &len, "%s", name);
		}
	}
	return ctx_error(ctx, -ENOSPC, "%s", msg);
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

int select_run(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
               const struct gpuctl_select_request *user_req, const struct select_opts *opts,
               struct gpuctl_selection **ret_sel)
{
	struct gpuctl_select_request req = GPUCTL_SELECT_REQUEST_INIT;
	_cleanup_(gpuctl_selection_freep) struct gpuctl_selection *sel = NULL;
	_cleanup_free_ bool *only = NULL, *excluded = NULL;
	_cleanup_free_ struct device *dev = NULL;
	_cleanup_free_ int *socket = NULL;
	struct engine e = {0};
	struct keep keep = {0};
	size_t n_dev = 0, cap = 0, kept = 0;
	int r;

	if (!snap || !user_req || !ret_sel ||
	    user_req->struct_size <
	            offsetof(struct gpuctl_select_request, count) + sizeof(unsigned))
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	memcpy(&req, user_req,
	       user_req->struct_size < sizeof(req) ? user_req->struct_size : sizeof(req));
	req.struct_size = sizeof(req);
	/* leased and foreign came later: a caller built against an older header does not know
	 * them (memcpy may have copied part of a pointer) */
	if (offsetof(struct gpuctl_select_request, leased) + sizeof(void *) > user_req->struct_size)
		req.leased = NULL;
	if (offsetof(struct gpuctl_select_request, foreign) + sizeof(void *) >
	    user_req->struct_size)
		req.foreign = NULL;
	if (offsetof(struct gpuctl_select_request, pool_name) + sizeof(void *) >
	    user_req->struct_size) {
		req.pool = NULL;
		req.pool_name = NULL;
	}
	if (offsetof(struct gpuctl_select_request, warned) + sizeof(void *) >
	    user_req->struct_size) {
		req.unhealthy = NULL;
		req.warned = NULL;
	}

	if (req.mig_profile) {
		struct mig_profile mp;
		const char *why = NULL;

		if (mig_profile_parse(req.mig_profile, &mp, &why) < 0)
			return ctx_error(ctx, -EINVAL,
			                 "--mig '%.64s': not a MIG profile: %s (a name such as "
			                 "'1g.10gb', '1c.3g.20gb', '1g.24gb+me.all', '1g.24gb-me')",
			                 req.mig_profile, why ? why : "malformed");
	}
	r = resolve_ids(ctx, snap, req.only, "--only", &only);
	if (r < 0)
		return r;
	r = resolve_ids(ctx, snap, req.exclude, "--exclude", &excluded);
	if (r < 0)
		return r;

	sel = calloc(1, sizeof(*sel));
	if (!sel)
		return ctx_error(ctx, -ENOMEM, "out of memory");

	/* the devices under consideration */
	for (size_t g = 0; g < snap->n_gpus; g++)
		cap += req.mig_profile ? snap->gpus[g].n_migs : 1;
	dev = calloc(cap ? cap : 1, sizeof(*dev));
	socket = calloc(snap->n_gpus ? snap->n_gpus : 1, sizeof(*socket));
	if (!dev || !socket)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	for (size_t g = 0; g < snap->n_gpus; g++) {
		if (!req.mig_profile) {
			dev[n_dev++] = (struct device){.gpu = g, .mig = -1};
			continue;
		}
		for (size_t i = 0; i < snap->gpus[g].n_migs; i++) {
			const char *p = snap->gpus[g].migs[i].profile;

			if (p && mig_profile_matches(req.mig_profile, p))
				dev[n_dev++] = (struct device){.gpu = g, .mig = (int)i};
		}
	}
	if (req.mig_profile && n_dev == 0 && req.count > 0)
		return ctx_error(ctx, -ENOSPC,
		                 "--mig '%.64s': no MIG device of that profile on "
		                 "this machine",
		                 req.mig_profile);
	for (size_t i = 0; i < n_dev; i++) {
		dev[i].reason = (int)filter_one(snap, &req, only, excluded,
		                                opts && opts->avoid_warned, &dev[i]);
		kept += dev[i].reason == R_KEPT;
	}
	if (kept < req.count)
		return no_space(ctx, snap, &req, dev, n_dev, kept);

	if (req.count == 0) {
		r = devset_of(&e, NULL, &sel->best);
		if (r < 0)
			return ctx_error(ctx, r, "out of memory");
		*ret_sel = TAKE_PTR(sel);
		return 0;
	}

	/* the engine */
	r = sockets_of(snap, socket);
	if (r < 0)
		return ctx_error(ctx, r, "out of memory");
	e.snap = snap;
	e.mig = req.mig_profile != NULL;
	e.n = req.count;
	e.c = calloc(kept, sizeof(*e.c));
	e.bw = calloc(kept * kept, sizeof(*e.bw));
	e.ham = calloc((size_t)1 << (RING_EXACT_MAX - 1), sizeof(*e.ham));
	e.parents = calloc(kept, sizeof(*e.parents));
	keep.best.idx = calloc(e.n, sizeof(size_t));
	keep.second.idx = calloc(e.n, sizeof(size_t));
	if (!e.c || !e.bw || !e.ham || !e.parents || !keep.best.idx || !keep.second.idx) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n_dev; i++) {
		const struct gpuctl_gpu *g = &snap->gpus[dev[i].gpu];
		struct cand *c;
		int64_t v;

		if (dev[i].reason != R_KEPT)
			continue;
		c = &e.c[e.m++];
		c->gpu = dev[i].gpu;
		c->mig = dev[i].mig;
		c->numa =
		        gpu_int(g, GPUCTL_F_NUMA_NODE, &v) && v >= 0 && v < INT32_MAX ? (int)v : -1;
		c->socket = socket[dev[i].gpu];
		c->load = load_of(g, dev[i].mig);
		if (e.n_parents == 0 || e.parents[e.n_parents - 1] != c->gpu)
			e.parents[e.n_parents++] = c->gpu;
	}
	if (!e.mig && snap->links)
		for (size_t a = 0; a < e.m; a++)
			for (size_t b = 0; b < e.m; b++)
				e.bw[a * e.m + b] =
				        a == b ? 0.0
				               : snap->links[e.c[a].gpu * snap->n_gpus + e.c[b].gpu]
				                         .bandwidth;

	if (select_is_exact(e.m, e.n, opts))
		r = search_exact(&e, &keep);
	else
		r = search_heuristic(&e, &keep);
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
	*ret_sel = TAKE_PTR(sel);
	r = 0;
out:
	free(keep.best.idx);
	free(keep.second.idx);
	engine_done(&e);
	if (r < 0)
		return ctx_error(ctx, r, "selection: %s", strerror(-r));
	return 0;
}

int gpuctl_select(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                  const struct gpuctl_select_request *req, struct gpuctl_selection **ret_sel)
{
	/* WARN devices only when needed: first without them, then (if that found too few) with */
	if (req &&
	    req->struct_size >= offsetof(struct gpuctl_select_request, warned) + sizeof(void *) &&
	    req->warned && gpuctl_devset_count(req->warned) > 0) {
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
