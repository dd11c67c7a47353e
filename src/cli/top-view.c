// SPDX-License-Identifier: MIT
/*
 * top-view.c: `gpuctl top`'s model as lines of cells: the title, two lines per GPU, the process
 * list, the wait queue. The same lines make the plain-text frame (--once) and the screen.
 *
 * Decisions:
 * - A line is an array of cells (an ASCII character, an attribute, optionally a sparkline
 *   level), as wide as the screen: the screen code draws only cells, so nothing a process
 *   names itself (a command line) can move the cursor or emit an escape sequence; every byte
 *   outside printable ASCII is shown as '?'.
 * - Bars are ASCII ('|' fill, the value inside, as htop draws them) so they read the same on
 *   every terminal; attributes colour them green, yellow and red at 50% and 80%. Sparklines use
 *   the eight block elements U+2581..U+2588 where the terminal takes UTF-8, else "_.:-=+*#".
 * - A GPU's second line says who holds it, as gpuctl ps does: the holder (user, label, age),
 *   or every shared holder with its declaration and the room left, and "FOREIGN" with the
 *   processes of no lease; then its health verdict's first finding.
 * - Every line fits the width without cutting a word (issue 25): a text that does not fit
 *   keeps its words that do and ends in " ..." (put_cut). A GPU row keeps its index and
 *   verdict at any width; narrower than 80 columns its other columns go by priority (gpu_cols;
 *   the order is docs/gpuctl.1's, "top").
 * - Values of an overdue sample (m->stale_s: NVML has not answered for two intervals) are
 *   dimmed and a line says so, with the time they are from: they are the last NVML gave, not
 *   the machine now.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "idle-view.h"
#include "top.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

int top_line_init(struct top_line *l, int width)
{
	l->width = width > 0 ? width : 1;
	l->cells = calloc((size_t)l->width, sizeof(*l->cells));
	l->x = 0;
	if (!l->cells)
		return -ENOMEM;
	top_line_clear(l);
	return 0;
}

/* lines are compared with memcmp: a cell has no padding */
_Static_assert(sizeof(struct top_cell) == 3, "struct top_cell has padding");

static bool same_cell(const struct top_cell *a, const struct top_cell *b)
{
	return a->ch == b->ch && a->attr == b->attr && a->glyph == b->glyph;
}

bool top_line_diff(const struct top_cell *old, const struct top_line *l, int *ret_from, int *ret_to)
{
	int from = 0, to = l->width;

	if (!memcmp(old, l->cells, (size_t)l->width * sizeof(*old)))
		return false; /* most rows, most refreshes */
	while (from < to && same_cell(&old[from], &l->cells[from]))
		from++;
	if (from == to)
		return false;
	while (same_cell(&old[to - 1], &l->cells[to - 1]))
		to--; /* stops at the cell `from` at the latest */
	*ret_from = from;
	*ret_to = to;
	return true;
}

void top_line_free(struct top_line *l)
{
	free(l->cells);
	l->cells = NULL;
}

void top_line_clear(struct top_line *l)
{
	for (int i = 0; i < l->width; i++)
		l->cells[i] = (struct top_cell){.ch = ' '};
	l->x = 0;
}

void top_line_dim(struct top_line *l)
{
	for (int i = 0; i < l->width; i++)
		l->cells[i].attr = TOP_A_DIM;
}

bool top_stale_line(struct top_line *l, const struct top_model *m)
{
	char when[16] = "?";
	time_t t = (time_t)m->values_time;
	struct tm tm;

	top_line_clear(l);
	if (!(m->stale_s > 0))
		return false;
	if (localtime_r(&t, &tm))
		(void)strftime(when, sizeof(when), "%H:%M:%S", &tm);
	top_putf(l, TOP_A_FAIL, "NVML not answering for %.0f s - values from %s", m->stale_s, when);
	return true;
}

/* The part of text (n bytes, more than the room left) that fits with " ..." after it: up to
 * the end of its last word that does (or nothing of it, when it starts with a blank); then the
 * mark, and the line is full. When no word fits, "..." alone where it fits after a blank, else
 * nothing: no word is ever cut. */
