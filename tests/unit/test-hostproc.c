// SPDX-License-Identifier: MIT
/*
 * test-hostproc.c: `gpuctl top`'s reading of /proc (src/cli/hostproc.c). The stat lines are in
 * proc(5)'s layout: pid (comm) state, then fields 4.. as decimal numbers; utime and stime are
 * fields 14 and 15, starttime 22, rss 24. The command name may hold blanks and ')'.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "hostproc.h"

/* fields 4..52 after "pid (comm) S": ppid pgrp session tty tpgid flags minflt cminflt majflt
 * cmajflt utime=12 stime=34 cutime cstime priority nice threads itrealvalue starttime=98765
 * vsize=1000 rss=250 ... */
#define TAIL                                                                                       \
	" S 1 4242 4242 0 -1 4194560 100 0 0 0 12 34 0 0 20 0 1 0 98765 1000 250 "                 \
	"18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"

static void test_fields(void **state)
{
	struct hostproc_stat st;
	static const char *const lines[] = {
	        "4242 (python)" TAIL,
	        "4242 (a) b) c)" TAIL, /* a name with ')' and blanks: the last ')' ends it */
	        "4242 (x\ny)" TAIL,    /* even a newline */
	        "4242 (0123456789abcdefXYZ)" TAIL, /* longer than the kernel's 15 bytes */
	};
	static const char *const names[] = {"python", "a) b) c", "x\ny", "0123456789abcde"};

	(void)state;
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		memset(&st, 0, sizeof(st));
		assert_int_equal(hostproc_parse_stat(lines[i], strlen(lines[i]), &st), 0);
		assert_int_equal(st.state, 'S');
		assert_int_equal(st.cpu_ticks, 12 + 34);
		assert_int_equal(st.start_ticks, 98765);
		assert_int_equal(st.rss_pages, 250);
		assert_string_equal(st.comm, names[i]);
	}
}

static void test_bad(void **state)
{
	struct hostproc_stat st = {.state = 'Q'};
	static const char *const bad[] = {
	        "",
	        "4242 python S 1",                                  /* no ')' */
	        "4242 (p) S 1 4242 4242 0 -1 4194560 100 0 0 0 12", /* ends before 24 */
	        "4242 (p) S 1 4242 4242 0 -1 4194560 100 0 0 0 1x 34 0 0 20 0 1 0 9 1 2\n",
	        "4242 (p) SS 1 4242 4242 0 -1 4194560 100 0 0 0 12 34 0 0 20 0 1 0 9 1 2\n",
	        "4242 (p) S 1 4242 4242 0 -1 4194560 100 0 0 0 12 -34 0 0 20 0 1 0 9 1 2\n",
	        "4242 (p) S 1 4242 4242 0 -1 4194560 100 0 0 0 99999999999999999999 34 0 0 20 0 1 "
	        "0 9 1 2\n",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(hostproc_parse_stat(bad[i], strlen(bad[i]), &st), -EINVAL);
		assert_int_equal(st.state, 'Q'); /* untouched */
	}
}

static void test_own_process(void **state)
{
	struct hostproc_stat st;
	char cmd[256];
	uint32_t uid = 12345;

	(void)state;

	assert_int_equal(hostproc_read_stat(getpid(), &st), 0);
	assert_true(st.state == 'R' || st.state == 'S');
	/* proc(5): /proc/PID is owned by the process's effective uid; comm is the executable's
	 * name */
	assert_int_equal(hostproc_read_stat_uid(getpid(), &st, &uid), 0);
	assert_int_equal(uid, geteuid());
	assert_string_equal(st.comm, "test-hostproc");
	assert_true(st.rss_pages > 0);
	hostproc_cmdline(getpid(), cmd, sizeof(cmd));
	assert_non_null(strstr(cmd, "test-hostproc"));
	assert_true(hostproc_uptime() > 0);
	/* pid 0 is no process */
	assert_int_equal(hostproc_read_stat(0, &st), -ESRCH);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_fields),
	        cmocka_unit_test(test_bad),
	        cmocka_unit_test(test_own_process),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
