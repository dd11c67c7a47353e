// SPDX-License-Identifier: MIT
/*
 * agent-state.c: the agent's root-only state files (agent-state.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-state.h"

bool agent_state_dir_safe(const char *path)
{
	char dir[4200];
	const char *slash = strrchr(path, '/');
	struct stat st;

	if (!slash || (size_t)(slash - path) >= sizeof(dir))
		return false;
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash == path ? 1 : slash - path] = '\0';
	return stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 0 &&
	       (!(st.st_mode & 022) || (st.st_mode & S_ISVTX));
}

int agent_state_write(const char *path, int (*print)(FILE *f, void *arg), void *arg)
{
	char tmp[4200];
	FILE *f;
	int r;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
		return -ENAMETOOLONG;
	if (!agent_state_dir_safe(path))
		return -EPERM;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (!(f = fdopen(fd, "w"))) {
		r = -errno;
		close(fd);
		(void)unlink(tmp);
		return r;
	}
	r = print(f, arg);
	if ((fflush(f) != 0 || fsync(fileno(f)) < 0) && r == 0)
		r = -errno;
	if (fclose(f) != 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		(void)unlink(tmp);
	return r;
}

FILE *agent_state_open(const char *path)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	FILE *f;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022) ||
	    !agent_state_dir_safe(path)) {
		close(fd);
		errno = EPERM;
		return NULL;
	}
	if (!(f = fdopen(fd, "r"))) {
		close(fd);
		errno = ENOMEM;
	}
	return f;
}

bool agent_state_getline(FILE *f, char *buf, size_t size)
{
	while (fgets(buf, (int)size, f)) {
		size_t n = strlen(buf);

		if (n > 0 && buf[n - 1] == '\n') {
			buf[n - 1] = '\0';
			return true;
		}
		if (feof(f))
			return true; /* the last line, without its '\n' */
		/* longer than buf: skip to its end */
		int c;
		while ((c = fgetc(f)) != EOF && c != '\n')
			;
	}
	return false;
}
