// SPDX-License-Identifier: MIT
/*
 * lease.c: leases, i.e. exclusive flock(2)s on DIR/locks/<UUID>.lock, and shared leases (a
 * shared flock plus OFD read locks that declare memory) (docs/leases.md, design.md §2.4, §7).
 * Tests: tests/unit/test-lease.c, tests/cli/test_leases.py, test_wait.py, test_share.py.
 *
 * Decisions:
 * - Everything below the lease directory is reached with *at() calls relative to directory
 *   descriptors opened with O_NOFOLLOW and checked with fstat() on the descriptor (what was
 *   opened, not the path: no check-then-use race). Components above DIR may be symlinks
 *   (/var/run -> /run); DIR itself may not. Only DIR's last component is ever created.
 * - Who may create: DIR when we are root or own its parent; locks/, owners/, select.lock and
 *   lock files only when DIR is ours (owner == euid). Modes are set with fchmod() after
 *   creation, so the umask does not matter. locks/ and select.lock must belong to DIR's owner
 *   (stricter than "root or us": a locks/ of another user could have its files unlinked).
 * - A missing lock file in a directory of ours reads as FREE (nobody can hold a lock on a file
 *   that does not exist; select-and-lease creates it); in someone else's, UNINITIALISED.
 * - select.lock is opened afresh for every select-and-lease, never kept in the handle: a
 *   forked child sharing the parent's open file description would not be excluded by it.
 * - MIG and whole GPUs: a whole GPU counts as leased when any of its MIG devices is leased,
 *   and a MIG device when its GPU is (select.c's filter spreads each marked device that way).
 *   An UNUSABLE or UNINITIALISED device is excluded the same way (it is put in the "leased"
 *   set, we cannot know who holds it); if the selection then fails, the -ENOSPC line names the
 *   lock-file problem, and it becomes -ENOENT (with `sudo gpuctl lease init`) when a missing
 *   lock file was among the causes. Every device of the snapshot is probed, whatever the
 *   request, so the rule holds in both directions.
 * - Owner records are display only. A record counts when it comes from owners/<uid>/ that is a
 *   real directory owned by <uid> (and not writable by others), parses, its device is HELD and
 *   its pid or job_pid is alive, has the recorded start time (/proc/<pid>/stat field 22) and is
 *   owned by <uid>. Records are not removed when a lease ends: the next lease of that user and
 *   device replaces it, and a stale one never counts (its holder is dead or the lock is free).
 * - Failing to write a record does not fail select-and-lease (the lock is the lease); it is
 *   logged. gpuctl_lease_set_owner does report the failure.
 * - The record of a held device: the one whose pid or job_pid holds the lock per /proc/locks;
 *   when /proc/locks does not name the holder, the only counting record, if exactly one.
 * - Foreign processes: a compute process on a device is a lease's only when its pid or an
 *   ancestor (up to ANCESTOR_MAX levels) is the pid or job_pid of a counting record for that
 *   same device (or its whole GPU, or, for a whole GPU, one of its MIG devices). Stricter than
 *   "any lease": a job that wanders onto a GPU it did not lease makes that GPU busy. A process
 *   on a MIG device that cannot be matched to one by GI/CI marks its whole GPU.
 * - Release signals through a pidfd when the kernel has pidfd_open (start time and owner are
 *   checked after opening it, so the pid cannot be recycled in between); else kill().
 * - Waiting (docs/leases.md "Waiting"): tickets DIR/queue/<uid>/<arrival>-<pid>, live while
 *   their waiter holds an exclusive flock (probed with LOCK_SH|LOCK_NB); every select-and-lease
 *   excludes, as if leased, the devices the older live tickets could use (their static filters
 *   run through gpuctl_select one device at a time; malformed: every GPU). Wake-ups are
 *   inotify events filtered by a fingerprint of /proc/locks and the ticket names that opens no
 *   lock file (so checking it makes no event).
 * - Sharing (docs/leases.md "Sharing"): a device is SHARED when an exclusive probe fails and a
 *   shared one succeeds. Declared memory is one locked byte per MiB (OFD read locks on the lock
 *   file, placed under select.lock in free ranges below the capacity), counted by F_OFD_GETLK
 *   scans: kernel truth, like the lease itself. A shared request also raises min_free_mem to
 *   what it declares. Shared records are named <UUID>@<tag>.json (one per lease; tag = the
 *   creating pid), pruned by the same user's next shared lease once their holders are gone.
 * - A zombie (state Z or X in /proc/<pid>/stat) counts as gone: it holds no descriptor, and in
 *   some containers nothing reaps it.
 * - Readers that probe (gpuctl_lease_list, gpuctl_lease_foreign, gpuctl_lease_release) hold
 *   select.lock shared while they do, so their momentary flocks never make a select-and-lease
 *   see a free device as held. Inside select-and-lease (select.lock already exclusive) the
 *   internal lease_foreign is used.
 * - Record format: one JSON object (docs/leases.md), written by hand with escaping; read back by
 *   a small strict parser (RECORD_MAX bytes at most; strings, non-negative integers and null;
 *   anything else makes the record unreadable). Control characters in strings become '?'.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "ctx.h"
#include "lease-internal.h"
#include "snapshot-internal.h"
#include "util.h"

#define DEFAULT_LEASE_DIR "/run/gpuctl"
#define RECORD_MAX        16384           /* bytes: a longer record is unreadable */
#define UUID_MAX          96              /* characters of a GPU-/MIG- UUID we accept */
#define ANCESTOR_MAX      64              /* levels of the parent walk */
#define REASON_MAX        160             /* an UNUSABLE/UNINITIALISED reason */
#define LOCKS_LINE_MAX    512             /* a /proc/locks line */
#define SHARE_UNIT        (1024u * 1024u) /* bytes per locked byte of a shared lease */
#define SHARE_RANGES_MAX  1024 /* locked ranges a scan follows; more: the device counts full */
#define SHARE_SPACE       ((uint64_t)1 << 40) /* units a scan looks at (1 EiB of memory) */

struct gpuctl_lease_dir {
	char *path;    /* as opened (for messages), owned */
	int fd;        /* DIR, O_DIRECTORY */
	int locks_fd;  /* DIR/locks, -1 when missing and not ours to create */
	int owners_fd; /* DIR/owners, -1 when missing (no records then) */
	int queue_fd;  /* DIR/queue, -1 when missing (no waiters then) */
	uid_t owner;   /* DIR's owner: root (shared) or the caller (personal) */
	bool ours;     /* owner == euid: we create lock files */
};

/* An owner record as read back (strings owned). */
struct record {
	uid_t uid;                /* from the file system: owners/<uid>/ */
	char uuid[UUID_MAX + 1];  /* the device, from the file name */
	uint32_t pid;             /* holder */
	uint64_t pid_start_ticks; /* holder's start, clock ticks since boot */
	uint32_t job_pid;         /* job, 0 if none */
	uint64_t job_start_ticks; /* job's start, ticks since boot */
	uint64_t start_time;      /* holder's start, seconds since the epoch */
	char *user;               /* user name, or NULL */
	char *command;            /* command line, or NULL */
	char *label;              /* label, or NULL */
	uint64_t share_mem;       /* bytes a shared lease declared; 0: exclusive */
	bool shared;              /* a shared lease's record (<UUID>@<tag>.json) */
	bool pid_alive;           /* pid is alive with that start time and owner */
	bool job_alive;           /* job_pid likewise */
};

struct lease_dev {
	int fd;                  /* the locked description, O_CLOEXEC */
	size_t gpu;              /* snapshot index */
	int mig;                 /* MIG index, -1 for the whole GPU */
	char uuid[UUID_MAX + 1]; /* its UUID */
};

struct gpuctl_lease {
	struct lease_dev *devs; /* the leased devices, owned */
	size_t n;               /* entries in devs */
	uint64_t share_mem;     /* bytes declared per device; 0: exclusive */
	uint32_t tag;           /* a shared lease's record names: <UUID>@<tag>.json (creator pid) */
	int user_fd;            /* owners/<euid>/, -1 when records cannot be written */
	char *command;          /* for the records, owned, may be NULL */
	char *label;            /* for the records, owned, may be NULL */
};

struct list_entry {
	size_t gpu;                           /* snapshot index */
	int mig;                              /* MIG index, -1 for the whole GPU */
	enum gpuctl_lease_state state;        /* what the probe found */
	char *reason;                         /* UNUSABLE/UNINITIALISED: why; owned */
	bool has_owner;                       /* owner is filled */
	struct gpuctl_lease_owner owner;      /* strings point into rec */
	struct record rec;                    /* the chosen record (strings owned) */
	uint64_t declared;                    /* SHARED: bytes the shared leases' locks declare */
	struct record *sh_recs;               /* SHARED: the counting records (owned) */
	struct gpuctl_lease_owner *sh_owners; /* their owner facts, strings in sh_recs */
	const struct gpuctl_lease_owner **sh_ptrs; /* pointers to sh_owners, for the API */
	size_t n_sh;                               /* entries in the three */
};

struct gpuctl_lease_list {
	struct list_entry *e; /* GPUs, each followed by its MIG devices; owned */
	size_t n;             /* entries in e */
};

/* ---- small helpers ---- */

static void record_clear(struct record *r)
{
	free(r->user);
	free(r->command);
	free(r->label);
	r->user = r->command = r->label = NULL;
}

static void records_free(struct record *r, size_t n)
{
	for (size_t i = 0; r && i < n; i++)
		record_clear(&r[i]);
	free(r);
}

/* A GPU-/MIG- UUID made of hex digits and dashes only: never a path. */
static bool uuid_ok(const char *u)
{
	size_t n;

	if (!u || (strncmp(u, "GPU-", 4) != 0 && strncmp(u, "MIG-", 4) != 0))
		return false;
	n = strlen(u);
	if (n <= 4 || n > UUID_MAX)
		return false;
	return strspn(u + 4, "0123456789abcdefABCDEF-") == n - 4;
}

/* Strict decimal (no sign, no blanks) of exactly len characters. */
static bool parse_u64(const char *s, size_t len, uint64_t *ret)
{
	uint64_t v = 0;

	if (len == 0 || len > 20)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		if (v > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	*ret = v;
	return true;
}

/* The next blank-separated token of *s (NUL-terminated in place), NULL at the end. */
static char *next_tok(char **s)
{
	char *p = *s, *t;

	while (*p == ' ' || *p == '\n')
		p++;
	if (!*p)
		return NULL;
	t = p;
	while (*p && *p != ' ' && *p != '\n')
		p++;
	if (*p)
		*p++ = '\0';
	*s = p;
	return t;
}

/* Reads at most max bytes of fd; -EFBIG when there is more. *ret is NUL-terminated. */
static int read_all(int fd, size_t max, char **ret, size_t *ret_len)
{
	_cleanup_free_ char *b = malloc(max + 2);
	size_t len = 0;

	if (!b)
		return -ENOMEM;
	for (;;) {
		ssize_t k = read(fd, b + len, max + 1 - len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			break;
		len += (size_t)k;
		if (len > max)
			return -EFBIG;
	}
	b[len] = '\0';
	*ret_len = len;
	*ret = TAKE_PTR(b);
	return 0;
}

static int write_all(int fd, const char *p, size_t len)
{
	while (len > 0) {
		ssize_t k = write(fd, p, len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

/* /proc/<pid>/stat: parent and start time (field 22, clock ticks since boot). */
static int proc_stat(pid_t pid, pid_t *ret_ppid, uint64_t *ret_start)
{
	char path[64], buf[1024];
	_cleanup_close_ int fd = -1;
	ssize_t k;
	char *p, *cur;
	uint64_t v;
	int field = 2;

	if (pid <= 0)
		return -ESRCH;
	(void)snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	k = read(fd, buf, sizeof(buf) - 1);
	if (k <= 0)
		return -EIO;
	buf[k] = '\0';
	p = strrchr(buf, ')'); /* comm may hold anything, even ')': the last one ends it */
	if (!p)
		return -EIO;
	cur = p + 1;
	for (char *t = next_tok(&cur); t; t = next_tok(&cur)) {
		field++;
		/* a zombie has ended: it holds no descriptor, so no lease (no init reaps it in
		 * some containers) */
		if (field == 3 && (t[0] == 'Z' || t[0] == 'X'))
			return -ESRCH;
		if (field == 4 && ret_ppid) {
			if (!parse_u64(t, strlen(t), &v) || v > INT32_MAX)
				return -EIO;
			*ret_ppid = (pid_t)v;
		}
		if (field == 22) {
			if (!parse_u64(t, strlen(t), &v))
				return -EIO;
			if (ret_start)
				*ret_start = v;
			return 0;
		}
	}
	return -EIO;
}

/* The owner of a process (its effective uid, as /proc/<pid> shows it). */
static int proc_uid(pid_t pid, uid_t *ret_uid)
{
	char path[64];
	struct stat st;

	(void)snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (stat(path, &st) < 0)
		return -errno;
	*ret_uid = st.st_uid;
	return 0;
}

/* Whether pid lives, started at start_ticks and belongs to uid. */
static bool proc_matches(uint32_t pid, uint64_t start_ticks, uid_t uid)
{
	uint64_t st = 0;
	uid_t u = (uid_t)-1;

	if (pid <= 1 || pid > INT32_MAX)
		return false;
	if (proc_stat((pid_t)pid, NULL, &st) < 0 || st != start_ticks)
		return false;
	return proc_uid((pid_t)pid, &u) == 0 && u == uid;
}

/* Boot time, seconds since the epoch (/proc/stat btime); 0 if unknown. */
static uint64_t boot_time(void)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/stat", "re");
	char line[256];
	uint64_t v;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "btime ", 6) == 0 &&
		    parse_u64(line + 6, strcspn(line + 6, "\n"), &v))
			return v;
	return 0;
}

static uint64_t ticks_to_epoch(uint64_t ticks)
{
	long hz = sysconf(_SC_CLK_TCK);
	uint64_t b = boot_time();

	if (hz <= 0 || b == 0)
		return 0;
	return b + ticks / (uint64_t)hz;
}

static char *user_name(uid_t uid)
{
	struct passwd pw, *res = NULL;
	char buf[4096];

	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) != 0 || !res || !res->pw_name)
		return NULL;
	return strdup(res->pw_name);
}

/* The pid that took the flock on (dev, ino) per /proc/locks; 0 if unknown. Pids of lines
 * that match the inode but not the device count only when no line matches both (overlay
 * file systems report another device). */
