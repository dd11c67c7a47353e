// SPDX-License-Identifier: MIT
/*
 * test-devstr.c: device sets and device strings (src/lib/devices/: devset.c,
 * cuda-visible.c, nvidia-visible.c, outer.c, render.c, cuda-mig.c) on synthetic snapshots.
 *
 * Expected values come from the rules in docs/device-strings.md and their sources (CUDA
 * Programming Guide, MPS and MIG guides, libnvidia-container, docker/cli, moby, Slurm), worked
 * out by hand; rows tagged [observed] come from PyTorch's and nvitop's re-implementations.
 * Machines:
 * - eight: 8 identical A100s (FASTEST_FIRST ties down to the bus id, so CUDA order is NVML
 *   order); UUIDs 0, 4, 7 share "12", 4 and 7 share "1234", 1 and 2 share "abcdef0".
 * - work: sim/scenarios/workstation-mixed.json: Quadro P1000 (6.1) on bus 01, RTX A6000 (8.6)
 *   on bus 41.
 * - mixed: 7 GPUs that reach every FASTEST_FIRST tie-break, a "10.0" device (numeric, not text,
 *   comparison) and one with no known facts.
 * - mig: sim/scenarios/a100-mig.json: GPU0 MIG with seven 1g.5gb (GI 7-13), GPU1 MIG with
 *   3g.20gb (GI 2), 2g.10gb (GI 3), 1g.5gb (GI 9), GPU2 MIG with no instances, GPU3 MIG off.
 */
#include <errno.h>
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

#define GIB (1024ll * 1024 * 1024)
#define MIB (1024ll * 1024)

enum machine { EIGHT, WORK, MIXED, MIG, N_MACHINES };

static struct gpuctl_snapshot *machines[N_MACHINES];
static struct gpuctl_ctx *ctx;

static const char *const eight_uuids[] = {
        "GPU-12ab0000-1111-2222-3333-444444444444", "GPU-abcdef01-1111-2222-3333-444444444444",
        "GPU-abcdef02-1111-2222-3333-444444444444", "GPU-fedcba98-1111-2222-3333-444444444444",
        "GPU-1234aaaa-1111-2222-3333-444444444444", "GPU-55555555-1111-2222-3333-444444444444",
        "GPU-66666666-1111-2222-3333-444444444444", "GPU-1234bbbb-1111-2222-3333-444444444444",
};
static const char *const eight_buses[] = {
        "00000000:07:00.0", "00000000:0F:00.0", "00000000:47:00.0", "00000000:4E:00.0",
        "00000000:87:00.0", "00000000:90:00.0", "00000000:B7:00.0", "00000001:BD:00.0",
};

#define P1000_UUID "GPU-a860c565-16b9-5418-990b-77d903a12fcd"
#define A6000_UUID "GPU-61a0ed90-be2f-1b39-2e4e-7f091e141100"

static const char *const mig_gpu_uuids[] = {
        "GPU-638d9ab6-28e3-86b7-abea-0cce882dfa4c",
        "GPU-7a1f3c2e-5b6d-4e8f-9a0b-1c2d3e4f5a6b",
        "GPU-0b9c8d7e-6f5a-4b3c-2d1e-0f9a8b7c6d5e",
        "GPU-d4c3b2a1-0f9e-8d7c-6b5a-493827160504",
};
/* MIG UUIDs: GPU0's seven, then GPU1's three. */
static const char *const g0_mig_uuids[] = {
        "MIG-c62a9856-8a32-4dab-0eda-f1dd6a7ecb30", "MIG-c62a9856-8a32-4dab-0eda-f1dd6a7ecb31",
        "MIG-c62a9856-8a32-4dab-0eda-f1dd6a7ecb32", "MIG-c62a9856-8a32-4dab-0eda-f1dd6a7ecb33",
        "MIG-c62a9856-8a32-4dab-0eda-f1dd6a7ecb34", "MIG-c62a9856-8a32-4dab-0eda-f1dd6a7ecb35",
        "MIG-c62a9856-8a32-4dab-0eda-f1dd6a7ecb36",
};
#define G1M0 "MIG-4b1e0c5d-2f3a-5b6c-8d9e-0a1b2c3d4e50" /* 3g.20gb, GI 2 */
#define G1M1 "MIG-4b1e0c5d-2f3a-5b6c-8d9e-0a1b2c3d4e51" /* 2g.10gb, GI 3 */
#define G1M2 "MIG-4b1e0c5d-2f3a-5b6c-8d9e-0a1b2c3d4e52" /* 1g.5gb, GI 9 */

/* ---- Machines ---- */

static void gpu(struct gpuctl_snapshot *s, size_t i, const char *uuid, const char *bus,
                const char *name, const char *cc, int64_t sm_max, int64_t mem)
{
	if (uuid)
		assert_int_equal(snapshot_set_str(s, i, GPUCTL_F_UUID, uuid), 0);
	if (bus)
		assert_int_equal(snapshot_set_str(s, i, GPUCTL_F_PCI_BUS_ID, bus), 0);
	if (name)
		assert_int_equal(snapshot_set_str(s, i, GPUCTL_F_NAME, name), 0);
	if (cc)
		assert_int_equal(snapshot_set_str(s, i, GPUCTL_F_COMPUTE_CAP, cc), 0);
	if (sm_max)
		assert_int_equal(snapshot_set_int(s, i, GPUCTL_F_CLOCK_SM_MAX, sm_max), 0);
	if (mem)
		assert_int_equal(snapshot_set_int(s, i, GPUCTL_F_MEMORY_TOTAL, mem), 0);
}

static void mig(struct gpuctl_snapshot *s, size_t g, const char *uuid, const char *profile, int gi,
                int ci)
{
	struct gpuctl_mig *m = snapshot_add_mig(s, g);

	assert_non_null(m);
	assert_int_equal(mig_set_strs(m, uuid, profile), 0);
	mig_set_int(m, GPUCTL_MIG_GI, gi);
	mig_set_int(m, GPUCTL_MIG_CI, ci);
}

static struct gpuctl_snapshot *make_eight(void)
{
	struct gpuctl_snapshot *s = snapshot_new_empty(8, GPUCTL_SNAP_MIG);

	assert_non_null(s);
	for (size_t i = 0; i < 8; i++) {
		gpu(s, i, eight_uuids[i], eight_buses[i], "NVIDIA A100-SXM4-80GB", "8.0", 1410,
		    80 * GIB);
		/* /dev/nvidiaN's minor number: N for GPU N here */
		assert_int_equal(snapshot_set_int(s, i, GPUCTL_F_MINOR_NUMBER, (int64_t)i), 0);
	}
	return s;
}

static struct gpuctl_snapshot *make_work(void)
{
	struct gpuctl_snapshot *s = snapshot_new_empty(2, GPUCTL_SNAP_MIG);

	assert_non_null(s);
	gpu(s, 0, P1000_UUID, "00000000:01:00.0", "Quadro P1000", "6.1", 1721, 4096 * MIB);
	gpu(s, 1, A6000_UUID, "00000000:41:00.0", "NVIDIA RTX A6000", "8.6", 2100, 49140 * MIB);
	return s;
}

static struct gpuctl_snapshot *make_mixed(void)
{
	struct gpuctl_snapshot *s = snapshot_new_empty(7, GPUCTL_SNAP_MIG);

	assert_non_null(s);
	gpu(s, 0, "GPU-00000000-0000-0000-0000-000000000000", "00000000:01:00.0", "P1000", "6.1",
	    1721, 4 * GIB);
	gpu(s, 1, "GPU-11111111-0000-0000-0000-000000000000", "00000000:21:00.0", "A4000", "8.6",
	    1740, 16 * GIB);
	gpu(s, 2, "GPU-22222222-0000-0000-0000-000000000000", "00000000:41:00.0", "A6000", "8.6",
	    2100, 48 * GIB);
	gpu(s, 3, "GPU-33333333-0000-0000-0000-000000000000", "00000000:61:00.0", "X24", "8.6",
	    2100, 24 * GIB);
	gpu(s, 4, "GPU-44444444-0000-0000-0000-000000000000", "00000000:81:00.0", "A6000", "8.6",
	    2100, 48 * GIB);
	gpu(s, 5, "GPU-55555555-0000-0000-0000-000000000000", "00000000:A1:00.0", "X10", "10.0",
	    1000, 8 * GIB);
	gpu(s, 6, "GPU-66666666-0000-0000-0000-000000000000", "00000000:C1:00.0", NULL, NULL, 0, 0);
	return s;
}

static struct gpuctl_snapshot *make_mig(void)
{
	static const char *const buses[] = {"00000000:01:00.0", "00000000:41:00.0",
	                                    "00000000:81:00.0", "00000000:C1:00.0"};
	struct gpuctl_snapshot *s = snapshot_new_empty(4, GPUCTL_SNAP_MIG);

	assert_non_null(s);
	for (size_t i = 0; i < 4; i++) {
		gpu(s, i, mig_gpu_uuids[i], buses[i], "NVIDIA A100-SXM4-40GB", "8.0", 1410,
		    40 * GIB);
		assert_int_equal(snapshot_set_int(s, i, GPUCTL_F_MIG_MODE, i < 3), 0);
	}
	for (int m = 0; m < 7; m++)
		mig(s, 0, g0_mig_uuids[m], "1g.5gb", 7 + m, 0);
	mig(s, 1, G1M0, "3g.20gb", 2, 0);
	mig(s, 1, G1M1, "2g.10gb", 3, 0);
	mig(s, 1, G1M2, "1g.5gb", 9, 0);
	/* R570: one CUDA process may take several MIG devices (one per GPU instance), so every
	 * set of this machine renders in the CUDA forms (test_cuda_mig_limit changes it) */
	assert_int_equal(snapshot_set_system(s, "570.172.08", "12.570.172.08"), 0);
	return s;
}

