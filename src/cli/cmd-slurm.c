// SPDX-License-Identifier: MIT
/*
 * cmd-slurm.c: `gpuctl slurm gres`: this node's gres.conf for Slurm, with the topology Slurm's
 * own autodetection leaves out (docs/slurm.md).
 *
 * Decisions:
 * - One line per GPU in PCI bus order: NodeName=<node> Name=gpu Type=<Slurm's type>
 *   File=<dev-dir>/nvidia<NVML minor number> Cores=<whole sockets> Links=<...>, after a
 *   node-local `NodeName=<node> AutoDetect=off` line, so the node's lines can be concatenated
 *   into a cluster's gres.conf.
 * - Type: the string Slurm's AutoDetect=nvml derives (gres.c, gres_gpu_type: lower case, spaces
 *   to '_'), so a site mixing autodetected nodes and ours asks for one type.
 * - A GPU in MIG mode: one line per MIG device, in MIG index order, as AutoDetect=nvml writes
 *   them (Slurm's gpu_nvml.c, _handle_mig): MultipleFiles= the parent's /dev/nvidiaN, then the
 *   GPU instance's and the compute instance's /dev/nvidia-caps/nvidia-capN (the library's
 *   device-node map, gpuctl_devnodes_of: minors from the driver's nvidia-caps mig-minors), a
 *   Type from the profile (gres_mig_type) and the parent's Cores. A GPU in MIG mode without MIG
 *   devices gets no line (CUDA cannot use it; AutoDetect logs an error), a comment and a
 *   warning say so.
 * - Links: Slurm's ordered list (gres.conf(5)): position j is the device of line j, -1 for the
 *   device itself, else the number of NVLinks that are up between the two GPUs
 *   (gpuctl_link.nvlinks). For an NVSwitch fabric every pair is connected with the links each
 *   GPU has into the fabric (the smaller of the two), where Slurm's autodetection writes 0.
 *   PCIe-only pairs are 0, and so is every pair with a MIG device (MIG devices have no P2P).
 * - Cores: the GPU's CPU affinity (NVML) in Slurm's abstract core numbering (gres.h:
 *   cpu_topology_read), which is what slurmd -C's Sockets x CoresPerSocket count; a core counts
 *   when any of its threads is in the affinity; then widened to whole sockets
 *   (gres_cores_whole_sockets), because Slurm >= 24.11 refuses part of a socket. When that
 *   widened a GPU's cores, a comment says so and names SlurmdParameters=numa_node_as_socket;
 *   JSON keeps the finer list as affinity_cores.
 * - Refusals (exit 1, one line): a GPU without a minor number; a MIG device whose capability
 *   minors the driver's file does not give, or without a profile; a name Slurm's Type cannot
 *   carry; an affinity naming a CPU the node's topology does not list. Never a line slurmd
 *   would reject.
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

#define PATH_MAX_G 4200
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

/* One gres.conf record: a whole GPU or one MIG device. */
struct gres_line {
	size_t gpu;                /* snapshot index */
	int mig;                   /* the MIG device's place on the GPU, -1 for the whole GPU */
	char type[GRES_TYPE_MAX];  /* Type= */
	char files[3][PATH_MAX_G]; /* File= (whole GPU: files[0]) or MultipleFiles= (MIG) */
	size_t nfiles;             /* 1, or 3 for a MIG device */
	char cores[LINE_MAX_G];    /* Cores=, whole sockets; "" when unknown */
	char affinity[LINE_MAX_G]; /* the GPU's own cores before the widening; "" when unknown */
	bool finer;                /* affinity is finer than cores */
	int *links;                /* Links=, one per line; owned */
};

static int cmp_bus(const void *a, const void *b, void *snap)
{
	const size_t *x = a, *y = b;
	const char *bx = gpuctl_gpu_str(gpuctl_snapshot_gpu(snap, *x), GPUCTL_F_PCI_BUS_ID);
	const char *by = gpuctl_gpu_str(gpuctl_snapshot_gpu(snap, *y), GPUCTL_F_PCI_BUS_ID);

	return strcasecmp(bx ? bx : "", by ? by : "");
}

/* The GPU's CPU affinity as abstract cores widened to whole sockets into line->cores ("0-63"),
 * the affinity itself into line->affinity; 0, or -1 after printing why. */
static int affinity_cores(const struct gpuctl_gpu *g, size_t index, const struct cpu_topology *topo,
                          struct gres_line *line)
{
	const char *aff = gpuctl_gpu_str(g, GPUCTL_F_CPU_AFFINITY);
	size_t nbits = PARSE_CPULIST_MAX_CPU + 1;
	_cleanup_free_ uint64_t *cpus = NULL;
	_cleanup_free_ uint64_t *cores = NULL;
	_cleanup_free_ uint64_t *whole = NULL;

