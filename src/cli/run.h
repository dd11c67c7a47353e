/* SPDX-License-Identifier: MIT */
/*
 * run.h: what the files of `gpuctl run` share (private to them): the options, the plan of one
 * child, what --retry's monitor found, and the calls between the files.
 *
 *   cmd-run.c    the command: options, checks, one launch (select and lease, plan, start),
 *                the relaunch loop
 *   run-plan.c   the plan of each child, computed before fork: environment, CPU and memory
 *                binding; how --dry-run prints it
 *   run-exec.c   fork and exec, signal forwarding, waiting, stopping the ranks or the job
 *   run-retry.c  --retry: watching the job's GPUs, and whether and when to relaunch
 *
 * The decisions are in each file's top comment; docs/gpuctl.1, "run", says them for users.
 */
#ifndef GPUCTL_CLI_RUN_H
#define GPUCTL_CLI_RUN_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "filters.h"
#include "parse.h"

/* Seconds the other children of --each get between SIGTERM and SIGKILL (torchrun's 30). */
#define RUN_KILL_TIMEOUT_S 30
/* CPUs a cpulist may name (parse.h's guard) and the size of our CPU bit arrays. */
#define RUN_NCPUS     (PARSE_CPULIST_MAX_CPU + 1)
#define RUN_CPU_WORDS (RUN_NCPUS / 64)
/* Environment variables gpuctl sets in a child, at most (CUDA_VISIBLE_DEVICES,
 * CUDA_DEVICE_ORDER, GPUCTL_GPUS, NVIDIA_VISIBLE_DEVICES, 4 rank variables, GPUCTL_LEASE_FDS,
 * GPUCTL_LEASE_DIR, GPUCTL_SHARE_MEM, GPUCTL_RESTART_COUNT: 12, and room). */
#define RUN_MAX_ENV 16
/* --retry: the most failovers, how often the job's GPUs are checked while it runs, the default
 * grace between SIGTERM and SIGKILL, and the backoff before a relaunch (doubling, capped). */
#define RUN_RETRY_MAX       100
#define RUN_HEALTH_TICK_MS  200
#define RUN_GRACE_DEFAULT_S 10
#define RUN_BACKOFF_FIRST_S 0.5
#define RUN_BACKOFF_MAX_S   30.0
/* Exit status of run --retry when a GPU failed once more and no failover was left. */
#define RUN_EXIT_GAVE_UP 5
/* Exit status of run when enforce = cgroup and the agent did not confine the job (docs/gpuctl.1
 * EXIT STATUS): nothing ran. */
#define RUN_EXIT_CONFINE 11
/* enforce = cgroup: the agent's socket when the configuration names none (agent-socket.h's
 * AGENT_SOCKET_DEFAULT), how long a child waits for its answer, the most of it read. */
#define RUN_AGENT_SOCKET_DEFAULT "/run/gpuctl/agent.sock"
#define RUN_CONFINE_TIMEOUT_S    10
#define RUN_CONFINE_REPLY_MAX    4096

struct env_change {
	const char *name; /* static */
	char *value;      /* owned */
};

/* Everything one child needs, computed before fork. */
struct run_child {
	struct env_change env[RUN_MAX_ENV]; /* what gpuctl sets, in print order */
	size_t nenv;                        /* used entries of env */
	char **envp;                        /* the child's whole environment (strings owned) */
	size_t nenvp;                       /* entries of envp, without the NULL */
	cpu_set_t *cpus;                    /* CPU binding, NULL for none */
	char cpus_text[512];                /* the bound CPUs as a cpulist, or why none */
	unsigned long *nodes;               /* memory policy nodes, NULL for none */
	unsigned long maxnode;              /* bits in nodes, for set_mempolicy */
	int first_node;                     /* fallback of MPOL_PREFERRED_MANY */
	int mpol;                           /* MPOL_PREFERRED or MPOL_PREFERRED_MANY */
	char mem_text[160];                 /* "preferred node(s) 0,1", or why none */
	const int *lease_fds;               /* descriptors to inherit (borrowed) */
	size_t nlease_fds;                  /* entries of lease_fds */
	const char *confine;                /* enforce = cgroup: the agent's socket to ask before
	                                     * exec (borrowed), NULL: none */
	pid_t pid;                          /* after fork; 0 once reaped */
	pid_t pgid;                         /* run --retry: its own process group, 0: none */
	int status;                         /* exit status once reaped */
};

