#!/usr/bin/env python3
"""agent_bench.py: the CPU cost of `gpuctl agent` per sample (issue 27: GPU counts 8 and 64).

Usage: agent_bench.py --build BUILD [--scenario NAME ...] [--seconds N]

For each scenario (default dgx-a100, 8 GPUs, and synthetic-64, 64 GPUs) it starts
`nvsim exec --calls-out F SCENARIO -- gpuctl agent --interval 0.5` with a fresh ledger and lease
directory, then makes the machine busy the way the agent is meant to see it: a quarter of the
GPUs held by leases (`gpuctl select -n 2 --hold`, two GPUs per holder) and a quarter running a
process of no lease each (`sleep`, registered with the simulator by `nvsim proc add --pid`). Once
the ledger has records it measures, over --seconds (default 20):
  - CPU ms per sample: the agent's utime + stime (/proc/PID/stat fields 14 and 15) over the
    samples it took meanwhile (gpuctl_exporter_samples_total on its page): the sampler, the
    page, the usage counters and the ledger's write together;
  - the same for `gpuctl exporter` under the same load (no ledger): the difference is what the
    ledger and its observations cost;
  - NVML calls per sample (the simulator's count at exit over the samples taken).
Prints Markdown for bench/RESULTS.md.
"""
import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from exporter_bench import child_of, cpu_s, free_port, get  # noqa: E402

INTERVAL = 0.5


def gpus_of(scenario):
    with open(os.path.join(HERE, "..", "sim", "scenarios", scenario + ".json")) as f:
        return len(json.load(f)["gpus"])


def samples(port):
    page = get(port, "/metrics")
    for line in page.splitlines():
        if line.startswith("gpuctl_exporter_samples_total "):
            return int(float(line.split()[1]))
    raise SystemExit("agent bench: no gpuctl_exporter_samples_total")


def load(build, tmp, env, ngpu, sleepers):
    """A quarter of the GPUs leased (two per holder), a quarter with a bare process each."""
    gpuctl = os.path.join(build, "bin", "gpuctl")
    nvsim = os.path.join(build, "bin", "nvsim")
    subprocess.run([gpuctl, "lease", "init"], env=env, check=True, capture_output=True)
    for _ in range(max(ngpu // 8, 1)):
        subprocess.run([gpuctl, "select", "-n", "2", "--hold", "3600"], env=env, check=True,
                       capture_output=True)
    for g in range(ngpu - ngpu // 4, ngpu):
        p = subprocess.Popen(["sleep", "3600"])
        sleepers.append(p)
        subprocess.run([nvsim, "proc", "add", "--pid", str(p.pid), "-i", str(g), "--mem", "1GiB",
                        "--util", "40"], env=env, check=True, capture_output=True)


def measure(build, scenario, command, seconds):
    nvsim = os.path.join(build, "bin", "nvsim")
    gpuctl = os.path.join(build, "bin", "gpuctl")
    ngpu = gpus_of(scenario)
    with tempfile.TemporaryDirectory() as tmp:
        calls = os.path.join(tmp, "calls.json")
        state = os.path.join(tmp, "state")
        leases = os.path.join(tmp, "leases")
        ledger = os.path.join(tmp, "ledger.db")
        port = free_port()
        env = dict(os.environ, GPUCTL_LEASE_DIR=leases, NVSIM_STATE_DIR=state)
        extra = ["--ledger", ledger] if command == "agent" else []
        p = subprocess.Popen([nvsim, "exec", "--state-dir", state, "--calls-out", calls, scenario,
                              "--", gpuctl, command, "--listen", f"127.0.0.1:{port}",
                              "--interval", str(INTERVAL), *extra],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        sleepers = []
        r = {"scenario": scenario, "gpus": ngpu, "command": command}
        try:
            deadline = time.monotonic() + 20
            while True:
                try:
                    get(port, "/healthz")
                    break
                except OSError:
                    if time.monotonic() > deadline or p.poll() is not None:
                        raise SystemExit(f"agent bench: {scenario}: {command} did not start")
                    time.sleep(0.05)
            env["GPUCTL_NVML_LIBRARY"] = os.path.join(build, "sim", "libnvidia-ml.so.1")
            load(build, tmp, env, ngpu, sleepers)
            pid = child_of(p.pid)
            time.sleep(4 * INTERVAL)
            c0, s0 = cpu_s(pid), samples(port)
            time.sleep(seconds)
            c1, s1 = cpu_s(pid), samples(port)
            r["cpu_ms_per_sample"] = 1e3 * (c1 - c0) / max(s1 - s0, 1)
            r["samples"] = s1 - s0
            total_samples = samples(port)
        finally:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            for s in sleepers:
                s.kill()
                s.wait()
            subprocess.run([gpuctl, "release", "--all"], env=env, capture_output=True)
        with open(calls) as f:
            r["calls_per_sample"] = json.load(f)["total"] / max(total_samples, 1)
        if command == "agent":
            con = sqlite3.connect("file:%s?mode=ro" % ledger, uri=True)
            try:
                r["records"] = con.execute("SELECT count(*) FROM records").fetchone()[0]
            finally:
                con.close()
    return r


def run(build, scenarios=("dgx-a100", "synthetic-64"), seconds=20):
    lines = [f"`gpuctl agent --interval {INTERVAL}` with a ledger, and `gpuctl exporter` at the "
             "same interval, each with a quarter of the GPUs leased (two per holder) and a "
             "quarter running a process of no lease; CPU over "
             f"{seconds} s of samples (`python3 bench/agent_bench.py --build build`):", "",
             "| scenario | GPUs | command | CPU ms / sample | NVML calls / sample | "
             "ledger records | samples |",
             "|---|---:|---|---:|---:|---:|---:|"]
    print("agent loadavg before:", open("/proc/loadavg").read().split()[:3], flush=True)
    for s in scenarios:
        for command in ("agent", "exporter"):
            r = measure(build, s, command, seconds)
            lines.append(f"| {s} | {r['gpus']} | {command} | {r['cpu_ms_per_sample']:.2f} | "
                         f"{r['calls_per_sample']:.0f} | {r.get('records', '-')} | "
                         f"{r['samples']} |")
    print("agent loadavg after:", open("/proc/loadavg").read().split()[:3], flush=True)
    return lines


def section(build):
    """bench.py's section."""
    return ["## Agent", ""] + run(build)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--scenario", action="append")
    ap.add_argument("--seconds", type=int, default=20)
    a = ap.parse_args()
    print("\n".join(run(os.path.abspath(a.build), a.scenario or ("dgx-a100", "synthetic-64"),
                        a.seconds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
