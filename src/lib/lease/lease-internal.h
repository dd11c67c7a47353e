/* SPDX-License-Identifier: MIT */
/*
 * lease-internal.h: what the lease files of src/lib share, and the parsers of other users' files
 * that fuzz/fuzz-lease.c drives. Not part of the public API (and not exported from
 * libgpuctl.so: the version script keeps only gpuctl_*); every function declared here is named
 * lease_*, so that the static library cannot collide with a user's symbol.
 *
 * The lease files, one job each, in the order they build on each other (docs/ARCHITECTURE.md):
 *   lease-share.c    the memory shared leases declare: OFD byte-range locks on a lock file
 *   lease-proc.c     the /proc facts leases rest on: processes' start, parent and owner, and
 *                    who holds a flock (/proc/locks, /proc/PID/fdinfo)
 *   lease-dir.c      the lock store: the lease directory, DIR/config, lock files, the probe of
 *                    a device's state, select.lock
 *   lease-record.c   owner records (written, read strictly)
 *   lease-queue.c    the wait queue: tickets, queue scans, the fingerprint, inotify
 *   lease-foreign.c  foreign processes: compute processes that belong to no lease
 *   lease-holder.c   which devices a process holds leases on, by its descriptors alone
 *   lease-notice.c   eviction notices: what root tells a holder whose lease it took back
 *   lease-evict.c    root takes leases back (release --force, the agent's idle actions)
 *   lease-select.c   select-and-lease: probe, reserve, select, lock, record, under select.lock
 *   lease.c          the leases once taken: the lease handle, the list, release
 */
#ifndef GPUCTL_LEASE_INTERNAL_H
#define GPUCTL_LEASE_INTERNAL_H

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "gpuctl/gpuctl.h"
#include "parse.h"
#include "sbuf.h"
#include "snapshot-internal.h"
#include "util.h"

/* ---- small helpers of several lease files (inline: no symbol) ---- */

/* The UUID of device (g, mig) of snap (mig -1: the whole GPU), NULL when unknown. */
static inline const char *lease_dev_uuid(const struct gpuctl_snapshot *snap, size_t g, int mig)
{
	return mig < 0 ? gpuctl_gpu_str(&snap->gpus[g], GPUCTL_F_UUID)
	               : snap->gpus[g].migs[mig].uuid;
}

/* Adds the devices of src (NULL: none) to dst: 0, or gpuctl_devset_add's error (-ENOMEM). */
static inline int lease_devset_merge(struct gpuctl_devset *dst, const struct gpuctl_devset *src)
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

/* The lease request's fields as this library knows them (a caller built against an older header
 * passes a smaller struct: the rest keep their defaults). */
static inline void lease_request_copy(struct gpuctl_lease_request *dst,
                                      const struct gpuctl_lease_request *src)
{
	*dst = (struct gpuctl_lease_request)GPUCTL_LEASE_REQUEST_INIT;
	if (src)
		memcpy(dst, src, src->struct_size < sizeof(*dst) ? src->struct_size : sizeof(*dst));
	dst->struct_size = sizeof(*dst);
}

/* ---- lease-share.c: the memory shared leases declare ---- */

#define SHARE_UNIT (1024u * 1024u) /* bytes per locked byte of a shared lease */

/* The units (SHARE_UNIT bytes each) that the shared leases on fd's lock file declare, counted
 * from the kernel's OFD locks: 0, or -errno (-E2BIG: too many ranges to follow). */
int lease_share_used(int fd, uint64_t *ret_used);

/* Locks need units of the free space below cap (units) on fd, lowest first: 0, -ENOSPC when
 * there is not that much, or -errno. Under select.lock: nothing else places ranges meanwhile. */
int lease_share_take(int fd, uint64_t need, uint64_t cap);

/* The units of device (g, mig) of snap that shared leases may declare: its memory less lr's
 * margin (0 when its memory is unknown: nothing can be shared on it). */
uint64_t lease_share_capacity(const struct gpuctl_snapshot *snap, size_t g, int mig,
                              const struct gpuctl_lease_request *lr);

/* ---- lease-proc.c: the /proc facts leases rest on ---- */

