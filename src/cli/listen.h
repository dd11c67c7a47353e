/* SPDX-License-Identifier: MIT */
/*
 * listen.h: the pure parser of `gpuctl exporter --listen ADDR:PORT`. No I/O, no name lookup:
 * the fuzzer (fuzz/fuzz-listen.c) links exactly this file.
 *
 * Accepted forms (docs/gpuctl.1, exporter): ":PORT" (every address, IPv6 and IPv4),
 * "IPV4:PORT", "[IPV6]:PORT", "HOSTNAME:PORT"; PORT is decimal, 1-65535. An IPv6 address must be
 * in brackets (its own colons would make the port ambiguous).
 */
#ifndef GPUCTL_CLI_LISTEN_H
#define GPUCTL_CLI_LISTEN_H

#include <stdint.h>

/* The exporter's default port (docs/metrics.md "Port"): clear of Prometheus' 9090-9093,
 * node_exporter's 9100, dcgm-exporter's 9400 and nvidia_gpu_exporter's 9835. */
#define LISTEN_DEFAULT_PORT 9409
#define LISTEN_DEFAULT      ":9409"

/* Longest host name accepted (RFC 1035's 253 characters of a full name). */
#define LISTEN_MAX_HOST 253

enum listen_kind {
	LISTEN_ANY,  /* ":PORT": every local address */
	LISTEN_IPV4, /* an IPv4 literal */
	LISTEN_IPV6, /* an IPv6 literal (given in brackets) */
	LISTEN_NAME, /* a host name, resolved when binding */
};

struct listen_spec {
	enum listen_kind kind;          /* which form was given */
	char host[LISTEN_MAX_HOST + 1]; /* the address or name without brackets; "" for ANY */
	uint16_t port;                  /* 1-65535 */
};

/* Parses text. Returns 0 and fills *ret_spec; -EINVAL with *ret_why (a static phrase, e.g.
 * "port must be 1-65535") when text is not one of the forms above. *ret_spec is written only on
 * success; ret_why may be NULL. */
int listen_parse(const char *text, struct listen_spec *ret_spec, const char **ret_why);

#endif /* GPUCTL_CLI_LISTEN_H */
