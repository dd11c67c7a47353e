// SPDX-License-Identifier: MIT
/*
 * fuzz-lease.c: libFuzzer target for the lease parsers that read what other users wrote
 * (docs/leases.md): owner records and record file names (src/lib/lease/lease-record.c) and waiters'
 * tickets (src/lib/lease/lease-queue.c); and the /proc/locks line parser every lease probe and
 * waiter's fingerprint rests on, and the /proc/PID/fdinfo reader around it that finds a lease's
 * holders (src/lib/lease/lease-record.c).
 *
 * The first byte chooses the parser (mod 4), the rest is its input. Properties checked beyond
 * "no crash, no leak": a record name that parses yields a UUID that is a prefix of the name,
 * followed by ".json" or "@"; a /proc/locks line that parses is a FLOCK that is not a blocked
 * request, and a pid it reports fits a pid_t; an fdinfo text (the same input, case 3) yields a
 * flock only from a "lock:" line naming FLOCK; the parsers return only their documented
 * values.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lease-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data + 1;
	size_t len = size ? size - 1 : 0;

	if (size == 0)
		return 0;
	switch (data[0] % 4) {
	case 0: {
		int r = lease_record_parse_text(text, len,
		                                "GPU-12ab0000-1111-2222-3333-444444444444");

		if (r != 0 && r != -EINVAL && r != -ENOMEM)
			abort();
		break;
	}
	case 1:
		(void)lease_ticket_parse_text(text, len);
		break;
	case 3: {
		char line[LOCKS_LINE_MAX], orig[LOCKS_LINE_MAX];
		struct lease_flock l;
		size_t n = len < sizeof(line) - 1 ? len : sizeof(line) - 1;

		memcpy(line, text, n);
		line[n] = '\0';
		memcpy(orig, line, n + 1);
		if (lease_flock_parse(line, &l) &&
		    (!strstr(orig, "FLOCK") || strstr(orig, "->") || l.pid > INT32_MAX))
			abort();
		memcpy(line, orig, n + 1);
		if (lease_fdinfo_flock(line, &l) &&
		    (!strstr(orig, "lock:") || !strstr(orig, "FLOCK") || l.pid > INT32_MAX))
			abort();
		break;
	}
	default: {
		char name[256], uuid[97];
		bool shared = false;
		size_t n = len < sizeof(name) - 1 ? len : sizeof(name) - 1;

		memcpy(name, text, n);
		name[n] = '\0';
		if (lease_record_name_parse(name, uuid, &shared)) {
			size_t u = strlen(uuid);

			if (strncmp(name, uuid, u) != 0 ||
			    (name[u] != '@' && strcmp(name + u, ".json")))
				abort();
			if (shared != (name[u] == '@'))
				abort();
		}
		break;
	}
	}
	return 0;
}
