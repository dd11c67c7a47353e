/* SPDX-License-Identifier: MIT */
/*
 * lease.h: leases: the lease directory, who holds what, processes of no lease, and select-and-
 * lease.
 *
 * Part of libgpuctl's public API (include <gpuctl/gpuctl.h>, which includes every header; the
 * rules that hold for all of them are there). Compiles on its own, as C and as C++
 * (tests/unit/test-headers.c).
 */
#ifndef GPUCTL_LEASE_H
#define GPUCTL_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decls.h"
#include "context.h"
#include "snapshot.h"
#include "devices.h"
#include "selection.h"

/* Exported: see gpuctl.h, "What these headers declare is libgpuctl's whole ABI". */
GPUCTL_BEGIN_DECLS

/* ---- Leases (src/lib/lease/lease*.c; docs/leases.md) ---- */

/* An opened and checked lease directory. Nothing in the handle changes once it is open, and
 * every call opens what it reads afresh, so threads may share one, each with its own context:
 * select-and-lease is one critical section between threads as between processes (each call
 * locks its own open file description of DIR/select.lock), so two threads never get one
 * device. Waiting (wait tickets), shared leases and gpuctl_lease_dir_set_config name their
 * files after the process id: do those from one thread of a process at a time. */
struct gpuctl_lease_dir;

/* Opens the lease directory: path, else $GPUCTL_LEASE_DIR, else /run/gpuctl; creates it when
 * missing and the caller may (root, or a directory of the caller's own). Checks ownership and
 * modes as docs/leases.md says. -EPERM when unsafe (message says why), -ENOENT when missing and
 * not ours to create (message names `sudo gpuctl lease init` and GPUCTL_LEASE_DIR). */
int gpuctl_lease_dir_open(struct gpuctl_ctx *ctx, const char *path,
                          struct gpuctl_lease_dir **ret_dir);
void gpuctl_lease_dir_free(struct gpuctl_lease_dir *dir);
const char *gpuctl_lease_dir_path(const struct gpuctl_lease_dir *dir);
/* The directory's owner: root (a shared directory) or the user (a personal one). */
uint32_t gpuctl_lease_dir_owner(const struct gpuctl_lease_dir *dir);
/* The configuration file a shared directory follows (docs/config.md "Trust"): the absolute path
 * in DIR/config (malloc'ed, caller frees), or NULL when it names none. -EPERM when DIR/config
 * is not a regular file of the directory's owner that only it may write, -EINVAL when it does
 * not hold one absolute path. */
int gpuctl_lease_dir_config(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir,
                            char **ret_path);
/* Writes DIR/config (atomically) naming path, or removes it for NULL. Only the directory's
 * owner may (-EPERM otherwise). */
int gpuctl_lease_dir_set_config(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                                const char *path);
/* Creates the missing lock files of every GPU and MIG device of snap. Only the directory's
 * owner may (-EPERM otherwise). Returns how many it created. */
int gpuctl_lease_dir_init(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                          const struct gpuctl_snapshot *snap);

enum gpuctl_lease_state {
	GPUCTL_LEASE_FREE,          /* no one holds it */
	GPUCTL_LEASE_HELD,          /* some process holds the lock */
	GPUCTL_LEASE_UNUSABLE,      /* its lock file is unsafe (symlink, wrong owner, ...) */
	GPUCTL_LEASE_UNINITIALISED, /* no lock file, and not ours to create */
	GPUCTL_LEASE_SHARED,        /* held by shared (--share) leases only */
};

/* What the holder wrote about itself (display only: the kernel lock decides). Library-owned,
 * read through the pointers the lease list hands out; grows at its end. */
