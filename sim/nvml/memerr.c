/* Simulated NVML: memory error reporting (ECC mode and counters, retired pages, remapped
 * rows). Support follows the generation rules NVIDIA documents:
 * - ECC mode/counters: NOT_SUPPORTED on GPUs without ECC (scenario "ecc": false, GeForce);
 *   counters also need ECC enabled ("Requires ECC Mode to be enabled").
 * - Retired pages (dynamic page retirement): Kepler..Turing with ECC; from Ampere on, row
 *   remapping replaced it and the call is NOT_SUPPORTED (NVIDIA "GPU Memory Error Management",
 *   A100 and later).
 * - Remapped rows: Ampere and newer with ECC; NOT_SUPPORTED before, and on a GPU with MIG
 *   enabled and at least one instance (per SCENARIO.md).
 * Retired page addresses are synthetic and stable (cause-specific base plus page index). */
#include "internal.h"
#include "../util.h"

#include <string.h>
#include <time.h>

SIM_EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t *current,
                                             nvmlEnableState_t *pending)
{
	SIM_DEVICE_CALL(nvmlDeviceGetEccMode, device, 0);
	if (!current || !pending)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if (!c.g->has_ecc)
		return sim_end(NVML_ERROR_NOT_SUPPORTED);
	*current = c.g->ecc_enabled ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
	*pending = c.g->ecc_pending ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device,
                                                    nvmlMemoryErrorType_t errorType,
                                                    nvmlEccCounterType_t counterType,
                                                    unsigned long long *eccCounts)
{
	const struct sim_gpu *g;
	bool corr;

	SIM_DEVICE_CALL(nvmlDeviceGetTotalEccErrors, device, 0);
	g = c.g;
	if (!eccCounts ||
	    (errorType != NVML_MEMORY_ERROR_TYPE_CORRECTED &&
	     errorType != NVML_MEMORY_ERROR_TYPE_UNCORRECTED) ||
	    (counterType != NVML_VOLATILE_ECC && counterType != NVML_AGGREGATE_ECC))
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if (!g->has_ecc || !g->ecc_enabled)
		return sim_end(NVML_ERROR_NOT_SUPPORTED);
	corr = errorType == NVML_MEMORY_ERROR_TYPE_CORRECTED;
	if (counterType == NVML_VOLATILE_ECC)
		*eccCounts = corr ? g->ecc_vol_corr : g->ecc_vol_uncorr;
	else
		*eccCounts = corr ? g->ecc_agg_corr : g->ecc_agg_uncorr;
	return sim_end(NVML_SUCCESS);
}

static bool has_retirement(const struct sim_gpu *g)
{
	return g->has_ecc && g->arch < SIM_ARCH_AMPERE;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device,
                                                  nvmlPageRetirementCause_t cause,
                                                  unsigned int *pageCount,
                                                  unsigned long long *addresses)
{
	unsigned int n;
	unsigned long long base;

	SIM_DEVICE_CALL(nvmlDeviceGetRetiredPages, device, 0);
	if (!pageCount || (cause != NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS &&
	                   cause != NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR))
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if (!has_retirement(c.g))
		return sim_end(NVML_ERROR_NOT_SUPPORTED);
	n = cause == NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR ? c.g->retired_dbe
	                                                             : c.g->retired_sbe;
	base = cause == NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR ? 0x200000ULL : 0x100000ULL;
	if (*pageCount < n) {
		*pageCount = n;
		return sim_end(NVML_ERROR_INSUFFICIENT_SIZE);
	}
	if (n && !addresses)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	for (unsigned int i = 0; i < n; i++)
		addresses[i] = base + (unsigned long long)i * 0x10ULL;
	*pageCount = n;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device,
                                                               nvmlEnableState_t *isPending)
{
	SIM_DEVICE_CALL(nvmlDeviceGetRetiredPagesPendingStatus, device, 0);
	if (!isPending)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if (!has_retirement(c.g))
		return sim_end(NVML_ERROR_NOT_SUPPORTED);
	*isPending = c.g->retired_pending ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows,
                                                  unsigned int *uncRows, unsigned int *isPending,
                                                  unsigned int *failureOccurred)
{
	const struct sim_gpu *g;

	SIM_DEVICE_CALL(nvmlDeviceGetRemappedRows, device, 0);
	g = c.g;
	if (!corrRows || !uncRows || !isPending || !failureOccurred)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if (!g->has_ecc || g->arch < SIM_ARCH_AMPERE || (g->mig_enabled && g->mig_count > 0))
		return sim_end(NVML_ERROR_NOT_SUPPORTED);
	*corrRows = g->remap_corr;
	*uncRows = g->remap_uncorr;
	*isPending = g->remap_pending;
	*failureOccurred = g->remap_failure;
	return sim_end(NVML_SUCCESS);
}

