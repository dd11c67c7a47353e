/* SPDX-License-Identifier: MIT */
/*
 * slurm.h: `gpuctl health --slurm`: drain this node when a GPU FAILs, resume it when healthy
 * again if (and only if) gpuctl drained it. Parsing is pure (slurm_parse_node, fuzzed by
 * fuzz/fuzz-slurm.c); running scontrol is slurm_apply's.
 */
#ifndef GPUCTL_CLI_SLURM_H
#define GPUCTL_CLI_SLURM_H

#include <stdbool.h>
#include <stddef.h>

#define SLURM_REASON_PREFIX "gpuctl:"
#define SLURM_REASON_MAX    256

/* What `scontrol show node NAME` says about draining. */
struct slurm_node {
	bool found;                    /* a NodeName= record was there */
	bool drained;                  /* State= has DRAIN (DRAIN, DRAINING, DRAINED, IDLE+DRAIN) */
	char reason[SLURM_REASON_MAX]; /* Reason=, without the " [user@time]" suffix; "" if none */
};

/* Parses scontrol's output (len bytes, need not be NUL-terminated). Never fails: what is not
 * there stays false/empty. */
void slurm_parse_node(const char *text, size_t len, struct slurm_node *ret);

/* True when reason was written by gpuctl ("gpuctl:" prefix). */
bool slurm_reason_is_ours(const char *reason);

enum slurm_action {
	SLURM_NONE,   /* nothing to do */
	SLURM_DRAIN,  /* drain with our reason */
	SLURM_RESUME, /* resume: our drain, and healthy now */
};
/* The decision: fail = some GPU FAILs. Drain a node not drained yet; never touch a drain that
 * is not ours; resume ours when no GPU FAILs. */
enum slurm_action slurm_decide(const struct slurm_node *node, bool fail);

/* This node's Slurm name: gres_node_name (src/lib/devices/gres.h). */

/* Runs scontrol (scontrol_path, NULL: "scontrol" from $PATH): show node, then update as decided.
 * reason: ours ("gpuctl: ..."), for a drain. On success *ret_action says what was done. -errno /
 * -ETIME / -EIO (scontrol failed: message in err). */
int slurm_apply(const char *scontrol_path, const char *node, bool fail, const char *reason,
                enum slurm_action *ret_action, char *err, size_t err_size);

#endif
