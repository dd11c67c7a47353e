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
    """(label, argv, facts cache): the cache "cold" is a new file (the first listing of a boot),
    "warm" the file the cold run wrote, None no cache."""
    gpuctl = os.path.join(build, "bin", "gpuctl")
    out = [("`gpuctl list`, first of a boot (fills the facts cache)", [gpuctl, "list"], "cold"),
           ("`gpuctl list`", [gpuctl, "list"], "warm"),
           ("`gpuctl list --format json`", [gpuctl, "list", "--format", "json"], "warm"),
           (f"`gpuctl list --query {FIVE}`", [gpuctl, "list", "--query", FIVE], None)]
    ok = subprocess.run([PY, "-c", "import pynvml"], capture_output=True).returncode == 0 \
        if os.path.exists(PY) else False
    if ok:
        out.append(("`bench/pynvml_five.py` (the same five fields, pynvml)",
                    [PY, os.path.join(HERE, "pynvml_five.py")], None))
    gpustat = shutil.which("gpustat") or "/usr/bin/gpustat"
    if ok and os.path.exists(gpustat):
        out.append(("`gpustat --json`", [gpustat, "--json"], None))
    return out


def count(build, scenario, argv, facts):
    nvsim = os.path.join(build, "bin", "nvsim")
    env = dict(os.environ, GPUCTL_FACTS_CACHE=facts or "off")
    with tempfile.TemporaryDirectory() as tmp:
        calls = os.path.join(tmp, "calls.json")
        p = subprocess.run([nvsim, "exec", "--calls-out", calls, scenario, "--", *argv],
                           capture_output=True, text=True, timeout=300, env=env)
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
             "fields 6. `list` runs with a facts cache of its own (first of a boot: a new one;",
             "then: the one that run filled), the others with none.", "",
             "| scenario | GPUs | command | NVML calls | calls/GPU |",
             "|---|---:|---|---:|---:|"]
    for scenario in SCENARIOS:
        n = gpus(scenario)
        cache = tempfile.mkdtemp(prefix="gpuctl-bench-facts-")
        facts = os.path.join(cache, "facts")
        for label, argv, state in commands(build):
            if state == "cold" and os.path.exists(facts):
                os.unlink(facts)
            c = count(build, scenario, argv, facts if state else None)
            lines.append(f"| {scenario} | {n} | {label} | {c} | {c / n:.2f} |")
            print(lines[-1], flush=True, file=sys.stderr)
        shutil.rmtree(cache, ignore_errors=True)
    return lines + ["", *WHAT_LIST_CALLS.strip("\n").split("\n")]


# What the default table still calls per GPU, and why (kept here so that make bench writes it).
WHAT_LIST_CALLS = """
What `gpuctl list` calls per GPU on dgx-a100 (9 with this boot's facts cache, plus init, count
and shutdown), each for a column or a fact its HEALTH column judges: handle; UUID (the table,
and the key of the facts cache); one `nvmlDeviceGetFieldValues` for the power draw and enforced
limit (the POWER column; nvml.h fields 185/186 and 190), the ECC mode, recovery action, ECC,
replay and remap counters, the NVLink count, every link's state and the NVLinks into NVSwitches
(`nvlink-down`); memory, utilisation (which also says the GPU is not in MIG mode: nvml.h),
temperature (the columns); clocks-event reasons (`clocks`), PCIe width (`pcie-width`); compute
processes (PROCESSES). The facts cache (docs/ARCHITECTURE.md) holds the name, PCI bus id,
slowdown temperature (`temperature`) and maximum PCIe width, which the first listing of a boot
reads (13 a GPU then). Not asked: the architecture (the remapped-row entries answered), the PCIe
generation (it only budgets the replay rate, which needs a health state file's earlier sample),
the driver, NVML and CUDA versions (the table shows none). Before issue 29: 19 per GPU and six
fixed calls (158 in all, 19.75 a GPU); before the field values carried the link states and the
ECC mode, 262 (32.75 a GPU).
"""


if __name__ == "__main__":
    print("\n".join(section(os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build"))))
