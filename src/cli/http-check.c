// SPDX-License-Identifier: MIT
/*
 * http-check.c: the exporter's check of request heads, line by line (http-check.h).
 *
 * Decisions:
 * - libmicrohttpd 0.9.75 (Debian 12) accepts what RFC 9112 says a server must refuse: it folds
 *   an obs-fold line into the header before it, reads a header value only up to a NUL, takes
 *   the first of two conflicting Content-Length headers and decodes "%00" into a path that then
 *   compares equal to "/metrics". None of that is visible through its API (the values it hands
 *   out are already cut or joined), so the exporter checks the bytes before libmicrohttpd sees
 *   them (http-gate.c) and has a refused request answered 400.
 * - Only what the exporter needs is judged: control bytes, bare CRs, "%00", white space at the
 *   start of a header line or before its colon, a header line without a colon, conflicting
 *   Content-Length values. The rest of the grammar (methods, versions, sizes) stays
 *   libmicrohttpd's, which answers it as before (405, 413, 414, 431, 400).
 * - A bare LF ends a line as CRLF does (RFC 9112 §2.2 lets a recipient accept it, as
 *   libmicrohttpd does); empty lines before a request line are skipped (§2.2).
 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "http-check.h"

void http_check_init(struct http_check *c)
{
	memset(c, 0, sizeof(*c));
}

static int refuse(struct http_check *c, const char *why)
{
	c->why = why;
	return -EBADMSG;
}

/* A control byte (HTAB allowed when tab_ok) or a CR anywhere in line[0..len). */
static const char *control_fault(const char *line, size_t len, bool tab_ok)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char b = (unsigned char)line[i];

		if (b == '\r')
			return "a bare CR (RFC 9112 §2.2)";
		if (b == '\0')
			return "a NUL byte";
		if ((b < 0x20 && !(tab_ok && b == '\t')) || b == 0x7f)
			return "a control byte";
	}
	return NULL;
}

/* s[0..len) without the white space (SP, HTAB) around it, into buf (cut at size - 1). */
static void trimmed(const char *s, size_t len, char *buf, size_t size)
{
	while (len && (*s == ' ' || *s == '\t')) {
		s++;
		len--;
	}
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
		len--;
	if (len > size - 1)
		len = size - 1;
	memcpy(buf, s, len);
	buf[len] = '\0';
}

static int check_request_line(struct http_check *c, const char *line, size_t len)
{
	const char *why = control_fault(line, len, false);

	if (why)
		return refuse(c, why);
	for (size_t i = 0; i + 2 < len; i++)
		if (line[i] == '%' && line[i + 1] == '0' && line[i + 2] == '0')
			return refuse(c, "%00 in the request target");
	c->in_headers = true;
	c->has_cl = false;
	return 0;
}

static int check_header(struct http_check *c, const char *line, size_t len)
{
	static const char cl_name[] = "content-length";
	const char *colon = memchr(line, ':', len), *why;
	char value[HTTP_CHECK_CL_MAX + 1];
	size_t name_len;

	if (line[0] == ' ' || line[0] == '\t')
		return refuse(c, "obsolete line folding (RFC 9112 §5.2)");
	why = control_fault(line, len, true);
	if (why)
		return refuse(c, why);
	if (!colon)
		return refuse(c, "a header line without a colon");
	name_len = (size_t)(colon - line);
	if (name_len == 0 || memchr(line, ' ', name_len) || memchr(line, '\t', name_len))
		return refuse(c, "white space in a header name (RFC 9112 §5.1)");
	if (name_len != sizeof(cl_name) - 1 || strncasecmp(line, cl_name, name_len) != 0)
		return 0;
	trimmed(colon + 1, len - name_len - 1, value, sizeof(value));
	if (c->has_cl && strcmp(value, c->cl) != 0)
		return refuse(c, "conflicting Content-Length headers (RFC 9112 §6.3)");
	memcpy(c->cl, value, sizeof(value));
	c->has_cl = true;
	return 0;
}

int http_check_line(struct http_check *c, const char *line, size_t len)
{
	if (len && line[len - 1] == '\r')
		len--;
	if (len == 0) {
		/* before a request line: skipped; after one: the end of its head */
		c->in_headers = false;
		return 0;
	}
	return c->in_headers ? check_header(c, line, len) : check_request_line(c, line, len);
}
