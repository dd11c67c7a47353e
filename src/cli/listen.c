// SPDX-License-Identifier: MIT
/*
 * listen.c: the --listen ADDR:PORT parser (listen.h).
 *
 * Decisions:
 * - Strict: anything that is not exactly one of the documented forms is refused with a reason,
 *   so a typo never silently listens somewhere else (e.g. "1.2.3.4.5:80" is a bad IPv4 address,
 *   not a host name; "9409" alone is refused with a hint to write ":9409").
 * - Literals are checked with inet_pton(), which is pure and accepts only the canonical dotted
 *   quad for IPv4 (no octal or shortened forms). IPv6 zone ids ("%eth0") are refused.
 * - A host name is checked for its syntax only (RFC 1123 labels); resolving it is the caller's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "listen.h"

static int fail(const char **ret_why, const char *why)
{
	if (ret_why)
		*ret_why = why;
	return -EINVAL;
}

/* "1" to "65535", decimal digits only. */
static bool parse_port(const char *s, uint16_t *ret_port)
{
	unsigned long v = 0;
	size_t n = strlen(s);
	if (n == 0 || n > 5 || strspn(s, "0123456789") != n)
		return false;
	for (size_t i = 0; i < n; i++)
		v = v * 10 + (unsigned long)(s[i] - '0');
	if (v < 1 || v > 65535)
		return false;
	*ret_port = (uint16_t)v;
	return true;
}

static bool is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* RFC 1123 host name: dot-separated labels of letters, digits and inner hyphens, 1-63 each;
 * one trailing dot allowed; the last label not all digits. */
static bool valid_hostname(const char *h, size_t n)
{
	size_t label = 0;
	if (n == 0 || n > LISTEN_MAX_HOST)
		return false;
	if (h[n - 1] == '.')
		n--;
	for (size_t i = 0; i < n; i++) {
		char c = h[i];
		if (c == '.') {
			if (label == 0 || h[i - 1] == '-')
				return false;
			label = 0;
		} else if (is_alnum(c) || c == '-') {
			if (c == '-' && label == 0)
				return false;
			if (++label > 63)
				return false;
		} else {
			return false;
		}
	}
	if (label == 0 || h[n - 1] == '-')
		return false;
	/* an all-digit last label is a mistyped address, never a name (RFC 3696 section 2) */
	return strspn(h + n - label, "0123456789") != label;
}

int listen_parse(const char *text, struct listen_spec *ret_spec, const char **ret_why)
{
	struct listen_spec s = {0};
	const char *port;
	size_t hn;

	if (!text || !text[0])
		return fail(ret_why, "empty address (expected ADDR:PORT, e.g. " LISTEN_DEFAULT ")");
	if (text[0] == '[') {
		const char *close = strchr(text, ']');
		if (!close)
			return fail(ret_why, "missing ']' after the IPv6 address");
		if (close[1] != ':')
			return fail(ret_why, "expected ':PORT' after ']'");
		hn = (size_t)(close - text - 1);
		port = close + 2;
		if (hn == 0 || hn > LISTEN_MAX_HOST)
			return fail(ret_why, "not an IPv6 address");
		memcpy(s.host, text + 1, hn);
		s.host[hn] = '\0';
		struct in6_addr a6;
		if (inet_pton(AF_INET6, s.host, &a6) != 1)
			return fail(ret_why, "not an IPv6 address");
		s.kind = LISTEN_IPV6;
	} else {
		const char *colon = strrchr(text, ':');
		if (!colon)
			return fail(ret_why,
			            "missing ':PORT' (e.g. " LISTEN_DEFAULT " for every address)");
		hn = (size_t)(colon - text);
		port = colon + 1;
		if (memchr(text, ':', hn))
			return fail(ret_why,
			            "an IPv6 address must be in brackets, e.g. [::1]:9409");
		if (hn > LISTEN_MAX_HOST)
			return fail(ret_why, "host name too long");
		memcpy(s.host, text, hn);
		s.host[hn] = '\0';
		struct in_addr a4;
		if (hn == 0) {
			s.kind = LISTEN_ANY;
		} else if (strspn(s.host, "0123456789.") == hn) {
			/* all digits and dots: meant as an IPv4 address, never a name */
			if (inet_pton(AF_INET, s.host, &a4) != 1)
				return fail(ret_why, "not an IPv4 address");
			s.kind = LISTEN_IPV4;
		} else if (valid_hostname(s.host, hn)) {
			s.kind = LISTEN_NAME;
		} else {
			return fail(ret_why, "not an IPv4 address or host name");
		}
	}
	if (!port[0])
		return fail(ret_why, "missing port after ':'");
	if (!parse_port(port, &s.port))
		return fail(ret_why, "port must be a number 1-65535");
	*ret_spec = s;
	return 0;
}
