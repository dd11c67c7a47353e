// SPDX-License-Identifier: MIT
/*
 * test-alloc.c: gpuctl_alloc() (src/lib/alloc*.c) and the site (src/lib/site.c) against the NVML
 * simulator on the DGX A100 scenario: the request's defaults and size rule, each mode, each
 * rule the call composes (health from the kernel log, the outer allocation, pools, leases,
 * the avoid list) and each error code of the header, including the ends of a wait (deadline,
 * cancel descriptor, a signal). Expected facts come from sim/scenarios/dgx-a100.json (bus ids,
 * UUIDs) and docs/health.md (XID 48 fences a GPU), not from the code under test.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "gpuctl/gpuctl.h"
#include "test-sim.h"

/* From sim/scenarios/dgx-a100.json: GPU 0 and GPU 5. */
#define GPU0_BUS  "00000000:07:00.0"
#define GPU0_UUID "GPU-7678cc1a"
#define GPU0_FULL "GPU-7678cc1a-b9d2-add0-5a60-0853a8779508"
#define GPU1_UUID "GPU-f4c6dae6"
#define GPU5_BUS  "00000000:90:00.0"

struct fixture {
	struct sim sim;
	char dir[64];             /* scratch: lease directory, configuration, kernel log */
	char path[PATH_MAX + 64]; /* scratch path buffer */
	struct gpuctl_ctx *ctx;
};

static const char *scratch(struct fixture *f, const char *name)
{
	(void)snprintf(f->path, sizeof(f->path), "%s/%s", f->dir, name);
	return f->path;
}

static void write_file(const char *path, const char *text)
{
	FILE *fp = fopen(path, "we");
	assert_non_null(fp);
	assert_int_equal(fputs(text, fp) >= 0, 1);
	assert_int_equal(fclose(fp), 0);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	if (sim_start_scenario(&f->sim, "", "sim/scenarios/dgx-a100.json") < 0) {
		free(f);
		return -1;
	}
	(void)snprintf(f->dir, sizeof(f->dir), "/tmp/gpuctl-alloc-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	/* readable by the unprivileged child of the pool test */
	assert_int_equal(chmod(f->dir, 0755), 0);
	assert_int_equal(chmod(f->sim.state_dir, 0755), 0);
	(void)snprintf(f->path, sizeof(f->path), "%s/scenario.json", f->sim.state_dir);
	assert_int_equal(chmod(f->path, 0644), 0);
	write_file(scratch(f, "empty.conf"), "");
	assert_int_equal(setenv("GPUCTL_CONFIG", scratch(f, "empty.conf"), 1), 0);
	write_file(scratch(f, "kmsg"), "");
	assert_int_equal(setenv("GPUCTL_KMSG", scratch(f, "kmsg"), 1), 0);
	assert_int_equal(setenv("GPUCTL_HEALTH_STATE", scratch(f, "health.state"), 1), 0);
	assert_int_equal(setenv("GPUCTL_LEASE_DIR", scratch(f, "leases"), 1), 0);
	static const char *const outer[] = {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
	                                    "NVIDIA_VISIBLE_DEVICES", "SLURM_STEP_GPUS",
	                                    "SLURM_JOB_GPUS"};
	for (size_t i = 0; i < sizeof(outer) / sizeof(outer[0]); i++)
		assert_int_equal(unsetenv(outer[i]), 0);
	assert_int_equal(gpuctl_ctx_new(&f->ctx), 0);
	*state = f;
	return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	gpuctl_ctx_free(f->ctx);
	(void)nftw(f->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	sim_stop(&f->sim);
	free(f);
	return 0;
}

/* The PCI bus ids of the chosen devices, comma-separated, into buf. */
static const char *chosen_buses(const struct gpuctl_alloc *a, char *buf, size_t size)
{
	const struct gpuctl_devset *set = gpuctl_alloc_devices(a);
	const struct gpuctl_snapshot *snap = gpuctl_alloc_snapshot(a);
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < gpuctl_devset_count(set); i++) {
		size_t gpu;
		int mig;
		assert_int_equal(gpuctl_devset_get(set, i, &gpu, &mig), 0);
		const char *bus =
		        gpuctl_gpu_str(gpuctl_snapshot_gpu(snap, gpu), GPUCTL_F_PCI_BUS_ID);
		used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? "," : "", bus);
	}
	return buf;
}

