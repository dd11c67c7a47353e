// SPDX-License-Identifier: MIT
/*
 * lease-proc.c: the /proc facts leases rest on (docs/leases.md): a process's start time, parent
 * and owner (/proc/PID/stat, /proc/PID), who holds a lock file's flock (/proc/locks, and a
 * process's own /proc/PID/fdinfo), and the strict number and token readers of those files.
 * The lock store (lease-dir.c) asks who holds a lock; the owner records (lease-record.c) whether
 * a recorded process is still the one that wrote them; neither is called from here.
 * Tests: tests/unit/test-lease.c; the /proc/locks parser is fuzzed by fuzz/fuzz-lease.c.
 *
 * A zombie (state Z or X in /proc/<pid>/stat) counts as gone: it holds no descriptor, and in
 * some containers nothing reaps it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "lease-internal.h"
#include "util.h"

/* ---- strict text ---- */

char *lease_next_tok(char **s)
{
	char *p = *s, *t;

	while (*p == ' ' || *p == '\n')
		p++;
	if (!*p)
		return NULL;
	t = p;
	while (*p && *p != ' ' && *p != '\n')
		p++;
	if (*p)
		*p++ = '\0';
	*s = p;
	return t;
}

/* ---- /proc: who a process is ---- */

int lease_proc_stat(pid_t pid, pid_t *ret_ppid, uint64_t *ret_start)
{
	char path[64], buf[1024];
	_cleanup_close_ int fd = -1;
	ssize_t k;
	char *p, *cur;
	uint64_t v;
	int field = 2;

	if (pid <= 0)
		return -ESRCH;
	(void)snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	k = read(fd, buf, sizeof(buf) - 1);
	if (k <= 0)
		return -EIO;
	buf[k] = '\0';
	p = strrchr(buf, ')'); /* comm may hold anything, even ')': the last one ends it */
	if (!p)
		return -EIO;
	cur = p + 1;
	for (char *t = lease_next_tok(&cur); t; t = lease_next_tok(&cur)) {
		field++;
		/* a zombie has ended: it holds no descriptor, so no lease (no init reaps it in
		 * some containers) */
		if (field == 3 && (t[0] == 'Z' || t[0] == 'X'))
			return -ESRCH;
		if (field == 4 && ret_ppid) {
			if (!parse_dec(t, strlen(t), UINT64_MAX, &v) || v > INT32_MAX)
				return -EIO;
			*ret_ppid = (pid_t)v;
		}
		if (field == 22) {
			if (!parse_dec(t, strlen(t), UINT64_MAX, &v))
				return -EIO;
			if (ret_start)
				*ret_start = v;
			return 0;
		}
	}
	return -EIO;
}

/* The owner of a process (its effective uid, as /proc/<pid> shows it). */
static int proc_uid(pid_t pid, uid_t *ret_uid)
{
	char path[64];
	struct stat st;

	(void)snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (stat(path, &st) < 0)
		return -errno;
	*ret_uid = st.st_uid;
	return 0;
}

bool lease_proc_matches(uint32_t pid, uint64_t start_ticks, uid_t uid)
{
	uint64_t st = 0;
	uid_t u = (uid_t)-1;

	if (pid <= 1 || pid > INT32_MAX)
		return false;
	if (lease_proc_stat((pid_t)pid, NULL, &st) < 0 || st != start_ticks)
		return false;
	return proc_uid((pid_t)pid, &u) == 0 && u == uid;
}

/* Boot time, seconds since the epoch (/proc/stat btime); 0 if unknown. */
static uint64_t boot_time(void)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/stat", "re");
	char line[256];
	uint64_t v;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "btime ", 6) == 0 &&
		    parse_dec(line + 6, strcspn(line + 6, "\n"), UINT64_MAX, &v))
			return v;
	return 0;
}

uint64_t lease_ticks_to_epoch(uint64_t ticks)
{
	long hz = sysconf(_SC_CLK_TCK);
	uint64_t b = boot_time();

	if (hz <= 0 || b == 0)
		return 0;
	return b + ticks / (uint64_t)hz;
}

