// SPDX-License-Identifier: MIT
/*
 * nvml.c: the NVML loader, the only code in gpuctl that knows NVML.
 *
 * Decisions:
 * - dlopen($GPUCTL_NVML_LIBRARY) when set (and nothing else then: an override that silently
 *   fell back to the system NVML would test the wrong library), else libnvidia-ml.so.1, else
 *   libnvidia-ml.so; RTLD_NOW | RTLD_LOCAL so NVML's symbols never leak into the process.
 * - One symbol table, typed by nvml-abi.h's function types. Versioned symbols resolve newest
 *   first at load time (_v3, _v2, plain); the name actually found is kept for messages. Only
 *   init, shutdown, error string, device count and handle by index are required.
 * - "Unavailable" (missing symbol, NOT_SUPPORTED, NOT_FOUND, NO_PERMISSION, FUNCTION_NOT_FOUND,
 *   DEPRECATED) leaves the field's valid bit clear and logs one debug line per (function,
 *   reason) per context. NOT_READY does too, and is not remembered: the field is asked for
 *   again at the next refresh. Neither is an NVML failure of the GPU (health's "nvml" check).
 *   GPU_IS_LOST marks that GPU lost and nothing more is read from it. Any other error leaves
 *   the field unavailable and logs one warning per (function, reason).
 * - Nothing is read twice in one snapshot, and calls that cannot succeed are not made: ECC
 *   counters only when ECC is on, retired pages only before Ampere, remapped rows only from
 *   Ampere on, MIG devices only with MIG enabled. Processes are read into a buffer large enough
 *   for the usual case, so the sizing call happens only when it is too small.
 * - PCI bus ids are rebuilt from domain/bus/device in NVML's 8-hex-digit-domain uppercase
 *   form ("00000000:07:00.0"), whatever form the driver version writes into busId.
 * - memory_used is nvmlMemory_v2's used (allocations, driver reservation excluded), as current
 *   nvidia-smi shows it; with only the v1 call it includes the reservation.
 * - NVLink: per GPU, as many links as NVML_FI_DEV_NVLINK_LINK_COUNT says it has, past links
 *   that answer NOT_SUPPORTED (disabled links can sit mid-range), else links 0..35 until
 *   INVALID_ARGUMENT; inactive links are skipped; a link whose far end is a GPU of this machine
 *   (remote PCI bus id) counts for that pair, a link into an NVSwitch counts as a switch link.
 *   Without nvmlDeviceGetNvLinkRemoteDeviceType a link to a bus id that is no GPU of ours is
 *   taken as a switch link (the only NVLink peers besides GPUs are NVSwitches and IBM NPUs,
 *   and NVLink-to-CPU POWER systems predate neither call).
 * - The loader reads and returns: it fills a snapshot with the facts NVML gives (through
 *   snapshot-internal.h's setters) and calls nothing that interprets them. What is derived from
 *   the facts (the pair bandwidth, topo.c) is filled by whoever assembles the snapshot
 *   (snapshot-take.c); XID events are returned raw (snapshot index, eventData) for xid-watch.c
 *   to decode into the XID list.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ctx.h"
#include "nss.h"
#include "nvml-abi.h"
#include "nvml-loader.h"
#include "snapshot-internal.h"
#include "util.h"

_Static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t layout");
_Static_assert(sizeof(nvmlPciInfo_v1_t) == 52, "nvmlPciInfo (v1) layout");
_Static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t layout");
_Static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t layout");
_Static_assert(sizeof(nvmlUtilization_t) == 8, "nvmlUtilization_t layout");
_Static_assert(sizeof(nvmlEventData_t) == 32, "nvmlEventData_t layout");
_Static_assert(sizeof(nvmlFieldValue_t) == 40, "nvmlFieldValue_t layout");
_Static_assert(sizeof(nvmlViolationTime_t) == 16, "nvmlViolationTime_t layout");
_Static_assert(sizeof(nvmlBAR1Memory_t) == 24, "nvmlBAR1Memory_t layout");
_Static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32,
               "nvmlProcessUtilizationSample_t layout");
_Static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "nvmlProcessInfo_v1_t layout");
_Static_assert(sizeof(nvmlProcessInfo_v2_t) == 24, "nvmlProcessInfo_v2_t layout");
_Static_assert(sizeof(nvmlProcessInfo_r530_t) == 32, "nvmlProcessInfo_r530_t layout");
_Static_assert(offsetof(nvmlProcessInfo_r530_t, computeInstanceId) ==
                       offsetof(nvmlProcessInfo_v2_t, computeInstanceId),
               "the 32-byte (early R535) entry starts with the v2 entry");

/* X(field, function type, required, names newest first...) */
#define NVML_SYMBOLS(X)                                                                            \
	X(init, nvml_fn_init_t, true, "nvmlInit_v2", "nvmlInit")                                   \
	X(shutdown, nvml_fn_shutdown_t, true, "nvmlShutdown")                                      \
	X(error_string, nvml_fn_error_string_t, true, "nvmlErrorString")                           \
	X(device_count, nvml_fn_get_count_t, true, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount")  \
	X(handle_by_index, nvml_fn_handle_by_index_t, true, "nvmlDeviceGetHandleByIndex_v2",       \
	  "nvmlDeviceGetHandleByIndex")                                                            \
	X(driver_version, nvml_fn_sys_string_t, false, "nvmlSystemGetDriverVersion")               \
	X(nvml_version, nvml_fn_sys_string_t, false, "nvmlSystemGetNVMLVersion")                   \
	X(cuda_version, nvml_fn_sys_int_t, false, "nvmlSystemGetCudaDriverVersion_v2",             \
	  "nvmlSystemGetCudaDriverVersion")                                                        \
	X(uuid, nvml_fn_dev_string_t, false, "nvmlDeviceGetUUID")                                  \
	X(pci_info, nvml_fn_pci_info_t, false, "nvmlDeviceGetPciInfo_v3",                          \
	  "nvmlDeviceGetPciInfo_v2")                                                               \
	X(pci_info_v1, nvml_fn_pci_info_v1_t, false, "nvmlDeviceGetPciInfo")                       \
	X(name, nvml_fn_dev_string_t, false, "nvmlDeviceGetName")                                  \
	X(brand, nvml_fn_brand_t, false, "nvmlDeviceGetBrand")                                     \
	X(architecture, nvml_fn_arch_t, false, "nvmlDeviceGetArchitecture")                        \
	X(compute_cap, nvml_fn_cc_t, false, "nvmlDeviceGetCudaComputeCapability")                  \
	X(serial, nvml_fn_dev_string_t, false, "nvmlDeviceGetSerial")                              \
	X(minor_number, nvml_fn_dev_uint_t, false, "nvmlDeviceGetMinorNumber")                     \
	X(memory_v2, nvml_fn_memory_v2_t, false, "nvmlDeviceGetMemoryInfo_v2")                     \
	X(memory, nvml_fn_memory_t, false, "nvmlDeviceGetMemoryInfo")                              \
	X(utilization, nvml_fn_utilization_t, false, "nvmlDeviceGetUtilizationRates")              \
	X(temperature, nvml_fn_temperature_t, false, "nvmlDeviceGetTemperature")                   \
	X(temp_threshold, nvml_fn_temp_threshold_t, false, "nvmlDeviceGetTemperatureThreshold")    \
	X(power_usage, nvml_fn_dev_uint_t, false, "nvmlDeviceGetPowerUsage")                       \
	X(power_limit, nvml_fn_dev_uint_t, false, "nvmlDeviceGetEnforcedPowerLimit")               \
	X(power_mgmt_limit, nvml_fn_dev_uint_t, false, "nvmlDeviceGetPowerManagementLimit")        \
	X(fan_speed, nvml_fn_dev_uint_t, false, "nvmlDeviceGetFanSpeed")                           \
	X(pstate, nvml_fn_dev_uint_t, false, "nvmlDeviceGetPerformanceState")                      \
	X(clock, nvml_fn_clock_t, false, "nvmlDeviceGetClockInfo")                                 \
	X(max_clock, nvml_fn_clock_t, false, "nvmlDeviceGetMaxClockInfo")                          \
	X(clocks_event, nvml_fn_dev_ull_t, false, "nvmlDeviceGetCurrentClocksEventReasons",        \
	  "nvmlDeviceGetCurrentClocksThrottleReasons")                                             \
	X(pcie_gen, nvml_fn_dev_uint_t, false, "nvmlDeviceGetCurrPcieLinkGeneration")              \
	X(pcie_gen_max, nvml_fn_dev_uint_t, false, "nvmlDeviceGetMaxPcieLinkGeneration")           \
	X(pcie_width, nvml_fn_dev_uint_t, false, "nvmlDeviceGetCurrPcieLinkWidth")                 \
	X(pcie_width_max, nvml_fn_dev_uint_t, false, "nvmlDeviceGetMaxPcieLinkWidth")              \
	X(pcie_replay, nvml_fn_dev_uint_t, false, "nvmlDeviceGetPcieReplayCounter")                \
	X(encoder_util, nvml_fn_dev_uint2_t, false, "nvmlDeviceGetEncoderUtilization")             \
	X(decoder_util, nvml_fn_dev_uint2_t, false, "nvmlDeviceGetDecoderUtilization")             \
	X(energy, nvml_fn_dev_ull_t, false, "nvmlDeviceGetTotalEnergyConsumption")                 \
	X(persistence, nvml_fn_enable_state_t, false, "nvmlDeviceGetPersistenceMode")              \
	X(compute_mode, nvml_fn_compute_mode_t, false, "nvmlDeviceGetComputeMode")                 \
	X(ecc_mode, nvml_fn_ecc_mode_t, false, "nvmlDeviceGetEccMode")                             \
	X(mig_mode, nvml_fn_dev_uint2_t, false, "nvmlDeviceGetMigMode")                            \
	X(total_ecc, nvml_fn_total_ecc_t, false, "nvmlDeviceGetTotalEccErrors")                    \
	X(retired_pages, nvml_fn_retired_pages_t, false, "nvmlDeviceGetRetiredPages")              \
	X(retired_pending, nvml_fn_enable_state_t, false,                                          \
	  "nvmlDeviceGetRetiredPagesPendingStatus")                                                \
	X(remapped_rows, nvml_fn_remapped_rows_t, false, "nvmlDeviceGetRemappedRows")              \
	X(cpu_affinity, nvml_fn_cpu_affinity_t, false, "nvmlDeviceGetCpuAffinity")                 \
	X(memory_affinity, nvml_fn_memory_affinity_t, false, "nvmlDeviceGetMemoryAffinity")        \
	X(numa_node_id, nvml_fn_dev_uint_t, false, "nvmlDeviceGetNumaNodeId")                      \
	X(max_mig_count, nvml_fn_dev_uint_t, false, "nvmlDeviceGetMaxMigDeviceCount")              \
	X(mig_handle, nvml_fn_mig_handle_t, false, "nvmlDeviceGetMigDeviceHandleByIndex")          \
	X(gpu_instance_id, nvml_fn_dev_uint_t, false, "nvmlDeviceGetGpuInstanceId")                \
	X(compute_instance_id, nvml_fn_dev_uint_t, false, "nvmlDeviceGetComputeInstanceId")        \
	X(procs_v2, nvml_fn_procs_v2_t, false, "nvmlDeviceGetComputeRunningProcesses_v3",          \
	  "nvmlDeviceGetComputeRunningProcesses_v2")                                               \
	X(procs_v1, nvml_fn_procs_v1_t, false, "nvmlDeviceGetComputeRunningProcesses")             \
	X(common_ancestor, nvml_fn_common_ancestor_t, false,                                       \
	  "nvmlDeviceGetTopologyCommonAncestor")                                                   \
	X(p2p_status, nvml_fn_p2p_status_t, false, "nvmlDeviceGetP2PStatus")                       \
	X(nvlink_state, nvml_fn_nvlink_state_t, false, "nvmlDeviceGetNvLinkState")                 \
	X(nvlink_remote_type, nvml_fn_nvlink_remote_type_t, false,                                 \
	  "nvmlDeviceGetNvLinkRemoteDeviceType")                                                   \
	X(nvlink_remote_pci, nvml_fn_nvlink_remote_pci_t, false,                                   \
	  "nvmlDeviceGetNvLinkRemotePciInfo_v2")                                                   \
	X(nvlink_remote_pci_v1, nvml_fn_nvlink_remote_pci_v1_t, false,                             \
	  "nvmlDeviceGetNvLinkRemotePciInfo")                                                      \
	X(field_values, nvml_fn_field_values_t, false, "nvmlDeviceGetFieldValues")                 \
	X(violation, nvml_fn_violation_t, false, "nvmlDeviceGetViolationStatus")                   \
	X(bar1, nvml_fn_bar1_t, false, "nvmlDeviceGetBAR1MemoryInfo")                              \
	X(pcie_throughput, nvml_fn_pcie_throughput_t, false, "nvmlDeviceGetPcieThroughput")        \
	X(process_util, nvml_fn_process_util_t, false, "nvmlDeviceGetProcessUtilization")          \
	X(nvlink_error_counter, nvml_fn_nvlink_error_counter_t, false,                             \
	  "nvmlDeviceGetNvLinkErrorCounter")                                                       \
	X(supported_events, nvml_fn_dev_ull_t, false, "nvmlDeviceGetSupportedEventTypes")          \
	X(event_set_create, nvml_fn_event_set_create_t, false, "nvmlEventSetCreate")               \
	X(register_events, nvml_fn_register_events_t, false, "nvmlDeviceRegisterEvents")           \
	X(event_set_wait, nvml_fn_event_set_wait_t, false, "nvmlEventSetWait_v2")                  \
	X(event_set_free, nvml_fn_event_set_free_t, false, "nvmlEventSetFree")

/* The resolved functions, each typed; NULL when the library lacks every name. */
struct nvml_syms {
#define X(field, type, req, ...) type *field;
	NVML_SYMBOLS(X)
#undef X
};

/* The name each entry resolved to (or its newest name when missing), for messages. */
struct nvml_names {
#define X(field, type, req, ...) const char *field;
	NVML_SYMBOLS(X)
#undef X
};

struct nvml {
	void *dl;               /* dlopen handle */
	char *path;             /* where the dynamic linker found the library, or NULL */
	bool initialised;       /* nvmlInit succeeded: call nvmlShutdown on unload */
	struct nvml_syms sym;   /* function table */
	struct nvml_names name; /* names for messages */
	size_t procs_stride; /* bytes per entry written by sym.procs_v2 (24, or 32 on early R535) */
	nvmlDevice_t *handles; /* per NVML index, from the last snapshot (NULL: none had one) */
	size_t n_handles;      /* entries in handles */
};

/* unloads NVML (nvmlShutdown + dlclose); the context's nvml_free. Accepts NULL. */
static void nvml_unload(struct nvml *nv)
{
	if (!nv)
		return;
	if (nv->initialised && nv->sym.shutdown)
		(void)nv->sym.shutdown();
	if (nv->dl)
		(void)dlclose(nv->dl);
	free(nv->handles);
	free(nv->path);
	free(nv);
}

/* ---- The call in flight (gpuctl_nvml_call_in_flight) ----
 *
 * Decisions:
 * - A call that does not return cannot be cancelled, so the library only says which call is in
 *   flight, about which GPU, since when; what to do about it (give up, mark readings stale) is
 *   for another thread of the caller to decide: the CLI's watchdog (src/cli/watchdog.c), a
 *   sampler's owner. The library prints nothing and exits never, here as elsewhere.
 * - Cheap, because every NVML call pays it (the simulator counts NVML calls, bench/ system
 *   calls): a few relaxed atomic stores around the call and one clock_gettime of
 *   CLOCK_MONOTONIC_COARSE (the vDSO: no system call; a few milliseconds coarse, nothing beside
 *   a bound in seconds). No lock, no allocation, no NVML call.
 * - The GPU's PCI bus id is copied from the snapshot being filled when it was read already
 *   (nvmlDeviceGetPciInfo comes early, just after the UUID); a reader never follows a pointer
 *   into a snapshot that the calling thread may free.
 * - Recorded: every call made for a snapshot or a refresh, nvmlInit, the XID event set's
 *   set-up. Not recorded: nvmlErrorString (a table lookup); nvmlEventSetWait, which blocks for
 *   as long as it is asked to; nvmlEventSetFree and nvmlShutdown, made by the _free
 *   functions, which take no context (nvmlShutdown by gpuctl_ctx_free: its context is gone when
 *   it returns, so a caller bounds gpuctl_ctx_free itself if it wants to).
 */

#define CALL_NO_GPU UINT64_MAX /* ctx_nvml_call.gpu of a call about no GPU */

/* Records fn as in flight on ctx, about NVML index gpu (CALL_NO_GPU: none) whose PCI bus id is
 * bus (NULL: not known yet). */
static void call_begin(struct gpuctl_ctx *ctx, const char *fn, uint64_t gpu, const char *bus)
{
	struct ctx_nvml_call *c = &ctx->call;
	/* only this thread writes the record: a relaxed load reads its own last store */
	uint64_t s = atomic_load_explicit(&c->seq, memory_order_relaxed);
	uint64_t b[2] = {0, 0};
	struct timespec ts = {0, 0};

	if (bus)
		memcpy(b, bus, strnlen(bus, sizeof(b)));
	(void)clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	atomic_store_explicit(&c->seq, s + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&c->function, fn, memory_order_relaxed);
	atomic_store_explicit(&c->gpu, gpu, memory_order_relaxed);
	atomic_store_explicit(&c->pci_bus_id[0], b[0], memory_order_relaxed);
	atomic_store_explicit(&c->pci_bus_id[1], b[1], memory_order_relaxed);
	atomic_store_explicit(&c->since_ns, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec,
	                      memory_order_relaxed);
	atomic_store_explicit(&c->seq, s + 2, memory_order_release);
}

/* Marks the call begun last as answered; returns r, so it wraps the call's expression. */
static nvmlReturn_t call_end(struct gpuctl_ctx *ctx, nvmlReturn_t r)
{
	struct ctx_nvml_call *c = &ctx->call;
	uint64_t s = atomic_load_explicit(&c->seq, memory_order_relaxed);

	atomic_store_explicit(&c->seq, s + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&c->function, NULL, memory_order_relaxed);
	atomic_store_explicit(&c->seq, s + 2, memory_order_release);
	return r;
}

int gpuctl_nvml_call_in_flight(const struct gpuctl_ctx *ctx, struct gpuctl_nvml_call *ret_call)
{
	const struct ctx_nvml_call *c;
	struct gpuctl_nvml_call out = {.struct_size = sizeof(out), .gpu = -1};
	const char *fn = NULL;
	uint64_t gpu = CALL_NO_GPU, b[2] = {0, 0};
	int64_t since = 0;
	bool stable = false;
	struct timespec ts = {0, 0};

	if (!ctx || !ret_call ||
	    ret_call->struct_size < STRUCT_SIZE_MIN(struct gpuctl_nvml_call, seconds))
		return -EINVAL;
	c = &ctx->call;
	/* The writer holds seq odd for a few stores only, so a handful of tries always does;
	 * the bound keeps a reader from spinning should the writing thread be descheduled. */
	for (int tries = 0; tries < 100000 && !stable; tries++) {
		uint64_t s1 = atomic_load_explicit(&c->seq, memory_order_acquire);

		if (s1 & 1)
			continue;
		fn = atomic_load_explicit(&c->function, memory_order_relaxed);
		gpu = atomic_load_explicit(&c->gpu, memory_order_relaxed);
		b[0] = atomic_load_explicit(&c->pci_bus_id[0], memory_order_relaxed);
		b[1] = atomic_load_explicit(&c->pci_bus_id[1], memory_order_relaxed);
		since = atomic_load_explicit(&c->since_ns, memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		stable = atomic_load_explicit(&c->seq, memory_order_relaxed) == s1;
	}
	if (!stable)
		return -EAGAIN;
	if (!fn)
		return 0;
	_Static_assert(sizeof(out.pci_bus_id) > sizeof(b), "room for the bus id and its NUL");
	out.function = fn;
	out.gpu = gpu == CALL_NO_GPU || gpu > INT_MAX ? -1 : (int)gpu;
	memcpy(out.pci_bus_id, b, sizeof(b));
	(void)clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	out.seconds = now > since ? (double)(now - since) / 1e9 : 0.0;
	struct_fill(ret_call, &out, sizeof(out));
	return 1;
}

/* Looks the names up newest first; writes the function (via memcpy: ISO C has no cast from
 * object to function pointer) and the name used. */
static bool resolve_one(struct gpuctl_ctx *ctx, void *dl, const char *const *names, void *ret_fn,
                        const char **ret_name)
{
	for (size_t i = 0; names[i]; i++) {
		void *p = dlsym(dl, names[i]);

		if (!p)
			continue;
		memcpy(ret_fn, &p, sizeof(p));
		*ret_name = names[i];
		if (i > 0)
			ctx_log(ctx, GPUCTL_LOG_DEBUG, "%s: not in this NVML library, using %s",
			        names[0], names[i]);
		return true;
	}
	*ret_name = names[0];
	return false;
}

/* Fills the table; returns the first missing required name, or NULL. */
static const char *resolve_all(struct gpuctl_ctx *ctx, struct nvml *nv)
{
	const char *missing = NULL;

#define X(field, type, req, ...)                                                                   \
	do {                                                                                       \
		static const char *const names_[] = {__VA_ARGS__, NULL};                           \
		if (!resolve_one(ctx, nv->dl, names_, &nv->sym.field, &nv->name.field) && (req) && \
		    !missing)                                                                      \
			missing = names_[0];                                                       \
	} while (0);
	NVML_SYMBOLS(X)
#undef X
	return missing;
}

/* True for an early R535-branch driver (NVML 12.2), whose _v3 process list has 32-byte entries (see
 * nvmlProcessInfo_r530_t in nvml-abi.h). */
static bool procs_v3_is_r530(const struct nvml *nv)
{
	return nv->sym.procs_v2 &&
	       streq(nv->name.procs_v2, "nvmlDeviceGetComputeRunningProcesses_v3") &&
	       dlsym(nv->dl, "nvmlDeviceGetConfComputeMemSizeInfo") &&
	       !dlsym(nv->dl, "nvmlDeviceGetRunningProcessDetailList");
}

static char *linkmap_path(void *dl)
{
	struct link_map *lm = NULL;

	if (dlinfo(dl, RTLD_DI_LINKMAP, &lm) < 0 || !lm || !lm->l_name || !lm->l_name[0])
		return NULL;
	return strdup(lm->l_name);
}

int gpuctl_nvml_load(struct gpuctl_ctx *ctx)
{
	static const char *const sonames[] = {"libnvidia-ml.so.1", "libnvidia-ml.so"};
	_cleanup_free_ struct nvml *nv = NULL;
	const char *env, *missing, *shown;
	nvmlReturn_t r;

	if (!ctx)
		return -EINVAL;
	if (ctx->nvml)
		return 0;
	nv = calloc(1, sizeof(*nv));
	if (!nv)
		return ctx_error(ctx, -ENOMEM, "out of memory");

	env = secure_getenv("GPUCTL_NVML_LIBRARY");
	if (env && env[0]) {
		struct stat st;

		/* dlopen() of a FIFO blocks for ever: a path names a regular file (or a link to
		 * one), a bare name is the loader's search */
		if (strchr(env, '/') && stat(env, &st) == 0 && !S_ISREG(st.st_mode))
			return ctx_error(ctx, -EPERM,
			                 "GPUCTL_NVML_LIBRARY '%s': not a regular file", env);
		nv->dl = dlopen(env, RTLD_NOW | RTLD_LOCAL);
		if (!nv->dl) {
			if (access(env, F_OK) < 0)
				return ctx_error(ctx, -ENOENT,
				                 "no NVIDIA driver: %s not found (set by "
				                 "GPUCTL_NVML_LIBRARY)",
				                 env);
			return ctx_error(ctx, -ENOEXEC, "'%s' is not an NVML library: %s", env,
			                 dlerror());
		}
		shown = env;
	} else {
		for (size_t i = 0; i < ELEMENTSOF(sonames) && !nv->dl; i++)
			nv->dl = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
		if (!nv->dl)
			return ctx_error(ctx, -ENOENT,
			                 "no NVIDIA driver: libnvidia-ml.so.1 not found (set "
			                 "GPUCTL_NVML_LIBRARY to use another library)");
		shown = sonames[0];
	}
	nv->path = linkmap_path(nv->dl);
	if (nv->path)
		shown = nv->path;

	missing = resolve_all(ctx, nv);
	nv->procs_stride = procs_v3_is_r530(nv) ? sizeof(nvmlProcessInfo_r530_t)
	                                        : sizeof(nvmlProcessInfo_v2_t);
	if (missing) {
		int e = ctx_error(ctx, -ENOEXEC, "'%s' is not an NVML library (it lacks %s)", shown,
		                  missing);
		nvml_unload(TAKE_PTR(nv));
		return e;
	}
	call_begin(ctx, nv->name.init, CALL_NO_GPU, NULL);
	r = call_end(ctx, nv->sym.init());
	if (r != NVML_SUCCESS) {
		const char *why = nv->sym.error_string(r);
		int e = ctx_error(ctx, -ENODEV, "NVML cannot initialise: %s (%s)",
		                  why ? why : "unknown error", shown);
		nvml_unload(TAKE_PTR(nv));
		return e;
	}
	nv->initialised = true;
	ctx_log(ctx, GPUCTL_LOG_DEBUG, "nvml: loaded %s", shown);
	ctx->nvml = TAKE_PTR(nv);
	ctx->nvml_free = nvml_unload;
	return 0;
}

const char *gpuctl_nvml_library_path(const struct gpuctl_ctx *ctx)
{
	return ctx && ctx->nvml ? ctx->nvml->path : NULL;
}

int gpuctl_library_locate(const char *soname, char **ret_path)
{
	void *dl;
	char *path;

	if (!soname || !soname[0] || !ret_path)
		return -EINVAL;
	dl = dlopen(soname, RTLD_LAZY | RTLD_LOCAL);
	if (!dl)
		return -ENOENT;
	path = linkmap_path(dl);
	(void)dlclose(dl);
	if (!path)
		return -ENOMEM;
	*ret_path = path;
	return 0;
}

/* ---- Reading a snapshot ---- */

#define SYSTEM_SCOPE SIZE_MAX /* "gpu" argument of calls that are about no GPU */

_Static_assert(GPUCTL__F_COUNT <= 64, "the field mask has one bit per field");

struct reader {
	struct gpuctl_ctx *ctx;       /* for logs */
	struct nvml *nv;              /* loaded NVML */
	struct gpuctl_snapshot *snap; /* being filled */
	nvmlDevice_t *handles;        /* per GPU; NULL when no handle could be had */
	uint64_t want;                /* per-GPU fields to read: bit (1 << field) */
	unsigned flags;               /* the snapshot's gpuctl_snapshot_flags */
	unsigned calls;               /* NVML calls made for this snapshot */
	int oom;                      /* -ENOMEM once an allocation failed, else 0 */
	int *nvlink_count;            /* per GPU, NVLinks present: -1 unknown, -2 not asked yet
	                               * (read with the other field values; NULL: no NVLink
	                               * walk) */
	uint64_t reading;             /* the fields the call in flight reads (READ): a real error
	                               * marks them unreadable */
	bool reading_nvlink;          /* the call in flight reads an NVLink health fact (a link's
	                               * state, the first active link's far end): the same */
};

static const char *unavailable_reason(nvmlReturn_t r)
{
	switch (r) {
	case NVML_ERROR_NOT_SUPPORTED:
		return "not supported";
	case NVML_ERROR_NOT_FOUND:
		return "not found";
	case NVML_ERROR_NO_PERMISSION:
		return "no permission";
	case NVML_ERROR_FUNCTION_NOT_FOUND:
		return "not implemented by this driver";
	case NVML_ERROR_DEPRECATED:
		return "deprecated by this driver";
	default:
		return NULL;
	}
}

static const char *where(size_t gpu, char *buf, size_t size)
{
	if (gpu == SYSTEM_SCOPE)
		return "this system";
	(void)snprintf(buf, size, "GPU %zu", gpu);
	return buf;
}

/* Handles a result. GPU_IS_LOST marks gpu lost unless pair is set (a pair call does not say
 * which GPU is gone). Returns true on success. */
static bool check_result(struct reader *rd, size_t gpu, const char *fname, nvmlReturn_t r,
                         bool pair)
{
	char key[160], w[32];
	const char *reason;

	if (r == NVML_SUCCESS)
		return true;
	(void)snprintf(key, sizeof(key), "%s:%d", fname, (int)r);
	if (r == NVML_ERROR_GPU_IS_LOST && gpu != SYSTEM_SCOPE && !pair) {
		snapshot_set_lost(rd->snap, gpu);
		(void)snprintf(key, sizeof(key), "lost:%zu", gpu);
		ctx_log_once(rd->ctx, key, GPUCTL_LOG_WARNING,
		             "GPU %zu is lost (%s: GPU is lost); its other facts are unavailable",
		             gpu, fname);
		return false;
	}
	if (r == NVML_ERROR_NOT_READY) {
		/* The driver has no answer yet (a GPU still initialising, a counter not yet
		 * sampled): no fault of the GPU, and not lasting either, so it is asked again by
		 * the next refresh instead of being remembered as unsupported. */
		ctx_log_once(rd->ctx, key, GPUCTL_LOG_DEBUG, "%s: not ready on %s; shown as N/A",
		             fname, where(gpu, w, sizeof(w)));
		if (gpu != SYSTEM_SCOPE && !pair && gpu < rd->snap->n_gpus)
			rd->snap->gpus[gpu].nvml_not_ready++;
		return false;
	}
	reason = unavailable_reason(r);
	if (reason) {
		ctx_log_once(rd->ctx, key, GPUCTL_LOG_DEBUG, "%s: %s on %s; shown as N/A", fname,
		             reason, where(gpu, w, sizeof(w)));
		return false;
	}
	const char *s = rd->nv->sym.error_string(r);
	ctx_log_once(rd->ctx, key, GPUCTL_LOG_WARNING, "%s: %s (NVML error %d) on %s; shown as N/A",
	             fname, s ? s : "unknown error", (int)r, where(gpu, w, sizeof(w)));
	/* Recorded on the fields the call was to read (the health check's "nvml" judges those of
	 * its facts); a pair call does not say which of its GPUs failed. */
	if (gpu != SYSTEM_SCOPE && !pair && gpu < rd->snap->n_gpus) {
		char why[160];

		rd->snap->gpus[gpu].nvml_errors++;
		(void)snprintf(why, sizeof(why), "%s: %s", fname, s ? s : "unknown error");
		if ((rd->reading & rd->want) &&
		    snapshot_set_unreadable(rd->snap, gpu, rd->reading & rd->want, why) < 0)
			rd->oom = -ENOMEM;
		if (rd->reading_nvlink && snapshot_set_nvlink_unreadable(rd->snap, gpu, why) < 0)
			rd->oom = -ENOMEM;
	}
	return false;
}

static bool symbol_missing(struct reader *rd, const char *fname)
{
	char key[160];

	(void)snprintf(key, sizeof(key), "%s:missing", fname);
	ctx_log_once(rd->ctx, key, GPUCTL_LOG_DEBUG, "%s: not in this NVML library; shown as N/A",
	             fname);
	return false;
}

static bool gpu_readable(const struct reader *rd, size_t gpu)
{
	return gpu == SYSTEM_SCOPE || (rd->handles[gpu] && !rd->snap->gpus[gpu].lost);
}

/* call_begin for a reader's call about gpu, with the bus id the snapshot has for it so far. */
static void reader_call_begin(const struct reader *rd, size_t gpu, const char *fn)
{
	const char *bus = NULL;

	if (gpu != SYSTEM_SCOPE && rd->snap && gpu < rd->snap->n_gpus &&
	    rd->snap->gpus[gpu].valid[GPUCTL_F_PCI_BUS_ID])
		bus = rd->snap->gpus[gpu].strs[GPUCTL_F_PCI_BUS_ID];
	call_begin(rd->ctx, fn, gpu == SYSTEM_SCOPE ? CALL_NO_GPU : (uint64_t)gpu, bus);
}

/* Raw call: records it in flight, counts it, returns NVML's code (the symbol must be
 * present). gpu: the GPU it is about (SYSTEM_SCOPE for none). */
#define RAW(rd, gpu, fn, ...)                                                                      \
	(reader_call_begin((rd), (gpu), (rd)->nv->name.fn), (rd)->calls++,                         \
	 call_end((rd)->ctx, (rd)->nv->sym.fn(__VA_ARGS__)))

/* Calls NVML function `fn` for GPU `gpu` (SYSTEM_SCOPE for none) and checks the result:
 * true on success. Nothing is called for a lost GPU or a missing symbol. */
#define CALL(rd, gpu, fn, ...)                                                                     \
	(!gpu_readable((rd), (gpu)) ? false                                                        \
	 : !(rd)->nv->sym.fn        ? symbol_missing((rd), (rd)->nv->name.fn)                      \
	                            : check_result((rd), (gpu), (rd)->nv->name.fn,                 \
	                                           RAW((rd), (gpu), fn, __VA_ARGS__), false))

#define FBIT(f) (UINT64_C(1) << (f))

#define PCI_FIELDS (FBIT(GPUCTL_F_PCI_BUS_ID) | FBIT(GPUCTL_F_PCI_DEVICE_ID))

/* Ends a read (READ): the next call is for no field unless it says so. */
static bool read_done(struct reader *rd, bool ok)
{
	rd->reading = 0;
	return ok;
}

/* CALL for a read of the fields in mask (FBIT of each) of GPU gpu: a real error marks them
 * unreadable (snapshot_set_unreadable), which is not the same as unavailable. */
#define READ(rd, gpu, mask, fn, ...)                                                               \
	((rd)->reading = (mask), read_done((rd), CALL((rd), (gpu), fn, __VA_ARGS__)))

/* Whether the caller asked for field f (gpuctl_snapshot_take_fields). Fields that one NVML call
 * answers together (memory total/used/free, ...) are read when any of them is wanted. */
static bool want(const struct reader *rd, enum gpuctl_field f)
{
	return rd->want >> f & 1u;
}

static void set_int(struct reader *rd, size_t gpu, enum gpuctl_field f, int64_t v)
{
	(void)snapshot_set_int(rd->snap, gpu, f, v);
}

static void set_str(struct reader *rd, size_t gpu, enum gpuctl_field f, const char *s)
{
	if (snapshot_set_str(rd->snap, gpu, f, s) == -ENOMEM)
		rd->oom = -ENOMEM;
}

static const char *brand_name(nvmlBrandType_t b)
{
	static const char *const names[] = {
	        [NVML_BRAND_UNKNOWN] = "Unknown",
	        [NVML_BRAND_QUADRO] = "Quadro",
	        [NVML_BRAND_TESLA] = "Tesla",
	        [NVML_BRAND_NVS] = "NVS",
	        [NVML_BRAND_GRID] = "GRID",
	        [NVML_BRAND_GEFORCE] = "GeForce",
	        [NVML_BRAND_TITAN] = "Titan",
	        [NVML_BRAND_NVIDIA_VAPPS] = "NVIDIA Virtual Applications",
	        [NVML_BRAND_NVIDIA_VPC] = "NVIDIA Virtual PC",
	        [NVML_BRAND_NVIDIA_VCS] = "NVIDIA Virtual Compute Server",
	        [NVML_BRAND_NVIDIA_VWS] = "NVIDIA RTX Virtual Workstation",
	        [NVML_BRAND_NVIDIA_CLOUD_GAMING] = "NVIDIA Cloud Gaming",
	        [NVML_BRAND_QUADRO_RTX] = "Quadro RTX",
	        [NVML_BRAND_NVIDIA_RTX] = "NVIDIA RTX",
	        [NVML_BRAND_NVIDIA] = "NVIDIA",
	        [NVML_BRAND_GEFORCE_RTX] = "GeForce RTX",
	        [NVML_BRAND_TITAN_RTX] = "Titan RTX",
	};

	return b < ELEMENTSOF(names) ? names[b] : "Unknown";
}

static const char *architecture_name(nvmlDeviceArchitecture_t a)
{
	switch (a) {
	case NVML_DEVICE_ARCH_KEPLER:
		return "Kepler";
	case NVML_DEVICE_ARCH_MAXWELL:
		return "Maxwell";
	case NVML_DEVICE_ARCH_PASCAL:
		return "Pascal";
	case NVML_DEVICE_ARCH_VOLTA:
		return "Volta";
	case NVML_DEVICE_ARCH_TURING:
		return "Turing";
	case NVML_DEVICE_ARCH_AMPERE:
		return "Ampere";
	case NVML_DEVICE_ARCH_ADA:
		return "Ada";
	case NVML_DEVICE_ARCH_HOPPER:
		return "Hopper";
	case NVML_DEVICE_ARCH_BLACKWELL:
		return "Blackwell";
	default:
		return NULL;
	}
}

static void format_bus_id(char *buf, size_t size, uint32_t domain, uint32_t bus, uint32_t device)
{
	(void)snprintf(buf, size, "%08X:%02X:%02X.0", domain, bus & 0xff, device & 0x1f);
}

/* Memory of a GPU or MIG device: _v2 first, v1 when _v2 is absent or refused. */
static bool read_memory(struct reader *rd, size_t gpu, nvmlDevice_t dev, int64_t *total,
                        int64_t *used, int64_t *freeb)
{
	if (rd->nv->sym.memory_v2 && gpu_readable(rd, gpu)) {
		nvmlMemory_v2_t m = {.version = NVML_MEMORY_V2_VERSION};
		nvmlReturn_t r = RAW(rd, gpu, memory_v2, dev, &m);

		if (r == NVML_SUCCESS) {
			*total = (int64_t)m.total;
			*used = (int64_t)m.used;
			*freeb = (int64_t)m.free;
			return true;
		}
		if (!rd->nv->sym.memory || r == NVML_ERROR_GPU_IS_LOST)
			return check_result(rd, gpu, rd->nv->name.memory_v2, r, false);
	}
	nvmlMemory_t m = {0};
	if (!CALL(rd, gpu, memory, dev, &m))
		return false;
	*total = (int64_t)m.total;
	*used = (int64_t)m.used;
	*freeb = (int64_t)m.free;
	return true;
}

/* Reads the identity: handle (already there), UUID, PCI, name, brand, architecture, ... */
static void read_identity(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE + NVML_DEVICE_NAME_V2_BUFFER_SIZE];
	nvmlBrandType_t brand;
	nvmlDeviceArchitecture_t arch;
	int major, minor;
	unsigned u;

	buf[0] = '\0';
	if (want(rd, GPUCTL_F_UUID) &&
	    READ(rd, i, FBIT(GPUCTL_F_UUID), uuid, dev, buf, sizeof(buf)) && buf[0])
		set_str(rd, i, GPUCTL_F_UUID, buf);

	nvmlPciInfo_t pci = {0};
	nvmlPciInfo_v1_t pci1 = {0};
	bool have_pci = false;
	if (!want(rd, GPUCTL_F_PCI_BUS_ID) && !want(rd, GPUCTL_F_PCI_DEVICE_ID)) {
		/* neither asked for (a refresh) */
	} else if (rd->nv->sym.pci_info) {
		have_pci = READ(rd, i, PCI_FIELDS, pci_info, dev, &pci);
	} else if (READ(rd, i, PCI_FIELDS, pci_info_v1, dev, &pci1)) {
		have_pci = true;
		pci.domain = pci1.domain;
		pci.bus = pci1.bus;
		pci.device = pci1.device;
		pci.pciDeviceId = pci1.pciDeviceId;
	}
	if (have_pci) {
		format_bus_id(buf, sizeof(buf), pci.domain, pci.bus, pci.device);
		set_str(rd, i, GPUCTL_F_PCI_BUS_ID, buf);
		set_int(rd, i, GPUCTL_F_PCI_DEVICE_ID, pci.pciDeviceId);
	}

	buf[0] = '\0';
	if (want(rd, GPUCTL_F_NAME) &&
	    READ(rd, i, FBIT(GPUCTL_F_NAME), name, dev, buf, sizeof(buf)) && buf[0])
		set_str(rd, i, GPUCTL_F_NAME, buf);
	if (want(rd, GPUCTL_F_BRAND) && READ(rd, i, FBIT(GPUCTL_F_BRAND), brand, dev, &brand))
		set_str(rd, i, GPUCTL_F_BRAND, brand_name(brand));
	if (want(rd, GPUCTL_F_ARCHITECTURE) &&
	    READ(rd, i, FBIT(GPUCTL_F_ARCHITECTURE), architecture, dev, &arch) &&
	    architecture_name(arch))
		set_str(rd, i, GPUCTL_F_ARCHITECTURE, architecture_name(arch));
	if (want(rd, GPUCTL_F_COMPUTE_CAP) &&
	    READ(rd, i, FBIT(GPUCTL_F_COMPUTE_CAP), compute_cap, dev, &major, &minor)) {
		(void)snprintf(buf, sizeof(buf), "%d.%d", major, minor);
		set_str(rd, i, GPUCTL_F_COMPUTE_CAP, buf);
	}
	buf[0] = '\0';
	if (want(rd, GPUCTL_F_SERIAL) &&
	    READ(rd, i, FBIT(GPUCTL_F_SERIAL), serial, dev, buf, sizeof(buf)) && buf[0])
		set_str(rd, i, GPUCTL_F_SERIAL, buf);
	if (want(rd, GPUCTL_F_MINOR_NUMBER) &&
	    READ(rd, i, FBIT(GPUCTL_F_MINOR_NUMBER), minor_number, dev, &u))
		set_int(rd, i, GPUCTL_F_MINOR_NUMBER, u);
}

static void read_field_values(struct reader *rd, size_t i, nvmlDevice_t dev);

/* What only a monitor asks for: violation times (with NVML's timestamp of each reading, for
 * the percentage over an interval), BAR1, PCIe throughput (KB/s -> bytes/s). */
static void read_monitoring(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	static const struct {
		enum gpuctl_field f;
		nvmlPerfPolicyType_t policy;
	} viol[] = {
	        {GPUCTL_F_VIOLATION_POWER, NVML_PERF_POLICY_POWER},
	        {GPUCTL_F_VIOLATION_THERMAL, NVML_PERF_POLICY_THERMAL},
	};
	static const struct {
		enum gpuctl_field f;
		nvmlPcieUtilCounter_t counter;
	} pcie[] = {
	        {GPUCTL_F_PCIE_RX, NVML_PCIE_UTIL_RX_BYTES},
	        {GPUCTL_F_PCIE_TX, NVML_PCIE_UTIL_TX_BYTES},
	};
	nvmlBAR1Memory_t bar1;
	unsigned u;

	for (size_t k = 0; k < ELEMENTSOF(viol); k++) {
		nvmlViolationTime_t vt = {0};

		if (want(rd, viol[k].f) &&
		    READ(rd, i, FBIT(viol[k].f), violation, dev, viol[k].policy, &vt) &&
		    vt.violationTime <= INT64_MAX) {
			set_int(rd, i, viol[k].f, (int64_t)vt.violationTime);
			rd->snap->gpus[i].violation_ref_us[k] = vt.referenceTime;
		}
	}
	if ((want(rd, GPUCTL_F_BAR1_TOTAL) || want(rd, GPUCTL_F_BAR1_USED)) &&
	    READ(rd, i, FBIT(GPUCTL_F_BAR1_TOTAL) | FBIT(GPUCTL_F_BAR1_USED), bar1, dev, &bar1) &&
	    bar1.bar1Total <= INT64_MAX && bar1.bar1Used <= bar1.bar1Total) {
		set_int(rd, i, GPUCTL_F_BAR1_TOTAL, (int64_t)bar1.bar1Total);
		set_int(rd, i, GPUCTL_F_BAR1_USED, (int64_t)bar1.bar1Used);
	}
	for (size_t k = 0; k < ELEMENTSOF(pcie); k++)
		if (want(rd, pcie[k].f) &&
		    READ(rd, i, FBIT(pcie[k].f), pcie_throughput, dev, pcie[k].counter, &u))
			set_int(rd, i, pcie[k].f, (int64_t)u * 1024);
}

static void read_state(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	int64_t total, used, freeb;
	nvmlUtilization_t util;
	nvmlEnableState_t e1, e2;
	nvmlComputeMode_t cm;
	unsigned long long ull;
	unsigned u, u2;

	if (want(rd, GPUCTL_F_MEMORY_TOTAL) || want(rd, GPUCTL_F_MEMORY_USED) ||
	    want(rd, GPUCTL_F_MEMORY_FREE)) {
		rd->reading = FBIT(GPUCTL_F_MEMORY_TOTAL) | FBIT(GPUCTL_F_MEMORY_USED) |
		              FBIT(GPUCTL_F_MEMORY_FREE);
		if (read_done(rd, read_memory(rd, i, dev, &total, &used, &freeb))) {
			set_int(rd, i, GPUCTL_F_MEMORY_TOTAL, total);
			set_int(rd, i, GPUCTL_F_MEMORY_USED, used);
			set_int(rd, i, GPUCTL_F_MEMORY_FREE, freeb);
		}
	}
	if ((want(rd, GPUCTL_F_UTIL_GPU) || want(rd, GPUCTL_F_UTIL_MEMORY)) &&
	    READ(rd, i, FBIT(GPUCTL_F_UTIL_GPU) | FBIT(GPUCTL_F_UTIL_MEMORY), utilization, dev,
	         &util)) {
		set_int(rd, i, GPUCTL_F_UTIL_GPU, util.gpu);
		set_int(rd, i, GPUCTL_F_UTIL_MEMORY, util.memory);
	}
	if (want(rd, GPUCTL_F_TEMP) &&
	    READ(rd, i, FBIT(GPUCTL_F_TEMP), temperature, dev, NVML_TEMPERATURE_GPU, &u))
		set_int(rd, i, GPUCTL_F_TEMP, u);
	if (want(rd, GPUCTL_F_UTIL_ENCODER) &&
	    READ(rd, i, FBIT(GPUCTL_F_UTIL_ENCODER), encoder_util, dev, &u, &u2))
		set_int(rd, i, GPUCTL_F_UTIL_ENCODER, u);
	if (want(rd, GPUCTL_F_UTIL_DECODER) &&
	    READ(rd, i, FBIT(GPUCTL_F_UTIL_DECODER), decoder_util, dev, &u, &u2))
		set_int(rd, i, GPUCTL_F_UTIL_DECODER, u);
	if (want(rd, GPUCTL_F_ENERGY) && READ(rd, i, FBIT(GPUCTL_F_ENERGY), energy, dev, &ull))
		set_int(rd, i, GPUCTL_F_ENERGY, (int64_t)ull);
	if (want(rd, GPUCTL_F_TEMP_SLOWDOWN) &&
	    READ(rd, i, FBIT(GPUCTL_F_TEMP_SLOWDOWN), temp_threshold, dev,
	         NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, &u))
		set_int(rd, i, GPUCTL_F_TEMP_SLOWDOWN, u);
	if (want(rd, GPUCTL_F_TEMP_SHUTDOWN) &&
	    READ(rd, i, FBIT(GPUCTL_F_TEMP_SHUTDOWN), temp_threshold, dev,
	         NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, &u))
		set_int(rd, i, GPUCTL_F_TEMP_SHUTDOWN, u);
	if (want(rd, GPUCTL_F_POWER_DRAW) &&
	    READ(rd, i, FBIT(GPUCTL_F_POWER_DRAW), power_usage, dev, &u))
		set_int(rd, i, GPUCTL_F_POWER_DRAW, u);
	if (want(rd, GPUCTL_F_POWER_LIMIT) &&
	    READ(rd, i, FBIT(GPUCTL_F_POWER_LIMIT), power_limit, dev, &u))
		set_int(rd, i, GPUCTL_F_POWER_LIMIT, u);
	if (want(rd, GPUCTL_F_POWER_MGMT_LIMIT) &&
	    READ(rd, i, FBIT(GPUCTL_F_POWER_MGMT_LIMIT), power_mgmt_limit, dev, &u))
		set_int(rd, i, GPUCTL_F_POWER_MGMT_LIMIT, u);
	if (want(rd, GPUCTL_F_FAN_SPEED) &&
	    READ(rd, i, FBIT(GPUCTL_F_FAN_SPEED), fan_speed, dev, &u))
		set_int(rd, i, GPUCTL_F_FAN_SPEED, u);
	/* nvmlPstates_t: 0..15, and 32 for "unknown" (nvml.h), which stays N/A */
	if (want(rd, GPUCTL_F_PSTATE) && READ(rd, i, FBIT(GPUCTL_F_PSTATE), pstate, dev, &u) &&
	    u <= 15)
		set_int(rd, i, GPUCTL_F_PSTATE, u);
	if (want(rd, GPUCTL_F_CLOCK_SM) &&
	    READ(rd, i, FBIT(GPUCTL_F_CLOCK_SM), clock, dev, NVML_CLOCK_SM, &u))
		set_int(rd, i, GPUCTL_F_CLOCK_SM, u);
	if (want(rd, GPUCTL_F_CLOCK_MEM) &&
	    READ(rd, i, FBIT(GPUCTL_F_CLOCK_MEM), clock, dev, NVML_CLOCK_MEM, &u))
		set_int(rd, i, GPUCTL_F_CLOCK_MEM, u);
	if (want(rd, GPUCTL_F_CLOCK_SM_MAX) &&
	    READ(rd, i, FBIT(GPUCTL_F_CLOCK_SM_MAX), max_clock, dev, NVML_CLOCK_SM, &u))
		set_int(rd, i, GPUCTL_F_CLOCK_SM_MAX, u);
	if (want(rd, GPUCTL_F_CLOCK_MEM_MAX) &&
	    READ(rd, i, FBIT(GPUCTL_F_CLOCK_MEM_MAX), max_clock, dev, NVML_CLOCK_MEM, &u))
		set_int(rd, i, GPUCTL_F_CLOCK_MEM_MAX, u);
	if (want(rd, GPUCTL_F_CLOCKS_EVENT_REASONS) &&
	    READ(rd, i, FBIT(GPUCTL_F_CLOCKS_EVENT_REASONS), clocks_event, dev, &ull))
		set_int(rd, i, GPUCTL_F_CLOCKS_EVENT_REASONS, (int64_t)ull);
	if (want(rd, GPUCTL_F_PCIE_GEN) && READ(rd, i, FBIT(GPUCTL_F_PCIE_GEN), pcie_gen, dev, &u))
		set_int(rd, i, GPUCTL_F_PCIE_GEN, u);
	if (want(rd, GPUCTL_F_PCIE_GEN_MAX) &&
	    READ(rd, i, FBIT(GPUCTL_F_PCIE_GEN_MAX), pcie_gen_max, dev, &u))
		set_int(rd, i, GPUCTL_F_PCIE_GEN_MAX, u);
	if (want(rd, GPUCTL_F_PCIE_WIDTH) &&
	    READ(rd, i, FBIT(GPUCTL_F_PCIE_WIDTH), pcie_width, dev, &u))
		set_int(rd, i, GPUCTL_F_PCIE_WIDTH, u);
	if (want(rd, GPUCTL_F_PCIE_WIDTH_MAX) &&
	    READ(rd, i, FBIT(GPUCTL_F_PCIE_WIDTH_MAX), pcie_width_max, dev, &u))
		set_int(rd, i, GPUCTL_F_PCIE_WIDTH_MAX, u);
	if (want(rd, GPUCTL_F_PERSISTENCE_MODE) &&
	    READ(rd, i, FBIT(GPUCTL_F_PERSISTENCE_MODE), persistence, dev, &e1))
		set_int(rd, i, GPUCTL_F_PERSISTENCE_MODE, e1 == NVML_FEATURE_ENABLED);
	if (want(rd, GPUCTL_F_COMPUTE_MODE) &&
	    READ(rd, i, FBIT(GPUCTL_F_COMPUTE_MODE), compute_mode, dev, &cm))
		set_int(rd, i, GPUCTL_F_COMPUTE_MODE, cm);
	if ((want(rd, GPUCTL_F_ECC_MODE) || want(rd, GPUCTL_F_ECC_MODE_PENDING)) &&
	    READ(rd, i, FBIT(GPUCTL_F_ECC_MODE) | FBIT(GPUCTL_F_ECC_MODE_PENDING), ecc_mode, dev,
	         &e1, &e2)) {
		set_int(rd, i, GPUCTL_F_ECC_MODE, e1 == NVML_FEATURE_ENABLED);
		set_int(rd, i, GPUCTL_F_ECC_MODE_PENDING, e2 == NVML_FEATURE_ENABLED);
	}
	if ((want(rd, GPUCTL_F_MIG_MODE) || want(rd, GPUCTL_F_MIG_MODE_PENDING)) &&
	    READ(rd, i, FBIT(GPUCTL_F_MIG_MODE) | FBIT(GPUCTL_F_MIG_MODE_PENDING), mig_mode, dev,
	         &u, &u2)) {
		set_int(rd, i, GPUCTL_F_MIG_MODE, u == 1);
		set_int(rd, i, GPUCTL_F_MIG_MODE_PENDING, u2 == 1);
	}
	/* memory temperature, recovery action and the health counters, in one call: after the
	 * ECC mode, which decides whether the ECC counters exist */
	read_field_values(rd, i, dev);
	read_monitoring(rd, i, dev);
}

static bool field_is(const struct gpuctl_gpu *g, enum gpuctl_field f, int64_t v)
{
	return g->valid[f] && g->ints[f] == v;
}

/* Architecture generation for the health rules; 0 when unknown. */
static int arch_rank(const struct gpuctl_gpu *g)
{
	static const char *const order[] = {"Kepler", "Maxwell", "Pascal", "Volta",    "Turing",
	                                    "Ampere", "Ada",     "Hopper", "Blackwell"};
	const char *a = g->valid[GPUCTL_F_ARCHITECTURE] ? g->strs[GPUCTL_F_ARCHITECTURE] : NULL;

	for (size_t k = 0; a && k < ELEMENTSOF(order); k++)
		if (streq(a, order[k]))
			return (int)k + 1;
	return 0;
}
#define RANK_AMPERE 6

/* The NVLink count an NVML_FI_DEV_NVLINK_LINK_COUNT entry holds, or -1 when it holds none. */
static int link_count_of(const nvmlFieldValue_t *fv)
{
	if (fv->nvmlReturn != NVML_SUCCESS || fv->valueType != 1 /* unsigned int */ ||
	    fv->value.uiVal > NVML_NVLINK_MAX_LINKS)
		return -1;
	return (int)fv->value.uiVal;
}

/* When a field value may be asked for (the health facts that have a direct call too). */
enum field_when {
	FV_ALWAYS,     /* no condition */
	FV_HEALTH,     /* health snapshots */
	FV_ECC,        /* health snapshots of a GPU with ECC on */
	FV_ECC_AMPERE, /* the same, Ampere and later (row remapping) */
};

/* The facts gpuctl reads through nvmlDeviceGetFieldValues, all wanted ones in one call; each
 * entry's own return code says whether this driver knows the field (the recovery action came
 * with R565-era drivers; memory temperature is reported by GPUs with HBM). The health counters
 * (PCIe replays, ECC totals, remapped rows) ride along in the same call: read_health asks the
 * direct functions only for those no entry answered, so a driver without the field ids costs
 * nothing more than before. */
static void read_field_values(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	static const struct {
		unsigned id;
		enum gpuctl_field f;
		const char *what;
		enum field_when when;
		bool flag; /* a yes/no value: stored as 0/1 */
	} known[] = {
	        {NVML_FI_DEV_MEMORY_TEMP, GPUCTL_F_TEMP_MEMORY, "memory temperature", FV_ALWAYS,
	         false},
	        {NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, GPUCTL_F_RECOVERY_ACTION,
	         "GPU recovery action", FV_ALWAYS, false},
	        {NVML_FI_DEV_PCIE_REPLAY_COUNTER, GPUCTL_F_PCIE_REPLAY, "PCIe replay counter",
	         FV_HEALTH, false},
	        {NVML_FI_DEV_ECC_SBE_VOL_TOTAL, GPUCTL_F_ECC_VOL_CORRECTED, "volatile ECC SBE",
	         FV_ECC, false},
	        {NVML_FI_DEV_ECC_DBE_VOL_TOTAL, GPUCTL_F_ECC_VOL_UNCORRECTED, "volatile ECC DBE",
	         FV_ECC, false},
	        {NVML_FI_DEV_ECC_SBE_AGG_TOTAL, GPUCTL_F_ECC_AGG_CORRECTED, "aggregate ECC SBE",
	         FV_ECC, false},
	        {NVML_FI_DEV_ECC_DBE_AGG_TOTAL, GPUCTL_F_ECC_AGG_UNCORRECTED, "aggregate ECC DBE",
	         FV_ECC, false},
	        {NVML_FI_DEV_REMAPPED_COR, GPUCTL_F_REMAP_CORRECTABLE,
	         "remapped rows (correctable)", FV_ECC_AMPERE, false},
	        {NVML_FI_DEV_REMAPPED_UNC, GPUCTL_F_REMAP_UNCORRECTABLE,
	         "remapped rows (uncorrectable)", FV_ECC_AMPERE, false},
	        {NVML_FI_DEV_REMAPPED_PENDING, GPUCTL_F_REMAP_PENDING, "row remapping pending",
	         FV_ECC_AMPERE, true},
	        {NVML_FI_DEV_REMAPPED_FAILURE, GPUCTL_F_REMAP_FAILURE, "row remapping failure",
	         FV_ECC_AMPERE, true},
	};
	const struct gpuctl_gpu *g = &rd->snap->gpus[i];
	const bool health = rd->flags & GPUCTL_SNAP_HEALTH;
	const bool ecc_on = health && field_is(g, GPUCTL_F_ECC_MODE, 1);
	const bool when_ok[] = {
	        [FV_ALWAYS] = true,
	        [FV_HEALTH] = health,
	        [FV_ECC] = ecc_on,
	        [FV_ECC_AMPERE] = ecc_on && arch_rank(g) >= RANK_AMPERE,
	};
	nvmlFieldValue_t fv[sizeof(known) / sizeof(known[0]) + 1];
	size_t which[sizeof(known) / sizeof(known[0]) + 1], n = 0;
	uint64_t asked = 0;

	for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++)
		if (want(rd, known[k].f) && when_ok[known[k].when]) {
			fv[n] = (nvmlFieldValue_t){.fieldId = known[k].id};
			which[n++] = k;
			asked |= FBIT(known[k].f);
		}
	/* the NVLink walk's bound rides along when there are other fields to read anyway */
	if (n > 0 && rd->nvlink_count) {
		fv[n] = (nvmlFieldValue_t){.fieldId = NVML_FI_DEV_NVLINK_LINK_COUNT};
		which[n++] = SIZE_MAX;
	}
	/* the call failing as a whole: what has a call of its own is asked there next */
	if (n == 0 || !READ(rd, i, asked, field_values, dev, (int)n, fv))
		return;
	for (size_t j = 0; j < n; j++) {
		int64_t v;

		if (which[j] == SIZE_MAX) {
			rd->nvlink_count[i] = link_count_of(&fv[j]);
			continue;
		}
		if (fv[j].nvmlReturn != NVML_SUCCESS) {
			/* Any code, not only NOT_SUPPORTED, means "unavailable" here: drivers that
			 * predate a field answer for it in their own ways, no fault of the GPU. */
			char key[64];
			(void)snprintf(key, sizeof(key), "field:%u:%d", known[which[j]].id,
			               (int)fv[j].nvmlReturn);
			ctx_log_once(rd->ctx, key, GPUCTL_LOG_DEBUG,
			             "nvmlDeviceGetFieldValues: %s: NVML error %d; shown as N/A",
			             known[which[j]].what, (int)fv[j].nvmlReturn);
			continue;
		}
		switch (fv[j].valueType) {
		case 1: /* unsigned int */
			v = fv[j].value.uiVal;
			break;
		case 2: /* unsigned long */
			v = (int64_t)fv[j].value.ulVal;
			break;
		case 3: /* unsigned long long */
			v = (int64_t)fv[j].value.ullVal;
			break;
		case 4: /* signed long long */
			v = fv[j].value.sllVal;
			break;
		case 5: /* signed int */
			v = fv[j].value.siVal;
			break;
		case 6: /* unsigned short */
			v = fv[j].value.usVal;
			break;
		default:
			continue;
		}
		set_int(rd, i, known[which[j]].f, known[which[j]].flag ? v != 0 : v);
	}
}

