// SPDX-License-Identifier: MIT
/*
 * agent-health.c: the health watch of `gpuctl agent`: the tracker of `gpuctl health --watch`
 * (health-track.h), fed by the agent's one sample instead of a sampler of its own (issue 27:
 * "the agent runs the same code, not a copy of it").
 *
 * Decisions:
 * - No second NVML reader: the snapshot is the exporter loop's (its health fields are read
 *   for gpuctl_gpu_health anyway), and the XIDs are the events the loop drains on the
 *   sampler's thread with each sample (exporter_view.xid_events), checked in the same hook
 *   call, so an XID is reported with the sample that drained it: within one interval. Without
 *   XID events the kernel log is read again at every sample, as `--watch` does.
 * - The rate rules get the previous good sample's snapshot as `prev` (this file holds it).
 * - The findings are the watch's text lines on stderr (the journal, under systemd), the same
 *   text as `health --watch` prints; the state file is the watch's (docs/health.md, "State
 *   file"). The kernel log: $GPUCTL_KMSG, else /dev/kmsg, and it may be unreadable (the
 *   service's ProtectKernelLogs): the NVML events are then the only source of XIDs.
 * - Each WARN or FAIL finding that appears, and each that clears, is also the on_health hook's
 *   event (agent-hooks.h): the watch's JSON line (docs/hooks.md).
 * - The tracker starts at the first good sample; when it cannot (out of memory) that is said
 *   once and tried again at every sample.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent-health.h"
#include "agent-hooks.h"
#include "health-track.h"
#include "sampler.h"

struct agent_health {
	char *state;                       /* the state file, NULL: none */
	struct health_track *track;        /* NULL until the first good sample */
	const struct sampler_sample *prev; /* the previous good sample (held), NULL: none */
	double prev_mono;                  /* when it began, CLOCK_MONOTONIC seconds */
	bool failing;                      /* the last try failed (said once per streak) */
	bool checked;                      /* a check was made (the verdicts are known) */
	struct agent_hooks *hooks;         /* on_health (borrowed), NULL: none */
};

int agent_health_new(const char *state, struct agent_hooks *hooks, struct agent_health **ret_health)
{
	struct agent_health *h = calloc(1, sizeof(*h));

	if (!h || (state && !(h->state = strdup(state)))) {
		free(h);
		return -ENOMEM;
	}
	h->hooks = hooks;
	*ret_health = h;
	return 0;
}

void agent_health_free(struct agent_health *h)
{
	if (!h)
		return;
	health_track_free(h->track);
	sampler_put(h->prev);
	free(h->state);
	free(h);
}

/* health_track_config.on_line: a WARN or FAIL finding, or its clearing, to on_health. */
static void on_line(void *userdata, json_t *line, int severity)
{
	struct agent_health *h = userdata;

	if (severity < GPUCTL_HEALTH_WARN) {
		json_decref(line);
		return;
	}
	agent_hooks_fire(h->hooks, "health", line);
}

/* The tracker, started at the first good sample. 0, or -errno (message on ctx). */
static int start(struct agent_health *h, const struct exporter_view *v)
{
	const char *kmsg = getenv("GPUCTL_KMSG");
	struct health_track_config cfg = {.out = stderr,
	                                  .kmsg = kmsg && kmsg[0] ? kmsg : NULL,
	                                  .state = h->state,
	                                  .who = "the agent's health watch",
	                                  .on_line = agent_hooks_wants(h->hooks, "health") ? on_line
	                                                                                   : NULL,
	                                  .userdata = h};

	return health_track_new(v->ctx, &cfg, v->snap, &h->track);
}

/* The sample's XID events into the tracker's log. -ENOMEM. */
static int add_events(struct health_track *t, const struct gpuctl_xid_log *events)
{
	struct gpuctl_xid_log *log = health_track_xids(t);

	for (size_t i = 0; events && i < gpuctl_xid_log_count(events); i++) {
		const char *text = NULL;
		unsigned xid;
		size_t gpu;

		if (gpuctl_xid_log_get(events, i, &gpu, &xid, &text) == 0 &&
		    gpuctl_xid_log_add(log, gpu, xid, text) < 0)
			return -ENOMEM;
	}
	return 0;
}

void agent_health_sample(struct agent_health *h, const struct exporter_view *v)
{
	const struct gpuctl_snapshot *prev = exporter_sample_snapshot(h->prev);
	int r;

	if (!h->track)
		r = start(h, v);
	else
		r = health_track_follow(v->ctx, h->track, v->snap, v->xid_events != NULL);
	if (r >= 0)
		r = add_events(h->track, v->xid_events);
	if (r >= 0)
		r = health_track_check(v->ctx, h->track, v->snap, prev,
		                       prev ? v->mono - h->prev_mono : 0);
	if (r < 0) {
		if (!h->failing)
			cli_error("agent: health watch: %s (trying again every sample)",
			          r == -ENOMEM ? strerror(ENOMEM) : gpuctl_errmsg(v->ctx));
		h->failing = true;
		return;
	}
	if (h->failing)
		cli_error("agent: health watch: checking again");
	h->failing = false;
	h->checked = true;
	sampler_put(h->prev);
	h->prev = sampler_hold(v->sample);
	h->prev_mono = v->mono;
}

void agent_health_overdue(struct agent_health *h, bool overdue, double silent_s)
{
	if (h->track)
		health_track_nvml(h->track, !overdue, silent_s);
}

bool agent_health_failed(const struct agent_health *h, const char *uuid)
{
	int v = h->checked ? health_track_verdict(h->track, uuid) : GPUCTL_HEALTH_OK;

	return v == GPUCTL_HEALTH_FAIL || v < 0;
}
