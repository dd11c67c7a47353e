// SPDX-License-Identifier: MIT
/*
 * health-state.c: the health state file `gpuctl health --watch` keeps, so that a one-shot check
 * (and select and run) knows what the watch saw: XIDs NVML delivered, and the last sample of the
 * counters the rate rules need.
 *
 * Format 2 (text, one record per line, every byte printable ASCII, each line ending in '\n'):
 *   gpuctl-health-state 2
 *   boot <the kernel's boot id, or ->
 *   time <seconds since the epoch of the sample, with milliseconds: 1764512345.123>
 *   gpu <UUID> replay <N|-> dbe <N|-> nvlink <replay|-> <recovery|-> <crc|->
 *   xid <UUID> <code> <text to the end of the line>
 *   end <CRC-32 of every byte before this line, 8 lowercase hex digits>
 * Format 1 (gpuctl before format 2) is the same without the end line.
 *
 * Decisions:
 * - GPUs are named by UUID, never by index: the reader maps them onto its own snapshot.
 * - Strict: a file that is not wholly well formed is unreadable (-EBADMSG, the line and why),
 *   never read in part: a file cut short, or a byte changed, must not silently lose an XID that
 *   fences a GPU (a NUL once turned "79" into "7"). The end line makes a cut anywhere, even at a
 *   line boundary, and a changed byte visible; the CRC-32 (IEEE 802.3, reflected, as zlib's) is
 *   for damage, not for an attacker: who may write the file is the trust rule's business.
 *   Nothing is added to the caller's XIDs unless the whole file parsed.
 * - Format 1 files (written by the previous gpuctl, e.g. by a watch still running across an
 *   upgrade) are read with the same strict rules; only a cut at a line boundary goes unseen
 *   there. The writer always writes format 2. An unknown format is unreadable, not ignored.
 * - A file from another boot (boot id differs) is stale: nothing of it is used (XIDs count since
 *   the driver loaded; a reboot reloads it). Integrity is checked first.
 * - The reader trusts only a regular file (opened with O_NOFOLLOW) owned by root or by the
 *   caller and writable by nobody else; anything else is -EPERM, so another user cannot plant
 *   XIDs that fence GPUs (or make every GPU WARN with a corrupt file).
 * - The writer replaces the file atomically (mkstemp in the same directory, fsync, rename), so
 *   a reader sees the old or the new file, never half of one. It writes only what the reader
 *   accepts (a UUID it would refuse is left out).
 * - The earlier sample is returned as a snapshot holding just UUID, PCIe replays, retired DBE
 *   pages and the NVLink sums, which is what gpuctl_health_check's rate rules read from `prev`.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ctx.h"
#include "fileio.h"
#include "parse.h"
#include "snapshot-internal.h"
#include "util.h"

#define STATE_MAGIC     "gpuctl-health-state "
#define STATE_VERSION   2
#define STATE_MAX_BYTES (4u << 20)
#define LINE_MAX_LEN    1024 /* bytes of a line, its '\n' included */
#define UUID_MAX_LEN    95
#define XID_MAX_CODE    99999u
#define END_LINE_LEN    13 /* "end " + 8 hex digits + '\n' */
#define BOOT_ID_PATH    "/proc/sys/kernel/random/boot_id"

/* The kernel's boot id ("" when unknown: then every file counts as this boot's). */
static void boot_id(char *buf, size_t size)
{
	_cleanup_fclose_ FILE *f = fopen(BOOT_ID_PATH, "re");

	buf[0] = '\0';
	if (f && fgets(buf, (int)size, f))
		buf[strcspn(buf, "\n")] = '\0';
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

uint32_t health_state_crc32(const char *p, size_t n);

/* CRC-32 as IEEE 802.3 defines it (reflected polynomial 0xEDB88320, initial value and final
 * XOR 0xFFFFFFFF), bit by bit: the file is a few kilobytes. Internal; the unit test checks it
 * against the standard check value. */
uint32_t health_state_crc32(const char *p, size_t n)
{
	uint32_t c = 0xffffffffu;

	for (size_t i = 0; i < n; i++) {
		c ^= (unsigned char)p[i];
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
	}
	return ~c;
}

/* A UUID the file can carry: 1..UUID_MAX_LEN printable bytes without a space. */
static bool uuid_ok(const char *u, size_t len)
{
	if (len == 0 || len > UUID_MAX_LEN)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)u[i] <= ' ' || (unsigned char)u[i] > '~')
			return false;
	return true;
}

