// SPDX-License-Identifier: MIT
/*
 * agent-socket.c: the node agent's Unix socket (agent-socket.h; docs/agent.md, "Confining
 * jobs"): a process asks to be confined to the devices of the leases it holds, and the agent
 * puts it in a job cgroup whose device filter allows only those (agent-cgroup.c).
 *
 * Decisions:
 * - Who asks is the kernel's word: the caller is the process at the other end of the
 *   connection, by SO_PEERCRED (its pid and uid when it connected), never what the request
 *   says. A request names nothing but what it wants ("confine"); one that names a pid other
 *   than the caller's is refused, so nobody can have another's process confined or learn its
 *   devices through us.
 * - What it holds is the kernel's word too: gpuctl_lease_held_by, the lock descriptors the
 *   process has now (an inherited descriptor of `gpuctl run` counts; an owner record does not,
 *   so a forged record grants nothing; a lease taken back, its lock file replaced, is held no
 *   more). Checked at the request against the lease directory and the devices of the latest
 *   sample, so a lease that ended before the request is refused.
 * - The process is pinned with a pidfd when the request comes; after the move, its start time
 *   is read again and the pidfd must not have exited, so a pid recycled meanwhile is never
 *   taken for the caller (the cgroup is removed and the request refused).
 * - The filter: the nodes of each held device (gpuctl_devnodes_of: the GPU's /dev/nvidiaN, a
 *   MIG device's access capabilities), the shared nodes every CUDA process opens
 *   (gpuctl_devnodes_shared: nvidiactl, nvidia-modeset, nvidia-uvm, nvidia-uvm-tools); the
 *   guarded majors are 195 and nvidia-caps' (/proc/devices): every other NVIDIA GPU node and
 *   capability is denied, every other device allowed.
 * - One request per connection, on the main thread: the request must come within
 *   AGENT_SOCKET_READ_MS and fit AGENT_SOCKET_REQUEST_MAX bytes, the reply is written without
 *   blocking, so a stalled client costs the agent at most that long and never its samples.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent-socket.h"
#include "cmd.h"
#include "hostproc.h"
#include "sampler.h"
#include "util.h"

#define AGENT_SOCKET_READ_MS     1000
#define AGENT_SOCKET_REQUEST_MAX 4096
#define AGENT_SOCKET_BACKLOG     64
#define AGENT_MAX_NODES          512

struct agent_socket {
	int fd;
	char *path;
	struct agent_cgroups *cgroups;       /* borrowed; NULL: refuse */
	const struct sampler_sample *sample; /* the latest good sample, held */
	const struct gpuctl_site *site;      /* the lease directory */
	struct gpuctl_ctx *ctx;              /* the main thread's */
};

int agent_socket_open(const char *path, struct agent_socket **ret, char *why, size_t why_size)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct agent_socket *s;
	struct stat st;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		(void)snprintf(why, why_size, "too long for a socket's path");
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	/* an earlier agent's socket (nobody listens there now, or we could not bind) */
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			(void)snprintf(why, why_size, "exists and is not a socket");
			return -EEXIST;
		}
		(void)unlink(path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(path, 0666) < 0 ||
	    listen(fd, AGENT_SOCKET_BACKLOG) < 0) {
		int e = errno;
		(void)snprintf(why, why_size, "%s", strerror(e));
		if (fd >= 0)
			close(fd);
		return -e;
	}
	s = calloc(1, sizeof(*s));
	if (!s || !(s->path = strdup(path))) {
		free(s);
		close(fd);
		(void)unlink(path);
		(void)snprintf(why, why_size, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	s->fd = fd;
	*ret = s;
	return 0;
}

int agent_socket_fd(const struct agent_socket *s)
{
	return s->fd;
}

void agent_socket_set_cgroups(struct agent_socket *s, struct agent_cgroups *c)
{
	s->cgroups = c;
}

void agent_socket_sample(struct agent_socket *s, const struct exporter_view *v)
{
	const struct sampler_sample *m = sampler_hold(v->sample);

	sampler_put(s->sample);
	s->sample = m;
	s->site = v->site;
	s->ctx = v->ctx;
}

/* The character major /proc/devices gives name, 0 when none. */
static uint32_t char_major(const char *name)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/devices", "re");
	char line[256];

	while (f && fgets(line, sizeof(line), f)) {
		char word[128];
		unsigned long major;
		if (!strncmp(line, "Block devices:", 14))
			break;
		if (sscanf(line, "%lu %127s", &major, word) == 2 && !strcmp(word, name) &&
		    major <= UINT32_MAX)
			return (uint32_t)major;
	}
	return 0;
}

/* Adds nodes[0..n) to the filter's allow list. */
static int add_nodes(struct agent_devnode *allow, size_t *n_allow,
                     const struct gpuctl_devnode *const *nodes, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		if (*n_allow == AGENT_MAX_NODES)
			return -E2BIG;
		allow[(*n_allow)++] = (struct agent_devnode){nodes[k]->major, nodes[k]->minor};
	}
	return 0;
}

