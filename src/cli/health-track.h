/* SPDX-License-Identifier: MIT */
/*
 * health-track.h: the health watch's finding tracker (health-track.c), the one code that
 * `gpuctl health --watch` (health-watch.c) and `gpuctl agent` (agent-health.c) run on their
 * samples: the XIDs seen (kernel log, health state file, NVML events), the check of each
 * snapshot with the one before, a line for each finding as it appears and as it clears, the
 * nvml-hang finding and the health state file (docs/health.md, "Watching").
 *
 * Who owns what: the tracker owns its XID log and what the last check printed; the snapshots
 * it is given are the caller's, read during the call only. It calls no NVML (it runs on the
 * thread that prints): the caller's sampler and event threads do.
 */
#ifndef GPUCTL_CLI_HEALTH_TRACK_H
#define GPUCTL_CLI_HEALTH_TRACK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "gpuctl/gpuctl.h"

struct health_track_config {
	FILE *out;         /* where the text lines go (stdout for --watch, stderr for the agent) */
	bool json;         /* JSON lines on stdout instead of text lines (docs/json.md) */
	bool strict;       /* --strict */
	const char *kmsg;  /* the kernel log to read (NULL: /dev/kmsg) */
	bool kmsg_named;   /* it must be readable */
	const char *state; /* the health state file to keep, NULL: none (copied) */
	const char *who;   /* what the warnings name: "--watch", "agent" */
	const size_t *sel; /* the GPUs whose findings are printed (copied), NULL: every GPU */
	size_t nsel;       /* how many */
	/* NULL, or each line's JSON object (as --format json prints it; a reference taken over)
	 * with the finding's severity (for a clearing, the severity of what cleared; nvml-hang
	 * WARN): the agent's on_health hook */
	void (*on_line)(void *userdata, json_t *line, int severity);
	void *userdata;
};

struct health_track;

/* Starts tracking at the first snapshot: the XIDs of the kernel log and those the state file
 * recorded earlier in this boot (an unreadable state file is said once on stderr; it is
 * written afresh). 0; -ENOMEM; or the kernel log's -errno when it was named and cannot be
 * read (message on ctx). */
int health_track_new(struct gpuctl_ctx *ctx, const struct health_track_config *cfg,
                     const struct gpuctl_snapshot *snap, struct health_track **ret_track);
void health_track_free(struct health_track *t);

/* The XIDs seen, indexed by the snapshots' GPUs: NVML's events are appended to it. */
struct gpuctl_xid_log *health_track_xids(struct health_track *t);

/* A new snapshot: with NVML events (events), the GPUs the kernel log shows reset since the
 * last look start over (docs/health.md, "After a reset"); without, the kernel log is read
 * again for snap. 0, or -ENOMEM. */
int health_track_follow(struct gpuctl_ctx *ctx, struct health_track *t,
                        const struct gpuctl_snapshot *snap, bool events);

/* Checks snap with the XIDs seen (prev: the snapshot age_s seconds before it, for the rate
 * rules; NULL: none), prints what is new and what cleared since the last check and rewrites
 * the state file (a failure said once on stderr). 0, or -errno (message on ctx). */
int health_track_check(struct gpuctl_ctx *ctx, struct health_track *t,
                       const struct gpuctl_snapshot *snap, const struct gpuctl_snapshot *prev,
                       double age_s);

/* The worst verdict of the selected GPUs at the last check (GPUCTL_HEALTH_OK before one). */
int health_track_worst(const struct health_track *t);

/* The verdict of the GPU with this UUID at the last check: a gpuctl_health_severity, or -1
 * when that check did not have the GPU. */
int health_track_verdict(const struct health_track *t, const char *uuid);

/* The nvml-hang finding (no GPU's): NVML silent for silent_s seconds, or (cleared) answering
 * again. Printed as the other findings are. */
void health_track_nvml(const struct health_track *t, bool cleared, double silent_s);

#endif /* GPUCTL_CLI_HEALTH_TRACK_H */
