// SPDX-License-Identifier: MIT
/*
 * lease.c: leases, i.e. exclusive flock(2)s on DIR/locks/<UUID>.lock, and shared leases (a
 * shared flock plus OFD read locks that declare memory) (docs/leases.md, design.md §2.4, §7).
 * Tests: tests/unit/test-lease.c, tests/cli/test_leases.py, test_wait.py, test_share.py.
 *
 * Decisions:
 * - MIG and whole GPUs: a whole GPU counts as leased when any of its MIG devices is leased,
 *   and a MIG device when its GPU is (select.c's filter spreads each marked device that way).
 *   An UNUSABLE or UNINITIALISED device is excluded the same way (it is put in the "leased"
 *   set, we cannot know who holds it); if the selection then fails, the -ENOSPC line names the
 *   lock-file problem, and it becomes -ENOENT (with `sudo gpuctl lease init`) when a missing
 *   lock file was among the causes. Every device of the snapshot is probed, whatever the
 *   request, so the rule holds in both directions.
 * - Failing to write a record does not fail select-and-lease (the lock is the lease); it is
 *   logged. gpuctl_lease_set_owner does report the failure.
 * - Foreign processes: a compute process on a device is a lease's only when its pid or an
 *   ancestor (up to ANCESTOR_MAX levels) is the pid or job_pid of a counting record for that
 *   same device (or its whole GPU, or, for a whole GPU, one of its MIG devices). Stricter than
 *   "any lease": a job that wanders onto a GPU it did not lease makes that GPU busy. A process
 *   on a MIG device that cannot be matched to one by GI/CI marks its whole GPU.
 * - Release signals through a pidfd when the kernel has pidfd_open (start time and owner are
 *   checked after opening it, so the pid cannot be recycled in between); else kill().
 * - Waiting (docs/leases.md "Waiting"): tickets DIR/queue/<uid>/<arrival>-<pid>, live while
 *   their waiter holds an exclusive flock (probed with LOCK_SH|LOCK_NB); every select-and-lease
 *   excludes, as if leased, the devices the older live tickets could use (their static filters
 *   run through gpuctl_select one device at a time; malformed: every GPU). Wake-ups are
 *   inotify events filtered by a fingerprint of /proc/locks and the ticket names that opens no
 *   lock file (so checking it makes no event).
 * - Sharing (docs/leases.md "Sharing"): a device is SHARED when an exclusive probe fails and a
 *   shared one succeeds (lease-dir.c); declared memory is counted in lease-share.c. A shared
 *   request also raises min_free_mem to what it declares. Shared records: lease-record.c.
 * - Readers that probe (gpuctl_lease_list, gpuctl_lease_foreign, gpuctl_lease_release) hold
 *   select.lock shared while they do, so their momentary flocks never make a select-and-lease
 *   see a free device as held. Inside select-and-lease (select.lock already exclusive) the
 *   internal lease_foreign is used.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "ctx.h"
#include "lease-internal.h"
#include "snapshot-internal.h"
#include "util.h"

#define ANCESTOR_MAX 64 /* levels of the parent walk */

struct list_entry {
	size_t gpu;                           /* snapshot index */
	int mig;                              /* MIG index, -1 for the whole GPU */
	enum gpuctl_lease_state state;        /* what the probe found */
	char *reason;                         /* UNUSABLE/UNINITIALISED: why; owned */
	bool has_owner;                       /* owner is filled */
	struct gpuctl_lease_owner owner;      /* strings point into rec */
	struct record rec;                    /* the chosen record (strings owned) */
	uint64_t declared;                    /* SHARED: bytes the shared leases' locks declare */
	struct record *sh_recs;               /* SHARED: the counting records (owned) */
	struct gpuctl_lease_owner *sh_owners; /* their owner facts, strings in sh_recs */
	const struct gpuctl_lease_owner **sh_ptrs; /* pointers to sh_owners, for the API */
	size_t n_sh;                               /* entries in the three */
};

struct gpuctl_lease_list {
	struct list_entry *e; /* GPUs, each followed by its MIG devices; owned */
	size_t n;             /* entries in e */
};

/* The lease request's fields as this library knows them (a caller built against an older header
 * passes a smaller struct: the rest keep their defaults). */
static void lease_request_copy(struct gpuctl_lease_request *dst,
                               const struct gpuctl_lease_request *src)
{
	*dst = (struct gpuctl_lease_request)GPUCTL_LEASE_REQUEST_INIT;
	if (src)
		memcpy(dst, src, src->struct_size < sizeof(*dst) ? src->struct_size : sizeof(*dst));
	dst->struct_size = sizeof(*dst);
}

/* "10 GiB", "512 MiB" or "1234 B": the largest binary unit that divides bytes exactly. */
static const char *size_text_of(uint64_t bytes, char *buf, size_t size)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	size_t u = 0;

	while (u + 1 < ELEMENTSOF(units) && bytes >= 1024 && bytes % 1024 == 0) {
		bytes /= 1024;
		u++;
	}
	(void)snprintf(buf, size, "%" PRIu64 " %s", bytes, units[u]);
	return buf;
}

/* ---- list ---- */

void gpuctl_lease_list_free(struct gpuctl_lease_list *list)
{
	if (!list)
		return;
	for (size_t i = 0; i < list->n; i++) {
		free(list->e[i].reason);
		lease_record_clear(&list->e[i].rec);
		lease_records_free(list->e[i].sh_recs, list->e[i].n_sh);
		free(list->e[i].sh_owners);
		free(list->e[i].sh_ptrs);
	}
	free(list->e);
	free(list);
}

size_t gpuctl_lease_list_count(const struct gpuctl_lease_list *list)
{
	return list ? list->n : 0;
}

int gpuctl_lease_list_get(const struct gpuctl_lease_list *list, size_t i, size_t *ret_gpu,
                          int *ret_mig, enum gpuctl_lease_state *ret_state,
                          const struct gpuctl_lease_owner **ret_owner, const char **ret_reason)
{
	const struct list_entry *e;

	if (!list || i >= list->n)
		return -EINVAL;
	e = &list->e[i];
	if (ret_gpu)
		*ret_gpu = e->gpu;
	if (ret_mig)
		*ret_mig = e->mig;
	if (ret_state)
		*ret_state = e->state;
	if (ret_owner)
		*ret_owner = e->has_owner ? &e->owner : NULL;
	if (ret_reason)
		*ret_reason = e->reason;
	return 0;
}

int gpuctl_lease_list_shares(const struct gpuctl_lease_list *list, size_t i, uint64_t *ret_declared,
                             const struct gpuctl_lease_owner *const **ret_owners, size_t *ret_n)
{
	const struct list_entry *e;

	if (!list || i >= list->n)
		return -EINVAL;
	e = &list->e[i];
	if (ret_declared)
		*ret_declared = e->declared;
	if (ret_owners)
		*ret_owners = e->sh_ptrs;
	if (ret_n)
		*ret_n = e->n_sh;
	return 0;
}

uint64_t gpuctl_lease_list_room(const struct gpuctl_lease_list *list, size_t i,
                                const struct gpuctl_snapshot *snap,
                                const struct gpuctl_lease_request *lreq)
{
	struct gpuctl_lease_request lr;
	const struct list_entry *e;
	uint64_t cap, used;

	if (!list || i >= list->n || !snap)
		return 0;
	e = &list->e[i];
	if ((e->state != GPUCTL_LEASE_FREE && e->state != GPUCTL_LEASE_SHARED) ||
	    e->gpu >= snap->n_gpus || (e->mig >= 0 && (size_t)e->mig >= snap->gpus[e->gpu].n_migs))
		return 0;
	lease_request_copy(&lr, lreq);
	cap = lease_share_capacity(snap, e->gpu, e->mig, &lr);
	used = e->declared / SHARE_UNIT;
	return used >= cap ? 0 : (cap - used) * SHARE_UNIT;
}

static struct gpuctl_lease_owner owner_of(const struct record *r)
{
	return (struct gpuctl_lease_owner){
	        .uid = r->uid,
	        .user = r->user,
	        .pid = r->pid,
	        .job_pid = r->job_pid,
	        .start_time = r->start_time,
	        .command = r->command,
	        .label = r->label,
	        .share_mem = r->shared ? r->share_mem : 0,
	};
}

