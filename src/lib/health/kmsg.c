// SPDX-License-Identifier: MIT
/*
 * kmsg.c: XID events: the recorded list (struct gpuctl_xid_log) and the kernel-log reader that
 * fills it from "NVRM: Xid (PCI:0000:07:00): 79, ..." lines.
 *
 * Decisions:
 * - The reader accepts the forms the NVIDIA kernel module has printed (docs/health.md, "Kernel
 *   log"): "NVRM: Xid (PCI:0000:07:00): 79, pid=1234, name=python, <text>", the same without
 *   "PCI:" (older drivers), with a function number ("0000:07:00.0") or text after the bus id
 *   before the ')', and whatever prefix the transport added: a /dev/kmsg record header
 *   ("6,1234,5678901,-;"), a dmesg time stamp ("[  12.345678] "), a syslog or journal prefix.
 *   The key is the "NVRM: Xid (" marker, wherever it is on the line.
 * - "NVRM: GPU 0000:07:00.0: GPU has fallen off the bus." can come without an XID line
 *   (NVSentinel#155); it counts as XID 79 unless the log already has a 79 for that GPU.
 * - "NVRM: loading NVIDIA UNIX ... Kernel Module" starts a new driver lifetime: what came before
 *   it is forgotten, because the rules count XIDs since the driver loaded.
 * - A GPU reset starts a new lifetime for that GPU (docs/health.md, "After a reset"):
 *   "NVRM: GPU at PCI:0000:07:00: GPU-<uuid>", which the driver prints once per initialisation
 *   of a GPU, just before that initialisation's first XID (NVIDIA/open-gpu-kernel-modules,
 *   kernel_rc.c, _krcLogUuidOnce), so every earlier XID of the GPU is from before a reset or
 *   reload; and "GPU reset executed: GPU-<uuid>", the line NVIDIA's NVSentinel logs after a
 *   successful nvidia-smi -r (the driver itself logs nothing when a reset succeeds), which an
 *   administrator can write too. Either forgets the GPU's earlier XIDs and counts a reset of it
 *   (gpuctl_xid_log_resets). A line ending ", success: false" is no reset.
 * - A line is matched to a GPU by PCI domain, bus and device (the log has no function, and a
 *   4-digit domain where NVML has 8). Lines of other buses, malformed lines, XIDs of 0 or above
 *   99999 are skipped silently: a log holds much that is not ours, and a parser of untrusted
 *   text must not fail on it (fuzz/fuzz-kmsg.c).
 * - Lines are copied into a bounded buffer (LINE_MAX_LEN) so parsing never reads past the text
 *   given, which need not be NUL-terminated; longer lines are cut (an XID line is short).
 * - /dev/kmsg is read non-blocking, one record per read(2), to its current end (EAGAIN);
 *   EPIPE (records overwritten while reading) is skipped. A regular file is read whole. Either
 *   way at most KMSG_MAX_BYTES are kept.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "ctx.h"
#include "snapshot-internal.h"
#include "util.h"

#define LINE_MAX_LEN   1024
#define TEXT_MAX_LEN   200
#define KMSG_MAX_BYTES (64u << 20)
#define XID_MAX        99999u

struct xid_entry {
	size_t gpu;   /* snapshot index */
	unsigned xid; /* the code */
	char *text;   /* rest of the line, printable, or NULL */
};

struct gpu_resets {
	size_t gpu;     /* snapshot index */
	unsigned count; /* resets (re-initialisations) seen */
};

struct gpuctl_xid_log {
	struct xid_entry *entries; /* owned */
	size_t n;                  /* entries used */
	size_t cap;                /* entries allocated */
	struct gpu_resets *reset;  /* resets seen per GPU since the driver loaded (owned) */
	size_t n_reset;            /* entries used in reset */
	size_t cap_reset;          /* entries allocated in reset */
};

int gpuctl_xid_log_new(struct gpuctl_xid_log **ret_log)
{
	struct gpuctl_xid_log *log = calloc(1, sizeof(*log));

	if (!log)
		return -ENOMEM;
	*ret_log = log;
	return 0;
}

static void log_clear(struct gpuctl_xid_log *log)
{
	for (size_t i = 0; i < log->n; i++)
		free(log->entries[i].text);
	log->n = 0;
	log->n_reset = 0;
}

