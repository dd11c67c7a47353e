// SPDX-License-Identifier: MIT
/*
 * devnode.c: the device-node map (include/gpuctl/devnode.h): which character devices under a
 * dev directory belong to which GPU and MIG device of a snapshot, for the agent's enforce = acl
 * and enforce = cgroup (docs/agent.md, "Device nodes").
 *
 * Decisions:
 * - No NVML call (tests count them): a GPU's minor is the "Device Minor:" of the driver's
 *   information file with the GPU's bus id (driver-proc.c). /dev/nvidia<minor> is char
 *   195:minor (NVIDIA driver README; NVML's nvmlDeviceGetMinorNumber says the same node).
 * - A MIG device needs three nodes (NVIDIA's MIG user guide, "Device Nodes and Capabilities"):
 *   its parent GPU's /dev/nvidiaN, which CUDA opens for any of the GPU's MIG devices, and the
 *   access capabilities of its GPU instance and of its compute instance,
 *   /dev/nvidia-caps/nvidia-cap<N> with N from mig-minors and the major /proc/devices gives
 *   "nvidia-caps" (Slurm's gpu/nvml plugin hands a MIG job the same three files).
 * - The shared nodes (nvidiactl, nvidia-modeset: 195:255 and 195:254; nvidia-uvm and
 *   nvidia-uvm-tools: minors 0 and 1 of "nvidia-uvm"'s major; nvidia-modprobe's
 *   nvidia-modprobe-utils.h) belong to nobody: every CUDA process opens them.
 * - What cannot be read (no information file for a bus, no mig-minors, no nvidia-caps major)
 *   leaves its devices without nodes: the caller decides what an unknown node means.
 * - Paths: $GPUCTL_NVIDIA_PROC (the driver's per-GPU files), $GPUCTL_NVIDIA_CAPS_PROC (the
 *   directory of mig-minors), $GPUCTL_PROC_DEVICES (the file); the simulator writes all three
 *   (sim/procfs.c). Files are read whole, at most 1 MiB.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpuctl/devnode.h"

#include "ctx.h"
#include "devnode-internal.h"
#include "driver-proc.h"
#include "fileio.h"
#include "util.h"

#define TEXT_MAX   (1u << 20)
#define NODES_MAX  3 /* a MIG device's: GPU, GI access, CI access */
#define SHARED_MAX 4

/* One device's nodes. */
struct dev {
	struct gpuctl_devnode node[NODES_MAX];
	const struct gpuctl_devnode *ptr[NODES_MAX]; /* &node[k], handed out */
	size_t n;                                    /* 0: unknown */
};

struct gpuctl_devnodes {
	char *dev_dir;
	size_t n_gpus;
	struct dev *gpu;  /* n_gpus */
	struct dev **mig; /* mig[g]: n_mig[g] devices */
	size_t *n_mig;
	struct gpuctl_devnode shared[SHARED_MAX];
	const struct gpuctl_devnode *shared_ptr[SHARED_MAX];
	size_t n_shared;
};

static void dev_clear(struct dev *d)
{
	for (size_t k = 0; k < d->n; k++)
		free((void *)d->node[k].path);
	d->n = 0;
}

void gpuctl_devnodes_free(struct gpuctl_devnodes *m)
{
	if (!m)
		return;
	for (size_t g = 0; g < m->n_gpus; g++) {
		dev_clear(&m->gpu[g]);
		for (size_t i = 0; m->mig && i < m->n_mig[g]; i++)
			dev_clear(&m->mig[g][i]);
		if (m->mig)
			free(m->mig[g]);
	}
	for (size_t k = 0; k < m->n_shared; k++)
		free((void *)m->shared[k].path);
	free(m->gpu);
	free(m->mig);
	free(m->n_mig);
	free(m->dev_dir);
	free(m);
}

/* Appends node (kind, dev_dir/name, major:minor) to d: 0 or -ENOMEM. */
static int dev_add(struct dev *d, const char *dev_dir, enum gpuctl_devnode_kind kind,
                   const char *name, uint32_t major, uint32_t minor)
{
	char *path;

	if (d->n == NODES_MAX || asprintf(&path, "%s/%s", dev_dir, name) < 0)
		return -ENOMEM;
	d->node[d->n] =
	        (struct gpuctl_devnode){.kind = kind, .path = path, .major = major, .minor = minor};
	d->ptr[d->n] = &d->node[d->n];
	d->n++;
	return 0;
}

/* The whole of file path (NUL-terminated, malloc'ed), or NULL when it cannot be read. */
static char *read_text(const char *path, size_t *ret_len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct stat st;
	char *text = NULL;

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    fd_read_all(fd, TEXT_MAX, &text, ret_len) < 0)
		return NULL;
	return text;
}

/* $name, else def. */
static const char *env_or(const char *name, const char *def)
{
	const char *v = secure_getenv(name);

	return v && v[0] ? v : def;
}

/* What the MIG and shared nodes need of /proc: mig-minors' MIG lines, parsed once (the
 * driver's table lists every GPU instance of every GPU, thousands of lines), and /proc/devices
 * (NULL when unreadable). */
