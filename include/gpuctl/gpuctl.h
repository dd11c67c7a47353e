/* SPDX-License-Identifier: MIT */
/*
 * gpuctl.h: the public C API of libgpuctl.
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
 *   _lease_owner, _wait_entry, _config_settings) are only read through that pointer: never
 *   allocate one, step through an array of them or rely on their size.
 *
 * This header is C and C++ clean and compiles on its own (tests/unit/test-headers.c checks).
 */
#ifndef GPUCTL_GPUCTL_H
#define GPUCTL_GPUCTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What this header declares is libgpuctl's whole ABI: the library is compiled with
 * -fvisibility=hidden, so these declarations alone decide what libgpuctl.so exports and what
 * stays global in the installed libgpuctl.a (docs/ARCHITECTURE.md, "Exported names"). */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* ---- Version ---- */

/* The version of this header: the libgpuctl the program is compiled against. They equal
 * CMakeLists.txt's project(gpuctl VERSION ...); the library does not build when they differ.
 * GPUCTL_VERSION_NUMBER is 0xMMmmpp (one byte each, as LIBCURL_VERSION_NUM), so versions compare
 * as numbers: #if GPUCTL_VERSION_NUMBER >= GPUCTL_VERSION_ENCODE(0, 2, 0). */
#define GPUCTL_VERSION_MAJOR                       0
#define GPUCTL_VERSION_MINOR                       1
#define GPUCTL_VERSION_PATCH                       0
#define GPUCTL_VERSION_STRING                      "0.1.0"
#define GPUCTL_VERSION_ENCODE(major, minor, patch) (((major) << 16) | ((minor) << 8) | (patch))
#define GPUCTL_VERSION_NUMBER                                                                      \
	GPUCTL_VERSION_ENCODE(GPUCTL_VERSION_MAJOR, GPUCTL_VERSION_MINOR, GPUCTL_VERSION_PATCH)

/* The version of the libgpuctl the program runs with, as that library was built: with a shared
 * library it may be newer than the header the program was compiled with. Writes each ret_* that
 * is not NULL and returns "MAJOR.MINOR.PATCH" (static storage). Never fails; any thread. */
const char *gpuctl_version(unsigned *ret_major, unsigned *ret_minor, unsigned *ret_patch);

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
 *   ticket are one thread's at a time; a lease directory never changes once opened (see there
 *   for sharing).
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

/* ---- Context: the loaded NVML library, the last error message, the log hook ---- */

/* One thread at a time; whatever it makes outlives it (see "Thread safety and lifetimes"). */
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

/* ---- Snapshot ---- */

/* Never changes once taken: any number of threads may read one at once. It keeps nothing of its
 * context (the NVML handles stay in the context), so it outlives it. The GPUs, MIG devices,
 * processes and strings it hands out live as long as it does. */
struct gpuctl_snapshot;
struct gpuctl_gpu;
struct gpuctl_mig;
struct gpuctl_proc;

/* What to read beyond each GPU's identity and telemetry. Reading is done once per snapshot. */
enum gpuctl_snapshot_flags {
	GPUCTL_SNAP_BASIC = 0,           /* identity, memory, utilisation, temperature, ... */
	GPUCTL_SNAP_PROCESSES = 1u << 0, /* running compute processes (+ user, command) */
	GPUCTL_SNAP_TOPOLOGY = 1u << 1,  /* pair facts: PCIe level, NVLink, P2P */
	GPUCTL_SNAP_MIG = 1u << 2,       /* MIG devices */
	GPUCTL_SNAP_HEALTH = 1u << 3,    /* ECC, retired pages, remapped rows, PCIe replays */
	GPUCTL_SNAP_PROC_UTIL = 1u << 4, /* processes with their engine utilisation (implies
	                                  * GPUCTL_SNAP_PROCESSES; one more NVML call per GPU) */
	GPUCTL_SNAP_ALL = 0x1fu,
	/* A modifier, not a read: with GPUCTL_SNAP_HEALTH and _TOPOLOGY, leave out the NVLink
	 * error counters, which only a rate check between two samples uses (4 NVML calls per
	 * active link: 384 on a DGX A100). For a one-shot check with no earlier sample to
	 * compare with; gpuctl_alloc sets it when no health state file exists. */
	GPUCTL_SNAP_NO_RATE_COUNTERS = 1u << 5,
	/* A modifier, not a read: with GPUCTL_SNAP_PROCESSES, leave out each process's owner
	 * and command (gpuctl_proc_uid, _user and _command answer unknown), which cost a stat,
	 * a user-database lookup and a read of /proc/PID/cmdline per process. For a caller that
	 * reads /proc for them itself and keeps them between refreshes (gpuctl top). Also taken
	 * by gpuctl_snapshot_refresh. */
	GPUCTL_SNAP_NO_PROC_IDENTITY = 1u << 6,
	/* Each GPU's NVLink states, and whether its first active link reaches an NVSwitch: what
	 * the nvlink-down health check judges, without the pair facts (GPUCTL_SNAP_TOPOLOGY
	 * reads them too). About one NVML call per link. With GPUCTL_SNAP_HEALTH, also the NVLink
	 * error counters unless GPUCTL_SNAP_NO_RATE_COUNTERS. A refresh keeps the previous
	 * snapshot's. */
	GPUCTL_SNAP_NVLINK_STATE = 1u << 7,
};

/* Takes a snapshot (loads NVML first if needed). A GPU that is lost does not fail the
 * snapshot: it is marked lost (gpuctl_gpu_lost) and its unread fields are unavailable. */
int gpuctl_snapshot_take(struct gpuctl_ctx *ctx, unsigned flags, struct gpuctl_snapshot **ret_snap);
void gpuctl_snapshot_free(struct gpuctl_snapshot *snap);

/* System facts. Strings are owned by the snapshot; NULL when unavailable. */
const char *gpuctl_snapshot_driver_version(const struct gpuctl_snapshot *snap);
const char *gpuctl_snapshot_nvml_version(const struct gpuctl_snapshot *snap);
/* CUDA driver API version as NVML encodes it (e.g. 12020 for 12.2); -ENODATA if unavailable. */
int gpuctl_snapshot_cuda_version(const struct gpuctl_snapshot *snap, int *ret_version);
/* The flags the snapshot was taken with. */
unsigned gpuctl_snapshot_flags(const struct gpuctl_snapshot *snap);

size_t gpuctl_snapshot_gpu_count(const struct gpuctl_snapshot *snap);
/* Borrowed pointer, valid until the snapshot is freed; NULL if i is out of range. */
const struct gpuctl_gpu *gpuctl_snapshot_gpu(const struct gpuctl_snapshot *snap, size_t i);

/* ---- Per-GPU fields ---- */

/* Every per-GPU fact. Integer fields are in base units: bytes, milliwatts, MHz, degrees C,
 * percent; booleans are 0/1; enums use the values documented next to them. */
enum gpuctl_field {
	/* identity (strings unless noted) */
	GPUCTL_F_INDEX,         /* int: NVML index (PCI bus order) */
	GPUCTL_F_UUID,          /* "GPU-xxxxxxxx-..." */
	GPUCTL_F_PCI_BUS_ID,    /* "00000000:07:00.0" as NVML prints it */
	GPUCTL_F_PCI_DEVICE_ID, /* int: device id << 16 | vendor id */
	GPUCTL_F_NAME,          /* "NVIDIA A100-SXM4-80GB" */
	GPUCTL_F_BRAND,         /* "Tesla", "GeForce", ... */
	GPUCTL_F_ARCHITECTURE,  /* "Ampere", "Hopper", ... */
	GPUCTL_F_COMPUTE_CAP,   /* "8.0" */
	GPUCTL_F_SERIAL,        /* board serial */
	GPUCTL_F_MINOR_NUMBER,  /* int: N of /dev/nvidiaN */
	/* memory and load */
	GPUCTL_F_MEMORY_TOTAL, /* bytes */
	GPUCTL_F_MEMORY_USED,  /* bytes */
	GPUCTL_F_MEMORY_FREE,  /* bytes */
	GPUCTL_F_UTIL_GPU,     /* percent */
	GPUCTL_F_UTIL_MEMORY,  /* percent */
	/* thermal and power */
	GPUCTL_F_TEMP,          /* C */
	GPUCTL_F_TEMP_SLOWDOWN, /* C, the GPU's slowdown threshold */
	GPUCTL_F_TEMP_SHUTDOWN, /* C, the GPU's shutdown threshold */
	GPUCTL_F_POWER_DRAW,    /* mW */
	GPUCTL_F_POWER_LIMIT,   /* mW, enforced limit */
	/* clocks */
	GPUCTL_F_CLOCK_SM,             /* MHz */
	GPUCTL_F_CLOCK_MEM,            /* MHz */
	GPUCTL_F_CLOCK_SM_MAX,         /* MHz */
	GPUCTL_F_CLOCK_MEM_MAX,        /* MHz */
	GPUCTL_F_CLOCKS_EVENT_REASONS, /* bit mask, NVML's clocks-event reason bits */
	/* PCIe */
	GPUCTL_F_PCIE_GEN, /* current generation */
	GPUCTL_F_PCIE_GEN_MAX,
	GPUCTL_F_PCIE_WIDTH, /* current lanes */
	GPUCTL_F_PCIE_WIDTH_MAX,
	GPUCTL_F_PCIE_REPLAY, /* replay counter (GPUCTL_SNAP_HEALTH) */
	/* modes */
	GPUCTL_F_PERSISTENCE_MODE, /* bool */
	GPUCTL_F_COMPUTE_MODE,     /* enum gpuctl_compute_mode */
	GPUCTL_F_ECC_MODE,         /* bool, current */
	GPUCTL_F_ECC_MODE_PENDING, /* bool, after next reboot */
	GPUCTL_F_MIG_MODE,         /* bool, current */
	GPUCTL_F_MIG_MODE_PENDING, /* bool */
	/* memory errors (GPUCTL_SNAP_HEALTH) */
	GPUCTL_F_ECC_VOL_CORRECTED,
	GPUCTL_F_ECC_VOL_UNCORRECTED,
	GPUCTL_F_ECC_AGG_CORRECTED,
	GPUCTL_F_ECC_AGG_UNCORRECTED,
	GPUCTL_F_RETIRED_SBE,       /* pages retired for multiple single-bit errors (pre-Ampere) */
	GPUCTL_F_RETIRED_DBE,       /* pages retired for double-bit errors (pre-Ampere) */
	GPUCTL_F_RETIRED_PENDING,   /* bool */
	GPUCTL_F_REMAP_CORRECTABLE, /* rows remapped for correctable errors (Ampere+) */
	GPUCTL_F_REMAP_UNCORRECTABLE, /* rows remapped for uncorrectable errors */
	GPUCTL_F_REMAP_PENDING,       /* bool */
	GPUCTL_F_REMAP_FAILURE,       /* bool */
	/* placement */
	GPUCTL_F_NUMA_NODE,     /* int: the CPU NUMA node the GPU is attached to */
	GPUCTL_F_GPU_NUMA_NODE, /* int: the GPU memory's own NUMA node (Grace systems) */
	GPUCTL_F_CPU_AFFINITY,  /* string: ideal CPUs as a Linux cpulist, "0-15,128-143" */
	/* recovery (GPUCTL_SNAP_HEALTH) */
	GPUCTL_F_RECOVERY_ACTION, /* int: the action the driver asks for: enum gpuctl_recovery */
	/* telemetry added for the exporter (and watch) */
	GPUCTL_F_TEMP_MEMORY,  /* int: memory (HBM) temperature, C */
	GPUCTL_F_UTIL_ENCODER, /* int: video encoder utilisation, percent */
	GPUCTL_F_UTIL_DECODER, /* int: video decoder utilisation, percent */
	GPUCTL_F_ENERGY,       /* int: energy used since the driver loaded, mJ */
	/* for watch's groups (nvidia-smi dmon -s v, m, t) */
	GPUCTL_F_VIOLATION_POWER,   /* int: time the power limit held the GPU below its
	                             * application clocks since the driver loaded, ns */
	GPUCTL_F_VIOLATION_THERMAL, /* int: the same for temperature, ns */
	GPUCTL_F_BAR1_TOTAL,        /* int: BAR1 aperture, bytes */
	GPUCTL_F_BAR1_USED,         /* int: BAR1 mapped, bytes */
	GPUCTL_F_PCIE_RX,           /* int: PCIe receive rate, bytes/s (NVML's 20 ms sample) */
	GPUCTL_F_PCIE_TX,           /* int: PCIe send rate, bytes/s */
	/* what nvidia-smi --query-gpu scripts ask for */
	GPUCTL_F_FAN_SPEED,        /* int: the first fan's speed, percent of its maximum */
	GPUCTL_F_PSTATE,           /* int: performance state, 0 (P0, most) to 15 */
	GPUCTL_F_POWER_MGMT_LIMIT, /* int: the software power limit, mW (nvidia-smi -pl) */
	GPUCTL__F_COUNT
};

