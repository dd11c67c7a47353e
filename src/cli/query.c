// SPDX-License-Identifier: MIT
/*
 * query.c: parsers for --query and --format (pure; fuzzed by fuzz/fuzz-query.c).
 *
 * Decisions:
 * - Names are split on ',' by hand (no strtok): an empty entry ("a,,b", a trailing comma) is
 *   an error, because nvidia-smi rejects it too and a silent skip would shift columns.
 * - Names are kept as typed, so the CSV header echoes the user's spelling, as nvidia-smi does.
 * - Suggestions for an unknown name are cheap: a prefix match or an edit distance of at most 2
 *   over the ~50 field names, computed with two fixed rows (no VLA, no allocation).
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "query.h"

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* Trims blanks around [*start, *end). */
static void trim(const char **start, const char **end)
{
	while (*start < *end && is_blank(**start))
		(*start)++;
	while (*end > *start && is_blank((*end)[-1]))
		(*end)--;
}

/* The next item of a comma-separated list at *p, trimmed: [*ret_start, *ret_end). *p moves
 * past the item's comma, or becomes NULL after the last item. */
static void next_item(const char **p, const char **ret_start, const char **ret_end)
{
	const char *comma = strchr(*p, ',');

	*ret_start = *p;
	*ret_end = comma ? comma : *p + strlen(*p);
	trim(ret_start, ret_end);
	*p = comma ? comma + 1 : NULL;
}

static char *dup_range(const char *start, const char *end)
{
	size_t n = (size_t)(end - start);
	char *s = malloc(n + 1);
	if (!s)
		return NULL;
	memcpy(s, start, n);
	s[n] = '\0';
	return s;
}

static int set_bad(char **ret_bad, const char *start, const char *end)
{
	if (!ret_bad)
		return 0;
	char *s = dup_range(start, end);
	if (!s)
		return -ENOMEM;
	*ret_bad = s;
	return 0;
}

void query_free(struct query *q)
{
	if (!q)
		return;
	for (size_t i = 0; i < q->n; i++)
		free(q->cols[i].name);
	free(q->cols);
	free(q);
}

int query_parse(const char *text, struct query **ret_query, char **ret_bad)
{
	if (!text)
		return -EINVAL;
	struct query *q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	int r = 0;
	const char *p = text;
	while (p) {
		const char *start, *end;
		next_item(&p, &start, &end);
		size_t len = (size_t)(end - start);
		if (len == 0 || len > QUERY_MAX_NAME || q->n >= QUERY_MAX_COLUMNS) {
			r = len == 0 ? -EINVAL : -E2BIG;
			int k = set_bad(ret_bad, start, len > QUERY_MAX_NAME ? start + 32 : end);
			if (k < 0)
				r = k;
			goto fail;
		}
		char *name = dup_range(start, end);
		if (!name) {
			r = -ENOMEM;
			goto fail;
		}
		int id = gpuctl_field_lookup(name);
		if (id < 0 && strcasecmp(name, "driver_version") == 0)
			id = QUERY_DRIVER_VERSION;
		else if (id < 0 && strcasecmp(name, "timestamp") == 0)
			id = QUERY_TIMESTAMP;
		else if (id < 0 && strcasecmp(name, "count") == 0)
			id = QUERY_COUNT;
		if (id < 0) {
			if (ret_bad)
				*ret_bad = name;
			else
				free(name);
			r = -EINVAL;
			goto fail;
		}
		struct query_column *cols = realloc(q->cols, (q->n + 1) * sizeof(*cols));
		if (!cols) {
			free(name);
			r = -ENOMEM;
			goto fail;
		}
		q->cols = cols;
		q->cols[q->n].field = (enum gpuctl_field)id;
		q->cols[q->n].name = name;
		q->n++;
	}
	*ret_query = q;
	return 0;
fail:
	query_free(q);
	return r;
}

unsigned query_snap_flags(const struct query *q)
{
	unsigned flags = 0;
	for (size_t i = 0; q && i < q->n; i++) {
		const struct gpuctl_field_info *fi = gpuctl_field_info(q->cols[i].field);
		if (fi)
			flags |= fi->snap_flag;
	}
	return flags;
}

#define DIST_MAX_LEN 64

/* Case-insensitive Levenshtein distance; strings longer than DIST_MAX_LEN count as far. */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > DIST_MAX_LEN || lb > DIST_MAX_LEN)
		return (size_t)-1;
	size_t prev[DIST_MAX_LEN + 1], cur[DIST_MAX_LEN + 1];
	for (size_t j = 0; j <= lb; j++)
		prev[j] = j;
	for (size_t i = 1; i <= la; i++) {
		cur[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t cost =
			        tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 1])
			                ? 0
			                : 1;
			size_t best = prev[j - 1] + cost;
			if (prev[j] + 1 < best)
				best = prev[j] + 1;
			if (cur[j - 1] + 1 < best)
				best = cur[j - 1] + 1;
			cur[j] = best;
		}
		memcpy(prev, cur, (lb + 1) * sizeof(prev[0]));
	}
	return prev[lb];
}

static bool is_close(const char *name, const char *candidate)
{
	size_t n = strlen(name);
	if (n >= 3 && strncasecmp(candidate, name, n) == 0)
		return true;
	if (n < 4)
		return false;
	/* The distance is at least the difference in length: skip the quadratic work. */
	size_t m = strlen(candidate);
	if ((n > m ? n - m : m - n) > 2)
		return false;
	return edit_distance(name, candidate) <= 2;
}