#define LOCKS_LINE_MAX 512 /* a /proc/locks line */

/* The next blank-separated token of *s (NUL-terminated in place), NULL at the end. */
char *lease_next_tok(char **s);

/* /proc/<pid>/stat: parent and start time (field 22, clock ticks since boot). */
int lease_proc_stat(pid_t pid, pid_t *ret_ppid, uint64_t *ret_start);

/* Whether pid lives, started at start_ticks and belongs to uid. */
bool lease_proc_matches(uint32_t pid, uint64_t start_ticks, uid_t uid);

/* Clock ticks since boot as seconds since the epoch (0 when the boot time is unknown). */
uint64_t lease_ticks_to_epoch(uint64_t ticks);

/* One held flock of /proc/locks ("1: FLOCK  ADVISORY  WRITE 4242 08:01:1234 0 EOF"). */
struct lease_flock {
	bool write;   /* WRITE (exclusive), else READ (shared) */
	uint64_t pid; /* who took it; 0 when the line has no pid (another pid namespace) */
	unsigned maj, min;
	uint64_t ino;
};
/* Parses one line of /proc/locks (NUL-terminated; changed in place): true for a held flock,
 * with its fields in *ret; false for anything else (a blocked request "->", POSIX and OFD
 * locks, a malformed line). The one parser of /proc/locks (fuzz/fuzz-lease.c). */
bool lease_flock_parse(char *line, struct lease_flock *ret);

/* The pid that took a flock on (dev, ino) per /proc/locks (exclusive ones only, unless
 * any_kind); 0 if unknown. Pids of lines that match the inode but not the device count only
 * when no line matches both (overlay file systems report another device). */
pid_t lease_lock_holder(dev_t dev, ino_t ino, bool any_kind);
/* Whether pid a or b (each ignored when <= 0) took a flock of either kind on (dev, ino) per
 * /proc/locks: 1 yes, 0 no (the lines of that file name other pids), -1 cannot tell (no line
 * of it names a pid: another pid namespace, or /proc/locks unreadable). */
int lease_lock_taken_by(dev_t dev, ino_t ino, pid_t a, pid_t b);

/* The flock of one descriptor, from its /proc/PID/fdinfo/N text (NUL-terminated, changed in
 * place): true with it in *ret when a "lock:" line holds one (lease_flock_parse's fields). A
 * description has at most one flock (the kernel shows only the flock of that description); its
 * other lock lines are POSIX and OFD locks (a shared lease's declared memory), which the line
 * parser refuses. fuzz/fuzz-lease.c drives it. */
bool lease_fdinfo_flock(char *text, struct lease_flock *ret);

/* A lock file, as stat(2) names it. */
struct lease_lock_id {
	dev_t dev;
	ino_t ino;
};

/* Which of the n lock files ids[] process pid holds a flock on through a descriptor of its own
 * (an open file description with the flock on it, per /proc/PID/fdinfo: a descriptor inherited
 * from whoever took the lock counts, one merely open on the file does not). holds[i] (when not
 * NULL) is set for each, takers[i] (when not NULL) to the pid that took that flock (0 when the
 * kernel does not say: another pid namespace). Returns how many such descriptors; 0 also when
 * the caller may not read pid's descriptors (another user's process, unless root). With both
 * arrays NULL it stops at the first. Opens only /proc files: the lock files' own file system is
 * touched only to stat a descriptor whose flock is on one of ids' inodes. */
size_t lease_proc_holds(pid_t pid, const struct lease_lock_id *ids, size_t n, bool *holds,
                        pid_t *takers);

/* ---- lease-dir.c: the lock store (DIR, its config file, lock files, probes) ---- */

#define UUID_MAX   96  /* characters of a GPU-/MIG- UUID we accept */
#define REASON_MAX 160 /* an UNUSABLE/UNINITIALISED reason */

struct gpuctl_lease_dir {
	char *path;    /* as opened (for messages), owned */
	int fd;        /* DIR, O_DIRECTORY */
	int locks_fd;  /* DIR/locks, -1 when missing and not ours to create */
	int owners_fd; /* DIR/owners, -1 when missing (no records then) */
	int queue_fd;  /* DIR/queue, -1 when missing (no waiters then) */
	uid_t owner;   /* DIR's owner: root (shared) or the caller (personal) */
	bool ours;     /* owner == euid: we create lock files */
};

