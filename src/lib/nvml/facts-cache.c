// SPDX-License-Identifier: MIT
/*
 * facts-cache.c: the facts cache. A GPU's name, PCI bus id and device id, slowdown temperature
 * and maximum PCIe link width cannot change while the machine runs: the name and device id are
 * the part's, the bus id its slot's, the slowdown temperature its VBIOS's, the maximum width its
 * and its slot's. A snapshot that reads the UUID looks the GPU up here and asks NVML only for
 * what the cache lacks: 4 NVML calls per GPU fewer for `gpuctl list` (bench/RESULTS.md).
 *
 * Decisions:
 * - Keyed by UUID, checked by boot and driver: the file holds the boot id (/proc/sys/kernel/
 *   random/boot_id) and the kernel module's version line ($GPUCTL_NVIDIA_PROC/version, else
 *   /proc/driver/nvidia/version: "NVRM version: ...", its build included) it was written with,
 *   and is used with no other (a driver upgraded without a reboot may name a GPU otherwise);
 *   every entry is found by the UUID NVML gives for that index now, so a GPU swapped or
 *   re-enumerated finds no entry. Changing MIG mode or resetting a GPU changes none of these
 *   facts.
 * - One file per user, private: $XDG_RUNTIME_DIR/gpuctl-facts (the user's tmpfs, gone at
 *   logout or reboot), or the file $GPUCTL_FACTS_CACHE names ("" or "off": no cache). A file is
 *   used only when it is a regular file of the user's own that nobody else may write, so
 *   another user cannot make gpuctl show a wrong name or bus id (and with it -i pick a GPU
 *   wrongly) or hide a temperature warning. Without $XDG_RUNTIME_DIR (cron, sudo) there is no
 *   cache and every fact is read.
 * - Whole or nothing: one line that is not exactly this format rejects the file (it is written
 *   again); the file is replaced by rename(2), never written in place.
 * - Only what NVML answered is kept: a fact it did not give is asked again next time.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctx.h"
#include "driver-proc.h"
#include "facts-cache.h"
#include "fileio.h"
#include "parse.h"
#include "sbuf.h"
#include "utf8.h"
#include "util.h"

#define HEADER      "gpuctl-facts 2\n"
#define BOOT_FILE   "/proc/sys/kernel/random/boot_id"
#define XDG_NAME    "gpuctl-facts"
#define BOOT_ID_LEN 36 /* 8-4-4-4-12 hex digits */

void facts_cache_free(struct facts_cache *c)
{
	if (!c)
		return;
	free(c->entries);
	free(c);
}

static void facts_cache_freep(struct facts_cache **c)
{
	facts_cache_free(*c);
}

/* A boot id as the kernel writes it: 36 characters of lower-case hex and '-' in 8-4-4-4-12. */
static bool boot_id_ok(const char *s, size_t n)
{
	if (n != BOOT_ID_LEN)
		return false;
	for (size_t k = 0; k < n; k++) {
		const bool dash = k == 8 || k == 13 || k == 18 || k == 23;

		if (dash ? s[k] != '-'
		         : !((s[k] >= '0' && s[k] <= '9') || (s[k] >= 'a' && s[k] <= 'f')))
			return false;
	}
	return true;
}

/* This boot's id into buf (BOOT_ID_LEN + 1 bytes): 0, or -errno. */
static int read_boot_id(char *buf)
{
	char text[64];
	ssize_t n;
	int fd = open(BOOT_FILE, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n < 0)
		return -EIO;
	while (n > 0 && text[n - 1] == '\n')
		n--;
	if (!boot_id_ok(text, (size_t)n))
		return -EINVAL;
	memcpy(buf, text, BOOT_ID_LEN);
	buf[BOOT_ID_LEN] = '\0';
	return 0;
}

/* The first line of the driver's version file into buf (FACTS_DRIVER_MAX bytes): only its
 * printable ASCII, cut to fit; "" when there is none. */
