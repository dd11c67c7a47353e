// SPDX-License-Identifier: MIT
/*
 * test-lease.c: leases (src/lib/lease/lease*.c) on synthetic snapshots and lease directories under
 * mkdtemp: directory creation and checks, unusable lock files, select-and-lease from one
 * process and from concurrent children, a lease surviving its taker, owner records (robust
 * parsing, owner fields), foreign processes, release, shared leases (declared memory), and
 * the holders of a lock found through /proc/PID/fdinfo.
 *
 * Decisions:
 * - Children report through pipes and _exit(); they never call cmocka. A barrier pipe starts
 *   the concurrent children together; they hold their leases until the parent has every report.
 * - Tests that need another uid (chown, setresuid) run only as root and are skipped otherwise.
 * - The test process becomes a child subreaper, so a grandchild (the exec'ed sleeper) can be
 *   reaped. Fixed seeds; every wait is bounded.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "gpuctl/gpuctl.h"
#include "lease-internal.h"
#include "snapshot-internal.h"
#include "test-fixtures.h"

#define OTHER_UID 12345u

static char base[256]; /* this test's mkdtemp directory */
static char ldir[300]; /* base/d: the lease directory */

static int setup(void **state)
{
	(void)state;
	return fixture_tmpdir("gpuctl-lease", base, sizeof(base), ldir, sizeof(ldir));
}

static int teardown(void **state)
{
	(void)state;
	fixture_rm_rf(base);
	return 0;
}

static char *pathf(const char *fmt, ...)
{
	static char p[4][600];
	static int k;
	va_list ap;

	k = (k + 1) % 4;
	va_start(ap, fmt);
	(void)vsnprintf(p[k], sizeof(p[k]), fmt, ap);
	va_end(ap);
	return p[k];
}

static mode_t mode_of(const char *path)
{
	struct stat st;

	assert_int_equal(lstat(path, &st), 0);
	return st.st_mode & 07777;
}

/* select_and_lease of count GPUs; returns r, *mask the chosen GPUs. */
static int take(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *d, const struct gpuctl_snapshot *s,
                unsigned count, bool ignore_foreign, uint32_t *mask, struct gpuctl_lease **ret)
{
	struct gpuctl_select_request req = GPUCTL_SELECT_REQUEST_INIT;
	struct gpuctl_lease_request lr = GPUCTL_LEASE_REQUEST_INIT;
	struct gpuctl_selection *sel = NULL;
	int r;

	req.count = count;
	lr.command = "train.py --x \"q\"\nnext";
	lr.label = "lbl";
	lr.ignore_foreign = ignore_foreign;
	r = gpuctl_select_and_lease(ctx, d, s, &req, &lr, &sel, ret);
	if (r < 0)
		return r;
	*mask = 0;
	for (size_t i = 0; i < gpuctl_devset_count(gpuctl_selection_devices(sel)); i++) {
		size_t g;
		int m;

		assert_int_equal(gpuctl_devset_get(gpuctl_selection_devices(sel), i, &g, &m), 0);
		*mask |= 1u << g;
	}
	gpuctl_selection_free(sel);
	return r;
}

/* The owner state_of saw last (its list is freed before it returns). */
static uint32_t last_owner_pid;
static bool last_owner_labelled;

static enum gpuctl_lease_state state_of(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *d,
                                        const struct gpuctl_snapshot *s, size_t gpu,
                                        const struct gpuctl_lease_owner **owner_copy_pid)
{
	struct gpuctl_lease_list *l = NULL;
	enum gpuctl_lease_state st = GPUCTL_LEASE_FREE;
	const struct gpuctl_lease_owner *o = NULL;

	assert_int_equal(gpuctl_lease_list(ctx, d, s, &l), 0);
	for (size_t i = 0; i < gpuctl_lease_list_count(l); i++) {
		size_t g;
		int m;
		enum gpuctl_lease_state x;

		assert_int_equal(gpuctl_lease_list_get(l, i, &g, &m, &x, &o, NULL), 0);
		if (g == gpu && m < 0) {
			st = x;
			break;
		}
	}
	if (owner_copy_pid)
		*owner_copy_pid = o ? (const struct gpuctl_lease_owner *)1 : NULL;
	last_owner_pid = o ? o->pid : 0;
	last_owner_labelled = o && o->label;
	gpuctl_lease_list_free(l);
	return st;
}

static void test_dir_create(void **state)
{
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_lease_dir *d = NULL;
	mode_t old = umask(077);

	(void)state;
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	d = fixture_lease_dir(ctx, ldir);
	umask(old);
	assert_string_equal(gpuctl_lease_dir_path(d), ldir);
	assert_int_equal(mode_of(ldir), 0755);
	assert_int_equal(mode_of(pathf("%s/locks", ldir)), 0755);
	assert_int_equal(mode_of(pathf("%s/select.lock", ldir)), 0644);
	assert_int_equal(mode_of(pathf("%s/owners", ldir)), geteuid() == 0 ? 01777 : 0755);
	gpuctl_lease_dir_free(d);
	/* reopening an existing directory works; so does $GPUCTL_LEASE_DIR */
	setenv("GPUCTL_LEASE_DIR", ldir, 1);
	assert_int_equal(gpuctl_lease_dir_open(ctx, NULL, &d), 0);
	unsetenv("GPUCTL_LEASE_DIR");
	gpuctl_lease_dir_free(d);
	/* missing parents below a directory of ours ($HOME/.cache/gpuctl without ~/.cache):
	 * created, mode 0700 (0755 for root) whatever the umask (docs/leases.md) */
	old = umask(0777);
	assert_int_equal(gpuctl_lease_dir_open(ctx, pathf("%s/home/.cache/gpuctl", base), &d), 0);
	umask(old);
	assert_int_equal(mode_of(pathf("%s/home", base)), geteuid() == 0 ? 0755 : 0700);
	assert_int_equal(mode_of(pathf("%s/home/.cache", base)), geteuid() == 0 ? 0755 : 0700);
	assert_int_equal(mode_of(pathf("%s/home/.cache/gpuctl", base)), 0755);
	gpuctl_lease_dir_free(d);
	/* missing parents below a directory of another user's: refused, nothing created (for
	 * root, any path through another user's directory is: root_path_check) */
	if (geteuid() == 0) {
		assert_int_equal(mkdir(pathf("%s/theirs", base), 0755), 0);
		assert_int_equal(chown(pathf("%s/theirs", base), 65534, 65534), 0);
		assert_int_equal(gpuctl_lease_dir_open(ctx, pathf("%s/theirs/no/such", base), &d),
		                 -EPERM);
		assert_non_null(strstr(gpuctl_errmsg(ctx), "another user can change"));
		assert_int_equal(access(pathf("%s/theirs/no", base), F_OK), -1);
	} else {
		assert_int_equal(gpuctl_lease_dir_open(ctx, "/gpuctl-test-no-such/leases", &d),
		                 -ENOENT);
		assert_non_null(strstr(gpuctl_errmsg(ctx), "gpuctl lease init"));
	}
	gpuctl_ctx_free(ctx);
}