/* Field f is not wanted, or already read. */
static bool wanted_valid(const struct reader *rd, const struct gpuctl_gpu *g, enum gpuctl_field f)
{
	return !want(rd, f) || g->valid[f];
}

static void read_health(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	const struct gpuctl_gpu *g = &rd->snap->gpus[i];
	unsigned long long ull;
	unsigned u1, u2, u3, u4;
	nvmlEnableState_t e;
	int rank = arch_rank(g);

	/* What read_field_values got is not asked again (valid already). */
	if (want(rd, GPUCTL_F_PCIE_REPLAY) && !g->valid[GPUCTL_F_PCIE_REPLAY] &&
	    READ(rd, i, FBIT(GPUCTL_F_PCIE_REPLAY), pcie_replay, dev, &u1))
		set_int(rd, i, GPUCTL_F_PCIE_REPLAY, u1);
	/* Memory error counters exist only with ECC on; a GPU whose ECC mode reads as off or
	 * unsupported (GeForce) has none, so they are not asked for. */
	if (field_is(g, GPUCTL_F_ECC_MODE, 0) ||
	    (rd->nv->sym.ecc_mode && !g->valid[GPUCTL_F_ECC_MODE]))
		return;
	static const struct {
		enum gpuctl_field f;
		nvmlMemoryErrorType_t type;
		nvmlEccCounterType_t counter;
	} ecc[] = {
	        {GPUCTL_F_ECC_VOL_CORRECTED, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC},
	        {GPUCTL_F_ECC_VOL_UNCORRECTED, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
	         NVML_VOLATILE_ECC},
	        {GPUCTL_F_ECC_AGG_CORRECTED, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC},
	        {GPUCTL_F_ECC_AGG_UNCORRECTED, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
	         NVML_AGGREGATE_ECC},
	};
	for (size_t k = 0; k < ELEMENTSOF(ecc); k++)
		if (want(rd, ecc[k].f) && !g->valid[ecc[k].f] &&
		    READ(rd, i, FBIT(ecc[k].f), total_ecc, dev, ecc[k].type, ecc[k].counter, &ull))
			set_int(rd, i, ecc[k].f, (int64_t)ull);

	if (rank == 0 || rank < RANK_AMPERE) {
		static const struct {
			enum gpuctl_field f;
			nvmlPageRetirementCause_t cause;
		} pages[] = {
		        {GPUCTL_F_RETIRED_SBE,
		         NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS},
		        {GPUCTL_F_RETIRED_DBE, NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR},
		};
		for (size_t k = 0; k < ELEMENTSOF(pages); k++) {
			unsigned count = 0;
			nvmlReturn_t r;

			if (!want(rd, pages[k].f))
				continue;
			if (!gpu_readable(rd, i))
				break;
			if (!rd->nv->sym.retired_pages) {
				symbol_missing(rd, rd->nv->name.retired_pages);
				break;
			}
			/* count 0 and no buffer asks for the number only */
			r = RAW(rd, i, retired_pages, dev, pages[k].cause, &count, NULL);
			if (r == NVML_ERROR_INSUFFICIENT_SIZE || r == NVML_SUCCESS)
				set_int(rd, i, pages[k].f, count);
			else {
				rd->reading = FBIT(pages[k].f);
				(void)read_done(rd, check_result(rd, i, rd->nv->name.retired_pages,
				                                 r, false));
			}
		}
		if (want(rd, GPUCTL_F_RETIRED_PENDING) &&
		    READ(rd, i, FBIT(GPUCTL_F_RETIRED_PENDING), retired_pending, dev, &e))
			set_int(rd, i, GPUCTL_F_RETIRED_PENDING, e == NVML_FEATURE_ENABLED);
	}
	if (rank == 0 || rank >= RANK_AMPERE) {
		if ((want(rd, GPUCTL_F_REMAP_CORRECTABLE) ||
		     want(rd, GPUCTL_F_REMAP_UNCORRECTABLE) || want(rd, GPUCTL_F_REMAP_PENDING) ||
		     want(rd, GPUCTL_F_REMAP_FAILURE)) &&
		    !(wanted_valid(rd, g, GPUCTL_F_REMAP_CORRECTABLE) &&
		      wanted_valid(rd, g, GPUCTL_F_REMAP_UNCORRECTABLE) &&
		      wanted_valid(rd, g, GPUCTL_F_REMAP_PENDING) &&
		      wanted_valid(rd, g, GPUCTL_F_REMAP_FAILURE)) &&
		    READ(rd, i,
		         FBIT(GPUCTL_F_REMAP_CORRECTABLE) | FBIT(GPUCTL_F_REMAP_UNCORRECTABLE) |
		                 FBIT(GPUCTL_F_REMAP_PENDING) | FBIT(GPUCTL_F_REMAP_FAILURE),
		         remapped_rows, dev, &u1, &u2, &u3, &u4)) {
			set_int(rd, i, GPUCTL_F_REMAP_CORRECTABLE, u1);
			set_int(rd, i, GPUCTL_F_REMAP_UNCORRECTABLE, u2);
			set_int(rd, i, GPUCTL_F_REMAP_PENDING, u3 != 0);
			set_int(rd, i, GPUCTL_F_REMAP_FAILURE, u4 != 0);
		}
	}
}

