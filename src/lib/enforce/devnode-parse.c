// SPDX-License-Identifier: MIT
/*
 * devnode-parse.c: the two texts the device-node map reads besides the driver's per-GPU files
 * (driver-proc.c): the driver's table of MIG capability minors and the kernel's list of
 * character device majors. Pure: text in, numbers out (fuzz/fuzz-devnode.c).
 *
 * Decisions:
 * - mig-minors (/proc/driver/nvidia-caps/mig-minors; NVIDIA's MIG user guide, "Device Nodes
 *   and Capabilities"): one capability a line, its name, a blank and the minor of
 *   /dev/nvidia-caps/nvidia-cap<minor>. A MIG device's are "gpuG/giI/access" (its GPU
 *   instance) and "gpuG/giI/ciC/access" (its compute instance), G the parent GPU's device
 *   minor (the reading of Slurm's gpu/nvml plugin and of nvidia-container-toolkit's nvcaps,
 *   which both key the table by the GPU's minor). Numbers are plain decimal; a line that is not
 *   exactly that is skipped, never half-read.
 * - /proc/devices (proc_devices(5); the kernel's fs/proc/devices.c prints "Character
 *   devices:", then "%3d %s" a line, a blank line and "Block devices:"): only the character
 *   section counts, for nvidia-caps and nvidia-uvm have dynamic majors there.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "devnode-internal.h"

/* Reads a decimal number of at most 7 digits at p[0..end) into *ret, advancing *p. */
static bool dec(const char **p, const char *end, uint32_t *ret)
{
	uint32_t v = 0;
	int n = 0;

	for (; *p < end && **p >= '0' && **p <= '9' && n < 8; (*p)++, n++)
		v = v * 10 + (uint32_t)(**p - '0');
	*ret = v;
	return n >= 1 && n <= 7;
}

/* Whether p[0..end) starts with lit; advances *p past it when it does. */
static bool lit(const char **p, const char *end, const char *s)
{
	size_t k = strlen(s);

	if ((size_t)(end - *p) < k || memcmp(*p, s, k) != 0)
		return false;
	*p += k;
	return true;
}

/* A MIG capability name name[0..end) into c (kind DEVNODE_CAP_OTHER when it is none). */
static void cap_name(const char *p, const char *end, struct devnode_cap *c)
{
	uint32_t gpu, gi, ci;

	c->kind = DEVNODE_CAP_OTHER;
	if (!lit(&p, end, "gpu") || !dec(&p, end, &gpu) || !lit(&p, end, "/gi") ||
	    !dec(&p, end, &gi) || !lit(&p, end, "/"))
		return;
	if (lit(&p, end, "access")) {
		if (p == end)
			*c = (struct devnode_cap){.kind = DEVNODE_CAP_GI, .gpu = gpu, .gi = gi};
		return;
	}
	if (lit(&p, end, "ci") && dec(&p, end, &ci) && lit(&p, end, "/access") && p == end)
		*c = (struct devnode_cap){.kind = DEVNODE_CAP_CI, .gpu = gpu, .gi = gi, .ci = ci};
}

bool devnode_mig_line(const char *line, size_t len, struct devnode_cap *ret)
{
	const char *end = line + len, *sp = memchr(line, ' ', len);
	const char *p;
	struct devnode_cap c = {0};
	uint32_t minor;

	if (!sp || sp == line || memchr(line, '\t', (size_t)(sp - line)))
		return false;
	p = sp + 1;
	if (!dec(&p, end, &minor) || p != end || minor >= DEVNODE_MINOR_LIMIT)
		return false;
	cap_name(line, sp, &c);
	c.minor = minor;
	*ret = c;
	return true;
}

int devnode_mig_table(const char *text, size_t len, struct devnode_cap **ret, size_t *ret_n)
{
	const char *p = text, *end = text + len;
	struct devnode_cap *caps = NULL;
	size_t n = 0, cap = 0;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *line = p;
		struct devnode_cap c;

		p = nl ? nl + 1 : end;
		if (!devnode_mig_line(line, (size_t)((nl ? nl : end) - line), &c) ||
		    c.kind == DEVNODE_CAP_OTHER)
			continue;
		if (n == cap) {
			size_t want = cap ? 2 * cap : 64;
			void *v = realloc(caps, want * sizeof(*caps));
			if (!v) {
				free(caps);
				return -ENOMEM;
			}
			caps = v;
			cap = want;
		}
		caps[n++] = c;
	}
	*ret = caps;
	*ret_n = n;
	return 0;
}

bool devnode_mig_find(const struct devnode_cap *caps, size_t n, uint32_t gpu, uint32_t gi, int ci,
                      uint32_t *ret_minor)
{
	for (size_t i = 0; i < n; i++) {
		const struct devnode_cap *c = &caps[i];

		if (c->gpu == gpu && c->gi == gi &&
		    ((ci < 0 && c->kind == DEVNODE_CAP_GI) ||
		     (ci >= 0 && c->kind == DEVNODE_CAP_CI && c->ci == (uint32_t)ci))) {
			*ret_minor = c->minor;
			return true;
		}
	}
	return false;
}

bool devnode_char_major(const char *text, size_t len, const char *name, uint32_t *ret_major)
{
	const char *p = text, *end = text + len;
	bool chars = false;
	size_t k = strlen(name);

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end, *q = p;
		uint32_t major;

		if (lit(&q, eol, "Character devices:") && q == eol)
			chars = true;
		else if (lit(&q, eol, "Block devices:") && q == eol)
			chars = false;
		else if (chars) {
			while (q < eol && *q == ' ')
				q++;
			if (dec(&q, eol, &major) && q < eol && *q == ' ' &&
			    (size_t)(eol - q - 1) == k && memcmp(q + 1, name, k) == 0 &&
			    major < DEVNODE_MAJOR_LIMIT) {
				*ret_major = major;
				return true;
			}
		}
		p = nl ? nl + 1 : end;
	}
	return false;
}
