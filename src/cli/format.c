// SPDX-License-Identifier: MIT
/*
 * format.c: value rendering shared by the commands.
 *
 * Decisions:
 * - The CSV spelling follows nvidia-smi's documented --query-gpu output, since scripts already
 *   parse it: memory in MiB (bytes / 2^20, truncated), power in W with two decimals, "35 %",
 *   "1410 MHz", temperature without a unit, Enabled/Disabled, Yes/No, the compute mode names,
 *   hex with uppercase digits ("0x20B010DE", 16 digits for the clocks-event mask); "[N/A]"
 *   where a value is unavailable, but "N/A" for temperature.memory and "None" for a
 *   gpu_recovery_action of 0, as nvidia-smi writes them. docs/nvidia-smi-csv.md gives the
 *   source of each field's spelling.
 * - The unit is chosen from the field's unit class, not from the header unit string, so a
 *   field added to the table with a unit class is rendered right without touching this file.
 * - JSON carries base units (bytes, mW, MHz, C, %) so no precision is lost; null = unavailable.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format.h"
#include "hostproc.h"
#include "utf8.h"

const char *format_compute_mode(int64_t mode)
{
	switch (mode) {
	case GPUCTL_COMPUTE_DEFAULT:
		return "Default";
	case GPUCTL_COMPUTE_EXCLUSIVE_THREAD:
		return "Exclusive_Thread";
	case GPUCTL_COMPUTE_PROHIBITED:
		return "Prohibited";
	case GPUCTL_COMPUTE_EXCLUSIVE_PROCESS:
		return "Exclusive_Process";
	default:
		return NULL;
	}
}

static void put(char *buf, size_t size, const char *s)
{
	snprintf(buf, size, "%s", s);
}

void format_field_smi(const struct gpuctl_gpu *gpu, enum gpuctl_field f, bool units, char *buf,
                      size_t size)
{
	const struct gpuctl_field_info *fi = gpuctl_field_info(f);
	const char *na = gpuctl_gpu_lost(gpu) ? FORMAT_LOST : FORMAT_NA;
	if (size == 0)
		return;
	if (!fi) {
		put(buf, size, FORMAT_NA);
		return;
	}
	if (f == GPUCTL_F_INDEX) {
		/* Known even for a lost GPU: it is its place in the snapshot. */
		snprintf(buf, size, "%zu", gpuctl_gpu_index(gpu));
		return;
	}
	if (fi->type == GPUCTL_FT_STR) {
		const char *s = gpuctl_gpu_str(gpu, f);
		put(buf, size, s ? s : na);
		return;
	}
	int64_t v;
	if (gpuctl_gpu_int(gpu, f, &v) < 0) {
		/* nvidia-smi writes this one unavailable value without brackets (drivers 590 to
		 * 610 on GPUs without a memory sensor: docs/nvidia-smi-csv.md) */
		put(buf, size, f == GPUCTL_F_TEMP_MEMORY && !gpuctl_gpu_lost(gpu) ? "N/A" : na);
		return;
	}
	if (f == GPUCTL_F_RECOVERY_ACTION && v == 0) {
		put(buf, size, "None"); /* nvidia-smi's word for NVML_GPU_RECOVERY_ACTION_NONE */
		return;
	}
	switch (fi->unit) {
	case GPUCTL_FU_BYTES:
		snprintf(buf, size, "%" PRId64 "%s", v / (1024 * 1024), units ? " MiB" : "");
		break;
	case GPUCTL_FU_MW:
		snprintf(buf, size, "%.2f%s", (double)v / 1000.0, units ? " W" : "");
		break;
	case GPUCTL_FU_MHZ:
		snprintf(buf, size, "%" PRId64 "%s", v, units ? " MHz" : "");
		break;
	case GPUCTL_FU_PERCENT:
		snprintf(buf, size, "%" PRId64 "%s", v, units ? " %" : "");
		break;
	case GPUCTL_FU_BOOL:
		put(buf, size, v ? "Enabled" : "Disabled");
		break;
	case GPUCTL_FU_YESNO:
		put(buf, size, v ? "Yes" : "No");
		break;
	case GPUCTL_FU_HEX:
		if (f == GPUCTL_F_CLOCKS_EVENT_REASONS)
			snprintf(buf, size, "0x%016" PRIX64, (uint64_t)v);
		else
			snprintf(buf, size, "0x%08" PRIX64, (uint64_t)v & 0xffffffffu);
		break;
	case GPUCTL_FU_ENUM: {
		const char *name = f == GPUCTL_F_COMPUTE_MODE ? format_compute_mode(v) : NULL;
		if (name)
			put(buf, size, name);
		else if (f == GPUCTL_F_PSTATE) /* nvidia-smi's spelling: P0..P15 */
			snprintf(buf, size, "P%" PRId64, v);
		else
			snprintf(buf, size, "%" PRId64, v);
		break;
	}
	case GPUCTL_FU_CELSIUS: /* nvidia-smi prints temperatures without a unit */
	case GPUCTL_FU_NONE:
	default:
		snprintf(buf, size, "%" PRId64, v);
		break;
	}
}

