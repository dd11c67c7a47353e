// SPDX-License-Identifier: MIT
/*
 * run-retry.c: `gpuctl run --retry`: watching the job's GPUs while it runs, and whether and
 * when to relaunch it (docs/leases.md, "Failover"; docs/gpuctl.1, "run").
 *
 * Decisions:
 * - A GPU has failed when `gpuctl health` would say FAIL about it (the rules of
 *   docs/health.md over a health snapshot, with the XIDs NVML delivered since the launch), when
 *   it is gone from the driver's list, or when its index names another GPU. A snapshot that
 *   cannot be taken concludes nothing.
 * - A job that failed by itself is checked once more: a GPU may have failed under it. It is
 *   relaunched only after a GPU failure, or after any failure with --retry-on any.
 * - The relaunch selects again without the failed GPU, after a backoff of RUN_BACKOFF_FIRST_S
 *   doubling per failover up to RUN_BACKOFF_MAX_S; past --retry N failovers, a GPU failure
 *   is exit RUN_EXIT_GAVE_UP.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "run.h"

/* Why GPU g can run no job any more: the first FAIL finding of rep about it, or NULL. */
static const char *gpu_failure(const struct gpuctl_health_report *rep, size_t g)
{
	for (size_t i = 0; i < gpuctl_health_finding_count(rep); i++) {
		const struct gpuctl_health_finding *f = gpuctl_health_finding(rep, i);
		if (f->gpu == g && f->severity == GPUCTL_HEALTH_FAIL)
			return f->message;
	}
	return NULL;
}

/* One look at the job's GPUs: the XIDs NVML delivered since the launch, then the health rules
 * of docs/health.md over a health snapshot (a few NVML calls per GPU; no NVLink states, which
 * can make no FAIL without an earlier sample); sets
 * m->failed at the first FAIL. A snapshot that cannot be taken concludes nothing (-v says so). */
void run_monitor_check(struct cli *cli, struct run_monitor *m)
{
	size_t nfields = 0;
	const enum gpuctl_field *fields = gpuctl_health_fields(&nfields);
	struct gpuctl_snapshot *snap = NULL;
	struct gpuctl_health_report *rep = NULL;
	int r;

	while (m->watch && gpuctl_xid_watch_wait(cli->ctx, m->watch, 0, m->xids) > 0)
		;
	r = gpuctl_snapshot_take_fields(cli->ctx, GPUCTL_SNAP_HEALTH, fields, nfields, &snap);
	if (r >= 0)
		r = gpuctl_health_check(cli->ctx, snap, m->xids, NULL, &rep);
	if (r < 0) {
		if (cli->verbose)
			cli_error("run: cannot check the job's GPUs: %s", gpuctl_errmsg(cli->ctx));
		gpuctl_snapshot_free(snap);
		return;
	}
	for (size_t i = 0; i < m->n && m->failed < 0; i++) {
		const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, m->gpus[i]);
		const char *u = g ? gpuctl_gpu_str(g, GPUCTL_F_UUID) : NULL;
		const char *why = g ? gpu_failure(rep, m->gpus[i]) : "gone from the driver's list";
		if (!why && !gpuctl_gpu_lost(g) && (!u || strcmp(u, m->uuids[i]) != 0))
			why = "no longer at its index (the driver's list changed)";
		if (why) {
			m->failed = (ssize_t)i;
			m->failed_at = cli_now(CLOCK_MONOTONIC);
			snprintf(m->why, sizeof(m->why), "%s", why);
		}
	}
	gpuctl_health_report_free(rep);
	gpuctl_snapshot_free(snap);
}

void run_monitor_free(struct run_monitor *m)
{
	gpuctl_xid_watch_free(m->watch);
	gpuctl_xid_log_free(m->xids);
	m->watch = NULL;
	m->xids = NULL;
	for (size_t i = 0; i < m->n; i++)
		free(m->uuids[i]);
	free(m->uuids);
	free(m->gpus);
	m->uuids = NULL;
	m->gpus = NULL;
	m->n = 0;
}

/* The GPUs of set (a MIG device counts as its GPU), for watching, and the XID events of the
 * machine from now on (none when NVML cannot deliver them: the snapshots still count). */
int run_monitor_init(struct cli *cli, struct run_monitor *m, const struct gpuctl_snapshot *snap,
                     const struct gpuctl_devset *set)
{
	size_t n = gpuctl_devset_count(set);
	m->gpus = calloc(n ? n : 1, sizeof(*m->gpus));
	m->uuids = calloc(n ? n : 1, sizeof(*m->uuids));
	if (!m->gpus || !m->uuids)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		size_t g;
		int mig;
		bool seen = false;
		if (gpuctl_devset_get(set, i, &g, &mig) < 0)
			return -EINVAL;
		for (size_t k = 0; k < m->n; k++)
			seen |= m->gpus[k] == g;
		if (seen)
			continue;
		const char *u = gpuctl_gpu_str(gpuctl_snapshot_gpu(snap, g), GPUCTL_F_UUID);
		if (!u)
			return -ENODATA;
		m->uuids[m->n] = strdup(u);
		if (!m->uuids[m->n])
			return -ENOMEM;
		m->gpus[m->n++] = g;
	}
	if (gpuctl_xid_log_new(&m->xids) < 0)
		return -ENOMEM;
	if (gpuctl_xid_watch_new(cli->ctx, snap, &m->watch) < 0 && cli->verbose)
		cli_error("run: no XID events: %s", gpuctl_errmsg(cli->ctx));
	return 0;
}

/* ---- relaunching ---- */

bool run_retry_wanted(struct cli *cli, struct run_args *a, struct run_monitor *m, bool ran,
                      int *status)
{
	bool gpu_failed = m->failed >= 0;

	if (ran && a->retry && !gpu_failed && *status != 0 && cli->ctx) {
		/* the job failed by itself: did one of its GPUs fail under it? */
		run_monitor_check(cli, m);
		gpu_failed = m->failed >= 0;
		if (gpu_failed)
			cli_error("run: the job exited with status %d and GPU %zu (%s) "
			          "failed: %s",
			          *status, m->gpus[m->failed], m->uuids[m->failed], m->why);
	}
	bool retry = ran && a->retry > 0 && (gpu_failed || (*status != 0 && a->retry_any));
	if (retry && a->attempt >= a->retry) {
		if (gpu_failed) {
			cli_error("run: gave up after %u failover%s", a->retry,
			          a->retry == 1 ? "" : "s");
			*status = RUN_EXIT_GAVE_UP;
		}
		retry = false;
	}
	if (retry && gpu_failed && filters_avoid(&a->sel, m->uuids[m->failed]) < 0) {
		cli_error("run: out of memory");
		*status = CLI_EXIT_FAILURE;
		retry = false;
	}
	return retry;
}

void run_retry_backoff(const struct run_args *a)
{
	double backoff = RUN_BACKOFF_FIRST_S;

	for (unsigned i = 0; i < a->attempt && backoff < RUN_BACKOFF_MAX_S; i++)
		backoff *= 2;
	if (backoff > RUN_BACKOFF_MAX_S)
		backoff = RUN_BACKOFF_MAX_S;
	cli_error("run: relaunching in %.1f s%s (failover %u of %u)", backoff,
	          a->sel.n_avoid ? " without the failed GPUs" : "", a->attempt + 1, a->retry);
	struct timespec ts = {(time_t)backoff, (long)((backoff - (double)(time_t)backoff) * 1e9)};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}
