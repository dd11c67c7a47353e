// SPDX-License-Identifier: MIT
/*
 * health.c: the health engine: a snapshot (plus recorded XIDs and, for rates, an earlier
 * snapshot) in, findings and a verdict per GPU out. Pure: no NVML, no I/O, no clock.
 *
 * Decisions (the rules themselves, their thresholds and sources are in docs/health.md):
 * - One function per check; each looks only at the facts it needs and returns without a
 *   finding when a fact is unavailable (NOT_SUPPORTED, not read, GPU lost), so a part that
 *   lacks a signal (GeForce: no ECC; Volta: no row remapping) never raises an alarm.
 * - Thresholds are DCGM's (DcgmHealthWatch.cpp, DcgmGPUHardwareLimits.h) except where a rule
 *   needs history DCGM keeps and a one-shot check does not: the "growing DBE pages" rule and
 *   the PCIe replay rate compare with opts->prev when given (docs/health.md says how).
 * - A lost GPU gets one FAIL ("lost") and its XIDs; its other facts are unavailable anyway.
 * - XIDs are aggregated per (GPU, code): one finding saying how often, with the last text.
 * - NVLink "should be up": a GPU's active links are compared with the most any GPU of the same
 *   model on this machine has (MIG-enabled models skipped, as DCGM ignores down links under
 *   MIG); see check_nvlink for the exact rule.
 * - Findings are sorted by GPU, then worst first, then check order, so output is stable.
 * - Messages and actions name concepts, never a program's options ("a health watch", "the
 *   strict health mode"): Python and C callers read them too; gpuctl re-spells them as its
 *   options where it prints them (src/cli/format.c, format_health_words).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"
#include "snapshot-internal.h"
#include "util.h"

/* DCGM's limits (common/DcgmGPUHardwareLimits.h) and ours. */
#define RETIRED_PAGES_FAIL    63    /* SBE + DBE retired pages: FAIL at or above */
#define RETIRED_DBE_GROWING   15    /* DBE retired pages above this and growing: FAIL */
#define REMAP_UNCORRECTABLE   512   /* uncorrectable remapped rows: WARN at or above */
#define TEMP_MARGIN_C         5     /* WARN within this many degrees of the slowdown threshold */
#define NVLINK_CRC_FAIL_PER_S 100.0 /* DCGM: NVLink CRC errors a second that FAIL */
#define REPLAY_MIN_WINDOW_S   60.0  /* DCGM's rate window; a shorter interval gets its budget */
#define CLOCKS_HW_SLOWDOWN    0x8ull
#define CLOCKS_HW_THERMAL     0x40ull
#define CLOCKS_HW_POWER_BRAKE 0x80ull

struct finding {
	struct gpuctl_health_finding pub; /* what callers see; strings point into the ones below */
	int order;                        /* check order, for sorting */
	char *message;                    /* owned */
	const char *action;               /* static */
};

struct gpuctl_health_report {
	struct finding *f; /* owned */
	size_t n;          /* findings */
	size_t cap;        /* allocated */
	int *verdicts;     /* per GPU */
	size_t n_gpus;     /* entries in verdicts */
	int oom;           /* -ENOMEM once an allocation failed */
};

/* Check ids and their order in the output. */
enum check {
	CHECK_LOST,
	CHECK_NVML,
	CHECK_RECOVERY,
	CHECK_PROBE,
	CHECK_XID,
	CHECK_ECC_DBE,
	CHECK_REMAP_FAILURE,
	CHECK_RETIRED_PAGES,
	CHECK_RETIRED_PENDING,
	CHECK_REMAP_PENDING,
	CHECK_REMAP_UNCORRECTABLE,
	CHECK_NVLINK,
	CHECK_NVLINK_ERRORS,
	CHECK_TEMPERATURE,
	CHECK_CLOCKS,
	CHECK_PCIE_WIDTH,
	CHECK_PCIE_REPLAY,
	CHECK_STATE,
};

static const char *const check_ids[] = {
        [CHECK_LOST] = "lost",
        [CHECK_NVML] = "nvml",
        [CHECK_RECOVERY] = "recovery-action",
        [CHECK_PROBE] = "cuda-probe",
        [CHECK_XID] = "xid",
        [CHECK_ECC_DBE] = "ecc-dbe",
        [CHECK_REMAP_FAILURE] = "remap-failure",
        [CHECK_RETIRED_PAGES] = "retired-pages",
        [CHECK_RETIRED_PENDING] = "retired-pending",
        [CHECK_REMAP_PENDING] = "remap-pending",
        [CHECK_REMAP_UNCORRECTABLE] = "remap-uncorrectable",
        [CHECK_NVLINK] = "nvlink-down",
        [CHECK_NVLINK_ERRORS] = "nvlink-errors",
        [CHECK_TEMPERATURE] = "temperature",
        [CHECK_CLOCKS] = "clocks-event",
        [CHECK_PCIE_WIDTH] = "pcie-width",
        [CHECK_PCIE_REPLAY] = "pcie-replay",
        [CHECK_STATE] = "state",
};

