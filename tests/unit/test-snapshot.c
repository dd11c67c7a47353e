// SPDX-License-Identifier: MIT
/*
 * test-snapshot.c: the snapshot model on synthetic snapshots (accessors, valid bits, argument
 * checks), then whole snapshots read from the NVML simulator over the fixtures in
 * tests/unit/fixtures/lib/: values, topology, MIG, and that unavailable facts are unavailable
 * (and logged once), not zero.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "gpuctl/gpuctl.h"
#include "snapshot-internal.h"
#include "test-sim.h"

#define MIB (1024 * 1024LL)

static void test_empty_fields_unavailable(void **state)
{
	struct gpuctl_snapshot *s = snapshot_new_empty(2, GPUCTL_SNAP_BASIC);
	const struct gpuctl_gpu *g;
	int64_t v = 42;
	int cuda = 7;

	(void)state;
	assert_non_null(s);
	assert_int_equal(gpuctl_snapshot_gpu_count(s), 2);
	assert_int_equal(gpuctl_snapshot_flags(s), GPUCTL_SNAP_BASIC);
	assert_null(gpuctl_snapshot_driver_version(s));
	assert_int_equal(gpuctl_snapshot_cuda_version(s, &cuda), -ENODATA);
	assert_int_equal(cuda, 7);
	g = gpuctl_snapshot_gpu(s, 1);
	assert_non_null(g);
	assert_null(gpuctl_snapshot_gpu(s, 2));
	assert_int_equal(gpuctl_gpu_index(g), 1);
	assert_int_equal(gpuctl_gpu_int(g, GPUCTL_F_INDEX, &v), 0);
	assert_int_equal(v, 1);
	for (int f = 0; f < GPUCTL__F_COUNT; f++) {
		if (f == GPUCTL_F_INDEX)
			continue;
		if (gpuctl_field_info(f)->type == GPUCTL_FT_INT)
			assert_int_equal(gpuctl_gpu_int(g, f, &v), -ENODATA);
		else
			assert_null(gpuctl_gpu_str(g, f));
	}
	assert_int_equal(v, 1); /* untouched on failure */
	assert_int_equal(gpuctl_gpu_int(g, GPUCTL_F_UUID, &v), -EINVAL);
	assert_int_equal(gpuctl_gpu_int(g, GPUCTL__F_COUNT, &v), -EINVAL);
	assert_null(gpuctl_gpu_str(g, GPUCTL_F_MEMORY_USED));
	assert_false(gpuctl_gpu_lost(g));
	assert_int_equal(gpuctl_gpu_mig_count(g), 0);
	assert_null(gpuctl_gpu_mig(g, 0));
	assert_int_equal(gpuctl_gpu_proc_count(g), 0);
	assert_null(gpuctl_gpu_proc(g, 0));
	gpuctl_snapshot_free(s);
	gpuctl_snapshot_free(NULL);
}

static void test_setters(void **state)
{
	struct gpuctl_snapshot *s = snapshot_new_empty(1, GPUCTL_SNAP_ALL);
	const struct gpuctl_gpu *g;
	struct gpuctl_mig *m;
	struct gpuctl_proc *p;
	int64_t v;
	uint32_t a, b;
	int cuda;

	(void)state;
	assert_non_null(s);
	assert_int_equal(snapshot_set_int(s, 0, GPUCTL_F_MEMORY_USED, 5 * MIB), 0);
	assert_int_equal(snapshot_set_int(s, 0, GPUCTL_F_NAME, 1), -EINVAL);
	assert_int_equal(snapshot_set_int(s, 1, GPUCTL_F_MEMORY_USED, 1), -EINVAL);
	assert_int_equal(snapshot_set_str(s, 0, GPUCTL_F_NAME, "NVIDIA H100 80GB HBM3"), 0);
	assert_int_equal(snapshot_set_str(s, 0, GPUCTL_F_NAME, "NVIDIA H200"), 0); /* replaces */
	assert_int_equal(snapshot_set_str(s, 0, GPUCTL_F_TEMP, "x"), -EINVAL);
	assert_int_equal(snapshot_set_system(s, "550.54.15", NULL), 0);
	snapshot_set_cuda_version(s, 12040);
	snapshot_set_lost(s, 0);
	m = snapshot_add_mig(s, 0);
	assert_non_null(m);
	assert_int_equal(mig_set_strs(m, "MIG-abc", "1g.10gb"), 0);
	mig_set_int(m, GPUCTL_MIG_GI, 9);
	p = snapshot_add_proc(s, 0, 4242);
	assert_non_null(p);
	assert_int_equal(proc_set_strs(p, "alice", NULL), 0);

	g = gpuctl_snapshot_gpu(s, 0);
	assert_int_equal(gpuctl_gpu_int(g, GPUCTL_F_MEMORY_USED, &v), 0);
	assert_int_equal(v, 5 * MIB);
	assert_string_equal(gpuctl_gpu_str(g, GPUCTL_F_NAME), "NVIDIA H200");
	assert_string_equal(gpuctl_snapshot_driver_version(s), "550.54.15");
	assert_null(gpuctl_snapshot_nvml_version(s));
	assert_int_equal(gpuctl_snapshot_cuda_version(s, &cuda), 0);
	assert_int_equal(cuda, 12040);
	assert_true(gpuctl_gpu_lost(g));
	assert_int_equal(gpuctl_gpu_mig_count(g), 1);
	assert_string_equal(gpuctl_mig_uuid(gpuctl_gpu_mig(g, 0)), "MIG-abc");
	assert_string_equal(gpuctl_mig_profile(gpuctl_gpu_mig(g, 0)), "1g.10gb");
	assert_int_equal(gpuctl_mig_int(gpuctl_gpu_mig(g, 0), GPUCTL_MIG_GI, &v), 0);
	assert_int_equal(v, 9);
	assert_int_equal(gpuctl_mig_int(gpuctl_gpu_mig(g, 0), GPUCTL_MIG_CI, &v), -ENODATA);
	assert_int_equal(gpuctl_mig_int(gpuctl_gpu_mig(g, 0), 99, &v), -EINVAL);
	assert_int_equal(gpuctl_proc_pid(gpuctl_gpu_proc(g, 0)), 4242);
	assert_string_equal(gpuctl_proc_user(gpuctl_gpu_proc(g, 0)), "alice");
	assert_null(gpuctl_proc_command(gpuctl_gpu_proc(g, 0)));
	assert_int_equal(gpuctl_proc_used_memory(gpuctl_gpu_proc(g, 0), &v), -ENODATA);
	assert_int_equal(gpuctl_proc_uid(gpuctl_gpu_proc(g, 0), &a), -ENODATA);
	assert_int_equal(gpuctl_proc_mig(gpuctl_gpu_proc(g, 0), &a, &b), -ENODATA);
	gpuctl_snapshot_free(s);
}

