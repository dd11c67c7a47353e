/* test-sim-scenario.c: the scenario parser (sim/scenario.c) accepts the schema of
 * sim/SCENARIO.md, rejects each kind of bad input with the JSON path in its message, applies
 * defaults, and derives common ancestors and P2P status by the documented rules. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "scenario.h"

#define GPU_BASE                                                                                   \
	"\"pci_device_id\": \"0x20B010DE\", \"name\": \"NVIDIA A100-SXM4-80GB\", "                 \
	"\"brand\": \"tesla\", \"architecture\": \"ampere\", \"compute_capability\": \"8.0\", "    \
	"\"memory_total_mib\": 81920"
#define GPU_REQ GPU_BASE ", \"pcie\": {\"gen\": 4, \"width\": 16}, \"numa_node\": 0"

#define PCIE ", \"pcie\": {\"gen\": 4, \"width\": 16}"
#define NUMA ", \"numa_node\": 0"

/* A document with one GPU whose object gets `extra` keys appended, plus top-level `top`. */
static char *doc(const char *extra, const char *top)
{
	static char buf[16384];

	snprintf(buf, sizeof(buf),
	         "{\"schema\": 1, \"name\": \"t\", \"description\": \"d\", \"sources\": [\"s\"]%s"
	         "\"gpus\": [{\"uuid\": \"GPU-00000000-0000-0000-0000-000000000000\", "
	         "\"pci_bus_id\": \"00000000:07:00.0\", " GPU_BASE "%s%s%s}]}",
	         top ? top : ", ", extra && strstr(extra, "\"pcie\"") ? "" : PCIE,
	         extra && strstr(extra, "\"numa_node\"") ? "" : NUMA, extra ? extra : "");
	return buf;
}

static int parse(const char *s, struct sim_scenario **ret, char *err)
{
	return sim_scenario_parse(s, strlen(s), ret, err, 512);
}

static void test_minimal_and_defaults(void **state)
{
	struct sim_scenario *s = NULL;
	char err[512] = "";
	const struct sim_gpu *g;

	(void)state;
	assert_int_equal(parse(doc(NULL, NULL), &s, err), 0);
	assert_int_equal(s->n_gpus, 1);
	g = &s->gpus[0];
	assert_string_equal(s->driver_version, "550.54.15");
	assert_int_equal(s->cuda_driver_version, 12040);
	assert_int_equal(g->temperature_c, 35);
	assert_int_equal(g->clocks_event_reasons, 1);
	assert_true(g->persistence_mode);
	assert_int_equal(g->minor_number, 0);
	assert_int_equal(g->pcie_max_gen, 4);
	assert_int_equal(g->pcie_max_width, 16);
	assert_false(g->has_ecc);
	assert_false(g->has_mig);
	assert_false(g->power_draw_mw.valid);
	assert_int_equal(g->pci_device_id, 0x20B010DE);
	assert_int_equal(g->bus, 7);
	assert_int_equal(g->arch, SIM_ARCH_AMPERE);
	assert_int_equal(g->brand, 2);
	sim_scenario_free(s);
}

static void test_defaults_merge(void **state)
{
	struct sim_scenario *s = NULL;
	char err[512] = "";
	const char *text =
	        "{\"schema\": 1, \"name\": \"t\", \"description\": \"d\", \"sources\": [\"s\"], "
	        "\"defaults\": {" GPU_BASE NUMA
	        ", \"pcie\": {\"gen\": 4, \"width\": 16, \"max_gen\": 4}, "
	        "\"temperature_c\": 40}, "
	        "\"gpus\": [{\"uuid\": \"GPU-00000000-0000-0000-0000-000000000000\", "
	        "\"pci_bus_id\": \"00000000:07:00.0\", \"pcie\": {\"width\": 8}}, "
	        "{\"uuid\": \"GPU-00000000-0000-0000-0000-000000000001\", "
	        "\"pci_bus_id\": \"00000000:08:00.0\", \"temperature_c\": 50}]}";

	(void)state;
	assert_int_equal(parse(text, &s, err), 0);
	assert_int_equal(s->gpus[0].pcie_gen, 4);   /* from defaults */
	assert_int_equal(s->gpus[0].pcie_width, 8); /* own key, object merged key by key */
	assert_int_equal(s->gpus[0].pcie_max_width, 8);
	assert_int_equal(s->gpus[0].temperature_c, 40);
	assert_int_equal(s->gpus[1].temperature_c, 50);
	assert_int_equal(s->gpus[1].minor_number, 1);
	sim_scenario_free(s);
}

