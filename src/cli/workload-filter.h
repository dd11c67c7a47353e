/* SPDX-License-Identifier: MIT */
/*
 * workload-filter.h: which workloads `ps --job`/`--workload` and `top --workload` ask for, and
 * how the CLI shows one (a table cell, a JSON object). The parsers are pure (no I/O) and fuzzed
 * (fuzz/fuzz-workload-filter.c); docs/gpuctl.1 ("ps", "top") documents the forms.
 */
#ifndef GPUCTL_CLI_WORKLOAD_FILTER_H
#define GPUCTL_CLI_WORKLOAD_FILTER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuctl/gpuctl.h"

/* The workloads a filter keeps: those that match every part given (none given: all). */
struct wl_filter {
	bool job_set;        /* --job given */
	uint32_t job;        /* its job id: a job's own id, or an array's (all its tasks) */
	bool task_set;       /* J_T: the array task T of array job J */
	uint32_t task;       /* ... T */
	char step[16];       /* J.S: the step ("0", "batch", "extern", "interactive"); "" any */
	bool pattern_set;    /* --workload given */
	int kind;            /* its KIND: prefix (enum gpuctl_workload_kind), -1 any */
	const char *pattern; /* the rest (borrowed from argv); "" any */
};

#define WL_FILTER_INIT                                                                             \
	{                                                                                          \
		.kind = -1                                                                         \
	}

/* Parses --job's J, J_T, J.S or J_T.S into f (job ids 1 to 4294967294, steps a number or
 * batch, extern, interactive). 0, or -EINVAL with f untouched. */
int wl_filter_job(struct wl_filter *f, const char *text);
/* Parses --workload's [KIND:]PATTERN into f (text is borrowed: it must outlive f). KIND is a
 * name of gpuctl_workload_kind_name; PATTERN with * ? or [ is a shell glob (fnmatch) matched
 * against the whole label, else a text the label, name or id contains. 0, or -EINVAL (an empty
 * text) with f untouched. */
int wl_filter_pattern(struct wl_filter *f, const char *text);
/* Whether f asks for anything (a filter with no part keeps everything). */
bool wl_filter_active(const struct wl_filter *f);
/* Whether wl (NULL: unknown) is one f keeps. */
bool wl_filter_match(const struct wl_filter *f, const struct gpuctl_workload *wl);

/* The JSON object of wl: every field of struct gpuctl_workload by its name, kind as
 * gpuctl_workload_kind_name writes it, what is unknown as null (docs/json.md "Workloads");
 * json_null() for wl NULL. New reference, NULL when out of memory. */
json_t *wl_json(const struct gpuctl_workload *wl);

#endif /* GPUCTL_CLI_WORKLOAD_FILTER_H */
