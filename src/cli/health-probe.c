// SPDX-License-Identifier: MIT
/*
 * health-probe.c: `gpuctl health --probe`: one child process per GPU, in parallel, that sees
 * only that GPU and tries CUDA on it, under a timeout (docs/health.md).
 *
 * Decisions:
 * - The child is this binary again (/proc/self/exe health --probe-child) with
 *   CUDA_VISIBLE_DEVICES set to the GPU's UUID, started by child.c (posix_spawn, its own
 *   process group, a deadline). A fresh process (not a fork of this one, which holds NVML)
 *   cannot inherit a broken CUDA or NVML state, and one killed at the deadline takes everything
 *   it started with it: gpuctl never hangs.
 * - A GPU in MIG mode is probed once per MIG device, with its MIG- UUID, since CUDA cannot use
 *   such a GPU whole (MIG user guide, "CUDA device enumeration"); it passes when every MIG
 *   device does, and fails with the first failing device named, in device order, so the
 *   failure reported is the same whichever child ended first.
 * - The child prints "ok" or the failure, one line; its exit status and that line make the
 *   outcome; the library's checks (gpuctl_health_check) turn outcomes into findings.
 * - What passed is said from the probe's steps (probe_steps, in gpuctl_cuda_probe_here's
 *   order): all of them for a pass, those before the call a failure names for a failure; the
 *   OK finding's words, `passed` in the JSON and the summary line come from that one table.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "child.h"
#include "cmd.h"
#include "format.h"
#include "health-probe.h"
#include "util.h"

extern char **environ;

#define PROBE_BYTES      (64u << 20) /* allocated by each probe */
#define PROBE_DETAIL_MAX 256

/* The CUDA driver calls of the probe, in the order gpuctl_cuda_probe_here makes them
 * (src/lib/cuda/cuda.c), each as a failure names it. */
static const char *const probe_steps[] = {
        "cuInit",     "cuDeviceGetCount", "cuDeviceGet",  "cuCtxCreate",
        "cuMemAlloc", "cuMemFree",        "cuCtxDestroy",
};
#define PROBE_STEPS (sizeof(probe_steps) / sizeof(probe_steps[0]))

/* What a passed probe did, in words (docs/health.md, "The CUDA probe"); what: "GPU" or "MIG
 * device", the one its CUDA_VISIBLE_DEVICES named. */
static void probe_passed_words(char *buf, size_t size, const char *what)
{
	(void)snprintf(buf, size,
	               "cuInit, only that %s visible, context created, %u MiB allocated and freed, "
	               "context destroyed",
	               what, PROBE_BYTES >> 20);
}

struct probe_child {
	size_t gpu;                     /* snapshot index */
	int mig;                        /* MIG device (its place on the GPU) probed; -1: the GPU */
	struct gpuctl_probe_result res; /* its outcome (status NOT_RUN until it ends) */
	struct child_capture cap;       /* the child, its output into out (child.h) */
	char out[PROBE_DETAIL_MAX];     /* what it printed (one line) */
};

/* environ with CUDA_VISIBLE_DEVICES=uuid (replacing any), malloc'ed array of borrowed strings
 * plus the one owned *ret_var. */
static char **probe_env(const char *uuid, char **ret_var)
{
	size_t n = 0, k = 0;
	char **envp;

	while (environ && environ[n])
		n++;
	envp = calloc(n + 2, sizeof(*envp));
	if (!envp || asprintf(ret_var, "CUDA_VISIBLE_DEVICES=%s", uuid) < 0) {
		free(envp);
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "CUDA_VISIBLE_DEVICES=", 21) != 0)
			envp[k++] = environ[i];
	envp[k++] = *ret_var;
	envp[k] = NULL;
	return envp;
}

/* Starts `gpuctl health --probe-child` (this very binary) for one GPU. */
static int probe_start(struct probe_child *c, const char *uuid)
{
	static char arg0[] = "gpuctl", arg1[] = "health", arg2[] = "--probe-child";
	char *const argv[] = {arg0, arg1, arg2, NULL};
	_cleanup_free_ char *var = NULL;
	_cleanup_free_ char **envp = probe_env(uuid, &var);
	int r;

	if (!envp)
		return -ENOMEM;
	r = spawn_piped("/proc/self/exe", false, argv, envp, &c->cap.pid, &c->cap.fd);
	if (r < 0) {
		c->cap.pid = 0;
		c->cap.fd = -1;
	}
	return r;
}

