// SPDX-License-Identifier: MIT
/*
 * child.c: helper programs with captured output and a deadline (child.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child.h"

extern char **environ;

int spawn_piped(const char *file, bool search, char *const argv[], char *const envp[],
                pid_t *ret_pid, int *ret_fd)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	pid_t pid = 0;
	int fds[2], r;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawnattr_init(&attr);
	/* its own process group, so a hang is ended with everything it started */
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
	posix_spawnattr_setpgroup(&attr, 0);
	if (search)
		r = posix_spawnp(&pid, file, &fa, &attr, argv, envp ? envp : environ);
	else
		r = posix_spawn(&pid, file, &fa, &attr, argv, envp ? envp : environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	close(fds[1]);
	if (r != 0) {
		close(fds[0]);
		return -r;
	}
	*ret_pid = pid;
	*ret_fd = fds[0];
	return 0;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int spawn_capture(char *const argv[], char *out, size_t size, unsigned timeout_s)
{
	long long deadline = now_ms() + (long long)timeout_s * 1000;
	size_t len = 0;
	pid_t pid;
	int fd, r, st = 0;
	char sink[512];

	r = spawn_piped(argv[0], true, argv, NULL, &pid, &fd);
	if (r < 0)
		return r;
	for (;;) {
		long long left = deadline - now_ms();
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (left <= 0) {
			(void)kill(-pid, SIGKILL);
			close(fd);
			while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
				;
			return -ETIME;
		}
		r = poll(&p, 1, (int)left);
		if (r < 0 && errno != EINTR)
			break;
		if (r <= 0)
			continue;
		if (len + 1 < size)
			n = read(fd, out + len, size - 1 - len);
		else
			n = read(fd, sink, sizeof(sink)); /* drain what does not fit */
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (len + 1 < size)
			len += (size_t)n;
	}
	close(fd);
	if (size)
		out[len] = '\0';
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return st;
}
