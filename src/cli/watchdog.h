/* SPDX-License-Identifier: MIT */
/*
 * watchdog.h: the bound on a hung NVML call for one-shot commands (GPUCTL_NVML_TIMEOUT;
 * docs/gpuctl.1, ENVIRONMENT and EXIT STATUS).
 *
 * One watchdog per process, armed by cli_context() when the context of a one-shot command is
 * made (cmd.h, CMD_EXITS_HUNG): a thread that reads the library's record of the NVML call in
 * flight (gpuctl_nvml_call_in_flight) and, once one has been in flight for the bound, prints
 * one line naming the call and the GPU and _exit()s with CLI_EXIT_HUNG. Nothing of the
 * command is left half-done by that: what was to be printed is not (stdout is not flushed),
 * locks die with the process, no job has started (run pauses the watchdog while its job runs).
 */
#ifndef GPUCTL_CLI_WATCHDOG_H
#define GPUCTL_CLI_WATCHDOG_H

#include "gpuctl/gpuctl.h"

#define CLI_NVML_TIMEOUT_DEFAULT 30.0    /* seconds, when GPUCTL_NVML_TIMEOUT is not set */
#define CLI_NVML_TIMEOUT_MAX     86400.0 /* the largest bound GPUCTL_NVML_TIMEOUT may set */

/* Starts watching ctx's NVML calls with a bound of seconds (> 0); with the thread already
 * running, watches ctx instead of the context before. ctx must outlive the watch:
 * cli_watchdog_detach() or cli_watchdog_closing() before freeing it. 0, or -errno when no
 * thread could be started (the command then runs unbounded, as before). */
int cli_watchdog_start(const struct gpuctl_ctx *ctx, double seconds);

/* The context is about to be freed while the command goes on (run lets go of NVML while its
 * job runs): the watchdog stops reading it. A later cli_watchdog_start() (a new context)
 * watches that one. */
void cli_watchdog_detach(void);

/* run, around its job: while paused a call in flight never ends the process (the job, not
 * gpuctl, is what runs now; gpuctl exiting would leave it without its parent). */
void cli_watchdog_pause(void);
void cli_watchdog_resume(void);

/* The holder of `select --hold` tells its parent how it ended through fd (one status byte):
 * on timeout the watchdog writes CLI_EXIT_HUNG there first. -1: no such descriptor. */
void cli_watchdog_report_fd(int fd);

/* Before the context is freed: the watchdog stops reading it and gives freeing it (NVML's
 * nvmlShutdown) the bound instead; past it, one line and _exit(status): the command's work is
 * done and its output flushed, so its own status stands. */
void cli_watchdog_closing(int status);

/* Stops the thread and waits for it (after the context is freed). No-op when none runs. */
void cli_watchdog_stop(void);

#endif /* GPUCTL_CLI_WATCHDOG_H */
