/* The state directory (NVSIM_STATE_DIR) shared by nvsim and the simulated libraries:
 *   scenario.json   the machine (copied by `nvsim exec`)
 *   state.json      dynamic overrides written by nvsim (format in sim/README.md)
 *   procs/PID.json  registered compute processes
 *   calls/PID-SEQ.json  call counts dumped by each process using the library
 *   hung/PID-TID.json  a call blocked now by a "hang" rule (removed when it goes on)
 *   kmsg, cuda/     reserved
 *   ledger.jsonl    nvsim-load's record of where each run ran
 * Writers replace files atomically (temp + fsync + rename); readers stat before re-reading. */
#ifndef SIM_STATE_H
#define SIM_STATE_H

#include "scenario.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define SIM_MAX_FAILS 256
#define SIM_MAX_PROCS 4096

/* One error-injection rule: function name (or "*"), NVML error, GPU index or -1 = any. */
struct sim_fail {
	char function[64];
	int error;
	int gpu;
};

/* One hang rule (`nvsim hang`): a call matching it blocks until the rule is gone. Same matching
 * as struct sim_fail: function name or "*", GPU index or -1 = any. */
struct sim_hang {
	char function[64];
	int gpu;
};

/* Per-GPU dynamic facts that are not scenario keys. */
struct sim_gpu_dyn {
	bool lost;
	long long lost_after_calls; /* -1 = not armed */
	long long lost_after_gen;   /* bumped by nvsim on every set, so a process re-arms */
	uint64_t nvlink_down;       /* bit N = link N down */
	/* NVLink error counters per link: DL replay, DL recovery, CRC flit, CRC data (NVML's
	 * nvmlNvLinkErrorCounter_t order); `nvsim set nvlink.N.replay=COUNT` and friends */
	unsigned long long nvlink_err[SIM_MAX_LINKS][4];
	int cuda_alloc;       /* enum sim_cuda_alloc: what cuMemAlloc does on this GPU */
	int cuda_alloc_error; /* the CUresult of SIM_CUDA_ALLOC_FAIL */
};

/* `nvsim set cuda.alloc=ok|fail[:ERROR]|hang`, read by the simulated libcuda.so.1. */
enum sim_cuda_alloc {
	SIM_CUDA_ALLOC_OK = 0,
	SIM_CUDA_ALLOC_FAIL = 1, /* cuMemAlloc returns cuda_alloc_error */
	SIM_CUDA_ALLOC_HANG = 2, /* cuMemAlloc never returns */
};

struct sim_dyn {
	long long latency_us; /* -1 = not set */
	struct sim_fail fails[SIM_MAX_FAILS];
	size_t n_fails;
	struct sim_hang hangs[SIM_MAX_FAILS];
	size_t n_hangs;
	struct sim_gpu_dyn gpus[SIM_MAX_GPUS];
};

/* One registration entry: a process on one GPU or MIG device. A process using several
 * devices has one entry per device (procs/PID.json's "devices" form, sim/README.md). */
struct sim_proc {
	pid_t pid;
	char uuid[96];
	unsigned long long used_bytes;
	unsigned int util; /* percent of GPU time it adds to utilization.gpu (0..100) */
};

int sim_read_file(const char *path, size_t max, char **ret, size_t *ret_len);
int sim_write_atomic(const char *path, const char *data, size_t len);
int sim_write_json_atomic(const char *path, json_t *v);
int sim_mkdir_p(const char *path);
int sim_rm_rf(const char *path);

/* Applies state.json's per-GPU "set" objects onto a copy of the scenario document. */
int sim_state_merge(json_t *scenario, json_t *state, json_t **ret);
/* Reads the non-scenario dynamic facts of state.json (NULL state = none). */
/* The names of the four NVLink error counters in state.json and nvsim keys. */
extern const char *const sim_nvlink_counter_names[4];
int sim_dyn_from_json(json_t *state, unsigned int n_gpus, struct sim_dyn *ret, char *err,
                      size_t errlen);
/* STATE_DIR/generation: a 64-bit counter that every writer of state.json and procs/ bumps after
 * its write, so the simulated NVML sees a change by reading shared memory instead of making two
 * stat() calls per NVML call. Bumps it (creating the file, mode 0666, when missing); -errno when
 * it cannot (the readers' periodic stat() still sees the change). */
int sim_gen_bump(const char *state_dir);
/* Maps the counter read-only (creating it when missing and the directory allows); NULL when it
 * cannot (then re-read by stat() on every call, as before). */
const uint64_t *sim_gen_map(const char *state_dir);

/* Registered processes whose PID is alive. */
int sim_procs_load(const char *dir, struct sim_proc **ret, size_t *ret_n);
bool sim_pid_alive(pid_t pid);

/* Sums calls/PID-SEQ.json files into {"total": N, "functions": {...}}. */
int sim_calls_aggregate(const char *dir, json_t **ret);

/* NVML error names ("GPU_IS_LOST", "NVML_ERROR_GPU_IS_LOST" or a number) and back. */
int sim_error_from_name(const char *name);
const char *sim_error_name(int code);

#endif