static pid_t lock_holder(dev_t dev, ino_t ino)
{
	_cleanup_fclose_ FILE *f = fopen("/proc/locks", "re");
	char line[LOCKS_LINE_MAX];
	pid_t ino_only = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *cur = line, *tok[8];
		size_t n = 0;
		uint64_t pid, inode;
		unsigned maj, min;
		char *colon;

		if (strstr(line, "->") || !strstr(line, "FLOCK"))
			continue;
		for (char *t = next_tok(&cur); t && n < ELEMENTSOF(tok); t = next_tok(&cur))
			tok[n++] = t;
		/* "1:" "FLOCK" "ADVISORY" "WRITE" pid "maj:min:ino" start end */
		if (n < 6 || !streq(tok[1], "FLOCK") || !streq(tok[3], "WRITE"))
			continue;
		if (!parse_u64(tok[4], strlen(tok[4]), &pid) || pid > INT32_MAX)
			continue;
		colon = strrchr(tok[5], ':');
		if (!colon || !parse_u64(colon + 1, strlen(colon + 1), &inode) ||
		    inode != (uint64_t)ino)
			continue;
		*colon = '\0';
		if (sscanf(tok[5], "%x:%x", &maj, &min) == 2 && maj == major(dev) &&
		    min == minor(dev))
			return (pid_t)pid;
		if (!ino_only)
			ino_only = (pid_t)pid;
	}
	return ino_only;
}

/* ---- the directory ---- */

/* Checks an opened directory entry: type, owner (want_uid, or root/euid when (uid_t)-1), and
 * no group/other write (unless sticky_ok and the sticky bit is set). */
static int check_fd(struct gpuctl_ctx *ctx, int fd, const char *path, bool want_dir, uid_t want_uid,
                    bool sticky_ok, struct stat *ret_st)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return ctx_error(ctx, -errno, "lease directory '%s': %s", path, strerror(errno));
	if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
		return ctx_error(ctx, -EPERM, "lease directory '%s': not a %s", path,
		                 want_dir ? "directory" : "regular file");
	if (want_uid == (uid_t)-1 ? (st.st_uid != 0 && st.st_uid != geteuid())
	                          : st.st_uid != want_uid)
		return ctx_error(ctx, -EPERM, "lease directory '%s': owned by uid %u, not by %s",
		                 path, (unsigned)st.st_uid,
		                 want_uid == (uid_t)-1 ? "root or you" : "the directory's owner");
	if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(sticky_ok && (st.st_mode & S_ISVTX)))
		return ctx_error(ctx, -EPERM,
		                 "lease directory '%s': writable by group or others (mode %04o)",
		                 path, (unsigned)(st.st_mode & 07777));
	if (ret_st)
		*ret_st = st;
	return 0;
}

/* Opens name under dfd (a directory, or a regular file) with O_NOFOLLOW; creates it with mode
 * when create (fchmod after, umask-independent). -ENOENT when missing and not created. */
static int open_at(struct gpuctl_ctx *ctx, int dfd, const char *name, const char *path, bool dir,
                   bool create, mode_t mode, int *ret_fd)
{
	int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (dir ? O_DIRECTORY : O_NONBLOCK);
	_cleanup_close_ int fd = -1;
	bool created = false;

	fd = openat(dfd, name, flags);
	if (fd < 0 && errno == ENOENT && create) {
		if (dir) {
			if (mkdirat(dfd, name, 0700) < 0 && errno != EEXIST)
				return ctx_error(ctx, -errno,
				                 "lease directory '%s': cannot create: %s", path,
				                 strerror(errno));
			created = errno != EEXIST;
			fd = openat(dfd, name, flags);
		} else {
			fd = openat(dfd, name, flags | O_CREAT | O_EXCL, 0600);
			created = fd >= 0;
			if (fd < 0 && errno == EEXIST)
				fd = openat(dfd, name, flags);
		}
	}
	if (fd < 0) {
		int e = errno;

		if (e == ENOENT)
			return -ENOENT;
		if (e == ELOOP || e == ENOTDIR) {
			struct stat lst; /* for the message only: the open refused it already */
			bool link =
			        e == ELOOP || (fstatat(dfd, name, &lst, AT_SYMLINK_NOFOLLOW) == 0 &&
			                       S_ISLNK(lst.st_mode));

			return ctx_error(ctx, -EPERM, "lease directory '%s': %s", path,
			                 link ? "is a symlink" : "not a directory");
		}
		return ctx_error(ctx, -e, "lease directory '%s': %s", path, strerror(e));
	}
	if (created && fchmod(fd, mode) < 0)
		return ctx_error(ctx, -errno, "lease directory '%s': chmod: %s", path,
		                 strerror(errno));
	*ret_fd = TAKE_FD(fd);
	return 0;
}

void gpuctl_lease_dir_free(struct gpuctl_lease_dir *dir)
{
	if (!dir)
		return;
	closep(&dir->fd);
	closep(&dir->locks_fd);
	closep(&dir->owners_fd);
	closep(&dir->queue_fd);
	free(dir->path);
	free(dir);
}

const char *gpuctl_lease_dir_path(const struct gpuctl_lease_dir *dir)
{
	return dir ? dir->path : NULL;
}

/* Opens DIR itself, creating its last component when we may (root, or the parent is ours). */
static int open_top(struct gpuctl_ctx *ctx, const char *path, int *ret_fd)
{
	_cleanup_free_ char *parent = NULL;
	_cleanup_close_ int pfd = -1;
	const char *base;
	struct stat pst;
	size_t len = strlen(path);
	char *slash;
	int r;

	r = open_at(ctx, AT_FDCWD, path, path, true, false, 0, ret_fd);
	if (r != -ENOENT)
		return r;
	while (len > 1 && path[len - 1] == '/')
		len--;
	parent = strndup(path, len);
	if (!parent)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	slash = strrchr(parent, '/');
	if (slash) {
		*slash = '\0';
		base = slash + 1;
	} else {
		base = parent;
	}
	if (!*base || streq(base, ".") || streq(base, ".."))
		return ctx_error(ctx, -EINVAL, "lease directory '%s': not a usable name", path);
	pfd = open(slash ? (*parent ? parent : "/") : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0 || fstat(pfd, &pst) < 0 || (geteuid() != 0 && pst.st_uid != geteuid()))
		return ctx_error(
		        ctx, -ENOENT,
		        "lease directory '%s': missing (run `sudo gpuctl lease init`, or set "
		        "GPUCTL_LEASE_DIR to a directory of your own)",
		        path);
	return open_at(ctx, pfd, base, path, true, true, 0755, ret_fd);
}

int gpuctl_lease_dir_open(struct gpuctl_ctx *ctx, const char *path,
                          struct gpuctl_lease_dir **ret_dir)
{
	_cleanup_(gpuctl_lease_dir_freep) struct gpuctl_lease_dir *dir = NULL;
	_cleanup_close_ int sfd = -1;
	struct stat st;
	char sub[4096];
	int r;

	if (!ret_dir)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	if (!path || !*path)
		path = getenv("GPUCTL_LEASE_DIR");
	if (!path || !*path)
		path = DEFAULT_LEASE_DIR;
	dir = calloc(1, sizeof(*dir));
	if (!dir)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	dir->fd = dir->locks_fd = dir->owners_fd = dir->queue_fd = -1;
	dir->path = strdup(path);
	if (!dir->path)
		return ctx_error(ctx, -ENOMEM, "out of memory");

	r = open_top(ctx, path, &dir->fd);
	if (r < 0)
		return r;
	r = check_fd(ctx, dir->fd, path, true, (uid_t)-1, false, &st);
	if (r < 0)
		return r;
	dir->owner = st.st_uid;
	dir->ours = st.st_uid == geteuid();

	(void)snprintf(sub, sizeof(sub), "%s/locks", path);
	r = open_at(ctx, dir->fd, "locks", sub, true, dir->ours, 0755, &dir->locks_fd);
	if (r < 0 && r != -ENOENT)
		return r;
	if (r == 0) {
		r = check_fd(ctx, dir->locks_fd, sub, true, dir->owner, false, NULL);
		if (r < 0)
			return r;
	}

	(void)snprintf(sub, sizeof(sub), "%s/select.lock", path);
	r = open_at(ctx, dir->fd, "select.lock", sub, false, dir->ours, 0644, &sfd);
	if (r == -ENOENT)
		return ctx_error(
		        ctx, -ENOENT,
		        "lease directory '%s': no select.lock (run `sudo gpuctl lease init`, "
		        "or set GPUCTL_LEASE_DIR to a directory of your own)",
		        path);
	if (r < 0)
		return r;
	r = check_fd(ctx, sfd, sub, false, dir->owner, false, NULL);
	if (r < 0)
		return r;

	/* owners/: 1777 in a shared (root's) directory, 0755 in a personal one */
	(void)snprintf(sub, sizeof(sub), "%s/owners", path);
	r = open_at(ctx, dir->fd, "owners", sub, true, dir->ours,
	            dir->owner == 0 ? (S_ISVTX | 0777) : 0755, &dir->owners_fd);
	if (r < 0 && r != -ENOENT)
		return r;
	if (r == 0) {
		r = check_fd(ctx, dir->owners_fd, sub, true, dir->owner, dir->owner == 0, NULL);
		if (r < 0)
			return r;
	}

	/* queue/: the waiters' tickets, made like owners/ */
	(void)snprintf(sub, sizeof(sub), "%s/queue", path);
	r = open_at(ctx, dir->fd, "queue", sub, true, dir->ours,
	            dir->owner == 0 ? (S_ISVTX | 0777) : 0755, &dir->queue_fd);
	if (r < 0 && r != -ENOENT)
		return r;
	if (r == 0) {
		r = check_fd(ctx, dir->queue_fd, sub, true, dir->owner, dir->owner == 0, NULL);
		if (r < 0)
			return r;
	}
	*ret_dir = TAKE_PTR(dir);
	return 0;
}

/* ---- lock files ---- */

/* Opens locks/<uuid>.lock (created when create and the directory is ours) and checks it.
 * Returns FREE with *ret_fd >= 0 (usable; not locked yet), FREE with *ret_fd == -1 (missing in
 * our directory: nobody can hold it), UNUSABLE or UNINITIALISED with the reason; -ENOMEM. */
static int lock_open(const struct gpuctl_lease_dir *dir, const char *uuid, bool create, int *ret_fd,
                     struct stat *ret_st, char *reason, size_t rsize)
{
	char name[UUID_MAX + 8];
	_cleanup_close_ int fd = -1;
	int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
	struct stat st;

	*ret_fd = -1;
	if (!uuid_ok(uuid)) {
		(void)snprintf(reason, rsize, "%s UUID, not usable as a lock file name",
		               uuid ? "unusual" : "no");
		return GPUCTL_LEASE_UNUSABLE;
	}
	if (dir->locks_fd < 0) {
		(void)snprintf(reason, rsize, "no %s/locks (run `sudo gpuctl lease init`)",
		               dir->path);
		return GPUCTL_LEASE_UNINITIALISED;
	}
	(void)snprintf(name, sizeof(name), "%s.lock", uuid);
	fd = openat(dir->locks_fd, name, flags);
	if (fd < 0 && errno == ENOENT && create && dir->ours) {
		fd = openat(dir->locks_fd, name, flags | O_CREAT | O_EXCL, 0600);
		if (fd >= 0 && fchmod(fd, 0644) < 0) {
			(void)snprintf(reason, rsize, "locks/%s: chmod: %s", name, strerror(errno));
			return GPUCTL_LEASE_UNUSABLE;
		}
		if (fd < 0 && errno == EEXIST)
			fd = openat(dir->locks_fd, name, flags);
	}
	if (fd < 0) {
		if (errno == ENOENT && dir->ours)
			return GPUCTL_LEASE_FREE;
		if (errno == ENOENT) {
			(void)snprintf(reason, rsize,
			               "no lock file locks/%s (run `sudo gpuctl lease init`)",
			               name);
			return GPUCTL_LEASE_UNINITIALISED;
		}
		(void)snprintf(reason, rsize, "locks/%s: %s", name,
		               errno == ELOOP ? "is a symlink" : strerror(errno));
		return GPUCTL_LEASE_UNUSABLE;
	}
	if (fstat(fd, &st) < 0) {
		(void)snprintf(reason, rsize, "locks/%s: %s", name, strerror(errno));
		return GPUCTL_LEASE_UNUSABLE;
	}
	if (!S_ISREG(st.st_mode)) {
		(void)snprintf(reason, rsize, "locks/%s: not a regular file", name);
		return GPUCTL_LEASE_UNUSABLE;
	}
	if (st.st_uid != dir->owner) {
		(void)snprintf(reason, rsize,
		               "locks/%s: owned by uid %u, not the directory's owner", name,
		               (unsigned)st.st_uid);
		return GPUCTL_LEASE_UNUSABLE;
	}
	if (st.st_nlink != 1) {
		(void)snprintf(reason, rsize, "locks/%s: has %ju links", name,
		               (uintmax_t)st.st_nlink);
		return GPUCTL_LEASE_UNUSABLE;
	}
	if (ret_st)
		*ret_st = st;
	*ret_fd = TAKE_FD(fd);
	return GPUCTL_LEASE_FREE;
}

/* The lease request's fields as this library knows them (a caller built against an older header
 * passes a smaller struct: the rest keep their defaults). */
static void lease_request_copy(struct gpuctl_lease_request *dst,
                               const struct gpuctl_lease_request *src)
{
	*dst = (struct gpuctl_lease_request)GPUCTL_LEASE_REQUEST_INIT;
	if (src)
		memcpy(dst, src, src->struct_size < sizeof(*dst) ? src->struct_size : sizeof(*dst));
	dst->struct_size = sizeof(*dst);
}

/* ---- sharing (docs/leases.md "Sharing") ----
 *
 * A shared lease holds a shared flock on the device's lock file (so no exclusive lease can be
 * taken) and, on the same open file description, OFD read locks on byte ranges of that file:
 * byte k stands for MiB k of the device's memory, and the bytes a lease locks are the memory it
 * declared. The kernel drops both with the description, so the declared total is always the
 * live leases' own, whatever the records say. Ranges are placed under select.lock, never
 * overlapping; a scan asks F_OFD_GETLK for a write lock (which any read lock conflicts with).
 */

struct share_range {
	uint64_t start, end; /* units, [start, end) */
};

/* Appends the locked ranges of fd's file within [a, b) to v (*n entries). The kernel answers
 * with one conflicting lock at a time; the part left of it is asked again (recursion), the part
 * right of it by the loop. -E2BIG past SHARE_RANGES_MAX. */
static int share_collect(int fd, uint64_t a, uint64_t b, struct share_range *v, size_t *n)
{
	while (a < b) {
		struct flock q = {.l_type = F_WRLCK,
		                  .l_whence = SEEK_SET,
		                  .l_start = (off_t)a,
		                  .l_len = (off_t)(b - a)};
		uint64_t s, e;

		if (fcntl(fd, F_OFD_GETLK, &q) < 0)
			return -errno;
		if (q.l_type == F_UNLCK)
			return 0;
		if (*n >= SHARE_RANGES_MAX)
			return -E2BIG;
		s = q.l_start < (off_t)a ? a : (uint64_t)q.l_start;
		e = q.l_len <= 0 || (uint64_t)q.l_start + (uint64_t)q.l_len > b
		            ? b
		            : (uint64_t)q.l_start + (uint64_t)q.l_len;
		if (e <= s)
			return -EIO; /* a conflict always overlaps what was asked */
		v[(*n)++] = (struct share_range){s, e};
		if (s > a) {
			int r = share_collect(fd, a, s, v, n);

			if (r < 0)
				return r;
		}
		a = e;
	}
	return 0;
}

