// SPDX-License-Identifier: MIT
/*
 * fuzz-notice.c: libFuzzer target for the eviction notice reader (src/lib/lease/lease-notice.c;
 * docs/leases.md "Taking a lease back"): notices are root's files, but they lie in a directory
 * their user owns and renames in, and the node agent reads every user's.
 *
 * The whole input is one notice's text. Properties checked beyond "no crash, no leak": the
 * reader returns only its documented values (0, -EINVAL, -ENOMEM), refuses a text with a NUL
 * byte, and accepts the same text twice alike (it keeps no state).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lease-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	int r = lease_notice_parse_text(text, size);

	if (r != 0 && r != -EINVAL && r != -ENOMEM)
		abort();
	if (r == 0 && memchr(text, '\0', size))
		abort();
	if (r != -ENOMEM && lease_notice_parse_text(text, size) != r)
		abort();
	return 0;
}
