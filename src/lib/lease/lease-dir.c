// SPDX-License-Identifier: MIT
/*
 * lease-dir.c: the lock store (docs/leases.md, design.md §2.4, §7): the lease directory DIR
 * (opened, checked, created, its config file), one lock file per device in DIR/locks/, the probe
 * that tells a device's state from its lock file (DIR/select.lock, which orders every
 * select-and-lease, is lease-select-lock.c's). Nothing here decides who gets a device;
 * lease-select.c does, on these states.
 * Tests: tests/unit/test-lease.c (directory creation and checks, unusable lock files),
 * tests/cli/test_leases.py.
 *
 * Decisions:
 * - Everything below the lease directory is reached with *at() calls relative to directory
 *   descriptors opened with O_NOFOLLOW and checked with fstat() on the descriptor (what was
 *   opened, not the path: no check-then-use race). Components above DIR may be symlinks
 *   (/var/run -> /run); DIR itself may not. DIR's last component is created, and the missing
 *   directories above it only below an existing one of ours (~/.cache of $HOME/.cache/gpuctl,
 *   mode 0700 as the XDG Base Directory Specification asks of a missing $XDG_CACHE_HOME; 0755
 *   for root, whose directories may lead to a shared one).
 * - Who may create: DIR when we are root or own its parent; locks/, owners/, select.lock and
 *   lock files only when DIR is ours (owner == euid). Modes are set with fchmod() after
 *   creation, so the umask does not matter. locks/ and select.lock must belong to DIR's owner
 *   (stricter than "root or us": a locks/ of another user could have its files unlinked).
 * - A missing lock file in a directory of ours reads as FREE (nobody can hold a lock on a file
 *   that does not exist; select-and-lease creates it); in someone else's, UNINITIALISED.
 * - Sharing (docs/leases.md "Sharing"): a device is SHARED when an exclusive probe fails and a
 *   shared one succeeds; then the probe counts what its shared leases declare (lease-share.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ctx.h"
#include "fileio.h"
#include "lease-internal.h"
#include "nss.h"
#include "snapshot-internal.h"
#include "util.h"

#define CONFIG_PIN_MAX 4096 /* bytes of DIR/config */

/* ---- reaching files below DIR ---- */

bool lease_uuid_ok(const char *u)
{
	size_t n;

	if (!u || (strncmp(u, "GPU-", 4) != 0 && strncmp(u, "MIG-", 4) != 0))
		return false;
	n = strlen(u);
	if (n <= 4 || n > UUID_MAX)
		return false;
	return strspn(u + 4, "0123456789abcdefABCDEF-") == n - 4;
}

int lease_check_fd(struct gpuctl_ctx *ctx, int fd, const char *path, bool want_dir, uid_t want_uid,
                   bool sticky_ok, struct stat *ret_st)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return ctx_error(ctx, -errno, "lease directory '%s': %s", path, strerror(errno));
	if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
		return ctx_error(ctx, -EPERM, "lease directory '%s': not a %s", path,
		                 want_dir ? "directory" : "regular file");
	if (want_uid == (uid_t)-1 ? (st.st_uid != 0 && st.st_uid != geteuid())
	                          : st.st_uid != want_uid)
		return ctx_error(ctx, -EPERM, "lease directory '%s': owned by uid %u, not by %s %u",
		                 path, (unsigned)st.st_uid,
		                 want_uid == (uid_t)-1 ? "root or you, uid" : "uid",
		                 (unsigned)(want_uid == (uid_t)-1 ? geteuid() : want_uid));
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(sticky_ok && (st.st_mode & S_ISVTX)))
		return ctx_error(ctx, -EPERM,
		                 "lease directory '%s': writable by group or others (mode %04o)",
		                 path, (unsigned)(st.st_mode & 07777));
	if (ret_st)
		*ret_st = st;
	return 0;
}