static void test_request_init(void **state)
{
	struct gpuctl_alloc_request want = GPUCTL_ALLOC_REQUEST_INIT, got;
	unsigned char big[sizeof(struct gpuctl_alloc_request) + 32];

	(void)state;
	memset(&got, 0xa5, sizeof(got));
	assert_int_equal(gpuctl_alloc_request_init(&got, sizeof(got)), 0);
	assert_int_equal(got.struct_size, sizeof(got));
	assert_int_equal(got.count, 1);
	assert_int_equal(got.max_util, -1);
	assert_int_equal(got.numa_node, -1);
	assert_int_equal(got.cancel_fd, -1);
	assert_true(got.wait_timeout_s < 0);
	assert_int_equal(got.mode, GPUCTL_ALLOC_CHOOSE);
	assert_null(got.only);
	/* the macro and the call agree, field by field (padding is unspecified) */
	assert_int_equal(got.count, want.count);
	assert_int_equal(got.max_util, want.max_util);
	assert_int_equal(got.numa_node, want.numa_node);
	assert_int_equal(got.cancel_fd, want.cancel_fd);
	assert_true(got.wait_timeout_s == want.wait_timeout_s);
	/* a newer caller's larger struct: what this library does not know is zeroed */
	memset(big, 0xa5, sizeof(big));
	assert_int_equal(gpuctl_alloc_request_init((void *)big, sizeof(big)), 0);
	assert_int_equal(((struct gpuctl_alloc_request *)(void *)big)->struct_size, sizeof(big));
	for (size_t i = sizeof(struct gpuctl_alloc_request); i < sizeof(big); i++)
		assert_int_equal(big[i], 0);
	/* the first release's struct ended with n_avoid: a caller of that size is served (replace
	 * stays NULL), a smaller one is refused */
	assert_int_equal(
	        gpuctl_alloc_request_init(&got, offsetof(struct gpuctl_alloc_request, replace)), 0);
	assert_int_equal(
	        gpuctl_alloc_request_init(&got, offsetof(struct gpuctl_alloc_request, replace) - 1),
	        -EINVAL);
	assert_int_equal(gpuctl_alloc_request_init(NULL, sizeof(got)), -EINVAL);
}

static void test_choose(void **state)
{
	struct fixture *f = *state;
	struct gpuctl_alloc_request req = GPUCTL_ALLOC_REQUEST_INIT;
	struct gpuctl_alloc *a = NULL;
	char buf[256];

	req.count = 2;
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), 0);
	assert_int_equal(gpuctl_devset_count(gpuctl_alloc_devices(a)), 2);
	assert_null(gpuctl_alloc_lease(a));
	/* nothing was leased, so the directory was not created either */
	assert_null(gpuctl_alloc_lease_dir_path(a));
	assert_int_equal(access(scratch(f, "leases"), F_OK), -1);
	assert_non_null(gpuctl_alloc_health(a));
	assert_non_null(gpuctl_alloc_selection(a));
	/* the CUDA string is the chosen UUIDs, in order */
	(void)snprintf(buf, sizeof(buf), "%s,%s",
	               gpuctl_devset_uuid(gpuctl_alloc_devices(a), gpuctl_alloc_snapshot(a), 0),
	               gpuctl_devset_uuid(gpuctl_alloc_devices(a), gpuctl_alloc_snapshot(a), 1));
	assert_string_equal(gpuctl_alloc_cuda_visible_devices(a), buf);
	gpuctl_alloc_free(a);

	req.count = 0;
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), 0);
	assert_string_equal(gpuctl_alloc_cuda_visible_devices(a), "");
	gpuctl_alloc_free(a);
	gpuctl_alloc_free(NULL);
}

