/* SPDX-License-Identifier: MIT */
/*
 * workload-proc.c: the pure readers of /proc/PID/status, /proc/PID/environ and /proc/PID/stat
 * (proc(5)), and the label (workload-internal.h; docs/workloads.md, "Labels").
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "parse.h"
#include "util.h"
#include "workload-internal.h"

/* The tab- or blank-separated fields of a status line's value: the first (first) or the last. */
static bool status_field(const char *v, size_t n, bool first, uint32_t *ret)
{
	size_t i = 0, s = 0, e = 0;
	bool any = false;

	while (i < n) {
		while (i < n && (v[i] == '\t' || v[i] == ' '))
			i++;
		if (i == n)
			break;
		s = i;
		while (i < n && v[i] != '\t' && v[i] != ' ')
			i++;
		e = i;
		any = true;
		if (first)
			break;
	}
	return any && parse_dec_u32(v + s, e - s, ret);
}

void wl_parse_status(const char *text, size_t len, uint32_t *ns_pid, uint32_t *uid)
{
	for (size_t i = 0; i < len;) {
		const char *l = text + i, *nl = memchr(l, '\n', len - i);
		size_t ln = nl ? (size_t)(nl - l) : len - i;
		uint32_t v;

		i += ln + 1;
		if (ln > 6 && memcmp(l, "NSpid:", 6) == 0 && status_field(l + 6, ln - 6, false, &v))
			*ns_pid = v;
		else if (ln > 4 && memcmp(l, "Uid:", 4) == 0 &&
		         status_field(l + 4, ln - 4, true, &v))
			*uid = v;
	}
}

/* The value of the first NAME=... of environ text, or NULL. */
static const char *env_get(const char *text, size_t len, const char *name, size_t *ret_n)
{
	size_t nn = strlen(name);

	for (size_t i = 0; i < len;) {
		const char *e = text + i, *z = memchr(e, '\0', len - i);
		size_t en = z ? (size_t)(z - e) : len - i;

		i += en + 1;
		if (en > nn && memcmp(e, name, nn) == 0 && e[nn] == '=') {
			*ret_n = en - nn - 1;
			return e + nn + 1;
		}
	}
	return NULL;
}

bool wl_parse_environ(const char *text, size_t len, uint32_t job, uint32_t *ret_array_job,
                      uint32_t *ret_array_task)
{
	const char *v;
	size_t n;
	uint32_t j, aj, at;

	v = env_get(text, len, "SLURM_JOB_ID", &n);
	if (!v || !parse_dec_u32(v, n, &j) || j != job)
		return false;
	v = env_get(text, len, "SLURM_ARRAY_JOB_ID", &n);
	if (!v || !parse_dec_u32(v, n, &aj) || aj == 0)
		return false;
	v = env_get(text, len, "SLURM_ARRAY_TASK_ID", &n);
	if (!v || !parse_dec_u32(v, n, &at))
		return false;
	*ret_array_job = aj;
	*ret_array_task = at;
	return true;
}

int wl_parse_stat_start(const char *text, size_t len, uint64_t *ret_start)
{
	const char *p = NULL;
	size_t field = 2, i;

	/* "PID (COMM) STATE ...": COMM may hold anything, ')' included: the last ')' ends it */
	for (i = len; i-- > 0;)
		if (text[i] == ')') {
			p = text + i + 1;
			break;
		}
	if (!p)
		return -EINVAL;
	for (i = (size_t)(p - text); i < len;) {
		size_t s;

		if (text[i] != ' ')
			return -EINVAL;
		s = ++i;
		while (i < len && text[i] != ' ' && text[i] != '\n')
			i++;
		if (++field == 22)
			return parse_dec(text + s, i - s, UINT64_MAX, ret_start) ? 0 : -EINVAL;
		if (i < len && text[i] == '\n')
			break;
	}
	return -EINVAL;
}

/* ---- labels ---- */

