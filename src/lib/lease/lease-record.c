// SPDX-License-Identifier: MIT
/*
 * lease-record.c: owner records (docs/leases.md): who holds a lease, written per user under
 * DIR/owners/<uid>/ for `gpuctl ps`, read back by a strict bounded parser, and the /proc facts
 * that decide whether a record counts.
 * Records never decide who holds what: the lock files do (lease-dir.c). The /proc facts they
 * rest on are lease-proc.c's.
 * Tests: tests/unit/test-lease.c (owner records), tests/cli/test_leases.py; the parsers are
 * fuzzed by fuzz/fuzz-lease.c.
 *
 * Decisions:
 * - Owner records are display only. A record counts when it comes from owners/<uid>/ that is a
 *   real directory owned by <uid> (and not writable by others), parses, its device is HELD and
 *   its pid or job_pid is alive, has the recorded start time (/proc/<pid>/stat field 22) and is
 *   owned by <uid>. Records are not removed when a lease ends: the next lease of that user and
 *   device replaces it, and a stale one never counts (its holder is dead or the lock is free).
 * - The record of a held device: the one whose pid or job_pid holds the lock per /proc/locks;
 *   when /proc/locks does not name the holder, the only counting record, if exactly one. The
 *   records of a shared device: each live one whose pid or job_pid took one of its read locks
 *   (every live one when /proc/locks names no pid). Anyone may write a record into their own
 *   owners/<uid>/ naming their own live process and any device: only the lock makes it a
 *   holder's.
 * - Shared leases' records are named <UUID>@<tag>.json (one per lease; tag = the creating pid),
 *   pruned by the same user's next shared lease once their holders are gone.
 * - Record format: one JSON object (docs/leases.md), written by hand with escaping; read back by
 *   a small strict parser (RECORD_MAX bytes at most; strings, non-negative integers and null;
 *   anything else makes the record unreadable). Control characters in strings become '?'.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "ctx.h"
#include "fileio.h"
#include "lease-internal.h"
#include "nss.h"
#include "utf8.h"
#include "util.h"

#define RECORD_MAX 16384 /* bytes: a longer record is unreadable */
_Static_assert(LEASE_TEXT_MAX == RECORD_MAX * 4, "lease-internal.h LEASE_TEXT_MAX");

/* ---- writing ---- */

/* A JSON string (or null), at most max input bytes (longer text is cut; invalid UTF-8 becomes
 * U+FFFD, utf8.h). */
static void sb_str(struct sbuf *b, const char *s, size_t max)
{
	_cleanup_free_ char *q = NULL;

	if (!s) {
		sbuf_printf(b, "null");
		return;
	}
	q = utf8_json_quote(s, max);
	if (!q)
		b->oom = true;
	else
		sbuf_printf(b, "%s", q);
}

int lease_user_dir_open(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir, bool create,
                        int *ret_fd)
{
	return lease_own_dir_open(ctx, dir, dir->owners_fd, "owners", create, ret_fd);
}

#define RECORD_NAME_MAX (UUID_MAX + 24) /* "<UUID>@<tag>.json" */

/* The record file name of device i of lease: <UUID>.json, or <UUID>@<tag>.json when shared. */
static void record_name(const struct gpuctl_lease *lease, size_t i, char *buf, size_t size)
{
	if (lease->share_mem > 0)
		(void)snprintf(buf, size, "%s@%" PRIu32 ".json", lease->devs[i].uuid, lease->tag);
	else
		(void)snprintf(buf, size, "%s.json", lease->devs[i].uuid);
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
		r = fd_write_all(fd, text, len);
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (r == 0 && renameat(ufd, tmp, ufd, name) < 0)
		r = -errno;
	if (r < 0)
		(void)unlinkat(ufd, tmp, 0);
	return r;
}

