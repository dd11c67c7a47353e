// SPDX-License-Identifier: MIT
/*
 * lease.c: the leases once taken (docs/leases.md, design.md §2.4, §7): the lease handle;
 * gpuctl_lease_list (each device's state and owner, for `gpuctl ps`); and release. Taking a
 * lease (select-and-lease) is lease-select.c's. It composes the files below it: the lock store
 * (lease-dir.c), owner records (lease-record.c), shared-memory accounting (lease-share.c) and
 * foreign processes (lease-foreign.c).
 * Tests: tests/unit/test-lease.c, tests/cli/test_leases.py, test_wait.py, test_share.py.
 *
 * Decisions:
 * - Release signals through a pidfd when the kernel has pidfd_open (start time and owner are
 *   checked after opening it, so the pid cannot be recycled in between); else kill().
 * - Release finds holders through records (those without a job: holds, library leases) and
 *   through the kernel's locks: a process of the caller's holding a device's lock that no
 *   counting record accounts for (lock_accounted) is ended too, so a hold whose record was
 *   deleted or damaged is not beyond reach. A run's job is never ended while its record
 *   counts; once the run and its job have ended, a process still holding the lease is.
 * - Readers that probe (gpuctl_lease_list, gpuctl_lease_foreign, gpuctl_lease_release) hold
 *   select.lock shared while they do, so their momentary flocks never make a select-and-lease
 *   see a free device as held.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "ctx.h"
#include "lease-internal.h"
#include "snapshot-internal.h"
#include "util.h"

struct list_entry {
	size_t gpu;                                 /* snapshot index */
	int mig;                                    /* MIG index, -1 for the whole GPU */
	enum gpuctl_lease_state state;              /* what the probe found */
	char *reason;                               /* UNUSABLE/UNINITIALISED: why; owned */
	bool has_owner;                             /* owner is filled */
	struct gpuctl_lease_owner owner;            /* strings point into rec */
	const struct gpuctl_lease_owner *owner_ptr; /* HELD with an owner: &owner, for the API */
	struct record rec;                          /* the chosen record (strings owned) */
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

int gpuctl_lease_list_holders(const struct gpuctl_lease_list *list, size_t i,
                              const struct gpuctl_lease_owner *const **ret_owners, size_t *ret_n)
{
	const struct list_entry *e;

	if (!list || i >= list->n || !ret_owners || !ret_n)
		return -EINVAL;
	e = &list->e[i];
	*ret_owners = NULL;
	*ret_n = 0;
	if (e->state == GPUCTL_LEASE_HELD && e->owner_ptr) {
		*ret_owners = &e->owner_ptr;
		*ret_n = 1;
	} else if (e->state == GPUCTL_LEASE_SHARED) {
		*ret_owners = e->sh_ptrs;
		*ret_n = e->n_sh;
	}
	return 0;
}

bool gpuctl_lease_list_current(const struct gpuctl_lease_list *list, size_t i,
                               struct gpuctl_lease_dir *dir, const struct gpuctl_snapshot *snap)
{
	const struct list_entry *e;
	_cleanup_close_ int fd = -1;
	char reason[REASON_MAX];
	uint64_t used = 0;
	int s;

	if (!list || i >= list->n || !dir || !snap)
		return false;
	e = &list->e[i];
	if (e->gpu >= snap->n_gpus || (e->mig >= 0 && (size_t)e->mig >= snap->gpus[e->gpu].n_migs))
		return false;
	if (e->state == GPUCTL_LEASE_HELD)
		return lease_probe(dir, lease_dev_uuid(snap, e->gpu, e->mig), false, NULL, NULL,
		                   reason, sizeof(reason)) == GPUCTL_LEASE_HELD;
	if (e->state != GPUCTL_LEASE_SHARED)
		return false;
	s = lease_lock_open(dir, lease_dev_uuid(snap, e->gpu, e->mig), false, &fd, NULL, reason,
	                    sizeof(reason));
	if (s != GPUCTL_LEASE_FREE || fd < 0 || lease_share_used(fd, &used) < 0)
		return false;
	return used <= UINT64_MAX / SHARE_UNIT && used * SHARE_UNIT == e->declared;
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
	        .leased_since = r->created,
	};
}

