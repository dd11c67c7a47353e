// SPDX-License-Identifier: MIT
/*
 * fuzz-json.c: libFuzzer target for every JSON writer of text gpuctl did not write itself
 * (labels, command lines, process names, GPU names: docs/json.md "Text"): the library's
 * utf8_json_quote (owner records, the CDI specification) and the CLI's json_text (src/cli/
 * format.c, compiled in: ps, list, watch, health, info, topo JSON), over arbitrary bytes.
 *
 * Properties checked with jansson, an independent JSON reader: utf8_json_quote's literal
 * parses (json_loads, JSON_DECODE_ANY) to a string, and that string is exactly
 * utf8_valid_copy's text (so escaping loses nothing but the invalid bytes, each U+FFFD);
 * json_text always gives a string, whose json_dumps text parses back to the same string.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "format.h"
#include "utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1), *q, *fixed, *dump;
	json_t *j, *back;
	json_error_t err;
	size_t max;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';           /* C strings: what follows a NUL byte is never seen by a writer */
	max = size ? data[0] : 0; /* a cut anywhere, sequences included */

	q = utf8_json_quote(s, max);
	fixed = utf8_valid_copy(s, max);
	if (!q || !fixed)
		abort();
	j = json_loads(q, JSON_DECODE_ANY, &err);
	if (!j || !json_is_string(j) || strcmp(json_string_value(j), fixed) != 0)
		abort();
	json_decref(j);
	free(q);
	free(fixed);

	j = json_text(s);
	if (!j || !json_is_string(j))
		abort();
	dump = json_dumps(j, JSON_ENCODE_ANY);
	back = dump ? json_loads(dump, JSON_DECODE_ANY, &err) : NULL;
	if (!back || !json_equal(j, back))
		abort();
	json_decref(back);
	json_decref(j);
	free(dump);
	free(s);
	return 0;
}
