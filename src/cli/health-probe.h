/* SPDX-License-Identifier: MIT */
/*
 * health-probe.h: `gpuctl health --probe`: CUDA tried on each GPU by a child process that sees
 * only that GPU, under a timeout (health-probe.c says the decisions).
 */
#ifndef GPUCTL_CLI_HEALTH_PROBE_H
#define GPUCTL_CLI_HEALTH_PROBE_H

#include <jansson.h>
#include <stddef.h>

#include "gpuctl/gpuctl.h"

struct probe_child;

/* The probes' outcomes, for gpuctl_health_opts.probes. */
struct health_probes {
	struct gpuctl_probe_result *res; /* by snapshot index, n entries (NULL: none) */
	size_t n;                        /* the snapshot's GPUs */
	struct probe_child *kids;        /* the children; res[].detail points into them */
};

/* Probes GPUs sel[0..nsel) of snap in parallel, each for at most timeout_s seconds, into *p
 * (freed with health_probes_free, also after a failure). Returns 0, or an exit status after
 * printing the error. */
int health_probe(const struct gpuctl_snapshot *snap, const size_t *sel, size_t nsel,
                 unsigned timeout_s, struct health_probes *p);
void health_probes_free(struct health_probes *p);

/* GPU gpu's probe for the JSON: {"result", "ms", "passed": the CUDA calls that
 * succeeded}, JSON null when it was not probed (or p is NULL: no --probe); NULL on allocation
 * failure. */
json_t *health_probe_json(const struct health_probes *p, size_t gpu);
/* The chosen GPUs by outcome, {"passed", "failed", "not_probed"}: lists of indices; JSON null
 * without --probe (p NULL); NULL on allocation failure. */
json_t *health_probe_summary_json(const struct health_probes *p, const size_t *sel, size_t nsel);
/* The same as one line of text, "CUDA probe passed on GPU 0, 1; failed on GPU 2"; nothing
 * without --probe. */
void health_probe_summary(const struct health_probes *p, const size_t *sel, size_t nsel);

/* `gpuctl health --probe-child`: the probe itself, here, with the environment the parent set.
 * Returns the exit status. */
int health_probe_child(void);

#endif
