// SPDX-License-Identifier: MIT
/*
 * test-health.c: the health engine (src/lib/health/health.c), the XID catalog
 * (src/lib/health/xid.c) and the kernel-log reader (src/lib/health/kmsg.c), on synthetic snapshots
 * built with snapshot-internal.h.
 *
 * Expected values come from the rules as the issue and DCGM state them (docs/health.md), never
 * from running the code: thresholds are tested at, just below and just above their boundaries,
 * every XID of the lists lands in its class, and a fact a part does not have (GeForce:
 * no ECC; Volta: no row remapping) raises nothing.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "gpuctl/gpuctl.h"
#include "snapshot-internal.h"
#include "test-fixtures.h"

#define A100 "NVIDIA A100-SXM4-80GB"

static const char *const bus_ids[] = {"00000000:07:00.0", "00000000:0F:00.0", "00000000:47:00.0",
                                      "00000000:4E:00.0"};

/* n GPUs (n <= 4) of one model, with identity and the facts of a healthy A100. */
static struct gpuctl_snapshot *healthy(size_t n)
{
	struct gpuctl_snapshot *s = snapshot_new_empty(n, GPUCTL_SNAP_HEALTH);

	assert_non_null(s);
	for (size_t i = 0; i < n; i++) {
		char uuid[64];

		(void)snprintf(uuid, sizeof(uuid), "GPU-%08zx-1111-2222-3333-444444444444", i);
		assert_int_equal(snapshot_set_str(s, i, GPUCTL_F_UUID, uuid), 0);
		assert_int_equal(snapshot_set_str(s, i, GPUCTL_F_NAME, A100), 0);
		assert_int_equal(snapshot_set_str(s, i, GPUCTL_F_PCI_BUS_ID, bus_ids[i]), 0);
		assert_int_equal(snapshot_set_int(s, i, GPUCTL_F_TEMP, 40), 0);
		assert_int_equal(snapshot_set_int(s, i, GPUCTL_F_TEMP_SLOWDOWN, 89), 0);
		assert_int_equal(snapshot_set_int(s, i, GPUCTL_F_CLOCKS_EVENT_REASONS, 0x1), 0);
		assert_int_equal(snapshot_set_int(s, i, GPUCTL_F_PCIE_GEN, 4), 0);
		assert_int_equal(snapshot_set_int(s, i, GPUCTL_F_PCIE_WIDTH, 16), 0);
		assert_int_equal(snapshot_set_int(s, i, GPUCTL_F_PCIE_WIDTH_MAX, 16), 0);
		assert_int_equal(snapshot_set_int(s, i, GPUCTL_F_PCIE_REPLAY, 0), 0);
		assert_int_equal(snapshot_set_int(s, i, GPUCTL_F_ECC_MODE, 1), 0);
		assert_int_equal(snapshot_set_int(s, i, GPUCTL_F_ECC_VOL_UNCORRECTED, 0), 0);
		assert_int_equal(snapshot_set_int(s, i, GPUCTL_F_REMAP_UNCORRECTABLE, 0), 0);
		assert_int_equal(snapshot_set_int(s, i, GPUCTL_F_REMAP_PENDING, 0), 0);
		assert_int_equal(snapshot_set_int(s, i, GPUCTL_F_REMAP_FAILURE, 0), 0);
		assert_int_equal(snapshot_set_int(s, i, GPUCTL_F_MIG_MODE, 0), 0);
	}
	return s;
}

struct run {
	struct gpuctl_ctx *ctx;
	struct gpuctl_health_report *rep;
};

static struct gpuctl_health_report *check_opts(struct gpuctl_snapshot *s,
                                               const struct gpuctl_xid_log *xids,
                                               const struct gpuctl_health_opts *opts)
{
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_health_report *rep = NULL;

	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	assert_int_equal(gpuctl_health_check(ctx, s, xids, opts, &rep), 0);
	gpuctl_ctx_free(ctx);
	return rep;
}

static struct gpuctl_health_report *check(struct gpuctl_snapshot *s)
{
	return check_opts(s, NULL, NULL);
}

/* The one finding of check id `id` on gpu, or NULL; fails if there are two. */
static const struct gpuctl_health_finding *find(const struct gpuctl_health_report *rep, size_t gpu,
                                                const char *id)
{
	const struct gpuctl_health_finding *hit = NULL;

	for (size_t i = 0; i < gpuctl_health_finding_count(rep); i++) {
		const struct gpuctl_health_finding *f = gpuctl_health_finding(rep, i);
		if (f->gpu == gpu && strcmp(f->check, id) == 0) {
			assert_null(hit);
			hit = f;
		}
	}
	return hit;
}

/* Sets one int field on GPU 0 of a fresh healthy snapshot and checks: the severity of finding
 * `id` (-1: no finding of any kind) and a substring of its message. */
static void one(enum gpuctl_field f, int64_t v, const char *id, int severity, const char *text)
{
	struct gpuctl_snapshot *s = healthy(2);
	struct gpuctl_health_report *rep;

	assert_int_equal(snapshot_set_int(s, 0, f, v), 0);
	rep = check(s);
	if (severity < 0) {
		assert_int_equal(gpuctl_health_finding_count(rep), 0);
		assert_int_equal(gpuctl_health_verdict(rep, 0), GPUCTL_HEALTH_OK);
	} else {
		const struct gpuctl_health_finding *x = find(rep, 0, id);
		assert_non_null(x);
		assert_int_equal(x->severity, severity);
		assert_int_equal(gpuctl_health_verdict(rep, 0), severity);
		assert_non_null(x->action);
		assert_true(strlen(x->action) > 0);
		if (text)
			assert_non_null(strstr(x->message, text));
		assert_int_equal(gpuctl_health_finding_count(rep), 1);
	}
	assert_int_equal(gpuctl_health_verdict(rep, 1), GPUCTL_HEALTH_OK);
	gpuctl_health_report_free(rep);
	gpuctl_snapshot_free(s);
}

static void test_healthy(void **state)
{
	struct gpuctl_snapshot *s = healthy(4);
	struct gpuctl_health_report *rep;

	(void)state;
	rep = check(s);
	assert_int_equal(gpuctl_health_finding_count(rep), 0);
	for (size_t i = 0; i < 4; i++)
		assert_int_equal(gpuctl_health_verdict(rep, i), GPUCTL_HEALTH_OK);
	assert_int_equal(gpuctl_health_verdict(rep, 4), -EINVAL);
	assert_null(gpuctl_health_finding(rep, 0));
	gpuctl_health_report_free(rep);
	gpuctl_health_report_free(NULL);
	gpuctl_snapshot_free(s);
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(gpuctl_health_severity_name(GPUCTL_HEALTH_OK), "OK");
	assert_string_equal(gpuctl_health_severity_name(GPUCTL_HEALTH_WARN), "WARN");
	assert_string_equal(gpuctl_health_severity_name(GPUCTL_HEALTH_FAIL), "FAIL");
	assert_null(gpuctl_health_severity_name(3));
	assert_null(gpuctl_health_severity_name(-1));
	assert_string_equal(gpuctl_xid_class_name(GPUCTL_XID_FENCE), "fence");
	assert_string_equal(gpuctl_xid_class_name(GPUCTL_XID_APPLICATION), "application");
	assert_string_equal(gpuctl_xid_class_name(GPUCTL_XID_UNKNOWN), "unknown");
	assert_string_equal(gpuctl_xid_class_name(GPUCTL_XID_INFO), "info");
	assert_string_equal(gpuctl_xid_class_name(GPUCTL_XID_CHECK), "check");
	assert_null(gpuctl_xid_class_name(5));
}

/* DCGM: volatile DBE > 0 -> FAIL. */
static void test_ecc_dbe(void **state)
{
	(void)state;
	one(GPUCTL_F_ECC_VOL_UNCORRECTED, 0, "ecc-dbe", -1, NULL);
	one(GPUCTL_F_ECC_VOL_UNCORRECTED, 1, "ecc-dbe", GPUCTL_HEALTH_FAIL, "1 uncorrectable");
	one(GPUCTL_F_ECC_VOL_UNCORRECTED, 7, "ecc-dbe", GPUCTL_HEALTH_FAIL, "7 uncorrectable");
	/* corrected errors are no finding */
	one(GPUCTL_F_ECC_VOL_CORRECTED, 1000, "ecc-dbe", -1, NULL);
}

/* DCGM: ROW_REMAP_FAILED > 0 -> FAIL; uncorrectable remaps >= 512 -> WARN; pending -> WARN. */
static void test_remap(void **state)
{
	(void)state;
	one(GPUCTL_F_REMAP_FAILURE, 1, "remap-failure", GPUCTL_HEALTH_FAIL, "remap failed");
	one(GPUCTL_F_REMAP_UNCORRECTABLE, 511, "remap-uncorrectable", -1, NULL);
	one(GPUCTL_F_REMAP_UNCORRECTABLE, 512, "remap-uncorrectable", GPUCTL_HEALTH_WARN, "512");
	one(GPUCTL_F_REMAP_UNCORRECTABLE, 513, "remap-uncorrectable", GPUCTL_HEALTH_WARN, "513");
	one(GPUCTL_F_REMAP_PENDING, 1, "remap-pending", GPUCTL_HEALTH_WARN, "next GPU reset");
	one(GPUCTL_F_RETIRED_PENDING, 1, "retired-pending", GPUCTL_HEALTH_WARN, "pending");
}

static void test_strict(void **state)
{
	struct gpuctl_health_opts opts = GPUCTL_HEALTH_OPTS_INIT;
	struct gpuctl_snapshot *s = healthy(2);
	struct gpuctl_health_report *rep;

	(void)state;
	opts.strict = true;
	assert_int_equal(snapshot_set_int(s, 0, GPUCTL_F_REMAP_PENDING, 1), 0);
	assert_int_equal(snapshot_set_int(s, 1, GPUCTL_F_RETIRED_PENDING, 1), 0);
	rep = check_opts(s, NULL, &opts);
	assert_int_equal(find(rep, 0, "remap-pending")->severity, GPUCTL_HEALTH_FAIL);
	assert_int_equal(find(rep, 1, "retired-pending")->severity, GPUCTL_HEALTH_FAIL);
	assert_int_equal(gpuctl_health_verdict(rep, 0), GPUCTL_HEALTH_FAIL);
	gpuctl_health_report_free(rep);
	gpuctl_snapshot_free(s);
}

/* A Volta-like GPU: retired pages instead of remapped rows (DCGM: >= 63 retired pages FAIL;
 * > 15 DBE pages and growing FAIL). */
static struct gpuctl_snapshot *volta(int64_t sbe, int64_t dbe)
{
	struct gpuctl_snapshot *s = healthy(1);

	s->gpus[0].valid[GPUCTL_F_REMAP_UNCORRECTABLE] = false;
	s->gpus[0].valid[GPUCTL_F_REMAP_PENDING] = false;
	s->gpus[0].valid[GPUCTL_F_REMAP_FAILURE] = false;
	assert_int_equal(snapshot_set_int(s, 0, GPUCTL_F_RETIRED_SBE, sbe), 0);
	assert_int_equal(snapshot_set_int(s, 0, GPUCTL_F_RETIRED_DBE, dbe), 0);
	assert_int_equal(snapshot_set_int(s, 0, GPUCTL_F_RETIRED_PENDING, 0), 0);
	return s;
}