static void test_null_safety(void **state)
{
	int64_t v;
	uint32_t u;

	(void)state;
	assert_int_equal(gpuctl_snapshot_gpu_count(NULL), 0);
	assert_null(gpuctl_snapshot_gpu(NULL, 0));
	assert_int_equal(gpuctl_gpu_int(NULL, GPUCTL_F_INDEX, &v), -EINVAL);
	assert_null(gpuctl_gpu_str(NULL, GPUCTL_F_UUID));
	assert_false(gpuctl_gpu_lost(NULL));
	assert_null(gpuctl_mig_uuid(NULL));
	assert_int_equal(gpuctl_proc_uid(NULL, &u), -EINVAL);
	assert_int_equal(gpuctl_snapshot_take(NULL, 0, NULL), -EINVAL);
	assert_string_equal(gpuctl_errmsg(NULL), "");
	gpuctl_ctx_free(NULL);
}

static void test_bad_flags(void **state)
{
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_snapshot *snap = NULL;

	(void)state;
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	assert_int_equal(gpuctl_snapshot_take(ctx, 1u << 30, &snap), -EINVAL);
	assert_non_null(strstr(gpuctl_errmsg(ctx), "unknown snapshot flags"));
	gpuctl_ctx_free(ctx);
}

/* ---- against the simulator ---- */

struct simfix {
	struct sim sim;
	struct gpuctl_ctx *ctx;
	struct gpuctl_snapshot *snap;
	struct log_capture logs;
};

static int sim_take(struct simfix *f, const char *fixture, unsigned flags)
{
	memset(f, 0, sizeof(*f));
	if (sim_start(&f->sim, "", fixture) < 0)
		return -ENOENT;
	assert_int_equal(gpuctl_ctx_new(&f->ctx), 0);
	gpuctl_ctx_set_log(f->ctx, log_capture_fn, &f->logs);
	return gpuctl_snapshot_take(f->ctx, flags, &f->snap);
}

static void sim_done(struct simfix *f)
{
	if (getenv("GPUCTL_TEST_VERBOSE"))
		log_capture_dump(&f->logs);
	log_capture_assert_unique(&f->logs);
	gpuctl_snapshot_free(f->snap);
	gpuctl_ctx_free(f->ctx);
	log_capture_free(&f->logs);
	sim_stop(&f->sim);
}

static int64_t get_int(const struct gpuctl_snapshot *s, size_t i, enum gpuctl_field f)
{
	int64_t v = -1;

	if (gpuctl_gpu_int(gpuctl_snapshot_gpu(s, i), f, &v) < 0)
		fail_msg("GPU %zu field %s unavailable", i, gpuctl_field_info(f)->key);
	return v;
}

static bool has_int(const struct gpuctl_snapshot *s, size_t i, enum gpuctl_field f)
{
	int64_t v;

	return gpuctl_gpu_int(gpuctl_snapshot_gpu(s, i), f, &v) == 0;
}

static struct gpuctl_link link_of(const struct gpuctl_snapshot *s, size_t a, size_t b)
{
	struct gpuctl_link l = GPUCTL_LINK_INIT;

	assert_int_equal(gpuctl_snapshot_link(s, a, b, &l), 0);
	return l;
}