int lease_records_write(struct gpuctl_ctx *ctx, struct gpuctl_lease *lease, pid_t pid,
                        pid_t job_pid)
{
	uint64_t pst = 0, jst = 0;
	_cleanup_free_ char *user = nss_user_name(geteuid());
	struct sbuf b = LEASE_SBUF_INIT;
	int r;

	if (lease->user_fd < 0)
		return ctx_error(ctx, -ENOENT, "no owner records directory (owners/%u)",
		                 (unsigned)geteuid());
	r = lease_proc_stat(pid, NULL, &pst);
	if (r < 0)
		return ctx_error(ctx, r, "pid %d: cannot read its start time: %s", (int)pid,
		                 strerror(-r));
	if (job_pid > 0) {
		r = lease_proc_stat(job_pid, NULL, &jst);
		if (r < 0)
			return ctx_error(ctx, r, "pid %d: cannot read its start time: %s",
			                 (int)job_pid, strerror(-r));
	}
	for (size_t i = 0; i < lease->n; i++) {
		char name[RECORD_NAME_MAX];

		record_name(lease, i, name, sizeof(name));
		b.len = 0;
		sbuf_printf(
		        &b,
		        "{\"version\":1,\"device\":\"%s\",\"pid\":%d,\"pid_start_ticks\":%" PRIu64
		        ",\"start_time\":%" PRIu64 ",\"job_pid\":%d,\"job_start_ticks\":%" PRIu64
		        ",\"uid\":%u,\"user\":",
		        lease->devs[i].uuid, (int)pid, pst, lease_ticks_to_epoch(pst), (int)job_pid,
		        jst, (unsigned)geteuid());
		sb_str(&b, user, 256);
		sbuf_printf(&b, ",\"command\":");
		sb_str(&b, lease->command, 4096);
		sbuf_printf(&b, ",\"label\":");
		sb_str(&b, lease->label, 1024);
		if (lease->share_mem > 0)
			sbuf_printf(&b, ",\"share_mem\":%" PRIu64, lease->share_mem);
		sbuf_printf(&b, ",\"created\":%" PRIu64 "}\n", (uint64_t)time(NULL));
		if (b.oom) {
			free(b.p);
			return ctx_error(ctx, -ENOMEM, "out of memory");
		}
		r = record_write(lease->user_fd, name, b.p, b.len);
		if (r < 0) {
			free(b.p);
			return ctx_error(ctx, -EIO,
			                 "lease directory '%s': cannot write the lease record: %s",
			                 lease->dir_path ? lease->dir_path : "?", strerror(-r));
		}
	}
	free(b.p);
	return 0;
}

void lease_records_remove(const struct gpuctl_lease *lease)
{
	for (size_t i = 0; lease->user_fd >= 0 && i < lease->n; i++) {
		char name[RECORD_NAME_MAX];

		if (lease->devs[i].kept)
			continue; /* the other lease's, which still holds the device */
		record_name(lease, i, name, sizeof(name));
		(void)unlinkat(lease->user_fd, name, 0);
	}
}

/* ---- reading (strict, bounded) ---- */

void lease_record_clear(struct record *r)
{
	free(r->user);
	free(r->command);
	free(r->label);
	r->user = r->command = r->label = NULL;
}

void lease_records_free(struct record *r, size_t n)
{
	for (size_t i = 0; r && i < n; i++)
		lease_record_clear(&r[i]);
	free(r);
}

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

/* A member's value: a string, a non-negative integer or null. */
struct jv {
	char *str;    /* the string, malloc'ed; NULL for an integer or null */
	uint64_t num; /* the integer */
	bool is_num;  /* an integer */
	bool is_null; /* null */
};

static void jv_done(struct jv *v)
{
	free(v->str);
}

/* A value: a string, a non-negative integer without leading zeros, or null. */
static int jp_value(struct jp *p, struct jv *v)
{
	size_t d = 0;

	if (p->s < p->e && *p->s == '"')
		return jp_str(p, &v->str);
	if (p->e - p->s >= 4 && memcmp(p->s, "null", 4) == 0) {
		p->s += 4;
		v->is_null = true;
		return 0;
	}
	while (p->s + d < p->e && p->s[d] >= '0' && p->s[d] <= '9')
		d++;
	if (d == 0 || (d > 1 && p->s[0] == '0') || !parse_dec(p->s, d, UINT64_MAX, &v->num))
		return -EINVAL;
	p->s += d;
	v->is_num = true;
	return 0;
}

/* The record's keys; pid and pid_start_ticks (RECORD_KEY_PID, RECORD_KEY_PID_START) are
 * required. */
static const char *const record_keys[] = {
        "version",    "device", "pid",  "pid_start_ticks", "job_pid", "job_start_ticks",
        "start_time", "uid",    "user", "command",         "label",   "created",
        "share_mem"};
#define RECORD_KEY_PID       2
#define RECORD_KEY_PID_START 3

/* A known integer member into r (version and uid are checked, not kept). */
static int record_set_num(struct record *r, const char *key, uint64_t num)
{
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
	else if (streq(key, "created"))
		r->created = num;
	else if (streq(key, "start_time"))
		r->start_time = num;
	else if (streq(key, "share_mem"))
		r->share_mem = num;
	return 0;
}

/* A known string member (or null) into r; device must name the file's device. */
static int record_set_str(struct record *r, const char *key, struct jv *v)
{
	if (streq(key, "user"))
		r->user = TAKE_PTR(v->str);
	else if (streq(key, "command"))
		r->command = TAKE_PTR(v->str);
	else if (streq(key, "label"))
		r->label = TAKE_PTR(v->str);
	else if (streq(key, "device") && !v->is_null && !streq(v->str, r->uuid))
		return -EINVAL; /* a record copied under another name */
	return 0;
}

