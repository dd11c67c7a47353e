// SPDX-License-Identifier: MIT
/*
 * status-history.c: each GPU's utilisation over the last 24 hours, for the status page's plots
 * (docs/status-page.md, "History").
 *
 * Decisions:
 * - Made from the samples the server takes anyway (no NVML call of its own), kept in memory:
 *   STATUS_BUCKETS buckets of STATUS_BUCKET_S seconds per GPU, each the sum and count of the
 *   samples that fell in it, so a bucket's mean is exact whatever the interval. The ledger
 *   (docs/ledger.md) records holders, not a GPU's utilisation over time, so a restarted server
 *   starts a new history; the document says since when (history_since).
 * - A bucket is the wall clock's (floor(wall / STATUS_BUCKET_S)): a clock stepped back makes old
 *   buckets look new for a while, which a plot of a day survives; a bucket is reused when its
 *   slot's bucket number differs.
 * - GPUs by UUID, so a lost GPU that comes back keeps its line.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

struct bucket {
	int64_t no; /* floor(wall / STATUS_BUCKET_S) of what it holds; -1: empty */
	double sum; /* utilisation percent summed over its samples */
	unsigned n; /* its samples */
};

struct gpu_line {
	char *uuid;
	struct bucket b[STATUS_BUCKETS];
};

struct status_history {
	double since;          /* the history began, seconds since the epoch */
	struct gpu_line *gpus; /* owned, n entries */
	size_t n;
};

int status_history_new(double now_wall, struct status_history **ret)
{
	struct status_history *h = calloc(1, sizeof(*h));

	if (!h)
		return -ENOMEM;
	h->since = now_wall;
	*ret = h;
	return 0;
}

void status_history_free(struct status_history *h)
{
	if (!h)
		return;
	for (size_t i = 0; i < h->n; i++)
		free(h->gpus[i].uuid);
	free(h->gpus);
	free(h);
}

double status_history_since(const struct status_history *h)
{
	return h->since;
}

static struct gpu_line *line_of(const struct status_history *h, const char *uuid)
{
	for (size_t i = 0; i < h->n; i++)
		if (!strcmp(h->gpus[i].uuid, uuid))
			return &h->gpus[i];
	return NULL;
}

static struct gpu_line *line_add(struct status_history *h, const char *uuid)
{
	struct gpu_line *l = line_of(h, uuid);
	struct gpu_line *g;

	if (l)
		return l;
	g = realloc(h->gpus, (h->n + 1) * sizeof(*g));
	if (!g)
		return NULL;
	h->gpus = g;
	l = &g[h->n];
	l->uuid = strdup(uuid);
	if (!l->uuid)
		return NULL;
	for (size_t k = 0; k < STATUS_BUCKETS; k++)
		l->b[k] = (struct bucket){.no = -1};
	h->n++;
	return l;
}

static int64_t bucket_no(double wall)
{
	return wall > 0 ? (int64_t)floor(wall / STATUS_BUCKET_S) : 0;
}

int status_history_add(struct status_history *h, const struct gpuctl_snapshot *snap, double wall)
{
	int64_t no = bucket_no(wall);

	for (size_t g = 0; g < gpuctl_snapshot_gpu_count(snap); g++) {
		const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(snap, g);
		const char *uuid = gpuctl_gpu_str(gpu, GPUCTL_F_UUID);
		int64_t util;

		if (!uuid || gpuctl_gpu_lost(gpu) ||
		    gpuctl_gpu_int(gpu, GPUCTL_F_UTIL_GPU, &util) < 0)
			continue;
		struct gpu_line *l = line_add(h, uuid);
		if (!l)
			return -ENOMEM;
		struct bucket *b = &l->b[no % STATUS_BUCKETS];
		if (b->no != no)
			*b = (struct bucket){.no = no};
		b->sum += (double)util;
		b->n++;
	}
	return 0;
}

json_t *status_history_json(const struct status_history *h, const char *uuid, double now_wall)
{
	const struct gpu_line *l = uuid ? line_of(h, uuid) : NULL;
	int64_t last = bucket_no(now_wall);
	json_t *a = json_array();

	for (int64_t no = last - STATUS_BUCKETS + 1; a && no <= last; no++) {
		const struct bucket *b = l && no >= 0 ? &l->b[no % STATUS_BUCKETS] : NULL;
		json_t *v = b && b->no == no && b->n ? json_real(round(b->sum / b->n * 10.0) / 10.0)
		                                     : json_null();
		if (json_array_append_new(a, v) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}
