// SPDX-License-Identifier: MIT
/*
 * ledger-violations.c: the violations table (docs/ledger.md, "Violations"): one row per
 * violation the agent's watch found, its action updated when it goes on.
 *
 * Decisions:
 * - A row is its own statement (autocommit), not part of a sample's transaction: violations are
 *   rare, and one that is found while the sample's records cannot be written is still kept.
 * - Bound parameters only; the statements are prepared per call (violations are rare).
 */
#include <errno.h>
#include <string.h>

#include "ctx.h"
#include "ledger-internal.h"
#include "util.h"

static void bind_text(sqlite3_stmt *st, int i, const char *s)
{
	if (s)
		sqlite3_bind_text(st, i, s, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, i);
}

static void bind_id(sqlite3_stmt *st, int i, int64_t v)
{
	if (v >= 0)
		sqlite3_bind_int64(st, i, v);
	else
		sqlite3_bind_null(st, i);
}

int gpuctl_ledger_violation_add(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l,
                                const struct gpuctl_ledger_violation *v, int64_t *ret_id)
{
	struct gpuctl_ledger_violation x = GPUCTL_LEDGER_VIOLATION_INIT;
	sqlite3_stmt *st = NULL;
	int r = 0;

	if (!l || !v || v->struct_size < STRUCT_SIZE_MIN(struct gpuctl_ledger_violation, action))
		return ctx_error(ctx, -EINVAL, "ledger: invalid violation");
	memcpy(&x, v, v->struct_size < sizeof(x) ? v->struct_size : sizeof(x));
	if (!l->writer)
		return ctx_error(ctx, -EBADF, "ledger: opened read-only");
	if (!x.kind || !x.gpu_uuid)
		return ctx_error(ctx, -EINVAL, "ledger: a violation needs its kind and GPU");
	if (sqlite3_prepare_v2(l->db,
	                       "INSERT INTO violations (time_s, kind, user, uid, pid, gpu, detail,"
	                       " action) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
	                       -1, &st, NULL) != SQLITE_OK)
		return ledger_sql_error(ctx, l, "ledger: recording a violation");
	sqlite3_bind_double(st, 1, x.time_s);
	bind_text(st, 2, x.kind);
	bind_text(st, 3, x.user);
	bind_id(st, 4, x.uid);
	bind_id(st, 5, x.pid);
	bind_text(st, 6, x.gpu_uuid);
	bind_text(st, 7, x.detail);
	bind_text(st, 8, x.action);
	if (sqlite3_step(st) != SQLITE_DONE)
		r = ledger_sql_error(ctx, l, "ledger: recording a violation");
	else if (ret_id)
		*ret_id = sqlite3_last_insert_rowid(l->db);
	sqlite3_finalize(st);
	return r;
}

int gpuctl_ledger_violation_action(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l, int64_t id,
                                   const char *action)
{
	sqlite3_stmt *st = NULL;
	int r = 0;

	if (!l)
		return ctx_error(ctx, -EINVAL, "ledger: no ledger");
	if (!l->writer)
		return ctx_error(ctx, -EBADF, "ledger: opened read-only");
	if (sqlite3_prepare_v2(l->db, "UPDATE violations SET action = ?2 WHERE id = ?1", -1, &st,
	                       NULL) != SQLITE_OK)
		return ledger_sql_error(ctx, l, "ledger: updating a violation");
	sqlite3_bind_int64(st, 1, id);
	bind_text(st, 2, action);
	if (sqlite3_step(st) != SQLITE_DONE)
		r = ledger_sql_error(ctx, l, "ledger: updating a violation");
	else if (sqlite3_changes(l->db) == 0)
		r = ctx_error(ctx, -ENOENT, "ledger: no violation %lld", (long long)id);
	sqlite3_finalize(st);
	return r;
}