/* One member, "key": value. A known key is checked for type, may appear once (seen[] marks
 * those met) and is stored in r; another must only be a string, an integer or null. */
static int record_member(struct jp *p, struct record *r, bool *seen)
{
	_cleanup_free_ char *key = NULL;
	_cleanup_(jv_done) struct jv v = {0};
	bool want_str;
	size_t k;
	int rr;

	jp_ws(p);
	rr = jp_str(p, &key);
	if (rr < 0)
		return rr;
	jp_ws(p);
	if (p->s >= p->e || *p->s++ != ':')
		return -EINVAL;
	jp_ws(p);
	rr = jp_value(p, &v);
	if (rr < 0)
		return rr;
	for (k = 0; k < ELEMENTSOF(record_keys); k++)
		if (streq(key, record_keys[k]))
			break;
	if (k == ELEMENTSOF(record_keys))
		return 0;
	if (seen[k])
		return -EINVAL;
	seen[k] = true;
	want_str = streq(key, "device") || streq(key, "user") || streq(key, "command") ||
	           streq(key, "label");
	if (want_str ? v.is_num : !v.is_num)
		return -EINVAL;
	return want_str ? record_set_str(r, key, &v) : record_set_num(r, key, v.num);
}

/* Parses a record: one JSON object of members (record_member). */
static int record_parse(const char *text, size_t len, struct record *r)
{
	bool seen[ELEMENTSOF(record_keys)] = {0};
	struct jp p = {text, text + len};
	int rr;

	jp_ws(&p);
	if (p.s >= p.e || *p.s++ != '{')
		return -EINVAL;
	jp_ws(&p);
	if (p.s < p.e && *p.s == '}')
		return -EINVAL;
	for (;;) {
		rr = record_member(&p, r, seen);
		if (rr < 0)
			return rr;
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
	if (p.s != p.e || !seen[RECORD_KEY_PID] || !seen[RECORD_KEY_PID_START])
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
	rr = fd_read_all(fd, RECORD_MAX, &text, &len);
	if (rr < 0)
		return rr;
	if (memchr(text, '\0', len))
		return -EINVAL;
	*r = (struct record){.uid = uid};
	strscpy(r->uuid, sizeof(r->uuid), uuid);
	rr = record_parse(text, len, r);
	if (rr < 0) {
		lease_record_clear(r);
		return rr;
	}
	r->pid_alive = lease_proc_matches(r->pid, r->pid_start_ticks, uid);
	r->job_alive = r->job_pid > 0 && lease_proc_matches(r->job_pid, r->job_start_ticks, uid);
	return 0;
}

bool lease_record_name_parse(const char *name, char *uuid, bool *ret_shared)
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
	return lease_uuid_ok(uuid);
}

