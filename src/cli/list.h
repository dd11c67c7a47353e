/* SPDX-License-Identifier: MIT */
/*
 * list.h: the parts of `gpuctl list`: the command, the at-a-glance table and the JSON
 * (cmd-list.c), and the nvidia-smi side, --query and --query-compute-apps (list-query.c).
 */
#ifndef GPUCTL_CLI_LIST_H
#define GPUCTL_CLI_LIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <time.h>

#include "cmd.h"
#include "format.h"
#include "query.h"

struct list_args {
	const char *ids;        /* -i/--id, NULL for every GPU */
	const char *query_text; /* --query, NULL when not given */
	const char *apps_text;  /* --query-compute-apps, NULL when not given */
	struct app_query *apps; /* parsed --query-compute-apps */
	struct format_spec fmt; /* --format and its modifiers */
	struct query *query;    /* parsed --query (or the default CSV columns) */
	size_t *sel;            /* chosen snapshot indices */
	size_t nsel;            /* number of chosen GPUs */
	int *verdict;           /* table and JSON: each GPU's health verdict (docs/health.md) */
	struct timespec now;    /* when the snapshot was taken: --query's timestamp */
	const char *driver;     /* the driver's version: --query's driver_version (or NULL) */
	size_t count;           /* the machine's GPUs: --query's count */
	bool wide;              /* -w/--wide: a process table with the host's facts */
	double loop;            /* -l/--loop: seconds between listings, 0 for one listing */
	bool again;             /* a later listing of --loop: no CSV header, a blank line first */
	bool color;             /* colour the table's cells (cli_use_color) */
	/* the table's and JSON's workloads: a cache for every listing (swept before each); NULL
	 * for CSV and --query, or when it could not be made (every workload unknown) */
	struct gpuctl_workloads *wls;
	struct gpuctl_ctx *ctx;   /* the context wls is read with */
	struct gpuctl_idle *idle; /* JSON: one sample's idle cases (docs/idle.md); NULL */
};

/* The table's WORKLOAD cells (PROCESSES' "LABEL: ", --wide's WORKLOAD) and --wide's COMMAND: at
 * most this many characters, longer ones cut with "..." (format_cell_text). */
#define LIST_WORKLOAD_WIDTH 32
#define LIST_COMMAND_WIDTH  1000

/* --help-query: what --query and --query-compute-apps accept, from the library's field table,
 * as nvidia-smi --help-query-gpu lists its fields. */
void list_print_help_query(FILE *f);

/* Parses --query text into *ret. 0, or the exit status after printing the usage error. */
int list_parse_query(const char *text, struct query **ret);
/* Parses a->apps_text into a->apps (CSV only, without --query and --wide). 0, or the exit
 * status after printing the usage error. */
int list_parse_apps(struct list_args *a, enum list_format kind);

/* One queried cell: a GPU field as nvidia-smi writes it, or a column of the whole query
 * (QUERY_DRIVER_VERSION, QUERY_TIMESTAMP, QUERY_COUNT). */
void list_query_cell(const struct gpuctl_snapshot *snap, const struct gpuctl_gpu *gpu, int col,
                     bool units, const struct timespec *now, char *buf, size_t size);

/* The chosen GPUs of snap as nvidia-smi --query-gpu CSV (a->query), or their compute
 * processes as --query-compute-apps CSV (a->apps); the header unless --noheader or a->again. */
void list_print_csv(const struct list_args *a, const struct gpuctl_snapshot *snap);
void list_print_apps_csv(const struct list_args *a, const struct gpuctl_snapshot *snap);
/* --query with --format table: the queried fields aligned. 0, or -ENOMEM. */
int list_print_query_table(const struct list_args *a, const struct gpuctl_snapshot *snap);

#endif /* GPUCTL_CLI_LIST_H */
