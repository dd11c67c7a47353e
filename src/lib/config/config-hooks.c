// SPDX-License-Identifier: MIT
/*
 * config-hooks.c: the node agent's hooks as the configuration file gives them (docs/config.md,
 * "Hooks"; docs/hooks.md): on_health, on_lease_start, on_lease_end, on_idle and on_violation
 * name a program each; hook_timeout and hook_max_running bound their runs. The keys are parsed
 * by config.c (config_hook_key), this file answers the queries.
 *
 * Decisions:
 * - Global settings only: one agent runs the hooks of the whole machine, whatever the pool.
 * - The parser checks only the text (an absolute path, no control character): whether the file
 *   is a program that root may safely run is for the agent to check when it starts and before
 *   each run (its owner and mode may change), so a command that never runs a hook never fails
 *   because of one.
 * - hook_timeout is a DURATION of 1s to 1h (0 would be no bound, which a hook must have);
 *   hook_max_running is 1 to 64.
 */
#include <stddef.h>

#include "config-internal.h"

static const char *const event_names[GPUCTL_HOOK_COUNT_] = {"health", "lease_start", "lease_end",
                                                            "idle", "violation"};

const char *gpuctl_hook_event_name(int event)
{
	return event >= 0 && event < GPUCTL_HOOK_COUNT_ ? event_names[event] : NULL;
}

void gpuctl_config_hooks(const struct gpuctl_config *cfg, struct gpuctl_config_hooks *ret)
{
	*ret = (struct gpuctl_config_hooks){.timeout_s = HOOK_DEFAULT_TIMEOUT_S,
	                                    .max_running = HOOK_DEFAULT_RUNNING};
	if (!cfg)
		return;
	for (size_t i = 0; i < GPUCTL_HOOK_COUNT_; i++) {
		ret->path[i] = cfg->hooks.path[i];
		ret->line[i] = cfg->hooks.path[i] ? cfg->hooks.line[i] : 0;
	}
	if (cfg->hooks.line[GPUCTL_HOOK_COUNT_])
		ret->timeout_s = cfg->hooks.timeout_s;
	if (cfg->hooks.line[GPUCTL_HOOK_COUNT_ + 1])
		ret->max_running = cfg->hooks.max_running;
}
