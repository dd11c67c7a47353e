// SPDX-License-Identifier: MIT
/*
 * fuzz-size.c: libFuzzer target for the argument parsers of `gpuctl select` / `gpuctl run`
 * (src/lib/basic/parse.c): sizes (--min-free-mem), counts, percentages, seconds (--interval, -d),
 * bounds that can be off (GPUCTL_NVML_TIMEOUT), and the cpulists gpuctl run binds CPUs with.
 *
 * The input is one NUL-terminated argument. Properties checked beyond "no crash, no leak":
 * a failed parse leaves the out-parameter untouched and says why; a size with unit B equals
 * its integer; a parsed cpulist formats back to a list that parses to the same bits.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NBITS 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';

	uint64_t bytes = 0x5a5a5a5a;
	const char *why = NULL;
	int r = parse_size(text, &bytes, &why);
	if (r < 0 && (bytes != 0x5a5a5a5a || !why || (r != -EINVAL && r != -ERANGE)))
		abort();
	if (r == 0 && size > 1 && (text[size - 1] == 'B' || text[size - 1] == 'b') &&
	    !strchr(text, '.') && strspn(text, "0123456789") == size - 1) {
		unsigned long v;
		text[size - 1] = '\0';
		if (parse_uint(text, 0, ULONG_MAX, &v) == 0 && v != bytes)
			abort();
		text[size - 1] = 'B';
	}

	unsigned long v = 7;
	if (parse_uint(text, 0, 4096, &v) < 0 && v != 7)
		abort();
	double secs = -7.0;
	r = parse_seconds(text, 0.1, 86400, &secs);
	if (r < 0 ? secs != -7.0
	          : !(secs >= 0.1 && secs <= 86400) || strspn(text, "0123456789.") != strlen(text))
		abort();
	/* GPUCTL_NVML_TIMEOUT: "off", or seconds 0 to 86400 of digits and one '.' */
	secs = -7.0;
	r = parse_timeout(text, 86400, &secs);
	if (r < 0 ? secs != -7.0
	          : !(secs >= 0 && secs <= 86400) ||
	                    (strcmp(text, "off") != 0 &&
	                     strspn(text, "0123456789.") != strlen(text)) ||
	                    (strcmp(text, "off") == 0 && secs != 0))
		abort();
	int pct = -7;
	if (parse_percent(text, &pct) < 0 ? pct != -7 : (pct < 0 || pct > 100))
		abort();

	static uint64_t a[NBITS / 64], b[NBITS / 64];
	static char out[NBITS * 6];
	memset(a, 0, sizeof(a));
	memset(b, 0, sizeof(b));
	if (parse_cpulist(text, a, NBITS) == 0) {
		size_t n = format_cpulist(a, NBITS, out, sizeof(out));
		if (n >= sizeof(out) || parse_cpulist(out, b, NBITS) != 0 ||
		    memcmp(a, b, sizeof(a)))
			abort();
	}
	free(text);
	return 0;
}