static void test_sim_mesh(void **state)
{
	struct simfix f;
	const struct gpuctl_gpu *g;
	struct gpuctl_link l = GPUCTL_LINK_INIT;
	int cuda;

	(void)state;
	if (sim_take(&f, "lib-mesh.json", GPUCTL_SNAP_ALL) == -ENOENT)
		skip();
	assert_non_null(f.snap);
	assert_string_equal(gpuctl_snapshot_driver_version(f.snap), "535.161.08");
	assert_string_equal(gpuctl_snapshot_nvml_version(f.snap), "12.535.161.08");
	assert_int_equal(gpuctl_snapshot_cuda_version(f.snap, &cuda), 0);
	assert_int_equal(cuda, 12020);
	assert_int_equal(gpuctl_snapshot_gpu_count(f.snap), 4);

	g = gpuctl_snapshot_gpu(f.snap, 1);
	assert_string_equal(gpuctl_gpu_str(g, GPUCTL_F_UUID),
	                    "GPU-0aa00001-0000-4000-8000-000000000001");
	assert_string_equal(gpuctl_gpu_str(g, GPUCTL_F_PCI_BUS_ID), "00000000:07:00.0");
	assert_string_equal(gpuctl_gpu_str(g, GPUCTL_F_NAME), "Tesla V100-SXM2-32GB");
	assert_string_equal(gpuctl_gpu_str(g, GPUCTL_F_BRAND), "Tesla");
	assert_string_equal(gpuctl_gpu_str(g, GPUCTL_F_ARCHITECTURE), "Volta");
	assert_string_equal(gpuctl_gpu_str(g, GPUCTL_F_COMPUTE_CAP), "7.0");
	assert_string_equal(gpuctl_gpu_str(g, GPUCTL_F_SERIAL), "0323017000002");
	assert_string_equal(gpuctl_gpu_str(g, GPUCTL_F_CPU_AFFINITY), "0-19,40-59");
	assert_int_equal(get_int(f.snap, 1, GPUCTL_F_PCI_DEVICE_ID), 0x1DB510DE);
	assert_int_equal(get_int(f.snap, 1, GPUCTL_F_MINOR_NUMBER), 1);
	assert_int_equal(get_int(f.snap, 1, GPUCTL_F_MEMORY_TOTAL), 32768 * MIB);
	assert_int_equal(get_int(f.snap, 0, GPUCTL_F_MEMORY_USED), 1024 * MIB);
	assert_int_equal(get_int(f.snap, 0, GPUCTL_F_UTIL_GPU), 10);
	assert_int_equal(get_int(f.snap, 1, GPUCTL_F_TEMP_SLOWDOWN), 87);
	assert_int_equal(get_int(f.snap, 1, GPUCTL_F_POWER_LIMIT), 300000);
	assert_int_equal(get_int(f.snap, 1, GPUCTL_F_CLOCK_SM_MAX), 1530);
	assert_int_equal(get_int(f.snap, 1, GPUCTL_F_PCIE_GEN_MAX), 3);
	assert_int_equal(get_int(f.snap, 1, GPUCTL_F_PCIE_WIDTH), 16);
	assert_int_equal(get_int(f.snap, 1, GPUCTL_F_ECC_MODE), 1);
	assert_int_equal(get_int(f.snap, 1, GPUCTL_F_ECC_VOL_CORRECTED), 5);
	assert_int_equal(get_int(f.snap, 1, GPUCTL_F_ECC_AGG_UNCORRECTED), 1);
	assert_int_equal(get_int(f.snap, 1, GPUCTL_F_RETIRED_SBE), 2);
	assert_int_equal(get_int(f.snap, 1, GPUCTL_F_RETIRED_DBE), 1);
	assert_int_equal(get_int(f.snap, 1, GPUCTL_F_RETIRED_PENDING), 1);
	assert_int_equal(get_int(f.snap, 2, GPUCTL_F_NUMA_NODE), 1);
	assert_false(has_int(f.snap, 1, GPUCTL_F_MIG_MODE)); /* no MIG on V100: NOT_SUPPORTED */
	/* Volta: no row remapping, no MIG, no GPU NUMA node: unavailable, not 0 */
	assert_false(has_int(f.snap, 1, GPUCTL_F_REMAP_PENDING));
	assert_false(has_int(f.snap, 1, GPUCTL_F_GPU_NUMA_NODE));
	assert_int_equal(gpuctl_gpu_mig_count(g), 0);

	/* direct NVLinks */
	l = link_of(f.snap, 0, 1);
	assert_int_equal(l.nvlinks, 2);
	assert_false(l.nvswitch);
	assert_int_equal(l.level, GPUCTL_TOPO_SINGLE);
	assert_int_equal(l.p2p, GPUCTL_P2P_OK);
	assert_true(l.bandwidth == 50.0);
	l = link_of(f.snap, 2, 0);
	assert_int_equal(l.nvlinks, 1);
	assert_int_equal(l.level, GPUCTL_TOPO_SYSTEM);
	/* no NVLink, across sockets, no P2P (GPU 3) */
	l = link_of(f.snap, 0, 3);
	assert_int_equal(l.nvlinks, 0);
	assert_int_equal(l.level, GPUCTL_TOPO_SYSTEM);
	assert_int_equal(l.p2p, GPUCTL_P2P_NOT_SUPPORTED);
	assert_true(l.bandwidth > 0.0 && l.bandwidth < 12.0);
	l = link_of(f.snap, 3, 2);
	assert_int_equal(l.nvlinks, 2);

	/* remapped rows are not asked for on Volta, so nothing is logged about them */
	assert_int_equal(log_capture_count(&f.logs, "nvmlDeviceGetRemappedRows"), 0);
	/* the GPU NUMA node is: once, for all four GPUs */
	assert_int_equal(log_capture_count(&f.logs, "nvmlDeviceGetNumaNodeId"), 1);
	sim_done(&f);
}

