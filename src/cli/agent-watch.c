// SPDX-License-Identifier: MIT
/*
 * agent-watch.c: the node agent's watch (docs/agent.md, "Violations"): the violations of each
 * sample on the GPUs of the pools whose enforce is not off, each new one logged once, counted,
 * recorded in the ledger, acted on (agent-watch-act.c) and handed to the callback.
 *
 * Decisions:
 * - Fed by the sample the hook already has: the snapshot's compute processes, the lease list
 *   with its owner records (their uid is the file system's, not the record's word), and the
 *   sampler's classification of processes of no lease (gpuctl_foreign_scan, the rule ps shows:
 *   a process is a lease's when it or an ancestor is the pid or job pid of a record for that
 *   device, or holds its lock). Nothing is sampled twice; /proc is read for the processes on
 *   GPUs (their parent, real uid and start time).
 * - foreign: a process of no lease on a device that no lease of its user (real uid) covers: the
 *   whole GPU covers its MIG devices, a MIG device only itself (a process on MIG device 1 is
 *   foreign when its user holds MIG device 0 only); a process not placed on a MIG device is
 *   covered by a lease of any device of its GPU. A GPU with no lease at all counts: the issue's
 *   rule is "a process on a GPU that no lease of its user covers". A user's own process beside
 *   their `select --hold` lease is therefore none: the hold covers it.
 * - outside: a process of no lease on a GPU whose ancestor (up to ANCESTOR_MAX levels) is the
 *   holder or job of a lease that does not cover that device (as for foreign): a job's child
 *   that went to another GPU or MIG device. Checked before foreign: a job's process is the
 *   job's, whoever else leases that GPU.
 * - overuse: for each holder of a shared device, the memory of the processes of its lease on
 *   that GPU (the lease's by the classification, the holder's by the ancestor walk) against
 *   what it declared plus the pool's share_margin (gpuctl_config_share_margin over the GPU's
 *   total memory). What it declared is its owner record's share_mem, at most the total the
 *   kernel's locks declare for the device (a record cannot claim more than the locks do). The
 *   offending process named is its largest one there.
 * - Once: a violation is keyed by its kind, process (pid and start time; for overuse the
 *   holder's) and GPU; it is new when the last sample did not have it. One that ends and comes
 *   back is new again. A process gone from /proc between NVML's list and our read is none.
 * - The sampler's classification is needed: a sample without it (the lease files unreadable)
 *   finds nothing (the agent says so already).
 * - No false start: the sampler reads NVML's processes before the lease list (cmd-exporter.c),
 *   and gpuctl run leases before it starts its job, so a job's process that NVML lists has its
 *   lease in the list read after it. A process listed after its lease ended is usually gone
 *   from /proc (a zombie counts as gone) by the time it is judged.
 */
#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent-idle.h"
#include "agent-watch.h"
#include "cmd.h"
#include "format.h"
#include "hostproc.h"

#define ANCESTOR_MAX 64 /* parent levels walked to find a lease's holder or job */
#define KEY_MAX      128

static const char *const kind_names[AGENT_VIOLATION_KINDS] = {"foreign", "overuse", "outside"};

struct agent_watch {
	uint64_t counts[AGENT_VIOLATION_KINDS];
	char (*active)[KEY_MAX]; /* the violations of the last sample */
	size_t n_active, cap_active;
	char (*now)[KEY_MAX]; /* those of this sample, so far */
	size_t n_now, cap_now;
	struct watch_kill *kills; /* terminations under way */
	size_t n_kills;
	agent_violation_fn on_violation;
	void *userdata;
	bool ledger_failing; /* a violation could not be recorded (said once per streak) */
};

/* A lease holder of the sample on one device. */
struct lholder {
	const struct gpuctl_lease_owner *ow;
	size_t gpu;
	int mig; /* the MIG device of gpu, -1: the whole GPU */
};

/* The sample as the watch sees it. */
struct wsample {
	struct agent_watch *w;
	const struct exporter_view *v;
	struct gpuctl_ledger *ledger;
	struct lholder *hs; /* every holder of every device */
	size_t n_hs;
};

