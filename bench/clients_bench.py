#!/usr/bin/env python3
"""gpuctl's NVML cost beside an NVML client people use, on the same simulated machine and
latency, for bench/RESULTS.md: NVML calls per run and per GPU (counted by the simulator,
machine-independent) and median wall time per run with the simulator at 0 and 100 us per call.

The peer is Debian's gpustat (contrib; scripts/deps.sh test), run unmodified through NVIDIA's
pynvml on the simulator. nvtop has no one-shot mode, so it is not timed here.

    python3 bench/clients_bench.py [BUILD]     prints the Markdown section"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
SCENARIOS = [("dgx-a100", 8), ("synthetic-64", 64)]
LATENCIES = (0, 100)
def tools(build):
    gpuctl = os.path.join(build, "bin", "gpuctl")
    out = [("`gpuctl list`", [gpuctl, "list"], 10),
           ("`gpuctl list --format json`", [gpuctl, "list", "--format", "json"], 10)]
    gpustat = shutil.which("gpustat") or "/usr/bin/gpustat"
    if os.path.exists(gpustat):
        # Debian's python3: the script's own #! line
        out.append(("`gpustat --json`", [gpustat, "--json"], 3))
    return out


def measure(build, scenario, argv, latency, repeat):
    """gpuctl runs with the facts cache a run before the measured ones filled (the runs after
    the first of a boot, docs/ARCHITECTURE.md); gpustat keeps no such thing."""
    nvsim = os.path.join(build, "bin", "nvsim")
    with tempfile.TemporaryDirectory() as tmp:
        calls = os.path.join(tmp, "calls.json")
        out = os.path.join(tmp, "times.json")
        env = dict(os.environ, GPUCTL_FACTS_CACHE=os.path.join(tmp, "facts"))
        subprocess.run([nvsim, "exec", scenario, "--", *argv], capture_output=True, timeout=900,
                       env=env)
        cmd = [nvsim, "exec", "--latency-us", str(latency), "--calls-out", calls, scenario, "--",
               sys.executable, os.path.join(HERE, "measure.py"), out, str(repeat), *argv]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
        if p.returncode != 0:
            raise SystemExit(f"clients bench: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
        with open(out) as f:
            t = json.load(f)
        with open(calls) as f:
            c = json.load(f)
    return t["wall_ms"], c["total"] / repeat


def first_of_boot(build, scenario, n):
    """NVML calls per GPU of the first `gpuctl list` of a boot (a new facts cache)."""
    nvsim = os.path.join(build, "bin", "nvsim")
    with tempfile.TemporaryDirectory() as tmp:
        calls = os.path.join(tmp, "calls.json")
        subprocess.run([nvsim, "exec", "--calls-out", calls, scenario, "--",
                        os.path.join(build, "bin", "gpuctl"), "list"], check=True,
                       stdout=subprocess.DEVNULL, timeout=300,
                       env=dict(os.environ, GPUCTL_FACTS_CACHE=os.path.join(tmp, "facts")))
        with open(calls) as f:
            return json.load(f)["total"] / n


def section(build):
    lines = ["", "## Beside an NVML client (gpustat)", "",
             f"Command: `python3 bench/clients_bench.py {os.path.relpath(build, SRC)}`. Each tool runs",
             "unmodified inside one `nvsim exec` per row and latency (bench/measure.py: median wall",
             "ms per run); NVML calls per run are the simulator's counts. gpustat sleeps 0.1 s per",
             "GPU on purpose (its own TODO: to sample CPU use of processes), on real drivers too,",
             "so its wall time is mostly that; the calls are the comparable figure.", "",
             "| scenario | GPUs | tool | NVML calls | calls/GPU | wall ms (0 us) | wall ms (100 us/call) |",
             "|---|---:|---|---:|---:|---:|---:|"]
    per_gpu = {}
    for scenario, n in SCENARIOS:
        for label, argv, repeat in tools(build):
            res = {lat: measure(build, scenario, argv, lat, repeat if lat == 0 else max(3, repeat // 2))
                   for lat in LATENCIES}
            calls = res[0][1]
            per_gpu[(scenario, label)] = calls / n
            lines.append(f"| {scenario} | {n} | {label} | {calls:.0f} | {calls / n:.1f} | "
                         f"{res[0][0]:.1f} | {res[100][0]:.1f} |")
            print(lines[-1], flush=True, file=sys.stderr)
    ours = [per_gpu[(s, "`gpuctl list`")] for s, _ in SCENARIOS]
    theirs = [per_gpu.get((s, "`gpustat --json`")) for s, _ in SCENARIOS]
    cold = [first_of_boot(build, s, n) for s, n in SCENARIOS]
    if None not in theirs:
        lines += ["",
                  f"The default table (`gpuctl list`) makes {min(ours):.1f}-{max(ours):.1f} calls "
                  "per GPU with the facts cache a",
                  f"run before filled ({min(cold):.1f}-{max(cold):.1f} in the first listing of a "
                  "boot, which fills it).",
                  f"gpustat's {min(theirs):.1f}-{max(theirs):.1f} are handle, name, UUID, index, "
                  "temperature, fan, utilisation,",
                  "encoder, decoder, memory, power, power limit and the compute and graphics process "
                  "lists;",
                  "gpuctl's table reads the handle, UUID, memory, utilisation, temperature and "
                  "compute processes it",
                  "shows, one nvmlDeviceGetFieldValues call (power draw and limit, ECC mode and "
                  "counts, remapped rows",
                  "or retired pages, PCIe replays, recovery action, NVLink states and NVSwitch "
                  "links), and the clock",
                  "event reasons and PCIe width its health column rests on; the name, PCI bus id, "
                  "slowdown",
                  "temperature and maximum PCIe width come from the facts cache "
                  "(docs/ARCHITECTURE.md).",
                  "Wall times at 100 us depend on the machine's load (the simulator busy-waits): "
                  "compare calls."]
    return lines


if __name__ == "__main__":
    print("\n".join(section(os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build"))))
