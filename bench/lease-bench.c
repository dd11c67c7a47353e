// SPDX-License-Identifier: MIT
/*
 * lease-bench.c: what a lease costs (docs/leases.md), on the simulated DGX A100 (8 GPUs).
 *
 * Prints a Markdown table:
 * - acquire + release: gpuctl_select_and_lease() for 1 GPU then gpuctl_lease_free(), one
 *   requester, median and 99th percentile;
 * - throughput: 64 requester processes started together, each taking and releasing 1 GPU in a
 *   loop for a fixed time; grants per second in total, and how many requests found every GPU
 *   leased at that moment (-ENOSPC).
 * - release-to-start latency of a waiter: GPU 0 held here; a waiter process (registered ticket,
 *   asking for GPU 0, asleep in poll(2) on its inotify descriptor as `gpuctl run --wait` is)
 *   reports the moment it holds the lease; from our release to then, median of WAIT_ROUNDS.
 *   The library's part only: the CLI retakes its snapshot before each retry on top of this.
 * - shared acquire + release: a 1 GiB shared lease on GPU 0 beside SHARERS others (the cost of
 *   counting the declared memory from the kernel's locks).
 * The lease directory is made under /dev/shm when it exists: /run/gpuctl, the default, is a
 * tmpfs too, so a disk's fsync cost would misstate the real one.
 *
 * Usage: lease-bench [ROUNDS] [SECONDS] (defaults 2000 and 2). Needs the simulator built next
 * to it.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpuctl/gpuctl.h"

#define REQUESTERS  64
#define WAIT_ROUNDS 50

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static struct gpuctl_snapshot *load(struct gpuctl_ctx *ctx)
{
	char lib[4096], scen[4096];
	struct gpuctl_snapshot *snap = NULL;
	int w1 = snprintf(lib, sizeof(lib), "%s/sim/libnvidia-ml.so.1", GPUCTL_BENCH_BUILD_DIR);
	int w2 = snprintf(scen, sizeof(scen), "%s/sim/scenarios/dgx-a100.json",
	                  GPUCTL_BENCH_SOURCE_DIR);

	if (w1 < 0 || (size_t)w1 >= sizeof(lib) || w2 < 0 || (size_t)w2 >= sizeof(scen))
		return NULL;
	setenv("GPUCTL_NVML_LIBRARY", lib, 1);
	setenv("NVSIM_SCENARIO", scen, 1);
	unsetenv("NVSIM_STATE_DIR");
	if (gpuctl_snapshot_take(ctx, GPUCTL_SNAP_ALL, &snap) < 0) {
		fprintf(stderr, "lease-bench: %s\n", gpuctl_errmsg(ctx));
		return NULL;
	}
	return snap;
}

/* A lease of 1 GPU (share > 0: a shared lease of that many bytes on GPU 0). 0, -ENOSPC when
 * nothing qualifies, or another error; *ret (may be NULL: released at once) gets the lease. */
static int take(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                const struct gpuctl_snapshot *snap, uint64_t share, struct gpuctl_lease **ret)
{
	struct gpuctl_select_request req = GPUCTL_SELECT_REQUEST_INIT;
	struct gpuctl_lease_request lreq = GPUCTL_LEASE_REQUEST_INIT;
	struct gpuctl_selection *sel = NULL;
	struct gpuctl_lease *lease = NULL;
	int r;

	req.count = 1;
	if (share) {
		req.only = "0";
		lreq.share_mem = share;
	}
	lreq.command = "lease-bench";
	r = gpuctl_select_and_lease(ctx, dir, snap, &req, &lreq, &sel, &lease);
	gpuctl_selection_free(sel);
	if (ret)
		*ret = lease;
	else
		gpuctl_lease_free(lease);
	return r;
}

/* One acquire + release of 1 GPU. */
static int take_one(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                    const struct gpuctl_snapshot *snap)
{
	return take(ctx, dir, snap, 0, NULL);
}

/* Median us of a shared 1 GiB acquire + release on GPU 0 while SHARERS other shared leases of
 * 4 GiB hold it (every acquire scans their ranges with F_OFD_GETLK); -1 on failure. */
#define SHARERS 15
static double shared_latency(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                             const struct gpuctl_snapshot *snap, long rounds)
{
	struct gpuctl_lease *held[SHARERS] = {0};
	double *t = calloc((size_t)rounds, sizeof(*t)), median = -1;
	long done = 0;

	for (int i = 0; t && i < SHARERS; i++)
		if (take(ctx, dir, snap, 4ull << 30, &held[i]) != 0)
			goto out;
	for (; t && done < rounds; done++) {
		double t0 = now_us();

		if (take(ctx, dir, snap, 1ull << 30, NULL) != 0)
			goto out;
		t[done] = now_us() - t0;
	}
	qsort(t, (size_t)rounds, sizeof(*t), cmp_double);
	median = t[rounds / 2];
out:
	for (int i = 0; i < SHARERS; i++)
		gpuctl_lease_free(held[i]);
	free(t);
	return median;
}

