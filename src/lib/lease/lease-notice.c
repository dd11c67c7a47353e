// SPDX-License-Identifier: MIT
/*
 * lease-notice.c: eviction notices (docs/leases.md "Taking a lease back"): what root writes when
 * it takes a lease back, so that the holder's next gpuctl command says why, and the node agent
 * can end the lease's ledger record as "evicted". Written by lease-evict.c (and through it by the
 * agent); read strictly (fuzz/fuzz-notice.c).
 *
 * Decisions:
 * - Where: DIR/notices/ (the directory's owner, 0755: only root makes user directories in it)
 *   and DIR/notices/<uid>/, created by root, owned by <uid>, mode 0700: the user renames what
 *   was shown (seen) and removes old ones, nobody else reads them. A notice is a file owned by
 *   root (or DIR's owner) with one link: a user can rename or delete theirs, never write one, so
 *   the agent may trust what a notice says of the holder.
 * - Names: <when>-<pid>-<UUID>.notice, renamed to .seen once shown; names beginning with '.' are
 *   temporary (written, fsync'ed, renamed into place) and never read. Seen notices older than a
 *   day (by the time in the name) are removed by the user's next command and by the writer.
 * - Format: the queue tickets' (lease-queue.c): a first line "gpuctl-notice 1", then one
 *   "key value" per line, each ending in a newline; known keys at most once, unknown keys
 *   skipped; numbers in decimal; values without control characters (written as '?'), at most
 *   NOTICE_VALUE_MAX bytes; a file at most NOTICE_MAX bytes. device, pid, start_time, when and
 *   reason are required, and device must be the UUID of the file's name.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ctx.h"
#include "fileio.h"
#include "lease-internal.h"
#include "nss.h"
#include "util.h"

#define NOTICE_MAX       4096  /* bytes of a notice file */
#define NOTICE_VALUE_MAX 512   /* bytes of one value */
#define NOTICE_SEEN_KEEP 86400 /* seconds a seen notice is kept */
#define NOTICE_HEADER    "gpuctl-notice 1\n"
#define NOTICE_NAME_MAX  (UUID_MAX + 48)

/* One notice of a list: the public facts, their strings owned here. */
struct notice_entry {
	struct gpuctl_lease_notice n; /* strings below */
	char *user, *device, *by, *reason;
	char name[NOTICE_NAME_MAX]; /* its file name (mine lists: to mark it seen) */
};

struct gpuctl_lease_notices {
	struct notice_entry *e; /* owned */
	size_t n, cap;
	int ufd; /* a mine list: the user's notice directory; else -1 */
};

/* ---- the list ---- */

static void entry_clear(struct notice_entry *e)
{
	free(e->user);
	free(e->device);
	free(e->by);
	free(e->reason);
}

void gpuctl_lease_notices_free(struct gpuctl_lease_notices *list)
{
	if (!list)
		return;
	for (size_t i = 0; i < list->n; i++)
		entry_clear(&list->e[i]);
	free(list->e);
	if (list->ufd >= 0)
		(void)close(list->ufd);
	free(list);
}

size_t gpuctl_lease_notices_count(const struct gpuctl_lease_notices *list)
{
	return list ? list->n : 0;
}

const struct gpuctl_lease_notice *gpuctl_lease_notices_get(const struct gpuctl_lease_notices *list,
                                                           size_t i)
{
	return list && i < list->n ? &list->e[i].n : NULL;
}

int lease_notices_new(struct gpuctl_lease_notices **ret)
{
	struct gpuctl_lease_notices *l = calloc(1, sizeof(*l));

	if (!l)
		return -ENOMEM;
	l->ufd = -1;
	*ret = l;
	return 0;
}

/* Points e->n's strings at e's own. */
static void entry_link(struct notice_entry *e)
{
	e->n.user = e->user;
	e->n.device = e->device;
	e->n.by = e->by;
	e->n.reason = e->reason;
}

/* Appends *e (taking its strings) to list: 0 or -ENOMEM (e's strings freed). */
static int list_take(struct gpuctl_lease_notices *list, struct notice_entry *e)
{
	if (list->n == list->cap) {
		size_t nc = list->cap ? list->cap * 2 : 4;
		struct notice_entry *ne = realloc(list->e, nc * sizeof(*ne));

		if (!ne) {
			entry_clear(e);
			return -ENOMEM;
		}
		list->e = ne;
		list->cap = nc;
	}
	list->e[list->n] = *e;
	entry_link(&list->e[list->n]);
	list->n++;
	return 0;
}