/* NVML's GPU recovery action values (field NVML_FI_DEV_GET_GPU_RECOVERY_ACTION). */
enum gpuctl_recovery {
	GPUCTL_RECOVERY_NONE = 0,
	GPUCTL_RECOVERY_GPU_RESET = 1,
	GPUCTL_RECOVERY_NODE_REBOOT = 2,
	GPUCTL_RECOVERY_DRAIN_P2P = 3,
	GPUCTL_RECOVERY_DRAIN_AND_RESET = 4,
	GPUCTL_RECOVERY_RECOVER_IMEX = 5,
	GPUCTL_RECOVERY_BUS_RESET = 6,     /* NVML 615: reset the GPU's PCIe bus */
	GPUCTL_RECOVERY_SYSTEM_REBOOT = 7, /* NVML 615: reboot the whole system */
};

enum gpuctl_compute_mode {
	GPUCTL_COMPUTE_DEFAULT = 0,
	GPUCTL_COMPUTE_EXCLUSIVE_THREAD = 1, /* removed from NVML, kept for old drivers */
	GPUCTL_COMPUTE_PROHIBITED = 2,
	GPUCTL_COMPUTE_EXCLUSIVE_PROCESS = 3,
};

enum gpuctl_field_type {
	GPUCTL_FT_INT,
	GPUCTL_FT_STR,
};

/* How a field is shown to people; renderers use it, the snapshot ignores it. */
enum gpuctl_field_unit {
	GPUCTL_FU_NONE,  /* plain integer or string */
	GPUCTL_FU_BYTES, /* shown in MiB */
	GPUCTL_FU_MW,    /* shown in W with two decimals */
	GPUCTL_FU_MHZ,
	GPUCTL_FU_CELSIUS,
	GPUCTL_FU_PERCENT,
	GPUCTL_FU_BOOL,  /* Enabled / Disabled */
	GPUCTL_FU_YESNO, /* Yes / No */
	GPUCTL_FU_HEX,   /* 0x%08X */
	GPUCTL_FU_ENUM,  /* a name from the field's own table (compute mode) */
};

/* Library-owned (static), read through gpuctl_field_info(); grows at its end. */
struct gpuctl_field_info {
	enum gpuctl_field id;
	const char *key;      /* JSON key and gpuctl --query name, e.g. "memory_used" */
	const char *smi_name; /* nvidia-smi --query-gpu name, e.g. "memory.used"; NULL if none */
	const char *csv_unit; /* unit suffix of nvidia-smi's CSV header: " [MiB]", " [W]" or "" */
	enum gpuctl_field_type type;
	enum gpuctl_field_unit unit;
	unsigned snap_flag; /* the gpuctl_snapshot_flags bit needed to read it (0: always) */
	const char *doc;    /* one line for --help and docs/json.md */
};

/* Metadata of one field, NULL if id is out of range. */
const struct gpuctl_field_info *gpuctl_field_info(enum gpuctl_field id);
/* Looks a field up by our key, nvidia-smi's query name, or one of nvidia-smi's aliases
 * (case-insensitive). Returns the field id, or -EINVAL if name is unknown. */
int gpuctl_field_lookup(const char *name);

/* Like gpuctl_snapshot_take, but of the per-GPU fields reads only the n_fields listed (plus
 * index, UUID, PCI bus id and name, which every snapshot has, and what the flags' reads depend
 * on); the others read as unavailable. A listed field implies its group's flag (a health field
 * implies GPUCTL_SNAP_HEALTH). fields NULL with n_fields 0 reads every field but
 * GPUCTL_F_PCIE_RX and _TX (NVML samples each for 20 ms while the caller waits). -EINVAL for an
 * unknown field id. This is how a tool that prints a few fields makes a few NVML calls. */
int gpuctl_snapshot_take_fields(struct gpuctl_ctx *ctx, unsigned flags,
                                const enum gpuctl_field *fields, size_t n_fields,
                                struct gpuctl_snapshot **ret_snap);

/* Takes a snapshot of the same GPUs as prev that re-reads only the n_fields listed (and the
 * processes with GPUCTL_SNAP_PROCESSES or _PROC_UTIL, the MIG devices of GPUs in MIG mode with
 * GPUCTL_SNAP_MIG); every other per-GPU field, and the system facts, are copied from prev. It
 * makes one device count and no system call or handle lookup (handles are kept in ctx from
 * the snapshot before), so an interval of a monitor costs the reads of what it shows. A field
 * prev asked for and a GPU did not support (prev had no failed call on it) is not asked
 * again. A GPU lost in prev stays lost and is not asked again; one lost now is marked lost.
 * -EIO when NVML cannot count the GPUs, -ESTALE when their number changed (take a snapshot),
 * -EINVAL for flags other than PROCESSES, PROC_UTIL, HEALTH and MIG (pair facts are not
 * refreshed). */
int gpuctl_snapshot_refresh(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *prev,
                            unsigned flags, const enum gpuctl_field *fields, size_t n_fields,
                            struct gpuctl_snapshot **ret_snap);

/* Reads an integer field. Returns 0, -ENODATA when unavailable (NOT_SUPPORTED, missing symbol,
 * not requested in the snapshot flags, or the GPU is lost), -EINVAL if the field is no int. */
int gpuctl_gpu_int(const struct gpuctl_gpu *gpu, enum gpuctl_field f, int64_t *ret_value);
/* Reads a string field; NULL when unavailable or not a string field. Owned by the snapshot. */
const char *gpuctl_gpu_str(const struct gpuctl_gpu *gpu, enum gpuctl_field f);
/* True when NVML reported this GPU lost (fallen off the bus, GPU_IS_LOST). */
bool gpuctl_gpu_lost(const struct gpuctl_gpu *gpu);
/* Index of this GPU in its snapshot (== GPUCTL_F_INDEX). */
size_t gpuctl_gpu_index(const struct gpuctl_gpu *gpu);
/* Percent (0..100) of the time between two readings of GPUCTL_F_VIOLATION_POWER or
 * GPUCTL_F_VIOLATION_THERMAL (before, then after) that the GPU was held back, over NVML's own
 * timestamps of the readings. -ENODATA when either reading is unavailable or no time passed,
 * -EINVAL for another field. */
int gpuctl_gpu_violation_percent(const struct gpuctl_gpu *before, const struct gpuctl_gpu *after,
                                 enum gpuctl_field f, double *ret_percent);

/* ---- MIG devices (GPUCTL_SNAP_MIG) ---- */

size_t gpuctl_gpu_mig_count(const struct gpuctl_gpu *gpu);
const struct gpuctl_mig *gpuctl_gpu_mig(const struct gpuctl_gpu *gpu, size_t i);
const char *gpuctl_mig_uuid(const struct gpuctl_mig *mig);    /* "MIG-..." */
const char *gpuctl_mig_profile(const struct gpuctl_mig *mig); /* "1g.10gb", NULL if unknown */
/* GPUCTL_MIG_* integer facts; -ENODATA when unavailable. */
enum gpuctl_mig_field {
	GPUCTL_MIG_INDEX,        /* MIG device index on its parent */
	GPUCTL_MIG_GI,           /* GPU instance id */
	GPUCTL_MIG_CI,           /* compute instance id */
	GPUCTL_MIG_MEMORY_TOTAL, /* bytes */
	GPUCTL_MIG_MEMORY_USED,  /* bytes */
};
int gpuctl_mig_int(const struct gpuctl_mig *mig, enum gpuctl_mig_field f, int64_t *ret_value);

/* ---- Compute processes (GPUCTL_SNAP_PROCESSES) ---- */

size_t gpuctl_gpu_proc_count(const struct gpuctl_gpu *gpu);
const struct gpuctl_proc *gpuctl_gpu_proc(const struct gpuctl_gpu *gpu, size_t i);
uint32_t gpuctl_proc_pid(const struct gpuctl_proc *proc);
/* Bytes of GPU memory the process uses; -ENODATA when the driver does not say. */
int gpuctl_proc_used_memory(const struct gpuctl_proc *proc, int64_t *ret_bytes);
/* The owner's uid; -ENODATA when unknown (process gone, other PID namespace). */
int gpuctl_proc_uid(const struct gpuctl_proc *proc, uint32_t *ret_uid);
/* User name (or the uid in decimal when it has no name), NULL if unknown. */
const char *gpuctl_proc_user(const struct gpuctl_proc *proc);
/* Command name (argv[0] without directories), NULL if unknown. */
const char *gpuctl_proc_command(const struct gpuctl_proc *proc);
/* For a process on a MIG device: its GPU / compute instance ids; -ENODATA otherwise. */
int gpuctl_proc_mig(const struct gpuctl_proc *proc, uint32_t *ret_gi, uint32_t *ret_ci);
/* The MIG device of gpu (its place, gpuctl_gpu_mig) that process proc of gpu runs on, matched
 * by GPU and compute instance ids; -1 for a process on the whole GPU, or on a MIG device the
 * snapshot does not list (which counts for the whole GPU). */
int gpuctl_proc_mig_device(const struct gpuctl_gpu *gpu, const struct gpuctl_proc *proc);
/* A process's share of an engine in the driver's newest sample (GPUCTL_SNAP_PROC_UTIL). */
enum gpuctl_proc_engine {
	GPUCTL_PROC_SM,  /* percent of the SMs' time */
	GPUCTL_PROC_MEM, /* percent of the memory interface's time */
	GPUCTL_PROC_ENC, /* percent of the video encoder's time */
	GPUCTL_PROC_DEC, /* percent of the video decoder's time */
};
/* -ENODATA when the driver had no sample for the process (or was not asked), -EINVAL for an
 * unknown engine. */
int gpuctl_proc_util(const struct gpuctl_proc *proc, enum gpuctl_proc_engine engine,
                     int *ret_percent);

/* ---- Pair facts (GPUCTL_SNAP_TOPOLOGY) ---- */

