// SPDX-License-Identifier: MIT
/*
 * cmd-quota.c: `gpuctl quota`: a user's quotas (docs/config.md "Quotas") and what counts against
 * them now, one row per pool, as quota(1) shows disk quotas: before a request is refused.
 *
 * Decisions:
 * - The numbers are the library's (gpuctl_quota_use), the very functions the quota check of a
 *   lease runs: held devices from the kernel's locks and owner records, GPU-hours from the
 *   ledger the governing configuration names (never --ledger or $GPUCTL_LEDGER: the check
 *   never reads one the user chooses), the windows the UTC day and the ISO week.
 * - The caller's own quotas; root may name anyone (--user NAME or UID). Anyone else naming
 *   another user is refused with one line and exit 1 before anything is read, as
 *   `release --force` is: another user's usage is not theirs to see.
 * - Every argument is checked before NVML is loaded: a bad one is exit 2 on any machine; the
 *   pool is checked against the configuration (no snapshot needed for that).
 * - No quota key at all: one line saying so, exit 0 (nothing is wrong).
 * - A ledger that cannot be read is said in the hour cells ("no ledger", "unreadable") and in
 *   JSON as null with the reason, never as 0 used: the check does not enforce those quotas then.
 * - Hours: used with at most 2 decimals and limits with at most 3 (what the configuration
 *   allows), trailing zeros dropped, as the refusal's line writes them.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "format.h"
#include "nss.h"
#include "parse.h"
#include "util.h"

enum {
	OPT_USER = 0x100,
	OPT_POOL,
	OPT_LEASE_DIR,
};

static const struct option quota_options[] = {
        {"user", required_argument, NULL, OPT_USER},
        {"pool", required_argument, NULL, OPT_POOL},
        {"lease-dir", required_argument, NULL, OPT_LEASE_DIR},
        CMD_OPTION_FORMAT,
        CMD_OPTION_HELP,
        {NULL, 0, NULL, 0},
};

enum quota_format { FMT_TABLE, FMT_JSON };

/* What the command line asks for. */
struct quota_args {
	const char *user;      /* --user, NULL: the caller */
	const char *pool;      /* --pool, NULL: every pool */
	const char *lease_dir; /* --lease-dir, NULL: the site's */
	int format;            /* enum quota_format */
	uid_t uid;             /* whose quotas */
	char name[64];         /* their name, or the uid in decimal */
};

/* One pool's row. */
struct quota_row {
	const char *pool;
	struct gpuctl_quota_use use;
};

static int parse_options(struct quota_args *a, int argc, char **argv)
{
	int opt, st;

	while ((opt = cmd_getopt(&cmd_quota_entry, argc, argv)) != -1) {
		switch (opt) {
		case OPT_USER:
			if (!optarg[0])
				return cmd_usage_error(&cmd_quota_entry, "--user: empty user name");
			a->user = optarg;
			break;
		case OPT_POOL:
			if (!optarg[0])
				return cmd_usage_error(&cmd_quota_entry, "--pool: empty pool name");
			a->pool = optarg;
			break;
		case OPT_LEASE_DIR:
			if (!optarg[0])
				return cmd_usage_error(&cmd_quota_entry, "--lease-dir: empty path");
			a->lease_dir = optarg;
			break;
		case CMD_OPT_FORMAT:
			if ((st = cmd_parse_format(&cmd_quota_entry, optarg, &a->format)))
				return st;
			break;
		case 'h':
			cmd_usage(&cmd_quota_entry, stdout);
			return CLI_EXIT_OK;
		default:
			return cmd_bad_option(&cmd_quota_entry, opt, argv);
		}
	}
	if (optind < argc)
		return cmd_usage_error(&cmd_quota_entry, "unexpected argument '%s'", argv[optind]);
	return CMD_GO_ON;
}

/* Whose quotas: --user (a name, else a uid in decimal) or the caller; only root may name
 * another. 0, or the exit status after the line. */
