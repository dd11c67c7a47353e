// SPDX-License-Identifier: MIT
/*
 * cmd-run.c: `gpuctl run`: select devices (as `gpuctl select` does), then run a command on
 * them: environment, CPU and memory binding, exec, signal forwarding, exit status.
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
 * - Binding (unless --no-bind, and never for -n 0). CPUs: the union of the chosen GPUs' CPU
 *   affinity (NVML's ideal CPUs) intersected with the CPUs this process may use; when that is
 *   empty, or a GPU's affinity is unknown, nothing is bound (-v says why). Memory: the
 *   preferred policy (MPOL_PREFERRED, or MPOL_PREFERRED_MANY for several nodes) on the GPUs'
 *   NUMA nodes that this process may allocate on and that have memory, when libnuma reports
 *   NUMA. Not MPOL_BIND: a job whose host memory outgrows the GPUs' node should run a little
 *   slower, not be killed by the OOM killer; with the CPUs bound, first-touch allocations are
 *   local anyway. Binding is done in the child between fork and exec; everything it needs is
 *   computed before fork, so the child only makes system calls.
 * - Signals. The child stays in gpuctl's process group, so it keeps the terminal (an
 *   interactive job, Ctrl-C and Ctrl-Z work as without gpuctl). SIGINT, SIGTERM, SIGHUP,
 *   SIGQUIT, SIGUSR1 and SIGUSR2 sent to gpuctl are forwarded to the child (to every child with
 *   --each), except one the terminal generated (the child got it already, being in the
 *   foreground group) and one the child itself sent. gpuctl itself waits on. A signal that
 *   gpuctl was started ignoring (nohup's SIGHUP; SIGINT and SIGQUIT in a shell's background
 *   job) stays ignored, by gpuctl and by the child, which inherits SIG_IGN through exec as it
 *   would without gpuctl.
 * - Exit status: the child's, or 128+N when signal N killed it; 127 when the command is not
 *   found, 126 when it cannot be executed (exec errors come back through a close-on-exec pipe,
 *   so the message is gpuctl's one line). gpuctl's own failures (2, 3, 4, 1) happen before any
 *   command starts.
 * - --each (torchrun's policy): one child per device; when one fails (non-zero exit or killed),
 *   the others get SIGTERM, then SIGKILL after RUN_KILL_TIMEOUT_S seconds; the status is that
 *   of the first failure in time, else 0.
 * - --dry-run prints, per child, the environment changes, the binding and the shell-quoted
 *   command, and starts nothing.
 * - Leases (docs/leases.md). run selects and leases atomically (gpuctl_alloc) in
 *   the lease directory (--lease-dir, $GPUCTL_LEASE_DIR, the configuration's lease_dir,
 *   /run/gpuctl), so two concurrent runs never share a device. The lock descriptors stay open
 *   in gpuctl until every child has ended and are inherited by the children (FD_CLOEXEC
 *   cleared between fork and exec; their numbers in GPUCTL_LEASE_FDS, the directory in
 *   GPUCTL_LEASE_DIR): the lease lives while gpuctl or the job lives, so `kill -9` of gpuctl
 *   leaves the job holding it. With --each every rank inherits every descriptor (simplest
 *   correct choice): the lease of all devices ends when the last rank (and gpuctl) has ended,
 *   not device by device. The owner record names gpuctl and the first child
 *   (gpuctl_lease_set_owner once it is forked, before it execs: the child waits on a pipe for
 *   the record, since `gpuctl release` takes a record without a job for a hold; when it cannot
 *   be written the child exits without exec and run exits 1, one line). --dry-run takes no
 *   lease: it selects as run would (excluding leased devices and, unless --ignore-foreign,
 *   devices busy without a lease) and says so.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <numa.h>
#include <numaif.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "filters.h"
#include "parse.h"
#include "watchdog.h"

extern char **environ;

/* Seconds the other children of --each get between SIGTERM and SIGKILL (torchrun's 30). */
#define RUN_KILL_TIMEOUT_S 30
/* CPUs a cpulist may name (parse.h's guard) and the size of our CPU bit arrays. */
#define RUN_NCPUS     (PARSE_CPULIST_MAX_CPU + 1)
#define RUN_CPU_WORDS (RUN_NCPUS / 64)
/* Bits in one word of a cpu_set_t (glibc's __cpu_mask). */
#define CPU_WORD_BITS (8 * sizeof(__cpu_mask))
/* Environment variables gpuctl sets in a child, at most (CUDA_VISIBLE_DEVICES,
 * CUDA_DEVICE_ORDER, GPUCTL_GPUS, NVIDIA_VISIBLE_DEVICES, 4 rank variables, GPUCTL_LEASE_FDS,
 * GPUCTL_LEASE_DIR, GPUCTL_SHARE_MEM, GPUCTL_RESTART_COUNT: 12, and room). */
#define RUN_MAX_ENV 16
/* --retry: the most failovers, how often the job's GPUs are checked while it runs, the default
 * grace between SIGTERM and SIGKILL, and the backoff before a relaunch (doubling, capped). */
#define RUN_RETRY_MAX       100
#define RUN_HEALTH_TICK_MS  200
#define RUN_GRACE_DEFAULT_S 10
#define RUN_BACKOFF_FIRST_S 0.5
#define RUN_BACKOFF_MAX_S   30.0
/* Exit status of run --retry when a GPU failed once more and no failover was left. */
#define RUN_EXIT_GAVE_UP 5
/* Lease descriptors a child inherits, at most (one per device). */
#define RUN_MAX_LEASE_FDS FILTERS_MAX_COUNT

enum {
	OPT_EACH = 0x100,
	OPT_DRY_RUN,
	OPT_NO_BIND,
	OPT_RETRY,
	OPT_GRACE,
	OPT_RETRY_ON,
};

