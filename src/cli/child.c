// SPDX-License-Identifier: MIT
/*
 * child.c: helper programs with captured output and a deadline (child.h says the decisions).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
	/* its own process group, so a hang is ended with everything it started; and a clean start:
	 * no signal blocked or ignored because the thread that spawns it blocks or ignores it (the
	 * exporter ignores SIGPIPE, the agent SIGXFSZ, the watch loops block SIGINT and SIGTERM) */
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
	                                        POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &all);
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

/* util.h's monotonic_ms(), here because child.c stays free of src/lib: tests/unit/test-slurm.c
 * compiles it alone. */
static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void child_capture_end(struct child_capture *c)
{
	int st = 0;

	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	if (c->size)
		c->out[c->len] = '\0';
	while (waitpid(c->pid, &st, 0) < 0) {
		if (errno != EINTR) {
			st = -errno;
			break;
		}
	}
	c->status = st;
	c->ended_ms = now_ms();
}

void child_capture_kill(struct child_capture *c)
{
	(void)kill(-c->pid, SIGKILL);
	while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
		;
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->killed = true;
	c->ended_ms = now_ms();
}

/* One read of c's output, ending c at EOF, an error, or a full buffer (without drain). */
static void capture_read(struct child_capture *c)
{
	bool full = c->len + 1 >= c->size;
	char sink[512];
	ssize_t got = 0;

	if (!full)
		got = read(c->fd, c->out + c->len, c->size - 1 - c->len);
	else if (c->drain)
		got = read(c->fd, sink, sizeof(sink)); /* drain what does not fit */
	if (got < 0 && errno == EINTR)
		return;
	if (got > 0) {
		if (!full)
			c->len += (size_t)got;
		if (c->drain || c->len + 1 < c->size)
			return;
	}
	child_capture_end(c); /* EOF, an error, or more than fits */
}

int children_collect(struct child_capture *const kids[], size_t n, int64_t deadline_ms,
                     struct pollfd *pfd)
{
	for (;;) {
		int64_t left = deadline_ms - now_ms();
		size_t running = 0;

		for (size_t i = 0; i < n; i++) {
			/* poll(2) skips a negative descriptor: one that has ended */
			pfd[i] = (struct pollfd){.fd = kids[i]->fd, .events = POLLIN};
			running += kids[i]->fd >= 0;
		}
		if (running == 0)
			return 0;
		if (left <= 0)
			break;
		int p = poll(pfd, n, left > INT_MAX ? INT_MAX : (int)left);
		if (p < 0 && errno != EINTR)
			return -errno;
		for (size_t i = 0; p > 0 && i < n; i++)
			if (pfd[i].revents && kids[i]->fd >= 0)
				capture_read(kids[i]);
	}
	for (size_t i = 0; i < n; i++)
		if (kids[i]->fd >= 0)
			child_capture_kill(kids[i]);
	return 0;
}

int spawn_capture(char *const argv[], char *out, size_t size, unsigned timeout_s)
{
	long long deadline = now_ms() + (long long)timeout_s * 1000;
	struct child_capture c = {.out = out, .size = size, .drain = true};
	struct child_capture *const kids[] = {&c};
	struct pollfd pfd;
	int r;

	r = spawn_piped(argv[0], true, argv, NULL, &c.pid, &c.fd);
	if (r < 0)
		return r;
	if (children_collect(kids, 1, deadline, &pfd) < 0)
		child_capture_end(&c); /* poll failed: wait for it as it is */
	return c.killed ? -ETIME : c.status;
}
