// SPDX-License-Identifier: MIT
/*
 * test-gres.c: Slurm's view of a node (src/lib/devices/gres.c): hostlists as Slurm expands them,
 * the gpu records of gres.conf in Slurm's index order, the CPU topology in Slurm's abstract core
 * numbering (on a scratch sysfs tree), and the short GPU types.
 *
 * Expected values: Slurm's gres.conf(5) and hostlist rules ("[01-04]" keeps the width of its
 * lower bound), its index order (common_node_config_load: one index per device file, in file
 * order), and hwloc's logical order for cores (DGX A100: CPUs 0 and 128 are the threads of one
 * core, so the same abstract core; CPU 64 starts socket 1, abstract core 64).
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "gres.h"

static void expect_names(const char *expr, int n, ...)
{
	char **names = NULL;
	va_list ap;
	int r = gres_hostlist_expand(expr, 64, &names);

	if (r != n)
		fail_msg("'%s': %d names, want %d", expr, r, n);
	va_start(ap, n);
	for (int i = 0; i < n; i++)
		assert_string_equal(names[i], va_arg(ap, const char *));
	va_end(ap);
	for (int i = 0; i < r; i++)
		free(names[i]);
	free(names);
}

static void test_hostlists(void **state)
{
	(void)state;
	expect_names("/dev/nvidia[0-3]", 4, "/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2",
	             "/dev/nvidia3");
	expect_names("/dev/nvidia[3,1]", 2, "/dev/nvidia3", "/dev/nvidia1");
	expect_names("node[01-03,7]", 4, "node01", "node02", "node03", "node7");
	expect_names("a,b[9-10]x", 3, "a", "b9x", "b10x");
	expect_names("/dev/nvidia0,/dev/nvidia2", 2, "/dev/nvidia0", "/dev/nvidia2");
	static const char *const bad[] = {"",       "a,",   ",a",      "a[",     "a]",  "a[1-",
	                                  "a[3-1]", "a[x]", "a[1][2]", "a[[1]]", "a[]", "a[0-99]"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char **names = NULL;
		int r = gres_hostlist_expand(bad[i], 64, &names);
		if (r != -EINVAL)
			fail_msg("'%s': %d, want -EINVAL", bad[i], r);
	}
	assert_true(gres_hostlist_match("gpu[01-04]", "gpu02"));
	assert_false(gres_hostlist_match("gpu[01-04]", "gpu2"));
	assert_false(gres_hostlist_match("gpu[01-04]", "gpu05"));
	assert_true(gres_hostlist_match("login,gpu7", "gpu7"));
}

static void test_gres_conf(void **state)
{
	struct gres_gpus g;
	char why[256];

	(void)state;
	const char *text = "# DGX, one node of four\n"
	                   "AutoDetect=off\n"
	                   "NodeName=gpu[01-04] Name=gpu Type=a100 File=/dev/nvidia[4-5] \\\n"
	                   "   Cores=0-3   # a joined line\n"
	                   "Name=gpu File=/dev/nvidia1\n"
	                   "NodeName=gpu09 Name=gpu File=/dev/nvidia0\n"
	                   "NodeName=gpu02 Name=mps Count=200 File=/dev/nvidia7\n"
	                   "nodename=GPU[01-04] NAME=gpu FILES=/dev/nvidia6\n";
	assert_int_equal(gres_conf_parse(text, strlen(text), "gpu02", &g, why, sizeof(why)), 0);
	assert_int_equal(g.n, 3);
	assert_string_equal(g.files[0], "/dev/nvidia4");
	assert_string_equal(g.files[1], "/dev/nvidia5");
	assert_string_equal(g.files[2], "/dev/nvidia1");
	assert_false(g.autodetect);
	assert_false(g.multiple_files);
	gres_gpus_free(&g);
	/* node-local AutoDetect wins over the global one */
	text = "AutoDetect=off\nNodeName=gpu02 AutoDetect=nvml\n";
	assert_int_equal(gres_conf_parse(text, strlen(text), "gpu02", &g, why, sizeof(why)), 0);
	assert_true(g.autodetect);
	assert_int_equal(g.n, 0);
	gres_gpus_free(&g);
	text = "Name=gpu Type=1g.5gb MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21\n"
	       "Name=gpu Count=2\n";
	assert_int_equal(gres_conf_parse(text, strlen(text), "x", &g, why, sizeof(why)), 0);
	assert_true(g.multiple_files);
	assert_true(g.no_file);
	gres_gpus_free(&g);
	/* what cannot be read for certain is refused, with the line */
	static const char *const bad[] = {"Include /etc/slurm/x.conf\n", "File=/dev/nvidia0\n",
	                                  "Name=gpu File=/dev/nvidia[0-\n", "Name gpu\n"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		int r = gres_conf_parse(bad[i], strlen(bad[i]), "x", &g, why, sizeof(why));
		if (r != -EINVAL || strncmp(why, "line 1: ", 8) != 0)
			fail_msg("'%s': %d '%s'", bad[i], r, why);
	}
}

