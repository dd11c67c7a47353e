// SPDX-License-Identifier: MIT
/*
 * cmd-agent.c: `gpuctl agent`: the one root sampler of a server (docs/agent.md). It is the
 * exporter's loop (exporter.h: one sampler thread, one page per sample) with a hook that writes
 * each sample into the usage ledger (docs/ledger.md) and acts on idle and old leases as the
 * pools configure (agent-idle.c, docs/idle.md).
 *
 * Decisions:
 * - One sample serves the page and the ledger: the hook runs on the main thread after the page
 *   is published, with the sample's snapshot, lease list and pools, and the exporter's workload
 *   cache (looked up before the cache is swept). NVML is read on the sampler's thread only.
 * - What is observed (never what a process claims): a device whose lease lock is held (the
 *   kernel's word, gpuctl_lease_list) is one observation per holder, keyed by the holder's pid
 *   and start time from its owner record; a compute process of no lease (gpuctl_foreign_scan)
 *   is one observation per workload and GPU, keyed by the workload's kind and identity
 *   (docs/workloads.md), a bare process by its pid and start time.
 * - Endings: a holder observed at the last stored sample and not now is ended at this sample
 *   with a reason: a lease "evicted" when an eviction notice names its holder and GPU (it was
 *   taken back: agent-idle.c), else "release" (its lock was dropped: by release, by its
 *   holder's exit, by the end of `gpuctl run`), a workload "exit" when none of its processes
 *   seen last is alive, else "gone"; either on a GPU now lost "gone"; either gone from a GPU
 *   that failed under it "health-failover" (agent-failover.h, which also splits the record of
 *   a holder that moved off such a GPU). The ledger ends records left open by a stopped agent
 *   as "agent-restart" when the next one opens it.
 * - Hooks (agent-hooks.h): made before the loop (an unsafe program is a configuration error),
 *   fed by the health watch, the idle actions and, after each stored sample, the lease holders
 *   that started and ended (agent-events.h).
 * - The ledger never stops the sampling: it is opened at the first sample and, when that or a
 *   write fails (disk full, read-only, a file-size limit: SIGXFSZ is ignored so the write
 *   fails with EFBIG instead of killing us), said once per streak and tried again at every
 *   sample; a failed write stores nothing, so the next good one integrates the gap.
 */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-acl.h"
#include "agent-events.h"
#include "agent-failover.h"
#include "agent-health.h"
#include "agent-hooks.h"
#include "agent-idle.h"
#include "agent-watch.h"
#include "agent-socket.h"
#include "cmd.h"
#include "exporter.h"
#include "hostproc.h"
#include "metrics.h"

#define AGENT_DEFAULT_INTERVAL 1.0

enum {
	OPT_LEDGER = OPT_EXPORTER_END_,
	OPT_HEALTH_STATE,
	OPT_DEV_DIR,
	OPT_SOCKET,
	OPT_CGROUP,
	OPT_CGROUP_PARENT,
};

static const struct option agent_options[] = {
        EXPORTER_OPTIONS,
        {"ledger", required_argument, NULL, OPT_LEDGER},
        {"health-state", required_argument, NULL, OPT_HEALTH_STATE},
        {"dev-dir", required_argument, NULL, OPT_DEV_DIR},
        {"socket", required_argument, NULL, OPT_SOCKET},
        {"cgroup", required_argument, NULL, OPT_CGROUP},
        {"cgroup-parent", required_argument, NULL, OPT_CGROUP_PARENT},
        CMD_OPTION_HELP,
        {NULL, 0, NULL, 0},
};

/* A holder the last stored sample observed (to end it when it is gone). */
struct held {
	int kind;       /* enum gpuctl_ledger_kind */
	char *key;      /* its key */
	char *gpu;      /* a GPU it was on */
	uint32_t pid;   /* a workload: a process of it seen then (0: none) */
	uint64_t ticks; /* that process's start time after boot, clock ticks */
	bool seen;      /* observed at this sample */
};

/* One sample's observations and the strings they point to. */
struct obs_set {
	struct gpuctl_ledger_observation *o;
	struct held *h; /* h[i]: what o[i] says about its holder (owned strings) */
	size_t n, cap;
};

