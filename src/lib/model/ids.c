// SPDX-License-Identifier: MIT
/*
 * ids.c: turns a user's list of GPU ids into snapshot indices (gpuctl_ids_resolve).
 *
 * Decisions (also in the header comment and docs/topology.md's sibling, the man page):
 * - Entries are separated by ','; blanks (space, tab, newline) around an entry are ignored.
 *   An empty entry ("0,,1", a trailing comma, an empty or all-blank list) is an error: a typo
 *   must not silently select fewer GPUs.
 * - An entry of decimal digits only is an index (leading zeros allowed); "N-M", digits on both
 *   sides of one dash, is the indices N to M (N <= M), as the configuration's `gpus` accepts
 *   (a UUID prefix always has letters or "GPU-", so no UUID reads as a range). Anything else with a
 *   ':' is a PCI bus id in one of NVML's forms ("00000000:07:00.0", "0000:07:00.0", "07:00.0";
 *   hex, any case), compared by value, so "0:7:0.0" names the same GPU.
 * - Otherwise the entry is a UUID or UUID prefix, compared case-insensitively, dashes included.
 *   With the "GPU-" prefix any non-empty prefix is accepted (the prefix says what it is, as in
 *   CUDA_VISIBLE_DEVICES); without it at least 4 hex digits are required, so that a short typo
 *   is not taken for a UUID. A prefix naming several GPUs is an error listing them.
 * - "MIG-" UUIDs name MIG devices, not GPUs: they are refused with a message saying so.
 * - Duplicates (the same GPU named twice, by any forms) are kept once, at the first position.
 * - Messages quote the entry as given (non-printable bytes shown as '?', long entries cut).
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ctx.h"
#include "snapshot-internal.h"
#include "util.h"

#define ENTRY_MAX         256 /* longest entry accepted: a MIG UUID is 40, a bus id 16 */
#define QUOTE_MAX         64  /* longest entry quoted in a message */
#define UUID_MIN_HEX_BARE 4   /* hex digits needed for a prefix without "GPU-" */
#define AMBIGUOUS_LIST    8   /* GPU indices named in an "ambiguous" message */

struct pci_addr {
	uint32_t domain;   /* 0..0xffffffff */
	uint32_t bus;      /* 0..0xff */
	uint32_t device;   /* 0..0x1f */
	uint32_t function; /* 0..7 */
};

