// SPDX-License-Identifier: MIT
/*
 * cmd-top.c: `gpuctl top`, the live full-screen view of a shared GPU server: each GPU's load,
 * history, health and holder; the compute processes; the wait queue.
 *
 * Decisions:
 * - ncurses (Debian's libncurses-dev, docs/ARCHITECTURE.md "Dependencies"): terminfo, resize
 *   (KEY_RESIZE), keys, and its screen diff, which sends the terminal only the cells that
 *   changed since the last refresh, so nothing flickers.
 * - The screen keeps the cells it last put on each row (struct screen's shown): a refresh
 *   builds every line but hands ncurses only the rows whose cells changed, and a changed row
 *   goes in runs of one attribute (addchnstr) rather than cell by cell: ncurses's own diff
 *   still runs, on far fewer rows (bench/RESULTS.md "Top": drawing was most of a refresh's
 *   CPU).
 * - --once and --batch print the same lines as plain text (no terminal needed): for scripts
 *   and tests.
 * - NVML is read by the sampler's thread (sampler.h, top_take): the screen waits in poll() on
 *   the terminal and the sampler's descriptor, so keys, resizes and signals never wait for a
 *   driver call. A sample overdue (none for two intervals) leaves the last values on the
 *   screen, dimmed, with a line saying for how long NVML has not answered, redrawn every
 *   second; --batch prints a frame saying so every interval.
 * - SIGINT, SIGTERM and SIGHUP end the loop through a flag (handlers installed before initscr,
 *   so ncurses leaves them to us, without SA_RESTART so a waiting poll returns); endwin() then
 *   restores the terminal, and the exit status is 0, as for `q`. A sample still hung in NVML
 *   then is not waited for (cli_exit_now). An NVML failure is a line on the screen and another
 *   try at the next interval, not an exit.
 * - `k` signals a process only through kill(2) as the user who runs top: the kernel decides,
 *   and its answer is shown. The pid is checked against the start time seen at the last
 *   refresh, so a reused pid is never signalled. The first confirmation sends SIGTERM, a second
 *   `k` on the same process offers SIGKILL.
 * - The mouse is optional: a click selects, a click on a heading sorts, the wheel scrolls.
 * - `r` ends the user's own `select --hold` holder of the selected GPU with
 *   gpuctl_lease_release, the call `gpuctl release` makes (other users' holds are refused by
 *   the library).
 */
#include <errno.h>
#include <getopt.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <ncurses.h>
#include <term.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hostproc.h"
#include "parse.h"
#include "sampler.h"
#include "top.h"

enum {
	OPT_ONCE = 0x100,
	OPT_LEASE_DIR,
	OPT_COLOR,
};

static volatile sig_atomic_t top_signal;

static void on_signal(int sig)
{
	top_signal = sig;
}

/* ---- plain text ---- */

static void print_line(const struct top_line *l)
{
	int end = l->width;
	while (end > 0 && l->cells[end - 1].ch == ' ')
		end--;
	for (int i = 0; i < end; i++)
		putchar(l->cells[i].ch);
	putchar('\n');
}

/* The width of a plain-text frame: $COLUMNS, else 120. */
static int text_width(void)
{
	const char *c = getenv("COLUMNS");
	unsigned long w;
	if (c && parse_uint(c, 40, 1000, &w) == 0)
		return (int)w;
	return 120;
}

static int print_frame(const struct top_model *m, struct top_view *v)
{
	struct top_line l;
	int r = top_line_init(&l, text_width());

	if (r < 0)
		return r;
	top_title(&l, m, v, NULL);
	print_line(&l);
	if (top_stale_line(&l, m))
		print_line(&l);
	if (m->error[0]) {
		top_line_clear(&l);
		top_put(&l, TOP_A_FAIL, m->error);
		print_line(&l);
	}
	top_gpu_head(&l);
	print_line(&l);
	for (size_t g = 0; g < m->n_gpus; g++)
		for (int part = 0; part < 2; part++) {
			top_gpu_line(&l, m, g, part);
			print_line(&l);
		}
	putchar('\n');
	top_proc_head(&l, v);
	print_line(&l);
	for (size_t i = 0; i < v->n_order; i++) {
		top_proc_line(&l, m, &m->procs[v->order[i]]);
		print_line(&l);
	}
	putchar('\n');
	top_queue_head(&l, m);
	print_line(&l);
	for (size_t i = 0; i < top_queue_count(m); i++) {
		top_queue_line(&l, m, i);
		print_line(&l);
	}
	top_line_free(&l);
	return fflush(stdout) == 0 ? 0 : -EIO;
}

/* m->stale_s for the frame drawn at now. */
static void mark_stale(struct top_model *m, struct sampler *smp, double now)
{
	m->stale_s = sampler_overdue(smp, now) ? sampler_silence(smp, now) : 0;
}

/* The sample after seq, when one came (a reference), else NULL. */
static const struct sampler_sample *new_sample(struct sampler *smp, uint64_t seq)
{
	const struct sampler_sample *x = sampler_latest(smp);

	if (x && x->seq > seq)
		return x;
	sampler_put(x);
	return NULL;
}

