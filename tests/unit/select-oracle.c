// SPDX-License-Identifier: MIT
/*
 * select-oracle.c: the brute-force oracle of the selection objective (see select-oracle.h).
 *
 * Decisions:
 * - Every n-subset is scored; the ring is the best over every cyclic order (first vertex fixed,
 *   a partial path abandoned once its bottleneck cannot beat the best found: this prunes only
 *   orders that cannot change the maximum); the leftover is the best over every matching of the
 *   free GPUs left, the release value the best over every matching of the set (plain
 *   recursion, cached per GPU mask), both computed only for sets whose ring, NUMA nodes and
 *   sockets tie with the runner-up or beat it. Order: ring, NUMA nodes, sockets, leftover,
 *   whole NUMA nodes taken, release, total, load, index list (docs/selection.md).
 * - Sockets by flood fill over "same known NUMA node or known PCIe level below SYS".
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "select-oracle.h"

#define TOL 1e-6

static int cmpd(double a, double b)
{
	double t = TOL * fmax(fabs(a), fabs(b)) + 1e-12;

	return a > b + t ? 1 : b > a + t ? -1 : 0;
}

int oracle_prepare(const struct gpuctl_snapshot *snap, const bool *busy, struct oracle_in *in)
{
	size_t n = gpuctl_snapshot_gpu_count(snap);
	int comp[256];
	int64_t v;

	memset(in, 0, sizeof(*in));
	if (n > 256)
		return -E2BIG;
	for (size_t i = 0; i < n; i++)
		comp[i] = -1;
	for (size_t i = 0; i < n; i++) {
		size_t stack[256], sp = 0;

		if (comp[i] >= 0)
			continue;
		comp[i] = (int)i;
		stack[sp++] = i;
		while (sp) {
			size_t a = stack[--sp];
			int64_t na = -1, nb = -1;
			bool ka = gpuctl_gpu_int(gpuctl_snapshot_gpu(snap, a), GPUCTL_F_NUMA_NODE,
			                         &na) == 0;

			for (size_t b = 0; b < n; b++) {
				struct gpuctl_link l = GPUCTL_LINK_INIT;
				bool kb, join = false;

				if (b == a || comp[b] >= 0)
					continue;
				kb = gpuctl_gpu_int(gpuctl_snapshot_gpu(snap, b),
				                    GPUCTL_F_NUMA_NODE, &nb) == 0;
				if (ka && kb && na == nb)
					join = true;
				if (gpuctl_snapshot_link(snap, a, b, &l) == 0 && l.level >= 0 &&
				    l.level < GPUCTL_TOPO_SYSTEM)
					join = true;
				if (join) {
					comp[b] = (int)i;
					stack[sp++] = b;
				}
			}
		}
	}
	for (size_t i = 0; i < n; i++) {
		const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, i);
		int64_t t;
		size_t k;

		if (busy && busy[i])
			continue;
		if (gpuctl_gpu_lost(g))
			continue;
		if (gpuctl_gpu_int(g, GPUCTL_F_ECC_VOL_UNCORRECTED, &v) == 0 && v > 0)
			continue;
		if (gpuctl_gpu_int(g, GPUCTL_F_REMAP_FAILURE, &v) == 0 && v > 0)
			continue;
		if (gpuctl_gpu_int(g, GPUCTL_F_MIG_MODE, &v) == 0 && v > 0)
			continue;
		if (in->m == ORACLE_MAX)
			return -E2BIG;
		k = in->m++;
		in->gpu[k] = i;
		in->numa[k] = gpuctl_gpu_int(g, GPUCTL_F_NUMA_NODE, &v) == 0 ? (int)v : -1;
		in->socket[k] = comp[i];
		in->load[k] = 0.0;
		if (gpuctl_gpu_int(g, GPUCTL_F_UTIL_GPU, &v) == 0)
			in->load[k] += (double)v / 100.0;
		if (gpuctl_gpu_int(g, GPUCTL_F_MEMORY_USED, &v) == 0 &&
		    gpuctl_gpu_int(g, GPUCTL_F_MEMORY_TOTAL, &t) == 0 && t > 0)
			in->load[k] += (double)v / (double)t;
	}
	for (size_t k = 0; k < in->m; k++) {
		size_t on_node = 0, cands = 0;

		for (size_t i = 0; i < n; i++)
			on_node += in->numa[k] >= 0 &&
			           gpuctl_gpu_int(gpuctl_snapshot_gpu(snap, i), GPUCTL_F_NUMA_NODE,
			                          &v) == 0 &&
			           v == in->numa[k];
		for (size_t j = 0; j < in->m; j++)
			cands += in->numa[j] == in->numa[k];
		in->whole[k] = in->numa[k] >= 0 && cands == on_node;
	}
	for (size_t a = 0; a < in->m; a++)
		for (size_t b = 0; b < in->m; b++) {
			struct gpuctl_link l = GPUCTL_LINK_INIT;

			in->bw[a][b] = 0.0;
			if (a != b && gpuctl_snapshot_link(snap, in->gpu[a], in->gpu[b], &l) == 0)
				in->bw[a][b] = l.bandwidth;
		}
	return 0;
}

/* Extends a ring path; best holds the best closed ring so far. */
static void ring_rec(const struct oracle_in *in, const size_t *set, size_t n, size_t *path,
                     bool *used, size_t depth, double cur, double *best)
{
	if (depth == n) {
		double c = fmin(cur, in->bw[set[path[n - 1]]][set[path[0]]]);

		if (c > *best)
			*best = c;
		return;
	}
	for (size_t u = 1; u < n; u++) {
		double c;

		if (used[u])
			continue;
		c = fmin(cur, in->bw[set[path[depth - 1]]][set[u]]);
		if (c <= *best)
			continue;
		used[u] = true;
		path[depth] = u;
		ring_rec(in, set, n, path, used, depth + 1, c, best);
		used[u] = false;
	}
}

