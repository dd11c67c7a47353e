// SPDX-License-Identifier: MIT
/*
 * filters.c: the selection options shared by `gpuctl select` and `gpuctl run`, and the path
 * from them to a gpuctl_selection.
 *
 * Decisions:
 * - Every option is checked before NVML is touched, so a bad size or a conflict is exit 2 even
 *   without a driver. Ids (--only/--exclude) and MIG profiles need the snapshot: the library
 *   checks them and its -EINVAL is exit 2 too.
 * - The snapshot reads only the fields the filters and the score use (memory, utilisation,
 *   NUMA node, CPU affinity, and the health counters unless --allow-unhealthy), plus topology
 *   and processes; MIG devices only with --mig or when an outer allocation names MIG devices.
 * - The outer allocation is honoured by default: a gpuctl inside a Slurm job or a container
 *   chooses only among what it was given. An outer variable that cannot be read is a usage
 *   error (exit 2): guessing would hand a job GPUs it was not given.
 * - Too few devices is exit 3 with the library's one-line reason, prefixed by the command.
 * - Leases (docs/leases.md). Taking one (run, select --hold) is the library's
 *   gpuctl_select_and_lease, atomic under DIR/select.lock. A plain select takes none and only
 *   excludes what is leased now: it reads the directory when it exists and never creates it (a
 *   missing directory means nothing is leased; -v says so), so `gpuctl select` as root does not
 *   create /run/gpuctl as a side effect. Devices whose lock file is unusable are excluded too
 *   (select-and-lease never grants them). A lease directory that cannot be trusted is one line
 *   and exit 1 in every mode: choosing as if nothing were leased would hand out leased GPUs.
 * - --wait (docs/leases.md "Waiting") lives here, not in the library: the never-satisfiable
 *   check, the poll(2) on inotify + signalfd with a FILTERS_WAIT_FALLBACK_MS timeout, and a
 *   fresh snapshot before every retry (telemetry and foreign processes change without events).
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filters.h"
#include "parse.h"

int filters_option(const struct cmd_entry *entry, struct select_args *o, int opt, const char *arg)
{
	unsigned long v;
	const char *why;
	int r;

	switch (opt) {
	case 'n':
		r = parse_uint(arg, 0, FILTERS_MAX_COUNT, &v);
		if (r == -ERANGE)
			return cmd_usage_error(entry, "-n: '%s' is more than %d devices", arg,
			                       FILTERS_MAX_COUNT);
		if (r < 0)
			return cmd_usage_error(entry, "-n: '%s' is not a number of devices", arg);
		o->req.count = (unsigned)v;
		o->have_count = true;
		return 0;
	case OPT_FILTER_MIN_FREE_MEM:
		r = parse_size(arg, &o->req.min_free_mem, &why);
		if (r < 0)
			return cmd_usage_error(entry, "--min-free-mem: '%s': %s", arg, why);
		return 0;
	case OPT_FILTER_MAX_UTIL:
		if (parse_percent(arg, &o->req.max_util) < 0)
			return cmd_usage_error(entry, "--max-util: '%s' is not a percentage 0-100",
			                       arg);
		return 0;
	case OPT_FILTER_NO_PROCS:
		o->req.no_procs = true;
		return 0;
	case OPT_FILTER_ONLY:
		if (!arg[0])
			return cmd_usage_error(entry, "--only: empty GPU id list");
		o->req.only = arg;
		return 0;
	case OPT_FILTER_EXCLUDE:
		if (!arg[0])
			return cmd_usage_error(entry, "--exclude: empty GPU id list");
		o->req.exclude = arg;
		return 0;
	case OPT_FILTER_NUMA:
		if (parse_uint(arg, 0, 65535, &v) < 0)
			return cmd_usage_error(entry, "--numa: '%s' is not a NUMA node number",
			                       arg);
		o->req.numa_node = (int)v;
		return 0;
	case OPT_FILTER_MIG:
		if (!arg[0])
			return cmd_usage_error(entry, "--mig: empty MIG profile");
		o->req.mig_profile = arg;
		return 0;
	case OPT_FILTER_WHOLE:
		o->whole = true;
		return 0;
	case OPT_FILTER_ALLOW_UNHEALTHY:
		o->req.allow_unhealthy = true;
		return 0;
	case OPT_FILTER_IGNORE_OUTER:
		o->ignore_outer = true;
		return 0;
	case OPT_FILTER_LEASE_DIR:
		if (!arg[0])
			return cmd_usage_error(entry, "--lease-dir: empty path");
		o->lease_dir = arg;
		return 0;
	case OPT_FILTER_LABEL:
		o->label = arg;
		return 0;
	case OPT_FILTER_IGNORE_FOREIGN:
		o->ignore_foreign = true;
		return 0;
	case OPT_FILTER_SHARE:
		o->share = true;
		return 0;
	case OPT_FILTER_POOL:
		if (!arg[0])
			return cmd_usage_error(entry, "--pool: empty pool name");
		o->pool = arg;
		return 0;
	case OPT_FILTER_MEM:
		r = parse_size(arg, &o->share_mem, &why);
		if (r < 0)
			return cmd_usage_error(entry, "--mem: '%s': %s", arg, why);
		if (o->share_mem == 0)
			return cmd_usage_error(
			        entry, "--mem: '%s': a shared job declares more than 0", arg);
		return 0;
	case OPT_FILTER_WAIT:
		o->wait = true;
		o->wait_s = -1;
		if (arg) {
			if (parse_uint(arg, 0, (unsigned long)FILTERS_WAIT_MAX_S, &v) < 0)
				return cmd_usage_error(entry,
				                       "--wait: '%s' is not a number of seconds "
				                       "(0 to %ld)",
				                       arg, FILTERS_WAIT_MAX_S);
			o->wait_s = (long)v;
		}
		return 0;
	default:
		return -1;
	}
}

int filters_check(const struct cmd_entry *entry, const struct select_args *o)
{
	if (!o->have_count)
		return cmd_usage_error(entry, "-n N (the number of devices) is required");
	if (o->whole && o->req.mig_profile)
		return cmd_usage_error(entry, "--mig '%s' and --whole conflict",
		                       o->req.mig_profile);
	if (o->share && !o->share_mem)
		return cmd_usage_error(entry, "--share needs --mem SIZE (the memory the job uses "
		                              "on each device)");
	if (o->share_mem && !o->share)
		return cmd_usage_error(entry, "--mem is the memory of a shared lease: add --share");
	return 0;
}

void filters_lease_request(struct cli *cli, const struct select_args *o,
                           struct gpuctl_lease_request *ret_lreq)
{
	const struct gpuctl_config_settings *set = gpuctl_config_settings(cli->config);
	*ret_lreq = (struct gpuctl_lease_request)GPUCTL_LEASE_REQUEST_INIT;
	if (set) {
		ret_lreq->busy_memory = set->busy_memory;
		ret_lreq->busy_utilization = set->busy_utilization;
		ret_lreq->share_margin = set->share_margin;
		ret_lreq->share_margin_is_pct = set->share_margin_is_pct;
	}
	ret_lreq->label = o->label;
	ret_lreq->ignore_foreign = o->ignore_foreign;
	ret_lreq->share_mem = o->share ? o->share_mem : 0;
}

/* Whether an outer allocation variable names MIG devices ("MIG-..." or "<gpu>:<mig>"), so that
 * the snapshot must read MIG devices to resolve it. */