static void expect_eperm(struct gpuctl_ctx *ctx, const char *path, const char *what)
{
	struct gpuctl_lease_dir *d = NULL;

	assert_int_equal(gpuctl_lease_dir_open(ctx, path, &d), -EPERM);
	assert_null(d);
	if (!strstr(gpuctl_errmsg(ctx), what))
		fail_msg("'%s' lacks '%s'", gpuctl_errmsg(ctx), what);
}

static void test_dir_unsafe(void **state)
{
	struct gpuctl_ctx *ctx = NULL;

	(void)state;
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	gpuctl_lease_dir_free(fixture_lease_dir(ctx, ldir));
	assert_int_equal(symlink(ldir, pathf("%s/link", base)), 0);
	expect_eperm(ctx, pathf("%s/link", base), "symlink");
	assert_int_equal(chmod(ldir, 0775), 0);
	expect_eperm(ctx, ldir, "writable by group or others");
	assert_int_equal(chmod(ldir, 0757), 0);
	expect_eperm(ctx, ldir, "writable by group or others");
	assert_int_equal(chmod(ldir, 0755), 0);
	/* locks/ a symlink; select.lock a directory */
	assert_int_equal(rename(pathf("%s/locks", ldir), pathf("%s/locks2", ldir)), 0);
	assert_int_equal(symlink("locks2", pathf("%s/locks", ldir)), 0);
	expect_eperm(ctx, ldir, "symlink");
	assert_int_equal(unlink(pathf("%s/locks", ldir)), 0);
	assert_int_equal(rename(pathf("%s/locks2", ldir), pathf("%s/locks", ldir)), 0);
	assert_int_equal(unlink(pathf("%s/select.lock", ldir)), 0);
	assert_int_equal(mkdir(pathf("%s/select.lock", ldir), 0755), 0);
	expect_eperm(ctx, ldir, "not a regular file");
	assert_int_equal(rmdir(pathf("%s/select.lock", ldir)), 0);
	gpuctl_lease_dir_free(fixture_lease_dir(ctx, ldir)); /* recreated */
	if (geteuid() == 0) {
		assert_int_equal(chown(ldir, OTHER_UID, 0), 0);
		expect_eperm(ctx, ldir, "owned by uid 12345");
		assert_int_equal(chown(ldir, 0, 0), 0);
		assert_int_equal(chmod(pathf("%s/owners", ldir), 0777), 0);
		expect_eperm(ctx, ldir, "writable by group or others");
		assert_int_equal(chmod(pathf("%s/owners", ldir), 01777), 0);
	}
	gpuctl_lease_dir_free(fixture_lease_dir(ctx, ldir));
	gpuctl_ctx_free(ctx);
}

static void test_lockfile_unusable(void **state)
{
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_lease_dir *d = NULL;
	struct gpuctl_snapshot *s = fixture_snap_n(5, GPUCTL_SNAP_BASIC);
	struct gpuctl_lease_list *l = NULL;
	struct gpuctl_lease *lease = NULL;
	uint32_t mask = 0;
	size_t n_bad = geteuid() == 0 ? 4 : 3;

	(void)state;
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	d = fixture_lease_dir(ctx, ldir);
	assert_int_equal(gpuctl_lease_dir_init(ctx, d, s), 5);
	assert_int_equal(gpuctl_lease_dir_init(ctx, d, s), 0);
	/* 0: a symlink, 1: a directory, 2: two links, 3: another owner (root only) */
	assert_int_equal(unlink(pathf("%s/locks/%s.lock", ldir, fixture_uuid_of(0))), 0);
	assert_int_equal(
	        symlink("../select.lock", pathf("%s/locks/%s.lock", ldir, fixture_uuid_of(0))), 0);
	assert_int_equal(unlink(pathf("%s/locks/%s.lock", ldir, fixture_uuid_of(1))), 0);
	assert_int_equal(mkdir(pathf("%s/locks/%s.lock", ldir, fixture_uuid_of(1)), 0755), 0);
	assert_int_equal(
	        link(pathf("%s/locks/%s.lock", ldir, fixture_uuid_of(2)), pathf("%s/x", ldir)), 0);
	if (geteuid() == 0)
		assert_int_equal(
		        chown(pathf("%s/locks/%s.lock", ldir, fixture_uuid_of(3)), OTHER_UID, 0),
		        0);

	assert_int_equal(gpuctl_lease_list(ctx, d, s, &l), 0);
	assert_int_equal(gpuctl_lease_list_count(l), 5);
	for (size_t i = 0; i < 5; i++) {
		enum gpuctl_lease_state st;
		const char *why = NULL;

		assert_int_equal(gpuctl_lease_list_get(l, i, NULL, NULL, &st, NULL, &why), 0);
		if (i < n_bad) {
			assert_int_equal(st, GPUCTL_LEASE_UNUSABLE);
			assert_non_null(why);
		} else {
			assert_int_equal(st, GPUCTL_LEASE_FREE);
		}
	}
	gpuctl_lease_list_free(l);
	/* never granted: only GPU 4 (and 3 when not root) can be */
	assert_int_equal(take(ctx, d, s, 1, false, &mask, &lease), 0);
	assert_int_equal(mask & ((1u << n_bad) - 1), 0);
	gpuctl_lease_free(lease);
	assert_int_equal(take(ctx, d, s, (unsigned)(5 - n_bad + 1), false, &mask, &lease), -ENOSPC);
	assert_non_null(strstr(gpuctl_errmsg(ctx), "unusable"));
	/* a missing lock file in a directory of ours is created on demand */
	assert_int_equal(unlink(pathf("%s/locks/%s.lock", ldir, fixture_uuid_of(4))), 0);
	assert_int_equal(take(ctx, d, s, 1, false, &mask, &lease), 0);
	assert_int_equal(mode_of(pathf("%s/locks/%s.lock", ldir, fixture_uuid_of(4))), 0644);
	gpuctl_lease_free(lease);
	gpuctl_lease_dir_free(d);
	gpuctl_snapshot_free(s);
	gpuctl_ctx_free(ctx);
}

static void test_two_requests(void **state)
{
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_lease_dir *d = NULL;
	struct gpuctl_snapshot *s = fixture_snap_n(8, GPUCTL_SNAP_BASIC);
	struct gpuctl_lease *a = NULL, *b = NULL, *c = NULL;
	uint32_t ma = 0, mb = 0, mc = 0;
	int fds[8];

	(void)state;
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	d = fixture_lease_dir(ctx, ldir);
	assert_int_equal(take(ctx, d, s, 3, false, &ma, &a), 0);
	assert_int_equal(take(ctx, d, s, 3, false, &mb, &b), 0);
	assert_int_equal(__builtin_popcount(ma), 3);
	assert_int_equal(__builtin_popcount(mb), 3);
	assert_int_equal(ma & mb, 0);
	assert_int_equal(take(ctx, d, s, 3, false, &mc, &c), -ENOSPC);
	assert_non_null(strstr(gpuctl_errmsg(ctx), "leased: "));
	/* the descriptors are close-on-exec */
	assert_int_equal(gpuctl_lease_fds(a, fds, 8), 3);
	for (int i = 0; i < 3; i++)
		assert_true(fcntl(fds[i], F_GETFD) & FD_CLOEXEC);
	gpuctl_lease_free(a);
	assert_int_equal(take(ctx, d, s, 3, false, &mc, &c), 0);
	assert_int_equal(mc & mb, 0);
	gpuctl_lease_free(b);
	gpuctl_lease_free(c);
	gpuctl_lease_dir_free(d);
	gpuctl_snapshot_free(s);
	gpuctl_ctx_free(ctx);
}