struct gpuctl_lease_owner {
	uint32_t uid;          /* the record's owner (from the file system, not the record) */
	const char *user;      /* user name, or NULL */
	uint32_t pid;          /* the holder: gpuctl run's pid, or the --hold holder's */
	uint32_t job_pid;      /* the job gpuctl run started, 0 if none */
	uint64_t start_time;   /* holder's start, seconds since the epoch */
	const char *command;   /* the job's command line, or NULL */
	const char *label;     /* --label, or NULL */
	uint64_t share_mem;    /* bytes a shared lease declared (display only); 0: exclusive */
	uint64_t leased_since; /* when the lease was taken (its record written), seconds since
	                        * the epoch; 0: unknown. Not start_time: a holder may have waited
	                        * in line first */
};

/* The lease state of every device of snap (GPUs, then each GPU's MIG devices). Probes under a
 * shared lock on DIR/select.lock, so it never disturbs a select-and-lease. The list never
 * changes once made and outlives its context and lease directory. */
struct gpuctl_lease_list;
int gpuctl_lease_list(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                      const struct gpuctl_snapshot *snap, struct gpuctl_lease_list **ret_list);
void gpuctl_lease_list_free(struct gpuctl_lease_list *list);
size_t gpuctl_lease_list_count(const struct gpuctl_lease_list *list);
/* Entry i: its device, state, and (HELD with a trustworthy record) owner; *ret_owner NULL when
 * unknown. *ret_reason says why for UNUSABLE/UNINITIALISED, else NULL (owned by list). */
int gpuctl_lease_list_get(const struct gpuctl_lease_list *list, size_t i, size_t *ret_gpu,
                          int *ret_mig, enum gpuctl_lease_state *ret_state,
                          const struct gpuctl_lease_owner **ret_owner, const char **ret_reason);
/* A SHARED entry i: the bytes its shared leases declared in all (from the kernel's locks, not
 * from the records: docs/leases.md "Sharing"), and the holders whose records count
 * ((*ret_owners)[k], k < *ret_n; borrowed from list). 0 declared and no holders for an entry that
 * is not SHARED. */
int gpuctl_lease_list_shares(const struct gpuctl_lease_list *list, size_t i, uint64_t *ret_declared,
                             const struct gpuctl_lease_owner *const **ret_owners, size_t *ret_n);
/* Entry i's holders whose records count, whatever the kind of lease: a HELD entry's owner (none
 * when unknown), every holder of a SHARED entry (as gpuctl_lease_list_shares); none in any
 * other state. (*ret_owners)[k], k < *ret_n, borrowed from list. 0, or -EINVAL. */
int gpuctl_lease_list_holders(const struct gpuctl_lease_list *list, size_t i,
                              const struct gpuctl_lease_owner *const **ret_owners, size_t *ret_n);

/* Whether the lease of entry i of list (made from snap) is still the one it was read with: a
 * HELD device's lock file is still locked exclusively (a probe: an open and two flock), a
 * SHARED device's read locks still declare the same total (an open and a few fcntl). A lease
 * ends by dropping its lock, even when its holder is killed, and no file changes then; one that
 * starts writes an owner record, which a caller watching DIR/owners sees. False for an entry
 * in another state, or when it cannot tell. */
bool gpuctl_lease_list_current(const struct gpuctl_lease_list *list, size_t i,
                               struct gpuctl_lease_dir *dir, const struct gpuctl_snapshot *snap);

struct gpuctl_lease_request;
/* The bytes a new shared lease could still declare on entry i (a device of snap, the snapshot
 * the list was made from) under lreq's margin (NULL: the default 5 %): 0 for a device held
 * exclusively, unusable or uninitialised, or of unknown memory size. */
uint64_t gpuctl_lease_list_room(const struct gpuctl_lease_list *list, size_t i,
                                const struct gpuctl_snapshot *snap,
                                const struct gpuctl_lease_request *lreq);
/* The devices of snap that run compute processes belonging to no lease holder (nor to a
 * descendant of one) and that count as busy by lreq's thresholds (busy_memory,
 * busy_utilization; lreq NULL: any such process makes its device busy). dir NULL: there is no
 * lease directory (yet), so no process belongs to a lease. */
int gpuctl_lease_foreign(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                         const struct gpuctl_snapshot *snap,
                         const struct gpuctl_lease_request *lreq, struct gpuctl_devset **ret_set);

