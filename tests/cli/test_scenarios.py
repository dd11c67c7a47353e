"""End-to-end: every simulated machine in sim/scenarios/ against its independent expected facts.

For each scenario, gpuctl runs under `nvsim exec` and its output is compared with
tests/cli/expected/<scenario>.json, which was written from the published layouts (nvidia-smi
dumps in NVIDIA issues, go-gpuallocator fixtures, NVIDIA guides), never by running gpuctl.
See tests/cli/expected/README.md for the format and where each fact comes from.

Also checked without any binary: the scenario files are well formed, each has an expected file,
and the generated files (sim/scenarios/gen-synthetic.py, expected/gen-expected-synthetic.py)
equal what their generators print.
"""
import json
import os
import re
import subprocess
import sys
import unittest

import gpuctl_test as gt

# ---------------------------------------------------------------------------------------------
# The CLI contract this module relies on, in one place. If a key or a command changes when the
# CLI lands, change it here only.
# ---------------------------------------------------------------------------------------------
CMD_LIST_JSON = ("list", "--format", "json")
CMD_LIST_CSV = ("list", "--format", "csv")
CMD_TOPO_TEXT = ("topo",)
CMD_TOPO_JSON = ("topo", "--format", "json")
CMD_INFO_JSON = ("info", "--format", "json")

K = {
    # list --format json: {"gpus": [gpu...]}
    "gpus": "gpus",
    "index": "index",
    "uuid": "uuid",
    "bus": "pci_bus_id",
    "name": "name",
    "mig_devices": "mig_devices",
    # one MIG device
    "mig_uuid": "uuid",
    "mig_profile": "profile",
    "mig_gi": "gpu_instance_id",
    "mig_ci": "compute_instance_id",
    "mig_memory": "memory_total",
    # topo --format json: {"gpus": [...], "links": [...]}
    "links": "links",
    "a": "a",
    "b": "b",
    "level": "level",
    "nvlinks": "nvlinks",
    "nvswitch": "nvswitch",
    "p2p": "p2p",
    "cpu_affinity": "cpu_affinity",
    "numa_node": "numa_node",
    "gpu_numa_node": "gpu_numa_node",
    # info --format json
    "driver": "driver_version",
    "nvml": "nvml_version",
    "cuda": "cuda_driver_version",
    "nvml_library": "nvml_library",
}

# How a pair's P2P status (scenario/expected spelling, NVML status) is printed in topo JSON:
# nvidia-smi topo -p2p's abbreviations.
P2P_CODE = {
    "ok": "OK",
    "chipset_not_supported": "CNS",
    "gpu_not_supported": "GNS",
    "topology_not_supported": "TNS",
    "disabled_by_regkey": "DR",
    "not_supported": "NS",
    "unknown": "U",
}

# Columns after GPU0..GPUn-1 in the nvidia-smi style matrix (GPU NUMA ID may be absent).
MATRIX_CPU = "CPU Affinity"
MATRIX_NUMA = "NUMA Affinity"
MATRIX_GPU_NUMA = "GPU NUMA ID"


def scenario_arg(name):
    """What `nvsim exec` is given for a scenario (a name under sim/scenarios/, as the other
    e2e modules pass it)."""
    return name


def nvsim_check_argv(name):
    """`nvsim check` validates a scenario file."""
    return [gt.NVSIM, "check", os.path.join(gt.SCENARIOS, name + ".json")]


MIB = 1024 * 1024


def same_mib(value, mib):
    """A memory size printed either in MiB or in bytes."""
    return value == mib or value == mib * MIB


# ---------------------------------------------------------------------------------------------

