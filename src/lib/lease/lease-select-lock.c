// SPDX-License-Identifier: MIT
/*
 * lease-select-lock.c: DIR/select.lock, which orders every select-and-lease (docs/leases.md),
 * taken exclusively to select and lease, shared to read the lease list.
 *
 * Decisions:
 * - select.lock is never waited for without a bound (docs/leases.md "Bounds"): any user can
 *   hold it, so a wait polls LOCK_NB until the context's deadline or cancel descriptor, and a
 *   timeout names the holder from /proc/locks (-EAGAIN).
 * - select.lock is opened afresh for every select-and-lease, never kept in the handle: a
 *   forked child sharing the parent's open file description would not be excluded by it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ctx.h"
#include "fileio.h"
#include "lease-internal.h"
#include "nss.h"
#include "util.h"

/* The poll interval of a lock wait: 1 ms, doubling to LOCK_POLL_MAX_MS. flock(2) has no
 * timeout and a blocking one cannot watch a cancel descriptor, so a busy select.lock is
 * retried with LOCK_NB; a select-and-lease holds it for milliseconds, so the first retries
 * find it free, and a lock held longer costs a waiter about 16 wake-ups a second. */
#define LOCK_POLL_MAX_MS 64

/* ms as seconds, as few digits as it takes: 1500 "1.5", 10000 "10", 250 "0.25". */
static void seconds_text(int64_t ms, char *buf, size_t size)
{
	int n;

	if (ms < 0)
		ms = 0;
	n = snprintf(buf, size, "%lld.%03lld", (long long)(ms / 1000), (long long)(ms % 1000));
	while (n > 0 && (size_t)n < size && buf[n - 1] == '0')
		buf[--n] = '\0';
	if (n > 0 && (size_t)n < size && buf[n - 1] == '.')
		buf[--n] = '\0';
}

/* "select.lock is held by pid P (user U, comm) for N s or more" into buf: N is the bound waited
 * (GPUCTL_LOCK_WAIT as given, to the millisecond), which the holder has held it at least. */
static void holder_line(int fd, const char *path, int64_t waited_ms, char *buf, size_t size)
{
	struct stat st, pst;
	pid_t pid = fstat(fd, &st) == 0 ? lease_lock_holder(st.st_dev, st.st_ino, true) : 0;
	char proc[64], comm[64] = "", secs[32];
	_cleanup_free_ char *user = NULL;

	seconds_text(waited_ms, secs, sizeof(secs));

	if (pid > 0) {
		_cleanup_close_ int cfd = -1;
		ssize_t k;

		(void)snprintf(proc, sizeof(proc), "/proc/%d/comm", (int)pid);
		cfd = open(proc, O_RDONLY | O_CLOEXEC);
		k = cfd >= 0 ? read(cfd, comm, sizeof(comm) - 1) : -1;
		comm[k > 0 ? k : 0] = '\0';
		comm[strcspn(comm, "\n")] = '\0';
		for (char *c = comm; *c; c++)
			if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
				*c = '?';
		(void)snprintf(proc, sizeof(proc), "/proc/%d", (int)pid);
		if (stat(proc, &pst) == 0 && !(user = nss_user_name(pst.st_uid)) &&
		    asprintf(&user, "uid %u", (unsigned)pst.st_uid) < 0)
			user = NULL;
	}
	if (pid > 0)
		(void)snprintf(buf, size, "'%s' is held by pid %d (user %s%s%s) for %s s or more",
		               path, (int)pid, user ? user : "?", comm[0] ? ", " : "", comm, secs);
	else
		(void)snprintf(buf, size, "'%s' is held by another process for %s s or more", path,
		               secs);
}

/* flock(fd, op) as the context allows (see lease_select_lock_take). */
static int lock_bounded(struct gpuctl_ctx *ctx, int fd, int op, bool reader, const char *path)
{
	int64_t t0 = monotonic_ms(), until, wait_ms = LEASE_LOCK_WAIT_MS;
	int cancel_fd = -1, step = 1;

	if (ctx && ctx->lock_wait_set)
		wait_ms = ctx->lock_wait_ms;
	if (reader && wait_ms > LEASE_LOCK_READ_MS)
		wait_ms = LEASE_LOCK_READ_MS;
	until = t0 + wait_ms;
	if (ctx && ctx->lock_in_wait && !reader) {
		until = ctx->lock_until_ms;
		cancel_fd = ctx->lock_cancel_fd;
	}
	for (;;) {
		struct pollfd p = {.fd = cancel_fd, .events = POLLIN};
		int64_t now, left;
		int k;

		if (flock(fd, op | LOCK_NB) == 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno != EWOULDBLOCK)
			return ctx_error(ctx, -errno, "'%s': flock: %s", path, strerror(errno));
		now = monotonic_ms();
		left = until - now;
		if (left <= 0) {
			char line[CTX_ERRMSG_MAX];

			holder_line(fd, path, until - t0, line, sizeof(line));
			return ctx_error(ctx, -EAGAIN, "%s", line);
		}
		k = poll(&p, 1, left < step ? (int)left : step);
		if (k < 0 && errno == EINTR)
			return ctx_error(ctx, -EINTR, "waiting for '%s': interrupted by a signal",
			                 path);
		if (k > 0)
			return ctx_error(ctx, -ECANCELED, "waiting for '%s': cancelled", path);
		if (step < LOCK_POLL_MAX_MS)
			step *= 2;
	}
}

int lease_select_lock_take(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir, int *ret_fd,
                           ino_t *ret_ino)
{
	char path[4096];
	_cleanup_close_ int sfd = -1;
	struct stat st;
	int r;

	(void)snprintf(path, sizeof(path), "%s/select.lock", dir->path);
	r = lease_open_at(ctx, dir->fd, "select.lock", path, false, false, 0, &sfd);
	if (r == -ENOENT)
		return ctx_error(ctx, -ENOENT, "lease directory '%s': no select.lock", dir->path);
	if (r < 0)
		return r;
	r = lease_check_fd(ctx, sfd, path, false, dir->owner, false, &st);
	if (r < 0)
		return r;
	r = lock_bounded(ctx, sfd, LOCK_EX, false, path);
	if (r < 0)
		return r;
	if (ret_ino)
		*ret_ino = st.st_ino;
	*ret_fd = TAKE_FD(sfd);
	return 0;
}

int lease_select_lock_shared(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir,
                             int *ret_fd)
{
	_cleanup_close_ int fd =
	        openat(dir->fd, "select.lock", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	char path[4096];
	struct stat st;
	int r;

	*ret_fd = -1;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != dir->owner ||
	    (st.st_mode & (S_IWGRP | S_IWOTH)))
		return 0;
	(void)snprintf(path, sizeof(path), "%s/select.lock", dir->path);
	r = lock_bounded(ctx, fd, LOCK_SH, true, path);
	if (r < 0)
		return r;
	*ret_fd = TAKE_FD(fd);
	return 0;
}
