// SPDX-License-Identifier: MIT
/*
 * report-args.c: `gpuctl report`'s time and grouping arguments (report-args.h).
 *
 * Decisions:
 * - A date or time without an offset is UTC, not local time: `--by day` groups by UTC date, and
 *   a window written the same way means the same thing on every machine and in every test. An
 *   offset (Z, +02:00) says otherwise.
 * - The calendar is checked (month lengths, leap years); years 1970-9999; no leap second.
 * - Relative times are whole numbers with one unit; "-0d" is now. The number is bounded (no
 *   overflow: at most 100 years back).
 * - The civil date to days conversion is our own (Howard Hinnant's days_from_civil algorithm,
 *   described in "chrono-Compatible Low-Level Date Algorithms"), not timegm(), which depends on
 *   the C library's time zone database and may normalise a 31 February instead of refusing it.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "gpuctl/ledger.h"
#include "parse.h"
#include "report-args.h"

/* Exactly n digits (parse_dec: no sign or blank), as an int. */
static bool digits(const char *s, int n, int *ret)
{
	uint64_t v;

	if (!parse_dec(s, (size_t)n, 9999, &v))
		return false;
	*ret = (int)v;
	return true;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
	int64_t era;
	unsigned yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = (unsigned)(y - era * 400);
	doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

static int month_days(int y, int m)
{
	static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

	return m == 2 && leap ? 29 : days[m - 1];
}

static int parse_relative(const char *s, double now, double *ret_t, const char **ret_why)
{
	static const struct {
		char unit;
		double seconds;
	} units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}, {'w', 7 * 86400}};
	uint64_t n = 0;
	size_t i = 1;

	for (; s[i] >= '0' && s[i] <= '9'; i++) {
		n = n * 10 + (uint64_t)(s[i] - '0');
		if (n > 100ULL * 366 * 86400) {
			*ret_why = "too far back";
			return -EINVAL;
		}
	}
	if (i == 1 || !s[i] || s[i + 1]) {
		*ret_why = "expected -N followed by one of s, m, h, d, w (-7d, -24h)";
		return -EINVAL;
	}
	for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++)
		if (units[u].unit == s[i]) {
			if ((double)n * units[u].seconds > 100.0 * 366 * 86400) {
				*ret_why = "too far back";
				return -EINVAL;
			}
			*ret_t = now - (double)n * units[u].seconds;
			return 0;
		}
	*ret_why = "unknown unit (expected s, m, h, d or w)";
	return -EINVAL;
}

/* "", "Z", "+HH:MM" or "-HH:MM" into seconds east of UTC. */
static int parse_offset(const char *s, int *ret_off, const char **ret_why)
{
	int h, m;

	if (!s[0] || (s[0] == 'Z' && !s[1])) {
		*ret_off = 0;
		return 0;
	}
	if ((s[0] != '+' && s[0] != '-') || strlen(s) != 6 || !digits(s + 1, 2, &h) ||
	    s[3] != ':' || !digits(s + 4, 2, &m) || h > 23 || m > 59) {
		*ret_why =
		        "expected YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS], optionally with Z or +HH:MM";
		return -EINVAL;
	}
	*ret_off = (s[0] == '-' ? -1 : 1) * (h * 3600 + m * 60);
	return 0;
}

static int parse_iso(const char *s, double *ret_t, const char **ret_why)
{
	static const char *const form =
	        "expected YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS], optionally with Z or +HH:MM";
	int y, mo, d, h = 0, mi = 0, sec = 0, off, r;
	const char *p = s + 10;

	if (strlen(s) < 10 || !digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) ||
	    s[7] != '-' || !digits(s + 8, 2, &d)) {
		*ret_why = form;
		return -EINVAL;
	}
	if ((p[0] == 'T' || p[0] == ' ') && p[1]) {
		if (!digits(p + 1, 2, &h) || p[3] != ':' || !digits(p + 4, 2, &mi)) {
			*ret_why = form;
			return -EINVAL;
		}
		p += 6;
		if (p[0] == ':') {
			if (!digits(p + 1, 2, &sec)) {
				*ret_why = form;
				return -EINVAL;
			}
			p += 3;
		}
	}
	if ((r = parse_offset(p, &off, ret_why)) < 0)
		return r;
	if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > month_days(y, mo)) {
		*ret_why = "no such date";
		return -EINVAL;
	}
	if (h > 23 || mi > 59 || sec > 59) {
		*ret_why = "no such time of day";
		return -EINVAL;
	}
	*ret_t = (double)(days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 +
	                  mi * 60 + sec - off);
	return 0;
}

int report_parse_time(const char *s, double now, double *ret_t, const char **ret_why)
{
	*ret_why = "";
	if (!s || !s[0]) {
		*ret_why = "empty";
		return -EINVAL;
	}
	if (strcmp(s, "now") == 0) {
		*ret_t = now;
		return 0;
	}
	if (s[0] == '-')
		return parse_relative(s, now, ret_t, ret_why);
	return parse_iso(s, ret_t, ret_why);
}

int report_parse_by(const char *s, int *ret_by)
{
	for (int by = 0; by < GPUCTL_LEDGER_BY_MAX_; by++)
		if (s && strcmp(s, gpuctl_ledger_by_name(by)) == 0) {
			*ret_by = by;
			return 0;
		}
	return -EINVAL;
}