const char *gpuctl_health_severity_name(int severity)
{
	static const char *const names[] = {"OK", "WARN", "FAIL"};

	if (severity < 0 || (size_t)severity >= ELEMENTSOF(names))
		return NULL;
	return names[severity];
}

_printf_(6, 7) static void add(struct gpuctl_health_report *rep, size_t gpu, enum check c,
                               int severity, const char *action, const char *fmt, ...)
{
	char *msg = NULL;
	va_list ap;
	int n;

	if (rep->oom)
		return;
	va_start(ap, fmt);
	n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (n < 0) {
		rep->oom = -ENOMEM;
		return;
	}
	if (rep->n == rep->cap) {
		size_t cap = rep->cap ? 2 * rep->cap : 16;
		struct finding *f = realloc(rep->f, cap * sizeof(*f));
		if (!f) {
			free(msg);
			rep->oom = -ENOMEM;
			return;
		}
		rep->f = f;
		rep->cap = cap;
	}
	rep->f[rep->n++] = (struct finding){
	        .pub = {.check = check_ids[c], .gpu = gpu, .severity = severity},
	        .order = (int)c,
	        .message = msg,
	        .action = action,
	};
	if (severity > rep->verdicts[gpu])
		rep->verdicts[gpu] = severity;
}

/* The value of an int field, or false when unavailable. */
static bool get(const struct gpuctl_gpu *g, enum gpuctl_field f, int64_t *ret)
{
	return gpuctl_gpu_int(g, f, ret) == 0;
}

static const struct gpuctl_gpu *prev_gpu(const struct gpuctl_health_opts *opts,
                                         const struct gpuctl_gpu *g)
{
	const char *uuid = gpuctl_gpu_str(g, GPUCTL_F_UUID);

	if (!opts->prev || !uuid)
		return NULL;
	for (size_t i = 0; i < opts->prev->n_gpus; i++) {
		const char *u = gpuctl_gpu_str(&opts->prev->gpus[i], GPUCTL_F_UUID);
		if (u && streq(u, uuid))
			return &opts->prev->gpus[i];
	}
	return NULL;
}

/* ---- the checks ---- */

/* What the health facts' reading depends on besides gpuctl_health_fields(): which error
 * counters exist (snapshot-take.c reads the ECC mode with every GPUCTL_SNAP_HEALTH snapshot; the
 * architecture is read when the remapped-row entries do not say, nvml-health.c). */
static const enum gpuctl_field read_depends_on[] = {GPUCTL_F_ECC_MODE, GPUCTL_F_ARCHITECTURE};

/* Whether field f of g counts among its health facts. The architecture only where it chose
 * between retired pages and remapped rows (no fact of either came: on a GPU whose entries
 * answered it is not read for health, and a command that reads it for topology must judge the
 * same). The PCIe generation only sets the replay budget, which needs an earlier sample: without
 * one it is no check's fact (gpuctl list does not read it then). */
static bool counts(const struct gpuctl_gpu *g, enum gpuctl_field f,
                   const struct gpuctl_health_opts *opts)
{
	if (f == GPUCTL_F_ARCHITECTURE)
		return !(g->valid[GPUCTL_F_REMAP_CORRECTABLE] ||
		         g->valid[GPUCTL_F_REMAP_UNCORRECTABLE] ||
		         g->valid[GPUCTL_F_REMAP_PENDING] || g->valid[GPUCTL_F_REMAP_FAILURE] ||
		         g->valid[GPUCTL_F_RETIRED_SBE] || g->valid[GPUCTL_F_RETIRED_DBE] ||
		         g->valid[GPUCTL_F_RETIRED_PENDING]);
	if (f == GPUCTL_F_PCIE_GEN)
		return opts->prev_age_s > 0 && prev_gpu(opts, g);
	return true;
}

static void note_fact(const struct gpuctl_gpu *g, enum gpuctl_field f, unsigned *unreadable,
                      unsigned *readable, enum gpuctl_field *first)
{
	if (g->unreadable >> f & 1u) {
		if ((*unreadable)++ == 0)
			*first = f;
	} else if (g->valid[f]) {
		(*readable)++;
	}
}

static const char *why(const struct gpuctl_gpu *g, enum gpuctl_field f)
{
	return g->unreadable_why[f] ? g->unreadable_why[f] : "NVML error";
}

/* NVML failed with a real error on health facts of the GPU (the loader marked them
 * unreadable): the checks that need them could not be made, which is never OK. WARN: one fact
 * failing is more often a driver's quirk than a broken GPU (a broken one also shows XIDs, or is
 * lost); FAIL when NVML gave no health fact of the GPU at all (its handle included), as bad as
 * lost. Only health facts count, so the verdict is the same from every command (each reads
 * them), whatever else it reads. */