#define N_CHILDREN 8

static void test_concurrent(void **state)
{
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_lease_dir *d = NULL;
	struct gpuctl_snapshot *s = fixture_snap_n(8, GPUCTL_SNAP_BASIC);
	int go[2], rep[2], hold[2];
	pid_t pids[N_CHILDREN];
	uint32_t uni = 0;
	int granted = 0, rejected_min_need = 99;

	(void)state;
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	d = fixture_lease_dir(ctx,
	                      ldir); /* shared with the children: select.lock must still exclude */
	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(rep), 0);
	assert_int_equal(pipe(hold), 0);
	for (int i = 0; i < N_CHILDREN; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0) {
			struct gpuctl_lease *lease = NULL;
			uint32_t mask = 0;
			char c;
			int32_t msg[2]; /* what it asked for; the mask it got, or -1 */

			close(go[1]);
			close(hold[1]);
			(void)read(go[0], &c, 1); /* EOF: all start */
			msg[0] = i % 3 + 1;
			msg[1] = take(ctx, d, s, (unsigned)msg[0], false, &mask, &lease) == 0
			                 ? (int32_t)mask
			                 : -1;
			if (write(rep[1], msg, sizeof(msg)) != sizeof(msg))
				_exit(2);
			(void)read(hold[0], &c, 1); /* EOF: the parent has every report */
			gpuctl_lease_free(lease);
			_exit(0);
		}
	}
	close(go[0]);
	close(hold[0]);
	close(go[1]); /* the barrier opens */
	for (int i = 0; i < N_CHILDREN; i++) {
		int32_t msg[2];

		assert_int_equal(read(rep[0], msg, sizeof(msg)), sizeof(msg));
		if (msg[1] < 0) {
			if (msg[0] < rejected_min_need)
				rejected_min_need = msg[0];
			continue;
		}
		assert_int_equal(__builtin_popcount((uint32_t)msg[1]), msg[0]); /* what it asked */
		assert_int_equal(uni & (uint32_t)msg[1], 0);                    /* disjoint */
		uni |= (uint32_t)msg[1];
		granted++;
	}
	close(hold[1]);
	for (int i = 0; i < N_CHILDREN; i++) {
		int st;

		assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	/* Every lease was held until all had reported, so a request was refused only if fewer
	 * GPUs were free than it asked for: more than are free now. And at least the first
	 * request got something. (How many are granted depends on the order: 3+3+2 can fill 8.) */
	assert_true(granted >= 1);
	assert_true(rejected_min_need > 8 - __builtin_popcount(uni));
	close(rep[0]);
	close(rep[1]);
	gpuctl_lease_dir_free(d);
	gpuctl_snapshot_free(s);
	gpuctl_ctx_free(ctx);
}

static bool wait_state(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *d,
                       const struct gpuctl_snapshot *s, size_t gpu, enum gpuctl_lease_state want)
{
	for (int i = 0; i < 200; i++) {
		if (state_of(ctx, d, s, gpu, NULL) == want)
			return true;
		usleep(10000);
	}
	return false;
}

static void test_survives_parent(void **state)
{
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_lease_dir *d = NULL;
	struct gpuctl_snapshot *s = fixture_snap_n(2, GPUCTL_SNAP_BASIC);
	int p[2], st;
	pid_t a, sleeper = 0;
	uint32_t gpu = 0;

	(void)state;
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	d = fixture_lease_dir(ctx, ldir);
	assert_int_equal(pipe(p), 0);
	a = fork();
	assert_true(a >= 0);
	if (a == 0) {
		struct gpuctl_lease *lease = NULL;
		uint32_t mask = 0;
		int fd;
		pid_t b;
		int32_t msg[2];

		if (take(ctx, d, s, 1, false, &mask, &lease) < 0)
			_exit(2);
		b = fork();
		if (b == 0) {
			(void)gpuctl_lease_fds(lease, &fd, 1);
			(void)fcntl(fd, F_SETFD, 0);
			execlp("sleep", "sleep", "30", (char *)NULL);
			_exit(127);
		}
		msg[0] = (int32_t)b;
		msg[1] = (int32_t)__builtin_ctz(mask);
		(void)write(p[1], msg, sizeof(msg));
		_exit(0); /* the taker dies; the sleeper keeps the lease */
	}
	close(p[1]);
	{
		int32_t msg[2];

		assert_int_equal(read(p[0], msg, sizeof(msg)), sizeof(msg));
		sleeper = msg[0];
		gpu = (uint32_t)msg[1];
	}
	close(p[0]);
	assert_int_equal(waitpid(a, &st, 0), a);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	usleep(50000); /* let the sleeper exec */
	assert_int_equal(state_of(ctx, d, s, gpu, NULL), GPUCTL_LEASE_HELD);
	assert_int_equal(kill(sleeper, SIGKILL), 0);
	assert_int_equal(waitpid(sleeper, &st, 0), sleeper); /* we are its subreaper */
	assert_true(wait_state(ctx, d, s, gpu, GPUCTL_LEASE_FREE));
	gpuctl_lease_dir_free(d);
	gpuctl_snapshot_free(s);
	gpuctl_ctx_free(ctx);
}

static void write_file(const char *path, const char *text, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, len), (ssize_t)len);
	close(fd);
}

static char *read_file(const char *path, size_t *len)
{
	static char buf[20000];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t k;

	assert_true(fd >= 0);
	k = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(k > 0);
	buf[k] = '\0';
	*len = (size_t)k;
	return buf;
}

/* The owner and DIR/config, the two facts a shared directory's trust rule reads
 * (docs/config.md "Trust"; gpuctl_site_open applies it): the directory's owner, and the one
 * absolute path its owner wrote, or nothing. */
static void test_dir_owner_and_config(void **state)
{
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_lease_dir *d = NULL;
	char *path = (char *)1;

	(void)state;
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	d = fixture_lease_dir(ctx, ldir);
	assert_int_equal(gpuctl_lease_dir_owner(d), (uint32_t)geteuid());
	assert_int_equal(gpuctl_lease_dir_config(ctx, d, &path), 0); /* names none */
	assert_null(path);
	assert_int_equal(gpuctl_lease_dir_set_config(ctx, d, "/etc/gpuctl/site.conf"), 0);
	assert_int_equal(mode_of(pathf("%s/config", ldir)), 0644);
	assert_int_equal(gpuctl_lease_dir_config(ctx, d, &path), 0);
	assert_string_equal(path, "/etc/gpuctl/site.conf");
	free(path);
	assert_int_equal(gpuctl_lease_dir_set_config(ctx, d, "site.conf"), -EINVAL); /* relative */
	/* a file others may write is not trusted; neither is one that holds no absolute path */
	assert_int_equal(chmod(pathf("%s/config", ldir), 0666), 0);
	assert_int_equal(gpuctl_lease_dir_config(ctx, d, &path), -EPERM);
	assert_non_null(strstr(gpuctl_errmsg(ctx), "only it may write"));
	assert_int_equal(chmod(pathf("%s/config", ldir), 0644), 0);
	write_file(pathf("%s/config", ldir), "site.conf\n", 10);
	assert_int_equal(gpuctl_lease_dir_config(ctx, d, &path), -EINVAL);
	/* NULL removes it: the directory names no configuration again */
	assert_int_equal(gpuctl_lease_dir_set_config(ctx, d, NULL), 0);
	path = (char *)1;
	assert_int_equal(gpuctl_lease_dir_config(ctx, d, &path), 0);
	assert_null(path);
	assert_int_equal(gpuctl_lease_dir_config(ctx, NULL, &path), -EINVAL);
	gpuctl_lease_dir_free(d);
	gpuctl_ctx_free(ctx);
}

