// SPDX-License-Identifier: MIT
/*
 * cmd-health.c: `gpuctl health`: a verdict per GPU (OK, WARN, FAIL) with its findings, from
 * NVML's health facts and the XIDs of the kernel log (docs/health.md).
 *
 * Decisions:
 * - The exit status is the worst verdict of the GPUs checked: 0 all OK, 10 some WARN, 20 some
 *   FAIL (DCGM's health result values), so a script can branch without parsing; 1 when the
 *   check could not be made (NVML or the kernel log named by --kmsg/GPUCTL_KMSG unreadable), 4
 *   without a driver, 2 for usage errors, as every command.
 * - The kernel log: --kmsg FILE, else $GPUCTL_KMSG, else /dev/kmsg. A file that was named
 *   must be readable (else exit 1: an unread log would pass a GPU unchecked); /dev/kmsg, the
 *   default, may be unreadable (containers, kernel.dmesg_restrict): then XIDs come from nowhere
 *   and -v says so. `nvsim exec` sets GPUCTL_KMSG to the simulated log.
 * - The snapshot has GPUCTL_SNAP_HEALTH and GPUCTL_SNAP_TOPOLOGY (the NVLink walk); the checks
 *   are the library's (gpuctl_health_check), this file only renders.
 * - The table prints one block per GPU, a finding per line with its action under it, and a
 *   summary line; JSON is docs/json.md's "gpuctl health".
 * - The command is parsed into struct health_args and checked (every usage error before NVML),
 *   then one check runs (check_once) or --watch does (health-watch.c).
 * - --probe is health-probe.c's (one child per GPU or MIG device, under a deadline); --slurm
 *   is slurm.c's, with the drain reason and its JSON here; --watch is health-watch.c's.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "format.h"
#include "health-probe.h"
#include "health-watch.h"
#include "parse.h"
#include "gres.h"
#include "slurm.h"
#include "util.h"

#define PROBE_TIMEOUT_DEFAULT  10
#define PROBE_TIMEOUT_MAX      3600
#define WATCH_INTERVAL_DEFAULT 10

#define EXIT_HEALTH_WARN 10
#define EXIT_HEALTH_FAIL 20

enum {
	OPT_STRICT = 0x100,
	OPT_KMSG,
	OPT_PROBE,
	OPT_PROBE_TIMEOUT,
	OPT_PROBE_CHILD,
	OPT_SLURM,
	OPT_SLURM_CONF,
	OPT_SCONTROL,
	OPT_WATCH,
	OPT_INTERVAL,
	OPT_STATE,
};

static const struct option health_options[] = {
        CMD_OPTIONS_IDS,
        CMD_OPTION_FORMAT,
        CMD_OPTION_COLOR,
        {"strict", no_argument, NULL, OPT_STRICT},
        {"kmsg", required_argument, NULL, OPT_KMSG},
        {"probe", no_argument, NULL, OPT_PROBE},
        {"probe-timeout", required_argument, NULL, OPT_PROBE_TIMEOUT},
        {"probe-child", no_argument, NULL, OPT_PROBE_CHILD}, /* internal: one probe, here */
        {"slurm", no_argument, NULL, OPT_SLURM},
        {"slurm-conf", required_argument, NULL, OPT_SLURM_CONF},
        {"scontrol", required_argument, NULL, OPT_SCONTROL},
        {"watch", no_argument, NULL, OPT_WATCH},
        {"interval", required_argument, NULL, OPT_INTERVAL},
        {"state", required_argument, NULL, OPT_STATE},
        CMD_OPTION_HELP,
        {NULL, 0, NULL, 0},
};

struct health_args {
	const char *ids;        /* -i, NULL: every GPU */
	bool json;              /* --format json */
	bool color;             /* colour the verdicts (cli_use_color; never in JSON) */
	bool strict;            /* --strict */
	const char *kmsg;       /* --kmsg or $GPUCTL_KMSG; NULL: /dev/kmsg */
	bool kmsg_named;        /* kmsg was named by the user: it must be readable */
	bool probe;             /* --probe */
	unsigned probe_timeout; /* --probe-timeout, seconds */
	bool probe_child;       /* --probe-child: be one probe (health-probe.c) */
	bool slurm;             /* --slurm */
	const char *slurm_conf; /* --slurm-conf, NULL: not named */
	const char *scontrol;   /* --scontrol, else "scontrol" searched in $PATH (or, with no
	                         * PATH, in /bin:/usr/bin, as execvp(3) does) */
	bool watch;             /* --watch */
	unsigned interval;      /* --interval, seconds */
	const char *state_opt;  /* --state, NULL: the site's */
	char *state;            /* the health state file (owned) */
	char state_error[512];  /* why it could not be used, "" when it could or is not there */
	size_t *sel;            /* chosen snapshot indices */
	size_t nsel;            /* entries in sel */
};

