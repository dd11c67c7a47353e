/* SPDX-License-Identifier: MIT */
/*
 * ledger-report.c: gpuctl_ledger_report (docs/ledger.md, "The report").
 *
 * Decisions:
 * - Two reads, both one pass: the records that may have usage in the window (their group,
 *   their queue wait), kept in arrays by rowid; then the window's usage rows (per record, GPU
 *   and hour), each looked up by rowid and added to its group. The grouping is done here, in
 *   hash tables, not by SQL's GROUP BY, whose sorter is the slow part on a million rows.
 * - Clipping: a usage row covers [t0, t1] of one hour; an edge of the window inside it counts
 *   the fraction of [t0, t1] inside the window (exact when the edges fall on hours, as days do).
 * - A job is counted once per group it has usage in (a record on two GPUs is a job of each GPU,
 *   once of its user). Wait statistics are over the jobs with a queue wait (leases).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctx.h"
#include "ledger-internal.h"
#include "util.h"

const char *gpuctl_ledger_by_name(int by)
{
	static const char *const names[GPUCTL_LEDGER_BY_MAX_] = {"user",     "group", "pool",
	                                                         "workload", "gpu",   "day"};

	return by >= 0 && by < GPUCTL_LEDGER_BY_MAX_ ? names[by] : NULL;
}

struct group {
	struct gpuctl_ledger_report_row row;
	char *key;     /* owned */
	double *waits; /* of its jobs with one */
	size_t cap_waits;
};

struct gpuctl_ledger_report {
	struct group *groups;
	size_t n, cap;
	struct group total;
	/* key -> group index + 1 (0: free) */
	uint32_t *slots;
	size_t n_slots;
	/* (group, record) pairs already counted as jobs: pair + 1 (0: free) */
	uint64_t *pairs;
	size_t n_pairs, cap_pairs;
};

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static uint64_t hash_u64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

