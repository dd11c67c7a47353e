// SPDX-License-Identifier: MIT
/*
 * run-plan.c: `gpuctl run`'s plan of each child, computed before fork so that the child only
 * makes system calls between fork and exec (run-exec.c): its environment, its CPU and memory
 * binding; and how --dry-run prints it.
 *
 * Decisions (docs/gpuctl.1, "run", says the same for users):
 * - Environment. CUDA_VISIBLE_DEVICES is the chosen devices' full UUIDs (GPU- or MIG-),
 *   comma-separated, and "" for -n 0 (never -1): a UUID means one physical device whatever
 *   CUDA_DEVICE_ORDER is, and whatever the job or a library does with indices. We still set
 *   CUDA_DEVICE_ORDER=PCI_BUS_ID so that any index the job derives (nvidia-smi, NVML, a
 *   nested launcher) agrees with CUDA's ordinals. GPUCTL_GPUS lists "INDEX:UUID" pairs
 *   (INDEX is the NVML index, or GPU:MIG for a MIG device; the UUID follows the last ':').
 *   NVIDIA_VISIBLE_DEVICES is rewritten to the same UUIDs ("void" for -n 0) only when it was
 *   inherited: a container runtime started by the job then gets the same devices, and a job
 *   that never had it does not get it. With --each: LOCAL_RANK=RANK=i, WORLD_SIZE and
 *   LOCAL_WORLD_SIZE = N, as torchrun sets them on one node, and the rendezvous
 *   torch.distributed's env:// reads, as `torchrun --standalone` gives it: MASTER_ADDR=127.0.0.1
 *   and MASTER_PORT = a TCP port free on it (the kernel's pick for port 0, let go before the
 *   ranks start), the same for every rank, each only when not already set (a multi-node job
 *   sets its own); no port is picked for a MASTER_ADDR the caller set (another host's).
 *   With a lease, GPUCTL_LEASE_FDS and GPUCTL_LEASE_DIR name what the child inherits
 *   (cmd-run.c); with --retry, GPUCTL_RESTART_COUNT counts the launches.
 * - Binding (unless --no-bind, and never for -n 0). CPUs: the union of the chosen GPUs' CPU
 *   affinity (NVML's ideal CPUs) intersected with the CPUs this process may use; when that is
 *   empty, or a GPU's affinity is unknown, nothing is bound (-v says why). Memory: the
 *   preferred policy (MPOL_PREFERRED, or MPOL_PREFERRED_MANY for several nodes) on the GPUs'
 *   NUMA nodes that this process may allocate on and that have memory, when libnuma reports
 *   NUMA. Not MPOL_BIND: a job whose host memory outgrows the GPUs' node should run a little
 *   slower, not be killed by the OOM killer; with the CPUs bound, first-touch allocations are
 *   local anyway.
 * - --dry-run prints, per child, the environment changes, the binding and the shell-quoted
 *   command, and starts nothing.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <numa.h>
#include <numaif.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "run.h"
#include "sbuf.h"
#include "util.h"

extern char **environ;

/* Bits in one word of a cpu_set_t (glibc's __cpu_mask). */
#define CPU_WORD_BITS (8 * sizeof(__cpu_mask))

static int set_env(struct run_child *c, const char *name, const char *value)
{
	if (c->nenv >= RUN_MAX_ENV)
		return -E2BIG;
	char *v = strdup(value);
	if (!v)
		return -ENOMEM;
	c->env[c->nenv].name = name;
	c->env[c->nenv].value = v;
	c->nenv++;
	return 0;
}

/* CUDA_VISIBLE_DEVICES and GPUCTL_GPUS values for devices [from, to) of set. */
static int device_strings(const struct gpuctl_snapshot *snap, const struct gpuctl_devset *set,
                          size_t from, size_t to, char **ret_uuids, char **ret_pairs)
{
	_cleanup_(sbuf_done) struct sbuf uuids = SBUF_INIT, pairs = SBUF_INIT;

	sbuf_puts(&uuids, "");
	sbuf_puts(&pairs, "");
	for (size_t i = from; i < to; i++) {
		size_t gpu;
		int mig;
		char label[48];
		const char *uuid = gpuctl_devset_uuid(set, snap, i);
		int r = gpuctl_devset_get(set, i, &gpu, &mig);

		if (r < 0)
			return r;
		if (!uuid)
			return -ENODATA;
		gpuctl_device_label(snap, gpu, mig, label, sizeof(label));
		sbuf_printf(&uuids, "%s%s", i > from ? "," : "", uuid);
		sbuf_printf(&pairs, "%s%s:%s", i > from ? "," : "", label, uuid);
	}
	if (uuids.oom || pairs.oom)
		return -ENOMEM;
	*ret_uuids = TAKE_PTR(uuids.p);
	*ret_pairs = TAKE_PTR(pairs.p);
	return 0;
}

