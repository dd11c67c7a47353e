#!/usr/bin/env python3
"""gpuctl watch's cost: NVML calls per interval for each column group (counted by the simulator,
machine-independent), CPU per interval and peak resident memory.

Calls per interval = (calls of `watch -c 11` - calls of `watch -c 1`) / 10: the first interval
reads identity and static facts, every later one only what it prints. CPU per interval likewise
from `-c 51` and `-c 1` (bench/measure.py, rusage of the gpuctl process). Resident memory is
read from /proc (VmRSS, VmHWM) of a watch that has run 3 s: rusage's maxrss of a forked child
counts its parent's pages from before the exec. Run by bench.py
(`make bench`), or alone: python3 bench/watch_bench.py --build build
"""
import argparse
import json
import os
import subprocess
import sys
import signal
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
GROUPS = ("puc", "p", "u", "c", "v", "m", "e", "t", "pucvmet", "--procs")


def watch_args(group, count=None):
    """gpuctl watch with these columns every 0.1 s, COUNT intervals (None: until SIGINT)."""
    g = ["--procs"] if group == "--procs" else ["-s", group]
    return ["watch", *g, *(["-c", str(count)] if count else []), "-d", "0.1"]


def calls(build, scenario, argv):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "calls.json")
        p = subprocess.run([os.path.join(build, "bin", "nvsim"), "exec", "--calls-out", out, scenario,
                            "--", os.path.join(build, "bin", "gpuctl"), *argv],
                           capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"watch_bench: gpuctl {' '.join(argv)} failed:\n{p.stderr}")
        with open(out) as f:
            return json.load(f)["total"]


def cpu(build, scenario, argv):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "m.json")
        p = subprocess.run([os.path.join(build, "bin", "nvsim"), "exec", scenario, "--", sys.executable,
                            os.path.join(HERE, "measure.py"), out, "1",
                            os.path.join(build, "bin", "gpuctl"), *argv],
                           capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"watch_bench: measuring gpuctl {' '.join(argv)} failed:\n{p.stderr}")
        with open(out) as f:
            return json.load(f)


def memory(build, scenario, argv):
    """VmRSS and VmHWM (KiB) of gpuctl watch after 3 s of 0.1 s intervals."""
    sys.path.insert(0, HERE)
    from exporter_bench import child_of, status_kb
    p = subprocess.Popen([os.path.join(build, "bin", "nvsim"), "exec", scenario, "--",
                          os.path.join(build, "bin", "gpuctl"), *argv],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        time.sleep(3)
        pid = child_of(p.pid)
        r = (status_kb(pid, "VmRSS"), status_kb(pid, "VmHWM"))
        p.send_signal(signal.SIGINT)
        if p.wait(timeout=30) != 0:
            raise SystemExit(f"watch_bench: gpuctl {' '.join(argv)} failed:\n{p.stderr.read()}")
        return r
    finally:
        p.kill()


def n_gpus(scenario):
    with open(os.path.join(SRC, "sim", "scenarios", scenario + ".json")) as f:
        return len(json.load(f)["gpus"])


def section(build, scenarios=("dgx-a100", "synthetic-64")):
    """Markdown lines for bench/RESULTS.md."""
    lines = ["", "## Watch", "",
             "`gpuctl watch` under `nvsim exec` (bench/watch_bench.py), NVML at 0 us per call. NVML",
             "calls per interval after the first (the simulator's count: (calls of `-c 11` - calls of",
             "`-c 1`) / 10), CPU ms per interval ((CPU of `-c 51` - CPU of `-c 1`) / 50, gpuctl plus",
             "the simulator library in its process), resident and peak memory after 3 s (the",
             "simulator library included). For comparison,",
             "`nvidia-smi dmon -s puct` is reported at about 5 MiB and 7.5 % of a core at 1 Hz",
             "(NVIDIA/gpu-monitoring-tools#133).", "",
             "| scenario | GPUs | columns | NVML calls/interval | calls/GPU/interval | CPU ms/interval | RSS MiB | peak RSS MiB |",
             "|---|---:|---|---:|---:|---:|---:|---:|"]
    for s in scenarios:
        n = n_gpus(s)
        for g in GROUPS:
            per = (calls(build, s, watch_args(g, 11)) - calls(build, s, watch_args(g, 1))) / 10
            one, many = cpu(build, s, watch_args(g, 1)), cpu(build, s, watch_args(g, 51))
            cpu_per = max(0.0, (many["cpu_ms"] - one["cpu_ms"]) / 50)
            rss, hwm = memory(build, s, watch_args(g))
            label = g if g == "--procs" else f"-s {g}"
            print(f"watch {s:14} {label:11} calls/interval {per:6.1f} ({per / n:4.1f}/GPU)  "
                  f"cpu {cpu_per:.3f} ms/interval  rss {rss / 1024:.1f} MiB  peak {hwm / 1024:.1f} MiB",
                  flush=True)
            lines.append(f"| {s} | {n} | `{label}` | {per:.0f} | {per / n:.1f} | {cpu_per:.3f} | "
                         f"{rss / 1024:.1f} | {hwm / 1024:.1f} |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--scenario", action="append")
    a = ap.parse_args()
    print("\n".join(section(os.path.abspath(a.build), a.scenario or ("dgx-a100", "synthetic-64"))))


if __name__ == "__main__":
    main()