/* Moves the counting shared records of uuid out of v into e (their slots in v are left empty). */
static int list_take_shares(struct list_entry *e, struct record *v, size_t n, const char *uuid)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		k += v[i].shared && streq(v[i].uuid, uuid);
	if (k == 0)
		return 0;
	e->sh_recs = calloc(k, sizeof(*e->sh_recs));
	e->sh_owners = calloc(k, sizeof(*e->sh_owners));
	e->sh_ptrs = calloc(k, sizeof(*e->sh_ptrs));
	if (!e->sh_recs || !e->sh_owners || !e->sh_ptrs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (!v[i].shared || !streq(v[i].uuid, uuid))
			continue;
		e->sh_recs[e->n_sh] = v[i];
		v[i] = (struct record){0};
		e->sh_owners[e->n_sh] = owner_of(&e->sh_recs[e->n_sh]);
		e->sh_ptrs[e->n_sh] = &e->sh_owners[e->n_sh];
		e->n_sh++;
	}
	return 0;
}

int gpuctl_lease_list(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                      const struct gpuctl_snapshot *snap, struct gpuctl_lease_list **ret_list)
{
	_cleanup_(gpuctl_lease_list_freep) struct gpuctl_lease_list *l = NULL;
	_cleanup_close_ int sfd = -1;
	struct record *recs = NULL;
	size_t n_recs = 0, total = 0;
	int r;

	if (!dir || !snap || !ret_list)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	sfd = lease_select_lock_shared(dir);
	for (size_t g = 0; g < snap->n_gpus; g++)
		total += 1 + snap->gpus[g].n_migs;
	l = calloc(1, sizeof(*l));
	if (!l || !(l->e = calloc(total ? total : 1, sizeof(*l->e))))
		return ctx_error(ctx, -ENOMEM, "out of memory");
	r = lease_records_load(ctx, dir, (uid_t)-1, NULL, &recs, &n_recs);
	if (r < 0)
		return r;
	for (size_t g = 0; g < snap->n_gpus; g++)
		for (int m = -1; m < (int)snap->gpus[g].n_migs; m++) {
			struct list_entry *e = &l->e[l->n++];
			const char *u = lease_dev_uuid(snap, g, m);
			char reason[REASON_MAX] = "";
			struct stat st;
			uint64_t used = 0;
			ssize_t k;

			e->gpu = g;
			e->mig = m;
			e->state = (enum gpuctl_lease_state)lease_probe(dir, u, false, &st, &used,
			                                                reason, sizeof(reason));
			if (e->state == GPUCTL_LEASE_UNUSABLE ||
			    e->state == GPUCTL_LEASE_UNINITIALISED) {
				e->reason = strdup(reason);
				if (!e->reason) {
					lease_records_free(recs, n_recs);
					return ctx_error(ctx, -ENOMEM, "out of memory");
				}
			}
			if (e->state == GPUCTL_LEASE_SHARED) {
				e->declared = used > UINT64_MAX / SHARE_UNIT ? UINT64_MAX
				                                             : used * SHARE_UNIT;
				if (list_take_shares(e, recs, n_recs, u) < 0) {
					lease_records_free(recs, n_recs);
					return ctx_error(ctx, -ENOMEM, "out of memory");
				}
				if (e->n_sh > 0) {
					e->has_owner = true;
					e->owner = e->sh_owners[0];
				}
				continue;
			}
			if (e->state != GPUCTL_LEASE_HELD)
				continue;
			k = lease_record_pick(recs, n_recs, u, &st);
			if (k < 0)
				continue;
			e->rec = recs[k];
			recs[k] = (struct record){0}; /* taken */
			e->has_owner = true;
			e->owner = owner_of(&e->rec);
		}
	lease_records_free(recs, n_recs);
	*ret_list = TAKE_PTR(l);
	return 0;
}

/* ---- foreign processes ---- */

/* Whether a record for uuid concerns device (g, mig): the device itself, its whole GPU, or, for a
 * whole GPU, one of its MIG devices. */
static bool record_concerns(const struct gpuctl_snapshot *snap, const char *uuid, size_t g, int mig)
{
	const char *u = lease_dev_uuid(snap, g, -1);

	if (u && streq(u, uuid))
		return true;
	if (mig >= 0) {
		u = lease_dev_uuid(snap, g, mig);
		return u && streq(u, uuid);
	}
	for (size_t m = 0; m < snap->gpus[g].n_migs; m++) {
		u = lease_dev_uuid(snap, g, (int)m);
		if (u && streq(u, uuid))
			return true;
	}
	return false;
}

/* Whether pid or one of its ancestors is the holder or job of a counting record (held_rec[i])
 * that concerns device (g, mig). */
static bool belongs(const struct gpuctl_snapshot *snap, const struct record *v, size_t n,
                    const bool *held_rec, size_t g, int mig, pid_t pid)
{
	pid_t p = pid;

	for (int depth = 0; p > 1 && depth < ANCESTOR_MAX; depth++) {
		pid_t pp = 0;

		for (size_t i = 0; i < n; i++) {
			if (!held_rec[i] || !record_concerns(snap, v[i].uuid, g, mig))
				continue;
			if ((v[i].pid_alive && (pid_t)v[i].pid == p) ||
			    (v[i].job_alive && (pid_t)v[i].job_pid == p))
				return true;
		}
		if (lease_proc_stat(p, &pp, NULL) < 0)
			return false;
		p = pp;
	}
	return false;
}

/* A device's foreign processes: how many, and their memory (UINT64_MAX when one does not say). */
struct foreign_use {
	size_t n;
	uint64_t mem;
};

/* Whether a device with foreign use u and GPU utilisation util (-1: unknown) counts as busy. */
static bool foreign_busy(const struct foreign_use *u, int util,
                         const struct gpuctl_lease_request *lr)
{
	if (u->n == 0)
		return false;
	if (lr->busy_memory == 0 || u->mem > lr->busy_memory)
		return true;
	return lr->busy_utilization >= 0 && util > lr->busy_utilization;
}

static int lease_foreign(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                         const struct gpuctl_snapshot *snap, const struct gpuctl_lease_request *lr,
                         struct gpuctl_devset **ret_set)
{
	struct gpuctl_devset *set = NULL;
	struct record *recs = NULL;
	_cleanup_free_ bool *held_rec = NULL;
	_cleanup_free_ struct foreign_use *use = NULL;
	size_t n_recs = 0, n_dev = 0;
	int r;