static int resolve_user(struct quota_args *a)
{
	_cleanup_free_ char *name = NULL;
	unsigned long v;

	a->uid = geteuid();
	if (a->user) {
		if (nss_user_uid(a->user, &a->uid) < 0) {
			if (parse_uint(a->user, 0, UINT32_MAX - 1, &v) < 0)
				return cmd_usage_error(
				        &cmd_quota_entry,
				        "--user: no user '%s' (a user name or a uid)", a->user);
			a->uid = (uid_t)v;
		}
		if (geteuid() != 0 && a->uid != geteuid()) {
			cli_error(
			        "quota: --user '%s': only root may see another user's quotas (you "
			        "are uid %u)",
			        a->user, (unsigned)geteuid());
			return CLI_EXIT_FAILURE;
		}
	}
	name = nss_user_name(a->uid);
	if (name)
		strscpy(a->name, sizeof(a->name), name);
	else
		(void)snprintf(a->name, sizeof(a->name), "%u", (unsigned)a->uid);
	return 0;
}

/* --pool against the configuration: 0, or exit 2 after the library's line naming it. */
static int check_pool(struct cli *cli, const struct quota_args *a)
{
	size_t idx;

	if (!a->pool || streq(a->pool, "default"))
		return 0;
	if (gpuctl_config_pool_find(cli->ctx, gpuctl_site_config(cli->site), a->pool, &idx) < 0) {
		cli_error("quota: --pool: %s", gpuctl_errmsg(cli->ctx));
		return CLI_EXIT_USAGE;
	}
	return 0;
}

/* ---- text ---- */

/* Hours with at most prec decimals, no trailing zeros ("0.05", "24"). */
static const char *hours(double h, int prec, char *buf, size_t size)
{
	char *dot;
	size_t n;

	(void)snprintf(buf, size, "%.*f", prec, h);
	dot = strchr(buf, '.');
	if (!dot)
		return buf;
	n = strlen(buf);
	while (n > (size_t)(dot - buf) && (buf[n - 1] == '0' || buf[n - 1] == '.'))
		buf[--n] = '\0';
	return buf;
}

/* A duration as the configuration writes one: "8h", "90m", "2d", "45s". */
static const char *duration(uint64_t s, char *buf, size_t size)
{
	if (s % 86400 == 0)
		(void)snprintf(buf, size, "%" PRIu64 "d", s / 86400);
	else if (s % 3600 == 0)
		(void)snprintf(buf, size, "%" PRIu64 "h", s / 3600);
	else if (s % 60 == 0)
		(void)snprintf(buf, size, "%" PRIu64 "m", s / 60);
	else
		(void)snprintf(buf, size, "%" PRIu64 "s", s);
	return buf;
}

/* UTC: ISO 8601 ("2026-12-07T00:00:00Z"), or for the table "2026-12-07 00:00", with the day
 * of the week before it when wday ("Mon 2026-12-07 00:00"). */
enum stamp_form { STAMP_ISO, STAMP_TABLE, STAMP_TABLE_WDAY };
static void stamp(double t, enum stamp_form form, char *buf, size_t size)
{
	time_t s = (time_t)t;
	struct tm tm;

	if (!gmtime_r(&s, &tm))
		(void)snprintf(buf, size, "%.0f", t);
	else
		strftime(buf, size,
		         form == STAMP_ISO     ? "%Y-%m-%dT%H:%M:%SZ"
		         : form == STAMP_TABLE ? "%Y-%m-%d %H:%M"
		                               : "%a %Y-%m-%d %H:%M",
		         &tm);
}

/* What the hour cells say when the ledger could not be read. */
static const char *hours_error_text(int e)
{
	return e == -ENOENT ? "no ledger" : "unreadable";
}

