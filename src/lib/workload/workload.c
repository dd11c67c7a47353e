/* SPDX-License-Identifier: MIT */
/*
 * workload.c: the cache of workloads by (PID, start time) (gpuctl/workload.h;
 * docs/workloads.md, "The cache").
 *
 * Decisions:
 * - An open-addressing hash table of entry pointers keyed by PID (a PID has one entry at a
 *   time), at most half full: a lookup of a known process reads no file and costs one probe
 *   or two, for any number of processes. Entries are allocated one by one, so the pointers
 *   handed out stay put while the table grows.
 * - An entry replaced before the next sweep (its PID was reused: another start time) is kept on
 *   a list until that sweep, since its pointer was handed out "valid until the next sweep".
 * - Each entry holds its strings in arrays of its own (a few kB): no allocation per string.
 * - /proc/PID is opened once as a directory and every file read through it, so the files read
 *   are those of one process even if the PID is reused meanwhile (the kernel answers ESRCH).
 * - The state root ($GPUCTL_WORKLOAD_ROOT) is read once, when the cache is made.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctx.h"
#include "fileio.h"
#include "util.h"
#include "workload-internal.h"

struct wl_entry {
	struct gpuctl_workload wl;
	uint64_t start;
	bool asked; /* asked for since the previous sweep */
	struct wl_class cls;
	struct wl_names names;
	char label[WL_LABEL_MAX + 1];
};

struct gpuctl_workloads {
	struct wl_entry **slots; /* cap slots, NULL: free */
	size_t cap, n;
	struct wl_entry **retired; /* replaced since the previous sweep */
	size_t n_retired, cap_retired;
	char *root; /* the state root */
	uint64_t files;
};

static const char *const kind_names[] = {
        [GPUCTL_WORKLOAD_UNKNOWN] = "unknown",     [GPUCTL_WORKLOAD_BARE] = "bare",
        [GPUCTL_WORKLOAD_SLURM] = "slurm",         [GPUCTL_WORKLOAD_POD] = "pod",
        [GPUCTL_WORKLOAD_CONTAINER] = "container", [GPUCTL_WORKLOAD_UNIT] = "unit",
        [GPUCTL_WORKLOAD_SESSION] = "session",
};

const char *gpuctl_workload_kind_name(enum gpuctl_workload_kind kind)
{
	if ((unsigned)kind >= ELEMENTSOF(kind_names))
		return NULL;
	return kind_names[kind];
}

int gpuctl_workloads_new(struct gpuctl_ctx *ctx, struct gpuctl_workloads **ret_wls)
{
	struct gpuctl_workloads *wls = calloc(1, sizeof(*wls));
	const char *root = getenv("GPUCTL_WORKLOAD_ROOT");

	if (!wls)
		return ctx_error(ctx, -ENOMEM, "workloads: out of memory");
	wls->root = strdup(root && *root ? root : "/");
	wls->cap = 64;
	wls->slots = calloc(wls->cap, sizeof(*wls->slots));
	if (!wls->root || !wls->slots) {
		gpuctl_workloads_free(wls);
		return ctx_error(ctx, -ENOMEM, "workloads: out of memory");
	}
	*ret_wls = wls;
	return 0;
}

static void free_retired(struct gpuctl_workloads *wls)
{
	for (size_t i = 0; i < wls->n_retired; i++)
		free(wls->retired[i]);
	wls->n_retired = 0;
}

void gpuctl_workloads_free(struct gpuctl_workloads *wls)
{
	if (!wls)
		return;
	for (size_t i = 0; wls->slots && i < wls->cap; i++)
		free(wls->slots[i]);
	free_retired(wls);
	free(wls->retired);
	free(wls->slots);
	free(wls->root);
	free(wls);
}

static size_t slot_of(const struct gpuctl_workloads *wls, uint32_t pid)
{
	/* Knuth's multiplicative hash; cap is a power of two */
	size_t i = (size_t)((pid * 2654435761u) & (wls->cap - 1));

	while (wls->slots[i] && wls->slots[i]->wl.pid != pid)
		i = (i + 1) & (wls->cap - 1);
	return i;
}

/* Puts every entry of old[old_cap] into a fresh table of cap slots (entries that keep is false
 * for are freed). */
static int rebuild(struct gpuctl_workloads *wls, size_t cap, bool sweeping, size_t *forgot)
{
	struct wl_entry **old = wls->slots;
	size_t old_cap = wls->cap;
	struct wl_entry **slots = calloc(cap, sizeof(*slots));

	if (!slots)
		return -ENOMEM;
	wls->slots = slots;
	wls->cap = cap;
	wls->n = 0;
	for (size_t i = 0; i < old_cap; i++) {
		struct wl_entry *e = old[i];

		if (!e)
			continue;
		if (sweeping && !e->asked) {
			free(e);
			(*forgot)++;
			continue;
		}
		if (sweeping)
			e->asked = false;
		slots[slot_of(wls, e->wl.pid)] = e;
		wls->n++;
	}
	free(old);
	return 0;
}

size_t gpuctl_workloads_sweep(struct gpuctl_workloads *wls)
{
	size_t forgot = 0;

	if (!wls)
		return 0;
	free_retired(wls);
	if (rebuild(wls, wls->cap, true, &forgot) < 0) {
		/* out of memory: forget in place by marking instead (nothing freed this time) */
		for (size_t i = 0; i < wls->cap; i++)
			if (wls->slots[i])
				wls->slots[i]->asked = false;
	}
	return forgot;
}

