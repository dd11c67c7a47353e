/* SPDX-License-Identifier: MIT */
/*
 * filters.h: the selection options `gpuctl select` and `gpuctl run` share (-n, the filters and
 * the lease options): their parsing, their --help, and the call of the library's one allocation
 * function (gpuctl_alloc) with them, which does everything else (docs/library.md).
 */
#ifndef GPUCTL_CLI_FILTERS_H
#define GPUCTL_CLI_FILTERS_H

#include <getopt.h>
#include <stdbool.h>

#include "cmd.h"

/* The most devices -n may ask for (more than any machine has; a guard against typos). */
#define FILTERS_MAX_COUNT 4096

struct select_args {
	struct gpuctl_alloc_request req; /* what is passed to gpuctl_alloc (mode aside) */
	bool have_count;                 /* -n was given */
	bool whole;                      /* --whole was given */
	bool share;                      /* --share: a shared lease (docs/leases.md "Sharing") */
	uint64_t share_mem;              /* --mem SIZE: the memory the job declares, 0: none */
	char **avoid;                    /* UUIDs never to choose (run --retry: GPUs that failed
	                                  * under the job), owned; n_avoid entries */
	size_t n_avoid;
	int wait_hangup_fd; /* > 0: stop waiting (as on SIGTERM) when this pipe's reader is gone */
};

#define SELECT_ARGS_INIT                                                                           \
	{                                                                                          \
		.req = GPUCTL_ALLOC_REQUEST_INIT                                                   \
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

/* The most seconds --wait=SECONDS may say (a year). */
#define FILTERS_WAIT_MAX_S 31536000L

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
	"  --only IDS            choose only among these GPUs (indices, ranges 2-7,\n"             \
	"                        UUIDs, UUID prefixes, PCI bus ids)\n"                             \
	"  --exclude IDS         never choose these GPUs\n"                                        \
	"  --numa, --numa-node NODE\n"                                                             \
	"                        only GPUs attached to CPU NUMA node NODE\n"                       \
	"  --mig PROFILE         MIG devices of this profile (1g.10gb, 1g.24gb+me)\n"              \
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

/* Checks the options together once parsing is done (-n given, --mig with --whole, --share with
 * --mem). Returns 0 or CLI_EXIT_USAGE (error printed). */
int filters_check(const struct cmd_entry *entry, struct select_args *o);

/* gpuctl_alloc for o in mode (docs/library.md), with the job's command line for the owner
 * record. With --wait, SIGINT, SIGTERM and SIGHUP (unless ignored; and a gone reader of
 * o->wait_hangup_fd, as SIGTERM) end the wait. On failure prints one line and returns the exit
 * status: CLI_EXIT_USAGE for a bad request, CLI_EXIT_NOMATCH when too few devices qualify (or the
 * wait timed out), CLI_EXIT_NODRIVER, CLI_EXIT_BUSY (select.lock held too long), 128+N after
 * signal N, else CLI_EXIT_FAILURE. On success returns 0 and sets
 * *ret_alloc (caller frees). */
int filters_alloc(struct cli *cli, const struct cmd_entry *entry, struct select_args *o,
                  enum gpuctl_alloc_mode mode, const char *command,
                  struct gpuctl_alloc **ret_alloc);

/* Adds a GPU (by UUID) that o's allocations must never choose again: it joins --exclude in
 * every later snapshot that still lists it (a lost GPU is never chosen anyway). */
int filters_avoid(struct select_args *o, const char *uuid);

/* Frees what filters_avoid added. */
void filters_free(struct select_args *o);

#endif /* GPUCTL_CLI_FILTERS_H */