/* Every compute process of a snapshot, classified by the rule select-and-lease applies
 * (docs/leases.md, "Foreign processes"): a process belongs to a lease when it or an ancestor is
 * the holder or the job of a lease of its device (or of its whole GPU, or for a whole GPU of one
 * of its MIG devices); the others are foreign, and a device is busy when its foreign processes
 * pass lreq's thresholds (gpuctl_lease_foreign). For programs that show them (gpuctl ps). Never
 * changes once made; keeps no pointer to its context, lease directory or snapshot (it answers by
 * that snapshot's indices). */
struct gpuctl_foreign;
/* Classifies snap's processes (snap taken with GPUCTL_SNAP_PROCESSES, else -EINVAL) against the
 * leases of dir; dir NULL (no lease directory): every process is foreign. lreq: the busy
 * thresholds (NULL: any foreign process makes its device busy). -ENOMEM, lease-file errors. */
int gpuctl_foreign_scan(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                        const struct gpuctl_snapshot *snap, const struct gpuctl_lease_request *lreq,
                        struct gpuctl_foreign **ret);
/* prev's classification for snap, a later snapshot of the same processes (the same pids on
 * the same GPUs, in the same order; else -ESTALE, nothing made): each process stays foreign or
 * not, each device's use and busy verdict are judged again with snap's memory and utilisation
 * and lreq's thresholds. No lease file or /proc read: for a caller that knows the leases did
 * not change since prev was made (gpuctl top, which watches the lease directory). -ENOMEM. */
int gpuctl_foreign_rejudge(struct gpuctl_ctx *ctx, const struct gpuctl_foreign *prev,
                           const struct gpuctl_snapshot *snap,
                           const struct gpuctl_lease_request *lreq, struct gpuctl_foreign **ret);
void gpuctl_foreign_free(struct gpuctl_foreign *foreign);
/* Whether process k of GPU gpu (gpuctl_gpu_proc(gpuctl_snapshot_gpu(snap, gpu), k)) belongs to
 * no lease; false for indices out of range. */
bool gpuctl_foreign_proc(const struct gpuctl_foreign *foreign, size_t gpu, size_t k);
/* Whether device (gpu, mig; mig -1 for the whole GPU) runs foreign processes: a process on a
 * MIG device counts for that MIG device, one that matches none for the whole GPU. */
bool gpuctl_foreign_device(const struct gpuctl_foreign *foreign, size_t gpu, int mig);
/* Whether those processes make the device busy by the thresholds (the devices
 * gpuctl_lease_foreign returns). */
bool gpuctl_foreign_busy(const struct gpuctl_foreign *foreign, size_t gpu, int mig);

/* The devices of snap whose lease process pid holds now, by the kernel's word alone: a
 * descriptor of pid's own (its, or inherited from whoever took the lock) has the flock of the
 * device's lock file, and that file is still the device's (not replaced by a lease taken back).
 * Owner records are not read. *ret_set (owned; empty when none) on success; only the processes
 * whose descriptors the caller may read are seen (root: all). -EINVAL, -ENOMEM. For the node
 * agent's socket (docs/agent.md, "Enforcement: cgroup"). */
int gpuctl_lease_held_by(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                         const struct gpuctl_snapshot *snap, uint32_t pid,
                         struct gpuctl_devset **ret_set);

/* Held leases on a set of devices. A lease is its lock descriptors: it outlives the context,
 * the lease directory handle and the snapshot it was taken with, and the kernel holds it while
 * any of them is open, here or in a child that inherited them. gpuctl_lease_set_owner needs
 * it to itself; gpuctl_lease_fds only reads it. */
struct gpuctl_lease;