/* A process's facts from /proc. */
struct pinfo {
	uint32_t ppid, uid;
	uint64_t ticks;
	char comm[16];
};

const char *agent_violation_kind_name(enum agent_violation_kind kind)
{
	return (unsigned)kind < AGENT_VIOLATION_KINDS ? kind_names[kind] : NULL;
}

int agent_watch_new(struct agent_watch **ret)
{
	*ret = calloc(1, sizeof(**ret));
	return *ret ? 0 : -ENOMEM;
}

void agent_watch_free(struct agent_watch *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->n_kills; i++)
		if (w->kills[i].pidfd >= 0)
			(void)close(w->kills[i].pidfd);
	free(w->kills);
	free(w->active);
	free(w->now);
	free(w);
}

void agent_watch_on_violation(struct agent_watch *w, agent_violation_fn on_violation,
                              void *userdata)
{
	w->on_violation = on_violation;
	w->userdata = userdata;
}

const uint64_t *agent_watch_counts(const struct agent_watch *w)
{
	return w->counts;
}

/* pid's parent, real uid, start time and name (proc(5): /proc/PID/stat and status). */
static int proc_info(uint32_t pid, struct pinfo *ret)
{
	struct hostproc_stat st;
	char path[64], buf[256];
	bool got_ppid = false, got_uid = false;
	FILE *f;
	int r;

	if ((r = hostproc_read_stat((pid_t)pid, &st)) < 0)
		return r;
	if (st.state == 'Z')
		return -ESRCH;
	ret->ticks = st.start_ticks;
	memcpy(ret->comm, st.comm, sizeof(ret->comm));
	(void)snprintf(path, sizeof(path), "/proc/%u/status", pid);
	if (!(f = fopen(path, "re")))
		return -errno;
	while (fgets(buf, sizeof(buf), f) && !(got_ppid && got_uid)) {
		if (sscanf(buf, "PPid: %u", &ret->ppid) == 1)
			got_ppid = true;
		else if (sscanf(buf, "Uid: %u", &ret->uid) == 1)
			got_uid = true;
	}
	fclose(f);
	return got_ppid && got_uid ? 0 : -EINVAL;
}

/* The chain of pid (whose parent is ppid) and its ancestors, at most ANCESTOR_MAX, pid first:
 * how many. */
static size_t ancestry(uint32_t pid, uint32_t ppid, uint32_t *chain)
{
	size_t n = 0;

	while (n < ANCESTOR_MAX && pid > 1) {
		struct pinfo pi;

		chain[n++] = pid;
		if (n > 1) {
			if (proc_info(pid, &pi) < 0)
				break;
			ppid = pi.ppid;
		}
		pid = ppid;
	}
	return n;
}

/* Whether ow is the holder or job of a process of that chain. */
static bool in_chain(const uint32_t *chain, size_t n, const struct gpuctl_lease_owner *ow)
{
	for (size_t i = 0; i < n; i++)
		if (chain[i] == ow->pid || (ow->job_pid && chain[i] == ow->job_pid))
			return true;
	return false;
}

/* The holders of every device of the sample's leases. */
static int collect_holders(struct wsample *s)
{
	const struct gpuctl_lease_list *ll = s->v->leases;
	size_t n = gpuctl_lease_list_count(ll), cap = 0;

	for (size_t i = 0; i < n; i++) {
		const struct gpuctl_lease_owner *const *owners = NULL;
		size_t g = 0, n_own = 0;
		int mig = -1;

		if (gpuctl_lease_list_get(ll, i, &g, &mig, NULL, NULL, NULL) < 0 ||
		    gpuctl_lease_list_holders(ll, i, &owners, &n_own) < 0)
			continue;
		for (size_t k = 0; k < n_own; k++) {
			if (s->n_hs == cap) {
				struct lholder *h;
				cap = cap ? 2 * cap : 16;
				if (!(h = realloc(s->hs, cap * sizeof(*h))))
					return -ENOMEM;
				s->hs = h;
			}
			s->hs[s->n_hs++] = (struct lholder){.ow = owners[k], .gpu = g, .mig = mig};
		}
	}
	return 0;
}