/* The outcome of a child that ended (children_collect reaped or killed it); t0_ms: the start. */
static void probe_finish(struct probe_child *c, long long t0_ms, unsigned timeout_s)
{
	/* a wait that failed (it cannot: SIGCHLD is not ignored) counts as exit 0, as it did */
	int st = c->cap.status >= 0 ? c->cap.status : 0;
	struct gpuctl_probe_result *res = &c->res;

	if (c->cap.killed) {
		*res = (struct gpuctl_probe_result){.struct_size = sizeof(*res),
		                                    .status = GPUCTL_PROBE_HUNG,
		                                    .seconds = timeout_s};
		return;
	}
	c->out[strcspn(c->out, "\n")] = '\0';
	res->seconds = (double)(c->cap.ended_ms - t0_ms) / 1000.0;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && strcmp(c->out, "ok") == 0) {
		res->status = GPUCTL_PROBE_OK;
		probe_passed_words(c->out, sizeof(c->out), c->mig < 0 ? "GPU" : "MIG device");
		res->detail = c->out;
		return;
	}
	res->status = GPUCTL_PROBE_FAILED;
	if (c->out[0] == '\0') {
		if (WIFSIGNALED(st))
			(void)snprintf(c->out, sizeof(c->out), "the probe was killed by signal %d",
			               WTERMSIG(st));
		else
			(void)snprintf(c->out, sizeof(c->out), "the probe exited with status %d",
			               WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	}
	res->detail = c->out;
}

/* Whether GPU g is in MIG mode: CUDA then uses it only through its MIG devices. */
static bool gpu_mig_mode(const struct gpuctl_gpu *g)
{
	int64_t v = 0;

	return gpuctl_gpu_int(g, GPUCTL_F_MIG_MODE, &v) == 0 && v;
}

/* How many probes GPU g takes: one per MIG device in MIG mode (none without any), else one. */
static size_t probes_of(const struct gpuctl_gpu *g)
{
	return gpu_mig_mode(g) ? gpuctl_gpu_mig_count(g) : 1;
}

/* Folds kid c's outcome into its GPU's result: a GPU in MIG mode passes when every MIG device
 * does, and fails with the first failing device named. */
static void probe_fold(struct probe_child *c, const struct gpuctl_snapshot *snap,
                       const struct gpuctl_probe_result *one, struct gpuctl_probe_result *res)
{
	char buf[PROBE_DETAIL_MAX];
	const struct gpuctl_mig *m;

	if (c->mig < 0) {
		*res = *one;
		return;
	}
	if (res->status == GPUCTL_PROBE_FAILED || res->status == GPUCTL_PROBE_HUNG)
		return; /* the first failure is the one reported */
	if (one->status == GPUCTL_PROBE_OK) {
		char words[160]; /* fits probe_passed_words' text, and c->out fits it */

		res->status = GPUCTL_PROBE_OK;
		if (one->seconds > res->seconds)
			res->seconds = one->seconds;
		probe_passed_words(words, sizeof(words), "MIG device");
		(void)snprintf(c->out, sizeof(c->out), "on each of its %zu MIG devices (%s)",
		               gpuctl_gpu_mig_count(gpuctl_snapshot_gpu(snap, c->gpu)), words);
		res->detail = c->out;
		return;
	}
	*res = *one;
	m = gpuctl_gpu_mig(gpuctl_snapshot_gpu(snap, c->gpu), (size_t)c->mig);
	(void)snprintf(buf, sizeof(buf), "MIG device %s (%s)%s%s",
	               m && gpuctl_mig_profile(m) ? gpuctl_mig_profile(m) : "?",
	               m && gpuctl_mig_uuid(m) ? gpuctl_mig_uuid(m) : "no UUID",
	               one->detail ? ": " : "", one->detail ? one->detail : "");
	strscpy(c->out, sizeof(c->out), buf);
	res->detail = c->out;
}

/* Starts the probes of the chosen GPUs into kids (*ret_n of them, counting those with no UUID,
 * which are not started); res[] gets NO_DEVICE for a GPU in MIG mode without MIG devices.
 * Returns 0 or an exit status; the children started before a failure are running. */
static int probes_start(const struct gpuctl_snapshot *snap, const size_t *sel, size_t nsel,
                        struct probe_child *kids, struct gpuctl_probe_result *res, size_t *ret_n)
{
	size_t k = 0;
	int status = 0;

	for (size_t s = 0; s < nsel && status == 0; s++) {
		const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, sel[s]);
		bool mig = gpu_mig_mode(g);
		size_t n = probes_of(g);

