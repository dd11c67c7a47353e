// SPDX-License-Identifier: MIT
/*
 * driver-proc.c: a lost GPU's PCI bus id from the NVIDIA driver's /proc files, when NVML
 * answers GPU_IS_LOST to everything about it (nvmlDeviceGetHandleByIndex included, so not even
 * its bus id is known).
 *
 * Decisions:
 * - The source: /proc/driver/nvidia/gpus/<domain:bus:device.function>/information, one
 *   directory per GPU bound to the driver (NVIDIA driver README, "Using the /proc File System
 *   Interface"). Its "Bus Location:" line is read rather than the directory's name: older
 *   drivers named the directories 0, 1, ... (kernel-open/nvidia/nv-procfs.c, open-gpu-kernel-
 *   modules). The driver keeps a GPU's directory while the GPU stays bound, off the bus or not,
 *   and prints the bus location it recorded at probe time.
 * - Matching: the files whose bus id no readable GPU of the snapshot has belong to the lost
 *   ones. NVML numbers GPUs in PCI bus order (docs/ARCHITECTURE.md, principle 3), so with as
 *   many such files as lost GPUs without a bus id, the k-th lowest goes to the k-th lost GPU,
 *   and only if every one then lies between the bus ids of its readable neighbours; anything
 *   else (a GPU the driver does not list, one NVML does not see) matches nothing: an unknown
 *   bus id is better than a wrong one. The "Device Minor:" line cannot help: a lost GPU's
 *   minor number is an NVML answer too.
 * - Bus ids are compared as numbers and written in NVML's spelling ("00000000:4E:00.0").
 * - $GPUCTL_NVIDIA_PROC names another directory (the simulator's, sim/procfs.c); only regular
 *   files are read, at most 16 KiB each, at most 256 GPUs.
 * - A readable GPU's device minor (N of /dev/nvidiaN, for the device nodes the agent guards:
 *   src/lib/enforce/devnode.c) is read from the same file's "Device Minor:" line, matched by
 *   its "Bus Location:", so no NVML call is added to a snapshot.
 */
#include <ctype.h>
#include <dirent.h>
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
#include "fileio.h"
#include "util.h"

#define INFO_MAX    16384 /* bytes of one information file */
#define GPUS_MAX    256   /* directories looked at */
#define BUS_FIELD   "Bus Location:"
#define MINOR_FIELD "Device Minor:"

/* Reads n_min to n_max hex digits at *p (as many as there are, up to n_max) into *ret,
 * advancing *p; false when fewer than n_min. */
static bool hex_run(const char **p, const char *end, int n_min, int n_max, uint64_t *ret)
{
	uint64_t v = 0;
	int n = 0;

	for (; *p < end && n < n_max && isxdigit((unsigned char)**p); (*p)++, n++)
		v = v << 4 | (uint64_t)(isdigit((unsigned char)**p)
		                                ? **p - '0'
		                                : (tolower((unsigned char)**p) - 'a' + 10));
	*ret = v;
	return n >= n_min;
}

/* A PCI address "domain:bus:device.function" (4 to 8 hex digits of domain, 2 of bus and
 * device, 1 of function: the driver's and NVML's spellings) as one number, ordered as NVML
 * orders GPUs; s[0..len) is the whole text. */
static bool bus_parse_n(const char *s, size_t len, uint64_t *ret)
{
	const char *p = s, *end = s + len;
	uint64_t dom, bus, dev, fn;

	if (!hex_run(&p, end, 4, 8, &dom) || p == end || *p++ != ':' ||
	    !hex_run(&p, end, 2, 2, &bus) || p == end || *p++ != ':' ||
	    !hex_run(&p, end, 2, 2, &dev) || p == end || *p++ != '.' ||
	    !hex_run(&p, end, 1, 1, &fn) || p != end || dev > 0x1f || fn > 7)
		return false;
	*ret = dom << 16 | bus << 8 | dev << 3 | fn;
	return true;
}