/* --once / --batch: count frames (0: until a signal), one per sample, or one per interval
 * with the overdue mark while none comes. The signals of stop are blocked. */
static int run_batch(struct top_model *m, struct top_view *v, struct sampler *smp,
                     unsigned long count, const sigset_t *stop)
{
	uint64_t seq = m->sample->seq;
	double again = 0; /* while overdue: the next frame's time */
	int status = CLI_EXIT_OK;

	for (unsigned long k = 0; count == 0 || k < count; k++) {
		if (k > 0) {
			for (;;) {
				struct pollfd p = {.fd = sampler_fd(smp), .events = POLLIN};
				double until = m->stale_s > 0 ? again : sampler_overdue_at(smp);
				const struct sampler_sample *x;

				if (cli_wait_fds(&p, 1, until, stop))
					goto out;
				if ((x = new_sample(smp, seq))) {
					seq = x->seq;
					(void)top_model_update(m,
					                       x); /* a failure: the error line */
					sampler_put(x);
					m->stale_s = 0;
					break;
				}
				if (sampler_overdue(smp, cli_now(CLOCK_MONOTONIC)))
					break;
			}
			mark_stale(m, smp, cli_now(CLOCK_MONOTONIC));
			again = cli_now(CLOCK_MONOTONIC) + v->delay;
			if (k + 1 < count || count == 0)
				putchar('\n');
		}
		if (top_view_sort(v, m) < 0 || print_frame(m, v) < 0) {
			status = CLI_EXIT_FAILURE;
			break;
		}
	}
out:
	return cli_finish_output(status);
}

/* ---- the screen ---- */

enum prompt {
	PROMPT_NONE,
	PROMPT_FILTER,
	PROMPT_KILL,
	PROMPT_RELEASE,
};

struct screen {
	struct top_model *m;
	struct top_view *v;
	bool utf8;               /* the locale's codeset is UTF-8: block elements for levels */
	attr_t attr[TOP_A_N];    /* curses attributes of each enum top_attr */
	int focus;               /* 0: GPUs, 1: processes */
	size_t gpu_sel, gpu_top; /* the selected GPU and the first one shown */
	size_t proc_sel, proc_top;
	enum prompt prompt;
	char input[64];      /* the filter being typed */
	uint32_t target_pid; /* PROMPT_KILL: the process, its start, the signal */
	uint64_t target_start;
	int target_sig;
	uint32_t termed_pid; /* the last process sent SIGTERM from here (k again: SIGKILL) */
	uint64_t termed_start;
	size_t target_gpu; /* PROMPT_RELEASE */
	bool help;
	char status[256]; /* the last action's outcome */
	bool status_bad;
	/* what each row of the terminal shows (shown_rows x shown_cols cells), whether it is
	 * selected, and the frame that last put it (stamp); NULL: nothing known, draw all */
	struct top_cell *shown;
	bool *shown_sel;
	unsigned *stamp;
	int shown_rows, shown_cols;
	unsigned frame;
};

static const char *const help_text[] = {
        "gpuctl top: keys",
        "",
        "  Tab               switch between the GPU list and the process list",
        "  Up/Down, PgUp/PgDn, Home/End   move the selection (scrolls)",
        "  s                 sort the processes by the next column",
        "  1-9               sort by column 1-9 (GPU PID USER GPU-MEM %SM %CPU HOST-MEM",
        "                    ELAPSED COMMAND); the same key again reverses the order",
        "  /                 filter the processes by user or command (Enter applies, empty",
        "                    clears, Esc cancels)",
        "  k                 send SIGTERM to the selected process (confirm with y); k again",
        "                    on it offers SIGKILL. Only what kill(2) allows you.",
        "  r                 release your own `select --hold` lease of the selected GPU",
        "  mouse             a click selects a GPU or a process, or sorts by the column",
        "                    heading clicked; the wheel moves the selection",
        "  h, ?              this help (any key closes it)",
        "  q                 quit",
        "",
        "  A GPU's second line: utilisation and memory history, pool, holder (user 'label'",
        "  age, or shared holders and room left), FOREIGN processes of no lease, and the",
        "  first health finding. '!' before a process's GPU: it belongs to no lease.",
};

/* Attributes, coloured as --color says: never; always (even under NO_COLOR: an explicit
 * request); auto, unless NO_COLOR is set and not empty (no-color.org). A screen is a terminal,
 * and ncurses knows whether it has colours (TERM=dumb has none). */