static void read_driver_line(char *buf)
{
	const char *env = getenv("GPUCTL_NVIDIA_PROC");
	char path[4096], text[FACTS_DRIVER_MAX];
	ssize_t n = -1;
	size_t k = 0;
	int fd;

	buf[0] = '\0';
	if (snprintf(path, sizeof(path), "%s/version",
	             env && env[0] ? env : "/proc/driver/nvidia") >= (int)sizeof(path))
		return;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd >= 0) {
		n = read(fd, text, sizeof(text) - 1);
		close(fd);
	}
	for (ssize_t j = 0; j < n && text[j] != '\n'; j++)
		if (text[j] >= 0x20 && text[j] < 0x7f)
			buf[k++] = text[j];
	buf[k] = '\0';
}

/* A driver line as read_driver_line keeps it. */
static bool driver_ok(const char *s, size_t n)
{
	if (n >= FACTS_DRIVER_MAX)
		return false;
	for (size_t k = 0; k < n; k++)
		if (s[k] < 0x20 || s[k] >= 0x7f)
			return false;
	return true;
}

/* ---- one line ---- */

/* The next tab-separated field of line[*at..end) into its bounds; false past the last one. */
static bool next_field(const char *line, size_t end, size_t *at, const char **ret_s, size_t *ret_n)
{
	size_t k = *at;

	if (k > end)
		return false;
	while (k < end && line[k] != '\t')
		k++;
	*ret_s = line + *at;
	*ret_n = k - *at;
	*at = k + 1;
	return true;
}

static bool uuid_ok(const char *s, size_t n)
{
	if (n < 5 || n >= FACTS_UUID_MAX || strncmp(s, "GPU-", 4) != 0)
		return false;
	for (size_t k = 4; k < n; k++)
		if (!((s[k] >= '0' && s[k] <= '9') || (s[k] >= 'a' && s[k] <= 'f') ||
		      (s[k] >= 'A' && s[k] <= 'F') || s[k] == '-'))
			return false;
	return true;
}

/* A bus id exactly as the NVML reader writes it ("00000000:07:00.0"), or empty. */
static bool bus_ok(const char *s, size_t n, char *out)
{
	char copy[FACTS_BUS_MAX], canon[FACTS_BUS_MAX];
	uint64_t v;

	if (n == 0)
		return true;
	if (n >= sizeof(copy))
		return false;
	memcpy(copy, s, n);
	copy[n] = '\0';
	if (!driver_proc_bus_parse(copy, &v))
		return false;
	driver_proc_bus_text(v, canon, sizeof(canon));
	if (!streq(canon, copy))
		return false;
	memcpy(out, copy, n + 1);
	return true;
}

/* A GPU name: printable UTF-8, no control character, or empty. */
static bool name_ok(const char *s, size_t n, char *out)
{
	if (n >= FACTS_NAME_MAX)
		return false;
	for (size_t k = 0; k < n;) {
		size_t l = utf8_seq_len((const unsigned char *)s + k, n - k);

		if (l == 0 || (l == 1 && ((unsigned char)s[k] < 0x20 || s[k] == 0x7f)))
			return false;
		k += l;
	}
	memcpy(out, s, n);
	out[n] = '\0';
	return true;
}

/* An optional decimal number of at most max into *v (*has: whether there was one). */
static bool number_ok(const char *s, size_t n, uint64_t max, int64_t *v, bool *has)
{
	uint64_t u;

	*has = n > 0;
	if (n == 0)
		return true;
	if (!parse_dec(s, n, max, &u))
		return false;
	*v = (int64_t)u;
	return true;
}

/* PCIe link widths (the specification's: x1, x2, x4, x8, x12, x16, x32). */
static bool width_ok(int64_t w)
{
	return w == 1 || w == 2 || w == 4 || w == 8 || w == 12 || w == 16 || w == 32;
}

/* "gpu\tUUID\tBUS\tDEVICE_ID\tSLOWDOWN_C\tWIDTH_MAX\tNAME" (every fact but the UUID may be
 * empty: not known) into *e; false when the line is not exactly that. */