static void check_nvml(struct gpuctl_health_report *rep, const struct gpuctl_gpu *g,
                       const struct gpuctl_health_opts *opts)
{
	size_t nh = 0;
	const enum gpuctl_field *hf = gpuctl_health_fields(&nh);
	enum gpuctl_field first = GPUCTL_F_INDEX;
	unsigned unreadable = 0, readable = 0;

	for (size_t k = 0; k < nh; k++)
		if (counts(g, hf[k], opts))
			note_fact(g, hf[k], &unreadable, &readable, &first);
	for (size_t k = 0; k < ELEMENTSOF(read_depends_on); k++)
		if (counts(g, read_depends_on[k], opts))
			note_fact(g, read_depends_on[k], &unreadable, &readable, &first);
	const char *name = unreadable ? gpuctl_field_info(first)->key : "nvlink";
	const char *because = unreadable ? why(g, first) : g->nvlink_unreadable;
	if (g->nvlink_unreadable)
		unreadable++; /* the NVLink facts count as one, after the fields ("first") */
	if (unreadable == 0)
		return;
	if (readable == 0)
		add(rep, g->index, CHECK_NVML, GPUCTL_HEALTH_FAIL,
		    "drain the GPU; check nvidia-smi -q and the kernel log; reset the GPU or "
		    "reboot",
		    "NVML gave no health fact of this GPU (%s: %s)", name, because);
	else
		add(rep, g->index, CHECK_NVML, GPUCTL_HEALTH_WARN,
		    "check nvidia-smi -q and the kernel log; if the error stays, drain the GPU and "
		    "reset it",
		    "%u health fact%s unreadable, the checks on %s skipped (first: %s: %s)",
		    unreadable, unreadable == 1 ? "" : "s", unreadable == 1 ? "it" : "them", name,
		    because);
}

/* DCGM (DRIVER watch): reset, reboot, drain-and-reset FAIL; drain P2P WARN. Recover IMEX has
 * no DCGM rule: WARN (the GPU works; its fabric service needs attention). Bus reset (6) and
 * system reboot (7), added in NVML 615, are a reset and a reboot: FAIL. */
static void check_recovery(struct gpuctl_health_report *rep, const struct gpuctl_gpu *g)
{
	int64_t v;

	if (!get(g, GPUCTL_F_RECOVERY_ACTION, &v) || v == GPUCTL_RECOVERY_NONE)
		return;
	switch (v) {
	case GPUCTL_RECOVERY_GPU_RESET:
		add(rep, g->index, CHECK_RECOVERY, GPUCTL_HEALTH_FAIL,
		    "drain the GPU and reset it (nvidia-smi -r)",
		    "the driver asks for a GPU reset (recovery action 1)");
		break;
	case GPUCTL_RECOVERY_NODE_REBOOT:
		add(rep, g->index, CHECK_RECOVERY, GPUCTL_HEALTH_FAIL,
		    "drain the node and reboot it",
		    "the driver asks for a node reboot (recovery action 2)");
		break;
	case GPUCTL_RECOVERY_BUS_RESET:
		add(rep, g->index, CHECK_RECOVERY, GPUCTL_HEALTH_FAIL,
		    "drain the GPU and reset its PCIe bus (a secondary bus reset of its slot, e.g. "
		    "through the BMC or setpci), or reboot",
		    "the driver asks for a bus reset (recovery action 6)");
		break;
	case GPUCTL_RECOVERY_SYSTEM_REBOOT:
		add(rep, g->index, CHECK_RECOVERY, GPUCTL_HEALTH_FAIL,
		    "drain the node and reboot the whole system",
		    "the driver asks for a system reboot (recovery action 7)");
		break;
	case GPUCTL_RECOVERY_DRAIN_AND_RESET:
		add(rep, g->index, CHECK_RECOVERY, GPUCTL_HEALTH_FAIL,
		    "drain the GPU, then reset it once idle",
		    "the driver asks to drain the GPU and reset it (recovery action 4)");
		break;
	case GPUCTL_RECOVERY_DRAIN_P2P:
		add(rep, g->index, CHECK_RECOVERY, GPUCTL_HEALTH_WARN,
		    "let running peer-to-peer work finish; reset the GPU when idle",
		    "the driver asks to drain peer-to-peer traffic (recovery action 3)");
		break;
	case GPUCTL_RECOVERY_RECOVER_IMEX:
		add(rep, g->index, CHECK_RECOVERY, GPUCTL_HEALTH_WARN,
		    "restart the IMEX daemon (nvidia-imex) on this node",
		    "the driver asks to recover IMEX (recovery action 5)");
		break;
	default:
		add(rep, g->index, CHECK_RECOVERY, GPUCTL_HEALTH_WARN,
		    "read nvidia-smi -q and the driver's release notes",
		    "the driver asks for recovery action %" PRId64 ", unknown to gpuctl", v);
		break;
	}
}

/* The caller's probe entry i. Entries may be smaller than ours (built against an older header),
 * so the array is stepped by the first entry's struct_size, which probes_check() checked. */
static const void *probe_at(const struct gpuctl_health_opts *opts, size_t i)
{
	return (const char *)opts->probes + i * opts->probes[0].struct_size;
}

/* Every entry has the first one's struct_size, which covers status and keeps entries aligned
 * (a real struct's size is a multiple of its alignment). */
