// SPDX-License-Identifier: MIT
/*
 * idle.c: the idle tracker (docs/idle.md): from one sample at a time, which devices sit idle,
 * by which case, and since when.
 *
 * Decisions:
 * - Pure and incremental: each sample's facts (idle_fact) replace the last, and each device
 *   keeps only what the rules need (when each case began, each process's low stretch), so a
 *   sample costs the same after a day as after a minute and a test replays a trace by hand.
 * - A device is its UUID; one missing from a sample or lost is forgotten, and starts afresh
 *   when found again: what happened while it was away cannot be told.
 * - (b) needs a low stretch of samples as long as the window: a sample is low when the
 *   process's SM share, else its device's utilisation, is strictly below the threshold; one
 *   that is not, or unknown, ends the stretch. So a pause shorter than the window never counts,
 *   and one sample never finds (b) (the window is at least 1 s).
 * - Time is the caller's monotonic clock; one that stands still or steps back counts nothing
 *   (the last time is kept), so no duration is ever negative.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "idle-internal.h"
#include "util.h"

/* One process of a device, as the tracker remembers it. */
struct idle_proc {
	uint32_t pid;
	bool low;          /* its last sample was low and it held memory */
	uint64_t low_from; /* when its current low stretch began (valid when low) */
};

/* One device, as the tracker remembers it. */
struct idle_dev {
	char *uuid;                        /* owned */
	uint64_t first_ms;                 /* first sample of this device (since found) */
	uint64_t last_ms;                  /* its last sample */
	bool holds[GPUCTL_IDLE_CASES];     /* each case in the last sample */
	uint64_t since[GPUCTL_IDLE_CASES]; /* when each case began (valid when it holds) */
	const char *cause;                 /* ghost's cause (static text), NULL */
	struct idle_proc *procs;           /* owned */
	size_t n_procs;
};

struct gpuctl_idle {
	struct gpuctl_idle_config cfg;
	uint64_t now_ms; /* the last sample's time (never goes back) */
	bool fed;        /* a sample was fed */
	struct idle_dev *devs;
	size_t n_devs;
};

static const char *const case_names[GPUCTL_IDLE_CASES] = {"lease", "process", "ghost"};

/* Ghost memory's likely causes, by what the process list shows (docs/idle.md). */
static const char CAUSE_GONE[] =
        "the processes NVML lists are not in /proc: exited with memory not yet freed (a zombie, "
        "or the driver still tearing it down), or in a PID namespace this one cannot see";
static const char CAUSE_NONE[] =
        "no compute process listed: a graphics or MIG context, a process NVML does not show "
        "to this caller (another container, no permission), or the driver still freeing "
        "the memory of one that exited";

const char *gpuctl_idle_case_name(enum gpuctl_idle_case c)
{
	return (unsigned)c < GPUCTL_IDLE_CASES ? case_names[c] : NULL;
}

int gpuctl_idle_new(const struct gpuctl_idle_config *cfg, struct gpuctl_idle **ret)
{
	struct gpuctl_idle_config def = GPUCTL_IDLE_CONFIG_INIT;
	struct gpuctl_idle *idle;

	if (!ret)
		return -EINVAL;
	if (cfg) {
		if (cfg->struct_size < sizeof(def) || cfg->window_s == 0 || cfg->threshold < 0 ||
		    cfg->threshold > 100)
			return -EINVAL;
		def.window_s = cfg->window_s;
		def.threshold = cfg->threshold;
		def.ghost_bytes = cfg->ghost_bytes;
	}
	idle = calloc(1, sizeof(*idle));
	if (!idle)
		return -ENOMEM;
	idle->cfg = def;
	*ret = idle;
	return 0;
}

static void devs_free(struct idle_dev *devs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(devs[i].uuid);
		free(devs[i].procs);
	}
	free(devs);
}

void gpuctl_idle_free(struct gpuctl_idle *idle)
{
	if (!idle)
		return;
	devs_free(idle->devs, idle->n_devs);
	free(idle);
}

static const struct idle_dev *dev_find(const struct gpuctl_idle *idle, const char *uuid)
{
	for (size_t i = 0; uuid && i < idle->n_devs; i++)
		if (strcmp(idle->devs[i].uuid, uuid) == 0)
			return &idle->devs[i];
	return NULL;
}

static const struct idle_proc *proc_find(const struct idle_dev *d, uint32_t pid)
{
	for (size_t i = 0; d && i < d->n_procs; i++)
		if (d->procs[i].pid == pid)
			return &d->procs[i];
	return NULL;
}

/* Sets case c of d for this sample: it began at the earlier start when it held before. */
static void set_case(struct idle_dev *d, const struct idle_dev *old, enum gpuctl_idle_case c,
                     bool holds, uint64_t start)
{
	d->holds[c] = holds;
	if (holds)
		d->since[c] = old && old->holds[c] ? old->since[c] : start;
}

