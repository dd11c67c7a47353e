/* SPDX-License-Identifier: MIT */
/*
 * agent-proto.h: the pure parsers of enforce = cgroup (docs/agent.md, "Enforcement: cgroup"): the
 * socket's request and reply lines, and the kernel's text the agent reads (a mountinfo line, a
 * /proc/PID/cgroup line, a /proc/devices line), and a line of each state file (the confined
 * jobs; enforce = acl's original node modes). No I/O; fuzz/fuzz-agent-proto.c drives them.
 */
#ifndef GPUCTL_CLI_AGENT_PROTO_H
#define GPUCTL_CLI_AGENT_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A request line from the process caller_pid: 0 for {"request": "confine"} (a "pid" member must
 * be caller_pid), else -EINVAL with why[] (one clause). */
int agent_request_parse(const char *line, long caller_pid, char *why, size_t why_size);

/* A reply line: 0 with *ret_ok and text[] (the cgroup when ok, else the agent's reason), or
 * -EINVAL when it is not a reply. */
int agent_reply_parse(const char *line, bool *ret_ok, char *text, size_t text_size);

/* One /proc/self/mountinfo line (changed in place): true with the mount point in mnt[] when it
 * mounts the cgroup v1 hierarchy with the devices controller (v1) or cgroup2 (!v1). */
bool agent_mountinfo_cgroup(char *line, bool v1, char *mnt, size_t size);

/* One /proc/PID/cgroup line ("ID:CONTROLLERS:PATH"; changed in place): true with *ret_path
 * (into line) when it is the devices controller's (v1) or the unified hierarchy's (!v1). */
bool agent_proc_cgroup_line(char *line, bool v1, const char **ret_path);

/* One /proc/devices line: 1 for a character device ("MAJOR name") with *ret_major and name[],
 * 0 for anything else (a section header updates *in_chars), -1 at "Block devices:" (stop). */
int agent_proc_devices_line(const char *line, bool *in_chars, uint32_t *ret_major, char *name,
                            size_t name_size);

/* One line of the agent's confined-jobs state file (changed in place): "HOLDER HOLDER_TICKS
 * NAME UUID..." with NAME a job cgroup's, "job-PID-TICKS" (decimal), HOLDER 0 or a pid. true
 * with *ret_name and the devices in uuids[0..*ret_n), each pointing into line; false for any
 * other line, and for one of more than max devices (a job is never narrowed from part of its
 * list). */
bool agent_state_line(char *line, int32_t *ret_holder, uint64_t *ret_ticks, const char **ret_name,
                      const char **uuids, size_t max, size_t *ret_n);

/* One line of enforce = acl's state file (changed in place): "MODE UID GID MAJOR:MINOR ACL
 * PATH", the mode octal (at most 07777), ACL an access ACL's text without spaces or "-" (none),
 * PATH to the end of the line and naming a node the agent guards under dev_dir
 * (DEV_DIR/nvidiaN or DEV_DIR/nvidia-caps/nvidia-capN). true with *ret filled (its strings
 * point into line); false for any other line. */
struct agent_acl_state {
	uint32_t mode, uid, gid, major, minor;
	const char *acl; /* NULL: "-" */
	const char *path;
};
bool agent_acl_state_line(char *line, const char *dev_dir, struct agent_acl_state *ret);

#endif /* GPUCTL_CLI_AGENT_PROTO_H */
