// SPDX-License-Identifier: MIT
/*
 * cmd-exporter.c: `gpuctl exporter`: serves the machine's GPU metrics to Prometheus over HTTP
 * (docs/metrics.md). This file samples and decides what the page says; exporter-http.c serves
 * it (libmicrohttpd, the listening socket, the bounds on connections).
 *
 * Decisions:
 * - Sampling is decoupled from scraping. A sampler thread (sampler.h) takes every --interval
 *   one snapshot (only the fields metrics.c exports, plus processes and MIG), the XID events,
 *   the lease states and the verdicts; the main thread renders each sample's page once and
 *   swaps it in (exporter_http_publish), so a scrape costs no NVML call and no rendering.
 * - A hook (exporter.h, the agent's) sees each good sample on the main thread after its page:
 *   the snapshot, the lease states, the pools, the XID events drained with it (kept on the
 *   sample for that), and the sample itself to hold; and hears when the samples become overdue
 *   and when they come again. It may give one descriptor of its own (the agent's socket) that
 *   the loop polls beside the sampler's.
 * - The main thread never calls NVML: it waits for the next sample, the overdue time or a
 *   signal (SIGINT/SIGTERM blocked in every thread, taken through a signalfd), so a signal
 *   ends the loop at once and the server stops (exit 0), even while a call hangs; a sample
 *   still under way then is not waited for (cli_exit_now).
 * - Overdue: no sample for more than two intervals (sampler.h) is a hung driver. The page then
 *   has the exporter's own metrics only, with last_sample_success 0 and
 *   sample_overdue_seconds (rendered again every interval), and /healthz answers 503. The GPU
 *   series are left out, not served with their old values: Prometheus would record those with
 *   the scrape's time, as if just measured, where a series gone from a scrape is marked stale
 *   (docs/metrics.md, "A hung driver").
 * - Workloads: one cache (gpuctl_workloads_*) for the exporter's life, on the main thread,
 *   which looks each process up while it renders a sample's page and sweeps the cache once
 *   after: the cache is not thread-safe, and the sampler's thread stays for NVML alone. A
 *   process asked for before costs no /proc read; a scrape reads nothing (docs/metrics.md).
 * - Memory: malloc_trim() after each sample keeps the heap from holding on to freed connection
 *   pools and old pages (the one arena: exporter-http.c).
 * - A sample refreshes the previous one (gpuctl_snapshot_refresh: the exported and health
 *   fields that can change, processes, MIG devices; one device count guards it) and takes a
 *   whole snapshot once a minute, after a failed sample, while a GPU is lost (a refresh would
 *   keep it lost: it comes back within one interval) or when the refresh fails, so
 *   identity, static facts and a changed machine are re-read within EXPORTER_FULL_EVERY.
 * - The sampling never waits for other users: the lease states are read with a lock wait of
 *   EXPORTER_LOCK_WAIT_S; past it (someone holds select.lock) the sample has no lease metrics
 *   and gpuctl_exporter_last_lease_success 0, and the GPU metrics are served as always.
 * - The first sample is taken before serving: no driver is exit 4 at start. Later NVML
 *   failures keep the server up: the page then has only the exporter's own metrics, and
 *   gpuctl_exporter_nvml_errors_total counts them (logged once per streak of failures).
 * - One teardown: the server is freed by its _cleanup_ attribute on every return, and once
 *   the sampler runs every path comes back to run_exporter, which stops it (the server stops
 *   first, so the port closes before a hung sample is waited for).
 */
#include <errno.h>
#include <getopt.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "exporter-http.h"
#include "exporter.h"
#include "idle-view.h"
#include "listen.h"
#include "metrics.h"
#include "parse.h"
#include "sampler.h"
#include "status.h"
#include "usage-counters.h"

#define EXPORTER_DEFAULT_INTERVAL 5.0
/* Seconds between whole snapshots; the samples between refresh the last one (identity and
 * static facts kept, what a GPU does not support not asked again). */
#define EXPORTER_FULL_EVERY      60.0
#define EXPORTER_LOCK_WAIT_S     0.1 /* the most a sample waits for the lease directory */
#define EXPORTER_DEFAULT_TIMEOUT 10
#define EXPORTER_MAX_TIMEOUT     3600

static const struct option exporter_options[] = {
        EXPORTER_OPTIONS,
        CMD_OPTION_HELP,
        {NULL, 0, NULL, 0},
};

/* ---- options ---- */

/* GPUCTL_EXPORTER_TIMEOUT: the idle timeout of a connection, whole seconds. */
static int connection_timeout(unsigned *ret)
{
	const char *e = getenv("GPUCTL_EXPORTER_TIMEOUT");
	size_t n;
	unsigned long v = 0;
	if (!e || !e[0]) {
		*ret = EXPORTER_DEFAULT_TIMEOUT;
		return 0;
	}
	n = strlen(e);
	if (n > 4 || strspn(e, "0123456789") != n)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		v = v * 10 + (unsigned long)(e[i] - '0');
	if (v < 1 || v > EXPORTER_MAX_TIMEOUT)
		return -EINVAL;
	*ret = (unsigned)v;
	return 0;
}

/* ---- sampling (on the sampler's thread, sampler.h) ---- */

