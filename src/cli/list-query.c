// SPDX-License-Identifier: MIT
/*
 * list-query.c: the nvidia-smi side of `gpuctl list` (cmd-list.c): --query (--query-gpu) and
 * --query-compute-apps, their CSV rows, the table of queried fields, --help-query, and the
 * usage errors of both options.
 *
 * Decisions:
 * - --query is parsed before NVML is touched, so a typo is a usage error (exit 2) even on a
 *   machine without a driver; an unknown field suggests the nearest names (query_suggest).
 * - The CSV is one row per GPU, like nvidia-smi --query-gpu, so that every row has the
 *   header's column count; the header keeps its bracketed units even with nounits, and is
 *   printed once under --loop (the rows then read as one CSV).
 * - A lost GPU's unavailable values read "[GPU is lost]" (format_field_smi); its processes
 *   are not listed by --query-compute-apps.
 * - driver_version, timestamp and count are columns of the whole query, not GPU fields: count
 *   is every GPU of the machine, whatever -i chose, as nvidia-smi's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "list.h"

/* --help-query: what --query and --query-compute-apps accept, from the library's field table,
 * as nvidia-smi --help-query-gpu lists its fields. */
void list_print_help_query(FILE *f)
{
	fputs("Fields of --query (--query-gpu): the nvidia-smi name and unit, gpuctl's key in\n"
	      "parentheses; either is accepted, case-insensitive.\n\n",
	      f);
	for (unsigned id = 0; id < GPUCTL__F_COUNT; id++) {
		const struct gpuctl_field_info *fi = gpuctl_field_info((enum gpuctl_field)id);
		char name[160];

		if (!fi)
			continue;
		if (fi->smi_name)
			snprintf(name, sizeof(name), "%s%s (%s)", fi->smi_name, fi->csv_unit,
			         fi->key);
		else
			snprintf(name, sizeof(name), "%s%s", fi->key, fi->csv_unit);
		fprintf(f, "  %s\n      %s\n", name, fi->doc);
	}
	fputs("  driver_version\n      the NVIDIA driver's version\n"
	      "  timestamp\n      when the values were read, YYYY/MM/DD HH:MM:SS.mmm local time\n"
	      "  count\n      the number of GPUs of the machine\n"
	      "\nFields of --query-compute-apps, one row per compute process:\n\n",
	      f);
	for (unsigned id = 0; id < APP__COUNT; id++)
		fprintf(f, "  %s\n", app_field_header((enum app_field)id));
	fputs("\n(process_name is also name, used_gpu_memory also used_memory)\n", f);
}

/* ---- CSV (nvidia-smi --query-gpu) ---- */

/* One queried cell: a GPU field as nvidia-smi writes it, or a column of the whole query. */
void list_query_cell(const struct gpuctl_snapshot *snap, const struct gpuctl_gpu *gpu, int col,
                     bool units, const struct timespec *now, char *buf, size_t size)
{
	if (col == QUERY_DRIVER_VERSION) {
		const char *v = snap ? gpuctl_snapshot_driver_version(snap) : NULL;

		snprintf(buf, size, "%s", v ? v : "[N/A]");
	} else if (col == QUERY_TIMESTAMP) {
		struct tm tm;
		char day[32];

		localtime_r(&now->tv_sec, &tm);
		if (strftime(day, sizeof(day), "%Y/%m/%d %H:%M:%S", &tm) == 0)
			day[0] = '\0';
		snprintf(buf, size, "%s.%03d", day, (int)(now->tv_nsec / 1000000 % 1000));
	} else if (col == QUERY_COUNT) {
		/* every GPU of the machine, whatever -i chose, as nvidia-smi's count */
		if (snap)
			snprintf(buf, size, "%zu", gpuctl_snapshot_gpu_count(snap));
		else
			snprintf(buf, size, "[N/A]");
	} else {
		format_field_smi(gpu, (enum gpuctl_field)col, units, buf, size);
	}
}

static const char *query_unit(int col)
{
	const struct gpuctl_field_info *fi = gpuctl_field_info((enum gpuctl_field)col);

	return fi ? fi->csv_unit : "";
}

void list_print_csv(const struct list_args *a, const struct gpuctl_snapshot *snap)
{
	char buf[256];
	if (!a->fmt.noheader && !a->again) {
		for (size_t c = 0; c < a->query->n; c++)
			/* nvidia-smi keeps the bracketed unit in the header even with nounits. */
			printf("%s%s%s", c ? ", " : "", a->query->cols[c].name,
			       query_unit((int)a->query->cols[c].field));
		putchar('\n');
	}
	for (size_t i = 0; i < a->nsel; i++) {
		const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(snap, a->sel[i]);
		for (size_t c = 0; c < a->query->n; c++) {
			list_query_cell(snap, gpu, (int)a->query->cols[c].field, !a->fmt.nounits,
			                &a->now, buf, sizeof(buf));
			printf("%s%s", c ? ", " : "", buf);
		}
		putchar('\n');
	}
}

/* ---- CSV of the compute processes (nvidia-smi --query-compute-apps) ---- */