unsigned gpuctl_xid_log_resets(const struct gpuctl_xid_log *log, size_t gpu)
{
	for (size_t i = 0; log && i < log->n_reset; i++)
		if (log->reset[i].gpu == gpu)
			return log->reset[i].count;
	return 0;
}

int gpuctl_xid_log_forget(struct gpuctl_xid_log *log, size_t gpu)
{
	size_t k = 0;

	if (!log)
		return -EINVAL;
	for (size_t i = 0; i < log->n; i++) {
		if (log->entries[i].gpu == gpu)
			free(log->entries[i].text);
		else
			log->entries[k++] = log->entries[i];
	}
	log->n = k;
	for (size_t i = 0; i < log->n_reset; i++)
		if (log->reset[i].gpu == gpu) {
			if (log->reset[i].count < UINT32_MAX)
				log->reset[i].count++;
			return 0;
		}
	if (log->n_reset == log->cap_reset) {
		size_t cap = log->cap_reset ? 2 * log->cap_reset : 8;
		struct gpu_resets *r = realloc(log->reset, cap * sizeof(*r));
		if (!r)
			return -ENOMEM;
		log->reset = r;
		log->cap_reset = cap;
	}
	log->reset[log->n_reset++] = (struct gpu_resets){.gpu = gpu, .count = 1};
	return 0;
}

void gpuctl_xid_log_free(struct gpuctl_xid_log *log)
{
	if (!log)
		return;
	log_clear(log);
	free(log->entries);
	free(log->reset);
	free(log);
}

int gpuctl_xid_log_add(struct gpuctl_xid_log *log, size_t gpu, unsigned xid, const char *text)
{
	char *t = NULL;

	if (!log)
		return -EINVAL;
	if (log->n == log->cap) {
		size_t cap = log->cap ? 2 * log->cap : 16;
		struct xid_entry *e = realloc(log->entries, cap * sizeof(*e));
		if (!e)
			return -ENOMEM;
		log->entries = e;
		log->cap = cap;
	}
	if (text && text[0]) {
		size_t len = strlen(text);
		t = malloc(TEXT_MAX_LEN + 4);
		if (!t)
			return -ENOMEM;
		quote_text(t, TEXT_MAX_LEN + 4, text, len, TEXT_MAX_LEN);
	}
	log->entries[log->n++] = (struct xid_entry){.gpu = gpu, .xid = xid, .text = t};
	return 0;
}

size_t gpuctl_xid_log_count(const struct gpuctl_xid_log *log)
{
	return log ? log->n : 0;
}

int gpuctl_xid_log_get(const struct gpuctl_xid_log *log, size_t i, size_t *ret_gpu,
                       unsigned *ret_xid, const char **ret_text)
{
	if (!log || i >= log->n)
		return -EINVAL;
	if (ret_gpu)
		*ret_gpu = log->entries[i].gpu;
	if (ret_xid)
		*ret_xid = log->entries[i].xid;
	if (ret_text)
		*ret_text = log->entries[i].text;
	return 0;
}

/* ---- parsing ---- */

struct bus {
	uint32_t domain, bus, device;
};

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Reads 1..max hex digits at *p; advances *p. */
static bool read_hex(const char **p, unsigned max, uint32_t *ret)
{
	uint32_t v = 0;
	unsigned n = 0;

	while (n < max && hexval(**p) >= 0) {
		v = v << 4 | (uint32_t)hexval(**p);
		(*p)++;
		n++;
	}
	if (n == 0 || hexval(**p) >= 0)
		return false;
	*ret = v;
	return true;
}

/* "[domain:]bus:device[.function]" at *p, hex; advances *p past it. */
static bool read_bus(const char **p, struct bus *ret)
{
	const char *s = *p;
	uint32_t a, b, c, f;

	if (!read_hex(&s, 8, &a) || *s++ != ':' || !read_hex(&s, 2, &b))
		return false;
	if (*s == ':') {
		s++;
		if (!read_hex(&s, 2, &c))
			return false;
		*ret = (struct bus){a, b, c};
	} else {
		/* "bus:device" without a domain */
		if (a > 0xff || b > 0x1f)
			return false;
		*ret = (struct bus){0, a, b};
	}
	if (*s == '.') {
		s++;
		if (!read_hex(&s, 1, &f))
			return false;
	}
	*p = s;
	return true;
}