int lease_open_at(struct gpuctl_ctx *ctx, int dfd, const char *name, const char *path, bool dir,
                  bool create, mode_t mode, int *ret_fd)
{
	int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (dir ? O_DIRECTORY : O_NONBLOCK);
	_cleanup_close_ int fd = -1;
	bool created = false;

	fd = openat(dfd, name, flags);
	if (fd < 0 && errno == ENOENT && create) {
		if (dir) {
			if (mkdirat(dfd, name, 0700) < 0 && errno != EEXIST)
				return ctx_error(ctx, -errno,
				                 "lease directory '%s': cannot create: %s", path,
				                 strerror(errno));
			created = errno != EEXIST;
			fd = openat(dfd, name, flags);
		} else {
			fd = openat(dfd, name, flags | O_CREAT | O_EXCL, 0600);
			created = fd >= 0;
			if (fd < 0 && errno == EEXIST)
				fd = openat(dfd, name, flags);
		}
	}
	if (fd < 0) {
		int e = errno;

		if (e == ENOENT)
			return -ENOENT;
		if (e == ELOOP || e == ENOTDIR) {
			struct stat lst; /* for the message only: the open refused it already */
			bool link =
			        e == ELOOP || (fstatat(dfd, name, &lst, AT_SYMLINK_NOFOLLOW) == 0 &&
			                       S_ISLNK(lst.st_mode));

			return ctx_error(ctx, -EPERM, "lease directory '%s': %s", path,
			                 link ? "is a symlink" : "not a directory");
		}
		return ctx_error(ctx, -e, "lease directory '%s': %s", path, strerror(e));
	}
	if (created && fchmod(fd, mode) < 0)
		return ctx_error(ctx, -errno, "lease directory '%s': chmod: %s", path,
		                 strerror(errno));
	*ret_fd = TAKE_FD(fd);
	return 0;
}

DIR *lease_dir_reopen(int dfd)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d;

	if (fd < 0)
		return NULL;
	d = fdopendir(fd);
	if (!d)
		(void)close(fd);
	return d;
}

/* ---- the directory ---- */

void gpuctl_lease_dir_free(struct gpuctl_lease_dir *dir)
{
	if (!dir)
		return;
	closep(&dir->fd);
	closep(&dir->locks_fd);
	closep(&dir->owners_fd);
	closep(&dir->queue_fd);
	free(dir->path);
	free(dir);
}

const char *gpuctl_lease_dir_path(const struct gpuctl_lease_dir *dir)
{
	return dir ? dir->path : NULL;
}

uint32_t gpuctl_lease_dir_owner(const struct gpuctl_lease_dir *dir)
{
	return dir ? (uint32_t)dir->owner : 0;
}

/* Opens the directory parent, creating the components missing below the deepest existing one
 * when that one is ours, each opened with O_NOFOLLOW and checked to be ours (a directory another
 * user made in between is not used). Mode 0700 (XDG's for a missing $XDG_CACHE_HOME), but 0755
 * for root: a directory root makes may lead to a shared lease directory, which users must reach
 * (root's own home is private already). 0, -ENOENT when an ancestor missing is not ours to
 * create, or -errno. */