	r = gpuctl_devset_new(&set);
	if (r < 0)
		return ctx_error(ctx, r, "out of memory");
	if (!(snap->flags & GPUCTL_SNAP_PROCESSES)) {
		ctx_log(ctx, GPUCTL_LOG_DEBUG,
		        "leases: snapshot without processes, no foreign process detection");
		*ret_set = set;
		return 0;
	}
	r = lease_records_load(ctx, dir, (uid_t)-1, NULL, &recs, &n_recs);
	if (r < 0) {
		gpuctl_devset_free(set);
		return r;
	}
	held_rec = calloc(n_recs ? n_recs : 1, sizeof(*held_rec));
	for (size_t g = 0; g < snap->n_gpus; g++)
		n_dev += 1 + snap->gpus[g].n_migs;
	use = calloc(n_dev ? n_dev : 1, sizeof(*use));
	if (!held_rec || !use) {
		lease_records_free(recs, n_recs);
		gpuctl_devset_free(set);
		return ctx_error(ctx, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n_recs; i++) {
		char reason[REASON_MAX];

		held_rec[i] = lease_held(
		        lease_probe(dir, recs[i].uuid, false, NULL, NULL, reason, sizeof(reason)));
	}
	for (size_t g = 0, base = 0; g < snap->n_gpus; base += 1 + snap->gpus[g].n_migs, g++) {
		const struct gpuctl_gpu *gp = &snap->gpus[g];
		int64_t util = -1;

		for (size_t i = 0; i < gp->n_procs; i++) {
			const struct gpuctl_proc *pr = &gp->procs[i];
			int mig = -1;

			if (pr->has_mig)
				for (size_t m = 0; m < gp->n_migs; m++) {
					const struct gpuctl_mig *mg = &gp->migs[m];

					if (mg->valid[GPUCTL_MIG_GI] && mg->valid[GPUCTL_MIG_CI] &&
					    pr->gi == (uint64_t)mg->ints[GPUCTL_MIG_GI] &&
					    pr->ci == (uint64_t)mg->ints[GPUCTL_MIG_CI])
						mig = (int)m;
				}
			struct foreign_use *u = &use[base + 1 + (size_t)mig];

			if (belongs(snap, recs, n_recs, held_rec, g, mig, (pid_t)pr->pid))
				continue;
			u->n++;
			if (!pr->has_memory || pr->used_memory < 0 ||
			    u->mem > UINT64_MAX - (uint64_t)pr->used_memory)
				u->mem = UINT64_MAX;
			else
				u->mem += (uint64_t)pr->used_memory;
		}
		(void)gpuctl_gpu_int(gp, GPUCTL_F_UTIL_GPU, &util);
		for (int m = -1; m < (int)gp->n_migs; m++) {
			/* a MIG device's utilisation is not known: memory decides */
			if (!foreign_busy(&use[base + 1 + (size_t)m], m < 0 ? (int)util : -1, lr))
				continue;
			r = gpuctl_devset_add(set, g, m);
			if (r < 0 && r != -EEXIST) {
				lease_records_free(recs, n_recs);
				gpuctl_devset_free(set);
				return ctx_error(ctx, r, "out of memory");
			}
		}
	}
	lease_records_free(recs, n_recs);
	*ret_set = set;
	return 0;
}

int gpuctl_lease_foreign(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                         const struct gpuctl_snapshot *snap,
                         const struct gpuctl_lease_request *lreq, struct gpuctl_devset **ret_set)
{
	struct gpuctl_lease_request lr;
	_cleanup_close_ int sfd = -1;

	if (!dir || !snap || !ret_set)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	lease_request_copy(&lr, lreq);
	sfd = lease_select_lock_shared(dir);
	return lease_foreign(ctx, dir, snap, &lr, ret_set);
}

/* ---- select-and-lease ---- */

void gpuctl_lease_free(struct gpuctl_lease *lease)
{
	if (!lease)
		return;
	for (size_t i = 0; i < lease->n; i++)
		closep(&lease->devs[i].fd);
	closep(&lease->user_fd);
	free(lease->devs);
	free(lease->command);
	free(lease->label);
	free(lease);
}

size_t gpuctl_lease_fds(const struct gpuctl_lease *lease, int *fds, size_t max)
{
	if (!lease)
		return 0;
	for (size_t i = 0; fds && i < lease->n && i < max; i++)
		fds[i] = lease->devs[i].fd;
	return lease->n;
}

int gpuctl_lease_set_owner(struct gpuctl_ctx *ctx, struct gpuctl_lease *lease, uint32_t pid,
                           uint32_t job_pid)
{
	if (!lease || pid > INT32_MAX || job_pid > INT32_MAX)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	return lease_records_write(ctx, lease, pid ? (pid_t)pid : getpid(), (pid_t)job_pid);
}

static int devset_merge(struct gpuctl_devset *dst, const struct gpuctl_devset *src)
{
	for (size_t i = 0; src && i < gpuctl_devset_count(src); i++) {
		size_t g;
		int m, r;

		if (gpuctl_devset_get(src, i, &g, &m) < 0)
			continue;
		r = gpuctl_devset_add(dst, g, m);
		if (r < 0 && r != -EEXIST)
			return r;
	}
	return 0;
}

/* ---- waiting (docs/leases.md "Waiting") ---- */

#define TICKET_MAX      4096 /* bytes: a longer ticket is malformed */
#define TICKET_NAME_MAX 48   /* "<arrival>-<pid>" */

/* A ticket as read back from queue/<uid>/<arrival>-<pid> (strings owned). */
struct qticket {
	uint64_t arrival;      /* from the file name */
	uint32_t pid;          /* from the file name */
	uid_t uid;             /* from the file system: queue/<uid>/ */
	int64_t since;         /* registration (the file's ctime, set by the rename) */
	bool parsed;           /* the content below was readable */
	unsigned count;        /* devices asked for */
	uint64_t min_free_mem; /* 0: any */
	int max_util;          /* -1: any */
	int numa;              /* -1: any */
	bool no_procs;         /* --no-procs */
	char *mig;             /* MIG profile, NULL: whole GPUs */
	char *only;            /* --only, NULL: none */
	char *exclude;         /* --exclude, NULL: none */
	char *within;          /* the outer allocation as comma-separated UUIDs, NULL: none */
	char *pool;            /* the pool's GPUs as comma-separated UUIDs, NULL: no pool */
	char *pool_name;       /* the pool's name, for display; NULL when not given */
};

/* The devices an older waiter could use, cached for the lifetime of a waiting ticket. */
struct qcache {
	uid_t uid;
	uint64_t arrival;
	uint32_t pid;
	bool used; /* seen in the last scan */
	struct gpuctl_devset *set;
};

struct gpuctl_wait_ticket {
	int fd;                     /* queue/<euid>/<name>, exclusively flocked; -1 once removed */
	int qfd;                    /* queue/<euid>/ */
	int ifd;                    /* inotify, -1 when it could not be set up */
	char *dir_path;             /* DIR, for inotify watches (owned) */
	char name[TICKET_NAME_MAX]; /* "<arrival>-<pid>" */
	uint64_t arrival;
	uint32_t pid;
	uint64_t fp;  /* state fingerprint at the last failed try */
	bool have_fp; /* fp is set */
	struct qcache *cache;
	size_t n_cache;
};

struct gpuctl_wait_list {
	struct qticket *t;           /* live tickets, in order (owned) */
	char **users;                /* their user names or NULL (owned) */
	struct gpuctl_wait_entry *e; /* views of t */
	size_t n;
};

static void qticket_clear(struct qticket *t)
{
	free(t->mig);
	free(t->only);
	free(t->exclude);
	free(t->within);
	free(t->pool);
	free(t->pool_name);
	t->mig = t->only = t->exclude = t->within = t->pool = t->pool_name = NULL;
}

static void qtickets_free(struct qticket *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		qticket_clear(&v[i]);
	free(v);
}

/* "<arrival>-<pid>": two strict decimals. */
static bool ticket_name_parse(const char *name, uint64_t *ret_arrival, uint32_t *ret_pid)
{
	const char *dash = strchr(name, '-');
	uint64_t a, p;

	if (!dash || !lease_parse_u64(name, (size_t)(dash - name), &a) ||
	    !lease_parse_u64(dash + 1, strlen(dash + 1), &p) || p == 0 || p > INT32_MAX)
		return false;
	*ret_arrival = a;
	*ret_pid = (uint32_t)p;
	return true;
}

/* Orders tickets: arrival, then uid, then pid. */
static int qticket_cmp(const void *a, const void *b)
{
	const struct qticket *x = a, *y = b;

	if (x->arrival != y->arrival)
		return x->arrival < y->arrival ? -1 : 1;
	if (x->uid != y->uid)
		return x->uid < y->uid ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return 0;
}

/* A "-1"-or-decimal value at most max. */
static bool parse_opt_int(const char *s, uint64_t max, int *ret)
{
	uint64_t v;

	if (streq(s, "-1")) {
		*ret = -1;
		return true;
	}
	if (!lease_parse_u64(s, strlen(s), &v) || v > max)
		return false;
	*ret = (int)v;
	return true;
}

/* Parses a ticket's content (text is modified). The format is "gpuctl-wait 1" and then lines
 * "key value"; unknown keys are skipped, a repeated key, a line without a value or a bad value
 * makes it malformed. Returns whether it parsed; t's strings are set only when it did. */
static bool ticket_parse(char *text, struct qticket *t)
{
	struct qticket q = {.max_util = -1, .numa = -1};
	bool have_count = false, first = true, ok = true;
	char *line = text;

	while (ok && line && *line) {
		char *nl = strchr(line, '\n'), *val;
		uint64_t v = 0;
		char **str = NULL;

		if (nl)
			*nl = '\0';
		if (first) {
			ok = streq(line, "gpuctl-wait 1");
			first = false;
			line = nl ? nl + 1 : NULL;
			continue;
		}
		val = strchr(line, ' ');
		if (!val || !val[1]) {
			ok = false;
			break;
		}
		*val++ = '\0';
		if (streq(line, "count")) {
			ok = !have_count && lease_parse_u64(val, strlen(val), &v) && v <= 4096;
			q.count = (unsigned)v;
			have_count = true;
		} else if (streq(line, "min_free_mem")) {
			ok = lease_parse_u64(val, strlen(val), &q.min_free_mem);
		} else if (streq(line, "max_util")) {
			ok = parse_opt_int(val, 100, &q.max_util);
		} else if (streq(line, "numa")) {
			ok = parse_opt_int(val, 65535, &q.numa);
		} else if (streq(line, "no_procs")) {
			ok = streq(val, "0") || streq(val, "1");
			q.no_procs = streq(val, "1");
		} else if (streq(line, "mig")) {
			str = &q.mig;
		} else if (streq(line, "only")) {
			str = &q.only;
		} else if (streq(line, "exclude")) {
			str = &q.exclude;
		} else if (streq(line, "within")) {
			str = &q.within;
		} else if (streq(line, "pool")) {
			str = &q.pool;
		} else if (streq(line, "pool_name")) {
			str = &q.pool_name;
		}
		if (ok && str) {
			ok = !*str && (*str = strdup(val)) != NULL;
		}
		line = nl ? nl + 1 : NULL;
	}
	if (!ok || first || !have_count) {
		qticket_clear(&q);
		t->parsed = false;
		return false;
	}
	t->parsed = true;
	t->count = q.count;
	t->min_free_mem = q.min_free_mem;
	t->max_util = q.max_util;
	t->numa = q.numa;
	t->no_procs = q.no_procs;
	t->mig = q.mig;
	t->only = q.only;
	t->exclude = q.exclude;
	t->within = q.within;
	t->pool = q.pool;
	t->pool_name = q.pool_name;
	return true;
}

/* A cheap, order-independent mix of a string (FNV-1a, then a finaliser). */
static uint64_t str_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

/* Opens queue/<uid> (name) when it is a real directory owned by uid, not writable by others. */
static int queue_user_open(const struct gpuctl_lease_dir *dir, const char *name, uid_t *ret_uid)
{
	_cleanup_close_ int fd = -1;
	uint64_t uid;
	struct stat st;

	if (!lease_parse_u64(name, strlen(name), &uid) || uid > UINT32_MAX - 1)
		return -EINVAL;
	fd = openat(dir->queue_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != (uid_t)uid ||
	    (st.st_mode & (S_IWGRP | S_IWOTH)))
		return -EPERM;
	*ret_uid = (uid_t)uid;
	return TAKE_FD(fd);
}

/* Scans DIR/queue. Always: the highest arrival of any well-named ticket (*ret_max) and an
 * order-independent hash of the names (*ret_names). With ret: the live tickets (their lock is
 * held), sorted, content parsed when content. With cleanup, dead tickets of the caller's uid
 * are removed (call under select.lock only). */
static int queue_scan(const struct gpuctl_lease_dir *dir, bool cleanup, bool content,
                      struct qticket **ret, size_t *ret_n, uint64_t *ret_max, uint64_t *ret_names)
{
	_cleanup_(closedirp) DIR *qd = NULL;
	struct qticket *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t max = 0, names = 0;
	struct dirent *de;

