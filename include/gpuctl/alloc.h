/* SPDX-License-Identifier: MIT */
/*
 * alloc.h: the allocation call, gpuctl_alloc(): everything `gpuctl select` and `gpuctl run` do
 * before they print or start a job.
 *
 * Part of libgpuctl's public API (include <gpuctl/gpuctl.h>, which includes every header; the
 * rules that hold for all of them are there). Compiles on its own, as C and as C++
 * (tests/unit/test-headers.c).
 */
#ifndef GPUCTL_ALLOC_H
#define GPUCTL_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decls.h"
#include "context.h"
#include "snapshot.h"
#include "devices.h"
#include "selection.h"
#include "lease.h"
#include "health.h"
#include "site.h"

/* Exported: see gpuctl.h, "What these headers declare is libgpuctl's whole ABI". */
GPUCTL_BEGIN_DECLS

/* ---- The allocation call (src/lib/alloc.c; docs/library.md) ---- */

/* What gpuctl_alloc() does with the devices it chooses. */
enum gpuctl_alloc_mode {
	/* Choose and take no lease; devices leased now (or whose lock file is unusable), and
	 * those a live waiter in the queue could use, are not chosen. What `gpuctl select`
	 * prints: someone may take them before they are used. */
	GPUCTL_ALLOC_CHOOSE = 0,
	/* Choose as GPUCTL_ALLOC_LEASE would (devices busy with processes of no lease are not
	 * chosen either, unless ignore_foreign) and take no lease: `gpuctl run --dry-run`. */
	GPUCTL_ALLOC_PREVIEW = 1,
	/* Choose and lease in one step under the lease directory's lock: `gpuctl run`,
	 * `gpuctl select --hold`. The lease is held while the gpuctl_alloc handle lives. */
	GPUCTL_ALLOC_LEASE = 2,
};

/* A request. Initialise with GPUCTL_ALLOC_REQUEST_INIT or gpuctl_alloc_request_init();
 * struct_size lets it grow without breaking callers built against an older header. Strings
 * are borrowed for the call only. */
struct gpuctl_alloc_request {
	size_t struct_size; /* sizeof(struct gpuctl_alloc_request) */
	int mode;           /* enum gpuctl_alloc_mode */
	unsigned count;     /* devices wanted; 0 is allowed (the empty set) */
	/* filters, as struct gpuctl_select_request says */
	uint64_t min_free_mem;   /* bytes free at least; 0: any */
	int max_util;            /* GPU utilisation at most, percent; -1: any */
	bool no_procs;           /* no compute process on the device */
	const char *only;        /* GPU ids to choose among; NULL: all */
	const char *exclude;     /* GPU ids never to choose; NULL: none */
	int numa_node;           /* only GPUs attached to this NUMA node; -1: any */
	const char *mig_profile; /* MIG devices of this profile; NULL: whole GPUs */
	const char *pool;        /* the pool to draw from (docs/config.md); NULL or "default": the
	                          * GPUs no pool lists */
	bool allow_unhealthy;    /* also GPUs whose health verdict is FAIL, WARN ones like any
	                          * other; without it FAIL GPUs are never chosen and WARN ones
	                          * only when the request cannot be met without them */
	bool ignore_outer;       /* choose among all GPUs, not within the allocation the process
	                          * runs in (gpuctl_outer_allocation) */
	bool ignore_foreign;     /* PREVIEW, LEASE: also devices running processes of no lease */
	/* the lease (LEASE; share_mem also shapes CHOOSE and PREVIEW) */
	uint64_t share_mem;  /* > 0: a shared lease declaring this many bytes on each device
	                      * (docs/leases.md "Sharing"); 0: exclusive */
	const char *label;   /* shown by gpuctl ps; NULL: none */
	const char *command; /* the job's command line for the owner record; NULL: none */
	/* waiting in line (LEASE only; docs/leases.md "Waiting") */
	bool wait;             /* wait for the devices, first come first served */
	double wait_timeout_s; /* at most this long; < 0: forever */
	int cancel_fd;         /* >= 0: the wait ends (-ECANCELED) as soon as poll(2) reports
	                        * anything on this descriptor (readable, hang-up, error); the
	                        * library only polls it, never reads it; -1: none */
	/* where (NULL: as gpuctl_site_open says) */
	const char *config_path;
	const char *lease_dir;
	/* GPU UUIDs never to choose, beyond exclude (a failover's failed GPUs); an entry that
	 * names no GPU of the machine is ignored */
	const char *const *avoid;
	size_t n_avoid;
	/* LEASE: the caller's current allocation, which the new one replaces (a failover; NULL:
	 * none). Its lease's devices count as the caller's own, free to this request and never
	 * reserved for waiters; those chosen again stay locked throughout (the new lease holds
	 * the same locked descriptions), so nobody can take them in between. It is not changed:
	 * it still holds all its devices when gpuctl_alloc returns, success or not; free it then
	 * to let go of those the new allocation did not keep. The same lease directory (else its
	 * devices count as leased, as anyone's). A failure's message begins "no replacement: ". */
	const struct gpuctl_alloc *replace;
	/* LEASE: how long the lease will be held, when the caller knows (select --hold SECONDS);
	 * 0: not known. The quotas (docs/config.md "Quotas") refuse one longer than the
	 * user's lease length quota, and count it in the GPU-hour quotas. */
	uint64_t lease_length_s;
};
#define GPUCTL_ALLOC_REQUEST_INIT                                                                  \
	{                                                                                          \
		.struct_size = sizeof(struct gpuctl_alloc_request), .count = 1, .max_util = -1,    \
		.numa_node = -1, .wait_timeout_s = -1, .cancel_fd = -1                             \
	}