/* "USED/LIMIT" of one window's hours. */
static void hours_cell(const struct gpuctl_quota_use *u, bool week, char *buf, size_t size)
{
	double used = week ? u->gpu_hours_week : u->gpu_hours_day;
	double limit = week ? u->gpu_hours_week_limit : u->gpu_hours_day_limit;
	char a[32], b[32];

	(void)snprintf(buf, size, "%s/%s",
	               u->hours_error ? hours_error_text(u->hours_error) : hours(used, 2, a, 32),
	               limit < 0 ? "unlimited" : hours(limit, 3, b, 32));
}

static int print_table(const struct quota_args *a, const struct quota_row *rows, size_t n)
{
	struct text_table *t = NULL;
	char cells[7][48], reset[2][48];
	const char *head[] = {"POOL",         "GPUS", "LEASE",       "TODAY",
	                      "RESETS (UTC)", "WEEK", "RESETS (UTC)"};
	int err = 0;

	if (text_table_new(7, &t) < 0 || text_table_add(t, head) < 0) {
		text_table_free(t);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		const struct gpuctl_quota_use *u = &rows[i].use;
		const char *row[7];
		char l[32];

		if (!err)
			err = u->hours_error;
		stamp(u->day_start + 86400, STAMP_TABLE, reset[0], sizeof(reset[0]));
		stamp(u->week_start + 7 * 86400, STAMP_TABLE_WDAY, reset[1], sizeof(reset[1]));
		if (u->gpus_limit < 0)
			(void)snprintf(cells[1], sizeof(cells[1]), "%" PRIu64 "/unlimited",
			               u->gpus_held);
		else
			(void)snprintf(cells[1], sizeof(cells[1]), "%" PRIu64 "/%" PRId64,
			               u->gpus_held, u->gpus_limit);
		(void)snprintf(cells[2], sizeof(cells[2]), "%s",
		               u->lease_length_limit_s
		                       ? duration(u->lease_length_limit_s, l, sizeof(l))
		                       : "unlimited");
		hours_cell(u, false, cells[3], sizeof(cells[3]));
		hours_cell(u, true, cells[5], sizeof(cells[5]));
		row[0] = rows[i].pool;
		row[1] = cells[1];
		row[2] = cells[2];
		row[3] = cells[3];
		row[4] = reset[0];
		row[5] = cells[5];
		row[6] = reset[1];
		if (text_table_add(t, row) < 0) {
			text_table_free(t);
			return -ENOMEM;
		}
	}
	printf("Quotas of user %s (uid %u): GPUs held now, lease length, GPU-hours\n", a->name,
	       (unsigned)a->uid);
	text_table_print(t, stdout, false);
	text_table_free(t);
	if (err && n > 0)
		printf("GPU-hours: ledger %s: %s: not counted, and the GPU-hour quotas are not "
		       "enforced\n",
		       rows[0].use.ledger,
		       err == -ENOENT ? "none there (no agent has written one)" : strerror(-err));
	return 0;
}

/* ---- JSON (docs/json.md, "gpuctl quota") ---- */

static json_t *limit_or_null(bool unlimited, json_t *v)
{
	if (!unlimited)
		return v;
	json_decref(v);
	return json_null();
}