static bool same_holder(const struct gpuctl_lease_owner *a, const struct gpuctl_lease_owner *b)
{
	return a->pid == b->pid && a->start_time == b->start_time;
}

/* Whether holding h covers a process on MIG device mig of GPU g (-1: the whole GPU, or a MIG
 * device the snapshot does not list): the whole GPU covers its MIG devices, a MIG device only
 * itself; a process not placed on a MIG device is covered by any device of its GPU. */
static bool covers(const struct lholder *h, size_t g, int mig)
{
	return h->gpu == g && (mig < 0 || h->mig < 0 || h->mig == mig);
}

/* Whether holder ow's lease covers a process on (g, mig). */
static bool holder_covers(const struct wsample *s, const struct gpuctl_lease_owner *ow, size_t g,
                          int mig)
{
	for (size_t i = 0; i < s->n_hs; i++)
		if (covers(&s->hs[i], g, mig) && same_holder(s->hs[i].ow, ow))
			return true;
	return false;
}

/* Whether a lease of user uid covers a process on (g, mig). */
static bool user_covers(const struct wsample *s, uint32_t uid, size_t g, int mig)
{
	for (size_t i = 0; i < s->n_hs; i++)
		if (covers(&s->hs[i], g, mig) && s->hs[i].ow->uid == uid)
			return true;
	return false;
}

/* The holder whose holder or job pid is (an ancestor of) pid, NULL: none. */
static const struct gpuctl_lease_owner *holder_of(const struct wsample *s, uint32_t pid,
                                                  uint32_t ppid)
{
	uint32_t chain[ANCESTOR_MAX];
	size_t n = ancestry(pid, ppid, chain);

	for (size_t i = 0; i < s->n_hs; i++)
		if (in_chain(chain, n, s->hs[i].ow))
			return s->hs[i].ow;
	return NULL;
}

/* "GPUs 0,1" or "GPU 3": the GPUs holder ow holds devices of. */
static void holder_gpus(const struct wsample *s, const struct gpuctl_lease_owner *ow, char *buf,
                        size_t size)
{
	size_t len = 0, n = 0;
	char list[96] = "";

	for (size_t i = 0; i < s->n_hs; i++) {
		bool dup = false;
		if (!same_holder(s->hs[i].ow, ow))
			continue;
		for (size_t j = 0; j < i && !dup; j++)
			dup = same_holder(s->hs[j].ow, ow) && s->hs[j].gpu == s->hs[i].gpu;
		if (dup || len >= sizeof(list))
			continue;
		int w = snprintf(list + len, sizeof(list) - len, "%s%zu", n ? "," : "",
		                 s->hs[i].gpu);
		if (w > 0)
			len += (size_t)w;
		n++;
	}
	(void)snprintf(buf, size, "%s %s", n == 1 ? "GPU" : "GPUs", list);
}

/* Whether key was active at the last sample; notes it active now. -ENOMEM. */
static int note_key(struct agent_watch *w, const char *key, bool *ret_was)
{
	*ret_was = false;
	for (size_t i = 0; i < w->n_now; i++)
		if (!strcmp(w->now[i], key))
			return *ret_was = true, 0; /* found twice in one sample: once */
	for (size_t i = 0; i < w->n_active && !*ret_was; i++)
		*ret_was = !strcmp(w->active[i], key);
	if (w->n_now == w->cap_now) {
		size_t cap = w->cap_now ? 2 * w->cap_now : 16;
		char(*a)[KEY_MAX] = realloc(w->now, cap * sizeof(*a));
		if (!a)
			return -ENOMEM;
		w->now = a;
		w->cap_now = cap;
	}
	(void)snprintf(w->now[w->n_now++], KEY_MAX, "%s", key);
	return 0;
}