/* The CPUs this process may run on, as a bit array of RUN_NCPUS bits. */
int run_allowed_cpus(uint64_t *bits)
{
	cpu_set_t *set = CPU_ALLOC(RUN_NCPUS);
	size_t size = CPU_ALLOC_SIZE(RUN_NCPUS);
	if (!set)
		return -ENOMEM;
	if (sched_getaffinity(0, size, set) < 0) {
		int e = errno;
		CPU_FREE(set);
		return -e;
	}
	memset(bits, 0, RUN_CPU_WORDS * sizeof(*bits));
	/* CPU_ISSET_S over every CPU would be 65,536 tests for the few a machine has */
	for (size_t c = 0; c < RUN_NCPUS; c++) {
		if (c % CPU_WORD_BITS == 0 && set->__bits[c / CPU_WORD_BITS] == 0) {
			c += CPU_WORD_BITS - 1;
			continue;
		}
		if (CPU_ISSET_S(c, size, set))
			bits[c / 64] |= UINT64_C(1) << (c % 64);
	}
	CPU_FREE(set);
	return 0;
}

/* Computes c->cpus for the GPUs of devices [from, to). */
static int plan_cpus(struct run_child *c, const struct gpuctl_snapshot *snap,
                     const struct gpuctl_devset *set, size_t from, size_t to,
                     const uint64_t *allowed)
{
	_cleanup_free_ uint64_t *want = calloc(RUN_CPU_WORDS, sizeof(*want));
	if (!want)
		return -ENOMEM;
	for (size_t i = from; i < to; i++) {
		size_t gpu;
		int mig;
		if (gpuctl_devset_get(set, i, &gpu, &mig) < 0)
			continue;
		const char *aff =
		        gpuctl_gpu_str(gpuctl_snapshot_gpu(snap, gpu), GPUCTL_F_CPU_AFFINITY);
		if (!aff) {
			snprintf(c->cpus_text, sizeof(c->cpus_text),
			         "not bound (the CPU affinity of GPU %zu is unknown)", gpu);
			return 0;
		}
		if (parse_cpulist(aff, want, RUN_NCPUS) < 0) {
			snprintf(c->cpus_text, sizeof(c->cpus_text),
			         "not bound (GPU %zu's CPU affinity '%.64s' is not a cpulist)", gpu,
			         aff);
			return 0;
		}
	}
	char wanted_text[128], allowed_text[96];
	format_cpulist(want, RUN_NCPUS, wanted_text, sizeof(wanted_text));
	bool any = false;
	for (size_t w = 0; w < RUN_CPU_WORDS; w++) {
		want[w] &= allowed[w];
		any |= want[w] != 0;
	}
	if (!any) {
		format_cpulist(allowed, RUN_NCPUS, allowed_text, sizeof(allowed_text));
		snprintf(c->cpus_text, sizeof(c->cpus_text),
		         "not bound (the GPUs' CPUs %s are not among the CPUs %s this process may "
		         "use)",
		         wanted_text, allowed_text);
		return 0;
	}
	c->cpus = CPU_ALLOC(RUN_NCPUS);
	if (!c->cpus)
		return -ENOMEM;
	size_t size = CPU_ALLOC_SIZE(RUN_NCPUS);
	CPU_ZERO_S(size, c->cpus);
	for (size_t cpu = 0; cpu < RUN_NCPUS; cpu++) {
		if (cpu % 64 == 0 && want[cpu / 64] == 0) {
			cpu += 63;
			continue;
		}
		if (want[cpu / 64] >> (cpu % 64) & 1)
			CPU_SET_S(cpu, size, c->cpus);
	}
	format_cpulist(want, RUN_NCPUS, c->cpus_text, sizeof(c->cpus_text));
	return 0;
}