static const char *const env_vars[] = {"CUDA_VISIBLE_DEVICES",   "CUDA_DEVICE_ORDER",
                                       "NVIDIA_VISIBLE_DEVICES", "SLURM_STEP_GPUS",
                                       "SLURM_JOB_GPUS",         "SLURMD_NODENAME"};

/* A scratch Slurm configuration directory: SLURM_CONF names slurm.conf there, and gres.conf
 * beside it is what write_gres wrote. */
static char slurm_dir[64];

static void write_gres(const char *text)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/gres.conf", slurm_dir);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_true(fputs(text, f) >= 0);
	assert_int_equal(fclose(f), 0);
}

static void clear_env(void)
{
	for (size_t i = 0; i < sizeof(env_vars) / sizeof(env_vars[0]); i++)
		assert_int_equal(unsetenv(env_vars[i]), 0);
}

/* Log hook: counts warnings and keeps the last one. */
static int n_warnings;
static char last_warning[600];

static void log_hook(void *userdata, enum gpuctl_log_level level, const char *msg)
{
	(void)userdata;
	if (level != GPUCTL_LOG_WARNING)
		return;
	n_warnings++;
	snprintf(last_warning, sizeof(last_warning), "%s", msg);
}

static int group_setup(void **state)
{
	(void)state;
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	gpuctl_ctx_set_log(ctx, log_hook, NULL);
	machines[EIGHT] = make_eight();
	machines[WORK] = make_work();
	machines[MIXED] = make_mixed();
	machines[MIG] = make_mig();
	clear_env();
	snprintf(slurm_dir, sizeof(slurm_dir), "/tmp/gpuctl-test-slurm-XXXXXX");
	assert_non_null(mkdtemp(slurm_dir));
	char conf[128];
	snprintf(conf, sizeof(conf), "%s/slurm.conf", slurm_dir);
	assert_int_equal(setenv("SLURM_CONF", conf, 1), 0);
	/* AutoDetect: Slurm's GPU numbers are NVML's (docs/slurm.md) */
	write_gres("AutoDetect=nvml\n");
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	for (int i = 0; i < N_MACHINES; i++)
		gpuctl_snapshot_free(machines[i]);
	gpuctl_ctx_free(ctx);
	clear_env();
	char path[128];
	snprintf(path, sizeof(path), "%s/gres.conf", slurm_dir);
	(void)unlink(path);
	(void)rmdir(slurm_dir);
	return 0;
}

/* ---- Expected device lists ---- */

struct want {
	int gpu; /* snapshot index; -1 ends the list */
	int mig; /* MIG index, -1 for the whole GPU */
};

#define W(...) ((const struct want[]){__VA_ARGS__, {-1, 0}})
#define G(g)                                                                                       \
	{                                                                                          \
		g, -1                                                                              \
	}
#define M(g, m)                                                                                    \
	{                                                                                          \
		g, m                                                                               \
	}
#define NONE ((const struct want[]){{-1, 0}})

static void check_set(const struct gpuctl_devset *set, const struct want *want, const char *what)
{
	size_t n = 0;

	while (want[n].gpu >= 0)
		n++;
	if (gpuctl_devset_count(set) != n)
		fail_msg("%s: %zu devices, want %zu", what, gpuctl_devset_count(set), n);
	for (size_t i = 0; i < n; i++) {
		size_t g = 99;
		int m = 99;

		assert_int_equal(gpuctl_devset_get(set, i, &g, &m), 0);
		if (g != (size_t)want[i].gpu || m != want[i].mig)
			fail_msg("%s: device %zu is %zu:%d, want %d:%d", what, i, g, m, want[i].gpu,
			         want[i].mig);
	}
}

static struct gpuctl_devset *make_set(const struct want *want)
{
	struct gpuctl_devset *set = NULL;

	assert_int_equal(gpuctl_devset_new(&set), 0);
	for (size_t i = 0; want[i].gpu >= 0; i++)
		assert_int_equal(gpuctl_devset_add(set, (size_t)want[i].gpu, want[i].mig), 0);
	return set;
}

/* ---- Device sets ---- */

static void test_devset(void **state)
{
	struct gpuctl_devset *set = NULL;
	size_t g = 42;
	int m = 42;

	(void)state;
	gpuctl_devset_free(NULL);
	assert_int_equal(gpuctl_devset_new(NULL), -EINVAL);
	assert_int_equal(gpuctl_devset_new(&set), 0);
	assert_int_equal(gpuctl_devset_count(set), 0);
	assert_int_equal(gpuctl_devset_get(set, 0, &g, &m), -EINVAL);
	assert_int_equal(g, 42); /* untouched on failure */
	assert_int_equal(gpuctl_devset_add(set, 3, -1), 0);
	assert_int_equal(gpuctl_devset_add(set, 1, 2), 0);
	assert_int_equal(gpuctl_devset_add(set, 3, -7), -EEXIST); /* any negative: whole GPU */
	assert_int_equal(gpuctl_devset_add(set, 1, 2), -EEXIST);
	for (int i = 0; i < 40; i++) /* past the first allocation */
		assert_int_equal(gpuctl_devset_add(set, 100 + (size_t)i, i % 3 - 1), 0);
	assert_int_equal(gpuctl_devset_count(set), 42);
	assert_true(gpuctl_devset_contains(set, 3, -1));
	assert_true(gpuctl_devset_contains(set, 3, -5));
	assert_true(gpuctl_devset_contains(set, 1, 2));
	assert_false(gpuctl_devset_contains(set, 1, -1));
	assert_false(gpuctl_devset_contains(NULL, 1, 2));
	assert_int_equal(gpuctl_devset_get(set, 1, &g, &m), 0);
	assert_int_equal(g, 1);
	assert_int_equal(m, 2);
	assert_int_equal(gpuctl_devset_get(set, 0, &g, &m), 0);
	assert_int_equal(m, -1);
	assert_string_equal(gpuctl_devset_uuid(set, machines[EIGHT], 0), eight_uuids[3]);
	assert_null(gpuctl_devset_uuid(set, machines[EIGHT], 1)); /* GPU 1 has no MIG 2 */
	assert_string_equal(gpuctl_devset_uuid(set, machines[MIG], 1), G1M2);
	assert_null(gpuctl_devset_uuid(set, machines[EIGHT], 2)); /* GPU 100 */
	assert_null(gpuctl_devset_uuid(set, machines[EIGHT], 99));
	gpuctl_devset_free(set);
}

/* ---- CUDA_VISIBLE_DEVICES: one row per rule ---- */

struct cuda_row {
	enum machine m;
	const char *value; /* NULL: unset */
	const char *order; /* CUDA_DEVICE_ORDER, NULL: unset */
	const struct want *want;
	const char *rule; /* what the row checks, and the kind of source */
};

