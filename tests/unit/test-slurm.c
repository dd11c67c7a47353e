// SPDX-License-Identifier: MIT
/*
 * test-slurm.c: `gpuctl health --slurm`'s reading of `scontrol show node` and its drain/resume
 * decision (src/cli/slurm.c), on output in the form scontrol(1) prints: "Key=Value" pairs,
 * State= with "+DRAIN" flags, Reason= to the end of the line followed by " [user@time]".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "slurm.h"

static struct slurm_node parse(const char *text)
{
	struct slurm_node n;

	slurm_parse_node(text, strlen(text), &n);
	return n;
}

static void test_parse(void **state)
{
	struct slurm_node n;

	(void)state;
	n = parse("NodeName=node7 Arch=x86_64 CoresPerSocket=32\n"
	          "   State=IDLE ThreadsPerCore=2 TmpDisk=0 Weight=1\n"
	          "   Reason=(null)\n");
	assert_true(n.found);
	assert_false(n.drained);
	assert_string_equal(n.reason, "");

	n = parse("NodeName=node7 Arch=x86_64\n"
	          "   State=MIXED+DRAIN ThreadsPerCore=2\n"
	          "   Reason=gpuctl: GPU 1 FAIL (xid 79) [root@2026-11-30T10:00:00]\n");
	assert_true(n.drained);
	assert_string_equal(n.reason, "gpuctl: GPU 1 FAIL (xid 79)");
	assert_true(slurm_reason_is_ours(n.reason));

	n = parse("NodeName=n1\n   State=DRAINED\n   Reason=bad [psu] check "
	          "[admin@2026-01-01T00:00:00]\n");
	assert_true(n.drained);
	assert_string_equal(n.reason, "bad [psu] check");
	assert_false(slurm_reason_is_ours(n.reason));

	/* "OldState=", "NextState=" are not State=; a reason without the suffix is kept whole */
	n = parse("NodeName=n1 OldState=DRAIN State=IDLE NextState=DRAIN\n   Reason=plain\n");
	assert_false(n.drained);
	assert_string_equal(n.reason, "plain");

	n = parse("Node n1 not found\n");
	assert_false(n.found);
	assert_false(n.drained);

	slurm_parse_node(NULL, 0, &n);
	assert_false(n.found);
	/* not NUL-terminated: stops at len */
	const char cut[] = {'N', 'o', 'd', 'e', 'N', 'a', 'm', 'e', '=', 'x', ' ',
	                    'S', 't', 'a', 't', 'e', '=', 'D', 'R', 'A', 'I', 'N'};
	slurm_parse_node(cut, sizeof(cut), &n);
	assert_true(n.found);
	assert_true(n.drained);
	slurm_parse_node(cut, sizeof(cut) - 1, &n);
	assert_false(n.drained);
}

static void test_decide(void **state)
{
	struct slurm_node idle = {.found = true}, ours = {.found = true, .drained = true},
	                  admin = {.found = true, .drained = true};

	(void)state;
	(void)snprintf(ours.reason, sizeof(ours.reason), "gpuctl: GPU 0 FAIL (lost)");
	(void)snprintf(admin.reason, sizeof(admin.reason), "maintenance");
	assert_int_equal(slurm_decide(&idle, true), SLURM_DRAIN);
	assert_int_equal(slurm_decide(&idle, false), SLURM_NONE);
	assert_int_equal(slurm_decide(&ours, true), SLURM_NONE);
	assert_int_equal(slurm_decide(&ours, false), SLURM_RESUME);
	assert_int_equal(slurm_decide(&admin, true), SLURM_NONE);
	assert_int_equal(slurm_decide(&admin, false), SLURM_NONE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_parse),
	        cmocka_unit_test(test_decide),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
