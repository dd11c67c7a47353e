// SPDX-License-Identifier: MIT
/*
 * cmd-topo.c: `gpuctl topo`: how the GPUs are wired, as `nvidia-smi topo -m` shows it, or JSON.
 *
 * Decisions:
 * - The matrix keeps nvidia-smi's layout (tab-separated, " X " for self, NV# when the pair has
 *   NVLinks, else the PCIe level code, then CPU affinity, NUMA affinity and GPU NUMA ID), so
 *   scripts and eyes used to it need no change. One tab between cells, always, so that
 *   splitting a line on tabs gives the columns.
 * - NV# is the link count the library reports for the pair: direct links, or each GPU's links
 *   into an NVSwitch fabric (NV12 on a DGX A100), as nvidia-smi prints it.
 * - --bandwidth shows the library's modelled GB/s per pair instead of the link codes; the model
 *   is explained in docs/topology.md, which the output points to.
 * - JSON lists each unordered pair once (a < b) with every fact, including the NVML numbers.
 * - Both end with the CPU the bandwidth model used and its figure per PCIe path class, so a
 *   surprising cell can be traced to the CPU gpuctl saw.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "format.h"

enum topo_format {
	TOPO_MATRIX,
	TOPO_JSON,
};

enum {
	OPT_BANDWIDTH = 0x100,
};

static const struct option topo_options[] = {
        CMD_OPTION_FORMAT,
        {"bandwidth", no_argument, NULL, OPT_BANDWIDTH},
        CMD_OPTION_HELP,
        {NULL, 0, NULL, 0},
};

/* nvidia-smi topo -p2p's abbreviations of NVML's P2P status. */
static const char *p2p_code(int status)
{
	switch (status) {
	case GPUCTL_P2P_OK:
		return "OK";
	case GPUCTL_P2P_CHIPSET_NOT_SUPPORTED:
		return "CNS";
	case GPUCTL_P2P_GPU_NOT_SUPPORTED:
		return "GNS";
	case GPUCTL_P2P_TOPOLOGY_NOT_SUPPORTED:
		return "TNS";
	case GPUCTL_P2P_DISABLED_BY_REGKEY:
		return "DR";
	case GPUCTL_P2P_NOT_SUPPORTED:
		return "NS";
	default:
		return "U";
	}
}

static const char *level_code(int level)
{
	const char *code = gpuctl_topo_level_code(level);
	return code ? code : "N/A";
}

static void bandwidth_text(double gbps, char *buf, size_t size)
{
	/* Whole numbers print without decimals (300), others with one (31.5). */
	if (gbps == (double)(int64_t)gbps)
		snprintf(buf, size, "%" PRId64, (int64_t)gbps);
	else
		snprintf(buf, size, "%.1f", gbps);
}

static void link_cell(const struct gpuctl_snapshot *snap, size_t a, size_t b, bool bandwidth,
                      char *buf, size_t size)
{
	struct gpuctl_link l = GPUCTL_LINK_INIT;
	if (a == b) {
		snprintf(buf, size, " X ");
		return;
	}
	if (gpuctl_snapshot_link(snap, a, b, &l) < 0) {
		snprintf(buf, size, "N/A");
		return;
	}
	if (bandwidth)
		bandwidth_text(l.bandwidth, buf, size);
	else if (l.nvlinks > 0)
		snprintf(buf, size, "NV%d", l.nvlinks);
	else
		snprintf(buf, size, "%s", level_code(l.level));
}

static const char legend[] =
        "Legend:\n"
        "\n"
        "  X    = this GPU itself\n"
        "  SYS  = path over PCIe and the SMP link between NUMA nodes (e.g. QPI/UPI)\n"
        "  NODE = path over PCIe and between PCIe host bridges inside one NUMA node\n"
        "  PHB  = path over PCIe through a PCIe host bridge (usually the CPU)\n"
        "  PXB  = path over several PCIe bridges, not through a PCIe host bridge\n"
        "  PIX  = path over at most one PCIe bridge\n"
        "  NV#  = path over a bonded set of # NVLinks\n";

