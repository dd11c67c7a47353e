// SPDX-License-Identifier: MIT
/*
 * test-wait.c: waiting for leases (src/lib/lease/lease-queue.c, docs/leases.md "Waiting") on
 * synthetic snapshots and tickets written by hand under a mkdtemp lease directory: ticket names and
 * order, the content parser, the backfill rule (devices an older live waiter could use are its
 * own), dead tickets ignored (and removed for our own uid), malformed tickets conservative
 * ("could use any device"), a registered ticket behind older ones and ahead of younger ones,
 * and the change detector, which a close of a lock file found free does not wake.
 *
 * A ticket is live while some open file description holds a flock on it: the test holds one
 * itself (flock locks belong to the description, so the library's own probe conflicts).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "gpuctl/gpuctl.h"
#include "snapshot-internal.h"
#include "test-fixtures.h"

#define MAX_FDS 16

static char base[256];    /* this test's mkdtemp directory */
static char ldir[300];    /* base/d: the lease directory */
static int held[MAX_FDS]; /* ticket locks the test holds */
static size_t n_held;

static int setup(void **state)
{
	(void)state;
	n_held = 0;
	return fixture_tmpdir("gpuctl-wait", base, sizeof(base), ldir, sizeof(ldir));
}

static int teardown(void **state)
{
	(void)state;
	for (size_t i = 0; i < n_held; i++)
		(void)close(held[i]);
	fixture_rm_rf(base);
	return 0;
}

