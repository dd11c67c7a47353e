// SPDX-License-Identifier: MIT
/*
 * ledger-bench.c: the usage ledger (docs/ledger.md) at the size issue 27 asks for: a ledger of
 * RECORDS records written through gpuctl_ledger_observe as the agent will write it, then
 * gpuctl_ledger_report timed on it for each grouping (run: build/bin/ledger-bench DB [RECORDS];
 * bench/ledger_bench.py drives it for `make bench` and times `gpuctl report` on the same file).
 *
 * The shape: 8 GPUs, 64 holders at a time (8 per GPU), each a record that lives two samples (a
 * sample every 300 s, so 1,000,000 records span about 217 days); 100 users in 10 groups, 4
 * pools, 1,000 workload labels, half the records leases with a queue wait, GPUs 6 and 7 without
 * an energy counter. Prints Markdown: the write cost per sample and the report times (median of
 * 3, wall clock, this process, the file in the page cache after the first run).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gpuctl/gpuctl.h"

#define HOLDERS 64
#define NGPU    8
#define DT      300.0
#define W0      1700000000.0

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int write_ledger(struct gpuctl_ctx *ctx, const char *db, long records, double *ret_end)
{
	struct gpuctl_ledger_options o = GPUCTL_LEDGER_OPTIONS_INIT;
	struct gpuctl_ledger_observation obs[HOLDERS];
	static char keys[HOLDERS][32], users[100][16], groups[10][16], wls[1000][24],
	        gpus[NGPU][48];
	static const char *const pools[4] = {"train", "infer", "dev", "batch"};
	struct gpuctl_ledger *l = NULL;
	long samples = 2 * ((records + HOLDERS - 1) / HOLDERS) + 1;
	double t0, c0, wall = W0;

	for (int i = 0; i < 100; i++)
		(void)snprintf(users[i], sizeof(users[i]), "user%02d", i);
	for (int i = 0; i < 10; i++)
		(void)snprintf(groups[i], sizeof(groups[i]), "group%d", i);
	for (int i = 0; i < 1000; i++)
		(void)snprintf(wls[i], sizeof(wls[i]), "slurm:%d", 1000 + i);
	for (int i = 0; i < NGPU; i++)
		(void)snprintf(gpus[i], sizeof(gpus[i]), "GPU-%08x-0000-0000-0000-00000000000%d",
		               0xabc000u + (unsigned)i, i);
	o.writer = true;
	o.retention_s = 0;
	if (gpuctl_ledger_open(ctx, db, &o, &l) < 0) {
		fprintf(stderr, "ledger-bench: %s\n", gpuctl_errmsg(ctx));
		return -1;
	}
	t0 = now_s();
	c0 = cpu_s();
	for (long k = 0; k < samples; k++) {
		long gen = k / 2; /* the records of this pair of samples */
		size_t n = 0;

		wall = W0 + (double)k * DT;
		for (int h = 0; h < HOLDERS && k < samples - 1 && gen * HOLDERS + h < records;
		     h++) {
			long id = gen * HOLDERS + h;
			struct gpuctl_ledger_observation *p = &obs[n++];
			int g = h % NGPU;

			*p = (struct gpuctl_ledger_observation)GPUCTL_LEDGER_OBSERVATION_INIT;
			(void)snprintf(keys[h], sizeof(keys[h]), "%ld:1", id);
			p->kind = id % 2 ? GPUCTL_LEDGER_LEASE : GPUCTL_LEDGER_WORKLOAD;
			p->key = keys[h];
			p->user = users[id % 100];
			p->uid = 1000 + id % 100;
			p->group = groups[id % 10];
			p->workload = wls[id % 1000];
			p->pool = pools[g / 2];
			p->gpu_uuid = gpus[g];
			p->util_pct = (double)((id * 37 + k * 11) % 101);
			p->mem_used = (int64_t)(id % 80) << 30;
			p->energy_mj = g < 6 ? (int64_t)((wall - W0) * 300000.0) : -1;
			p->wait_s = id % 2 ? (double)(id % 900) : -1;
		}
		if (gpuctl_ledger_observe(ctx, l, wall, wall - W0, obs, n) < 0) {
			fprintf(stderr, "ledger-bench: %s\n", gpuctl_errmsg(ctx));
			gpuctl_ledger_free(l);
			return -1;
		}
	}
	printf("| write: %ld samples of up to %d observations (8 GPUs) | %.1f s wall, %.1f s CPU: "
	       "%.3f ms CPU a sample |\n",
	       samples, HOLDERS, now_s() - t0, cpu_s() - c0, 1000 * (cpu_s() - c0) / samples);
	gpuctl_ledger_free(l);
	*ret_end = wall;
	return 0;
}

static int time_reports(struct gpuctl_ctx *ctx, const char *db, double end)
{
	struct gpuctl_ledger_options o = GPUCTL_LEDGER_OPTIONS_INIT;
	struct gpuctl_ledger *l = NULL;
	static const struct {
		const char *name;
		double span;
	} windows[] = {{"everything", 0}, {"last 7 days", 7 * 86400.0}};

	if (gpuctl_ledger_open(ctx, db, &o, &l) < 0) {
		fprintf(stderr, "ledger-bench: %s\n", gpuctl_errmsg(ctx));
		return -1;
	}
	for (size_t w = 0; w < 2; w++)
		for (int by = 0; by < GPUCTL_LEDGER_BY_MAX_; by++) {
			struct gpuctl_ledger_report_request q = GPUCTL_LEDGER_REPORT_REQUEST_INIT;
			struct gpuctl_ledger_report *rep = NULL;
			double times[3];
			uint64_t jobs = 0;

			q.by = by;
			q.since = windows[w].span ? end - windows[w].span : 0;
			q.until = end + 1;
			for (int i = 0; i < 3; i++) {
				double t0 = now_s();

				if (gpuctl_ledger_report(ctx, l, &q, &rep) < 0) {
					fprintf(stderr, "ledger-bench: %s\n", gpuctl_errmsg(ctx));
					gpuctl_ledger_free(l);
					return -1;
				}
				times[i] = now_s() - t0;
				jobs = gpuctl_ledger_report_total(rep)->jobs;
				if (i < 2)
					gpuctl_ledger_report_free(rep);
			}
			qsort(times, 3, sizeof(double), cmp_d);
			printf("| report --by %s, %s: %zu groups, %llu jobs | %.0f ms |\n",
			       gpuctl_ledger_by_name(by), windows[w].name,
			       gpuctl_ledger_report_count(rep), (unsigned long long)jobs,
			       1000 * times[1]);
			gpuctl_ledger_report_free(rep);
		}
	gpuctl_ledger_free(l);
	return 0;
}

int main(int argc, char **argv)
{
	struct gpuctl_ctx *ctx = NULL;
	long records = argc > 2 ? strtol(argv[2], NULL, 10) : 1000000;
	double end = 0;
	struct stat st;
	int r;

	if (argc < 2 || records <= 0 || gpuctl_ctx_new(&ctx) < 0) {
		fprintf(stderr, "usage: ledger-bench DB [RECORDS]\n");
		return 2;
	}
	(void)unlink(argv[1]);
	printf("| ledger of %ld records | |\n|---|---|\n", records);
	r = write_ledger(ctx, argv[1], records, &end);
	if (r == 0 && stat(argv[1], &st) == 0)
		printf("| file size | %.0f MiB |\n", (double)st.st_size / (1 << 20));
	if (r == 0)
		r = time_reports(ctx, argv[1], end);
	gpuctl_ctx_free(ctx);
	return r < 0 ? 1 : 0;
}
