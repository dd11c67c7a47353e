// SPDX-License-Identifier: MIT
/*
 * cmd-info.c: `gpuctl info`: driver, NVML and CUDA versions, where the libraries were found,
 * and each GPU's persistence and MIG modes.
 *
 * Decisions:
 * - Minimum versions are those of the features gpuctl relies on: driver 450.80.02 and CUDA 11.0
 *   (the first release line with MIG and the NVML calls we use). Older ones produce warnings,
 *   not errors: info exists to tell the user what is wrong.
 * - Versions are compared component by component as numbers ("450.80.02" < "450.102.04"),
 *   never as strings.
 * - libcuda.so.1 is located with gpuctl_library_locate, which only asks the dynamic linker;
 *   gpuctl info never initialises CUDA.
 * - Pools (docs/config.md): the configuration read, each GPU's pool, and each pool with who may
 *   draw from it and whether the caller may. A configuration that does not parse or does not
 *   match the machine is the usual one-line error (exit 2), as for select and run.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "format.h"

#define MIN_DRIVER_VERSION "450.80.02"
#define MIN_CUDA_VERSION   11000 /* NVML's encoding of 11.0 */

enum info_format {
	INFO_TEXT,
	INFO_JSON,
};

static const struct option info_options[] = {
        CMD_OPTION_FORMAT,
        CMD_OPTION_HELP,
        {NULL, 0, NULL, 0},
};

/* Compares dotted version strings numerically. Returns -1, 0 or 1 in *ret_cmp, or -EINVAL
 * when either has a component that is not a number. Missing components count as 0. */
static int version_compare(const char *a, const char *b, int *ret_cmp)
{
	for (;;) {
		long va = 0, vb = 0;
		char *end;
		if (*a) {
			errno = 0;
			va = strtol(a, &end, 10);
			if (end == a || errno || va < 0 || (*end && *end != '.'))
				return -EINVAL;
			a = *end ? end + 1 : end;
		}
		if (*b) {
			errno = 0;
			vb = strtol(b, &end, 10);
			if (end == b || errno || vb < 0 || (*end && *end != '.'))
				return -EINVAL;
			b = *end ? end + 1 : end;
		}
		if (va != vb) {
			*ret_cmp = va < vb ? -1 : 1;
			return 0;
		}
		if (!*a && !*b) {
			*ret_cmp = 0;
			return 0;
		}
	}
}

struct info {
	const char *driver;    /* driver version, NULL if unknown */
	const char *nvml;      /* NVML version, NULL if unknown */
	char cuda[32];         /* "12.4", "" if unknown */
	const char *nvml_lib;  /* path NVML was loaded from, NULL if unknown */
	char *cuda_lib;        /* path of libcuda.so.1, NULL if not found (owned) */
	char warnings[2][160]; /* warning lines, "" if none */
};

static void gather(struct info *in, struct cli *cli, const struct gpuctl_snapshot *snap)
{
	int cmp, v;
	in->driver = gpuctl_snapshot_driver_version(snap);
	in->nvml = gpuctl_snapshot_nvml_version(snap);
	in->nvml_lib = gpuctl_nvml_library_path(cli->ctx);
	if (gpuctl_snapshot_cuda_version(snap, &v) >= 0 && v > 0) {
		snprintf(in->cuda, sizeof(in->cuda), "%d.%d", v / 1000, (v % 1000) / 10);
		if (v < MIN_CUDA_VERSION)
			snprintf(in->warnings[1], sizeof(in->warnings[1]),
			         "CUDA driver version %s is older than 11.0, the oldest gpuctl "
			         "supports",
			         in->cuda);
	}
	if (in->driver && version_compare(in->driver, MIN_DRIVER_VERSION, &cmp) >= 0 && cmp < 0)
		snprintf(in->warnings[0], sizeof(in->warnings[0]),
		         "driver version %s is older than " MIN_DRIVER_VERSION
		         ", the oldest gpuctl supports",
		         in->driver);
	if (gpuctl_library_locate("libcuda.so.1", &in->cuda_lib) < 0)
		in->cuda_lib = NULL;
}

