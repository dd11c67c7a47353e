"""Facts about a simulated machine, read straight from its scenario file (sim/scenarios/*.json).

The CLI tests compare gpuctl's output with these: the scenario is the independent source (it
cites where each fact comes from), so an expectation never comes from gpuctl's own output.
Rules for derived facts (PCIe common ancestor) follow sim/SCENARIO.md.
"""
import copy
import json
import os

from gpuctl_test import SCENARIOS

MIB = 1024 * 1024

# sim/SCENARIO.md, "PCIe common ancestor"; NVML's numbers (nvmlGpuTopologyLevel_t). nvidia-smi
# topo -m has no code of its own for INTERNAL (two GPUs on one board) and prints PIX.
LEVEL_VALUE = {"INTERNAL": 0, "PIX": 10, "PXB": 20, "PHB": 30, "NODE": 40, "SYS": 50}
LEVEL_CODE = {"INTERNAL": "PIX", "PIX": "PIX", "PXB": "PXB", "PHB": "PHB", "NODE": "NODE",
              "SYS": "SYS"}


def _merge(base, over):
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


class Machine:
    def __init__(self, name):
        with open(os.path.join(SCENARIOS, name + ".json")) as f:
            self.doc = json.load(f)
        defaults = self.doc.get("defaults", {})
        self.gpus = [_merge(defaults, g) for g in self.doc["gpus"]]
        self.system = self.doc.get("system", {})
        self.nodes = {n["node"]: n for n in self.doc.get("cpus", {}).get("numa_nodes", [])}

    def __len__(self):
        return len(self.gpus)

    def cpu_affinity(self, i):
        g = self.gpus[i]
        return g.get("cpu_affinity", self.nodes[g["numa_node"]]["cpus"])

    def level(self, a, b):
        """nvidia-smi topo -m code of the PCIe common ancestor of GPUs a and b."""
        return LEVEL_CODE[self.level_name(a, b)]

    def level_value(self, a, b):
        """NVML's number for the PCIe common ancestor of GPUs a and b."""
        return LEVEL_VALUE[self.level_name(a, b)]

    def level_name(self, a, b):
        for x, y, lvl in self.doc.get("topology_overrides", []):
            if {x, y} == {a, b}:
                return lvl
        ga, gb = self.gpus[a], self.gpus[b]
        if ga.get("board") and ga.get("board") == gb.get("board"):
            return "INTERNAL"
        pa, pb = ga.get("pcie_path", []), gb.get("pcie_path", [])
        if set(pa[1:]) & set(pb[1:]):
            return "PIX" if pa[-1] == pb[-1] else "PXB"
        if pa and pb and pa[0] == pb[0]:
            return "PHB"
        if ga["numa_node"] == gb["numa_node"]:
            return "NODE"
        return "SYS"

    def nvswitch_links(self):
        sw = self.doc.get("nvlink", {}).get("nvswitch")
        return sw["links_per_gpu"] if sw else 0

    def direct_links(self, a, b):
        n = 0
        for x, y, c in self.doc.get("nvlink", {}).get("links", []):
            if {x, y} == {a, b}:
                n += c
        return n

    def mig(self, i):
        return self.gpus[i].get("mig")

    def cuda_version_text(self):
        v = self.system.get("cuda_driver_version", 12040)
        return "%d.%d" % (v // 1000, (v % 1000) // 10)
