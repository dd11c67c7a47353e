/* CUDA error names and descriptions shared by the simulated libcuda.so.1 (cuGetErrorName,
 * cuGetErrorString) and nvsim (`nvsim set cuda.alloc=fail:NAME`). */
#ifndef SIM_CUDA_ERRORS_H
#define SIM_CUDA_ERRORS_H

/* "OUT_OF_MEMORY", "CUDA_ERROR_OUT_OF_MEMORY" or a number of a known error → its code;
 * -1 when unknown. */
int sim_cuda_error_from_name(const char *name);
/* "CUDA_ERROR_OUT_OF_MEMORY", or NULL for a code the simulator does not know. */
const char *sim_cuda_error_name(int code);
/* A short description, or NULL for an unknown code. */
const char *sim_cuda_error_string(int code);

#endif
