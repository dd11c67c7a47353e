/* SPDX-License-Identifier: MIT */
/*
 * nss.h: the one lookup of a user's passwd entry (getpwuid_r through NSS), for every room that
 * names a uid: owner records, process owners, pools' user rules, gpuctl top; and the
 * user and group lookups by name of the pools' rules.
 */
#ifndef GPUCTL_NSS_H
#define GPUCTL_NSS_H

#include <pwd.h>
#include <stdbool.h>
#include <sys/types.h>

/* Looks uid up with getpwuid_r, its buffer grown on ERANGE up to 1 MiB (a directory service
 * can return long entries). Returns 0 with *ret_pw, whose strings live in *ret_buf (the caller
 * frees it); -ENOENT when uid has no entry; -ENOMEM; or the lookup's -errno. */
int nss_passwd(uid_t uid, struct passwd *ret_pw, char **ret_buf);
/* uid's user name, newly allocated; NULL when uid has no entry or memory ran out. */
char *nss_user_name(uid_t uid);
/* The uid of user name: 0, -ENOENT when there is none, -ENOMEM or the lookup's -errno. */
int nss_user_uid(const char *name, uid_t *ret_uid);
/* Whether user name has a passwd entry. */
bool nss_user_exists(const char *name);
/* The gid of group name: 0, -ENOENT when there is none, -ENOMEM or the lookup's -errno. */
int nss_group_gid(const char *name, gid_t *ret_gid);

#endif /* GPUCTL_NSS_H */
