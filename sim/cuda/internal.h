/* Internals shared by the simulated libcuda.so.1's source files: the one global state, the lock
 * every exported function takes, and device resolution.
 *
 * The library reads the same scenario and state directory as the simulated NVML
 * (NVSIM_STATE_DIR, else NVSIM_SCENARIO read-only), through nvsim_core; it never links the NVML
 * simulator. The visible devices are fixed at cuInit from CUDA_VISIBLE_DEVICES and
 * CUDA_DEVICE_ORDER (visible.c), as the real driver reads them once. */
#ifndef SIM_CUDA_INTERNAL_H
#define SIM_CUDA_INTERNAL_H

#include "cuda-sim-abi.h"
#include "visible.h"
#include "../scenario.h"
#include "../state.h"

#include <pthread.h>
#include <stdbool.h>
#include <sys/stat.h>

#define SIM_EXPORT __attribute__((visibility("default")))

struct sim_cu {
	pthread_mutex_t lock;
	bool init_tried;         /* cuInit ran (its result is final, as on a real driver) */
	CUresult init_result;    /* what cuInit returned */
	char state_dir[4096];    /* "" = read-only NVSIM_SCENARIO mode */
	json_t *scenario_root;   /* the scenario document as loaded */
	struct sim_scenario *sc; /* with state.json's "set" merged */
	struct sim_dyn *dyn;     /* state.json's lost / cuda.alloc facts */
	struct stat state_st;    /* last state.json seen */
	struct sim_cuda_dev devs[SIM_CUDA_MAX_DEVS]; /* visible devices by ordinal */
	unsigned int n_devs;
	unsigned int util[SIM_CUDA_MAX_DEVS]; /* nvsimCudaSetUtilization, by ordinal */
};

extern struct sim_cu sim_cu;

/* Takes the lock; sim_cu_end drops it and passes r through. */
void sim_cu_begin(void);
CUresult sim_cu_end(CUresult r);
/* Under the lock: NOT_INITIALIZED unless cuInit succeeded. */
CUresult sim_cu_ready(void);
/* Opens a call that needs cuInit: takes the lock and returns sim_cu_ready()'s error (through
 * sim_cu_end, which drops the lock) when the library is not ready. */
#define SIM_CU_READY_OR_RETURN()                                                                   \
	do {                                                                                       \
		CUresult ready_;                                                                   \
		sim_cu_begin();                                                                    \
		if ((ready_ = sim_cu_ready()) != CUDA_SUCCESS)                                     \
			return sim_cu_end(ready_);                                                 \
	} while (0)
/* Under the lock: resolves an ordinal (INVALID_DEVICE), after sim_cu_ready. */
CUresult sim_cu_device(CUdevice dev, const struct sim_gpu **ret_g,
                       const struct sim_mig_instance **ret_m);
/* Under the lock: re-reads state.json if it changed (nvsim set). */
void sim_cu_refresh(void);
/* The "GPU-..." or "MIG-..." UUID of a visible device. */
const char *sim_cu_uuid(CUdevice dev);

#endif
