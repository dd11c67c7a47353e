// SPDX-License-Identifier: MIT
/*
 * watchdog.c: gives up on a hung NVML call in one-shot commands (GPUCTL_NVML_TIMEOUT).
 *
 * Decisions:
 * - A call blocked in the driver cannot be cancelled or interrupted (a driver stuck in the
 *   kernel ignores signals short of SIGKILL), so the bound is kept by another thread, which
 *   ends the whole process with _exit(): the blocked thread is never asked to do anything.
 *   The library records the call in flight with a few atomic stores and no system call
 *   (src/lib/nvml/nvml-call.c), so the normal case costs one thread per command and
 *   nothing per NVML call.
 * - A thread, not a timer signal: a signal handler could do nothing useful (snprintf is not
 *   async-signal-safe) and would have to share the process's signals with run's forwarding.
 *   The thread blocks every signal, so process-directed signals still reach the main thread
 *   (run's sigtimedwait, Ctrl-C's default action). It sleeps on a condition variable
 *   (CLOCK_MONOTONIC) until the call in flight would reach the bound, or for the bound when
 *   none is in flight: a command that lasts milliseconds sees it wake never.
 * - Only one-shot commands arm it (cmd.h, CMD_EXITS_HUNG). top, watch, the exporter and
 *   health --watch run for hours and take readings over and over: a hung reading is theirs
 *   to show as stale (gpuctl_nvml_call_in_flight serves them too), not a reason to exit.
 *   run pauses it while its job runs: exiting then would orphan the job, and gpuctl is no
 *   longer a one-shot command but the job's parent.
 * - On timeout: one line on stderr with write(2) (nothing the blocked thread might hold, such
 *   as a stdio lock, is needed), then _exit: no atexit handlers, no stdout flush, so a half-built
 * answer is never printed; lease locks die with the process and the records of a dead holder never
 *   count (docs/leases.md); select and run take the snapshot before they lease, so no lease
 *   exists yet when NVML hangs. The holder of select --hold reports through its pipe first.
 * - The context is freed under a bound too (nvmlShutdown can hang like any call, after the
 *   output was printed): there the line is printed and the command's own status kept.
 * - One per process, in static storage: the thread belongs to the process that started it, so
 *   a fork() child (run's job before exec, health --probe's children) has none; a fork handler
 *   says so in the child, and every function looks before it touches the thread.
 * - The cost, measured with strace -f -c on `gpuctl list` (dgx-a100): about 21 system calls per
 *   command for starting, signalling and joining the thread (193 before); none per NVML call.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd.h"
#include "watchdog.h"

enum phase {
	PHASE_WATCH,   /* a call in flight past the bound ends the process */
	PHASE_PAUSED,  /* run's job runs: nothing ends the process */
	PHASE_CLOSING, /* the context is being freed: until closing_until */
	PHASE_STOP,    /* the thread is to return */
};

static struct {
	pthread_mutex_t lock;         /* guards everything below */
	pthread_cond_t wake;          /* signalled on every change of phase */
	pthread_t thread;             /* the watchdog, when running */
	bool running;                 /* thread runs in this process (not in a fork() child) */
	bool atfork;                  /* forked() registered */
	enum phase phase;             /* what the thread does */
	const struct gpuctl_ctx *ctx; /* whose calls it watches, NULL: none (detached) */
	double bound;                 /* GPUCTL_NVML_TIMEOUT, seconds */
	double closing_until;         /* PHASE_CLOSING: CLOCK_MONOTONIC deadline */
	int closing_status;           /* PHASE_CLOSING: the exit status to keep */
	int report_fd;                /* select --hold's status pipe, -1: none */
} wd = {.lock = PTHREAD_MUTEX_INITIALIZER, .report_fd = -1};