static void init_attrs(struct screen *s, enum cli_color when)
{
	const char *nc = getenv("NO_COLOR");
	bool color = has_colors() &&
	             (when == CLI_COLOR_ALWAYS || (when == CLI_COLOR_AUTO && !(nc && nc[0])));

	s->attr[TOP_A_NONE] = A_NORMAL;
	s->attr[TOP_A_HEAD] = A_BOLD;
	s->attr[TOP_A_DIM] = A_DIM;
	s->attr[TOP_A_OK] = A_NORMAL;
	s->attr[TOP_A_WARN] = A_BOLD;
	s->attr[TOP_A_FAIL] = A_BOLD | A_UNDERLINE;
	s->attr[TOP_A_INFO] = A_NORMAL;
	if (!color)
		return;
	start_color();
	(void)use_default_colors();
	init_pair(1, COLOR_GREEN, -1);
	init_pair(2, COLOR_YELLOW, -1);
	init_pair(3, COLOR_RED, -1);
	init_pair(4, COLOR_CYAN, -1);
	s->attr[TOP_A_OK] = COLOR_PAIR(1);
	s->attr[TOP_A_WARN] = COLOR_PAIR(2) | A_BOLD;
	s->attr[TOP_A_FAIL] = COLOR_PAIR(3) | A_BOLD;
	s->attr[TOP_A_INFO] = COLOR_PAIR(4);
}

static attr_t cell_attr(const struct screen *s, const struct top_cell *c, bool selected)
{
	return s->attr[c->attr < TOP_A_N ? c->attr : 0] | (selected ? A_REVERSE : 0);
}

/* Puts cells [from, to) of line l on row y: runs of plain cells of one attribute in one
 * addchnstr, a sparkline level as its block element (UTF-8) or its ASCII stand-in. */
static void draw_span(struct screen *s, int y, const struct top_line *l, bool selected, int from,
                      int to)
{
	static const wchar_t blocks[] = L"\u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588";
	chtype run[256];

	for (int x = from; x < to;) {
		const struct top_cell *c = &l->cells[x];
		attr_t a = cell_attr(s, c, selected);

		if (c->glyph && s->utf8) {
			wchar_t w[2] = {blocks[(c->glyph - 1) & 7], L'\0'};
			cchar_t cc;
			if (setcchar(&cc, w, a & ~A_COLOR, (short)PAIR_NUMBER(a), NULL) == OK)
				(void)mvadd_wch(y, x, &cc);
			x++;
			continue;
		}
		int n = 0, x0 = x;
		while (x < to && n < (int)(sizeof(run) / sizeof(run[0])) &&
		       !(l->cells[x].glyph && s->utf8) &&
		       cell_attr(s, &l->cells[x], selected) == a) {
			unsigned char ch = (unsigned char)l->cells[x].ch;
			run[n++] = (chtype)(ch >= 0x20 && ch < 0x7f ? ch : '?') | a;
			x++;
		}
		(void)mvaddchnstr(y, x0, run, n);
	}
}

static void free_shown(struct screen *s)
{
	free(s->shown);
	free(s->shown_sel);
	free(s->stamp);
	s->shown = NULL;
	s->shown_sel = NULL;
	s->stamp = NULL;
}

/* Makes s->shown fit the screen (rows x cols); a new size forgets what was shown. */
static void fit_shown(struct screen *s, int rows, int cols)
{
	if (s->shown && s->shown_rows == rows && s->shown_cols == cols)
		return;
	free_shown(s);
	s->shown_rows = rows > 0 ? rows : 0;
	s->shown_cols = cols > 0 ? cols : 0;
	s->shown = calloc((size_t)s->shown_rows * (size_t)s->shown_cols + 1, sizeof(*s->shown));
	s->shown_sel = calloc((size_t)s->shown_rows + 1, sizeof(*s->shown_sel));
	s->stamp = calloc((size_t)s->shown_rows + 1, sizeof(*s->stamp));
	if (!s->shown || !s->shown_sel || !s->stamp)
		free_shown(s); /* then every row is drawn */
	/* else cells of ch 0, which no line has: each row differs from the first line put there */
}

/* Puts l on row y unless the row shows it already; else from its first changed cell to its
 * last. */
static void put_row(struct screen *s, int y, const struct top_line *l, bool selected)
{
	int from = 0, to = l->width;

	if (y < 0 || y >= LINES)
		return;
	if (s->shown && y < s->shown_rows && l->width == s->shown_cols) {
		struct top_cell *row = &s->shown[(size_t)y * (size_t)s->shown_cols];
		s->stamp[y] = s->frame;
		if (s->shown_sel[y] == selected && !top_line_diff(row, l, &from, &to))
			return;
		memcpy(row, l->cells, (size_t)l->width * sizeof(*row));
		s->shown_sel[y] = selected;
	}
	draw_span(s, y, l, selected, from, to);
}

/* Blanks the rows this frame did not put (l: a line of the screen's width, cleared). */
static void blank_rest(struct screen *s, struct top_line *l)
{
	top_line_clear(l);
	for (int y = 0; y < LINES; y++)
		if (!s->shown || y >= s->shown_rows || s->stamp[y] != s->frame)
			put_row(s, y, l, false);
}

/* Heights of the parts for a screen of rows lines. */
struct layout {
	int gpu_y, gpu_lines; /* GPU lines (2 per GPU) */
	int proc_head_y, proc_y, proc_lines;
	int queue_y, queue_lines; /* head included */
	int status_y;
};