/* "-" or a decimal u64. */
static bool parse_opt_u64(const char *s, bool *has, uint64_t *v)
{
	*has = !streq(s, "-");
	*v = 0;
	return !*has || parse_dec(s, strlen(s), UINT64_MAX, v);
}

/* "1764512345.123": digits, optionally a point and digits; 0 < t < 1e12. */
static bool parse_time(const char *s, double *ret)
{
	const char *p = s;
	char *end;
	double v;

	while (*p >= '0' && *p <= '9')
		p++;
	if (p == s || p - s > 12)
		return false;
	if (*p == '.') {
		const char *q = ++p;
		while (*p >= '0' && *p <= '9')
			p++;
		if (p == q)
			return false;
	}
	if (*p)
		return false;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !(v > 0 && v < 1e12))
		return false;
	*ret = v;
	return true;
}

static size_t gpu_by_uuid(const struct gpuctl_snapshot *snap, const char *uuid)
{
	for (size_t i = 0; snap && i < snap->n_gpus; i++) {
		const char *u = gpuctl_gpu_str(&snap->gpus[i], GPUCTL_F_UUID);
		if (u && streq(u, uuid))
			return i;
	}
	return SIZE_MAX;
}

/* "UUID replay N dbe N nvlink A B C" appended to prev. 1, 0 when malformed (or a second record
 * of one GPU), -ENOMEM. */
static int parse_gpu(struct gpuctl_snapshot *prev, char *rest)
{
	char *tok[10];
	uint64_t v[5];
	bool has[5];
	size_t n = 0, i;

	/* split on single spaces: exactly nine words */
	for (char *t = rest; t && n < 10; n++) {
		tok[n] = t;
		t = strchr(t, ' ');
		if (t)
			*t++ = '\0';
	}
	if (n != 9 || !uuid_ok(tok[0], strlen(tok[0])) || !streq(tok[1], "replay") ||
	    !streq(tok[3], "dbe") || !streq(tok[5], "nvlink"))
		return 0;
	if (!parse_opt_u64(tok[2], &has[0], &v[0]) || !parse_opt_u64(tok[4], &has[1], &v[1]) ||
	    !parse_opt_u64(tok[6], &has[2], &v[2]) || !parse_opt_u64(tok[7], &has[3], &v[3]) ||
	    !parse_opt_u64(tok[8], &has[4], &v[4]))
		return 0;
	if (gpu_by_uuid(prev, tok[0]) != SIZE_MAX)
		return 0; /* the writer writes one record per GPU */
	i = prev->n_gpus;
	struct gpuctl_gpu *g = realloc(prev->gpus, (i + 1) * sizeof(*g));
	if (!g)
		return -ENOMEM;
	prev->gpus = g;
	memset(&g[i], 0, sizeof(g[i]));
	g[i].index = i;
	g[i].ints[GPUCTL_F_INDEX] = (int64_t)i;
	g[i].valid[GPUCTL_F_INDEX] = true;
	prev->n_gpus = i + 1;
	if (snapshot_set_str(prev, i, GPUCTL_F_UUID, tok[0]) < 0)
		return -ENOMEM;
	if (has[0] && v[0] <= INT64_MAX)
		(void)snapshot_set_int(prev, i, GPUCTL_F_PCIE_REPLAY, (int64_t)v[0]);
	if (has[1] && v[1] <= INT64_MAX)
		(void)snapshot_set_int(prev, i, GPUCTL_F_RETIRED_DBE, (int64_t)v[1]);
	g[i].has_nvlink_replay = has[2];
	g[i].nvlink_replay = v[2];
	g[i].has_nvlink_recovery = has[3];
	g[i].nvlink_recovery = v[3];
	g[i].has_nvlink_crc = has[4];
	g[i].nvlink_crc = v[4];
	return 1;
}