static const struct option run_options[] = {
        FILTER_LONG_OPTIONS,
        {"each", no_argument, NULL, OPT_EACH},
        {"dry-run", no_argument, NULL, OPT_DRY_RUN},
        {"no-bind", no_argument, NULL, OPT_NO_BIND},
        {"retry", required_argument, NULL, OPT_RETRY},
        {"grace", required_argument, NULL, OPT_GRACE},
        {"retry-on", required_argument, NULL, OPT_RETRY_ON},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
};

static const int forwarded_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define N_FORWARDED (sizeof(forwarded_signals) / sizeof(forwarded_signals[0]))

struct env_change {
	const char *name; /* static */
	char *value;      /* owned */
};

/* Everything one child needs, computed before fork. */
struct run_child {
	struct env_change env[RUN_MAX_ENV]; /* what gpuctl sets, in print order */
	size_t nenv;                        /* used entries of env */
	char **envp;                        /* the child's whole environment (strings owned) */
	size_t nenvp;                       /* entries of envp, without the NULL */
	cpu_set_t *cpus;                    /* CPU binding, NULL for none */
	char cpus_text[512];                /* the bound CPUs as a cpulist, or why none */
	unsigned long *nodes;               /* memory policy nodes, NULL for none */
	unsigned long maxnode;              /* bits in nodes, for set_mempolicy */
	int first_node;                     /* fallback of MPOL_PREFERRED_MANY */
	int mpol;                           /* MPOL_PREFERRED or MPOL_PREFERRED_MANY */
	char mem_text[160];                 /* "preferred node(s) 0,1", or why none */
	const int *lease_fds;               /* descriptors to inherit (borrowed) */
	size_t nlease_fds;                  /* entries of lease_fds */
	pid_t pid;                          /* after fork; 0 once reaped */
	pid_t pgid;                         /* run --retry: its own process group, 0: none */
	int status;                         /* exit status once reaped */
};

struct run_args {
	struct select_args sel;
	bool each;                  /* --each */
	bool dry_run;               /* --dry-run */
	bool no_bind;               /* --no-bind */
	char **cmd;                 /* the command and its arguments */
	const char *lease_fds_text; /* GPUCTL_LEASE_FDS for the children, NULL without a lease */
	const char *lease_dir;      /* GPUCTL_LEASE_DIR for the children */
	unsigned retry;             /* --retry N: failovers at most (0: none, no monitoring) */
	unsigned grace_s;           /* --grace: seconds between SIGTERM and SIGKILL on failover */
	bool retry_any;             /* --retry-on any: also relaunch a job that failed by itself */
	unsigned attempt;           /* GPUCTL_RESTART_COUNT of this launch */
	const char *master_addr;    /* --each: MASTER_ADDR for the ranks, NULL: inherited */
	char master_port[8];        /* --each: MASTER_PORT for the ranks, "": inherited or none */
};

/* What watching a job's GPUs found (run --retry). */
struct run_monitor {
	size_t *gpus;   /* the job's GPUs, snapshot indices (a MIG device: its GPU) */
	char **uuids;   /* their UUIDs, to check that an index still names the same GPU */
	size_t n;       /* entries of both */
	ssize_t failed; /* index into gpus of the GPU found failed, -1: none */
	struct gpuctl_xid_watch *watch; /* NVML XID events since the launch, NULL: none */
	struct gpuctl_xid_log *xids;    /* the XIDs they delivered */
	char why[160];                  /* what failed, for the message */
	double failed_at;               /* monotonic seconds when the failure was seen */
};

/* ---- building the plan ---- */

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

/* Appends s to the growing string *buf (len *len, capacity *cap). */
static int sb_add(char **buf, size_t *len, size_t *cap, const char *s)
{
	size_t n = strlen(s);
	if (*len + n + 1 > *cap) {
		size_t ncap = (*cap ? *cap * 2 : 128);
		while (ncap < *len + n + 1)
			ncap *= 2;
		char *nb = realloc(*buf, ncap);
		if (!nb)
			return -ENOMEM;
		*buf = nb;
		*cap = ncap;
	}
	memcpy(*buf + *len, s, n + 1);
	*len += n;
	return 0;
}

/* CUDA_VISIBLE_DEVICES and GPUCTL_GPUS values for devices [from, to) of set. */
static int device_strings(const struct gpuctl_snapshot *snap, const struct gpuctl_devset *set,
                          size_t from, size_t to, char **ret_uuids, char **ret_pairs)
{
	char *uuids = NULL, *pairs = NULL;
	size_t ulen = 0, ucap = 0, plen = 0, pcap = 0;
	int r = sb_add(&uuids, &ulen, &ucap, "");
	if (r >= 0)
		r = sb_add(&pairs, &plen, &pcap, "");
	for (size_t i = from; r >= 0 && i < to; i++) {
		size_t gpu;
		int mig;
		char label[48];
		const char *uuid = gpuctl_devset_uuid(set, snap, i);
		r = gpuctl_devset_get(set, i, &gpu, &mig);
		if (r < 0)
			break;
		if (!uuid) {
			r = -ENODATA;
			break;
		}
		gpuctl_device_label(snap, gpu, mig, label, sizeof(label));
		if (i > from && ((r = sb_add(&uuids, &ulen, &ucap, ",")) < 0 ||
		                 (r = sb_add(&pairs, &plen, &pcap, ",")) < 0))
			break;
		if ((r = sb_add(&uuids, &ulen, &ucap, uuid)) < 0 ||
		    (r = sb_add(&pairs, &plen, &pcap, label)) < 0 ||
		    (r = sb_add(&pairs, &plen, &pcap, ":")) < 0 ||
		    (r = sb_add(&pairs, &plen, &pcap, uuid)) < 0)
			break;
	}
	if (r < 0) {
		free(uuids);
		free(pairs);
		return r;
	}
	*ret_uuids = uuids;
	*ret_pairs = pairs;
	return 0;
}

