/* SPDX-License-Identifier: MIT */
/*
 * parse.h: pure parsers for the arguments of `gpuctl select` and `gpuctl run` (sizes, counts,
 * percentages) and for the Linux cpulists NVML gives as CPU affinity. No I/O, no globals.
 * Part of libgpuctl's objects (the configuration file uses parse_size/parse_percent) but not of
 * its exports: libgpuctl.sym exports gpuctl_* only. The CLI, fuzz/fuzz-size.c and the unit tests
 * reach it through gpuctl_static with src/lib on their include path.
 */
#ifndef GPUCTL_PARSE_H
#define GPUCTL_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Parses a size: a decimal number (integer or with a fraction, "1.5") followed by a unit B,
 * KiB, MiB, GiB, TiB or K, M, G, T (binary multiples, case-insensitive), no blanks. A bare
 * number is refused unless it is 0 (a forgotten unit must not mean bytes). A fraction of a
 * byte is rounded up. Returns 0 and writes *ret_bytes, or -EINVAL (malformed, unknown unit,
 * no unit) or -ERANGE (more than 2^64-1 bytes); *why then says what is wrong (static). */
int parse_size(const char *text, uint64_t *ret_bytes, const char **why);
/* bytes as text that parse_size reads back exactly: "10 GiB", "512 MiB" or "1234 B" (the
 * largest binary unit that divides it). Returns buf. */
const char *size_exact_text(uint64_t bytes, char *buf, size_t size);

/* A decimal number in exactly s[0..n): digits only (no sign, blank, NUL or anything after),
 * at least one, of at most max. The one reader of the numbers the kernel and our own files
 * write (/proc/PID/stat, cgroup paths, lease records). false when s is not one or is larger. */
bool parse_dec(const char *s, size_t n, uint64_t max, uint64_t *ret);
/* parse_dec into a uint32_t (max UINT32_MAX). */
bool parse_dec_u32(const char *s, size_t n, uint32_t *ret);

/* Parses a decimal integer in [min, max], nothing else around it. -EINVAL or -ERANGE. */
int parse_uint(const char *text, unsigned long min, unsigned long max, unsigned long *ret_value);

/* Parses a number of seconds: decimal digits (at most 9), optionally a '.' and at least one
 * more digit ("5", "0.5"), nothing else (no sign, exponent or blank), in [min, max].
 * -EINVAL (malformed) or -ERANGE. Used for --interval and -d. */
int parse_seconds(const char *text, double min, double max, double *ret_seconds);

/* Parses a bound in seconds that can be switched off: "off" or a number of seconds as
 * parse_seconds reads it, 0 to max; "off" and 0 both give 0 (no bound). -EINVAL (malformed:
 * a sign, an exponent, blanks, another word) or -ERANGE. Used for GPUCTL_NVML_TIMEOUT. */
int parse_timeout(const char *text, double max, double *ret_seconds);

/* Parses a percentage 0..100, with or without a trailing '%'. -EINVAL or -ERANGE. */
int parse_percent(const char *text, int *ret_percent);

/* Parses a duration of the configuration file (idle_warn, idle_release, max_lease_age): decimal
 * digits and one unit, s, m, h or d ("90s", "30m", "8h", "7d"), at most PARSE_DURATION_MAX
 * seconds; or a bare "0" (off). Nothing else: no blank, sign, fraction or second unit; a bare
 * number other than 0 is refused (a forgotten unit must not mean seconds). -EINVAL or -ERANGE. */
#define PARSE_DURATION_MAX (366ull * 86400)
int parse_duration(const char *text, uint64_t *ret_seconds);

/* The highest CPU number parse_cpulist accepts (a guard against absurd input). */
#define PARSE_CPULIST_MAX_CPU 65535

/* Parses a Linux cpulist ("0-15,128-143", "3", "0-3,8") into a bit array of nbits bits
 * (bits[i / 64] bit i % 64), OR-ing into what is there. Entries are N or N-M with N <= M.
 * Returns 0, -EINVAL for a malformed list (empty included), or -ERANGE when a CPU number is
 * >= nbits or > PARSE_CPULIST_MAX_CPU. On failure bits may be partly written. */
int parse_cpulist(const char *text, uint64_t *bits, size_t nbits);

/* Writes the set bits of bits[nbits] as a cpulist ("0-3,8") into buf[size], always
 * NUL-terminated; "" for no bit. Returns the length it needed (without the NUL), like
 * snprintf, so a result >= size means truncation. */
size_t format_cpulist(const uint64_t *bits, size_t nbits, char *buf, size_t size);

#endif /* GPUCTL_PARSE_H */
