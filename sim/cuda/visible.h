/* Which devices a CUDA process sees, and in which ordinal order, given CUDA_VISIBLE_DEVICES and
 * CUDA_DEVICE_ORDER: the simulator's own reading of the documented rules (visible.c), kept
 * apart from gpuctl's parser (src/lib/devices/cuda-visible.c) on purpose. Pure: no I/O, no
 * globals. */
#ifndef SIM_CUDA_VISIBLE_H
#define SIM_CUDA_VISIBLE_H

#include "../scenario.h"

#include <stddef.h>

/* A CUDA device: a whole GPU (mig < 0) or MIG device `mig` of GPU `gpu` (scenario indices). */
struct sim_cuda_dev {
	unsigned int gpu;
	int mig;
};

#define SIM_CUDA_MAX_DEVS (SIM_MAX_GPUS * (1 + SIM_MAX_MIG))

/* MIG enumeration (MIG user guide, "CUDA device enumeration"): from driver branch R570 a process
 * may enumerate several MIG devices (one compute instance per GPU instance), at most 64 in all;
 * before it, one. */
#define SIM_CUDA_MIG_MULTI_BRANCH 570u
#define SIM_CUDA_MIG_MAX          64u

/* Fills devs (room for max) with the visible devices in CUDA ordinal order; returns how many.
 * cvd and order are the variables' values, NULL when unset. */
size_t sim_cuda_visible(const struct sim_scenario *sc, const char *cvd, const char *order,
                        struct sim_cuda_dev *devs, size_t max);

#endif
