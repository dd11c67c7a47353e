/* SPDX-License-Identifier: MIT */
/*
 * workload-state.c: the container runtimes' local state, read under the state root
 * ($GPUCTL_WORKLOAD_ROOT, default "/"; docs/workloads.md, "Names"). Root-readable files only,
 * never a socket or a network call. The paths, each from its runtime's source:
 *
 * - containerd's runtime v2 shim keeps each task's OCI bundle in
 *   /run/containerd/io.containerd.runtime.v2.task/<namespace>/<id>/ (containerd, runtime/v2;
 *   the CRI plugin's namespace is k8s.io);
 * - CRI-O keeps the bundle of a container in containers/storage's run root:
 *   /run/containers/storage/<driver>-containers/<id>/userdata/config.json;
 * - docker: /var/lib/docker/containers/<id>/config.v2.json (docker's data root);
 * - podman: containers/storage's graph root, /var/lib/containers/storage for root and
 *   $HOME/.local/share/containers/storage for a rootless user (containers-storage.conf(5)),
 *   <driver>-containers/containers.json in it.
 *
 * Attribution informs and grants nothing, but a name is still someone's word: a symlink as the
 * last component is refused, symlinks on the way stay inside the root, a rootless user's file is
 * believed only when that user (or root) owns it, and every file is bounded.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fileio.h"
#include "nss.h"
#include "util.h"
#include "workload-internal.h"

static int open_in_root(int rootfd, const char *rel)
{
	struct open_how how = {
	        .flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY,
	        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, rootfd, rel, &how, sizeof(how));

	if (fd < 0 && (errno == ENOSYS || errno == EPERM))
		/* no openat2 (or a seccomp filter refusing it): the last component at least */
		fd = openat(rootfd, rel, (int)how.flags);
	return fd < 0 ? -errno : (int)fd;
}

int wl_state_read(int rootfd, const char *rel, uint32_t owner, char **ret, size_t *ret_len)
{
	_cleanup_close_ int fd = open_in_root(rootfd, rel);
	struct stat st;

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if (st.st_size > WL_FILE_MAX)
		return -EFBIG;
	if (owner != UINT32_MAX && st.st_uid != owner && st.st_uid != 0)
		return -EPERM;
	return fd_read_all(fd, WL_FILE_MAX, ret, ret_len);
}

typedef bool (*names_fn)(const char *json, size_t len, struct wl_names *names);

/* Reads rel and hands it to fn (or, with id, to wl_names_storage). */
static bool try_file(int rootfd, const char *rel, uint32_t owner, names_fn fn, const char *id,
                     struct wl_names *names, uint64_t *files)
{
	_cleanup_free_ char *text = NULL;
	size_t len;

	if (wl_state_read(rootfd, rel, owner, &text, &len) < 0)
		return false;
	(*files)++;
	return id ? wl_names_storage(text, len, id, names) : fn(text, len, names);
}

static bool pod_names(int rootfd, const struct wl_class *c, struct wl_names *names,
                      const char **runtime, uint64_t *files)
{
	char rel[512];
	const char *rt = c->runtime;

	if (!rt || streq(rt, "containerd")) {
		snprintf(rel, sizeof(rel),
		         "run/containerd/io.containerd.runtime.v2.task/k8s.io/%s/config.json",
		         c->id);
		if (try_file(rootfd, rel, UINT32_MAX, wl_names_oci, NULL, names, files))
			return *runtime = "containerd", true;
	}
	if (!rt || streq(rt, "cri-o")) {
		snprintf(rel, sizeof(rel),
		         "run/containers/storage/overlay-containers/%s/userdata/config.json",
		         c->id);
		if (try_file(rootfd, rel, UINT32_MAX, wl_names_oci, NULL, names, files))
			return *runtime = "cri-o", true;
	}
	if (!rt || streq(rt, "docker")) {
		snprintf(rel, sizeof(rel), "var/lib/docker/containers/%s/config.v2.json", c->id);
		if (try_file(rootfd, rel, UINT32_MAX, wl_names_docker_pod, NULL, names, files))
			return *runtime = "docker", true;
	}
	return false;
}

static bool podman_names(int rootfd, const struct wl_class *c, struct wl_names *names,
                         uint64_t *files)
{
	static const char *const drivers[] = {"overlay", "vfs"};
	char rel[1024];
	char *buf = NULL;
	struct passwd pw;
	const char *base = "var/lib/containers/storage";
	uint32_t owner = UINT32_MAX;
	bool found = false;

	if (c->user_uid != UINT32_MAX && c->user_uid != 0) {
		/* rootless: the user's own storage, believed when the user (or root) owns it */
		if (nss_passwd(c->user_uid, &pw, &buf) < 0 || !pw.pw_dir || pw.pw_dir[0] != '/')
			return free(buf), false;
		snprintf(rel, sizeof(rel), "%s/.local/share/containers/storage", pw.pw_dir + 1);
		base = rel;
		owner = c->user_uid;
	}
	for (size_t i = 0; i < ELEMENTSOF(drivers) && !found; i++) {
		char path[1200];

		snprintf(path, sizeof(path), "%s/%s-containers/containers.json", base, drivers[i]);
		found = try_file(rootfd, path, owner, NULL, c->id, names, files);
	}
	free(buf);
	return found;
}

void wl_state_names(const char *root, const struct wl_class *c, struct wl_names *names,
                    const char **runtime, uint64_t *files)
{
	_cleanup_close_ int rootfd = -1;
	char rel[512];

	if (c->kind == GPUCTL_WORKLOAD_CONTAINER && streq(c->runtime, "lxc")) {
		wl_copy(names->name, c->id, strlen(c->id)); /* LXC's id is its name */
		return;
	}
	if ((c->kind != GPUCTL_WORKLOAD_POD && c->kind != GPUCTL_WORKLOAD_CONTAINER) || !c->id[0])
		return;
	rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return;
	if (c->kind == GPUCTL_WORKLOAD_POD) {
		pod_names(rootfd, c, names, runtime, files);
	} else if (streq(c->runtime, "docker")) {
		snprintf(rel, sizeof(rel), "var/lib/docker/containers/%s/config.v2.json", c->id);
		try_file(rootfd, rel, UINT32_MAX, wl_names_docker, NULL, names, files);
	} else if (streq(c->runtime, "podman")) {
		podman_names(rootfd, c, names, files);
	}
}
