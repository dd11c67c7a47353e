// SPDX-License-Identifier: MIT
/*
 * ctx.c: the library context's life: gpuctl_ctx_new, and gpuctl_ctx_free with what the context
 * owns (the loaded NVML, the log-once set).
 *
 * Creating a context loads nothing: NVML is loaded on first use (gpuctl_nvml_load), and the
 * loader leaves its own destructor on the context (ctx->nvml_free), so core/ calls nothing in
 * the layers above it (docs/ARCHITECTURE.md, "Layers").
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
	if (ctx->nvml)
		ctx->nvml_free(ctx->nvml);
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
