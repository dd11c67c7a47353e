// SPDX-License-Identifier: MIT
/*
 * cmd-ps.c: `gpuctl ps`: who holds which device (docs/leases.md), and which devices run
 * compute processes that belong to no lease.
 *
 * Decisions:
 * - One row per device (GPU, or MIG device as GPU:MIG) that is leased, unusable, uninitialised
 *   or busy with foreign processes; --all adds the free ones. The lease state is the kernel
 *   lock's (gpuctl_lease_list); the owner record is display only and shown only when the
 *   library trusts it ("unknown" owner otherwise).
 * - ps only reads: a missing lease directory means nothing is leased (it is not created, not
 *   even as root); an unsafe one is one line and exit 1, like every other command.
 * - Foreign processes are listed as user:pid(memory): the processes the library classifies as
 *   belonging to no lease of their device (gpuctl_foreign_scan, the rule select-and-lease
 *   applies, so ps never names a process the allocation call would not, or the reverse); a
 *   device is "busy" when they pass the configuration's thresholds.
 * - JSON (docs/json.md) has the same rows with every value, unavailable ones as null.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "format.h"
#include "hostproc.h"
#include "idle-view.h"
#include "ps.h"
#include "util.h"

enum {
	OPT_ALL = 0x100,
	OPT_LEASE_DIR,
	OPT_WAITING,
	OPT_JOB,
	OPT_WORKLOAD,
};

static const struct option ps_options[] = {
        CMD_OPTION_FORMAT,
        CMD_OPTION_COLOR,
        {"all", no_argument, NULL, OPT_ALL},
        {"lease-dir", required_argument, NULL, OPT_LEASE_DIR},
        {"waiting", no_argument, NULL, OPT_WAITING},
        {"job", required_argument, NULL, OPT_JOB},
        {"workload", required_argument, NULL, OPT_WORKLOAD},
        CMD_OPTION_HELP,
        {NULL, 0, NULL, 0},
};

struct ps_row {
	size_t gpu;
	int mig;
	enum gpuctl_lease_state state;
	const struct gpuctl_lease_owner *owner; /* borrowed from the list, NULL if unknown */
	const char *reason;                     /* borrowed, NULL if none */
	bool foreign;                           /* runs processes of no lease */
	bool busy;                              /* ... enough to count as busy (thresholds) */
	uint64_t declared;                      /* SHARED: bytes the shared leases declare */
	uint64_t room;                          /* SHARED: bytes a new shared lease could declare */
	const struct gpuctl_lease_owner *const *sh; /* SHARED: the holders (borrowed) */
	size_t n_sh;                                /* entries in sh */
};

struct ps_data {
	struct ps_row *rows;
	size_t nrows;
	struct gpuctl_foreign *foreign; /* every process classified (gpuctl_foreign_scan), owned */
	const char **pool_of; /* each GPU's pool name (docs/config.md); NULL: no pools configured */
	const struct gpuctl_config *cfg; /* the configuration (its idle actions), borrowed */
	int *verdict;                    /* each GPU's health verdict (docs/health.md) */
	struct ps_wls wls;               /* the workloads read (ps-workload.c) */
	const struct wl_filter *filter;  /* --job, --workload */
	struct gpuctl_idle *idle;        /* one sample's idle cases (docs/idle.md), owned; NULL */
};

static const char *verdict_name(const struct ps_data *d, const struct ps_row *row)
{
	const char *n = d->verdict ? gpuctl_health_severity_name(d->verdict[row->gpu]) : NULL;
	return n ? n : "?";
}

/* Whether a row's GPU is OK (rows of free, healthy devices are shown only with --all). */
static bool healthy(const struct ps_data *d, const struct ps_row *row)
{
	return !d->verdict || d->verdict[row->gpu] == GPUCTL_HEALTH_OK;
}

/* Each GPU's health verdict, as gpuctl health gives it. 0, or the exit status (error printed). */
static int verdicts_of(struct cli *cli, struct ps_data *d, const struct gpuctl_snapshot *snap)
{
	struct gpuctl_health_report *rep = NULL;
	size_t n = gpuctl_snapshot_gpu_count(snap);
	int r = gpuctl_site_health(cli->ctx, cli->site, snap, &rep);
	if (r < 0) {
		cli_error("ps: health check: %s", gpuctl_errmsg(cli->ctx));
		return CLI_EXIT_FAILURE;
	}
	d->verdict = calloc(n ? n : 1, sizeof(*d->verdict));
	for (size_t g = 0; d->verdict && g < n; g++)
		d->verdict[g] = gpuctl_health_verdict(rep, g);
	gpuctl_health_report_free(rep);
	if (!d->verdict) {
		cli_error("ps: out of memory");
		return CLI_EXIT_FAILURE;
	}
	return 0;
}

/* The holders of a row: its shared holders, else its owner (none when unknown). */
static const struct gpuctl_lease_owner *const *holders(const struct ps_row *row, size_t *ret_n)
{
	*ret_n = row->n_sh ? row->n_sh : row->owner ? 1 : 0;
	return row->n_sh ? row->sh : &row->owner;
}

