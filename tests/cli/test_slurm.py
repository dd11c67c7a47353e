"""gpuctl against a real Slurm (Debian's daemons, tests/cli/slurm_cluster.py): the generated
gres.conf of every scenario, MIG ones included, as Debian 12's Slurm 22.05 and Debian 13's 24.11
take it; jobs landing on the GPUs Slurm allotted, and the HealthCheckProgram draining and
resuming the node (22.05).

Expected values come from the published topologies (sim/scenarios/*.json sources: DGX A100's
two 64-core EPYC 7742 with SMT and GPU pairs on NUMA nodes 3, 1, 7, 5; DGX-1's hybrid cube
mesh), from Slurm's own reading (slurmd's DebugFlags=Gres log, slurmd -C through hwloc,
scontrol) and from the gres.conf each test writes, never from gpuctl's output alone. Slurm's
types (SLURM_TYPES, SLURM_MIG_TYPES) were written by hand from the rule of Slurm's gpu_nvml.c.

Time (2 cores, measured): EveryScenario about 2 s a cluster, 28 clusters; the Debian 13 root is
made once (about a minute with network) and cached outside the clone."""
import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest

from gpuctl_test import BUILD, GPUCTL, SCENARIOS, SRC, scenario_gpus
from slurm_cluster import (HWLOC_ENV, NVSIM_LOAD, SLURM_VERSIONS, Cluster, Machine, slurm_root,
                           wait_for)

# Slurm's AutoDetect=nvml type for each product name of the scenarios, by hand from Slurm's rule
# (src/plugins/gpu/nvml/gpu_nvml.c, _nvml_get_device_name, and gpu_common.c's
# gpu_common_underscorify_tolower, 22.05 and 24.11 alike: NVML's name lower-cased, each space
# an underscore, nothing else changed)
SLURM_TYPES = {
    "NVIDIA A100-SXM4-40GB": "nvidia_a100-sxm4-40gb",
    "NVIDIA A100-SXM4-80GB": "nvidia_a100-sxm4-80gb",
    "NVIDIA A100-PCIE-40GB": "nvidia_a100-pcie-40gb",
    "NVIDIA A100 80GB PCIe": "nvidia_a100_80gb_pcie",
    "NVIDIA H100 80GB HBM3": "nvidia_h100_80gb_hbm3",
    "NVIDIA H100 NVL": "nvidia_h100_nvl",
    "NVIDIA GB200": "nvidia_gb200",
    "NVIDIA GeForce RTX 4090": "nvidia_geforce_rtx_4090",
    "NVIDIA RTX A6000": "nvidia_rtx_a6000",
    "Quadro P1000": "quadro_p1000",
    "Tesla P100-SXM2-16GB": "tesla_p100-sxm2-16gb",
    "Tesla V100-SXM2-32GB": "tesla_v100-sxm2-32gb",
    "Tesla V100-SXM3-32GB": "tesla_v100-sxm3-32gb",
}
# A MIG device's type (gpu_nvml.c: the parent's type cut at its first '-', then '_' and the
# profile: 24.11 takes "_<profile>" from the MIG device's NVML name, 22.05 builds it from the
# slices and memory; the same for these profiles)
SLURM_MIG_TYPES = {
    ("NVIDIA A100-SXM4-40GB", "1g.5gb"): "nvidia_a100_1g.5gb",
    ("NVIDIA A100-SXM4-40GB", "2g.10gb"): "nvidia_a100_2g.10gb",
    ("NVIDIA A100-SXM4-40GB", "3g.20gb"): "nvidia_a100_3g.20gb",
}
ALL_SCENARIOS = sorted(os.path.basename(p)[:-5]
                       for p in glob.glob(os.path.join(SCENARIOS, "*.json")))

def published_cpus(scenario):
    """(sockets, cores per socket, threads per core) from the scenario file's CPU section."""
    with open(os.path.join(SCENARIOS, scenario + ".json")) as f:
        cpus = json.load(f)["cpus"]
    count = 0
    for n in cpus["numa_nodes"]:
        for part in n["cpus"].split(","):
            lo, _, hi = part.partition("-")
            count += int(hi or lo) - int(lo) + 1
    sockets = len({n["socket"] for n in cpus["numa_nodes"]})
    tpc = cpus.get("threads_per_core", 1)
    return sockets, count // (sockets * tpc), tpc


