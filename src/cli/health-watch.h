/* SPDX-License-Identifier: MIT */
/*
 * health-watch.h: `gpuctl health --watch`: check continuously and print each finding as it
 * appears (health-watch.c).
 */
#ifndef GPUCTL_CLI_HEALTH_WATCH_H
#define GPUCTL_CLI_HEALTH_WATCH_H

#include <stdbool.h>

#include "cmd.h"

struct watch_args {
	const char *ids;   /* -i, NULL: every GPU */
	bool json;         /* JSON lines instead of text lines */
	bool strict;       /* --strict */
	const char *kmsg;  /* the kernel log to read at the start (NULL: /dev/kmsg) */
	bool kmsg_named;   /* it must be readable */
	unsigned interval; /* seconds between snapshots */
	const char *state; /* the health state file to keep */
};

/* Runs until SIGINT/SIGTERM/SIGHUP; returns the exit status (the worst verdict of the last
 * check: 0, 10 or 20; or 1/4 when it could not start). */
int health_watch(struct cli *cli, const struct watch_args *w);

#endif
