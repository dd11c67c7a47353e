// SPDX-License-Identifier: MIT
/*
 * test-nvml.c: loading NVML: no library, a library that is not NVML, the simulator and its
 * old/ and minimal/ builds (fewer symbols: fallbacks used, fields unavailable, no crash); the
 * NVML call in flight, as another thread sees it while a call hangs.
 * Simulator paths come from $GPUCTL_BUILD_DIR (set by ctest); tests skip when it is not built.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "gpuctl/gpuctl.h"
#include "test-sim.h"

static void test_missing_library(void **state)
{
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_snapshot *snap = NULL;

	(void)state;
	assert_int_equal(setenv("GPUCTL_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1), 0);
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	assert_int_equal(gpuctl_nvml_load(ctx), -ENOENT);
	assert_string_equal(gpuctl_errmsg(ctx), "no NVIDIA driver: /nonexistent/libnvidia-ml.so.1 "
	                                        "not found (set by GPUCTL_NVML_LIBRARY)");
	assert_null(gpuctl_nvml_library_path(ctx));
	assert_int_equal(gpuctl_snapshot_take(ctx, GPUCTL_SNAP_ALL, &snap), -ENOENT);
	assert_null(snap);
	gpuctl_ctx_free(ctx);
}

static void test_no_driver_default_names(void **state)
{
	struct gpuctl_ctx *ctx = NULL;
	char *path = NULL;

	(void)state;
	/* Only meaningful where no NVIDIA driver is installed (CI, this container). */
	if (gpuctl_library_locate("libnvidia-ml.so.1", &path) == 0) {
		free(path);
		skip();
	}
	assert_int_equal(unsetenv("GPUCTL_NVML_LIBRARY"), 0);
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	assert_int_equal(gpuctl_nvml_load(ctx), -ENOENT);
	assert_string_equal(
	        gpuctl_errmsg(ctx),
	        "no NVIDIA driver: libnvidia-ml.so.1 not found (set GPUCTL_NVML_LIBRARY "
	        "to use another library)");
	gpuctl_ctx_free(ctx);
}

static void test_not_nvml(void **state)
{
	struct gpuctl_ctx *ctx = NULL;
	char *libm = NULL;

	(void)state;
	assert_int_equal(gpuctl_library_locate("libm.so.6", &libm), 0);
	assert_true(libm[0] == '/');
	assert_int_equal(setenv("GPUCTL_NVML_LIBRARY", libm, 1), 0);
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	assert_int_equal(gpuctl_nvml_load(ctx), -ENOEXEC);
	assert_non_null(strstr(gpuctl_errmsg(ctx), "is not an NVML library"));
	assert_non_null(strstr(gpuctl_errmsg(ctx), "nvmlInit_v2"));
	gpuctl_ctx_free(ctx);
	free(libm);

	/* a file that is no shared object at all */
	assert_int_equal(setenv("GPUCTL_NVML_LIBRARY", "/etc/passwd", 1), 0);
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	assert_int_equal(gpuctl_nvml_load(ctx), -ENOEXEC);
	assert_non_null(strstr(gpuctl_errmsg(ctx), "'/etc/passwd' is not an NVML library"));
	gpuctl_ctx_free(ctx);
}

static void test_locate(void **state)
{
	char *p = NULL;

	(void)state;
	assert_int_equal(gpuctl_library_locate("libgpuctl-does-not-exist.so.9", &p), -ENOENT);
	assert_null(p);
	assert_int_equal(gpuctl_library_locate(NULL, &p), -EINVAL);
	assert_int_equal(gpuctl_library_locate("libc.so.6", &p), 0);
	assert_non_null(strstr(p, "libc.so.6"));
	free(p);
}

