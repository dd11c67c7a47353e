// SPDX-License-Identifier: MIT
/*
 * config-util.c: the helpers every file of the configuration room calls (config-internal.h):
 * the parser's one-line "FILE:LINE: ..." error, decimal digits, a file name quoted for
 * messages. Below config.c, config-pools.c and config-quota.c, so that the parser can hand
 * keys to config-quota.c without a cycle of calls.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config-internal.h"
#include "ctx.h"
#include "util.h"

bool config_all_digits(const char *s, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return true;
}

bool config_digits_u64(const char *s, size_t len, uint64_t *ret)
{
	uint64_t v = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned d = (unsigned)(s[i] - '0');

		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*ret = v;
	return true;
}

int config_perr(struct parser *p, const char *fmt, ...)
{
	char msg[CTX_ERRMSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return ctx_error(p->ctx, -EINVAL, "%s:%u: %s", p->cfg->name, p->line, msg);
}

char *config_quoted_name(const char *name)
{
	char q[NAME_QUOTE_MAX + 4];

	quote_text(q, sizeof(q), name, strlen(name), NAME_QUOTE_MAX);
	return strdup(q);
}