static void count_verdicts(const struct health_args *a, const struct gpuctl_health_report *rep,
                           unsigned counts[3])
{
	counts[0] = counts[1] = counts[2] = 0;
	for (size_t k = 0; k < a->nsel; k++) {
		int v = gpuctl_health_verdict(rep, a->sel[k]);
		if (v >= 0 && v <= GPUCTL_HEALTH_FAIL)
			counts[v]++;
	}
}

static void print_table(const struct health_args *a, const struct gpuctl_snapshot *snap,
                        const struct gpuctl_health_report *rep, const struct health_probes *probes)
{
	size_t n = gpuctl_health_finding_count(rep);
	unsigned counts[3];

	for (size_t k = 0; k < a->nsel; k++) {
		const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, a->sel[k]);
		const char *uuid = gpuctl_gpu_str(g, GPUCTL_F_UUID);
		const char *bus = gpuctl_gpu_str(g, GPUCTL_F_PCI_BUS_ID);
		char shortu[64];

		if (uuid)
			format_short_uuid(uuid, shortu, sizeof(shortu));
		else
			strscpy(shortu, sizeof(shortu), "N/A");
		int verdict = gpuctl_health_verdict(rep, a->sel[k]);
		printf("GPU %zu  %s  %s  ", a->sel[k], shortu, bus ? bus : "N/A");
		format_print_colored(stdout, a->color, format_verdict_sgr(verdict),
		                     gpuctl_health_severity_name(verdict), 0);
		putchar('\n');
		for (size_t i = 0; i < n; i++) {
			const struct gpuctl_health_finding *f = gpuctl_health_finding(rep, i);
			if (f->gpu != a->sel[k])
				continue;
			fputs("  ", stdout);
			format_print_colored(stdout, a->color, format_verdict_sgr(f->severity),
			                     gpuctl_health_severity_name(f->severity), 4);
			char msg[1024], act[1024];

			printf("  %-19s  %s\n", f->check,
			       format_health_words(f->message, msg, sizeof(msg)));
			printf("  %-4s  %-19s  action: %s\n", "", "",
			       format_health_words(f->action, act, sizeof(act)));
		}
	}
	count_verdicts(a, rep, counts);
	printf("%zu GPU%s checked: %u OK, %u WARN, %u FAIL\n", a->nsel, a->nsel == 1 ? "" : "s",
	       counts[0], counts[1], counts[2]);
	health_probe_summary(probes, a->sel, a->nsel);
}

