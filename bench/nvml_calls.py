#!/usr/bin/env python3
"""NVML calls per command, for bench/RESULTS.md: each command run once inside `nvsim exec
--calls-out` on each machine, the simulator's count of every NVML call it made (exact and
machine-independent, so tests/cli/test_nvml_calls.py asserts the ceilings), beside the bare
pynvml script of the same five fields (bench/pynvml_five.py) and gpustat where Debian's
python3-pynvml and gpustat are installed (scripts/deps.sh test).

    python3 bench/nvml_calls.py [BUILD]     prints the Markdown section"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
SCENARIOS = ("dgx-a100", "hgx-h100", "pcie-8gpu", "synthetic-64")
FIVE = "index,name,temperature.gpu,utilization.gpu,memory.used"
PY = "/usr/bin/python3"  # Debian's, with python3-pynvml


def commands(build):
    gpuctl = os.path.join(build, "bin", "gpuctl")
    out = [("`gpuctl list`", [gpuctl, "list"]),
           ("`gpuctl list --format json`", [gpuctl, "list", "--format", "json"]),
           (f"`gpuctl list --query {FIVE}`", [gpuctl, "list", "--query", FIVE])]
    ok = subprocess.run([PY, "-c", "import pynvml"], capture_output=True).returncode == 0 \
        if os.path.exists(PY) else False
    if ok:
        out.append(("`bench/pynvml_five.py` (the same five fields, pynvml)",
                    [PY, os.path.join(HERE, "pynvml_five.py")]))
    gpustat = shutil.which("gpustat") or "/usr/bin/gpustat"
    if ok and os.path.exists(gpustat):
        out.append(("`gpustat --json`", [gpustat, "--json"]))
    return out


def count(build, scenario, argv):
    nvsim = os.path.join(build, "bin", "nvsim")
    with tempfile.TemporaryDirectory() as tmp:
        calls = os.path.join(tmp, "calls.json")
        p = subprocess.run([nvsim, "exec", "--calls-out", calls, scenario, "--", *argv],
                           capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            raise SystemExit(f"nvml calls: {' '.join(argv)} on {scenario} failed "
                             f"({p.returncode}):\n{p.stderr}")
        with open(calls) as f:
            return json.load(f)["total"]


def gpus(scenario):
    with open(os.path.join(SRC, "sim", "scenarios", scenario + ".json")) as f:
        return len(json.load(f)["gpus"])


def section(build):
    lines = ["", "## NVML calls per command", "",
             f"Command: `python3 bench/nvml_calls.py {os.path.relpath(build, SRC)}`. Each command "
             "runs once in `nvsim exec",
             "--calls-out`; the simulator counts every NVML call (exact, machine-independent: "
             "`tests/cli/test_nvml_calls.py`",
             "asserts the ceilings). Issue 29's aims: `list` 12 per GPU, `list --query` of five "
             "fields 6.", "",
             "| scenario | GPUs | command | NVML calls | calls/GPU |",
             "|---|---:|---|---:|---:|"]
    for scenario in SCENARIOS:
        n = gpus(scenario)
        for label, argv in commands(build):
            c = count(build, scenario, argv)
            lines.append(f"| {scenario} | {n} | {label} | {c} | {c / n:.2f} |")
            print(lines[-1], flush=True, file=sys.stderr)
    return lines + ["", *WHAT_LIST_CALLS.strip("\n").split("\n")]


# What the default table still calls per GPU, and why (kept here so that make bench writes it).
WHAT_LIST_CALLS = """
What `gpuctl list` calls per GPU on dgx-a100 (19, plus init, count, three system facts and
shutdown), each for a column or a fact its HEALTH column judges: handle; UUID, PCI bus id, name
(identity: the table, the health state's GPUs, the hang message's bus id); memory, utilisation,
temperature, power draw, enforced power limit (the columns); compute processes (PROCESSES);
architecture (retired pages or remapped rows), slowdown threshold (`temperature`), clocks-event
reasons (`clocks`), PCIe generation, width and maximum width (`pcie-width`, `pcie-replay`), MIG
mode (`nvlink-down` skips MIG GPUs; MIG devices), the first active link's far end (`nvlink-
down` on NVSwitch machines); and one `nvmlDeviceGetFieldValues` for the ECC mode, recovery
action, ECC, replay and remap counters, the NVLink count and every link's state (13 calls of
their own per GPU on dgx-a100 before issue 29: 262 in all, 32.75 per GPU). Issue 29's 12 would
need 7.75 fewer per GPU: nvml.h's field ids 185/186 (power) and 190 (enforced limit) could take
2 into the same call, and reading the architecture, PCIe generation, maximum width and MIG mode
only where their value can change the verdict 4 more, still 1.75 short of it; not done (open).
"""


if __name__ == "__main__":
    print("\n".join(section(os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build"))))
