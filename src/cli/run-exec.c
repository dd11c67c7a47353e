// SPDX-License-Identifier: MIT
/*
 * run-exec.c: `gpuctl run`'s children: fork, binding and exec (the plan of run-plan.c), signal
 * forwarding, waiting for them, and stopping the other ranks of --each or the whole job of a
 * --retry failover (whose GPUs run-retry.c checks meanwhile).
 *
 * Decisions (docs/gpuctl.1, "run", says the same for users):
 * - fork, not posix_spawn (child.c's, for helper programs): binding and the lease descriptors
 *   are set up between fork and exec, and the child must stay in gpuctl's process group.
 *   Everything it needs is computed before fork, so the child only makes system calls.
 * - Signals. The child stays in gpuctl's process group, so it keeps the terminal (an
 *   interactive job, Ctrl-C and Ctrl-Z work as without gpuctl). SIGINT, SIGTERM, SIGHUP,
 *   SIGQUIT, SIGUSR1 and SIGUSR2 sent to gpuctl are forwarded to the child (to every child with
 *   --each), except one the terminal generated (the child got it already, being in the
 *   foreground group) and one the child itself sent. gpuctl itself waits on. A signal that
 *   gpuctl was started ignoring (nohup's SIGHUP; SIGINT and SIGQUIT in a shell's background
 *   job) stays ignored, by gpuctl and by the child, which inherits SIG_IGN through exec as it
 *   would without gpuctl. With --retry each child leads a process group of its own, and
 *   signals go to those groups.
 * - Exit status: the child's, or 128+N when signal N killed it; 127 when the command is not
 *   found, 126 when it cannot be executed (exec errors come back through a close-on-exec pipe,
 *   so the message is gpuctl's one line). gpuctl's own failures (2, 3, 4, 1) happen before any
 *   command starts.
 * - --each (torchrun's policy): one child per device; when one fails (non-zero exit or killed),
 *   the others get SIGTERM, then SIGKILL after RUN_KILL_TIMEOUT_S seconds; the status is that
 *   of the first failure in time, else 0.
 * - The lease (docs/leases.md): the lock descriptors are inherited by the children (FD_CLOEXEC
 *   cleared between fork and exec). The owner record names gpuctl and the first child
 *   (gpuctl_lease_set_owner once it is forked, before it execs: the child waits on a pipe for
 *   the record, since `gpuctl release` takes a record without a job for a hold; when it cannot
 *   be written the child exits without exec and run exits 1, one line).
 */
#include <errno.h>
#include <fcntl.h>
#include <numaif.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run.h"
#include "watchdog.h"

static const int forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define N_FORWARDED (sizeof(forwarded_signals) / sizeof(forwarded_signals[0]))

/* The children's pids for the signal handler; 0 for one that is gone. Written only while the
 * forwarded signals are blocked. */
static pid_t *volatile fwd_pids;
static volatile size_t fwd_count;
/* run --retry: each child leads a process group of its own (so a failover can stop the whole
 * job), and signals go to those groups, from the terminal too (it only reaches ours). */
static volatile bool fwd_groups;
/* The forwarded signals gpuctl was started with set to SIG_IGN (nohup's SIGHUP, SIGINT and
 * SIGQUIT of a shell's background job): gpuctl goes on ignoring them and the child inherits
 * the SIG_IGN through exec, as it would without gpuctl. Set before fork. */
static bool fwd_ignored[N_FORWARDED];

static void forward_signal(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	int saved = errno;
	/* From the terminal: the children are in our (foreground) process group and got it. */
	if (si && si->si_code == SI_KERNEL && !fwd_groups) {
		errno = saved;
		return;
	}
	for (size_t i = 0; i < fwd_count; i++) {
		pid_t p = fwd_pids[i];
		if (p > 0 && !(si && si->si_pid == p))
			(void)kill(fwd_groups ? -p : p, sig);
	}
	errno = saved;
}

static void block_forwarded(sigset_t *ret_old)
{
	sigset_t set;
	sigemptyset(&set);
	for (size_t i = 0; i < N_FORWARDED; i++)
		sigaddset(&set, forwarded_signals[i]);
	sigprocmask(SIG_BLOCK, &set, ret_old);
}