static void put(const char *dir, const char *name, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "%s\n", text);
	assert_int_equal(fclose(f), 0);
}

/* A DGX A100's numbering, shrunk: 2 sockets x 4 cores x 2 threads, CPU c and c+8 one core */
static void test_cpu_topology(void **state)
{
	char root[] = "/tmp/gpuctl-test-sysfs-XXXXXX", dir[512], why[256] = "";
	struct cpu_topology t;

	(void)state;
	assert_non_null(mkdtemp(root));
	snprintf(dir, sizeof(dir), "%s/devices/system/cpu", root);
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "mkdir -p %s", dir);
	assert_int_equal(system(cmd), 0);
	put(dir, "online", "0-15");
	for (int c = 0; c < 16; c++) {
		char topo[600], v[16];
		snprintf(topo, sizeof(topo), "%s/cpu%d/topology", dir, c);
		snprintf(cmd, sizeof(cmd), "mkdir -p %s", topo);
		assert_int_equal(system(cmd), 0);
		snprintf(v, sizeof(v), "%d", (c % 8) / 4);
		put(topo, "physical_package_id", v);
		/* core ids as real kernels give them: not dense, not starting at 0 */
		snprintf(v, sizeof(v), "%d", 10 + 3 * (c % 4));
		put(topo, "core_id", v);
	}
	assert_int_equal(cpu_topology_read(root, &t, why, sizeof(why)), 0);
	assert_int_equal(t.sockets, 2);
	assert_int_equal(t.cores, 8);
	assert_int_equal(t.threads_per_core, 2);
	assert_int_equal(t.n_cpus, 16);
	assert_int_equal(t.socket_first[0], 0);
	assert_int_equal(t.socket_first[1], 4);
	assert_int_equal(t.socket_first[2], 8);
	static const int want[16] = {0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7};
	for (int c = 0; c < 16; c++)
		assert_int_equal(t.core_of[c], want[c]);
	cpu_topology_free(&t);
	/* a missing file is named */
	snprintf(cmd, sizeof(cmd), "rm %s/cpu3/topology/core_id", dir);
	assert_int_equal(system(cmd), 0);
	assert_int_not_equal(cpu_topology_read(root, &t, why, sizeof(why)), 0);
	assert_non_null(strstr(why, "cpu3/topology/core_id"));
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	assert_int_equal(system(cmd), 0);
}

static void test_node_name(void **state)
{
	char buf[64];

	(void)state;
	assert_int_equal(setenv("SLURMD_NODENAME", "gpu-node-12", 1), 0);
	assert_int_equal(gres_node_name(buf, sizeof(buf)), 0);
	assert_string_equal(buf, "gpu-node-12");
	assert_int_equal(gres_node_name(buf, 4), -ENAMETOOLONG);
	assert_int_equal(unsetenv("SLURMD_NODENAME"), 0);
	assert_int_equal(gres_node_name(buf, sizeof(buf)), 0);
	assert_null(strchr(buf, '.')); /* the short host name */
	assert_true(buf[0] != '\0');
}

/* Slurm's AutoDetect rule (gpu_nvml.c, _nvml_get_device_name with gpu_common.c's
 * gpu_common_underscorify_tolower): lower case, spaces to '_'; expected strings by hand */