static int share_range_cmp(const void *x, const void *y)
{
	const struct share_range *a = x, *b = y;

	return a->start < b->start ? -1 : a->start > b->start;
}

/* The locked ranges of fd's file, sorted and merged (*ret_v owned by the caller), and the units
 * they cover. */
static int share_scan(int fd, struct share_range **ret_v, size_t *ret_n, uint64_t *ret_used)
{
	_cleanup_free_ struct share_range *v = calloc(SHARE_RANGES_MAX, sizeof(*v));
	size_t n = 0, m = 0;
	uint64_t used = 0;
	int r;

	if (!v)
		return -ENOMEM;
	r = share_collect(fd, 0, SHARE_SPACE, v, &n);
	if (r < 0)
		return r;
	qsort(v, n, sizeof(*v), share_range_cmp);
	for (size_t i = 0; i < n; i++) {
		if (m > 0 && v[i].start <= v[m - 1].end) {
			if (v[i].end > v[m - 1].end)
				v[m - 1].end = v[i].end;
			continue;
		}
		v[m++] = v[i];
	}
	for (size_t i = 0; i < m; i++)
		used += v[i].end - v[i].start;
	if (ret_v)
		*ret_v = TAKE_PTR(v);
	if (ret_n)
		*ret_n = m;
	*ret_used = used;
	return 0;
}

/* Locks need units of the free space below cap (units) on fd, lowest first. -ENOSPC when there
 * is not that much. Under select.lock: nothing else places ranges meanwhile. */
static int share_take(int fd, uint64_t need, uint64_t cap)
{
	_cleanup_free_ struct share_range *v = NULL;
	size_t n = 0;
	uint64_t used = 0, at = 0;
	int r = share_scan(fd, &v, &n, &used);

	if (r < 0)
		return r;
	for (size_t i = 0; need > 0 && at < cap && i <= n; i++) {
		uint64_t gap_end = i < n ? v[i].start : cap;
		uint64_t len;
		struct flock l = {.l_type = F_RDLCK, .l_whence = SEEK_SET};

		if (gap_end > cap)
			gap_end = cap;
		if (gap_end > at) {
			len = gap_end - at < need ? gap_end - at : need;
			l.l_start = (off_t)at;
			l.l_len = (off_t)len;
			if (fcntl(fd, F_OFD_SETLK, &l) < 0)
				return -errno;
			need -= len;
		}
		if (i < n && v[i].end > at)
			at = v[i].end;
	}
	return need > 0 ? -ENOSPC : 0;
}

/* A device's total memory in bytes (0 when unknown: nothing can be shared on it). */
static uint64_t device_memory(const struct gpuctl_snapshot *snap, size_t g, int mig)
{
	int64_t v = 0;

	if (mig < 0)
		(void)gpuctl_gpu_int(&snap->gpus[g], GPUCTL_F_MEMORY_TOTAL, &v);
	else if (snap->gpus[g].migs[mig].valid[GPUCTL_MIG_MEMORY_TOTAL])
		v = snap->gpus[g].migs[mig].ints[GPUCTL_MIG_MEMORY_TOTAL];
	return v > 0 ? (uint64_t)v : 0;
}

/* "10 GiB", "512 MiB" or "1234 B": the largest binary unit that divides bytes exactly. */
static const char *size_text_of(uint64_t bytes, char *buf, size_t size)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	size_t u = 0;

	while (u + 1 < ELEMENTSOF(units) && bytes >= 1024 && bytes % 1024 == 0) {
		bytes /= 1024;
		u++;
	}
	(void)snprintf(buf, size, "%" PRIu64 " %s", bytes, units[u]);
	return buf;
}

/* Units of a device of total bytes that shared leases may declare: total less the margin. */
static uint64_t share_capacity(uint64_t total, const struct gpuctl_lease_request *lr)
{
	uint64_t margin;

	if (!lr->share_margin_is_pct)
		margin = lr->share_margin;
	else if (lr->share_margin >= 100)
		margin = total;
	else if (total <= UINT64_MAX / 100)
		margin = (total * lr->share_margin + 99) / 100; /* rounded up: the safe side */
	else
		margin = total / 100 * lr->share_margin + total / 100;

	return margin >= total ? 0 : (total - margin) / SHARE_UNIT;
}

/* Probes a device: a non-blocking exclusive flock on a fresh description (dropped at once);
 * when that fails, a shared one tells SHARED from HELD. For SHARED, *ret_used (when asked)
 * gets the units its shared leases declare (UINT64_MAX when they cannot be counted). */
static int probe_used(const struct gpuctl_lease_dir *dir, const char *uuid, bool create,
                      struct stat *ret_st, uint64_t *ret_used, char *reason, size_t rsize)
{
	_cleanup_close_ int fd = -1;
	int s = lock_open(dir, uuid, create, &fd, ret_st, reason, rsize);

	if (ret_used)
		*ret_used = 0;
	if (s != GPUCTL_LEASE_FREE || fd < 0)
		return s;
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return GPUCTL_LEASE_FREE; /* closing fd drops it */
	if (errno == EWOULDBLOCK && flock(fd, LOCK_SH | LOCK_NB) == 0) {
		if (ret_used && share_scan(fd, NULL, NULL, ret_used) < 0)
			*ret_used = UINT64_MAX;
		return GPUCTL_LEASE_SHARED;
	}
	if (errno == EWOULDBLOCK)
		return GPUCTL_LEASE_HELD;
	(void)snprintf(reason, rsize, "locks/%s.lock: flock: %s", uuid, strerror(errno));
	return GPUCTL_LEASE_UNUSABLE;
}

static int probe(const struct gpuctl_lease_dir *dir, const char *uuid, bool create,
                 struct stat *ret_st, char *reason, size_t rsize)
{
	return probe_used(dir, uuid, create, ret_st, NULL, reason, rsize);
}

static bool held(int state)
{
	return state == GPUCTL_LEASE_HELD || state == GPUCTL_LEASE_SHARED;
}

/* A shared lock on select.lock for readers that probe lock files (list, foreign, ps): probes
 * take flocks themselves, and one taken while a select-and-lease runs could make it see a free
 * device as leased. Returns the descriptor to close, or -1 when select.lock is missing or
 * unsafe (then probe without it: a reader's result is a moment's view anyway). */
static int select_lock_shared(const struct gpuctl_lease_dir *dir)
{
	_cleanup_close_ int fd =
	        openat(dir->fd, "select.lock", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != dir->owner ||
	    (st.st_mode & (S_IWGRP | S_IWOTH)))
		return -1;
	while (flock(fd, LOCK_SH) < 0)
		if (errno != EINTR)
			return -1;
	return TAKE_FD(fd);
}

static const char *dev_uuid(const struct gpuctl_snapshot *snap, size_t g, int mig)
{
	return mig < 0 ? gpuctl_gpu_str(&snap->gpus[g], GPUCTL_F_UUID)
	               : snap->gpus[g].migs[mig].uuid;
}

uint32_t gpuctl_lease_dir_owner(const struct gpuctl_lease_dir *dir)
{
	return dir ? (uint32_t)dir->owner : 0;
}

#define CONFIG_PIN_MAX 4096 /* bytes of DIR/config */

int gpuctl_lease_dir_config(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir,
                            char **ret_path)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *text = NULL;
	struct stat st;
	size_t len = 0;
	int r;

	if (!dir || !ret_path)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	*ret_path = NULL;
	fd = openat(dir->fd, "config", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0)
		return ctx_error(ctx, -errno, "'%s/config': %s", dir->path,
		                 errno == ELOOP ? "is a symlink" : strerror(errno));
	if (fstat(fd, &st) < 0)
		return ctx_error(ctx, -errno, "'%s/config': %s", dir->path, strerror(errno));
	if (!S_ISREG(st.st_mode) || st.st_uid != dir->owner || st.st_nlink != 1 ||
	    (st.st_mode & (S_IWGRP | S_IWOTH)))
		return ctx_error(
		        ctx, -EPERM,
		        "'%s/config': not a regular file of the directory's owner that only "
		        "it may write",
		        dir->path);
	r = read_all(fd, CONFIG_PIN_MAX, &text, &len);
	if (r < 0)
		return ctx_error(ctx, r, "'%s/config': %s", dir->path, strerror(-r));
	while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == ' '))
		text[--len] = '\0';
	if (len == 0 || text[0] != '/' || memchr(text, '\0', len) || strchr(text, '\n'))
		return ctx_error(
		        ctx, -EINVAL,
		        "'%s/config': not one absolute path (written by `gpuctl lease init`)",
		        dir->path);
	*ret_path = TAKE_PTR(text);
	return 0;
}

int gpuctl_lease_dir_set_config(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                                const char *path)
{
	char tmp[32];
	_cleanup_close_ int fd = -1;
	int r = 0;

	if (!dir ||
	    (path && (path[0] != '/' || strchr(path, '\n') || strlen(path) >= CONFIG_PIN_MAX)))
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	if (!dir->ours)
		return ctx_error(ctx, -EPERM,
		                 "lease directory '%s': only its owner (uid %u) may name its "
		                 "configuration",
		                 dir->path, (unsigned)dir->owner);
	if (!path) {
		if (unlinkat(dir->fd, "config", 0) < 0 && errno != ENOENT)
			return ctx_error(ctx, -errno, "'%s/config': %s", dir->path,
			                 strerror(errno));
		return 0;
	}
	(void)snprintf(tmp, sizeof(tmp), ".config-%d", (int)getpid());
	(void)unlinkat(dir->fd, tmp, 0);
	fd = openat(dir->fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || fchmod(fd, 0644) < 0)
		r = -errno;
	if (r == 0)
		r = write_all(fd, path, strlen(path));
	if (r == 0)
		r = write_all(fd, "\n", 1);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (r == 0 && renameat(dir->fd, tmp, dir->fd, "config") < 0)
		r = -errno;
	if (r < 0) {
		(void)unlinkat(dir->fd, tmp, 0);
		return ctx_error(ctx, r, "'%s/config': %s", dir->path, strerror(-r));
	}
	return 0;
}

