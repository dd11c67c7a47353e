// SPDX-License-Identifier: MIT
/*
 * test-top.c: gpuctl top's view (src/cli/top-view.c) on models built by hand: sorting by each
 * column and its ties, the filter, the sparkline and bar cells, the cells a changed line
 * differs in, and the process list's columns at 80 columns.
 *
 * Expected values are worked out by hand from the definitions in top-view.c's "Decisions" and
 * top.h: ascending order of a column with ties by GPU then pid, descending the reverse of the
 * column only; the filter a case-insensitive substring of user, command or workload label, and
 * --workload's filter (workload-filter.h) on top of it; a sparkline sample v
 * at level v * 8 / 101 of "_.:-=+*#" (block element level + 1), attribute OK below 50 %, WARN
 * below 80 %, FAIL from 80 %; a bar "[" + fill of round(frac * inner) '|' + the value at its
 * right end + "]"; the process columns at 100 columns and more at x = 0 4 12 23 32 37 44 53,
 * right-aligned in widths 3 7 - 8 4 6 8 9 (USER left-aligned), then WORKLOAD, a third of what
 * is left (16 to 32), and COMMAND; narrower, HOST-MEM then ELAPSED go first (docs/gpuctl.1,
 * "top") until WORKLOAD and COMMAND have 34 columns.
 *
 * top_gpu_verdict (top-model.c, which reads the machine) is replaced here by a model without a
 * health report: verdict unknown, no finding, as top-model.c answers for m->health NULL.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "snapshot-internal.h"
#include "top.h"

#define GIB (1024LL * 1024 * 1024)
#define MIB (1024LL * 1024)

int top_gpu_verdict(const struct top_model *m, size_t g, char *finding, size_t size)
{
	(void)m;
	(void)g;
	if (size)
		finding[0] = '\0';
	return -1;
}

/* The text of cells [from, from + n) of l. */
static const char *text_of(const struct top_line *l, int from, int n)
{
	static char buf[512];
	int k = 0;

	for (; k < n && from + k < l->width && k < (int)sizeof(buf) - 1; k++)
		buf[k] = l->cells[from + k].ch;
	buf[k] = '\0';
	return buf;
}

/* ---- sorting and filtering ---- */

static struct top_proc procs[4];

static struct top_model proc_model(size_t n)
{
	/* their workloads (D's unknown: "?") */
	static const struct gpuctl_workload wa = {.kind = GPUCTL_WORKLOAD_SLURM,
	                                          .slurm_job = 4242,
	                                          .slurm_step = "0",
	                                          .label = "slurm 4242.0"},
	                                    wb = {.kind = GPUCTL_WORKLOAD_UNIT,
	                                          .name = "jupyter.service",
	                                          .label = "unit jupyter.service"},
	                                    wc = {.kind = GPUCTL_WORKLOAD_POD,
	                                          .label = "pod ml/trainer-7/main"};
	/* A, B, C with no ties between them in any column; D ties A in GPU-MEM and GPU */
	static const struct top_proc init[4] = {
	        {.gpu = 1,
	         .pid = 300,
	         .gpu_mem = 2 * GIB,
	         .sm = 10,
	         .cpu = 50.0,
	         .host_mem = 100 * MIB,
	         .elapsed = 10,
	         .user = "carol",
	         .command = "python train.py",
	         .wl = &wa},
	        {.gpu = 0,
	         .pid = 200,
	         .gpu_mem = 8 * GIB,
	         .sm = 90,
	         .cpu = 5.0,
	         .host_mem = 300 * MIB,
	         .elapsed = 5000,
	         .user = "alice",
	         .command = "./bench",
	         .wl = &wb},
	        {.gpu = 2,
	         .pid = 100,
	         .gpu_mem = 4 * GIB,
	         .sm = 40,
	         .cpu = 99.5,
	         .host_mem = 200 * MIB,
	         .elapsed = 70,
	         .user = "bob",
	         .command = "julia run.jl",
	         .wl = &wc},
	        {.gpu = 1,
	         .pid = 50,
	         .gpu_mem = 2 * GIB,
	         .sm = 20,
	         .cpu = 1.0,
	         .host_mem = 1 * MIB,
	         .elapsed = 1,
	         .user = "dave",
	         .command = "sleep"},
	};
	memcpy(procs, init, sizeof(procs));
	return (struct top_model){.procs = procs, .n_procs = n};
}