static bool outer_names_mig(void)
{
	static const char *const vars[] = {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i]);
		if (v && (strstr(v, "MIG-") || strstr(v, "mig-") || strchr(v, ':')))
			return true;
	}
	return false;
}

char *filters_health_state_path(const struct cli *cli, const char *option)
{
	const char *env = getenv("GPUCTL_HEALTH_STATE"), *dir = filters_lease_dir_path(cli, option);
	const char *slash;
	char *p = NULL;
	size_t n;

	if (env && env[0])
		return strdup(env);
	n = strlen(dir);
	while (n > 1 && dir[n - 1] == '/')
		n--;
	slash = memrchr(dir, '/', n);
	if (!slash)
		return strdup("gpuctl-health.state");
	n = (size_t)(slash - dir);
	if (asprintf(&p, "%.*s/gpuctl-health.state", (int)n, dir) < 0)
		return NULL;
	return p;
}

/* The per-GPU fields the filters and the score read (docs/selection.md). */
static const enum gpuctl_field select_fields[] = {
        GPUCTL_F_MEMORY_TOTAL, GPUCTL_F_MEMORY_USED,  GPUCTL_F_MEMORY_FREE, GPUCTL_F_UTIL_GPU,
        GPUCTL_F_NUMA_NODE,    GPUCTL_F_CPU_AFFINITY, GPUCTL_F_MIG_MODE,
};
/* The fields of a selection's snapshot at most: select_fields plus gpuctl_health_fields(). */
#define NFIELDS_MAX (sizeof(select_fields) / sizeof(select_fields[0]) + GPUCTL__F_COUNT)

void filters_device_label(const struct gpuctl_snapshot *snap, size_t gpu, int mig, char *buf,
                          size_t size)
{
	/* The library's own spelling (select.c's messages, devstr.c's "<gpu>:<mig>"): NVML's
	 * MIG device index, which is what NVIDIA_VISIBLE_DEVICES=<gpu>:<mig> means. */
	const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, gpu);
	const struct gpuctl_mig *m = g && mig >= 0 ? gpuctl_gpu_mig(g, (size_t)mig) : NULL;
	int64_t idx = mig;
	if (m)
		(void)gpuctl_mig_int(m, GPUCTL_MIG_INDEX, &idx);
	if (mig < 0)
		snprintf(buf, size, "%zu", gpu);
	else
		snprintf(buf, size, "%zu:%" PRId64, gpu, idx);
}

/* "0,1,3" (labels) for a -v message. */
static void set_labels(const struct gpuctl_snapshot *snap, const struct gpuctl_devset *set,
                       char *buf, size_t size)
{
	size_t used = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < gpuctl_devset_count(set); i++) {
		size_t gpu;
		int mig;
		char label[48];
		if (gpuctl_devset_get(set, i, &gpu, &mig) < 0)
			continue;
		filters_device_label(snap, gpu, mig, label, sizeof(label));
		int n = snprintf(buf + used, size - used, "%s%s", used ? "," : "", label);
		if (n < 0 || (size_t)n >= size - used)
			return;
		used += (size_t)n;
	}
}