static void test_sim_switch_mig(void **state)
{
	struct simfix f;
	const struct gpuctl_gpu *g;
	const struct gpuctl_mig *m;
	struct gpuctl_link l = GPUCTL_LINK_INIT;
	int64_t v;

	(void)state;
	if (sim_take(&f, "lib-switch.json", GPUCTL_SNAP_ALL) == -ENOENT)
		skip();
	assert_non_null(f.snap);
	l = link_of(f.snap, 0, 1);
	assert_true(l.nvswitch);
	assert_int_equal(l.nvlinks, 12);
	assert_true(l.bandwidth == 300.0);
	/* GPU 2 is in MIG mode: its NVLinks are down */
	l = link_of(f.snap, 0, 2);
	assert_false(l.nvswitch);
	assert_int_equal(l.nvlinks, 0);

	assert_int_equal(get_int(f.snap, 0, GPUCTL_F_REMAP_CORRECTABLE), 1);
	assert_int_equal(get_int(f.snap, 0, GPUCTL_F_REMAP_PENDING), 0);
	assert_false(has_int(f.snap, 0, GPUCTL_F_RETIRED_SBE)); /* Ampere: not asked */
	assert_int_equal(get_int(f.snap, 2, GPUCTL_F_MIG_MODE), 1);
	assert_false(has_int(f.snap, 2, GPUCTL_F_UTIL_GPU));
	assert_false(has_int(f.snap, 2, GPUCTL_F_REMAP_PENDING));

	g = gpuctl_snapshot_gpu(f.snap, 2);
	assert_int_equal(gpuctl_gpu_mig_count(g), 2);
	m = gpuctl_gpu_mig(g, 0);
	assert_string_equal(gpuctl_mig_uuid(m), "MIG-2dd00000-0000-5000-8000-000000000000");
	assert_string_equal(gpuctl_mig_profile(m), "3g.40gb");
	assert_int_equal(gpuctl_mig_int(m, GPUCTL_MIG_GI, &v), 0);
	assert_int_equal(v, 1);
	assert_int_equal(gpuctl_mig_int(m, GPUCTL_MIG_MEMORY_TOTAL, &v), 0);
	assert_int_equal(v, 40192 * MIB);
	m = gpuctl_gpu_mig(g, 1);
	assert_string_equal(gpuctl_mig_profile(m), "1g.10gb");
	assert_int_equal(gpuctl_mig_int(m, GPUCTL_MIG_GI, &v), 0);
	assert_int_equal(v, 9);
	assert_int_equal(gpuctl_gpu_mig_count(gpuctl_snapshot_gpu(f.snap, 0)), 0);

	/* a refresh re-reads the MIG devices (they can be created and destroyed at any time),
	 * and carries no pair facts */
	struct gpuctl_snapshot *r = NULL;
	static const enum gpuctl_field temp[] = {GPUCTL_F_TEMP};
	assert_int_equal(gpuctl_snapshot_refresh(f.ctx, f.snap, GPUCTL_SNAP_MIG, temp, 1, &r), 0);
	g = gpuctl_snapshot_gpu(r, 2);
	assert_int_equal(gpuctl_gpu_mig_count(g), 2);
	assert_string_equal(gpuctl_mig_profile(gpuctl_gpu_mig(g, 1)), "1g.10gb");
	assert_int_equal(gpuctl_mig_int(gpuctl_gpu_mig(g, 0), GPUCTL_MIG_MEMORY_TOTAL, &v), 0);
	assert_int_equal(v, 40192 * MIB);
	assert_int_equal(gpuctl_snapshot_link(r, 0, 1, &l), -ENODATA);
	gpuctl_snapshot_free(r);
	sim_done(&f);
}

/* gpuctl_proc_mig_device: a process registered on a MIG device (by its UUID, which the
 * fixture gives GI 1 / CI 0) is on that MIG device; one on the whole GPU is on none. */
static void test_sim_proc_mig_device(void **state)
{
	struct simfix f;
	struct gpuctl_snapshot *snap = NULL;
	const struct gpuctl_gpu *g;
	char me[24], other[24];
	pid_t child;
	int on_mig = 0, on_whole = 0;

	(void)state;
	if (sim_take(&f, "lib-switch.json", GPUCTL_SNAP_BASIC) == -ENOENT)
		skip();
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		pause();
		_exit(0);
	}
	(void)snprintf(me, sizeof(me), "%ld", (long)getpid());
	(void)snprintf(other, sizeof(other), "%ld", (long)child);
	assert_int_equal(sim_nvsim(&f.sim, "proc", "add", "--pid", me, "-i",
	                           "MIG-2dd00000-0000-5000-8000-000000000000", NULL),
	                 0);
	assert_int_equal(sim_nvsim(&f.sim, "proc", "add", "--pid", other, "-i", "2", NULL), 0);
	assert_int_equal(
	        gpuctl_snapshot_take(f.ctx, GPUCTL_SNAP_PROCESSES | GPUCTL_SNAP_MIG, &snap), 0);
	g = gpuctl_snapshot_gpu(snap, 2);
	for (size_t k = 0; k < gpuctl_gpu_proc_count(g); k++) {
		const struct gpuctl_proc *p = gpuctl_gpu_proc(g, k);
		if (gpuctl_proc_pid(p) == (uint32_t)getpid()) {
			assert_int_equal(gpuctl_proc_mig_device(g, p), 0);
			on_mig++;
		} else if (gpuctl_proc_pid(p) == (uint32_t)child) {
			assert_int_equal(gpuctl_proc_mig_device(g, p), -1);
			on_whole++;
		}
	}
	assert_int_equal(on_mig, 1);
	assert_int_equal(on_whole, 1);
	assert_int_equal(gpuctl_proc_mig_device(NULL, NULL), -1);
	kill(child, SIGKILL);
	(void)waitpid(child, NULL, 0);
	gpuctl_snapshot_free(snap);
	sim_done(&f);
}

