// SPDX-License-Identifier: MIT
/*
 * procfs.c: the NVIDIA kernel driver's per-GPU /proc files of the simulated machine, so that
 * gpuctl (through GPUCTL_NVIDIA_PROC) reads the scenario's GPUs there instead of the host's.
 *
 * Decisions:
 * - The layout is the driver's (NVIDIA driver README, "Using the /proc File System
 *   Interface": /proc/driver/nvidia/gpus/domain:bus:device.function/information; the open
 *   kernel modules' kernel-open/nvidia/nv-procfs.c names the directory with four hex digits of
 *   domain and lowercase hex, and writes "Key: \t value" lines, among them "GPU UUID",
 *   "Bus Location" in the directory's spelling and "Device Minor").
 * - /proc/driver/nvidia/version: the module's "NVRM version:" line (nv-procfs.c) with the
 *   scenario's driver version, which the facts cache keys its file by.
 * - Only the lines a reader of GPU identity needs are written, with the scenario's values;
 *   IRQ, VBIOS and DMA lines carry no scenario fact and are left out.
 * - The driver keeps a GPU's directory while the GPU is bound to it, fallen off the bus or not,
 *   so a lost GPU (nvsim set lost=1) keeps its file: that is what a reader falls back on when
 *   NVML answers GPU_IS_LOST.
 * - The MIG capability table, /proc/driver/nvidia-caps/mig-minors (NVIDIA's MIG user guide,
 *   "Device Nodes and Capabilities"): "config 1", "monitor 2", then for each GPU, by its device
 *   minor G, "gpuG/giI/access N" for GPU instances 0-14, each followed by its compute
 *   instances' "gpuG/giI/ciC/access N", C 0-7; numbered in that order, 135 minors a GPU minor,
 *   as the driver's table is laid out (whatever the numbers, readers take them from the file).
 *   Written whole, MIG or not, as the driver does.
 * - /proc/devices: the kernel's format (proc_devices(5): "Character devices:", "%3d %s"
 *   lines, a blank line, "Block devices:"); the NVIDIA drivers' names with their fixed major
 *   (195 nvidia-frontend) and, for the dynamic ones, majors picked here: 235 nvidia-uvm,
 *   236 nvidia-nvlink, 237 nvidia-caps.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "scenario.h"
#include "state.h"

/* Writes text to path (replacing it): 0 or -errno. */
static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");
	int r;

	if (!f)
		return -errno;
	r = fputs(text, f) < 0 ? -EIO : 0;
	if (fclose(f) != 0 && r == 0)
		r = -errno;
	return r;
}

int sim_procfs_write(const struct sim_scenario *s, const char *root)
{
	char path[4200], text[256];
	int r;

	/* the module's version line (nv-procfs.c: "NVRM version: %s", the driver's id string) */
	if ((size_t)snprintf(path, sizeof(path), "%s/version", root) >= sizeof(path))
		return -ENAMETOOLONG;
	(void)snprintf(text, sizeof(text),
	               "NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  (nvsim)\n"
	               "GCC version:  nvsim\n",
	               s->driver_version[0] ? s->driver_version : "unknown");
	if ((r = sim_mkdir_p(root)) < 0 || (r = write_file(path, text)) < 0)
		return r;
	for (size_t i = 0; i < s->n_gpus; i++) {
		const struct sim_gpu *g = &s->gpus[i];
		char dir[4096];
		FILE *f;

		if ((size_t)snprintf(dir, sizeof(dir), "%s/gpus/%04x:%02x:%02x.%x", root, g->domain,
		                     g->bus, g->device, g->function) >= sizeof(dir))
			return -ENAMETOOLONG;
		if ((r = sim_mkdir_p(dir)) < 0)
			return r;
		(void)snprintf(path, sizeof(path), "%s/information", dir);
		f = fopen(path, "we");
		if (!f)
			return -errno;
		r = fprintf(f,
		            "Model: \t\t %s\nGPU UUID: \t %s\nBus Type: \t PCIe\n"
		            "Bus Location: \t %04x:%02x:%02x.%x\nDevice Minor: \t %u\n"
		            "GPU Excluded:\t No\n",
		            g->name, g->uuid, g->domain, g->bus, g->device, g->function,
		            g->minor_number) < 0
		            ? -EIO
		            : 0;
		if (fclose(f) != 0 && r == 0)
			r = -errno;
		if (r < 0)
			return r;
	}
	return 0;
}

#define CAPS_GI     15 /* GPU instances a GPU's table lists */
#define CAPS_CI     8  /* compute instances a GPU instance's lists */
#define CAPS_PER_GI (1 + CAPS_CI)

static int write_mig_minors(const struct sim_scenario *s, const char *dir)
{
	char path[4200];
	FILE *f;
	int r = 0;

	if ((size_t)snprintf(path, sizeof(path), "%s/mig-minors", dir) >= sizeof(path))
		return -ENAMETOOLONG;
	f = fopen(path, "we");
	if (!f)
		return -errno;
	if (fputs("config 1\nmonitor 2\n", f) < 0)
		r = -EIO;
	for (size_t i = 0; r == 0 && i < s->n_gpus; i++) {
		unsigned int g = s->gpus[i].minor_number;
		unsigned int base = 3 + g * CAPS_GI * CAPS_PER_GI;

		for (unsigned int gi = 0; r == 0 && gi < CAPS_GI; gi++) {
			unsigned int n = base + gi * CAPS_PER_GI;
			if (fprintf(f, "gpu%u/gi%u/access %u\n", g, gi, n) < 0)
				r = -EIO;
			for (unsigned int ci = 0; r == 0 && ci < CAPS_CI; ci++)
				if (fprintf(f, "gpu%u/gi%u/ci%u/access %u\n", g, gi, ci,
				            n + 1 + ci) < 0)
					r = -EIO;
		}
	}
	if (fclose(f) != 0 && r == 0)
		r = -errno;
	return r;
}

int sim_procfs_write_caps(const struct sim_scenario *s, const char *proc)
{
	char path[4200];
	int r;

	if ((size_t)snprintf(path, sizeof(path), "%s/driver/nvidia-caps", proc) >= sizeof(path))
		return -ENAMETOOLONG;
	if ((r = sim_mkdir_p(path)) < 0 || (r = write_mig_minors(s, path)) < 0)
		return r;
	if ((size_t)snprintf(path, sizeof(path), "%s/devices", proc) >= sizeof(path))
		return -ENAMETOOLONG;
	return write_file(path, "Character devices:\n  1 mem\n  4 /dev/vc/0\n"
	                        "195 nvidia-frontend\n235 nvidia-uvm\n236 nvidia-nvlink\n"
	                        "237 nvidia-caps\n\nBlock devices:\n  8 sd\n");
}