static int apply_outer(struct cli *cli, const struct cmd_entry *entry, struct select_args *o,
                       const struct gpuctl_snapshot *snap)
{
	const char *source = NULL;
	struct gpuctl_devset *set = NULL;
	int r = gpuctl_outer_allocation(cli->ctx, snap, &set, &source);
	if (r == -EINVAL) {
		cli_error("%s: outer allocation: %s", entry->name, gpuctl_errmsg(cli->ctx));
		return CLI_EXIT_USAGE;
	}
	if (r < 0) {
		cli_error("%s: outer allocation: %s", entry->name, strerror(-r));
		return CLI_EXIT_FAILURE;
	}
	if (!set) {
		if (cli->verbose)
			cli_error("%s: no outer allocation: choosing among all %zu GPUs",
			          entry->name, gpuctl_snapshot_gpu_count(snap));
		return 0;
	}
	if (cli->verbose) {
		char labels[512];
		set_labels(snap, set, labels, sizeof(labels));
		cli_error("%s: choosing within the outer allocation of %s: %zu device(s) [%s]",
		          entry->name, source ? source : "the environment",
		          gpuctl_devset_count(set), labels);
	}
	o->within = set;
	o->req.within = set;
	return 0;
}

int filters_config(struct cli *cli, const struct cmd_entry *entry)
{
	int r = cli_context(cli);
	if (r)
		return r;
	if (cli->config_loaded)
		return 0;
	r = gpuctl_config_load(cli->ctx, cli->config_path, &cli->config);
	if (r < 0) {
		const char *msg = gpuctl_errmsg(cli->ctx);
		cli_error("%s: %s", entry->name, msg && msg[0] ? msg : strerror(-r));
		return r == -EINVAL || r == -ENOENT ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
	}
	cli->config_loaded = true;
	return 0;
}

const char *filters_lease_dir_path(const struct cli *cli, const char *option)
{
	const char *env = getenv("GPUCTL_LEASE_DIR");
	const struct gpuctl_config_settings *set = gpuctl_config_settings(cli->config);
	if (option)
		return option;
	if (env && env[0])
		return env;
	if (set && set->lease_dir)
		return set->lease_dir;
	return FILTERS_DEFAULT_LEASE_DIR;
}

/* Whether the configuration read is the file at want (none read and want missing: the same). The
 * file read is identified by what was opened, not by its path, which a user could have swapped
 * since. */
static bool config_is(const struct gpuctl_config *cfg, const char *want)
{
	struct stat st;
	if (!gpuctl_config_path(cfg))
		return stat(want, &st) < 0 && errno == ENOENT;
	return gpuctl_config_is_file(cfg, want) == 1;
}

/* docs/config.md "Trust": with a shared lease directory, the configuration is the one the
 * directory names (DIR/config, else the default path), in a file only root or the directory's
 * owner could have written. */
static int config_trust(struct cli *cli, const struct cmd_entry *entry,
                        const struct gpuctl_lease_dir *dir)
{
	uint32_t owner = gpuctl_lease_dir_owner(dir), fuid = 0, fmode = 0;
	const char *env = getenv("GPUCTL_CONFIG");
	bool named = cli->config_path || (env && env[0]);
	char *pinned = NULL;
	const char *want;
	int r;

	if (owner == (uint32_t)geteuid() || geteuid() == 0)
		return 0; /* a directory of one's own, or root: any configuration */
	r = gpuctl_lease_dir_config(cli->ctx, dir, &pinned);
	if (r < 0) {
		cli_error("%s: lease directory %s: %s", entry->name, gpuctl_lease_dir_path(dir),
		          gpuctl_errmsg(cli->ctx));
		return CLI_EXIT_FAILURE;
	}
	want = pinned ? pinned : GPUCTL_CONFIG_DEFAULT_PATH;
	if (!config_is(cli->config, want)) {
		if (named) {
			cli_error(
			        "%s: configuration %s: the shared lease directory %s follows %s "
			        "(gpuctl lease init); another file needs a lease directory of your "
			        "own",
			        entry->name, gpuctl_config_path(cli->config),
			        gpuctl_lease_dir_path(dir), want);
			free(pinned);
			return CLI_EXIT_USAGE;
		}
		gpuctl_config_free(cli->config);
		cli->config = NULL;
		r = gpuctl_config_load(cli->ctx, want, &cli->config);
		if (r == -ENOENT && !pinned)
			r = 0; /* no default file: an empty configuration */
		if (r < 0) {
			const char *msg = gpuctl_errmsg(cli->ctx);
			cli_error("%s: %s", entry->name, msg && msg[0] ? msg : strerror(-r));
			free(pinned);
			return r == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
		}
	}
	free(pinned);
	if (gpuctl_config_file_owner(cli->config, &fuid, &fmode) == 0 &&
	    ((fuid != 0 && fuid != owner) || (fmode & (S_IWGRP | S_IWOTH)))) {
		cli_error("%s: configuration %s: %s, so it cannot govern the shared lease "
		          "directory %s",
		          entry->name, gpuctl_config_path(cli->config),
		          fmode & (S_IWGRP | S_IWOTH) ? "writable by group or others"
		                                      : "owned by another user than root",
		          gpuctl_lease_dir_path(dir));
		return CLI_EXIT_FAILURE;
	}
	return 0;
}