/* What the sampler's thread keeps between samples: only it touches this once sampling began. */
struct sampling {
	const struct gpuctl_site *site; /* the configuration and lease directory (read-only) */
	enum gpuctl_field fields[64];   /* what the snapshot reads */
	size_t n_fields;
	enum gpuctl_field dynamic[64]; /* of those, what a refresh re-reads (not static_field) */
	size_t n_dynamic;
	double last_full_s;                 /* CLOCK_MONOTONIC time of the last whole snapshot */
	struct metrics_stats stats;         /* the exporter's counters */
	bool first;                         /* the next sample is the first */
	bool nvml_failing;                  /* the previous sample failed (log once per streak) */
	bool lease_failing;                 /* the same for the lease directory */
	bool pool_failing;                  /* the same for the configuration's pools */
	struct gpuctl_xid_watch *xid_watch; /* NVML's XID events, NULL when it has none */
	bool xid_tried;                     /* the watch was made (or could not be) */
	bool verbose;                       /* -v: say why there are no XID events */
	struct metrics_xid *xids;           /* their counts per GPU and code (owned) */
	size_t n_xids;
	uint64_t xid_seq;         /* events counted so far */
	uint32_t idle_window;     /* --idle-window, seconds */
	struct gpuctl_idle *idle; /* the idle tracker for the exporter's life (docs/idle.md),
	                           * made at the first good sample; NULL until then or when it
	                           * could not be */
};

/* One sample, as the main thread renders it. Never changes once made. */
struct exporter_sample {
	struct gpuctl_snapshot *snap;        /* NULL when NVML failed (status, error) */
	int status;                          /* that failure's -errno */
	char error[256];                     /* its message */
	struct gpuctl_lease_list *leases;    /* NULL: no lease directory, or unreadable */
	struct gpuctl_foreign *foreign;      /* the processes of no lease, NULL: unknown */
	struct gpuctl_health_report *health; /* NULL: none */
	const char **pool_of;                /* each GPU's pool label (names owned by the site) */
	double mono;                         /* CLOCK_MONOTONIC seconds: the sample began */
	struct metrics_stats stats;          /* the counters after this sample */
	struct metrics_xid *xids;            /* the XID counts after it (a copy) */
	size_t n_xids;
	double *idle_s; /* each GPU's idle cases' seconds (metrics_input), NULL: none */
	struct gpuctl_xid_log *xid_events; /* the XIDs NVML's events gave this sample, for the
	                                    * hook; NULL: the exporter has no XID events */
	int64_t *lease_idle_ms;            /* per entry of leases: idle_view_lease_ms, NULL: none */
};

static void exporter_sample_free(void *p)
{
	struct exporter_sample *x = p;

	gpuctl_snapshot_free(x->snap);
	gpuctl_lease_list_free(x->leases);
	gpuctl_foreign_free(x->foreign);
	gpuctl_health_report_free(x->health);
	free(x->xids);
	free(x->idle_s);
	gpuctl_xid_log_free(x->xid_events);
	free(x->lease_idle_ms);
	free((void *)x->pool_of);
	free(x);
}

/* Each GPU's pool label: the configured pool's name, "default" for the GPUs no pool lists, ""
 * when the configuration's pools do not fit the snapshot (said once per streak). NULL only
 * when out of memory. */
static const char **pools_of(struct gpuctl_ctx *ctx, struct sampling *s,
                             const struct gpuctl_snapshot *snap)
{
	const struct gpuctl_config *cfg = gpuctl_site_config(s->site);
	size_t n = gpuctl_snapshot_gpu_count(snap);
	const char **pool_of = calloc(n ? n : 1, sizeof(*pool_of));
	int *map = NULL;

	if (!pool_of)
		return NULL;
	for (size_t g = 0; g < n; g++)
		pool_of[g] = "default";
	if (gpuctl_config_pool_count(cfg) == 0)
		return pool_of;
	if (gpuctl_config_pool_map(ctx, cfg, snap, &map) < 0) {
		if (!s->pool_failing)
			cli_error("exporter: pools: %s", gpuctl_errmsg(ctx));
		s->pool_failing = true;
		for (size_t g = 0; g < n; g++)
			pool_of[g] = "";
		return pool_of;
	}
	s->pool_failing = false;
	for (size_t g = 0; g < n; g++)
		if (map[g] >= 0)
			(void)gpuctl_config_pool_get(cfg, (size_t)map[g], &pool_of[g], NULL, NULL,
			                             NULL, NULL);
	free(map);
	return pool_of;
}

/* Facts that change only with a driver reload, a reboot, a GPU reset or an administrator's
 * mode change: read by the whole snapshot every EXPORTER_FULL_EVERY seconds, not by the
 * refreshes between. */
static bool static_field(enum gpuctl_field f)
{
	switch (f) {
	case GPUCTL_F_UUID:
	case GPUCTL_F_PCI_BUS_ID:
	case GPUCTL_F_PCI_DEVICE_ID:
	case GPUCTL_F_NAME:
	case GPUCTL_F_BRAND:
	case GPUCTL_F_ARCHITECTURE:
	case GPUCTL_F_COMPUTE_CAP:
	case GPUCTL_F_SERIAL:
	case GPUCTL_F_MINOR_NUMBER:
	case GPUCTL_F_TEMP_SLOWDOWN:
	case GPUCTL_F_TEMP_SHUTDOWN:
	case GPUCTL_F_CLOCK_SM_MAX:
	case GPUCTL_F_CLOCK_MEM_MAX:
	case GPUCTL_F_PCIE_GEN_MAX:
	case GPUCTL_F_PCIE_WIDTH_MAX:
	case GPUCTL_F_ECC_MODE:
	case GPUCTL_F_ECC_MODE_PENDING:
	case GPUCTL_F_MIG_MODE:
	case GPUCTL_F_MIG_MODE_PENDING:
	case GPUCTL_F_NUMA_NODE:
	case GPUCTL_F_GPU_NUMA_NODE:
	case GPUCTL_F_CPU_AFFINITY:
		return true;
	default:
		return false;
	}
}

