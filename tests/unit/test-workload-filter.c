// SPDX-License-Identifier: MIT
/*
 * test-workload-filter.c: `gpuctl ps --job`/`--workload` and `top --workload`
 * (src/cli/workload-filter.c), a workload's JSON object, and the table cell of any bytes
 * (format_cell_text in src/cli/format.c).
 *
 * Expected values by hand from the forms docs/gpuctl.1 documents ("ps"): Slurm's J, J_T, J.S
 * (squeue/sacct spellings: an array's tasks count from 0; steps a number or batch, extern,
 * interactive); [KIND:]PATTERN with a glob over the whole label or else a text in label, name
 * or id; docs/json.md "Workloads" for the JSON; the cell: controls '?', invalid UTF-8 U+FFFD.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "format.h"
#include "workload-filter.h"

static const struct gpuctl_workload step0 = {.kind = GPUCTL_WORKLOAD_SLURM,
                                             .pid = 10,
                                             .ns_pid = 10,
                                             .uid = 1000,
                                             .cgroup = "/slurm/uid_1000/job_4242/step_0",
                                             .slurm_job = 4242,
                                             .slurm_step = "0",
                                             .unit_uid = UINT32_MAX,
                                             .label = "slurm 4242.0"};
/* task 7 of array job 4000, itself job 4242 */
static const struct gpuctl_workload task7 = {.kind = GPUCTL_WORKLOAD_SLURM,
                                             .slurm_job = 4242,
                                             .slurm_step = "batch",
                                             .slurm_array_job = 4000,
                                             .slurm_array_task = 7,
                                             .label = "slurm 4000_7.batch"};
static const struct gpuctl_workload unit = {.kind = GPUCTL_WORKLOAD_UNIT,
                                            .name = "jupyter.service",
                                            .uid = 0,
                                            .unit_uid = UINT32_MAX,
                                            .label = "unit jupyter.service"};
static const struct gpuctl_workload ctr = {.kind = GPUCTL_WORKLOAD_CONTAINER,
                                           .runtime = "docker",
                                           .id = "0123456789abcdef",
                                           .name = "web-1",
                                           .label = "docker web-1"};

static bool job(const char *text, const struct gpuctl_workload *wl)
{
	struct wl_filter f = WL_FILTER_INIT;
	assert_int_equal(wl_filter_job(&f, text), 0);
	return wl_filter_match(&f, wl);
}

static bool pat(const char *text, const struct gpuctl_workload *wl)
{
	struct wl_filter f = WL_FILTER_INIT;
	assert_int_equal(wl_filter_pattern(&f, text), 0);
	return wl_filter_match(&f, wl);
}

static void test_job(void **state)
{
	(void)state;
	assert_true(job("4242", &step0));
	assert_true(job("4242.0", &step0));
	assert_false(job("4242.1", &step0));
	assert_false(job("4242.batch", &step0));
	assert_false(job("4243", &step0));
	assert_false(job("4242", &unit));
	/* an array task: by its own job id, its array's id, or J_T */
	assert_true(job("4242", &task7));
	assert_true(job("4000", &task7));
	assert_true(job("4000_7", &task7));
	assert_true(job("4000_7.batch", &task7));
	assert_false(job("4000_7.0", &task7));
	assert_false(job("4000_6", &task7));
	assert_false(job("4242_7", &task7));
	assert_false(job("4000_7", &step0));
	assert_false(job("4242", NULL));

	static const char *const bad[] = {"",     "0",      "x",     "-1",   "+5",     "42 ",
	                                  "42_",  "_1",     "42.",   "42.x", "42.-1",  "4294967295",
	                                  "42_x", "42.0.0", "42__1", " 42",  "42_1_2", "42.batch2"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct wl_filter f = WL_FILTER_INIT, g = WL_FILTER_INIT;
		assert_int_equal(wl_filter_job(&f, bad[i]), -EINVAL);
		assert_memory_equal(&f, &g, sizeof(f)); /* untouched */
	}
	struct wl_filter f = WL_FILTER_INIT;
	assert_int_equal(wl_filter_job(&f, "4294967294_0.extern"), 0);
	assert_int_equal(f.job, 4294967294u);
	assert_true(f.task_set);
	assert_int_equal(f.task, 0);
	assert_string_equal(f.step, "extern");
	assert_int_equal(wl_filter_job(&f, "7.007"), 0); /* a step number as Slurm writes it */
	assert_string_equal(f.step, "7");
}