/* The path classes gpuctl_snapshot_path_bandwidth models, in nvidia-smi's order. */
static const int path_levels[] = {GPUCTL_TOPO_SINGLE, GPUCTL_TOPO_MULTIPLE, GPUCTL_TOPO_HOSTBRIDGE,
                                  GPUCTL_TOPO_NODE, GPUCTL_TOPO_SYSTEM};

/* The CPU the bandwidth model used and what it makes of each path class. */
static void print_cpu(const struct gpuctl_snapshot *snap)
{
	struct gpuctl_cpu cpu = GPUCTL_CPU_INIT;
	char num[32];
	double gbps;

	if (gpuctl_snapshot_cpu(snap, &cpu) < 0)
		return;
	printf("\nCPU: %s", cpu.name[0] ? cpu.name : cpu.vendor[0] ? cpu.vendor : "unknown");
	if (cpu.vendor[0] && cpu.model >= 0) {
		if (cpu.family >= 0)
			printf(" (%s family %d model %d)", cpu.vendor, cpu.family, cpu.model);
		else
			printf(" (%s part 0x%x)", cpu.vendor, (unsigned)cpu.model);
	}
	bandwidth_text(cpu.inter_socket_gbps, num, sizeof(num));
	printf(": %s figures, %s GB/s between sockets, P2P through the CPU ", cpu.cpu_class, num);
	if (cpu.p2p_overhead > 1.0)
		printf("costs %g\n", cpu.p2p_overhead);
	else
		printf("costs nothing\n");
	printf("Modelled GB/s per direction of a pair without NVLink (P2P on, slowest GPU link):");
	for (size_t i = 0; i < sizeof(path_levels) / sizeof(path_levels[0]); i++)
		if (gpuctl_snapshot_path_bandwidth(snap, path_levels[i], &gbps) >= 0) {
			bandwidth_text(gbps, num, sizeof(num));
			printf(" %s %s", level_code(path_levels[i]), num);
		}
	putchar('\n');
}

static void print_matrix(const struct gpuctl_snapshot *snap, bool bandwidth)
{
	size_t n = gpuctl_snapshot_gpu_count(snap);
	char cell[64];

	for (size_t j = 0; j < n; j++)
		printf("\tGPU%zu", j);
	printf("\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n");
	for (size_t i = 0; i < n; i++) {
		const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(snap, i);
		int64_t v;
		printf("GPU%zu", i);
		for (size_t j = 0; j < n; j++) {
			link_cell(snap, i, j, bandwidth, cell, sizeof(cell));
			printf("\t%s", cell);
		}
		const char *cpus = gpuctl_gpu_str(gpu, GPUCTL_F_CPU_AFFINITY);
		printf("\t%s", cpus && cpus[0] ? cpus : "N/A");
		if (gpuctl_gpu_int(gpu, GPUCTL_F_NUMA_NODE, &v) >= 0 && v >= 0)
			printf("\t%" PRId64, v);
		else
			printf("\tN/A");
		if (gpuctl_gpu_int(gpu, GPUCTL_F_GPU_NUMA_NODE, &v) >= 0 && v >= 0)
			printf("\t%" PRId64 "\n", v);
		else
			printf("\tN/A\n");
	}
	putchar('\n');
	if (bandwidth)
		printf("Cells are the modelled bandwidth between two GPUs in GB/s per direction;\n"
		       "see docs/topology.md for the model.\n");
	else
		fputs(legend, stdout);
	print_cpu(snap);
}

