// SPDX-License-Identifier: MIT
/*
 * stream-bench.c: gpuctl's selection against restated anchors on streams of real work.
 *
 * Run under `nvsim exec SCENARIO -- stream-bench SCENARIO [SEEDS JOBS LONG_SEEDS LONG_JOBS]`
 * (bench.py does it for every scenario of 8 to 16 GPUs), so the snapshot is the scenario's
 * machine with its CPU. Prints one Markdown table row: per policy the mean over SEEDS streams
 * of JOBS jobs (± standard deviation, minimum), then the mean over LONG_SEEDS streams of
 * LONG_JOBS jobs.
 *
 * `stream-bench --by-size SCENARIO SEEDS JOBS` prints, per policy, the mean score and the
 * share of jobs at the best ring for each multi-GPU job size (bench/RESULTS.md, "Job streams
 * by size"): which shapes a policy loses on.
 *
 * `stream-bench --anchors SCENARIO` checks the restated anchors against the outputs the
 * reference traced by hand from their published rules (shared/reference/topology.md 1.8 and
 * 2.3, all GPUs free) and exits 1 on a difference (ctest bench/anchors).
 *
 * The stream (one per seed, the same for every policy): jobs of sizes drawn from
 * {1, 1, 1, 2, 2, 4}, durations uniform in 1..20, arrivals with exponential gaps of mean
 * 3 x 8 / GPUs (about 80 % of the machine busy), served in strict arrival order (a job starts
 * when every earlier job has started and enough GPUs are free). When and how many GPUs a job
 * gets is the same for every policy; only which GPUs differs. A multi-GPU job scores its set's
 * ring bandwidth (the best Hamiltonian ring's slowest link, brute force: select-oracle.c) over
 * the best ring any set of its size has on the empty machine; a seed scores the mean over its
 * multi-GPU jobs. The bandwidths are gpuctl's model (docs/topology.md) for every policy.
 *
 * Policies (restated from shared/reference/topology.md, section numbers there):
 * - gpuctl: gpuctl_select() through the library, busy GPUs passed as `leased`.
 * - lowest: the lowest free indices (go-gpuallocator's simple policy, 1.5).
 * - best-effort: go-gpuallocator's best-effort policy (1.3, 1.4): pair score = 100 per direct
 *   NVLink (NVSwitch links are invisible to it) + the PCIe level's points; every partition of
 *   the free GPUs (padded to a multiple of the size) into groups of the size, the highest
 *   partition sum (first found wins ties), then its best pad-free group (first wins). A
 *   partition without a pad-free group is skipped (the published code can return a padded
 *   group and panic, go-gpuallocator PR #80; we restate the intent).
 * - dcgm: dcgmSelectGpusByTopology (2.2): groups of identical CPU affinity; one candidate group
 *   of exactly the size is returned; none large enough: fill from the largest groups; else per
 *   candidate group walk its pairs by NVLink count, highest first, adding both GPUs of each pair
 *   (score = the count per GPU added), best group wins (first on ties). DCGM may return fewer
 *   GPUs than asked when no pair has NVLink; a stream job needs its count, so the group's
 *   remaining GPUs are added in index order (the most favourable completion we could think of).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpuctl/gpuctl.h"
#include "unit/select-oracle.h"

#define MAXG 16

enum policy { P_GPUCTL, P_LOWEST, P_BESTEFFORT, P_DCGM, P__COUNT };
static const char *const policy_names[P__COUNT] = {
        "gpuctl", "lowest index", "go-gpuallocator best-effort", "DCGM SelectGpusByTopology"};

struct machine {
	const struct gpuctl_snapshot *snap;
	size_t n;
	struct oracle_in in;      /* every GPU, for rings */
	double opt[MAXG + 1];     /* best ring of any k-set on the empty machine */
	int be_score[MAXG][MAXG]; /* go-gpuallocator pair score */
	int nvlinks[MAXG][MAXG];  /* DCGM's pair count */
	char affinity[MAXG][256]; /* CPU affinity as NVML gives it */
};

static uint64_t rng_state;

static uint64_t rng(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * UINT64_C(2685821657736338717);
}

static double rng_unit(void)
{
	return (double)(rng() >> 11) / 9007199254740992.0;
}