/* The lock file of device uuid in dir, when it is a usable one (the checks of
 * lease_lock_open: a regular file of the directory's owner with one link), by fstatat: no lock
 * file is opened, so no close wakes a waiter (docs/leases.md "Wake-ups"). */
bool lease_lock_id(const struct gpuctl_lease_dir *dir, const char *uuid, struct lease_lock_id *ret);

/* A GPU-/MIG- UUID made of hex digits and dashes only: never a path. */
bool lease_uuid_ok(const char *u);

/* Checks an opened directory entry: type, owner (want_uid, or root/euid when (uid_t)-1), and
 * no group/other write (unless sticky_ok and the sticky bit is set). */
int lease_check_fd(struct gpuctl_ctx *ctx, int fd, const char *path, bool want_dir, uid_t want_uid,
                   bool sticky_ok, struct stat *ret_st);

/* Opens name under dfd (a directory, or a regular file) with O_NOFOLLOW; creates it with mode
 * when create (fchmod after, umask-independent). -ENOENT when missing and not created. */
int lease_open_at(struct gpuctl_ctx *ctx, int dfd, const char *name, const char *path, bool dir,
                  bool create, mode_t mode, int *ret_fd);

/* Opens dfd's directory afresh for reading (own offset) as a DIR. */
DIR *lease_dir_reopen(int dfd);

/* Opens locks/<uuid>.lock (created when create and the directory is ours) and checks it.
 * Returns FREE with *ret_fd >= 0 (usable; not locked yet), FREE with *ret_fd == -1 (missing in
 * our directory: nobody can hold it), UNUSABLE or UNINITIALISED with the reason; -ENOMEM. */
int lease_lock_open(const struct gpuctl_lease_dir *dir, const char *uuid, bool create, int *ret_fd,
                    struct stat *ret_st, char *reason, size_t rsize);

/* Probes a device: a non-blocking exclusive flock on a fresh description (dropped at once);
 * when that fails, a shared one tells SHARED from HELD. For SHARED, *ret_used (when asked)
 * gets the units its shared leases declare (UINT64_MAX when they cannot be counted). */
int lease_probe(const struct gpuctl_lease_dir *dir, const char *uuid, bool create,
                struct stat *ret_st, uint64_t *ret_used, char *reason, size_t rsize);

/* Whether name is a user's directory in owners/ or queue/: "<uid>" or "<uid>.<16 hex digits>"
 * (the second when another user took the first name; either counts only when owned by uid). */
bool lease_user_dir_name(const char *name, uint64_t *ret_uid);

/* Opens the caller's own directory in parent_fd (DIR/owners or DIR/queue, named parent in
 * messages), creating it (0755) when create: "<euid>" when that is a directory of the caller's
 * that others cannot write; else an existing or new "<euid>.<random hex>". -ENOENT when there
 * is none and create is false. */
int lease_own_dir_open(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir, int parent_fd,
                       const char *parent, bool create, int *ret_fd);

/* How long select.lock is waited for (docs/leases.md "Bounds"), unless the context says
 * otherwise (gpuctl_ctx_set_lock_wait) or gpuctl_alloc waits in line (its deadline). */
#define LEASE_LOCK_WAIT_MS 10000 /* select-and-lease, wait tickets */
#define LEASE_LOCK_READ_MS 1000  /* readers: lists, foreign processes, release */

/* ---- lease-select-lock.c: DIR/select.lock ---- */

/* Opens select.lock and takes it exclusively, waiting as the context allows: -EAGAIN (the
 * message names the holder: pid, user, how long), -ECANCELED (the wait's cancel descriptor),
 * -EINTR (a signal). */
int lease_select_lock_take(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir, int *ret_fd,
                           ino_t *ret_ino);