struct agent {
	const char *path; /* the ledger's */
	struct gpuctl_ledger *ledger;
	bool failing;      /* the ledger could not be opened or written at the last try */
	bool scan_failing; /* the lease files could not be read for the foreign processes */
	struct held *prev; /* what the last stored sample observed */
	size_t n_prev;
	struct agent_health *health;     /* the health watch (agent-health.h) */
	struct agent_failover *failover; /* the health failovers (agent-failover.h) */
	struct agent_idle idle;          /* idle_warn, idle_release, max_lease_age (agent-idle.c) */
	struct agent_watch *watch;       /* the pools' enforce: violations (agent-watch.c) */
	struct agent_acl *acl;           /* enforce = acl: the device nodes (agent-acl.c) */
	struct agent_socket *sock;     /* enforce = cgroup: the socket (agent-socket.h), or NULL */
	struct agent_cgroups *cgroups; /* ... and the job cgroups (agent-cgroup.h), or NULL */
	struct agent_hooks *hooks;     /* the hooks (agent-hooks.h), NULL: none */
	bool stored;                   /* a sample was stored (lease events: agent_start) */
	json_t *holders;               /* the lease holders' facts for on_lease_end */
};

static void held_clear(struct held *h, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(h[i].key);
		free(h[i].gpu);
	}
}

static void obs_set_free(struct obs_set *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free((void *)s->o[i].user);
		free((void *)s->o[i].group);
	}
	held_clear(s->h, s->n);
	free(s->o);
	free(s->h);
	*s = (struct obs_set){0};
}

/* The name of uid and of its primary group (malloc'ed; NULL when unknown). */
static void names_of(int64_t uid, char **ret_user, char **ret_group)
{
	struct passwd pw, *pp = NULL;
	struct group gr, *gp = NULL;
	char buf[4096];

	*ret_user = *ret_group = NULL;
	if (uid < 0 || getpwuid_r((uid_t)uid, &pw, buf, sizeof(buf), &pp) != 0 || !pp)
		return;
	*ret_user = strdup(pp->pw_name);
	if (getgrgid_r(pp->pw_gid, &gr, buf, sizeof(buf), &gp) == 0 && gp)
		*ret_group = strdup(gp->gr_name);
}

/* Finds (kind, key) on gpu in s, or adds it: its index, or -1 (out of memory). */
static ssize_t obs_get(struct obs_set *s, int kind, const char *key, const char *gpu)
{
	const struct gpuctl_ledger_observation init = GPUCTL_LEDGER_OBSERVATION_INIT;

	for (size_t i = 0; i < s->n; i++)
		if (s->h[i].kind == kind && !strcmp(s->h[i].key, key) && !strcmp(s->h[i].gpu, gpu))
			return (ssize_t)i;
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;
		void *o = realloc(s->o, cap * sizeof(*s->o));
		if (!o)
			return -1;
		s->o = o;
		void *h = realloc(s->h, cap * sizeof(*s->h));
		if (!h)
			return -1;
		s->h = h;
		s->cap = cap;
	}
	s->o[s->n] = init;
	s->h[s->n] = (struct held){.kind = kind, .key = strdup(key), .gpu = strdup(gpu)};
	if (!s->h[s->n].key || !s->h[s->n].gpu) {
		free(s->h[s->n].key);
		free(s->h[s->n].gpu);
		return -1;
	}
	s->o[s->n].kind = kind;
	s->o[s->n].key = s->h[s->n].key;
	s->o[s->n].gpu_uuid = s->h[s->n].gpu;
	s->o[s->n].mem_used = 0;
	return (ssize_t)s->n++;
}

/* The GPU's facts every observation on it carries. */
static void gpu_facts(const struct gpuctl_gpu *gpu, const char *pool,
                      struct gpuctl_ledger_observation *o)
{
	int64_t v;

	o->pool = pool;
	if (gpuctl_gpu_int(gpu, GPUCTL_F_UTIL_GPU, &v) >= 0)
		o->util_pct = (double)v;
	if (gpuctl_gpu_int(gpu, GPUCTL_F_ENERGY, &v) >= 0)
		o->energy_mj = v;
}

/* Memory used on GPU g by processes that belong to a lease (foreign NULL: unknown, -1). */
static int64_t lease_memory(const struct gpuctl_gpu *gpu, size_t g, const struct gpuctl_foreign *f)
{
	int64_t sum = 0, b;

	if (!f)
		return -1;
	for (size_t k = 0; k < gpuctl_gpu_proc_count(gpu); k++)
		if (!gpuctl_foreign_proc(f, g, k) &&
		    gpuctl_proc_used_memory(gpuctl_gpu_proc(gpu, k), &b) >= 0)
			sum += b;
	return sum;
}

