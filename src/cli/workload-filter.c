// SPDX-License-Identifier: MIT
/*
 * workload-filter.c: the workload filters of ps and top (--job, --workload) and the JSON
 * object of a workload (docs/json.md "Workloads").
 *
 * Decisions:
 * - --job follows Slurm's own spellings (squeue, sacct): J is a job, and for an array job
 *   every task of it (whose SLURM_ARRAY_JOB_ID is J); J_T one array task; J.S one step of J
 *   (0, 1, ..., batch, extern, interactive: the step_S names of Slurm's cgroup tree).
 * - --workload is [KIND:]PATTERN. KIND (slurm, pod, container, unit, session, bare, unknown)
 *   only when the text before the first ':' is one, so a pattern may hold ':' itself. A
 *   PATTERN with * ? or [ is a shell glob (fnmatch(3), no flags) over the whole label, as a
 *   user writes `--workload 'slurm 42*'`; one without is a text the label, name or id
 *   contains, so a container id's prefix or a unit's name finds it.
 * - Matching is on what the library read, never on a path the caller builds: names hold any
 *   byte, and a glob compares bytes.
 */
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "parse.h"
#include "workload-filter.h"

/* The step names Slurm gives its non-numbered steps (Slurm's cgroup tree: step_batch,
 * step_extern, step_interactive). */
static const char *const step_names[] = {"batch", "extern", "interactive"};

/* Parses a step S into buf: a number as decimal, or one of step_names. 0, or -EINVAL. */
static int parse_step(const char *s, char *buf, size_t size)
{
	unsigned long v;

	for (size_t i = 0; i < sizeof(step_names) / sizeof(step_names[0]); i++)
		if (strcmp(s, step_names[i]) == 0) {
			snprintf(buf, size, "%s", s);
			return 0;
		}
	if (parse_uint(s, 0, UINT32_MAX - 1, &v) < 0 || s[0] < '0' || s[0] > '9')
		return -EINVAL;
	snprintf(buf, size, "%lu", v);
	return 0;
}

/* Parses the decimal number s[0..n) (min to 4294967294; no sign, no blank). 0, or -EINVAL. */
static int parse_id(const char *s, size_t n, unsigned long min, uint32_t *ret)
{
	char buf[16];
	unsigned long v;

	if (n == 0 || n >= sizeof(buf) || s[0] < '0' || s[0] > '9')
		return -EINVAL;
	memcpy(buf, s, n);
	buf[n] = '\0';
	if (parse_uint(buf, min, UINT32_MAX - 1, &v) < 0)
		return -EINVAL;
	*ret = (uint32_t)v;
	return 0;
}

int wl_filter_job(struct wl_filter *f, const char *text)
{
	struct wl_filter g = *f;
	const char *dot = strchr(text, '.');
	size_t head = dot ? (size_t)(dot - text) : strlen(text);
	const char *us = memchr(text, '_', head);

	g.job_set = true;
	g.task_set = us != NULL;
	g.step[0] = '\0';
	if (parse_id(text, us ? (size_t)(us - text) : head, 1, &g.job) < 0)
		return -EINVAL;
	/* an array's tasks count from 0 */
	if (us && parse_id(us + 1, (size_t)(text + head - us - 1), 0, &g.task) < 0)
		return -EINVAL;
	if (dot && parse_step(dot + 1, g.step, sizeof(g.step)) < 0)
		return -EINVAL;
	*f = g;
	return 0;
}

int wl_filter_pattern(struct wl_filter *f, const char *text)
{
	const char *colon = strchr(text, ':');

	if (!text[0])
		return -EINVAL;
	f->kind = -1;
	f->pattern = text;
	for (int k = 0; colon && gpuctl_workload_kind_name((enum gpuctl_workload_kind)k); k++) {
		const char *name = gpuctl_workload_kind_name((enum gpuctl_workload_kind)k);
		if (strlen(name) == (size_t)(colon - text) && !strncmp(text, name, strlen(name))) {
			f->kind = k;
			f->pattern = colon + 1;
			break;
		}
	}
	f->pattern_set = true;
	return 0;
}