static int retired_severity(int64_t sbe, int64_t dbe, int64_t prev_dbe)
{
	struct gpuctl_health_opts opts = GPUCTL_HEALTH_OPTS_INIT;
	struct gpuctl_snapshot *s = volta(sbe, dbe), *p = NULL;
	struct gpuctl_health_report *rep;
	const struct gpuctl_health_finding *f;
	int sev;

	if (prev_dbe >= 0) {
		p = volta(sbe, prev_dbe);
		opts.prev = p;
		opts.prev_age_s = 3600;
	}
	rep = check_opts(s, NULL, &opts);
	f = find(rep, 0, "retired-pages");
	sev = f ? f->severity : -1;
	assert_int_equal(gpuctl_health_finding_count(rep), f ? 1 : 0);
	gpuctl_health_report_free(rep);
	gpuctl_snapshot_free(s);
	gpuctl_snapshot_free(p);
	return sev;
}

static void test_retired_pages(void **state)
{
	(void)state;
	assert_int_equal(retired_severity(0, 0, -1), -1);
	assert_int_equal(retired_severity(62, 0, -1), -1);
	assert_int_equal(retired_severity(63, 0, -1), GPUCTL_HEALTH_FAIL);
	assert_int_equal(retired_severity(50, 13, -1), GPUCTL_HEALTH_FAIL);
	assert_int_equal(retired_severity(47, 15, -1), -1); /* 62 in all, 15 DBE: nothing */
	/* more than 15 DBE pages: growing FAIL, steady nothing, unknown growth WARN */
	assert_int_equal(retired_severity(0, 15, 10), -1);
	assert_int_equal(retired_severity(0, 16, 15), GPUCTL_HEALTH_FAIL);
	assert_int_equal(retired_severity(0, 16, 16), -1);
	assert_int_equal(retired_severity(0, 16, -1), GPUCTL_HEALTH_WARN);
	assert_int_equal(retired_severity(0, 20, 17), GPUCTL_HEALTH_FAIL);
}

/* Parts without a signal never raise a finding: GeForce (no ECC at all), Volta (no remap), a
 * GPU whose every health fact is unavailable. */
static void test_unsupported_no_finding(void **state)
{
	struct gpuctl_snapshot *s = snapshot_new_empty(3, GPUCTL_SNAP_HEALTH);
	struct gpuctl_snapshot *v = volta(0, 0);
	struct gpuctl_health_report *rep;

	(void)state;
	assert_non_null(s);
	/* GPU 0: GeForce, ECC mode unavailable, no counters, no pages, no remap */
	assert_int_equal(snapshot_set_str(s, 0, GPUCTL_F_NAME, "NVIDIA GeForce RTX 4090"), 0);
	assert_int_equal(snapshot_set_int(s, 0, GPUCTL_F_TEMP, 40), 0);
	/* GPU 1: temperature without a slowdown threshold, width without a maximum */
	assert_int_equal(snapshot_set_int(s, 1, GPUCTL_F_TEMP, 120), 0);
	assert_int_equal(snapshot_set_int(s, 1, GPUCTL_F_PCIE_WIDTH, 1), 0);
	/* GPU 2: slowdown threshold without a temperature, max without a width */
	assert_int_equal(snapshot_set_int(s, 2, GPUCTL_F_TEMP_SLOWDOWN, 10), 0);
	assert_int_equal(snapshot_set_int(s, 2, GPUCTL_F_PCIE_WIDTH_MAX, 16), 0);
	rep = check(s);
	assert_int_equal(gpuctl_health_finding_count(rep), 0);
	gpuctl_health_report_free(rep);
	rep = check(v);
	assert_int_equal(gpuctl_health_finding_count(rep), 0);
	gpuctl_health_report_free(rep);
	gpuctl_snapshot_free(s);
	gpuctl_snapshot_free(v);
}

/* Within 5 C of the slowdown threshold (89 C here) -> WARN. */
static void test_temperature(void **state)
{
	(void)state;
	one(GPUCTL_F_TEMP, 83, "temperature", -1, NULL);
	one(GPUCTL_F_TEMP, 84, "temperature", GPUCTL_HEALTH_WARN, "within 5 C of");
	one(GPUCTL_F_TEMP, 88, "temperature", GPUCTL_HEALTH_WARN, "88 C");
	one(GPUCTL_F_TEMP, 89, "temperature", GPUCTL_HEALTH_WARN, "at or above");
	one(GPUCTL_F_TEMP, 95, "temperature", GPUCTL_HEALTH_WARN, "89 C");
}

/* HW slowdown 0x8, HW thermal 0x40, HW power brake 0x80 -> WARN; the rest are benign. */
static void test_clocks(void **state)
{
	(void)state;
	one(GPUCTL_F_CLOCKS_EVENT_REASONS, 0x0, "clocks-event", -1, NULL);
	one(GPUCTL_F_CLOCKS_EVENT_REASONS, 0x1 | 0x2 | 0x4 | 0x10 | 0x20 | 0x100, "clocks-event",
	    -1, NULL);
	one(GPUCTL_F_CLOCKS_EVENT_REASONS, 0x8, "clocks-event", GPUCTL_HEALTH_WARN, "HW slowdown");
	one(GPUCTL_F_CLOCKS_EVENT_REASONS, 0x40, "clocks-event", GPUCTL_HEALTH_WARN,
	    "HW thermal slowdown");
	one(GPUCTL_F_CLOCKS_EVENT_REASONS, 0x80, "clocks-event", GPUCTL_HEALTH_WARN,
	    "HW power brake");
	one(GPUCTL_F_CLOCKS_EVENT_REASONS, 0x88, "clocks-event", GPUCTL_HEALTH_WARN,
	    "HW slowdown, HW power brake");
}

/* DCGM DRIVER watch: reset (1), reboot (2), drain and reset (4) FAIL; drain P2P (3) WARN; recover
 * IMEX (5) has no DCGM rule: WARN. */
static void test_recovery_action(void **state)
{
	(void)state;
	one(GPUCTL_F_RECOVERY_ACTION, GPUCTL_RECOVERY_NONE, "recovery-action", -1, NULL);
	one(GPUCTL_F_RECOVERY_ACTION, GPUCTL_RECOVERY_GPU_RESET, "recovery-action",
	    GPUCTL_HEALTH_FAIL, "GPU reset");
	one(GPUCTL_F_RECOVERY_ACTION, GPUCTL_RECOVERY_NODE_REBOOT, "recovery-action",
	    GPUCTL_HEALTH_FAIL, "node reboot");
	one(GPUCTL_F_RECOVERY_ACTION, GPUCTL_RECOVERY_DRAIN_AND_RESET, "recovery-action",
	    GPUCTL_HEALTH_FAIL, "drain the GPU and reset");
	one(GPUCTL_F_RECOVERY_ACTION, GPUCTL_RECOVERY_DRAIN_P2P, "recovery-action",
	    GPUCTL_HEALTH_WARN, "peer-to-peer");
	one(GPUCTL_F_RECOVERY_ACTION, GPUCTL_RECOVERY_RECOVER_IMEX, "recovery-action",
	    GPUCTL_HEALTH_WARN, "IMEX");
	/* NVML 615 (NVML API change log, v610 to v615): bus reset 6, system reboot 7 */
	one(GPUCTL_F_RECOVERY_ACTION, 6, "recovery-action", GPUCTL_HEALTH_FAIL, "bus reset");
	one(GPUCTL_F_RECOVERY_ACTION, 7, "recovery-action", GPUCTL_HEALTH_FAIL, "system reboot");
	one(GPUCTL_F_RECOVERY_ACTION, 9, "recovery-action", GPUCTL_HEALTH_WARN, "9");
}

static void test_pcie_width(void **state)
{
	(void)state;
	one(GPUCTL_F_PCIE_WIDTH, 16, "pcie-width", -1, NULL);
	one(GPUCTL_F_PCIE_WIDTH, 8, "pcie-width", GPUCTL_HEALTH_WARN, "x8 of its maximum x16");
	one(GPUCTL_F_PCIE_WIDTH, 15, "pcie-width", GPUCTL_HEALTH_WARN, "x15");
}

/* Replays between two samples age_s apart on a Gen gen x16 link: the severity, -1 for none. */
static int replay_severity(int64_t gen, int64_t before, int64_t now, double age_s)
{
	struct gpuctl_health_opts opts = GPUCTL_HEALTH_OPTS_INIT;
	struct gpuctl_snapshot *s = healthy(1), *p = healthy(1);
	struct gpuctl_health_report *rep;
	const struct gpuctl_health_finding *f;
	int sev;

	assert_int_equal(snapshot_set_int(s, 0, GPUCTL_F_PCIE_GEN, gen), 0);
	assert_int_equal(snapshot_set_int(s, 0, GPUCTL_F_PCIE_REPLAY, now), 0);
	assert_int_equal(snapshot_set_int(p, 0, GPUCTL_F_PCIE_REPLAY, before), 0);
	opts.prev = p;
	opts.prev_age_s = age_s;
	rep = check_opts(s, NULL, &opts);
	f = find(rep, 0, "pcie-replay");
	sev = f ? f->severity : -1;
	gpuctl_health_report_free(rep);
	gpuctl_snapshot_free(s);
	gpuctl_snapshot_free(p);
	return sev;
}

/* DCGM: replays per minute > ceil(per-lane rate x width): Gen4 x16 allows 16, Gen5 x16 31,
 * Gen3 x16 ceil(7.68) = 8. */
static void test_pcie_replay(void **state)
{
	(void)state;
	assert_int_equal(replay_severity(4, 100, 116, 60), -1);
	assert_int_equal(replay_severity(4, 100, 117, 60), GPUCTL_HEALTH_WARN);
	assert_int_equal(replay_severity(5, 0, 31, 60), -1);
	assert_int_equal(replay_severity(5, 0, 32, 60), GPUCTL_HEALTH_WARN);
	assert_int_equal(replay_severity(3, 0, 8, 60), -1);
	assert_int_equal(replay_severity(3, 0, 9, 60), GPUCTL_HEALTH_WARN);
	/* two minutes: ceil(0.96 x 16 x 2) = 31 */
	assert_int_equal(replay_severity(4, 0, 31, 120), -1);
	assert_int_equal(replay_severity(4, 0, 32, 120), GPUCTL_HEALTH_WARN);
	/* a shorter interval gets a whole minute's budget */
	assert_int_equal(replay_severity(4, 0, 16, 5), -1);
	assert_int_equal(replay_severity(4, 0, 17, 5), GPUCTL_HEALTH_WARN);
	/* a counter that went back (driver reload) is no rate; unknown generation: no check */
	assert_int_equal(replay_severity(4, 500, 0, 60), -1);
	assert_int_equal(replay_severity(9, 0, 1000, 60), -1);
	assert_int_equal(replay_severity(4, 0, 1000, 0), -1);
}

