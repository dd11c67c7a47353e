// SPDX-License-Identifier: MIT
/*
 * test-topo.c: nvidia-smi level codes and the bandwidth model against NVIDIA's published NVLink
 * totals and NCCL's PCIe figures (docs/topology.md lists the sources).
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gpuctl/gpuctl.h"
#include "snapshot-internal.h"
#include "test-fixtures.h"
#include "topo.h"

#define assert_gbps(got, want) assert_true(fabs((got) - (want)) < 1e-9)

/* The unknown CPU's figures (Skylake's, docs/topology.md) and NCCL's for others. */
static const struct topo_cpu cpu_default = {10.0, 1.2};
static const struct topo_cpu cpu_broadwell = {6.0, 1.2}, cpu_amd = {16.0, 1.0};
static const struct topo_cpu cpu_srp = {22.0, 1.2}, cpu_grace = {6.0, 1.0};

static void test_level_codes(void **state)
{
	(void)state;
	assert_string_equal(gpuctl_topo_level_code(GPUCTL_TOPO_INTERNAL), "PIX");
	assert_string_equal(gpuctl_topo_level_code(GPUCTL_TOPO_SINGLE), "PIX");
	assert_string_equal(gpuctl_topo_level_code(GPUCTL_TOPO_MULTIPLE), "PXB");
	assert_string_equal(gpuctl_topo_level_code(GPUCTL_TOPO_HOSTBRIDGE), "PHB");
	assert_string_equal(gpuctl_topo_level_code(GPUCTL_TOPO_NODE), "NODE");
	assert_string_equal(gpuctl_topo_level_code(GPUCTL_TOPO_SYSTEM), "SYS");
	assert_string_equal(gpuctl_topo_level_code(GPUCTL_TOPO_UNKNOWN), "N/A");
	assert_string_equal(gpuctl_topo_level_code(35), "N/A");
}

/* Published per-GPU totals (both directions) over the GPU's links: total / 2 per direction. */
static void test_nvlink_published_totals(void **state)
{
	static const struct {
		const char *arch;
		const char *cc;
		int links;
		double total_gbps;
	} cases[] = {
	        {"Pascal", "6.0", 4, 160.0},       /* P100 SXM2 */
	        {"Volta", "7.0", 6, 300.0},        /* V100 SXM2 */
	        {"Ampere", "8.0", 12, 600.0},      /* A100 SXM4 */
	        {"Hopper", "9.0", 18, 900.0},      /* H100 SXM5 */
	        {"Blackwell", "10.0", 18, 1800.0}, /* B200 / GB200 */
	        {"Ampere", "8.6", 4, 112.5},       /* RTX A6000 / A40 NVLink bridge */
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct topo_end e = {cases[i].arch, cases[i].cc, 4, 16, false};
		struct gpuctl_link l = {.level = GPUCTL_TOPO_SYSTEM,
		                        .nvlinks = cases[i].links,
		                        .p2p = GPUCTL_P2P_OK};

		assert_gbps(topo_pair_gbps(&e, &e, &l, &cpu_default), cases[i].total_gbps / 2);
		l.nvswitch = true; /* through NVSwitches: the same per-GPU figure */
		assert_gbps(topo_pair_gbps(&e, &e, &l, &cpu_default), cases[i].total_gbps / 2);
	}
}

static void test_nvlink_mixed_and_unknown(void **state)
{
	struct topo_end v = {"Volta", "7.0", 3, 16, false}, p = {"Pascal", "6.0", 3, 16, false};
	struct topo_end u = {NULL, NULL, 0, 0, false};
	struct gpuctl_link l = {.level = GPUCTL_TOPO_SYSTEM, .nvlinks = 2, .p2p = GPUCTL_P2P_OK};

	(void)state;
	assert_gbps(topo_pair_gbps(&v, &p, &l, &cpu_default), 40.0); /* the slower end */
	assert_gbps(topo_pair_gbps(&u, &u, &l, &cpu_default), 40.0); /* unknown: NVLink 1 speed */
}