int filters_pool(struct cli *cli, const struct cmd_entry *entry, struct select_args *o,
                 const struct gpuctl_snapshot *snap)
{
	int *map = NULL;
	size_t idx = 0, n = gpuctl_snapshot_gpu_count(snap);
	bool dflt = !o->pool || strcmp(o->pool, "default") == 0;
	int r, want = -1;

	if (gpuctl_config_pool_count(cli->config) == 0) {
		if (!dflt) {
			cli_error("%s: --pool %s: the configuration%s%s has no pools", entry->name,
			          o->pool, gpuctl_config_path(cli->config) ? " " : "",
			          gpuctl_config_path(cli->config) ? gpuctl_config_path(cli->config)
			                                          : "");
			return CLI_EXIT_USAGE;
		}
		return 0;
	}
	r = gpuctl_config_pool_map(cli->ctx, cli->config, snap, &map);
	if (r < 0) {
		cli_error("%s: %s", entry->name, gpuctl_errmsg(cli->ctx));
		return r == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
	}
	if (!dflt) {
		r = gpuctl_config_pool_find(cli->ctx, cli->config, o->pool, &idx);
		if (r >= 0)
			r = gpuctl_config_pool_allows(cli->ctx, cli->config, idx,
			                              (uint32_t)geteuid());
		if (r == -ENOENT) {
			free(map);
			cli_error("%s: --pool: %s", entry->name, gpuctl_errmsg(cli->ctx));
			return CLI_EXIT_USAGE;
		}
		if (r <= 0) {
			free(map);
			cli_error("%s: --pool %s: not allowed: %s", entry->name, o->pool,
			          r < 0 ? strerror(-r) : gpuctl_errmsg(cli->ctx));
			return CLI_EXIT_FAILURE;
		}
		want = (int)idx;
	}
	r = gpuctl_devset_new(&o->pool_set);
	for (size_t g = 0; r >= 0 && g < n; g++)
		if (map[g] == want)
			r = gpuctl_devset_add(o->pool_set, g, -1);
	free(map);
	if (r < 0) {
		cli_error("%s: %s", entry->name, strerror(-r));
		return CLI_EXIT_FAILURE;
	}
	o->req.pool = o->pool_set;
	o->req.pool_name = dflt ? "default" : o->pool;
	return 0;
}

int filters_open_lease_dir(struct cli *cli, const struct cmd_entry *entry, const char *path,
                           struct gpuctl_lease_dir **ret_dir)
{
	int r = filters_config(cli, entry);
	if (r)
		return r;
	path = filters_lease_dir_path(cli, path);
	r = gpuctl_lease_dir_open(cli->ctx, path, ret_dir);
	if (r < 0) {
		const char *msg = gpuctl_errmsg(cli->ctx);
		cli_error("%s: lease directory %s: %s", entry->name, path,
		          msg && msg[0] ? msg : strerror(-r));
		return CLI_EXIT_FAILURE;
	}
	r = config_trust(cli, entry, *ret_dir);
	if (r) {
		gpuctl_lease_dir_free(*ret_dir);
		*ret_dir = NULL;
	}
	return r;
}

/* Plain select: the devices leased now (and, for FILTERS_LEASE_EXCLUDE_FOREIGN, busy without
 * a lease) go to o->leased / o->foreign and the request. */
static int exclude_leased(struct cli *cli, const struct cmd_entry *entry, struct select_args *o,
                          enum filters_lease_mode mode, const struct gpuctl_snapshot *snap,
                          struct gpuctl_lease_dir *dir)
{
	const char *path = dir ? gpuctl_lease_dir_path(dir) : "";
	struct gpuctl_lease_list *list = NULL;
	struct gpuctl_lease_request lreq;
	size_t n_room = 0;
	int status = 0, r;

