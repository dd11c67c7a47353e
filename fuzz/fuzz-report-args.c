// SPDX-License-Identifier: MIT
/*
 * fuzz-report-args.c: libFuzzer target for `gpuctl report`'s --since/--until and --by parsers
 * (src/cli/report-args.c).
 *
 * The input is one NUL-terminated argument. Properties checked beyond "no crash, no leak": a
 * refused time leaves the out-parameter untouched and says why; an accepted one is "now", a
 * relative time at or before now and at most 100 years back, or a date from 1970 to 9999 (with
 * an offset of less than a day either side); an ISO date accepted is accepted again with "Z"
 * appended and means the same moment; --by accepts exactly the six names.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuctl/ledger.h"
#include "report-args.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NOW 1.7e9

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 2);
	const char *why = NULL;
	double t = -12345.0, u = -1;
	size_t len;
	int r, by = -7;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	len = strlen(text);
	r = report_parse_time(text, NOW, &t, &why);
	if (r < 0) {
		if (r != -EINVAL || !why || !why[0] || t != -12345.0)
			abort();
	} else {
		if (r != 0 || !isfinite(t))
			abort();
		if (text[0] == '-' && (t > NOW || t < NOW - 100.0 * 366 * 86400))
			abort();
		if (text[0] != '-' && strcmp(text, "now") != 0 &&
		    (t < -86400.0 || t > 253402300800.0 + 86400.0))
			abort();
		/* a date or time without an offset is UTC: the same with Z */
		if (text[0] != '-' && strcmp(text, "now") != 0 && text[len - 1] != 'Z' &&
		    !strpbrk(text + 10, "+-")) {
			text[len] = 'Z';
			text[len + 1] = '\0';
			if (report_parse_time(text, NOW, &u, &why) != 0 || u != t)
				abort();
			text[len] = '\0';
		}
	}
	r = report_parse_by(text, &by);
	if (r == 0) {
		if (by < 0 || by >= GPUCTL_LEDGER_BY_MAX_ ||
		    strcmp(gpuctl_ledger_by_name(by), text))
			abort();
	} else if (r != -EINVAL || by != -7) {
		abort();
	}
	free(text);
	return 0;
}
