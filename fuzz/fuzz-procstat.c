// SPDX-License-Identifier: MIT
/*
 * fuzz-procstat.c: libFuzzer target for `gpuctl top`'s reading of /proc/PID/stat
 * (src/cli/hostproc.c), whose second field is a name the process chose itself.
 *
 * Properties checked beyond "no crash, no leak": a failed parse leaves the out-parameter
 * untouched; a parse that succeeds gives the same result when the text is followed by a
 * newline (as the kernel writes it); when the command name is replaced by "x" the numeric
 * fields stay and the name is "x".
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hostproc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hostproc_stat a, b, untouched;
	memset(&a, 0x5a, sizeof(a));
	untouched = a;
	int r = hostproc_parse_stat((const char *)data, size, &a);
	if (r < 0) {
		if (memcmp(&a, &untouched, sizeof(a)) != 0)
			abort();
		return 0;
	}
	char *copy = malloc(size + 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	copy[size] = '\n';
	if (hostproc_parse_stat(copy, size + 1, &b) != 0 || memcmp(&a, &b, sizeof(a)) != 0)
		abort();
	/* the fields after the last ')' alone decide */
	const char *close = NULL;
	for (size_t i = size; i > 0; i--)
		if (data[i - 1] == ')') {
			close = (const char *)data + i - 1;
			break;
		}
	if (!close)
		abort();
	size_t tail = size - (size_t)(close - (const char *)data);
	char *alt = malloc(tail + 8);
	if (alt) {
		memcpy(alt, "1 (x", 4);
		memcpy(alt + 4, close, tail);
		if (hostproc_parse_stat(alt, tail + 4, &b) != 0 || a.state != b.state ||
		    a.cpu_ticks != b.cpu_ticks || a.start_ticks != b.start_ticks ||
		    a.rss_pages != b.rss_pages || strcmp(b.comm, "x") != 0)
			abort();
		free(alt);
	}
	free(copy);
	return 0;
}
