// SPDX-License-Identifier: MIT
/*
 * test-cpuinfo.c: the CPU read from /proc/cpuinfo text and NCCL's figures for it.
 *
 * Inputs are the first lines of real /proc/cpuinfo entries of the machines of the scenarios
 * (family and model numbers as Intel's and AMD's documentation and the Linux kernel's
 * intel-family.h name them: Broadwell-X 0x4F, Skylake-X 0x55, Sapphire Rapids-X 0x8F, Emerald
 * Rapids-X 0xCF; EPYC 7742 family 0x17 model 0x31; Grace: Arm's implementer 0x41, Neoverse V2
 * part 0xd4f). Expected figures: NCCL's src/graph/topo.h (docs/topology.md).
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "cpuinfo.h"
#include "gpuctl/gpuctl.h"
#include "snapshot-internal.h"

static void parse(const char *text, struct gpuctl_cpu *c)
{
	c->struct_size = sizeof(*c);
	cpu_info_parse(text, strlen(text), c);
}

static void test_published_cpus(void **state)
{
	static const struct {
		const char *text;
		const char *cls;
		double gbps, overhead;
		int family, model;
	} cases[] = {
	        {"processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 79\n"
	         "model name\t: Intel(R) Xeon(R) CPU E5-2698 v4 @ 2.20GHz\n\nprocessor\t: 1\n"
	         "vendor_id\t: AuthenticAMD\n",
	         "Broadwell", 6.0, 1.2, 6, 79},
	        {"vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\n"
	         "model name\t: Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz\n",
	         "Skylake", 10.0, 1.2, 6, 85},
	        {"vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n"
	         "model name\t: Intel(R) Xeon(R) Platinum 8480+\n",
	         "Sapphire Rapids", 22.0, 1.2, 6, 143},
	        {"vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 207\n"
	         "model name\t: INTEL(R) XEON(R) PLATINUM 8592+\n",
	         "Emerald Rapids", 40.0, 1.2, 6, 207},
	        {"vendor_id\t: AuthenticAMD\r\ncpu family\t: 23\r\nmodel\t\t: 49\r\n"
	         "model name\t: AMD EPYC 7742 64-Core Processor\r\n",
	         "AMD", 16.0, 1.0, 23, 49},
	        {"processor\t: 0\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd\n"
	         "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\n"
	         "CPU part\t: 0xd4f\nCPU revision\t: 0\n",
	         "Grace", 6.0, 1.0, -1, 0xd4f},
	        {"CPU implementer\t: 0x41\nCPU part\t: 0xd0c\n", "Arm", 6.0, 1.0, -1, 0xd0c},
	        /* an Intel NCCL does not place (another family) is Broadwell, as in NCCL */
	        {"vendor_id\t: GenuineIntel\ncpu family\t: 15\nmodel\t\t: 6\n", "Broadwell", 6.0,
	         1.2, 15, 6},
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct gpuctl_cpu c;

		parse(cases[i].text, &c);
		assert_string_equal(c.cpu_class, cases[i].cls);
		assert_true(fabs(c.inter_socket_gbps - cases[i].gbps) < 1e-9);
		assert_true(fabs(c.p2p_overhead - cases[i].overhead) < 1e-9);
		assert_int_equal(c.family, cases[i].family);
		assert_int_equal(c.model, cases[i].model);
	}
}

static void test_names(void **state)
{
	struct gpuctl_cpu c;

	(void)state;
	parse("vendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7742 64-Core Processor   \n", &c);
	assert_string_equal(c.vendor, "AuthenticAMD");
	assert_string_equal(c.name, "AMD EPYC 7742 64-Core Processor");
	parse("CPU implementer\t: 0x41\nCPU part\t: 0xd4f\n", &c);
	assert_string_equal(c.vendor, "ARM");
	/* non-printable bytes never reach the name */
	parse("vendor_id\t: GenuineIntel\nmodel name\t: A\x01"
	      "B\n",
	      &c);
	assert_string_equal(c.name, "A?B");
}

