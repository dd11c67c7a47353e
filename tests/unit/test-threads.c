// SPDX-License-Identifier: MIT
/*
 * test-threads.c: what gpuctl.h's "Thread safety and lifetimes" says, on the NVML simulator
 * (dgx-a100) and on synthetic lease directories:
 * - threads with a context each take snapshots, refresh, select, render and check health at
 *   once, and each context keeps its own error message;
 * - one snapshot, selection and configuration are read by every thread at once (const use);
 * - a snapshot, a selection, a device set, a health report, a configuration, an allocation, a
 *   site, a lease list and a lease outlive the context (and lease directory) they were made
 *   with (the ASan build turns a pointer into a freed context into a failure);
 * - threads sharing one lease directory never get one GPU twice.
 * Worker threads never call cmocka (its assertions jump out of the thread): they record the
 * first failure in their struct and the main thread asserts.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "gpuctl/gpuctl.h"
#include "snapshot-internal.h"
#include "test-fixtures.h"

#define N_THREADS 4
#define ROUNDS    50

/* What every thread must find, computed once by the main thread. */
struct reference {
	const struct gpuctl_snapshot *snap; /* shared, read by every thread */
	const struct gpuctl_selection *sel; /* shared */
	const struct gpuctl_config *cfg;    /* shared */
	char uuids[4096];                   /* the GPUs' UUIDs, comma-separated */
	char chosen[1024];                  /* gpuctl_select of 2 on snap, rendered (CUDA form) */
	int verdicts[16];                   /* gpuctl_health_check of snap, by GPU */
};

struct worker {
	pthread_t tid;
	size_t id;
	const struct reference *ref;
	char failed[512]; /* the first failure, "" when none */
};

static void fail_once(struct worker *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_once(struct worker *w, const char *fmt, ...)
{
	va_list ap;

	if (w->failed[0])
		return;
	va_start(ap, fmt);
	(void)vsnprintf(w->failed, sizeof(w->failed), fmt, ap);
	va_end(ap);
}

static int sim_env(void)
{
	const char *build = getenv("GPUCTL_BUILD_DIR"), *src = getenv("GPUCTL_SOURCE_DIR");
	char lib[4096], scen[4096];

	if (!build || !src)
		return -ENOENT;
	(void)snprintf(lib, sizeof(lib), "%s/sim/libnvidia-ml.so.1", build);
	(void)snprintf(scen, sizeof(scen), "%s/sim/scenarios/dgx-a100.json", src);
	if (access(lib, R_OK) < 0)
		return -ENOENT;
	/* before any thread starts: the environment is read, never written, while they run */
	setenv("GPUCTL_NVML_LIBRARY", lib, 1);
	setenv("NVSIM_SCENARIO", scen, 1);
	unsetenv("NVSIM_STATE_DIR");
	return 0;
}

static void uuids_of(const struct gpuctl_snapshot *snap, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < gpuctl_snapshot_gpu_count(snap); i++) {
		const char *u = gpuctl_gpu_str(gpuctl_snapshot_gpu(snap, i), GPUCTL_F_UUID);
		int n = snprintf(buf + len, size - len, "%s%s", i ? "," : "", u ? u : "?");

		if (n < 0 || (size_t)n >= size - len)
			return;
		len += (size_t)n;
	}
}

/* Renders sel's devices on snap in the CUDA form into buf; -errno. */
static int chosen_of(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                     const struct gpuctl_selection *sel, char *buf, size_t size)
{
	char *text = NULL;
	int r = gpuctl_devstr_render(ctx, snap, gpuctl_selection_devices(sel), GPUCTL_RENDER_CUDA,
	                             0, &text);

	if (r < 0)
		return r;
	(void)snprintf(buf, size, "%s", text);
	free(text);
	return 0;
}

