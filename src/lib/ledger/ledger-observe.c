/* SPDX-License-Identifier: MIT */
/*
 * ledger-observe.c: the writer's sample (gpuctl_ledger_observe; docs/ledger.md, "What is
 * recorded" and "Integration").
 *
 * Decisions:
 * - A sample's values hold until the next sample (a step function, left-continuous): the
 *   interval [previous sample, this sample] is integrated with the previous sample's values,
 *   for every GPU a record was observed on then. Its length is the difference of the caller's
 *   monotonic clock; the wall clock only places it (stamps, hour buckets), so a wall clock
 *   stepped back never makes a negative duration.
 * - Energy of an interval is the GPU's counter difference, split equally among the records on
 *   that GPU at the interval's start; it is known only when both ends were read (a counter that
 *   went back, after a driver reload, is unknown).
 * - Utilisation is the GPU's: every holder of a shared GPU gets it.
 * - One transaction per sample; the in-memory state follows only after its COMMIT.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"
#include "ledger-internal.h"
#include "sbuf.h"
#include "util.h"

static const struct gpuctl_ledger_observation *obs_at(const struct gpuctl_ledger_observation *obs,
                                                      size_t i)
{
	return (const void *)((const char *)obs + i * obs[0].struct_size);
}

static int obs_check(struct gpuctl_ctx *ctx, const struct gpuctl_ledger_observation *obs, size_t n)
{
	if (n == 0)
		return 0;
	if (!obs || obs[0].struct_size < STRUCT_SIZE_MIN(struct gpuctl_ledger_observation, end) ||
	    obs[0].struct_size % _Alignof(struct gpuctl_ledger_observation))
		return ctx_error(ctx, -EINVAL, "ledger observations: bad struct_size");
	for (size_t i = 0; i < n; i++) {
		const struct gpuctl_ledger_observation *o = obs_at(obs, i);

		if (o->struct_size != obs[0].struct_size)
			return ctx_error(ctx, -EINVAL, "ledger observation %zu: bad struct_size",
			                 i);
		if (o->kind != GPUCTL_LEDGER_LEASE && o->kind != GPUCTL_LEDGER_WORKLOAD)
			return ctx_error(ctx, -EINVAL, "ledger observation %zu: bad kind %d", i,
			                 o->kind);
		if (!o->key || !o->gpu_uuid)
			return ctx_error(ctx, -EINVAL, "ledger observation %zu: no key or GPU", i);
		if (o->end < 0 || o->end >= GPUCTL_LEDGER_END_MAX_)
			return ctx_error(ctx, -EINVAL, "ledger observation %zu: bad end %d", i,
			                 o->end);
	}
	return 0;
}

/* The GPU's energy counter in this sample (any observation on it that read one), else -1. */
static int64_t energy_now(const struct gpuctl_ledger_observation *obs, size_t n, const char *uuid)
{
	for (size_t i = 0; i < n; i++) {
		const struct gpuctl_ledger_observation *o = obs_at(obs, i);

		if (o->energy_mj >= 0 && strcmp(o->gpu_uuid, uuid) == 0)
			return o->energy_mj;
	}
	return -1;
}

/* Records on this GPU at the previous sample. */
static unsigned holders_then(const struct gpuctl_ledger *l, const char *uuid)
{
	unsigned n = 0;

	for (size_t i = 0; i < l->n_recs; i++)
		for (size_t g = 0; g < l->recs[i]->n_gpus; g++)
			if (l->recs[i]->gpus[g].active &&
			    strcmp(l->recs[i]->gpus[g].uuid, uuid) == 0)
				n++;
	return n;
}

static int usage_add(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l, int64_t id, const char *uuid,
                     double t0, double t1, double gpu_s, double busy_s, double energy)
{
	sqlite3_stmt *st = l->stmt[LG_UPSERT_USAGE];
	int r = 0;

	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_text(st, 2, uuid, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, (int64_t)floor(t0 / LEDGER_BUCKET_S));
	sqlite3_bind_double(st, 4, t0);
	sqlite3_bind_double(st, 5, t1);
	sqlite3_bind_double(st, 6, gpu_s);
	sqlite3_bind_double(st, 7, busy_s);
	if (isnan(energy))
		sqlite3_bind_null(st, 8);
	else
		sqlite3_bind_double(st, 8, energy);
	if (sqlite3_step(st) != SQLITE_DONE)
		r = ledger_sql_error(ctx, l, "ledger: writing usage");
	sqlite3_reset(st);
	return r;
}

