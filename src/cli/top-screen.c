// SPDX-License-Identifier: MIT
/*
 * top-screen.c: `gpuctl top`'s ncurses screen (cmd-top.c starts it, top-keys.c acts on its
 * keys): the terminal set up and restored, the loop that waits for a key, a sample or a
 * signal, and the drawing of each frame.
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
 * - The loop waits in poll() on the terminal and the sampler's descriptor, so keys, resizes
 *   and signals never wait for a driver call. A sample overdue (none for two intervals) leaves
 *   the last values on the screen, dimmed, with a line saying for how long NVML has not
 *   answered, redrawn every second.
 * - SIGINT, SIGTERM and SIGHUP end the loop through a flag (handlers installed before initscr,
 *   so ncurses leaves them to us, without SA_RESTART so a waiting poll returns); endwin() then
 *   restores the terminal, and the exit status is 0, as for `q`.
 */
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <term.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "top-screen.h"

static volatile sig_atomic_t top_signal;

static void on_signal(int sig)
{
	top_signal = sig;
}

static const char *const help_text[] = {
        "gpuctl top: keys",
        "",
        "  Tab               switch between the GPU list and the process list",
        "  Up/Down, PgUp/PgDn, Home/End   move the selection (scrolls)",
        "  s                 sort the processes by the next column",
        "  1-9, 0            sort by column 1-9 (GPU PID USER GPU-MEM %SM %CPU HOST-MEM",
        "                    ELAPSED COMMAND), 0 by WORKLOAD; the same key again reverses",
        "                    the order",
        "  /                 filter the processes by user, command or workload label",
        "                    (Enter applies, empty clears, Esc cancels)",
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

struct layout top_layout(const struct screen *s, int rows)
{
	struct layout L;
	size_t nq = top_queue_count(s->m);
	int queue = 1 + (int)(nq < 3 ? nq : 3);
	int avail = rows - 4 - queue; /* title, GPU head, process head, status */
	int want_gpu = (int)(2 * s->m->n_shown);
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

void top_draw(struct screen *s)
{
	int rows = LINES, cols = COLS;
	struct layout L = top_layout(s, rows);
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
	clamp_scroll(&s->gpu_sel, &s->gpu_top, s->m->n_shown, shown_gpus);
	for (size_t k = 0; k < shown_gpus && s->gpu_top + k < s->m->n_shown; k++) {
		size_t row = s->gpu_top + k; /* -i's order */
		for (int part = 0; part < 2; part++) {
			top_gpu_line(&l, s->m, s->m->shown[row], part);
			if (s->m->stale_s > 0)
				top_line_dim(&l);
			put_row(s, L.gpu_y + (int)(2 * k) + part, &l,
			        s->focus == 0 && row == s->gpu_sel);
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
		top_putf(&l, TOP_A_HEAD, "filter (user, command or workload): %s_", s->input);
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

/* The screen until q, a signal, or count refreshes and an interval after the last. The
 * signals of stop are blocked on entry; their handlers are installed before they are let in. */
int top_run_screen(struct top_model *m, struct top_view *v, struct sampler *smp,
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
	top_draw(&s);
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
		if ((x = top_new_sample(smp, seq))) {
			seq = x->seq;
			top_keep_selection(&s, x);
			sampler_put(x);
			any = true;
			if (count && ++frames >= count)
				end = cli_now(CLOCK_MONOTONIC) + v->delay;
		}
		for (int ch; !quit && (ch = getch()) != ERR;) {
			any = true;
			quit = ch != KEY_RESIZE && !top_key(&s, ch);
		}
		if (quit)
			break;
		double was = m->stale_s;
		top_mark_stale(m, smp, cli_now(CLOCK_MONOTONIC));
		if (any || was > 0 || m->stale_s > 0)
			top_draw(&s);
	}
	endwin();
	delscreen(scr);
	free_shown(&s);
	return CLI_EXIT_OK;
}
