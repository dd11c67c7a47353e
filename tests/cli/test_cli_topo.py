"""gpuctl topo: nvidia-smi topo -m's matrix layout, the legend, --bandwidth and JSON. Expected
link codes come from the scenario files through sim/SCENARIO.md's rules (cli_facts.Machine),
the layout from nvidia-smi topo -m (tab-separated, " X " on the diagonal, NV# for NVLink)."""
import json
import os
import shutil
import tempfile
import unittest

from cli_facts import Machine
from gpuctl_test import EXIT_USAGE, SCENARIOS, GpuctlTestCase, scenario_names, sim, sim_sh

P2P_CODES = {"OK", "NS", "CNS", "GNS", "TNS", "DR", "U"}


def matrix_rows(out, n):
    lines = out.splitlines()
    return lines[0], [l.split("\t") for l in lines[1:1 + n]], lines[1 + n:]


class TopoMatrix(GpuctlTestCase):
    def check_header(self, header, n):
        want = "".join("\tGPU%d" % i for i in range(n)) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"
        self.assertEqual(header, want)

    def test_nvswitch_machine(self):
        m = Machine("dgx-a100")
        n = len(m)
        r = sim("dgx-a100", "topo")
        self.assertOk(r)
        header, rows, rest = matrix_rows(r.out, n)
        self.check_header(header, n)
        nv = "NV%d" % m.nvswitch_links()
        for i, row in enumerate(rows):
            self.assertEqual(len(row), 1 + n + 3, row)
            self.assertEqual(row[0], "GPU%d" % i)
            for j in range(n):
                self.assertEqual(row[1 + j], " X " if i == j else nv, (i, j))
            self.assertEqual(row[1 + n], m.cpu_affinity(i))
            self.assertEqual(row[2 + n], str(m.gpus[i]["numa_node"]))
            self.assertEqual(row[3 + n], str(m.gpus[i]["gpu_numa_node"])
                             if "gpu_numa_node" in m.gpus[i] else "N/A")
        legend = "\n".join(rest)
        self.assertIn("Legend:", legend)
        for code in ("X", "SYS", "NODE", "PHB", "PXB", "PIX", "NV#"):
            self.assertTrue(any(l.strip().startswith(code + " ") and "=" in l for l in rest), code)

    def test_pcie_levels(self):
        for name in ("rtx4090-8", "workstation-mixed", "pcie-8gpu"):
            m = Machine(name)
            n = len(m)
            r = sim(name, "topo")
            self.assertOk(r)
            header, rows, _ = matrix_rows(r.out, n)
            self.check_header(header, n)
            for i, row in enumerate(rows):
                for j in range(n):
                    if i == j or m.direct_links(i, j):
                        continue
                    self.assertEqual(row[1 + j], m.level(i, j), (name, i, j))

    def test_bandwidth(self):
        m = Machine("rtx4090-8")
        n = len(m)
        r = sim("rtx4090-8", "topo", "--bandwidth")
        self.assertOk(r)
        header, rows, rest = matrix_rows(r.out, n)
        self.check_header(header, n)
        cells = [[row[1 + j] for j in range(n)] for row in rows]
        for i in range(n):
            self.assertEqual(cells[i][i], " X ")
            for j in range(n):
                if i != j:
                    self.assertGreater(float(cells[i][j]), 0.0)
                    self.assertEqual(cells[i][j], cells[j][i])
        self.assertIn("docs/topology.md", "\n".join(rest))