/* Computes c->nodes for the GPUs of devices [from, to). */
static int plan_memory(struct run_child *c, const struct gpuctl_snapshot *snap,
                       const struct gpuctl_devset *set, size_t from, size_t to)
{
	if (numa_available() < 0) {
		snprintf(c->mem_text, sizeof(c->mem_text), "not bound (no NUMA support)");
		return 0;
	}
	int maxnode = numa_max_possible_node() + 1;
	struct bitmask *allowed = numa_get_mems_allowed();
	size_t words =
	        ((size_t)maxnode + 8 * sizeof(unsigned long) - 1) / (8 * sizeof(unsigned long));
	unsigned long *mask = calloc(words ? words : 1, sizeof(*mask));
	char list[96] = "";
	size_t used = 0, count = 0;
	int first = -1, r = 0;

	if (!mask || !allowed) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = from; i < to; i++) {
		size_t gpu;
		int mig;
		int64_t node;
		if (gpuctl_devset_get(set, i, &gpu, &mig) < 0)
			continue;
		if (gpuctl_gpu_int(gpuctl_snapshot_gpu(snap, gpu), GPUCTL_F_NUMA_NODE, &node) < 0 ||
		    node < 0) {
			snprintf(c->mem_text, sizeof(c->mem_text),
			         "not bound (the NUMA node of GPU %zu is unknown)", gpu);
			goto out;
		}
		if (node >= maxnode || !numa_bitmask_isbitset(allowed, (unsigned)node) ||
		    numa_node_size64((int)node, NULL) <= 0)
			continue;
		unsigned long bitv = 1UL << (node % (8 * (int64_t)sizeof(unsigned long)));
		unsigned long *word = &mask[node / (8 * (int64_t)sizeof(unsigned long))];
		if (*word & bitv)
			continue;
		*word |= bitv;
		if (first < 0)
			first = (int)node;
		count++;
		int n = snprintf(list + used, sizeof(list) - used, "%s%" PRId64, used ? "," : "",
		                 node);
		if (n > 0 && (size_t)n < sizeof(list) - used)
			used += (size_t)n;
	}
	if (count == 0) {
		snprintf(c->mem_text, sizeof(c->mem_text),
		         "not bound (the GPUs' NUMA nodes are not among the nodes with memory this "
		         "process may use)");
		goto out;
	}
	c->nodes = mask;
	mask = NULL;
	c->maxnode = (unsigned long)maxnode;
	c->first_node = first;
	c->mpol = count > 1 ? MPOL_PREFERRED_MANY : MPOL_PREFERRED;
	snprintf(c->mem_text, sizeof(c->mem_text), "preferred %s %s", count > 1 ? "nodes" : "node",
	         list);
out:
	if (allowed)
		numa_bitmask_free(allowed);
	free(mask);
	return r;
}

static bool env_name_is(const char *entry, const char *name)
{
	size_t n = strlen(name);
	return strncmp(entry, name, n) == 0 && entry[n] == '=';
}

/* c->envp: our environment without the names gpuctl sets, then gpuctl's values. */
static int build_envp(struct run_child *c)
{
	size_t n = 0;
	while (environ && environ[n])
		n++;
	c->envp = calloc(n + c->nenv + 1, sizeof(*c->envp));
	if (!c->envp)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		bool replaced = false;
		for (size_t k = 0; k < c->nenv; k++)
			replaced |= env_name_is(environ[i], c->env[k].name);
		if (replaced)
			continue;
		c->envp[c->nenvp] = strdup(environ[i]);
		if (!c->envp[c->nenvp])
			return -ENOMEM;
		c->nenvp++;
	}
	for (size_t k = 0; k < c->nenv; k++) {
		size_t len = strlen(c->env[k].name) + 1 + strlen(c->env[k].value) + 1;
		char *s = malloc(len);
		if (!s)
			return -ENOMEM;
		snprintf(s, len, "%s=%s", c->env[k].name, c->env[k].value);
		c->envp[c->nenvp++] = s;
	}
	return 0;
}

void run_child_free(struct run_child *c)
{
	for (size_t k = 0; k < c->nenv; k++)
		free(c->env[k].value);
	for (size_t k = 0; c->envp && k < c->nenvp; k++)
		free(c->envp[k]);
	free(c->envp);
	if (c->cpus)
		CPU_FREE(c->cpus);
	free(c->nodes);
}

/* A TCP port free on 127.0.0.1 now, as text (the kernel's choice for port 0); -errno. The
 * socket is closed before the ranks start, so rank 0's store can bind it; another program
 * could take it in between, as with `torchrun --standalone`, and the job then fails saying so. */
int run_free_local_port(char *buf, size_t len)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
	socklen_t salen = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), r = 0;

	if (fd < 0)
		return -errno;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &salen) < 0)
		r = -errno;
	close(fd);
	if (r == 0)
		snprintf(buf, len, "%u", (unsigned)ntohs(sa.sin_port));
	return r;
}