size_t query_suggest(const char *name, char *buf, size_t size)
{
	size_t found = 0, used = 0;
	if (size == 0)
		return 0;
	buf[0] = '\0';
	/* Show nvidia-smi's spelling (what most users know) unless they typed one of our keys. */
	bool dotted = strchr(name, '_') == NULL;
	for (unsigned id = 0; id < GPUCTL__F_COUNT && found < 4; id++) {
		const struct gpuctl_field_info *fi = gpuctl_field_info((enum gpuctl_field)id);
		if (!fi)
			continue;
		const char *hit = NULL;
		if (fi->smi_name && is_close(name, fi->smi_name))
			hit = dotted ? fi->smi_name : fi->key;
		else if (is_close(name, fi->key))
			hit = dotted && fi->smi_name ? fi->smi_name : fi->key;
		if (!hit)
			continue;
		size_t need = strlen(hit) + (found ? 2 : 0);
		if (used + need + 1 > size)
			break;
		if (found) {
			memcpy(buf + used, ", ", 2);
			used += 2;
		}
		memcpy(buf + used, hit, strlen(hit));
		used += strlen(hit);
		buf[used] = '\0';
		found++;
	}
	return found;
}

static const struct {
	const char *name;
	enum app_field id;
} app_names[] = {
        {"pid", APP_PID},
        {"process_name", APP_PROCESS_NAME},
        {"name", APP_PROCESS_NAME},
        {"used_gpu_memory", APP_USED_MEMORY},
        {"used_memory", APP_USED_MEMORY},
        {"gpu_uuid", APP_GPU_UUID},
        {"gpu_bus_id", APP_GPU_BUS_ID},
        {"gpu_name", APP_GPU_NAME},
};

const char *app_field_header(enum app_field f)
{
	static const char *const headers[APP__COUNT] = {
	        [APP_PID] = "pid",
	        [APP_PROCESS_NAME] = "process_name",
	        [APP_USED_MEMORY] = "used_gpu_memory [MiB]",
	        [APP_GPU_UUID] = "gpu_uuid",
	        [APP_GPU_BUS_ID] = "gpu_bus_id",
	        [APP_GPU_NAME] = "gpu_name",
	};
	return (unsigned)f < APP__COUNT ? headers[f] : "";
}

int app_query_parse(const char *text, struct app_query **ret_query, char **ret_bad)
{
	if (!text)
		return -EINVAL;
	struct app_query *q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	int r;
	const char *p = text;
	while (p) {
		const char *start, *end;
		next_item(&p, &start, &end);
		size_t len = (size_t)(end - start);
		int id = -1;
		for (size_t i = 0; len && i < sizeof(app_names) / sizeof(app_names[0]); i++)
			if (strlen(app_names[i].name) == len &&
			    strncasecmp(app_names[i].name, start, len) == 0)
				id = (int)app_names[i].id;
		if (id < 0 || q->n >= QUERY_MAX_COLUMNS) {
			r = len > QUERY_MAX_NAME || q->n >= QUERY_MAX_COLUMNS ? -E2BIG : -EINVAL;
			int k = set_bad(ret_bad, start, len > QUERY_MAX_NAME ? start + 32 : end);
			if (k < 0)
				r = k;
			free(q);
			return r;
		}
		q->cols[q->n++] = (enum app_field)id;
	}
	*ret_query = q;
	return 0;
}

int format_parse(const char *text, struct format_spec *spec, char **ret_bad)
{
	static const struct {
		const char *word;
		enum list_format kind;
	} kinds[] = {
	        {"table", LIST_FORMAT_TABLE},
	        {"csv", LIST_FORMAT_CSV},
	        {"json", LIST_FORMAT_JSON},
	};
	if (!text)
		return -EINVAL;
	struct format_spec s = *spec;
	enum list_format given = LIST_FORMAT_DEFAULT;
	const char *p = text;
	while (p) {
		const char *start, *end;
		next_item(&p, &start, &end);
		size_t len = (size_t)(end - start);
		bool ok = false;
		if (len == 8 && strncasecmp(start, "noheader", len) == 0) {
			s.noheader = ok = true;
		} else if (len == 7 && strncasecmp(start, "nounits", len) == 0) {
			s.nounits = ok = true;
		} else {
			for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
				if (len == strlen(kinds[i].word) &&
				    strncasecmp(start, kinds[i].word, len) == 0 &&
				    (given == LIST_FORMAT_DEFAULT || given == kinds[i].kind)) {
					given = kinds[i].kind;
					ok = true;
				}
			}
		}
		if (!ok) {
			int k = set_bad(ret_bad, start, len > QUERY_MAX_NAME ? start + 32 : end);
			return k < 0 ? k : -EINVAL;
		}
	}
	if (given != LIST_FORMAT_DEFAULT)
		s.kind = given;
	*spec = s;
	return 0;
}

int groups_parse(const char *text, const char *letters, unsigned *ret_mask, char *ret_bad)
{
	size_t n_letters = strlen(letters);
	unsigned mask = 0;

	if (n_letters > 32)
		return -EINVAL;
	*ret_bad = 0;
	if (!text[0])
		return -EINVAL;
	for (const char *p = text; *p; p++) {
		const char *at = strchr(letters, *p);
		unsigned bit;

		*ret_bad = *p;
		if (!at)
			return -EINVAL;
		bit = 1u << (at - letters);
		if (mask & bit)
			return -EEXIST;
		mask |= bit;
	}
	*ret_bad = 0;
	*ret_mask = mask;
	return 0;
}

int date_time_parse(const char *text, bool *ret_date, bool *ret_time)
{
	bool d = strcmp(text, "D") == 0 || strcmp(text, "DT") == 0 || strcmp(text, "TD") == 0;
	bool t = strcmp(text, "T") == 0 || strcmp(text, "DT") == 0 || strcmp(text, "TD") == 0;

	if (!d && !t)
		return -EINVAL;
	*ret_date = d;
	*ret_time = t;
	return 0;
}