/* A row's device's UUID; NULL when unknown. */
static const char *row_uuid(const struct gpuctl_snapshot *snap, const struct ps_row *row)
{
	const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, row->gpu);
	const struct gpuctl_mig *m =
	        g && row->mig >= 0 ? gpuctl_gpu_mig(g, (size_t)row->mig) : NULL;
	return m ? gpuctl_mig_uuid(m) : g ? gpuctl_gpu_str(g, GPUCTL_F_UUID) : NULL;
}

/* Whether an idle case holds for a row's device (docs/idle.md). */
static bool row_idle(const struct ps_data *d, const struct gpuctl_snapshot *snap,
                     const struct ps_row *row)
{
	const char *uuid = row_uuid(snap, row);
	for (int c = 0; uuid && c < GPUCTL_IDLE_CASES; c++)
		if (gpuctl_idle_get(d->idle, uuid, (enum gpuctl_idle_case)c, NULL) == 1)
			return true;
	return false;
}

/* Whether a row is listed: rows of free, healthy devices without foreign processes only with
 * --all (a device idle by docs/idle.md is listed); with --job or --workload, only those one of
 * whose workloads matches. */
static bool row_shown(struct ps_data *d, const struct gpuctl_snapshot *snap,
                      const struct ps_row *row, bool all)
{
	size_t nh;
	const struct gpuctl_lease_owner *const *h = holders(row, &nh);

	if (!all && row->state == GPUCTL_LEASE_FREE && !row->foreign && healthy(d, row) &&
	    !row_idle(d, snap, row))
		return false;
	return ps_device_matches(&d->wls, d->filter, snap, row->gpu, row->mig, h, nh);
}

/* A row's pool: its GPU's pool, "default" for the GPUs no pool lists. */
static const char *pool_name(const struct ps_data *d, const struct ps_row *row)
{
	return d->pool_of ? d->pool_of[row->gpu] : "default";
}

/* Fills d->pool_of from the configuration. 0, or the exit status (error printed). */
static int pools_of(struct cli *cli, struct ps_data *d, const struct gpuctl_snapshot *snap)
{
	size_t n = gpuctl_snapshot_gpu_count(snap);
	const struct gpuctl_config *cfg = gpuctl_site_config(cli->site);
	int *map = NULL;
	if (gpuctl_config_pool_count(cfg) == 0)
		return 0;
	int r = gpuctl_config_pool_map(cli->ctx, cfg, snap, &map);
	if (r < 0) {
		cli_error("ps: %s", gpuctl_errmsg(cli->ctx));
		return r == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
	}
	d->pool_of = calloc(n ? n : 1, sizeof(*d->pool_of));
	for (size_t g = 0; d->pool_of && g < n; g++) {
		d->pool_of[g] = "default";
		if (map[g] >= 0)
			(void)gpuctl_config_pool_get(cfg, (size_t)map[g], &d->pool_of[g], NULL,
			                             NULL, NULL, NULL);
	}
	free(map);
	if (!d->pool_of) {
		cli_error("ps: out of memory");
		return CLI_EXIT_FAILURE;
	}
	return 0;
}

static const char *state_name(const struct ps_row *row)
{
	switch (row->state) {
	case GPUCTL_LEASE_FREE:
		return row->busy ? "busy" : "free";
	case GPUCTL_LEASE_HELD:
		return "leased";
	case GPUCTL_LEASE_SHARED:
		return "shared";
	case GPUCTL_LEASE_UNUSABLE:
		return "unusable";
	case GPUCTL_LEASE_UNINITIALISED:
		return "uninitialised";
	}
	return "unknown";
}

/* A state's colour: unusable bold red, uninitialised and busy yellow (as health's FAIL and
 * WARN), the others none. */
static const char *state_sgr(const struct ps_row *row)
{
	if (row->state == GPUCTL_LEASE_UNUSABLE)
		return FORMAT_SGR_BOLD_RED;
	if (row->state == GPUCTL_LEASE_UNINITIALISED ||
	    (row->state == GPUCTL_LEASE_FREE && row->busy))
		return FORMAT_SGR_YELLOW;
	return NULL;
}

/* Appends the foreign processes of a row as "user:pid(mem)" to buf. */
static void foreign_text(const struct ps_data *d, const struct gpuctl_snapshot *snap,
                         const struct ps_row *row, char *buf, size_t size)
{
	const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, row->gpu);
	size_t used = strlen(buf);
	for (size_t i = 0; g && i < gpuctl_gpu_proc_count(g); i++) {
		const struct gpuctl_proc *p = gpuctl_gpu_proc(g, i);
		if (!ps_proc_on(g, p, row->mig) || !gpuctl_foreign_proc(d->foreign, row->gpu, i))
			continue;
		const char *user = gpuctl_proc_user(p);
		int64_t mem;
		char memtext[32] = "";
		if (gpuctl_proc_used_memory(p, &mem) >= 0)
			snprintf(memtext, sizeof(memtext), "(%" PRId64 "MiB)", mem / (1024 * 1024));
		int n = snprintf(buf + used, size - used, "%s%s:%" PRIu32 "%s", used ? " " : "",
		                 user ? user : "?", gpuctl_proc_pid(p), memtext);
		if (n < 0 || (size_t)n >= size - used)
			return;
		used += (size_t)n;
	}
}