static void put_cut(struct top_line *l, enum top_attr attr, const char *text, size_t n)
{
	size_t room = (size_t)(l->width - l->x), keep = 0;
	bool any = false;

	for (size_t i = 0; i < n && i + 4 <= room; i++)
		if (text[i] == ' ' && (i == 0 || text[i - 1] != ' ')) {
			keep = i;
			any = true;
		}
	for (size_t i = 0; i < keep; i++) {
		unsigned char c = (unsigned char)text[i];
		l->cells[l->x++] = (struct top_cell){.ch = c >= 0x20 && c < 0x7f ? (char)c : '?',
		                                     .attr = (uint8_t)attr};
	}
	if ((any || l->x == 0 || l->cells[l->x - 1].ch == ' ') &&
	    (size_t)(l->width - l->x) >= (any ? 4u : 3u)) {
		if (any)
			l->cells[l->x++] = (struct top_cell){.ch = ' '};
		for (int k = 0; k < 3; k++)
			l->cells[l->x++] = (struct top_cell){.ch = '.', .attr = TOP_A_DIM};
	}
	l->x = l->width;
}

void top_put(struct top_line *l, enum top_attr attr, const char *text)
{
	size_t n = strlen(text);

	if (l->x >= l->width)
		return;
	if (n > (size_t)(l->width - l->x)) {
		put_cut(l, attr, text, n);
		return;
	}
	for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
		char c = *p >= 0x20 && *p < 0x7f ? (char)*p : '?';
		l->cells[l->x++] = (struct top_cell){.ch = c, .attr = (uint8_t)attr};
	}
}

/* top_put as if the line ended at column end (a column's right edge). */
static void put_until(struct top_line *l, int end, enum top_attr attr, const char *text)
{
	int width = l->width;

	if (end < width)
		l->width = end > l->x ? end : l->x;
	top_put(l, attr, text);
	l->width = width;
	if (l->x > end)
		l->x = end > 0 ? end : 0;
}

void top_putf(struct top_line *l, enum top_attr attr, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	top_put(l, attr, buf);
}

/* Moves the cursor to column x (never backwards past what is written). */
static void tab(struct top_line *l, int x)
{
	while (l->x < x && l->x < l->width)
		l->cells[l->x++] = (struct top_cell){.ch = ' '};
}

/* ---- GPUs ---- */

static enum top_attr level_attr(double frac)
{
	return frac >= 0.8 ? TOP_A_FAIL : frac >= 0.5 ? TOP_A_WARN : TOP_A_OK;
}

/* "[|||||    55%]" in w columns; frac < 0: unknown ("-"). */
static void bar(struct top_line *l, int w, double frac, const char *value)
{
	int inner = w - 2, fill, vlen = (int)strlen(value);

	if (inner < 1)
		return;
	if (frac < 0)
		frac = 0;
	if (frac > 1)
		frac = 1;
	fill = (int)(frac * inner + 0.5);
	top_put(l, TOP_A_DIM, "[");
	for (int i = 0; i < inner; i++) {
		int vstart = inner - vlen;
		char c = i >= vstart && vstart >= 0 ? value[i - vstart] : i < fill ? '|' : ' ';
		char s[2] = {c, 0};
		top_put(l, i >= vstart && vstart >= 0 ? TOP_A_NONE : level_attr(frac), s);
	}
	top_put(l, TOP_A_DIM, "]");
}

static const char ascii_levels[] = "_.:-=+*#";

/* The last w samples of a ring as sparkline cells (unknown samples blank). */
static void sparkline(struct top_line *l, const struct top_model *m, const int8_t *ring, int w)
{
	for (int i = 0; i < w && l->x < l->width; i++) {
		int back = w - i; /* samples before the newest + 1 */
		struct top_cell c = {.ch = ' ', .attr = TOP_A_DIM};
		if ((size_t)back <= m->hist_len) {
			int v = ring[(m->hist_pos + TOP_HISTORY - (size_t)back) % TOP_HISTORY];
			if (v >= 0) {
				int lev = v * 8 / 101; /* 0..7 */
				c = (struct top_cell){.ch = ascii_levels[lev],
				                      .attr = (uint8_t)level_attr(v / 100.0),
				                      .glyph = (uint8_t)(lev + 1)};
			}
		}
		l->cells[l->x++] = c;
	}
}

/* The GPU row's columns at a width (docs/gpuctl.1, "top", says which go first): IDX and HLTH
 * always; the bars (UTIL MEM POWER TEMP) while each has BAR_MIN columns, the last ones going
 * first; then the UUID; then the name. */
#define BAR_MIN 8 /* a bar of 8 columns: "[" 5 cells "]" and a blank; "79.5G" fits */
#define HLTH_W  5 /* "HLTH", "FAIL", "LOST" and a blank before the edge */
#define NAME_W  14
struct gpu_cols {
	bool uuid, name; /* shown */
	int bars_x;      /* the first bar's column */
	int n_bars;      /* 0..4 */
	int bw;          /* columns per bar, its blank included */
	int hlth_x;
};

