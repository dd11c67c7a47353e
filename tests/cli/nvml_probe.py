"""An independent reading of the machine through NVIDIA's own Python binding (Debian's
python3-pynvml), for tests/cli/test_nvml_clients.py: every NVML query gpuctl's fields rest on,
printed as JSON, so the test can compare it with gpuctl's JSON. Run with Debian's
/usr/bin/python3 on a simulated machine (nvsim exec). A query the device does not support is
null; any other NVML error stops the probe (the test then fails on its exit status).

Nothing here is gpuctl's code or reading of the ABI: pynvml declares the structures itself."""
import json
import sys

import pynvml as N

UNAVAILABLE = (N.NVML_ERROR_NOT_SUPPORTED, N.NVML_ERROR_NOT_FOUND, N.NVML_ERROR_NO_PERMISSION)
CPU_WORDS = 64  # 4096 CPUs, 64-bit words (pynvml's arrays are c_ulonglong)


def q(fn, *args):
    try:
        return fn(*args)
    except N.NVMLError as e:
        if e.value in UNAVAILABLE:
            return None
        raise


def bits(words):
    return sorted(64 * w + b for w, v in enumerate(words) for b in range(64) if v >> b & 1)


def text(v):
    return v.decode() if isinstance(v, bytes) else v


def gpu(i):
    h = N.nvmlDeviceGetHandleByIndex(i)
    pci = N.nvmlDeviceGetPciInfo_v3(h)
    m2 = q(N.nvmlDeviceGetMemoryInfo, h, N.nvmlMemory_v2)
    m1 = q(N.nvmlDeviceGetMemoryInfo, h)
    util = q(N.nvmlDeviceGetUtilizationRates, h)
    ecc = q(N.nvmlDeviceGetEccMode, h)
    mig = q(N.nvmlDeviceGetMigMode, h)
    cpus = q(N.nvmlDeviceGetCpuAffinity, h, CPU_WORDS)
    nodes = q(N.nvmlDeviceGetMemoryAffinity, h, 1, N.NVML_AFFINITY_SCOPE_NODE)
    d = {
        "index": N.nvmlDeviceGetIndex(h),
        "uuid": text(N.nvmlDeviceGetUUID(h)),
        "name": text(N.nvmlDeviceGetName(h)),
        "pci_bus_id": text(pci.busId),
        "pci_device_id": pci.pciDeviceId,
        "serial": text(q(N.nvmlDeviceGetSerial, h)),
        "minor_number": q(N.nvmlDeviceGetMinorNumber, h),
        "compute_cap": "%d.%d" % N.nvmlDeviceGetCudaComputeCapability(h),
        "memory_v2": None if m2 is None else [m2.total, m2.reserved, m2.used, m2.free],
        "memory_v1": None if m1 is None else [m1.total, m1.used, m1.free],
        "utilization": None if util is None else [util.gpu, util.memory],
        "temperature_gpu": q(N.nvmlDeviceGetTemperature, h, N.NVML_TEMPERATURE_GPU),
        "temperature_slowdown": q(N.nvmlDeviceGetTemperatureThreshold, h,
                                  N.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN),
        "temperature_shutdown": q(N.nvmlDeviceGetTemperatureThreshold, h,
                                  N.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN),
        "power_draw": q(N.nvmlDeviceGetPowerUsage, h),
        "power_limit": q(N.nvmlDeviceGetEnforcedPowerLimit, h),
        "clocks_sm": q(N.nvmlDeviceGetClockInfo, h, N.NVML_CLOCK_SM),
        "clocks_mem": q(N.nvmlDeviceGetClockInfo, h, N.NVML_CLOCK_MEM),
        "clocks_max_sm": q(N.nvmlDeviceGetMaxClockInfo, h, N.NVML_CLOCK_SM),
        "clocks_max_mem": q(N.nvmlDeviceGetMaxClockInfo, h, N.NVML_CLOCK_MEM),
        "pcie_gen": q(N.nvmlDeviceGetCurrPcieLinkGeneration, h),
        "pcie_gen_max": q(N.nvmlDeviceGetMaxPcieLinkGeneration, h),
        "pcie_width": q(N.nvmlDeviceGetCurrPcieLinkWidth, h),
        "pcie_width_max": q(N.nvmlDeviceGetMaxPcieLinkWidth, h),
        "ecc_mode": None if ecc is None else list(ecc),
        "ecc": None,
        "retired": None,
        "remapped": None,
        "cpu_affinity": None if cpus is None else bits(cpus),
        "numa_nodes": None if nodes is None else bits(nodes),
        "processes": sorted([p.pid, p.usedGpuMemory]
                            for p in q(N.nvmlDeviceGetComputeRunningProcesses, h) or []),
        "mig_mode": None if mig is None else list(mig),
        "mig_devices": [],
        "nvlinks": [],
    }
    if ecc is not None and ecc[0]:
        d["ecc"] = [q(N.nvmlDeviceGetTotalEccErrors, h, err, counter)
                    for counter in (N.NVML_VOLATILE_ECC, N.NVML_AGGREGATE_ECC)
                    for err in (N.NVML_MEMORY_ERROR_TYPE_CORRECTED,
                                N.NVML_MEMORY_ERROR_TYPE_UNCORRECTED)]
        sbe = q(N.nvmlDeviceGetRetiredPages, h,
                N.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
        dbe = q(N.nvmlDeviceGetRetiredPages, h, N.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
        pending = q(N.nvmlDeviceGetRetiredPagesPendingStatus, h)
        if sbe is not None:
            d["retired"] = [len(sbe), len(dbe), pending]
        # gpuctl asks for memory error counters (ECC, retired pages, remapped rows) only
        # with ECC on (src/lib/nvml/nvml-health.c); the probe asks under the same condition
        d["remapped"] = q(N.nvmlDeviceGetRemappedRows, h)
    if mig is not None and mig[0]:
        for k in range(N.nvmlDeviceGetMaxMigDeviceCount(h)):
            m = q(N.nvmlDeviceGetMigDeviceHandleByIndex, h, k)
            if m is None:
                continue
            d["mig_devices"].append([text(N.nvmlDeviceGetUUID(m)), N.nvmlDeviceGetGpuInstanceId(m),
                                     N.nvmlDeviceGetComputeInstanceId(m),
                                     N.nvmlDeviceGetMemoryInfo(m).total])
    for link in range(N.NVML_NVLINK_MAX_LINKS):
        try:
            active = N.nvmlDeviceGetNvLinkState(h, link)
        except N.NVMLError as e:
            if e.value in (N.NVML_ERROR_NOT_SUPPORTED, N.NVML_ERROR_INVALID_ARGUMENT):
                continue
            raise
        remote = N.nvmlDeviceGetNvLinkRemotePciInfo(h, link)
        d["nvlinks"].append([link, active, text(remote.busId),
                             q(N.nvmlDeviceGetNvLinkRemoteDeviceType, h, link)])
    return d


def main():
    N.nvmlInit()
    n = N.nvmlDeviceGetCount()
    out = {"driver_version": text(N.nvmlSystemGetDriverVersion()), "gpus": [gpu(i) for i in range(n)],
           "pairs": []}
    handles = [N.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
    for a in range(n):
        for b in range(a + 1, n):
            out["pairs"].append([a, b,
                                 q(N.nvmlDeviceGetTopologyCommonAncestor, handles[a], handles[b]),
                                 # pynvml 11.525 defines NVML_P2P_CAPS_INDEX_READ as the
                                 # tuple (0,) and hands a plain int to ctypes, which ctypes
                                 # refuses: the C type, with READ's value 0 (nvml.h)
                                 q(N.nvmlDeviceGetP2PStatus, handles[a], handles[b],
                                   N._nvmlGpuP2PCapsIndex_t(0))])
    N.nvmlShutdown()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
