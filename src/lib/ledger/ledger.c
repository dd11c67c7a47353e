/* SPDX-License-Identifier: MIT */
/*
 * ledger.c: opening the ledger (docs/ledger.md): the schema and its version, the pragmas, the
 * records an earlier writer left open, retention.
 *
 * Decisions:
 * - WAL: readers (gpuctl report) read a consistent snapshot while the writer writes, and a
 *   commit appends to the log instead of rewriting pages. synchronous=NORMAL: in WAL mode a
 *   commit is then durable against a crash of the process (the log is in the OS's page cache,
 *   so kill -9 loses nothing committed) and consistent after a power loss, which may lose the
 *   last commits: a second or so of samples, not worth an fsync per sample.
 * - The log is checkpointed every 100 pages, 400 KiB (SQLite's default is 1,000: 4 MiB), and
 *   written again from its start after that (https://sqlite.org/wal.html, "Checkpointing"):
 *   each sample rewrites the same few pages, so the log, not the database, is what grows, and
 *   a ledger on a disk with less room than SQLite's default log stopped for good once the log
 *   filled it (tests/cli/test_agent_reliability.py, a 640 KiB disk).
 * - The schema's version is PRAGMA user_version: 0 (a new file) is created, ours is used, a
 *   higher one (a newer gpuctl's) is refused rather than misread. Version 2 added the
 *   violations table: a writer brings a version 1 file up to 2 (the table created, in one
 *   transaction), a reader reads a version 1 file as it is (it has no violations).
 * - Records left open (end_s IS NULL) were being written when the writer stopped: the next
 *   writer ends them "agent-restart" at last_s, the last sample that observed them; the interval
 *   in flight when it stopped is lost, no more.
 * - All SQL with bound parameters; the writer's statements are prepared once, at open.
 * - The writer keeps the -wal and -shm files when it closes (SQLITE_FCNTL_PERSIST_WAL), so a
 *   reader who cannot create files in the directory still opens the ledger read-only.
 * - A new ledger is made whole under a name of its own (PATH.new-PID-N: WAL mode set, the
 *   schema written, closed) and only then linked to PATH, so a ledger file, once it exists,
 *   always has its schema and is in WAL mode: a writer killed while it created the file leaves
 *   no hot rollback journal that only a writer could roll back (a report, read-only, would get
 *   "attempt to write a readonly database") and no file without tables. link(2), not rename:
 *   two writers creating at once never replace each other's; the loser opens the winner's.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctx.h"
#include "ledger-internal.h"
#include "util.h"

static const char *const end_names[GPUCTL_LEDGER_END_MAX_] = {
        [GPUCTL_LEDGER_END_GONE] = "gone",
        [GPUCTL_LEDGER_END_EXIT] = "exit",
        [GPUCTL_LEDGER_END_RELEASE] = "release",
        [GPUCTL_LEDGER_END_EVICTED] = "evicted",
        [GPUCTL_LEDGER_END_FAILOVER] = "health-failover",
        [GPUCTL_LEDGER_END_RESTART] = "agent-restart",
};

const char *gpuctl_ledger_end_name(int end)
{
	return end > 0 && end < GPUCTL_LEDGER_END_MAX_ ? end_names[end] : NULL;
}

static const char schema[] =
        "CREATE TABLE records ("
        " id INTEGER PRIMARY KEY,"
        " kind TEXT NOT NULL,"
        " key TEXT NOT NULL,"
        " user TEXT, uid INTEGER, grp TEXT, workload TEXT, pool TEXT,"
        " gpus TEXT NOT NULL,"
        " start_s REAL NOT NULL, last_s REAL NOT NULL, end_s REAL, end_reason TEXT,"
        " wait_s REAL,"
        " gpu_s REAL NOT NULL, busy_s REAL NOT NULL, util_mean REAL,"
        " peak_mem INTEGER, energy_mj REAL,"
        " first_hour INTEGER, last_hour INTEGER);"
        "CREATE INDEX records_open ON records(end_s);"
        "CREATE TABLE usage ("
        " record INTEGER NOT NULL, gpu TEXT NOT NULL, hour INTEGER NOT NULL,"
        " t0 REAL NOT NULL, t1 REAL NOT NULL,"
        " gpu_s REAL NOT NULL, busy_s REAL NOT NULL, energy_mj REAL,"
        " PRIMARY KEY (hour, record, gpu)) WITHOUT ROWID;";
/* Version 2: the watch's violations (docs/ledger.md, "Violations"). */
static const char schema_v2[] = "CREATE TABLE violations ("
                                " id INTEGER PRIMARY KEY,"
                                " time_s REAL NOT NULL, kind TEXT NOT NULL,"
                                " user TEXT, uid INTEGER, pid INTEGER, gpu TEXT NOT NULL,"
                                " detail TEXT, action TEXT);"
                                "CREATE INDEX violations_time ON violations(time_s);"
                                "PRAGMA user_version = 2;";