static void expect_error(const char *text, const char *needle)
{
	struct sim_scenario *s = NULL;
	char err[512] = "";

	assert_int_equal(parse(text, &s, err), -EINVAL);
	assert_null(s);
	if (!strstr(err, needle))
		fail_msg("error \"%s\" lacks \"%s\"", err, needle);
	assert_null(strchr(err, '\n'));
}

static void test_errors(void **state)
{
	char big[40000];
	size_t n = 0;

	(void)state;
	expect_error("{\"schema\": 1,", "line 1 column");
	/* jansson quotes the bad input, here a newline after an invalid escape (found by
	 * fuzz-scenario): the message stays one line */
	expect_error("{\"cpus\": {\"\\\\\\\n\"}}", "invalid JSON");
	expect_error("[1, 2]", "(top level): expected an object");
	expect_error(doc(", \"pcie\": {\"gen\": 4, \"width\": \"x16\"}", NULL),
	             "gpus[0].pcie.width: expected an integer 1..32, got \"x16\"");
	expect_error(doc(", \"tmeperature_c\": 40", NULL), "gpus[0].tmeperature_c: unknown key");
	expect_error(doc(NULL, ", \"colour\": 1, "), "colour: unknown key");
	expect_error(doc(NULL, ", \"a\\nb\": 1, "), "a?b: unknown key"); /* stays one line */
	expect_error(doc(", \"memory_used_mib\": -1", NULL), "gpus[0].memory_used_mib: expected");
	expect_error(doc(", \"serial\": \"a\\u0000b\"", NULL), "NUL");
	expect_error(doc(NULL, ", \"defaults\": {\"brand\": \"acme\"}, "),
	             "defaults.brand: unknown value \"acme\"");
	expect_error(doc(", \"ecc\": true", NULL), "gpus[0].ecc: expected false or an object");
	expect_error(doc(", \"numa_node\": 3", ", \"cpus\": {\"numa_nodes\": [{\"node\": 0, "
	                                       "\"cpus\": \"0-3\"}]}, "),
	             "gpus[0].numa_node: node 3 is not in cpus.numa_nodes");
	expect_error(doc(NULL, ", \"nvlink\": {\"links\": [[0, 5, 2]]}, "),
	             "nvlink.links[0]: links a GPU that does not exist");
	expect_error(doc(NULL, ", \"defaults\": {\"temperature_c\": \"hot\"}, "),
	             "defaults.temperature_c: expected an integer");
	expect_error(doc(NULL, ", \"schema\": 2, "), "duplicate");
	expect_error(
	        doc(", \"mig\": {\"enabled\": true, \"instances\": [{\"profile\": \"1g\"}]}", NULL),
	        "gpus[0].mig.instances[0].gi: required key missing");
	/* Duplicate uuid and bus id. */
	expect_error(
	        "{\"schema\": 1, \"name\": \"t\", \"description\": \"d\", \"sources\": [\"s\"], "
	        "\"defaults\": {" GPU_REQ "}, \"gpus\": ["
	        "{\"uuid\": \"GPU-00000000-0000-0000-0000-000000000000\", \"pci_bus_id\": "
	        "\"00000000:07:00.0\"}, {\"uuid\": \"GPU-00000000-0000-0000-0000-000000000000\", "
	        "\"pci_bus_id\": \"00000000:08:00.0\"}]}",
	        "gpus[1].uuid: duplicate uuid");
	expect_error(
	        "{\"schema\": 1, \"name\": \"t\", \"description\": \"d\", \"sources\": [\"s\"], "
	        "\"defaults\": {" GPU_REQ "}, \"gpus\": ["
	        "{\"uuid\": \"GPU-00000000-0000-0000-0000-000000000000\", \"pci_bus_id\": "
	        "\"00000000:07:00.0\"}, {\"uuid\": \"GPU-00000000-0000-0000-0000-000000000001\", "
	        "\"pci_bus_id\": \"00000000:07:00.0\"}]}",
	        "gpus[1].pci_bus_id: duplicate");
	expect_error(
	        "{\"schema\": 1, \"name\": \"t\", \"description\": \"d\", \"sources\": [\"s\"], "
	        "\"gpus\": [{\"uuid\": \"GPU-00000000-0000-0000-0000-000000000000\", "
	        "\"pci_bus_id\": \"0000:07:00.0\", " GPU_REQ "}]}",
	        "gpus[0].pci_bus_id: expected \"DDDDDDDD:BB:DD.F\"");
	/* Missing required key. */
	expect_error(
	        "{\"schema\": 1, \"name\": \"t\", \"description\": \"d\", \"sources\": [\"s\"], "
	        "\"gpus\": [{\"uuid\": \"GPU-00000000-0000-0000-0000-000000000000\"}]}",
	        "gpus[0].pci_bus_id: required key missing");
	expect_error("{\"schema\": 1, \"name\": \"t\", \"description\": \"d\", \"sources\": []}",
	             "gpus: required key missing");
	/* Huge array: 129 GPUs. */
	n += (size_t)snprintf(big + n, sizeof(big) - n,
	                      "{\"schema\": 1, \"name\": \"t\", \"description\": \"d\", "
	                      "\"sources\": [\"s\"], \"gpus\": [");
	for (int i = 0; i < 129; i++)
		n += (size_t)snprintf(big + n, sizeof(big) - n, "%s{}", i ? "," : "");
	snprintf(big + n, sizeof(big) - n, "]}");
	expect_error(big, "gpus: expected an array of 1..128");
	/* Deep nesting. */
	memset(big, '[', 30000);
	big[30000] = '\0';
	expect_error(big, "line 1");
}

