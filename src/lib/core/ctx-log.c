// SPDX-License-Identifier: MIT
/*
 * ctx-log.c: the context's messages: the last error (ctx_error, gpuctl_errmsg), the log hook
 * (ctx_log, gpuctl_ctx_set_log) and lines logged once per context (ctx_log_once).
 *
 * Decisions:
 * - Calls nothing else in the library, so every module, the NVML loader first, can report
 *   through it without a dependency pointing up.
 * - The once-set is a small array searched linearly: it holds one entry per (NVML function,
 *   reason) that was unavailable, a few dozen at most, so a hash table would be waste.
 * - If the once-set cannot grow (out of memory) the line is still logged: losing "once" is
 *   better than losing the message.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"

const char *gpuctl_errmsg(const struct gpuctl_ctx *ctx)
{
	return ctx ? ctx->errmsg : "";
}

void gpuctl_ctx_set_log(struct gpuctl_ctx *ctx, gpuctl_log_fn fn, void *userdata)
{
	if (!ctx)
		return;
	ctx->log_fn = fn;
	ctx->log_userdata = fn ? userdata : NULL;
}

int ctx_error(struct gpuctl_ctx *ctx, int r, const char *fmt, ...)
{
	va_list ap;

	if (!ctx)
		return r;
	va_start(ap, fmt);
	(void)vsnprintf(ctx->errmsg, sizeof(ctx->errmsg), fmt, ap);
	va_end(ap);
	return r;
}

int ctx_error_prefix(struct gpuctl_ctx *ctx, int r, const char *fmt, ...)
{
	char old[CTX_ERRMSG_MAX];
	va_list ap;
	int n;

	if (!ctx)
		return r;
	(void)snprintf(old, sizeof(old), "%s", ctx->errmsg[0] ? ctx->errmsg : strerror(-r));
	va_start(ap, fmt);
	n = vsnprintf(ctx->errmsg, sizeof(ctx->errmsg), fmt, ap);
	va_end(ap);
	/* ": " and the old message, truncated to what is left */
	if (n >= 0 && (size_t)n + 3 < sizeof(ctx->errmsg)) {
		size_t at = (size_t)n, left = sizeof(ctx->errmsg) - at - 3, k = strlen(old);
		memcpy(ctx->errmsg + at, ": ", 2);
		if (k > left)
			k = left;
		memcpy(ctx->errmsg + at + 2, old, k);
		ctx->errmsg[at + 2 + k] = '\0';
	}
	return r;
}

static void log_va(struct gpuctl_ctx *ctx, enum gpuctl_log_level level, const char *fmt, va_list ap)
        __attribute__((format(printf, 3, 0)));
static void log_va(struct gpuctl_ctx *ctx, enum gpuctl_log_level level, const char *fmt, va_list ap)
{
	char line[CTX_ERRMSG_MAX];

	if (!ctx || !ctx->log_fn)
		return;
	(void)vsnprintf(line, sizeof(line), fmt, ap);
	ctx->log_fn(ctx->log_userdata, level, line);
}

void ctx_log(struct gpuctl_ctx *ctx, enum gpuctl_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_va(ctx, level, fmt, ap);
	va_end(ap);
}

/* Adds key to the once-set; false if it was there already. */
static bool once_add(struct gpuctl_ctx *ctx, const char *key)
{
	char *copy;

	for (size_t i = 0; i < ctx->n_once; i++)
		if (streq(ctx->once[i], key))
			return false;
	if (ctx->n_once == ctx->cap_once) {
		size_t cap = ctx->cap_once ? ctx->cap_once * 2 : 16;
		char **n = realloc(ctx->once, cap * sizeof(*n));

		if (!n)
			return true;
		ctx->once = n;
		ctx->cap_once = cap;
	}
	copy = strdup(key);
	if (!copy)
		return true;
	ctx->once[ctx->n_once++] = copy;
	return true;
}

bool ctx_log_once(struct gpuctl_ctx *ctx, const char *key, enum gpuctl_log_level level,
                  const char *fmt, ...)
{
	va_list ap;

	if (!ctx || !once_add(ctx, key))
		return false;
	va_start(ap, fmt);
	log_va(ctx, level, fmt, ap);
	va_end(ap);
	return true;
}