static void test_replay_needs_prev(void **state)
{
	(void)state;
	/* without an earlier sample a replay count is no rate */
	one(GPUCTL_F_PCIE_REPLAY, 1000000, "pcie-replay", -1, NULL);
}

static void nvlinks(struct gpuctl_snapshot *s, size_t i, int active, int present, uint64_t inactive,
                    int switch_links)
{
	s->gpus[i].has_nvlink_state = true;
	s->gpus[i].nvlink_active = active;
	s->gpus[i].nvlink_present = present;
	s->gpus[i].nvlink_inactive = inactive;
	s->gpus[i].nvswitch_links = switch_links;
}

static void test_nvlink_switch(void **state)
{
	struct gpuctl_snapshot *s = healthy(4);
	struct gpuctl_health_report *rep;
	const struct gpuctl_health_finding *f;

	(void)state;
	for (size_t i = 0; i < 4; i++)
		nvlinks(s, i, 12, 12, 0, 12);
	nvlinks(s, 2, 11, 12, 1u << 4, 11);
	nvlinks(s, 3, 0, 12, 0xfff, 0); /* every link down on a switch fabric */
	rep = check(s);
	f = find(rep, 2, "nvlink-down");
	assert_non_null(f);
	assert_int_equal(f->severity, GPUCTL_HEALTH_WARN);
	assert_non_null(strstr(f->message, "11 of 12"));
	assert_non_null(strstr(f->message, "down: 4"));
	f = find(rep, 3, "nvlink-down");
	assert_non_null(f);
	assert_non_null(strstr(f->message, "0 of 12"));
	assert_non_null(strstr(f->message, "down: 0, 1, 2"));
	assert_null(find(rep, 0, "nvlink-down"));
	assert_null(find(rep, 1, "nvlink-down"));
	gpuctl_health_report_free(rep);
	gpuctl_snapshot_free(s);
}

static void test_nvlink_bridges_and_mig(void **state)
{
	struct gpuctl_snapshot *s = healthy(4);
	struct gpuctl_health_report *rep;

	(void)state;
	/* bridged pairs 0-1; 2 and 3 have no bridge: no finding for them */
	nvlinks(s, 0, 4, 4, 0, 0);
	nvlinks(s, 1, 4, 4, 0, 0);
	nvlinks(s, 2, 0, 4, 0xf, 0);
	nvlinks(s, 3, 0, 0, 0, 0);
	rep = check(s);
	assert_int_equal(gpuctl_health_finding_count(rep), 0);
	gpuctl_health_report_free(rep);
	/* a bridge with one link of four down is a partial loss: WARN (bandwidth, rated) */
	nvlinks(s, 1, 3, 4, 1u << 2, 0);
	rep = check(s);
	assert_int_equal(find(rep, 1, "nvlink-down")->severity, GPUCTL_HEALTH_WARN);
	assert_int_equal(gpuctl_health_finding_count(rep), 1);
	gpuctl_health_report_free(rep);
	/* a MIG-enabled GPU of the model: its links read down, so the model is not checked */
	assert_int_equal(snapshot_set_int(s, 3, GPUCTL_F_MIG_MODE, 1), 0);
	rep = check(s);
	assert_int_equal(gpuctl_health_finding_count(rep), 0);
	gpuctl_health_report_free(rep);
	/* another model is not compared */
	assert_int_equal(snapshot_set_int(s, 3, GPUCTL_F_MIG_MODE, 0), 0);
	assert_int_equal(snapshot_set_str(s, 1, GPUCTL_F_NAME, "Other"), 0);
	rep = check(s);
	assert_int_equal(gpuctl_health_finding_count(rep), 0);
	gpuctl_health_report_free(rep);
	/* without the NVLink walk (no topology): nothing */
	for (size_t i = 0; i < 4; i++)
		s->gpus[i].has_nvlink_state = false;
	assert_int_equal(snapshot_set_str(s, 1, GPUCTL_F_NAME, A100), 0);
	rep = check(s);
	assert_int_equal(gpuctl_health_finding_count(rep), 0);
	gpuctl_health_report_free(rep);
	gpuctl_snapshot_free(s);
}

/* NVLink error counters between two samples age_s apart: the severity, -1 for none. */
static int nvlink_errors_severity(uint64_t r0, uint64_t r1, uint64_t rec0, uint64_t rec1,
                                  uint64_t crc0, uint64_t crc1, double age_s, bool prev_has)
{
	struct gpuctl_health_opts opts = GPUCTL_HEALTH_OPTS_INIT;
	struct gpuctl_snapshot *s = healthy(1), *p = healthy(1);
	struct gpuctl_health_report *rep;
	const struct gpuctl_health_finding *f;
	int sev;

	s->gpus[0].has_nvlink_replay = s->gpus[0].has_nvlink_recovery = true;
	s->gpus[0].has_nvlink_crc = true;
	s->gpus[0].nvlink_replay = r1;
	s->gpus[0].nvlink_recovery = rec1;
	s->gpus[0].nvlink_crc = crc1;
	p->gpus[0].has_nvlink_replay = p->gpus[0].has_nvlink_recovery = prev_has;
	p->gpus[0].has_nvlink_crc = prev_has;
	p->gpus[0].nvlink_replay = r0;
	p->gpus[0].nvlink_recovery = rec0;
	p->gpus[0].nvlink_crc = crc0;
	opts.prev = p;
	opts.prev_age_s = age_s;
	rep = check_opts(s, NULL, &opts);
	f = find(rep, 0, "nvlink-errors");
	sev = f ? f->severity : -1;
	assert_int_equal(gpuctl_health_finding_count(rep), f ? 1 : 0);
	gpuctl_health_report_free(rep);
	gpuctl_snapshot_free(s);
	gpuctl_snapshot_free(p);
	return sev;
}

/* Rising replay, recovery or CRC counts WARN (the issue); CRC at >= 100/s FAIL (DCGM). */
static void test_nvlink_errors(void **state)
{
	(void)state;
	assert_int_equal(nvlink_errors_severity(5, 5, 1, 1, 7, 7, 60, true), -1);
	assert_int_equal(nvlink_errors_severity(5, 6, 1, 1, 7, 7, 60, true), GPUCTL_HEALTH_WARN);
	assert_int_equal(nvlink_errors_severity(5, 5, 1, 2, 7, 7, 60, true), GPUCTL_HEALTH_WARN);
	assert_int_equal(nvlink_errors_severity(5, 5, 1, 1, 7, 8, 60, true), GPUCTL_HEALTH_WARN);
	/* 100 CRC errors a second: 5999 in 60 s is below, 6000 at */
	assert_int_equal(nvlink_errors_severity(0, 0, 0, 0, 0, 5999, 60, true), GPUCTL_HEALTH_WARN);
	assert_int_equal(nvlink_errors_severity(0, 0, 0, 0, 0, 6000, 60, true), GPUCTL_HEALTH_FAIL);
	/* counters that went back, no earlier reading, no interval: nothing */
	assert_int_equal(nvlink_errors_severity(9, 1, 0, 0, 0, 0, 60, true), -1);
	assert_int_equal(nvlink_errors_severity(0, 5, 0, 0, 0, 0, 60, false), -1);
	assert_int_equal(nvlink_errors_severity(0, 5, 0, 0, 0, 0, 0, true), -1);
}

/* Each NVLink error counter on its own: a GPU whose links answer only the replay counter still
 * gets its rise; a counter that went back (or one not read) hides none of the others. */
static void test_nvlink_errors_each(void **state)
{
	struct gpuctl_health_opts opts = GPUCTL_HEALTH_OPTS_INIT;
	struct gpuctl_snapshot *s = healthy(1), *p = healthy(1);
	struct gpuctl_health_report *rep;
	const struct gpuctl_health_finding *f;

	(void)state;
	s->gpus[0].has_nvlink_replay = p->gpus[0].has_nvlink_replay = true;
	p->gpus[0].nvlink_replay = 5;
	s->gpus[0].nvlink_replay = 9;
	opts.prev = p;
	opts.prev_age_s = 60;
	rep = check_opts(s, NULL, &opts);
	f = find(rep, 0, "nvlink-errors");
	assert_non_null(f);
	assert_int_equal(f->severity, GPUCTL_HEALTH_WARN);
	assert_non_null(strstr(f->message, "4 replays, 0 recoveries, 0 CRC errors"));
	gpuctl_health_report_free(rep);
	/* CRC read in both and gone back (a reset): the replay rise still counts */
	s->gpus[0].has_nvlink_crc = p->gpus[0].has_nvlink_crc = true;
	p->gpus[0].nvlink_crc = 100;
	s->gpus[0].nvlink_crc = 3;
	rep = check_opts(s, NULL, &opts);
	f = find(rep, 0, "nvlink-errors");
	assert_non_null(f);
	assert_non_null(strstr(f->message, "4 replays, 0 recoveries, 0 CRC errors"));
	gpuctl_health_report_free(rep);
	/* the replay counter read now but not before: nothing to compare */
	p->gpus[0].has_nvlink_replay = false;
	rep = check_opts(s, NULL, &opts);
	assert_null(find(rep, 0, "nvlink-errors"));
	gpuctl_health_report_free(rep);
	gpuctl_snapshot_free(s);
	gpuctl_snapshot_free(p);
}

static void test_lost_and_nvml_errors(void **state)
{
	struct gpuctl_snapshot *s = healthy(4);
	struct gpuctl_health_report *rep;
	const struct gpuctl_health_finding *f;

	(void)state;
	snapshot_set_lost(s, 0);
	assert_int_equal(snapshot_set_int(s, 0, GPUCTL_F_ECC_VOL_UNCORRECTED, 5), 0);
	/* GPU 1: a health fact unreadable (docs/health.md, "nvml": WARN), and a field no check
	 * reads, which is no finding */
	s->gpus[1].valid[GPUCTL_F_TEMP] = false;
	assert_int_equal(snapshot_set_unreadable(s, 1,
	                                         UINT64_C(1) << GPUCTL_F_TEMP |
	                                                 UINT64_C(1) << GPUCTL_F_POWER_DRAW,
	                                         "nvmlDeviceGetTemperature: Unknown Error"),
	                 0);
	/* GPU 2: only a field no check reads */
	assert_int_equal(snapshot_set_unreadable(s, 2, UINT64_C(1) << GPUCTL_F_POWER_DRAW,
	                                         "nvmlDeviceGetPowerUsage: Unknown Error"),
	                 0);
	/* GPU 3: no health fact read at all (its handle failed): FAIL */
	for (size_t k = 0; k < GPUCTL__F_COUNT; k++)
		if (k != GPUCTL_F_INDEX)
			s->gpus[3].valid[k] = false;
	assert_int_equal(snapshot_set_unreadable(s, 3,
	                                         ~UINT64_C(0) & ~(UINT64_C(1) << GPUCTL_F_INDEX),
	                                         "nvmlDeviceGetHandleByIndex_v2: Unknown Error"),
	                 0);
	rep = check(s);
	f = find(rep, 0, "lost");
	assert_non_null(f);
	assert_int_equal(f->severity, GPUCTL_HEALTH_FAIL);
	/* a lost GPU gets the one finding: its facts are not trusted */
	assert_null(find(rep, 0, "ecc-dbe"));
	f = find(rep, 1, "nvml");
	assert_non_null(f);
	assert_int_equal(f->severity, GPUCTL_HEALTH_WARN);
	assert_non_null(strstr(f->message, "1 health fact unreadable"));
	assert_non_null(
	        strstr(f->message, "temperature_gpu: nvmlDeviceGetTemperature: Unknown Error"));
	assert_int_equal(gpuctl_health_verdict(rep, 1), GPUCTL_HEALTH_WARN);
	assert_null(find(rep, 2, "nvml"));
	assert_int_equal(gpuctl_health_verdict(rep, 2), GPUCTL_HEALTH_OK);
	f = find(rep, 3, "nvml");
	assert_non_null(f);
	assert_int_equal(f->severity, GPUCTL_HEALTH_FAIL);
	assert_non_null(strstr(f->message, "NVML gave no health fact of this GPU (uuid: "
	                                   "nvmlDeviceGetHandleByIndex_v2: Unknown Error)"));
	gpuctl_health_report_free(rep);
	/* a value set later (the field values call failed, the direct call answered) is readable */
	assert_int_equal(snapshot_set_int(s, 1, GPUCTL_F_TEMP, 40), 0);
	rep = check(s);
	assert_null(find(rep, 1, "nvml"));
	assert_int_equal(gpuctl_health_verdict(rep, 1), GPUCTL_HEALTH_OK);
	gpuctl_health_report_free(rep);
	gpuctl_snapshot_free(s);
}

