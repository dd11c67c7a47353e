/* SPDX-License-Identifier: MIT */
/*
 * format.h: how gpuctl shows one value: nvidia-smi's CSV spelling, JSON, and the short forms
 * of the at-a-glance table; plus a small aligned text table.
 */
#ifndef GPUCTL_CLI_FORMAT_H
#define GPUCTL_CLI_FORMAT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "gpuctl/gpuctl.h"

/* nvidia-smi's placeholder for a value the GPU does not give. */
#define FORMAT_NA "[N/A]"
/* Ours for any value of a GPU NVML reported lost (nvidia-smi prints "GPU is lost" too). */
#define FORMAT_LOST "[GPU is lost]"

/* Writes a field's value the way `nvidia-smi --query-gpu --format=csv` does ("81920 MiB",
 * "250.00 W", "35 %", "Enabled", "0x20B010DE", "[N/A]"); without the unit when !units.
 * Truncates to size (always NUL-terminated). */
void format_field_smi(const struct gpuctl_gpu *gpu, enum gpuctl_field f, bool units, char *buf,
                      size_t size);

/* A field's JSON value: integer in base units, true/false for Enabled/Yes fields, a string for
 * strings and the compute mode, null when unavailable. New reference, NULL on allocation
 * failure. */
json_t *format_field_json(const struct gpuctl_gpu *gpu, enum gpuctl_field f);

/* "Default", "Exclusive_Thread", "Prohibited", "Exclusive_Process", or NULL. */
const char *format_compute_mode(int64_t mode);

/* "GPU-1a2b3c4d" from a full UUID: the prefix and the first group of hex digits. */
void format_short_uuid(const char *uuid, char *buf, size_t size);

/* A time since start (seconds since the epoch) for people: "42s", "17m", "5h", "3d"; "-" for
 * 0 or a start in the future. */
void format_age(uint64_t start, char *buf, size_t size);
/* A number of seconds for people, as format_age: "42s", "17m", "5h", "3d". */
void format_duration(uint64_t seconds, char *buf, size_t size);
/* "16 GiB", "512 MiB", "1.5 GiB": a size for people (binary units, at most one decimal). */
void format_bytes(uint64_t bytes, char *buf, size_t size);
/* The same without the blank ("1.5GiB"), for a table cell that must not split on blanks. */
void format_bytes_compact(uint64_t bytes, char *buf, size_t size);
/* What a waiter asks for, in words: "4 GPUs, only 0,1, max-util 50%". */
void format_wait_request(const struct gpuctl_wait_entry *w, char *buf, size_t size);

/* text of any bytes (a command line, a workload's name) as a table cell shows it, never a
 * terminal control: control characters (C0, DEL, C1) as '?', bytes that are not UTF-8 as
 * U+FFFD, at most max_chars characters (max_chars >= 4; a longer text: its first max_chars - 3
 * and "..."). buf holds the whole of it with 4 * max_chars + 1 bytes; less cuts it at a
 * character. */
void format_cell_text(const char *text, size_t max_chars, char *buf, size_t size);

/* json_string(s) for text of any bytes: invalid UTF-8 becomes U+FFFD (docs/json.md "Text";
 * jansson refuses it). NULL when out of memory (or s is NULL). */
json_t *json_text(const char *s);
/* json_text(s), or json_null() when s is NULL. */
json_t *json_string_or_null(const char *s);
/* json_integer(v) when r >= 0, else json_null(). */
json_t *json_int_or_null(int r, int64_t v);

/* Sets key on obj to value, stealing the reference; returns -ENOMEM if value is NULL or the
 * set fails. */
int json_put(json_t *obj, const char *key, json_t *value);

/* Puts a process's host facts (docs/json.md): host_memory, cpu_percent, elapsed and cmdline
 * (hostproc_facts, hostproc_cmdline), each null when /proc does not show pid (another PID
 * namespace, gone). 0, or -ENOMEM. */
int json_put_host_facts(json_t *obj, uint32_t pid);

/* Prints root as indented JSON plus a newline to stdout. Returns 0 or -EIO. */
int json_print(json_t *root);
/* Prints o as one compact line of JSON (JSON Lines: watch, health --watch) and drops the
 * reference to it (o may be NULL: a build that failed). Returns 0 or -ENOMEM. */
int json_print_line(json_t *o);

/* An aligned text table: cells are copied; columns are separated by two spaces and padded
 * to the widest cell, the last column is not padded. */
struct text_table;
int text_table_new(size_t ncols, struct text_table **ret_table);
void text_table_free(struct text_table *t);
/* Adds a row of ncols cells (NULL cells print empty). */
int text_table_add(struct text_table *t, const char *const *cells);
/* Colours cell col of the last row added: sgr is an SGR parameter string (FORMAT_SGR_*, a
 * static string) or NULL. */
void text_table_color(struct text_table *t, size_t col, const char *sgr);
/* Prints the table; with color, each coloured cell's text (not its padding) between its SGR
 * sequence and the reset "\033[0m". */
void text_table_print(const struct text_table *t, FILE *f, bool color);

/* SGR parameters of the colours tables use (ECMA-48 8.3.117), after gpustat's palette. */
#define FORMAT_SGR_RED          "31"
#define FORMAT_SGR_BOLD_RED     "1;31"
#define FORMAT_SGR_GREEN        "32"
#define FORMAT_SGR_BOLD_GREEN   "1;32"
#define FORMAT_SGR_YELLOW       "33"
#define FORMAT_SGR_BOLD_YELLOW  "1;33"
#define FORMAT_SGR_BLUE         "34"
#define FORMAT_SGR_MAGENTA      "35"
#define FORMAT_SGR_BOLD_MAGENTA "1;35"
#define FORMAT_SGR_CYAN         "36"

/* The colour of a health verdict (GPUCTL_HEALTH_*): OK green, WARN yellow, FAIL bold red;
 * NULL for anything else. */
const char *format_verdict_sgr(int severity);
/* Prints text to f, coloured with sgr when color (and sgr), then blanks up to width. */
void format_print_colored(FILE *f, bool color, const char *sgr, const char *text, int width);

/* A health finding's message or action in the command line's words: the library names its
 * concepts ("a health watch", "the strict health mode"), the command line the options that
 * give them ("gpuctl health --watch", "--strict"). text itself when it names none of them (or
 * the result would not fit size), else buf. */
const char *format_health_words(const char *text, char *buf, size_t size);

#endif /* GPUCTL_CLI_FORMAT_H */