/* NVML's common-ancestor levels; the numbers are NVML's own, spaced on purpose. */
enum gpuctl_topo_level {
	GPUCTL_TOPO_UNKNOWN = -1,
	GPUCTL_TOPO_INTERNAL = 0,    /* same board */
	GPUCTL_TOPO_SINGLE = 10,     /* PIX: one PCIe switch */
	GPUCTL_TOPO_MULTIPLE = 20,   /* PXB: several switches, no host bridge */
	GPUCTL_TOPO_HOSTBRIDGE = 30, /* PHB */
	GPUCTL_TOPO_NODE = 40,       /* NODE: same NUMA node, several host bridges */
	GPUCTL_TOPO_SYSTEM = 50,     /* SYS: across the SMP interconnect */
};

/* NVML's P2P status values. */
enum gpuctl_p2p_status {
	GPUCTL_P2P_UNKNOWN = -1,
	GPUCTL_P2P_OK = 0,
	GPUCTL_P2P_CHIPSET_NOT_SUPPORTED = 1,
	GPUCTL_P2P_GPU_NOT_SUPPORTED = 2,
	GPUCTL_P2P_TOPOLOGY_NOT_SUPPORTED = 3,
	GPUCTL_P2P_DISABLED_BY_REGKEY = 4,
	GPUCTL_P2P_NOT_SUPPORTED = 5,
};

/* The facts about one pair of GPUs (by snapshot index). The caller allocates it: initialise with
 * GPUCTL_LINK_INIT (struct_size lets it grow: the library writes only the first struct_size
 * bytes, so a program built against an older header gets the fields it knows). */
struct gpuctl_link {
	size_t struct_size; /* sizeof(struct gpuctl_link) */
	int level;          /* enum gpuctl_topo_level */
	int nvlinks;        /* active NVLinks between the two: direct links, or for an NVSwitch
	                     * fabric the links each GPU has into it (the smaller of the two) */
	bool nvswitch;      /* true when the NVLinks go through NVSwitches (all-to-all) */
	int p2p;            /* enum gpuctl_p2p_status, for P2P reads */
	double bandwidth;   /* modelled GB/s per direction, see docs/topology.md */
};
#define GPUCTL_LINK_INIT                                                                           \
	{                                                                                          \
		.struct_size = sizeof(struct gpuctl_link)                                          \
	}

/* Fills *ret_link for GPUs a and b (a != b): the first ret_link->struct_size bytes. -EINVAL for a
 * bad index or a struct_size that does not cover level, -ENODATA if the snapshot was taken
 * without GPUCTL_SNAP_TOPOLOGY. */
int gpuctl_snapshot_link(const struct gpuctl_snapshot *snap, size_t a, size_t b,
                         struct gpuctl_link *ret_link);

/* The nvidia-smi topo -m code of a level ("PIX", "SYS", ...); "X" for self is the caller's. */
const char *gpuctl_topo_level_code(int level);

/* The host CPU as the bandwidth model sees it (docs/topology.md, "The CPU"): read from
 * /proc/cpuinfo ($GPUCTL_CPUINFO instead, for tests and the simulator) with every
 * GPUCTL_SNAP_TOPOLOGY snapshot. The caller allocates it: initialise with GPUCTL_CPU_INIT. */
struct gpuctl_cpu {
	size_t struct_size;       /* sizeof(struct gpuctl_cpu) */
	char vendor[16];          /* cpuinfo's vendor_id ("GenuineIntel", "AuthenticAMD"), "ARM"
	                           * for an Arm-designed core; "" when unknown */
	int family;               /* x86 "cpu family"; -1 when unknown or not x86 */
	int model;                /* x86 "model", Arm "CPU part"; -1 when unknown */
	char name[96];            /* "model name" ("Intel(R) Xeon(R) Platinum 8480+"); "" if none */
	char cpu_class[24];       /* what decides the figures: "Broadwell", "Skylake", "Sapphire
	                           * Rapids", "Emerald Rapids", "AMD", "Grace", "Arm", "unknown" */
	double inter_socket_gbps; /* the link between sockets, GB/s per direction (NCCL's figure) */
	double p2p_overhead; /* divisor of P2P traffic through a CPU root complex (Intel 1.2) */
};
#define GPUCTL_CPU_INIT                                                                            \
	{                                                                                          \
		.struct_size = sizeof(struct gpuctl_cpu)                                           \
	}

/* Fills the first ret_cpu->struct_size bytes with the CPU the snapshot's bandwidth model used.
 * -EINVAL for a struct_size that does not cover vendor, -ENODATA if the snapshot was taken
 * without GPUCTL_SNAP_TOPOLOGY. */
int gpuctl_snapshot_cpu(const struct gpuctl_snapshot *snap, struct gpuctl_cpu *ret_cpu);

/* The modelled GB/s per direction of a P2P-capable pair without NVLink whose path is `level`
 * (enum gpuctl_topo_level), for the slowest PCIe link among the snapshot's GPUs: what
 * `gpuctl topo` shows per path class. -EINVAL for an unknown level, -ENODATA without topology
 * or GPUs. */
int gpuctl_snapshot_path_bandwidth(const struct gpuctl_snapshot *snap, int level, double *ret_gbps);

/* ---- Sizes ---- */

/* Parses a size as `gpuctl select --min-free-mem` and `--mem` read it: a decimal number
 * (integer or with a fraction, "1.5") and a binary unit: B, or K, M, G, T (either case) alone,
 * with "iB" (GiB) or with "B"/"b" (GB, read as GiB as docker and Slurm read it); no blanks; a
 * bare number only for 0; a fraction of a byte rounded up. "10Gib" and "10Gi" are refused.
 * Returns 0 and writes *ret_bytes, or -EINVAL (malformed, unknown unit, no unit, NULL text) or
 * -ERANGE (more than 2^64-1 bytes); then *why (when why is not NULL) says what is wrong, in
 * words to print after the input ("'10PB': unknown unit ..."; a static string). For bindings
 * (the Python package) that must accept exactly what the command line accepts. */
int gpuctl_size_parse(const char *text, uint64_t *ret_bytes, const char **why);

/* ---- Choosing GPUs by id ---- */

/* Resolves a comma-separated list of GPU ids against a snapshot: an index, a full UUID, a unique
 * UUID prefix (with or without "GPU-"), or a PCI bus id in any of NVML's forms
 * ("00000000:07:00.0", "0000:07:00.0", "07:00.0"; case-insensitive). Writes the snapshot
 * indices in the order given, without duplicates. -EINVAL for a malformed, unknown or
 * ambiguous entry, with a message naming it. *ret_indices is malloc'ed (caller frees).
 * Details: blanks around entries are ignored; an empty entry or an empty list is an error; an
 * all-digit entry is always an index; a prefix without "GPU-" needs at least 4 hex digits (with
 * "GPU-" any length); "MIG-" UUIDs are refused (they name MIG devices, not GPUs). */
int gpuctl_ids_resolve(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap, const char *ids,
                       size_t **ret_indices, size_t *ret_count);

/* ---- Device sets and device strings (src/lib/devices/; rules: docs/device-strings.md) ---- */

/* An ordered list of devices: each a whole GPU or one MIG device of a GPU, named by snapshot
 * index (and MIG index on that GPU). A set refers to the snapshot it was made against, but
 * keeps no pointer to it. gpuctl_devset_add needs the set to itself; the rest only read it. */
struct gpuctl_devset;

int gpuctl_devset_new(struct gpuctl_devset **ret_set);
void gpuctl_devset_free(struct gpuctl_devset *set);
/* Appends a device; mig < 0 for the whole GPU. -EEXIST if it is in the set already. */
int gpuctl_devset_add(struct gpuctl_devset *set, size_t gpu, int mig);
size_t gpuctl_devset_count(const struct gpuctl_devset *set);
/* The i-th device; *ret_mig is -1 for a whole GPU. -EINVAL when i is out of range. */
int gpuctl_devset_get(const struct gpuctl_devset *set, size_t i, size_t *ret_gpu, int *ret_mig);
/* Whether the set holds that device. */
bool gpuctl_devset_contains(const struct gpuctl_devset *set, size_t gpu, int mig);
/* The i-th device's UUID ("GPU-..." or "MIG-...") in snap, NULL if unknown. */
const char *gpuctl_devset_uuid(const struct gpuctl_devset *set, const struct gpuctl_snapshot *snap,
                               size_t i);

/* A device's label for people, as gpuctl prints it: its NVML index, "3" for a whole GPU (mig
 * < 0), "3:1" for a MIG device (NVML's MIG device index on that GPU, which is what
 * NVIDIA_VISIBLE_DEVICES=<gpu>:<mig> and CDI names mean; mig is the device's place in the
 * snapshot). Always NUL-terminated, truncated to size. */
void gpuctl_device_label(const struct gpuctl_snapshot *snap, size_t gpu, int mig, char *buf,
                         size_t size);

/* Parses a CUDA_VISIBLE_DEVICES value as the CUDA driver does: NULL (unset) shows every
 * device; "" none; indices, GPU- UUIDs, unique UUID prefixes, MIG- UUIDs and the legacy
 * MIG-GPU-<uuid>/<gi>/<ci> form; parsing stops at the first invalid entry; a duplicate gives no
 * device at all. order is CUDA_DEVICE_ORDER's value (NULL or unknown: FASTEST_FIRST). The
 * result lists the visible devices in CUDA ordinal order. Content is never an error (CUDA
 * does not fail on it either): where parsing stopped, and why, is logged once as a warning.
 * Returns 0, or -ENOMEM. */
int gpuctl_devstr_parse_cuda(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                             const char *value, const char *order, struct gpuctl_devset **ret_set);
/* Parses NVIDIA_VISIBLE_DEVICES as the NVIDIA container toolkit does: "all", "none", "void",
 * empty, NVML indices, full GPU/MIG UUIDs, PCI bus ids, "<gpu>:<mig>" pairs. -EINVAL, with a
 * message naming the entry, for anything the toolkit would refuse. */
int gpuctl_devstr_parse_nvidia(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                               const char *value, struct gpuctl_devset **ret_set);
/* The allocation gpuctl itself runs inside, from its environment: CUDA_VISIBLE_DEVICES (with
 * CUDA_DEVICE_ORDER), NVIDIA_VISIBLE_DEVICES, SLURM_STEP_GPUS, SLURM_JOB_GPUS; when several
 * are set, the devices all of them allow, in the order of the first. Writes NULL to *ret_set
 * (and to *ret_source) when none is set; else the set and the name(s) of the variable(s).
 * -EINVAL (message names the variable) for a value that cannot be read. */
int gpuctl_outer_allocation(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                            struct gpuctl_devset **ret_set, const char **ret_source);

/* Output forms of a device set (`gpuctl select --format`). */
enum gpuctl_render {
	GPUCTL_RENDER_CUDA,   /* CUDA_VISIBLE_DEVICES=GPU-...,GPU-... */
	GPUCTL_RENDER_ENV,    /* shell export lines */
	GPUCTL_RENDER_DOCKER, /* --gpus '"device=..."' */
	GPUCTL_RENDER_NVIDIA, /* NVIDIA_VISIBLE_DEVICES=... */
	GPUCTL_RENDER_CDI,    /* nvidia.com/gpu=... names */
	GPUCTL_RENDER_K8S,    /* a resources + env snippet */
	GPUCTL_RENDER_JSON,   /* docs/json.md */
};
/* Render flag: NVML indices instead of UUIDs (with CUDA_DEVICE_ORDER=PCI_BUS_ID where CUDA
 * reads them). */
