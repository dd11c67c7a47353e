// SPDX-License-Identifier: MIT
/*
 * select-filter.c: which devices the selection may choose (docs/selection.md "Filters"), the
 * sockets the GPUs sit on, and the -ENOSPC line that says what removed what.
 *
 * Decisions:
 * - Filters run in a fixed order (enum reason) and remember which one removed each device, so
 *   -ENOSPC says, in one line, what removed what. Fields NVML could not give never exclude.
 * - Pools (req->pool, docs/config.md) filter right after the outer allocation, the same way.
 * - Leases (req->leased, req->foreign) are filters right after `within`: a device is removed
 *   when the set holds it, its whole GPU, or (for a whole GPU) any of its MIG devices
 *   ("leased", "in use without a lease"). The same holds for req->unhealthy and req->warned.
 * - Sockets: GPUs joined by a shared NUMA node or a non-SYS PCIe level, transitively.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"
#include "parse.h"
#include "select-internal.h"
#include "snapshot-internal.h"
#include "util.h"

#define MSG_MAX 480 /* -ENOSPC message */

/* Union-find root. */
static size_t uf_find(size_t *p, size_t x)
{
	while (p[x] != x)
		x = p[x] = p[p[x]];
	return x;
}

/* Socket of every GPU: GPUs sharing a known NUMA node, or with a known PCIe level below SYS,
 * are on one socket (transitively); the socket id is the smallest GPU index in it. */
