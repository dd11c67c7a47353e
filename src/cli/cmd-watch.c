// SPDX-License-Identifier: MIT
/*
 * cmd-watch.c: `gpuctl watch`, GPU metrics over time, like `nvidia-smi dmon` (and, with
 * --procs, `nvidia-smi pmon`).
 *
 * Decisions:
 * - The default layout is dmon's, byte for byte where dmon's is known: two header lines
 *   starting with '#' (names, then units), then one row per GPU per interval, each column
 *   right-aligned in 5 characters after one space, '-' where the value is not supported. The
 *   groups and their column order are dmon's (p u c v m e t, whatever order -s names them in);
 *   the jpg/ofa columns newer drivers print are not shown (NVML gives them to few GPUs).
 * - dmon's "MB" columns are MiB (1048576 bytes), as nvidia-smi's are; CSV and JSON lines carry
 *   the same integers and say "MiB" and "MiB/s", the true units.
 * - The first snapshot reads identity and static facts; every interval after it is a
 *   gpuctl_snapshot_refresh of the printed fields only, and a field NVML did not support on a
 *   GPU is not asked again. So one interval costs the NVML calls of what it prints, plus one
 *   device count (-v reports the count; bench/watch_bench.py measures it with the simulator).
 *   NVML failing, or the number of GPUs changing, ends watch with exit 1.
 * - pviol/tviol are over the interval (NVML's violation counters and their own timestamps), so
 *   the first row, which has no interval yet, shows '-' there. tviol is dmon's "bool": 1 when
 *   temperature held the GPU back at any time during the interval.
 * - Every interval is flushed, so `gpuctl watch | tee log` shows it at once. SIGINT and SIGTERM
 *   are taken only between intervals (blocked, then sigtimedwait): the last row is never cut
 *   in half, and the exit status is 0. A closed pipe ends the program as it does any filter.
 * - A GPU lost mid-stream keeps its rows, with '-' everywhere (null and "lost": true in JSON),
 *   and one line on stderr says so; the other GPUs go on.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "format.h"
#include "parse.h"
#include "query.h"
#include "util.h"

#define WATCH_DEFAULT_GROUP "puc"
#define WATCH_GROUPS        "pucvmet"
#define MIB                 1048576

enum {
	OPT_PROCS = 0x100,
};

enum watch_format {
	WATCH_DMON,
	WATCH_CSV,
	WATCH_JSONL,
};

/* How a column's integer is made from its field. */
enum conv {
	CONV_RAW,       /* as the field is */
	CONV_MW_TO_W,   /* mW -> W, rounded */
	CONV_MIB,       /* bytes -> MiB, rounded down */
	CONV_VIOL_PCT,  /* violation time over the interval -> percent, rounded */
	CONV_VIOL_BOOL, /* violation time over the interval -> 0/1 */
};

struct column {
	char group;              /* the -s letter */
	const char *name;        /* dmon's header name */
	const char *unit;        /* dmon's unit row */
	const char *csv;         /* CSV header: name and true unit */
	const char *key;         /* JSON key */
	enum gpuctl_field field; /* what it shows */
	enum conv conv;          /* how */
};