/* Violation percentages, BAR1 and PCIe throughput: accepted, defaults, and each bad value
 * rejected with its key in the message. */
static void test_telemetry_keys(void **state)
{
	struct sim_scenario *s = NULL;
	char err[512] = "";
	const struct sim_gpu *g;
	const char *text =
	        "{\"schema\": 1, \"name\": \"t\", \"description\": \"d\", \"sources\": [\"s\"], "
	        "\"defaults\": {" GPU_REQ ", \"bar1_total_mib\": 131072, "
	        "\"pcie_throughput_kbs\": {\"rx\": 1}}, \"gpus\": ["
	        "{\"uuid\": \"GPU-00000000-0000-0000-0000-000000000000\", \"pci_bus_id\": "
	        "\"00000000:07:00.0\", \"pcie_throughput_kbs\": {\"tx\": 4294967295}, "
	        "\"violation_power_pct\": 12, \"violation_thermal_pct\": 0, "
	        "\"bar1_used_mib\": 131072}, "
	        "{\"uuid\": \"GPU-00000000-0000-0000-0000-000000000001\", \"pci_bus_id\": "
	        "\"00000000:08:00.0\", \"pcie_throughput_kbs\": {\"rx\": 0, \"tx\": 0}}]}";

	(void)state;
	/* Absent: not valid (NOT_SUPPORTED in the library), used 0. */
	assert_int_equal(parse(doc(NULL, NULL), &s, err), 0);
	g = &s->gpus[0];
	assert_false(g->violation_power_pct.valid);
	assert_false(g->violation_thermal_pct.valid);
	assert_false(g->bar1_total_mib.valid);
	assert_false(g->bar1_used_mib.valid);
	assert_int_equal(g->bar1_used_mib.v, 0);
	assert_false(g->pcie_rx_kbs.valid);
	assert_false(g->pcie_tx_kbs.valid);
	sim_scenario_free(s);
	s = NULL;
	/* Given, with defaults merged key by key (the rx of defaults completes GPU 0's object). */
	assert_int_equal(parse(text, &s, err), 0);
	g = &s->gpus[0];
	assert_true(g->violation_power_pct.valid);
	assert_int_equal(g->violation_power_pct.v, 12);
	assert_true(g->violation_thermal_pct.valid);
	assert_int_equal(g->violation_thermal_pct.v, 0);
	assert_int_equal(g->bar1_total_mib.v, 131072);
	assert_int_equal(g->bar1_used_mib.v, 131072); /* all of it is allowed */
	assert_true(g->pcie_rx_kbs.valid && g->pcie_tx_kbs.valid);
	assert_int_equal(g->pcie_rx_kbs.v, 1);
	assert_int_equal(g->pcie_tx_kbs.v, 4294967295ULL);
	g = &s->gpus[1];
	assert_false(g->violation_power_pct.valid);
	assert_true(g->bar1_total_mib.valid);
	assert_false(g->bar1_used_mib.valid);
	assert_int_equal(g->bar1_used_mib.v, 0);
	assert_int_equal(g->pcie_rx_kbs.v, 0);
	sim_scenario_free(s);

	expect_error(doc(", \"violation_power_pct\": 101", NULL),
	             "gpus[0].violation_power_pct: expected an integer 0..100, got 101");
	expect_error(doc(", \"violation_thermal_pct\": -1", NULL),
	             "gpus[0].violation_thermal_pct: expected an integer 0..100");
	expect_error(doc(", \"violation_thermal_pct\": 5.5", NULL),
	             "gpus[0].violation_thermal_pct: expected an integer");
	expect_error(doc(", \"violation_power_pct\": \"12\"", NULL),
	             "gpus[0].violation_power_pct: expected an integer");
	expect_error(doc(", \"bar1_total_mib\": -5", NULL), "gpus[0].bar1_total_mib: expected");
	expect_error(doc(", \"bar1_total_mib\": 256, \"bar1_used_mib\": 257", NULL),
	             "gpus[0].bar1_used_mib: used 257 MiB exceeds bar1_total_mib 256");
	expect_error(doc(", \"bar1_used_mib\": 4", NULL),
	             "gpus[0].bar1_used_mib: given without bar1_total_mib");
	expect_error(doc(", \"bar1_total_mib\": 256, \"bar1_used_mib\": true", NULL),
	             "gpus[0].bar1_used_mib: expected an integer");
	expect_error(doc(", \"pcie_throughput_kbs\": 5", NULL),
	             "gpus[0].pcie_throughput_kbs: expected an object");
	expect_error(doc(", \"pcie_throughput_kbs\": {\"rx\": 1}", NULL),
	             "gpus[0].pcie_throughput_kbs.tx: required key missing");
	expect_error(doc(", \"pcie_throughput_kbs\": {\"tx\": 1}", NULL),
	             "gpus[0].pcie_throughput_kbs.rx: required key missing");
	expect_error(doc(", \"pcie_throughput_kbs\": {\"rx\": 1, \"tx\": 4294967296}", NULL),
	             "gpus[0].pcie_throughput_kbs.tx: expected an integer 0..4294967295");
	expect_error(doc(", \"pcie_throughput_kbs\": {\"rx\": -1, \"tx\": 0}", NULL),
	             "gpus[0].pcie_throughput_kbs.rx: expected an integer 0..4294967295");
	expect_error(doc(", \"pcie_throughput_kbs\": {\"rx\": 1, \"tx\": 1, \"rxx\": 1}", NULL),
	             "gpus[0].pcie_throughput_kbs.rxx: unknown key");
	/* In defaults the error names defaults; the object may be partial there. */
	expect_error(doc(NULL, ", \"defaults\": {\"violation_power_pct\": 200}, "),
	             "defaults.violation_power_pct: expected an integer 0..100");
	expect_error(doc(NULL, ", \"defaults\": {\"pcie_throughput_kbs\": {\"tx\": \"x\"}}, "),
	             "defaults.pcie_throughput_kbs.tx: expected an integer");
	expect_error(doc(NULL, ", \"defaults\": {\"pcie_throughput_kbs\": {\"tx\": 1}}, "),
	             "gpus[0].pcie_throughput_kbs.rx: required key missing");
}

