/* Simulated NVML: topology (CPU and memory affinity, NUMA id, PCIe common ancestor, P2P
 * status, NVLink state and remote ends). The derivation rules live in scenario.c so unit
 * tests can check them directly; this file applies the dynamic facts on top: NVLinks taken
 * down with nvsim (at either end), and MIG (a MIG-enabled GPU's NVLinks are inactive, at its
 * peers' ends too; MIG device handles have no P2P: status NOT_SUPPORTED). NVSwitch remote ends
 * report device type SWITCH and a PCI bus id distinct from every GPU's, with the NVSwitch device id
 * 0x1AF1 (DGX A100 NVSwitch). */
#include "internal.h"
#include "../util.h"

#define NVSWITCH_PCI_DEVICE_ID 0x1AF110DEU

SIM_EXPORT nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int cpuSetSize,
                                                 unsigned long *cpuSet)
{
	SIM_DEVICE_CALL(nvmlDeviceGetCpuAffinity, device, 0);
	if (!cpuSet || cpuSetSize == 0)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if (!c.g->cpu_affinity)
		return sim_end(NVML_ERROR_NOT_SUPPORTED);
	for (unsigned int i = 0; i < cpuSetSize; i++)
		cpuSet[i] = i < c.g->cpu_words ? c.g->cpu_affinity[i] : 0;
	return sim_end(NVML_SUCCESS);
}

