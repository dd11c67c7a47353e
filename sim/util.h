/* Small helpers shared by the simulator (library, nvsim, tests): cleanup attributes, checked
 * number parsing and bounded string copies. Kept separate from src/lib on purpose: the
 * simulator must build and be reviewed without the product's code (design.md section 5). */
#ifndef SIM_UTIL_H
#define SIM_UTIL_H

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define _cleanup_(f)     __attribute__((cleanup(f)))
#define _cleanup_free_   _cleanup_(sim_freep)
#define _cleanup_close_  _cleanup_(sim_closep)
#define _cleanup_fclose_ _cleanup_(sim_fclosep)

#define SIM_ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))

static inline void sim_freep(void *p)
{
	free(*(void **)p);
}

static inline void sim_closep(int *fd)
{
	if (*fd >= 0)
		close(*fd);
}

static inline void sim_fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}

/* Hands a pointer over to a new owner, leaving NULL behind for the cleanup handler. */
static inline void *sim_take_ptr(void *pp)
{
	void **p = pp;
	void *v = *p;
	*p = NULL;
	return v;
}
#define TAKE_PTR(p) sim_take_ptr(&(p))

/* Copies at most dstlen-1 bytes and always terminates; returns -ENOSPC when src was cut. */
static inline int sim_strlcpy(char *dst, const char *src, size_t dstlen)
{
	size_t n = strlen(src);

	if (dstlen == 0)
		return -ENOSPC;
	if (n >= dstlen) {
		memcpy(dst, src, dstlen - 1);
		dst[dstlen - 1] = '\0';
		return -ENOSPC;
	}
	memcpy(dst, src, n + 1);
	return 0;
}

/* Parses a whole string as an unsigned number (base 0: decimal, 0x hex) no larger than max. */
static inline int sim_parse_u64(const char *s, uint64_t max, uint64_t *ret)
{
	char *end = NULL;
	unsigned long long v;

	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || !end || *end)
		return -EINVAL;
	if (v > max)
		return -ERANGE;
	*ret = v;
	return 0;
}

#endif