static const struct cuda_row cuda_rows[] = {
        /* documented: the CUDA Programming Guide's environment-variable appendix */
        {EIGHT, NULL, NULL, W(G(0), G(1), G(2), G(3), G(4), G(5), G(6), G(7)), "unset: all"},
        {EIGHT, "", NULL, NONE, "empty: none"},
        {EIGHT, "2,1", NULL, W(G(2), G(1)), "list order is ordinal order"},
        {EIGHT, "0,2,-1,1", NULL, W(G(0), G(2)), "guide's example: stop at -1"},
        {EIGHT, "-1", NULL, NONE, "-1 alone: none"},
        {EIGHT, "8", NULL, NONE, "index out of range (8 GPUs)"},
        {EIGHT, "0,8,1", NULL, W(G(0)), "stop at an out-of-range index"},
        {EIGHT, "GPU-abcdef01", NULL, W(G(1)), "unique prefix with GPU- (MPS doc)"},
        {EIGHT, "GPU-55555555-1111-2222-3333-444444444444,GPU-1234b", NULL, W(G(5), G(7)),
         "full UUID, then a prefix"},
        /* observed: PyTorch _parse_visible_devices / _transform_uuid_to_ordinals, nvitop */
        {EIGHT, "0,0", NULL, NONE, "duplicate: empty set"},
        {EIGHT, "2,1,2", NULL, NONE, "duplicate later in the list: empty set"},
        {EIGHT, "3,1,-1,3", NULL, W(G(3), G(1)), "entries after the stop are not read"},
        {EIGHT, "0,,1", NULL, W(G(0)), "empty entry stops"},
        {EIGHT, "0,", NULL, W(G(0)), "trailing comma: empty entry stops"},
        {EIGHT, " ", NULL, NONE, "blank value: one empty entry"},
        {EIGHT, "1gpu2,2ampere", NULL, W(G(1), G(2)), "strtoul: leading digits"},
        {EIGHT, " 1, 2", NULL, W(G(1), G(2)), "blanks around entries"},
        {EIGHT, "1\t,\t2 ", NULL, W(G(1), G(2)), "tabs around entries"},
        {EIGHT, "0-2", NULL, W(G(0)), "no ranges: strtoul reads 0"},
        {EIGHT, "+3", NULL, W(G(3)), "strtoul: a plus sign"},
        {EIGHT, "-0", NULL, W(G(0)), "strtoul: -0 is 0"},
        {EIGHT, "99999999999999999999999", NULL, NONE, "overflow: out of range"},
        {EIGHT, "abc", NULL, NONE, "no digits: not an index"},
        {EIGHT, "abcdef01", NULL, NONE, "a prefix without GPU- is not a UUID"},
        {EIGHT, "GPU-abcdef0", NULL, NONE, "ambiguous prefix (GPUs 1, 2)"},
        {EIGHT, "GPU-12", NULL, NONE, "ambiguous prefix (GPUs 0, 4, 7)"},
        {EIGHT, "GPU-1234a", NULL, W(G(4)), "unique prefix sharing 1234 with GPU 7"},
        {EIGHT, "GPU-", NULL, NONE, "GPU- alone matches every GPU"},
        {EIGHT, "GPU-abcdef01,GPU-zzz,GPU-55555555", NULL, W(G(1)), "unknown UUID stops"},
        {EIGHT, "GPU-abcdef02,GPU-12,GPU-55555555", NULL, W(G(2)), "ambiguous UUID stops"},
        {EIGHT, "GPU-fedcba98,gpu-FEDCBA98", NULL, NONE, "same GPU twice by UUID"},
        {EIGHT, "0,GPU-abcdef01", NULL, W(G(0)), "index mode: a UUID stops"},
        {EIGHT, "GPU-abcdef01,0", NULL, W(G(1)), "UUID mode: an index stops"},
        {EIGHT, " GPU-abcdef01 , GPU-fedc", NULL, W(G(1), G(3)), "blanks around UUIDs"},
        {EIGHT, "MIG-c62a9856-8a32-4dab-0eda-f1dd6a7ecb30", NULL, NONE, "no such MIG device"},
        /* CUDA_DEVICE_ORDER on workstation-mixed.json: FASTEST_FIRST puts the A6000 first */
        {WORK, NULL, NULL, W(G(1), G(0)), "FASTEST_FIRST: A6000 (8.6) before P1000 (6.1)"},
        {WORK, NULL, "FASTEST_FIRST", W(G(1), G(0)), "FASTEST_FIRST spelled out"},
        {WORK, NULL, "PCI_BUS_ID", W(G(0), G(1)), "PCI_BUS_ID: bus 01 before 41"},
        {WORK, "0", NULL, W(G(1)), "index 0 is the A6000 by default"},
        {WORK, "0", "PCI_BUS_ID", W(G(0)), "index 0 is the P1000 in bus order"},
        {WORK, "1,0", NULL, W(G(0), G(1)), "indices in CUDA order"},
        {WORK, "0", "pci_bus_id", W(G(1)), "unknown order value: FASTEST_FIRST"},
        {WORK, "GPU-a860", NULL, W(G(0)), "UUIDs do not depend on the order"},
        /* our FASTEST_FIRST model, every tie-break */
        {MIXED, NULL, NULL, W(G(5), G(2), G(4), G(3), G(1), G(0), G(6)),
         "cc desc (10.0 > 8.6 > 6.1), SM clock desc, memory desc, bus asc, unknown last"},
        {MIXED, NULL, "PCI_BUS_ID", W(G(0), G(1), G(2), G(3), G(4), G(5), G(6)), "bus order"},
        {MIXED, "0,1,2", NULL, W(G(5), G(2), G(4)), "indices under FASTEST_FIRST"},
        {MIXED, "6", NULL, W(G(6)), "the GPU with no facts is last"},
        {MIXED, "6", "PCI_BUS_ID", W(G(6)), "and last by bus"},
        /* MIG (MIG user guide: device names, CUDA device enumeration) */
        {MIG, NULL, NULL, W(G(3)), "unset: only GPUs not in MIG mode"},
        {MIG, "0", NULL, W(G(3)), "index 0 is the only non-MIG GPU"},
        {MIG, "1", NULL, NONE, "MIG-mode GPUs have no index"},
        {MIG, G1M0, NULL, W(M(1, 0)), "MIG UUID"},
        {MIG,
         G1M2 ","
              "MIG-c62a9856-8a32-4dab-0eda-f1dd6a7ecb33",
         NULL, W(M(1, 2), M(0, 3)), "MIG UUIDs in list order"},
        {MIG, "MIG-GPU-7a1f3c2e-5b6d-4e8f-9a0b-1c2d3e4f5a6b/3/0", NULL, W(M(1, 1)),
         "legacy MIG-GPU-<uuid>/<gi>/<ci>"},
        {MIG,
         "MIG-GPU-7a1f3c2e-5b6d-4e8f-9a0b-1c2d3e4f5a6b/9/0,MIG-GPU-638d9ab6-28e3-86b7-abea-"
         "0cce882dfa4c/13/0",
         NULL, W(M(1, 2), M(0, 6)), "legacy form, two GPUs"},
        {MIG, "MIG-GPU-7a1f3c2e-5b6d-4e8f-9a0b-1c2d3e4f5a6b/7/0", NULL, NONE,
         "legacy form: no such GPU instance"},
        {MIG, "MIG-GPU-7a1f3c2e/2/0", NULL, NONE, "legacy form needs the full GPU UUID"},
        {MIG, "MIG-GPU-7a1f3c2e-5b6d-4e8f-9a0b-1c2d3e4f5a6b/2", NULL, NONE,
         "legacy form: malformed"},
        {MIG, G1M0 ",MIG-GPU-7a1f3c2e-5b6d-4e8f-9a0b-1c2d3e4f5a6b/2/0", NULL, NONE,
         "one MIG device by both forms: duplicate"},
        {MIG, "MIG-4b1e0c5d", NULL, NONE, "MIG UUIDs must be full"},
        {MIG, "GPU-638d9ab6", NULL, NONE, "a MIG-mode GPU cannot be used whole"},
        {MIG, "GPU-d4c3b2a1," G1M0, NULL, W(G(3), M(1, 0)), "GPU and MIG UUIDs mix"},
        {MIG, G1M0 ",GPU-d4c3b2a1", NULL, W(M(1, 0), G(3)), "MIG first, then a GPU"},
        {MIG, "0," G1M0, NULL, W(G(3)), "index mode: a MIG UUID stops"},
};

static void test_cuda_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cuda_rows) / sizeof(cuda_rows[0]); i++) {
		const struct cuda_row *row = &cuda_rows[i];
		struct gpuctl_devset *set = NULL;
		char what[300];

		snprintf(what, sizeof(what), "row %zu '%s' order %s (%s)", i,
		         row->value ? row->value : "(unset)", row->order ? row->order : "(unset)",
		         row->rule);
		assert_int_equal(gpuctl_devstr_parse_cuda(ctx, machines[row->m], row->value,
		                                          row->order, &set),
		                 0);
		check_set(set, row->want, what);
		gpuctl_devset_free(set);
	}
}

static void test_cuda_logging(void **state)
{
	struct gpuctl_devset *set = NULL;
	int before;

	(void)state;
	n_warnings = 0;
	assert_int_equal(gpuctl_devstr_parse_cuda(ctx, machines[EIGHT], "0,1,2", NULL, &set), 0);
	gpuctl_devset_free(set);
	assert_int_equal(n_warnings, 0); /* a clean value logs nothing */

	assert_int_equal(gpuctl_devstr_parse_cuda(ctx, machines[EIGHT], "5,2,-1,1", NULL, &set), 0);
	gpuctl_devset_free(set);
	assert_int_equal(n_warnings, 1);
	assert_non_null(strstr(last_warning, "CUDA_VISIBLE_DEVICES='5,2,-1,1'"));
	assert_non_null(strstr(last_warning, "entry 3 '-1'"));
	assert_non_null(strstr(last_warning, "negative"));
	assert_null(strchr(last_warning, '\n'));

	before = n_warnings; /* the same value again: logged once only */
	assert_int_equal(gpuctl_devstr_parse_cuda(ctx, machines[EIGHT], "5,2,-1,1", NULL, &set), 0);
	gpuctl_devset_free(set);
	assert_int_equal(n_warnings, before);

	assert_int_equal(gpuctl_devstr_parse_cuda(ctx, machines[EIGHT], "4,4", NULL, &set), 0);
	gpuctl_devset_free(set);
	assert_int_equal(n_warnings, before + 1);
	assert_non_null(strstr(last_warning, "already listed"));
	assert_non_null(strstr(last_warning, "no device at all"));

	assert_int_equal(gpuctl_devstr_parse_cuda(ctx, machines[EIGHT], "GPU-1234", NULL, &set), 0);
	gpuctl_devset_free(set);
	assert_non_null(strstr(last_warning, "ambiguous"));

	assert_int_equal(gpuctl_devstr_parse_cuda(NULL, machines[EIGHT], "x", NULL, &set),
	                 0); /* no context: no log, no crash */
	gpuctl_devset_free(set);
	assert_int_equal(gpuctl_devstr_parse_cuda(ctx, NULL, "0", NULL, &set), -EINVAL);
	assert_int_equal(gpuctl_devstr_parse_cuda(ctx, machines[EIGHT], "0", NULL, NULL), -EINVAL);
}

/* ---- NVIDIA_VISIBLE_DEVICES ---- */

struct nvidia_row {
	enum machine m;
	const char *value;       /* NULL: unset */
	const struct want *want; /* NULL: -EINVAL expected */
	const char *rule;
};

