// SPDX-License-Identifier: MIT
/*
 * lease-evict.c: root takes leases back (docs/leases.md "Taking a lease back"):
 * `gpuctl release --force`, and the node agent's idle_release and max_lease_age.
 * Tests: tests/cli/test_evict.py.
 *
 * Decisions:
 * - Nothing of the user's is killed. A --hold holder (an owner record without a job) is
 *   gpuctl's own process and is ended with SIGTERM, checked as release checks (owner, start
 *   time). Every other lease (a `gpuctl run` job's, a holder no record accounts for) is taken
 *   back by replacing its lock file: a new file of the same owner and mode is renamed over
 *   DIR/locks/<UUID>.lock, so the old holders keep a lock on a file that is no longer at the
 *   path, and the device is free for the next select-and-lease. Everything that decides a
 *   lease looks at the file at the path (probes, /proc/locks views by inode, the lock holders
 *   of lease-foreign.c by fstatat, release, failover's "still the directory's" check), so the
 *   job's processes then count as foreign, and its GPU is busy until it ends.
 * - The replacement happens under select.lock held exclusively, so a select-and-lease never
 *   sees half of it, and only for devices that are still held by what was found: the holds
 *   first get SIGTERM and are waited for without select.lock (a hold that does not exit, a
 *   stopped one, has its lock file replaced after the wait, when it is still the same file).
 * - The evicted job's owner records of that device are removed: a record counts while its
 *   device is held and its job lives, so once someone else leases the device the record would
 *   make the evicted job that lease's.
 * - One notice per holder and device (lease-notice.c); a holder that cannot be named (no
 *   record, no process of ours to see) gets none, its device is freed all the same. Notices
 *   are written before anything is taken, saying what is meant to happen, and settled after:
 *   rewritten when a hold did not exit and lost its lock file instead, removed when nothing
 *   was taken. So whoever sees the lease end (the node agent, at its next sample) finds the
 *   notice already there, and the ledger says "evicted", not "release".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ctx.h"
#include "lease-internal.h"
#include "nss.h"
#include "util.h"

#define EVICT_REASON_MAX 200 /* bytes of a reason */

/* One holder of one device that is taken back. */
struct victim {
	size_t gpu;              /* the device: snapshot index */
	int mig;                 /* MIG index, -1 for the whole GPU */
	const char *uuid;        /* borrowed from the snapshot */
	struct lease_lock_id id; /* its lock file when found held */
	bool known;              /* a holder was found (uid, pid below) */
	uid_t uid;               /* the holder's user */
	uint32_t pid;            /* the holder (record's pid, or the process holding the lock) */
	uint64_t ticks;          /* its start, clock ticks since boot */
	uint64_t start_time;     /* its start, seconds since the epoch (the record's) */
	bool hold;               /* a --hold holder: ended with SIGTERM */
	bool ended;              /* it exited after the SIGTERM */
	bool replaced;           /* its device's lock file was replaced */
};

struct evict {
	struct gpuctl_ctx *ctx;
	struct gpuctl_lease_dir *dir;
	const struct gpuctl_snapshot *snap;
	struct victim *v; /* owned */
	size_t n, cap;
};

/* Whether reason is one line a notice can carry. */
static bool reason_ok(const char *reason)
{
	size_t l = reason ? strlen(reason) : 0;

	if (l == 0 || l > EVICT_REASON_MAX)
		return false;
	for (size_t i = 0; i < l; i++)
		if ((unsigned char)reason[i] < 0x20 || reason[i] == 0x7f)
			return false;
	return true;
}

/* The device of snap whose UUID is uuid: true with (g, mig). */
static bool device_of(const struct gpuctl_snapshot *snap, const char *uuid, size_t *ret_g,
                      int *ret_mig)
{
	for (size_t g = 0; g < snap->n_gpus; g++)
		for (int m = -1; m < (int)snap->gpus[g].n_migs; m++) {
			const char *u = lease_dev_uuid(snap, g, m);

			if (u && streq(u, uuid)) {
				*ret_g = g;
				*ret_mig = m;
				return true;
			}
		}
	return false;
}