/* Who asks, for the owner records. */
struct gpuctl_lease_request {
	size_t struct_size;  /* sizeof(struct gpuctl_lease_request) */
	const char *command; /* the job's command line, for display */
	const char *label;   /* free text, for display */
	bool ignore_foreign; /* do not count foreign processes as busy */
	/* Fields below were added after the first release (struct_size tells). */
	uint64_t share_mem;       /* > 0: a shared lease declaring this many bytes on each device
	                           * (docs/leases.md "Sharing"); 0: exclusive */
	uint64_t share_margin;    /* memory kept undeclared on a shared device: bytes, or percent of
	                           * its total when share_margin_is_pct (default 5 %) */
	bool share_margin_is_pct; /* share_margin is a percentage */
	uint64_t busy_memory;     /* foreign processes make a device busy only when their memory
	                           * on it totals more than this (0, the default: any process) */
	int busy_utilization;     /* ... or when the device is more than this percent utilised
	                           * while they run on it; -1 (the default): not used */
};
#define GPUCTL_LEASE_REQUEST_INIT                                                                  \
	{                                                                                          \
		.struct_size = sizeof(struct gpuctl_lease_request), .share_margin = 5,             \
		.share_margin_is_pct = true, .busy_utilization = -1                                \
	}

/* Select-and-lease, atomically (docs/leases.md): under DIR/select.lock, excludes leased devices
 * (and foreign-busy ones unless lreq->ignore_foreign), selects with req, and locks the chosen
 * devices. On success *ret_sel is the selection and *ret_lease holds its locks; the owner
 * records name the calling process. Errors as gpuctl_select (-ENOSPC names "leased" devices),
 * -EPERM/-ENOENT for lease files as above, and -EIO when the owner records cannot be written
 * (a full file system: the message names the directory and the cause; nothing is held). */
int gpuctl_select_and_lease(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                            const struct gpuctl_snapshot *snap,
                            const struct gpuctl_select_request *req,
                            const struct gpuctl_lease_request *lreq,
                            struct gpuctl_selection **ret_sel, struct gpuctl_lease **ret_lease);
/* Releases the locks this process holds (holders that inherited them keep them). */
void gpuctl_lease_free(struct gpuctl_lease *lease);
/* The lock descriptors, for a child to inherit (close-on-exec until the caller clears that in
 * the child). Writes up to max; returns how many there are. */
size_t gpuctl_lease_fds(const struct gpuctl_lease *lease, int *fds, size_t max);
/* Rewrites the owner records (once the job's pid is known, or for a --hold holder): 0, or -EIO
 * when one cannot be written (a record not rewritten keeps what it said). */
int gpuctl_lease_set_owner(struct gpuctl_ctx *ctx, struct gpuctl_lease *lease, uint32_t pid,
                           uint32_t job_pid);
/* Ends the --hold holders of the calling user that hold any device of set (NULL: all of the
 * user's holders): those of the user's records without a job, and the user's processes holding
 * a device's lock that no record accounts for (found through /proc/PID/fdinfo: a hold whose
 * record is gone, a job left holding a lease after its run ended; docs/leases.md "Release").
 * SIGTERM after checking the pid's owner and start time, then waits until they have exited (at
 * most 10 s; a holder still running then is a logged warning), so their devices are free when it
 * returns. Returns how many processes were signalled; -EPERM if set names a device held by
 * another user's holder. */
int gpuctl_lease_release(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                         const struct gpuctl_snapshot *snap, const struct gpuctl_devset *set);
/* As gpuctl_lease_release, and *ret_freed (owned; written on success) the devices the ended
 * holders held that are free when it returns: those of set, and any others the same holders
 * held (a holder holds all its devices' locks, so ending it frees them all; known from the
 * caller's owner records, and for a holder without a record, its locks on devices of set).
 * -EINVAL for a NULL ret_freed. */
int gpuctl_lease_release_freed(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                               const struct gpuctl_snapshot *snap, const struct gpuctl_devset *set,
                               struct gpuctl_devset **ret_freed);

/* ---- Taking a lease back (src/lib/lease/lease-evict.c, lease-notice.c; docs/leases.md
 * "Taking a lease back") ---- */