static json_t *gpu_json(const struct gpuctl_gpu *gpu)
{
	static const enum gpuctl_field fields[] = {
	        GPUCTL_F_INDEX,     GPUCTL_F_UUID,          GPUCTL_F_PCI_BUS_ID,   GPUCTL_F_NAME,
	        GPUCTL_F_NUMA_NODE, GPUCTL_F_GPU_NUMA_NODE, GPUCTL_F_CPU_AFFINITY,
	};
	json_t *o = json_object();
	for (size_t i = 0; o && i < sizeof(fields) / sizeof(fields[0]); i++) {
		const struct gpuctl_field_info *fi = gpuctl_field_info(fields[i]);
		if (json_put(o, fi->key, format_field_json(gpu, fields[i])) < 0) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

static json_t *link_json(const struct gpuctl_snapshot *snap, size_t a, size_t b)
{
	struct gpuctl_link l = GPUCTL_LINK_INIT;
	json_t *o = json_object();
	if (!o)
		return NULL;
	bool ok = gpuctl_snapshot_link(snap, a, b, &l) >= 0;
	const char *code = ok && l.level >= 0 ? gpuctl_topo_level_code(l.level) : NULL;
	if (json_put(o, "a", json_integer((json_int_t)a)) < 0 ||
	    json_put(o, "b", json_integer((json_int_t)b)) < 0 ||
	    json_put(o, "level", json_string_or_null(code)) < 0 ||
	    json_put(o, "level_value", code ? json_integer(l.level) : json_null()) < 0 ||
	    json_put(o, "nvlinks", ok ? json_integer(l.nvlinks) : json_null()) < 0 ||
	    json_put(o, "nvswitch", ok ? json_boolean(l.nvswitch) : json_null()) < 0 ||
	    json_put(o, "p2p", ok ? json_text(p2p_code(l.p2p)) : json_null()) < 0 ||
	    json_put(o, "bandwidth_gbps", ok ? json_real(l.bandwidth) : json_null()) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* "cpu" and "path_bandwidth_gbps" of the JSON document (docs/json.md). */
static int cpu_json(const struct gpuctl_snapshot *snap, json_t *root)
{
	struct gpuctl_cpu cpu = GPUCTL_CPU_INIT;
	json_t *o, *paths;
	double gbps;

	if (gpuctl_snapshot_cpu(snap, &cpu) < 0)
		return json_put(root, "cpu", json_null());
	o = json_object();
	if (!o)
		return -ENOMEM;
	if (json_put(o, "vendor", json_string_or_null(cpu.vendor[0] ? cpu.vendor : NULL)) < 0 ||
	    json_put(o, "family", cpu.family >= 0 ? json_integer(cpu.family) : json_null()) < 0 ||
	    json_put(o, "model", cpu.model >= 0 ? json_integer(cpu.model) : json_null()) < 0 ||
	    json_put(o, "name", json_string_or_null(cpu.name[0] ? cpu.name : NULL)) < 0 ||
	    json_put(o, "class", json_string(cpu.cpu_class)) < 0 ||
	    json_put(o, "inter_socket_gbps", json_real(cpu.inter_socket_gbps)) < 0 ||
	    json_put(o, "p2p_overhead", json_real(cpu.p2p_overhead)) < 0) {
		json_decref(o);
		return -ENOMEM;
	}
	if (json_put(root, "cpu", o) < 0)
		return -ENOMEM;
	paths = json_object();
	if (!paths)
		return -ENOMEM;
	for (size_t i = 0; i < sizeof(path_levels) / sizeof(path_levels[0]); i++)
		if (gpuctl_snapshot_path_bandwidth(snap, path_levels[i], &gbps) >= 0 &&
		    json_put(paths, level_code(path_levels[i]), json_real(gbps)) < 0) {
			json_decref(paths);
			return -ENOMEM;
		}
	return json_put(root, "path_bandwidth_gbps", paths);
}

static int print_json(const struct gpuctl_snapshot *snap)
{
	size_t n = gpuctl_snapshot_gpu_count(snap);
	json_t *root = json_object(), *gpus = json_array(), *links = json_array();
	int r = root && gpus && links ? 0 : -ENOMEM;
	for (size_t i = 0; r >= 0 && i < n; i++)
		if (json_array_append_new(gpus, gpu_json(gpuctl_snapshot_gpu(snap, i))) < 0)
			r = -ENOMEM;
	for (size_t a = 0; r >= 0 && a < n; a++)
		for (size_t b = a + 1; r >= 0 && b < n; b++)
			if (json_array_append_new(links, link_json(snap, a, b)) < 0)
				r = -ENOMEM;
	if (r >= 0) {
		r = json_put(root, "gpus", gpus);
		gpus = NULL;
	}
	if (r >= 0) {
		r = json_put(root, "links", links);
		links = NULL;
	}
	if (r >= 0)
		r = cpu_json(snap, root);
	if (r >= 0)
		r = json_print(root);
	json_decref(gpus);
	json_decref(links);
	json_decref(root);
	return r;
}

/* ---- the command ---- */

/* What the command line asks for. */
struct topo_args {
	enum topo_format format; /* --format */
	bool bandwidth;          /* --bandwidth: GB/s in the matrix */
};

/* The options into a, checked together: CMD_GO_ON, or the exit status to return now (--help,
 * a usage error). */
static int parse_options(struct topo_args *a, int argc, char **argv)
{
	int opt;

	while ((opt = cmd_getopt(&cmd_topo_entry, argc, argv)) != -1) {
		switch (opt) {
		case CMD_OPT_FORMAT: {
			int i, st = cmd_parse_format(&cmd_topo_entry, optarg, &i);

			if (st)
				return st;
			a->format = (enum topo_format)i;
			break;
		}
		case OPT_BANDWIDTH:
			a->bandwidth = true;
			break;
		case 'h':
			cmd_usage(&cmd_topo_entry, stdout);
			return CLI_EXIT_OK;
		default:
			return cmd_bad_option(&cmd_topo_entry, opt, argv);
		}
	}
	if (optind < argc)
		return cmd_usage_error(&cmd_topo_entry, "unexpected argument '%s'", argv[optind]);
	if (a->bandwidth && a->format == TOPO_JSON)
		return cmd_usage_error(&cmd_topo_entry,
		                       "--bandwidth goes with the matrix; JSON always has "
		                       "'bandwidth_gbps'");
	return CMD_GO_ON;
}

/* One snapshot with the topology, printed as a matrix or JSON; the exit status. */
static int show_topology(struct cli *cli, const struct topo_args *a)
{
	/* The matrix's own columns; the pair facts come with GPUCTL_SNAP_TOPOLOGY. */
	static const enum gpuctl_field fields[] = {GPUCTL_F_CPU_AFFINITY, GPUCTL_F_NUMA_NODE,
	                                           GPUCTL_F_GPU_NUMA_NODE};
	struct gpuctl_snapshot *snap = NULL;
	int status;

	status = cli_snapshot_fields(cli, GPUCTL_SNAP_TOPOLOGY, fields,
	                             sizeof(fields) / sizeof(fields[0]), &snap);
	if (status)
		return status;
	if (a->format == TOPO_JSON) {
		int r = print_json(snap);
		if (r < 0) {
			cli_error("topo: cannot write the output: %s", strerror(-r));
			status = CLI_EXIT_FAILURE;
		}
	} else {
		print_matrix(snap, a->bandwidth);
	}
	gpuctl_snapshot_free(snap);
	return status;
}

static int cmd_topo_exec(struct cli *cli, int argc, char **argv)
{
	struct topo_args a = {.format = TOPO_MATRIX};
	int status;

	status = parse_options(&a, argc, argv);
	if (status != CMD_GO_ON)
		return status;
	return show_topology(cli, &a);
}

const struct cmd_entry cmd_topo_entry = {
        .name = "topo",
        .long_options = topo_options,
        .formats = (const char *const[]){"matrix", "json", NULL},
        .short_options = "+:h",
        .usage = "[--format matrix|json] [--bandwidth]",
        .summary = "show how the GPUs are connected (like nvidia-smi topo -m)",
        .options =
                "  --format FORMAT  matrix (default) or json\n"
                "  --bandwidth      show the modelled GB/s of each pair instead of the link type\n"
                "  -h, --help       print this help\n",
        .exec = cmd_topo_exec,
        .exits = CMD_EXITS_DRIVER | CMD_EXITS_HUNG,
};