static void assert_order(const struct top_view *v, const size_t *want, size_t n)
{
	assert_int_equal(v->n_order, n);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(v->order[i], want[i]);
}

static void test_sort_each_column(void **state)
{
	(void)state;
	struct top_model m = proc_model(3); /* A=0 B=1 C=2 */
	/* ascending, by hand from the values above */
	static const size_t asc[TOP_N_COLS][3] = {
	        [TOP_COL_GPU] = {1, 0, 2},      /* GPU 0 1 2 */
	        [TOP_COL_PID] = {2, 1, 0},      /* pid 100 200 300 */
	        [TOP_COL_USER] = {1, 2, 0},     /* alice bob carol */
	        [TOP_COL_GPU_MEM] = {0, 2, 1},  /* 2 4 8 GiB */
	        [TOP_COL_SM] = {0, 2, 1},       /* 10 40 90 */
	        [TOP_COL_CPU] = {1, 0, 2},      /* 5 50 99.5 */
	        [TOP_COL_HOST_MEM] = {0, 2, 1}, /* 100 200 300 MiB */
	        [TOP_COL_ELAPSED] = {0, 2, 1},  /* 10 70 5000 s */
	        [TOP_COL_COMMAND] = {1, 2, 0},  /* "./bench" "julia ..." "python ..." (ASCII) */
	        [TOP_COL_WORKLOAD] = {2, 0, 1}, /* "pod ..." "slurm ..." "unit ..." */
	};

	for (int c = 0; c < TOP_N_COLS; c++) {
		struct top_view v = {.sort = (enum top_col)c};
		size_t desc[3] = {asc[c][2], asc[c][1], asc[c][0]};
		assert_int_equal(top_view_sort(&v, &m), 0);
		assert_order(&v, asc[c], 3);
		v.descending = true;
		assert_int_equal(top_view_sort(&v, &m), 0);
		assert_order(&v, desc, 3);
		free(v.order);
	}
}

static void test_sort_ties(void **state)
{
	(void)state;
	struct top_model m = proc_model(4); /* D=3 ties A=0 in GPU-MEM (2 GiB) and GPU (1) */
	struct top_view v = {.sort = TOP_COL_GPU_MEM};

	/* ascending: A and D by pid (50 before 300), then C (4 GiB), B (8 GiB) */
	assert_int_equal(top_view_sort(&v, &m), 0);
	assert_order(&v, (const size_t[]){3, 0, 2, 1}, 4);
	/* descending reverses the column, not the ties: B, C, then D before A */
	v.descending = true;
	assert_int_equal(top_view_sort(&v, &m), 0);
	assert_order(&v, (const size_t[]){1, 2, 3, 0}, 4);
	/* by GPU: B (0), A and D (1: pid 50 first), C (2) */
	v.sort = TOP_COL_GPU;
	v.descending = false;
	assert_int_equal(top_view_sort(&v, &m), 0);
	assert_order(&v, (const size_t[]){1, 3, 0, 2}, 4);
	free(v.order);
}