/* One holder of a lease on GPU g. */
static int add_lease(struct obs_set *s, const struct exporter_view *v, size_t g,
                     const struct gpuctl_lease_owner *ow, const struct gpuctl_foreign *f)
{
	const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(v->snap, g);
	const char *uuid = gpuctl_gpu_str(gpu, GPUCTL_F_UUID);
	char key[64];
	ssize_t i;

	if (!uuid)
		return 0;
	(void)snprintf(key, sizeof(key), "%u@%llu", ow->pid, (unsigned long long)ow->start_time);
	if ((i = obs_get(s, GPUCTL_LEDGER_LEASE, key, uuid)) < 0)
		return -ENOMEM;
	struct gpuctl_ledger_observation *o = &s->o[i];
	if (o->user)
		return 0; /* this holder on this GPU already (two of its MIG devices) */
	gpu_facts(gpu, v->pool_of[g], o);
	o->uid = ow->uid;
	{
		char *user, *group;
		names_of(ow->uid, &user, &group);
		o->user = user ? user : (ow->user ? strdup(ow->user) : NULL);
		o->group = group;
	}
	o->workload = ow->label;
	o->mem_used = lease_memory(gpu, g, f);
	/* the holder started, waited in line, then wrote its record (docs/agent.md) */
	if (ow->leased_since && ow->leased_since >= ow->start_time)
		o->wait_s = (double)(ow->leased_since - ow->start_time);
	return 0;
}

/* Every holder of every held device of the lease list. */
static int add_leases(struct obs_set *s, const struct exporter_view *v,
                      const struct gpuctl_foreign *f)
{
	size_t n = gpuctl_lease_list_count(v->leases);

	for (size_t i = 0; i < n; i++) {
		const struct gpuctl_lease_owner *const *owners = NULL;
		size_t g, n_own = 0;
		int r = 0;

		if (gpuctl_lease_list_get(v->leases, i, &g, NULL, NULL, NULL, NULL) < 0 ||
		    gpuctl_gpu_lost(gpuctl_snapshot_gpu(v->snap, g)) ||
		    gpuctl_lease_list_holders(v->leases, i, &owners, &n_own) < 0)
			continue;
		for (size_t k = 0; r == 0 && k < n_own; k++)
			r = add_lease(s, v, g, owners[k], f);
		if (r < 0)
			return r;
	}
	return 0;
}

/* A workload's key: its kind and identity (docs/agent.md). */
static void workload_key(const struct gpuctl_workload *w, uint64_t ticks, char *buf, size_t size)
{
	switch (w->kind) {
	case GPUCTL_WORKLOAD_SLURM:
		(void)snprintf(buf, size, "slurm:%u%s%s", w->slurm_job, w->slurm_step ? "." : "",
		               w->slurm_step ? w->slurm_step : "");
		break;
	case GPUCTL_WORKLOAD_POD:
		(void)snprintf(buf, size, "pod:%s/%s", w->pod_uid ? w->pod_uid : "",
		               w->container ? w->container : "");
		break;
	case GPUCTL_WORKLOAD_CONTAINER:
		(void)snprintf(buf, size, "container:%s/%s", w->runtime ? w->runtime : "",
		               w->id ? w->id : "");
		break;
	case GPUCTL_WORKLOAD_UNIT:
	case GPUCTL_WORKLOAD_SESSION:
		(void)snprintf(buf, size, "%s:%u/%s", gpuctl_workload_kind_name(w->kind),
		               w->unit_uid, w->name ? w->name : "");
		break;
	default:
		(void)snprintf(buf, size, "pid:%u@%llu", w->pid, (unsigned long long)ticks);
		break;
	}
}

