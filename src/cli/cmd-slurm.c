// SPDX-License-Identifier: MIT
/*
 * cmd-slurm.c: `gpuctl slurm gres`: this node's gres.conf for Slurm, with the topology Slurm's
 * own autodetection leaves out (docs/slurm.md).
 *
 * Decisions:
 * - One line per GPU in PCI bus order: NodeName=<node> Name=gpu Type=<short model>
 *   File=<dev-dir>/nvidia<NVML minor number> Cores=<Slurm's abstract cores> Links=<...>, after a
 *   node-local `NodeName=<node> AutoDetect=off` line, so the node's lines can be concatenated
 *   into a cluster's gres.conf.
 * - Links: Slurm's ordered list (gres.conf(5)): position j is the GPU of line j, -1 for the GPU
 *   itself, else the number of NVLinks that are up between the two (gpuctl_link.nvlinks). For
 *   an NVSwitch fabric every pair is connected with the links each GPU has into the fabric (the
 *   smaller of the two), where Slurm's autodetection writes 0. PCIe-only pairs are 0.
 * - Cores: the GPU's CPU affinity (NVML) in Slurm's abstract core numbering (gres.h:
 *   cpu_topology_read), which is what slurmd -C's Sockets x CoresPerSocket count; a core counts
 *   when any of its threads is in the affinity.
 * - Refusals (exit 1, one line): a GPU in MIG mode (Slurm 22.05 needs its MIG devices as
 *   MultipleFiles= records with the nvidia-caps device files, which gpuctl does not write: use
 *   AutoDetect=nvml for such nodes); a GPU without a minor number; an affinity naming a CPU the
 *   node's topology does not list. Never a line slurmd would reject.
 * - A lost GPU (NVML cannot reach it: no minor number, no bus id) is left out and the other
 *   GPUs' lines are written, with one warning per lost GPU on stderr, a comment (or "lost" in
 *   JSON) naming it, and exit 1: the node is still described, and a slurm.conf whose Gres=
 *   still counts the GPU has slurmctld set the node INVAL and drain it (measured, Slurm 22.05:
 *   "gres/gpu count reported lower than configured") until the GPU is back.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "format.h"
#include "gres.h"
#include "parse.h"
#include "util.h"

#define TYPE_MAX   32
#define LINE_MAX_G 8192

enum {
	OPT_NODE = 0x100,
	OPT_DEV_DIR,
};

static const struct option slurm_options[] = {
        CMD_OPTION_FORMAT,
        {"node", required_argument, NULL, OPT_NODE},
        {"dev-dir", required_argument, NULL, OPT_DEV_DIR},
        CMD_OPTION_HELP,
        {NULL, 0, NULL, 0},
};

struct gres_line {
	size_t gpu;             /* snapshot index */
	char type[TYPE_MAX];    /* Type= */
	char file[4200];        /* File= */
	char cores[LINE_MAX_G]; /* Cores=, "" when unknown */
	int *links;             /* Links=, one per line; owned */
};

static int cmp_bus(const void *a, const void *b, void *snap)
{
	const struct gres_line *x = a, *y = b;
	const char *bx = gpuctl_gpu_str(gpuctl_snapshot_gpu(snap, x->gpu), GPUCTL_F_PCI_BUS_ID);
	const char *by = gpuctl_gpu_str(gpuctl_snapshot_gpu(snap, y->gpu), GPUCTL_F_PCI_BUS_ID);

	return strcasecmp(bx ? bx : "", by ? by : "");
}