static void test_bad_requests(void **state)
{
	struct fixture *f = *state;
	struct gpuctl_alloc_request req = GPUCTL_ALLOC_REQUEST_INIT;
	struct gpuctl_alloc *a = NULL;

	req.mode = 7;
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), -EINVAL);
	assert_non_null(strstr(gpuctl_errmsg(f->ctx), "mode 7"));
	req.mode = GPUCTL_ALLOC_CHOOSE;
	req.wait = true;
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), -EINVAL);
	req.wait = false;
	req.only = "nope";
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), -EINVAL);
	assert_non_null(strstr(gpuctl_errmsg(f->ctx), "nope"));
	req.only = NULL;
	req.pool = "training";
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), -EINVAL);
	assert_non_null(strstr(gpuctl_errmsg(f->ctx), "pool 'training'"));
	req.pool = NULL;
	req.max_util = 101;
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), -EINVAL);
	req.max_util = -1;
	req.struct_size = 8;
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), -EINVAL);
	assert_null(a);
	req.struct_size = sizeof(req);
	req.count = 9; /* the machine has 8 */
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), -ENOSPC);
	/* a configuration that was named and is missing: the request is wrong */
	req.count = 1;
	req.config_path = "/nonexistent/gpuctl.conf";
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), -EINVAL);
	assert_non_null(strstr(gpuctl_errmsg(f->ctx), "/nonexistent/gpuctl.conf"));
	assert_null(a);
}

static void test_no_driver(void **state)
{
	struct fixture *f = *state;
	struct gpuctl_alloc_request req = GPUCTL_ALLOC_REQUEST_INIT;
	struct gpuctl_alloc *a = NULL;
	struct gpuctl_ctx *ctx = NULL;

	(void)f;
	assert_int_equal(setenv("GPUCTL_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1), 0);
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	assert_int_equal(gpuctl_alloc(ctx, &req, &a), -ENODEV);
	assert_non_null(strstr(gpuctl_errmsg(ctx), "no NVIDIA driver"));
	gpuctl_ctx_free(ctx);
	assert_int_equal(setenv("GPUCTL_NVML_LIBRARY", f->sim.lib, 1), 0);
}

/* XID 48 (double-bit ECC error) fences a GPU (docs/health.md): never chosen, unless the request
 * allows unhealthy GPUs. */
static void test_health_fail_is_never_chosen(void **state)
{
	struct fixture *f = *state;
	struct gpuctl_alloc_request req = GPUCTL_ALLOC_REQUEST_INIT;
	struct gpuctl_alloc *a = NULL;
	char buf[512];

	write_file(scratch(f, "kmsg"), "NVRM: Xid (PCI:0000:07:00): 48, pid=1, An uncorrectable "
	                               "double bit error\n");
	req.count = 8;
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), -ENOSPC);
	assert_non_null(strstr(gpuctl_errmsg(f->ctx), "unhealthy"));
	req.count = 7;
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), 0);
	assert_null(strstr(chosen_buses(a, buf, sizeof(buf)), GPU0_BUS));
	assert_int_equal(gpuctl_health_verdict(gpuctl_alloc_health(a), 0), GPUCTL_HEALTH_FAIL);
	gpuctl_alloc_free(a);
	req.count = 8;
	req.allow_unhealthy = true;
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), 0);
	assert_non_null(strstr(chosen_buses(a, buf, sizeof(buf)), GPU0_BUS));
	assert_null(gpuctl_alloc_health(a));
	gpuctl_alloc_free(a);
}

static void test_outer_allocation(void **state)
{
	struct fixture *f = *state;
	struct gpuctl_alloc_request req = GPUCTL_ALLOC_REQUEST_INIT;
	struct gpuctl_alloc *a = NULL;
	char buf[512];

	assert_int_equal(setenv("CUDA_VISIBLE_DEVICES", "5", 1), 0);
	assert_int_equal(setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1), 0);
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), 0);
	assert_string_equal(chosen_buses(a, buf, sizeof(buf)), GPU5_BUS);
	gpuctl_alloc_free(a);
	req.count = 2;
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), -ENOSPC);
	req.ignore_outer = true;
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), 0);
	gpuctl_alloc_free(a);
	assert_int_equal(unsetenv("CUDA_VISIBLE_DEVICES"), 0);
	assert_int_equal(unsetenv("CUDA_DEVICE_ORDER"), 0);
	/* a value that cannot be read is a bad request, not a guess */
	req.ignore_outer = false;
	assert_int_equal(setenv("NVIDIA_VISIBLE_DEVICES", "GPU-nope", 1), 0);
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), -EINVAL);
	assert_non_null(strstr(gpuctl_errmsg(f->ctx), "NVIDIA_VISIBLE_DEVICES"));
	assert_int_equal(unsetenv("NVIDIA_VISIBLE_DEVICES"), 0);
}