uint64_t gpuctl_workloads_files_read(const struct gpuctl_workloads *wls)
{
	return wls ? wls->files : 0;
}

/* Reads name of the directory fd whole (a /proc file: its size is 0 in stat). */
static int read_proc(struct gpuctl_workloads *wls, int dirfd, const char *name, char **ret,
                     size_t *ret_len)
{
	_cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return -errno;
	wls->files++;
	return fd_read_all(fd, WL_FILE_MAX, ret, ret_len);
}

static const char *str_or_null(const char *s)
{
	return s && *s ? s : NULL;
}

/* Reads what /proc and the state say of process pid into e (kind UNKNOWN when it cannot). */
static void resolve(struct gpuctl_workloads *wls, struct wl_entry *e, uint32_t pid,
                    uint64_t start_ticks)
{
	struct gpuctl_workload *wl = &e->wl;
	_cleanup_close_ int dirfd = -1;
	_cleanup_free_ char *stat = NULL, *cg = NULL, *status = NULL, *env = NULL;
	char path[32];
	size_t len;
	uint64_t start = 0;
	const char *runtime;

	wl->pid = pid;
	wl->uid = UINT32_MAX;
	wl->unit_uid = UINT32_MAX;
	wl->kind = GPUCTL_WORKLOAD_UNKNOWN;
	e->start = start_ticks;
	snprintf(path, sizeof(path), "/proc/%u", pid);
	dirfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return;
	if (read_proc(wls, dirfd, "stat", &stat, &len) < 0 ||
	    wl_parse_stat_start(stat, len, &start) < 0 || (start_ticks && start != start_ticks))
		return; /* gone, or the PID is another process's now */
	e->start = start;
	if (read_proc(wls, dirfd, "cgroup", &cg, &len) < 0 || wl_parse_cgroup(cg, len, &e->cls) < 0)
		return;
	if (read_proc(wls, dirfd, "status", &status, &len) == 0)
		wl_parse_status(status, len, &wl->ns_pid, &wl->uid);
	if (e->cls.kind == GPUCTL_WORKLOAD_SLURM &&
	    read_proc(wls, dirfd, "environ", &env, &len) == 0)
		wl_parse_environ(env, len, e->cls.slurm_job, &wl->slurm_array_job,
		                 &wl->slurm_array_task);
	runtime = e->cls.runtime;
	wl_state_names(wls->root, &e->cls, &e->names, &runtime, &wls->files);

	wl->kind = e->cls.kind;
	wl->cgroup = str_or_null(e->cls.cgroup);
	wl->runtime = runtime;
	wl->id = str_or_null(e->cls.id);
	wl->pod_uid = str_or_null(e->cls.pod_uid);
	wl->slurm_job = e->cls.slurm_job;
	wl->slurm_step = str_or_null(e->cls.slurm_step);
	wl->unit_uid = e->cls.unit_uid;
	wl->pod_namespace = str_or_null(e->names.pod_namespace);
	wl->container = str_or_null(e->names.container);
	if (wl->kind == GPUCTL_WORKLOAD_UNIT || wl->kind == GPUCTL_WORKLOAD_SESSION)
		wl->name = str_or_null(e->cls.name);
	else
		wl->name = str_or_null(e->names.name);
	wl->truncated = e->cls.truncated || e->names.truncated;
}

static int retire(struct gpuctl_workloads *wls, struct wl_entry *e)
{
	if (wls->n_retired == wls->cap_retired) {
		size_t cap = wls->cap_retired ? 2 * wls->cap_retired : 8;
		struct wl_entry **r = realloc(wls->retired, cap * sizeof(*r));

		if (!r)
			return -ENOMEM;
		wls->retired = r;
		wls->cap_retired = cap;
	}
	wls->retired[wls->n_retired++] = e;
	return 0;
}

int gpuctl_workloads_get(struct gpuctl_ctx *ctx, struct gpuctl_workloads *wls, uint32_t pid,
                         uint64_t start_ticks, const struct gpuctl_workload **ret_wl)
{
	struct wl_entry *e, *old;
	size_t i, forgot = 0;

	if (!wls || pid == 0)
		return ctx_error(ctx, -EINVAL, "workloads: no process 0");
	i = slot_of(wls, pid);
	old = wls->slots[i];
	if (old && (start_ticks == 0 || start_ticks == old->start)) {
		old->asked = true;
		*ret_wl = &old->wl;
		return 0;
	}
	if (!old && 2 * (wls->n + 1) > wls->cap) {
		if (rebuild(wls, 2 * wls->cap, false, &forgot) < 0)
			return ctx_error(ctx, -ENOMEM, "workloads: out of memory");
		i = slot_of(wls, pid);
	}
	e = calloc(1, sizeof(*e));
	if (!e || (old && retire(wls, old) < 0)) {
		free(e);
		return ctx_error(ctx, -ENOMEM, "workloads: out of memory");
	}
	resolve(wls, e, pid, start_ticks);
	wl_label(&e->wl, e->label);
	e->wl.label = e->label;
	e->asked = true;
	if (!old)
		wls->n++;
	wls->slots[i] = e;
	*ret_wl = &e->wl;
	return 0;
}