static int level_points(int level)
{
	switch (level) {
	case GPUCTL_TOPO_INTERNAL:
		return 60;
	case GPUCTL_TOPO_SINGLE:
		return 50;
	case GPUCTL_TOPO_MULTIPLE:
		return 40;
	case GPUCTL_TOPO_HOSTBRIDGE:
		return 30;
	case GPUCTL_TOPO_NODE:
		return 20;
	case GPUCTL_TOPO_SYSTEM:
		return 10;
	default:
		return 0;
	}
}

static int machine_init(struct machine *m, const struct gpuctl_snapshot *snap)
{
	struct oracle_out out;

	memset(m, 0, sizeof(*m));
	m->snap = snap;
	m->n = gpuctl_snapshot_gpu_count(snap);
	if (m->n > MAXG || oracle_prepare(snap, NULL, &m->in) < 0 || m->in.m != m->n)
		return -EINVAL;
	for (size_t a = 0; a < m->n; a++) {
		const char *aff =
		        gpuctl_gpu_str(gpuctl_snapshot_gpu(snap, a), GPUCTL_F_CPU_AFFINITY);

		if (m->in.gpu[a] != a)
			return -EINVAL;
		snprintf(m->affinity[a], sizeof(m->affinity[a]), "%s", aff ? aff : "");
		for (size_t b = 0; b < m->n; b++) {
			struct gpuctl_link l = GPUCTL_LINK_INIT;

			if (a == b || gpuctl_snapshot_link(snap, a, b, &l) < 0)
				continue;
			m->be_score[a][b] =
			        level_points(l.level) + (l.nvswitch ? 0 : 100 * l.nvlinks);
			m->nvlinks[a][b] = l.nvlinks;
		}
	}
	for (size_t k = 2; k <= m->n; k++) {
		oracle_best(&m->in, k, &out);
		m->opt[k] = out.best_s.ring_bandwidth;
	}
	return 0;
}

/* ---- policies: choose k of the free GPUs (free[] ascending, f of them) into out[] ---- */

static int pick_gpuctl(const struct machine *m, const bool *busy, size_t k, size_t *out)
{
	struct gpuctl_select_request req = GPUCTL_SELECT_REQUEST_INIT;
	struct gpuctl_devset *leased = NULL;
	struct gpuctl_selection *sel = NULL;
	struct gpuctl_ctx *ctx = NULL;
	int r;

	if ((r = gpuctl_ctx_new(&ctx)) < 0 || (r = gpuctl_devset_new(&leased)) < 0)
		goto out;
	for (size_t g = 0; g < m->n; g++)
		if (busy[g] && (r = gpuctl_devset_add(leased, g, -1)) < 0)
			goto out;
	req.count = (unsigned)k;
	req.leased = leased;
	if ((r = gpuctl_select(ctx, m->snap, &req, &sel)) < 0) {
		fprintf(stderr, "stream-bench: select: %s\n", gpuctl_errmsg(ctx));
		goto out;
	}
	for (size_t i = 0; i < k; i++) {
		int mig;

		if ((r = gpuctl_devset_get(gpuctl_selection_devices(sel), i, &out[i], &mig)) < 0)
			goto out;
	}
out:
	gpuctl_selection_free(sel);
	gpuctl_devset_free(leased);
	gpuctl_ctx_free(ctx);
	return r;
}

/* go-gpuallocator: the partition search. */
struct be {
	const struct machine *m;
	size_t k, slots;    /* group size; free GPUs plus pads */
	int item[MAXG + 4]; /* GPU per slot, -1 for a pad */
	bool used[MAXG + 4];
	long best_total;         /* best partition score so far (-1: none) */
	size_t best_group[MAXG]; /* its best pad-free group */
	size_t cur[MAXG + 4];    /* slots of the groups being built */
	size_t n_cur;
};

static long group_score(const struct be *b, const size_t *slots, bool *has_pad)
{
	long s = 0;

	*has_pad = false;
	for (size_t i = 0; i < b->k; i++) {
		int x = b->item[slots[i]];

		if (x < 0) {
			*has_pad = true;
			continue;
		}
		for (size_t j = i + 1; j < b->k; j++) {
			int y = b->item[slots[j]];

			if (y >= 0)
				s += b->m->be_score[x][y] + b->m->be_score[y][x];
		}
	}
	return s;
}

/* Groups are appended to cur[] k slots at a time; total is the partition's score so far,
 * best_g/best_gs its best pad-free group (first found wins ties). */