static int probes_check(struct gpuctl_ctx *ctx, const struct gpuctl_health_opts *opts)
{
	size_t stride;

	if (!opts->probes || !opts->n_probes)
		return 0;
	stride = opts->probes[0].struct_size;
	if (stride < STRUCT_SIZE_MIN(struct gpuctl_probe_result, status) ||
	    stride % _Alignof(struct gpuctl_probe_result) != 0)
		return ctx_error(ctx, -EINVAL, "probe results: bad struct_size %zu", stride);
	for (size_t i = 1; i < opts->n_probes; i++) {
		size_t size;

		memcpy(&size, probe_at(opts, i), sizeof(size));
		if (size != stride)
			return ctx_error(
			        ctx, -EINVAL,
			        "probe results: entry %zu has struct_size %zu, entry 0 %zu", i,
			        size, stride);
	}
	return 0;
}

static void check_probe(struct gpuctl_health_report *rep, const struct gpuctl_gpu *g,
                        const struct gpuctl_health_opts *opts)
{
	struct gpuctl_probe_result res = GPUCTL_PROBE_RESULT_INIT;
	const struct gpuctl_probe_result *p = &res;

	if (!opts->probes || g->index >= opts->n_probes)
		return;
	struct_read(&res, sizeof(res), probe_at(opts, g->index));
	if (p->status == GPUCTL_PROBE_OK)
		add(rep, g->index, CHECK_PROBE, GPUCTL_HEALTH_OK, "none",
		    "CUDA allocation probe passed in %.2f s%s%s", p->seconds, p->detail ? ": " : "",
		    p->detail ? p->detail : "");
	else if (p->status == GPUCTL_PROBE_FAILED)
		add(rep, g->index, CHECK_PROBE, GPUCTL_HEALTH_FAIL,
		    "drain the GPU; check the kernel log for XIDs; reset the GPU or reboot",
		    "CUDA allocation probe failed: %s", p->detail ? p->detail : "unknown error");
	else if (p->status == GPUCTL_PROBE_HUNG)
		add(rep, g->index, CHECK_PROBE, GPUCTL_HEALTH_FAIL,
		    "drain the GPU; check the kernel log for XIDs; reset the GPU or reboot",
		    "CUDA allocation probe hung: %s%sno answer within %.0f s (killed)",
		    p->detail ? p->detail : "", p->detail ? ": " : "", p->seconds);
	else if (p->status == GPUCTL_PROBE_NO_DEVICE)
		add(rep, g->index, CHECK_PROBE, GPUCTL_HEALTH_OK,
		    "none for health; create GPU and compute instances (nvidia-smi mig -cgi ... "
		    "-C) "
		    "to run CUDA work on it",
		    "MIG mode is on and the GPU has no MIG device: CUDA has nothing to use on it, "
		    "not probed");
}

static void check_memory(struct gpuctl_health_report *rep, const struct gpuctl_gpu *g,
                         const struct gpuctl_health_opts *opts)
{
	int pending = opts->strict ? GPUCTL_HEALTH_FAIL : GPUCTL_HEALTH_WARN;
	int64_t v, sbe, dbe;
	bool has_sbe, has_dbe;

	if (get(g, GPUCTL_F_ECC_VOL_UNCORRECTED, &v) && v > 0)
		add(rep, g->index, CHECK_ECC_DBE, GPUCTL_HEALTH_FAIL,
		    "drain the GPU, then reset it (nvidia-smi -r) or reboot",
		    "%" PRId64 " uncorrectable (double-bit) ECC error%s since the driver loaded", v,
		    v == 1 ? "" : "s");
	if (get(g, GPUCTL_F_REMAP_FAILURE, &v) && v)
		add(rep, g->index, CHECK_REMAP_FAILURE, GPUCTL_HEALTH_FAIL,
		    "drain the GPU and reset it now; run field diagnostics (RMA candidate)",
		    "a row remap failed: memory rows could not be replaced");

	has_sbe = get(g, GPUCTL_F_RETIRED_SBE, &sbe);
	has_dbe = get(g, GPUCTL_F_RETIRED_DBE, &dbe);
	if (!has_sbe)
		sbe = 0;
	if (!has_dbe)
		dbe = 0;
	if ((has_sbe || has_dbe) && sbe + dbe >= RETIRED_PAGES_FAIL) {
		add(rep, g->index, CHECK_RETIRED_PAGES, GPUCTL_HEALTH_FAIL,
		    "drain the GPU; run field diagnostics (RMA candidate)",
		    "%" PRId64 " retired pages (%" PRId64 " single-bit, %" PRId64
		    " double-bit): %d or more fail",
		    sbe + dbe, sbe, dbe, RETIRED_PAGES_FAIL);
	} else if (has_dbe && dbe > RETIRED_DBE_GROWING) {
		const struct gpuctl_gpu *p = prev_gpu(opts, g);
		int64_t before;

		if (p && get(p, GPUCTL_F_RETIRED_DBE, &before) && dbe > before)
			add(rep, g->index, CHECK_RETIRED_PAGES, GPUCTL_HEALTH_FAIL,
			    "drain the GPU; run field diagnostics (RMA candidate)",
			    "%" PRId64 " pages retired for double-bit errors (more than %d) and "
			    "growing (%" PRId64 " before)",
			    dbe, RETIRED_DBE_GROWING, before);
		else if (!p || !get(p, GPUCTL_F_RETIRED_DBE, &before))
			add(rep, g->index, CHECK_RETIRED_PAGES, GPUCTL_HEALTH_WARN,
			    "watch this GPU: it fails if more pages are retired (a health watch "
			    "keeps the history)",
			    "%" PRId64 " pages retired for double-bit errors (more than %d); "
			    "whether they grow is unknown without an earlier sample",
			    dbe, RETIRED_DBE_GROWING);
	}

	if (get(g, GPUCTL_F_RETIRED_PENDING, &v) && v)
		add(rep, g->index, CHECK_RETIRED_PENDING, pending,
		    "reset the GPU or reboot when it is idle (the strict health mode counts "
		    "this as FAIL)",
		    "a page retirement is pending: it takes effect at the next GPU reset or "
		    "reboot");
	if (get(g, GPUCTL_F_REMAP_PENDING, &v) && v)
		add(rep, g->index, CHECK_REMAP_PENDING, pending,
		    "reset the GPU when it is idle (the strict health mode counts this as FAIL)",
		    "a row remap is pending: it takes effect at the next GPU reset");
	if (get(g, GPUCTL_F_REMAP_UNCORRECTABLE, &v) && v >= REMAP_UNCORRECTABLE)
		add(rep, g->index, CHECK_REMAP_UNCORRECTABLE, GPUCTL_HEALTH_WARN,
		    "run field diagnostics; plan to replace the GPU",
		    "%" PRId64 " rows remapped for uncorrectable errors (the limit is %d)", v,
		    REMAP_UNCORRECTABLE);
}

