// SPDX-License-Identifier: MIT
/*
 * config-file.c: reading the configuration file, and what is kept of the file itself: its path,
 * owner, mode and identity, from which site.c judges whether to trust it (docs/config.md). The
 * text is parsed by config.c.
 *
 * Decisions:
 * - No path: $GPUCTL_CONFIG, else GPUCTL_CONFIG_DEFAULT_PATH, whose absence is no error (an
 *   empty configuration); a file named by the caller or the environment must exist.
 * - Only a regular file is read, opened O_NONBLOCK so that a FIFO cannot hang us before fstat()
 *   refuses it; at most CONFIG_FILE_MAX bytes. The one exception is the null device (character
 *   device 1:3, /dev/null or a symlink to it, as systemd masks a unit and git takes
 *   GIT_CONFIG_GLOBAL=/dev/null): it means "no configuration", the empty one a missing default
 *   file gives (no path, no owner). Judged on the opened file (fstat), never by the name.
 * - Owner, mode, device and inode are those of the file as opened (fstat), not of the path
 *   looked up again, so the trust check and gpuctl_config_is_file judge the file that was read.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "config-internal.h"
#include "ctx.h"
#include "fileio.h"
#include "util.h"

int gpuctl_config_load(struct gpuctl_ctx *ctx, const char *path, struct gpuctl_config **ret_cfg)
{
	_cleanup_(gpuctl_config_freep) struct gpuctl_config *cfg = NULL;
	_cleanup_free_ char *text = NULL, *q = NULL;
	_cleanup_close_ int fd = -1;
	bool named = true;
	struct stat st;
	size_t len = 0;
	int r;

	if (!ret_cfg)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	if (!path) {
		path = getenv("GPUCTL_CONFIG");
		if (!path || !path[0]) {
			path = GPUCTL_CONFIG_DEFAULT_PATH;
			named = false;
		}
	}
	q = config_quoted_name(path);
	if (!q)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	/* O_NONBLOCK: a FIFO must not hang us before fstat() refuses it. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0 && errno == ENOENT && !named) {
		r = gpuctl_config_parse(ctx, path, "", 0, &cfg);
		if (r < 0)
			return r;
		*ret_cfg = TAKE_PTR(cfg);
		return 0;
	}
	if (fd < 0) {
		r = -errno;
		if (r == -ENOENT)
			return ctx_error(ctx, r, "%s: configuration file not found", q);
		return ctx_error(ctx, r, "%s: cannot open: %s", q, strerror(-r));
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		return ctx_error(ctx, r, "%s: cannot stat: %s", q, strerror(-r));
	}
	if (S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 && minor(st.st_rdev) == 3) {
		/* the null device: no configuration */
		r = gpuctl_config_parse(ctx, path, "", 0, &cfg);
		if (r < 0)
			return r;
		*ret_cfg = TAKE_PTR(cfg);
		return 0;
	}
	if (!S_ISREG(st.st_mode))
		return ctx_error(ctx, -EPERM, "%s: not a regular file (%s)", q,
		                 S_ISDIR(st.st_mode) ? "a directory" : "a device, FIFO or socket");
	r = fd_read_all(fd, CONFIG_FILE_MAX, &text, &len);
	if (r == -EFBIG)
		return ctx_error(ctx, -EINVAL, "%s: larger than 1 MiB", q);
	if (r < 0)
		return ctx_error(ctx, r, "%s: cannot read: %s", q, strerror(-r));
	r = gpuctl_config_parse(ctx, path, text, len, &cfg);
	if (r < 0)
		return r;
	cfg->path = strdup(path);
	if (!cfg->path)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	cfg->has_file = true;
	cfg->uid = (uint32_t)st.st_uid;
	cfg->mode = (uint32_t)(st.st_mode & 07777);
	cfg->dev = (uint64_t)st.st_dev;
	cfg->ino = (uint64_t)st.st_ino;
	*ret_cfg = TAKE_PTR(cfg);
	return 0;
}

const char *gpuctl_config_path(const struct gpuctl_config *cfg)
{
	return cfg ? cfg->path : NULL;
}

int gpuctl_config_is_file(const struct gpuctl_config *cfg, const char *path)
{
	struct stat st;

	if (!cfg || !cfg->has_file || !path || stat(path, &st) < 0)
		return 0;
	return (uint64_t)st.st_dev == cfg->dev && (uint64_t)st.st_ino == cfg->ino;
}

int gpuctl_config_file_owner(const struct gpuctl_config *cfg, uint32_t *ret_uid, uint32_t *ret_mode)
{
	if (!cfg || !cfg->has_file)
		return -ENOENT;
	if (ret_uid)
		*ret_uid = cfg->uid;
	if (ret_mode)
		*ret_mode = cfg->mode;
	return 0;
}
