// SPDX-License-Identifier: MIT
/*
 * http-check.h: the exporter's check of the request heads clients send (src/cli/http-check.c),
 * line by line, before libmicrohttpd parses them (src/cli/http-gate.c).
 */
#ifndef GPUCTL_HTTP_CHECK_H
#define GPUCTL_HTTP_CHECK_H

#include <stdbool.h>
#include <stddef.h>

#define HTTP_CHECK_CL_MAX 24 /* bytes of a Content-Length value kept for comparison */

/* Where a connection's byte stream is, and the first Content-Length of the current request. */
struct http_check {
	bool in_headers;                /* after a request line, before its empty line */
	bool has_cl;                    /* this request had a Content-Length */
	char cl[HTTP_CHECK_CL_MAX + 1]; /* its value, white space trimmed (cut at the max) */
	const char *why;                /* the fault of the last refused line (static) */
};

void http_check_init(struct http_check *c);

/* Checks one line of the stream: len bytes up to, not including, its LF (a CR before the LF is
 * part of it). 0 when it may go on, advancing c (request line, header lines, the empty line that
 * ends the head); -EBADMSG when the request must be answered 400, with c->why. Refused: a control
 * byte (a NUL included; HTAB is allowed in a header) or a bare CR in any line, "%00" in the
 * request line (a NUL the server would decode into the path), a header line that begins with
 * white space (obsolete line folding, RFC 9112 §5.2), and a Content-Length that differs from
 * an earlier one of the same request (RFC 9112 §6.3). Pure. Fuzzed by fuzz/fuzz-http-check.c. */
int http_check_line(struct http_check *c, const char *line, size_t len);

#endif /* GPUCTL_HTTP_CHECK_H */