/* Appends s (or its first max bytes) to buf at *at, within WL_LABEL_MAX. */
static void put(char *buf, size_t *at, const char *s, size_t max)
{
	size_t n = strnlen(s, max);

	if (n > WL_LABEL_MAX - *at) { /* cut at a UTF-8 boundary */
		n = WL_LABEL_MAX - *at;
		for (size_t k = 0; k < 3 && n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80; k++)
			n--;
	}
	memcpy(buf + *at, s, n);
	*at += n;
	buf[*at] = '\0';
}

static void put_num(char *buf, size_t *at, uint32_t v)
{
	char num[16];

	snprintf(num, sizeof(num), "%u", v);
	put(buf, at, num, sizeof(num));
}

static void label_pod(const struct gpuctl_workload *wl, char *buf, size_t *at)
{
	put(buf, at, "pod ", 4);
	if (wl->pod_namespace) {
		put(buf, at, wl->pod_namespace, WL_LABEL_MAX);
		put(buf, at, "/", 1);
	}
	if (wl->name)
		put(buf, at, wl->name, WL_LABEL_MAX);
	else
		put(buf, at, wl->pod_uid ? wl->pod_uid : "?", 8);
	if (wl->container || wl->id) {
		put(buf, at, "/", 1);
		put(buf, at, wl->container ? wl->container : wl->id,
		    wl->container ? WL_LABEL_MAX : 12);
	}
}

void wl_label(const struct gpuctl_workload *wl, char *buf)
{
	size_t at = 0;

	buf[0] = '\0';
	switch (wl->kind) {
	case GPUCTL_WORKLOAD_SLURM:
		put(buf, &at, "slurm ", 6);
		if (wl->slurm_array_job) {
			put_num(buf, &at, wl->slurm_array_job);
			put(buf, &at, "_", 1);
			put_num(buf, &at, wl->slurm_array_task);
		} else {
			put_num(buf, &at, wl->slurm_job);
		}
		if (wl->slurm_step) {
			put(buf, &at, ".", 1);
			put(buf, &at, wl->slurm_step, WL_LABEL_MAX);
		}
		break;
	case GPUCTL_WORKLOAD_POD:
		label_pod(wl, buf, &at);
		break;
	case GPUCTL_WORKLOAD_CONTAINER:
		put(buf, &at, wl->runtime ? wl->runtime : "container", WL_LABEL_MAX);
		put(buf, &at, " ", 1);
		if (wl->name)
			put(buf, &at, wl->name, WL_LABEL_MAX);
		else if (wl->id)
			put(buf, &at, wl->id, streq(wl->runtime, "lxc") ? WL_LABEL_MAX : 12);
		break;
	case GPUCTL_WORKLOAD_UNIT:
		put(buf, &at, "unit ", 5);
		put(buf, &at, wl->name ? wl->name : "?", WL_LABEL_MAX);
		if (wl->unit_uid != UINT32_MAX) {
			put(buf, &at, "@", 1);
			put_num(buf, &at, wl->unit_uid);
		}
		break;
	case GPUCTL_WORKLOAD_SESSION: {
		/* "session-3.scope" is shown as "session 3" */
		const char *n = wl->name ? wl->name : "?";
		size_t len = strlen(n);

		put(buf, &at, "session ", 8);
		if (len > 14 && memcmp(n, "session-", 8) == 0 && streq(n + len - 6, ".scope"))
			put(buf, &at, n + 8, len - 14);
		else
			put(buf, &at, n, WL_LABEL_MAX);
		break;
	}
	case GPUCTL_WORKLOAD_BARE:
		put(buf, &at, "bare", 4);
		break;
	default:
		put(buf, &at, "?", 1);
		break;
	}
	/* a cut inside a UTF-8 sequence is taken back to its lead byte */
	if (at == WL_LABEL_MAX)
		for (size_t k = 0; k < 3 && at > 0 && ((unsigned char)buf[at] & 0xc0) == 0x80; k++)
			buf[--at] = '\0';
}