static struct gpu_cols gpu_cols(int width)
{
	struct gpu_cols c = {.uuid = true, .name = true, .bars_x = 4 + 13 + NAME_W + 1};

	if (width < c.bars_x + HLTH_W) { /* no UUID: IDX NAME HLTH */
		c.uuid = false;
		c.bars_x = 4 + NAME_W + 1;
	}
	if (width < c.bars_x + HLTH_W) { /* IDX HLTH */
		c.name = false;
		c.bars_x = 4;
	}
	int rest = width - c.bars_x - HLTH_W;
	c.n_bars = rest > 0 ? rest / BAR_MIN : 0;
	if (c.n_bars > 4)
		c.n_bars = 4;
	c.bw = c.n_bars ? rest / c.n_bars : 0;
	c.hlth_x = c.bars_x + c.n_bars * c.bw;
	return c;
}

void top_gpu_head(struct top_line *l)
{
	static const char *const bars[] = {"UTIL", "MEM", "POWER", "TEMP"};
	struct gpu_cols c = gpu_cols(l->width);

	top_line_clear(l);
	top_put(l, TOP_A_HEAD, "IDX");
	if (c.uuid) {
		tab(l, 4);
		top_put(l, TOP_A_HEAD, "UUID");
	}
	if (c.name) {
		tab(l, c.uuid ? 17 : 4);
		top_put(l, TOP_A_HEAD, "NAME");
	}
	for (int k = 0; k < c.n_bars; k++) {
		tab(l, c.bars_x + k * c.bw);
		top_put(l, TOP_A_HEAD, bars[k]);
	}
	tab(l, c.hlth_x);
	top_put(l, TOP_A_HEAD, "HLTH");
}

/* The name in at most NAME_W columns, cut only between words: without "NVIDIA ", then
 * without its first words while too long ("Tesla V100-SXM2-32GB": "V100-SXM2-32GB", "GeForce
 * RTX 4090": "RTX 4090"), the model being at the end; a single word still too long is cut. */
static void short_name(const char *name, char *buf, size_t size)
{
	if (!name)
		name = "?";
	if (strncmp(name, "NVIDIA ", 7) == 0)
		name += 7;
	while (strlen(name) > NAME_W && strchr(name, ' '))
		name = strchr(name, ' ') + 1;
	snprintf(buf, size, "%.*s", NAME_W, name);
}

/* The whole-GPU lease entry of GPU g in m->leases: its index, or -1. */
static long lease_entry(const struct top_model *m, size_t g, int *ret_mig_held)
{
	long found = -1;
	int held = 0;

	for (size_t i = 0; m->leases && i < gpuctl_lease_list_count(m->leases); i++) {
		size_t gpu;
		int mig;
		enum gpuctl_lease_state st;
		if (gpuctl_lease_list_get(m->leases, i, &gpu, &mig, &st, NULL, NULL) < 0 ||
		    gpu != g)
			continue;
		if (mig < 0)
			found = (long)i;
		else if (st == GPUCTL_LEASE_HELD || st == GPUCTL_LEASE_SHARED)
			held++;
	}
	*ret_mig_held = held;
	return found;
}

static void owner_text(const struct gpuctl_lease_owner *w, char *buf, size_t size)
{
	char age[24];

	format_age(w->start_time, age, sizeof(age));
	if (w->user)
		snprintf(buf, size, "%s", w->user);
	else
		snprintf(buf, size, "uid %" PRIu32, w->uid);
	size_t n = strlen(buf);
	if (w->label && w->label[0] && n < size)
		snprintf(buf + n, size - n, " '%s'", w->label);
	n = strlen(buf);
	if (n < size)
		snprintf(buf + n, size - n, " %s", age);
}

/* The user name of GPU g's process pid as its row shows it (the model reads it from /proc),
 * "?" when it has none. */
static const char *proc_user(const struct top_model *m, size_t g, uint32_t pid)
{
	for (size_t i = 0; i < m->n_procs; i++)
		if (m->procs[i].gpu == g && m->procs[i].pid == pid)
			return m->procs[i].user;
	return "?";
}

