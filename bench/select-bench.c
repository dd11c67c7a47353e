// SPDX-License-Identifier: MIT
/*
 * select-bench.c: times the selection engine on every simulated scenario and reports quality.
 * Prints a Markdown table: scenario, GPUs, request size n, search mode, median time of
 * gpuctl_select() (all GPUs free), ring bandwidth chosen, and quality = chosen ring / optimum.
 * The optimum comes from the brute-force oracle (tests/unit/select-oracle.c) up to 16 GPUs and
 * from the engine's exact search, forced past its bound, where C(GPUs, n) <= 2e6 (larger
 * cases print ">=q" against a proven upper bound on any ring, or "-"). A second column gives the
 * heuristic's own quality (forced on every case), to measure its gap where the optimum is known.
 *
 * Usage: select-bench [REPS] (default 15). Needs the simulator built next to it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpuctl/gpuctl.h"
#include "select.h"
#include "unit/select-oracle.h"

static const char *const scenarios[] = {
        "workstation-mixed",   "gb200-node", "a100-mig", "dgx1-p100",
        "dgx1-v100",           "dgx-a100",   "hgx-h100", "pcie-8gpu",
        "pcie-nvlink-bridged", "rtx4090-8",  "dgx2",     "synthetic-64",
        "synthetic-72",
};

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static struct gpuctl_snapshot *load(const char *name)
{
	char lib[4096], scen[4096];
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_snapshot *snap = NULL;

	(void)snprintf(lib, sizeof(lib), "%s/sim/libnvidia-ml.so.1", GPUCTL_BENCH_BUILD_DIR);
	(void)snprintf(scen, sizeof(scen), "%s/sim/scenarios/%s.json", GPUCTL_BENCH_SOURCE_DIR,
	               name);
	setenv("GPUCTL_NVML_LIBRARY", lib, 1);
	/* the default CPU (docs/topology.md), not the host's: the same figures on every host;
	 * bench/stream-bench.c runs under nvsim exec with each scenario's own CPU */
	setenv("GPUCTL_CPUINFO", "/nonexistent/cpuinfo", 1);
	setenv("NVSIM_SCENARIO", scen, 1);
	unsetenv("NVSIM_STATE_DIR");
	if (gpuctl_ctx_new(&ctx) < 0)
		return NULL;
	if (gpuctl_snapshot_take(ctx, GPUCTL_SNAP_ALL, &snap) < 0)
		fprintf(stderr, "select-bench: %s: %s\n", name, gpuctl_errmsg(ctx));
	gpuctl_ctx_free(ctx);
	return snap;
}

/* Runs one selection; writes its ring and time. */
static int run_one(const struct gpuctl_snapshot *snap, unsigned n, const struct select_opts *o,
                   double *ring, double *ms)
{
	struct gpuctl_select_request req = GPUCTL_SELECT_REQUEST_INIT;
	struct gpuctl_selection *sel = NULL;
	struct gpuctl_select_score s = GPUCTL_SELECT_SCORE_INIT;
	struct gpuctl_ctx *ctx = NULL;
	double t0;
	int r;

	req.count = n;
	if (gpuctl_ctx_new(&ctx) < 0)
		return -ENOMEM;
	t0 = now_ms();
	r = select_run(ctx, snap, &req, o, &sel);
	*ms = now_ms() - t0;
	if (r == 0 && gpuctl_selection_score(sel, false, &s) == 0)
		*ring = s.ring_bandwidth;
	gpuctl_selection_free(sel);
	gpuctl_ctx_free(ctx);
	return r;
}

static double binom(size_t m, size_t n)
{
	double c = 1.0;

	for (size_t i = 0; i < n; i++)
		c = c * (double)(m - i) / (double)(i + 1);
	return c;
}