	if (ret)
		*ret = NULL;
	if (ret_n)
		*ret_n = 0;
	if (dir->queue_fd < 0)
		goto done;
	qd = lease_dir_reopen(dir->queue_fd);
	if (!qd)
		return -errno;
	while ((de = readdir(qd))) {
		_cleanup_(closedirp) DIR *ud = NULL;
		_cleanup_close_ int ufd = -1;
		struct dirent *te;
		uid_t uid = 0;

		if (de->d_name[0] == '.')
			continue;
		ufd = queue_user_open(dir, de->d_name, &uid);
		if (ufd < 0)
			continue;
		ud = lease_dir_reopen(ufd);
		if (!ud)
			continue;
		while ((te = readdir(ud))) {
			struct qticket t = {0};
			_cleanup_close_ int fd = -1;
			_cleanup_free_ char *text = NULL;
			size_t len;
			struct stat st;

			if (cleanup && uid == geteuid() && strncmp(te->d_name, ".new-", 5) == 0) {
				/* a registration that died before its rename (they happen under
				 * select.lock, like every cleanup) */
				fd = openat(ufd, te->d_name,
				            O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
				if (fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) == 0)
					(void)unlinkat(ufd, te->d_name, 0);
				continue;
			}
			if (te->d_name[0] == '.' ||
			    !ticket_name_parse(te->d_name, &t.arrival, &t.pid))
				continue;
			if (t.arrival > max)
				max = t.arrival;
			names += str_hash(te->d_name) ^ ((uint64_t)uid * 0x9e3779b97f4a7c15ull);
			if (!ret)
				continue;
			fd = openat(ufd, te->d_name,
			            O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
			if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
			    st.st_uid != uid || st.st_nlink != 1)
				continue;
			if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
				/* dead: its waiter no longer holds the lock */
				if (cleanup && uid == geteuid())
					(void)unlinkat(ufd, te->d_name, 0);
				continue;
			}
			if (errno != EWOULDBLOCK)
				continue;
			t.uid = uid;
			t.since = (int64_t)st.st_ctime;
			if (content && st.st_size <= TICKET_MAX &&
			    lease_read_all(fd, TICKET_MAX, &text, &len) == 0 && strlen(text) == len)
				(void)ticket_parse(text, &t);
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 16;
				struct qticket *nv = realloc(v, nc * sizeof(*v));

				if (!nv) {
					qticket_clear(&t);
					qtickets_free(v, n);
					return -ENOMEM;
				}
				v = nv;
				cap = nc;
			}
			v[n++] = t;
		}
	}
	if (n > 1)
		qsort(v, n, sizeof(*v), qticket_cmp);
done:
	if (ret) {
		*ret = v;
		*ret_n = n;
	} else {
		qtickets_free(v, n);
	}
	if (ret_max)
		*ret_max = max;
	if (ret_names)
		*ret_names = names;
	return 0;
}

/* The lease state that decides a waiter's fate, as a number: the flocks of /proc/locks on the
 * lease directory's file system (but select.lock's, skip_ino) and the names in the queue.
 * Reading it opens no lock file, so it makes no inotify event. A /proc/locks that cannot be
 * read gives a new value every time; one that names another device (overlay file systems)
 * shows no lock change, and the waiter relies on queue changes and its fallback timeout. */
static uint64_t state_fp(const struct gpuctl_lease_dir *dir, ino_t skip_ino)
{
	static uint64_t unreadable;
	_cleanup_fclose_ FILE *f = fopen("/proc/locks", "re");
	char line[LOCKS_LINE_MAX];
	uint64_t h = 0, names = 0;
	struct stat st;

	if (!f || fstat(dir->fd, &st) < 0)
		return ++unreadable * 0x9e3779b97f4a7c15ull;
	while (fgets(line, sizeof(line), f)) {
		char *cur = line, *tok[8], *colon;
		size_t n = 0;
		uint64_t ino;
		unsigned maj, min;

		if (strstr(line, "->") || !strstr(line, "FLOCK"))
			continue;
		for (char *t = lease_next_tok(&cur); t && n < ELEMENTSOF(tok);
		     t = lease_next_tok(&cur))
			tok[n++] = t;
		if (n < 6 || !streq(tok[1], "FLOCK"))
			continue;
		colon = strrchr(tok[5], ':');
		if (!colon || !lease_parse_u64(colon + 1, strlen(colon + 1), &ino) ||
		    ino == (uint64_t)skip_ino)
			continue;
		*colon = '\0';
		if (sscanf(tok[5], "%x:%x", &maj, &min) != 2 || maj != major(st.st_dev) ||
		    min != minor(st.st_dev))
			continue; /* another file system's lock */
		h += str_hash(colon + 1) ^ str_hash(tok[3]);
	}
	(void)queue_scan(dir, false, false, NULL, NULL, NULL, &names);
	return h ^ (names * 0xff51afd7ed558ccdull);
}