double oracle_ring_of(const struct oracle_in *in, const size_t *set, size_t n)
{
	size_t path[ORACLE_MAX];
	bool used[ORACLE_MAX] = {false};
	double best = -1.0;

	if (n <= 1)
		return 0.0;
	path[0] = 0;
	used[0] = true;
	ring_rec(in, set, n, path, used, 1, INFINITY, &best);
	return best;
}

/* Best matching of the GPUs in mask: the lowest is left alone or paired with each other. */
static double match_rec(const struct oracle_in *in, uint32_t mask)
{
	unsigned low;
	uint32_t rest;
	double best;

	if (!mask)
		return 0.0;
	low = (unsigned)__builtin_ctz(mask);
	rest = mask & ~(1u << low);
	best = match_rec(in, rest);
	for (unsigned j = 0; j < in->m; j++)
		if (rest & (1u << j)) {
			double v = in->bw[low][j] + match_rec(in, rest & ~(1u << j));

			if (v > best)
				best = v;
		}
	return best;
}

static unsigned count_distinct(const int *v, const size_t *set, size_t n)
{
	unsigned d = 0;

	for (size_t i = 0; i < n; i++) {
		bool seen = false;

		for (size_t j = 0; j < i; j++)
			seen |= v[set[j]] == v[set[i]];
		d += !seen;
	}
	return d;
}

static int head_cmp(const struct gpuctl_select_score *a, const struct gpuctl_select_score *b)
{
	int r;

	if ((r = cmpd(a->ring_bandwidth, b->ring_bandwidth)))
		return -r;
	if (a->numa_nodes != b->numa_nodes)
		return a->numa_nodes < b->numa_nodes ? -1 : 1;
	if (a->sockets != b->sockets)
		return a->sockets < b->sockets ? -1 : 1;
	return 0;
}

