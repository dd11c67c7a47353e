// SPDX-License-Identifier: MIT
/*
 * nvml-link.c: NVLinks and the facts of each pair of GPUs: the links' states and error
 * counters, which GPU or NVSwitch each link reaches, the PCIe common ancestor and P2P status.
 *
 * Decisions:
 * - NVLink: per GPU, as many links as NVML_FI_DEV_NVLINK_LINK_COUNT says it has, past links
 *   that answer NOT_SUPPORTED (disabled links can sit mid-range), else links 0..35 until
 *   INVALID_ARGUMENT; inactive links are skipped; a link whose far end is a GPU of this machine
 *   (remote PCI bus id) counts for that pair, a link into an NVSwitch counts as a switch link.
 *   Without nvmlDeviceGetNvLinkRemoteDeviceType a link to a bus id that is no GPU of ours is
 *   taken as a switch link (the only NVLink peers besides GPUs are NVSwitches and IBM NPUs,
 *   and NVLink-to-CPU POWER systems predate neither call).
 * - The links' states come with the GPU's field values (NVML_FI_DEV_NVLINK_GET_STATE, one
 *   entry per link, nvml-health.c): one call instead of one per link. A driver whose field
 *   values do not answer gets nvmlDeviceGetNvLinkState per link, as before. Without the pair
 *   facts (GPUCTL_SNAP_NVLINK_STATE), whether the GPU reaches NVSwitches comes in the same call
 *   (NVML_FI_DEV_NVSWITCH_CONNECTED_LINK_COUNT), and the first active link's far end is asked
 *   only when that entry does not answer.
 * - Facts only: what is derived from them (the pair bandwidth, model/topo.c) is filled by
 *   snapshot-take.c (docs/topology.md).
 */
#include <stdint.h>
#include <stdlib.h>

#include "nvml-abi.h"
#include "nvml-internal.h"
#include "snapshot-internal.h"
#include "util.h"

/* The NVLink count an NVML_FI_DEV_NVLINK_LINK_COUNT entry holds, or -1 when it holds none. */
int nvml_link_count_of(const nvmlFieldValue_t *fv)
{
	if (fv->nvmlReturn != NVML_SUCCESS || fv->valueType != 1 /* unsigned int */ ||
	    fv->value.uiVal > NVML_NVLINK_MAX_LINKS)
		return -1;
	return (int)fv->value.uiVal;
}

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
		nvml_format_bus_id(buf, size, pci.domain, pci.bus, pci.device);
		return true;
	}
	nvmlPciInfo_v1_t pci = {0};
	if (!CALL(rd, i, nvlink_remote_pci_v1, dev, link, &pci))
		return false;
	nvml_format_bus_id(buf, size, pci.domain, pci.bus, pci.device);
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
	return nvml_link_count_of(&fv);
}

/* Walks GPU i's NVLinks: adds direct links to row i of direct[], counts switch links. A link
 * that answers NOT_SUPPORTED may sit in the middle of the range (parts with fewer links than
 * their die have some disabled), so the walk goes on past it, until it has seen as many links
 * as the device has (nvlink_count), or through every link number NVML allows when the driver
 * does not say. direct NULL (GPUCTL_SNAP_NVLINK_STATE without topology): the links' states,
 * and whether the first active link reaches an NVSwitch, are all the health checks use, so the
 * far ends are not read beyond that. */
void nvml_read_nvlinks(struct reader *rd, size_t i, nvmlDevice_t dev, int *direct)
{
	struct gpuctl_gpu *g = &rd->snap->gpus[i];
	bool far_end_asked = false;
	int count;

	const struct nvml_link_states *ls =
	        rd->link_states && rd->link_states[i].read ? &rd->link_states[i] : NULL;

	if (!ls && !rd->nv->sym.nvlink_state) {
		nvml_symbol_missing(rd, rd->nv->name.nvlink_state);
		return;
	}
	g->has_nvlink_state = true;
	/* the states alone: the field values' NVSwitch link count, when they gave it, says
	 * whether the GPU reaches NVSwitches, and no link's far end is asked */
	if (!direct && rd->link_states && rd->link_states[i].switch_read) {
		g->nvswitch_links = rd->link_states[i].switch_links;
		far_end_asked = true;
	}
	count = nvlink_count(rd, i, dev);
	for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS && nvml_gpu_readable(rd, i) &&
	                        (count < 0 || g->nvlink_present < count);
	     link++) {
		nvmlEnableState_t active = NVML_FEATURE_DISABLED;
		nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
		char bus[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
		/* the state the field values gave, else of its own call */
		nvmlReturn_t r = ls ? ls->r[link] : RAW(rd, i, nvlink_state, dev, link, &active);
		const char *fname = ls ? rd->nv->name.field_values : rd->nv->name.nvlink_state;
		size_t peer;

		if (ls && r == NVML_SUCCESS)
			active = ls->active[link] ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;

		if (r == NVML_ERROR_INVALID_ARGUMENT)
			break; /* past the link numbers this driver knows */
		if (r == NVML_ERROR_NOT_SUPPORTED)
			continue; /* a disabled link (or, without a count, no NVLink) */
		if (r != NVML_SUCCESS) {
			rd->reading_nvlink = true;
			(void)nvlink_read_done(rd, nvml_check_result(rd, i, fname, r, false));
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

void nvml_read_topology(struct reader *rd)
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
		if (nvml_gpu_readable(rd, i))
			nvml_read_nvlinks(rd, i, rd->handles[i], direct);

	for (size_t a = 0; a < n; a++)
		for (size_t b = a + 1; b < n; b++) {
			const struct gpuctl_gpu *ga = &rd->snap->gpus[a], *gb = &rd->snap->gpus[b];
			struct gpuctl_link l = {.level = GPUCTL_TOPO_UNKNOWN,
			                        .p2p = GPUCTL_P2P_UNKNOWN};
			nvmlGpuTopologyLevel_t level;
			nvmlGpuP2PStatus_t st;
			int d_ab = direct[a * n + b], d_ba = direct[b * n + a];

			if (nvml_gpu_readable(rd, a) && nvml_gpu_readable(rd, b)) {
				if (!rd->nv->sym.common_ancestor)
					nvml_symbol_missing(rd, rd->nv->name.common_ancestor);
				else if (nvml_check_result(rd, a, rd->nv->name.common_ancestor,
				                           RAW(rd, a, common_ancestor,
				                               rd->handles[a], rd->handles[b],
				                               &level),
				                           true))
					l.level = level_of(level);
				if (!rd->nv->sym.p2p_status)
					nvml_symbol_missing(rd, rd->nv->name.p2p_status);
				else if (nvml_check_result(rd, a, rd->nv->name.p2p_status,
				                           RAW(rd, a, p2p_status, rd->handles[a],
				                               rd->handles[b],
				                               NVML_P2P_CAPS_INDEX_READ, &st),
				                           true))
					l.p2p = st <= NVML_P2P_STATUS_NOT_SUPPORTED
					                ? (int)st
					                : GPUCTL_P2P_UNKNOWN;
			}
			/* A pair with a lost GPU has no facts: its walk may have stopped part-way
			 * (a count of 5 of 12 links would be a wrong fact, not a missing one). */
			if (!nvml_gpu_readable(rd, a) || !nvml_gpu_readable(rd, b)) {
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