static const struct nvidia_row nvidia_rows[] = {
        /* nvidia-container-toolkit cuda_image.go / devices.go */
        {EIGHT, NULL, NONE, "unset: void"},
        {EIGHT, "", NONE, "empty: void"},
        {EIGHT, "void", NONE, "void"},
        {EIGHT, "none", NONE, "none: no GPU (driver libraries only)"},
        {EIGHT, ",,,", NONE, "only empty entries: void"},
        {EIGHT, "0,void", NONE, "void anywhere wins"},
        {EIGHT, "all,none", NONE, "none beats all"},
        {EIGHT, "all", W(G(0), G(1), G(2), G(3), G(4), G(5), G(6), G(7)), "all"},
        {EIGHT, " all ", W(G(0), G(1), G(2), G(3), G(4), G(5), G(6), G(7)), "all, trimmed"},
        {EIGHT, "ALL", W(G(0), G(1), G(2), G(3), G(4), G(5), G(6), G(7)),
         "all in any case (libnvidia-container str_case_equal)"},
        {EIGHT, "1,all", W(G(0), G(1), G(2), G(3), G(4), G(5), G(6), G(7)), "all anywhere"},
        /* libnvidia-container src/cli/common.c select_devices */
        {EIGHT, "0,1", W(G(0), G(1)), "NVML indices"},
        {EIGHT, "2,0", W(G(2), G(0)), "in list order"},
        {EIGHT, "1,1,0", W(G(1), G(0)), "duplicates merged"},
        {EIGHT, "0,,1,", W(G(0), G(1)), "empty entries skipped"},
        {EIGHT, " 3 , 4 ", W(G(3), G(4)), "entries trimmed"},
        {EIGHT, "007", W(G(7)), "leading zeros"},
        {EIGHT, "8", NULL, "index out of range"},
        {EIGHT, "-1", NULL, "negative"},
        {EIGHT, "1gpu2", NULL, "no strtoul prefixes here"},
        {EIGHT, "GPU-abcdef01-1111-2222-3333-444444444444", W(G(1)), "full UUID"},
        {EIGHT, "gpu-ABCDEF01-1111-2222-3333-444444444444", W(G(1)), "UUID in any case"},
        {EIGHT, "GPU-abcdef01", NULL, "UUID prefixes are refused"},
        {EIGHT, "GPU-", NULL, "GPU- alone"},
        {EIGHT, "3,GPU-abcdef01-1111-2222-3333-444444444444,3", W(G(3), G(1)),
         "index and UUID, merged"},
        {EIGHT, "00000000:47:00.0", W(G(2)), "bus id as NVML prints it"},
        {EIGHT, "0000:4e:00.0", W(G(3)), "bus id with a short domain, lower case"},
        {EIGHT, "0:47:00.0", W(G(2)), "bus id: %x domain"},
        {EIGHT, "00000001:BD:00.0", W(G(7)), "bus id in domain 1"},
        {EIGHT, "00000000:BD:00.0", NULL, "same bus, other domain"},
        {EIGHT, "47:00.0", NULL, "bus id without its domain"},
        {EIGHT, "00000000:48:00.0", NULL, "no GPU at that bus id"},
        {EIGHT, "0:0", NULL, "gpu:mig on a GPU without MIG devices"},
        {EIGHT, "junk", NULL, "junk"},
        {EIGHT, "0,junk", NULL, "junk after a good entry"},
        {EIGHT, "0-2", NULL, "no ranges"},
        {MIG, "all",
         W(G(0), G(1), G(2), G(3), M(0, 0), M(0, 1), M(0, 2), M(0, 3), M(0, 4), M(0, 5), M(0, 6),
           M(1, 0), M(1, 1), M(1, 2)),
         "all: every GPU, then every MIG device (select_all_devices)"},
        {MIG, "1:2", W(M(1, 2)), "<gpu>:<mig>"},
        {MIG, "0:6,1:0", W(M(0, 6), M(1, 0)), "two MIG devices by index"},
        {MIG, "0:7", NULL, "GPU 0 has 7 MIG devices (0-6)"},
        {MIG, "4:0", NULL, "no GPU 4"},
        {MIG, G1M1, W(M(1, 1)), "full MIG UUID"},
        {MIG, "MIG-4b1e0c5d", NULL, "MIG UUID prefix"},
        {MIG, "MIG-GPU-7a1f3c2e-5b6d-4e8f-9a0b-1c2d3e4f5a6b/3/0", NULL,
         "legacy MIG name (the driver's MIG UUIDs are modern)"},
        {MIG, "3,1:0," G1M0, W(G(3), M(1, 0)), "a MIG device by index and UUID, merged"},
        {MIG, "0", W(G(0)), "a MIG-mode GPU by index: the whole GPU"},
};

static void test_nvidia_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(nvidia_rows) / sizeof(nvidia_rows[0]); i++) {
		const struct nvidia_row *row = &nvidia_rows[i];
		struct gpuctl_devset *set = (struct gpuctl_devset *)0x1;
		char what[300];
		int r;

		snprintf(what, sizeof(what), "row %zu '%s' (%s)", i,
		         row->value ? row->value : "(unset)", row->rule);
		r = gpuctl_devstr_parse_nvidia(ctx, machines[row->m], row->value, &set);
		if (!row->want) {
			if (r != -EINVAL)
				fail_msg("%s: returned %d, want -EINVAL", what, r);
			assert_ptr_equal(set, (struct gpuctl_devset *)0x1);
			assert_non_null(strstr(gpuctl_errmsg(ctx), "NVIDIA_VISIBLE_DEVICES: '"));
			assert_non_null(strstr(gpuctl_errmsg(ctx), "': unknown device"));
			continue;
		}
		if (r != 0)
			fail_msg("%s: returned %d (%s)", what, r, gpuctl_errmsg(ctx));
		check_set(set, row->want, what);
		gpuctl_devset_free(set);
	}
}

static void test_nvidia_message(void **state)
{
	struct gpuctl_devset *set = NULL;

	(void)state;
	assert_int_equal(gpuctl_devstr_parse_nvidia(ctx, machines[EIGHT], "0, junk ,1", &set),
	                 -EINVAL);
	assert_string_equal(gpuctl_errmsg(ctx), "NVIDIA_VISIBLE_DEVICES: 'junk': unknown device");
	assert_int_equal(gpuctl_devstr_parse_nvidia(ctx, machines[EIGHT], "0,GPU-abcdef01", &set),
	                 -EINVAL);
	assert_string_equal(gpuctl_errmsg(ctx),
	                    "NVIDIA_VISIBLE_DEVICES: 'GPU-abcdef01': unknown device");
	assert_int_equal(gpuctl_devstr_parse_nvidia(ctx, machines[EIGHT], "a\nb", &set), -EINVAL);
	assert_null(strchr(gpuctl_errmsg(ctx), '\n'));
	assert_int_equal(gpuctl_devstr_parse_nvidia(ctx, NULL, "0", &set), -EINVAL);
}

/* ---- Renderers ---- */

static void expect_render(enum machine mc, const struct want *want, enum gpuctl_render form,
                          unsigned flags, const char *text)
{
	struct gpuctl_devset *set = make_set(want);
	char *got = (char *)0x1;
	int r = gpuctl_devstr_render(ctx, machines[mc], set, form, flags, &got);

	if (!text) {
		if (r != -EINVAL)
			fail_msg("form %d flags %u: returned %d, want -EINVAL", form, flags, r);
		assert_ptr_equal(got, (char *)0x1);
		assert_true(gpuctl_errmsg(ctx)[0] != '\0');
		assert_null(strchr(gpuctl_errmsg(ctx), '\n'));
	} else {
		if (r != 0)
			fail_msg("form %d flags %u: %s", form, flags, gpuctl_errmsg(ctx));
		assert_string_equal(got, text);
		free(got);
	}
	gpuctl_devset_free(set);
}

#define U2 "GPU-abcdef02-1111-2222-3333-444444444444"
#define U0 "GPU-12ab0000-1111-2222-3333-444444444444"
#define K8S_COMMENT                                                                                \
	"  # The NVIDIA device plugin chooses the devices for the limits above and sets\n"         \
	"  # NVIDIA_VISIBLE_DEVICES itself; this entry pins these devices only where no\n"         \
	"  # device plugin runs.\n"

static void test_render_two_gpus(void **state)
{
	const struct want *two = W(G(2), G(0));

	(void)state;
	expect_render(EIGHT, two, GPUCTL_RENDER_CUDA, 0, "CUDA_VISIBLE_DEVICES=" U2 "," U0 "\n");
	expect_render(EIGHT, two, GPUCTL_RENDER_CUDA, GPUCTL_RENDER_INDICES,
	              "CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=2,0\n");
	expect_render(EIGHT, two, GPUCTL_RENDER_ENV, 0,
	              "export CUDA_VISIBLE_DEVICES=" U2 "," U0
	              "\nexport CUDA_DEVICE_ORDER=PCI_BUS_ID\n");
	expect_render(EIGHT, two, GPUCTL_RENDER_ENV, GPUCTL_RENDER_INDICES,
	              "export CUDA_VISIBLE_DEVICES=2,0\nexport CUDA_DEVICE_ORDER=PCI_BUS_ID\n");
	expect_render(EIGHT, two, GPUCTL_RENDER_DOCKER, 0, "--gpus '\"device=" U2 "," U0 "\"'\n");
	expect_render(EIGHT, two, GPUCTL_RENDER_DOCKER, GPUCTL_RENDER_INDICES,
	              "--gpus '\"device=2,0\"'\n");
	expect_render(EIGHT, two, GPUCTL_RENDER_NVIDIA, 0,
	              "NVIDIA_VISIBLE_DEVICES=" U2 "," U0 "\n");
	expect_render(EIGHT, two, GPUCTL_RENDER_NVIDIA, GPUCTL_RENDER_INDICES,
	              "NVIDIA_VISIBLE_DEVICES=2,0\n");
	expect_render(EIGHT, two, GPUCTL_RENDER_CDI, 0,
	              "nvidia.com/gpu=" U2 "\nnvidia.com/gpu=" U0 "\n");
	expect_render(EIGHT, two, GPUCTL_RENDER_CDI, GPUCTL_RENDER_INDICES,
	              "nvidia.com/gpu=2\nnvidia.com/gpu=0\n");
	expect_render(EIGHT, two, GPUCTL_RENDER_K8S, 0,
	              "resources:\n  limits:\n    nvidia.com/gpu: 2\nenv:\n" K8S_COMMENT
	              "  - name: NVIDIA_VISIBLE_DEVICES\n    value: \"" U2 "," U0 "\"\n");
	expect_render(EIGHT, two, GPUCTL_RENDER_K8S, GPUCTL_RENDER_INDICES,
	              "resources:\n  limits:\n    nvidia.com/gpu: 2\nenv:\n" K8S_COMMENT
	              "  - name: NVIDIA_VISIBLE_DEVICES\n    value: \"2,0\"\n");
	expect_render(EIGHT, two, GPUCTL_RENDER_JSON, 0,
	              "{\"devices\": [{\"index\": 2, \"uuid\": \"" U2
	              "\", \"pci_bus_id\": \"00000000:47:00.0\", \"name\": \"NVIDIA "
	              "A100-SXM4-80GB\", \"mig\": null}, {\"index\": 0, \"uuid\": \"" U0
	              "\", \"pci_bus_id\": \"00000000:07:00.0\", \"name\": \"NVIDIA "
	              "A100-SXM4-80GB\", \"mig\": null}]}\n");
	/* the workstation in bus order: CUDA index under PCI_BUS_ID is the NVML index */
	expect_render(WORK, W(G(1)), GPUCTL_RENDER_CUDA, GPUCTL_RENDER_INDICES,
	              "CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=1\n");
}