static void work_round(struct worker *w, size_t round)
{
	const struct reference *ref = w->ref;
	struct gpuctl_select_request req = GPUCTL_SELECT_REQUEST_INIT;
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_snapshot *snap = NULL, *again = NULL;
	struct gpuctl_selection *sel = NULL;
	struct gpuctl_health_report *rep = NULL;
	size_t *idx = NULL, n_idx = 0, pool = 0;
	char buf[4096], bad[64];
	int r;

	if (gpuctl_ctx_new(&ctx) < 0) {
		fail_once(w, "gpuctl_ctx_new failed");
		return;
	}
	/* NVML through this thread's context */
	r = gpuctl_snapshot_take(ctx, GPUCTL_SNAP_BASIC | GPUCTL_SNAP_TOPOLOGY, &snap);
	if (r < 0) {
		fail_once(w, "snapshot: %s", gpuctl_errmsg(ctx));
		goto out;
	}
	uuids_of(snap, buf, sizeof(buf));
	if (strcmp(buf, ref->uuids) != 0)
		fail_once(w, "snapshot: UUIDs %s", buf);
	/* a refresh of the shared snapshot, taken by a context freed long ago */
	r = gpuctl_snapshot_refresh(ctx, ref->snap, 0, NULL, 0, &again);
	if (r < 0)
		fail_once(w, "refresh: %s", gpuctl_errmsg(ctx));
	else if (uuids_of(again, buf, sizeof(buf)), strcmp(buf, ref->uuids) != 0)
		fail_once(w, "refresh: UUIDs %s", buf);
	/* pure functions of the shared snapshot */
	req.count = 2;
	r = gpuctl_select(ctx, ref->snap, &req, &sel);
	if (r < 0 || chosen_of(ctx, ref->snap, sel, buf, sizeof(buf)) < 0 ||
	    strcmp(buf, ref->chosen) != 0)
		fail_once(w, "select: %d %s", r, r < 0 ? gpuctl_errmsg(ctx) : buf);
	if (chosen_of(ctx, ref->snap, ref->sel, buf, sizeof(buf)) < 0 ||
	    strcmp(buf, ref->chosen) != 0)
		fail_once(w, "render of the shared selection: %s", buf);
	r = gpuctl_health_check(ctx, ref->snap, NULL, NULL, &rep);
	if (r < 0)
		fail_once(w, "health: %s", gpuctl_errmsg(ctx));
	for (size_t i = 0; r >= 0 && i < gpuctl_snapshot_gpu_count(ref->snap); i++)
		if (gpuctl_health_verdict(rep, i) != ref->verdicts[i])
			fail_once(w, "health: GPU %zu verdict %d", i,
			          gpuctl_health_verdict(rep, i));
	r = gpuctl_config_pool_find(ctx, ref->cfg, "a", &pool);
	if (r < 0 || pool != 0)
		fail_once(w, "config: pool a: %d %s", r, gpuctl_errmsg(ctx));
	/* this context's error message is this thread's, whatever the others do meanwhile */
	(void)snprintf(bad, sizeof(bad), "nosuch-%zu-%zu", w->id, round);
	r = gpuctl_ids_resolve(ctx, ref->snap, bad, &idx, &n_idx);
	if (r != -EINVAL || !strstr(gpuctl_errmsg(ctx), bad))
		fail_once(w, "ids %s: %d '%s'", bad, r, gpuctl_errmsg(ctx));
	sched_yield();
	if (!strstr(gpuctl_errmsg(ctx), bad))
		fail_once(w, "error message changed under us: '%s'", gpuctl_errmsg(ctx));
out:
	free(idx);
	gpuctl_health_report_free(rep);
	gpuctl_selection_free(sel);
	gpuctl_snapshot_free(again);
	gpuctl_snapshot_free(snap);
	gpuctl_ctx_free(ctx);
}

static void *work(void *arg)
{
	struct worker *w = arg;

	for (size_t round = 0; round < ROUNDS && !w->failed[0]; round++)
		work_round(w, round);
	return NULL;
}

static const char config_text[] = "busy_memory = 1GiB\n[pool a]\ngpus = 0-3\n";