/* The sampler thread's end: the XID watch goes before its context. */
static void sampling_finish(struct gpuctl_ctx *ctx, void *userdata)
{
	struct sampling *s = userdata;
	(void)ctx;

	gpuctl_xid_watch_free(s->xid_watch);
	gpuctl_idle_free(s->idle);
	s->idle = NULL;
	free(s->xids);
	s->xid_watch = NULL;
	s->xids = NULL;
	s->n_xids = 0;
}

/* Drains the XID events NVML has for us into the per-(GPU, code) counts: memory stays bounded
 * by the codes seen, however many events come. The events themselves go to *ret_log, for the
 * hook (the agent's health watch), NULL without XID events. -ENOMEM keeps what was counted. */
static int count_xids(struct gpuctl_ctx *ctx, struct sampling *s, struct gpuctl_xid_log **ret_log)
{
	struct gpuctl_xid_log *log = NULL;
	int r = 0;

	if (!s->xid_watch || gpuctl_xid_log_new(&log) < 0)
		return s->xid_watch ? -ENOMEM : 0;
	while (gpuctl_xid_watch_wait(ctx, s->xid_watch, 0, log) > 0)
		;
	for (size_t k = 0; r == 0 && k < gpuctl_xid_log_count(log); k++) {
		size_t g, j;
		unsigned code;
		if (gpuctl_xid_log_get(log, k, &g, &code, NULL) < 0)
			continue;
		for (j = 0; j < s->n_xids && !(s->xids[j].gpu == g && s->xids[j].code == code); j++)
			;
		if (j == s->n_xids) {
			struct metrics_xid *nx = realloc(s->xids, (s->n_xids + 1) * sizeof(*nx));
			if (!nx) {
				r = -ENOMEM;
				break;
			}
			s->xids = nx;
			s->xids[s->n_xids++] = (struct metrics_xid){.gpu = g, .code = code};
		}
		s->xids[j].count++;
		s->xids[j].seq = ++s->xid_seq;
	}
	*ret_log = log;
	return r;
}

/* The lease states of snap's devices into x->leases, NULL when there is no lease directory or
 * it cannot be read (counted and logged once), and with the same directory which processes
 * belong to no lease into x->foreign (every one when there is no directory; NULL when unknown). */
static void read_leases(struct gpuctl_ctx *ctx, struct sampling *s, struct exporter_sample *x)
{
	const struct gpuctl_snapshot *snap = x->snap;
	struct gpuctl_lease_dir *dir = NULL;
	struct gpuctl_lease_list *list = NULL;
	struct stat st;
	const char *path = gpuctl_site_lease_dir_path(s->site);
	int r;

	s->stats.lease_ok = true;
	if (lstat(path, &st) < 0 && errno == ENOENT) {
		/* nothing is leased: every process is of no lease */
		if (gpuctl_foreign_scan(ctx, NULL, snap, NULL, &x->foreign) < 0)
			x->foreign = NULL;
		return;
	}
	r = gpuctl_lease_dir_open(ctx, path, &dir);
	if (r >= 0)
		r = gpuctl_lease_list(ctx, dir, snap, &list);
	if (r >= 0 && gpuctl_foreign_scan(ctx, dir, snap, NULL, &x->foreign) < 0)
		x->foreign = NULL;
	gpuctl_lease_dir_free(dir);
	if (r < 0) {
		s->stats.lease_errors++;
		s->stats.lease_ok = false;
		if (!s->lease_failing) {
			const char *msg = gpuctl_errmsg(ctx);
			cli_error("exporter: lease directory %s: %s (no lease metrics until it "
			          "can be read)",
			          path, msg && msg[0] ? msg : strerror(-r));
		}
		s->lease_failing = true;
		return;
	}
	s->lease_failing = false;
	x->leases = list;
}

/* Feeds the sample to the idle tracker and copies what it says of each GPU into x->idle_s,
 * for the main thread (the tracker stays on the sampler's). Out of memory: no idle series. */
static void track_idle(struct gpuctl_ctx *ctx, struct sampling *s, struct exporter_sample *x,
                       double t0)
{
	struct gpuctl_idle_config cfg = GPUCTL_IDLE_CONFIG_INIT;
	size_t n = gpuctl_snapshot_gpu_count(x->snap);

	cfg.window_s = s->idle_window;
	if (!s->idle && gpuctl_idle_new(&cfg, &s->idle) < 0)
		s->idle = NULL;
	if (!s->idle ||
	    gpuctl_idle_feed(ctx, s->idle, (uint64_t)(t0 * 1000), x->snap, x->leases) < 0)
		return;
	x->idle_s = calloc((n ? n : 1) * GPUCTL_IDLE_CASES, sizeof(*x->idle_s));
	for (size_t g = 0; x->idle_s && g < n; g++) {
		const char *uuid = gpuctl_gpu_str(gpuctl_snapshot_gpu(x->snap, g), GPUCTL_F_UUID);
		for (int c = 0; c < GPUCTL_IDLE_CASES; c++) {
			uint64_t ms = 0;
			bool holds =
			        gpuctl_idle_get(s->idle, uuid, (enum gpuctl_idle_case)c, &ms) == 1;
			x->idle_s[g * GPUCTL_IDLE_CASES + (size_t)c] =
			        holds ? (double)ms / 1000 : -1;
		}
	}
	/* each lease's idle time, by the rule the agent acts on (idle-view.h) */
	size_t nl = x->leases ? gpuctl_lease_list_count(x->leases) : 0;
	x->lease_idle_ms = nl ? calloc(nl, sizeof(*x->lease_idle_ms)) : NULL;
	for (size_t i = 0; x->lease_idle_ms && i < nl; i++) {
		size_t g = 0;
		int mig = -1;
		x->lease_idle_ms[i] =
		        gpuctl_lease_list_get(x->leases, i, &g, &mig, NULL, NULL, NULL) < 0
		                ? -1
		                : idle_view_lease_ms(s->idle, x->snap, g, mig);
	}
}