static bool parse_entry(const char *line, size_t len, struct facts_entry *e)
{
	const char *f[7];
	size_t n[7], at = 0, k = 0;

	memset(e, 0, sizeof(*e));
	while (k < 7 && next_field(line, len, &at, &f[k], &n[k]))
		k++;
	if (k != 7 || at <= len || n[0] != 3 || memcmp(f[0], "gpu", 3) != 0 || !uuid_ok(f[1], n[1]))
		return false;
	memcpy(e->uuid, f[1], n[1]);
	e->uuid[n[1]] = '\0';
	return bus_ok(f[2], n[2], e->bus) &&
	       number_ok(f[3], n[3], UINT32_MAX, &e->device_id, &e->has_device_id) &&
	       number_ok(f[4], n[4], 1000, &e->slowdown_c, &e->has_slowdown) &&
	       (!e->has_slowdown || e->slowdown_c > 0) &&
	       number_ok(f[5], n[5], 32, &e->width_max, &e->has_width_max) &&
	       (!e->has_width_max || width_ok(e->width_max)) && name_ok(f[6], n[6], e->name);
}

int facts_cache_parse(const char *text, size_t len, const char *boot_id, const char *driver,
                      struct facts_cache **ret)
{
	_cleanup_(facts_cache_freep) struct facts_cache *c = NULL;
	const size_t hlen = strlen(HEADER);
	size_t at, cap = 0;

	if (len < hlen || memcmp(text, HEADER, hlen) != 0 || text[len - 1] != '\n')
		return -EINVAL;
	at = hlen;
	/* "boot ID" */
	if (len - at < 5 + BOOT_ID_LEN + 1 || memcmp(text + at, "boot ", 5) != 0 ||
	    !boot_id_ok(text + at + 5, BOOT_ID_LEN) || text[at + 5 + BOOT_ID_LEN] != '\n')
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	memcpy(c->boot_id, text + at + 5, BOOT_ID_LEN);
	at += 5 + BOOT_ID_LEN + 1;
	/* "driver LINE" */
	const char *dnl = memchr(text + at, '\n', len - at);
	const size_t dl = dnl ? (size_t)(dnl - (text + at)) : 0;

	if (!dnl || dl < 7 || memcmp(text + at, "driver ", 7) != 0 ||
	    !driver_ok(text + at + 7, dl - 7))
		return -EINVAL;
	memcpy(c->driver, text + at + 7, dl - 7);
	c->driver[dl - 7] = '\0';
	at += dl + 1;
	while (at < len) {
		const char *nl = memchr(text + at, '\n', len - at);
		size_t l = (size_t)(nl - (text + at));
		struct facts_entry e;

		if (!parse_entry(text + at, l, &e) || c->n >= FACTS_CACHE_MAX_GPUS ||
		    facts_cache_find(c, e.uuid))
			return -EINVAL;
		if (c->n == cap) {
			size_t ncap = cap ? cap * 2 : 8;
			struct facts_entry *p = realloc(c->entries, ncap * sizeof(*p));

			if (!p)
				return -ENOMEM;
			c->entries = p;
			cap = ncap;
		}
		c->entries[c->n++] = e;
		at += l + 1;
	}
	if (!boot_id || !streq(c->boot_id, boot_id) || !driver || !streq(c->driver, driver))
		return -ESTALE;
	*ret = TAKE_PTR(c);
	return 0;
}

const struct facts_entry *facts_cache_find(const struct facts_cache *c, const char *uuid)
{
	for (size_t k = 0; c && uuid && k < c->n; k++)
		if (streq(c->entries[k].uuid, uuid))
			return &c->entries[k];
	return NULL;
}

/* ---- the file ---- */

/* The cache file's path into buf: 0; -ENOENT when there is none (off, or no private runtime
 * directory). */