#define GPUCTL_RENDER_INDICES 1u
/* Looks a render form up by name ("cuda", "env", ...); -EINVAL if unknown. */
int gpuctl_render_lookup(const char *name);
/* Renders set; *ret_text is malloc'ed, ends with a newline. */
int gpuctl_devstr_render(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                         const struct gpuctl_devset *set, enum gpuctl_render form, unsigned flags,
                         char **ret_text);
/* Whether one CUDA process given set in CUDA_VISIBLE_DEVICES uses every device of it (MIG user
 * guide, "CUDA device enumeration", by the snapshot's driver branch): before R570 a process
 * enumerates one MIG device and nothing beside it; from R570 one compute instance per GPU
 * instance, at most GPUCTL_CUDA_MIG_MAX MIG devices, whole GPUs alongside. A driver version
 * that is not known counts as before R570. 0 when it does; -EINVAL with a one-line message
 * naming the devices and the rule when it does not (then start one process per device, as
 * `gpuctl run --each` does). gpuctl_devstr_render refuses the CUDA forms of such a set. */
#define GPUCTL_CUDA_MIG_MULTI_BRANCH 570u
#define GPUCTL_CUDA_MIG_MAX          64u
int gpuctl_devset_cuda_check(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                             const struct gpuctl_devset *set);
/* How many MIG devices one CUDA process enumerates on snap's driver: 1 before R570 (or when the
 * version is not known), GPUCTL_CUDA_MIG_MAX from R570 (then one per GPU instance). */
unsigned gpuctl_cuda_mig_limit(const struct gpuctl_snapshot *snap);
/* The CUDA ordinals of set's devices inside a process whose environment has
 * CUDA_VISIBLE_DEVICES=cuda_visible and CUDA_DEVICE_ORDER=order (NULL: unset), i.e. the number
 * to pass to cudaSetDevice. ret_ordinals has gpuctl_devset_count(set) entries; a device that
 * process cannot see gets -1. */
int gpuctl_devset_cuda_ordinals(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                                const struct gpuctl_devset *set, const char *cuda_visible,
                                const char *order, int *ret_ordinals);

/* ---- Selection (src/lib/select/select.c; model: docs/selection.md) ---- */

/* What a job needs. Initialise with GPUCTL_SELECT_REQUEST_INIT; struct_size lets the struct
 * grow without breaking callers built against an older header. */
struct gpuctl_select_request {
	size_t struct_size;    /* sizeof(struct gpuctl_select_request) */
	unsigned count;        /* devices wanted; 0 is allowed (no GPU) */
	uint64_t min_free_mem; /* bytes free at least; 0: any */
	int max_util;          /* GPU utilisation at most, percent; -1: any */
	bool no_procs;         /* no compute process on the device */
	const char *only;      /* GPU ids (gpuctl_ids_resolve forms) to choose among; NULL: all */
	const char *exclude;   /* GPU ids never to choose; NULL: none */
	int numa_node;         /* only GPUs attached to this NUMA node; -1: any */
	const char
	        *mig_profile; /* choose MIG devices of this profile ("1g.10gb"); NULL: whole GPUs */
	const struct gpuctl_devset *within; /* the outer allocation; NULL: the whole machine */
	bool allow_unhealthy; /* keep GPUs with uncorrectable memory errors (lost GPUs and GPUs
	                       * without a UUID are never chosen) */
	/* Fields below were added after the first release; struct_size tells whether a caller
	 * knows them (a smaller struct_size reads them as NULL). */
	const struct gpuctl_devset *leased;  /* devices leased by others: never chosen ("leased") */
	const struct gpuctl_devset *foreign; /* devices running processes of no lease: never
	                                      * chosen ("in use without a lease") */
	const struct gpuctl_devset *pool;    /* the GPUs of the pool drawn from (docs/config.md):
	                                      * no other is chosen ("outside pool NAME"); a GPU
	                                      * in the set admits its MIG devices; NULL: any */
	const char *pool_name;               /* the pool's name, for messages */
	const struct gpuctl_devset *unhealthy; /* devices a health check found FAIL: never chosen
	                                        * unless allow_unhealthy ("unhealthy") */
	const struct gpuctl_devset *warned;    /* devices found WARN: chosen only when the
	                                        * request cannot be met without them */
};
#define GPUCTL_SELECT_REQUEST_INIT                                                                 \
	{                                                                                          \
		.struct_size = sizeof(struct gpuctl_select_request), .max_util = -1,               \
		.numa_node = -1                                                                    \
	}

/* Never changes once made; keeps no pointer to its context or snapshot (its devices are that
 * snapshot's indices). */
struct gpuctl_selection;

/* Chooses devices for req. -ENOSPC when fewer than req->count devices pass the filters, with a
 * one-line message saying which filter removed which GPUs; -EINVAL for a bad request (unknown
 * id, malformed profile), message naming it. */
int gpuctl_select(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                  const struct gpuctl_select_request *req, struct gpuctl_selection **ret_sel);
void gpuctl_selection_free(struct gpuctl_selection *sel);
/* The chosen devices, best first (borrowed from sel). */
const struct gpuctl_devset *gpuctl_selection_devices(const struct gpuctl_selection *sel);
/* The runner-up set (the best set that differs), NULL when there is none. */
const struct gpuctl_devset *gpuctl_selection_runner_up(const struct gpuctl_selection *sel);

/* A set's score, compared field by field in this order (docs/selection.md). The caller allocates
 * it: initialise with GPUCTL_SELECT_SCORE_INIT (the library writes only the first struct_size
 * bytes, as for struct gpuctl_link). */
/* Compared in the order of docs/selection.md: ring, NUMA nodes, sockets, leftover, release,
 * total, load (the field order is the ABI's, not the objective's). */
struct gpuctl_select_score {
	size_t struct_size;     /* sizeof(struct gpuctl_select_score) */
	double ring_bandwidth;  /* GB/s: bottleneck link of the best ring through the set */
	double total_bandwidth; /* GB/s: sum over the set's pairs */
	unsigned numa_nodes;    /* NUMA nodes the set spans (fewer is better) */
	unsigned sockets;       /* CPU sockets the set spans (fewer is better) */
	double leftover;        /* quality of what the choice leaves free (higher is better) */
	double load;            /* utilisation and memory in use (lower is better) */
	double release;         /* release value: the best matching inside the set, how well it
	                         * serves 2-GPU jobs once freed (higher is better) */
};
#define GPUCTL_SELECT_SCORE_INIT                                                                   \
	{                                                                                          \
		.struct_size = sizeof(struct gpuctl_select_score)                                  \
	}
/* Score of the chosen set (runner_up false) or of the runner-up: the first
 * ret_score->struct_size bytes. -ENODATA if there is none, -EINVAL for a struct_size that does
 * not cover ring_bandwidth. */
int gpuctl_selection_score(const struct gpuctl_selection *sel, bool runner_up,
                           struct gpuctl_select_score *ret_score);

/* ---- Leases (src/lib/lease/lease*.c; docs/leases.md) ---- */

/* An opened and checked lease directory. Nothing in the handle changes once it is open, and
 * every call opens what it reads afresh, so threads may share one, each with its own context:
 * select-and-lease is one critical section between threads as between processes (each call
 * locks its own open file description of DIR/select.lock), so two threads never get one
 * device. Waiting (wait tickets), shared leases and gpuctl_lease_dir_set_config name their
 * files after the process id: do those from one thread of a process at a time. */
struct gpuctl_lease_dir;

/* Opens the lease directory: path, else $GPUCTL_LEASE_DIR, else /run/gpuctl; creates it when
 * missing and the caller may (root, or a directory of the caller's own). Checks ownership and
 * modes as docs/leases.md says. -EPERM when unsafe (message says why), -ENOENT when missing and
 * not ours to create (message names `sudo gpuctl lease init` and GPUCTL_LEASE_DIR). */
int gpuctl_lease_dir_open(struct gpuctl_ctx *ctx, const char *path,
                          struct gpuctl_lease_dir **ret_dir);
void gpuctl_lease_dir_free(struct gpuctl_lease_dir *dir);
const char *gpuctl_lease_dir_path(const struct gpuctl_lease_dir *dir);
/* The directory's owner: root (a shared directory) or the user (a personal one). */
uint32_t gpuctl_lease_dir_owner(const struct gpuctl_lease_dir *dir);
/* The configuration file a shared directory follows (docs/config.md "Trust"): the absolute path
 * in DIR/config (malloc'ed, caller frees), or NULL when it names none. -EPERM when DIR/config
 * is not a regular file of the directory's owner that only it may write, -EINVAL when it does
 * not hold one absolute path. */
int gpuctl_lease_dir_config(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir,
                            char **ret_path);
/* Writes DIR/config (atomically) naming path, or removes it for NULL. Only the directory's
 * owner may (-EPERM otherwise). */
int gpuctl_lease_dir_set_config(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                                const char *path);
/* Creates the missing lock files of every GPU and MIG device of snap. Only the directory's
 * owner may (-EPERM otherwise). Returns how many it created. */
int gpuctl_lease_dir_init(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                          const struct gpuctl_snapshot *snap);

enum gpuctl_lease_state {
	GPUCTL_LEASE_FREE,          /* no one holds it */
	GPUCTL_LEASE_HELD,          /* some process holds the lock */
	GPUCTL_LEASE_UNUSABLE,      /* its lock file is unsafe (symlink, wrong owner, ...) */
	GPUCTL_LEASE_UNINITIALISED, /* no lock file, and not ours to create */
	GPUCTL_LEASE_SHARED,        /* held by shared (--share) leases only */
};

/* What the holder wrote about itself (display only: the kernel lock decides). Library-owned,
 * read through the pointers the lease list hands out; grows at its end. */
struct gpuctl_lease_owner {
	uint32_t uid;          /* the record's owner (from the file system, not the record) */
	const char *user;      /* user name, or NULL */
	uint32_t pid;          /* the holder: gpuctl run's pid, or the --hold holder's */
	uint32_t job_pid;      /* the job gpuctl run started, 0 if none */
	uint64_t start_time;   /* holder's start, seconds since the epoch */
	const char *command;   /* the job's command line, or NULL */
	const char *label;     /* --label, or NULL */
	uint64_t share_mem;    /* bytes a shared lease declared (display only); 0: exclusive */
	uint64_t leased_since; /* when the lease was taken (its record written), seconds since
	                        * the epoch; 0: unknown. Not start_time: a holder may have waited
	                        * in line first */
};

/* The lease state of every device of snap (GPUs, then each GPU's MIG devices). Probes under a
 * shared lock on DIR/select.lock, so it never disturbs a select-and-lease. The list never
 * changes once made and outlives its context and lease directory. */
struct gpuctl_lease_list;
int gpuctl_lease_list(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                      const struct gpuctl_snapshot *snap, struct gpuctl_lease_list **ret_list);
void gpuctl_lease_list_free(struct gpuctl_lease_list *list);
size_t gpuctl_lease_list_count(const struct gpuctl_lease_list *list);
/* Entry i: its device, state, and (HELD with a trustworthy record) owner; *ret_owner NULL when
 * unknown. *ret_reason says why for UNUSABLE/UNINITIALISED, else NULL (owned by list). */
int gpuctl_lease_list_get(const struct gpuctl_lease_list *list, size_t i, size_t *ret_gpu,
                          int *ret_mig, enum gpuctl_lease_state *ret_state,
                          const struct gpuctl_lease_owner **ret_owner, const char **ret_reason);
