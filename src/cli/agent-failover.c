// SPDX-License-Identifier: MIT
/*
 * agent-failover.c: the agent's health-failover endings (docs/agent.md, "Endings"): a holder
 * whose GPU failed under it and that left the GPU ends `health-failover`.
 *
 * Decisions:
 * - "Failed under it": the holder was observed on the GPU at a stored sample where the GPU
 *   was not FAIL, and the GPU is FAIL now by the agent's health watch (agent-health.h: a lost
 *   GPU is, and so is one gone from the machine). A holder that took a GPU already FAIL
 *   (--allow-unhealthy) ends as usual. This file keeps, per holder and GPU of the last stored
 *   sample, whether that was so; nothing else.
 * - A holder observed on no GPU now ends health-failover instead of the caller's reason.
 * - A holder observed now on other GPUs (`run --retry` keeps its lease and relaunches on a
 *   replacement) moved: the ledger keeps one record per holder key and has no per-GPU ending,
 *   so its record ends health-failover at this sample and a new one starts at the same
 *   sample, by two ledger calls at the same (wall, mono): the first with the holder ended and
 *   everything else as observed, the second with the holders observed now (a call whose
 *   monotonic time is not after the previous one's integrates nothing: docs/ledger.md).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "agent-failover.h"

/* A holder on a GPU at a sample. */
struct seen_on {
	int kind;     /* enum gpuctl_ledger_kind */
	char *key;    /* the holder's key */
	char *gpu;    /* the GPU's UUID */
	bool healthy; /* observed on it at a stored sample when it was not FAIL */
};

struct agent_failover {
	struct seen_on *prev; /* the last stored sample's holders */
	size_t n_prev;
	struct seen_on *next; /* this sample's, until it is stored */
	size_t n_next;
};

static void seen_free(struct seen_on *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(s[i].key);
		free(s[i].gpu);
	}
	free(s);
}

void failover_calls_free(struct failover_calls *c)
{
	free(c->first);
	free(c->second);
	*c = (struct failover_calls){0};
}

int agent_failover_new(struct agent_failover **ret_failover)
{
	struct agent_failover *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	*ret_failover = f;
	return 0;
}

void agent_failover_free(struct agent_failover *f)
{
	if (!f)
		return;
	seen_free(f->prev, f->n_prev);
	seen_free(f->next, f->n_next);
	free(f);
}

void agent_failover_commit(struct agent_failover *f)
{
	seen_free(f->prev, f->n_prev);
	f->prev = f->next;
	f->n_prev = f->n_next;
	f->next = NULL;
	f->n_next = 0;
}

/* Whether (kind, key) is observed now (not ending) in obs, and on gpu unless it is NULL. */
static bool observed(const struct gpuctl_ledger_observation *obs, size_t n, int kind,
                     const char *key, const char *gpu)
{
	for (size_t i = 0; i < n; i++)
		if (obs[i].end == GPUCTL_LEDGER_END_NONE && obs[i].kind == kind &&
		    !strcmp(obs[i].key, key) && (!gpu || !strcmp(obs[i].gpu_uuid, gpu)))
			return true;
	return false;
}

/* Whether holder p of the last stored sample was on a GPU that failed under it. */
static bool failed_under(const struct agent_health *h, const struct seen_on *p)
{
	return p->healthy && agent_health_failed(h, p->gpu);
}

/* Whether p moved off a GPU that failed under it: observed now, not on that GPU. */
static bool moved(const struct agent_health *h, const struct seen_on *p,
                  const struct gpuctl_ledger_observation *obs, size_t n)
{
	return failed_under(h, p) && observed(obs, n, p->kind, p->key, NULL) &&
	       !observed(obs, n, p->kind, p->key, p->gpu);
}

/* Whether (kind, key) on gpu was healthy at the last stored sample. */
static bool was_healthy(const struct agent_failover *f, int kind, const char *key, const char *gpu)
{
	for (size_t i = 0; i < f->n_prev; i++)
		if (f->prev[i].kind == kind && !strcmp(f->prev[i].key, key) &&
		    !strcmp(f->prev[i].gpu, gpu))
			return f->prev[i].healthy;
	return false;
}