static int open_parent(const char *parent, int *ret_fd)
{
	_cleanup_free_ char *anc = strdup(parent);
	_cleanup_close_ int fd = -1;
	const char *q = ""; /* what lies below the directory open */
	mode_t mode = geteuid() == 0 ? 0755 : 0700;
	struct stat st;

	if (!anc)
		return -ENOMEM;
	fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 && errno != ENOENT)
		return -errno;
	while (fd < 0) { /* the deepest existing ancestor; q: what lies below it */
		char *slash = strrchr(anc, '/');

		if (!slash) {
			fd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			q = parent;
		} else {
			q = parent + (slash - anc) + 1;
			slash[slash == anc ? 1 : 0] = '\0';
			fd = open(anc, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		}
		if (fd < 0 && (errno != ENOENT || !slash || slash == anc))
			return -errno;
	}
	if (*q && (fstat(fd, &st) < 0 || st.st_uid != geteuid()))
		return -ENOENT;
	while (*q) {
		size_t n = strcspn(q, "/");
		char name[256];
		bool created;
		int nfd;

		if (n == 0) {
			q++;
			continue;
		}
		if (n >= sizeof(name))
			return -ENAMETOOLONG;
		memcpy(name, q, n);
		name[n] = '\0';
		q += n;
		if (streq(name, ".") || streq(name, ".."))
			return -EINVAL;
		created = mkdirat(fd, name, mode) == 0;
		if (!created && errno != EEXIST)
			return -errno;
		nfd = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0)
			return -errno;
		closep(&fd);
		fd = nfd;
		if (fstat(fd, &st) < 0)
			return -errno;
		if (st.st_uid != geteuid())
			return -EPERM;
		if (created && fchmod(fd, mode) < 0)
			return -errno;
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/* Opens DIR itself, creating its last component when we may (root, or the parent is ours), and
 * the directories above it that open_parent may create. */
static int open_top(struct gpuctl_ctx *ctx, const char *path, int *ret_fd)
{
	_cleanup_free_ char *parent = NULL;
	_cleanup_close_ int pfd = -1;
	const char *base;
	struct stat pst;
	size_t len = strlen(path);
	char *slash;
	int r;

	r = lease_open_at(ctx, AT_FDCWD, path, path, true, false, 0, ret_fd);
	if (r != -ENOENT)
		return r;
	while (len > 1 && path[len - 1] == '/')
		len--;
	parent = strndup(path, len);
	if (!parent)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	slash = strrchr(parent, '/');
	if (slash) {
		*slash = '\0';
		base = slash + 1;
	} else {
		base = parent;
	}
	if (!*base || streq(base, ".") || streq(base, ".."))
		return ctx_error(ctx, -EINVAL, "lease directory '%s': not a usable name", path);
	r = open_parent(slash ? (*parent ? parent : "/") : ".", &pfd);
	if (r < 0 && r != -ENOENT)
		return ctx_error(ctx, r, "lease directory '%s': cannot create '%s': %s", path,
		                 parent, strerror(-r));
	if (r < 0 || fstat(pfd, &pst) < 0 || (geteuid() != 0 && pst.st_uid != geteuid()))
		return ctx_error(
		        ctx, -ENOENT,
		        "lease directory '%s': missing (run `sudo gpuctl lease init`, or set "
		        "GPUCTL_LEASE_DIR to a directory of your own)",
		        path);
	return lease_open_at(ctx, pfd, base, path, true, true, 0755, ret_fd);
}

/* Whether a directory on the way to a lease directory of root's is safe from other users: owned
 * by root and writable by no one else, or sticky (/tmp: others cannot replace what root made). */
static bool root_dir_safe(const struct stat *st)
{
	return S_ISDIR(st->st_mode) && st->st_uid == 0 &&
	       (!(st->st_mode & (S_IWGRP | S_IWOTH)) || (st->st_mode & S_ISVTX));
}

/* Root only (docs/leases.md "Checks"): every component of path must be one no other user could
 * have replaced, so that root never creates anything where a user's symlink points (with
 * fs.protected_symlinks=0, /tmp/x -> /etc would make root create /etc/sub). The path as
 * written: each existing component that is a symlink belongs to root; where it leads (its
 * realpath): each directory belongs to root and is writable by root only, or sticky. 0 or
 * -EPERM with one line naming the component. */
static int root_path_check(struct gpuctl_ctx *ctx, const char *path)
{
	char abs[4096], real[4096], probe[4096];
	size_t n;
	struct stat st;

	if (path[0] == '/') {
		if (snprintf(abs, sizeof(abs), "%s", path) >= (int)sizeof(abs))
			return ctx_error(ctx, -ENAMETOOLONG, "lease directory '%s': too long",
			                 path);
	} else {
		char cwd[2048];
		if (!getcwd(cwd, sizeof(cwd)) ||
		    snprintf(abs, sizeof(abs), "%s/%s", cwd, path) >= (int)sizeof(abs))
			return ctx_error(ctx, -ENAMETOOLONG, "lease directory '%s': too long",
			                 path);
	}
	/* DIR itself is checked where it is opened (O_NOFOLLOW, owner, mode): what lies above */
	n = strlen(abs);
	while (n > 1 && abs[n - 1] == '/')
		abs[--n] = '\0';
	while (n > 1 && abs[n - 1] != '/')
		abs[--n] = '\0';
	if (n > 1)
		abs[--n] = '\0';
	/* the path as written, prefix by prefix: symlinks must be root's; stop at the first
	 * missing component (open_top creates the last one at most) */
	for (size_t i = 1; i <= n; i++) {
		if (i < n && abs[i] != '/')
			continue;
		memcpy(probe, abs, i);
		probe[i] = '\0';
		if (lstat(probe, &st) < 0)
			break;
		if (S_ISLNK(st.st_mode) && st.st_uid != 0)
			return ctx_error(ctx, -EPERM,
			                 "lease directory '%s': '%s' is a symlink of uid %u, which "
			                 "could point anywhere: root uses no path another user can "
			                 "change",
			                 path, probe, (unsigned)st.st_uid);
	}
	/* where it leads: the deepest existing prefix, resolved, and every directory above it */
	snprintf(probe, sizeof(probe), "%s", abs);
	while (!realpath(probe, real)) {
		char *slash = strrchr(probe, '/');
		if (errno != ENOENT || !slash || slash == probe)
			return 0; /* nothing resolvable: open_top says what is wrong */
		*slash = '\0';
	}
	n = strlen(real);
	for (size_t i = 1; i <= n; i++) {
		if (i < n && real[i] != '/')
			continue;
		memcpy(probe, real, i);
		probe[i] = '\0';
		if (lstat(probe, &st) < 0)
			return 0;
		if (S_ISDIR(st.st_mode) && !root_dir_safe(&st))
			return ctx_error(
			        ctx, -EPERM,
			        "lease directory '%s': '%s' belongs to uid %u (mode %04o): "
			        "root uses no path another user can change",
			        path, probe, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	}
	if (lstat("/", &st) == 0 && !root_dir_safe(&st))
		return ctx_error(ctx, -EPERM, "lease directory '%s': '/' is writable by others",
		                 path);
	return 0;
}

int gpuctl_lease_dir_open(struct gpuctl_ctx *ctx, const char *path,
                          struct gpuctl_lease_dir **ret_dir)
{
	_cleanup_(gpuctl_lease_dir_freep) struct gpuctl_lease_dir *dir = NULL;
	_cleanup_close_ int sfd = -1;
	struct stat st;
	char sub[4096];
	int r;

	if (!ret_dir)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	if (!path || !*path)
		path = getenv("GPUCTL_LEASE_DIR");
	if (!path || !*path)
		path = GPUCTL_LEASE_DIR_DEFAULT;
	dir = calloc(1, sizeof(*dir));
	if (!dir)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	dir->fd = dir->locks_fd = dir->owners_fd = dir->queue_fd = -1;
	dir->path = strdup(path);
	if (!dir->path)
		return ctx_error(ctx, -ENOMEM, "out of memory");

	if (geteuid() == 0 && (r = root_path_check(ctx, path)) < 0)
		return r;
	r = open_top(ctx, path, &dir->fd);
	if (r < 0)
		return r;
	r = lease_check_fd(ctx, dir->fd, path, true, (uid_t)-1, false, &st);
	if (r < 0)
		return r;
	dir->owner = st.st_uid;
	dir->ours = st.st_uid == geteuid();

	(void)snprintf(sub, sizeof(sub), "%s/locks", path);
	r = lease_open_at(ctx, dir->fd, "locks", sub, true, dir->ours, 0755, &dir->locks_fd);
	if (r < 0 && r != -ENOENT)
		return r;
	if (r == 0) {
		r = lease_check_fd(ctx, dir->locks_fd, sub, true, dir->owner, false, NULL);
		if (r < 0)
			return r;
	}

	(void)snprintf(sub, sizeof(sub), "%s/select.lock", path);
	r = lease_open_at(ctx, dir->fd, "select.lock", sub, false, dir->ours, 0644, &sfd);
	if (r == -ENOENT)
		return ctx_error(
		        ctx, -ENOENT,
		        "lease directory '%s': no select.lock (run `sudo gpuctl lease init`, "
		        "or set GPUCTL_LEASE_DIR to a directory of your own)",
		        path);
	if (r < 0)
		return r;
	r = lease_check_fd(ctx, sfd, sub, false, dir->owner, false, NULL);
	if (r < 0)
		return r;

	/* owners/: 1777 in a shared (root's) directory, 0755 in a personal one */
	(void)snprintf(sub, sizeof(sub), "%s/owners", path);
	r = lease_open_at(ctx, dir->fd, "owners", sub, true, dir->ours,
	                  dir->owner == 0 ? (S_ISVTX | 0777) : 0755, &dir->owners_fd);
	if (r < 0 && r != -ENOENT)
		return r;
	if (r == 0) {
		r = lease_check_fd(ctx, dir->owners_fd, sub, true, dir->owner, dir->owner == 0,
		                   NULL);
		if (r < 0)
			return r;
	}

	/* queue/: the waiters' tickets, made like owners/ */
	(void)snprintf(sub, sizeof(sub), "%s/queue", path);
	r = lease_open_at(ctx, dir->fd, "queue", sub, true, dir->ours,
	                  dir->owner == 0 ? (S_ISVTX | 0777) : 0755, &dir->queue_fd);
	if (r < 0 && r != -ENOENT)
		return r;
	if (r == 0) {
		r = lease_check_fd(ctx, dir->queue_fd, sub, true, dir->owner, dir->owner == 0,
		                   NULL);
		if (r < 0)
			return r;
	}
	*ret_dir = TAKE_PTR(dir);
	return 0;
}

/* ---- DIR/config: which configuration file governs the directory ---- */

int gpuctl_lease_dir_config(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir,
                            char **ret_path)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *text = NULL;
	struct stat st;
	size_t len = 0;
	int r;

	if (!dir || !ret_path)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	*ret_path = NULL;
	fd = openat(dir->fd, "config", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0)
		return ctx_error(ctx, -errno, "'%s/config': %s", dir->path,
		                 errno == ELOOP ? "is a symlink" : strerror(errno));
	if (fstat(fd, &st) < 0)
		return ctx_error(ctx, -errno, "'%s/config': %s", dir->path, strerror(errno));
	if (!S_ISREG(st.st_mode) || st.st_uid != dir->owner || st.st_nlink != 1 ||
	    (st.st_mode & (S_IWGRP | S_IWOTH)))
		return ctx_error(
		        ctx, -EPERM,
		        "'%s/config': not a regular file of the directory's owner that only "
		        "it may write",
		        dir->path);
	r = fd_read_all(fd, CONFIG_PIN_MAX, &text, &len);
	if (r < 0)
		return ctx_error(ctx, r, "'%s/config': %s", dir->path, strerror(-r));
	while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' '))
		text[--len] = '\0';
	if (len == 0 || text[0] != '/' || memchr(text, '\0', len) || strchr(text, '\n'))
		return ctx_error(
		        ctx, -EINVAL,
		        "'%s/config': not one absolute path (written by `gpuctl lease init`)",
		        dir->path);
	*ret_path = TAKE_PTR(text);
	return 0;
}

