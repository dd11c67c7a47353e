// SPDX-License-Identifier: MIT
/*
 * nvml-load.c: loading NVML: finding the library, resolving its symbols, nvmlInit, and the
 * unloading the context does with it (nvmlShutdown, dlclose). The files of src/lib/nvml/ are the
 * only code in gpuctl that knows NVML; this one is the only one that knows where it comes from.
 *
 * Decisions:
 * - dlopen($GPUCTL_NVML_LIBRARY) when set (and nothing else then: an override that silently
 *   fell back to the system NVML would test the wrong library), else libnvidia-ml.so.1, else
 *   libnvidia-ml.so; RTLD_NOW | RTLD_LOCAL so NVML's symbols never leak into the process.
 * - One symbol table (NVML_SYMBOLS, nvml-internal.h), typed by nvml-abi.h's function types.
 *   Versioned symbols resolve newest first at load time (_v3, _v2, plain: NVML_NAMES_<field>
 *   below); the name actually found is kept for messages. Only init, shutdown, error string,
 *   device count and handle by index are required.
 * - The context frees what it holds without knowing NVML: gpuctl_nvml_load hands it
 *   nvml_unload as its nvml_free (core/ctx.h).
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctx.h"
#include "nvml-abi.h"
#include "nvml-internal.h"
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

/* The names each field of the symbol table is looked up by, newest first: a field of
 * NVML_SYMBOLS without its NVML_NAMES_ does not compile. */
#define NVML_NAMES_init            "nvmlInit_v2", "nvmlInit"
#define NVML_NAMES_shutdown        "nvmlShutdown"
#define NVML_NAMES_error_string    "nvmlErrorString"
#define NVML_NAMES_device_count    "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"
#define NVML_NAMES_handle_by_index "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"
#define NVML_NAMES_driver_version  "nvmlSystemGetDriverVersion"
#define NVML_NAMES_nvml_version    "nvmlSystemGetNVMLVersion"
#define NVML_NAMES_cuda_version                                                                    \
	"nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"
#define NVML_NAMES_uuid             "nvmlDeviceGetUUID"
#define NVML_NAMES_pci_info         "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2"
#define NVML_NAMES_pci_info_v1      "nvmlDeviceGetPciInfo"
#define NVML_NAMES_name             "nvmlDeviceGetName"
#define NVML_NAMES_brand            "nvmlDeviceGetBrand"
#define NVML_NAMES_architecture     "nvmlDeviceGetArchitecture"
#define NVML_NAMES_compute_cap      "nvmlDeviceGetCudaComputeCapability"
#define NVML_NAMES_serial           "nvmlDeviceGetSerial"
#define NVML_NAMES_minor_number     "nvmlDeviceGetMinorNumber"
#define NVML_NAMES_memory_v2        "nvmlDeviceGetMemoryInfo_v2"
#define NVML_NAMES_memory           "nvmlDeviceGetMemoryInfo"
#define NVML_NAMES_utilization      "nvmlDeviceGetUtilizationRates"
#define NVML_NAMES_temperature      "nvmlDeviceGetTemperature"
#define NVML_NAMES_temp_threshold   "nvmlDeviceGetTemperatureThreshold"
#define NVML_NAMES_power_usage      "nvmlDeviceGetPowerUsage"
#define NVML_NAMES_power_limit      "nvmlDeviceGetEnforcedPowerLimit"
#define NVML_NAMES_power_mgmt_limit "nvmlDeviceGetPowerManagementLimit"
#define NVML_NAMES_fan_speed        "nvmlDeviceGetFanSpeed"
#define NVML_NAMES_pstate           "nvmlDeviceGetPerformanceState"
#define NVML_NAMES_clock            "nvmlDeviceGetClockInfo"
#define NVML_NAMES_max_clock        "nvmlDeviceGetMaxClockInfo"
#define NVML_NAMES_clocks_event                                                                    \
	"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"