int select_sockets_of(const struct gpuctl_snapshot *snap, int *ret_socket)
{
	size_t n = snap->n_gpus;
	_cleanup_free_ size_t *p = calloc(n ? n : 1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		p[i] = i;
	for (size_t a = 0; a < n; a++)
		for (size_t b = a + 1; b < n; b++) {
			int64_t na, nb;
			bool join = select_gpu_int(&snap->gpus[a], GPUCTL_F_NUMA_NODE, &na) &&
			            select_gpu_int(&snap->gpus[b], GPUCTL_F_NUMA_NODE, &nb) &&
			            na == nb;

			if (!join && snap->links) {
				int lvl = snap->links[a * n + b].level;

				join = lvl >= 0 && lvl < GPUCTL_TOPO_SYSTEM;
			}
			if (join) {
				size_t ra = uf_find(p, a), rb = uf_find(p, b);

				if (ra != rb)
					p[ra > rb ? ra : rb] = ra < rb ? ra : rb;
			}
		}
	for (size_t i = 0; i < n; i++)
		ret_socket[i] = (int)uf_find(p, i);
	return 0;
}

/* The filter line's label for a reason. */
static void reason_label(const struct gpuctl_select_request *req, enum reason r, char *buf,
                         size_t size)
{
	switch (r) {
	case R_LOST:
		strscpy(buf, size, "lost or unidentified");
		break;
	case R_ECC:
		strscpy(buf, size, "uncorrectable ECC errors");
		break;
	case R_REMAP:
		strscpy(buf, size, "row-remap failure");
		break;
	case R_UNHEALTHY:
		strscpy(buf, size, "unhealthy");
		break;
	case R_WARNED:
		strscpy(buf, size, "health WARN");
		break;
	case R_MIG_MODE:
		strscpy(buf, size, "MIG mode");
		break;
	case R_WITHIN:
		(void)snprintf(buf, size, "outside the allocation of %s",
		               req->within_name ? req->within_name : "the environment");
		break;
	case R_POOL:
		(void)snprintf(buf, size, "outside pool %s", req->pool_name ? req->pool_name : "?");
		break;
	case R_LEASED:
		strscpy(buf, size, "leased");
		break;
	case R_FOREIGN:
		strscpy(buf, size, "in use without a lease");
		break;
	case R_ONLY:
		strscpy(buf, size, "only");
		break;
	case R_EXCLUDE:
		strscpy(buf, size, "exclude");
		break;
	case R_NUMA:
		(void)snprintf(buf, size, "numa_node %d", req->numa_node);
		break;
	case R_MEM:
		if (req->min_free_mem % (1024 * 1024) == 0)
			(void)snprintf(buf, size, "min_free_mem %" PRIu64 "MiB",
			               req->min_free_mem / (1024 * 1024));
		else
			(void)snprintf(buf, size, "min_free_mem %" PRIu64, req->min_free_mem);
		break;
	case R_SHARE_MEM: {
		char text[32];

		(void)snprintf(buf, size, "share_mem %s not free",
		               size_exact_text(req->share_mem, text, sizeof(text)));
		break;
	}
	case R_UTIL:
		(void)snprintf(buf, size, "max_util %d", req->max_util);
		break;
	case R_PROCS:
		strscpy(buf, size, "no_procs");
		break;
	default:
		strscpy(buf, size, "?");
		break;
	}
}

/* Appends to a fixed message buffer, truncating ("..." marks a cut). */
static void msg_add(char *buf, size_t size, size_t *len, const char *fmt, ...) _printf_(4, 5);
static void msg_add(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
	va_list ap;
	int w;

	if (*len + 1 >= size)
		return;
	va_start(ap, fmt);
	w = vsnprintf(buf + *len, size - *len, fmt, ap);
	va_end(ap);
	if (w < 0)
		return;
	if ((size_t)w >= size - *len) {
		*len = size - 1;
		if (size > 4)
			memcpy(buf + size - 4, "...", 4);
		return;
	}
	*len += (size_t)w;
}

/* Whether set marks device d: d itself, d's whole GPU (a MIG device of a marked GPU), or, for
 * a whole GPU, any of its MIG devices (a GPU with a marked MIG device is not whole). */
static bool set_marks(const struct gpuctl_snapshot *snap, const struct gpuctl_devset *set,
                      size_t gpu, int mig)
{
	if (!set)
		return false;
	if (gpuctl_devset_contains(set, gpu, -1))
		return true;
	if (mig >= 0)
		return gpuctl_devset_contains(set, gpu, mig);
	for (size_t i = 0; i < snap->gpus[gpu].n_migs; i++)
		if (gpuctl_devset_contains(set, gpu, (int)i))
			return true;
	return false;
}

/* Health: lost or unnamed GPUs never; errors and FAIL devices unless allow_unhealthy. */
static enum reason filter_health(const struct gpuctl_snapshot *snap,
                                 const struct gpuctl_select_request *req, const struct device *d)
{
	const struct gpuctl_gpu *g = &snap->gpus[d->gpu];
	int64_t v;

	/* A lost GPU runs nothing and a GPU without a UUID cannot be named to CUDA: neither is
	 * ever chosen, allow_unhealthy or not. */
	if (g->lost || !gpuctl_gpu_str(g, GPUCTL_F_UUID))
		return R_LOST;
	if (req->allow_unhealthy)
		return R_KEPT;
	if (select_gpu_int(g, GPUCTL_F_ECC_VOL_UNCORRECTED, &v) && v > 0)
		return R_ECC;
	if (select_gpu_int(g, GPUCTL_F_REMAP_FAILURE, &v) && v > 0)
		return R_REMAP;
	if (set_marks(snap, req->unhealthy, d->gpu, d->mig))
		return R_UNHEALTHY;
	return R_KEPT;
}

/* Whether set (the outer allocation, the pool; NULL: everything) leaves d out: neither d's GPU
 * nor d itself is in it. */
static bool set_leaves_out(const struct gpuctl_devset *set, const struct device *d)
{
	return set && !gpuctl_devset_contains(set, d->gpu, -1) &&
	       (d->mig < 0 || !gpuctl_devset_contains(set, d->gpu, d->mig));
}

/* Place: MIG mode, the allocation, the pool, leases, --only, --exclude, --numa. */
static enum reason filter_place(const struct gpuctl_snapshot *snap,
                                const struct gpuctl_select_request *req, const bool *only,
                                const bool *excluded, const struct device *d)
{
	const struct gpuctl_gpu *g = &snap->gpus[d->gpu];
	int64_t v;

	if (d->mig < 0 && select_gpu_int(g, GPUCTL_F_MIG_MODE, &v) && v > 0)
		return R_MIG_MODE;
	if (set_leaves_out(req->within, d))
		return R_WITHIN;
	if (set_leaves_out(req->pool, d))
		return R_POOL;
	if (set_marks(snap, req->leased, d->gpu, d->mig))
		return R_LEASED;
	if (set_marks(snap, req->foreign, d->gpu, d->mig))
		return R_FOREIGN;
	if (only && !only[d->gpu])
		return R_ONLY;
	if (excluded && excluded[d->gpu])
		return R_EXCLUDE;
	if (req->numa_node >= 0 && select_gpu_int(g, GPUCTL_F_NUMA_NODE, &v) && v != req->numa_node)
		return R_NUMA;
	return R_KEPT;
}

/* Whether the device (a whole GPU g, or g's MIG device mg) is known to have less than min
 * bytes free. */
static bool mem_too_little(const struct gpuctl_gpu *g, const struct gpuctl_mig *mg, uint64_t min)
{
	bool known;
	int64_t v = 0;

	if (mg) {
		known = mg->valid[GPUCTL_MIG_MEMORY_TOTAL] && mg->valid[GPUCTL_MIG_MEMORY_USED];
		v = known ? mg->ints[GPUCTL_MIG_MEMORY_TOTAL] - mg->ints[GPUCTL_MIG_MEMORY_USED]
		          : 0;
	} else {
		known = select_gpu_int(g, GPUCTL_F_MEMORY_FREE, &v);
	}
	return known && (v < 0 || (uint64_t)v < min);
}

/* Whether a compute process runs on the device: any on a whole GPU g; on a MIG device mg, one
 * in its GPU and compute instance. */
static bool procs_on(const struct gpuctl_gpu *g, const struct gpuctl_mig *mg)
{
	for (size_t i = 0; i < g->n_procs; i++) {
		const struct gpuctl_proc *p = &g->procs[i];

		if (!mg)
			return true;
		if (p->has_mig && mg->valid[GPUCTL_MIG_GI] && mg->valid[GPUCTL_MIG_CI] &&
		    p->gi == (uint64_t)mg->ints[GPUCTL_MIG_GI] &&
		    p->ci == (uint64_t)mg->ints[GPUCTL_MIG_CI])
			return true;
	}
	return false;
}

/* Use: free memory (asked, then a shared lease's), utilisation, processes, then health WARN
 * (when avoid_warned). */
static enum reason filter_use(const struct gpuctl_snapshot *snap,
                              const struct gpuctl_select_request *req, bool avoid_warned,
                              const struct device *d)
{
	const struct gpuctl_gpu *g = &snap->gpus[d->gpu];
	const struct gpuctl_mig *mg = d->mig >= 0 ? &g->migs[d->mig] : NULL;
	int64_t v;

	if (req->min_free_mem > 0 && mem_too_little(g, mg, req->min_free_mem))
		return R_MEM;
	if (req->share_mem > 0 && mem_too_little(g, mg, req->share_mem))
		return R_SHARE_MEM;
	if (req->max_util >= 0 && select_gpu_int(g, GPUCTL_F_UTIL_GPU, &v) && v > req->max_util)
		return R_UTIL;
	if (req->no_procs && (snap->flags & GPUCTL_SNAP_PROCESSES) && procs_on(g, mg))
		return R_PROCS;
	if (avoid_warned && set_marks(snap, req->warned, d->gpu, d->mig))
		return R_WARNED;
	return R_KEPT;
}

/* One device under the filters, in the order of enum reason: the first that removes it. */
static enum reason filter_one(const struct gpuctl_snapshot *snap,
                              const struct gpuctl_select_request *req, const bool *only,
                              const bool *excluded, bool avoid_warned, const struct device *d)
{
	enum reason r = filter_health(snap, req, d);

	if (r == R_KEPT)
		r = filter_place(snap, req, only, excluded, d);
	if (r == R_KEPT)
		r = filter_use(snap, req, avoid_warned, d);
	return r;
}

size_t select_filter(const struct gpuctl_snapshot *snap, const struct gpuctl_select_request *req,
                     const bool *only, const bool *excluded, bool avoid_warned, struct device *dev,
                     size_t n_dev)
{
	size_t kept = 0;

	for (size_t i = 0; i < n_dev; i++) {
		dev[i].reason = (int)filter_one(snap, req, only, excluded, avoid_warned, &dev[i]);
		kept += dev[i].reason == R_KEPT;
	}
	return kept;
}

/* Resolves req->only / req->exclude into a per-GPU flag array (NULL when not given). */
int select_resolve_ids(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap, const char *ids,
                       const char *what, bool **ret_flags)
{
	_cleanup_free_ size_t *idx = NULL;
	_cleanup_free_ bool *flags = NULL;
	size_t n = 0;
	int r;

	if (!ids) {
		*ret_flags = NULL;
		return 0;
	}
	r = gpuctl_ids_resolve(ctx, snap, ids, &idx, &n);
	if (r < 0) {
		char why[CTX_ERRMSG_MAX];

		strscpy(why, sizeof(why), gpuctl_errmsg(ctx));
		return ctx_error(ctx, r, "%s: %s", what, why);
	}
	flags = calloc(snap->n_gpus ? snap->n_gpus : 1, sizeof(*flags));
	if (!flags)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++)
		flags[idx[i]] = true;
	*ret_flags = TAKE_PTR(flags);
	return 0;
}

