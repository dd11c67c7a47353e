// SPDX-License-Identifier: MIT
/*
 * ctx.c: the library context's life: gpuctl_ctx_new, and gpuctl_ctx_free with what the context
 * owns (the loaded NVML, the log-once set).
 *
 * Decisions:
 * - Creating a context loads nothing: NVML is loaded on first use (gpuctl_nvml_load).
 * - The messages every module writes (ctx_error, ctx_log) are ctx-log.c's, apart from this file:
 *   the NVML loader writes them, and this file calls the loader (nvml_unload), so with both in
 *   one file the loader would call a file that calls it back.
 */
#include <errno.h>
#include <stdlib.h>

#include "ctx.h"

int gpuctl_ctx_new(struct gpuctl_ctx **ret_ctx)
{
	struct gpuctl_ctx *ctx;

	if (!ret_ctx)
		return -EINVAL;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	ctx->lock_cancel_fd = -1;
	*ret_ctx = ctx;
	return 0;
}

void gpuctl_ctx_free(struct gpuctl_ctx *ctx)
{
	if (!ctx)
		return;
	nvml_unload(ctx->nvml);
	for (size_t i = 0; i < ctx->n_once; i++)
		free(ctx->once[i]);
	free(ctx->once);
	free(ctx);
}

int gpuctl_ctx_set_lock_wait(struct gpuctl_ctx *ctx, double seconds)
{
	if (!ctx || !(seconds >= 0 && seconds <= 3600))
		return -EINVAL;
	ctx->lock_wait_set = true;
	/* rounded to the millisecond: 1.001 is 1001 ms (1.001 * 1000 is 1000.99...) */
	ctx->lock_wait_ms = (int64_t)(seconds * 1000.0 + 0.5);
	return 0;
}