static int slots_grow(struct gpuctl_ledger_report *rep)
{
	size_t n = rep->n_slots ? 2 * rep->n_slots : 64;
	uint32_t *s = calloc(n, sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (size_t g = 0; g < rep->n; g++) {
		size_t i = hash_str(rep->groups[g].key) & (n - 1);

		while (s[i])
			i = (i + 1) & (n - 1);
		s[i] = (uint32_t)(g + 1);
	}
	free(rep->slots);
	rep->slots = s;
	rep->n_slots = n;
	return 0;
}

/* The group of key (made when new), or -ENOMEM. */
static int group_of(struct gpuctl_ledger_report *rep, const char *key)
{
	size_t i;

	if (2 * (rep->n + 1) > rep->n_slots && slots_grow(rep) < 0)
		return -ENOMEM;
	for (i = hash_str(key) & (rep->n_slots - 1); rep->slots[i];
	     i = (i + 1) & (rep->n_slots - 1))
		if (strcmp(rep->groups[rep->slots[i] - 1].key, key) == 0)
			return (int)rep->slots[i] - 1;
	if (rep->n == rep->cap) {
		size_t cap = rep->cap ? 2 * rep->cap : 16;
		struct group *g = realloc(rep->groups, cap * sizeof(*g));

		if (!g)
			return -ENOMEM;
		rep->groups = g;
		rep->cap = cap;
	}
	rep->groups[rep->n] = (struct group){0};
	if (!(rep->groups[rep->n].key = strdup(key)))
		return -ENOMEM;
	rep->slots[i] = (uint32_t)(rep->n + 1);
	return (int)rep->n++;
}

/* Whether the pair is new (then remembered); -ENOMEM. */
static int pair_new(struct gpuctl_ledger_report *rep, uint64_t pair)
{
	size_t mask, i;

	if (2 * (rep->n_pairs + 1) > rep->cap_pairs) {
		size_t n = rep->cap_pairs ? 2 * rep->cap_pairs : 1024;
		uint64_t *p = calloc(n, sizeof(*p));

		if (!p)
			return -ENOMEM;
		for (size_t k = 0; k < rep->cap_pairs; k++) {
			if (!rep->pairs[k])
				continue;
			for (i = hash_u64(rep->pairs[k]) & (n - 1); p[i]; i = (i + 1) & (n - 1))
				;
			p[i] = rep->pairs[k];
		}
		free(rep->pairs);
		rep->pairs = p;
		rep->cap_pairs = n;
	}
	mask = rep->cap_pairs - 1;
	for (i = hash_u64(pair + 1) & mask; rep->pairs[i]; i = (i + 1) & mask)
		if (rep->pairs[i] == pair + 1)
			return 0;
	rep->pairs[i] = pair + 1;
	rep->n_pairs++;
	return 1;
}

static int wait_add(struct group *g, double w)
{
	if (g->row.waits == g->cap_waits) {
		size_t cap = g->cap_waits ? 2 * g->cap_waits : 8;
		double *p = realloc(g->waits, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		g->waits = p;
		g->cap_waits = cap;
	}
	g->waits[g->row.waits++] = w;
	return 0;
}

/* The records that may have usage in the window. */
struct recs {
	int64_t *id;    /* ascending */
	int32_t *group; /* by user, group, pool or workload: its group; else -1 */
	double *wait;   /* < 0: none */
	int32_t *first; /* the first group it was counted in, -1: none yet */
	uint8_t *multi; /* it reached a second group: its pairs are in the report's set */
	size_t n, cap;
};

static void recs_done(struct recs *r)
{
	free(r->id);
	free(r->group);
	free(r->wait);
	free(r->first);
	free(r->multi);
}

static int recs_push(struct recs *r, int64_t id, int group, double wait)
{
	if (r->n == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 1024;
		int64_t *a = realloc(r->id, cap * sizeof(*a));
		int32_t *b;
		double *c;

		if (!a)
			return -ENOMEM;
		r->id = a;
		if (!(b = realloc(r->group, cap * sizeof(*b))))
			return -ENOMEM;
		r->group = b;
		if (!(c = realloc(r->wait, cap * sizeof(*c))))
			return -ENOMEM;
		r->wait = c;
		r->cap = cap;
	}
	r->id[r->n] = id;
	r->group[r->n] = group;
	r->wait[r->n] = wait;
	r->n++;
	return 0;
}

static ssize_t recs_find(const struct recs *r, int64_t id)
{
	size_t lo = 0, hi = r->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r->id[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < r->n && r->id[lo] == id ? (ssize_t)lo : -1;
}

static int load_records(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l,
                        struct gpuctl_ledger_report *rep,
                        const struct gpuctl_ledger_report_request *q, struct recs *recs)
{
	static const char *const col[] = {"user", "grp", "pool", "workload", "NULL", "NULL"};
	char sql[256];
	sqlite3_stmt *st = NULL;
	int e = 0, s;

	snprintf(sql, sizeof(sql),
	         "SELECT id, %s, wait_s FROM records WHERE first_hour <= ?2 AND last_hour >= ?1"
	         " ORDER BY id",
	         col[q->by]);
	if (sqlite3_prepare_v2(l->db, sql, -1, &st, NULL) != SQLITE_OK)
		return ledger_sql_error(ctx, l, "ledger: reading records");
	/* exactly the records with usage rows in the window's hours (read_usage's) */
	sqlite3_bind_int64(st, 1, (int64_t)floor(q->since / LEDGER_BUCKET_S));
	sqlite3_bind_int64(st, 2, (int64_t)floor(q->until / LEDGER_BUCKET_S));
	while ((s = sqlite3_step(st)) == SQLITE_ROW) {
		int g = -1;

		if (q->by < GPUCTL_LEDGER_BY_GPU) {
			const unsigned char *k = sqlite3_column_text(st, 1);

			if ((g = group_of(rep, k ? (const char *)k : "")) < 0)
				break;
		}
		if ((e = recs_push(recs, sqlite3_column_int64(st, 0), g,
		                   sqlite3_column_type(st, 2) == SQLITE_NULL
		                           ? -1.0
		                           : sqlite3_column_double(st, 2))) < 0)
			break;
	}
	if (s != SQLITE_DONE && s != SQLITE_ROW)
		e = ledger_sql_error(ctx, l, "ledger: reading records");
	else if (s == SQLITE_ROW && e == 0)
		e = -ENOMEM;
	sqlite3_finalize(st);
	if (e == 0 && (!(recs->first = malloc((recs->n ? recs->n : 1) * sizeof(int32_t))) ||
	               !(recs->multi = calloc(recs->n ? recs->n : 1, 1))))
		e = -ENOMEM;
	for (size_t i = 0; e == 0 && i < recs->n; i++)
		recs->first[i] = -1;
	return e;
}

/* The group of a usage row by GPU or day. */
static int row_group(struct gpuctl_ledger_report *rep, int by, sqlite3_stmt *st)
{
	char day[32];

	if (by == GPUCTL_LEDGER_BY_GPU) {
		const unsigned char *k = sqlite3_column_text(st, 1);

		return group_of(rep, k ? (const char *)k : "");
	}
	{
		time_t t = (time_t)sqlite3_column_int64(st, 2) * LEDGER_BUCKET_S;
		struct tm tm;

		if (!gmtime_r(&t, &tm))
			return group_of(rep, "");
		strftime(day, sizeof(day), "%Y-%m-%d", &tm);
	}
	return group_of(rep, day);
}

static int job_of(struct group *g, double wait)
{
	g->row.jobs++;
	return wait >= 0 ? wait_add(g, wait) : 0;
}

/* Counts record ri as a job of group gi unless it already is, and of the total once. A record
 * stays in its first group (always, by user, group, pool or workload; usually, by GPU or day):
 * only one that reaches a second group is looked up in the pairs from then on. */
static int count_job(struct gpuctl_ledger_report *rep, struct recs *recs, size_t ri, int gi)
{
	double w = recs->wait[ri];
	int e;

	if (recs->first[ri] < 0) {
		recs->first[ri] = gi;
		e = job_of(&rep->groups[gi], w);
		return e < 0 ? e : job_of(&rep->total, w);
	}
	if (recs->first[ri] == gi && !recs->multi[ri])
		return 0;
	if (!recs->multi[ri]) {
		recs->multi[ri] = 1;
		if ((e = pair_new(rep, ((uint64_t)recs->first[ri] << 32) | ri)) < 0)
			return e;
	}
	e = pair_new(rep, ((uint64_t)gi << 32) | ri);
	return e <= 0 ? e : job_of(&rep->groups[gi], w);
}

static void add_usage(struct group *g, double f, double gpu_s, double busy_s, double energy,
                      bool has_energy)
{
	g->row.gpu_s += f * gpu_s;
	g->row.busy_s += f * busy_s;
	if (has_energy) {
		g->row.energy_kwh += f * energy;
		g->row.has_energy = true;
	}
}

static int read_usage(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l,
                      struct gpuctl_ledger_report *rep,
                      const struct gpuctl_ledger_report_request *q, struct recs *recs)
{
	sqlite3_stmt *st = NULL;
	int e = 0, s;

	if (sqlite3_prepare_v2(
	            l->db,
	            "SELECT record, gpu, hour, t0, t1, gpu_s, busy_s, energy_mj FROM usage"
	            " WHERE hour >= ?1 AND hour <= ?2",
	            -1, &st, NULL) != SQLITE_OK)
		return ledger_sql_error(ctx, l, "ledger: reading usage");
	sqlite3_bind_int64(st, 1, (int64_t)floor(q->since / LEDGER_BUCKET_S));
	sqlite3_bind_int64(st, 2, (int64_t)floor(q->until / LEDGER_BUCKET_S));
	while (e == 0 && (s = sqlite3_step(st)) == SQLITE_ROW) {
		double t0 = sqlite3_column_double(st, 3), t1 = sqlite3_column_double(st, 4);
		double lo = t0 > q->since ? t0 : q->since, hi = t1 < q->until ? t1 : q->until;
		double f = t1 > t0 ? (hi - lo) / (t1 - t0) : (t0 >= q->since && t0 < q->until);
		bool has_energy = sqlite3_column_type(st, 7) != SQLITE_NULL;
		double gpu_s = sqlite3_column_double(st, 5), busy_s = sqlite3_column_double(st, 6);
		double energy = sqlite3_column_double(st, 7);
		ssize_t ri;
		int gi;

		if (!(f > 0) || (ri = recs_find(recs, sqlite3_column_int64(st, 0))) < 0)
			continue;
		gi = recs->group[ri] >= 0 ? recs->group[ri] : row_group(rep, q->by, st);
		if (gi < 0) {
			e = gi;
			break;
		}
		add_usage(&rep->groups[gi], f, gpu_s, busy_s, energy, has_energy);
		add_usage(&rep->total, f, gpu_s, busy_s, energy, has_energy);
		e = count_job(rep, recs, (size_t)ri, gi);
	}
	if (e == 0 && s != SQLITE_DONE)
		e = ledger_sql_error(ctx, l, "ledger: reading usage");
	sqlite3_finalize(st);
	return e;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int cmp_group(const void *a, const void *b)
{
	return strcmp(((const struct group *)a)->key, ((const struct group *)b)->key);
}

static void finish(struct group *g)
{
	struct gpuctl_ledger_report_row *r = &g->row;
	double sum = 0;

	r->key = g->key;
	r->idle_s = r->gpu_s - r->busy_s;
	if (r->idle_s < 0)
		r->idle_s = 0;
	r->energy_kwh /= 3.6e9; /* mJ to kWh */
	if (!r->waits)
		return;
	qsort(g->waits, r->waits, sizeof(double), cmp_double);
	for (size_t i = 0; i < r->waits; i++)
		sum += g->waits[i];
	r->wait_mean_s = sum / (double)r->waits;
	/* nearest rank: the smallest value with at least 95 % of the values at or below it */
	r->wait_p95_s = g->waits[(size_t)ceil(0.95 * (double)r->waits) - 1];
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct gpuctl_ledger_report *, gpuctl_ledger_report_free)

int gpuctl_ledger_report(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l,
                         const struct gpuctl_ledger_report_request *req,
                         struct gpuctl_ledger_report **ret_report)
{
	struct gpuctl_ledger_report_request q = GPUCTL_LEDGER_REPORT_REQUEST_INIT;
	_cleanup_(gpuctl_ledger_report_freep) struct gpuctl_ledger_report *rep = NULL;
	struct recs recs = {0};
	int e;

	if (!l || !req || !ret_report ||
	    req->struct_size < STRUCT_SIZE_MIN(struct gpuctl_ledger_report_request, by))
		return ctx_error(ctx, -EINVAL, "ledger report: bad request");
	memcpy(&q, req, req->struct_size < sizeof(q) ? req->struct_size : sizeof(q));
	if (q.by < 0 || q.by >= GPUCTL_LEDGER_BY_MAX_)
		return ctx_error(ctx, -EINVAL, "ledger report: bad grouping %d", q.by);
	if (!isfinite(q.since) || !isfinite(q.until) || !(q.until > q.since))
		return ctx_error(ctx, -EINVAL, "ledger report: the window ends before it starts");
	if (!(rep = calloc(1, sizeof(*rep))) || !(rep->total.key = strdup("total")))
		return -ENOMEM;
	/* one read transaction: both reads see the same commit of the writer */
	if ((e = ledger_exec(ctx, l, "BEGIN")) < 0)
		return e;
	e = load_records(ctx, l, rep, &q, &recs);
	if (e == 0)
		e = read_usage(ctx, l, rep, &q, &recs);
	sqlite3_exec(l->db, "COMMIT", NULL, NULL, NULL);
	recs_done(&recs);
	free(rep->pairs);
	rep->pairs = NULL;
	if (e < 0)
		return e == -ENOMEM ? ctx_error(ctx, e, "ledger report: out of memory") : e;
	if (rep->n) /* qsort of NULL is undefined, even of nothing */
		qsort(rep->groups, rep->n, sizeof(*rep->groups), cmp_group);
	for (size_t i = 0; i < rep->n; i++)
		finish(&rep->groups[i]);
	finish(&rep->total);
	/* keep only the groups with usage in the window (a record loaded may have none) */
	{
		size_t k = 0;

		for (size_t i = 0; i < rep->n; i++) {
			if (rep->groups[i].row.jobs) {
				rep->groups[k++] = rep->groups[i];
				continue;
			}
			free(rep->groups[i].key);
			free(rep->groups[i].waits);
		}
		rep->n = k;
	}
	*ret_report = TAKE_PTR(rep);
	return 0;
}

size_t gpuctl_ledger_report_count(const struct gpuctl_ledger_report *rep)
{
	return rep ? rep->n : 0;
}

const struct gpuctl_ledger_report_row *
gpuctl_ledger_report_row(const struct gpuctl_ledger_report *rep, size_t i)
{
	return rep && i < rep->n ? &rep->groups[i].row : NULL;
}

const struct gpuctl_ledger_report_row *
gpuctl_ledger_report_total(const struct gpuctl_ledger_report *rep)
{
	return rep ? &rep->total.row : NULL;
}

void gpuctl_ledger_report_free(struct gpuctl_ledger_report *rep)
{
	if (!rep)
		return;
	for (size_t i = 0; i < rep->n; i++) {
		free(rep->groups[i].key);
		free(rep->groups[i].waits);
	}
	free(rep->groups);
	free(rep->total.key);
	free(rep->total.waits);
	free(rep->slots);
	free(rep->pairs);
	free(rep);
}