static int cmp_desc(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

static size_t uf_find(size_t *parent, size_t x)
{
	while (parent[x] != x)
		x = parent[x] = parent[parent[x]];
	return x;
}

/* An upper bound on the ring bandwidth of any n-set of whole GPUs (n >= 2), for the cases
 * where the optimum cannot be computed. A ring whose slowest link is at least t lies inside
 * one connected component of the graph of links >= t, and each of its members has two such
 * links there (n = 2: one). So the optimum is at most the largest t for which some component
 * holds n GPUs with that many links >= t. 0 when there is no bound. */
static double ring_upper_bound(const struct gpuctl_snapshot *snap, size_t n)
{
	size_t m = gpuctl_snapshot_gpu_count(snap), nv = 0;
	double *bw = calloc(m * m + 1, sizeof(*bw)), *vals = calloc(m * m + 1, sizeof(*vals));
	size_t *parent = calloc(m + 1, sizeof(*parent)), *deg = calloc(m + 1, sizeof(*deg));
	size_t *count = calloc(m + 1, sizeof(*count));
	bool *use = calloc(m + 1, sizeof(*use));
	double ub = 0.0;

	if (!bw || !vals || !parent || !deg || !count || !use || n < 2)
		goto out;
	for (size_t a = 0; a < m; a++) {
		int64_t mig = 0;
		use[a] = !(gpuctl_gpu_int(gpuctl_snapshot_gpu(snap, a), GPUCTL_F_MIG_MODE, &mig) ==
		                   0 &&
		           mig);
	}
	for (size_t a = 0; a < m; a++)
		for (size_t b = 0; b < m; b++) {
			struct gpuctl_link l = GPUCTL_LINK_INIT;

			if (a != b && use[a] && use[b] &&
			    gpuctl_snapshot_link(snap, a, b, &l) == 0) {
				bw[a * m + b] = l.bandwidth;
				if (a < b)
					vals[nv++] = l.bandwidth;
			}
		}
	qsort(vals, nv, sizeof(*vals), cmp_desc);
	for (size_t v = 0; v < nv; v++) {
		double t = vals[v];

		if (v > 0 && t == vals[v - 1])
			continue;
		for (size_t a = 0; a < m; a++) {
			parent[a] = a;
			deg[a] = 0;
			count[a] = 0;
		}
		for (size_t a = 0; a < m; a++)
			for (size_t b = a + 1; b < m; b++)
				if (bw[a * m + b] >= t) {
					deg[a]++;
					deg[b]++;
					parent[uf_find(parent, a)] = uf_find(parent, b);
				}
		for (size_t a = 0; a < m; a++)
			if (use[a] && deg[a] >= (n == 2 ? 1u : 2u))
				count[uf_find(parent, a)]++;
		for (size_t a = 0; a < m; a++)
			if (count[a] >= n) {
				ub = t;
				goto out;
			}
	}
out:
	free(bw);
	free(vals);
	free(parent);
	free(deg);
	free(count);
	free(use);
	return ub;
}

/* "1.000" against a known optimum, ">=0.800" against the upper bound, "-" without either. */
static void quality(char *buf, size_t size, double ring, double opt, bool known, double ub)
{
	if (!known && ub > 0.0)
		(void)snprintf(buf, size, ">=%.3f", ring / ub > 1.0 ? 1.0 : ring / ub);
	else if (!known)
		(void)snprintf(buf, size, "-");
	else if (opt <= 0.0)
		(void)snprintf(buf, size, "%.3f", ring <= 0.0 ? 1.0 : 0.0);
	else
		(void)snprintf(buf, size, "%.3f", ring / opt);
}

int main(int argc, char **argv)
{
	int reps = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 15;
	static const unsigned sizes[] = {1, 2, 3, 4, 8, 16, 32, 64, 72};

	if (reps < 1)
		reps = 1;
	printf("| scenario | GPUs | n | search | median ms | ring GB/s | quality | heuristic ms | "
	       "heuristic quality |\n");
	printf("|---|---|---|---|---|---|---|---|---|\n");
	for (size_t s = 0; s < sizeof(scenarios) / sizeof(*scenarios); s++) {
		struct gpuctl_snapshot *snap = load(scenarios[s]);
		size_t m;

		if (!snap)
			return 1;
		m = gpuctl_snapshot_gpu_count(snap);
		for (size_t z = 0; z < sizeof(sizes) / sizeof(*sizes); z++) {
			unsigned n = sizes[z];
			double *t = calloc((size_t)reps, sizeof(*t)), ring = 0, hring = 0, hms = 0;
			double opt = 0, dummy;
			bool known = false, exact = select_is_exact(m, n, NULL);
			struct select_opts heur = {.force_heuristic = true};
			struct oracle_in in;
			char q[32], hq[32];

			if (n > m || !t) {
				free(t);
				continue;
			}
			for (int i = 0; i < reps; i++)
				if (run_one(snap, n, NULL, &ring, &t[i]) < 0) {
					ring = -1;
					break;
				}
			if (ring < 0) {
				/* fewer qualifying GPUs than n (MIG-mode GPUs): skip */
				free(t);
				continue;
			}
			qsort(t, (size_t)reps, sizeof(*t), cmp_double);
			(void)run_one(snap, n, &heur, &hring, &hms);
			if (m <= ORACLE_MAX && oracle_prepare(snap, NULL, &in) == 0 && n <= in.m) {
				struct oracle_out out;

				oracle_best(&in, n, &out);
				opt = out.best_s.ring_bandwidth;
				known = true;
			} else if (binom(m, n) <= 2e6) {
				struct select_opts ex = {.exact_limit = UINT64_MAX};

				known = run_one(snap, n, &ex, &opt, &dummy) == 0;
			}
			double ub = known ? 0.0 : ring_upper_bound(snap, n);
			quality(q, sizeof(q), ring, opt, known, ub);
			quality(hq, sizeof(hq), hring, opt, known, ub);
			printf("| %s | %zu | %u | %s | %.3f | %.2f | %s | %.3f | %s |\n",
			       scenarios[s], m, n, exact ? "exact" : "heuristic", t[reps / 2], ring,
			       q, hms, hq);
			fflush(stdout);
			free(t);
		}
		gpuctl_snapshot_free(snap);
	}
	return 0;
}
