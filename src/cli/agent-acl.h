/* SPDX-License-Identifier: MIT */
/*
 * agent-acl.h: the agent's enforce = acl (docs/agent.md, "Enforcement: acl"): the device nodes
 * of the GPUs of every pool whose enforce is acl are closed to users and opened, with a POSIX
 * ACL entry, to the users holding a lease on them; restored when the agent stops.
 */
#ifndef GPUCTL_CLI_AGENT_ACL_H
#define GPUCTL_CLI_AGENT_ACL_H

#include "exporter.h"

struct agent_acl;

/* dev_dir: where the nodes are (absolute); state_path: the file that keeps the nodes'
 * original owner, mode and ACL across a crash (read now: nodes a crashed agent closed are
 * restored or taken over at the first sample). 0 or -ENOMEM. */
int agent_acl_new(const char *dev_dir, const char *state_path, struct agent_acl **ret);

/* Sample v: closes the nodes of the GPUs (and MIG devices) of acl pools, grants read-write to
 * each lease holder's user and revokes it from users who hold none now; restores the nodes of
 * GPUs that left acl mode. */
void agent_acl_sample(struct agent_acl *acl, const struct exporter_view *v);

/* Restores every node it closed (owner, group, mode, ACL) and frees acl; NULL is fine. */
void agent_acl_free(struct agent_acl *acl);

#endif /* GPUCTL_CLI_AGENT_ACL_H */