static void test_types(void **state)
{
	static const char *const cases[][2] = {
	        {"NVIDIA A100-SXM4-80GB", "nvidia_a100-sxm4-80gb"},
	        {"Tesla V100-SXM2-32GB", "tesla_v100-sxm2-32gb"},
	        {"NVIDIA H100 80GB HBM3", "nvidia_h100_80gb_hbm3"},
	        {"NVIDIA GeForce RTX 4090", "nvidia_geforce_rtx_4090"},
	        {"NVIDIA RTX A6000", "nvidia_rtx_a6000"},
	        {"Quadro P1000", "quadro_p1000"},
	        {"NVIDIA GB200", "nvidia_gb200"},
	        {"NVIDIA TITAN RTX", "nvidia_titan_rtx"},
	        {"NVIDIA H100 NVL", "nvidia_h100_nvl"},
	        {"NVIDIA A100 80GB PCIe", "nvidia_a100_80gb_pcie"},
	        {"NVIDIA  L4", "nvidia__l4"}, /* each space, as Slurm does: no squeezing */
	};
	static const char *const refused[] = {"", "a,b", "a:b", "a=b", "a#b", "a\tb", "a\"b"};
	char buf[GRES_TYPE_MAX], small[8];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(gres_gpu_type(cases[i][0], buf, sizeof(buf)), 0);
		assert_string_equal(buf, cases[i][1]);
	}
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		assert_int_equal(gres_gpu_type(refused[i], buf, sizeof(buf)), -EINVAL);
	assert_int_equal(gres_gpu_type(NULL, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(gres_gpu_type("NVIDIA A100-SXM4-80GB", small, sizeof(small)),
	                 -ENAMETOOLONG);
}

/* gpu_nvml.c's MIG loop and _handle_mig: the parent's type cut at its first '-', '_', profile */
static void test_mig_types(void **state)
{
	static const char *const cases[][3] = {
	        {"NVIDIA A100-SXM4-40GB", "1g.5gb", "nvidia_a100_1g.5gb"},
	        {"NVIDIA A100-SXM4-80GB", "1c.2g.20gb", "nvidia_a100_1c.2g.20gb"},
	        {"NVIDIA H100 80GB HBM3", "1g.10gb", "nvidia_h100_80gb_hbm3_1g.10gb"},
	        {"NVIDIA H100 NVL", "7g.94gb", "nvidia_h100_nvl_7g.94gb"},
	};
	char buf[GRES_TYPE_MAX];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(gres_mig_type(cases[i][0], cases[i][1], buf, sizeof(buf)), 0);
		assert_string_equal(buf, cases[i][2]);
	}
	assert_int_equal(gres_mig_type("NVIDIA A100-SXM4-40GB", NULL, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(gres_mig_type("NVIDIA A100-SXM4-40GB", "1g 5gb", buf, sizeof(buf)),
	                 -EINVAL);
}

/* gres.c, _check_core_range_matches_sock (Slurm 24.11): each socket none or all */
static void test_whole_sockets(void **state)
{
	unsigned first[] = {0, 4, 8, 12}; /* three sockets of four cores */
	struct cpu_topology t = {.socket_first = first, .sockets = 3, .cores = 12};
	uint64_t cores[1] = {0}, whole[1] = {0};

	(void)state;
	cores[0] = 0x30; /* cores 4-5: part of socket 1 */
	assert_true(gres_cores_whole_sockets(&t, cores, whole, 64));
	assert_int_equal(whole[0], 0xf0);
	cores[0] = 0x0f01; /* socket 2 whole, core 0 of socket 0 */
	assert_true(gres_cores_whole_sockets(&t, cores, whole, 64));
	assert_int_equal(whole[0], 0xf0f);
	cores[0] = 0xf0; /* socket 1 whole: unchanged */
	assert_false(gres_cores_whole_sockets(&t, cores, whole, 64));
	assert_int_equal(whole[0], 0xf0);
	cores[0] = 0;
	assert_false(gres_cores_whole_sockets(&t, cores, whole, 64));
	assert_int_equal(whole[0], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_hostlists),     cmocka_unit_test(test_gres_conf),
	        cmocka_unit_test(test_cpu_topology),  cmocka_unit_test(test_node_name),
	        cmocka_unit_test(test_types),         cmocka_unit_test(test_mig_types),
	        cmocka_unit_test(test_whole_sockets),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
