/* SPDX-License-Identifier: MIT */
/*
 * context.h: the context (the loaded NVML library, the last error message, the log hook) and the
 * NVML call in flight.
 *
 * Part of libgpuctl's public API (include <gpuctl/gpuctl.h>, which includes every header; the
 * rules that hold for all of them are there). Compiles on its own, as C and as C++
 * (tests/unit/test-headers.c).
 */
#ifndef GPUCTL_CONTEXT_H
#define GPUCTL_CONTEXT_H

#include <stddef.h>

#include "decls.h"

/* Exported: see gpuctl.h, "What these headers declare is libgpuctl's whole ABI". */
GPUCTL_BEGIN_DECLS

/* ---- Context: the loaded NVML library, the last error message, the log hook ---- */

/* One thread at a time; whatever it makes outlives it (gpuctl.h, "Thread safety and lifetimes"). */
struct gpuctl_ctx;

/* Log levels passed to the log hook. The library itself never writes to stderr. */
enum gpuctl_log_level {
	GPUCTL_LOG_DEBUG = 0,
	GPUCTL_LOG_INFO = 1,
	GPUCTL_LOG_WARNING = 2,
};

typedef void (*gpuctl_log_fn)(void *userdata, enum gpuctl_log_level level, const char *msg);

/* Creates a context. Loads nothing yet. */
int gpuctl_ctx_new(struct gpuctl_ctx **ret_ctx);
void gpuctl_ctx_free(struct gpuctl_ctx *ctx);

/* The message describing the last failure on this context ("" if none). Owned by ctx. */
const char *gpuctl_errmsg(const struct gpuctl_ctx *ctx);

/* Installs a log hook (NULL removes it). Messages about unavailable NVML functions or fields
 * are emitted at most once per context. */
void gpuctl_ctx_set_log(struct gpuctl_ctx *ctx, gpuctl_log_fn fn, void *userdata);

/* How long lease calls on this context wait for a lease directory's select.lock (which every
 * select-and-lease holds for milliseconds, but which any user who can open the file could hold
 * longer) before giving up with -EAGAIN and a message naming the holder (pid, user, how long):
 * select-and-lease and wait tickets wait this long (default 10 s), readers (lease lists,
 * foreign processes) at most 1 s or this long when it is shorter; release proceeds without
 * the lock after that. A waiting gpuctl_alloc waits for it until its own deadline instead,
 * ending early on its cancel_fd. seconds from 0 (try once) to 3600; -EINVAL otherwise. */
int gpuctl_ctx_set_lock_wait(struct gpuctl_ctx *ctx, double seconds);

/* Loads NVML: $GPUCTL_NVML_LIBRARY if set (then only that file), else libnvidia-ml.so.1, else
 * libnvidia-ml.so; then nvmlInit. Idempotent. Returns -ENOENT when no library is found (no
 * driver), -ENOEXEC when the file loaded is not an NVML library (not a shared object, or lacks
 * nvmlInit & co.), -ENODEV when the library loads but NVML cannot initialise (driver not
 * loaded, no permission), -ENOMEM. gpuctl_snapshot_take() also returns -EIO when NVML cannot
 * count the GPUs. */
int gpuctl_nvml_load(struct gpuctl_ctx *ctx);

/* After a successful load: the path the NVML library was loaded from (as the dynamic linker
 * resolved it), or NULL. Owned by ctx. */
const char *gpuctl_nvml_library_path(const struct gpuctl_ctx *ctx);

/* A call into NVML that has not returned (yet): what gpuctl_nvml_call_in_flight reports. The
 * caller allocates it: initialise with GPUCTL_NVML_CALL_INIT (the library writes only the
 * first struct_size bytes). */
struct gpuctl_nvml_call {
	size_t struct_size;   /* sizeof(struct gpuctl_nvml_call) */
	const char *function; /* NVML's name of the call ("nvmlDeviceGetPowerUsage", "nvmlInit_v2"),
	                       * static storage */
	int gpu;              /* NVML index of the GPU it is about; -1 for a call about no GPU
	                       * (nvmlInit_v2, nvmlDeviceGetCount_v2, the system queries) */
	char pci_bus_id[32];  /* that GPU's PCI bus id ("00000000:47:00.0") when it was read before
	                       * the call, else "" */
	double seconds;       /* how long the call has been in flight (CLOCK_MONOTONIC_COARSE:
	                       * a few milliseconds coarse) */
};
#define GPUCTL_NVML_CALL_INIT                                                                      \
	{                                                                                          \
		.struct_size = sizeof(struct gpuctl_nvml_call)                                     \
	}

/* The NVML call the context's thread is in now, for another thread to see that a driver stopped
 * answering: a call blocked in NVML cannot be cancelled, so the library only says which it is
 * and since when, and the program decides (the command line gives up after GPUCTL_NVML_TIMEOUT
 * seconds; a monitor marks its readings stale). The one function that may be called from any
 * thread while the context's own thread uses it (it reads a record the calls update with
 * atomic stores: no lock, no system call); ctx must stay alive meanwhile. Covers every call
 * made by gpuctl_nvml_load, gpuctl_snapshot_take*, gpuctl_snapshot_refresh, gpuctl_alloc and
 * the other functions that take snapshots, and gpuctl_xid_watch_new's set-up; not the waiting
 * in gpuctl_xid_watch_wait (it waits as long as asked) nor nvmlShutdown in gpuctl_ctx_free.
 * Returns 1 and fills *ret_call while a call is in flight, 0 when none is (ret_call
 * untouched), -EINVAL for NULL or a struct_size that does not cover seconds, -EAGAIN in the
 * unlikely case the record kept changing while it was read (ask again). */
int gpuctl_nvml_call_in_flight(const struct gpuctl_ctx *ctx, struct gpuctl_nvml_call *ret_call);

/* Where the dynamic linker finds a library by soname (e.g. "libcuda.so.1"): dlopen()s it
 * without running anything of it beyond its constructors, and writes the resolved path to
 * *ret_path (malloc'ed). -ENOENT when it is not found. Used by `gpuctl info`. */
int gpuctl_library_locate(const char *soname, char **ret_path);

GPUCTL_END_DECLS

#endif /* GPUCTL_CONTEXT_H */