struct run_args {
	struct select_args sel;
	bool each;                  /* --each */
	bool dry_run;               /* --dry-run */
	bool no_bind;               /* --no-bind */
	char **cmd;                 /* the command and its arguments */
	const char *lease_fds_text; /* GPUCTL_LEASE_FDS for the children, NULL without a lease */
	const char *lease_dir;      /* GPUCTL_LEASE_DIR for the children */
	unsigned retry;             /* --retry N: failovers at most (0: none, no monitoring) */
	unsigned grace_s;           /* --grace: seconds between SIGTERM and SIGKILL on failover */
	bool retry_any;             /* --retry-on any: also relaunch a job that failed by itself */
	unsigned attempt;           /* GPUCTL_RESTART_COUNT of this launch */
	const char *master_addr;    /* --each: MASTER_ADDR for the ranks, NULL: inherited */
	char master_port[8];        /* --each: MASTER_PORT for the ranks, "": inherited or none */
};

/* What watching a job's GPUs found (run --retry). */
struct run_monitor {
	size_t *gpus;   /* the job's GPUs, snapshot indices (a MIG device: its GPU) */
	char **uuids;   /* their UUIDs, to check that an index still names the same GPU */
	size_t n;       /* entries of both */
	ssize_t failed; /* index into gpus of the GPU found failed, -1: none */
	struct gpuctl_xid_watch *watch; /* NVML XID events since the launch, NULL: none */
	struct gpuctl_xid_log *xids;    /* the XIDs they delivered */
	char why[160];                  /* what failed, for the message */
	double failed_at;               /* monotonic seconds when the failure was seen */
};

/* run-plan.c */

/* The CPUs this process may run on, as a bit array of RUN_NCPUS bits. */
int run_allowed_cpus(uint64_t *bits);
/* A TCP port free on 127.0.0.1 now, as text; -errno. */
int run_free_local_port(char *buf, size_t len);
/* Fills child c for devices [from, to) of the selection (rank >= 0 with --each). */
int run_plan_child(struct run_child *c, const struct run_args *a,
                   const struct gpuctl_snapshot *snap, const struct gpuctl_devset *set, size_t from,
                   size_t to, long rank, size_t world, const uint64_t *allowed);
void run_child_free(struct run_child *c);
/* --dry-run: the environment changes, the binding and the shell-quoted command. */
void run_print_plan(const struct run_child *c, char **cmd, FILE *f);
/* The job's command line for the owner record: the words joined by spaces. */
int run_join_command(char **cmd, char **ret);
/* "3,4": the lease descriptors for GPUCTL_LEASE_FDS. */
int run_fds_list(const int *fds, size_t n, char **ret);

/* run-exec.c */

/* Starts the children (the first waits for lease's owner record), forwards signals to them,
 * waits for them (watching the job's GPUs with m: run --retry). Returns the exit status. */
int run_start_children(struct cli *cli, struct run_child *kids, size_t n, char **cmd,
                       struct gpuctl_lease *lease, struct run_monitor *m, unsigned grace_s);

/* run-confine.c (enforce = cgroup) */

/* Whether a device of set is in a pool with enforce = cgroup by the configuration that governs
 * lease_dir: *ret_socket the agent's socket to ask (the configuration's agent_socket, else
 * RUN_AGENT_SOCKET_DEFAULT), NULL when none is. 0, or the exit status (one line said). */
int run_confine_plan(struct cli *cli, const struct gpuctl_snapshot *snap,
                     const struct gpuctl_devset *set, const char *lease_dir,
                     const char **ret_socket);
/* In the child, between fork and exec (system calls only): asks the agent at socket_path to
 * confine this process and writes its answer (or why it could not ask) to replyfd. */
void run_confine_child(const char *socket_path, int replyfd);
/* In gpuctl: reads what run_confine_child wrote to fd: 0 when the agent confined the child, else
 * the one line said and RUN_EXIT_CONFINE. */
int run_confine_check(struct cli *cli, int fd, const char *socket_path);

/* run-retry.c */

int run_monitor_init(struct cli *cli, struct run_monitor *m, const struct gpuctl_snapshot *snap,
                     const struct gpuctl_devset *set);
/* One look at the job's GPUs; sets m->failed at the first FAIL. */
void run_monitor_check(struct cli *cli, struct run_monitor *m);
void run_monitor_free(struct run_monitor *m);
/* After a launch that ended with *status: whether to relaunch (saying why not, and setting
 * *status, when no failover is left or the failed GPU cannot be avoided). */
bool run_retry_wanted(struct cli *cli, struct run_args *a, struct run_monitor *m, bool ran,
                      int *status);
/* Says that the job is relaunched and waits the backoff of attempt a->attempt. */
void run_retry_backoff(const struct run_args *a);

#endif