	if (!dir)
		return 0; /* no lease directory: nothing is leased */
	filters_lease_request(cli, o, &lreq);
	r = gpuctl_lease_list(cli->ctx, dir, snap, &list);
	if (r >= 0)
		r = gpuctl_devset_new(&o->leased);
	for (size_t i = 0; r >= 0 && i < gpuctl_lease_list_count(list); i++) {
		size_t gpu;
		int mig;
		enum gpuctl_lease_state state;
		const struct gpuctl_lease_owner *owner;
		const char *reason;
		bool taken;
		r = gpuctl_lease_list_get(list, i, &gpu, &mig, &state, &owner, &reason);
		/* As select-and-lease does: an unusable lock file is never granted, a shared
		 * device only to a shared request it has room for. */
		taken = state == GPUCTL_LEASE_HELD || state == GPUCTL_LEASE_UNUSABLE ||
		        (state == GPUCTL_LEASE_SHARED && !lreq.share_mem);
		if (!taken && lreq.share_mem &&
		    gpuctl_lease_list_room(list, i, snap, &lreq) < lreq.share_mem) {
			/* as select-and-lease says it: "(no room to share SIZE: 0,3)" */
			size_t l = strlen(o->no_room);
			taken = true;
			if (n_room++ < 8) {
				char label[48];
				filters_device_label(snap, gpu, mig, label, sizeof(label));
				snprintf(o->no_room + l, sizeof(o->no_room) - l, "%s%s",
				         n_room > 1 ? "," : "", label);
			} else if (n_room == 9 && l + 4 < sizeof(o->no_room)) {
				strcat(o->no_room, ",...");
			}
		}
		if (r >= 0 && taken) {
			r = gpuctl_devset_add(o->leased, gpu, mig);
			if (r == -EEXIST)
				r = 0;
		}
	}
	if (r >= 0 && mode == FILTERS_LEASE_EXCLUDE_FOREIGN && !o->ignore_foreign)
		r = gpuctl_lease_foreign(cli->ctx, dir, snap, &lreq, &o->foreign);
	if (r < 0) {
		const char *msg = gpuctl_errmsg(cli->ctx);
		cli_error("%s: lease directory %s: %s", entry->name, path,
		          msg && msg[0] ? msg : strerror(-r));
		status = CLI_EXIT_FAILURE;
	} else {
		o->req.leased = o->leased;
		o->req.foreign = o->foreign;
		if (cli->verbose)
			cli_error("%s: %zu device(s) leased in %s", entry->name,
			          gpuctl_devset_count(o->leased), path);
	}
	gpuctl_lease_list_free(list);
	return status;
}

/* The snapshot the request needs, with the outer allocation applied (again: a waiter retakes
 * it). Returns 0 or the exit status (error printed). */
int filters_avoid(struct select_args *o, const char *uuid)
{
	char **nv = realloc(o->avoid, (o->n_avoid + 1) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	o->avoid = nv;
	if (!(o->avoid[o->n_avoid] = strdup(uuid)))
		return -ENOMEM;
	if (o->n_avoid++ == 0)
		o->exclude_given = o->req.exclude;
	return 0;
}

/* req.exclude = --exclude plus the avoided GPUs that snap still lists by UUID (an id the
 * snapshot cannot resolve would make the request invalid; such a GPU is lost or unnamed, and
 * never chosen anyway). */
static int avoid_exclude(struct select_args *o, const struct gpuctl_snapshot *snap)
{
	size_t len = o->exclude_given ? strlen(o->exclude_given) + 1 : 1, n = 0;
	if (o->n_avoid == 0)
		return 0;
	for (size_t i = 0; i < o->n_avoid; i++)
		len += strlen(o->avoid[i]) + 1;
	char *buf = malloc(len);
	if (!buf)
		return CLI_EXIT_FAILURE;
	buf[0] = '\0';
	if (o->exclude_given)
		n += (size_t)snprintf(buf, len, "%s", o->exclude_given);
	for (size_t i = 0; i < o->n_avoid; i++)
		for (size_t g = 0; g < gpuctl_snapshot_gpu_count(snap); g++) {
			const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(snap, g);
			const char *u = gpuctl_gpu_str(gpu, GPUCTL_F_UUID);
			if (u && !gpuctl_gpu_lost(gpu) && strcmp(u, o->avoid[i]) == 0)
				n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "," : "", u);
		}
	free(o->exclude_buf);
	o->exclude_buf = buf;
	o->req.exclude = buf[0] ? buf : NULL;
	return 0;
}

int filters_health_report(struct cli *cli, const struct cmd_entry *entry,
                          const struct gpuctl_snapshot *snap, const char *lease_dir,
                          struct gpuctl_health_report **ret_rep)
{
	struct gpuctl_health_opts opts = GPUCTL_HEALTH_OPTS_INIT;
	struct gpuctl_xid_log *xids = NULL;
	struct gpuctl_snapshot *prev = NULL;
	char *state = NULL;
	int r = gpuctl_xid_log_new(&xids);

	if (r >= 0 && gpuctl_xid_log_read(cli->ctx, xids, snap, getenv("GPUCTL_KMSG")) < 0 &&
	    cli->verbose)
		fprintf(stderr, "gpuctl: debug: %s: no kernel log: %s\n", entry->name,
		        gpuctl_errmsg(cli->ctx));
	state = r < 0 ? NULL : filters_health_state_path(cli, lease_dir);
	if (state &&
	    gpuctl_health_state_read(cli->ctx, state, snap, xids, &prev, &opts.prev_age_s) < 0 &&
	    cli->verbose)
		fprintf(stderr, "gpuctl: debug: %s: no recorded health state: %s\n", entry->name,
		        gpuctl_errmsg(cli->ctx));
	opts.prev = prev;
	if (r >= 0)
		r = gpuctl_health_check(cli->ctx, snap, xids, &opts, ret_rep);
	for (size_t i = 0; r >= 0 && cli->verbose && i < gpuctl_health_finding_count(*ret_rep);
	     i++) {
		const struct gpuctl_health_finding *f = gpuctl_health_finding(*ret_rep, i);
		if (f->severity != GPUCTL_HEALTH_OK)
			fprintf(stderr, "gpuctl: info: %s: GPU %zu: %s %s: %s\n", entry->name,
			        f->gpu, gpuctl_health_severity_name(f->severity), f->check,
			        f->message);
	}
	gpuctl_snapshot_free(prev);
	gpuctl_xid_log_free(xids);
	free(state);
	if (r < 0) {
		cli_error("%s: health check: %s", entry->name, strerror(-r));
		return CLI_EXIT_FAILURE;
	}
	return 0;
}

