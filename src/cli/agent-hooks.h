/* SPDX-License-Identifier: MIT */
/*
 * agent-hooks.h: the node agent's hooks (agent-hooks.c; docs/hooks.md): a program per event
 * (on_health, on_lease_start, on_lease_end, on_idle, on_violation of the configuration file),
 * run with the event as one JSON object on stdin, under a timeout and a bound on concurrent runs,
 * on a thread of their own so that nothing a hook does ever holds up the agent's sample loop.
 */
#ifndef GPUCTL_CLI_AGENT_HOOKS_H
#define GPUCTL_CLI_AGENT_HOOKS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "cmd.h"

#define AGENT_HOOKS_VERSION 1  /* the events' "version" (docs/hooks.md) */
#define AGENT_HOOKS_RUN_MAX 64 /* the largest hook_max_running (docs/config.md) */

struct agent_hooks;

/* The hooks cfg names, each program checked (hook_check): NULL in *ret_hooks when there are
 * none. CLI_EXIT_OK; CLI_EXIT_USAGE for a hook that root may not run, said as "FILE:LINE: ...";
 * CLI_EXIT_FAILURE (out of memory, no thread), said. */
int agent_hooks_new(const struct gpuctl_config *cfg, struct agent_hooks **ret_hooks);

/* Whether event ("health", "lease_start", ...) has a hook: a caller may skip building its
 * payload when not. h NULL: none. */
bool agent_hooks_wants(const struct agent_hooks *h, const char *event);

/* Runs event's hook with payload (taken over; "version", "event", "time" and "host" are put
 * before its keys) as soon as fewer than hook_max_running hooks run. Never blocks: past
 * AGENT_HOOKS_QUEUE_MAX waiting events it is dropped, which is said once per streak with the
 * count. h NULL or no hook for event: payload is freed, nothing runs. */
void agent_hooks_fire(struct agent_hooks *h, const char *event, json_t *payload);

/* Stops: the waiting events are dropped (said with their count), the running hooks are given
 * at most HOOK_STOP_WAIT_S more (then SIGTERM and SIGKILL to their process groups, as at their
 * timeout), then freed. NULL ok. */
void agent_hooks_free(struct agent_hooks *h);

/* Why root should not run the program at path named by a file owned by config_uid: NULL when
 * it may (an existing regular file with an execute bit, owned by root or config_uid, writable by
 * neither group nor others, in directories owned by root or config_uid that group and others
 * cannot write to unless sticky), else a reason (static, or written into buf). */
const char *hook_check(const char *path, uint32_t config_uid, char *buf, size_t size);

#endif /* GPUCTL_CLI_AGENT_HOOKS_H */
