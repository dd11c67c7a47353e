// SPDX-License-Identifier: MIT
/*
 * lease-select.c: select-and-lease (docs/leases.md, design.md §2.4, §7): exclusive flock(2)s
 * on DIR/locks/<UUID>.lock, or shared leases (a shared flock plus OFD read locks that declare
 * memory), chosen by gpuctl_select among the devices no lease holds. Its steps, one function
 * each, in this order under select.lock: probe every device (sal_probe), check the quotas
 * (sal_gate), set aside what older waiters could use and what runs without a lease (sal_reserve,
 * sal_foreign), select (sal_select), lock the chosen devices (sal_lock), write the owner records
 * (sal_record), and leave the queue. struct sal carries what one step learns to the next. Tests:
 * tests/unit/test-lease.c, tests/cli/test_leases.py, test_wait.py, test_share.py, test_failover.py.
 *
 * Decisions:
 * - MIG and whole GPUs: a whole GPU counts as leased when any of its MIG devices is leased,
 *   and a MIG device when its GPU is (select-filter.c's filter spreads each marked device that
 *   way). An UNUSABLE or UNINITIALISED device is excluded the same way (it is put in the
 *   "leased" set, we cannot know who holds it); if the selection then fails, the -ENOSPC line
 *   names the lock-file problem, and it becomes -ENOENT (with `sudo gpuctl lease init`) when a
 *   missing lock file was among the causes. Every device of the snapshot is probed, whatever
 *   the request, so the rule holds in both directions.
 * - A lease whose owner records cannot be written (a full file system, no owners/) is
 *   refused: select-and-lease lets go of the locks it took, removes the records it wrote and
 *   fails with -EIO, the message naming the lease directory and the cause. The lock is still
 *   the lease, but without a record `release` could not tell a hold from a run's job, and ps
 *   would name nobody. -EIO, not the write's -ENOSPC, which means "too few devices" (exit 3,
 *   and a reason to wait on) to every caller.
 * - Sharing (docs/leases.md "Sharing"): a shared request asks that what it declares be free
 *   now (the select request's share_mem). (A device is SHARED per the probe of lease-dir.c;
 *   declared memory is counted by lease-share.c; shared leases' records are named by
 *   lease-record.c.)
 * - select.lock is held exclusive throughout, so the internal lease_foreign is used (no
 *   shared select.lock of its own). On failure select.lock is let go of first, then the locks
 *   a half-made lease took (the caller's variables' cleanup order).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "ctx.h"
#include "lease-internal.h"
#include "parse.h"
#include "select.h"
#include "snapshot-internal.h"
#include "util.h"

/* What select-and-lease carries from one step to the next. */
struct sal {
	struct gpuctl_lease_dir *dir;       /* the lease directory */
	const struct gpuctl_snapshot *snap; /* the devices */
	struct gpuctl_wait_ticket *ticket;  /* the caller's place in the queue, or NULL */
	const struct gpuctl_lease *keep;    /* the caller's current lease (failover), or NULL */
	const struct lease_gate *gate;      /* quotas, or NULL */
	struct gpuctl_ctx *ctx;             /* for the gate's checks of older waiters */
	struct gpuctl_select_request sreq;  /* the request, full-size; its leased and foreign
	                                     * become the sets below */
	struct gpuctl_lease_request lr;     /* the lease request, full-size */
	bool share;                         /* a shared lease (lr.share_mem > 0) */
	uint64_t need;                      /* shared: the SHARE_UNITs it declares */
	uint64_t fp;                        /* ticket: the queue's fingerprint before the probes */
	struct lease_locks_view view;       /* /proc/locks, read once under select.lock */
	struct gpuctl_devset *leased;   /* held, unusable, full or reserved: never chosen; owned */
	struct gpuctl_devset *own;      /* held by keep: ours; owned */
	struct gpuctl_devset *reserved; /* what older waiters could use; owned */
	struct gpuctl_devset *foreign;  /* in use without a lease; owned */
	struct sbuf free_locks;         /* ticket: "\n<UUID>.lock\n..." of the devices found free */
	char first_reason[REASON_MAX];  /* the first unusable device's reason */
	size_t n_bad;                   /* unusable devices */
	bool uninit;                    /* one of them has no lock file */
	char full[REASON_MAX];          /* shared: the first 8 devices without room, "0,1:2" */
	size_t n_full;                  /* devices without room */
	size_t ahead;                   /* live waiters ahead of the caller */
};

