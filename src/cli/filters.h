/* SPDX-License-Identifier: MIT */
/*
 * filters.h: the selection options `gpuctl select` and `gpuctl run` share (-n, the filters and
 * the lease options), and the one path from those options to a gpuctl_selection: snapshot with
 * the fields the filters and the score need, outer allocation, leases (docs/leases.md),
 * gpuctl_select or gpuctl_select_and_lease, exit statuses.
 */
#ifndef GPUCTL_CLI_FILTERS_H
#define GPUCTL_CLI_FILTERS_H

#include <getopt.h>
#include <stdbool.h>

#include "cmd.h"

/* The most devices -n may ask for (more than any machine has; a guard against typos). */
#define FILTERS_MAX_COUNT 4096

struct select_args {
	struct gpuctl_select_request req; /* what is passed to gpuctl_select */
	bool have_count;                  /* -n was given */
	bool whole;                       /* --whole was given */
	bool ignore_outer;                /* --ignore-outer: do not honour the outer allocation */
	struct gpuctl_devset *within;     /* the outer allocation (owned), NULL when none */
	const char *lease_dir;            /* --lease-dir, NULL: $GPUCTL_LEASE_DIR or default */
	const char *label;                /* --label, NULL when none */
	bool ignore_foreign;              /* --ignore-foreign */
	bool share;                       /* --share: a shared lease (docs/leases.md "Sharing") */
	const char *pool;                 /* --pool NAME, NULL: the default pool */
	struct gpuctl_devset *pool_set;   /* the pool's GPUs (owned), NULL: no pools configured */
	char no_room[128];                /* plain select --share: devices without room for it */
	char **avoid;                     /* UUIDs never to choose (run --retry: GPUs that failed
	                                   * under the job), owned; n_avoid entries */
	size_t n_avoid;
	const char *exclude_given;       /* --exclude as given, while avoid rewrites req.exclude */
	char *exclude_buf;               /* req.exclude: exclude_given plus the avoided GPUs still
	                                  * on the machine (owned) */
	struct gpuctl_devset *unhealthy; /* health FAIL verdicts of the last snapshot (owned) */
	struct gpuctl_devset *warned;    /* health WARN verdicts of the last snapshot (owned) */
	uint64_t share_mem;              /* --mem SIZE: the memory the job declares, 0: none */
	struct gpuctl_devset *leased;    /* devices leased by others (owned), plain select */
	struct gpuctl_devset *foreign;   /* devices busy without a lease (owned), plain select */
	bool wait;                       /* --wait: wait for the devices when taking a lease */
	long wait_s;                     /* --wait=SECONDS, -1: forever */
	int wait_hangup_fd; /* > 0: stop waiting (as on SIGTERM) when this pipe's reader is gone */
};

/* How filters_select treats leases. */
enum filters_lease_mode {
	FILTERS_LEASE_EXCLUDE, /* plain select; excludes leased devices when the directory exists */
	FILTERS_LEASE_EXCLUDE_FOREIGN, /* the same, and devices busy without a lease unless
	                                * --ignore-foreign (what `run` would do: `run --dry-run`) */
	FILTERS_LEASE_TAKE,            /* select-and-lease: the caller gets the held lease */
};

/* Loads the configuration once (--config, else $GPUCTL_CONFIG, else /etc/gpuctl/gpuctl.conf;
 * docs/config.md) into cli->config. On failure prints the one-line error ("FILE:LINE: ...")
 * and returns CLI_EXIT_USAGE for a file that does not parse or a named file that is missing,
 * else CLI_EXIT_FAILURE. */
int filters_config(struct cli *cli, const struct cmd_entry *entry);

/* The lease directory's path: --lease-dir, else $GPUCTL_LEASE_DIR, else the configuration's
 * lease_dir (call filters_config first), else /run/gpuctl. */
#define FILTERS_DEFAULT_LEASE_DIR "/run/gpuctl"
const char *filters_lease_dir_path(const struct cli *cli, const char *option);

#define SELECT_ARGS_INIT                                                                           \
	{                                                                                          \
		.req = GPUCTL_SELECT_REQUEST_INIT                                                  \
	}

enum {
	OPT_FILTER_MIN_FREE_MEM = 0x200,
	OPT_FILTER_MAX_UTIL,
	OPT_FILTER_NO_PROCS,
	OPT_FILTER_ONLY,
	OPT_FILTER_EXCLUDE,
	OPT_FILTER_NUMA,
	OPT_FILTER_MIG,
	OPT_FILTER_WHOLE,
	OPT_FILTER_ALLOW_UNHEALTHY,
	OPT_FILTER_IGNORE_OUTER,
	OPT_FILTER_LEASE_DIR,
	OPT_FILTER_LABEL,
	OPT_FILTER_IGNORE_FOREIGN,
	OPT_FILTER_WAIT,
	OPT_FILTER_SHARE,
	OPT_FILTER_MEM,
	OPT_FILTER_POOL,
};

