// SPDX-License-Identifier: MIT
/*
 * agent-events.c: on_lease_start and on_lease_end (agent-events.h; docs/hooks.md, "Events").
 *
 * Decisions:
 * - The events follow the ledger: they are made from a sample's observations after the sample
 *   was stored, so a hook hears of a lease exactly when its record starts and ends, with the
 *   record's ending reason (release, evicted, health-failover, gone). While the ledger cannot
 *   be written no lease event fires; they fire with the first sample written again.
 * - One event per holder (its key, PID@START), not per GPU: the ledger keeps a row per GPU, a
 *   hook wants to hear "alice's lease of GPUs 2,3 ended" once.
 * - An ending observation carries no facts of its holder: lease_end gives those the holder had at
 *   the last stored sample that observed it (its user, label, pool, GPUs), kept for that.
 * - A holder that moved off a failed GPU and goes on elsewhere (agent-failover.h) neither ends
 *   nor starts: its lease is the same.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent-events.h"
#include "format.h"

int agent_events_gpu(json_t *gpus, const struct exporter_view *v, const char *uuid)
{
	json_t *o = json_object(), *index = json_null();

	for (size_t g = 0; g < gpuctl_snapshot_gpu_count(v->snap); g++) {
		const char *u = gpuctl_gpu_str(gpuctl_snapshot_gpu(v->snap, g), GPUCTL_F_UUID);
		if (u && !strcmp(u, uuid)) {
			json_decref(index);
			index = json_integer((json_int_t)g);
			break;
		}
	}
	if (!o || json_put(o, "index", index) < 0 || json_put(o, "uuid", json_text(uuid)) < 0 ||
	    json_array_append_new(gpus, o) < 0) {
		json_decref(o);
		return -ENOMEM;
	}
	return 0;
}

/* The event of the holder of o[first] (kind lease): every observation of it in o with the same
 * ending (end: NONE for those held now). NULL: no memory. */
static json_t *holder_event(const struct exporter_view *v,
                            const struct gpuctl_ledger_observation *o, size_t n, size_t first,
                            int end)
{
	const struct gpuctl_ledger_observation *h = &o[first];
	json_t *e = json_object(), *gpus = json_array();
	unsigned long long pid = 0, start = 0;
	int r = e && gpus ? 0 : -ENOMEM;

	if (sscanf(h->key, "%llu@%llu", &pid, &start) != 2)
		pid = start = 0;
	for (size_t i = first; r == 0 && i < n; i++)
		if (o[i].kind == GPUCTL_LEDGER_LEASE && (o[i].end != 0) == (end != 0) &&
		    !strcmp(o[i].key, h->key))
			r = agent_events_gpu(gpus, v, o[i].gpu_uuid);
	if (r < 0 || json_put(e, "key", json_text(h->key)) < 0 ||
	    json_put(e, "pid", json_integer((json_int_t)pid)) < 0 ||
	    json_put(e, "start_time", json_integer((json_int_t)start)) < 0 ||
	    json_put(e, "user", json_string_or_null(h->user)) < 0 ||
	    json_put(e, "uid", h->uid >= 0 ? json_integer(h->uid) : json_null()) < 0 ||
	    json_put(e, "group", json_string_or_null(h->group)) < 0 ||
	    json_put(e, "label", json_string_or_null(h->workload)) < 0 ||
	    json_put(e, "pool", json_string_or_null(h->pool)) < 0 ||
	    json_put(e, "gpus", gpus) < 0) {
		json_decref(e);
		return NULL;
	}
	return e;
}

/* Whether o[i] is the first observation in o of its holder with that kind of ending. */
static bool first_of(const struct gpuctl_ledger_observation *o, size_t i)
{
	for (size_t k = 0; k < i; k++)
		if (o[k].kind == GPUCTL_LEDGER_LEASE && (o[k].end != 0) == (o[i].end != 0) &&
		    !strcmp(o[k].key, o[i].key))
			return false;
	return true;
}

/* Whether the holder key is observed (not ended) in o. */
static bool held_now(const struct gpuctl_ledger_observation *o, size_t n, const char *key)
{
	for (size_t k = 0; k < n; k++)
		if (o[k].kind == GPUCTL_LEDGER_LEASE && o[k].end == 0 && !strcmp(o[k].key, key))
			return true;
	return false;
}

void agent_events_leases(struct agent_hooks *h, const struct exporter_view *v,
                         const struct gpuctl_ledger_observation *o, size_t n,
                         agent_events_seen_fn seen, void *userdata, bool agent_start, json_t **last)
{
	bool ends = agent_hooks_wants(h, "lease_end"), starts = agent_hooks_wants(h, "lease_start");
	json_t *now = ends ? json_object() : NULL;

	/* the facts of every holder now, for its lease_end later (an ending has none) */
	for (size_t i = 0; now && i < n; i++) {
		json_t *e;
		if (o[i].kind == GPUCTL_LEDGER_LEASE && o[i].end == 0 && first_of(o, i) &&
		    (e = holder_event(v, o, n, i, 0)))
			(void)json_object_set_new(now, o[i].key, e);
	}
	for (size_t i = 0; ends && i < n; i++) {
		json_t *e, *before;
		if (o[i].kind != GPUCTL_LEDGER_LEASE || o[i].end == 0 || !first_of(o, i) ||
		    held_now(o, n, o[i].key))
			continue;
		before = *last ? json_object_get(*last, o[i].key) : NULL;
		e = before ? json_deep_copy(before) : holder_event(v, o, n, i, o[i].end);
		if (!e || json_put(e, "reason", json_text(gpuctl_ledger_end_name(o[i].end))) < 0) {
			json_decref(e);
			cli_error("agent: hook on_lease_end: %s (event not run)", strerror(ENOMEM));
			continue;
		}
		agent_hooks_fire(h, "lease_end", e);
	}
	json_decref(*last);
	*last = now;
	for (size_t i = 0; starts && i < n; i++) {
		json_t *e;
		if (o[i].kind != GPUCTL_LEDGER_LEASE || o[i].end != 0 || !first_of(o, i) ||
		    seen(userdata, o[i].key))
			continue;
		if (!(e = holder_event(v, o, n, i, 0)) ||
		    json_put(e, "agent_start", json_boolean(agent_start)) < 0) {
			json_decref(e);
			cli_error("agent: hook on_lease_start: %s (event not run)",
			          strerror(ENOMEM));
			continue;
		}
		agent_hooks_fire(h, "lease_start", e);
	}
}