/* The health verdicts of snap (filters_health_report): FAIL devices go to req.unhealthy (never
 * chosen), WARN ones to req.warned (chosen only when needed). Nothing with --allow-unhealthy. */
static int health_sets(struct cli *cli, const struct cmd_entry *entry, struct select_args *o,
                       const struct gpuctl_snapshot *snap)
{
	struct gpuctl_health_report *rep = NULL;
	int r, status;

	gpuctl_devset_free(o->unhealthy);
	gpuctl_devset_free(o->warned);
	o->unhealthy = o->warned = NULL;
	o->req.unhealthy = o->req.warned = NULL;
	if (o->req.allow_unhealthy)
		return 0;
	status = filters_health_report(cli, entry, snap, o->lease_dir, &rep);
	if (status)
		return status;
	r = gpuctl_devset_new(&o->unhealthy);
	if (r >= 0)
		r = gpuctl_devset_new(&o->warned);
	for (size_t g = 0; r >= 0 && g < gpuctl_snapshot_gpu_count(snap); g++) {
		int v = gpuctl_health_verdict(rep, g);
		if (v == GPUCTL_HEALTH_FAIL)
			r = gpuctl_devset_add(o->unhealthy, g, -1);
		else if (v == GPUCTL_HEALTH_WARN)
			r = gpuctl_devset_add(o->warned, g, -1);
	}
	gpuctl_health_report_free(rep);
	if (r < 0) {
		cli_error("%s: %s", entry->name, strerror(-r));
		return CLI_EXIT_FAILURE;
	}
	o->req.unhealthy = o->unhealthy;
	o->req.warned = o->warned;
	return 0;
}

static int take_snapshot(struct cli *cli, const struct cmd_entry *entry, struct select_args *o,
                         unsigned flags, const enum gpuctl_field *fields, size_t n,
                         struct gpuctl_snapshot **ret_snap)
{
	struct gpuctl_snapshot *snap = NULL;
	int status;

	status = cli_snapshot_fields(cli, flags, fields, n, &snap);
	if (status)
		return status;
	status = avoid_exclude(o, snap);
	if (status) {
		gpuctl_snapshot_free(snap);
		cli_error("%s: out of memory", entry->name);
		return CLI_EXIT_FAILURE;
	}
	status = health_sets(cli, entry, o, snap);
	if (status) {
		gpuctl_snapshot_free(snap);
		return status;
	}
	gpuctl_devset_free(o->within);
	o->within = NULL;
	o->req.within = NULL;
	if (!o->ignore_outer) {
		status = apply_outer(cli, entry, o, snap);
		if (status) {
			gpuctl_snapshot_free(snap);
			return status;
		}
	} else if (cli->verbose) {
		cli_error("%s: --ignore-outer: choosing among all %zu GPUs", entry->name,
		          gpuctl_snapshot_gpu_count(snap));
	}
	*ret_snap = snap;
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A pending SIGINT/SIGTERM on sfd: its number, else 0. */
static int pending_signal(int sfd)
{
	struct signalfd_siginfo si;

	if (sfd >= 0 && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		return (int)si.ssi_signo;
	return 0;
}

/* --wait (docs/leases.md "Waiting"): fails at once when no lease could ever satisfy the
 * request; else registers a ticket and tries select-and-lease whenever inotify says the locks
 * or the queue changed (and the state differs from the last failed try) or every
 * FILTERS_WAIT_FALLBACK_MS, retaking the snapshot before each try. SIGINT/SIGTERM end the wait
 * with 128+signal and nothing leased. Returns 0 with *snapp, *ret_sel, *ret_lease set, or the
 * exit status (error printed). */
static int wait_lease(struct cli *cli, const struct cmd_entry *entry, struct select_args *o,
                      unsigned flags, const enum gpuctl_field *fields, size_t nf,
                      struct gpuctl_snapshot **snapp, struct gpuctl_lease_dir *dir,
                      const struct gpuctl_lease_request *lreq, struct gpuctl_selection **ret_sel,
                      struct gpuctl_lease **ret_lease)
{
	struct gpuctl_select_request sreq = o->req;
	struct gpuctl_selection *sel = NULL;
	struct gpuctl_wait_ticket *ticket = NULL;
	char last[1024] = "";
	sigset_t set, old;
	int64_t deadline = o->wait_s < 0 ? INT64_MAX : now_ms() + (int64_t)o->wait_s * 1000;
	int sfd = -1, status = 0, sig = 0, r;

	/* "never": too few devices pass the static filters (outer allocation, --only, --exclude,
	 * --numa, --mig or whole GPUs; lost GPUs), leases, telemetry and health aside */
	sreq.min_free_mem = 0;
	sreq.max_util = -1;
	sreq.no_procs = false;
	sreq.allow_unhealthy = true;
	sreq.leased = NULL;
	sreq.foreign = NULL;
	r = gpuctl_select(cli->ctx, *snapp, &sreq, &sel);
	gpuctl_selection_free(sel);
	sel = NULL;
	if (r < 0) {
		const char *msg = gpuctl_errmsg(cli->ctx);

		cli_error("%s: %s%s", entry->name, r == -ENOSPC ? "can never be satisfied: " : "",
		          msg && msg[0] ? msg : strerror(-r));
		return r == -ENOSPC   ? CLI_EXIT_NOMATCH
		       : r == -EINVAL ? CLI_EXIT_USAGE
		                      : CLI_EXIT_FAILURE;
	}

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, &old);
	sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);

