// SPDX-License-Identifier: MIT
/*
 * test-agent-watch.c: the pure parts of the agent's watch (src/cli/agent-watch.c, metrics.c):
 * a violation as JSON, the kinds' names, gpuctl_violations_total on the page, and notify with
 * a utmp file that lists no terminal of the user.
 *
 * Expected values come from docs/agent.md ("Violations": the JSON fields and their nulls, the
 * kinds) and docs/metrics.md (gpuctl_violations_total, every kind shown, 0 included), in the
 * Prometheus text exposition format 0.0.4.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent-watch.h"
#include "metrics.h"

static void test_kind_names(void **state)
{
	(void)state;
	assert_string_equal(agent_violation_kind_name(AGENT_VIOLATION_FOREIGN), "foreign");
	assert_string_equal(agent_violation_kind_name(AGENT_VIOLATION_OVERUSE), "overuse");
	assert_string_equal(agent_violation_kind_name(AGENT_VIOLATION_OUTSIDE), "outside");
	assert_null(agent_violation_kind_name(AGENT_VIOLATION_KINDS));
}

static void test_json(void **state)
{
	struct agent_violation v = {.kind = AGENT_VIOLATION_OVERUSE,
	                            .time = 86400.0 + 3661.5,
	                            .uid = 1001,
	                            .user = "alice",
	                            .pid = 4242,
	                            .comm = "python",
	                            .gpu = 3,
	                            .gpu_uuid = "GPU-abc",
	                            .pool = "default",
	                            .enforce = "watch",
	                            .holder_pid = 4200,
	                            .mem_used = 8,
	                            .mem_allowed = 5,
	                            .detail = "the shared lease ...",
	                            .action = "log"};
	json_t *o;

	(void)state;
	o = agent_violation_json(&v);
	assert_non_null(o);
	assert_string_equal(json_string_value(json_object_get(o, "kind")), "overuse");
	assert_string_equal(json_string_value(json_object_get(o, "time")), "1970-01-02T01:01:01Z");
	assert_string_equal(json_string_value(json_object_get(o, "user")), "alice");
	assert_int_equal(json_integer_value(json_object_get(o, "uid")), 1001);
	assert_int_equal(json_integer_value(json_object_get(o, "pid")), 4242);
	assert_string_equal(json_string_value(json_object_get(o, "comm")), "python");
	assert_int_equal(json_integer_value(json_object_get(o, "gpu")), 3);
	assert_string_equal(json_string_value(json_object_get(o, "uuid")), "GPU-abc");
	assert_string_equal(json_string_value(json_object_get(o, "pool")), "default");
	assert_string_equal(json_string_value(json_object_get(o, "enforce")), "watch");
	assert_int_equal(json_integer_value(json_object_get(o, "holder_pid")), 4200);
	assert_int_equal(json_integer_value(json_object_get(o, "memory_used")), 8);
	assert_int_equal(json_integer_value(json_object_get(o, "memory_allowed")), 5);
	assert_string_equal(json_string_value(json_object_get(o, "detail")),
	                    "the shared lease ...");
	assert_string_equal(json_string_value(json_object_get(o, "action")), "log");
	assert_int_equal(json_object_size(o), 15);
	json_decref(o);
	/* what a foreign violation does not have is null */
	v.kind = AGENT_VIOLATION_FOREIGN;
	v.user = NULL;
	v.holder_pid = 0;
	v.mem_used = v.mem_allowed = -1;
	o = agent_violation_json(&v);
	assert_non_null(o);
	assert_true(json_is_null(json_object_get(o, "user")));
	assert_true(json_is_null(json_object_get(o, "holder_pid")));
	assert_true(json_is_null(json_object_get(o, "memory_used")));
	assert_true(json_is_null(json_object_get(o, "memory_allowed")));
	json_decref(o);
}

static void test_counter_on_the_page(void **state)
{
	const uint64_t counts[AGENT_VIOLATION_KINDS] = {2, 0, 7};
	struct metrics_stats st = {0};
	struct metrics_input in = {.hostname = "h", .stats = &st};
	struct textbuf b = {0};

	(void)state;
	assert_int_equal(metrics_render(&in, &b), 0);
	assert_null(strstr(b.data, "gpuctl_violations_total")); /* the exporter alone */
	free(b.data);
	b = (struct textbuf){0};
	in.violations = counts;
	assert_int_equal(metrics_render(&in, &b), 0);
	assert_non_null(strstr(b.data, "\n# TYPE gpuctl_violations_total counter\n"));
	assert_non_null(strstr(b.data, "\ngpuctl_violations_total{kind=\"foreign\"} 2\n"));
	assert_non_null(strstr(b.data, "\ngpuctl_violations_total{kind=\"overuse\"} 0\n"));
	assert_non_null(strstr(b.data, "\ngpuctl_violations_total{kind=\"outside\"} 7\n"));
	free(b.data);
}

static void test_notify_without_terminals(void **state)
{
	char path[] = "/tmp/gpuctl-test-utmp-XXXXXX";
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	setenv("GPUCTL_UTMP", path, 1);
	assert_int_equal(watch_notify(0, "x"), 0);              /* an empty utmp: no terminal */
	assert_int_equal(watch_notify(UINT32_MAX - 7, "x"), 0); /* no such user */
	unsetenv("GPUCTL_UTMP");
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_kind_names),
	        cmocka_unit_test(test_json),
	        cmocka_unit_test(test_counter_on_the_page),
	        cmocka_unit_test(test_notify_without_terminals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