/* A requester: loops until the deadline, then writes "grants rejected" to fd. */
static void requester(struct gpuctl_lease_dir *dir, const struct gpuctl_snapshot *snap,
                      double deadline, int fd)
{
	struct gpuctl_ctx *ctx = NULL;
	unsigned long grants = 0, rejected = 0;
	char line[64];
	int n;

	if (gpuctl_ctx_new(&ctx) < 0)
		_exit(1);
	while (now_us() < deadline) {
		int r = take_one(ctx, dir, snap);

		if (r == 0)
			grants++;
		else if (r == -ENOSPC)
			rejected++;
		else
			_exit(2);
	}
	n = snprintf(line, sizeof(line), "%lu %lu\n", grants, rejected);
	if (n > 0 && write(fd, line, (size_t)n) != n)
		_exit(3);
	gpuctl_ctx_free(ctx);
	_exit(0);
}

/* Takes GPU 0 (only). */
static int take_gpu0(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                     const struct gpuctl_snapshot *snap, struct gpuctl_wait_ticket *t,
                     struct gpuctl_lease **ret_lease)
{
	struct gpuctl_select_request req = GPUCTL_SELECT_REQUEST_INIT;
	struct gpuctl_selection *sel = NULL;
	int r;

	req.count = 1;
	req.only = "0";
	r = t ? gpuctl_select_and_lease_queued(ctx, dir, snap, &req, NULL, t, &sel, ret_lease)
	      : gpuctl_select_and_lease(ctx, dir, snap, &req, NULL, &sel, ret_lease);
	gpuctl_selection_free(sel);
	return r;
}

/* The waiter: registers, tries, says "waiting" (one byte on fd), sleeps on inotify until a
 * try succeeds, then writes the time it got the lease. */
static void waiter(struct gpuctl_lease_dir *dir, const struct gpuctl_snapshot *snap, int fd)
{
	struct gpuctl_select_request req = GPUCTL_SELECT_REQUEST_INIT;
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_wait_ticket *t = NULL;
	struct gpuctl_lease *lease = NULL;
	double got;
	bool told = false;

	req.count = 1;
	req.only = "0";
	if (gpuctl_ctx_new(&ctx) < 0 || gpuctl_wait_ticket_new(ctx, dir, snap, &req, &t) < 0)
		_exit(1);
	while (take_gpu0(ctx, dir, snap, t, &lease) != 0) {
		struct pollfd p = {.fd = gpuctl_wait_ticket_fd(t), .events = POLLIN};

		if (!told && write(fd, "w", 1) != 1)
			_exit(2);
		told = true;
		while (poll(&p, 1, 2000) > 0) { /* a timeout retries, as the CLI does */
			gpuctl_wait_ticket_drain(t, dir);
			if (gpuctl_wait_ticket_changed(ctx, dir, t) != 0)
				break;
		}
	}
	got = now_us();
	if (write(fd, &got, sizeof(got)) != (ssize_t)sizeof(got))
		_exit(3);
	gpuctl_lease_free(lease);
	gpuctl_wait_ticket_free(t);
	gpuctl_ctx_free(ctx);
	_exit(0);
}