static void test_sim_flags_limit_reads(void **state)
{
	struct simfix f;
	struct gpuctl_link l = GPUCTL_LINK_INIT;

	(void)state;
	if (sim_take(&f, "lib-switch.json", GPUCTL_SNAP_BASIC) == -ENOENT)
		skip();
	assert_non_null(f.snap);
	assert_int_equal(gpuctl_snapshot_link(f.snap, 0, 1, &l), -ENODATA);
	assert_false(has_int(f.snap, 0, GPUCTL_F_REMAP_CORRECTABLE));
	assert_false(has_int(f.snap, 0, GPUCTL_F_ECC_VOL_CORRECTED));
	assert_int_equal(gpuctl_gpu_mig_count(gpuctl_snapshot_gpu(f.snap, 2)), 0);
	assert_true(has_int(f.snap, 0, GPUCTL_F_MEMORY_USED));
	sim_done(&f);
}

/* Errors on one device, a lost GPU and an unsupported function, injected with nvsim. */
static void test_sim_failures(void **state)
{
	struct simfix f;
	struct gpuctl_snapshot *again = NULL;
	struct gpuctl_link l = GPUCTL_LINK_INIT;

	(void)state;
	memset(&f, 0, sizeof(f));
	if (sim_start(&f.sim, "", "lib-mesh.json") < 0)
		skip();
	assert_int_equal(
	        sim_nvsim(&f.sim, "fail", "nvmlDeviceGetTemperature", "UNKNOWN", "-i", "1", NULL),
	        0);
	assert_int_equal(
	        sim_nvsim(&f.sim, "fail", "nvmlDeviceGetPowerUsage", "NOT_SUPPORTED", NULL), 0);
	assert_int_equal(sim_nvsim(&f.sim, "set", "-i", "2", "lost=true", NULL), 0);
	assert_int_equal(gpuctl_ctx_new(&f.ctx), 0);
	gpuctl_ctx_set_log(f.ctx, log_capture_fn, &f.logs);
	assert_int_equal(gpuctl_snapshot_take(f.ctx, GPUCTL_SNAP_ALL, &f.snap), 0);

	/* the lost GPU is marked, the others are read */
	assert_true(gpuctl_gpu_lost(gpuctl_snapshot_gpu(f.snap, 2)));
	assert_false(has_int(f.snap, 2, GPUCTL_F_MEMORY_USED));
	assert_int_equal(get_int(f.snap, 2, GPUCTL_F_INDEX), 2);
	for (size_t i = 0; i < 4; i++)
		if (i != 2) {
			assert_false(gpuctl_gpu_lost(gpuctl_snapshot_gpu(f.snap, i)));
			assert_true(has_int(f.snap, i, GPUCTL_F_MEMORY_USED));
			assert_false(has_int(f.snap, i, GPUCTL_F_POWER_DRAW));
			assert_true(has_int(f.snap, i, GPUCTL_F_POWER_LIMIT));
		}
	assert_false(has_int(f.snap, 1, GPUCTL_F_TEMP));
	assert_true(has_int(f.snap, 0, GPUCTL_F_TEMP));
	l = link_of(f.snap, 0, 2);
	assert_int_equal(l.level, GPUCTL_TOPO_UNKNOWN);
	l = link_of(f.snap, 0, 1);
	assert_int_equal(l.nvlinks, 2);

	/* each reason is logged once, at the right level */
	assert_int_equal(log_capture_count(&f.logs, "2|nvmlDeviceGetTemperature: "), 1);
	assert_int_equal(log_capture_count(&f.logs, "0|nvmlDeviceGetPowerUsage: not supported"), 1);
	assert_int_equal(log_capture_count(&f.logs, "2|GPU 2 is lost"), 1);
	/* ... also across snapshots on the same context */
	assert_int_equal(gpuctl_snapshot_take(f.ctx, GPUCTL_SNAP_ALL, &again), 0);
	assert_true(gpuctl_gpu_lost(gpuctl_snapshot_gpu(again, 2)));
	gpuctl_snapshot_free(again);
	assert_int_equal(log_capture_count(&f.logs, "nvmlDeviceGetTemperature"), 1);
	assert_int_equal(log_capture_count(&f.logs, "nvmlDeviceGetPowerUsage"), 1);
	assert_int_equal(log_capture_count(&f.logs, "is lost"), 1);
	sim_done(&f);
}

/* Every optional function answers NOT_SUPPORTED: nothing but the index is available, nothing
 * crashes, and every function is logged once. */