/* The shared nodes and those of set's devices into allow[]; their UUIDs into uuids. */
static int filter_nodes(const struct gpuctl_devnodes *map, const struct gpuctl_snapshot *snap,
                        const struct gpuctl_devset *set, struct agent_devnode *allow,
                        size_t *n_allow, json_t *uuids, char *why, size_t size)
{
	const struct gpuctl_devnode *const *nodes;
	size_t n;
	int r;

	gpuctl_devnodes_shared(map, &nodes, &n);
	if ((r = add_nodes(allow, n_allow, nodes, n)) < 0)
		goto big;
	for (size_t i = 0; i < gpuctl_devset_count(set); i++) {
		size_t g;
		int mig;
		const char *uuid;
		if (gpuctl_devset_get(set, i, &g, &mig) < 0)
			continue;
		uuid = mig < 0 ? gpuctl_gpu_str(gpuctl_snapshot_gpu(snap, g), GPUCTL_F_UUID)
		               : gpuctl_mig_uuid(
		                         gpuctl_gpu_mig(gpuctl_snapshot_gpu(snap, g), (size_t)mig));
		if ((r = gpuctl_devnodes_of(map, g, mig, &nodes, &n)) < 0) {
			(void)snprintf(why, size, "the device nodes of %s are not known (%s)",
			               uuid ? uuid : "a device", strerror(-r));
			return r;
		}
		if ((r = add_nodes(allow, n_allow, nodes, n)) < 0)
			goto big;
		if (uuid)
			(void)json_array_append_new(uuids, json_string(uuid));
	}
	return 0;
big:
	(void)snprintf(why, size, "more than %d device nodes", AGENT_MAX_NODES);
	return r;
}

/* The filter of set's devices into allow[] (AGENT_MAX_NODES) and guarded[2]; the devices' UUIDs
 * into uuids (a JSON array). 0, or -errno with why. */
static int filter_of(const struct gpuctl_snapshot *snap, const struct gpuctl_devset *set,
                     struct gpuctl_ctx *ctx, struct agent_devnode *allow, size_t *n_allow,
                     uint32_t *guarded, size_t *n_guarded, json_t *uuids, char *why, size_t size)
{
	struct gpuctl_devnodes *map = NULL;
	uint32_t caps;
	int r;

	*n_allow = *n_guarded = 0;
	if ((r = gpuctl_devnodes_read(ctx, snap, NULL, &map)) < 0) {
		(void)snprintf(why, size, "the device nodes: %s", gpuctl_errmsg(ctx));
		return r;
	}
	r = filter_nodes(map, snap, set, allow, n_allow, uuids, why, size);
	gpuctl_devnodes_free(map);
	if (r < 0)
		return r;
	guarded[(*n_guarded)++] = GPUCTL_DEVNODE_NVIDIA_MAJOR;
	if ((caps = char_major("nvidia-caps")) && caps != GPUCTL_DEVNODE_NVIDIA_MAJOR)
		guarded[(*n_guarded)++] = caps;
	return 0;
}

/* Whether pidfd's process has exited (its pidfd is readable then). */
static bool pidfd_exited(int pidfd)
{
	struct pollfd p = {.fd = pidfd, .events = POLLIN};
	return poll(&p, 1, 0) != 0;
}

