/* SPDX-License-Identifier: MIT */
/*
 * sbuf.h: a growing text, for the texts the library builds piece by piece (device strings,
 * owner records, wait tickets). NUL-terminated once anything was appended, so it can be handed
 * on as a C string (TAKE_PTR on .p).
 *
 * Decisions:
 * - A failed append returns nothing: it sets oom, and every later append does nothing, so a
 *   builder (a long run of appends) checks once, at the end.
 * - An optional bound (max, SBUF_INIT_MAX) for texts whose reader is bounded: an append that
 *   would pass it sets oom as well, and the text is never cut silently.
 * - A plain struct with its fields in the open: a caller may reset len to 0 to reuse the
 *   allocation, or take p.
 */
#ifndef GPUCTL_SBUF_H
#define GPUCTL_SBUF_H

#include <stdbool.h>
#include <stddef.h>

struct sbuf {
	char *p;    /* the text, NUL-terminated; NULL until the first append; owned */
	size_t len; /* bytes used, without the NUL */
	size_t cap; /* bytes allocated */
	size_t max; /* 0: no bound; else the most bytes the text may take, its NUL included */
	bool oom;   /* an append failed (out of memory, or past max): the text is incomplete */
};

/* An empty buffer without a bound ({0} works too), and one bounded to max bytes. */
#define SBUF_INIT                                                                                  \
	{                                                                                          \
		.p = NULL                                                                          \
	}
#define SBUF_INIT_MAX(bytes)                                                                       \
	{                                                                                          \
		.p = NULL, .max = (bytes)                                                          \
	}

/* Appends n bytes of s (which need not be NUL-terminated). Appending nothing to a buffer
 * without text allocates it, so that p is "" rather than NULL. */
void sbuf_append(struct sbuf *b, const char *s, size_t n);
/* Appends the string s. */
void sbuf_puts(struct sbuf *b, const char *s);
/* Appends printf-style text. */
void sbuf_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Frees b's text and leaves b empty (its bound kept); for _cleanup_(sbuf_done). */
void sbuf_done(struct sbuf *b);

#endif /* GPUCTL_SBUF_H */