/* Moves the counting shared records of uuid out of v into e (their slots in v are left empty). */
static int list_take_shares(struct list_entry *e, struct record *v, size_t n, const char *uuid,
                            const struct stat *st)
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
		if (!v[i].shared || !streq(v[i].uuid, uuid) || !lease_share_holder(&v[i], st))
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
	_cleanup_(lease_locks_view_done) struct lease_locks_view view = {0};
	_cleanup_close_ int sfd = -1;
	struct record *recs = NULL;
	size_t n_recs = 0, total = 0;
	int r;

	if (!dir || !snap || !ret_list)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	r = lease_select_lock_shared(ctx, dir, &sfd);
	if (r < 0)
		return r;
	for (size_t g = 0; g < snap->n_gpus; g++)
		total += 1 + snap->gpus[g].n_migs;
	l = calloc(1, sizeof(*l));
	if (!l || !(l->e = calloc(total ? total : 1, sizeof(*l->e))))
		return ctx_error(ctx, -ENOMEM, "out of memory");
	lease_locks_view_read(dir, &view); /* under our shared select.lock */
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
			e->state = (enum gpuctl_lease_state)lease_probe_view(
			        dir, &view, u, &st, &used, reason, sizeof(reason));
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
				if (list_take_shares(e, recs, n_recs, u, &st) < 0) {
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
			if (k >= 0) {
				e->rec = recs[k];
				recs[k] = (struct record){0}; /* taken */
			} else if (lease_record_from_fds(&st, &e->rec) < 0) {
				continue; /* owner unknown */
			}
			e->has_owner = true;
			e->owner = owner_of(&e->rec);
			e->owner_ptr = &e->owner;
		}
	lease_records_free(recs, n_recs);
	*ret_list = TAKE_PTR(l);
	return 0;
}

/* ---- the lease handle ---- */

void gpuctl_lease_free(struct gpuctl_lease *lease)
{
	if (!lease)
		return;
	for (size_t i = 0; i < lease->n; i++)
		closep(&lease->devs[i].fd);
	closep(&lease->user_fd);
	free(lease->dir_path);
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

/* ---- release ---- */

int lease_signal_holder(pid_t pid, uint64_t start_ticks, uid_t uid, int *pidfd)
{
	*pidfd = -1;
#ifdef SYS_pidfd_open
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (pfd >= 0) {
		int r = 0;

		/* checked after the pidfd pins the process: no recycled pid in between */
		if (!lease_proc_matches((uint32_t)pid, start_ticks, uid))
			r = -ESRCH;
		else if (syscall(SYS_pidfd_send_signal, pfd, SIGTERM, NULL, 0) < 0)
			r = -errno;
		if (r < 0)
			(void)close(pfd);
		else
			*pidfd = pfd;
		return r;
	}
#endif
	if (!lease_proc_matches((uint32_t)pid, start_ticks, uid))
		return -ESRCH;
	return kill(pid, SIGTERM) < 0 ? -errno : 0;
}

size_t lease_wait_holders(struct lease_signalled *s, size_t n)
{
	int64_t deadline = monotonic_ms() + LEASE_RELEASE_WAIT_MS;
	size_t alive;

	for (;;) {
		struct pollfd pfds[64];
		size_t np = 0;
		bool polled_proc = false;

		alive = 0;
		for (size_t i = 0; i < n; i++) {
			if (s[i].pid == 0)
				continue;
			if (s[i].pidfd < 0) {
				if (!lease_proc_matches((uint32_t)s[i].pid, s[i].start_ticks,
				                        s[i].uid)) {
					s[i].pid = 0;
					continue;
				}
				polled_proc = true;
			} else if (np < ELEMENTSOF(pfds)) {
				pfds[np++] = (struct pollfd){.fd = s[i].pidfd, .events = POLLIN};
			}
			alive++;
		}
		int64_t now = monotonic_ms();
		if (alive == 0 || now >= deadline)
			break;
		int timeout = (int)(deadline - now);
		if (polled_proc || np < alive)
			timeout = timeout < 10 ? timeout : 10;
		if (poll(pfds, (nfds_t)np, timeout) < 0 && errno != EINTR)
			break;
		for (size_t k = 0; k < np; k++) {
			if (!(pfds[k].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)))
				continue;
			for (size_t i = 0; i < n; i++) {
				if (s[i].pidfd == pfds[k].fd) {
					(void)close(s[i].pidfd);
					s[i].pidfd = -1;
					s[i].pid = 0;
				}
			}
		}
	}
	for (size_t i = 0; i < n; i++)
		if (s[i].pidfd >= 0)
			(void)close(s[i].pidfd);
	return alive;
}

