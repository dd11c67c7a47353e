/* SPDX-License-Identifier: MIT */
/*
 * top-screen.h: `gpuctl top`'s screen, between its files: the loop and the drawing
 * (top-screen.c), the keys (top-keys.c), and what the plain-text frames of cmd-top.c share
 * with the loop.
 */
#ifndef GPUCTL_CLI_TOP_SCREEN_H
#define GPUCTL_CLI_TOP_SCREEN_H

#include <ncurses.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "sampler.h"
#include "top.h"

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

/* Heights of the parts for a screen of rows lines. */
struct layout {
	int gpu_y, gpu_lines; /* GPU lines (2 per GPU) */
	int proc_head_y, proc_y, proc_lines;
	int queue_y, queue_lines; /* head included */
	int status_y;
};

/* ---- top-screen.c ---- */

/* The screen until q, a signal, or count refreshes and an interval after the last. The
 * signals of stop are blocked on entry; their handlers are installed before they are let in.
 * The exit status. */
int top_run_screen(struct top_model *m, struct top_view *v, struct sampler *smp,
                   unsigned long count, const sigset_t *stop);
/* Puts the frame on the terminal: every row whose cells changed. */
void top_draw(struct screen *s);
struct layout top_layout(const struct screen *s, int rows);

/* ---- top-keys.c ---- */

/* Handles one key; false to quit. */
bool top_key(struct screen *s, int ch);
/* Takes a new sample into the model and sorts it again, keeping the selected process selected
 * (by pid and start time) where it still runs. */
void top_keep_selection(struct screen *s, const struct sampler_sample *x);

/* ---- cmd-top.c ---- */

/* m->stale_s for the frame drawn at now. */
void top_mark_stale(struct top_model *m, struct sampler *smp, double now);
/* The sample after seq, when one came (a reference), else NULL. */
const struct sampler_sample *top_new_sample(struct sampler *smp, uint64_t seq);

#endif /* GPUCTL_CLI_TOP_SCREEN_H */
