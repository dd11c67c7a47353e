"""Three NVML clients nobody here wrote, run unmodified on the simulator, on every scenario, and
compared value by value with gpuctl (and, for nvtop, with the scenario file):

- nvtop (C, loads NVML at run time), its screen read through tmux's capture-pane: every GPU
  appears with the scenario's name, PCIe link, clocks, temperature, fan, power, utilisation and
  memory;
- gpustat --json (Python, NVIDIA's pynvml binding): every value it shows equals gpuctl list's;
- tests/cli/nvml_probe.py, NVIDIA's pynvml binding on Debian's /usr/bin/python3: every query
  gpuctl's list and topo fields rest on (identity, PCI, memory v1 and v2, utilisation,
  temperatures, power, clocks, PCIe, ECC, retired pages, remapped rows, CPU and memory affinity,
  processes, NVLink state and remote ends, common ancestor, P2P status, MIG) equals gpuctl's JSON.

Each scenario runs once: a compute process registered on the first GPU not in MIG mode
(1.5 GiB, 30 %), then gpuctl,
gpustat, the probe and nvtop on the same simulated machine. The packages come from Debian's
contrib (scripts/deps.sh test)."""
import json
import math
import os
import re
import shutil
import tempfile
import unittest

from gpuctl_test import GpuctlTestCase, SRC, scenario_gpus, scenario_names, sim_sh

PROBE = os.path.join(SRC, "tests", "cli", "nvml_probe.py")
MIB = 1 << 20
PROC_MEM = 1536 * MIB
PROC_UTIL = 30
# nvtop 3.0.1 keeps its devices in fixed arrays of 64: with more it aborts ("stack smashing
# detected"), on a real driver as on the simulator. Those machines are checked by the other two.
NVTOP_MAX_GPUS = 64

# The clients are not built with the sanitizers: in the ASan build they load the instrumented
# simulator only with the runtimes preloaded ($CLIENT_PRELOAD), and their own leaks are not ours.
SCRIPT = r"""
C="env LD_PRELOAD=$CLIENT_PRELOAD ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"
$NVSIM proc add --pid $$ -i "$PROC_GPU" --mem 1536MiB --util 30
$GPUCTL list --format json > "$OUT/list.json"
$GPUCTL topo --format json > "$OUT/topo.json"
$C gpustat --json > "$OUT/gpustat.json"
$C /usr/bin/python3 "$PROBE" > "$OUT/probe.json"
[ "$NGPUS" -le "$NVTOP_MAX" ] || exit 0
S="gpuctl-test-$$"
tmux -L "$S" new-session -d -s nvtop -x 220 -y 300 "$C nvtop -C; sleep 60"
last=$((NGPUS - 1))
for _ in $(seq 100); do
    tmux -L "$S" capture-pane -p -t nvtop > "$OUT/nvtop.txt"
    grep -Eq "Device $last ?\[" "$OUT/nvtop.txt" && grep -q "PID USER" "$OUT/nvtop.txt" && break
    sleep 0.1
done
# nvtop's second refresh reads utilisation and processes: this shell's row appears then
for _ in $(seq 300); do
    tmux -L "$S" capture-pane -p -t nvtop > "$OUT/nvtop.txt"
    grep -Eq "^ *$$ " "$OUT/nvtop.txt" && break
    sleep 0.1
done
tmux -L "$S" kill-server
"""


def proc_gpu(gpus):
    """Where the test's process runs: the first GPU not in MIG mode (a MIG-enabled GPU's own
    process list is for privileged callers only, and tests may run as any user)."""
    return next(i for i, g in enumerate(gpus) if not g.get("mig", {}).get("enabled"))


def mw_to_w(v):
    return None if v is None else v // 1000


def cpulist(s):
    out = set()
    for part in s.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return sorted(out)


P2P_CODES = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DR", 5: "NS", 6: "U"}


