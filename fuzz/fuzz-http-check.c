// SPDX-License-Identifier: MIT
/*
 * fuzz-http-check.c: libFuzzer target for the exporter's check of request heads
 * (http_check_line, src/cli/http-check.c, compiled in).
 *
 * The input is a client's byte stream, cut into lines at each LF as the gate cuts it. Properties
 * beyond "no crash": a refused line has a reason; no accepted line holds a NUL, a CR other than
 * its last byte or another control byte but HTAB; no accepted request line holds "%00"; no
 * accepted header line begins with white space.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http-check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_accepted(const char *line, size_t len, bool request)
{
	if (len && line[len - 1] == '\r')
		len--;
	for (size_t i = 0; i < len; i++) {
		unsigned char b = (unsigned char)line[i];
		if ((b < 0x20 && b != '\t') || b == 0x7f || (request && b == '\t'))
			abort();
	}
	if (request && len >= 3 && memmem(line, len, "%00", 3))
		abort();
	if (!request && len && (line[0] == ' ' || line[0] == '\t'))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	struct http_check c;
	size_t start = 0;

	http_check_init(&c);
	for (size_t i = 0; i < size; i++) {
		if (text[i] != '\n')
			continue;
		bool request = !c.in_headers;
		if (http_check_line(&c, text + start, i - start) < 0) {
			if (!c.why)
				abort();
			return 0; /* the gate passes nothing on after a refused line */
		}
		check_accepted(text + start, i - start, request);
		start = i + 1;
	}
	return 0;
}