/* One GPU's interval [wall, wall + dt] of record r: its totals and its usage rows, split at
 * hour boundaries in proportion. */
static int integrate_gpu(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l, struct lg_rec *r,
                         const struct lg_gpu *g, double wall, double dt, double energy)
{
	double busy = g->util > l->busy_threshold ? dt : 0.0;
	double t = wall, end = wall + dt;
	int e;

	r->n_tot.gpu_s += dt;
	r->n_tot.busy_s += busy;
	if (g->util >= 0) {
		r->n_tot.util_s += g->util * dt;
		r->n_tot.util_known_s += dt;
	}
	if (!isnan(energy)) {
		r->n_tot.energy_mj += energy;
		r->n_tot.has_energy = true;
	}
	while (t < end) {
		double next = (floor(t / LEDGER_BUCKET_S) + 1) * LEDGER_BUCKET_S;
		double seg = (next < end ? next : end) - t;
		double f = seg / dt;

		int64_t hour = (int64_t)floor(t / LEDGER_BUCKET_S);

		if (hour < r->n_tot.first_hour)
			r->n_tot.first_hour = hour;
		if (hour > r->n_tot.last_hour)
			r->n_tot.last_hour = hour;
		if ((e = usage_add(ctx, l, r->id, g->uuid, t, t + seg, seg, busy * f,
		                   isnan(energy) ? NAN : energy * f)) < 0)
			return e;
		t = next;
	}
	return 0;
}

/* The interval since the previous sample, for every record and GPU observed then. */
static int integrate(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l, double mono,
                     const struct gpuctl_ledger_observation *obs, size_t n)
{
	double dt = mono - l->prev_mono;
	int r;

	if (!l->have_prev || !(dt > 0))
		return 0;
	for (size_t i = 0; i < l->n_recs; i++) {
		struct lg_rec *rec = l->recs[i];

		for (size_t k = 0; k < rec->n_gpus; k++) {
			const struct lg_gpu *g = &rec->gpus[k];
			double energy = NAN;
			int64_t now;

			if (!g->active)
				continue;
			now = energy_now(obs, n, g->uuid);
			if (g->energy >= 0 && now >= g->energy)
				energy = (double)(now - g->energy) / holders_then(l, g->uuid);
			if ((r = integrate_gpu(ctx, l, rec, g, l->prev_wall, dt, energy)) < 0)
				return r;
		}
	}
	return 0;
}

static int dup_opt(const char *s, char **ret)
{
	*ret = NULL;
	if (s && !(*ret = strdup(s)))
		return -ENOMEM;
	return 0;
}

static struct lg_rec *rec_find(struct gpuctl_ledger *l, int kind, const char *key)
{
	for (size_t i = 0; i < l->n_recs; i++)
		if (l->recs[i]->kind == kind && strcmp(l->recs[i]->key, key) == 0)
			return l->recs[i];
	return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct lg_rec *, ledger_rec_free)

static int rec_new(struct gpuctl_ledger *l, const struct gpuctl_ledger_observation *o, double wall,
                   struct lg_rec **ret)
{
	_cleanup_(ledger_rec_freep) struct lg_rec *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	if (l->n_recs == l->cap_recs) {
		size_t cap = l->cap_recs ? 2 * l->cap_recs : 16;
		struct lg_rec **p = realloc(l->recs, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		l->recs = p;
		l->cap_recs = cap;
	}
	if (dup_opt(o->key, &r->key) < 0 || dup_opt(o->user, &r->user) < 0 ||
	    dup_opt(o->group, &r->group) < 0 || dup_opt(o->workload, &r->workload) < 0 ||
	    dup_opt(o->pool, &r->pool) < 0)
		return -ENOMEM;
	r->kind = o->kind;
	r->uid = o->uid;
	r->start = wall;
	r->tot.peak_mem = -1;
	r->tot.wait_s = -1;
	r->tot.first_hour = INT64_MAX;
	r->tot.last_hour = INT64_MIN;
	r->n_tot = r->tot;
	l->recs[l->n_recs++] = r;
	*ret = TAKE_PTR(r);
	return 0;
}

static struct lg_gpu *gpu_get(struct lg_rec *r, const char *uuid)
{
	struct lg_gpu *p;

