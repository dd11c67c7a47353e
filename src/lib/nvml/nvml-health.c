// SPDX-License-Identifier: MIT
/*
 * nvml-health.c: the facts read through nvmlDeviceGetFieldValues (memory temperature, recovery
 * action, and the ECC mode, power draw and limit, health counters, NVLink states and NVSwitch
 * links that ride along), and the health facts asked of their own calls: PCIe replays, ECC
 * totals, retired pages, remapped rows.
 *
 * Decisions:
 * - Calls that cannot succeed are not made: ECC counters only when ECC is on, retired pages
 *   only before Ampere, remapped rows only from Ampere on (docs/health.md).
 * - A fact a field value answered is not asked again of its own call.
 * - The architecture is not read for the health facts when the field values tell: a GPU whose
 *   remapped-row entries answer remaps rows (Ampere and later), so it retires no pages, and one
 *   whose retired-page entries answer retires pages (before Ampere). Only a GPU for which
 *   neither answers (a driver without the fields, a MIG GPU) has its architecture read to
 *   choose.
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
	FV_ECC,        /* health snapshots of a GPU whose ECC is not known to be off */
	FV_ECC_AMPERE, /* the same, Ampere and later or not known to be older (row remapping) */
	FV_ECC_BEFORE, /* the same, before Ampere or not known to be later (page retirement) */
};

/* The facts gpuctl reads through nvmlDeviceGetFieldValues. */
static const struct field_value_fact {
	unsigned id;
	enum gpuctl_field f;
	const char *what;
	enum field_when when;
	bool flag;  /* a yes/no value: stored as 0/1 */
	bool judge; /* it stands for a direct call whose errors count (the ECC mode): an error in
	             * its entry is judged as that call's would be */
} known[] = {
        /* the draw: the instant one, then the 1 s average over it where the GPU has one (as
         * nvmlDeviceGetPowerUsage answers, nvml-abi.h) */
        {NVML_FI_DEV_POWER_INSTANT, GPUCTL_F_POWER_DRAW, "instant power draw", FV_ALWAYS, false,
         false},
        {NVML_FI_DEV_POWER_AVERAGE, GPUCTL_F_POWER_DRAW, "average power draw", FV_ALWAYS, false,
         false},
        {NVML_FI_DEV_POWER_CURRENT_LIMIT, GPUCTL_F_POWER_LIMIT, "enforced power limit", FV_ALWAYS,
         false, false},
        {NVML_FI_DEV_ECC_CURRENT, GPUCTL_F_ECC_MODE, "ECC mode", FV_ALWAYS, true, true},
        {NVML_FI_DEV_ECC_PENDING, GPUCTL_F_ECC_MODE_PENDING, "pending ECC mode", FV_ALWAYS, true,
         true},
        {NVML_FI_DEV_MEMORY_TEMP, GPUCTL_F_TEMP_MEMORY, "memory temperature", FV_ALWAYS, false,
         false},
        {NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, GPUCTL_F_RECOVERY_ACTION, "GPU recovery action",
         FV_ALWAYS, false, false},
        {NVML_FI_DEV_PCIE_REPLAY_COUNTER, GPUCTL_F_PCIE_REPLAY, "PCIe replay counter", FV_HEALTH,
         false, false},
        {NVML_FI_DEV_ECC_SBE_VOL_TOTAL, GPUCTL_F_ECC_VOL_CORRECTED, "volatile ECC SBE", FV_ECC,
         false, false},
        {NVML_FI_DEV_ECC_DBE_VOL_TOTAL, GPUCTL_F_ECC_VOL_UNCORRECTED, "volatile ECC DBE", FV_ECC,
         false, false},
        {NVML_FI_DEV_ECC_SBE_AGG_TOTAL, GPUCTL_F_ECC_AGG_CORRECTED, "aggregate ECC SBE", FV_ECC,
         false, false},
        {NVML_FI_DEV_ECC_DBE_AGG_TOTAL, GPUCTL_F_ECC_AGG_UNCORRECTED, "aggregate ECC DBE", FV_ECC,
         false, false},
        {NVML_FI_DEV_REMAPPED_COR, GPUCTL_F_REMAP_CORRECTABLE, "remapped rows (correctable)",
         FV_ECC_AMPERE, false, false},
        {NVML_FI_DEV_REMAPPED_UNC, GPUCTL_F_REMAP_UNCORRECTABLE, "remapped rows (uncorrectable)",
         FV_ECC_AMPERE, false, false},
        {NVML_FI_DEV_REMAPPED_PENDING, GPUCTL_F_REMAP_PENDING, "row remapping pending",
         FV_ECC_AMPERE, true, false},
        {NVML_FI_DEV_REMAPPED_FAILURE, GPUCTL_F_REMAP_FAILURE, "row remapping failure",
         FV_ECC_AMPERE, true, false},
        {NVML_FI_DEV_RETIRED_SBE, GPUCTL_F_RETIRED_SBE, "retired pages (single bit)", FV_ECC_BEFORE,
         false, false},
        {NVML_FI_DEV_RETIRED_DBE, GPUCTL_F_RETIRED_DBE, "retired pages (double bit)", FV_ECC_BEFORE,
         false, false},
        {NVML_FI_DEV_RETIRED_PENDING, GPUCTL_F_RETIRED_PENDING, "page retirement pending",
         FV_ECC_BEFORE, true, false},
};

