// SPDX-License-Identifier: MIT
/*
 * idle-view.c: the idle cases of a device as ps, list and top show them (docs/idle.md).
 *
 * Decisions:
 * - A one-shot command has one sample: it can say that a lease has no process or that memory
 *   is held with no live process now, never since when, and never (b), which needs a window of
 *   samples. Its JSON says so with "seconds": null.
 * - In words the cases are "lease" (no process), "process" (idle process), "ghost memory";
 *   the duration is the longest case's.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "format.h"
#include "idle-view.h"

int idle_view_feed(struct gpuctl_ctx *ctx, struct gpuctl_idle *t,
                   const struct gpuctl_snapshot *snap, const struct gpuctl_lease_list *list)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return gpuctl_idle_feed(ctx, t, (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000,
	                        snap, list);
}

void idle_view_once(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                    const struct gpuctl_lease_list *list, struct gpuctl_idle **ret)
{
	struct gpuctl_idle *t = NULL;
	*ret = NULL;
	if (gpuctl_idle_new(NULL, &t) < 0)
		return;
	if (idle_view_feed(ctx, t, snap, list) < 0) {
		gpuctl_idle_free(t);
		return;
	}
	*ret = t;
}

json_t *idle_view_json(const struct gpuctl_idle *t, const char *uuid, bool one_shot)
{
	json_t *o = json_object();
	for (int c = 0; o && t && c < GPUCTL_IDLE_CASES; c++) {
		uint64_t ms = 0;
		if (gpuctl_idle_get(t, uuid, (enum gpuctl_idle_case)c, &ms) != 1)
			continue;
		json_t *e = json_object();
		if (!e || json_put(o, gpuctl_idle_case_name((enum gpuctl_idle_case)c), e) < 0 ||
		    json_put(e, "seconds",
		             json_int_or_null(one_shot ? -ENODATA : 0, (int64_t)(ms / 1000))) < 0 ||
		    (c == GPUCTL_IDLE_GHOST &&
		     json_put(e, "cause", json_string_or_null(gpuctl_idle_ghost_cause(t, uuid))) <
		             0)) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

void idle_view_text(const struct gpuctl_idle *t, const char *uuid, bool one_shot, char *buf,
                    size_t size)
{
	static const char *const words[GPUCTL_IDLE_CASES] = {"lease", "process", "ghost memory"};
	char list[64] = "", dur[24];
	uint64_t longest = 0;

	buf[0] = '\0';
	for (int c = 0; t && c < GPUCTL_IDLE_CASES; c++) {
		uint64_t ms = 0;
		size_t u = strlen(list);
		if (gpuctl_idle_get(t, uuid, (enum gpuctl_idle_case)c, &ms) != 1)
			continue;
		snprintf(list + u, sizeof(list) - u, "%s%s", u ? ", " : "", words[c]);
		longest = ms > longest ? ms : longest;
	}
	if (!list[0])
		return;
	if (one_shot) {
		snprintf(buf, size, "idle: %s", list);
		return;
	}
	format_duration(longest / 1000, dur, sizeof(dur));
	snprintf(buf, size, "idle %s: %s", dur, list);
}

int64_t idle_view_lease_ms(const struct gpuctl_idle *t, const struct gpuctl_snapshot *snap,
                           size_t g, int mig)
{
	const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(snap, g);
	const char *uuid;
	uint64_t ms = 0, least = UINT64_MAX;
	bool any = false;

	if (!t || !gpu)
		return -1;
	uuid = mig < 0 ? gpuctl_gpu_str(gpu, GPUCTL_F_UUID)
	               : gpuctl_mig_uuid(gpuctl_gpu_mig(gpu, (size_t)mig));
	if (!uuid)
		return -1;
	/* (a): no live process on the device */
	if (gpuctl_idle_get(t, uuid, GPUCTL_IDLE_LEASE, &ms) == 1)
		return (int64_t)ms;
	/* (b) for every process on it: each below the threshold a whole window; the lease has
	 * been idle as long as the most recently busy of them */
	for (size_t k = 0; k < gpuctl_gpu_proc_count(gpu); k++) {
		const struct gpuctl_proc *p = gpuctl_gpu_proc(gpu, k);
		int r;

		if (mig >= 0 && gpuctl_proc_mig_device(gpu, p) != mig)
			continue;
		r = gpuctl_idle_proc(t, uuid, gpuctl_proc_pid(p), &ms);
		if (r == -ENOENT)
			continue; /* not tracked: gone from /proc, no process of the lease */
		if (r != 1)
			return -1;
		any = true;
		least = ms < least ? ms : least;
	}
	return any ? (int64_t)least : -1;
}

void idle_view_duration(uint64_t s, char *buf, size_t size)
{
	if (s >= 86400 && s % 86400 == 0)
		(void)snprintf(buf, size, "%llud", (unsigned long long)(s / 86400));
	else if (s >= 3600 && (s % 3600 == 0 || s >= 7200))
		(void)snprintf(buf, size, "%lluh", (unsigned long long)(s / 3600));
	else if (s >= 60 && (s % 60 == 0 || s >= 120))
		(void)snprintf(buf, size, "%llum", (unsigned long long)(s / 60));
	else
		(void)snprintf(buf, size, "%llus", (unsigned long long)s);
}

void idle_view_plan_text(const struct gpuctl_config_idle *c, const struct gpuctl_lease_owner *ow,
                         bool idle_now, bool shared, double now, char *buf, size_t size)
{
	char d[32], left[32];
	size_t len;

	buf[0] = '\0';
	if (idle_now && c->idle_release_s && ow && ow->job_pid == 0 && !shared) {
		idle_view_duration(c->idle_release_s, d, sizeof(d));
		(void)snprintf(buf, size, "released after %s idle", d);
	} else if (idle_now && c->idle_warn_s) {
		idle_view_duration(c->idle_warn_s, d, sizeof(d));
		(void)snprintf(buf, size, "warned after %s idle", d);
	}
	if (!c->max_lease_age_s || !ow || !ow->leased_since || shared)
		return;
	double end = (double)ow->leased_since + (double)c->max_lease_age_s;
	idle_view_duration(c->max_lease_age_s, d, sizeof(d));
	idle_view_duration(end > now ? (uint64_t)(end - now) : 0, left, sizeof(left));
	len = strlen(buf);
	(void)snprintf(buf + len, size - len, "%staken back at %s old (in %s)", len ? "; " : "", d,
	               left);
}