static void test_filter(void **state)
{
	(void)state;
	struct top_model m = proc_model(3);
	struct top_view v = {.sort = TOP_COL_GPU};

	snprintf(v.filter, sizeof(v.filter), "AL"); /* user alice, any case */
	assert_int_equal(top_view_sort(&v, &m), 0);
	assert_order(&v, (const size_t[]){1}, 1);
	snprintf(v.filter, sizeof(v.filter), "run.j"); /* C's command */
	assert_int_equal(top_view_sort(&v, &m), 0);
	assert_order(&v, (const size_t[]){2}, 1);
	snprintf(v.filter, sizeof(v.filter), "b"); /* bob (C), ./bench (B): GPU order */
	assert_int_equal(top_view_sort(&v, &m), 0);
	assert_order(&v, (const size_t[]){1, 2}, 2);
	snprintf(v.filter, sizeof(v.filter), "JUPYTER"); /* B's workload label */
	assert_int_equal(top_view_sort(&v, &m), 0);
	assert_order(&v, (const size_t[]){1}, 1);
	v.filter[0] = '\0';
	/* --workload: A's job by kind, then a glob; with the filter on top */
	struct wl_filter f = WL_FILTER_INIT;
	assert_int_equal(wl_filter_pattern(&f, "slurm:"), 0);
	v.workload = &f;
	assert_int_equal(top_view_sort(&v, &m), 0);
	assert_order(&v, (const size_t[]){0}, 1);
	assert_int_equal(wl_filter_pattern(&f, "*i*"), 0); /* unit jupyter..., pod ml/trainer... */
	assert_int_equal(top_view_sort(&v, &m), 0);
	assert_order(&v, (const size_t[]){1, 2}, 2);
	snprintf(v.filter, sizeof(v.filter), "bob");
	assert_int_equal(top_view_sort(&v, &m), 0);
	assert_order(&v, (const size_t[]){2}, 1);
	v.workload = NULL;
	snprintf(v.filter, sizeof(v.filter), "zzz");
	assert_int_equal(top_view_sort(&v, &m), 0);
	assert_int_equal(v.n_order, 0);
	v.filter[0] = '\0';
	assert_int_equal(top_view_sort(&v, &m), 0);
	assert_int_equal(v.n_order, 3);
	free(v.order);
}

/* ---- GPU lines ---- */

struct gpu_fixture {
	struct gpuctl_snapshot *snap;
	struct top_gpu gpus[1];
	struct top_model m;
	struct top_line l;
};

static int gpu_setup(void **state)
{
	struct gpu_fixture *f = calloc(1, sizeof(*f));

	if (!f || !(f->snap = snapshot_new_empty(1, 0)))
		return -1;
	snapshot_set_str(f->snap, 0, GPUCTL_F_UUID, "GPU-12345678-aaaa-bbbb-cccc-dddddddddddd");
	snapshot_set_str(f->snap, 0, GPUCTL_F_NAME, "NVIDIA A100-SXM4-80GB");
	f->gpus[0].pool = "default";
	for (int i = 0; i < TOP_HISTORY; i++)
		f->gpus[0].util[i] = f->gpus[0].mem[i] = -1;
	f->m = (struct top_model){.snap = f->snap, .gpus = f->gpus, .n_gpus = 1};
	if (top_line_init(&f->l, 120) < 0)
		return -1;
	*state = f;
	return 0;
}

static int gpu_teardown(void **state)
{
	struct gpu_fixture *f = *state;
	top_line_free(&f->l);
	gpuctl_snapshot_free(f->snap);
	free(f);
	return 0;
}

static void test_sparkline(void **state)
{
	struct gpu_fixture *f = *state;
	static const int8_t samples[] = {0, 50, 100, -1, 79, 80};
	/* level v * 8 / 101: 0 -> 0, 50 -> 3, 100 -> 7, 79 -> 6, 80 -> 6 */
	static const struct top_cell want[] = {
	        {'_', TOP_A_OK, 1},  {'-', TOP_A_WARN, 4}, {'#', TOP_A_FAIL, 8},
	        {' ', TOP_A_DIM, 0}, {'*', TOP_A_WARN, 7}, {'*', TOP_A_FAIL, 7},
	};

	for (size_t i = 0; i < sizeof(samples); i++)
		f->gpus[0].util[i] = samples[i];
	f->m.hist_pos = sizeof(samples);
	f->m.hist_len = sizeof(samples);
	top_gpu_line(&f->l, &f->m, 0, 1);
	/* at 120 columns: "    util " then 16 cells, the newest sample last */
	assert_string_equal(text_of(&f->l, 0, 9), "    util ");
	for (int x = 9; x < 9 + 10; x++) { /* the 10 cells before the 6 samples: no sample */
		assert_int_equal(f->l.cells[x].ch, ' ');
		assert_int_equal(f->l.cells[x].glyph, 0);
	}
	for (int k = 0; k < 6; k++) {
		const struct top_cell *c = &f->l.cells[19 + k];
		assert_int_equal(c->ch, want[k].ch);
		assert_int_equal(c->attr, want[k].attr);
		assert_int_equal(c->glyph, want[k].glyph);
	}
	/* then the memory history (all unknown: blank), the pool and the holder (no leases) */
	assert_string_equal(text_of(&f->l, 25, 5), " mem ");
	assert_string_equal(text_of(&f->l, 30, 16), "                ");
	assert_string_equal(text_of(&f->l, 46, 15), "  default  free");
}