int gpuctl_lease_dir_set_config(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                                const char *path)
{
	char tmp[32];
	_cleanup_close_ int fd = -1;
	int r = 0;

	if (!dir ||
	    (path && (path[0] != '/' || strchr(path, '\n') || strlen(path) >= CONFIG_PIN_MAX)))
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	if (!dir->ours)
		return ctx_error(ctx, -EPERM,
		                 "lease directory '%s': only its owner (uid %u) may name its "
		                 "configuration",
		                 dir->path, (unsigned)dir->owner);
	if (!path) {
		if (unlinkat(dir->fd, "config", 0) < 0 && errno != ENOENT)
			return ctx_error(ctx, -errno, "'%s/config': %s", dir->path,
			                 strerror(errno));
		return 0;
	}
	(void)snprintf(tmp, sizeof(tmp), ".config-%d", (int)getpid());
	(void)unlinkat(dir->fd, tmp, 0);
	fd = openat(dir->fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || fchmod(fd, 0644) < 0)
		r = -errno;
	if (r == 0)
		r = fd_write_all(fd, path, strlen(path));
	if (r == 0)
		r = fd_write_all(fd, "\n", 1);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (r == 0 && renameat(dir->fd, tmp, dir->fd, "config") < 0)
		r = -errno;
	if (r < 0) {
		(void)unlinkat(dir->fd, tmp, 0);
		return ctx_error(ctx, r, "'%s/config': %s", dir->path, strerror(-r));
	}
	return 0;
}