/* "UUID CODE[ TEXT]" into found (by snap's index; a GPU snap lacks, and a code outside
 * 1..99999, which the writer never wrote, are well formed and skipped). 1, 0 when malformed,
 * -ENOMEM. */
static int parse_xid(const struct gpuctl_snapshot *snap, struct gpuctl_xid_log *found,
                     const char *rest)
{
	char uuid[UUID_MAX_LEN + 1], digits[12];
	const char *sp = strchr(rest, ' '), *code_s, *text = NULL;
	uint64_t code;
	size_t gpu, len;

	if (!sp || !uuid_ok(rest, (size_t)(sp - rest)))
		return 0;
	len = (size_t)(sp - rest);
	memcpy(uuid, rest, len);
	uuid[len] = '\0';
	code_s = sp + 1;
	sp = strchr(code_s, ' ');
	len = sp ? (size_t)(sp - code_s) : strlen(code_s);
	if (len == 0 || len >= sizeof(digits))
		return 0;
	memcpy(digits, code_s, len);
	digits[len] = '\0';
	if (!parse_dec(digits, strlen(digits), UINT64_MAX, &code))
		return 0;
	if (sp)
		text = sp + 1;
	gpu = gpu_by_uuid(snap, uuid);
	if (gpu == SIZE_MAX || code == 0 || code > XID_MAX_CODE)
		return 1;
	int r = gpuctl_xid_log_add(found, gpu, (unsigned)code, text);
	return r < 0 ? r : 1;
}

/* The found XIDs into xids, each unless xids already has that code on that GPU, or the kernel
 * log (already in xids) shows the GPU reset: every XID reaches the kernel log, so the state's
 * XIDs of that GPU are from before the reset or already there. */
static int merge_xids(struct gpuctl_xid_log *xids, const struct gpuctl_xid_log *found)
{
	size_t known = gpuctl_xid_log_count(xids);

	for (size_t i = 0; i < gpuctl_xid_log_count(found); i++) {
		size_t gpu, g;
		unsigned code, x;
		const char *text;
		bool dup = false;
		int r;

		(void)gpuctl_xid_log_get(found, i, &gpu, &code, &text);
		if (gpuctl_xid_log_resets(xids, gpu) > 0)
			continue;
		for (size_t k = 0; k < known && !dup; k++) {
			(void)gpuctl_xid_log_get(xids, k, &g, &x, NULL);
			dup = g == gpu && x == code;
		}
		if (dup)
			continue; /* the caller's own source (the kernel log) already has it */
		r = gpuctl_xid_log_add(xids, gpu, code, text);
		if (r < 0)
			return r;
	}
	return 0;
}

_printf_(3, 4) static int bad(char *why, size_t size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(why, size, fmt, ap);
	va_end(ap);
	return -EBADMSG;
}

/* The format of text (1 or 2) from its first line, and for format 2 the checked end line:
 * *ret_len becomes the length of the records (the end line excluded). -EBADMSG with why. */