/* The devices of snap named by a comma-separated list of UUIDs (unknown ones are skipped). */
static int uuids_to_set(const struct gpuctl_snapshot *snap, const char *list,
                        struct gpuctl_devset **ret)
{
	_cleanup_(gpuctl_devset_freep) struct gpuctl_devset *set = NULL;
	_cleanup_free_ char *copy = strdup(list);
	char *cur = copy;

	if (!copy || gpuctl_devset_new(&set) < 0)
		return -ENOMEM;
	while (cur && *cur) {
		char *comma = strchr(cur, ',');

		if (comma)
			*comma = '\0';
		for (size_t g = 0; g < snap->n_gpus; g++)
			for (int m = -1; m < (int)snap->gpus[g].n_migs; m++) {
				const char *u = lease_dev_uuid(snap, g, m);

				if (u && streq(u, cur) && gpuctl_devset_add(set, g, m) == -ENOMEM)
					return -ENOMEM;
			}
		cur = comma ? comma + 1 : NULL;
	}
	*ret = TAKE_PTR(set);
	return 0;
}

/* The devices of snap a waiter's request could use, leases and telemetry aside: its --only,
 * --exclude, --numa, MIG profile and outer allocation (lost GPUs and those without a UUID are
 * never usable). A malformed ticket, or one whose ids do not resolve here, could use any
 * device (every whole GPU, which also covers their MIG devices). */
static int ticket_devices(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                          const struct qticket *t, struct gpuctl_devset **ret)
{
	struct gpuctl_select_request q = GPUCTL_SELECT_REQUEST_INIT;
	_cleanup_(gpuctl_devset_freep) struct gpuctl_devset *set = NULL, *within = NULL,
	                                                    *pool = NULL;
	char errsave[CTX_ERRMSG_MAX];
	bool all = !t->parsed;
	int r;

	r = gpuctl_devset_new(&set);
	if (r < 0)
		return r;
	strscpy(errsave, sizeof(errsave), gpuctl_errmsg(ctx));
	if (t->parsed && t->mig && !(snap->flags & GPUCTL_SNAP_MIG))
		goto out; /* it can use MIG devices only, this caller whole GPUs only: no overlap */
	if (t->parsed && t->within) {
		if (uuids_to_set(snap, t->within, &within) < 0)
			return -ENOMEM;
		q.within = within;
	}
	if (t->parsed && t->pool) {
		if (uuids_to_set(snap, t->pool, &pool) < 0)
			return -ENOMEM;
		q.pool = pool;
		q.pool_name = "of a waiter";
	}
	q.count = 1;
	q.only = t->only;
	q.exclude = t->exclude;
	q.numa_node = t->numa;
	q.mig_profile = t->mig;
	q.allow_unhealthy = true;
	q.leased = set;
	while (!all && gpuctl_devset_count(set) <= snap->n_gpus * 64) {
		struct gpuctl_selection *sel = NULL;
		size_t g;
		int m;

		r = gpuctl_select(ctx, snap, &q, &sel);
		if (r == -ENOSPC)
			break;
		if (r == -ENOMEM)
			return r;
		if (r < 0 || gpuctl_devset_get(gpuctl_selection_devices(sel), 0, &g, &m) < 0 ||
		    gpuctl_devset_add(set, g, m) < 0) {
			all = true; /* cannot be resolved here: conservative */
		}
		gpuctl_selection_free(sel);
	}
	if (all)
		for (size_t g = 0; g < snap->n_gpus; g++)
			if (gpuctl_devset_add(set, g, -1) == -ENOMEM)
				return -ENOMEM;
out:
	ctx_error(ctx, 0, "%s", errsave); /* the caller's message, not ours */
	*ret = TAKE_PTR(set);
	return 0;
}

/* The devices that the live tickets older than ticket (all of them when ticket is NULL) could
 * use, merged into reserved; *ret_ahead counts those tickets. Removes dead tickets of ours. */
static int queue_reserved(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir,
                          const struct gpuctl_snapshot *snap, struct gpuctl_wait_ticket *ticket,
                          struct gpuctl_devset *reserved, size_t *ret_ahead)
{
	struct qticket *v = NULL;
	size_t n = 0, ahead = 0;
	uid_t me = geteuid();
	int r;

	*ret_ahead = 0;
	if (dir->queue_fd < 0)
		return 0;
	r = queue_scan(dir, true, true, &v, &n, NULL, NULL);
	if (r < 0)
		return r;
	for (size_t i = 0; ticket && i < ticket->n_cache; i++)
		ticket->cache[i].used = false;
	for (size_t i = 0; i < n; i++) {
		const struct qticket *t = &v[i];
		struct qticket self = {.arrival = 0};
		struct gpuctl_devset *set = NULL;
		bool cached = false;

		if (ticket) {
			self.arrival = ticket->arrival;
			self.uid = me;
			self.pid = ticket->pid;
			if (qticket_cmp(t, &self) >= 0)
				continue; /* ourselves, or younger */
			for (size_t k = 0; k < ticket->n_cache; k++) {
				struct qcache *c = &ticket->cache[k];

				if (c->uid == t->uid && c->arrival == t->arrival &&
				    c->pid == t->pid) {
					c->used = true;
					set = c->set;
					cached = true;
				}
			}
		}
		ahead++;
		if (!set) {
			r = ticket_devices(ctx, snap, t, &set);
			if (r < 0)
				break;
		}
		r = devset_merge(reserved, set);
		if (!cached && ticket) {
			struct qcache *nc = realloc(ticket->cache,
			                            (ticket->n_cache + 1) * sizeof(*ticket->cache));

			if (nc) {
				ticket->cache = nc;
				nc[ticket->n_cache++] =
				        (struct qcache){t->uid, t->arrival, t->pid, true, set};
				set = NULL;
			}
		}
		if (!cached)
			gpuctl_devset_free(set);
		if (r < 0)
			break;
	}
	/* forget the tickets that are gone */
	for (size_t i = 0; ticket && i < ticket->n_cache;) {
		if (ticket->cache[i].used) {
			i++;
			continue;
		}
		gpuctl_devset_free(ticket->cache[i].set);
		ticket->cache[i] = ticket->cache[--ticket->n_cache];
	}
	qtickets_free(v, n);
	*ret_ahead = ahead;
	return r < 0 ? r : 0;
}

/* A ticket line "key UUID,UUID,..." for set (nothing when set is NULL). */
static void sb_uuids(struct sbuf *b, const char *key, const struct gpuctl_devset *set,
                     const struct gpuctl_snapshot *snap)
{
	if (!set)
		return;
	lease_sb_add(b, "%s ", key);
	for (size_t i = 0; i < gpuctl_devset_count(set); i++) {
		const char *u = gpuctl_devset_uuid(set, snap, i);

		if (u && lease_uuid_ok(u))
			lease_sb_add(b, "%s%s", i ? "," : "", u);
	}
	lease_sb_add(b, "\n");
}

/* Values of a ticket line: control characters become '?'. */
static void sb_val(struct sbuf *b, const char *key, const char *s)
{
	if (!s)
		return;
	lease_sb_add(b, "%s ", key);
	for (size_t i = 0; s[i] && i < 1024; i++) {
		unsigned char c = (unsigned char)s[i];

		lease_sb_add(b, "%c", c < 0x20 || c == 0x7f ? '?' : (char)c);
	}
	lease_sb_add(b, "\n");
}