/* The GPU's CPU affinity as abstract cores ("0-15,64-79"); 0, or -1 after printing why. */
static int affinity_cores(const struct gpuctl_gpu *g, size_t index, const struct cpu_topology *topo,
                          char *buf, size_t size)
{
	const char *aff = gpuctl_gpu_str(g, GPUCTL_F_CPU_AFFINITY);
	size_t nbits = PARSE_CPULIST_MAX_CPU + 1;
	_cleanup_free_ uint64_t *cpus = NULL;
	_cleanup_free_ uint64_t *cores = NULL;

	buf[0] = '\0';
	if (!aff || !aff[0])
		return 0; /* NVML does not say: no Cores= (slurmd accepts that) */
	cpus = calloc(nbits / 64, sizeof(*cpus));
	cores = calloc(nbits / 64, sizeof(*cores));
	if (!cpus || !cores || parse_cpulist(aff, cpus, nbits) < 0) {
		cli_error("slurm gres: GPU %zu: cannot read its CPU affinity '%s'", index, aff);
		return -1;
	}
	for (size_t c = 0; c < nbits; c++) {
		if (!(cpus[c / 64] >> (c % 64) & 1))
			continue;
		if (c >= topo->n_cpus || topo->core_of[c] < 0) {
			cli_error(
			        "slurm gres: GPU %zu: its CPU affinity names CPU %zu, which this "
			        "node's CPU topology does not list (is NVML from another machine? "
			        "under nvsim, use nvsim exec --sysfs)",
			        index, c);
			return -1;
		}
		cores[topo->core_of[c] / 64] |= UINT64_C(1) << (topo->core_of[c] % 64);
	}
	(void)format_cpulist(cores, nbits, buf, size);
	return 0;
}

static void print_links(FILE *f, const struct gres_line *l, size_t n)
{
	for (size_t j = 0; j < n; j++)
		fprintf(f, "%s%d", j ? "," : "", l->links[j]);
}

/* The GPUs of snap that are lost, as "3" or "3,5" ("" when none). */
static void lost_list(const struct gpuctl_snapshot *snap, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < gpuctl_snapshot_gpu_count(snap) && len < size; i++)
		if (gpuctl_gpu_lost(gpuctl_snapshot_gpu(snap, i)))
			len += (size_t)snprintf(buf + len, size - len, "%s%zu", len ? "," : "", i);
}

static int print_text(const struct gpuctl_snapshot *snap, const char *node,
                      const struct gres_line *lines, size_t n, const struct cpu_topology *topo,
                      const char *gres)
{
	unsigned cps = topo->sockets ? topo->cores / topo->sockets : 0;
	char lost[256];

	printf("# gres.conf lines for node %s (gpuctl slurm gres): GPUs in PCI bus order.\n", node);
	printf("# Links: NVLinks to the GPU of each line in turn (-1: itself; through NVSwitches,\n"
	       "# the links each GPU has into the fabric).\n");
	printf("# Cores: Slurm's abstract core numbers. The node's slurm.conf line:\n");
	printf("#   NodeName=%s CPUs=%u Sockets=%u CoresPerSocket=%u ThreadsPerCore=%u Gres=%s\n",
	       node, topo->cores * topo->threads_per_core, topo->sockets, cps,
	       topo->threads_per_core, gres);
	lost_list(snap, lost, sizeof(lost));
	if (lost[0])
		printf("# Left out, lost (NVML cannot reach it): GPU %s. The counts above\n"
		       "# lack it; a slurm.conf that counts it has the node set INVAL and\n"
		       "# drained until it is back.\n",
		       lost);
	printf("NodeName=%s AutoDetect=off\n", node);
	for (size_t i = 0; i < n; i++) {
		printf("NodeName=%s Name=gpu Type=%s File=%s", node, lines[i].type, lines[i].file);
		if (lines[i].cores[0])
			printf(" Cores=%s", lines[i].cores);
		printf(" Links=");
		print_links(stdout, &lines[i], n);
		printf("\n");
	}
	return cli_finish_output(CLI_EXIT_OK);
}