static json_t *foreign_json(struct ps_data *d, const struct gpuctl_snapshot *snap,
                            const struct ps_row *row)
{
	const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, row->gpu);
	json_t *arr = json_array();
	if (!arr)
		return NULL;
	for (size_t i = 0; g && i < gpuctl_gpu_proc_count(g); i++) {
		const struct gpuctl_proc *p = gpuctl_gpu_proc(g, i);
		if (!ps_proc_on(g, p, row->mig) || !gpuctl_foreign_proc(d->foreign, row->gpu, i))
			continue;
		json_t *o = ps_proc_json(&d->wls, p);
		if (!o || json_put_host_facts(o, gpuctl_proc_pid(p)) < 0 ||
		    json_array_append_new(arr, o) < 0) {
			json_decref(o);
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

/* What a lease's age counts from: when it was taken, else (an older record) when its holder
 * started. Not the holder's start alone: a holder that waited in line was not leasing. */
static uint64_t lease_age_base(const struct gpuctl_lease_owner *w)
{
	return w->leased_since ? w->leased_since : w->start_time;
}

/* A lease holder's facts (docs/json.md); NULL when out of memory. */
static json_t *owner_json(struct ps_data *d, const struct gpuctl_lease_owner *w)
{
	time_t now = time(NULL);
	uint64_t since = lease_age_base(w);
	int rage = since && now >= 0 && (uint64_t)now >= since ? 0 : -ENODATA;
	json_t *owner = json_object();
	if (!owner || json_put(owner, "uid", json_integer(w->uid)) < 0 ||
	    json_put(owner, "user", json_string_or_null(w->user)) < 0 ||
	    json_put(owner, "pid", json_integer(w->pid)) < 0 ||
	    json_put(owner, "job_pid", json_int_or_null(w->job_pid ? 0 : -ENODATA, w->job_pid)) <
	            0 ||
	    json_put(owner, "command", json_string_or_null(w->command)) < 0 ||
	    json_put(owner, "label", json_string_or_null(w->label)) < 0 ||
	    json_put(owner, "start_time",
	             json_int_or_null(w->start_time ? 0 : -ENODATA, (int64_t)w->start_time)) < 0 ||
	    json_put(owner, "leased_since",
	             json_int_or_null(w->leased_since ? 0 : -ENODATA, (int64_t)w->leased_since)) <
	            0 ||
	    json_put(owner, "age_s", json_int_or_null(rage, (int64_t)((uint64_t)now - since))) <
	            0 ||
	    json_put(owner, "share_mem",
	             json_int_or_null(w->share_mem ? 0 : -ENODATA, (int64_t)w->share_mem)) < 0 ||
	    json_put(owner, "host_pid", json_integer(w->job_pid ? w->job_pid : w->pid)) < 0 ||
	    json_put_host_facts(owner, w->job_pid ? w->job_pid : w->pid) < 0 ||
	    json_put(owner, "workload", wl_json(ps_holder_workload(&d->wls, w))) < 0) {
		json_decref(owner);
		return NULL;
	}
	return owner;
}

static json_t *row_json(struct ps_data *d, const struct gpuctl_snapshot *snap,
                        const struct ps_row *row)
{
	char label[48];
	const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, row->gpu);
	const struct gpuctl_mig *m =
	        g && row->mig >= 0 ? gpuctl_gpu_mig(g, (size_t)row->mig) : NULL;
	const char *uuid = row_uuid(snap, row);
	int64_t midx = row->mig;
	int rmi = -ENODATA;
	if (m) {
		(void)gpuctl_mig_int(m, GPUCTL_MIG_INDEX, &midx); /* else the position on the GPU */
		rmi = 0;
	}
	gpuctl_device_label(snap, row->gpu, row->mig, label, sizeof(label));
	json_t *o = json_object();
	json_t *owner = row->owner ? owner_json(d, row->owner) : json_null();
	json_t *shares = json_array();
	if (!o || !owner || !shares)
		goto fail;
	for (size_t k = 0; k < row->n_sh; k++)
		if (json_array_append_new(shares, owner_json(d, row->sh[k])) < 0)
			goto fail;
	if (json_put(o, "device", json_text(label)) < 0 ||
	    json_put(o, "index", json_integer((json_int_t)row->gpu)) < 0 ||
	    json_put(o, "mig_index", json_int_or_null(rmi, midx)) < 0 ||
	    json_put(o, "uuid", json_string_or_null(uuid)) < 0 ||
	    json_put(o, "pci_bus_id",
	             json_string_or_null(g ? gpuctl_gpu_str(g, GPUCTL_F_PCI_BUS_ID) : NULL)) < 0 ||
	    json_put(o, "name", json_string_or_null(g ? gpuctl_gpu_str(g, GPUCTL_F_NAME) : NULL)) <
	            0 ||
	    json_put(o, "state", json_text(state_name(row))) < 0 ||
	    json_put(o, "pool", json_text(pool_name(d, row))) < 0 ||
	    json_put(o, "health", json_text(verdict_name(d, row))) < 0 ||
	    json_put(o, "reason", json_string_or_null(row->reason)) < 0 ||
	    json_put(o, "shared_declared",
	             json_int_or_null(row->state == GPUCTL_LEASE_SHARED ? 0 : -ENODATA,
	                              (int64_t)row->declared)) < 0 ||
	    json_put(o, "shared_room",
	             json_int_or_null(row->state == GPUCTL_LEASE_SHARED ? 0 : -ENODATA,
	                              (int64_t)row->room)) < 0 ||
	    json_put(o, "busy", json_boolean(row->busy)) < 0)
		goto fail;
	if (json_put(o, "owner", owner) < 0) {
		owner = NULL;
		goto fail;
	}
	owner = NULL;
	if (json_put(o, "shares", shares) < 0) {
		shares = NULL;
		goto fail;
	}
	shares = NULL;
	if (json_put(o, "idle", idle_view_json(d->idle, uuid, true)) < 0 ||
	    json_put(o, "foreign", row->foreign ? foreign_json(d, snap, row) : json_array()) < 0 ||
	    json_put(o, "processes",
	             ps_processes_json(&d->wls, snap, row->gpu, row->mig, d->foreign)) < 0)
		goto fail;
	return o;
fail:
	json_decref(owner);
	json_decref(shares);
	json_decref(o);
	return NULL;
}

static int print_json(struct ps_data *d, const struct gpuctl_snapshot *snap, const char *path,
                      bool exists, bool all)
{
	json_t *root = json_object(), *arr = json_array();
	int r = -ENOMEM;
	if (!root || !arr) {
		json_decref(root);
		json_decref(arr);
		return -ENOMEM;
	}
	if (json_put(root, "lease_dir", json_text(path)) < 0 ||
	    json_put(root, "lease_dir_exists", json_boolean(exists)) < 0) {
		json_decref(arr);
		goto out;
	}
	for (size_t i = 0; i < d->nrows; i++) {
		const struct ps_row *row = &d->rows[i];
		if (!row_shown(d, snap, row, all))
			continue;
		json_t *o = row_json(d, snap, row);
		if (!o || json_array_append_new(arr, o) < 0) {
			json_decref(arr);
			goto out;
		}
	}
	if (json_put(root, "devices", arr) < 0)
		goto out;
	r = json_print(root);
out:
	json_decref(root);
	return r;
}

/* Appends "; " (when note is not empty) and the formatted text to note. */
static void note_add(char *note, size_t size, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static void note_add(char *note, size_t size, const char *fmt, ...)
{
	size_t u = strlen(note);
	va_list ap;
	if (u && u + 2 < size) {
		memcpy(note + u, "; ", 3);
		u += 2;
	}
	if (u >= size)
		return;
	va_start(ap, fmt);
	vsnprintf(note + u, size - u, fmt, ap);
	va_end(ap);
}

/* The %CPU and RSS cells of a holder: the host facts (hostproc_facts) of its job, or of the
 * holder itself when it runs none (select --hold); "-" when /proc does not show it. */
static void host_cells(const struct gpuctl_lease_owner *w, char *cpu, char *rss, size_t size)
{
	struct hostproc_facts hf;
	uint32_t pid = w->job_pid ? w->job_pid : w->pid;

	if (pid > 0 && hostproc_facts((pid_t)pid, &hf) == 0) {
		snprintf(cpu, size, "%.1f", hf.cpu_percent);
		format_bytes_compact(hf.host_memory, rss, size);
	}
}

/* COMMAND in the table: at most this many characters, a longer command line its first
 * PS_COMMAND_WIDTH - 3 and "..." (docs: README "gpuctl ps"), control characters as '?'
 * (format_cell_text); JSON keeps it whole. */
#define PS_COMMAND_WIDTH 40

/* The cells of one line of the table that come from the holder and the row's notes. */
struct holder_cells {
	char user[32 * 4 + 1], pid[24], job[24], age[24], cpu[32], rss[32];
	char workload[PS_WORKLOAD_WIDTH * 4 + 16]; /* ps_workload_cell */
	char command[PS_COMMAND_WIDTH * 4 + 1];    /* cut to PS_COMMAND_WIDTH characters */
	char label[PS_COMMAND_WIDTH * 4 + 1];      /* the holder's, as COMMAND; "-" */
	char note[1024];                           /* "" for none */
};

/* The holder's cells: w's facts, "-" for what it lacks, or (w NULL) "unknown" as the user of a
 * leased device whose holder cannot be shown. */
static void holder_facts(const struct ps_row *row, const struct gpuctl_lease_owner *w,
                         struct holder_cells *c)
{
	*c = (struct holder_cells){.user = "-",
	                           .pid = "-",
	                           .job = "-",
	                           .age = "-",
	                           .cpu = "-",
	                           .rss = "-",
	                           .command = "-",
	                           .workload = "-",
	                           .label = "-"};
	if (!w) {
		if (row->state == GPUCTL_LEASE_HELD || row->state == GPUCTL_LEASE_SHARED)
			snprintf(c->user, sizeof(c->user), "unknown");
		return;
	}
	if (w->user)
		format_cell_text(w->user, 32, c->user, sizeof(c->user));
	else
		snprintf(c->user, sizeof(c->user), "%" PRIu32, w->uid);
	snprintf(c->pid, sizeof(c->pid), "%" PRIu32, w->pid);
	if (w->job_pid)
		snprintf(c->job, sizeof(c->job), "%" PRIu32, w->job_pid);
	if (w->command && w->command[0])
		format_cell_text(w->command, PS_COMMAND_WIDTH, c->command, sizeof(c->command));
	if (w->label && w->label[0])
		format_cell_text(w->label, PS_COMMAND_WIDTH, c->label, sizeof(c->label));
	format_age(lease_age_base(w), c->age, sizeof(c->age));
	host_cells(w, c->cpu, c->rss, sizeof(c->cpu));
}

/* What the agent will do with holder w's lease (docs/idle.md, "Acting on idle leases"), by its
 * pool's idle actions and the one rule of an idle lease (idle_view_lease_ms). */
static void plan_note(const struct ps_data *d, const struct gpuctl_snapshot *snap,
                      const struct ps_row *row, const struct gpuctl_lease_owner *w, char *note,
                      size_t size)
{
	const char *pool = pool_name(d, row);
	struct gpuctl_config_idle c;
	size_t pi = SIZE_MAX;
	char plan[160];

	if (strcmp(pool, "default") != 0 && gpuctl_config_pool_find(NULL, d->cfg, pool, &pi) < 0)
		pi = SIZE_MAX;
	gpuctl_config_pool_idle(d->cfg, pi, &c);
	idle_view_plan_text(&c, w, idle_view_lease_ms(d->idle, snap, row->gpu, row->mig) >= 0,
	                    row->state == GPUCTL_LEASE_SHARED, (double)time(NULL), plan,
	                    sizeof(plan));
	if (plan[0])
		note_add(note, size, "%s", plan);
}

/* The NOTE of the k-th line of row (holder w): why the device is unusable, what w declares,
 * and on the first line the shared room and the foreign processes. */
static void holder_note(const struct ps_data *d, const struct gpuctl_snapshot *snap,
                        const struct ps_row *row, const struct gpuctl_lease_owner *w, size_t k,
                        char *note, size_t size)
{
	char bytes[32];

	note[0] = '\0';
	if (row->reason)
		snprintf(note, size, "%s", row->reason);
	if (w && w->share_mem) {
		format_bytes(w->share_mem, bytes, sizeof(bytes));
		note_add(note, size, "declares %s", bytes);
	}
	if (row->state == GPUCTL_LEASE_SHARED && k == 0) {
		char room[32];
		format_bytes(row->declared, bytes, sizeof(bytes));
		format_bytes(row->room, room, sizeof(room));
		note_add(note, size, "%s declared in all, %s left to share", bytes, room);
	}
	if (row->foreign && k == 0) {
		note_add(note, size,
		         "%s: ", row->busy ? "foreign" : "foreign (below the busy thresholds)");
		foreign_text(d, snap, row, note + strlen(note), size - strlen(note));
	}
	if (k == 0) {
		char idle[96];
		idle_view_text(d->idle, row_uuid(snap, row), true, idle, sizeof(idle));
		if (idle[0])
			note_add(note, size, "%s", idle);
	}
	if (w)
		plan_note(d, snap, row, w, note, size);
}

/* The table's columns; POOL only when the configuration has pools. */
enum { NHEAD = 15, COL_STATE = 2, COL_HEALTH = 3, COL_POOL = 4 };

/* Adds cells (NHEAD of them) as a line of t, without POOL when skip_pool. */
static int add_line(struct text_table *t, const char *const *cells, bool skip_pool)
{
	const char *line[NHEAD];

	for (size_t c = 0, j = 0; c < NHEAD; c++)
		if (!(skip_pool && c == COL_POOL))
			line[j++] = cells[c];
	return text_table_add(t, line);
}

/* The lines of one device row: one per holder of a shared device (at least one, holders
 * unknown or not). */
static int add_row_lines(struct text_table *t, struct ps_data *d,
                         const struct gpuctl_snapshot *snap, const struct ps_row *row)
{
	const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, row->gpu);
	const struct gpuctl_mig *m =
	        g && row->mig >= 0 ? gpuctl_gpu_mig(g, (size_t)row->mig) : NULL;
	const char *uuid = m ? gpuctl_mig_uuid(m) : g ? gpuctl_gpu_str(g, GPUCTL_F_UUID) : NULL;
	char label[48], suuid[48];
	int r = 0;

	gpuctl_device_label(snap, row->gpu, row->mig, label, sizeof(label));
	format_short_uuid(uuid, suuid, sizeof(suuid));
	for (size_t k = 0; r >= 0 && k < (row->n_sh ? row->n_sh : 1); k++) {
		const struct gpuctl_lease_owner *w = row->n_sh ? row->sh[k] : row->owner;
		struct holder_cells c;

		holder_facts(row, w, &c);
		holder_note(d, snap, row, w, k, c.note, sizeof(c.note));
		/* the holder's workload, and on the first line the processes' */
		ps_workload_cell(&d->wls, snap, row->gpu, row->mig, w, k == 0, c.workload,
		                 sizeof(c.workload));
		const char *cells[NHEAD] = {label,
		                            suuid,
		                            state_name(row),
		                            verdict_name(d, row),
		                            pool_name(d, row),
		                            c.user,
		                            c.pid,
		                            c.job,
		                            c.workload,
		                            c.cpu,
		                            c.rss,
		                            c.command,
		                            c.label,
		                            c.age,
		                            c.note[0] ? c.note : "-"};
		r = add_line(t, cells, !d->pool_of);
		if (r >= 0) {
			text_table_color(t, COL_STATE, state_sgr(row));
			text_table_color(t, COL_HEALTH,
			                 d->verdict ? format_verdict_sgr(d->verdict[row->gpu])
			                            : NULL);
		}
	}
	return r;
}

static int print_table(struct ps_data *d, const struct gpuctl_snapshot *snap, bool all, bool color)
{
	static const char *const head[NHEAD] = {"DEVICE", "UUID",    "STATE", "HEALTH",   "POOL",
	                                        "USER",   "PID",     "JOB",   "WORKLOAD", "%CPU",
	                                        "RSS",    "COMMAND", "LABEL", "AGE",      "NOTE"};
	struct text_table *t = NULL;
	size_t shown = 0;
	int r = text_table_new(d->pool_of ? NHEAD : NHEAD - 1, &t);
	if (r < 0)
		return r;
	r = add_line(t, head, !d->pool_of);
	for (size_t i = 0; r >= 0 && i < d->nrows; i++) {
		if (!row_shown(d, snap, &d->rows[i], all))
			continue;
		r = add_row_lines(t, d, snap, &d->rows[i]);
		shown++;
	}
	if (r >= 0) {
		if (shown)
			text_table_print(t, stdout, color);
		else if (wl_filter_active(d->filter))
			puts("no device is used by a workload that matches");
		else
			puts(all ? "no devices"
			         : "no device is leased, unusable, busy, unhealthy or idle (--all "
			           "lists "
			           "every device)");
	}
	text_table_free(t);
	return r;
}

/* Rows for every device of snap when there is no lease directory: all free. */
static int rows_without_dir(struct ps_data *d, const struct gpuctl_snapshot *snap)
{
	size_t n = 0, ngpu = gpuctl_snapshot_gpu_count(snap);
	for (size_t i = 0; i < ngpu; i++)
		n += 1 + gpuctl_gpu_mig_count(gpuctl_snapshot_gpu(snap, i));
	d->rows = calloc(n ? n : 1, sizeof(*d->rows));
	if (!d->rows)
		return -ENOMEM;
	for (size_t i = 0; i < ngpu; i++) {
		const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, i);
		d->rows[d->nrows++] = (struct ps_row){.gpu = i, .mig = -1};
		for (size_t k = 0; k < gpuctl_gpu_mig_count(g); k++)
			d->rows[d->nrows++] = (struct ps_row){.gpu = i, .mig = (int)k};
	}
	return 0;
}