	r = gpuctl_wait_ticket_new(cli->ctx, dir, *snapp, &o->req, &ticket);
	if (r < 0) {
		cli_error("%s: lease directory %s: %s", entry->name, gpuctl_lease_dir_path(dir),
		          gpuctl_errmsg(cli->ctx));
		status = CLI_EXIT_FAILURE;
		goto out;
	}
	for (;;) {
		bool retry = false;

		r = gpuctl_select_and_lease_queued(cli->ctx, dir, *snapp, &o->req, lreq, ticket,
		                                   ret_sel, ret_lease);
		if (r == 0)
			break;
		if (r != -ENOSPC && r != -EBUSY) {
			const char *msg = gpuctl_errmsg(cli->ctx);

			cli_error("%s: %s", entry->name, msg && msg[0] ? msg : strerror(-r));
			status = r == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
			goto out;
		}
		(void)snprintf(last, sizeof(last), "%s", gpuctl_errmsg(cli->ctx));
		if (cli->verbose)
			cli_error("%s: waiting: %s", entry->name, last);
		while (!retry) {
			struct pollfd pfd[3] = {
			        {.fd = sfd, .events = POLLIN},
			        {.fd = o->wait_hangup_fd > 0 ? o->wait_hangup_fd : -1},
			        {.fd = gpuctl_wait_ticket_fd(ticket), .events = POLLIN}};
			int64_t left = deadline == INT64_MAX ? INT64_MAX : deadline - now_ms();
			int timeout = left < FILTERS_WAIT_FALLBACK_MS ? (int)(left < 0 ? 0 : left)
			                                              : FILTERS_WAIT_FALLBACK_MS;
			int k;

			if (left <= 0) {
				cli_error("%s: waited %ld s: %s", entry->name, o->wait_s, last);
				status = CLI_EXIT_NOMATCH;
				goto out;
			}
			k = poll(pfd, 3, timeout);
			if (k < 0 && errno != EINTR) {
				cli_error("%s: poll: %s", entry->name, strerror(errno));
				status = CLI_EXIT_FAILURE;
				goto out;
			}
			sig = pending_signal(sfd);
			if (!sig && k > 0 && (pfd[1].revents & (POLLERR | POLLHUP)))
				sig = SIGTERM; /* whoever waits for our report is gone */
			if (sig)
				goto out;
			if (k == 0) {
				retry = true; /* the fallback: telemetry, foreign processes, no
				                 inotify */
			} else if (k > 0 && (pfd[2].revents & POLLIN)) {
				gpuctl_wait_ticket_drain(ticket, dir);
				r = gpuctl_wait_ticket_changed(cli->ctx, dir, ticket);
				retry = r != 0;
			}
		}
		/* telemetry and processes may have changed: a fresh snapshot for the next try */
		{
			struct gpuctl_snapshot *fresh = NULL;

			status = take_snapshot(cli, entry, o, flags, fields, nf, &fresh);
			if (status)
				goto out;
			gpuctl_snapshot_free(*snapp);
			*snapp = fresh;
		}
	}
	sig = pending_signal(sfd);
out:
	gpuctl_wait_ticket_free(ticket);
	if (sig) {
		/* as a shell reports a job ended by the signal; nothing stays leased */
		gpuctl_selection_free(*ret_sel);
		gpuctl_lease_free(*ret_lease);
		*ret_sel = NULL;
		*ret_lease = NULL;
		status = 128 + sig;
	}
	if (sfd >= 0)
		(void)close(sfd);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return status;
}

int filters_select(struct cli *cli, const struct cmd_entry *entry, struct select_args *o,
                   unsigned extra_flags, struct gpuctl_snapshot **ret_snap,
                   struct gpuctl_selection **ret_sel)
{
	return filters_select_lease(cli, entry, o, FILTERS_LEASE_EXCLUDE, NULL, extra_flags,
	                            ret_snap, ret_sel, NULL, NULL);
}

int filters_select_lease(struct cli *cli, const struct cmd_entry *entry, struct select_args *o,
                         enum filters_lease_mode mode, const char *command, unsigned extra_flags,
                         struct gpuctl_snapshot **ret_snap, struct gpuctl_selection **ret_sel,
                         struct gpuctl_lease_dir **ret_dir, struct gpuctl_lease **ret_lease)
{
	enum gpuctl_field fields[NFIELDS_MAX];
	size_t n = 0;
	unsigned flags = GPUCTL_SNAP_TOPOLOGY | GPUCTL_SNAP_PROCESSES | extra_flags;
	struct gpuctl_snapshot *snap = NULL;
	struct gpuctl_selection *sel = NULL;
	struct gpuctl_lease_dir *dir = NULL;
	struct gpuctl_lease *lease = NULL;
	int status, r;