/* The one character of text at s (n bytes left) as a cell shows it: into *ret_out, its bytes
 * (*ret_len); returns how many bytes of s it took. */
static size_t cell_char(const unsigned char *s, size_t n, const char **ret_out, size_t *ret_len)
{
	size_t k = utf8_seq_len(s, n);

	*ret_out = (const char *)s;
	*ret_len = k;
	if (k == 0) { /* not UTF-8 */
		*ret_out = UTF8_REPLACEMENT;
		*ret_len = strlen(UTF8_REPLACEMENT);
		return 1;
	}
	if ((k == 1 && (s[0] < 0x20 || s[0] == 0x7f)) || (k == 2 && s[0] == 0xc2 && s[1] < 0xa0)) {
		*ret_out = "?"; /* C0, DEL, C1 (U+0080..U+009F): terminal controls */
		*ret_len = 1;
	}
	return k;
}

void format_cell_text(const char *text, size_t max_chars, char *buf, size_t size)
{
	const unsigned char *s = (const unsigned char *)text;
	size_t n = strlen(text), chars = 0, used = 0, keep = max_chars < 4 ? 1 : max_chars - 3;
	const char *out;
	size_t len;

	if (!size)
		return;
	for (size_t i = 0; i < n; chars++)
		i += cell_char(s + i, n - i, &out, &len);
	if (chars <= max_chars)
		keep = chars;
	buf[0] = '\0';
	for (size_t i = 0, c = 0; i < n && c < keep; c++) {
		i += cell_char(s + i, n - i, &out, &len);
		if (used + len + 1 > size)
			return;
		memcpy(buf + used, out, len);
		buf[used += len] = '\0';
	}
	if (keep < chars && used + 4 <= size)
		memcpy(buf + used, "...", 4);
}

json_t *json_text(const char *s)
{
	json_t *j = json_string(s); /* NULL: not UTF-8 (or out of memory) */
	char *fixed;

	if (j || !s)
		return j;
	fixed = utf8_valid_copy(s, SIZE_MAX);
	j = fixed ? json_string(fixed) : NULL;
	free(fixed);
	return j;
}

json_t *json_string_or_null(const char *s)
{
	return s ? json_text(s) : json_null();
}

json_t *json_int_or_null(int r, int64_t v)
{
	return r >= 0 ? json_integer((json_int_t)v) : json_null();
}

json_t *format_field_json(const struct gpuctl_gpu *gpu, enum gpuctl_field f)
{
	const struct gpuctl_field_info *fi = gpuctl_field_info(f);
	if (!fi)
		return json_null();
	if (f == GPUCTL_F_INDEX)
		return json_integer((json_int_t)gpuctl_gpu_index(gpu));
	if (fi->type == GPUCTL_FT_STR)
		return json_string_or_null(gpuctl_gpu_str(gpu, f));
	int64_t v;
	if (gpuctl_gpu_int(gpu, f, &v) < 0)
		return json_null();
	switch (fi->unit) {
	case GPUCTL_FU_BOOL:
	case GPUCTL_FU_YESNO:
		return json_boolean(v != 0);
	case GPUCTL_FU_ENUM: {
		const char *name = f == GPUCTL_F_COMPUTE_MODE ? format_compute_mode(v) : NULL;
		char p[8];

		if (!name && f == GPUCTL_F_PSTATE) {
			snprintf(p, sizeof(p), "P%d", (int)v);
			name = p;
		}
		return name ? json_string(name) : json_integer((json_int_t)v);
	}
	default:
		return json_integer((json_int_t)v);
	}
}