static int rows_from_list(struct ps_data *d, const struct gpuctl_lease_list *list,
                          const struct gpuctl_snapshot *snap,
                          const struct gpuctl_lease_request *lreq)
{
	size_t n = gpuctl_lease_list_count(list);
	d->rows = calloc(n ? n : 1, sizeof(*d->rows));
	if (!d->rows)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct ps_row *row = &d->rows[d->nrows];
		int r = gpuctl_lease_list_get(list, i, &row->gpu, &row->mig, &row->state,
		                              &row->owner, &row->reason);
		if (r >= 0)
			r = gpuctl_lease_list_shares(list, i, &row->declared, &row->sh, &row->n_sh);
		if (r < 0)
			return r;
		if (row->state == GPUCTL_LEASE_SHARED)
			row->room = gpuctl_lease_list_room(list, i, snap, lreq);
		d->nrows++;
	}
	return 0;
}

struct ps_args {
	const char *lease_dir;   /* --lease-dir, NULL: the site's */
	bool json;               /* --format json */
	bool all;                /* --all: the free, healthy devices too */
	bool waiting;            /* --waiting: the waiters instead (ps-waiting.c) */
	struct wl_filter filter; /* --job, --workload: the rows kept */
};

/* The options into a: CMD_GO_ON, or the exit status to return now (--help, a usage error). */
static int parse_options(struct cli *cli, int argc, char **argv, struct ps_args *a)
{
	int opt, status;

	while ((opt = cmd_getopt(&cmd_ps_entry, argc, argv)) != -1) {
		switch (opt) {
		case CMD_OPT_FORMAT: {
			int i;

			if ((status = cmd_parse_format(&cmd_ps_entry, optarg, &i)))
				return status;
			a->json = i == 1;
			break;
		}
		case OPT_ALL:
			a->all = true;
			break;
		case OPT_WAITING:
			a->waiting = true;
			break;
		case OPT_JOB:
			if (wl_filter_job(&a->filter, optarg) < 0)
				return cmd_usage_error(
				        &cmd_ps_entry,
				        "--job: '%s': not a Slurm job (J, J_T or J.S, "
				        "J a job id, T an array task, S a step)",
				        optarg);
			break;
		case OPT_WORKLOAD:
			if (wl_filter_pattern(&a->filter, optarg) < 0)
				return cmd_usage_error(&cmd_ps_entry,
				                       "--workload: empty pattern (KIND:PATTERN, "
				                       "PATTERN or KIND:)");
			break;
		case OPT_LEASE_DIR:
			if (!optarg[0])
				return cmd_usage_error(&cmd_ps_entry, "--lease-dir: empty path");
			a->lease_dir = optarg;
			break;
		case CMD_OPT_COLOR:
			if ((status = cli_color_option(cli, &cmd_ps_entry, optarg)))
				return status;
			break;
		case 'h':
			cmd_usage(&cmd_ps_entry, stdout);
			return CLI_EXIT_OK;
		default:
			return cmd_bad_option(&cmd_ps_entry, opt, argv);
		}
	}
	if (optind < argc)
		return cmd_usage_error(&cmd_ps_entry, "unexpected argument '%s'", argv[optind]);
	if (a->waiting && a->all)
		return cmd_usage_error(&cmd_ps_entry, "--waiting and --all conflict");
	if (a->waiting && wl_filter_active(&a->filter))
		return cmd_usage_error(&cmd_ps_entry, "--waiting and %s conflict",
		                       a->filter.job_set ? "--job" : "--workload");
	return CMD_GO_ON;
}