/* In the child: only system calls from here on (async-signal-safe after fork). */
__attribute__((noreturn)) static void child_exec(const struct run_child *c, char **cmd,
                                                 const sigset_t *mask, int errfd, int gofd,
                                                 int replyfd)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	if (fwd_groups)
		(void)setpgid(0, 0);
	sigemptyset(&dfl.sa_mask);
	for (size_t i = 0; i < N_FORWARDED; i++)
		if (!fwd_ignored[i])
			sigaction(forwarded_signals[i], &dfl, NULL);
	sigprocmask(SIG_SETMASK, mask, NULL);
	for (size_t i = 0; i < c->nlease_fds; i++) {
		int fl = fcntl(c->lease_fds[i], F_GETFD);
		if (fl >= 0)
			(void)fcntl(c->lease_fds[i], F_SETFD, fl & ~FD_CLOEXEC);
	}
	if (c->cpus)
		(void)sched_setaffinity(0, CPU_ALLOC_SIZE(RUN_NCPUS), c->cpus);
	if (c->nodes && set_mempolicy(c->mpol, c->nodes, c->maxnode + 1) < 0 &&
	    c->mpol == MPOL_PREFERRED_MANY) {
		/* A kernel before 5.15 has no PREFERRED_MANY: prefer the first node. */
		unsigned long one[1024 / (8 * sizeof(unsigned long))] = {0};
		unsigned long bits = 8 * sizeof(unsigned long);
		if ((unsigned long)c->first_node < 1024) {
			one[(unsigned long)c->first_node / bits] |=
			        1UL << ((unsigned long)c->first_node % bits);
			(void)set_mempolicy(MPOL_PREFERRED, one, 1024 + 1);
		}
	}
	if (gofd >= 0) { /* the lease's record names this job before it runs */
		char go = 0;
		ssize_t k;
		do
			k = read(gofd, &go, 1);
		while (k < 0 && errno == EINTR);
		if (k != 1)
			_exit(CLI_EXIT_FAILURE); /* gpuctl could not write it, or is gone */
	}
	if (replyfd >= 0) { /* enforce = cgroup: confined by the agent, or no exec */
		char go = 0;
		ssize_t k;
		run_confine_child(c->confine, replyfd);
		close(replyfd);
		do
			k = read(gofd, &go, 1);
		while (k < 0 && errno == EINTR);
		if (k != 1)
			_exit(CLI_EXIT_FAILURE); /* gpuctl said why */
	}
	execvpe(cmd[0], cmd, c->envp);
	int e = errno;
	ssize_t w;
	do
		w = write(errfd, &e, sizeof(e));
	while (w < 0 && errno == EINTR);
	_exit(e == ENOENT || e == ENOTDIR ? 127 : 126);
}

/* Closes the ends of the pipes of one child that are still open here (-1 once closed). */
static void close_pipes(int *p, int *go, int *rp)
{
	int *ends[] = {&p[0], &p[1], &go[0], &go[1], &rp[0], &rp[1]};

	for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++)
		if (*ends[i] >= 0) {
			close(*ends[i]);
			*ends[i] = -1;
		}
}

/* One byte on a child's go pipe: go on to the next step. */
static void go_on(int fd)
{
	ssize_t w;

	do
		w = write(fd, "", 1);
	while (w < 0 && errno == EINTR);
}

static int wait_status(int wstatus)
{
	if (WIFEXITED(wstatus))
		return WEXITSTATUS(wstatus);
	if (WIFSIGNALED(wstatus))
		return 128 + WTERMSIG(wstatus);
	return CLI_EXIT_FAILURE;
}

static void signal_children(struct run_child *kids, size_t n, int sig)
{
	for (size_t i = 0; i < n; i++) {
		if (kids[i].pgid > 0)
			(void)kill(-kids[i].pgid,
			           sig); /* the whole job, its leader reaped or not */
		else if (kids[i].pid > 0)
			(void)kill(kids[i].pid, sig);
	}
}

/* Whether a process of the children's own groups is still there. */
static bool groups_alive(const struct run_child *kids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (kids[i].pgid > 0 && kill(-kids[i].pgid, 0) == 0)
			return true;
	return false;
}

/* Reaps the children; with several, the first failure stops the rest. With m (run --retry),
 * checks the job's GPUs every RUN_HEALTH_TICK_MS meanwhile and stops the job (SIGTERM to its
 * process groups, SIGKILL grace_s later) when one fails. Returns the status. */
static int wait_children(struct cli *cli, struct run_child *kids, size_t n, size_t alive,
                         struct run_monitor *m, unsigned grace_s)
{
	int first_failure = -1;
	bool stopping = false, killed = false;
	double deadline = 0, next_check = cli_now(CLOCK_MONOTONIC);