/* Whether a GPU of snap was lost: a refresh keeps it lost (it re-reads only the devices it
 * has), so the next sample is a whole snapshot, which sees it come back at once. */
static bool any_lost(const struct gpuctl_snapshot *snap)
{
	for (size_t g = 0; g < gpuctl_snapshot_gpu_count(snap); g++)
		if (gpuctl_gpu_lost(gpuctl_snapshot_gpu(snap, g)))
			return true;
	return false;
}

/* The snapshot of a sample: a refresh of the previous one while its whole snapshot is recent;
 * a whole snapshot when it is not, after a failed sample, or when the refresh cannot be
 * trusted (NVML cannot count the GPUs, or their number changed): that snapshot then decides. */
static int read_snapshot(struct gpuctl_ctx *ctx, struct sampling *s,
                         const struct exporter_sample *prev, double t0,
                         struct gpuctl_snapshot **ret_snap)
{
	int r;

	if (prev && prev->snap && t0 - s->last_full_s < EXPORTER_FULL_EVERY &&
	    !any_lost(prev->snap) &&
	    gpuctl_snapshot_refresh(ctx, prev->snap, METRICS_SNAP_FLAGS, s->dynamic, s->n_dynamic,
	                            ret_snap) >= 0)
		return 0;
	r = gpuctl_snapshot_take_fields(ctx, METRICS_SNAP_FLAGS, s->fields, s->n_fields, ret_snap);
	s->last_full_s = t0;
	return r;
}

const struct gpuctl_snapshot *exporter_sample_snapshot(const struct sampler_sample *m)
{
	const struct exporter_sample *x = m ? m->data : NULL;

	return x ? x->snap : NULL;
}

/* The sampler's take: the snapshot, the XIDs since the last sample, the lease states and the
 * verdicts. An NVML failure is a sample too (no snapshot: the page then has the exporter's own
 * metrics only); only running out of memory fails. */
static int exporter_take(struct gpuctl_ctx *ctx, void *userdata, const void *prevp, void **ret_data)
{
	struct sampling *s = userdata;
	struct exporter_sample *x = calloc(1, sizeof(*x));
	double t0 = cli_now(CLOCK_MONOTONIC);
	bool first = s->first;
	int r;

	if (!x)
		return -ENOMEM;
	s->first = false;
	x->mono = t0;
	s->stats.last_time_s = cli_now(CLOCK_REALTIME);
	r = read_snapshot(ctx, s, prevp, t0, &x->snap);
	s->stats.samples++;
	if (r < 0) {
		const char *msg = gpuctl_errmsg(ctx);
		x->snap = NULL;
		x->status = r;
		snprintf(x->error, sizeof(x->error), "%s", msg && msg[0] ? msg : strerror(-r));
		s->stats.nvml_errors++;
		/* the first sample's failure is the command's error (it exits) */
		if (!s->nvml_failing && !first)
			cli_error("exporter: NVML: %s (serving no GPU metrics until it recovers)",
			          x->error);
		s->nvml_failing = true;
	} else {
		if (s->nvml_failing)
			cli_error("exporter: NVML: sampling again");
		s->nvml_failing = false;
		/* XID events from the first good snapshot on (none when NVML cannot deliver
		 * them: the kernel log still counts for the verdicts) */
		if (!s->xid_tried) {
			s->xid_tried = true;
			if (gpuctl_xid_watch_new(ctx, x->snap, &s->xid_watch) < 0) {
				s->xid_watch = NULL;
				if (s->verbose)
					cli_error("exporter: no XID events: %s",
					          gpuctl_errmsg(ctx));
			}
		}
		read_leases(ctx, s, x);
		track_idle(ctx, s, x, t0);
		x->pool_of = pools_of(ctx, s, x->snap);
		if (!x->pool_of) {
			exporter_sample_free(x);
			return -ENOMEM;
		}
		/* XIDs since the last sample, then the verdicts (docs/health.md: the kernel log and
		 * what health --watch recorded, as gpuctl health reads them) */
		if (count_xids(ctx, s, &x->xid_events) < 0)
			cli_error("exporter: out of memory counting XIDs");
		if (gpuctl_site_health(ctx, s->site, x->snap, &x->health) < 0) {
			/* the other metrics are served */
			cli_error("exporter: health check: %s", gpuctl_errmsg(ctx));
			x->health = NULL;
		}
	}
	s->stats.last_ok = x->snap != NULL;
	/* the duration covers the NVML and lease reads; rendering is measured by `make bench` */
	s->stats.last_duration_s = cli_now(CLOCK_MONOTONIC) - t0;
	x->stats = s->stats;
	if (s->n_xids) {
		x->xids = malloc(s->n_xids * sizeof(*x->xids));
		if (!x->xids) {
			exporter_sample_free(x);
			return -ENOMEM;
		}
		memcpy(x->xids, s->xids, s->n_xids * sizeof(*x->xids));
		x->n_xids = s->n_xids;
	}
	*ret_data = x;
	return 0;
}