static int state_frame(const char *text, size_t len, size_t *ret_len, int *ret_version, char *why,
                       size_t wsize)
{
	const size_t ml = strlen(STATE_MAGIC);
	const char *nl = memchr(text, '\n', len);
	size_t first = nl ? (size_t)(nl - text) : len;
	char hex[9];
	uint32_t want;

	if (len == 0)
		return bad(why, wsize, "empty");
	if (first < ml || memcmp(text, STATE_MAGIC, ml) != 0)
		return bad(why, wsize, "not a health state file (no '%s' line)", STATE_MAGIC "N");
	if (first == ml + 1 && text[ml] == '1') {
		*ret_version = 1;
	} else if (first == ml + 1 && text[ml] == '2') {
		*ret_version = 2;
	} else {
		char v[16];
		quote_text(v, sizeof(v), text + ml, first - ml, 8);
		return bad(why, wsize, "format '%s', not one this gpuctl reads (1 or 2)", v);
	}
	if (text[len - 1] != '\n')
		return bad(why, wsize, "truncated: the last line has no newline");
	*ret_len = len;
	if (*ret_version == 1)
		return 0;
	/* format 2: the last line is "end XXXXXXXX" over everything before it */
	if (len < END_LINE_LEN || (len > END_LINE_LEN && text[len - END_LINE_LEN - 1] != '\n') ||
	    memcmp(text + len - END_LINE_LEN, "end ", 4) != 0)
		return bad(why, wsize, "truncated: no end line");
	memcpy(hex, text + len - END_LINE_LEN + 4, 8);
	hex[8] = '\0';
	for (size_t i = 0; i < 8; i++)
		if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f')))
			return bad(why, wsize, "malformed end line");
	want = (uint32_t)strtoul(hex, NULL, 16);
	if (health_state_crc32(text, len - END_LINE_LEN) != want)
		return bad(why, wsize, "checksum mismatch: the file was changed or damaged");
	*ret_len = len - END_LINE_LEN;
	return 0;
}

int health_state_parse(const char *text, size_t len, const char *boot,
                       const struct gpuctl_snapshot *snap, struct gpuctl_xid_log *xids,
                       struct gpuctl_snapshot **ret_prev, double *ret_time, char *why,
                       size_t wsize);

/* Parses state text against snap: XIDs into xids, the sample into *ret_prev (NULL when the file
 * has none or is stale) and its time. -EBADMSG (nothing added, why says what) when text is not
 * a whole, well-formed state file; -ENOMEM. Internal; fuzz/fuzz-health-state.c drives it. */
int health_state_parse(const char *text, size_t len, const char *boot,
                       const struct gpuctl_snapshot *snap, struct gpuctl_xid_log *xids,
                       struct gpuctl_snapshot **ret_prev, double *ret_time, char *why, size_t wsize)
{
	struct gpuctl_snapshot *prev = NULL;
	struct gpuctl_xid_log *found = NULL;
	char line[LINE_MAX_LEN];
	size_t pos = 0, n_line = 0, body = 0;
	double t = -1;
	bool stale = false;
	int version = 0, r;

	why[0] = '\0';
	r = state_frame(text, len, &body, &version, why, wsize);
	if (r < 0)
		return r;
	prev = snapshot_new_empty(0, GPUCTL_SNAP_HEALTH);
	if (!prev || gpuctl_xid_log_new(&found) < 0) {
		gpuctl_snapshot_free(prev);
		return -ENOMEM;
	}
	while (pos < body && r >= 0) {
		const char *nl = memchr(text + pos, '\n', body - pos);
		size_t n = (size_t)(nl - (text + pos)); /* body ends with '\n' (state_frame) */

		n_line++;
		if (n + 1 > sizeof(line)) {
			r = bad(why, wsize, "line %zu: longer than %d bytes", n_line, LINE_MAX_LEN);
			break;
		}
		memcpy(line, text + pos, n);
		line[n] = '\0';
		pos += n + 1;
		for (size_t i = 0; i < n && r >= 0; i++)
			if ((unsigned char)line[i] < ' ' || (unsigned char)line[i] > '~')
				r = bad(why, wsize,
				        "line %zu: a control or non-ASCII byte (0x%02x)", n_line,
				        (unsigned)(unsigned char)line[i]);
		if (r < 0)
			break;
		if (n_line == 1)
			continue; /* the magic, checked by state_frame */
		if (n_line == 2) {
			if (strncmp(line, "boot ", 5) != 0 || !uuid_ok(line + 5, n - 5))
				r = bad(why, wsize, "line 2: not 'boot ID'");
			else if (boot[0] && !streq(line + 5, boot))
				stale = true;
			continue;
		}
		if (n_line == 3) {
			if (strncmp(line, "time ", 5) != 0 || !parse_time(line + 5, &t))
				r = bad(why, wsize, "line 3: not 'time SECONDS'");
			continue;
		}
		if (strncmp(line, "gpu ", 4) == 0)
			r = parse_gpu(prev, line + 4);
		else if (strncmp(line, "xid ", 4) == 0)
			r = parse_xid(snap, found, line + 4);
		else
			r = 0;
		if (r == 0)
			r = bad(why, wsize, "line %zu: malformed %s record", n_line,
			        strncmp(line, "gpu ", 4) == 0   ? "gpu"
			        : strncmp(line, "xid ", 4) == 0 ? "xid"
			                                        : "unknown");
	}
	if (r >= 0 && n_line < 3)
		r = bad(why, wsize, "truncated: no %s line", n_line < 2 ? "boot" : "time");
	if (r >= 0 && !stale)
		r = merge_xids(xids, found);
	gpuctl_xid_log_free(found);
	if (r < 0 || stale || prev->n_gpus == 0) {
		gpuctl_snapshot_free(prev);
		prev = NULL;
	}
	if (r < 0)
		return r;
	*ret_prev = prev;
	*ret_time = prev ? t : -1;
	return 0;
}