/* Loads the simulator in variant ("", "old", "minimal") over the fixture scenario. */
static void load_variant(const char *variant)
{
	struct sim sim;
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_snapshot *snap = NULL;
	struct log_capture logs = {0};

	if (sim_start(&sim, variant, "lib-mesh.json") < 0)
		skip();
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	gpuctl_ctx_set_log(ctx, log_capture_fn, &logs);
	assert_int_equal(gpuctl_nvml_load(ctx), 0);
	assert_int_equal(gpuctl_nvml_load(ctx), 0); /* idempotent */
	assert_non_null(gpuctl_nvml_library_path(ctx));
	assert_non_null(strstr(gpuctl_nvml_library_path(ctx), "libnvidia-ml.so.1"));
	assert_int_equal(gpuctl_snapshot_take(ctx, GPUCTL_SNAP_ALL, &snap), 0);
	assert_int_equal(gpuctl_snapshot_gpu_count(snap), 4);
	for (size_t i = 0; i < 4; i++) {
		const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, i);
		int64_t v;

		assert_false(gpuctl_gpu_lost(g));
		assert_int_equal(gpuctl_gpu_int(g, GPUCTL_F_INDEX, &v), 0);
		assert_int_equal(v, (int64_t)i);
		/* every variant has the identity calls */
		assert_non_null(gpuctl_gpu_str(g, GPUCTL_F_UUID));
		assert_non_null(gpuctl_gpu_str(g, GPUCTL_F_PCI_BUS_ID));
	}
	log_capture_assert_unique(&logs);
	gpuctl_snapshot_free(snap);
	gpuctl_ctx_free(ctx);
	log_capture_free(&logs);
	sim_stop(&sim);
}

static void test_sim_current(void **state)
{
	(void)state;
	load_variant("");
}

static void test_sim_old(void **state)
{
	(void)state;
	load_variant("old");
}

static void test_sim_minimal(void **state)
{
	(void)state;
	load_variant("minimal");
}

/* XID events through NVML's event API: only events after the watch started, each once, on the
 * GPU `nvsim xid` named; the minimal library (no event API) is -EOPNOTSUPP. */
static void test_xid_events(void **state)
{
	struct sim sim;
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_snapshot *snap = NULL;
	struct gpuctl_xid_watch *w = NULL;
	struct gpuctl_xid_log *log = NULL;
	size_t gpu;
	unsigned xid;

	(void)state;
	if (sim_start(&sim, "", "lib-mesh.json") < 0)
		skip();
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	assert_int_equal(gpuctl_xid_log_new(&log), 0);
	assert_int_equal(gpuctl_snapshot_take(ctx, GPUCTL_SNAP_BASIC, &snap), 0);
	/* before the watch: not delivered */
	assert_int_equal(sim_nvsim(&sim, "xid", "-i", "0", "13", NULL), 0);
	assert_int_equal(gpuctl_xid_watch_new(ctx, snap, &w), 0);
	assert_int_equal(gpuctl_xid_watch_wait(ctx, w, 0, log), 0);
	assert_int_equal(sim_nvsim(&sim, "xid", "-i", "2", "79", NULL), 0);
	assert_int_equal(sim_nvsim(&sim, "xid", "-i", "1", "999", NULL), 0);
	assert_int_equal(gpuctl_xid_watch_wait(ctx, w, 5000, log), 1);
	assert_int_equal(gpuctl_xid_watch_wait(ctx, w, 5000, log), 1);
	assert_int_equal(gpuctl_xid_watch_wait(ctx, w, 20, log), 0);
	assert_int_equal(gpuctl_xid_log_count(log), 2);
	assert_int_equal(gpuctl_xid_log_get(log, 0, &gpu, &xid, NULL), 0);
	assert_int_equal(gpu, 2);
	assert_int_equal(xid, 79);
	assert_int_equal(gpuctl_xid_log_get(log, 1, &gpu, &xid, NULL), 0);
	assert_int_equal(gpu, 1);
	assert_int_equal(xid, 999);
	/* a lost GPU of the set: -ENODEV */
	assert_int_equal(sim_nvsim(&sim, "set", "-i", "3", "lost=1", NULL), 0);
	assert_int_equal(gpuctl_xid_watch_wait(ctx, w, 20, log), -ENODEV);
	gpuctl_xid_watch_free(w);
	gpuctl_xid_watch_free(NULL);
	gpuctl_snapshot_free(snap);
	gpuctl_ctx_free(ctx);
	sim_stop(&sim);

	if (sim_start(&sim, "minimal", "lib-mesh.json") < 0)
		skip();
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	assert_int_equal(gpuctl_snapshot_take(ctx, GPUCTL_SNAP_BASIC, &snap), 0);
	w = NULL;
	assert_int_equal(gpuctl_xid_watch_new(ctx, snap, &w), -EOPNOTSUPP);
	assert_null(w);
	gpuctl_snapshot_free(snap);
	gpuctl_ctx_free(ctx);
	gpuctl_xid_log_free(log);
	sim_stop(&sim);
}

/* A call that does not return: gpuctl_nvml_call_in_flight, from another thread, names it, its
 * GPU and that GPU's PCI bus id (the fixture's, tests/unit/fixtures/lib/lib-mesh.json), and says
 * nothing is in flight before and after; the blocked call is the simulator's hang (nvsim hang,
 * sim/README.md), waited for until the record shows it. */