/* A shared lock on select.lock for readers that probe lock files (list, foreign, ps): probes
 * take flocks themselves, and one taken while a select-and-lease runs could make it see a free
 * device as leased. *ret_fd: the descriptor to close, or -1 when select.lock is missing or
 * unsafe (then probe without it: a reader's result is a moment's view anyway). Errors as
 * lease_select_lock_take's, after at most LEASE_LOCK_READ_MS. */
int lease_select_lock_shared(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir,
                             int *ret_fd);

/* The flocks of the lease directory's file system, read once from /proc/locks, so that probes
 * of held devices need not open lock files: an opening probe's close is an inotify event every
 * waiter wakes up on (docs/leases.md "Wake-ups"), and a reader probing every 0.1 s (the
 * exporter) would wake them all each time. Positive evidence only: a lock that is listed was
 * held, but a held lock can be missing: /proc/locks is read a page at a time and a release
 * between two reads shifts the entries after it; the kernel leaves out locks whose taker is
 * not visible in the reader's pid namespace, or has exited while a child that inherited the
 * descriptor keeps the lock (a SIGKILLed gpuctl's job); on overlay the device numbers differ.
 * A device it does not list is probed by opening its lock file. */
#define LOCKS_WRITE 1u /* an exclusive flock */
#define LOCKS_READ  2u /* a shared flock */
struct lease_locks_view {
	bool read;           /* /proc/locks was read */
	dev_t dev;           /* the lock files' file system */
	uint64_t *ino;       /* inodes with flocks, owned; n entries */
	unsigned char *kind; /* LOCKS_WRITE | LOCKS_READ of each, owned */
	size_t n, cap;
};
/* Reads the view (never fails: an empty one when /proc/locks cannot be read). */
void lease_locks_view_read(const struct gpuctl_lease_dir *dir, struct lease_locks_view *v);
void lease_locks_view_done(struct lease_locks_view *v);
/* lease_probe (create false), answered without opening the lock file when v lists a flock on
 * it (fstatat only) and the caller does not ask a shared device's declared units; otherwise
 * lease_probe itself. */
int lease_probe_view(const struct gpuctl_lease_dir *dir, const struct lease_locks_view *v,
                     const char *uuid, struct stat *ret_st, uint64_t *ret_used, char *reason,
                     size_t rsize);

/* Whether a probed state means some lease holds the device. */
static inline bool lease_held(int state)
{
	return state == GPUCTL_LEASE_HELD || state == GPUCTL_LEASE_SHARED;
}

/* ---- lease-record.c: owner records ---- */

/* An owner record as read back (strings owned). */
struct record {
	uid_t uid;                /* from the file system: owners/<uid>/ */
	char uuid[UUID_MAX + 1];  /* the device, from the file name */
	uint32_t pid;             /* holder */
	uint64_t pid_start_ticks; /* holder's start, clock ticks since boot */
	uint32_t job_pid;         /* job, 0 if none */
	uint64_t job_start_ticks; /* job's start, ticks since boot */
	uint64_t start_time;      /* holder's start, seconds since the epoch */
	uint64_t created;         /* when the record was written (the lease taken), 0: unknown */
	char *user;               /* user name, or NULL */
	char *command;            /* command line, or NULL */
	char *label;              /* label, or NULL */
	uint64_t share_mem;       /* bytes a shared lease declared; 0: exclusive */
	bool shared;              /* a shared lease's record (<UUID>@<tag>.json) */
	bool pid_alive;           /* pid is alive with that start time and owner */
	bool job_alive;           /* job_pid likewise */
};

/* A text being built (an owner record, a ticket): an sbuf (sbuf.h) bounded to 64 KiB, four
 * times the longest record a reader accepts (lease-record.c RECORD_MAX); past it, b.oom. */
#define LEASE_TEXT_MAX  65536
#define LEASE_SBUF_INIT SBUF_INIT_MAX(LEASE_TEXT_MAX)

/* A record made from /proc for a lock file (st) held by no counting record (its holder and
 * job exited, a grandchild that inherited the descriptor keeps the lease): the first process
 * with a descriptor of that file (its uid, user, pid, start, comm as the command). Only
 * processes whose /proc/PID/fd the caller may read are seen. -ENOENT when none. */
int lease_record_from_fds(const struct stat *st, struct record *ret);