	line->cores[0] = line->affinity[0] = '\0';
	if (!aff || !aff[0])
		return 0; /* NVML does not say: no Cores= (slurmd accepts that) */
	cpus = calloc(nbits / 64, sizeof(*cpus));
	cores = calloc(nbits / 64, sizeof(*cores));
	whole = calloc(nbits / 64, sizeof(*whole));
	if (!cpus || !cores || !whole || parse_cpulist(aff, cpus, nbits) < 0) {
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
	line->finer = gres_cores_whole_sockets(topo, cores, whole, nbits);
	(void)format_cpulist(cores, nbits, line->affinity, sizeof(line->affinity));
	(void)format_cpulist(whole, nbits, line->cores, sizeof(line->cores));
	return 0;
}

static void print_links(FILE *f, const struct gres_line *l, size_t n)
{
	for (size_t j = 0; j < n; j++)
		fprintf(f, "%s%d", j ? "," : "", l->links[j]);
}

/* The GPUs of snap with a property, as "3" or "3,5" ("" when none). */
static void gpu_list(const struct gpuctl_snapshot *snap, const bool *has, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < gpuctl_snapshot_gpu_count(snap) && len < size; i++)
		if (has[i])
			len += (size_t)snprintf(buf + len, size - len, "%s%zu", len ? "," : "", i);
}

/* The lines, one per GPU that is not lost or per MIG device, in PCI bus order. */
struct gres_lines {
	struct gres_line *v; /* n entries */
	size_t n;
	bool *lost;      /* per GPU of the snapshot: lost, left out */
	bool *empty_mig; /* per GPU: in MIG mode without MIG devices, left out */
	bool finer;      /* some line's affinity is finer than its sockets */
};

static void gres_lines_free(struct gres_lines *l)
{
	for (size_t i = 0; l->v && i < l->n; i++)
		free(l->v[i].links);
	free(l->v);
	free(l->lost);
	free(l->empty_mig);
}

static void print_header(const struct gpuctl_snapshot *snap, const char *node,
                         const struct gres_lines *l, const struct cpu_topology *topo,
                         const char *gres)
{
	unsigned cps = topo->sockets ? topo->cores / topo->sockets : 0;
	char list[256];

	printf("# gres.conf lines for node %s (gpuctl slurm gres): GPUs in PCI bus order,\n"
	       "# a GPU in MIG mode as one line per MIG device. Type: as AutoDetect=nvml names "
	       "it.\n",
	       node);
	printf("# Links: NVLinks to the device of each line in turn (-1: itself; through "
	       "NVSwitches,\n"
	       "# the links each GPU has into the fabric).\n");
	printf("# Cores: Slurm's abstract core numbers, whole sockets (Slurm >= 24.11 refuses "
	       "part\n"
	       "# of a socket). The node's slurm.conf line:\n");
	printf("#   NodeName=%s CPUs=%u Sockets=%u CoresPerSocket=%u ThreadsPerCore=%u Gres=%s\n",
	       node, topo->cores * topo->threads_per_core, topo->sockets, cps,
	       topo->threads_per_core, gres);
	if (l->finer)
		printf("# The GPUs' own CPU affinity is finer than a socket (--format json:\n"
		       "# affinity_cores). Slurm schedules GPUs with CPUs by socket; for it to "
		       "see\n"
		       "# NUMA nodes, set SlurmdParameters=numa_node_as_socket (then Sockets= "
		       "counts\n"
		       "# NUMA nodes) and give Cores= as whole NUMA nodes.\n");
	gpu_list(snap, l->lost, list, sizeof(list));
	if (list[0])
		printf("# Left out, lost (NVML cannot reach it): GPU %s. The counts above\n"
		       "# lack it; a slurm.conf that counts it has the node set INVAL and\n"
		       "# drained until it is back.\n",
		       list);
	gpu_list(snap, l->empty_mig, list, sizeof(list));
	if (list[0])
		printf("# Left out, in MIG mode without MIG devices (CUDA cannot use it): GPU "
		       "%s.\n",
		       list);
}

