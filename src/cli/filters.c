// SPDX-License-Identifier: MIT
/*
 * filters.c: the selection options shared by `gpuctl select` and `gpuctl run`, and the call of
 * gpuctl_alloc() with them (docs/library.md: the library does the rest).
 *
 * Decisions:
 * - Every option is checked before NVML is touched, so a bad size or a conflict is exit 2 even
 *   without a driver. Ids (--only/--exclude), MIG profiles and pools need the snapshot or the
 *   configuration: the library checks them and its -EINVAL is exit 2 too.
 * - The library's errors become exit statuses here and nowhere else: -EINVAL 2, -ENOSPC and
 *   -ETIMEDOUT 3 (too few devices qualify, or not within --wait=SECONDS), -ENODEV 4 (no
 *   driver), everything else 1; its one-line message is printed after the command's name.
 * - -EAGAIN (select.lock held past its bound by another process) is exit 6; -EDQUOT (over a
 *   quota, docs/config.md "Quotas") exit 9.
 * - The library's messages name the request's fields (struct gpuctl_alloc_request: "share_mem
 *   4 GiB", "ignore_outer"), never our options; its line is printed with each field respelled
 *   as the option that sets it (spell_options), so it names what the user typed: `--share --mem
 *   4GiB` reads "--mem 4 GiB", not "--min-free-mem". "only" and "exclude" are English words
 *   too: they are respelled only as a label (at a clause's start, before ':').
 * - --wait: SIGINT, SIGTERM and SIGHUP are blocked and taken through a signalfd, which is the
 *   library's cancel descriptor, so a signal ends the wait with 128+N and nothing leased. The
 *   --hold holder also stops when the select that started it is gone (its report pipe's reader
 *   closed): both sources are joined in one epoll descriptor.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "filters.h"
#include "parse.h"
#include "util.h"

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
		o->req.ignore_outer = true;
		return 0;
	case OPT_FILTER_LEASE_DIR:
		if (!arg[0])
			return cmd_usage_error(entry, "--lease-dir: empty path");
		o->req.lease_dir = arg;
		return 0;
	case OPT_FILTER_LABEL:
		o->req.label = arg;
		return 0;
	case OPT_FILTER_IGNORE_FOREIGN:
		o->req.ignore_foreign = true;
		return 0;
	case OPT_FILTER_SHARE:
		o->share = true;
		return 0;
	case OPT_FILTER_POOL:
		if (!arg[0])
			return cmd_usage_error(entry, "--pool: empty pool name");
		o->req.pool = arg;
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
		o->req.wait = true;
		o->req.wait_timeout_s = -1;
		if (arg) {
			if (parse_uint(arg, 0, (unsigned long)FILTERS_WAIT_MAX_S, &v) < 0)
				return cmd_usage_error(entry,
				                       "--wait: '%s' is not a number of seconds "
				                       "(0 to %ld)",
				                       arg, FILTERS_WAIT_MAX_S);
			o->req.wait_timeout_s = (double)v;
		}
		return 0;
	default:
		return -1;
	}
}

int filters_check(const struct cmd_entry *entry, struct select_args *o)
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
	o->req.share_mem = o->share ? o->share_mem : 0;
	return 0;
}

/* A request field the library's messages name, and the option that sets it. */
static const struct {
	const char *field;
	const char *option;
	bool label_only; /* an English word too: only at a clause's start, before ':' */
} field_options[] = {
        {"only", "--only", true},
        {"exclude", "--exclude", true},
        {"numa_node", "--numa", false},
        {"min_free_mem", "--min-free-mem", false},
        {"share_mem", "--mem", false},
        {"max_util", "--max-util", false},
        {"no_procs", "--no-procs", false},
        {"mig_profile", "--mig", false},
        {"ignore_outer", "--ignore-outer", false},
        {"allow_unhealthy", "--allow-unhealthy", false},
        {"ignore_foreign", "--ignore-foreign", false},
};

static bool word_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '-' || c == '.';
}

/* Whether msg + i starts a clause: the message's start, or after ": ", "; " or "(". */
static bool clause_start(const char *msg, size_t i)
{
	return i == 0 || msg[i - 1] == '(' ||
	       (i >= 2 && msg[i - 1] == ' ' && (msg[i - 2] == ':' || msg[i - 2] == ';'));
}

/* msg with each request field the library names respelled as its option (see the top). */
static void spell_options(const char *msg, char *buf, size_t size)
{
	size_t used = 0;

	for (size_t i = 0; msg[i] && used + 1 < size;) {
		const char *with = NULL;
		size_t skip = 1;

		if (i == 0 || !word_char(msg[i - 1]))
			for (size_t k = 0; k < ELEMENTSOF(field_options) && !with; k++) {
				size_t n = strlen(field_options[k].field);

				if (strncmp(msg + i, field_options[k].field, n) != 0 ||
				    word_char(msg[i + n]))
					continue;
				if (field_options[k].label_only &&
				    (!clause_start(msg, i) || msg[i + n] != ':'))
					continue;
				with = field_options[k].option;
				skip = n;
			}
		if (with)
			used += (size_t)snprintf(buf + used, size - used, "%s", with);
		else
			buf[used++] = msg[i];
		if (used >= size)
			used = size - 1;
		i += skip;
	}
	buf[used] = '\0';
}