/* What the holder of a lease that was taken back is told: one notice per holder and device,
 * written by root into DIR/notices/<uid>/ and shown once by the holder's next gpuctl command.
 * Library-owned, read through the pointers a notice list hands out; grows at its end. */
struct gpuctl_lease_notice {
	uint32_t uid;        /* the holder's user (the notice directory's, not the file's text) */
	const char *user;    /* its name then, or NULL */
	const char *device;  /* the device's UUID */
	int64_t index;       /* its GPU's NVML index then; -1: unknown */
	uint32_t pid;        /* the holder as its owner record names it (gpuctl run's pid, the
	                      * --hold holder's), or the process found holding the lock */
	uint64_t start_time; /* its start, seconds since the epoch (with pid: the ledger's key) */
	bool ended;          /* a --hold holder that was ended (SIGTERM); else the lease's lock
	                      * file was replaced and its processes run on */
	uint32_t by_uid;     /* who took it back */
	const char *by;      /* their name, or NULL */
	uint64_t when;       /* seconds since the epoch */
	const char *reason;  /* why, one line of text */
	bool seen;           /* shown to the holder already */
};

/* A list of notices; never changes once made. */
struct gpuctl_lease_notices;
size_t gpuctl_lease_notices_count(const struct gpuctl_lease_notices *list);
/* Notice i (< count), or NULL. */
const struct gpuctl_lease_notice *gpuctl_lease_notices_get(const struct gpuctl_lease_notices *list,
                                                           size_t i);
void gpuctl_lease_notices_free(struct gpuctl_lease_notices *list);

/* Takes back the leases of the devices of set (NULL: every device of snap) that are held now,
 * whoever holds them. Root only (-EPERM). A --hold holder (an owner record without a job) is
 * ended with SIGTERM after the checks release makes (owner, start time), and waited for as
 * release waits; every device still held then (a lease of `gpuctl run`, a holder no record
 * accounts for, a holder that did not exit) is taken back without ending anything: under
 * select.lock, its lock file is replaced by a new one (same owner and mode, renamed over it), so
 * the old holders keep a lock on a file that is no longer the device's and the device is free;
 * their processes run on and count as foreign. reason (required: 1 to 200 bytes, no control
 * character; else -EINVAL) goes into one notice per holder and device, written to
 * DIR/notices/<uid>/. *ret (when not NULL; owned by the caller) lists the notices written, in
 * device order. Errors: -EPERM, -EINVAL, -EAGAIN (select.lock held past its bound: nothing
 * replaced), -ENOMEM, -errno of a lock file that cannot be replaced. */
int gpuctl_lease_evict(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                       const struct gpuctl_snapshot *snap, const struct gpuctl_devset *set,
                       const char *reason, struct gpuctl_lease_notices **ret);

/* The notices of user uid in dir (UINT32_MAX: every user's), seen or not: for root, who may read
 * them all (the node agent tells a lease taken back from one released). Only files that parse
 * strictly, owned by root or dir's owner, in a notices/<uid>/ directory owned by uid. */
int gpuctl_lease_notices_read(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir,
                              uint32_t uid, struct gpuctl_lease_notices **ret);

/* The calling user's unseen notices in the lease directory at path (NULL: $GPUCTL_LEASE_DIR, else
 * /run/gpuctl), without opening or creating the lease directory: one open of the user's notice
 * directory, an empty list when there is none. Removes the user's seen notices older than a
 * day. ctx may be NULL. */
int gpuctl_lease_notices_mine(struct gpuctl_ctx *ctx, const char *path,
                              struct gpuctl_lease_notices **ret);

/* Marks notice i of a gpuctl_lease_notices_mine list seen (renamed, so it is shown once): 0, or
 * -errno (-EINVAL for a list of another kind). */
int gpuctl_lease_notices_mark_seen(struct gpuctl_ctx *ctx, const struct gpuctl_lease_notices *list,
                                   size_t i);

GPUCTL_END_DECLS

#endif /* GPUCTL_LEASE_H */
