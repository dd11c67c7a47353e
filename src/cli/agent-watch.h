/* SPDX-License-Identifier: MIT */
/*
 * agent-watch.h: the node agent's watch (docs/agent.md, "Violations"; issue 28): on the GPUs of
 * every pool whose `enforce` is not off, each sample is searched for violations of the leases
 * (a process no lease of its user covers, a shared lease over its declaration, a job's process
 * outside its lease); each new one is logged once, counted, recorded in the ledger, acted on as
 * the pool's violation_action says (agent-watch-act.c), and handed to a callback (the hooks).
 */
#ifndef GPUCTL_CLI_AGENT_WATCH_H
#define GPUCTL_CLI_AGENT_WATCH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "exporter.h"

enum agent_violation_kind {
	AGENT_VIOLATION_FOREIGN, /* a process on a GPU that no lease of its user covers */
	AGENT_VIOLATION_OVERUSE, /* a shared lease using more memory than declared plus margin */
	AGENT_VIOLATION_OUTSIDE, /* a process of a job on a GPU outside its job's lease */
	AGENT_VIOLATION_KINDS,
};
/* "foreign", "overuse", "outside"; NULL out of range. */
const char *agent_violation_kind_name(enum agent_violation_kind kind);

/* One violation as the watch found it (valid during the callback only). */
struct agent_violation {
	enum agent_violation_kind kind;
	double time;          /* wall clock of the sample that found it (Unix seconds) */
	uint32_t uid;         /* the offending process's real uid */
	const char *user;     /* its name, NULL: none in the user database */
	uint32_t pid;         /* the offending process */
	uint64_t start_ticks; /* its start time after boot, clock ticks */
	const char *comm;     /* its name (/proc/PID/stat), as it is */
	size_t gpu;           /* the GPU's index */
	const char *gpu_uuid; /* the GPU's UUID */
	const char *pool;     /* the GPU's pool ("default" for the default pool) */
	const char *enforce;  /* the pool's enforce ("watch", "acl", "cgroup") */
	uint32_t holder_pid;  /* overuse, outside: the lease's holder (0: none) */
	int64_t mem_used;     /* overuse: bytes its processes use on the GPU; else -1 */
	int64_t mem_allowed;  /* overuse: what it declared plus the margin; else -1 */
	const char *detail;   /* what is wrong, in words (the log line's) */
	const char *action;   /* what was done (the ledger's action) */
};

/* The violation as a JSON object (docs/agent.md, "Violations"); NULL when out of memory. */
json_t *agent_violation_json(const struct agent_violation *v);

typedef void (*agent_violation_fn)(void *userdata, const struct agent_violation *v);

struct agent_watch;
/* -ENOMEM or 0. */
int agent_watch_new(struct agent_watch **ret);
void agent_watch_free(struct agent_watch *w);
/* on_violation(userdata, v) for each NEW violation, after it was acted on, logged and recorded
 * (NULL: none). */
void agent_watch_on_violation(struct agent_watch *w, agent_violation_fn on_violation,
                              void *userdata);
/* Searches sample v; ledger NULL: the violations are not recorded (it cannot be written now).
 * Also goes on with the terminations under way (SIGKILL after the grace). */
void agent_watch_sample(struct agent_watch *w, const struct exporter_view *v,
                        struct gpuctl_ledger *ledger);
/* The violations found since the agent started, per kind (AGENT_VIOLATION_KINDS entries; for
 * the exporter's page: gpuctl_violations_total). Lives as long as w. */
const uint64_t *agent_watch_counts(const struct agent_watch *w);

/* ---- the actions (agent-watch-act.c) ---- */

/* A termination under way: SIGTERM sent, SIGKILL due at deadline when still alive. */
struct watch_kill {
	int pidfd;         /* pins the process; -1: none (no pidfd_open: by pid and start time) */
	uint32_t pid, uid; /* the process */
	uint64_t ticks;    /* its start time after boot, clock ticks */
	double deadline;   /* monotonic seconds */
	uint64_t grace_s;  /* terminate_grace */
	int64_t row;       /* its ledger row, -1: none */
	char what[160];    /* "foreign: pid 123 (user alice) on GPU 3" for the log line */
};

/* Writes line to every terminal of user uid that utmp lists (utmpx(5); the file is
 * $GPUCTL_UTMP when set, for tests, else the system's) and that uid owns: the number written
 * to (0: none). */
int watch_notify(uint32_t uid, const char *line);

/* SIGTERM to process pid once it is checked to be uid's, started at ticks (through a pidfd
 * when the kernel has one, checked after it pins the process). 0 (*k filled, its pidfd open),
 * or -errno: -ESRCH it is gone or another. */
int watch_terminate(uint32_t pid, uint64_t ticks, uint32_t uid, struct watch_kill *k);

/* Whether k's process has ended; false when it cannot tell. */
bool watch_kill_ended(const struct watch_kill *k);

/* SIGKILL to k's process (if it is still the one). 0, or -errno. Closes nothing. */
int watch_kill_now(const struct watch_kill *k);

#endif /* GPUCTL_CLI_AGENT_WATCH_H */