/* The fields a sample reads: what metrics.c exports and what the health verdicts need
 * (docs/health.md; the NVLink states come with METRICS_SNAP_FLAGS), and of those the ones a
 * refresh re-reads. */
static void sampling_fields(struct sampling *s)
{
	const size_t max = sizeof(s->fields) / sizeof(s->fields[0]);
	size_t nh = 0;
	const enum gpuctl_field *hf = gpuctl_health_fields(&nh);

	s->n_fields = metrics_fields(s->fields, max);
	for (size_t i = 0; i < nh && s->n_fields < max; i++) {
		bool have = false;
		for (size_t k = 0; k < s->n_fields; k++)
			have |= s->fields[k] == hf[i];
		if (!have)
			s->fields[s->n_fields++] = hf[i];
	}
	for (size_t k = 0; k < s->n_fields; k++)
		if (!static_field(s->fields[k]))
			s->dynamic[s->n_dynamic++] = s->fields[k];
}

/* ---- publishing (on the main thread) ---- */

/* What the main thread keeps to make each sample into a page. */
struct publishing {
	struct exporter_http *http;
	const char *hostname;         /* the Hostname label */
	size_t max_processes;         /* --max-processes */
	struct gpuctl_ctx *ctx;       /* the main thread's context, for the workloads (no NVML) */
	struct gpuctl_workloads *wls; /* the one workload cache, for the exporter's life */
	const struct exporter_hook *hook; /* NULL: none */
	const struct gpuctl_site *site;
	struct usage_counters *usage;   /* the usage counters, NULL: none (out of memory) */
	struct status_history *history; /* the status page's (status.h), NULL: no page */
	double interval;                /* --interval */
};

/* metrics_workload_fn over the cache: with no start time, a process asked for before costs no
 * /proc read (gpuctl_workloads_get). */
static const struct gpuctl_workload *workload_of(void *userdata, uint32_t pid)
{
	struct publishing *p = userdata;
	const struct gpuctl_workload *w = NULL;

	if (gpuctl_workloads_get(p->ctx, p->wls, pid, 0, &w) < 0)
		return NULL;
	return w;
}

/* The sample's /api/v1/status document (status.h), made on the main thread from what the
 * sample has (no NVML call); out of memory, the previous one stays. */
static void publish_status(struct publishing *pub, const struct exporter_sample *x)
{
	struct status_input in = {.source = pub->hook ? "agent" : "exporter",
	                          .hostname = pub->hostname,
	                          .interval = pub->interval,
	                          .wall = x->stats.last_time_s,
	                          .snap = x->snap,
	                          .leases = x->leases,
	                          .health = x->health,
	                          .pool_of = x->pool_of,
	                          .lease_idle_ms = x->lease_idle_ms,
	                          .site = pub->site,
	                          .ctx = pub->ctx,
	                          .wls = pub->wls,
	                          .history = pub->history};
	char *text;
	size_t len;

	if (!pub->history || !x->snap)
		return;
	(void)status_history_add(pub->history, x->snap, in.wall);
	if (status_render(&in, &text, &len) == 0)
		exporter_http_publish_status(pub->http, text, len);
}

/* Publishes a sample's page; *ret_stats gets its counters (for the overdue pages after it).
 * The workloads are looked up here, on the main thread, while the page is rendered, and the
 * cache is swept after it: once per sample, forgetting the processes that ended (a failed
 * sample, which has no processes, keeps the cache as it is). */
static int publish_sample(struct publishing *pub, const struct sampler_sample *m,
                          struct metrics_stats *ret_stats)
{
	const struct usage_totals **usage = NULL;
	bool *held = NULL, held_set = false;

	const struct exporter_sample *x = m->data;
	struct metrics_input in = {.snap = x->snap,
	                           .leases = x->leases,
	                           .hostname = pub->hostname,
	                           .stats = &x->stats,
	                           .health = x->health,
	                           .pool_of = x->pool_of,
	                           .xids = x->xids,
	                           .n_xids = x->n_xids,
	                           .workload_of = pub->wls ? workload_of : NULL,
	                           .workload_userdata = pub,
	                           .max_processes = pub->max_processes,
	                           .idle_s = x->idle_s,
	                           .violations = pub->hook ? pub->hook->violations : NULL};
	int r;

