/* SPDX-License-Identifier: MIT */
/*
 * report-args.h: the pure parsers of `gpuctl report`'s --since/--until and --by (linked by
 * fuzz/fuzz-report-args.c).
 */
#ifndef GPUCTL_REPORT_ARGS_H
#define GPUCTL_REPORT_ARGS_H

/* A time as --since and --until take it, into Unix seconds (docs/gpuctl.1, "report"):
 *   now                          now
 *   -N{s,m,h,d,w}                N seconds, minutes, hours, days or weeks before now
 *   YYYY-MM-DD                   midnight that day
 *   YYYY-MM-DD[T ]HH:MM[:SS]     that moment
 * each date or time in UTC, or with a Z or a +HH:MM / -HH:MM offset after it. 0, or -EINVAL with
 * *ret_why saying what is wrong (static text). */
int report_parse_time(const char *s, double now, double *ret_t, const char **ret_why);

/* --by's value: user, group, pool, workload, gpu or day (enum gpuctl_ledger_by). 0 or -EINVAL. */
int report_parse_by(const char *s, int *ret_by);

#endif /* GPUCTL_REPORT_ARGS_H */