/* A SHARED entry i: the bytes its shared leases declared in all (from the kernel's locks, not
 * from the records: docs/leases.md "Sharing"), and the holders whose records count
 * ((*ret_owners)[k], k < *ret_n; borrowed from list). 0 declared and no holders for an entry that
 * is not SHARED. */
int gpuctl_lease_list_shares(const struct gpuctl_lease_list *list, size_t i, uint64_t *ret_declared,
                             const struct gpuctl_lease_owner *const **ret_owners, size_t *ret_n);

/* Whether the lease of entry i of list (made from snap) is still the one it was read with: a
 * HELD device's lock file is still locked exclusively (a probe: an open and two flock), a
 * SHARED device's read locks still declare the same total (an open and a few fcntl). A lease
 * ends by dropping its lock, even when its holder is killed, and no file changes then; one that
 * starts writes an owner record, which a caller watching DIR/owners sees. False for an entry
 * in another state, or when it cannot tell. */
bool gpuctl_lease_list_current(const struct gpuctl_lease_list *list, size_t i,
                               struct gpuctl_lease_dir *dir, const struct gpuctl_snapshot *snap);

struct gpuctl_lease_request;
/* The bytes a new shared lease could still declare on entry i (a device of snap, the snapshot
 * the list was made from) under lreq's margin (NULL: the default 5 %): 0 for a device held
 * exclusively, unusable or uninitialised, or of unknown memory size. */
uint64_t gpuctl_lease_list_room(const struct gpuctl_lease_list *list, size_t i,
                                const struct gpuctl_snapshot *snap,
                                const struct gpuctl_lease_request *lreq);
/* The devices of snap that run compute processes belonging to no lease holder (nor to a
 * descendant of one) and that count as busy by lreq's thresholds (busy_memory,
 * busy_utilization; lreq NULL: any such process makes its device busy). dir NULL: there is no
 * lease directory (yet), so no process belongs to a lease. */
int gpuctl_lease_foreign(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                         const struct gpuctl_snapshot *snap,
                         const struct gpuctl_lease_request *lreq, struct gpuctl_devset **ret_set);

/* Every compute process of a snapshot, classified by the rule select-and-lease applies
 * (docs/leases.md, "Foreign processes"): a process belongs to a lease when it or an ancestor is
 * the holder or the job of a lease of its device (or of its whole GPU, or for a whole GPU of one
 * of its MIG devices); the others are foreign, and a device is busy when its foreign processes
 * pass lreq's thresholds (gpuctl_lease_foreign). For programs that show them (gpuctl ps). Never
 * changes once made; keeps no pointer to its context, lease directory or snapshot (it answers by
 * that snapshot's indices). */
struct gpuctl_foreign;
/* Classifies snap's processes (snap taken with GPUCTL_SNAP_PROCESSES, else -EINVAL) against the
 * leases of dir; dir NULL (no lease directory): every process is foreign. lreq: the busy
 * thresholds (NULL: any foreign process makes its device busy). -ENOMEM, lease-file errors. */
int gpuctl_foreign_scan(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                        const struct gpuctl_snapshot *snap, const struct gpuctl_lease_request *lreq,
                        struct gpuctl_foreign **ret);
/* prev's classification for snap, a later snapshot of the same processes (the same pids on
 * the same GPUs, in the same order; else -ESTALE, nothing made): each process stays foreign or
 * not, each device's use and busy verdict are judged again with snap's memory and utilisation
 * and lreq's thresholds. No lease file or /proc read: for a caller that knows the leases did
 * not change since prev was made (gpuctl top, which watches the lease directory). -ENOMEM. */
int gpuctl_foreign_rejudge(struct gpuctl_ctx *ctx, const struct gpuctl_foreign *prev,
                           const struct gpuctl_snapshot *snap,
                           const struct gpuctl_lease_request *lreq, struct gpuctl_foreign **ret);
void gpuctl_foreign_free(struct gpuctl_foreign *foreign);
/* Whether process k of GPU gpu (gpuctl_gpu_proc(gpuctl_snapshot_gpu(snap, gpu), k)) belongs to
 * no lease; false for indices out of range. */
bool gpuctl_foreign_proc(const struct gpuctl_foreign *foreign, size_t gpu, size_t k);
/* Whether device (gpu, mig; mig -1 for the whole GPU) runs foreign processes: a process on a
 * MIG device counts for that MIG device, one that matches none for the whole GPU. */
bool gpuctl_foreign_device(const struct gpuctl_foreign *foreign, size_t gpu, int mig);
/* Whether those processes make the device busy by the thresholds (the devices
 * gpuctl_lease_foreign returns). */
bool gpuctl_foreign_busy(const struct gpuctl_foreign *foreign, size_t gpu, int mig);

/* Held leases on a set of devices. A lease is its lock descriptors: it outlives the context,
 * the lease directory handle and the snapshot it was taken with, and the kernel holds it while
 * any of them is open, here or in a child that inherited them. gpuctl_lease_set_owner needs
 * it to itself; gpuctl_lease_fds only reads it. */
struct gpuctl_lease;

/* Who asks, for the owner records. */
struct gpuctl_lease_request {
	size_t struct_size;  /* sizeof(struct gpuctl_lease_request) */
	const char *command; /* the job's command line, for display */
	const char *label;   /* free text, for display */
	bool ignore_foreign; /* do not count foreign processes as busy */
	/* Fields below were added after the first release (struct_size tells). */
	uint64_t share_mem;       /* > 0: a shared lease declaring this many bytes on each device
	                           * (docs/leases.md "Sharing"); 0: exclusive */
	uint64_t share_margin;    /* memory kept undeclared on a shared device: bytes, or percent of
	                           * its total when share_margin_is_pct (default 5 %) */
	bool share_margin_is_pct; /* share_margin is a percentage */
	uint64_t busy_memory;     /* foreign processes make a device busy only when their memory
	                           * on it totals more than this (0, the default: any process) */
	int busy_utilization;     /* ... or when the device is more than this percent utilised
	                           * while they run on it; -1 (the default): not used */
};
#define GPUCTL_LEASE_REQUEST_INIT                                                                  \
	{                                                                                          \
		.struct_size = sizeof(struct gpuctl_lease_request), .share_margin = 5,             \
		.share_margin_is_pct = true, .busy_utilization = -1                                \
	}

/* Select-and-lease, atomically (docs/leases.md): under DIR/select.lock, excludes leased devices
 * (and foreign-busy ones unless lreq->ignore_foreign), selects with req, and locks the chosen
 * devices. On success *ret_sel is the selection and *ret_lease holds its locks; the owner
 * records name the calling process. Errors as gpuctl_select (-ENOSPC names "leased" devices),
 * -EPERM/-ENOENT for lease files as above, and -EIO when the owner records cannot be written
 * (a full file system: the message names the directory and the cause; nothing is held). */
int gpuctl_select_and_lease(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                            const struct gpuctl_snapshot *snap,
                            const struct gpuctl_select_request *req,
                            const struct gpuctl_lease_request *lreq,
                            struct gpuctl_selection **ret_sel, struct gpuctl_lease **ret_lease);
/* Releases the locks this process holds (holders that inherited them keep them). */
void gpuctl_lease_free(struct gpuctl_lease *lease);
/* The lock descriptors, for a child to inherit (close-on-exec until the caller clears that in
 * the child). Writes up to max; returns how many there are. */
size_t gpuctl_lease_fds(const struct gpuctl_lease *lease, int *fds, size_t max);
/* Rewrites the owner records (once the job's pid is known, or for a --hold holder): 0, or -EIO
 * when one cannot be written (a record not rewritten keeps what it said). */
int gpuctl_lease_set_owner(struct gpuctl_ctx *ctx, struct gpuctl_lease *lease, uint32_t pid,
                           uint32_t job_pid);
/* Ends the --hold holders of the calling user that hold any device of set (NULL: all of the
 * user's holders): those of the user's records without a job, and the user's processes holding
 * a device's lock that no record accounts for (found through /proc/PID/fdinfo: a hold whose
 * record is gone, a job left holding a lease after its run ended; docs/leases.md "Release").
 * SIGTERM after checking the pid's owner and start time, then waits until they have exited (at
 * most 10 s; a holder still running then is a logged warning), so their devices are free when it
 * returns. Returns how many processes were signalled; -EPERM if set names a device held by
 * another user's holder. */
int gpuctl_lease_release(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                         const struct gpuctl_snapshot *snap, const struct gpuctl_devset *set);

/* ---- Waiting for leases (src/lib/lease/lease-queue.c; docs/leases.md "Waiting") ---- */

/* A waiter's ticket, DIR/queue/<uid>/<arrival>-<pid>, locked while it waits. Every
 * select-and-lease gives the devices older live waiters could use to them first; plain
 * gpuctl_select_and_lease is the youngest of all. One thread's at a time (one waiting thread
 * per process: the lease directory says why); it holds its own descriptors, not its context. */
struct gpuctl_wait_ticket;
/* Registers a ticket for req (under select.lock: its arrival is the highest present + 1) and
 * sets up the inotify watches. -ENOENT when DIR has no queue/ (message names `lease init`). */
int gpuctl_wait_ticket_new(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                           const struct gpuctl_snapshot *snap,
                           const struct gpuctl_select_request *req,
                           struct gpuctl_wait_ticket **ret_ticket);
/* Removes the ticket (if still there) and frees it. */
void gpuctl_wait_ticket_free(struct gpuctl_wait_ticket *ticket);
/* A descriptor that becomes readable when the leases or the queue may have changed (inotify);
 * -1 when none could be set up (then wake up on a timeout only). */
int gpuctl_wait_ticket_fd(const struct gpuctl_wait_ticket *ticket);
/* Consumes what made the descriptor readable and watches new queue/<uid>/ directories. */
void gpuctl_wait_ticket_drain(struct gpuctl_wait_ticket *ticket, struct gpuctl_lease_dir *dir);
/* 1 when the held locks or the queue differ from what the last failed try saw (or there was
 * none), 0 when not (another try would fail the same way), <0 on error. */
int gpuctl_wait_ticket_changed(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                               struct gpuctl_wait_ticket *ticket);
/* gpuctl_select_and_lease as the waiter of ticket: only older waiters go first. On success the
 * ticket is removed (under select.lock); -ENOSPC (message as gpuctl_select_and_lease's, plus
 * the waiters ahead) when the caller must wait on. */
int gpuctl_select_and_lease_queued(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                                   const struct gpuctl_snapshot *snap,
                                   const struct gpuctl_select_request *req,
                                   const struct gpuctl_lease_request *lreq,
                                   struct gpuctl_wait_ticket *ticket,
                                   struct gpuctl_selection **ret_sel,
                                   struct gpuctl_lease **ret_lease);

/* One live waiter, as its ticket says (display only: another user's ticket is not trusted).
 * Library-owned, read through gpuctl_wait_list_get(); grows at its end. */
struct gpuctl_wait_entry {
	uint64_t arrival; /* order of arrival (from the file name) */
	uint32_t pid;     /* the waiting gpuctl (from the file name) */
	uint32_t uid;     /* its user (the queue/<uid>/ directory) */
	const char *user; /* user name, NULL if unknown */
	int64_t since;    /* registered, seconds since the epoch (the file's ctime) */
	bool parsed;      /* the request below could be read; if not, only the above */
	unsigned count;   /* devices asked for */
	const char *mig_profile, *only, *exclude; /* NULL when not given */
	int numa_node;                            /* -1: any */
	uint64_t min_free_mem;                    /* 0: any */
	int max_util;                             /* -1: any */
	bool no_procs;
	const char *pool; /* the pool it draws from (docs/config.md), NULL when none was named */
};
/* Never changes once made; outlives its context and lease directory. */
struct gpuctl_wait_list;
/* The live tickets of DIR, first in line first. */
int gpuctl_wait_list(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                     struct gpuctl_wait_list **ret_list);
void gpuctl_wait_list_free(struct gpuctl_wait_list *list);
size_t gpuctl_wait_list_count(const struct gpuctl_wait_list *list);
const struct gpuctl_wait_entry *gpuctl_wait_list_get(const struct gpuctl_wait_list *list, size_t i);

