/* SPDX-License-Identifier: MIT */
/*
 * health.h: health: XID codes and logs, NVML XID events, the CUDA probe, the health state file and
 * the health check.
 *
 * Part of libgpuctl's public API (include <gpuctl/gpuctl.h>, which includes every header; the
 * rules that hold for all of them are there). Compiles on its own, as C and as C++
 * (tests/unit/test-headers.c).
 */
#ifndef GPUCTL_HEALTH_H
#define GPUCTL_HEALTH_H

#include <stdbool.h>
#include <stddef.h>

#include "decls.h"
#include "context.h"
#include "snapshot.h"
#include "field.h"

/* Exported: see gpuctl.h, "What these headers declare is libgpuctl's whole ABI". */
GPUCTL_BEGIN_DECLS

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
	GPUCTL_PROBE_NOT_RUN = 0, /* no finding */
	GPUCTL_PROBE_OK = 1,      /* an OK finding: it passed (detail: what it did), in how long */
	GPUCTL_PROBE_FAILED = 2,  /* FAIL: a CUDA step failed (detail says which) */
	GPUCTL_PROBE_HUNG = 3,    /* FAIL: the probe did not finish within its timeout */
	GPUCTL_PROBE_NO_DEVICE = 4, /* an OK finding: the GPU is in MIG mode without a MIG device,
	                             * so CUDA has nothing to use on it (not a fault) */
};
struct gpuctl_probe_result {
	size_t struct_size; /* sizeof(struct gpuctl_probe_result) */
	int status;         /* enum gpuctl_probe_status */
	const char *detail; /* the failure ("cuMemAlloc: CUDA_ERROR_UNKNOWN (999)"); for OK what
	                     * passed ("context created, 64 MiB allocated and freed"); or NULL */
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

GPUCTL_END_DECLS

#endif /* GPUCTL_HEALTH_H */