/* The CPUs this process may run on, as a bit array of RUN_NCPUS bits. */
static int allowed_cpus(uint64_t *bits)
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
	uint64_t *want = calloc(RUN_CPU_WORDS, sizeof(*want));
	int r = 0;
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
			goto out;
		}
		if (parse_cpulist(aff, want, RUN_NCPUS) < 0) {
			snprintf(c->cpus_text, sizeof(c->cpus_text),
			         "not bound (GPU %zu's CPU affinity '%.64s' is not a cpulist)", gpu,
			         aff);
			goto out;
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
		goto out;
	}
	c->cpus = CPU_ALLOC(RUN_NCPUS);
	if (!c->cpus) {
		r = -ENOMEM;
		goto out;
	}
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
out:
	free(want);
	return r;
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

static void child_free(struct run_child *c)
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
static int free_local_port(char *buf, size_t len)
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
static int plan_child(struct run_child *c, const struct run_args *a,
                      const struct gpuctl_snapshot *snap, const struct gpuctl_devset *set,
                      size_t from, size_t to, long rank, size_t world, const uint64_t *allowed)
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

static void print_plan(const struct run_child *c, char **cmd, FILE *f)
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

/* ---- running ---- */

/* The children's pids for the signal handler; 0 for one that is gone. Written only while the
 * forwarded signals are blocked. */
static pid_t *volatile fwd_pids;
static volatile size_t fwd_count;
/* run --retry: each child leads a process group of its own (so a failover can stop the whole
 * job), and signals go to those groups, from the terminal too (it only reaches ours). */
static volatile bool fwd_groups;
/* The forwarded signals gpuctl was started with set to SIG_IGN (nohup's SIGHUP, SIGINT and
 * SIGQUIT of a shell's background job): gpuctl goes on ignoring them and the child inherits
 * the SIG_IGN through exec, as it would without gpuctl. Set before fork. */
static bool fwd_ignored[N_FORWARDED];

static void forward_signal(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	int saved = errno;
	/* From the terminal: the children are in our (foreground) process group and got it. */
	if (si && si->si_code == SI_KERNEL && !fwd_groups) {
		errno = saved;
		return;
	}
	for (size_t i = 0; i < fwd_count; i++) {
		pid_t p = fwd_pids[i];
		if (p > 0 && !(si && si->si_pid == p))
			(void)kill(fwd_groups ? -p : p, sig);
	}
	errno = saved;
}

static void block_forwarded(sigset_t *ret_old)
{
	sigset_t set;
	sigemptyset(&set);
	for (size_t i = 0; i < N_FORWARDED; i++)
		sigaddset(&set, forwarded_signals[i]);
	sigprocmask(SIG_BLOCK, &set, ret_old);
}

/* In the child: only system calls from here on (async-signal-safe after fork). */
__attribute__((noreturn)) static void child_exec(const struct run_child *c, char **cmd,
                                                 const sigset_t *mask, int errfd, int gofd)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	if (fwd_groups)
		(void)setpgid(0, 0);
	sigemptyset(&dfl.sa_mask);
	for (size_t i = 0; i < N_FORWARDED; i++)
		if (!fwd_ignored[i])
			sigaction(forwarded_signals[i], &dfl, NULL);
	sigprocmask(SIG_SETMASK, mask, NULL);
	for (size_t i = 0; i < c->nlease_fds; i++) {
		int fl = fcntl(c->lease_fds[i], F_GETFD);
		if (fl >= 0)
			(void)fcntl(c->lease_fds[i], F_SETFD, fl & ~FD_CLOEXEC);
	}
	if (c->cpus)
		(void)sched_setaffinity(0, CPU_ALLOC_SIZE(RUN_NCPUS), c->cpus);
	if (c->nodes && set_mempolicy(c->mpol, c->nodes, c->maxnode + 1) < 0 &&
	    c->mpol == MPOL_PREFERRED_MANY) {
		/* A kernel before 5.15 has no PREFERRED_MANY: prefer the first node. */
		unsigned long one[1024 / (8 * sizeof(unsigned long))] = {0};
		unsigned long bits = 8 * sizeof(unsigned long);
		if ((unsigned long)c->first_node < 1024) {
			one[(unsigned long)c->first_node / bits] |=
			        1UL << ((unsigned long)c->first_node % bits);
			(void)set_mempolicy(MPOL_PREFERRED, one, 1024 + 1);
		}
	}
	if (gofd >= 0) { /* the lease's record names this job before it runs */
		char go = 0;
		ssize_t k;
		do
			k = read(gofd, &go, 1);
		while (k < 0 && errno == EINTR);
		if (k != 1)
			_exit(CLI_EXIT_FAILURE); /* gpuctl could not write it, or is gone */
	}
	execvpe(cmd[0], cmd, c->envp);
	int e = errno;
	ssize_t w;
	do
		w = write(errfd, &e, sizeof(e));
	while (w < 0 && errno == EINTR);
	_exit(e == ENOENT || e == ENOTDIR ? 127 : 126);
}

static int wait_status(int wstatus)
{
	if (WIFEXITED(wstatus))
		return WEXITSTATUS(wstatus);
	if (WIFSIGNALED(wstatus))
		return 128 + WTERMSIG(wstatus);
	return CLI_EXIT_FAILURE;
}

static void signal_children(struct run_child *kids, size_t n, int sig)
{
	for (size_t i = 0; i < n; i++) {
		if (kids[i].pgid > 0)
			(void)kill(-kids[i].pgid,
			           sig); /* the whole job, its leader reaped or not */
		else if (kids[i].pid > 0)
			(void)kill(kids[i].pid, sig);
	}
}

