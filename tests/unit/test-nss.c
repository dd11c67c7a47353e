// SPDX-License-Identifier: MIT
/*
 * test-nss.c: the passwd and group lookups of src/lib/basic/nss.c. Expected values are fixed
 * facts of every Debian system (base-passwd: uid 0 and gid 0 are root) and names no system has.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "nss.h"

/* A uid and names no passwd or group database has (uids near 2^32 are reserved, 4294967295 is
 * (uid_t)-1, "none"). */
#define NO_UID  ((uid_t)4294967290u)
#define NO_NAME "gpuctl-no-such-name-7f3a"

static void test_passwd_of_root(void **state)
{
	struct passwd pw;
	char *buf = NULL;
	char *name;

	(void)state;
	assert_int_equal(nss_passwd(0, &pw, &buf), 0);
	assert_non_null(buf);
	assert_string_equal(pw.pw_name, "root");
	assert_int_equal(pw.pw_gid, 0);
	free(buf);
	name = nss_user_name(0);
	assert_non_null(name);
	assert_string_equal(name, "root");
	free(name);
}

static void test_missing_entries(void **state)
{
	struct passwd pw;
	char *buf = (char *)&pw; /* written only on success */
	gid_t gid = 12345;
	uid_t uid = 54321;

	(void)state;
	assert_int_equal(nss_user_uid(NO_NAME, &uid), -ENOENT);
	assert_int_equal(uid, 54321);
	assert_int_equal(nss_passwd(NO_UID, &pw, &buf), -ENOENT);
	assert_ptr_equal(buf, (char *)&pw);
	assert_null(nss_user_name(NO_UID));
	assert_false(nss_user_exists(NO_NAME));
	assert_int_equal(nss_group_gid(NO_NAME, &gid), -ENOENT);
	assert_int_equal(gid, 12345);
}

static void test_by_name(void **state)
{
	gid_t gid = 12345;
	uid_t uid = 54321;

	(void)state;
	assert_true(nss_user_exists("root"));
	assert_int_equal(nss_user_uid("root", &uid), 0);
	assert_int_equal(uid, 0);
	assert_int_equal(nss_group_gid("root", &gid), 0);
	assert_int_equal(gid, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_passwd_of_root),
	        cmocka_unit_test(test_missing_entries),
	        cmocka_unit_test(test_by_name),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