/* MIG user guide, "CUDA device enumeration": before R570 one MIG device per process and nothing
 * beside it; R570 and later one compute instance per GPU instance, GPUs alongside. */
static void expect_cuda_check(enum machine mc, const struct want *w, const char *err)
{
	struct gpuctl_devset *set = make_set(w);
	int r = gpuctl_devset_cuda_check(ctx, machines[mc], set);

	if (!err && r != 0)
		fail_msg("refused: %s", gpuctl_errmsg(ctx));
	if (err) {
		assert_int_equal(r, -EINVAL);
		if (!strstr(gpuctl_errmsg(ctx), err))
			fail_msg("'%s' does not say '%s'", gpuctl_errmsg(ctx), err);
		assert_null(strchr(gpuctl_errmsg(ctx), '\n'));
	}
	gpuctl_devset_free(set);
}

static void test_cuda_mig_limit(void **state)
{
	struct gpuctl_snapshot *s = machines[MIG];
	struct gpuctl_mig *extra;
	char *text = (char *)0x1;
	struct gpuctl_devset *set;

	(void)state;
	/* R570 (make_mig) */
	expect_cuda_check(MIG, W(M(0, 0), M(0, 1), M(1, 2)), NULL);
	expect_cuda_check(MIG, W(M(1, 0), G(3)), NULL);
	expect_cuda_check(EIGHT, W(G(0), G(1), G(2)), NULL);
	/* R550 */
	assert_int_equal(snapshot_set_system(s, "550.54.15", "12.550.54.15"), 0);
	expect_cuda_check(MIG, W(M(0, 0)), NULL);
	expect_cuda_check(MIG, W(G(3)), NULL);
	expect_cuda_check(MIG, W(M(0, 0), M(0, 1)), "only one MIG device, here 0:0");
	expect_cuda_check(MIG, W(G(3), M(1, 2)), "before R570");
	expect_cuda_check(MIG, W(M(0, 0), M(0, 1)), "550.54.15");
	set = make_set(W(M(0, 3), M(1, 1)));
	assert_int_equal(gpuctl_devstr_render(ctx, s, set, GPUCTL_RENDER_CUDA, 0, &text), -EINVAL);
	assert_int_equal(gpuctl_devstr_render(ctx, s, set, GPUCTL_RENDER_ENV, 0, &text), -EINVAL);
	assert_ptr_equal(text, (char *)0x1);
	/* the container forms carry several: a container may run one process per device */
	assert_int_equal(gpuctl_devstr_render(ctx, s, set, GPUCTL_RENDER_NVIDIA, 0, &text), 0);
	free(text);
	gpuctl_devset_free(set);
	/* a driver version not known counts as before R570 */
	assert_int_equal(snapshot_set_system(s, NULL, NULL), 0);
	expect_cuda_check(MIG, W(M(0, 0), M(0, 1)), "unknown version");
	/* R570, two compute instances of GPU instance 9 on GPU 1 */
	assert_int_equal(snapshot_set_system(s, "570.172.08", "12.570.172.08"), 0);
	extra = snapshot_add_mig(s, 1);
	assert_non_null(extra);
	assert_int_equal(
	        mig_set_strs(extra, "MIG-99999999-1111-2222-3333-444444444444", "1c.1g.5gb"), 0);
	mig_set_int(extra, GPUCTL_MIG_GI, 9);
	mig_set_int(extra, GPUCTL_MIG_CI, 1);
	expect_cuda_check(MIG, W(M(1, 2), M(1, 3)), "share GPU instance 9 of GPU 1");
	expect_cuda_check(MIG, W(M(1, 0), M(1, 3)), NULL);
	/* back to make_mig's machine for the other tests */
	gpuctl_snapshot_free(machines[MIG]);
	machines[MIG] = make_mig();
}

static void test_render_mig(void **state)
{
	const struct want *migs = W(M(1, 0), M(1, 2), M(0, 1));
	const char *u01 = "MIG-c62a9856-8a32-4dab-0eda-f1dd6a7ecb31";
	char buf[1024];

	(void)state;
	snprintf(buf, sizeof(buf), "CUDA_VISIBLE_DEVICES=%s,%s,%s\n", G1M0, G1M2, u01);
	expect_render(MIG, migs, GPUCTL_RENDER_CUDA, 0, buf);
	expect_render(MIG, migs, GPUCTL_RENDER_CUDA, GPUCTL_RENDER_INDICES, NULL);
	assert_non_null(strstr(gpuctl_errmsg(ctx), "MIG device 1:0 has no CUDA index"));
	expect_render(MIG, migs, GPUCTL_RENDER_ENV, GPUCTL_RENDER_INDICES, NULL);
	snprintf(buf, sizeof(buf),
	         "export CUDA_VISIBLE_DEVICES=%s,%s,%s\nexport CUDA_DEVICE_ORDER=PCI_BUS_ID\n",
	         G1M0, G1M2, u01);
	expect_render(MIG, migs, GPUCTL_RENDER_ENV, 0, buf);
	snprintf(buf, sizeof(buf), "--gpus '\"device=%s,%s,%s\"'\n", G1M0, G1M2, u01);
	expect_render(MIG, migs, GPUCTL_RENDER_DOCKER, 0, buf);
	expect_render(MIG, migs, GPUCTL_RENDER_DOCKER, GPUCTL_RENDER_INDICES,
	              "--gpus '\"device=1:0,1:2,0:1\"'\n");
	snprintf(buf, sizeof(buf), "NVIDIA_VISIBLE_DEVICES=%s,%s,%s\n", G1M0, G1M2, u01);
	expect_render(MIG, migs, GPUCTL_RENDER_NVIDIA, 0, buf);
	expect_render(MIG, migs, GPUCTL_RENDER_NVIDIA, GPUCTL_RENDER_INDICES,
	              "NVIDIA_VISIBLE_DEVICES=1:0,1:2,0:1\n");
	snprintf(buf, sizeof(buf), "nvidia.com/gpu=%s\nnvidia.com/gpu=%s\nnvidia.com/gpu=%s\n",
	         G1M0, G1M2, u01);
	expect_render(MIG, migs, GPUCTL_RENDER_CDI, 0, buf);
	expect_render(MIG, migs, GPUCTL_RENDER_CDI, GPUCTL_RENDER_INDICES,
	              "nvidia.com/gpu=1:0\nnvidia.com/gpu=1:2\nnvidia.com/gpu=0:1\n");
	snprintf(buf, sizeof(buf),
	         "resources:\n  limits:\n    nvidia.com/mig-3g.20gb: 1\n    nvidia.com/mig-1g.5gb: "
	         "2\nenv:\n" K8S_COMMENT
	         "  - name: NVIDIA_VISIBLE_DEVICES\n    value: \"%s,%s,%s\"\n",
	         G1M0, G1M2, u01);
	expect_render(MIG, migs, GPUCTL_RENDER_K8S, 0, buf);
	snprintf(buf, sizeof(buf),
	         "{\"devices\": [{\"index\": 1, \"uuid\": \"%s\", \"pci_bus_id\": "
	         "\"00000000:41:00.0\", \"name\": \"NVIDIA A100-SXM4-40GB\", \"mig\": {\"index\": "
	         "0, "
	         "\"uuid\": \"%s\", \"profile\": \"3g.20gb\"}}, {\"index\": 1, \"uuid\": \"%s\", "
	         "\"pci_bus_id\": \"00000000:41:00.0\", \"name\": \"NVIDIA A100-SXM4-40GB\", "
	         "\"mig\": {\"index\": 2, \"uuid\": \"%s\", \"profile\": \"1g.5gb\"}}, {\"index\": "
	         "0, "
	         "\"uuid\": \"%s\", \"pci_bus_id\": \"00000000:01:00.0\", \"name\": \"NVIDIA "
	         "A100-SXM4-40GB\", \"mig\": {\"index\": 1, \"uuid\": \"%s\", \"profile\": "
	         "\"1g.5gb\"}}]}\n",
	         mig_gpu_uuids[1], G1M0, mig_gpu_uuids[1], G1M2, mig_gpu_uuids[0], u01);
	expect_render(MIG, migs, GPUCTL_RENDER_JSON, 0, buf);

	/* GPU 3 (MIG off) mixed with a MIG device: k8s asks for both resources */
	snprintf(buf, sizeof(buf),
	         "resources:\n  limits:\n    nvidia.com/gpu: 1\n    nvidia.com/mig-2g.10gb: "
	         "1\nenv:\n" K8S_COMMENT "  - name: NVIDIA_VISIBLE_DEVICES\n    value: \"%s,%s\"\n",
	         mig_gpu_uuids[3], G1M1);
	expect_render(MIG, W(G(3), M(1, 1)), GPUCTL_RENDER_K8S, 0, buf);
	/* GPU 3 is CUDA index 0 in bus order: GPUs 0-2 are in MIG mode, CUDA does not count them */
	expect_render(MIG, W(G(3)), GPUCTL_RENDER_CUDA, GPUCTL_RENDER_INDICES,
	              "CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=0\n");
	expect_render(MIG, W(G(3)), GPUCTL_RENDER_NVIDIA, GPUCTL_RENDER_INDICES,
	              "NVIDIA_VISIBLE_DEVICES=3\n");
	/* a MIG-mode GPU whole: containers take it, CUDA cannot use it */
	expect_render(MIG, W(G(0)), GPUCTL_RENDER_CUDA, 0, NULL);
	assert_non_null(strstr(gpuctl_errmsg(ctx), "GPU 0 is in MIG mode"));
	expect_render(MIG, W(G(0)), GPUCTL_RENDER_ENV, GPUCTL_RENDER_INDICES, NULL);
	snprintf(buf, sizeof(buf), "NVIDIA_VISIBLE_DEVICES=%s\n", mig_gpu_uuids[0]);
	expect_render(MIG, W(G(0)), GPUCTL_RENDER_NVIDIA, 0, buf);
}