/* One foreign process (k of GPU g) into its workload's observation on g. */
static int add_process(struct obs_set *s, const struct exporter_view *v, size_t g, size_t k)
{
	const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(v->snap, g);
	const struct gpuctl_proc *p = gpuctl_gpu_proc(gpu, k);
	const char *uuid = gpuctl_gpu_str(gpu, GPUCTL_F_UUID);
	const struct gpuctl_workload *w = NULL;
	struct hostproc_stat st;
	uint32_t pid = gpuctl_proc_pid(p);
	char key[2 * GPUCTL_WORKLOAD_NAME_MAX + 32];
	int64_t b;
	ssize_t i;

	if (!uuid || !v->wls || pid == 0)
		return 0;
	if (hostproc_read_stat((pid_t)pid, &st) < 0)
		return 0; /* gone already: NVML's list was older than /proc */
	if (gpuctl_workloads_get(v->ctx, v->wls, pid, st.start_ticks, &w) < 0 || !w ||
	    w->kind == GPUCTL_WORKLOAD_UNKNOWN)
		return 0;
	workload_key(w, st.start_ticks, key, sizeof(key));
	if ((i = obs_get(s, GPUCTL_LEDGER_WORKLOAD, key, uuid)) < 0)
		return -ENOMEM;
	struct gpuctl_ledger_observation *o = &s->o[i];
	s->h[i].pid = pid;
	s->h[i].ticks = st.start_ticks;
	if (gpuctl_proc_used_memory(p, &b) >= 0 && o->mem_used >= 0)
		o->mem_used += b;
	else
		o->mem_used = -1;
	if (o->pool)
		return 0; /* another process of it on this GPU */
	gpu_facts(gpu, v->pool_of[g], o);
	o->workload = w->label;
	if (w->uid != UINT32_MAX) {
		char *user, *group;
		o->uid = w->uid;
		names_of(w->uid, &user, &group);
		o->user = user;
		o->group = group;
	}
	return 0;
}

/* The compute processes of no lease. */
static int add_foreign(struct obs_set *s, const struct exporter_view *v,
                       const struct gpuctl_foreign *f)
{
	for (size_t g = 0; g < gpuctl_snapshot_gpu_count(v->snap); g++) {
		const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(v->snap, g);
		if (gpuctl_gpu_lost(gpu))
			continue;
		for (size_t k = 0; k < gpuctl_gpu_proc_count(gpu); k++) {
			int r;
			if (!gpuctl_foreign_proc(f, g, k))
				continue;
			if ((r = add_process(s, v, g, k)) < 0)
				return r;
		}
	}
	return 0;
}

/* Whether GPU uuid of snap is lost now (or gone from the machine). */
static bool gpu_lost(const struct gpuctl_snapshot *snap, const char *uuid, size_t *ret_g)
{
	for (size_t g = 0; g < gpuctl_snapshot_gpu_count(snap); g++) {
		const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(snap, g);
		const char *u = gpuctl_gpu_str(gpu, GPUCTL_F_UUID);
		if (u && !strcmp(u, uuid)) {
			*ret_g = g;
			return gpuctl_gpu_lost(gpu);
		}
	}
	return true;
}

/* Why a holder the last sample saw is not seen now (docs/agent.md, "Endings"). */
static int ending(const struct held *h, bool lost)
{
	struct hostproc_stat st;

	if (lost)
		return GPUCTL_LEDGER_END_GONE;
	if (h->kind == GPUCTL_LEDGER_LEASE)
		return GPUCTL_LEDGER_END_RELEASE;
	if (h->pid && (hostproc_read_stat((pid_t)h->pid, &st) < 0 || st.start_ticks != h->ticks))
		return GPUCTL_LEDGER_END_EXIT;
	return GPUCTL_LEDGER_END_GONE;
}

/* An ending observation for each holder of the last stored sample that is not in s. */
static int add_endings(struct agent *a, struct obs_set *s, const struct exporter_view *v)
{
	for (size_t i = 0; i < a->n_prev; i++) {
		struct held *h = &a->prev[i];
		bool found = false, lost;
		size_t g = 0;
		ssize_t j;

		/* seen now on any GPU, or ended already by an earlier entry (one ending each) */
		for (size_t k = 0; k < s->n && !found; k++)
			found = s->h[k].kind == h->kind && !strcmp(s->h[k].key, h->key);
		if (found)
			continue;
		lost = gpu_lost(v->snap, h->gpu, &g);
		if ((j = obs_get(s, h->kind, h->key, h->gpu)) < 0)
			return -ENOMEM;
		s->o[j].mem_used = -1;
		s->o[j].end = ending(h, lost);
		/* a lease taken back (release --force, our idle actions) left its holder a notice
		 */
		if (s->o[j].end == GPUCTL_LEDGER_END_RELEASE &&
		    agent_idle_evicted(&a->idle, v, h->key, h->gpu))
			s->o[j].end = GPUCTL_LEDGER_END_EVICTED;
		if (!lost)
			gpu_facts(gpuctl_snapshot_gpu(v->snap, g), v->pool_of[g], &s->o[j]);
	}
	return 0;
}

/* The sample's observations: leases, foreign workloads, endings. The processes of no lease are
 * the sampler's classification (exporter_view.foreign), made with the lease list it read. */