/* Appends the MIG profiles snap has, each with its count in order of first appearance
 * ("1g.5gb (7), 3g.20gb (1)"), or "none", so that a --mig request that finds nothing says what
 * there is (issue 25, item 9). */
void select_mig_profiles(const struct gpuctl_snapshot *snap, char *buf, size_t size, size_t *len)
{
	struct {
		const char *name;
		unsigned n;
	} seen[32];
	size_t n_seen = 0, more = 0;

	for (size_t g = 0; g < snap->n_gpus; g++) {
		const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(snap, g);

		for (size_t k = 0; k < gpuctl_gpu_mig_count(gpu); k++) {
			const char *p = gpuctl_mig_profile(gpuctl_gpu_mig(gpu, k));
			size_t j = 0;

			if (!p)
				p = "unknown";
			while (j < n_seen && strcmp(seen[j].name, p) != 0)
				j++;
			if (j < n_seen)
				seen[j].n++;
			else if (n_seen < sizeof(seen) / sizeof(seen[0])) {
				seen[n_seen].name = p;
				seen[n_seen++].n = 1;
			} else
				more++;
		}
	}
	if (n_seen == 0)
		msg_add(buf, size, len, "none");
	for (size_t j = 0; j < n_seen; j++)
		msg_add(buf, size, len, "%s%s (%u)", j ? ", " : "", seen[j].name, seen[j].n);
	if (more)
		msg_add(buf, size, len, " and %zu more", more);
}