	for (size_t i = 0; i < r->n_gpus; i++)
		if (strcmp(r->gpus[i].uuid, uuid) == 0)
			return &r->gpus[i];
	p = realloc(r->gpus, (r->n_gpus + 1) * sizeof(*p));
	if (!p)
		return NULL;
	r->gpus = p;
	p = &r->gpus[r->n_gpus];
	*p = (struct lg_gpu){.pending = true, .util = -1, .energy = -1};
	if (!(p->uuid = strdup(uuid)))
		return NULL;
	r->n_gpus++;
	return p;
}

/* Each observation onto its record (made when new) and GPU. */
static int take_observations(struct gpuctl_ledger *l, double wall,
                             const struct gpuctl_ledger_observation *obs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct gpuctl_ledger_observation *o = obs_at(obs, i);
		struct lg_rec *r = rec_find(l, o->kind, o->key);
		struct lg_gpu *g;
		int e;

		if (!r && (e = rec_new(l, o, wall, &r)) < 0)
			return e;
		r->seen = true;
		if (o->wait_s >= 0)
			r->n_tot.wait_s = o->wait_s;
		if (o->end != GPUCTL_LEDGER_END_NONE) {
			r->n_end = o->end;
			continue;
		}
		if (!(g = gpu_get(r, o->gpu_uuid)))
			return -ENOMEM;
		g->n_active = true;
		g->n_util = o->util_pct;
		g->n_energy = o->energy_mj;
		if (o->mem_used > r->n_tot.peak_mem)
			r->n_tot.peak_mem = o->mem_used;
	}
	return 0;
}

static void bind_text_opt(sqlite3_stmt *st, int i, const char *s)
{
	if (s)
		sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, i);
}

static int rec_insert(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l, struct lg_rec *r)
{
	sqlite3_stmt *st = l->stmt[LG_INSERT_REC];
	int e = 0;

	sqlite3_bind_text(st, 1, r->kind == GPUCTL_LEDGER_LEASE ? "lease" : "workload", -1,
	                  SQLITE_STATIC);
	sqlite3_bind_text(st, 2, r->key, -1, SQLITE_STATIC);
	bind_text_opt(st, 3, r->user);
	if (r->uid >= 0)
		sqlite3_bind_int64(st, 4, r->uid);
	else
		sqlite3_bind_null(st, 4);
	bind_text_opt(st, 5, r->group);
	bind_text_opt(st, 6, r->workload);
	bind_text_opt(st, 7, r->pool);
	sqlite3_bind_double(st, 8, r->start);
	if (sqlite3_step(st) != SQLITE_DONE)
		e = ledger_sql_error(ctx, l, "ledger: writing a record");
	else
		r->n_id = sqlite3_last_insert_rowid(l->db);
	sqlite3_reset(st);
	return e;
}

static int rec_update(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l, struct lg_rec *r,
                      double wall)
{
	sqlite3_stmt *st = l->stmt[LG_UPDATE_REC];
	_cleanup_(sbuf_done) struct sbuf gpus = SBUF_INIT;
	const struct lg_tot *t = &r->n_tot;
	int e = 0;

	for (size_t i = 0; i < r->n_gpus; i++)
		sbuf_printf(&gpus, "%s%s", i ? "," : "", r->gpus[i].uuid);
	if (gpus.oom)
		return -ENOMEM;
	sqlite3_bind_int64(st, 1, r->id ? r->id : r->n_id);
	sqlite3_bind_text(st, 2, gpus.p ? gpus.p : "", -1, SQLITE_STATIC);
	sqlite3_bind_double(st, 3, wall);
	if (r->n_end) {
		sqlite3_bind_double(st, 4, wall);
		sqlite3_bind_text(st, 5, gpuctl_ledger_end_name(r->n_end), -1, SQLITE_STATIC);
	} else {
		sqlite3_bind_null(st, 4);
		sqlite3_bind_null(st, 5);
	}
	if (t->wait_s >= 0)
		sqlite3_bind_double(st, 6, t->wait_s);
	else
		sqlite3_bind_null(st, 6);
	sqlite3_bind_double(st, 7, t->gpu_s);
	sqlite3_bind_double(st, 8, t->busy_s);
	if (t->util_known_s > 0)
		sqlite3_bind_double(st, 9, t->util_s / t->util_known_s);
	else
		sqlite3_bind_null(st, 9);
	if (t->peak_mem >= 0)
		sqlite3_bind_int64(st, 10, t->peak_mem);
	else
		sqlite3_bind_null(st, 10);
	if (t->has_energy)
		sqlite3_bind_double(st, 11, t->energy_mj);
	else
		sqlite3_bind_null(st, 11);
	if (t->first_hour <= t->last_hour) {
		sqlite3_bind_int64(st, 12, t->first_hour);
		sqlite3_bind_int64(st, 13, t->last_hour);
	} else {
		sqlite3_bind_null(st, 12);
		sqlite3_bind_null(st, 13);
	}
	if (sqlite3_step(st) != SQLITE_DONE)
		e = ledger_sql_error(ctx, l, "ledger: writing a record");
	sqlite3_reset(st);
	return e;
}