static void be_rec(struct be *b, long total, long best_gs, size_t best_g_at)
{
	size_t first = 0;

	while (first < b->slots && b->used[first])
		first++;
	if (first == b->slots) {
		if (best_gs >= 0 && total > b->best_total) {
			b->best_total = total;
			for (size_t i = 0; i < b->k; i++)
				b->best_group[i] = (size_t)b->item[b->cur[best_g_at + i]];
		}
		return;
	}
	/* the group of `first` and k-1 later unused slots, in combination order */
	size_t pick[MAXG + 4], np = 0, at = b->n_cur;

	for (size_t s = first + 1; s < b->slots; s++)
		if (!b->used[s])
			pick[np++] = s;
	size_t c[MAXG];

	for (size_t i = 0; i + 1 < b->k; i++)
		c[i] = i;
	for (;;) {
		bool pad;
		long gs;

		b->cur[at] = first;
		b->used[first] = true;
		for (size_t i = 0; i + 1 < b->k; i++) {
			b->cur[at + 1 + i] = pick[c[i]];
			b->used[pick[c[i]]] = true;
		}
		b->n_cur = at + b->k;
		gs = group_score(b, &b->cur[at], &pad);
		if (!pad && gs > best_gs)
			be_rec(b, total + gs, gs, at);
		else
			be_rec(b, total + gs, best_gs, best_g_at);
		b->used[first] = false;
		for (size_t i = 0; i + 1 < b->k; i++)
			b->used[pick[c[i]]] = false;
		b->n_cur = at;
		/* next combination of k-1 out of np */
		size_t i = b->k - 1;

		while (i > 0 && c[i - 1] == np - (b->k - 1) + i - 1)
			i--;
		if (i == 0)
			return;
		c[i - 1]++;
		for (size_t j = i; j + 1 < b->k; j++)
			c[j] = c[j - 1] + 1;
	}
}

static int cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return x < y ? -1 : x > y;
}

static void pick_besteffort(const struct machine *m, const size_t *free_g, size_t f, size_t k,
                            size_t *out)
{
	struct be b = {.m = m, .k = k, .best_total = -1};

	if (k == 1 || k == f) {
		memcpy(out, free_g, k * sizeof(*out));
		return;
	}
	b.slots = (f + k - 1) / k * k;
	for (size_t i = 0; i < b.slots; i++)
		b.item[i] = i < f ? (int)free_g[i] : -1;
	be_rec(&b, 0, -1, 0);
	memcpy(out, b.best_group, k * sizeof(*out));
	qsort(out, k, sizeof(*out), cmp_size);
}

/* DCGM: affinity groups, then the NVLink pair walk. */
static void pick_dcgm(const struct machine *m, const size_t *free_g, size_t f, size_t k,
                      size_t *out)
{
	size_t group[MAXG][MAXG], gsize[MAXG] = {0}, ng = 0, cand = 0, only = 0;

	if (f <= k) {
		memcpy(out, free_g, k * sizeof(*out));
		return;
	}
	for (size_t i = 0; i < f; i++) {
		size_t g = 0;

		while (g < ng && strcmp(m->affinity[group[g][0]], m->affinity[free_g[i]]) != 0)
			g++;
		if (g == ng)
			ng++;
		group[g][gsize[g]++] = free_g[i];
	}
	for (size_t g = 0; g < ng; g++)
		if (gsize[g] >= k) {
			cand++;
			only = g;
		}
	if (cand == 1 && gsize[only] == k) {
		memcpy(out, group[only], k * sizeof(*out));
		return;
	}
	if (cand == 0) {
		/* largest groups first (stable), the first big enough for the rest takes it */
		bool taken[MAXG] = {false};
		size_t have = 0;

		while (have < k) {
			size_t best = ng;

			for (size_t g = 0; g < ng; g++)
				if (!taken[g] && (best == ng || gsize[g] > gsize[best]))
					best = g;
			for (size_t i = 0; i < gsize[best] && have < k; i++)
				out[have++] = group[best][i];
			taken[best] = true;
		}
		qsort(out, k, sizeof(*out), cmp_size);
		return;
	}
	long best_score = -1;

	for (size_t g = 0; g < ng; g++) {
		size_t sel[MAXG], ns = 0;
		long score = 0;

		if (gsize[g] < k)
			continue;
		/* buckets from the highest count down; pairs in index order inside a bucket */
		for (int c = 64; c >= 1 && ns < k; c--)
			for (size_t i = 0; i < gsize[g] && ns < k; i++)
				for (size_t j = i + 1; j < gsize[g] && ns < k; j++) {
					size_t a = group[g][i], b = group[g][j];

					if (m->nvlinks[a][b] != c)
						continue;
					for (int e = 0; e < 2 && ns < k; e++) {
						size_t x = e ? b : a;
						bool in = false;

						for (size_t q = 0; q < ns; q++)
							in |= sel[q] == x;
						if (!in) {
							sel[ns++] = x;
							score += c;
						}
					}
				}
		for (size_t i = 0; i < gsize[g] && ns < k; i++) {
			bool in = false;

			for (size_t q = 0; q < ns; q++)
				in |= sel[q] == group[g][i];
			if (!in)
				sel[ns++] = group[g][i];
		}
		if (score > best_score) {
			best_score = score;
			memcpy(out, sel, k * sizeof(*out));
		}
	}
	qsort(out, k, sizeof(*out), cmp_size);
}

