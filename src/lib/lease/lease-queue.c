// SPDX-License-Identifier: MIT
/*
 * lease-queue.c: the wait queue (docs/leases.md "Waiting"): a waiter's ticket in
 * DIR/queue/<uid>/, the scan of the live tickets in order, the devices the older ones could use
 * (which a select-and-lease leaves to them), the fingerprint and the inotify watches that wake a
 * waiter, and gpuctl_wait_*. It decides no lease: lease-select.c asks it what is reserved.
 * Tests: tests/unit/test-wait.c, tests/cli/test_wait.py; the ticket parser is fuzzed by
 * fuzz/fuzz-lease.c.
 *
 * Decisions:
 * - Waiting (docs/leases.md "Waiting"): tickets DIR/queue/<uid>/<arrival>-<pid>, live while
 *   their waiter holds an exclusive flock (probed with LOCK_SH|LOCK_NB); every select-and-lease
 *   excludes, as if leased, the devices the older live tickets could use (their static filters
 *   run through gpuctl_select one device at a time; malformed: every GPU). Wake-ups are
 *   inotify events filtered by a fingerprint of /proc/locks and the ticket names that opens no
 *   lock file (so checking it makes no event); closes of lock files the last failed try found
 *   free (a probe's, or a lease come and gone) are not even that: nothing came free.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ctx.h"
#include "fileio.h"
#include "lease-internal.h"
#include "select.h"
#include "nss.h"
#include "snapshot-internal.h"
#include "util.h"

#define TICKET_MAX      4096 /* bytes: a longer ticket is malformed */
#define TICKET_NAME_MAX 48   /* "<arrival>-<pid>" */
/* The highest arrival: a name with a higher one is not a ticket, and a new arrival after it is
 * this again (ordered by uid and pid among equals), so a planted number cannot make the next
 * one wrap to 0 and go first. 10^15 is more arrivals than any queue lives to see. */
#define ARRIVAL_MAX 1000000000000000ull

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
	uint64_t fp;      /* state fingerprint at the last failed try */
	bool have_fp;     /* fp is set */
	bool quiet;       /* the last drain read only events that change nothing (see drain) */
	char *free_locks; /* "\nUUID.lock\n..." of each device the last failed try found free */
	int locks_wd;     /* the watch of locks/ (-1: none): its events need no rescan of queue/ */
	struct qcache *cache;
	size_t n_cache;
};

struct gpuctl_wait_list {
	struct qticket *t;           /* live tickets, in order (owned) */
	char **users;                /* their user names or NULL (owned) */
	struct gpuctl_wait_entry *e; /* views of t */
	size_t n;
};