		if (gpuctl_gpu_lost(g))
			continue; /* FAIL already */
		if (mig && n == 0) {
			res[sel[s]].status = GPUCTL_PROBE_NO_DEVICE;
			continue;
		}
		for (size_t m = 0; m < n; m++) {
			const char *uuid = mig ? gpuctl_mig_uuid(gpuctl_gpu_mig(g, m))
			                       : gpuctl_gpu_str(g, GPUCTL_F_UUID);
			struct probe_child *c = &kids[k++];
			int r;

			c->res = (struct gpuctl_probe_result)GPUCTL_PROBE_RESULT_INIT;
			c->gpu = sel[s];
			c->mig = mig ? (int)m : -1;
			c->cap = (struct child_capture){
			        .fd = -1, .out = c->out, .size = sizeof(c->out)};
			if (!uuid)
				continue; /* no UUID, no way to name it */
			r = probe_start(c, uuid);
			if (r < 0) {
				cli_error("health: --probe: cannot start a probe: %s",
				          strerror(-r));
				status = CLI_EXIT_FAILURE;
				break; /* the ones started are killed by the caller */
			}
		}
	}
	*ret_n = k;
	return status;
}

/* Probes the chosen GPUs in parallel, a GPU in MIG mode through each of its MIG devices; res[]
 * (by snapshot index) gets the outcomes. Children still running at the deadline are killed
 * with their process group. */
static int run_probes(const struct gpuctl_snapshot *snap, const size_t *sel, size_t nsel,
                      unsigned timeout_s, struct probe_child *kids, size_t nkids,
                      struct gpuctl_probe_result *res)
{
	long long t0 = monotonic_ms();
	_cleanup_free_ struct pollfd *pfd = calloc(nkids + 1, sizeof(*pfd));
	_cleanup_free_ struct child_capture **caps = calloc(nkids + 1, sizeof(*caps));
	int status, r;

	if (!pfd || !caps) {
		cli_error("health: out of memory");
		return CLI_EXIT_FAILURE;
	}
	status = probes_start(snap, sel, nsel, kids, res, &nkids);
	for (size_t j = 0; j < nkids; j++)
		caps[j] = &kids[j].cap;
	if (status == 0) {
		r = children_collect(caps, nkids, t0 + (long long)timeout_s * 1000, pfd);
		if (r < 0)
			cli_error("health: --probe: poll: %s", strerror(-r));
	}
	for (size_t j = 0; j < nkids; j++) {
		if (kids[j].cap.fd >= 0)
			child_capture_kill(&kids[j].cap); /* after a failure */
		if (kids[j].cap.pid > 0)
			probe_finish(&kids[j], t0, timeout_s);
	}
	/* in device order, so the failure reported is the same whichever child ended first */
	for (size_t j = 0; j < nkids; j++) {
		struct gpuctl_probe_result one = kids[j].res;

		if (one.status != GPUCTL_PROBE_NOT_RUN)
			probe_fold(&kids[j], snap, &one, &res[kids[j].gpu]);
	}
	return status;
}

int health_probe(const struct gpuctl_snapshot *snap, const size_t *sel, size_t nsel,
                 unsigned timeout_s, struct health_probes *p)
{
	size_t nkids = 0;

	for (size_t k = 0; k < nsel; k++)
		nkids += probes_of(gpuctl_snapshot_gpu(snap, sel[k]));
	p->n = gpuctl_snapshot_gpu_count(snap);
	p->res = calloc(p->n + 1, sizeof(*p->res));
	p->kids = calloc(nkids + 1, sizeof(*p->kids));
	if (!p->res || !p->kids) {
		cli_error("health: out of memory");
		return CLI_EXIT_FAILURE;
	}
	for (size_t i = 0; i <= p->n; i++)
		p->res[i] = (struct gpuctl_probe_result)GPUCTL_PROBE_RESULT_INIT;
	return run_probes(snap, sel, nsel, timeout_s, p->kids, nkids, p->res);
}

void health_probes_free(struct health_probes *p)
{
	free(p->res);
	free(p->kids);
	p->res = NULL;
	p->kids = NULL;
}

/* How many of probe_steps passed in result res: all for a pass; for a failure, those before
 * the call its detail names ("cuMemAlloc: ..."), or before cuDeviceGet when CUDA saw other than
 * one device; none when it hung or the failing call is not named. */
static size_t steps_passed(const struct gpuctl_probe_result *res)
{
	char call[64];

	if (res->status == GPUCTL_PROBE_OK)
		return PROBE_STEPS;
	if (res->status != GPUCTL_PROBE_FAILED || !res->detail)
		return 0;
	if (strstr(res->detail, "CUDA sees "))
		return 2; /* cuInit and cuDeviceGetCount answered; the count was wrong */
	for (size_t i = 0; i < PROBE_STEPS; i++) {
		(void)snprintf(call, sizeof(call), "%s: ", probe_steps[i]);
		if (strstr(res->detail, call))
			return i;
	}
	return 0;
}