/* ---- lock files ---- */

int lease_lock_open(const struct gpuctl_lease_dir *dir, const char *uuid, bool create, int *ret_fd,
                    struct stat *ret_st, char *reason, size_t rsize)
{
	char name[UUID_MAX + 8];
	_cleanup_close_ int fd = -1;
	int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
	struct stat st;

	*ret_fd = -1;
	if (!lease_uuid_ok(uuid)) {
		(void)snprintf(reason, rsize, "%s UUID, not usable as a lock file name",
		               uuid ? "unusual" : "no");
		return GPUCTL_LEASE_UNUSABLE;
	}
	if (dir->locks_fd < 0) {
		(void)snprintf(reason, rsize, "no %s/locks (run `sudo gpuctl lease init`)",
		               dir->path);
		return GPUCTL_LEASE_UNINITIALISED;
	}
	(void)snprintf(name, sizeof(name), "%s.lock", uuid);
	fd = openat(dir->locks_fd, name, flags);
	if (fd < 0 && errno == ENOENT && create && dir->ours) {
		fd = openat(dir->locks_fd, name, flags | O_CREAT | O_EXCL, 0600);
		if (fd >= 0 && fchmod(fd, 0644) < 0) {
			(void)snprintf(reason, rsize, "locks/%s: chmod: %s", name, strerror(errno));
			return GPUCTL_LEASE_UNUSABLE;
		}
		if (fd < 0 && errno == EEXIST)
			fd = openat(dir->locks_fd, name, flags);
	}
	if (fd < 0) {
		if (errno == ENOENT && dir->ours)
			return GPUCTL_LEASE_FREE;
		if (errno == ENOENT) {
			(void)snprintf(reason, rsize,
			               "no lock file locks/%s (run `sudo gpuctl lease init`)",
			               name);
			return GPUCTL_LEASE_UNINITIALISED;
		}
		(void)snprintf(reason, rsize, "locks/%s: %s", name,
		               errno == ELOOP ? "is a symlink" : strerror(errno));
		return GPUCTL_LEASE_UNUSABLE;
	}
	if (fstat(fd, &st) < 0) {
		(void)snprintf(reason, rsize, "locks/%s: %s", name, strerror(errno));
		return GPUCTL_LEASE_UNUSABLE;
	}
	if (!S_ISREG(st.st_mode)) {
		(void)snprintf(reason, rsize, "locks/%s: not a regular file", name);
		return GPUCTL_LEASE_UNUSABLE;
	}
	if (st.st_uid != dir->owner) {
		(void)snprintf(reason, rsize,
		               "locks/%s: owned by uid %u, not the directory's owner", name,
		               (unsigned)st.st_uid);
		return GPUCTL_LEASE_UNUSABLE;
	}
	if (st.st_nlink != 1) {
		(void)snprintf(reason, rsize, "locks/%s: has %ju links", name,
		               (uintmax_t)st.st_nlink);
		return GPUCTL_LEASE_UNUSABLE;
	}
	if (ret_st)
		*ret_st = st;
	*ret_fd = TAKE_FD(fd);
	return GPUCTL_LEASE_FREE;
}

