// SPDX-License-Identifier: MIT
/*
 * fuzz-devnode.c: libFuzzer target for the device-node map's readers
 * (src/lib/enforce/devnode-parse.c): the driver's mig-minors table and the kernel's
 * /proc/devices. The first byte picks the reader (0 mig-minors, 1 /proc/devices); the rest is
 * the raw text (not NUL-terminated: the readers must stop at the length).
 *
 * Properties beyond "no crash, no leak": a line read is written back in the driver's spelling
 * and reads the same; a minor found is below the kernel's limit and is the minor of a line
 * that names that capability; a major found is below the kernel's limit.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devnode-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_line(const char *p, size_t len)
{
	struct devnode_cap c, again;
	char line[96];
	int n;

	if (!devnode_mig_line(p, len, &c))
		return;
	if (c.minor >= DEVNODE_MINOR_LIMIT)
		abort();
	if (c.kind == DEVNODE_CAP_OTHER)
		return;
	n = c.kind == DEVNODE_CAP_GI
	            ? snprintf(line, sizeof(line), "gpu%u/gi%u/access %u", c.gpu, c.gi, c.minor)
	            : snprintf(line, sizeof(line), "gpu%u/gi%u/ci%u/access %u", c.gpu, c.gi, c.ci,
	                       c.minor);
	if (n < 0 || !devnode_mig_line(line, (size_t)n, &again) || memcmp(&c, &again, sizeof(c)))
		abort();
	/* the table of that one line finds it */
	struct devnode_cap *caps = NULL;
	size_t n_caps = 0;
	uint32_t m;
	if (devnode_mig_table(line, (size_t)n, &caps, &n_caps) < 0)
		return;
	if (n_caps != 1 ||
	    !devnode_mig_find(caps, n_caps, c.gpu, c.gi, c.kind == DEVNODE_CAP_GI ? -1 : (int)c.ci,
	                      &m) ||
	    m != c.minor)
		abort();
	free(caps);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data + 1;
	uint32_t v;

	if (size < 1)
		return 0;
	size--;
	if (data[0] == 0) {
		for (const char *p = text, *end = text + size; p < end;) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			const char *eol = nl ? nl : end;
			check_line(p, (size_t)(eol - p));
			p = nl ? nl + 1 : end;
		}
		struct devnode_cap *caps = NULL;
		size_t n = 0;
		if (devnode_mig_table(text, size, &caps, &n) < 0)
			return 0;
		for (size_t i = 0; i < n; i++)
			if (caps[i].kind == DEVNODE_CAP_OTHER ||
			    caps[i].minor >= DEVNODE_MINOR_LIMIT)
				abort();
		if (devnode_mig_find(caps, n, 0, 1, -1, &v) && v >= DEVNODE_MINOR_LIMIT)
			abort();
		free(caps);
	} else {
		if (devnode_char_major(text, size, "nvidia-caps", &v) && v >= DEVNODE_MAJOR_LIMIT)
			abort();
		if (devnode_char_major(text, size, "nvidia-uvm", &v) && v >= DEVNODE_MAJOR_LIMIT)
			abort();
	}
	return 0;
}
