/* SPDX-License-Identifier: MIT */
/*
 * agent-socket.h: the node agent's Unix socket (docs/agent.md, "Enforcement: cgroup"): `gpuctl run`
 * asks it to confine the calling process to the devices of the leases it holds (enforce =
 * cgroup). One request per connection, one JSON line each way; served on the agent's main
 * thread from the exporter's loop (exporter_hook.fd).
 */
#ifndef GPUCTL_CLI_AGENT_SOCKET_H
#define GPUCTL_CLI_AGENT_SOCKET_H

#include "agent-cgroup.h"
#include "exporter.h"

#define AGENT_SOCKET_DEFAULT "/run/gpuctl/agent.sock"

struct agent_socket;

/* Listens on path (a socket left there by an earlier agent is replaced; anything else is
 * not), mode 0666: any user may ask. 0, or -errno with why. */
int agent_socket_open(const char *path, struct agent_socket **ret, char *why, size_t why_size);
int agent_socket_fd(const struct agent_socket *s);
/* The confinement it grants (borrowed; NULL: every request is refused, saying so), and the
 * root-only state file where the jobs confined are kept for the next agent (NULL: none): the
 * jobs an earlier agent kept there whose cgroups exist are read now, to be narrowed alike. */
void agent_socket_set_cgroups(struct agent_socket *s, struct agent_cgroups *c,
                              const char *state_path);
/* The sample requests are checked against (the lease directory and the devices): v's sample is
 * held until the next (exporter_view.sample). */
void agent_socket_sample(struct agent_socket *s, const struct exporter_view *v);
/* Serves the connections waiting (the socket is readable). */
void agent_socket_serve(struct agent_socket *s);
/* Closes, removes the socket file, drops the held sample. NULL is fine. */
void agent_socket_free(struct agent_socket *s);

#endif /* GPUCTL_CLI_AGENT_SOCKET_H */