/* The holders a release has signalled, each once. */
struct release_set {
	struct lease_signalled *s; /* owned */
	size_t n, cap;
	uid_t me;                           /* the caller: only its processes are signalled */
	const struct gpuctl_snapshot *snap; /* the machine, for freed */
	struct gpuctl_devset *freed;        /* the devices the signalled holders held (owned;
	                                     * NULL: not asked for) */
};

/* Whether pid is one of the holders rs signalled. */
static bool release_signalled(const struct release_set *rs, pid_t pid)
{
	for (size_t i = 0; i < rs->n; i++)
		if (rs->s[i].pid == pid)
			return true;
	return false;
}

/* Adds the device uuid names (a GPU or a MIG device of rs->snap) to rs->freed, once; 0 or
 * -ENOMEM. */
static int release_freed_add(struct release_set *rs, const char *uuid)
{
	for (size_t g = 0; rs->freed && g < rs->snap->n_gpus; g++)
		for (int m = -1; m < (int)rs->snap->gpus[g].n_migs; m++) {
			const char *u = lease_dev_uuid(rs->snap, g, m);

			if (u && streq(u, uuid) && !gpuctl_devset_contains(rs->freed, g, m))
				return gpuctl_devset_add(rs->freed, g, m) < 0 ? -ENOMEM : 0;
		}
	return 0;
}

/* Adds every device the caller's records name for holder pid to rs->freed: a holder holds all
 * its devices' locks, so ending it frees them all, named or not; 0 or -ENOMEM. */
static int release_freed_holder(struct release_set *rs, const struct record *recs, size_t n_recs,
                                pid_t pid)
{
	int r = 0;

	for (size_t k = 0; rs->freed && r >= 0 && k < n_recs; k++)
		if (recs[k].uid == rs->me && recs[k].pid_alive && (pid_t)recs[k].pid == pid)
			r = release_freed_add(rs, recs[k].uuid);
	return r;
}

/* Signals pid (started at start_ticks, checked) unless it was already: 1 when signalled now,
 * 0 when it was before or is not the caller's process of that start any more, -ENOMEM. */
static int release_one(struct release_set *rs, pid_t pid, uint64_t start_ticks)
{
	int pidfd = -1;

	for (size_t i = 0; i < rs->n; i++)
		if (rs->s[i].pid == pid)
			return 0;
	if (rs->n == rs->cap) {
		size_t nc = rs->cap ? rs->cap * 2 : 8;
		struct lease_signalled *ns = realloc(rs->s, nc * sizeof(*ns));

		if (!ns)
			return -ENOMEM;
		rs->s = ns;
		rs->cap = nc;
	}
	if (lease_signal_holder(pid, start_ticks, rs->me, &pidfd) < 0)
		return 0;
	rs->s[rs->n++] = (struct lease_signalled){
	        .pid = pid, .start_ticks = start_ticks, .uid = rs->me, .pidfd = pidfd};
	return 1;
}

#define RELEASE_ANCESTOR_MAX 64 /* levels of a parent walk (as lease-foreign.c's) */

/* Whether a counting record accounts for the lock on hd taken by taker (0: unknown) that
 * process pid holds: on an exclusive device any counting record (its one lock is that lease's),
 * else a record naming the taker, or one naming pid or an ancestor of pid (a SIGKILLed gpuctl's
 * job, in a pid namespace where the kernel no longer names the dead taker). */
