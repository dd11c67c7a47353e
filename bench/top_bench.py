#!/usr/bin/env python3
"""gpuctl top's cost next to nvtop's, both on the NVML simulator in a tmux pane (a real
terminal): CPU seconds per refresh and resident memory (VmRSS, VmHWM), at 8 GPUs (dgx-a100)
and 64 (synthetic-64).

Each program runs with a 0.5 s refresh (gpuctl top -d 0.5, nvtop -d 5 in tenths) for
SECONDS after a 2 s warm-up; CPU is utime + stime from /proc/PID/stat over that window, divided
by the refreshes in it (window / 0.5). nvtop is measured when installed (Debian contrib,
`apt-get install nvtop`), else its rows say so; one that ends by itself (nvtop 3.0.1 needs
nvmlDeviceGetFanSpeed, which the simulator does not export) gets a row saying that. A timing benchmark: figures move with the
machine's load; bench/RESULTS.md records them with the command.
Run alone: python3 bench/top_bench.py --build build [--seconds 20]
"""
import argparse
import os
import shutil
import subprocess
import tempfile
import time

HZ = os.sysconf("SC_CLK_TCK")
DELAY = 0.5


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)


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
            t0, c0 = time.monotonic(), cpu_ticks(pid)
            time.sleep(seconds)
            t1, c1 = time.monotonic(), cpu_ticks(pid)
            mem = rss_kib(pid)
        except FileNotFoundError:
            return None  # it ended by itself: no figures
        refreshes = (t1 - t0) / DELAY
        return (c1 - c0) / HZ / refreshes * 1000.0, mem["VmRSS"], mem["VmHWM"]
    finally:
        subprocess.run(tmux + ["kill-server"], capture_output=True)
        shutil.rmtree(tmp, True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--seconds", type=float, default=20)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    tools = [("gpuctl top", [os.path.join(build, "bin", "gpuctl"), "top", "-d", str(DELAY)])]
    nvtop = shutil.which("nvtop")
    if nvtop:
        tools.append(("nvtop", [nvtop, "-d", str(int(DELAY * 10))]))
    print("| program | GPUs | CPU ms per refresh | VmRSS KiB | VmHWM KiB |")
    print("|---|---|---|---|---|")
    for scenario, n in (("dgx-a100", 8), ("synthetic-64", 64)):
        for name, argv in tools:
            got = measure(build, scenario, argv, a.seconds)
            if got is None:
                print("| %s | %d | exited at start on the simulator | - | - |" % (name, n))
            else:
                print("| %s | %d | %.2f | %d | %d |" % (name, n, *got))
        if not nvtop:
            print("| nvtop | %d | not installed | - | - |" % n)


if __name__ == "__main__":
    main()