	*ret_stats = x->stats;
	/* the usage counters: the interval since the last sample, with the last sample's holders;
	 * this one's are decided after the hook (the workloads looked up before the cache is
	 * swept) */
	if (pub->usage && x->snap) {
		size_t n = gpuctl_snapshot_gpu_count(x->snap);
		usage = calloc(n ? n : 1, sizeof(*usage));
		held = calloc(n ? n : 1, sizeof(*held));
		if (!usage || !held || usage_counters_advance(pub->usage, x->snap, x->mono) < 0) {
			free(usage);
			free(held);
			usage = NULL;
			held = NULL;
		}
		for (size_t g = 0; usage && g < n; g++)
			usage[g] = usage_counters_get(
			        pub->usage,
			        gpuctl_gpu_str(gpuctl_snapshot_gpu(x->snap, g), GPUCTL_F_UUID));
	}
	in.usage = usage;
	r = exporter_http_publish(pub->http, &in, false);
	free(usage);
	publish_status(pub, x);
	if (pub->hook && pub->hook->on_sample && x->snap) {
		struct exporter_view v = {.snap = x->snap,
		                          .sample = m,
		                          .xid_events = x->xid_events,
		                          .leases = x->leases,
		                          .foreign = x->foreign,
		                          .pool_of = x->pool_of,
		                          .wall = x->stats.last_time_s,
		                          .mono = x->mono,
		                          .site = pub->site,
		                          .ctx = pub->ctx,
		                          .wls = pub->wls,
		                          .held = held,
		                          .held_set = &held_set,
		                          .lease_idle_ms = x->lease_idle_ms};
		pub->hook->on_sample(pub->hook->userdata, &v);
	}
	/* this sample's holders, for the next: the hook's (the agent's ledger), else our look */
	if (held) {
		if (!held_set)
			usage_counters_held_now(pub->ctx, pub->wls, x->snap, x->leases, x->foreign,
			                        held);
		usage_counters_hold(pub->usage, x->snap, held);
		free(held);
	}
	if (pub->wls && x->snap)
		(void)gpuctl_workloads_sweep(pub->wls);
	return r;
}

void exporter_view_held(const struct exporter_view *v, const char *uuid)
{
	if (!v->held)
		return;
	*v->held_set = true;
	for (size_t g = 0; uuid && g < gpuctl_snapshot_gpu_count(v->snap); g++) {
		const char *u = gpuctl_gpu_str(gpuctl_snapshot_gpu(v->snap, g), GPUCTL_F_UUID);
		if (u && !strcmp(u, uuid) && !gpuctl_gpu_lost(gpuctl_snapshot_gpu(v->snap, g)))
			v->held[g] = true;
	}
}

/* While the latest sample is overdue: the exporter's own metrics only, with
 * last_sample_success 0 and how long NVML has been silent; no GPU series, so Prometheus marks
 * them stale instead of recording old values as new (docs/metrics.md, "A hung driver"). */
static int publish_overdue(struct exporter_http *http, const struct metrics_stats *last,
                           double silent_s, const char *hostname)
{
	struct metrics_stats st = *last;
	struct metrics_input in = {.hostname = hostname, .stats = &st};

	st.last_ok = false;
	st.overdue_s = silent_s;
	return exporter_http_publish(http, &in, true);
}

/* Serves until SIGINT or SIGTERM (blocked in every thread, taken here): each new sample's
 * page, and while the sampler is overdue an overdue page every interval. */
static void serve(struct publishing *pub, struct sampler *smp, uint64_t seq,
                  const struct metrics_stats *first, double interval, const sigset_t *stop)
{
	struct metrics_stats last = *first;
	bool overdue = false;
	double again = 0; /* while overdue: when to render its page again */

	for (;;) {
		bool hook_fd = pub->hook && pub->hook->on_fd;
		struct pollfd p[2] = {{.fd = sampler_fd(smp), .events = POLLIN},
		                      {.fd = hook_fd ? pub->hook->fd : -1, .events = POLLIN}};
		const struct sampler_sample *m;
		double now;

		if (cli_wait_fds(p, hook_fd ? 2 : 1, overdue ? again : sampler_overdue_at(smp),
		                 stop))
			return;
		if (hook_fd && p[1].revents)
			pub->hook->on_fd(pub->hook->userdata);
		m = sampler_latest(smp);
		if (m && m->seq > seq) {
			seq = m->seq;
			if (overdue)
				cli_error("exporter: NVML answering again");
			if (overdue && pub->hook && pub->hook->on_overdue)
				pub->hook->on_overdue(pub->hook->userdata, false, 0);
			overdue = false;
			if (!m->data || publish_sample(pub, m, &last) < 0)
				cli_error("exporter: out of memory rendering the metrics (serving "
				          "the previous page)");
#ifdef __GLIBC__
			/* give back what the sample freed (and what connections that closed
			 * left), not only the top of the heap: about 0.1 MiB after a load */
			malloc_trim(0);
#endif
		}
		sampler_put(m);
		now = cli_now(CLOCK_MONOTONIC);
		if (!sampler_overdue(smp, now) || (overdue && now < again))
			continue;
		double silent = sampler_silence(smp, now);
		if (!overdue) {
			cli_error("exporter: NVML not answering for %.0f s (serving only the "
			          "exporter's own metrics, /healthz 503, until it answers)",
			          silent);
			if (pub->hook && pub->hook->on_overdue)
				pub->hook->on_overdue(pub->hook->userdata, true, silent);
		}
		overdue = true;
		again = now + interval;
		if (publish_overdue(pub->http, &last, silent, pub->hostname) < 0)
			cli_error("exporter: out of memory rendering the metrics");
	}
}

/* ---- the command ---- */