static void test_order_and_verdict(void **state)
{
	struct gpuctl_snapshot *s = healthy(2);
	struct gpuctl_health_report *rep;
	const struct gpuctl_health_finding *f;

	(void)state;
	/* WARNs first in check order, then a FAIL: FAIL is listed first, verdict FAIL */
	assert_int_equal(snapshot_set_int(s, 1, GPUCTL_F_TEMP, 88), 0);
	assert_int_equal(snapshot_set_int(s, 1, GPUCTL_F_PCIE_WIDTH, 4), 0);
	assert_int_equal(snapshot_set_int(s, 1, GPUCTL_F_REMAP_FAILURE, 1), 0);
	assert_int_equal(snapshot_set_int(s, 0, GPUCTL_F_REMAP_PENDING, 1), 0);
	rep = check(s);
	assert_int_equal(gpuctl_health_finding_count(rep), 4);
	f = gpuctl_health_finding(rep, 0);
	assert_int_equal(f->gpu, 0);
	assert_string_equal(f->check, "remap-pending");
	f = gpuctl_health_finding(rep, 1);
	assert_int_equal(f->gpu, 1);
	assert_string_equal(f->check, "remap-failure");
	assert_string_equal(gpuctl_health_finding(rep, 2)->check, "temperature");
	assert_string_equal(gpuctl_health_finding(rep, 3)->check, "pcie-width");
	assert_int_equal(gpuctl_health_verdict(rep, 0), GPUCTL_HEALTH_WARN);
	assert_int_equal(gpuctl_health_verdict(rep, 1), GPUCTL_HEALTH_FAIL);
	gpuctl_health_report_free(rep);
	gpuctl_snapshot_free(s);
}

static void test_bad_args(void **state)
{
	struct gpuctl_health_opts opts = GPUCTL_HEALTH_OPTS_INIT;
	struct gpuctl_health_report *rep = (void *)&opts; /* untouched on failure */
	struct gpuctl_snapshot *s = healthy(1);
	struct gpuctl_ctx *ctx = NULL;

	(void)state;
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	assert_int_equal(gpuctl_health_check(ctx, NULL, NULL, NULL, &rep), -EINVAL);
	opts.struct_size = 1;
	assert_int_equal(gpuctl_health_check(ctx, s, NULL, &opts, &rep), -EINVAL);
	assert_ptr_equal(rep, (void *)&opts);
	assert_non_null(strstr(gpuctl_errmsg(ctx), "struct_size"));
	/* an older caller's smaller struct: strict only */
	opts.struct_size = offsetof(struct gpuctl_health_opts, prev);
	opts.prev = s; /* beyond struct_size: ignored */
	assert_int_equal(gpuctl_health_check(ctx, s, NULL, &opts, &rep), 0);
	gpuctl_health_report_free(rep);
	gpuctl_ctx_free(ctx);
	gpuctl_snapshot_free(s);
}

static void test_probe(void **state)
{
	struct gpuctl_health_opts opts = GPUCTL_HEALTH_OPTS_INIT;
	struct gpuctl_probe_result probes[4] = {
	        {.struct_size = sizeof(probes[0]), .status = GPUCTL_PROBE_OK, .seconds = 0.2},
	        {.struct_size = sizeof(probes[0]),
	         .status = GPUCTL_PROBE_FAILED,
	         .detail = "cuMemAlloc: CUDA_ERROR_UNKNOWN (999)"},
	        {.struct_size = sizeof(probes[0]), .status = GPUCTL_PROBE_HUNG, .seconds = 10},
	        {.struct_size = sizeof(probes[0]), .status = GPUCTL_PROBE_NOT_RUN},
	};
	struct gpuctl_snapshot *s = healthy(4);
	struct gpuctl_health_report *rep;
	const struct gpuctl_health_finding *f;

	(void)state;
	opts.probes = probes;
	opts.n_probes = 3; /* GPU 3 beyond: not probed */
	probes[3].status = GPUCTL_PROBE_FAILED;
	probes[0].detail = "context created, 64 MiB allocated and freed";
	rep = check_opts(s, NULL, &opts);
	assert_int_equal(gpuctl_health_finding_count(rep), 3);
	/* a pass is an OK finding that says what passed */
	f = find(rep, 0, "cuda-probe");
	assert_int_equal(f->severity, GPUCTL_HEALTH_OK);
	assert_string_equal(f->message, "CUDA allocation probe passed in 0.20 s: context created, "
	                                "64 MiB allocated and freed");
	f = find(rep, 1, "cuda-probe");
	assert_int_equal(f->severity, GPUCTL_HEALTH_FAIL);
	assert_non_null(strstr(f->message, "cuMemAlloc: CUDA_ERROR_UNKNOWN (999)"));
	f = find(rep, 2, "cuda-probe");
	assert_int_equal(f->severity, GPUCTL_HEALTH_FAIL);
	assert_non_null(strstr(f->message, "hung"));
	assert_non_null(strstr(f->message, "10 s"));
	assert_int_equal(gpuctl_health_verdict(rep, 0), GPUCTL_HEALTH_OK);
	assert_int_equal(gpuctl_health_verdict(rep, 3), GPUCTL_HEALTH_OK);
	gpuctl_health_report_free(rep);
	/* MIG mode without a MIG device: nothing for CUDA to use, an OK finding, never FAIL */
	probes[0].status = GPUCTL_PROBE_NO_DEVICE;
	rep = check_opts(s, NULL, &opts);
	f = find(rep, 0, "cuda-probe");
	assert_int_equal(f->severity, GPUCTL_HEALTH_OK);
	assert_non_null(strstr(f->message, "no MIG device"));
	assert_int_equal(gpuctl_health_verdict(rep, 0), GPUCTL_HEALTH_OK);
	gpuctl_health_report_free(rep);
	gpuctl_snapshot_free(s);
}

/* Probe results built against an older header: entries without `seconds` (a smaller
 * struct_size) are read at their own stride, and a missing field reads as its default. */
static void test_probe_struct_size(void **state)
{
	struct old_probe {
		size_t struct_size;
		int status;
		const char *detail;
	} old[3] = {
	        {sizeof(struct old_probe), GPUCTL_PROBE_OK, NULL},
	        {sizeof(struct old_probe), GPUCTL_PROBE_HUNG, NULL},
	        {sizeof(struct old_probe), GPUCTL_PROBE_FAILED,
	         "cuInit: CUDA_ERROR_NO_DEVICE (100)"},
	};
	struct gpuctl_health_opts opts = GPUCTL_HEALTH_OPTS_INIT;
	struct gpuctl_snapshot *s = healthy(3);
	struct gpuctl_health_report *rep = NULL;
	const struct gpuctl_health_finding *f;
	struct gpuctl_ctx *ctx = NULL;

	(void)state;
	_Static_assert(sizeof(struct old_probe) < sizeof(struct gpuctl_probe_result),
	               "the old entry is smaller");
	opts.probes = (const struct gpuctl_probe_result *)(const void *)old;
	opts.n_probes = 3;
	rep = check_opts(s, NULL, &opts);
	assert_int_equal(gpuctl_health_finding_count(rep), 3);
	f = find(rep, 0, "cuda-probe");
	assert_string_equal(f->message, "CUDA allocation probe passed in 0.00 s");
	f = find(rep, 1, "cuda-probe");
	assert_non_null(strstr(f->message, "hung: no answer within 0 s")); /* seconds: default */
	f = find(rep, 2, "cuda-probe");
	assert_non_null(strstr(f->message, "cuInit: CUDA_ERROR_NO_DEVICE (100)"));
	gpuctl_health_report_free(rep);
	rep = NULL;

	/* entries of different sizes, too small or misaligned strides, uninitialised: refused */
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	old[2].struct_size = sizeof(struct gpuctl_probe_result);
	assert_int_equal(gpuctl_health_check(ctx, s, NULL, &opts, &rep), -EINVAL);
	assert_non_null(strstr(gpuctl_errmsg(ctx), "entry 2"));
	old[0].struct_size = offsetof(struct old_probe, status);
	assert_int_equal(gpuctl_health_check(ctx, s, NULL, &opts, &rep), -EINVAL);
	old[0].struct_size = offsetof(struct old_probe, detail) + 4;
	assert_int_equal(gpuctl_health_check(ctx, s, NULL, &opts, &rep), -EINVAL);
	old[0].struct_size = 0;
	assert_int_equal(gpuctl_health_check(ctx, s, NULL, &opts, &rep), -EINVAL);
	assert_null(rep);
	gpuctl_ctx_free(ctx);
	gpuctl_snapshot_free(s);
}

/* ---- XIDs ---- */

/* NVIDIA's XID catalog (the 2025-10-29 spreadsheet, docs/health.md): RESET_GPU, RESTART_BM,
 * RESTART_VM (151), CHECK_MECHANICALS (54) and the XID 48 / NVLink workflows are fence; 156
 * (resource retirement event) is RESET_GPU; 167, 169, 171 and 172 have no catalog action and are
 * fence by their meaning (docs/health.md). RESTART_APP is application; IGNORE is info;
 * UPDATE_SWFW (78), CHECK_UVM (159), CONTACT_SUPPORT for a used code (142) and NVLink5 XIDs
 * without a decodable status are check. */
static const unsigned fence_xids[] = {46,  48,  54,  62,  64,  74,  79,  95,  109, 110, 119, 120,
                                      136, 140, 143, 151, 155, 156, 158, 167, 169, 171, 172};
