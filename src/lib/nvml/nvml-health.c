// SPDX-License-Identifier: MIT
/*
 * nvml-health.c: the facts read through nvmlDeviceGetFieldValues (memory temperature, recovery
 * action, and the health counters that ride along), and the health facts asked of their own
 * calls: PCIe replays, ECC totals, retired pages, remapped rows.
 *
 * Decisions:
 * - Calls that cannot succeed are not made: ECC counters only when ECC is on, retired pages
 *   only before Ampere, remapped rows only from Ampere on (docs/health.md).
 * - A counter a field value answered is not asked again of its own call.
 */
#include <stdint.h>
#include <stdio.h>

#include "ctx.h"
#include "nvml-abi.h"
#include "nvml-internal.h"
#include "snapshot-internal.h"
#include "util.h"

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
 * (PCIe replays, ECC totals, remapped rows) ride along in the same call: nvml_read_health asks the
 * direct functions only for those no entry answered, so a driver without the field ids costs
 * nothing more than before. */
void nvml_read_field_values(struct reader *rd, size_t i, nvmlDevice_t dev)
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
	const bool ecc_on = health && nvml_field_is(g, GPUCTL_F_ECC_MODE, 1);
	const bool when_ok[] = {
	        [FV_ALWAYS] = true,
	        [FV_HEALTH] = health,
	        [FV_ECC] = ecc_on,
	        [FV_ECC_AMPERE] = ecc_on && nvml_arch_rank(g) >= NVML_RANK_AMPERE,
	};
	nvmlFieldValue_t fv[sizeof(known) / sizeof(known[0]) + 1];
	size_t which[sizeof(known) / sizeof(known[0]) + 1], n = 0;
	uint64_t asked = 0;

	for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++)
		if (nvml_want(rd, known[k].f) && when_ok[known[k].when]) {
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
			rd->nvlink_count[i] = nvml_link_count_of(&fv[j]);
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
		nvml_set_int(rd, i, known[which[j]].f, known[which[j]].flag ? v != 0 : v);
	}
}

/* Field f is not wanted, or already read. */
static bool wanted_valid(const struct reader *rd, const struct gpuctl_gpu *g, enum gpuctl_field f)
{
	return !nvml_want(rd, f) || g->valid[f];
}

void nvml_read_health(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	const struct gpuctl_gpu *g = &rd->snap->gpus[i];
	unsigned long long ull;
	unsigned u1, u2, u3, u4;
	nvmlEnableState_t e;
	int rank = nvml_arch_rank(g);

	/* What nvml_read_field_values got is not asked again (valid already). */
	if (nvml_want(rd, GPUCTL_F_PCIE_REPLAY) && !g->valid[GPUCTL_F_PCIE_REPLAY] &&
	    READ(rd, i, FBIT(GPUCTL_F_PCIE_REPLAY), pcie_replay, dev, &u1))
		nvml_set_int(rd, i, GPUCTL_F_PCIE_REPLAY, u1);
	/* Memory error counters exist only with ECC on; a GPU whose ECC mode reads as off or
	 * unsupported (GeForce) has none, so they are not asked for. */
	if (nvml_field_is(g, GPUCTL_F_ECC_MODE, 0) ||
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
		if (nvml_want(rd, ecc[k].f) && !g->valid[ecc[k].f] &&
		    READ(rd, i, FBIT(ecc[k].f), total_ecc, dev, ecc[k].type, ecc[k].counter, &ull))
			nvml_set_int(rd, i, ecc[k].f, (int64_t)ull);

	if (rank == 0 || rank < NVML_RANK_AMPERE) {
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

			if (!nvml_want(rd, pages[k].f))
				continue;
			if (!nvml_gpu_readable(rd, i))
				break;
			if (!rd->nv->sym.retired_pages) {
				nvml_symbol_missing(rd, rd->nv->name.retired_pages);
				break;
			}
			/* count 0 and no buffer asks for the number only */
			r = RAW(rd, i, retired_pages, dev, pages[k].cause, &count, NULL);
			if (r == NVML_ERROR_INSUFFICIENT_SIZE || r == NVML_SUCCESS)
				nvml_set_int(rd, i, pages[k].f, count);
			else {
				rd->reading = FBIT(pages[k].f);
				(void)nvml_read_done(
				        rd, nvml_check_result(rd, i, rd->nv->name.retired_pages, r,
				                              false));
			}
		}
		if (nvml_want(rd, GPUCTL_F_RETIRED_PENDING) &&
		    READ(rd, i, FBIT(GPUCTL_F_RETIRED_PENDING), retired_pending, dev, &e))
			nvml_set_int(rd, i, GPUCTL_F_RETIRED_PENDING, e == NVML_FEATURE_ENABLED);
	}
	if (rank == 0 || rank >= NVML_RANK_AMPERE) {
		if ((nvml_want(rd, GPUCTL_F_REMAP_CORRECTABLE) ||
		     nvml_want(rd, GPUCTL_F_REMAP_UNCORRECTABLE) ||
		     nvml_want(rd, GPUCTL_F_REMAP_PENDING) ||
		     nvml_want(rd, GPUCTL_F_REMAP_FAILURE)) &&
		    !(wanted_valid(rd, g, GPUCTL_F_REMAP_CORRECTABLE) &&
		      wanted_valid(rd, g, GPUCTL_F_REMAP_UNCORRECTABLE) &&
		      wanted_valid(rd, g, GPUCTL_F_REMAP_PENDING) &&
		      wanted_valid(rd, g, GPUCTL_F_REMAP_FAILURE)) &&
		    READ(rd, i,
		         FBIT(GPUCTL_F_REMAP_CORRECTABLE) | FBIT(GPUCTL_F_REMAP_UNCORRECTABLE) |
		                 FBIT(GPUCTL_F_REMAP_PENDING) | FBIT(GPUCTL_F_REMAP_FAILURE),
		         remapped_rows, dev, &u1, &u2, &u3, &u4)) {
			nvml_set_int(rd, i, GPUCTL_F_REMAP_CORRECTABLE, u1);
			nvml_set_int(rd, i, GPUCTL_F_REMAP_UNCORRECTABLE, u2);
			nvml_set_int(rd, i, GPUCTL_F_REMAP_PENDING, u3 != 0);
			nvml_set_int(rd, i, GPUCTL_F_REMAP_FAILURE, u4 != 0);
		}
	}
}