/* Unknown: nothing, an unknown vendor, garbage numbers: the documented default (Skylake's). */
static void test_unknown(void **state)
{
	static const char *const texts[] = {
	        "",
	        "\n\n\n",
	        "vendor_id\t: HygonGenuine\ncpu family\t: 24\n",
	        "cpu\t\t: POWER9 (raw), altivec supported\n",
	        "vendor_id\t: GenuineIntel\ncpu family\t: six\nmodel\t\t: -3\n",
	        "no colon at all\n",
	};
	(void)state;
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		struct gpuctl_cpu c;

		parse(texts[i], &c);
		if (strstr(texts[i], "GenuineIntel")) {
			assert_int_equal(c.family, -1);
			assert_int_equal(c.model, -1);
			assert_string_equal(c.cpu_class, "Broadwell"); /* Intel, model unknown */
			continue;
		}
		assert_string_equal(c.cpu_class, "unknown");
		assert_true(fabs(c.inter_socket_gbps - 10.0) < 1e-9);
		assert_true(fabs(c.p2p_overhead - 1.2) < 1e-9);
	}
}

/* The file: GPUCTL_CPUINFO names it; a missing one is the unknown CPU and -ENOENT. */
static void test_read(void **state)
{
	char path[] = "/tmp/test-cpuinfo.XXXXXX";
	struct gpuctl_cpu c = GPUCTL_CPU_INIT;
	int fd = mkstemp(path);
	static const char text[] = "vendor_id\t: AuthenticAMD\ncpu family\t: 23\nmodel\t\t: 49\n";

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
	close(fd);
	assert_int_equal(setenv("GPUCTL_CPUINFO", path, 1), 0);
	assert_int_equal(cpu_info_read(NULL, &c), 0);
	assert_string_equal(c.cpu_class, "AMD");
	unlink(path);
	assert_int_equal(cpu_info_read(NULL, &c), -ENOENT);
	assert_string_equal(c.cpu_class, "unknown");
	unsetenv("GPUCTL_CPUINFO");
}

/* gpuctl_snapshot_cpu: topology snapshots only; struct_size respected. */
static void test_snapshot_cpu(void **state)
{
	struct gpuctl_snapshot *s = snapshot_new_empty(2, GPUCTL_SNAP_TOPOLOGY);
	struct gpuctl_cpu c = GPUCTL_CPU_INIT;
	double gbps = 0;

	(void)state;
	assert_non_null(s);
	assert_int_equal(gpuctl_snapshot_cpu(s, &c), 0);
	assert_string_equal(c.cpu_class, "unknown");
	/* two Gen4 GPUs on the unknown CPU: SYS = min(24, 10) / 1.2; PHB = 24 / 1.2; PIX 24 */
	for (size_t i = 0; i < 2; i++) {
		assert_int_equal(snapshot_set_int(s, i, GPUCTL_F_PCIE_GEN_MAX, 4), 0);
		assert_int_equal(snapshot_set_int(s, i, GPUCTL_F_PCIE_WIDTH_MAX, 16), 0);
	}
	assert_int_equal(gpuctl_snapshot_path_bandwidth(s, GPUCTL_TOPO_SYSTEM, &gbps), 0);
	assert_true(fabs(gbps - 10.0 / 1.2) < 1e-9);
	assert_int_equal(gpuctl_snapshot_path_bandwidth(s, GPUCTL_TOPO_HOSTBRIDGE, &gbps), 0);
	assert_true(fabs(gbps - 20.0) < 1e-9);
	assert_int_equal(gpuctl_snapshot_path_bandwidth(s, GPUCTL_TOPO_SINGLE, &gbps), 0);
	assert_true(fabs(gbps - 24.0) < 1e-9);
	assert_int_equal(gpuctl_snapshot_path_bandwidth(s, 35, &gbps), -EINVAL);
	c.struct_size = sizeof(size_t);
	assert_int_equal(gpuctl_snapshot_cpu(s, &c), -EINVAL);
	gpuctl_snapshot_free(s);

	s = snapshot_new_empty(2, GPUCTL_SNAP_BASIC);
	assert_non_null(s);
	c.struct_size = sizeof(c);
	assert_int_equal(gpuctl_snapshot_cpu(s, &c), -ENODATA);
	assert_int_equal(gpuctl_snapshot_path_bandwidth(s, GPUCTL_TOPO_SYSTEM, &gbps), -ENODATA);
	gpuctl_snapshot_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_published_cpus), cmocka_unit_test(test_names),
	        cmocka_unit_test(test_unknown),        cmocka_unit_test(test_read),
	        cmocka_unit_test(test_snapshot_cpu),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