static void test_pattern(void **state)
{
	(void)state;
	assert_true(pat("slurm:", &step0));
	assert_false(pat("slurm:", &unit));
	assert_true(pat("unit:", &unit));
	assert_true(pat("jupyter", &unit)); /* in the label */
	assert_true(pat("unit:jupyter.service", &unit));
	assert_false(pat("pod:jupyter", &unit));  /* kind first */
	assert_true(pat("unit jupyter*", &unit)); /* a glob over the whole label */
	assert_false(pat("jupyter*", &unit));     /* ... whole */
	assert_true(pat("*4242.?", &step0));
	assert_true(pat("slurm 4242.[0-3]", &step0));
	assert_true(pat("0123456", &ctr)); /* a container id's prefix */
	assert_true(pat("web-1", &ctr));   /* its name */
	assert_true(pat("container:", &ctr));
	assert_true(pat("x:y", &(struct gpuctl_workload){.label = "a x:y b"})); /* no kind x */
	assert_false(pat("docker", &step0));
	assert_false(pat("bare:", NULL));
	struct wl_filter f = WL_FILTER_INIT, g = WL_FILTER_INIT;
	assert_int_equal(wl_filter_pattern(&f, ""), -EINVAL);
	assert_memory_equal(&f, &g, sizeof(f));
	assert_false(wl_filter_active(&f));
	assert_true(wl_filter_match(&f, NULL)); /* no filter keeps all */
	/* --job and --workload together: both */
	assert_int_equal(wl_filter_job(&f, "4242"), 0);
	assert_int_equal(wl_filter_pattern(&f, "*batch"), 0);
	assert_true(wl_filter_match(&f, &task7));
	assert_false(wl_filter_match(&f, &step0));
}

static void test_json(void **state)
{
	(void)state;
	json_t *o = wl_json(&step0);
	assert_non_null(o);
	static const char *const keys[] = {"kind",
	                                   "pid",
	                                   "ns_pid",
	                                   "uid",
	                                   "cgroup",
	                                   "runtime",
	                                   "id",
	                                   "name",
	                                   "pod_namespace",
	                                   "pod_uid",
	                                   "container",
	                                   "slurm_job",
	                                   "slurm_step",
	                                   "slurm_array_job",
	                                   "slurm_array_task",
	                                   "unit_uid",
	                                   "label",
	                                   "truncated"};
	assert_int_equal(json_object_size(o), sizeof(keys) / sizeof(keys[0]));
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		assert_non_null(json_object_get(o, keys[i]));
	assert_string_equal(json_string_value(json_object_get(o, "kind")), "slurm");
	assert_int_equal(json_integer_value(json_object_get(o, "slurm_job")), 4242);
	assert_string_equal(json_string_value(json_object_get(o, "slurm_step")), "0");
	assert_true(json_is_null(json_object_get(o, "slurm_array_job")));
	assert_true(json_is_null(json_object_get(o, "runtime")));
	assert_true(json_is_null(json_object_get(o, "unit_uid"))); /* not a unit */
	assert_true(json_is_false(json_object_get(o, "truncated")));
	json_decref(o);
	o = wl_json(&unit);
	assert_true(json_is_null(json_object_get(o, "unit_uid"))); /* the system's */
	assert_true(json_is_null(json_object_get(o, "slurm_job")));
	assert_int_equal(json_integer_value(json_object_get(o, "uid")), 0);
	json_decref(o);
	o = wl_json(&(struct gpuctl_workload){.kind = GPUCTL_WORKLOAD_POD,
	                                      .uid = UINT32_MAX,
	                                      .name = "\xff\x1b[2J",
	                                      .label = "pod \xc3"});
	assert_true(json_is_null(json_object_get(o, "uid")));
	assert_true(json_is_null(json_object_get(o, "ns_pid")));
	assert_string_equal(json_string_value(json_object_get(o, "name")), "\xef\xbf\xbd\x1b[2J");
	assert_string_equal(json_string_value(json_object_get(o, "label")), "pod \xef\xbf\xbd");
	json_decref(o);
	o = wl_json(NULL);
	assert_true(json_is_null(o));
	json_decref(o);
}

static void test_cell(void **state)
{
	(void)state;
	char buf[256];
	format_cell_text("unit jupyter.service", 32, buf, sizeof(buf));
	assert_string_equal(buf, "unit jupyter.service");
	format_cell_text("a\x1b]0;t\x07\nb\x7f", 32, buf, sizeof(buf));
	assert_string_equal(buf, "a?]0;t??b?");
	format_cell_text("\xc2\x9b"
	                 "2J \xc3\xa9",
	                 32, buf, sizeof(buf)); /* C1 CSI, then é */
	assert_string_equal(buf, "?2J \xc3\xa9");
	format_cell_text("x\xff"
	                 "y",
	                 32, buf, sizeof(buf));
	assert_string_equal(buf, "x\xef\xbf\xbdy");
	format_cell_text("0123456789", 10, buf, sizeof(buf));
	assert_string_equal(buf, "0123456789");
	format_cell_text("0123456789a", 10, buf, sizeof(buf));
	assert_string_equal(buf, "0123456...");
	format_cell_text("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 4, buf, sizeof(buf));
	assert_string_equal(buf, "\xc3\xa9...");
	format_cell_text("\xc3\xa9\xc3\xa9", 4, buf, 4); /* too small: cut at a character */
	assert_string_equal(buf, "\xc3\xa9");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_job),
	        cmocka_unit_test(test_pattern),
	        cmocka_unit_test(test_json),
	        cmocka_unit_test(test_cell),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
