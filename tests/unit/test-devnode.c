// SPDX-License-Identifier: MIT
/*
 * test-devnode.c: the device-node map (src/lib/enforce/devnode.c, include/gpuctl/devnode.h) and
 * its readers (devnode-parse.c; the "Device Minor:" line of driver-proc.c).
 *
 * Expected values come from the texts the test writes in the formats NVIDIA and the kernel
 * document (the driver README's per-GPU information file, the MIG user guide's mig-minors,
 * proc_devices(5)), and from the scenario file (sim/scenarios/a100-mig.json: its GPUs' bus ids
 * and MIG instances' GPU and compute instance ids). The GPUs' minors written are not their
 * indices, and not in bus order, so a map that numbered GPUs by index or order fails.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "gpuctl/gpuctl.h"
#include "devnode-internal.h"
#include "driver-proc.h"
#include "test-sim.h"

/* ---- the readers ---- */

static void test_device_minor(void **state)
{
	const char *info = "Model: \t\t NVIDIA A100-SXM4-40GB\nIRQ:   \t\t 95\n"
	                   "Device Minor: \t 6\nBus Location: \t 0000:41:00.0\n";
	uint32_t m = 99;

	(void)state;
	assert_true(driver_proc_device_minor(info, strlen(info), &m));
	assert_int_equal(m, 6);
	/* stops at the length: the same text cut before the minor has none */
	assert_false(driver_proc_device_minor(info, (size_t)(strstr(info, "Device") - info), &m));
	static const char *bad[] = {"Device Minor: \t \n",         "Device Minor: \t -1\n",
	                            "Device Minor: \t 6x\n",       "Device Minor: \t 1048576\n",
	                            "Device Minor: \t 12345678\n", "Minor: 3\n"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(driver_proc_device_minor(bad[i], strlen(bad[i]), &m));
	assert_true(driver_proc_device_minor("Device Minor:\t1048575", 21, &m));
	assert_int_equal(m, 1048575);
}

static void test_mig_lines(void **state)
{
	struct devnode_cap c;

	(void)state;
	assert_true(devnode_mig_line("config 1", 8, &c));
	assert_int_equal(c.kind, DEVNODE_CAP_OTHER);
	assert_int_equal(c.minor, 1);
	assert_true(devnode_mig_line("gpu0/gi1/access 12", 18, &c));
	assert_int_equal(c.kind, DEVNODE_CAP_GI);
	assert_int_equal(c.gpu, 0);
	assert_int_equal(c.gi, 1);
	assert_int_equal(c.minor, 12);
	assert_true(devnode_mig_line("gpu31/gi14/ci7/access 4188", 26, &c));
	assert_int_equal(c.kind, DEVNODE_CAP_CI);
	assert_int_equal(c.gpu, 31);
	assert_int_equal(c.gi, 14);
	assert_int_equal(c.ci, 7);
	assert_int_equal(c.minor, 4188);
	/* names that are no MIG device's are other capabilities, not errors */
	assert_true(devnode_mig_line("gpu0/gi1/ci0/accessx 5", 22, &c));
	assert_int_equal(c.kind, DEVNODE_CAP_OTHER);
	static const char *bad[] = {
	        "gpu0/gi1/access",     "gpu0/gi1/access  12", " 12",
	        "gpu0/gi1/access 12 ", "gpu0/gi1/access -1",  "gpu0/gi1/access 1048576",
	        "gpu0/gi1/access 0x10"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(devnode_mig_line(bad[i], strlen(bad[i]), &c));
}

static const char mig_text[] = "config 1\nmonitor 2\n"
                               "gpu7/gi7/access 66\ngpu7/gi7/ci0/access 67\n"
                               "gpu7/gi8/access 75\ngpu7/gi8/ci0/access 76\n"
                               "gpu6/gi2/access 21\ngpu6/gi2/ci0/access 22\n"
                               "gpu6/gi3/access 30\n" /* gi3's ci0 line missing */
                               "garbage line\n"
                               "gpu6/gi9/access 84\ngpu6/gi9/ci0/access 85";

/* devnode_mig_find over the table of text (of len bytes) */
static bool mig_minor(const char *text, size_t len, uint32_t gpu, uint32_t gi, int ci,
                      uint32_t *ret)
{
	struct devnode_cap *caps = NULL;
	size_t n = 0;
	bool found;

	assert_int_equal(devnode_mig_table(text, len, &caps, &n), 0);
	found = devnode_mig_find(caps, n, gpu, gi, ci, ret);
	free(caps);
	return found;
}

static void test_mig_minor(void **state)
{
	uint32_t m = 0;
	size_t n = strlen(mig_text);

	(void)state;
	assert_true(mig_minor(mig_text, n, 7, 7, -1, &m));
	assert_int_equal(m, 66);
	assert_true(mig_minor(mig_text, n, 7, 8, 0, &m));
	assert_int_equal(m, 76);
	assert_true(mig_minor(mig_text, n, 6, 9, 0, &m)); /* last line, no newline */
	assert_int_equal(m, 85);
	assert_false(mig_minor(mig_text, n, 6, 3, 0, &m));
	assert_false(mig_minor(mig_text, n, 5, 2, -1, &m));
	assert_false(mig_minor(mig_text, n, 6, 2, 1, &m));
}

static const char devices_text[] = "Character devices:\n  1 mem\n  4 /dev/vc/0\n"
                                   "195 nvidia-frontend\n507 nvidia-uvm\n508 nvidia-caps\n"
                                   "\nBlock devices:\n  8 sd\n509 nvidia-blk\n";

static void test_char_major(void **state)
{
	uint32_t m = 0;
	size_t n = strlen(devices_text);

	(void)state;
	assert_true(devnode_char_major(devices_text, n, "nvidia-caps", &m));
	assert_int_equal(m, 508);
	assert_true(devnode_char_major(devices_text, n, "nvidia-uvm", &m));
	assert_int_equal(m, 507);
	assert_true(devnode_char_major(devices_text, n, "mem", &m));
	assert_int_equal(m, 1);
	/* a block device is not a character device; a prefix is not the name */
	assert_false(devnode_char_major(devices_text, n, "nvidia-blk", &m));
	assert_false(devnode_char_major(devices_text, n, "sd", &m));
	assert_false(devnode_char_major(devices_text, n, "nvidia", &m));
	assert_false(devnode_char_major("195 nvidia-caps\n", 16, "nvidia-caps", &m));
}

/* ---- the map over a simulated machine ---- */

struct fix {
	struct sim sim;
	char dir[64];
	struct gpuctl_ctx *ctx;
	struct gpuctl_snapshot *snap;
};

/* Writes dir/rel with text. */
static void put(const char *dir, const char *rel, const char *text)
{
	char path[512];
	FILE *f;

	(void)snprintf(path, sizeof(path), "%s/%s", dir, rel);
	f = fopen(path, "we");
	assert_non_null(f);
	assert_true(fputs(text, f) >= 0);
	assert_int_equal(fclose(f), 0);
}

/* The information file of the GPU at bus (the driver's spelling) with minor. */
static void put_info(const char *dir, const char *bus, unsigned minor)
{
	char path[512], text[256];

	(void)snprintf(path, sizeof(path), "%s/nvidia/gpus/%s", dir, bus);
	assert_int_equal(mkdir(path, 0755), 0);
	(void)snprintf(text, sizeof(text),
	               "Model: \t\t NVIDIA A100-SXM4-40GB\nDevice Minor: \t %u\nBus Location: \t "
	               "%s\n",
	               minor, bus);
	(void)snprintf(path, sizeof(path), "nvidia/gpus/%s/information", bus);
	put(dir, path, text);
}

static int fix_setup(void **state)
{
	static struct fix f;
	char path[512];

	memset(&f, 0, sizeof(f));
	if (sim_start_scenario(&f.sim, "", "sim/scenarios/a100-mig.json") < 0)
		return -1;
	(void)snprintf(f.dir, sizeof(f.dir), "/tmp/gpuctl-devnode-XXXXXX");
	if (!mkdtemp(f.dir))
		return -1;
	(void)snprintf(path, sizeof(path), "%s/nvidia", f.dir);
	(void)mkdir(path, 0755);
	(void)snprintf(path, sizeof(path), "%s/nvidia/gpus", f.dir);
	(void)mkdir(path, 0755);
	(void)snprintf(path, sizeof(path), "%s/nvidia-caps", f.dir);
	(void)mkdir(path, 0755);
	/* a100-mig.json's bus ids; minors neither the indices nor in bus order; C1 has no file */
	put_info(f.dir, "0000:01:00.0", 7);
	put_info(f.dir, "0000:41:00.0", 6);
	put_info(f.dir, "0000:81:00.0", 0);
	(void)snprintf(path, sizeof(path), "%s/nvidia-caps/mig-minors", f.dir);
	put("/", path + 1, mig_text);
	(void)snprintf(path, sizeof(path), "%s/devices", f.dir);
	put("/", path + 1, devices_text);
	(void)snprintf(path, sizeof(path), "%s/nvidia", f.dir);
	setenv("GPUCTL_NVIDIA_PROC", path, 1);
	(void)snprintf(path, sizeof(path), "%s/nvidia-caps", f.dir);
	setenv("GPUCTL_NVIDIA_CAPS_PROC", path, 1);
	(void)snprintf(path, sizeof(path), "%s/devices", f.dir);
	setenv("GPUCTL_PROC_DEVICES", path, 1);
	if (gpuctl_ctx_new(&f.ctx) < 0 || gpuctl_snapshot_take(f.ctx, GPUCTL_SNAP_MIG, &f.snap) < 0)
		return -1;
	*state = &f;
	return 0;
}

static int fix_teardown(void **state)
{
	struct fix *f = *state;
	char cmd[128];

	if (!f)
		return 0;
	gpuctl_snapshot_free(f->snap);
	gpuctl_ctx_free(f->ctx);
	sim_stop(&f->sim);
	(void)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	if (system(cmd) != 0)
		return -1;
	unsetenv("GPUCTL_NVIDIA_PROC");
	unsetenv("GPUCTL_NVIDIA_CAPS_PROC");
	unsetenv("GPUCTL_PROC_DEVICES");
	return 0;
}

/* Asserts node k of nodes is kind, path, major:minor. */
static void node_is(const struct gpuctl_devnode *const *nodes, size_t k, int kind, const char *path,
                    unsigned major, unsigned minor)
{
	assert_int_equal(nodes[k]->kind, kind);
	assert_string_equal(nodes[k]->path, path);
	assert_int_equal(nodes[k]->major, major);
	assert_int_equal(nodes[k]->minor, minor);
}

static void test_map(void **state)
{
	struct fix *f = *state;
	struct gpuctl_devnodes *map = NULL;
	const struct gpuctl_devnode *const *nodes = NULL;
	size_t n = 0;

	assert_int_equal(gpuctl_snapshot_gpu_count(f->snap), 4);
	assert_int_equal(gpuctl_devnodes_read(f->ctx, f->snap, "/scratch/dev/", &map), 0);
	assert_string_equal(gpuctl_devnodes_dev_dir(map), "/scratch/dev");
	/* the GPUs by their minors, matched by bus id */
	assert_int_equal(gpuctl_devnodes_of(map, 0, -1, &nodes, &n), 0);
	assert_int_equal(n, 1);
	node_is(nodes, 0, GPUCTL_DEVNODE_GPU, "/scratch/dev/nvidia7", 195, 7);
	assert_int_equal(gpuctl_devnodes_of(map, 1, -1, &nodes, &n), 0);
	node_is(nodes, 0, GPUCTL_DEVNODE_GPU, "/scratch/dev/nvidia6", 195, 6);
	assert_int_equal(gpuctl_devnodes_of(map, 2, -1, &nodes, &n), 0);
	node_is(nodes, 0, GPUCTL_DEVNODE_GPU, "/scratch/dev/nvidia0", 195, 0);
	/* no information file for 0000:C1:00.0: unknown */
	assert_int_equal(gpuctl_devnodes_of(map, 3, -1, &nodes, &n), -ENODATA);
	/* GPU 0's MIG devices: gi 7 ci 0, gi 8 ci 0, gi 9 ... (the scenario's order) */
	assert_int_equal(gpuctl_devnodes_of(map, 0, 0, &nodes, &n), 0);
	assert_int_equal(n, 3);
	node_is(nodes, 0, GPUCTL_DEVNODE_GPU, "/scratch/dev/nvidia7", 195, 7);
	node_is(nodes, 1, GPUCTL_DEVNODE_GI_ACCESS, "/scratch/dev/nvidia-caps/nvidia-cap66", 508,
	        66);
	node_is(nodes, 2, GPUCTL_DEVNODE_CI_ACCESS, "/scratch/dev/nvidia-caps/nvidia-cap67", 508,
	        67);
	assert_int_equal(gpuctl_devnodes_of(map, 0, 1, &nodes, &n), 0);
	node_is(nodes, 1, GPUCTL_DEVNODE_GI_ACCESS, "/scratch/dev/nvidia-caps/nvidia-cap75", 508,
	        75);
	node_is(nodes, 2, GPUCTL_DEVNODE_CI_ACCESS, "/scratch/dev/nvidia-caps/nvidia-cap76", 508,
	        76);
	/* gpu7/gi9 has no line */
	assert_int_equal(gpuctl_devnodes_of(map, 0, 2, &nodes, &n), -ENODATA);
	/* GPU 1 (minor 6): gi 2, gi 3 (its ci0 line missing), gi 9 */
	assert_int_equal(gpuctl_devnodes_of(map, 1, 0, &nodes, &n), 0);
	node_is(nodes, 0, GPUCTL_DEVNODE_GPU, "/scratch/dev/nvidia6", 195, 6);
	node_is(nodes, 1, GPUCTL_DEVNODE_GI_ACCESS, "/scratch/dev/nvidia-caps/nvidia-cap21", 508,
	        21);
	node_is(nodes, 2, GPUCTL_DEVNODE_CI_ACCESS, "/scratch/dev/nvidia-caps/nvidia-cap22", 508,
	        22);
	assert_int_equal(gpuctl_devnodes_of(map, 1, 1, &nodes, &n), -ENODATA);
	assert_int_equal(gpuctl_devnodes_of(map, 1, 2, &nodes, &n), 0);
	node_is(nodes, 2, GPUCTL_DEVNODE_CI_ACCESS, "/scratch/dev/nvidia-caps/nvidia-cap85", 508,
	        85);
	/* out of range */
	assert_int_equal(gpuctl_devnodes_of(map, 1, 3, &nodes, &n), -ERANGE);
	assert_int_equal(gpuctl_devnodes_of(map, 4, -1, &nodes, &n), -ERANGE);
	assert_int_equal(gpuctl_devnodes_of(map, 0, -2, &nodes, &n), -ERANGE);
	/* the shared nodes */
	gpuctl_devnodes_shared(map, &nodes, &n);
	assert_int_equal(n, 4);
	node_is(nodes, 0, GPUCTL_DEVNODE_SHARED, "/scratch/dev/nvidiactl", 195, 255);
	node_is(nodes, 1, GPUCTL_DEVNODE_SHARED, "/scratch/dev/nvidia-modeset", 195, 254);
	node_is(nodes, 2, GPUCTL_DEVNODE_SHARED, "/scratch/dev/nvidia-uvm", 507, 0);
	node_is(nodes, 3, GPUCTL_DEVNODE_SHARED, "/scratch/dev/nvidia-uvm-tools", 507, 1);
	gpuctl_devnodes_free(map);
	gpuctl_devnodes_free(NULL);
}

static void test_map_missing(void **state)
{
	struct fix *f = *state;
	struct gpuctl_devnodes *map = NULL;
	const struct gpuctl_devnode *const *nodes = NULL;
	size_t n = 0;
	char path[512];

	/* no /proc/devices: no nvidia-caps major (no MIG nodes), no uvm nodes; GPUs still */
	(void)snprintf(path, sizeof(path), "%s/no-devices", f->dir);
	setenv("GPUCTL_PROC_DEVICES", path, 1);
	assert_int_equal(gpuctl_devnodes_read(f->ctx, f->snap, NULL, &map), 0);
	assert_int_equal(gpuctl_devnodes_of(map, 0, -1, &nodes, &n), 0);
	node_is(nodes, 0, GPUCTL_DEVNODE_GPU, "/dev/nvidia7", 195, 7);
	assert_int_equal(gpuctl_devnodes_of(map, 0, 0, &nodes, &n), -ENODATA);
	gpuctl_devnodes_shared(map, &nodes, &n);
	assert_int_equal(n, 2);
	gpuctl_devnodes_free(map);
	/* no driver files at all: nothing known, and no failure */
	setenv("GPUCTL_NVIDIA_PROC", path, 1);
	assert_int_equal(gpuctl_devnodes_read(f->ctx, f->snap, "/dev", &map), 0);
	for (size_t g = 0; g < 4; g++)
		assert_int_equal(gpuctl_devnodes_of(map, g, -1, &nodes, &n), -ENODATA);
	gpuctl_devnodes_free(map);
	/* a relative dev directory */
	assert_int_equal(gpuctl_devnodes_read(f->ctx, f->snap, "dev", &map), -EINVAL);
	(void)snprintf(path, sizeof(path), "%s/nvidia", f->dir);
	setenv("GPUCTL_NVIDIA_PROC", path, 1);
	(void)snprintf(path, sizeof(path), "%s/devices", f->dir);
	setenv("GPUCTL_PROC_DEVICES", path, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_device_minor), cmocka_unit_test(test_mig_lines),
	        cmocka_unit_test(test_mig_minor),    cmocka_unit_test(test_char_major),
	        cmocka_unit_test(test_map),          cmocka_unit_test(test_map_missing),
	};

	return cmocka_run_group_tests(tests, fix_setup, fix_teardown);
}