static void check_thermal(struct gpuctl_health_report *rep, const struct gpuctl_gpu *g)
{
	int64_t t, slow, reasons;

	if (get(g, GPUCTL_F_TEMP, &t) && get(g, GPUCTL_F_TEMP_SLOWDOWN, &slow) && slow > 0 &&
	    t >= slow - TEMP_MARGIN_C)
		add(rep, g->index, CHECK_TEMPERATURE, GPUCTL_HEALTH_WARN,
		    "check the cooling: fans, airflow, inlet temperature",
		    "temperature %" PRId64 " C is %s the slowdown threshold %" PRId64 " C", t,
		    t >= slow ? "at or above" : "within 5 C of", slow);

	if (get(g, GPUCTL_F_CLOCKS_EVENT_REASONS, &reasons) &&
	    (reasons & (int64_t)(CLOCKS_HW_SLOWDOWN | CLOCKS_HW_THERMAL | CLOCKS_HW_POWER_BRAKE))) {
		char what[96] = "";

		if (reasons & (int64_t)CLOCKS_HW_SLOWDOWN)
			strscpy(what, sizeof(what), "HW slowdown");
		if (reasons & (int64_t)CLOCKS_HW_THERMAL)
			(void)snprintf(what + strlen(what), sizeof(what) - strlen(what), "%s%s",
			               what[0] ? ", " : "", "HW thermal slowdown");
		if (reasons & (int64_t)CLOCKS_HW_POWER_BRAKE)
			(void)snprintf(what + strlen(what), sizeof(what) - strlen(what), "%s%s",
			               what[0] ? ", " : "", "HW power brake");
		add(rep, g->index, CHECK_CLOCKS, GPUCTL_HEALTH_WARN,
		    "check cooling and power supply; clocks are cut while this lasts",
		    "clocks held down by %s (clocks-event reasons 0x%08" PRIX64 ")", what,
		    (uint64_t)reasons);
	}
}

/* DCGM's per-lane replay budget per minute by PCIe generation (BER 1e-12 x lane speed). */
static double replays_per_lane_minute(int64_t gen)
{
	static const double rate[] = {0, 0.15, 0.30, 0.48, 0.96, 1.92, 3.84};

	return gen >= 1 && gen < (int64_t)ELEMENTSOF(rate) ? rate[gen] : 0;
}

