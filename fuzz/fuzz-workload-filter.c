// SPDX-License-Identifier: MIT
/*
 * fuzz-workload-filter.c: libFuzzer target for `gpuctl ps --job` and `--workload`
 * (src/cli/workload-filter.c), and the JSON of a workload whose strings are the input.
 *
 * The input is one NUL-terminated argument, as it would arrive from argv. Properties checked
 * beyond "no crash, no leak": a failed parse leaves the filter untouched; a job filter that
 * parsed matches the Slurm workload made of its own job, task and step; a pattern without glob
 * characters matches a workload whose label is the pattern itself; the JSON of a workload with
 * the input as every string is made (any bytes: json_text).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "workload-filter.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';

	struct wl_filter f = WL_FILTER_INIT, g = WL_FILTER_INIT;
	if (wl_filter_job(&f, text) < 0) {
		if (memcmp(&f, &g, sizeof(f)) != 0)
			abort();
	} else {
		struct gpuctl_workload wl = {.kind = GPUCTL_WORKLOAD_SLURM,
		                             .slurm_job = f.task_set ? f.job + 1 : f.job,
		                             .slurm_array_job = f.task_set ? f.job : 0,
		                             .slurm_array_task = f.task,
		                             .slurm_step = f.step[0] ? f.step : NULL,
		                             .label = "slurm"};
		if (!wl_filter_match(&f, &wl))
			abort();
	}
	struct wl_filter p = WL_FILTER_INIT;
	if (wl_filter_pattern(&p, text) == 0 && p.kind < 0 && !strpbrk(p.pattern, "*?[")) {
		struct gpuctl_workload wl = {.kind = GPUCTL_WORKLOAD_UNIT, .label = text};
		if (!wl_filter_match(&p, &wl))
			abort();
	}
	struct gpuctl_workload all = {.kind = GPUCTL_WORKLOAD_POD,
	                              .cgroup = text,
	                              .runtime = text,
	                              .id = text,
	                              .name = text,
	                              .pod_namespace = text,
	                              .pod_uid = text,
	                              .container = text,
	                              .label = text};
	json_decref(wl_json(&all));
	free(text);
	return 0;
}
