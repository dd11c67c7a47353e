// SPDX-License-Identifier: MIT
/*
 * cmd-report.c: `gpuctl report`: GPU usage from the ledger the agent writes (docs/ledger.md),
 * grouped by user, group, pool, workload, GPU or day, as a table, CSV or JSON.
 *
 * Decisions:
 * - The ledger is opened read-only: a report runs while the agent writes (WAL), and never
 *   creates, migrates or repairs one. No ledger at the path is its own exit status (8) with one
 *   line saying that no agent has written one yet, so a script can tell "nothing recorded" from
 *   a failure.
 * - The path: --ledger, else $GPUCTL_LEDGER, else the configuration's `ledger`, else
 *   /var/lib/gpuctl/ledger.db. The configuration is read only when neither is given.
 * - The window defaults to everything recorded up to now, to the fraction of a second (now
 *   in whole seconds cut the last second's usage off a report taken right after it: up to a
 *   GPU-second per GPU); --since and --until are parsed (report-args.c) before anything is
 *   opened, so a bad one is exit 2 on any machine.
 * - Numbers: the table shows hours with two decimals; CSV six (a second is 0.000278 h); JSON
 *   gives hours and the wait seconds unrounded. A value that cannot be computed (efficiency of
 *   no GPU-hours, waits of no lease, kWh of no energy counter) is N/A / empty / null.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd.h"
#include "format.h"
#include "report-args.h"
#include "util.h"

enum {
	OPT_LEDGER = 0x100,
	OPT_SINCE,
	OPT_UNTIL,
	OPT_BY,
};

static const struct option report_options[] = {
        {"ledger", required_argument, NULL, OPT_LEDGER},
        {"since", required_argument, NULL, OPT_SINCE},
        {"until", required_argument, NULL, OPT_UNTIL},
        {"by", required_argument, NULL, OPT_BY},
        CMD_OPTION_FORMAT,
        CMD_OPTION_HELP,
        {NULL, 0, NULL, 0},
};

enum report_format { FMT_TABLE, FMT_CSV, FMT_JSON };

struct report_args {
	const char *ledger; /* --ledger, NULL: $GPUCTL_LEDGER, the configuration's, the default */
	const char *since_arg, *until_arg;
	double since, until;
	int by;     /* enum gpuctl_ledger_by */
	int format; /* enum report_format */
};

static int parse_time_opt(const char *opt, const char *arg, double now, double *ret)
{
	const char *why = "";

	if (report_parse_time(arg, now, ret, &why) < 0)
		return cmd_usage_error(&cmd_report_entry, "%s: '%s': %s", opt, arg, why);
	return 0;
}

static int parse_options(struct report_args *a, int argc, char **argv)
{
	double now = cli_now(CLOCK_REALTIME);
	int opt, st;

	while ((opt = cmd_getopt(&cmd_report_entry, argc, argv)) != -1) {
		switch (opt) {
		case OPT_LEDGER:
			if (!optarg[0])
				return cmd_usage_error(&cmd_report_entry, "--ledger: empty path");
			a->ledger = optarg;
			break;
		case OPT_SINCE:
			a->since_arg = optarg;
			break;
		case OPT_UNTIL:
			a->until_arg = optarg;
			break;
		case OPT_BY:
			if (report_parse_by(optarg, &a->by) < 0)
				return cmd_usage_error(&cmd_report_entry,
				                       "--by: unknown grouping '%s' (user, group, "
				                       "pool, workload, gpu or day)",
				                       optarg);
			break;
		case CMD_OPT_FORMAT:
			if ((st = cmd_parse_format(&cmd_report_entry, optarg, &a->format)))
				return st;
			break;
		case 'h':
			cmd_usage(&cmd_report_entry, stdout);
			return CLI_EXIT_OK;
		default:
			return cmd_bad_option(&cmd_report_entry, opt, argv);
		}
	}
	if (optind < argc)
		return cmd_usage_error(&cmd_report_entry, "unexpected argument '%s'", argv[optind]);
	a->since = 0;
	a->until = now;
	if (a->since_arg && (st = parse_time_opt("--since", a->since_arg, now, &a->since)))
		return st;
	if (a->until_arg && (st = parse_time_opt("--until", a->until_arg, now, &a->until)))
		return st;
	if (!(a->until > a->since))
		return cmd_usage_error(&cmd_report_entry, "--until '%s' is not after --since '%s'",
		                       a->until_arg ? a->until_arg : "now",
		                       a->since_arg ? a->since_arg : "the beginning");
	return CMD_GO_ON;
}