static void check_pcie(struct gpuctl_health_report *rep, const struct gpuctl_gpu *g,
                       const struct gpuctl_health_opts *opts)
{
	const struct gpuctl_gpu *p = prev_gpu(opts, g);
	int64_t w, wmax, gen, now, before;

	if (get(g, GPUCTL_F_PCIE_WIDTH, &w) && get(g, GPUCTL_F_PCIE_WIDTH_MAX, &wmax) && w > 0 &&
	    w < wmax)
		add(rep, g->index, CHECK_PCIE_WIDTH, GPUCTL_HEALTH_WARN,
		    "reseat the GPU or its riser; run the system's PCIe diagnostics",
		    "PCIe link runs x%" PRId64 " of its maximum x%" PRId64, w, wmax);

	if (p && opts->prev_age_s > 0 && get(g, GPUCTL_F_PCIE_REPLAY, &now) &&
	    get(p, GPUCTL_F_PCIE_REPLAY, &before) && now >= before &&
	    get(g, GPUCTL_F_PCIE_GEN, &gen) && get(g, GPUCTL_F_PCIE_WIDTH, &w) && w > 0 &&
	    replays_per_lane_minute(gen) > 0) {
		double window = opts->prev_age_s > REPLAY_MIN_WINDOW_S ? opts->prev_age_s
		                                                       : REPLAY_MIN_WINDOW_S;
		int64_t budget =
		        (int64_t)ceil(replays_per_lane_minute(gen) * (double)w * window / 60.0);

		if (now - before > budget)
			add(rep, g->index, CHECK_PCIE_REPLAY, GPUCTL_HEALTH_WARN,
			    "reseat the GPU or its riser; run the system's PCIe diagnostics",
			    "%" PRId64 " PCIe replays in %.0f s, above the budget of %" PRId64
			    " for Gen%" PRId64 " x%" PRId64,
			    now - before, opts->prev_age_s, budget, gen, w);
	}
}

static bool mig_on(const struct gpuctl_gpu *g)
{
	int64_t v;

	return get(g, GPUCTL_F_MIG_MODE, &v) && v;
}

static bool same_model(const struct gpuctl_gpu *a, const struct gpuctl_gpu *b)
{
	const char *na = gpuctl_gpu_str(a, GPUCTL_F_NAME), *nb = gpuctl_gpu_str(b, GPUCTL_F_NAME);

	return na && nb && streq(na, nb);
}

/*
 * A link is expected up when the other GPUs of the same model here have it: the GPU's active
 * link count is compared with the most any readable GPU of its model has. Fewer is WARN when
 * some link is up (a partial loss), or when none is but the model's GPUs reach NVSwitches (on a
 * switch fabric every GPU is wired); a GPU with no active link beside bridged peers may simply
 * have no bridge, so that is no finding. A model with a MIG-enabled GPU is skipped (NVML
 * reports its links down, and its peers' ends too).
 * WARN, not FAIL: the GPU still computes and its peers still reach it (over the links left,
 * or PCIe); what it lost is bandwidth, which the bandwidth model already rates from the links
 * that are up, so selection need not avoid it (alloc-plan.c) and a job that needs all GPUs runs.
 */
static void check_nvlink(struct gpuctl_health_report *rep, const struct gpuctl_snapshot *snap,
                         const struct gpuctl_gpu *g)
{
	int expected = 0;
	bool fabric = false;
	char links[160] = "";
	size_t len = 0;

	if (!g->has_nvlink_state || mig_on(g))
		return;
	for (size_t i = 0; i < snap->n_gpus; i++) {
		const struct gpuctl_gpu *o = &snap->gpus[i];

		if (!same_model(g, o))
			continue;
		if (mig_on(o))
			return;
		if (o->lost || !o->has_nvlink_state)
			continue;
		if (o->nvlink_active > expected)
			expected = o->nvlink_active;
		if (o->nvswitch_links > 0)
			fabric = true;
	}
	if (g->nvlink_active >= expected || (g->nvlink_active == 0 && !fabric))
		return;
	for (unsigned k = 0; k < 64 && len < sizeof(links); k++)
		if (g->nvlink_inactive >> k & 1u) {
			int n = snprintf(links + len, sizeof(links) - len, "%s%u", len ? ", " : "",
			                 k);
			if (n < 0)
				break;
			len += (size_t)n;
		}
	add(rep, g->index, CHECK_NVLINK, GPUCTL_HEALTH_WARN,
	    "check its NVLinks (nvidia-smi nvlink -s) and reset the GPU when it is free; contact "
	    "support if a link stays down",
	    "%d of %d NVLinks up (other GPUs of this model here have %d)%s%s", g->nvlink_active,
	    expected, expected, links[0] ? "; down: " : "", links);
}

/* How much a counter rose between two samples: 0 when either lacks it or it went back. */
static uint64_t rise(bool both, uint64_t now, uint64_t before)
{
	return both && now >= before ? now - before : 0;
}

/* NVLink error counters rising between two samples: WARN (the issue); CRC errors at 100 a second
 * or more: FAIL (DCGM). A counter that went back (driver reload, reset) is no rate. */
static void check_nvlink_errors(struct gpuctl_health_report *rep, const struct gpuctl_gpu *g,
                                const struct gpuctl_health_opts *opts)
{
	const struct gpuctl_gpu *p = prev_gpu(opts, g);
	uint64_t replay, recovery, crc;

	if (!p || opts->prev_age_s <= 0)
		return;
	/* each counter on its own: read in both samples, and not gone back (a reset) */
	replay = rise(g->has_nvlink_replay && p->has_nvlink_replay, g->nvlink_replay,
	              p->nvlink_replay);
	recovery = rise(g->has_nvlink_recovery && p->has_nvlink_recovery, g->nvlink_recovery,
	                p->nvlink_recovery);
	crc = rise(g->has_nvlink_crc && p->has_nvlink_crc, g->nvlink_crc, p->nvlink_crc);
	if (!replay && !recovery && !crc)
		return;
	bool fail = (double)crc / opts->prev_age_s >= NVLINK_CRC_FAIL_PER_S;
	add(rep, g->index, CHECK_NVLINK_ERRORS, fail ? GPUCTL_HEALTH_FAIL : GPUCTL_HEALTH_WARN,
	    fail ? "drain the GPU; check its NVLinks (nvidia-smi nvlink -e) and run field "
	           "diagnostics"
	         : "watch the links (nvidia-smi nvlink -e); if the counts keep rising, drain the "
	           "GPU and run field diagnostics",
	    "NVLink errors rose in %.0f s: %" PRIu64 " replays, %" PRIu64 " recoveries, %" PRIu64
	    " CRC errors",
	    opts->prev_age_s, replay, recovery, crc);
}