static void test_bar(void **state)
{
	struct gpu_fixture *f = *state;

	snapshot_set_int(f->snap, 0, GPUCTL_F_UTIL_GPU, 50);
	top_gpu_line(&f->l, &f->m, 0, 0);
	/* "%3zu %-12.12s %-14.14s": index, short UUID, the name without "NVIDIA " */
	assert_string_equal(text_of(&f->l, 0, 32), "  0 GPU-12345678 A100-SXM4-80GB ");
	/* 120 columns: (120 - 37) / 4 = 20 per bar, 19 drawn, 17 inside the brackets; 50 %:
	 * round(8.5) = 9 '|', then blanks, "50%" at the right end */
	assert_string_equal(text_of(&f->l, 32, 19), "[|||||||||     50%]");
	for (int x = 33; x < 42; x++)
		assert_int_equal(f->l.cells[x].attr, TOP_A_WARN);
	/* memory unknown (no total): an empty bar with "-" */
	assert_string_equal(text_of(&f->l, 52, 19), "[                -]");
	/* the verdict column at 32 + 4 * 20: unknown */
	assert_string_equal(text_of(&f->l, 112, 1), "?");

	snapshot_set_int(f->snap, 0, GPUCTL_F_UTIL_GPU, 100);
	top_gpu_line(&f->l, &f->m, 0, 0);
	/* 100 %: all 17 filled, the value over the last 4 */
	assert_string_equal(text_of(&f->l, 32, 19), "[|||||||||||||100%]");
	assert_int_equal(f->l.cells[33].attr, TOP_A_FAIL);
	snapshot_set_int(f->snap, 0, GPUCTL_F_UTIL_GPU, 0);
	top_gpu_line(&f->l, &f->m, 0, 0);
	assert_string_equal(text_of(&f->l, 32, 19), "[               0%]");
}

/* ---- the changed cells of a line ---- */

static void test_line_diff(void **state)
{
	(void)state;
	struct top_line old, l;
	int from = -1, to = -1;

	assert_int_equal(top_line_init(&old, 8), 0);
	assert_int_equal(top_line_init(&l, 8), 0);
	top_put(&old, TOP_A_NONE, "abcdef");
	top_put(&l, TOP_A_NONE, "abcdef");
	assert_false(top_line_diff(old.cells, &l, &from, &to));
	assert_int_equal(from, -1); /* untouched */

	top_line_clear(&l);
	top_put(&l, TOP_A_NONE, "abXdeY"); /* cells 2 and 5 */
	assert_true(top_line_diff(old.cells, &l, &from, &to));
	assert_int_equal(from, 2);
	assert_int_equal(to, 6);

	top_line_clear(&l);
	top_put(&l, TOP_A_WARN, "a"); /* only the attribute of cell 0 */
	top_put(&l, TOP_A_NONE, "bcdef");
	assert_true(top_line_diff(old.cells, &l, &from, &to));
	assert_int_equal(from, 0);
	assert_int_equal(to, 1);

	top_line_clear(&l);
	top_put(&l, TOP_A_NONE, "abcdef");
	l.cells[7] = (struct top_cell){.ch = ' ', .glyph = 3}; /* the last cell's glyph */
	assert_true(top_line_diff(old.cells, &l, &from, &to));
	assert_int_equal(from, 7);
	assert_int_equal(to, 8);
	top_line_free(&old);
	top_line_free(&l);
}

/* ---- the process list at 80 columns ---- */