/* Whether a process of the children's own groups is still there. */
static bool groups_alive(const struct run_child *kids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (kids[i].pgid > 0 && kill(-kids[i].pgid, 0) == 0)
			return true;
	return false;
}

/* ---- run --retry: watching the job's GPUs ---- */

/* Why GPU g can run no job any more: the first FAIL finding of rep about it, or NULL. */
static const char *gpu_failure(const struct gpuctl_health_report *rep, size_t g)
{
	for (size_t i = 0; i < gpuctl_health_finding_count(rep); i++) {
		const struct gpuctl_health_finding *f = gpuctl_health_finding(rep, i);
		if (f->gpu == g && f->severity == GPUCTL_HEALTH_FAIL)
			return f->message;
	}
	return NULL;
}

/* One look at the job's GPUs: the XIDs NVML delivered since the launch, then the health rules
 * of docs/health.md over a health snapshot (a few NVML calls per GPU; no NVLink states, which
 * can make no FAIL without an earlier sample); sets
 * m->failed at the first FAIL. A snapshot that cannot be taken concludes nothing (-v says so). */
static void monitor_check(struct cli *cli, struct run_monitor *m)
{
	size_t nfields = 0;
	const enum gpuctl_field *fields = gpuctl_health_fields(&nfields);
	struct gpuctl_snapshot *snap = NULL;
	struct gpuctl_health_report *rep = NULL;
	int r;

	while (m->watch && gpuctl_xid_watch_wait(cli->ctx, m->watch, 0, m->xids) > 0)
		;
	r = gpuctl_snapshot_take_fields(cli->ctx, GPUCTL_SNAP_HEALTH, fields, nfields, &snap);
	if (r >= 0)
		r = gpuctl_health_check(cli->ctx, snap, m->xids, NULL, &rep);
	if (r < 0) {
		if (cli->verbose)
			cli_error("run: cannot check the job's GPUs: %s", gpuctl_errmsg(cli->ctx));
		gpuctl_snapshot_free(snap);
		return;
	}
	for (size_t i = 0; i < m->n && m->failed < 0; i++) {
		const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, m->gpus[i]);
		const char *u = g ? gpuctl_gpu_str(g, GPUCTL_F_UUID) : NULL;
		const char *why = g ? gpu_failure(rep, m->gpus[i]) : "gone from the driver's list";
		if (!why && !gpuctl_gpu_lost(g) && (!u || strcmp(u, m->uuids[i]) != 0))
			why = "no longer at its index (the driver's list changed)";
		if (why) {
			m->failed = (ssize_t)i;
			m->failed_at = cli_now(CLOCK_MONOTONIC);
			snprintf(m->why, sizeof(m->why), "%s", why);
		}
	}
	gpuctl_health_report_free(rep);
	gpuctl_snapshot_free(snap);
}

/* Reaps the children; with several, the first failure stops the rest. With m (run --retry),
 * checks the job's GPUs every RUN_HEALTH_TICK_MS meanwhile and stops the job (SIGTERM to its
 * process groups, SIGKILL grace_s later) when one fails. Returns the status. */
static int wait_children(struct cli *cli, struct run_child *kids, size_t n, size_t alive,
                         struct run_monitor *m, unsigned grace_s)
{
	int first_failure = -1;
	bool stopping = false, killed = false;
	double deadline = 0, next_check = cli_now(CLOCK_MONOTONIC);