/* strdup of s, or NULL for NULL; *oom set when the copy fails. */
static char *dup_or_null(const char *s, bool *oom)
{
	char *d;

	if (!s)
		return NULL;
	d = strdup(s);
	*oom |= !d;
	return d;
}

int lease_notices_add(struct gpuctl_lease_notices *list, const struct gpuctl_lease_notice *n)
{
	struct notice_entry e = {.n = *n};
	bool oom = false;

	e.user = dup_or_null(n->user, &oom);
	e.device = dup_or_null(n->device, &oom);
	e.by = dup_or_null(n->by, &oom);
	e.reason = dup_or_null(n->reason, &oom);
	if (oom) {
		entry_clear(&e);
		return -ENOMEM;
	}
	return list_take(list, &e);
}

/* ---- the text ---- */

/* A value as written: control characters as '?', at most NOTICE_VALUE_MAX bytes. */
static void put_value(struct sbuf *b, const char *key, const char *v)
{
	char out[NOTICE_VALUE_MAX + 1];
	size_t n = 0;

	for (; v && *v && n < NOTICE_VALUE_MAX; v++)
		out[n++] = ((unsigned char)*v < 0x20 || *v == 0x7f) ? '?' : *v;
	out[n] = '\0';
	if (n > 0)
		sbuf_printf(b, "%s %s\n", key, out);
}

/* The text of notice n into b. */
static void notice_text(struct sbuf *b, const struct gpuctl_lease_notice *n)
{
	sbuf_puts(b, NOTICE_HEADER);
	put_value(b, "device", n->device);
	if (n->index >= 0)
		sbuf_printf(b, "index %" PRId64 "\n", n->index);
	sbuf_printf(b, "pid %" PRIu32 "\nstart_time %" PRIu64 "\nended %d\n", n->pid, n->start_time,
	            n->ended ? 1 : 0);
	put_value(b, "user", n->user);
	sbuf_printf(b, "by_uid %" PRIu32 "\n", n->by_uid);
	put_value(b, "by", n->by);
	sbuf_printf(b, "when %" PRIu64 "\n", n->when);
	put_value(b, "reason", n->reason);
}

static const char *const notice_keys[] = {"device", "index",  "user", "pid",  "start_time",
                                          "ended",  "by_uid", "by",   "when", "reason"};

/* One known key's value into e: 0, or -EINVAL (a bad number), -ENOMEM. */
static int notice_set(struct notice_entry *e, size_t k, const char *v, size_t len)
{
	static const uint64_t max[] = {0, 1000000,    0, INT32_MAX,  UINT64_MAX,
	                               1, UINT32_MAX, 0, UINT64_MAX, 0};
	char **str[] = {&e->device, NULL, &e->user, NULL, NULL,
	                NULL,       NULL, &e->by,   NULL, &e->reason};
	uint64_t num;

	if (str[k]) {
		*str[k] = strndup(v, len);
		return *str[k] ? 0 : -ENOMEM;
	}
	if (!parse_dec(v, len, max[k], &num) || (len > 1 && v[0] == '0'))
		return -EINVAL;
	switch (k) {
	case 1:
		e->n.index = (int64_t)num;
		break;
	case 3:
		e->n.pid = (uint32_t)num;
		break;
	case 4:
		e->n.start_time = num;
		break;
	case 5:
		e->n.ended = num == 1;
		break;
	case 6:
		e->n.by_uid = (uint32_t)num;
		break;
	default:
		e->n.when = num;
		break;
	}
	return 0;
}

/* One line "key value" (without its newline) into e; seen[] marks the known keys met. */
static int notice_line(struct notice_entry *e, const char *s, size_t len, bool *seen)
{
	const char *sp = memchr(s, ' ', len);
	size_t klen, vlen;

	if (!sp || sp == s)
		return -EINVAL;
	klen = (size_t)(sp - s);
	vlen = len - klen - 1;
	if (vlen == 0 || vlen > NOTICE_VALUE_MAX)
		return -EINVAL;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return -EINVAL;
	for (size_t k = 0; k < ELEMENTSOF(notice_keys); k++) {
		if (strlen(notice_keys[k]) != klen || memcmp(s, notice_keys[k], klen) != 0)
			continue;
		if (seen[k])
			return -EINVAL;
		seen[k] = true;
		return notice_set(e, k, sp + 1, vlen);
	}
	return 0; /* a key of a later version */
}

