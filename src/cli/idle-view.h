/* SPDX-License-Identifier: MIT */
/*
 * idle-view.h: the idle cases of a device (gpuctl_idle_*, docs/idle.md) as ps, list and top
 * show them: a JSON object and a few words.
 */
#ifndef GPUCTL_CLI_IDLE_VIEW_H
#define GPUCTL_CLI_IDLE_VIEW_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuctl/gpuctl.h"

/* Feeds snap and list (NULL: nothing leased) to t at CLOCK_MONOTONIC's now. 0 or -errno
 * (message on ctx). */
int idle_view_feed(struct gpuctl_ctx *ctx, struct gpuctl_idle *t,
                   const struct gpuctl_snapshot *snap, const struct gpuctl_lease_list *list);
/* One sample of snap and list in a tracker of the default settings, for a one-shot command
 * (ps, list); *ret NULL when it could not be made (nothing shown). */
void idle_view_once(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                    const struct gpuctl_lease_list *list, struct gpuctl_idle **ret);
/* The device's "idle" object (docs/json.md): one key per case that holds, each
 * {"seconds": N, "cause": ...} (cause for ghost only); seconds null when one_shot (a single
 * sample says "now", not since when). An empty object for none; NULL out of memory. */
json_t *idle_view_json(const struct gpuctl_idle *t, const char *uuid, bool one_shot);
/* The cases that hold as words into buf: "idle: lease, ghost memory" (one_shot), else
 * "idle 12m: lease"; "" for none. */
void idle_view_text(const struct gpuctl_idle *t, const char *uuid, bool one_shot, char *buf,
                    size_t size);

/* How long the lease of device (g, mig) of snap has been idle by t (docs/idle.md, "An idle
 * lease"): case (a) holds for it (no live compute process on it), or every live compute process
 * on it has been idle by (b) (below the threshold for a whole window), the lease then idle as
 * long as the most recently busy of them. Milliseconds, or -1 when it is not idle (or t is
 * NULL). The one rule of the agent's idle actions and ps's note. */
int64_t idle_view_lease_ms(const struct gpuctl_idle *t, const struct gpuctl_snapshot *snap,
                           size_t g, int mig);

/* s seconds as the configuration writes a duration ("2s", "30m", "8h", "7d") when whole, else
 * in minutes (from 2 minutes) or hours (from 2 hours), rounded down ("12m" for 750 s). */
void idle_view_duration(uint64_t s, char *buf, size_t size);

/* What the agent will do with a lease (owner ow) of a pool whose idle actions are c
 * (docs/idle.md, "Acting on idle leases"), for ps's NOTE: "released after 30m idle" (a --hold
 * lease idle now under idle_release), else "warned after 10m idle" (idle now under idle_warn),
 * then "taken back at 8h old (in 3h)" under max_lease_age (now: the wall clock). Shared leases
 * are only warned about. "" when nothing applies. */
void idle_view_plan_text(const struct gpuctl_config_idle *c, const struct gpuctl_lease_owner *ow,
                         bool idle_now, bool shared, double now, char *buf, size_t size);

#endif /* GPUCTL_CLI_IDLE_VIEW_H */