/* ---- tickets as read back ---- */

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

	if (!dash || !parse_dec(name, (size_t)(dash - name), UINT64_MAX, &a) || a > ARRIVAL_MAX ||
	    !parse_dec(dash + 1, strlen(dash + 1), UINT64_MAX, &p) || p == 0 || p > INT32_MAX)
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
	if (!parse_dec(s, strlen(s), UINT64_MAX, &v) || v > max)
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
			ok = !have_count && parse_dec(val, strlen(val), UINT64_MAX, &v) &&
			     v <= 4096;
			q.count = (unsigned)v;
			have_count = true;
		} else if (streq(line, "min_free_mem")) {
			ok = parse_dec(val, strlen(val), UINT64_MAX, &q.min_free_mem);
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

/* ---- scanning the queue ---- */

/* Opens queue/<uid> (name) when it is a real directory owned by uid, not writable by others. */
static int queue_user_open(const struct gpuctl_lease_dir *dir, const char *name, uid_t *ret_uid)
{
	_cleanup_close_ int fd = -1;
	uint64_t uid;
	struct stat st;

	if (!lease_user_dir_name(name, &uid))
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
	qd = lease_dir_reopen(dir->queue_fd);
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
		ud = lease_dir_reopen(ufd);
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
			    fd_read_all(fd, TICKET_MAX, &text, &len) == 0 && strlen(text) == len)
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

uint64_t lease_queue_fingerprint(const struct gpuctl_lease_dir *dir, ino_t skip_ino)
{
	static _Atomic uint64_t unreadable; /* the library's one global: atomic, any thread */
	_cleanup_fclose_ FILE *f = fopen("/proc/locks", "re");
	char line[LOCKS_LINE_MAX];
	uint64_t h = 0, names = 0;
	struct stat st;

	if (!f || fstat(dir->fd, &st) < 0)
		return (atomic_fetch_add(&unreadable, 1) + 1) * 0x9e3779b97f4a7c15ull;
	while (fgets(line, sizeof(line), f)) {
		struct lease_flock l;
		char ino[24];

		if (!lease_flock_parse(line, &l) || l.ino == (uint64_t)skip_ino ||
		    l.maj != major(st.st_dev) || l.min != minor(st.st_dev))
			continue; /* not a flock of the lease directory's file system */
		(void)snprintf(ino, sizeof(ino), "%" PRIu64, l.ino);
		h += str_hash(ino) ^ str_hash(l.write ? "WRITE" : "READ");
	}
	(void)queue_scan(dir, false, false, NULL, NULL, NULL, &names);
	return h ^ (names * 0xff51afd7ed558ccdull);
}

/* ---- what the older waiters could use ---- */

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
				const char *u = lease_dev_uuid(snap, g, m);

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

int lease_queue_reserved(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir,
                         const struct gpuctl_snapshot *snap, struct gpuctl_wait_ticket *ticket,
                         bool locked, const struct lease_skip *skip, struct gpuctl_devset *reserved,
                         size_t *ret_ahead)
{
	struct qticket *v = NULL;
	size_t n = 0, ahead = 0;
	uid_t me = geteuid();
	int r;

	*ret_ahead = 0;
	if (dir->queue_fd < 0)
		return 0;
	r = queue_scan(dir, locked, true, &v, &n, NULL, NULL);
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
		}
		/* over its quota: it waits, but holds back no one behind it (docs/leases.md
		 * "Quotas") */
		if (skip && t->parsed && skip->fn(skip->ud, t->uid, t->pool_name, t->count))
			continue;
		if (ticket) {
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
		r = lease_devset_merge(reserved, set);
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

/* ---- a waiter's own ticket ---- */

/* A ticket line "key UUID,UUID,..." for set (nothing when set is NULL). */
static void sb_uuids(struct sbuf *b, const char *key, const struct gpuctl_devset *set,
                     const struct gpuctl_snapshot *snap)
{
	if (!set)
		return;
	sbuf_printf(b, "%s ", key);
	for (size_t i = 0; i < gpuctl_devset_count(set); i++) {
		const char *u = gpuctl_devset_uuid(set, snap, i);

		if (u && lease_uuid_ok(u))
			sbuf_printf(b, "%s%s", i ? "," : "", u);
	}
	sbuf_printf(b, "\n");
}

/* Values of a ticket line: control characters become '?'. */
static void sb_val(struct sbuf *b, const char *key, const char *s)
{
	if (!s)
		return;
	sbuf_printf(b, "%s ", key);
	for (size_t i = 0; s[i] && i < 1024; i++) {
		unsigned char c = (unsigned char)s[i];

		sbuf_printf(b, "%c", c < 0x20 || c == 0x7f ? '?' : (char)c);
	}
	sbuf_printf(b, "\n");
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
	t->locks_wd = inotify_add_watch(t->ifd, path,
	                                IN_CLOSE_WRITE | IN_CLOSE_NOWRITE | IN_CREATE | IN_DELETE |
	                                        IN_ONLYDIR | IN_DONT_FOLLOW);
	(void)snprintf(path, sizeof(path), "%s/queue", t->dir_path);
	(void)inotify_add_watch(t->ifd, path, IN_CREATE | IN_DELETE | IN_ONLYDIR | IN_DONT_FOLLOW);
	if (!dir || dir->queue_fd < 0 || !(qd = lease_dir_reopen(dir->queue_fd)))
		return;
	while ((de = readdir(qd))) {
		uint64_t uid;

		if (de->d_name[0] == '.' || !lease_user_dir_name(de->d_name, &uid))
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
	free(t->free_locks);
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
	struct gpuctl_select_request rq;
	struct sbuf b = LEASE_SBUF_INIT;
	char path[4096], tmp[64];
	uint64_t max = 0, start = 0;
	int r;

	if (!dir || !snap || !ret_ticket || select_request_copy(req, &rq) < 0)
		return ctx_error(ctx, -EINVAL, "invalid arguments");
	if (dir->queue_fd < 0)
		return ctx_error(ctx, -ENOENT,
		                 "lease directory '%s': no queue/ for waiters (run `sudo gpuctl "
		                 "lease init`)",
		                 dir->path);
	t = calloc(1, sizeof(*t));
	if (!t)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	t->fd = t->qfd = t->ifd = t->locks_wd = -1;
	t->pid = (uint32_t)getpid();
	t->dir_path = strdup(dir->path);
	if (!t->dir_path)
		return ctx_error(ctx, -ENOMEM, "out of memory");

	r = lease_select_lock_take(ctx, dir, &sfd, NULL);
	if (r < 0)
		return r;
	r = lease_own_dir_open(ctx, dir, dir->queue_fd, "queue", true, &t->qfd);
	if (r < 0)
		return r;
	(void)snprintf(path, sizeof(path), "%s/queue/%u", dir->path, (unsigned)geteuid());
	r = queue_scan(dir, false, false, NULL, NULL, &max, NULL);
	if (r < 0)
		return ctx_error(ctx, r, "'%s/queue': %s", dir->path, strerror(-r));
	t->arrival = max < ARRIVAL_MAX ? max + 1 : ARRIVAL_MAX; /* saturates, never wraps */
	(void)snprintf(t->name, sizeof(t->name), "%" PRIu64 "-%u", t->arrival, t->pid);

	/* the content: what decides which devices the request could use */
	(void)lease_proc_stat(getpid(), NULL, &start);
	sbuf_printf(&b, "gpuctl-wait 1\npid %u\nstart_time %" PRIu64 "\ncount %u\n", t->pid,
	            lease_ticks_to_epoch(start), rq.count);
	sbuf_printf(&b, "min_free_mem %" PRIu64 "\nmax_util %d\nnuma %d\nno_procs %d\n",
	            rq.min_free_mem > rq.share_mem ? rq.min_free_mem : rq.share_mem,
	            rq.max_util < 0 ? -1 : rq.max_util, rq.numa_node < 0 ? -1 : rq.numa_node,
	            rq.no_procs ? 1 : 0);
	sb_val(&b, "mig", rq.mig_profile);
	sb_val(&b, "only", rq.only);
	sb_val(&b, "exclude", rq.exclude);
	sb_uuids(&b, "within", rq.within, snap);
	if (rq.pool) {
		sb_uuids(&b, "pool", rq.pool, snap);
		sb_val(&b, "pool_name", rq.pool_name);
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
		r = fd_write_all(fd, b.p, b.len);
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

/* Whether name (an event's, in locks/) is the lock file of a device the last failed try found
 * free. */
static bool was_free(const struct gpuctl_wait_ticket *t, const char *name)
{
	size_t n = strnlen(name, NAME_MAX + 1);

	if (!t->free_locks || n == 0 || n > NAME_MAX || strchr(name, '\n'))
		return false;
	for (const char *p = t->free_locks; (p = strstr(p, name)); p += n)
		if (p > t->free_locks && p[-1] == '\n' && p[n] == '\n')
			return true;
	return false;
}

void gpuctl_wait_ticket_drain(struct gpuctl_wait_ticket *t, struct gpuctl_lease_dir *dir)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

	bool relevant = false, queue = false;
	ssize_t n;

	if (!t || t->ifd < 0)
		return;
	while ((n = read(t->ifd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i + (ssize_t)sizeof(struct inotify_event) <= n;) {
			const struct inotify_event *e = (const void *)(buf + i);
			bool close_only = !(e->mask & ~(IN_CLOSE_NOWRITE | IN_CLOSE_WRITE));
			bool self_close = e->len == 0 && close_only;
			bool free_close = close_only && e->len > 0 && e->wd == t->locks_wd &&
			                  was_free(t, e->name);

			/* every gpuctl that opens the lease directory opens locks/ (and readers
			 * list queue/<uid>/): the close of a watched directory itself changes no
			 * lease and no ticket. Nor does the close of a lock file the last try
			 * found free (a probe's, or a lease come and gone since): a waiter needs
			 * a device to come free, and that one already was; anything else may */
			relevant |= !self_close && !free_close;
			/* only queue/ (or an overflow) can mean a new queue/<uid>/ to watch */
			queue |= !self_close && (e->wd != t->locks_wd || (e->mask & IN_Q_OVERFLOW));
			i += (ssize_t)sizeof(*e) + e->len;
		}
	t->quiet = !relevant;
	if (queue)
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
	if (t->quiet) {
		t->quiet = false;
		return 0; /* nothing but directories closed since the drain */
	}
	r = lease_select_lock_take(ctx, dir, &sfd, &ino);
	if (r < 0)
		return r;
	return lease_queue_fingerprint(dir, ino) != t->fp;
}

bool lease_ticket_queued(const struct gpuctl_wait_ticket *t)
{
	return t && t->fd >= 0;
}

void lease_ticket_failed(struct gpuctl_wait_ticket *t, uint64_t fp, char *free_locks)
{
	t->fp = fp;
	t->have_fp = true;
	free(t->free_locks);
	t->free_locks = free_locks;
}

void lease_ticket_leave(struct gpuctl_wait_ticket *t)
{
	if (t->fd < 0)
		return;
	(void)unlinkat(t->qfd, t->name, 0);
	closep(&t->fd);
}

/* ---- the queue for display (gpuctl ps --waiting) ---- */

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

		l->users[i] = nss_user_name(t->uid);
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

/* ---- the ticket parser, for fuzz/fuzz-lease.c ---- */

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
