// SPDX-License-Identifier: MIT
/*
 * cpuinfo.c: which CPU the host has (the first processor of /proc/cpuinfo) and the figures the
 * bandwidth model takes from it: the inter-socket link and the cost of P2P through the CPU.
 *
 * Decisions (sources in docs/topology.md, "The CPU"):
 * - The figures are NCCL's (NVIDIA/nccl src/graph/topo.h, topo.cc, xml.cc at 2.30): Intel
 *   family 6 by model number, Broadwell QPI 6 below model 0x55, Skylake UPI 10 from 0x55,
 *   Sapphire Rapids 22 from 0x8F, Emerald Rapids 40 from 0xCF (any other Intel is taken as
 *   Broadwell, as NCCL does); AMD 16; Arm (Grace included) 6. Intel CPUs turn GPU P2P traffic
 *   into 64-byte PCIe packets, so P2P through an Intel root complex costs 6/5; others nothing.
 * - An unknown CPU (no cpuinfo, an unknown vendor) gets Skylake's figures, the single figure
 *   gpuctl used before it read the CPU: a middle value that never ranks a path as free.
 * - Only the first processor entry is read: a server's sockets carry one CPU model.
 * - cpuinfo is a kernel file, not user input: a line that does not parse is skipped and the
 *   fact stays unknown; a file that cannot be read is the unknown CPU (the caller logs it).
 *   Only a regular file is read (/proc/cpuinfo is one): $GPUCTL_CPUINFO naming a FIFO or a
 *   device is -EPERM, an error the caller reports, never a read that blocks.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cpuinfo.h"
#include "util.h"

/* Bytes of cpuinfo read at most: the first processor entry is well inside (x86 ~1.5 KiB). */
#define CPUINFO_MAX_BYTES 65536

/* NCCL's inter-CPU figures, GB/s per direction (src/graph/topo.h). */
#define BDW_QPI_GBPS 6.0
#define SKL_QPI_GBPS 10.0
#define SRP_QPI_GBPS 22.0
#define ERP_QPI_GBPS 40.0
#define AMD_GBPS     16.0
#define ARM_GBPS     6.0
/* NCCL's INTEL_P2P_OVERHEAD: 6/5. */
#define INTEL_P2P_OVERHEAD 1.2

/* Arm Ltd's implementer code and the Neoverse V2 part number NVIDIA Grace reports. */
#define ARM_IMPLEMENTER 0x41
#define GRACE_PART      0xd4f

static void set_class(struct gpuctl_cpu *c, const char *cls, double gbps, double overhead)
{
	snprintf(c->cpu_class, sizeof(c->cpu_class), "%s", cls);
	c->inter_socket_gbps = gbps;
	c->p2p_overhead = overhead;
}

void cpu_info_unknown(struct gpuctl_cpu *ret)
{
	size_t size = ret->struct_size;

	memset(ret, 0, sizeof(*ret));
	ret->struct_size = size;
	ret->family = -1;
	ret->model = -1;
	set_class(ret, "unknown", SKL_QPI_GBPS, INTEL_P2P_OVERHEAD);
}

static void classify(struct gpuctl_cpu *c, int implementer)
{
	if (streq(c->vendor, "GenuineIntel")) {
		if (c->family == 6 && c->model >= 0xCF)
			set_class(c, "Emerald Rapids", ERP_QPI_GBPS, INTEL_P2P_OVERHEAD);
		else if (c->family == 6 && c->model >= 0x8F)
			set_class(c, "Sapphire Rapids", SRP_QPI_GBPS, INTEL_P2P_OVERHEAD);
		else if (c->family == 6 && c->model >= 0x55)
			set_class(c, "Skylake", SKL_QPI_GBPS, INTEL_P2P_OVERHEAD);
		else
			set_class(c, "Broadwell", BDW_QPI_GBPS, INTEL_P2P_OVERHEAD);
	} else if (streq(c->vendor, "AuthenticAMD")) {
		set_class(c, "AMD", AMD_GBPS, 1.0);
	} else if (implementer == ARM_IMPLEMENTER) {
		snprintf(c->vendor, sizeof(c->vendor), "ARM");
		set_class(c, c->model == GRACE_PART ? "Grace" : "Arm", ARM_GBPS, 1.0);
	}
}