static double monotonic_now(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Whether this process runs the watchdog. */
static bool mine(void)
{
	return wd.running;
}

/* In a fork() child: the thread stayed with the parent, and its lock may have been held by it
 * at the fork, so the child never touches either. */
static void forked(void)
{
	wd.running = false;
}

/* Prints the line and ends the process with status (called with wd.lock held). */
__attribute__((noreturn)) static void give_up(const char *function, int gpu, const char *bus,
                                              int status)
{
	char line[512], where[96] = "";
	int n;

	if (gpu >= 0 && bus && bus[0])
		(void)snprintf(where, sizeof(where), " for GPU %d (%s)", gpu, bus);
	else if (gpu >= 0)
		(void)snprintf(where, sizeof(where), " for GPU %d", gpu);
	n = snprintf(line, sizeof(line),
	             "gpuctl: NVML did not answer %s%s within %g s (GPUCTL_NVML_TIMEOUT)\n",
	             function, where, wd.bound);
	if (n > 0)
		(void)!write(STDERR_FILENO, line,
		             (size_t)n < sizeof(line) ? (size_t)n : sizeof(line));
	if (wd.report_fd >= 0) {
		unsigned char st = (unsigned char)status;

		(void)!write(wd.report_fd, &st, 1);
	}
	_exit(status);
}

static void *watch(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&wd.lock);
	while (wd.phase != PHASE_STOP) {
		double now = monotonic_now(), until = now + wd.bound;
		struct gpuctl_nvml_call c = GPUCTL_NVML_CALL_INIT;

		if (wd.phase == PHASE_PAUSED) {
			pthread_cond_wait(&wd.wake, &wd.lock);
			continue;
		}
		if (wd.phase == PHASE_CLOSING) {
			if (now >= wd.closing_until)
				give_up("nvmlShutdown", -1, NULL, wd.closing_status);
			until = wd.closing_until;
		} else if (wd.ctx && gpuctl_nvml_call_in_flight(wd.ctx, &c) == 1) {
			if (c.seconds >= wd.bound)
				give_up(c.function, c.gpu, c.pci_bus_id, CLI_EXIT_HUNG);
			/* the record's clock is coarse: never wake more often than every ms */
			until = now + (wd.bound - c.seconds > 0.001 ? wd.bound - c.seconds : 0.001);
		}
		struct timespec ts = {.tv_sec = (time_t)until};
		ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
		if (ts.tv_nsec >= 1000000000L)
			ts.tv_nsec = 999999999L;
		(void)pthread_cond_timedwait(&wd.wake, &wd.lock, &ts);
	}
	pthread_mutex_unlock(&wd.lock);
	return NULL;
}

int cli_watchdog_start(const struct gpuctl_ctx *ctx, double seconds)
{
	pthread_condattr_t attr;
	sigset_t all, old;
	int r;

	if (!ctx || !(seconds > 0))
		return -EINVAL;
	if (mine()) {
		pthread_mutex_lock(&wd.lock);
		if (wd.phase != PHASE_CLOSING && wd.phase != PHASE_STOP)
			wd.ctx = ctx;
		pthread_mutex_unlock(&wd.lock);
		return 0;
	}
	if (pthread_condattr_init(&attr) != 0)
		return -ENOMEM;
	r = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	if (r == 0)
		r = pthread_cond_init(&wd.wake, &attr);
	(void)pthread_condattr_destroy(&attr);
	if (r != 0)
		return -r;
	if (!wd.atfork && pthread_atfork(NULL, NULL, forked) != 0) {
		(void)pthread_cond_destroy(&wd.wake);
		return -ENOMEM;
	}
	wd.atfork = true;
	wd.ctx = ctx;
	wd.bound = seconds;
	wd.phase = PHASE_WATCH;
	/* the thread starts with every signal blocked: they are the main thread's */
	sigfillset(&all);
	(void)pthread_sigmask(SIG_SETMASK, &all, &old);
	r = pthread_create(&wd.thread, NULL, watch, NULL);
	(void)pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0) {
		(void)pthread_cond_destroy(&wd.wake);
		return -r;
	}
	wd.running = true;
	return 0;
}

static void set_phase(enum phase phase)
{
	if (!mine())
		return;
	pthread_mutex_lock(&wd.lock);
	/* CLOSING and STOP are final: the context may be gone */
	if (wd.phase != PHASE_CLOSING && wd.phase != PHASE_STOP)
		wd.phase = phase;
	pthread_cond_signal(&wd.wake);
	pthread_mutex_unlock(&wd.lock);
}

void cli_watchdog_detach(void)
{
	if (!mine())
		return;
	pthread_mutex_lock(&wd.lock);
	wd.ctx = NULL;
	pthread_mutex_unlock(&wd.lock);
}

void cli_watchdog_pause(void)
{
	set_phase(PHASE_PAUSED);
}

void cli_watchdog_resume(void)
{
	set_phase(PHASE_WATCH);
}

void cli_watchdog_report_fd(int fd)
{
	/* also before the thread starts (the holder's context is made later, in its choose):
	 * without a thread there is nobody to race with, and the lock may be a fork()ed copy */
	if (!mine()) {
		wd.report_fd = fd;
		return;
	}
	pthread_mutex_lock(&wd.lock);
	wd.report_fd = fd;
	pthread_mutex_unlock(&wd.lock);
}

void cli_watchdog_closing(int status)
{
	if (!mine())
		return;
	pthread_mutex_lock(&wd.lock);
	if (wd.phase != PHASE_STOP) {
		wd.phase = PHASE_CLOSING;
		wd.closing_until = monotonic_now() + wd.bound;
		wd.closing_status = status;
		wd.ctx = NULL;
	}
	pthread_cond_signal(&wd.wake);
	pthread_mutex_unlock(&wd.lock);
}

void cli_watchdog_stop(void)
{
	if (!mine())
		return;
	pthread_mutex_lock(&wd.lock);
	wd.phase = PHASE_STOP;
	wd.ctx = NULL;
	pthread_cond_signal(&wd.wake);
	pthread_mutex_unlock(&wd.lock);
	(void)pthread_join(wd.thread, NULL);
	(void)pthread_cond_destroy(&wd.wake);
	wd.running = false;
}
