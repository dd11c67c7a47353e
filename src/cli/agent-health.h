/* SPDX-License-Identifier: MIT */
/*
 * agent-health.h: the health watch of `gpuctl agent` (agent-health.c): `health --watch`'s
 * tracker (health-track.h) run on the agent's one sample (docs/agent.md, "The health watch").
 * Every function runs on the main thread, from the exporter loop's hook (exporter.h).
 */
#ifndef GPUCTL_CLI_AGENT_HEALTH_H
#define GPUCTL_CLI_AGENT_HEALTH_H

#include <stdbool.h>

#include "exporter.h"

struct agent_health;

struct agent_hooks;

/* The watch, keeping the health state file at state (NULL: none), its findings to hooks'
 * on_health (borrowed; NULL: none). 0, or -ENOMEM. */
int agent_health_new(const char *state, struct agent_hooks *hooks,
                     struct agent_health **ret_health);
void agent_health_free(struct agent_health *h);

/* A good sample: its XID events and snapshot checked with the previous sample's, the findings
 * that appear or clear logged on stderr, the state file rewritten. Failures are said on stderr
 * (once per streak) and do not stop the agent. */
void agent_health_sample(struct agent_health *h, const struct exporter_view *v);

/* The samples became overdue (NVML silent for silent_s seconds) or, overdue false, came again:
 * the nvml-hang finding and its clearing. */
void agent_health_overdue(struct agent_health *h, bool overdue, double silent_s);

/* Whether the GPU with this UUID was FAIL at the last check (a lost GPU is: `lost`) or not in
 * its snapshot (gone from the machine); false before the first check. */
bool agent_health_failed(const struct agent_health *h, const char *uuid);

#endif /* GPUCTL_CLI_AGENT_HEALTH_H */
