// SPDX-License-Identifier: MIT
/*
 * cmd-list.c: `gpuctl list`: the GPUs at a glance, or chosen fields as nvidia-smi CSV, or JSON.
 * This file has the options, the snapshot, the table and the JSON; --query and
 * --query-compute-apps (their parsing, CSV and query table) are list-query.c's.
 *
 * Decisions:
 * - The snapshot is taken with only the flags the chosen output needs (processes and MIG for the
 *   table, the queried fields' flags for --query), because every flag costs NVML calls.
 * - --query is parsed before NVML is touched, so a typo is a usage error (exit 2) even on a
 *   machine without a driver.
 * - --format accepts nvidia-smi's "csv,noheader,nounits" spelling as well as our own options.
 * - A lost GPU never stops the listing: its row says "lost" (table) and where it was ("lost at
 *   BUS ID" in the processes column: the library's bus id, from the driver's /proc list where
 *   NVML gives none), its unavailable values read "[GPU is lost]" (CSV) and it carries
 *   "lost": true (JSON).
 * - MIG devices follow their parent in the table and in JSON; the CSV is one row per GPU, like
 *   nvidia-smi --query-gpu, so that every row has the header's column count.
 * - -l/--loop SECONDS repeats the whole listing, a fresh snapshot each time, as nvidia-smi -l
 *   does: the CSV header only once (the rows then read as one CSV), tables and JSON whole
 *   each time, a blank line between tables. SIGINT and SIGTERM are taken only while waiting,
 *   so a listing is never cut, and end the loop with exit 0, as nvidia-smi's Ctrl+C does.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hostproc.h"
#include "workload-filter.h"
#include "idle-view.h"
#include "list.h"
#include "util.h"

/* What `--format csv` shows without --query. */
static const char default_csv_fields[] = "index,uuid,name,temperature.gpu,utilization.gpu,"
                                         "memory.used,memory.total,power.draw,enforced.power.limit";

enum {
	OPT_QUERY = 0x100,
	OPT_NOHEADER,
	OPT_NOUNITS,
	OPT_QUERY_APPS,
	OPT_HELP_QUERY,
};

static const struct option list_options[] = {
        CMD_OPTIONS_IDS,
        {"wide", no_argument, NULL, 'w'},
        {"loop", required_argument, NULL, 'l'},
        CMD_OPTION_FORMAT,
        CMD_OPTION_COLOR,
        {"query", required_argument, NULL, OPT_QUERY},
        {"query-gpu", required_argument, NULL, OPT_QUERY},
        {"query-compute-apps", required_argument, NULL, OPT_QUERY_APPS},
        {"noheader", no_argument, NULL, OPT_NOHEADER},
        {"nounits", no_argument, NULL, OPT_NOUNITS},
        {"help-query", no_argument, NULL, OPT_HELP_QUERY},
        {"help-query-gpu", no_argument, NULL, OPT_HELP_QUERY},
        CMD_OPTION_HELP,
        {NULL, 0, NULL, 0},
};

/* ---- the at-a-glance table ---- */

enum {
	COL_GPU,
	COL_UUID,
	COL_NAME,
	COL_TEMP,
	COL_UTIL,
	COL_MEMORY,
	COL_POWER,
	COL_HEALTH,
	COL_PROCS,
	NCOLS,
};

static const char *const table_header[NCOLS] = {
        "GPU", "UUID", "NAME", "TEMP", "UTIL", "MEMORY", "POWER", "HEALTH", "PROCESSES",
};

static const char *verdict_text(const struct list_args *a, const struct gpuctl_gpu *gpu)
{
	const char *n =
	        a->verdict ? gpuctl_health_severity_name(a->verdict[gpuctl_gpu_index(gpu)]) : NULL;
	return n ? n : "N/A";
}

/* "used / total MiB" with N/A for a missing side. */
static void memory_cell(int r_used, int64_t used, int r_total, int64_t total, char *buf,
                        size_t size)
{
	char u[32], t[32];
	if (r_used >= 0)
		snprintf(u, sizeof(u), "%" PRId64, used / (1024 * 1024));
	else
		snprintf(u, sizeof(u), "N/A");
	if (r_total >= 0)
		snprintf(t, sizeof(t), "%" PRId64, total / (1024 * 1024));
	else
		snprintf(t, sizeof(t), "N/A");
	snprintf(buf, size, "%s / %s MiB", u, t);
}

/* The workload of process p (borrowed from a->wls until the next listing), NULL unknown. */
static const struct gpuctl_workload *proc_workload(const struct list_args *a,
                                                   const struct gpuctl_proc *p)
{
	const struct gpuctl_workload *wl = NULL;

	if (!a->wls || gpuctl_workloads_get(a->ctx, a->wls, gpuctl_proc_pid(p), 0, &wl) < 0)
		return NULL;
	return wl;
}

/* Whether wl names a holder worth a table's words: a job, pod, container, unit or session. */
static bool named_workload(const struct gpuctl_workload *wl)
{
	return wl && wl->kind != GPUCTL_WORKLOAD_BARE && wl->kind != GPUCTL_WORKLOAD_UNKNOWN;
}

/* Prefixes the PROCESSES cell buf with "LABEL: " when one named workload (named_workload)
 * holds every process of it (same is that one, or NULL). */
