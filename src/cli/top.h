/* SPDX-License-Identifier: MIT */
/*
 * top.h: `gpuctl top`'s parts: the model (top-model.c: one refresh of GPUs, leases, health,
 * processes and waiters), the view (top-view.c: the model as lines of cells), and the command
 * (cmd-top.c: options, the plain-text frame; top-screen.c: the ncurses screen and its loop;
 * top-keys.c: what keys and the mouse do).
 *
 * Threads: the NVML part of a refresh (top_take) runs on the sampler's thread (sampler.h);
 * everything else, the model included, is the main thread's, which never calls NVML.
 */
#ifndef GPUCTL_CLI_TOP_H
#define GPUCTL_CLI_TOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cmd.h"
#include "workload-filter.h"

#define TOP_HISTORY 32 /* samples kept per GPU for the sparklines */

/* The process list's columns, by sort key (1-9, then 0 for WORKLOAD); on screen in this order
 * but WORKLOAD, which comes before COMMAND (top-view.c, screen_order). */
enum top_col {
	TOP_COL_GPU,
	TOP_COL_PID,
	TOP_COL_USER,
	TOP_COL_GPU_MEM,
	TOP_COL_SM,
	TOP_COL_CPU,
	TOP_COL_HOST_MEM,
	TOP_COL_ELAPSED,
	TOP_COL_COMMAND,
	TOP_COL_WORKLOAD,
	TOP_N_COLS,
};

/* One GPU's history and the facts of its row that are not in the snapshot. */
struct top_gpu {
	int8_t util[TOP_HISTORY]; /* utilisation %, -1 unknown; ring, newest at hist_pos - 1 */
	int8_t mem[TOP_HISTORY];  /* memory used %, -1 unknown */
	const char *pool;         /* its pool's name ("default" without pools); owned by the site */
};

/* One compute process (a process on two GPUs has two rows). */
struct top_proc {
	size_t gpu;   /* snapshot index */
	uint32_t pid; /* host pid */
	uint32_t uid; /* owner, when has_uid */
	bool has_uid;
	bool foreign;         /* belongs to no lease of its GPU (gpuctl_foreign_proc) */
	int64_t gpu_mem;      /* bytes, -1 unknown */
	int sm;               /* %SM in the driver's last sample, -1 unknown */
	double cpu;           /* host %CPU over the last interval, -1 unknown (first sample) */
	int64_t host_mem;     /* resident bytes, -1 unknown */
	double elapsed;       /* seconds since it started, -1 unknown */
	uint64_t start_ticks; /* its start time (proc(5)), to recognise it when signalling it */
	uint64_t cpu_ticks;   /* utime + stime at this refresh */
	char user[33];        /* user name (or uid), "?" unknown */
	char command[256];    /* full command line, else the kernel's name of it, "?" */
	char comm[16];        /* the kernel's name of it when command was read (exec changes it) */
	double command_time;  /* CLOCK_MONOTONIC of that read */
	/* who it works for: borrowed from the model's cache (m->wls), valid until the next
	 * refresh sweeps it; NULL unknown (its stat not read) */
	const struct gpuctl_workload *wl;
	bool idle;        /* idle by docs/idle.md (b) ... */
	uint64_t idle_ms; /* ... for this long */
};

/* p's workload label as the process list shows it ("?" unknown). */
static inline const char *top_proc_label(const struct top_proc *p)
{
	return p->wl && p->wl->label ? p->wl->label : "?";
}

struct sampler_sample;

struct top_model {
	struct cli *cli;
	const struct sampler_sample *sample; /* the current sample (a reference, sampler.h) */
	const struct gpuctl_snapshot *snap;  /* its snapshot */
	struct gpuctl_health_report *health; /* of snap, owned; NULL if it failed */
	struct gpuctl_lease_list *leases;    /* owned; NULL without a lease directory */
	struct gpuctl_foreign *foreign;      /* owned; NULL: none (no process) or read anew */
	double foreign_time;                 /* CLOCK_MONOTONIC of its scan */
	struct gpuctl_wait_list *waiters;    /* owned; NULL when none can be read */
	struct gpuctl_lease_request lreq;    /* the site's thresholds and share margin */
	struct top_gpu *gpus;                /* per snapshot index */
	size_t n_gpus;
	const char *ids; /* -i: the GPUs to show (gpuctl_ids_resolve forms), NULL: every GPU */
	size_t *shown;   /* the snapshot indices shown, in -i's order (else index order): the rows,
	                  * and the GPUs whose processes are listed; resolved for each new snapshot */
	size_t n_shown;
	size_t hist_pos;        /* next slot of the history rings */
	size_t hist_len;        /* samples in them (<= TOP_HISTORY) */
	struct top_proc *procs; /* every compute process of snap */
	size_t n_procs;
	/* the workloads of the processes by (pid, start time), for the life of top: a refresh
	 * reads none for a process it knows (gpuctl_workloads_get with the stat's start time),
	 * and sweeps those gone once (read_procs) */
	struct gpuctl_workloads *wls;
	double sample_time; /* CLOCK_MONOTONIC of the last refresh */
	/* the lease and wait lists are read again only when the lease directory changed
	 * (top-model.c, "Decisions"): */
	int lease_ifd;           /* inotify on its directories, -1 none (then: every refresh) */
	uint64_t lists_devices;  /* a hash of the devices (UUIDs) the lists are of */
	double lists_time;       /* CLOCK_MONOTONIC of that read */
	bool lists_current;      /* the lists were read whole and nothing changed since */
	unsigned long refreshes; /* refreshes that succeeded */
	char error[256];         /* the last refresh's failure, "" after a good one */
	char host[64];           /* the host name, read at the start (the title) */
	/* set by top_mark_stale (cmd-top.c) before each frame: 0, or while the next sample is
	 * overdue (sampler.h) the seconds NVML has not answered; the values are then those of the
	 * sample taken at values_time */
	double stale_s;
	double values_time; /* CLOCK_REALTIME of the current sample */
	/* idle cases (docs/idle.md): one tracker for top's life, fed each refresh; NULL when it
	 * could not be made (none shown) */
	struct gpuctl_idle *idle;
	uint32_t idle_window; /* --idle-window, seconds */
};

