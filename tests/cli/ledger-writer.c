// SPDX-License-Identifier: MIT
/*
 * ledger-writer.c: a ledger writer for the tests (build/tests/ledger-writer), through the public
 * API only (gpuctl/ledger.h), standing in for the agent that will feed the ledger.
 *
 *   ledger-writer script DB    samples from stdin, one line each:
 *                                sample WALL MONO
 *                                obs KIND KEY USER GROUP WORKLOAD POOL GPU UTIL MEM ENERGY WAIT END
 *                              (KIND lease|workload, '-' for a string not given, END 0 or the
 *                              enum gpuctl_ledger_end value); a sample is written at the next
 *                              "sample" line and at the end of the input
 *   ledger-writer loop DB WALL [COUNT]
 *                              samples as fast as it can (or COUNT of them), wall clock WALL + k
 *                              and monotonic k at sample k, two leases "PID/0" and "PID/1" of
 *                              user "crash" on GPU-0 and GPU-1 at 50 %; after each committed
 *                              sample it writes "k\n" to stdout in one write(2), so a test that
 *                              kills it knows what was committed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpuctl/gpuctl.h"

#define MAX_OBS 256

static struct gpuctl_ledger_observation obs[MAX_OBS];
static char strs[MAX_OBS][7][128];
static size_t n_obs;

static const char *opt(const char *s)
{
	return strcmp(s, "-") == 0 ? NULL : s;
}

static int flush(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l, double wall, double mono)
{
	if (gpuctl_ledger_observe(ctx, l, wall, mono, obs, n_obs) < 0) {
		fprintf(stderr, "ledger-writer: %s\n", gpuctl_errmsg(ctx));
		return -1;
	}
	n_obs = 0;
	return 0;
}

static int script(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l)
{
	char line[2048], kind[16];
	double wall = 0, mono = 0, nwall, nmono;
	int have = 0;

	while (fgets(line, sizeof(line), stdin)) {
		struct gpuctl_ledger_observation *o = &obs[n_obs];
		char(*s)[128] = strs[n_obs];
		long long mem, energy;
		int end;

		if (sscanf(line, "sample %lf %lf", &nwall, &nmono) == 2) {
			/* the sample before this one is complete */
			if (have && flush(ctx, l, wall, mono) < 0)
				return 1;
			wall = nwall;
			mono = nmono;
			have = 1;
			continue;
		}
		if (n_obs == MAX_OBS)
			return 1;
		*o = (struct gpuctl_ledger_observation)GPUCTL_LEDGER_OBSERVATION_INIT;
		if (sscanf(line,
		           "obs %15s %127s %127s %127s %127s %127s %127s %lf %lld %lld %lf %d",
		           kind, s[0], s[1], s[2], s[3], s[4], s[5], &o->util_pct, &mem, &energy,
		           &o->wait_s, &end) != 12) {
			fprintf(stderr, "ledger-writer: bad line: %s", line);
			return 1;
		}
		o->kind = strcmp(kind, "lease") == 0 ? GPUCTL_LEDGER_LEASE : GPUCTL_LEDGER_WORKLOAD;
		o->key = s[0];
		o->user = opt(s[1]);
		o->group = opt(s[2]);
		o->workload = opt(s[3]);
		o->pool = opt(s[4]);
		o->gpu_uuid = s[5];
		o->mem_used = mem;
		o->energy_mj = energy;
		o->end = end;
		n_obs++;
	}
	return have && flush(ctx, l, wall, mono) < 0 ? 1 : 0;
}

static int loop(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l, double wall0, long count)
{
	char keys[2][32], out[32];

	for (int h = 0; h < 2; h++) {
		struct gpuctl_ledger_observation *o = &obs[h];

		(void)snprintf(keys[h], sizeof(keys[h]), "%ld/%d", (long)getpid(), h);
		*o = (struct gpuctl_ledger_observation)GPUCTL_LEDGER_OBSERVATION_INIT;
		o->kind = GPUCTL_LEDGER_LEASE;
		o->key = keys[h];
		o->user = "crash";
		o->gpu_uuid = h ? "GPU-1" : "GPU-0";
		o->util_pct = 50;
		o->mem_used = 1 << 20;
	}
	for (long k = 0; count < 0 || k < count; k++) {
		int n;

		if (gpuctl_ledger_observe(ctx, l, wall0 + (double)k, (double)k, obs, 2) < 0) {
			fprintf(stderr, "ledger-writer: %s\n", gpuctl_errmsg(ctx));
			return 1;
		}
		n = snprintf(out, sizeof(out), "%ld\n", k);
		if (write(1, out, (size_t)n) != n)
			return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct gpuctl_ledger_options o = GPUCTL_LEDGER_OPTIONS_INIT;
	struct gpuctl_ledger *l = NULL;
	struct gpuctl_ctx *ctx = NULL;
	int r;

	if (argc < 3 || gpuctl_ctx_new(&ctx) < 0) {
		fprintf(stderr, "usage: ledger-writer script DB | loop DB WALL [COUNT]\n");
		return 2;
	}
	o.writer = true;
	o.retention_s = 0;
	if (gpuctl_ledger_open(ctx, argv[2], &o, &l) < 0) {
		fprintf(stderr, "ledger-writer: %s\n", gpuctl_errmsg(ctx));
		return 1;
	}
	if (strcmp(argv[1], "script") == 0)
		r = script(ctx, l);
	else if (strcmp(argv[1], "loop") == 0 && argc >= 4)
		r = loop(ctx, l, strtod(argv[3], NULL), argc > 4 ? strtol(argv[4], NULL, 10) : -1);
	else
		r = 2;
	gpuctl_ledger_free(l);
	gpuctl_ctx_free(ctx);
	return r;
}