static void stamp(double t, char *buf, size_t size)
{
	time_t s = (time_t)t;
	struct tm tm;

	if (t < 0 || t > 253402300799.0 || !gmtime_r(&s, &tm)) {
		(void)snprintf(buf, size, "%.0f", t);
		return;
	}
	strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* ---- table ---- */

#define NCOLS 9

static void row_cells(const struct gpuctl_ledger_report_row *r, bool csv, char cells[][64])
{
	int prec = csv ? 6 : 2;

	(void)snprintf(cells[1], 64, "%.*f", prec, r->gpu_s / 3600);
	(void)snprintf(cells[2], 64, "%.*f", prec, r->busy_s / 3600);
	(void)snprintf(cells[3], 64, "%.*f", prec, r->idle_s / 3600);
	if (r->gpu_s > 0)
		(void)snprintf(cells[4], 64, csv ? "%.4f" : "%.0f%%",
		               csv ? r->busy_s / r->gpu_s : 100 * r->busy_s / r->gpu_s);
	else
		(void)snprintf(cells[4], 64, "%s", csv ? "" : "N/A");
	(void)snprintf(cells[5], 64, "%llu", (unsigned long long)r->jobs);
	if (r->waits) {
		(void)snprintf(cells[6], 64, csv ? "%.3f" : "%.0fs", r->wait_mean_s);
		(void)snprintf(cells[7], 64, csv ? "%.3f" : "%.0fs", r->wait_p95_s);
	} else {
		(void)snprintf(cells[6], 64, "%s", csv ? "" : "N/A");
		(void)snprintf(cells[7], 64, "%s", csv ? "" : "N/A");
	}
	if (r->has_energy)
		(void)snprintf(cells[8], 64, csv ? "%.6f" : "%.2f", r->energy_kwh);
	else
		(void)snprintf(cells[8], 64, "%s", csv ? "" : "N/A");
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct text_table *, text_table_free)

static int print_table(const struct report_args *a, const struct gpuctl_ledger_report *rep)
{
	_cleanup_(text_table_freep) struct text_table *t = NULL;
	const char *head[NCOLS] = {NULL,   "GPU-HOURS", "BUSY",     "IDLE", "EFFICIENCY",
	                           "JOBS", "WAIT-MEAN", "WAIT-P95", "KWH"};
	char upper[16], cells[NCOLS][64], key[4 * 40 + 1];
	const char *ptrs[NCOLS];
	size_t n = gpuctl_ledger_report_count(rep);
	int r;

	(void)snprintf(upper, sizeof(upper), "%s", gpuctl_ledger_by_name(a->by));
	for (char *p = upper; *p; p++)
		*p = (char)(*p - 'a' + 'A');
	head[0] = upper;
	if ((r = text_table_new(NCOLS, &t)) < 0 || (r = text_table_add(t, head)) < 0)
		return r;
	for (size_t i = 0; i <= n; i++) {
		const struct gpuctl_ledger_report_row *row =
		        i < n ? gpuctl_ledger_report_row(rep, i) : gpuctl_ledger_report_total(rep);

		row_cells(row, false, cells);
		format_cell_text(row->key[0] ? row->key : "-", 40, key, sizeof(key));
		ptrs[0] = i < n ? key : "total";
		for (int c = 1; c < NCOLS; c++)
			ptrs[c] = cells[c];
		if ((r = text_table_add(t, ptrs)) < 0)
			return r;
	}
	text_table_print(t, stdout, false);
	return 0;
}

/* ---- CSV (RFC 4180: a field with a comma, quote or line break is quoted, quotes doubled) ---- */

static void csv_field(const char *s)
{
	if (!strpbrk(s, ",\"\r\n")) {
		fputs(s, stdout);
		return;
	}
	putchar('"');
	for (; *s; s++) {
		if (*s == '"')
			putchar('"');
		putchar(*s);
	}
	putchar('"');
}

static int print_csv(const struct report_args *a, const struct gpuctl_ledger_report *rep)
{
	char cells[NCOLS][64];

	printf("%s,gpu_hours,busy_gpu_hours,idle_gpu_hours,efficiency,jobs,wait_mean_s,wait_p95_s,"
	       "kwh\n",
	       gpuctl_ledger_by_name(a->by));
	for (size_t i = 0; i < gpuctl_ledger_report_count(rep); i++) {
		const struct gpuctl_ledger_report_row *row = gpuctl_ledger_report_row(rep, i);

		row_cells(row, true, cells);
		csv_field(row->key);
		for (int c = 1; c < NCOLS; c++)
			printf(",%s", cells[c]);
		putchar('\n');
	}
	return 0;
}

/* ---- JSON (docs/json.md, "gpuctl report") ---- */

static json_t *json_row(const struct gpuctl_ledger_report_row *r, bool with_key)
{
	json_t *o = json_object();

	if (!o)
		return NULL;
	if ((with_key && json_put(o, "key", json_text(r->key)) < 0) ||
	    json_put(o, "gpu_hours", json_real(r->gpu_s / 3600)) < 0 ||
	    json_put(o, "busy_gpu_hours", json_real(r->busy_s / 3600)) < 0 ||
	    json_put(o, "idle_gpu_hours", json_real(r->idle_s / 3600)) < 0 ||
	    json_put(o, "efficiency",
	             r->gpu_s > 0 ? json_real(r->busy_s / r->gpu_s) : json_null()) < 0 ||
	    json_put(o, "jobs", json_integer((json_int_t)r->jobs)) < 0 ||
	    json_put(o, "waits", json_integer((json_int_t)r->waits)) < 0 ||
	    json_put(o, "wait_mean_s", r->waits ? json_real(r->wait_mean_s) : json_null()) < 0 ||
	    json_put(o, "wait_p95_s", r->waits ? json_real(r->wait_p95_s) : json_null()) < 0 ||
	    json_put(o, "kwh", r->has_energy ? json_real(r->energy_kwh) : json_null()) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int print_json(const struct report_args *a, const char *path,
                      const struct gpuctl_ledger_report *rep)
{
	json_t *root = json_object(), *groups = json_array();
	char since[32], until[32];
	int r = -ENOMEM;

	stamp(a->since, since, sizeof(since));
	stamp(a->until, until, sizeof(until));
	if (!root || !groups)
		goto out;
	for (size_t i = 0; i < gpuctl_ledger_report_count(rep); i++)
		if (json_array_append_new(groups,
		                          json_row(gpuctl_ledger_report_row(rep, i), true)) < 0)
			goto out;
	if (json_put(root, "ledger", json_text(path)) < 0 ||
	    json_put(root, "since", json_string(since)) < 0 ||
	    json_put(root, "until", json_string(until)) < 0 ||
	    json_put(root, "by", json_string(gpuctl_ledger_by_name(a->by))) < 0 ||
	    json_put(root, "groups", groups) < 0)
		goto out_root;
	if (json_put(root, "total", json_row(gpuctl_ledger_report_total(rep), false)) < 0)
		goto out_root;
	r = json_print(root);
	goto out_root;
out:
	json_decref(groups);
out_root:
	json_decref(root);
	return r;
}

static int run_report(struct cli *cli, const struct report_args *a)
{
	struct gpuctl_ledger_options o = GPUCTL_LEDGER_OPTIONS_INIT;
	struct gpuctl_ledger_report_request q = GPUCTL_LEDGER_REPORT_REQUEST_INIT;
	struct gpuctl_ledger *l = NULL;
	struct gpuctl_ledger_report *rep = NULL;
	const char *path = NULL;
	int status, r;

	if ((status = cli_context(cli)) ||
	    (status = cli_ledger_path(cli, &cmd_report_entry, a->ledger, &path)))
		return status;
	r = gpuctl_ledger_open(cli->ctx, path, &o, &l);
	if (r == -ENOENT) {
		cli_error("report: no ledger at '%s': no agent has written one yet", path);
		return CLI_EXIT_NOLEDGER;
	}
	if (r < 0) {
		cli_error("report: %s", gpuctl_errmsg(cli->ctx));
		return CLI_EXIT_FAILURE;
	}
	q.since = a->since;
	q.until = a->until;
	q.by = a->by;
	r = gpuctl_ledger_report(cli->ctx, l, &q, &rep);
	if (r < 0) {
		cli_error("report: %s: %s", path, gpuctl_errmsg(cli->ctx));
		gpuctl_ledger_free(l);
		return CLI_EXIT_FAILURE;
	}
	r = a->format == FMT_JSON  ? print_json(a, path, rep)
	    : a->format == FMT_CSV ? print_csv(a, rep)
	                           : print_table(a, rep);
	gpuctl_ledger_report_free(rep);
	gpuctl_ledger_free(l);
	if (r < 0 || fflush(stdout) != 0) {
		cli_error("report: %s", r < 0 ? strerror(-r) : "cannot write the output");
		return CLI_EXIT_FAILURE;
	}
	return CLI_EXIT_OK;
}

static int cmd_report_exec(struct cli *cli, int argc, char **argv)
{
	struct report_args a = {0};
	int st = parse_options(&a, argc, argv);

	return st != CMD_GO_ON ? st : run_report(cli, &a);
}

const struct cmd_entry cmd_report_entry = {
        .name = "report",
        .long_options = report_options,
        .short_options = "+:h",
        .formats = (const char *const[]){"table", "csv", "json", NULL},
        .usage = "[--ledger PATH] [--since TIME] [--until TIME]\n"
                 "       [--by user|group|pool|workload|gpu|day] [--format table|csv|json]",
        .summary = "GPU-hours, efficiency, jobs, waits and energy from the agent's ledger",
        .options =
                "  --ledger PATH    the ledger (default $GPUCTL_LEDGER, else the configuration's\n"
                "                   ledger, else /var/lib/gpuctl/ledger.db)\n"
                "  --since TIME     window start (default: the first record)\n"
                "  --until TIME     window end (default: now)\n"
                "  --by KEY         group by user (default), group, pool, workload, gpu or\n"
                "                   day (UTC date)\n"
                "  --format FORMAT  table (default), csv or json\n"
                "  -h, --help       print this help\n",
        .notes = "\nTIME: now; -N followed by s, m, h, d or w (-7d, -24h); YYYY-MM-DD or\n"
                 "YYYY-MM-DDTHH:MM[:SS], in UTC unless followed by Z or +HH:MM/-HH:MM.\n"
                 "Usage is counted for the part of each record inside the window "
                 "(docs/ledger.md).\n",
        .exec = cmd_report_exec,
        .exits = CMD_EXITS_LEDGER,
};