static void test_pcie_rates(void **state)
{
	(void)state;
	assert_gbps(topo_pcie_gbps(3, 16), 12.0);
	assert_gbps(topo_pcie_gbps(4, 16), 24.0);
	assert_gbps(topo_pcie_gbps(5, 16), 48.0);
	assert_gbps(topo_pcie_gbps(4, 8), 12.0);
	assert_gbps(topo_pcie_gbps(1, 16), 3.0);
	assert_gbps(topo_pcie_gbps(0, 0), 12.0); /* unknown: Gen3 x16 */
}

static double pcie_pair_on(const struct topo_cpu *cpu, int gen_a, int gen_b, int level, int p2p)
{
	struct topo_end a = {"Ampere", "8.0", gen_a, 16, false},
	                b = {"Ampere", "8.0", gen_b, 16, false};
	struct gpuctl_link l = {.level = level, .nvlinks = 0, .p2p = p2p};

	return topo_pair_gbps(&a, &b, &l, cpu);
}

static double pcie_pair(int gen_a, int gen_b, int level, int p2p)
{
	return pcie_pair_on(&cpu_default, gen_a, gen_b, level, p2p);
}

static void test_pcie_paths(void **state)
{
	(void)state;
	/* same switch: the slower GPU's link */
	assert_gbps(pcie_pair(4, 4, GPUCTL_TOPO_SINGLE, GPUCTL_P2P_OK), 24.0);
	assert_gbps(pcie_pair(4, 3, GPUCTL_TOPO_MULTIPLE, GPUCTL_P2P_OK), 12.0);
	assert_gbps(pcie_pair(4, 4, GPUCTL_TOPO_INTERNAL, GPUCTL_P2P_OK), 24.0);
	/* through a CPU root complex: NCCL's 6/5 overhead */
	assert_gbps(pcie_pair(4, 4, GPUCTL_TOPO_HOSTBRIDGE, GPUCTL_P2P_OK), 20.0);
	assert_gbps(pcie_pair(4, 4, GPUCTL_TOPO_NODE, GPUCTL_P2P_OK), 20.0);
	/* across sockets: capped at the SMP link */
	assert_gbps(pcie_pair(4, 4, GPUCTL_TOPO_SYSTEM, GPUCTL_P2P_OK), 10.0 / 1.2);
	assert_gbps(pcie_pair(4, 4, GPUCTL_TOPO_UNKNOWN, GPUCTL_P2P_OK), 10.0 / 1.2);
	/* the ladder nvidia-smi implies holds at every generation */
	for (int gen = 3; gen <= 5; gen++) {
		double pix = pcie_pair(gen, gen, GPUCTL_TOPO_SINGLE, GPUCTL_P2P_OK);
		double phb = pcie_pair(gen, gen, GPUCTL_TOPO_HOSTBRIDGE, GPUCTL_P2P_OK);
		double sys = pcie_pair(gen, gen, GPUCTL_TOPO_SYSTEM, GPUCTL_P2P_OK);

		assert_true(pix > phb);
		assert_true(phb > sys);
	}
}

static void test_pcie_without_p2p(void **state)
{
	(void)state;
	/* one switch, no P2P: both directions cross the switch uplink (NVIDIA/nccl#1086) */
	assert_gbps(pcie_pair(4, 4, GPUCTL_TOPO_SINGLE, GPUCTL_P2P_GPU_NOT_SUPPORTED), 12.0);
	assert_gbps(pcie_pair(3, 3, GPUCTL_TOPO_SINGLE, GPUCTL_P2P_CHIPSET_NOT_SUPPORTED), 6.0);
	/* ...which is no faster than going across sockets */
	assert_true(pcie_pair(3, 3, GPUCTL_TOPO_SINGLE, GPUCTL_P2P_NOT_SUPPORTED) <=
	            pcie_pair(3, 3, GPUCTL_TOPO_SYSTEM, GPUCTL_P2P_NOT_SUPPORTED));
	/* unknown P2P status is taken as possible */
	assert_gbps(pcie_pair(4, 4, GPUCTL_TOPO_SINGLE, GPUCTL_P2P_UNKNOWN), 24.0);
}

/* NCCL's per-CPU figures (src/graph/topo.h): the inter-socket link caps a SYS path, and only
 * Intel root complexes charge 6/5 for P2P. */