class NvmlClientsTest(GpuctlTestCase):
    maxDiff = None

    def collect(self, name):
        out = tempfile.mkdtemp(prefix="gpuctl-test-clients-")
        self.addCleanup(shutil.rmtree, out, True)
        home = os.path.join(out, "home")
        os.makedirs(home)
        n = len(scenario_gpus(name))
        r = sim_sh(name, SCRIPT, env={"OUT": out, "PROBE": PROBE, "NGPUS": str(n),
                                      "PROC_GPU": str(proc_gpu(scenario_gpus(name))),
                                      "NVTOP_MAX": str(NVTOP_MAX_GPUS), "HOME": home,
                                      "XDG_CONFIG_HOME": home, "TERM": "xterm",
                                      "CLIENT_PRELOAD": os.environ.get("GPUCTL_PYTHON_PRELOAD", "")},
                   timeout=240)
        self.assertOk(r)
        res = {}
        for f in ("list", "topo", "gpustat", "probe"):
            with open(os.path.join(out, f + ".json")) as fh:
                res[f] = json.load(fh)
        res["nvtop"] = None
        if n <= NVTOP_MAX_GPUS:
            with open(os.path.join(out, "nvtop.txt")) as fh:
                res["nvtop"] = fh.read()
        return res

    def test_every_scenario(self):
        for name in scenario_names():
            with self.subTest(scenario=name):
                res = self.collect(name)
                self.check_gpustat(res)
                self.check_probe(res)
                if res["nvtop"] is not None:
                    self.check_nvtop(name, res["nvtop"])

    # gpustat: its keys are nvidia-smi's; the units are its own (W, MiB, both floored).
    def check_gpustat(self, res):
        gl = res["list"]["gpus"]
        gs = res["gpustat"]["gpus"]
        self.assertEqual(res["gpustat"]["driver_version"], res["probe"]["driver_version"])
        self.assertEqual(len(gs), len(gl))
        for s, g in zip(gs, gl):
            want = {
                "index": g["index"], "uuid": g["uuid"], "name": g["name"],
                "temperature.gpu": g["temperature_gpu"],
                "utilization.gpu": g["utilization_gpu"],
                "utilization.enc": g["utilization_encoder"],
                "utilization.dec": g["utilization_decoder"],
                "power.draw": mw_to_w(g["power_draw"]),
                "enforced.power.limit": mw_to_w(g["power_limit"]),
                # gpustat reads memory info v1, whose used includes the driver's reservation:
                # total - free, where gpuctl's used (v2) leaves the reservation out
                "memory.used": (g["memory_total"] - g["memory_free"]) // MIB,
                "memory.total": g["memory_total"] // MIB,
            }
            self.assertEqual({k: s[k] for k in want}, want, g["uuid"])
            # gpustat has None where NVML refused the list (a MIG-enabled GPU, not root)
            self.assertEqual(sorted([p["pid"], p["gpu_memory_usage"]] for p in s["processes"] or []),
                             sorted([p["pid"], p["used_memory"] // MIB] for p in g["processes"]))

    def check_probe(self, res):
        gl = res["list"]["gpus"]
        pr = res["probe"]["gpus"]
        self.assertEqual(len(pr), len(gl))
        for p, g in zip(pr, gl):
            total, reserved, used, free = p["memory_v2"]
            util = p["utilization"] or [None, None]
            want = {
                "index": p["index"], "uuid": p["uuid"], "name": p["name"],
                "pci_bus_id": p["pci_bus_id"], "pci_device_id": p["pci_device_id"],
                "serial": p["serial"], "minor_number": p["minor_number"],
                "compute_cap": p["compute_cap"],
                "memory_total": total, "memory_used": used, "memory_free": free,
                "utilization_gpu": util[0], "utilization_memory": util[1],
                "temperature_gpu": p["temperature_gpu"],
                "temperature_slowdown": p["temperature_slowdown"],
                "temperature_shutdown": p["temperature_shutdown"],
                "power_draw": p["power_draw"], "power_limit": p["power_limit"],
                "clocks_sm": p["clocks_sm"], "clocks_mem": p["clocks_mem"],
                "clocks_max_sm": p["clocks_max_sm"], "clocks_max_mem": p["clocks_max_mem"],
                "pcie_gen": p["pcie_gen"], "pcie_gen_max": p["pcie_gen_max"],
                "pcie_width": p["pcie_width"], "pcie_width_max": p["pcie_width_max"],
                "ecc_mode": None if p["ecc_mode"] is None else bool(p["ecc_mode"][0]),
                "ecc_mode_pending": None if p["ecc_mode"] is None else bool(p["ecc_mode"][1]),
                "mig_mode": None if p["mig_mode"] is None else bool(p["mig_mode"][0]),
                "mig_mode_pending": None if p["mig_mode"] is None else bool(p["mig_mode"][1]),
                "numa_node": p["numa_nodes"][0] if p["numa_nodes"] else None,
            }
            ecc = p["ecc"] or [None] * 4
            want.update(zip(("ecc_volatile_corrected", "ecc_volatile_uncorrected",
                             "ecc_aggregate_corrected", "ecc_aggregate_uncorrected"), ecc))
            ret = p["retired"] or [None] * 3
            want.update(zip(("retired_pages_sbe", "retired_pages_dbe", "retired_pages_pending"),
                            [ret[0], ret[1], None if ret[2] is None else bool(ret[2])]))
            rm = p["remapped"] or [None] * 4
            want.update(zip(("remapped_rows_correctable", "remapped_rows_uncorrectable"), rm[:2]))
            want.update(zip(("remapped_rows_pending", "remapped_rows_failure"),
                            [None if v is None else bool(v) for v in rm[2:]]))
            self.assertEqual({k: g[k] for k in want}, want, g["uuid"])
            # v1 memory: used includes what v2 reports as reserved
            self.assertEqual(p["memory_v1"], [total, used + reserved, free])
            self.assertEqual(cpulist(g["cpu_affinity"]) if g["cpu_affinity"] else None,
                             p["cpu_affinity"])
            self.assertEqual(sorted([q["pid"], q["used_memory"]] for q in g["processes"]),
                             p["processes"])
            self.assertEqual([[m["uuid"], m["gpu_instance_id"], m["compute_instance_id"],
                               m["memory_total"]] for m in g["mig_devices"]], p["mig_devices"])
        self.check_pairs(res)

    def check_pairs(self, res):
        pr = res["probe"]["gpus"]
        bus = {g["pci_bus_id"]: g["index"] for g in pr}
        links = {(l["a"], l["b"]): l for l in res["topo"]["links"]}
        self.assertEqual(len(links), len(res["probe"]["pairs"]))
        for a, b, level, p2p in res["probe"]["pairs"]:
            l = links[(a, b)]
            self.assertEqual(l["level_value"], level, (a, b))
            self.assertEqual(l["p2p"], P2P_CODES.get(p2p), (a, b))
            # NVLinks: active links of a whose far end is b; through NVSwitches, each GPU's
            # active links into the fabric (docs/json.md), the pair's the smaller of the two
            direct = sum(1 for _, on, rb, _t in pr[a]["nvlinks"] if on and bus.get(rb) == b)
            sw = [sum(1 for _, on, _rb, t in pr[i]["nvlinks"] if on and t == 2) for i in (a, b)]
            if l["nvswitch"]:
                self.assertEqual(l["nvlinks"], min(sw), (a, b))
            else:
                self.assertEqual(l["nvlinks"], direct, (a, b))

    # nvtop: three lines per device, two or three devices side by side ("Device 10[" loses the
    # space, and " W" after the power limit is cut when the line is full).
    DEV = re.compile(r"Device (\d+) ?\[(.*?)\]\s+PCIe GEN (\d+)@\s*(\d+)x")
    CLK = re.compile(r"GPU (N/A|\d+)MHz\s+MEM (N/A|\d+)MHz\s+TEMP\s+(N/A|\d+)°C\s+FAN\s+(N/A|\d+)%"
                     r"\s+POW\s+(N/A|\d+) /\s*(N/A|\d+)")  # " W" is cut where the text is long
    BAR = re.compile(r"GPU\[[|\s]*(N/A|\d+%)\]\s+MEM\[[|\s]*([\d.]+)Gi/([\d.]+)Gi\]")

    def parse_nvtop(self, screen):
        lines = screen.splitlines()
        shown = {}
        for i, line in enumerate(lines):
            devs = self.DEV.findall(line)
            if not devs:
                continue
            clks = self.CLK.findall(lines[i + 1])
            bars = self.BAR.findall(lines[i + 2])
            self.assertEqual((len(clks), len(bars)), (len(devs), len(devs)), "\n".join(lines[i:i + 3]))
            for d, c, b in zip(devs, clks, bars):
                shown[int(d[0])] = d[1:] + c + b
        return shown

    def check_nvtop(self, name, screen):
        shown = self.parse_nvtop(screen)
        gpus = scenario_gpus(name)
        self.assertEqual(sorted(shown), list(range(len(gpus))), screen)

        def na(v):
            return "N/A" if v is None else str(v)

        for i, g in enumerate(gpus):
            mig_on = bool(g.get("mig", {}).get("enabled"))
            mine = i == proc_gpu(gpus)
            proc_mem = PROC_MEM if mine else 0
            util = min(100, g.get("utilization_gpu", 0) + (PROC_UTIL if mine else 0))
            # nvtop reads memory info v1: used includes the reservation
            used = (g.get("memory_used_mib", 0) + g.get("memory_reserved_mib", 0)) * MIB + proc_mem
            clocks = g.get("clocks_mhz", {})
            want = (g["name"], str(g["pcie"]["gen"]), str(g["pcie"]["width"]),
                    na(clocks.get("sm")), na(clocks.get("mem")), str(g.get("temperature_c", 35)),
                    na(g.get("fan_speed_pct")),
                    na(mw_to_w(g.get("power_draw_mw"))), na(mw_to_w(g.get("power_limit_mw"))),
                    "N/A" if mig_on else f"{util}%",
                    f"{used / (1 << 30):.3f}", f"{g['memory_total_mib'] / 1024:.3f}")
            self.assertEqual(shown[i], want, f"GPU {i}\n{screen}")


if __name__ == "__main__":
    unittest.main()
