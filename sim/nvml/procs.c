/* Simulated NVML: running compute processes, from the registrations in procs/ (nvsim proc
 * add, or the simulated CUDA later). A registration whose PID has died is skipped, as the
 * driver forgets a process when it exits. On a GPU handle the list holds the processes of
 * the GPU and of all its MIG devices (gpuInstanceId/computeInstanceId set for the latter,
 * 0xFFFFFFFF otherwise); on a MIG handle only that MIG device's.
 * Sizing follows NVML: *infoCount smaller than the number of processes (including a count-0
 * sizing call) gives INSUFFICIENT_SIZE with *infoCount set to the number needed.
 *
 * MIG and privilege: nvml.h says a MIG-enabled GPU's handle aggregates its MIG devices'
 * processes "only if the caller has appropriate privileges", and does not say what others get.
 * The simulator chooses NO_PERMISSION for a caller that is not root (or with
 * NVSIM_UNPRIVILEGED=1), so a client must use the MIG device handles, which answer anyone.
 *
 * Entry layouts of _v3: the first drivers of the R535 branch (NVML 12.2) wrote 32-byte entries from
 * _v3 (the v2 fields plus usedGpuCcProtectedMemory) and exported
 * nvmlDeviceGetConfComputeMemSizeInfo; later drivers went back to 24-byte entries and moved the
 * extra field to nvmlDeviceGetRunningProcessDetailList (NVIDIA's nvml.h history, as go-nvml's
 * generated header and nvitop's libnvml.py record it). The build/sim/r530/ variant exports
 * nvmlDeviceGetConfComputeMemSizeInfo and writes 32-byte entries, so the loader's detection of
 * that branch is tested (the variant's name, r530, is historical); the other variants keep it local
 * and write 24 bytes.
 *
 * Process utilisation (nvmlDeviceGetProcessUtilization) gives one sample per process of the
 * GPU-handle list above, stamped with the time of the call in microseconds since the Unix
 * epoch (CLOCK_REALTIME), as the driver stamps them (clients such as nvitop pass "now - 1 s"
 * in that clock as lastSeenTimeStamp): smUtil is
 * the registration's "util", the other engines 0. A sample is "new" when its stamp is after
 * lastSeenTimeStamp, so asking with the stamp of the previous answer gets the next samples;
 * nothing new is NOT_FOUND. Like GPU utilisation it is NOT_SUPPORTED while MIG is enabled,
 * and on MIG device handles. */
#include "internal.h"
#include "../util.h"

struct entry {
	unsigned int pid;
	unsigned long long bytes;
	unsigned int gi, ci;
	unsigned int util; /* the registration's "util", percent */
};

/* Collects the live processes of a GPU or MIG device; returns how many (at most max). */
static unsigned int collect(const struct sim_gpu *g, const struct sim_mig_instance *m,
                            struct entry *out, unsigned int max)
{
	unsigned int n = 0;

	for (size_t i = 0; i < sim_lib.n_procs; i++) {
		const struct sim_proc *p = &sim_lib.procs[i];
		struct entry e = {(unsigned int)p->pid, p->used_bytes, 0xFFFFFFFFU, 0xFFFFFFFFU,
		                  p->util};
		bool match = false;

		if (m) {
			match = strcmp(p->uuid, m->uuid) == 0;
			e.gi = m->gi;
			e.ci = m->ci;
		} else if (strcasecmp(p->uuid, g->uuid) == 0) {
			match = true;
		} else {
			for (unsigned int k = 0; k < g->mig_count && !match; k++)
				if (strcmp(p->uuid, g->mig[k].uuid) == 0) {
					match = true;
					e.gi = g->mig[k].gi;
					e.ci = g->mig[k].ci;
				}
		}
		if (!match || !sim_pid_alive(p->pid))
			continue;
		if (out && n < max)
			out[n] = e;
		n++;
	}
	return n;
}

