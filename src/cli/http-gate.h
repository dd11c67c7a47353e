// SPDX-License-Identifier: MIT
/*
 * http-gate.h: the exporter's gate (src/cli/http-gate.c): it accepts the connections and
 * relays each to libmicrohttpd through a socket pair, checking the request heads on the way
 * (http-check.h).
 */
#ifndef GPUCTL_HTTP_GATE_H
#define GPUCTL_HTTP_GATE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* Hands the server its end of a new connection's socket pair, with the client's address (for
 * the server's per-address limit). 0, or -1 when the server refused it (it closed fd then). */
typedef int (*http_gate_add_fn)(void *cls, int fd, const struct sockaddr *addr, socklen_t addrlen);

struct http_gate;

/* Starts the gate's thread on listen_fd (a listening socket; the gate owns it from now on, and
 * closes it when stopped, even when the start fails), relaying at most max_conns connections at
 * once. verbose: each refused request is said on stderr. 0, or -errno. */
int http_gate_start(int listen_fd, size_t max_conns, http_gate_add_fn add, void *cls, bool verbose,
                    struct http_gate **ret_gate);
/* Stops the thread, closes every connection it relays and the listening socket, frees g. */
void http_gate_stop(struct http_gate *g);

#endif /* GPUCTL_HTTP_GATE_H */