struct proc_texts {
	struct devnode_cap *caps; /* DEVNODE_CAP_GI and _CI lines */
	size_t n_caps;
	bool have_caps; /* mig-minors was read */
	char *devices;
	size_t devices_len;
};

static void proc_texts_read(struct proc_texts *t)
{
	char path[4200], *text;
	size_t len;

	(void)snprintf(path, sizeof(path), "%s/mig-minors",
	               env_or("GPUCTL_NVIDIA_CAPS_PROC", "/proc/driver/nvidia-caps"));
	if ((text = read_text(path, &len))) {
		/* out of memory: the MIG devices have no nodes */
		t->have_caps = devnode_mig_table(text, len, &t->caps, &t->n_caps) == 0;
		free(text);
	}
	t->devices = read_text(env_or("GPUCTL_PROC_DEVICES", "/proc/devices"), &t->devices_len);
}

/* The nodes of MIG device m of GPU g (device minor minor) into d, when mig-minors names both
 * its capabilities. */
static int mig_nodes(struct gpuctl_devnodes *map, const struct gpuctl_gpu *gpu, size_t m,
                     uint32_t minor, const struct proc_texts *t, uint32_t caps_major, struct dev *d)
{
	const struct gpuctl_mig *mig = gpuctl_gpu_mig(gpu, m);
	int64_t gi, ci;
	uint32_t gi_minor, ci_minor;
	char name[64];
	int r;

	if (!t->have_caps || caps_major == UINT32_MAX ||
	    gpuctl_mig_int(mig, GPUCTL_MIG_GI, &gi) < 0 ||
	    gpuctl_mig_int(mig, GPUCTL_MIG_CI, &ci) < 0 || gi < 0 || gi > UINT32_MAX || ci < 0 ||
	    ci > INT32_MAX ||
	    !devnode_mig_find(t->caps, t->n_caps, minor, (uint32_t)gi, -1, &gi_minor) ||
	    !devnode_mig_find(t->caps, t->n_caps, minor, (uint32_t)gi, (int)ci, &ci_minor))
		return 0;
	(void)snprintf(name, sizeof(name), "nvidia%u", minor);
	if ((r = dev_add(d, map->dev_dir, GPUCTL_DEVNODE_GPU, name, GPUCTL_DEVNODE_NVIDIA_MAJOR,
	                 minor)) < 0)
		return r;
	(void)snprintf(name, sizeof(name), "nvidia-caps/nvidia-cap%u", gi_minor);
	if ((r = dev_add(d, map->dev_dir, GPUCTL_DEVNODE_GI_ACCESS, name, caps_major, gi_minor)) <
	    0)
		return r;
	(void)snprintf(name, sizeof(name), "nvidia-caps/nvidia-cap%u", ci_minor);
	return dev_add(d, map->dev_dir, GPUCTL_DEVNODE_CI_ACCESS, name, caps_major, ci_minor);
}

/* The nodes of GPU g (device minor minor, UINT32_MAX unknown) and of its MIG devices. */
static int gpu_nodes(struct gpuctl_devnodes *map, const struct gpuctl_snapshot *snap, size_t g,
                     uint32_t minor, const struct proc_texts *t, uint32_t caps_major)
{
	const struct gpuctl_gpu *gpu = gpuctl_snapshot_gpu(snap, g);
	size_t n_mig = gpuctl_gpu_mig_count(gpu);
	char name[32];
	int r;

	if (n_mig && !(map->mig[g] = calloc(n_mig, sizeof(*map->mig[g]))))
		return -ENOMEM;
	map->n_mig[g] = n_mig;
	if (minor == UINT32_MAX)
		return 0;
	(void)snprintf(name, sizeof(name), "nvidia%u", minor);
	if ((r = dev_add(&map->gpu[g], map->dev_dir, GPUCTL_DEVNODE_GPU, name,
	                 GPUCTL_DEVNODE_NVIDIA_MAJOR, minor)) < 0)
		return r;
	for (size_t m = 0; m < n_mig; m++)
		if ((r = mig_nodes(map, gpu, m, minor, t, caps_major, &map->mig[g][m])) < 0)
			return r;
	return 0;
}

/* nvidiactl, nvidia-modeset, and the two uvm nodes when /proc/devices lists nvidia-uvm. */
static int shared_nodes(struct gpuctl_devnodes *map, const struct proc_texts *t)
{
	static const struct {
		const char *name;
		uint32_t minor;
		bool uvm;
	} shared[SHARED_MAX] = {
	        {"nvidiactl", GPUCTL_DEVNODE_CTL_MINOR, false},
	        {"nvidia-modeset", GPUCTL_DEVNODE_MODESET_MINOR, false},
	        {"nvidia-uvm", 0, true},
	        {"nvidia-uvm-tools", 1, true},
	};
	uint32_t uvm = UINT32_MAX;

	if (t->devices && !devnode_char_major(t->devices, t->devices_len, "nvidia-uvm", &uvm))
		uvm = UINT32_MAX;
	for (size_t k = 0; k < SHARED_MAX; k++) {
		char *path;

		if (shared[k].uvm && uvm == UINT32_MAX)
			continue;
		if (asprintf(&path, "%s/%s", map->dev_dir, shared[k].name) < 0)
			return -ENOMEM;
		map->shared[map->n_shared] = (struct gpuctl_devnode){
		        .kind = GPUCTL_DEVNODE_SHARED,
		        .path = path,
		        .major = shared[k].uvm ? uvm : GPUCTL_DEVNODE_NVIDIA_MAJOR,
		        .minor = shared[k].minor};
		map->shared_ptr[map->n_shared] = &map->shared[map->n_shared];
		map->n_shared++;
	}
	return 0;
}