static void test_avoid(void **state)
{
	struct fixture *f = *state;
	struct gpuctl_alloc_request req = GPUCTL_ALLOC_REQUEST_INIT;
	struct gpuctl_alloc *a = NULL;
	const char *avoid[2] = {NULL, "GPU-00000000-0000-0000-0000-000000000000"};
	char uuid[128];

	/* whatever is chosen first is never chosen again once avoided; an unknown UUID is no
	 * error */
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), 0);
	(void)snprintf(uuid, sizeof(uuid), "%s", gpuctl_alloc_cuda_visible_devices(a));
	gpuctl_alloc_free(a);
	avoid[0] = uuid;
	req.avoid = avoid;
	req.n_avoid = 2;
	req.count = 7;
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), 0);
	assert_null(strstr(gpuctl_alloc_cuda_visible_devices(a), uuid));
	gpuctl_alloc_free(a);
	req.count = 8;
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), -ENOSPC);
}

static void test_lease_and_leased(void **state)
{
	struct fixture *f = *state;
	struct gpuctl_alloc_request req = GPUCTL_ALLOC_REQUEST_INIT;
	struct gpuctl_alloc *held = NULL, *a = NULL;

	req.mode = GPUCTL_ALLOC_LEASE;
	req.only = "0";
	req.label = "unit test";
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &held), 0);
	assert_non_null(gpuctl_alloc_lease(held));
	assert_string_equal(gpuctl_alloc_lease_dir_path(held), scratch(f, "leases"));
	assert_non_null(strstr(gpuctl_alloc_cuda_visible_devices(held), GPU0_UUID));
	/* leased: neither leased again nor chosen */
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), -ENOSPC);
	assert_non_null(strstr(gpuctl_errmsg(f->ctx), "leased"));
	req.mode = GPUCTL_ALLOC_CHOOSE;
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), -ENOSPC);
	assert_non_null(strstr(gpuctl_errmsg(f->ctx), "leased"));
	gpuctl_alloc_free(held);
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), 0);
	gpuctl_alloc_free(a);
	req.mode = GPUCTL_ALLOC_LEASE;
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), 0);
	gpuctl_alloc_free(a);
}

/* A failover's replacement (gpuctl_alloc_request.replace): the current lease's devices are the
 * caller's own, those chosen again are never unlocked, the rest go when the old one is freed. */
static void test_replace_keeps_what_it_chooses_again(void **state)
{
	struct fixture *f = *state;
	struct gpuctl_alloc_request req = GPUCTL_ALLOC_REQUEST_INIT;
	struct gpuctl_alloc *old = NULL, *a = NULL, *other = NULL;
	const char *avoid[] = {GPU0_FULL};

	req.mode = GPUCTL_ALLOC_LEASE;
	req.count = 2;
	req.only = "0,1";
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &old), 0);
	/* GPU 0 failed: 2 of GPUs 0-2 without it, still holding 0 and 1 */
	req.only = "0,1,2";
	req.avoid = avoid;
	req.n_avoid = 1;
	req.replace = old;
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), 0);
	assert_null(strstr(gpuctl_alloc_cuda_visible_devices(a), GPU0_UUID));
	assert_non_null(strstr(gpuctl_alloc_cuda_visible_devices(a), GPU1_UUID));
	/* nobody else gets GPU 1 or 2, even once the old allocation is freed; GPU 0 is free then */
	struct gpuctl_alloc_request one = GPUCTL_ALLOC_REQUEST_INIT;
	one.mode = GPUCTL_ALLOC_LEASE;
	one.only = "1";
	assert_int_equal(gpuctl_alloc(f->ctx, &one, &other), -ENOSPC);
	one.only = "0";
	assert_int_equal(gpuctl_alloc(f->ctx, &one, &other), -ENOSPC); /* old holds it */
	gpuctl_alloc_free(old);
	one.only = "1,2";
	assert_int_equal(gpuctl_alloc(f->ctx, &one, &other), -ENOSPC);
	one.only = "0";
	assert_int_equal(gpuctl_alloc(f->ctx, &one, &other), 0);
	gpuctl_alloc_free(other);
	/* no replacement: the message says so, nothing changes */
	req.only = "1,2";
	req.count = 3;
	req.replace = a;
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &other), -ENOSPC);
	assert_ptr_equal(strstr(gpuctl_errmsg(f->ctx), "no replacement: "), gpuctl_errmsg(f->ctx));
	/* only a lease can be replaced */
	req.count = 1;
	req.mode = GPUCTL_ALLOC_CHOOSE;
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &other), -EINVAL);
	gpuctl_alloc_free(a);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_alarm(int sig)
{
	(void)sig;
}

