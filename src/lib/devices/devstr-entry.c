// SPDX-License-Identifier: MIT
/*
 * devstr-entry.c: the entries of the ','-separated lists that name devices (CUDA_VISIBLE_DEVICES,
 * NVIDIA_VISIBLE_DEVICES, SLURM_*_GPUS): splitting, case-insensitive comparing, digits.
 *
 * Decisions:
 * - Blanks around an entry are ignored (docs/device-strings.md): the six isspace() characters
 *   of the C locale, tested without a locale.
 * - Numbers are read digit by digit with an overflow bound, never with atoi or a locale.
 */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "devices-internal.h"

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Next ','-separated entry of *p, blanks trimmed, into *ret_s and *ret_len. Advances *p past the
 * entry (NULL after the last one). */
void devstr_next_entry(const char **p, const char **ret_s, size_t *ret_len)
{
	const char *s = *p, *end = strchr(s, ',');
	const char *e = end ? end : s + strlen(s);

	*p = end ? end + 1 : NULL;
	while (s < e && is_blank(*s))
		s++;
	while (e > s && is_blank(e[-1]))
		e--;
	*ret_s = s;
	*ret_len = (size_t)(e - s);
}

bool devstr_has_prefix_ci(const char *s, size_t len, const char *prefix)
{
	size_t n = strlen(prefix);

	return len >= n && strncasecmp(s, prefix, n) == 0;
}

bool devstr_eq_ci(const char *s, size_t len, const char *full)
{
	return full && strlen(full) == len && strncasecmp(s, full, len) == 0;
}

bool devstr_all_digits(const char *s, size_t len)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isdigit((unsigned char)s[i]))
			return false;
	return true;
}

/* Decimal digits s[0..len) to a value; false on overflow past max. */
bool devstr_digits_value(const char *s, size_t len, size_t max, size_t *ret)
{
	size_t v = 0;

	for (size_t i = 0; i < len; i++) {
		size_t d = (size_t)(s[i] - '0');

		if (v > (max - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*ret = v;
	return true;
}
