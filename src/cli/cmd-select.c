// SPDX-License-Identifier: MIT
/*
 * cmd-select.c: `gpuctl select`: which devices should this job get? Prints them as a device
 * string for CUDA, a shell, Docker, the NVIDIA container toolkit, CDI, Kubernetes or JSON.
 *
 * Decisions:
 * - The choice is the library's (gpuctl_select); the strings are the library's too
 *   (gpuctl_devstr_render), so `gpuctl run` and `gpuctl select` can never disagree on either.
 * - UUIDs by default; --ids index prints NVML indices, and the forms CUDA reads then carry
 *   CUDA_DEVICE_ORDER=PCI_BUS_ID (the library adds it), never a bare index.
 * - --explain writes to stderr, so `eval "$(gpuctl select --format env --explain)"` and
 *   `$(gpuctl select)` still get exactly the device string on stdout. It shows the chosen set
 *   and the runner-up with every score component, and names the first component (in the
 *   library's comparison order) that differs: the one that decided.
 * - -n 0 is valid and prints the empty set (CUDA_VISIBLE_DEVICES= hides every GPU).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filters.h"
#include "format.h"

enum {
	OPT_FORMAT = 0x100,
	OPT_IDS,
	OPT_EXPLAIN,
};

static const struct option select_options[] = {
        FILTER_LONG_OPTIONS,
        {"format", required_argument, NULL, OPT_FORMAT},
        {"ids", required_argument, NULL, OPT_IDS},
        {"explain", no_argument, NULL, OPT_EXPLAIN},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
};

/* "0 (GPU-7678cc1a), 1 (GPU-f4c6dae6)" for --explain. */
static void explain_set(const struct gpuctl_snapshot *snap, const struct gpuctl_devset *set,
                        FILE *f)
{
	size_t n = gpuctl_devset_count(set);
	if (n == 0) {
		fputs("(none)", f);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		size_t gpu;
		int mig;
		char label[48], uuid[32];
		if (gpuctl_devset_get(set, i, &gpu, &mig) < 0)
			continue;
		filters_device_label(snap, gpu, mig, label, sizeof(label));
		format_short_uuid(gpuctl_devset_uuid(set, snap, i), uuid, sizeof(uuid));
		fprintf(f, "%s%s (%s)", i ? ", " : "", label, uuid);
	}
}

static void explain_score(const struct gpuctl_select_score *s, FILE *f)
{
	fprintf(f,
	        "  ring bandwidth %.1f GB/s, total pairwise %.1f GB/s, NUMA nodes %u, sockets %u, "
	        "leftover %.3f, load %.3f\n",
	        s->ring_bandwidth, s->total_bandwidth, s->numa_nodes, s->sockets, s->leftover,
	        s->load);
}

/* Whether two doubles differ beyond the library's comparison tolerance (select.c: relative
 * 1e-6), so the component named is the one the library decided on. */
static bool differs(double a, double b)
{
	return fabs(a - b) > 1e-6 * fmax(fabs(a), fabs(b)) + 1e-12;
}

/* The first component, in the library's order, on which a and b differ. */
static void explain_decider(const struct gpuctl_select_score *a,
                            const struct gpuctl_select_score *b, FILE *f)
{
	if (differs(a->ring_bandwidth, b->ring_bandwidth))
		fprintf(f, "decided by: ring bandwidth (%.1f vs %.1f GB/s, higher is better)\n",
		        a->ring_bandwidth, b->ring_bandwidth);
	else if (differs(a->total_bandwidth, b->total_bandwidth))
		fprintf(f,
		        "decided by: total pairwise bandwidth (%.1f vs %.1f GB/s, higher is "
		        "better)\n",
		        a->total_bandwidth, b->total_bandwidth);
	else if (a->numa_nodes != b->numa_nodes)
		fprintf(f, "decided by: NUMA nodes spanned (%u vs %u, fewer is better)\n",
		        a->numa_nodes, b->numa_nodes);
	else if (a->sockets != b->sockets)
		fprintf(f, "decided by: CPU sockets spanned (%u vs %u, fewer is better)\n",
		        a->sockets, b->sockets);
	else if (differs(a->leftover, b->leftover))
		fprintf(f, "decided by: leftover (%.3f vs %.3f, higher is better)\n", a->leftover,
		        b->leftover);
	else if (differs(a->load, b->load))
		fprintf(f, "decided by: load (%.3f vs %.3f, lower is better)\n", a->load, b->load);
	else
		fputs("decided by: tie on every component; lowest index wins\n", f);
}