/* Each GPU's pool index (-1: default) when the configuration has pools, else NULL. */
struct pools {
	int *map;
};

static const char *pool_of(const struct cli *cli, const struct pools *p, size_t gpu)
{
	const char *name = "default";
	if (p->map && p->map[gpu] >= 0)
		(void)gpuctl_config_pool_get(gpuctl_site_config(cli->site), (size_t)p->map[gpu],
		                             &name, NULL, NULL, NULL, NULL);
	return name;
}

/* "a, b" from a NULL-terminated list, "-" when empty. */
static void list_text(const char *const *v, char *buf, size_t size)
{
	size_t n = 0;
	buf[0] = '\0';
	for (size_t i = 0; v && v[i] && n < size; i++) {
		int k = snprintf(buf + n, size - n, "%s%s", i ? ", " : "", v[i]);
		if (k < 0)
			break;
		n += (size_t)k;
	}
	if (!buf[0])
		snprintf(buf, size, "-");
}

static int print_pools_text(const struct cli *cli, const struct pools *p,
                            const struct gpuctl_snapshot *snap)
{
	size_t np = gpuctl_config_pool_count(gpuctl_site_config(cli->site));
	const char *path = gpuctl_config_path(gpuctl_site_config(cli->site));
	const char *named = cli->config_path ? cli->config_path : getenv("GPUCTL_CONFIG");
	if (path)
		printf("\nConfiguration:        %s\n", path);
	else if (named && named[0]) /* the null device (docs/config.md) */
		printf("\nConfiguration:        none (%s)\n", named);
	else
		printf("\nConfiguration:        none (" GPUCTL_CONFIG_DEFAULT_PATH " not found)\n");
	if (np == 0) {
		printf("Pools:                none (every GPU is in the default pool)\n");
		return 0;
	}
	struct text_table *t = NULL;
	static const char *const header[6] = {"POOL",   "GPUS", "USERS",
	                                      "GROUPS", "YOU",  "DESCRIPTION"};
	int r = text_table_new(6, &t);
	if (r >= 0)
		r = text_table_add(t, header);
	for (size_t i = 0; r >= 0 && i <= np; i++) {
		const char *name = "default", *desc = "the GPUs no pool lists";
		const char *const *users = NULL, *const *groups = NULL;
		char gpus[256] = "", ut[256], gt[256];
		size_t n = 0;
		int allowed = 1;
		if (i < np) {
			(void)gpuctl_config_pool_get(gpuctl_site_config(cli->site), i, &name, &desc,
			                             NULL, &users, &groups);
			allowed = gpuctl_config_pool_allows(cli->ctx, gpuctl_site_config(cli->site),
			                                    i, (uint32_t)geteuid());
		}
		for (size_t g = 0; g < gpuctl_snapshot_gpu_count(snap) && n < sizeof(gpus); g++)
			if (p->map[g] == (i < np ? (int)i : -1)) {
				int k = snprintf(gpus + n, sizeof(gpus) - n, "%s%zu", n ? "," : "",
				                 g);
				if (k > 0)
					n += (size_t)k;
			}
		list_text(users, ut, sizeof(ut));
		list_text(groups, gt, sizeof(gt));
		if (i == np) {
			snprintf(ut, sizeof(ut), "*");
			snprintf(gt, sizeof(gt), "-");
		} else if (!users[0] && !groups[0]) {
			snprintf(ut, sizeof(ut), "*");
		}
		const char *cells[6] = {name, gpus[0] ? gpus : "-",       ut,
		                        gt,   allowed > 0 ? "yes" : "no", desc ? desc : "-"};
		r = text_table_add(t, cells);
	}
	if (r >= 0)
		text_table_print(t, stdout, false);
	text_table_free(t);
	return r;
}