/* Adds inotify watches: locks/, queue/ and every queue/<uid>/ (again: it is cheap). */
static void ticket_watch(struct gpuctl_wait_ticket *t, const struct gpuctl_lease_dir *dir)
{
	_cleanup_(closedirp) DIR *qd = NULL;
	char path[4096];
	struct dirent *de;

	if (t->ifd < 0)
		return;
	(void)snprintf(path, sizeof(path), "%s/locks", t->dir_path);
	(void)inotify_add_watch(t->ifd, path,
	                        IN_CLOSE_WRITE | IN_CLOSE_NOWRITE | IN_CREATE | IN_DELETE |
	                                IN_ONLYDIR | IN_DONT_FOLLOW);
	(void)snprintf(path, sizeof(path), "%s/queue", t->dir_path);
	(void)inotify_add_watch(t->ifd, path, IN_CREATE | IN_DELETE | IN_ONLYDIR | IN_DONT_FOLLOW);
	if (!dir || dir->queue_fd < 0 || !(qd = lease_dir_reopen(dir->queue_fd)))
		return;
	while ((de = readdir(qd))) {
		uint64_t uid;

		if (de->d_name[0] == '.' || !lease_parse_u64(de->d_name, strlen(de->d_name), &uid))
			continue;
		(void)snprintf(path, sizeof(path), "%s/queue/%s", t->dir_path, de->d_name);
		(void)inotify_add_watch(t->ifd, path,
		                        IN_CREATE | IN_DELETE | IN_CLOSE_WRITE | IN_MOVED_TO |
		                                IN_MOVED_FROM | IN_ONLYDIR | IN_DONT_FOLLOW);
	}
}

void gpuctl_wait_ticket_free(struct gpuctl_wait_ticket *t)
{
	if (!t)
		return;
	if (t->fd >= 0 && t->qfd >= 0)
		(void)unlinkat(t->qfd, t->name, 0); /* ours: only we create this name */
	closep(&t->fd);
	closep(&t->qfd);
	closep(&t->ifd);
	for (size_t i = 0; i < t->n_cache; i++)
		gpuctl_devset_free(t->cache[i].set);
	free(t->cache);
	free(t->dir_path);
	free(t);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct gpuctl_wait_ticket *, gpuctl_wait_ticket_free)

int gpuctl_wait_ticket_new(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                           const struct gpuctl_snapshot *snap,
                           const struct gpuctl_select_request *req,
                           struct gpuctl_wait_ticket **ret_ticket)
{
	_cleanup_(gpuctl_wait_ticket_freep) struct gpuctl_wait_ticket *t = NULL;
	_cleanup_close_ int sfd = -1, fd = -1;
	struct sbuf b = {0};
	char uname[32], path[4096], tmp[64];
	uint64_t max = 0, start = 0;
	int r;

	if (!dir || !snap || !req || !ret_ticket)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	if (dir->queue_fd < 0)
		return ctx_error(ctx, -ENOENT,
		                 "lease directory '%s': no queue/ for waiters (run `sudo gpuctl "
		                 "lease init`)",
		                 dir->path);
	t = calloc(1, sizeof(*t));
	if (!t)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	t->fd = t->qfd = t->ifd = -1;
	t->pid = (uint32_t)getpid();
	t->dir_path = strdup(dir->path);
	if (!t->dir_path)
		return ctx_error(ctx, -ENOMEM, "out of memory");

	r = lease_select_lock_take(ctx, dir, &sfd, NULL);
	if (r < 0)
		return r;
	(void)snprintf(uname, sizeof(uname), "%u", (unsigned)geteuid());
	(void)snprintf(path, sizeof(path), "%s/queue/%s", dir->path, uname);
	r = lease_open_at(ctx, dir->queue_fd, uname, path, true, true, 0755, &t->qfd);
	if (r < 0)
		return r;
	r = lease_check_fd(ctx, t->qfd, path, true, geteuid(), false, NULL);
	if (r < 0)
		return r;
	r = queue_scan(dir, false, false, NULL, NULL, &max, NULL);
	if (r < 0)
		return ctx_error(ctx, r, "'%s/queue': %s", dir->path, strerror(-r));
	t->arrival = max + 1;
	(void)snprintf(t->name, sizeof(t->name), "%" PRIu64 "-%u", t->arrival, t->pid);

	/* the content: what decides which devices the request could use */
	(void)lease_proc_stat(getpid(), NULL, &start);
	lease_sb_add(&b, "gpuctl-wait 1\npid %u\nstart_time %" PRIu64 "\ncount %u\n", t->pid,
	             lease_ticks_to_epoch(start), req->count);
	lease_sb_add(&b, "min_free_mem %" PRIu64 "\nmax_util %d\nnuma %d\nno_procs %d\n",
	             req->min_free_mem, req->max_util < 0 ? -1 : req->max_util,
	             req->numa_node < 0 ? -1 : req->numa_node, req->no_procs ? 1 : 0);
	sb_val(&b, "mig", req->mig_profile);
	sb_val(&b, "only", req->only);
	sb_val(&b, "exclude", req->exclude);
	sb_uuids(&b, "within", req->within, snap);
	if (offsetof(struct gpuctl_select_request, pool_name) + sizeof(void *) <=
	            req->struct_size &&
	    req->pool) {
		sb_uuids(&b, "pool", req->pool, snap);
		sb_val(&b, "pool_name", req->pool_name);
	}
	if (b.oom) {
		free(b.p);
		return ctx_error(ctx, -ENOMEM, "out of memory");
	}

	/* created under a dot name (ignored by readers), locked, written, then renamed */
	(void)snprintf(tmp, sizeof(tmp), ".new-%u", t->pid);
	for (int tries = 0; fd < 0 && tries < 2; tries++) {
		fd = openat(t->qfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 && errno == EEXIST)
			(void)unlinkat(t->qfd, tmp, 0); /* a dead gpuctl's, with our pid */
		else if (fd < 0)
			break;
	}
	if (fd < 0) {
		r = -errno;
		free(b.p);
		return ctx_error(ctx, r, "'%s/%s': %s", path, tmp, strerror(-r));
	}
	r = 0;
	if (fchmod(fd, 0644) < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0)
		r = -errno;
	if (r == 0)
		r = lease_write_all(fd, b.p, b.len);
	free(b.p);
	if (r == 0 && renameat(t->qfd, tmp, t->qfd, t->name) < 0)
		r = -errno;
	if (r < 0) {
		(void)unlinkat(t->qfd, tmp, 0);
		return ctx_error(ctx, r, "'%s/%s': %s", path, t->name, strerror(-r));
	}
	t->fd = TAKE_FD(fd);

	/* inotify (no watch is no error: the caller's fallback timeout still makes progress) */
	t->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (t->ifd < 0)
		ctx_log(ctx, GPUCTL_LOG_DEBUG, "leases: no inotify (%s): waking every few seconds",
		        strerror(errno));
	ticket_watch(t, dir);
	*ret_ticket = TAKE_PTR(t);
	return 0; /* closing sfd releases select.lock */
}

int gpuctl_wait_ticket_fd(const struct gpuctl_wait_ticket *t)
{
	return t ? t->ifd : -1;
}

void gpuctl_wait_ticket_drain(struct gpuctl_wait_ticket *t, struct gpuctl_lease_dir *dir)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

	if (!t || t->ifd < 0)
		return;
	while (read(t->ifd, buf, sizeof(buf)) > 0)
		;
	ticket_watch(t, dir);
}

int gpuctl_wait_ticket_changed(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                               struct gpuctl_wait_ticket *t)
{
	_cleanup_close_ int sfd = -1;
	ino_t ino = 0;
	int r;

	if (!dir || !t)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	if (!t->have_fp)
		return 1;
	r = lease_select_lock_take(ctx, dir, &sfd, &ino);
	if (r < 0)
		return r;
	return state_fp(dir, ino) != t->fp;
}

void gpuctl_wait_list_free(struct gpuctl_wait_list *l)
{
	if (!l)
		return;
	qtickets_free(l->t, l->n);
	for (size_t i = 0; l->users && i < l->n; i++)
		free(l->users[i]);
	free(l->users);
	free(l->e);
	free(l);
}

