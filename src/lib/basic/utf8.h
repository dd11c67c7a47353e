/* SPDX-License-Identifier: MIT */
/*
 * utf8.h: text that goes into JSON, made valid whatever its bytes (docs/json.md "Text"). Labels,
 * command lines and process names are bytes, not UTF-8; JSON is UTF-8 (RFC 8259 §8.1), and
 * jansson refuses a string that is not. Pure functions, no I/O. Part of libgpuctl's objects but
 * not of its exports (libgpuctl.sym exports gpuctl_* only); the CLI and fuzz/fuzz-json.c reach
 * it through gpuctl_static with src/lib on their include path.
 */
#ifndef GPUCTL_UTF8_H
#define GPUCTL_UTF8_H

#include <stddef.h>

/* U+FFFD REPLACEMENT CHARACTER in UTF-8: what each byte that is not part of a valid UTF-8
 * sequence becomes. */
#define UTF8_REPLACEMENT "\xef\xbf\xbd"

/* The length (1-4) of the well-formed UTF-8 sequence at s, of at most n bytes (RFC 3629 §4:
 * no overlong forms, no surrogates, nothing above U+10FFFF), or 0 when s does not start one. */
size_t utf8_seq_len(const unsigned char *s, size_t n);

/* A copy of the first max bytes of s (up to its NUL) that is valid UTF-8: every byte that
 * starts no well-formed sequence is replaced by U+FFFD. malloc'ed; NULL when out of memory. */
char *utf8_valid_copy(const char *s, size_t max);

/* The JSON string literal (quotes included) of the first max bytes of s: '"' and '\\' escaped,
 * control characters and DEL as \u00XX (\n and \t as such), invalid UTF-8 as U+FFFD.
 * malloc'ed; NULL when out of memory. */
char *utf8_json_quote(const char *s, size_t max);

#endif /* GPUCTL_UTF8_H */