static const char *const writer_sql[LG_STMT_MAX_] = {
        [LG_INSERT_REC] = "INSERT INTO records (kind, key, user, uid, grp, workload, pool, gpus,"
                          " start_s, last_s, gpu_s, busy_s) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, '',"
                          " ?8, ?8, 0, 0)",
        [LG_UPDATE_REC] = "UPDATE records SET gpus = ?2, last_s = ?3, end_s = ?4, end_reason = ?5,"
                          " wait_s = ?6, gpu_s = ?7, busy_s = ?8, util_mean = ?9, peak_mem = ?10,"
                          " energy_mj = ?11, first_hour = ?12, last_hour = ?13 WHERE id = ?1",
        [LG_UPSERT_USAGE] =
                "INSERT INTO usage (record, gpu, hour, t0, t1, gpu_s, busy_s, energy_mj)"
                " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
                " ON CONFLICT (hour, record, gpu) DO UPDATE SET"
                " t0 = min(t0, excluded.t0), t1 = max(t1, excluded.t1),"
                " gpu_s = gpu_s + excluded.gpu_s, busy_s = busy_s + excluded.busy_s,"
                " energy_mj = CASE WHEN excluded.energy_mj IS NULL THEN energy_mj"
                " ELSE coalesce(energy_mj, 0) + excluded.energy_mj END",
};

int ledger_sql_error(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l, const char *what)
{
	int code = l->db ? sqlite3_errcode(l->db) : SQLITE_ERROR;
	int r = -EIO;

	if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT)
		r = -EBADMSG;
	else if (code == SQLITE_CANTOPEN)
		r = -ENOENT;
	else if (code == SQLITE_FULL)
		r = -ENOSPC;
	else if (code == SQLITE_READONLY || code == SQLITE_PERM || code == SQLITE_AUTH)
		r = -EACCES;
	else if (code == SQLITE_BUSY || code == SQLITE_LOCKED)
		r = -EBUSY;
	else if (code == SQLITE_NOMEM)
		r = -ENOMEM;
	return ctx_error(ctx, r, "%s: %s", what, l->db ? sqlite3_errmsg(l->db) : "no database");
}

int ledger_exec(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l, const char *sql)
{
	if (sqlite3_exec(l->db, sql, NULL, NULL, NULL) != SQLITE_OK)
		return ledger_sql_error(ctx, l, "ledger");
	return 0;
}