#define FV_LINK_COUNT   SIZE_MAX       /* which[]: the NVLink count entry */
#define FV_LINK_STATE   (SIZE_MAX - 1) /* which[]: a link's state (scopeId: the link) */
#define FV_SWITCH_LINKS (SIZE_MAX - 2) /* which[]: the NVLinks into NVSwitches */

/* Whether known[k] may be asked of GPU g now. */
static bool field_value_due(const struct reader *rd, const struct gpuctl_gpu *g, size_t k)
{
	const bool health = rd->flags & GPUCTL_SNAP_HEALTH;
	/* ECC counters exist with ECC on; the mode comes in the same call, so they are asked
	 * unless it is known to be off (and dropped below when it reads off) */
	const bool ecc_maybe = health && !nvml_field_is(g, GPUCTL_F_ECC_MODE, 0);
	const int rank = nvml_arch_rank(g); /* 0: not known */

	switch (known[k].when) {
	case FV_HEALTH:
		return health;
	case FV_ECC:
		return ecc_maybe;
	case FV_ECC_AMPERE:
		return ecc_maybe && (rank == 0 || rank >= NVML_RANK_AMPERE);
	case FV_ECC_BEFORE:
		return ecc_maybe && rank < NVML_RANK_AMPERE;
	case FV_ALWAYS:
	default:
		return true;
	}
}

/* The value of a successful entry; false for a value type gpuctl does not know. */
static bool field_value_int(const nvmlFieldValue_t *fv, int64_t *ret_v)
{
	switch (fv->valueType) {
	case 1: /* unsigned int */
		*ret_v = fv->value.uiVal;
		return true;
	case 2: /* unsigned long */
		*ret_v = (int64_t)fv->value.ulVal;
		return true;
	case 3: /* unsigned long long */
		*ret_v = (int64_t)fv->value.ullVal;
		return true;
	case 4: /* signed long long */
		*ret_v = fv->value.sllVal;
		return true;
	case 5: /* signed int */
		*ret_v = fv->value.siVal;
		return true;
	case 6: /* unsigned short */
		*ret_v = fv->value.usVal;
		return true;
	default:
		return false;
	}
}

/* Keeps the answers of the NVLink state entries for the link walk (nvml-link.c). */
static void keep_link_state(struct reader *rd, size_t i, const nvmlFieldValue_t *fv)
{
	struct nvml_link_states *ls = &rd->link_states[i];
	int64_t v = NVML_NVLINK_STATE_INACTIVE;
	bool ok = fv->nvmlReturn == NVML_SUCCESS && field_value_int(fv, &v);

	if (fv->scopeId >= NVML_NVLINK_MAX_LINKS)
		return;
	ls->read = true;
	ls->r[fv->scopeId] =
	        fv->nvmlReturn == NVML_SUCCESS && !ok ? NVML_ERROR_UNKNOWN : fv->nvmlReturn;
	/* a sleeping link is trained and idle, not down */
	ls->active[fv->scopeId] =
	        ok && (v == NVML_NVLINK_STATE_ACTIVE || v == NVML_NVLINK_STATE_SLEEP);
}

/* Keeps the NVSwitch link count for the link walk, which then asks no link's far end; an entry
 * that did not answer leaves that to the walk (nvmlDeviceGetNvLinkRemoteDeviceType), whose
 * errors are judged. */