/* The power fields came with NVML 12.2 (R535; go-nvml's nvml.h): the full and R530 variants
 * know them; the old one, which stands for a driver before nvmlDeviceGetMemoryInfo_v2, answers
 * NOT_SUPPORTED. */
static bool knows_power_fields(void)
{
	return sim_exported(SIM_FN_nvmlDeviceGetMemoryInfo_v2);
}

/* nvml.h: the 1 s average is "supported on Ampere (except GA100) or newer"; GA100 is the A100,
 * A30 and A800 (nvmlDeviceGetPowerUsage gives those the instant draw). */
static bool power_averaged(const struct sim_gpu *g)
{
	if (g->arch < SIM_ARCH_AMPERE)
		return false;
	return g->arch > SIM_ARCH_AMPERE ||
	       !(strstr(g->name, "A100") || strstr(g->name, "A30") || strstr(g->name, "A800"));
}

/* One field value as its direct call would answer it (injected errors included): the ECC totals
 * as nvmlDeviceGetTotalEccErrors, the PCIe replay counter as nvmlDeviceGetPcieReplayCounter,
 * remapped rows as nvmlDeviceGetRemappedRows, retired pages as nvmlDeviceGetRetiredPages (their
 * count) and nvmlDeviceGetRetiredPagesPendingStatus, the ECC modes as nvmlDeviceGetEccMode, the
 * state of link scope as nvmlDeviceGetNvLinkState, the power draw and limit as
 * nvmlDeviceGetPowerUsage and nvmlDeviceGetEnforcedPowerLimit, the NVSwitch links as
 * nvmlDeviceGetNvLinkRemoteDeviceType would count them. Returns false for a field id it does not
 * model. */
static bool health_field(const struct sim_call *c, unsigned int id, unsigned int scope,
                         nvmlReturn_t *r, unsigned long long *v)
{
	const struct sim_gpu *g = c->g;
	enum sim_fn fn;

	switch (id) {
	case NVML_FI_DEV_ECC_SBE_VOL_TOTAL:
	case NVML_FI_DEV_ECC_DBE_VOL_TOTAL:
	case NVML_FI_DEV_ECC_SBE_AGG_TOTAL:
	case NVML_FI_DEV_ECC_DBE_AGG_TOTAL:
		fn = SIM_FN_nvmlDeviceGetTotalEccErrors;
		*r = g->has_ecc && g->ecc_enabled ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
		*v = id == NVML_FI_DEV_ECC_SBE_VOL_TOTAL   ? g->ecc_vol_corr
		     : id == NVML_FI_DEV_ECC_DBE_VOL_TOTAL ? g->ecc_vol_uncorr
		     : id == NVML_FI_DEV_ECC_SBE_AGG_TOTAL ? g->ecc_agg_corr
		                                           : g->ecc_agg_uncorr;
		break;
	case NVML_FI_DEV_PCIE_REPLAY_COUNTER:
		fn = SIM_FN_nvmlDeviceGetPcieReplayCounter;
		*r = NVML_SUCCESS;
		*v = g->pcie_replay;
		break;
	case NVML_FI_DEV_REMAPPED_COR:
	case NVML_FI_DEV_REMAPPED_UNC:
	case NVML_FI_DEV_REMAPPED_PENDING:
	case NVML_FI_DEV_REMAPPED_FAILURE:
		fn = SIM_FN_nvmlDeviceGetRemappedRows;
		*r = !g->has_ecc || g->arch < SIM_ARCH_AMPERE ||
		                     (g->mig_enabled && g->mig_count > 0)
		             ? NVML_ERROR_NOT_SUPPORTED
		             : NVML_SUCCESS;
		*v = id == NVML_FI_DEV_REMAPPED_COR       ? g->remap_corr
		     : id == NVML_FI_DEV_REMAPPED_UNC     ? g->remap_uncorr
		     : id == NVML_FI_DEV_REMAPPED_PENDING ? g->remap_pending
		                                          : g->remap_failure;
		break;
	case NVML_FI_DEV_ECC_CURRENT:
	case NVML_FI_DEV_ECC_PENDING:
		fn = SIM_FN_nvmlDeviceGetEccMode;
		*r = g->has_ecc ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
		*v = id == NVML_FI_DEV_ECC_CURRENT ? g->ecc_enabled : g->ecc_pending;
		break;
	case NVML_FI_DEV_RETIRED_SBE:
	case NVML_FI_DEV_RETIRED_DBE:
		fn = SIM_FN_nvmlDeviceGetRetiredPages;
		*r = has_retirement(g) ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
		*v = id == NVML_FI_DEV_RETIRED_SBE ? g->retired_sbe : g->retired_dbe;
		break;
	case NVML_FI_DEV_RETIRED_PENDING:
		fn = SIM_FN_nvmlDeviceGetRetiredPagesPendingStatus;
		*r = has_retirement(g) ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
		*v = g->retired_pending ? 1 : 0;
		break;
	case NVML_FI_DEV_POWER_AVERAGE:
	case NVML_FI_DEV_POWER_INSTANT:
		fn = SIM_FN_nvmlDeviceGetPowerUsage;
		*r = g->power_draw_mw.valid && knows_power_fields() &&
		                     (id == NVML_FI_DEV_POWER_INSTANT || power_averaged(g))
		             ? NVML_SUCCESS
		             : NVML_ERROR_NOT_SUPPORTED;
		*v = g->power_draw_mw.v;
		break;
	case NVML_FI_DEV_POWER_CURRENT_LIMIT:
		fn = SIM_FN_nvmlDeviceGetEnforcedPowerLimit;
		*r = g->power_limit_mw.valid && knows_power_fields() ? NVML_SUCCESS
		                                                     : NVML_ERROR_NOT_SUPPORTED;
		*v = g->power_limit_mw.v;
		break;
	case NVML_FI_DEV_NVSWITCH_CONNECTED_LINK_COUNT:
		fn = SIM_FN_nvmlDeviceGetNvLinkRemoteDeviceType;
		*r = g->link_count > 0 ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
		*v = sim_nvswitch_links(c);
		break;
	case NVML_FI_DEV_NVLINK_GET_STATE: {
		bool active = false;

		fn = SIM_FN_nvmlDeviceGetNvLinkState;
		*r = sim_nvlink_state(c, scope, &active);
		*v = active ? NVML_NVLINK_STATE_ACTIVE : NVML_NVLINK_STATE_INACTIVE;
		break;
	}
	default:
		return false;
	}
	if (!sim_exported(fn))
		*r = NVML_ERROR_NOT_SUPPORTED; /* a driver older than the call knows no such field
		                                */
	else if (*r == NVML_SUCCESS)
		*r = sim_injected(fn, (int)c->gpu);
	return true;
}

