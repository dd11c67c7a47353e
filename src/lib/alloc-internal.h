/* SPDX-License-Identifier: MIT */
/*
 * alloc-internal.h: what the files of gpuctl_alloc() share: the plan (one request being served)
 * and the steps one file hands to another. Private to the composition in src/lib; the files, in
 * the order they build on each other:
 *   alloc-plan.c   the plan of one snapshot: the avoided GPUs, health, the outer allocation,
 *                  the pool, the system lease directory; CHOOSE/PREVIEW's exclusion of the
 *                  leased and foreign devices
 *   alloc-wait.c   "can never be satisfied", and waiting in line (LEASE with wait)
 *   alloc.c        the call: the request checked, the site opened, the mode's path taken, the
 *                  result
 */
#ifndef GPUCTL_ALLOC_INTERNAL_H
#define GPUCTL_ALLOC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gpuctl/gpuctl.h"
#include "lease-internal.h"

/* The result of gpuctl_alloc() (a request's replace names one: alloc-wait.c reads its lease). */
struct gpuctl_alloc {
	struct gpuctl_site *site;            /* owned: the lease directory the lease is in */
	struct gpuctl_snapshot *snap;        /* owned */
	struct gpuctl_selection *sel;        /* owned */
	struct gpuctl_lease *lease;          /* owned, NULL unless LEASE */
	struct gpuctl_health_report *health; /* owned, NULL with allow_unhealthy */
	char *cuda_visible;                  /* owned: the UUIDs, comma-separated */
};

/* One request being served: the request as given (full size), what gpuctl_select is asked,
 * and the sets that request points to (owned here, recomputed per snapshot). */
struct plan {
	struct gpuctl_ctx *ctx;
	struct gpuctl_alloc_request in;   /* the caller's request, defaults past its size */
	struct gpuctl_select_request req; /* points into the sets below */
	struct gpuctl_lease_request lreq; /* thresholds, margin, share, label, command */
	struct gpuctl_site *site;         /* owned until handed to the result */
	unsigned flags;                   /* snapshot flags */
	enum gpuctl_field fields[GPUCTL__F_COUNT + 8];
	size_t n_fields;
	struct gpuctl_snapshot *snap; /* the current snapshot, owned */
	struct gpuctl_health_report *health;
	struct gpuctl_devset *within, *pool, *unhealthy, *warned, *leased, *foreign;
	char *exclude;                    /* in.exclude plus the avoided GPUs still listed */
	char no_room[160];                /* CHOOSE/PREVIEW with share_mem: devices without room */
	size_t ahead;                     /* CHOOSE/PREVIEW: live waiters in the queue */
	size_t n_reserved;                /* CHOOSE/PREVIEW: devices they could use (kept out) */
	struct gpuctl_devset *sys_leased; /* leased in the system lease directory (another one
	                                   * is used: plan_system_dir) */
	char sys_note[256];               /* what the system directory kept from us, for -ENOSPC */
	struct lease_gate gate;           /* the quotas' (alloc-quota.c) */
	struct gpuctl_ledger *quota_ledger; /* owned: the ledger the GPU-hour quotas read */
	bool quota_ledger_tried;            /* opened it (or found none) */
	bool quota_never;                   /* a quota refused what it will always refuse */
};

/* alloc-plan.c */

/* Frees every set computed from the current snapshot (and the health report), keeping the
 * snapshot. */
void alloc_plan_sets_free(struct plan *p);

/* A fresh snapshot and every set computed from it (a waiter calls this before every try). */
int alloc_plan_snapshot(struct plan *p);

/* CHOOSE and PREVIEW: the devices leased now (and for PREVIEW, busy without a lease) go to
 * req.leased / req.foreign; with share_mem, the devices without room for it to req.leased. */
int alloc_plan_exclude_leased(struct plan *p);

/* r, or with r == -ENOSPC after a shared CHOOSE/PREVIEW found devices without room, the
 * context's message with "(no room to share 4 GiB: 0,3)" added. */
int alloc_no_space_with_room(struct plan *p, int r);

/* alloc-quota.c */

/* LEASE: the gate select-and-lease calls for the configuration's quotas (docs/config.md
 * "Quotas"), NULL when the configuration sets none. Points into p. */
const struct lease_gate *alloc_quota_gate(struct plan *p);

/* alloc-wait.c */

/* 0, or -ENOSPC when SIZE of a shared request is more than the devices it may use can ever take
 * ("--mem SIZE: ...: can never be satisfied"). */
int alloc_never_shares(struct plan *p);

/* LEASE with wait: in line until the devices are ours, the deadline passes, cancel_fd is ready
 * or a signal comes. */
int alloc_wait_lease(struct plan *p, struct gpuctl_selection **ret_sel,
                     struct gpuctl_lease **ret_lease);

#endif