static int print_text(const struct gpuctl_snapshot *snap, const char *node,
                      const struct gres_lines *l, const struct cpu_topology *topo, const char *gres)
{
	print_header(snap, node, l, topo, gres);
	printf("NodeName=%s AutoDetect=off\n", node);
	for (size_t i = 0; i < l->n; i++) {
		const struct gres_line *line = &l->v[i];

		printf("NodeName=%s Name=gpu Type=%s %s=", node, line->type,
		       line->mig < 0 ? "File" : "MultipleFiles");
		for (size_t k = 0; k < line->nfiles; k++)
			printf("%s%s", k ? "," : "", line->files[k]);
		if (line->cores[0])
			printf(" Cores=%s", line->cores);
		printf(" Links=");
		print_links(stdout, line, l->n);
		printf("\n");
	}
	return cli_finish_output(CLI_EXIT_OK);
}

/* The JSON object of one line. */
static json_t *line_json(const struct gpuctl_snapshot *snap, const struct gres_line *line, size_t n)
{
	const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, line->gpu);
	const char *uuid = line->mig < 0 ? gpuctl_gpu_str(g, GPUCTL_F_UUID)
	                                 : gpuctl_mig_uuid(gpuctl_gpu_mig(g, (size_t)line->mig));
	json_t *o = json_object(), *links = json_array(), *files = json_array();
	bool ok = o && links && files;

	for (size_t j = 0; j < n && ok; j++)
		ok = json_array_append_new(links, json_integer(line->links[j])) == 0;
	for (size_t k = 0; k < line->nfiles && ok; k++)
		ok = json_array_append_new(files, json_string(line->files[k])) == 0;
	ok = ok && json_put(o, "index", json_integer((json_int_t)line->gpu)) == 0 &&
	     json_put(o, "mig", line->mig < 0 ? json_null() : json_integer(line->mig)) == 0 &&
	     json_put(o, "uuid", json_string_or_null(uuid)) == 0 &&
	     json_put(o, "pci_bus_id",
	              json_string_or_null(gpuctl_gpu_str(g, GPUCTL_F_PCI_BUS_ID))) == 0 &&
	     json_put(o, "name", json_string_or_null(gpuctl_gpu_str(g, GPUCTL_F_NAME))) == 0 &&
	     json_put(o, "type", json_string(line->type)) == 0 &&
	     json_put(o, "file", line->mig < 0 ? json_string(line->files[0]) : json_null()) == 0 &&
	     json_put(o, "multiple_files", line->mig < 0 ? json_null() : json_incref(files)) == 0 &&
	     json_put(o, "cores", line->cores[0] ? json_string(line->cores) : json_null()) == 0 &&
	     json_put(o, "affinity_cores",
	              line->affinity[0] ? json_string(line->affinity) : json_null()) == 0 &&
	     json_put(o, "links", json_incref(links)) == 0;
	json_decref(links);
	json_decref(files);
	if (!ok) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* The indices of the GPUs with has[i] as a JSON array. */