/* ---- the stream ---- */

struct job {
	size_t size;
	double arrive, duration;
};

/* Per job size: jobs scored, their score sum, and how many reached the empty machine's best
 * ring (--by-size). */
struct by_size {
	size_t n[MAXG + 1], at_opt[MAXG + 1];
	double sum[MAXG + 1];
};

/* Mean score of one stream's multi-GPU jobs under policy p; each job added to *bs when not
 * NULL. */
static int run_stream(const struct machine *m, const struct job *jobs, size_t n_jobs, enum policy p,
                      struct by_size *bs, double *ret_mean)
{
	double end[MAXG], now = 0.0, sum = 0.0;
	bool busy[MAXG] = {false};
	size_t scored = 0;

	for (size_t j = 0; j < n_jobs; j++) {
		size_t free_g[MAXG], f = 0, set[MAXG];

		if (jobs[j].arrive > now)
			now = jobs[j].arrive;
		for (;;) {
			double next = INFINITY;

			f = 0;
			for (size_t g = 0; g < m->n; g++) {
				if (busy[g] && end[g] <= now)
					busy[g] = false;
				if (!busy[g])
					free_g[f++] = g;
				else if (end[g] < next)
					next = end[g];
			}
			if (f >= jobs[j].size)
				break;
			now = next; /* strict FCFS: wait for the next completion */
		}
		switch (p) {
		case P_GPUCTL: {
			int r = pick_gpuctl(m, busy, jobs[j].size, set);

			if (r < 0)
				return r;
			break;
		}
		case P_LOWEST:
			memcpy(set, free_g, jobs[j].size * sizeof(*set));
			break;
		case P_BESTEFFORT:
			pick_besteffort(m, free_g, f, jobs[j].size, set);
			break;
		default:
			pick_dcgm(m, free_g, f, jobs[j].size, set);
			break;
		}
		for (size_t i = 0; i < jobs[j].size; i++) {
			if (busy[set[i]]) {
				fprintf(stderr, "stream-bench: %s chose a busy GPU\n",
				        policy_names[p]);
				return -EINVAL;
			}
			busy[set[i]] = true;
			end[set[i]] = now + jobs[j].duration;
		}
		if (jobs[j].size >= 2) {
			size_t k = jobs[j].size;
			double v = oracle_ring_of(&m->in, set, k) / m->opt[k];

			sum += v;
			scored++;
			if (bs) {
				bs->n[k]++;
				bs->sum[k] += v;
				bs->at_opt[k] += v >= 1 - 1e-9;
			}
		}
	}
	*ret_mean = scored ? sum / (double)scored : 1.0;
	return 0;
}

static void make_stream(uint64_t seed, size_t n_gpus, struct job *jobs, size_t n_jobs)
{
	static const size_t sizes[] = {1, 1, 1, 2, 2, 4};
	double t = 0.0, gap = 3.0 * 8.0 / (double)n_gpus;

	rng_state = seed * UINT64_C(0x9E3779B97F4A7C15) + 1;
	for (size_t j = 0; j < n_jobs; j++) {
		t += -log(1.0 - rng_unit()) * gap;
		jobs[j].arrive = t;
		jobs[j].size = sizes[rng() % 6];
		if (jobs[j].size > n_gpus)
			jobs[j].size = n_gpus;
		jobs[j].duration = 1.0 + (double)(rng() % 20);
	}
}

struct stats {
	double mean, sd, min;
};