/* queue/<euid>/<name> with text; live: the test keeps a flock on it. */
static void ticket(const char *name, const char *text, bool live)
{
	char path[600];
	int fd;

	(void)snprintf(path, sizeof(path), "%s/queue/%u", ldir, (unsigned)geteuid());
	if (mkdir(path, 0755) < 0)
		assert_int_equal(errno, EEXIST);
	(void)snprintf(path, sizeof(path), "%s/queue/%u/%s", ldir, (unsigned)geteuid(), name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	if (live) {
		assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
		assert_true(n_held < MAX_FDS);
		held[n_held++] = fd;
	} else {
		(void)close(fd);
	}
}

static bool ticket_exists(const char *name)
{
	char path[600];
	struct stat st;

	(void)snprintf(path, sizeof(path), "%s/queue/%u/%s", ldir, (unsigned)geteuid(), name);
	return lstat(path, &st) == 0;
}

/* The chosen GPUs as a bit mask. */
static unsigned mask_of(const struct gpuctl_selection *sel)
{
	const struct gpuctl_devset *set = gpuctl_selection_devices(sel);
	unsigned m = 0;

	for (size_t i = 0; i < gpuctl_devset_count(set); i++) {
		size_t g;
		int mig;

		assert_int_equal(gpuctl_devset_get(set, i, &g, &mig), 0);
		m |= 1u << g;
	}
	return m;
}

static int lease(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                 const struct gpuctl_snapshot *snap, unsigned count, unsigned *ret_mask,
                 struct gpuctl_lease **ret_lease)
{
	struct gpuctl_select_request req = GPUCTL_SELECT_REQUEST_INIT;
	struct gpuctl_selection *sel = NULL;
	struct gpuctl_lease *l = NULL;
	int r;

	req.count = count;
	r = gpuctl_select_and_lease(ctx, dir, snap, &req, NULL, &sel, &l);
	if (r == 0) {
		*ret_mask = mask_of(sel);
		gpuctl_selection_free(sel);
		if (ret_lease)
			*ret_lease = l;
		else
			gpuctl_lease_free(l);
	}
	return r;
}

/* Names order the line: arrival, then uid, then pid; other names, dot names and dead tickets
 * are not in it; content is parsed or marked unreadable. */
static void test_list_order_and_parse(void **state)
{
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_lease_dir *dir;
	struct gpuctl_wait_list *list = NULL;
	const struct gpuctl_wait_entry *e;

	(void)state;
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	dir = fixture_lease_dir(ctx, ldir);
	ticket("10-100", "gpuctl-wait 1\ncount 1\n", true);
	ticket("2-300",
	       "gpuctl-wait 1\ncount 4\nonly 0,1\nnuma 1\nmax_util 50\n"
	       "min_free_mem 1024\nno_procs 1\nmig 1g.10gb\nexclude 3\nfuture x\n",
	       true);
	ticket("2-200", "not a ticket", true);
	ticket("5-400", "gpuctl-wait 1\ncount 1\n", false); /* dead */
	ticket("junk", "gpuctl-wait 1\ncount 1\n", true);
	ticket("7-", "gpuctl-wait 1\ncount 1\n", true);
	ticket(".new-9", "gpuctl-wait 1\ncount 1\n", true);
	ticket("3-0", "gpuctl-wait 1\ncount 1\n", true);            /* pid 0 */
	ticket("4-500", "gpuctl-wait 1\ncount 1\ncount 2\n", true); /* repeated key */
	assert_int_equal(gpuctl_wait_list(ctx, dir, &list), 0);
	assert_int_equal(gpuctl_wait_list_count(list), 4);
	e = gpuctl_wait_list_get(list, 0);
	assert_true(e->arrival == 2 && e->pid == 200 && !e->parsed);
	assert_int_equal(e->uid, geteuid());
	e = gpuctl_wait_list_get(list, 1);
	assert_true(e->arrival == 2 && e->pid == 300 && e->parsed);
	assert_int_equal(e->count, 4);
	assert_string_equal(e->only, "0,1");
	assert_string_equal(e->exclude, "3");
	assert_string_equal(e->mig_profile, "1g.10gb");
	assert_int_equal(e->numa_node, 1);
	assert_int_equal(e->max_util, 50);
	assert_true(e->min_free_mem == 1024 && e->no_procs);
	assert_true(e->since > 0);
	e = gpuctl_wait_list_get(list, 2);
	assert_true(e->arrival == 4 && e->pid == 500 && !e->parsed);
	e = gpuctl_wait_list_get(list, 3);
	assert_true(e->arrival == 10 && e->pid == 100 && e->parsed && e->count == 1);
	assert_int_equal(e->numa_node, -1);
	assert_int_equal(e->max_util, -1);
	assert_null(e->only);
	assert_null(gpuctl_wait_list_get(list, 4));
	gpuctl_wait_list_free(list);
	/* listing removes nothing, not even a dead ticket of ours */
	assert_true(ticket_exists("5-400"));
	gpuctl_lease_dir_free(dir);
	gpuctl_ctx_free(ctx);
}

/* An older waiter's devices are its own: a newcomer takes others, or waits. */
static void test_backfill(void **state)
{
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_snapshot *snap = fixture_snap_n(4, 0);
	struct gpuctl_lease_dir *dir;
	unsigned m = 0;

	(void)state;
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	dir = fixture_lease_dir(ctx, ldir);
	ticket("1-100", "gpuctl-wait 1\ncount 2\nonly 0,1\n", true);
	assert_int_equal(lease(ctx, dir, snap, 2, &m, NULL), 0);
	assert_int_equal(m, 0xcu); /* GPUs 2 and 3: 0 and 1 are the waiter's */
	assert_int_equal(lease(ctx, dir, snap, 3, &m, NULL), -ENOSPC);
	assert_non_null(strstr(gpuctl_errmsg(ctx), "1 waiter(s) ahead"));
	/* a MIG waiter does not hold up whole GPUs; --exclude leaves the rest to the waiter */
	ticket("0-102", "gpuctl-wait 1\ncount 1\nmig 1g.10gb\n", true);
	assert_int_equal(lease(ctx, dir, snap, 2, &m, NULL), 0);
	assert_int_equal(m, 0xcu);
	ticket("2-101", "gpuctl-wait 1\ncount 1\nexclude 0,1,2\n", true);
	assert_int_equal(lease(ctx, dir, snap, 2, &m, NULL), -ENOSPC); /* 3 is its */
	assert_int_equal(lease(ctx, dir, snap, 1, &m, NULL), 0);
	assert_int_equal(m, 0x4u); /* no waiter could use GPU 2 */
	gpuctl_snapshot_free(snap);
	gpuctl_lease_dir_free(dir);
	gpuctl_ctx_free(ctx);
}

/* A dead ticket (its lock free) holds nothing up, and our own goes with our next try. */
static void test_dead_ignored(void **state)
{
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_snapshot *snap = fixture_snap_n(4, 0);
	struct gpuctl_lease_dir *dir;
	unsigned m = 0;

	(void)state;
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	dir = fixture_lease_dir(ctx, ldir);
	ticket("1-100", "gpuctl-wait 1\ncount 4\n", false);
	ticket(".new-77", "", false); /* a registration that died before its rename */
	assert_int_equal(lease(ctx, dir, snap, 4, &m, NULL), 0);
	assert_int_equal(m, 0xfu);
	assert_false(ticket_exists("1-100"));
	assert_false(ticket_exists(".new-77"));
	gpuctl_snapshot_free(snap);
	gpuctl_lease_dir_free(dir);
	gpuctl_ctx_free(ctx);
}

/* A live ticket that cannot be read (or whose ids do not resolve) could use any device. */
static void test_malformed_conservative(void **state)
{
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_snapshot *snap = fixture_snap_n(4, 0);
	struct gpuctl_lease_dir *dir;
	unsigned m = 0;

	(void)state;
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	dir = fixture_lease_dir(ctx, ldir);
	ticket("1-100", "gpuctl-wait 1\ncount 1\nonly 0\n", true);
	assert_int_equal(lease(ctx, dir, snap, 3, &m, NULL), 0);
	assert_int_equal(m, 0xeu);
	ticket("2-100", "gpuctl-wait 1\ncount one\n", true);
	assert_int_equal(lease(ctx, dir, snap, 1, &m, NULL), -ENOSPC);
	gpuctl_snapshot_free(snap);
	snap = fixture_snap_n(8, 0);
	assert_int_equal(close(held[--n_held]), 0);                 /* 2-100 dies */
	ticket("3-100", "gpuctl-wait 1\ncount 1\nonly 99\n", true); /* no GPU 99 */
	assert_int_equal(lease(ctx, dir, snap, 1, &m, NULL), -ENOSPC);
	gpuctl_snapshot_free(snap);
	gpuctl_lease_dir_free(dir);
	gpuctl_ctx_free(ctx);
}

/* A registered ticket: behind the older, ahead of the younger; removed once it leases; the
 * change detector says whether another try could differ. */
static void test_registered_ticket(void **state)
{
	struct gpuctl_select_request req = GPUCTL_SELECT_REQUEST_INIT;
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_snapshot *snap = fixture_snap_n(4, 0);
	struct gpuctl_lease_dir *dir;
	struct gpuctl_wait_ticket *t = NULL;
	struct gpuctl_selection *sel = NULL;
	struct gpuctl_lease *l = NULL, *hold = NULL;
	struct gpuctl_wait_list *list = NULL;
	unsigned m = 0;
	char name[64];

	(void)state;
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	dir = fixture_lease_dir(ctx, ldir);
	ticket("5-100", "gpuctl-wait 1\ncount 1\nonly 0\n", true);
	assert_int_equal(lease(ctx, dir, snap, 3, &m, &hold), 0); /* 1-3 (0 is reserved) */
	assert_int_equal(m, 0xeu);
	req.count = 2;
	assert_int_equal(gpuctl_wait_ticket_new(ctx, dir, snap, &req, &t), 0);
	(void)snprintf(name, sizeof(name), "6-%d", (int)getpid()); /* highest present + 1 */
	assert_true(ticket_exists(name));
	ticket("7-100", "gpuctl-wait 1\ncount 4\n", true); /* younger, could use anything */
	assert_int_equal(gpuctl_wait_list(ctx, dir, &list), 0);
	assert_int_equal(gpuctl_wait_list_count(list), 3);
	assert_int_equal(gpuctl_wait_list_get(list, 1)->pid, (uint32_t)getpid());
	assert_int_equal(gpuctl_wait_list_get(list, 1)->count, 2);
	gpuctl_wait_list_free(list);
	/* nothing for us: 0 is the older waiter's, 1-3 are leased */
	/* nothing changed since the failed try: 0. (Other processes' flocks on the same file
	 * system count as changes: concurrent tests may make one, so try a few times.) */
	for (int i = 0;; i++) {
		assert_int_equal(
		        gpuctl_select_and_lease_queued(ctx, dir, snap, &req, NULL, t, &sel, &l),
		        -ENOSPC);
		if (gpuctl_wait_ticket_changed(ctx, dir, t) == 0)
			break;
		assert_true(i < 20);
	}
	gpuctl_lease_free(hold); /* 1-3 come free */
	assert_int_equal(gpuctl_wait_ticket_changed(ctx, dir, t), 1);
	assert_int_equal(gpuctl_select_and_lease_queued(ctx, dir, snap, &req, NULL, t, &sel, &l),
	                 0);
	assert_int_equal(mask_of(sel) & 0x1u, 0u);
	assert_false(ticket_exists(name));
	gpuctl_selection_free(sel);
	gpuctl_lease_free(l);
	gpuctl_wait_ticket_free(t);
	gpuctl_snapshot_free(snap);
	gpuctl_lease_dir_free(dir);
	gpuctl_ctx_free(ctx);
}

/* Opens and closes DIR/locks/<uuid of GPU i>.lock, as another gpuctl's probe does. */
static void probe_close(size_t i)
{
	char path[600];
	int fd;

	(void)snprintf(path, sizeof(path), "%s/locks/%s.lock", ldir, fixture_uuid_of(i));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	(void)close(fd);
}

/* The close of a lock file the last failed try found free is no reason to look again (the
 * device was free already; a waiter waits for more to come free), so the waiter does not even
 * take select.lock; the close of one it found held is. The test holds select.lock itself: a
 * waiter that looks fails to get it within its bound (-EAGAIN). */
static void test_free_lock_closes_wake_no_one(void **state)
{
	struct gpuctl_select_request req = GPUCTL_SELECT_REQUEST_INIT;
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_snapshot *snap = fixture_snap_n(4, 0);
	struct gpuctl_lease_dir *dir;
	struct gpuctl_wait_ticket *t = NULL;
	struct gpuctl_selection *sel = NULL;
	struct gpuctl_lease *l = NULL, *hold = NULL;
	unsigned m = 0;
	size_t free_gpu = 4, held_gpu = 4;
	char path[600];
	int sfd;

	(void)state;
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	assert_int_equal(gpuctl_ctx_set_lock_wait(ctx, 0.05), 0);
	dir = fixture_lease_dir(ctx, ldir);
	assert_true(gpuctl_lease_dir_init(ctx, dir, snap) >=
	            0); /* every lock file, as lease init */
	assert_int_equal(lease(ctx, dir, snap, 3, &m, &hold), 0);
	for (size_t i = 0; i < 4; i++)
		*(m & (1u << i) ? &held_gpu : &free_gpu) = i;
	assert_true(free_gpu < 4 && held_gpu < 4);
	req.count = 2; /* one GPU is free: not enough */
	assert_int_equal(gpuctl_wait_ticket_new(ctx, dir, snap, &req, &t), 0);
	assert_int_equal(gpuctl_select_and_lease_queued(ctx, dir, snap, &req, NULL, t, &sel, &l),
	                 -ENOSPC);
	gpuctl_wait_ticket_drain(t, dir); /* what the try itself did */

	(void)snprintf(path, sizeof(path), "%s/select.lock", ldir);
	sfd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(sfd >= 0);
	assert_int_equal(flock(sfd, LOCK_EX | LOCK_NB), 0);

	/* gpuctl_wait_ticket_fd, as a program with its own event loop polls it: quiet once
	 * drained, readable when a lock file is closed, quiet again once drained */
	assert_true(gpuctl_wait_ticket_fd(t) >= 0);
	assert_int_equal(gpuctl_wait_ticket_fd(NULL), -1);
	assert_int_equal(
	        poll(&(struct pollfd){.fd = gpuctl_wait_ticket_fd(t), .events = POLLIN}, 1, 0), 0);
	probe_close(free_gpu);
	assert_int_equal(
	        poll(&(struct pollfd){.fd = gpuctl_wait_ticket_fd(t), .events = POLLIN}, 1, 1000),
	        1);
	gpuctl_wait_ticket_drain(t, dir);
	assert_int_equal(
	        poll(&(struct pollfd){.fd = gpuctl_wait_ticket_fd(t), .events = POLLIN}, 1, 0), 0);
	assert_int_equal(gpuctl_wait_ticket_changed(ctx, dir, t), 0); /* select.lock untouched */

	probe_close(held_gpu);
	gpuctl_wait_ticket_drain(t, dir);
	assert_int_equal(gpuctl_wait_ticket_changed(ctx, dir, t), -EAGAIN); /* it looked */

	(void)close(sfd);
	gpuctl_lease_free(hold);
	gpuctl_wait_ticket_free(t);
	gpuctl_snapshot_free(snap);
	gpuctl_lease_dir_free(dir);
	gpuctl_ctx_free(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_list_order_and_parse, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_backfill, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_dead_ignored, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_malformed_conservative, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_registered_ticket, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_free_lock_closes_wake_no_one, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