static void explain(const struct gpuctl_snapshot *snap, const struct gpuctl_selection *sel)
{
	struct gpuctl_select_score chosen, runner;
	const struct gpuctl_devset *ru = gpuctl_selection_runner_up(sel);
	FILE *f = stderr;

	fputs("chosen: ", f);
	explain_set(snap, gpuctl_selection_devices(sel), f);
	fputc('\n', f);
	bool have_chosen = gpuctl_selection_score(sel, false, &chosen) >= 0;
	if (have_chosen)
		explain_score(&chosen, f);
	if (!ru || gpuctl_selection_score(sel, true, &runner) < 0) {
		fputs("runner-up: none (no other set qualifies)\n", f);
		return;
	}
	fputs("runner-up: ", f);
	explain_set(snap, ru, f);
	fputc('\n', f);
	explain_score(&runner, f);
	if (have_chosen)
		explain_decider(&chosen, &runner, f);
}

static int cmd_select_exec(struct cli *cli, int argc, char **argv)
{
	struct select_args o = SELECT_ARGS_INIT;
	struct gpuctl_snapshot *snap = NULL;
	struct gpuctl_selection *sel = NULL;
	enum gpuctl_render form = GPUCTL_RENDER_CUDA;
	unsigned render_flags = 0;
	bool want_explain = false;
	char *text = NULL;
	int opt, status, r;

	while ((opt = getopt_long(argc, argv, "+:n:h", select_options, NULL)) != -1) {
		status = filters_option(&cmd_select_entry, &o, opt, optarg);
		if (status >= 0) {
			if (status)
				return status;
			continue;
		}
		switch (opt) {
		case OPT_FORMAT:
			r = gpuctl_render_lookup(optarg);
			if (r < 0)
				return cmd_usage_error(&cmd_select_entry,
				                       "--format: unknown format '%s' (cuda, env, "
				                       "docker, nvidia, cdi, k8s or json)",
				                       optarg);
			form = (enum gpuctl_render)r;
			break;
		case OPT_IDS:
			if (strcmp(optarg, "index") == 0)
				render_flags = GPUCTL_RENDER_INDICES;
			else if (strcmp(optarg, "uuid") == 0)
				render_flags = 0;
			else
				return cmd_usage_error(
				        &cmd_select_entry,
				        "--ids: unknown id form '%s' (uuid or index)", optarg);
			break;
		case OPT_EXPLAIN:
			want_explain = true;
			break;
		case 'h':
			cmd_usage(&cmd_select_entry, stdout);
			return CLI_EXIT_OK;
		default:
			return cmd_bad_option(&cmd_select_entry, opt, argv);
		}
	}
	if (optind < argc)
		return cmd_usage_error(&cmd_select_entry, "unexpected argument '%s'", argv[optind]);
	status = filters_check(&cmd_select_entry, &o);
	if (status)
		return status;

	status = filters_select(cli, &cmd_select_entry, &o, 0, &snap, &sel);
	if (status)
		goto out;
	r = gpuctl_devstr_render(cli->ctx, snap, gpuctl_selection_devices(sel), form, render_flags,
	                         &text);
	if (r < 0) {
		const char *msg = gpuctl_errmsg(cli->ctx);
		cli_error("select: cannot render the device string: %s",
		          msg && msg[0] ? msg : strerror(-r));
		status = CLI_EXIT_FAILURE;
		goto out;
	}
	fputs(text, stdout);
	if (want_explain) {
		/* The result first, then the reasons: flush so a terminal shows them in order. */
		fflush(stdout);
		explain(snap, sel);
	}
out:
	free(text);
	gpuctl_selection_free(sel);
	gpuctl_snapshot_free(snap);
	filters_done(&o);
	return status;
}

const struct cmd_entry cmd_select_entry = {
        .name = "select",
        .usage = "-n N [FILTERS] [--format FORMAT] [--ids uuid|index] [--explain]",
        .summary = "choose the best GPUs for a job and print them as a device string",
        .options = FILTER_OPTIONS_HELP
        "  --format FORMAT       cuda (default: CUDA_VISIBLE_DEVICES=...), env (export\n"
        "                        lines), docker (--gpus), nvidia (NVIDIA_VISIBLE_DEVICES=...),\n"
        "                        cdi (nvidia.com/gpu=... names), k8s (resources and env\n"
        "                        snippet) or json (docs/json.md)\n"
        "  --ids FORM            uuid (default) or index: NVML indices, with\n"
        "                        CUDA_DEVICE_ORDER=PCI_BUS_ID where CUDA reads them\n"
        "  --explain             on stderr: the chosen set and the runner-up with their scores\n"
        "                        (ring and total bandwidth, NUMA nodes, sockets, leftover,\n"
        "                        load) and the component that decided between them\n"
        "  -h, --help            print this help\n"
        "\n"
        "Unless --ignore-outer, the choice is made within the allocation gpuctl runs in\n"
        "(CUDA_VISIBLE_DEVICES with CUDA_DEVICE_ORDER, NVIDIA_VISIBLE_DEVICES, SLURM_STEP_GPUS,\n"
        "SLURM_JOB_GPUS); -v says which variable constrained it.\n",
        .exec = cmd_select_exec,
};