/* ---- the sampler's side (on its thread, with its context) ---- */

/* What the sampler's thread keeps between takes. */
struct top_sampling {
	size_t health_next; /* next health field to re-read (rotation) */
};

/* sampler_take_fn: the first snapshot (prev NULL: identity, static facts, every health field,
 * the processes), else a refresh of prev (gpuctl_snapshot_refresh of the shown fields and the
 * next health fields of the rotation), or a new first snapshot when the number of GPUs
 * changed. The data is a struct top_sample (top_sample_free). */
int top_take(struct gpuctl_ctx *ctx, void *userdata, const void *prev, void **ret_data);
void top_sample_free(void *data);

/* ---- the main thread's side ---- */

/* Sets up what does not come from NVML (no NVML call); ids: -i's list, NULL: every GPU. */
void top_model_init(struct top_model *m, struct cli *cli, const char *ids);
/* The first sample: a failed one is the command's error (printed; its exit status returned);
 * else its snapshot with leases, health and processes read for it: 0, or the exit status
 * after printing the error (before the screen is set up; an -i list that does not resolve
 * is a usage error, as for `list -i`). */
int top_model_start(struct top_model *m, const struct sampler_sample *smp);
/* A later sample: its snapshot, then leases, waiters, health verdicts and /proc read again
 * for it. A failed sample keeps the last state, sets m->error and returns its -errno. */
int top_model_update(struct top_model *m, const struct sampler_sample *smp);
void top_model_free(struct top_model *m);

/* The per-interval snapshot fields top re-reads (for docs and the calls test). */
size_t top_shown_fields(enum gpuctl_field *out, size_t max);

/* The verdict of GPU g (GPUCTL_HEALTH_*), -1 unknown; its first finding's text into buf. */
int top_gpu_verdict(const struct top_model *m, size_t g, char *finding, size_t size);

/* ---- view ---- */

enum top_attr {
	TOP_A_NONE,
	TOP_A_HEAD, /* column headers, title */
	TOP_A_OK,   /* health OK, low bars */
	TOP_A_WARN, /* WARN, middle bars */
	TOP_A_FAIL, /* FAIL, lost, high bars, errors */
	TOP_A_DIM,  /* placeholders */
	TOP_A_INFO, /* lease holders */
	TOP_A_N,
};

/* One cell: an ASCII character, or a sparkline level glyph (1..8, 0: none) drawn as a block
 * element where the terminal takes UTF-8 and as ch otherwise. */
struct top_cell {
	char ch;
	uint8_t attr;  /* enum top_attr */
	uint8_t glyph; /* 0, or 1..8 */
};

/* A line of cells, as wide as the screen. */
struct top_line {
	struct top_cell *cells;
	int width;
	int x; /* where the next put goes */
};

/* How the process list is shown. */
struct top_view {
	enum top_col sort; /* the sort column */
	bool descending;   /* its order */
	char filter[64];   /* substring of user, command or workload label; "" none */
	const struct wl_filter *workload; /* --workload: the processes listed; NULL all */
	size_t *order; /* indices into m->procs, filtered and sorted (top_view_sort) */
	size_t n_order;
	double delay; /* seconds between refreshes (title) */
};

/* Sorts and filters m's processes into v->order. -ENOMEM. */
int top_view_sort(struct top_view *v, const struct top_model *m);
/* The column's name (header) and its sort key character. */
const char *top_col_name(enum top_col c);
/* The column of the process list at screen column x of a list width columns wide. */
enum top_col top_col_at(int x, int width);

int top_line_init(struct top_line *l, int width);
/* The cells of l that differ from old (l->width cells): [*ret_from, *ret_to), the first changed
 * cell to the last; false (and nothing set) when none does. */
bool top_line_diff(const struct top_cell *old, const struct top_line *l, int *ret_from,
                   int *ret_to);
void top_line_free(struct top_line *l);
void top_line_clear(struct top_line *l);

/* The lines of each part; `line` is cleared first. */
/* While the sample is overdue (m->stale_s): "NVML not answering for N s - values from
 * HH:MM:SS"; false (and l cleared) when it is not. */
bool top_stale_line(struct top_line *l, const struct top_model *m);
/* Makes every cell of l dim: the values of an overdue sample. */
void top_line_dim(struct top_line *l);
void top_title(struct top_line *l, const struct top_model *m, const struct top_view *v,
               const char *focus);
void top_gpu_head(struct top_line *l);
/* GPU g's two lines (part 0: identity and bars, part 1: history, health, pool, holder). */
void top_gpu_line(struct top_line *l, const struct top_model *m, size_t g, int part);
void top_proc_head(struct top_line *l, const struct top_view *v);
void top_proc_line(struct top_line *l, const struct top_model *m, const struct top_proc *p);
/* The wait queue's heading, and its entry i. */
void top_queue_head(struct top_line *l, const struct top_model *m);
void top_queue_line(struct top_line *l, const struct top_model *m, size_t i);
size_t top_queue_count(const struct top_model *m);

/* Writes text (ASCII; other bytes become '?') with attr at the line's cursor, clipped. */
void top_put(struct top_line *l, enum top_attr attr, const char *text);
void top_putf(struct top_line *l, enum top_attr attr, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

#endif /* GPUCTL_CLI_TOP_H */