static void test_render_empty(void **state)
{
	(void)state;
	expect_render(EIGHT, NONE, GPUCTL_RENDER_CUDA, 0, "CUDA_VISIBLE_DEVICES=\n");
	expect_render(EIGHT, NONE, GPUCTL_RENDER_CUDA, GPUCTL_RENDER_INDICES,
	              "CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=\n");
	expect_render(EIGHT, NONE, GPUCTL_RENDER_ENV, 0,
	              "export CUDA_VISIBLE_DEVICES=\nexport CUDA_DEVICE_ORDER=PCI_BUS_ID\n");
	expect_render(EIGHT, NONE, GPUCTL_RENDER_DOCKER, 0, "-e NVIDIA_VISIBLE_DEVICES=void\n");
	expect_render(EIGHT, NONE, GPUCTL_RENDER_DOCKER, GPUCTL_RENDER_INDICES,
	              "-e NVIDIA_VISIBLE_DEVICES=void\n");
	expect_render(EIGHT, NONE, GPUCTL_RENDER_NVIDIA, 0, "NVIDIA_VISIBLE_DEVICES=void\n");
	expect_render(EIGHT, NONE, GPUCTL_RENDER_CDI, 0, "");
	expect_render(EIGHT, NONE, GPUCTL_RENDER_K8S, 0,
	              "resources:\n  limits:\n    nvidia.com/gpu: 0\nenv:\n" K8S_COMMENT
	              "  - name: NVIDIA_VISIBLE_DEVICES\n    value: \"void\"\n");
	expect_render(EIGHT, NONE, GPUCTL_RENDER_JSON, 0, "{\"devices\": []}\n");
}

static void test_render_errors_and_escaping(void **state)
{
	struct gpuctl_snapshot *s = snapshot_new_empty(2, GPUCTL_SNAP_MIG);
	struct gpuctl_devset *set = make_set(W(G(0), G(1)));
	char *text = NULL;

	(void)state;
	assert_non_null(s);
	gpu(s, 0, "GPU-aaaa", "00000000:01:00.0", "Odd \"name\"\\\x01\n", "8.0", 0, 0);
	gpu(s, 1, NULL, NULL, NULL, NULL, 0, 0); /* nothing known */
	assert_int_equal(gpuctl_devstr_render(ctx, s, set, GPUCTL_RENDER_JSON, 0, &text), 0);
	assert_string_equal(text, "{\"devices\": [{\"index\": 0, \"uuid\": \"GPU-aaaa\", "
	                          "\"pci_bus_id\": \"00000000:01:00.0\", \"name\": \"Odd "
	                          "\\\"name\\\"\\\\\\u0001\\n\", \"mig\": null}, {\"index\": 1, "
	                          "\"uuid\": null, \"pci_bus_id\": null, \"name\": null, \"mig\": "
	                          "null}]}\n");
	free(text);
	text = (char *)0x1;
	/* GPU 1 has no UUID: no UUID form can name it; indices can */
	assert_int_equal(gpuctl_devstr_render(ctx, s, set, GPUCTL_RENDER_NVIDIA, 0, &text),
	                 -EINVAL);
	assert_non_null(strstr(gpuctl_errmsg(ctx), "device 1 has no UUID"));
	assert_ptr_equal(text, (char *)0x1);
	assert_int_equal(gpuctl_devstr_render(ctx, s, set, GPUCTL_RENDER_NVIDIA,
	                                      GPUCTL_RENDER_INDICES, &text),
	                 0);
	assert_string_equal(text, "NVIDIA_VISIBLE_DEVICES=0,1\n");
	free(text);
	text = (char *)0x1;
	assert_int_equal(gpuctl_devstr_render(ctx, s, set, (enum gpuctl_render)99, 0, &text),
	                 -EINVAL);
	assert_int_equal(gpuctl_devstr_render(ctx, s, set, GPUCTL_RENDER_CUDA, 0x80, &text),
	                 -EINVAL);
	assert_int_equal(gpuctl_devstr_render(ctx, s, NULL, GPUCTL_RENDER_CUDA, 0, &text), -EINVAL);
	assert_ptr_equal(text, (char *)0x1);
	gpuctl_devset_free(set);
	/* a device the snapshot does not have */
	set = make_set(W(G(5)));
	assert_int_equal(gpuctl_devstr_render(ctx, s, set, GPUCTL_RENDER_JSON, 0, &text), -EINVAL);
	assert_int_equal(gpuctl_devstr_render(ctx, s, set, GPUCTL_RENDER_CDI, 0, &text), -EINVAL);
	gpuctl_devset_free(set);
	/* a UUID with characters no device string can carry */
	assert_int_equal(snapshot_set_str(s, 1, GPUCTL_F_UUID, "GPU-a'b,c"), 0);
	set = make_set(W(G(1)));
	assert_int_equal(gpuctl_devstr_render(ctx, s, set, GPUCTL_RENDER_DOCKER, 0, &text),
	                 -EINVAL);
	assert_ptr_equal(text, (char *)0x1);
	gpuctl_devset_free(set);
	gpuctl_snapshot_free(s);
}

static void test_render_lookup(void **state)
{
	(void)state;
	assert_int_equal(gpuctl_render_lookup("cuda"), GPUCTL_RENDER_CUDA);
	assert_int_equal(gpuctl_render_lookup("env"), GPUCTL_RENDER_ENV);
	assert_int_equal(gpuctl_render_lookup("docker"), GPUCTL_RENDER_DOCKER);
	assert_int_equal(gpuctl_render_lookup("nvidia"), GPUCTL_RENDER_NVIDIA);
	assert_int_equal(gpuctl_render_lookup("cdi"), GPUCTL_RENDER_CDI);
	assert_int_equal(gpuctl_render_lookup("k8s"), GPUCTL_RENDER_K8S);
	assert_int_equal(gpuctl_render_lookup("json"), GPUCTL_RENDER_JSON);
	assert_int_equal(gpuctl_render_lookup("JSON"), GPUCTL_RENDER_JSON);
	assert_int_equal(gpuctl_render_lookup("yaml"), -EINVAL);
	assert_int_equal(gpuctl_render_lookup(""), -EINVAL);
	assert_int_equal(gpuctl_render_lookup(NULL), -EINVAL);
}

/* ---- Round trips: render, parse back, same set in the same order ---- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Every device of a machine that a form can express: whole GPUs (not in MIG mode when
 * no_mig_mode), and MIG devices when with_migs. */
static size_t pool(const struct gpuctl_snapshot *s, bool no_mig_mode, bool with_migs,
                   struct want *out)
{
	size_t n = 0;

	for (size_t g = 0; g < gpuctl_snapshot_gpu_count(s); g++) {
		const struct gpuctl_gpu *gp = gpuctl_snapshot_gpu(s, g);
		int64_t mm = 0;

		if (!(no_mig_mode && gpuctl_gpu_int(gp, GPUCTL_F_MIG_MODE, &mm) == 0 && mm))
			out[n++] = (struct want){(int)g, -1};
		for (size_t m = 0; with_migs && m < gpuctl_gpu_mig_count(gp); m++)
			out[n++] = (struct want){(int)g, (int)m};
	}
	out[n] = (struct want){-1, 0};
	return n;
}

/* A random subset of pool in random order, into out (terminated). */
static void random_set(const struct want *p, size_t n, struct want *out)
{
	struct want tmp[64];
	size_t k = n ? (size_t)(rng() % (n + 1)) : 0;

	memcpy(tmp, p, n * sizeof(*tmp));
	for (size_t i = 0; i < k; i++) {
		size_t j = i + (size_t)(rng() % (n - i));
		struct want t = tmp[i];

		tmp[i] = tmp[j];
		tmp[j] = t;
		out[i] = tmp[i];
	}
	out[k] = (struct want){-1, 0};
}

static const char *after(const char *text, const char *prefix)
{
	size_t n = strlen(prefix);

	if (strncmp(text, prefix, n) != 0)
		fail_msg("'%s' does not start with '%s'", text, prefix);
	return text + n;
}