/* Takes the action the pool says on v (its action text into buf). */
static void act(struct wsample *s, const struct gpuctl_config_enforce *e,
                const struct agent_violation *v, char *buf, size_t size, struct watch_kill *k,
                bool *ret_kill)
{
	*ret_kill = false;
	if (e->action == GPUCTL_VIOLATION_NOTIFY) {
		char line[600];
		(void)snprintf(line, sizeof(line),
		               "gpuctl agent: violation (%s): your process %u (%s) on GPU %zu: %s",
		               kind_names[v->kind], v->pid, v->comm, v->gpu, v->detail);
		int n = watch_notify(v->uid, line);
		(void)snprintf(buf, size, "notify: %d terminal%s", n, n == 1 ? "" : "s");
	} else if (e->action == GPUCTL_VIOLATION_TERMINATE) {
		int r;
		if ((v->uid < 1000) && !e->terminate_system)
			(void)snprintf(buf, size,
			               "terminate: not done (uid %u < 1000; terminate_system = no)",
			               v->uid);
		else if (v->pid == (uint32_t)getpid() || v->pid <= 1)
			(void)snprintf(buf, size, "terminate: not done (pid %u)", v->pid);
		else if ((r = watch_terminate(v->pid, v->start_ticks, v->uid, k)) < 0)
			(void)snprintf(buf, size, "terminate: not done (%s)", strerror(-r));
		else {
			(void)snprintf(buf, size, "terminate: SIGTERM");
			k->deadline = s->v->mono + (double)e->terminate_grace_s;
			k->grace_s = e->terminate_grace_s;
			*ret_kill = true;
		}
	} else {
		(void)snprintf(buf, size, "log");
	}
}

/* Records violation v (its action taken) in the ledger: its row id, -1 none. */
static int64_t record(struct wsample *s, const struct agent_violation *v)
{
	struct gpuctl_ledger_violation lv = GPUCTL_LEDGER_VIOLATION_INIT;
	int64_t id = -1;

	if (!s->ledger)
		return -1;
	lv.time_s = v->time;
	lv.kind = kind_names[v->kind];
	lv.user = v->user;
	lv.uid = v->uid;
	lv.pid = v->pid;
	lv.gpu_uuid = v->gpu_uuid;
	lv.detail = v->detail;
	lv.action = v->action;
	if (gpuctl_ledger_violation_add(s->v->ctx, s->ledger, &lv, &id) < 0) {
		if (!s->w->ledger_failing)
			cli_error("agent: ledger: %s (violations are logged but not recorded)",
			          gpuctl_errmsg(s->v->ctx));
		s->w->ledger_failing = true;
		return -1;
	}
	s->w->ledger_failing = false;
	return id;
}

/* A violation found now: acted on, logged, counted and recorded when it is new. */
static int found(struct wsample *s, struct agent_violation *v, const char *key_who)
{
	struct agent_watch *w = s->w;
	struct gpuctl_config_enforce e;
	struct watch_kill k = {.pidfd = -1};
	char key[KEY_MAX], action[160], who[96], uname[64];
	struct passwd *pw;
	bool was, kill_on;
	size_t pi = agent_pool_index(s->v, v->gpu, &v->pool);

	(void)snprintf(key, sizeof(key), "%s:%s:%s", kind_names[v->kind], key_who, v->gpu_uuid);
	if (note_key(w, key, &was) < 0)
		return -ENOMEM;
	if (was)
		return 0;
	gpuctl_config_pool_enforce(gpuctl_site_config(s->v->site), pi, &e);
	/* a copy: getpwuid's buffer is reused by the next call (notify's) */
	pw = getpwuid((uid_t)v->uid);
	(void)snprintf(uname, sizeof(uname), "%s", pw ? pw->pw_name : "");
	v->user = pw ? uname : NULL;
	v->enforce = gpuctl_enforce_name(e.enforce);
	act(s, &e, v, action, sizeof(action), &k, &kill_on);
	v->action = action;
	if (v->user)
		(void)snprintf(who, sizeof(who), "user %s, uid %u", v->user, v->uid);
	else
		(void)snprintf(who, sizeof(who), "uid %u", v->uid);
	cli_error("agent: violation: %s: pid %u (%s, %s) on GPU %zu (%s, pool %s): %s; action: %s",
	          kind_names[v->kind], v->pid, v->comm, who, v->gpu, v->gpu_uuid, v->pool,
	          v->detail, action);
	w->counts[v->kind]++;
	k.row = record(s, v);
	if (kill_on) {
		struct watch_kill *ks = realloc(w->kills, (w->n_kills + 1) * sizeof(*ks));
		if (!ks) {
			if (k.pidfd >= 0)
				(void)close(k.pidfd);
		} else {
			(void)snprintf(k.what, sizeof(k.what), "%s: pid %u (%s) on GPU %zu",
			               kind_names[v->kind], v->pid, who, v->gpu);
			w->kills = ks;
			w->kills[w->n_kills++] = k;
		}
	}
	if (w->on_violation)
		w->on_violation(w->userdata, v);
	return 0;
}

