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
 * - A lease's end narrows the filter: at each sample, a device of a confined job that no process
 *   of its cgroup, nor the gpuctl run that started it (the caller's parent when it asked), holds
 *   any more is revoked (agent_cgroup_narrow: v1 denies its nodes, v2 adds a program of the
 *   rest). Only narrowed, never widened: the kept devices are a subset of those confined.
 * - The jobs confined outlive the agent: each (its cgroup's name, its gpuctl run, the devices it
 *   may open) is written to a root-only state file beside the lease directory
 *   (LEASE_DIR-cgroup.state, agent-state.h) whenever the list changes, and a new agent reads
 *   it, so a lease taken back after a restart still narrows the job. Only a job cgroup that
 *   exists under this agent's parent is believed (its name job-PID-TICKS, nothing else).
 * - One request per connection, on the main thread: the request must come within
 *   AGENT_SOCKET_READ_MS and fit AGENT_SOCKET_REQUEST_MAX bytes, the reply is written without
 *   blocking, and at most AGENT_SOCKET_PER_WAKE connections are served before the loop looks at
 *   its samples again: clients that connect and say nothing (anyone may) delay the pages and the
 *   ledger by at most a second per loop, never stop them. gpuctl run writes its request at once.
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

#include "agent-proto.h"
#include "agent-socket.h"
#include "agent-state.h"
#include "cmd.h"
#include "hostproc.h"
#include "sampler.h"
#include "util.h"

#define AGENT_SOCKET_READ_MS     250
#define AGENT_SOCKET_PER_WAKE    4
#define AGENT_SOCKET_REQUEST_MAX 4096
#define AGENT_SOCKET_BACKLOG     64
#define AGENT_MAX_NODES          512

/* A job the agent confined, for narrowing its filter when a lease of it ends. */
struct confined {
	char *cgroup;          /* the job cgroup's path */
	pid_t holder;          /* the caller's parent when it asked (gpuctl run), 0: none */
	uint64_t holder_ticks; /* ... and its start */
	char **uuids;          /* the devices it may open now */
	size_t n;
};

struct agent_socket {
	int fd;
	char *path;
	struct confined *jobs; /* the jobs confined, while their cgroups exist */
	size_t n_jobs;
	char *state_path;                    /* where jobs is kept for the next agent, or NULL */
	bool state_failing;                  /* it could not be written (said once) */
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

static void revoke_ended(struct agent_socket *s);
static void track(struct agent_socket *s, const char *path, pid_t pid, json_t *uuids);
static void state_read(struct agent_socket *s);

void agent_socket_set_cgroups(struct agent_socket *s, struct agent_cgroups *c,
                              const char *state_path)
{
	s->cgroups = c;
	free(s->state_path);
	s->state_path = state_path ? strdup(state_path) : NULL;
	if (c && s->state_path)
		state_read(s);
}

void agent_socket_sample(struct agent_socket *s, const struct exporter_view *v)
{
	const struct sampler_sample *m = sampler_hold(v->sample);

	sampler_put(s->sample);
	s->sample = m;
	s->site = v->site;
	s->ctx = v->ctx;
	revoke_ended(s);
}

/* The character major /proc/devices gives name, 0 when none. The file is the device-node map's
 * ($GPUCTL_PROC_DEVICES replaces it, as for gpuctl_devnodes_read), so the majors guarded are
 * those the map's nodes have. */
static uint32_t char_major(const char *name)
{
	const char *path = secure_getenv("GPUCTL_PROC_DEVICES");
	_cleanup_fclose_ FILE *f = fopen(path && path[0] ? path : "/proc/devices", "re");
	bool chars = false;
	char line[256];

	while (f && fgets(line, sizeof(line), f)) {
		char word[128];
		uint32_t major;
		int k = agent_proc_devices_line(line, &chars, &major, word, sizeof(word));
		if (k < 0)
			break;
		if (k > 0 && !strcmp(word, name))
			return major;
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

/* The nodes of the devices of lost that are not in allow[0..n_allow) into deny[]. */
static int lost_nodes(const struct gpuctl_snapshot *snap, const struct gpuctl_devset *lost,
                      struct gpuctl_ctx *ctx, const struct agent_devnode *allow, size_t n_allow,
                      struct agent_devnode *deny, size_t *n_deny)
{
	struct gpuctl_devnodes *map = NULL;
	int r = gpuctl_devnodes_read(ctx, snap, NULL, &map);

	*n_deny = 0;
	for (size_t i = 0; r == 0 && i < gpuctl_devset_count(lost); i++) {
		const struct gpuctl_devnode *const *nodes;
		size_t g, n;
		int mig;
		if (gpuctl_devset_get(lost, i, &g, &mig) < 0 ||
		    gpuctl_devnodes_of(map, g, mig, &nodes, &n) < 0)
			continue;
		for (size_t k = 0; k < n && *n_deny < AGENT_MAX_NODES; k++) {
			bool needed = false;
			for (size_t a = 0; a < n_allow && !needed; a++)
				needed = allow[a].major == nodes[k]->major &&
				         allow[a].minor == nodes[k]->minor;
			if (!needed)
				deny[(*n_deny)++] =
				        (struct agent_devnode){nodes[k]->major, nodes[k]->minor};
		}
	}
	gpuctl_devnodes_free(map);
	return r;
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
	json_t *uuids = NULL;
	int r;

	if (agent_request_parse(line, (long)pid, why, sizeof(why)) < 0)
		return json_pack("{s:b, s:s}", "ok", 0, "error", why);
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
	track(s, path, pid, uuids);
	return json_pack("{s:b, s:s, s:i, s:o}", "ok", 1, "cgroup", path, "version",
	                 agent_cgroups_mode(s->cgroups) == AGENT_CGROUP_V1 ? 1 : 2, "devices",
	                 uuids);
}

/* ---- a lease's end narrows its job's filter ---- */

static void confined_free(struct confined *j)
{
	free(j->cgroup);
	for (size_t i = 0; i < j->n; i++)
		free(j->uuids[i]);
	free(j->uuids);
}

/* The parent of pid and its start (/proc/PID/stat fields 4 and 22, after the command's ')'). */
static bool parent_of(pid_t pid, pid_t *ret_ppid, uint64_t *ret_ticks)
{
	char path[64], buf[1024], *p;
	struct hostproc_stat st;
	_cleanup_close_ int fd = -1;
	ssize_t k;
	int ppid;

	(void)snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || (k = read(fd, buf, sizeof(buf) - 1)) <= 0)
		return false;
	buf[k] = '\0';
	if (!(p = strrchr(buf, ')')) || sscanf(p + 1, " %*c %d", &ppid) != 1 || ppid <= 1 ||
	    hostproc_read_stat(ppid, &st) < 0)
		return false;
	*ret_ppid = ppid;
	*ret_ticks = st.start_ticks;
	return true;
}

/* ---- the jobs, kept for the next agent ---- */

/* One line per job: "HOLDER HOLDER_TICKS NAME UUID..." (NAME: the cgroup's, under the parent). */
static int state_print(FILE *f, void *arg)
{
	const struct agent_socket *s = arg;

	for (size_t i = 0; i < s->n_jobs; i++) {
		const struct confined *j = &s->jobs[i];
		const char *name = strrchr(j->cgroup, '/');
		if (fprintf(f, "%d %llu %s", (int)j->holder, (unsigned long long)j->holder_ticks,
		            name ? name + 1 : j->cgroup) < 0)
			return -EIO;
		for (size_t k = 0; k < j->n; k++)
			if (fprintf(f, " %s", j->uuids[k]) < 0)
				return -EIO;
		if (fputc('\n', f) == EOF)
			return -EIO;
	}
	return 0;
}

/* Writes the jobs after a change (the file goes with the last); a failure is said once. */
static void state_write(struct agent_socket *s)
{
	int r;

	if (!s->state_path)
		return;
	if (s->n_jobs == 0)
		r = unlink(s->state_path) < 0 && errno != ENOENT ? -errno : 0;
	else
		r = agent_state_write(s->state_path, state_print, s);
	if (r < 0 && !s->state_failing)
		cli_error("agent: %s: %s (a job confined now is not narrowed after a restart)",
		          s->state_path, strerror(-r));
	s->state_failing = r < 0;
}

/* One state line into a job, when its cgroup exists under the parent. */
static bool state_line(struct agent_socket *s, char *line, struct confined *j)
{
	const char *name, *uuids[AGENT_MAX_NODES];
	char path[4200];
	struct stat st;
	uint64_t ticks;
	int32_t holder;
	size_t n;

	if (!agent_state_line(line, &holder, &ticks, &name, uuids, AGENT_MAX_NODES, &n) ||
	    (size_t)snprintf(path, sizeof(path), "%s/%s", agent_cgroups_parent(s->cgroups), name) >=
	            sizeof(path) ||
	    stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return false;
	*j = (struct confined){.holder = holder,
	                       .holder_ticks = ticks,
	                       .cgroup = strdup(path),
	                       .uuids = calloc(n + 1, sizeof(char *))};
	if (!j->cgroup || !j->uuids)
		return false;
	for (size_t k = 0; k < n; k++)
		if ((j->uuids[j->n] = strdup(uuids[k])))
			j->n++;
	return j->n == n;
}

/* The jobs an earlier agent confined whose cgroups exist (agent_state_open's checks). */
static void state_read(struct agent_socket *s)
{
	FILE *f = agent_state_open(s->state_path);
	char line[32768]; /* 512 devices' UUIDs */

	if (!f) {
		if (errno != ENOENT)
			cli_error("agent: %s: %s (the jobs an earlier agent confined are not "
			          "narrowed)",
			          s->state_path, strerror(errno));
		return;
	}
	while (agent_state_getline(f, line, sizeof(line))) {
		struct confined j = {0};
		void *grown = realloc(s->jobs, (s->n_jobs + 1) * sizeof(*s->jobs));
		if (!grown)
			break;
		s->jobs = grown;
		if (state_line(s, line, &j))
			s->jobs[s->n_jobs++] = j;
		else
			confined_free(&j);
	}
	fclose(f);
	state_write(s); /* without the jobs that ended meanwhile */
}

/* Remembers a job just confined (nothing when out of memory: it is then never narrowed). */
static void track(struct agent_socket *s, const char *path, pid_t pid, json_t *uuids)
{
	struct confined j = {.cgroup = strdup(path),
	                     .uuids = calloc(json_array_size(uuids) + 1, sizeof(char *))};
	void *grown = realloc(s->jobs, (s->n_jobs + 1) * sizeof(*s->jobs));
	size_t i;
	json_t *u;

	if (grown)
		s->jobs = grown;
	if (!grown || !j.cgroup || !j.uuids) {
		confined_free(&j);
		return;
	}
	if (!parent_of(pid, &j.holder, &j.holder_ticks))
		j.holder = 0;
	json_array_foreach(uuids, i, u) if ((j.uuids[j.n] = strdup(json_string_value(u)))) j.n++;
	s->jobs[s->n_jobs++] = j;
	state_write(s);
}

/* Device uuid of snap as (g, mig); false when snap has none. */
static bool device_of(const struct gpuctl_snapshot *snap, const char *uuid, size_t *ret_g,
                      int *ret_mig)
{
	for (size_t g = 0; g < gpuctl_snapshot_gpu_count(snap); g++) {
		const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(snap, g);
		const char *u = gpuctl_gpu_str(gpu, GPUCTL_F_UUID);
		if (u && !strcmp(u, uuid)) {
			*ret_g = g;
			*ret_mig = -1;
			return true;
		}
		for (size_t m = 0; m < gpuctl_gpu_mig_count(gpu); m++)
			if (!strcmp(gpuctl_mig_uuid(gpuctl_gpu_mig(gpu, m)), uuid)) {
				*ret_g = g;
				*ret_mig = (int)m;
				return true;
			}
	}
	return false;
}

/* Marks in keep[] the devices of j that process pid holds now. */
static void mark_held(struct agent_socket *s, struct gpuctl_lease_dir *dir,
                      const struct gpuctl_snapshot *snap, pid_t pid, const struct confined *j,
                      bool *keep)
{
	_cleanup_(gpuctl_devset_freep) struct gpuctl_devset *set = NULL;

	if (pid <= 0 || gpuctl_lease_held_by(s->ctx, dir, snap, (uint32_t)pid, &set) < 0)
		return;
	for (size_t i = 0; i < j->n; i++) {
		size_t g;
		int mig;
		if (!keep[i] && device_of(snap, j->uuids[i], &g, &mig))
			keep[i] = gpuctl_devset_contains(set, g, mig);
	}
}

/* Which of j's devices a process of its cgroup, or its holder (gpuctl run), still holds. */
static void held_now(struct agent_socket *s, struct gpuctl_lease_dir *dir,
                     const struct gpuctl_snapshot *snap, const struct confined *j, bool *keep)
{
	char path[4200], buf[4096];
	_cleanup_close_ int fd = -1;
	struct hostproc_stat st;
	ssize_t k;

	if (j->holder && hostproc_read_stat(j->holder, &st) == 0 &&
	    st.start_ticks == j->holder_ticks)
		mark_held(s, dir, snap, j->holder, j, keep);
	(void)snprintf(path, sizeof(path), "%s/cgroup.procs", j->cgroup);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || (k = read(fd, buf, sizeof(buf) - 1)) <= 0)
		return;
	buf[k] = '\0';
	/* the first page of them: a job's processes inherit its descriptors alike */
	for (char *p = buf, *end; *p; p = end) {
		long pid = strtol(p, &end, 10);
		if (end == p)
			break;
		mark_held(s, dir, snap, (pid_t)pid, j, keep);
	}
}

/* Narrows j to the devices keep[] marks: the filter of those (and the shared nodes) on top of
 * its own, the lost ones' nodes that no kept device needs denied. */
static int narrow(struct agent_socket *s, const struct gpuctl_snapshot *snap, struct confined *j,
                  const bool *keep, char *why, size_t size)
{
	_cleanup_(gpuctl_devset_freep) struct gpuctl_devset *kept = NULL, *lost = NULL;
	struct agent_devnode allow[AGENT_MAX_NODES], deny[AGENT_MAX_NODES];
	uint32_t guarded[2];
	size_t n_allow = 0, n_guarded = 0, n_deny = 0;
	json_t *names = json_array();
	int r;

	if (!names || gpuctl_devset_new(&kept) < 0 || gpuctl_devset_new(&lost) < 0) {
		json_decref(names);
		return -ENOMEM;
	}
	for (size_t i = 0; i < j->n; i++) {
		size_t g;
		int mig;
		if (device_of(snap, j->uuids[i], &g, &mig))
			(void)gpuctl_devset_add(keep[i] ? kept : lost, g, mig);
	}
	r = filter_of(snap, kept, s->ctx, allow, &n_allow, guarded, &n_guarded, names, why, size);
	json_decref(names);
	if (r == 0)
		r = lost_nodes(snap, lost, s->ctx, allow, n_allow, deny, &n_deny);
	if (r == 0) {
		struct agent_devfilter f = {allow, n_allow, guarded, n_guarded};
		r = agent_cgroup_narrow(s->cgroups, j->cgroup, &f, deny, n_deny);
		if (r < 0)
			(void)snprintf(why, size, "%s", strerror(-r));
	}
	return r;
}

/* At each sample: a confined job none of whose processes (nor its gpuctl) holds a device's
 * lease any more (taken back: its lock file replaced) loses that device within the sample. */
static void revoke_ended(struct agent_socket *s)
{
	_cleanup_(gpuctl_lease_dir_freep) struct gpuctl_lease_dir *dir = NULL;
	const struct gpuctl_snapshot *snap = s->sample ? exporter_sample_snapshot(s->sample) : NULL;
	size_t w = 0;
	bool changed = false;

	if (!s->n_jobs || !snap || !s->cgroups ||
	    gpuctl_lease_dir_open(s->ctx, gpuctl_site_lease_dir_path(s->site), &dir) < 0)
		return;
	for (size_t i = 0; i < s->n_jobs; i++) {
		struct confined *j = &s->jobs[i];
		bool keep[AGENT_MAX_NODES] = {false}, all = true;
		char why[512] = "";
		if (access(j->cgroup, F_OK) < 0) { /* ended and swept */
			confined_free(j);
			changed = true;
			continue;
		}
		s->jobs[w++] = *j;
		j = &s->jobs[w - 1];
		held_now(s, dir, snap, j, keep);
		for (size_t k = 0; k < j->n && k < AGENT_MAX_NODES; k++)
			all = all && keep[k];
		if (all)
			continue;
		if (narrow(s, snap, j, keep, why, sizeof(why)) < 0) {
			cli_error(
			        "agent: %s: a lease of the job ended, but its filter could not be "
			        "narrowed: %s (trying again next sample)",
			        j->cgroup, why);
			continue;
		}
		size_t n = 0;
		for (size_t k = 0; k < j->n; k++) {
			if (keep[k]) {
				j->uuids[n++] = j->uuids[k];
				continue;
			}
			cli_error("agent: %s: the lease of %s ended: the job may no longer open it",
			          j->cgroup, j->uuids[k]);
			free(j->uuids[k]);
		}
		j->n = n;
		changed = true;
	}
	s->n_jobs = w;
	if (changed)
		state_write(s);
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
		                "no request line (one line of JSON, within 250 ms)");
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
	for (int i = 0; i < AGENT_SOCKET_PER_WAKE; i++) {
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
	for (size_t i = 0; i < s->n_jobs; i++)
		confined_free(&s->jobs[i]);
	free(s->jobs);
	sampler_put(s->sample);
	free(s->state_path);
	free(s->path);
	free(s);
}