class TopoJson(GpuctlTestCase):
    def test_gpus_and_each_pair_once(self):
        for name in ("dgx-a100", "rtx4090-8", "workstation-mixed"):
            m = Machine(name)
            n = len(m)
            r = sim(name, "topo", "--format", "json")
            self.assertOk(r)
            doc = r.json()
            for i, g in enumerate(doc["gpus"]):
                want = m.gpus[i]
                self.assertEqual(g["index"], i)
                self.assertEqual(g["uuid"], want["uuid"])
                self.assertEqual(g["pci_bus_id"], want["pci_bus_id"])
                self.assertEqual(g["name"], want["name"])
                self.assertEqual(g["numa_node"], want["numa_node"])
                self.assertEqual(g["gpu_numa_node"], want.get("gpu_numa_node"))
                self.assertEqual(g["cpu_affinity"], m.cpu_affinity(i))
            pairs = [(l["a"], l["b"]) for l in doc["links"]]
            self.assertEqual(sorted(pairs), [(a, b) for a in range(n) for b in range(a + 1, n)])
            for l in doc["links"]:
                a, b = l["a"], l["b"]
                self.assertEqual(l["level"], m.level(a, b), (name, a, b))
                self.assertEqual(l["level_value"], m.level_value(a, b))
                self.assertIn(l["p2p"], P2P_CODES)
                self.assertIsInstance(l["bandwidth_gbps"], (int, float))
                if m.nvswitch_links():
                    self.assertEqual(l["nvlinks"], m.nvswitch_links())
                    self.assertIs(l["nvswitch"], True)
                else:
                    self.assertEqual(l["nvlinks"], m.direct_links(a, b))
                    self.assertIs(l["nvswitch"], False)
                if name == "rtx4090-8":
                    self.assertEqual(l["p2p"], "GNS")  # GeForce: GPU not supported


# The CPU of each 8-GPU-class machine as published (sim/SCENARIO.md lists the sources) and
# NCCL's figures for it (NVIDIA/nccl src/graph/topo.h at 2.30: Broadwell QPI 6, Skylake UPI 10
# (Ice Lake is model 0x6A >= 0x55, so NCCL's Skylake class), Sapphire Rapids 22, AMD 16, Arm 6;
# Intel's P2P overhead 6/5).
CPUS = {
    "dgx1-v100": ("Broadwell", 6.0, 1.2),   # DGX-1: Xeon E5-2698 v4
    "dgx1-p100": ("Broadwell", 6.0, 1.2),
    "dgx2": ("Skylake", 10.0, 1.2),         # Xeon Platinum 8168
    "dgx-a100": ("AMD", 16.0, 1.0),         # EPYC 7742
    "hgx-h100": ("Sapphire Rapids", 22.0, 1.2),  # Xeon Platinum 8480C
    "pcie-8gpu": ("Skylake", 10.0, 1.2),
    "rtx4090-8": ("AMD", 16.0, 1.0),
    "gb200-node": ("Grace", 6.0, 1.0),
}