/* A process of no lease on GPU g (on its MIG device mig, -1: none): outside, foreign, or
 * neither. */
static int judge_foreign(struct wsample *s, size_t g, int mig, const char *uuid, uint32_t pid,
                         const struct pinfo *pi)
{
	const struct gpuctl_lease_owner *ow = holder_of(s, pid, pi->ppid);
	struct agent_violation v = {.time = s->v->wall,
	                            .uid = pi->uid,
	                            .pid = pid,
	                            .start_ticks = pi->ticks,
	                            .comm = pi->comm,
	                            .gpu = g,
	                            .gpu_uuid = uuid,
	                            .mem_used = -1,
	                            .mem_allowed = -1};
	char detail[256], who[48], gpus[112], dev[48];
	struct passwd *pw;

	if (mig >= 0)
		(void)snprintf(dev, sizeof(dev), "MIG device %zu:%d", g, mig);
	else
		(void)snprintf(dev, sizeof(dev), "GPU %zu", g);
	(void)snprintf(who, sizeof(who), "%u@%" PRIu64, pid, pi->ticks);
	if (ow && !holder_covers(s, ow, g, mig)) {
		holder_gpus(s, ow, gpus, sizeof(gpus));
		v.kind = AGENT_VIOLATION_OUTSIDE;
		v.holder_pid = ow->pid;
		(void)snprintf(
		        detail, sizeof(detail),
		        "a process of the job of pid %u, whose lease holds %s, on %s outside "
		        "it",
		        ow->pid, gpus, dev);
	} else if (!ow && !user_covers(s, pi->uid, g, mig)) {
		v.kind = AGENT_VIOLATION_FOREIGN;
		pw = getpwuid((uid_t)pi->uid);
		if (pw)
			(void)snprintf(detail, sizeof(detail), "no lease of %s covers %s",
			               pw->pw_name, dev);
		else
			(void)snprintf(detail, sizeof(detail), "no lease of uid %u covers %s",
			               pi->uid, dev);
	} else {
		return 0;
	}
	v.detail = detail;
	return found(s, &v, who);
}

/* The memory of the processes of holder ow's lease on GPU g (not foreign, its by ancestry);
 * its largest process into *big (pid 0: none). */
static int64_t lease_memory(const struct wsample *s, size_t g, const struct gpuctl_lease_owner *ow,
                            uint32_t *big, struct pinfo *big_info)
{
	const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(s->v->snap, g);
	int64_t sum = 0, most = -1;

	*big = 0;
	for (size_t k = 0; k < gpuctl_gpu_proc_count(gpu); k++) {
		const struct gpuctl_proc *p = gpuctl_gpu_proc(gpu, k);
		uint32_t pid = gpuctl_proc_pid(p);
		uint32_t chain[ANCESTOR_MAX];
		struct pinfo pi;
		int64_t b;

		if (!pid || gpuctl_foreign_proc(s->v->foreign, g, k) ||
		    gpuctl_proc_used_memory(p, &b) < 0 || proc_info(pid, &pi) < 0 ||
		    !in_chain(chain, ancestry(pid, pi.ppid, chain), ow))
			continue;
		sum += b;
		if (b > most) {
			most = b;
			*big = pid;
			*big_info = pi;
		}
	}
	return sum;
}