/* A number in base 10 or, with 0x, 16, within 0..0xFFFF; -1 otherwise. */
static int small_number(const char *s, size_t len)
{
	char buf[16], *end;
	long v;

	if (len == 0 || len >= sizeof(buf))
		return -1;
	memcpy(buf, s, len);
	buf[len] = '\0';
	errno = 0;
	v = strtol(buf, &end, 0);
	if (errno || *end || end == buf || v < 0 || v > 0xFFFF || buf[0] == '-' || buf[0] == '+')
		return -1;
	return (int)v;
}

/* Copies a value as printable text ('?' for anything else), cut to size - 1. */
static void copy_text(char *dst, size_t size, const char *s, size_t len)
{
	size_t n = len < size - 1 ? len : size - 1;

	for (size_t i = 0; i < n; i++)
		dst[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
	dst[n] = '\0';
}

static bool is_blank(char ch)
{
	return ch == ' ' || ch == '\t';
}

void cpu_info_parse(const char *text, size_t len, struct gpuctl_cpu *ret)
{
	int implementer = -1;
	bool seen = false;
	size_t pos = 0;

	cpu_info_unknown(ret);
	while (pos < len) {
		const char *line = text + pos, *nl = memchr(line, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - line) : len - pos, k, ke, vs, ve;

		pos += n + (nl ? 1 : 0);
		while (n > 0 && (line[n - 1] == '\r' || is_blank(line[n - 1])))
			n--;
		if (n == 0) {
			if (seen)
				break; /* the end of the first processor's entry */
			continue;
		}
		const char *colon = memchr(line, ':', n);
		if (!colon)
			continue;
		k = (size_t)(colon - line);
		ke = k;
		while (ke > 0 && is_blank(line[ke - 1]))
			ke--;
		vs = k + 1;
		while (vs < n && is_blank(line[vs]))
			vs++;
		ve = n;
		seen = true;
#define KEY_IS(lit) (ke == sizeof(lit) - 1 && memcmp(line, lit, ke) == 0)
		if (KEY_IS("vendor_id"))
			copy_text(ret->vendor, sizeof(ret->vendor), line + vs, ve - vs);
		else if (KEY_IS("cpu family"))
			ret->family = small_number(line + vs, ve - vs);
		else if (KEY_IS("model"))
			ret->model = small_number(line + vs, ve - vs);
		else if (KEY_IS("model name"))
			copy_text(ret->name, sizeof(ret->name), line + vs, ve - vs);
		else if (KEY_IS("CPU implementer"))
			implementer = small_number(line + vs, ve - vs);
		else if (KEY_IS("CPU part"))
			ret->model = small_number(line + vs, ve - vs);
#undef KEY_IS
	}
	classify(ret, implementer);
}

int cpu_info_read(const char *path, struct gpuctl_cpu *ret)
{
	_cleanup_free_ char *buf = NULL;
	_cleanup_close_ int fd = -1;
	struct stat st;
	size_t len = 0;

	if (!path)
		path = getenv("GPUCTL_CPUINFO");
	if (!path || !*path)
		path = "/proc/cpuinfo";
	cpu_info_unknown(ret);
	/* O_NONBLOCK: a FIFO must not hang us before fstat() refuses it */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EPERM;
	buf = malloc(CPUINFO_MAX_BYTES);
	if (!buf)
		return -ENOMEM;
	/* 4 KiB at a time, up to the end of the first entry: the kernel formats /proc/cpuinfo
	 * as it is read, and a many-core host's whole file costs milliseconds */
	while (len < CPUINFO_MAX_BYTES && !memmem(buf, len, "\n\n", 2)) {
		size_t want = CPUINFO_MAX_BYTES - len < 4096 ? CPUINFO_MAX_BYTES - len : 4096;
		ssize_t r = read(fd, buf + len, want);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		len += (size_t)r;
	}
	cpu_info_parse(buf, len, ret);
	return 0;
}
