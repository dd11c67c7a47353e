/* SPDX-License-Identifier: MIT */
/*
 * config.h: the configuration file: settings and GPU pools.
 *
 * Part of libgpuctl's public API (include <gpuctl/gpuctl.h>, which includes every header; the
 * rules that hold for all of them are there). Compiles on its own, as C and as C++
 * (tests/unit/test-headers.c).
 */
#ifndef GPUCTL_CONFIG_H
#define GPUCTL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decls.h"
#include "context.h"
#include "snapshot.h"

/* Exported: see gpuctl.h, "What these headers declare is libgpuctl's whole ABI". */
GPUCTL_BEGIN_DECLS

/* ---- Configuration (src/lib/config/; docs/config.md) ---- */

#define GPUCTL_CONFIG_DEFAULT_PATH "/etc/gpuctl/gpuctl.conf"
/* The system lease directory, where no --lease-dir, GPUCTL_LEASE_DIR or configured lease_dir
 * names another (docs/leases.md). */
#define GPUCTL_LEASE_DIR_DEFAULT "/run/gpuctl"

/* A parsed configuration file: settings and GPU pools. The query functions below accept NULL
 * and answer for an empty configuration then. Never changes once made (share it between
 * threads); outlives its context. */
struct gpuctl_config;

/* Loads the configuration: path, else $GPUCTL_CONFIG (when set and not empty), else
 * GPUCTL_CONFIG_DEFAULT_PATH. A missing default file is an empty configuration (its path NULL);
 * a missing file that was named (argument or environment) is -ENOENT. The path may be a
 * symlink, but the file it leads to must be a regular file: anything else is -EPERM (message
 * says why), except the null device (/dev/null, or a symlink to it): no configuration, as a
 * missing default file (path NULL). Parse errors: -EINVAL, message "FILE:LINE: what is wrong".
 * Other open/read failures: their -errno, message naming the file. */
int gpuctl_config_load(struct gpuctl_ctx *ctx, const char *path, struct gpuctl_config **ret_cfg);
/* Parses text of len bytes (need not be NUL-terminated); name is used in messages. The result
 * has no path (gpuctl_config_path NULL) and no file owner. */
int gpuctl_config_parse(struct gpuctl_ctx *ctx, const char *name, const char *text, size_t len,
                        struct gpuctl_config **ret_cfg);
void gpuctl_config_free(struct gpuctl_config *cfg);
/* The file read (as named), NULL when none was (empty configuration, or parsed from text). */
const char *gpuctl_config_path(const struct gpuctl_config *cfg);
/* Owner uid and permission bits (st_mode & 07777) of the file read, as fstat() saw the opened
 * file, for trust checks; -ENOENT when no file was read. */
int gpuctl_config_file_owner(const struct gpuctl_config *cfg, uint32_t *ret_uid,
                             uint32_t *ret_mode);
/* 1 when path names the very file that was read (same device and inode as the descriptor it
 * was read from, so a path swapped after reading does not match), else 0. */
int gpuctl_config_is_file(const struct gpuctl_config *cfg, const char *path);

/* The global settings; every field has its default when the file does not set it. Library-owned,
 * read through gpuctl_config_settings(); grows at its end. */
struct gpuctl_config_settings {
	const char *lease_dir;    /* absolute path; NULL: not set */
	uint64_t busy_memory;     /* bytes; 0 (default): any foreign process makes a GPU busy */
	int busy_utilization;     /* percent; -1 (default): not used */
	bool share_margin_is_pct; /* share_margin is a percentage (the default, 5%) */
	uint64_t share_margin;    /* bytes, or percent (0-50) when share_margin_is_pct */
	const char *ledger;       /* the usage ledger (docs/ledger.md), absolute; NULL: not set */
	const char *dev_dir;      /* where the agent finds the device nodes (docs/agent.md),
	                           * absolute; NULL: not set (/dev) */
	const char *agent_socket; /* the node agent's socket (docs/agent.md, "Enforcement: cgroup"),
	                           * absolute; NULL: not set */
};
/* Owned by cfg (a static default set for NULL). */
const struct gpuctl_config_settings *gpuctl_config_settings(const struct gpuctl_config *cfg);
/* The share margin in bytes for a device of total_bytes memory (a percentage rounded up). */
uint64_t gpuctl_config_share_margin(const struct gpuctl_config *cfg, uint64_t total_bytes);