/* The request's answer for the caller (pid, uid): a JSON object (owned). */
static json_t *answer(struct agent_socket *s, pid_t pid, uid_t uid, const char *line)
{
	_cleanup_(gpuctl_devset_freep) struct gpuctl_devset *set = NULL;
	_cleanup_(gpuctl_lease_dir_freep) struct gpuctl_lease_dir *dir = NULL;
	_cleanup_close_ int pidfd = -1;
	struct agent_devnode allow[AGENT_MAX_NODES];
	uint32_t guarded[2];
	size_t n_allow = 0, n_guarded = 0;
	struct hostproc_stat st0, st1;
	char why[512] = "", path[4096];
	json_error_t jerr;
	json_t *req = json_loads(line, JSON_REJECT_DUPLICATES, &jerr), *v, *uuids = NULL;
	const char *what;
	int r;

	if (!req || !json_is_object(req) ||
	    !(what = json_string_value(json_object_get(req, "request")))) {
		json_decref(req);
		return json_pack("{s:b, s:s}", "ok", 0, "error",
		                 "not a request: expected {\"request\": \"confine\"}");
	}
	if (strcmp(what, "confine") != 0) {
		json_decref(req);
		return json_pack("{s:b, s:s}", "ok", 0, "error",
		                 "unknown request (expected confine)");
	}
	v = json_object_get(req, "pid");
	if (v && (!json_is_integer(v) || json_integer_value(v) != (json_int_t)pid)) {
		json_decref(req);
		(void)snprintf(why, sizeof(why),
		               "a process can only confine itself (the caller is pid %d)",
		               (int)pid);
		return json_pack("{s:b, s:s}", "ok", 0, "error", why);
	}
	json_decref(req);
	if (pid <= 0)
		return json_pack("{s:b, s:s}", "ok", 0, "error",
		                 "the caller's pid is not known (another pid namespace)");
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0 || hostproc_read_stat(pid, &st0) < 0)
		return json_pack("{s:b, s:s}", "ok", 0, "error", "the caller is gone");
	if (!s->cgroups)
		return json_pack("{s:b, s:s}", "ok", 0, "error",
		                 "the agent confines no job (no cgroup hierarchy: see its log)");
	if (!s->sample || !exporter_sample_snapshot(s->sample))
		return json_pack("{s:b, s:s}", "ok", 0, "error", "the agent has no sample yet");
	const struct gpuctl_snapshot *snap = exporter_sample_snapshot(s->sample);
	r = gpuctl_lease_dir_open(s->ctx, gpuctl_site_lease_dir_path(s->site), &dir);
	if (r == 0)
		r = gpuctl_lease_held_by(s->ctx, dir, snap, (uint32_t)pid, &set);
	if (r < 0) {
		(void)snprintf(why, sizeof(why), "%s", gpuctl_errmsg(s->ctx));
		return json_pack("{s:b, s:s}", "ok", 0, "error", why);
	}
	if (gpuctl_devset_count(set) == 0) {
		(void)snprintf(why, sizeof(why), "pid %d (uid %u) holds no lease in %s", (int)pid,
		               (unsigned)uid, gpuctl_site_lease_dir_path(s->site));
		return json_pack("{s:b, s:s}", "ok", 0, "error", why);
	}
	uuids = json_array();
	if (!uuids)
		return NULL;
	r = filter_of(snap, set, s->ctx, allow, &n_allow, guarded, &n_guarded, uuids, why,
	              sizeof(why));
	if (r == 0) {
		struct agent_devfilter f = {allow, n_allow, guarded, n_guarded};
		r = agent_cgroup_confine(s->cgroups, pid, st0.start_ticks, &f, path, sizeof(path),
		                         why, sizeof(why));
	}
	if (r == 0 && (pidfd_exited(pidfd) || hostproc_read_stat(pid, &st1) < 0 ||
	               st1.start_ticks != st0.start_ticks)) {
		(void)rmdir(path);
		(void)snprintf(why, sizeof(why), "the caller is gone");
		r = -ESRCH;
	}
	if (r < 0) {
		json_decref(uuids);
		return json_pack("{s:b, s:s}", "ok", 0, "error", why);
	}
	cli_error("agent: confined pid %d (uid %u) to %zu device(s) in %s", (int)pid, (unsigned)uid,
	          json_array_size(uuids), path);
	return json_pack("{s:b, s:s, s:i, s:o}", "ok", 1, "cgroup", path, "version",
	                 agent_cgroups_mode(s->cgroups) == AGENT_CGROUP_V1 ? 1 : 2, "devices",
	                 uuids);
}

/* Reads one line (the request) from fd within AGENT_SOCKET_READ_MS: its length, or -1. */
static ssize_t read_request(int fd, char *buf, size_t size)
{
	double until = cli_now(CLOCK_MONOTONIC) + AGENT_SOCKET_READ_MS / 1000.0;
	size_t n = 0;

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		double left = until - cli_now(CLOCK_MONOTONIC);
		ssize_t k;
		if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) <= 0)
			return -1;
		k = read(fd, buf + n, size - 1 - n);
		if (k < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (k <= 0)
			return -1;
		n += (size_t)k;
		buf[n] = '\0';
		if (memchr(buf, '\n', n)) {
			*strchr(buf, '\n') = '\0';
			return (ssize_t)strlen(buf);
		}
		if (n == size - 1)
			return -1;
	}
}

static void serve_one(struct agent_socket *s, int fd)
{
	struct ucred cred = {0};
	socklen_t len = sizeof(cred);
	char req[AGENT_SOCKET_REQUEST_MAX];
	json_t *rep;
	char *text;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return;
	if (read_request(fd, req, sizeof(req)) < 0)
		rep = json_pack("{s:b, s:s}", "ok", 0, "error",
		                "no request line (one line of JSON, within a second)");
	else
		rep = answer(s, cred.pid, cred.uid, req);
	if (rep && !json_is_true(json_object_get(rep, "ok")))
		cli_error("agent: refused to confine pid %d (uid %u): %s", (int)cred.pid,
		          (unsigned)cred.uid, json_string_value(json_object_get(rep, "error")));
	text = rep ? json_dumps(rep, JSON_COMPACT) : NULL;
	json_decref(rep);
	if (text) {
		(void)send(fd, text, strlen(text), MSG_DONTWAIT | MSG_NOSIGNAL | MSG_MORE);
		(void)send(fd, "\n", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
		free(text);
	}
}

void agent_socket_serve(struct agent_socket *s)
{
	for (int i = 0; i < AGENT_SOCKET_BACKLOG; i++) {
		int fd = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			return; /* EAGAIN: none left */
		serve_one(s, fd);
		close(fd);
	}
}

void agent_socket_free(struct agent_socket *s)
{
	if (!s)
		return;
	close(s->fd);
	(void)unlink(s->path);
	sampler_put(s->sample);
	free(s->path);
	free(s);
}
