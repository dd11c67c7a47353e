/* SPDX-License-Identifier: MIT */
/*
 * wait.h: waiting in line for leases: tickets, the queued select-and-lease and the list of
 * waiters.
 *
 * Part of libgpuctl's public API (include <gpuctl/gpuctl.h>, which includes every header; the
 * rules that hold for all of them are there). Compiles on its own, as C and as C++
 * (tests/unit/test-headers.c).
 */
#ifndef GPUCTL_WAIT_H
#define GPUCTL_WAIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decls.h"
#include "context.h"
#include "snapshot.h"
#include "selection.h"
#include "lease.h"

/* Exported: see gpuctl.h, "What these headers declare is libgpuctl's whole ABI". */
GPUCTL_BEGIN_DECLS

/* ---- Waiting for leases (src/lib/lease/lease-queue.c; docs/leases.md "Waiting") ---- */

/* A waiter's ticket, DIR/queue/<uid>/<arrival>-<pid>, locked while it waits. Every
 * select-and-lease gives the devices older live waiters could use to them first; plain
 * gpuctl_select_and_lease is the youngest of all. One thread's at a time (one waiting thread
 * per process: struct gpuctl_lease_dir in lease.h says why); it holds its own descriptors, not its
 * context. */
struct gpuctl_wait_ticket;
/* Registers a ticket for req (under select.lock: its arrival is the highest present + 1) and
 * sets up the inotify watches. -ENOENT when DIR has no queue/ (message names `lease init`). */
int gpuctl_wait_ticket_new(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                           const struct gpuctl_snapshot *snap,
                           const struct gpuctl_select_request *req,
                           struct gpuctl_wait_ticket **ret_ticket);
/* Removes the ticket (if still there) and frees it. */
void gpuctl_wait_ticket_free(struct gpuctl_wait_ticket *ticket);
/* A descriptor that becomes readable when the leases or the queue may have changed (inotify);
 * -1 when none could be set up (then wake up on a timeout only). */
int gpuctl_wait_ticket_fd(const struct gpuctl_wait_ticket *ticket);
/* Consumes what made the descriptor readable and watches new queue/<uid>/ directories. */
void gpuctl_wait_ticket_drain(struct gpuctl_wait_ticket *ticket, struct gpuctl_lease_dir *dir);
/* 1 when the held locks or the queue differ from what the last failed try saw (or there was
 * none), 0 when not (another try would fail the same way), <0 on error. */
int gpuctl_wait_ticket_changed(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                               struct gpuctl_wait_ticket *ticket);
/* gpuctl_select_and_lease as the waiter of ticket: only older waiters go first. On success the
 * ticket is removed (under select.lock); -ENOSPC (message as gpuctl_select_and_lease's, plus
 * the waiters ahead) when the caller must wait on. */
int gpuctl_select_and_lease_queued(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                                   const struct gpuctl_snapshot *snap,
                                   const struct gpuctl_select_request *req,
                                   const struct gpuctl_lease_request *lreq,
                                   struct gpuctl_wait_ticket *ticket,
                                   struct gpuctl_selection **ret_sel,
                                   struct gpuctl_lease **ret_lease);

/* One live waiter, as its ticket says (display only: another user's ticket is not trusted).
 * Library-owned, read through gpuctl_wait_list_get(); grows at its end. */
struct gpuctl_wait_entry {
	uint64_t arrival; /* order of arrival (from the file name) */
	uint32_t pid;     /* the waiting gpuctl (from the file name) */
	uint32_t uid;     /* its user (the queue/<uid>/ directory) */
	const char *user; /* user name, NULL if unknown */
	int64_t since;    /* registered, seconds since the epoch (the file's ctime) */
	bool parsed;      /* the request below could be read; if not, only the above */
	unsigned count;   /* devices asked for */
	const char *mig_profile, *only, *exclude; /* NULL when not given */
	int numa_node;                            /* -1: any */
	uint64_t min_free_mem;                    /* 0: any */
	int max_util;                             /* -1: any */
	bool no_procs;
	const char *pool; /* the pool it draws from (docs/config.md), NULL when none was named */
};
/* Never changes once made; outlives its context and lease directory. */
struct gpuctl_wait_list;
/* The live tickets of DIR, first in line first. */
int gpuctl_wait_list(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                     struct gpuctl_wait_list **ret_list);
void gpuctl_wait_list_free(struct gpuctl_wait_list *list);
size_t gpuctl_wait_list_count(const struct gpuctl_wait_list *list);
const struct gpuctl_wait_entry *gpuctl_wait_list_get(const struct gpuctl_wait_list *list, size_t i);

GPUCTL_END_DECLS

#endif /* GPUCTL_WAIT_H */
