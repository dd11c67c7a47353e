// SPDX-License-Identifier: MIT
/*
 * fuzz-query.c: libFuzzer target for `gpuctl list`'s --query and --format parsers
 * (src/cli/query.c), --query-compute-apps' parser, the suggestion search for unknown names,
 * and `gpuctl watch`'s -s and -o.
 *
 * The input is used as one NUL-terminated argument, as it would arrive from argv. Properties
 * checked beyond "no crash, no leak": a successful parse has 1..QUERY_MAX_COLUMNS columns, each
 * resolving to a valid field whose name looks the field up again to the same id; a failed parse
 * leaves the out-parameter untouched.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "query.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';

	struct query *q = (struct query *)(uintptr_t)0x1; /* must stay untouched on failure */
	char *bad = NULL;
	int r = query_parse(text, &q, &bad);
	if (r >= 0) {
		if (q->n == 0 || q->n > QUERY_MAX_COLUMNS)
			abort();
		for (size_t i = 0; i < q->n; i++) {
			int col = (int)q->cols[i].field;

			/* the three columns that are not GPU fields, by their names only */
			if (col == QUERY_DRIVER_VERSION || col == QUERY_TIMESTAMP ||
			    col == QUERY_COUNT) {
				const char *want = col == QUERY_DRIVER_VERSION ? "driver_version"
				                   : col == QUERY_TIMESTAMP    ? "timestamp"
				                                               : "count";
				if (strcasecmp(q->cols[i].name, want) != 0)
					abort();
				continue;
			}
			if (!gpuctl_field_info(q->cols[i].field))
				abort();
			if (gpuctl_field_lookup(q->cols[i].name) != col)
				abort();
		}
		(void)query_snap_flags(q);
		query_free(q);
	} else {
		if (q != (struct query *)(uintptr_t)0x1)
			abort();
		if (r == -EINVAL && !bad)
			abort();
	}
	free(bad);

	/* --query-compute-apps: 1..QUERY_MAX_COLUMNS known columns, each with a header */
	struct app_query *aq = (struct app_query *)(uintptr_t)0x1;
	bad = NULL;
	r = app_query_parse(text, &aq, &bad);
	if (r >= 0) {
		if (aq->n == 0 || aq->n > QUERY_MAX_COLUMNS)
			abort();
		for (size_t i = 0; i < aq->n; i++)
			if ((unsigned)aq->cols[i] >= APP__COUNT ||
			    !app_field_header(aq->cols[i])[0])
				abort();
		free(aq);
	} else if (aq != (struct app_query *)(uintptr_t)0x1 || (r == -EINVAL && !bad)) {
		abort();
	}
	free(bad);

	char near[128];
	(void)query_suggest(text, near, sizeof(near));
	(void)query_suggest(text, near, 1);

	struct format_spec spec = {0};
	bad = NULL;
	if (format_parse(text, &spec, &bad) < 0 && !bad)
		abort();
	free(bad);

	/* gpuctl watch -s and -o: a parsed set has one bit per distinct letter of the text */
	unsigned mask = 0xdead;
	char bad_letter = 0;
	if (groups_parse(text, "pucvmet", &mask, &bad_letter) == 0) {
		if (bad_letter || mask == 0 || mask >> 7 ||
		    (size_t)__builtin_popcount(mask) != strlen(text))
			abort();
	} else if (mask != 0xdead) {
		abort();
	}
	bool d = false, t = false;
	if (date_time_parse(text, &d, &t) == 0 && !d && !t)
		abort();

	free(text);
	return 0;
}