/* Release-to-start latency of a waiter, median in us; < 0 on failure. */
static double wait_latency(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                           const struct gpuctl_snapshot *snap)
{
	double lat[WAIT_ROUNDS];

	for (int i = 0; i < WAIT_ROUNDS; i++) {
		struct gpuctl_lease *held = NULL;
		int p[2], st = 0;
		char c;
		double got = 0, t0;
		pid_t pid;

		if (take_gpu0(ctx, dir, snap, NULL, &held) < 0 || pipe2(p, O_CLOEXEC) < 0)
			return -1;
		pid = fork();
		if (pid < 0)
			return -1;
		if (pid == 0) {
			close(p[0]);
			gpuctl_lease_free(held); /* our copy of the parent's lock descriptors */
			waiter(dir, snap, p[1]);
		}
		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			return -1;
		usleep(20000); /* let it reach poll(2) */
		t0 = now_us();
		gpuctl_lease_free(held);
		if (read(p[0], &got, sizeof(got)) != (ssize_t)sizeof(got))
			return -1;
		close(p[0]);
		if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			return -1;
		lat[i] = got - t0;
	}
	qsort(lat, WAIT_ROUNDS, sizeof(lat[0]), cmp_double);
	return lat[WAIT_ROUNDS / 2];
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 2000;
	long seconds = argc > 2 ? strtol(argv[2], NULL, 10) : 2;
	char tmpl[] = "/dev/shm/gpuctl-lease-bench-XXXXXX",
	     tmpl2[] = "/tmp/gpuctl-lease-bench-XXXXXX";
	const char *base = access("/dev/shm", W_OK) == 0 ? mkdtemp(tmpl) : mkdtemp(tmpl2);
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_snapshot *snap = NULL;
	struct gpuctl_lease_dir *dir = NULL;
	char path[4096], cmd[4200];
	double *t = NULL;
	int pipefd[2] = {-1, -1}, status = 1;

	if (rounds < 1 || seconds < 1 || !base || gpuctl_ctx_new(&ctx) < 0)
		return 1;
	if (snprintf(path, sizeof(path), "%s/leases", base) >= (int)sizeof(path))
		goto out;
	snap = load(ctx);
	if (!snap || gpuctl_lease_dir_open(ctx, path, &dir) < 0 ||
	    gpuctl_lease_dir_init(ctx, dir, snap) < 0) {
		fprintf(stderr, "lease-bench: %s\n", gpuctl_errmsg(ctx));
		goto out;
	}
	t = calloc((size_t)rounds, sizeof(*t));
	if (!t)
		goto out;
	for (long i = 0; i < rounds; i++) {
		double t0 = now_us();

		if (take_one(ctx, dir, snap) != 0) {
			fprintf(stderr, "lease-bench: %s\n", gpuctl_errmsg(ctx));
			goto out;
		}
		t[i] = now_us() - t0;
	}
	qsort(t, (size_t)rounds, sizeof(*t), cmp_double);

	/* 64 requesters at once on 8 GPUs */
	unsigned long grants = 0, rejected = 0;
	double deadline;
	int failed = 0;

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		goto out;
	deadline = now_us() + 1e6 * (double)seconds;
	for (int i = 0; i < REQUESTERS; i++) {
		pid_t pid = fork();

		if (pid < 0)
			goto out;
		if (pid == 0)
			requester(dir, snap, deadline, pipefd[1]);
	}
	close(pipefd[1]);
	pipefd[1] = -1;
	for (int i = 0; i < REQUESTERS; i++) {
		int st = 0;

		if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			failed++;
	}
	{
		char buf[REQUESTERS * 64 + 1];
		size_t len = 0;
		ssize_t n;

		while (len < sizeof(buf) - 1 &&
		       (n = read(pipefd[0], buf + len, sizeof(buf) - 1 - len)) > 0)
			len += (size_t)n;
		buf[len] = '\0';
		for (char *p = buf; *p;) {
			char *end;
			unsigned long g = strtoul(p, &end, 10), rj = strtoul(end, &end, 10);

			if (end == p)
				break;
			grants += g;
			rejected += rj;
			p = end;
			while (*p == '\n')
				p++;
		}
	}
	if (failed) {
		fprintf(stderr, "lease-bench: %d requesters failed\n", failed);
		goto out;
	}
	double wl = wait_latency(ctx, dir, snap);
	double sl = wl < 0 ? -1 : shared_latency(ctx, dir, snap, rounds);

	if (wl < 0 || sl < 0) {
		fprintf(stderr, "lease-bench: %s failed: %s\n", wl < 0 ? "waiter" : "shared lease",
		        gpuctl_errmsg(ctx));
		goto out;
	}
	printf("| measure | value |\n|---|---:|\n");
	printf("| acquire + release, 1 GPU, one requester: median | %.0f us |\n", t[rounds / 2]);
	printf("| acquire + release, 1 GPU, one requester: 99th percentile | %.0f us |\n",
	       t[(size_t)((double)rounds * 0.99)]);
	printf("| %d requesters on 8 GPUs for %ld s: grants per second | %.0f |\n", REQUESTERS,
	       seconds, (double)grants / (double)seconds);
	printf("| ... requests that found every GPU leased | %lu |\n", rejected);
	printf("| release to start of a waiter (inotify), median of %d | %.0f us |\n", WAIT_ROUNDS,
	       wl);
	printf("| shared acquire + release (1 GiB) beside %d shared leases on one GPU: median | "
	       "%.0f us |\n",
	       SHARERS, sl);
	printf("| lease directory | %s |\n", strncmp(base, "/dev/shm", 8) == 0 ? "tmpfs" : "/tmp");
	status = 0;
out:
	if (pipefd[0] >= 0)
		close(pipefd[0]);
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	free(t);
	gpuctl_lease_dir_free(dir);
	gpuctl_snapshot_free(snap);
	gpuctl_ctx_free(ctx);
	if (base && snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base) < (int)sizeof(cmd))
		status |= system(cmd) != 0;
	return status;
}
