// SPDX-License-Identifier: MIT
/*
 * config-enforce.c: a pool's enforcement, as the configuration sets it (docs/config.md,
 * "Enforcement"): enforce, violation_action, terminate_grace, terminate_system. Like the idle keys
 * they stand in the global section (every pool's default, the default pool included) and in a
 * [pool NAME] section (that pool's override). config.c parses them (config_set_enforce).
 */
#include <stddef.h>
#include <stdint.h>

#include "config-internal.h"

void gpuctl_config_pool_enforce(const struct gpuctl_config *cfg, size_t i,
                                struct gpuctl_config_enforce *ret)
{
	struct enforce_keys ek = cfg ? cfg->enforce : config_enforce_default;
	const struct pool *pool = cfg && i < cfg->n_pools ? &cfg->pools[i] : NULL;

	for (int k = 0; pool && k < E__COUNT; k++)
		if (pool->enforce.line[k])
			ek.v[k] = pool->enforce.v[k];
	*ret = (struct gpuctl_config_enforce){
	        .enforce = (enum gpuctl_enforce)ek.v[E_ENFORCE],
	        .action = (enum gpuctl_violation_action)ek.v[E_ACTION],
	        .terminate_grace_s = ek.v[E_GRACE],
	        .terminate_system = ek.v[E_SYSTEM] != 0,
	};
}

const char *gpuctl_enforce_name(enum gpuctl_enforce e)
{
	return (unsigned)e < CONFIG_ENFORCE_WORDS ? config_enforce_words[e] : NULL;
}

const char *gpuctl_violation_action_name(enum gpuctl_violation_action a)
{
	return (unsigned)a < CONFIG_ACTION_WORDS ? config_action_words[a] : NULL;
}