/* Writes GPUCTL_ALLOC_REQUEST_INIT's values into the first struct_size bytes of *req (for
 * callers that cannot use the macro, such as bindings). -EINVAL when struct_size is smaller
 * than the first release's struct. */
int gpuctl_alloc_request_init(struct gpuctl_alloc_request *req, size_t struct_size);

/* An allocation: the snapshot the choice was made on, the chosen devices and, in LEASE mode,
 * the lease (held until gpuctl_alloc_free). Never changes once made; outlives its context.
 * Threads may call gpuctl_alloc at once, each with its own context; with wait or share_mem only
 * one thread of a process at a time (struct gpuctl_lease_dir, lease.h). */
struct gpuctl_alloc;

/* Does everything `gpuctl select`, `select --hold` and `run` do before they print or start a
 * job, in this order: opens the site (configuration and lease directory, checked together);
 * takes a snapshot of what the filters, the score and the health rules read; resolves the
 * outer allocation (unless ignore_outer); judges health (the live verdicts, the kernel log and
 * the health state file: FAIL never chosen, WARN only when needed, unless allow_unhealthy);
 * applies the pool (and whether the calling user may draw from it); excludes leased devices,
 * and in PREVIEW and LEASE mode devices busy with processes of no lease (unless
 * ignore_foreign); chooses the best set (gpuctl_select); and in LEASE mode locks it, waiting
 * in line when asked. On success *ret_alloc holds all of it.
 * Errors, each with a one-line message on ctx (gpuctl_errmsg) that names the input as this
 * struct names it (a field: "share_mem 4 GiB not free", "ignore_outer"; an environment
 * variable), never a program's option (docs/library.md, "Errors"):
 *   -EINVAL     a bad request: a malformed or unknown id, MIG profile or pool, a configuration
 *               that does not parse, an outer allocation that cannot be read, wait without
 *               LEASE mode, an unknown mode;
 *   -ENOSPC     too few devices qualify now (the message says which filter removed which
 *               devices), or, when waiting, can never qualify ("can never be satisfied: ...");
 *   -ETIMEDOUT  waited wait_timeout_s ("waited N s: " and why the devices are not free);
 *   -ECANCELED  cancel_fd became ready while waiting;  -EINTR  a signal interrupted the wait;
 *   -EACCES     the calling user may not draw from the pool;
 *   -EDQUOT     over a quota of the pool (docs/config.md "Quotas"): the message names the
 *               quota, what is used and when it frees; when waiting, only one that can
 *               never be met (more devices or a longer lease than the quota);
 *   -EAGAIN     the lease directory's select.lock was held by another process past the bound
 *               (gpuctl_ctx_set_lock_wait; when waiting, the deadline): the message names it;
 *   -ENODEV     no NVIDIA driver, or NVML cannot initialise;  -ENOEXEC  not an NVML library;
 *   -EPERM, -ENOENT  the lease directory or configuration (gpuctl_site_open);
 *   -EIO, -ENOMEM and other -errno.
 * Nothing stays leased after a failure. */
int gpuctl_alloc(struct gpuctl_ctx *ctx, const struct gpuctl_alloc_request *req,
                 struct gpuctl_alloc **ret_alloc);
/* Frees the allocation and releases this process's hold on its lease (processes that
 * inherited the lock descriptors, gpuctl_lease_fds, keep it). Accepts NULL. */
