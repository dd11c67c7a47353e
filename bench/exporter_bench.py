#!/usr/bin/env python3
"""The cost of `gpuctl exporter` on a simulated machine (part of `make bench`, bench/bench.py).

For each scenario it starts `nvsim exec SCENARIO -- gpuctl exporter --interval 1` on a free
loopback port and reports:
  - resident memory (VmRSS) once idle, its proportional share (Pss, smaps_rollup: shared
    library pages divided among the processes mapping them), and the peak (VmHWM) after the
    load;
  - CPU per sample (the sampler's CPU time while idle, per interval);
  - scrape latency p50/p99 and scrapes/s with CONNS concurrent scrapers (wrk, Debian package
    `wrk`, keep-alive connections, DURATION seconds), twice: saturated (closed loop, each
    connection sends its next request as soon as the answer is in) and paced (wrk-paced.lua:
    each connection waits 50 to 150 ms between requests, about 80 scrapes/s in all; the wait
    is not in the latency); and the CPU the exporter spent per scrape in the saturated run
    (its CPU time under load minus the idle sampler's, divided by the scrapes served);
  - NVML calls per interval (the simulator's count at exit / samples taken): scrapes add none.
Usable alone: python3 bench/exporter_bench.py --build build [--scenario NAME ...]
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request

# The exporter's per-address connection limit (EXPORTER_PER_IP, src/cli/exporter-http.c): wrk
# connects from 127.0.0.1 only, and the server refuses a 9th connection from one address.
CONNS = 8
DURATION = 10
PACED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wrk-paced.lua")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return r.read().decode()


def child_of(pid):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                kids = f.read().split()
            if kids:
                return int(kids[0])
        except OSError:
            pass
        time.sleep(0.05)
    raise SystemExit("exporter bench: cannot find gpuctl under nvsim")


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def status_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def to_ms(text):
    m = re.match(r"([\d.]+)(us|ms|s)$", text)
    v = float(m.group(1))
    return {"us": v / 1e3, "ms": v, "s": v * 1e3}[m.group(2)]


def rollup_kb(pid, key):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def run_wrk(port, conns, duration, script=None):
    wrk = shutil.which("wrk")
    if not wrk:
        raise SystemExit("exporter bench: wrk not installed (scripts/deps.sh bench)")
    p = subprocess.run([wrk, "-t2", f"-c{conns}", f"-d{duration}s", "--latency"]
                       + (["-s", script] if script else [])
                       + [f"http://127.0.0.1:{port}/metrics"], capture_output=True, text=True,
                       timeout=duration + 60)
    if p.returncode != 0:
        raise SystemExit("exporter bench: wrk failed:\n" + p.stderr)
    out = p.stdout
    lat = dict(re.findall(r"^\s+(50|99)%\s+(\S+)$", out, re.M))
    n = int(re.search(r"(\d+) requests in", out).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    # connections refused, reset or timed out: none when CONNS fits the server's limits
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    return {"p50_ms": to_ms(lat["50"]), "p99_ms": to_ms(lat["99"]), "requests": n,
            "rps": rps, "errors": int(errors.group(1)) if errors else 0,
            "socket_errors": sum(int(x) for x in sock.groups()) if sock else 0}


def measure(build, scenario, conns=CONNS, duration=DURATION):
    nvsim = os.path.join(build, "bin", "nvsim")
    gpuctl = os.path.join(build, "bin", "gpuctl")
    with tempfile.TemporaryDirectory() as tmp:
        calls = os.path.join(tmp, "calls.json")
        port = free_port()
        env = dict(os.environ, GPUCTL_LEASE_DIR=os.path.join(tmp, "no-leases"))
        p = subprocess.Popen([nvsim, "exec", "--calls-out", calls, scenario, "--", gpuctl,
                              "exporter", "--listen", f"127.0.0.1:{port}", "--interval", "1"],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 20
            while True:
                try:
                    get(port, "/healthz")
                    break
                except OSError:
                    if time.monotonic() > deadline or p.poll() is not None:
                        raise SystemExit(f"exporter bench: {scenario}: exporter did not start")
                    time.sleep(0.05)
            pid = child_of(p.pid)
            time.sleep(2)
            r = {"scenario": scenario, "page_bytes": len(get(port, "/metrics").encode())}
            r["rss_kb"] = status_kb(pid, "VmRSS")
            r["pss_kb"] = rollup_kb(pid, "Pss")
            c0, t0 = cpu_s(pid), time.monotonic()
            time.sleep(5)
            idle_rate = (cpu_s(pid) - c0) / (time.monotonic() - t0)
            r["cpu_per_sample_ms"] = idle_rate * 1e3  # one sample per second
            c0, t0 = cpu_s(pid), time.monotonic()
            r.update(run_wrk(port, conns, duration))
            busy = cpu_s(pid) - c0 - idle_rate * (time.monotonic() - t0)
            r["cpu_per_scrape_us"] = max(busy, 0) / max(r["requests"], 1) * 1e6
            r["paced"] = run_wrk(port, conns, duration, PACED)
            r["errors"] += r["paced"]["errors"]
            r["socket_errors"] += r["paced"]["socket_errors"]
            r["hwm_kb"] = status_kb(pid, "VmHWM")
            page = get(port, "/metrics")
            samples = int(float(re.search(r"^gpuctl_exporter_samples_total (\S+)$", page,
                                          re.M).group(1)))
        finally:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        with open(calls) as f:
            total = json.load(f)["total"]
        # the samples taken before the last scrape, plus at most one more before SIGTERM
        r["calls_per_interval"] = total / max(samples, 1)
        r["samples"] = samples
    return r


def section(build, scenarios=("dgx-a100", "synthetic-64")):
    """Markdown lines for bench/RESULTS.md."""
    rows = []
    print("exporter loadavg before:", open("/proc/loadavg").read().split()[:3], flush=True)
    for s in scenarios:
        r = measure(build, s)
        print(f"exporter {s:14} rss {r['rss_kb'] / 1024:.1f} MiB  pss {r['pss_kb'] / 1024:.1f} MiB"
              f"  peak {r['hwm_kb'] / 1024:.1f} MiB  saturated p50 {r['p50_ms']:.3f} ms"
              f"  p99 {r['p99_ms']:.3f} ms  {r['rps']:.0f} scrapes/s  paced p50 "
              f"{r['paced']['p50_ms']:.3f} ms  p99 {r['paced']['p99_ms']:.3f} ms"
              f"  {r['paced']['rps']:.0f} scrapes/s  cpu/scrape {r['cpu_per_scrape_us']:.0f} us"
              f"  calls/interval {r['calls_per_interval']:.0f}", flush=True)
        rows.append(r)
    lines = ["", "## Exporter", "",
             "`gpuctl exporter --interval 1` under `nvsim exec` (bench/exporter_bench.py): resident",
             "memory idle (RSS, and PSS: shared library pages divided among the processes that map",
             "them) and peak RSS after the load; CPU per sample (idle, per interval); CPU the",
             "exporter spent per scrape (saturated run); NVML calls per interval (scrapes add",
             f"none). Scrape latency with {CONNS} concurrent keep-alive scrapers (the exporter's",
             "limit from one address; wrk connects from 127.0.0.1 only) for",
             f"{DURATION} s each, on the same machine (wrk and the exporter share its CPUs): saturated,",
             f"`wrk -t2 -c{CONNS}` closed loop, so its p99 measures queueing at the most scrapes/s the",
             "machine can do; paced, `-s bench/wrk-paced.lua`: each connection waits 50 to 150 ms",
             f"between scrapes (about {CONNS * 10}/s in all; the wait is not in the latency), closer",
             "to real scrapers. Errors: non-2xx answers, and wrk's socket errors (a connection",
             "refused, reset or timed out). Most of the RSS is libmicrohttpd and the GnuTLS libraries it loads (about",
             "3 MiB, file-backed); the rest is libc, gpuctl and the simulated NVML. Aim (issue 6):",
             "under 5 MB resident, p99 under 1 ms for 8 GPUs, at least 10x less memory than",
             "dcgm-exporter's published 71 MiB.", "",
             "| scenario | GPUs | page KiB | RSS MiB | PSS MiB | peak RSS MiB | CPU ms/sample | CPU us/scrape | NVML calls/interval |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    gpus = {}
    for r in rows:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sim",
                               "scenarios", r["scenario"] + ".json")) as f:
            gpus[r["scenario"]] = n = len(json.load(f)["gpus"])
        lines.append(f"| {r['scenario']} | {n} | {r['page_bytes'] / 1024:.1f} | {r['rss_kb'] / 1024:.1f} | "
                     f"{r['pss_kb'] / 1024:.1f} | {r['hwm_kb'] / 1024:.1f} | "
                     f"{r['cpu_per_sample_ms']:.2f} | {r['cpu_per_scrape_us']:.0f} | "
                     f"{r['calls_per_interval']:.0f} |")
    lines += ["",
              "| scenario | saturated p50 ms | saturated p99 ms | saturated scrapes/s | paced p50 ms | paced p99 ms | paced scrapes/s | non-2xx | socket errors |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        q = r["paced"]
        lines.append(f"| {r['scenario']} | {r['p50_ms']:.3f} | {r['p99_ms']:.3f} | {r['rps']:.0f} | "
                     f"{q['p50_ms']:.3f} | {q['p99_ms']:.3f} | {q['rps']:.0f} | {r['errors']} | "
                     f"{r['socket_errors']} |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--scenario", action="append")
    a = ap.parse_args()
    print("\n".join(section(os.path.abspath(a.build), a.scenario or ("dgx-a100", "synthetic-64"))))


if __name__ == "__main__":
    main()