/* Appends a victim: 0 or -ENOMEM. Once per device and holder. */
static int victim_add(struct evict *e, const struct victim *v)
{
	for (size_t i = 0; i < e->n; i++)
		if (streq(e->v[i].uuid, v->uuid) && e->v[i].known == v->known &&
		    e->v[i].pid == v->pid && e->v[i].uid == v->uid)
			return 0;
	if (e->n == e->cap) {
		size_t nc = e->cap ? e->cap * 2 : 8;
		struct victim *nv = realloc(e->v, nc * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		e->v = nv;
		e->cap = nc;
	}
	e->v[e->n++] = *v;
	return 0;
}

/* A victim of device hd from record rc (NULL: a holder no record names, found in /proc). */
static struct victim victim_of(const struct lease_held_dev *hd, const struct record *rc)
{
	struct victim v = {.gpu = hd->gpu, .mig = hd->mig, .uuid = hd->uuid, .id = hd->id};

	if (rc) {
		v.known = true;
		v.uid = rc->uid;
		v.pid = rc->pid;
		v.ticks = rc->pid_start_ticks;
		v.start_time = rc->start_time;
		v.hold = rc->job_pid == 0 && rc->pid_alive;
	}
	return v;
}

/* The other devices a --hold holder holds (its records): ending it frees them too. */
static int hold_devices(struct evict *e, const struct victim *hv, const struct record *recs,
                        size_t n_recs)
{
	for (size_t k = 0; k < n_recs; k++) {
		const struct record *rc = &recs[k];
		struct lease_held_dev hd = {0};
		char reason[REASON_MAX];
		struct stat st;
		int r;

		if (rc->uid != hv->uid || rc->pid != hv->pid || !rc->pid_alive ||
		    rc->pid_start_ticks != hv->ticks || streq(rc->uuid, hv->uuid) ||
		    !device_of(e->snap, rc->uuid, &hd.gpu, &hd.mig))
			continue;
		hd.uuid = lease_dev_uuid(e->snap, hd.gpu, hd.mig);
		if (!lease_held(lease_probe(e->dir, rc->uuid, false, &st, NULL, reason,
		                            sizeof(reason))))
			continue;
		hd.id = (struct lease_lock_id){.dev = st.st_dev, .ino = st.st_ino};
		struct victim v = victim_of(&hd, rc);

		if ((r = victim_add(e, &v)) < 0)
			return r;
	}
	return 0;
}

/* The holders of held device hd: the counting records of it (one for HELD, every shared one for
 * SHARED), else the process found holding its lock file. */
static int find_holders(struct evict *e, const struct lease_held_dev *hd, struct record *recs,
                        size_t n_recs)
{
	struct stat st = {.st_dev = hd->id.dev, .st_ino = hd->id.ino};
	bool found = false;
	int r;

	if (hd->exclusive) {
		ssize_t k = lease_record_pick(recs, n_recs, hd->uuid, &st);

		if (k >= 0) {
			struct victim v = victim_of(hd, &recs[k]);

			found = true;
			if ((r = victim_add(e, &v)) < 0)
				return r;
		}
	} else {
		for (size_t k = 0; k < n_recs; k++) {
			if (!recs[k].shared || !streq(recs[k].uuid, hd->uuid))
				continue;
			struct victim v = victim_of(hd, &recs[k]);

			found = true;
			if ((r = victim_add(e, &v)) < 0)
				return r;
		}
	}
	if (!found) {
		struct record rec = {0};
		struct victim v = victim_of(hd, NULL);

		if (lease_record_from_fds(&st, &rec) == 0) {
			v = victim_of(hd, &rec);
			v.hold = false; /* no record: a job's process, never signalled */
		}
		lease_record_clear(&rec);
		if ((r = victim_add(e, &v)) < 0)
			return r;
	}
	return 0;
}

/* Replaces the lock file of device uuid by a new one of the same owner and mode, renamed over it
 * (the caller holds select.lock exclusively). Only when it is still the file of id. */
static int lock_replace(struct evict *e, const char *uuid, const struct lease_lock_id *id)
{
	char name[UUID_MAX + 8], tmp[UUID_MAX + 40];
	_cleanup_close_ int fd = -1;
	struct stat st;
	int r = 0;

	(void)snprintf(name, sizeof(name), "%s.lock", uuid);
	if (fstatat(e->dir->locks_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (st.st_dev != id->dev || st.st_ino != id->ino)
		return 0; /* not the file found held: replaced or recreated since */
	if (!S_ISREG(st.st_mode) || st.st_uid != e->dir->owner || st.st_nlink != 1)
		return ctx_error(e->ctx, -EPERM,
		                 "lease directory '%s': lock file of %s is unusable", e->dir->path,
		                 uuid);
	(void)snprintf(tmp, sizeof(tmp), ".%s.lock.evict-%d", uuid, (int)getpid());
	(void)unlinkat(e->dir->locks_fd, tmp, 0); /* a left-over of ours */
	fd = openat(e->dir->locks_fd, tmp, O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	            0600);
	if (fd < 0)
		r = -errno;
	else if (fchown(fd, st.st_uid, st.st_gid) < 0 || fchmod(fd, st.st_mode & 07777) < 0 ||
	         renameat(e->dir->locks_fd, tmp, e->dir->locks_fd, name) < 0)
		r = -errno;
	if (r < 0) {
		(void)unlinkat(e->dir->locks_fd, tmp, 0);
		return ctx_error(e->ctx, r,
		                 "lease directory '%s': cannot replace the lock file of %s: %s",
		                 e->dir->path, uuid, strerror(-r));
	}
	return 1;
}

/* Under select.lock held exclusively, replaces the lock files of the victims that want it
 * (now: every victim that is not a hold; after the wait: holds that did not exit). */
static int replace_locks(struct evict *e, bool holds)
{
	_cleanup_close_ int sfd = -1;
	int r;

	r = lease_select_lock_take(e->ctx, e->dir, &sfd, NULL);
	if (r < 0)
		return r;
	for (size_t i = 0; i < e->n; i++) {
		struct victim *v = &e->v[i];

		if (v->replaced || (holds ? !v->hold || v->ended : v->hold))
			continue;
		if ((r = lock_replace(e, v->uuid, &v->id)) < 0)
			return r;
		/* every holder of that device loses it with the file */
		for (size_t k = 0; k < e->n; k++)
			if (streq(e->v[k].uuid, v->uuid) && !e->v[k].ended)
				e->v[k].replaced = true;
	}
	return 0;
}

/* SIGTERM to the holds, then waits for them (without select.lock: never block their exit). */
static int end_holds(struct evict *e)
{
	_cleanup_free_ struct lease_signalled *s = calloc(e->n ? e->n : 1, sizeof(*s));
	size_t ns = 0;

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < e->n; i++) {
		struct victim *v = &e->v[i];
		bool done = false;
		int pidfd = -1;

		if (!v->hold || v->replaced)
			continue;
		for (size_t k = 0; k < ns; k++)
			done |= s[k].pid == (pid_t)v->pid && s[k].uid == v->uid;
		if (done || lease_signal_holder((pid_t)v->pid, v->ticks, v->uid, &pidfd) < 0)
			continue;
		s[ns++] = (struct lease_signalled){.pid = (pid_t)v->pid,
		                                   .start_ticks = v->ticks,
		                                   .uid = v->uid,
		                                   .pidfd = pidfd};
	}
	(void)lease_wait_holders(s, ns);
	for (size_t i = 0; i < e->n; i++) {
		struct victim *v = &e->v[i];

		if (v->hold && !v->replaced)
			v->ended = !lease_proc_matches(v->pid, v->ticks, v->uid);
	}
	return 0;
}

/* Victim v's notice (strings borrowed: user and by from the caller). */
static struct gpuctl_lease_notice notice_of(const struct victim *v, const char *user,
                                            const char *by, const char *reason, uint64_t when)
{
	return (struct gpuctl_lease_notice){.uid = v->uid,
	                                    .user = user,
	                                    .device = v->uuid,
	                                    .index = (int64_t)v->gpu,
	                                    .pid = v->pid,
	                                    .start_time = v->start_time,
	                                    .ended = v->ended,
	                                    .by_uid = geteuid(),
	                                    .by = by,
	                                    .when = when,
	                                    .reason = reason};
}

/* The notices of the known victims, in two passes. Before anything is taken (settle false):
 * each says what is meant to happen (a hold ends, another lease loses its lock file), so that a
 * reader who sees the lease end (the node agent) finds its notice already there. After (settle
 * true): each is made true (rewritten when a hold did not end and lost its lock file instead;
 * removed when nothing was taken from it), the job's records dropped, the notices listed. A
 * notice that cannot be written is logged: the lease is taken back all the same. Returns how
 * many leases were taken back (0 before), or -ENOMEM. */
static int notices_pass(struct evict *e, const char *reason, const char *by, uint64_t when,
                        bool settle, struct gpuctl_lease_notices *list)
{
	int count = 0;

	for (size_t i = 0; i < e->n; i++) {
		struct victim *v = &e->v[i];
		_cleanup_free_ char *user = NULL;
		bool ended = v->ended;

		if (!v->known)
			continue;
		user = nss_user_name(v->uid);
		if (!settle)
			v->ended = v->hold; /* what the notice says until the outcome is known */
		struct gpuctl_lease_notice n = notice_of(v, user, by, reason, when);
		v->ended = ended;
		if (settle && !v->ended && !v->replaced) {
			lease_notice_remove(e->dir, &n);
			continue;
		}
		if ((!settle || v->ended != v->hold) && lease_notice_write(e->ctx, e->dir, &n) < 0)
			ctx_log(e->ctx, GPUCTL_LOG_WARNING, "%s", gpuctl_errmsg(e->ctx));
		if (!settle)
			continue;
		if (!v->ended)
			(void)lease_records_drop(e->dir, v->uid, v->uuid, v->pid, v->ticks);
		if (list && lease_notices_add(list, &n) < 0)
			return -ENOMEM;
		count++;
	}
	return count;
}

/* Steps 1-2: the held devices of set and their holders (under select.lock, shared). */
static int find_victims(struct evict *e, const struct gpuctl_devset *set)
{
	_cleanup_free_ struct lease_held_dev *held = NULL;
	_cleanup_close_ int sfd = -1;
	struct record *recs = NULL;
	size_t n_recs = 0, n_held = 0;
	int r;

	r = lease_select_lock_shared(e->ctx, e->dir, &sfd);
	if (r < 0)
		return r;
	r = lease_records_load(e->ctx, e->dir, (uid_t)-1, NULL, &recs, &n_recs);
	if (r < 0)
		return r;
	r = lease_held_devices(e->dir, e->snap, set, &held, &n_held);
	for (size_t i = 0; r >= 0 && i < n_held; i++)
		r = find_holders(e, &held[i], recs, n_recs);
	for (size_t i = 0, n = e->n; r >= 0 && i < n; i++)
		if (e->v[i].hold) {
			struct victim hv = e->v[i];

			r = hold_devices(e, &hv, recs, n_recs);
		}
	lease_records_free(recs, n_recs);
	return r < 0 ? ctx_error(e->ctx, r, "out of memory") : 0;
}

int gpuctl_lease_evict(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                       const struct gpuctl_snapshot *snap, const struct gpuctl_devset *set,
                       const char *reason, struct gpuctl_lease_notices **ret)
{
	_cleanup_(gpuctl_lease_notices_freep) struct gpuctl_lease_notices *list = NULL;
	struct evict e = {.ctx = ctx, .dir = dir, .snap = snap};
	_cleanup_free_ char *by = NULL;
	uint64_t when = (uint64_t)time(NULL);
	int r, rs;

	if (!dir || !snap)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	if (!reason_ok(reason))
		return ctx_error(ctx, -EINVAL, "reason: 1 to %d bytes without control characters",
		                 EVICT_REASON_MAX);
	if (geteuid() != 0)
		return ctx_error(ctx, -EPERM, "only root may take a lease back");
	if (ret && lease_notices_new(&list) < 0)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	r = find_victims(&e, set);
	if (r < 0)
		return r;
	by = nss_user_name(geteuid());
	(void)notices_pass(&e, reason, by, when, false, NULL);
	r = replace_locks(&e, false); /* jobs: at once */
	if (r >= 0 && (r = end_holds(&e)) < 0)
		r = ctx_error(ctx, r, "out of memory");
	if (r >= 0)
		r = replace_locks(&e, true); /* holds still running (stopped) */
	/* on failure too: what was taken keeps its notice, the rest loses it */
	rs = notices_pass(&e, reason, by, when, true, list);
	if (r >= 0 && (r = rs) < 0)
		r = ctx_error(ctx, r, "out of memory");
	free(e.v);
	if (r < 0)
		return r;
	if (ret)
		*ret = TAKE_PTR(list);
	return r;
}