static int write_records(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l, double wall)
{
	int e;

	for (size_t i = 0; i < l->n_recs; i++) {
		struct lg_rec *r = l->recs[i];

		if (!r->seen)
			r->n_end = GPUCTL_LEDGER_END_GONE;
		if (!r->id && (e = rec_insert(ctx, l, r)) < 0)
			return e;
		if ((e = rec_update(ctx, l, r, wall)) < 0)
			return e;
	}
	return 0;
}

/* Before a sample: the in-flight fields from the stored ones. */
static void begin_sample(struct gpuctl_ledger *l)
{
	for (size_t i = 0; i < l->n_recs; i++) {
		struct lg_rec *r = l->recs[i];

		r->n_tot = r->tot;
		r->seen = false;
		r->n_end = 0;
		r->n_id = 0;
		for (size_t g = 0; g < r->n_gpus; g++) {
			r->gpus[g].n_active = false;
			r->gpus[g].n_util = -1;
			r->gpus[g].n_energy = -1;
		}
	}
}

/* After the sample: committed (the in-flight fields become the stored ones, ended records
 * leave) or not (what the sample added goes). */
static void end_sample(struct gpuctl_ledger *l, bool committed)
{
	size_t keep = 0;

	for (size_t i = 0; i < l->n_recs; i++) {
		struct lg_rec *r = l->recs[i];
		size_t kg = 0;

		if (committed ? r->n_end != 0 : r->id == 0) {
			ledger_rec_free(r);
			continue;
		}
		for (size_t g = 0; g < r->n_gpus; g++) {
			struct lg_gpu *p = &r->gpus[g];

			if (!committed && p->pending) {
				free(p->uuid);
				continue;
			}
			if (committed) {
				p->active = p->n_active;
				p->util = p->n_util;
				p->energy = p->n_energy;
			}
			p->pending = false;
			r->gpus[kg++] = *p;
		}
		r->n_gpus = kg;
		if (committed) {
			r->tot = r->n_tot;
			if (!r->id)
				r->id = r->n_id;
		}
		l->recs[keep++] = r;
	}
	l->n_recs = keep;
}

int gpuctl_ledger_observe(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l, double wall, double mono,
                          const struct gpuctl_ledger_observation *obs, size_t n)
{
	int r;

	if (!l || !l->writer)
		return ctx_error(ctx, -EBADF, "ledger: not opened as the writer");
	if (!isfinite(wall) || !isfinite(mono))
		return ctx_error(ctx, -EINVAL, "ledger: sample time is not a number");
	if ((r = obs_check(ctx, obs, n)) < 0)
		return r;
	begin_sample(l);
	if ((r = ledger_exec(ctx, l, "BEGIN IMMEDIATE")) < 0) {
		end_sample(l, false);
		return r;
	}
	if ((r = integrate(ctx, l, mono, obs, n)) < 0 ||
	    (r = take_observations(l, wall, obs, n)) < 0 || (r = write_records(ctx, l, wall)) < 0 ||
	    (r = ledger_exec(ctx, l, "COMMIT")) < 0) {
		if (r == -ENOMEM)
			ctx_error(ctx, r, "ledger: out of memory");
		sqlite3_exec(l->db, "ROLLBACK", NULL, NULL, NULL);
		end_sample(l, false);
		return r;
	}
	end_sample(l, true);
	if (!l->have_prev || mono > l->prev_mono) {
		l->prev_mono = mono;
		l->prev_wall = wall;
	}
	l->have_prev = true;
	if (wall - l->last_retention >= LEDGER_BUCKET_S)
		(void)ledger_retention(ctx, l, wall);
	return 0;
}