static bool lock_accounted(const struct record *recs, size_t n_recs,
                           const struct lease_held_dev *hd, pid_t taker, pid_t pid)
{
	bool any = false;
	pid_t p = pid;

	for (size_t k = 0; k < n_recs; k++) {
		if (!streq(recs[k].uuid, hd->uuid))
			continue;
		if (hd->exclusive)
			return true;
		if (taker > 0 && ((pid_t)recs[k].pid == taker || (pid_t)recs[k].job_pid == taker))
			return true;
		any = true;
	}
	for (int depth = 0; any && p > 1 && depth < RELEASE_ANCESTOR_MAX; depth++) {
		pid_t pp = 0;

		for (size_t k = 0; k < n_recs; k++)
			if (streq(recs[k].uuid, hd->uuid) &&
			    ((recs[k].pid_alive && (pid_t)recs[k].pid == p) ||
			     (recs[k].job_alive && (pid_t)recs[k].job_pid == p)))
				return true;
		if (lease_proc_stat(p, &pp, NULL) < 0)
			return false;
		p = pp;
	}
	return false;
}

int lease_held_devices(const struct gpuctl_lease_dir *dir, const struct gpuctl_snapshot *snap,
                       const struct gpuctl_devset *set, struct lease_held_dev **ret, size_t *ret_n)
{
	_cleanup_(lease_locks_view_done) struct lease_locks_view view = {0};
	_cleanup_free_ struct lease_held_dev *v = NULL;
	size_t n = 0, total = 0;

	for (size_t g = 0; g < snap->n_gpus; g++)
		total += 1 + snap->gpus[g].n_migs;
	v = calloc(total ? total : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	lease_locks_view_read(dir, &view); /* no lock file opened for a device seen held */
	for (size_t g = 0; g < snap->n_gpus; g++)
		for (int m = -1; m < (int)snap->gpus[g].n_migs; m++) {
			const char *u = lease_dev_uuid(snap, g, m);
			char reason[REASON_MAX];
			struct stat st;
			int state;

			if (!u || (set && !gpuctl_devset_contains(set, g, m)))
				continue;
			state = lease_probe_view(dir, &view, u, &st, NULL, reason, sizeof(reason));
			if (!lease_held(state))
				continue;
			v[n++] =
			        (struct lease_held_dev){.uuid = u,
			                                .gpu = g,
			                                .mig = m,
			                                .exclusive = state == GPUCTL_LEASE_HELD,
			                                .id = {.dev = st.st_dev, .ino = st.st_ino}};
		}
	*ret = TAKE_PTR(v);
	*ret_n = n;
	return 0;
}

/* Signals the caller's processes that hold the lock of a device of devs that no counting record
 * accounts for (a hold whose record was deleted or damaged; a process that kept a run's lease
 * after the run and its job ended), found through the kernel's locks in /proc/PID/fdinfo; never
 * the caller or its ancestors (they may hold the lock the caller inherited: a release typed in
 * a job's shell). Returns how many were signalled, or -ENOMEM. */
static int release_recordless(struct release_set *rs, const struct lease_held_dev *devs, size_t n,
                              const struct record *recs, size_t n_recs)
{
	_cleanup_free_ struct lease_lock_id *ids = NULL;
	_cleanup_free_ bool *holds = NULL;
	_cleanup_free_ pid_t *takers = NULL;
	_cleanup_(closedirp) DIR *proc = NULL;
	pid_t self[RELEASE_ANCESTOR_MAX + 1];
	size_t n_self = 0, open = 0;
	struct dirent *pe;
	int count = 0;

	/* every lock accounted for without a look: exclusive devices with a counting record */
	for (size_t i = 0; i < n; i++)
		if (!devs[i].exclusive || !lock_accounted(recs, n_recs, &devs[i], 0, 0))
			open++;
	if (open == 0)
		return 0;
	ids = calloc(n, sizeof(*ids));
	holds = calloc(n, sizeof(*holds));
	takers = calloc(n, sizeof(*takers));
	if (!ids || !holds || !takers)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		ids[i] = devs[i].id;
	for (pid_t p = getpid(); p > 1 && n_self < ELEMENTSOF(self);) {
		pid_t pp = 0;

		self[n_self++] = p;
		if (lease_proc_stat(p, &pp, NULL) < 0)
			break;
		p = pp;
	}
	proc = opendir("/proc");
	while (proc && (pe = readdir(proc))) {
		char path[64];
		struct stat st;
		uint64_t pid, start = 0;
		bool skip = false;

		if (!parse_dec(pe->d_name, strlen(pe->d_name), UINT64_MAX, &pid) || pid <= 1 ||
		    pid > INT32_MAX)
			continue;
		for (size_t i = 0; i < n_self; i++)
			skip |= self[i] == (pid_t)pid;
		(void)snprintf(path, sizeof(path), "/proc/%d", (int)pid);
		if (skip || stat(path, &st) < 0 || st.st_uid != rs->me)
			continue;
		memset(holds, 0, n * sizeof(*holds));
		memset(takers, 0, n * sizeof(*takers));
		if (lease_proc_holds((pid_t)pid, ids, n, holds, takers) == 0)
			continue;
		skip = true;
		for (size_t i = 0; i < n; i++)
			if (holds[i] &&
			    !lock_accounted(recs, n_recs, &devs[i], takers[i], (pid_t)pid))
				skip = false;
		if (skip || lease_proc_stat((pid_t)pid, NULL, &start) < 0)
			continue;
		int r = release_one(rs, (pid_t)pid, start);
		if (r < 0)
			return r;
		count += r;
		for (size_t i = 0; r > 0 && rs->freed && i < n; i++)
			if (holds[i] && release_freed_add(rs, devs[i].uuid) < 0)
				return -ENOMEM;
	}
	return count;
}

/* Whether the devices of set held by someone are held by another user's counting record and
 * none of the caller's: -EPERM with the line naming one, else 0. */
static int release_check_others(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir,
                                const struct gpuctl_snapshot *snap, const struct gpuctl_devset *set,
                                const struct record *recs, size_t n_recs, uid_t me)
{
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
		if (!mine && other >= 0)
			return ctx_error(
			        ctx, -EPERM, "%s is held by uid %u (%s, pid %u): not yours", u,
			        (unsigned)recs[other].uid,
			        recs[other].user ? recs[other].user : "?", recs[other].pid);
	}
	return 0;
}