static struct layout layout_for(const struct screen *s, int rows)
{
	struct layout L;
	size_t nq = top_queue_count(s->m);
	int queue = 1 + (int)(nq < 3 ? nq : 3);
	int avail = rows - 4 - queue; /* title, GPU head, process head, status */
	int want_gpu = (int)(2 * s->m->n_gpus);
	int want_proc = s->v->n_order < 3 ? 3 : (int)s->v->n_order;

	if (avail < 4) { /* a tiny terminal: no queue */
		queue = 0;
		avail = rows - 4;
	}
	if (avail < 2)
		avail = 2;
	int gl = want_gpu;
	if (gl > avail - (want_proc < avail / 2 ? want_proc : avail / 2))
		gl = avail - (want_proc < avail / 2 ? want_proc : avail / 2);
	gl -= gl % 2;
	if (gl < 2)
		gl = 2;
	L.gpu_y = 2;
	L.gpu_lines = gl;
	L.proc_head_y = 2 + gl;
	L.proc_y = L.proc_head_y + 1;
	L.proc_lines = avail - gl > 0 ? avail - gl : 0;
	L.queue_y = L.proc_y + L.proc_lines;
	L.queue_lines = queue;
	L.status_y = rows - 1;
	return L;
}

/* Keeps sel inside [0, n) and top such that sel is among the `shown` from top. */
static void clamp_scroll(size_t *sel, size_t *top, size_t n, size_t shown)
{
	if (n == 0) {
		*sel = *top = 0;
		return;
	}
	if (*sel >= n)
		*sel = n - 1;
	if (shown == 0)
		shown = 1;
	if (*sel < *top)
		*top = *sel;
	if (*sel >= *top + shown)
		*top = *sel - shown + 1;
	if (*top + shown > n)
		*top = n > shown ? n - shown : 0;
}

static void draw(struct screen *s)
{
	int rows = LINES, cols = COLS;
	struct layout L = layout_for(s, rows);
	struct top_line l;

	if (top_line_init(&l, cols) < 0)
		return;
	fit_shown(s, rows, cols);
	s->frame++;
	if (!s->shown)
		erase();
	if (s->help) {
		for (size_t i = 0; i < sizeof(help_text) / sizeof(help_text[0]) && (int)i < rows;
		     i++) {
			top_line_clear(&l);
			top_put(&l, i == 0 ? TOP_A_HEAD : TOP_A_NONE, help_text[i]);
			put_row(s, (int)i, &l, false);
		}
		if (s->shown)
			blank_rest(s, &l);
		top_line_free(&l);
		refresh();
		return;
	}
	top_title(&l, s->m, s->v, s->focus ? "processes" : "GPUs");
	put_row(s, 0, &l, false);
	top_gpu_head(&l);
	put_row(s, 1, &l, false);
	size_t shown_gpus = (size_t)L.gpu_lines / 2;
	clamp_scroll(&s->gpu_sel, &s->gpu_top, s->m->n_gpus, shown_gpus);
	for (size_t k = 0; k < shown_gpus && s->gpu_top + k < s->m->n_gpus; k++) {
		size_t g = s->gpu_top + k;
		for (int part = 0; part < 2; part++) {
			top_gpu_line(&l, s->m, g, part);
			if (s->m->stale_s > 0)
				top_line_dim(&l);
			put_row(s, L.gpu_y + (int)(2 * k) + part, &l,
			        s->focus == 0 && g == s->gpu_sel);
		}
	}
	top_proc_head(&l, s->v);
	put_row(s, L.proc_head_y, &l, false);
	clamp_scroll(&s->proc_sel, &s->proc_top, s->v->n_order, (size_t)L.proc_lines);
	for (int k = 0; k < L.proc_lines && s->proc_top + (size_t)k < s->v->n_order; k++) {
		size_t i = s->proc_top + (size_t)k;
		top_proc_line(&l, s->m, &s->m->procs[s->v->order[i]]);
		if (s->m->stale_s > 0)
			top_line_dim(&l);
		put_row(s, L.proc_y + k, &l, s->focus == 1 && i == s->proc_sel);
	}
	if (L.queue_lines > 0) {
		top_queue_head(&l, s->m);
		put_row(s, L.queue_y, &l, false);
		for (int k = 0; k + 1 < L.queue_lines; k++) {
			top_queue_line(&l, s->m, (size_t)k);
			put_row(s, L.queue_y + 1 + k, &l, false);
		}
	}
	top_line_clear(&l);
	switch (s->prompt) {
	case PROMPT_FILTER:
		top_putf(&l, TOP_A_HEAD, "filter (user or command): %s_", s->input);
		break;
	case PROMPT_KILL:
		top_putf(&l, TOP_A_WARN, "send %s to pid %u? [y/N]",
		         s->target_sig == SIGKILL ? "SIGKILL" : "SIGTERM", (unsigned)s->target_pid);
		break;
	case PROMPT_RELEASE:
		top_putf(&l, TOP_A_WARN, "release your hold on GPU %zu? [y/N]", s->target_gpu);
		break;
	case PROMPT_NONE:
		if (top_stale_line(&l, s->m))
			break;
		if (s->m->error[0])
			top_putf(&l, TOP_A_FAIL, "%s; trying again every %.1fs", s->m->error,
			         s->v->delay);
		else if (s->status[0])
			top_put(&l, s->status_bad ? TOP_A_FAIL : TOP_A_OK, s->status);
		else
			top_put(&l, TOP_A_DIM,
			        "h help  q quit  Tab switch  s sort  / filter  "
			        "k kill  r release");
		break;
	}
	put_row(s, L.status_y, &l, false);
	if (s->shown)
		blank_rest(s, &l);
	top_line_free(&l);
	refresh();
}