static void holder_prefix(const struct gpuctl_workload *same, char *buf, size_t size)
{
	char label[LIST_WORKLOAD_WIDTH * 4 + 1], *rest;

	if (!named_workload(same) || !buf[0] || !(rest = strdup(buf)))
		return;
	format_cell_text(same->label, LIST_WORKLOAD_WIDTH, label, sizeof(label));
	snprintf(buf, size, "%s: %s", label, rest);
	free(rest);
}

/* Appends "user:pid(memMiB)" for the processes of gpu that run on the MIG instance gi/ci
 * (mig == NULL: the processes on no known MIG device), after "LABEL: " when one workload
 * holds them all ("slurm 4242.0: alice:4243(10240MiB)"). */
static void procs_cell(const struct list_args *a, const struct gpuctl_gpu *gpu,
                       const struct gpuctl_mig *mig, char *buf, size_t size)
{
	size_t used = 0, shown = 0;
	const struct gpuctl_workload *same = NULL;
	buf[0] = '\0';
	int64_t want_gi = -1, want_ci = -1;
	if (mig) {
		if (gpuctl_mig_int(mig, GPUCTL_MIG_GI, &want_gi) < 0 ||
		    gpuctl_mig_int(mig, GPUCTL_MIG_CI, &want_ci) < 0)
			return;
	}
	for (size_t i = 0; i < gpuctl_gpu_proc_count(gpu); i++) {
		const struct gpuctl_proc *p = gpuctl_gpu_proc(gpu, i);
		uint32_t gi, ci;
		bool on_mig = gpuctl_proc_mig(p, &gi, &ci) >= 0;
		if (mig) {
			if (!on_mig || gi != want_gi || ci != want_ci)
				continue;
		} else if (on_mig) {
			/* Shown under its MIG device unless that device is unknown. */
			bool known = false;
			for (size_t m = 0; m < gpuctl_gpu_mig_count(gpu); m++) {
				int64_t mgi, mci;
				const struct gpuctl_mig *md = gpuctl_gpu_mig(gpu, m);
				if (gpuctl_mig_int(md, GPUCTL_MIG_GI, &mgi) >= 0 &&
				    gpuctl_mig_int(md, GPUCTL_MIG_CI, &mci) >= 0 && mgi == gi &&
				    mci == ci)
					known = true;
			}
			if (known)
				continue;
		}
		const struct gpuctl_workload *wl = proc_workload(a, p);
		if (shown++ == 0)
			same = wl;
		else if (same && (!wl || strcmp(same->label, wl->label) != 0))
			same = NULL;
		char user[33 * 4 + 1];
		format_cell_text(gpuctl_proc_user(p) ? gpuctl_proc_user(p) : "?", 32, user,
		                 sizeof(user));
		int64_t mem;
		char membuf[32];
		if (gpuctl_proc_used_memory(p, &mem) >= 0)
			snprintf(membuf, sizeof(membuf), "%" PRId64 "MiB", mem / (1024 * 1024));
		else
			snprintf(membuf, sizeof(membuf), "N/A");
		int n = snprintf(buf + used, size - used, "%s%s:%" PRIu32 "(%s)", used ? " " : "",
		                 user, gpuctl_proc_pid(p), membuf);
		if (n < 0 || (size_t)n >= size - used) {
			buf[used] = '\0';
			break;
		}
		used += (size_t)n;
	}
	holder_prefix(same, buf, size);
}

/* The colour thresholds of the table, after gpustat's (its core.py print_to): temperature red
 * below 50 C, bold red from 50; utilisation green below 30 %, bold green from 30; power magenta
 * below 40 % of the limit, bold magenta from 40; memory (ours) yellow below half used, bold
 * yellow from half. Health: OK green, WARN yellow, FAIL bold red (format_verdict_sgr). */
enum {
	HOT_TEMP_C = 50,
	BUSY_UTIL_PCT = 30,
	HIGH_POWER_PCT = 40,
	FULL_MEMORY_PCT = 50,
};

static const char *verdict_sgr(const struct list_args *a, const struct gpuctl_gpu *gpu)
{
	return a->verdict ? format_verdict_sgr(a->verdict[gpuctl_gpu_index(gpu)]) : NULL;
}

/* Colours the cells of a GPU's row (the last one added) by load and health. */
static void color_gpu_row(const struct list_args *a, struct text_table *t,
                          const struct gpuctl_gpu *gpu)
{
	int64_t v, lim;

	text_table_color(t, COL_GPU, FORMAT_SGR_CYAN);
	text_table_color(t, COL_NAME, FORMAT_SGR_BLUE);
	if (gpuctl_gpu_int(gpu, GPUCTL_F_TEMP, &v) >= 0)
		text_table_color(t, COL_TEMP,
		                 v < HOT_TEMP_C ? FORMAT_SGR_RED : FORMAT_SGR_BOLD_RED);
	if (gpuctl_gpu_int(gpu, GPUCTL_F_UTIL_GPU, &v) >= 0)
		text_table_color(t, COL_UTIL,
		                 v < BUSY_UTIL_PCT ? FORMAT_SGR_GREEN : FORMAT_SGR_BOLD_GREEN);
	if (gpuctl_gpu_int(gpu, GPUCTL_F_MEMORY_USED, &v) >= 0 &&
	    gpuctl_gpu_int(gpu, GPUCTL_F_MEMORY_TOTAL, &lim) >= 0 && lim > 0)
		text_table_color(t, COL_MEMORY,
		                 v * 100 < lim * FULL_MEMORY_PCT ? FORMAT_SGR_YELLOW
		                                                 : FORMAT_SGR_BOLD_YELLOW);
	if (gpuctl_gpu_int(gpu, GPUCTL_F_POWER_DRAW, &v) >= 0 &&
	    gpuctl_gpu_int(gpu, GPUCTL_F_POWER_LIMIT, &lim) >= 0 && lim > 0)
		text_table_color(t, COL_POWER,
		                 v * 100 < lim * HIGH_POWER_PCT ? FORMAT_SGR_MAGENTA
		                                                : FORMAT_SGR_BOLD_MAGENTA);
	text_table_color(t, COL_HEALTH, verdict_sgr(a, gpu));
}