UUID_RE = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
MIG_UUID_RE = re.compile(r"^MIG-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
BUS_RE = re.compile(r"^[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-7]$")


def load_scenario(name):
    with open(os.path.join(gt.SCENARIOS, name + ".json")) as f:
        return json.load(f)


def scenario_gpus(s):
    """The scenario's GPUs with `defaults` merged in (objects key by key), as SCENARIO.md says."""
    out = []
    for g in s["gpus"]:
        m = dict(s.get("defaults", {}))
        for k, v in g.items():
            if isinstance(v, dict) and isinstance(m.get(k), dict):
                m[k] = dict(m[k], **v)
            else:
                m[k] = v
        out.append(m)
    return out


def pair_key(a, b):
    return f"{min(a, b)}-{max(a, b)}"


def parse_matrix(text, n):
    """Parses the nvidia-smi style matrix: a header row of tab-separated column names (GPU0..,
    then CPU Affinity, NUMA Affinity, maybe GPU NUMA ID), then one row per GPU starting GPUi.
    Returns (cells n x n, {column name: [value per GPU]} for the trailing columns)."""
    lines = text.splitlines()
    hdr_i = next(i for i, l in enumerate(lines) if [c.strip() for c in l.split("\t") if c.strip()][:1] == ["GPU0"])
    header = [c.strip() for c in lines[hdr_i].split("\t")]
    if header and header[0] == "":
        header = header[1:]
    rows = {}
    for l in lines[hdr_i + 1:]:
        cols = l.split("\t")
        m = re.fullmatch(r"GPU(\d+)", cols[0].strip())
        if not m:
            if rows:
                break
            continue
        rows[int(m.group(1))] = dict(zip(header, [c.strip() for c in cols[1:]]))
    if sorted(rows) != list(range(n)):
        raise AssertionError(f"matrix rows {sorted(rows)} for {n} GPUs:\n{text}")
    cells = [[rows[i].get(f"GPU{j}") for j in range(n)] for i in range(n)]
    extra = {c: [rows[i].get(c) for i in range(n)] for c in header if not re.fullmatch(r"GPU\d+", c)}
    return cells, extra


class ScenarioFiles(unittest.TestCase):
    """Static checks that need no binary."""

    def test_every_scenario_has_expected_facts(self):
        names = gt.scenario_names()
        self.assertGreaterEqual(len(names), 12)
        for name in names:
            with self.subTest(scenario=name):
                s = load_scenario(name)
                e = gt.load_expected(name + ".json")
                self.assertEqual(s["schema"], 1)
                self.assertEqual(s["name"], name)
                self.assertTrue(s["sources"])
                self.assertEqual(e["scenario"], name)
                self.assertEqual(e["gpu_count"], len(s["gpus"]))
                self.assertEqual(len(e["topo_matrix"]), e["gpu_count"])

    def test_no_scenario_claims_a_dgx_h100_it_is_not(self):
        # NVIDIA's DGX H100 user guide: two Xeon 8480C (2 x 56 cores, 224 threads) and
        # ConnectX-7 NICs at PCI buses 0x18 and 0x9A. A scenario calling itself a DGX H100 must
        # have that many CPUs and no GPU on those buses; hgx-h100 (160 CPUs, GPUs at 18 and 9A,
        # from nccl#1453's node) is a generic HGX H100 board and says so.
        def cpus(doc):
            n = 0
            for node in doc["cpus"]["numa_nodes"]:
                for part in node["cpus"].split(","):
                    a, _, b = part.partition("-")
                    n += int(b or a) - int(a) + 1
            return n

        for name in gt.scenario_names():
            with self.subTest(scenario=name):
                s = load_scenario(name)
                text = " ".join([s["description"]] + s["sources"])
                claim = re.sub(r"not a DGX H100[^;)]*", "", text)
                buses = {int(g["pci_bus_id"].split(":")[1], 16) for g in s["gpus"]}
                if re.search(r"DGX H100 (class|node|enumeration)|\ba DGX H100\b", claim):
                    self.assertEqual(cpus(s), 224)
                    self.assertFalse(buses & {0x18, 0x9A}, buses)
        h = load_scenario("hgx-h100")
        self.assertEqual(cpus(h), 160)
        self.assertIn("not a DGX H100", h["description"])

    def test_identity_valid_unique_and_pci_ordered(self):
        for name in gt.scenario_names():
            with self.subTest(scenario=name):
                gpus = scenario_gpus(load_scenario(name))
                uuids = [g["uuid"] for g in gpus]
                buses = [g["pci_bus_id"] for g in gpus]
                for u in uuids:
                    self.assertRegex(u, UUID_RE)
                for b in buses:
                    self.assertRegex(b, BUS_RE)
                self.assertEqual(len(set(u.lower() for u in uuids)), len(uuids))
                self.assertEqual(len(set(buses)), len(buses))
                # NVML index order is PCI bus order.
                self.assertEqual(buses, sorted(buses))
                migs = [i["uuid"] for g in gpus for i in (g.get("mig") or {}).get("instances", [])]
                for u in migs:
                    self.assertRegex(u, MIG_UUID_RE)
                self.assertEqual(len(set(migs)), len(migs))

    def test_uuids_unique_across_scenarios(self):
        seen = {}
        for name in gt.scenario_names():
            for g in scenario_gpus(load_scenario(name)):
                self.assertNotIn(g["uuid"], seen, f"{name} reuses a UUID of {seen.get(g['uuid'])}")
                seen[g["uuid"]] = name

    def test_generated_scenarios_are_current(self):
        r = subprocess.run([sys.executable, os.path.join(gt.SCENARIOS, "gen-synthetic.py"), "--check"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_generated_expected_facts_are_current(self):
        r = subprocess.run([sys.executable, os.path.join(gt.EXPECTED, "gen-expected-synthetic.py"), "--check"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)


@unittest.skipUnless(os.access(gt.NVSIM, os.X_OK), f"{gt.NVSIM} not built")
class NvsimCheck(unittest.TestCase):
    def test_every_scenario_passes_nvsim_check(self):
        for name in gt.scenario_names():
            with self.subTest(scenario=name):
                r = gt.run(nvsim_check_argv(name))
                self.assertEqual(r.rc, 0, r)


@unittest.skipUnless(os.access(gt.NVSIM, os.X_OK) and os.access(gt.GPUCTL, os.X_OK),
                     "gpuctl or nvsim not built")
class EndToEnd(gt.GpuctlTestCase):
    """gpuctl on each simulated machine against the expected facts."""

    def each(self):
        # Callers wrap each item in self.subTest: a subTest around a yield would swallow the
        # generator's exit when a check fails.
        for name in gt.scenario_names():
            yield name, load_scenario(name), gt.load_expected(name + ".json")

    def run_ok(self, name, *args):
        r = gt.sim(scenario_arg(name), *args)
        self.assertOk(r)
        return r

    def test_list_identity(self):
        for name, s, e in self.each():
            with self.subTest(scenario=name):
                gpus = self.run_ok(name, *CMD_LIST_JSON).json()[K["gpus"]]
                sg = scenario_gpus(s)
                self.assertEqual(len(gpus), e["gpu_count"])
                self.assertEqual([g[K["index"]] for g in gpus], list(range(e["gpu_count"])))
                self.assertEqual([g[K["name"]] for g in gpus], e["names"])
                uuids = [g[K["uuid"]] for g in gpus]
                buses = [g[K["bus"]] for g in gpus]
                self.assertEqual(len(set(uuids)), len(uuids))
                self.assertEqual(len(set(buses)), len(buses))
                self.assertEqual([u.lower() for u in uuids], [g["uuid"].lower() for g in sg])
                self.assertEqual([b.upper() for b in buses], [g["pci_bus_id"].upper() for g in sg])

    def test_list_mig_devices(self):
        for name, s, e in self.each():
            with self.subTest(scenario=name):
                gpus = self.run_ok(name, *CMD_LIST_JSON).json()[K["gpus"]]
                sg = scenario_gpus(s)
                for i, g in enumerate(gpus):
                    got = g.get(K["mig_devices"]) or []
                    exp = e["mig"].get(str(i), {}).get("devices", [])
                    self.assertEqual(len(got), len(exp), f"GPU{i}: {got}")
                    want_uuids = [x["uuid"].lower() for x in (sg[i].get("mig") or {}).get("instances", [])]
                    self.assertEqual(sorted(d[K["mig_uuid"]].lower() for d in got), sorted(want_uuids))
                    key = lambda d: (d[K["mig_gi"]], d[K["mig_ci"]])
                    for d, x in zip(sorted(got, key=key),
                                    sorted(exp, key=lambda x: (x["gpu_instance_id"], x["compute_instance_id"]))):
                        self.assertEqual(d[K["mig_profile"]], x["profile"])
                        self.assertEqual(d[K["mig_gi"]], x["gpu_instance_id"])
                        self.assertEqual(d[K["mig_ci"]], x["compute_instance_id"])
                        self.assertTrue(same_mib(d[K["mig_memory"]], x["memory_total_mib"]),
                                        f"GPU{i} {d}: want {x['memory_total_mib']} MiB")

    def test_list_csv_is_rectangular(self):
        for name, s, e in self.each():
            with self.subTest(scenario=name):
                rows = [r for r in self.run_ok(name, *CMD_LIST_CSV).csv() if r]
                self.assertGreaterEqual(len(rows), e["gpu_count"])
                widths = {len(r) for r in rows}
                self.assertEqual(len(widths), 1, f"column counts {widths}")

    def test_topo_matrix(self):
        for name, s, e in self.each():
            with self.subTest(scenario=name):
                n = e["gpu_count"]
                cells, extra = parse_matrix(self.run_ok(name, *CMD_TOPO_TEXT).out, n)
                for a in range(n):
                    for b in range(n):
                        self.assertEqual(cells[a][b], e["topo_matrix"][a][b], f"cell GPU{a} x GPU{b}")
                self.assertEqual(extra.get(MATRIX_CPU), e["cpu_affinity"])
                self.assertEqual(extra.get(MATRIX_NUMA), e["numa_affinity"])
                if MATRIX_GPU_NUMA in extra or any(v != "N/A" for v in e["gpu_numa_id"]):
                    self.assertEqual(extra.get(MATRIX_GPU_NUMA), e["gpu_numa_id"])

    def test_topo_json(self):
        for name, s, e in self.each():
            with self.subTest(scenario=name):
                doc = self.run_ok(name, *CMD_TOPO_JSON).json()
                n = e["gpu_count"]
                gpus = doc[K["gpus"]]
                self.assertEqual(len(gpus), n)
                for i, g in enumerate(gpus):
                    self.assertEqual(g[K["cpu_affinity"]], e["cpu_affinity"][i])
                    self.assertEqual(g[K["numa_node"]], int(e["numa_affinity"][i]))
                    gn = e["gpu_numa_id"][i]
                    self.assertEqual(g.get(K["gpu_numa_node"]), None if gn == "N/A" else int(gn))
                links = doc[K["links"]]
                pairs = [(l[K["a"]], l[K["b"]]) for l in links]
                self.assertEqual(sorted(pairs), [(a, b) for a in range(n) for b in range(a + 1, n)],
                                 "every unordered pair exactly once, a < b")
                for l in links:
                    k = pair_key(l[K["a"]], l[K["b"]])
                    nv = e["nvlinks"].get(k, 0)
                    self.assertEqual(l[K["level"]], e["pcie_levels"][k], f"level {k}")
                    self.assertEqual(l[K["nvlinks"]], nv, f"nvlinks {k}")
                    self.assertEqual(bool(l[K["nvswitch"]]), bool(e["nvswitch"] and nv), f"nvswitch {k}")
                    p2p = e["p2p"]["pairs"].get(k, e["p2p"]["default"])
                    self.assertEqual(l[K["p2p"]], P2P_CODE[p2p], f"p2p {k}")

    def test_info_versions(self):
        for name, s, e in self.each():
            with self.subTest(scenario=name):
                doc = self.run_ok(name, *CMD_INFO_JSON).json()
                self.assertEqual(doc[K["driver"]], e["driver_version"])
                self.assertEqual(doc[K["nvml"]], e["nvml_version"])
                self.assertEqual(doc[K["cuda"]], e["cuda_driver_version"])
                self.assertIn(K["nvml_library"], doc)
                self.assertEqual(len(doc[K["gpus"]]), e["gpu_count"])


if __name__ == "__main__":
    unittest.main()