static int cmp_xid_entry(const void *a, const void *b)
{
	const unsigned *x = a, *y = b;

	return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : x[1] < y[1] ? -1 : x[1] > y[1];
}

static int xid_severity(int class_)
{
	return class_ == GPUCTL_XID_FENCE  ? GPUCTL_HEALTH_FAIL
	       : class_ == GPUCTL_XID_INFO ? GPUCTL_HEALTH_OK
	                                   : GPUCTL_HEALTH_WARN;
}

/* One finding per (GPU, XID code): how often, and the text of the occurrence that decides (the
 * worst, the latest of equals). */
static void check_xids(struct gpuctl_health_report *rep, const struct gpuctl_snapshot *snap,
                       const struct gpuctl_xid_log *xids)
{
	size_t n = gpuctl_xid_log_count(xids);
	_cleanup_free_ unsigned *keys = NULL; /* (gpu, xid, entry index) triples */

	if (n == 0)
		return;
	keys = calloc(n, 3 * sizeof(*keys));
	if (!keys) {
		rep->oom = -ENOMEM;
		return;
	}
	for (size_t i = 0; i < n; i++) {
		size_t gpu;
		unsigned xid;

		(void)gpuctl_xid_log_get(xids, i, &gpu, &xid, NULL);
		keys[3 * i] = gpu < snap->n_gpus ? (unsigned)gpu : UINT32_MAX;
		keys[3 * i + 1] = xid;
		keys[3 * i + 2] = (unsigned)i;
	}
	/* stable enough: ties keep the log order through the third key */
	qsort(keys, n, 3 * sizeof(*keys), cmp_xid_entry);
	for (size_t i = 0; i < n;) {
		size_t j = i;
		struct gpuctl_xid_info info = GPUCTL_XID_INFO_INIT;
		const char *text = NULL;
		int sev = -1;

		while (j < n && keys[3 * j] == keys[3 * i] && keys[3 * j + 1] == keys[3 * i + 1])
			j++;
		if (keys[3 * i] == UINT32_MAX) {
			i = j;
			continue;
		}
		/* the worst occurrence decides (NVLink5 XIDs differ by status), the latest of
		 * equals */
		for (size_t k = i; k < j; k++) {
			struct gpuctl_xid_info one = GPUCTL_XID_INFO_INIT;
			const char *t = NULL;
			int s;

			(void)gpuctl_xid_log_get(xids, keys[3 * k + 2], NULL, NULL, &t);
			(void)gpuctl_xid_lookup_event(keys[3 * i + 1], t, &one);
			s = xid_severity(one.class_);
			if (s >= sev) {
				sev = s;
				info = one;
				text = t;
			}
		}
		char times[32] = "";
		if (j - i > 1)
			(void)snprintf(times, sizeof(times), ", %zu times", j - i);
		add(rep, keys[3 * i], CHECK_XID, sev, info.action, "XID %u (%s, class %s)%s%s%s",
		    info.code, info.meaning, gpuctl_xid_class_name(info.class_), times,
		    !text || !text[0] ? ""
		    : j - i > 1       ? "; worst, latest: "
		                      : ": ",
		    text ? text : "");
		if (!rep->oom) {
			rep->f[rep->n - 1].pub.xid = info.code;
			rep->f[rep->n - 1].pub.xid_class = info.class_;
		}
		i = j;
	}
}

static int cmp_finding(const void *a, const void *b)
{
	const struct finding *x = a, *y = b;

	if (x->pub.gpu != y->pub.gpu)
		return x->pub.gpu < y->pub.gpu ? -1 : 1;
	if (x->pub.severity != y->pub.severity)
		return x->pub.severity > y->pub.severity ? -1 : 1;
	if (x->order != y->order)
		return x->order < y->order ? -1 : 1;
	return x->pub.xid < y->pub.xid ? -1 : x->pub.xid > y->pub.xid;
}