static void roundtrip_one(enum machine mc, const struct want *w, enum gpuctl_render form,
                          unsigned flags, const char *prefix, const char *order)
{
	const struct gpuctl_snapshot *s = machines[mc];
	struct gpuctl_devset *set = make_set(w), *back = NULL;
	char *text = NULL, what[200];
	int ord[64];
	size_t len;
	char *value;

	if (gpuctl_devstr_render(ctx, s, set, form, flags, &text) < 0)
		fail_msg("machine %d: render %d/%u: %s", mc, form, flags, gpuctl_errmsg(ctx));
	value = strdup(after(text, prefix));
	assert_non_null(value);
	len = strlen(value);
	assert_true(len > 0 && value[len - 1] == '\n');
	value[len - 1] = '\0';
	snprintf(what, sizeof(what), "machine %d: '%s' order %s", mc, text,
	         order ? order : "(unset)");
	if (form == GPUCTL_RENDER_NVIDIA) {
		assert_int_equal(gpuctl_devstr_parse_nvidia(ctx, s, value, &back), 0);
	} else {
		assert_int_equal(gpuctl_devstr_parse_cuda(ctx, s, value, order, &back), 0);
		/* what cudaSetDevice takes inside the child: the position in the list */
		assert_int_equal(gpuctl_devset_cuda_ordinals(ctx, s, set, value, order, ord), 0);
		for (size_t i = 0; i < gpuctl_devset_count(set); i++)
			assert_int_equal(ord[i], (int)i);
	}
	check_set(back, w, what);
	gpuctl_devset_free(back);
	gpuctl_devset_free(set);
	free(value);
	free(text);
}

static void test_roundtrip(void **state)
{
	struct want p_uuid[64], p_idx[64], p_all[64], w[64];

	(void)state;
	for (int mc = 0; mc < N_MACHINES; mc++) {
		const struct gpuctl_snapshot *s = machines[mc];
		size_t n_uuid = pool(s, true, true, p_uuid);
		size_t n_idx = pool(s, true, false, p_idx);
		size_t n_all = pool(s, false, true, p_all);

		for (int it = 0; it < 300; it++) {
			random_set(p_uuid, n_uuid, w);
			roundtrip_one(mc, w, GPUCTL_RENDER_CUDA, 0, "CUDA_VISIBLE_DEVICES=", NULL);
			roundtrip_one(mc, w, GPUCTL_RENDER_CUDA, 0,
			              "CUDA_VISIBLE_DEVICES=", "PCI_BUS_ID");
			random_set(p_idx, n_idx, w);
			roundtrip_one(
			        mc, w, GPUCTL_RENDER_CUDA, GPUCTL_RENDER_INDICES,
			        "CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=", "PCI_BUS_ID");
			random_set(p_all, n_all, w);
			roundtrip_one(mc, w, GPUCTL_RENDER_NVIDIA, 0,
			              "NVIDIA_VISIBLE_DEVICES=", NULL);
			roundtrip_one(mc, w, GPUCTL_RENDER_NVIDIA, GPUCTL_RENDER_INDICES,
			              "NVIDIA_VISIBLE_DEVICES=", NULL);
		}
	}
}

/* ---- CUDA ordinals ---- */

static void expect_ordinals(enum machine mc, const struct want *w, const char *visible,
                            const char *order, const int *want)
{
	struct gpuctl_devset *set = make_set(w);
	int got[16];

	assert_int_equal(gpuctl_devset_cuda_ordinals(ctx, machines[mc], set, visible, order, got),
	                 0);
	for (size_t i = 0; i < gpuctl_devset_count(set); i++)
		if (got[i] != want[i])
			fail_msg("'%s': device %zu has ordinal %d, want %d",
			         visible ? visible : "(unset)", i, got[i], want[i]);
	gpuctl_devset_free(set);
}

#define O(...) ((const int[]){__VA_ARGS__})

static void test_ordinals(void **state)
{
	struct gpuctl_devset *empty = NULL;

	(void)state;
	expect_ordinals(EIGHT, W(G(5), G(2)), NULL, NULL, O(5, 2));
	expect_ordinals(EIGHT, W(G(5), G(2)), "2,5", NULL, O(1, 0));
	expect_ordinals(EIGHT, W(G(5), G(2)), "5", NULL, O(0, -1));
	expect_ordinals(EIGHT, W(G(5), G(2)), "", NULL, O(-1, -1));
	expect_ordinals(EIGHT, W(G(5), G(2)), "5,2,5", NULL, O(-1, -1)); /* duplicate: none */
	expect_ordinals(EIGHT, W(G(5), G(2)), "GPU-55555555,GPU-abcdef02", NULL, O(0, 1));
	expect_ordinals(WORK, W(G(0), G(1)), NULL, NULL, O(1, 0)); /* A6000 is CUDA 0 */
	expect_ordinals(WORK, W(G(0), G(1)), NULL, "PCI_BUS_ID", O(0, 1));
	expect_ordinals(WORK, W(G(0), G(1)), "1", NULL, O(0, -1));
	expect_ordinals(MIG, W(M(1, 0), G(3)), NULL, NULL, O(-1, 0));
	expect_ordinals(MIG, W(M(1, 0), G(3)), G1M0, NULL, O(0, -1));
	expect_ordinals(MIG, W(M(1, 0), G(3)), "GPU-d4c3b2a1," G1M0, NULL, O(1, 0));
	assert_int_equal(gpuctl_devset_new(&empty), 0);
	assert_int_equal(gpuctl_devset_cuda_ordinals(ctx, machines[EIGHT], empty, "0", NULL, NULL),
	                 0);
	gpuctl_devset_free(empty);
}

/* ---- The outer allocation ---- */

static void expect_outer(enum machine mc, const struct want *want, const char *source)
{
	struct gpuctl_devset *set = (struct gpuctl_devset *)0x1;
	const char *src = "untouched";
	int r = gpuctl_outer_allocation(ctx, machines[mc], &set, &src);

	if (!want) {
		if (r != -EINVAL)
			fail_msg("returned %d, want -EINVAL", r);
		assert_ptr_equal(set, (struct gpuctl_devset *)0x1);
		assert_string_equal(src, "untouched");
		if (!strstr(gpuctl_errmsg(ctx), source))
			fail_msg("message '%s' lacks '%s'", gpuctl_errmsg(ctx), source);
		clear_env();
		return;
	}
	if (r != 0)
		fail_msg("returned %d: %s", r, gpuctl_errmsg(ctx));
	if (!source) {
		assert_null(set);
		assert_null(src);
	} else {
		assert_non_null(set);
		assert_string_equal(src, source);
		check_set(set, want, source);
		gpuctl_devset_free(set);
	}
	clear_env();
}

static void set_env(const char *name, const char *value)
{
	assert_int_equal(setenv(name, value, 1), 0);
}