static void set_status(struct screen *s, bool bad, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static void set_status(struct screen *s, bool bad, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->status, sizeof(s->status), fmt, ap);
	va_end(ap);
	s->status_bad = bad;
}

static const struct top_proc *selected_proc(const struct screen *s)
{
	if (s->proc_sel >= s->v->n_order)
		return NULL;
	return &s->m->procs[s->v->order[s->proc_sel]];
}

static void ask_kill(struct screen *s)
{
	const struct top_proc *p = selected_proc(s);

	if (s->focus != 1 || !p) {
		set_status(s, true, "k: select a process first (Tab to the process list)");
		return;
	}
	s->target_pid = p->pid;
	s->target_start = p->start_ticks;
	s->target_sig =
	        p->pid == s->termed_pid && p->start_ticks == s->termed_start ? SIGKILL : SIGTERM;
	s->prompt = PROMPT_KILL;
}

static void do_kill(struct screen *s)
{
	struct hostproc_stat st;
	const char *name = s->target_sig == SIGKILL ? "SIGKILL" : "SIGTERM";

	/* the same process as on the screen, or none: a pid can be reused */
	if (hostproc_read_stat((pid_t)s->target_pid, &st) < 0 ||
	    st.start_ticks != s->target_start) {
		set_status(s, true, "pid %u has ended", (unsigned)s->target_pid);
		return;
	}
	if (kill((pid_t)s->target_pid, s->target_sig) < 0) {
		set_status(s, true, "kill %s %u: %s", name, (unsigned)s->target_pid,
		           strerror(errno));
		return;
	}
	set_status(s, false, "sent %s to pid %u%s", name, (unsigned)s->target_pid,
	           s->target_sig == SIGTERM ? " (k again offers SIGKILL)" : "");
	if (s->target_sig == SIGTERM) {
		s->termed_pid = s->target_pid;
		s->termed_start = s->target_start;
	}
}

static void ask_release(struct screen *s)
{
	const struct top_proc *p = selected_proc(s);

	if (s->focus == 1 && !p) {
		set_status(s, true, "r: select a GPU or a process first");
		return;
	}
	s->target_gpu = s->focus == 1 ? p->gpu : s->gpu_sel;
	s->prompt = PROMPT_RELEASE;
}

static void do_release(struct screen *s)
{
	struct gpuctl_lease_dir *dir = gpuctl_site_lease_dir(s->m->cli->site);
	const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(s->m->snap, s->target_gpu);
	struct gpuctl_devset *set = NULL;
	int r;

	if (!dir) {
		set_status(s, true, "release: no lease directory, nothing is held");
		return;
	}
	r = gpuctl_devset_new(&set);
	if (r >= 0)
		r = gpuctl_devset_add(set, s->target_gpu, -1);
	for (size_t k = 0; r >= 0 && g && k < gpuctl_gpu_mig_count(g); k++)
		r = gpuctl_devset_add(set, s->target_gpu, (int)k);
	if (r >= 0) {
		set_status(s, false, "releasing GPU %zu...", s->target_gpu);
		s->prompt = PROMPT_NONE;
		draw(s);
		r = gpuctl_lease_release(s->m->cli->ctx, dir, s->m->snap, set);
	}
	gpuctl_devset_free(set);
	if (r < 0) {
		const char *msg = gpuctl_errmsg(s->m->cli->ctx);
		set_status(s, true, "release: %s", msg && msg[0] ? msg : strerror(-r));
		return;
	}
	if (r == 0)
		set_status(s, true, "release: GPU %zu has no hold of yours", s->target_gpu);
	else
		set_status(s, false, "released %d holder%s of GPU %zu", r, r == 1 ? "" : "s",
		           s->target_gpu);
}

static void set_sort(struct screen *s, enum top_col c)
{
	if (s->v->sort == c) {
		s->v->descending = !s->v->descending;
	} else {
		s->v->sort = c;
		/* amounts biggest first; names and numbers in order */
		s->v->descending = c == TOP_COL_GPU_MEM || c == TOP_COL_SM || c == TOP_COL_CPU ||
		                   c == TOP_COL_HOST_MEM || c == TOP_COL_ELAPSED;
	}
	(void)top_view_sort(s->v, s->m);
}

/* Moves the focused selection by delta (page: the pane's height). */
static void move_sel(struct screen *s, long delta)
{
	size_t *sel = s->focus ? &s->proc_sel : &s->gpu_sel;
	size_t n = s->focus ? s->v->n_order : s->m->n_gpus;

	if (n == 0)
		return;
	if (delta < 0 && (size_t)-delta > *sel)
		*sel = 0;
	else if (delta > 0 && *sel + (size_t)delta >= n)
		*sel = n - 1;
	else
		*sel = (size_t)((long)*sel + delta);
}