	for (size_t i = 0; i < sizeof(select_fields) / sizeof(select_fields[0]); i++)
		fields[n++] = select_fields[i];
	if (!o->req.allow_unhealthy) {
		flags |= GPUCTL_SNAP_HEALTH;
		/* the health facts behind "unhealthy" and WARN (read unless --allow-unhealthy) */
		size_t nh = 0;
		const enum gpuctl_field *hf = gpuctl_health_fields(&nh);
		for (size_t i = 0; i < nh; i++)
			fields[n++] = hf[i];
	}
	if (o->req.mig_profile || (!o->ignore_outer && outer_names_mig()))
		flags |= GPUCTL_SNAP_MIG;
	if (o->share && o->req.min_free_mem < o->share_mem)
		o->req.min_free_mem = o->share_mem; /* the declared memory must be free now, too */

	/* The lease directory first: with a shared one, it decides which configuration (and so
	 * which pools) governs the request. A plain select never creates it. */
	status = filters_config(cli, entry);
	if (status)
		return status;
	const char *path = filters_lease_dir_path(cli, o->lease_dir);
	struct stat st;
	if (mode == FILTERS_LEASE_TAKE || !(lstat(path, &st) < 0 && errno == ENOENT)) {
		status = filters_open_lease_dir(cli, entry, o->lease_dir, &dir);
		if (status)
			return status;
	} else if (cli->verbose) {
		cli_error("%s: lease directory %s does not exist: nothing is leased", entry->name,
		          path);
	}
	status = take_snapshot(cli, entry, o, flags, fields, n, &snap);
	if (status)
		goto fail;
	status = filters_pool(cli, entry, o, snap);
	if (status)
		goto fail;

	if (mode == FILTERS_LEASE_TAKE) {
		struct gpuctl_lease_request lreq;
		filters_lease_request(cli, o, &lreq);
		lreq.command = command;
		if (o->wait) {
			status = wait_lease(cli, entry, o, flags, fields, n, &snap, dir, &lreq,
			                    &sel, &lease);
			if (status)
				goto fail;
			r = 0;
		} else {
			r = gpuctl_select_and_lease(cli->ctx, dir, snap, &o->req, &lreq, &sel,
			                            &lease);
		}
	} else {
		status = exclude_leased(cli, entry, o, mode, snap, dir);
		if (status)
			goto fail;
		r = gpuctl_select(cli->ctx, snap, &o->req, &sel);
	}
	if (r < 0) {
		const char *msg = gpuctl_errmsg(cli->ctx);
		if (!msg || !msg[0])
			msg = strerror(-r);
		if (r == -ENOSPC && o->no_room[0]) {
			/* the library's words for it: the largest binary unit that is exact */
			static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
			uint64_t v = o->share_mem;
			size_t u = 0;
			while (u + 1 < sizeof(units) / sizeof(units[0]) && v >= 1024 &&
			       v % 1024 == 0) {
				v /= 1024;
				u++;
			}
			cli_error("%s: %s (no room to share %" PRIu64 " %s: %s)", entry->name, msg,
			          v, units[u], o->no_room);
		} else
			cli_error("%s: %s", entry->name, msg);
		status = r == -ENOSPC   ? CLI_EXIT_NOMATCH
		         : r == -EINVAL ? CLI_EXIT_USAGE
		                        : CLI_EXIT_FAILURE;
		goto fail;
	}
	*ret_snap = snap;
	*ret_sel = sel;
	if (ret_dir)
		*ret_dir = dir;
	else
		gpuctl_lease_dir_free(dir);
	if (ret_lease)
		*ret_lease = lease;
	else
		gpuctl_lease_free(lease);
	return 0;
fail:
	gpuctl_lease_dir_free(dir);
	gpuctl_snapshot_free(snap);
	return status;
}

void filters_done(struct select_args *o)
{
	gpuctl_devset_free(o->within);
	o->within = NULL;
	o->req.within = NULL;
	gpuctl_devset_free(o->leased);
	o->leased = NULL;
	o->req.leased = NULL;
	gpuctl_devset_free(o->foreign);
	o->foreign = NULL;
	o->req.foreign = NULL;
	gpuctl_devset_free(o->pool_set);
	o->pool_set = NULL;
	o->req.pool = NULL;
	gpuctl_devset_free(o->unhealthy);
	gpuctl_devset_free(o->warned);
	o->unhealthy = o->warned = NULL;
	o->req.unhealthy = o->req.warned = NULL;
}

void filters_free(struct select_args *o)
{
	filters_done(o);
	for (size_t i = 0; i < o->n_avoid; i++)
		free(o->avoid[i]);
	free(o->avoid);
	o->avoid = NULL;
	o->n_avoid = 0;
	if (o->exclude_buf)
		o->req.exclude = o->exclude_given;
	free(o->exclude_buf);
	o->exclude_buf = NULL;
}