/* A record that cannot be trusted is never used: the device has no owner, or the one found in
 * /proc (the process with the lock file open: this test, with no label), never the record's. */
static void assert_not_from_record(const struct gpuctl_lease_owner *o)
{
	if (!o)
		return;
	assert_int_equal(last_owner_pid, (uint32_t)getpid());
	assert_false(last_owner_labelled);
}

static void test_records(void **state)
{
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_lease_dir *d = NULL;
	struct gpuctl_snapshot *s = fixture_snap_n(1, GPUCTL_SNAP_BASIC);
	struct gpuctl_lease *lease = NULL;
	struct gpuctl_lease_list *l = NULL;
	const struct gpuctl_lease_owner *o = NULL, *has = NULL;
	enum gpuctl_lease_state st;
	uint32_t mask = 0;
	char *rec, good[20000], big[20000];
	size_t len;
	uint64_t seed = 42;
	const char *rp;

	(void)state;
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	d = fixture_lease_dir(ctx, ldir);
	assert_int_equal(take(ctx, d, s, 1, false, &mask, &lease), 0);
	/* the owner fields */
	assert_int_equal(gpuctl_lease_list(ctx, d, s, &l), 0);
	assert_int_equal(gpuctl_lease_list_get(l, 0, NULL, NULL, &st, &o, NULL), 0);
	assert_int_equal(st, GPUCTL_LEASE_HELD);
	assert_non_null(o);
	assert_int_equal(o->uid, geteuid());
	assert_int_equal(o->pid, (uint32_t)getpid());
	assert_int_equal(o->job_pid, 0);
	assert_string_equal(o->command, "train.py --x \"q\"?next");
	assert_string_equal(o->label, "lbl");
	assert_true(o->start_time > 1000000000u && o->start_time <= (uint64_t)time(NULL));
	{ /* the holders of a HELD entry: its owner, the same one */
		const struct gpuctl_lease_owner *const *hs = NULL;
		size_t nh = 0;
		assert_int_equal(gpuctl_lease_list_holders(l, 0, &hs, &nh), 0);
		assert_int_equal(nh, 1);
		assert_ptr_equal(hs[0], o);
		assert_int_equal(gpuctl_lease_list_holders(l, 99, &hs, &nh), -EINVAL);
	}
	gpuctl_lease_list_free(l);
	assert_int_equal(gpuctl_lease_set_owner(ctx, lease, 0, (uint32_t)getpid()), 0);
	assert_int_equal(gpuctl_lease_list(ctx, d, s, &l), 0);
	assert_int_equal(gpuctl_lease_list_get(l, 0, NULL, NULL, &st, &o, NULL), 0);
	assert_non_null(o);
	assert_int_equal(o->job_pid, (uint32_t)getpid());
	gpuctl_lease_list_free(l);

	rp = pathf("%s/owners/%u/%s.json", ldir, (unsigned)geteuid(), fixture_uuid_of(0));
	rec = read_file(rp, &len);
	assert_true(len < sizeof(good));
	memcpy(good, rec, len + 1);
	/* garbage, huge, truncated, symlinked: owner unknown, never a crash */
	write_file(rp, "garbage", 7);
	assert_int_equal(state_of(ctx, d, s, 0, &has), GPUCTL_LEASE_HELD);
	assert_not_from_record(has);
	memset(big, ' ', sizeof(big));
	memcpy(big, good, len - 2); /* the good record without its final "}\n", then blanks */
	big[sizeof(big) - 2] = '}';
	write_file(rp, big, sizeof(big) - 1);
	assert_int_equal(state_of(ctx, d, s, 0, &has), GPUCTL_LEASE_HELD);
	assert_not_from_record(has);
	for (size_t cut = 0; cut + 2 < len; cut += 7) {
		write_file(rp, good, cut);
		assert_int_equal(state_of(ctx, d, s, 0, &has), GPUCTL_LEASE_HELD);
		assert_not_from_record(has);
	}
	/* random corruption of the good record (fixed seed) */
	for (int round = 0; round < 300; round++) {
		char m[20000];

		memcpy(m, good, len);
		for (int k = 0; k < 1 + round % 4; k++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			m[(seed >> 33) % len] = (char)(seed >> 13);
		}
		write_file(rp, m, len);
		(void)state_of(ctx, d, s, 0, &has);
	}
	write_file(pathf("%s/real", base), good, len);
	assert_int_equal(unlink(rp), 0);
	assert_int_equal(symlink(pathf("%s/real", base), rp), 0);
	assert_int_equal(state_of(ctx, d, s, 0, &has), GPUCTL_LEASE_HELD);
	assert_not_from_record(has);
	assert_int_equal(unlink(rp), 0);
	write_file(rp, good, len);
	assert_int_equal(state_of(ctx, d, s, 0, &has), GPUCTL_LEASE_HELD);
	assert_non_null(has);
	if (geteuid() == 0) { /* a records directory not owned by its uid */
		assert_int_equal(chown(pathf("%s/owners/0", ldir), OTHER_UID, 0), 0);
		assert_int_equal(state_of(ctx, d, s, 0, &has), GPUCTL_LEASE_HELD);
		assert_not_from_record(has);
		assert_int_equal(chown(pathf("%s/owners/0", ldir), 0, 0), 0);
	}
	gpuctl_lease_free(lease);
	assert_int_equal(state_of(ctx, d, s, 0, &has), GPUCTL_LEASE_FREE);
	assert_null(has);
	gpuctl_lease_dir_free(d);
	gpuctl_snapshot_free(s);
	gpuctl_ctx_free(ctx);
}

static pid_t spawn_pause(void)
{
	pid_t p = fork();

	assert_true(p >= 0);
	if (p == 0) {
		pause();
		_exit(0);
	}
	return p;
}

static void reap(pid_t p)
{
	int st;

	(void)kill(p, SIGKILL);
	assert_int_equal(waitpid(p, &st, 0), p);
}

