// SPDX-License-Identifier: MIT
/*
 * health-state.c: the health state file `gpuctl health --watch` keeps, so that a one-shot check
 * (and later select and run) knows what the watch saw: XIDs NVML delivered, and the last sample
 * of the counters the rate rules need.
 *
 * Format (text, one record per line, unknown or malformed lines skipped):
 *   gpuctl-health-state 1
 *   boot <the kernel's boot id>
 *   time <seconds since the epoch of the sample, with milliseconds: 1764512345.123>
 *   gpu <UUID> replay <N|-> dbe <N|-> nvlink <replay|-> <recovery|-> <crc|->
 *   xid <UUID> <code> <text to the end of the line>
 *
 * Decisions:
 * - GPUs are named by UUID, never by index: the reader maps them onto its own snapshot.
 * - A file from another boot (boot id differs) is stale: nothing of it is used (XIDs count since
 *   the driver loaded; a reboot reloads it).
 * - The reader trusts only a regular file (opened with O_NOFOLLOW) owned by root or by the
 *   caller and writable by nobody else; anything else is -EPERM, so another user cannot plant
 *   XIDs that fence GPUs.
 * - The writer replaces the file atomically (mkstemp in the same directory, fsync, rename), so
 *   a reader sees the old or the new file, never half of one.
 * - The earlier sample is returned as a snapshot holding just UUID, PCIe replays, retired DBE
 *   pages and the NVLink sums, which is what gpuctl_health_check's rate rules read from `prev`.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ctx.h"
#include "snapshot-internal.h"
#include "util.h"

#define STATE_MAGIC     "gpuctl-health-state 1"
#define STATE_MAX_BYTES (4u << 20)
#define LINE_MAX_LEN    1024
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

/* "-" or a decimal u64. */
static bool parse_opt_u64(const char *s, bool *has, uint64_t *v)
{
	char *end;

	if (streq(s, "-")) {
		*has = false;
		return true;
	}
	if (s[0] < '0' || s[0] > '9')
		return false;
	errno = 0;
	*v = strtoull(s, &end, 10);
	if (errno || *end)
		return false;
	*has = true;
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

/* "gpu UUID replay N dbe N nvlink A B C" into prev (appending a GPU). */
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
	if (n != 9 || !streq(tok[1], "replay") || !streq(tok[3], "dbe") ||
	    !streq(tok[5], "nvlink") || strncmp(tok[0], "GPU-", 4) != 0)
		return 0;
	if (!parse_opt_u64(tok[2], &has[0], &v[0]) || !parse_opt_u64(tok[4], &has[1], &v[1]) ||
	    !parse_opt_u64(tok[6], &has[2], &v[2]) || !parse_opt_u64(tok[7], &has[3], &v[3]) ||
	    !parse_opt_u64(tok[8], &has[4], &v[4]))
		return 0;
	if (gpu_by_uuid(prev, tok[0]) != SIZE_MAX)
		return 0; /* one record per GPU */
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
	g[i].nvlink_replay = has[2] ? v[2] : 0;
	g[i].has_nvlink_recovery = has[3];
	g[i].nvlink_recovery = has[3] ? v[3] : 0;
	g[i].has_nvlink_crc = has[4];
	g[i].nvlink_crc = has[4] ? v[4] : 0;
	return 1;
}

/* "xid UUID CODE TEXT": recorded unless xids already has that code on that GPU, or the kernel
 * log (already in xids) shows the GPU reset: every XID reaches the kernel log, so the state's
 * XIDs of that GPU are from before the reset or already there. */
static int parse_xid(const struct gpuctl_snapshot *snap, struct gpuctl_xid_log *xids,
                     const char *rest)
{
	char uuid[96];
	const char *sp = strchr(rest, ' ');
	unsigned long code;
	char *end;
	size_t gpu, len;

	if (!sp || (len = (size_t)(sp - rest)) >= sizeof(uuid))
		return 0;
	memcpy(uuid, rest, len);
	uuid[len] = '\0';
	if (sp[1] < '0' || sp[1] > '9')
		return 0;
	errno = 0;
	code = strtoul(sp + 1, &end, 10);
	if (errno || code == 0 || code > 99999 || (*end != ' ' && *end != '\0'))
		return 0;
	gpu = gpu_by_uuid(snap, uuid);
	if (gpu == SIZE_MAX || gpuctl_xid_log_resets(xids, gpu) > 0)
		return 0;
	for (size_t i = 0; i < gpuctl_xid_log_count(xids); i++) {
		size_t g;
		unsigned x;
		(void)gpuctl_xid_log_get(xids, i, &g, &x, NULL);
		if (g == gpu && x == code)
			return 0; /* the caller's own source (the kernel log) already has it */
	}
	int r = gpuctl_xid_log_add(xids, gpu, (unsigned)code, *end ? end + 1 : NULL);
	return r < 0 ? r : 1;
}

int health_state_parse(const char *text, size_t len, const char *boot,
                       const struct gpuctl_snapshot *snap, struct gpuctl_xid_log *xids,
                       struct gpuctl_snapshot **ret_prev, double *ret_time);

