/* SPDX-License-Identifier: MIT */
/*
 * metrics.h: the metrics of `gpuctl exporter` and their rendering in the Prometheus text
 * exposition format 0.0.4 (docs/metrics.md lists every metric).
 *
 * Decisions:
 * - One table (metrics_dcgm[] in metrics.c) maps each dcgm-exporter default metric to the
 *   gpuctl field it comes from, its type and its scale. A metric gpuctl does not read yet has
 *   METRIC_NOT_READ and is simply omitted; when the field appears it is one line in the table.
 * - Rendering is pure (no NVML, no I/O): it reads a snapshot, an optional lease list and the
 *   exporter's own counters and writes text into a growable buffer, so it runs once per sample
 *   and scrapes only copy the result.
 */
#ifndef GPUCTL_CLI_METRICS_H
#define GPUCTL_CLI_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpuctl/gpuctl.h"
#include "usage-counters.h"

/* A growable text buffer. An allocation failure sets failed and makes later writes no-ops, so
 * a renderer checks once at the end. */
struct textbuf {
	char *data;  /* NUL-terminated text, NULL until the first write */
	size_t len;  /* bytes of text, without the NUL */
	size_t cap;  /* bytes allocated */
	bool failed; /* an allocation failed: the text is incomplete */
};

void textbuf_free(struct textbuf *b);
void textbuf_put(struct textbuf *b, const char *s, size_t n);
void textbuf_puts(struct textbuf *b, const char *s);
void textbuf_printf(struct textbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as a label value: backslash, double quote and newline escaped as the format says;
 * other control characters and bytes that are not valid UTF-8 become '?' (Prometheus refuses
 * invalid UTF-8). NULL appends nothing (an empty value). */
void textbuf_label_value(struct textbuf *b, const char *s);
/* Appends s as HELP text: backslash and newline escaped. */
void textbuf_help(struct textbuf *b, const char *s);

/* The field a metric has no source for yet. */
#define METRIC_NOT_READ (-1)

enum metric_scale {
	METRIC_SCALE_ONE,   /* the field's value as it is */
	METRIC_SCALE_MIB,   /* bytes shown in MiB (rounded down, as nvidia-smi) */
	METRIC_SCALE_MILLI, /* thousandths shown in units (mW as W), three decimals */
};

struct dcgm_metric {
	const char *name;        /* dcgm-exporter's name, e.g. "DCGM_FI_DEV_GPU_UTIL" */
	const char *type;        /* "gauge" or "counter", as dcgm-exporter declares it */
	const char *help;        /* HELP text, in our words */
	int field;               /* enum gpuctl_field, or METRIC_NOT_READ */
	enum metric_scale scale; /* from the field's unit to the metric's */
};

/* The dcgm-exporter metrics gpuctl knows, in dcgm-exporter's default-counters order. */
extern const struct dcgm_metric metrics_dcgm[];
extern const size_t metrics_dcgm_count;

/* The per-GPU fields the exporter reads (those of metrics_dcgm that are read, plus what the
 * gpuctl_* metrics need). Writes up to max; returns how many there are. */
size_t metrics_fields(enum gpuctl_field *fields, size_t max);
/* The snapshot flags the exporter needs: the health verdicts' facts but the NVLink error
 * counters (a refresh keeps the NVLink states of the last whole snapshot and reads no counters,
 * so no sample could judge their rate; docs/metrics.md). */
#define METRICS_SNAP_FLAGS                                                                         \
	(GPUCTL_SNAP_PROCESSES | GPUCTL_SNAP_PROC_UTIL | GPUCTL_SNAP_MIG | GPUCTL_SNAP_HEALTH |    \
	 GPUCTL_SNAP_NVLINK_STATE | GPUCTL_SNAP_NO_RATE_COUNTERS)

/* The exporter's own counters, rendered as gpuctl_exporter_* metrics. */
struct metrics_stats {
	uint64_t samples;       /* samples taken, failed ones included */
	uint64_t nvml_errors;   /* samples that failed because NVML did */
	uint64_t lease_errors;  /* samples whose lease directory could not be read */
	bool last_ok;           /* the latest sample succeeded */
	bool lease_ok;          /* the latest sample read the lease states (or there are none) */
	double last_duration_s; /* how long the latest sample took (snapshot + leases + render) */
	double last_time_s;     /* when it was taken, seconds since the epoch */
	double overdue_s;       /* 0, or once the next sample is overdue (sampler.h), the seconds
	                         * since the latest one: how long NVML has not answered */
};

/* XIDs of one code on one GPU since the exporter started, in order of first appearance. */
struct metrics_xid {
	size_t gpu;     /* snapshot index */
	unsigned code;  /* the XID */
	uint64_t count; /* how many */
	uint64_t seq;   /* order of the latest one, across all (the highest is the GPU's last) */
};

/* The workload of a process of the snapshot: the exporter's one cache (gpuctl_workloads_get with
 * no start time, so a known process costs no /proc read), asked on the thread that renders.
 * NULL when it is not known. The pointer is valid until the render returns. */
typedef const struct gpuctl_workload *(*metrics_workload_fn)(void *userdata, uint32_t pid);

/* The most processes that get per-process series on one page, unless --max-processes says
 * otherwise (docs/metrics.md, "Per-process series"). */
#define METRICS_DEFAULT_MAX_PROCESSES 100
#define METRICS_MAX_MAX_PROCESSES     100000

struct metrics_input {
	const struct gpuctl_snapshot *snap;        /* NULL when the sample failed */
	const struct gpuctl_lease_list *leases;    /* NULL when there is no lease directory */
	const char *hostname;                      /* the Hostname label */
	const struct metrics_stats *stats;         /* never NULL */
	const struct gpuctl_health_report *health; /* the verdicts of snap, NULL: none */
	const char *const *pool_of;                /* each GPU's pool, NULL: all "default" */
	const struct metrics_xid *xids;            /* XID counts since the exporter started */
	size_t n_xids;                             /* entries of xids */
	metrics_workload_fn workload_of;           /* NULL: no workload labels */
	void *workload_userdata;                   /* workload_of's */
	size_t max_processes; /* the most processes with per-process series (first by GPU index,
	                       * then the driver's order); the others are counted in
	                       * gpuctl_exporter_processes_dropped. 0: none */
	/* each GPU's idle cases (docs/idle.md): for GPU g and case c (enum gpuctl_idle_case),
	 * idle_s[g * GPUCTL_IDLE_CASES + c] the seconds it has held, < 0 when it does not; NULL:
	 * no idle series */
	const double *idle_s;
	/* each GPU's usage counters (usage-counters.h): usage[g] for GPU g, NULL (or usage[g]
	 * NULL): no series */
	const struct usage_totals *const *usage;
	/* the agent's violations so far per kind (foreign, overuse, outside: agent-watch.h),
	 * NULL: no gpuctl_violations_total (the exporter alone) */
	const uint64_t *violations;
};

/* Renders every metric of in into out (appended). 0, or -ENOMEM (out->failed). */
int metrics_render(const struct metrics_input *in, struct textbuf *out);

#endif /* GPUCTL_CLI_METRICS_H */