static int print_json_out(const struct gpuctl_snapshot *snap, const char *node,
                          const struct gres_line *lines, size_t n, const struct cpu_topology *topo,
                          const char *gres)
{
	json_t *root = json_object(), *gpus = json_array(), *cpus = json_object();
	json_t *lost = json_array();
	int r = 0;

	if (!root || !gpus || !cpus || !lost)
		r = -ENOMEM;
	for (size_t i = 0; r == 0 && i < gpuctl_snapshot_gpu_count(snap); i++)
		if (gpuctl_gpu_lost(gpuctl_snapshot_gpu(snap, i)) &&
		    json_array_append_new(lost, json_integer((json_int_t)i)) < 0)
			r = -ENOMEM;
	for (size_t i = 0; i < n && r == 0; i++) {
		const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, lines[i].gpu);
		json_t *o = json_object(), *links = json_array();

		for (size_t j = 0; j < n && links; j++)
			if (json_array_append_new(links, json_integer(lines[i].links[j])) < 0)
				r = -ENOMEM;
		if (!o || !links || r < 0 ||
		    json_put(o, "index", json_integer((json_int_t)lines[i].gpu)) < 0 ||
		    json_put(o, "uuid", json_string_or_null(gpuctl_gpu_str(g, GPUCTL_F_UUID))) <
		            0 ||
		    json_put(o, "type", json_string(lines[i].type)) < 0 ||
		    json_put(o, "file", json_string(lines[i].file)) < 0 ||
		    json_put(o, "cores",
		             lines[i].cores[0] ? json_string(lines[i].cores) : json_null()) < 0 ||
		    json_put(o, "links", links) < 0 || json_array_append_new(gpus, o) < 0) {
			json_decref(links);
			json_decref(o);
			r = -ENOMEM;
		}
	}
	if (r == 0 &&
	    (json_put(cpus, "cpus",
	              json_integer((json_int_t)topo->cores * topo->threads_per_core)) < 0 ||
	     json_put(cpus, "sockets", json_integer(topo->sockets)) < 0 ||
	     json_put(cpus, "cores_per_socket",
	              json_integer(topo->sockets ? topo->cores / topo->sockets : 0)) < 0 ||
	     json_put(cpus, "threads_per_core", json_integer(topo->threads_per_core)) < 0 ||
	     json_put(root, "node", json_string(node)) < 0 ||
	     json_put(root, "gres", json_string(gres)) < 0 || json_put(root, "cpus", cpus) < 0 ||
	     json_put(root, "gpus", gpus) < 0 || json_put(root, "lost", lost) < 0))
		r = -ENOMEM;
	if (r == 0)
		r = json_print(root);
	json_decref(gpus);
	json_decref(cpus);
	json_decref(lost);
	json_decref(root);
	if (r < 0) {
		cli_error("slurm gres: cannot write the output: %s", strerror(-r));
		return CLI_EXIT_FAILURE;
	}
	return cli_finish_output(CLI_EXIT_OK);
}

/* "gpu:a100:8" or "gpu:rtx4090:1,gpu:rtxa6000:1": each type once, in line order. */
static void gres_string(const struct gres_line *lines, size_t n, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		size_t count = 0;
		bool seen = false;

		for (size_t k = 0; k < i; k++)
			seen |= strcmp(lines[k].type, lines[i].type) == 0;
		if (seen)
			continue;
		for (size_t k = i; k < n; k++)
			count += strcmp(lines[k].type, lines[i].type) == 0;
		len += (size_t)snprintf(buf + len, len < size ? size - len : 0, "%sgpu:%s:%zu",
		                        len ? "," : "", lines[i].type, count);
	}
	if (n == 0)
		(void)snprintf(buf, size, "gpu:0");
}

/* The lines, one per GPU that is not lost, in PCI bus order. */
struct gres_lines {
	struct gres_line *v; /* n entries (calloc'ed for every GPU of the snapshot) */
	size_t n;
};

static void gres_lines_free(struct gres_lines *l)
{
	for (size_t i = 0; l->v && i < l->n; i++)
		free(l->v[i].links);
	free(l->v);
}

/* The GPUs that are not lost into l, in PCI bus order, with a warning for each lost one;
 * *lost is set when there was one. 0 or the exit status. */
static int gres_gpus(const struct gpuctl_snapshot *snap, struct gres_lines *l, bool *lost)
{
	l->v = calloc(gpuctl_snapshot_gpu_count(snap) + 1, sizeof(*l->v));
	if (!l->v) {
		cli_error("slurm gres: out of memory");
		return CLI_EXIT_FAILURE;
	}
	for (size_t i = 0; i < gpuctl_snapshot_gpu_count(snap); i++) {
		if (!gpuctl_gpu_lost(gpuctl_snapshot_gpu(snap, i))) {
			l->v[l->n++].gpu = i;
			continue;
		}
		cli_error(
		        "slurm gres: warning: GPU %zu is lost (NVML cannot reach it): its line is "
		        "left out, the other GPUs' lines are written (exit 1)",
		        i);
		*lost = true;
	}
	qsort_r(l->v, l->n, sizeof(*l->v), cmp_bus, (void *)snap);
	return 0;
}

/* Line i of l: Type=, File=, Cores= and Links=. 0, or the exit status after the refusal's
 * line (a GPU in MIG mode, no minor number, an affinity the topology does not list). */