static bool bus_parse(const char *s, uint64_t *ret)
{
	return s && bus_parse_n(s, strlen(s), ret);
}

/* The value of the first line of text[0..len) that starts with field, blanks skipped: its start
 * and end; false when no line does. */
static bool field_value(const char *text, size_t len, const char *field, const char **ret_p,
                        const char **ret_end)
{
	const size_t k = strlen(field);
	const char *p = text, *end = text + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;

		if ((size_t)(eol - p) >= k && memcmp(p, field, k) == 0) {
			p += k;
			while (p < eol && (*p == ' ' || *p == '\t'))
				p++;
			*ret_p = p;
			*ret_end = eol;
			return true;
		}
		p = nl ? nl + 1 : end;
	}
	return false;
}

bool driver_proc_bus_location(const char *text, size_t len, uint64_t *ret_bus)
{
	const char *p, *eol;

	return field_value(text, len, BUS_FIELD, &p, &eol) &&
	       bus_parse_n(p, (size_t)(eol - p), ret_bus);
}

bool driver_proc_device_minor(const char *text, size_t len, uint32_t *ret_minor)
{
	const char *p, *eol;
	uint32_t v = 0;

	if (!field_value(text, len, MINOR_FIELD, &p, &eol))
		return false;
	while (eol > p && (eol[-1] == ' ' || eol[-1] == '\t' || eol[-1] == '\r'))
		eol--;
	if (p == eol || eol - p > 7)
		return false;
	for (; p < eol; p++) {
		if (!isdigit((unsigned char)*p))
			return false;
		v = v * 10 + (uint32_t)(*p - '0');
	}
	if (v >= DRIVER_PROC_MINOR_LIMIT)
		return false;
	*ret_minor = v;
	return true;
}

void driver_proc_bus_text(uint64_t bus, char *buf, size_t size)
{
	(void)snprintf(buf, size, "%08" PRIX64 ":%02X:%02X.%X", bus >> 16,
	               (unsigned)(bus >> 8 & 0xff), (unsigned)(bus >> 3 & 0x1f),
	               (unsigned)(bus & 7));
}

/* The text of directory name's information file under gpus (malloc'ed), or NULL. */
static char *info_read(int gpus, const char *name, size_t *ret_len)
{
	_cleanup_close_ int fd = -1;
	char path[300], *text = NULL;
	struct stat st;

	if ((size_t)snprintf(path, sizeof(path), "%s/information", name) >= sizeof(path))
		return NULL;
	fd = openat(gpus, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    fd_read_all(fd, INFO_MAX, &text, ret_len) < 0)
		return NULL;
	return text;
}

/* The bus location of directory name's information file under gpus, or false. */
static bool info_bus(int gpus, const char *name, uint64_t *ret)
{
	size_t len;
	_cleanup_free_ char *text = info_read(gpus, name, &len);

	return text && driver_proc_bus_location(text, len, ret);
}