/* Contexts in several threads at once, around objects every thread reads. */
static void test_threads(void **state)
{
	struct reference ref;
	struct worker w[N_THREADS];
	struct gpuctl_select_request req = GPUCTL_SELECT_REQUEST_INIT;
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_snapshot *snap = NULL;
	struct gpuctl_selection *sel = NULL;
	struct gpuctl_config *cfg = NULL;
	struct gpuctl_health_report *rep = NULL;

	(void)state;
	if (sim_env() < 0)
		skip();
	memset(&ref, 0, sizeof(ref));
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	if (gpuctl_snapshot_take(ctx, GPUCTL_SNAP_ALL, &snap) < 0)
		fail_msg("snapshot: %s", gpuctl_errmsg(ctx));
	assert_int_equal(gpuctl_snapshot_gpu_count(snap), 8);
	req.count = 2;
	assert_int_equal(gpuctl_select(ctx, snap, &req, &sel), 0);
	assert_int_equal(chosen_of(ctx, snap, sel, ref.chosen, sizeof(ref.chosen)), 0);
	assert_int_equal(gpuctl_health_check(ctx, snap, NULL, NULL, &rep), 0);
	for (size_t i = 0; i < 8; i++)
		ref.verdicts[i] = gpuctl_health_verdict(rep, i);
	gpuctl_health_report_free(rep);
	assert_int_equal(gpuctl_config_parse(ctx, "t.conf", config_text, strlen(config_text), &cfg),
	                 0);
	uuids_of(snap, ref.uuids, sizeof(ref.uuids));
	/* the objects outlive the context that made them */
	gpuctl_ctx_free(ctx);
	ref.snap = snap;
	ref.sel = sel;
	ref.cfg = cfg;

	for (size_t i = 0; i < N_THREADS; i++) {
		w[i] = (struct worker){.id = i, .ref = &ref};
		assert_int_equal(pthread_create(&w[i].tid, NULL, work, &w[i]), 0);
	}
	for (size_t i = 0; i < N_THREADS; i++)
		assert_int_equal(pthread_join(w[i].tid, NULL), 0);
	for (size_t i = 0; i < N_THREADS; i++)
		if (w[i].failed[0])
			fail_msg("thread %zu: %s", i, w[i].failed);
	gpuctl_config_free(cfg);
	gpuctl_selection_free(sel);
	gpuctl_snapshot_free(snap);
}