int exporter_option(struct exporter_args *a, int opt, char **argv)
{
	const struct cmd_entry *e = a->entry;

	switch (opt) {
	case OPT_LISTEN:
		a->listen_text = optarg;
		return CMD_GO_ON;
	case OPT_INTERVAL:
		if (parse_seconds(optarg, EXPORTER_MIN_INTERVAL, EXPORTER_MAX_INTERVAL,
		                  &a->interval) < 0)
			return cmd_usage_error(e,
			                       "--interval: '%s' is not a number of seconds "
			                       "from 0.1 to 86400",
			                       optarg);
		return CMD_GO_ON;
	case OPT_LEASE_DIR:
		if (!optarg[0])
			return cmd_usage_error(e, "--lease-dir: empty path");
		a->lease_dir = optarg;
		return CMD_GO_ON;
	case OPT_MAX_PROCESSES: {
		unsigned long v;
		if (parse_uint(optarg, 0, METRICS_MAX_MAX_PROCESSES, &v) < 0)
			return cmd_usage_error(e,
			                       "--max-processes: '%s' is not a number from 0 "
			                       "to %d",
			                       optarg, METRICS_MAX_MAX_PROCESSES);
		a->max_processes = (size_t)v;
		return CMD_GO_ON;
	}
	case OPT_IDLE_WINDOW: {
		int status = cmd_parse_idle_window(e, optarg, &a->idle_window);
		return status ? status : CMD_GO_ON;
	}
	case 'h':
		cmd_usage(e, stdout);
		return CLI_EXIT_OK;
	default:
		return cmd_bad_option(e, opt, argv);
	}
}

int exporter_options_done(struct exporter_args *a, int argc, char **argv)
{
	const char *why = NULL;

	if (optind < argc)
		return cmd_usage_error(a->entry, "unexpected argument '%s'", argv[optind]);
	if (listen_parse(a->listen_text, &a->spec, &why) < 0)
		return cmd_usage_error(a->entry, "--listen: '%s': %s", a->listen_text, why);
	if (connection_timeout(&a->timeout) < 0)
		return cmd_usage_error(a->entry,
		                       "GPUCTL_EXPORTER_TIMEOUT: '%s' is not a number of seconds "
		                       "from 1 to %d",
		                       getenv("GPUCTL_EXPORTER_TIMEOUT"), EXPORTER_MAX_TIMEOUT);
	return CMD_GO_ON;
}

/* The options (and GPUCTL_EXPORTER_TIMEOUT) into a: CMD_GO_ON, or the exit status to
 * return now (--help, a usage error). */
static int parse_options(int argc, char **argv, struct exporter_args *a)
{
	int opt, status;

	while ((opt = cmd_getopt(a->entry, argc, argv)) != -1)
		if ((status = exporter_option(a, opt, argv)) != CMD_GO_ON)
			return status;
	return exporter_options_done(a, argc, argv);
}

/* Starts the sampler's thread, which reads NVML with a context of its own (the sampler's from
 * then on). 0 and *ret_smp, or the exit status. */
static int start_sampler(struct cli *cli, struct sampling *s, double interval,
                         struct sampler **ret_smp)
{
	struct gpuctl_ctx *sctx = NULL;
	int status, r;

	status = cli_context_new(cli, &sctx);
	if (status)
		return status;
	/* a select.lock held by someone else delays a sample by this much at most: the lease
	 * metrics are left out then, never the GPUs' (docs/metrics.md) */
	(void)gpuctl_ctx_set_lock_wait(sctx, EXPORTER_LOCK_WAIT_S);
	struct sampler_config cfg = {.interval = interval,
	                             .ctx = sctx,
	                             .take = exporter_take,
	                             .free_data = exporter_sample_free,
	                             .finish = sampling_finish,
	                             .userdata = s};
	r = sampler_start(&cfg, ret_smp);
	if (r < 0) {
		cli_error("exporter: cannot start the sampler: %s", strerror(-r));
		gpuctl_ctx_free(sctx);
		return CLI_EXIT_FAILURE;
	}
	return 0;
}

/* Publishes the first sample's page, starts the server and serves until SIGINT or SIGTERM:
 * the exit status (0 also when a signal came before the first sample). */
static int publish_and_serve(struct cli *cli, const struct exporter_args *a, struct publishing *pub,
                             struct sampler *smp, const sigset_t *stop)
{
	const struct sampler_sample *m = NULL;
	struct metrics_stats first;
	uint64_t seq;
	int status, r;

	if (cli_first_sample(smp, "exporter", stop, &m))
		return CLI_EXIT_OK; /* stopped before it served */
	const struct exporter_sample *x = m->data;
	if (!x || !x->snap) {
		status = x ? cli_driver_error_msg(x->status, x->error)
		           : (cli_error("exporter: out of memory"), CLI_EXIT_FAILURE);
		sampler_put(m);
		return status;
	}
	seq = m->seq;
	r = publish_sample(pub, m, &first);
	sampler_put(m);
	if (r < 0) {
		cli_error("exporter: out of memory");
		return CLI_EXIT_FAILURE;
	}
	status = exporter_http_serve(pub->http, a->timeout);
	if (status)
		return status;
	if (cli->verbose)
		cli_error("exporter: serving http://%s/metrics, sampling every %gs", a->listen_text,
		          a->interval);
	serve(pub, smp, seq, &first, a->interval, stop);
	return CLI_EXIT_OK;
}

/* The main thread's context and the workload cache; without them the page has no workload
 * labels (said once). */
static void open_workloads(struct cli *cli, struct publishing *pub)
{
	if (usage_counters_new(&pub->usage) < 0)
		pub->usage = NULL;
	if (cli_context_new(cli, &pub->ctx) != 0)
		return;
	if (gpuctl_workloads_new(pub->ctx, &pub->wls) < 0) {
		cli_error("exporter: no workload labels: %s", gpuctl_errmsg(pub->ctx));
		pub->wls = NULL;
	}
}