/* Six GPUs with hand-made PCIe paths; index order: A B C D E F, G H on one board. */
static void test_common_ancestor(void **state)
{
	struct sim_scenario *s = NULL;
	char err[512] = "", text[8192];
	static const char *const gpus[] = {
	        "\"pcie_path\": [\"rc0\", \"s1\", \"s1a\"], \"numa_node\": 0",
	        "\"pcie_path\": [\"rc0\", \"s1\", \"s1a\"], \"numa_node\": 0",
	        "\"pcie_path\": [\"rc0\", \"s1\", \"s1b\"], \"numa_node\": 0",
	        "\"pcie_path\": [\"rc0\"], \"numa_node\": 0",
	        "\"pcie_path\": [\"rc1\"], \"numa_node\": 0",
	        "\"pcie_path\": [\"rc2\"], \"numa_node\": 1",
	        "\"pcie_path\": [\"rc3\"], \"numa_node\": 1, \"board\": \"k80\"",
	        "\"pcie_path\": [\"rc4\"], \"numa_node\": 0, \"board\": \"k80\", \"p2p\": "
	        "\"gpu_not_supported\"",
	};
	size_t n = 0;

	(void)state;
	n += (size_t)snprintf(text + n, sizeof(text) - n,
	                      "{\"schema\": 1, \"name\": \"t\", \"description\": \"d\", "
	                      "\"sources\": [\"s\"], \"defaults\": {" GPU_REQ "}, \"gpus\": [");
	for (int i = 0; i < 8; i++)
		n += (size_t)snprintf(text + n, sizeof(text) - n,
		                      "%s{\"uuid\": \"GPU-00000000-0000-0000-0000-00000000000%d\", "
		                      "\"pci_bus_id\": \"00000000:%02X:00.0\", %s}",
		                      i ? "," : "", i, 0x10 + i, gpus[i]);
	snprintf(text + n, sizeof(text) - n,
	         "], \"topology_overrides\": [[3, 4, \"SYS\"]], "
	         "\"p2p_overrides\": [[1, 0, \"disabled_by_regkey\"]]}");
	assert_int_equal(parse(text, &s, err), 0);
	assert_int_equal(sim_common_ancestor(s, 0, 1), SIM_LEVEL_SINGLE);
	assert_int_equal(sim_common_ancestor(s, 0, 2), SIM_LEVEL_MULTIPLE);
	assert_int_equal(sim_common_ancestor(s, 0, 3), SIM_LEVEL_HOSTBRIDGE);
	assert_int_equal(sim_common_ancestor(s, 0, 4), SIM_LEVEL_NODE);
	assert_int_equal(sim_common_ancestor(s, 0, 5), SIM_LEVEL_SYSTEM);
	assert_int_equal(sim_common_ancestor(s, 6, 7), SIM_LEVEL_INTERNAL);
	assert_int_equal(sim_common_ancestor(s, 4, 3), SIM_LEVEL_SYSTEM); /* override, reversed */
	/* P2P: override (either order), else the non-ok status of either GPU, else ok. */
	assert_int_equal(sim_p2p_status(s, 0, 1), 4);
	assert_int_equal(sim_p2p_status(s, 1, 0), 4);
	assert_int_equal(sim_p2p_status(s, 0, 7), 2);
	assert_int_equal(sim_p2p_status(s, 7, 0), 2);
	assert_int_equal(sim_p2p_status(s, 0, 2), 0);
	sim_scenario_free(s);
}