static const char *result_name(int status)
{
	switch (status) {
	case GPUCTL_PROBE_OK:
		return "passed";
	case GPUCTL_PROBE_FAILED:
		return "failed";
	case GPUCTL_PROBE_HUNG:
		return "hung";
	case GPUCTL_PROBE_NO_DEVICE:
		return "no MIG device";
	default:
		return NULL;
	}
}

json_t *health_probe_json(const struct health_probes *p, size_t gpu)
{
	const struct gpuctl_probe_result *res;
	json_t *o, *passed;
	size_t n;

	if (!p || !p->res || gpu >= p->n || !result_name(p->res[gpu].status))
		return json_null();
	res = &p->res[gpu];
	n = steps_passed(res);
	o = json_object();
	passed = json_array();
	if (!o || !passed)
		goto fail;
	for (size_t i = 0; i < n; i++)
		if (json_array_append_new(passed, json_text(probe_steps[i])) < 0)
			goto fail;
	if (json_put(o, "result", json_text(result_name(res->status))) < 0 ||
	    json_put(o, "ms",
	             res->status == GPUCTL_PROBE_NO_DEVICE
	                     ? json_null()
	                     : json_integer((json_int_t)(res->seconds * 1000.0 + 0.5))) < 0)
		goto fail;
	if (json_put(o, "passed", passed) < 0) {
		passed = NULL;
		goto fail;
	}
	return o;
fail:
	json_decref(passed);
	json_decref(o);
	return NULL;
}

/* Which class of the summary GPU gpu's result is in: 0 passed, 1 failed (or hung), 2 not
 * probed (lost, no UUID, MIG mode without a MIG device). */
static int summary_class(const struct health_probes *p, size_t gpu)
{
	int st = gpu < p->n ? p->res[gpu].status : GPUCTL_PROBE_NOT_RUN;

	return st == GPUCTL_PROBE_OK                                  ? 0
	       : st == GPUCTL_PROBE_FAILED || st == GPUCTL_PROBE_HUNG ? 1
	                                                              : 2;
}

static const char *const summary_keys[] = {"passed", "failed", "not_probed"};

json_t *health_probe_summary_json(const struct health_probes *p, const size_t *sel, size_t nsel)
{
	json_t *o, *lists[3] = {NULL, NULL, NULL};

	if (!p || !p->res)
		return json_null();
	o = json_object();
	for (size_t c = 0; c < 3; c++)
		if (!(lists[c] = json_array()))
			goto fail;
	if (!o)
		goto fail;
	for (size_t k = 0; k < nsel; k++)
		if (json_array_append_new(lists[summary_class(p, sel[k])],
		                          json_integer((json_int_t)sel[k])) < 0)
			goto fail;
	for (size_t c = 0; c < 3; c++) {
		int r = json_put(o, summary_keys[c], lists[c]);

		lists[c] = NULL;
		if (r < 0)
			goto fail;
	}
	return o;
fail:
	for (size_t c = 0; c < 3; c++)
		json_decref(lists[c]);
	json_decref(o);
	return NULL;
}

void health_probe_summary(const struct health_probes *p, const size_t *sel, size_t nsel)
{
	static const char *const words[] = {"passed on GPU", "failed on GPU", "not probed on GPU"};
	bool any = false;

	if (!p || !p->res)
		return;
	for (int c = 0; c < 3; c++) {
		bool first = true;

		for (size_t k = 0; k < nsel; k++) {
			if (summary_class(p, sel[k]) != c)
				continue;
			if (first)
				printf("%s%s %zu", any ? "; " : "CUDA probe ", words[c], sel[k]);
			else
				printf(", %zu", sel[k]);
			first = false;
			any = true;
		}
	}
	if (any)
		putchar('\n');
}

int health_probe_child(void)
{
	struct gpuctl_ctx *ctx = NULL;
	int r;

	if (gpuctl_ctx_new(&ctx) < 0) {
		puts("out of memory");
		return CLI_EXIT_FAILURE;
	}
	r = gpuctl_cuda_probe_here(ctx, PROBE_BYTES);
	puts(r < 0 ? gpuctl_errmsg(ctx) : "ok");
	gpuctl_ctx_free(ctx);
	return cli_finish_output(r < 0 ? CLI_EXIT_FAILURE : CLI_EXIT_OK);
}