int lease_records_load(struct gpuctl_ctx *ctx, const struct gpuctl_lease_dir *dir, uid_t only_uid,
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
	od = lease_dir_reopen(dir->owners_fd);
	if (!od)
		return 0;
	while ((de = readdir(od))) {
		_cleanup_close_ int ufd = -1;
		_cleanup_(closedirp) DIR *ud = NULL;
		struct dirent *fe;
		struct stat st;
		uint64_t uid;

		if (!lease_user_dir_name(de->d_name, &uid) ||
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
		ud = lease_dir_reopen(ufd);
		while (ud && (fe = readdir(ud))) {
			char uuid[UUID_MAX + 1];
			struct record rec = {0};
			bool shared;
			int r;

			if (!lease_record_name_parse(fe->d_name, uuid, &shared) ||
			    (only_uuid && !streq(uuid, only_uuid)))
				continue;
			r = record_read(ufd, (uid_t)uid, fe->d_name, uuid, &rec);
			rec.shared = shared;
			if (r == -ENOMEM) {
				lease_records_free(v, n);
				return ctx_error(ctx, -ENOMEM, "out of memory");
			}
			if (r < 0) {
				ctx_log(ctx, GPUCTL_LOG_DEBUG, "owners/%s/%s: unreadable (%s)",
				        de->d_name, fe->d_name, strerror(-r));
				continue;
			}
			if (!rec.pid_alive && !rec.job_alive) {
				lease_record_clear(&rec);
				continue;
			}
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 8;
				struct record *nv = realloc(v, nc * sizeof(*v));

				if (!nv) {
					lease_record_clear(&rec);
					lease_records_free(v, n);
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

int lease_records_drop(const struct gpuctl_lease_dir *dir, uid_t uid, const char *uuid,
                       uint32_t pid, uint64_t pid_start_ticks)
{
	_cleanup_(closedirp) DIR *od = NULL;
	struct dirent *de;
	int dropped = 0;

	if (dir->owners_fd < 0 || !(od = lease_dir_reopen(dir->owners_fd)))
		return 0;
	while ((de = readdir(od))) {
		_cleanup_close_ int ufd = -1;
		_cleanup_(closedirp) DIR *ud = NULL;
		struct dirent *fe;
		uint64_t u;

		if (!lease_user_dir_name(de->d_name, &u) || u != uid)
			continue;
		ufd = openat(dir->owners_fd, de->d_name,
		             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (ufd < 0 || !(ud = lease_dir_reopen(ufd)))
			continue;
		while ((fe = readdir(ud))) {
			char fu[UUID_MAX + 1];
			struct record rec = {0};
			bool shared, match;

			if (!lease_record_name_parse(fe->d_name, fu, &shared) || !streq(fu, uuid) ||
			    record_read(ufd, uid, fe->d_name, fu, &rec) < 0)
				continue;
			match = rec.pid == pid && rec.pid_start_ticks == pid_start_ticks;
			lease_record_clear(&rec);
			/* unlinkat follows no link: safe in a directory its user controls */
			if (match && unlinkat(ufd, fe->d_name, 0) == 0)
				dropped++;
		}
	}
	return dropped;
}

void lease_records_prune_shared(int ufd)
{
	_cleanup_(closedirp) DIR *d = lease_dir_reopen(ufd);
	struct dirent *de;

	while (d && (de = readdir(d))) {
		char uuid[UUID_MAX + 1];
		struct record rec = {0};
		bool shared = false, live;
		int r;

		if (!lease_record_name_parse(de->d_name, uuid, &shared) || !shared)
			continue;
		r = record_read(ufd, geteuid(), de->d_name, uuid, &rec);
		if (r == -ENOMEM)
			return;
		live = r == 0 && (rec.pid_alive || rec.job_alive);
		lease_record_clear(&rec);
		if (!live)
			(void)unlinkat(ufd, de->d_name, 0);
	}
}

ssize_t lease_record_pick(const struct record *v, size_t n, const char *uuid, const struct stat *st)
{
	pid_t holder = st ? lease_lock_holder(st->st_dev, st->st_ino, false) : 0;
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

bool lease_share_holder(const struct record *v, const struct stat *st)
{
	if (!v->pid_alive && !v->job_alive)
		return false;
	return lease_lock_taken_by(st->st_dev, st->st_ino, v->pid_alive ? (pid_t)v->pid : 0,
	                           v->job_alive ? (pid_t)v->job_pid : 0) != 0;
}

int lease_record_from_fds(const struct stat *st, struct record *ret)
{
	_cleanup_(closedirp) DIR *proc = opendir("/proc");
	struct dirent *pe;

	if (!st || !proc)
		return -ENOENT;
	while ((pe = readdir(proc))) {
		char path[64], comm[64] = "";
		_cleanup_(closedirp) DIR *fds = NULL;
		struct dirent *fe;
		struct stat pst, fst;
		uint64_t pid, start = 0;
		bool found = false;

		if (!parse_dec(pe->d_name, strlen(pe->d_name), UINT64_MAX, &pid) || pid > INT32_MAX)
			continue;
		(void)snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
		fds = opendir(path);
		while (fds && !found && (fe = readdir(fds))) {
			if (fe->d_name[0] == '.')
				continue;
			found = fstatat(dirfd(fds), fe->d_name, &fst, 0) == 0 &&
			        fst.st_dev == st->st_dev && fst.st_ino == st->st_ino;
		}
		(void)snprintf(path, sizeof(path), "/proc/%d", (int)pid);
		if (!found || stat(path, &pst) < 0 || lease_proc_stat((pid_t)pid, NULL, &start) < 0)
			continue;
		(void)snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
		{
			_cleanup_close_ int cfd = open(path, O_RDONLY | O_CLOEXEC);
			ssize_t k = cfd >= 0 ? read(cfd, comm, sizeof(comm) - 1) : -1;

			comm[k > 0 ? k : 0] = '\0';
			comm[strcspn(comm, "\n")] = '\0';
			for (char *c = comm; *c; c++)
				if ((unsigned char)*c < 0x20 || *c == 0x7f)
					*c = '?'; /* as records read back */
		}
		*ret = (struct record){.uid = pst.st_uid,
		                       .pid = (uint32_t)pid,
		                       .pid_start_ticks = start,
		                       .start_time = lease_ticks_to_epoch(start),
		                       .pid_alive = true};
		ret->user = nss_user_name(pst.st_uid);
		ret->command = comm[0] ? strdup(comm) : NULL;
		return 0;
	}
	return -ENOENT;
}

int lease_record_parse_text(const char *text, size_t len, const char *uuid)
{
	struct record r = {0};
	int rr;

	if (!text || !uuid || memchr(text, '\0', len))
		return -EINVAL;
	strscpy(r.uuid, sizeof(r.uuid), uuid);
	rr = record_parse(text, len, &r);
	lease_record_clear(&r);
	return rr;
}