static void test_pcie_paths_per_cpu(void **state)
{
	(void)state;
	/* DGX-1 (Broadwell, Gen3): SYS is min(12, 6) / 1.2 = 5; PHB 12 / 1.2 = 10 */
	assert_gbps(pcie_pair_on(&cpu_broadwell, 3, 3, GPUCTL_TOPO_SYSTEM, GPUCTL_P2P_OK), 5.0);
	assert_gbps(pcie_pair_on(&cpu_broadwell, 3, 3, GPUCTL_TOPO_HOSTBRIDGE, GPUCTL_P2P_OK),
	            10.0);
	/* AMD: no P2P overhead; SYS capped at 16 */
	assert_gbps(pcie_pair_on(&cpu_amd, 4, 4, GPUCTL_TOPO_SYSTEM, GPUCTL_P2P_OK), 16.0);
	assert_gbps(pcie_pair_on(&cpu_amd, 4, 4, GPUCTL_TOPO_NODE, GPUCTL_P2P_OK), 24.0);
	/* the RTX 4090 case of NVIDIA/go-gpuallocator#17 on AMD: across sockets (16) beats a
	 * same-switch pair without P2P (24 / 2 = 12) */
	assert_true(pcie_pair_on(&cpu_amd, 4, 4, GPUCTL_TOPO_SYSTEM, GPUCTL_P2P_GPU_NOT_SUPPORTED) >
	            pcie_pair_on(&cpu_amd, 4, 4, GPUCTL_TOPO_SINGLE, GPUCTL_P2P_GPU_NOT_SUPPORTED));
	/* Sapphire Rapids, Gen5: SYS min(48, 22) / 1.2 */
	assert_gbps(pcie_pair_on(&cpu_srp, 5, 5, GPUCTL_TOPO_SYSTEM, GPUCTL_P2P_OK), 22.0 / 1.2);
	/* one switch never touches the CPU */
	assert_gbps(pcie_pair_on(&cpu_broadwell, 3, 3, GPUCTL_TOPO_SINGLE, GPUCTL_P2P_OK), 12.0);
}

/* A GPU on NVLink-C2C (Grace): 450 GB/s to its CPU; across Grace sockets NCCL's Arm figure. */
static void test_c2c(void **state)
{
	struct topo_end g = {"Blackwell", "10.0", 5, 16, true};
	struct gpuctl_link l = {.level = GPUCTL_TOPO_NODE, .nvlinks = 0, .p2p = GPUCTL_P2P_OK};

	(void)state;
	assert_gbps(topo_pair_gbps(&g, &g, &l, &cpu_grace), 450.0);
	l.level = GPUCTL_TOPO_SYSTEM;
	assert_gbps(topo_pair_gbps(&g, &g, &l, &cpu_grace), 6.0);
	l.nvlinks = 18; /* NVLink wins whenever there is one */
	assert_gbps(topo_pair_gbps(&g, &g, &l, &cpu_grace), 900.0);
}

