/* SPDX-License-Identifier: MIT */
/*
 * agent-idle.h: what the node agent does with idle and old leases (docs/idle.md, "Acting on idle
 * leases"): idle_warn, idle_release and max_lease_age of each pool, on the sample the agent's
 * hook sees; and whether a lease that ended was taken back (the ledger's "evicted").
 */
#ifndef GPUCTL_CLI_AGENT_IDLE_H
#define GPUCTL_CLI_AGENT_IDLE_H

#include <stdbool.h>
#include <stddef.h>

#include "exporter.h"

/* The agent's idle state across samples. Zero-initialised; agent_idle_free at the end. */
struct agent_idle {
	struct agent_idle_mark *marks; /* the holders warned in their current idle streak */
	size_t n_marks;
	struct gpuctl_lease_notices *notices; /* every user's notices, read for one sample */
	double notices_mono;                  /* the sample they were read for */
	bool failing;                         /* a lease could not be taken back (said once) */
	struct agent_hooks *hooks;            /* on_idle (borrowed), NULL: none */
};

/* Acts on sample v as its pools configure: a lease idle idle_warn long is logged once per idle
 * streak; a --hold lease idle idle_release long, and any lease older than max_lease_age, is
 * taken back (gpuctl_lease_evict). Never ends a process but a --hold holder. Each warning and
 * each lease taken back is also an on_idle event (docs/hooks.md). */
void agent_idle_sample(struct agent_idle *ai, const struct exporter_view *v);

/* Whether the lease of holder key ("PID@START", the ledger's) on GPU gpu_uuid, which sample v no
 * longer shows, was taken back: an eviction notice (seen or not, any user's) names that holder
 * and the GPU or one of its MIG devices. Reads the notices once per sample, when asked. */
bool agent_idle_evicted(struct agent_idle *ai, const struct exporter_view *v, const char *key,
                        const char *gpu_uuid);

void agent_idle_free(struct agent_idle *ai);

/* The pool index of GPU g of sample v (by its label; for gpuctl_config_pool_idle and the like),
 * SIZE_MAX for the default pool; *ret_name its label ("default" for the default pool). */
size_t agent_pool_index(const struct exporter_view *v, size_t g, const char **ret_name);

#endif /* GPUCTL_CLI_AGENT_IDLE_H */