/* Opens (creating when create) owners/<euid>/, checked: a real directory of euid, 0755. */
int lease_user_dir_open(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir, bool create,
                        int *ret_fd);

/* Writes the records of every device of lease naming pid/job_pid. A record that cannot be
 * written is -EIO (-ENOMEM for memory), the message naming the lease directory and the cause
 * ("lease directory 'DIR': cannot write the lease record: No space left on device"): -EIO,
 * not the write's own errno, since -ENOSPC and -EBUSY mean "no device now" to the callers. */
int lease_records_write(struct gpuctl_ctx *ctx, struct gpuctl_lease *lease, pid_t pid,
                        pid_t job_pid);

/* Removes the records of lease's devices that it does not keep from another lease (the devices
 * whose lock it took itself): what a select-and-lease that failed after writing some leaves. */
void lease_records_remove(const struct gpuctl_lease *lease);

/* Frees r's strings (r itself stays); lease_records_free frees n records and the array. */
void lease_record_clear(struct record *r);
void lease_records_free(struct record *r, size_t n);

/* The records that may count: readable, from trusted owners/<uid>/ directories, their holder or
 * job alive (only_uid: that user only, (uid_t)-1 all; only_uuid: that device only, NULL all).
 * Unreadable ones are logged at debug level and skipped. */
int lease_records_load(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir, uid_t only_uid,
                       const char *only_uuid, struct record **ret, size_t *ret_n);

/* Removes uid's records of device uuid that name holder pid started at pid_start_ticks (a lease
 * taken back while its job runs on: its record must not make the job's processes a later lease's
 * of that device). Returns how many were removed. */
int lease_records_drop(const struct gpuctl_lease_dir *dir, uid_t uid, const char *uuid,
                       uint32_t pid, uint64_t pid_start_ticks);

/* Removes the caller's shared-lease records whose holder and job are both gone: each shared
 * lease has a record name of its own, so no later lease replaces them. */
void lease_records_prune_shared(int ufd);

/* Whether shared record v is a holder's of the SHARED device whose lock file is st: alive, and
 * its pid or job_pid took one of the read locks (the decision in lease-record.c). */
bool lease_share_holder(const struct record *v, const struct stat *st);
/* Picks the record of a HELD device (the decision in lease-record.c); -1 if none. */
ssize_t lease_record_pick(const struct record *v, size_t n, const char *uuid,
                          const struct stat *st);

/* ---- lease-queue.c: the wait queue ---- */

/* The lease state that decides a waiter's fate, as a number: the flocks of /proc/locks on the
 * lease directory's file system (but select.lock's, skip_ino) and the names in the queue.
 * Reading it opens no lock file, so it makes no inotify event. A /proc/locks that cannot be
 * read gives a new value every time; one that names another device (overlay file systems)
 * shows no lock change, and the waiter relies on queue changes and its fallback timeout. */
uint64_t lease_queue_fingerprint(const struct gpuctl_lease_dir *dir, ino_t skip_ino);

/* The devices that the live tickets older than ticket (all of them when ticket is NULL) could
 * use, merged into reserved; *ret_ahead counts those tickets. With locked (the caller holds
 * select.lock), removes dead tickets of ours; without it, only reads. */
struct lease_skip;
int lease_queue_reserved(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir,
                         const struct gpuctl_snapshot *snap, struct gpuctl_wait_ticket *ticket,
                         bool locked, const struct lease_skip *skip, struct gpuctl_devset *reserved,
                         size_t *ret_ahead);
/* Which older tickets reserve nothing (skip NULL: every one reserves): fn true for a waiter
 * (its user, pool name or NULL, count) that could not be served now whatever is free (over a
 * quota). */
struct lease_skip {
	bool (*fn)(void *ud, uid_t uid, const char *pool_name, unsigned count);
	void *ud;
};

/* Whether t is a ticket still in the queue (not NULL, not yet left). */
bool lease_ticket_queued(const struct gpuctl_wait_ticket *t);