bool wl_filter_active(const struct wl_filter *f)
{
	return f->job_set || f->pattern_set;
}

static bool has_glob(const char *p)
{
	return strpbrk(p, "*?[") != NULL;
}

static bool contains(const char *hay, const char *needle)
{
	return hay && strstr(hay, needle);
}

static bool job_match(const struct wl_filter *f, const struct gpuctl_workload *wl)
{
	if (wl->kind != GPUCTL_WORKLOAD_SLURM)
		return false;
	if (f->task_set) {
		if (wl->slurm_array_job != f->job || wl->slurm_array_task != f->task)
			return false;
	} else if (wl->slurm_job != f->job &&
	           (!wl->slurm_array_job || wl->slurm_array_job != f->job)) {
		return false;
	}
	return !f->step[0] || (wl->slurm_step && strcmp(wl->slurm_step, f->step) == 0);
}

bool wl_filter_match(const struct wl_filter *f, const struct gpuctl_workload *wl)
{
	if (!wl_filter_active(f))
		return true;
	if (!wl)
		return false;
	if (f->job_set && !job_match(f, wl))
		return false;
	if (!f->pattern_set)
		return true;
	if (f->kind >= 0 && (int)wl->kind != f->kind)
		return false;
	if (!f->pattern[0])
		return true;
	if (has_glob(f->pattern))
		return fnmatch(f->pattern, wl->label, 0) == 0;
	return contains(wl->label, f->pattern) || contains(wl->name, f->pattern) ||
	       contains(wl->id, f->pattern);
}

/* A uint32 field, null when it holds its "unknown" value. */
static json_t *u32_or_null(uint32_t v, uint32_t unknown)
{
	return v == unknown ? json_null() : json_integer(v);
}

json_t *wl_json(const struct gpuctl_workload *wl)
{
	if (!wl)
		return json_null();
	bool slurm = wl->kind == GPUCTL_WORKLOAD_SLURM, array = slurm && wl->slurm_array_job;
	bool unit = wl->kind == GPUCTL_WORKLOAD_UNIT || wl->kind == GPUCTL_WORKLOAD_SESSION;
	json_t *o = json_object();

	if (!o || json_put(o, "kind", json_text(gpuctl_workload_kind_name(wl->kind))) < 0 ||
	    json_put(o, "pid", json_integer(wl->pid)) < 0 ||
	    json_put(o, "ns_pid", u32_or_null(wl->ns_pid, 0)) < 0 ||
	    json_put(o, "uid", u32_or_null(wl->uid, UINT32_MAX)) < 0 ||
	    json_put(o, "cgroup", json_string_or_null(wl->cgroup)) < 0 ||
	    json_put(o, "runtime", json_string_or_null(wl->runtime)) < 0 ||
	    json_put(o, "id", json_string_or_null(wl->id)) < 0 ||
	    json_put(o, "name", json_string_or_null(wl->name)) < 0 ||
	    json_put(o, "pod_namespace", json_string_or_null(wl->pod_namespace)) < 0 ||
	    json_put(o, "pod_uid", json_string_or_null(wl->pod_uid)) < 0 ||
	    json_put(o, "container", json_string_or_null(wl->container)) < 0 ||
	    json_put(o, "slurm_job", slurm ? json_integer(wl->slurm_job) : json_null()) < 0 ||
	    json_put(o, "slurm_step", json_string_or_null(slurm ? wl->slurm_step : NULL)) < 0 ||
	    json_put(o, "slurm_array_job",
	             array ? json_integer(wl->slurm_array_job) : json_null()) < 0 ||
	    json_put(o, "slurm_array_task",
	             array ? json_integer(wl->slurm_array_task) : json_null()) < 0 ||
	    json_put(o, "unit_uid", unit ? u32_or_null(wl->unit_uid, UINT32_MAX) : json_null()) <
	            0 ||
	    json_put(o, "label", json_text(wl->label ? wl->label : "?")) < 0 ||
	    json_put(o, "truncated", json_boolean(wl->truncated)) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}
