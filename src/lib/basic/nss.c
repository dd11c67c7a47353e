// SPDX-License-Identifier: MIT
/*
 * nss.c: the passwd lookup of a uid (nss.h). One buffer policy for all callers: start at 4 KiB,
 * double on ERANGE up to 1 MiB, so an entry longer than a fixed buffer is not taken for a
 * missing one.
 */
#include <errno.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>

#include "nss.h"
#include "util.h"

#define NSS_BUF_START 4096
#define NSS_BUF_MAX   (1024 * 1024)

/* What a lookup asks for: the entry of a uid, of a user name, or of a group name. */
enum nss_key { BY_UID, BY_USER_NAME, BY_GROUP_NAME };

/* One lookup with the buffer policy above: 0 with *ret_ent (a struct passwd or struct group)
 * whose strings live in *ret_buf, -ENOENT, -ENOMEM or the lookup's -errno. */
static int lookup(enum nss_key key, uid_t uid, const char *name, void *ret_ent, char **ret_buf)
{
	_cleanup_free_ char *buf = NULL;
	size_t size = NSS_BUF_START;
	struct passwd *pw = NULL; /* the lookups' own result pointers, each of its type */
	struct group *gr = NULL;
	int r;

	for (;;) {
		free(buf);
		buf = malloc(size);
		if (!buf)
			return -ENOMEM;
		if (key == BY_UID)
			r = getpwuid_r(uid, ret_ent, buf, size, &pw);
		else if (key == BY_USER_NAME)
			r = getpwnam_r(name, ret_ent, buf, size, &pw);
		else
			r = getgrnam_r(name, ret_ent, buf, size, &gr);
		if (r != ERANGE || size >= NSS_BUF_MAX)
			break;
		size *= 2;
	}
	if (r != 0)
		return -r;
	if (!pw && !gr)
		return -ENOENT;
	*ret_buf = TAKE_PTR(buf);
	return 0;
}

int nss_passwd(uid_t uid, struct passwd *ret_pw, char **ret_buf)
{
	struct passwd pw;
	char *buf;
	int r = lookup(BY_UID, uid, NULL, &pw, &buf);

	if (r < 0)
		return r;
	if (!pw.pw_name) {
		free(buf);
		return -ENOENT;
	}
	*ret_pw = pw;
	*ret_buf = buf;
	return 0;
}

char *nss_user_name(uid_t uid)
{
	_cleanup_free_ char *buf = NULL;
	struct passwd pw;

	if (nss_passwd(uid, &pw, &buf) < 0)
		return NULL;
	return strdup(pw.pw_name);
}

int nss_user_uid(const char *name, uid_t *ret_uid)
{
	_cleanup_free_ char *buf = NULL;
	struct passwd pw;
	int r = lookup(BY_USER_NAME, 0, name, &pw, &buf);

	if (r < 0)
		return r;
	*ret_uid = pw.pw_uid;
	return 0;
}

bool nss_user_exists(const char *name)
{
	_cleanup_free_ char *buf = NULL;
	struct passwd pw;

	return lookup(BY_USER_NAME, 0, name, &pw, &buf) == 0;
}

int nss_group_gid(const char *name, gid_t *ret_gid)
{
	_cleanup_free_ char *buf = NULL;
	struct group gr;
	int r = lookup(BY_GROUP_NAME, 0, name, &gr, &buf);

	if (r < 0)
		return r;
	*ret_gid = gr.gr_gid;
	return 0;
}
