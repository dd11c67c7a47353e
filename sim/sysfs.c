// SPDX-License-Identifier: MIT
/*
 * sysfs.c: the simulated machine's CPU topology as Linux's sysfs shows it, so that programs
 * under `nvsim exec` that read CPU topology (gpuctl slurm gres through GPUCTL_SYSFS; hwloc, and
 * so slurmd, through HWLOC_FSROOT) see the scenario's sockets, cores and threads instead of the
 * host's.
 *
 * Decisions:
 * - Sockets come from cpus.numa_nodes[].socket; a socket's CPUs are those of its nodes.
 * - Threads of a core: a socket's CPUs in increasing order, cut into threads_per_core equal
 *   runs; core i of the socket is the i-th CPU of every run. This is how Linux numbers x86
 *   machines with SMT (all first threads, then all second threads: on a DGX A100, CPUs 0 and
 *   128 are one core), and the scenario files follow it.
 * - What is written follows Documentation/ABI/stable/sysfs-devices-system-cpu (kernel.org):
 *   cpuN/topology/{physical_package_id, core_id, die_id} as decimals, {core_cpus,
 *   thread_siblings, package_cpus, core_siblings} as comma-separated 32-bit hex masks (most
 *   significant word first) and their _list forms as cpulists; online, present and possible as
 *   cpulists; bus/cpu/devices/cpuN links to the devices directory (hwloc looks there first).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scenario.h"
#include "state.h"
#include "util.h"

#define LONG_BITS (8 * sizeof(unsigned long))
#define TEXT_MAX  8192 /* a mask of SIM_MAX_CPUS bits or a cpulist fits */

static bool bit(const unsigned long *m, size_t words, size_t b)
{
	return b / LONG_BITS < words && (m[b / LONG_BITS] >> (b % LONG_BITS)) & 1UL;
}

static void set_bit(unsigned long *m, size_t b)
{
	m[b / LONG_BITS] |= 1UL << (b % LONG_BITS);
}

/* "0-3,8" */
static void cpulist(const unsigned long *m, size_t words, char *buf, size_t size)
{
	size_t n = 0, nbits = words * LONG_BITS;

	buf[0] = '\0';
	for (size_t b = 0; b < nbits; b++) {
		size_t e = b;

		if (!bit(m, words, b))
			continue;
		while (e + 1 < nbits && bit(m, words, e + 1))
			e++;
		n += (size_t)snprintf(buf + n, n < size ? size - n : 0, "%s%zu", n ? "," : "", b);
		if (e > b)
			n += (size_t)snprintf(buf + n, n < size ? size - n : 0, "-%zu", e);
		b = e;
	}
}

/* "00000000,0000ffff": 32-bit words, most significant first, as many as cover ncpus */
static void hexmask(const unsigned long *m, size_t words, size_t ncpus, char *buf, size_t size)
{
	size_t n = 0, nw = (ncpus + 31) / 32;

	buf[0] = '\0';
	for (size_t w = nw; w-- > 0;) {
		unsigned v = 0;

		for (size_t k = 0; k < 32; k++)
			v |= (unsigned)bit(m, words, w * 32 + k) << k;
		n += (size_t)snprintf(buf + n, n < size ? size - n : 0, "%s%08x",
		                      w + 1 < nw ? "," : "", v);
	}
}

static int put(const char *dir, const char *name, const char *text)
{
	char path[4096];
	FILE *f;
	int r = 0;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
		return -ENAMETOOLONG;
	f = fopen(path, "we");
	if (!f)
		return -errno;
	if (fprintf(f, "%s\n", text) < 0)
		r = -EIO;
	if (fclose(f) != 0 && r == 0)
		r = -errno;
	return r;
}