static void ps_data_free(struct ps_data *d)
{
	free(d->rows);
	gpuctl_foreign_free(d->foreign);
	gpuctl_idle_free(d->idle);
	free(d->pool_of);
	free(d->verdict);
	ps_wls_free(&d->wls);
}

/* The snapshot ps reads: processes and MIG devices; memory size for the room left on shared
 * devices, utilisation for the busy thresholds, and the facts of the verdict column, as
 * gpuctl health reads them. 0 or the exit status. */
static int ps_snapshot(struct cli *cli, struct gpuctl_snapshot **ret_snap)
{
	enum gpuctl_field fields[4 + GPUCTL__F_COUNT] = {GPUCTL_F_MIG_MODE, GPUCTL_F_MEMORY_TOTAL,
	                                                 GPUCTL_F_UTIL_GPU, GPUCTL_F_MEMORY_USED};
	size_t nfields = 4, nh = 0;
	const enum gpuctl_field *hf = gpuctl_health_fields(&nh);

	for (size_t i = 0; i < nh; i++)
		fields[nfields++] = hf[i];
	return cli_snapshot_fields(
	        cli,
	        GPUCTL_SNAP_PROCESSES | GPUCTL_SNAP_MIG |
	                gpuctl_health_snapshot_flags(gpuctl_site_health_state_path(cli->site)),
	        fields, nfields, ret_snap);
}