#define CPUSET_WORDS  64 /* 4096 CPUs with 64-bit longs */
#define NODESET_WORDS 16 /* 1024 NUMA nodes */
#define LONG_BITS     (8 * sizeof(unsigned long))

/* Writes a Linux cpulist ("0-15,128-143") of the set bits; false if none is set or the buffer
 * is too small. */
static bool mask_to_list(const unsigned long *mask, size_t words, char *buf, size_t size)
{
	size_t n = 0, bits = words * LONG_BITS;

	buf[0] = '\0';
	for (size_t b = 0; b < bits; b++) {
		size_t e;
		int w;

		if (b % LONG_BITS == 0 && mask[b / LONG_BITS] == 0) {
			b += LONG_BITS - 1; /* a whole empty word: most of the 4,096 CPUs */
			continue;
		}
		if (!(mask[b / LONG_BITS] >> (b % LONG_BITS) & 1ul))
			continue;
		for (e = b;
		     e + 1 < bits && (mask[(e + 1) / LONG_BITS] >> ((e + 1) % LONG_BITS) & 1ul);
		     e++)
			;
		if (e == b)
			w = snprintf(buf + n, size - n, "%s%zu", n ? "," : "", b);
		else
			w = snprintf(buf + n, size - n, "%s%zu-%zu", n ? "," : "", b, e);
		if (w < 0 || (size_t)w >= size - n)
			return false;
		n += (size_t)w;
		b = e;
	}
	return n > 0;
}