static void test_wait_ends(void **state)
{
	struct fixture *f = *state;
	struct gpuctl_alloc_request req = GPUCTL_ALLOC_REQUEST_INIT;
	struct gpuctl_alloc *held = NULL, *a = NULL;
	double t0;
	int efd;

	req.mode = GPUCTL_ALLOC_LEASE;
	req.only = "0";
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &held), 0);

	/* a request the static filters alone refuse fails at once */
	req.wait = true;
	req.count = 2;
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), -ENOSPC);
	assert_non_null(strstr(gpuctl_errmsg(f->ctx), "can never be satisfied"));

	/* the deadline */
	req.count = 1;
	req.wait_timeout_s = 0.3;
	t0 = now_s();
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), -ETIMEDOUT);
	assert_true(now_s() - t0 >= 0.29);
	assert_non_null(strstr(gpuctl_errmsg(f->ctx), "waited 0.3 s: "));
	assert_non_null(strstr(gpuctl_errmsg(f->ctx), "leased"));

	/* the cancel descriptor */
	req.wait_timeout_s = -1;
	efd = eventfd(1, EFD_CLOEXEC);
	assert_true(efd >= 0);
	req.cancel_fd = efd;
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), -ECANCELED);
	close(efd);

	/* a signal handler that ran: the caller decides (Python raises KeyboardInterrupt). The
	 * alarm repeats, so one that comes before the call blocks (a loaded machine) is followed
	 * by one that finds it waiting. */
	struct sigaction sa = {.sa_handler = on_alarm}, old;
	struct itimerval it = {.it_value = {.tv_sec = 0, .tv_usec = 200000},
	                       .it_interval = {.tv_sec = 0, .tv_usec = 50000}};
	struct itimerval off = {{0, 0}, {0, 0}};
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGALRM, &sa, &old), 0); /* no SA_RESTART */
	req.cancel_fd = -1;
	assert_int_equal(setitimer(ITIMER_REAL, &it, NULL), 0);
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), -EINTR);
	assert_int_equal(setitimer(ITIMER_REAL, &off, NULL), 0);
	assert_int_equal(sigaction(SIGALRM, &old, NULL), 0);
	assert_null(a);

	/* nothing stayed leased or queued by the failed waits: free the holder and it is ours */
	gpuctl_alloc_free(held);
	req.wait_timeout_s = 5;
	assert_int_equal(gpuctl_alloc(f->ctx, &req, &a), 0);
	gpuctl_alloc_free(a);
}

/* A restricted pool refuses a user it does not name (-EACCES); root may draw from every pool,
 * so as root the request runs in a child that became an unprivileged user. */