/* d's rows: each device's lease state (*ret_list, which the rows borrow from; every device
 * free without a lease directory) and its foreign processes. 0 or the exit status. */
static int read_rows(struct cli *cli, struct ps_data *d, const struct gpuctl_snapshot *snap,
                     struct gpuctl_lease_list **ret_list)
{
	struct gpuctl_lease_dir *dir = gpuctl_site_lease_dir(cli->site);
	struct gpuctl_lease_request lreq = GPUCTL_LEASE_REQUEST_INIT;
	int r;

	(void)gpuctl_site_lease_defaults(cli->site, &lreq); /* GPUCTL_LEASE_REQUEST_INIT'ed */
	if (dir) {
		r = gpuctl_lease_list(cli->ctx, dir, snap, ret_list);
		if (r >= 0)
			r = rows_from_list(d, *ret_list, snap, &lreq);
	} else {
		r = rows_without_dir(d, snap); /* no lease directory: nothing is leased */
	}
	/* every foreign process is shown (by the rule leases follow; without a lease directory
	 * every process is foreign); the thresholds say which make a device busy */
	if (r >= 0)
		r = gpuctl_foreign_scan(cli->ctx, dir, snap, &lreq, &d->foreign);
	if (r < 0) {
		const char *msg = gpuctl_errmsg(cli->ctx);
		cli_error("ps: lease directory %s: %s", gpuctl_site_lease_dir_path(cli->site),
		          msg && msg[0] ? msg : strerror(-r));
		return r == -EAGAIN ? CLI_EXIT_BUSY : CLI_EXIT_FAILURE;
	}
	for (size_t i = 0; i < d->nrows; i++) {
		struct ps_row *row = &d->rows[i];
		row->foreign = gpuctl_foreign_device(d->foreign, row->gpu, row->mig);
		row->busy = gpuctl_foreign_busy(d->foreign, row->gpu, row->mig);
	}
	return 0;
}