static int gres_fill(const struct gpuctl_snapshot *snap, struct gres_lines *l, size_t i,
                     const struct cpu_topology *topo, const char *dev_dir)
{
	struct gres_line *line = &l->v[i];
	const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, line->gpu);
	int64_t minor = -1, mig = 0;

	if (gpuctl_gpu_int(g, GPUCTL_F_MIG_MODE, &mig) == 0 && mig) {
		cli_error("slurm gres: GPU %zu is in MIG mode: Slurm 22.05 takes MIG devices "
		          "as MultipleFiles= records, which gpuctl does not write (use "
		          "AutoDetect=nvml on this node; docs/slurm.md)",
		          line->gpu);
		return CLI_EXIT_FAILURE;
	}
	if (gpuctl_gpu_int(g, GPUCTL_F_MINOR_NUMBER, &minor) < 0 || minor < 0) {
		cli_error("slurm gres: GPU %zu: NVML gives no minor number, so no device file",
		          line->gpu);
		return CLI_EXIT_FAILURE;
	}
	gres_gpu_type(gpuctl_gpu_str(g, GPUCTL_F_NAME), line->type, sizeof(line->type));
	(void)snprintf(line->file, sizeof(line->file), "%s/nvidia%lld", dev_dir, (long long)minor);
	if (affinity_cores(g, line->gpu, topo, line->cores, sizeof(line->cores)) < 0)
		return CLI_EXIT_FAILURE;
	line->links = calloc(l->n, sizeof(int));
	if (!line->links) {
		cli_error("slurm gres: out of memory");
		return CLI_EXIT_FAILURE;
	}
	for (size_t j = 0; j < l->n; j++) {
		struct gpuctl_link link = GPUCTL_LINK_INIT;

		if (j == i)
			line->links[j] = -1;
		else if (gpuctl_snapshot_link(snap, line->gpu, l->v[j].gpu, &link) == 0)
			line->links[j] = link.nvlinks > 0 ? link.nvlinks : 0;
	}
	return 0;
}

/* What the command line asks for. */
struct slurm_args {
	bool json;           /* --format json */
	const char *node;    /* --node, NULL: gres_node_name's */
	const char *dev_dir; /* --dev-dir */
};

/* `slurm gres` for snap: the node's name and CPU topology, one line per GPU, printed; the exit
 * status (1 when a GPU was lost, after the other GPUs' lines). */
static int gres_write(const struct slurm_args *a, const struct gpuctl_snapshot *snap)
{
	_cleanup_(cpu_topology_free) struct cpu_topology topo = {0};
	_cleanup_(gres_lines_free) struct gres_lines l = {0};
	char node[256], why[512] = "", gres[1024];
	bool lost = false;
	int status, r;

	if (a->node) {
		(void)snprintf(node, sizeof(node), "%s", a->node);
	} else if ((r = gres_node_name(node, sizeof(node))) < 0) {
		cli_error("slurm gres: cannot tell this node's Slurm name (%s): give --node",
		          strerror(-r));
		return CLI_EXIT_FAILURE;
	}
	r = cpu_topology_read(NULL, &topo, why, sizeof(why));
	if (r < 0) {
		cli_error("slurm gres: cannot read this node's CPU topology: %s", why);
		return CLI_EXIT_FAILURE;
	}
	status = gres_gpus(snap, &l, &lost);
	for (size_t i = 0; i < l.n && status == 0; i++)
		status = gres_fill(snap, &l, i, &topo, a->dev_dir);
	if (status)
		return status;
	gres_string(l.v, l.n, gres, sizeof(gres));
	status = a->json ? print_json_out(snap, node, l.v, l.n, &topo, gres)
	                 : print_text(snap, node, l.v, l.n, &topo, gres);
	if (status == CLI_EXIT_OK && lost)
		status = CLI_EXIT_FAILURE;
	return status;
}

/* A snapshot with the topology and MIG modes, then gres_write; the exit status. */
static int gres_exec(struct cli *cli, const struct slurm_args *a)
{
	static const enum gpuctl_field fields[] = {
	        GPUCTL_F_NAME,     GPUCTL_F_MINOR_NUMBER, GPUCTL_F_CPU_AFFINITY,
	        GPUCTL_F_MIG_MODE, GPUCTL_F_PCI_BUS_ID,
	};
	struct gpuctl_snapshot *snap = NULL;
	int status;

	status = cli_snapshot_fields(cli, GPUCTL_SNAP_TOPOLOGY | GPUCTL_SNAP_MIG, fields,
	                             sizeof(fields) / sizeof(fields[0]), &snap);
	if (status)
		return status;
	status = gres_write(a, snap);
	gpuctl_snapshot_free(snap);
	return status;
}

