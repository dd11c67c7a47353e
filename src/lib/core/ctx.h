/* SPDX-License-Identifier: MIT */
/*
 * ctx.h: the private side of struct gpuctl_ctx, shared by the library's modules.
 *
 * Decisions:
 * - The context owns the loaded NVML (struct nvml, private to src/lib/nvml/), the last error
 *   message, the log hook and the "once" set that keeps each unavailable-function message to one
 *   line per context.
 * - ctx_error() stores a message and returns the -errno it was given, so call sites read
 *   `return ctx_error(ctx, -EINVAL, "...")`. Messages are one line, without a "gpuctl:" prefix
 *   (programs add their own).
 * - The library never writes to stdout/stderr: without a hook, log lines are dropped.
 * - The NVML call in flight (struct ctx_nvml_call) is the one part of a context another thread
 *   may read while the context's own thread uses it (gpuctl_nvml_call_in_flight): it lives here
 *   and not in struct nvml because nvmlInit, the first call that can hang, runs before there is
 *   a struct nvml to hold it.
 */
#ifndef GPUCTL_CTX_H
#define GPUCTL_CTX_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuctl/gpuctl.h"
#include "util.h"

struct nvml;

#define CTX_ERRMSG_MAX 512

/* The NVML call in flight on a context: the NVML loader writes it around every call it makes
 * for the context, gpuctl_nvml_call_in_flight (nvml-call.c) reads it from any thread. A
 * sequence lock: seq is odd while the fields are being written, so a reader that saw the same
 * even seq before and after reading them read one call's fields, not one call's name and
 * another's GPU. Only the context's thread writes (one thread at a time, gpuctl.h). */
struct ctx_nvml_call {
	_Atomic uint64_t seq;           /* even: fields stable; odd: being written */
	_Atomic(const char *) function; /* NVML's name of the call, static; NULL: none in flight */
	_Atomic uint64_t gpu;           /* NVML index of its GPU, UINT64_MAX: about no GPU */
	_Atomic uint64_t pci_bus_id[2]; /* that GPU's PCI bus id as known before the call (NVML's
	                                 * 16-character form, NUL-padded); zero: not known */
	_Atomic int64_t since_ns;       /* CLOCK_MONOTONIC_COARSE when the call began */
};

struct gpuctl_ctx {
	struct nvml *nvml;                /* loaded NVML, NULL until gpuctl_nvml_load() succeeds */
	void (*nvml_free)(struct nvml *); /* frees nvml: set with it by the loader (core/ calls no
	                                   * room above it) */
	char errmsg[CTX_ERRMSG_MAX];      /* last failure, "" if none */
	gpuctl_log_fn log_fn;             /* log hook, NULL: drop log lines */
	void *log_userdata;               /* passed to log_fn */
	char **once;                      /* keys already logged once (ctx_log_once), owned */
	size_t n_once;                    /* entries used in once */
	size_t cap_once;                  /* entries allocated in once */
	/* how long lease calls wait for DIR/select.lock (lease-dir.c, docs/leases.md "Bounds") */
	bool lock_wait_set;    /* gpuctl_ctx_set_lock_wait was called */
	int64_t lock_wait_ms;  /* its value */
	bool lock_in_wait;     /* gpuctl_alloc is waiting in line: the two below rule instead */
	int64_t lock_until_ms; /* monotonic_ms() deadline of that wait, INT64_MAX: none */
	int lock_cancel_fd;    /* its cancel descriptor, -1: none */
	/* the NVML call in flight (gpuctl_nvml_call_in_flight, nvml-call.c, reads it from any
	 * thread) */
	struct ctx_nvml_call call;
};

/* ctx-log.c: stores the message and returns r (a -errno). */
int ctx_error(struct gpuctl_ctx *ctx, int r, const char *fmt, ...) _printf_(3, 4);
/* Puts "<formatted prefix>: " before the message already on ctx (or, when there is none,
 * before strerror(-r)) and returns r: a caller adds what it was doing to a callee's reason. */
int ctx_error_prefix(struct gpuctl_ctx *ctx, int r, const char *fmt, ...) _printf_(3, 4);
/* Emits one log line through the hook, if any. */
void ctx_log(struct gpuctl_ctx *ctx, enum gpuctl_log_level level, const char *fmt, ...)
        _printf_(3, 4);
/* Emits the line only the first time key is seen on this context. Returns true when it was
 * the first time (also when there is no hook, so the set stays exact). */
bool ctx_log_once(struct gpuctl_ctx *ctx, const char *key, enum gpuctl_log_level level,
                  const char *fmt, ...) _printf_(4, 5);

#endif /* GPUCTL_CTX_H */