/* (b) for the processes of one device; fills d->procs. */
static void judge_procs(const struct gpuctl_idle *idle, struct idle_dev *d,
                        const struct idle_dev *old, const struct idle_fact *f, uint64_t now)
{
	uint64_t win = (uint64_t)idle->cfg.window_s * 1000;
	bool any = false;
	uint64_t from = now;

	for (size_t k = 0; k < f->n_procs; k++) {
		const struct idle_proc_fact *pf = &f->procs[k];
		struct idle_proc *p = &d->procs[d->n_procs++];
		const struct idle_proc *op = proc_find(old, pf->pid);
		int u = pf->sm >= 0 ? pf->sm : f->util;

		p->pid = pf->pid;
		p->low = pf->alive && pf->memory != 0 && u >= 0 && u < idle->cfg.threshold;
		if (!p->low)
			continue;
		p->low_from = op && op->low ? op->low_from : now;
		if (now - p->low_from >= win) {
			any = true;
			from = p->low_from < from ? p->low_from : from;
		}
	}
	d->holds[GPUCTL_IDLE_PROCESS] = any;
	d->since[GPUCTL_IDLE_PROCESS] = from;
}

/* One device of a sample, judged against what the tracker knew of it (old, or NULL). */
static void judge(const struct gpuctl_idle *idle, struct idle_dev *d, const struct idle_dev *old,
                  const struct idle_fact *f, uint64_t now)
{
	size_t alive = 0;

	for (size_t k = 0; k < f->n_procs; k++)
		alive += f->procs[k].alive;
	d->first_ms = old ? old->first_ms : now;
	d->last_ms = now;
	/* (a): since the last sample that had a process, else since first seen */
	set_case(d, old, GPUCTL_IDLE_LEASE, f->leased && alive == 0, old ? old->last_ms : now);
	judge_procs(idle, d, old, f, now);
	/* (c) */
	set_case(d, old, GPUCTL_IDLE_GHOST,
	         alive == 0 && f->memory_used >= 0 &&
	                 (uint64_t)f->memory_used > idle->cfg.ghost_bytes,
	         now);
	d->cause = !d->holds[GPUCTL_IDLE_GHOST] ? NULL : f->n_procs ? CAUSE_GONE : CAUSE_NONE;
}

int idle_feed_facts(struct gpuctl_idle *idle, uint64_t now_ms, const struct idle_fact *facts,
                    size_t n)
{
	struct idle_dev *devs = calloc(n ? n : 1, sizeof(*devs));
	uint64_t now = idle->fed && now_ms < idle->now_ms ? idle->now_ms : now_ms;

	if (!devs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		devs[i].uuid = strdup(facts[i].uuid ? facts[i].uuid : "");
		devs[i].procs =
		        calloc(facts[i].n_procs ? facts[i].n_procs : 1, sizeof(*devs[i].procs));
		if (!devs[i].uuid || !devs[i].procs) {
			devs_free(devs, i + 1);
			return -ENOMEM;
		}
		judge(idle, &devs[i], dev_find(idle, facts[i].uuid), &facts[i], now);
	}
	devs_free(idle->devs, idle->n_devs);
	idle->devs = devs;
	idle->n_devs = n;
	idle->now_ms = now;
	idle->fed = true;
	return 0;
}

int gpuctl_idle_get(const struct gpuctl_idle *idle, const char *uuid, enum gpuctl_idle_case c,
                    uint64_t *ret_ms)
{
	const struct idle_dev *d;

	if (!idle || (unsigned)c >= GPUCTL_IDLE_CASES)
		return -EINVAL;
	d = dev_find(idle, uuid);
	if (!d)
		return -ENOENT;
	if (!d->holds[c])
		return 0;
	if (ret_ms)
		*ret_ms = d->last_ms - d->since[c];
	return 1;
}

const char *gpuctl_idle_ghost_cause(const struct gpuctl_idle *idle, const char *uuid)
{
	const struct idle_dev *d = idle ? dev_find(idle, uuid) : NULL;
	return d ? d->cause : NULL;
}

int gpuctl_idle_proc(const struct gpuctl_idle *idle, const char *uuid, uint32_t pid,
                     uint64_t *ret_ms)
{
	const struct idle_dev *d = idle ? dev_find(idle, uuid) : NULL;
	const struct idle_proc *p = proc_find(d, pid);

	if (!p)
		return -ENOENT;
	if (!p->low || d->last_ms - p->low_from < (uint64_t)idle->cfg.window_s * 1000)
		return 0;
	if (ret_ms)
		*ret_ms = d->last_ms - p->low_from;
	return 1;
}

int gpuctl_idle_watched(const struct gpuctl_idle *idle, const char *uuid, uint64_t *ret_ms)
{
	const struct idle_dev *d = idle ? dev_find(idle, uuid) : NULL;

	if (!d)
		return -ENOENT;
	if (ret_ms)
		*ret_ms = d->last_ms - d->first_ms;
	return 0;
}
