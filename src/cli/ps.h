/* SPDX-License-Identifier: MIT */
/*
 * ps.h: `gpuctl ps`'s parts: who holds what (cmd-ps.c) and who waits (ps-waiting.c).
 */
#ifndef GPUCTL_CLI_PS_H
#define GPUCTL_CLI_PS_H

#include <stdbool.h>

#include "cmd.h"

/* ps --waiting: the live tickets in order (docs/leases.md "Waiting"), from the lease directory
 * lease_dir (NULL: the site's), as JSON or a table. The exit status. */
int ps_waiting(struct cli *cli, const char *lease_dir, bool json);

#endif /* GPUCTL_CLI_PS_H */
