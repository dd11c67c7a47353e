/* SPDX-License-Identifier: MIT */
/*
 * agent-state.h: the agent's root-only state files (enforce = acl's original node modes,
 * enforce = cgroup's confined jobs): what root changes and back to what, so nobody else may
 * write them, and a crash mid-write never leaves half a file.
 */
#ifndef GPUCTL_CLI_AGENT_STATE_H
#define GPUCTL_CLI_AGENT_STATE_H

#include <stdbool.h>
#include <stdio.h>

/* Whether the directory of path is one only root can change files in: root's, and not writable
 * by group or others (or sticky, where only a file's owner may replace it). */
bool agent_state_dir_safe(const char *path);

/* Replaces path with what print(f, arg) writes (0, or -errno), through PATH.tmp (mode 0600,
 * flushed and synced) renamed over it, in a directory agent_state_dir_safe accepts. 0 or
 * -errno; on failure path is as it was. */
int agent_state_write(const char *path, int (*print)(FILE *f, void *arg), void *arg);

/* path open for reading when it is a regular file root owns, that group and others cannot
 * write, in a safe directory; else NULL with errno (ENOENT: there is none; EPERM: not to be
 * believed). */
FILE *agent_state_open(const char *path);

/* The next whole line of f into buf[size] without its '\n': false at the end. A line of
 * size - 1 bytes or more is skipped whole (never handed on cut: a part of a line could say less
 * than the line did). */
bool agent_state_getline(FILE *f, char *buf, size_t size);

#endif /* GPUCTL_CLI_AGENT_STATE_H */