/* The device minors of snap's GPUs (UINT32_MAX unknown) into minors. */
static void gpu_minors(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap, uint64_t *buses,
                       uint32_t *minors)
{
	size_t n = gpuctl_snapshot_gpu_count(snap);
	int r;

	for (size_t g = 0; g < n; g++)
		if (!driver_proc_bus_parse(
		            gpuctl_gpu_str(gpuctl_snapshot_gpu(snap, g), GPUCTL_F_PCI_BUS_ID),
		            &buses[g]))
			buses[g] = UINT64_MAX; /* matches no file */
	if ((r = driver_proc_minors(buses, n, minors)) < 0)
		ctx_log_once(ctx, "devnode-minors", GPUCTL_LOG_DEBUG,
		             "device nodes: the driver's GPU files cannot be read: %s",
		             strerror(-r));
}

int gpuctl_devnodes_read(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                         const char *dev_dir, struct gpuctl_devnodes **ret_map)
{
	struct proc_texts t = {0};
	struct gpuctl_devnodes *map = NULL;
	size_t n = snap ? gpuctl_snapshot_gpu_count(snap) : 0;
	uint64_t *buses = NULL;
	uint32_t *minors = NULL, caps_major = UINT32_MAX;
	int r = -ENOMEM;

	if (!dev_dir)
		dev_dir = "/dev";
	if (!snap || !ret_map || dev_dir[0] != '/')
		return ctx_error(ctx, -EINVAL, "device nodes: %s",
		                 !snap || !ret_map ? "no snapshot or result"
		                                   : "the dev directory is not an absolute path");
	if (!(map = calloc(1, sizeof(*map))) || !(map->dev_dir = strdup(dev_dir)) ||
	    !(buses = calloc(n + 1, sizeof(*buses))) ||
	    !(minors = calloc(n + 1, sizeof(*minors))) ||
	    !(map->gpu = calloc(n + 1, sizeof(*map->gpu))) ||
	    !(map->mig = calloc(n + 1, sizeof(*map->mig))) ||
	    !(map->n_mig = calloc(n + 1, sizeof(*map->n_mig))))
		goto out;
	/* no trailing slash: "/dev/" names the same nodes as "/dev" */
	for (size_t l = strlen(map->dev_dir); l > 1 && map->dev_dir[l - 1] == '/'; l--)
		map->dev_dir[l - 1] = '\0';
	map->n_gpus = n;
	gpu_minors(ctx, snap, buses, minors);
	proc_texts_read(&t);
	if (t.devices && !devnode_char_major(t.devices, t.devices_len, "nvidia-caps", &caps_major))
		caps_major = UINT32_MAX;
	for (size_t g = 0; g < n; g++)
		if ((r = gpu_nodes(map, snap, g, minors[g], &t, caps_major)) < 0)
			goto out;
	if ((r = shared_nodes(map, &t)) < 0)
		goto out;
	*ret_map = map;
	map = NULL;
	r = 0;
out:
	if (r == -ENOMEM)
		(void)ctx_error(ctx, r, "device nodes: out of memory");
	gpuctl_devnodes_free(map);
	free(t.caps);
	free(t.devices);
	free(buses);
	free(minors);
	return r;
}

int gpuctl_devnodes_of(const struct gpuctl_devnodes *map, size_t gpu, int mig,
                       const struct gpuctl_devnode *const **ret_nodes, size_t *ret_n)
{
	const struct dev *d;

	if (!map || gpu >= map->n_gpus || mig < -1 || (mig >= 0 && (size_t)mig >= map->n_mig[gpu]))
		return -ERANGE;
	d = mig < 0 ? &map->gpu[gpu] : &map->mig[gpu][mig];
	if (d->n == 0)
		return -ENODATA;
	*ret_nodes = d->ptr;
	*ret_n = d->n;
	return 0;
}

void gpuctl_devnodes_shared(const struct gpuctl_devnodes *map,
                            const struct gpuctl_devnode *const **ret_nodes, size_t *ret_n)
{
	*ret_nodes = map ? map->shared_ptr : NULL;
	*ret_n = map ? map->n_shared : 0;
}

const char *gpuctl_devnodes_dev_dir(const struct gpuctl_devnodes *map)
{
	return map ? map->dev_dir : NULL;
}