void gpuctl_alloc_free(struct gpuctl_alloc *alloc);
/* The snapshot the choice was made on (owned by alloc). */
const struct gpuctl_snapshot *gpuctl_alloc_snapshot(const struct gpuctl_alloc *alloc);
/* The selection (owned by alloc): scores and the runner-up, for explanations. */
const struct gpuctl_selection *gpuctl_alloc_selection(const struct gpuctl_alloc *alloc);
/* The chosen devices, best first (owned by alloc; indices into gpuctl_alloc_snapshot). */
const struct gpuctl_devset *gpuctl_alloc_devices(const struct gpuctl_alloc *alloc);
/* The CUDA_VISIBLE_DEVICES value for the chosen devices: their full UUIDs, comma-separated,
 * "" for none (owned by alloc). Set CUDA_DEVICE_ORDER=PCI_BUS_ID too, so indices the program
 * derives agree with CUDA's ordinals. */
const char *gpuctl_alloc_cuda_visible_devices(const struct gpuctl_alloc *alloc);
/* The lease (LEASE mode), else NULL. Owned by alloc: gpuctl_alloc_free releases it. */
struct gpuctl_lease *gpuctl_alloc_lease(const struct gpuctl_alloc *alloc);
/* The lease directory's path (as resolved), NULL when it did not exist and none was taken. */
const char *gpuctl_alloc_lease_dir_path(const struct gpuctl_alloc *alloc);
/* The health report the choice respected, NULL with allow_unhealthy (owned by alloc). */
const struct gpuctl_health_report *gpuctl_alloc_health(const struct gpuctl_alloc *alloc);

/* ---- Quotas: what a user uses of them (src/lib/alloc-quota.c; docs/config.md "Quotas") ---- */

/* One user's quotas in one pool and what counts against them now, counted as select-and-lease
 * counts them when it grants a lease (`gpuctl quota` shows it). Initialise with
 * GPUCTL_QUOTA_USE_INIT: the library writes only the first struct_size bytes. */
struct gpuctl_quota_use {
	size_t struct_size; /* sizeof(struct gpuctl_quota_use) */
	/* the user's limits in the pool (gpuctl_config_pool_quota's) */
	int64_t gpus_limit;            /* devices held at once; -1: no limit */
	uint64_t lease_length_limit_s; /* the longest lease, seconds; 0: no limit */
	double gpu_hours_day_limit;    /* GPU-hours per UTC day; < 0: no limit */
	double gpu_hours_week_limit;   /* GPU-hours per ISO week; < 0: no limit */
	/* what counts against them */
	uint64_t gpus_held;    /* devices of the pool the user holds now (a lock held and the
	                        * user's live owner record, or a process of the user holding it) */
	const char *ledger;    /* the ledger the GPU-hours are read from: the configuration's
	                        * `ledger`, else GPUCTL_LEDGER_PATH (never $GPUCTL_LEDGER); owned by
	                        * the site */
	int hours_error;       /* 0: the two below were read from the ledger; -ENOENT: there is no
	                        * ledger at that path; another -errno: it could not be read. Not 0:
	                        * the GPU-hour quotas are not enforced and the two below are 0 */
	double gpu_hours_day;  /* the user's GPU-hours on the pool's GPUs since day_start */
	double gpu_hours_week; /* the same since week_start */
	double day_start;      /* 00:00 UTC today, Unix seconds; the day's hours reset 86400 s on */
	double week_start;     /* Monday 00:00 UTC of this ISO week; they reset 7 days on */
};
#define GPUCTL_QUOTA_USE_INIT                                                                      \
	{                                                                                          \
		.struct_size = sizeof(struct gpuctl_quota_use), .gpus_limit = -1,                  \
		.gpu_hours_day_limit = -1, .gpu_hours_week_limit = -1                              \
	}

/* User uid's quotas in pool (NULL or "default": the default pool) of site, on the machine of
 * snap (take it with GPUCTL_SNAP_MIG: a MIG device counts as one), and what counts against them
 * now: the devices held (read under a shared select.lock, as gpuctl_lease_list reads) and the
 * GPU-hours of the current UTC day and ISO week. The same functions compute them for the quota
 * check of GPUCTL_ALLOC_LEASE. A ledger that cannot be read is no error (hours_error says so).
 * Errors (message on ctx): -ENOENT no such pool (the message lists the pools); -EINVAL a bad
 * argument, a configuration whose pools do not match snap; -EAGAIN select.lock held past the
 * bound (gpuctl_ctx_set_lock_wait); -ENOMEM; other -errno of the lease directory. */
int gpuctl_quota_use(struct gpuctl_ctx *ctx, const struct gpuctl_site *site,
                     const struct gpuctl_snapshot *snap, uint32_t uid, const char *pool,
                     struct gpuctl_quota_use *ret_use);

GPUCTL_END_DECLS

#endif /* GPUCTL_ALLOC_H */