/* Pools, in file order. */
size_t gpuctl_config_pool_count(const struct gpuctl_config *cfg);
/* Pool i: name, description (NULL if none), whether restricted (some user could be refused:
 * it has users or groups, and users does not contain "*"), and the users/groups lists exactly
 * as written (NULL-terminated arrays, empty when not given, owned by cfg; "*" kept). Any ret_*
 * may be NULL. -EINVAL when i is out of range. */
int gpuctl_config_pool_get(const struct gpuctl_config *cfg, size_t i, const char **ret_name,
                           const char **ret_description, bool *ret_restricted,
                           const char *const **ret_users, const char *const **ret_groups);
/* What the node agent does with the idle leases of a pool (docs/idle.md "Acting on idle
 * leases"; docs/config.md "Idle actions"): seconds, 0 when off. */
struct gpuctl_config_idle {
	uint64_t idle_warn_s;     /* a lease idle this long is logged, once per idle streak */
	uint64_t idle_release_s;  /* a --hold lease idle this long is taken back */
	uint64_t max_lease_age_s; /* a lease older than this is taken back */
};
/* Pool i's idle actions (i >= the pool count, e.g. SIZE_MAX: the default pool's): each key the
 * pool gives, else the global section's, else 0. cfg NULL: all 0. */
void gpuctl_config_pool_idle(const struct gpuctl_config *cfg, size_t i,
                             struct gpuctl_config_idle *ret);
/* How hard a pool's leases are enforced (docs/config.md "Enforcement"; docs/agent.md). */
enum gpuctl_enforce {
	GPUCTL_ENFORCE_OFF = 0, /* advisory leases (the default) */
	GPUCTL_ENFORCE_WATCH,   /* the agent detects, logs, counts and records violations */
	GPUCTL_ENFORCE_ACL,     /* watch, and device nodes opened only to lease holders (ACLs) */
	GPUCTL_ENFORCE_CGROUP,  /* watch, and jobs in a cgroup whose device filter allows their GPUs
	                         */
};
/* What the agent does about a violation. */
enum gpuctl_violation_action {
	GPUCTL_VIOLATION_LOG = 0,   /* a log line (and the ledger, the exporter): the default */
	GPUCTL_VIOLATION_NOTIFY,    /* and one line to each of the offending user's terminals */
	GPUCTL_VIOLATION_TERMINATE, /* and SIGTERM, SIGKILL after terminate_grace */
};
#define GPUCTL_TERMINATE_GRACE_DEFAULT 10 /* seconds */
struct gpuctl_config_enforce {
	enum gpuctl_enforce enforce;
	enum gpuctl_violation_action action;
	uint64_t terminate_grace_s; /* SIGTERM to SIGKILL, seconds (0: SIGKILL at the next check) */
	bool terminate_system;      /* terminate processes of root and uids < 1000 too */
};
/* Pool i's enforcement (i >= the pool count, e.g. SIZE_MAX, or (size_t)-1 from a pool map
 * entry: the default pool's): each key the pool gives, else the global section's, else its
 * default (off, log, 10s, no). cfg NULL: the defaults. */
void gpuctl_config_pool_enforce(const struct gpuctl_config *cfg, size_t i,
                                struct gpuctl_config_enforce *ret);
/* The configuration word of a value ("off", "watch", ...; "log", "notify", "terminate"), NULL
 * for a value out of range. */
const char *gpuctl_enforce_name(enum gpuctl_enforce e);
const char *gpuctl_violation_action_name(enum gpuctl_violation_action a);
/* A user's quotas in a pool (docs/config.md "Quotas"): what select-and-lease enforces. */
struct gpuctl_config_quota {
	int64_t gpus;            /* devices held at once in the pool; -1: no limit */
	uint64_t lease_length_s; /* the longest lease (a --hold's length); 0: no limit */
	double gpu_hours_day;    /* GPU-hours in the pool per UTC calendar day; < 0: no limit */
	double gpu_hours_week;   /* GPU-hours per ISO week (from Monday 00:00 UTC); < 0: none */
};
/* User uid's quotas in pool i (i >= the pool count, e.g. SIZE_MAX: the default pool's): for each
 * key the pool's entries if it gives the key, else the global section's; of those the uid's own
 * entry (name or decimal uid), else the most generous entry of a group the user is in, else the
 * default entry, else no limit. Root (uid 0) and cfg NULL: no limits. -ENOMEM, -EINVAL; ctx may
 * be NULL. */
