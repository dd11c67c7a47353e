/* SPDX-License-Identifier: MIT */
/*
 * agent-events.h: the events of the agent's lease hooks (agent-events.c; docs/hooks.md):
 * on_lease_start and on_lease_end, made from the ledger's observations of one stored sample.
 */
#ifndef GPUCTL_CLI_AGENT_EVENTS_H
#define GPUCTL_CLI_AGENT_EVENTS_H

#include <stdbool.h>
#include <stddef.h>

#include "agent-hooks.h"
#include "exporter.h"

/* Whether the holder with this key (a lease's PID@START) was observed at the last stored
 * sample. */
typedef bool (*agent_events_seen_fn)(void *userdata, const char *key);

/* One lease_end per lease holder that o[0..n) ends (its reason, and its facts from *last), then
 * one lease_start per lease holder observed in o that seen() says was not (its GPUs now);
 * agent_start: the agent's first stored sample (the lease may be older than the agent). *last:
 * the caller's (NULL at first, json_decref at the end): the facts of the holders of the last
 * stored sample, replaced with this one's. */
void agent_events_leases(struct agent_hooks *h, const struct exporter_view *v,
                         const struct gpuctl_ledger_observation *o, size_t n,
                         agent_events_seen_fn seen, void *userdata, bool agent_start,
                         json_t **last);

/* [{"index": N, "uuid": "GPU-..."}] item for the GPU with this UUID of v (index null when
 * the sample does not have it) appended to gpus: 0, or -ENOMEM. */
int agent_events_gpu(json_t *gpus, const struct exporter_view *v, const char *uuid);

#endif /* GPUCTL_CLI_AGENT_EVENTS_H */