static json_t *finding_json(const struct gpuctl_health_finding *f)
{
	json_t *o = json_object();
	char msg[1024], act[1024];

	if (json_put(o, "check", json_text(f->check)) < 0 ||
	    json_put(o, "severity", json_text(gpuctl_health_severity_name(f->severity))) < 0 ||
	    json_put(o, "message", json_text(format_health_words(f->message, msg, sizeof(msg)))) <
	            0 ||
	    json_put(o, "action", json_text(format_health_words(f->action, act, sizeof(act)))) <
	            0 ||
	    json_put(o, "xid", f->xid ? json_integer(f->xid) : json_null()) < 0 ||
	    json_put(o, "xid_class",
	             f->xid ? json_text(gpuctl_xid_class_name(f->xid_class)) : json_null()) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *gpu_json(const struct gpuctl_snapshot *snap, const struct gpuctl_health_report *rep,
                        const struct health_probes *probes, size_t idx)
{
	const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, idx);
	json_t *o = json_object(), *findings = json_array();
	size_t n = gpuctl_health_finding_count(rep);

	if (!o || !findings)
		goto fail;
	for (size_t i = 0; i < n; i++) {
		const struct gpuctl_health_finding *f = gpuctl_health_finding(rep, i);
		if (f->gpu == idx && json_array_append_new(findings, finding_json(f)) < 0)
			goto fail;
	}
	if (json_put(o, "index", json_integer((json_int_t)idx)) < 0 ||
	    json_put(o, "uuid", json_string_or_null(gpuctl_gpu_str(g, GPUCTL_F_UUID))) < 0 ||
	    json_put(o, "pci_bus_id", json_string_or_null(gpuctl_gpu_str(g, GPUCTL_F_PCI_BUS_ID))) <
	            0 ||
	    json_put(o, "name", json_string_or_null(gpuctl_gpu_str(g, GPUCTL_F_NAME))) < 0 ||
	    json_put(o, "lost", json_boolean(gpuctl_gpu_lost(g))) < 0 ||
	    json_put(o, "verdict",
	             json_text(gpuctl_health_severity_name(gpuctl_health_verdict(rep, idx)))) < 0)
		goto fail;
	if (json_put(o, "findings", findings) < 0) {
		findings = NULL;
		goto fail;
	}
	if (json_put(o, "probe", health_probe_json(probes, idx)) < 0)
		goto fail;
	return o;
fail:
	json_decref(findings);
	json_decref(o);
	return NULL;
}

struct slurm_result;
static json_t *slurm_json(const struct slurm_result *res);

static int print_json(const struct health_args *a, const struct gpuctl_snapshot *snap,
                      const struct gpuctl_health_report *rep, const struct health_probes *probes,
                      int worst, bool kmsg_read, bool state_read, const struct slurm_result *sres)
{
	json_t *root = json_object(), *gpus = json_array(), *summary = json_object();
	unsigned counts[3];
	int r = -ENOMEM;

	if (!root || !gpus || !summary)
		goto out;
	for (size_t k = 0; k < a->nsel; k++)
		if (json_array_append_new(gpus, gpu_json(snap, rep, probes, a->sel[k])) < 0)
			goto out;
	count_verdicts(a, rep, counts);
	if (json_put(summary, "ok", json_integer(counts[0])) < 0 ||
	    json_put(summary, "warn", json_integer(counts[1])) < 0 ||
	    json_put(summary, "fail", json_integer(counts[2])) < 0)
		goto out;
	if (json_put(root, "verdict", json_text(gpuctl_health_severity_name(worst))) < 0 ||
	    json_put(root, "strict", json_boolean(a->strict)) < 0 ||
	    json_put(root, "kernel_log",
	             kmsg_read ? json_text(a->kmsg ? a->kmsg : "/dev/kmsg") : json_null()) < 0 ||
	    json_put(root, "state_file", state_read ? json_text(a->state) : json_null()) < 0)
		goto out;
	r = json_put(root, "summary", summary);
	summary = NULL;
	if (r < 0)
		goto out;
	r = json_put(root, "gpus", gpus);
	gpus = NULL;
	if (r < 0)
		goto out;
	if ((r = json_put(root, "probe", health_probe_summary_json(probes, a->sel, a->nsel))) < 0)
		goto out;
	if (sres && (r = json_put(root, "slurm", slurm_json(sres))) < 0)
		goto out;
	r = json_print(root);
out:
	json_decref(summary);
	json_decref(gpus);
	json_decref(root);
	return r;
}

/* Reads the health state file into xids and *ret_prev: advisory (a missing or untrusted file
 * is said under -v and otherwise ignored); one that is there but unusable is kept in
 * a->state_error, for the "state" finding of every GPU. */
static int read_state(struct cli *cli, struct health_args *a, const struct gpuctl_snapshot *snap,
                      struct gpuctl_xid_log *xids, struct gpuctl_snapshot **ret_prev,
                      double *ret_age, bool *ret_read)
{
	int r = gpuctl_health_state_read(cli->ctx, a->state, snap, xids, ret_prev, ret_age);

	*ret_read = r >= 0;
	if (r == -ENOMEM) {
		cli_error("health: out of memory");
		return CLI_EXIT_FAILURE;
	}
	if (r < 0 && cli->verbose)
		fprintf(stderr, "gpuctl: debug: %s; no recorded health state used\n",
		        gpuctl_errmsg(cli->ctx));
	if (r < 0 && r != -ENOENT && r != -EPERM)
		strscpy(a->state_error, sizeof(a->state_error), gpuctl_errmsg(cli->ctx));
	return 0;
}

/* Reads the kernel log into xids; returns 0 or an exit status. *ret_read: it was read. */
static int read_kmsg(struct cli *cli, const struct health_args *a,
                     const struct gpuctl_snapshot *snap, struct gpuctl_xid_log *xids,
                     bool *ret_read)
{
	int r = gpuctl_xid_log_read(cli->ctx, xids, snap, a->kmsg);

	*ret_read = r >= 0;
	if (r >= 0)
		return 0;
	if (r == -ENOMEM) {
		cli_error("health: out of memory");
		return CLI_EXIT_FAILURE;
	}
	if (a->kmsg_named) {
		cli_error("health: %s", gpuctl_errmsg(cli->ctx));
		return CLI_EXIT_FAILURE;
	}
	if (cli->verbose)
		fprintf(stderr, "gpuctl: debug: %s; XIDs are not read from the kernel log\n",
		        gpuctl_errmsg(cli->ctx));
	return 0;
}

/* ---- --slurm ---- */

struct slurm_result {
	char node[256];                /* this node's Slurm name */
	enum slurm_action action;      /* what was done */
	char reason[SLURM_REASON_MAX]; /* the drain reason written (SLURM_DRAIN) */
};

/* "gpuctl: GPU 1 FAIL (xid 79, ecc-dbe); GPU 3 FAIL (nvlink-down)", cut to fit. */
static void slurm_reason(const struct health_args *a, const struct gpuctl_health_report *rep,
                         char *buf, size_t size)
{
	size_t n = gpuctl_health_finding_count(rep), len;
	bool any = false;

	(void)snprintf(buf, size, "%s", SLURM_REASON_PREFIX);
	for (size_t k = 0; k < a->nsel; k++) {
		const char *sep = "";

		if (gpuctl_health_verdict(rep, a->sel[k]) != GPUCTL_HEALTH_FAIL)
			continue;
		len = strlen(buf);
		(void)snprintf(buf + len, size - len, "%s GPU %zu FAIL (", any ? ";" : "",
		               a->sel[k]);
		any = true;
		for (size_t i = 0; i < n; i++) {
			const struct gpuctl_health_finding *f = gpuctl_health_finding(rep, i);

			if (f->gpu != a->sel[k] || f->severity != GPUCTL_HEALTH_FAIL)
				continue;
			len = strlen(buf);
			if (f->xid)
				(void)snprintf(buf + len, size - len, "%s%s %u", sep, f->check,
				               f->xid);
			else
				(void)snprintf(buf + len, size - len, "%s%s", sep, f->check);
			sep = ", ";
		}
		len = strlen(buf);
		(void)snprintf(buf + len, size - len, ")");
	}
}

static int do_slurm(const struct health_args *a, const struct gpuctl_health_report *rep, int worst,
                    struct slurm_result *res)
{
	char err[512] = "";
	int r;

	r = gres_node_name(res->node, sizeof(res->node));
	if (r < 0) {
		cli_error("health: --slurm: cannot tell this node's name: %s", strerror(-r));
		return CLI_EXIT_FAILURE;
	}
	slurm_reason(a, rep, res->reason, sizeof(res->reason));
	r = slurm_apply(a->scontrol, res->node, worst == GPUCTL_HEALTH_FAIL, res->reason,
	                &res->action, err, sizeof(err));
	if (r < 0) {
		cli_error("health: --slurm: %s", err);
		return CLI_EXIT_FAILURE;
	}
	return 0;
}

static const char *slurm_action_name(enum slurm_action a)
{
	return a == SLURM_DRAIN ? "drain" : a == SLURM_RESUME ? "resume" : "none";
}

static json_t *slurm_json(const struct slurm_result *res)
{
	json_t *o = json_object();

	if (json_put(o, "node", json_text(res->node)) < 0 ||
	    json_put(o, "action", json_text(slurm_action_name(res->action))) < 0 ||
	    json_put(o, "reason",
	             res->action == SLURM_DRAIN ? json_text(res->reason) : json_null()) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* ---- the command ---- */

/* The options into a: CMD_GO_ON, or the exit status to return now (--help, a usage
 * error). */
static int parse_options(struct cli *cli, struct health_args *a, int argc, char **argv)
{
	unsigned long ul;
	int opt, status;

	while ((opt = cmd_getopt(&cmd_health_entry, argc, argv)) != -1) {
		switch (opt) {
		case 'i':
			a->ids = optarg;
			break;
		case CMD_OPT_FORMAT: {
			int i, st = cmd_parse_format(&cmd_health_entry, optarg, &i);

			if (st)
				return st;
			a->json = i == 1;
			break;
		}
		case OPT_STRICT:
			a->strict = true;
			break;
		case OPT_KMSG:
			if (!optarg[0])
				return cmd_usage_error(&cmd_health_entry,
				                       "--kmsg: empty file name");
			a->kmsg = optarg;
			a->kmsg_named = true;
			break;
		case OPT_PROBE:
			a->probe = true;
			break;
		case OPT_PROBE_TIMEOUT:
			if (parse_uint(optarg, 1, PROBE_TIMEOUT_MAX, &ul) < 0)
				return cmd_usage_error(
				        &cmd_health_entry,
				        "--probe-timeout: '%s' is not a number of seconds "
				        "from 1 to %d",
				        optarg, PROBE_TIMEOUT_MAX);
			a->probe_timeout = (unsigned)ul;
			break;
		case OPT_PROBE_CHILD:
			a->probe_child = true;
			break;
		case OPT_SLURM:
			a->slurm = true;
			break;
		case OPT_SLURM_CONF:
			if (!optarg[0])
				return cmd_usage_error(&cmd_health_entry,
				                       "--slurm-conf: empty file name");
			a->slurm_conf = optarg;
			break;
		case OPT_SCONTROL:
			if (!optarg[0])
				return cmd_usage_error(&cmd_health_entry,
				                       "--scontrol: empty file name");
			a->scontrol = optarg;
			break;
		case OPT_WATCH:
			a->watch = true;
			break;
		case OPT_STATE:
			if (!optarg[0])
				return cmd_usage_error(&cmd_health_entry,
				                       "--state: empty file name");
			a->state_opt = optarg;
			break;
		case OPT_INTERVAL:
			if (parse_uint(optarg, 1, 86400, &ul) < 0)
				return cmd_usage_error(
				        &cmd_health_entry,
				        "--interval: '%s' is not a number of seconds "
				        "from 1 to 86400",
				        optarg);
			a->interval = (unsigned)ul;
			break;
		case CMD_OPT_COLOR:
			status = cli_color_option(cli, &cmd_health_entry, optarg);
			if (status)
				return status;
			break;
		case 'h':
			cmd_usage(&cmd_health_entry, stdout);
			return CLI_EXIT_OK;
		default:
			return cmd_bad_option(&cmd_health_entry, opt, argv);
		}
	}
	return CMD_GO_ON;
}

/* The options together; then what they leave open: SLURM_CONF, the state file (a->state,
 * owned from here on), the kernel log. 0 or the exit status. */
static int settle_args(struct cli *cli, struct health_args *a)
{
	int status;

	if (a->watch && (a->probe || a->slurm))
		return cmd_usage_error(&cmd_health_entry,
		                       "--watch cannot be combined with --probe or --slurm");
	/* --watch runs on, reading NVML again and again: no fatal bound (watchdog.h) */
	if (a->watch)
		cli->oneshot = false;
	if ((a->slurm_conf || a->scontrol) && !a->slurm)
		return cmd_usage_error(&cmd_health_entry, "--%s goes with --slurm",
		                       a->slurm_conf ? "slurm-conf" : "scontrol");
	/* scontrol (and gpuctl's own reading of gres.conf) find Slurm's configuration here, as
	 * Slurm's tools do: a HealthCheckProgram runs without SLURM_CONF */
	if (a->slurm_conf && setenv("SLURM_CONF", a->slurm_conf, 1) < 0) {
		cli_error("health: --slurm-conf: %s", strerror(errno));
		return CLI_EXIT_FAILURE;
	}
	/* every usage error is behind us: from here on a->state is owned */
	if (!a->state_opt) {
		status = cli_site(cli, &cmd_health_entry, NULL, GPUCTL_SITE_NO_LEASES);
		if (status)
			return status;
		a->state_opt = gpuctl_site_health_state_path(cli->site);
	}
	a->state = strdup(a->state_opt);
	if (!a->state) {
		cli_error("health: out of memory");
		return CLI_EXIT_FAILURE;
	}
	if (!a->kmsg) {
		const char *env = getenv("GPUCTL_KMSG");
		if (env && env[0]) {
			a->kmsg = env;
			a->kmsg_named = true;
		}
	}
	return 0;
}

/* What one check read and found. */
struct health_run {
	struct gpuctl_snapshot *snap;     /* the machine now */
	struct gpuctl_xid_log *xids;      /* from the kernel log and the state file */
	struct gpuctl_snapshot *prev;     /* the state file's snapshot, NULL: none */
	struct health_probes probes;      /* --probe's outcomes */
	struct gpuctl_health_report *rep; /* the findings and verdicts */
	struct gpuctl_health_opts opts;   /* what the checks were given */
	struct slurm_result sres;         /* --slurm's action */
	bool kmsg_read;                   /* the kernel log was read */
	bool state_read;                  /* the state file was read */
	int worst;                        /* the worst verdict of the chosen GPUs */
};

static void health_run_free(struct health_run *h)
{
	health_probes_free(&h->probes);
	gpuctl_snapshot_free(h->prev);
	gpuctl_health_report_free(h->rep);
	gpuctl_xid_log_free(h->xids);
	gpuctl_snapshot_free(h->snap);
}

/* The snapshot, the chosen GPUs (a->sel), the kernel log, the state file and the probes: what
 * the checks read. 0 or the exit status. */
static int read_facts(struct cli *cli, struct health_args *a, struct health_run *h)
{
	/* the facts the checks read, and identity: nothing else is shown */
	size_t nhf;
	const enum gpuctl_field *hf = gpuctl_health_fields(&nhf);
	int status;

	/* --probe reaches a GPU in MIG mode through its MIG devices */
	status = cli_snapshot_fields(
	        cli, GPUCTL_SNAP_HEALTH | GPUCTL_SNAP_TOPOLOGY | (a->probe ? GPUCTL_SNAP_MIG : 0),
	        hf, nhf, &h->snap);
	if (status)
		return status;
	status = cli_select_gpus(cli, h->snap, a->ids, &a->sel, &a->nsel);
	if (status)
		return status;
	if (gpuctl_xid_log_new(&h->xids) < 0) {
		cli_error("health: out of memory");
		return CLI_EXIT_FAILURE;
	}
	status = read_kmsg(cli, a, h->snap, h->xids, &h->kmsg_read);
	if (status)
		return status;
	status =
	        read_state(cli, a, h->snap, h->xids, &h->prev, &h->opts.prev_age_s, &h->state_read);
	if (status)
		return status;
	h->opts.prev = h->prev;
	h->opts.strict = a->strict;
	h->opts.state_error = a->state_error[0] ? a->state_error : NULL;
	if (a->probe) {
		status = health_probe(h->snap, a->sel, a->nsel, a->probe_timeout, &h->probes);
		if (status)
			return status;
		h->opts.probes = h->probes.res;
		h->opts.n_probes = h->probes.n;
	}
	return 0;
}

/* The table or the JSON, with --slurm's action; 0 or -errno. */
static int print_result(struct cli *cli, struct health_args *a, const struct health_run *h)
{
	const bool slurm = a->slurm;

	if (a->json)
		return print_json(a, h->snap, h->rep, a->probe ? &h->probes : NULL, h->worst,
		                  h->kmsg_read, h->state_read, slurm ? &h->sres : NULL);
	a->color = cli_use_color(cli);
	print_table(a, h->snap, h->rep, a->probe ? &h->probes : NULL);
	if (slurm && h->sres.action == SLURM_DRAIN)
		printf("slurm: drained node %s: %s\n", h->sres.node, h->sres.reason);
	else if (slurm && h->sres.action == SLURM_RESUME)
		printf("slurm: resumed node %s\n", h->sres.node);
	return 0;
}

/* One check of the chosen GPUs; the exit status is the worst verdict's. */
static int check_once(struct cli *cli, struct health_args *a)
{
	_cleanup_(health_run_free) struct health_run h = {.opts = GPUCTL_HEALTH_OPTS_INIT,
	                                                  .worst = GPUCTL_HEALTH_OK};
	int status, r;

	status = read_facts(cli, a, &h);
	if (status)
		return status;
	r = gpuctl_health_check(cli->ctx, h.snap, h.xids, &h.opts, &h.rep);
	if (r < 0) {
		cli_error("health: %s", gpuctl_errmsg(cli->ctx));
		return CLI_EXIT_FAILURE;
	}
	for (size_t k = 0; k < a->nsel; k++) {
		int v = gpuctl_health_verdict(h.rep, a->sel[k]);
		if (v > h.worst)
			h.worst = v;
	}
	if (a->slurm) {
		status = do_slurm(a, h.rep, h.worst, &h.sres);
		if (status)
			return status;
	}
	r = print_result(cli, a, &h);
	if (r < 0) {
		cli_error("health: cannot write the output: %s", strerror(-r));
		return CLI_EXIT_FAILURE;
	}
	return h.worst == GPUCTL_HEALTH_FAIL   ? EXIT_HEALTH_FAIL
	       : h.worst == GPUCTL_HEALTH_WARN ? EXIT_HEALTH_WARN
	                                       : CLI_EXIT_OK;
}

static int cmd_health_exec(struct cli *cli, int argc, char **argv)
{
	struct health_args a = {.probe_timeout = PROBE_TIMEOUT_DEFAULT,
	                        .interval = WATCH_INTERVAL_DEFAULT};
	int status;

	status = parse_options(cli, &a, argc, argv);
	if (status != CMD_GO_ON)
		return status;
	if (optind < argc)
		return cmd_usage_error(&cmd_health_entry, "unexpected argument '%s'", argv[optind]);
	if (a.probe_child)
		return health_probe_child();
	status = settle_args(cli, &a);
	if (status)
		return status;
	if (a.watch) {
		struct watch_args w = {.ids = a.ids,
		                       .json = a.json,
		                       .strict = a.strict,
		                       .kmsg = a.kmsg,
		                       .kmsg_named = a.kmsg_named,
		                       .interval = a.interval,
		                       .state = a.state};
		status = cli_finish_output(health_watch(cli, &w));
	} else {
		status = check_once(cli, &a);
	}
	free(a.sel);
	free(a.state);
	return status;
}

const struct cmd_entry cmd_health_entry = {
        .name = "health",
        .long_options = health_options,
        .formats = (const char *const[]){"table", "json", NULL},
        .short_options = "+:i:h",
        .internal_options = (const char *const[]){"probe-child", NULL},
        .usage = "[-i IDS] [--format table|json] [--strict] [--kmsg FILE] [--probe "
                 "[--probe-timeout SECONDS]] [--slurm [--slurm-conf FILE] [--scontrol PATH]] "
                 "[--watch [--interval SECONDS]] "
                 "[--state FILE] [--color WHEN]",
        .summary = "check each GPU's health: OK, WARN or FAIL with findings and actions",
        .options =
                "  -i, --id, --only IDS\n"
                "                   only these GPUs (indices, UUIDs or PCI bus ids,\n"
                "                   comma-separated); --only is nvitop's name\n"
                "  --format FORMAT  table (default) or json\n"
                "  --strict         a pending page retirement or row remap is FAIL, not WARN\n"
                "  --kmsg FILE      read XIDs from this kernel log (default: $GPUCTL_KMSG, else\n"
                "                   /dev/kmsg when readable)\n"
                "  --probe          also try CUDA on each GPU: a child process that sees only\n"
                "                   that GPU creates a context, allocates and frees memory\n"
                "                   (a GPU in MIG mode: one child per MIG device); says what\n"
                "                   passed on each GPU and, after the count, where it passed\n"
                "  --probe-timeout SECONDS\n"
                "                   a probe that has not finished by then is killed and the\n"
                "                   GPU FAILs (default 10)\n"
                "  --slurm          as Slurm's HealthCheckProgram: drain this node when a GPU\n"
                "                   FAILs, resume it when healthy if gpuctl drained it\n"
                "  --slurm-conf FILE\n"
                "                   Slurm's slurm.conf for scontrol (a HealthCheckProgram runs\n"
                "                   without SLURM_CONF; default: $SLURM_CONF, else Slurm's own)\n"
                "  --scontrol PATH  the scontrol to run (default: scontrol in $PATH, or in\n"
                "                   /bin:/usr/bin when PATH is unset, as slurmd leaves it)\n"
                "  --watch          keep checking: print each finding when it appears or clears\n"
                "                   (XIDs through NVML events at once), until interrupted;\n"
                "                   NVML not answering for two intervals is a line too\n"
                "  --interval SECONDS\n"
                "                   with --watch, seconds between snapshots (default 10)\n"
                "  --state FILE     the health state file --watch writes and checks read\n"
                "                   (default: $GPUCTL_HEALTH_STATE, else the lease directory's\n"
                "                   path followed by -health.state)\n"
                "  --color WHEN     colour the table: auto (on a terminal, unless NO_COLOR is\n"
                "                   set), always or never\n"
                "  -h, --help       print this help\n",
        .exec = cmd_health_exec,
        .exits = CMD_EXITS_DRIVER | CMD_EXITS_HEALTH | CMD_EXITS_HUNG,
};