static void test_nvlink_wiring(void **state)
{
	struct sim_scenario *s = NULL;
	char err[512] = "", text[8192];

	(void)state;
	snprintf(text, sizeof(text),
	         "{\"schema\": 1, \"name\": \"t\", \"description\": \"d\", \"sources\": [\"s\"], "
	         "\"defaults\": {" GPU_REQ "}, \"gpus\": ["
	         "{\"uuid\": \"GPU-00000000-0000-0000-0000-000000000000\", \"pci_bus_id\": "
	         "\"00000000:FF:00.0\"}, {\"uuid\": \"GPU-00000000-0000-0000-0000-000000000001\", "
	         "\"pci_bus_id\": \"00000000:FE:00.0\"}], \"nvlink\": {\"nvswitch\": "
	         "{\"links_per_gpu\": 12, \"switches\": 6}}}");
	assert_int_equal(parse(text, &s, err), 0);
	assert_true(s->nvswitch);
	assert_int_equal(s->gpus[0].link_count, 12);
	assert_true(s->gpus[0].links[7].to_switch);
	assert_int_equal(s->gpus[0].links[7].remote, 1);
	/* Switch bus ids avoid the GPUs' buses. */
	assert_string_equal(s->switch_bus_id[0], "00000000:FD:00.0");
	assert_true(sim_nvlink_connected(s, 0, 1));
	sim_scenario_free(s);
}

/* nvlink.down: a present link declared down at both ends; no more than the pair has. */
static void test_nvlink_down(void **state)
{
	struct sim_scenario *s = NULL;
	char err[512] = "", text[8192];
	static const char head[] =
	        "{\"schema\": 1, \"name\": \"t\", \"description\": \"d\", \"sources\": [\"s\"], "
	        "\"defaults\": {" GPU_REQ "}, \"gpus\": ["
	        "{\"uuid\": \"GPU-00000000-0000-0000-0000-000000000000\", \"pci_bus_id\": "
	        "\"00000000:FF:00.0\"}, {\"uuid\": \"GPU-00000000-0000-0000-0000-000000000001\", "
	        "\"pci_bus_id\": \"00000000:FE:00.0\"}], \"nvlink\": {\"links\": [[0, 1, 2]], ";

	(void)state;
	snprintf(text, sizeof(text), "%s\"down\": [[1, 0, 1]]}}", head);
	assert_int_equal(parse(text, &s, err), 0);
	assert_int_equal(s->gpus[0].link_count, 2);
	assert_true(s->gpus[1].links[0].down);
	assert_true(s->gpus[0].links[s->gpus[1].links[0].remote_link].down);
	assert_false(s->gpus[0].links[1].down);
	sim_scenario_free(s);
	snprintf(text, sizeof(text), "%s\"down\": [[0, 1, 3]]}}", head);
	expect_error(text, "nvlink.down[0]: GPUs 0 and 1 have fewer than 3 links between them");
	snprintf(text, sizeof(text), "%s\"down\": [[0, 1]]}}", head);
	expect_error(text, "nvlink.down[0]: expected [a, b, count]");
}