static const unsigned app_xids[] = {11, 13, 25, 31, 32, 39, 43, 45, 60, 68, 69, 80, 94, 139};
static const unsigned info_xids[] = {37, 38, 44, 63, 92, 93, 106, 121, 137, 141, 154, 157, 160};
static const unsigned check_xids[] = {78, 142, 144, 145, 146, 147, 148, 149, 150, 159};
static const unsigned unknown_xids[] = {999, 1, 2, 162, 165, 168, 200, 99999};

static int xid_severity(unsigned xid)
{
	struct gpuctl_snapshot *s = healthy(2);
	struct gpuctl_xid_log *log = NULL;
	struct gpuctl_health_report *rep;
	const struct gpuctl_health_finding *f;
	int sev;

	assert_int_equal(gpuctl_xid_log_new(&log), 0);
	assert_int_equal(gpuctl_xid_log_add(log, 1, xid, "some text"), 0);
	rep = check_opts(s, log, NULL);
	assert_int_equal(gpuctl_health_finding_count(rep), 1);
	f = find(rep, 1, "xid");
	assert_non_null(f);
	assert_int_equal(f->xid, xid);
	assert_non_null(strstr(f->message, "some text"));
	sev = f->severity;
	assert_int_equal(gpuctl_health_verdict(rep, 1), sev);
	assert_int_equal(gpuctl_health_verdict(rep, 0), GPUCTL_HEALTH_OK);
	gpuctl_health_report_free(rep);
	gpuctl_xid_log_free(log);
	gpuctl_snapshot_free(s);
	return sev;
}

static void test_xid_classes(void **state)
{
	struct gpuctl_xid_info info = GPUCTL_XID_INFO_INIT;

	(void)state;
	for (size_t i = 0; i < sizeof(fence_xids) / sizeof(fence_xids[0]); i++) {
		assert_int_equal(gpuctl_xid_lookup(fence_xids[i], &info), 0);
		assert_int_equal(info.code, fence_xids[i]);
		assert_int_equal(info.class_, GPUCTL_XID_FENCE);
		assert_non_null(info.meaning);
		assert_non_null(info.action);
		assert_int_equal(xid_severity(fence_xids[i]), GPUCTL_HEALTH_FAIL);
	}
	for (size_t i = 0; i < sizeof(app_xids) / sizeof(app_xids[0]); i++) {
		assert_int_equal(gpuctl_xid_lookup(app_xids[i], &info), 0);
		assert_int_equal(info.class_, GPUCTL_XID_APPLICATION);
		assert_non_null(strstr(info.action, "restart the job"));
		assert_int_equal(xid_severity(app_xids[i]), GPUCTL_HEALTH_WARN);
	}
	for (size_t i = 0; i < sizeof(info_xids) / sizeof(info_xids[0]); i++) {
		assert_int_equal(gpuctl_xid_lookup(info_xids[i], &info), 0);
		assert_int_equal(info.class_, GPUCTL_XID_INFO);
		assert_int_equal(xid_severity(info_xids[i]), GPUCTL_HEALTH_OK);
	}
	for (size_t i = 0; i < sizeof(check_xids) / sizeof(check_xids[0]); i++) {
		assert_int_equal(gpuctl_xid_lookup(check_xids[i], &info), 0);
		assert_int_equal(info.class_, GPUCTL_XID_CHECK);
		assert_int_equal(xid_severity(check_xids[i]), GPUCTL_HEALTH_WARN);
	}
	for (size_t i = 0; i < sizeof(unknown_xids) / sizeof(unknown_xids[0]); i++) {
		assert_int_equal(gpuctl_xid_lookup(unknown_xids[i], &info), 0);
		assert_int_equal(info.code, unknown_xids[i]);
		assert_int_equal(info.class_, GPUCTL_XID_UNKNOWN);
		assert_non_null(info.meaning);
		assert_non_null(info.action);
		/* an unknown code's advice never says the GPU is fine */
		assert_null(strstr(info.action, "usable"));
		assert_non_null(strstr(info.action, "before trusting the GPU"));
		assert_int_equal(xid_severity(unknown_xids[i]), GPUCTL_HEALTH_WARN);
	}
	assert_int_equal(gpuctl_xid_lookup(999, &info), 0);
	assert_non_null(strstr(info.meaning, "unknown"));
}

/* XIDs 144-150 graded by the catalog's "XID 144-150 Decode" sheet from the line the driver logs
 * (unit, error status, sub-code = intrinfo bits 25..20). The lines are production lines quoted in
 * leptonai/gpud's tests (nvlink_logs_test.go), or built in their form; the expected classes are
 * the sheet's rows. */
static void test_xid_nvlink5_decode(void **state)
{
	static const struct {
		unsigned code;
		const char *text;
		int class_;
	} cases[] = {
	        /* RLW_RXPIPE status 0x8: IGNORE */
	        {145,
	         "pid=876767, name=ray::WorkerDict, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 "
	         "0x00000008 0x00000001 0x00000000 0x00100000 0x00000004)",
	         GPUCTL_XID_INFO},
	        /* RLW_SRC_TRACK status 0x8: XID_154_EVAL */
	        {145,
	         "RLW_SRC_TRACK Nonfatal XC1 i0 Link 12 (0x040988e2 0x00000008 0x00000000 "
	         "0x00000000 "
	         "0x00000000 0x00000000)",
	         GPUCTL_XID_CHECK},
	        /* NETIR_BER_EVENT status 1: IGNORE */
	        {149,
	         "NETIR_BER_EVENT Nonfatal XC0 i0 Link 03 (0x00086226 0x00000001 0x00000000 "
	         "0x00000000 0x00000000 0x00000000)",
	         GPUCTL_XID_INFO},
	        /* NETIR status 0: RESET_GPU */
	        {149,
	         "NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000 0x00000000 0x00000000 "
	         "0x00000000 "
	         "0x00000000)",
	         GPUCTL_XID_FENCE},
	        /* NETIR_LINK_EVT sub-code 4: RESET_GPU */
	        {149,
	         "NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000000 0x00000000 0x00000000 "
	         "0x00000000 0x00000000)",
	         GPUCTL_XID_FENCE},
	        /* NETIR_LINK_EVT sub-code 38 (0b100110): IGNORE, although the driver says Fatal */
	        {149,
	         "NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x026505c6 0x00000000 0x00000000 0x00000000 "
	         "0x00000000 0x00000000)",
	         GPUCTL_XID_INFO},
	        /* SAW_MVB: 0x2 RESET_GPU, 0x4 IGNORE; 0x6 takes the worst bit, 0x5 two IGNOREs */
	        {144, "SAW_MVB Fatal XC0 i0 Link 02 (0x00000021 0x00000002 0x0 0x0 0x0 0x0)",
	         GPUCTL_XID_FENCE},
	        {144, "SAW_MVB Nonfatal XC0 i0 Link 02 (0x00000021 0x00000004 0x0 0x0 0x0 0x0)",
	         GPUCTL_XID_INFO},
	        {144, "SAW_MVB Fatal XC0 i0 Link 02 (0x00000021 0x00000006 0x0 0x0 0x0 0x0)",
	         GPUCTL_XID_FENCE},
	        {144, "SAW_MVB Nonfatal XC0 i0 Link 02 (0x00000021 0x00000005 0x0 0x0 0x0 0x0)",
	         GPUCTL_XID_INFO},
	        /* RLW_REMAP 0x40: RESET_GPU; TLW_RX_PIPE1 0x4: RESET_GPU; MSE_WATCHDOG 0: RESET_GPU
	         */
	        {145, "RLW_REMAP Fatal XC0 i0 Link 05 (0x00000082 0x00000040 0x0 0x0 0x0 0x0)",
	         GPUCTL_XID_FENCE},
	        {146, "TLW_RX_PIPE1 Fatal XC0 i0 Link 05 (0x0000000b 0x00000004 0x0 0x0 0x0 0x0)",
	         GPUCTL_XID_FENCE},
	        {150, "MSE_WATCHDOG Fatal XC0 i0 Link -1 (0x00000000 0x00000000 0x0 0x0 0x0 0x0)",
	         GPUCTL_XID_FENCE},
	        /* NETIR_MFDE_EVENT status 3: IGNORE; 5: RESET_GPU (values, not bits) */
	        {149,
	         "NETIR_MFDE_EVENT Nonfatal XC0 i0 Link 01 (0x00000014 0x00000003 0x0 0x0 0x0)",
	         GPUCTL_XID_INFO},
	        {149, "NETIR_MFDE_EVENT Fatal XC0 i0 Link 01 (0x00000014 0x00000005 0x0 0x0 0x0)",
	         GPUCTL_XID_FENCE},
	        /* no row: the driver's word decides */
	        {144, "SAW_MVB Fatal XC0 i0 Link 01 (0x00000021 0x00000040 0x0 0x0 0x0 0x0)",
	         GPUCTL_XID_FENCE},
	        {144, "SAW_MVB Nonfatal XC0 i0 Link 01 (0x00000021 0x00000040 0x0 0x0 0x0 0x0)",
	         GPUCTL_XID_CHECK},
	        {147, "NEW_UNIT Fatal XC0 i0 Link 01", GPUCTL_XID_FENCE},
	        /* no status at all (an NVML event, or a line without it): check */
	        {145, NULL, GPUCTL_XID_CHECK},
	        {145, "NVML event", GPUCTL_XID_CHECK},
	        /* another code's text is not decoded */
	        {79, "NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000)", GPUCTL_XID_FENCE},
	        {63, "NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000)", GPUCTL_XID_INFO},
	};
	struct gpuctl_xid_info info;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		info = (struct gpuctl_xid_info)GPUCTL_XID_INFO_INIT;
		assert_int_equal(gpuctl_xid_lookup_event(cases[i].code, cases[i].text, &info), 0);
		if ((int)info.class_ != cases[i].class_)
			fail_msg("XID %u '%s': class %s, want %s", cases[i].code,
			         cases[i].text ? cases[i].text : "(none)",
			         gpuctl_xid_class_name(info.class_),
			         gpuctl_xid_class_name(cases[i].class_));
		assert_int_equal(info.code, cases[i].code);
		assert_non_null(info.meaning);
		assert_non_null(info.action);
	}
	assert_int_equal(gpuctl_xid_lookup_event(145, NULL, NULL), -EINVAL);
}

/* Several occurrences of one NVLink5 XID: the worst status decides the finding. */
static void test_xid_nvlink5_worst_occurrence(void **state)
{
	struct gpuctl_snapshot *s = healthy(2);
	struct gpuctl_xid_log *log = NULL;
	struct gpuctl_health_report *rep;
	const struct gpuctl_health_finding *f;

	(void)state;
	assert_int_equal(gpuctl_xid_log_new(&log), 0);
	assert_int_equal(gpuctl_xid_log_add(log, 1, 145,
	                                    "RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 "
	                                    "0x00000008 0x0 0x0 0x0 0x0)"),
	                 0);
	rep = check_opts(s, log, NULL);
	f = find(rep, 1, "xid");
	assert_int_equal(f->severity, GPUCTL_HEALTH_OK);
	assert_int_equal(f->xid_class, GPUCTL_XID_INFO);
	gpuctl_health_report_free(rep);
	assert_int_equal(gpuctl_xid_log_add(log, 1, 145,
	                                    "RLW_REMAP Fatal XC0 i0 Link 05 (0x00000082 0x00000040 "
	                                    "0x0 0x0 0x0 0x0)"),
	                 0);
	assert_int_equal(gpuctl_xid_log_add(log, 1, 145,
	                                    "RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 "
	                                    "0x00000008 0x0 0x0 0x0 0x0)"),
	                 0);
	rep = check_opts(s, log, NULL);
	assert_int_equal(gpuctl_health_finding_count(rep), 1);
	f = find(rep, 1, "xid");
	assert_int_equal(f->severity, GPUCTL_HEALTH_FAIL);
	assert_int_equal(f->xid_class, GPUCTL_XID_FENCE);
	assert_non_null(strstr(f->message, "3 times"));
	assert_non_null(strstr(f->message, "RLW_REMAP"));
	gpuctl_health_report_free(rep);
	gpuctl_xid_log_free(log);
	gpuctl_snapshot_free(s);
}