/* The most seconds --wait=SECONDS may say (a year), and how often a waiter retries without a
 * file event (telemetry filters and foreign processes change without one). */
#define FILTERS_WAIT_MAX_S       31536000L
#define FILTERS_WAIT_FALLBACK_MS 2000

/* The long options of the filters, for a command's getopt_long table ("n:" goes in the short
 * option string). */
#define FILTER_LONG_OPTIONS                                                                        \
	{"count", required_argument, NULL, 'n'},                                                   \
	        {"min-free-mem", required_argument, NULL, OPT_FILTER_MIN_FREE_MEM},                \
	        {"max-util", required_argument, NULL, OPT_FILTER_MAX_UTIL},                        \
	        {"no-procs", no_argument, NULL, OPT_FILTER_NO_PROCS},                              \
	        {"only", required_argument, NULL, OPT_FILTER_ONLY},                                \
	        {"exclude", required_argument, NULL, OPT_FILTER_EXCLUDE},                          \
	        {"numa", required_argument, NULL, OPT_FILTER_NUMA},                                \
	        {"numa-node", required_argument, NULL, OPT_FILTER_NUMA},                           \
	        {"mig", required_argument, NULL, OPT_FILTER_MIG},                                  \
	        {"whole", no_argument, NULL, OPT_FILTER_WHOLE},                                    \
	        {"allow-unhealthy", no_argument, NULL, OPT_FILTER_ALLOW_UNHEALTHY},                \
	        {"ignore-outer", no_argument, NULL, OPT_FILTER_IGNORE_OUTER},                      \
	        {"lease-dir", required_argument, NULL, OPT_FILTER_LEASE_DIR},                      \
	        {"label", required_argument, NULL, OPT_FILTER_LABEL},                              \
	        {"wait", optional_argument, NULL, OPT_FILTER_WAIT},                                \
	        {"share", no_argument, NULL, OPT_FILTER_SHARE},                                    \
	        {"mem", required_argument, NULL, OPT_FILTER_MEM},                                  \
	        {"pool", required_argument, NULL, OPT_FILTER_POOL},                                \
	{                                                                                          \
		"ignore-foreign", no_argument, NULL, OPT_FILTER_IGNORE_FOREIGN                     \
	}

/* Their --help lines (kept in step with docs/gpuctl.1). */
#define FILTER_OPTIONS_HELP                                                                        \
	"  -n, --count N         devices wanted (required); 0 gives an empty set\n"                \
	"  --min-free-mem SIZE   at least SIZE free, e.g. 10GiB, 512MiB, 1.5G (units B, KiB,\n"    \
	"                        MiB, GiB, TiB or K, M, G, T; binary)\n"                           \
	"  --max-util PCT        GPU utilisation at most PCT percent\n"                            \
	"  --no-procs            no compute process running on the device\n"                       \
	"  --only IDS            choose only among these GPUs (indices, UUIDs, UUID prefixes,\n"   \
	"                        PCI bus ids, comma-separated)\n"                                  \
	"  --exclude IDS         never choose these GPUs\n"                                        \
	"  --numa NODE           only GPUs attached to CPU NUMA node NODE (also --numa-node)\n"    \
	"  --mig PROFILE         choose MIG devices of this profile (e.g. 1g.10gb)\n"              \
	"  --whole               choose whole GPUs (the default; conflicts with --mig)\n"          \
	"  --allow-unhealthy     also consider GPUs whose health verdict is FAIL, and WARN\n"      \
	"                        ones like any other (docs/health.md; lost GPUs never)\n"          \
	"  --ignore-outer        choose among all GPUs, ignoring the allocation gpuctl runs in\n"  \
	"                        (CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, SLURM_*_GPUS)\n"   \
	"  --lease-dir DIR       the lease directory (default $GPUCTL_LEASE_DIR, else the\n"       \
	"                        configuration's lease_dir, else /run/gpuctl); devices leased\n"   \
	"                        there are never chosen\n"                                         \
	"  --label TEXT          a label for the lease, shown by gpuctl ps\n"                      \
	"  --ignore-foreign      also choose devices running compute processes that belong to\n"   \
	"                        no lease (busy by default when taking a lease)\n"                 \
	"  --wait[=SECONDS]      when taking a lease (run, select --hold): wait in line for the\n" \
	"                        devices, forever or at most SECONDS (then exit 3); a request\n"   \
	"                        no lease could ever satisfy fails at once\n"                      \
	"  --pool NAME           draw from this pool of the configuration (default: the GPUs\n"    \
	"                        no pool lists; docs/config.md)\n"                                 \
	"  --share --mem SIZE    a shared lease: other --share jobs may use the same devices\n"    \
	"                        while the memory they all declare, plus a safety margin,\n"       \
	"                        fits; never together with an exclusive lease\n"

