// SPDX-License-Identifier: MIT
/*
 * fileio.c: whole, bounded reads and whole writes of a descriptor (fileio.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "fileio.h"
#include "util.h"

int fd_read_all(int fd, size_t max, char **ret, size_t *ret_len)
{
	_cleanup_free_ char *b = malloc(max + 2);
	size_t len = 0;

	if (!b)
		return -ENOMEM;
	for (;;) {
		ssize_t k = read(fd, b + len, max + 1 - len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			break;
		len += (size_t)k;
		if (len > max)
			return -EFBIG;
	}
	b[len] = '\0';
	*ret_len = len;
	*ret = TAKE_PTR(b);
	return 0;
}

int fd_write_all(int fd, const void *p, size_t len)
{
	const char *c = p;

	while (len > 0) {
		ssize_t k = write(fd, c, len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		c += k;
		len -= (size_t)k;
	}
	return 0;
}