#define NVML_NAMES_pcie_gen            "nvmlDeviceGetCurrPcieLinkGeneration"
#define NVML_NAMES_pcie_gen_max        "nvmlDeviceGetMaxPcieLinkGeneration"
#define NVML_NAMES_pcie_width          "nvmlDeviceGetCurrPcieLinkWidth"
#define NVML_NAMES_pcie_width_max      "nvmlDeviceGetMaxPcieLinkWidth"
#define NVML_NAMES_pcie_replay         "nvmlDeviceGetPcieReplayCounter"
#define NVML_NAMES_encoder_util        "nvmlDeviceGetEncoderUtilization"
#define NVML_NAMES_decoder_util        "nvmlDeviceGetDecoderUtilization"
#define NVML_NAMES_energy              "nvmlDeviceGetTotalEnergyConsumption"
#define NVML_NAMES_persistence         "nvmlDeviceGetPersistenceMode"
#define NVML_NAMES_compute_mode        "nvmlDeviceGetComputeMode"
#define NVML_NAMES_ecc_mode            "nvmlDeviceGetEccMode"
#define NVML_NAMES_mig_mode            "nvmlDeviceGetMigMode"
#define NVML_NAMES_total_ecc           "nvmlDeviceGetTotalEccErrors"
#define NVML_NAMES_retired_pages       "nvmlDeviceGetRetiredPages"
#define NVML_NAMES_retired_pending     "nvmlDeviceGetRetiredPagesPendingStatus"
#define NVML_NAMES_remapped_rows       "nvmlDeviceGetRemappedRows"
#define NVML_NAMES_cpu_affinity        "nvmlDeviceGetCpuAffinity"
#define NVML_NAMES_memory_affinity     "nvmlDeviceGetMemoryAffinity"
#define NVML_NAMES_numa_node_id        "nvmlDeviceGetNumaNodeId"
#define NVML_NAMES_max_mig_count       "nvmlDeviceGetMaxMigDeviceCount"
#define NVML_NAMES_mig_handle          "nvmlDeviceGetMigDeviceHandleByIndex"
#define NVML_NAMES_gpu_instance_id     "nvmlDeviceGetGpuInstanceId"
#define NVML_NAMES_compute_instance_id "nvmlDeviceGetComputeInstanceId"
#define NVML_NAMES_procs_v2                                                                        \
	"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"
#define NVML_NAMES_procs_v1             "nvmlDeviceGetComputeRunningProcesses"
#define NVML_NAMES_common_ancestor      "nvmlDeviceGetTopologyCommonAncestor"
#define NVML_NAMES_p2p_status           "nvmlDeviceGetP2PStatus"
#define NVML_NAMES_nvlink_state         "nvmlDeviceGetNvLinkState"
#define NVML_NAMES_nvlink_remote_type   "nvmlDeviceGetNvLinkRemoteDeviceType"
#define NVML_NAMES_nvlink_remote_pci    "nvmlDeviceGetNvLinkRemotePciInfo_v2"
#define NVML_NAMES_nvlink_remote_pci_v1 "nvmlDeviceGetNvLinkRemotePciInfo"
#define NVML_NAMES_field_values         "nvmlDeviceGetFieldValues"
#define NVML_NAMES_violation            "nvmlDeviceGetViolationStatus"
#define NVML_NAMES_bar1                 "nvmlDeviceGetBAR1MemoryInfo"
#define NVML_NAMES_pcie_throughput      "nvmlDeviceGetPcieThroughput"
#define NVML_NAMES_process_util         "nvmlDeviceGetProcessUtilization"
#define NVML_NAMES_nvlink_error_counter "nvmlDeviceGetNvLinkErrorCounter"
#define NVML_NAMES_supported_events     "nvmlDeviceGetSupportedEventTypes"
#define NVML_NAMES_event_set_create     "nvmlEventSetCreate"
#define NVML_NAMES_register_events      "nvmlDeviceRegisterEvents"
#define NVML_NAMES_event_set_wait       "nvmlEventSetWait_v2"
#define NVML_NAMES_event_set_free       "nvmlEventSetFree"

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

#define X(field, type, req)                                                                        \
	do {                                                                                       \
		static const char *const names_[] = {NVML_NAMES_##field, NULL};                    \
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
	nvml_call_begin(ctx, nv->name.init, NVML_CALL_NO_GPU, NULL);
	r = nvml_call_end(ctx, nv->sym.init());
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