int gpuctl_lease_dir_init(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                          const struct gpuctl_snapshot *snap)
{
	int created = 0;

	if (!dir || !snap)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	if (!dir->ours || dir->locks_fd < 0)
		return ctx_error(
		        ctx, -EPERM,
		        "lease directory '%s': only its owner (uid %u) may create lock files",
		        dir->path, (unsigned)dir->owner);
	for (size_t g = 0; g < snap->n_gpus; g++)
		for (int m = -1; m < (int)snap->gpus[g].n_migs; m++) {
			const char *u = lease_dev_uuid(snap, g, m);
			char name[UUID_MAX + 8];
			_cleanup_close_ int fd = -1;

			if (!lease_uuid_ok(u))
				continue;
			(void)snprintf(name, sizeof(name), "%s.lock", u);
			fd = openat(dir->locks_fd, name,
			            O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
			if (fd < 0 && errno == EEXIST)
				continue;
			if (fd < 0 || fchmod(fd, 0644) < 0)
				return ctx_error(ctx, -errno, "lease directory '%s': locks/%s: %s",
				                 dir->path, name, strerror(errno));
			created++;
		}
	return created;
}

int lease_probe(const struct gpuctl_lease_dir *dir, const char *uuid, bool create,
                struct stat *ret_st, uint64_t *ret_used, char *reason, size_t rsize)
{
	_cleanup_close_ int fd = -1;
	int s = lease_lock_open(dir, uuid, create, &fd, ret_st, reason, rsize);

	if (ret_used)
		*ret_used = 0;
	if (s != GPUCTL_LEASE_FREE || fd < 0)
		return s;
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return GPUCTL_LEASE_FREE; /* closing fd drops it */
	if (errno == EWOULDBLOCK && flock(fd, LOCK_SH | LOCK_NB) == 0) {
		if (ret_used && lease_share_used(fd, ret_used) < 0)
			*ret_used = UINT64_MAX;
		return GPUCTL_LEASE_SHARED;
	}
	if (errno == EWOULDBLOCK)
		return GPUCTL_LEASE_HELD;
	(void)snprintf(reason, rsize, "locks/%s.lock: flock: %s", uuid, strerror(errno));
	return GPUCTL_LEASE_UNUSABLE;
}

/* ---- probing from /proc/locks, without opening lock files ---- */

void lease_locks_view_done(struct lease_locks_view *v)
{
	free(v->ino);
	free(v->kind);
	*v = (struct lease_locks_view){0};
}

/* Adds one flock of inode ino (kind LOCKS_WRITE or LOCKS_READ) to v: 0 or -ENOMEM. */
static int view_add(struct lease_locks_view *v, uint64_t ino, unsigned char kind)
{
	for (size_t i = 0; i < v->n; i++)
		if (v->ino[i] == ino) {
			v->kind[i] |= kind;
			return 0;
		}
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 32;
		uint64_t *ni = realloc(v->ino, cap * sizeof(*ni));
		unsigned char *nk;

		if (!ni)
			return -ENOMEM;
		v->ino = ni;
		nk = realloc(v->kind, cap * sizeof(*nk));
		if (!nk)
			return -ENOMEM;
		v->kind = nk;
		v->cap = cap;
	}
	v->ino[v->n] = ino;
	v->kind[v->n++] = kind;
	return 0;
}