	while (alive > 0) {
		siginfo_t si = {0};
		int opts = WEXITED | WNOWAIT | (stopping || m ? WNOHANG : 0);
		if (waitid(P_ALL, 0, &si, opts) < 0) {
			if (errno == EINTR)
				continue;
			break; /* ECHILD: nothing left to wait for */
		}
		if (si.si_pid == 0) { /* none exited yet */
			if (stopping && !killed && cli_now(CLOCK_MONOTONIC) > deadline) {
				signal_children(kids, n, SIGKILL);
				killed = true;
			}
			if (m && !stopping && cli_now(CLOCK_MONOTONIC) >= next_check) {
				next_check = cli_now(CLOCK_MONOTONIC) + RUN_HEALTH_TICK_MS / 1000.0;
				monitor_check(cli, m);
				if (m->failed >= 0) {
					cli_error("run: GPU %zu (%s) failed: %s; stopping the job "
					          "(SIGTERM, SIGKILL after %u s)",
					          m->gpus[m->failed], m->uuids[m->failed], m->why,
					          grace_s);
					stopping = true;
					deadline = cli_now(CLOCK_MONOTONIC) + grace_s;
					signal_children(kids, n, SIGTERM);
				}
			}
			struct timespec ts = {0, 20 * 1000 * 1000};
			nanosleep(&ts, NULL);
			continue;
		}
		/* Reap with the handler held off, so it never signals a reused pid. */
		sigset_t old;
		int wstatus = 0;
		block_forwarded(&old);
		size_t k = n;
		for (size_t i = 0; i < n; i++)
			if (kids[i].pid == si.si_pid)
				k = i;
		if (k < n)
			kids[k].pid = 0;
		if (k < n && fwd_pids)
			fwd_pids[k] = 0;
		while (waitpid(si.si_pid, &wstatus, 0) < 0 && errno == EINTR)
			;
		sigprocmask(SIG_SETMASK, &old, NULL);
		if (k == n)
			continue; /* not ours */
		alive--;
		kids[k].status = wait_status(wstatus);
		if (cli->verbose && n > 1)
			cli_error("run: rank %zu exited with status %d", k, kids[k].status);
		if (kids[k].status != 0 && first_failure < 0) {
			first_failure = kids[k].status;
			if (alive > 0 && !stopping) {
				if (cli->verbose)
					cli_error("run: rank %zu failed: stopping the other %zu "
					          "(SIGTERM, SIGKILL after %d s)",
					          k, alive, RUN_KILL_TIMEOUT_S);
				stopping = true;
				deadline = cli_now(CLOCK_MONOTONIC) + RUN_KILL_TIMEOUT_S;
				signal_children(kids, n, SIGTERM);
			}
		}
	}
	/* A failover stops the whole job: what the leaders left in their groups (and which may hold
	 * the lease descriptors) gets the rest of the grace, then SIGKILL. */
	while (m && m->failed >= 0 && groups_alive(kids, n)) {
		if (cli_now(CLOCK_MONOTONIC) > deadline) {
			signal_children(kids, n, SIGKILL);
			break;
		}
		struct timespec ts = {0, 20 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	for (size_t i = 0; i < n; i++)
		kids[i].pgid = 0;
	return first_failure < 0 ? 0 : first_failure;
}

static int start_children(struct cli *cli, struct run_child *kids, size_t n, char **cmd,
                          struct gpuctl_lease *lease, struct run_monitor *m, unsigned grace_s)
{
	struct sigaction sa = {.sa_sigaction = forward_signal, .sa_flags = SA_SIGINFO | SA_RESTART};
	sigset_t old;
	size_t started = 0;
	int status = 0;

	pid_t *pids = calloc(n, sizeof(*pids));
	if (!pids) {
		cli_error("run: out of memory");
		return CLI_EXIT_FAILURE;
	}
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < N_FORWARDED; i++)
		sigaddset(&sa.sa_mask, forwarded_signals[i]);
	block_forwarded(&old);
	fwd_pids = pids;
	fwd_count = n;
	fwd_groups = m != NULL;
	for (size_t i = 0; i < N_FORWARDED; i++) {
		struct sigaction cur;
		/* ours from an earlier launch (--retry) is never SIG_IGN */
		fwd_ignored[i] = sigaction(forwarded_signals[i], NULL, &cur) == 0 &&
		                 !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_IGN;
		if (!fwd_ignored[i])
			sigaction(forwarded_signals[i], &sa, NULL);
	}
	fflush(NULL);

	for (size_t i = 0; i < n; i++) {
		int p[2], go[2] = {-1, -1};
		bool gate = lease && i == 0; /* the first child waits for its record */
		if (pipe2(p, O_CLOEXEC) < 0) {
			cli_error("run: pipe: %s", strerror(errno));
			status = CLI_EXIT_FAILURE;
			break;
		}
		if (gate && pipe2(go, O_CLOEXEC) < 0) {
			cli_error("run: pipe: %s", strerror(errno));
			close(p[0]);
			close(p[1]);
			status = CLI_EXIT_FAILURE;
			break;
		}
		pid_t pid = fork();
		if (pid < 0) {
			cli_error("run: fork: %s", strerror(errno));
			close(p[0]);
			close(p[1]);
			if (gate) {
				close(go[0]);
				close(go[1]);
			}
			status = CLI_EXIT_FAILURE;
			break;
		}
		if (pid == 0) {
			close(p[0]);
			if (gate)
				close(go[1]);
			child_exec(&kids[i], cmd, &old, p[1], go[0]);
		}
		close(p[1]);
		if (gate)
			close(go[0]);
		if (m) {
			(void)setpgid(pid, pid); /* as the child does: whichever runs first */
			kids[i].pgid = pid;
		}
		kids[i].pid = pid;
		pids[i] = pid;
		started++;
		/* The record names gpuctl and its (first) job, for ps, release and foreign-process
		 * checks; without it release would take the run for a hold: the job does not start.
		 */
		if (gate) {
			if (gpuctl_lease_set_owner(cli->ctx, lease, (uint32_t)getpid(),
			                           (uint32_t)pid) < 0) {
				cli_error("run: %s", gpuctl_errmsg(cli->ctx));
				close(go[1]); /* the child exits without exec */
				close(p[0]);
				status = CLI_EXIT_FAILURE;
				break;
			}
			ssize_t w;
			do
				w = write(go[1], "", 1);
			while (w < 0 && errno == EINTR);
			close(go[1]);
		}
		int e = 0;
		ssize_t got;
		do
			got = read(p[0], &e, sizeof(e));
		while (got < 0 && errno == EINTR);
		close(p[0]);
		if (got == (ssize_t)sizeof(e)) {
			/* exec failed: the child exits 127/126 on its own; say why once. */
			if (e == ENOENT || e == ENOTDIR) {
				cli_error("run: '%s': command not found", cmd[0]);
				status = 127;
			} else {
				cli_error("run: '%s': cannot execute: %s", cmd[0], strerror(e));
				status = 126;
			}
			break;
		}
	}
	if (status)
		signal_children(kids, n, SIGTERM); /* the ones started before a failure */
	sigprocmask(SIG_SETMASK, &old, NULL);
	/* The job may run for days: let go of NVML now (nvmlShutdown, dlclose) instead of keeping
	 * the driver's device files open in a process that only waits. Nothing below needs the
	 * context; the lease holds no reference to it. With --retry the job's GPUs are watched:
	 * the context stays. */
	if (!m) {
		cli_watchdog_detach();
		gpuctl_ctx_free(cli->ctx);
		cli->ctx = NULL;
	}
	int st = wait_children(cli, kids, n, started, status ? NULL : m, grace_s);
	if (!status)
		status = st;

	block_forwarded(&old);
	fwd_count = 0;
	fwd_pids = NULL;
	fwd_groups = false;
	sigprocmask(SIG_SETMASK, &old, NULL);
	free(pids);
	return status;
}

/* ---- the command ---- */

/* The job's command line for the owner record: the words joined by spaces. */
static int join_command(char **cmd, char **ret)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int r = sb_add(&buf, &len, &cap, "");
	for (size_t i = 0; r >= 0 && cmd[i]; i++) {
		if (i)
			r = sb_add(&buf, &len, &cap, " ");
		if (r >= 0)
			r = sb_add(&buf, &len, &cap, cmd[i]);
	}
	if (r < 0) {
		free(buf);
		return r;
	}
	*ret = buf;
	return 0;
}

