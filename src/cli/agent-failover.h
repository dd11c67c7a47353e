/* SPDX-License-Identifier: MIT */
/*
 * agent-failover.h: the agent's health-failover endings (agent-failover.c; docs/agent.md,
 * "Endings"): which holders left a GPU that failed under them, and the ledger calls that
 * record it. Every function runs on the main thread, in the agent's hook.
 */
#ifndef GPUCTL_CLI_AGENT_FAILOVER_H
#define GPUCTL_CLI_AGENT_FAILOVER_H

#include <stddef.h>

#include "agent-health.h"
#include "exporter.h"

struct agent_failover;

/* One sample's ledger calls when a holder moved off a failed GPU: first, then second, at the
 * same sample time (the second integrates nothing). Their strings are the caller's
 * observations' and the failover's, valid until agent_failover_commit. */
struct failover_calls {
	struct gpuctl_ledger_observation *first;  /* every observation, the moved holders' ended */
	size_t n_first;                           /* 0: no holder moved, one call as usual */
	struct gpuctl_ledger_observation *second; /* the holders observed now: the moved ones'
	                                           * new records */
	size_t n_second;
};
void failover_calls_free(struct failover_calls *c);

/* The facts of the GPU with this UUID that every observation on it carries (pool,
 * utilisation, energy), for the ending a failover adds: the caller's. */
typedef void (*failover_facts_fn)(const struct exporter_view *v, const char *uuid,
                                  struct gpuctl_ledger_observation *o);

int agent_failover_new(struct agent_failover **ret_failover);
void agent_failover_free(struct agent_failover *f);

/* The sample's observations obs (the holders observed now, and an ending for each holder of
 * the last stored sample observed nowhere now): the endings of holders gone from a GPU that
 * failed under them become health-failover, in obs; and when a holder is observed now but no
 * longer on such a GPU, *ret_calls gets the two calls (else it stays empty: obs is the one
 * call). health: the agent's watch, whose verdicts say which GPUs failed. -ENOMEM. */
int agent_failover_plan(struct agent_failover *f, const struct agent_health *health,
                        const struct exporter_view *v, failover_facts_fn facts,
                        struct gpuctl_ledger_observation *obs, size_t n,
                        struct failover_calls *ret_calls);

/* The sample was stored (its first call): what it observed is what the next plan compares
 * with. */
void agent_failover_commit(struct agent_failover *f);

#endif /* GPUCTL_CLI_AGENT_FAILOVER_H */