static void test_sim_not_supported_everywhere(void **state)
{
	static const char *const fns[] = {
	        "nvmlSystemGetDriverVersion",
	        "nvmlSystemGetNVMLVersion",
	        "nvmlSystemGetCudaDriverVersion_v2",
	        "nvmlDeviceGetUUID",
	        "nvmlDeviceGetPciInfo_v3",
	        "nvmlDeviceGetName",
	        "nvmlDeviceGetBrand",
	        "nvmlDeviceGetArchitecture",
	        "nvmlDeviceGetCudaComputeCapability",
	        "nvmlDeviceGetSerial",
	        "nvmlDeviceGetMinorNumber",
	        "nvmlDeviceGetMemoryInfo_v2",
	        "nvmlDeviceGetMemoryInfo",
	        "nvmlDeviceGetUtilizationRates",
	        "nvmlDeviceGetTemperature",
	        "nvmlDeviceGetTemperatureThreshold",
	        "nvmlDeviceGetPowerUsage",
	        "nvmlDeviceGetEnforcedPowerLimit",
	        "nvmlDeviceGetPowerManagementLimit",
	        "nvmlDeviceGetFanSpeed",
	        "nvmlDeviceGetPerformanceState",
	        "nvmlDeviceGetClockInfo",
	        "nvmlDeviceGetMaxClockInfo",
	        "nvmlDeviceGetCurrentClocksEventReasons",
	        "nvmlDeviceGetCurrPcieLinkGeneration",
	        "nvmlDeviceGetMaxPcieLinkGeneration",
	        "nvmlDeviceGetCurrPcieLinkWidth",
	        "nvmlDeviceGetMaxPcieLinkWidth",
	        "nvmlDeviceGetPcieReplayCounter",
	        "nvmlDeviceGetPersistenceMode",
	        "nvmlDeviceGetComputeMode",
	        "nvmlDeviceGetEccMode",
	        "nvmlDeviceGetMigMode",
	        "nvmlDeviceGetTotalEccErrors",
	        "nvmlDeviceGetRetiredPages",
	        "nvmlDeviceGetRetiredPagesPendingStatus",
	        "nvmlDeviceGetRemappedRows",
	        "nvmlDeviceGetCpuAffinity",
	        "nvmlDeviceGetMemoryAffinity",
	        "nvmlDeviceGetNumaNodeId",
	        "nvmlDeviceGetComputeRunningProcesses_v3",
	        "nvmlDeviceGetTopologyCommonAncestor",
	        "nvmlDeviceGetP2PStatus",
	        "nvmlDeviceGetNvLinkState",
	        "nvmlDeviceGetViolationStatus",
	        "nvmlDeviceGetBAR1MemoryInfo",
	        "nvmlDeviceGetPcieThroughput",
	        "nvmlDeviceGetProcessUtilization",
	};
	struct simfix f;
	struct gpuctl_link l = GPUCTL_LINK_INIT;
	int cuda;

	(void)state;
	memset(&f, 0, sizeof(f));
	if (sim_start(&f.sim, "", "lib-mesh.json") < 0)
		skip();
	for (size_t k = 0; k < sizeof(fns) / sizeof(fns[0]); k++)
		if (sim_nvsim(&f.sim, "fail", fns[k], "NOT_SUPPORTED", NULL) != 0)
			fail_msg("nvsim fail %s NOT_SUPPORTED failed", fns[k]);
	assert_int_equal(gpuctl_ctx_new(&f.ctx), 0);
	gpuctl_ctx_set_log(f.ctx, log_capture_fn, &f.logs);
	assert_int_equal(gpuctl_snapshot_take(f.ctx, GPUCTL_SNAP_ALL, &f.snap), 0);
	assert_null(gpuctl_snapshot_driver_version(f.snap));
	assert_int_equal(gpuctl_snapshot_cuda_version(f.snap, &cuda), -ENODATA);
	for (size_t i = 0; i < 4; i++) {
		const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(f.snap, i);

		assert_false(gpuctl_gpu_lost(g));
		for (int fld = 0; fld < GPUCTL__F_COUNT; fld++)
			if (fld != GPUCTL_F_INDEX &&
			    (has_int(f.snap, i, fld) || gpuctl_gpu_str(g, fld)))
				fail_msg("GPU %zu: %s available", i, gpuctl_field_info(fld)->key);
		assert_int_equal(gpuctl_gpu_proc_count(g), 0);
	}
	l = link_of(f.snap, 0, 1);
	assert_int_equal(l.level, GPUCTL_TOPO_UNKNOWN);
	assert_int_equal(l.nvlinks, 0);
	assert_int_equal(l.p2p, GPUCTL_P2P_UNKNOWN);
	assert_true(l.bandwidth > 0.0);
	assert_int_equal(log_capture_count(&f.logs, "nvmlDeviceGetTemperatureThreshold"), 1);
	assert_int_equal(log_capture_count(&f.logs, "nvmlDeviceGetTopologyCommonAncestor"), 1);
	sim_done(&f);
}

/* gpuctl_snapshot_refresh: re-reads only the listed fields, copies the rest, does not ask
 * again what NVML did not support, marks a GPU lost in between and then leaves it alone. The
 * call counts are the rule's, from the fixture (four V100s, no memory temperature sensor). */
