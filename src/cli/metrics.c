// SPDX-License-Identifier: MIT
/*
 * metrics.c: the exporter's metric table and its Prometheus text renderer (metrics.h).
 *
 * Decisions:
 * - dcgm-exporter's names, types, units and labels (gpu, UUID, pci_bus_id, device, modelName,
 *   Hostname) for the DCGM_FI_* metrics, so dashboards built for it work; `device` is
 *   "nvidia" + the NVML index, as dcgm-exporter writes it. A value gpuctl cannot read is
 *   omitted, never written as 0; a family with no value at all is omitted with its HELP/TYPE.
 * - gpuctl's own metrics follow Prometheus' conventions (gpuctl_ prefix, base units, _total on
 *   counters, snake_case) and carry only `gpu` and `UUID` (to join with the DCGM series); the
 *   other identity labels sit once on gpuctl_gpu_info.
 * - A lost GPU keeps gpuctl_gpu_info and gpuctl_gpu_lost 1; its other series disappear.
 * - Every family is written in one block (the format requires it), in a fixed order, so two
 *   renderings of the same machine are byte-identical.
 * - Workloads (docs/metrics.md, "Workloads"): a GPU all of whose processes belong to one pod or
 *   one Slurm job gets dcgm-exporter's pod/namespace/container or hpc_job labels on its DCGM
 *   series; every kind of holder is one gpuctl_gpu_workload_info series instead, so the DCGM
 *   series do not multiply with each unit or container. The renderer asks the caller for each
 *   process's workload (metrics_input.workload_of) and reads no file itself.
 * - Per-process series are capped (max_processes, first by GPU index) and what the cap left
 *   out is a gauge, so a page's size is bounded however many processes a machine runs.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

/* ---- the table ---- */

#define NOT_READ METRIC_NOT_READ
#define ONE      METRIC_SCALE_ONE
#define MIB      METRIC_SCALE_MIB
#define MILLI    METRIC_SCALE_MILLI

/* Names, types and units: dcgm-exporter's etc/default-counters.csv (see
 * /work/shared/reference/health-monitoring.md section 5.1 and docs/metrics.md). */
const struct dcgm_metric metrics_dcgm[] = {
        {"DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", GPUCTL_F_CLOCK_SM, ONE},
        {"DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", GPUCTL_F_CLOCK_MEM,
         ONE},
        {"DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", GPUCTL_F_TEMP_MEMORY,
         ONE},
        {"DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", GPUCTL_F_TEMP, ONE},
        {"DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", GPUCTL_F_POWER_DRAW, MILLI},
        {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
         "Total energy consumption since boot (in mJ).", GPUCTL_F_ENERGY, ONE},
        {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.",
         GPUCTL_F_PCIE_REPLAY, ONE},
        {"DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", GPUCTL_F_UTIL_GPU, ONE},
        {"DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", GPUCTL_F_UTIL_MEMORY,
         ONE},
        {"DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", GPUCTL_F_UTIL_ENCODER,
         ONE},
        {"DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", GPUCTL_F_UTIL_DECODER,
         ONE},
        /* rendered from XID events by render_health (not a snapshot field) */
        {"DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", NOT_READ,
         ONE},
        {"DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", GPUCTL_F_MEMORY_FREE,
         MIB},
        {"DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", GPUCTL_F_MEMORY_USED,
         MIB},
        {"DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB).", NOT_READ,
         MIB},
        {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter",
         "Total number of NVLink bandwidth counters for all lanes.", NOT_READ, ONE},
        {"DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU license status.", NOT_READ, ONE},
        {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter",
         "Number of remapped rows for uncorrectable errors.", GPUCTL_F_REMAP_UNCORRECTABLE, ONE},
        {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter",
         "Number of remapped rows for correctable errors.", GPUCTL_F_REMAP_CORRECTABLE, ONE},
        {"DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed.",
         GPUCTL_F_REMAP_FAILURE, ONE},
        /* DCGM's profiling module only: NVML has no source for these. */
        {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active.",
         NOT_READ, ONE},
        {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge",
         "Ratio of cycles the tensor (HMMA) pipe is active.", NOT_READ, ONE},
        {"DCGM_FI_PROF_DRAM_ACTIVE", "gauge",
         "Ratio of cycles the device memory interface is active sending or receiving data.",
         NOT_READ, ONE},
        {"DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "The rate of data transmitted over the PCIe bus.",
         NOT_READ, ONE},
        {"DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "The rate of data received over the PCIe bus.",
         NOT_READ, ONE},
};
const size_t metrics_dcgm_count = sizeof(metrics_dcgm) / sizeof(metrics_dcgm[0]);

size_t metrics_fields(enum gpuctl_field *fields, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < metrics_dcgm_count; i++) {
		if (metrics_dcgm[i].field == METRIC_NOT_READ)
			continue;
		if (n < max)
			fields[n] = (enum gpuctl_field)metrics_dcgm[i].field;
		n++;
	}
	/* MIG mode: which processes and memory belong to MIG devices */
	if (n < max)
		fields[n] = GPUCTL_F_MIG_MODE;
	n++;
	return n;
}

/* ---- the text buffer ---- */

void textbuf_free(struct textbuf *b)
{
	free(b->data);
	*b = (struct textbuf){0};
}

