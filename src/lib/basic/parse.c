// SPDX-License-Identifier: MIT
/*
 * parse.c: pure parsers for `gpuctl select` / `gpuctl run` arguments, the configuration file's
 * sizes and percentages (config.c), and cpulists. In libgpuctl, not exported (libgpuctl.sym),
 * except the size parser's public face gpuctl_size_parse, so that bindings (python/gpuctl)
 * accept exactly the sizes the command line accepts instead of a second grammar.
 *
 * Decisions:
 * - Sizes are binary (KiB = 1024 B), as nvidia-smi and NVML report memory in MiB; the short
 *   forms K/M/G/T mean the same (like numfmt --from=iec, JVM -Xmx, nvsim). SI spellings (GB)
 *   are refused rather than guessed, and so is a bare number other than 0: "--min-free-mem 10"
 *   meaning ten bytes would silently select everything.
 * - Fractions are computed exactly in 128-bit arithmetic and rounded up to whole bytes: the
 *   option asks for "at least" this much.
 * - Numbers are parsed digit by digit (no strtoul: it accepts blanks, signs and "0x").
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <gpuctl/gpuctl.h>

#include "parse.h"
#include "util.h"

__extension__ typedef unsigned __int128 u128;

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Reads the digits at *p into *ret; -ERANGE past UINT64_MAX. */
static int read_u64(const char **p, uint64_t *ret)
{
	uint64_t v = 0;
	const char *s = *p;
	if (!is_digit(*s))
		return -EINVAL;
	for (; is_digit(*s); s++) {
		unsigned d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	*p = s;
	*ret = v;
	return 0;
}

/* The unit's binary shift, or -1. A unit is B (bytes), or K, M, G, T (either case) alone, with
 * "iB" (KiB, GiB) or with "B"/"b" (KB, GB): GB is read as GiB, as docker, Slurm and free(1)
 * read it and as GPU memory is sized. Anything else ("Gib", "GiBB", "kiB ") is no unit. */
static int size_unit(const char *u)
{
	static const char prefixes[] = "KMGT";
	const char *at;

	if (strcasecmp(u, "B") == 0)
		return 0;
	if (!u[0] || !(at = strchr(prefixes, toupper((unsigned char)u[0]))))
		return -1;
	if (u[1] == '\0' || streq(u + 1, "iB") || streq(u + 1, "B") || streq(u + 1, "b"))
		return 10 * (int)(at - prefixes + 1);
	return -1;
}

const char *size_exact_text(uint64_t bytes, char *buf, size_t size)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	size_t u = 0;

	while (u + 1 < ELEMENTSOF(units) && bytes >= 1024 && bytes % 1024 == 0) {
		bytes /= 1024;
		u++;
	}
	(void)snprintf(buf, size, "%" PRIu64 " %s", bytes, units[u]);
	return buf;
}

int parse_size(const char *text, uint64_t *ret_bytes, const char **why)
{
	const char *p = text;
	uint64_t ip = 0;
	u128 frac = 0, scale = 1;
	size_t nfrac = 0;
	int r;

	*why = "not a size (a number and a unit: B, KiB, MiB, GiB, TiB; G and GB mean GiB)";
	if (!is_digit(*p) && *p != '.')
		return -EINVAL;
	if (is_digit(*p)) {
		r = read_u64(&p, &ip);
		if (r == -ERANGE) {
			*why = "too large";
			return r;
		}
	}
	if (*p == '.') {
		p++;
		if (!is_digit(*p))
			return -EINVAL;
		for (; is_digit(*p); p++) {
			/* Beyond 30 decimals nothing changes at byte resolution (2^40 < 10^13). */
			if (nfrac < 30) {
				frac = frac * 10 + (unsigned)(*p - '0');
				scale *= 10;
				nfrac++;
			}
		}
	} else if (p == text) {
		return -EINVAL;
	}
	if (!*p) {
		if (ip == 0 && frac == 0) {
			*ret_bytes = 0;
			return 0;
		}
		*why = "needs a unit: B, KiB, MiB, GiB or TiB";
		return -EINVAL;
	}
	int shift = size_unit(p);
	if (shift >= 0) {
		u128 mult = (u128)1 << shift;
		u128 whole = (u128)ip * mult;
		u128 part = (frac * mult + scale - 1) / scale; /* rounded up */
		u128 total = whole + part;
		if (total > UINT64_MAX) {
			*why = "too large";
			return -ERANGE;
		}
		*ret_bytes = (uint64_t)total;
		return 0;
	}
	*why = "unknown unit (use B, KiB, MiB, GiB or TiB; K, M, G, T and KB, MB, GB, TB mean the "
	       "same)";
	return -EINVAL;
}

bool parse_dec(const char *s, size_t n, uint64_t max, uint64_t *ret)
{
	uint64_t v = 0;

	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		uint64_t d = (uint64_t)(s[i] - '0');
		if (d > max || v > (max - d) / 10) /* v * 10 + d > max */
			return false;
		v = v * 10 + d;
	}
	*ret = v;
	return true;
}

bool parse_dec_u32(const char *s, size_t n, uint32_t *ret)
{
	uint64_t v;

	if (!parse_dec(s, n, UINT32_MAX, &v))
		return false;
	*ret = (uint32_t)v;
	return true;
}