static int observe_sample(struct agent *a, const struct exporter_view *v, struct obs_set *s)
{
	const struct gpuctl_foreign *f = v->foreign;
	int r = 0;

	if (!f) {
		if (!a->scan_failing)
			cli_error("agent: lease directory %s: its processes could not be told from "
			          "those of no lease (no ledger records for processes of no lease "
			          "until they can)",
			          gpuctl_site_lease_dir_path(v->site));
		a->scan_failing = true;
	} else {
		a->scan_failing = false;
	}
	if (v->leases)
		r = add_leases(s, v, f);
	if (r == 0 && f)
		r = add_foreign(s, v, f);
	if (r == 0)
		r = add_endings(a, s, v);
	return r;
}

/* The ledger, opened at the first sample that can (0), or -errno said once per streak. */
static int open_ledger(struct agent *a, struct gpuctl_ctx *ctx)
{
	struct gpuctl_ledger_options opts = GPUCTL_LEDGER_OPTIONS_INIT;
	int r;

	opts.writer = true;
	if (a->ledger)
		return 0;
	r = gpuctl_ledger_open(ctx, a->path, &opts, &a->ledger);
	if (r < 0) {
		if (!a->failing)
			cli_error("agent: ledger %s: %s (sampling and serving go on; trying again "
			          "every sample)",
			          a->path, gpuctl_errmsg(ctx));
		a->failing = true;
		a->ledger = NULL;
	}
	return r;
}

/* failover_facts_fn: GPU uuid's facts now; none when it is lost or gone. */
static void facts_of(const struct exporter_view *v, const char *uuid,
                     struct gpuctl_ledger_observation *o)
{
	size_t g = 0;

	if (!gpu_lost(v->snap, uuid, &g))
		gpu_facts(gpuctl_snapshot_gpu(v->snap, g), v->pool_of[g], o);
}

/* The sample's ledger calls: one, or two when a holder moved off a failed GPU
 * (agent-failover.h). The failover's view of the holders follows the first. */
static int store(struct agent *a, const struct exporter_view *v, struct obs_set *s)
{
	struct failover_calls c = {0};
	int r = agent_failover_plan(a->failover, a->health, v, facts_of, s->o, s->n, &c);

	if (r == 0)
		r = gpuctl_ledger_observe(v->ctx, a->ledger, v->wall, v->mono,
		                          c.n_first ? c.first : s->o, c.n_first ? c.n_first : s->n);
	if (r == 0 && c.n_first) {
		/* the moved holders' new records; a failure leaves them to the next sample */
		if (gpuctl_ledger_observe(v->ctx, a->ledger, v->wall, v->mono, c.second,
		                          c.n_second) < 0 &&
		    !a->failing)
			cli_error(
			        "agent: ledger %s: %s (the records of holders that moved start at "
			        "the next sample)",
			        a->path, gpuctl_errmsg(v->ctx));
	}
	if (r == 0)
		agent_failover_commit(a->failover);
	failover_calls_free(&c);
	return r;
}

/* agent_events_seen_fn: whether lease holder key was observed at the last stored sample. */
static bool was_seen(void *userdata, const char *key)
{
	const struct agent *a = userdata;

	for (size_t i = 0; i < a->n_prev; i++)
		if (a->prev[i].kind == GPUCTL_LEDGER_LEASE && !strcmp(a->prev[i].key, key))
			return true;
	return false;
}

/* Each new violation the watch found (after it was acted on, logged and recorded) to the
 * on_violation hook, as the object docs/agent.md "Violations" describes. */
static void on_violation(void *userdata, const struct agent_violation *v)
{
	struct agent *a = userdata;

	if (agent_hooks_wants(a->hooks, "violation"))
		agent_hooks_fire(a->hooks, "violation", agent_violation_json(v));
}

/* The hook: this sample into the health watch, the socket and cgroups of enforce = cgroup, the
 * idle actions, acl's device nodes, the watch, the ledger and the lease hooks. */