/* Parses state text against snap: XIDs into xids, the sample into *ret_prev (NULL when the file
 * has none or is stale) and its time. Internal; fuzz/fuzz-health-state.c drives it. */
int health_state_parse(const char *text, size_t len, const char *boot,
                       const struct gpuctl_snapshot *snap, struct gpuctl_xid_log *xids,
                       struct gpuctl_snapshot **ret_prev, double *ret_time)
{
	struct gpuctl_snapshot *prev = snapshot_new_empty(0, GPUCTL_SNAP_HEALTH);
	char line[LINE_MAX_LEN];
	size_t pos = 0, n_line = 0;
	double t = -1;
	bool stale = false;
	int r = 0;

	if (!prev)
		return -ENOMEM;
	while (pos < len && r >= 0 && !stale) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t end = nl ? (size_t)(nl - text) : len;
		size_t n = end - pos < sizeof(line) - 1 ? end - pos : sizeof(line) - 1;

		memcpy(line, text + pos, n);
		line[n] = '\0';
		pos = end + 1;
		if (n_line++ == 0) {
			if (!streq(line, STATE_MAGIC))
				stale = true; /* not ours, or another version */
			continue;
		}
		if (strncmp(line, "boot ", 5) == 0) {
			if (boot[0] && !streq(line + 5, boot))
				stale = true;
		} else if (strncmp(line, "time ", 5) == 0) {
			char *e;
			errno = 0;
			double v = strtod(line + 5, &e);
			if (!errno && !*e && e != line + 5 && v > 0 && v < 1e12)
				t = v;
		} else if (strncmp(line, "gpu ", 4) == 0) {
			r = parse_gpu(prev, line + 4);
		} else if (strncmp(line, "xid ", 4) == 0) {
			r = parse_xid(snap, xids, line + 4);
		}
	}
	if (r < 0 || stale || t < 0 || prev->n_gpus == 0) {
		gpuctl_snapshot_free(prev);
		prev = NULL;
	}
	if (r < 0)
		return r;
	*ret_prev = prev;
	*ret_time = t;
	return 0;
}

int gpuctl_health_state_read(struct gpuctl_ctx *ctx, const char *path,
                             const struct gpuctl_snapshot *snap, struct gpuctl_xid_log *xids,
                             struct gpuctl_snapshot **ret_prev, double *ret_age_s)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *buf = NULL;
	struct gpuctl_snapshot *prev = NULL;
	char boot[64];
	size_t len = 0;
	struct stat st;
	double t = -1;
	int r;

	if (!path || !snap || !xids)
		return ctx_error(ctx, -EINVAL, "health state: missing argument");
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
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
		return ctx_error(ctx, -EFBIG, "health state '%s': larger than %u bytes", path,
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
	r = health_state_parse(buf, len, boot, snap, xids, &prev, &t);
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

int gpuctl_health_state_write(struct gpuctl_ctx *ctx, const char *path,
                              const struct gpuctl_snapshot *snap, const struct gpuctl_xid_log *xids)
{
	_cleanup_free_ char *tmp = NULL;
	char boot[64];
	FILE *f;
	int fd, r = 0;

	if (!path || !snap)
		return ctx_error(ctx, -EINVAL, "health state: missing argument");
	if (asprintf(&tmp, "%s.XXXXXX", path) < 0) {
		tmp = NULL;
		return ctx_error(ctx, -ENOMEM, "out of memory");
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return ctx_error(ctx, -errno, "health state '%s': %s", path, strerror(errno));
	f = fdopen(fd, "w");
	if (!f) {
		r = -errno;
		close(fd);
		unlink(tmp);
		return ctx_error(ctx, r, "health state '%s': %s", path, strerror(-r));
	}
	boot_id(boot, sizeof(boot));
	fprintf(f, "%s\nboot %s\ntime %.3f\n", STATE_MAGIC, boot[0] ? boot : "-", now_s());
	for (size_t i = 0; i < snap->n_gpus; i++) {
		const struct gpuctl_gpu *g = &snap->gpus[i];
		const char *uuid = gpuctl_gpu_str(g, GPUCTL_F_UUID);

		if (!uuid || strchr(uuid, ' ') || g->lost)
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
		const char *text, *uuid;

		if (gpuctl_xid_log_get(xids, i, &gpu, &xid, &text) < 0 || gpu >= snap->n_gpus)
			continue;
		uuid = gpuctl_gpu_str(&snap->gpus[gpu], GPUCTL_F_UUID);
		if (uuid && !strchr(uuid, ' '))
			fprintf(f, "xid %s %u %s\n", uuid, xid, text ? text : "");
	}
	if (fflush(f) != 0 || fsync(fileno(f)) < 0 || fchmod(fileno(f), 0644) < 0)
		r = -errno;
	if (fclose(f) != 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0) {
		unlink(tmp);
		return ctx_error(ctx, r, "health state '%s': %s", path, strerror(-r));
	}
	return 0;
}