/* Who holds GPU g: "held by alice 'train' 3m", "shared by 2, 20 GiB left: ...", "free". */
static void holder(struct top_line *l, const struct top_model *m, size_t g)
{
	int mig_held = 0;
	long e = lease_entry(m, g, &mig_held);
	const struct gpuctl_lease_owner *owner = NULL;
	const char *reason = NULL;
	enum gpuctl_lease_state st = GPUCTL_LEASE_FREE;
	size_t gpu;
	int mig;
	char text[256];

	if (e >= 0)
		(void)gpuctl_lease_list_get(m->leases, (size_t)e, &gpu, &mig, &st, &owner, &reason);
	switch (st) {
	case GPUCTL_LEASE_HELD:
		if (owner) {
			owner_text(owner, text, sizeof(text));
			top_putf(l, TOP_A_INFO, "held by %s", text);
		} else {
			top_put(l, TOP_A_INFO, "held by unknown");
		}
		break;
	case GPUCTL_LEASE_SHARED: {
		uint64_t declared = 0, room;
		const struct gpuctl_lease_owner *const *sh = NULL;
		size_t n_sh = 0;
		char size[32];
		(void)gpuctl_lease_list_shares(m->leases, (size_t)e, &declared, &sh, &n_sh);
		room = gpuctl_lease_list_room(m->leases, (size_t)e, m->snap, &m->lreq);
		/* the room first: it is what a newcomer needs, and the holders may not fit */
		format_bytes(room, size, sizeof(size));
		top_putf(l, TOP_A_INFO, "shared by %zu, %s left:", n_sh, size);
		for (size_t k = 0; k < n_sh; k++) {
			owner_text(sh[k], text, sizeof(text));
			format_bytes(sh[k]->share_mem, size, sizeof(size));
			top_putf(l, TOP_A_INFO, "%s %s (%s)", k ? "," : "", text, size);
		}
		break;
	}
	case GPUCTL_LEASE_UNUSABLE:
	case GPUCTL_LEASE_UNINITIALISED:
		top_putf(l, TOP_A_FAIL, "lease %s%s%s",
		         st == GPUCTL_LEASE_UNUSABLE ? "unusable" : "uninitialised",
		         reason ? ": " : "", reason ? reason : "");
		break;
	case GPUCTL_LEASE_FREE:
		top_put(l, TOP_A_DIM, "free");
		break;
	}
	if (mig_held)
		top_putf(l, TOP_A_INFO, " (%d MIG device%s held)", mig_held,
		         mig_held == 1 ? "" : "s");
	if (m->foreign && gpuctl_foreign_device(m->foreign, g, -1)) {
		const struct gpuctl_gpu *gpu_ = gpuctl_snapshot_gpu(m->snap, g);
		top_put(l, TOP_A_WARN,
		        gpuctl_foreign_busy(m->foreign, g, -1) ? " FOREIGN:" : " foreign:");
		for (size_t k = 0; gpu_ && k < gpuctl_gpu_proc_count(gpu_); k++) {
			uint32_t pid = gpuctl_proc_pid(gpuctl_gpu_proc(gpu_, k));
			if (gpuctl_foreign_proc(m->foreign, g, k))
				top_putf(l, TOP_A_WARN, " %s:%" PRIu32, proc_user(m, g, pid), pid);
		}
	}
}

static const char *verdict_text(int v)
{
	const char *s = v >= 0 ? gpuctl_health_severity_name(v) : NULL;
	return s ? s : "?";
}

static enum top_attr verdict_attr(int v)
{
	return v == GPUCTL_HEALTH_OK     ? TOP_A_OK
	       : v == GPUCTL_HEALTH_WARN ? TOP_A_WARN
	       : v == GPUCTL_HEALTH_FAIL ? TOP_A_FAIL
	                                 : TOP_A_DIM;
}