static long page(const struct screen *s)
{
	struct layout L = layout_for(s, LINES);
	long p = s->focus ? L.proc_lines : L.gpu_lines / 2;
	return p > 1 ? p : 1;
}

/* A mouse press: a click selects the GPU or process under it (a click on the process list's
 * heading sorts by that column), the wheel moves the selection. */
static void mouse(struct screen *s)
{
	MEVENT ev;
	struct layout L = layout_for(s, LINES);

	if (getmouse(&ev) != OK)
		return;
	if (ev.bstate & BUTTON4_PRESSED) {
		move_sel(s, -3);
		return;
	}
	if (ev.bstate & BUTTON5_PRESSED) {
		move_sel(s, 3);
		return;
	}
	if (!(ev.bstate & (BUTTON1_PRESSED | BUTTON1_CLICKED)))
		return;
	if (ev.y >= L.gpu_y && ev.y < L.gpu_y + L.gpu_lines) {
		size_t g = s->gpu_top + (size_t)(ev.y - L.gpu_y) / 2;
		if (g < s->m->n_gpus) {
			s->focus = 0;
			s->gpu_sel = g;
		}
	} else if (ev.y == L.proc_head_y) {
		set_sort(s, top_col_at(ev.x));
	} else if (ev.y >= L.proc_y && ev.y < L.proc_y + L.proc_lines) {
		size_t i = s->proc_top + (size_t)(ev.y - L.proc_y);
		if (i < s->v->n_order) {
			s->focus = 1;
			s->proc_sel = i;
		}
	}
}

/* Handles one key; false to quit. */
static bool key(struct screen *s, int ch)
{
	if (s->help) {
		s->help = false;
		return true;
	}
	if (s->prompt == PROMPT_FILTER) {
		size_t n = strlen(s->input);
		if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
			snprintf(s->v->filter, sizeof(s->v->filter), "%s", s->input);
			s->prompt = PROMPT_NONE;
			s->proc_sel = s->proc_top = 0;
			(void)top_view_sort(s->v, s->m);
		} else if (ch == 27) {
			s->prompt = PROMPT_NONE;
		} else if ((ch == KEY_BACKSPACE || ch == 127 || ch == 8) && n > 0) {
			s->input[n - 1] = '\0';
		} else if (ch >= 0x20 && ch < 0x7f && n + 1 < sizeof(s->input)) {
			s->input[n] = (char)ch;
			s->input[n + 1] = '\0';
		}
		return true;
	}
	if (s->prompt == PROMPT_KILL || s->prompt == PROMPT_RELEASE) {
		enum prompt p = s->prompt;
		s->prompt = PROMPT_NONE;
		if (ch != 'y' && ch != 'Y') {
			set_status(s, false, "cancelled");
			return true;
		}
		if (p == PROMPT_KILL)
			do_kill(s);
		else
			do_release(s);
		return true;
	}
	switch (ch) {
	case 'q':
	case 'Q':
		return false;
	case '\t':
		s->focus = !s->focus;
		break;
	case KEY_UP:
		move_sel(s, -1);
		break;
	case KEY_DOWN:
		move_sel(s, 1);
		break;
	case KEY_PPAGE:
		move_sel(s, -page(s));
		break;
	case KEY_NPAGE:
		move_sel(s, page(s));
		break;
	case KEY_HOME:
		move_sel(s, -(long)(s->m->n_gpus + s->v->n_order + 1));
		break;
	case KEY_END:
		move_sel(s, (long)(s->m->n_gpus + s->v->n_order + 1));
		break;
	case 's':
		set_sort(s, (enum top_col)((s->v->sort + 1) % TOP_N_COLS));
		break;
	case '/':
		snprintf(s->input, sizeof(s->input), "%s", s->v->filter);
		s->prompt = PROMPT_FILTER;
		break;
	case 'h':
	case '?':
		s->help = true;
		break;
	case 'k':
		ask_kill(s);
		break;
	case 'r':
		ask_release(s);
		break;
	case KEY_MOUSE:
		mouse(s);
		break;
	default:
		if (ch >= '1' && ch <= '9')
			set_sort(s, (enum top_col)(ch - '1'));
		break;
	}
	return true;
}

/* Takes a new sample into the model and sorts it again, keeping the selected process selected
 * (by pid and start time) where it still runs. */
static void keep_selection(struct screen *s, const struct sampler_sample *x)
{
	const struct top_proc *p = selected_proc(s);
	uint32_t pid = p ? p->pid : 0;
	uint64_t start = p ? p->start_ticks : 0;

	(void)top_model_update(s->m, x); /* a failure shows as the status line */
	(void)top_view_sort(s->v, s->m);
	for (size_t i = 0; pid && i < s->v->n_order; i++) {
		const struct top_proc *q = &s->m->procs[s->v->order[i]];
		if (q->pid == pid && q->start_ticks == start) {
			s->proc_sel = i;
			break;
		}
	}
}

