/* SPDX-License-Identifier: MIT */
/*
 * workload-internal.h: the pure side of src/lib/workload/ (docs/workloads.md): what a process's
 * /proc/PID/cgroup, /proc/PID/status, /proc/PID/environ and /proc/PID/stat say, the names in a
 * container runtime's state files, and the label. Text in, facts out: no I/O, no globals, so
 * tests/unit/test-workload.c and fuzz/fuzz-workload.c drive them from text. workload-state.c
 * reads the files under the state root; workload.c is the cache.
 *
 * Decisions:
 * - Every string kept is bounded to GPUCTL_WORKLOAD_NAME_MAX bytes, cut at a UTF-8 boundary
 *   (wl_copy); it may hold any other byte: consumers escape.
 * - A path is classified by its components wherever they stand (a cgroup namespace or a nesting
 *   runtime adds components before them); the most specific kind wins.
 * - A hex id (docker, podman, containerd, CRI-O, Kubernetes cgroupfs) is lower-case hex of 12 to
 *   64 characters; anything else is not that runtime's container.
 */
#ifndef GPUCTL_WORKLOAD_INTERNAL_H
#define GPUCTL_WORKLOAD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuctl/workload.h"

/* The largest file read: /proc files and state files above it are skipped (-EFBIG). */
#define WL_FILE_MAX (1024 * 1024)
/* The longest label: three names and their separators, cut at a UTF-8 boundary. */
#define WL_LABEL_MAX (3 * GPUCTL_WORKLOAD_NAME_MAX)
#define WL_STR       (GPUCTL_WORKLOAD_NAME_MAX + 1)

/* What one cgroup path (or a whole /proc/PID/cgroup) says. Static strings (runtime) or owned
 * arrays: a plain value, copied freely. */
struct wl_class {
	enum gpuctl_workload_kind kind; /* BARE when nothing matched */
	const char *runtime;            /* static: "docker", "podman", ...; NULL if unknown */
	char id[WL_STR];                /* container id (LXC: its name); "" when none */
	char pod_uid[WL_STR];           /* POD: with dashes */
	char name[WL_STR];              /* UNIT: "X.service"; SESSION: "session-N.scope" */
	char slurm_step[WL_STR];        /* SLURM: "" when in no step */
	uint32_t slurm_job;             /* SLURM */
	uint32_t unit_uid;              /* UNIT, SESSION: UINT32_MAX for the system's */
	uint32_t user_uid;              /* the U of a user@U.service above it (rootless
	                                 * podman's state), UINT32_MAX when none */
	char cgroup[WL_STR];            /* the path that decided */
	bool truncated;                 /* a string above was cut */
};

/* Copies the first n bytes of s (stopping at a NUL) into dst[WL_STR], cut at a UTF-8 boundary
 * when longer than GPUCTL_WORKLOAD_NAME_MAX. Returns true when it cut. */
bool wl_copy(char *dst, const char *s, size_t n);
/* Whether s[0..n) is lower-case hex of 12 to 64 characters. */
bool wl_is_hex_id(const char *s, size_t n);

/* Classifies one cgroup path ("/system.slice/docker-<id>.scope"). */
void wl_classify_path(const char *path, size_t len, struct wl_class *ret);
/* Classifies the text of /proc/PID/cgroup: each line "ID:CONTROLLERS:PATH" classified, the
 * most specific kind wins; among equals the v2 line ("0::"), then "name=systemd", then the
 * others in file order. A text with a malformed line or a hierarchy id twice (a cgroup name
 * with a newline in it can forge a line) is trusted for nothing: BARE. Returns 0, or -ENODATA
 * when the text has no line at all. */
int wl_parse_cgroup(const char *text, size_t len, struct wl_class *ret);

/* From /proc/PID/status: the NSpid line's last field (the innermost namespace's PID) and the
 * Uid line's first (the real uid). Each is left as it is when its line is missing or
 * malformed. */
void wl_parse_status(const char *text, size_t len, uint32_t *ns_pid, uint32_t *uid);
/* From /proc/PID/environ (NUL-separated NAME=VALUE): SLURM_ARRAY_JOB_ID and
 * SLURM_ARRAY_TASK_ID, believed only when SLURM_JOB_ID (the first of each name) is job; decimal
 * only. Returns true and writes both when believed. */
bool wl_parse_environ(const char *text, size_t len, uint32_t job, uint32_t *ret_array_job,
                      uint32_t *ret_array_task);
/* From /proc/PID/stat: field 22, the start time in clock ticks after boot. 0 or -EINVAL. */
int wl_parse_stat_start(const char *text, size_t len, uint64_t *ret_start);

/* Names from a runtime's state (JSON text, at most WL_FILE_MAX bytes). Each writes only what it
 * found (into arrays of WL_STR; *truncated set when it cut) and returns true when it found the
 * container's name. */
struct wl_names {
	char name[WL_STR];          /* CONTAINER: the name; POD: the pod's name */
	char pod_namespace[WL_STR]; /* POD */
	char container[WL_STR];     /* POD: the container's name in its pod */
	bool truncated;
};
/* An OCI bundle's config.json with the CRI's annotations: containerd's
 * io.kubernetes.cri.sandbox-name / -namespace / container-name, or CRI-O's
 * io.kubernetes.pod.name / .namespace and io.kubernetes.container.name. */
bool wl_names_oci(const char *json, size_t len, struct wl_names *names);
/* docker's config.v2.json: "Name", its leading '/' taken off. */
bool wl_names_docker(const char *json, size_t len, struct wl_names *names);
/* docker's config.v2.json of a pod's container: the CRI-O-style keys of "Config"."Labels". */
bool wl_names_docker_pod(const char *json, size_t len, struct wl_names *names);
/* containers/storage's containers.json: the first of "names" of the object whose "id" is id. */
bool wl_names_storage(const char *json, size_t len, const char *id, struct wl_names *names);

/* ---- workload-state.c: the state files under a root (not pure) ---- */

/* Reads rel (no leading '/') under the directory rootfd: a regular file of at most
 * WL_FILE_MAX bytes whose last component is no symlink, every symlink on the way resolved
 * inside the root (openat2 RESOLVE_IN_ROOT); owner: UINT32_MAX for any, else the file must be
 * owned by owner or by root. Returns 0 with *ret (NUL-terminated, the caller frees it), or
 * -errno (-EFBIG: too big; -EPERM: wrong owner; -ELOOP: a symlink). */
int wl_state_read(int rootfd, const char *rel, uint32_t owner, char **ret, size_t *ret_len);
/* Names c's container (or pod) from the state under root (a directory path): fills names, and
 * *runtime when c did not say which runtime (a cgroupfs pod). Adds the files it read to
 * *files. */
void wl_state_names(const char *root, const struct wl_class *c, struct wl_names *names,
                    const char **runtime, uint64_t *files);

/* The label (gpuctl_workload's label) of wl, into buf[WL_LABEL_MAX + 1]. */
void wl_label(const struct gpuctl_workload *wl, char *buf);

#endif /* GPUCTL_WORKLOAD_INTERNAL_H */