int sim_sysfs_write(const struct sim_scenario *s, const char *root)
{
	size_t words = s->cpu_words, ncpus = 0, tpc = s->threads_per_core ? s->threads_per_core : 1;
	_cleanup_free_ unsigned long *all = calloc(words ? words : 1, sizeof(unsigned long));
	_cleanup_free_ int *sock_of = NULL, *core_of = NULL;
	_cleanup_free_ size_t *sorted = NULL;
	_cleanup_free_ char *text = malloc(TEXT_MAX), *text2 = malloc(TEXT_MAX);
	char cpu_dir[4096], dir[4096], topo[4200];
	int r;

	if (!all || !text || !text2)
		return -ENOMEM;
	for (size_t i = 0; i < s->n_nodes; i++)
		for (size_t w = 0; w < words && s->node_cpus[i]; w++)
			all[w] |= s->node_cpus[i][w];
	for (size_t b = 0; b < words * LONG_BITS; b++)
		if (bit(all, words, b))
			ncpus = b + 1;
	if (ncpus == 0)
		return 0; /* a scenario without cpus: nothing to show */
	sock_of = malloc(ncpus * sizeof(*sock_of));
	core_of = malloc(ncpus * sizeof(*core_of));
	sorted = malloc(ncpus * sizeof(*sorted));
	if (!sock_of || !core_of || !sorted)
		return -ENOMEM;
	for (size_t b = 0; b < ncpus; b++)
		sock_of[b] = core_of[b] = -1;
	/* each socket: its CPUs in order, cut into tpc runs; core i is the i-th of each run */
	for (size_t i = 0; i < s->n_nodes; i++) {
		int sock = s->nodes[i].socket;
		size_t n = 0;

		if (i > 0) {
			bool seen = false;

			for (size_t j = 0; j < i; j++)
				seen |= s->nodes[j].socket == sock;
			if (seen)
				continue;
		}
		for (size_t b = 0; b < ncpus; b++)
			for (size_t j = 0; j < s->n_nodes; j++)
				if (s->nodes[j].socket == sock && bit(s->node_cpus[j], words, b)) {
					sorted[n++] = b;
					break;
				}
		for (size_t k = 0; k < n; k++) {
			sock_of[sorted[k]] = sock;
			core_of[sorted[k]] = (int)(k % (n / tpc));
		}
	}

	if ((size_t)snprintf(cpu_dir, sizeof(cpu_dir), "%s/devices/system/cpu", root) >=
	    sizeof(cpu_dir))
		return -ENAMETOOLONG;
	if ((r = sim_mkdir_p(cpu_dir)) < 0)
		return r;
	cpulist(all, words, text, TEXT_MAX);
	if ((r = put(cpu_dir, "online", text)) < 0 || (r = put(cpu_dir, "present", text)) < 0 ||
	    (r = put(cpu_dir, "possible", text)) < 0)
		return r;
	(void)snprintf(dir, sizeof(dir), "%s/bus/cpu/devices", root);
	if ((r = sim_mkdir_p(dir)) < 0)
		return r;

	for (size_t b = 0; b < ncpus; b++) {
		unsigned long core[SIM_MAX_CPUS / LONG_BITS] = {0},
		                                  pkg[SIM_MAX_CPUS / LONG_BITS] = {0};
		char num[32], link[4200], target[64];

		if (sock_of[b] < 0)
			continue;
		for (size_t c = 0; c < ncpus; c++) {
			if (sock_of[c] != sock_of[b])
				continue;
			set_bit(pkg, c);
			if (core_of[c] == core_of[b])
				set_bit(core, c);
		}
		(void)snprintf(topo, sizeof(topo), "%s/cpu%zu/topology", cpu_dir, b);
		if ((r = sim_mkdir_p(topo)) < 0)
			return r;
		(void)snprintf(num, sizeof(num), "%d", sock_of[b]);
		if ((r = put(topo, "physical_package_id", num)) < 0)
			return r;
		(void)snprintf(num, sizeof(num), "%d", core_of[b]);
		if ((r = put(topo, "core_id", num)) < 0 || (r = put(topo, "die_id", "0")) < 0)
			return r;
		cpulist(core, SIM_ELEMENTSOF(core), text, TEXT_MAX);
		hexmask(core, SIM_ELEMENTSOF(core), ncpus, text2, TEXT_MAX);
		if ((r = put(topo, "core_cpus_list", text)) < 0 ||
		    (r = put(topo, "thread_siblings_list", text)) < 0 ||
		    (r = put(topo, "core_cpus", text2)) < 0 ||
		    (r = put(topo, "thread_siblings", text2)) < 0)
			return r;
		cpulist(pkg, SIM_ELEMENTSOF(pkg), text, TEXT_MAX);
		hexmask(pkg, SIM_ELEMENTSOF(pkg), ncpus, text2, TEXT_MAX);
		if ((r = put(topo, "package_cpus_list", text)) < 0 ||
		    (r = put(topo, "core_siblings_list", text)) < 0 ||
		    (r = put(topo, "package_cpus", text2)) < 0 ||
		    (r = put(topo, "core_siblings", text2)) < 0)
			return r;
		(void)snprintf(link, sizeof(link), "%s/cpu%zu", dir, b);
		(void)snprintf(target, sizeof(target), "../../../devices/system/cpu/cpu%zu", b);
		if (symlink(target, link) < 0 && errno != EEXIST)
			return -errno;
	}
	return 0;
}