/* The driver's gpus directory, opened: $GPUCTL_NVIDIA_PROC/gpus, else /proc/driver/nvidia/gpus. */
static DIR *gpus_open(void)
{
	const char *root = secure_getenv("GPUCTL_NVIDIA_PROC");
	char path[4200];

	if (!root || !root[0])
		root = "/proc/driver/nvidia";
	if ((size_t)snprintf(path, sizeof(path), "%s/gpus", root) >= sizeof(path)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	return opendir(path);
}

int driver_proc_minors(const uint64_t *buses, size_t n, uint32_t *minors)
{
	_cleanup_(closedirp) DIR *d = NULL;
	struct dirent *e;
	size_t seen = 0;

	for (size_t i = 0; i < n; i++)
		minors[i] = UINT32_MAX;
	d = gpus_open();
	if (!d)
		return -errno;
	while ((e = readdir(d)) && seen++ < GPUS_MAX) {
		size_t len;
		uint64_t bus;
		uint32_t minor;
		_cleanup_free_ char *text = NULL;

		if (e->d_name[0] == '.' || !(text = info_read(dirfd(d), e->d_name, &len)) ||
		    !driver_proc_bus_location(text, len, &bus) ||
		    !driver_proc_device_minor(text, len, &minor))
			continue;
		for (size_t i = 0; i < n; i++)
			if (buses[i] == bus)
				minors[i] = minor;
	}
	return 0;
}

bool driver_proc_bus_parse(const char *s, uint64_t *ret_bus)
{
	return bus_parse(s, ret_bus);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The bus ids the driver lists that no GPU of snap with a bus id has, sorted, into found
 * (*ret_n of them); 0, or -errno when the directory cannot be read. */
static int unclaimed_buses(const struct gpuctl_snapshot *snap, uint64_t *found, size_t *ret_n)
{
	_cleanup_(closedirp) DIR *d = NULL;
	struct dirent *e;
	size_t n = 0;

	d = gpus_open();
	if (!d)
		return -errno;
	while ((e = readdir(d)) && n < GPUS_MAX) {
		uint64_t bus, other;
		bool claimed = false;

		if (e->d_name[0] == '.' || !info_bus(dirfd(d), e->d_name, &bus))
			continue;
		for (size_t g = 0; g < snap->n_gpus && !claimed; g++)
			claimed = bus_parse(gpuctl_gpu_str(&snap->gpus[g], GPUCTL_F_PCI_BUS_ID),
			                    &other) &&
			          other == bus;
		if (!claimed)
			found[n++] = bus;
	}
	qsort(found, n, sizeof(*found), cmp_u64);
	*ret_n = n;
	return 0;
}

static bool wants_bus(const struct gpuctl_gpu *g)
{
	return g->lost && !gpuctl_gpu_str(g, GPUCTL_F_PCI_BUS_ID);
}

/* Whether giving the k-th lost GPU without a bus id found[k] keeps every bus id of snap in
 * index order. */
static bool in_pci_order(const struct gpuctl_snapshot *snap, const uint64_t *found)
{
	uint64_t last = 0, v;
	bool any = false;
	size_t k = 0;

	for (size_t g = 0; g < snap->n_gpus; g++) {
		if (wants_bus(&snap->gpus[g]))
			v = found[k++];
		else if (!bus_parse(gpuctl_gpu_str(&snap->gpus[g], GPUCTL_F_PCI_BUS_ID), &v))
			continue;
		if (any && v <= last)
			return false;
		last = v;
		any = true;
	}
	return true;
}

int driver_proc_lost_bus_ids(struct gpuctl_ctx *ctx, struct gpuctl_snapshot *snap)
{
	uint64_t found[GPUS_MAX];
	size_t want = 0, n = 0, k = 0;
	int r;

	for (size_t g = 0; g < snap->n_gpus; g++)
		want += wants_bus(&snap->gpus[g]);
	if (want == 0)
		return 0;
	r = unclaimed_buses(snap, found, &n);
	if (r < 0 || n != want || !in_pci_order(snap, found)) {
		ctx_log_once(ctx, "driver-proc", GPUCTL_LOG_DEBUG,
		             "lost GPUs' bus ids: %s (%zu lost without one, %zu unclaimed in the "
		             "driver's "
		             "list)",
		             r < 0 ? strerror(-r) : "no unambiguous match", want, n);
		return 0;
	}
	for (size_t g = 0; g < snap->n_gpus; g++) {
		uint64_t v;
		char bus[32], key[48];

		if (!wants_bus(&snap->gpus[g]))
			continue;
		v = found[k++];
		driver_proc_bus_text(v, bus, sizeof(bus));
		if (snapshot_set_str(snap, g, GPUCTL_F_PCI_BUS_ID, bus) < 0)
			return -ENOMEM;
		(void)snprintf(key, sizeof(key), "driver-proc:%zu", g);
		ctx_log_once(ctx, key, GPUCTL_LOG_DEBUG,
		             "GPU %zu is lost: bus id %s from the driver's list", g, bus);
	}
	return 0;
}