/* dmon's columns in dmon's order (nvidia-smi dmon --help and its output). */
static const struct column columns[] = {
        {'p', "pwr", "W", "pwr [W]", "pwr_w", GPUCTL_F_POWER_DRAW, CONV_MW_TO_W},
        {'p', "gtemp", "C", "gtemp [C]", "gtemp_c", GPUCTL_F_TEMP, CONV_RAW},
        {'p', "mtemp", "C", "mtemp [C]", "mtemp_c", GPUCTL_F_TEMP_MEMORY, CONV_RAW},
        {'u', "sm", "%", "sm [%]", "sm_pct", GPUCTL_F_UTIL_GPU, CONV_RAW},
        {'u', "mem", "%", "mem [%]", "mem_pct", GPUCTL_F_UTIL_MEMORY, CONV_RAW},
        {'u', "enc", "%", "enc [%]", "enc_pct", GPUCTL_F_UTIL_ENCODER, CONV_RAW},
        {'u', "dec", "%", "dec [%]", "dec_pct", GPUCTL_F_UTIL_DECODER, CONV_RAW},
        {'c', "mclk", "MHz", "mclk [MHz]", "mclk_mhz", GPUCTL_F_CLOCK_MEM, CONV_RAW},
        {'c', "pclk", "MHz", "pclk [MHz]", "pclk_mhz", GPUCTL_F_CLOCK_SM, CONV_RAW},
        {'v', "pviol", "%", "pviol [%]", "pviol_pct", GPUCTL_F_VIOLATION_POWER, CONV_VIOL_PCT},
        {'v', "tviol", "bool", "tviol [bool]", "tviol", GPUCTL_F_VIOLATION_THERMAL, CONV_VIOL_BOOL},
        {'m', "fb", "MB", "fb [MiB]", "fb_mib", GPUCTL_F_MEMORY_USED, CONV_MIB},
        {'m', "bar1", "MB", "bar1 [MiB]", "bar1_mib", GPUCTL_F_BAR1_USED, CONV_MIB},
        {'e', "sbecc", "errs", "sbecc [errs]", "sbecc", GPUCTL_F_ECC_VOL_CORRECTED, CONV_RAW},
        {'e', "dbecc", "errs", "dbecc [errs]", "dbecc", GPUCTL_F_ECC_VOL_UNCORRECTED, CONV_RAW},
        {'e', "pci", "errs", "pci [errs]", "pci", GPUCTL_F_PCIE_REPLAY, CONV_RAW},
        {'t', "rxpci", "MB/s", "rxpci [MiB/s]", "rxpci_mibps", GPUCTL_F_PCIE_RX, CONV_MIB},
        {'t', "txpci", "MB/s", "txpci [MiB/s]", "txpci_mibps", GPUCTL_F_PCIE_TX, CONV_MIB},
};
#define N_COLUMNS (sizeof(columns) / sizeof(columns[0]))

/* pmon's columns (--procs): gpu pid type, then these, then the command. */
static const struct {
	const char *name, *unit, *csv, *key;
	enum gpuctl_proc_engine engine;
} proc_columns[] = {
        {"sm", "%", "sm [%]", "sm_pct", GPUCTL_PROC_SM},
        {"mem", "%", "mem [%]", "mem_pct", GPUCTL_PROC_MEM},
        {"enc", "%", "enc [%]", "enc_pct", GPUCTL_PROC_ENC},
        {"dec", "%", "dec [%]", "dec_pct", GPUCTL_PROC_DEC},
};
#define N_PROC_COLUMNS (sizeof(proc_columns) / sizeof(proc_columns[0]))

struct watch {
	enum watch_format format;
	bool shown[N_COLUMNS]; /* the columns of the selected groups */
	bool date, time;       /* -o D, -o T */
	bool procs;            /* --procs */
	size_t *gpus;          /* -i, snapshot indices in order */
	size_t n_gpus;
	bool *reported_lost; /* per snapshot index: "is lost" said on stderr */
};

/* ---- options ---- */

/* Shows the columns of the groups in mask (bit k: WATCH_GROUPS[k]). */
static void show_groups(struct watch *w, unsigned mask)
{
	for (size_t k = 0; k < N_COLUMNS; k++)
		w->shown[k] = mask >> (strchr(WATCH_GROUPS, columns[k].group) - WATCH_GROUPS) & 1u;
}

/* ---- values ---- */

/* The integer column k shows for GPU gpu, or false ('-'). before: the same GPU one interval
 * earlier (NULL on the first row). */
