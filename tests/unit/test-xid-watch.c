// SPDX-License-Identifier: MIT
/*
 * test-xid-watch.c: decoding NVML's XID events (src/lib/health/xid-watch.c) against the simulator:
 * an event value above 99999 is recorded as XID 999, 99999 as itself, with the text "NVML event";
 * an XID of a GPU the watch did not register is not recorded. (Delivery itself, -ENODEV and
 * the library without an event API are in test-nvml.c.)
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "gpuctl/gpuctl.h"
#include "snapshot-internal.h"
#include "test-sim.h"

/* Appends an XID line for GPU gpu of snap to the simulated kernel log, which the simulated NVML
 * delivers as an event with eventData = code. For codes nvsim xid refuses (above 99999): the
 * line is the one it would write, in /dev/kmsg's record format. */
static void append_xid_line(const struct sim *s, const struct gpuctl_snapshot *snap, size_t gpu,
                            unsigned long long code)
{
	const char *bus = gpuctl_gpu_str(gpuctl_snapshot_gpu(snap, gpu), GPUCTL_F_PCI_BUS_ID);
	char path[PATH_MAX + 8], line[256];
	int fd, n;

	assert_non_null(bus);
	assert_true(strlen(bus) == 16); /* "00000000:07:00.0" */
	(void)snprintf(path, sizeof(path), "%s/kmsg", s->state_dir);
	/* the driver prints a 4-digit domain and no function: "0000:07:00" */
	n = snprintf(line, sizeof(line),
	             "3,%zu,1,-;NVRM: Xid (PCI:%.10s): %llu, pid=1, name=test\n", gpu, bus + 4,
	             code);
	assert_true(n > 0 && (size_t)n < sizeof(line));
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, line, (size_t)n), n);
	assert_int_equal(close(fd), 0);
}

static void assert_entry(const struct gpuctl_xid_log *log, size_t i, size_t want_gpu,
                         unsigned want_xid)
{
	const char *text = NULL;
	size_t gpu;
	unsigned xid;

	assert_int_equal(gpuctl_xid_log_get(log, i, &gpu, &xid, &text), 0);
	assert_int_equal(gpu, want_gpu);
	assert_int_equal(xid, want_xid);
	assert_non_null(text);
	assert_string_equal(text, "NVML event");
}

/* A context on the simulated lib-mesh machine, a snapshot of it, an XID log; the test makes
 * the watch. No snapshot when the simulator is not built (the test skips). */
struct fx {
	struct sim sim;
	struct gpuctl_ctx *ctx;
	struct gpuctl_snapshot *snap;
	struct gpuctl_xid_log *log;
	struct gpuctl_xid_watch *w;
};

static int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	*state = f;
	if (sim_start(&f->sim, "", "lib-mesh.json") < 0)
		return 0;
	if (gpuctl_ctx_new(&f->ctx) < 0 || gpuctl_xid_log_new(&f->log) < 0 ||
	    gpuctl_snapshot_take(f->ctx, GPUCTL_SNAP_BASIC, &f->snap) < 0)
		return -1;
	return 0;
}

static int fx_teardown(void **state)
{
	struct fx *f = *state;

	gpuctl_xid_watch_free(f->w);
	gpuctl_xid_log_free(f->log);
	gpuctl_snapshot_free(f->snap);
	gpuctl_ctx_free(f->ctx);
	sim_stop(&f->sim);
	free(f);
	return 0;
}

static void test_unnamed_code_is_999(void **state)
{
	struct fx *f = *state;

	if (!f->snap)
		skip();
	assert_int_equal(gpuctl_xid_watch_new(f->ctx, f->snap, &f->w), 0);
	append_xid_line(&f->sim, f->snap, 1, 100000);
	assert_int_equal(sim_nvsim(&f->sim, "xid", "-i", "2", "99999", NULL), 0);
	append_xid_line(&f->sim, f->snap, 3, 18446744073709551615ull);
	for (int k = 0; k < 3; k++)
		assert_int_equal(gpuctl_xid_watch_wait(f->ctx, f->w, 5000, f->log), 1);
	assert_int_equal(gpuctl_xid_watch_wait(f->ctx, f->w, 20, f->log), 0);
	assert_int_equal(gpuctl_xid_log_count(f->log), 3);
	assert_entry(f->log, 0, 1, 999);
	assert_entry(f->log, 1, 2, 99999);
	assert_entry(f->log, 2, 3, 999);
}

/* A GPU the snapshot marks lost is not registered: its XIDs are not recorded, the others are. */
static void test_unregistered_gpu_ignored(void **state)
{
	struct fx *f = *state;

	if (!f->snap)
		skip();
	snapshot_set_lost(f->snap, 1);
	assert_int_equal(gpuctl_xid_watch_new(f->ctx, f->snap, &f->w), 0);
	assert_int_equal(sim_nvsim(&f->sim, "xid", "-i", "1", "13", NULL), 0);
	assert_int_equal(sim_nvsim(&f->sim, "xid", "-i", "0", "48", NULL), 0);
	assert_int_equal(gpuctl_xid_watch_wait(f->ctx, f->w, 5000, f->log), 1);
	assert_int_equal(gpuctl_xid_watch_wait(f->ctx, f->w, 20, f->log), 0);
	assert_int_equal(gpuctl_xid_log_count(f->log), 1);
	assert_entry(f->log, 0, 0, 48);
}

/* Bad arguments are -EINVAL with a message, and touch nothing. */
static void test_arguments(void **state)
{
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_xid_watch *w = NULL;
	struct gpuctl_xid_log *log = NULL;

	(void)state;
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	assert_int_equal(gpuctl_xid_log_new(&log), 0);
	assert_int_equal(gpuctl_xid_watch_new(ctx, NULL, &w), -EINVAL);
	assert_null(w);
	assert_string_equal(gpuctl_errmsg(ctx), "no snapshot");
	assert_int_equal(gpuctl_xid_watch_wait(ctx, NULL, 0, log), -EINVAL);
	assert_int_equal(gpuctl_xid_log_count(log), 0);
	gpuctl_xid_watch_free(NULL);
	gpuctl_xid_log_free(log);
	gpuctl_ctx_free(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_unnamed_code_is_999, fx_setup, fx_teardown),
	        cmocka_unit_test_setup_teardown(test_unregistered_gpu_ignored, fx_setup,
	                                        fx_teardown),
	        cmocka_unit_test(test_arguments),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