	while (alive > 0) {
		siginfo_t si = {0};
		int opts = WEXITED | WNOWAIT | (stopping || m ? WNOHANG : 0);
		if (waitid(P_ALL, 0, &si, opts) < 0) {
			if (errno == EINTR)
				continue;
			break; /* ECHILD: nothing left to wait for */
		}
		if (si.si_pid == 0) { /* none exited yet */
			if (stopping && !killed && cli_now(CLOCK_MONOTONIC) > deadline) {
				signal_children(kids, n, SIGKILL);
				killed = true;
			}
			if (m && !stopping && cli_now(CLOCK_MONOTONIC) >= next_check) {
				next_check = cli_now(CLOCK_MONOTONIC) + RUN_HEALTH_TICK_MS / 1000.0;
				run_monitor_check(cli, m);
				if (m->failed >= 0) {
					cli_error("run: GPU %zu (%s) failed: %s; stopping the job "
					          "(SIGTERM, SIGKILL after %u s)",
					          m->gpus[m->failed], m->uuids[m->failed], m->why,
					          grace_s);
					stopping = true;
					deadline = cli_now(CLOCK_MONOTONIC) + grace_s;
					signal_children(kids, n, SIGTERM);
				}
			}
			struct timespec ts = {0, 20 * 1000 * 1000};
			nanosleep(&ts, NULL);
			continue;
		}
		/* Reap with the handler held off, so it never signals a reused pid. */
		sigset_t old;
		int wstatus = 0;
		block_forwarded(&old);
		size_t k = n;
		for (size_t i = 0; i < n; i++)
			if (kids[i].pid == si.si_pid)
				k = i;
		if (k < n)
			kids[k].pid = 0;
		if (k < n && fwd_pids)
			fwd_pids[k] = 0;
		while (waitpid(si.si_pid, &wstatus, 0) < 0 && errno == EINTR)
			;
		sigprocmask(SIG_SETMASK, &old, NULL);
		if (k == n)
			continue; /* not ours */
		alive--;
		kids[k].status = wait_status(wstatus);
		if (cli->verbose && n > 1)
			cli_error("run: rank %zu exited with status %d", k, kids[k].status);
		if (kids[k].status != 0 && first_failure < 0) {
			first_failure = kids[k].status;
			if (alive > 0 && !stopping) {
				if (cli->verbose)
					cli_error("run: rank %zu failed: stopping the other %zu "
					          "(SIGTERM, SIGKILL after %d s)",
					          k, alive, RUN_KILL_TIMEOUT_S);
				stopping = true;
				deadline = cli_now(CLOCK_MONOTONIC) + RUN_KILL_TIMEOUT_S;
				signal_children(kids, n, SIGTERM);
			}
		}
	}
	/* A failover stops the whole job: what the leaders left in their groups (and which may hold
	 * the lease descriptors) gets the rest of the grace, then SIGKILL. */
	while (m && m->failed >= 0 && groups_alive(kids, n)) {
		if (cli_now(CLOCK_MONOTONIC) > deadline) {
			signal_children(kids, n, SIGKILL);
			break;
		}
		struct timespec ts = {0, 20 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	for (size_t i = 0; i < n; i++)
		kids[i].pgid = 0;
	return first_failure < 0 ? 0 : first_failure;
}

/* In gpuctl, after fork: the child's owner record (lease: the first child of a lease), its
 * confinement (enforce = cgroup), then its exec. The record names gpuctl and its (first) job, for
 * ps, release and foreign-process checks; without it release would take the run for a hold, so
 * the job does not start; nor does it unconfined. 0 once the child runs the command, else the
 * status (one line said; the child exits without exec, or on its own for 127/126). Closes every
 * pipe end left (-1 once closed). */
static int release_child(struct cli *cli, const struct run_child *kid, struct gpuctl_lease *lease,
                         pid_t pid, char **cmd, int *p, int *go, int *rp)
{
	int status = 0, e = 0;
	ssize_t got;

	if (lease &&
	    gpuctl_lease_set_owner(cli->ctx, lease, (uint32_t)getpid(), (uint32_t)pid) < 0) {
		cli_error("run: %s", gpuctl_errmsg(cli->ctx));
		status = CLI_EXIT_FAILURE;
	}
	if (!status && go[1] >= 0)
		go_on(go[1]);
	/* enforce = cgroup: the child asks the agent; it execs only once it is confined */
	if (!status && kid->confine && (status = run_confine_check(cli, rp[0], kid->confine)) == 0)
		go_on(go[1]);
	if (status) {
		close_pipes(p, go, rp);
		return status;
	}
	if (go[1] >= 0)
		close(go[1]);
	if (rp[0] >= 0)
		close(rp[0]);
	go[1] = rp[0] = -1;
	do
		got = read(p[0], &e, sizeof(e));
	while (got < 0 && errno == EINTR);
	close_pipes(p, go, rp);
	if (got != (ssize_t)sizeof(e))
		return 0;
	/* exec failed: the child exits 127/126 on its own; say why once. */
	if (e == ENOENT || e == ENOTDIR) {
		cli_error("run: '%s': command not found", cmd[0]);
		return 127;
	}
	cli_error("run: '%s': cannot execute: %s", cmd[0], strerror(e));
	return 126;
}

int run_start_children(struct cli *cli, struct run_child *kids, size_t n, char **cmd,
                       struct gpuctl_lease *lease, struct run_monitor *m, unsigned grace_s)
{
	struct sigaction sa = {.sa_sigaction = forward_signal, .sa_flags = SA_SIGINFO | SA_RESTART};
	sigset_t old;
	size_t started = 0;
	int status = 0;

	pid_t *pids = calloc(n, sizeof(*pids));
	if (!pids) {
		cli_error("run: out of memory");
		return CLI_EXIT_FAILURE;
	}
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < N_FORWARDED; i++)
		sigaddset(&sa.sa_mask, forwarded_signals[i]);
	block_forwarded(&old);
	fwd_pids = pids;
	fwd_count = n;
	fwd_groups = m != NULL;
	for (size_t i = 0; i < N_FORWARDED; i++) {
		struct sigaction cur;
		/* ours from an earlier launch (--retry) is never SIG_IGN */
		fwd_ignored[i] = sigaction(forwarded_signals[i], NULL, &cur) == 0 &&
		                 !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_IGN;
		if (!fwd_ignored[i])
			sigaction(forwarded_signals[i], &sa, NULL);
	}
	fflush(NULL);

	for (size_t i = 0; i < n; i++) {
		int p[2] = {-1, -1}, go[2] = {-1, -1}, rp[2] = {-1, -1};
		bool record = lease && i == 0; /* the first child waits for its record */
		bool confine = kids[i].confine != NULL;
		bool gate = record || confine;
		if (pipe2(p, O_CLOEXEC) < 0 || (gate && pipe2(go, O_CLOEXEC) < 0) ||
		    (confine && pipe2(rp, O_CLOEXEC) < 0)) {
			cli_error("run: pipe: %s", strerror(errno));
			close_pipes(p, go, rp);
			status = CLI_EXIT_FAILURE;
			break;
		}
		pid_t pid = fork();
		if (pid < 0) {
			cli_error("run: fork: %s", strerror(errno));
			close_pipes(p, go, rp);
			status = CLI_EXIT_FAILURE;
			break;
		}
		if (pid == 0) {
			close(p[0]);
			if (gate)
				close(go[1]);
			if (confine)
				close(rp[0]);
			child_exec(&kids[i], cmd, &old, p[1], go[0], rp[1]);
		}
		close(p[1]);
		p[1] = -1;
		if (gate)
			close(go[0]);
		if (confine)
			close(rp[1]);
		go[0] = rp[1] = -1;
		if (m) {
			(void)setpgid(pid, pid); /* as the child does: whichever runs first */
			kids[i].pgid = pid;
		}
		kids[i].pid = pid;
		pids[i] = pid;
		started++;
		if ((status = release_child(cli, &kids[i], record ? lease : NULL, pid, cmd, p, go,
		                            rp)) != 0)
			break;
	}
	if (status)
		signal_children(kids, n, SIGTERM); /* the ones started before a failure */
	sigprocmask(SIG_SETMASK, &old, NULL);
	/* The job may run for days: let go of NVML now (nvmlShutdown, dlclose) instead of keeping
	 * the driver's device files open in a process that only waits. Nothing below needs the
	 * context; the lease holds no reference to it. With --retry the job's GPUs are watched:
	 * the context stays. */
	if (!m) {
		cli_watchdog_detach();
		gpuctl_ctx_free(cli->ctx);
		cli->ctx = NULL;
	}
	int st = wait_children(cli, kids, n, started, status ? NULL : m, grace_s);
	if (!status)
		status = st;

	block_forwarded(&old);
	fwd_count = 0;
	fwd_pids = NULL;
	fwd_groups = false;
	sigprocmask(SIG_SETMASK, &old, NULL);
	free(pids);
	return status;
}
