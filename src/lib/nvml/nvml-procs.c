// SPDX-License-Identifier: MIT
/*
 * nvml-procs.c: the compute processes of a GPU (or of its MIG devices), their engine shares,
 * and what /proc says of each (owner, command: proc_identity).
 *
 * Decisions:
 * - Processes are read into a buffer large enough for the usual case, so the sizing call
 *   happens only when it is too small.
 * - The owner is the uid of /proc/PID and its passwd name (nss.h), else the number; the
 *   command is argv[0]'s base name, else /proc/PID/comm. A process /proc does not show us
 *   (another PID namespace, hidepid) keeps its PID and memory only.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nss.h"
#include "nvml-abi.h"
#include "nvml-internal.h"
#include "snapshot-internal.h"
#include "util.h"

/* Owner and command of a process, from /proc; NULLs when it is not visible to us. */
static void proc_identity(struct gpuctl_proc *p, char **ret_user, char **ret_cmd)
{
	char path[64], buf[4096];
	struct stat st;
	ssize_t n;

	*ret_user = NULL;
	*ret_cmd = NULL;
	(void)snprintf(path, sizeof(path), "/proc/%u", p->pid);
	if (p->pid == 0 || stat(path, &st) < 0)
		return;
	p->uid = st.st_uid;
	p->has_uid = true;

	*ret_user = nss_user_name(st.st_uid);
	if (!*ret_user) {
		(void)snprintf(path, sizeof(path), "%u", (unsigned)st.st_uid);
		*ret_user = strdup(path);
	}

	(void)snprintf(path, sizeof(path), "/proc/%u/cmdline", p->pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		if (n > 0) {
			buf[n] = '\0'; /* argv[0] ends at the first NUL */
			const char *slash = strrchr(buf, '/');
			const char *base = slash ? slash + 1 : buf;
			if (base[0]) {
				*ret_cmd = strdup(base);
				return;
			}
		}
	}
	(void)snprintf(path, sizeof(path), "/proc/%u/comm", p->pid);
	_cleanup_close_ int cfd = open(path, O_RDONLY | O_CLOEXEC);
	if (cfd < 0)
		return;
	n = read(cfd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (buf[0])
		*ret_cmd = strdup(buf);
}

static void add_proc(struct reader *rd, size_t i, uint32_t pid, unsigned long long mem, uint32_t gi,
                     uint32_t ci)
{
	struct gpuctl_proc *p = snapshot_add_proc(rd->snap, i, pid);
	char *user, *cmd;

	if (!p) {
		rd->oom = -ENOMEM;
		return;
	}
	if (mem != NVML_VALUE_NOT_AVAILABLE_ULL) {
		p->used_memory = (int64_t)mem;
		p->has_memory = true;
	}
	if (gi != NVML_INVALID_INSTANCE_ID && ci != NVML_INVALID_INSTANCE_ID) {
		p->gi = gi;
		p->ci = ci;
		p->has_mig = true;
	}
	if (rd->flags & GPUCTL_SNAP_NO_PROC_IDENTITY)
		return;
	proc_identity(p, &user, &cmd);
	if (proc_set_strs(p, user, cmd) < 0)
		rd->oom = -ENOMEM;
	free(user);
	free(cmd);
}

#define PROCS_FIRST_TRY 64 /* entries asked for first: more than any GPU usually runs */
#define PROCS_TRIES     4  /* the list can grow between calls */

static const char *proc_fn_name(const struct reader *rd)
{
	return rd->nv->sym.procs_v2 ? rd->nv->name.procs_v2 : rd->nv->name.procs_v1;
}

/* Adds the compute processes NVML lists for handle dev (GPU i's, or one of its MIG devices')
 * to GPU i; the last call's result, for the caller to judge (nothing is logged here). */
static nvmlReturn_t list_processes(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	unsigned cap = PROCS_FIRST_TRY;
	nvmlReturn_t r = NVML_ERROR_UNKNOWN;

	for (int t = 0; t < PROCS_TRIES; t++) {
		unsigned count = cap;

		if (rd->nv->sym.procs_v2) {
			/* Entries are 24 or 32 bytes depending on the driver branch; the first
			 * 24 bytes always have the v2 layout. */
			size_t stride = rd->nv->procs_stride;
			_cleanup_free_ unsigned char *buf = calloc(cap, stride);
			if (!buf) {
				rd->oom = -ENOMEM;
				return NVML_ERROR_MEMORY;
			}
			r = RAW(rd, i, procs_v2, dev, &count, (nvmlProcessInfo_v2_t *)(void *)buf);
			if (r == NVML_SUCCESS) {
				for (unsigned k = 0; k < count && k < cap; k++) {
					nvmlProcessInfo_v2_t e;
					memcpy(&e, buf + (size_t)k * stride, sizeof(e));
					add_proc(rd, i, e.pid, e.usedGpuMemory, e.gpuInstanceId,
					         e.computeInstanceId);
				}
				return r;
			}
		} else {
			_cleanup_free_ nvmlProcessInfo_v1_t *v = calloc(cap, sizeof(*v));
			if (!v) {
				rd->oom = -ENOMEM;
				return NVML_ERROR_MEMORY;
			}
			r = RAW(rd, i, procs_v1, dev, &count, v);
			if (r == NVML_SUCCESS) {
				for (unsigned k = 0; k < count && k < cap; k++)
					add_proc(rd, i, v[k].pid, v[k].usedGpuMemory,
					         NVML_INVALID_INSTANCE_ID,
					         NVML_INVALID_INSTANCE_ID);
				return r;
			}
		}
		if (r != NVML_ERROR_INSUFFICIENT_SIZE)
			return r;
		cap = (count > cap ? count : cap * 2) + 16;
	}
	return r;
}

/* GPU i's processes read MIG device by MIG device (each entry carries its instance ids);
 * false when the GPU has no MIG device to ask. */
static bool list_mig_processes(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	unsigned max = 0;
	bool asked = false;

	if (!rd->nv->sym.max_mig_count || !rd->nv->sym.mig_handle ||
	    !CALL(rd, i, max_mig_count, dev, &max))
		return false;
	for (unsigned k = 0; k < max && nvml_gpu_readable(rd, i); k++) {
		nvmlDevice_t mdev = NULL;
		nvmlReturn_t r = RAW(rd, i, mig_handle, dev, k, &mdev);

		if (r == NVML_ERROR_NOT_FOUND || r == NVML_ERROR_INVALID_ARGUMENT)
			continue; /* an empty slot */
		if (!nvml_check_result(rd, i, rd->nv->name.mig_handle, r, false))
			continue;
		asked = true;
		r = list_processes(rd, i, mdev);
		if (r != NVML_SUCCESS)
			(void)nvml_check_result(rd, i, proc_fn_name(rd), r, false);
	}
	return asked;
}

/* nvml.h: on a MIG-enabled GPU the GPU handle's list aggregates its MIG devices' processes
 * only for callers with the privileges to see them all; a MIG device handle's own list needs
 * none. So a caller that is not root asks MIG device by MIG device there, and so does anyone
 * the driver refuses (NO_PERMISSION) on the GPU handle. */
void nvml_read_processes(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	bool mig = nvml_field_is(&rd->snap->gpus[i], GPUCTL_F_MIG_MODE, 1);
	nvmlReturn_t r;

	if (!nvml_gpu_readable(rd, i))
		return;
	if (!rd->nv->sym.procs_v2 && !rd->nv->sym.procs_v1) {
		nvml_symbol_missing(rd, rd->nv->name.procs_v2);
		return;
	}
	if (mig && geteuid() != 0 && list_mig_processes(rd, i, dev))
		return;
	r = list_processes(rd, i, dev);
	if (r == NVML_ERROR_NO_PERMISSION && list_mig_processes(rd, i, dev))
		return;
	if (r != NVML_SUCCESS)
		(void)nvml_check_result(rd, i, proc_fn_name(rd), r, false);
}

static int percent(unsigned v)
{
	return v > 100 ? 100 : (int)v;
}

/* Engine shares of the processes just listed: the driver keeps a buffer of samples, several
 * per process; the newest of each PID is taken. NOT_FOUND (no sample yet) leaves them unknown. */
void nvml_read_process_util(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	struct gpuctl_gpu *g = &rd->snap->gpus[i];
	unsigned cap = PROCS_FIRST_TRY;

	if (g->n_procs == 0 || !nvml_gpu_readable(rd, i))
		return;
	if (!rd->nv->sym.process_util) {
		nvml_symbol_missing(rd, rd->nv->name.process_util);
		return;
	}
	for (int t = 0; t < PROCS_TRIES; t++) {
		_cleanup_free_ nvmlProcessUtilizationSample_t *v = calloc(cap, sizeof(*v));
		unsigned count = cap;
		nvmlReturn_t r;

		if (!v) {
			rd->oom = -ENOMEM;
			return;
		}
		r = RAW(rd, i, process_util, dev, v, &count, 0);
		if (r == NVML_SUCCESS) {
			for (size_t p = 0; p < g->n_procs; p++) {
				struct gpuctl_proc *pr = &g->procs[p];
				unsigned long long newest = 0;

				for (unsigned k = 0; k < count && k < cap; k++) {
					if (v[k].pid != pr->pid ||
					    (pr->has_util && v[k].timeStamp < newest))
						continue;
					newest = v[k].timeStamp;
					pr->util[GPUCTL_PROC_SM] = percent(v[k].smUtil);
					pr->util[GPUCTL_PROC_MEM] = percent(v[k].memUtil);
					pr->util[GPUCTL_PROC_ENC] = percent(v[k].encUtil);
					pr->util[GPUCTL_PROC_DEC] = percent(v[k].decUtil);
					pr->has_util = true;
				}
			}
			return;
		}
		if (r != NVML_ERROR_INSUFFICIENT_SIZE) {
			nvml_check_result(rd, i, rd->nv->name.process_util, r, false);
			return;
		}
		cap = (count > cap ? count : cap * 2) + 16;
	}
}