/* ---- Configuration (src/lib/config/; docs/config.md) ---- */

#define GPUCTL_CONFIG_DEFAULT_PATH "/etc/gpuctl/gpuctl.conf"
/* The system lease directory, where no --lease-dir, GPUCTL_LEASE_DIR or configured lease_dir
 * names another (docs/leases.md). */
#define GPUCTL_LEASE_DIR_DEFAULT "/run/gpuctl"

/* A parsed configuration file: settings and GPU pools. The query functions below accept NULL
 * and answer for an empty configuration then. Never changes once made (share it between
 * threads); outlives its context. */
struct gpuctl_config;

/* Loads the configuration: path, else $GPUCTL_CONFIG (when set and not empty), else
 * GPUCTL_CONFIG_DEFAULT_PATH. A missing default file is an empty configuration (its path NULL);
 * a missing file that was named (argument or environment) is -ENOENT. The path may be a
 * symlink, but the file it leads to must be a regular file: anything else is -EPERM (message
 * says why). Parse errors: -EINVAL, message "FILE:LINE: what is wrong". Other open/read
 * failures: their -errno, message naming the file. */
int gpuctl_config_load(struct gpuctl_ctx *ctx, const char *path, struct gpuctl_config **ret_cfg);
/* Parses text of len bytes (need not be NUL-terminated); name is used in messages. The result
 * has no path (gpuctl_config_path NULL) and no file owner. */
int gpuctl_config_parse(struct gpuctl_ctx *ctx, const char *name, const char *text, size_t len,
                        struct gpuctl_config **ret_cfg);
void gpuctl_config_free(struct gpuctl_config *cfg);
/* The file read (as named), NULL when none was (empty configuration, or parsed from text). */
const char *gpuctl_config_path(const struct gpuctl_config *cfg);
/* Owner uid and permission bits (st_mode & 07777) of the file read, as fstat() saw the opened
 * file, for trust checks; -ENOENT when no file was read. */
int gpuctl_config_file_owner(const struct gpuctl_config *cfg, uint32_t *ret_uid,
                             uint32_t *ret_mode);
/* 1 when path names the very file that was read (same device and inode as the descriptor it
 * was read from, so a path swapped after reading does not match), else 0. */
int gpuctl_config_is_file(const struct gpuctl_config *cfg, const char *path);

/* The global settings; every field has its default when the file does not set it. Library-owned,
 * read through gpuctl_config_settings(); grows at its end. */
struct gpuctl_config_settings {
	const char *lease_dir;    /* absolute path; NULL: not set */
	uint64_t busy_memory;     /* bytes; 0 (default): any foreign process makes a GPU busy */
	int busy_utilization;     /* percent; -1 (default): not used */
	bool share_margin_is_pct; /* share_margin is a percentage (the default, 5%) */
	uint64_t share_margin;    /* bytes, or percent (0-50) when share_margin_is_pct */
};
/* Owned by cfg (a static default set for NULL). */
const struct gpuctl_config_settings *gpuctl_config_settings(const struct gpuctl_config *cfg);
/* The share margin in bytes for a device of total_bytes memory (a percentage rounded up). */
uint64_t gpuctl_config_share_margin(const struct gpuctl_config *cfg, uint64_t total_bytes);

/* Pools, in file order. */
size_t gpuctl_config_pool_count(const struct gpuctl_config *cfg);
/* Pool i: name, description (NULL if none), whether restricted (some user could be refused:
 * it has users or groups, and users does not contain "*"), and the users/groups lists exactly
 * as written (NULL-terminated arrays, empty when not given, owned by cfg; "*" kept). Any ret_*
 * may be NULL. -EINVAL when i is out of range. */
int gpuctl_config_pool_get(const struct gpuctl_config *cfg, size_t i, const char **ret_name,
                           const char **ret_description, bool *ret_restricted,
                           const char *const **ret_users, const char *const **ret_groups);
/* Resolves every pool's gpus against snap and checks them: an id that names no GPU of snap,
 * or a GPU given to two pools, is -EINVAL "FILE:LINE: ..." (the line of the offending entry;
 * for a GPU in two pools naming both pools). On success *ret_pool (an array of snap's GPU
 * count, malloc'ed, caller frees) gives each GPU's pool index, or -1 for the default pool. */
int gpuctl_config_pool_map(struct gpuctl_ctx *ctx, const struct gpuctl_config *cfg,
                           const struct gpuctl_snapshot *snap, int **ret_pool);
/* Index of the pool called name; -ENOENT (message lists the pools) when there is none.
 * "default" is not a pool index: callers treat it themselves (-ENOENT here too). */
int gpuctl_config_pool_find(struct gpuctl_ctx *ctx, const struct gpuctl_config *cfg,
                            const char *name, size_t *ret_index);
/* Whether user uid may draw from pool i: 1 yes, 0 no (message set: "pool 'NAME' is restricted
 * to users a, b and groups c", readable after "not allowed: "), -EINVAL for a bad i, -ENOMEM.
 * Root (uid 0) and unrestricted pools: yes. A user entry matches by name (getpwuid) or decimal
 * uid; a group entry by name or decimal gid, and the user is in it when it is their primary
 * group or in getgrouplist() of the user. Names that do not exist never match (logged at
 * debug level). */
int gpuctl_config_pool_allows(struct gpuctl_ctx *ctx, const struct gpuctl_config *cfg, size_t i,
                              uint32_t uid);

/* ---- Health (src/lib/health/: health.c, xid.c, kmsg.c; docs/health.md) ---- */

/* A finding's severity, and a GPU's verdict (the worst of its findings). Ordered, so the
 * worse of two is the larger; the values are DCGM's health results divided by ten. */
enum gpuctl_health_severity {
	GPUCTL_HEALTH_OK = 0,   /* informational: nothing to do */
	GPUCTL_HEALTH_WARN = 1, /* usable, but act (restart the job, plan a reset, check cooling) */
	GPUCTL_HEALTH_FAIL = 2, /* keep work off this GPU */
};
/* "OK", "WARN", "FAIL"; NULL for a value out of range. */
const char *gpuctl_health_severity_name(int severity);

/* The classes of NVIDIA's XID catalog as gpuctl acts on them. */
enum gpuctl_xid_class {
	GPUCTL_XID_UNKNOWN = 0,     /* not in gpuctl's table, or 999 (NVML: unknown XID): WARN */
	GPUCTL_XID_FENCE = 1,       /* take the GPU out of service: FAIL */
	GPUCTL_XID_APPLICATION = 2, /* restart the job; the GPU stays usable: WARN */
	GPUCTL_XID_INFO = 3,        /* count only: an OK finding */
	GPUCTL_XID_CHECK = 4,       /* act on the advice (update software, read the recovery
	                             * action); not known to be broken: WARN */
};
/* What gpuctl knows about one XID code. Strings are static. The caller allocates it: initialise
 * with GPUCTL_XID_INFO_INIT (the library writes only the first struct_size bytes). */
struct gpuctl_xid_info {
	size_t struct_size;           /* sizeof(struct gpuctl_xid_info) */
	unsigned code;                /* the XID */
	enum gpuctl_xid_class class_; /* how gpuctl acts on it */
	const char *meaning;          /* short meaning, after NVIDIA's catalog */
	const char *action;           /* the recommended action */
};
#define GPUCTL_XID_INFO_INIT                                                                       \
	{                                                                                          \
		.struct_size = sizeof(struct gpuctl_xid_info)                                      \
	}
/* Fills *ret_info (its first struct_size bytes) for code; for a code outside the table, class
 * UNKNOWN with a generic meaning and action. 0, or -EINVAL only for a NULL ret_info or a
 * struct_size that does not cover code. */
int gpuctl_xid_lookup(unsigned code, struct gpuctl_xid_info *ret_info);
/* As gpuctl_xid_lookup, for one occurrence with the text the driver logged after the code
 * (gpuctl_xid_log_get's text; NULL when not known, as for NVML events): XIDs 144-150 (NVLink5)
 * are graded by the unit, error status and sub-code the line gives, as NVIDIA's catalog decodes
 * them (docs/health.md); other codes as gpuctl_xid_lookup. */
int gpuctl_xid_lookup_event(unsigned code, const char *text, struct gpuctl_xid_info *ret_info);
/* "fence", "application", "unknown", "info", "check"; NULL for a value out of range. */
const char *gpuctl_xid_class_name(int class_);

/* XID events recorded for a snapshot's GPUs: parsed from the kernel log, or added one by one
 * (NVML events). Adding, parsing and reading need the log to itself; count and get only read. */
struct gpuctl_xid_log;
int gpuctl_xid_log_new(struct gpuctl_xid_log **ret_log);
void gpuctl_xid_log_free(struct gpuctl_xid_log *log);
/* Records one XID on GPU gpu (a snapshot index). text: the rest of the line, or NULL. */
int gpuctl_xid_log_add(struct gpuctl_xid_log *log, size_t gpu, unsigned xid, const char *text);
/* Parses kernel-log text (the records of /dev/kmsg, or dmesg/journal lines) and records the
 * XIDs of snap's GPUs: lines "NVRM: Xid (PCI:0000:07:00): 79, ..." (also without "PCI:", with a
 * function number, or with text after the bus id), and "NVRM: GPU 0000:07:00.0: GPU has fallen
 * off the bus." as XID 79. A line announcing that the NVIDIA kernel module loaded forgets what
 * came before it (events count since the driver loaded); a GPU reset forgets that GPU's earlier
 * XIDs: the driver's "NVRM: GPU at PCI:0000:07:00: GPU-<uuid>" (printed once per initialisation
 * of a GPU) and "GPU reset executed: GPU-<uuid>" (docs/health.md, "After a reset"). Malformed lines
 * and lines of other buses are skipped. Returns how many entries the text added (when it holds a
 * driver-load line: how many follow the last one), or -ENOMEM / -EINVAL. */
int gpuctl_xid_log_parse(struct gpuctl_xid_log *log, const struct gpuctl_snapshot *snap,
                         const char *text, size_t len);
/* Reads the kernel log at path (NULL: /dev/kmsg, read without blocking to its current end)
 * and parses it as above. -errno when it cannot be opened or read (message on ctx). */
int gpuctl_xid_log_read(struct gpuctl_ctx *ctx, struct gpuctl_xid_log *log,
                        const struct gpuctl_snapshot *snap, const char *path);
size_t gpuctl_xid_log_count(const struct gpuctl_xid_log *log);
/* Forgets every XID of GPU gpu and counts a reset of it. 0, -ENOMEM, -EINVAL. */
int gpuctl_xid_log_forget(struct gpuctl_xid_log *log, size_t gpu);
/* How many resets (re-initialisations) of GPU gpu log has seen since the driver loaded: the
 * kernel-log lines above, and gpuctl_xid_log_forget. Every XID is in the kernel log, so where it
 * shows a reset, XIDs recorded elsewhere (the health state file) are older or duplicates. */
