// SPDX-License-Identifier: MIT
/*
 * slurm.c: `gpuctl health --slurm`, for Slurm's HealthCheckProgram (slurm.conf): on a FAIL,
 * `scontrol update NodeName=<node> State=DRAIN Reason="gpuctl: ..."`; when healthy again,
 * `scontrol update NodeName=<node> State=RESUME`, only if the drain reason is gpuctl's.
 *
 * Decisions:
 * - The node's name is $SLURMD_NODENAME when set (slurmd sets it for the programs it runs in
 *   some contexts, and an admin can), else the short host name: Slurm's NodeName is the short
 *   host name unless slurm.conf maps it otherwise.
 * - The drain state and reason come from `scontrol show node NAME`: State= with DRAIN in it
 *   (IDLE+DRAIN, MIXED+DRAIN, DRAINING, DRAINED) is drained; Reason= runs to the end of its line,
 *   minus the " [user@time]" scontrol appends.
 * - A drain that is not ours (an admin's, another health checker's) is never resumed nor
 *   rewritten; a node already drained is not drained again (its reason is kept).
 * - scontrol runs with a deadline (SCONTROL_TIMEOUT_S), so a dead slurmctld cannot hang the
 *   health check; its arguments are passed as argv (no shell), so a reason needs no quoting.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "slurm.h"
#include "child.h"

#define SCONTROL_TIMEOUT_S 30

/* The value of key= on the line it is on, from text[0..len): the first occurrence at a word
 * start. Writes at most size-1 bytes. */
static bool find_value(const char *text, size_t len, const char *key, bool to_eol, char *buf,
                       size_t size)
{
	size_t klen = strlen(key);

	for (size_t i = 0; i + klen <= len; i++) {
		if ((i > 0 && text[i - 1] != ' ' && text[i - 1] != '\n' && text[i - 1] != '\t') ||
		    memcmp(text + i, key, klen) != 0)
			continue;
		size_t j = i + klen, n = 0;
		while (j < len && text[j] != '\n' && text[j] != '\0' &&
		       (to_eol || text[j] != ' ') && n + 1 < size)
			buf[n++] = text[j++];
		buf[n] = '\0';
		return true;
	}
	return false;
}

void slurm_parse_node(const char *text, size_t len, struct slurm_node *ret)
{
	char state[128] = "";
	char *at;

	*ret = (struct slurm_node){0};
	if (!text)
		return;
	ret->found = find_value(text, len, "NodeName=", false, state, sizeof(state));
	if (find_value(text, len, "State=", false, state, sizeof(state)))
		ret->drained = strstr(state, "DRAIN") != NULL;
	if (find_value(text, len, "Reason=", true, ret->reason, sizeof(ret->reason))) {
		/* scontrol appends " [user@2024-01-01T00:00:00]" */
		at = strrchr(ret->reason, '[');
		if (at && strchr(at, '@') && at[strlen(at) - 1] == ']') {
			*at = '\0';
			for (size_t n = strlen(ret->reason); n > 0 && ret->reason[n - 1] == ' ';
			     n--)
				ret->reason[n - 1] = '\0';
		}
		if (strcmp(ret->reason, "(null)") == 0 || strcmp(ret->reason, "None") == 0)
			ret->reason[0] = '\0';
	}
}

bool slurm_reason_is_ours(const char *reason)
{
	return strncmp(reason, SLURM_REASON_PREFIX, strlen(SLURM_REASON_PREFIX)) == 0;
}

enum slurm_action slurm_decide(const struct slurm_node *node, bool fail)
{
	if (fail)
		return node->drained ? SLURM_NONE : SLURM_DRAIN;
	return node->drained && slurm_reason_is_ours(node->reason) ? SLURM_RESUME : SLURM_NONE;
}

/* Runs scontrol with argv; 0 when it exited 0, else -EIO/-ETIME/-errno with err set. */
static int scontrol(char *const argv[], char *out, size_t size, char *err, size_t err_size)
{
	int st = spawn_capture(argv, out, size, SCONTROL_TIMEOUT_S);

	if (st == -ETIME) {
		(void)snprintf(err, err_size, "'scontrol %s' did not finish within %d s", argv[1],
		               SCONTROL_TIMEOUT_S);
		return st;
	}
	if (st < 0) {
		(void)snprintf(err, err_size, "cannot run scontrol: %s", strerror(-st));
		return st;
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		(void)snprintf(err, err_size, "'scontrol %s %s' failed (%s %d)", argv[1], argv[2],
		               WIFEXITED(st) ? "exit status" : "signal",
		               WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		return -EIO;
	}
	return 0;
}

int slurm_apply(const char *scontrol_path, const char *node, bool fail, const char *reason,
                enum slurm_action *ret_action, char *err, size_t err_size)
{
	char out[16384], name_arg[512], reason_arg[SLURM_REASON_MAX + 16];
	static char show[] = "show", nodekw[] = "node", update[] = "update";
	char sc[4096];
	static char drain[] = "State=DRAIN", resume[] = "State=RESUME";
	struct slurm_node info;
	enum slurm_action action;
	int r;

	(void)snprintf(sc, sizeof(sc), "%s", scontrol_path ? scontrol_path : "scontrol");
	(void)snprintf(name_arg, sizeof(name_arg), "%s", node);
	char *const show_argv[] = {sc, show, nodekw, name_arg, NULL};
	r = scontrol(show_argv, out, sizeof(out), err, err_size);
	if (r < 0)
		return r;
	slurm_parse_node(out, strlen(out), &info);
	if (!info.found) {
		(void)snprintf(err, err_size, "'scontrol show node %s' names no node", node);
		return -ENOENT;
	}
	action = slurm_decide(&info, fail);
	if (action != SLURM_NONE) {
		(void)snprintf(name_arg, sizeof(name_arg), "NodeName=%s", node);
		(void)snprintf(reason_arg, sizeof(reason_arg), "Reason=%s", reason);
		char *const drain_argv[] = {sc, update, name_arg, drain, reason_arg, NULL};
		char *const resume_argv[] = {sc, update, name_arg, resume, NULL};
		r = scontrol(action == SLURM_DRAIN ? drain_argv : resume_argv, out, sizeof(out),
		             err, err_size);
		if (r < 0)
			return r;
	}
	*ret_action = action;
	return 0;
}