static void test_foreign(void **state)
{
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_lease_dir *d = NULL;
	struct gpuctl_snapshot *s = fixture_snap_n(4, GPUCTL_SNAP_PROCESSES);
	struct gpuctl_snapshot *noproc = fixture_snap_n(4, GPUCTL_SNAP_BASIC);
	struct gpuctl_lease *lease = NULL, *b = NULL;
	struct gpuctl_devset *f = NULL;
	uint32_t mask = 0, mb = 0;
	pid_t mine, stranger;
	size_t leased;

	(void)state;
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	d = fixture_lease_dir(ctx, ldir);
	assert_int_equal(take(ctx, d, s, 1, true, &mask, &lease), 0);
	leased = (size_t)__builtin_ctz(mask);
	mine = spawn_pause();     /* a child of the lease holder (this process) */
	stranger = spawn_pause(); /* ... but on a device it did not lease */
	assert_non_null(snapshot_add_proc(s, leased, (uint32_t)mine));
	assert_non_null(snapshot_add_proc(s, (leased + 1) % 4, (uint32_t)stranger));
	assert_int_equal(gpuctl_lease_foreign(ctx, d, s, NULL, &f), 0);
	assert_int_equal(gpuctl_devset_count(f), 1);
	assert_true(gpuctl_devset_contains(f, (leased + 1) % 4, -1));
	gpuctl_devset_free(f);
	/* without a lease directory no process belongs to a lease: both devices are busy */
	assert_int_equal(gpuctl_lease_foreign(ctx, NULL, s, NULL, &f), 0);
	assert_int_equal(gpuctl_devset_count(f), 2);
	assert_true(gpuctl_devset_contains(f, leased, -1));
	assert_true(gpuctl_devset_contains(f, (leased + 1) % 4, -1));
	gpuctl_devset_free(f);
	/* without processes in the snapshot: an empty set */
	assert_int_equal(gpuctl_lease_foreign(ctx, d, noproc, NULL, &f), 0);
	assert_int_equal(gpuctl_devset_count(f), 0);
	gpuctl_devset_free(f);
	/* select-and-lease skips the foreign-busy GPU unless told otherwise */
	assert_int_equal(take(ctx, d, s, 3, false, &mb, &b), -ENOSPC);
	assert_non_null(strstr(gpuctl_errmsg(ctx), "in use without a lease"));
	assert_int_equal(take(ctx, d, s, 3, true, &mb, &b), 0);
	assert_int_equal(mb & mask, 0);
	gpuctl_lease_free(b);
	reap(mine);
	reap(stranger);
	gpuctl_lease_free(lease);
	gpuctl_lease_dir_free(d);
	gpuctl_snapshot_free(s);
	gpuctl_snapshot_free(noproc);
	gpuctl_ctx_free(ctx);
}

/* A lease whose owner record cannot be written is refused, and nothing of it is left: the
 * write fails in a child whose files may not grow (RLIMIT_FSIZE 0, SIGXFSZ ignored: write(2)
 * then fails with EFBIG, as setrlimit(2) documents), which needs no privilege. */
static void test_record_unwritable(void **state)
{
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_lease_dir *d = NULL;
	struct gpuctl_snapshot *s = fixture_snap_n(2, GPUCTL_SNAP_BASIC);
	char msg[512] = "";
	int p[2], r = 0;
	ssize_t k;
	pid_t h;

	(void)state;
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	d = fixture_lease_dir(ctx, ldir);
	assert_int_equal(gpuctl_lease_dir_init(ctx, d, s), 2);
	assert_int_equal(pipe(p), 0);
	h = fork();
	assert_true(h >= 0);
	if (h == 0) {
		struct rlimit none = {0, 0};
		struct gpuctl_lease *lease = NULL;
		uint32_t m = 0;
		int rr;

		close(p[0]);
		(void)signal(SIGXFSZ, SIG_IGN);
		if (setrlimit(RLIMIT_FSIZE, &none) < 0)
			_exit(2);
		rr = take(ctx, d, s, 2, true, &m, &lease);
		(void)write(p[1], &rr, sizeof(rr));
		(void)write(p[1], gpuctl_errmsg(ctx), strlen(gpuctl_errmsg(ctx)));
		_exit(0);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &r, sizeof(r)), sizeof(r));
	k = read(p[0], msg, sizeof(msg) - 1);
	msg[k > 0 ? k : 0] = '\0';
	close(p[0]);
	reap(h);
	assert_int_equal(r, -EIO);
	assert_non_null(strstr(msg, ldir));
	assert_non_null(strstr(msg, "cannot write the lease record"));
	assert_non_null(strstr(msg, strerror(EFBIG)));
	/* nothing held, no record (nor a temporary one) left */
	assert_int_equal(state_of(ctx, d, s, 0, NULL), GPUCTL_LEASE_FREE);
	assert_int_equal(state_of(ctx, d, s, 1, NULL), GPUCTL_LEASE_FREE);
	{
		DIR *od = opendir(pathf("%s/owners/%u", ldir, (unsigned)geteuid()));
		struct dirent *de;

		assert_non_null(od);
		while ((de = readdir(od)))
			assert_true(de->d_name[0] == '.' && strncmp(de->d_name, ".tmp", 4) != 0);
		closedir(od);
	}
	gpuctl_lease_dir_free(d);
	gpuctl_snapshot_free(s);
	gpuctl_ctx_free(ctx);
}

/* A holder child: leases one GPU (as uid when uid != 0 and we are root), reports, waits. */
static pid_t spawn_holder(struct gpuctl_snapshot *s, uid_t uid, uint32_t *ret_mask)
{
	int p[2];
	pid_t h;
	uint32_t mask = 0;

	assert_int_equal(pipe(p), 0);
	h = fork();
	assert_true(h >= 0);
	if (h == 0) {
		struct gpuctl_ctx *c = NULL;
		struct gpuctl_lease_dir *dd = NULL;
		struct gpuctl_lease *lease = NULL;
		uint32_t m = 0;

		if (uid && setresuid(uid, uid, uid) < 0)
			_exit(2);
		if (gpuctl_ctx_new(&c) < 0 || gpuctl_lease_dir_open(c, ldir, &dd) < 0 ||
		    take(c, dd, s, 1, true, &m, &lease) < 0 ||
		    gpuctl_lease_set_owner(c, lease, 0, 0) < 0)
			m = 0;
		(void)write(p[1], &m, sizeof(m));
		for (;;)
			pause();
	}
	close(p[1]);
	assert_int_equal(read(p[0], &mask, sizeof(mask)), sizeof(mask));
	close(p[0]);
	assert_int_not_equal(mask, 0);
	*ret_mask = mask;
	return h;
}