/* What gpuctl_alloc, the site and a health report hand out outlives the context. */
static void test_alloc_outlives_context(void **state)
{
	struct gpuctl_alloc_request req = GPUCTL_ALLOC_REQUEST_INIT;
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_alloc *alloc = NULL;
	struct gpuctl_site *site = NULL;
	struct gpuctl_health_report *rep = NULL;
	char base[256], ldir[300], conf[300];
	const struct gpuctl_devset *set;
	FILE *f;

	(void)state;
	if (sim_env() < 0)
		skip();
	assert_int_equal(fixture_tmpdir("gpuctl-threads", base, sizeof(base), ldir, sizeof(ldir)),
	                 0);
	(void)snprintf(conf, sizeof(conf), "%s/gpuctl.conf", base);
	f = fopen(conf, "we");
	assert_non_null(f);
	assert_int_equal(fputs(config_text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
	setenv("GPUCTL_KMSG", "/dev/null", 1);
	(void)snprintf(ldir, sizeof(ldir), "%s/health.state", base);
	setenv("GPUCTL_HEALTH_STATE", ldir, 1);
	(void)snprintf(ldir, sizeof(ldir), "%s/d", base); /* missing: nothing leased */

	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	req.mode = GPUCTL_ALLOC_CHOOSE;
	req.count = 2;
	req.pool = "a";
	req.config_path = conf;
	req.lease_dir = ldir;
	req.ignore_outer = true;
	if (gpuctl_alloc(ctx, &req, &alloc) < 0)
		fail_msg("alloc: %s", gpuctl_errmsg(ctx));
	if (gpuctl_site_open(ctx, conf, ldir, 0, &site) < 0)
		fail_msg("site: %s", gpuctl_errmsg(ctx));
	if (gpuctl_site_health(ctx, site, gpuctl_alloc_snapshot(alloc), &rep) < 0)
		fail_msg("site health: %s", gpuctl_errmsg(ctx));
	gpuctl_ctx_free(ctx);

	set = gpuctl_alloc_devices(alloc);
	assert_int_equal(gpuctl_devset_count(set), 2);
	for (size_t i = 0; i < 2; i++) {
		size_t g;
		int m;

		assert_int_equal(gpuctl_devset_get(set, i, &g, &m), 0);
		assert_true(g < 4); /* pool a */
		assert_non_null(
		        strstr(gpuctl_alloc_cuda_visible_devices(alloc),
		               gpuctl_gpu_str(gpuctl_snapshot_gpu(gpuctl_alloc_snapshot(alloc), g),
		                              GPUCTL_F_UUID)));
	}
	assert_non_null(gpuctl_alloc_selection(alloc));
	assert_null(gpuctl_alloc_lease(alloc));
	assert_int_equal(gpuctl_config_pool_count(gpuctl_site_config(site)), 1);
	assert_null(gpuctl_site_lease_dir(site));
	assert_string_equal(gpuctl_site_lease_dir_path(site), ldir);
	assert_true(gpuctl_health_verdict(rep, 0) >= GPUCTL_HEALTH_OK);
	gpuctl_health_report_free(rep);
	gpuctl_site_free(site);
	gpuctl_alloc_free(alloc);
	unsetenv("GPUCTL_KMSG");
	unsetenv("GPUCTL_HEALTH_STATE");
	fixture_rm_rf(base);
}

/* A lease and a lease list outlive their context and lease directory. */
static void test_lease_outlives_context(void **state)
{
	struct gpuctl_select_request req = GPUCTL_SELECT_REQUEST_INIT;
	struct gpuctl_snapshot *snap = fixture_snap_n(4, GPUCTL_SNAP_BASIC);
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_lease_dir *dir;
	struct gpuctl_selection *sel = NULL;
	struct gpuctl_lease *lease = NULL;
	struct gpuctl_lease_list *list = NULL;
	enum gpuctl_lease_state st;
	char base[256], ldir[300];
	size_t gpu, held = 0;
	int fd, mig;

	(void)state;
	assert_int_equal(fixture_tmpdir("gpuctl-threads", base, sizeof(base), ldir, sizeof(ldir)),
	                 0);
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	dir = fixture_lease_dir(ctx, ldir);
	req.count = 1;
	if (gpuctl_select_and_lease(ctx, dir, snap, &req, NULL, &sel, &lease) < 0)
		fail_msg("lease: %s", gpuctl_errmsg(ctx));
	assert_int_equal(gpuctl_lease_list(ctx, dir, snap, &list), 0);
	gpuctl_lease_dir_free(dir);
	gpuctl_ctx_free(ctx);

	assert_int_equal(gpuctl_lease_fds(lease, &fd, 1), 1);
	assert_true(fcntl(fd, F_GETFD) >= 0);
	assert_int_equal(gpuctl_devset_get(gpuctl_selection_devices(sel), 0, &gpu, &mig), 0);
	assert_int_equal(gpuctl_lease_list_get(list, gpu, NULL, NULL, &st, NULL, NULL), 0);
	assert_int_equal(st, GPUCTL_LEASE_HELD);
	gpuctl_lease_list_free(list);
	list = NULL;
	/* another context and another handle on the directory still see it held */
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	dir = fixture_lease_dir(ctx, ldir);
	assert_int_equal(gpuctl_lease_set_owner(ctx, lease, 0, 0), 0);
	assert_int_equal(gpuctl_lease_list(ctx, dir, snap, &list), 0);
	for (size_t i = 0; i < gpuctl_lease_list_count(list); i++) {
		assert_int_equal(gpuctl_lease_list_get(list, i, NULL, NULL, &st, NULL, NULL), 0);
		held += st == GPUCTL_LEASE_HELD;
	}
	assert_int_equal(held, 1);
	gpuctl_lease_list_free(list);
	gpuctl_lease_free(lease);
	gpuctl_selection_free(sel);
	gpuctl_lease_dir_free(dir);
	gpuctl_ctx_free(ctx);
	gpuctl_snapshot_free(snap);
	fixture_rm_rf(base);
}

/* Threads that share one lease directory, each with its own context, lease one GPU each at
 * the same moment: select-and-lease is one critical section between threads as between
 * processes (each call locks its own description of DIR/select.lock). */
struct leaser {
	pthread_t tid;
	struct gpuctl_lease_dir *dir;
	const struct gpuctl_snapshot *snap;
	pthread_barrier_t *start;
	struct gpuctl_lease *lease;
	size_t gpu;
	char failed[512];
};

static void *take_one(void *arg)
{
	struct leaser *l = arg;
	struct gpuctl_select_request req = GPUCTL_SELECT_REQUEST_INIT;
	struct gpuctl_selection *sel = NULL;
	struct gpuctl_ctx *ctx = NULL;
	int mig;

	if (gpuctl_ctx_new(&ctx) < 0) {
		(void)snprintf(l->failed, sizeof(l->failed), "gpuctl_ctx_new failed");
		return NULL;
	}
	req.count = 1;
	(void)pthread_barrier_wait(l->start);
	if (gpuctl_select_and_lease(ctx, l->dir, l->snap, &req, NULL, &sel, &l->lease) < 0 ||
	    gpuctl_devset_get(gpuctl_selection_devices(sel), 0, &l->gpu, &mig) < 0)
		(void)snprintf(l->failed, sizeof(l->failed), "%s", gpuctl_errmsg(ctx));
	gpuctl_selection_free(sel);
	gpuctl_ctx_free(ctx);
	return NULL;
}

static void test_threads_share_a_lease_dir(void **state)
{
	enum { N = 8 };
	struct gpuctl_snapshot *snap = fixture_snap_n(N, GPUCTL_SNAP_BASIC);
	struct gpuctl_select_request req = GPUCTL_SELECT_REQUEST_INIT;
	struct gpuctl_selection *sel = NULL;
	struct gpuctl_lease *extra = NULL;
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_lease_dir *dir;
	struct leaser l[N];
	pthread_barrier_t start;
	char base[256], ldir[300];
	uint32_t seen = 0;

	(void)state;
	assert_int_equal(fixture_tmpdir("gpuctl-threads", base, sizeof(base), ldir, sizeof(ldir)),
	                 0);
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	dir = fixture_lease_dir(ctx, ldir);
	assert_int_equal(pthread_barrier_init(&start, NULL, N), 0);
	for (size_t i = 0; i < N; i++) {
		l[i] = (struct leaser){.dir = dir, .snap = snap, .start = &start};
		assert_int_equal(pthread_create(&l[i].tid, NULL, take_one, &l[i]), 0);
	}
	for (size_t i = 0; i < N; i++)
		assert_int_equal(pthread_join(l[i].tid, NULL), 0);
	for (size_t i = 0; i < N; i++) {
		if (l[i].failed[0])
			fail_msg("thread %zu: %s", i, l[i].failed);
		assert_false(seen & 1u << l[i].gpu); /* never one GPU twice */
		seen |= 1u << l[i].gpu;
	}
	assert_int_equal(seen, (1u << N) - 1);
	req.count = 1; /* and nothing is left */
	assert_int_equal(gpuctl_select_and_lease(ctx, dir, snap, &req, NULL, &sel, &extra),
	                 -ENOSPC);
	for (size_t i = 0; i < N; i++)
		gpuctl_lease_free(l[i].lease);
	assert_int_equal(pthread_barrier_destroy(&start), 0);
	gpuctl_lease_dir_free(dir);
	gpuctl_ctx_free(ctx);
	gpuctl_snapshot_free(snap);
	fixture_rm_rf(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_threads),
	        cmocka_unit_test(test_alloc_outlives_context),
	        cmocka_unit_test(test_lease_outlives_context),
	        cmocka_unit_test(test_threads_share_a_lease_dir),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