void lease_locks_view_read(const struct gpuctl_lease_dir *dir, struct lease_locks_view *v)
{
	_cleanup_fclose_ FILE *f = NULL;
	char line[LOCKS_LINE_MAX];
	struct stat sl;

	*v = (struct lease_locks_view){0};
	if (dir->locks_fd < 0 || fstat(dir->locks_fd, &sl) < 0)
		return;
	f = fopen("/proc/locks", "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		struct lease_flock l;

		if (!lease_flock_parse(line, &l) || l.maj != major(sl.st_dev) ||
		    l.min != minor(sl.st_dev))
			continue; /* another file system's lock (or overlay's naming: none seen) */
		if (view_add(v, l.ino, l.write ? LOCKS_WRITE : LOCKS_READ) < 0) {
			lease_locks_view_done(v);
			return;
		}
	}
	v->dev = sl.st_dev;
	v->read = true;
}

int lease_probe_view(const struct gpuctl_lease_dir *dir, const struct lease_locks_view *v,
                     const char *uuid, struct stat *ret_st, uint64_t *ret_used, char *reason,
                     size_t rsize)
{
	char name[UUID_MAX + 8];
	unsigned char kind = 0;
	struct stat st;

	if (!v || !v->read || !lease_uuid_ok(uuid) || dir->locks_fd < 0)
		return lease_probe(dir, uuid, false, ret_st, ret_used, reason, rsize);
	(void)snprintf(name, sizeof(name), "%s.lock", uuid);
	/* anything but a usable lock file: the opening probe says what is wrong */
	if (fstatat(dir->locks_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_uid != dir->owner || st.st_nlink != 1 || st.st_dev != v->dev)
		return lease_probe(dir, uuid, false, ret_st, ret_used, reason, rsize);
	for (size_t i = 0; i < v->n; i++)
		if (v->ino[i] == (uint64_t)st.st_ino)
			kind = v->kind[i];
	/* seen free, or shared with its declared units asked for: probe by opening */
	if (!kind || (!(kind & LOCKS_WRITE) && ret_used))
		return lease_probe(dir, uuid, false, ret_st, ret_used, reason, rsize);
	if (ret_st)
		*ret_st = st;
	if (ret_used)
		*ret_used = 0;
	return kind & LOCKS_WRITE ? GPUCTL_LEASE_HELD : GPUCTL_LEASE_SHARED;
}

/* ---- a user's own directory in owners/ and queue/ ---- */

#define OWN_SUFFIX_LEN 16 /* hex digits after "<uid>." */

bool lease_user_dir_name(const char *name, uint64_t *ret_uid)
{
	const char *dot = strchr(name, '.');
	size_t n = dot ? (size_t)(dot - name) : strlen(name);
	uint64_t uid;

	if (dot && (strlen(dot + 1) != OWN_SUFFIX_LEN ||
	            strspn(dot + 1, "0123456789abcdef") != OWN_SUFFIX_LEN))
		return false;
	if (!parse_dec(name, n, UINT64_MAX, &uid) || uid >= UINT32_MAX)
		return false;
	*ret_uid = uid;
	return true;
}

/* Whether fd is a directory of ours that no one else may write. */
static bool own_dir_ok(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
	       !(st.st_mode & (S_IWGRP | S_IWOTH));
}

/* An existing "<euid>.<hex>" of ours under parent_fd, else -1. */
static int own_dir_find(int parent_fd, const char *prefix)
{
	_cleanup_(closedirp) DIR *d = lease_dir_reopen(parent_fd);
	struct dirent *de;
	size_t pl = strlen(prefix);

	while (d && (de = readdir(d))) {
		uint64_t uid;
		int fd;

		if (strncmp(de->d_name, prefix, pl) != 0 || de->d_name[pl] != '.' ||
		    !lease_user_dir_name(de->d_name, &uid))
			continue;
		fd = openat(parent_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0 && own_dir_ok(fd))
			return fd;
		if (fd >= 0)
			close(fd);
	}
	return -1;
}

int lease_own_dir_open(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir, int parent_fd,
                       const char *parent, bool create, int *ret_fd)
{
	char name[16], path[4096];
	_cleanup_close_ int fd = -1;
	int r;

	if (parent_fd < 0)
		return -ENOENT;
	(void)snprintf(name, sizeof(name), "%u", (unsigned)geteuid());
	(void)snprintf(path, sizeof(path), "%s/%s/%s", dir->path, parent, name);
	r = lease_open_at(ctx, parent_fd, name, path, true, create, 0755, &fd);
	if (r == -ENOENT || r == -ENOMEM)
		return r;
	if (r >= 0 && own_dir_ok(fd)) {
		*ret_fd = TAKE_FD(fd);
		return 0;
	}
	/* Taken: in a sticky world-writable parent another user can make "<our uid>" first (or
	 * it is not ours for some other reason). Ours is then "<uid>.<random hex>", which readers
	 * accept when its owner is that uid (docs/leases.md "What one user can do to another"). */
	ctx_log(ctx, GPUCTL_LOG_DEBUG, "'%s' is not a directory of uid %u: using %s/%s.<random>",
	        path, (unsigned)geteuid(), parent, name);
	fd = own_dir_find(parent_fd, name);
	for (int tries = 0; fd < 0 && create && tries < 16; tries++) {
		uint64_t rnd = 0;
		char alt[48];

		if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
			rnd = ((uint64_t)getpid() << 32) ^ (uint64_t)monotonic_ms() ^
			      ((uint64_t)tries * 0x9e3779b97f4a7c15ull);
		(void)snprintf(alt, sizeof(alt), "%s.%016" PRIx64, name, rnd);
		if (mkdirat(parent_fd, alt, 0700) < 0) {
			if (errno == EEXIST)
				continue;
			return ctx_error(ctx, -errno,
			                 "lease directory '%s/%s/%s': cannot create: %s", dir->path,
			                 parent, alt, strerror(errno));
		}
		fd = openat(parent_fd, alt, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0 && (fchmod(fd, 0755) < 0 || !own_dir_ok(fd))) {
			close(fd);
			fd = -1;
		}
	}
	if (fd < 0)
		return create ? ctx_error(ctx, -EPERM,
		                          "lease directory '%s': not a directory of uid %u, and no "
		                          "other could be made",
		                          path, (unsigned)geteuid())
		              : -ENOENT;
	*ret_fd = TAKE_FD(fd);
	return 0;
}

bool lease_lock_id(const struct gpuctl_lease_dir *dir, const char *uuid, struct lease_lock_id *ret)
{
	char name[UUID_MAX + 8];
	struct stat st;

	if (!uuid || !lease_uuid_ok(uuid) || dir->locks_fd < 0)
		return false;
	(void)snprintf(name, sizeof(name), "%s.lock", uuid);
	if (fstatat(dir->locks_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_uid != dir->owner || st.st_nlink != 1)
		return false;
	*ret = (struct lease_lock_id){.dev = st.st_dev, .ino = st.st_ino};
	return true;
}