/* This sample's holders, each with whether it was on its GPU while healthy. -ENOMEM. */
static int note_holders(struct agent_failover *f, const struct agent_health *h,
                        const struct gpuctl_ledger_observation *obs, size_t n)
{
	seen_free(f->next, f->n_next);
	f->next = calloc(n ? n : 1, sizeof(*f->next));
	f->n_next = 0;
	if (!f->next)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct gpuctl_ledger_observation *o = &obs[i];
		struct seen_on *s = &f->next[f->n_next];

		if (o->end != GPUCTL_LEDGER_END_NONE)
			continue;
		s->kind = o->kind;
		s->healthy = !agent_health_failed(h, o->gpu_uuid) ||
		             was_healthy(f, o->kind, o->key, o->gpu_uuid);
		s->key = strdup(o->key);
		s->gpu = strdup(o->gpu_uuid);
		f->n_next++;
		if (!s->key || !s->gpu)
			return -ENOMEM;
	}
	return 0;
}

/* Appends o to *arr (n entries). -ENOMEM. */
static int push(struct gpuctl_ledger_observation **arr, size_t *n,
                const struct gpuctl_ledger_observation *o)
{
	struct gpuctl_ledger_observation *p = realloc(*arr, (*n + 1) * sizeof(*p));

	if (!p)
		return -ENOMEM;
	p[(*n)++] = *o;
	*arr = p;
	return 0;
}

/* Whether an observation of (kind, key) is in c's first call already. */
static bool in_first(const struct failover_calls *c, int kind, const char *key)
{
	for (size_t i = 0; i < c->n_first; i++)
		if (c->first[i].kind == kind && !strcmp(c->first[i].key, key))
			return true;
	return false;
}

/* The two calls for the holders that moved. -ENOMEM. */
static int plan_moves(const struct agent_failover *f, const struct agent_health *h,
                      const struct exporter_view *v, failover_facts_fn facts,
                      const struct gpuctl_ledger_observation *obs, size_t n,
                      struct failover_calls *c)
{
	int r = 0;

	for (size_t i = 0; r == 0 && i < n; i++) {
		bool gone = false;
		for (size_t k = 0; k < f->n_prev && !gone; k++)
			gone = f->prev[k].kind == obs[i].kind &&
			       !strcmp(f->prev[k].key, obs[i].key) && moved(h, &f->prev[k], obs, n);
		if (obs[i].end == GPUCTL_LEDGER_END_NONE)
			r = push(&c->second, &c->n_second, &obs[i]);
		if (r == 0 && !gone)
			r = push(&c->first, &c->n_first, &obs[i]);
	}
	/* one ending for each moved holder, on the failed GPU it left */
	for (size_t k = 0; r == 0 && k < f->n_prev; k++) {
		const struct seen_on *p = &f->prev[k];
		struct gpuctl_ledger_observation o = GPUCTL_LEDGER_OBSERVATION_INIT;

		if (!moved(h, p, obs, n) || in_first(c, p->kind, p->key))
			continue;
		o.kind = p->kind;
		o.key = p->key;
		o.gpu_uuid = p->gpu;
		o.end = GPUCTL_LEDGER_END_FAILOVER;
		facts(v, p->gpu, &o);
		r = push(&c->first, &c->n_first, &o);
	}
	return r;
}

int agent_failover_plan(struct agent_failover *f, const struct agent_health *health,
                        const struct exporter_view *v, failover_facts_fn facts,
                        struct gpuctl_ledger_observation *obs, size_t n,
                        struct failover_calls *ret_calls)
{
	bool any = false;
	int r;

	*ret_calls = (struct failover_calls){0};
	if ((r = note_holders(f, health, obs, n)) < 0)
		return r;
	/* ended now: on a GPU of the last sample that failed under it */
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; obs[i].end != GPUCTL_LEDGER_END_NONE && k < f->n_prev; k++)
			if (f->prev[k].kind == obs[i].kind && !strcmp(f->prev[k].key, obs[i].key) &&
			    failed_under(health, &f->prev[k]))
				obs[i].end = GPUCTL_LEDGER_END_FAILOVER;
	for (size_t k = 0; k < f->n_prev && !any; k++)
		any = moved(health, &f->prev[k], obs, n);
	if (!any)
		return 0;
	r = plan_moves(f, health, v, facts, obs, n, ret_calls);
	if (r < 0)
		failover_calls_free(ret_calls);
	return r;
}