const enum gpuctl_field *gpuctl_health_fields(size_t *ret_n)
{
	/* every field the checks below read (keep in step with them), but the MIG mode and the
	 * PCIe generation: a GPUCTL_SNAP_HEALTH snapshot reads them for the checks
	 * (snapshot-take.c), the MIG mode without its call where the utilisation was read, the
	 * generation only when there is an earlier sample to rate the replays against (not with
	 * GPUCTL_SNAP_NO_RATE_COUNTERS) */
	static const enum gpuctl_field fields[] = {
	        GPUCTL_F_UUID,
	        GPUCTL_F_NAME,
	        GPUCTL_F_ECC_VOL_UNCORRECTED,
	        GPUCTL_F_RETIRED_SBE,
	        GPUCTL_F_RETIRED_DBE,
	        GPUCTL_F_RETIRED_PENDING,
	        GPUCTL_F_REMAP_UNCORRECTABLE,
	        GPUCTL_F_REMAP_PENDING,
	        GPUCTL_F_REMAP_FAILURE,
	        GPUCTL_F_RECOVERY_ACTION,
	        GPUCTL_F_TEMP,
	        GPUCTL_F_TEMP_SLOWDOWN,
	        GPUCTL_F_CLOCKS_EVENT_REASONS,
	        GPUCTL_F_PCIE_WIDTH,
	        GPUCTL_F_PCIE_WIDTH_MAX,
	        GPUCTL_F_PCIE_REPLAY,
	};

	if (ret_n)
		*ret_n = sizeof(fields) / sizeof(fields[0]);
	return fields;
}

/* The health state file could not be used: what it recorded (a fencing XID, say) is unknown,
 * which is never OK (docs/health.md, "State file"). */
static void check_state(struct gpuctl_health_report *rep, const struct gpuctl_gpu *g,
                        const struct gpuctl_health_opts *opts)
{
	if (opts->state_error)
		add(rep, g->index, CHECK_STATE, GPUCTL_HEALTH_WARN,
		    "read the GPU's XIDs in the kernel log (dmesg); remove or repair the file, or "
		    "let a health watch write it afresh",
		    "state unreadable: %s; the XIDs and counters a health watch recorded "
		    "there are not known",
		    opts->state_error);
}

int gpuctl_health_check(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                        const struct gpuctl_xid_log *xids, const struct gpuctl_health_opts *opts,
                        struct gpuctl_health_report **ret_report)
{
	struct gpuctl_health_opts o = GPUCTL_HEALTH_OPTS_INIT;
	struct gpuctl_health_report *rep;
	int r;

	if (!snap)
		return ctx_error(ctx, -EINVAL, "no snapshot to check");
	if (opts) {
		if (opts->struct_size < offsetof(struct gpuctl_health_opts, prev))
			return ctx_error(ctx, -EINVAL, "health options: struct_size %zu too small",
			                 opts->struct_size);
		memcpy(&o, opts, opts->struct_size < sizeof(o) ? opts->struct_size : sizeof(o));
		o.struct_size = sizeof(o);
	}
	r = probes_check(ctx, &o);
	if (r < 0)
		return r;
	rep = calloc(1, sizeof(*rep));
	if (!rep)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	rep->n_gpus = snap->n_gpus;
	rep->verdicts = calloc(snap->n_gpus ? snap->n_gpus : 1, sizeof(*rep->verdicts));
	if (!rep->verdicts) {
		gpuctl_health_report_free(rep);
		return ctx_error(ctx, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < snap->n_gpus; i++) {
		const struct gpuctl_gpu *g = &snap->gpus[i];

		if (g->lost) {
			add(rep, i, CHECK_LOST, GPUCTL_HEALTH_FAIL,
			    "reboot the node; check seating, power and cooling; contact support if "
			    "it recurs",
			    "the GPU is lost: NVML cannot reach it (fallen off the bus?)");
			continue;
		}
		check_nvml(rep, g, &o);
		check_recovery(rep, g);
		check_probe(rep, g, &o);
		check_memory(rep, g, &o);
		check_nvlink(rep, snap, g);
		check_nvlink_errors(rep, g, &o);
		check_thermal(rep, g);
		check_pcie(rep, g, &o);
		check_state(rep, g, &o);
	}
	check_xids(rep, snap, xids);
	if (rep->oom) {
		gpuctl_health_report_free(rep);
		return ctx_error(ctx, -ENOMEM, "out of memory");
	}
	if (rep->n > 1)
		qsort(rep->f, rep->n, sizeof(*rep->f), cmp_finding);
	for (size_t i = 0; i < rep->n; i++) {
		rep->f[i].pub.message = rep->f[i].message;
		rep->f[i].pub.action = rep->f[i].action;
	}
	*ret_report = rep;
	return 0;
}

void gpuctl_health_report_free(struct gpuctl_health_report *report)
{
	if (!report)
		return;
	for (size_t i = 0; i < report->n; i++)
		free(report->f[i].message);
	free(report->f);
	free(report->verdicts);
	free(report);
}

size_t gpuctl_health_finding_count(const struct gpuctl_health_report *report)
{
	return report ? report->n : 0;
}

const struct gpuctl_health_finding *gpuctl_health_finding(const struct gpuctl_health_report *report,
                                                          size_t i)
{
	return report && i < report->n ? &report->f[i].pub : NULL;
}

int gpuctl_health_verdict(const struct gpuctl_health_report *report, size_t gpu)
{
	if (!report || gpu >= report->n_gpus)
		return -EINVAL;
	return report->verdicts[gpu];
}