static void test_release(void **state)
{
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_lease_dir *d = NULL;
	struct gpuctl_snapshot *s = fixture_snap_n(4, GPUCTL_SNAP_BASIC);
	struct gpuctl_lease *mine = NULL;
	struct gpuctl_devset *set = NULL;
	uint32_t mask = 0, mm = 0;
	pid_t h;
	int st, r;

	(void)state;
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	d = fixture_lease_dir(ctx, ldir);
	assert_int_equal(gpuctl_lease_dir_init(ctx, d, s), 4);
	h = spawn_holder(s, 0, &mask);
	assert_int_equal(gpuctl_lease_release(ctx, d, s, NULL), 1);
	assert_int_equal(waitpid(h, &st, 0), h);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
	assert_true(wait_state(ctx, d, s, (size_t)__builtin_ctz(mask), GPUCTL_LEASE_FREE));

	/* a holder whose record is gone: found through its lock (docs/leases.md "Release") */
	h = spawn_holder(s, 0, &mask);
	assert_int_equal(unlink(pathf("%s/owners/%u/%s.json", ldir, (unsigned)geteuid(),
	                              fixture_uuid_of((size_t)__builtin_ctz(mask)))),
	                 0);
	r = gpuctl_lease_release(ctx, d, s, NULL);
	if (r != 1)
		(void)kill(h, SIGKILL); /* not left behind by a failure */
	assert_int_equal(r, 1);
	assert_int_equal(waitpid(h, &st, 0), h);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
	assert_true(wait_state(ctx, d, s, (size_t)__builtin_ctz(mask), GPUCTL_LEASE_FREE));

	/* our own lease, with a record rewritten to name pid 1: never signalled */
	assert_int_equal(take(ctx, d, s, 1, true, &mm, &mine), 0);
	{
		char text[512], stat[1024], *p;
		unsigned long long ticks = 0;
		size_t len;
		int field = 2;

		p = read_file("/proc/1/stat", &len);
		memcpy(stat, p, len + 1);
		p = strrchr(stat, ')') + 1;
		while (p && *p && field < 22) {
			p = strchr(p + 1, ' ');
			if (p && ++field == 22)
				ticks = strtoull(p + 1, NULL, 10);
		}
		len = (size_t)snprintf(text, sizeof(text),
		                       "{\"pid\":1,\"pid_start_ticks\":%llu,\"job_pid\":0}", ticks);
		write_file(pathf("%s/owners/%u/%s.json", ldir, (unsigned)geteuid(),
		                 fixture_uuid_of((size_t)__builtin_ctz(mm))),
		           text, len);
	}
	assert_int_equal(gpuctl_lease_release(ctx, d, s, NULL), 0);
	assert_int_equal(kill(1, 0), 0);
	gpuctl_lease_free(mine);

	if (geteuid() == 0) { /* another user's holder: -EPERM, and not signalled */
		h = spawn_holder(s, OTHER_UID, &mask);
		assert_int_equal(gpuctl_devset_new(&set), 0);
		assert_int_equal(gpuctl_devset_add(set, (size_t)__builtin_ctz(mask), -1), 0);
		assert_int_equal(gpuctl_lease_release(ctx, d, s, set), -EPERM);
		assert_non_null(strstr(gpuctl_errmsg(ctx), "uid 12345"));
		assert_int_equal(gpuctl_lease_release(ctx, d, s, NULL), 0);
		assert_int_equal(kill(h, 0), 0);
		reap(h);
		gpuctl_devset_free(set);
	}
	gpuctl_lease_dir_free(d);
	gpuctl_snapshot_free(s);
	gpuctl_ctx_free(ctx);
}

/* select.c reads leased/foreign only when struct_size covers them; when set, they filter. */
/* A shared lease of mib MiB on GPU 0 of s (margin 0): the lease, or NULL when refused (-ENOSPC). */
static struct gpuctl_lease *share(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *d,
                                  const struct gpuctl_snapshot *s, uint64_t mib)
{
	struct gpuctl_select_request req = GPUCTL_SELECT_REQUEST_INIT;
	struct gpuctl_lease_request lr = GPUCTL_LEASE_REQUEST_INIT;
	struct gpuctl_selection *sel = NULL;
	struct gpuctl_lease *lease = NULL;
	int r;

	req.count = 1;
	lr.share_mem = mib << 20;
	lr.share_margin = 0;
	lr.share_margin_is_pct = false;
	r = gpuctl_select_and_lease(ctx, d, s, &req, &lr, &sel, &lease);
	gpuctl_selection_free(sel);
	if (r == -ENOSPC)
		return NULL;
	if (r < 0)
		fail_msg("share %llu MiB: %s", (unsigned long long)mib, gpuctl_errmsg(ctx));
	return lease;
}

/* The MiB declared on GPU 0, and its state. */
static uint64_t declared_mib(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *d,
                             const struct gpuctl_snapshot *s, enum gpuctl_lease_state *ret_state)
{
	struct gpuctl_lease_list *l = NULL;
	uint64_t declared = 0;

	assert_int_equal(gpuctl_lease_list(ctx, d, s, &l), 0);
	assert_int_equal(gpuctl_lease_list_get(l, 0, NULL, NULL, ret_state, NULL, NULL), 0);
	assert_int_equal(gpuctl_lease_list_shares(l, 0, &declared, NULL, NULL), 0);
	gpuctl_lease_list_free(l);
	return declared >> 20;
}

/* How many holders GPU 0's entry names (gpuctl_lease_list_holders), each this process. */
static size_t holders_n(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *d,
                        const struct gpuctl_snapshot *s)
{
	const struct gpuctl_lease_owner *const *hs = NULL;
	struct gpuctl_lease_list *l = NULL;
	size_t n = 0;

	assert_int_equal(gpuctl_lease_list(ctx, d, s, &l), 0);
	assert_int_equal(gpuctl_lease_list_holders(l, 0, &hs, &n), 0);
	for (size_t k = 0; k < n; k++)
		assert_int_equal(hs[k]->pid, (uint32_t)getpid());
	gpuctl_lease_list_free(l);
	return n;
}

/* Shared leases on a 1024 MiB GPU without margin: the declared total is what the live leases
 * locked; a hole left by an ended lease is reused (a lease may span several ranges); no
 * exclusive lease while shared ones live, and no shared one while an exclusive one does. */
static void test_share_accounting(void **state)
{
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_snapshot *s = fixture_snap_n(1, GPUCTL_SNAP_BASIC);
	struct gpuctl_lease_dir *d;
	struct gpuctl_lease *a, *b, *c, *e, *x = NULL;
	enum gpuctl_lease_state st;
	uint32_t mask;

	(void)state;
	assert_int_equal(snapshot_set_int(s, 0, GPUCTL_F_MEMORY_TOTAL, 1024ll << 20), 0);
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	d = fixture_lease_dir(ctx, ldir);
	a = share(ctx, d, s, 300);
	b = share(ctx, d, s, 300);
	c = share(ctx, d, s, 300);
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(c);
	assert_int_equal(declared_mib(ctx, d, s, &st), 900);
	assert_int_equal(st, GPUCTL_LEASE_SHARED);
	/* one record per creating process (owners/<uid>/<UUID>@<pid>.json, docs/leases.md): the
	 * three leases of this process are one holder */
	assert_int_equal(holders_n(ctx, d, s), 1);
	assert_null(share(ctx, d, s, 125));                             /* 900 + 125 > 1024 */
	assert_int_equal(take(ctx, d, s, 1, true, &mask, &x), -ENOSPC); /* exclusive: no */
	gpuctl_lease_free(b);                                           /* a hole of 300 */
	assert_int_equal(declared_mib(ctx, d, s, NULL), 600);
	e = share(ctx, d, s, 424); /* the hole and the tail, exactly */
	assert_non_null(e);
	assert_int_equal(declared_mib(ctx, d, s, NULL), 1024);
	assert_null(share(ctx, d, s, 1));
	gpuctl_lease_free(a);
	gpuctl_lease_free(c);
	gpuctl_lease_free(e);
	assert_int_equal(declared_mib(ctx, d, s, &st), 0);
	assert_int_equal(st, GPUCTL_LEASE_FREE);
	assert_int_equal(holders_n(ctx, d, s), 0);
	assert_int_equal(take(ctx, d, s, 1, true, &mask, &x), 0); /* exclusive now */
	assert_null(share(ctx, d, s, 1));                         /* and no share beside it */
	gpuctl_lease_free(x);
	/* a device of unknown memory size is never shared */
	s->gpus[0].valid[GPUCTL_F_MEMORY_TOTAL] = false;
	assert_null(share(ctx, d, s, 1));
	gpuctl_lease_dir_free(d);
	gpuctl_snapshot_free(s);
	gpuctl_ctx_free(ctx);
}