/* struct gpuctl_xid_info can grow (struct_size): an older caller's smaller struct gets the
 * fields it has and nothing past them. */
static void test_xid_info_struct_size(void **state)
{
	FIXTURE_ROOMY(struct gpuctl_xid_info) u;
	size_t old = offsetof(struct gpuctl_xid_info, meaning); /* code and class */

	(void)state;
	fixture_canary_fill(&u, sizeof(u), old);
	assert_int_equal(gpuctl_xid_lookup(79, &u.s), 0);
	assert_int_equal(u.s.struct_size, old);
	assert_int_equal(u.s.code, 79);
	assert_int_equal(u.s.class_, GPUCTL_XID_FENCE);
	fixture_assert_canary(&u, old, sizeof(u));

	fixture_canary_fill(&u, sizeof(u), sizeof(u)); /* newer: all of ours, nothing past */
	assert_int_equal(gpuctl_xid_lookup(12345, &u.s), 0);
	assert_int_equal(u.s.struct_size, sizeof(u));
	assert_int_equal(u.s.code, 12345);
	assert_non_null(strstr(u.s.action, "XID catalog"));
	fixture_assert_canary(&u, sizeof(struct gpuctl_xid_info), sizeof(u));

	fixture_canary_fill(&u, sizeof(u), 0); /* never initialised */
	assert_int_equal(gpuctl_xid_lookup(79, &u.s), -EINVAL);
	fixture_assert_canary(&u, sizeof(size_t), sizeof(u));
	assert_int_equal(gpuctl_xid_lookup(79, NULL), -EINVAL);
}

static void test_xid_aggregation(void **state)
{
	struct gpuctl_snapshot *s = healthy(2);
	struct gpuctl_xid_log *log = NULL;
	struct gpuctl_health_report *rep;
	const struct gpuctl_health_finding *f;

	(void)state;
	assert_int_equal(gpuctl_xid_log_new(&log), 0);
	assert_int_equal(gpuctl_xid_log_add(log, 0, 13, "first"), 0);
	assert_int_equal(gpuctl_xid_log_add(log, 0, 79, NULL), 0);
	assert_int_equal(gpuctl_xid_log_add(log, 0, 13, "second"), 0);
	assert_int_equal(gpuctl_xid_log_add(log, 0, 13, "third"), 0);
	assert_int_equal(gpuctl_xid_log_add(log, 7, 79, "no such GPU"), 0);
	assert_int_equal(gpuctl_xid_log_count(log), 5);
	rep = check_opts(s, log, NULL);
	assert_int_equal(gpuctl_health_finding_count(rep), 2);
	f = gpuctl_health_finding(rep, 0); /* FAIL first */
	assert_int_equal(f->xid, 79);
	assert_int_equal(f->severity, GPUCTL_HEALTH_FAIL);
	f = gpuctl_health_finding(rep, 1);
	assert_int_equal(f->xid, 13);
	assert_non_null(strstr(f->message, "3 times"));
	assert_non_null(strstr(f->message, "third"));
	assert_null(strstr(f->message, "first"));
	assert_int_equal(gpuctl_health_verdict(rep, 1), GPUCTL_HEALTH_OK);
	gpuctl_health_report_free(rep);
	gpuctl_xid_log_free(log);
	gpuctl_snapshot_free(s);
}

/* ---- the kernel log ---- */

static struct gpuctl_xid_log *parse(const struct gpuctl_snapshot *s, const char *text, int want)
{
	struct gpuctl_xid_log *log = NULL;

	assert_int_equal(gpuctl_xid_log_new(&log), 0);
	assert_int_equal(gpuctl_xid_log_parse(log, s, text, strlen(text)), want);
	assert_int_equal(gpuctl_xid_log_count(log), (size_t)want);
	return log;
}

static void expect(const struct gpuctl_xid_log *log, size_t i, size_t gpu, unsigned xid,
                   const char *text)
{
	size_t g;
	unsigned x;
	const char *t;

	assert_int_equal(gpuctl_xid_log_get(log, i, &g, &x, &t), 0);
	assert_int_equal(g, gpu);
	assert_int_equal(x, xid);
	if (text) {
		assert_non_null(t);
		assert_string_equal(t, text);
	} else {
		assert_null(t);
	}
}

static void test_kmsg_forms(void **state)
{
	struct gpuctl_snapshot *s = healthy(4);
	struct gpuctl_xid_log *log;

	(void)state;
	log = parse(
	        s,
	        /* /dev/kmsg record */
	        "4,1234,5678901,-;NVRM: Xid (PCI:0000:07:00): 79, pid=1234, name=python, GPU "
	        "has fallen off the bus.\n"
	        /* continuation line of the record */
	        " SUBSYSTEM=pci\n"
	        /* dmesg with a time stamp, lower-case hex */
	        "[  123.456789] NVRM: Xid (PCI:0000:0f:00): 13, pid=42, name=a.out, Graphics SM "
	        "Warp Exception on (GPC 0, TPC 0, SM 0)\n"
	        /* syslog prefix, older driver without "PCI:", with a function number */
	        "Nov 30 12:00:00 host kernel: NVRM: Xid (0000:47:00.0): 48, An uncorrectable "
	        "double bit error\n"
	        /* text inside the parentheses, no text after the code */
	        "NVRM: Xid (PCI:0000:4e:00 GPC0): 31\n"
	        /* NVML's 8-digit domain */
	        "NVRM: Xid (PCI:00000000:07:00): 999, pid='<unknown>', name=<unknown>, x\r\n",
	        5);
	expect(log, 0, 0, 79, "pid=1234, name=python, GPU has fallen off the bus.");
	expect(log, 1, 1, 13,
	       "pid=42, name=a.out, Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0)");
	expect(log, 2, 2, 48, "An uncorrectable double bit error");
	expect(log, 3, 3, 31, NULL);
	expect(log, 4, 0, 999, "pid='<unknown>', name=<unknown>, x?");
	assert_int_equal(gpuctl_xid_log_get(log, 5, NULL, NULL, NULL), -EINVAL);
	gpuctl_xid_log_free(log);
	gpuctl_snapshot_free(s);
}

static void test_kmsg_malformed(void **state)
{
	struct gpuctl_snapshot *s = healthy(2);
	struct gpuctl_xid_log *log;

	(void)state;
	log = parse(
	        s,
	        "\n"
	        "NVRM: Xid\n"
	        "NVRM: Xid (\n"
	        "NVRM: Xid (PCI:0000:07:00)\n"
	        "NVRM: Xid (PCI:0000:07:00): \n"
	        "NVRM: Xid (PCI:0000:07:00): x13, text\n"
	        "NVRM: Xid (PCI:0000:07:00): 13x, text\n"
	        "NVRM: Xid (PCI:0000:07:00): 0, zero is no XID\n"
	        "NVRM: Xid (PCI:0000:07:00): 100000, too large\n"
	        "NVRM: Xid (PCI:0000:07:00): 123456789012345678901234567890, overflow\n"
	        "NVRM: Xid (PCI:zz:07:00): 13, bad bus\n"
	        "NVRM: Xid (PCI:0000:07): 13, short bus\n"
	        "NVRM: Xid (PCI:000000000:07:00): 13, domain too long\n"
	        "NVRM: Xid (PCI:0000:07:00 "
	        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa): 13\n"
	        "NVRM: Xid (PCI:0000:99:00): 79, another machine's bus\n"
	        "nvrm: xid (PCI:0000:07:00): 79, wrong case\n"
	        "Xid (PCI:0000:07:00): 79, no NVRM\n"
	        "NVRM: GPU 0000:07:00.0: something else\n"
	        "NVRM: GPU at PCI:0000:07:00: GPU-00000000-1111-2222-3333-444444444444\n",
	        0);
	gpuctl_xid_log_free(log);
	/* text that is not NUL-terminated: the parser stops at len */
	char buf[] = {'N', 'V', 'R', 'M', ':', ' ', 'X', 'i', 'd', ' ', '(', '0', '0',
	              '0', '0', ':', '0', '7', ':', '0', '0', ')', ':', ' ', '4', '8'};
	assert_int_equal(gpuctl_xid_log_new(&log), 0);
	assert_int_equal(gpuctl_xid_log_parse(log, s, buf, sizeof(buf)), 1);
	expect(log, 0, 0, 48, NULL);
	assert_int_equal(gpuctl_xid_log_parse(log, s, buf, sizeof(buf) - 2), 0);
	assert_int_equal(gpuctl_xid_log_parse(log, s, NULL, 0), 0);
	assert_int_equal(gpuctl_xid_log_parse(log, s, NULL, 1), -EINVAL);
	assert_int_equal(gpuctl_xid_log_parse(NULL, s, buf, 1), -EINVAL);
	gpuctl_xid_log_free(log);
	gpuctl_snapshot_free(s);
}

static void test_kmsg_driver_reload_and_off_bus(void **state)
{
	struct gpuctl_snapshot *s = healthy(2);
	struct gpuctl_xid_log *log;

	(void)state;
	/* events before the last driver load are forgotten */
	log = parse(s,
	            "NVRM: Xid (PCI:0000:07:00): 79, old\n"
	            "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 2024\n"
	            "NVRM: Xid (PCI:0000:0F:00): 13, new\n",
	            1);
	expect(log, 0, 1, 13, "new");
	gpuctl_xid_log_free(log);
	/* "fallen off the bus" without an XID line counts as 79, once */
	log = parse(s,
	            "NVRM: GPU 0000:0F:00.0: GPU has fallen off the bus.\n"
	            "NVRM: GPU 0000:0F:00.0: GPU has fallen off the bus.\n",
	            1);
	expect(log, 0, 1, 79, "GPU has fallen off the bus (no XID line)");
	gpuctl_xid_log_free(log);
	log = parse(s,
	            "NVRM: Xid (PCI:0000:07:00): 79, pid=1, GPU has fallen off the bus.\n"
	            "NVRM: GPU 0000:07:00.0: GPU has fallen off the bus.\n",
	            1);
	gpuctl_xid_log_free(log);
	gpuctl_snapshot_free(s);
}

