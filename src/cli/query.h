/* SPDX-License-Identifier: MIT */
/*
 * query.h: pure parsers for `gpuctl list` arguments (the --query field list and the --format
 * option list) and `gpuctl watch`'s -s and -o. No I/O, no NVML: the fuzzer (fuzz/fuzz-query.c)
 * links exactly this file and the library's field table.
 */
#ifndef GPUCTL_CLI_QUERY_H
#define GPUCTL_CLI_QUERY_H

#include <stdbool.h>
#include <stddef.h>

#include "gpuctl/gpuctl.h"

/* More columns than any sane query; bounds memory for hostile input. */
#define QUERY_MAX_COLUMNS 256
/* Longest accepted field name (nvidia-smi's longest is about 60). */
#define QUERY_MAX_NAME 128

/* Columns that are not GPU fields (nvidia-smi --query-gpu has them): the driver's version,
 * the time of the query, "YYYY/MM/DD HH:MM:SS.mmm" in local time as nvidia-smi writes it, and
 * the number of GPUs of the machine. They take field values after the GPU fields'. */
#define QUERY_DRIVER_VERSION ((int)GPUCTL__F_COUNT)
#define QUERY_TIMESTAMP      ((int)GPUCTL__F_COUNT + 1)
#define QUERY_COUNT          ((int)GPUCTL__F_COUNT + 2)

struct query_column {
	enum gpuctl_field field; /* the field the name resolves to, or QUERY_DRIVER_VERSION,
	                          * QUERY_TIMESTAMP or QUERY_COUNT */
	char *name;              /* the name as the user typed it (trimmed), for the CSV header */
};

struct query {
	size_t n;                  /* number of columns, >= 1 */
	struct query_column *cols; /* n columns in the order given; duplicates are kept */
};

/* Parses "name,name,...": our keys, nvidia-smi --query-gpu names or their aliases,
 * case-insensitive, blanks around names ignored. Returns 0 and *ret_query on success;
 * -EINVAL for an empty or unknown name, with *ret_bad = that name (malloc'ed, "" for an empty
 * entry); -E2BIG for more than QUERY_MAX_COLUMNS names or a name longer than QUERY_MAX_NAME;
 * -ENOMEM. ret_bad may be NULL. */
int query_parse(const char *text, struct query **ret_query, char **ret_bad);
void query_free(struct query *q);

/* The gpuctl_snapshot_flags the columns need (the OR of their fields' snap_flag). */
unsigned query_snap_flags(const struct query *q);

/* Writes up to 4 known field names close to `name` ("memory.total, memory.used") into buf;
 * returns how many it found (0: buf is ""). */
size_t query_suggest(const char *name, char *buf, size_t size);

/* The columns of --query-compute-apps (nvidia-smi --help-query-compute-apps): one row per
 * compute process. */
enum app_field {
	APP_PID,          /* "pid" */
	APP_PROCESS_NAME, /* "process_name", also "name" */
	APP_USED_MEMORY,  /* "used_gpu_memory", also "used_memory": MiB */
	APP_GPU_UUID,     /* "gpu_uuid" */
	APP_GPU_BUS_ID,   /* "gpu_bus_id" */
	APP_GPU_NAME,     /* "gpu_name" */
	APP__COUNT,
};

struct app_query {
	size_t n;                               /* number of columns, >= 1 */
	enum app_field cols[QUERY_MAX_COLUMNS]; /* in the order given; duplicates kept */
};

/* Parses --query-compute-apps' "name,name,...", case-insensitive, blanks around names
 * ignored. 0 and *ret_query; -EINVAL for an empty or unknown name with *ret_bad = it
 * (malloc'ed, "" for an empty entry); -E2BIG for too many or too long names; -ENOMEM.
 * ret_bad may be NULL; nothing is written on failure but *ret_bad. */
int app_query_parse(const char *text, struct app_query **ret_query, char **ret_bad);
/* nvidia-smi's CSV header of a column, with its unit ("used_gpu_memory [MiB]"). */
const char *app_field_header(enum app_field f);

enum list_format {
	LIST_FORMAT_DEFAULT = 0, /* not given: table, or csv with --query */
	LIST_FORMAT_TABLE,
	LIST_FORMAT_CSV,
	LIST_FORMAT_JSON,
};

struct format_spec {
	enum list_format kind; /* LIST_FORMAT_DEFAULT when only modifiers were given */
	bool noheader;         /* "noheader": no header line */
	bool nounits;          /* "nounits": values without units */
};

/* Parses a --format value: "table", "csv", "json", and nvidia-smi's modifiers "noheader" and
 * "nounits", comma-separated ("csv,noheader,nounits"). Updates *spec (so modifiers from
 * --noheader/--nounits given earlier survive). Two different kinds, an empty or unknown word:
 * -EINVAL with *ret_bad = the word (malloc'ed); -ENOMEM. */
int format_parse(const char *text, struct format_spec *spec, char **ret_bad);

/* Parses a set of one-letter groups (`gpuctl watch -s puc`): each letter of text must be one
 * of letters (at most 32), at most once. Returns 0 and *ret_mask with bit k set for
 * letters[k]; -EINVAL for an empty text (*ret_bad = 0) or a letter not in letters (*ret_bad =
 * it); -EEXIST for a letter given twice (*ret_bad = it). Nothing is written on failure but
 * *ret_bad. */
int groups_parse(const char *text, const char *letters, unsigned *ret_mask, char *ret_bad);

/* Parses dmon's -o value: "D", "T", "DT" or "TD". 0 and *ret_date / *ret_time, or -EINVAL
 * (nothing written). */
int date_time_parse(const char *text, bool *ret_date, bool *ret_time);

#endif /* GPUCTL_CLI_QUERY_H */
