// SPDX-License-Identifier: MIT
/*
 * agent-watch-act.c: what the watch does about a violation beyond logging it (docs/agent.md,
 * "Violations"; docs/config.md "Enforcement"): notify (a line to each of the user's
 * terminals) and terminate (SIGTERM, SIGKILL after the grace).
 *
 * Decisions:
 * - Terminals as write(1) and wall(1) find them: the USER_PROCESS entries of utmp (utmp(5):
 *   ut_type USER_PROCESS, ut_user the login name, ut_line the device name without "/dev/"),
 *   read through the utmpx API (getutxent(3); utmpxname(3) names another file: $GPUCTL_UTMP,
 *   which only the tests set). An entry's line must be a plain name under /dev (no "..") and
 *   the device a character device the user owns (fstat after the open, so a name swapped in
 *   between gains nothing): a stale utmp entry whose terminal another user now has gets
 *   nothing. Opened O_NOCTTY (it never becomes the agent's controlling terminal) and
 *   O_NONBLOCK (a terminal that does not drain never blocks the agent).
 * - The line goes as it is (the caller made it printable) with "\r\n": a terminal in raw mode
 *   gets it at the start of a line too, as wall does.
 * - Signals through a pidfd (pidfd_open(2), pidfd_send_signal(2)), checked after the pidfd
 *   pins the process: its start time and real uid must be the violation's, so a pid recycled
 *   between the sample and the signal is never hit. Without pidfd_open (older kernels): by
 *   pid, after the same check (a window of one /proc read).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <utmpx.h>

#include "agent-watch.h"
#include "hostproc.h"

/* A device name under /dev: letters, digits, '/', '-', '_', '.', no "..", not empty. */
static bool plain_line(const char *line)
{
	if (!line[0] || line[0] == '/' || strstr(line, ".."))
		return false;
	for (size_t i = 0; line[i]; i++) {
		char c = line[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '/' || c == '-' || c == '_' || c == '.'))
			return false;
	}
	return true;
}

/* Writes text to terminal /dev/LINE when uid owns it: 1 written, 0 not. */
static int write_tty(const char *line, uint32_t uid, const char *text)
{
	char path[64];
	struct stat st;
	int fd, n = 0;

	if (!plain_line(line))
		return 0;
	(void)snprintf(path, sizeof(path), "/dev/%s", line);
	fd = open(path, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && st.st_uid == uid) {
		size_t len = strlen(text);
		n = write(fd, text, len) == (ssize_t)len;
	}
	(void)close(fd);
	return n;
}

int watch_notify(uint32_t uid, const char *line)
{
	const char *file = getenv("GPUCTL_UTMP");
	struct passwd *pw = getpwuid((uid_t)uid);
	struct utmpx *u;
	char *text = NULL;
	int n = 0;

	if (!pw || asprintf(&text, "\r\n%s\r\n", line) < 0)
		return 0;
	if (file && file[0] && utmpxname(file) < 0) {
		free(text);
		return 0;
	}
	setutxent();
	while ((u = getutxent())) {
		/* ut_user and ut_line need not end in a NUL (utmp(5)) */
		char user[sizeof(u->ut_user) + 1], tty[sizeof(u->ut_line) + 1];

		memcpy(user, u->ut_user, sizeof(u->ut_user));
		user[sizeof(u->ut_user)] = '\0';
		memcpy(tty, u->ut_line, sizeof(u->ut_line));
		tty[sizeof(u->ut_line)] = '\0';
		if (u->ut_type == USER_PROCESS && !strcmp(user, pw->pw_name))
			n += write_tty(tty, uid, text);
	}
	endutxent();
	if (file && file[0])
		(void)utmpxname(_PATH_UTMPX); /* the system's again */
	free(text);
	return n;
}

/* Whether pid is uid's (real uid) process started at ticks. */
static bool proc_is(uint32_t pid, uint64_t ticks, uint32_t uid)
{
	struct hostproc_stat st;
	char path[64], buf[4096];
	unsigned ruid;
	FILE *f;
	bool ok = false;

	if (hostproc_read_stat((pid_t)pid, &st) < 0 || st.start_ticks != ticks || st.state == 'Z')
		return false;
	(void)snprintf(path, sizeof(path), "/proc/%u/status", pid);
	if (!(f = fopen(path, "re")))
		return false;
	while (fgets(buf, sizeof(buf), f))
		if (sscanf(buf, "Uid: %u", &ruid) == 1) {
			ok = ruid == uid;
			break;
		}
	fclose(f);
	return ok;
}

static int send_signal(const struct watch_kill *k, int sig)
{
#ifdef SYS_pidfd_send_signal
	if (k->pidfd >= 0)
		return syscall(SYS_pidfd_send_signal, k->pidfd, sig, NULL, 0) < 0 ? -errno : 0;
#endif
	if (!proc_is(k->pid, k->ticks, k->uid))
		return -ESRCH;
	return kill((pid_t)k->pid, sig) < 0 ? -errno : 0;
}

int watch_terminate(uint32_t pid, uint64_t ticks, uint32_t uid, struct watch_kill *k)
{
	int r;

	k->pidfd = -1;
	k->pid = pid;
	k->ticks = ticks;
	k->uid = uid;
#ifdef SYS_pidfd_open
	k->pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
#endif
	/* checked after the pidfd pins the process: no recycled pid in between */
	if (!proc_is(pid, ticks, uid)) {
		if (k->pidfd >= 0)
			(void)close(k->pidfd);
		k->pidfd = -1;
		return -ESRCH;
	}
	r = send_signal(k, SIGTERM);
	if (r < 0 && k->pidfd >= 0) {
		(void)close(k->pidfd);
		k->pidfd = -1;
	}
	return r;
}

bool watch_kill_ended(const struct watch_kill *k)
{
	if (k->pidfd >= 0) {
		struct pollfd p = {.fd = k->pidfd, .events = POLLIN};
		/* a pidfd becomes readable when its process exits (pidfd_open(2)) */
		return poll(&p, 1, 0) == 1;
	}
	return !proc_is(k->pid, k->ticks, k->uid);
}

int watch_kill_now(const struct watch_kill *k)
{
	return send_signal(k, SIGKILL);
}