/* A GPU reset starts that GPU over (docs/health.md, "After a reset"): the driver's "NVRM: GPU at
 * PCI:...: GPU-<uuid>" (printed once per initialisation of a GPU, before its first XID:
 * open-gpu-kernel-modules kernel_rc.c) and NVSentinel's "GPU reset executed: GPU-<uuid>". */
static void test_kmsg_gpu_reset(void **state)
{
	struct gpuctl_snapshot *s = healthy(2);
	struct gpuctl_xid_log *log;

	(void)state;
	log = parse(s,
	            "NVRM: Xid (PCI:0000:07:00): 79, before the reset\n"
	            "NVRM: Xid (PCI:0000:0F:00): 13, other GPU\n"
	            "NVRM: GPU at PCI:0000:07:00: GPU-00000000-1111-2222-3333-444444444444\n",
	            1);
	expect(log, 0, 1, 13, "other GPU");
	assert_int_equal(gpuctl_xid_log_resets(log, 0), 1);
	assert_int_equal(gpuctl_xid_log_resets(log, 1), 0);
	gpuctl_xid_log_free(log);
	/* the XID the init line announces counts */
	log = parse(s,
	            "NVRM: Xid (PCI:0000:07:00): 79, before\n"
	            "NVRM: GPU at PCI:0000:07:00: GPU-00000000-1111-2222-3333-444444444444\n"
	            "NVRM: Xid (PCI:0000:07:00): 48, after\n",
	            1);
	expect(log, 0, 0, 48, "after");
	assert_int_equal(gpuctl_xid_log_resets(log, 0), 1);
	gpuctl_xid_log_free(log);
	/* NVSentinel's line, behind a syslog prefix, any case; a failed reset is no reset */
	log = parse(s,
	            "NVRM: Xid (PCI:0000:0F:00): 79, x\n"
	            "Dec  1 12:00:00 host nvsentinel-gpu-reset: GPU reset executed: "
	            "gpu-00000001-1111-2222-3333-444444444444, success: true\n"
	            "NVRM: Xid (PCI:0000:07:00): 79, y\n"
	            "GPU reset executed: GPU-00000000-1111-2222-3333-444444444444, success: false\n"
	            "GPU reset executed: GPU-deadbeef-1111-2222-3333-444444444444\n"
	            "GPU reset executed: GPU-00000000-1111-2222-3333-4444\n",
	            1);
	expect(log, 0, 0, 79, "y");
	assert_int_equal(gpuctl_xid_log_resets(log, 1), 1);
	assert_int_equal(gpuctl_xid_log_resets(log, 0), 0);
	/* forget: the caller's own record of a reset; a second reset counts again */
	assert_int_equal(gpuctl_xid_log_forget(log, 0), 0);
	assert_int_equal(gpuctl_xid_log_count(log), 0);
	assert_int_equal(gpuctl_xid_log_forget(log, 0), 0);
	assert_int_equal(gpuctl_xid_log_resets(log, 0), 2);
	assert_int_equal(gpuctl_xid_log_forget(NULL, 0), -EINVAL);
	gpuctl_xid_log_free(log);
	gpuctl_snapshot_free(s);
}

static void test_kmsg_read(void **state)
{
	struct gpuctl_snapshot *s = healthy(2);
	struct gpuctl_xid_log *log = NULL;
	struct gpuctl_ctx *ctx = NULL;
	char path[] = "/tmp/test-health-kmsg.XXXXXX";
	const char text[] = "6,1,2,-;NVRM: Xid (PCI:0000:0F:00): 94, pid=9, contained\n";
	int fd;

	(void)state;
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	assert_int_equal(gpuctl_xid_log_new(&log), 0);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
	close(fd);
	assert_int_equal(gpuctl_xid_log_read(ctx, log, s, path), 1);
	expect(log, 0, 1, 94, "pid=9, contained");
	unlink(path);
	assert_int_equal(gpuctl_xid_log_read(ctx, log, s, path), -ENOENT);
	assert_non_null(strstr(gpuctl_errmsg(ctx), path));
	assert_int_equal(gpuctl_xid_log_count(log), 1);
	gpuctl_xid_log_free(log);
	gpuctl_ctx_free(ctx);
	gpuctl_snapshot_free(s);
}

/* The state file: what is written is read back by UUID (another machine order), the sample
 * becomes `prev` for the rate rules, XIDs already known are not added twice, stale or untrusted
 * files are not used. */
static void test_state_round_trip(void **state)
{
	char dir[] = "/tmp/test-health-state.XXXXXX", path[64];
	struct gpuctl_snapshot *s = healthy(3), *t = healthy(3), *prev = NULL;
	struct gpuctl_xid_log *xids = NULL, *got = NULL;
	struct gpuctl_ctx *ctx = NULL;
	double age = -1;
	size_t gpu;
	unsigned xid;
	const char *text;

	(void)state;
	assert_non_null(mkdtemp(dir));
	(void)snprintf(path, sizeof(path), "%s/state", dir);
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	assert_int_equal(snapshot_set_int(s, 1, GPUCTL_F_PCIE_REPLAY, 77), 0);
	assert_int_equal(snapshot_set_int(s, 2, GPUCTL_F_RETIRED_DBE, 16), 0);
	s->gpus[2].has_nvlink_replay = s->gpus[2].has_nvlink_recovery = true;
	s->gpus[2].has_nvlink_crc = true;
	s->gpus[2].nvlink_replay = 3;
	s->gpus[2].nvlink_crc = 9;
	assert_int_equal(gpuctl_xid_log_new(&xids), 0);
	assert_int_equal(gpuctl_xid_log_add(xids, 1, 79, "fallen off"), 0);
	assert_int_equal(gpuctl_xid_log_add(xids, 2, 13, NULL), 0);
	assert_int_equal(gpuctl_health_state_write(ctx, path, s, xids), 0);

	/* the reader's snapshot has the GPUs in another order: 0<->2 */
	assert_int_equal(
	        snapshot_set_str(t, 0, GPUCTL_F_UUID, gpuctl_gpu_str(&s->gpus[2], GPUCTL_F_UUID)),
	        0);
	assert_int_equal(
	        snapshot_set_str(t, 2, GPUCTL_F_UUID, gpuctl_gpu_str(&s->gpus[0], GPUCTL_F_UUID)),
	        0);
	assert_int_equal(gpuctl_xid_log_new(&got), 0);
	assert_int_equal(gpuctl_xid_log_add(got, 1, 79, "from the kernel log"), 0);
	assert_int_equal(gpuctl_health_state_read(ctx, path, t, got, &prev, &age), 0);
	assert_int_equal(gpuctl_xid_log_count(got), 2); /* 79 on GPU 1 was known already */
	assert_int_equal(gpuctl_xid_log_get(got, 1, &gpu, &xid, &text), 0);
	assert_int_equal(gpu, 0);
	assert_int_equal(xid, 13);
	/* a sample written this second has no age yet: no prev */
	if (prev) {
		assert_true(age > 0);
		gpuctl_snapshot_free(prev);
		prev = NULL;
	}
	gpuctl_xid_log_free(got);

	/* untrusted: writable by others */
	assert_int_equal(chmod(path, 0666), 0);
	assert_int_equal(gpuctl_xid_log_new(&got), 0);
	assert_int_equal(gpuctl_health_state_read(ctx, path, t, got, &prev, &age), -EPERM);
	assert_int_equal(gpuctl_xid_log_count(got), 0);
	gpuctl_xid_log_free(got);
	unlink(path);
	assert_int_equal(gpuctl_xid_log_new(&got), 0);
	assert_int_equal(gpuctl_health_state_read(ctx, path, t, got, &prev, &age), -ENOENT);
	gpuctl_xid_log_free(got);
	rmdir(dir);
	gpuctl_xid_log_free(xids);
	gpuctl_ctx_free(ctx);
	gpuctl_snapshot_free(s);
	gpuctl_snapshot_free(t);
}

/* A written state file cut anywhere, or with any one byte turned into a NUL or any one bit
 * flipped, is -EBADMSG and adds nothing: a FAIL XID is never silently lost, nor a "79" read as
 * "7" (issue 24, finding 8). */
static void test_state_damage(void **state)
{
	char dir[] = "/tmp/test-health-damage.XXXXXX", path[64], *good;
	struct gpuctl_snapshot *s = healthy(3), *prev = NULL;
	struct gpuctl_xid_log *xids = NULL, *got = NULL;
	struct gpuctl_ctx *ctx = NULL;
	struct stat st;
	double age = -1;
	size_t len;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	(void)snprintf(path, sizeof(path), "%s/state", dir);
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	assert_int_equal(snapshot_set_int(s, 1, GPUCTL_F_PCIE_REPLAY, 77), 0);
	assert_int_equal(gpuctl_xid_log_new(&xids), 0);
	assert_int_equal(gpuctl_xid_log_add(xids, 1, 79, "fallen off the bus"), 0);
	assert_int_equal(gpuctl_health_state_write(ctx, path, s, xids), 0);
	assert_int_equal(stat(path, &st), 0);
	len = (size_t)st.st_size;
	good = malloc(len);
	assert_non_null(good);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_int_equal(fread(good, 1, len, f), len);
	fclose(f);

	/* the whole file reads, with its XID */
	assert_int_equal(gpuctl_xid_log_new(&got), 0);
	assert_int_equal(gpuctl_health_state_read(ctx, path, s, got, &prev, &age), 0);
	assert_int_equal(gpuctl_xid_log_count(got), 1);
	gpuctl_snapshot_free(prev);
	prev = NULL;
	gpuctl_xid_log_free(got);

	for (size_t k = 0; k < 3 * len + 8; k++) {
		char *bytes = malloc(len);
		size_t n = len, at = k % len;
		int r;

		assert_non_null(bytes);
		memcpy(bytes, good, len);
		if (k < len)
			n = k; /* cut after k bytes */
		else if (k < 2 * len)
			bytes[at] = '\0';
		else if (k < 3 * len)
			bytes[at] ^= (char)(1u << (k % 8));
		else
			bytes[len - 1 - (k - 3 * len)] ^= 0x20; /* the end line's case, digits */
		if (n == len && memcmp(bytes, good, len) == 0) {
			free(bytes);
			continue; /* a NUL put over a NUL: no change */
		}
		f = fopen(path, "w");
		assert_non_null(f);
		assert_int_equal(fwrite(bytes, 1, n, f), n);
		fclose(f);
		free(bytes);
		assert_int_equal(gpuctl_xid_log_new(&got), 0);
		r = gpuctl_health_state_read(ctx, path, s, got, &prev, &age);
		if (r != -EBADMSG || gpuctl_xid_log_count(got) != 0)
			fail_msg("damage %zu (%zu bytes kept of %zu): read %d, %zu XIDs: %s", k, n,
			         len, r, gpuctl_xid_log_count(got), gpuctl_errmsg(ctx));
		assert_non_null(strstr(gpuctl_errmsg(ctx), path));
		gpuctl_xid_log_free(got);
	}
	free(good);
	unlink(path);
	rmdir(dir);
	gpuctl_xid_log_free(xids);
	gpuctl_ctx_free(ctx);
	gpuctl_snapshot_free(s);
}