static void test_outer_single(void **state)
{
	(void)state;
	clear_env();
	expect_outer(EIGHT, NONE, NULL); /* nothing set */

	set_env("CUDA_VISIBLE_DEVICES", "5,3,1");
	expect_outer(EIGHT, W(G(5), G(3), G(1)), "CUDA_VISIBLE_DEVICES");
	set_env("CUDA_VISIBLE_DEVICES", "");
	expect_outer(EIGHT, NONE, "CUDA_VISIBLE_DEVICES");
	set_env("CUDA_VISIBLE_DEVICES", "0,2,-1,1"); /* never an error: CUDA's reading */
	expect_outer(EIGHT, W(G(0), G(2)), "CUDA_VISIBLE_DEVICES");
	set_env("CUDA_VISIBLE_DEVICES", "1,0"); /* FASTEST_FIRST: 0 is the A6000 */
	expect_outer(WORK, W(G(0), G(1)), "CUDA_VISIBLE_DEVICES");
	set_env("CUDA_VISIBLE_DEVICES", "1,0");
	set_env("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
	expect_outer(WORK, W(G(1), G(0)), "CUDA_VISIBLE_DEVICES");
	set_env("CUDA_DEVICE_ORDER", "PCI_BUS_ID"); /* the order alone is no allocation */
	expect_outer(WORK, NONE, NULL);

	set_env("NVIDIA_VISIBLE_DEVICES", "3,1");
	expect_outer(EIGHT, W(G(3), G(1)), "NVIDIA_VISIBLE_DEVICES");
	set_env("NVIDIA_VISIBLE_DEVICES", "all");
	expect_outer(EIGHT, W(G(0), G(1), G(2), G(3), G(4), G(5), G(6), G(7)),
	             "NVIDIA_VISIBLE_DEVICES");
	set_env("NVIDIA_VISIBLE_DEVICES", "void");
	expect_outer(EIGHT, NONE, "NVIDIA_VISIBLE_DEVICES");
	set_env("NVIDIA_VISIBLE_DEVICES", "junk");
	expect_outer(EIGHT, NULL, "NVIDIA_VISIBLE_DEVICES: 'junk': unknown device");
	set_env("NVIDIA_VISIBLE_DEVICES", "4,6"); /* host indices seen from a 2-GPU container */
	expect_outer(WORK, W(G(0), G(1)), "NVIDIA_VISIBLE_DEVICES");
	set_env("NVIDIA_VISIBLE_DEVICES", "6"); /* 1 GPU named, 2 seen: cannot be read */
	expect_outer(WORK, NULL, "NVIDIA_VISIBLE_DEVICES: '6': unknown device");

	set_env("SLURM_JOB_GPUS", "4,5,6");
	expect_outer(EIGHT, W(G(4), G(5), G(6)), "SLURM_JOB_GPUS");
	set_env("SLURM_STEP_GPUS", " 6 ,2");
	expect_outer(EIGHT, W(G(6), G(2)), "SLURM_STEP_GPUS");
	set_env("SLURM_JOB_GPUS", "");
	expect_outer(EIGHT, NONE, "SLURM_JOB_GPUS");
	set_env("SLURM_JOB_GPUS", "1,1,2");
	expect_outer(EIGHT, W(G(1), G(2)), "SLURM_JOB_GPUS");
	set_env("SLURM_JOB_GPUS", "0-3");
	expect_outer(EIGHT, NULL, "SLURM_JOB_GPUS: '0-3': not a GPU index");
	set_env("SLURM_JOB_GPUS", "0,,1");
	expect_outer(EIGHT, NULL, "SLURM_JOB_GPUS: '': not a GPU index");
	set_env("SLURM_JOB_GPUS", "GPU-abcdef01-1111-2222-3333-444444444444");
	expect_outer(EIGHT, NULL, "SLURM_JOB_GPUS");
	set_env("SLURM_JOB_GPUS", "NoDevFiles");
	expect_outer(EIGHT, NULL, "SLURM_JOB_GPUS: 'NoDevFiles'");
	set_env("SLURM_JOB_GPUS", "9");
	expect_outer(EIGHT, NULL, "SLURM_JOB_GPUS: '9': Slurm's GPU 9 is not among the 8 GPUs");
	/* cgroup-renumbered under AutoDetect: which of the node's GPUs NVML shows is unknown */
	set_env("SLURM_STEP_GPUS", "5,7");
	expect_outer(WORK, NULL, "SLURM_STEP_GPUS: '5': Slurm's GPU 5 is not among the 2 GPUs");
}

/* Slurm's GPU numbers are places in the node's gres.conf; the device file's minor number names
 * the GPU. Linux's fixed character devices stand in for /dev/nvidiaN: /dev/null is 1:3,
 * /dev/zero 1:5, /dev/full 1:7 (Documentation/admin-guide/devices.txt), so the GPUs whose
 * minor numbers are 3, 5 and 7. */
static void test_outer_slurm_gres(void **state)
{
	char conf[128];

	(void)state;
	clear_env();
	write_gres("# a node whose gres.conf lists three GPUs out of PCI order\n"
	           "NodeName=gpu[01-04] Name=gpu Type=a100 File=/dev/full Cores=0-1\n"
	           "NodeName=gpu[01-04] Name=gpu Type=a100 File=/dev/null \\\n"
	           "    Links=0,-1\n"
	           "nodename=gpu[01-04] name=gpu type=a100 file=/dev/zero\n"
	           "NodeName=other Name=gpu File=/dev/tty\n");
	/* (expect_outer clears the variables after each reading) */
	set_env("SLURMD_NODENAME", "gpu02");
	set_env("SLURM_STEP_GPUS", "0,2");
	expect_outer(EIGHT, W(G(7), G(5)), "SLURM_STEP_GPUS");
	/* Slurm's CUDA_VISIBLE_DEVICES beside it is Slurm's numbering, not CUDA's */
	set_env("SLURMD_NODENAME", "gpu02");
	set_env("SLURM_STEP_GPUS", "0,2");
	set_env("CUDA_VISIBLE_DEVICES", "0,2");
	expect_outer(EIGHT, W(G(7), G(5)), "SLURM_STEP_GPUS");
	set_env("SLURMD_NODENAME", "gpu02");
	set_env("SLURM_STEP_GPUS", "0,2");
	set_env("CUDA_VISIBLE_DEVICES", "0,1"); /* devices constrained: Slurm writes 0..n-1 */
	expect_outer(EIGHT, W(G(7), G(5)), "SLURM_STEP_GPUS");
	set_env("SLURMD_NODENAME", "gpu02");
	set_env("SLURM_JOB_GPUS", "0,2");
	set_env("CUDA_VISIBLE_DEVICES", "3"); /* the user's own choice: CUDA's numbering */
	expect_outer(EIGHT, NONE, "CUDA_VISIBLE_DEVICES+SLURM_JOB_GPUS");
	set_env("SLURMD_NODENAME", "gpu02");
	set_env("SLURM_JOB_GPUS", "0,2");
	set_env("CUDA_VISIBLE_DEVICES", "7,5,3");
	expect_outer(EIGHT, W(G(7), G(5)), "CUDA_VISIBLE_DEVICES+SLURM_JOB_GPUS");
	set_env("SLURMD_NODENAME", "gpu02");
	set_env("SLURM_STEP_GPUS", "1");
	expect_outer(EIGHT, W(G(3)), "SLURM_STEP_GPUS");
	set_env("SLURMD_NODENAME", "gpu02");
	set_env("SLURM_STEP_GPUS", "3");
	expect_outer(EIGHT, NULL, "SLURM_STEP_GPUS: '3': ");
	set_env("SLURMD_NODENAME", "gpu02");
	set_env("SLURM_STEP_GPUS", "3");
	expect_outer(EIGHT, NULL, "lists 3 GPUs for node gpu02");

	/* another node's records only: nothing to map with */
	set_env("SLURMD_NODENAME", "gpu05");
	set_env("SLURM_STEP_GPUS", "0");
	expect_outer(EIGHT, NULL, "has no gpu device files (File=) for node gpu05");
	/* a device file that is no character device */
	write_gres("Name=gpu File=/etc/hostname\n");
	set_env("SLURM_STEP_GPUS", "0");
	expect_outer(EIGHT, NULL, "/etc/hostname (Slurm's GPU 0): not a character device");
	/* MIG records cannot be mapped */
	write_gres("Name=gpu MultipleFiles=/dev/null,/dev/zero\n");
	set_env("SLURM_STEP_GPUS", "0");
	expect_outer(EIGHT, NULL, "MIG records (MultipleFiles=)");
	/* a minor number no GPU has (/dev/random is 1:8) */
	write_gres("Name=gpu File=/dev/random\n");
	set_env("SLURM_STEP_GPUS", "0");
	expect_outer(EIGHT, NULL, "(Slurm's GPU 0, minor 8) is no GPU NVML sees");
	/* what cannot be read is refused, never guessed */
	write_gres("Include /etc/slurm/more.conf\n");
	set_env("SLURM_STEP_GPUS", "0");
	expect_outer(EIGHT, NULL, "cannot map Slurm's GPU numbers");
	set_env("SLURM_CONF", "/nonexistent/slurm.conf");
	set_env("SLURM_STEP_GPUS", "0");
	expect_outer(EIGHT, NULL, "/nonexistent/gres.conf");
	snprintf(conf, sizeof(conf), "%s/slurm.conf", slurm_dir);
	set_env("SLURM_CONF", conf);
	write_gres("AutoDetect=nvml\n");
}

static void test_outer_combined(void **state)
{
	(void)state;
	clear_env();
	set_env("CUDA_VISIBLE_DEVICES", "5,3,1");
	set_env("SLURM_JOB_GPUS", "1,2,3");
	expect_outer(EIGHT, W(G(3), G(1)), "CUDA_VISIBLE_DEVICES+SLURM_JOB_GPUS");

	set_env("SLURM_STEP_GPUS", "3");
	set_env("SLURM_JOB_GPUS", "1,3");
	expect_outer(EIGHT, W(G(3)), "SLURM_STEP_GPUS+SLURM_JOB_GPUS");

	set_env("NVIDIA_VISIBLE_DEVICES", "7,6,5,4");
	set_env("SLURM_JOB_GPUS", "4,5");
	expect_outer(EIGHT, W(G(5), G(4)), "NVIDIA_VISIBLE_DEVICES+SLURM_JOB_GPUS");

	set_env("CUDA_VISIBLE_DEVICES", "GPU-1234a,GPU-55555555,GPU-66666666");
	set_env("NVIDIA_VISIBLE_DEVICES", "all");
	set_env("SLURM_STEP_GPUS", "6,4");
	set_env("SLURM_JOB_GPUS", "4,5,6");
	expect_outer(EIGHT, W(G(4), G(6)),
	             "CUDA_VISIBLE_DEVICES+NVIDIA_VISIBLE_DEVICES+SLURM_STEP_GPUS+SLURM_JOB_GPUS");

	set_env("CUDA_VISIBLE_DEVICES", "");
	set_env("SLURM_JOB_GPUS", "0,1");
	expect_outer(EIGHT, NONE, "CUDA_VISIBLE_DEVICES+SLURM_JOB_GPUS");

	/* a whole GPU admits its MIG devices; a MIG device does not admit its GPU */
	set_env("CUDA_VISIBLE_DEVICES", G1M0 ",MIG-c62a9856-8a32-4dab-0eda-f1dd6a7ecb30");
	set_env("NVIDIA_VISIBLE_DEVICES", "1,3");
	expect_outer(MIG, W(M(1, 0)), "CUDA_VISIBLE_DEVICES+NVIDIA_VISIBLE_DEVICES");
	set_env("NVIDIA_VISIBLE_DEVICES", "1:0,1:1");
	set_env("SLURM_JOB_GPUS", "1");
	expect_outer(MIG, W(M(1, 0), M(1, 1)), "NVIDIA_VISIBLE_DEVICES+SLURM_JOB_GPUS");
	set_env("NVIDIA_VISIBLE_DEVICES", "1:0");
	set_env("SLURM_JOB_GPUS", "1,3");
	set_env("CUDA_VISIBLE_DEVICES", "GPU-d4c3b2a1");
	expect_outer(MIG, NONE, "CUDA_VISIBLE_DEVICES+NVIDIA_VISIBLE_DEVICES+SLURM_JOB_GPUS");

	/* one bad variable fails the whole reading */
	set_env("CUDA_VISIBLE_DEVICES", "0");
	set_env("SLURM_JOB_GPUS", "x");
	expect_outer(EIGHT, NULL, "SLURM_JOB_GPUS: 'x'");
	assert_int_equal(gpuctl_outer_allocation(ctx, NULL, NULL, NULL), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_devset),
	        cmocka_unit_test(test_cuda_table),
	        cmocka_unit_test(test_cuda_logging),
	        cmocka_unit_test(test_nvidia_table),
	        cmocka_unit_test(test_nvidia_message),
	        cmocka_unit_test(test_render_two_gpus),
	        cmocka_unit_test(test_render_mig),
	        cmocka_unit_test(test_cuda_mig_limit),
	        cmocka_unit_test(test_render_empty),
	        cmocka_unit_test(test_render_errors_and_escaping),
	        cmocka_unit_test(test_render_lookup),
	        cmocka_unit_test(test_roundtrip),
	        cmocka_unit_test(test_ordinals),
	        cmocka_unit_test(test_outer_single),
	        cmocka_unit_test(test_outer_combined),
	        cmocka_unit_test(test_outer_slurm_gres),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