/* The subcommand ("gres", the only one) and its options into a: CMD_GO_ON, or the exit status
 * to return now (--help, a usage error). */
static int parse_options(struct slurm_args *a, int argc, char **argv)
{
	int opt;

	/* gpuctl slurm gres [options]: the options belong to the subcommand */
	if (argc > 1 && strcmp(argv[1], "gres") == 0) {
		argc--;
		argv++;
	} else if (argc > 1 && argv[1][0] != '-') {
		return cmd_usage_error(&cmd_slurm_entry, "unknown subcommand '%s' (gres)", argv[1]);
	} else if (argc == 1) {
		return cmd_usage_error(&cmd_slurm_entry, "say what: gres");
	}
	while ((opt = cmd_getopt(&cmd_slurm_entry, argc, argv)) != -1) {
		switch (opt) {
		case CMD_OPT_FORMAT: {
			int i, st = cmd_parse_format(&cmd_slurm_entry, optarg, &i);

			if (st)
				return st;
			a->json = i == 1;
			break;
		}
		case OPT_NODE:
			if (!optarg[0] || strpbrk(optarg, " \t\n=,[]#"))
				return cmd_usage_error(&cmd_slurm_entry,
				                       "--node: '%s' is not a Slurm node name",
				                       optarg);
			a->node = optarg;
			break;
		case OPT_DEV_DIR:
			if (optarg[0] != '/' || strpbrk(optarg, " \t\n=,[]#"))
				return cmd_usage_error(
				        &cmd_slurm_entry,
				        "--dev-dir: '%s' is not an absolute path without "
				        "blanks, '=', ',', brackets or '#'",
				        optarg);
			a->dev_dir = optarg;
			break;
		case 'h':
			cmd_usage(&cmd_slurm_entry, stdout);
			return CLI_EXIT_OK;
		default:
			return cmd_bad_option(&cmd_slurm_entry, opt, argv);
		}
	}
	if (optind < argc)
		return cmd_usage_error(&cmd_slurm_entry, "unexpected argument '%s'", argv[optind]);
	if (strcmp(argv[0], "gres") != 0)
		return cmd_usage_error(&cmd_slurm_entry, "say what: gres");
	return CMD_GO_ON;
}

static int cmd_slurm_exec(struct cli *cli, int argc, char **argv)
{
	struct slurm_args a = {.dev_dir = "/dev"};
	int status;

	status = parse_options(&a, argc, argv);
	if (status != CMD_GO_ON)
		return status;
	return gres_exec(cli, &a);
}

const struct cmd_entry cmd_slurm_entry = {
        .name = "slurm",
        .long_options = slurm_options,
        .formats = (const char *const[]){"text", "json", NULL},
        .short_options = "+:h",
        .usage = "gres [--format text|json] [--node NAME] [--dev-dir DIR]",
        .summary = "print this node's gres.conf for Slurm, with NVLink and CPU topology",
        .options = "  --format FORMAT  text (default: gres.conf lines) or json\n"
                   "  --node NAME      the Slurm node name (default: $SLURMD_NODENAME, else the\n"
                   "                   short host name)\n"
                   "  --dev-dir DIR    where the GPUs' device files are (default /dev)\n"
                   "  -h, --help       print this help\n"
                   "\n"
                   "One line per GPU in PCI bus order, for a gres.conf with AutoDetect=off:\n"
                   "Type (short model), File (/dev/nvidia<minor>), Cores (Slurm's abstract core\n"
                   "numbers of the GPU's CPU affinity) and Links (NVLinks to each GPU, in line\n"
                   "order; through NVSwitches every pair is connected). A comment gives the\n"
                   "node's slurm.conf line with its Gres=. A GPU in MIG mode is refused (exit 1).\n"
                   "A lost GPU is left out: the other GPUs' lines are written, a warning on\n"
                   "stderr names it, and the exit status is 1.\n",
        .exec = cmd_slurm_exec,
        .exits = CMD_EXITS_DRIVER | CMD_EXITS_HUNG,
};
