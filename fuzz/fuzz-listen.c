// SPDX-License-Identifier: MIT
/*
 * fuzz-listen.c: libFuzzer target for `gpuctl exporter --listen ADDR:PORT` (src/cli/listen.c).
 *
 * The input is one NUL-terminated argument. Properties checked beyond "no crash, no leak": a
 * refused address leaves the out-parameter untouched and says why; an accepted one has a port
 * 1-65535, a host of its kind (empty only for ANY, no ':' unless IPv6), and written back in the
 * canonical form ("[h]:p", "h:p", ":p") parses to the same result.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "listen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';

	struct listen_spec s, t;
	memset(&s, 0x5a, sizeof(s));
	const char *why = NULL;
	int r = listen_parse(text, &s, &why);
	if (r < 0) {
		unsigned char *p = (unsigned char *)&s;
		for (size_t i = 0; i < sizeof(s); i++)
			if (p[i] != 0x5a)
				abort();
		if (r != -EINVAL || !why)
			abort();
		free(text);
		return 0;
	}
	if (r != 0 || s.port == 0 || strlen(s.host) > LISTEN_MAX_HOST)
		abort();
	if ((s.kind == LISTEN_ANY) != (s.host[0] == '\0'))
		abort();
	if (s.kind != LISTEN_IPV6 && strchr(s.host, ':'))
		abort();
	char again[LISTEN_MAX_HOST + 16];
	snprintf(again, sizeof(again), s.kind == LISTEN_IPV6 ? "[%s]:%u" : "%s:%u", s.host,
	         (unsigned)s.port);
	if (listen_parse(again, &t, NULL) != 0 || t.kind != s.kind || t.port != s.port ||
	    strcmp(t.host, s.host) != 0)
		abort();
	free(text);
	return 0;
}
