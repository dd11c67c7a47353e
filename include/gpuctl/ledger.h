/* SPDX-License-Identifier: MIT */
/*
 * ledger.h: the usage ledger (docs/ledger.md): an SQLite database in which one writer (the node
 * agent) records what it OBSERVED on each sample (a lease held on a GPU, a workload seen on a
 * GPU without a lease), never what a user's process claims; and the report read from it.
 *
 * One record per lease and per workload seen without a lease; a record spans the GPUs it was
 * seen on. Each sample's values hold until the next sample: the interval between two samples
 * is integrated with the earlier sample's values (GPU-seconds, busy seconds, utilisation,
 * energy). Durations come from the caller's monotonic clock, stamps from its wall clock, so a
 * wall clock stepped back (NTP) never makes a negative duration.
 */
#ifndef GPUCTL_LEDGER_H
#define GPUCTL_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "context.h"
#include "decls.h"

GPUCTL_BEGIN_DECLS

/* The default path of the ledger (docs/ledger.md; configuration key `ledger`). */
#define GPUCTL_LEDGER_PATH "/var/lib/gpuctl/ledger.db"

/* What holds a GPU. */
enum gpuctl_ledger_kind {
	GPUCTL_LEDGER_LEASE = 1,    /* a lease lock held (key: holder PID and start time) */
	GPUCTL_LEDGER_WORKLOAD = 2, /* a workload seen on a GPU without a lease (key: its kind and
	                             * identity, e.g. "slurm:1234.0", "pod:UID/container") */
};

/* How a record ended (docs/ledger.md, "Endings"); stored as its name. */
enum gpuctl_ledger_end {
	GPUCTL_LEDGER_END_NONE = 0, /* still held: in an observation, "not ended" */
	GPUCTL_LEDGER_END_GONE,     /* no longer observed, no reason known */
	GPUCTL_LEDGER_END_EXIT,     /* its process exited */
	GPUCTL_LEDGER_END_RELEASE,  /* the lease was released */
	GPUCTL_LEDGER_END_EVICTED,  /* the lease was taken away (release --force, idle release) */
	GPUCTL_LEDGER_END_FAILOVER, /* moved off a GPU whose health failed */
	GPUCTL_LEDGER_END_RESTART,  /* the writer stopped (found open at the next open) */
	GPUCTL_LEDGER_END_MAX_,
};
/* "gone", "exit", "release", "evicted", "health-failover", "agent-restart"; NULL for NONE or
 * out of range. */
const char *gpuctl_ledger_end_name(int end);

/* The ledger opened by one writer or any number of readers. */
struct gpuctl_ledger;

/* Options of gpuctl_ledger_open. Initialise with GPUCTL_LEDGER_OPTIONS_INIT (the library reads
 * only the first struct_size bytes). */
struct gpuctl_ledger_options {
	size_t struct_size;    /* sizeof(struct gpuctl_ledger_options) */
	bool writer;           /* open read-write, creating the file; else read-only */
	double busy_threshold; /* utilisation (%) above which a GPU-second is busy (default 10) */
	double retention_s;    /* records ended before now - retention_s are deleted by the writer
	                        * (default 400 days); <= 0: keep everything */
	double now;            /* wall clock for retention at open (Unix seconds); 0: time() */
};
#define GPUCTL_LEDGER_OPTIONS_INIT                                                                 \
	{                                                                                          \
		.struct_size = sizeof(struct gpuctl_ledger_options), .busy_threshold = 10.0,       \
		.retention_s = 400.0 * 86400.0                                                     \
	}

/* Opens the ledger at path. A writer creates the file (its directory must exist), sets WAL and
 * synchronous=NORMAL, deletes what retention says and closes every record left open by an
 * earlier writer as "agent-restart" at the time it was last observed. A reader opens it
 * read-only and may run while the writer writes. -ENOENT: no file (a reader); -EPROTO: written
 * by a newer gpuctl (schema version above ours); -EBADMSG: not a ledger or corrupt; -EIO: SQLite
 * failed (the message says how). */
int gpuctl_ledger_open(struct gpuctl_ctx *ctx, const char *path,
                       const struct gpuctl_ledger_options *opts, struct gpuctl_ledger **ret_ledger);
void gpuctl_ledger_free(struct gpuctl_ledger *ledger);

/* One holder on one GPU at one sample. Initialise each with GPUCTL_LEDGER_OBSERVATION_INIT: the
 * library steps through an array by its first entry's struct_size (every entry the same). */
struct gpuctl_ledger_observation {
	size_t struct_size;   /* sizeof(struct gpuctl_ledger_observation) */
	int kind;             /* enum gpuctl_ledger_kind */
	const char *key;      /* stable identity of the holder within its kind (required) */
	const char *user;     /* its user's name, or NULL */
	int64_t uid;          /* its uid, -1: unknown */
	const char *group;    /* its group's name, or NULL */
	const char *workload; /* its workload label (docs/workloads.md), or NULL */
	const char *pool;     /* the pool of the GPU, or NULL */
	const char *gpu_uuid; /* the GPU (required) */
	double util_pct;      /* GPU utilisation 0..100; < 0: unknown */
	int64_t mem_used;     /* GPU memory used by the holder, bytes; < 0: unknown */
	int64_t energy_mj;    /* the GPU's total energy counter, mJ; < 0: the GPU has none */
	double wait_s;        /* a lease's time in the queue, seconds; < 0: none or unknown */
	int end;              /* enum gpuctl_ledger_end: NONE while held; else the holder ended at
	                       * this sample for that reason (the other values are not used) */
};
#define GPUCTL_LEDGER_OBSERVATION_INIT                                                             \
	{                                                                                          \
		.struct_size = sizeof(struct gpuctl_ledger_observation), .uid = -1,                \
		.util_pct = -1.0, .mem_used = -1, .energy_mj = -1, .wait_s = -1.0                  \
	}