int gpuctl_config_pool_quota(struct gpuctl_ctx *ctx, const struct gpuctl_config *cfg, size_t i,
                             uint32_t uid, struct gpuctl_config_quota *ret);
/* Whether the file gives any quota key, in any section. */
bool gpuctl_config_has_quota(const struct gpuctl_config *cfg);
/* The node agent's hooks (docs/hooks.md; docs/config.md "Hooks"): global settings only. */
enum gpuctl_hook_event {
	GPUCTL_HOOK_HEALTH,      /* on_health: a health finding appears or clears */
	GPUCTL_HOOK_LEASE_START, /* on_lease_start: a lease holder is first observed */
	GPUCTL_HOOK_LEASE_END,   /* on_lease_end: a lease holder is no longer observed */
	GPUCTL_HOOK_IDLE,        /* on_idle: an idle lease is warned about or taken back */
	GPUCTL_HOOK_VIOLATION,   /* on_violation: a lease is broken (enforce) */
	GPUCTL_HOOK_COUNT_
};
struct gpuctl_config_hooks {
	const char *path[GPUCTL_HOOK_COUNT_]; /* the program (absolute path), NULL: none; owned by
	                                       * cfg */
	unsigned line[GPUCTL_HOOK_COUNT_];    /* the line that names it, 0: none */
	uint64_t timeout_s;                   /* hook_timeout (default 10) */
	unsigned max_running;                 /* hook_max_running (default 4) */
};
/* The hooks the file names and their limits (cfg NULL: none, the defaults). */
void gpuctl_config_hooks(const struct gpuctl_config *cfg, struct gpuctl_config_hooks *ret);
/* The event's name ("health", "lease_start", "lease_end", "idle", "violation"; the key is "on_"
 * and it), NULL for a bad event. */
const char *gpuctl_hook_event_name(int event);
/* The status page of the agent and the exporter (docs/status-page.md; docs/config.md "Status
 * page"): global settings only. */
enum gpuctl_status_page_access {
	GPUCTL_STATUS_PAGE_OFF = 0, /* not served (404): /metrics and /healthz only */
	GPUCTL_STATUS_PAGE_LOCAL,   /* served to loopback clients only (the default) */
	GPUCTL_STATUS_PAGE_NETWORK, /* served to every client the server listens for */
};
struct gpuctl_config_status_page {
	const char *const *peers; /* the other servers' base URLs (http[s]://HOST[:PORT][/PATH],
	                           * no trailing '/'), NULL-terminated, never NULL; owned by cfg */
	bool hide_users;          /* status_page_users = hide: no user names for anonymous
	                           * viewers (every HTTP client) */
	enum gpuctl_status_page_access access; /* status_page: who may read it */
};
/* The status page's settings (cfg NULL: no peers, users shown). */
void gpuctl_config_status_page(const struct gpuctl_config *cfg,
                               struct gpuctl_config_status_page *ret);
/* Resolves every pool's gpus against snap and checks them: an id that names no GPU of snap,
 * or a GPU given to two pools, is -EINVAL "FILE:LINE: ..." (the line of the offending entry;
 * for a GPU in two pools naming both pools). On success *ret_pool (an array of snap's GPU
 * count, malloc'ed, caller frees) gives each GPU's pool index, or -1 for the default pool. */
int gpuctl_config_pool_map(struct gpuctl_ctx *ctx, const struct gpuctl_config *cfg,
                           const struct gpuctl_snapshot *snap, int **ret_pool);
/* Index of the pool called name; -ENOENT (message lists the pools) when there is none.
 * "default" is not a pool index: callers treat it themselves (-ENOENT here too). */
int gpuctl_config_pool_find(struct gpuctl_ctx *ctx, const struct gpuctl_config *cfg,
                            const char *name, size_t *ret_index);
/* Whether user uid may draw from pool i: 1 yes, 0 no (message set: "pool 'NAME' is restricted
 * to users a, b and groups c", readable after "not allowed: "), -EINVAL for a bad i, -ENOMEM.
 * Root (uid 0) and unrestricted pools: yes. A user entry matches by name (getpwuid) or decimal
 * uid; a group entry by name or decimal gid, and the user is in it when it is their primary
 * group or in getgrouplist() of the user. Names that do not exist never match (logged at
 * debug level). */
int gpuctl_config_pool_allows(struct gpuctl_ctx *ctx, const struct gpuctl_config *cfg, size_t i,
                              uint32_t uid);

GPUCTL_END_DECLS

#endif /* GPUCTL_CONFIG_H */