static void set_bit(unsigned long *set, unsigned int words, int bit)
{
	const unsigned int bits = 8 * sizeof(unsigned long);

	if (bit >= 0 && (unsigned int)bit / bits < words)
		set[(unsigned int)bit / bits] |= 1UL << ((unsigned int)bit % bits);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryAffinity(nvmlDevice_t device, unsigned int nodeSetSize,
                                                    unsigned long *nodeSet,
                                                    nvmlAffinityScope_t scope)
{
	const struct sim_scenario *s = sim_lib.sc;
	int socket = -1;

	SIM_DEVICE_CALL(nvmlDeviceGetMemoryAffinity, device, 0);
	if (!nodeSet || nodeSetSize == 0 ||
	    (scope != NVML_AFFINITY_SCOPE_NODE && scope != NVML_AFFINITY_SCOPE_SOCKET))
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	memset(nodeSet, 0, nodeSetSize * sizeof(unsigned long));
	if (scope == NVML_AFFINITY_SCOPE_NODE) {
		set_bit(nodeSet, nodeSetSize, c.g->numa_node);
		return sim_end(NVML_SUCCESS);
	}
	for (size_t i = 0; i < s->n_nodes; i++)
		if (s->nodes[i].node == c.g->numa_node)
			socket = s->nodes[i].socket;
	if (socket < 0) {
		set_bit(nodeSet, nodeSetSize, c.g->numa_node);
		return sim_end(NVML_SUCCESS);
	}
	for (size_t i = 0; i < s->n_nodes; i++)
		if (s->nodes[i].socket == socket)
			set_bit(nodeSet, nodeSetSize, s->nodes[i].node);
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int *node)
{
	SIM_DEVICE_CALL(nvmlDeviceGetNumaNodeId, device, 0);
	if (!node)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if (!c.g->gpu_numa_node.valid)
		return sim_end(NVML_ERROR_NOT_SUPPORTED);
	*node = (unsigned int)c.g->gpu_numa_node.v;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1,
                                                            nvmlDevice_t device2,
                                                            nvmlGpuTopologyLevel_t *pathInfo)
{
	struct sim_call c2;
	nvmlReturn_t r;

	SIM_DEVICE_CALL(nvmlDeviceGetTopologyCommonAncestor, device1, 0);
	r = sim_resolve(device2, &c2);
	if (r != NVML_SUCCESS)
		return sim_end(r);
	if (c2.m)
		return sim_end(NVML_ERROR_NOT_SUPPORTED);
	if (!pathInfo || c.gpu == c2.gpu)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	*pathInfo = (nvmlGpuTopologyLevel_t)sim_common_ancestor(sim_lib.sc, c.gpu, c2.gpu);
	return sim_end(NVML_SUCCESS);
}

/* One end of a link is up: the GPU is not in MIG mode, the scenario does not declare the link
 * down (nvlink.down) and nvsim did not take it down. */
static bool end_up(unsigned int gpu, unsigned int link)
{
	const struct sim_gpu *g = &sim_lib.sc->gpus[gpu];

	return link < g->link_count && !g->mig_enabled && !g->links[link].down &&
	       !(g->nvlink_disabled & (1ULL << link)) &&
	       !(sim_lib.dyn.gpus[gpu].nvlink_down & (1ULL << link));
}

/* A link is active when both its ends are up (a GPU-to-GPU link to a MIG-mode peer, or one
 * taken down at the peer's end, is down for both GPUs, as on the hardware). */
static bool link_active(unsigned int gpu, unsigned int link)
{
	const struct sim_link *l = &sim_lib.sc->gpus[gpu].links[link];

	if (!end_up(gpu, link))
		return false;
	return l->to_switch || end_up(l->remote, l->remote_link);
}

/* Whether a and b reach each other over at least one active NVLink. */
static bool nvlink_up_between(unsigned int a, unsigned int b)
{
	const struct sim_gpu *ga = &sim_lib.sc->gpus[a], *gb = &sim_lib.sc->gpus[b];
	bool a_up = false, b_up = false;

	if (!sim_nvlink_connected(sim_lib.sc, a, b))
		return false;
	if (!sim_lib.sc->nvswitch) {
		for (unsigned int l = 0; l < ga->link_count; l++)
			if (ga->links[l].remote == b && link_active(a, l))
				return true;
		return false;
	}
	for (unsigned int l = 0; l < ga->link_count; l++)
		a_up |= link_active(a, l);
	for (unsigned int l = 0; l < gb->link_count; l++)
		b_up |= link_active(b, l);
	return a_up && b_up;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2,
                                               nvmlGpuP2PCapsIndex_t p2pIndex,
                                               nvmlGpuP2PStatus_t *p2pStatus)
{
	struct sim_call c2;
	nvmlReturn_t r;

	SIM_DEVICE_CALL(nvmlDeviceGetP2PStatus, device1, SIM_MIG_OK);
	r = sim_resolve(device2, &c2);
	if (r != NVML_SUCCESS)
		return sim_end(r);
	if (!p2pStatus || (unsigned int)p2pIndex >= NVML_P2P_CAPS_INDEX_UNKNOWN)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if (c.gpu == c2.gpu && !c.m && !c2.m)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if (c.m || c2.m) {
		*p2pStatus = NVML_P2P_STATUS_NOT_SUPPORTED;
		return sim_end(NVML_SUCCESS);
	}
	if (p2pIndex == NVML_P2P_CAPS_INDEX_NVLINK) {
		*p2pStatus = nvlink_up_between(c.gpu, c2.gpu) ? NVML_P2P_STATUS_OK
		                                              : NVML_P2P_STATUS_NOT_SUPPORTED;
		return sim_end(NVML_SUCCESS);
	}
	*p2pStatus = (nvmlGpuP2PStatus_t)sim_p2p_status(sim_lib.sc, c.gpu, c2.gpu);
	return sim_end(NVML_SUCCESS);
}

static nvmlReturn_t check_link(const struct sim_call *c, unsigned int link)
{
	if (link >= SIM_MAX_LINKS)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (link >= c->g->link_count || (c->g->nvlink_disabled & (UINT64_C(1) << link)))
		return NVML_ERROR_NOT_SUPPORTED;
	return NVML_SUCCESS;
}

nvmlReturn_t sim_nvlink_state(const struct sim_call *c, unsigned int link, bool *active)
{
	nvmlReturn_t r = check_link(c, link);

	if (r == NVML_SUCCESS)
		*active = link_active(c->gpu, link);
	return r;
}

unsigned int sim_nvswitch_links(const struct sim_call *c)
{
	unsigned int n = 0;

	for (unsigned int link = 0; link < c->g->link_count && link < SIM_MAX_LINKS; link++)
		if (check_link(c, link) == NVML_SUCCESS && link_active(c->gpu, link) &&
		    c->g->links[link].to_switch)
			n++;
	return n;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                                 nvmlEnableState_t *isActive)
{
	nvmlReturn_t r;
	bool active = false;

	SIM_DEVICE_CALL(nvmlDeviceGetNvLinkState, device, 0);
	if (!isActive)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if ((r = sim_nvlink_state(&c, link, &active)) != NVML_SUCCESS)
		return sim_end(r);
	*isActive = active ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
	return sim_end(NVML_SUCCESS);
}

/* Error counters of a link from state.json (nvsim set nvlink.N.replay=...); ECC_DATA is 0. A
 * link that exists answers whether up or down, as NVML keeps the counts of a down link. */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t device, unsigned int link,
                                                        unsigned int counter,
                                                        unsigned long long *counterValue)
{
	nvmlReturn_t r;

	SIM_DEVICE_CALL(nvmlDeviceGetNvLinkErrorCounter, device, 0);
	if (!counterValue || counter > 4)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if ((r = check_link(&c, link)) != NVML_SUCCESS)
		return sim_end(r);
	*counterValue = counter < 4 ? sim_lib.dyn.gpus[c.gpu].nvlink_err[link][counter] : 0;
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                            nvmlPciInfo_t *pci)
{
	const struct sim_link *l;
	const struct sim_gpu *remote;
	nvmlReturn_t r;

	SIM_DEVICE_CALL(nvmlDeviceGetNvLinkRemotePciInfo_v2, device, 0);
	if (!pci)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if ((r = check_link(&c, link)) != NVML_SUCCESS)
		return sim_end(r);
	l = &c.g->links[link];
	if (l->to_switch) {
		sim_fill_pci(pci, sim_lib.sc->switch_bus_id[l->remote], NVSWITCH_PCI_DEVICE_ID);
	} else {
		remote = &sim_lib.sc->gpus[l->remote];
		sim_fill_pci(pci, remote->pci_bus_id, remote->pci_device_id);
	}
	return sim_end(NVML_SUCCESS);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                            nvmlIntNvLinkDeviceType_t *type)
{
	nvmlReturn_t r;

	SIM_DEVICE_CALL(nvmlDeviceGetNvLinkRemoteDeviceType, device, 0);
	if (!type)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if ((r = check_link(&c, link)) != NVML_SUCCESS)
		return sim_end(r);
	*type = c.g->links[link].to_switch ? NVML_NVLINK_DEVICE_TYPE_SWITCH
	                                   : NVML_NVLINK_DEVICE_TYPE_GPU;
	return sim_end(NVML_SUCCESS);
}

