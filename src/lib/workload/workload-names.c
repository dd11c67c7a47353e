/* SPDX-License-Identifier: MIT */
/*
 * workload-names.c: container names out of a runtime's local state files (workload-internal.h;
 * docs/workloads.md, "Names"). The files and keys, each from its runtime's source:
 *
 * - The CRI's annotations on a container's OCI bundle config.json (the OCI runtime spec's
 *   "annotations" object): containerd's CRI plugin writes io.kubernetes.cri.sandbox-name,
 *   io.kubernetes.cri.sandbox-namespace and io.kubernetes.cri.container-name
 *   (containerd, pkg/cri/annotations); CRI-O writes io.kubernetes.pod.name,
 *   io.kubernetes.pod.namespace and io.kubernetes.container.name (CRI-O, pkg/annotations, the
 *   kubelet's well-known labels).
 * - docker's per-container config.v2.json (moby, container/container.go: the "Name" field,
 *   "/" before the name; "Config"."Labels", where the kubelet's dockershim and cri-dockerd put
 *   io.kubernetes.pod.name, .namespace and io.kubernetes.container.name).
 * - containers/storage's containers.json: an array of objects with "id" and "names"
 *   (containers/storage, containers.go, the Container type).
 *
 * jansson reads the JSON (strict, duplicate keys refused); every string is bounded by wl_copy.
 */
#include <jansson.h>
#include <string.h>

#include "util.h"
#include "workload-internal.h"

static json_t *load(const char *json, size_t len)
{
	if (len > WL_FILE_MAX)
		return NULL;
	return json_loadb(json, len, JSON_REJECT_DUPLICATES, NULL);
}

/* Copies the string member key of obj into dst; false when there is none (or it is ""). */
static bool take(json_t *obj, const char *key, char *dst, bool *truncated)
{
	json_t *v = json_object_get(obj, key);
	const char *s = json_string_value(v);

	if (!s || !*s)
		return false;
	if (wl_copy(dst, s, json_string_length(v)))
		*truncated = true;
	return true;
}

/* The CRI's keys in an annotation or label map a. */
static bool from_map(json_t *a, struct wl_names *names)
{
	bool found = false;

	if (json_is_object(a)) {
		if (take(a, "io.kubernetes.cri.sandbox-name", names->name, &names->truncated)) {
			found = true;
			take(a, "io.kubernetes.cri.sandbox-namespace", names->pod_namespace,
			     &names->truncated);
			take(a, "io.kubernetes.cri.container-name", names->container,
			     &names->truncated);
		} else if (take(a, "io.kubernetes.pod.name", names->name, &names->truncated)) {
			found = true;
			take(a, "io.kubernetes.pod.namespace", names->pod_namespace,
			     &names->truncated);
			take(a, "io.kubernetes.container.name", names->container,
			     &names->truncated);
		}
	}
	return found;
}

bool wl_names_oci(const char *json, size_t len, struct wl_names *names)
{
	json_t *root = load(json, len);
	bool found = from_map(json_object_get(root, "annotations"), names);

	json_decref(root);
	return found;
}

bool wl_names_docker_pod(const char *json, size_t len, struct wl_names *names)
{
	json_t *root = load(json, len);
	bool found = from_map(json_object_get(json_object_get(root, "Config"), "Labels"), names);

	json_decref(root);
	return found;
}

bool wl_names_docker(const char *json, size_t len, struct wl_names *names)
{
	json_t *root = load(json, len);
	json_t *v = json_object_get(root, "Name");
	const char *s = json_string_value(v);
	size_t n = json_string_length(v);
	bool found = false;

	if (s && n > 0 && s[0] == '/')
		s++, n--;
	if (s && n > 0 && !memchr(s, '\0', n)) {
		if (wl_copy(names->name, s, n))
			names->truncated = true;
		found = true;
	}
	json_decref(root);
	return found;
}

bool wl_names_storage(const char *json, size_t len, const char *id, struct wl_names *names)
{
	json_t *root = load(json, len), *c;
	size_t i;
	bool found = false;

	json_array_foreach(root, i, c)
	{
		const char *cid = json_string_value(json_object_get(c, "id"));
		json_t *first = json_array_get(json_object_get(c, "names"), 0);
		const char *s = json_string_value(first);

		if (!cid || !streq(cid, id))
			continue;
		if (s && *s) {
			if (wl_copy(names->name, s, json_string_length(first)))
				names->truncated = true;
			found = true;
		}
		break;
	}
	json_decref(root);
	return found;
}
