// SPDX-License-Identifier: MIT
/*
 * fuzz-config.c: libFuzzer target for the configuration file parser (src/lib/config/config.c), then
 * the pool queries (config-pools.c) over the synthetic machine of fuzz-devstr-machine.h (six GPUs,
 * shared UUID prefixes, one without a UUID).
 *
 * The input is the file's bytes as they are (not NUL-terminated: the parser takes a length).
 * Properties checked beyond "no crash, no leak": a failed parse leaves the out-parameter
 * untouched, is -EINVAL (message: one line starting with "fuzz.conf:") or -ENOMEM;
 * on success every pool is readable and found by its name, the settings (and hooks) are in range, a
 * pool map gives each GPU a valid pool index or -1, and the share margin never exceeds half the
 * memory when it is a percentage.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-devstr-machine.h"
#include "gpuctl/gpuctl.h"
#include "parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_pools(struct gpuctl_ctx *ctx, const struct gpuctl_config *cfg)
{
	size_t n = gpuctl_config_pool_count(cfg);

	for (size_t i = 0; i < n; i++) {
		const char *name = NULL, *desc = NULL;
		const char *const *users = NULL, *const *groups = NULL;
		bool restricted = false;
		size_t found = SIZE_MAX;

		if (gpuctl_config_pool_get(cfg, i, &name, &desc, &restricted, &users, &groups) <
		            0 ||
		    !name || !users || !groups)
			abort();
		if (restricted && !users[0] && !groups[0])
			abort();
		if (gpuctl_config_pool_find(ctx, cfg, name, &found) < 0 || found != i)
			abort();
		/* uid 0 may always draw; an unrestricted pool admits anyone */
		if (gpuctl_config_pool_allows(ctx, cfg, i, 0) != 1)
			abort();
		if (!restricted && gpuctl_config_pool_allows(ctx, cfg, i, 4242) != 1)
			abort();
	}
	/* idle actions: a pool's are each its own key or the default pool's (the global ones), and
	 * never past the duration parser's bound */
	for (size_t i = 0; i <= n; i++) {
		struct gpuctl_config_idle pi, dflt;

		gpuctl_config_pool_idle(cfg, i, &pi);
		gpuctl_config_pool_idle(cfg, SIZE_MAX, &dflt);
		if (pi.idle_warn_s > PARSE_DURATION_MAX || pi.idle_release_s > PARSE_DURATION_MAX ||
		    pi.max_lease_age_s > PARSE_DURATION_MAX)
			abort();
		if (i == n && memcmp(&pi, &dflt, sizeof(pi)) != 0)
			abort();
	}
	/* enforcement: values in range; the default pool's are the global ones */
	for (size_t i = 0; i <= n; i++) {
		struct gpuctl_config_enforce pe, dflt;

		gpuctl_config_pool_enforce(cfg, i, &pe);
		gpuctl_config_pool_enforce(cfg, SIZE_MAX, &dflt);
		if (!gpuctl_enforce_name(pe.enforce) || !gpuctl_violation_action_name(pe.action) ||
		    pe.terminate_grace_s > PARSE_DURATION_MAX)
			abort();
		if (i == n && (pe.enforce != dflt.enforce || pe.action != dflt.action ||
		               pe.terminate_grace_s != dflt.terminate_grace_s ||
		               pe.terminate_system != dflt.terminate_system))
			abort();
	}
	/* quotas (docs/config.md "Quotas"): root has none; anyone's are within the parser's
	 * bounds */
	for (size_t i = 0; i <= n; i++) {
		struct gpuctl_config_quota q;

		if (gpuctl_config_pool_quota(ctx, cfg, i, 0, &q) != 0 || q.gpus != -1 ||
		    q.lease_length_s != 0 || q.gpu_hours_day >= 0 || q.gpu_hours_week >= 0)
			abort();
		if (gpuctl_config_pool_quota(ctx, cfg, i, 4242, &q) != 0 || q.gpus > 4096 ||
		    q.lease_length_s > PARSE_DURATION_MAX || q.gpu_hours_day > 1e6 ||
		    q.gpu_hours_week > 1e6)
			abort();
	}
	/* hooks: absolute paths without control characters, each with its line; limits in range */
	struct gpuctl_config_hooks h;
	gpuctl_config_hooks(cfg, &h);
	for (int i = 0; i < GPUCTL_HOOK_COUNT_; i++) {
		if (!h.path[i] != !h.line[i] || (h.path[i] && h.path[i][0] != '/'))
			abort();
		for (const char *c = h.path[i]; c && *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				abort();
	}
	if (h.timeout_s < 1 || h.timeout_s > 3600 || h.max_running < 1 || h.max_running > 64)
		abort();
	if (gpuctl_config_pool_get(cfg, n, NULL, NULL, NULL, NULL, NULL) != -EINVAL)
		abort();
	if (gpuctl_config_pool_find(ctx, cfg, "default", &(size_t){0}) != -ENOENT)
		abort();
}

static void check_map(struct gpuctl_ctx *ctx, const struct gpuctl_config *cfg,
                      const struct gpuctl_snapshot *snap)
{
	size_t n = gpuctl_config_pool_count(cfg);
	int *map = (int *)&n;
	int r = gpuctl_config_pool_map(ctx, cfg, snap, &map);

	if (r == 0) {
		for (size_t g = 0; g < N_GPUS; g++)
			if (map[g] < -1 || (map[g] >= 0 && (size_t)map[g] >= n))
				abort();
		free(map);
		return;
	}
	const char *m = gpuctl_errmsg(ctx);
	if (r != -EINVAL || map != (int *)&n || strncmp(m, "fuzz.conf:", 10) != 0 ||
	    strchr(m, '\n'))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct gpuctl_snapshot *snap;
	static struct gpuctl_ctx *ctx;
	struct gpuctl_config *cfg = (struct gpuctl_config *)&snap;
	const struct gpuctl_config_settings *st;
	int r;

	if (!snap) {
		snap = fixture();
		if (gpuctl_ctx_new(&ctx) < 0)
			abort();
	}
	r = gpuctl_config_parse(ctx, "fuzz.conf", (const char *)data, size, &cfg);
	if (r < 0) {
		const char *m = gpuctl_errmsg(ctx);

		if ((r != -EINVAL && r != -ENOMEM) || cfg != (struct gpuctl_config *)&snap ||
		    (r == -EINVAL && strncmp(m, "fuzz.conf:", 10) != 0) || strchr(m, '\n'))
			abort();
		return 0;
	}
	st = gpuctl_config_settings(cfg);
	if (st->busy_utilization < -1 || st->busy_utilization > 100 ||
	    (st->share_margin_is_pct && st->share_margin > 50) ||
	    (st->lease_dir && st->lease_dir[0] != '/'))
		abort();
	if (st->share_margin_is_pct &&
	    gpuctl_config_share_margin(cfg, UINT64_MAX) > UINT64_MAX / 2 + 1)
		abort();
	(void)gpuctl_config_share_margin(cfg, (uint64_t)80 << 30);
	check_pools(ctx, cfg);
	check_map(ctx, cfg, snap);
	gpuctl_config_free(cfg);
	return 0;
}