static bool reserve(struct textbuf *b, size_t extra)
{
	if (b->failed)
		return false;
	if (b->len + extra + 1 <= b->cap)
		return true;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->len + extra + 1) {
		if (cap > SIZE_MAX / 2) {
			b->failed = true;
			return false;
		}
		cap *= 2;
	}
	char *p = realloc(b->data, cap);
	if (!p) {
		b->failed = true;
		return false;
	}
	b->data = p;
	b->cap = cap;
	return true;
}

void textbuf_put(struct textbuf *b, const char *s, size_t n)
{
	if (!reserve(b, n))
		return;
	memcpy(b->data + b->len, s, n);
	b->len += n;
	b->data[b->len] = '\0';
}

void textbuf_puts(struct textbuf *b, const char *s)
{
	textbuf_put(b, s, strlen(s));
}

void textbuf_printf(struct textbuf *b, const char *fmt, ...)
{
	va_list ap;
	char small[256];

	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->failed = true;
		return;
	}
	if ((size_t)n < sizeof(small)) {
		textbuf_put(b, small, (size_t)n);
		return;
	}
	if (!reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

/* Length of the valid UTF-8 sequence at s (1-4), or 0 if none starts there. Refuses overlong
 * forms, surrogates and code points above U+10FFFF, as Go's utf8.Valid (Prometheus) does. */
static size_t utf8_len(const unsigned char *s)
{
	unsigned char c = s[0];
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return (s[1] & 0xc0) == 0x80 ? 2 : 0;
	if (c >= 0xe0 && c <= 0xef) {
		unsigned char lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
		return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 ? 3 : 0;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		unsigned char lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
		return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 && (s[3] & 0xc0) == 0x80
		               ? 4
		               : 0;
	}
	return 0;
}

static void escape(struct textbuf *b, const char *s, bool quote)
{
	const unsigned char *p = (const unsigned char *)s;
	while (p && *p) {
		size_t n = utf8_len(p);
		if (*p == '\\')
			textbuf_put(b, "\\\\", 2);
		else if (*p == '\n')
			textbuf_put(b, "\\n", 2);
		else if (*p == '"' && quote)
			textbuf_put(b, "\\\"", 2);
		else if (n == 0 || *p < 0x20 || *p == 0x7f)
			textbuf_put(b, "?", 1);
		else
			textbuf_put(b, (const char *)p, n);
		p += n ? n : 1;
	}
}

void textbuf_label_value(struct textbuf *b, const char *s)
{
	escape(b, s, true);
}

void textbuf_help(struct textbuf *b, const char *s)
{
	escape(b, s, false);
}

/* ---- rendering ---- */

static void family(struct textbuf *b, const char *name, const char *type, const char *help)
{
	textbuf_printf(b, "# HELP %s ", name);
	textbuf_help(b, help);
	textbuf_printf(b, "\n# TYPE %s %s\n", name, type);
}

/* One label pair, name="value", with a leading comma unless first. */
static void label(struct textbuf *b, bool first, const char *name, const char *value)
{
	textbuf_printf(b, "%s%s=\"", first ? "" : ",", name);
	textbuf_label_value(b, value);
	textbuf_put(b, "\"", 1);
}

static void value_int(struct textbuf *b, int64_t v)
{
	textbuf_printf(b, "} %" PRId64 "\n", v);
}

static void value_scaled(struct textbuf *b, int64_t v, enum metric_scale scale)
{
	switch (scale) {
	case METRIC_SCALE_ONE:
		value_int(b, v);
		break;
	case METRIC_SCALE_MIB:
		value_int(b, v / (1024 * 1024));
		break;
	case METRIC_SCALE_MILLI: {
		uint64_t a = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
		textbuf_printf(b, "} %s%" PRIu64 ".%03u\n", v < 0 ? "-" : "", a / 1000,
		               (unsigned)(a % 1000));
		break;
	}
	}
}

/* The per-GPU pieces every series needs, computed once per rendering. */
struct gpu_labels {
	char index[24];                       /* "3" */
	const char *uuid;                     /* "" when unknown */
	const struct gpuctl_workload *holder; /* the one workload on the GPU, or NULL */
};

/* A label with a leading comma, left out when its value is unknown (NULL): Prometheus reads
 * an empty label as an absent one, so writing pod="" would only say it less plainly. */
static void label_known(struct textbuf *b, const char *name, const char *value)
{
	if (value)
		label(b, false, name, value);
}

/* dcgm-exporter's labels for a workload (its internal/pkg/transformation/const.go:
 * podAttribute "pod", namespaceAttribute "namespace", containerAttribute "container",
 * hpcJobAttribute "hpc_job"), each with a leading comma; none for other kinds, and none of a
 * pod's names that its runtime's state did not give (docs/metrics.md). */
static void workload_dcgm_labels(struct textbuf *b, const struct gpuctl_workload *w)
{
	char job[16];

	if (w && w->kind == GPUCTL_WORKLOAD_POD) {
		label_known(b, "pod", w->name);
		label_known(b, "namespace", w->pod_namespace);
		label_known(b, "container", w->container);
	} else if (w && w->kind == GPUCTL_WORKLOAD_SLURM) {
		snprintf(job, sizeof(job), "%" PRIu32, w->slurm_job);
		label(b, false, "hpc_job", job);
	}
}

/* dcgm-exporter's identity labels of GPU i, without braces, and its holder's labels. */
static void dcgm_labels(struct textbuf *b, const struct metrics_input *in,
                        const struct gpu_labels *gl, const struct gpuctl_gpu *g)
{
	char device[32];
	snprintf(device, sizeof(device), "nvidia%s", gl->index);
	label(b, true, "gpu", gl->index);
	label(b, false, "UUID", gl->uuid);
	label(b, false, "pci_bus_id", gpuctl_gpu_str(g, GPUCTL_F_PCI_BUS_ID));
	label(b, false, "device", device);
	label(b, false, "modelName", gpuctl_gpu_str(g, GPUCTL_F_NAME));
	label(b, false, "Hostname", in->hostname);
	/* dcgm-exporter's default counters make the driver version a label of every series */
	label_known(b, "DCGM_FI_DRIVER_VERSION", gpuctl_snapshot_driver_version(in->snap));
	workload_dcgm_labels(b, gl->holder);
}

static void gpuctl_labels(struct textbuf *b, const struct gpu_labels *gl)
{
	label(b, true, "gpu", gl->index);
	label(b, false, "UUID", gl->uuid);
}

static void render_dcgm(struct textbuf *b, const struct metrics_input *in,
                        const struct gpu_labels *gl, size_t ngpu)
{
	for (size_t m = 0; m < metrics_dcgm_count; m++) {
		const struct dcgm_metric *dm = &metrics_dcgm[m];
		bool started = false;
		if (dm->field == METRIC_NOT_READ)
			continue;
		for (size_t i = 0; i < ngpu; i++) {
			const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(in->snap, i);
			int64_t v;
			if (!g || gpuctl_gpu_lost(g) ||
			    gpuctl_gpu_int(g, (enum gpuctl_field)dm->field, &v) < 0)
				continue;
			if (!started)
				family(b, dm->name, dm->type, dm->help);
			started = true;
			textbuf_printf(b, "%s{", dm->name);
			dcgm_labels(b, in, &gl[i], g);
			value_scaled(b, v, dm->scale);
		}
	}
}

static void render_gpus(struct textbuf *b, const struct metrics_input *in,
                        const struct gpu_labels *gl, size_t ngpu)
{
	if (ngpu == 0)
		return;
	family(b, "gpuctl_gpu_info", "gauge",
	       "Identity of each GPU (value 1): index, UUID, PCI bus id, model, pool.");
	for (size_t i = 0; i < ngpu; i++) {
		const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(in->snap, i);
		textbuf_puts(b, "gpuctl_gpu_info{");
		gpuctl_labels(b, &gl[i]);
		label(b, false, "pci_bus_id", gpuctl_gpu_str(g, GPUCTL_F_PCI_BUS_ID));
		label(b, false, "model", gpuctl_gpu_str(g, GPUCTL_F_NAME));
		label(b, false, "pool", in->pool_of ? in->pool_of[i] : "default");
		value_int(b, 1);
	}
	family(b, "gpuctl_gpu_lost", "gauge",
	       "1 when NVML reports the GPU lost (fallen off the bus); its other series are gone.");
	for (size_t i = 0; i < ngpu; i++) {
		textbuf_puts(b, "gpuctl_gpu_lost{");
		gpuctl_labels(b, &gl[i]);
		value_int(b, gpuctl_gpu_lost(gpuctl_snapshot_gpu(in->snap, i)) ? 1 : 0);
	}
}

/* Whether process k of g repeats an earlier one (same pid on the same device). */
static bool proc_seen(const struct gpuctl_gpu *g, size_t k)
{
	const struct gpuctl_proc *p = gpuctl_gpu_proc(g, k);
	uint32_t gi = UINT32_MAX, ci = UINT32_MAX;
	(void)gpuctl_proc_mig(p, &gi, &ci);
	for (size_t j = 0; j < k; j++) {
		const struct gpuctl_proc *q = gpuctl_gpu_proc(g, j);
		uint32_t gj = UINT32_MAX, cj = UINT32_MAX;
		(void)gpuctl_proc_mig(q, &gj, &cj);
		if (gpuctl_proc_pid(q) == gpuctl_proc_pid(p) && gi == gj && ci == cj)
			return true;
	}
	return false;
}

static bool same_str(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

/* Whether two workloads are one: the same kind and identity (a Slurm job, whatever its step; a
 * pod's container; a container; a unit or session of one user). Unknown and bare processes are
 * never one workload. */
static bool same_workload(const struct gpuctl_workload *a, const struct gpuctl_workload *b)
{
	if (a->kind != b->kind)
		return false;
	switch (a->kind) {
	case GPUCTL_WORKLOAD_SLURM:
		return a->slurm_job == b->slurm_job;
	case GPUCTL_WORKLOAD_POD:
		return same_str(a->pod_uid, b->pod_uid) && same_str(a->container, b->container) &&
		       same_str(a->name, b->name) && same_str(a->pod_namespace, b->pod_namespace);
	case GPUCTL_WORKLOAD_CONTAINER:
		return same_str(a->runtime, b->runtime) && same_str(a->id, b->id);
	case GPUCTL_WORKLOAD_UNIT:
	case GPUCTL_WORKLOAD_SESSION:
		return a->unit_uid == b->unit_uid && same_str(a->name, b->name);
	default:
		return false;
	}
}

/* The one workload every compute process of g belongs to, NULL when there are none, they
 * belong to several, or one is unknown or bare. */
static const struct gpuctl_workload *gpu_holder(const struct metrics_input *in,
                                                const struct gpuctl_gpu *g)
{
	const struct gpuctl_workload *h = NULL;

	if (!in->workload_of || gpuctl_gpu_lost(g))
		return NULL;
	for (size_t k = 0; k < gpuctl_gpu_proc_count(g); k++) {
		const struct gpuctl_workload *w = in->workload_of(
		        in->workload_userdata, gpuctl_proc_pid(gpuctl_gpu_proc(g, k)));
		if (!w || !same_workload(h ? h : w, w))
			return NULL;
		if (!h)
			h = w; /* the first process's: its label names the step of a Slurm job */
	}
	return h;
}

static void render_holders(struct textbuf *b, const struct gpu_labels *gl, size_t ngpu)
{
	bool started = false;

	for (size_t i = 0; i < ngpu; i++) {
		const struct gpuctl_workload *w = gl[i].holder;
		if (!w)
			continue;
		if (!started)
			family(b, "gpuctl_gpu_workload_info", "gauge",
			       "The one workload all compute processes of the GPU belong to (value "
			       "1): "
			       "its kind, its short form, and dcgm-exporter's pod, namespace, "
			       "container or hpc_job labels.");
		started = true;
		textbuf_puts(b, "gpuctl_gpu_workload_info{");
		gpuctl_labels(b, &gl[i]);
		label(b, false, "kind", gpuctl_workload_kind_name(w->kind));
		label(b, false, "workload", w->label);
		workload_dcgm_labels(b, w);
		value_int(b, 1);
	}
}

/* The labels of process p on GPU gl, without braces. */
static void proc_labels(struct textbuf *b, const struct metrics_input *in,
                        const struct gpu_labels *gl, const struct gpuctl_proc *p)
{
	uint32_t gi, ci;
	char pid[16], sgi[16] = "", sci[16] = "";
	const struct gpuctl_workload *w =
	        in->workload_of ? in->workload_of(in->workload_userdata, gpuctl_proc_pid(p)) : NULL;

	if (gpuctl_proc_mig(p, &gi, &ci) >= 0) {
		snprintf(sgi, sizeof(sgi), "%" PRIu32, gi);
		snprintf(sci, sizeof(sci), "%" PRIu32, ci);
	}
	snprintf(pid, sizeof(pid), "%" PRIu32, gpuctl_proc_pid(p));
	gpuctl_labels(b, gl);
	label(b, false, "pid", pid);
	label(b, false, "user", gpuctl_proc_user(p));
	label(b, false, "command", gpuctl_proc_command(p));
	label(b, false, "gpu_instance", sgi);
	label(b, false, "compute_instance", sci);
	if (!in->workload_of)
		return;
	label(b, false, "workload_kind",
	      gpuctl_workload_kind_name(w ? w->kind : GPUCTL_WORKLOAD_UNKNOWN));
	label(b, false, "workload", w ? w->label : "?");
	workload_dcgm_labels(b, w);
}

/* The per-process families: one series per process of a GPU (a process on two MIG devices of
 * it counts twice), the first max_processes in GPU then driver order; a family's rows for
 * processes it has no value for are skipped, but the cap counts processes, not rows. */
static const struct {
	const char *name, *help;
	int engine; /* enum gpuctl_proc_engine, or -1 for the memory */
} proc_families[] = {
        {"gpuctl_process_memory_used_bytes",
         "GPU memory used by a compute process (bytes); gpu_instance and compute_instance name "
         "its MIG device, if any; workload_kind and workload its workload (docs/workloads.md).",
         -1},
        {"gpuctl_process_sm_utilization_ratio",
         "A compute process's share of the GPU's SM time in the driver's latest sample (0 to 1).",
         GPUCTL_PROC_SM},
};

/* Renders the per-process families; returns how many processes the cap left out. */
static size_t render_proc_series(struct textbuf *b, const struct metrics_input *in,
                                 const struct gpu_labels *gl, size_t ngpu)
{
	size_t seen = 0;

	for (size_t f = 0; f < sizeof(proc_families) / sizeof(proc_families[0]); f++) {
		bool started = false;
		seen = 0;
		for (size_t i = 0; i < ngpu; i++) {
			const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(in->snap, i);
			if (gpuctl_gpu_lost(g))
				continue;
			for (size_t k = 0; k < gpuctl_gpu_proc_count(g); k++) {
				const struct gpuctl_proc *p = gpuctl_gpu_proc(g, k);
				int64_t v;
				int pct;
				if (proc_seen(g, k) || seen++ >= in->max_processes)
					continue;
				if (proc_families[f].engine < 0
				            ? gpuctl_proc_used_memory(p, &v) < 0
				            : gpuctl_proc_util(
				                      p,
				                      (enum gpuctl_proc_engine)proc_families[f]
				                              .engine,
				                      &pct) < 0)
					continue;
				if (!started)
					family(b, proc_families[f].name, "gauge",
					       proc_families[f].help);
				started = true;
				textbuf_printf(b, "%s{", proc_families[f].name);
				proc_labels(b, in, &gl[i], p);
				if (proc_families[f].engine < 0)
					value_int(b, v);
				else
					textbuf_printf(b, "} %d.%02d\n", pct / 100, pct % 100);
			}
		}
	}
	return seen > in->max_processes ? seen - in->max_processes : 0;
}

/* gpuctl_gpu_processes and the per-process families; returns how many processes the cap left
 * out. */
static size_t render_procs(struct textbuf *b, const struct metrics_input *in,
                           const struct gpu_labels *gl, size_t ngpu)
{
	bool any = false;
	bool started = false;

	for (size_t i = 0; i < ngpu; i++) {
		const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(in->snap, i);
		if (gpuctl_gpu_lost(g))
			continue;
		if (!started)
			family(b, "gpuctl_gpu_processes", "gauge",
			       "Compute processes running on the GPU (MIG devices included).");
		started = true;
		textbuf_puts(b, "gpuctl_gpu_processes{");
		gpuctl_labels(b, &gl[i]);
		value_int(b, (int64_t)gpuctl_gpu_proc_count(g));
		any |= gpuctl_gpu_proc_count(g) > 0;
	}
	return any ? render_proc_series(b, in, gl, ngpu) : 0;
}

static void mig_labels(struct textbuf *b, const struct gpu_labels *gl, size_t k)
{
	char mig[24];
	snprintf(mig, sizeof(mig), "%zu", k);
	gpuctl_labels(b, gl);
	label(b, false, "mig", mig);
}

static void render_mig(struct textbuf *b, const struct metrics_input *in,
                       const struct gpu_labels *gl, size_t ngpu)
{
	static const struct {
		const char *name, *help;
		enum gpuctl_mig_field f;
	} mem[] = {
	        {"gpuctl_mig_memory_total_bytes", "Memory of the MIG device (bytes).",
	         GPUCTL_MIG_MEMORY_TOTAL},
	        {"gpuctl_mig_memory_used_bytes", "Memory used on the MIG device (bytes).",
	         GPUCTL_MIG_MEMORY_USED},
	};
	size_t total = 0;
	for (size_t i = 0; i < ngpu; i++)
		total += gpuctl_gpu_mig_count(gpuctl_snapshot_gpu(in->snap, i));
	if (total == 0)
		return;
	family(b, "gpuctl_mig_device_info", "gauge",
	       "Each MIG device (value 1): its index on the GPU (mig), UUID, profile, GPU and "
	       "compute instance ids.");
	for (size_t i = 0; i < ngpu; i++) {
		const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(in->snap, i);
		for (size_t k = 0; k < gpuctl_gpu_mig_count(g); k++) {
			const struct gpuctl_mig *m = gpuctl_gpu_mig(g, k);
			int64_t gi = -1, ci = -1;
			char sgi[24] = "", sci[24] = "";
			if (gpuctl_mig_int(m, GPUCTL_MIG_GI, &gi) >= 0)
				snprintf(sgi, sizeof(sgi), "%" PRId64, gi);
			if (gpuctl_mig_int(m, GPUCTL_MIG_CI, &ci) >= 0)
				snprintf(sci, sizeof(sci), "%" PRId64, ci);
			textbuf_puts(b, "gpuctl_mig_device_info{");
			mig_labels(b, &gl[i], k);
			label(b, false, "mig_uuid", gpuctl_mig_uuid(m));
			label(b, false, "profile", gpuctl_mig_profile(m));
			label(b, false, "gpu_instance", sgi);
			label(b, false, "compute_instance", sci);
			value_int(b, 1);
		}
	}
	for (size_t f = 0; f < sizeof(mem) / sizeof(mem[0]); f++) {
		bool started = false;
		for (size_t i = 0; i < ngpu; i++) {
			const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(in->snap, i);
			for (size_t k = 0; k < gpuctl_gpu_mig_count(g); k++) {
				int64_t v;
				if (gpuctl_mig_int(gpuctl_gpu_mig(g, k), mem[f].f, &v) < 0)
					continue;
				if (!started)
					family(b, mem[f].name, "gauge", mem[f].help);
				started = true;
				textbuf_printf(b, "%s{", mem[f].name);
				mig_labels(b, &gl[i], k);
				value_int(b, v);
			}
		}
	}
}

static const char *const lease_states[] = {
        [GPUCTL_LEASE_FREE] = "free",         [GPUCTL_LEASE_HELD] = "held",
        [GPUCTL_LEASE_UNUSABLE] = "unusable", [GPUCTL_LEASE_UNINITIALISED] = "uninitialised",
        [GPUCTL_LEASE_SHARED] = "shared",
};
#define N_LEASE_STATES (sizeof(lease_states) / sizeof(lease_states[0]))

/* gpu, UUID and mig ("" for the whole GPU) of a lease entry (gpu checked by the caller). */
static void lease_labels(struct textbuf *b, const struct gpu_labels *gl, size_t gpu, int mig)
{
	char smig[24] = "";
	if (mig >= 0)
		snprintf(smig, sizeof(smig), "%d", mig);
	gpuctl_labels(b, &gl[gpu]);
	label(b, false, "mig", smig);
}

static void render_leases(struct textbuf *b, const struct metrics_input *in,
                          const struct gpu_labels *gl, size_t ngpu)
{
	size_t n = gpuctl_lease_list_count(in->leases);
	bool holders = false;

	if (n == 0)
		return;
	family(b, "gpuctl_lease_state", "gauge",
	       "Lease state of each device (docs/leases.md): 1 for its current state, 0 for the "
	       "others; mig is empty for a whole GPU.");
	for (size_t i = 0; i < n; i++) {
		size_t gpu;
		int mig;
		enum gpuctl_lease_state st;
		const struct gpuctl_lease_owner *owner;
		const char *reason;
		if (gpuctl_lease_list_get(in->leases, i, &gpu, &mig, &st, &owner, &reason) < 0)
			continue;
		if (gpu >= ngpu)
			continue;
		holders |= st == GPUCTL_LEASE_HELD || st == GPUCTL_LEASE_SHARED;
		for (size_t s = 0; s < N_LEASE_STATES; s++) {
			textbuf_puts(b, "gpuctl_lease_state{");
			lease_labels(b, gl, gpu, mig);
			label(b, false, "state", lease_states[s]);
			value_int(b, (size_t)st == s ? 1 : 0);
		}
	}
	if (!holders)
		return;
	family(b, "gpuctl_lease_holder_info", "gauge",
	       "Each holder of a lease (value 1): user, holder pid and --label; a device held "
	       "with an untrusted owner record has none.");
	for (size_t i = 0; i < n; i++) {
		size_t gpu, nsh = 0;
		int mig;
		enum gpuctl_lease_state st;
		const struct gpuctl_lease_owner *owner;
		const struct gpuctl_lease_owner *const *sh = NULL;
		const char *reason;
		if (gpuctl_lease_list_get(in->leases, i, &gpu, &mig, &st, &owner, &reason) < 0 ||
		    gpu >= ngpu)
			continue;
		if (st == GPUCTL_LEASE_SHARED &&
		    gpuctl_lease_list_shares(in->leases, i, NULL, &sh, &nsh) < 0)
			nsh = 0;
		for (size_t k = 0; k < (nsh ? nsh : 1); k++) {
			const struct gpuctl_lease_owner *w = nsh ? sh[k] : owner;
			char pid[16], uid[16];
			if (!w || (st != GPUCTL_LEASE_HELD && st != GPUCTL_LEASE_SHARED))
				continue;
			snprintf(pid, sizeof(pid), "%" PRIu32, w->pid);
			snprintf(uid, sizeof(uid), "%" PRIu32, w->uid);
			textbuf_puts(b, "gpuctl_lease_holder_info{");
			lease_labels(b, gl, gpu, mig);
			label(b, false, "user", w->user ? w->user : uid);
			label(b, false, "pid", pid);
			label(b, false, "label", w->label);
			label(b, false, "shared", st == GPUCTL_LEASE_SHARED ? "1" : "0");
			value_int(b, 1);
		}
	}
}

static void render_exporter(struct textbuf *b, const struct metrics_input *in, size_t dropped)
{
	const struct metrics_stats *s = in->stats;

	family(b, "gpuctl_exporter_build_info", "gauge", "gpuctl's version (value 1).");
	textbuf_puts(b, "gpuctl_exporter_build_info{");
	label(b, true, "version", GPUCTL_VERSION_STRING);
	value_int(b, 1);
	if (in->snap && gpuctl_snapshot_driver_version(in->snap)) {
		family(b, "gpuctl_driver_info", "gauge",
		       "The NVIDIA driver and NVML versions (value 1).");
		textbuf_puts(b, "gpuctl_driver_info{");
		label(b, true, "driver_version", gpuctl_snapshot_driver_version(in->snap));
		label(b, false, "nvml_version", gpuctl_snapshot_nvml_version(in->snap));
		value_int(b, 1);
	}
	family(b, "gpuctl_exporter_samples_total", "counter",
	       "Samples the exporter took (one per --interval), failed ones included.");
	textbuf_printf(b, "gpuctl_exporter_samples_total %" PRIu64 "\n", s->samples);
	family(b, "gpuctl_exporter_nvml_errors_total", "counter",
	       "Samples that failed because NVML did (no GPU metrics were served then).");
	textbuf_printf(b, "gpuctl_exporter_nvml_errors_total %" PRIu64 "\n", s->nvml_errors);
	family(b, "gpuctl_exporter_lease_errors_total", "counter",
	       "Samples whose lease directory could not be read (no lease metrics then).");
	textbuf_printf(b, "gpuctl_exporter_lease_errors_total %" PRIu64 "\n", s->lease_errors);
	family(b, "gpuctl_exporter_last_lease_success", "gauge",
	       "1 when the latest sample read the lease states (or there is no lease directory); "
	       "0 when it could not (a select.lock held too long, an unsafe directory): the "
	       "lease metrics are missing then.");
	textbuf_printf(b, "gpuctl_exporter_last_lease_success %d\n", s->lease_ok ? 1 : 0);
	family(b, "gpuctl_exporter_last_sample_success", "gauge",
	       "1 when the latest sample read NVML successfully, else 0.");
	textbuf_printf(b, "gpuctl_exporter_last_sample_success %d\n", s->last_ok ? 1 : 0);
	family(b, "gpuctl_exporter_sample_overdue_seconds", "gauge",
	       "0 while samples come in time; once none has come for more than two intervals "
	       "(NVML not answering), the seconds since the latest one, whose GPU metrics are "
	       "then not served.");
	textbuf_printf(b, "gpuctl_exporter_sample_overdue_seconds %.3f\n", s->overdue_s);
	family(b, "gpuctl_exporter_sample_duration_seconds", "gauge",
	       "How long the latest sample took to read NVML and the lease states (seconds).");
	textbuf_printf(b, "gpuctl_exporter_sample_duration_seconds %.6f\n", s->last_duration_s);
	family(b, "gpuctl_exporter_last_sample_timestamp_seconds", "gauge",
	       "When the latest sample was taken (seconds since the epoch).");
	textbuf_printf(b, "gpuctl_exporter_last_sample_timestamp_seconds %.3f\n", s->last_time_s);
	family(b, "gpuctl_exporter_processes_dropped", "gauge",
	       "Compute processes of the latest sample left without per-process series by "
	       "--max-processes.");
	textbuf_printf(b, "gpuctl_exporter_processes_dropped %zu\n", dropped);
}

/* Health (docs/health.md): each GPU's verdict, its non-OK findings by check, the XIDs seen
 * since the exporter started by code and class, and DCGM's last XID per GPU. */
/* dcgm-exporter's err_code and err_msg labels of DCGM_FI_DEV_XID_ERRORS (its collector's
 * toMetric): the code in decimal and its meaning, here from gpuctl's XID catalog
 * (docs/metrics.md, "XIDs"). */
static void xid_labels(struct textbuf *b, unsigned code)
{
	struct gpuctl_xid_info xi = GPUCTL_XID_INFO_INIT;
	char s[16];

	(void)gpuctl_xid_lookup(code, &xi);
	snprintf(s, sizeof(s), "%u", code);
	label(b, false, "err_code", s);
	label(b, false, "err_msg", xi.meaning ? xi.meaning : "");
}

static void render_health(struct textbuf *b, const struct metrics_input *in,
                          const struct gpu_labels *gl, size_t ngpu)
{
	if (in->health) {
		family(b, "gpuctl_gpu_health", "gauge",
		       "Health verdict of the GPU as gpuctl health gives it: 0 OK, 1 WARN, 2 "
		       "FAIL.");
		for (size_t i = 0; i < ngpu; i++) {
			textbuf_puts(b, "gpuctl_gpu_health{");
			gpuctl_labels(b, &gl[i]);
			value_int(b, gpuctl_health_verdict(in->health, i));
		}
		bool started = false;
		for (size_t k = 0; k < gpuctl_health_finding_count(in->health); k++) {
			const struct gpuctl_health_finding *f =
			        gpuctl_health_finding(in->health, k);
			if (f->severity == GPUCTL_HEALTH_OK || f->gpu >= ngpu ||
			    strcmp(f->check, "xid") == 0)
				continue; /* XIDs: gpuctl_gpu_xid_total below */
			if (!started)
				family(b, "gpuctl_gpu_health_check", "gauge",
				       "A check that is not OK on the GPU (docs/health.md): 1 "
				       "WARN, 2 "
				       "FAIL.");
			started = true;
			textbuf_puts(b, "gpuctl_gpu_health_check{");
			gpuctl_labels(b, &gl[f->gpu]);
			label(b, false, "check", f->check);
			value_int(b, f->severity);
		}
	}
	bool started = false;
	for (size_t k = 0; k < in->n_xids; k++) {
		const struct metrics_xid *x = &in->xids[k];
		struct gpuctl_xid_info xi = GPUCTL_XID_INFO_INIT;
		char code[16];
		if (x->gpu >= ngpu)
			continue;
		(void)gpuctl_xid_lookup(x->code, &xi);
		snprintf(code, sizeof(code), "%u", x->code);
		if (!started)
			family(b, "gpuctl_gpu_xid_total", "counter",
			       "XIDs seen on the GPU since the exporter started, by code and "
			       "class.");
		started = true;
		textbuf_puts(b, "gpuctl_gpu_xid_total{");
		gpuctl_labels(b, &gl[x->gpu]);
		label(b, false, "xid", code);
		label(b, false, "class", gpuctl_xid_class_name(xi.class_));
		value_int(b, (int64_t)x->count);
	}
	/* dcgm-exporter: the value of the last XID of each GPU that had one */
	started = false;
	for (size_t i = 0; i < ngpu; i++) {
		const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(in->snap, i);
		const struct metrics_xid *last = NULL;
		for (size_t k = 0; k < in->n_xids; k++)
			if (in->xids[k].gpu == i && (!last || in->xids[k].seq > last->seq))
				last = &in->xids[k];
		if (!last || !g || gpuctl_gpu_lost(g))
			continue;
		if (!started)
			family(b, "DCGM_FI_DEV_XID_ERRORS", "gauge",
			       "Value of the last XID error encountered.");
		started = true;
		textbuf_puts(b, "DCGM_FI_DEV_XID_ERRORS{");
		dcgm_labels(b, in, &gl[i], g);
		xid_labels(b, last->code);
		value_int(b, last->code);
	}
}

/* gpuctl_gpu_idle_seconds: one series per GPU and idle case while it holds (docs/metrics.md). */
static void render_idle(struct textbuf *b, const struct metrics_input *in,
                        const struct gpu_labels *gl, size_t ngpu)
{
	bool started = false;

	for (size_t i = 0; in->idle_s && i < ngpu; i++)
		for (int c = 0; c < GPUCTL_IDLE_CASES; c++) {
			double v = in->idle_s[i * GPUCTL_IDLE_CASES + (size_t)c];
			if (v < 0)
				continue;
			if (!started)
				family(b, "gpuctl_gpu_idle_seconds", "gauge",
				       "Seconds an idle case has held on the GPU, by the "
				       "exporter's "
				       "samples (docs/idle.md): lease (a lease with no process), "
				       "process (a process holding memory below the threshold a "
				       "whole "
				       "window), ghost (memory used with no live process).");
			started = true;
			textbuf_puts(b, "gpuctl_gpu_idle_seconds{");
			gpuctl_labels(b, &gl[i]);
			label(b, false, "case", gpuctl_idle_case_name((enum gpuctl_idle_case)c));
			textbuf_printf(b, "} %.3f\n", v);
		}
}

/* The usage counters (docs/metrics.md, "Usage counters"): what the ledger integrates, per GPU.
 * A lost GPU has none; energy only where the GPU has a counter. */
static void render_usage(struct textbuf *b, const struct metrics_input *in,
                         const struct gpu_labels *gl, size_t ngpu)
{
	static const struct {
		const char *name, *help;
	} fam[] = {
	        {"gpuctl_gpu_held_seconds_total",
	         "Seconds the GPU was held by a lease or by a workload without one, each sample's "
	         "state holding until the next (the ledger's GPU-seconds)."},
	        {"gpuctl_gpu_busy_held_seconds_total",
	         "Of gpuctl_gpu_held_seconds_total, the seconds the GPU's utilisation was above "
	         "the "
	         "ledger's busy threshold (10 %)."},
	        {"gpuctl_gpu_held_energy_joules_total",
	         "Joules the GPU's energy counter rose while the GPU was held (the ledger's "
	         "energy)."},
	};

	for (size_t f = 0; in->usage && f < sizeof(fam) / sizeof(fam[0]); f++) {
		bool started = false;
		for (size_t i = 0; i < ngpu; i++) {
			const struct usage_totals *t = in->usage[i];
			if (!t || gpuctl_gpu_lost(gpuctl_snapshot_gpu(in->snap, i)) ||
			    (f == 2 && !t->energy_known))
				continue;
			if (!started)
				family(b, fam[f].name, "counter", fam[f].help);
			started = true;
			textbuf_printf(b, "%s{", fam[f].name);
			gpuctl_labels(b, &gl[i]);
			textbuf_printf(b, "} %.3f\n",
			               f == 0   ? t->held_s
			               : f == 1 ? t->busy_s
			                        : t->energy_j);
		}
	}
}

/* The agent's violations (docs/agent.md, "Violations"): every kind, 0 included. */
static void render_violations(struct textbuf *b, const struct metrics_input *in)
{
	static const char *const kinds[] = {"foreign", "overuse", "outside"};

	if (!in->violations)
		return;
	family(b, "gpuctl_violations_total", "counter",
	       "Violations of the leases the agent's watch found since it started (enforce "
	       "other than off), by kind.");
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
		textbuf_puts(b, "gpuctl_violations_total{");
		label(b, true, "kind", kinds[k]);
		textbuf_printf(b, "} %" PRIu64 "\n", in->violations[k]);
	}
}

int metrics_render(const struct metrics_input *in, struct textbuf *out)
{
	size_t ngpu = in->snap ? gpuctl_snapshot_gpu_count(in->snap) : 0;
	struct gpu_labels *gl = calloc(ngpu ? ngpu : 1, sizeof(*gl));
	size_t dropped = 0;

	if (!gl) {
		out->failed = true;
		return -ENOMEM;
	}
	for (size_t i = 0; i < ngpu; i++) {
		const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(in->snap, i);
		const char *uuid = gpuctl_gpu_str(g, GPUCTL_F_UUID);
		snprintf(gl[i].index, sizeof(gl[i].index), "%zu", gpuctl_gpu_index(g));
		gl[i].uuid = uuid ? uuid : "";
		gl[i].holder = gpu_holder(in, g);
	}
	if (ngpu) {
		render_dcgm(out, in, gl, ngpu);
		render_gpus(out, in, gl, ngpu);
		render_holders(out, gl, ngpu);
		dropped = render_procs(out, in, gl, ngpu);
		render_mig(out, in, gl, ngpu);
		if (in->leases)
			render_leases(out, in, gl, ngpu);
		render_health(out, in, gl, ngpu);
		render_idle(out, in, gl, ngpu);
		render_usage(out, in, gl, ngpu);
	}
	render_violations(out, in);
	render_exporter(out, in, dropped);
	free(gl);
	return out->failed ? -ENOMEM : 0;
}
