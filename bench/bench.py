#!/usr/bin/env python3
"""make bench: gpuctl's cost per command on every simulated machine.

For each scenario and each simulated NVML latency (0 and 100 us per call) it runs a gpuctl
command REPEAT times inside one `nvsim exec` and reports:
  - wall time per run (median), including every simulated NVML delay;
  - CPU time per run (user+sys of gpuctl, from the kernel's accounting of the children); at 0 us
    this is gpuctl plus the simulator library in its process (scenario parsing); at 100 us it
    also includes the simulator's busy-wait;
  - NVML calls per run and per GPU, counted by the simulator: machine-independent, the figure to
    compare across changes.
Every command runs with a facts cache that a run before the measured ones filled (the runs of a
user after the first of a boot; bench/nvml_calls.py shows the first too).
Results are written as a Markdown table with the command and the machine it ran on. Speed is
measured here, never asserted in tests.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)

COMMANDS = {
    "list": ["list"],
    "list --query": ["list", "--query", "index,uuid,memory.used,utilization.gpu"],
    "topo": ["topo"],
    "info": ["info"],
}
LATENCIES = (0, 100)


def machine():
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs, Linux {platform.release()}"


def scenario_gpus(name):
    with open(os.path.join(SRC, "sim", "scenarios", name + ".json")) as f:
        return len(json.load(f)["gpus"])


def measure(build, scenario, argv, latency, repeat):
    nvsim = os.path.join(build, "bin", "nvsim")
    gpuctl = os.path.join(build, "bin", "gpuctl")
    with tempfile.TemporaryDirectory() as tmp:
        calls = os.path.join(tmp, "calls.json")
        out = os.path.join(tmp, "times.json")
        # the runs a user makes after the first of a boot: with the facts cache that one filled
        # (docs/ARCHITECTURE.md), filled here by a run not measured
        env = dict(os.environ, GPUCTL_FACTS_CACHE=os.path.join(tmp, "facts"))
        subprocess.run([nvsim, "exec", scenario, "--", gpuctl, *argv], capture_output=True,
                       timeout=600, env=env)
        cmd = [nvsim, "exec", "--latency-us", str(latency), "--calls-out", calls, scenario, "--",
               sys.executable, os.path.join(HERE, "measure.py"), out, str(repeat), gpuctl, *argv]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
        if p.returncode != 0:
            raise SystemExit(f"bench: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
        with open(out) as f:
            t = json.load(f)
        with open(calls) as f:
            c = json.load(f)
    return t, c["total"] / repeat


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default=os.path.join(HERE, "RESULTS.md"))
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--scenario", action="append", help="only these scenarios")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    names = a.scenario or sorted(f[:-5] for f in os.listdir(os.path.join(SRC, "sim", "scenarios"))
                                 if f.endswith(".json"))
    rows = []
    for name in names:
        n = scenario_gpus(name)
        for label, argv in COMMANDS.items():
            r = {"scenario": name, "gpus": n, "command": label}
            for lat in LATENCIES:
                t, calls = measure(build, name, argv, lat, a.repeat if lat == 0 else max(3, a.repeat // 4))
                r[lat] = (t, calls)
            rows.append(r)
            t0, c0 = r[0]
            t1, _ = r[100]
            print(f"{name:20} {label:14} {n:3} GPUs  wall {t0['wall_ms']:7.2f} ms  cpu {t0['cpu_ms']:7.2f} ms"
                  f"  calls {c0:6.0f} ({c0 / n:5.1f}/GPU)  wall@100us {t1['wall_ms']:8.2f} ms", flush=True)

    lines = [
        "# Benchmark results",
        "",
        f"Command: `make bench` (python3 bench/bench.py --build {a.build} --repeat {a.repeat})  ",
        f"Machine: {machine()}  ",
        f"Date: {datetime.date.today().isoformat()}  ",
        "",
        "Each row runs the gpuctl command repeatedly inside one `nvsim exec` (bench/measure.py).",
        "Wall and CPU are medians per run in ms (CPU = user+sys of the gpuctl process, which at",
        "0 us is gpuctl plus the simulator library loaded into it). NVML calls are counted by the",
        "simulator and do not depend on the machine.",
        "At 100 us the simulator busy-waits 100 us in every NVML call, as a slow driver would.",
        "Every command runs with the facts cache a run before the measured ones filled (the",
        "runs after the first of a boot; docs/ARCHITECTURE.md).",
        "",
        "| scenario | GPUs | command | wall ms (0 us) | CPU ms (0 us) | NVML calls | calls/GPU | wall ms (100 us/call) |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        t0, c0 = r[0]
        t1, _ = r[100]
        lines.append(f"| {r['scenario']} | {r['gpus']} | `gpuctl {r['command']}` | {t0['wall_ms']:.2f} | "
                     f"{t0['cpu_ms']:.2f} | {c0:.0f} | {c0 / r['gpus']:.1f} | {t1['wall_ms']:.2f} |")
    # Launch overhead: `gpuctl run -n 1 -- true` against plain `true` on the simulated DGX A100
    # (aim: under 5 ms added). Both run inside the same nvsim exec, alternating.
    if not a.scenario:
        nvsim = os.path.join(build, "bin", "nvsim")
        gpuctl = os.path.join(build, "bin", "gpuctl")
        true = shutil.which("true") or "/bin/true"
        res = {}
        # The lease directory on a tmpfs, as the default /run/gpuctl is (a disk's fsync of the
        # owner record would misstate the cost).
        shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        with tempfile.TemporaryDirectory(dir=shm) as tmp:
            # gpuctl run takes a lease: in a private directory, never the machine's /run/gpuctl.
            leases = os.path.join(tmp, "leases")
            os.mkdir(leases, 0o700)
            env = dict(os.environ, GPUCTL_LEASE_DIR=leases)
            for label, argv in (("true", [true]), ("gpuctl run -n 1 -- true", [gpuctl, "run", "-n", "1", "--", true])):
                out = os.path.join(tmp, "t.json")
                p = subprocess.run([nvsim, "exec", "dgx-a100", "--", sys.executable,
                                    os.path.join(HERE, "measure.py"), out, str(max(a.repeat, 20)), *argv],
                                   capture_output=True, text=True, timeout=600, env=env)
                if p.returncode != 0:
                    raise SystemExit(f"bench: launch overhead ({label}) failed:\n{p.stderr}")
                with open(out) as f:
                    res[label] = json.load(f)
        added = res["gpuctl run -n 1 -- true"]["wall_ms"] - res["true"]["wall_ms"]
        print(f"launch: true {res['true']['wall_ms']:.2f} ms, gpuctl run -n 1 -- true "
              f"{res['gpuctl run -n 1 -- true']['wall_ms']:.2f} ms, added {added:.2f} ms", flush=True)
        lines += ["", "## Launch overhead", "",
                  "`gpuctl run -n 1 -- true` against plain `true`, median wall ms per run on the",
                  "simulated dgx-a100 (8 GPUs), NVML at 0 us per call (aim: under 5 ms added).", "",
                  "| command | wall ms | CPU ms |", "|---|---:|---:|"]
        for label in ("true", "gpuctl run -n 1 -- true"):
            lines.append(f"| `{label}` | {res[label]['wall_ms']:.2f} | {res[label]['cpu_ms']:.2f} |")
        lines.append(f"| added by gpuctl | {added:.2f} | |")

    # Leases: acquire/release latency and grants per second (bench/lease-bench.c).
    lb = os.path.join(build, "bin", "lease-bench")
    if os.path.exists(lb) and not a.scenario:
        p = subprocess.run([lb, "2000", "2"], capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"bench: {lb} failed ({p.returncode}):\n{p.stderr}")
        print(p.stdout, end="", flush=True)
        lines += ["", "## Leases", "",
                  f"Command: `{os.path.relpath(lb)} 2000 2` (bench/lease-bench.c) on the simulated",
                  "dgx-a100: gpuctl_select_and_lease + gpuctl_lease_free through the library.", ""]
        lines += p.stdout.rstrip("\n").split("\n")

    # Selection: time and quality of gpuctl_select against GPU count and request size, from
    # build/bin/select-bench (bench/select-bench.c; quality = ring bandwidth / optimum).
    sel = os.path.join(build, "bin", "select-bench")
    if os.path.exists(sel) and not a.scenario:
        p = subprocess.run([sel, str(a.repeat)], capture_output=True, text=True, timeout=1800)
        if p.returncode != 0:
            raise SystemExit(f"bench: {sel} failed ({p.returncode}):\n{p.stderr}")
        print(p.stdout, end="", flush=True)
        lines += ["", "## Selection", "",
                  f"Command: `{os.path.relpath(sel)} {a.repeat}` (bench/select-bench.c), all GPUs free.",
                  "Median ms per `gpuctl_select` call; quality = ring bandwidth of the chosen set /",
                  "the optimum (brute force where feasible). 'heuristic' forces the large-machine",
                  "search on the same request, to measure its gap where the optimum is known.", ""]
        lines += p.stdout.rstrip("\n").split("\n")

    # Job streams: gpuctl against restated anchors on streams of 1/2/4-GPU jobs, every
    # scenario of 8 to 16 GPUs (bench/stream_bench.py, bench/stream-bench.c).
    if not a.scenario:
        sys.path.insert(0, HERE)
        import stream_bench
        lines += stream_bench.section(build)

    # gpuctl exporter: memory, CPU per sample and per scrape, scrape latency under 50
    # concurrent scrapers (wrk), NVML calls per interval (bench/exporter_bench.py).
    if not a.scenario:
        sys.path.insert(0, HERE)
        import exporter_bench
        lines += exporter_bench.section(build)

    # gpuctl watch: NVML calls and CPU per interval for each column group
    # (bench/watch_bench.py).
    if not a.scenario:
        sys.path.insert(0, HERE)
        import watch_bench
        lines += watch_bench.section(build)

    # gpuctl top: NVML calls per refresh against watch's, CPU per refresh and memory next to
    # nvtop's (bench/top_bench.py).
    if not a.scenario:
        sys.path.insert(0, HERE)
        import top_bench
        lines += top_bench.section(build)

    # Health: a full check on 8 and 64 GPUs, --watch detection and run --retry failover latency
    # (bench/health_bench.py).
    if not a.scenario:
        sys.path.insert(0, HERE)
        import health_bench
        lines += health_bench.section(build)

    # The Python package: import plus select against gpuctl select, on 8 and 64 GPUs
    # (bench/python_bench.py).
    if not a.scenario:
        sys.path.insert(0, HERE)
        import python_bench
        lines += python_bench.section(build)

    # gpuctl beside gpustat, an NVML client people use, on the same simulated machines
    # (bench/clients_bench.py).
    if not a.scenario:
        sys.path.insert(0, HERE)
        import clients_bench
        lines += clients_bench.section(build)

    # NVML calls per command, beside the bare pynvml script of the same five fields
    # (bench/nvml_calls.py; counts only, no timing).
    if not a.scenario:
        sys.path.insert(0, HERE)
        import nvml_calls
        lines += nvml_calls.section(build)

    # The simulator's coverage of NVIDIA's NVML (names, from the dynamic symbol tables;
    # bench/nvml_coverage.py).
    if not a.scenario:
        sys.path.insert(0, HERE)
        import nvml_coverage
        lines += nvml_coverage.section(build)

    # Workload attribution: files read per refresh by one cache with 1,000 GPU processes, and
    # `gpuctl ps` with them (bench/workload_bench.py; two builds: run it with --old).
    if not a.scenario:
        sys.path.insert(0, HERE)
        import workload_bench
        lines += workload_bench.section(build)

    # The usage ledger: a ledger of 1,000,000 records written through the library, and the
    # report's time on it (bench/ledger_bench.py, bench/ledger-bench.c).
    if not a.scenario:
        sys.path.insert(0, HERE)
        import ledger_bench
        lines += ledger_bench.section(build)

    # The node agent: CPU per sample with leases, processes and the ledger, beside the exporter
    # alone, on 8 and 64 GPUs (bench/agent_bench.py).
    if not a.scenario:
        sys.path.insert(0, HERE)
        import agent_bench
        lines += agent_bench.section(build)

    # What was written by hand survives a new run: the reading of the numbers (from "## Reading
    # the table" on) and, within the generated sections, the measurements `make bench` does not
    # take (marked blocks, put back at the end of their section).
    notes, blocks = "", []
    if os.path.exists(a.out):
        with open(a.out) as f:
            old = f.read()
        k = old.find("\n## Reading the table")
        if k >= 0:
            notes, old = old[k:], old[:k]
        blocks = hand_blocks(old)
    with open(a.out, "w") as f:
        f.write(with_hand_blocks("\n".join(lines) + "\n", blocks) + notes)
    print(f"bench: wrote {a.out}" + (f" ({len(blocks)} blocks by hand kept)" if blocks else ""))


# A block measured by hand inside a generated section of RESULTS.md:
#   <!-- by hand: SECTION -->
#   ...
#   <!-- end by hand -->
# where SECTION is the title of the "## " heading it belongs under.
HAND_BLOCK = re.compile(r"<!-- by hand: (.+?) -->\n.*?<!-- end by hand -->\n", re.S)


def hand_blocks(text):
    """[(section, block)] of the blocks by hand in text, in order."""
    return [(m.group(1), m.group(0)) for m in HAND_BLOCK.finditer(text)]


def with_hand_blocks(text, blocks):
    """text with each block appended to the end of its section (after the blocks before it);
    a block whose section was not generated this run (--scenario) ends the text under its
    heading, so nothing written by hand is lost."""
    for section, block in blocks:
        head = "\n## %s\n" % section
        k = text.find(head)
        if k < 0:
            text = text.rstrip("\n") + "\n" + head + "\n"
            k = text.find(head)
        end = text.find("\n## ", k + len(head))
        if end < 0:
            end = len(text)
        text = text[:end].rstrip("\n") + "\n\n" + block + text[end:]
    return text


if __name__ == "__main__":
    main()
