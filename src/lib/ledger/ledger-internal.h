/* SPDX-License-Identifier: MIT */
/*
 * ledger-internal.h: what the ledger's files share (docs/ledger.md): the handle, the writer's
 * records in memory, the statements.
 *
 * Decisions:
 * - The writer keeps the records it has open in memory, with each one's values of the last
 *   stored sample, so a sample is one pass over its observations and one transaction. Fields
 *   named n_* are the sample in flight's: they become the stored ones only after COMMIT, so a
 *   failed sample leaves memory as the database (both as before it).
 * - Holders per server are tens: records are found by a linear search.
 */
#ifndef GPUCTL_LEDGER_INTERNAL_H
#define GPUCTL_LEDGER_INTERNAL_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "gpuctl/ledger.h"

/* The schema version in PRAGMA user_version (docs/ledger.md, "Schema"). */
#define LEDGER_SCHEMA_VERSION 2
/* Usage rows are per record, GPU and this many seconds of wall clock (an hour). */
#define LEDGER_BUCKET_S 3600

/* A record's totals (records table). */
struct lg_tot {
	double gpu_s;        /* GPU-seconds */
	double busy_s;       /* of which busy */
	double util_s;       /* utilisation integrated (% x s) over util_known_s */
	double util_known_s; /* GPU-seconds with a known utilisation */
	int64_t peak_mem;    /* largest memory used on one GPU at one sample, -1: never known */
	double energy_mj;    /* energy of the intervals with counters at both ends */
	bool has_energy;     /* some interval had */
	double wait_s;       /* queue wait, < 0: none */
	int64_t first_hour;  /* the hours of its usage rows (hour column), first > last: none */
	int64_t last_hour;
};

/* One GPU a record was seen on. */
struct lg_gpu {
	char *uuid;     /* owned */
	bool pending;   /* added by the sample in flight */
	bool active;    /* observed at the last stored sample */
	double util;    /* its utilisation then, < 0 unknown */
	int64_t energy; /* the GPU's energy counter then, < 0 unknown */
	bool n_active;  /* the same for the sample in flight */
	double n_util;
	int64_t n_energy;
};

/* An open record. */
struct lg_rec {
	int64_t id;   /* rowid, 0: inserted by the sample in flight */
	int64_t n_id; /* rowid given by the sample in flight's INSERT */
	int kind;     /* enum gpuctl_ledger_kind */
	char *key, *user, *group, *workload, *pool; /* owned; NULL: not said */
	int64_t uid;                                /* -1: unknown */
	double start;                               /* wall clock of its first observation */
	struct lg_tot tot, n_tot;                   /* stored, in flight */
	bool seen;                                  /* observed in the sample in flight */
	int n_end;           /* enum gpuctl_ledger_end it ends with in the sample in flight */
	struct lg_gpu *gpus; /* every GPU it was seen on, in order */
	size_t n_gpus;
};

enum lg_stmt {
	LG_INSERT_REC,
	LG_UPDATE_REC,
	LG_UPSERT_USAGE,
	LG_STMT_MAX_,
};

struct gpuctl_ledger {
	sqlite3 *db;
	bool writer;
	double busy_threshold;
	double retention_s;
	sqlite3_stmt *stmt[LG_STMT_MAX_]; /* the writer's, prepared at open */
	struct lg_rec **recs;             /* the writer's open records */
	size_t n_recs, cap_recs;
	bool have_prev;              /* a sample was stored since open */
	double prev_wall, prev_mono; /* it */
	double last_retention;       /* wall clock of the last retention pass */
};

/* ledger.c */
int ledger_sql_error(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l, const char *what);
int ledger_exec(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l, const char *sql);
int ledger_retention(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l, double now);
void ledger_rec_free(struct lg_rec *r);

#endif /* GPUCTL_LEDGER_INTERNAL_H */