static void keep_switch_links(struct reader *rd, size_t i, const nvmlFieldValue_t *fv)
{
	int64_t v;

	if (fv->nvmlReturn != NVML_SUCCESS || !field_value_int(fv, &v) || v < 0 ||
	    v > NVML_NVLINK_MAX_LINKS)
		return;
	rd->link_states[i].switch_read = true;
	rd->link_states[i].switch_links = (int)v;
}

/* A driver that counts NVLinks (field 91) but answers no link's state (it predates field 165:
 * every entry NOT_SUPPORTED or INVALID_ARGUMENT) would look like a GPU without links: its
 * entries are not used, and the walk asks nvmlDeviceGetNvLinkState of each link. */
static void distrust_silent_link_states(struct reader *rd, size_t i)
{
	struct nvml_link_states *ls = &rd->link_states[i];

	if (!ls->read || rd->nvlink_count[i] <= 0)
		return;
	for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; link++)
		if (ls->r[link] != NVML_ERROR_NOT_SUPPORTED &&
		    ls->r[link] != NVML_ERROR_INVALID_ARGUMENT)
			return;
	ls->read = false;
}

/* One known[] entry's answer, into the snapshot. */
static void keep_field_value(struct reader *rd, size_t i, const struct field_value_fact *k,
                             const nvmlFieldValue_t *fv, uint64_t *answered)
{
	int64_t v;

	if (k->judge && fv->nvmlReturn == NVML_ERROR_INVALID_ARGUMENT)
		return; /* a driver that does not know the field: its own call is made */
	if (k->judge) {
		/* as the direct call's result: NOT_SUPPORTED is unavailable, a real error makes
		 * the fact unreadable, GPU_IS_LOST the GPU lost */
		*answered |= FBIT(k->f);
		rd->reading = FBIT(k->f);
		if (!nvml_read_done(rd, nvml_check_result(rd, i, rd->nv->name.field_values,
		                                          fv->nvmlReturn, false)))
			return;
	} else if (fv->nvmlReturn != NVML_SUCCESS) {
		/* Any code, not only NOT_SUPPORTED, means "unavailable" here: drivers that
		 * predate a field answer for it in their own ways, no fault of the GPU. */
		char key[64];
		(void)snprintf(key, sizeof(key), "field:%u:%d", k->id, (int)fv->nvmlReturn);
		ctx_log_once(rd->ctx, key, GPUCTL_LOG_DEBUG,
		             "nvmlDeviceGetFieldValues: %s: NVML error %d; shown as N/A", k->what,
		             (int)fv->nvmlReturn);
		return;
	}
	if (field_value_int(fv, &v))
		nvml_set_int(rd, i, k->f, k->flag ? v != 0 : v);
}

/* The facts gpuctl reads through nvmlDeviceGetFieldValues, all wanted ones in one call; each
 * entry's own return code says whether this driver knows the field (the recovery action came
 * with R565-era drivers; memory temperature is reported by GPUs with HBM). The ECC mode, the
 * health counters (PCIe replays, ECC totals, remapped rows) and, for an NVLink walk, the
 * NVLink count and every link's state ride along in the same call: the direct functions are
 * asked only for what no entry answered (nvml_read_health, the ECC mode's call in
 * nvml-device.c, the link walk), so a driver without the field ids costs nothing more than
 * before. Returns the fields whose entries answered for their direct calls (judge). */