int gpuctl_health_state_read(struct gpuctl_ctx *ctx, const char *path,
                             const struct gpuctl_snapshot *snap, struct gpuctl_xid_log *xids,
                             struct gpuctl_snapshot **ret_prev, double *ret_age_s)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *buf = NULL;
	struct gpuctl_snapshot *prev = NULL;
	char boot[64], why[160];
	size_t len = 0;
	struct stat st;
	double t = -1;
	int r;

	if (!path || !snap || !xids)
		return ctx_error(ctx, -EINVAL, "health state: missing argument");
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0 && errno == ELOOP)
		return ctx_error(ctx, -EPERM, "health state '%s': a symlink; ignored", path);
	if (fd < 0)
		return ctx_error(ctx, -errno, "health state '%s': %s", path, strerror(errno));
	if (fstat(fd, &st) < 0)
		return ctx_error(ctx, -errno, "health state '%s': %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode) || (st.st_uid != 0 && st.st_uid != geteuid()) ||
	    (st.st_mode & (S_IWGRP | S_IWOTH)))
		return ctx_error(ctx, -EPERM,
		                 "health state '%s': not a regular file of root or yours, writable "
		                 "only by its owner; ignored",
		                 path);
	if ((uint64_t)st.st_size > STATE_MAX_BYTES)
		return ctx_error(ctx, -EBADMSG, "health state '%s': larger than %u bytes", path,
		                 STATE_MAX_BYTES);
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	while (len < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + len, (size_t)st.st_size - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return ctx_error(ctx, -errno, "health state '%s': %s", path,
			                 strerror(errno));
		if (n == 0)
			break;
		len += (size_t)n;
	}
	boot_id(boot, sizeof(boot));
	r = health_state_parse(buf, len, boot, snap, xids, &prev, &t, why, sizeof(why));
	if (r == -EBADMSG)
		return ctx_error(ctx, r, "health state '%s': %s", path, why);
	if (r < 0)
		return ctx_error(ctx, r, "out of memory");
	if (prev && now_s() - t > 0) {
		*ret_prev = prev;
		*ret_age_s = now_s() - t;
	} else {
		gpuctl_snapshot_free(prev);
		*ret_prev = NULL;
		*ret_age_s = 0;
	}
	return 0;
}

/* " N", or " -" for a value not read. */
static void put_u64(FILE *f, bool has, uint64_t v)
{
	if (has)
		fprintf(f, " %" PRIu64, v);
	else
		fputs(" -", f);
}

static void put_opt(FILE *f, const struct gpuctl_gpu *g, enum gpuctl_field fld)
{
	int64_t v;

	if (gpuctl_gpu_int(g, fld, &v) == 0 && v >= 0)
		fprintf(f, " %" PRId64, v);
	else
		fputs(" -", f);
}

