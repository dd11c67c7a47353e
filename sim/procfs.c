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
 * - Only the lines a reader of GPU identity needs are written, with the scenario's values;
 *   IRQ, VBIOS and DMA lines carry no scenario fact and are left out.
 * - The driver keeps a GPU's directory while the GPU is bound to it, fallen off the bus or not,
 *   so a lost GPU (nvsim set lost=1) keeps its file: that is what a reader falls back on when
 *   NVML answers GPU_IS_LOST.
 */
#include <errno.h>
#include <stdio.h>

#include "scenario.h"
#include "state.h"

int sim_procfs_write(const struct sim_scenario *s, const char *root)
{
	for (size_t i = 0; i < s->n_gpus; i++) {
		const struct sim_gpu *g = &s->gpus[i];
		char dir[4096], path[4200];
		FILE *f;
		int r;

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