/* cpus.model: an x86 or an Arm CPU, nothing half of each (SCENARIO.md). */
static void test_cpu_model(void **state)
{
	struct sim_scenario *s = NULL;
	char err[512] = "";

	(void)state;
	assert_int_equal(
	        parse(doc(NULL, ", \"cpus\": {\"model\": {\"vendor_id\": \"GenuineIntel\", "
	                        "\"family\": 6, \"model\": 79, \"name\": \"Xeon\"}, "
	                        "\"numa_nodes\": [{\"node\": 0, \"cpus\": \"0-3\"}]}, "),
	              &s, err),
	        0);
	assert_true(s->cpu.present);
	assert_string_equal(s->cpu.vendor_id, "GenuineIntel");
	assert_int_equal(s->cpu.model, 79);
	assert_int_equal(s->cpu.part, -1);
	sim_scenario_free(s);
	s = NULL;
	assert_int_equal(parse(doc(NULL, ", \"cpus\": {\"model\": {\"implementer\": 65, "
	                                 "\"part\": 3407}, \"numa_nodes\": [{\"node\": 0, "
	                                 "\"cpus\": \"0-3\"}]}, "),
	                       &s, err),
	                 0);
	assert_int_equal(s->cpu.implementer, 0x41);
	assert_int_equal(s->cpu.part, 0xd4f);
	assert_string_equal(s->cpu.vendor_id, "");
	sim_scenario_free(s);
	expect_error(doc(NULL, ", \"cpus\": {\"model\": {\"vendor_id\": \"GenuineIntel\"}, "
	                       "\"numa_nodes\": [{\"node\": 0, \"cpus\": \"0-3\"}]}, "),
	             "cpus.model: an x86 CPU (vendor_id) needs family and model");
	expect_error(doc(NULL, ", \"cpus\": {\"model\": {\"name\": \"x\"}, "
	                       "\"numa_nodes\": [{\"node\": 0, \"cpus\": \"0-3\"}]}, "),
	             "cpus.model: expected vendor_id, family and model (x86) or implementer");
	expect_error(doc(NULL, ", \"cpus\": {\"model\": {\"implementer\": 65, \"part\": 9999}, "
	                       "\"numa_nodes\": [{\"node\": 0, \"cpus\": \"0-3\"}]}, "),
	             "cpus.model.part: expected an integer 0..4095");
	expect_error(doc(NULL, ", \"cpus\": {\"model\": {\"vendr\": 1}, "
	                       "\"numa_nodes\": [{\"node\": 0, \"cpus\": \"0-3\"}]}, "),
	             "cpus.model.vendr: unknown key");
}

static void test_cpulist(void **state)
{
	unsigned long *mask = NULL;
	size_t words = 0;

	(void)state;
	assert_int_equal(sim_cpulist_parse("0-3,8,64-65", &mask, &words), 0);
	assert_int_equal(mask[0], 0x10fUL);
	assert_int_equal(mask[64 / (8 * sizeof(long))] & 1, 1);
	free(mask);
	assert_int_equal(sim_cpulist_parse("3-1", &mask, &words), -EINVAL);
	assert_int_equal(sim_cpulist_parse("1,,2", &mask, &words), -EINVAL);
	assert_int_equal(sim_cpulist_parse("99999", &mask, &words), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_minimal_and_defaults),
	        cmocka_unit_test(test_defaults_merge),
	        cmocka_unit_test(test_errors),
	        cmocka_unit_test(test_telemetry_keys),
	        cmocka_unit_test(test_common_ancestor),
	        cmocka_unit_test(test_nvlink_wiring),
	        cmocka_unit_test(test_nvlink_down),
	        cmocka_unit_test(test_cpu_model),
	        cmocka_unit_test(test_cpulist),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