/* The records of snap and xids (the end line excluded) into a malloc'ed *ret_text. */
static int state_text(const struct gpuctl_snapshot *snap, const struct gpuctl_xid_log *xids,
                      char **ret_text, size_t *ret_len)
{
	char boot[64], *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return -ENOMEM;
	boot_id(boot, sizeof(boot));
	if (!uuid_ok(boot, strlen(boot)))
		(void)snprintf(boot, sizeof(boot), "-");
	fprintf(f, "%s%d\nboot %s\ntime %.3f\n", STATE_MAGIC, STATE_VERSION, boot, now_s());
	for (size_t i = 0; i < snap->n_gpus; i++) {
		const struct gpuctl_gpu *g = &snap->gpus[i];
		const char *uuid = gpuctl_gpu_str(g, GPUCTL_F_UUID);

		if (!uuid || !uuid_ok(uuid, strlen(uuid)) || g->lost)
			continue;
		fprintf(f, "gpu %s replay", uuid);
		put_opt(f, g, GPUCTL_F_PCIE_REPLAY);
		fputs(" dbe", f);
		put_opt(f, g, GPUCTL_F_RETIRED_DBE);
		fputs(" nvlink", f);
		put_u64(f, g->has_nvlink_replay, g->nvlink_replay);
		put_u64(f, g->has_nvlink_recovery, g->nvlink_recovery);
		put_u64(f, g->has_nvlink_crc, g->nvlink_crc);
		fputc('\n', f);
	}
	for (size_t i = 0; i < gpuctl_xid_log_count(xids); i++) {
		size_t gpu;
		unsigned xid;
		const char *text_i, *uuid;
		char shown[LINE_MAX_LEN / 2];

		if (gpuctl_xid_log_get(xids, i, &gpu, &xid, &text_i) < 0 || gpu >= snap->n_gpus ||
		    xid == 0 || xid > XID_MAX_CODE)
			continue;
		uuid = gpuctl_gpu_str(&snap->gpus[gpu], GPUCTL_F_UUID);
		if (!uuid || !uuid_ok(uuid, strlen(uuid)))
			continue;
		/* the log's texts are printable and short already; this keeps the promise here */
		quote_text(shown, sizeof(shown), text_i ? text_i : "", text_i ? strlen(text_i) : 0,
		           sizeof(shown) - 4);
		fprintf(f, "xid %s %u%s%s\n", uuid, xid, shown[0] ? " " : "", shown);
	}
	if (ferror(f) || fclose(f) != 0) {
		free(text);
		return -ENOMEM;
	}
	*ret_text = text;
	*ret_len = len;
	return 0;
}

int gpuctl_health_state_write(struct gpuctl_ctx *ctx, const char *path,
                              const struct gpuctl_snapshot *snap, const struct gpuctl_xid_log *xids)
{
	_cleanup_free_ char *tmp = NULL, *text = NULL;
	char end[END_LINE_LEN + 1];
	size_t len = 0;
	int fd, r;

	if (!path || !snap)
		return ctx_error(ctx, -EINVAL, "health state: missing argument");
	if (state_text(snap, xids, &text, &len) < 0)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	(void)snprintf(end, sizeof(end), "end %08" PRIx32 "\n", health_state_crc32(text, len));
	if (asprintf(&tmp, "%s.XXXXXX", path) < 0) {
		tmp = NULL;
		return ctx_error(ctx, -ENOMEM, "out of memory");
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return ctx_error(ctx, -errno, "health state '%s': %s", path, strerror(errno));
	r = fd_write_all(fd, text, len);
	if (r == 0)
		r = fd_write_all(fd, end, END_LINE_LEN);
	if (r == 0 && (fsync(fd) < 0 || fchmod(fd, 0644) < 0))
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0) {
		unlink(tmp);
		return ctx_error(ctx, r, "health state '%s': %s", path, strerror(-r));
	}
	return 0;
}
