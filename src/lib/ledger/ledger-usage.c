// SPDX-License-Identifier: MIT
/*
 * ledger-usage.c: one user's GPU-seconds in a window, on some GPUs (gpuctl_ledger_user_usage):
 * what the GPU-hour quotas count (docs/config.md "Quotas").
 *
 * Decisions:
 * - The same integration as the report (ledger-report.c): usage rows per record, GPU and UTC
 *   hour, a window edge inside an hour counting the hour's usage in proportion to the time it
 *   covers, so a quota and `gpuctl report --by user` agree.
 * - A record is the user's by its uid; a record without one (a writer that knew only the name)
 *   by its user name.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "ctx.h"
#include "ledger-internal.h"
#include "util.h"

#define LEDGER_BUCKET_S 3600 /* ledger-report.c's usage rows: one per UTC hour */

static bool gpu_listed(const char *gpu, const char *const *gpus, size_t n)
{
	if (n == 0)
		return true;
	for (size_t i = 0; i < n; i++)
		if (gpus[i] && gpu && streq(gpus[i], gpu))
			return true;
	return false;
}

int gpuctl_ledger_user_usage(struct gpuctl_ctx *ctx, struct gpuctl_ledger *l, double since,
                             double until, int64_t uid, const char *name, const char *const *gpus,
                             size_t n_gpus, double *ret_gpu_s)
{
	sqlite3_stmt *st = NULL;
	double sum = 0;
	int s;

	if (!l || !ret_gpu_s || !(until > since) || (n_gpus && !gpus))
		return ctx_error(ctx, -EINVAL, "ledger usage: bad request");
	if (sqlite3_prepare_v2(l->db,
	                       "SELECT u.gpu, u.t0, u.t1, u.gpu_s FROM usage u JOIN records r"
	                       " ON r.id = u.record WHERE u.hour >= ?1 AND u.hour <= ?2 AND"
	                       " (r.uid = ?3 OR (r.uid IS NULL AND r.user = ?4))",
	                       -1, &st, NULL) != SQLITE_OK)
		return ledger_sql_error(ctx, l, "ledger: reading usage");
	sqlite3_bind_int64(st, 1, (int64_t)floor(since / LEDGER_BUCKET_S));
	sqlite3_bind_int64(st, 2, (int64_t)floor(until / LEDGER_BUCKET_S));
	sqlite3_bind_int64(st, 3, uid);
	if (name)
		sqlite3_bind_text(st, 4, name, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 4);
	while ((s = sqlite3_step(st)) == SQLITE_ROW) {
		const unsigned char *gpu = sqlite3_column_text(st, 0);
		double t0 = sqlite3_column_double(st, 1), t1 = sqlite3_column_double(st, 2);
		double lo = t0 > since ? t0 : since, hi = t1 < until ? t1 : until;
		double f = t1 > t0 ? (hi - lo) / (t1 - t0) : (t0 >= since && t0 < until);

		if (f > 0 && gpu_listed((const char *)gpu, gpus, n_gpus))
			sum += f * sqlite3_column_double(st, 3);
	}
	if (s != SQLITE_DONE) {
		sqlite3_finalize(st);
		return ledger_sql_error(ctx, l, "ledger: reading usage");
	}
	sqlite3_finalize(st);
	*ret_gpu_s = sum;
	return 0;
}