bool lease_flock_parse(char *line, struct lease_flock *ret)
{
	char *cur = line, *tok[8], *colon;
	size_t n = 0;

	if (strstr(line, "->"))
		return false; /* a request blocked on the lock above it */
	for (char *t = lease_next_tok(&cur); t && n < ELEMENTSOF(tok); t = lease_next_tok(&cur))
		tok[n++] = t;
	/* "1:" "FLOCK" "ADVISORY" "WRITE"|"READ" pid "maj:min:ino" start end */
	if (n < 6 || !streq(tok[1], "FLOCK") || (!streq(tok[3], "WRITE") && !streq(tok[3], "READ")))
		return false;
	colon = strrchr(tok[5], ':');
	if (!colon || !parse_dec(colon + 1, strlen(colon + 1), UINT64_MAX, &ret->ino))
		return false;
	*colon = '\0';
	if (sscanf(tok[5], "%x:%x", &ret->maj, &ret->min) != 2)
		return false;
	if (!parse_dec(tok[4], strlen(tok[4]), UINT64_MAX, &ret->pid) || ret->pid > INT32_MAX)
		ret->pid = 0;
	ret->write = streq(tok[3], "WRITE");
	return true;
}

pid_t lease_lock_holder(dev_t dev, ino_t ino, bool any_kind)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/locks", "re");
	char line[LOCKS_LINE_MAX];
	pid_t ino_only = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		struct lease_flock l;

		if (!lease_flock_parse(line, &l) || (!any_kind && !l.write) || !l.pid ||
		    l.ino != (uint64_t)ino)
			continue;
		if (l.maj == major(dev) && l.min == minor(dev))
			return (pid_t)l.pid;
		if (!ino_only)
			ino_only = (pid_t)l.pid;
	}
	return ino_only;
}

int lease_lock_taken_by(dev_t dev, ino_t ino, pid_t a, pid_t b)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/locks", "re");
	char line[LOCKS_LINE_MAX];
	bool named = false;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		struct lease_flock l;

		if (!lease_flock_parse(line, &l) || l.ino != (uint64_t)ino || !l.pid ||
		    l.maj != major(dev) || l.min != minor(dev))
			continue;
		if ((a > 0 && l.pid == (uint64_t)a) || (b > 0 && l.pid == (uint64_t)b))
			return 1;
		named = true;
	}
	return named ? 0 : -1;
}

bool lease_fdinfo_flock(char *text, struct lease_flock *ret)
{
	char *next;

	for (char *line = text; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (strncmp(line, "lock:", 5) != 0)
			continue;
		line += 5;
		line += strspn(line, " \t");
		if (lease_flock_parse(line, ret))
			return true;
	}
	return false;
}

size_t lease_proc_holds(pid_t pid, const struct lease_lock_id *ids, size_t n, bool *holds,
                        pid_t *takers)
{
	_cleanup_(closedirp) DIR *fds = NULL;
	_cleanup_close_ int info = -1;
	struct dirent *de;
	char path[64];
	size_t found = 0;

	if (pid <= 0 || !ids || n == 0)
		return 0;
	(void)snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	fds = opendir(path);
	(void)snprintf(path, sizeof(path), "/proc/%d/fdinfo", (int)pid);
	info = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!fds || info < 0)
		return 0;
	while ((de = readdir(fds))) {
		char target[PATH_MAX], text[4096];
		_cleanup_close_ int fd = -1;
		struct lease_flock l;
		struct stat st;
		ssize_t k;

		if (de->d_name[0] == '.')
			continue;
		/* lock files are <UUID>.lock: the link's text (no look at the file) weeds out the
		 * rest; a replaced lock file reads "... (deleted)" and is no lease any more */
		k = readlinkat(dirfd(fds), de->d_name, target, sizeof(target));
		if (k < 5 || (size_t)k >= sizeof(target) || memcmp(target + k - 5, ".lock", 5) != 0)
			continue;
		fd = openat(info, de->d_name, O_RDONLY | O_CLOEXEC);
		k = fd >= 0 ? read(fd, text, sizeof(text) - 1) : -1;
		if (k <= 0)
			continue;
		text[k] = '\0'; /* the flock line comes first, after four short lines */
		if (!lease_fdinfo_flock(text, &l))
			continue;
		for (size_t i = 0; i < n; i++) {
			/* the inode matches: the descriptor's own file confirms the device (the
			 * kernel's lock line names another device on overlay) */
			if (l.ino != (uint64_t)ids[i].ino ||
			    fstatat(dirfd(fds), de->d_name, &st, 0) < 0 ||
			    st.st_dev != ids[i].dev || st.st_ino != ids[i].ino)
				continue;
			found++;
			if (holds)
				holds[i] = true;
			if (takers)
				takers[i] = (pid_t)l.pid;
			if (!holds && !takers)
				return found;
			break;
		}
	}
	return found;
}