/* Bar k of a GPU (0 UTIL, 1 MEM, 2 POWER, 3 TEMP) in w columns. */
static void gpu_bar(struct top_line *l, const struct gpuctl_gpu *gpu, int k, int w)
{
	char val[32];
	int64_t a, b;

	switch (k) {
	case 0:
		if (gpuctl_gpu_int(gpu, GPUCTL_F_UTIL_GPU, &a) == 0) {
			snprintf(val, sizeof(val), "%" PRId64 "%%", a);
			bar(l, w, a / 100.0, val);
			return;
		}
		break;
	case 1:
		if (gpuctl_gpu_int(gpu, GPUCTL_F_MEMORY_USED, &a) == 0 &&
		    gpuctl_gpu_int(gpu, GPUCTL_F_MEMORY_TOTAL, &b) == 0 && b > 0) {
			snprintf(val, sizeof(val), "%.1fG", (double)a / GIB);
			bar(l, w, (double)a / (double)b, val);
			return;
		}
		break;
	case 2:
		if (gpuctl_gpu_int(gpu, GPUCTL_F_POWER_DRAW, &a) == 0) {
			snprintf(val, sizeof(val), "%" PRId64 "W", (a + 500) / 1000);
			bar(l, w,
			    gpuctl_gpu_int(gpu, GPUCTL_F_POWER_LIMIT, &b) == 0 && b > 0
			            ? (double)a / (double)b
			            : 0,
			    val);
			return;
		}
		break;
	default:
		if (gpuctl_gpu_int(gpu, GPUCTL_F_TEMP, &a) == 0) {
			snprintf(val, sizeof(val), "%" PRId64 "C", a);
			/* the scale: the GPU's slowdown threshold, else 100 C */
			if (gpuctl_gpu_int(gpu, GPUCTL_F_TEMP_SLOWDOWN, &b) < 0 || b <= 0)
				b = 100;
			bar(l, w, (double)a / (double)b, val);
			return;
		}
		break;
	}
	bar(l, w, 0, "-");
}

/* The GPU's idle cases (docs/idle.md) with how long: "  idle 12m: lease". */
static void idle_words(struct top_line *l, const struct top_model *m, const struct gpuctl_gpu *gpu)
{
	char text[96];

	idle_view_text(m->idle, gpuctl_gpu_str(gpu, GPUCTL_F_UUID), false, text, sizeof(text));
	if (!text[0])
		return;
	top_put(l, TOP_A_NONE, "  ");
	top_put(l, TOP_A_WARN, text);
}

void top_gpu_line(struct top_line *l, const struct top_model *m, size_t g, int part)
{
	const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(m->snap, g);
	bool lost = gpuctl_gpu_lost(gpu);
	char finding[512], suuid[48], name[NAME_W + 1];
	int v = top_gpu_verdict(m, g, finding, sizeof(finding));

	top_line_clear(l);
	if (part == 1) {
		int sw = l->width >= 120 ? 16 : 8;
		tab(l, 4);
		top_put(l, TOP_A_DIM, "util ");
		sparkline(l, m, m->gpus[g].util, sw);
		top_put(l, TOP_A_DIM, " mem ");
		sparkline(l, m, m->gpus[g].mem, sw);
		top_putf(l, TOP_A_NONE, "  %s  ", m->gpus[g].pool ? m->gpus[g].pool : "default");
		holder(l, m, g);
		idle_words(l, m, gpu);
		if (finding[0]) {
			top_put(l, TOP_A_NONE, "  ");
			top_put(l, verdict_attr(v), finding);
		}
		return;
	}
	format_short_uuid(gpuctl_gpu_str(gpu, GPUCTL_F_UUID), suuid, sizeof(suuid));
	short_name(gpuctl_gpu_str(gpu, GPUCTL_F_NAME), name, sizeof(name));
	struct gpu_cols c = gpu_cols(l->width);
	top_putf(l, TOP_A_NONE, "%3zu", g);
	if (c.uuid) {
		tab(l, 4);
		top_putf(l, TOP_A_NONE, "%-12.12s", suuid);
	}
	if (c.name) {
		tab(l, c.uuid ? 17 : 4);
		top_put(l, TOP_A_NONE, name);
	}
	tab(l, c.bars_x);
	if (lost) {
		put_until(l, c.hlth_x - 1, TOP_A_FAIL, "NVML reports it lost: no values");
		tab(l, c.hlth_x);
		top_put(l, TOP_A_FAIL, "LOST");
		return;
	}
	for (int k = 0; k < c.n_bars; k++) {
		tab(l, c.bars_x + k * c.bw);
		gpu_bar(l, gpu, k, c.bw - 1);
	}
	tab(l, c.hlth_x);
	top_put(l, verdict_attr(v), verdict_text(v));
}

/* ---- processes ---- */

static const char *const col_names[TOP_N_COLS] = {
        "GPU",  "PID",      "USER",    "GPU-MEM", "%SM",
        "%CPU", "HOST-MEM", "ELAPSED", "COMMAND", "WORKLOAD",
};
/* Each column's width (right-aligned but USER), at 100 columns and more; WORKLOAD and COMMAND
 * share what is left. */
static const int col_w[TOP_N_COLS] = {3, 7, 10, 8, 4, 6, 8, 9, 0, 0};
/* The columns a narrow process list drops, first to last (docs/gpuctl.1, "top"). */
static const enum top_col drop_order[] = {TOP_COL_HOST_MEM, TOP_COL_ELAPSED, TOP_COL_CPU,
                                          TOP_COL_SM, TOP_COL_GPU_MEM};
