/* SPDX-License-Identifier: MIT */
/*
 * agent-cgroup.h: the node agent's job cgroups for enforce = cgroup (docs/agent.md, "Confining
 * jobs"): one cgroup per job under a parent of gpuctl's own, whose device filter lets the job
 * open only its GPUs' device nodes among the NVIDIA ones: the cgroup v1 `devices` controller, or
 * a cgroup v2 eBPF device program (agent-cgroup-bpf.c). Runs on the agent's main thread.
 */
#ifndef GPUCTL_CLI_AGENT_CGROUP_H
#define GPUCTL_CLI_AGENT_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Which cgroup version confines: the v1 devices controller, or v2 with a device program. */
enum agent_cgroup_mode {
	AGENT_CGROUP_AUTO, /* v1 when a v1 devices hierarchy is mounted, else v2 */
	AGENT_CGROUP_V1,
	AGENT_CGROUP_V2,
};

/* A character device node, major:minor. */
struct agent_devnode {
	uint32_t major;
	uint32_t minor;
};

/* What a job may open. Character devices of a guarded major are denied unless listed in allow;
 * every other device (block devices, other majors: /dev/null, ptys) is allowed. */
struct agent_devfilter {
	const struct agent_devnode *allow; /* nodes of guarded majors the job may open */
	size_t n_allow;
	const uint32_t *guarded; /* majors whose nodes are denied unless in allow */
	size_t n_guarded;
};

struct agent_cgroups;

/* Finds the hierarchy of mode (AUTO: chosen here) in /proc/self/mountinfo and makes the parent
 * (a relative path such as "gpuctl", created with its missing components). 0, or -errno with
 * why (one clause) in why[]. */
int agent_cgroups_new(enum agent_cgroup_mode mode, const char *parent, struct agent_cgroups **ret,
                      char *why, size_t why_size);
/* The version in use (V1 or V2) and the parent's absolute path. */
enum agent_cgroup_mode agent_cgroups_mode(const struct agent_cgroups *c);
const char *agent_cgroups_parent(const struct agent_cgroups *c);

/* Makes the job cgroup of process pid (started at start_ticks after boot), applies f and moves
 * pid into it. 0 with the cgroup's absolute path in path[], or -errno with why[] (a refusal: the
 * process is under a device filter already, -EEXIST; it is gone, -ESRCH). Nothing is left
 * behind on failure. */
int agent_cgroup_confine(struct agent_cgroups *c, pid_t pid, uint64_t start_ticks,
                         const struct agent_devfilter *f, char *path, size_t path_size, char *why,
                         size_t why_size);

/* Narrows the filter of the job cgroup at path: v1 denies each node of deny[]; v2 attaches the
 * program of keep beside the one it has (every program must allow an access). 0 or -errno. */
int agent_cgroup_narrow(struct agent_cgroups *c, const char *path,
                        const struct agent_devfilter *keep, const struct agent_devnode *deny,
                        size_t n_deny);

/* Removes the job cgroups of the parent that no process is in any more (each sample). */
void agent_cgroups_sweep(struct agent_cgroups *c);

/* Forgets c; the job cgroups stay (their jobs run on; the next agent's sweep removes them). */
void agent_cgroups_free(struct agent_cgroups *c);

/* agent-cgroup-bpf.c: the cgroup v2 device program of f, loaded and attached to the cgroup
 * directory dirfd (BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI). 0 or -errno. */
int agent_cgroup_bpf_attach(int dirfd, const struct agent_devfilter *f);
/* How many device programs apply to the cgroup directory dirfd (its own and its ancestors'),
 * or -errno. */
int agent_cgroup_bpf_count(int dirfd);

#endif /* GPUCTL_CLI_AGENT_CGROUP_H */