/* Notes that a select-and-lease as t found nothing, having seen the state fingerprint fp:
 * gpuctl_wait_ticket_changed compares the state with it. free_locks (owned by t from now on;
 * NULL: none known) lists the lock files of the devices that try found free, each as
 * "UUID.lock" followed by a newline, the whole after a newline: their closes wake no one. */
void lease_ticket_failed(struct gpuctl_wait_ticket *t, uint64_t fp, char *free_locks);

/* Leaves the queue (removes and unlocks t's ticket) when t is still in it: a waiter that got
 * its lease does so while select.lock still orders everyone. */
void lease_ticket_leave(struct gpuctl_wait_ticket *t);

/* ---- lease-foreign.c: foreign processes ---- */

/* The devices of snap (a snapshot with processes; without, none) that compute processes of no
 * lease make busy by lr's thresholds, as a new set in *ret_set. The caller holds select.lock,
 * shared or exclusive (lease-dir.c). */
int lease_foreign(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                  const struct gpuctl_snapshot *snap, const struct gpuctl_lease_request *lr,
                  struct gpuctl_devset **ret_set);

/* ---- lease.c: the lease handle (lease-record.c writes its records) ---- */

/* One leased device. */
struct lease_dev {
	int fd;                  /* the locked description, O_CLOEXEC */
	size_t gpu;              /* snapshot index */
	int mig;                 /* MIG index, -1 for the whole GPU */
	bool kept;               /* fd duplicates the caller's current lease's (a failover) */
	char uuid[UUID_MAX + 1]; /* its UUID */
};

struct gpuctl_lease {
	struct lease_dev *devs; /* the leased devices, owned */
	size_t n;               /* entries in devs */
	uint64_t share_mem;     /* bytes declared per device; 0: exclusive */
	uint32_t tag;           /* a shared lease's record names: <UUID>@<tag>.json (creator pid) */
	int user_fd;            /* owners/<euid>/, -1 when records cannot be written */
	char *dir_path;         /* the lease directory as opened, for messages, owned */
	char *command;          /* for the records, owned, may be NULL */
	char *label;            /* for the records, owned, may be NULL */
};

/* ---- lease.c: release's steps, which eviction (lease-evict.c) shares ---- */

/* How long release waits for the holders it signalled to exit (they exit at once on SIGTERM;
 * the bound is against a holder stopped by a debugger or SIGSTOP). */
#define LEASE_RELEASE_WAIT_MS 10000

/* A holder that was sent SIGTERM. */
struct lease_signalled {
	pid_t pid;            /* 0 once it has exited */
	uint64_t start_ticks; /* its start, clock ticks since boot */
	uid_t uid;            /* its owner */
	int pidfd;            /* -1: no pidfd (an older kernel); polled through /proc */
};

/* SIGTERM to pid once it is checked to be uid's process started at start_ticks (through a pidfd
 * when the kernel has pidfd_open, checked after opening it, so the pid cannot be recycled in
 * between). On success *pidfd is a descriptor that becomes readable when the process exits, or
 * -1. -ESRCH when pid is not that process, or kill's -errno. */
int lease_signal_holder(pid_t pid, uint64_t start_ticks, uid_t uid, int *pidfd);

/* Waits until every holder of s has exited (its descriptors, and so its locks, are closed by
 * then), at most LEASE_RELEASE_WAIT_MS; returns how many still live. Closes the pidfds. */
size_t lease_wait_holders(struct lease_signalled *s, size_t n);

/* A device that is held now (HELD or SHARED). */
struct lease_held_dev {
	const char *uuid;        /* borrowed from the snapshot */
	size_t gpu;              /* snapshot index */
	int mig;                 /* MIG index, -1 for the whole GPU */
	bool exclusive;          /* HELD: one lock; else SHARED: one per shared lease */
	struct lease_lock_id id; /* its lock file */
};

/* The devices of set (NULL: every device of snap) held now, into *ret (owned; *ret_n of them):
 * 0 or -ENOMEM. */
int lease_held_devices(const struct gpuctl_lease_dir *dir, const struct gpuctl_snapshot *snap,
                       const struct gpuctl_devset *set, struct lease_held_dev **ret, size_t *ret_n);

/* ---- lease-notice.c: eviction notices ---- */