static void test_sim_refresh(void **state)
{
	static const enum gpuctl_field first[] = {GPUCTL_F_POWER_DRAW, GPUCTL_F_TEMP,
	                                          GPUCTL_F_TEMP_MEMORY, GPUCTL_F_ECC_MODE};
	static const enum gpuctl_field again[] = {GPUCTL_F_TEMP, GPUCTL_F_TEMP_MEMORY};
	struct gpuctl_snapshot *r1 = NULL, *r2 = NULL, *bad = NULL;
	struct simfix f;
	int64_t power0;

	(void)state;
	memset(&f, 0, sizeof(f));
	if (sim_start(&f.sim, "", "lib-mesh.json") < 0)
		skip();
	assert_int_equal(gpuctl_ctx_new(&f.ctx), 0);
	gpuctl_ctx_set_log(f.ctx, log_capture_fn, &f.logs);
	assert_int_equal(gpuctl_snapshot_take_fields(f.ctx, GPUCTL_SNAP_BASIC, first, 4, &f.snap),
	                 0);
	assert_false(has_int(f.snap, 0, GPUCTL_F_TEMP_MEMORY));
	power0 = get_int(f.snap, 0, GPUCTL_F_POWER_DRAW);
	assert_int_equal(power0, 43000);

	assert_int_equal(
	        gpuctl_snapshot_refresh(f.ctx, f.snap, GPUCTL_SNAP_TOPOLOGY, again, 2, &bad),
	        -EINVAL);
	assert_null(bad);

	assert_int_equal(
	        sim_nvsim(&f.sim, "set", "-i", "1", "temperature=77", "power.draw=99", NULL), 0);
	assert_int_equal(sim_nvsim(&f.sim, "set", "-i", "2", "lost=true", NULL), 0);
	assert_int_equal(gpuctl_snapshot_refresh(f.ctx, f.snap, 0, again, 2, &r1), 0);
	/* re-read: the new temperature; copied: power (not listed), identity, ECC mode */
	assert_int_equal(get_int(r1, 1, GPUCTL_F_TEMP), 77);
	assert_int_equal(get_int(r1, 1, GPUCTL_F_POWER_DRAW), 43000);
	assert_int_equal(get_int(r1, 0, GPUCTL_F_ECC_MODE), 1);
	assert_string_equal(gpuctl_gpu_str(gpuctl_snapshot_gpu(r1, 3), GPUCTL_F_UUID),
	                    "GPU-0bb00003-0000-4000-8000-000000000003");
	assert_string_equal(gpuctl_gpu_str(gpuctl_snapshot_gpu(r1, 0), GPUCTL_F_NAME),
	                    "Tesla V100-SXM2-32GB");
	assert_string_equal(gpuctl_snapshot_driver_version(r1), "535.161.08");
	assert_false(has_int(r1, 0, GPUCTL_F_TEMP_MEMORY));
	/* GPU 2 fell off between the two: marked lost, its re-read field unavailable */
	assert_true(gpuctl_gpu_lost(gpuctl_snapshot_gpu(r1, 2)));
	assert_false(has_int(r1, 2, GPUCTL_F_TEMP));
	/* 5 calls: the device count, one temperature per GPU (GPU 2's answers GPU_IS_LOST);
	 * memory temperature, unsupported on every GPU in the first snapshot, is not asked; no
	 * handles, no identity */
	assert_int_equal(log_capture_count(&f.logs, "refresh of 4 GPUs took 5 NVML calls"), 1);

	assert_int_equal(gpuctl_snapshot_refresh(f.ctx, r1, 0, again, 2, &r2), 0);
	assert_true(gpuctl_gpu_lost(gpuctl_snapshot_gpu(r2, 2)));
	assert_int_equal(get_int(r2, 1, GPUCTL_F_TEMP), 77);
	/* 4 calls: the lost GPU is not asked again */
	assert_int_equal(log_capture_count(&f.logs, "refresh of 4 GPUs took 4 NVML calls"), 1);
	gpuctl_snapshot_free(r2);
	r2 = NULL;

	/* listed now: power, copied until here, is read again; the SM clock, which no snapshot
	 * before read, is read */
	static const enum gpuctl_field more[] = {GPUCTL_F_POWER_DRAW, GPUCTL_F_CLOCK_SM};
	assert_false(has_int(r1, 0, GPUCTL_F_CLOCK_SM));
	assert_int_equal(gpuctl_snapshot_refresh(f.ctx, r1, 0, more, 2, &r2), 0);
	assert_int_equal(get_int(r2, 1, GPUCTL_F_POWER_DRAW), 99000);
	assert_int_equal(get_int(r2, 0, GPUCTL_F_CLOCK_SM), 135);
	gpuctl_snapshot_free(r2);
	r2 = NULL;

	/* NVML that cannot count the GPUs any more: -EIO, no snapshot (the caller takes one) */
	assert_int_equal(sim_nvsim(&f.sim, "fail", "nvmlDeviceGetCount_v2", "UNKNOWN", NULL), 0);
	assert_int_equal(gpuctl_snapshot_refresh(f.ctx, r1, 0, again, 2, &r2), -EIO);
	assert_null(r2);
	gpuctl_snapshot_free(r1);
	sim_done(&f);
}

/* Violation percentages over NVML's own timestamps, and per-process engine shares, on
 * synthetic snapshots: the arithmetic of the NVML reference (d violation ns / d reference
 * us / 1000). */