class TopoCpu(GpuctlTestCase):
    def test_every_scenario_declares_its_cpu(self):
        for name in scenario_names():
            r = sim_sh(name, 'head -n 12 "$GPUCTL_CPUINFO"')
            self.assertOk(r)
            self.assertTrue("vendor_id" in r.out or "CPU implementer" in r.out, (name, r.out))

    def test_cpu_and_path_classes_in_json(self):
        for name, (cls, gbps, overhead) in CPUS.items():
            r = sim(name, "topo", "--format", "json")
            self.assertOk(r)
            doc = r.json()
            self.assertEqual(doc["cpu"]["class"], cls, name)
            self.assertAlmostEqual(doc["cpu"]["inter_socket_gbps"], gbps)
            self.assertAlmostEqual(doc["cpu"]["p2p_overhead"], overhead)
            paths = doc["path_bandwidth_gbps"]
            self.assertEqual(sorted(paths), sorted(["PIX", "PXB", "PHB", "NODE", "SYS"]), name)
            # the SYS class is capped by the CPU's inter-socket figure, then its overhead
            self.assertLessEqual(paths["SYS"], gbps / overhead + 1e-9, name)
            self.assertGreaterEqual(paths["PHB"], paths["SYS"], name)

    def test_dgx1_figures(self):
        # Broadwell, PCIe Gen3 x16 (12 GB/s): PHB 12 / 1.2 = 10, SYS min(12, 6) / 1.2 = 5
        doc = sim("dgx1-v100", "topo", "--format", "json").json()
        self.assertEqual(doc["cpu"]["vendor"], "GenuineIntel")
        self.assertEqual((doc["cpu"]["family"], doc["cpu"]["model"]), (6, 79))
        self.assertAlmostEqual(doc["path_bandwidth_gbps"]["PIX"], 12.0)
        self.assertAlmostEqual(doc["path_bandwidth_gbps"]["PHB"], 10.0)
        self.assertAlmostEqual(doc["path_bandwidth_gbps"]["SYS"], 5.0)
        pair = {(l["a"], l["b"]): l for l in doc["links"]}
        self.assertAlmostEqual(pair[(0, 5)]["bandwidth_gbps"], 5.0)  # no NVLink, SYS

    def test_rtx4090_on_amd(self):
        # NVIDIA/go-gpuallocator#17: on AMD, a cross-socket pair (min(24, 16), no overhead)
        # beats a same-switch pair without P2P (24 / 2): the model and select agree
        doc = sim("rtx4090-8", "topo", "--format", "json").json()
        pair = {(l["a"], l["b"]): l["bandwidth_gbps"] for l in doc["links"]}
        self.assertAlmostEqual(pair[(0, 4)], 16.0)
        self.assertAlmostEqual(pair[(0, 1)], 12.0)
        r = sim("rtx4090-8", "select", "-n", "2", "--format", "json")
        self.assertOk(r)
        chosen = [d["index"] for d in r.json()["devices"]]
        self.assertEqual(len({g // 4 for g in chosen}), 2, r.out)  # one GPU per socket

    def test_cpu_line_in_text(self):
        r = sim("hgx-h100", "topo")
        self.assertOk(r)
        line = [l for l in r.out.splitlines() if l.startswith("CPU: ")]
        self.assertEqual(len(line), 1, r.out)
        self.assertIn("Intel(R) Xeon(R) Platinum 8480C", line[0])
        self.assertIn("Sapphire Rapids", line[0])
        self.assertIn("22 GB/s between sockets", line[0])
        classes = [l for l in r.out.splitlines() if l.startswith("Modelled GB/s")]
        self.assertEqual(len(classes), 1, r.out)
        # Gen5 x16 = 48; SYS min(48, 22) / 1.2 = 18.3
        self.assertIn("PIX 48", classes[0])
        self.assertIn("SYS 18.3", classes[0])


class TopoUsage(GpuctlTestCase):
    def test_disabled_link_mid_range(self):
        """A part with a link disabled in the middle of its range (NOT_SUPPORTED for link 3 of
        GPU 0's twelve NVSwitch links, sim/SCENARIO.md "nvlink_disabled"): the links after it
        still count, 11 for GPU 0 (the fabric pair is the smaller of the two ends)."""
        with open(os.path.join(SCENARIOS, "dgx-a100.json")) as f:
            doc = json.load(f)
        per_gpu = doc["nvlink"]["nvswitch"]["links_per_gpu"]
        doc["gpus"][0]["nvlink_disabled"] = [3]
        tmp = tempfile.mkdtemp(prefix="gpuctl-test-topo-")
        self.addCleanup(shutil.rmtree, tmp, True)
        path = os.path.join(tmp, "dgx-a100-link3.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        r = sim(path, "topo", "--format", "json")
        self.assertOk(r)
        for l in r.json()["links"]:
            want = per_gpu - 1 if l["a"] == 0 else per_gpu
            self.assertEqual((l["nvswitch"], l["nvlinks"]), (True, want), l)

    def test_bad_arguments(self):
        for args, needle in ((["topo", "--format", "xml"], "xml"),
                             (["topo", "--bandwidth", "--format", "json"], "--bandwidth"),
                             (["topo", "extra"], "extra"),
                             (["topo", "--nope"], "--nope")):
            r = sim("dgx-a100", *args)
            self.assertOneLineError(r, EXIT_USAGE, needle)


if __name__ == "__main__":
    unittest.main()