static void test_select_fields(void **state)
{
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_snapshot *s = fixture_snap_n(2, GPUCTL_SNAP_BASIC);
	struct gpuctl_select_request req = GPUCTL_SELECT_REQUEST_INIT;
	struct gpuctl_selection *sel = NULL;
	struct gpuctl_devset *set = NULL;

	(void)state;
	assert_int_equal(gpuctl_ctx_new(&ctx), 0);
	assert_int_equal(gpuctl_devset_new(&set), 0);
	assert_int_equal(gpuctl_devset_add(set, 0, -1), 0);
	req.count = 2;
	req.leased = (const struct gpuctl_devset *)(uintptr_t)1; /* never read: */
	req.foreign = (const struct gpuctl_devset *)(uintptr_t)1;
	req.struct_size = offsetof(struct gpuctl_select_request, leased);
	assert_int_equal(gpuctl_select(ctx, s, &req, &sel), 0);
	gpuctl_selection_free(sel);
	req.struct_size = sizeof(req);
	req.leased = set;
	req.foreign = NULL;
	assert_int_equal(gpuctl_select(ctx, s, &req, &sel), -ENOSPC);
	assert_non_null(strstr(gpuctl_errmsg(ctx), "leased: 0"));
	req.leased = NULL;
	req.foreign = set;
	assert_int_equal(gpuctl_select(ctx, s, &req, &sel), -ENOSPC);
	assert_non_null(strstr(gpuctl_errmsg(ctx), "in use without a lease: 0"));
	gpuctl_devset_free(set);
	gpuctl_snapshot_free(s);
	gpuctl_ctx_free(ctx);
}

/* /proc/locks lines as proc(5) documents them: ordinal, class (FLOCK, POSIX, OFDLCK), ADVISORY
 * or MANDATORY, READ or WRITE, pid, major:minor:inode (hex device numbers), range; a request
 * blocked on the lock above is printed "N: -> ..." */
/* Eviction notices (docs/leases.md "Taking a lease back"): the header line, key-value lines each
 * ending in a newline, the required keys, a known key once, strict numbers, no control
 * characters; unknown keys skipped. */
static void test_notice_parse(void **state)
{
#define N_HEAD "gpuctl-notice 1\n"
#define N_REQ  "device GPU-12ab-34\npid 42\nstart_time 1700000000\nwhen 1700000100\n"
	static const struct {
		const char *text;
		int r;
	} cases[] = {
	        {N_HEAD N_REQ "reason release --force\n", 0},
	        {N_HEAD N_REQ "reason idle for 30m (idle_release of pool a)\nindex 3\nended 1\n"
	                      "user alice\nby_uid 0\nby root\nlater_key anything\n",
	         0},
	        {N_HEAD N_REQ, -EINVAL},                           /* no reason */
	        {N_REQ "reason x\n", -EINVAL},                     /* no header */
	        {"gpuctl-notice 2\n" N_REQ "reason x\n", -EINVAL}, /* another version */
	        {N_HEAD N_REQ "reason x", -EINVAL},                /* no final newline */
	        {N_HEAD N_REQ "reason x\npid 43\n", -EINVAL},      /* pid twice */
	        {N_HEAD N_REQ "reason a\tb\n", -EINVAL},           /* a control character */
	        {N_HEAD N_REQ "reason \n", -EINVAL},               /* empty value */
	        {N_HEAD N_REQ "reason x\nended 2\n", -EINVAL},     /* ended is 0 or 1 */
	        {N_HEAD N_REQ "reason x\nindex 03\n", -EINVAL},    /* a leading zero */
	        {N_HEAD N_REQ "reason x\nindex -1\n", -EINVAL},    /* no sign */
	        {N_HEAD "device ../../etc\npid 1\nstart_time 1\nwhen 1\nreason x\n", -EINVAL},
	        {N_HEAD "device GPU-1\npid 2147483648\nstart_time 1\nwhen 1\nreason x\n",
	         -EINVAL}, /* not a pid */
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int r = lease_notice_parse_text(cases[i].text, strlen(cases[i].text));

		if (r != cases[i].r)
			fail_msg("case %zu: %d, want %d:\n%s", i, r, cases[i].r, cases[i].text);
	}
	/* a NUL byte makes it no text */
	assert_int_equal(lease_notice_parse_text(N_HEAD N_REQ "reason x\0\n",
	                                         sizeof(N_HEAD N_REQ "reason x\0\n") - 1),
	                 -EINVAL);
#undef N_HEAD
#undef N_REQ
}

static void test_flock_parse(void **state)
{
	struct lease_flock l;
	char a[] = "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234567 0 EOF\n";
	char b[] = "12: FLOCK  ADVISORY  READ 77 fd:1a:99 0 EOF";
	char c[] = "3: POSIX  ADVISORY  WRITE 4242 08:01:1234567 0 EOF";
	char d[] = "4: -> FLOCK  ADVISORY  WRITE 4243 08:01:1234567 0 EOF";
	char e[] = "5: OFDLCK ADVISORY  READ -1 08:01:1234567 0 9";
	char f[] = "6: FLOCK  ADVISORY  WRITE 4242 08:01 0 EOF";
	char g[] = "7: FLOCK  ADVISORY  WRITE -1 00:2a:5 0 EOF";

	(void)state;
	assert_true(lease_flock_parse(a, &l));
	assert_true(l.write);
	assert_int_equal(l.pid, 4242);
	assert_int_equal(l.maj, 8);
	assert_int_equal(l.min, 1);
	assert_int_equal(l.ino, 1234567);
	assert_true(lease_flock_parse(b, &l));
	assert_false(l.write);
	assert_int_equal(l.maj, 0xfd);
	assert_int_equal(l.min, 0x1a);
	assert_int_equal(l.ino, 99);
	assert_false(lease_flock_parse(c, &l)); /* not a flock */
	assert_false(lease_flock_parse(d, &l)); /* blocked, not held */
	assert_false(lease_flock_parse(e, &l));
	assert_false(lease_flock_parse(f, &l)); /* no inode */
	assert_true(lease_flock_parse(g, &l));  /* held; its pid unknown here */
	assert_int_equal(l.pid, 0);
	assert_int_equal(l.min, 0x2a);
}