static void app_cell(const struct gpuctl_gpu *gpu, const struct gpuctl_proc *p, enum app_field f,
                     bool units, char *buf, size_t size)
{
	const char *s = NULL;
	int64_t mem;

	switch (f) {
	case APP_PID:
		snprintf(buf, size, "%" PRIu32, gpuctl_proc_pid(p));
		return;
	case APP_PROCESS_NAME:
		s = gpuctl_proc_command(p);
		break;
	case APP_USED_MEMORY:
		if (gpuctl_proc_used_memory(p, &mem) < 0)
			break;
		snprintf(buf, size, "%" PRId64 "%s", mem / (1024 * 1024), units ? " MiB" : "");
		return;
	case APP_GPU_UUID:
		s = gpuctl_gpu_str(gpu, GPUCTL_F_UUID);
		break;
	case APP_GPU_BUS_ID:
		s = gpuctl_gpu_str(gpu, GPUCTL_F_PCI_BUS_ID);
		break;
	case APP_GPU_NAME:
		s = gpuctl_gpu_str(gpu, GPUCTL_F_NAME);
		break;
	default:
		break;
	}
	snprintf(buf, size, "%s", s ? s : "[N/A]");
}

void list_print_apps_csv(const struct list_args *a, const struct gpuctl_snapshot *snap)
{
	char buf[4096];

	if (!a->fmt.noheader && !a->again) {
		for (size_t c = 0; c < a->apps->n; c++)
			printf("%s%s", c ? ", " : "", app_field_header(a->apps->cols[c]));
		putchar('\n');
	}
	for (size_t i = 0; i < a->nsel; i++) {
		const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(snap, a->sel[i]);
		for (size_t k = 0; !gpuctl_gpu_lost(gpu) && k < gpuctl_gpu_proc_count(gpu); k++) {
			for (size_t c = 0; c < a->apps->n; c++) {
				app_cell(gpu, gpuctl_gpu_proc(gpu, k), a->apps->cols[c],
				         !a->fmt.nounits, buf, sizeof(buf));
				printf("%s%s", c ? ", " : "", buf);
			}
			putchar('\n');
		}
	}
}

/* ---- table of queried fields ---- */

int list_print_query_table(const struct list_args *a, const struct gpuctl_snapshot *snap)
{
	struct text_table *t = NULL;
	const char **cells = calloc(a->query->n, sizeof(*cells));
	char **bufs = calloc(a->query->n, sizeof(*bufs));
	int r = -ENOMEM;
	if (!cells || !bufs || text_table_new(a->query->n, &t) < 0)
		goto out;
	for (size_t c = 0; c < a->query->n; c++) {
		bufs[c] = malloc(256);
		if (!bufs[c])
			goto out;
		cells[c] = a->query->cols[c].name;
	}
	if (!a->fmt.noheader && text_table_add(t, cells) < 0)
		goto out;
	for (size_t i = 0; i < a->nsel; i++) {
		const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(snap, a->sel[i]);
		for (size_t c = 0; c < a->query->n; c++) {
			list_query_cell(snap, gpu, (int)a->query->cols[c].field, !a->fmt.nounits,
			                &a->now, bufs[c], 256);
			cells[c] = bufs[c];
		}
		if (text_table_add(t, cells) < 0)
			goto out;
	}
	text_table_print(t, stdout, false);
	r = 0;
out:
	for (size_t c = 0; bufs && c < a->query->n; c++)
		free(bufs[c]);
	free(bufs);
	free(cells);
	text_table_free(t);
	return r;
}

/* ---- the options' usage errors ---- */

int list_parse_query(const char *text, struct query **ret)
{
	char *bad = NULL;
	int status = 0, r = query_parse(text, ret, &bad);

	/* usage errors name the command and point at its help, as every other option's do */
	if (r == -EINVAL && bad && !bad[0]) {
		status =
		        cmd_usage_error(&cmd_list_entry, "--query: empty field name in '%s'", text);
	} else if (r == -EINVAL) {
		char near[256];
		if (bad && query_suggest(bad, near, sizeof(near)) > 0)
			status = cmd_usage_error(&cmd_list_entry,
			                         "--query: unknown field '%s' (did you mean: %s?)",
			                         bad, near);
		else
			status = cmd_usage_error(&cmd_list_entry, "--query: unknown field '%s'",
			                         bad ? bad : text);
	} else if (r == -E2BIG) {
		status = cmd_usage_error(&cmd_list_entry,
		                         "--query: too many or too long field names in '%.64s'",
		                         text);
	} else if (r < 0) {
		cli_error("list: --query: %s", strerror(-r));
		status = CLI_EXIT_FAILURE;
	}
	free(bad);
	return status;
}

int list_parse_apps(struct list_args *a, enum list_format kind)
{
	char *bad = NULL;
	int status = 0, r;

	if (a->query_text || a->wide || kind != LIST_FORMAT_CSV)
		return cmd_usage_error(
		        &cmd_list_entry,
		        "--query-compute-apps: CSV only, without --query and --wide");
	r = app_query_parse(a->apps_text, &a->apps, &bad);
	if (r == -EINVAL)
		status = cmd_usage_error(
		        &cmd_list_entry,
		        "--query-compute-apps: unknown field '%s' (pid, "
		        "process_name, used_memory, gpu_uuid, gpu_bus_id, gpu_name)",
		        bad ? bad : a->apps_text);
	else if (r == -E2BIG)
		status =
		        cmd_usage_error(&cmd_list_entry,
		                        "--query-compute-apps: too many or too long field names in "
		                        "'%.64s'",
		                        a->apps_text);
	else if (r < 0) {
		cli_error("list: --query-compute-apps: %s", strerror(-r));
		status = CLI_EXIT_FAILURE;
	}
	free(bad);
	return status;
}