static bool column_value(size_t k, const struct gpuctl_gpu *gpu, const struct gpuctl_gpu *before,
                         int64_t *ret)
{
	const struct column *c = &columns[k];
	double pct;
	int64_t v;

	if (gpuctl_gpu_lost(gpu))
		return false;
	if (c->conv == CONV_VIOL_PCT || c->conv == CONV_VIOL_BOOL) {
		if (!before || gpuctl_gpu_violation_percent(before, gpu, c->field, &pct) < 0)
			return false;
		*ret = c->conv == CONV_VIOL_BOOL ? pct > 0.0 : (int64_t)lround(pct);
		return true;
	}
	if (gpuctl_gpu_int(gpu, c->field, &v) < 0)
		return false;
	switch (c->conv) {
	case CONV_MW_TO_W:
		*ret = (v + 500) / 1000;
		break;
	case CONV_MIB:
		*ret = v / MIB;
		break;
	default:
		*ret = v;
		break;
	}
	return true;
}

/* "20261130" and "15:50:23", local time. */
static void stamp(char date[9], char clock[9])
{
	time_t t = time(NULL);
	struct tm tm;

	if (!localtime_r(&t, &tm)) {
		memcpy(date, "--------", 9);
		memcpy(clock, "--:--:--", 9);
		return;
	}
	(void)strftime(date, 9, "%Y%m%d", &tm);
	(void)strftime(clock, 9, "%H:%M:%S", &tm);
}

/* ---- output ---- */

static void print_header(const struct watch *w)
{
	if (w->format == WATCH_JSONL)
		return;
	if (w->format == WATCH_CSV) {
		const char *sep = "";

		if (w->date) {
			fputs("date", stdout);
			sep = ", ";
		}
		if (w->time) {
			printf("%stime", sep);
			sep = ", ";
		}
		printf("%sgpu", sep);
		if (w->procs) {
			fputs(", pid, type", stdout);
			for (size_t k = 0; k < N_PROC_COLUMNS; k++)
				printf(", %s", proc_columns[k].csv);
			fputs(", fb [MiB], command\n", stdout);
			return;
		}
		for (size_t k = 0; k < N_COLUMNS; k++)
			if (w->shown[k])
				printf(", %s", columns[k].csv);
		putchar('\n');
		return;
	}
	/* dmon: "# gpu" is the first column, its '#' in the place of a row's padding; with a
	 * date or time prefix the '#' moves to the front of the line. */
	for (int line = 0; line < 2; line++) {
		bool prefix = w->date || w->time;

		putchar('#');
		if (w->date)
			printf("%-8s ", line == 0 ? "Date" : "YYYYMMDD");
		if (w->time)
			printf("%-8s ", line == 0 ? "Time" : "HH:MM:SS");
		printf(prefix ? "%5s" : "%4s", line == 0 ? "gpu" : "Idx");
		if (w->procs) {
			printf(" %10s %5s", line == 0 ? "pid" : "#", line == 0 ? "type" : "C/G");
			for (size_t k = 0; k < N_PROC_COLUMNS; k++)
				printf(" %5s",
				       line == 0 ? proc_columns[k].name : proc_columns[k].unit);
			printf(" %5s   %s\n", line == 0 ? "fb" : "MB",
			       line == 0 ? "command" : "name");
			continue;
		}
		for (size_t k = 0; k < N_COLUMNS; k++)
			if (w->shown[k])
				printf(" %5s", line == 0 ? columns[k].name : columns[k].unit);
		putchar('\n');
	}
}

/* The start of a row: date/time and the GPU index. */
static void print_row_start(const struct watch *w, size_t index, const char *date,
                            const char *clock)
{
	if (w->format == WATCH_CSV) {
		if (w->date)
			printf("%s, ", date);
		if (w->time)
			printf("%s, ", clock);
		printf("%zu", index);
		return;
	}
	if (w->date || w->time)
		putchar(' ');
	if (w->date)
		printf("%-8s ", date);
	if (w->time)
		printf("%-8s ", clock);
	printf("%5zu", index);
}

static void print_cell(const struct watch *w, bool has, int64_t v)
{
	if (w->format == WATCH_CSV) {
		if (has)
			printf(", %" PRId64, v);
		else
			fputs(", [N/A]", stdout);
		return;
	}
	if (has)
		printf(" %5" PRId64, v);
	else
		printf(" %5s", "-");
}