static void test_columns_at_80(void **state)
{
	(void)state;
	struct top_view v = {.sort = TOP_COL_GPU};
	struct top_model m = proc_model(3);
	struct top_line l;

	assert_int_equal(top_line_init(&l, 80), 0);
	top_proc_head(&l, &v);
	/* 80: 63 fixed columns leave 17 (< 34): HOST-MEM goes (54, 26 left), then ELAPSED (44,
	 * 36 left); WORKLOAD at 44, max(16, 35 / 3) = 16 wide, COMMAND at 61. GPU^ at 0,
	 * PID right-aligned in 4..10, USER at 12, GPU-MEM in 23..30, %SM in 32..35, %CPU in
	 * 37..42 */
	assert_string_equal(text_of(&l, 0, 80),
	                    "GPU^    PID USER        GPU-MEM  %SM   %CPU WORKLOAD         COMMAND"
	                    "            ");
	static const struct {
		int x;
		enum top_col c;
	} at[] = {{0, TOP_COL_GPU},      {3, TOP_COL_GPU},       {4, TOP_COL_PID},
	          {11, TOP_COL_PID},     {12, TOP_COL_USER},     {22, TOP_COL_USER},
	          {23, TOP_COL_GPU_MEM}, {32, TOP_COL_SM},       {37, TOP_COL_CPU},
	          {43, TOP_COL_CPU},     {44, TOP_COL_WORKLOAD}, {60, TOP_COL_WORKLOAD},
	          {61, TOP_COL_COMMAND}, {79, TOP_COL_COMMAND}};
	for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++)
		assert_int_equal(top_col_at(at[i].x, 80), at[i].c);

	/* B: " %2zu" GPU 0 in 0..2, pid 200 in 4..10, alice at 12 (10 wide), 8 GiB "8.0G",
	 * 90 %SM, 5.0 %CPU; its workload "unit jupyter.service" in 16 cells: its words that fit
	 * with " ..."; from 61 the command: its words that fit the 19 cells left with " ..." (no
	 * word cut, docs/gpuctl.1 "top") */
	snprintf(procs[1].command, sizeof(procs[1].command), "%s",
	         "./bench --a-very-long-option-list-that-does-not-fit");
	top_proc_line(&l, &m, &procs[1]);
	assert_string_equal(text_of(&l, 0, 80),
	                    "  0     200 alice          8.0G   90    5.0 unit ...         "
	                    "./bench ...        ");
	top_line_free(&l);

	/* 120: every column; WORKLOAD at 63, 56 / 3 = 18 wide, COMMAND at 82 */
	assert_int_equal(top_line_init(&l, 120), 0);
	top_proc_head(&l, &v);
	assert_string_equal(text_of(&l, 0, 89),
	                    "GPU^    PID USER        GPU-MEM  %SM   %CPU HOST-MEM   ELAPSED "
	                    "WORKLOAD           COMMAND");
	assert_int_equal(top_col_at(62, 120), TOP_COL_ELAPSED);
	assert_int_equal(top_col_at(63, 120), TOP_COL_WORKLOAD);
	assert_int_equal(top_col_at(81, 120), TOP_COL_WORKLOAD);
	assert_int_equal(top_col_at(82, 120), TOP_COL_COMMAND);
	top_proc_line(&l, &m, &procs[1]);
	assert_string_equal(text_of(&l, 0, 93),
	                    "  0     200 alice          8.0G   90    5.0     300M   1:23:20 "
	                    "unit ...           ./bench ...");
	/* 160: WORKLOAD min(32, 96 / 3) = 32 wide, the label whole */
	top_line_free(&l);
	assert_int_equal(top_line_init(&l, 160), 0);
	top_proc_line(&l, &m, &procs[1]);
	assert_string_equal(text_of(&l, 63, 33), "unit jupyter.service             ");
	/* a hostile label: no control byte on the line, only its words that fit */
	struct gpuctl_workload evil = {.kind = GPUCTL_WORKLOAD_UNIT,
	                               .label = "unit \033]0;x\a\033[2J\n.service"};
	procs[1].wl = &evil;
	top_proc_line(&l, &m, &procs[1]);
	assert_string_equal(text_of(&l, 63, 33), "unit ?]0;x??[2J?.service         ");
	top_line_free(&l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_sort_each_column),
	        cmocka_unit_test(test_sort_ties),
	        cmocka_unit_test(test_filter),
	        cmocka_unit_test_setup_teardown(test_sparkline, gpu_setup, gpu_teardown),
	        cmocka_unit_test_setup_teardown(test_bar, gpu_setup, gpu_teardown),
	        cmocka_unit_test(test_line_diff),
	        cmocka_unit_test(test_columns_at_80),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