/* Records one sample (one transaction): wall is the wall clock (Unix seconds, for stamps),
 * mono the caller's monotonic clock (seconds, for durations; it must not go back: a sample
 * whose mono is not after the previous one's integrates nothing). The interval since the
 * previous sample is integrated with that sample's values; a record observed then but not now
 * ends "gone" at wall. Writer only (-EBADF otherwise). On failure nothing of the sample is
 * stored and the state is as before it. */
int gpuctl_ledger_observe(struct gpuctl_ctx *ctx, struct gpuctl_ledger *ledger, double wall,
                          double mono, const struct gpuctl_ledger_observation *obs, size_t n);

/* ---- Violations (docs/ledger.md, "Violations") ---- */

/* One violation the agent's watch found. Initialise with GPUCTL_LEDGER_VIOLATION_INIT. */
struct gpuctl_ledger_violation {
	size_t struct_size;   /* sizeof(struct gpuctl_ledger_violation) */
	double time_s;        /* wall clock of the sample that found it (Unix seconds) */
	const char *kind;     /* "foreign", "overuse", "outside" (required) */
	const char *user;     /* the offending user's name, or NULL */
	int64_t uid;          /* the offending user's uid, -1: unknown */
	int64_t pid;          /* the offending process, -1: unknown */
	const char *gpu_uuid; /* the GPU (required) */
	const char *detail;   /* what was wrong, in words, or NULL */
	const char *action;   /* what was done, or NULL */
};
#define GPUCTL_LEDGER_VIOLATION_INIT                                                               \
	{                                                                                          \
		.struct_size = sizeof(struct gpuctl_ledger_violation), .uid = -1, .pid = -1        \
	}
/* Records v (one row); *ret_id (may be NULL) its row id, for gpuctl_ledger_violation_action.
 * Writer only (-EBADF otherwise); -EINVAL without kind or gpu_uuid. */
int gpuctl_ledger_violation_add(struct gpuctl_ctx *ctx, struct gpuctl_ledger *ledger,
                                const struct gpuctl_ledger_violation *v, int64_t *ret_id);
/* Sets the action of violation id (the action went on: a SIGKILL after the grace). Writer only;
 * -ENOENT: no such row (retention deleted it). */
int gpuctl_ledger_violation_action(struct gpuctl_ctx *ctx, struct gpuctl_ledger *ledger, int64_t id,
                                   const char *action);

/* ---- The report ---- */

enum gpuctl_ledger_by {
	GPUCTL_LEDGER_BY_USER = 0,
	GPUCTL_LEDGER_BY_GROUP,
	GPUCTL_LEDGER_BY_POOL,
	GPUCTL_LEDGER_BY_WORKLOAD,
	GPUCTL_LEDGER_BY_GPU,
	GPUCTL_LEDGER_BY_DAY, /* the UTC date, YYYY-MM-DD */
	GPUCTL_LEDGER_BY_MAX_,
};
/* "user", "group", "pool", "workload", "gpu", "day"; NULL out of range. */
const char *gpuctl_ledger_by_name(int by);

/* Initialise with GPUCTL_LEDGER_REPORT_REQUEST_INIT. */
struct gpuctl_ledger_report_request {
	size_t struct_size; /* sizeof(struct gpuctl_ledger_report_request) */
	double since;       /* window start, Unix seconds (inclusive) */
	double until;       /* window end, Unix seconds (exclusive); must be > since */
	int by;             /* enum gpuctl_ledger_by */
};
#define GPUCTL_LEDGER_REPORT_REQUEST_INIT                                                          \
	{                                                                                          \
		.struct_size = sizeof(struct gpuctl_ledger_report_request), .since = 0.0,          \
		.until = 1e12                                                                      \
	}

/* One group of the report; owned by the report, read through its pointer only. */
struct gpuctl_ledger_report_row {
	const char *key;    /* the group ("" where the records did not say) */
	double gpu_s;       /* GPU-seconds in the window */
	double busy_s;      /* of which busy (utilisation above the writer's threshold) */
	double idle_s;      /* gpu_s - busy_s */
	uint64_t jobs;      /* records with usage in this group and window */
	uint64_t waits;     /* of which with a queue wait (leases) */
	double wait_mean_s; /* mean queue wait of those, seconds (0 when waits is 0) */
	double wait_p95_s;  /* 95th percentile (nearest rank) of those (0 when waits is 0) */
	bool has_energy;    /* some usage of the group had an energy counter */
	double energy_kwh;  /* energy of the usage that had one, kWh */
};

struct gpuctl_ledger_report;
/* Usage in [since, until) grouped as asked, rows sorted by key. Usage is stored per record, GPU
 * and UTC hour: a window edge inside an hour counts that hour's usage in proportion to the time
 * it covers (docs/ledger.md, "The report"). -EINVAL: a bad request. */
int gpuctl_ledger_report(struct gpuctl_ctx *ctx, struct gpuctl_ledger *ledger,
                         const struct gpuctl_ledger_report_request *req,
                         struct gpuctl_ledger_report **ret_report);
size_t gpuctl_ledger_report_count(const struct gpuctl_ledger_report *report);
/* Row i (< count), or NULL. */
const struct gpuctl_ledger_report_row *
gpuctl_ledger_report_row(const struct gpuctl_ledger_report *report, size_t i);
/* Every group together (key "total"). */
const struct gpuctl_ledger_report_row *
gpuctl_ledger_report_total(const struct gpuctl_ledger_report *report);
void gpuctl_ledger_report_free(struct gpuctl_ledger_report *report);

GPUCTL_END_DECLS

#endif /* GPUCTL_LEDGER_H */
