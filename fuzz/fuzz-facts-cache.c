// SPDX-License-Identifier: MIT
/*
 * fuzz-facts-cache.c: libFuzzer target for the facts cache file's reader (facts_cache_parse,
 * src/lib/nvml/facts-cache.c).
 *
 * The input is the raw file (not NUL-terminated: the reader must stop at the length), read as
 * of the boot 00000000-0000-0000-0000-000000000000 and the driver line DRIVER (the seeds'
 * own). Properties checked beyond
 * "no crash, no leak": a file read is written back (facts_cache_format) as a text the reader
 * takes again, to the same entries; every entry's facts are in range.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "facts-cache.h"
#include "sbuf.h"

#define BOOT   "00000000-0000-0000-0000-000000000000"
#define DRIVER "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  (nvsim)"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool same(const struct facts_entry *a, const struct facts_entry *b)
{
	return strcmp(a->uuid, b->uuid) == 0 && strcmp(a->bus, b->bus) == 0 &&
	       strcmp(a->name, b->name) == 0 && a->has_device_id == b->has_device_id &&
	       (!a->has_device_id || a->device_id == b->device_id) &&
	       a->has_slowdown == b->has_slowdown &&
	       (!a->has_slowdown || a->slowdown_c == b->slowdown_c) &&
	       a->has_width_max == b->has_width_max &&
	       (!a->has_width_max || a->width_max == b->width_max);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct facts_cache *c = NULL, *again = NULL;
	struct sbuf b = SBUF_INIT;

	if (facts_cache_parse((const char *)data, size, BOOT, DRIVER, &c) < 0)
		return 0;
	for (size_t k = 0; k < c->n; k++) {
		const struct facts_entry *e = &c->entries[k];

		if (strncmp(e->uuid, "GPU-", 4) != 0 || (e->has_slowdown && e->slowdown_c <= 0) ||
		    (e->has_width_max && (e->width_max < 1 || e->width_max > 32)) ||
		    (e->has_device_id && (e->device_id < 0 || e->device_id > UINT32_MAX)))
			abort();
	}
	facts_cache_format(c, &b);
	if (b.oom || facts_cache_parse(b.p, b.len, BOOT, DRIVER, &again) < 0 || again->n != c->n)
		abort();
	for (size_t k = 0; k < c->n; k++)
		if (!same(&c->entries[k], &again->entries[k]))
			abort();
	sbuf_done(&b);
	facts_cache_free(c);
	facts_cache_free(again);
	return 0;
}