/* A process's command in a text row: control characters become '?' (a name can hold
 * anything, and a newline would forge a row); in CSV, a name with a comma or a quote is
 * quoted, quotes doubled. */
static void print_command(const struct watch *w, const char *cmd)
{
	bool quote = w->format == WATCH_CSV && strpbrk(cmd, ",\"");

	if (quote)
		putchar('"');
	for (const unsigned char *p = (const unsigned char *)cmd; *p; p++) {
		if (*p < 0x20 || *p == 0x7f)
			putchar('?');
		else if (quote && *p == '"')
			fputs("\"\"", stdout);
		else
			putchar(*p);
	}
	if (quote)
		putchar('"');
}

/* A JSON line's common keys; NULL on allocation failure. */
static json_t *json_row(const struct watch *w, const struct gpuctl_gpu *gpu, const char *date,
                        const char *clock)
{
	json_t *o = json_object();
	const char *uuid = gpuctl_gpu_str(gpu, GPUCTL_F_UUID);

	if (!o)
		return NULL;
	if ((w->date && json_object_set_new(o, "date", json_text(date)) < 0) ||
	    (w->time && json_object_set_new(o, "time", json_text(clock)) < 0) ||
	    json_object_set_new(o, "gpu", json_integer((json_int_t)gpuctl_gpu_index(gpu))) < 0 ||
	    json_object_set_new(o, "uuid", uuid ? json_text(uuid) : json_null()) < 0 ||
	    json_object_set_new(o, "lost", json_boolean(gpuctl_gpu_lost(gpu))) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int print_gpu_row(const struct watch *w, const struct gpuctl_gpu *gpu,
                         const struct gpuctl_gpu *before, const char *date, const char *clock)
{
	int64_t v;

	if (w->format == WATCH_JSONL) {
		json_t *o = json_row(w, gpu, date, clock);

		if (!o)
			return -ENOMEM;
		for (size_t k = 0; k < N_COLUMNS; k++) {
			if (!w->shown[k])
				continue;
			bool has = column_value(k, gpu, before, &v);
			if (json_object_set_new(o, columns[k].key,
			                        has ? json_integer((json_int_t)v) : json_null()) <
			    0) {
				json_decref(o);
				return -ENOMEM;
			}
		}
		return json_print_line(o);
	}
	print_row_start(w, gpuctl_gpu_index(gpu), date, clock);
	for (size_t k = 0; k < N_COLUMNS; k++) {
		if (!w->shown[k])
			continue;
		bool has = column_value(k, gpu, before, &v);
		print_cell(w, has, v);
	}
	putchar('\n');
	return 0;
}

/* One row per process of gpu (pmon), or one row of '-' when it has none. */
static int print_proc_rows(const struct watch *w, const struct gpuctl_gpu *gpu, const char *date,
                           const char *clock)
{
	size_t n = gpuctl_gpu_lost(gpu) ? 0 : gpuctl_gpu_proc_count(gpu);
	for (size_t p = 0; p < (n ? n : 1); p++) {
		const struct gpuctl_proc *proc = n ? gpuctl_gpu_proc(gpu, p) : NULL;
		const char *cmd = proc ? gpuctl_proc_command(proc) : NULL;
		int64_t mem = 0;
		bool has_mem = proc && gpuctl_proc_used_memory(proc, &mem) == 0;
		int pct;

		if (w->format == WATCH_JSONL) {
			if (!proc) /* JSON lines list processes only */
				break;
			json_t *o = json_row(w, gpu, date, clock);
			if (!o ||
			    json_object_set_new(o, "pid", json_integer(gpuctl_proc_pid(proc))) <
			            0 ||
			    json_object_set_new(o, "type", json_text("C")) < 0) {
				json_decref(o);
				return -ENOMEM;
			}
			for (size_t k = 0; k < N_PROC_COLUMNS; k++) {
				bool has =
				        gpuctl_proc_util(proc, proc_columns[k].engine, &pct) == 0;
				if (json_object_set_new(o, proc_columns[k].key,
				                        has ? json_integer(pct) : json_null()) <
				    0) {
					json_decref(o);
					return -ENOMEM;
				}
			}
			if (json_object_set_new(o, "fb_mib",
			                        has_mem ? json_integer(mem / MIB) : json_null()) <
			            0 ||
			    json_object_set_new(o, "command", cmd ? json_text(cmd) : json_null()) <
			            0) {
				json_decref(o);
				return -ENOMEM;
			}
			if (json_print_line(o) < 0)
				return -ENOMEM;
			continue;
		}
		print_row_start(w, gpuctl_gpu_index(gpu), date, clock);
		if (w->format == WATCH_CSV) {
			if (proc)
				printf(", %" PRIu32 ", C", gpuctl_proc_pid(proc));
			else
				fputs(", [N/A], [N/A]", stdout);
		} else if (proc) {
			printf(" %10" PRIu32 " %5s", gpuctl_proc_pid(proc), "C");
		} else {
			printf(" %10s %5s", "-", "-");
		}
		for (size_t k = 0; k < N_PROC_COLUMNS; k++) {
			bool has =
			        proc && gpuctl_proc_util(proc, proc_columns[k].engine, &pct) == 0;
			print_cell(w, has, pct);
		}
		print_cell(w, has_mem, mem / MIB);
		fputs(w->format == WATCH_CSV ? ", " : "   ", stdout);
		print_command(w, cmd ? cmd : w->format == WATCH_CSV ? "[N/A]" : "-");
		putchar('\n');
	}
	return 0;
}

/* Prints one interval. before: the previous snapshot (NULL for the first). */
static int print_interval(struct watch *w, const struct gpuctl_snapshot *snap,
                          const struct gpuctl_snapshot *before)
{
	char date[9], clock[9];

	stamp(date, clock);
	for (size_t k = 0; k < w->n_gpus; k++) {
		size_t i = w->gpus[k];
		const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(snap, i);
		const struct gpuctl_gpu *prev = before ? gpuctl_snapshot_gpu(before, i) : NULL;
		int r;

		if (gpuctl_gpu_lost(gpu) && !w->reported_lost[i]) {
			const char *uuid = gpuctl_gpu_str(gpu, GPUCTL_F_UUID);
			cli_error("watch: GPU %zu (%s) is lost; its values show as unavailable", i,
			          uuid ? uuid : "no UUID");
			w->reported_lost[i] = true;
		}
		r = w->procs ? print_proc_rows(w, gpu, date, clock)
		             : print_gpu_row(w, gpu, prev, date, clock);
		if (r < 0)
			return r;
	}
	return fflush(stdout) == 0 && !ferror(stdout) ? 0 : -EIO;
}

/* ---- the loop ---- */

/* The fields the shown columns need. */
static size_t watch_fields(const struct watch *w, enum gpuctl_field *out)
{
	size_t n = 0;

	for (size_t k = 0; k < N_COLUMNS && !w->procs; k++)
		if (w->shown[k])
			out[n++] = columns[k].field;
	return n;
}

static int watch_loop(struct cli *cli, struct watch *w, struct gpuctl_snapshot *first,
                      unsigned flags, unsigned long count, double delay)
{
	enum gpuctl_field fields[N_COLUMNS];
	size_t n_fields = watch_fields(w, fields);
	struct gpuctl_snapshot *prev = first, *snap = NULL;
	sigset_t stop, old;
	double next = cli_now(CLOCK_MONOTONIC);
	int status = CLI_EXIT_OK;

	/* Signals are taken only while waiting, between two whole intervals. */
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &stop, &old);

	print_header(w);
	for (unsigned long k = 0; count == 0 || k < count; k++) {
		if (k > 0) {
			next = cli_next_tick(next, delay);
			if (cli_wait_until(next, &stop))
				break;
			int r = gpuctl_snapshot_refresh(cli->ctx, prev, flags, fields, n_fields,
			                                &snap);
			if (r < 0) {
				const char *msg = gpuctl_errmsg(cli->ctx);
				/* -ESTALE: GPUs came or went; the rows would no longer be theirs */
				cli_error("watch: NVML: %s%s", msg && msg[0] ? msg : strerror(-r),
				          r == -ESTALE ? "; start watch again" : "");
				status = CLI_EXIT_FAILURE;
				break;
			}
		}
		int r = print_interval(w, snap ? snap : prev, snap ? prev : NULL);
		if (r < 0) {
			cli_error(r == -ENOMEM ? "watch: out of memory"
			                       : "watch: cannot write the output: %s",
			          strerror(-r));
			status = CLI_EXIT_FAILURE;
			break;
		}
		if (snap) {
			gpuctl_snapshot_free(prev);
			prev = snap;
			snap = NULL;
		}
	}
	gpuctl_snapshot_free(snap);
	gpuctl_snapshot_free(prev);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return status;
}

/* ---- the command ---- */

static const struct option watch_options[] = {
        CMD_OPTIONS_IDS,
        {"delay", required_argument, NULL, 'd'},
        {"count", required_argument, NULL, 'c'},
        {"select", required_argument, NULL, 's'},
        {"options", required_argument, NULL, 'o'},
        CMD_OPTION_FORMAT,
        {"procs", no_argument, NULL, OPT_PROCS},
        CMD_OPTION_HELP,
        {NULL, 0, NULL, 0},
};

struct watch_args {
	const char *ids;     /* -i, NULL: every GPU */
	double delay;        /* -d: seconds between intervals */
	unsigned long count; /* -c: intervals to show, 0: until a signal */
	bool groups;         /* -s was given (it does not go with --procs) */
};

/* -s GROUPS into w's shown columns: 0, or the usage error's exit status. */
static int parse_groups(struct watch *w, const char *text)
{
	unsigned mask = 0;
	char bad = 0;
	int r = groups_parse(text, WATCH_GROUPS, &mask, &bad);

	if (r == -EEXIST)
		return cmd_usage_error(&cmd_watch_entry, "-s: '%s' names '%c' twice", text, bad);
	if (r < 0 && !bad)
		return cmd_usage_error(&cmd_watch_entry, "-s: no group given (letters of '%s')",
		                       WATCH_GROUPS);
	if (r < 0)
		return cmd_usage_error(&cmd_watch_entry,
		                       "-s: '%s': '%c' is no group (letters of '%s')", text, bad,
		                       WATCH_GROUPS);
	show_groups(w, mask);
	return 0;
}

/* The options into a and w (what is shown, how): CMD_GO_ON, or the exit status to return now
 * (--help, a usage error). */
static int parse_options(int argc, char **argv, struct watch_args *a, struct watch *w)
{
	int opt, r;

	while ((opt = cmd_getopt(&cmd_watch_entry, argc, argv)) != -1) {
		switch (opt) {
		case 'i':
			a->ids = optarg;
			break;
		case 'd':
			if ((r = cmd_parse_delay(&cmd_watch_entry, "-d", optarg, &a->delay)))
				return r;
			break;
		case 'c':
			if ((r = cmd_parse_count(&cmd_watch_entry, "-c", optarg, &a->count)))
				return r;
			break;
		case 's':
			a->groups = true;
			if ((r = parse_groups(w, optarg)))
				return r;
			break;
		case 'o':
			if (date_time_parse(optarg, &w->date, &w->time) < 0)
				return cmd_usage_error(&cmd_watch_entry,
				                       "-o: '%s' is not D, T or DT", optarg);
			break;
		case CMD_OPT_FORMAT: {
			int i, st = cmd_parse_format(&cmd_watch_entry, optarg, &i);

			if (st)
				return st;
			w->format = (enum watch_format)i;
			break;
		}
		case OPT_PROCS:
			w->procs = true;
			break;
		case 'h':
			cmd_usage(&cmd_watch_entry, stdout);
			return CLI_EXIT_OK;
		default:
			return cmd_bad_option(&cmd_watch_entry, opt, argv);
		}
	}
	if (optind < argc)
		return cmd_usage_error(&cmd_watch_entry, "unexpected argument '%s'", argv[optind]);
	if (w->procs && a->groups)
		return cmd_usage_error(&cmd_watch_entry,
		                       "-s: --procs shows its own columns (pmon's); use one or the "
		                       "other");
	return CMD_GO_ON;
}

/* The first snapshot (what the shown columns need, and the identity), the chosen GPUs, then
 * the loop. */
static int run_watch(struct cli *cli, const struct watch_args *a, struct watch *w)
{
	enum gpuctl_field fields[N_COLUMNS + 1];
	size_t n_fields = watch_fields(w, fields);
	_cleanup_(gpuctl_snapshot_freep) struct gpuctl_snapshot *snap = NULL;
	unsigned flags = w->procs ? GPUCTL_SNAP_PROC_UTIL : 0;
	int r;

	fields[n_fields++] = GPUCTL_F_UUID; /* always read; named for JSON lines */
	r = cli_snapshot_fields(cli, flags, fields, n_fields, &snap);
	if (r)
		return r;
	r = cli_select_gpus(cli, snap, a->ids, &w->gpus, &w->n_gpus);
	if (r)
		return r;
	w->reported_lost = calloc(gpuctl_snapshot_gpu_count(snap) + 1, sizeof(*w->reported_lost));
	if (!w->reported_lost) {
		cli_error("out of memory");
		return CLI_EXIT_FAILURE;
	}
	/* the loop owns the first snapshot */
	return watch_loop(cli, w, TAKE_PTR(snap), flags, a->count, a->delay);
}

static int cmd_watch_exec(struct cli *cli, int argc, char **argv)
{
	struct watch_args a = {.delay = 1.0};
	struct watch w = {.format = WATCH_DMON};
	int status;

	(void)parse_groups(&w, WATCH_DEFAULT_GROUP); /* a constant that parses */
	status = parse_options(argc, argv, &a, &w);
	if (status != CMD_GO_ON)
		return status;
	status = run_watch(cli, &a, &w);
	free(w.reported_lost);
	free(w.gpus);
	return cli_finish_output(status);
}

const struct cmd_entry cmd_watch_entry = {
        .name = "watch",
        .long_options = watch_options,
        .formats = (const char *const[]){"dmon", "csv", "jsonl", NULL},
        .short_options = "+:i:d:c:s:o:h",
        .usage = "[-i IDS] [-d SECONDS] [-c COUNT] [-s GROUPS] [-o D|T|DT] "
                 "[--format dmon|csv|jsonl] [--procs]",
        .summary = "stream GPU metrics over time, like nvidia-smi dmon (pmon with --procs)",
        .options = "  -i, --id, --only IDS\n"
                   "                       GPUs to show: indices, UUIDs or PCI bus ids,\n"
                   "                       comma-separated (default: all)\n"
                   "  -d, --delay SECONDS  seconds between intervals, 0.1 to 86400 (default 1)\n"
                   "  -c, --count COUNT    stop after COUNT intervals (default: until SIGINT)\n"
                   "  -s, --select GROUPS  column groups, letters of pucvmet (default puc):\n"
                   "                       p power/temperature, u utilisation, c clocks,\n"
                   "                       v power/thermal violations over the interval,\n"
                   "                       m FB/BAR1 memory, e ECC errors and PCIe replays,\n"
                   "                       t PCIe throughput\n"
                   "  -o, --options D|T|DT prefix each row with the date (D) and/or time (T)\n"
                   "  --format FORMAT      dmon (default: nvidia-smi dmon's layout), csv or "
                   "jsonl\n"
                   "                       (one JSON object per row); '-', [N/A] and null mark "
                   "what\n"
                   "                       the GPU does not give\n"
                   "  --procs              one row per compute process instead of per GPU "
                   "(pmon's\n"
                   "                       columns: pid type sm mem enc dec fb command)\n"
                   "  -h, --help           print this help\n",
        .exec = cmd_watch_exec,
        .exits = CMD_EXITS_DRIVER,
};
