/* SPDX-License-Identifier: MIT */
/*
 * usage-counters.h: the exporter's usage counters (docs/metrics.md, "Usage counters"): per GPU,
 * the seconds it was held (by a lease, or by a workload running on it without one), of those
 * the seconds it was busy, and the energy it used meanwhile, integrated sample by sample the way
 * the ledger integrates (docs/ledger.md, "Integration"), so that `gpuctl exporter` and `gpuctl
 * agent` (which runs the exporter's loop) count what the agent's ledger records.
 *
 * Decisions:
 * - Who holds a GPU: in the agent, the GPUs its ledger recorded a holder on at that sample
 *   (the hook says so: one decision, so the page and the ledger cannot disagree about a process
 *   that exits between two looks); in `gpuctl exporter` alone the same rule
 *   (usage_counters_held_now, docs/agent.md "What it records"): a lease entry held with an
 *   owner record, or shared with at least one; or a compute process of no lease
 *   (gpuctl_foreign_scan) that is alive now and whose workload is known. A lost GPU holds
 *   nothing.
 * - Each sample's state holds until the next: at sample k the interval since sample k-1 is
 *   added with sample k-1's states (held, busy: utilisation above the ledger's default
 *   threshold, energy counter), by CLOCK_MONOTONIC, so a wall clock that steps adds nothing
 *   wrong. Energy is the GPU counter's rise over an interval that was held, when it was read at
 *   both ends and did not go back (a driver reload).
 * - The totals are kept per UUID for the process's life: a GPU that is lost or gone keeps its
 *   totals (its series come back with them), and an index that changes does not move them.
 * - Main thread only (the workload cache is not thread-safe).
 */
#ifndef GPUCTL_CLI_USAGE_COUNTERS_H
#define GPUCTL_CLI_USAGE_COUNTERS_H

#include <stdbool.h>
#include <stddef.h>

#include "gpuctl/gpuctl.h"

/* One GPU's totals since the exporter started. */
struct usage_totals {
	double held_s;     /* seconds held */
	double busy_s;     /* of those, seconds its utilisation was above the busy threshold */
	double energy_j;   /* joules its energy counter rose while held */
	bool energy_known; /* the GPU's energy counter was read at some sample */
};

struct usage_counters;

int usage_counters_new(struct usage_counters **ret);
void usage_counters_free(struct usage_counters *uc);

/* Sample snap, taken at mono (CLOCK_MONOTONIC seconds), step one: adds the interval since the
 * previous sample to the GPUs the previous sample held, with that sample's states (busy,
 * energy: the counter's rise to snap's reading). Makes the entries of snap's GPUs. 0 or
 * -ENOMEM (then nothing changed). */
int usage_counters_advance(struct usage_counters *uc, const struct gpuctl_snapshot *snap,
                           double mono);
/* Step two: snap's own states, held[g] for each GPU g of snap (held_now's, or what the agent's
 * ledger recorded), kept for the next sample. */
void usage_counters_hold(struct usage_counters *uc, const struct gpuctl_snapshot *snap,
                         const bool *held);
/* Which GPUs of snap are held (held[g], zeroed by the caller), by the agent's rule: leases (NULL:
 * none), processes of no lease (foreign NULL: unknown, then leases only) alive now and of a known
 * workload in wls (NULL: none). */
void usage_counters_held_now(struct gpuctl_ctx *ctx, struct gpuctl_workloads *wls,
                             const struct gpuctl_snapshot *snap,
                             const struct gpuctl_lease_list *leases,
                             const struct gpuctl_foreign *foreign, bool *held);

/* The totals of the GPU of UUID uuid, NULL when no sample had it. */
const struct usage_totals *usage_counters_get(const struct usage_counters *uc, const char *uuid);

#endif /* GPUCTL_CLI_USAGE_COUNTERS_H */
