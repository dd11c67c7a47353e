#!/usr/bin/env python3
"""gpuctl top's cost next to nvtop's, both on the NVML simulator in a tmux pane (a real
terminal): CPU seconds per refresh and resident memory (VmRSS, VmHWM), at 8 GPUs (dgx-a100)
and 64 (synthetic-64).

Each program runs with a 0.5 s refresh (gpuctl top -d 0.5, nvtop -d 5 in tenths) for
SECONDS after a 2 s warm-up; CPU is the time on a CPU from /proc/PID/schedstat over that window, divided
by the refreshes in it (window / 0.5). nvtop is measured when installed (Debian contrib,
`apt-get install nvtop`), else its rows say so; one that ends by itself gets a row saying
that. A timing benchmark: figures move with the
machine's load; bench/RESULTS.md records them with the command.
Run by bench.py (`make bench`), or alone: python3 bench/top_bench.py --build build [--seconds 15]
"""
import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time

DELAY = 0.5


def cpu_seconds(pid):
    """CPU time of pid in seconds, to the nanosecond: /proc/PID/schedstat's first field (time
    spent on a CPU, ns), where stat's utime and stime count 10 ms ticks."""
    with open("/proc/%d/schedstat" % pid) as f:
        return int(f.read().split()[0]) / 1e9


def rss_kib(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])
    return out


def measure(build, scenario, argv, seconds):
    tmp = tempfile.mkdtemp(prefix="gpuctl-top-bench-")
    sock = os.path.join(tmp, "sock")
    pidf = os.path.join(tmp, "pid")
    leases = os.path.join(tmp, "leases")
    os.mkdir(leases, 0o700)
    conf = os.path.join(tmp, "empty.conf")
    open(conf, "w").close()
    nvsim = os.path.join(build, "bin", "nvsim")
    script = os.path.join(tmp, "pane.sh")
    with open(script, "w") as f:
        f.write("export GPUCTL_LEASE_DIR=%s GPUCTL_CONFIG=%s LANG=C.UTF-8\n" % (leases, conf))
        f.write("exec %s exec %s -- sh -c 'echo $$ > %s; exec %s'\n"
                % (nvsim, scenario, pidf, " ".join(argv)))
    tmux = ["tmux", "-S", sock, "-f", "/dev/null"]
    try:
        subprocess.run(tmux + ["new-session", "-d", "-x", "200", "-y", "60", "sh " + script],
                       check=True)
        deadline = time.monotonic() + 20
        while not (os.path.exists(pidf) and os.path.getsize(pidf)):
            if time.monotonic() > deadline:
                raise SystemExit("top_bench: %s did not start" % argv[0])
            time.sleep(0.05)
        pid = int(open(pidf).read())
        time.sleep(2)
        try:
            t0, c0 = time.monotonic(), cpu_seconds(pid)
            time.sleep(seconds)
            t1, c1 = time.monotonic(), cpu_seconds(pid)
            mem = rss_kib(pid)
        except FileNotFoundError:
            return None  # it ended by itself: no figures
        refreshes = (t1 - t0) / DELAY
        return (c1 - c0) / refreshes * 1000.0, mem["VmRSS"], mem["VmHWM"]
    finally:
        subprocess.run(tmux + ["kill-server"], capture_output=True)
        shutil.rmtree(tmp, True)


def calls(build, scenario, argv):
    """NVML calls of one run (the simulator's count)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "calls.json")
        conf = os.path.join(tmp, "empty.conf")
        open(conf, "w").close()
        env = dict(os.environ, GPUCTL_CONFIG=conf, GPUCTL_LEASE_DIR=os.path.join(tmp, "leases"))
        p = subprocess.run([os.path.join(build, "bin", "nvsim"), "exec", "--calls-out", out,
                            scenario, "--", os.path.join(build, "bin", "gpuctl"), *argv],
                           capture_output=True, text=True, timeout=600, env=env)
        if p.returncode != 0:
            raise SystemExit("top_bench: gpuctl %s failed:\n%s" % (" ".join(argv), p.stderr))
        with open(out) as f:
            return json.load(f)["total"]


def per_refresh(build, scenario, argv, count_flag):
    """Calls per interval after the first: 16 intervals, two turns of top's health rotation."""
    return (calls(build, scenario, argv + [count_flag, "17"]) -
            calls(build, scenario, argv + [count_flag, "1"])) / 16


SCENARIOS = (("dgx-a100", 8), ("synthetic-64", 64))


def section(build, seconds=15):
    """Markdown lines for bench/RESULTS.md."""
    build = os.path.abspath(build)
    lines = ["", "## Top", "",
             "`gpuctl top` on the simulator (`python3 bench/top_bench.py --build build`, also run by",
             "`make bench`), NVML at 0 us per call. NVML calls",
             "per refresh after the first ((calls of `top --batch -n 17 -d 0.1` - calls of `-n 1`) /",
             "16, the simulator's count, machine-independent; 16 refreshes are two turns of the",
             "health-field rotation), next to the bound the issue sets: `watch -s pucm` plus",
             "`watch --procs` per interval (same method, `-c 17` and `-c 1`), less their shared",
             "device count.", "",
             "| scenario | GPUs | top calls/refresh | watch -s pucm | watch --procs | bound |",
             "|---|---:|---:|---:|---:|---:|"]
    for scenario, n in SCENARIOS:
        top = per_refresh(build, scenario, ["top", "--batch", "-d", "0.1"], "-n")
        pucm = per_refresh(build, scenario, ["watch", "-s", "pucm", "-d", "0.1"], "-c")
        procs = per_refresh(build, scenario, ["watch", "--procs", "-d", "0.1"], "-c")
        print("top %-14s calls/refresh %.0f (bound %.0f)" % (scenario, top, pucm + procs - 1),
              flush=True)
        lines.append("| %s | %d | %.0f | %.0f | %.0f | %.0f |"
                     % (scenario, n, top, pucm, procs, pucm + procs - 1))
    lines += ["",
              "CPU per refresh and resident memory of the full-screen view in a 200x60 tmux pane:",
              "`-d 0.5` for %g s after a 2 s warm-up, CPU time (/proc/PID/schedstat) over the window / refreshes in"
              % seconds,
              "it; VmRSS and VmHWM at the end (the simulator library and ncurses included). A",
              "timing figure: it moves with the machine's load.", "",
              "| program | GPUs | CPU ms per refresh | VmRSS KiB | VmHWM KiB |",
              "|---|---:|---:|---:|---:|"]
    nvtop = shutil.which("nvtop")
    tools = [("gpuctl top", [os.path.join(build, "bin", "gpuctl"), "top", "-d", str(DELAY)])]
    if nvtop:
        tools.append(("nvtop", [nvtop, "-d", str(int(DELAY * 10))]))
    for scenario, n in SCENARIOS:
        for name, argv in tools:
            got = measure(build, scenario, argv, seconds)
            if got is None:
                row = "| %s | %d | exited at start on the simulator | - | - |" % (name, n)
            else:
                row = "| %s | %d | %.2f | %d | %d |" % (name, n, *got)
            print(row, flush=True)
            lines.append(row)
        if not nvtop:
            lines.append("| nvtop | %d | not installed (Debian contrib) | - | - |" % n)
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--seconds", type=float, default=15)
    a = ap.parse_args()
    print("\n".join(section(a.build, a.seconds)))


if __name__ == "__main__":
    main()