/* Signals the holders of the caller's own counting records without a job (--hold holders and
 * library leases) on held devices of set: how many, or -ENOMEM. Release never ends a job that
 * `gpuctl run` started; its lease ends when the job does. */
static int release_recorded(struct release_set *rs, const struct gpuctl_lease_dir *dir,
                            const struct gpuctl_snapshot *snap, const struct gpuctl_devset *set,
                            const struct record *recs, size_t n_recs)
{
	int count = 0;

	for (size_t k = 0; k < n_recs; k++) {
		const struct record *rc = &recs[k];
		char reason[REASON_MAX];
		bool in_set = !set;
		int r;

		if (rc->uid != rs->me || !rc->pid_alive || rc->job_pid != 0 ||
		    (pid_t)rc->pid == getpid())
			continue;
		for (size_t i = 0; set && i < gpuctl_devset_count(set); i++) {
			const char *u = gpuctl_devset_uuid(set, snap, i);

			in_set |= u && streq(u, rc->uuid);
		}
		if (!in_set || !lease_held(lease_probe(dir, rc->uuid, false, NULL, NULL, reason,
		                                       sizeof(reason))))
			continue;
		r = release_one(rs, (pid_t)rc->pid, rc->pid_start_ticks);
		if (r < 0)
			return r;
		count += r;
		if (release_signalled(rs, (pid_t)rc->pid) &&
		    release_freed_holder(rs, recs, n_recs, (pid_t)rc->pid) < 0)
			return -ENOMEM;
	}
	return count;
}