static void test_pool_refused(void **state)
{
	struct fixture *f = *state;
	pid_t pid;
	int status;

	write_file(scratch(f, "pools.conf"), "[pool restricted]\ngpus = 0-1\nusers = 4242424\n");
	assert_int_equal(chmod(scratch(f, "pools.conf"), 0644), 0);
	assert_int_equal(setenv("GPUCTL_CONFIG", scratch(f, "pools.conf"), 1), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct gpuctl_alloc_request req = GPUCTL_ALLOC_REQUEST_INIT;
		struct gpuctl_alloc *a = NULL;
		struct gpuctl_ctx *ctx = NULL;
		int r;

		if (geteuid() == 0 &&
		    (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
		     setresuid(65534, 65534, 65534) < 0))
			_exit(90);
		if (gpuctl_ctx_new(&ctx) < 0)
			_exit(91);
		req.pool = "restricted";
		r = gpuctl_alloc(ctx, &req, &a);
		if (r != -EACCES || !strstr(gpuctl_errmsg(ctx), "not allowed") ||
		    !strstr(gpuctl_errmsg(ctx), "4242424")) {
			fprintf(stderr, "pool: %d %s\n", r, gpuctl_errmsg(ctx));
			_exit(92);
		}
		/* the default pool (GPUs 2-7) stays open to everyone */
		req.pool = NULL;
		req.count = 6;
		r = gpuctl_alloc(ctx, &req, &a);
		if (r != 0) {
			fprintf(stderr, "default pool: %d %s\n", r, gpuctl_errmsg(ctx));
			_exit(93);
		}
		gpuctl_alloc_free(a);
		gpuctl_ctx_free(ctx);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(setenv("GPUCTL_CONFIG", scratch(f, "empty.conf"), 1), 0);
}

/* The site resolves the lease directory and the state file as documented, and a missing
 * directory is not created without GPUCTL_SITE_CREATE. */
static void test_site(void **state)
{
	struct fixture *f = *state;
	struct gpuctl_site *site = NULL;
	char want[PATH_MAX];

	assert_int_equal(unsetenv("GPUCTL_HEALTH_STATE"), 0);
	assert_int_equal(gpuctl_site_open(f->ctx, NULL, NULL, 0, &site), 0);
	assert_string_equal(gpuctl_site_lease_dir_path(site), scratch(f, "leases"));
	assert_null(gpuctl_site_lease_dir(site));
	(void)snprintf(want, sizeof(want), "%s/leases-health.state", f->dir);
	assert_string_equal(gpuctl_site_health_state_path(site), want);
	gpuctl_site_free(site);
	assert_int_equal(access(scratch(f, "leases"), F_OK), -1);
	assert_int_equal(gpuctl_site_open(f->ctx, NULL, NULL, GPUCTL_SITE_CREATE, &site), 0);
	assert_non_null(gpuctl_site_lease_dir(site));
	gpuctl_site_free(site);
	assert_int_equal(access(scratch(f, "leases"), F_OK), 0);
	/* the configuration's lease_dir counts after the argument and $GPUCTL_LEASE_DIR */
	write_file(scratch(f, "dir.conf"), "lease_dir = /tmp/gpuctl-alloc-conf-dir\n");
	assert_int_equal(unsetenv("GPUCTL_LEASE_DIR"), 0);
	assert_int_equal(gpuctl_site_open(f->ctx, scratch(f, "dir.conf"), NULL,
	                                  GPUCTL_SITE_NO_LEASES, &site),
	                 0);
	assert_string_equal(gpuctl_site_lease_dir_path(site), "/tmp/gpuctl-alloc-conf-dir");
	assert_string_equal(gpuctl_site_health_state_path(site),
	                    "/tmp/gpuctl-alloc-conf-dir-health.state");
	gpuctl_site_free(site);
	assert_int_equal(gpuctl_site_open(f->ctx, NULL, "/x/y", GPUCTL_SITE_NO_LEASES, &site), 0);
	assert_string_equal(gpuctl_site_lease_dir_path(site), "/x/y");
	assert_string_equal(gpuctl_site_health_state_path(site), "/x/y-health.state");
	gpuctl_site_free(site);
	/* two lease directories in one parent keep two state files (issue 25); the default
	 * directory's is /run/gpuctl-health.state, as docs/health.md says */
	assert_int_equal(gpuctl_site_open(f->ctx, NULL, "/x/z/", GPUCTL_SITE_NO_LEASES, &site), 0);
	assert_string_equal(gpuctl_site_health_state_path(site), "/x/z-health.state");
	gpuctl_site_free(site);
	assert_int_equal(
	        gpuctl_site_open(f->ctx, NULL, "/run/gpuctl", GPUCTL_SITE_NO_LEASES, &site), 0);
	assert_string_equal(gpuctl_site_health_state_path(site), "/run/gpuctl-health.state");
	gpuctl_site_free(site);
	assert_int_equal(gpuctl_site_open(f->ctx, NULL, "/", GPUCTL_SITE_NO_LEASES, &site), 0);
	assert_string_equal(gpuctl_site_health_state_path(site), "/gpuctl-health.state");
	gpuctl_site_free(site);
	write_file(scratch(f, "bad.conf"), "busy_memory = lots\n");
	assert_int_equal(gpuctl_site_open(f->ctx, scratch(f, "bad.conf"), NULL, 0, &site), -EINVAL);
	assert_non_null(strstr(gpuctl_errmsg(f->ctx), "bad.conf:1"));
	assert_int_equal(gpuctl_site_open(f->ctx, NULL, NULL, 0x80, &site), -EINVAL);
	assert_int_equal(setenv("GPUCTL_LEASE_DIR", scratch(f, "leases"), 1), 0);
	assert_int_equal(setenv("GPUCTL_HEALTH_STATE", scratch(f, "health.state"), 1), 0);
	gpuctl_site_free(NULL);
}

/* gpuctl_site_lease_defaults: the configuration's thresholds, and only the caller's bytes. */
static void test_site_lease_defaults(void **state)
{
	struct fixture *f = *state;
	struct gpuctl_site *site = NULL;
	struct gpuctl_lease_request lreq = GPUCTL_LEASE_REQUEST_INIT;
	unsigned char buf[sizeof(struct gpuctl_lease_request) + 16];
	struct gpuctl_lease_request *old = (void *)buf;
	size_t v1 = offsetof(struct gpuctl_lease_request, share_mem);

	write_file(scratch(f, "busy.conf"), "busy_memory = 2GiB\nbusy_utilization = 30\n"
	                                    "share_margin = 1GiB\n");
	assert_int_equal(gpuctl_site_open(f->ctx, scratch(f, "busy.conf"), NULL,
	                                  GPUCTL_SITE_NO_LEASES, &site),
	                 0);
	assert_int_equal(gpuctl_site_lease_defaults(site, &lreq), 0);
	assert_int_equal(lreq.struct_size, sizeof(lreq));
	assert_int_equal(lreq.busy_memory, 2ull << 30);
	assert_int_equal(lreq.busy_utilization, 30);
	assert_int_equal(lreq.share_margin, 1ull << 30);
	assert_false(lreq.share_margin_is_pct);
	/* a caller built against the first release: nothing past its struct is written */
	memset(buf, 0xa5, sizeof(buf));
	old->struct_size = v1;
	assert_int_equal(gpuctl_site_lease_defaults(site, old), 0);
	assert_int_equal(old->struct_size, v1);
	assert_false(old->ignore_foreign);
	for (size_t i = v1; i < sizeof(buf); i++)
		assert_int_equal(buf[i], 0xa5);
	old->struct_size = v1 - 1;
	assert_int_equal(gpuctl_site_lease_defaults(site, old), -EINVAL);
	gpuctl_site_free(site);
}

/* gpuctl_foreign_scan without a lease directory: every process is foreign; the thresholds say
 * which devices are busy; indices out of range answer false. */
static void test_foreign_scan(void **state)
{
	struct fixture *f = *state;
	struct gpuctl_lease_request lreq = GPUCTL_LEASE_REQUEST_INIT;
	struct gpuctl_snapshot *snap = NULL, *bare = NULL;
	struct gpuctl_foreign *fs = NULL;
	char pid[24];

	(void)snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	assert_int_equal(
	        sim_nvsim(&f->sim, "proc", "add", "--pid", pid, "-i", "2", "--mem", "1GiB", NULL),
	        0);
	assert_int_equal(gpuctl_snapshot_take(f->ctx, GPUCTL_SNAP_PROCESSES, &snap), 0);
	assert_int_equal(gpuctl_gpu_proc_count(gpuctl_snapshot_gpu(snap, 2)), 1);
	assert_int_equal(gpuctl_foreign_scan(f->ctx, NULL, snap, NULL, &fs), 0);
	assert_true(gpuctl_foreign_proc(fs, 2, 0));
	assert_true(gpuctl_foreign_device(fs, 2, -1));
	assert_true(gpuctl_foreign_busy(fs, 2, -1));
	assert_false(gpuctl_foreign_device(fs, 3, -1));
	assert_false(gpuctl_foreign_proc(fs, 2, 1));
	assert_false(gpuctl_foreign_proc(fs, 7, 0));
	assert_false(gpuctl_foreign_proc(fs, 8, 0));
	assert_false(gpuctl_foreign_device(fs, 2, 0)); /* GPU 2 has no MIG device */
	assert_false(gpuctl_foreign_busy(fs, 99, -1));
	gpuctl_foreign_free(fs);
	/* 1 GiB is under a 2 GiB threshold: foreign, not busy */
	lreq.busy_memory = 2ull << 30;
	assert_int_equal(gpuctl_foreign_scan(f->ctx, NULL, snap, &lreq, &fs), 0);
	assert_true(gpuctl_foreign_device(fs, 2, -1));
	assert_false(gpuctl_foreign_busy(fs, 2, -1));
	gpuctl_foreign_free(fs);
	gpuctl_foreign_free(NULL);
	assert_int_equal(gpuctl_snapshot_take(f->ctx, GPUCTL_SNAP_BASIC, &bare), 0);
	assert_int_equal(gpuctl_foreign_scan(f->ctx, NULL, bare, NULL, &fs), -EINVAL);
	gpuctl_snapshot_free(bare);
	gpuctl_snapshot_free(snap);
}

/* Registers pid on GPU gpu with mem (nvsim proc add) and takes a snapshot of the processes. */
static struct gpuctl_snapshot *proc_snap(struct fixture *f, const char *pid, const char *gpu,
                                         const char *mem)
{
	struct gpuctl_snapshot *snap = NULL;

	assert_int_equal(
	        sim_nvsim(&f->sim, "proc", "add", "--pid", pid, "-i", gpu, "--mem", mem, NULL), 0);
	assert_int_equal(gpuctl_snapshot_take(f->ctx, GPUCTL_SNAP_PROCESSES, &snap), 0);
	return snap;
}

/* gpuctl_foreign_rejudge: a later snapshot of the same processes keeps each one's
 * classification and judges the devices again by its memory (here 1 GiB, then 3 GiB, against a
 * 2 GiB threshold); another process makes it -ESTALE, with nothing returned. */
static void test_foreign_rejudge(void **state)
{
	struct fixture *f = *state;
	struct gpuctl_lease_request lreq = GPUCTL_LEASE_REQUEST_INIT;
	struct gpuctl_snapshot *s1, *s2, *s3;
	struct gpuctl_foreign *fs = NULL, *again = NULL, *none = (struct gpuctl_foreign *)&lreq;
	char pid[24], ppid[24];

	(void)snprintf(pid, sizeof(pid), "%ld", (long)getpid());
	(void)snprintf(ppid, sizeof(ppid), "%ld", (long)getppid());
	lreq.busy_memory = 2ull << 30;
	s1 = proc_snap(f, pid, "2", "1GiB");
	assert_int_equal(gpuctl_foreign_scan(f->ctx, NULL, s1, &lreq, &fs), 0);
	assert_true(gpuctl_foreign_proc(fs, 2, 0));
	assert_false(gpuctl_foreign_busy(fs, 2, -1));
	/* the same process, now with 3 GiB */
	assert_int_equal(sim_nvsim(&f->sim, "proc", "rm", pid, NULL), 0);
	s2 = proc_snap(f, pid, "2", "3GiB");
	assert_int_equal(gpuctl_foreign_rejudge(f->ctx, fs, s2, &lreq, &again), 0);
	assert_true(gpuctl_foreign_proc(again, 2, 0));
	assert_true(gpuctl_foreign_device(again, 2, -1));
	assert_true(gpuctl_foreign_busy(again, 2, -1));
	assert_false(gpuctl_foreign_device(again, 3, -1));
	assert_false(gpuctl_foreign_busy(fs, 2, -1)); /* prev is not changed */
	gpuctl_foreign_free(again);
	/* one more process: not the same processes */
	s3 = proc_snap(f, ppid, "3", "1GiB");
	assert_int_equal(gpuctl_foreign_rejudge(f->ctx, fs, s3, &lreq, &none), -ESTALE);
	assert_ptr_equal(none, (struct gpuctl_foreign *)&lreq);
	gpuctl_foreign_free(fs);
	gpuctl_snapshot_free(s1);
	gpuctl_snapshot_free(s2);
	gpuctl_snapshot_free(s3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_request_init),
	        cmocka_unit_test_setup_teardown(test_choose, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_foreign_rejudge, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_bad_requests, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_no_driver, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_health_fail_is_never_chosen, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_outer_allocation, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_avoid, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_lease_and_leased, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_replace_keeps_what_it_chooses_again, setup,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_wait_ends, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_pool_refused, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_site, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_site_lease_defaults, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_foreign_scan, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
