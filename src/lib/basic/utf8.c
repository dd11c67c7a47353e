// SPDX-License-Identifier: MIT
/*
 * utf8.c: valid UTF-8 for JSON out of arbitrary bytes (utf8.h; docs/json.md "Text").
 * Tests: tests/unit/test-utf8.c (RFC 3629's table, Markus Kuhn's decoder cases), fuzz/fuzz-json.c
 * (arbitrary bytes through every JSON writer, checked by jansson).
 *
 * Decisions:
 * - One U+FFFD per byte that starts no well-formed sequence (a truncated sequence's lead byte
 *   is replaced and its continuation bytes, which start nothing, each again). Simple, and never
 *   loses the count of odd bytes; escaping them as "\xff" is not JSON.
 * - Well-formed is RFC 3629 §4's table: the second byte's range depends on the first, which
 *   excludes overlong forms, UTF-16 surrogates (U+D800..DFFF) and code points above U+10FFFF.
 */
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

size_t utf8_seq_len(const unsigned char *s, size_t n)
{
	unsigned char c = n ? s[0] : 0;
	unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
	size_t len;

	if (n == 0)
		return 0;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	else
		return 0; /* a continuation byte, an overlong lead (C0, C1) or F5..FF */
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

char *utf8_valid_copy(const char *s, size_t max)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t n = strnlen(s, max), o = 0;
	char *out = malloc(n * 3 + 1); /* each byte at most one U+FFFD */

	if (!out)
		return NULL;
	for (size_t i = 0; i < n;) {
		size_t k = utf8_seq_len(u + i, n - i);

		if (k) {
			memcpy(out + o, s + i, k);
			o += k;
			i += k;
		} else {
			memcpy(out + o, UTF8_REPLACEMENT, 3);
			o += 3;
			i++;
		}
	}
	out[o] = '\0';
	return out;
}

char *utf8_json_quote(const char *s, size_t max)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *u = (const unsigned char *)s;
	size_t n = strnlen(s, max), o = 0;
	char *out = malloc(n * 6 + 3); /* each byte at most "\u00XX" */

	if (!out)
		return NULL;
	out[o++] = '"';
	for (size_t i = 0; i < n;) {
		unsigned char c = u[i];
		size_t k = utf8_seq_len(u + i, n - i);

		if (c == '"' || c == '\\') {
			out[o++] = '\\';
			out[o++] = (char)c;
		} else if (c == '\n' || c == '\t') {
			out[o++] = '\\';
			out[o++] = c == '\n' ? 'n' : 't';
		} else if (c < 0x20 || c == 0x7f) {
			memcpy(out + o, "\\u00", 4);
			out[o + 4] = hex[c >> 4];
			out[o + 5] = hex[c & 15];
			o += 6;
		} else if (k) {
			memcpy(out + o, s + i, k);
			o += k;
			i += k;
			continue;
		} else {
			memcpy(out + o, UTF8_REPLACEMENT, 3);
			o += 3;
		}
		i++;
	}
	out[o++] = '"';
	out[o] = '\0';
	return out;
}