/* gpuctl_lease_release with rs prepared (rs->freed filled when not NULL). */
static int release_run(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                       const struct gpuctl_snapshot *snap, const struct gpuctl_devset *set,
                       struct release_set *rs)
{
	_cleanup_free_ struct lease_held_dev *held = NULL;
	struct record *recs = NULL;
	size_t n_recs = 0, n_held = 0, alive;
	_cleanup_close_ int sfd = -1;
	int r, count = 0;

	if (!dir || !snap)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	/* its probes must not disturb a select-and-lease; a select.lock held past the readers'
	 * bound does not keep a user from ending their own holders (docs/leases.md "Bounds") */
	if (lease_select_lock_shared(ctx, dir, &sfd) < 0)
		ctx_log(ctx, GPUCTL_LOG_WARNING, "%s (releasing without it)", gpuctl_errmsg(ctx));
	r = lease_records_load(ctx, dir, (uid_t)-1, NULL, &recs, &n_recs);
	if (r < 0)
		return r;
	r = release_check_others(ctx, dir, snap, set, recs, n_recs, rs->me);
	if (r == 0)
		r = release_recorded(rs, dir, snap, set, recs, n_recs);
	if (r >= 0) {
		count = r;
		r = lease_held_devices(dir, snap, set, &held, &n_held);
	}
	if (r >= 0)
		r = release_recordless(rs, held, n_held, recs, n_recs);
	lease_records_free(recs, n_recs);
	if (r >= 0)
		count += r;
	else if (r == -ENOMEM)
		r = ctx_error(ctx, r, "out of memory");
	/* Not before the holders have gone: `release && select` must find the devices free. The
	 * shared select.lock is dropped first so a holder's exit path is never blocked on it. */
	if (sfd >= 0)
		(void)close(TAKE_FD(sfd));
	alive = lease_wait_holders(rs->s, rs->n);
	if (r < 0)
		return r;
	if (alive)
		ctx_log(ctx, GPUCTL_LOG_WARNING,
		        "release: %zu holder%s still running %d s after SIGTERM (stopped?)", alive,
		        alive == 1 ? " is" : "s are", LEASE_RELEASE_WAIT_MS / 1000);
	return count;
}

int gpuctl_lease_release(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                         const struct gpuctl_snapshot *snap, const struct gpuctl_devset *set)
{
	struct release_set rs = {.me = geteuid(), .snap = snap};
	int r = release_run(ctx, dir, snap, set, &rs);

	free(rs.s);
	return r;
}

int gpuctl_lease_release_freed(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                               const struct gpuctl_snapshot *snap, const struct gpuctl_devset *set,
                               struct gpuctl_devset **ret_freed)
{
	_cleanup_(gpuctl_devset_freep) struct gpuctl_devset *freed = NULL;
	struct release_set rs = {.me = geteuid(), .snap = snap};
	int r;

	if (!ret_freed)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	if (gpuctl_devset_new(&rs.freed) < 0)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	r = release_run(ctx, dir, snap, set, &rs);
	free(rs.s);
	if (r >= 0 && gpuctl_devset_new(&freed) < 0)
		r = ctx_error(ctx, -ENOMEM, "out of memory");
	/* of the devices the ended holders held, those free now (a holder still running after
	 * the wait keeps its own) */
	for (size_t i = 0; r >= 0 && i < gpuctl_devset_count(rs.freed); i++) {
		const char *u = gpuctl_devset_uuid(rs.freed, snap, i);
		char reason[REASON_MAX];
		size_t g = 0;
		int m = -1;

		if (!u || gpuctl_devset_get(rs.freed, i, &g, &m) < 0 ||
		    lease_held(lease_probe(dir, u, false, NULL, NULL, reason, sizeof(reason))))
			continue;
		if (gpuctl_devset_add(freed, g, m) < 0)
			r = ctx_error(ctx, -ENOMEM, "out of memory");
	}
	gpuctl_devset_free(rs.freed);
	if (r >= 0)
		*ret_freed = TAKE_PTR(freed);
	return r;
}