unsigned long long sim_procs_bytes(const struct sim_gpu *g, const struct sim_mig_instance *m)
{
	unsigned long long sum = 0;
	struct entry *e;
	unsigned int n = collect(g, m, NULL, 0);

	if (!n)
		return 0;
	e = calloc(n, sizeof(*e));
	if (!e)
		return 0;
	n = collect(g, m, e, n);
	for (unsigned int i = 0; i < n; i++)
		sum += e[i].bytes;
	free(e);
	return sum;
}

unsigned int sim_procs_util(const struct sim_gpu *g)
{
	unsigned int sum = 0;

	for (size_t i = 0; i < sim_lib.n_procs; i++) {
		const struct sim_proc *p = &sim_lib.procs[i];
		if (strcasecmp(p->uuid, g->uuid) == 0 && sim_pid_alive(p->pid))
			sum += p->util;
	}
	return sum;
}

/* Whether the caller may see every process of a MIG-enabled GPU through its GPU handle: root,
 * unless NVSIM_UNPRIVILEGED=1 makes a root test behave as another user. */
static bool privileged(void)
{
	const char *e = getenv("NVSIM_UNPRIVILEGED");

	return geteuid() == 0 && !(e && strcmp(e, "1") == 0);
}

enum layout { V1, V2, V3_R530 };

/* The early-R535 entry: v2's fields, then the protected-memory count (32 bytes). */
struct process_info_r530 {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
	unsigned long long usedGpuCcProtectedMemory;
};

/* Whether this copy of the library is the R530 variant: it is when its own dynamic symbol
 * table exports nvmlDeviceGetConfComputeMemSizeInfo (the version scripts decide). */
static enum layout v3_layout(void)
{
	return sim_exported(SIM_FN_nvmlDeviceGetConfComputeMemSizeInfo) ? V3_R530 : V2;
}

static nvmlReturn_t list(enum sim_fn fn, nvmlDevice_t device, unsigned int *infoCount, void *infos,
                         enum layout layout)
{
	_cleanup_free_ struct entry *e = NULL;
	unsigned int n;

	SIM_DEVICE_CALL_FN(fn, device, SIM_MIG_OK);
	if (!infoCount)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if (!c.m && c.g->mig_enabled && !privileged())
		return sim_end(NVML_ERROR_NO_PERMISSION);
	n = collect(c.g, c.m, NULL, 0);
	if (*infoCount < n) {
		*infoCount = n;
		return sim_end(NVML_ERROR_INSUFFICIENT_SIZE);
	}
	if (n && !infos)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if (n) {
		e = calloc(n, sizeof(*e));
		if (!e)
			return sim_end(NVML_ERROR_MEMORY);
		n = collect(c.g, c.m, e, n);
	}
	for (unsigned int i = 0; i < n; i++) {
		if (layout == V1) {
			nvmlProcessInfo_v1_t *p = &((nvmlProcessInfo_v1_t *)infos)[i];
			p->pid = e[i].pid;
			p->usedGpuMemory = e[i].bytes;
		} else if (layout == V3_R530) {
			struct process_info_r530 *p = &((struct process_info_r530 *)infos)[i];
			p->pid = e[i].pid;
			p->usedGpuMemory = e[i].bytes;
			p->gpuInstanceId = e[i].gi;
			p->computeInstanceId = e[i].ci;
			p->usedGpuCcProtectedMemory = 0;
		} else {
			nvmlProcessInfo_v2_t *p = &((nvmlProcessInfo_v2_t *)infos)[i];
			p->pid = e[i].pid;
			p->usedGpuMemory = e[i].bytes;
			p->gpuInstanceId = e[i].gi;
			p->computeInstanceId = e[i].ci;
		}
	}
	*infoCount = n;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                unsigned int *infoCount,
                                                                nvmlProcessInfo_t *infos)
{
	return list(SIM_FN_nvmlDeviceGetComputeRunningProcesses_v3, device, infoCount, infos,
	            v3_layout());
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device,
                                                                unsigned int *infoCount,
                                                                nvmlProcessInfo_v2_t *infos)
{
	return list(SIM_FN_nvmlDeviceGetComputeRunningProcesses_v2, device, infoCount, infos, V2);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device,
                                                             unsigned int *infoCount,
                                                             nvmlProcessInfo_v1_t *infos)
{
	return list(SIM_FN_nvmlDeviceGetComputeRunningProcesses, device, infoCount, infos, V1);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                                        nvmlProcessUtilizationSample_t *utilization,
                                                        unsigned int *processSamplesCount,
                                                        unsigned long long lastSeenTimeStamp)
{
	_cleanup_free_ struct entry *e = NULL;
	unsigned long long now;
	unsigned int n;

	SIM_DEVICE_CALL(nvmlDeviceGetProcessUtilization, device, 0);
	if (!processSamplesCount)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if (c.g->mig_enabled)
		return sim_end(NVML_ERROR_NOT_SUPPORTED);
	now = sim_epoch_us();
	/* Every sample carries the same stamp: all are new, or none is. */
	n = now > lastSeenTimeStamp ? collect(c.g, NULL, NULL, 0) : 0;
	if (!n)
		return sim_end(NVML_ERROR_NOT_FOUND);
	if (!utilization || *processSamplesCount < n) {
		*processSamplesCount = n;
		return sim_end(NVML_ERROR_INSUFFICIENT_SIZE);
	}
	e = calloc(n, sizeof(*e));
	if (!e)
		return sim_end(NVML_ERROR_MEMORY);
	n = collect(c.g, NULL, e, n);
	for (unsigned int i = 0; i < n; i++) {
		utilization[i] = (nvmlProcessUtilizationSample_t){
		        .pid = e[i].pid,
		        .timeStamp = now,
		        .smUtil = e[i].util,
		};
	}
	*processSamplesCount = n;
	return sim_end(NVML_SUCCESS);
}