static void read_placement(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	unsigned long mask[CPUSET_WORDS] = {0};
	char list[4096];
	unsigned u;

	if (want(rd, GPUCTL_F_CPU_AFFINITY) &&
	    READ(rd, i, FBIT(GPUCTL_F_CPU_AFFINITY), cpu_affinity, dev, CPUSET_WORDS, mask) &&
	    mask_to_list(mask, CPUSET_WORDS, list, sizeof(list)))
		set_str(rd, i, GPUCTL_F_CPU_AFFINITY, list);
	memset(mask, 0, sizeof(mask));
	if (want(rd, GPUCTL_F_NUMA_NODE) &&
	    READ(rd, i, FBIT(GPUCTL_F_NUMA_NODE), memory_affinity, dev, NODESET_WORDS, mask,
	         NVML_AFFINITY_SCOPE_NODE)) {
		for (size_t b = 0; b < NODESET_WORDS * LONG_BITS; b++)
			if (mask[b / LONG_BITS] >> (b % LONG_BITS) & 1ul) {
				set_int(rd, i, GPUCTL_F_NUMA_NODE, (int64_t)b);
				break;
			}
	}
	if (want(rd, GPUCTL_F_GPU_NUMA_NODE) &&
	    READ(rd, i, FBIT(GPUCTL_F_GPU_NUMA_NODE), numa_node_id, dev, &u))
		set_int(rd, i, GPUCTL_F_GPU_NUMA_NODE, u);
}