/* "3,4": the lease descriptors for GPUCTL_LEASE_FDS. */
static int fds_list(const int *fds, size_t n, char **ret)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int r = sb_add(&buf, &len, &cap, "");
	for (size_t i = 0; r >= 0 && i < n; i++) {
		char num[24];
		snprintf(num, sizeof(num), "%s%d", i ? "," : "", fds[i]);
		r = sb_add(&buf, &len, &cap, num);
	}
	if (r < 0) {
		free(buf);
		return r;
	}
	*ret = buf;
	return 0;
}

static void monitor_free(struct run_monitor *m)
{
	gpuctl_xid_watch_free(m->watch);
	gpuctl_xid_log_free(m->xids);
	m->watch = NULL;
	m->xids = NULL;
	for (size_t i = 0; i < m->n; i++)
		free(m->uuids[i]);
	free(m->uuids);
	free(m->gpus);
	m->uuids = NULL;
	m->gpus = NULL;
	m->n = 0;
}

/* The GPUs of set (a MIG device counts as its GPU), for watching, and the XID events of the
 * machine from now on (none when NVML cannot deliver them: the snapshots still count). */
static int monitor_init(struct cli *cli, struct run_monitor *m, const struct gpuctl_snapshot *snap,
                        const struct gpuctl_devset *set)
{
	size_t n = gpuctl_devset_count(set);
	m->gpus = calloc(n ? n : 1, sizeof(*m->gpus));
	m->uuids = calloc(n ? n : 1, sizeof(*m->uuids));
	if (!m->gpus || !m->uuids)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		size_t g;
		int mig;
		bool seen = false;
		if (gpuctl_devset_get(set, i, &g, &mig) < 0)
			return -EINVAL;
		for (size_t k = 0; k < m->n; k++)
			seen |= m->gpus[k] == g;
		if (seen)
			continue;
		const char *u = gpuctl_gpu_str(gpuctl_snapshot_gpu(snap, g), GPUCTL_F_UUID);
		if (!u)
			return -ENODATA;
		m->uuids[m->n] = strdup(u);
		if (!m->uuids[m->n])
			return -ENOMEM;
		m->gpus[m->n++] = g;
	}
	if (gpuctl_xid_log_new(&m->xids) < 0)
		return -ENOMEM;
	if (gpuctl_xid_watch_new(cli->ctx, snap, &m->watch) < 0 && cli->verbose)
		cli_error("run: no XID events: %s", gpuctl_errmsg(cli->ctx));
	return 0;
}

/* One launch: select and lease, plan, start, wait (watching the GPUs with --retry: m).
 * *ret_ran says whether the command was started; the status is then its own (or the exec
 * failure's), else gpuctl's exit status. *held: the allocation of the launch before (a
 * failover), or NULL; its devices stay locked until the new lease is taken, which keeps
 * those it chooses again (gpuctl_alloc_request.replace). On return *held is this launch's
 * allocation (the caller releases it: after a relaunch, or when gpuctl is done), or, when
 * none was made, still the one before. */
static int run_once(struct cli *cli, struct run_args *ap, const char *command,
                    struct run_monitor *m, bool *ret_ran, struct gpuctl_alloc **held)
{
	struct run_args a = *ap;
	struct gpuctl_alloc *alloc = NULL;
	struct run_child *kids = NULL;
	struct gpuctl_lease *lease = NULL;
	uint64_t *allowed = NULL;
	int *fds = NULL;
	char *fds_text = NULL;
	size_t nkids = 0, nfds = 0;
	int status, r;

	*ret_ran = false;
	ap->sel.req.replace = *held;
	status = filters_alloc(cli, &cmd_run_entry, &ap->sel,
	                       a.dry_run ? GPUCTL_ALLOC_PREVIEW : GPUCTL_ALLOC_LEASE,
	                       a.dry_run ? NULL : command, &alloc);
	ap->sel.req.replace = NULL;
	a.sel = ap->sel;
	if (status)
		goto out;
	/* the new lease holds what it kept: the old one lets go of the rest (the failed GPU) */
	gpuctl_alloc_free(*held);
	*held = NULL;
	const struct gpuctl_snapshot *snap = gpuctl_alloc_snapshot(alloc);
	lease = gpuctl_alloc_lease(alloc);
	if (lease) {
		nfds = gpuctl_lease_fds(lease, NULL, 0);
		fds = calloc(nfds ? nfds : 1, sizeof(*fds));
		if (!fds) {
			r = -ENOMEM;
			goto fail;
		}
		nfds = gpuctl_lease_fds(lease, fds, nfds);
		r = fds_list(fds, nfds, &fds_text);
		if (r < 0)
			goto fail;
		a.lease_fds_text = fds_text;
		a.lease_dir = gpuctl_alloc_lease_dir_path(alloc);
	}

