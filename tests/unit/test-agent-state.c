// SPDX-License-Identifier: MIT
/*
 * test-agent-state.c: the agent's state files (src/cli/agent-state.c): lines are handed on
 * whole or not at all, and a file is believed only when root's in a directory only root can
 * change.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent-state.h"

static void test_getline(void **state)
{
	char buf[16];
	FILE *f = tmpfile();

	(void)state;
	assert_non_null(f);
	fputs("a\n", f);
	for (int i = 0; i < 40000; i++) /* far longer than buf: skipped whole */
		fputc('x', f);
	fputs(" tail\nb\n\nexactly-15-char\nc", f); /* then an empty line, one that fills buf */
	rewind(f);
	assert_true(agent_state_getline(f, buf, sizeof(buf)));
	assert_string_equal(buf, "a");
	assert_true(agent_state_getline(f, buf, sizeof(buf)));
	assert_string_equal(buf, "b");
	assert_true(agent_state_getline(f, buf, sizeof(buf)));
	assert_string_equal(buf, "");
	/* 15 characters and its newline do not fit 16 bytes with the NUL: skipped, not cut */
	assert_true(agent_state_getline(f, buf, sizeof(buf)));
	assert_string_equal(buf, "c"); /* the last line, without a newline */
	assert_false(agent_state_getline(f, buf, sizeof(buf)));
	fclose(f);
}

/* agent_state_write's printer: the text at arg. */
static int print_text(FILE *f, void *arg)
{
	return fputs(arg, f) < 0 ? -EIO : 0;
}

static void test_open_and_write(void **state)
{
	char dir[] = "/tmp/gpuctl-state-unit-XXXXXX", path[64];
	struct stat st;
	FILE *f;

	(void)state;
	if (geteuid() != 0) {
		print_message("not root: the files cannot be root's\n");
		skip();
	}
	assert_non_null(mkdtemp(dir));
	(void)snprintf(path, sizeof(path), "%s/x.state", dir);
	assert_int_equal(chmod(dir, 0755), 0);
	char one[] = "one\n", two[] = "two\n";

	assert_int_equal(agent_state_write(path, print_text, one), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	f = agent_state_open(path);
	assert_non_null(f);
	fclose(f);
	/* writable by others: not believed */
	assert_int_equal(chmod(path, 0666), 0);
	errno = 0;
	assert_null(agent_state_open(path));
	assert_int_equal(errno, EPERM);
	/* in a directory others may change: neither written nor believed */
	assert_int_equal(chmod(path, 0600), 0);
	assert_int_equal(chmod(dir, 0777), 0);
	assert_null(agent_state_open(path));
	assert_int_equal(agent_state_write(path, print_text, two), -EPERM);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_getline),
	        cmocka_unit_test(test_open_and_write),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
