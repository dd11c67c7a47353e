// SPDX-License-Identifier: MIT
/*
 * test-ledger.c: src/lib/ledger/ (docs/ledger.md). Expected values are computed by hand in the
 * comments from the integration rule docs/ledger.md states (a sample's values hold until the
 * next sample; durations from the monotonic clock), and for the report by a brute-force oracle
 * here that integrates the same synthetic samples second by second of each interval, without
 * the ledger's hour buckets. The database is read back with SQLite directly, through the
 * schema docs/ledger.md documents.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "gpuctl/gpuctl.h"
#include "test-fixtures.h"

/* cmocka 1.1 has no assert_double_equal: this one says both values when it fails */
#define assert_double_equal(a, b, eps)                                                             \
	do {                                                                                       \
		double a_ = (a), b_ = (b);                                                         \
		if (!(fabs(a_ - b_) <= (eps)))                                                     \
			fail_msg("%s = %.9g, expected %.9g (line %d)", #a, a_, b_, __LINE__);      \
	} while (0)

/* An hour boundary (472222 hours after the epoch, a Tuesday 2023-11-14 22:00 UTC) */
#define W0 1699999200.0

static char base[256];
static char db[300];
static struct gpuctl_ctx *ctx;

static int setup(void **state)
{
	char unused[300];

	(void)state;
	if (fixture_tmpdir("gpuctl-ledger", base, sizeof(base), unused, sizeof(unused)) < 0)
		return -1;
	(void)snprintf(db, sizeof(db), "%s/ledger.db", base);
	return gpuctl_ctx_new(&ctx);
}

static int teardown(void **state)
{
	(void)state;
	gpuctl_ctx_free(ctx);
	fixture_rm_rf(base);
	return 0;
}

static struct gpuctl_ledger *open_writer_at(double now, double retention_s)
{
	struct gpuctl_ledger_options o = GPUCTL_LEDGER_OPTIONS_INIT;
	struct gpuctl_ledger *l = NULL;
	int r;

	o.writer = true;
	o.now = now;
	o.retention_s = retention_s;
	r = gpuctl_ledger_open(ctx, db, &o, &l);
	if (r < 0)
		fail_msg("open: %s", gpuctl_errmsg(ctx));
	return l;
}

/* A new ledger: the file and the -wal and -shm the writer keeps beside it (docs/ledger.md) */
static struct gpuctl_ledger *open_writer(void)
{
	char side[320];

	(void)unlink(db);
	(void)snprintf(side, sizeof(side), "%s-wal", db);
	(void)unlink(side);
	(void)snprintf(side, sizeof(side), "%s-shm", db);
	(void)unlink(side);
	return open_writer_at(W0, 0);
}

static struct gpuctl_ledger_observation ob(const char *key, const char *gpu, double util,
                                           int64_t mem, int64_t energy)
{
	struct gpuctl_ledger_observation o = GPUCTL_LEDGER_OBSERVATION_INIT;

	o.kind = GPUCTL_LEDGER_LEASE;
	o.key = key;
	o.user = "alice";
	o.uid = 1000;
	o.group = "ml";
	o.workload = "slurm:1";
	o.pool = "train";
	o.gpu_uuid = gpu;
	o.util_pct = util;
	o.mem_used = mem;
	o.energy_mj = energy;
	return o;
}

static void observe(struct gpuctl_ledger *l, double wall, double mono,
                    const struct gpuctl_ledger_observation *o, size_t n)
{
	if (gpuctl_ledger_observe(ctx, l, wall, mono, o, n) < 0)
		fail_msg("observe: %s", gpuctl_errmsg(ctx));
}

/* One record's columns, read with SQLite. */
struct rec {
	char gpus[128], end_reason[32];
	double start_s, last_s, end_s, gpu_s, busy_s, util_mean, energy_mj, wait_s;
	int64_t peak_mem;
	bool has_end, has_energy, has_wait;
};

static sqlite3 *sql_open(void)
{
	sqlite3 *s = NULL;

	assert_int_equal(sqlite3_open_v2(db, &s, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	return s;
}

static int64_t sql_int(const char *q)
{
	sqlite3 *s = sql_open();
	sqlite3_stmt *st = NULL;
	int64_t v;

	assert_int_equal(sqlite3_prepare_v2(s, q, -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(s);
	return v;
}

static struct rec rec_get(const char *key)
{
	sqlite3 *s = sql_open();
	sqlite3_stmt *st = NULL;
	struct rec r = {0};

	assert_int_equal(
	        sqlite3_prepare_v2(s,
	                           "SELECT gpus, start_s, last_s, end_s, end_reason, gpu_s,"
	                           " busy_s, util_mean, peak_mem, energy_mj, wait_s"
	                           " FROM records WHERE key = ?1",
	                           -1, &st, NULL),
	        SQLITE_OK);
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	(void)snprintf(r.gpus, sizeof(r.gpus), "%s", (const char *)sqlite3_column_text(st, 0));
	r.start_s = sqlite3_column_double(st, 1);
	r.last_s = sqlite3_column_double(st, 2);
	r.has_end = sqlite3_column_type(st, 3) != SQLITE_NULL;
	r.end_s = sqlite3_column_double(st, 3);
	if (r.has_end)
		(void)snprintf(r.end_reason, sizeof(r.end_reason), "%s",
		               (const char *)sqlite3_column_text(st, 4));
	r.gpu_s = sqlite3_column_double(st, 5);
	r.busy_s = sqlite3_column_double(st, 6);
	r.util_mean = sqlite3_column_double(st, 7);
	r.peak_mem = sqlite3_column_int64(st, 8);
	r.has_energy = sqlite3_column_type(st, 9) != SQLITE_NULL;
	r.energy_mj = sqlite3_column_double(st, 9);
	r.has_wait = sqlite3_column_type(st, 10) != SQLITE_NULL;
	r.wait_s = sqlite3_column_double(st, 10);
	assert_int_equal(sqlite3_step(st), SQLITE_DONE); /* one record per key here */
	sqlite3_finalize(st);
	sqlite3_close(s);
	return r;
}

/* One lease on one GPU, four samples, released at the fourth. */
static void test_integration_by_hand(void **state)
{
	struct gpuctl_ledger *l = open_writer();
	struct gpuctl_ledger_observation o;
	struct rec r;

	(void)state;
	o = ob("100:5", "GPU-a", 50, 1000, 10000);
	o.wait_s = 30;
	observe(l, W0, 0, &o, 1);
	o = ob("100:5", "GPU-a", 5, 3000, 12000);
	observe(l, W0 + 2, 2, &o, 1);
	o = ob("100:5", "GPU-a", 80, 2000, 12600);
	observe(l, W0 + 5, 5, &o, 1);
	o = ob("100:5", "GPU-a", 0, 0, 13000);
	o.end = GPUCTL_LEDGER_END_RELEASE;
	observe(l, W0 + 6, 6, &o, 1);
	gpuctl_ledger_free(l);

	r = rec_get("100:5");
	/* [0,2] at 50 %: 2 s busy, 100 %s, 2000 mJ; [2,5] at 5 %: 3 s idle, 15 %s, 600 mJ;
	 * [5,6] at 80 %: 1 s busy, 80 %s, 400 mJ */
	assert_string_equal(r.gpus, "GPU-a");
	assert_double_equal(r.start_s, W0, 1e-9);
	assert_true(r.has_end);
	assert_double_equal(r.end_s, W0 + 6, 1e-9);
	assert_string_equal(r.end_reason, "release");
	assert_double_equal(r.gpu_s, 6, 1e-9);
	assert_double_equal(r.busy_s, 3, 1e-9);
	assert_double_equal(r.util_mean, 195.0 / 6, 1e-9);
	assert_int_equal(r.peak_mem, 3000);
	assert_true(r.has_energy);
	assert_double_equal(r.energy_mj, 3000, 1e-9);
	assert_true(r.has_wait);
	assert_double_equal(r.wait_s, 30, 1e-9);
}

/* A gap of 10 s between samples, a move from GPU-a to GPU-b, no energy counter, gone. */
static void test_gap_move_gone(void **state)
{
	struct gpuctl_ledger *l = open_writer();
	struct gpuctl_ledger_observation o;
	struct rec r;

	(void)state;
	o = ob("pod:x", "GPU-a", 100, 10, -1);
	o.kind = GPUCTL_LEDGER_WORKLOAD;
	observe(l, W0, 0, &o, 1);
	o.gpu_uuid = "GPU-b";
	o.util_pct = 20;
	observe(l, W0 + 10, 10, &o, 1);
	observe(l, W0 + 11, 11, &o, 1);
	observe(l, W0 + 12, 12, NULL, 0);
	gpuctl_ledger_free(l);

	r = rec_get("pod:x");
	/* [0,10] GPU-a at 100 %: 10 busy; [10,11] and [11,12] GPU-b at 20 %: 2 busy */
	assert_string_equal(r.gpus, "GPU-a,GPU-b");
	assert_double_equal(r.gpu_s, 12, 1e-9);
	assert_double_equal(r.busy_s, 12, 1e-9);
	assert_double_equal(r.util_mean, (1000.0 + 20 + 20) / 12, 1e-9);
	assert_false(r.has_energy);
	assert_false(r.has_wait);
	assert_string_equal(r.end_reason, "gone");
	assert_double_equal(r.end_s, W0 + 12, 1e-9);
	/* per GPU: 10 s on GPU-a, 2 on GPU-b */
	assert_int_equal(sql_int("SELECT sum(gpu_s) FROM usage WHERE gpu = 'GPU-a'"), 10);
	assert_int_equal(sql_int("SELECT sum(gpu_s) FROM usage WHERE gpu = 'GPU-b'"), 2);
}

/* The wall clock steps back 6 s; the monotonic clock goes on. */
static void test_clock_steps_back(void **state)
{
	struct gpuctl_ledger *l = open_writer();
	struct gpuctl_ledger_observation o = ob("1:1", "GPU-a", 50, 1, -1);
	struct rec r;

	(void)state;
	observe(l, W0 + 100, 0, &o, 1);
	observe(l, W0 + 101, 1, &o, 1);
	observe(l, W0 + 95, 2, &o, 1);
	observe(l, W0 + 96, 3, &o, 1);
	/* a monotonic clock that did not advance integrates nothing */
	observe(l, W0 + 97, 3, &o, 1);
	gpuctl_ledger_free(l);
	r = rec_get("1:1");
	assert_double_equal(r.gpu_s, 3, 1e-9);
	assert_int_equal(sql_int("SELECT count(*) FROM usage WHERE gpu_s < 0 OR t1 < t0"), 0);
	assert_int_equal(sql_int("SELECT round(sum(gpu_s) * 1000) FROM usage"), 3000);
	/* and the report finds all of it, wherever the stepped clock put it */
	{
		struct gpuctl_ledger_report_request q = GPUCTL_LEDGER_REPORT_REQUEST_INIT;
		struct gpuctl_ledger_report *rep = NULL;

		l = open_writer_at(W0, 0);
		q.since = W0;
		q.until = W0 + 3600;
		assert_int_equal(gpuctl_ledger_report(ctx, l, &q, &rep), 0);
		assert_double_equal(gpuctl_ledger_report_total(rep)->gpu_s, 3, 1e-9);
		assert_int_equal(gpuctl_ledger_report_total(rep)->jobs, 1);
		gpuctl_ledger_report_free(rep);
		gpuctl_ledger_free(l);
	}
}

/* A writer that stops without ending its records: the next one ends them at the last sample. */
static void test_reopen_closes_as_restart(void **state)
{
	struct gpuctl_ledger *l = open_writer();
	struct gpuctl_ledger_observation o = ob("7:7", "GPU-a", 50, 1, -1);
	struct rec r;

	(void)state;
	observe(l, W0, 0, &o, 1);
	observe(l, W0 + 1, 1, &o, 1);
	observe(l, W0 + 2, 2, &o, 1);
	r = rec_get("7:7");
	assert_false(r.has_end);
	assert_double_equal(r.last_s, W0 + 2, 1e-9);
	gpuctl_ledger_free(l);
	l = open_writer_at(W0 + 60, 0);
	r = rec_get("7:7");
	assert_true(r.has_end);
	assert_string_equal(r.end_reason, "agent-restart");
	assert_double_equal(r.end_s, W0 + 2, 1e-9);
	assert_double_equal(r.gpu_s, 2, 1e-9);
	/* the holder seen again is a new record */
	observe(l, W0 + 61, 61, &o, 1);
	gpuctl_ledger_free(l);
	assert_int_equal(sql_int("SELECT count(*) FROM records WHERE key = '7:7'"), 2);
}

static void test_retention(void **state)
{
	struct gpuctl_ledger *l = open_writer();
	struct gpuctl_ledger_observation o = ob("old", "GPU-a", 50, 1, -1);
	struct gpuctl_ledger_observation n = ob("new", "GPU-a", 50, 1, -1);

	(void)state;
	observe(l, W0, 0, &o, 1);
	observe(l, W0 + 10, 10, &n, 1);   /* old ends at W0 + 10 */
	observe(l, W0 + 20, 20, NULL, 0); /* new ends at W0 + 20 */
	gpuctl_ledger_free(l);
	/* a retention of 100 s at W0 + 115: what ended before W0 + 15 goes */
	l = open_writer_at(W0 + 115, 100);
	gpuctl_ledger_free(l);
	assert_int_equal(sql_int("SELECT count(*) FROM records WHERE key = 'old'"), 0);
	assert_int_equal(sql_int("SELECT count(*) FROM records WHERE key = 'new'"), 1);
	assert_int_equal(sql_int("SELECT count(*) FROM usage WHERE record NOT IN"
	                         " (SELECT id FROM records)"),
	                 0);
	assert_int_equal(sql_int("SELECT count(*) FROM usage"), 1);
}

/* docs/ledger.md "Violations": a row per violation, its action updated; a version 1 file is
 * read as it is and brought up to version 2 by a writer. */
static void test_violations(void **state)
{
	struct gpuctl_ledger_violation v = GPUCTL_LEDGER_VIOLATION_INIT;
	struct gpuctl_ledger_options ro = GPUCTL_LEDGER_OPTIONS_INIT;
	struct gpuctl_ledger *l = open_writer(), *r = NULL;
	int64_t id = 0;
	sqlite3 *s;

	(void)state;
	v.time_s = 1000.5;
	v.kind = "foreign";
	v.user = "alice";
	v.uid = 1001;
	v.pid = 4242;
	v.gpu_uuid = "GPU-abc";
	v.detail = "no lease of alice covers GPU 3";
	v.action = "terminate: SIGTERM";
	assert_int_equal(gpuctl_ledger_violation_add(ctx, l, &v, &id), 0);
	assert_true(id > 0);
	assert_int_equal(gpuctl_ledger_violation_action(ctx, l, id, "terminate: SIGTERM, SIGKILL"),
	                 0);
	assert_int_equal(gpuctl_ledger_violation_action(ctx, l, id + 100, "x"), -ENOENT);
	v.kind = NULL;
	assert_int_equal(gpuctl_ledger_violation_add(ctx, l, &v, NULL), -EINVAL);
	assert_int_equal(sql_int("SELECT count(*) FROM violations WHERE time_s = 1000.5 AND kind ="
	                         " 'foreign' AND user = 'alice' AND uid = 1001 AND pid = 4242 AND"
	                         " gpu = 'GPU-abc' AND action = 'terminate: SIGTERM, SIGKILL'"),
	                 1);
	assert_int_equal(sql_int("PRAGMA user_version"), 2);
	gpuctl_ledger_free(l);
	/* a reader may not write */
	assert_int_equal(gpuctl_ledger_open(ctx, db, &ro, &r), 0);
	v.kind = "foreign";
	assert_int_equal(gpuctl_ledger_violation_add(ctx, r, &v, NULL), -EBADF);
	gpuctl_ledger_free(r);
	/* a version 1 file (no violations table) */
	s = sql_open();
	assert_int_equal(
	        sqlite3_exec(s, "DROP TABLE violations; PRAGMA user_version = 1", NULL, NULL, NULL),
	        SQLITE_OK);
	sqlite3_close(s);
	r = NULL;
	assert_int_equal(gpuctl_ledger_open(ctx, db, &ro, &r), 0);
	gpuctl_ledger_free(r);
	assert_int_equal(sql_int("PRAGMA user_version"), 1);
	l = open_writer();
	assert_int_equal(sql_int("PRAGMA user_version"), 2);
	assert_int_equal(gpuctl_ledger_violation_add(ctx, l, &v, NULL), 0);
	assert_int_equal(sql_int("SELECT count(*) FROM violations"), 1);
	gpuctl_ledger_free(l);
}

static void test_newer_schema_refused(void **state)
{
	struct gpuctl_ledger_options ro = GPUCTL_LEDGER_OPTIONS_INIT;
	struct gpuctl_ledger *l = open_writer();
	sqlite3 *s;

	(void)state;
	gpuctl_ledger_free(l);
	s = sql_open();
	assert_int_equal(sqlite3_exec(s, "PRAGMA user_version = 3", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(s);
	l = NULL;
	assert_int_equal(gpuctl_ledger_open(ctx, db, &ro, &l), -EPROTO);
	assert_null(l);
	assert_non_null(strstr(gpuctl_errmsg(ctx), "newer"));
	ro.writer = true;
	assert_int_equal(gpuctl_ledger_open(ctx, db, &ro, &l), -EPROTO);
	/* a reader of a missing file, and of a file that is not a ledger */
	ro.writer = false;
	(void)unlink(db);
	assert_int_equal(gpuctl_ledger_open(ctx, db, &ro, &l), -ENOENT);
	{
		FILE *f = fopen(db, "w");

		assert_non_null(f);
		fputs("this is not a database, it is text long enough to be read as a header....\n"
		      "............................................................\n",
		      f);
		fclose(f);
	}
	assert_int_equal(gpuctl_ledger_open(ctx, db, &ro, &l), -EBADMSG);
}

static void test_bad_input(void **state)
{
	struct gpuctl_ledger_options ro = GPUCTL_LEDGER_OPTIONS_INIT;
	struct gpuctl_ledger *l = open_writer(), *rl = NULL;
	struct gpuctl_ledger_observation o = ob("k", "GPU-a", 1, 1, 1);
	struct gpuctl_ledger_report_request q = GPUCTL_LEDGER_REPORT_REQUEST_INIT;
	struct gpuctl_ledger_report *rep = NULL;

	(void)state;
	o.kind = 9;
	assert_int_equal(gpuctl_ledger_observe(ctx, l, W0, 0, &o, 1), -EINVAL);
	o.kind = GPUCTL_LEDGER_LEASE;
	o.key = NULL;
	assert_int_equal(gpuctl_ledger_observe(ctx, l, W0, 0, &o, 1), -EINVAL);
	assert_int_equal(gpuctl_ledger_observe(ctx, l, NAN, 0, NULL, 0), -EINVAL);
	q.since = 10;
	q.until = 5;
	assert_int_equal(gpuctl_ledger_report(ctx, l, &q, &rep), -EINVAL);
	q.until = 20;
	q.by = GPUCTL_LEDGER_BY_MAX_;
	assert_int_equal(gpuctl_ledger_report(ctx, l, &q, &rep), -EINVAL);
	assert_null(rep);
	gpuctl_ledger_free(l);
	assert_int_equal(gpuctl_ledger_open(ctx, db, &ro, &rl), 0);
	assert_int_equal(gpuctl_ledger_observe(ctx, rl, W0, 0, NULL, 0), -EBADF);
	gpuctl_ledger_free(rl);
	assert_null(gpuctl_ledger_end_name(0));
	assert_string_equal(gpuctl_ledger_end_name(GPUCTL_LEDGER_END_FAILOVER), "health-failover");
	assert_string_equal(gpuctl_ledger_by_name(GPUCTL_LEDGER_BY_DAY), "day");
}

/* ---- The report against a brute-force oracle ---- */

#define SLOTS   12
#define MAXREC  4000
#define NGROUPS 64
#define NSAMPLE 2500

static const char *const gpus3[] = {"GPU-a", "GPU-b", "GPU-c"}; /* GPU-c: no energy counter */
static const char *const users[] = {"u0", "u1", "u2", "u3"};
static const char *const groups[] = {"g0", "g1"};
static const char *const pools[] = {"p0", "p1"};
static const char *const wls[] = {"w0", "w1", "w2"};
#define POWER_MJ_S 150000.0 /* each counter-bearing GPU draws 150 W */

struct orec {
	int user, group, pool, wl, gpu;
	double wait; /* < 0: a workload */
};
struct ogroup {
	char key[32];
	double gpu_s, busy_s, energy;
	bool has_energy;
	bool job[MAXREC];
	int jobs;
};
struct oracle {
	struct ogroup g[NGROUPS];
	int n;
};

static uint64_t rng_state = 42;
static unsigned rnd(unsigned n)
{
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (unsigned)((rng_state >> 33) % n);
}

static struct ogroup *og(struct oracle *o, const char *key)
{
	for (int i = 0; i < o->n; i++)
		if (strcmp(o->g[i].key, key) == 0)
			return &o->g[i];
	assert_true(o->n < NGROUPS);
	(void)snprintf(o->g[o->n].key, sizeof(o->g[o->n].key), "%s", key);
	return &o->g[o->n++];
}

/* The sequence, kept to replay into oracles. */
struct oseg {
	int rec;           /* record */
	double t0, t1;     /* the interval */
	double util;       /* its GPU's utilisation at t0 */
	bool energy_known; /* the GPU has a counter and was observed at t1 */
	double energy;     /* the record's share of the interval's energy */
};
static struct orec orecs[MAXREC];
static int n_orecs;
static struct oseg *osegs;
static size_t n_osegs, cap_osegs;

static void seg_add(int rec, double t0, double t1, double util, bool ek, double e)
{
	if (n_osegs == cap_osegs) {
		cap_osegs = cap_osegs ? 2 * cap_osegs : 1024;
		osegs = realloc(osegs, cap_osegs * sizeof(*osegs));
		assert_non_null(osegs);
	}
	osegs[n_osegs++] = (struct oseg){rec, t0, t1, util, ek, e};
}

/* Feeds NSAMPLE random samples to the ledger and keeps every interval in osegs. */
static void generate(struct gpuctl_ledger *l)
{
	static char keys[MAXREC][24];
	static int started[MAXREC];
	int slot_rec[SLOTS];
	bool active[SLOTS] = {0};
	double util[3] = {0}, t = W0 + 1234, prev = 0;
	struct gpuctl_ledger_observation obs[SLOTS];

	for (int s = 0; s < SLOTS; s++)
		slot_rec[s] = -1;
	for (int k = 0; k <= NSAMPLE; k++) {
		bool last = k == NSAMPLE; /* a final sample with no observation: all gone */
		size_t n = 0;
		int holders[3] = {0};
		bool seen_gpu[3] = {0};
		bool ending[SLOTS] = {0}, end_obs[SLOTS] = {0};
		double nutil[3];

		if (k)
			t += 1 + rnd(400);
		for (int g = 0; g < 3; g++)
			nutil[g] = rnd(101);
		for (int s = 0; s < SLOTS && !last; s++) {
			if (active[s] && rnd(10) == 0) {
				ending[s] = true;
				end_obs[s] = rnd(2);
			} else if (!active[s] && rnd(5) == 0 && n_orecs < MAXREC) {
				struct orec *r = &orecs[n_orecs];

				*r = (struct orec){(int)rnd(4), (int)rnd(2),
				                   (int)rnd(2), (int)rnd(3),
				                   (int)rnd(3), s < 8 ? (double)rnd(600) : -1.0};
				(void)snprintf(keys[n_orecs], sizeof(keys[0]), "%d/%d", s, n_orecs);
				started[n_orecs] = k;
				slot_rec[s] = n_orecs++;
				active[s] = true;
			}
		}
		for (int s = 0; s < SLOTS && !last; s++) {
			struct orec *r;
			struct gpuctl_ledger_observation *o;

			if (!active[s] || (ending[s] && !end_obs[s]))
				continue;
			r = &orecs[slot_rec[s]];
			o = &obs[n++];
			*o = (struct gpuctl_ledger_observation)GPUCTL_LEDGER_OBSERVATION_INIT;
			o->kind = r->wait >= 0 ? GPUCTL_LEDGER_LEASE : GPUCTL_LEDGER_WORKLOAD;
			o->key = keys[slot_rec[s]];
			o->user = users[r->user];
			o->group = groups[r->group];
			o->pool = pools[r->pool];
			o->workload = wls[r->wl];
			o->gpu_uuid = gpus3[r->gpu];
			o->util_pct = nutil[r->gpu];
			o->mem_used = 1000 + rnd(1000);
			o->energy_mj = r->gpu < 2 ? (int64_t)llround((t - W0) * POWER_MJ_S) : -1;
			o->wait_s = r->wait;
			o->end = ending[s] ? GPUCTL_LEDGER_END_EXIT : GPUCTL_LEDGER_END_NONE;
			seen_gpu[r->gpu] = true;
		}
		/* the interval since the previous sample, for the records observed then, with
		 * their values then (docs/ledger.md, "Integration") */
		for (int pass = 0; k && pass < 2; pass++)
			for (int s = 0; s < SLOTS; s++) {
				int ri = slot_rec[s], g;

				if (ri < 0 || !active[s] || started[ri] >= k)
					continue;
				g = orecs[ri].gpu;
				if (pass == 0)
					holders[g]++;
				else
					seg_add(ri, prev, t, util[g], g < 2 && seen_gpu[g],
					        POWER_MJ_S * (t - prev) / holders[g]);
			}
		assert_int_equal(gpuctl_ledger_observe(ctx, l, t, t - W0, obs, n), 0);
		for (int s = 0; s < SLOTS; s++)
			if (ending[s] || last)
				active[s] = false;
		memcpy(util, nutil, sizeof(util));
		prev = t;
	}
}

static const char *okey(int by, const struct oseg *sg, double t, char *buf, size_t size)
{
	const struct orec *r = &orecs[sg->rec];
	time_t day = (time_t)(floor(t / 86400) * 86400);
	struct tm tm;

	switch (by) {
	case GPUCTL_LEDGER_BY_USER:
		return users[r->user];
	case GPUCTL_LEDGER_BY_GROUP:
		return groups[r->group];
	case GPUCTL_LEDGER_BY_POOL:
		return pools[r->pool];
	case GPUCTL_LEDGER_BY_WORKLOAD:
		return wls[r->wl];
	case GPUCTL_LEDGER_BY_GPU:
		return gpus3[r->gpu];
	default:
		gmtime_r(&day, &tm);
		strftime(buf, size, "%Y-%m-%d", &tm);
		return buf;
	}
}

/* The oracle: each interval clipped to the window and cut at UTC midnights. */
static void oracle_run(struct oracle *o, int by, double since, double until)
{
	memset(o, 0, sizeof(*o));
	for (size_t i = 0; i < n_osegs; i++) {
		const struct oseg *sg = &osegs[i];
		double a = sg->t0 > since ? sg->t0 : since, b = sg->t1 < until ? sg->t1 : until;

		while (a < b) {
			double mid = (floor(a / 86400) + 1) * 86400, e = mid < b ? mid : b;
			char buf[32];
			struct ogroup *g = og(o, okey(by, sg, a, buf, sizeof(buf)));
			double f = (e - a) / (sg->t1 - sg->t0);

			g->gpu_s += e - a;
			g->busy_s += sg->util > 10 ? e - a : 0;
			if (sg->energy_known) {
				g->energy += f * sg->energy;
				g->has_energy = true;
			}
			if (!g->job[sg->rec]) {
				g->job[sg->rec] = true;
				g->jobs++;
			}
			a = e;
		}
	}
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void check_report(struct gpuctl_ledger *l, int by, double since, double until, bool exact)
{
	static struct oracle o;
	struct gpuctl_ledger_report_request q = GPUCTL_LEDGER_REPORT_REQUEST_INIT;
	struct gpuctl_ledger_report *rep = NULL;

	q.by = by;
	q.since = since;
	q.until = until;
	if (gpuctl_ledger_report(ctx, l, &q, &rep) < 0)
		fail_msg("report: %s", gpuctl_errmsg(ctx));
	oracle_run(&o, by, since, until);
	assert_int_equal(gpuctl_ledger_report_count(rep), o.n);
	for (size_t i = 0; i < gpuctl_ledger_report_count(rep); i++) {
		const struct gpuctl_ledger_report_row *row = gpuctl_ledger_report_row(rep, i);
		struct ogroup *g = og(&o, row->key);
		double waits[MAXREC], sum = 0;
		size_t nw = 0;

		assert_int_equal(row->jobs, g->jobs);
		assert_double_equal(row->gpu_s, g->gpu_s, 1e-6 * (1 + g->gpu_s));
		if (exact) {
			assert_double_equal(row->busy_s, g->busy_s, 1e-6 * (1 + g->gpu_s));
			assert_int_equal(row->has_energy, g->has_energy);
			assert_double_equal(row->energy_kwh, g->energy / 3.6e9, 1e-9);
		}
		assert_double_equal(row->idle_s, row->gpu_s - row->busy_s, 1e-6 * (1 + g->gpu_s));
		for (int r = 0; r < n_orecs; r++)
			if (g->job[r] && orecs[r].wait >= 0)
				waits[nw++] = orecs[r].wait;
		assert_int_equal(row->waits, nw);
		if (nw) {
			qsort(waits, nw, sizeof(double), cmp_d);
			for (size_t w = 0; w < nw; w++)
				sum += waits[w];
			assert_double_equal(row->wait_mean_s, sum / nw, 1e-9);
			/* nearest rank: the ceil(0.95 n)-th smallest */
			assert_double_equal(row->wait_p95_s, waits[(size_t)ceil(0.95 * nw) - 1],
			                    1e-9);
		}
		if (i)
			assert_true(strcmp(gpuctl_ledger_report_row(rep, i - 1)->key, row->key) <
			            0);
	}
	gpuctl_ledger_report_free(rep);
}

static void test_report_oracle(void **state)
{
	struct gpuctl_ledger_options ro = GPUCTL_LEDGER_OPTIONS_INIT;
	struct gpuctl_ledger *l = open_writer(), *rl = NULL;
	double end;

	(void)state;
	generate(l);
	end = osegs[n_osegs - 1].t1;
	assert_true(end - W0 > 3 * 86400); /* several days */
	assert_true(n_orecs > 500);
	/* read-only, while the writer has it open */
	assert_int_equal(gpuctl_ledger_open(ctx, db, &ro, &rl), 0);
	for (int by = 0; by < GPUCTL_LEDGER_BY_MAX_; by++) {
		check_report(rl, by, 0, 1e11, true);
		/* hour-aligned windows: exact */
		check_report(rl, by, W0 + 3 * 3600, W0 + 30 * 3600, true);
		check_report(rl, by, W0 + 26 * 3600, W0 + 74 * 3600, true);
		/* edges inside hours: GPU-seconds, jobs and waits exact, the rest prorated */
		check_report(rl, by, W0 + 3 * 3600 + 1234.5, W0 + 50 * 3600 + 77, false);
	}
	/* an empty window */
	check_report(rl, GPUCTL_LEDGER_BY_USER, W0 - 86400, W0 - 3600, true);
	gpuctl_ledger_free(rl);
	gpuctl_ledger_free(l);
	free(osegs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_integration_by_hand),
	        cmocka_unit_test(test_gap_move_gone),
	        cmocka_unit_test(test_clock_steps_back),
	        cmocka_unit_test(test_reopen_closes_as_restart),
	        cmocka_unit_test(test_retention),
	        cmocka_unit_test(test_newer_schema_refused),
	        cmocka_unit_test(test_violations),
	        cmocka_unit_test(test_bad_input),
	        cmocka_unit_test(test_report_oracle),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
