/* SPDX-License-Identifier: MIT */
/*
 * child.h: running helper programs with their output captured and a deadline: the CUDA probe
 * children of `gpuctl health --probe` and `scontrol` for `--slurm`.
 *
 * Decisions:
 * - posix_spawn (no fork of a process that may hold NVML threads), the child in its own process
 *   group so a hang is ended with everything it started (kill(-pid, SIGKILL)), stdin from
 *   /dev/null, stdout into a close-on-exec pipe; stderr is inherited.
 */
#ifndef GPUCTL_CLI_CHILD_H
#define GPUCTL_CLI_CHILD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Starts file (searched on PATH when search) with argv and envp (NULL: this environment);
 * *ret_fd reads its stdout. Returns 0 or -errno. */
int spawn_piped(const char *file, bool search, char *const argv[], char *const envp[],
                pid_t *ret_pid, int *ret_fd);

/* Runs argv[0] (searched on PATH) to completion, its stdout into out[size] (NUL-terminated,
 * cut when longer), for at most timeout_s seconds (then its process group is killed: -ETIME).
 * Returns its wait status (>= 0), or -errno when it could not start. */
int spawn_capture(char *const argv[], char *out, size_t size, unsigned timeout_s);

#endif
