/* SPDX-License-Identifier: MIT */
/*
 * site.h: the site: the configuration and the lease directory that govern requests on this
 * machine, opened together.
 *
 * Part of libgpuctl's public API (include <gpuctl/gpuctl.h>, which includes every header; the
 * rules that hold for all of them are there). Compiles on its own, as C and as C++
 * (tests/unit/test-headers.c).
 */
#ifndef GPUCTL_SITE_H
#define GPUCTL_SITE_H

#include "decls.h"
#include "context.h"
#include "snapshot.h"
#include "config.h"
#include "lease.h"
#include "health.h"

/* Exported: see gpuctl.h, "What these headers declare is libgpuctl's whole ABI". */
GPUCTL_BEGIN_DECLS

/* ---- The site: configuration and lease directory (src/lib/site.c; docs/library.md) ---- */

/* What governs requests on this machine: the configuration file (pools, busy thresholds, share
 * margin, the lease directory's path) and the lease directory, opened and checked together,
 * because a shared lease directory decides which configuration governs it (docs/config.md
 * "Trust"). gpuctl_alloc() opens one itself; gpuctl ps, the exporter and programs that show
 * the machine as gpuctl's rules see it open one with gpuctl_site_open(). Never changes once
 * open (its lease directory is shared as a lease directory is); outlives its context. */
struct gpuctl_site;

enum gpuctl_site_flags {
	/* Create the lease directory when it is missing and the caller may (root, or a parent of
	 * the caller's own), as taking a lease does. Without it a missing directory is not
	 * created and means that nothing is leased (gpuctl_site_lease_dir() returns NULL). */
	GPUCTL_SITE_CREATE = 1u << 0,
	/* Load the configuration only; do not look at the lease directory (its path is still
	 * resolved, for gpuctl_site_health_state_path). */
	GPUCTL_SITE_NO_LEASES = 1u << 1,
};

/* Opens the site. config_path: the configuration file, NULL for $GPUCTL_CONFIG (when set and
 * not empty), else GPUCTL_CONFIG_DEFAULT_PATH (a missing default file is an empty
 * configuration). lease_dir: NULL for $GPUCTL_LEASE_DIR, else the configuration's lease_dir,
 * else "/run/gpuctl". A lease directory that is not the caller's own (a shared one) is governed
 * by the configuration it names (DIR/config, else the default path): that file replaces one
 * taken from $GPUCTL_CONFIG or the default, a different file named in config_path is -EINVAL,
 * and a governing file that others than root or the directory's owner could write is -EPERM.
 * Errors (message on ctx, one line, naming the file or directory): -EINVAL a configuration
 * that does not parse ("FILE:LINE: ...") or a named one that is missing; -EPERM an unsafe lease
 * directory or configuration; -ENOENT a missing lease directory with GPUCTL_SITE_CREATE that
 * is not ours to create (the message names `sudo gpuctl lease init` and GPUCTL_LEASE_DIR), or
 * a configuration file a shared directory names that is missing; other -errno for I/O. */
int gpuctl_site_open(struct gpuctl_ctx *ctx, const char *config_path, const char *lease_dir,
                     unsigned flags, struct gpuctl_site **ret_site);
void gpuctl_site_free(struct gpuctl_site *site);
/* The configuration that governs the site; NULL for an empty one (every gpuctl_config_*
 * query accepts NULL). Owned by site. */
const struct gpuctl_config *gpuctl_site_config(const struct gpuctl_site *site);
/* The lease directory's path, resolved as gpuctl_site_open says. Owned by site. */
const char *gpuctl_site_lease_dir_path(const struct gpuctl_site *site);
/* The opened lease directory; NULL when it does not exist (nothing is leased) or the site was
 * opened with GPUCTL_SITE_NO_LEASES. Owned by site. */
struct gpuctl_lease_dir *gpuctl_site_lease_dir(const struct gpuctl_site *site);
/* The health state file `gpuctl health --watch` keeps (docs/health.md): $GPUCTL_HEALTH_STATE,
 * else gpuctl-health.state beside the lease directory. Owned by site. */
const char *gpuctl_site_health_state_path(const struct gpuctl_site *site);
/* Fills *lreq with GPUCTL_LEASE_REQUEST_INIT's values and the configuration's busy thresholds
 * and share margin, writing only the first lreq->struct_size bytes (set struct_size first, e.g.
 * with GPUCTL_LEASE_REQUEST_INIT). -EINVAL for a struct_size smaller than the first release's. */
int gpuctl_site_lease_defaults(const struct gpuctl_site *site, struct gpuctl_lease_request *lreq);
/* The health report of snap as `gpuctl health` makes it: the rules of docs/health.md over snap
 * (take it with gpuctl_health_fields() and GPUCTL_SNAP_HEALTH), with the XIDs of the kernel log
 * ($GPUCTL_KMSG, else /dev/kmsg) and the XIDs and counter sample of the site's health state
 * file, each when it can be read (if not, logged at debug level: a missing source is no
 * finding). -ENOMEM. */
int gpuctl_site_health(struct gpuctl_ctx *ctx, const struct gpuctl_site *site,
                       const struct gpuctl_snapshot *snap,
                       struct gpuctl_health_report **ret_report);
/* The snapshot flags for a health verdict judged against the health state file at state_path
 * (gpuctl_site_health_state_path(); NULL: none): GPUCTL_SNAP_HEALTH and
 * GPUCTL_SNAP_NVLINK_STATE, with GPUCTL_SNAP_NO_RATE_COUNTERS when no such file exists (no earlier
 * sample to judge the NVLink error rate against, so its counters are not read). A snapshot taken
 * with these flags and gpuctl_health_fields() holds the facts every gpuctl command judges
 * (docs/health.md, "One verdict"), so the verdict is the same whoever asks. */
unsigned gpuctl_health_snapshot_flags(const char *state_path);

GPUCTL_END_DECLS

#endif /* GPUCTL_SITE_H */
