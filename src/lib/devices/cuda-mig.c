// SPDX-License-Identifier: MIT
/*
 * cuda-mig.c: how many MIG devices one CUDA process uses (gpuctl_cuda_mig_limit,
 * gpuctl_devset_cuda_check). docs/device-strings.md, "MIG devices in one CUDA process".
 *
 * Decisions:
 * - Before R570 (GPUCTL_CUDA_MIG_MULTI_BRANCH) a CUDA process enumerates one MIG device and
 *   nothing beside it; from R570, one compute instance per GPU instance, at most
 *   GPUCTL_CUDA_MIG_MAX [documented]. The branch is the leading number of the snapshot's
 *   driver version; an unknown version counts as before R570 [decision].
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>

#include "ctx.h"
#include "devices-internal.h"

/* The driver branch of snap: the leading number of its driver version ("550.54.15" is 550);
 * 0 when unknown. */
static unsigned driver_branch(const struct gpuctl_snapshot *snap)
{
	const char *v = gpuctl_snapshot_driver_version(snap);
	unsigned b = 0;

	for (; v && *v >= '0' && *v <= '9' && b < 100000; v++)
		b = b * 10 + (unsigned)(*v - '0');
	return b;
}

unsigned gpuctl_cuda_mig_limit(const struct gpuctl_snapshot *snap)
{
	return driver_branch(snap) < GPUCTL_CUDA_MIG_MULTI_BRANCH ? 1 : GPUCTL_CUDA_MIG_MAX;
}

int gpuctl_devset_cuda_check(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                             const struct gpuctl_devset *set)
{
	size_t n, nmig = 0, first_mig = 0;
	const char *ver;
	char a[32], b[32];

	if (!snap || !set)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	n = gpuctl_devset_count(set);
	ver = gpuctl_snapshot_driver_version(snap);
	for (size_t i = 0; i < n; i++) {
		size_t gi;
		int mi;

		(void)gpuctl_devset_get(set, i, &gi, &mi);
		if (mi >= 0 && nmig++ == 0)
			first_mig = i;
	}
	if (nmig == 0)
		return 0;
	if (gpuctl_cuda_mig_limit(snap) == 1) {
		size_t g0;
		int m0;

		if (n == 1)
			return 0;
		(void)gpuctl_devset_get(set, first_mig, &g0, &m0);
		gpuctl_device_label(snap, g0, m0, a, sizeof(a));
		return ctx_error(
		        ctx, -EINVAL,
		        "%zu devices (%zu MIG) for one CUDA process: with driver %s (before "
		        "R570) a CUDA process enumerates only one MIG device, here %s, and "
		        "nothing beside it (MIG user guide, CUDA device enumeration)",
		        n, nmig, ver ? ver : "of unknown version", a);
	}
	if (nmig > gpuctl_cuda_mig_limit(snap))
		return ctx_error(ctx, -EINVAL,
		                 "%zu MIG devices for one CUDA process: CUDA enumerates at most %u "
		                 "(MIG user guide, CUDA device enumeration)",
		                 nmig, GPUCTL_CUDA_MIG_MAX);
	for (size_t i = 0; i < n; i++) {
		int64_t gi_i, gi_j;
		size_t g_i, g_j;
		int m_i, m_j;

		(void)gpuctl_devset_get(set, i, &g_i, &m_i);
		if (m_i < 0 ||
		    gpuctl_mig_int(gpuctl_gpu_mig(gpuctl_snapshot_gpu(snap, g_i), (size_t)m_i),
		                   GPUCTL_MIG_GI, &gi_i) < 0)
			continue;
		for (size_t j = i + 1; j < n; j++) {
			(void)gpuctl_devset_get(set, j, &g_j, &m_j);
			if (m_j < 0 || g_j != g_i ||
			    gpuctl_mig_int(
			            gpuctl_gpu_mig(gpuctl_snapshot_gpu(snap, g_j), (size_t)m_j),
			            GPUCTL_MIG_GI, &gi_j) < 0 ||
			    gi_j != gi_i)
				continue;
			gpuctl_device_label(snap, g_i, m_i, a, sizeof(a));
			gpuctl_device_label(snap, g_j, m_j, b, sizeof(b));
			return ctx_error(
			        ctx, -EINVAL,
			        "MIG devices %s and %s share GPU instance %" PRId64
			        " of GPU %zu: CUDA enumerates one compute instance per GPU "
			        "instance in a process (MIG user guide, CUDA device "
			        "enumeration)",
			        a, b, gi_i, g_i);
		}
	}
	return 0;
}