/* The snapshot index of the GPU at bus, or SIZE_MAX. */
static size_t gpu_at_bus(const struct gpuctl_snapshot *snap, const struct bus *want)
{
	for (size_t i = 0; snap && i < snap->n_gpus; i++) {
		const char *id = gpuctl_gpu_str(&snap->gpus[i], GPUCTL_F_PCI_BUS_ID);
		struct bus have;

		if (id && read_bus(&id, &have) && have.domain == want->domain &&
		    have.bus == want->bus && have.device == want->device)
			return i;
	}
	return SIZE_MAX;
}

static bool has_xid(const struct gpuctl_xid_log *log, size_t gpu, unsigned xid)
{
	for (size_t i = 0; i < log->n; i++)
		if (log->entries[i].gpu == gpu && log->entries[i].xid == xid)
			return true;
	return false;
}

static const char *skip_blanks(const char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

/* "NVRM: Xid (PCI:0000:07:00): 79, text": after the marker. Returns 1 when recorded, 0 when
 * skipped, -ENOMEM. */
static int parse_xid(struct gpuctl_xid_log *log, const struct gpuctl_snapshot *snap, const char *s)
{
	struct bus bus;
	uint32_t xid = 0;
	unsigned digits = 0;
	size_t gpu;

	if (strncmp(s, "PCI:", 4) == 0)
		s += 4;
	if (!read_bus(&s, &bus))
		return 0;
	/* anything but ')' may follow the bus id inside the parentheses, briefly */
	for (unsigned n = 0; *s && *s != ')'; s++)
		if (++n > 64)
			return 0;
	if (*s++ != ')' || *s++ != ':')
		return 0;
	s = skip_blanks(s);
	while (*s >= '0' && *s <= '9') {
		xid = xid * 10 + (uint32_t)(*s++ - '0');
		if (++digits > 5)
			return 0;
	}
	if (digits == 0 || xid == 0 || xid > XID_MAX)
		return 0;
	if (*s != '\0' && *s != ',' && *s != ' ')
		return 0;
	gpu = gpu_at_bus(snap, &bus);
	if (gpu == SIZE_MAX)
		return 0;
	if (*s == ',')
		s++;
	s = skip_blanks(s);
	int r = gpuctl_xid_log_add(log, gpu, xid, s);
	return r < 0 ? r : 1;
}

/* "NVRM: GPU 0000:07:00.0: GPU has fallen off the bus.": after "NVRM: GPU ". */
static int parse_off_bus(struct gpuctl_xid_log *log, const struct gpuctl_snapshot *snap,
                         const char *s)
{
	struct bus bus;
	size_t gpu;

	if (strncmp(s, "PCI:", 4) == 0)
		s += 4;
	if (!read_bus(&s, &bus) || *s != ':' || !strstr(s, "fallen off the bus"))
		return 0;
	gpu = gpu_at_bus(snap, &bus);
	if (gpu == SIZE_MAX || has_xid(log, gpu, 79))
		return 0;
	int r = gpuctl_xid_log_add(log, gpu, 79, "GPU has fallen off the bus (no XID line)");
	return r < 0 ? r : 1;
}

/* "NVRM: GPU at PCI:0000:07:00: GPU-<uuid>": after "NVRM: GPU at ". The GPU was (re)initialised
 * since its earlier XIDs. Returns 0 or -ENOMEM. */
static int parse_gpu_init(struct gpuctl_xid_log *log, const struct gpuctl_snapshot *snap,
                          const char *s)
{
	struct bus bus;
	size_t gpu;

	if (strncmp(s, "PCI:", 4) == 0)
		s += 4;
	if (!read_bus(&s, &bus) || strncmp(s, ": GPU-", 6) != 0)
		return 0;
	gpu = gpu_at_bus(snap, &bus);
	return gpu == SIZE_MAX ? 0 : gpuctl_xid_log_forget(log, gpu);
}

/* "GPU reset executed: GPU-<uuid>[, success: true|false]": after the marker. */
static int parse_reset(struct gpuctl_xid_log *log, const struct gpuctl_snapshot *snap,
                       const char *s)
{
	size_t len = strspn(s, "GPUgpu-0123456789abcdefABCDEF");

	if (len < 5 || strncasecmp(s, "GPU-", 4) != 0 || (s[len] && s[len] != ',' && s[len] != ' '))
		return 0;
	if (strstr(s + len, "success: false"))
		return 0;
	for (size_t g = 0; g < snap->n_gpus; g++) {
		const char *uuid = gpuctl_gpu_str(&snap->gpus[g], GPUCTL_F_UUID);

		if (uuid && strlen(uuid) == len && strncasecmp(uuid, s, len) == 0)
			return gpuctl_xid_log_forget(log, g);
	}
	return 0;
}

static int parse_line(struct gpuctl_xid_log *log, const struct gpuctl_snapshot *snap,
                      const char *line)
{
	const char *m = strstr(line, "NVRM: ");
	const char *reset = strstr(line, "GPU reset executed: ");

	if (reset && (!m || reset < m))
		return parse_reset(log, snap, reset + 20);
	if (!m)
		return 0;
	m += 6;
	if (strncmp(m, "loading NVIDIA UNIX", 19) == 0) {
		log_clear(log);
		return 0;
	}
	if (strncmp(m, "Xid (", 5) == 0)
		return parse_xid(log, snap, m + 5);
	if (strncmp(m, "GPU at ", 7) == 0)
		return parse_gpu_init(log, snap, m + 7);
	if (strncmp(m, "GPU ", 4) == 0)
		return parse_off_bus(log, snap, m + 4);
	return 0;
}

int gpuctl_xid_log_parse(struct gpuctl_xid_log *log, const struct gpuctl_snapshot *snap,
                         const char *text, size_t len)
{
	char line[LINE_MAX_LEN];
	size_t pos = 0, start;

	if (!log || (!text && len > 0))
		return -EINVAL;
	start = log->n;
	while (pos < len) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t end = nl ? (size_t)(nl - text) : len;
		size_t n = end - pos < sizeof(line) - 1 ? end - pos : sizeof(line) - 1;
		size_t before = log->n;
		int r;

		memcpy(line, text + pos, n);
		line[n] = '\0';
		/* an embedded NUL ends the line early: what follows it is not looked at */
		r = parse_line(log, snap, line);
		if (r < 0)
			return r;
		if (log->n < before) /* a driver load forgot what came before */
			start = 0;
		pos = end + 1;
	}
	return log->n - start > INT32_MAX ? INT32_MAX : (int)(log->n - start);
}