static int cache_path(struct gpuctl_ctx *ctx, char *buf, size_t size)
{
	const char *env = getenv("GPUCTL_FACTS_CACHE");
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	struct stat st;
	int n;

	if (env)
		n = env[0] && !streq(env, "off") ? snprintf(buf, size, "%s", env) : -1;
	else if (!xdg || xdg[0] != '/')
		n = -1;
	else if (stat(xdg, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
	         (st.st_mode & 022)) {
		ctx_log_once(
		        ctx, "facts-dir", GPUCTL_LOG_DEBUG,
		        "facts cache: XDG_RUNTIME_DIR '%s' is no private directory of this user",
		        xdg);
		n = -1;
	} else {
		n = snprintf(buf, size, "%s/%s", xdg, XDG_NAME);
	}
	return n > 0 && (size_t)n < size ? 0 : -ENOENT;
}

struct facts_cache *facts_cache_load(struct gpuctl_ctx *ctx)
{
	char path[4096], boot[BOOT_ID_LEN + 1], driver[FACTS_DRIVER_MAX];
	_cleanup_free_ char *text = NULL;
	struct facts_cache *c = NULL;
	struct stat st;
	size_t len = 0;
	int fd, r;

	if (cache_path(ctx, path, sizeof(path)) < 0)
		return NULL;
	r = read_boot_id(boot);
	if (r < 0) {
		ctx_log_once(ctx, "facts-boot", GPUCTL_LOG_DEBUG,
		             "facts cache: no boot id (%s): not used", strerror(-r));
		return NULL;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0) {
		if (errno != ENOENT)
			ctx_log(ctx, GPUCTL_LOG_DEBUG, "facts cache '%s': %s", path,
			        strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 022)) {
		ctx_log(ctx, GPUCTL_LOG_DEBUG,
		        "facts cache '%s': not a regular file of this user that only it may write: "
		        "not used",
		        path);
		close(fd);
		return NULL;
	}
	r = fd_read_all(fd, FACTS_CACHE_MAX_BYTES, &text, &len);
	close(fd);
	read_driver_line(driver);
	if (r >= 0)
		r = facts_cache_parse(text, len, boot, driver, &c);
	if (r < 0) {
		ctx_log(ctx, GPUCTL_LOG_DEBUG, "facts cache '%s': %s: not used", path,
		        r == -ESTALE ? "written in another boot or with another driver"
		                     : strerror(-r));
		return NULL;
	}
	return c;
}

uint64_t facts_entry_apply(const struct facts_entry *e, struct gpuctl_snapshot *snap, size_t gpu,
                           uint64_t want)
{
	uint64_t set = 0;

#define SET(f, cond, call)                                                                         \
	do {                                                                                       \
		if ((want >> (f)&1u) && (cond) && (call) >= 0)                                     \
			set |= UINT64_C(1) << (f);                                                 \
	} while (0)
	SET(GPUCTL_F_PCI_BUS_ID, e->bus[0],
	    snapshot_set_str(snap, gpu, GPUCTL_F_PCI_BUS_ID, e->bus));
	SET(GPUCTL_F_PCI_DEVICE_ID, e->has_device_id,
	    snapshot_set_int(snap, gpu, GPUCTL_F_PCI_DEVICE_ID, e->device_id));
	SET(GPUCTL_F_NAME, e->name[0], snapshot_set_str(snap, gpu, GPUCTL_F_NAME, e->name));
	SET(GPUCTL_F_TEMP_SLOWDOWN, e->has_slowdown,
	    snapshot_set_int(snap, gpu, GPUCTL_F_TEMP_SLOWDOWN, e->slowdown_c));
	SET(GPUCTL_F_PCIE_WIDTH_MAX, e->has_width_max,
	    snapshot_set_int(snap, gpu, GPUCTL_F_PCIE_WIDTH_MAX, e->width_max));
#undef SET
	return set;
}

/* e with what GPU g of snap has (read now, or set from the cache): whether that added a fact. */
static bool merge_gpu(struct facts_entry *e, const struct gpuctl_gpu *g)
{
	const char *bus = gpuctl_gpu_str(g, GPUCTL_F_PCI_BUS_ID);
	const char *name = gpuctl_gpu_str(g, GPUCTL_F_NAME);
	bool added = false;
	int64_t v;

	if (!e->bus[0] && bus && bus_ok(bus, strlen(bus), e->bus))
		added = true;
	if (!e->name[0] && name && name_ok(name, strlen(name), e->name))
		added = true;
	if (!e->has_device_id && gpuctl_gpu_int(g, GPUCTL_F_PCI_DEVICE_ID, &v) >= 0 && v >= 0 &&
	    v <= (int64_t)UINT32_MAX) {
		e->device_id = v;
		added = e->has_device_id = true;
	}
	if (!e->has_slowdown && gpuctl_gpu_int(g, GPUCTL_F_TEMP_SLOWDOWN, &v) >= 0 && v > 0 &&
	    v <= 1000) {
		e->slowdown_c = v;
		added = e->has_slowdown = true;
	}
	if (!e->has_width_max && gpuctl_gpu_int(g, GPUCTL_F_PCIE_WIDTH_MAX, &v) >= 0 &&
	    width_ok(v)) {
		e->width_max = v;
		added = e->has_width_max = true;
	}
	return added;
}

static void put_entry(struct sbuf *b, const struct facts_entry *e)
{
	sbuf_printf(b, "gpu\t%s\t%s\t", e->uuid, e->bus);
	if (e->has_device_id)
		sbuf_printf(b, "%" PRId64, e->device_id);
	sbuf_puts(b, "\t");
	if (e->has_slowdown)
		sbuf_printf(b, "%" PRId64, e->slowdown_c);
	sbuf_puts(b, "\t");
	if (e->has_width_max)
		sbuf_printf(b, "%" PRId64, e->width_max);
	sbuf_printf(b, "\t%s\n", e->name);
}

/* Writes text to path by a private temporary file renamed over it: 0 or -errno. */
static int replace_file(const char *path, const char *text, size_t len)
{
	char tmp[4096 + 16];
	int fd, r;

	if (snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = fchmod(fd, 0600) < 0 ? -errno : fd_write_all(fd, text, len);
	if (close(fd) < 0 && r >= 0)
		r = -errno;
	if (r >= 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		(void)unlink(tmp);
	return r;
}

void facts_cache_format(const struct facts_cache *c, struct sbuf *b)
{
	sbuf_printf(b, "%sboot %s\ndriver %s\n", HEADER, c->boot_id, c->driver);
	for (size_t k = 0; k < c->n; k++)
		put_entry(b, &c->entries[k]);
}

void facts_cache_update(struct gpuctl_ctx *ctx, const struct facts_cache *old,
                        const struct gpuctl_snapshot *snap)
{
	char path[4096];
	struct facts_cache out = {0};
	_cleanup_free_ struct facts_entry *now = NULL;
	_cleanup_(sbuf_done) struct sbuf b = SBUF_INIT_MAX(FACTS_CACHE_MAX_BYTES);
	size_t n = 0;
	bool changed = false;
	int r;

	if (!snap || snap->n_gpus == 0 || cache_path(ctx, path, sizeof(path)) < 0 ||
	    read_boot_id(out.boot_id) < 0)
		return;
	read_driver_line(out.driver);
	/* this snapshot's GPUs, then the others the file knew (another NVML view of this
	 * machine), up to the limit */
	now = calloc(snap->n_gpus + (old ? old->n : 0), sizeof(*now));
	if (!now)
		return;
	for (size_t i = 0; i < snap->n_gpus; i++) {
		const struct gpuctl_gpu *g = &snap->gpus[i];
		const char *uuid = gpuctl_gpu_str(g, GPUCTL_F_UUID);
		const struct facts_entry *had = facts_cache_find(old, uuid);
		struct facts_entry *e = &now[n];

		if (g->lost || !uuid || !uuid_ok(uuid, strlen(uuid)) ||
		    facts_cache_find(&(struct facts_cache){.entries = now, .n = n}, uuid))
			continue;
		if (had)
			*e = *had;
		else
			strscpy(e->uuid, sizeof(e->uuid), uuid);
		if (merge_gpu(e, g))
			changed = true;
		n++;
	}
	if (!changed)
		return;
	for (size_t k = 0, mine = n; old && k < old->n && n < FACTS_CACHE_MAX_GPUS; k++)
		if (!facts_cache_find(&(struct facts_cache){.entries = now, .n = mine},
		                      old->entries[k].uuid))
			now[n++] = old->entries[k];
	out.entries = now;
	out.n = n < FACTS_CACHE_MAX_GPUS ? n : FACTS_CACHE_MAX_GPUS;
	facts_cache_format(&out, &b);
	if (b.oom)
		return;
	r = replace_file(path, b.p, b.len);
	if (r < 0)
		ctx_log(ctx, GPUCTL_LOG_DEBUG, "facts cache '%s': cannot write: %s", path,
		        strerror(-r));
}