unsigned gpuctl_xid_log_resets(const struct gpuctl_xid_log *log, size_t gpu);
/* Entry i: its GPU (snapshot index), XID and text (NULL if none; owned by log). -EINVAL when i
 * is out of range. */
int gpuctl_xid_log_get(const struct gpuctl_xid_log *log, size_t i, size_t *ret_gpu,
                       unsigned *ret_xid, const char **ret_text);

/* XID events from NVML as they happen (nvmlEventSetCreate / nvmlDeviceRegisterEvents /
 * nvmlEventSetWait_v2): only events after gpuctl_xid_watch_new count. One thread's at a time.
 * It uses the NVML library of the context it was made with: free it before that context. */
struct gpuctl_xid_watch;
/* Registers XID events of snap's readable GPUs (loads NVML if needed). -EOPNOTSUPP when the
 * NVML library has no event API or no GPU delivers XID events (the kernel log is then the only
 * source), -EIO, -ENOMEM. */
int gpuctl_xid_watch_new(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                         struct gpuctl_xid_watch **ret_watch);
void gpuctl_xid_watch_free(struct gpuctl_xid_watch *watch);
/* Waits up to timeout_ms for one event. An XID of a GPU of the snapshot is appended to log
 * (its snapshot index, the code, text "NVML event"; codes NVML cannot name are 999): returns 1.
 * 0 when nothing (or no XID) came; -ENODEV when NVML reports a GPU lost (take a snapshot to
 * learn which); -EIO for other NVML errors. */
int gpuctl_xid_watch_wait(struct gpuctl_ctx *ctx, struct gpuctl_xid_watch *watch,
                          unsigned timeout_ms, struct gpuctl_xid_log *log);

/* The CUDA allocation probe, run in the calling process: dlopen("libcuda.so.1"), cuInit, a
 * context on the one device CUDA shows (the caller sets CUDA_VISIBLE_DEVICES to one GPU's
 * UUID), allocate and free bytes, destroy the context. 0 when every step worked; -ENOENT (no
 * libcuda.so.1), -ENOEXEC (not a CUDA driver), -ENODEV (CUDA sees no device), -EINVAL (more than
 * one device visible, bytes 0), -EIO (a CUDA call failed: the message names it and the
 * error). A hung driver hangs this call: run it in a child process with a timeout (gpuctl
 * health --probe does). */
int gpuctl_cuda_probe_here(struct gpuctl_ctx *ctx, size_t bytes);

/* The outcome of one GPU's probe, for gpuctl_health_opts.probes. A GPU in MIG mode is probed
 * through each of its MIG devices (CUDA cannot use it whole); its result is the first failing
 * device's (detail names it), else OK. Initialise each with
 * GPUCTL_PROBE_RESULT_INIT: the library steps through the array by its first entry's struct_size
 * (every entry must have the same) and reads only the fields that size covers, so an array built
 * against an older header still reads right. */
enum gpuctl_probe_status {
	GPUCTL_PROBE_NOT_RUN = 0,   /* no finding */
	GPUCTL_PROBE_OK = 1,        /* no finding */
	GPUCTL_PROBE_FAILED = 2,    /* FAIL: a CUDA step failed (detail says which) */
	GPUCTL_PROBE_HUNG = 3,      /* FAIL: the probe did not finish within its timeout */
	GPUCTL_PROBE_NO_DEVICE = 4, /* an OK finding: the GPU is in MIG mode without a MIG device,
	                             * so CUDA has nothing to use on it (not a fault) */
};
struct gpuctl_probe_result {
	size_t struct_size; /* sizeof(struct gpuctl_probe_result) */
	int status;         /* enum gpuctl_probe_status */
	const char *detail; /* the failure ("cuMemAlloc: CUDA_ERROR_UNKNOWN (999)"), or NULL */
	double seconds;     /* how long it ran (the timeout for HUNG) */
};
#define GPUCTL_PROBE_RESULT_INIT                                                                   \
	{                                                                                          \
		.struct_size = sizeof(struct gpuctl_probe_result)                                  \
	}

/* The health state file `gpuctl health --watch` keeps (docs/health.md, "State file"): the XIDs it
 * saw and its last sample of the rate counters, by GPU UUID, for one-shot checks to use.
 * Writes snap's sample and xids' XIDs to path atomically (a temporary file, then rename). */
int gpuctl_health_state_write(struct gpuctl_ctx *ctx, const char *path,
                              const struct gpuctl_snapshot *snap,
                              const struct gpuctl_xid_log *xids);
/* Reads path against snap: its XIDs of snap's GPUs are added to xids (unless xids already holds
 * that XID for that GPU, e.g. from the kernel log); its sample becomes *ret_prev (a snapshot to
 * pass as gpuctl_health_opts.prev, with *ret_age_s its age; NULL and 0 when the file has no
 * usable sample). A file from an earlier boot is ignored (returns 0, nothing added). -ENOENT when
 * missing, -EPERM when not a regular file (a symlink included) of root or the caller writable
 * only by its owner (both: no state, nothing added), -ENOMEM. Any other error means a state
 * file is there but cannot be used, and nothing of it was added: -EBADMSG when it is corrupt,
 * cut short, of an unknown format or too large; an errno when it cannot be opened or read. Pass
 * that message as gpuctl_health_opts.state_error, so that what the file may have recorded (a
 * FAIL XID) makes every GPU WARN instead of being forgotten (docs/health.md, "State file"). */
int gpuctl_health_state_read(struct gpuctl_ctx *ctx, const char *path,
                             const struct gpuctl_snapshot *snap, struct gpuctl_xid_log *xids,
                             struct gpuctl_snapshot **ret_prev, double *ret_age_s);

/* Options of a health check. Initialise with GPUCTL_HEALTH_OPTS_INIT. */
struct gpuctl_health_opts {
	size_t struct_size; /* sizeof(struct gpuctl_health_opts) */
	bool strict;        /* a pending page retirement or row remap is FAIL, not WARN */
	/* An earlier snapshot of the same machine (matched by UUID) and the seconds between it and
	 * the checked one, for the rate checks (PCIe replays); NULL: no rate checks. */
	const struct gpuctl_snapshot *prev;
	double prev_age_s;
	/* CUDA probe outcomes by snapshot index (n_probes entries; NULL: not probed). -EINVAL when
	 * their struct_size differ or do not cover status. */
	const struct gpuctl_probe_result *probes;
	size_t n_probes;
	/* When set, why the health state file could not be used (gpuctl_health_state_read's
	 * message): every GPU that is not lost then gets a WARN finding "state" quoting it. */
	const char *state_error;
};
#define GPUCTL_HEALTH_OPTS_INIT                                                                    \
	{                                                                                          \
		.struct_size = sizeof(struct gpuctl_health_opts)                                   \
	}

/* One finding about one GPU. Library-owned (the report), read through gpuctl_health_finding();
 * grows at its end. Strings are owned by the report. */
struct gpuctl_health_finding {
	const char *check;   /* check id, e.g. "ecc-dbe", "xid" (docs/health.md) */
	size_t gpu;          /* snapshot index */
	int severity;        /* enum gpuctl_health_severity */
	const char *message; /* what was seen, with the numbers */
	const char *action;  /* what to do */
	unsigned xid;        /* for check "xid": the code, else 0 */
	int xid_class;       /* for check "xid": enum gpuctl_xid_class of this finding (for XIDs
	                      * 144-150 graded by the logged status), else 0 */
};

/* Never changes once made; keeps no pointer to its context or snapshot. */
struct gpuctl_health_report;
/* Checks every GPU of snap (which should have GPUCTL_SNAP_HEALTH and GPUCTL_SNAP_TOPOLOGY; a
 * fact the snapshot lacks is a check skipped, never a finding) against the rules of
 * docs/health.md, with the XIDs of xids (NULL: none). Pure: no NVML, no I/O. -ENOMEM,
 * -EINVAL for a bad opts. */
int gpuctl_health_check(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                        const struct gpuctl_xid_log *xids, const struct gpuctl_health_opts *opts,
                        struct gpuctl_health_report **ret_report);
void gpuctl_health_report_free(struct gpuctl_health_report *report);
/* The per-GPU fields gpuctl_health_check reads (static, *ret_n entries): what a snapshot for a
 * health check passes to gpuctl_snapshot_take_fields, with GPUCTL_SNAP_HEALTH (and
 * GPUCTL_SNAP_TOPOLOGY for the NVLink check). */
const enum gpuctl_field *gpuctl_health_fields(size_t *ret_n);
/* Findings, by GPU index, then worst first, then check order. */
size_t gpuctl_health_finding_count(const struct gpuctl_health_report *report);
const struct gpuctl_health_finding *gpuctl_health_finding(const struct gpuctl_health_report *report,
                                                          size_t i);
/* The verdict of GPU gpu (the worst severity of its findings, OK without any); -EINVAL for an
 * index out of range. */
int gpuctl_health_verdict(const struct gpuctl_health_report *report, size_t gpu);

/* ---- The site: configuration and lease directory (src/lib/site.c; docs/library.md) ---- */

/* What governs requests on this machine: the configuration file (pools, busy thresholds, share
 * margin, the lease directory's path) and the lease directory, opened and checked together,
 * because a shared lease directory decides which configuration governs it (docs/config.md
 * "Trust"). gpuctl_alloc() opens one itself; gpuctl ps, the exporter and programs that show
 * the machine as gpuctl's rules see it open one with gpuctl_site_open(). Never changes once
 * open (its lease directory is shared as a lease directory is); outlives its context. */
struct gpuctl_site;

enum gpuctl_site_flags {
	/* Create the lease directory when it is missing and the caller may (root, or a parent of
	 * the caller's own), as taking a lease does. Without it a missing directory is not
	 * created and means that nothing is leased (gpuctl_site_lease_dir() returns NULL). */
	GPUCTL_SITE_CREATE = 1u << 0,
	/* Load the configuration only; do not look at the lease directory (its path is still
	 * resolved, for gpuctl_site_health_state_path). */
	GPUCTL_SITE_NO_LEASES = 1u << 1,
};

/* Opens the site. config_path: the configuration file, NULL for $GPUCTL_CONFIG (when set and
 * not empty), else GPUCTL_CONFIG_DEFAULT_PATH (a missing default file is an empty
 * configuration). lease_dir: NULL for $GPUCTL_LEASE_DIR, else the configuration's lease_dir,
 * else "/run/gpuctl". A lease directory that is not the caller's own (a shared one) is governed
 * by the configuration it names (DIR/config, else the default path): that file replaces one
 * taken from $GPUCTL_CONFIG or the default, a different file named in config_path is -EINVAL,
 * and a governing file that others than root or the directory's owner could write is -EPERM.
 * Errors (message on ctx, one line, naming the file or directory): -EINVAL a configuration
 * that does not parse ("FILE:LINE: ...") or a named one that is missing; -EPERM an unsafe lease
 * directory or configuration; -ENOENT a missing lease directory with GPUCTL_SITE_CREATE that
 * is not ours to create (the message names `sudo gpuctl lease init` and GPUCTL_LEASE_DIR), or
 * a configuration file a shared directory names that is missing; other -errno for I/O. */
int gpuctl_site_open(struct gpuctl_ctx *ctx, const char *config_path, const char *lease_dir,
                     unsigned flags, struct gpuctl_site **ret_site);
void gpuctl_site_free(struct gpuctl_site *site);
/* The configuration that governs the site; NULL for an empty one (every gpuctl_config_*
 * query accepts NULL). Owned by site. */