/* Appends what fd gives to *buf (size *len); kmsg: one record per read, until EAGAIN. */
static int read_all(int fd, char **buf, size_t *len, size_t *cap)
{
	for (;;) {
		ssize_t n;

		if (*cap - *len < 8192 + 1) {
			if (*cap >= KMSG_MAX_BYTES)
				return 0; /* keep what we have */
			size_t c = *cap ? 2 * *cap : 65536;
			char *b = realloc(*buf, c);
			if (!b)
				return -ENOMEM;
			*buf = b;
			*cap = c;
		}
		n = read(fd, *buf + *len, *cap - *len - 1);
		if (n == 0)
			return 0;
		if (n < 0) {
			if (errno == EINTR || errno == EPIPE)
				continue;
			if (errno == EAGAIN)
				return 0;
			return -errno;
		}
		*len += (size_t)n;
	}
}

int gpuctl_xid_log_read(struct gpuctl_ctx *ctx, struct gpuctl_xid_log *log,
                        const struct gpuctl_snapshot *snap, const char *path)
{
	const char *p = path ? path : "/dev/kmsg";
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, cap = 0;
	int r;

	if (!log)
		return ctx_error(ctx, -EINVAL, "no XID log");
	fd = open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return ctx_error(ctx, -errno, "kernel log '%s': %s", p, strerror(errno));
	r = read_all(fd, &buf, &len, &cap);
	if (r < 0)
		return ctx_error(ctx, r, "kernel log '%s': %s", p, strerror(-r));
	r = gpuctl_xid_log_parse(log, snap, buf, len);
	if (r < 0)
		return ctx_error(ctx, r, "out of memory");
	ctx_log(ctx, GPUCTL_LOG_DEBUG, "kernel log '%s': %zu bytes, %d XID lines of these GPUs", p,
	        len, r);
	return r;
}