/* Writes the -ENOSPC line. */
int select_no_space(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                    const struct gpuctl_select_request *req, const struct device *dev, size_t n_dev,
                    size_t kept)
{
	char msg[MSG_MAX];
	size_t len = 0;
	bool mig = req->mig_profile != NULL, any = false;

	msg_add(msg, sizeof(msg), &len, "need %u %s%s, %zu qualif%s", req->count,
	        mig ? "MIG device" : "GPU", req->count == 1 ? "" : "s", kept,
	        kept == 1 ? "ies" : "y");
	for (int r = R_LOST; r < R__COUNT; r++) {
		char label[64];
		bool first = true;

		for (size_t i = 0; i < n_dev; i++) {
			if (dev[i].reason != r)
				continue;
			if (first) {
				reason_label(req, (enum reason)r, label, sizeof(label));
				msg_add(msg, sizeof(msg), &len, "%s%s: ", any ? "; " : ": ", label);
				first = false;
				any = true;
			} else {
				msg_add(msg, sizeof(msg), &len, ",");
			}
			/* NVML's MIG index, as "<gpu>:<mig>" strings spell it */
			char name[48];
			gpuctl_device_label(snap, dev[i].gpu, dev[i].mig, name, sizeof(name));
			msg_add(msg, sizeof(msg), &len, "%s", name);
		}
		/* the way out of an allocation the environment set, perhaps long ago in a shell */
		if (r == R_WITHIN && !first)
			msg_add(msg, sizeof(msg), &len, " (ignore_outer chooses among all GPUs)");
	}
	if (mig) {
		msg_add(msg, sizeof(msg), &len, "; MIG profiles on this machine: ");
		select_mig_profiles(snap, msg, sizeof(msg), &len);
	}
	return ctx_error(ctx, -ENOSPC, "%s", msg);
}
