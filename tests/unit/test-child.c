// SPDX-License-Identifier: MIT
/*
 * test-child.c: helper programs started by src/cli/child.c begin with no signal blocked and no
 * signal ignored, whatever the spawning thread blocks or ignores. The child reports its own
 * state from the kernel: proc(5) documents SigBlk and SigIgn in /proc/PID/status as hexadecimal
 * masks in which bit (N - 1) stands for signal N.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "child.h"

/* The mask after "name:\t" in a /proc/PID/status text. */
static unsigned long long status_mask(const char *text, const char *name)
{
	const char *at = strstr(text, name);

	assert_non_null(at);
	return strtoull(at + strlen(name) + 1, NULL, 16);
}

static unsigned long long bit(int sig)
{
	return 1ULL << (sig - 1);
}

static void test_clean_signals(void **state)
{
	/* grep itself, not through sh: dash clears its signal mask when it starts */
	char grep[] = "grep", e[] = "-E", re[] = "^Sig(Blk|Ign):", file[] = "/proc/self/status";
	char *argv[] = {grep, e, re, file, NULL};
	struct sigaction ign = {.sa_handler = SIG_IGN}, old_pipe, old_hup;
	sigset_t block, old_mask;
	char out[512];

	(void)state;
	sigemptyset(&block);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGUSR1);
	sigprocmask(SIG_BLOCK, &block, &old_mask);
	sigaction(SIGPIPE, &ign, &old_pipe);
	sigaction(SIGHUP, &ign, &old_hup);
	int st = spawn_capture(argv, out, sizeof(out), 10);
	sigprocmask(SIG_SETMASK, &old_mask, NULL);
	sigaction(SIGPIPE, &old_pipe, NULL);
	sigaction(SIGHUP, &old_hup, NULL);

	assert_true(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	unsigned long long blk = status_mask(out, "SigBlk:");
	unsigned long long ignored = status_mask(out, "SigIgn:");
	assert_int_equal(blk & (bit(SIGTERM) | bit(SIGINT) | bit(SIGUSR1)), 0);
	assert_int_equal(ignored & (bit(SIGPIPE) | bit(SIGHUP)), 0);
}

/* The control: the spawning process really had them blocked and ignored, visible in its own
 * status, so the test above would see them in a child that inherited them. */
static void test_parent_state_visible(void **state)
{
	struct sigaction ign = {.sa_handler = SIG_IGN}, old_pipe;
	sigset_t block, old_mask;
	char buf[4096];
	size_t len;
	FILE *f;

	(void)state;
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	sigprocmask(SIG_BLOCK, &block, &old_mask);
	sigaction(SIGPIPE, &ign, &old_pipe);
	f = fopen("/proc/self/status", "r");
	assert_non_null(f);
	len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[len] = '\0';
	sigprocmask(SIG_SETMASK, &old_mask, NULL);
	sigaction(SIGPIPE, &old_pipe, NULL);
	assert_true(status_mask(buf, "SigBlk:") & bit(SIGUSR1));
	assert_true(status_mask(buf, "SigIgn:") & bit(SIGPIPE));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_clean_signals),
	        cmocka_unit_test(test_parent_state_visible),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