struct in_flight_job {
	struct gpuctl_ctx *ctx;
	int r;                        /* what the call returned */
	struct gpuctl_snapshot *snap; /* a snapshot job's result */
	bool snapshot;                /* take a snapshot (else only load NVML) */
};

static void *in_flight_thread(void *arg)
{
	struct in_flight_job *j = arg;

	j->r = j->snapshot ? gpuctl_snapshot_take(j->ctx, GPUCTL_SNAP_BASIC, &j->snap)
	                   : gpuctl_nvml_load(j->ctx);
	return NULL;
}

/* Waits (at most 60 s) until ctx's thread is in a call of function about gpu (other calls pass
 * through the record on the way to the hung one); returns what the record says. */
static struct gpuctl_nvml_call wait_in_flight(const struct gpuctl_ctx *ctx, const char *function,
                                              int gpu)
{
	struct gpuctl_nvml_call c = GPUCTL_NVML_CALL_INIT;
	const struct timespec tick = {0, 10 * 1000 * 1000};

	for (int i = 0; i < 6000; i++) {
		int r = gpuctl_nvml_call_in_flight(ctx, &c);

		assert_true(r == 0 || r == 1);
		if (r == 1 && strcmp(c.function, function) == 0 && c.gpu == gpu)
			return c;
		nanosleep(&tick, NULL);
	}
	fail_msg("no call of %s about GPU %d in flight within 60 s", function, gpu);
	return c;
}

static void test_call_in_flight(void **state)
{
	struct sim sim;
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_nvml_call c = GPUCTL_NVML_CALL_INIT, small = {.struct_size = 8};
	struct in_flight_job job = {0};
	pthread_t t;

	(void)state;
	if (sim_start(&sim, "", "lib-mesh.json") < 0)
		skip();
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	assert_int_equal(gpuctl_nvml_call_in_flight(NULL, &c), -EINVAL);
	assert_int_equal(gpuctl_nvml_call_in_flight(ctx, NULL), -EINVAL);
	assert_int_equal(gpuctl_nvml_call_in_flight(ctx, &small), -EINVAL);
	assert_int_equal(gpuctl_nvml_call_in_flight(ctx, &c), 0); /* nothing loaded yet */
	assert_null(c.function);

	/* nvmlInit: before NVML is loaded, about no GPU */
	assert_int_equal(sim_nvsim(&sim, "hang", "nvmlInit_v2", NULL), 0);
	job = (struct in_flight_job){.ctx = ctx};
	assert_int_equal(pthread_create(&t, NULL, in_flight_thread, &job), 0);
	c = wait_in_flight(ctx, "nvmlInit_v2", -1);
	assert_string_equal(c.pci_bus_id, "");
	assert_true(c.seconds >= 0);
	assert_int_equal(sim_nvsim(&sim, "unhang", NULL), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(job.r, 0);
	c = (struct gpuctl_nvml_call)GPUCTL_NVML_CALL_INIT;
	assert_int_equal(gpuctl_nvml_call_in_flight(ctx, &c), 0);

	/* a device query of GPU 2, whose bus id was read before it */
	assert_int_equal(sim_nvsim(&sim, "hang", "nvmlDeviceGetTemperature", "-i", "2", NULL), 0);
	job = (struct in_flight_job){.ctx = ctx, .snapshot = true};
	assert_int_equal(pthread_create(&t, NULL, in_flight_thread, &job), 0);
	c = wait_in_flight(ctx, "nvmlDeviceGetTemperature", 2);
	assert_string_equal(c.pci_bus_id, "00000000:86:00.0");
	assert_int_equal(c.struct_size, sizeof(c));
	assert_int_equal(sim_nvsim(&sim, "unhang", NULL), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(job.r, 0);
	assert_int_equal(gpuctl_snapshot_gpu_count(job.snap), 4);
	assert_int_equal(gpuctl_nvml_call_in_flight(ctx, &c), 0);
	gpuctl_snapshot_free(job.snap);
	gpuctl_ctx_free(ctx);
	sim_stop(&sim);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_missing_library),
	        cmocka_unit_test(test_no_driver_default_names),
	        cmocka_unit_test(test_not_nvml),
	        cmocka_unit_test(test_locate),
	        cmocka_unit_test(test_sim_current),
	        cmocka_unit_test(test_sim_old),
	        cmocka_unit_test(test_sim_minimal),
	        cmocka_unit_test(test_xid_events),
	        cmocka_unit_test(test_call_in_flight),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