uint64_t nvml_read_field_values(struct reader *rd, size_t i, nvmlDevice_t dev)
{
	const struct gpuctl_gpu *g = &rd->snap->gpus[i];
	const bool links = rd->link_states && rd->nvlink_count &&
	                   (rd->flags & (GPUCTL_SNAP_NVLINK_STATE | GPUCTL_SNAP_TOPOLOGY));
	/* the states alone (no topology walk): whether the GPU reaches NVSwitches is one entry */
	const bool switches = links && !(rd->flags & GPUCTL_SNAP_TOPOLOGY);
	nvmlFieldValue_t fv[ELEMENTSOF(known) + 2 + NVML_NVLINK_MAX_LINKS];
	size_t which[ELEMENTSOF(known) + 2 + NVML_NVLINK_MAX_LINKS], n = 0;
	uint64_t asked = 0, answered = 0;

	/* the two ECC modes are read together, as their one direct call reads them */
	const bool ecc_mode =
	        nvml_want(rd, GPUCTL_F_ECC_MODE) || nvml_want(rd, GPUCTL_F_ECC_MODE_PENDING);

	for (size_t k = 0; k < ELEMENTSOF(known); k++)
		if ((known[k].judge ? ecc_mode : nvml_want(rd, known[k].f)) &&
		    field_value_due(rd, g, k)) {
			fv[n] = (nvmlFieldValue_t){.fieldId = known[k].id};
			which[n++] = k;
			asked |= FBIT(known[k].f);
		}
	/* the NVLink walk's bound and the links' states ride along */
	if (rd->nvlink_count && (n > 0 || links)) {
		fv[n] = (nvmlFieldValue_t){.fieldId = NVML_FI_DEV_NVLINK_LINK_COUNT};
		which[n++] = FV_LINK_COUNT;
	}
	for (unsigned link = 0; links && link < NVML_NVLINK_MAX_LINKS; link++) {
		fv[n] = (nvmlFieldValue_t){.fieldId = NVML_FI_DEV_NVLINK_GET_STATE,
		                           .scopeId = link};
		which[n++] = FV_LINK_STATE;
	}
	if (switches) {
		fv[n] = (nvmlFieldValue_t){.fieldId = NVML_FI_DEV_NVSWITCH_CONNECTED_LINK_COUNT};
		which[n++] = FV_SWITCH_LINKS;
	}
	/* the call failing as a whole: what has a call of its own is asked there next */
	if (n == 0 || !READ(rd, i, asked, field_values, dev, (int)n, fv))
		return 0;
	/* the ECC mode first: ECC counters of a GPU whose ECC reads off are not kept */
	for (size_t j = 0; j < n; j++)
		if (which[j] < ELEMENTSOF(known) && known[which[j]].judge)
			keep_field_value(rd, i, &known[which[j]], &fv[j], &answered);
	for (size_t j = 0; j < n; j++) {
		if (which[j] == FV_LINK_COUNT)
			rd->nvlink_count[i] = nvml_link_count_of(&fv[j]);
		else if (which[j] == FV_LINK_STATE)
			keep_link_state(rd, i, &fv[j]);
		else if (which[j] == FV_SWITCH_LINKS)
			keep_switch_links(rd, i, &fv[j]);
		else if (!known[which[j]].judge && field_value_due(rd, g, which[j]))
			keep_field_value(rd, i, &known[which[j]], &fv[j], &answered);
	}
	if (links)
		distrust_silent_link_states(rd, i);
	return answered;
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
	int rank;

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

	/* Retired pages or remapped rows: entries that answered for one say the GPU has it
	 * (remapped rows from Ampere on, retired pages before); otherwise its architecture says
	 * which it has. */
	const bool remaps = g->valid[GPUCTL_F_REMAP_CORRECTABLE] ||
	                    g->valid[GPUCTL_F_REMAP_UNCORRECTABLE] ||
	                    g->valid[GPUCTL_F_REMAP_PENDING] || g->valid[GPUCTL_F_REMAP_FAILURE];
	const bool retires = g->valid[GPUCTL_F_RETIRED_SBE] || g->valid[GPUCTL_F_RETIRED_DBE] ||
	                     g->valid[GPUCTL_F_RETIRED_PENDING];
	const bool chooses =
	        nvml_want(rd, GPUCTL_F_RETIRED_SBE) || nvml_want(rd, GPUCTL_F_RETIRED_DBE) ||
	        nvml_want(rd, GPUCTL_F_RETIRED_PENDING) ||
	        nvml_want(rd, GPUCTL_F_REMAP_CORRECTABLE) ||
	        nvml_want(rd, GPUCTL_F_REMAP_UNCORRECTABLE) ||
	        nvml_want(rd, GPUCTL_F_REMAP_PENDING) || nvml_want(rd, GPUCTL_F_REMAP_FAILURE);
	if (chooses && !remaps && !retires && !g->valid[GPUCTL_F_ARCHITECTURE] &&
	    !(g->unreadable >> GPUCTL_F_ARCHITECTURE & 1u) && nvml_gpu_readable(rd, i))
		nvml_read_architecture(rd, i, dev);
	rank = remaps ? NVML_RANK_AMPERE : retires ? NVML_RANK_AMPERE - 1 : nvml_arch_rank(g);

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

			if (!nvml_want(rd, pages[k].f) || g->valid[pages[k].f])
				continue; /* not wanted, or the field values answered */
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
		    !g->valid[GPUCTL_F_RETIRED_PENDING] &&
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
