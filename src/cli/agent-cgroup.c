// SPDX-License-Identifier: MIT
/*
 * agent-cgroup.c: the node agent's job cgroups (agent-cgroup.h; docs/agent.md, "Confining
 * jobs"): find the hierarchy, make one cgroup per job under gpuctl's parent, give it its device
 * filter, move the job in, and remove it once it is empty.
 *
 * Decisions:
 * - Which version: AUTO takes the cgroup v1 `devices` controller when one is mounted (a hybrid
 *   or v1 machine: the controller the system itself uses), else cgroup v2 with a device program
 *   (agent-cgroup-bpf.c). The mounts come from /proc/self/mountinfo (fstype `cgroup` with the
 *   `devices` super option, or `cgroup2`), so a machine that mounts them elsewhere works too.
 * - cgroup v1 (the kernel's Documentation/admin-guide/cgroup-v1/devices.rst): a new cgroup
 *   starts with its parent's list. Under the default "allow" behaviour every exception is a
 *   denial and writing devices.allow only removes an exception equal to the written one, so
 *   "deny c 195:* then allow c 195:N" would leave 195:N denied. So the filter is a whitelist:
 *   "a" written to devices.deny (default deny, no exceptions), then devices.allow gets `b *:*
 *   rwm`, `c *:* m`, `c M:* rwm` for each character major of /proc/devices that is not guarded,
 *   and `c M:m rwm` for each allowed node of a guarded major. A child can never allow more than
 *   its parent (devices.rst, "Hierarchy"), so nothing the job makes below widens it. A major
 *   registered after the job started (a module loaded later) is denied to it.
 * - cgroup v2: the device program (agent-cgroup-bpf.c), which allows what is not guarded by
 *   itself.
 * - Never widen: moving a process out of a cgroup whose device filter already restricts it (a
 *   container, a Slurm job with ConstrainDevices, a systemd unit with DevicePolicy) would lift
 *   that filter, so such a caller is refused (-EEXIST): in v1 when its devices cgroup lists
 *   anything but `a *:* rwm`, in v2 when any device program applies to its cgroup. A caller
 *   already in one of our job cgroups is confined afresh.
 * - The job cgroup is <parent>/job-<pid>-<start ticks> (a recycled pid gets another name). It is
 *   made, filtered, and only then the process moved in; any failure removes it. The move is by
 *   pid (cgroup.procs); the caller checks that the process is still the one it vetted after the
 *   move (its start time).
 * - Removal: each sample lists the parent and removes the job-* cgroups whose cgroup.procs is
 *   empty (rmdir fails harmlessly on one that is not). Those of an earlier agent go the same way.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-cgroup.h"
#include "agent-proto.h"
#include "cmd.h"
#include "util.h"

struct agent_cgroups {
	enum agent_cgroup_mode mode; /* V1 or V2 */
	char root[PATH_MAX];         /* the hierarchy's mount point */
	char parent[PATH_MAX];       /* root/<parent>, absolute */
	char rel[PATH_MAX];          /* the parent, relative to root, with a leading '/' */
};

/* The mount point of the v1 devices hierarchy or of cgroup2, from /proc/self/mountinfo. */
static bool find_mount(bool v1, char *buf, size_t size)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096];

	while (f && fgets(line, sizeof(line), f))
		if (agent_mountinfo_cgroup(line, v1, buf, size))
			return true;
	return false;
}

/* mkdir -p of root/rel (rel relative, '/'-separated, checked by parent_ok). */
static int make_parent(const char *root, const char *rel)
{
	char path[PATH_MAX];
	size_t from = strlen(root) + 1;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", root, rel) >= sizeof(path))
		return -ENAMETOOLONG;
	for (size_t i = from;; i++) {
		char ch = path[i];
		if (ch != '/' && ch != '\0')
			continue;
		path[i] = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			return -errno;
		if (!ch)
			return 0;
		path[i] = ch;
	}
}

/* Whether rel is a relative path of plain components (no "..", no empty ones). */
static bool parent_ok(const char *rel)
{
	size_t n = strlen(rel);

	if (!n || rel[0] == '/' || rel[n - 1] == '/' || strstr(rel, "//") || n >= PATH_MAX / 2)
		return false;
	for (const char *c = rel; c; c = strchr(c, '/')) {
		if (*c == '/')
			c++;
		if (!strncmp(c, "..", 2) && (c[2] == '/' || !c[2]))
			return false;
		if (c[0] == '.' && (c[1] == '/' || !c[1]))
			return false;
	}
	return true;
}