static json_t *gpu_array(const struct gpuctl_snapshot *snap, const bool *has)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < gpuctl_snapshot_gpu_count(snap); i++)
		if (has[i] && json_array_append_new(a, json_integer((json_int_t)i)) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static int print_json_out(const struct gpuctl_snapshot *snap, const char *node,
                          const struct gres_lines *l, const struct cpu_topology *topo,
                          const char *gres)
{
	json_t *root = json_object(), *gpus = json_array(), *cpus = json_object();
	int r = 0;

	if (!root || !gpus || !cpus)
		r = -ENOMEM;
	for (size_t i = 0; i < l->n && r == 0; i++)
		if (json_array_append_new(gpus, line_json(snap, &l->v[i], l->n)) < 0)
			r = -ENOMEM;
	if (r == 0 &&
	    (json_put(cpus, "cpus",
	              json_integer((json_int_t)topo->cores * topo->threads_per_core)) < 0 ||
	     json_put(cpus, "sockets", json_integer(topo->sockets)) < 0 ||
	     json_put(cpus, "cores_per_socket",
	              json_integer(topo->sockets ? topo->cores / topo->sockets : 0)) < 0 ||
	     json_put(cpus, "threads_per_core", json_integer(topo->threads_per_core)) < 0 ||
	     json_put(root, "node", json_string(node)) < 0 ||
	     json_put(root, "gres", json_string(gres)) < 0 ||
	     json_put(root, "cpus", json_incref(cpus)) < 0 ||
	     json_put(root, "gpus", json_incref(gpus)) < 0 ||
	     json_put(root, "lost", gpu_array(snap, l->lost)) < 0 ||
	     json_put(root, "mig_without_devices", gpu_array(snap, l->empty_mig)) < 0))
		r = -ENOMEM;
	if (r == 0)
		r = json_print(root);
	json_decref(gpus);
	json_decref(cpus);
	json_decref(root);
	if (r < 0) {
		cli_error("slurm gres: cannot write the output: %s", strerror(-r));
		return CLI_EXIT_FAILURE;
	}
	return cli_finish_output(CLI_EXIT_OK);
}

/* "gpu:nvidia_a100-sxm4-80gb:8" or "gpu:nvidia_rtx_a6000:1,gpu:quadro_p1000:1": each type
 * once, in line order. */
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

/* Appends a line for (gpu, mig) to l (room for it was counted). */
static void add_line(struct gres_lines *l, size_t gpu, int mig)
{
	l->v[l->n++] = (struct gres_line){.gpu = gpu, .mig = mig};
}

/* The lines of the GPUs that are not lost into l, in PCI bus order, a GPU in MIG mode as its
 * MIG devices; a warning for each GPU left out. *lost is set when one was lost. 0 or the exit
 * status. */
static int gres_gpus(const struct gpuctl_snapshot *snap, struct gres_lines *l, bool *lost)
{
	size_t ngpu = gpuctl_snapshot_gpu_count(snap), nmig = 0, nkept = 0;
	_cleanup_free_ size_t *order = calloc(ngpu + 1, sizeof(*order));

	for (size_t i = 0; i < ngpu; i++)
		nmig += gpuctl_gpu_mig_count(gpuctl_snapshot_gpu(snap, i));
	l->v = calloc(ngpu + nmig + 1, sizeof(*l->v));
	l->lost = calloc(ngpu + 1, sizeof(*l->lost));
	l->empty_mig = calloc(ngpu + 1, sizeof(*l->empty_mig));
	if (!order || !l->v || !l->lost || !l->empty_mig) {
		cli_error("slurm gres: out of memory");
		return CLI_EXIT_FAILURE;
	}
	for (size_t i = 0; i < ngpu; i++) {
		if (!gpuctl_gpu_lost(gpuctl_snapshot_gpu(snap, i))) {
			order[nkept++] = i;
			continue;
		}
		cli_error(
		        "slurm gres: warning: GPU %zu is lost (NVML cannot reach it): its line is "
		        "left out, the other GPUs' lines are written (exit 1)",
		        i);
		l->lost[i] = *lost = true;
	}
	qsort_r(order, nkept, sizeof(*order), cmp_bus, (void *)snap);
	for (size_t k = 0; k < nkept; k++) {
		const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, order[k]);
		int64_t mode = 0;

		if (gpuctl_gpu_int(g, GPUCTL_F_MIG_MODE, &mode) < 0 || !mode) {
			add_line(l, order[k], -1);
			continue;
		}
		for (size_t m = 0; m < gpuctl_gpu_mig_count(g); m++)
			add_line(l, order[k], (int)m);
		if (gpuctl_gpu_mig_count(g) == 0) {
			cli_error(
			        "slurm gres: warning: GPU %zu is in MIG mode without MIG devices: "
			        "no line (create MIG devices, or disable MIG mode)",
			        order[k]);
			l->empty_mig[order[k]] = true;
		}
	}
	return 0;
}

/* A MIG line's MultipleFiles=: the parent's node, then its GPU and compute instances' access
 * capabilities (the device-node map, in the order gpuctl_devnodes_of gives, which is Slurm's).
 * 0, or the exit status after the refusal. */
static int mig_files(const struct gpuctl_devnodes *map, struct gres_line *line)
{
	const struct gpuctl_devnode *const *nodes = NULL;
	size_t n = 0;

	if (!map || gpuctl_devnodes_of(map, line->gpu, line->mig, &nodes, &n) < 0 || n != 3) {
		cli_error("slurm gres: GPU %zu MIG device %d: the driver's nvidia-caps mig-minors "
		          "gives no capability minors for it, so no device files",
		          line->gpu, line->mig);
		return CLI_EXIT_FAILURE;
	}
	for (size_t k = 0; k < n; k++)
		(void)snprintf(line->files[k], sizeof(line->files[k]), "%s", nodes[k]->path);
	line->nfiles = n;
	return 0;
}

/* Line i of l: Type=, File= or MultipleFiles=, Cores= and Links=. 0, or the exit status after
 * the refusal's line (no minor number, no capability minors, a name or profile Slurm cannot
 * carry, an affinity the topology does not list). */
