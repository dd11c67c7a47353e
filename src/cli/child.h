/* SPDX-License-Identifier: MIT */
/*
 * child.h: running helper programs with their output captured and a deadline: the CUDA probe
 * children of `gpuctl health --probe` (health-probe.c) and `scontrol` for `--slurm`.
 *
 * Decisions:
 * - posix_spawn (no fork of a process that may hold NVML threads), the child in its own process
 *   group so a hang is ended with everything it started (kill(-pid, SIGKILL)), stdin from
 *   /dev/null, stdout into a close-on-exec pipe; stderr is inherited. It starts with no signal
 *   blocked and every disposition at its default, whatever the spawning thread blocks or ignores.
 * - One collecting loop for one child (spawn_capture) and for many in parallel (the probes):
 *   a child has ended when it closes its stdout (then it is reaped); at the deadline the rest
 *   are killed with their process groups, so the caller never hangs on a helper.
 * - Not for `gpuctl run`'s job (run-exec.c): that is forked, not spawned (binding between fork
 *   and exec), stays in gpuctl's process group, gets signals forwarded and has no deadline.
 */
#ifndef GPUCTL_CLI_CHILD_H
#define GPUCTL_CLI_CHILD_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A child whose stdout children_collect() reads (started with spawn_piped). */
struct child_capture {
	pid_t pid;        /* the child, leader of its own process group; 0: none */
	int fd;           /* read end of its stdout; -1: none, or closed once it has ended */
	char *out;        /* its output (size bytes; NUL-terminated once it has ended) */
	size_t size;      /* bytes at out */
	size_t len;       /* bytes read into out */
	bool drain;       /* past size - 1 bytes read on, discarding, until EOF; else stop there */
	bool killed;      /* killed with its group (the deadline, or the caller gave up) */
	int status;       /* its wait status once reaped, or -errno when waitpid failed */
	int64_t ended_ms; /* CLOCK_MONOTONIC ms when it was reaped */
};

/* Starts file (searched on PATH when search) with argv and envp (NULL: this environment);
 * *ret_fd reads its stdout. Returns 0 or -errno. */
int spawn_piped(const char *file, bool search, char *const argv[], char *const envp[],
                pid_t *ret_pid, int *ret_fd);

/* Runs argv[0] (searched on PATH) to completion, its stdout into out[size] (NUL-terminated,
 * cut when longer), for at most timeout_s seconds (then its process group is killed: -ETIME).
 * Returns its wait status (>= 0), or -errno when it could not start. */
int spawn_capture(char *const argv[], char *out, size_t size, unsigned timeout_s);

/* Reads the output of kids[0..n) (those with fd >= 0) until each closes it, reaping each then,
 * or until deadline_ms (CLOCK_MONOTONIC ms), when the rest are killed (child_capture_kill). pfd: n
 * entries of scratch space, so that nothing is allocated here. Returns 0, or -errno when
 * poll(2) failed: the children not ended yet are left as they are, for the caller. */
int children_collect(struct child_capture *const kids[], size_t n, int64_t deadline_ms,
                     struct pollfd *pfd);

/* Closes c's output and reaps c (waiting as long as it takes). */
void child_capture_end(struct child_capture *c);

/* Kills c's process group, reaps c and closes its output: c->killed. */
void child_capture_kill(struct child_capture *c);

#endif