/* The screen until q, a signal, or count refreshes and an interval after the last. The
 * signals of stop are blocked on entry; their handlers are installed before they are let in. */
static int run_screen(struct top_model *m, struct top_view *v, struct sampler *smp,
                      unsigned long count, const sigset_t *stop)
{
	struct screen s = {.m = m, .v = v};
	struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART: getch returns */
	double end = INFINITY; /* -n: an interval after the last refresh */
	uint64_t seq = m->sample->seq;
	unsigned long frames = 1;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	pthread_sigmask(SIG_UNBLOCK, stop, NULL);
	(void)setlocale(LC_CTYPE, "");
	s.utf8 = strcmp(nl_langinfo(CODESET), "UTF-8") == 0;
	/* the terminal description first (setupterm reports an unknown TERM, where initscr
	 * would exit the program and a failed newterm leaks its half-made screen); then newterm */
	int err = 0;
	if (setupterm(NULL, STDOUT_FILENO, &err) != OK) {
		cli_error(
		        "top: cannot drive the terminal: TERM '%s' is not in the terminfo database",
		        getenv("TERM") ? getenv("TERM") : "");
		return CLI_EXIT_FAILURE;
	}
	(void)del_curterm(cur_term);
	SCREEN *scr = newterm(NULL, stdout, stdin);
	if (!scr) {
		cli_error(
		        "top: cannot drive the terminal: TERM '%s' is not in the terminfo database",
		        getenv("TERM") ? getenv("TERM") : "");
		return CLI_EXIT_FAILURE;
	}
	set_term(scr);
	cbreak();
	noecho();
	nonl();
	/* ncurses flushes its output after every cursor move until the screen has once been
	 * left and resumed (its mvcur treats a screen still in its initial state as used by a
	 * low-level terminfo program): leaving and resuming before the first frame makes a
	 * refresh one write instead of one per changed span (strace: ~6 a refresh at 8 GPUs); the
	 * keypad and the mouse are set after it, as endwin() turns them off */
	endwin();
	refresh();
	keypad(stdscr, TRUE);
	(void)curs_set(0);
	set_escdelay(25);
	timeout(0); /* getch: only what has come (the loop waits in poll) */
	/* no look for typeahead while updating: ncurses would flush its output and poll stdin
	 * every few changed lines (a write and a poll each); keys are read between refreshes */
	(void)typeahead(-1);
	/* clicks and the wheel; endwin() turns the terminal's mouse reporting off again */
	(void)mousemask(BUTTON1_PRESSED | BUTTON1_CLICKED | BUTTON4_PRESSED | BUTTON5_PRESSED,
	                NULL);
	(void)mouseinterval(0);
	init_attrs(&s, m->cli->color);
	(void)top_view_sort(v, m);
	if (count && frames >= count)
		end = cli_now(CLOCK_MONOTONIC) + v->delay;
	draw(&s);
	while (!top_signal) {
		double now = cli_now(CLOCK_MONOTONIC), until;
		const struct sampler_sample *x;

		if (now >= end)
			break;
		/* the wait is a poll of the terminal (a key, a signal: SIGWINCH is a resize) and of
		 * the sampler (a sample), until the sample is overdue, or while it is, the next
		 * second (the silence counts on screen); then every key ncurses has, without
		 * waiting: a getch with a timeout swaps signal handlers around each wait, a
		 * refresh's worth of syscalls */
		until = m->stale_s > 0 ? now + 1 : sampler_overdue_at(smp);
		if (end < until)
			until = end;
		struct pollfd pfd[2] = {{.fd = STDIN_FILENO, .events = POLLIN},
		                        {.fd = sampler_fd(smp), .events = POLLIN}};
		int ms = isinf(until) ? -1 : (int)((until - now) * 1000.0) + 1;
		if (poll(pfd, 2, ms) < 0)
			continue; /* a signal */
		bool quit = false, any = false;
		if ((x = new_sample(smp, seq))) {
			seq = x->seq;
			keep_selection(&s, x);
			sampler_put(x);
			any = true;
			if (count && ++frames >= count)
				end = cli_now(CLOCK_MONOTONIC) + v->delay;
		}
		for (int ch; !quit && (ch = getch()) != ERR;) {
			any = true;
			quit = ch != KEY_RESIZE && !key(&s, ch);
		}
		if (quit)
			break;
		double was = m->stale_s;
		mark_stale(m, smp, cli_now(CLOCK_MONOTONIC));
		if (any || was > 0 || m->stale_s > 0)
			draw(&s);
	}
	endwin();
	delscreen(scr);
	free_shown(&s);
	return CLI_EXIT_OK;
}

/* ---- the command ---- */