static int gres_fill(const struct gpuctl_snapshot *snap, const struct gpuctl_devnodes *map,
                     struct gres_lines *l, size_t i, const struct cpu_topology *topo,
                     const char *dev_dir)
{
	struct gres_line *line = &l->v[i];
	const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, line->gpu);
	const char *name = gpuctl_gpu_str(g, GPUCTL_F_NAME), *profile = NULL;
	int64_t minor = -1;
	int r;

	if (gpuctl_gpu_int(g, GPUCTL_F_MINOR_NUMBER, &minor) < 0 || minor < 0) {
		cli_error("slurm gres: GPU %zu: NVML gives no minor number, so no device file",
		          line->gpu);
		return CLI_EXIT_FAILURE;
	}
	if (line->mig < 0) {
		r = gres_gpu_type(name, line->type, sizeof(line->type));
		(void)snprintf(line->files[0], sizeof(line->files[0]), "%s/nvidia%lld", dev_dir,
		               (long long)minor);
		line->nfiles = 1;
	} else {
		profile = gpuctl_mig_profile(gpuctl_gpu_mig(g, (size_t)line->mig));
		r = gres_mig_type(name, profile, line->type, sizeof(line->type));
		if (r == 0 && mig_files(map, line))
			return CLI_EXIT_FAILURE;
	}
	if (r < 0) {
		cli_error("slurm gres: GPU %zu: '%s%s%s' cannot be a Slurm type (%s)", line->gpu,
		          name ? name : "", profile ? " MIG " : "", profile ? profile : "",
		          r == -ENAMETOOLONG ? "too long"
		                             : "empty, or a ',', ':', '=', '#' or quote");
		return CLI_EXIT_FAILURE;
	}
	if (affinity_cores(g, line->gpu, topo, line) < 0)
		return CLI_EXIT_FAILURE;
	l->finer |= line->finer;
	line->links = calloc(l->n, sizeof(int));
	if (!line->links) {
		cli_error("slurm gres: out of memory");
		return CLI_EXIT_FAILURE;
	}
	for (size_t j = 0; j < l->n; j++) {
		struct gpuctl_link link = GPUCTL_LINK_INIT;

		if (j == i)
			line->links[j] = -1;
		else if (line->mig < 0 && l->v[j].mig < 0 &&
		         gpuctl_snapshot_link(snap, line->gpu, l->v[j].gpu, &link) == 0)
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

/* `slurm gres` for snap: the node's name and CPU topology, one line per GPU or MIG device,
 * printed; the exit status (1 when a GPU was lost, after the other GPUs' lines). */
static int gres_write(struct cli *cli, const struct slurm_args *a,
                      const struct gpuctl_snapshot *snap)
{
	_cleanup_(cpu_topology_free) struct cpu_topology topo = {0};
	_cleanup_(gres_lines_free) struct gres_lines l = {0};
	struct gpuctl_devnodes *map = NULL;
	char node[256], why[512] = "", gres[4096];
	bool lost = false, any_mig = false;
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
	for (size_t i = 0; i < l.n; i++)
		any_mig |= l.v[i].mig >= 0;
	if (status == 0 && any_mig && gpuctl_devnodes_read(cli->ctx, snap, a->dev_dir, &map) < 0) {
		cli_error("slurm gres: cannot read the MIG devices' device nodes: %s",
		          gpuctl_errmsg(cli->ctx));
		status = CLI_EXIT_FAILURE;
	}
	for (size_t i = 0; i < l.n && status == 0; i++)
		status = gres_fill(snap, map, &l, i, &topo, a->dev_dir);
	gpuctl_devnodes_free(map);
	if (status)
		return status;
	gres_string(l.v, l.n, gres, sizeof(gres));
	status = a->json ? print_json_out(snap, node, &l, &topo, gres)
	                 : print_text(snap, node, &l, &topo, gres);
	if (status == CLI_EXIT_OK && lost)
		status = CLI_EXIT_FAILURE;
	return status;
}

/* A snapshot with the topology and MIG devices, then gres_write; the exit status. */
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
	status = gres_write(cli, a, snap);
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
                   "Type (as Slurm's AutoDetect=nvml names it: NVML's name lower-cased, spaces\n"
                   "to '_'), File (/dev/nvidia<minor>), Cores (Slurm's abstract core numbers of\n"
                   "the GPU's CPU affinity, widened to whole sockets, which Slurm >= 24.11\n"
                   "requires) and Links (NVLinks to each device, in line order; through\n"
                   "NVSwitches every pair is connected). A GPU in MIG mode: one line per MIG\n"
                   "device, MultipleFiles= its parent's and its nvidia-caps device files, Type\n"
                   "from the profile. A comment gives the node's slurm.conf line with its Gres=.\n"
                   "A lost GPU is left out: the other GPUs' lines are written, a warning on\n"
                   "stderr names it, and the exit status is 1.\n",
        .exec = cmd_slurm_exec,
        .exits = CMD_EXITS_DRIVER | CMD_EXITS_HUNG,
};