static int policy_stats(const struct machine *m, enum policy p, size_t seeds, size_t n_jobs,
                        uint64_t seed0, struct stats *ret)
{
	struct job *jobs = calloc(n_jobs, sizeof(*jobs));
	double sum = 0.0, sq = 0.0, min = INFINITY;

	if (!jobs)
		return -ENOMEM;
	for (size_t s = 0; s < seeds; s++) {
		double v;
		int r;

		make_stream(seed0 + s, m->n, jobs, n_jobs);
		if ((r = run_stream(m, jobs, n_jobs, p, NULL, &v)) < 0) {
			free(jobs);
			return r;
		}
		sum += v;
		sq += v * v;
		if (v < min)
			min = v;
	}
	free(jobs);
	ret->mean = sum / (double)seeds;
	ret->sd = seeds > 1
	                  ? sqrt(fmax(0.0, (sq - sum * sum / (double)seeds) / (double)(seeds - 1)))
	                  : 0.0;
	ret->min = min;
	return 0;
}

/* gpuctl's choice on the empty machine reaches the optimum ring for every size 2..n. */
static bool empty_optimal(const struct machine *m)
{
	bool busy[MAXG] = {false};

	for (size_t k = 2; k <= m->n; k++) {
		size_t set[MAXG];

		if (pick_gpuctl(m, busy, k, set) < 0 ||
		    oracle_ring_of(&m->in, set, k) < m->opt[k] * (1 - 1e-9))
			return false;
	}
	return true;
}

/* The reference's hand traces: scenario, policy, request size, expected set (ascending). */
static const struct {
	const char *scenario;
	enum policy p;
	size_t k;
	size_t want[8];
} traces[] = {
        /* 1.8: go-gpuallocator best-effort on DGX-1V */
        {"dgx1-v100", P_BESTEFFORT, 2, {0, 3}},
        {"dgx1-v100", P_BESTEFFORT, 3, {0, 2, 3}},
        {"dgx1-v100", P_BESTEFFORT, 4, {0, 1, 2, 3}},
        /* 2.3: DCGM on DGX-1V, an 8-GPU NVSwitch machine of two sockets */
        {"dgx1-v100", P_DCGM, 2, {0, 3}},
        {"dgx1-v100", P_DCGM, 3, {0, 1, 3}},
        {"dgx1-v100", P_DCGM, 4, {0, 1, 2, 3}},
        {"dgx1-v100", P_DCGM, 5, {0, 1, 2, 3, 4}},
        {"hgx-h100", P_DCGM, 2, {0, 1}},
        {"hgx-h100", P_DCGM, 3, {0, 1, 2}},
        {"hgx-h100", P_DCGM, 4, {0, 1, 2, 3}},
        {"hgx-h100", P_DCGM, 5, {0, 1, 2, 3, 4}},
        /* 2.3, PCIe only: DCGM adds no GPU for k <= 4 (no NVLink pair); our completion in
         * index order gives the group's first k; k = 5 fills from the largest groups */
        {"pcie-8gpu", P_DCGM, 2, {0, 1}},
        {"pcie-8gpu", P_DCGM, 5, {0, 1, 2, 3, 4}},
};

static int check_anchors(const struct machine *m, const char *name)
{
	size_t free_g[MAXG], set[MAXG], checked = 0;
	int bad = 0;

	for (size_t g = 0; g < m->n; g++)
		free_g[g] = g;
	for (size_t t = 0; t < sizeof(traces) / sizeof(traces[0]); t++) {
		if (strcmp(traces[t].scenario, name) != 0)
			continue;
		if (traces[t].p == P_BESTEFFORT)
			pick_besteffort(m, free_g, m->n, traces[t].k, set);
		else
			pick_dcgm(m, free_g, m->n, traces[t].k, set);
		checked++;
		if (memcmp(set, traces[t].want, traces[t].k * sizeof(*set)) != 0) {
			fprintf(stderr, "stream-bench: %s k=%zu on %s: got",
			        policy_names[traces[t].p], traces[t].k, name);
			for (size_t i = 0; i < traces[t].k; i++)
				fprintf(stderr, " %zu", set[i]);
			fprintf(stderr, ", the reference traces");
			for (size_t i = 0; i < traces[t].k; i++)
				fprintf(stderr, " %zu", traces[t].want[i]);
			fputc('\n', stderr);
			bad = 1;
		}
	}
	printf("%s: %zu anchor outputs checked, %s\n", name, checked, bad ? "DIFFERENT" : "equal");
	return checked == 0 || bad;
}

/* --by-size: per policy and multi-GPU job size, the mean score and the share of jobs at the
 * empty machine's best ring, over SEEDS streams of JOBS jobs (seeds from 1, as the table). */