/* WORKLOAD's narrowest and widest, and the least WORKLOAD and COMMAND share. */
#define WORKLOAD_MIN 16
#define WORKLOAD_MAX 32
#define SHARED_MIN   34
/* The screen order: WORKLOAD before COMMAND (the enum's order is the sort keys'). */
static const enum top_col screen_order[TOP_N_COLS] = {
        TOP_COL_GPU, TOP_COL_PID,      TOP_COL_USER,    TOP_COL_GPU_MEM,  TOP_COL_SM,
        TOP_COL_CPU, TOP_COL_HOST_MEM, TOP_COL_ELAPSED, TOP_COL_WORKLOAD, TOP_COL_COMMAND,
};

/* Where the process list's columns go in width columns: each one's start, -1 when dropped;
 * WORKLOAD's width in *ret_wl_w. The fixed columns go by drop_order until WORKLOAD and
 * COMMAND have SHARED_MIN columns; WORKLOAD gets a third of those (WORKLOAD_MIN to
 * WORKLOAD_MAX: a command line is longer than a label), or goes too when even the GPU, PID
 * and USER leave too little. */
static void proc_layout(int width, int *x, int *ret_wl_w)
{
	bool dropped[TOP_N_COLS] = {false};
	int fixed = 0, rest;

	for (size_t d = 0;; d++) {
		fixed = 0;
		for (int c = 0; c < TOP_N_COLS; c++)
			if (!dropped[c] && col_w[c])
				fixed += col_w[c] + 1;
		if (width - fixed >= SHARED_MIN || d == sizeof(drop_order) / sizeof(drop_order[0]))
			break;
		dropped[drop_order[d]] = true;
	}
	rest = width - fixed;
	*ret_wl_w = rest >= SHARED_MIN ? (rest - 1) / 3 : 0;
	if (*ret_wl_w > WORKLOAD_MAX)
		*ret_wl_w = WORKLOAD_MAX;
	if (rest >= SHARED_MIN && *ret_wl_w < WORKLOAD_MIN)
		*ret_wl_w = WORKLOAD_MIN;
	if (!*ret_wl_w)
		dropped[TOP_COL_WORKLOAD] = true;
	for (int at = 0, k = 0; k < TOP_N_COLS; k++) {
		enum top_col c = screen_order[k];
		x[c] = dropped[c] ? -1 : at;
		if (!dropped[c])
			at += (c == TOP_COL_WORKLOAD ? *ret_wl_w : col_w[c]) + 1;
	}
}

const char *top_col_name(enum top_col c)
{
	return c < TOP_N_COLS ? col_names[c] : "?";
}

enum top_col top_col_at(int x, int width)
{
	int cx[TOP_N_COLS], wl_w;
	enum top_col best = TOP_COL_GPU;

	proc_layout(width, cx, &wl_w);
	for (int c = 0; c < TOP_N_COLS; c++)
		if (cx[c] >= 0 && x >= cx[c] && cx[c] >= cx[best])
			best = (enum top_col)c;
	return best;
}

void top_proc_head(struct top_line *l, const struct top_view *v)
{
	int cx[TOP_N_COLS], wl_w;

	proc_layout(l->width, cx, &wl_w);
	top_line_clear(l);
	for (int k = 0; k < TOP_N_COLS; k++) {
		enum top_col c = screen_order[k];
		char name[24];
		if (cx[c] < 0)
			continue;
		snprintf(name, sizeof(name), "%s%s", col_names[c],
		         v->sort == c ? (v->descending ? "v" : "^") : "");
		tab(l, cx[c]);
		if (!col_w[c] || c == TOP_COL_USER)
			top_put(l, TOP_A_HEAD, name);
		else
			top_putf(l, TOP_A_HEAD, "%*s", col_w[c], name);
	}
}

/* "1.5G", "512M", "12K" */
static void short_bytes(int64_t b, char *buf, size_t size)
{
	if (b < 0)
		snprintf(buf, size, "-");
	else if (b >= (int64_t)GIB)
		snprintf(buf, size, "%.1fG", (double)b / GIB);
	else if (b >= 1024 * 1024)
		snprintf(buf, size, "%" PRId64 "M", b / (1024 * 1024));
	else
		snprintf(buf, size, "%" PRId64 "K", b / 1024);
}

