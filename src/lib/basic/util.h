/* SPDX-License-Identifier: MIT */
/*
 * util.h: small helpers shared by libgpuctl and the gpuctl programs (never in public headers).
 *
 * Decisions:
 * - _cleanup_ helpers in the systemd manner: a variable declared _cleanup_free_ is freed when it
 *   goes out of scope; TAKE_PTR() hands ownership on (to a ret_* parameter) and leaves NULL.
 * - Destructors accept NULL, so a cleanup on a variable that was never filled is harmless.
 * - Only header-inline code here: no state, nothing to link.
 */
#ifndef GPUCTL_UTIL_H
#define GPUCTL_UTIL_H

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpuctl/gpuctl.h"

#define _cleanup_(f)   __attribute__((cleanup(f)))
#define _unused_       __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

/* Returns the value of p and sets p to NULL: ownership moves to the caller. (__extension__:
 * statement expressions are GNU C, fine under -Wpedantic this way.) */
#define TAKE_PTR(p)                                                                                \
	__extension__({                                                                            \
		__typeof__(p) take_ptr_tmp_ = (p);                                                 \
		(p) = NULL;                                                                        \
		take_ptr_tmp_;                                                                     \
	})

/* Same for a file descriptor: returns it and leaves -1. */
#define TAKE_FD(fd)                                                                                \
	__extension__({                                                                            \
		int take_fd_tmp_ = (fd);                                                           \
		(fd) = -1;                                                                         \
		take_fd_tmp_;                                                                      \
	})

/* CLOCK_MONOTONIC in milliseconds. */
static inline int64_t monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void freep(void *p)
{
	free(*(void **)p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline void closep(int *fd)
{
	if (*fd >= 0)
		(void)close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

/* Closes *d when it is open: _cleanup_(closedirp) DIR *d. */
static inline void closedirp(DIR **d)
{
	if (*d)
		(void)closedir(*d);
}

static inline void fclosep(FILE **f)
{
	if (*f)
		(void)fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

/* Frees *p with free_fn (which must accept NULL) when p leaves scope. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)                                                    \
	static inline void func##p(type *p)                                                        \
	{                                                                                          \
		func(*p);                                                                          \
	}

static inline bool streq(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

/* strdup() that also accepts NULL (returns NULL then); callers check for OOM themselves. */
static inline char *strdup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* Copies src into dst[size] truncating, always NUL-terminated (size > 0). */
static inline void strscpy(char *dst, size_t size, const char *src)
{
	size_t n = strnlen(src, size - 1);
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/* Copies s[0..len) into dst for quoting an entry in a one-line message: non-printable bytes as
 * '?', and more than max bytes cut with "...". dst always ends with a NUL. */
static inline void quote_text(char *dst, size_t size, const char *s, size_t len, size_t max)
{
	size_t n = 0;
	bool cut = len > max;

	if (size == 0)
		return;
	if (cut)
		len = max;
	for (size_t i = 0; i < len && n + 1 < size; i++)
		dst[n++] = isprint((unsigned char)s[i]) ? s[i] : '?';
	for (int i = 0; cut && i < 3 && n + 1 < size; i++)
		dst[n++] = '.';
	dst[n] = '\0';
}

/* Structs a caller allocates start with size_t struct_size, so that they can grow (gpuctl.h):
 * the smallest struct_size accepted covers the first field after it. */
#define STRUCT_SIZE_MIN(type, first) (offsetof(type, first) + sizeof(((type *)NULL)->first))

/* Fills a caller's growable struct dst from the library's whole one (src, size bytes): only the
 * first struct_size bytes of dst (the caller's), which keeps its struct_size, so a program built
 * against an older, smaller struct gets the fields it knows and nothing past them is written.
 * The caller has checked struct_size against STRUCT_SIZE_MIN. */
static inline void struct_fill(void *dst, const void *src, size_t size)
{
	size_t have;

	memcpy(&have, dst, sizeof(have));
	memcpy(dst, src, have < size ? have : size);
	memcpy(dst, &have, sizeof(have));
}

/* The reverse: reads a caller's growable struct src into dst (size bytes, initialised with the
 * defaults of the fields an older caller does not have); dst's struct_size becomes size. */
static inline void struct_read(void *dst, size_t size, const void *src)
{
	size_t have;

	memcpy(&have, src, sizeof(have));
	memcpy(dst, src, have < size ? have : size);
	memcpy(dst, &size, sizeof(size));
}

/* Cleanup functions of the public handles, one definition for all of src/lib:
 * _cleanup_(gpuctl_devset_freep) and so on. */
DEFINE_TRIVIAL_CLEANUP_FUNC(struct gpuctl_devset *, gpuctl_devset_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct gpuctl_selection *, gpuctl_selection_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct gpuctl_lease *, gpuctl_lease_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct gpuctl_lease_dir *, gpuctl_lease_dir_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct gpuctl_lease_list *, gpuctl_lease_list_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct gpuctl_lease_notices *, gpuctl_lease_notices_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct gpuctl_config *, gpuctl_config_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(struct gpuctl_snapshot *, gpuctl_snapshot_free)

#endif /* GPUCTL_UTIL_H */