int exporter_run(struct cli *cli, const struct exporter_args *a)
{
	_cleanup_(exporter_http_freep) struct exporter_http *http = NULL;
	struct publishing pub = {.max_processes = a->max_processes, .hook = a->hook};
	struct sampling s = {.first = true, .idle_window = a->idle_window};
	struct sampler *smp = NULL;
	char hostname[256]; /* the Hostname label */
	sigset_t stop, old;
	int status;

	/* the configuration and the lease directory's path; the directory itself is read at every
	 * sample (it may appear, or become unreadable, while the exporter runs) */
	status = cli_site(cli, a->entry, a->lease_dir, GPUCTL_SITE_NO_LEASES);
	if (status)
		return status;
	s.site = cli->site;
	pub.site = cli->site;
	s.verbose = cli->verbose;

	/* Blocked before the socket listens (a client may connect, and a supervisor stop us, at
	 * once: the signal then waits for serve(), which exits 0) and before MHD starts its
	 * thread, which inherits the mask (the sampler's thread blocks all): only the main
	 * thread's signalfd takes them (cli_wait_fds), whatever the sampler does. */
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &stop, &old);
	status = exporter_http_new(a->listen_text, &a->spec, cli->verbose, &http);
	if (status)
		return status;
	sampling_fields(&s);
	if (gethostname(hostname, sizeof(hostname)) < 0)
		hostname[0] = '\0';
	hostname[sizeof(hostname) - 1] = '\0';

	if (exporter_http_status_open(http, gpuctl_site_config(cli->site), &pub.history) < 0) {
		cli_error("exporter: out of memory");
		return CLI_EXIT_FAILURE;
	}
	/* the first sample is taken before serving: no driver is exit 4 now, not an empty page
	 * later */
	status = start_sampler(cli, &s, a->interval, &smp);
	if (status) {
		status_history_free(pub.history);
		return status;
	}
	pub.http = http;
	pub.hostname = hostname;
	pub.interval = a->interval;
	open_workloads(cli, &pub);
	status = publish_and_serve(cli, a, &pub, smp, &stop);
	gpuctl_workloads_free(pub.wls);
	status_history_free(pub.history);
	gpuctl_ctx_free(pub.ctx);
	usage_counters_free(pub.usage);

	/* the server first (the port closes at once); a sample hung in NVML is not waited for:
	 * the process ends without it */
	exporter_http_stop(http);
	if (sampler_stop(smp, SAMPLER_STOP_WAIT_S) < 0)
		cli_exit_now(status);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return status;
}

static int cmd_exporter_exec(struct cli *cli, int argc, char **argv)
{
	struct exporter_args a = {.entry = &cmd_exporter_entry,
	                          .listen_text = LISTEN_DEFAULT,
	                          .interval = EXPORTER_DEFAULT_INTERVAL,
	                          .max_processes = METRICS_DEFAULT_MAX_PROCESSES,
	                          .idle_window = 600};
	int status = parse_options(argc, argv, &a);

	return status != CMD_GO_ON ? status : exporter_run(cli, &a);
}

const struct cmd_entry cmd_exporter_entry = {
        .name = "exporter",
        .long_options = exporter_options,
        .short_options = "+:h",
        .usage = "[--listen ADDR:PORT] [--interval SECONDS] [--lease-dir DIR] "
                 "[--max-processes N] [--idle-window SECONDS]",
        .summary = "serve GPU metrics to Prometheus (dcgm-exporter names, plus leases)",
        .options = "  --listen ADDR:PORT   where to serve: :PORT (every address), IPV4:PORT,\n"
                   "                       [IPV6]:PORT or HOST:PORT (default " LISTEN_DEFAULT ")\n"
                   "  --interval SECONDS   sample every SECONDS, 0.1 to 86400 (default 5);\n"
                   "                       scrapes serve the latest sample\n"
                   "  --lease-dir DIR      the lease directory (default $GPUCTL_LEASE_DIR,\n"
                   "                       else the configuration's lease_dir, else\n"
                   "                       /run/gpuctl); a missing one: no lease metrics\n"
                   "  --max-processes N    per-process series for at most N processes, 0 to\n"
                   "                       100000 (default 100); the others are counted in\n"
                   "                       gpuctl_exporter_processes_dropped\n"
                   "  --idle-window SECONDS  how long a process must hold memory below 5 %\n"
                   "                       utilisation to count as idle, 1 to 604800\n"
                   "                       (default 600; docs/idle.md)\n"
                   "  -h, --help           print this help\n"
                   "\n"
                   "Paths: /metrics (Prometheus text format 0.0.4; docs/metrics.md), / and\n"
                   "/api/v1/status (the status page and its JSON, docs/status-page.md; who may\n"
                   "read them: status_page in gpuctl.conf), /healthz (\"ok\"; 503 while NVML is\n"
                   "not answering: no sample for two intervals, and only the exporter's own\n"
                   "metrics are served). SIGINT or SIGTERM stop it at once (exit 0).\n"
                   "GPUCTL_EXPORTER_TIMEOUT sets the idle timeout of a connection and the\n"
                   "longest a request may last, in seconds (default 10).\n",
        .exec = cmd_exporter_exec,
        .exits = CMD_EXITS_DRIVER,
};