	const struct gpuctl_devset *set = gpuctl_alloc_devices(alloc);
	size_t ndev = gpuctl_devset_count(set);
	/* one process gets them all: never more MIG devices than CUDA uses (nothing started yet;
	 * freeing the allocation below ends the lease) */
	if (!a.each && gpuctl_devset_cuda_check(cli->ctx, snap, set) < 0) {
		cli_error("run: %s; use --each (one process per device)", gpuctl_errmsg(cli->ctx));
		status = CLI_EXIT_USAGE;
		goto out;
	}
	nkids = a.each ? ndev : 1;
	kids = calloc(nkids, sizeof(*kids));
	allowed = calloc(RUN_CPU_WORDS, sizeof(*allowed));
	if (!kids || !allowed) {
		r = -ENOMEM;
		goto fail;
	}
	r = allowed_cpus(allowed);
	if (r < 0)
		goto fail;
	if (a.each) { /* one rendezvous for the ranks of this launch, unless the job has its own */
		a.master_addr = getenv("MASTER_ADDR") ? NULL : "127.0.0.1";
		a.master_port[0] = '\0';
		int pr = 0;
		/* a port free here means nothing for another host's MASTER_ADDR */
		if (a.master_addr && !getenv("MASTER_PORT"))
			pr = free_local_port(a.master_port, sizeof(a.master_port));
		if (pr < 0 && cli->verbose)
			cli_error("run: no MASTER_PORT for the ranks: 127.0.0.1: %s",
			          strerror(-pr));
	}
	for (size_t i = 0; i < nkids; i++) {
		if (a.each)
			r = plan_child(&kids[i], &a, snap, set, i, i + 1, (long)i, ndev, allowed);
		else
			r = plan_child(&kids[i], &a, snap, set, 0, ndev, -1, 0, allowed);
		if (r < 0)
			goto fail;
		kids[i].lease_fds = fds;
		kids[i].nlease_fds = nfds;
		if (cli->verbose && !a.dry_run) {
			cli_error("run: %s%zu: CUDA_VISIBLE_DEVICES=%s, cpus: %s, memory: %s",
			          a.each ? "rank " : "child ", i, kids[i].env[0].value,
			          kids[i].cpus_text, kids[i].mem_text);
		}
	}
	if (a.retry) {
		r = monitor_init(cli, m, snap, set);
		if (r < 0)
			goto fail;
	}
	if (a.dry_run) {
		for (size_t i = 0; i < nkids; i++) {
			if (i)
				putchar('\n');
			if (a.each)
				printf("# rank %zu\n", i);
			print_plan(&kids[i], a.cmd, stdout);
		}
		status = CLI_EXIT_OK;
		goto out;
	}
	*ret_ran = true;
	/* from here on gpuctl is the job's parent, not a one-shot command: a hung NVML call (of
	 * --retry's checks) must not end it and orphan the job (watchdog.h) */
	cli_watchdog_pause();
	status = start_children(cli, kids, nkids, a.cmd, lease, a.retry ? m : NULL, a.grace_s);
	cli_watchdog_resume();
	goto out;

fail:
	if (r == -ENODATA)
		cli_error("run: a chosen device has no UUID; refusing to start with an ambiguous "
		          "device string");
	else
		cli_error("run: %s", strerror(-r));
	status = CLI_EXIT_FAILURE;
out:
	for (size_t i = 0; kids && i < nkids; i++)
		child_free(&kids[i]);
	free(kids);
	free(allowed);
	/* Every child has ended: the lease ends with gpuctl's descriptors, when the caller frees
	 * it (after a relaunch has its own, or when gpuctl is done). */
	if (alloc)
		*held = alloc;
	free(fds);
	free(fds_text);
	return status;
}