int gpuctl_lease_dir_init(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                          const struct gpuctl_snapshot *snap)
{
	int created = 0;

	if (!dir || !snap)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	if (!dir->ours || dir->locks_fd < 0)
		return ctx_error(
		        ctx, -EPERM,
		        "lease directory '%s': only its owner (uid %u) may create lock files",
		        dir->path, (unsigned)dir->owner);
	for (size_t g = 0; g < snap->n_gpus; g++)
		for (int m = -1; m < (int)snap->gpus[g].n_migs; m++) {
			const char *u = dev_uuid(snap, g, m);
			char name[UUID_MAX + 8];
			_cleanup_close_ int fd = -1;

			if (!uuid_ok(u))
				continue;
			(void)snprintf(name, sizeof(name), "%s.lock", u);
			fd = openat(dir->locks_fd, name,
			            O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
			if (fd < 0 && errno == EEXIST)
				continue;
			if (fd < 0 || fchmod(fd, 0644) < 0)
				return ctx_error(ctx, -errno, "lease directory '%s': locks/%s: %s",
				                 dir->path, name, strerror(errno));
			created++;
		}
	return created;
}

/* ---- owner records: writing ---- */

struct sbuf {
	char *p;    /* text, NUL-terminated, owned */
	size_t len; /* bytes used */
	size_t cap; /* bytes allocated */
	bool oom;   /* an append failed */
};

static void sb_add(struct sbuf *b, const char *fmt, ...) _printf_(2, 3);
static void sb_add(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int w;

	if (b->oom)
		return;
	va_start(ap, fmt);
	w = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (w < 0 || b->len + (size_t)w + 1 > RECORD_MAX * 4) {
		b->oom = true;
		return;
	}
	if (b->len + (size_t)w + 1 > b->cap) {
		size_t cap = (b->len + (size_t)w + 1) * 2;
		char *p = realloc(b->p, cap);

		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	va_start(ap, fmt);
	(void)vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	va_end(ap);
	b->len += (size_t)w;
}

/* A JSON string (or null), at most max input bytes (longer text is cut). */
static void sb_str(struct sbuf *b, const char *s, size_t max)
{
	if (!s) {
		sb_add(b, "null");
		return;
	}
	sb_add(b, "\"");
	for (size_t i = 0; s[i] && i < max; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\')
			sb_add(b, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			sb_add(b, "\\u%04x", c);
		else
			sb_add(b, "%c", c);
	}
	sb_add(b, "\"");
}

/* Opens (creating when create) owners/<euid>/, checked: a real directory of euid, 0755. */
static int user_dir_open(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir, bool create,
                         int *ret_fd)
{
	char name[32], path[4096];
	_cleanup_close_ int fd = -1;
	int r;

	if (dir->owners_fd < 0)
		return -ENOENT;
	(void)snprintf(name, sizeof(name), "%u", (unsigned)geteuid());
	(void)snprintf(path, sizeof(path), "%s/owners/%s", dir->path, name);
	r = open_at(ctx, dir->owners_fd, name, path, true, create, 0755, &fd);
	if (r < 0)
		return r;
	r = check_fd(ctx, fd, path, true, geteuid(), false, NULL);
	if (r < 0)
		return r;
	*ret_fd = TAKE_FD(fd);
	return 0;
}

/* Writes owners/<euid>/<name> atomically: a temporary file of a random name, fsync, renameat. */
static int record_write(int ufd, const char *name, const char *text, size_t len)
{
	char tmp[64];
	_cleanup_close_ int fd = -1;
	int r;

	for (int tries = 0; fd < 0 && tries < 16; tries++) {
		uint64_t rnd = 0;

		if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
			rnd = ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL) ^
			      ((uint64_t)tries * 0x9e3779b97f4a7c15ull);
		(void)snprintf(tmp, sizeof(tmp), ".tmp-%016" PRIx64, rnd);
		fd = openat(ufd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 && errno != EEXIST)
			return -errno;
	}
	if (fd < 0)
		return -EEXIST;
	r = fchmod(fd, 0644) < 0 ? -errno : 0;
	if (r == 0)
		r = write_all(fd, text, len);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (r == 0 && renameat(ufd, tmp, ufd, name) < 0)
		r = -errno;
	if (r < 0)
		(void)unlinkat(ufd, tmp, 0);
	return r;
}

/* Writes the records of every device of lease naming pid/job_pid. */
static int lease_write_records(struct gpuctl_ctx *ctx, struct gpuctl_lease *lease, pid_t pid,
                               pid_t job_pid)
{
	uint64_t pst = 0, jst = 0;
	_cleanup_free_ char *user = user_name(geteuid());
	struct sbuf b = {0};
	int r;

	if (lease->user_fd < 0)
		return ctx_error(ctx, -ENOENT, "no owner records directory (owners/%u)",
		                 (unsigned)geteuid());
	r = proc_stat(pid, NULL, &pst);
	if (r < 0)
		return ctx_error(ctx, r, "pid %d: cannot read its start time: %s", (int)pid,
		                 strerror(-r));
	if (job_pid > 0) {
		r = proc_stat(job_pid, NULL, &jst);
		if (r < 0)
			return ctx_error(ctx, r, "pid %d: cannot read its start time: %s",
			                 (int)job_pid, strerror(-r));
	}
	for (size_t i = 0; i < lease->n; i++) {
		char name[UUID_MAX + 24];

		if (lease->share_mem > 0)
			(void)snprintf(name, sizeof(name), "%s@%" PRIu32 ".json",
			               lease->devs[i].uuid, lease->tag);
		else
			(void)snprintf(name, sizeof(name), "%s.json", lease->devs[i].uuid);
		b.len = 0;
		sb_add(&b,
		       "{\"version\":1,\"device\":\"%s\",\"pid\":%d,\"pid_start_ticks\":%" PRIu64
		       ",\"start_time\":%" PRIu64 ",\"job_pid\":%d,\"job_start_ticks\":%" PRIu64
		       ",\"uid\":%u,\"user\":",
		       lease->devs[i].uuid, (int)pid, pst, ticks_to_epoch(pst), (int)job_pid, jst,
		       (unsigned)geteuid());
		sb_str(&b, user, 256);
		sb_add(&b, ",\"command\":");
		sb_str(&b, lease->command, 4096);
		sb_add(&b, ",\"label\":");
		sb_str(&b, lease->label, 1024);
		if (lease->share_mem > 0)
			sb_add(&b, ",\"share_mem\":%" PRIu64, lease->share_mem);
		sb_add(&b, ",\"created\":%" PRIu64 "}\n", (uint64_t)time(NULL));
		if (b.oom) {
			free(b.p);
			return ctx_error(ctx, -ENOMEM, "out of memory");
		}
		r = record_write(lease->user_fd, name, b.p, b.len);
		if (r < 0) {
			free(b.p);
			return ctx_error(ctx, r, "owner record owners/%u/%s: %s",
			                 (unsigned)geteuid(), name, strerror(-r));
		}
	}
	free(b.p);
	return 0;
}

/* ---- owner records: reading (strict, bounded) ---- */

struct jp {
	const char *s; /* cursor */
	const char *e; /* end */
};

static void jp_ws(struct jp *p)
{
	while (p->s < p->e && (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r'))
		p->s++;
}

/* A JSON string into *ret (malloc'ed); control characters become '?'. */
static int jp_str(struct jp *p, char **ret)
{
	_cleanup_free_ char *out = NULL;
	size_t n = 0;

	if (p->s >= p->e || *p->s != '"')
		return -EINVAL;
	out = malloc((size_t)(p->e - p->s) * 3 + 1); /* \uXXXX (6) -> at most 3 bytes */
	if (!out)
		return -ENOMEM;
	for (p->s++; p->s < p->e && *p->s != '"'; p->s++) {
		unsigned char c = (unsigned char)*p->s;

		if (c < 0x20)
			return -EINVAL;
		if (c != '\\') {
			out[n++] = (char)(c == 0x7f ? '?' : c);
			continue;
		}
		if (++p->s >= p->e)
			return -EINVAL;
		switch (*p->s) {
		case '"':
		case '\\':
		case '/':
			out[n++] = *p->s;
			break;
		case 'b':
		case 'f':
		case 'n':
		case 'r':
		case 't':
			out[n++] = '?';
			break;
		case 'u': {
			unsigned v = 0;

			if (p->e - p->s < 5)
				return -EINVAL;
			for (int i = 1; i <= 4; i++) {
				char h = p->s[i];

				v <<= 4;
				if (h >= '0' && h <= '9')
					v |= (unsigned)(h - '0');
				else if (h >= 'a' && h <= 'f')
					v |= (unsigned)(h - 'a' + 10);
				else if (h >= 'A' && h <= 'F')
					v |= (unsigned)(h - 'A' + 10);
				else
					return -EINVAL;
			}
			p->s += 4;
			if (v >= 0xd800 && v <= 0xdfff)
				return -EINVAL; /* no surrogates: we never write them */
			if (v < 0x20 || v == 0x7f) {
				out[n++] = '?';
			} else if (v < 0x80) {
				out[n++] = (char)v;
			} else if (v < 0x800) {
				out[n++] = (char)(0xc0 | (v >> 6));
				out[n++] = (char)(0x80 | (v & 0x3f));
			} else {
				out[n++] = (char)(0xe0 | (v >> 12));
				out[n++] = (char)(0x80 | ((v >> 6) & 0x3f));
				out[n++] = (char)(0x80 | (v & 0x3f));
			}
			break;
		}
		default:
			return -EINVAL;
		}
	}
	if (p->s >= p->e)
		return -EINVAL;
	p->s++;
	out[n] = '\0';
	*ret = TAKE_PTR(out);
	return 0;
}

/* Parses a record. Keys: known ones are checked for type and may appear once; others must be a
 * string, a non-negative integer or null. pid and pid_start_ticks are required. */
static int record_parse(const char *text, size_t len, struct record *r)
{
	static const char *const keys[] = {
	        "version",    "device", "pid",  "pid_start_ticks", "job_pid", "job_start_ticks",
	        "start_time", "uid",    "user", "command",         "label",   "created",
	        "share_mem"};
	bool seen[ELEMENTSOF(keys)] = {0};
	struct jp p = {text, text + len};
	int rr;

	jp_ws(&p);
	if (p.s >= p.e || *p.s++ != '{')
		return -EINVAL;
	jp_ws(&p);
	if (p.s < p.e && *p.s == '}')
		return -EINVAL;
	for (;;) {
		_cleanup_free_ char *key = NULL, *sval = NULL;
		uint64_t num = 0;
		bool is_num = false, is_null = false;
		size_t k;

		jp_ws(&p);
		rr = jp_str(&p, &key);
		if (rr < 0)
			return rr;
		jp_ws(&p);
		if (p.s >= p.e || *p.s++ != ':')
			return -EINVAL;
		jp_ws(&p);
		if (p.s < p.e && *p.s == '"') {
			rr = jp_str(&p, &sval);
			if (rr < 0)
				return rr;
		} else if (p.e - p.s >= 4 && memcmp(p.s, "null", 4) == 0) {
			p.s += 4;
			is_null = true;
		} else {
			size_t d = 0;

			while (p.s + d < p.e && p.s[d] >= '0' && p.s[d] <= '9')
				d++;
			if (d == 0 || (d > 1 && p.s[0] == '0') || !parse_u64(p.s, d, &num))
				return -EINVAL;
			p.s += d;
			is_num = true;
		}
		for (k = 0; k < ELEMENTSOF(keys); k++)
			if (streq(key, keys[k]))
				break;
		if (k < ELEMENTSOF(keys)) {
			bool want_str = streq(key, "device") || streq(key, "user") ||
			                streq(key, "command") || streq(key, "label");

			if (seen[k])
				return -EINVAL;
			seen[k] = true;
			if (want_str ? is_num : !is_num)
				return -EINVAL;
			if ((streq(key, "pid") || streq(key, "job_pid")) && num > INT32_MAX)
				return -EINVAL;
			if (streq(key, "pid"))
				r->pid = (uint32_t)num;
			else if (streq(key, "pid_start_ticks"))
				r->pid_start_ticks = num;
			else if (streq(key, "job_pid"))
				r->job_pid = (uint32_t)num;
			else if (streq(key, "job_start_ticks"))
				r->job_start_ticks = num;
			else if (streq(key, "start_time"))
				r->start_time = num;
			else if (streq(key, "user"))
				r->user = TAKE_PTR(sval);
			else if (streq(key, "command"))
				r->command = TAKE_PTR(sval);
			else if (streq(key, "label"))
				r->label = TAKE_PTR(sval);
			else if (streq(key, "share_mem"))
				r->share_mem = num;
			else if (streq(key, "device") && !is_null && !streq(sval, r->uuid))
				return -EINVAL; /* a record copied under another name */
		}
		jp_ws(&p);
		if (p.s >= p.e)
			return -EINVAL;
		if (*p.s == ',') {
			p.s++;
			continue;
		}
		if (*p.s++ != '}')
			return -EINVAL;
		break;
	}
	jp_ws(&p);
	if (p.s != p.e || !seen[2] || !seen[3])
		return -EINVAL;
	return 0;
}

/* Reads one record file under a trusted owners/<uid>/ descriptor. */
static int record_read(int ufd, uid_t uid, const char *file, const char *uuid, struct record *r)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *text = NULL;
	struct stat st;
	size_t len = 0;
	int rr;

	fd = openat(ufd, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_uid != uid || st.st_nlink != 1)
		return -EPERM;
	if (st.st_size > RECORD_MAX)
		return -EFBIG;
	rr = read_all(fd, RECORD_MAX, &text, &len);
	if (rr < 0)
		return rr;
	if (memchr(text, '\0', len))
		return -EINVAL;
	*r = (struct record){.uid = uid};
	strscpy(r->uuid, sizeof(r->uuid), uuid);
	rr = record_parse(text, len, r);
	if (rr < 0) {
		record_clear(r);
		return rr;
	}
	r->pid_alive = proc_matches(r->pid, r->pid_start_ticks, uid);
	r->job_alive = r->job_pid > 0 && proc_matches(r->job_pid, r->job_start_ticks, uid);
	return 0;
}

static void closedirp(DIR **d)
{
	if (*d)
		(void)closedir(*d);
}

/* A record's file name: "<UUID>.json" (an exclusive lease's) or "<UUID>@<tag>.json" (a shared
 * lease's; tag: 1 to 10 digits). Writes the UUID to uuid[UUID_MAX + 1]. */
static bool record_name_parse(const char *name, char *uuid, bool *ret_shared)
{
	size_t l = strlen(name), base;
	const char *at;

	if (l <= 5 || !streq(name + l - 5, ".json"))
		return false;
	base = l - 5;
	at = memchr(name, '@', base);
	*ret_shared = at != NULL;
	if (at) {
		size_t digits = base - (size_t)(at - name) - 1;

		if (digits < 1 || digits > 10)
			return false;
		for (size_t i = 1; i <= digits; i++)
			if (at[i] < '0' || at[i] > '9')
				return false;
		base = (size_t)(at - name);
	}
	if (base > UUID_MAX)
		return false;
	memcpy(uuid, name, base);
	uuid[base] = '\0';
	return uuid_ok(uuid);
}

/* Opens dfd's directory afresh for reading (own offset) as a DIR. */
static DIR *dir_reopen(int dfd)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d;

	if (fd < 0)
		return NULL;
	d = fdopendir(fd);
	if (!d)
		(void)close(fd);
	return d;
}

/* The records that may count: readable, from trusted owners/<uid>/ directories, their holder or
 * job alive (only_uid: that user only, (uid_t)-1 all; only_uuid: that device only, NULL all).
 * Unreadable ones are logged at debug level and skipped. */
static int records_load(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir, uid_t only_uid,
                        const char *only_uuid, struct record **ret, size_t *ret_n)
{
	_cleanup_(closedirp) DIR *od = NULL;
	struct record *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;

	*ret = NULL;
	*ret_n = 0;
	if (dir->owners_fd < 0)
		return 0;
	od = dir_reopen(dir->owners_fd);
	if (!od)
		return 0;
	while ((de = readdir(od))) {
		_cleanup_close_ int ufd = -1;
		_cleanup_(closedirp) DIR *ud = NULL;
		struct dirent *fe;
		struct stat st;
		uint64_t uid;

		if (!parse_u64(de->d_name, strlen(de->d_name), &uid) || uid >= UINT32_MAX ||
		    (only_uid != (uid_t)-1 && uid != only_uid))
			continue;
		ufd = openat(dir->owners_fd, de->d_name,
		             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (ufd < 0 || fstat(ufd, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != uid ||
		    (st.st_mode & (S_IWGRP | S_IWOTH))) {
			ctx_log(ctx, GPUCTL_LOG_DEBUG, "owners/%s: not a trusted records directory",
			        de->d_name);
			continue;
		}
		ud = dir_reopen(ufd);
		while (ud && (fe = readdir(ud))) {
			char uuid[UUID_MAX + 1];
			struct record rec = {0};
			bool shared;
			int r;

			if (!record_name_parse(fe->d_name, uuid, &shared) ||
			    (only_uuid && !streq(uuid, only_uuid)))
				continue;
			r = record_read(ufd, (uid_t)uid, fe->d_name, uuid, &rec);
			rec.shared = shared;
			if (r == -ENOMEM) {
				records_free(v, n);
				return ctx_error(ctx, -ENOMEM, "out of memory");
			}
			if (r < 0) {
				ctx_log(ctx, GPUCTL_LOG_DEBUG, "owners/%s/%s: unreadable (%s)",
				        de->d_name, fe->d_name, strerror(-r));
				continue;
			}
			if (!rec.pid_alive && !rec.job_alive) {
				record_clear(&rec);
				continue;
			}
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 8;
				struct record *nv = realloc(v, nc * sizeof(*v));

				if (!nv) {
					record_clear(&rec);
					records_free(v, n);
					return ctx_error(ctx, -ENOMEM, "out of memory");
				}
				v = nv;
				cap = nc;
			}
			v[n++] = rec;
		}
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

/* Removes the caller's shared-lease records whose holder and job are both gone: each shared
 * lease has a record name of its own, so no later lease replaces them. */
static void records_prune_shared(int ufd)
{
	_cleanup_(closedirp) DIR *d = dir_reopen(ufd);
	struct dirent *de;

	while (d && (de = readdir(d))) {
		char uuid[UUID_MAX + 1];
		struct record rec = {0};
		bool shared = false, live;
		int r;

		if (!record_name_parse(de->d_name, uuid, &shared) || !shared)
			continue;
		r = record_read(ufd, geteuid(), de->d_name, uuid, &rec);
		if (r == -ENOMEM)
			return;
		live = r == 0 && (rec.pid_alive || rec.job_alive);
		record_clear(&rec);
		if (!live)
			(void)unlinkat(ufd, de->d_name, 0);
	}
}

/* ---- list ---- */

void gpuctl_lease_list_free(struct gpuctl_lease_list *list)
{
	if (!list)
		return;
	for (size_t i = 0; i < list->n; i++) {
		free(list->e[i].reason);
		record_clear(&list->e[i].rec);
		records_free(list->e[i].sh_recs, list->e[i].n_sh);
		free(list->e[i].sh_owners);
		free(list->e[i].sh_ptrs);
	}
	free(list->e);
	free(list);
}

size_t gpuctl_lease_list_count(const struct gpuctl_lease_list *list)
{
	return list ? list->n : 0;
}

int gpuctl_lease_list_get(const struct gpuctl_lease_list *list, size_t i, size_t *ret_gpu,
                          int *ret_mig, enum gpuctl_lease_state *ret_state,
                          const struct gpuctl_lease_owner **ret_owner, const char **ret_reason)
{
	const struct list_entry *e;

	if (!list || i >= list->n)
		return -EINVAL;
	e = &list->e[i];
	if (ret_gpu)
		*ret_gpu = e->gpu;
	if (ret_mig)
		*ret_mig = e->mig;
	if (ret_state)
		*ret_state = e->state;
	if (ret_owner)
		*ret_owner = e->has_owner ? &e->owner : NULL;
	if (ret_reason)
		*ret_reason = e->reason;
	return 0;
}

int gpuctl_lease_list_shares(const struct gpuctl_lease_list *list, size_t i, uint64_t *ret_declared,
                             const struct gpuctl_lease_owner *const **ret_owners, size_t *ret_n)
{
	const struct list_entry *e;

	if (!list || i >= list->n)
		return -EINVAL;
	e = &list->e[i];
	if (ret_declared)
		*ret_declared = e->declared;
	if (ret_owners)
		*ret_owners = e->sh_ptrs;
	if (ret_n)
		*ret_n = e->n_sh;
	return 0;
}

uint64_t gpuctl_lease_list_room(const struct gpuctl_lease_list *list, size_t i,
                                const struct gpuctl_snapshot *snap,
                                const struct gpuctl_lease_request *lreq)
{
	struct gpuctl_lease_request lr;
	const struct list_entry *e;
	uint64_t cap, used;

	if (!list || i >= list->n || !snap)
		return 0;
	e = &list->e[i];
	if ((e->state != GPUCTL_LEASE_FREE && e->state != GPUCTL_LEASE_SHARED) ||
	    e->gpu >= snap->n_gpus || (e->mig >= 0 && (size_t)e->mig >= snap->gpus[e->gpu].n_migs))
		return 0;
	lease_request_copy(&lr, lreq);
	cap = share_capacity(device_memory(snap, e->gpu, e->mig), &lr);
	used = e->declared / SHARE_UNIT;
	return used >= cap ? 0 : (cap - used) * SHARE_UNIT;
}

static struct gpuctl_lease_owner owner_of(const struct record *r)
{
	return (struct gpuctl_lease_owner){
	        .uid = r->uid,
	        .user = r->user,
	        .pid = r->pid,
	        .job_pid = r->job_pid,
	        .start_time = r->start_time,
	        .command = r->command,
	        .label = r->label,
	        .share_mem = r->shared ? r->share_mem : 0,
	};
}

/* Moves the counting shared records of uuid out of v into e (their slots in v are left empty). */
static int list_take_shares(struct list_entry *e, struct record *v, size_t n, const char *uuid)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		k += v[i].shared && streq(v[i].uuid, uuid);
	if (k == 0)
		return 0;
	e->sh_recs = calloc(k, sizeof(*e->sh_recs));
	e->sh_owners = calloc(k, sizeof(*e->sh_owners));
	e->sh_ptrs = calloc(k, sizeof(*e->sh_ptrs));
	if (!e->sh_recs || !e->sh_owners || !e->sh_ptrs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (!v[i].shared || !streq(v[i].uuid, uuid))
			continue;
		e->sh_recs[e->n_sh] = v[i];
		v[i] = (struct record){0};
		e->sh_owners[e->n_sh] = owner_of(&e->sh_recs[e->n_sh]);
		e->sh_ptrs[e->n_sh] = &e->sh_owners[e->n_sh];
		e->n_sh++;
	}
	return 0;
}

/* Picks the record of a HELD device (see the file-top decision); -1 if none. */
static ssize_t pick_record(const struct record *v, size_t n, const char *uuid,
                           const struct stat *st)
{
	pid_t holder = st ? lock_holder(st->st_dev, st->st_ino) : 0;
	ssize_t only = -1;
	size_t count = 0;

	for (size_t i = 0; i < n; i++) {
		if (v[i].shared || !streq(v[i].uuid, uuid))
			continue;
		if (holder > 0 && ((v[i].pid_alive || v[i].job_alive) &&
		                   ((pid_t)v[i].pid == holder || (pid_t)v[i].job_pid == holder)))
			return (ssize_t)i;
		count++;
		only = (ssize_t)i;
	}
	return holder <= 0 && count == 1 ? only : -1;
}

int gpuctl_lease_list(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                      const struct gpuctl_snapshot *snap, struct gpuctl_lease_list **ret_list)
{
	_cleanup_(gpuctl_lease_list_freep) struct gpuctl_lease_list *l = NULL;
	_cleanup_close_ int sfd = -1;
	struct record *recs = NULL;
	size_t n_recs = 0, total = 0;
	int r;

	if (!dir || !snap || !ret_list)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	sfd = select_lock_shared(dir);
	for (size_t g = 0; g < snap->n_gpus; g++)
		total += 1 + snap->gpus[g].n_migs;
	l = calloc(1, sizeof(*l));
	if (!l || !(l->e = calloc(total ? total : 1, sizeof(*l->e))))
		return ctx_error(ctx, -ENOMEM, "out of memory");
	r = records_load(ctx, dir, (uid_t)-1, NULL, &recs, &n_recs);
	if (r < 0)
		return r;
	for (size_t g = 0; g < snap->n_gpus; g++)
		for (int m = -1; m < (int)snap->gpus[g].n_migs; m++) {
			struct list_entry *e = &l->e[l->n++];
			const char *u = dev_uuid(snap, g, m);
			char reason[REASON_MAX] = "";
			struct stat st;
			uint64_t used = 0;
			ssize_t k;

			e->gpu = g;
			e->mig = m;
			e->state = (enum gpuctl_lease_state)probe_used(dir, u, false, &st, &used,
			                                               reason, sizeof(reason));
			if (e->state == GPUCTL_LEASE_UNUSABLE ||
			    e->state == GPUCTL_LEASE_UNINITIALISED) {
				e->reason = strdup(reason);
				if (!e->reason) {
					records_free(recs, n_recs);
					return ctx_error(ctx, -ENOMEM, "out of memory");
				}
			}
			if (e->state == GPUCTL_LEASE_SHARED) {
				e->declared = used > UINT64_MAX / SHARE_UNIT ? UINT64_MAX
				                                             : used * SHARE_UNIT;
				if (list_take_shares(e, recs, n_recs, u) < 0) {
					records_free(recs, n_recs);
					return ctx_error(ctx, -ENOMEM, "out of memory");
				}
				if (e->n_sh > 0) {
					e->has_owner = true;
					e->owner = e->sh_owners[0];
				}
				continue;
			}
			if (e->state != GPUCTL_LEASE_HELD)
				continue;
			k = pick_record(recs, n_recs, u, &st);
			if (k < 0)
				continue;
			e->rec = recs[k];
			recs[k] = (struct record){0}; /* taken */
			e->has_owner = true;
			e->owner = owner_of(&e->rec);
		}
	records_free(recs, n_recs);
	*ret_list = TAKE_PTR(l);
	return 0;
}

/* ---- foreign processes ---- */

/* Whether a record for uuid concerns device (g, mig): the device itself, its whole GPU, or, for a
 * whole GPU, one of its MIG devices. */
static bool record_concerns(const struct gpuctl_snapshot *snap, const char *uuid, size_t g, int mig)
{
	const char *u = dev_uuid(snap, g, -1);

	if (u && streq(u, uuid))
		return true;
	if (mig >= 0) {
		u = dev_uuid(snap, g, mig);
		return u && streq(u, uuid);
	}
	for (size_t m = 0; m < snap->gpus[g].n_migs; m++) {
		u = dev_uuid(snap, g, (int)m);
		if (u && streq(u, uuid))
			return true;
	}
	return false;
}

/* Whether pid or one of its ancestors is the holder or job of a counting record (held_rec[i])
 * that concerns device (g, mig). */
static bool belongs(const struct gpuctl_snapshot *snap, const struct record *v, size_t n,
                    const bool *held_rec, size_t g, int mig, pid_t pid)
{
	pid_t p = pid;

	for (int depth = 0; p > 1 && depth < ANCESTOR_MAX; depth++) {
		pid_t pp = 0;

		for (size_t i = 0; i < n; i++) {
			if (!held_rec[i] || !record_concerns(snap, v[i].uuid, g, mig))
				continue;
			if ((v[i].pid_alive && (pid_t)v[i].pid == p) ||
			    (v[i].job_alive && (pid_t)v[i].job_pid == p))
				return true;
		}
		if (proc_stat(p, &pp, NULL) < 0)
			return false;
		p = pp;
	}
	return false;
}

/* A device's foreign processes: how many, and their memory (UINT64_MAX when one does not say). */
struct foreign_use {
	size_t n;
	uint64_t mem;
};

/* Whether a device with foreign use u and GPU utilisation util (-1: unknown) counts as busy. */
static bool foreign_busy(const struct foreign_use *u, int util,
                         const struct gpuctl_lease_request *lr)
{
	if (u->n == 0)
		return false;
	if (lr->busy_memory == 0 || u->mem > lr->busy_memory)
		return true;
	return lr->busy_utilization >= 0 && util > lr->busy_utilization;
}

static int lease_foreign(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                         const struct gpuctl_snapshot *snap, const struct gpuctl_lease_request *lr,
                         struct gpuctl_devset **ret_set)
{
	struct gpuctl_devset *set = NULL;
	struct record *recs = NULL;
	_cleanup_free_ bool *held_rec = NULL;
	_cleanup_free_ struct foreign_use *use = NULL;
	size_t n_recs = 0, n_dev = 0;
	int r;

	r = gpuctl_devset_new(&set);
	if (r < 0)
		return ctx_error(ctx, r, "out of memory");
	if (!(snap->flags & GPUCTL_SNAP_PROCESSES)) {
		ctx_log(ctx, GPUCTL_LOG_DEBUG,
		        "leases: snapshot without processes, no foreign process detection");
		*ret_set = set;
		return 0;
	}
	/* no lease directory: no records, and no process belongs to a lease */
	r = dir ? records_load(ctx, dir, (uid_t)-1, NULL, &recs, &n_recs) : 0;
	if (r < 0) {
		gpuctl_devset_free(set);
		return r;
	}
	held_rec = calloc(n_recs ? n_recs : 1, sizeof(*held_rec));
	for (size_t g = 0; g < snap->n_gpus; g++)
		n_dev += 1 + snap->gpus[g].n_migs;
	use = calloc(n_dev ? n_dev : 1, sizeof(*use));
	if (!held_rec || !use) {
		records_free(recs, n_recs);
		gpuctl_devset_free(set);
		return ctx_error(ctx, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n_recs; i++) {
		char reason[REASON_MAX];

		held_rec[i] = held(probe(dir, recs[i].uuid, false, NULL, reason, sizeof(reason)));
	}
	for (size_t g = 0, base = 0; g < snap->n_gpus; base += 1 + snap->gpus[g].n_migs, g++) {
		const struct gpuctl_gpu *gp = &snap->gpus[g];
		int64_t util = -1;

		for (size_t i = 0; i < gp->n_procs; i++) {
			const struct gpuctl_proc *pr = &gp->procs[i];
			int mig = -1;

			if (pr->has_mig)
				for (size_t m = 0; m < gp->n_migs; m++) {
					const struct gpuctl_mig *mg = &gp->migs[m];

					if (mg->valid[GPUCTL_MIG_GI] && mg->valid[GPUCTL_MIG_CI] &&
					    pr->gi == (uint64_t)mg->ints[GPUCTL_MIG_GI] &&
					    pr->ci == (uint64_t)mg->ints[GPUCTL_MIG_CI])
						mig = (int)m;
				}
			struct foreign_use *u = &use[base + 1 + (size_t)mig];

			if (belongs(snap, recs, n_recs, held_rec, g, mig, (pid_t)pr->pid))
				continue;
			u->n++;
			if (!pr->has_memory || pr->used_memory < 0 ||
			    u->mem > UINT64_MAX - (uint64_t)pr->used_memory)
				u->mem = UINT64_MAX;
			else
				u->mem += (uint64_t)pr->used_memory;
		}
		(void)gpuctl_gpu_int(gp, GPUCTL_F_UTIL_GPU, &util);
		for (int m = -1; m < (int)gp->n_migs; m++) {
			/* a MIG device's utilisation is not known: memory decides */
			if (!foreign_busy(&use[base + 1 + (size_t)m], m < 0 ? (int)util : -1, lr))
				continue;
			r = gpuctl_devset_add(set, g, m);
			if (r < 0 && r != -EEXIST) {
				records_free(recs, n_recs);
				gpuctl_devset_free(set);
				return ctx_error(ctx, r, "out of memory");
			}
		}
	}
	records_free(recs, n_recs);
	*ret_set = set;
	return 0;
}

int gpuctl_lease_foreign(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                         const struct gpuctl_snapshot *snap,
                         const struct gpuctl_lease_request *lreq, struct gpuctl_devset **ret_set)
{
	struct gpuctl_lease_request lr;
	_cleanup_close_ int sfd = -1;

	if (!snap || !ret_set)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	lease_request_copy(&lr, lreq);
	if (dir)
		sfd = select_lock_shared(dir);
	return lease_foreign(ctx, dir, snap, &lr, ret_set);
}

/* ---- select-and-lease ---- */

void gpuctl_lease_free(struct gpuctl_lease *lease)
{
	if (!lease)
		return;
	for (size_t i = 0; i < lease->n; i++)
		closep(&lease->devs[i].fd);
	closep(&lease->user_fd);
	free(lease->devs);
	free(lease->command);
	free(lease->label);
	free(lease);
}

size_t gpuctl_lease_fds(const struct gpuctl_lease *lease, int *fds, size_t max)
{
	if (!lease)
		return 0;
	for (size_t i = 0; fds && i < lease->n && i < max; i++)
		fds[i] = lease->devs[i].fd;
	return lease->n;
}

int gpuctl_lease_set_owner(struct gpuctl_ctx *ctx, struct gpuctl_lease *lease, uint32_t pid,
                           uint32_t job_pid)
{
	if (!lease || pid > INT32_MAX || job_pid > INT32_MAX)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	return lease_write_records(ctx, lease, pid ? (pid_t)pid : getpid(), (pid_t)job_pid);
}

static int devset_merge(struct gpuctl_devset *dst, const struct gpuctl_devset *src)
{
	for (size_t i = 0; src && i < gpuctl_devset_count(src); i++) {
		size_t g;
		int m, r;

		if (gpuctl_devset_get(src, i, &g, &m) < 0)
			continue;
		r = gpuctl_devset_add(dst, g, m);
		if (r < 0 && r != -EEXIST)
			return r;
	}
	return 0;
}

/* ---- waiting (docs/leases.md "Waiting") ---- */

#define TICKET_MAX      4096 /* bytes: a longer ticket is malformed */
#define TICKET_NAME_MAX 48   /* "<arrival>-<pid>" */

/* A ticket as read back from queue/<uid>/<arrival>-<pid> (strings owned). */
struct qticket {
	uint64_t arrival;      /* from the file name */
	uint32_t pid;          /* from the file name */
	uid_t uid;             /* from the file system: queue/<uid>/ */
	int64_t since;         /* registration (the file's ctime, set by the rename) */
	bool parsed;           /* the content below was readable */
	unsigned count;        /* devices asked for */
	uint64_t min_free_mem; /* 0: any */
	int max_util;          /* -1: any */
	int numa;              /* -1: any */
	bool no_procs;         /* --no-procs */
	char *mig;             /* MIG profile, NULL: whole GPUs */
	char *only;            /* --only, NULL: none */
	char *exclude;         /* --exclude, NULL: none */
	char *within;          /* the outer allocation as comma-separated UUIDs, NULL: none */
	char *pool;            /* the pool's GPUs as comma-separated UUIDs, NULL: no pool */
	char *pool_name;       /* the pool's name, for display; NULL when not given */
};

/* The devices an older waiter could use, cached for the lifetime of a waiting ticket. */
struct qcache {
	uid_t uid;
	uint64_t arrival;
	uint32_t pid;
	bool used; /* seen in the last scan */
	struct gpuctl_devset *set;
};

struct gpuctl_wait_ticket {
	int fd;                     /* queue/<euid>/<name>, exclusively flocked; -1 once removed */
	int qfd;                    /* queue/<euid>/ */
	int ifd;                    /* inotify, -1 when it could not be set up */
	char *dir_path;             /* DIR, for inotify watches (owned) */
	char name[TICKET_NAME_MAX]; /* "<arrival>-<pid>" */
	uint64_t arrival;
	uint32_t pid;
	uint64_t fp;  /* state fingerprint at the last failed try */
	bool have_fp; /* fp is set */
	struct qcache *cache;
	size_t n_cache;
};

struct gpuctl_wait_list {
	struct qticket *t;           /* live tickets, in order (owned) */
	char **users;                /* their user names or NULL (owned) */
	struct gpuctl_wait_entry *e; /* views of t */
	size_t n;
};

static void qticket_clear(struct qticket *t)
{
	free(t->mig);
	free(t->only);
	free(t->exclude);
	free(t->within);
	free(t->pool);
	free(t->pool_name);
	t->mig = t->only = t->exclude = t->within = t->pool = t->pool_name = NULL;
}

static void qtickets_free(struct qticket *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		qticket_clear(&v[i]);
	free(v);
}

/* "<arrival>-<pid>": two strict decimals. */
static bool ticket_name_parse(const char *name, uint64_t *ret_arrival, uint32_t *ret_pid)
{
	const char *dash = strchr(name, '-');
	uint64_t a, p;

	if (!dash || !parse_u64(name, (size_t)(dash - name), &a) ||
	    !parse_u64(dash + 1, strlen(dash + 1), &p) || p == 0 || p > INT32_MAX)
		return false;
	*ret_arrival = a;
	*ret_pid = (uint32_t)p;
	return true;
}

/* Orders tickets: arrival, then uid, then pid. */
static int qticket_cmp(const void *a, const void *b)
{
	const struct qticket *x = a, *y = b;

	if (x->arrival != y->arrival)
		return x->arrival < y->arrival ? -1 : 1;
	if (x->uid != y->uid)
		return x->uid < y->uid ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return 0;
}

/* A "-1"-or-decimal value at most max. */
static bool parse_opt_int(const char *s, uint64_t max, int *ret)
{
	uint64_t v;

	if (streq(s, "-1")) {
		*ret = -1;
		return true;
	}
	if (!parse_u64(s, strlen(s), &v) || v > max)
		return false;
	*ret = (int)v;
	return true;
}

/* Parses a ticket's content (text is modified). The format is "gpuctl-wait 1" and then lines
 * "key value"; unknown keys are skipped, a repeated key, a line without a value or a bad value
 * makes it malformed. Returns whether it parsed; t's strings are set only when it did. */
static bool ticket_parse(char *text, struct qticket *t)
{
	struct qticket q = {.max_util = -1, .numa = -1};
	bool have_count = false, first = true, ok = true;
	char *line = text;

	while (ok && line && *line) {
		char *nl = strchr(line, '\n'), *val;
		uint64_t v = 0;
		char **str = NULL;

		if (nl)
			*nl = '\0';
		if (first) {
			ok = streq(line, "gpuctl-wait 1");
			first = false;
			line = nl ? nl + 1 : NULL;
			continue;
		}
		val = strchr(line, ' ');
		if (!val || !val[1]) {
			ok = false;
			break;
		}
		*val++ = '\0';
		if (streq(line, "count")) {
			ok = !have_count && parse_u64(val, strlen(val), &v) && v <= 4096;
			q.count = (unsigned)v;
			have_count = true;
		} else if (streq(line, "min_free_mem")) {
			ok = parse_u64(val, strlen(val), &q.min_free_mem);
		} else if (streq(line, "max_util")) {
			ok = parse_opt_int(val, 100, &q.max_util);
		} else if (streq(line, "numa")) {
			ok = parse_opt_int(val, 65535, &q.numa);
		} else if (streq(line, "no_procs")) {
			ok = streq(val, "0") || streq(val, "1");
			q.no_procs = streq(val, "1");
		} else if (streq(line, "mig")) {
			str = &q.mig;
		} else if (streq(line, "only")) {
			str = &q.only;
		} else if (streq(line, "exclude")) {
			str = &q.exclude;
		} else if (streq(line, "within")) {
			str = &q.within;
		} else if (streq(line, "pool")) {
			str = &q.pool;
		} else if (streq(line, "pool_name")) {
			str = &q.pool_name;
		}
		if (ok && str) {
			ok = !*str && (*str = strdup(val)) != NULL;
		}
		line = nl ? nl + 1 : NULL;
	}
	if (!ok || first || !have_count) {
		qticket_clear(&q);
		t->parsed = false;
		return false;
	}
	t->parsed = true;
	t->count = q.count;
	t->min_free_mem = q.min_free_mem;
	t->max_util = q.max_util;
	t->numa = q.numa;
	t->no_procs = q.no_procs;
	t->mig = q.mig;
	t->only = q.only;
	t->exclude = q.exclude;
	t->within = q.within;
	t->pool = q.pool;
	t->pool_name = q.pool_name;
	return true;
}

/* A cheap, order-independent mix of a string (FNV-1a, then a finaliser). */
static uint64_t str_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

/* Opens queue/<uid> (name) when it is a real directory owned by uid, not writable by others. */
static int queue_user_open(const struct gpuctl_lease_dir *dir, const char *name, uid_t *ret_uid)
{
	_cleanup_close_ int fd = -1;
	uint64_t uid;
	struct stat st;

	if (!parse_u64(name, strlen(name), &uid) || uid > UINT32_MAX - 1)
		return -EINVAL;
	fd = openat(dir->queue_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != (uid_t)uid ||
	    (st.st_mode & (S_IWGRP | S_IWOTH)))
		return -EPERM;
	*ret_uid = (uid_t)uid;
	return TAKE_FD(fd);
}

/* Scans DIR/queue. Always: the highest arrival of any well-named ticket (*ret_max) and an
 * order-independent hash of the names (*ret_names). With ret: the live tickets (their lock is
 * held), sorted, content parsed when content. With cleanup, dead tickets of the caller's uid
 * are removed (call under select.lock only). */
static int queue_scan(const struct gpuctl_lease_dir *dir, bool cleanup, bool content,
                      struct qticket **ret, size_t *ret_n, uint64_t *ret_max, uint64_t *ret_names)
{
	_cleanup_(closedirp) DIR *qd = NULL;
	struct qticket *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t max = 0, names = 0;
	struct dirent *de;

	if (ret)
		*ret = NULL;
	if (ret_n)
		*ret_n = 0;
	if (dir->queue_fd < 0)
		goto done;
	qd = dir_reopen(dir->queue_fd);
	if (!qd)
		return -errno;
	while ((de = readdir(qd))) {
		_cleanup_(closedirp) DIR *ud = NULL;
		_cleanup_close_ int ufd = -1;
		struct dirent *te;
		uid_t uid = 0;

		if (de->d_name[0] == '.')
			continue;
		ufd = queue_user_open(dir, de->d_name, &uid);
		if (ufd < 0)
			continue;
		ud = dir_reopen(ufd);
		if (!ud)
			continue;
		while ((te = readdir(ud))) {
			struct qticket t = {0};
			_cleanup_close_ int fd = -1;
			_cleanup_free_ char *text = NULL;
			size_t len;
			struct stat st;

			if (cleanup && uid == geteuid() && strncmp(te->d_name, ".new-", 5) == 0) {
				/* a registration that died before its rename (they happen under
				 * select.lock, like every cleanup) */
				fd = openat(ufd, te->d_name,
				            O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
				if (fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) == 0)
					(void)unlinkat(ufd, te->d_name, 0);
				continue;
			}
			if (te->d_name[0] == '.' ||
			    !ticket_name_parse(te->d_name, &t.arrival, &t.pid))
				continue;
			if (t.arrival > max)
				max = t.arrival;
			names += str_hash(te->d_name) ^ ((uint64_t)uid * 0x9e3779b97f4a7c15ull);
			if (!ret)
				continue;
			fd = openat(ufd, te->d_name,
			            O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
			if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
			    st.st_uid != uid || st.st_nlink != 1)
				continue;
			if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
				/* dead: its waiter no longer holds the lock */
				if (cleanup && uid == geteuid())
					(void)unlinkat(ufd, te->d_name, 0);
				continue;
			}
			if (errno != EWOULDBLOCK)
				continue;
			t.uid = uid;
			t.since = (int64_t)st.st_ctime;
			if (content && st.st_size <= TICKET_MAX &&
			    read_all(fd, TICKET_MAX, &text, &len) == 0 && strlen(text) == len)
				(void)ticket_parse(text, &t);
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 16;
				struct qticket *nv = realloc(v, nc * sizeof(*v));

				if (!nv) {
					qticket_clear(&t);
					qtickets_free(v, n);
					return -ENOMEM;
				}
				v = nv;
				cap = nc;
			}
			v[n++] = t;
		}
	}
	if (n > 1)
		qsort(v, n, sizeof(*v), qticket_cmp);
done:
	if (ret) {
		*ret = v;
		*ret_n = n;
	} else {
		qtickets_free(v, n);
	}
	if (ret_max)
		*ret_max = max;
	if (ret_names)
		*ret_names = names;
	return 0;
}

/* The lease state that decides a waiter's fate, as a number: the flocks of /proc/locks on the
 * lease directory's file system (but select.lock's, skip_ino) and the names in the queue.
 * Reading it opens no lock file, so it makes no inotify event. A /proc/locks that cannot be
 * read gives a new value every time; one that names another device (overlay file systems)
 * shows no lock change, and the waiter relies on queue changes and its fallback timeout. */
static uint64_t state_fp(const struct gpuctl_lease_dir *dir, ino_t skip_ino)
{
	static uint64_t unreadable;
	_cleanup_fclose_ FILE *f = fopen("/proc/locks", "re");
	char line[LOCKS_LINE_MAX];
	uint64_t h = 0, names = 0;
	struct stat st;

	if (!f || fstat(dir->fd, &st) < 0)
		return ++unreadable * 0x9e3779b97f4a7c15ull;
	while (fgets(line, sizeof(line), f)) {
		char *cur = line, *tok[8], *colon;
		size_t n = 0;
		uint64_t ino;
		unsigned maj, min;

		if (strstr(line, "->") || !strstr(line, "FLOCK"))
			continue;
		for (char *t = next_tok(&cur); t && n < ELEMENTSOF(tok); t = next_tok(&cur))
			tok[n++] = t;
		if (n < 6 || !streq(tok[1], "FLOCK"))
			continue;
		colon = strrchr(tok[5], ':');
		if (!colon || !parse_u64(colon + 1, strlen(colon + 1), &ino) ||
		    ino == (uint64_t)skip_ino)
			continue;
		*colon = '\0';
		if (sscanf(tok[5], "%x:%x", &maj, &min) != 2 || maj != major(st.st_dev) ||
		    min != minor(st.st_dev))
			continue; /* another file system's lock */
		h += str_hash(colon + 1) ^ str_hash(tok[3]);
	}
	(void)queue_scan(dir, false, false, NULL, NULL, NULL, &names);
	return h ^ (names * 0xff51afd7ed558ccdull);
}

/* Opens select.lock and takes it (blocking). */
static int select_lock_take(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir, int *ret_fd,
                            ino_t *ret_ino)
{
	char path[4096];
	_cleanup_close_ int sfd = -1;
	struct stat st;
	int r;

	(void)snprintf(path, sizeof(path), "%s/select.lock", dir->path);
	r = open_at(ctx, dir->fd, "select.lock", path, false, false, 0, &sfd);
	if (r == -ENOENT)
		return ctx_error(ctx, -ENOENT, "lease directory '%s': no select.lock", dir->path);
	if (r < 0)
		return r;
	r = check_fd(ctx, sfd, path, false, dir->owner, false, &st);
	if (r < 0)
		return r;
	while (flock(sfd, LOCK_EX) < 0)
		if (errno != EINTR)
			return ctx_error(ctx, -errno, "'%s': flock: %s", path, strerror(errno));
	if (ret_ino)
		*ret_ino = st.st_ino;
	*ret_fd = TAKE_FD(sfd);
	return 0;
}

/* The devices of snap named by a comma-separated list of UUIDs (unknown ones are skipped). */
static int uuids_to_set(const struct gpuctl_snapshot *snap, const char *list,
                        struct gpuctl_devset **ret)
{
	_cleanup_(gpuctl_devset_freep) struct gpuctl_devset *set = NULL;
	_cleanup_free_ char *copy = strdup(list);
	char *cur = copy;

	if (!copy || gpuctl_devset_new(&set) < 0)
		return -ENOMEM;
	while (cur && *cur) {
		char *comma = strchr(cur, ',');

		if (comma)
			*comma = '\0';
		for (size_t g = 0; g < snap->n_gpus; g++)
			for (int m = -1; m < (int)snap->gpus[g].n_migs; m++) {
				const char *u = dev_uuid(snap, g, m);

				if (u && streq(u, cur) && gpuctl_devset_add(set, g, m) == -ENOMEM)
					return -ENOMEM;
			}
		cur = comma ? comma + 1 : NULL;
	}
	*ret = TAKE_PTR(set);
	return 0;
}

/* The devices of snap a waiter's request could use, leases and telemetry aside: its --only,
 * --exclude, --numa, MIG profile and outer allocation (lost GPUs and those without a UUID are
 * never usable). A malformed ticket, or one whose ids do not resolve here, could use any
 * device (every whole GPU, which also covers their MIG devices). */
static int ticket_devices(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                          const struct qticket *t, struct gpuctl_devset **ret)
{
	struct gpuctl_select_request q = GPUCTL_SELECT_REQUEST_INIT;
	_cleanup_(gpuctl_devset_freep) struct gpuctl_devset *set = NULL, *within = NULL,
	                                                    *pool = NULL;
	char errsave[CTX_ERRMSG_MAX];
	bool all = !t->parsed;
	int r;

	r = gpuctl_devset_new(&set);
	if (r < 0)
		return r;
	strscpy(errsave, sizeof(errsave), gpuctl_errmsg(ctx));
	if (t->parsed && t->mig && !(snap->flags & GPUCTL_SNAP_MIG))
		goto out; /* it can use MIG devices only, this caller whole GPUs only: no overlap */
	if (t->parsed && t->within) {
		if (uuids_to_set(snap, t->within, &within) < 0)
			return -ENOMEM;
		q.within = within;
	}
	if (t->parsed && t->pool) {
		if (uuids_to_set(snap, t->pool, &pool) < 0)
			return -ENOMEM;
		q.pool = pool;
		q.pool_name = "of a waiter";
	}
	q.count = 1;
	q.only = t->only;
	q.exclude = t->exclude;
	q.numa_node = t->numa;
	q.mig_profile = t->mig;
	q.allow_unhealthy = true;
	q.leased = set;
	while (!all && gpuctl_devset_count(set) <= snap->n_gpus * 64) {
		struct gpuctl_selection *sel = NULL;
		size_t g;
		int m;

		r = gpuctl_select(ctx, snap, &q, &sel);
		if (r == -ENOSPC)
			break;
		if (r == -ENOMEM)
			return r;
		if (r < 0 || gpuctl_devset_get(gpuctl_selection_devices(sel), 0, &g, &m) < 0 ||
		    gpuctl_devset_add(set, g, m) < 0) {
			all = true; /* cannot be resolved here: conservative */
		}
		gpuctl_selection_free(sel);
	}
	if (all)
		for (size_t g = 0; g < snap->n_gpus; g++)
			if (gpuctl_devset_add(set, g, -1) == -ENOMEM)
				return -ENOMEM;
out:
	ctx_error(ctx, 0, "%s", errsave); /* the caller's message, not ours */
	*ret = TAKE_PTR(set);
	return 0;
}

/* The devices that the live tickets older than ticket (all of them when ticket is NULL) could
 * use, merged into reserved; *ret_ahead counts those tickets. Removes dead tickets of ours. */
static int queue_reserved(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir,
                          const struct gpuctl_snapshot *snap, struct gpuctl_wait_ticket *ticket,
                          struct gpuctl_devset *reserved, size_t *ret_ahead)
{
	struct qticket *v = NULL;
	size_t n = 0, ahead = 0;
	uid_t me = geteuid();
	int r;

	*ret_ahead = 0;
	if (dir->queue_fd < 0)
		return 0;
	r = queue_scan(dir, true, true, &v, &n, NULL, NULL);
	if (r < 0)
		return r;
	for (size_t i = 0; ticket && i < ticket->n_cache; i++)
		ticket->cache[i].used = false;
	for (size_t i = 0; i < n; i++) {
		const struct qticket *t = &v[i];
		struct qticket self = {.arrival = 0};
		struct gpuctl_devset *set = NULL;
		bool cached = false;

		if (ticket) {
			self.arrival = ticket->arrival;
			self.uid = me;
			self.pid = ticket->pid;
			if (qticket_cmp(t, &self) >= 0)
				continue; /* ourselves, or younger */
			for (size_t k = 0; k < ticket->n_cache; k++) {
				struct qcache *c = &ticket->cache[k];

				if (c->uid == t->uid && c->arrival == t->arrival &&
				    c->pid == t->pid) {
					c->used = true;
					set = c->set;
					cached = true;
				}
			}
		}
		ahead++;
		if (!set) {
			r = ticket_devices(ctx, snap, t, &set);
			if (r < 0)
				break;
		}
		r = devset_merge(reserved, set);
		if (!cached && ticket) {
			struct qcache *nc = realloc(ticket->cache,
			                            (ticket->n_cache + 1) * sizeof(*ticket->cache));

			if (nc) {
				ticket->cache = nc;
				nc[ticket->n_cache++] =
				        (struct qcache){t->uid, t->arrival, t->pid, true, set};
				set = NULL;
			}
		}
		if (!cached)
			gpuctl_devset_free(set);
		if (r < 0)
			break;
	}
	/* forget the tickets that are gone */
	for (size_t i = 0; ticket && i < ticket->n_cache;) {
		if (ticket->cache[i].used) {
			i++;
			continue;
		}
		gpuctl_devset_free(ticket->cache[i].set);
		ticket->cache[i] = ticket->cache[--ticket->n_cache];
	}
	qtickets_free(v, n);
	*ret_ahead = ahead;
	return r < 0 ? r : 0;
}

/* A ticket line "key UUID,UUID,..." for set (nothing when set is NULL). */
static void sb_uuids(struct sbuf *b, const char *key, const struct gpuctl_devset *set,
                     const struct gpuctl_snapshot *snap)
{
	if (!set)
		return;
	sb_add(b, "%s ", key);
	for (size_t i = 0; i < gpuctl_devset_count(set); i++) {
		const char *u = gpuctl_devset_uuid(set, snap, i);

		if (u && uuid_ok(u))
			sb_add(b, "%s%s", i ? "," : "", u);
	}
	sb_add(b, "\n");
}

/* Values of a ticket line: control characters become '?'. */
static void sb_val(struct sbuf *b, const char *key, const char *s)
{
	if (!s)
		return;
	sb_add(b, "%s ", key);
	for (size_t i = 0; s[i] && i < 1024; i++) {
		unsigned char c = (unsigned char)s[i];

		sb_add(b, "%c", c < 0x20 || c == 0x7f ? '?' : (char)c);
	}
	sb_add(b, "\n");
}

/* Adds inotify watches: locks/, queue/ and every queue/<uid>/ (again: it is cheap). */
static void ticket_watch(struct gpuctl_wait_ticket *t, const struct gpuctl_lease_dir *dir)
{
	_cleanup_(closedirp) DIR *qd = NULL;
	char path[4096];
	struct dirent *de;

	if (t->ifd < 0)
		return;
	(void)snprintf(path, sizeof(path), "%s/locks", t->dir_path);
	(void)inotify_add_watch(t->ifd, path,
	                        IN_CLOSE_WRITE | IN_CLOSE_NOWRITE | IN_CREATE | IN_DELETE |
	                                IN_ONLYDIR | IN_DONT_FOLLOW);
	(void)snprintf(path, sizeof(path), "%s/queue", t->dir_path);
	(void)inotify_add_watch(t->ifd, path, IN_CREATE | IN_DELETE | IN_ONLYDIR | IN_DONT_FOLLOW);
	if (!dir || dir->queue_fd < 0 || !(qd = dir_reopen(dir->queue_fd)))
		return;
	while ((de = readdir(qd))) {
		uint64_t uid;

		if (de->d_name[0] == '.' || !parse_u64(de->d_name, strlen(de->d_name), &uid))
			continue;
		(void)snprintf(path, sizeof(path), "%s/queue/%s", t->dir_path, de->d_name);
		(void)inotify_add_watch(t->ifd, path,
		                        IN_CREATE | IN_DELETE | IN_CLOSE_WRITE | IN_MOVED_TO |
		                                IN_MOVED_FROM | IN_ONLYDIR | IN_DONT_FOLLOW);
	}
}

void gpuctl_wait_ticket_free(struct gpuctl_wait_ticket *t)
{
	if (!t)
		return;
	if (t->fd >= 0 && t->qfd >= 0)
		(void)unlinkat(t->qfd, t->name, 0); /* ours: only we create this name */
	closep(&t->fd);
	closep(&t->qfd);
	closep(&t->ifd);
	for (size_t i = 0; i < t->n_cache; i++)
		gpuctl_devset_free(t->cache[i].set);
	free(t->cache);
	free(t->dir_path);
	free(t);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct gpuctl_wait_ticket *, gpuctl_wait_ticket_free)

int gpuctl_wait_ticket_new(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                           const struct gpuctl_snapshot *snap,
                           const struct gpuctl_select_request *req,
                           struct gpuctl_wait_ticket **ret_ticket)
{
	_cleanup_(gpuctl_wait_ticket_freep) struct gpuctl_wait_ticket *t = NULL;
	_cleanup_close_ int sfd = -1, fd = -1;
	struct sbuf b = {0};
	char uname[32], path[4096], tmp[64];
	uint64_t max = 0, start = 0;
	int r;

	if (!dir || !snap || !req || !ret_ticket)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	if (dir->queue_fd < 0)
		return ctx_error(ctx, -ENOENT,
		                 "lease directory '%s': no queue/ for waiters (run `sudo gpuctl "
		                 "lease init`)",
		                 dir->path);
	t = calloc(1, sizeof(*t));
	if (!t)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	t->fd = t->qfd = t->ifd = -1;
	t->pid = (uint32_t)getpid();
	t->dir_path = strdup(dir->path);
	if (!t->dir_path)
		return ctx_error(ctx, -ENOMEM, "out of memory");

	r = select_lock_take(ctx, dir, &sfd, NULL);
	if (r < 0)
		return r;
	(void)snprintf(uname, sizeof(uname), "%u", (unsigned)geteuid());
	(void)snprintf(path, sizeof(path), "%s/queue/%s", dir->path, uname);
	r = open_at(ctx, dir->queue_fd, uname, path, true, true, 0755, &t->qfd);
	if (r < 0)
		return r;
	r = check_fd(ctx, t->qfd, path, true, geteuid(), false, NULL);
	if (r < 0)
		return r;
	r = queue_scan(dir, false, false, NULL, NULL, &max, NULL);
	if (r < 0)
		return ctx_error(ctx, r, "'%s/queue': %s", dir->path, strerror(-r));
	t->arrival = max + 1;
	(void)snprintf(t->name, sizeof(t->name), "%" PRIu64 "-%u", t->arrival, t->pid);

	/* the content: what decides which devices the request could use */
	(void)proc_stat(getpid(), NULL, &start);
	sb_add(&b, "gpuctl-wait 1\npid %u\nstart_time %" PRIu64 "\ncount %u\n", t->pid,
	       ticks_to_epoch(start), req->count);
	sb_add(&b, "min_free_mem %" PRIu64 "\nmax_util %d\nnuma %d\nno_procs %d\n",
	       req->min_free_mem, req->max_util < 0 ? -1 : req->max_util,
	       req->numa_node < 0 ? -1 : req->numa_node, req->no_procs ? 1 : 0);
	sb_val(&b, "mig", req->mig_profile);
	sb_val(&b, "only", req->only);
	sb_val(&b, "exclude", req->exclude);
	sb_uuids(&b, "within", req->within, snap);
	if (offsetof(struct gpuctl_select_request, pool_name) + sizeof(void *) <=
	            req->struct_size &&
	    req->pool) {
		sb_uuids(&b, "pool", req->pool, snap);
		sb_val(&b, "pool_name", req->pool_name);
	}
	if (b.oom) {
		free(b.p);
		return ctx_error(ctx, -ENOMEM, "out of memory");
	}

	/* created under a dot name (ignored by readers), locked, written, then renamed */
	(void)snprintf(tmp, sizeof(tmp), ".new-%u", t->pid);
	for (int tries = 0; fd < 0 && tries < 2; tries++) {
		fd = openat(t->qfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0 && errno == EEXIST)
			(void)unlinkat(t->qfd, tmp, 0); /* a dead gpuctl's, with our pid */
		else if (fd < 0)
			break;
	}
	if (fd < 0) {
		r = -errno;
		free(b.p);
		return ctx_error(ctx, r, "'%s/%s': %s", path, tmp, strerror(-r));
	}
	r = 0;
	if (fchmod(fd, 0644) < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0)
		r = -errno;
	if (r == 0)
		r = write_all(fd, b.p, b.len);
	free(b.p);
	if (r == 0 && renameat(t->qfd, tmp, t->qfd, t->name) < 0)
		r = -errno;
	if (r < 0) {
		(void)unlinkat(t->qfd, tmp, 0);
		return ctx_error(ctx, r, "'%s/%s': %s", path, t->name, strerror(-r));
	}
	t->fd = TAKE_FD(fd);

	/* inotify (no watch is no error: the caller's fallback timeout still makes progress) */
	t->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (t->ifd < 0)
		ctx_log(ctx, GPUCTL_LOG_DEBUG, "leases: no inotify (%s): waking every few seconds",
		        strerror(errno));
	ticket_watch(t, dir);
	*ret_ticket = TAKE_PTR(t);
	return 0; /* closing sfd releases select.lock */
}

int gpuctl_wait_ticket_fd(const struct gpuctl_wait_ticket *t)
{
	return t ? t->ifd : -1;
}

void gpuctl_wait_ticket_drain(struct gpuctl_wait_ticket *t, struct gpuctl_lease_dir *dir)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

	if (!t || t->ifd < 0)
		return;
	while (read(t->ifd, buf, sizeof(buf)) > 0)
		;
	ticket_watch(t, dir);
}

int gpuctl_wait_ticket_changed(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                               struct gpuctl_wait_ticket *t)
{
	_cleanup_close_ int sfd = -1;
	ino_t ino = 0;
	int r;

	if (!dir || !t)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	if (!t->have_fp)
		return 1;
	r = select_lock_take(ctx, dir, &sfd, &ino);
	if (r < 0)
		return r;
	return state_fp(dir, ino) != t->fp;
}

void gpuctl_wait_list_free(struct gpuctl_wait_list *l)
{
	if (!l)
		return;
	qtickets_free(l->t, l->n);
	for (size_t i = 0; l->users && i < l->n; i++)
		free(l->users[i]);
	free(l->users);
	free(l->e);
	free(l);
}

int gpuctl_wait_list(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                     struct gpuctl_wait_list **ret_list)
{
	struct gpuctl_wait_list *l;
	int r;

	if (!dir || !ret_list)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	l = calloc(1, sizeof(*l));
	if (!l)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	r = queue_scan(dir, false, true, &l->t, &l->n, NULL, NULL);
	if (r < 0) {
		free(l);
		return ctx_error(ctx, r, "'%s/queue': %s", dir->path, strerror(-r));
	}
	l->users = calloc(l->n + 1, sizeof(*l->users));
	l->e = calloc(l->n + 1, sizeof(*l->e));
	if (!l->users || !l->e) {
		gpuctl_wait_list_free(l);
		return ctx_error(ctx, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < l->n; i++) {
		const struct qticket *t = &l->t[i];

		l->users[i] = user_name(t->uid);
		l->e[i] = (struct gpuctl_wait_entry){
		        .arrival = t->arrival,
		        .pid = t->pid,
		        .uid = (uint32_t)t->uid,
		        .user = l->users[i],
		        .since = t->since,
		        .parsed = t->parsed,
		        .count = t->count,
		        .mig_profile = t->mig,
		        .only = t->only,
		        .exclude = t->exclude,
		        .numa_node = t->numa,
		        .min_free_mem = t->min_free_mem,
		        .max_util = t->max_util,
		        .no_procs = t->no_procs,
		        .pool = t->pool_name,
		};
	}
	*ret_list = l;
	return 0;
}

size_t gpuctl_wait_list_count(const struct gpuctl_wait_list *list)
{
	return list ? list->n : 0;
}

const struct gpuctl_wait_entry *gpuctl_wait_list_get(const struct gpuctl_wait_list *list, size_t i)
{
	return list && i < list->n ? &list->e[i] : NULL;
}

/* Select-and-lease; with ticket, as that waiter (only older waiters are ahead), else as the
 * youngest (every live waiter is ahead). */
static int select_and_lease(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                            const struct gpuctl_snapshot *snap,
                            const struct gpuctl_select_request *req,
                            const struct gpuctl_lease_request *lreq,
                            struct gpuctl_wait_ticket *ticket, struct gpuctl_selection **ret_sel,
                            struct gpuctl_lease **ret_lease)
{
	struct gpuctl_select_request sreq = GPUCTL_SELECT_REQUEST_INIT;
	struct gpuctl_lease_request lr;
	_cleanup_(gpuctl_devset_freep) struct gpuctl_devset *leased = NULL, *foreign = NULL;
	_cleanup_(gpuctl_selection_freep) struct gpuctl_selection *sel = NULL;
	_cleanup_(gpuctl_lease_freep) struct gpuctl_lease *lease = NULL;
	_cleanup_(gpuctl_devset_freep) struct gpuctl_devset *reserved = NULL;
	_cleanup_close_ int sfd = -1;
	const struct gpuctl_devset *chosen;
	char first_reason[REASON_MAX] = "", full[REASON_MAX] = "";
	size_t n_bad = 0, ahead = 0, n_full = 0;
	bool uninit = false, share;
	char size_text[32];
	uint64_t need;
	ino_t sino = 0;
	uint64_t fp = 0;
	int r;

	if (!dir || !snap || !req || !ret_sel || !ret_lease ||
	    req->struct_size < offsetof(struct gpuctl_select_request, count) + sizeof(unsigned))
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	memcpy(&sreq, req, req->struct_size < sizeof(sreq) ? req->struct_size : sizeof(sreq));
	if (offsetof(struct gpuctl_select_request, leased) + sizeof(void *) > req->struct_size)
		sreq.leased = NULL;
	if (offsetof(struct gpuctl_select_request, foreign) + sizeof(void *) > req->struct_size)
		sreq.foreign = NULL;
	if (offsetof(struct gpuctl_select_request, pool_name) + sizeof(void *) > req->struct_size) {
		sreq.pool = NULL;
		sreq.pool_name = NULL;
	}
	if (offsetof(struct gpuctl_select_request, warned) + sizeof(void *) > req->struct_size) {
		sreq.unhealthy = NULL;
		sreq.warned = NULL;
	}
	sreq.struct_size = sizeof(sreq);
	lease_request_copy(&lr, lreq);
	share = lr.share_mem > 0;
	need = lr.share_mem / SHARE_UNIT + (lr.share_mem % SHARE_UNIT != 0);
	if (share && sreq.min_free_mem < lr.share_mem)
		sreq.min_free_mem = lr.share_mem; /* what the job declared must be free now, too */

	/* 1. select.lock, blocking (held for milliseconds) */
	r = select_lock_take(ctx, dir, &sfd, &sino);
	if (r < 0)
		return r;
	if (ticket)
		fp = state_fp(dir, sino); /* before the probes: what this try saw */

	/* 2. probe every device */
	if (gpuctl_devset_new(&leased) < 0 || devset_merge(leased, sreq.leased) < 0)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	for (size_t g = 0; g < snap->n_gpus; g++)
		for (int m = -1; m < (int)snap->gpus[g].n_migs; m++) {
			char reason[REASON_MAX] = "";
			const char *u = dev_uuid(snap, g, m);
			uint64_t used = 0;
			int s;

			if (m < 0 && (!u || snap->gpus[g].lost))
				continue; /* never chosen anyway ("lost or unidentified") */
			s = probe_used(dir, u, false, NULL, share ? &used : NULL, reason,
			               sizeof(reason));
			if (s == GPUCTL_LEASE_FREE && !share)
				continue;
			if (share && (s == GPUCTL_LEASE_FREE || s == GPUCTL_LEASE_SHARED)) {
				uint64_t cap = share_capacity(device_memory(snap, g, m), &lr);

				if (used <= cap && need <= cap - used)
					continue;
				/* no room for what the job declares: as if leased, and said so */
				if (n_full++ < 8) {
					size_t l = strlen(full);

					(void)snprintf(full + l, sizeof(full) - l, "%s%zu%s",
					               n_full > 1 ? "," : "", g, m < 0 ? "" : ":");
					l = strlen(full);
					if (m >= 0)
						(void)snprintf(full + l, sizeof(full) - l, "%d", m);
				}
			} else if (s != GPUCTL_LEASE_HELD && s != GPUCTL_LEASE_SHARED) {
				if (!n_bad++)
					strscpy(first_reason, sizeof(first_reason), reason);
				uninit |= s == GPUCTL_LEASE_UNINITIALISED;
			}
			r = gpuctl_devset_add(leased, g, m);
			if (r < 0 && r != -EEXIST)
				return ctx_error(ctx, r, "out of memory");
		}
	/* 2b. the devices older waiters could use are theirs first (docs/leases.md "Waiting") */
	if (gpuctl_devset_new(&reserved) < 0)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	r = queue_reserved(ctx, dir, snap, ticket, reserved, &ahead);
	if (r < 0)
		return ctx_error(ctx, r, "'%s/queue': %s", dir->path, strerror(-r));
	if (devset_merge(leased, reserved) < 0)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	sreq.leased = leased;
	if (!lr.ignore_foreign) {
		r = lease_foreign(ctx, dir, snap, &lr, &foreign); /* select.lock is ours */
		if (r < 0)
			return r;
		if (devset_merge(foreign, sreq.foreign) < 0)
			return ctx_error(ctx, -ENOMEM, "out of memory");
		sreq.foreign = foreign;
	}

	/* 3. select */
	r = gpuctl_select(ctx, snap, &sreq, &sel);
	if (r == -ENOSPC && ticket) {
		ticket->fp = fp;
		ticket->have_fp = true;
	}
	if (r == -ENOSPC && (n_bad > 0 || ahead > 0 || n_full > 0)) {
		char msg[CTX_ERRMSG_MAX], bad[2 * REASON_MAX + 96] = "", wait[96] = "";

		strscpy(msg, sizeof(msg), gpuctl_errmsg(ctx));
		if (n_bad > 0)
			(void)snprintf(bad, sizeof(bad), " (%zu unusable: %s)", n_bad,
			               first_reason);
		if (n_full > 0) {
			size_t l = strlen(bad);

			(void)snprintf(bad + l, sizeof(bad) - l, " (no room to share %s: %s%s)",
			               size_text_of(lr.share_mem, size_text, sizeof(size_text)),
			               full, n_full > 8 ? ",..." : "");
		}
		if (ahead > 0)
			(void)snprintf(wait, sizeof(wait),
			               " (%zu waiter(s) ahead, who could use %zu device(s))", ahead,
			               gpuctl_devset_count(reserved));
		return ctx_error(ctx, uninit ? -ENOENT : -ENOSPC, "%s%s%s", msg, bad, wait);
	}
	if (r < 0)
		return r;
	if (n_bad > 0)
		ctx_log(ctx, GPUCTL_LOG_WARNING, "leases: %zu device(s) not usable: %s", n_bad,
		        first_reason);

	/* 4. lock the chosen devices */
	chosen = gpuctl_selection_devices(sel);
	lease = calloc(1, sizeof(*lease));
	if (!lease)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	lease->user_fd = -1;
	lease->share_mem = share ? lr.share_mem : 0;
	lease->tag = (uint32_t)getpid();
	lease->devs = calloc(gpuctl_devset_count(chosen) + 1, sizeof(*lease->devs));
	lease->command = strdup_or_null(lr.command);
	lease->label = strdup_or_null(lr.label);
	if (!lease->devs || (lr.command && !lease->command) || (lr.label && !lease->label))
		return ctx_error(ctx, -ENOMEM, "out of memory");
	for (size_t i = 0; i < gpuctl_devset_count(chosen); i++) {
		struct lease_dev *d = &lease->devs[lease->n];
		char reason[REASON_MAX] = "";
		const char *u;
		int s;

		d->fd = -1;
		if (gpuctl_devset_get(chosen, i, &d->gpu, &d->mig) < 0)
			return ctx_error(ctx, -EIO, "selection out of range");
		u = dev_uuid(snap, d->gpu, d->mig);
		s = lock_open(dir, u, true, &d->fd, NULL, reason, sizeof(reason));
		if (s != GPUCTL_LEASE_FREE || d->fd < 0)
			return ctx_error(ctx, -EBUSY, "cannot lease %s: %s", u ? u : "?",
			                 *reason ? reason : "no lock file");
		lease->n++;
		strscpy(d->uuid, sizeof(d->uuid), u);
		if (flock(d->fd, (share ? LOCK_SH : LOCK_EX) | LOCK_NB) < 0)
			return ctx_error(ctx, -EBUSY, "cannot lease %s: locks/%s.lock: %s", u, u,
			                 errno == EWOULDBLOCK ? "held by another process"
			                                      : strerror(errno));
		if (share) {
			r = share_take(d->fd, need,
			               share_capacity(device_memory(snap, d->gpu, d->mig), &lr));
			if (r < 0)
				return ctx_error(ctx, -EBUSY, "cannot share %s: locks/%s.lock: %s",
				                 u, u,
				                 r == -ENOSPC ? "no room left" : strerror(-r));
		}
	}

	/* 5. owner records (display only: a failure is logged, the lock is the lease) */
	r = user_dir_open(ctx, dir, true, &lease->user_fd);
	if (r == 0 && share)
		records_prune_shared(lease->user_fd);
	if (r == 0)
		r = lease_write_records(ctx, lease, getpid(), 0);
	if (r < 0)
		ctx_log(ctx, GPUCTL_LOG_WARNING, "leases: no owner record: %s", gpuctl_errmsg(ctx));

	/* 6. a waiter leaves the queue while select.lock still orders everyone */
	if (ticket && ticket->fd >= 0) {
		(void)unlinkat(ticket->qfd, ticket->name, 0);
		closep(&ticket->fd);
	}

	*ret_sel = TAKE_PTR(sel);
	*ret_lease = TAKE_PTR(lease);
	return 0; /* closing sfd releases select.lock */
}

int gpuctl_select_and_lease(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                            const struct gpuctl_snapshot *snap,
                            const struct gpuctl_select_request *req,
                            const struct gpuctl_lease_request *lreq,
                            struct gpuctl_selection **ret_sel, struct gpuctl_lease **ret_lease)
{
	return select_and_lease(ctx, dir, snap, req, lreq, NULL, ret_sel, ret_lease);
}

int gpuctl_select_and_lease_queued(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                                   const struct gpuctl_snapshot *snap,
                                   const struct gpuctl_select_request *req,
                                   const struct gpuctl_lease_request *lreq,
                                   struct gpuctl_wait_ticket *ticket,
                                   struct gpuctl_selection **ret_sel,
                                   struct gpuctl_lease **ret_lease)
{
	if (!ticket || ticket->fd < 0)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	return select_and_lease(ctx, dir, snap, req, lreq, ticket, ret_sel, ret_lease);
}

/* ---- release ---- */

static int signal_holder(pid_t pid, uint64_t start_ticks, uid_t uid)
{
#ifdef SYS_pidfd_open
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (pfd >= 0) {
		int r = 0;

		/* checked after the pidfd pins the process: no recycled pid in between */
		if (!proc_matches((uint32_t)pid, start_ticks, uid))
			r = -ESRCH;
		else if (syscall(SYS_pidfd_send_signal, pfd, SIGTERM, NULL, 0) < 0)
			r = -errno;
		(void)close(pfd);
		return r;
	}
#endif
	if (!proc_matches((uint32_t)pid, start_ticks, uid))
		return -ESRCH;
	return kill(pid, SIGTERM) < 0 ? -errno : 0;
}

int gpuctl_lease_release(struct gpuctl_ctx *ctx, struct gpuctl_lease_dir *dir,
                         const struct gpuctl_snapshot *snap, const struct gpuctl_devset *set)
{
	struct record *recs = NULL;
	size_t n_recs = 0;
	_cleanup_free_ pid_t *done = NULL;
	_cleanup_close_ int sfd = -1;
	size_t n_done = 0;
	uid_t me = geteuid();
	int r, count = 0;

	if (!dir || !snap)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	sfd = select_lock_shared(dir); /* its probes must not disturb a select-and-lease */
	r = records_load(ctx, dir, (uid_t)-1, NULL, &recs, &n_recs);
	if (r < 0)
		return r;
	done = calloc(n_recs + 1, sizeof(*done));
	if (!done) {
		records_free(recs, n_recs);
		return ctx_error(ctx, -ENOMEM, "out of memory");
	}
	/* first: is any device of set held by another user's (counting) record? */
	for (size_t i = 0; set && i < gpuctl_devset_count(set); i++) {
		const char *u = gpuctl_devset_uuid(set, snap, i);
		char reason[REASON_MAX];
		bool mine = false;
		ssize_t other = -1;

		if (!u || !held(probe(dir, u, false, NULL, reason, sizeof(reason))))
			continue;
		for (size_t k = 0; k < n_recs; k++) {
			if (!streq(recs[k].uuid, u))
				continue;
			if (recs[k].uid == me)
				mine = true;
			else
				other = (ssize_t)k;
		}
		if (!mine && other >= 0) {
			r = ctx_error(ctx, -EPERM, "%s is held by uid %u (%s, pid %u): not yours",
			              u, (unsigned)recs[other].uid,
			              recs[other].user ? recs[other].user : "?", recs[other].pid);
			records_free(recs, n_recs);
			return r;
		}
	}
	for (size_t k = 0; k < n_recs; k++) {
		const struct record *rc = &recs[k];
		char reason[REASON_MAX];
		bool in_set = !set, seen = false;

		/* Only --hold holders (records without a job): release never ends a job that
		 * `gpuctl run` started; its lease ends when the job does. */
		if (rc->uid != me || !rc->pid_alive || rc->job_pid != 0 ||
		    (pid_t)rc->pid == getpid())
			continue;
		for (size_t i = 0; set && i < gpuctl_devset_count(set); i++) {
			const char *u = gpuctl_devset_uuid(set, snap, i);

			in_set |= u && streq(u, rc->uuid);
		}
		if (!in_set || !held(probe(dir, rc->uuid, false, NULL, reason, sizeof(reason))))
			continue;
		for (size_t i = 0; i < n_done; i++)
			seen |= done[i] == (pid_t)rc->pid;
		if (seen)
			continue;
		if (signal_holder((pid_t)rc->pid, rc->pid_start_ticks, me) == 0) {
			done[n_done++] = (pid_t)rc->pid;
			count++;
		}
	}
	records_free(recs, n_recs);
	return count;
}

/* ---- the parsers, for the fuzzers (lease-internal.h) ---- */

int lease_record_parse_text(const char *text, size_t len, const char *uuid)
{
	struct record r = {0};
	int rr;

	if (!text || !uuid || memchr(text, '\0', len))
		return -EINVAL;
	strscpy(r.uuid, sizeof(r.uuid), uuid);
	rr = record_parse(text, len, &r);
	record_clear(&r);
	return rr;
}

bool lease_ticket_parse_text(const char *text, size_t len)
{
	_cleanup_free_ char *copy = NULL;
	struct qticket t = {0};
	bool ok;

	if (!text || memchr(text, '\0', len) || !(copy = strndup(text, len)))
		return false;
	ok = ticket_parse(copy, &t);
	qticket_clear(&t);
	return ok;
}

bool lease_record_name_parse(const char *name, char *uuid, bool *ret_shared)
{
	return record_name_parse(name, uuid, ret_shared);
}
