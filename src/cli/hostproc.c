// SPDX-License-Identifier: MIT
/*
 * hostproc.c: the host's view of a process, from proc(5), for `gpuctl top`, list and ps.
 *
 * Decisions:
 * - One read(2) of a whole small file each (stat, cmdline, uptime): the kernel generates them
 *   at open, so one read sees one consistent state.
 * - The stat parser is pure (and fuzzed: fuzz/fuzz-procstat.c): the command name between '('
 *   and the last ')' is skipped, because a process chooses its own name.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hostproc.h"
#include "parse.h"

int hostproc_parse_stat(const char *text, size_t len, struct hostproc_stat *ret_stat)
{
	struct hostproc_stat st = {0};
	uint64_t utime = 0, stime = 0;
	size_t i = len, field = 2;

	while (i > 0 && text[i - 1] != ')')
		i--;
	if (i == 0)
		return -EINVAL;
	/* the name: from the first '(' to the last ')', cut to comm's size */
	const char *open_paren = memchr(text, '(', i - 1);
	if (open_paren) {
		size_t from = (size_t)(open_paren - text) + 1, n = i - 1 - from;
		if (n >= sizeof(st.comm))
			n = sizeof(st.comm) - 1;
		memcpy(st.comm, text + from, n);
	}
	/* i is just after the last ')': field 3 onwards, separated by single blanks */
	while (i < len && field < 24) {
		while (i < len && (text[i] == ' ' || text[i] == '\n'))
			i++;
		size_t start = i;
		while (i < len && text[i] != ' ' && text[i] != '\n')
			i++;
		if (i == start)
			break;
		field++;
		const char *tok = text + start;
		size_t n = i - start;
		bool ok = true;
		switch (field) {
		case 3:
			ok = n == 1;
			st.state = tok[0];
			break;
		case 14:
			ok = parse_dec(tok, n, UINT64_MAX, &utime);
			break;
		case 15:
			ok = parse_dec(tok, n, UINT64_MAX, &stime);
			break;
		case 22:
			ok = parse_dec(tok, n, UINT64_MAX, &st.start_ticks);
			break;
		case 24:
			ok = parse_dec(tok, n, UINT64_MAX, &st.rss_pages);
			break;
		default:
			break;
		}
		if (!ok)
			return -EINVAL;
	}
	if (field < 24 || utime > UINT64_MAX - stime)
		return -EINVAL;
	st.cpu_ticks = utime + stime;
	*ret_stat = st;
	return 0;
}

/* Reads a small proc file whole into buf (NUL-terminated), and its owner when ret_uid is not
 * NULL. Its length, or -errno. */
static ssize_t read_small_owner(const char *path, char *buf, size_t size, uint32_t *ret_uid)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, size - 1);
	if (n < 0)
		n = -errno;
	else if (ret_uid && fstat(fd, &st) < 0)
		n = -errno;
	else if (ret_uid)
		*ret_uid = (uint32_t)st.st_uid;
	close(fd);
	if (n >= 0)
		buf[n] = '\0';
	return n;
}

static ssize_t read_small(const char *path, char *buf, size_t size)
{
	return read_small_owner(path, buf, size, NULL);
}

int hostproc_read_stat_uid(pid_t pid, struct hostproc_stat *ret_stat, uint32_t *ret_uid)
{
	char path[48], buf[1024];
	ssize_t n;

	(void)snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	n = read_small_owner(path, buf, sizeof(buf), ret_uid);
	if (n < 0)
		return n == -ENOENT ? -ESRCH : (int)n;
	return hostproc_parse_stat(buf, (size_t)n, ret_stat);
}

int hostproc_read_stat(pid_t pid, struct hostproc_stat *ret_stat)
{
	return hostproc_read_stat_uid(pid, ret_stat, NULL);
}

void hostproc_cmdline(pid_t pid, char *buf, size_t size)
{
	char path[48];
	ssize_t n;

	if (size == 0)
		return;
	(void)snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	n = read_small(path, buf, size);
	if (n <= 0) {
		buf[0] = '\0';
		return;
	}
	while (n > 0 && buf[n - 1] == '\0') /* the last argument's NUL */
		n--;
	for (ssize_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)buf[i];
		if (c == '\0')
			buf[i] = ' ';
		else if (c < 0x20 || c == 0x7f)
			buf[i] = '?';
	}
	buf[n] = '\0';
}

double hostproc_uptime(void)
{
	char buf[128], *end;
	double up;

	if (read_small("/proc/uptime", buf, sizeof(buf)) <= 0)
		return -1;
	up = strtod(buf, &end);
	return end == buf || up < 0 ? -1 : up;
}

int hostproc_facts(pid_t pid, struct hostproc_facts *ret_facts)
{
	struct hostproc_stat st;
	double up = hostproc_uptime(), hz = (double)sysconf(_SC_CLK_TCK);
	long page = sysconf(_SC_PAGESIZE);
	int r;

	if (up < 0 || hz <= 0 || page <= 0)
		return -ENODATA;
	r = hostproc_read_stat(pid, &st);
	if (r < 0)
		return r;
	/* both clocks count in ticks: a process started in this tick has elapsed 0 */
	double elapsed = up - (double)st.start_ticks / hz;
	*ret_facts = (struct hostproc_facts){
	        .host_memory = st.rss_pages * (uint64_t)page,
	        .cpu_percent = elapsed > 0 ? (double)st.cpu_ticks / hz / elapsed * 100.0 : 0.0,
	        .elapsed = elapsed > 0 ? (uint64_t)elapsed : 0,
	};
	return 0;
}

void hostproc_format_elapsed(uint64_t s, char *buf, size_t size)
{
	uint64_t d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60;

	if (d)
		(void)snprintf(buf, size, "%" PRIu64 "-%02" PRIu64 ":%02" PRIu64 ":%02" PRIu64, d,
		               h, m, s % 60);
	else if (h)
		(void)snprintf(buf, size, "%02" PRIu64 ":%02" PRIu64 ":%02" PRIu64, h, m, s % 60);
	else
		(void)snprintf(buf, size, "%02" PRIu64 ":%02" PRIu64, m, s % 60);
}