/* "59s", "12:03", "3:02:01", "5d03h" */
static void elapsed_text(double s, char *buf, size_t size)
{
	uint64_t t = (uint64_t)s;
	if (s < 0)
		snprintf(buf, size, "-");
	else if (t < 60)
		snprintf(buf, size, "%" PRIu64 "s", t);
	else if (t < 3600)
		snprintf(buf, size, "%" PRIu64 ":%02" PRIu64, t / 60, t % 60);
	else if (t < 86400)
		snprintf(buf, size, "%" PRIu64 ":%02" PRIu64 ":%02" PRIu64, t / 3600, t / 60 % 60,
		         t % 60);
	else
		snprintf(buf, size, "%" PRIu64 "d%02" PRIu64 "h", t / 86400, t / 3600 % 24);
}

void top_proc_line(struct top_line *l, const struct top_model *m, const struct top_proc *p)
{
	char gm[16], hm[16], el[24], sm[16], cpu[32];
	const char *cell[TOP_N_COLS] = {NULL};
	enum top_attr a = p->foreign ? TOP_A_WARN : TOP_A_NONE;
	int cx[TOP_N_COLS], wl_w;

	(void)m;
	proc_layout(l->width, cx, &wl_w);
	top_line_clear(l);
	short_bytes(p->gpu_mem, gm, sizeof(gm));
	short_bytes(p->host_mem, hm, sizeof(hm));
	elapsed_text(p->elapsed, el, sizeof(el));
	if (p->sm >= 0)
		snprintf(sm, sizeof(sm), "%d", p->sm);
	else
		snprintf(sm, sizeof(sm), "-");
	if (p->cpu >= 0)
		snprintf(cpu, sizeof(cpu), "%.1f", p->cpu);
	else
		snprintf(cpu, sizeof(cpu), "-");
	cell[TOP_COL_GPU_MEM] = gm;
	cell[TOP_COL_SM] = sm;
	cell[TOP_COL_CPU] = cpu;
	cell[TOP_COL_HOST_MEM] = hm;
	cell[TOP_COL_ELAPSED] = el;
	/* '!' marks a process of no lease (foreign) */
	top_putf(l, a, "%c%2zu", p->foreign ? '!' : ' ', p->gpu);
	tab(l, cx[TOP_COL_PID]);
	top_putf(l, a, "%7" PRIu32, p->pid);
	tab(l, cx[TOP_COL_USER]);
	top_putf(l, a, "%-10.10s", p->user);
	for (int c = TOP_COL_GPU_MEM; c <= TOP_COL_ELAPSED; c++)
		if (cx[c] >= 0) {
			tab(l, cx[c]);
			top_putf(l, a, "%*s", col_w[c], cell[c]);
		}
	if (cx[TOP_COL_WORKLOAD] >= 0) {
		/* its words that fit, then "..." (put_cut); other bytes than printable ASCII '?' */
		tab(l, cx[TOP_COL_WORKLOAD]);
		put_until(l, cx[TOP_COL_WORKLOAD] + wl_w, a, top_proc_label(p));
	}
	tab(l, cx[TOP_COL_COMMAND]);
	if (p->idle) { /* idle by docs/idle.md (b) */
		char dur[24];
		format_duration(p->idle_ms / 1000, dur, sizeof(dur));
		top_putf(l, TOP_A_WARN, "[idle %s] ", dur);
	}
	top_put(l, a, p->command);
}

/* ---- sorting and filtering ---- */

static bool contains_nocase(const char *hay, const char *needle)
{
	size_t n = strlen(needle);
	for (; *hay; hay++)
		if (strncasecmp(hay, needle, n) == 0)
			return true;
	return n == 0;
}

static int cmp_num(double a, double b)
{
	return a < b ? -1 : a > b ? 1 : 0;
}

/* Ascending order of column c, ties by GPU then pid. */
static int cmp_col(const struct top_proc *a, const struct top_proc *b, enum top_col c)
{
	int r = 0;
	switch (c) {
	case TOP_COL_GPU:
		r = cmp_num((double)a->gpu, (double)b->gpu);
		break;
	case TOP_COL_PID:
		r = cmp_num(a->pid, b->pid);
		break;
	case TOP_COL_USER:
		r = strcmp(a->user, b->user);
		break;
	case TOP_COL_GPU_MEM:
		r = cmp_num((double)a->gpu_mem, (double)b->gpu_mem);
		break;
	case TOP_COL_SM:
		r = cmp_num(a->sm, b->sm);
		break;
	case TOP_COL_CPU:
		r = cmp_num(a->cpu, b->cpu);
		break;
	case TOP_COL_HOST_MEM:
		r = cmp_num((double)a->host_mem, (double)b->host_mem);
		break;
	case TOP_COL_ELAPSED:
		r = cmp_num(a->elapsed, b->elapsed);
		break;
	case TOP_COL_COMMAND:
		r = strcmp(a->command, b->command);
		break;
	case TOP_COL_WORKLOAD:
		r = strcmp(top_proc_label(a), top_proc_label(b));
		break;
	case TOP_N_COLS:
		break;
	}
	return r;
}