static int by_size(const struct machine *m, const char *name, size_t seeds, size_t n_jobs)
{
	struct job *jobs = calloc(n_jobs, sizeof(*jobs));

	if (!jobs)
		return 1;
	printf("%s, %zu seeds x %zu jobs: per size, mean score (jobs, share at the best ring)\n",
	       name, seeds, n_jobs);
	for (int p = 0; p < P__COUNT; p++) {
		struct by_size bs = {{0}, {0}, {0}};
		double v;

		for (size_t s = 0; s < seeds; s++) {
			make_stream(1 + s, m->n, jobs, n_jobs);
			if (run_stream(m, jobs, n_jobs, (enum policy)p, &bs, &v) < 0) {
				free(jobs);
				return 1;
			}
		}
		printf("  %-28s", policy_names[p]);
		for (size_t k = 2; k <= m->n; k++)
			if (bs.n[k])
				printf("  k=%zu %.4f (%zu, %.1f %%)", k,
				       bs.sum[k] / (double)bs.n[k], bs.n[k],
				       100.0 * (double)bs.at_opt[k] / (double)bs.n[k]);
		putchar('\n');
	}
	free(jobs);
	return 0;
}

static int parse_size(const char *s, size_t *ret)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (*end || end == s || v == 0 || v > 100000) {
		fprintf(stderr, "stream-bench: '%s': expected a count 1..100000\n", s);
		return -EINVAL;
	}
	*ret = v;
	return 0;
}

int main(int argc, char **argv)
{
	size_t seeds = 32, jobs = 80, long_seeds = 3, long_jobs = 1000;
	struct gpuctl_snapshot *snap = NULL;
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_cpu cpu = GPUCTL_CPU_INIT;
	static struct machine m;
	const char *name = argc > 1 ? argv[1] : NULL;
	bool anchors = argc == 3 && strcmp(argv[1], "--anchors") == 0;
	bool sizes = argc == 5 && strcmp(argv[1], "--by-size") == 0;

	if (anchors)
		name = argv[2];
	else if (sizes) {
		name = argv[2];
		if (parse_size(argv[3], &seeds) < 0 || parse_size(argv[4], &jobs) < 0)
			return 2;
	} else if (!name || (argc != 2 && (argc != 6 || parse_size(argv[2], &seeds) < 0 ||
	                                   parse_size(argv[3], &jobs) < 0 ||
	                                   parse_size(argv[4], &long_seeds) < 0 ||
	                                   parse_size(argv[5], &long_jobs) < 0))) {
		fprintf(stderr,
		        "usage: nvsim exec SCENARIO -- stream-bench SCENARIO [SEEDS JOBS "
		        "LONG_SEEDS LONG_JOBS]\n"
		        "       nvsim exec SCENARIO -- stream-bench --anchors SCENARIO\n"
		        "       nvsim exec SCENARIO -- stream-bench --by-size SCENARIO SEEDS "
		        "JOBS\n");
		return 2;
	}
	if (gpuctl_ctx_new(&ctx) < 0 || gpuctl_snapshot_take(ctx, GPUCTL_SNAP_ALL, &snap) < 0) {
		fprintf(stderr, "stream-bench: %s\n", ctx ? gpuctl_errmsg(ctx) : "out of memory");
		return 1;
	}
	if (machine_init(&m, snap) < 0) {
		fprintf(stderr, "stream-bench: needs 2..%d healthy GPUs\n", MAXG);
		return 1;
	}
	if (anchors || sizes) {
		int rc = anchors ? check_anchors(&m, name) : by_size(&m, name, seeds, jobs);

		gpuctl_snapshot_free(snap);
		gpuctl_ctx_free(ctx);
		return rc;
	}
	(void)gpuctl_snapshot_cpu(snap, &cpu);
	printf("| %s | %zu | %s | %s |", name, m.n, cpu.cpu_class,
	       empty_optimal(&m) ? "yes" : "**no**");
	for (int p = 0; p < P__COUNT; p++) {
		struct stats s, l;

		if (policy_stats(&m, (enum policy)p, seeds, jobs, 1, &s) < 0 ||
		    policy_stats(&m, (enum policy)p, long_seeds, long_jobs, 1001, &l) < 0)
			return 1;
		printf(" %.3f ± %.3f (min %.3f); %.3f |", s.mean, s.sd, s.min, l.mean);
	}
	putchar('\n');
	gpuctl_snapshot_free(snap);
	gpuctl_ctx_free(ctx);
	return 0;
}