static int add_gpu_rows(const struct list_args *a, struct text_table *t,
                        const struct gpuctl_gpu *gpu)
{
	char idx[32], uuid[32], temp[32], util[32], mem[80], power[80], procs[1024];
	const char *cells[NCOLS];
	int64_t v1, v2;
	int r1, r2;

	snprintf(idx, sizeof(idx), "%zu", gpuctl_gpu_index(gpu));
	format_short_uuid(gpuctl_gpu_str(gpu, GPUCTL_F_UUID), uuid, sizeof(uuid));
	const char *name = gpuctl_gpu_str(gpu, GPUCTL_F_NAME);
	cells[COL_GPU] = idx;
	cells[COL_UUID] = uuid;
	cells[COL_NAME] = name ? name : "N/A";
	cells[COL_HEALTH] = verdict_text(a, gpu);

	if (gpuctl_gpu_lost(gpu)) {
		cells[COL_TEMP] = "lost";
		const char *bus = gpuctl_gpu_str(gpu, GPUCTL_F_PCI_BUS_ID);

		cells[COL_UTIL] = cells[COL_MEMORY] = cells[COL_POWER] = "-";
		cells[COL_PROCS] = NULL;
		if (bus) {
			snprintf(procs, sizeof(procs), "lost at %s", bus);
			cells[COL_PROCS] = procs;
		}
		int r = text_table_add(t, cells);
		if (r >= 0) {
			text_table_color(t, COL_GPU, FORMAT_SGR_CYAN);
			text_table_color(t, COL_TEMP, FORMAT_SGR_BOLD_RED);
			text_table_color(t, COL_HEALTH, verdict_sgr(a, gpu));
		}
		return r;
	}

	if (gpuctl_gpu_int(gpu, GPUCTL_F_TEMP, &v1) >= 0)
		snprintf(temp, sizeof(temp), "%" PRId64 "C", v1);
	else
		snprintf(temp, sizeof(temp), "N/A");
	if (gpuctl_gpu_int(gpu, GPUCTL_F_UTIL_GPU, &v1) >= 0)
		snprintf(util, sizeof(util), "%" PRId64 "%%", v1);
	else
		snprintf(util, sizeof(util), "N/A");
	r1 = gpuctl_gpu_int(gpu, GPUCTL_F_MEMORY_USED, &v1);
	r2 = gpuctl_gpu_int(gpu, GPUCTL_F_MEMORY_TOTAL, &v2);
	memory_cell(r1, v1, r2, v2, mem, sizeof(mem));
	r1 = gpuctl_gpu_int(gpu, GPUCTL_F_POWER_DRAW, &v1);
	r2 = gpuctl_gpu_int(gpu, GPUCTL_F_POWER_LIMIT, &v2);
	if (r1 < 0 && r2 < 0)
		snprintf(power, sizeof(power), "N/A");
	else if (r2 < 0)
		snprintf(power, sizeof(power), "%" PRId64 " / N/A W", (v1 + 500) / 1000);
	else if (r1 < 0)
		snprintf(power, sizeof(power), "N/A / %" PRId64 " W", (v2 + 500) / 1000);
	else
		snprintf(power, sizeof(power), "%" PRId64 " / %" PRId64 " W", (v1 + 500) / 1000,
		         (v2 + 500) / 1000);
	procs_cell(a, gpu, NULL, procs, sizeof(procs));
	cells[COL_TEMP] = temp;
	cells[COL_UTIL] = util;
	cells[COL_MEMORY] = mem;
	cells[COL_POWER] = power;
	cells[COL_PROCS] = procs;
	int r = text_table_add(t, cells);
	if (r < 0)
		return r;
	color_gpu_row(a, t, gpu);

	for (size_t m = 0; m < gpuctl_gpu_mig_count(gpu); m++) {
		const struct gpuctl_mig *mig = gpuctl_gpu_mig(gpu, m);
		char midx[48], muuid[32], mname[96];
		int64_t mi;
		if (gpuctl_mig_int(mig, GPUCTL_MIG_INDEX, &mi) < 0)
			mi = (int64_t)m;
		snprintf(midx, sizeof(midx), "%zu:%" PRId64, gpuctl_gpu_index(gpu), mi);
		format_short_uuid(gpuctl_mig_uuid(mig), muuid, sizeof(muuid));
		const char *profile = gpuctl_mig_profile(mig);
		snprintf(mname, sizeof(mname), "  MIG %s", profile ? profile : "N/A");
		r1 = gpuctl_mig_int(mig, GPUCTL_MIG_MEMORY_USED, &v1);
		r2 = gpuctl_mig_int(mig, GPUCTL_MIG_MEMORY_TOTAL, &v2);
		memory_cell(r1, v1, r2, v2, mem, sizeof(mem));
		procs_cell(a, gpu, mig, procs, sizeof(procs));
		const char *mcells[NCOLS] = {
		        [COL_GPU] = midx,  [COL_UUID] = muuid, [COL_NAME] = mname,
		        [COL_TEMP] = "-",  [COL_UTIL] = "-",   [COL_MEMORY] = mem,
		        [COL_POWER] = "-", [COL_HEALTH] = "-", [COL_PROCS] = procs,
		};
		r = text_table_add(t, mcells);
		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- --wide: the processes with their host facts ---- */

enum {
	PCOL_GPU,
	PCOL_PID,
	PCOL_USER,
	PCOL_GPU_MEM,
	PCOL_CPU,
	PCOL_RSS,
	PCOL_ELAPSED,
	PCOL_WORKLOAD,
	PCOL_COMMAND,
	NPCOLS,
};

static const char *const proc_header[NPCOLS] = {
        "GPU", "PID", "USER", "GPU_MEM", "%CPU", "RSS", "ELAPSED", "WORKLOAD", "COMMAND",
};

/* One line of the process table: the process p of gpu, with what /proc says of it ("-" for
 * each fact it does not show: another PID namespace, gone; COMMAND then NVML's name). */
static int add_proc_row(const struct list_args *a, struct text_table *t,
                        const struct gpuctl_gpu *gpu, const struct gpuctl_proc *p)
{
	char dev[48], pid[24], mem[32] = "-", cpu[32] = "-", rss[32] = "-", el[32] = "-";
	char cmd[4096] = "", shown[LIST_COMMAND_WIDTH * 4 + 1], user[33 * 4 + 1];
	char wl[LIST_WORKLOAD_WIDTH * 4 + 1] = "?";
	const struct gpuctl_workload *w = proc_workload(a, p);
	struct hostproc_facts hf;
	int64_t v;
	int mig = gpuctl_proc_mig_device(gpu, p);
	uint32_t id = gpuctl_proc_pid(p);
	const char *uname = gpuctl_proc_user(p), *name = gpuctl_proc_command(p);

	if (mig >= 0 && gpuctl_mig_int(gpuctl_gpu_mig(gpu, (size_t)mig), GPUCTL_MIG_INDEX, &v) >= 0)
		snprintf(dev, sizeof(dev), "%zu:%" PRId64, gpuctl_gpu_index(gpu), v);
	else
		snprintf(dev, sizeof(dev), "%zu", gpuctl_gpu_index(gpu));
	snprintf(pid, sizeof(pid), "%" PRIu32, id);
	if (gpuctl_proc_used_memory(p, &v) >= 0)
		snprintf(mem, sizeof(mem), "%" PRId64 "MiB", v / (1024 * 1024));
	if (id > 0 && hostproc_facts((pid_t)id, &hf) == 0) {
		snprintf(cpu, sizeof(cpu), "%.1f", hf.cpu_percent);
		format_bytes_compact(hf.host_memory, rss, sizeof(rss));
		hostproc_format_elapsed(hf.elapsed, el, sizeof(el));
		hostproc_cmdline((pid_t)id, cmd, sizeof(cmd));
	}
	/* any byte a process names itself: control characters '?' (format_cell_text) */
	format_cell_text(cmd[0] ? cmd
	                 : name ? name
	                        : "?",
	                 LIST_COMMAND_WIDTH, shown, sizeof(shown));
	format_cell_text(uname ? uname : "?", 32, user, sizeof(user));
	if (w)
		format_cell_text(w->label, LIST_WORKLOAD_WIDTH, wl, sizeof(wl));
	const char *cells[NPCOLS] = {
	        [PCOL_GPU] = dev,     [PCOL_PID] = pid,     [PCOL_USER] = user,
	        [PCOL_GPU_MEM] = mem, [PCOL_CPU] = cpu,     [PCOL_RSS] = rss,
	        [PCOL_ELAPSED] = el,  [PCOL_WORKLOAD] = wl, [PCOL_COMMAND] = shown,
	};
	return text_table_add(t, cells);
}

static int print_procs(const struct list_args *a, const struct gpuctl_snapshot *snap)
{
	struct text_table *t = NULL;
	size_t n = 0;
	int r = text_table_new(NPCOLS, &t);

	if (r < 0)
		return r;
	if (!a->fmt.noheader)
		r = text_table_add(t, proc_header);
	for (size_t i = 0; r >= 0 && i < a->nsel; i++) {
		const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(snap, a->sel[i]);
		for (size_t k = 0;
		     r >= 0 && !gpuctl_gpu_lost(gpu) && k < gpuctl_gpu_proc_count(gpu); k++, n++)
			r = add_proc_row(a, t, gpu, gpuctl_gpu_proc(gpu, k));
	}
	if (r >= 0 && n)
		text_table_print(t, stdout, a->color);
	else if (r >= 0)
		puts("no GPU processes");
	text_table_free(t);
	return r;
}

static int print_table(const struct list_args *a, const struct gpuctl_snapshot *snap)
{
	struct text_table *t = NULL;
	/* --wide: the processes get their own table, not the last column */
	int r = text_table_new(a->wide ? NCOLS - 1 : NCOLS, &t);
	if (r < 0)
		return r;
	if (!a->fmt.noheader)
		r = text_table_add(t, table_header);
	for (size_t i = 0; r >= 0 && i < a->nsel; i++)
		r = add_gpu_rows(a, t, gpuctl_snapshot_gpu(snap, a->sel[i]));
	if (r >= 0)
		text_table_print(t, stdout, a->color);
	text_table_free(t);
	if (r >= 0 && a->wide) {
		putchar('\n');
		r = print_procs(a, snap);
	}
	return r;
}

/* ---- JSON ---- */

static json_t *mig_json(const struct gpuctl_mig *mig, size_t m)
{
	json_t *o = json_object();
	int64_t v;
	int r = o ? 0 : -ENOMEM;
	if (r >= 0) {
		int k = gpuctl_mig_int(mig, GPUCTL_MIG_INDEX, &v);
		r = json_put(o, "index", json_integer(k >= 0 ? (json_int_t)v : (json_int_t)m));
	}
	if (r >= 0)
		r = json_put(o, "uuid", json_string_or_null(gpuctl_mig_uuid(mig)));
	if (r >= 0)
		r = json_put(o, "profile", json_string_or_null(gpuctl_mig_profile(mig)));
	static const struct {
		const char *key;
		enum gpuctl_mig_field f;
	} ints[] = {
	        {"gpu_instance_id", GPUCTL_MIG_GI},
	        {"compute_instance_id", GPUCTL_MIG_CI},
	        {"memory_total", GPUCTL_MIG_MEMORY_TOTAL},
	        {"memory_used", GPUCTL_MIG_MEMORY_USED},
	};
	for (size_t i = 0; r >= 0 && i < sizeof(ints) / sizeof(ints[0]); i++) {
		int k = gpuctl_mig_int(mig, ints[i].f, &v);
		r = json_put(o, ints[i].key, json_int_or_null(k, v));
	}
	if (r < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *proc_json(const struct list_args *a, const struct gpuctl_proc *p)
{
	json_t *o = json_object();
	int64_t mem;
	uint32_t gi, ci;
	if (!o)
		return NULL;
	int k = gpuctl_proc_used_memory(p, &mem);
	int m = gpuctl_proc_mig(p, &gi, &ci);
	if (json_put(o, "pid", json_integer(gpuctl_proc_pid(p))) < 0 ||
	    json_put(o, "used_memory", json_int_or_null(k, mem)) < 0 ||
	    json_put(o, "user", json_string_or_null(gpuctl_proc_user(p))) < 0 ||
	    json_put(o, "command", json_string_or_null(gpuctl_proc_command(p))) < 0 ||
	    json_put(o, "gpu_instance_id", json_int_or_null(m, gi)) < 0 ||
	    json_put(o, "compute_instance_id", json_int_or_null(m, ci)) < 0 ||
	    json_put_host_facts(o, gpuctl_proc_pid(p)) < 0 ||
	    json_put(o, "workload", wl_json(proc_workload(a, p))) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int put_field(json_t *o, const struct gpuctl_gpu *gpu, enum gpuctl_field f)
{
	const struct gpuctl_field_info *fi = gpuctl_field_info(f);
	if (json_object_get(o, fi->key))
		return 0; /* asked twice, or an identity field also queried */
	return json_put(o, fi->key, format_field_json(gpu, f));
}

static json_t *gpu_json(const struct list_args *a, const struct gpuctl_gpu *gpu)
{
	static const enum gpuctl_field identity[] = {GPUCTL_F_INDEX, GPUCTL_F_UUID,
	                                             GPUCTL_F_PCI_BUS_ID, GPUCTL_F_NAME};
	json_t *o = json_object(), *arr;
	int r = o ? 0 : -ENOMEM;
	for (size_t i = 0; r >= 0 && i < sizeof(identity) / sizeof(identity[0]); i++)
		r = put_field(o, gpu, identity[i]);
	if (a->query_text) {
		for (size_t c = 0; r >= 0 && c < a->query->n; c++) {
			int col = (int)a->query->cols[c].field;
			char buf[64];

			if (col == QUERY_DRIVER_VERSION) {
				r = json_put(o, "driver_version", json_string_or_null(a->driver));
			} else if (col == QUERY_TIMESTAMP) {
				list_query_cell(NULL, gpu, col, true, &a->now, buf, sizeof(buf));
				r = json_put(o, "timestamp", json_text(buf));
			} else if (col == QUERY_COUNT) {
				r = json_put(o, "count", json_integer((json_int_t)a->count));
			} else {
				r = put_field(o, gpu, (enum gpuctl_field)col);
			}
		}
	} else {
		for (unsigned f = 0; r >= 0 && f < GPUCTL__F_COUNT; f++)
			r = put_field(o, gpu, (enum gpuctl_field)f);
	}
	if (r >= 0)
		r = json_put(o, "lost", json_boolean(gpuctl_gpu_lost(gpu)));
	if (r >= 0 && !a->query_text)
		r = json_put(o, "health", json_text(verdict_text(a, gpu)));
	if (r >= 0 && !a->query_text)
		r = json_put(o, "idle",
		             idle_view_json(a->idle, gpuctl_gpu_str(gpu, GPUCTL_F_UUID), true));
	if (r >= 0 && !a->query_text) {
		/* json_put() steals arr even when it fails, so nothing leaks on error. */
		arr = json_array();
		for (size_t m = 0; arr && m < gpuctl_gpu_mig_count(gpu); m++)
			if (json_array_append_new(arr, mig_json(gpuctl_gpu_mig(gpu, m), m)) < 0)
				r = -ENOMEM;
		int k = json_put(o, "mig_devices", arr);
		r = r < 0 ? r : k;
		arr = json_array();
		for (size_t p = 0; arr && p < gpuctl_gpu_proc_count(gpu); p++)
			if (json_array_append_new(arr, proc_json(a, gpuctl_gpu_proc(gpu, p))) < 0)
				r = -ENOMEM;
		k = json_put(o, "processes", arr);
		r = r < 0 ? r : k;
	}
	if (r < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int print_json(const struct list_args *a, const struct gpuctl_snapshot *snap)
{
	json_t *root = json_object(), *gpus = json_array();
	int r = root && gpus ? 0 : -ENOMEM;
	for (size_t i = 0; r >= 0 && i < a->nsel; i++)
		if (json_array_append_new(gpus, gpu_json(a, gpuctl_snapshot_gpu(snap, a->sel[i]))) <
		    0)
			r = -ENOMEM;
	if (r >= 0) {
		r = json_put(root, "gpus", gpus);
		gpus = NULL;
	}
	if (r >= 0)
		r = json_print(root);
	json_decref(gpus);
	json_decref(root);
	return r;
}

/* ---- one listing ---- */

/* The snapshot one listing reads: what kind shows (the flags), and of the GPUs' fields the
 * queried ones, the table's, or (JSON without --query) every one. verdicts: the table and the
 * JSON show the health verdict. 0 or the exit status. */
static int list_snapshot(struct cli *cli, const struct list_args *a, enum list_format kind,
                         bool verdicts, struct gpuctl_snapshot **ret_snap)
{
	unsigned flags;

	if (a->apps)
		flags = GPUCTL_SNAP_PROCESSES;
	else if (!verdicts)
		flags = query_snap_flags(a->query);
	else
		flags = GPUCTL_SNAP_PROCESSES | GPUCTL_SNAP_MIG |
		        gpuctl_health_snapshot_flags(gpuctl_site_health_state_path(cli->site));

	if (a->apps) {
		/* the identity every snapshot has is all the rows need besides the processes */
		static const enum gpuctl_field name_only[] = {GPUCTL_F_NAME};
		return cli_snapshot_fields(cli, flags, name_only, 1, ret_snap);
	}
	if (a->query) {
		_cleanup_free_ enum gpuctl_field *fields = calloc(a->query->n, sizeof(*fields));
		size_t n_fields = 0;

		if (!fields) {
			cli_error("list: out of memory");
			return CLI_EXIT_FAILURE;
		}
		bool driver = kind == LIST_FORMAT_JSON; /* every JSON listing has the version */

		for (size_t c = 0; c < a->query->n; c++)
			if ((int)a->query->cols[c].field < (int)GPUCTL__F_COUNT)
				fields[n_fields++] = a->query->cols[c].field;
			else if ((int)a->query->cols[c].field == QUERY_DRIVER_VERSION)
				driver = true;
		/* CSV and the query table print the queried fields alone: the identity is read
		 * only for -i (ids by UUID or bus id) and the JSON (each GPU object holds it) */
		if (!a->ids && kind != LIST_FORMAT_JSON)
			flags |= GPUCTL_SNAP_ONLY_FIELDS;
		if (!driver)
			flags |= GPUCTL_SNAP_NO_SYSTEM;
		return cli_snapshot_fields(cli, flags, fields, n_fields, ret_snap);
	}
	if (kind == LIST_FORMAT_TABLE) {
		enum gpuctl_field table_fields[6 + GPUCTL__F_COUNT] = {
		        GPUCTL_F_TEMP,         GPUCTL_F_UTIL_GPU,   GPUCTL_F_MEMORY_USED,
		        GPUCTL_F_MEMORY_TOTAL, GPUCTL_F_POWER_DRAW, GPUCTL_F_POWER_LIMIT};
		size_t n_table = 6, nh = 0;
		/* the HEALTH column: the facts of docs/health.md */
		const enum gpuctl_field *hf = gpuctl_health_fields(&nh);

		for (size_t i = 0; i < nh; i++)
			table_fields[n_table++] = hf[i];
		/* the table shows no driver version */
		return cli_snapshot_fields(cli, flags | GPUCTL_SNAP_NO_SYSTEM, table_fields,
		                           n_table, ret_snap);
	}
	return cli_snapshot(cli, flags, ret_snap);
}

/* a->verdict: each GPU's verdict, as gpuctl health gives it (with the kernel log and what
 * health --watch recorded). 0 or the exit status. */
static int read_verdicts(struct cli *cli, struct list_args *a, const struct gpuctl_snapshot *snap)
{
	struct gpuctl_health_report *rep = NULL;
	size_t n = gpuctl_snapshot_gpu_count(snap);

	if (gpuctl_site_health(cli->ctx, cli->site, snap, &rep) < 0) {
		cli_error("list: health check: %s", gpuctl_errmsg(cli->ctx));
		return CLI_EXIT_FAILURE;
	}
	/* out of memory: the verdicts read N/A */
	a->verdict = calloc(n ? n : 1, sizeof(*a->verdict));
	for (size_t g = 0; a->verdict && g < n; g++)
		a->verdict[g] = gpuctl_health_verdict(rep, g);
	gpuctl_health_report_free(rep);
	return 0;
}

/* a->idle: one sample of snap and the leases (none read when the lease directory cannot be:
 * then no lease counts as idle). */
static void read_idle(struct cli *cli, struct list_args *a, const struct gpuctl_snapshot *snap)
{
	struct gpuctl_lease_dir *dir = gpuctl_site_lease_dir(cli->site);
	struct gpuctl_lease_list *list = NULL;

	if (dir && gpuctl_lease_list(cli->ctx, dir, snap, &list) < 0)
		list = NULL;
	idle_view_once(cli->ctx, snap, list, &a->idle);
	gpuctl_lease_list_free(list);
}

/* Prints the listing of snap as kind says: 0 or -errno. */
static int print_listing(const struct list_args *a, const struct gpuctl_snapshot *snap,
                         enum list_format kind)
{
	switch (kind) {
	case LIST_FORMAT_CSV:
		if (a->apps)
			list_print_apps_csv(a, snap);
		else
			list_print_csv(a, snap);
		return 0;
	case LIST_FORMAT_JSON:
		return print_json(a, snap);
	default:
		return a->query_text ? list_print_query_table(a, snap) : print_table(a, snap);
	}
}

/* A fresh snapshot of what kind needs, with the chosen GPUs (a->sel) and the verdicts
 * (a->verdict), printed. 0 or the exit status. */
static int read_and_print(struct cli *cli, struct list_args *a, enum list_format kind)
{
	_cleanup_(gpuctl_snapshot_freep) struct gpuctl_snapshot *snap = NULL;
	/* the table and the JSON show the verdict: the facts every command judges, which the
	 * site's health state file decides (gpuctl_health_snapshot_flags) */
	const bool verdicts = !a->query_text && !a->apps && kind != LIST_FORMAT_CSV;
	int status, r;

	/* JSON shows the idle cases (docs/idle.md), of which a lease with no process needs the
	 * lease directory */
	if (verdicts && (status = cli_site(cli, &cmd_list_entry, NULL,
	                                   kind == LIST_FORMAT_JSON ? 0 : GPUCTL_SITE_NO_LEASES)))
		return status;
	/* the table and the JSON show workloads: one cache for every listing of --loop, swept
	 * before each (what ended is forgotten, the pointers of the last listing unused) */
	if (verdicts && !a->wls && gpuctl_workloads_new(cli->ctx, &a->wls) >= 0)
		a->ctx = cli->ctx;
	if (a->wls)
		(void)gpuctl_workloads_sweep(a->wls);
	status = list_snapshot(cli, a, kind, verdicts, &snap);
	if (status)
		return status;
	clock_gettime(CLOCK_REALTIME, &a->now);
	a->color = cli_use_color(cli);
	a->driver = gpuctl_snapshot_driver_version(snap);
	a->count = gpuctl_snapshot_gpu_count(snap);
	status = cli_select_gpus(cli, snap, a->ids, &a->sel, &a->nsel);
	if (status)
		return status;
	if (verdicts && (status = read_verdicts(cli, a, snap)))
		return status;
	if (verdicts && kind == LIST_FORMAT_JSON)
		read_idle(cli, a, snap);
	r = print_listing(a, snap, kind);
	if (r < 0) {
		cli_error("list: cannot write the output: %s", strerror(-r));
		return CLI_EXIT_FAILURE;
	}
	return 0;
}

/* One listing; what it chose and judged is let go of after it. */
static int list_once(struct cli *cli, struct list_args *a, enum list_format kind)
{
	int status = read_and_print(cli, a, kind);

	free(a->verdict);
	a->verdict = NULL;
	gpuctl_idle_free(a->idle);
	a->idle = NULL;
	free(a->sel);
	a->sel = NULL;
	return status;
}

/* -l: a listing every a->loop seconds until SIGINT or SIGTERM (exit 0), or a failure. */
static int list_loop(struct cli *cli, struct list_args *a, enum list_format kind)
{
	/* Signals are taken only while waiting, between two whole listings. */
	sigset_t stop, old;
	double next = cli_now(CLOCK_MONOTONIC);
	int status;

	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigprocmask(SIG_BLOCK, &stop, &old);
	for (;;) {
		if (a->again && kind != LIST_FORMAT_CSV)
			putchar('\n');
		status = list_once(cli, a, kind);
		if (status || (status = cli_finish_output(CLI_EXIT_OK)))
			break;
		a->again = true;
		next = cli_next_tick(next, a->loop);
		if (cli_wait_until(next, &stop))
			break; /* SIGINT, SIGTERM: the end asked for, exit 0 */
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	return status;
}

/* ---- options and dispatch ---- */

/* --format's value (ours or nvidia-smi's spelling) into fmt: 0, or the usage error's exit
 * status. */
static int parse_format(const char *arg, struct format_spec *fmt)
{
	char *bad = NULL;
	int status;

	if (format_parse(arg, fmt, &bad) >= 0)
		return 0;
	if (bad && strcmp(bad, arg) != 0)
		status = cmd_usage_error(&cmd_list_entry,
		                         "--format: unknown format '%s' in '%s' (table, csv, json, "
		                         "noheader, nounits)",
		                         bad, arg);
	else
		status = cmd_usage_error(
		        &cmd_list_entry,
		        "--format: unknown format '%s' (table, csv, json, noheader, "
		        "nounits)",
		        arg);
	free(bad);
	return status;
}

/* The options into a: CMD_GO_ON, or the exit status to return now (--help, --help-query, a
 * usage error). */
static int parse_options(struct cli *cli, int argc, char **argv, struct list_args *a)
{
	int opt, status;

	while ((opt = cmd_getopt(&cmd_list_entry, argc, argv)) != -1) {
		switch (opt) {
		case 'i':
			a->ids = optarg;
			break;
		case 'l':
			if ((status = cmd_parse_delay(&cmd_list_entry, "--loop", optarg, &a->loop)))
				return status;
			break;
		case 'w':
			a->wide = true;
			break;
		case CMD_OPT_FORMAT:
			if ((status = parse_format(optarg, &a->fmt)))
				return status;
			break;
		case OPT_QUERY:
			a->query_text = optarg;
			break;
		case OPT_QUERY_APPS:
			a->apps_text = optarg;
			break;
		case OPT_NOHEADER:
			a->fmt.noheader = true;
			break;
		case OPT_NOUNITS:
			a->fmt.nounits = true;
			break;
		case CMD_OPT_COLOR:
			if ((status = cli_color_option(cli, &cmd_list_entry, optarg)))
				return status;
			break;
		case 'h':
			cmd_usage(&cmd_list_entry, stdout);
			return CLI_EXIT_OK;
		case OPT_HELP_QUERY:
			list_print_help_query(stdout);
			return CLI_EXIT_OK;
		default:
			return cmd_bad_option(&cmd_list_entry, opt, argv);
		}
	}
	if (optind < argc)
		return cmd_usage_error(&cmd_list_entry, "unexpected argument '%s'", argv[optind]);
	return CMD_GO_ON;
}

/* The options together: the output's kind (*ret_kind: --format's, else CSV with a query, else
 * the table), --wide's place, and the queries parsed (a->apps, a->query: the CSV's default
 * columns without --query). 0, or the usage error's exit status. */
static int settle_args(struct list_args *a, enum list_format *ret_kind)
{
	enum list_format kind = a->fmt.kind;
	int status = 0;

	if (kind == LIST_FORMAT_DEFAULT)
		kind = a->query_text || a->apps_text ? LIST_FORMAT_CSV : LIST_FORMAT_TABLE;
	if (a->wide && (a->query_text || kind != LIST_FORMAT_TABLE))
		return cmd_usage_error(&cmd_list_entry,
		                       "--wide: only for the table without --query (the JSON has "
		                       "the host facts of every process)");
	if (a->apps_text)
		status = list_parse_apps(a, kind);
	else if (a->query_text || kind == LIST_FORMAT_CSV)
		status = list_parse_query(a->query_text ? a->query_text : default_csv_fields,
		                          &a->query);
	if (status)
		return status;
	*ret_kind = kind;
	return 0;
}

static int cmd_list_exec(struct cli *cli, int argc, char **argv)
{
	struct list_args a = {0};
	enum list_format kind = LIST_FORMAT_DEFAULT; /* settle_args decides */
	int status;

	status = parse_options(cli, argc, argv, &a);
	if (status == CMD_GO_ON) {
		status = settle_args(&a, &kind);
		if (!status)
			status = a.loop ? list_loop(cli, &a, kind) : list_once(cli, &a, kind);
	}
	query_free(a.query);
	free(a.apps);
	gpuctl_workloads_free(a.wls);
	return status;
}

const struct cmd_entry cmd_list_entry = {
        .name = "list",
        .long_options = list_options,
        .short_options = "+:i:l:wh",
        .usage = "[-i IDS] [-w] [-l SECONDS] [--format table|csv|json] [--query FIELDS] "
                 "[--query-compute-apps FIELDS] [--help-query] [--noheader] [--nounits] "
                 "[--color WHEN]",
        .summary = "list GPUs and MIG devices with their state",
        .options =
                "  -i, --id, --only IDS\n"
                "                     only these GPUs: indices, UUIDs, UUID prefixes or PCI bus\n"
                "                     ids, comma-separated, in the order given (--only: nvitop's\n"
                "                     name)\n"
                "  -w, --wide         the table, then one line per GPU process with its host\n"
                "                     facts: user, GPU memory, %CPU, resident memory, elapsed\n"
                "                     time and the full command line\n"
                "  -l, --loop SECONDS list again every SECONDS (0.1 to 86400) until SIGINT, which\n"
                "                     exits 0, like nvidia-smi -l; the CSV header only once\n"
                "  --format FORMAT    table (default), csv (default with --query) or json; also\n"
                "                     nvidia-smi's spelling, e.g. csv,noheader,nounits\n"
                "  --query, --query-gpu FIELDS\n"
                "                     comma-separated fields: gpuctl keys (memory_used) or\n"
                "                     nvidia-smi's names (memory.used); see docs/json.md\n"
                "  --query-compute-apps FIELDS\n"
                "                     one CSV row per compute process, as nvidia-smi's: pid,\n"
                "                     process_name (name), used_memory (used_gpu_memory),\n"
                "                     gpu_uuid, gpu_bus_id, gpu_name\n"
                "  --help-query, --help-query-gpu\n"
                "                     list the fields of --query and --query-compute-apps,\n"
                "                     as nvidia-smi --help-query-gpu does\n"
                "  --noheader         no header line\n"
                "  --nounits          values without units (csv and query tables)\n"
                "  --color WHEN       colour the table by load and health (docs/gpuctl.1):\n"
                "                     auto (on a terminal, unless NO_COLOR is set), always,\n"
                "                     never; CSV and JSON never\n"
                "  -h, --help         print this help\n",
        .exec = cmd_list_exec,
        .exits = CMD_EXITS_DRIVER | CMD_EXITS_HUNG,
};