static void test_fill_snapshot(void **state)
{
	struct gpuctl_snapshot *s = snapshot_new_empty(3, GPUCTL_SNAP_TOPOLOGY);
	struct gpuctl_link l, got = GPUCTL_LINK_INIT;

	(void)state;
	assert_non_null(s);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(snapshot_set_str(s, i, GPUCTL_F_ARCHITECTURE, "Hopper"), 0);
		assert_int_equal(snapshot_set_int(s, i, GPUCTL_F_PCIE_GEN_MAX, 5), 0);
		assert_int_equal(snapshot_set_int(s, i, GPUCTL_F_PCIE_WIDTH_MAX, 16), 0);
	}
	l = (struct gpuctl_link){
	        .level = GPUCTL_TOPO_SYSTEM, .nvlinks = 18, .nvswitch = true, .p2p = GPUCTL_P2P_OK};
	assert_int_equal(snapshot_set_link(s, 0, 1, &l), 0);
	l = (struct gpuctl_link){.level = GPUCTL_TOPO_SINGLE, .p2p = GPUCTL_P2P_OK};
	assert_int_equal(snapshot_set_link(s, 1, 2, &l), 0);
	assert_int_equal(snapshot_set_link(s, 1, 1, &l), -EINVAL);
	topo_fill_bandwidth(s);
	assert_int_equal(gpuctl_snapshot_link(s, 1, 0, &got), 0);
	assert_gbps(got.bandwidth, 450.0);
	assert_true(got.nvswitch);
	assert_int_equal(gpuctl_snapshot_link(s, 2, 1, &got), 0);
	assert_gbps(got.bandwidth, 48.0);
	assert_int_equal(gpuctl_snapshot_link(s, 0, 2, &got), 0);
	assert_int_equal(got.level, GPUCTL_TOPO_UNKNOWN);
	assert_int_equal(got.p2p, GPUCTL_P2P_UNKNOWN);
	assert_int_equal(gpuctl_snapshot_link(s, 0, 0, &got), -EINVAL);
	assert_int_equal(gpuctl_snapshot_link(s, 0, 3, &got), -EINVAL);
	gpuctl_snapshot_free(s);

	s = snapshot_new_empty(2, GPUCTL_SNAP_BASIC);
	assert_non_null(s);
	assert_int_equal(gpuctl_snapshot_link(s, 0, 1, &got), -ENODATA);
	gpuctl_snapshot_free(s);
}

/* struct gpuctl_link can grow (struct_size): an older caller's smaller struct gets its fields
 * and nothing past them, a newer caller's larger one gets every field the library has. */
static void test_link_struct_size(void **state)
{
	struct gpuctl_snapshot *s = snapshot_new_empty(2, GPUCTL_SNAP_TOPOLOGY);
	struct gpuctl_link l = {.level = GPUCTL_TOPO_NODE, .nvlinks = 4, .p2p = GPUCTL_P2P_OK};
	FIXTURE_ROOMY(struct gpuctl_link) u;
	size_t old = offsetof(struct gpuctl_link, nvswitch); /* struct_size, level, nvlinks */

	(void)state;
	assert_non_null(s);
	assert_int_equal(snapshot_set_link(s, 0, 1, &l), 0);

	fixture_canary_fill(&u, sizeof(u), old);
	assert_int_equal(gpuctl_snapshot_link(s, 0, 1, &u.s), 0);
	assert_int_equal(u.s.struct_size, old);
	assert_int_equal(u.s.level, GPUCTL_TOPO_NODE);
	assert_int_equal(u.s.nvlinks, 4);
	fixture_assert_canary(&u, old, sizeof(u));

	/* a newer caller: everything written, its own struct_size kept, nothing past sizeof */
	fixture_canary_fill(&u, sizeof(u), sizeof(u));
	assert_int_equal(gpuctl_snapshot_link(s, 0, 1, &u.s), 0);
	assert_int_equal(u.s.struct_size, sizeof(u));
	assert_int_equal(u.s.p2p, GPUCTL_P2P_OK);
	assert_false(u.s.nvswitch);
	fixture_assert_canary(&u, sizeof(struct gpuctl_link), sizeof(u));

	/* one that does not even cover level, or was never initialised: refused, nothing written */
	fixture_canary_fill(&u, sizeof(u), offsetof(struct gpuctl_link, level));
	assert_int_equal(gpuctl_snapshot_link(s, 0, 1, &u.s), -EINVAL);
	fixture_assert_canary(&u, sizeof(size_t), sizeof(u));
	fixture_canary_fill(&u, sizeof(u), 0);
	assert_int_equal(gpuctl_snapshot_link(s, 0, 1, &u.s), -EINVAL);
	fixture_assert_canary(&u, sizeof(size_t), sizeof(u));
	gpuctl_snapshot_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_level_codes),
	        cmocka_unit_test(test_nvlink_published_totals),
	        cmocka_unit_test(test_nvlink_mixed_and_unknown),
	        cmocka_unit_test(test_pcie_rates),
	        cmocka_unit_test(test_pcie_paths),
	        cmocka_unit_test(test_pcie_without_p2p),
	        cmocka_unit_test(test_pcie_paths_per_cpu),
	        cmocka_unit_test(test_c2c),
	        cmocka_unit_test(test_fill_snapshot),
	        cmocka_unit_test(test_link_struct_size),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