static void sal_done(struct sal *s)
{
	sbuf_done(&s->free_locks);
	lease_locks_view_done(&s->view);
	gpuctl_devset_free(s->reserved);
	gpuctl_devset_free(s->own);
	gpuctl_devset_free(s->leased);
	gpuctl_devset_free(s->foreign);
}

/* The descriptor of keep's lock on device uuid when it is the lock file dir has for uuid now
 * (same file system and inode: the same directory, the file never replaced) and keep's kind
 * (shared or exclusive) is the request's; else -1. */
static int kept_fd(const struct gpuctl_lease_dir *dir, const struct gpuctl_lease *keep,
                   const char *uuid, uint64_t share_mem)
{
	if (!keep || !uuid || keep->share_mem != share_mem)
		return -1;
	for (size_t i = 0; i < keep->n; i++) {
		const struct lease_dev *d = &keep->devs[i];
		char name[UUID_MAX + 8];
		struct stat held, now;

		if (d->fd < 0 || strcmp(d->uuid, uuid) != 0)
			continue;
		/* fstatat, not open: no inotify event for waiters (docs/leases.md "Wake-ups") */
		(void)snprintf(name, sizeof(name), "%s.lock", uuid);
		if (!lease_uuid_ok(uuid) || dir->locks_fd < 0 || fstat(d->fd, &held) < 0 ||
		    fstatat(dir->locks_fd, name, &now, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(now.st_mode) || now.st_uid != dir->owner || now.st_nlink != 1 ||
		    held.st_dev != now.st_dev || held.st_ino != now.st_ino)
			return -1;
		return d->fd;
	}
	return -1;
}

/* ---- 2. probe every device ---- */

/* Notes a device (GPU g, or its MIG device m) without room for what a shared request declares:
 * "g" or "g:m" appended to full, the first 8 of them. */
static void sal_note_full(struct sal *s, size_t g, int m)
{
	size_t l;

	if (s->n_full++ >= 8)
		return;
	l = strlen(s->full);
	(void)snprintf(s->full + l, sizeof(s->full) - l, "%s%zu%s", s->n_full > 1 ? "," : "", g,
	               m < 0 ? "" : ":");
	l = strlen(s->full);
	if (m >= 0)
		(void)snprintf(s->full + l, sizeof(s->full) - l, "%d", m);
}

/* One device (GPU g itself when m < 0): ours when keep holds it; else free (for a shared
 * request: with room), or put in leased, and why counted. */
static int sal_probe_one(struct gpuctl_ctx *ctx, struct sal *s, size_t g, int m)
{
	char reason[REASON_MAX] = "";
	const char *u = lease_dev_uuid(s->snap, g, m);
	uint64_t used = 0;
	int st, r;

	if (m < 0 && (!u || s->snap->gpus[g].lost))
		return 0; /* never chosen anyway ("lost or unidentified") */
	if (kept_fd(s->dir, s->keep, u, s->share ? s->lr.share_mem : 0) >= 0) {
		r = gpuctl_devset_add(s->own, g, m);
		if (r < 0 && r != -EEXIST)
			return ctx_error(ctx, r, "out of memory");
		return 0;
	}
	st = lease_probe_view(s->dir, &s->view, u, NULL, s->share ? &used : NULL, reason,
	                      sizeof(reason));
	/* a waiter's: closes of this lock file cannot help it (lease-queue.c) */
	if (s->ticket && st == GPUCTL_LEASE_FREE)
		sbuf_printf(&s->free_locks, "%s%s.lock\n", s->free_locks.len ? "" : "\n", u);
	if (st == GPUCTL_LEASE_FREE && !s->share)
		return 0;
	if (s->share && (st == GPUCTL_LEASE_FREE || st == GPUCTL_LEASE_SHARED)) {
		uint64_t cap = lease_share_capacity(s->snap, g, m, &s->lr);

		if (used <= cap && s->need <= cap - used)
			return 0;
		/* no room for what the job declares: as if leased, and said so */
		sal_note_full(s, g, m);
	} else if (st != GPUCTL_LEASE_HELD && st != GPUCTL_LEASE_SHARED) {
		if (!s->n_bad++)
			strscpy(s->first_reason, sizeof(s->first_reason), reason);
		s->uninit |= st == GPUCTL_LEASE_UNINITIALISED;
	}
	r = gpuctl_devset_add(s->leased, g, m);
	if (r < 0 && r != -EEXIST)
		return ctx_error(ctx, r, "out of memory");
	return 0;
}

/* Every device of the snapshot, whatever the request (those keep holds are ours). */
static int sal_probe(struct gpuctl_ctx *ctx, struct sal *s)
{
	if (gpuctl_devset_new(&s->leased) < 0 || gpuctl_devset_new(&s->own) < 0 ||
	    lease_devset_merge(s->leased, s->sreq.leased) < 0)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	for (size_t g = 0; g < s->snap->n_gpus; g++)
		for (int m = -1; m < (int)s->snap->gpus[g].n_migs; m++) {
			int r = sal_probe_one(ctx, s, g, m);

			if (r < 0)
				return r;
		}
	return 0;
}

/* ---- 2a. the gate (quotas) ---- */

int lease_held_by(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir,
                  const struct lease_locks_view *view, const struct gpuctl_snapshot *snap,
                  uid_t uid, struct gpuctl_devset **ret)
{
	_cleanup_(gpuctl_devset_freep) struct gpuctl_devset *set = NULL;
	struct record *recs = NULL;
	size_t n = 0;
	int r;

	r = gpuctl_devset_new(&set);
	if (r < 0)
		return r;
	r = lease_records_load(ctx, dir, (uid_t)-1, NULL, &recs, &n);
	for (size_t g = 0; r >= 0 && g < snap->n_gpus; g++)
		for (int m = -1; r >= 0 && m < (int)snap->gpus[g].n_migs; m++) {
			const char *u = lease_dev_uuid(snap, g, m);
			bool mine = false, any = false;
			char reason[REASON_MAX];
			struct record fr;
			struct stat st;

			for (size_t i = 0; u && i < n; i++)
				if (streq(recs[i].uuid, u)) {
					any = true;
					mine |= recs[i].uid == uid;
				}
			if ((any && !mine) || !u ||
			    !lease_held(lease_probe_view(dir, view, u, &st, NULL, reason,
			                                 sizeof(reason))))
				continue;
			/* held with no record at all (its holder removed it): the user's when a
			 * process of the user holds the lock file (only the user's own processes'
			 * descriptors are readable to the user) */
			if (!any) {
				if (lease_record_from_fds(&st, &fr) < 0)
					continue;
				mine = fr.uid == uid;
				lease_record_clear(&fr);
				if (!mine)
					continue;
			}
			r = gpuctl_devset_add(set, g, m);
			if (r == -EEXIST)
				r = 0;
		}
	lease_records_free(recs, n);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(set);
	return 0;
}

int lease_held_by_user(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir,
                       const struct gpuctl_snapshot *snap, uid_t uid, struct gpuctl_devset **ret)
{
	_cleanup_(lease_locks_view_done) struct lease_locks_view view = {0};
	_cleanup_close_ int sfd = -1;
	int r = lease_select_lock_shared(ctx, dir, &sfd);

	if (r < 0)
		return r;
	lease_locks_view_read(dir, &view); /* under our shared select.lock */
	return lease_held_by(ctx, dir, &view, snap, uid, ret);
}

/* An older waiter over its quota reserves nothing (lease_queue_reserved's skip). */
static bool sal_skip(void *ud, uid_t uid, const char *pool_name, unsigned count)
{
	struct sal *s = ud;
	_cleanup_(gpuctl_devset_freep) struct gpuctl_devset *held = NULL;
	char errsave[CTX_ERRMSG_MAX];
	bool over;

	strscpy(errsave, sizeof(errsave), gpuctl_errmsg(s->ctx));
	if (lease_held_by(s->ctx, s->dir, &s->view, s->snap, uid, &held) < 0)
		return false; /* cannot tell: it reserves, as it always did */
	over = s->gate->check(s->gate->ud, s->ctx, uid, pool_name, count, held, false) == -EDQUOT;
	ctx_error(s->ctx, 0, "%s", errsave); /* the caller's message, not ours */
	return over;
}

/* *held less the devices of the lease a failover replaces (s->own): the new lease takes their
 * place, it does not add to them. */
static int sal_without_own(const struct sal *s, struct gpuctl_devset **held)
{
	struct gpuctl_devset *rest = NULL;
	int r = gpuctl_devset_new(&rest);

	for (size_t i = 0; r >= 0 && i < gpuctl_devset_count(*held); i++) {
		size_t g;
		int m;

		if (gpuctl_devset_get(*held, i, &g, &m) < 0 || gpuctl_devset_contains(s->own, g, m))
			continue;
		r = gpuctl_devset_add(rest, g, m);
	}
	if (r < 0) {
		gpuctl_devset_free(rest);
		return r;
	}
	gpuctl_devset_free(*held);
	*held = rest;
	return 0;
}

/* The caller's own quotas: -EDQUOT with the gate's line when over one. */
static int sal_gate(struct gpuctl_ctx *ctx, struct sal *s)
{
	_cleanup_(gpuctl_devset_freep) struct gpuctl_devset *held = NULL;
	int r;

	if (!s->gate)
		return 0;
	r = lease_held_by(ctx, s->dir, &s->view, s->snap, geteuid(), &held);
	if (r >= 0 && gpuctl_devset_count(s->own) > 0)
		r = sal_without_own(s, &held);
	if (r < 0)
		return ctx_error(ctx, r, "out of memory");
	r = s->gate->check(s->gate->ud, ctx, geteuid(), s->sreq.pool_name, s->sreq.count, held,
	                   true);
	if (r == -EDQUOT && s->ticket)
		lease_ticket_failed(s->ticket, s->fp, NULL); /* wakes on any lock's change */
	return r;
}

/* ---- 2b. older waiters and foreign processes ---- */

/* The devices older waiters could use are theirs first (docs/leases.md "Waiting"): into leased,
 * but for those that are ours already. */
static int sal_reserve(struct gpuctl_ctx *ctx, struct sal *s)
{
	int r;

	if (gpuctl_devset_new(&s->reserved) < 0)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	struct lease_skip skip = {.fn = sal_skip, .ud = s};

	r = lease_queue_reserved(ctx, s->dir, s->snap, s->ticket, true, s->gate ? &skip : NULL,
	                         s->reserved, &s->ahead);
	if (r < 0)
		return ctx_error(ctx, r, "'%s/queue': %s", s->dir->path, strerror(-r));
	for (size_t i = 0; i < gpuctl_devset_count(s->reserved); i++) {
		size_t g;
		int m;

		if (gpuctl_devset_get(s->reserved, i, &g, &m) < 0 ||
		    gpuctl_devset_contains(s->own, g, m))
			continue; /* ours: no waiter can have it before we let go */
		r = gpuctl_devset_add(s->leased, g, m);
		if (r < 0 && r != -EEXIST)
			return ctx_error(ctx, -ENOMEM, "out of memory");
	}
	s->sreq.leased = s->leased;
	return 0;
}

/* The devices running processes of no lease, unless the request ignores them. */
static int sal_foreign(struct gpuctl_ctx *ctx, struct sal *s)
{
	int r;

	if (s->lr.ignore_foreign)
		return 0;
	r = lease_foreign(ctx, s->dir, s->snap, &s->lr, &s->foreign); /* select.lock is ours */
	if (r < 0)
		return r;
	if (lease_devset_merge(s->foreign, s->sreq.foreign) < 0)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	s->sreq.foreign = s->foreign;
	return 0;
}

/* ---- 3. select ---- */

/* The selection's -ENOSPC line, with what the probes and the queue add to it: -ENOENT when a
 * missing lock file was among the causes. */
static int sal_no_space(struct gpuctl_ctx *ctx, const struct sal *s)
{
	char msg[CTX_ERRMSG_MAX], bad[2 * REASON_MAX + 96] = "", wait[96] = "";
	char size_text[32];

	strscpy(msg, sizeof(msg), gpuctl_errmsg(ctx));
	if (s->n_bad > 0)
		(void)snprintf(bad, sizeof(bad), " (%zu unusable: %s)", s->n_bad, s->first_reason);
	if (s->n_full > 0) {
		size_t l = strlen(bad);

		(void)snprintf(bad + l, sizeof(bad) - l, " (no room to share %s: %s%s)",
		               size_exact_text(s->lr.share_mem, size_text, sizeof(size_text)),
		               s->full, s->n_full > 8 ? ",..." : "");
	}
	if (s->ahead > 0)
		(void)snprintf(wait, sizeof(wait),
		               " (%zu waiter(s) ahead, who could use %zu device(s))", s->ahead,
		               gpuctl_devset_count(s->reserved));
	return ctx_error(ctx, s->uninit ? -ENOENT : -ENOSPC, "%s%s%s", msg, bad, wait);
}

static int sal_select(struct gpuctl_ctx *ctx, struct sal *s, struct gpuctl_selection **ret_sel)
{
	int r = gpuctl_select(ctx, s->snap, &s->sreq, ret_sel);

	if (r == -ENOSPC && s->ticket)
		lease_ticket_failed(s->ticket, s->fp,
		                    s->free_locks.oom ? NULL : TAKE_PTR(s->free_locks.p));
	if (r == -ENOSPC && (s->n_bad > 0 || s->ahead > 0 || s->n_full > 0))
		return sal_no_space(ctx, s);
	if (r < 0)
		return r;
	if (s->n_bad > 0)
		ctx_log(ctx, GPUCTL_LOG_WARNING, "leases: %zu device(s) not usable: %s", s->n_bad,
		        s->first_reason);
	return 0;
}

/* ---- 4. lock the chosen devices ---- */

/* Locks the i-th chosen device into lease->devs[lease->n] (counted in lease->n once it holds a
 * descriptor, so that freeing the lease closes it). */
static int sal_lock_one(struct gpuctl_ctx *ctx, const struct sal *s,
                        const struct gpuctl_devset *chosen, size_t i, struct gpuctl_lease *lease)
{
	struct lease_dev *d = &lease->devs[lease->n];
	char reason[REASON_MAX] = "";
	const char *u;
	int st, r;

	d->fd = -1;
	if (gpuctl_devset_get(chosen, i, &d->gpu, &d->mig) < 0)
		return ctx_error(ctx, -EIO, "selection out of range");
	u = lease_dev_uuid(s->snap, d->gpu, d->mig);
	if (gpuctl_devset_contains(s->own, d->gpu, d->mig)) {
		/* kept: the same locked description, never let go */
		d->fd = fcntl(kept_fd(s->dir, s->keep, u, lease->share_mem), F_DUPFD_CLOEXEC, 3);
		if (d->fd < 0)
			return ctx_error(ctx, -errno, "cannot keep %s: %s", u, strerror(errno));
		d->kept = true;
		lease->n++;
		strscpy(d->uuid, sizeof(d->uuid), u);
		return 0;
	}
	st = lease_lock_open(s->dir, u, true, &d->fd, NULL, reason, sizeof(reason));
	if (st != GPUCTL_LEASE_FREE || d->fd < 0)
		return ctx_error(ctx, -EBUSY, "cannot lease %s: %s", u ? u : "?",
		                 *reason ? reason : "no lock file");
	lease->n++;
	strscpy(d->uuid, sizeof(d->uuid), u);
	if (flock(d->fd, (s->share ? LOCK_SH : LOCK_EX) | LOCK_NB) < 0)
		return ctx_error(ctx, -EBUSY, "cannot lease %s: locks/%s.lock: %s", u, u,
		                 errno == EWOULDBLOCK ? "held by another process"
		                                      : strerror(errno));
	if (s->share) {
		r = lease_share_take(d->fd, s->need,
		                     lease_share_capacity(s->snap, d->gpu, d->mig, &s->lr));
		if (r < 0)
			return ctx_error(ctx, -EBUSY, "cannot share %s: locks/%s.lock: %s", u, u,
			                 r == -ENOSPC ? "no room left" : strerror(-r));
	}
	return 0;
}

/* A new lease of the chosen devices, in *lease (NULL before): the caller's to free, after a
 * failure too, once it has let go of select.lock. */
static int sal_lock(struct gpuctl_ctx *ctx, const struct sal *s, const struct gpuctl_devset *chosen,
                    struct gpuctl_lease **lease)
{
	struct gpuctl_lease *l = calloc(1, sizeof(*l));

	*lease = l;
	if (!l)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	l->user_fd = -1;
	l->share_mem = s->share ? s->lr.share_mem : 0;
	l->tag = (uint32_t)getpid();
	l->devs = calloc(gpuctl_devset_count(chosen) + 1, sizeof(*l->devs));
	l->command = strdup_or_null(s->lr.command);
	l->label = strdup_or_null(s->lr.label);
	l->dir_path = strdup(s->dir->path);
	if (!l->devs || (s->lr.command && !l->command) || (s->lr.label && !l->label) ||
	    !l->dir_path)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	for (size_t i = 0; i < gpuctl_devset_count(chosen); i++) {
		int r = sal_lock_one(ctx, s, chosen, i, l);

		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- 5. owner records ---- */

/* A lease without one is refused (the decision above). */
static int sal_record(struct gpuctl_ctx *ctx, const struct sal *s, struct gpuctl_lease *lease)
{
	int r = lease_user_dir_open(ctx, s->dir, true, &lease->user_fd);

	if (r == -ENOMEM)
		return ctx_error(ctx, r, "out of memory");
	if (r == -ENOENT)
		return ctx_error(ctx, -EIO,
		                 "lease directory '%s': cannot write the lease record: no owners/ "
		                 "(run `sudo gpuctl lease init`)",
		                 s->dir->path);
	if (r < 0)
		return ctx_error_prefix(ctx, -EIO,
		                        "lease directory '%s': cannot write the lease record",
		                        s->dir->path);
	if (s->share)
		lease_records_prune_shared(lease->user_fd);
	r = lease_records_write(ctx, lease, getpid(), 0);
	if (r < 0) {
		lease_records_remove(lease); /* none may name a live pid for a lock it never held */
		return r; /* closing the descriptors (lease's cleanup) lets go of the locks */
	}
	return 0;
}

/* ---- the steps in order ---- */

/* Select-and-lease; with ticket, as that waiter (only older waiters are ahead), else as the
 * youngest (every live waiter is ahead). The devices keep (the caller's current lease, or NULL)
 * holds count as free to the caller: waiters do not reserve them, and chosen again they are
 * kept through a duplicate of keep's descriptor, so they are never unlocked in between (a
 * failover's replacement, docs/leases.md "Failover"). */
int lease_select_and_lease(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                           const struct gpuctl_snapshot *snap,
                           const struct gpuctl_select_request *req,
                           const struct gpuctl_lease_request *lreq,
                           struct gpuctl_wait_ticket *ticket, const struct gpuctl_lease *keep,
                           const struct lease_gate *gate, struct gpuctl_selection **ret_sel,
                           struct gpuctl_lease **ret_lease)
{
	/* declared so that select.lock (sfd) is let go of first, then the lease's locks */
	_cleanup_(sal_done) struct sal s = {.dir = dir,
	                                    .snap = snap,
	                                    .ticket = ticket,
	                                    .keep = keep,
	                                    .gate = gate,
	                                    .ctx = ctx,
	                                    .free_locks = LEASE_SBUF_INIT};
	_cleanup_(gpuctl_selection_freep) struct gpuctl_selection *sel = NULL;
	_cleanup_(gpuctl_lease_freep) struct gpuctl_lease *lease = NULL;
	_cleanup_close_ int sfd = -1;
	ino_t sino = 0;
	int r;

	if (!dir || !snap || !ret_sel || !ret_lease || select_request_copy(req, &s.sreq) < 0)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	lease_request_copy(&s.lr, lreq);
	s.share = s.lr.share_mem > 0;
	s.need = s.lr.share_mem / SHARE_UNIT + (s.lr.share_mem % SHARE_UNIT != 0);
	if (s.share && s.sreq.share_mem < s.lr.share_mem)
		s.sreq.share_mem = s.lr.share_mem; /* what the job declared must be free now, too */

	/* 1. select.lock, blocking (held for milliseconds) */
	r = lease_select_lock_take(ctx, dir, &sfd, &sino);
	if (r < 0)
		return r;
	if (ticket)
		s.fp = lease_queue_fingerprint(dir,
		                               sino); /* before the probes: what this try saw */
	lease_locks_view_read(dir, &s.view); /* probes that open no lock file: no waiter wakes */

	/* 2. probe every device; 2b. older waiters' devices, and foreign processes' */
	r = sal_probe(ctx, &s);
	if (r >= 0)
		r = sal_gate(ctx, &s);
	if (r >= 0)
		r = sal_reserve(ctx, &s);
	if (r >= 0)
		r = sal_foreign(ctx, &s);
	/* 3. select */
	if (r >= 0)
		r = sal_select(ctx, &s, &sel);
	/* 4. lock the chosen devices */
	if (r >= 0)
		r = sal_lock(ctx, &s, gpuctl_selection_devices(sel), &lease);
	/* 5. owner records */
	if (r >= 0)
		r = sal_record(ctx, &s, lease);
	if (r < 0)
		return r;

	/* 6. a waiter leaves the queue while select.lock still orders everyone */
	if (ticket)
		lease_ticket_leave(ticket);

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
	return lease_select_and_lease(ctx, dir, snap, req, lreq, NULL, NULL, NULL, ret_sel,
	                              ret_lease);
}

int gpuctl_select_and_lease_queued(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                                   const struct gpuctl_snapshot *snap,
                                   const struct gpuctl_select_request *req,
                                   const struct gpuctl_lease_request *lreq,
                                   struct gpuctl_wait_ticket *ticket,
                                   struct gpuctl_selection **ret_sel,
                                   struct gpuctl_lease **ret_lease)
{
	if (!lease_ticket_queued(ticket))
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	return lease_select_and_lease(ctx, dir, snap, req, lreq, ticket, NULL, NULL, ret_sel,
	                              ret_lease);
}