def ranges(numbers):
    """Sorted numbers as a Slurm range list: [0, 1, 2, 5] -> "0-2,5"."""
    out, numbers = [], sorted(numbers)
    for n in numbers:
        if out and out[-1][1] == n - 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return ",".join("%d" % a if a == b else "%d-%d" % (a, b) for a, b in out)


def mig_minors(machine):
    """The driver's MIG capability table as the simulated machine has it ("gpu0/gi7/access"
    -> minor), the file Slurm's AutoDetect reads too."""
    with open(os.path.join(machine.env["GPUCTL_NVIDIA_CAPS_PROC"], "mig-minors")) as f:
        return {k: int(v) for k, v in (ln.split() for ln in f if ln.strip())}


def expected_records(machine, dev):
    """What slurmd must read for the scenario, in PCI bus order: (type, files, cores) per GPU,
    or per MIG device of a GPU in MIG mode; cores are the whole socket of the GPU's NUMA node."""
    with open(os.path.join(SCENARIOS, machine.scenario + ".json")) as f:
        socket_of = {n["node"]: n["socket"] for n in json.load(f)["cpus"]["numa_nodes"]}
    sockets, cps, _ = published_cpus(machine.scenario)
    caps = mig_minors(machine)
    gpus = scenario_gpus(machine.scenario)
    out = []
    for i in sorted(range(len(gpus)), key=lambda k: gpus[k]["pci_bus_id"].lower()):
        g = gpus[i]
        minor = g.get("minor_number", i)
        sock = socket_of.get(g.get("numa_node"))
        cores = ("%d-%d" % (sock * cps, (sock + 1) * cps - 1) if sock is not None
                 else "0-%d" % (sockets * cps - 1))
        gpu_file = os.path.join(dev, "nvidia%d" % minor)
        if not g.get("mig", {}).get("enabled"):
            out.append((SLURM_TYPES[g["name"]], gpu_file, cores, sock))
            continue
        for inst in g["mig"].get("instances", []):
            gi = caps["gpu%d/gi%d/access" % (minor, inst["gi"])]
            ci = caps["gpu%d/gi%d/ci%d/access" % (minor, inst["gi"], inst["ci"])]
            out.append((SLURM_MIG_TYPES[(g["name"], inst["profile"])],
                        ",".join([gpu_file, os.path.join(dev, "nvidia-caps", "nvidia-cap%d" % gi),
                                  os.path.join(dev, "nvidia-caps", "nvidia-cap%d" % ci)]),
                        cores, sock))
    return out