/* The exit status of a gpuctl_alloc failure, its line printed. sig: the signal that cancelled
 * a wait, 0 if none. */
static int alloc_status(struct cli *cli, const struct cmd_entry *entry, int r, int sig)
{
	const char *msg = gpuctl_errmsg(cli->ctx);
	char spelled[1024];

	if (r == -ECANCELED && sig > 0)
		return 128 + sig; /* as a shell reports a job ended by the signal */
	if (r == -ENODEV)
		return cli_driver_error(cli, r);
	spell_options(msg && msg[0] ? msg : strerror(-r), spelled, sizeof(spelled));
	cli_error("%s: %s", entry->name, spelled);
	switch (r) {
	case -EINVAL:
		return CLI_EXIT_USAGE;
	case -ENOSPC:
	case -ETIMEDOUT:
		return CLI_EXIT_NOMATCH;
	case -EAGAIN:
		return CLI_EXIT_BUSY;
	case -EDQUOT:
		return CLI_EXIT_QUOTA;
	default:
		return CLI_EXIT_FAILURE;
	}
}

/* A pending SIGINT/SIGTERM/SIGHUP on sfd: its number, else 0. */
static int pending_signal(int sfd)
{
	struct signalfd_siginfo si;

	if (sfd >= 0 && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		return (int)si.ssi_signo;
	return 0;
}

/* The cancel descriptor of a wait: sfd alone, or sfd and the hang-up of hangup_fd joined in an
 * epoll descriptor (readable when either is ready). -1 when none could be made. */
static int cancel_fd(int sfd, int hangup_fd)
{
	int ep;

	if (hangup_fd <= 0 || sfd < 0)
		return sfd;
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		return sfd;
	/* a pipe's write end reports EPOLLERR once its reader is gone, whatever the events */
	if (epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &(struct epoll_event){.events = EPOLLIN}) < 0 ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, hangup_fd, &(struct epoll_event){.events = 0}) < 0) {
		close(ep);
		return sfd;
	}
	return ep;
}

int filters_alloc(struct cli *cli, const struct cmd_entry *entry, struct select_args *o,
                  enum gpuctl_alloc_mode mode, const char *command, struct gpuctl_alloc **ret_alloc)
{
	struct gpuctl_alloc_request req = o->req;
	struct sigaction hup;
	sigset_t set, old;
	int sfd = -1, cfd = -1, sig = 0, r;

	r = cli_context(cli);
	if (r)
		return r;
	req.mode = mode;
	req.command = command;
	req.config_path = cli->config_path;
	req.avoid = (const char *const *)o->avoid;
	req.n_avoid = o->n_avoid;
	if (req.wait) {
		sigemptyset(&set);
		sigaddset(&set, SIGINT);
		sigaddset(&set, SIGTERM);
		if (sigaction(SIGHUP, NULL, &hup) == 0 && hup.sa_handler != SIG_IGN)
			sigaddset(&set, SIGHUP); /* not under nohup, nor in the --hold holder */
		sigprocmask(SIG_BLOCK, &set, &old);
		sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
		cfd = cancel_fd(sfd, o->wait_hangup_fd);
		req.cancel_fd = cfd;
	}
	r = gpuctl_alloc(cli->ctx, &req, ret_alloc);
	if (req.wait) {
		sig = pending_signal(sfd);
		if (r == -ECANCELED && !sig)
			sig = SIGTERM; /* whoever waits for our report is gone */
		if (r >= 0 && sig) {
			/* a signal came as the devices did: it wins, nothing stays leased */
			gpuctl_alloc_free(*ret_alloc);
			*ret_alloc = NULL;
			r = -ECANCELED;
		}
		if (cfd >= 0 && cfd != sfd)
			close(cfd);
		if (sfd >= 0)
			close(sfd);
		sigprocmask(SIG_SETMASK, &old, NULL);
	}
	if (r < 0)
		return alloc_status(cli, entry, r, sig);
	return 0;
}

int filters_avoid(struct select_args *o, const char *uuid)
{
	char **nv = realloc(o->avoid, (o->n_avoid + 1) * sizeof(*nv));

	if (!nv)
		return -ENOMEM;
	o->avoid = nv;
	if (!(o->avoid[o->n_avoid] = strdup(uuid)))
		return -ENOMEM;
	o->n_avoid++;
	return 0;
}

void filters_free(struct select_args *o)
{
	for (size_t i = 0; i < o->n_avoid; i++)
		free(o->avoid[i]);
	free(o->avoid);
	o->avoid = NULL;
	o->n_avoid = 0;
}