static int run_ps(struct cli *cli, const struct ps_args *a)
{
	_cleanup_(gpuctl_snapshot_freep) struct gpuctl_snapshot *snap = NULL;
	_cleanup_(gpuctl_lease_list_freep) struct gpuctl_lease_list *list = NULL;
	_cleanup_(ps_data_free) struct ps_data d = {0};
	int status, r;

	/* the site first: a shared directory decides which configuration governs it, and its
	 * health state file which facts the verdicts judge */
	d.filter = &a->filter;
	status = cli_site(cli, &cmd_ps_entry, a->lease_dir, 0);
	if (!status && ps_wls_new(&d.wls, cli->ctx) < 0) {
		cli_error("ps: workloads: %s", strerror(ENOMEM));
		status = CLI_EXIT_FAILURE;
	}
	if (!status)
		status = ps_snapshot(cli, &snap);
	if (!status)
		status = pools_of(cli, &d, snap);
	if (!status)
		status = verdicts_of(cli, &d, snap);
	if (!status)
		status = read_rows(cli, &d, snap, &list);
	if (status)
		return status;
	idle_view_once(cli->ctx, snap, list, &d.idle); /* none shown when it cannot be made */
	d.cfg = gpuctl_site_config(cli->site);
	r = a->json ? print_json(&d, snap, gpuctl_site_lease_dir_path(cli->site),
	                         gpuctl_site_lease_dir(cli->site) != NULL, a->all)
	            : print_table(&d, snap, a->all, cli_use_color(cli));
	if (r < 0 && r != -EIO) {
		cli_error("ps: %s", strerror(-r));
		status = CLI_EXIT_FAILURE;
	}
	return cli_finish_output(status);
}