/* A link's NVLink generation follows the GPU's architecture (NVIDIA's NVLink generations:
 * Pascal P100 1.0, Volta V100 and Turing's bridges 2.0, Ampere 3.0, Hopper 4.0, Blackwell 5.0),
 * in nvmlNvlinkVersion_t's numbering. A link that exists answers whether up or down. */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t device, unsigned int link,
                                                   unsigned int *version)
{
	nvmlReturn_t r;

	SIM_DEVICE_CALL(nvmlDeviceGetNvLinkVersion, device, 0);
	if (!version)
		return sim_end(NVML_ERROR_INVALID_ARGUMENT);
	if ((r = check_link(&c, link)) != NVML_SUCCESS)
		return sim_end(r);
	switch (c.g->arch) {
	case SIM_ARCH_PASCAL:
		*version = NVML_NVLINK_VERSION_1_0;
		break;
	case SIM_ARCH_VOLTA:
	case SIM_ARCH_TURING:
		*version = NVML_NVLINK_VERSION_2_0;
		break;
	case SIM_ARCH_AMPERE:
		*version = NVML_NVLINK_VERSION_3_0;
		break;
	case SIM_ARCH_HOPPER:
		*version = NVML_NVLINK_VERSION_4_0;
		break;
	case SIM_ARCH_BLACKWELL:
		*version = NVML_NVLINK_VERSION_5_0;
		break;
	default:
		return sim_end(NVML_ERROR_NOT_SUPPORTED); /* no NVLink on this architecture */
	}
	return sim_end(NVML_SUCCESS);
}