static void agent_sample(void *userdata, const struct exporter_view *v)
{
	struct agent *a = userdata;
	struct obs_set s = {0};
	int r;

	agent_health_sample(a->health, v);
	if (a->sock) { /* requests are checked against this sample; emptied jobs' cgroups go */
		agent_socket_sample(a->sock, v);
		if (a->cgroups)
			agent_cgroups_sweep(a->cgroups);
	}
	/* enforcing goes on whatever the ledger does */
	agent_idle_sample(&a->idle, v);
	agent_acl_sample(a->acl, v);
	/* violations are found, logged and acted on whether the ledger can record them or not */
	int opened = open_ledger(a, v->ctx);
	agent_watch_sample(a->watch, v, a->ledger);
	if (opened < 0)
		return;
	r = observe_sample(a, v, &s);
	/* the page's usage counters count what this sample records (docs/metrics.md) */
	for (size_t i = 0; r == 0 && i <= s.n; i++)
		if (i == s.n || s.o[i].end == GPUCTL_LEDGER_END_NONE)
			exporter_view_held(v, i < s.n ? s.o[i].gpu_uuid : NULL);
	if (r == 0)
		r = store(a, v, &s);
	if (r < 0) {
		if (!a->failing)
			cli_error("agent: ledger %s: %s (sampling and serving go on; trying again "
			          "every sample)",
			          a->path, r == -ENOMEM ? strerror(ENOMEM) : gpuctl_errmsg(v->ctx));
		a->failing = true;
		obs_set_free(&s);
		return;
	}
	if (a->failing)
		cli_error("agent: ledger %s: writing again", a->path);
	a->failing = false;
	/* on_lease_start and on_lease_end: what this sample recorded (agent-events.h) */
	agent_events_leases(a->hooks, v, s.o, s.n, was_seen, a, !a->stored, &a->holders);
	a->stored = true;
	/* what this sample observed (not its endings) is what the next one compares with */
	held_clear(a->prev, a->n_prev);
	free(a->prev);
	a->prev = NULL;
	a->n_prev = 0;
	for (size_t i = 0; i < s.n; i++)
		if (s.o[i].end == GPUCTL_LEDGER_END_NONE)
			s.h[a->n_prev++] = s.h[i];
		else
			held_clear(&s.h[i], 1);
	a->prev = s.h;
	s.h = NULL;
	for (size_t i = 0; i < s.n; i++) {
		free((void *)s.o[i].user);
		free((void *)s.o[i].group);
	}
	free(s.o);
}

static void agent_overdue(void *userdata, bool overdue, double silent_s)
{
	struct agent *a = userdata;

	agent_health_overdue(a->health, overdue, silent_s);
}

/* ---- the command ---- */

static void agent_socket_ready(void *userdata)
{
	struct agent *a = userdata;

	agent_socket_serve(a->sock);
}

/* enforce = cgroup in any pool (docs/agent.md, "Enforcement: cgroup"): the socket, and the job
 * cgroups' parent; a hierarchy that cannot be used is said, and every request refused. 0, or
 * the exit status (the socket cannot listen). */
static int start_confining(struct agent *a, const struct gpuctl_site *site, const char *path,
                           enum agent_cgroup_mode mode, const char *parent)
{
	const struct gpuctl_config *cfg = gpuctl_site_config(site);
	struct gpuctl_config_enforce e;
	char why[512], *state = NULL;
	bool wanted = false;

	for (size_t i = 0; i <= gpuctl_config_pool_count(cfg) && !wanted; i++) {
		gpuctl_config_pool_enforce(cfg, i < gpuctl_config_pool_count(cfg) ? i : SIZE_MAX,
		                           &e);
		wanted = e.enforce == GPUCTL_ENFORCE_CGROUP;
	}
	if (!wanted)
		return 0;
	if (!path)
		path = gpuctl_config_settings(cfg)->agent_socket;
	if (!path)
		path = AGENT_SOCKET_DEFAULT;
	if (agent_socket_open(path, &a->sock, why, sizeof(why)) < 0) {
		cli_error("agent: socket '%s': %s", path, why);
		return CLI_EXIT_FAILURE;
	}
	if (agent_cgroups_new(mode, parent, &a->cgroups, why, sizeof(why)) < 0)
		cli_error("agent: cgroups: %s (enforce = cgroup: every job is refused)", why);
	/* the jobs confined, beside the lease directory as the health state file is */
	if (asprintf(&state, "%s-cgroup.state", gpuctl_site_lease_dir_path(site)) < 0)
		state = NULL;
	agent_socket_set_cgroups(a->sock, a->cgroups, state);
	free(state);
	return 0;
}