static int sort_cmp(const void *x, const void *y, void *arg)
{
	const struct top_view *v = ((const void *const *)arg)[0];
	const struct top_model *m = ((const void *const *)arg)[1];
	const struct top_proc *a = &m->procs[*(const size_t *)x],
	                      *b = &m->procs[*(const size_t *)y];
	int r = cmp_col(a, b, v->sort);

	if (v->descending)
		r = -r;
	if (r == 0)
		r = cmp_col(a, b, TOP_COL_GPU);
	if (r == 0)
		r = cmp_col(a, b, TOP_COL_PID);
	return r;
}

int top_view_sort(struct top_view *v, const struct top_model *m)
{
	size_t *order = calloc(m->n_procs ? m->n_procs : 1, sizeof(*order));
	size_t n = 0;
	const void *arg[2] = {v, m};

	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < m->n_procs; i++) {
		const struct top_proc *p = &m->procs[i];
		if (v->workload && !wl_filter_match(v->workload, p->wl))
			continue; /* --workload */
		if (!v->filter[0] || contains_nocase(p->user, v->filter) ||
		    contains_nocase(p->command, v->filter) ||
		    contains_nocase(top_proc_label(p), v->filter))
			order[n++] = i;
	}
	qsort_r(order, n, sizeof(*order), sort_cmp, (void *)arg);
	free(v->order);
	v->order = order;
	v->n_order = n;
	return 0;
}

/* ---- title and queue ---- */

void top_title(struct top_line *l, const struct top_model *m, const struct top_view *v,
               const char *focus)
{
	char clock[16] = "";
	time_t t = time(NULL);
	struct tm tm;

	top_line_clear(l);
	if (localtime_r(&t, &tm))
		(void)strftime(clock, sizeof(clock), "%H:%M:%S", &tm);
	top_putf(l, TOP_A_HEAD, "gpuctl top - %s", m->host[0] ? m->host : "?");
	if (m->ids)
		top_putf(l, TOP_A_NONE, "  %zu of %zu GPUs", m->n_shown, m->n_gpus);
	else
		top_putf(l, TOP_A_NONE, "  %zu GPUs", m->n_gpus);
	top_putf(l, TOP_A_NONE, "  %zu procs  every %.1fs  sort %s %s", m->n_procs, v->delay,
	         top_col_name(v->sort), v->descending ? "desc" : "asc");
	if (v->filter[0])
		top_putf(l, TOP_A_WARN, "  filter '%s' (%zu shown)", v->filter, v->n_order);
	if (focus)
		top_putf(l, TOP_A_NONE, "  [%s]", focus);
	top_putf(l, TOP_A_NONE, "  %s", clock);
}

size_t top_queue_count(const struct top_model *m)
{
	return gpuctl_wait_list_count(m->waiters);
}

void top_queue_head(struct top_line *l, const struct top_model *m)
{
	size_t n = top_queue_count(m);
	top_line_clear(l);
	if (n == 0) {
		top_put(l, TOP_A_HEAD, "WAITING");
		top_put(l, TOP_A_DIM, "  nobody is waiting");
		return;
	}
	top_putf(l, TOP_A_HEAD, "WAITING (%zu)  POS USER       PID     WAITED REQUEST", n);
}

void top_queue_line(struct top_line *l, const struct top_model *m, size_t i)
{
	const struct gpuctl_wait_entry *w = gpuctl_wait_list_get(m->waiters, i);
	char user[48], waited[24], req[512];

	top_line_clear(l);
	if (!w)
		return;
	if (w->user)
		snprintf(user, sizeof(user), "%s", w->user);
	else
		snprintf(user, sizeof(user), "%" PRIu32, w->uid);
	format_age(w->since > 0 ? (uint64_t)w->since : 0, waited, sizeof(waited));
	format_wait_request(w, req, sizeof(req));
	top_putf(l, TOP_A_NONE, "%*s%3zu %-10.10s %-7" PRIu32 " %6s %s", 13, "", i + 1, user,
	         w->pid, waited, req);
}