/* Parses 1..max_digits hex digits from s[0..len); false if anything else is there. */
static bool parse_hex(const char *s, size_t len, size_t max_digits, uint32_t *ret)
{
	uint32_t v = 0;

	if (len == 0 || len > max_digits)
		return false;
	for (size_t i = 0; i < len; i++) {
		int c = (unsigned char)s[i];
		uint32_t d;

		if (c >= '0' && c <= '9')
			d = (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			d = (uint32_t)(c - 'A' + 10);
		else
			return false;
		v = v << 4 | d;
	}
	*ret = v;
	return true;
}

/* "[domain:]bus:device.function", hex; false if malformed. */
static bool parse_pci(const char *s, size_t len, struct pci_addr *ret)
{
	const char *end = s + len;
	const char *c1 = memchr(s, ':', len);
	const char *c2, *dot;
	struct pci_addr a = {0};

	if (!c1)
		return false;
	c2 = memchr(c1 + 1, ':', (size_t)(end - c1 - 1));
	if (c2) {
		if (memchr(c2 + 1, ':', (size_t)(end - c2 - 1)))
			return false;
		if (!parse_hex(s, (size_t)(c1 - s), 8, &a.domain))
			return false;
		s = c1 + 1;
		c1 = c2;
	}
	if (!parse_hex(s, (size_t)(c1 - s), 2, &a.bus))
		return false;
	dot = memchr(c1 + 1, '.', (size_t)(end - c1 - 1));
	if (!dot)
		return false;
	if (!parse_hex(c1 + 1, (size_t)(dot - c1 - 1), 2, &a.device) || a.device > 0x1f)
		return false;
	if (!parse_hex(dot + 1, (size_t)(end - dot - 1), 1, &a.function) || a.function > 7)
		return false;
	*ret = a;
	return true;
}

static bool pci_equal(const struct pci_addr *a, const struct pci_addr *b)
{
	return a->domain == b->domain && a->bus == b->bus && a->device == b->device &&
	       a->function == b->function;
}

static bool has_prefix_ci(const char *s, size_t len, const char *prefix)
{
	size_t n = strlen(prefix);

	return len >= n && strncasecmp(s, prefix, n) == 0;
}

static int resolve_index(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap, const char *e,
                         size_t len, const char *q, size_t *ret)
{
	size_t v = 0;
	bool overflow = false;

	for (size_t i = 0; i < len; i++) {
		size_t d = (size_t)(e[i] - '0');

		if (v > (SIZE_MAX - d) / 10)
			overflow = true;
		else
			v = v * 10 + d;
	}
	if (overflow || v >= snap->n_gpus) {
		if (snap->n_gpus == 0)
			return ctx_error(ctx, -EINVAL, "'%s': no GPU with that index (no GPUs)", q);
		return ctx_error(ctx, -EINVAL, "'%s': no GPU with that index (%zu GPU%s: 0-%zu)%s",
		                 q, snap->n_gpus, snap->n_gpus == 1 ? "" : "s", snap->n_gpus - 1,
		                 len >= UUID_MIN_HEX_BARE ? "; for a UUID prefix write GPU-..."
		                                          : "");
	}
	*ret = v;
	return 0;
}

static int resolve_pci(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap, const char *e,
                       size_t len, const char *q, size_t *ret)
{
	struct pci_addr want;

	if (!parse_pci(e, len, &want))
		return ctx_error(ctx, -EINVAL,
		                 "'%s': not a PCI bus id (expected e.g. 00000000:07:00.0)", q);
	for (size_t i = 0; i < snap->n_gpus; i++) {
		const char *bus = gpuctl_gpu_str(&snap->gpus[i], GPUCTL_F_PCI_BUS_ID);
		struct pci_addr have;

		if (bus && parse_pci(bus, strlen(bus), &have) && pci_equal(&have, &want)) {
			*ret = i;
			return 0;
		}
	}
	return ctx_error(ctx, -EINVAL, "'%s': no GPU at PCI bus id %08X:%02X:%02X.%X", q,
	                 want.domain, want.bus, want.device, want.function);
}

static int resolve_uuid(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap, const char *e,
                        size_t len, const char *q, size_t *ret)
{
	bool prefixed = has_prefix_ci(e, len, "GPU-");
	const char *body = prefixed ? e + 4 : e;
	size_t blen = prefixed ? len - 4 : len;
	size_t hex = 0, n_match = 0, first = 0;
	size_t matches[AMBIGUOUS_LIST];

	for (size_t i = 0; i < blen; i++) {
		if (isxdigit((unsigned char)body[i]))
			hex++;
		else if (body[i] != '-')
			return ctx_error(ctx, -EINVAL, "'%s': not a GPU index, UUID or PCI bus id",
			                 q);
	}
	if (hex == 0)
		return ctx_error(ctx, -EINVAL, "'%s': no UUID digits given", q);
	if (!prefixed && hex < UUID_MIN_HEX_BARE)
		return ctx_error(ctx, -EINVAL,
		                 "'%s': too short for a UUID prefix (give at least %d hex digits, "
		                 "or write GPU-%s)",
		                 q, UUID_MIN_HEX_BARE, q);

	for (size_t i = 0; i < snap->n_gpus; i++) {
		const char *u = gpuctl_gpu_str(&snap->gpus[i], GPUCTL_F_UUID);

		if (!u)
			continue;
		if (has_prefix_ci(u, strlen(u), "GPU-"))
			u += 4;
		if (strlen(u) < blen || strncasecmp(u, body, blen) != 0)
			continue;
		if (strlen(u) == blen) { /* the full UUID: exact, whatever else shares a prefix */
			*ret = i;
			return 0;
		}
		if (n_match < AMBIGUOUS_LIST)
			matches[n_match] = i;
		if (n_match == 0)
			first = i;
		n_match++;
	}
	if (n_match == 1) {
		*ret = first;
		return 0;
	}
	if (n_match == 0)
		return ctx_error(ctx, -EINVAL, "'%s': no GPU has a UUID starting with that", q);

	char list[AMBIGUOUS_LIST * 24] = "";
	size_t off = 0;
	for (size_t i = 0; i < n_match && i < AMBIGUOUS_LIST; i++) {
		int w = snprintf(list + off, sizeof(list) - off, "%s%zu", i ? ", " : "",
		                 matches[i]);
		if (w < 0 || (size_t)w >= sizeof(list) - off)
			break;
		off += (size_t)w;
	}
	return ctx_error(ctx, -EINVAL, "'%s' matches %zu GPUs (%s%s): give more of the UUID", q,
	                 n_match, list, n_match > AMBIGUOUS_LIST ? ", ..." : "");
}

static int resolve_one(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap, const char *e,
                       size_t len, size_t *ret)
{
	char q[QUOTE_MAX + 4];
	bool digits = true;

	quote_text(q, sizeof(q), e, len, QUOTE_MAX);
	if (len > ENTRY_MAX)
		return ctx_error(ctx, -EINVAL, "'%s': too long for a GPU id", q);
	for (size_t i = 0; i < len; i++)
		if (!isdigit((unsigned char)e[i]))
			digits = false;
	if (digits)
		return resolve_index(ctx, snap, e, len, q, ret);
	if (has_prefix_ci(e, len, "MIG-"))
		return ctx_error(ctx, -EINVAL,
		                 "'%s': is a MIG device UUID, not a GPU id; name its GPU instead",
		                 q);
	if (memchr(e, ':', len))
		return resolve_pci(ctx, snap, e, len, q, ret);
	return resolve_uuid(ctx, snap, e, len, q, ret);
}

/* "N-M" with digits on both sides of its one dash: the first index and the dash. */
static const char *range_dash(const char *e, size_t len)
{
	const char *dash = memchr(e, '-', len);

	if (!dash || dash == e || dash == e + len - 1)
		return NULL;
	for (const char *c = e; c < e + len; c++)
		if (c != dash && !isdigit((unsigned char)*c))
			return NULL;
	return dash;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

int gpuctl_ids_resolve(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap, const char *ids,
                       size_t **ret_indices, size_t *ret_count)
{
	_cleanup_free_ size_t *out = NULL;
	_cleanup_free_ bool *seen = NULL;
	size_t n_out = 0, n_entries = 1, pos = 0;
	const char *p;

	if (!snap || !ids || !ret_indices || !ret_count)
		return ctx_error(ctx, -EINVAL, "invalid arguments");

	for (p = ids; *p; p++)
		if (*p == ',')
			n_entries++;
	out = calloc(n_entries > snap->n_gpus ? n_entries : snap->n_gpus, sizeof(*out));
	seen = calloc(snap->n_gpus ? snap->n_gpus : 1, sizeof(*seen));
	if (!out || !seen)
		return ctx_error(ctx, -ENOMEM, "out of memory");

	p = ids;
	for (;;) {
		const char *end = strchr(p, ',');
		const char *s = p, *e = end ? end : p + strlen(p);
		size_t idx = 0; /* written by resolve_one on success */
		int r;

		pos++;
		while (s < e && is_blank(*s))
			s++;
		while (e > s && is_blank(e[-1]))
			e--;
		if (s == e) {
			if (n_entries == 1)
				return ctx_error(ctx, -EINVAL, "no GPU ids given");
			char q[QUOTE_MAX + 4];

			quote_text(q, sizeof(q), ids, strlen(ids), QUOTE_MAX);
			return ctx_error(ctx, -EINVAL,
			                 "'%s': entry %zu of the GPU id list is empty", q, pos);
		}
		const char *dash = range_dash(s, (size_t)(e - s));
		size_t hi;

		if (dash) {
			char q[QUOTE_MAX + 4];

			quote_text(q, sizeof(q), s, (size_t)(e - s), QUOTE_MAX);
			r = resolve_index(ctx, snap, s, (size_t)(dash - s), q, &idx);
			if (r >= 0)
				r = resolve_index(ctx, snap, dash + 1, (size_t)(e - dash - 1), q,
				                  &hi);
			if (r >= 0 && hi < idx)
				r = ctx_error(ctx, -EINVAL,
				              "'%s': range goes backwards (N-M needs N <= M)", q);
		} else {
			r = resolve_one(ctx, snap, s, (size_t)(e - s), &idx);
			hi = idx;
		}
		if (r < 0)
			return r;
		for (; idx <= hi; idx++)
			if (!seen[idx]) {
				seen[idx] = true;
				out[n_out++] = idx;
			}
		if (!end)
			break;
		p = end + 1;
	}
	*ret_indices = TAKE_PTR(out);
	*ret_count = n_out;
	return 0;
}