const struct gpuctl_config *gpuctl_site_config(const struct gpuctl_site *site);
/* The lease directory's path, resolved as gpuctl_site_open says. Owned by site. */
const char *gpuctl_site_lease_dir_path(const struct gpuctl_site *site);
/* The opened lease directory; NULL when it does not exist (nothing is leased) or the site was
 * opened with GPUCTL_SITE_NO_LEASES. Owned by site. */
struct gpuctl_lease_dir *gpuctl_site_lease_dir(const struct gpuctl_site *site);
/* The health state file `gpuctl health --watch` keeps (docs/health.md): $GPUCTL_HEALTH_STATE,
 * else gpuctl-health.state beside the lease directory. Owned by site. */
const char *gpuctl_site_health_state_path(const struct gpuctl_site *site);
/* Fills *lreq with GPUCTL_LEASE_REQUEST_INIT's values and the configuration's busy thresholds
 * and share margin, writing only the first lreq->struct_size bytes (set struct_size first, e.g.
 * with GPUCTL_LEASE_REQUEST_INIT). -EINVAL for a struct_size smaller than the first release's. */
int gpuctl_site_lease_defaults(const struct gpuctl_site *site, struct gpuctl_lease_request *lreq);
/* The health report of snap as `gpuctl health` makes it: the rules of docs/health.md over snap
 * (take it with gpuctl_health_fields() and GPUCTL_SNAP_HEALTH), with the XIDs of the kernel log
 * ($GPUCTL_KMSG, else /dev/kmsg) and the XIDs and counter sample of the site's health state
 * file, each when it can be read (if not, logged at debug level: a missing source is no
 * finding). -ENOMEM. */
int gpuctl_site_health(struct gpuctl_ctx *ctx, const struct gpuctl_site *site,
                       const struct gpuctl_snapshot *snap,
                       struct gpuctl_health_report **ret_report);
/* The snapshot flags for a health verdict judged against the health state file at state_path
 * (gpuctl_site_health_state_path(); NULL: none): GPUCTL_SNAP_HEALTH and
 * GPUCTL_SNAP_NVLINK_STATE, with GPUCTL_SNAP_NO_RATE_COUNTERS when no such file exists (no earlier
 * sample to judge the NVLink error rate against, so its counters are not read). A snapshot taken
 * with these flags and gpuctl_health_fields() holds the facts every gpuctl command judges
 * (docs/health.md, "One verdict"), so the verdict is the same whoever asks. */
unsigned gpuctl_health_snapshot_flags(const char *state_path);

/* ---- The allocation call (src/lib/alloc.c; docs/library.md) ---- */

/* What gpuctl_alloc() does with the devices it chooses. */
enum gpuctl_alloc_mode {
	/* Choose and take no lease; devices leased now (or whose lock file is unusable) are not
	 * chosen. What `gpuctl select` prints: someone may take them before they are used. */
	GPUCTL_ALLOC_CHOOSE = 0,
	/* Choose as GPUCTL_ALLOC_LEASE would (devices busy with processes of no lease are not
	 * chosen either, unless ignore_foreign) and take no lease: `gpuctl run --dry-run`. */
	GPUCTL_ALLOC_PREVIEW = 1,
	/* Choose and lease in one step under the lease directory's lock: `gpuctl run`,
	 * `gpuctl select --hold`. The lease is held while the gpuctl_alloc handle lives. */
	GPUCTL_ALLOC_LEASE = 2,
};

/* A request. Initialise with GPUCTL_ALLOC_REQUEST_INIT or gpuctl_alloc_request_init();
 * struct_size lets it grow without breaking callers built against an older header. Strings
 * are borrowed for the call only. */
struct gpuctl_alloc_request {
	size_t struct_size; /* sizeof(struct gpuctl_alloc_request) */
	int mode;           /* enum gpuctl_alloc_mode */
	unsigned count;     /* devices wanted; 0 is allowed (the empty set) */
	/* filters, as struct gpuctl_select_request says */
	uint64_t min_free_mem;   /* bytes free at least; 0: any */
	int max_util;            /* GPU utilisation at most, percent; -1: any */
	bool no_procs;           /* no compute process on the device */
	const char *only;        /* GPU ids to choose among; NULL: all */
	const char *exclude;     /* GPU ids never to choose; NULL: none */
	int numa_node;           /* only GPUs attached to this NUMA node; -1: any */
	const char *mig_profile; /* MIG devices of this profile; NULL: whole GPUs */
	const char *pool;        /* the pool to draw from (docs/config.md); NULL or "default": the
	                          * GPUs no pool lists */
	bool allow_unhealthy;    /* also GPUs whose health verdict is FAIL, WARN ones like any
	                          * other; without it FAIL GPUs are never chosen and WARN ones
	                          * only when the request cannot be met without them */
	bool ignore_outer;       /* choose among all GPUs, not within the allocation the process
	                          * runs in (gpuctl_outer_allocation) */
	bool ignore_foreign;     /* PREVIEW, LEASE: also devices running processes of no lease */
	/* the lease (LEASE; share_mem also shapes CHOOSE and PREVIEW) */
	uint64_t share_mem;  /* > 0: a shared lease declaring this many bytes on each device
	                      * (docs/leases.md "Sharing"); 0: exclusive */
	const char *label;   /* shown by gpuctl ps; NULL: none */
	const char *command; /* the job's command line for the owner record; NULL: none */
	/* waiting in line (LEASE only; docs/leases.md "Waiting") */
	bool wait;             /* wait for the devices, first come first served */
	double wait_timeout_s; /* at most this long; < 0: forever */
	int cancel_fd;         /* >= 0: the wait ends (-ECANCELED) as soon as poll(2) reports
	                        * anything on this descriptor (readable, hang-up, error); the
	                        * library only polls it, never reads it; -1: none */
	/* where (NULL: as gpuctl_site_open says) */
	const char *config_path;
	const char *lease_dir;
	/* GPU UUIDs never to choose, beyond exclude (a failover's failed GPUs); an entry that
	 * names no GPU of the machine is ignored */
	const char *const *avoid;
	size_t n_avoid;
	/* LEASE: the caller's current allocation, which the new one replaces (a failover; NULL:
	 * none). Its lease's devices count as the caller's own, free to this request and never
	 * reserved for waiters; those chosen again stay locked throughout (the new lease holds
	 * the same locked descriptions), so nobody can take them in between. It is not changed:
	 * it still holds all its devices when gpuctl_alloc returns, success or not; free it then
	 * to let go of those the new allocation did not keep. The same lease directory (else its
	 * devices count as leased, as anyone's). A failure's message begins "no replacement: ". */
	const struct gpuctl_alloc *replace;
};
#define GPUCTL_ALLOC_REQUEST_INIT                                                                  \
	{                                                                                          \
		.struct_size = sizeof(struct gpuctl_alloc_request), .count = 1, .max_util = -1,    \
		.numa_node = -1, .wait_timeout_s = -1, .cancel_fd = -1                             \
	}
/* Writes GPUCTL_ALLOC_REQUEST_INIT's values into the first struct_size bytes of *req (for
 * callers that cannot use the macro, such as bindings). -EINVAL when struct_size is smaller
 * than the first release's struct. */
int gpuctl_alloc_request_init(struct gpuctl_alloc_request *req, size_t struct_size);

/* An allocation: the snapshot the choice was made on, the chosen devices and, in LEASE mode,
 * the lease (held until gpuctl_alloc_free). Never changes once made; outlives its context.
 * Threads may call gpuctl_alloc at once, each with its own context; with wait or share_mem only
 * one thread of a process at a time (see struct gpuctl_lease_dir). */
struct gpuctl_alloc;

/* Does everything `gpuctl select`, `select --hold` and `run` do before they print or start a
 * job, in this order: opens the site (configuration and lease directory, checked together);
 * takes a snapshot of what the filters, the score and the health rules read; resolves the
 * outer allocation (unless ignore_outer); judges health (the live verdicts, the kernel log and
 * the health state file: FAIL never chosen, WARN only when needed, unless allow_unhealthy);
 * applies the pool (and whether the calling user may draw from it); excludes leased devices,
 * and in PREVIEW and LEASE mode devices busy with processes of no lease (unless
 * ignore_foreign); chooses the best set (gpuctl_select); and in LEASE mode locks it, waiting
 * in line when asked. On success *ret_alloc holds all of it.
 * Errors, each with a one-line message on ctx (gpuctl_errmsg) that names the input:
 *   -EINVAL     a bad request: a malformed or unknown id, MIG profile or pool, a configuration
 *               that does not parse, an outer allocation that cannot be read, wait without
 *               LEASE mode, an unknown mode;
 *   -ENOSPC     too few devices qualify now (the message says which filter removed which
 *               devices), or, when waiting, can never qualify ("can never be satisfied: ...");
 *   -ETIMEDOUT  waited wait_timeout_s ("waited N s: " and why the devices are not free);
 *   -ECANCELED  cancel_fd became ready while waiting;  -EINTR  a signal interrupted the wait;
 *   -EACCES     the calling user may not draw from the pool;
 *   -EAGAIN     the lease directory's select.lock was held by another process past the bound
 *               (gpuctl_ctx_set_lock_wait; when waiting, the deadline): the message names it;
 *   -ENODEV     no NVIDIA driver, or NVML cannot initialise;  -ENOEXEC  not an NVML library;
 *   -EPERM, -ENOENT  the lease directory or configuration (gpuctl_site_open);
 *   -EIO, -ENOMEM and other -errno.
 * Nothing stays leased after a failure. */
int gpuctl_alloc(struct gpuctl_ctx *ctx, const struct gpuctl_alloc_request *req,
                 struct gpuctl_alloc **ret_alloc);
/* Frees the allocation and releases this process's hold on its lease (processes that
 * inherited the lock descriptors, gpuctl_lease_fds, keep it). Accepts NULL. */
void gpuctl_alloc_free(struct gpuctl_alloc *alloc);
/* The snapshot the choice was made on (owned by alloc). */
const struct gpuctl_snapshot *gpuctl_alloc_snapshot(const struct gpuctl_alloc *alloc);
/* The selection (owned by alloc): scores and the runner-up, for explanations. */
const struct gpuctl_selection *gpuctl_alloc_selection(const struct gpuctl_alloc *alloc);
/* The chosen devices, best first (owned by alloc; indices into gpuctl_alloc_snapshot). */
const struct gpuctl_devset *gpuctl_alloc_devices(const struct gpuctl_alloc *alloc);
/* The CUDA_VISIBLE_DEVICES value for the chosen devices: their full UUIDs, comma-separated,
 * "" for none (owned by alloc). Set CUDA_DEVICE_ORDER=PCI_BUS_ID too, so indices the program
 * derives agree with CUDA's ordinals. */
const char *gpuctl_alloc_cuda_visible_devices(const struct gpuctl_alloc *alloc);
/* The lease (LEASE mode), else NULL. Owned by alloc: gpuctl_alloc_free releases it. */
struct gpuctl_lease *gpuctl_alloc_lease(const struct gpuctl_alloc *alloc);
/* The lease directory's path (as resolved), NULL when it did not exist and none was taken. */
const char *gpuctl_alloc_lease_dir_path(const struct gpuctl_alloc *alloc);
/* The health report the choice respected, NULL with allow_unhealthy (owned by alloc). */
const struct gpuctl_health_report *gpuctl_alloc_health(const struct gpuctl_alloc *alloc);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* GPUCTL_GPUCTL_H */