/* An empty notice list (not a mine list): 0 or -ENOMEM. */
int lease_notices_new(struct gpuctl_lease_notices **ret);
/* Appends a copy of n to list: 0 or -ENOMEM. */
int lease_notices_add(struct gpuctl_lease_notices *list, const struct gpuctl_lease_notice *n);
/* Writes notice n into DIR/notices/<n->uid>/ (creating DIR/notices and the user's directory,
 * which is handed to the user, mode 0700), atomically; as root. 0 or -errno (message set). */
int lease_notice_write(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir,
                       const struct gpuctl_lease_notice *n);
/* Removes notice n (unseen) of DIR/notices/<n->uid>/ when it is there. */
void lease_notice_remove(const struct gpuctl_lease_dir *dir, const struct gpuctl_lease_notice *n);

/* ---- lease-select.c: select-and-lease ---- */

struct lease_gate;

/* gpuctl_select_and_lease (ticket NULL) or gpuctl_select_and_lease_queued, with the devices of
 * keep (the caller's current lease, or NULL) counting as the caller's own: never reserved for
 * waiters, and kept (a duplicate of keep's descriptor) when chosen again. keep still holds
 * every device it held when this returns; freeing it then lets go of those not chosen again. */
int lease_select_and_lease(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                           const struct gpuctl_snapshot *snap,
                           const struct gpuctl_select_request *req,
                           const struct gpuctl_lease_request *lreq,
                           struct gpuctl_wait_ticket *ticket, const struct gpuctl_lease *keep,
                           const struct lease_gate *gate, struct gpuctl_selection **ret_sel,
                           struct gpuctl_lease **ret_lease);

/* A check select-and-lease makes under select.lock, before it selects (quotas:
 * src/lib/alloc-quota.c). check: 0 when user uid may take count more devices of pool pool_name
 * (NULL: the default pool) now that it holds held (every device of the snapshot whose lock is
 * held and of which uid has a live owner record); -EDQUOT when not (for self, the request's
 * own user, with the one-line message set; for an older waiter, self false, nothing said);
 * other -errno for errors. */
struct lease_gate {
	int (*check)(void *ud, struct gpuctl_ctx *ctx, uid_t uid, const char *pool_name,
	             unsigned count, const struct gpuctl_devset *held, bool self);
	void *ud;
};

/* The devices of snap that uid holds now (lease-select.c): a lock held (view, else a probe) and
 * a live owner record of uid naming the device, or no live record of anyone and a process of uid
 * holding the lock file (a holder that removed its record). -ENOMEM. */
int lease_held_by(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir,
                  const struct lease_locks_view *view, const struct gpuctl_snapshot *snap,
                  uid_t uid, struct gpuctl_devset **ret);
/* The same read now, outside select-and-lease: under a shared select.lock (as a lease list is
 * read), with a fresh view. -ENOMEM, and lease_select_lock_shared's errors. */
int lease_held_by_user(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir,
                       const struct gpuctl_snapshot *snap, uid_t uid, struct gpuctl_devset **ret);

/* ---- the parsers, for fuzz/fuzz-lease.c ---- */

/* Parses an owner record of len bytes as the record of device uuid (docs/leases.md): 0, or
 * -EINVAL for anything the reader refuses. */
int lease_record_parse_text(const char *text, size_t len, const char *uuid);

/* Parses a waiter's ticket of len bytes (docs/leases.md "Waiting"): true when it is well-formed
 * (a ticket with a NUL byte is not). */
bool lease_ticket_parse_text(const char *text, size_t len);

/* Parses an eviction notice of len bytes (docs/leases.md "Taking a lease back"): 0, -EINVAL for
 * anything the reader refuses, -ENOMEM. */
int lease_notice_parse_text(const char *text, size_t len);

/* Parses a record file name ("<UUID>.json", "<UUID>@<tag>.json"): true when it names a record;
 * then uuid (UUID_MAX + 1 = 97 bytes) gets the UUID and *ret_shared the kind. */
bool lease_record_name_parse(const char *name, char *uuid, bool *ret_shared);

#endif /* GPUCTL_LEASE_INTERNAL_H */