static int cmd_agent_exec(struct cli *cli, int argc, char **argv)
{
	struct exporter_args ea = {.entry = &cmd_agent_entry,
	                           .listen_text = LISTEN_DEFAULT,
	                           .interval = AGENT_DEFAULT_INTERVAL,
	                           .max_processes = METRICS_DEFAULT_MAX_PROCESSES,
	                           .idle_window = 600};
	struct agent a = {0};
	struct exporter_hook hook = {
	        .userdata = &a, .on_sample = agent_sample, .on_overdue = agent_overdue};
	const char *ledger = NULL, *health_state = NULL, *dev_dir = NULL, *sock = NULL;
	const char *cg_parent = "gpuctl";
	char *acl_state = NULL;
	enum agent_cgroup_mode cg_mode = AGENT_CGROUP_AUTO;
	int opt, status;

	while ((opt = cmd_getopt(&cmd_agent_entry, argc, argv)) != -1) {
		if (opt == OPT_LEDGER) {
			if (!optarg[0])
				return cmd_usage_error(&cmd_agent_entry, "--ledger: empty path");
			ledger = optarg;
		} else if (opt == OPT_HEALTH_STATE) {
			if (!optarg[0])
				return cmd_usage_error(&cmd_agent_entry,
				                       "--health-state: empty path");
			health_state = optarg;
		} else if (opt == OPT_DEV_DIR) {
			if (optarg[0] != '/')
				return cmd_usage_error(&cmd_agent_entry,
				                       "--dev-dir: not an absolute path");
			dev_dir = optarg;
		} else if (opt == OPT_SOCKET) {
			if (optarg[0] != '/')
				return cmd_usage_error(&cmd_agent_entry,
				                       "--socket: '%s' is not an absolute path",
				                       optarg);
			sock = optarg;
		} else if (opt == OPT_CGROUP) {
			if (!strcmp(optarg, "auto") || !strcmp(optarg, "v1") ||
			    !strcmp(optarg, "v2"))
				cg_mode = optarg[0] == 'a'   ? AGENT_CGROUP_AUTO
				          : optarg[1] == '1' ? AGENT_CGROUP_V1
				                             : AGENT_CGROUP_V2;
			else
				return cmd_usage_error(&cmd_agent_entry,
				                       "--cgroup: '%s' is not auto, v1 or v2",
				                       optarg);
		} else if (opt == OPT_CGROUP_PARENT) {
			cg_parent = optarg;
		} else if ((status = exporter_option(&ea, opt, argv)) != CMD_GO_ON) {
			return status;
		}
	}
	if ((status = exporter_options_done(&ea, argc, argv)) != CMD_GO_ON)
		return status;
	if ((status = cli_site(cli, &cmd_agent_entry, ea.lease_dir, GPUCTL_SITE_NO_LEASES)) ||
	    (status = cli_ledger_path(cli, &cmd_agent_entry, ledger, &a.path)))
		return status;
	if (!health_state)
		health_state = gpuctl_site_health_state_path(cli->site);
	if ((status = agent_hooks_new(gpuctl_site_config(cli->site), &a.hooks)))
		return status;
	a.idle.hooks = a.hooks;
	if ((status = start_confining(&a, cli->site, sock, cg_mode, cg_parent))) {
		agent_hooks_free(a.hooks);
		return status;
	}
	if (a.sock) {
		hook.on_fd = agent_socket_ready;
		hook.fd = agent_socket_fd(a.sock);
	}
	if (!dev_dir)
		dev_dir = gpuctl_config_settings(gpuctl_site_config(cli->site))->dev_dir;
	/* the nodes' originals, beside the lease directory as the health state file is */
	if (asprintf(&acl_state, "%s-acl.state", gpuctl_site_lease_dir_path(cli->site)) < 0)
		acl_state = NULL;
	if (!acl_state || agent_health_new(health_state, a.hooks, &a.health) < 0 ||
	    agent_failover_new(&a.failover) < 0 || agent_watch_new(&a.watch) < 0 ||
	    agent_acl_new(dev_dir ? dev_dir : "/dev", acl_state, &a.acl) < 0) {
		free(acl_state);
		agent_watch_free(a.watch);
		agent_health_free(a.health);
		agent_failover_free(a.failover);
		agent_socket_free(a.sock);
		agent_cgroups_free(a.cgroups);
		agent_hooks_free(a.hooks);
		cli_error("agent: out of memory");
		return CLI_EXIT_FAILURE;
	}
	/* a file-size limit fails the write (EFBIG), as a full disk does, instead of killing us */
	(void)signal(SIGXFSZ, SIG_IGN);
	hook.violations = agent_watch_counts(a.watch);
	agent_watch_on_violation(a.watch, on_violation, &a);
	ea.hook = &hook;
	status = exporter_run(cli, &ea);
	gpuctl_ledger_free(a.ledger);
	agent_health_free(a.health);
	agent_failover_free(a.failover);
	held_clear(a.prev, a.n_prev);
	free(a.prev);
	agent_idle_free(&a.idle);
	agent_watch_free(a.watch);
	/* the device nodes back as they were (after the sampler stopped: no sample races this) */
	agent_acl_free(a.acl);
	free(acl_state);
	agent_socket_free(a.sock);
	agent_cgroups_free(a.cgroups);
	agent_hooks_free(a.hooks);
	json_decref(a.holders);
	return status;
}