/* Handles one getopt_long result if it is a filter option. Returns 0 when it handled it,
 * CLI_EXIT_USAGE after printing the error for a bad value, -1 when opt is not a filter. */
int filters_option(const struct cmd_entry *entry, struct select_args *o, int opt, const char *arg);

/* Checks the options together once parsing is done (-n given, --mig with --whole). Returns 0
 * or CLI_EXIT_USAGE (error printed). */
int filters_check(const struct cmd_entry *entry, const struct select_args *o);

/* Takes the snapshot the request needs, applies the outer allocation (unless --ignore-outer;
 * under -v says which variable constrained the choice), and selects. On failure prints one
 * line and returns the exit status: CLI_EXIT_NOMATCH when too few devices qualify,
 * CLI_EXIT_USAGE for a bad request or an unreadable outer allocation, CLI_EXIT_NODRIVER,
 * CLI_EXIT_FAILURE. On success returns 0 with both out-parameters set (caller frees). */
int filters_select(struct cli *cli, const struct cmd_entry *entry, struct select_args *o,
                   unsigned extra_flags, struct gpuctl_snapshot **ret_snap,
                   struct gpuctl_selection **ret_sel);

/* Like filters_select, with leases as mode says. With FILTERS_LEASE_TAKE, *ret_dir and
 * *ret_lease are set on success (caller frees the lease, then the directory); command is the
 * job's command line for the owner record. A lease directory that is unsafe or missing (and
 * not ours to create) is one line and CLI_EXIT_FAILURE. */
int filters_select_lease(struct cli *cli, const struct cmd_entry *entry, struct select_args *o,
                         enum filters_lease_mode mode, const char *command, unsigned extra_flags,
                         struct gpuctl_snapshot **ret_snap, struct gpuctl_selection **ret_sel,
                         struct gpuctl_lease_dir **ret_dir, struct gpuctl_lease **ret_lease);

/* Loads the configuration and opens the lease directory for a command (path: the --lease-dir
 * option or NULL), printing the one-line error and returning the exit status on failure. With
 * a directory that is not the caller's own (a shared one), the configuration must be the one the
 * directory names (docs/config.md "Trust"): cli->config is replaced by it when none was named,
 * and a named other file is CLI_EXIT_USAGE; a configuration file that others could have written
 * is CLI_EXIT_FAILURE. Creates the context if needed. */
int filters_open_lease_dir(struct cli *cli, const struct cmd_entry *entry, const char *path,
                           struct gpuctl_lease_dir **ret_dir);

/* The GPUs of the pool o draws from (--pool NAME, else the default pool) as o->pool_set, and
 * the request's pool filter; nothing when the configuration has no pools. Prints the error and
 * returns CLI_EXIT_USAGE for an unknown pool or a configuration whose GPUs do not match the
 * machine, CLI_EXIT_FAILURE when the user may not draw from the pool. */
int filters_pool(struct cli *cli, const struct cmd_entry *entry, struct select_args *o,
                 const struct gpuctl_snapshot *snap);

/* The lease request o asks for (share, thresholds and margin from the configuration). */
void filters_lease_request(struct cli *cli, const struct select_args *o,
                           struct gpuctl_lease_request *ret_lreq);

/* The health state file `gpuctl health --watch` keeps (docs/health.md): $GPUCTL_HEALTH_STATE,
 * else gpuctl-health.state beside the lease directory (filters_lease_dir_path with option).
 * malloc'ed; NULL when out of memory. */
char *filters_health_state_path(const struct cli *cli, const char *option);

/* The health report of snap (docs/health.md) as gpuctl health makes it: with the XIDs of the
 * kernel log ($GPUCTL_KMSG, else /dev/kmsg) and those and the counter sample of the health
 * state file (filters_health_state_path(cli, lease_dir)), each when it can be read (else said
 * under -v, as are the findings). 0, or CLI_EXIT_FAILURE after printing the error. */
int filters_health_report(struct cli *cli, const struct cmd_entry *entry,
                          const struct gpuctl_snapshot *snap, const char *lease_dir,
                          struct gpuctl_health_report **ret_rep);

/* Adds a GPU (by UUID) that o's selections must never choose again: it joins --exclude in
 * every later snapshot that still lists it (a lost GPU is never chosen anyway). */
int filters_avoid(struct select_args *o, const char *uuid);

/* Frees what filters_select kept in o (the outer allocation, the lease exclusions), which the
 * next selection computes afresh. */
void filters_done(struct select_args *o);
/* filters_done, and what filters_avoid added: o is as parsed. */
void filters_free(struct select_args *o);

/* Writes a device's label for people: its NVML index, "3" for a whole GPU, "3:1" for MIG
 * device 1 of GPU 3 (the <gpu>:<mig> form of NVIDIA_VISIBLE_DEVICES and CDI names). */
void filters_device_label(const struct gpuctl_snapshot *snap, size_t gpu, int mig, char *buf,
                          size_t size);

#endif /* GPUCTL_CLI_FILTERS_H */