int gpuctl_wait_list(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                     struct gpuctl_wait_list **ret_list)
{
	struct gpuctl_wait_list *l;
	int r;

	if (!dir || !ret_list)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	l = calloc(1, sizeof(*l));
	if (!l)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	r = queue_scan(dir, false, true, &l->t, &l->n, NULL, NULL);
	if (r < 0) {
		free(l);
		return ctx_error(ctx, r, "'%s/queue': %s", dir->path, strerror(-r));
	}
	l->users = calloc(l->n + 1, sizeof(*l->users));
	l->e = calloc(l->n + 1, sizeof(*l->e));
	if (!l->users || !l->e) {
		gpuctl_wait_list_free(l);
		return ctx_error(ctx, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < l->n; i++) {
		const struct qticket *t = &l->t[i];

		l->users[i] = lease_user_name(t->uid);
		l->e[i] = (struct gpuctl_wait_entry){
		        .arrival = t->arrival,
		        .pid = t->pid,
		        .uid = (uint32_t)t->uid,
		        .user = l->users[i],
		        .since = t->since,
		        .parsed = t->parsed,
		        .count = t->count,
		        .mig_profile = t->mig,
		        .only = t->only,
		        .exclude = t->exclude,
		        .numa_node = t->numa,
		        .min_free_mem = t->min_free_mem,
		        .max_util = t->max_util,
		        .no_procs = t->no_procs,
		        .pool = t->pool_name,
		};
	}
	*ret_list = l;
	return 0;
}

size_t gpuctl_wait_list_count(const struct gpuctl_wait_list *list)
{
	return list ? list->n : 0;
}

const struct gpuctl_wait_entry *gpuctl_wait_list_get(const struct gpuctl_wait_list *list, size_t i)
{
	return list && i < list->n ? &list->e[i] : NULL;
}

/* Select-and-lease; with ticket, as that waiter (only older waiters are ahead), else as the
 * youngest (every live waiter is ahead). */
static int select_and_lease(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                            const struct gpuctl_snapshot *snap,
                            const struct gpuctl_select_request *req,
                            const struct gpuctl_lease_request *lreq,
                            struct gpuctl_wait_ticket *ticket, struct gpuctl_selection **ret_sel,
                            struct gpuctl_lease **ret_lease)
{
	struct gpuctl_select_request sreq = GPUCTL_SELECT_REQUEST_INIT;
	struct gpuctl_lease_request lr;
	_cleanup_(gpuctl_devset_freep) struct gpuctl_devset *leased = NULL, *foreign = NULL;
	_cleanup_(gpuctl_selection_freep) struct gpuctl_selection *sel = NULL;
	_cleanup_(gpuctl_lease_freep) struct gpuctl_lease *lease = NULL;
	_cleanup_(gpuctl_devset_freep) struct gpuctl_devset *reserved = NULL;
	_cleanup_close_ int sfd = -1;
	const struct gpuctl_devset *chosen;
	char first_reason[REASON_MAX] = "", full[REASON_MAX] = "";
	size_t n_bad = 0, ahead = 0, n_full = 0;
	bool uninit = false, share;
	char size_text[32];
	uint64_t need;
	ino_t sino = 0;
	uint64_t fp = 0;
	int r;

	if (!dir || !snap || !req || !ret_sel || !ret_lease ||
	    req->struct_size < offsetof(struct gpuctl_select_request, count) + sizeof(unsigned))
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	memcpy(&sreq, req, req->struct_size < sizeof(sreq) ? req->struct_size : sizeof(sreq));
	if (offsetof(struct gpuctl_select_request, leased) + sizeof(void *) > req->struct_size)
		sreq.leased = NULL;
	if (offsetof(struct gpuctl_select_request, foreign) + sizeof(void *) > req->struct_size)
		sreq.foreign = NULL;
	if (offsetof(struct gpuctl_select_request, pool_name) + sizeof(void *) > req->struct_size) {
		sreq.pool = NULL;
		sreq.pool_name = NULL;
	}
	if (offsetof(struct gpuctl_select_request, warned) + sizeof(void *) > req->struct_size) {
		sreq.unhealthy = NULL;
		sreq.warned = NULL;
	}
	sreq.struct_size = sizeof(sreq);
	lease_request_copy(&lr, lreq);
	share = lr.share_mem > 0;
	need = lr.share_mem / SHARE_UNIT + (lr.share_mem % SHARE_UNIT != 0);
	if (share && sreq.min_free_mem < lr.share_mem)
		sreq.min_free_mem = lr.share_mem; /* what the job declared must be free now, too */

	/* 1. select.lock, blocking (held for milliseconds) */
	r = lease_select_lock_take(ctx, dir, &sfd, &sino);
	if (r < 0)
		return r;
	if (ticket)
		fp = state_fp(dir, sino); /* before the probes: what this try saw */

	/* 2. probe every device */
	if (gpuctl_devset_new(&leased) < 0 || devset_merge(leased, sreq.leased) < 0)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	for (size_t g = 0; g < snap->n_gpus; g++)
		for (int m = -1; m < (int)snap->gpus[g].n_migs; m++) {
			char reason[REASON_MAX] = "";
			const char *u = lease_dev_uuid(snap, g, m);
			uint64_t used = 0;
			int s;

			if (m < 0 && (!u || snap->gpus[g].lost))
				continue; /* never chosen anyway ("lost or unidentified") */
			s = lease_probe(dir, u, false, NULL, share ? &used : NULL, reason,
			                sizeof(reason));
			if (s == GPUCTL_LEASE_FREE && !share)
				continue;
			if (share && (s == GPUCTL_LEASE_FREE || s == GPUCTL_LEASE_SHARED)) {
				uint64_t cap = lease_share_capacity(snap, g, m, &lr);

				if (used <= cap && need <= cap - used)
					continue;
				/* no room for what the job declares: as if leased, and said so */
				if (n_full++ < 8) {
					size_t l = strlen(full);

					(void)snprintf(full + l, sizeof(full) - l, "%s%zu%s",
					               n_full > 1 ? "," : "", g, m < 0 ? "" : ":");
					l = strlen(full);
					if (m >= 0)
						(void)snprintf(full + l, sizeof(full) - l, "%d", m);
				}
			} else if (s != GPUCTL_LEASE_HELD && s != GPUCTL_LEASE_SHARED) {
				if (!n_bad++)
					strscpy(first_reason, sizeof(first_reason), reason);
				uninit |= s == GPUCTL_LEASE_UNINITIALISED;
			}
			r = gpuctl_devset_add(leased, g, m);
			if (r < 0 && r != -EEXIST)
				return ctx_error(ctx, r, "out of memory");
		}
	/* 2b. the devices older waiters could use are theirs first (docs/leases.md "Waiting") */
	if (gpuctl_devset_new(&reserved) < 0)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	r = queue_reserved(ctx, dir, snap, ticket, reserved, &ahead);
	if (r < 0)
		return ctx_error(ctx, r, "'%s/queue': %s", dir->path, strerror(-r));
	if (devset_merge(leased, reserved) < 0)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	sreq.leased = leased;
	if (!lr.ignore_foreign) {
		r = lease_foreign(ctx, dir, snap, &lr, &foreign); /* select.lock is ours */
		if (r < 0)
			return r;
		if (devset_merge(foreign, sreq.foreign) < 0)
			return ctx_error(ctx, -ENOMEM, "out of memory");
		sreq.foreign = foreign;
	}

	/* 3. select */
	r = gpuctl_select(ctx, snap, &sreq, &sel);
	if (r == -ENOSPC && ticket) {
		ticket->fp = fp;
		ticket->have_fp = true;
	}
	if (r == -ENOSPC && (n_bad > 0 || ahead > 0 || n_full > 0)) {
		char msg[CTX_ERRMSG_MAX], bad[2 * REASON_MAX + 96] = "", wait[96] = "";

		strscpy(msg, sizeof(msg), gpuctl_errmsg(ctx));
		if (n_bad > 0)
			(void)snprintf(bad, sizeof(bad), " (%zu unusable: %s)", n_bad,
			               first_reason);
		if (n_full > 0) {
			size_t l = strlen(bad);

			(void)snprintf(bad + l, sizeof(bad) - l, " (no room to share %s: %s%s)",
			               size_text_of(lr.share_mem, size_text, sizeof(size_text)),
			               full, n_full > 8 ? ",..." : "");
		}
		if (ahead > 0)
			(void)snprintf(wait, sizeof(wait),
			               " (%zu waiter(s) ahead, who could use %zu device(s))", ahead,
			               gpuctl_devset_count(reserved));
		return ctx_error(ctx, uninit ? -ENOENT : -ENOSPC, "%s%s%s", msg, bad, wait);
	}
	if (r < 0)
		return r;
	if (n_bad > 0)
		ctx_log(ctx, GPUCTL_LOG_WARNING, "leases: %zu device(s) not usable: %s", n_bad,
		        first_reason);

	/* 4. lock the chosen devices */
	chosen = gpuctl_selection_devices(sel);
	lease = calloc(1, sizeof(*lease));
	if (!lease)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	lease->user_fd = -1;
	lease->share_mem = share ? lr.share_mem : 0;
	lease->tag = (uint32_t)getpid();
	lease->devs = calloc(gpuctl_devset_count(chosen) + 1, sizeof(*lease->devs));
	lease->command = strdup_or_null(lr.command);
	lease->label = strdup_or_null(lr.label);
	if (!lease->devs || (lr.command && !lease->command) || (lr.label && !lease->label))
		return ctx_error(ctx, -ENOMEM, "out of memory");
	for (size_t i = 0; i < gpuctl_devset_count(chosen); i++) {
		struct lease_dev *d = &lease->devs[lease->n];
		char reason[REASON_MAX] = "";
		const char *u;
		int s;

		d->fd = -1;
		if (gpuctl_devset_get(chosen, i, &d->gpu, &d->mig) < 0)
			return ctx_error(ctx, -EIO, "selection out of range");
		u = lease_dev_uuid(snap, d->gpu, d->mig);
		s = lease_lock_open(dir, u, true, &d->fd, NULL, reason, sizeof(reason));
		if (s != GPUCTL_LEASE_FREE || d->fd < 0)
			return ctx_error(ctx, -EBUSY, "cannot lease %s: %s", u ? u : "?",
			                 *reason ? reason : "no lock file");
		lease->n++;
		strscpy(d->uuid, sizeof(d->uuid), u);
		if (flock(d->fd, (share ? LOCK_SH : LOCK_EX) | LOCK_NB) < 0)
			return ctx_error(ctx, -EBUSY, "cannot lease %s: locks/%s.lock: %s", u, u,
			                 errno == EWOULDBLOCK ? "held by another process"
			                                      : strerror(errno));
		if (share) {
			r = lease_share_take(d->fd, need,
			                     lease_share_capacity(snap, d->gpu, d->mig, &lr));
			if (r < 0)
				return ctx_error(ctx, -EBUSY, "cannot share %s: locks/%s.lock: %s",
				                 u, u,
				                 r == -ENOSPC ? "no room left" : strerror(-r));
		}
	}

	/* 5. owner records (display only: a failure is logged, the lock is the lease) */
	r = lease_user_dir_open(ctx, dir, true, &lease->user_fd);
	if (r == 0 && share)
		lease_records_prune_shared(lease->user_fd);
	if (r == 0)
		r = lease_records_write(ctx, lease, getpid(), 0);
	if (r < 0)
		ctx_log(ctx, GPUCTL_LOG_WARNING, "leases: no owner record: %s", gpuctl_errmsg(ctx));

	/* 6. a waiter leaves the queue while select.lock still orders everyone */
	if (ticket && ticket->fd >= 0) {
		(void)unlinkat(ticket->qfd, ticket->name, 0);
		closep(&ticket->fd);
	}

	*ret_sel = TAKE_PTR(sel);
	*ret_lease = TAKE_PTR(lease);
	return 0; /* closing sfd releases select.lock */
}

int gpuctl_select_and_lease(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                            const struct gpuctl_snapshot *snap,
                            const struct gpuctl_select_request *req,
                            const struct gpuctl_lease_request *lreq,
                            struct gpuctl_selection **ret_sel, struct gpuctl_lease **ret_lease)
{
	return select_and_lease(ctx, dir, snap, req, lreq, NULL, ret_sel, ret_lease);
}

int gpuctl_select_and_lease_queued(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                                   const struct gpuctl_snapshot *snap,
                                   const struct gpuctl_select_request *req,
                                   const struct gpuctl_lease_request *lreq,
                                   struct gpuctl_wait_ticket *ticket,
                                   struct gpuctl_selection **ret_sel,
                                   struct gpuctl_lease **ret_lease)
{
	if (!ticket || ticket->fd < 0)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	return select_and_lease(ctx, dir, snap, req, lreq, ticket, ret_sel, ret_lease);
}

/* ---- release ---- */

static int signal_holder(pid_t pid, uint64_t start_ticks, uid_t uid)
{
#ifdef SYS_pidfd_open
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (pfd >= 0) {
		int r = 0;

		/* checked after the pidfd pins the process: no recycled pid in between */
		if (!lease_proc_matches((uint32_t)pid, start_ticks, uid))
			r = -ESRCH;
		else if (syscall(SYS_pidfd_send_signal, pfd, SIGTERM, NULL, 0) < 0)
			r = -errno;
		(void)close(pfd);
		return r;
	}
#endif
	if (!lease_proc_matches((uint32_t)pid, start_ticks, uid))
		return -ESRCH;
	return kill(pid, SIGTERM) < 0 ? -errno : 0;
}

int gpuctl_lease_release(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                         const struct gpuctl_snapshot *snap, const struct gpuctl_devset *set)
{
	struct record *recs = NULL;
	size_t n_recs = 0;
	_cleanup_free_ pid_t *done = NULL;
	_cleanup_close_ int sfd = -1;
	size_t n_done = 0;
	uid_t me = geteuid();
	int r, count = 0;

	if (!dir || !snap)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	sfd = lease_select_lock_shared(dir); /* its probes must not disturb a select-and-lease */
	r = lease_records_load(ctx, dir, (uid_t)-1, NULL, &recs, &n_recs);
	if (r < 0)
		return r;
	done = calloc(n_recs + 1, sizeof(*done));
	if (!done) {
		lease_records_free(recs, n_recs);
		return ctx_error(ctx, -ENOMEM, "out of memory");
	}
	/* first: is any device of set held by another user's (counting) record? */
	for (size_t i = 0; set && i < gpuctl_devset_count(set); i++) {
		const char *u = gpuctl_devset_uuid(set, snap, i);
		char reason[REASON_MAX];
		bool mine = false;
		ssize_t other = -1;

		if (!u ||
		    !lease_held(lease_probe(dir, u, false, NULL, NULL, reason, sizeof(reason))))
			continue;
		for (size_t k = 0; k < n_recs; k++) {
			if (!streq(recs[k].uuid, u))
				continue;
			if (recs[k].uid == me)
				mine = true;
			else
				other = (ssize_t)k;
		}
		if (!mine && other >= 0) {
			r = ctx_error(ctx, -EPERM, "%s is held by uid %u (%s, pid %u): not yours",
			              u, (unsigned)recs[other].uid,
			              recs[other].user ? recs[other].user : "?", recs[other].pid);
			lease_records_free(recs, n_recs);
			return r;
		}
	}
	for (size_t k = 0; k < n_recs; k++) {
		const struct record *rc = &recs[k];
		char reason[REASON_MAX];
		bool in_set = !set, seen = false;

		/* Only --hold holders (records without a job): release never ends a job that
		 * `gpuctl run` started; its lease ends when the job does. */
		if (rc->uid != me || !rc->pid_alive || rc->job_pid != 0 ||
		    (pid_t)rc->pid == getpid())
			continue;
		for (size_t i = 0; set && i < gpuctl_devset_count(set); i++) {
			const char *u = gpuctl_devset_uuid(set, snap, i);

			in_set |= u && streq(u, rc->uuid);
		}
		if (!in_set || !lease_held(lease_probe(dir, rc->uuid, false, NULL, NULL, reason,
		                                       sizeof(reason))))
			continue;
		for (size_t i = 0; i < n_done; i++)
			seen |= done[i] == (pid_t)rc->pid;
		if (seen)
			continue;
		if (signal_holder((pid_t)rc->pid, rc->pid_start_ticks, me) == 0) {
			done[n_done++] = (pid_t)rc->pid;
			count++;
		}
	}
	lease_records_free(recs, n_recs);
	return count;
}

/* ---- the parsers, for the fuzzers (lease-internal.h) ---- */

bool lease_ticket_parse_text(const char *text, size_t len)
{
	_cleanup_free_ char *copy = NULL;
	struct qticket t = {0};
	bool ok;

	if (!text || memchr(text, '\0', len) || !(copy = strndup(text, len)))
		return false;
	ok = ticket_parse(copy, &t);
	qticket_clear(&t);
	return ok;
}