void format_short_uuid(const char *uuid, char *buf, size_t size)
{
	if (!uuid) {
		put(buf, size, "N/A");
		return;
	}
	/* "GPU-" or "MIG-", then the first dash-separated group (8 hex digits). */
	const char *start = uuid;
	if (strncmp(uuid, "GPU-", 4) == 0 || strncmp(uuid, "MIG-", 4) == 0)
		start = uuid + 4;
	size_t n = strcspn(start, "-/");
	if (n > 8)
		n = 8;
	snprintf(buf, size, "%.*s", (int)(start - uuid + (ptrdiff_t)n), uuid);
}

int json_put_host_facts(json_t *o, uint32_t pid)
{
	struct hostproc_facts hf;
	char cmd[4096];
	bool ok = pid > 0 && hostproc_facts((pid_t)pid, &hf) == 0;

	if (ok)
		hostproc_cmdline((pid_t)pid, cmd, sizeof(cmd));
	if (json_put(o, "host_memory",
	             ok ? json_integer((json_int_t)hf.host_memory) : json_null()) < 0 ||
	    json_put(o, "cpu_percent", ok ? json_real(hf.cpu_percent) : json_null()) < 0 ||
	    json_put(o, "elapsed", ok ? json_integer((json_int_t)hf.elapsed) : json_null()) < 0 ||
	    json_put(o, "cmdline", ok && cmd[0] ? json_text(cmd) : json_null()) < 0)
		return -ENOMEM;
	return 0;
}

int json_put(json_t *obj, const char *key, json_t *value)
{
	if (!value)
		return -ENOMEM;
	return json_object_set_new(obj, key, value) == 0 ? 0 : -ENOMEM;
}

int json_print(json_t *root)
{
	if (json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0)
		return -EIO;
	if (fputc('\n', stdout) == EOF)
		return -EIO;
	return 0;
}

int json_print_line(json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;

	json_decref(o);
	if (!s)
		return -ENOMEM;
	puts(s);
	free(s);
	return 0;
}

struct text_table {
	size_t ncols;     /* cells per row */
	size_t nrows;     /* rows added */
	char **cells;     /* nrows * ncols strings, row-major, owned */
	const char **sgr; /* nrows * ncols colours (static strings or NULL), row-major */
	size_t *width;    /* widest cell per column */
};

int text_table_new(size_t ncols, struct text_table **ret_table)
{
	struct text_table *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->ncols = ncols;
	t->width = calloc(ncols ? ncols : 1, sizeof(*t->width));
	if (!t->width) {
		free(t);
		return -ENOMEM;
	}
	*ret_table = t;
	return 0;
}

void text_table_free(struct text_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->nrows * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t->sgr);
	free(t->width);
	free(t);
}

int text_table_add(struct text_table *t, const char *const *cells)
{
	char **grown = realloc(t->cells, (t->nrows + 1) * t->ncols * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	t->cells = grown;
	const char **sgr = realloc(t->sgr, (t->nrows + 1) * t->ncols * sizeof(*sgr));
	if (!sgr)
		return -ENOMEM;
	t->sgr = sgr;
	for (size_t c = 0; c < t->ncols; c++)
		sgr[t->nrows * t->ncols + c] = NULL;
	char **row = t->cells + t->nrows * t->ncols;
	for (size_t c = 0; c < t->ncols; c++) {
		row[c] = strdup(cells[c] ? cells[c] : "");
		if (!row[c]) {
			for (size_t k = 0; k < c; k++)
				free(row[k]);
			return -ENOMEM;
		}
		size_t w = strlen(row[c]);
		if (w > t->width[c])
			t->width[c] = w;
	}
	t->nrows++;
	return 0;
}

void text_table_color(struct text_table *t, size_t col, const char *sgr)
{
	if (t->nrows > 0 && col < t->ncols)
		t->sgr[(t->nrows - 1) * t->ncols + col] = sgr;
}

const char *format_verdict_sgr(int severity)
{
	switch (severity) {
	case GPUCTL_HEALTH_OK:
		return FORMAT_SGR_GREEN;
	case GPUCTL_HEALTH_WARN:
		return FORMAT_SGR_YELLOW;
	case GPUCTL_HEALTH_FAIL:
		return FORMAT_SGR_BOLD_RED;
	default:
		return NULL;
	}
}

void format_print_colored(FILE *f, bool color, const char *sgr, const char *text, int width)
{
	int len = (int)strlen(text);

	if (color && sgr && text[0])
		fprintf(f, "\033[%sm%s\033[0m", sgr, text);
	else
		fputs(text, f);
	if (width > len)
		fprintf(f, "%*s", width - len, "");
}

void text_table_print(const struct text_table *t, FILE *f, bool color)
{
	for (size_t r = 0; r < t->nrows; r++) {
		char *const *row = t->cells + r * t->ncols;
		const char *const *sgr = t->sgr + r * t->ncols;
		/* The last non-empty cell ends the line: no trailing blanks. */
		size_t last = t->ncols;
		while (last > 0 && row[last - 1][0] == '\0')
			last--;
		for (size_t c = 0; c < last; c++) {
			format_print_colored(f, color, sgr[c], row[c],
			                     c + 1 < last ? (int)t->width[c] + 2 : 0);
		}
		fputc('\n', f);
	}
}

void format_duration(uint64_t s, char *buf, size_t size)
{
	if (s < 120)
		snprintf(buf, size, "%" PRIu64 "s", s);
	else if (s < 2 * 3600)
		snprintf(buf, size, "%" PRIu64 "m", s / 60);
	else if (s < 2 * 86400)
		snprintf(buf, size, "%" PRIu64 "h", s / 3600);
	else
		snprintf(buf, size, "%" PRIu64 "d", s / 86400);
}

void format_age(uint64_t start, char *buf, size_t size)
{
	time_t now = time(NULL);
	if (start == 0 || now < 0 || (uint64_t)now < start) {
		snprintf(buf, size, "-");
		return;
	}
	format_duration((uint64_t)now - start, buf, size);
}

/* format_bytes with sep between the number and the unit. */
static void bytes_text(uint64_t bytes, const char *sep, char *buf, size_t size)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)bytes;
	size_t u = 0;
	while (u + 1 < sizeof(units) / sizeof(units[0]) && v >= 1024) {
		v /= 1024;
		u++;
	}
	if (u == 0 || v == (double)(uint64_t)v)
		snprintf(buf, size, "%" PRIu64 "%s%s", (uint64_t)v, sep, units[u]);
	else
		snprintf(buf, size, "%.1f%s%s", v, sep, units[u]);
}

