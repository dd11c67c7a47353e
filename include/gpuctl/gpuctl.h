/* SPDX-License-Identifier: MIT */
/*
 * gpuctl.h: the public C API of libgpuctl, one header per concept under this one (as libgit2's
 * include/git2/): include this one; each of the others also compiles alone.
 *
 * Decisions:
 * - Every handle is opaque and has a _free() that accepts NULL.
 * - Functions return int: >= 0 on success, -errno on failure; the reason is kept on the context
 *   and read with gpuctl_errmsg(). The library never prints and never exits.
 * - Out-parameters are named ret_*, come last and are written only on success.
 * - A snapshot is one consistent reading of the machine. Every per-GPU fact is reached through a
 *   field id (enum gpuctl_field), so renderers (table, CSV, JSON, --query, the exporter) are
 *   data-driven and a fact that NVML could not give is simply "unavailable" (-ENODATA), never 0.
 * - A GPU's identity is its UUID; indices are NVML's (PCI bus order), for people.
 * - Structs can grow at their end without breaking programs built against an older header.
 *   Those the caller allocates (requests, options, and what gpuctl_snapshot_link,
 *   gpuctl_selection_score and gpuctl_xid_lookup fill) start with size_t struct_size, set by
 *   their _INIT macro: the library reads and writes only the first struct_size bytes. Those the
 *   library owns and hands out by pointer (struct gpuctl_field_info, _health_finding,
 *   _lease_owner, _wait_entry, _config_settings, _workload) are only read through that
 *   pointer: never allocate one, step through an array of them or rely on their size.
 *   (struct gpuctl_ledger_report_row is one of those.)
 *
 * Every header is C and C++ clean and compiles on its own (tests/unit/test-headers.c checks).
 */
#ifndef GPUCTL_GPUCTL_H
#define GPUCTL_GPUCTL_H

/* What these headers declare is libgpuctl's whole ABI: the library is compiled with
 * -fvisibility=hidden, and each header declares its functions between GPUCTL_BEGIN_DECLS and
 * GPUCTL_END_DECLS (decls.h: C linkage, `GCC visibility push(default)`), so these declarations
 * alone decide what libgpuctl.so exports and what stays global in the installed libgpuctl.a
 * (docs/ARCHITECTURE.md, "Exported names"). A declaration anywhere else (a private header of
 * src/lib) stays hidden.
 *
 * The headers, lowest first (each includes those it needs):
 *   version.h    GPUCTL_VERSION_* and gpuctl_version()
 *   context.h    the context: NVML loading, error messages, the log hook, the call in flight
 *   workload.h   who a process works for: Slurm step, pod, container, unit, session
 *   ledger.h     the usage ledger the agent writes from what it observes, and its report
 *   field.h      enum gpuctl_field: every per-GPU fact, and each field's metadata
 *   snapshot.h   taking and refreshing snapshots; GPUs, MIG devices, compute processes
 *   topology.h   pair facts (PCIe level, NVLink, P2P, bandwidth) and the host CPU
 *   devices.h    GPU ids, device sets, device strings (CUDA, NVIDIA, Slurm, Docker, CDI, k8s)
 *   selection.h  sizes, the selection request, gpuctl_select() and its score
 *   lease.h      lease directories, lease lists, foreign processes, select-and-lease
 *   idle.h       idle devices found from samples: leases, processes, ghost memory
 *   devnode.h    the device nodes of a GPU or MIG device (/dev/nvidiaN, nvidia-caps)
 *   wait.h       waiting in line for leases
 *   config.h     the configuration file: settings and pools
 *   health.h     XIDs, the CUDA probe, the health state file, the health check
 *   site.h       configuration and lease directory opened together
 *   alloc.h      gpuctl_alloc(): the one call `gpuctl select` and `gpuctl run` make */
#include "version.h"
#include "context.h"
#include "workload.h"
#include "ledger.h"
#include "field.h"
#include "snapshot.h"
#include "topology.h"
#include "devices.h"
#include "selection.h"
#include "lease.h"
#include "idle.h"
#include "devnode.h"
#include "wait.h"
#include "config.h"
#include "health.h"
#include "site.h"
#include "alloc.h"

/* ---- Thread safety and lifetimes ----
 *
 * The library takes no lock and keeps no state outside the objects it hands out (one atomic
 * counter aside), so threads use it at once under these rules, like libcurl's easy handles and
 * libgit2's repositories; tests/unit/test-threads.c checks them.
 *
 * - A context is used by one thread at a time: every call that takes it may change it (the
 *   message gpuctl_errmsg() returns, the log-once set, the NVML handles kept for
 *   gpuctl_snapshot_refresh). Give each thread its own context (cheap: NVML counts its own
 *   initialisations and is thread-safe), or hold one lock around each call and the
 *   gpuctl_errmsg() that reads its failure. The log hook runs in the thread of the call that
 *   logs and must not use that context. The exception: gpuctl_nvml_call_in_flight, which any
 *   thread may call while the context's thread is inside NVML (that is what it is for).
 * - Any other object: what takes it const only reads it, so any number of threads may do that
 *   at once, each with its own context; what takes it non-const needs it to itself. Snapshots,
 *   selections, health reports, configurations, lease and wait lists, foreign-process scans,
 *   sites and allocations never change once made; device sets, XID logs and leases change
 *   only through the functions that take them non-const; a context, an XID watch and a wait
 *   ticket are one thread's at a time; a lease directory never changes once opened (lease.h
 *   says how to share one).
 * - Functions that take no object (gpuctl_version, gpuctl_field_info, gpuctl_field_lookup,
 *   gpuctl_xid_lookup, the _name and _lookup functions, gpuctl_library_locate) may be called
 *   from any thread at any time.
 * - What an object hands out by pointer (a struct gpuctl_gpu, a string, a selection's device
 *   set, a lease list's owner) is borrowed: valid while that object lives, unchanged.
 * - No object keeps a pointer into the context it was made with (only the strings
 *   gpuctl_errmsg and gpuctl_nvml_library_path return are the context's): a snapshot, and
 *   whatever is made from one, outlives its context and can be used with another (a snapshot
 *   one context took is a valid prev for another's gpuctl_snapshot_refresh). The exception is
 *   an XID watch, which uses its context's NVML library: free it before that context.
 * - Device sets, selections, lease lists, health reports and XID logs name devices by snapshot
 *   index and keep no pointer to the snapshot: they outlive it, but their indices mean
 *   something only for it (or for a refresh of it).
 * - The process: the library reads the environment (GPUCTL_*, CUDA_VISIBLE_DEVICES & co.) with
 *   getenv(), so no thread may change it (setenv, putenv) during a call; it installs no signal
 *   handler and changes no signal mask, umask, working directory or locale. A lease's lock
 *   descriptors are inherited across fork() (that is how a job keeps its lease).
 */

#endif /* GPUCTL_GPUCTL_H */