/* Each holder of shared device entry i against its declaration plus the margin. */
static int judge_shared(struct wsample *s, size_t i, size_t g, const char *uuid)
{
	const struct gpuctl_lease_owner *const *owners = NULL;
	const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(s->v->snap, g);
	size_t n_own = 0;
	uint64_t declared = 0;
	int64_t total = 0;
	int r = 0;

	if (gpuctl_lease_list_shares(s->v->leases, i, &declared, &owners, &n_own) < 0 ||
	    gpuctl_gpu_int(gpu, GPUCTL_F_MEMORY_TOTAL, &total) < 0 || total <= 0)
		return 0;
	uint64_t margin =
	        gpuctl_config_share_margin(gpuctl_site_config(s->v->site), (uint64_t)total);
	for (size_t k = 0; r == 0 && k < n_own; k++) {
		const struct gpuctl_lease_owner *ow = owners[k];
		uint64_t mine =
		        ow->share_mem && ow->share_mem < declared ? ow->share_mem : declared;
		struct pinfo pi;
		uint32_t big;
		int64_t used = lease_memory(s, g, ow, &big, &pi);
		char detail[200], a[32], b[32], c[32], who[48];

		if (!big || (uint64_t)used <= mine + margin)
			continue;
		format_bytes((uint64_t)used, a, sizeof(a));
		format_bytes(mine, b, sizeof(b));
		format_bytes(margin, c, sizeof(c));
		(void)snprintf(
		        detail, sizeof(detail),
		        "the shared lease of pid %u uses %s on GPU %zu, declared %s (margin %s)",
		        ow->pid, a, g, b, c);
		(void)snprintf(who, sizeof(who), "%u@%" PRIu64, ow->pid, ow->start_time);
		struct agent_violation v = {.kind = AGENT_VIOLATION_OVERUSE,
		                            .time = s->v->wall,
		                            .uid = pi.uid,
		                            .pid = big,
		                            .start_ticks = pi.ticks,
		                            .comm = pi.comm,
		                            .gpu = g,
		                            .gpu_uuid = uuid,
		                            .holder_pid = ow->pid,
		                            .mem_used = used,
		                            .mem_allowed = (int64_t)(mine + margin),
		                            .detail = detail};
		r = found(s, &v, who);
	}
	return r;
}

/* Whether GPU g's pool enforces anything. */
static bool enforced(const struct exporter_view *v, size_t g)
{
	struct gpuctl_config_enforce e;
	const char *name;

	gpuctl_config_pool_enforce(gpuctl_site_config(v->site), agent_pool_index(v, g, &name), &e);
	return e.enforce != GPUCTL_ENFORCE_OFF;
}

/* The violations of GPU g. */
static int judge_gpu(struct wsample *s, size_t g)
{
	const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(s->v->snap, g);
	const char *uuid = gpuctl_gpu_str(gpu, GPUCTL_F_UUID);
	int r = 0;

	if (!uuid || gpuctl_gpu_lost(gpu) || !enforced(s->v, g))
		return 0;
	for (size_t k = 0; r == 0 && k < gpuctl_gpu_proc_count(gpu); k++) {
		const struct gpuctl_proc *p = gpuctl_gpu_proc(gpu, k);
		uint32_t pid = gpuctl_proc_pid(p);
		struct pinfo pi;

		if (!pid || !gpuctl_foreign_proc(s->v->foreign, g, k) || proc_info(pid, &pi) < 0)
			continue;
		r = judge_foreign(s, g, gpuctl_proc_mig_device(gpu, p), uuid, pid, &pi);
	}
	for (size_t i = 0; r == 0 && i < gpuctl_lease_list_count(s->v->leases); i++) {
		enum gpuctl_lease_state st;
		size_t eg = 0;

		if (gpuctl_lease_list_get(s->v->leases, i, &eg, NULL, &st, NULL, NULL) == 0 &&
		    eg == g && st == GPUCTL_LEASE_SHARED)
			r = judge_shared(s, i, g, uuid);
	}
	return r;
}

