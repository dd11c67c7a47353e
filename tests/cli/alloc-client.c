// SPDX-License-Identifier: MIT
/*
 * alloc-client: a C program that calls gpuctl_alloc() with the request given on its command
 * line, for tests/cli/test_alloc_parity.py, which checks that it, the `gpuctl` command line and
 * the Python package choose the same devices or fail with the same reason. It uses the public
 * header and libgpuctl.so only, as any C user would.
 *
 *   alloc-client choose|preview|lease N [--min-free-mem BYTES] [--max-util PCT] [--no-procs]
 *                [--only IDS] [--exclude IDS] [--numa NODE] [--mig PROFILE] [--pool NAME]
 *                [--allow-unhealthy] [--ignore-outer] [--ignore-foreign] [--share-mem BYTES]
 *                [--avoid UUID]...
 *
 * Prints the chosen devices' CUDA_VISIBLE_DEVICES value and exits 0, or prints
 * "ERROR <errno name> <the library's message>" and exits 1; 2 for bad usage. A lease is
 * released when the program exits.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpuctl/gpuctl.h>

#define MAX_AVOID 64

static int usage(const char *why)
{
	fprintf(stderr, "alloc-client: %s\n", why);
	return 2;
}

/* A decimal number of at most max, nothing around it. */
static bool number(const char *s, uint64_t max, uint64_t *ret)
{
	uint64_t v = 0;

	if (!*s)
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	if (v > max)
		return false;
	*ret = v;
	return true;
}

static const char *errno_name(int e)
{
	static const struct {
		int e;
		const char *name;
	} names[] = {
	        {EINVAL, "EINVAL"},       {ENOSPC, "ENOSPC"}, {ETIMEDOUT, "ETIMEDOUT"},
	        {EACCES, "EACCES"},       {ENODEV, "ENODEV"}, {ENOEXEC, "ENOEXEC"},
	        {EPERM, "EPERM"},         {ENOENT, "ENOENT"}, {EIO, "EIO"},
	        {ECANCELED, "ECANCELED"}, {EINTR, "EINTR"},   {ENOMEM, "ENOMEM"},
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].e == e)
			return names[i].name;
	return "EOTHER";
}

int main(int argc, char **argv)
{
	struct gpuctl_alloc_request req = GPUCTL_ALLOC_REQUEST_INIT;
	const char *avoid[MAX_AVOID];
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_alloc *alloc = NULL;
	uint64_t v;
	int r;

	if (argc < 3)
		return usage("usage: alloc-client choose|preview|lease N [OPTIONS]");
	if (strcmp(argv[1], "choose") == 0)
		req.mode = GPUCTL_ALLOC_CHOOSE;
	else if (strcmp(argv[1], "preview") == 0)
		req.mode = GPUCTL_ALLOC_PREVIEW;
	else if (strcmp(argv[1], "lease") == 0)
		req.mode = GPUCTL_ALLOC_LEASE;
	else
		return usage("unknown mode");
	const struct {
		const char *name;
		bool *flag;
	} flags[] = {
	        {"--no-procs", &req.no_procs},
	        {"--allow-unhealthy", &req.allow_unhealthy},
	        {"--ignore-outer", &req.ignore_outer},
	        {"--ignore-foreign", &req.ignore_foreign},
	};

	if (!number(argv[2], 4096, &v))
		return usage("N is not a number of devices");
	req.count = (unsigned)v;
	for (int i = 3; i < argc; i++) {
		const char *o = argv[i], *arg = i + 1 < argc ? argv[i + 1] : NULL;

		bool *flag = NULL;

		for (size_t k = 0; k < sizeof(flags) / sizeof(flags[0]); k++)
			if (strcmp(o, flags[k].name) == 0)
				flag = flags[k].flag;
		if (flag) {
			*flag = true;
			continue;
		}
		if (!arg)
			return usage("an option lacks its value");
		i++;
		if (strcmp(o, "--min-free-mem") == 0 && number(arg, UINT64_MAX, &v))
			req.min_free_mem = v;
		else if (strcmp(o, "--share-mem") == 0 && number(arg, UINT64_MAX, &v))
			req.share_mem = v;
		else if (strcmp(o, "--max-util") == 0 && number(arg, 100, &v))
			req.max_util = (int)v;
		else if (strcmp(o, "--numa") == 0 && number(arg, 65535, &v))
			req.numa_node = (int)v;
		else if (strcmp(o, "--only") == 0)
			req.only = arg;
		else if (strcmp(o, "--exclude") == 0)
			req.exclude = arg;
		else if (strcmp(o, "--mig") == 0)
			req.mig_profile = arg;
		else if (strcmp(o, "--pool") == 0)
			req.pool = arg;
		else if (strcmp(o, "--avoid") == 0 && req.n_avoid < MAX_AVOID)
			avoid[req.n_avoid++] = arg;
		else
			return usage("unknown option or bad value");
	}
	req.avoid = req.n_avoid ? avoid : NULL;
	req.label = "alloc-client";
	req.command = "alloc-client";

	if (gpuctl_ctx_new(&ctx) < 0) {
		puts("ERROR ENOMEM out of memory");
		return 1;
	}
	r = gpuctl_alloc(ctx, &req, &alloc);
	if (r < 0)
		printf("ERROR %s %s\n", errno_name(-r), gpuctl_errmsg(ctx));
	else
		printf("%s\n", gpuctl_alloc_cuda_visible_devices(alloc));
	gpuctl_alloc_free(alloc);
	gpuctl_ctx_free(ctx);
	return r < 0 ? 1 : 0;
}