/* Parses a notice's text into e (strings owned by e): 0, -EINVAL, -ENOMEM. */
static int notice_parse(const char *text, size_t len, struct notice_entry *e)
{
	bool seen[ELEMENTSOF(notice_keys)] = {0};
	size_t hl = strlen(NOTICE_HEADER);
	const char *s = text + hl, *end = text + len;
	int r;

	*e = (struct notice_entry){.n = {.index = -1}};
	if (len > NOTICE_MAX || len < hl || memcmp(text, NOTICE_HEADER, hl) != 0 ||
	    memchr(text, '\0', len))
		return -EINVAL;
	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));

		if (!nl)
			return -EINVAL; /* every line ends in a newline */
		if ((r = notice_line(e, s, (size_t)(nl - s), seen)) < 0)
			return r;
		s = nl + 1;
	}
	/* device, pid, start_time, when and reason */
	if (!seen[0] || !seen[3] || !seen[4] || !seen[8] || !seen[9] || !lease_uuid_ok(e->device))
		return -EINVAL;
	return 0;
}

int lease_notice_parse_text(const char *text, size_t len)
{
	struct notice_entry e;
	int r;

	if (!text)
		return -EINVAL;
	r = notice_parse(text, len, &e);
	entry_clear(&e);
	return r;
}

/* ---- names ---- */

/* Parses "<when>-<pid>-<UUID>.notice" or ".seen": true with its parts. */
static bool notice_name_parse(const char *name, uint64_t *ret_when, char *uuid, bool *ret_seen)
{
	const char *a = strchr(name, '-'), *b, *dot;
	size_t l = strlen(name), ul;
	uint64_t pid;

	if (name[0] == '.' || !a || !(b = strchr(a + 1, '-')) || !(dot = strrchr(name, '.')))
		return false;
	if (streq(dot, ".notice"))
		*ret_seen = false;
	else if (streq(dot, ".seen"))
		*ret_seen = true;
	else
		return false;
	if (!parse_dec(name, (size_t)(a - name), UINT64_MAX, ret_when) ||
	    !parse_dec(a + 1, (size_t)(b - a - 1), INT32_MAX, &pid) || dot <= b + 1)
		return false;
	ul = (size_t)(dot - b - 1);
	if (ul > UUID_MAX || l > NOTICE_NAME_MAX - 1)
		return false;
	memcpy(uuid, b + 1, ul);
	uuid[ul] = '\0';
	return lease_uuid_ok(uuid);
}

/* ---- reading ---- */

/* Reads notice file name of ufd (uid's directory) into e when it is one: 0, -EINVAL or another
 * -errno for a file that is not a trusted notice, -ENOMEM. owner: DIR's owner. */
static int notice_read(int ufd, const char *name, uid_t uid, uid_t owner, struct notice_entry *e)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *text = NULL;
	char uuid[UUID_MAX + 1];
	struct stat st;
	uint64_t when;
	size_t len = 0;
	bool seen;
	int r;

	if (!notice_name_parse(name, &when, uuid, &seen))
		return -EINVAL;
	fd = openat(ufd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_nlink != 1 || (st.st_uid != 0 && st.st_uid != owner))
		return -EPERM;
	if (st.st_size > NOTICE_MAX)
		return -EFBIG;
	if ((r = fd_read_all(fd, NOTICE_MAX, &text, &len)) < 0)
		return r;
	if ((r = notice_parse(text, len, e)) < 0) {
		entry_clear(e);
		return r;
	}
	if (!streq(e->device, uuid)) {
		entry_clear(e);
		return -EINVAL; /* a notice copied under another name */
	}
	e->n.uid = uid;
	e->n.seen = seen;
	strscpy(e->name, sizeof(e->name), name);
	return 0;
}

/* Whether ufd is a notice directory of uid: a real directory owned by uid, not writable by
 * group or others. */