/* Distinct whole NUMA nodes (all of whose GPUs are free) the set takes a GPU from. */
static unsigned whole_taken(const struct oracle_in *in, const size_t *set, size_t n)
{
	int node[ORACLE_MAX];
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		if (in->whole[set[i]])
			node[k++] = in->numa[set[i]];
	for (size_t i = 0; i < k; i++)
		for (size_t j = i + 1; j < k; j++)
			if (node[j] == node[i])
				node[j] = -1 - (int)j; /* counted once */
	unsigned d = 0;

	for (size_t i = 0; i < k; i++)
		d += node[i] >= 0;
	return d;
}

static int full_cmp(const struct oracle_in *in, const struct gpuctl_select_score *a,
                    const size_t *sa, const struct gpuctl_select_score *b, const size_t *sb,
                    size_t n)
{
	int r = head_cmp(a, b);

	if (r)
		return r;
	if ((r = cmpd(a->leftover, b->leftover)))
		return -r;
	if (a->whole_nodes_taken != b->whole_nodes_taken)
		return a->whole_nodes_taken < b->whole_nodes_taken ? -1 : 1;
	if ((r = cmpd(a->release, b->release)))
		return -r;
	if ((r = cmpd(a->total_bandwidth, b->total_bandwidth)))
		return -r;
	if ((r = cmpd(a->load, b->load)))
		return r;
	for (size_t i = 0; i < n; i++)
		if (in->gpu[sa[i]] != in->gpu[sb[i]])
			return in->gpu[sa[i]] < in->gpu[sb[i]] ? -1 : 1;
	return 0;
}

static double cache[1u << ORACLE_MAX];
static bool cached[1u << ORACLE_MAX];

void oracle_best(const struct oracle_in *in, size_t n, struct oracle_out *out)
{
	uint32_t all = in->m == 32 ? UINT32_MAX : (1u << in->m) - 1;
	bool have = false;

	memset(out, 0, sizeof(*out));
	memset(cached, 0, sizeof(bool) << in->m);
	/* every subset of size n, by bit mask in increasing order of the index list */
	for (uint32_t mask = 0; mask <= all; mask++) {
		size_t set[ORACLE_MAX], k = 0;
		struct gpuctl_select_score s = {0};
		uint32_t rem;

		if ((size_t)__builtin_popcount(mask) != n)
			goto next;
		for (size_t i = 0; i < in->m; i++)
			if (mask & (1u << i))
				set[k++] = i;
		s.ring_bandwidth = oracle_ring_of(in, set, n);
		for (size_t i = 0; i < n; i++)
			for (size_t j = i + 1; j < n; j++)
				s.total_bandwidth += in->bw[set[i]][set[j]];
		s.numa_nodes = count_distinct(in->numa, set, n);
		s.sockets = count_distinct(in->socket, set, n);
		if (out->has_second && head_cmp(&s, &out->second_s) > 0)
			goto next;
		rem = all & ~mask;
		if (!cached[rem]) {
			cache[rem] = match_rec(in, rem);
			cached[rem] = true;
		}
		s.leftover = cache[rem];
		if (!cached[mask]) {
			cache[mask] = match_rec(in, mask);
			cached[mask] = true;
		}
		s.release = cache[mask];
		s.whole_nodes_taken = whole_taken(in, set, n);
		for (size_t i = 0; i < n; i++)
			s.load += in->load[set[i]];
		if (!have || full_cmp(in, &s, set, &out->best_s, out->best, n) < 0) {
			if (have) {
				memcpy(out->second, out->best, sizeof(out->best));
				out->second_s = out->best_s;
				out->has_second = true;
			}
			memcpy(out->best, set, n * sizeof(*set));
			out->best_s = s;
			have = true;
		} else if (!out->has_second ||
		           full_cmp(in, &s, set, &out->second_s, out->second, n) < 0) {
			memcpy(out->second, set, n * sizeof(*set));
			out->second_s = s;
			out->has_second = true;
		}
	next:
		if (mask == all)
			break;
	}
}