static json_t *json_row(const struct quota_row *row)
{
	const struct gpuctl_quota_use *u = &row->use;
	json_t *o = json_object();
	bool known = u->hours_error == 0;

	if (!o)
		return NULL;
	if (json_put(o, "pool", json_text(row->pool)) < 0 ||
	    json_put(o, "gpus_held", json_integer((json_int_t)u->gpus_held)) < 0 ||
	    json_put(o, "gpus_limit",
	             limit_or_null(u->gpus_limit < 0, json_integer(u->gpus_limit))) < 0 ||
	    json_put(o, "lease_length_limit_s",
	             limit_or_null(u->lease_length_limit_s == 0,
	                           json_integer((json_int_t)u->lease_length_limit_s))) < 0 ||
	    json_put(o, "gpu_hours_day", known ? json_real(u->gpu_hours_day) : json_null()) < 0 ||
	    json_put(o, "gpu_hours_day_limit",
	             limit_or_null(u->gpu_hours_day_limit < 0, json_real(u->gpu_hours_day_limit))) <
	            0 ||
	    json_put(o, "gpu_hours_week", known ? json_real(u->gpu_hours_week) : json_null()) < 0 ||
	    json_put(o, "gpu_hours_week_limit",
	             limit_or_null(u->gpu_hours_week_limit < 0,
	                           json_real(u->gpu_hours_week_limit))) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* The keys every document has: version, user, uid, configured. */
static json_t *json_head(const struct quota_args *a, bool configured)
{
	json_t *root = json_object();

	if (root && (json_put(root, "version", json_integer(1)) < 0 ||
	             json_put(root, "user", json_text(a->name)) < 0 ||
	             json_put(root, "uid", json_integer((json_int_t)a->uid)) < 0 ||
	             json_put(root, "configured", json_boolean(configured)) < 0)) {
		json_decref(root);
		return NULL;
	}
	return root;
}

static int print_json(const struct quota_args *a, const struct quota_row *rows, size_t n)
{
	json_t *root = json_head(a, true), *pools = json_array();
	char t[4][32];
	int err = 0, r = -ENOMEM;

	if (!root || !pools || n == 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		if (!err)
			err = rows[i].use.hours_error;
		if (json_array_append_new(pools, json_row(&rows[i])) < 0)
			goto out;
	}
	stamp(rows[0].use.day_start, STAMP_ISO, t[0], sizeof(t[0]));
	stamp(rows[0].use.day_start + 86400, STAMP_ISO, t[1], sizeof(t[1]));
	stamp(rows[0].use.week_start, STAMP_ISO, t[2], sizeof(t[2]));
	stamp(rows[0].use.week_start + 7 * 86400, STAMP_ISO, t[3], sizeof(t[3]));
	if (json_put(root, "ledger", json_text(rows[0].use.ledger)) < 0 ||
	    json_put(root, "ledger_error",
	             !err             ? json_null()
	             : err == -ENOENT ? json_string("no ledger at the path")
	                              : json_text(strerror(-err))) < 0 ||
	    json_put(root, "day_start", json_string(t[0])) < 0 ||
	    json_put(root, "day_resets", json_string(t[1])) < 0 ||
	    json_put(root, "week_start", json_string(t[2])) < 0 ||
	    json_put(root, "week_resets", json_string(t[3])) < 0)
		goto out;
	r = json_put(root, "pools", pools);
	pools = NULL;
	if (r == 0)
		r = json_print(root);
out:
	json_decref(pools);
	json_decref(root);
	return r;
}

/* ---- the run ---- */

/* No quota key in the configuration: one line (or the JSON head), exit 0. */
static int print_none(const struct quota_args *a)
{
	json_t *root;
	int r;

	if (a->format == FMT_TABLE) {
		printf("No quotas are configured (docs/config.md \"Quotas\"): user %s has no "
		       "limits\n",
		       a->name);
		return cli_finish_output(CLI_EXIT_OK);
	}
	root = json_head(a, false);
	r = root ? json_put(root, "pools", json_array()) : -ENOMEM;
	if (r == 0)
		r = json_print(root);
	json_decref(root);
	if (r < 0) {
		cli_error("quota: %s", strerror(-r));
		return CLI_EXIT_FAILURE;
	}
	return cli_finish_output(CLI_EXIT_OK);
}

/* The use of each pool asked for into rows (*n of them); the exit status. */
static int collect(struct cli *cli, const struct quota_args *a, const struct gpuctl_snapshot *snap,
                   struct quota_row *rows, size_t *n)
{
	const struct gpuctl_config *cfg = gpuctl_site_config(cli->site);
	size_t count = gpuctl_config_pool_count(cfg);

	*n = 0;
	for (size_t i = 0; i <= count; i++) {
		const char *name = "default";
		int r;

		if (i > 0 && gpuctl_config_pool_get(cfg, i - 1, &name, NULL, NULL, NULL, NULL) < 0)
			continue;
		if (a->pool && !streq(a->pool, name))
			continue;
		rows[*n] = (struct quota_row){.pool = name, .use = GPUCTL_QUOTA_USE_INIT};
		r = gpuctl_quota_use(cli->ctx, cli->site, snap, (uint32_t)a->uid, name,
		                     &rows[*n].use);
		if (r < 0) {
			cli_error("quota: %s", gpuctl_errmsg(cli->ctx));
			return r == -EAGAIN   ? CLI_EXIT_BUSY
			       : r == -EINVAL ? CLI_EXIT_USAGE
			                      : CLI_EXIT_FAILURE;
		}
		(*n)++;
	}
	return 0;
}

static int run_quota(struct cli *cli, const struct quota_args *a)
{
	static const enum gpuctl_field fields[] = {GPUCTL_F_MIG_MODE};
	const struct gpuctl_config *cfg;
	struct gpuctl_snapshot *snap = NULL;
	struct quota_row *rows;
	size_t n = 0;
	int status, r;

	status = cli_site(cli, &cmd_quota_entry, a->lease_dir, 0);
	if (status || (status = check_pool(cli, a)))
		return status;
	cfg = gpuctl_site_config(cli->site);
	if (!gpuctl_config_has_quota(cfg))
		return print_none(a);
	status = cli_snapshot_fields(cli, GPUCTL_SNAP_MIG, fields, 1, &snap);
	if (status)
		return status;
	rows = calloc(gpuctl_config_pool_count(cfg) + 1, sizeof(*rows));
	if (!rows) {
		gpuctl_snapshot_free(snap);
		cli_error("out of memory");
		return CLI_EXIT_FAILURE;
	}
	status = collect(cli, a, snap, rows, &n);
	if (!status) {
		r = a->format == FMT_JSON ? print_json(a, rows, n) : print_table(a, rows, n);
		if (r < 0) {
			cli_error("quota: %s", strerror(-r));
			status = CLI_EXIT_FAILURE;
		}
	}
	free(rows);
	gpuctl_snapshot_free(snap);
	return cli_finish_output(status);
}

static int cmd_quota_exec(struct cli *cli, int argc, char **argv)
{
	struct quota_args a = {0};
	int st = parse_options(&a, argc, argv);

	if (st != CMD_GO_ON || (st = resolve_user(&a)))
		return st;
	return run_quota(cli, &a);
}

const struct cmd_entry cmd_quota_entry = {
        .name = "quota",
        .long_options = quota_options,
        .short_options = "+:h",
        .formats = (const char *const[]){"table", "json", NULL},
        .usage = "[--user USER] [--pool NAME] [--format table|json] [--lease-dir DIR]",
        .summary = "your quotas in each pool and what you use of them now",
        .options = "  --user USER      (root) another user's quotas: a user name or a uid\n"
                   "  --pool NAME      this pool only (default: every pool, default included)\n"
                   "  --format FORMAT  table (default) or json\n"
                   "  --lease-dir DIR  the lease directory (default $GPUCTL_LEASE_DIR, else the\n"
                   "                   configuration's lease_dir, else /run/gpuctl)\n"
                   "  -h, --help       print this help\n",
        .notes = "\nPer pool: GPUs held now/at once, the longest lease, GPU-hours used today and\n"
                 "this ISO week/limit and when they reset (00:00 UTC; Monday), counted as a\n"
                 "lease request's quota check counts them (docs/config.md \"Quotas\"). Anyone\n"
                 "but root naming another user with --user: exit 1.\n",
        .exec = cmd_quota_exec,
        .exits = CMD_EXITS_DRIVER | CMD_EXITS_BUSY | CMD_EXITS_HUNG,
};
