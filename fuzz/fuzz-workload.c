// SPDX-License-Identifier: MIT
/*
 * fuzz-workload.c: libFuzzer target for the workload readers (src/lib/workload/: the
 * /proc/PID/cgroup classifier, the status, environ and stat readers, the runtimes' JSON name
 * files, the label).
 *
 * The first byte chooses the reader, the rest is its text (not NUL-terminated: every reader
 * must stop at the length): 0 /proc/PID/cgroup, 1 status, 2 environ, 3 stat, 4 an OCI bundle's
 * config.json, 5 docker's config.v2.json, 6 containers.json, 7 one cgroup path. Properties
 * checked beyond "no crash, no leak": every string kept is terminated and at most
 * GPUCTL_WORKLOAD_NAME_MAX bytes, a kind is one of the documented ones, an id is hex but for
 * LXC's, and the label is at most 3 names long and never empty.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "workload-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_str(const char *s)
{
	if (!memchr(s, '\0', WL_STR) || strlen(s) > GPUCTL_WORKLOAD_NAME_MAX)
		abort();
}

static void check_class(const struct wl_class *c)
{
	struct gpuctl_workload wl = {0};
	char label[WL_LABEL_MAX + 1];

	if (c->kind < GPUCTL_WORKLOAD_BARE || c->kind > GPUCTL_WORKLOAD_SESSION)
		abort();
	check_str(c->id);
	check_str(c->pod_uid);
	check_str(c->name);
	check_str(c->slurm_step);
	check_str(c->cgroup);
	if (c->id[0] && !(c->runtime && !strcmp(c->runtime, "lxc")) &&
	    !wl_is_hex_id(c->id, strlen(c->id)))
		abort();
	wl.kind = c->kind;
	wl.runtime = c->runtime;
	wl.id = c->id[0] ? c->id : NULL;
	wl.pod_uid = c->pod_uid[0] ? c->pod_uid : NULL;
	wl.name = c->name[0] ? c->name : NULL;
	wl.slurm_step = c->slurm_step[0] ? c->slurm_step : NULL;
	wl.slurm_job = c->slurm_job;
	wl.unit_uid = c->unit_uid;
	wl_label(&wl, label);
	if (!label[0] || strlen(label) > WL_LABEL_MAX)
		abort();
}

static void check_names(const struct wl_names *n)
{
	check_str(n->name);
	check_str(n->pod_namespace);
	check_str(n->container);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data + 1;
	size_t len = size ? size - 1 : 0;
	struct wl_class c;
	struct wl_names n;
	uint32_t a = 0, b = 0;
	uint64_t s;

	if (size == 0)
		return 0;
	memset(&n, 0, sizeof(n));
	switch (data[0] % 8) {
	case 0:
		if (wl_parse_cgroup(text, len, &c) == 0)
			check_class(&c);
		break;
	case 1:
		wl_parse_status(text, len, &a, &b);
		break;
	case 2:
		if (wl_parse_environ(text, len, 4242, &a, &b) && a == 0)
			abort();
		break;
	case 3:
		wl_parse_stat_start(text, len, &s);
		break;
	case 4:
		wl_names_oci(text, len, &n);
		check_names(&n);
		break;
	case 5:
		wl_names_docker(text, len, &n);
		wl_names_docker_pod(text, len, &n);
		check_names(&n);
		break;
	case 6:
		wl_names_storage(text, len, "0123456789abcdef0123456789abcdef", &n);
		check_names(&n);
		break;
	default:
		wl_classify_path(text, len, &c);
		check_class(&c);
		break;
	}
	return 0;
}