static int cmd_run_exec(struct cli *cli, int argc, char **argv)
{
	struct run_args a = {.sel = SELECT_ARGS_INIT, .grace_s = RUN_GRACE_DEFAULT_S};
	unsigned long v;
	char *command = NULL;
	struct gpuctl_alloc *held = NULL; /* the current launch's allocation (its lease) */
	int opt, status, r;

	while ((opt = getopt_long(argc, argv, "+:n:h", run_options, NULL)) != -1) {
		status = filters_option(&cmd_run_entry, &a.sel, opt, optarg);
		if (status >= 0) {
			if (status)
				return status;
			continue;
		}
		switch (opt) {
		case OPT_EACH:
			a.each = true;
			break;
		case OPT_DRY_RUN:
			a.dry_run = true;
			break;
		case OPT_NO_BIND:
			a.no_bind = true;
			break;
		case OPT_RETRY:
			if (parse_uint(optarg, 0, RUN_RETRY_MAX, &v) < 0)
				return cmd_usage_error(&cmd_run_entry,
				                       "--retry: '%s' is not a number of failovers "
				                       "(0 to %d)",
				                       optarg, RUN_RETRY_MAX);
			a.retry = (unsigned)v;
			break;
		case OPT_GRACE:
			if (parse_uint(optarg, 0, 3600, &v) < 0)
				return cmd_usage_error(&cmd_run_entry,
				                       "--grace: '%s' is not a number of seconds "
				                       "(0 to 3600)",
				                       optarg);
			a.grace_s = (unsigned)v;
			break;
		case OPT_RETRY_ON:
			if (strcmp(optarg, "any") && strcmp(optarg, "gpu"))
				return cmd_usage_error(&cmd_run_entry,
				                       "--retry-on: '%s' (gpu or any)", optarg);
			a.retry_any = strcmp(optarg, "any") == 0;
			break;
		case 'h':
			cmd_usage(&cmd_run_entry, stdout);
			return CLI_EXIT_OK;
		default:
			return cmd_bad_option(&cmd_run_entry, opt, argv);
		}
	}
	status = filters_check(&cmd_run_entry, &a.sel);
	if (status)
		return status;
	if (optind >= argc)
		return cmd_usage_error(&cmd_run_entry, "no command given (gpuctl run -n N -- CMD)");
	if (a.dry_run && a.sel.req.wait)
		return cmd_usage_error(&cmd_run_entry, "--wait and --dry-run conflict");
	if (a.each && a.sel.req.count == 0)
		return cmd_usage_error(&cmd_run_entry, "--each with -n 0 would start nothing");
	if (a.retry && a.dry_run)
		return cmd_usage_error(&cmd_run_entry, "--retry and --dry-run conflict");
	if (a.retry && a.sel.req.count == 0)
		return cmd_usage_error(&cmd_run_entry,
		                       "--retry with -n 0: no GPU to fail over from");
	a.cmd = argv + optind;

	r = join_command(a.cmd, &command);
	if (r < 0) {
		cli_error("run: out of memory");
		return CLI_EXIT_FAILURE;
	}
	for (a.attempt = 0;; a.attempt++) {
		struct run_monitor mon = {.failed = -1};
		bool ran = false;
		status = run_once(cli, &a, command, &mon, &ran, &held);
		bool gpu_failed = mon.failed >= 0;
		if (ran && a.retry && !gpu_failed && status != 0 && cli->ctx) {
			/* the job failed by itself: did one of its GPUs fail under it? */
			monitor_check(cli, &mon);
			gpu_failed = mon.failed >= 0;
			if (gpu_failed)
				cli_error("run: the job exited with status %d and GPU %zu (%s) "
				          "failed: %s",
				          status, mon.gpus[mon.failed], mon.uuids[mon.failed],
				          mon.why);
		}
		bool retry = ran && a.retry > 0 && (gpu_failed || (status != 0 && a.retry_any));
		if (retry && a.attempt >= a.retry) {
			if (gpu_failed) {
				cli_error("run: gave up after %u failover%s", a.retry,
				          a.retry == 1 ? "" : "s");
				status = RUN_EXIT_GAVE_UP;
			}
			retry = false;
		}
		if (retry && gpu_failed && filters_avoid(&a.sel, mon.uuids[mon.failed]) < 0) {
			cli_error("run: out of memory");
			status = CLI_EXIT_FAILURE;
			retry = false;
		}
		monitor_free(&mon);
		if (!retry)
			break;
		double backoff = RUN_BACKOFF_FIRST_S;
		for (unsigned i = 0; i < a.attempt && backoff < RUN_BACKOFF_MAX_S; i++)
			backoff *= 2;
		if (backoff > RUN_BACKOFF_MAX_S)
			backoff = RUN_BACKOFF_MAX_S;
		cli_error("run: relaunching in %.1f s%s (failover %u of %u)", backoff,
		          a.sel.n_avoid ? " without the failed GPUs" : "", a.attempt + 1, a.retry);
		struct timespec ts = {(time_t)backoff,
		                      (long)((backoff - (double)(time_t)backoff) * 1e9)};
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
	/* the last lease ends only now, after any line saying why gpuctl stops */
	gpuctl_alloc_free(held);
	free(command);
	filters_free(&a.sel);
	return status;
}

const struct cmd_entry cmd_run_entry = {
        .name = "run",
        .usage = "-n N [FILTERS] [--each] [--dry-run] [--no-bind] [--retry N [--grace S] "
                 "[--retry-on gpu|any]] -- CMD [ARGS...]",
        .summary = "choose GPUs as select does and run a command on them",
        .options = FILTER_OPTIONS_HELP
        "  --each                one process per chosen device, each with its own\n"
        "                        CUDA_VISIBLE_DEVICES and LOCAL_RANK=RANK=i, WORLD_SIZE=\n"
        "                        LOCAL_WORLD_SIZE=N, MASTER_ADDR=127.0.0.1 and a free\n"
        "                        MASTER_PORT unless set (torchrun --standalone's); when one\n"
        "                        fails the others get SIGTERM (SIGKILL 30 s later) and the\n"
        "                        first failure's status is returned\n"
        "  --dry-run             print each process's environment changes, CPU and memory\n"
        "                        binding and command; start nothing\n"
        "  --no-bind             do not bind CPUs and memory to the GPUs' NUMA nodes\n"
        "  --retry N             failover: watch the job's GPUs; when one turns FAIL (as\n"
        "                        gpuctl health judges, XID events included) stop the job,\n"
        "                        select again without that GPU, still holding the others\n"
        "                        (kept when chosen again; docs/leases.md \"Failover\"), and\n"
        "                        relaunch it with GPUCTL_RESTART_COUNT=1, 2, ... at most N\n"
        "                        times (0-100); no replacement: one line, exit 3\n"
        "  --grace SECONDS       on failover, SIGTERM to the job's process groups, then\n"
        "                        SIGKILL after SECONDS (default 10)\n"
        "  --retry-on gpu|any    relaunch only after a GPU failure (default), or also when\n"
        "                        the job fails by itself\n"
        "  -h, --help            print this help\n",
        .notes = "\n"
                 "The command gets CUDA_VISIBLE_DEVICES=<UUIDs> (empty for -n 0),\n"
                 "CUDA_DEVICE_ORDER=PCI_BUS_ID, GPUCTL_GPUS=<index>:<UUID>,... and, when it was "
                 "set,\n"
                 "NVIDIA_VISIBLE_DEVICES=<UUIDs>. Its CPUs are those of the GPUs' affinity this "
                 "process\n"
                 "may use; memory prefers the GPUs' NUMA nodes. SIGINT, SIGTERM, SIGHUP, SIGQUIT,\n"
                 "SIGUSR1 and SIGUSR2 are forwarded to it, but one gpuctl was started ignoring\n"
                 "(nohup) stays ignored by both. gpuctl exits with its status (128+N if\n"
                 "killed by signal N; 127 command not found; 126 not executable).\n"
                 "The chosen devices are leased (docs/leases.md) until gpuctl and the command have "
                 "both\n"
                 "ended (the command inherits the lock descriptors: GPUCTL_LEASE_FDS). An unsafe "
                 "lease\n"
                 "directory is exit 1; devices all leased, exit 3. With --retry each process leads "
                 "a\n"
                 "process group of its own; exit 5: a GPU failed again and no failover was left.\n",
        .exec = cmd_run_exec,
        .exits = CMD_EXITS_DRIVER | CMD_EXITS_NOMATCH | CMD_EXITS_RETRY | CMD_EXITS_JOB |
                 CMD_EXITS_BUSY | CMD_EXITS_HUNG,
};
