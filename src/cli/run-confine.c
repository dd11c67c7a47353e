// SPDX-License-Identifier: MIT
/*
 * run-confine.c: `gpuctl run` under enforce = cgroup (docs/agent.md, "Enforcement: cgroup"): each
 * child, after the lease is taken and before it execs the job, asks the node agent over its
 * Unix socket to confine it, and the job starts only when the agent did.
 *
 * Decisions:
 * - The child asks, not gpuctl: the agent confines the process at the other end of the
 *   connection (SO_PEERCRED) to the leases that process holds (the inherited lock descriptors),
 *   then moves it into the job cgroup; the child then execs, so the job and everything it
 *   starts are inside. Nothing the job sets (CUDA_VISIBLE_DEVICES) changes what the kernel lets
 *   it open.
 * - Between fork and exec the child only makes system calls (run-exec.c): it connects, writes
 *   the fixed request, reads the reply with a time limit (SO_RCVTIMEO) and hands the raw reply to
 *   gpuctl through a pipe; gpuctl parses it (jansson) and lets the child go on, or ends it.
 * - Never unconfined: when any device of the job is in a pool with enforce = cgroup and the
 *   agent cannot be reached, does not answer, or refuses, the job does not start: one line and
 *   exit RUN_EXIT_CONFINE.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent-proto.h"
#include "run.h"
#include "util.h"

#define REQUEST "{\"request\":\"confine\"}\n"

int run_confine_plan(struct cli *cli, const struct gpuctl_snapshot *snap,
                     const struct gpuctl_devset *set, const char *lease_dir,
                     const char **ret_socket)
{
	const struct gpuctl_config *cfg;
	_cleanup_free_ int *pool = NULL;
	bool wanted = false;
	int status;

	*ret_socket = NULL;
	/* the configuration that governed the allocation: the lease directory's (docs/config.md
	 * "Trust"), read again as gpuctl_alloc read it */
	if ((status = cli_site(cli, &cmd_run_entry, lease_dir, 0)))
		return status;
	cfg = gpuctl_site_config(cli->site);
	if (!cfg)
		return 0; /* an empty configuration: enforce = off */
	if (gpuctl_config_pool_map(cli->ctx, cfg, snap, &pool) < 0) {
		cli_error("run: %s", gpuctl_errmsg(cli->ctx));
		return CLI_EXIT_USAGE;
	}
	for (size_t i = 0; i < gpuctl_devset_count(set) && !wanted; i++) {
		struct gpuctl_config_enforce e;
		size_t g;
		int mig;
		if (gpuctl_devset_get(set, i, &g, &mig) < 0)
			continue;
		gpuctl_config_pool_enforce(cfg, pool[g] < 0 ? SIZE_MAX : (size_t)pool[g], &e);
		wanted = e.enforce == GPUCTL_ENFORCE_CGROUP;
	}
	if (wanted)
		*ret_socket = gpuctl_config_settings(cfg)->agent_socket
		                      ? gpuctl_config_settings(cfg)->agent_socket
		                      : RUN_AGENT_SOCKET_DEFAULT;
	return 0;
}

/* Writes all of buf to fd (a pipe), retrying on EINTR. */
static void write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

void run_confine_child(const char *socket_path, int replyfd)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timeval tv = {.tv_sec = RUN_CONFINE_TIMEOUT_S};
	char buf[RUN_CONFINE_REPLY_MAX];
	size_t n = 0, len = strlen(socket_path);
	int s, e = 0;

	if (len >= sizeof(sa.sun_path)) {
		e = ENAMETOOLONG;
		goto fail;
	}
	memcpy(sa.sun_path, socket_path, len + 1);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
	    connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    send(s, REQUEST, sizeof(REQUEST) - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof(REQUEST) - 1)) {
		e = errno;
		goto fail;
	}
	buf[n++] = 'R';
	while (n < sizeof(buf)) {
		ssize_t k = read(s, buf + n, sizeof(buf) - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			e = errno == EAGAIN ? ETIMEDOUT : errno;
			goto fail;
		}
		if (k == 0 || memchr(buf + n, '\n', (size_t)k)) {
			n += (size_t)k;
			break;
		}
		n += (size_t)k;
	}
	(void)close(s);
	write_all(replyfd, buf, n);
	return;
fail:
	buf[0] = 'E';
	memcpy(buf + 1, &e, sizeof(e));
	write_all(replyfd, buf, 1 + sizeof(e));
}

int run_confine_check(struct cli *cli, int fd, const char *socket_path)
{
	char buf[RUN_CONFINE_REPLY_MAX + 1], text[RUN_CONFINE_REPLY_MAX];
	bool ok = true; /* until a reply says otherwise */
	size_t n = 0;
	int e = 0;

	for (;;) {
		ssize_t k = read(fd, buf + n, sizeof(buf) - 1 - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	buf[n] = '\0';
	if (n == 0) {
		cli_error("run: enforce = cgroup: the job could not ask the agent at '%s'",
		          socket_path);
		return RUN_EXIT_CONFINE;
	}
	if (buf[0] == 'E') {
		if (n >= 1 + sizeof(e))
			memcpy(&e, buf + 1, sizeof(e));
		cli_error("run: enforce = cgroup: cannot reach the agent at '%s': %s (is gpuctl "
		          "agent running?); the job does not start unconfined",
		          socket_path, strerror(e));
		return RUN_EXIT_CONFINE;
	}
	if (agent_reply_parse(buf + 1, &ok, text, sizeof(text)) < 0 || !ok) {
		cli_error("run: enforce = cgroup: the agent at '%s' refused to confine the job: %s",
		          socket_path, ok ? "no answer it understands" : text);
		return RUN_EXIT_CONFINE;
	}
	if (cli->verbose)
		cli_error("run: confined to cgroup %s", text);
	return 0;
}