const struct cmd_entry cmd_agent_entry = {
        .name = "agent",
        .long_options = agent_options,
        .short_options = "+:h",
        .usage = "[--listen ADDR:PORT] [--interval SECONDS] [--lease-dir DIR] "
                 "[--max-processes N] [--idle-window SECONDS] [--ledger PATH] "
                 "[--health-state FILE] [--dev-dir DIR] [--socket PATH] "
                 "[--cgroup auto|v1|v2] [--cgroup-parent NAME]",
        .summary = "the node agent: sample every GPU, serve the metrics, write the ledger",
        .options = "  --listen ADDR:PORT   where to serve the exporter's page (as exporter;\n"
                   "                       default " LISTEN_DEFAULT ")\n"
                   "  --interval SECONDS   sample every SECONDS, 0.1 to 86400 (default 1)\n"
                   "  --lease-dir DIR      the lease directory (default $GPUCTL_LEASE_DIR,\n"
                   "                       else the configuration's lease_dir, else\n"
                   "                       /run/gpuctl)\n"
                   "  --max-processes N    per-process series for at most N processes\n"
                   "                       (as exporter; default 100)\n"
                   "  --idle-window SECONDS  how long a process must hold memory below 5 %\n"
                   "                       utilisation to count as idle (as exporter;\n"
                   "                       default 600)\n"
                   "  --ledger PATH        the usage ledger to write (default $GPUCTL_LEDGER,\n"
                   "                       else the configuration's ledger, else\n"
                   "                       " GPUCTL_LEDGER_PATH ")\n"
                   "  --health-state FILE  the health state file to keep, as health --watch\n"
                   "                       (default $GPUCTL_HEALTH_STATE, else beside the\n"
                   "                       lease directory: /run/gpuctl-health.state)\n"
                   "  --dev-dir DIR        where the device nodes enforce = acl guards are\n"
                   "                       (default: the configuration's dev_dir, else /dev)\n"
                   "  --socket PATH        enforce = cgroup: the socket gpuctl run asks (default\n"
                   "                       the configuration's agent_socket, else\n"
                   "                       " AGENT_SOCKET_DEFAULT ")\n"
                   "  --cgroup auto|v1|v2  enforce = cgroup: the v1 devices controller or a v2\n"
                   "                       device program (default auto: v1 when mounted)\n"
                   "  --cgroup-parent NAME enforce = cgroup: the job cgroups' parent, relative to\n"
                   "                       the hierarchy (default gpuctl)\n"
                   "  -h, --help           print this help\n"
                   "\n"
                   "Each sample serves the exporter's /metrics, is checked by health\n"
                   "--watch's rules (each finding logged on stderr as it appears and clears)\n"
                   "and is written to the ledger (docs/agent.md): one record per lease and per\n"
                   "workload seen on a GPU without a lease. It also applies the pools'\n"
                   "idle_warn, idle_release and max_lease_age (docs/idle.md): a lease taken\n"
                   "back is recorded evicted. On the pools whose enforce is not off, each\n"
                   "violation of the leases is logged once, counted, recorded and acted on\n"
                   "as violation_action says (docs/agent.md). Under a pool's enforce = acl,\n"
                   "its GPUs' device nodes are open only to the users holding a lease on\n"
                   "them (restored when it stops; docs/agent.md, \"Enforcement: acl\"). The\n"
                   "configuration's hooks (on_health, on_lease_start, on_lease_end, on_idle,\n"
                   "on_violation; docs/hooks.md) run with each event as JSON on their stdin,\n"
                   "under hook_timeout and hook_max_running. A ledger that cannot be written\n"
                   "is said once and tried again every sample; sampling and serving go on.\n"
                   "SIGINT or SIGTERM stop it (exit 0); its open records are closed as\n"
                   "agent-restart when it starts again.\n",
        .exec = cmd_agent_exec,
        .exits = CMD_EXITS_DRIVER,
};