int agent_cgroups_new(enum agent_cgroup_mode mode, const char *parent, struct agent_cgroups **ret,
                      char *why, size_t why_size)
{
	struct agent_cgroups *c;
	int r;

	if (!parent_ok(parent)) {
		(void)snprintf(why, why_size, "'%s' is not a relative path of plain names", parent);
		return -EINVAL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		(void)snprintf(why, why_size, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	if (mode == AGENT_CGROUP_AUTO)
		mode = find_mount(true, c->root, sizeof(c->root)) ? AGENT_CGROUP_V1
		                                                  : AGENT_CGROUP_V2;
	c->mode = mode;
	if (!find_mount(mode == AGENT_CGROUP_V1, c->root, sizeof(c->root))) {
		(void)snprintf(why, why_size, "no %s is mounted",
		               mode == AGENT_CGROUP_V1 ? "cgroup v1 devices hierarchy" : "cgroup2");
		free(c);
		return -ENOENT;
	}
	if ((size_t)snprintf(c->parent, sizeof(c->parent), "%s/%s", c->root, parent) >=
	            sizeof(c->parent) ||
	    (size_t)snprintf(c->rel, sizeof(c->rel), "/%s", parent) >= sizeof(c->rel))
		r = -ENAMETOOLONG;
	else
		r = make_parent(c->root, parent);
	if (r < 0) {
		(void)snprintf(why, why_size, "%s: %s", c->parent, strerror(-r));
		free(c);
		return r;
	}
	*ret = c;
	return 0;
}

enum agent_cgroup_mode agent_cgroups_mode(const struct agent_cgroups *c)
{
	return c->mode;
}

const char *agent_cgroups_parent(const struct agent_cgroups *c)
{
	return c->parent;
}

/* Writes text to dir/name (one write: the kernel takes one rule or pid per write). */
static int write_at(int dirfd, const char *name, const char *text)
{
	_cleanup_close_ int fd = openat(dirfd, name, O_WRONLY | O_CLOEXEC);
	size_t n = strlen(text);

	if (fd < 0)
		return -errno;
	if (write(fd, text, n) != (ssize_t)n)
		return errno ? -errno : -EIO;
	return 0;
}

/* Reads dir/name (at most size-1 bytes, NUL-terminated): its length, or -errno. */
static ssize_t read_at(int dirfd, const char *name, char *buf, size_t size)
{
	_cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	ssize_t k;

	if (fd < 0)
		return -errno;
	k = read(fd, buf, size - 1);
	if (k < 0)
		return -errno;
	buf[k] = '\0';
	return k;
}

static bool guarded(const struct agent_devfilter *f, uint32_t major)
{
	for (size_t i = 0; i < f->n_guarded; i++)
		if (f->guarded[i] == major)
			return true;
	return false;
}

/* The v1 whitelist of f into the cgroup dirfd (see the top comment). */
static int v1_filter(int dirfd, const struct agent_devfilter *f)
{
	_cleanup_fclose_ FILE *devs = fopen("/proc/devices", "re");
	char line[256], rule[64];
	bool chars = false;
	int r;

	if (!devs)
		return -errno;
	if ((r = write_at(dirfd, "devices.deny", "a")) < 0 ||
	    (r = write_at(dirfd, "devices.allow", "b *:* rwm")) < 0 ||
	    (r = write_at(dirfd, "devices.allow", "c *:* m")) < 0)
		return r;
	/* "Character devices:" then "MAJOR name" lines, a blank line, "Block devices:" */
	while (fgets(line, sizeof(line), devs)) {
		uint32_t major;
		char name[128];
		int k = agent_proc_devices_line(line, &chars, &major, name, sizeof(name));
		if (k < 0)
			break;
		if (k == 0 || guarded(f, major))
			continue;
		(void)snprintf(rule, sizeof(rule), "c %u:* rwm", major);
		if ((r = write_at(dirfd, "devices.allow", rule)) < 0)
			return r;
	}
	for (size_t i = 0; i < f->n_allow; i++) {
		(void)snprintf(rule, sizeof(rule), "c %u:%u rwm", f->allow[i].major,
		               f->allow[i].minor);
		if ((r = write_at(dirfd, "devices.allow", rule)) < 0)
			return r;
	}
	return 0;
}

/* The cgroup of pid in our hierarchy, from /proc/PID/cgroup ("ID:CONTROLLERS:PATH"; v2's line
 * is "0::PATH"), relative to the mount point, with its leading '/'. */
static int cgroup_of(const struct agent_cgroups *c, pid_t pid, char *buf, size_t size)
{
	char path[64], line[PATH_MAX + 64];
	_cleanup_fclose_ FILE *f = NULL;

	(void)snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	if (!(f = fopen(path, "re")))
		return errno == ENOENT ? -ESRCH : -errno;
	while (fgets(line, sizeof(line), f)) {
		const char *p;
		if (!agent_proc_cgroup_line(line, c->mode == AGENT_CGROUP_V1, &p))
			continue;
		if (strlen(p) >= size)
			return -ENAMETOOLONG;
		memcpy(buf, p, strlen(p) + 1);
		return 0;
	}
	return -ENOENT;
}

/* Whether rel is one of our job cgroups (parent/job-*). */
static bool ours(const struct agent_cgroups *c, const char *rel)
{
	size_t n = strlen(c->rel);

	return !strncmp(rel, c->rel, n) && !strncmp(rel + n, "/job-", 5) &&
	       !strchr(rel + n + 1, '/');
}

/* -EEXIST (why said) when pid's current cgroup filters devices already (moving it out would
 * lift that filter), 0 when not, or -errno. */
static int check_not_filtered(const struct agent_cgroups *c, pid_t pid, char *why, size_t size)
{
	char rel[PATH_MAX], path[2 * PATH_MAX], list[256];
	_cleanup_close_ int dfd = -1;
	int r = cgroup_of(c, pid, rel, sizeof(rel));

	if (r < 0)
		return r;
	if (ours(c, rel))
		return 0;
	(void)snprintf(path, sizeof(path), "%s%s", c->root, rel);
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	if (c->mode == AGENT_CGROUP_V1) {
		ssize_t k = read_at(dfd, "devices.list", list, sizeof(list));
		if (k < 0)
			return (int)k;
		if (!strcmp(list, "a *:* rwm\n"))
			return 0;
	} else {
		r = agent_cgroup_bpf_count(dfd);
		if (r <= 0)
			return r;
	}
	(void)snprintf(why, size,
	               "the process is under the device filter of cgroup %s already (moving it "
	               "would lift that filter)",
	               rel);
	return -EEXIST;
}

int agent_cgroup_confine(struct agent_cgroups *c, pid_t pid, uint64_t start_ticks,
                         const struct agent_devfilter *f, char *path, size_t path_size, char *why,
                         size_t why_size)
{
	_cleanup_close_ int pfd = -1, dfd = -1;
	char name[64], num[32];
	int r;

	r = check_not_filtered(c, pid, why, why_size);
	if (r == -EEXIST)
		return r;
	if (r < 0) {
		(void)snprintf(why, why_size, "the process's cgroup: %s", strerror(-r));
		return r;
	}
	pfd = open(c->parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0) {
		r = -errno;
		(void)snprintf(why, why_size, "%s: %s", c->parent, strerror(-r));
		return r;
	}
	(void)snprintf(name, sizeof(name), "job-%d-%llu", (int)pid,
	               (unsigned long long)start_ticks);
	if (mkdirat(pfd, name, 0755) < 0 && errno != EEXIST) {
		r = -errno;
		(void)snprintf(why, why_size, "%s/%s: %s", c->parent, name, strerror(-r));
		return r;
	}
	dfd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	r = dfd < 0                      ? -errno
	    : c->mode == AGENT_CGROUP_V1 ? v1_filter(dfd, f)
	                                 : agent_cgroup_bpf_attach(dfd, f);
	if (r < 0) {
		(void)snprintf(why, why_size, "%s/%s: the device filter: %s", c->parent, name,
		               strerror(-r));
		(void)unlinkat(pfd, name, AT_REMOVEDIR);
		return r;
	}
	(void)snprintf(num, sizeof(num), "%d", (int)pid);
	r = write_at(dfd, "cgroup.procs", num);
	if (r < 0) {
		(void)snprintf(why, why_size, "%s/%s: moving pid %d in: %s", c->parent, name,
		               (int)pid, strerror(-r));
		(void)unlinkat(pfd, name, AT_REMOVEDIR);
		return r;
	}
	(void)snprintf(path, path_size, "%s/%s", c->parent, name);
	return 0;
}

int agent_cgroup_narrow(struct agent_cgroups *c, const char *path,
                        const struct agent_devfilter *keep, const struct agent_devnode *deny,
                        size_t n_deny)
{
	_cleanup_close_ int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char rule[64];
	int r = 0;

	if (dfd < 0)
		return -errno;
	if (c->mode == AGENT_CGROUP_V2)
		return agent_cgroup_bpf_attach(dfd, keep);
	/* v1, default deny: a denial removes the equal exception (devices.rst) */
	for (size_t i = 0; i < n_deny && r == 0; i++) {
		(void)snprintf(rule, sizeof(rule), "c %u:%u rwm", deny[i].major, deny[i].minor);
		r = write_at(dfd, "devices.deny", rule);
	}
	return r;
}

void agent_cgroups_sweep(struct agent_cgroups *c)
{
	_cleanup_(closedirp) DIR *d = opendir(c->parent);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		_cleanup_close_ int fd = -1;
		char procs[16];
		if (strncmp(de->d_name, "job-", 4) != 0)
			continue;
		fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0 || read_at(fd, "cgroup.procs", procs, sizeof(procs)) != 0)
			continue;
		(void)unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
	}
}

void agent_cgroups_free(struct agent_cgroups *c)
{
	free(c);
}