void format_bytes(uint64_t bytes, char *buf, size_t size)
{
	bytes_text(bytes, " ", buf, size);
}

void format_bytes_compact(uint64_t bytes, char *buf, size_t size)
{
	bytes_text(bytes, "", buf, size);
}

void format_wait_request(const struct gpuctl_wait_entry *w, char *buf, size_t size)
{
	size_t n;

	if (!w->parsed) {
		snprintf(buf, size, "? (unreadable ticket)");
		return;
	}
	if (w->mig_profile)
		snprintf(buf, size, "%u MIG %s", w->count, w->mig_profile);
	else
		snprintf(buf, size, "%u GPU%s", w->count, w->count == 1 ? "" : "s");
#define ADD(...)                                                                                   \
	do {                                                                                       \
		n = strlen(buf);                                                                   \
		if (n < size)                                                                      \
			snprintf(buf + n, size - n, __VA_ARGS__);                                  \
	} while (0)
	if (w->only)
		ADD(", only %s", w->only);
	if (w->exclude)
		ADD(", exclude %s", w->exclude);
	if (w->numa_node >= 0)
		ADD(", numa %d", w->numa_node);
	if (w->min_free_mem)
		ADD(", min-free-mem %" PRIu64 "B", w->min_free_mem);
	if (w->max_util >= 0)
		ADD(", max-util %d%%", w->max_util);
	if (w->no_procs)
		ADD(", no-procs");
	if (w->pool)
		ADD(", pool %s", w->pool);
#undef ADD
}

/* The library's names of health concepts (src/lib/health/health.c) and the command line's. */
static const struct {
	const char *lib; /* as the library writes it */
	const char *cli; /* as gpuctl prints it */
} health_words[] = {
        {"a health watch", "gpuctl health --watch"},
        {"the strict health mode", "--strict"},
};

const char *format_health_words(const char *text, char *buf, size_t size)
{
	size_t len = 0;
	bool changed = false;

	if (!text || !size)
		return text;
	for (const char *p = text; *p;) {
		const char *put_s = p;
		size_t put_n = 1, skip = 1;

		for (size_t i = 0; i < sizeof(health_words) / sizeof(health_words[0]); i++) {
			size_t n = strlen(health_words[i].lib);

			if (strncmp(p, health_words[i].lib, n) == 0) {
				put_s = health_words[i].cli;
				put_n = strlen(put_s);
				skip = n;
				changed = true;
				break;
			}
		}
		if (len + put_n >= size)
			return text;
		memcpy(buf + len, put_s, put_n);
		len += put_n;
		p += skip;
	}
	buf[len] = '\0';
	return changed ? buf : text;
}
