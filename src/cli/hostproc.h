/* SPDX-License-Identifier: MIT */
/*
 * hostproc.h: what the host knows about a process (proc(5)): CPU time, resident memory, start
 * time and the full command line, for `gpuctl top`'s process list and the host facts of list
 * and ps.
 */
#ifndef GPUCTL_CLI_HOSTPROC_H
#define GPUCTL_CLI_HOSTPROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The fields of /proc/PID/stat that top shows (proc(5), field numbers from 1). */
struct hostproc_stat {
	char comm[16];        /* field 2 without its parentheses: the kernel's name of the
	                       * process (at most 15 bytes; exec changes it), as it is */
	char state;           /* field 3: R, S, D, Z, ... */
	uint64_t cpu_ticks;   /* fields 14 + 15: utime + stime, in clock ticks */
	uint64_t start_ticks; /* field 22: start time after boot, in clock ticks */
	uint64_t rss_pages;   /* field 24: resident set size, in pages */
};

/* Parses the text of /proc/PID/stat (len bytes, need not be NUL-terminated). The command name
 * (field 2) may hold anything, ')' and blanks included: the fields after it start after the
 * last ')'. 0, or -EINVAL for text that does not have the fields as decimal numbers. */
int hostproc_parse_stat(const char *text, size_t len, struct hostproc_stat *ret_stat);

/* Reads /proc/PID/stat. 0, -ESRCH when there is no such process, -EINVAL unparsable,
 * other -errno. */
int hostproc_read_stat(pid_t pid, struct hostproc_stat *ret_stat);
/* As hostproc_read_stat, and the owner of the file read (ret_uid), which is the process's
 * effective uid as /proc/PID's owner is (proc(5); root for a process that is not dumpable). */
int hostproc_read_stat_uid(pid_t pid, struct hostproc_stat *ret_stat, uint32_t *ret_uid);

/* The command line of pid (/proc/PID/cmdline, arguments joined by one space, control
 * characters as '?') into buf; "" when it cannot be read (kernel threads, gone). */
void hostproc_cmdline(pid_t pid, char *buf, size_t size);

/* Seconds since boot (/proc/uptime); -1 when unknown. */
double hostproc_uptime(void);

/* A process's facts as ps(1) shows them, for list and ps. */
struct hostproc_facts {
	uint64_t host_memory; /* resident set size, bytes */
	double cpu_percent;   /* CPU time over its whole life / elapsed, x100; 0 within its first
	                       * clock tick (elapsed 0), as ps(1) prints it */
	uint64_t elapsed;     /* whole seconds since it started */
};

/* Reads pid's facts (stat, /proc/uptime). 0, or -errno as hostproc_read_stat (-ENODATA when
 * the uptime or the clock tick is unknown). */
int hostproc_facts(pid_t pid, struct hostproc_facts *ret_facts);

/* Elapsed seconds as ps(1) writes etime: [[DD-]hh:]mm:ss. */
void hostproc_format_elapsed(uint64_t seconds, char *buf, size_t size);

#endif /* GPUCTL_CLI_HOSTPROC_H */