/* Graphics and MPS clients: the simulator registers compute processes only (procs/), so these
 * lists are empty, answered as NVML answers an empty list: SUCCESS with *infoCount 0 (a
 * count-0 sizing call included), on GPU and MIG handles alike. */
static nvmlReturn_t empty_list(enum sim_fn fn, nvmlDevice_t device, unsigned int *infoCount)
{
	SIM_DEVICE_CALL_FN(fn, device, SIM_MIG_OK);
	if (!infoCount)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	*infoCount = 0;
	return sim_end(NVML_SUCCESS);
}

/* One exported list of each name and entry type, all empty. */
#define SIM_EMPTY_LIST(name, entry)                                                                \
	SIM_EXPORT nvmlReturn_t name(nvmlDevice_t device, unsigned int *infoCount, entry *infos)   \
	{                                                                                          \
		(void)infos;                                                                       \
		return empty_list(SIM_FN_##name, device, infoCount);                               \
	}
SIM_EMPTY_LIST(nvmlDeviceGetGraphicsRunningProcesses_v3, nvmlProcessInfo_t)
SIM_EMPTY_LIST(nvmlDeviceGetGraphicsRunningProcesses_v2, nvmlProcessInfo_v2_t)
SIM_EMPTY_LIST(nvmlDeviceGetGraphicsRunningProcesses, nvmlProcessInfo_v1_t)
SIM_EMPTY_LIST(nvmlDeviceGetMPSComputeRunningProcesses_v3, nvmlProcessInfo_t)
SIM_EMPTY_LIST(nvmlDeviceGetMPSComputeRunningProcesses_v2, nvmlProcessInfo_v2_t)
SIM_EMPTY_LIST(nvmlDeviceGetMPSComputeRunningProcesses, nvmlProcessInfo_v1_t)
#undef SIM_EMPTY_LIST

/* Exported only by the r530 variant (see the top of this file); confidential computing is
 * never on in the simulator. */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetConfComputeMemSizeInfo(nvmlDevice_t device, void *memInfo)
{
	SIM_DEVICE_CALL(nvmlDeviceGetConfComputeMemSizeInfo, device, 0);
	if (!memInfo)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	return sim_end(NVML_ERROR_NOT_SUPPORTED);
}