/* The terminations under way: SIGKILL to those alive past their grace. */
static void kills_sample(struct agent_watch *w, const struct exporter_view *v,
                         struct gpuctl_ledger *ledger)
{
	size_t n = 0;

	for (size_t i = 0; i < w->n_kills; i++) {
		struct watch_kill *k = &w->kills[i];
		bool ended = watch_kill_ended(k);

		if (!ended && v->mono < k->deadline) {
			w->kills[n++] = *k;
			continue;
		}
		if (!ended) {
			char action[96], d[32];
			int r = watch_kill_now(k);
			format_duration(k->grace_s, d, sizeof(d));
			if (r < 0)
				(void)snprintf(action, sizeof(action),
				               "terminate: SIGTERM; SIGKILL after %s failed (%s)",
				               d, strerror(-r));
			else
				(void)snprintf(action, sizeof(action),
				               "terminate: SIGTERM, SIGKILL after %s", d);
			cli_error("agent: violation: %s: alive %s after SIGTERM; action: %s",
			          k->what, d, action);
			if (ledger && k->row >= 0)
				(void)gpuctl_ledger_violation_action(v->ctx, ledger, k->row,
				                                     action);
		}
		if (k->pidfd >= 0)
			(void)close(k->pidfd);
	}
	w->n_kills = n;
}

void agent_watch_sample(struct agent_watch *w, const struct exporter_view *v,
                        struct gpuctl_ledger *ledger)
{
	struct wsample s = {.w = w, .v = v, .ledger = ledger};
	int r = 0;

	kills_sample(w, v, ledger);
	w->n_now = 0;
	if (!v->foreign)
		return; /* cannot tell a lease's processes: keep the last sample's as they were */
	if (v->leases)
		r = collect_holders(&s);
	for (size_t g = 0; r == 0 && g < gpuctl_snapshot_gpu_count(v->snap); g++)
		r = judge_gpu(&s, g);
	free(s.hs);
	if (r < 0)
		return; /* out of memory: keep the last sample's (nothing logged twice) */
	/* what this sample found is what the next compares with */
	char(*t)[KEY_MAX] = w->active;
	size_t cap = w->cap_active;
	w->active = w->now;
	w->n_active = w->n_now;
	w->cap_active = w->cap_now;
	w->now = t;
	w->cap_now = cap;
	w->n_now = 0;
}

json_t *agent_violation_json(const struct agent_violation *v)
{
	json_t *o = json_object();
	char when[32];
	time_t t = (time_t)v->time;
	struct tm tm;

	if (!o)
		return NULL;
	if (gmtime_r(&t, &tm))
		(void)strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	else
		when[0] = '\0';
	if (json_put(o, "kind", json_string(kind_names[v->kind])) < 0 ||
	    json_put(o, "time", json_string(when)) < 0 ||
	    json_put(o, "user", json_string_or_null(v->user)) < 0 ||
	    json_put(o, "uid", json_integer(v->uid)) < 0 ||
	    json_put(o, "pid", json_integer(v->pid)) < 0 ||
	    json_put(o, "comm", json_text(v->comm ? v->comm : "")) < 0 ||
	    json_put(o, "gpu", json_integer((json_int_t)v->gpu)) < 0 ||
	    json_put(o, "uuid", json_string_or_null(v->gpu_uuid)) < 0 ||
	    json_put(o, "pool", json_string_or_null(v->pool)) < 0 ||
	    json_put(o, "enforce", json_string_or_null(v->enforce)) < 0 ||
	    json_put(o, "holder_pid", v->holder_pid ? json_integer(v->holder_pid) : json_null()) <
	            0 ||
	    json_put(o, "memory_used", v->mem_used >= 0 ? json_integer(v->mem_used) : json_null()) <
	            0 ||
	    json_put(o, "memory_allowed",
	             v->mem_allowed >= 0 ? json_integer(v->mem_allowed) : json_null()) < 0 ||
	    json_put(o, "detail", json_text(v->detail ? v->detail : "")) < 0 ||
	    json_put(o, "action", json_string_or_null(v->action)) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}