int parse_uint(const char *text, unsigned long min, unsigned long max, unsigned long *ret_value)
{
	const char *p = text;
	uint64_t v;
	int r = read_u64(&p, &v);
	if (r < 0)
		return r;
	if (*p)
		return -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*ret_value = (unsigned long)v;
	return 0;
}

int parse_seconds(const char *text, double min, double max, double *ret_seconds)
{
	size_t ni = strspn(text, "0123456789");
	size_t nf = 0;
	double v;

	if (ni == 0)
		return -EINVAL;
	if (text[ni] == '.') {
		nf = strspn(text + ni + 1, "0123456789");
		if (nf == 0)
			return -EINVAL;
		nf++;
	}
	if (text[ni + nf] != '\0' || ni > 9)
		return -EINVAL;
	v = strtod(text, NULL); /* only digits and one '.': strtod reads all of it */
	if (!(v >= min && v <= max))
		return -ERANGE;
	*ret_seconds = v;
	return 0;
}

int parse_timeout(const char *text, double max, double *ret_seconds)
{
	if (strcmp(text, "off") == 0) {
		*ret_seconds = 0;
		return 0;
	}
	return parse_seconds(text, 0, max, ret_seconds);
}

int parse_percent(const char *text, int *ret_percent)
{
	const char *p = text;
	uint64_t v;
	int r = read_u64(&p, &v);
	if (r < 0)
		return r;
	if (*p == '%')
		p++;
	if (*p)
		return -EINVAL;
	if (v > 100)
		return -ERANGE;
	*ret_percent = (int)v;
	return 0;
}

int parse_duration(const char *text, uint64_t *ret_seconds)
{
	static const struct {
		char unit;
		uint64_t seconds;
	} units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}};
	const char *p = text;
	uint64_t v;
	int r = read_u64(&p, &v);

	if (r < 0)
		return r;
	if (v == 0 && p - text == 1 && !*p) {
		*ret_seconds = 0; /* a bare 0: off */
		return 0;
	}
	if (!p[0] || p[1])
		return -EINVAL; /* one unit letter, nothing after it */
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (*p != units[i].unit)
			continue;
		if (v > PARSE_DURATION_MAX / units[i].seconds)
			return -ERANGE;
		*ret_seconds = v * units[i].seconds;
		return 0;
	}
	return -EINVAL;
}

int parse_cpulist(const char *text, uint64_t *bits, size_t nbits)
{
	const char *p = text;
	if (!*p)
		return -EINVAL;
	for (;;) {
		uint64_t a, b;
		int r = read_u64(&p, &a);
		if (r < 0)
			return r == -ERANGE ? -ERANGE : -EINVAL;
		b = a;
		if (*p == '-') {
			p++;
			r = read_u64(&p, &b);
			if (r < 0)
				return r == -ERANGE ? -ERANGE : -EINVAL;
			if (b < a)
				return -EINVAL;
		}
		if (b > PARSE_CPULIST_MAX_CPU || b >= nbits)
			return -ERANGE;
		for (uint64_t c = a; c <= b; c++)
			bits[c / 64] |= UINT64_C(1) << (c % 64);
		if (!*p)
			return 0;
		if (*p != ',')
			return -EINVAL;
		p++;
	}
}

/* Appends text to buf at *len, counting what would have been written. */
static void append(char *buf, size_t size, size_t *len, const char *text)
{
	size_t n = strlen(text);
	if (*len < size) {
		size_t room = size - 1 - *len;
		size_t k = n < room ? n : room;
		memcpy(buf + *len, text, k);
		buf[*len + k] = '\0';
	}
	*len += n;
}

static void append_uint(char *buf, size_t size, size_t *len, size_t v)
{
	char tmp[24];
	size_t i = sizeof(tmp) - 1;
	tmp[i] = '\0';
	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	append(buf, size, len, tmp + i);
}

static bool bit(const uint64_t *bits, size_t i)
{
	return bits[i / 64] >> (i % 64) & 1;
}

size_t format_cpulist(const uint64_t *bits, size_t nbits, char *buf, size_t size)
{
	size_t len = 0;
	if (size)
		buf[0] = '\0';
	for (size_t i = 0; i < nbits; i++) {
		if (i % 64 == 0 && bits[i / 64] == 0) {
			i += 63; /* a whole empty word (65,536 CPUs are 1,024 words) */
			continue;
		}
		if (!bit(bits, i))
			continue;
		size_t j = i;
		while (j + 1 < nbits && bit(bits, j + 1))
			j++;
		if (len)
			append(buf, size, &len, ",");
		append_uint(buf, size, &len, i);
		if (j > i) {
			append(buf, size, &len, "-");
			append_uint(buf, size, &len, j);
		}
		i = j;
	}
	return len;
}

int gpuctl_size_parse(const char *text, uint64_t *ret_bytes, const char **why)
{
	const char *w = "no size given";
	uint64_t v;
	int r = text ? parse_size(text, &v, &w) : -EINVAL;

	if (r < 0) {
		if (why)
			*why = w;
		return r;
	}
	if (ret_bytes)
		*ret_bytes = v;
	return 0;
}