class SlurmCase(unittest.TestCase):
    def setUp(self):
        # under /tmp: the Slurm 24.11 root sees it at the same path (slurm_cluster.py)
        self.root = tempfile.mkdtemp(prefix="gpuctl-slurm-", dir="/tmp")
        os.chmod(self.root, 0o755)
        self.clusters = []

    def tearDown(self):
        for c in self.clusters:
            c.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def machine(self, scenario):
        return Machine(self.root, scenario)

    def gres(self, m, *extra):
        r = subprocess.run([GPUCTL, "slurm", "gres", "--node", "localhost", "--dev-dir",
                            os.path.join(self.root, "dev"), *extra],
                           env={**os.environ, **m.env}, capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def cluster(self, m, gres_conf, gres, **kw):
        c = Cluster(m, self.root, gres_conf, gres, published_cpus(m.scenario), **kw)
        self.clusters.append(c)
        return c

    def records(self, c):
        """slurmd's own reading of gres.conf (DebugFlags=Gres): one dict per GPU record."""
        out = []
        for line in c.log("slurmd").splitlines():
            m = re.search(r"Gres Name=gpu Type=(\S+) Count=1 Index=\d+ ID=\d+ File=(\S+)"
                          r"(?: Cores=(\S+) CoreCnt=\d+)? Links=(\S+)", line)
            if m:
                out.append({"type": m[1], "file": m[2], "cores": m[3], "links": m[4]})
        return out


class GeneratedGres(SlurmCase):
    def check_accepted(self, scenario, want_type, want_cores, want_links):
        m = self.machine(scenario)
        text = self.gres(m)
        info = json.loads(self.gres(m, "--format", "json"))
        n = len(scenario_gpus(scenario))
        # slurmd -C reads the same CPU topology through hwloc: the published counts
        r = subprocess.run(["slurmd", "-C"], env={**os.environ, **HWLOC_ENV,
                                                  "HWLOC_FSROOT": m.fsroot},
                           capture_output=True, text=True, timeout=60)
        s, c, t = published_cpus(scenario)
        self.assertIn("CPUs=%d Boards=1 SocketsPerBoard=%d CoresPerSocket=%d ThreadsPerCore=%d"
                      % (s * c * t, s, c, t), r.stdout)
        self.assertEqual(info["cpus"], {"cpus": s * c * t, "sockets": s, "cores_per_socket": c,
                                        "threads_per_core": t})
        self.assertEqual(info["gres"], "gpu:%s:%d" % (want_type, n))
        cl = self.cluster(m, text, info["gres"])
        self.assertEqual(cl.node_state(), "idle", cl.log("slurmd")[-3000:])
        recs = self.records(cl)
        self.assertEqual(len(recs), n, cl.log("slurmd")[-3000:])
        for i, rec in enumerate(recs):
            self.assertEqual(rec["type"], want_type)
            self.assertEqual(rec["file"], os.path.join(self.root, "dev", "nvidia%d" % i))
            self.assertEqual(rec["cores"], want_cores[i], rec)
            self.assertEqual(rec["links"], want_links[i], rec)
        self.assertNotRegex(cl.log("slurmd"), r"(?i)(error|fatal).*gres")
        # Slurm turns the Cores into sockets for the node's GRES
        self.assertIn("Gres=gpu:%s:%d(S:0-1)" % (want_type, n),
                      cl.run(["scontrol", "show", "node", "-d", "localhost"]).stdout)
        return m, cl

    def test_dgx_a100(self):
        # NUMA 3 (CPUs 48-63) for GPUs 0-1, 1 (16-31) for 2-3, 7 (112-127) for 4-5, 5 (80-95)
        # for 6-7: sockets 0, 0, 1, 1, so the whole sockets' cores 0-63 and 64-127 (Slurm
        # 24.11 refuses part of a socket: EveryScenario.test_numa_cores_*). NVSwitch: twelve
        # links from every GPU into the fabric, so every pair counts 12.
        cores = ["0-63"] * 4 + ["64-127"] * 4
        links = [",".join("-1" if j == i else "12" for j in range(8)) for i in range(8)]
        self.check_accepted("dgx-a100", "nvidia_a100-sxm4-80gb", cores, links)

    def test_dgx1_v100(self):
        # DGX-1 hybrid cube mesh (NVIDIA's DGX-1 whitepaper, scenario sources): NVLinks per pair
        mesh = [[-1, 1, 1, 2, 2, 0, 0, 0], [1, -1, 2, 1, 0, 2, 0, 0],
                [1, 2, -1, 2, 0, 0, 1, 0], [2, 1, 2, -1, 0, 0, 0, 1],
                [2, 0, 0, 0, -1, 1, 1, 2], [0, 2, 0, 0, 1, -1, 2, 1],
                [0, 0, 1, 0, 1, 2, -1, 2], [0, 0, 0, 1, 2, 1, 2, -1]]
        cores = ["0-19"] * 4 + ["20-39"] * 4
        m, cl = self.check_accepted("dgx1-v100", "tesla_v100-sxm2-32gb", cores,
                                    [",".join(map(str, row)) for row in mesh])
        # What cons_tres does with our Links on a 2-GPU request (recorded, docs/slurm.md): it
        # takes GPUs 0 and 3, a pair with two NVLinks, not 0 and 1 (one link) nor the lowest
        # indices.
        r = cl.srun("--gres=gpu:2", "/usr/bin/printenv", "SLURM_STEP_GPUS")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = [int(x) for x in r.stdout.strip().split(",")]
        self.assertEqual(len(got), 2)
        self.assertEqual(mesh[got[0]][got[1]], 2, "cons_tres chose %s" % got)

    def test_lost_gpu_is_left_out(self):
        # issue 24, finding 9c: one lost GPU made the whole gres.conf fail. Now the others'
        # lines are written (the hybrid cube mesh of test_dgx1_v100 without GPU 3), a warning
        # names the lost GPU, exit 1 (docs/slurm.md).
        mesh = [[-1, 1, 1, 2, 2, 0, 0, 0], [1, -1, 2, 1, 0, 2, 0, 0],
                [1, 2, -1, 2, 0, 0, 1, 0], [2, 1, 2, -1, 0, 0, 0, 1],
                [2, 0, 0, 0, -1, 1, 1, 2], [0, 2, 0, 0, 1, -1, 2, 1],
                [0, 0, 1, 0, 1, 2, -1, 2], [0, 0, 0, 1, 2, 1, 2, -1]]
        kept = [0, 1, 2, 4, 5, 6, 7]
        m = self.machine("dgx1-v100")
        m.nvsim("set", "-i", "3", "lost=1")
        outs = []
        for fmt in ("text", "json"):
            r = subprocess.run([GPUCTL, "slurm", "gres", "--node", "localhost", "--dev-dir",
                                os.path.join(self.root, "dev"), "--format", fmt],
                               env={**os.environ, **m.env}, capture_output=True, text=True,
                               timeout=60)
            self.assertEqual(r.returncode, 1, r)
            lines = r.stderr.splitlines()
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertTrue(lines[0].startswith("gpuctl: slurm gres: warning: GPU 3 is lost"),
                            r.stderr)
            outs.append(r.stdout)
        text, info = outs[0], json.loads(outs[1])
        self.assertEqual(info["lost"], [3])
        self.assertEqual([g["index"] for g in info["gpus"]], kept)
        self.assertEqual(info["gres"], "gpu:tesla_v100-sxm2-32gb:7")
        self.assertIn("# Left out, lost (NVML cannot reach it): GPU 3.", text)
        # slurmd takes the seven records, with the links among them
        cl = self.cluster(m, text, info["gres"])
        self.assertEqual(cl.node_state(), "idle", cl.log("slurmd")[-3000:])
        recs = self.records(cl)
        self.assertEqual([r["file"] for r in recs],
                         [os.path.join(self.root, "dev", "nvidia%d" % i) for i in kept])
        self.assertEqual([r["links"] for r in recs],
                         [",".join(str(mesh[i][j]) for j in kept) for i in kept])

    def test_lost_gpu_drains_a_node_configured_with_it(self):
        # docs/slurm.md: a slurm.conf that still counts the lost GPU gets the node refused
        m = self.machine("dgx1-v100")
        m.nvsim("set", "-i", "3", "lost=1")
        r = subprocess.run([GPUCTL, "slurm", "gres", "--node", "localhost", "--dev-dir",
                            os.path.join(self.root, "dev")], env={**os.environ, **m.env},
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1, r)
        cl = self.cluster(m, r.stdout, "gpu:tesla_v100-sxm2-32gb:8")
        self.assertEqual(cl.node_state(), "inval")
        self.assertIn("gres/gpu count reported lower than configured (7 < 8)", cl.show_node())

    def test_pcie_8gpu(self):
        cores = ["0-31"] * 4 + ["32-63"] * 4
        links = [",".join("-1" if j == i else "0" for j in range(8)) for i in range(8)]
        self.check_accepted("pcie-8gpu", "nvidia_a100-pcie-40gb", cores, links)


class EveryScenario(SlurmCase):
    """Every scenario's generated gres.conf (MIG ones included) as each Slurm version takes it
    (issue 29: Slurm >= 24.11 refuses Cores= that cover part of a socket, 22.05 did not). One
    simulated machine a scenario; each version's own cluster on it in turn."""

    @classmethod
    def setUpClass(cls):
        slurm_root("24.11")  # builds the Debian 13 root once, or fails saying why

    def fresh(self, scenario):
        """A fresh scratch directory and a machine of scenario in it."""
        self.tearDown()
        self.setUp()
        return self.machine(scenario)

    def check_version(self, m, text, gres, version):
        """slurmd and slurmctld of version take text: the node comes up idle with every record
        as the scenario has it, and scontrol shows each type's count and sockets."""
        cl = self.cluster(m, text, gres, version=version,
                          home=os.path.join(self.root, "slurm-" + version))
        want = expected_records(m, os.path.join(self.root, "dev"))
        show = cl.run(["scontrol", "show", "node", "-d", "localhost"]).stdout
        self.assertIn("Version=%s" % version, show)
        # registered with every device: not drained, not INVAL, no reason
        self.assertEqual(cl.node_state(), "idle", show + cl.log("slurmctld")[-2000:])
        self.assertNotIn("Reason=", show)
        for log in ("slurmd", "slurmctld"):
            self.assertNotRegex(cl.log(log), r"(?i)(error|fatal).*gres", log)
        # slurmd's own reading of each record (DebugFlags=Gres)
        got = sorted((r["type"], r["file"], r["cores"]) for r in self.records(cl))
        self.assertEqual(got, sorted((t, f, c) for t, f, c, _ in want))
        # scontrol's Gres=: each type with its count and the sockets of its devices' Cores
        types = {}
        every = set(range(published_cpus(m.scenario)[0]))
        for t, _, _, sock in want:
            n, socks = types.get(t, (0, set()))
            types[t] = (n + 1, socks | ({sock} if sock is not None else every))
        gres_shown = re.search(r"^\s*Gres=(\S+)", show, re.M)[1]
        got = {t: (int(n), socks) for t, n, socks in
               re.findall(r"gpu:([^:,]+):(\d+)\(S:([^)]*)\)", gres_shown)}
        self.assertEqual(got, {t: (n, ranges(socks)) for t, (n, socks) in types.items()},
                         gres_shown)
        cl.stop()

    def test_every_scenario_on_both_versions(self):
        for scenario in ALL_SCENARIOS:
            with self.subTest(scenario=scenario):
                m = self.fresh(scenario)
                text = self.gres(m)
                gres = json.loads(self.gres(m, "--format", "json"))["gres"]
                for version in SLURM_VERSIONS:
                    with self.subTest(scenario=scenario, version=version):
                        self.check_version(m, text, gres, version)

    def test_mig_lines(self):
        # a100-mig (scenario file): GPU 0 seven 1g.5gb, GPU 1 3g.20gb + 2g.10gb + 1g.5gb, GPU 2
        # MIG mode without instances (no line, a warning), GPU 3 whole (MIG off). Lines as
        # AutoDetect=nvml makes them (gpu_nvml.c): MultipleFiles= the parent's /dev/nvidiaN and
        # the GPU and compute instances' access capabilities of the driver's mig-minors.
        m = self.machine("a100-mig")
        dev = os.path.join(self.root, "dev")
        r = subprocess.run([GPUCTL, "slurm", "gres", "--node", "n1", "--dev-dir", dev],
                           env={**os.environ, **m.env}, capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "gpuctl: slurm gres: warning: GPU 2 is in MIG mode without "
                         "MIG devices: no line (create MIG devices, or disable MIG mode)\n")
        self.assertIn("# Left out, in MIG mode without MIG devices (CUDA cannot use it): GPU 2.",
                      r.stdout)
        caps = mig_minors(m)
        cap = os.path.join(dev, "nvidia-caps", "nvidia-cap%d")
        lines = [ln for ln in r.stdout.splitlines() if "Name=gpu" in ln]
        want = [("nvidia_a100_1g.5gb", 0, gi) for gi in range(7, 14)] + [
            ("nvidia_a100_3g.20gb", 1, 2), ("nvidia_a100_2g.10gb", 1, 3),
            ("nvidia_a100_1g.5gb", 1, 9)]
        self.assertEqual(len(lines), len(want) + 1)
        for ln, (t, g, gi) in zip(lines, want):
            files = ",".join([os.path.join(dev, "nvidia%d" % g),
                              cap % caps["gpu%d/gi%d/access" % (g, gi)],
                              cap % caps["gpu%d/gi%d/ci0/access" % (g, gi)]])
            self.assertTrue(ln.startswith("NodeName=n1 Name=gpu Type=%s MultipleFiles=%s "
                                          "Cores=0-63 Links=" % (t, files)), ln)
        self.assertTrue(lines[-1].startswith(
            "NodeName=n1 Name=gpu Type=nvidia_a100-sxm4-40gb File=%s/nvidia3 Cores=64-127 "
            "Links=" % dev), lines[-1])
        # MIG devices have no P2P: every pair with one is 0
        self.assertEqual(lines[-1].split("Links=")[1], ",".join(["0"] * 10 + ["-1"]))
        doc = json.loads(self.gres(m, "--format", "json"))
        self.assertEqual(doc["gres"], "gpu:nvidia_a100_1g.5gb:8,gpu:nvidia_a100_3g.20gb:1,"
                         "gpu:nvidia_a100_2g.10gb:1,gpu:nvidia_a100-sxm4-40gb:1")
        self.assertEqual(doc["mig_without_devices"], [2])
        first = doc["gpus"][0]
        self.assertEqual((first["index"], first["mig"], first["file"]), (0, 0, None))
        gpu0 = scenario_gpus("a100-mig")[0]
        self.assertEqual((first["uuid"], first["pci_bus_id"], first["name"]),
                         (gpu0["mig"]["instances"][0]["uuid"], gpu0["pci_bus_id"], gpu0["name"]))
        self.assertEqual(len(first["multiple_files"]), 3)
        self.assertEqual((doc["gpus"][-1]["mig"], doc["gpus"][-1]["multiple_files"]), (None, None))

    def test_numa_cores_are_refused_by_24_11_only(self):
        # The lines gpuctl wrote before issue 29 on dgx-a100: each GPU's NUMA node's cores
        # (48-63: four NUMA nodes a socket, scenario file). 22.05 takes them; 24.11 drains the
        # node (src/interfaces/gres.c, _check_core_range_matches_sock), which is why gpuctl
        # now writes whole sockets (test_every_scenario_on_both_versions).
        dev = os.path.join(self.root, "dev")
        numa = ["48-63", "48-63", "16-31", "16-31", "112-127", "112-127", "80-95", "80-95"]
        text = "NodeName=localhost AutoDetect=off\n" + "".join(
            "NodeName=localhost Name=gpu Type=nvidia_a100-sxm4-80gb File=%s/nvidia%d Cores=%s\n"
            % (dev, i, c) for i, c in enumerate(numa))
        m = self.machine("dgx-a100")
        old = self.cluster(m, text, "gpu:nvidia_a100-sxm4-80gb:8", version="22.05",
                           home=os.path.join(self.root, "slurm-22.05"))
        self.assertEqual(old.node_state(), "idle", old.show_node())
        old.stop()
        new = self.cluster(m, text, "gpu:nvidia_a100-sxm4-80gb:8", version="24.11",
                           home=os.path.join(self.root, "slurm-24.11"))
        wait_for(lambda: "doesn't match socket boundaries" in new.show_node(), 30,
                 "24.11's refusal")
        self.assertIn("Reason=gres/gpu GRES core specification 48-63 for node localhost "
                      "doesn't match socket boundaries. (Socket 0 is cores 0-63)",
                      new.show_node())
        self.assertNotEqual(new.node_state(), "idle")

    def test_numa_finer_affinity_is_said(self):
        # dgx-a100: each GPU's NUMA node is a quarter of its socket (scenario file), so the
        # output says what Slurm needs to see it; dgx1-v100's NUMA nodes are whole sockets
        m = self.machine("dgx-a100")
        text = self.gres(m)
        self.assertIn("SlurmdParameters=numa_node_as_socket", text)
        doc = json.loads(self.gres(m, "--format", "json"))
        self.assertEqual([g["affinity_cores"] for g in doc["gpus"]],
                         ["48-63", "48-63", "16-31", "16-31", "112-127", "112-127", "80-95",
                          "80-95"])
        self.assertEqual([g["cores"] for g in doc["gpus"]], ["0-63"] * 4 + ["64-127"] * 4)
        self.assertNotIn("numa_node_as_socket", self.gres(self.fresh("dgx1-v100")))


class JobsLand(SlurmCase):
    """A gres.conf listing a subset out of PCI order: Slurm's GPU i is the i-th line's file."""

    def setUp(self):
        super().setUp()
        self.m = self.machine("dgx1-v100")
        self.uuids = [g["uuid"] for g in scenario_gpus("dgx1-v100")]
        lines = {int(re.search(r"nvidia(\d+)", ln)[1]): re.sub(r" Links=\S+", "", ln)
                 for ln in self.gres(self.m).splitlines() if "Name=gpu" in ln}
        self.order = [6, 3, 2, 5]  # Slurm's GPUs 0..3 are /dev/nvidia6, 3, 2, 5
        text = "NodeName=localhost AutoDetect=off\n" + "\n".join(lines[k] for k in self.order)
        self.c = self.cluster(self.m, text + "\n", "gpu:tesla_v100-sxm2-32gb:4")

    def ledger(self):
        try:
            with open(self.m.ledger) as f:
                return [json.loads(x) for x in f]
        except FileNotFoundError:
            return []

    def test_run_inside_srun_lands_on_the_allotted_gpus(self):
        for count in (1, 2, 3):
            before = len(self.ledger())
            r = self.c.srun("--gres=gpu:%d" % count, "/bin/sh", "-c",
                            'echo "$SLURM_STEP_GPUS"; exec %s run -n %d -- %s --seconds 0 '
                            '--ledger %s' % (GPUCTL, count, NVSIM_LOAD, self.m.ledger))
            self.assertEqual(r.returncode, 0, r.stderr)
            slurm = [int(x) for x in r.stdout.splitlines()[0].split(",")]
            want = {self.uuids[self.order[p]] for p in slurm}
            rows = self.ledger()[before:]
            self.assertEqual(len(rows), 1, rows)
            self.assertEqual({d["uuid"] for d in rows[0]["devices"]}, want,
                             "Slurm allotted %s" % slurm)

    def test_each_ranks_follow_the_steps_gpus(self):
        before = len(self.ledger())
        r = self.c.srun("--gres=gpu:3", "/bin/sh", "-c",
                        'echo "$SLURM_STEP_GPUS"; exec %s run -n 3 --each -- %s --seconds 0 '
                        '--ledger %s' % (GPUCTL, NVSIM_LOAD, self.m.ledger))
        self.assertEqual(r.returncode, 0, r.stderr)
        slurm = [int(x) for x in r.stdout.splitlines()[0].split(",")]
        rows = self.ledger()[before:]
        self.assertEqual(len(rows), 3, rows)
        got = [d["uuid"] for row in rows for d in row["devices"]]
        self.assertEqual(sorted(got), sorted(self.uuids[self.order[p]] for p in slurm))

    def test_select_and_python_inside_srun_choose_within_the_step(self):
        # the CLI and the Python package (one allocation call in libgpuctl) see the same GPUs
        py = ("import gpuctl, os; print(os.environ['SLURM_STEP_GPUS']); "
              "print(','.join(sorted(d.uuid for d in gpuctl.select(2))))")
        pyenv = {"PYTHONPATH": os.path.join(SRC, "python"),
                 "GPUCTL_LIBRARY": os.path.join(BUILD, "lib", "libgpuctl.so.0")}
        if os.environ.get("GPUCTL_PYTHON_PRELOAD"):
            pyenv["LD_PRELOAD"] = os.environ["GPUCTL_PYTHON_PRELOAD"]
            pyenv["ASAN_OPTIONS"] = "detect_leaks=0"
        r = self.c.run(["srun", "-N1", "-n1", "--gres=gpu:2", "/usr/bin/python3", "-c", py],
                       env=pyenv, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        slurm, chosen = r.stdout.splitlines()[:2]
        want = sorted(self.uuids[self.order[int(p)]] for p in slurm.split(","))
        self.assertEqual(chosen.split(","), want)
        r = self.c.srun("--gres=gpu:2", "/bin/sh", "-c",
                        'echo "$SLURM_STEP_GPUS"; exec %s select -n 2' % GPUCTL)
        self.assertEqual(r.returncode, 0, r.stderr)
        slurm, line = r.stdout.splitlines()[:2]
        want = sorted(self.uuids[self.order[int(p)]] for p in slurm.split(","))
        self.assertEqual(sorted(line.split("=", 1)[1].split(",")), want)
        # asking for more than the step has is refused: everything else is outside
        r = self.c.srun("--gres=gpu:2", "/bin/sh", "-c",
                        'echo "$SLURM_STEP_GPUS"; exec %s select -n 3' % GPUCTL)
        self.assertEqual(r.returncode, 3, r.stderr)
        inside = {self.order[int(p)] for p in r.stdout.split()[0].split(",")}
        outside = ",".join(str(i) for i in range(8) if i not in inside)
        self.assertIn("need 3 GPUs, 2 qualify: outside the allocation of SLURM_STEP_GPUS: %s "
                      "(--ignore-outer chooses among all GPUs)\n" % outside, r.stderr)

    def test_sbatch_job_gpus(self):
        # a batch script sees SLURM_JOB_GPUS (no step variable) and Slurm's CUDA_VISIBLE_DEVICES
        script = os.path.join(self.m.state, "..", "job.sh")
        out = os.path.join(self.m.state, "..", "job.out")
        with open(script, "w") as f:
            f.write("#!/bin/sh\necho \"$SLURM_JOB_GPUS\"\n"
                    "exec %s run -n 2 --each -- %s --seconds 0 --ledger %s\n"
                    % (GPUCTL, NVSIM_LOAD, self.m.ledger))
        r = self.c.run(["sbatch", "--wait", "--gres=gpu:2", "-o", out, script], timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            lines = f.read().splitlines()
        slurm = [int(x) for x in lines[0].split(",")]
        got = sorted(d["uuid"] for row in self.ledger() for d in row["devices"])
        self.assertEqual(got, sorted(self.uuids[self.order[p]] for p in slurm), lines)

    def test_concurrent_steps_stay_disjoint(self):
        script = ('echo "$SLURM_STEP_GPUS"; exec %s run -n 2 -- %s --seconds 3 --ledger %s'
                  % (GPUCTL, NVSIM_LOAD, self.m.ledger))
        procs = [subprocess.Popen(["srun", "-N1", "-n1", "--gres=gpu:2", "/bin/sh", "-c",
                                   script], env=self.c.env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
        outs = [p.communicate(timeout=120) for p in procs]
        for p, (out, err) in zip(procs, outs):
            self.assertEqual(p.returncode, 0, err)
        steps = [[int(x) for x in out.splitlines()[0].split(",")] for out, _ in outs]
        self.assertFalse(set(steps[0]) & set(steps[1]), steps)
        rows = self.ledger()
        self.assertEqual(len(rows), 2)
        got = [frozenset(d["uuid"] for d in row["devices"]) for row in rows]
        want = {frozenset(self.uuids[self.order[p]] for p in s) for s in steps}
        self.assertEqual(set(got), want)


class HealthCheck(SlurmCase):
    def test_drain_resume_and_an_admins_drain(self):
        m = self.machine("dgx-a100")
        info = json.loads(self.gres(m, "--format", "json"))
        c = self.cluster(m, self.gres(m), info["gres"], health=True)
        wait_for(lambda: c.node_state() == "idle", 60, "idle")
        m.nvsim("xid", "-i", "0", "79")
        wait_for(lambda: "DRAIN" in c.show_node(), 60,
                 "the drain (health.log: %s)" % c.log("health"))
        reason = re.search(r"Reason=(.*?) \[", c.show_node())[1]
        self.assertTrue(reason.startswith("gpuctl: GPU 0 FAIL"), reason)
        self.assertIn("79", reason)
        # the driver reloads: the XID no longer counts, and gpuctl resumes its own drain
        with open(m.env["GPUCTL_KMSG"], "a") as f:
            f.write("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15\n")
        wait_for(lambda: "DRAIN" not in c.show_node(), 60, "the resume")
        # an administrator's drain is never resumed by gpuctl
        r = c.run(["scontrol", "update", "NodeName=localhost", "State=DRAIN",
                   "Reason=maintenance"])
        self.assertEqual(r.returncode, 0, r.stderr)
        n = c.log("health").count("\n")
        wait_for(lambda: c.log("health").count("\n") > n + 1, 60, "two more checks")
        self.assertIn("DRAIN", c.show_node())
        self.assertIn("Reason=maintenance", c.show_node())


if __name__ == "__main__":
    unittest.main()