/* /proc/PID/fdinfo/N as proc(5) documents it: pos, flags, mnt_id, ino, then one "lock:" line
 * per lock of that description (the /proc/locks format after a tab). */
static void test_fdinfo_flock(void **state)
{
	struct lease_flock l;
	char a[] = "pos:\t0\nflags:\t02100000\nmnt_id:\t26\nino:\t99\n"
	           "lock:\t1: FLOCK  ADVISORY  WRITE 4242 fe:00:99 0 EOF\n";
	char b[] = "pos:\t0\nflags:\t02100000\nmnt_id:\t26\nino:\t99\n"
	           "lock:\t1: OFDLCK ADVISORY  READ -1 fe:00:99 0 0\n"
	           "lock:\t2: FLOCK  ADVISORY  READ 17 fe:00:99 0 EOF\n";
	char c[] = "pos:\t0\nflags:\t02100000\nmnt_id:\t26\nino:\t99\n"
	           "lock:\t1: OFDLCK ADVISORY  READ -1 fe:00:99 0 0\n";
	char d[] = "pos:\t0\nflags:\t02\nmnt_id:\t26\nino:\t99\n";
	char e[] = "x: 1: FLOCK  ADVISORY  WRITE 4242 fe:00:99 0 EOF\n"; /* not a lock: line */

	(void)state;
	assert_true(lease_fdinfo_flock(a, &l));
	assert_true(l.write);
	assert_int_equal(l.pid, 4242);
	assert_int_equal(l.ino, 99);
	assert_true(lease_fdinfo_flock(b, &l)); /* a shared lease: OFD ranges and a READ flock */
	assert_false(l.write);
	assert_int_equal(l.pid, 17);
	assert_false(lease_fdinfo_flock(c, &l));
	assert_false(lease_fdinfo_flock(d, &l));
	assert_false(lease_fdinfo_flock(e, &l));
}

/* A child that waits for a byte on fd (then exits), holding what it inherited. */
static pid_t spawn_sleeper(int *ret_wake)
{
	int p[2];
	pid_t h;
	char c;

	assert_int_equal(pipe(p), 0);
	h = fork();
	assert_true(h >= 0);
	if (h == 0) {
		close(p[1]);
		(void)read(p[0], &c, 1);
		_exit(0);
	}
	close(p[0]);
	*ret_wake = p[1];
	return h;
}

/* flock(2): the lock belongs to the open file description, so a child that inherited the
 * descriptor holds it, and /proc/locks and fdinfo name the process that took it. */
static void test_proc_holds(void **state)
{
	struct lease_lock_id ids[2];
	struct stat st;
	bool holds[2];
	pid_t takers[2], h;
	int fd, other, wake;
	const char *lock = pathf("%s/GPU-1.lock", base), *plain = pathf("%s/GPU-2.txt", base);

	(void)state;
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	other = open(plain, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	assert_true(fd >= 0 && other >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	ids[0] = (struct lease_lock_id){.dev = st.st_dev, .ino = st.st_ino};
	assert_int_equal(fstat(other, &st), 0);
	ids[1] = (struct lease_lock_id){.dev = st.st_dev, .ino = st.st_ino};

	/* open but not locked: no holder */
	h = spawn_sleeper(&wake);
	assert_int_equal(lease_proc_holds(h, ids, 2, NULL, NULL), 0);
	assert_int_equal(write(wake, "", 1), 1);
	close(wake);
	reap(h);

	/* locked, then inherited: the child holds it, taken by us; a flock on a file whose name
	 * is no lock file's is not looked at */
	assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
	assert_int_equal(flock(other, LOCK_EX | LOCK_NB), 0);
	h = spawn_sleeper(&wake);
	memset(holds, 0, sizeof(holds));
	memset(takers, 0, sizeof(takers));
	assert_int_equal(lease_proc_holds(h, ids, 2, holds, takers), 1);
	assert_true(holds[0]);
	assert_false(holds[1]);
	assert_int_equal(takers[0], getpid());
	assert_int_equal(lease_proc_holds(h, ids, 2, NULL, NULL), 1);
	assert_int_equal(lease_proc_holds(h, &ids[1], 1, NULL, NULL), 0);
	/* unlocked (one description, the child's too): the child holds nothing any more */
	assert_int_equal(flock(fd, LOCK_UN), 0);
	assert_int_equal(lease_proc_holds(h, ids, 1, NULL, NULL), 0);
	assert_int_equal(write(wake, "", 1), 1);
	close(wake);
	reap(h);
	close(fd);
	close(other);
}

/* lease_lock_taken_by, on real flocks read back from /proc/locks (proc(5): each flock line
 * names the pid that took it): shared locks of two descriptions, both taken by us, and a live
 * child that took none. */
static void test_lock_taken_by(void **state)
{
	const char *lock = pathf("%s/GPU-3.lock", base);
	int fd, fd2, wake;
	struct stat st;
	pid_t h;

	(void)state;
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	fd2 = open(lock, O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0 && fd2 >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	h = spawn_sleeper(&wake);
	/* no flock on it: nobody named, cannot tell */
	assert_int_equal(lease_lock_taken_by(st.st_dev, st.st_ino, getpid(), 0), -1);
	assert_int_equal(flock(fd, LOCK_SH | LOCK_NB), 0);
	assert_int_equal(lease_lock_taken_by(st.st_dev, st.st_ino, getpid(), 0), 1);
	assert_int_equal(lease_lock_taken_by(st.st_dev, st.st_ino, 0, getpid()), 1);
	/* the pids named are ours only: a live process that took none is not a taker */
	assert_int_equal(lease_lock_taken_by(st.st_dev, st.st_ino, h, 0), 0);
	assert_int_equal(lease_lock_taken_by(st.st_dev, st.st_ino, 0, 0), 0);
	/* another inode (the same device) is not this one */
	assert_int_equal(lease_lock_taken_by(st.st_dev, st.st_ino + 1, getpid(), 0), -1);
	assert_int_equal(flock(fd2, LOCK_SH | LOCK_NB), 0);
	assert_int_equal(flock(fd, LOCK_UN), 0);
	assert_int_equal(lease_lock_taken_by(st.st_dev, st.st_ino, getpid(), h), 1);
	assert_int_equal(flock(fd2, LOCK_UN), 0);
	assert_int_equal(lease_lock_taken_by(st.st_dev, st.st_ino, getpid(), h), -1);
	assert_int_equal(write(wake, "", 1), 1);
	close(wake);
	reap(h);
	close(fd);
	close(fd2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_dir_create, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_dir_unsafe, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_lockfile_unusable, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_two_requests, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_concurrent, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_survives_parent, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_records, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_dir_owner_and_config, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_foreign, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_release, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_record_unwritable, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_share_accounting, setup, teardown),
	        cmocka_unit_test(test_select_fields),
	        cmocka_unit_test(test_flock_parse),
	        cmocka_unit_test(test_notice_parse),
	        cmocka_unit_test(test_fdinfo_flock),
	        cmocka_unit_test_setup_teardown(test_proc_holds, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_lock_taken_by, setup, teardown),
	};

	(void)prctl(PR_SET_CHILD_SUBREAPER, 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
