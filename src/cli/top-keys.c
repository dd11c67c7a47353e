// SPDX-License-Identifier: MIT
/*
 * top-keys.c: what the keys and the mouse do on `gpuctl top`'s screen (top-screen.c):
 * selection and scrolling, sorting, the filter prompt, `k` (kill) and `r` (release), and
 * keeping the selected process selected across samples.
 *
 * Decisions:
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
#include <signal.h>
#include <stdarg.h>
#include <string.h>

#include "hostproc.h"
#include "top-screen.h"

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
	if (s->focus == 0 && s->gpu_sel >= s->m->n_shown) {
		set_status(s, true, "r: no GPU shown");
		return;
	}
	s->target_gpu = s->focus == 1 ? p->gpu : s->m->shown[s->gpu_sel];
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
		top_draw(s);
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
	size_t n = s->focus ? s->v->n_order : s->m->n_shown;

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
	struct layout L = top_layout(s, LINES);
	long p = s->focus ? L.proc_lines : L.gpu_lines / 2;
	return p > 1 ? p : 1;
}

/* A mouse press: a click selects the GPU or process under it (a click on the process list's
 * heading sorts by that column), the wheel moves the selection. */
static void mouse(struct screen *s)
{
	MEVENT ev;
	struct layout L = top_layout(s, LINES);

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
		if (g < s->m->n_shown) {
			s->focus = 0;
			s->gpu_sel = g;
		}
	} else if (ev.y == L.proc_head_y) {
		set_sort(s, top_col_at(ev.x, COLS));
	} else if (ev.y >= L.proc_y && ev.y < L.proc_y + L.proc_lines) {
		size_t i = s->proc_top + (size_t)(ev.y - L.proc_y);
		if (i < s->v->n_order) {
			s->focus = 1;
			s->proc_sel = i;
		}
	}
}

/* Handles one key; false to quit. */
bool top_key(struct screen *s, int ch)
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
		move_sel(s, -(long)(s->m->n_shown + s->v->n_order + 1));
		break;
	case KEY_END:
		move_sel(s, (long)(s->m->n_shown + s->v->n_order + 1));
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
		else if (ch == '0') /* the tenth column: WORKLOAD */
			set_sort(s, TOP_COL_WORKLOAD);
		break;
	}
	return true;
}

/* Takes a new sample into the model and sorts it again, keeping the selected process selected
 * (by pid and start time) where it still runs. */
void top_keep_selection(struct screen *s, const struct sampler_sample *x)
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
