// SPDX-License-Identifier: MIT
/*
 * sbuf.c: the growing text of sbuf.h. The allocation starts at SBUF_FIRST bytes and doubles
 * (clamped to the bound, when there is one), so n appends cost O(log n) reallocations.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbuf.h"

#define SBUF_FIRST 128 /* bytes of the first allocation */

/* Makes room for n more bytes and the NUL; false, with oom set, when it cannot. */
static bool reserve(struct sbuf *b, size_t n)
{
	size_t need, cap;
	char *p;

	if (b->oom)
		return false;
	if (n >= SIZE_MAX / 2 - b->len || (b->max && b->len + n + 1 > b->max)) {
		b->oom = true;
		return false;
	}
	need = b->len + n + 1;
	if (need <= b->cap)
		return true;
	cap = b->cap ? b->cap : SBUF_FIRST;
	while (cap < need)
		cap *= 2;
	if (b->max && cap > b->max)
		cap = b->max;
	p = realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

void sbuf_append(struct sbuf *b, const char *s, size_t n)
{
	if (!reserve(b, n))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void sbuf_puts(struct sbuf *b, const char *s)
{
	sbuf_append(b, s, strlen(s));
}

void sbuf_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->oom)
		return;
	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->oom = true;
		return;
	}
	if (!reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	(void)vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void sbuf_done(struct sbuf *b)
{
	free(b->p);
	*b = (struct sbuf){.max = b->max};
}