static json_t *strings_json(const char *const *v)
{
	json_t *a = json_array();
	for (size_t i = 0; a && v && v[i]; i++)
		if (json_array_append_new(a, json_text(v[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static json_t *pools_json(const struct cli *cli, const struct pools *p,
                          const struct gpuctl_snapshot *snap)
{
	size_t np = gpuctl_config_pool_count(gpuctl_site_config(cli->site));
	json_t *arr = json_array();
	for (size_t i = 0; arr && i < np; i++) {
		const char *name = NULL, *desc = NULL;
		const char *const *users = NULL, *const *groups = NULL;
		bool restricted = false;
		json_t *o = json_object(), *gpus = json_array();
		(void)gpuctl_config_pool_get(gpuctl_site_config(cli->site), i, &name, &desc,
		                             &restricted, &users, &groups);
		for (size_t g = 0; gpus && g < gpuctl_snapshot_gpu_count(snap); g++)
			if (p->map[g] == (int)i &&
			    json_array_append_new(gpus, json_integer((json_int_t)g)) < 0) {
				json_decref(gpus);
				gpus = NULL;
			}
		int allowed = gpuctl_config_pool_allows(cli->ctx, gpuctl_site_config(cli->site), i,
		                                        (uint32_t)geteuid());
		if (!o || json_array_append_new(arr, o) < 0 ||
		    json_put(o, "name", json_text(name)) < 0 ||
		    json_put(o, "description", json_string_or_null(desc)) < 0 ||
		    json_put(o, "gpus", gpus) < 0 ||
		    json_put(o, "users", strings_json(users)) < 0 ||
		    json_put(o, "groups", strings_json(groups)) < 0 ||
		    json_put(o, "restricted", json_boolean(restricted)) < 0 ||
		    json_put(o, "allowed", json_boolean(allowed > 0)) < 0) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

static const char *mode_text(const struct gpuctl_gpu *gpu, enum gpuctl_field f)
{
	int64_t v;
	if (gpuctl_gpu_int(gpu, f, &v) < 0)
		return "N/A";
	return v ? "Enabled" : "Disabled";
}

static int print_text(const struct cli *cli, const struct info *in, const struct pools *p,
                      const struct gpuctl_snapshot *snap)
{
	printf("Driver version:       %s\n", in->driver ? in->driver : "N/A");
	printf("NVML version:         %s\n", in->nvml ? in->nvml : "N/A");
	printf("CUDA driver version:  %s\n", in->cuda[0] ? in->cuda : "N/A");
	printf("NVML library:         %s\n", in->nvml_lib ? in->nvml_lib : "N/A");
	printf("CUDA library:         %s\n", in->cuda_lib ? in->cuda_lib : "not found");
	if (gpuctl_cuda_mig_limit(snap) == 1)
		printf("MIG devices per CUDA process: 1 (driver before R570)\n");
	else
		printf("MIG devices per CUDA process: one per GPU instance, %u at most (R570 and "
		       "later)\n",
		       gpuctl_cuda_mig_limit(snap));
	for (size_t i = 0; i < 2; i++)
		if (in->warnings[i][0])
			printf("Warning: %s\n", in->warnings[i]);
	putchar('\n');

	struct text_table *t = NULL;
	int r = text_table_new(8, &t);
	if (r < 0)
		return r;
	static const char *const header[8] = {"GPU",  "UUID",        "PCI BUS ID", "NAME",
	                                      "POOL", "PERSISTENCE", "MIG",        "MIG PENDING"};
	r = text_table_add(t, header);
	for (size_t i = 0; r >= 0 && i < gpuctl_snapshot_gpu_count(snap); i++) {
		const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(snap, i);
		char idx[32];
		const char *uuid = gpuctl_gpu_str(gpu, GPUCTL_F_UUID);
		const char *bus = gpuctl_gpu_str(gpu, GPUCTL_F_PCI_BUS_ID);
		const char *name = gpuctl_gpu_str(gpu, GPUCTL_F_NAME);
		snprintf(idx, sizeof(idx), "%zu", gpuctl_gpu_index(gpu));
		const char *cells[8] = {
		        idx,
		        uuid ? uuid : "N/A",
		        bus ? bus : "N/A",
		        name ? name : "N/A",
		        pool_of(cli, p, i),
		        gpuctl_gpu_lost(gpu) ? "lost" : mode_text(gpu, GPUCTL_F_PERSISTENCE_MODE),
		        gpuctl_gpu_lost(gpu) ? "lost" : mode_text(gpu, GPUCTL_F_MIG_MODE),
		        gpuctl_gpu_lost(gpu) ? "lost" : mode_text(gpu, GPUCTL_F_MIG_MODE_PENDING),
		};
		r = text_table_add(t, cells);
	}
	if (r >= 0)
		text_table_print(t, stdout, false);
	text_table_free(t);
	if (r >= 0)
		r = print_pools_text(cli, p, snap);
	return r;
}

static int print_json(const struct cli *cli, const struct info *in, const struct pools *p,
                      const struct gpuctl_snapshot *snap)
{
	json_t *root = json_object(), *warnings = json_array(), *gpus = json_array();
	int r = root && warnings && gpus ? 0 : -ENOMEM;
	for (size_t i = 0; r >= 0 && i < 2; i++)
		if (in->warnings[i][0] &&
		    json_array_append_new(warnings, json_text(in->warnings[i])) < 0)
			r = -ENOMEM;
	static const enum gpuctl_field fields[] = {
	        GPUCTL_F_INDEX,
	        GPUCTL_F_UUID,
	        GPUCTL_F_PCI_BUS_ID,
	        GPUCTL_F_NAME,
	        GPUCTL_F_PERSISTENCE_MODE,
	        GPUCTL_F_MIG_MODE,
	        GPUCTL_F_MIG_MODE_PENDING,
	};
	for (size_t i = 0; r >= 0 && i < gpuctl_snapshot_gpu_count(snap); i++) {
		const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(snap, i);
		json_t *o = json_object();
		if (!o || json_array_append_new(gpus, o) < 0) {
			r = -ENOMEM;
			break;
		}
		for (size_t f = 0; r >= 0 && f < sizeof(fields) / sizeof(fields[0]); f++)
			r = json_put(o, gpuctl_field_info(fields[f])->key,
			             format_field_json(gpu, fields[f]));
		if (r >= 0)
			r = json_put(o, "lost", json_boolean(gpuctl_gpu_lost(gpu)));
		if (r >= 0)
			r = json_put(o, "pool", json_text(pool_of(cli, p, i)));
	}
	if (r >= 0)
		r = json_put(
		        root, "config",
		        json_string_or_null(gpuctl_config_path(gpuctl_site_config(cli->site))));
	if (r >= 0)
		r = json_put(root, "pools", p->map ? pools_json(cli, p, snap) : json_array());
	if (r >= 0)
		r = json_put(root, "driver_version", json_string_or_null(in->driver));
	if (r >= 0)
		r = json_put(root, "nvml_version", json_string_or_null(in->nvml));
	if (r >= 0)
		r = json_put(root, "cuda_driver_version",
		             json_string_or_null(in->cuda[0] ? in->cuda : NULL));
	if (r >= 0)
		r = json_put(root, "nvml_library", json_string_or_null(in->nvml_lib));
	if (r >= 0)
		r = json_put(root, "cuda_library", json_string_or_null(in->cuda_lib));
	if (r >= 0)
		r = json_put(root, "cuda_mig_devices_per_process",
		             json_integer((json_int_t)gpuctl_cuda_mig_limit(snap)));
	if (r >= 0) {
		r = json_put(root, "warnings", warnings);
		warnings = NULL;
	}
	if (r >= 0) {
		r = json_put(root, "gpus", gpus);
		gpus = NULL;
	}
	if (r >= 0)
		r = json_print(root);
	json_decref(warnings);
	json_decref(gpus);
	json_decref(root);
	return r;
}

/* ---- the command ---- */

/* What the command line asks for. */
struct info_args {
	enum info_format format; /* --format */
};

/* The options into a: CMD_GO_ON, or the exit status to return now (--help, a usage error). */
static int parse_options(struct info_args *a, int argc, char **argv)
{
	int opt;

	while ((opt = cmd_getopt(&cmd_info_entry, argc, argv)) != -1) {
		switch (opt) {
		case CMD_OPT_FORMAT: {
			int i, st = cmd_parse_format(&cmd_info_entry, optarg, &i);

			if (st)
				return st;
			a->format = (enum info_format)i;
			break;
		}
		case 'h':
			cmd_usage(&cmd_info_entry, stdout);
			return CLI_EXIT_OK;
		default:
			return cmd_bad_option(&cmd_info_entry, opt, argv);
		}
	}
	if (optind < argc)
		return cmd_usage_error(&cmd_info_entry, "unexpected argument '%s'", argv[optind]);
	return CMD_GO_ON;
}

/* Each GPU's pool (p->map) when the configuration has pools; 0 or the exit status. */
static int read_pools(struct cli *cli, const struct gpuctl_snapshot *snap, struct pools *p)
{
	int status = cli_site(cli, &cmd_info_entry, NULL, GPUCTL_SITE_NO_LEASES);

	if (status || gpuctl_config_pool_count(gpuctl_site_config(cli->site)) == 0)
		return status;
	int r = gpuctl_config_pool_map(cli->ctx, gpuctl_site_config(cli->site), snap, &p->map);
	if (r < 0) {
		cli_error("info: %s", gpuctl_errmsg(cli->ctx));
		return r == -EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAILURE;
	}
	return 0;
}

/* The versions, libraries, GPUs and pools, as text or JSON; the exit status. */
static int show_info(struct cli *cli, const struct info_args *a)
{
	static const enum gpuctl_field fields[] = {GPUCTL_F_PERSISTENCE_MODE, GPUCTL_F_MIG_MODE,
	                                           GPUCTL_F_MIG_MODE_PENDING};
	struct gpuctl_snapshot *snap = NULL;
	struct info in = {0};
	struct pools p = {0};
	int status, r;

	status = cli_snapshot_fields(cli, GPUCTL_SNAP_BASIC, fields,
	                             sizeof(fields) / sizeof(fields[0]), &snap);
	if (status)
		return status;
	gather(&in, cli, snap);
	status = read_pools(cli, snap, &p);
	if (!status) {
		r = a->format == INFO_JSON ? print_json(cli, &in, &p, snap)
		                           : print_text(cli, &in, &p, snap);
		if (r < 0) {
			cli_error("info: cannot write the output: %s", strerror(-r));
			status = CLI_EXIT_FAILURE;
		}
	}
	free(p.map);
	free(in.cuda_lib);
	gpuctl_snapshot_free(snap);
	return status;
}

static int cmd_info_exec(struct cli *cli, int argc, char **argv)
{
	struct info_args a = {.format = INFO_TEXT};
	int status;

	status = parse_options(&a, argc, argv);
	if (status != CMD_GO_ON)
		return status;
	return show_info(cli, &a);
}

const struct cmd_entry cmd_info_entry = {
        .name = "info",
        .long_options = info_options,
        .formats = (const char *const[]){"text", "json", NULL},
        .short_options = "+:h",
        .usage = "[--format text|json]",
        .summary = "show driver, NVML and CUDA versions, libraries and GPU modes",
        .options = "  --format FORMAT  text (default) or json\n"
                   "  -h, --help       print this help\n",
        .exec = cmd_info_exec,
        .exits = CMD_EXITS_DRIVER | CMD_EXITS_HUNG,
};
