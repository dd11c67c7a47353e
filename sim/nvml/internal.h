/* Internals shared by the simulated NVML's source files: the one global library state, the
 * call prologue/epilogue every exported function goes through, and handle resolution.
 *
 * Every exported function: counts itself, takes the library lock (NVML is thread-safe),
 * re-reads state.json/procs if they changed, spins the configured latency, then checks
 * init, handle, lost GPU, MIG-handle support and injected errors, in that order. */
#ifndef SIM_NVML_INTERNAL_H
#define SIM_NVML_INTERNAL_H

#include "../functions.h"
#include "../nvml-sim-abi.h"
#include "../scenario.h"
#include "../state.h"

#include <pthread.h>
#include <sys/stat.h>

#define SIM_EXPORT __attribute__((visibility("default")))

/* A device handle: a GPU (mig = -1) or one of its MIG devices. Handles live in one array
 * allocated at init, so validating a handle is a range check, never a dereference. */
struct nvmlDevice_st {
	unsigned int gpu;
	int mig;
};

struct sim_lib {
	pthread_mutex_t lock;
	unsigned int init_count;       /* nvmlInit/nvmlShutdown reference count */
	char state_dir[4096];          /* "" = read-only NVSIM_SCENARIO mode */
	json_t *scenario_root;         /* the scenario document as loaded */
	struct sim_scenario *sc;       /* scenario with state.json's "set" merged */
	struct sim_dyn dyn;            /* state.json's lost/latency/fail facts */
	struct nvmlDevice_st *handles; /* n_gpus * (1 + SIM_MAX_MIG) */
	unsigned int n_gpus;
	const uint64_t *gen;          /* STATE_DIR/generation, mapped (NULL: stat on every call) */
	uint64_t gen_seen;            /* its value at the last re-read */
	unsigned long long restat_us; /* CLOCK_MONOTONIC_COARSE of the last stat() check */
	struct stat state_st;         /* last state.json seen (st_ino 0 = none) */
	struct stat procs_st;         /* last procs/ directory seen */
	struct sim_proc *procs;       /* registrations (liveness re-checked per use) */
	size_t n_procs;
	long long env_latency_us;              /* NVSIM_LATENCY_US, -1 = unset */
	long long lost_left[SIM_MAX_GPUS];     /* calls left before lost, -1 = not armed */
	long long lost_gen_seen[SIM_MAX_GPUS]; /* last lost_after_calls generation armed */
	bool lost_local[SIM_MAX_GPUS];         /* became lost in this process */
};

extern struct sim_lib sim_lib;

/* Accepted by a device call on a MIG handle. */
#define SIM_MIG_OK 1U

struct sim_call {
	const struct sim_gpu *g;          /* the GPU (parent for a MIG handle) */
	const struct sim_mig_instance *m; /* the MIG device or NULL */
	unsigned int gpu;
};

/* Prologue for calls without a device; returns with the lock held in every case. */
nvmlReturn_t sim_begin(enum sim_fn fn, bool need_init);
/* Prologue for device calls; fills c on success. The lock is held in every case. */
nvmlReturn_t sim_begin_dev(enum sim_fn fn, nvmlDevice_t dev, unsigned int flags,
                           struct sim_call *c);
/* Resolves a second handle (pair calls) under the lock: INVALID_ARGUMENT or GPU_IS_LOST. */
nvmlReturn_t sim_resolve(nvmlDevice_t dev, struct sim_call *c);
/* Whether this copy of the library exports fn (the variants' version scripts decide); a field
 * value answered by the same facts as fn is unknown to a variant without fn. */
bool sim_exported(enum sim_fn fn);
/* The error an nvsim fail rule injects into fn on GPU gpu (-1: no GPU), or SUCCESS. */
nvmlReturn_t sim_injected(enum sim_fn fn, int gpu);
/* Blocks while an `nvsim hang` rule matches (lock held on entry and return). */
void sim_hang_point(enum sim_fn fn, int gpu);
/* Epilogue: drops the lock and passes r through. */
nvmlReturn_t sim_end(nvmlReturn_t r);
/* Is this GPU lost (state.json or lost_after_calls in this process)? */
bool sim_gpu_lost(unsigned int gpu);
/* Copies s to a caller buffer of length len: INSUFFICIENT_SIZE when it does not fit. */
nvmlReturn_t sim_copy_string(char *buf, unsigned int len, const char *s);
/* Fills an nvmlPciInfo_t from a bus id string and device id. */
void sim_fill_pci(nvmlPciInfo_t *pci, const char *bus_id, unsigned int device_id);
/* Live registered processes' memory on the GPU (all its MIG devices) or one MIG device. */
unsigned long long sim_procs_bytes(const struct sim_gpu *g, const struct sim_mig_instance *m);
/* Sum of live registered processes' "util" on a whole GPU (percent, uncapped). */
unsigned int sim_procs_util(const struct sim_gpu *g);
/* CLOCK_MONOTONIC now, in microseconds: the CPU timestamps of violation counters. */
unsigned long long sim_now_us(void);
/* CLOCK_REALTIME now, in microseconds since the Unix epoch: the timestamps of process
 * utilisation samples, as the driver writes them. */
unsigned long long sim_epoch_us(void);
/* One NVLink's state as nvmlDeviceGetNvLinkState answers it (without its injected errors):
 * SUCCESS with *active, NOT_SUPPORTED for a link the GPU lacks, INVALID_ARGUMENT past any. */
nvmlReturn_t sim_nvlink_state(const struct sim_call *c, unsigned int link, bool *active);
/* The active NVLinks of c's GPU whose far end is an NVSwitch. */
unsigned int sim_nvswitch_links(const struct sim_call *c);
/* Writes the call counts since the last dump to calls/PID-SEQ.json and resets them. */
void sim_dump_calls(void);

/* Opens a device call: declares `c`, returns early (unlocking) on any prologue error. */
#define SIM_DEVICE_CALL(fn, dev, flags) SIM_DEVICE_CALL_FN(SIM_FN_##fn, dev, flags)
#define SIM_DEVICE_CALL_FN(fnid, dev, flags)                                                       \
	struct sim_call c;                                                                         \
	do {                                                                                       \
		nvmlReturn_t r_ = sim_begin_dev(fnid, dev, flags, &c);                             \
		if (r_ != NVML_SUCCESS)                                                            \
			return sim_end(r_);                                                        \
	} while (0)

#endif
