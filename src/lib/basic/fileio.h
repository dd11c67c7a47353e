/* SPDX-License-Identifier: MIT */
/*
 * fileio.h: whole reads and writes of a descriptor, retried on EINTR and short counts, for the
 * rooms that read small files they must not trust (lock store records, configuration, the
 * health state file). Bounded reads: a file larger than the caller's limit is -EFBIG, never
 * read in part.
 */
#ifndef GPUCTL_FILEIO_H
#define GPUCTL_FILEIO_H

#include <stddef.h>

/* Reads fd to its end into *ret, NUL-terminated (len bytes, then '\0'); more than max bytes is
 * -EFBIG. Returns 0, -ENOMEM or read(2)'s -errno; *ret (owned by the caller) and *ret_len are
 * written only on success. */
int fd_read_all(int fd, size_t max, char **ret, size_t *ret_len);
/* Writes all len bytes of p. Returns 0 or write(2)'s -errno. */
int fd_write_all(int fd, const void *p, size_t len);

#endif /* GPUCTL_FILEIO_H */