static int cmd_top_exec(struct cli *cli, int argc, char **argv)
{
	static const struct option options[] = {
	        {"delay", required_argument, NULL, 'd'},
	        {"iterations", required_argument, NULL, 'n'},
	        {"batch", no_argument, NULL, 'b'},
	        {"once", no_argument, NULL, OPT_ONCE},
	        {"lease-dir", required_argument, NULL, OPT_LEASE_DIR},
	        {"color", required_argument, NULL, OPT_COLOR},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	struct top_model m = {.lease_ifd = -1};
	struct top_view v = {.sort = TOP_COL_GPU, .delay = 1.0};
	const char *lease_dir = NULL;
	unsigned long count = 0;
	bool batch = false;
	int opt, status;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "+:d:n:bh", options, NULL)) != -1) {
		switch (opt) {
		case 'd':
			if ((status = cmd_parse_delay(&cmd_top_entry, "-d", optarg, &v.delay)))
				return status;
			break;
		case 'n':
			if ((status = cmd_parse_count(&cmd_top_entry, "-n", optarg, &count)))
				return status;
			break;
		case 'b':
			batch = true;
			break;
		case OPT_ONCE:
			batch = true;
			count = 1;
			break;
		case OPT_LEASE_DIR:
			if (!optarg[0])
				return cmd_usage_error(&cmd_top_entry, "--lease-dir: empty path");
			lease_dir = optarg;
			break;
		case OPT_COLOR:
			if ((status = cli_color_option(cli, &cmd_top_entry, optarg)))
				return status;
			break;
		case 'h':
			cmd_usage(&cmd_top_entry, stdout);
			return CLI_EXIT_OK;
		default:
			return cmd_bad_option(&cmd_top_entry, opt, argv);
		}
	}
	if (optind < argc)
		return cmd_usage_error(&cmd_top_entry, "unexpected argument '%s'", argv[optind]);
	if (!batch && (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))) {
		cli_error("top: the screen needs a terminal on stdin and stdout (--once or --batch "
		          "print plain text)");
		return CLI_EXIT_USAGE;
	}
	/* the site first: a shared lease directory decides which configuration governs it */
	status = cli_site(cli, &cmd_top_entry, lease_dir, 0);
	if (status)
		return status;
	top_model_init(&m, cli);
	/* NVML on the sampler's thread (sampler.h), with a context of its own; one sample per
	 * frame of -n */
	struct top_sampling ts = {0};
	struct sampler *smp = NULL;
	struct gpuctl_ctx *sctx = NULL;
	const struct sampler_sample *first = NULL;
	sigset_t stop, old;
	status = cli_context_new(cli, &sctx);
	if (status)
		goto out;
	struct sampler_config cfg = {.interval = v.delay,
	                             .max_samples = count,
	                             .ctx = sctx,
	                             .take = top_take,
	                             .free_data = top_sample_free,
	                             .userdata = &ts};
	int r = sampler_start(&cfg, &smp);
	if (r < 0) {
		gpuctl_ctx_free(sctx);
		cli_error("top: cannot start the sampler: %s", strerror(-r));
		status = CLI_EXIT_FAILURE;
		goto out;
	}
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stop, &old);
	if (cli_first_sample(smp, "top", &stop, &first) == 0) {
		status = top_model_start(&m, first);
		sampler_put(first);
		if (status == 0)
			status = batch ? run_batch(&m, &v, smp, count, &stop)
			               : run_screen(&m, &v, smp, count, &stop);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	/* the terminal is restored; a sample hung in NVML is not waited for */
	if (sampler_stop(smp, SAMPLER_STOP_WAIT_S) < 0)
		cli_exit_now(status);
out:
	top_model_free(&m);
	free(v.order);
	return status;
}

const struct cmd_entry cmd_top_entry = {
        .name = "top",
        .usage = "[-d SECONDS] [-n COUNT] [--once | --batch] [--lease-dir DIR] [--color WHEN]",
        .summary = "live full-screen view: GPUs, holders, health, processes, the wait queue",
        .options = "  -d, --delay SECONDS   seconds between refreshes, 0.1 to 86400 (default 1)\n"
                   "  -n, --iterations N    stop after N refreshes (default: until q or a "
                   "signal)\n"
                   "  --once                print one frame as plain text and exit\n"
                   "  -b, --batch           print a plain-text frame every interval (no "
                   "screen)\n"
                   "  --lease-dir DIR       the lease directory (default $GPUCTL_LEASE_DIR, "
                   "else the\n"
                   "                        configuration's lease_dir, else /run/gpuctl)\n"
                   "  --color WHEN          colour the screen: auto (unless NO_COLOR is set), "
                   "always,\n"
                   "                        never (default: the global --color, else auto)\n"
                   "  -h, --help            print this help\n"
                   "\n"
                   "Keys: arrows, PgUp/PgDn, Home/End move; Tab switches GPUs/processes; s or "
                   "1-9\n"
                   "sort; / filters by user or command; k sends SIGTERM (again: SIGKILL) to "
                   "the\n"
                   "selected process, as kill(2) allows you; r releases your own --hold "
                   "lease;\n"
                   "h help; q quits. Mouse: a click selects (on a heading: sorts), the wheel\n"
                   "scrolls. NO_COLOR turns colours off (unless --color=always). While NVML\n"
                   "does not answer for two refreshes, the last values stay, dimmed, under\n"
                   "a line saying so.\n",
        .exec = cmd_top_exec,
        .exits = CMD_EXITS_DRIVER,
};