/* Owner and command of a process, from /proc; NULLs when it is not visible to us. */
static void proc_identity(struct gpuctl_proc *p, char **ret_user, char **ret_cmd)
{
	char path[64], buf[4096];
	struct stat st;
	ssize_t n;

	*ret_user = NULL;
	*ret_cmd = NULL;
	(void)snprintf(path, sizeof(path), "/proc/%u", p->pid);
	if (p->pid == 0 || stat(path, &st) < 0)
		return;
	p->uid = st.st_uid;
	p->has_uid = true;

	*ret_user = nss_user_name(st.st_uid);
	if (!*ret_user) {
		(void)snprintf(path, sizeof(path), "%u", (unsigned)st.st_uid);
		*ret_user = strdup(path);
	}

	(void)snprintf(path, sizeof(path), "/proc/%u/cmdline", p->pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		if (n > 0) {
			buf[n] = '\0'; /* argv[0] ends at the first NUL */
			const char *slash = strrchr(buf, '/');
			const char *base = slash ? slash + 1 : buf;
			if (base[0]) {
				*ret_cmd = strdup(base);
				return;
			}
		}
	}
	(void)snprintf(path, sizeof(path), "/proc/%u/comm", p->pid);
	_cleanup_close_ int cfd = open(path, O_RDONLY | O_CLOEXEC);
	if (cfd < 0)
		return;
	n = read(cfd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	if (buf[0])
		*ret_cmd = strdup(buf);
}

static void add_proc(struct reader *rd, size_t i, uint32_t pid, unsigned long long mem, uint32_t gi,
                     uint32_t ci)
{
	struct gpuctl_proc *p = snapshot_add_proc(rd->snap, i, pid);
	char *user, *cmd;

	if (!p) {
		rd->oom = -ENOMEM;
		return;
	}
	if (mem != NVML_VALUE_NOT_AVAILABLE_ULL) {
		p->used_memory = (int64_t)mem;
		p->has_memory = true;
	}
	if (gi != NVML_INVALID_INSTANCE_ID && ci != NVML_INVALID_INSTANCE_ID) {
		p->gi = gi;
		p->ci = ci;
		p->has_mig = true;
	}
	if (rd->flags & GPUCTL_SNAP_NO_PROC_IDENTITY)
		return;
	proc_identity(p, &user, &cmd);
	if (proc_set_strs(p, user, cmd) < 0)
		rd->oom = -ENOMEM;
	free(user);
	free(cmd);
}

#define PROCS_FIRST_TRY 64 /* entries asked for first: more than any GPU usually runs */
#define PROCS_TRIES     4  /* the list can grow between calls */

static const char *proc_fn_name(const struct reader *rd)
{
	return rd->nv->sym.procs_v2 ? rd->nv->name.procs_v2 : rd->nv->name.procs_v1;
}

/* Adds the compute processes NVML lists for handle dev (GPU i's, or one of its MIG devices')
 * to GPU i; the last call's result, for the caller to judge (nothing is logged here). */
static nvmlReturn_t list_processes(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	unsigned cap = PROCS_FIRST_TRY;
	nvmlReturn_t r = NVML_ERROR_UNKNOWN;

	for (int t = 0; t < PROCS_TRIES; t++) {
		unsigned count = cap;

		if (rd->nv->sym.procs_v2) {
			/* Entries are 24 or 32 bytes depending on the driver branch; the first
			 * 24 bytes always have the v2 layout. */
			size_t stride = rd->nv->procs_stride;
			_cleanup_free_ unsigned char *buf = calloc(cap, stride);
			if (!buf) {
				rd->oom = -ENOMEM;
				return NVML_ERROR_MEMORY;
			}
			r = RAW(rd, i, procs_v2, dev, &count, (nvmlProcessInfo_v2_t *)(void *)buf);
			if (r == NVML_SUCCESS) {
				for (unsigned k = 0; k < count && k < cap; k++) {
					nvmlProcessInfo_v2_t e;
					memcpy(&e, buf + (size_t)k * stride, sizeof(e));
					add_proc(rd, i, e.pid, e.usedGpuMemory, e.gpuInstanceId,
					         e.computeInstanceId);
				}
				return r;
			}
		} else {
			_cleanup_free_ nvmlProcessInfo_v1_t *v = calloc(cap, sizeof(*v));
			if (!v) {
				rd->oom = -ENOMEM;
				return NVML_ERROR_MEMORY;
			}
			r = RAW(rd, i, procs_v1, dev, &count, v);
			if (r == NVML_SUCCESS) {
				for (unsigned k = 0; k < count && k < cap; k++)
					add_proc(rd, i, v[k].pid, v[k].usedGpuMemory,
					         NVML_INVALID_INSTANCE_ID,
					         NVML_INVALID_INSTANCE_ID);
				return r;
			}
		}
		if (r != NVML_ERROR_INSUFFICIENT_SIZE)
			return r;
		cap = (count > cap ? count : cap * 2) + 16;
	}
	return r;
}

/* GPU i's processes read MIG device by MIG device (each entry carries its instance ids);
 * false when the GPU has no MIG device to ask. */
static bool list_mig_processes(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	unsigned max = 0;
	bool asked = false;

	if (!rd->nv->sym.max_mig_count || !rd->nv->sym.mig_handle ||
	    !CALL(rd, i, max_mig_count, dev, &max))
		return false;
	for (unsigned k = 0; k < max && gpu_readable(rd, i); k++) {
		nvmlDevice_t mdev = NULL;
		nvmlReturn_t r = RAW(rd, i, mig_handle, dev, k, &mdev);

		if (r == NVML_ERROR_NOT_FOUND || r == NVML_ERROR_INVALID_ARGUMENT)
			continue; /* an empty slot */
		if (!check_result(rd, i, rd->nv->name.mig_handle, r, false))
			continue;
		asked = true;
		r = list_processes(rd, i, mdev);
		if (r != NVML_SUCCESS)
			(void)check_result(rd, i, proc_fn_name(rd), r, false);
	}
	return asked;
}

/* nvml.h: on a MIG-enabled GPU the GPU handle's list aggregates its MIG devices' processes
 * only for callers with the privileges to see them all; a MIG device handle's own list needs
 * none. So a caller that is not root asks MIG device by MIG device there, and so does anyone
 * the driver refuses (NO_PERMISSION) on the GPU handle. */
static void read_processes(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	bool mig = field_is(&rd->snap->gpus[i], GPUCTL_F_MIG_MODE, 1);
	nvmlReturn_t r;

	if (!gpu_readable(rd, i))
		return;
	if (!rd->nv->sym.procs_v2 && !rd->nv->sym.procs_v1) {
		symbol_missing(rd, rd->nv->name.procs_v2);
		return;
	}
	if (mig && geteuid() != 0 && list_mig_processes(rd, i, dev))
		return;
	r = list_processes(rd, i, dev);
	if (r == NVML_ERROR_NO_PERMISSION && list_mig_processes(rd, i, dev))
		return;
	if (r != NVML_SUCCESS)
		(void)check_result(rd, i, proc_fn_name(rd), r, false);
}

static int percent(unsigned v)
{
	return v > 100 ? 100 : (int)v;
}

/* Engine shares of the processes just listed: the driver keeps a buffer of samples, several
 * per process; the newest of each PID is taken. NOT_FOUND (no sample yet) leaves them unknown. */
static void read_process_util(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	struct gpuctl_gpu *g = &rd->snap->gpus[i];
	unsigned cap = PROCS_FIRST_TRY;

	if (g->n_procs == 0 || !gpu_readable(rd, i))
		return;
	if (!rd->nv->sym.process_util) {
		symbol_missing(rd, rd->nv->name.process_util);
		return;
	}
	for (int t = 0; t < PROCS_TRIES; t++) {
		_cleanup_free_ nvmlProcessUtilizationSample_t *v = calloc(cap, sizeof(*v));
		unsigned count = cap;
		nvmlReturn_t r;

		if (!v) {
			rd->oom = -ENOMEM;
			return;
		}
		r = RAW(rd, i, process_util, dev, v, &count, 0);
		if (r == NVML_SUCCESS) {
			for (size_t p = 0; p < g->n_procs; p++) {
				struct gpuctl_proc *pr = &g->procs[p];
				unsigned long long newest = 0;

				for (unsigned k = 0; k < count && k < cap; k++) {
					if (v[k].pid != pr->pid ||
					    (pr->has_util && v[k].timeStamp < newest))
						continue;
					newest = v[k].timeStamp;
					pr->util[GPUCTL_PROC_SM] = percent(v[k].smUtil);
					pr->util[GPUCTL_PROC_MEM] = percent(v[k].memUtil);
					pr->util[GPUCTL_PROC_ENC] = percent(v[k].encUtil);
					pr->util[GPUCTL_PROC_DEC] = percent(v[k].decUtil);
					pr->has_util = true;
				}
			}
			return;
		}
		if (r != NVML_ERROR_INSUFFICIENT_SIZE) {
			check_result(rd, i, rd->nv->name.process_util, r, false);
			return;
		}
		cap = (count > cap ? count : cap * 2) + 16;
	}
}

/* "NVIDIA A100-SXM4-80GB MIG 3g.40gb" -> "3g.40gb"; NULL when the name has no MIG part. */
static const char *mig_profile_of(const char *name)
{
	const char *p = NULL;

	for (const char *s = strstr(name, "MIG "); s; s = strstr(s + 1, "MIG "))
		if (s == name || s[-1] == ' ')
			p = s + 4;
	while (p && *p == ' ')
		p++;
	return p && *p ? p : NULL;
}

static void read_migs(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	unsigned max = 0;

	if (!field_is(&rd->snap->gpus[i], GPUCTL_F_MIG_MODE, 1))
		return;
	if (!CALL(rd, i, max_mig_count, dev, &max))
		return;
	for (unsigned k = 0; k < max && gpu_readable(rd, i); k++) {
		char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "";
		char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = "";
		nvmlDevice_t mdev = NULL;
		struct gpuctl_mig *m;
		int64_t total, used, freeb;
		unsigned id;
		nvmlReturn_t r;

		if (!rd->nv->sym.mig_handle) {
			symbol_missing(rd, rd->nv->name.mig_handle);
			return;
		}
		r = RAW(rd, i, mig_handle, dev, k, &mdev);
		if (r == NVML_ERROR_NOT_FOUND || r == NVML_ERROR_INVALID_ARGUMENT)
			continue; /* an empty slot */
		if (!check_result(rd, i, rd->nv->name.mig_handle, r, false))
			continue;
		m = snapshot_add_mig(rd->snap, i);
		if (!m) {
			rd->oom = -ENOMEM;
			return;
		}
		mig_set_int(m, GPUCTL_MIG_INDEX, k);
		(void)CALL(rd, i, uuid, mdev, uuid, sizeof(uuid));
		(void)CALL(rd, i, name, mdev, name, sizeof(name));
		if (mig_set_strs(m, uuid[0] ? uuid : NULL, mig_profile_of(name)) < 0)
			rd->oom = -ENOMEM;
		if (CALL(rd, i, gpu_instance_id, mdev, &id))
			mig_set_int(m, GPUCTL_MIG_GI, id);
		if (CALL(rd, i, compute_instance_id, mdev, &id))
			mig_set_int(m, GPUCTL_MIG_CI, id);
		if (read_memory(rd, i, mdev, &total, &used, &freeb)) {
			mig_set_int(m, GPUCTL_MIG_MEMORY_TOTAL, total);
			mig_set_int(m, GPUCTL_MIG_MEMORY_USED, used);
		}
	}
}

static void read_system(struct reader *rd)
{
	char drv[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = "";
	char ver[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE] = "";
	int cuda;

	if (!CALL(rd, SYSTEM_SCOPE, driver_version, drv, sizeof(drv)))
		drv[0] = '\0';
	if (!CALL(rd, SYSTEM_SCOPE, nvml_version, ver, sizeof(ver)))
		ver[0] = '\0';
	if (snapshot_set_system(rd->snap, drv[0] ? drv : NULL, ver[0] ? ver : NULL) < 0)
		rd->oom = -ENOMEM;
	if (CALL(rd, SYSTEM_SCOPE, cuda_version, &cuda))
		snapshot_set_cuda_version(rd->snap, cuda);
}

/* ---- NVLink and pair facts ---- */

/* Index of the GPU with this bus id, or SIZE_MAX. */
static size_t gpu_by_bus(const struct gpuctl_snapshot *snap, const char *bus)
{
	for (size_t i = 0; i < snap->n_gpus; i++) {
		const char *b = gpuctl_gpu_str(&snap->gpus[i], GPUCTL_F_PCI_BUS_ID);

		if (b && streq(b, bus))
			return i;
	}
	return SIZE_MAX;
}

/* Remote bus id of a link in our normal form; false if unavailable. */
static bool remote_bus(struct reader *rd, size_t i, nvmlDevice_t dev, unsigned link, char *buf,
                       size_t size)
{
	if (rd->nv->sym.nvlink_remote_pci) {
		nvmlPciInfo_t pci = {0};
		if (!CALL(rd, i, nvlink_remote_pci, dev, link, &pci))
			return false;
		format_bus_id(buf, size, pci.domain, pci.bus, pci.device);
		return true;
	}
	nvmlPciInfo_v1_t pci = {0};
	if (!CALL(rd, i, nvlink_remote_pci_v1, dev, link, &pci))
		return false;
	format_bus_id(buf, size, pci.domain, pci.bus, pci.device);
	return true;
}

/* Ends a read of an NVLink health fact. */
static bool nvlink_read_done(struct reader *rd, bool ok)
{
	rd->reading_nvlink = false;
	return ok;
}

/* Adds an active link's error counters to GPU i's sums (health snapshots only). Each counter
 * is read on its own: one the link does not support leaves the other sums alone (a counter
 * NVML does not support stays so, so every sample sums over the same links). */
static void read_nvlink_errors(struct reader *rd, size_t i, nvmlDevice_t dev, unsigned link)
{
	struct gpuctl_gpu *g = &rd->snap->gpus[i];
	/* nvmlNvLinkErrorCounter_t: DL_REPLAY 0, DL_RECOVERY 1, DL_CRC_FLIT 2, DL_CRC_DATA 3 */
	struct {
		uint64_t *sum;
		bool *has;
	} into[4] = {{&g->nvlink_replay, &g->has_nvlink_replay},
	             {&g->nvlink_recovery, &g->has_nvlink_recovery},
	             {&g->nvlink_crc, &g->has_nvlink_crc},
	             {&g->nvlink_crc, &g->has_nvlink_crc}};

	for (uint32_t k = 0; k < 4; k++) {
		unsigned long long v;

		if (!CALL(rd, i, nvlink_error_counter, dev, link, k, &v))
			continue;
		*into[k].sum += v;
		*into[k].has = true;
	}
}

/* The NVLinks GPU i has, from field NVML_FI_DEV_NVLINK_LINK_COUNT; -1 when the driver cannot
 * say (no nvmlDeviceGetFieldValues, or a driver that does not know the field). */
static int nvlink_count(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	nvmlFieldValue_t fv = {.fieldId = NVML_FI_DEV_NVLINK_LINK_COUNT};

	if (rd->nvlink_count && rd->nvlink_count[i] != -2)
		return rd->nvlink_count[i]; /* read with the GPU's other field values */
	if (!rd->nv->sym.field_values || !CALL(rd, i, field_values, dev, 1, &fv))
		return -1;
	return link_count_of(&fv);
}

/* Walks GPU i's NVLinks: adds direct links to row i of direct[], counts switch links. A link
 * that answers NOT_SUPPORTED may sit in the middle of the range (parts with fewer links than
 * their die have some disabled), so the walk goes on past it, until it has seen as many links
 * as the device has (nvlink_count), or through every link number NVML allows when the driver
 * does not say. direct NULL (GPUCTL_SNAP_NVLINK_STATE without topology): the links' states,
 * and whether the first active link reaches an NVSwitch, are all the health checks use, so the
 * far ends are not read beyond that. */
static void read_nvlinks(struct reader *rd, size_t i, nvmlDevice_t dev, int *direct)
{
	struct gpuctl_gpu *g = &rd->snap->gpus[i];
	bool far_end_asked = false;
	int count;

	if (!rd->nv->sym.nvlink_state) {
		symbol_missing(rd, rd->nv->name.nvlink_state);
		return;
	}
	g->has_nvlink_state = true;
	count = nvlink_count(rd, i, dev);
	for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS && gpu_readable(rd, i) &&
	                        (count < 0 || g->nvlink_present < count);
	     link++) {
		nvmlEnableState_t active = NVML_FEATURE_DISABLED;
		nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
		char bus[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
		nvmlReturn_t r = RAW(rd, i, nvlink_state, dev, link, &active);
		size_t peer;

		if (r == NVML_ERROR_INVALID_ARGUMENT)
			break; /* past the link numbers this driver knows */
		if (r == NVML_ERROR_NOT_SUPPORTED)
			continue; /* a disabled link (or, without a count, no NVLink) */
		if (r != NVML_SUCCESS) {
			rd->reading_nvlink = true;
			(void)nvlink_read_done(
			        rd, check_result(rd, i, rd->nv->name.nvlink_state, r, false));
			continue;
		}
		g->nvlink_present++;
		if (active != NVML_FEATURE_ENABLED) {
			g->nvlink_inactive |= UINT64_C(1) << link;
			continue;
		}
		g->nvlink_active++;
		if ((rd->flags & GPUCTL_SNAP_HEALTH) && !(rd->flags & GPUCTL_SNAP_NO_RATE_COUNTERS))
			read_nvlink_errors(rd, i, dev, link);
		if (!direct && far_end_asked)
			continue;
		/* the first active link's far end is a health fact: does the GPU reach NVSwitches
		 */
		rd->reading_nvlink = !far_end_asked;
		far_end_asked = true;
		if (rd->nv->sym.nvlink_remote_type &&
		    !nvlink_read_done(rd, CALL(rd, i, nvlink_remote_type, dev, link, &type)))
			continue;
		rd->reading_nvlink = false;
		if (type == NVML_NVLINK_DEVICE_TYPE_SWITCH) {
			g->nvswitch_links++;
			continue;
		}
		if (type == NVML_NVLINK_DEVICE_TYPE_IBMNPU || !direct)
			continue;
		if (!remote_bus(rd, i, dev, link, bus, sizeof(bus)))
			continue;
		peer = gpu_by_bus(rd->snap, bus);
		if (peer != SIZE_MAX && peer != i)
			direct[i * rd->snap->n_gpus + peer]++;
		else if (!rd->nv->sym.nvlink_remote_type && peer == SIZE_MAX)
			g->nvswitch_links++;
	}
}

static int level_of(nvmlGpuTopologyLevel_t l)
{
	switch (l) {
	case NVML_TOPOLOGY_INTERNAL:
	case NVML_TOPOLOGY_SINGLE:
	case NVML_TOPOLOGY_MULTIPLE:
	case NVML_TOPOLOGY_HOSTBRIDGE:
	case NVML_TOPOLOGY_NODE:
	case NVML_TOPOLOGY_SYSTEM:
		return (int)l;
	default:
		return GPUCTL_TOPO_UNKNOWN;
	}
}

static void read_topology(struct reader *rd)
{
	size_t n = rd->snap->n_gpus;
	_cleanup_free_ int *direct = NULL;

	if (n == 0)
		return;
	direct = calloc(n * n, sizeof(*direct));
	if (!direct) {
		rd->oom = -ENOMEM;
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (gpu_readable(rd, i))
			read_nvlinks(rd, i, rd->handles[i], direct);

	for (size_t a = 0; a < n; a++)
		for (size_t b = a + 1; b < n; b++) {
			const struct gpuctl_gpu *ga = &rd->snap->gpus[a], *gb = &rd->snap->gpus[b];
			struct gpuctl_link l = {.level = GPUCTL_TOPO_UNKNOWN,
			                        .p2p = GPUCTL_P2P_UNKNOWN};
			nvmlGpuTopologyLevel_t level;
			nvmlGpuP2PStatus_t st;
			int d_ab = direct[a * n + b], d_ba = direct[b * n + a];

			if (gpu_readable(rd, a) && gpu_readable(rd, b)) {
				if (!rd->nv->sym.common_ancestor)
					symbol_missing(rd, rd->nv->name.common_ancestor);
				else if (check_result(rd, a, rd->nv->name.common_ancestor,
				                      RAW(rd, a, common_ancestor, rd->handles[a],
				                          rd->handles[b], &level),
				                      true))
					l.level = level_of(level);
				if (!rd->nv->sym.p2p_status)
					symbol_missing(rd, rd->nv->name.p2p_status);
				else if (check_result(rd, a, rd->nv->name.p2p_status,
				                      RAW(rd, a, p2p_status, rd->handles[a],
				                          rd->handles[b], NVML_P2P_CAPS_INDEX_READ,
				                          &st),
				                      true))
					l.p2p = st <= NVML_P2P_STATUS_NOT_SUPPORTED
					                ? (int)st
					                : GPUCTL_P2P_UNKNOWN;
			}
			/* A pair with a lost GPU has no facts: its walk may have stopped part-way
			 * (a count of 5 of 12 links would be a wrong fact, not a missing one). */
			if (!gpu_readable(rd, a) || !gpu_readable(rd, b)) {
				(void)snapshot_set_link(
				        rd->snap, a, b,
				        &(struct gpuctl_link){.level = GPUCTL_TOPO_UNKNOWN,
				                              .p2p = GPUCTL_P2P_UNKNOWN});
				continue;
			}
			/* both ends should report the same count */
			l.nvlinks = d_ab > d_ba ? d_ab : d_ba;
			if (l.nvlinks == 0 && ga->nvswitch_links > 0 && gb->nvswitch_links > 0) {
				l.nvswitch = true;
				l.nvlinks = ga->nvswitch_links < gb->nvswitch_links
				                    ? ga->nvswitch_links
				                    : gb->nvswitch_links;
			}
			(void)snapshot_set_link(rd->snap, a, b, &l);
		}
}

static void read_gpu(struct reader *rd, size_t i, unsigned flags)
{
	nvmlDevice_t dev = NULL;
	nvmlReturn_t r = RAW(rd, i, handle_by_index, (unsigned)i, &dev);

	/* no handle: every field asked for is unreadable */
	rd->reading = rd->want;
	if (!read_done(rd, check_result(rd, i, rd->nv->name.handle_by_index, r, false)) || !dev)
		return;
	rd->handles[i] = dev;
	read_identity(rd, i, dev);
	read_state(rd, i, dev);
	if (flags & GPUCTL_SNAP_HEALTH)
		read_health(rd, i, dev);
	read_placement(rd, i, dev);
	if (flags & GPUCTL_SNAP_PROCESSES)
		read_processes(rd, i, dev);
	if (flags & GPUCTL_SNAP_PROC_UTIL)
		read_process_util(rd, i, dev);
	if (flags & GPUCTL_SNAP_MIG)
		read_migs(rd, i, dev);
	/* the link states alone (with topology, read_topology walks the links) */
	if ((flags & GPUCTL_SNAP_NVLINK_STATE) && !(flags & GPUCTL_SNAP_TOPOLOGY))
		read_nvlinks(rd, i, dev, NULL);
}

int nvml_read_snapshot(struct gpuctl_ctx *ctx, unsigned flags, uint64_t want_fields,
                       struct gpuctl_snapshot **ret_snap)
{
	struct reader rd = {.ctx = ctx, .nv = ctx->nvml, .want = want_fields, .flags = flags};
	_cleanup_free_ nvmlDevice_t *handles = NULL;
	struct gpuctl_snapshot *snap;
	unsigned count = 0;
	nvmlReturn_t r;

	if (!rd.nv)
		return ctx_error(ctx, -EINVAL, "NVML is not loaded");
	r = RAW(&rd, SYSTEM_SCOPE, device_count, &count);
	if (r != NVML_SUCCESS) {
		const char *s = rd.nv->sym.error_string(r);
		return ctx_error(ctx, -EIO, "%s: %s", rd.nv->name.device_count,
		                 s ? s : "unknown error");
	}
	handles = calloc(count ? count : 1, sizeof(*handles));
	snap = snapshot_new_empty(count, flags);
	if (!handles || !snap) {
		gpuctl_snapshot_free(snap);
		return ctx_error(ctx, -ENOMEM, "out of memory");
	}
	rd.snap = snap;
	rd.handles = handles;
	if (flags & (GPUCTL_SNAP_TOPOLOGY | GPUCTL_SNAP_NVLINK_STATE)) {
		rd.nvlink_count = malloc((count ? count : 1) * sizeof(*rd.nvlink_count));
		if (!rd.nvlink_count) {
			gpuctl_snapshot_free(snap);
			return ctx_error(ctx, -ENOMEM, "out of memory");
		}
		for (size_t i = 0; i < count; i++)
			rd.nvlink_count[i] = -2;
	}

	read_system(&rd);
	for (size_t i = 0; i < count; i++)
		read_gpu(&rd, i, flags);
	if (flags & GPUCTL_SNAP_TOPOLOGY)
		read_topology(&rd);
	free(rd.nvlink_count);
	if (rd.oom < 0) {
		gpuctl_snapshot_free(snap);
		return ctx_error(ctx, -ENOMEM, "out of memory");
	}
	ctx_log(ctx, GPUCTL_LOG_DEBUG, "nvml: snapshot of %u GPUs took %u NVML calls", count,
	        rd.calls);
	/* Handles stay valid until nvmlShutdown: gpuctl_snapshot_refresh reuses them. */
	free(rd.nv->handles);
	rd.nv->handles = TAKE_PTR(handles);
	rd.nv->n_handles = count;
	*ret_snap = snap;
	return 0;
}

/* The fields prev asked of GPU i and did not get although none of its calls failed: NVML
 * said NOT_SUPPORTED (or the like) for them, which holds until the driver reloads, so a
 * refresh does not ask again. With a failed call among them they are all asked again. */
static uint64_t known_unavailable(const struct gpuctl_snapshot *prev, size_t i)
{
	const struct gpuctl_gpu *g = &prev->gpus[i];
	uint64_t missing = 0;

	if (g->nvml_errors > 0 || g->nvml_not_ready > 0 || g->lost)
		return 0;
	for (size_t f = 0; f < GPUCTL__F_COUNT; f++)
		if (!g->valid[f])
			missing |= UINT64_C(1) << f;
	return missing & prev->want;
}

int nvml_refresh_snapshot(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *prev,
                          struct gpuctl_snapshot *snap, unsigned flags, uint64_t want_fields)
{
	struct reader rd = {
	        .ctx = ctx, .nv = ctx->nvml, .snap = snap, .want = want_fields, .flags = flags};
	unsigned count = 0;
	nvmlReturn_t r;

	if (!rd.nv)
		return ctx_error(ctx, -EINVAL, "NVML is not loaded");
	/* One call guards everything kept: NVML still answers, and the GPUs are still those the
	 * handles and indices were taken for. */
	r = RAW(&rd, SYSTEM_SCOPE, device_count, &count);
	if (r != NVML_SUCCESS) {
		const char *e = rd.nv->sym.error_string(r);
		return ctx_error(ctx, -EIO, "%s: %s", rd.nv->name.device_count,
		                 e ? e : "unknown error");
	}
	if (count != snap->n_gpus)
		return ctx_error(ctx, -ESTALE, "the number of GPUs changed from %zu to %u",
		                 snap->n_gpus, count);
	if (rd.nv->n_handles != snap->n_gpus) {
		nvmlDevice_t *h = calloc(snap->n_gpus ? snap->n_gpus : 1, sizeof(*h));

		if (!h)
			return ctx_error(ctx, -ENOMEM, "out of memory");
		for (size_t i = 0; i < snap->n_gpus; i++) {
			r = RAW(&rd, i, handle_by_index, (unsigned)i, &h[i]);
			rd.reading = want_fields; /* no handle: every field asked is unreadable */
			if (!read_done(&rd,
			               check_result(&rd, i, rd.nv->name.handle_by_index, r, false)))
				h[i] = NULL;
		}
		free(rd.nv->handles);
		rd.nv->handles = h;
		rd.nv->n_handles = snap->n_gpus;
	}
	rd.handles = rd.nv->handles;
	for (size_t i = 0; i < snap->n_gpus; i++) {
		nvmlDevice_t dev = rd.handles[i];

		if (!gpu_readable(&rd, i))
			continue;
		rd.want = want_fields & ~known_unavailable(prev, i);
		read_identity(&rd, i, dev); /* each read only when asked for */
		read_state(&rd, i, dev);
		if (flags & GPUCTL_SNAP_HEALTH)
			read_health(&rd, i, dev);
		read_placement(&rd, i, dev);
		if (flags & GPUCTL_SNAP_PROCESSES)
			read_processes(&rd, i, dev);
		if (flags & GPUCTL_SNAP_PROC_UTIL)
			read_process_util(&rd, i, dev);
		if (flags & GPUCTL_SNAP_MIG)
			read_migs(&rd, i, dev);
	}
	if (rd.oom < 0)
		return ctx_error(ctx, -ENOMEM, "out of memory");
	ctx_log(ctx, GPUCTL_LOG_DEBUG, "nvml: refresh of %zu GPUs took %u NVML calls", snap->n_gpus,
	        rd.calls);
	return 0;
}

/* ---- XID events (nvml_xid_events_*, decoded by xid-watch.c) ----
 *
 * Decisions:
 * - One event set for the snapshot's GPUs; each registers XID events where it supports them
 *   (mask & nvmlDeviceGetSupportedEventTypes). NOT_SUPPORTED on a GPU leaves the set usable; a
 *   set no GPU could join is -EOPNOTSUPP, so the caller falls back to the kernel log.
 * - The snapshot index of an event is found by comparing its device handle with the handles
 *   taken here (NVML index == snapshot index); an event of a device not in the set, or of
 *   another type, is no event of this set (0).
 * - eventData is returned as NVML gave it: what it means is xid-watch.c's business.
 * - GPU_IS_LOST from the wait is reported as -ENODEV: the caller takes a snapshot, which marks
 *   the one lost GPU (instead of fencing every GPU as Kubernetes' device plugin does).
 */
struct nvml_xid_events {
	struct nvml *nv;       /* the context's NVML (borrowed) */
	nvmlEventSet_t set;    /* owned */
	nvmlDevice_t *handles; /* per snapshot index, NULL when not registered */
	size_t n;              /* entries in handles */
};

int nvml_xid_events_new(struct gpuctl_ctx *ctx, const struct gpuctl_snapshot *snap,
                        struct nvml_xid_events **ret_events)
{
	struct nvml_xid_events *w;
	struct nvml *nv = ctx->nvml;
	size_t joined = 0;
	nvmlReturn_t r;

	if (!nv)
		return ctx_error(ctx, -EINVAL, "NVML is not loaded");
	if (!nv->sym.event_set_create || !nv->sym.register_events || !nv->sym.event_set_wait ||
	    !nv->sym.event_set_free)
		return ctx_error(ctx, -EOPNOTSUPP, "this NVML library has no event API");
	w = calloc(1, sizeof(*w));
	if (!w || !(w->handles = calloc(snap->n_gpus ? snap->n_gpus : 1, sizeof(*w->handles)))) {
		free(w);
		return ctx_error(ctx, -ENOMEM, "out of memory");
	}
	w->nv = nv;
	w->n = snap->n_gpus;
	call_begin(ctx, nv->name.event_set_create, CALL_NO_GPU, NULL);
	r = call_end(ctx, nv->sym.event_set_create(&w->set));
	if (r != NVML_SUCCESS) {
		const char *s = nv->sym.error_string(r);
		nvml_xid_events_free(w);
		return ctx_error(ctx, r == NVML_ERROR_NOT_SUPPORTED ? -EOPNOTSUPP : -EIO,
		                 "nvmlEventSetCreate: %s", s ? s : "unknown error");
	}
	for (size_t i = 0; i < snap->n_gpus; i++) {
		unsigned long long types = NVML_EVENT_TYPE_XID_CRITICAL_ERROR, supported = 0;
		nvmlDevice_t dev = NULL;

		const char *bus = gpuctl_gpu_str(&snap->gpus[i], GPUCTL_F_PCI_BUS_ID);

		if (snap->gpus[i].lost)
			continue;
		call_begin(ctx, nv->name.handle_by_index, i, bus);
		if (call_end(ctx, nv->sym.handle_by_index((unsigned)i, &dev)) != NVML_SUCCESS)
			continue;
		if (nv->sym.supported_events) {
			call_begin(ctx, nv->name.supported_events, i, bus);
			if (call_end(ctx, nv->sym.supported_events(dev, &supported)) ==
			    NVML_SUCCESS)
				types &= supported;
		}
		if (!types)
			continue;
		call_begin(ctx, nv->name.register_events, i, bus);
		r = call_end(ctx, nv->sym.register_events(dev, types, w->set));
		if (r == NVML_SUCCESS) {
			w->handles[i] = dev;
			joined++;
		} else if (r != NVML_ERROR_NOT_SUPPORTED) {
			ctx_log(ctx, GPUCTL_LOG_WARNING,
			        "nvmlDeviceRegisterEvents: NVML error %d on GPU %zu", (int)r, i);
			if (r == NVML_ERROR_UNKNOWN) /* NVML: the set must be freed */
				break;
		}
	}
	if (joined == 0) {
		nvml_xid_events_free(w);
		return ctx_error(ctx, -EOPNOTSUPP, "no GPU delivers XID events through NVML");
	}
	*ret_events = w;
	return 0;
}

void nvml_xid_events_free(struct nvml_xid_events *events)
{
	if (!events)
		return;
	if (events->set && events->nv->sym.event_set_free)
		(void)events->nv->sym.event_set_free(events->set);
	free(events->handles);
	free(events);
}

int nvml_xid_events_wait(struct gpuctl_ctx *ctx, struct nvml_xid_events *events,
                         unsigned timeout_ms, struct nvml_xid_event *ret_event)
{
	nvmlEventData_t data = {0};
	nvmlReturn_t r;

	r = events->nv->sym.event_set_wait(events->set, &data, timeout_ms);
	if (r == NVML_ERROR_TIMEOUT)
		return 0;
	if (r == NVML_ERROR_GPU_IS_LOST)
		return ctx_error(ctx, -ENODEV, "nvmlEventSetWait_v2: a GPU is lost");
	if (r != NVML_SUCCESS) {
		const char *s = events->nv->sym.error_string(r);
		return ctx_error(ctx, -EIO, "nvmlEventSetWait_v2: %s", s ? s : "unknown error");
	}
	if (!(data.eventType & NVML_EVENT_TYPE_XID_CRITICAL_ERROR))
		return 0;
	for (size_t i = 0; i < events->n; i++)
		if (events->handles[i] && events->handles[i] == data.device) {
			*ret_event = (struct nvml_xid_event){.gpu = i, .data = data.eventData};
			return 1;
		}
	return 0;
}