static void test_violation_percent_and_proc_util(void **state)
{
	struct gpuctl_snapshot *a = snapshot_new_empty(1, GPUCTL_SNAP_PROCESSES);
	struct gpuctl_snapshot *b = snapshot_new_empty(1, GPUCTL_SNAP_PROCESSES);
	struct gpuctl_proc *p;
	double pct = -1;
	int util = -1;

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	assert_int_equal(gpuctl_gpu_violation_percent(&a->gpus[0], &b->gpus[0],
	                                              GPUCTL_F_VIOLATION_POWER, &pct),
	                 -ENODATA);
	assert_int_equal(snapshot_set_int(a, 0, GPUCTL_F_VIOLATION_POWER, 1000), 0);
	a->gpus[0].violation_ref_us[0] = 10;
	assert_int_equal(snapshot_set_int(b, 0, GPUCTL_F_VIOLATION_POWER, 6000), 0);
	b->gpus[0].violation_ref_us[0] = 20;
	/* 5000 ns held back in 10 us */
	assert_int_equal(gpuctl_gpu_violation_percent(&a->gpus[0], &b->gpus[0],
	                                              GPUCTL_F_VIOLATION_POWER, &pct),
	                 0);
	assert_true(pct > 49.999 && pct < 50.001);
	assert_int_equal(gpuctl_gpu_violation_percent(&a->gpus[0], &b->gpus[0],
	                                              GPUCTL_F_VIOLATION_THERMAL, &pct),
	                 -ENODATA);
	assert_int_equal(
	        gpuctl_gpu_violation_percent(&a->gpus[0], &b->gpus[0], GPUCTL_F_TEMP, &pct),
	        -EINVAL);
	/* no time passed (the same reading twice), or the counter went back */
	assert_int_equal(gpuctl_gpu_violation_percent(&b->gpus[0], &b->gpus[0],
	                                              GPUCTL_F_VIOLATION_POWER, &pct),
	                 -ENODATA);
	b->gpus[0].violation_ref_us[0] = 5;
	assert_int_equal(gpuctl_gpu_violation_percent(&a->gpus[0], &b->gpus[0],
	                                              GPUCTL_F_VIOLATION_POWER, &pct),
	                 -ENODATA);
	b->gpus[0].violation_ref_us[0] = 20;
	assert_int_equal(snapshot_set_int(b, 0, GPUCTL_F_VIOLATION_POWER, 500), 0);
	assert_int_equal(gpuctl_gpu_violation_percent(&a->gpus[0], &b->gpus[0],
	                                              GPUCTL_F_VIOLATION_POWER, &pct),
	                 -ENODATA);
	/* more than the interval (readings taken at different moments) is capped at 100 */
	assert_int_equal(snapshot_set_int(b, 0, GPUCTL_F_VIOLATION_POWER, 1000 + 20000), 0);
	assert_int_equal(gpuctl_gpu_violation_percent(&a->gpus[0], &b->gpus[0],
	                                              GPUCTL_F_VIOLATION_POWER, &pct),
	                 0);
	assert_true(pct == 100.0);

	p = snapshot_add_proc(a, 0, 42);
	assert_non_null(p);
	assert_int_equal(gpuctl_proc_util(p, GPUCTL_PROC_SM, &util), -ENODATA);
	p->util[GPUCTL_PROC_SM] = 30;
	p->util[GPUCTL_PROC_DEC] = 7;
	p->has_util = true;
	assert_int_equal(gpuctl_proc_util(p, GPUCTL_PROC_SM, &util), 0);
	assert_int_equal(util, 30);
	assert_int_equal(gpuctl_proc_util(p, GPUCTL_PROC_DEC, &util), 0);
	assert_int_equal(util, 7);
	assert_int_equal(gpuctl_proc_util(p, (enum gpuctl_proc_engine)4, &util), -EINVAL);
	assert_int_equal(gpuctl_proc_util(NULL, GPUCTL_PROC_SM, &util), -EINVAL);
	gpuctl_snapshot_free(a);
	gpuctl_snapshot_free(b);
}

/* NOT_READY and DEPRECATED from a query are no NVML failure of the GPU (health's "nvml" check
 * counts nvml_errors): the field is N/A. NOT_READY is asked again by the next refresh (the
 * driver will have an answer), DEPRECATED is remembered like NOT_SUPPORTED; a real error
 * (UNKNOWN, the control) counts as a failure and is asked again. */
static void test_sim_not_ready_and_deprecated(void **state)
{
	static const enum gpuctl_field temp[] = {GPUCTL_F_TEMP};
	static const struct {
		const char *error;
		unsigned nvml_errors; /* on GPU 1 */
		bool asked_again;     /* after the failure is cleared, a refresh reads it */
	} cases[] = {
	        {"NOT_READY", 0, true},
	        {"DEPRECATED", 0, false},
	        {"UNKNOWN", 1, true},
	};

	(void)state;
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct gpuctl_snapshot *r1 = NULL;
		struct simfix f;

		memset(&f, 0, sizeof(f));
		if (sim_start(&f.sim, "", "lib-mesh.json") < 0)
			skip();
		assert_int_equal(gpuctl_ctx_new(&f.ctx), 0);
		gpuctl_ctx_set_log(f.ctx, log_capture_fn, &f.logs);
		assert_int_equal(sim_nvsim(&f.sim, "fail", "nvmlDeviceGetTemperature",
		                           cases[k].error, "-i", "1", NULL),
		                 0);
		assert_int_equal(
		        gpuctl_snapshot_take_fields(f.ctx, GPUCTL_SNAP_BASIC, temp, 1, &f.snap), 0);
		assert_true(has_int(f.snap, 0, GPUCTL_F_TEMP));
		assert_false(has_int(f.snap, 1, GPUCTL_F_TEMP));
		assert_int_equal(f.snap->gpus[1].nvml_errors, cases[k].nvml_errors);
		assert_int_equal(f.snap->gpus[0].nvml_errors, 0);
		assert_int_equal(sim_nvsim(&f.sim, "fail", "--clear", NULL), 0);
		assert_int_equal(gpuctl_snapshot_refresh(f.ctx, f.snap, 0, temp, 1, &r1), 0);
		assert_int_equal(has_int(r1, 1, GPUCTL_F_TEMP), cases[k].asked_again);
		assert_int_equal(r1->gpus[1].nvml_errors, 0);
		gpuctl_snapshot_free(r1);
		sim_done(&f);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_empty_fields_unavailable),
	        cmocka_unit_test(test_setters),
	        cmocka_unit_test(test_null_safety),
	        cmocka_unit_test(test_bad_flags),
	        cmocka_unit_test(test_sim_mesh),
	        cmocka_unit_test(test_sim_switch_mig),
	        cmocka_unit_test(test_sim_proc_mig_device),
	        cmocka_unit_test(test_sim_flags_limit_reads),
	        cmocka_unit_test(test_sim_failures),
	        cmocka_unit_test(test_sim_not_supported_everywhere),
	        cmocka_unit_test(test_sim_refresh),
	        cmocka_unit_test(test_sim_not_ready_and_deprecated),
	        cmocka_unit_test(test_violation_percent_and_proc_util),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