static bool notice_dir_ok(int ufd, uid_t uid)
{
	struct stat st;

	return fstat(ufd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == uid &&
	       !(st.st_mode & (S_IWGRP | S_IWOTH));
}

/* The notices of directory ufd (uid's) into list (unseen only when unseen_only); with prune,
 * removes seen ones older than NOTICE_SEEN_KEEP. 0 or -ENOMEM. */
static int notices_scan(struct gpuctl_lease_notices *list, int ufd, uid_t uid, uid_t owner,
                        bool unseen_only, bool prune)
{
	_cleanup_(closedirp) DIR *d = lease_dir_reopen(ufd);
	uint64_t now = (uint64_t)time(NULL);
	struct dirent *de;

	while (d && (de = readdir(d))) {
		char uuid[UUID_MAX + 1];
		struct notice_entry e;
		uint64_t when;
		bool seen;
		int r;

		if (!notice_name_parse(de->d_name, &when, uuid, &seen))
			continue;
		if (seen && prune && when + NOTICE_SEEN_KEEP < now) {
			(void)unlinkat(ufd, de->d_name, 0);
			continue;
		}
		if (seen && unseen_only)
			continue;
		r = notice_read(ufd, de->d_name, uid, owner, &e);
		if (r == -ENOMEM)
			return r;
		if (r < 0)
			continue;
		if ((r = list_take(list, &e)) < 0)
			return r;
	}
	return 0;
}

int gpuctl_lease_notices_read(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir,
                              uint32_t uid, struct gpuctl_lease_notices **ret)
{
	_cleanup_(gpuctl_lease_notices_freep) struct gpuctl_lease_notices *l = NULL;
	_cleanup_(closedirp) DIR *nd = NULL;
	_cleanup_close_ int nfd = -1;
	struct dirent *de;

	if (!dir || !ret)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	if (lease_notices_new(&l) < 0)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	nfd = openat(dir->fd, "notices", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	nd = nfd >= 0 ? lease_dir_reopen(nfd) : NULL;
	while (nd && (de = readdir(nd))) {
		_cleanup_close_ int ufd = -1;
		uint64_t u;

		if (!parse_dec(de->d_name, strlen(de->d_name), UINT32_MAX - 1, &u) ||
		    (uid != UINT32_MAX && u != uid))
			continue;
		ufd = openat(nfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (ufd < 0 || !notice_dir_ok(ufd, (uid_t)u))
			continue;
		if (notices_scan(l, ufd, (uid_t)u, dir->owner, false, false) < 0)
			return ctx_error(ctx, -ENOMEM, "out of memory");
	}
	*ret = TAKE_PTR(l);
	return 0;
}

int gpuctl_lease_notices_mine(struct gpuctl_ctx *ctx, const char *path,
                              struct gpuctl_lease_notices **ret)
{
	_cleanup_(gpuctl_lease_notices_freep) struct gpuctl_lease_notices *l = NULL;
	_cleanup_close_ int dfd = -1;
	char sub[64];
	struct stat st;
	uid_t me = geteuid();
	int ufd;

	if (!ret)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	if (lease_notices_new(&l) < 0)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	if (!path || !path[0])
		path = getenv("GPUCTL_LEASE_DIR");
	if (!path || !path[0])
		path = "/run/gpuctl";
	(void)snprintf(sub, sizeof(sub), "notices/%u", (unsigned)me);
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0 && fstat(dfd, &st) == 0) {
		ufd = openat(dfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (ufd >= 0 && !notice_dir_ok(ufd, me)) {
			(void)close(ufd);
			ufd = -1;
		}
		l->ufd = ufd;
		if (ufd >= 0 && notices_scan(l, ufd, me, st.st_uid, true, true) < 0)
			return ctx_error(ctx, -ENOMEM, "out of memory");
	}
	*ret = TAKE_PTR(l);
	return 0;
}

int gpuctl_lease_notices_mark_seen(struct gpuctl_ctx *ctx, const struct gpuctl_lease_notices *list,
                                   size_t i)
{
	char seen[NOTICE_NAME_MAX + 8];
	size_t l;

	if (!list || i >= list->n || list->ufd < 0)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	l = strlen(list->e[i].name);
	if (l < 7 || !streq(list->e[i].name + l - 7, ".notice"))
		return 0; /* seen already */
	(void)snprintf(seen, sizeof(seen), "%.*s.seen", (int)(l - 7), list->e[i].name);
	if (renameat(list->ufd, list->e[i].name, list->ufd, seen) < 0)
		return ctx_error(ctx, -errno, "notice %s: %s", list->e[i].name, strerror(errno));
	return 0;
}

/* ---- writing (root) ---- */

/* Opens (creating) DIR/notices/<uid>/ as root: owned by uid, mode 0700. */
static int notice_dir_open(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir, uid_t uid,
                           int *ret_fd)
{
	_cleanup_close_ int nfd = -1, ufd = -1;
	char path[4096], name[16];
	struct stat st;
	int r;

	(void)snprintf(path, sizeof(path), "%s/notices", dir->path);
	r = lease_open_at(ctx, dir->fd, "notices", path, true, true, 0755, &nfd);
	if (r < 0)
		return r;
	if ((r = lease_check_fd(ctx, nfd, path, true, dir->owner, false, &st)) < 0)
		return r;
	(void)snprintf(name, sizeof(name), "%u", (unsigned)uid);
	if (mkdirat(nfd, name, 0700) == 0) {
		_cleanup_close_ int fd =
		        openat(nfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		/* our new directory: hand it to its user (root made it, nobody else could) */
		if (fd < 0 || fchown(fd, uid, (gid_t)-1) < 0 || fchmod(fd, 0700) < 0)
			return ctx_error(ctx, -errno, "%s/%s: cannot create: %s", path, name,
			                 strerror(errno));
	} else if (errno != EEXIST) {
		return ctx_error(ctx, -errno, "%s/%s: cannot create: %s", path, name,
		                 strerror(errno));
	}
	ufd = openat(nfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (ufd < 0 || !notice_dir_ok(ufd, uid))
		return ctx_error(ctx, -EPERM, "%s/%s: not a notice directory of uid %u", path, name,
		                 (unsigned)uid);
	*ret_fd = TAKE_FD(ufd);
	return 0;
}

/* The file name of notice n (unseen). */
static void notice_name(const struct gpuctl_lease_notice *n, char *buf, size_t size)
{
	(void)snprintf(buf, size, "%" PRIu64 "-%" PRIu32 "-%s.notice", n->when, n->pid, n->device);
}

void lease_notice_remove(const struct gpuctl_lease_dir *dir, const struct gpuctl_lease_notice *n)
{
	char path[64], name[NOTICE_NAME_MAX];
	_cleanup_close_ int ufd = -1;

	(void)snprintf(path, sizeof(path), "notices/%u", (unsigned)n->uid);
	ufd = openat(dir->fd, path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	notice_name(n, name, sizeof(name));
	if (ufd >= 0)
		(void)unlinkat(ufd, name, 0);
}

int lease_notice_write(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir,
                       const struct gpuctl_lease_notice *n)
{
	_cleanup_(sbuf_done) struct sbuf b = SBUF_INIT_MAX(NOTICE_MAX);
	_cleanup_close_ int ufd = -1, fd = -1;
	char tmp[64], name[NOTICE_NAME_MAX];
	int r;

	r = notice_dir_open(ctx, dir, n->uid, &ufd);
	if (r < 0)
		return r;
	notice_text(&b, n);
	if (b.oom)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	for (int tries = 0; fd < 0 && tries < 16; tries++) {
		uint64_t rnd = 0;

		if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
			rnd = ((uint64_t)getpid() << 32) ^ (uint64_t)tries;
		(void)snprintf(tmp, sizeof(tmp), ".tmp-%016" PRIx64, rnd);
		fd = openat(ufd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	if (fd < 0)
		return ctx_error(ctx, -errno, "notice for uid %u: %s", (unsigned)n->uid,
		                 strerror(errno));
	notice_name(n, name, sizeof(name));
	r = fchmod(fd, 0644) < 0 ? -errno : 0;
	if (r == 0)
		r = fd_write_all(fd, b.p, b.len);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (r == 0 && renameat(ufd, tmp, ufd, name) < 0)
		r = -errno;
	if (r < 0) {
		(void)unlinkat(ufd, tmp, 0);
		return ctx_error(ctx, r, "notice for uid %u: %s", (unsigned)n->uid, strerror(-r));
	}
	{
		/* the writer passes by: old seen notices go */
		struct gpuctl_lease_notices none = {.ufd = -1};

		(void)notices_scan(&none, ufd, n->uid, dir->owner, true, true);
		for (size_t i = 0; i < none.n; i++)
			entry_clear(&none.e[i]);
		free(none.e);
	}
	return 0;
}