static int user_version(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l, int *ret_v)
{
	sqlite3_stmt *st = NULL;
	int r;

	if (sqlite3_prepare_v2(l->db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK)
		return ledger_sql_error(ctx, l, "ledger: reading its schema version");
	r = sqlite3_step(st);
	if (r != SQLITE_ROW) {
		sqlite3_finalize(st);
		return ledger_sql_error(ctx, l, "ledger: reading its schema version");
	}
	*ret_v = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return 0;
}

/* The schema: created when the file is new (writer), checked otherwise. */
static int schema_check(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l)
{
	int v, r;

	if ((r = user_version(ctx, l, &v)) < 0)
		return r;
	if (v > LEDGER_SCHEMA_VERSION)
		return ctx_error(ctx, -EPROTO,
		                 "ledger: schema version %d is newer than this gpuctl's (%d): "
		                 "written by a newer gpuctl",
		                 v, LEDGER_SCHEMA_VERSION);
	if (v == LEDGER_SCHEMA_VERSION || (v == 1 && !l->writer))
		return 0;
	if (!l->writer)
		return ctx_error(ctx, -EBADMSG, "ledger: not a gpuctl ledger (schema version %d)",
		                 v);
	if ((r = ledger_exec(ctx, l, "BEGIN IMMEDIATE")) < 0)
		return r;
	/* another writer may have created it meanwhile */
	if ((r = user_version(ctx, l, &v)) < 0 || v == LEDGER_SCHEMA_VERSION) {
		sqlite3_exec(l->db, "ROLLBACK", NULL, NULL, NULL);
		return r;
	}
	if ((v == 0 && sqlite3_exec(l->db, schema, NULL, NULL, NULL) != SQLITE_OK) ||
	    sqlite3_exec(l->db, schema_v2, NULL, NULL, NULL) != SQLITE_OK) {
		r = ledger_sql_error(ctx, l, "ledger: creating its tables");
		sqlite3_exec(l->db, "ROLLBACK", NULL, NULL, NULL);
		return r;
	}
	return ledger_exec(ctx, l, "COMMIT");
}

static int bind_run(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l, const char *sql, double a,
                    const char *what)
{
	sqlite3_stmt *st = NULL;
	int r = 0;

	if (sqlite3_prepare_v2(l->db, sql, -1, &st, NULL) != SQLITE_OK)
		return ledger_sql_error(ctx, l, what);
	sqlite3_bind_double(st, 1, a);
	if (sqlite3_step(st) != SQLITE_DONE)
		r = ledger_sql_error(ctx, l, what);
	sqlite3_finalize(st);
	return r;
}

int ledger_retention(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l, double now)
{
	double cut = now - l->retention_s;
	int r;

	l->last_retention = now;
	if (l->retention_s <= 0)
		return 0;
	if ((r = ledger_exec(ctx, l, "BEGIN IMMEDIATE")) < 0)
		return r;
	r = bind_run(ctx, l,
	             "DELETE FROM usage WHERE record IN"
	             " (SELECT id FROM records WHERE end_s IS NOT NULL AND end_s < ?1)",
	             cut, "ledger: retention");
	if (r >= 0)
		r = bind_run(ctx, l, "DELETE FROM records WHERE end_s IS NOT NULL AND end_s < ?1",
		             cut, "ledger: retention");
	if (r >= 0)
		r = bind_run(ctx, l, "DELETE FROM violations WHERE time_s < ?1", cut,
		             "ledger: retention");
	if (r < 0) {
		sqlite3_exec(l->db, "ROLLBACK", NULL, NULL, NULL);
		return r;
	}
	return ledger_exec(ctx, l, "COMMIT");
}

static int writer_setup(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l, double now)
{
	int one = 1, r;

	/* keep -wal and -shm when the writer closes: a user who may read the ledger but not write
	 * its directory can then open it read-only at any time (https://sqlite.org/wal.html,
	 * "Read-Only Databases") */
	(void)sqlite3_file_control(l->db, "main", SQLITE_FCNTL_PERSIST_WAL, &one);
	if ((r = ledger_exec(ctx, l, "PRAGMA journal_mode = WAL")) < 0 ||
	    (r = ledger_exec(ctx, l, "PRAGMA synchronous = NORMAL")) < 0 ||
	    (r = ledger_exec(ctx, l, "PRAGMA wal_autocheckpoint = 100")) < 0 ||
	    (r = schema_check(ctx, l)) < 0)
		return r;
	if ((r = ledger_exec(ctx, l,
	                     "UPDATE records SET end_s = last_s, end_reason = 'agent-restart'"
	                     " WHERE end_s IS NULL")) < 0)
		return r;
	if ((r = ledger_retention(ctx, l, now)) < 0)
		return r;
	for (int i = 0; i < LG_STMT_MAX_; i++)
		if (sqlite3_prepare_v3(l->db, writer_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
		                       &l->stmt[i], NULL) != SQLITE_OK)
			return ledger_sql_error(ctx, l, "ledger: preparing its statements");
	return 0;
}

/* Makes a new ledger at path, whole (Decisions): 0 also when another writer made it first;
 * -errno with the message set. */
static int create_whole(struct gpuctl_ctx *ctx, const char *path)
{
	static unsigned counter;
	struct gpuctl_ledger tmp = {.writer = true};
	char *name = NULL;
	int r = 0;

	if (asprintf(&name, "%s.new-%ld-%u", path, (long)getpid(), counter++) < 0)
		return -ENOMEM;
	(void)unlink(name);
	if (sqlite3_open_v2(name, &tmp.db,
	                    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX |
	                            SQLITE_OPEN_EXRESCODE,
	                    NULL) != SQLITE_OK)
		r = ledger_sql_error(ctx, &tmp, path);
	else if ((r = ledger_exec(ctx, &tmp, "PRAGMA journal_mode = WAL")) >= 0)
		r = schema_check(ctx, &tmp);
	/* the last connection's close checkpoints and removes NAME-wal and NAME-shm */
	if (sqlite3_close(tmp.db) != SQLITE_OK && r >= 0)
		r = ctx_error(ctx, -EIO, "%s: closing the new ledger failed", path);
	if (r >= 0 && link(name, path) < 0 && errno != EEXIST)
		r = ctx_error(ctx, -errno, "%s: %s", path, strerror(errno));
	(void)unlink(name);
	free(name);
	return r;
}

int gpuctl_ledger_open(struct gpuctl_ctx *ctx, const char *path,
                       const struct gpuctl_ledger_options *opts, struct gpuctl_ledger **ret_ledger)
{
	struct gpuctl_ledger_options o = GPUCTL_LEDGER_OPTIONS_INIT;
	struct gpuctl_ledger *l;
	int flags, r;

	if (!path || !ret_ledger)
		return ctx_error(ctx, -EINVAL, "ledger: no path");
	if (opts) {
		if (opts->struct_size < STRUCT_SIZE_MIN(struct gpuctl_ledger_options, writer))
			return ctx_error(ctx, -EINVAL, "ledger options: bad struct_size %zu",
			                 opts->struct_size);
		memcpy(&o, opts, opts->struct_size < sizeof(o) ? opts->struct_size : sizeof(o));
	}
	if (!(o.busy_threshold >= 0 && o.busy_threshold <= 100) || isnan(o.retention_s))
		return ctx_error(ctx, -EINVAL, "ledger options: busy threshold %g%% out of 0..100",
		                 o.busy_threshold);
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->writer = o.writer;
	l->busy_threshold = o.busy_threshold;
	l->retention_s = o.retention_s;
	if (o.writer && access(path, F_OK) < 0 && errno == ENOENT &&
	    (r = create_whole(ctx, path)) < 0)
		goto fail;
	flags = (o.writer ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY) | SQLITE_OPEN_NOMUTEX |
	        SQLITE_OPEN_EXRESCODE;
	if (sqlite3_open_v2(path, &l->db, flags, NULL) != SQLITE_OK) {
		r = ledger_sql_error(ctx, l, path);
		if (!o.writer && access(path, F_OK) < 0 && errno == ENOENT)
			r = ctx_error(ctx, -ENOENT, "%s: no such file", path);
		goto fail;
	}
	/* a writer's transaction is short: wait for it rather than fail */
	sqlite3_busy_timeout(l->db, 5000);
	if (o.writer) {
		r = writer_setup(ctx, l, o.now > 0 ? o.now : (double)time(NULL));
	} else {
		/* a report reads much of the file once: map it rather than copy it page by page */
		(void)sqlite3_exec(l->db, "PRAGMA mmap_size = 4294967296", NULL, NULL, NULL);
		r = schema_check(ctx, l);
	}
	if (r < 0) {
		ctx_error_prefix(ctx, r, "%s", path);
		goto fail;
	}
	*ret_ledger = l;
	return 0;
fail:
	gpuctl_ledger_free(l);
	return r;
}

void ledger_rec_free(struct lg_rec *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_gpus; i++)
		free(r->gpus[i].uuid);
	free(r->gpus);
	free(r->key);
	free(r->user);
	free(r->group);
	free(r->workload);
	free(r->pool);
	free(r);
}

void gpuctl_ledger_free(struct gpuctl_ledger *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n_recs; i++)
		ledger_rec_free(l->recs[i]);
	free(l->recs);
	for (int i = 0; i < LG_STMT_MAX_; i++)
		sqlite3_finalize(l->stmt[i]);
	sqlite3_close(l->db);
	free(l);
}