/* Fills child c for devices [from, to) of the selection (rank >= 0 with --each). */
int run_plan_child(struct run_child *c, const struct run_args *a,
                   const struct gpuctl_snapshot *snap, const struct gpuctl_devset *set, size_t from,
                   size_t to, long rank, size_t world, const uint64_t *allowed)
{
	char *uuids = NULL, *pairs = NULL;
	int r = device_strings(snap, set, from, to, &uuids, &pairs);
	if (r < 0)
		return r;
	r = set_env(c, "CUDA_VISIBLE_DEVICES", uuids);
	if (r >= 0)
		r = set_env(c, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
	if (r >= 0)
		r = set_env(c, "GPUCTL_GPUS", pairs);
	if (r >= 0 && getenv("NVIDIA_VISIBLE_DEVICES"))
		r = set_env(c, "NVIDIA_VISIBLE_DEVICES", from < to ? uuids : "void");
	free(uuids);
	free(pairs);
	if (r >= 0 && rank >= 0) {
		char rk[24], ws[24];
		snprintf(rk, sizeof(rk), "%ld", rank);
		snprintf(ws, sizeof(ws), "%zu", world);
		if ((r = set_env(c, "LOCAL_RANK", rk)) >= 0 && (r = set_env(c, "RANK", rk)) >= 0 &&
		    (r = set_env(c, "WORLD_SIZE", ws)) >= 0)
			r = set_env(c, "LOCAL_WORLD_SIZE", ws);
		if (r >= 0 && a->master_addr)
			r = set_env(c, "MASTER_ADDR", a->master_addr);
		if (r >= 0 && a->master_port[0])
			r = set_env(c, "MASTER_PORT", a->master_port);
	}
	if (r >= 0 && a->lease_fds_text) {
		r = set_env(c, "GPUCTL_LEASE_FDS", a->lease_fds_text);
		if (r >= 0)
			r = set_env(c, "GPUCTL_LEASE_DIR", a->lease_dir);
	}
	if (r >= 0 && a->retry > 0) {
		/* which launch this is, so the job can resume from its checkpoint */
		char n[16];
		snprintf(n, sizeof(n), "%u", a->attempt);
		r = set_env(c, "GPUCTL_RESTART_COUNT", n);
	}
	if (r >= 0 && a->lease_fds_text && a->sel.req.share_mem) {
		/* what the job declared (bytes per device): a job can cap its allocator with it */
		char mem[24];
		snprintf(mem, sizeof(mem), "%" PRIu64, a->sel.req.share_mem);
		r = set_env(c, "GPUCTL_SHARE_MEM", mem);
	}
	if (r < 0)
		return r;
	if (from == to) {
		snprintf(c->cpus_text, sizeof(c->cpus_text), "not bound (no GPU)");
		snprintf(c->mem_text, sizeof(c->mem_text), "not bound (no GPU)");
	} else if (a->no_bind) {
		snprintf(c->cpus_text, sizeof(c->cpus_text), "not bound (--no-bind)");
		snprintf(c->mem_text, sizeof(c->mem_text), "not bound (--no-bind)");
	} else {
		r = plan_cpus(c, snap, set, from, to, allowed);
		if (r >= 0)
			r = plan_memory(c, snap, set, from, to);
		if (r < 0)
			return r;
	}
	return build_envp(c);
}

/* ---- --dry-run ---- */

/* Writes word for a POSIX shell: as is when it is safe, else in single quotes. */
static void print_quoted(const char *word, FILE *f)
{
	static const char safe[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	                           "0123456789_@%+=:,./-";
	if (word[0] && strspn(word, safe) == strlen(word)) {
		fputs(word, f);
		return;
	}
	fputc('\'', f);
	for (const char *p = word; *p; p++) {
		if (*p == '\'')
			fputs("'\\''", f);
		else
			fputc(*p, f);
	}
	fputc('\'', f);
}

void run_print_plan(const struct run_child *c, char **cmd, FILE *f)
{
	for (size_t k = 0; k < c->nenv; k++) {
		fprintf(f, "%s%s=", k ? " " : "", c->env[k].name);
		print_quoted(c->env[k].value, f);
	}
	fprintf(f, "\ncpus: %s\nmemory: %s\ncommand:", c->cpus_text, c->mem_text);
	for (size_t i = 0; cmd[i]; i++) {
		fputc(' ', f);
		print_quoted(cmd[i], f);
	}
	fputc('\n', f);
}

/* ---- the owner record's command line, GPUCTL_LEASE_FDS ---- */

/* The job's command line for the owner record: the words joined by spaces. */
int run_join_command(char **cmd, char **ret)
{
	_cleanup_(sbuf_done) struct sbuf b = SBUF_INIT;

	sbuf_puts(&b, "");
	for (size_t i = 0; cmd[i]; i++)
		sbuf_printf(&b, "%s%s", i ? " " : "", cmd[i]);
	if (b.oom)
		return -ENOMEM;
	*ret = TAKE_PTR(b.p);
	return 0;
}

/* "3,4": the lease descriptors for GPUCTL_LEASE_FDS. */
int run_fds_list(const int *fds, size_t n, char **ret)
{
	_cleanup_(sbuf_done) struct sbuf b = SBUF_INIT;

	sbuf_puts(&b, "");
	for (size_t i = 0; i < n; i++)
		sbuf_printf(&b, "%s%d", i ? "," : "", fds[i]);
	if (b.oom)
		return -ENOMEM;
	*ret = TAKE_PTR(b.p);
	return 0;
}
