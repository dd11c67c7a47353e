/* SPDX-License-Identifier: MIT */
/*
 * selection.h: choosing devices for a job: the request, the selection and its score, and the size
 * parser every client shares.
 *
 * Part of libgpuctl's public API (include <gpuctl/gpuctl.h>, which includes every header; the
 * rules that hold for all of them are there). Compiles on its own, as C and as C++
 * (tests/unit/test-headers.c).
 */
#ifndef GPUCTL_SELECTION_H
#define GPUCTL_SELECTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "decls.h"
#include "context.h"
#include "snapshot.h"
#include "devices.h"

/* Exported: see gpuctl.h, "What these headers declare is libgpuctl's whole ABI". */
GPUCTL_BEGIN_DECLS

/* ---- Sizes ---- */

/* Parses a size as `gpuctl select --min-free-mem` and `--mem` read it: a decimal number
 * (integer or with a fraction, "1.5") and a binary unit: B, or K, M, G, T (either case) alone,
 * with "iB" (GiB) or with "B"/"b" (GB, read as GiB as docker and Slurm read it); no blanks; a
 * bare number only for 0; a fraction of a byte rounded up. "10Gib" and "10Gi" are refused.
 * Returns 0 and writes *ret_bytes, or -EINVAL (malformed, unknown unit, no unit, NULL text) or
 * -ERANGE (more than 2^64-1 bytes); then *why (when why is not NULL) says what is wrong, in
 * words to print after the input ("'10PB': unknown unit ..."; a static string). For bindings
 * (the Python package) that must accept exactly what the command line accepts. */
int gpuctl_size_parse(const char *text, uint64_t *ret_bytes, const char **why);

/* ---- Selection (src/lib/select/select.c; model: docs/selection.md) ---- */

/* What a job needs. Initialise with GPUCTL_SELECT_REQUEST_INIT; struct_size lets the struct
 * grow without breaking callers built against an older header. */
struct gpuctl_select_request {
	size_t struct_size;    /* sizeof(struct gpuctl_select_request) */
	unsigned count;        /* devices wanted; 0 is allowed (no GPU) */
	uint64_t min_free_mem; /* bytes free at least; 0: any */
	int max_util;          /* GPU utilisation at most, percent; -1: any */
	bool no_procs;         /* no compute process on the device */
	const char *only;      /* GPU ids (gpuctl_ids_resolve forms) to choose among; NULL: all */
	const char *exclude;   /* GPU ids never to choose; NULL: none */
	int numa_node;         /* only GPUs attached to this NUMA node; -1: any */
	const char
	        *mig_profile; /* choose MIG devices of this profile ("1g.10gb"); NULL: whole GPUs */
	const struct gpuctl_devset *within; /* the outer allocation; NULL: the whole machine */
	bool allow_unhealthy; /* keep GPUs with uncorrectable memory errors (lost GPUs and GPUs
	                       * without a UUID are never chosen) */
	/* Fields below were added after the first release; struct_size tells whether a caller
	 * knows them (a smaller struct_size reads them as NULL). */
	const struct gpuctl_devset *leased;  /* devices leased by others: never chosen ("leased") */
	const struct gpuctl_devset *foreign; /* devices running processes of no lease: never
	                                      * chosen ("in use without a lease") */
	const struct gpuctl_devset *pool;    /* the GPUs of the pool drawn from (docs/config.md):
	                                      * no other is chosen ("outside pool NAME"); a GPU
	                                      * in the set admits its MIG devices; NULL: any */
	const char *pool_name;               /* the pool's name, for messages */
	const struct gpuctl_devset *unhealthy; /* devices a health check found FAIL: never chosen
	                                        * unless allow_unhealthy ("unhealthy") */
	const struct gpuctl_devset *warned;    /* devices found WARN: chosen only when the
	                                        * request cannot be met without them */
	const char *within_name; /* where within came from, for messages (an environment
	                          * variable: "CUDA_VISIBLE_DEVICES"); NULL: "the allocation" */
	uint64_t share_mem;      /* a shared lease's declared bytes: devices with less free are
	                          * not chosen ("share_mem SIZE"); 0: not shared */
};
#define GPUCTL_SELECT_REQUEST_INIT                                                                 \
	{                                                                                          \
		.struct_size = sizeof(struct gpuctl_select_request), .max_util = -1,               \
		.numa_node = -1                                                                    \
	}

/* Never changes once made; keeps no pointer to its context or snapshot (its devices are that
 * snapshot's indices). */
struct gpuctl_selection;

/* Chooses devices for req. -ENOSPC when fewer than req->count devices pass the filters, with a
 * one-line message saying which filter removed which GPUs; -EINVAL for a bad request (unknown
 * id, malformed profile), message naming it. */
int gpuctl_select(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                  const struct gpuctl_select_request *req, struct gpuctl_selection **ret_sel);
void gpuctl_selection_free(struct gpuctl_selection *sel);
/* The chosen devices, best first (borrowed from sel). */
const struct gpuctl_devset *gpuctl_selection_devices(const struct gpuctl_selection *sel);
/* The runner-up set (the best set that differs), NULL when there is none. */
const struct gpuctl_devset *gpuctl_selection_runner_up(const struct gpuctl_selection *sel);

/* A set's score, compared field by field in this order (docs/selection.md). The caller allocates
 * it: initialise with GPUCTL_SELECT_SCORE_INIT (the library writes only the first struct_size
 * bytes, as for struct gpuctl_link, topology.h). */
/* Compared in the order of docs/selection.md: ring, NUMA nodes, sockets, leftover, whole NUMA
 * nodes taken, release, total, load (the field order is the ABI's, not the objective's). */
struct gpuctl_select_score {
	size_t struct_size;         /* sizeof(struct gpuctl_select_score) */
	double ring_bandwidth;      /* GB/s: bottleneck link of the best ring through the set */
	double total_bandwidth;     /* GB/s: sum over the set's pairs */
	unsigned numa_nodes;        /* NUMA nodes the set spans (fewer is better) */
	unsigned sockets;           /* CPU sockets the set spans (fewer is better) */
	double leftover;            /* quality of what the choice leaves free (higher is better) */
	double load;                /* utilisation and memory in use (lower is better) */
	double release;             /* release value: the best matching inside the set, how well it
	                             * serves 2-GPU jobs once freed (higher is better) */
	unsigned whole_nodes_taken; /* NUMA nodes all of whose GPUs were free that the set takes
	                             * a GPU from (fewer is better; 0 for MIG sets) */
};
#define GPUCTL_SELECT_SCORE_INIT                                                                   \
	{                                                                                          \
		.struct_size = sizeof(struct gpuctl_select_score)                                  \
	}
/* Score of the chosen set (runner_up false) or of the runner-up: the first
 * ret_score->struct_size bytes. -ENODATA if there is none, -EINVAL for a struct_size that does
 * not cover ring_bandwidth. */
int gpuctl_selection_score(const struct gpuctl_selection *sel, bool runner_up,
                           struct gpuctl_select_score *ret_score);

GPUCTL_END_DECLS

#endif /* GPUCTL_SELECTION_H */