/* The parser (health_state_parse, internal): the sample feeds the rate rules by UUID. */
int health_state_parse(const char *text, size_t len, const char *boot,
                       const struct gpuctl_snapshot *snap, struct gpuctl_xid_log *xids,
                       struct gpuctl_snapshot **ret_prev, double *ret_time, char *why,
                       size_t wsize);
uint32_t health_state_crc32(const char *p, size_t n);

static void test_state_parse(void **state)
{
	struct gpuctl_snapshot *s = healthy(2), *prev = NULL;
	struct gpuctl_xid_log *xids = NULL;
	struct gpuctl_health_opts opts = GPUCTL_HEALTH_OPTS_INIT;
	struct gpuctl_health_report *rep;
	const char *u1 = gpuctl_gpu_str(&s->gpus[1], GPUCTL_F_UUID);
	char text[512], why[160];
	double t = 0;

	(void)state;
	/* format 1, as the gpuctl before format 2 wrote it (no end line) */
	(void)snprintf(text, sizeof(text),
	               "gpuctl-health-state 1\nboot B\ntime 1000.000\n"
	               "gpu %s replay 100 dbe 16 nvlink 1 2 3\n",
	               u1);
	assert_int_equal(gpuctl_xid_log_new(&xids), 0);
	assert_int_equal(
	        health_state_parse(text, strlen(text), "B", s, xids, &prev, &t, why, sizeof(why)),
	        0);
	assert_non_null(prev);
	assert_true(t == 1000.0);
	assert_int_equal(gpuctl_snapshot_gpu_count(prev), 1);
	/* now: 200 replays more in 60 s on Gen4 x16 (budget 16), 17 DBE pages */
	assert_int_equal(snapshot_set_int(s, 1, GPUCTL_F_PCIE_REPLAY, 300), 0);
	assert_int_equal(snapshot_set_int(s, 1, GPUCTL_F_RETIRED_DBE, 17), 0);
	opts.prev = prev;
	opts.prev_age_s = 60;
	rep = check_opts(s, xids, &opts);
	assert_non_null(find(rep, 1, "pcie-replay"));
	assert_int_equal(find(rep, 1, "retired-pages")->severity, GPUCTL_HEALTH_FAIL);
	gpuctl_health_report_free(rep);
	gpuctl_snapshot_free(prev);
	prev = NULL;
	/* another boot: nothing */
	assert_int_equal(
	        health_state_parse(text, strlen(text), "C", s, xids, &prev, &t, why, sizeof(why)),
	        0);
	assert_null(prev);
	gpuctl_xid_log_free(xids);
	gpuctl_snapshot_free(s);
}

/* What is not a whole, well-formed state file is -EBADMSG, says why and adds nothing. */
static void test_state_strict(void **state)
{
	struct gpuctl_snapshot *s = healthy(2), *prev = NULL;
	struct gpuctl_xid_log *xids = NULL;
	const char *u1 = gpuctl_gpu_str(&s->gpus[1], GPUCTL_F_UUID);
	char head[160], text[1400], why[160];
	double t = 0;
	struct {
		const char *records; /* after the head (format 1); @ stands for GPU 1's UUID */
		const char *why;     /* in the reason */
	} bad[] = {
	        {"garbage\n", "line 4: malformed unknown record"},
	        {"xid @ 79 x\nxid @ 7", "no newline"},
	        {"gpu @ replay x dbe 1 nvlink - - -\n", "line 4: malformed gpu record"},
	        {"gpu @ replay 1 dbe 1 nvlink - - -\ngpu @ replay 1 dbe 1 nvlink - - -\n",
	         "line 5: malformed gpu record"},
	        {"xid @ 79\t\n", "line 4: a control"},
	        {"xid @ 7a\n", "line 4: malformed xid record"},
	        {"xid  79\n", "line 4: malformed xid record"},
	        {"end 00000000\n", "line 4: malformed unknown record"},
	};

	(void)state;
	(void)snprintf(head, sizeof(head), "gpuctl-health-state 1\nboot B\ntime 5\n");
	assert_int_equal(gpuctl_xid_log_new(&xids), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t n = strlen(head);

		memcpy(text, head, n + 1);
		for (const char *c = bad[i].records; *c; c++) {
			const char *add = *c == '@' ? u1 : (char[]){*c, '\0'};
			assert_true(n + strlen(add) < sizeof(text));
			memcpy(text + n, add, strlen(add) + 1);
			n += strlen(add);
		}
		assert_int_equal(health_state_parse(text, strlen(text), "B", s, xids, &prev, &t,
		                                    why, sizeof(why)),
		                 -EBADMSG);
		if (!strstr(why, bad[i].why))
			fail_msg("case %zu: '%s' does not say '%s'", i, why, bad[i].why);
	}
	/* whole-file faults */
	static const struct {
		const char *text, *why;
	} files[] = {
	        {"", "empty"},
	        {"gpuctl-health-state 3\nboot B\ntime 5\n", "format '3'"},
	        {"hello\n", "not a health state file"},
	        {"gpuctl-health-state 1\nboot B\n", "no time line"},
	        {"gpuctl-health-state 1\ntime 5\nboot B\n", "line 2: not 'boot ID'"},
	        {"gpuctl-health-state 1\nboot B\ntime 5x\n", "line 3: not 'time SECONDS'"},
	        {"gpuctl-health-state 1\nboot B\ntime inf\n", "line 3"},
	        {"gpuctl-health-state 2\nboot B\ntime 5\n", "no end line"},
	        {"gpuctl-health-state 2\nboot B\ntime 5\nend 0000000g\n", "malformed end line"},
	        {"gpuctl-health-state 2\nboot B\ntime 5\nend 00000000\n", "checksum mismatch"},
	};
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		assert_int_equal(health_state_parse(files[i].text, strlen(files[i].text), "B", s,
		                                    xids, &prev, &t, why, sizeof(why)),
		                 -EBADMSG);
		if (!strstr(why, files[i].why))
			fail_msg("file %zu: '%s' does not say '%s'", i, why, files[i].why);
	}
	/* a long line */
	int n = snprintf(text, sizeof(text), "%sxid %s 79 ", head, u1);
	memset(text + n, 'x', sizeof(text) - (size_t)n - 2);
	text[sizeof(text) - 2] = '\n';
	text[sizeof(text) - 1] = '\0';
	assert_int_equal(
	        health_state_parse(text, strlen(text), "B", s, xids, &prev, &t, why, sizeof(why)),
	        -EBADMSG);
	assert_non_null(strstr(why, "line 4: longer than"));
	assert_int_equal(gpuctl_xid_log_count(xids), 0); /* nothing of any of them */

	/* format 2 with its end line; a code the writer never writes is skipped, not an error */
	n = snprintf(text, sizeof(text),
	             "gpuctl-health-state 2\nboot B\ntime 5\nxid %s 79 off\n"
	             "xid %s 123456\nxid GPU-other 48\n",
	             u1, u1);
	(void)snprintf(text + n, sizeof(text) - (size_t)n, "end %08x\n",
	               (unsigned)health_state_crc32(text, (size_t)n));
	assert_int_equal(
	        health_state_parse(text, strlen(text), "B", s, xids, &prev, &t, why, sizeof(why)),
	        0);
	assert_null(prev); /* no gpu record */
	assert_int_equal(gpuctl_xid_log_count(xids), 1);
	gpuctl_xid_log_free(xids);
	gpuctl_snapshot_free(s);
}

/* CRC-32 (IEEE 802.3): the standard check value of "123456789" is 0xCBF43926. */
static void test_state_crc32(void **state)
{
	(void)state;
	assert_int_equal(health_state_crc32("123456789", 9), 0xcbf43926u);
	assert_int_equal(health_state_crc32("", 0), 0);
}

/* An unusable state file makes every GPU that is not lost WARN "state", naming the file. */
static void test_state_unreadable_warns(void **state)
{
	struct gpuctl_snapshot *s = healthy(3);
	struct gpuctl_health_opts opts = GPUCTL_HEALTH_OPTS_INIT;
	struct gpuctl_health_report *rep;
	const struct gpuctl_health_finding *f;

	(void)state;
	s->gpus[2].lost = true;
	opts.state_error = "health state '/run/x.state': checksum mismatch";
	rep = check_opts(s, NULL, &opts);
	for (size_t g = 0; g < 2; g++) {
		f = find(rep, g, "state");
		assert_non_null(f);
		assert_int_equal(f->severity, GPUCTL_HEALTH_WARN);
		assert_non_null(strstr(f->message, "state unreadable"));
		assert_non_null(strstr(f->message, "'/run/x.state'"));
		assert_int_equal(gpuctl_health_verdict(rep, g), GPUCTL_HEALTH_WARN);
	}
	assert_null(find(rep, 2, "state"));
	gpuctl_health_report_free(rep);
	/* a caller built against the header before state_error: no such finding */
	opts.struct_size = offsetof(struct gpuctl_health_opts, state_error);
	rep = check_opts(s, NULL, &opts);
	assert_null(find(rep, 0, "state"));
	gpuctl_health_report_free(rep);
	gpuctl_snapshot_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_healthy),
	        cmocka_unit_test(test_names),
	        cmocka_unit_test(test_ecc_dbe),
	        cmocka_unit_test(test_remap),
	        cmocka_unit_test(test_strict),
	        cmocka_unit_test(test_retired_pages),
	        cmocka_unit_test(test_unsupported_no_finding),
	        cmocka_unit_test(test_temperature),
	        cmocka_unit_test(test_clocks),
	        cmocka_unit_test(test_recovery_action),
	        cmocka_unit_test(test_pcie_width),
	        cmocka_unit_test(test_pcie_replay),
	        cmocka_unit_test(test_replay_needs_prev),
	        cmocka_unit_test(test_nvlink_switch),
	        cmocka_unit_test(test_nvlink_bridges_and_mig),
	        cmocka_unit_test(test_nvlink_errors),
	        cmocka_unit_test(test_nvlink_errors_each),
	        cmocka_unit_test(test_lost_and_nvml_errors),
	        cmocka_unit_test(test_order_and_verdict),
	        cmocka_unit_test(test_bad_args),
	        cmocka_unit_test(test_probe),
	        cmocka_unit_test(test_probe_struct_size),
	        cmocka_unit_test(test_xid_classes),
	        cmocka_unit_test(test_xid_nvlink5_decode),
	        cmocka_unit_test(test_xid_nvlink5_worst_occurrence),
	        cmocka_unit_test(test_xid_info_struct_size),
	        cmocka_unit_test(test_xid_aggregation),
	        cmocka_unit_test(test_kmsg_forms),
	        cmocka_unit_test(test_kmsg_malformed),
	        cmocka_unit_test(test_kmsg_driver_reload_and_off_bus),
	        cmocka_unit_test(test_kmsg_gpu_reset),
	        cmocka_unit_test(test_kmsg_read),
	        cmocka_unit_test(test_state_round_trip),
	        cmocka_unit_test(test_state_damage),
	        cmocka_unit_test(test_state_parse),
	        cmocka_unit_test(test_state_strict),
	        cmocka_unit_test(test_state_crc32),
	        cmocka_unit_test(test_state_unreadable_warns),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