/* Field values: NVML_FI_DEV_GET_GPU_RECOVERY_ACTION from the scenario's recovery_action
 * (absent: NOT_SUPPORTED, as on drivers that predate it) and NVML_FI_DEV_MEMORY_TEMP from
 * temperature_memory_c (absent: no memory sensor), NVML_FI_DEV_NVLINK_LINK_COUNT from the
 * wiring (0 without NVLink), the health counters, ECC modes and link states as their direct
 * calls (health_field); every
 * other field answers NOT_SUPPORTED in its own entry. The call itself succeeds. */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
                                                 nvmlFieldValue_t *values)
{
	struct timespec ts;

	SIM_DEVICE_CALL(nvmlDeviceGetFieldValues, device, 0);
	if (valuesCount < 0 || (valuesCount > 0 && !values))
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	clock_gettime(CLOCK_REALTIME, &ts);
	for (int k = 0; k < valuesCount; k++) {
		nvmlFieldValue_t *v = &values[k];

		v->timestamp = (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
		v->latencyUsec = 0;
		const struct sim_opt *o =
		        v->fieldId == NVML_FI_DEV_GET_GPU_RECOVERY_ACTION ? &c.g->recovery_action
		        : v->fieldId == NVML_FI_DEV_MEMORY_TEMP ? &c.g->temperature_memory_c
		                                                : NULL;

		nvmlReturn_t hr;
		unsigned long long hv;

		if (health_field(&c, v->fieldId, v->scopeId, &hr, &hv)) {
			v->nvmlReturn = hr;
			if (hr == NVML_SUCCESS) {
				v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
				v->value.ullVal = hv;
			}
		} else if (v->fieldId == NVML_FI_DEV_NVLINK_LINK_COUNT) {
			/* the links present: the wired ones less those the part has disabled */
			uint64_t wired = c.g->link_count >= 64
			                         ? ~UINT64_C(0)
			                         : (UINT64_C(1) << c.g->link_count) - 1;
			v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
			v->value.uiVal =
			        (unsigned int)__builtin_popcountll(wired & ~c.g->nvlink_disabled);
			v->nvmlReturn = NVML_SUCCESS;
		} else if (o && o->valid) {
			v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
			v->value.uiVal = (unsigned int)o->v;
			v->nvmlReturn = NVML_SUCCESS;
		} else {
			v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
		}
	}
	return sim_end(NVML_SUCCESS);
}