static int cmd_ps_exec(struct cli *cli, int argc, char **argv)
{
	struct ps_args a = {.filter = WL_FILTER_INIT};
	int status;

	status = parse_options(cli, argc, argv, &a);
	if (status != CMD_GO_ON)
		return status;
	if (a.waiting)
		return ps_waiting(cli, a.lease_dir, a.json);
	return run_ps(cli, &a);
}

const struct cmd_entry cmd_ps_entry = {
        .name = "ps",
        .long_options = ps_options,
        .formats = (const char *const[]){"table", "json", NULL},
        .short_options = "+:h",
        .usage = "[--format table|json] [--all | --waiting] [--job J] [--workload PATTERN] "
                 "[--lease-dir DIR] [--color WHEN]",
        .summary = "show which devices are leased, by whom, and which are busy without a lease",
        .options = "  --format FORMAT  table (default) or json (docs/json.md)\n"
                   "  --all            also list free devices\n"
                   "  --waiting        list the waiters (run/select --hold --wait) instead,\n"
                   "                   first in line first: user, pid, time waited, request\n"
                   "  --job J          only devices a Slurm job uses: J (a job, or every task\n"
                   "                   of array job J), J_T (array task T), J.S (step S)\n"
                   "  --workload PATTERN\n"
                   "                   only devices used by a workload that matches\n"
                   "                   [KIND:]PATTERN: KIND slurm, pod, container, unit,\n"
                   "                   session, bare or unknown; PATTERN a glob (* ? [) of\n"
                   "                   the whole label, else text in its label, name or id\n"
                   "  --lease-dir DIR  the lease directory (default $GPUCTL_LEASE_DIR, else the\n"
                   "                   configuration's lease_dir, else /run/gpuctl); a missing\n"
                   "                   one means nothing is leased\n"
                   "  --color WHEN     colour STATE and HEALTH: auto (on a terminal, unless\n"
                   "                   NO_COLOR is set), always or never\n"
                   "  -h, --help       print this help\n"
                   "\n"
                   "One row per device (GPU, or GPU:MIG) that is leased (user, holder pid, job\n"
                   "pid, command, label, age), unusable or uninitialised (why), or busy with\n"
                   "compute processes that belong to no lease (user:pid(memory)). WORKLOAD:\n"
                   "who the holder and the processes work for (\"slurm 4242.0\", \"pod ns/p/c\",\n"
                   "\"unit jupyter.service\"), the first and +N others. A COMMAND or LABEL\n"
                   "longer than 40 characters (WORKLOAD 32) is cut to \"...\", control\n"
                   "characters show as '?'; --format json keeps them whole.\n",
        .exec = cmd_ps_exec,
        .exits = CMD_EXITS_DRIVER | CMD_EXITS_BUSY | CMD_EXITS_HUNG,
};
