#!/usr/bin/env python3
"""Soak for issue 16 (not part of `make bench`): idle waiters beside a fast exporter, then mixed
launches with SIGKILLs, on a simulated 8-GPU machine (dgx-a100) and a private lease directory.

1. All 8 GPUs held (select --hold; with --free K, all but the first K, in a directory whose lock
   files `lease init` made, and the waiters ask for K+1); WAITERS `gpuctl run --wait -n 1` wait
   in line; an exporter
   samples every 0.1 s. For IDLE_S seconds, the CPU time (utime+stime, /proc/PID/stat) of the
   waiters is measured: CPU per idle waiter, in percent of one core.
2. The hold is released (the waiters run `true` and leave); then LAUNCHES `gpuctl run -n K
   [--wait=30]` (K in 1..4) start CONCURRENCY at a time, each job marking its GPUs: it creates
   marks/<UUID> with O_EXCL (an existing mark is a double grant, counted), sleeps 20-80 ms and
   removes them. One launch in KILL_EVERY gets SIGKILL on its gpuctl (the job keeps the lease
   and ends by itself). At the end, no device may be leased and no ticket live (ps).
Usage: python3 bench/soak_hostile.py --build build [--waiters 100] [--launches 1000] [--free K]
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

JOB = r'''
set -e
m="$MARKS"; ok=1
for u in $(echo "$CUDA_VISIBLE_DEVICES" | tr , ' '); do
  if ( set -C; : > "$m/$u" ) 2>/dev/null; then :; else echo x >> "$m/../double"; ok=0; fi
done
sleep 0.0$((RANDOM % 6 + 2))
[ $ok = 1 ] && for u in $(echo "$CUDA_VISIBLE_DEVICES" | tr , ' '); do rm -f "$m/$u"; done
exit 0
'''


def cpu_ticks(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            v = f.read().rsplit(")", 1)[1].split()
        return int(v[11]) + int(v[12])
    except (OSError, IndexError):
        return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--waiters", type=int, default=100)
    ap.add_argument("--launches", type=int, default=1000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--idle", type=float, default=10.0)
    ap.add_argument("--kill-every", type=int, default=10)
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--free", type=int, default=0, choices=range(0, 8))
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    b = os.path.abspath(a.build)
    gpuctl, nvsim = os.path.join(b, "bin", "gpuctl"), os.path.join(b, "bin", "nvsim")
    tmp = tempfile.mkdtemp(prefix="gpuctl-soak-")
    marks = os.path.join(tmp, "marks")
    os.mkdir(marks)
    env = dict(os.environ, GPUCTL_NVML_LIBRARY=os.path.join(b, "sim", "libnvidia-ml.so.1"),
               NVSIM_SCENARIO=os.path.join(os.path.dirname(b), "sim", "scenarios",
                                           "dgx-a100.json"),
               GPUCTL_LEASE_DIR=os.path.join(tmp, "ld"), GPUCTL_CONFIG="",
               GPUCTL_SYSTEM_LEASE_DIR=os.path.join(tmp, "none"), MARKS=marks)
    for k in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NVSIM_STATE_DIR"):
        env.pop(k, None)
    procs = []
    try:
        if a.free:
            subprocess.run([gpuctl, "lease", "init"], env=env, check=True,
                           stdout=subprocess.DEVNULL)
        subprocess.run([gpuctl, "select", "-n", str(8 - a.free), "--only", f"{a.free}-7",
                        "--hold", "600"], env=env, check=True, stdout=subprocess.DEVNULL)
        ex = subprocess.Popen([nvsim, "exec", "dgx-a100", "--", gpuctl, "exporter", "--listen",
                               "127.0.0.1:19457", "--interval", "0.1"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(ex)
        waiters = [subprocess.Popen([gpuctl, "run", "--wait", "-n", str(a.free + 1), "--",
                                     "true"], env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                   for _ in range(a.waiters)]
        procs += waiters
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            r = subprocess.run([gpuctl, "ps", "--waiting", "--format", "json"], env=env,
                               capture_output=True, text=True)
            if r.returncode == 0 and len(json.loads(r.stdout)["waiting"]) == a.waiters:
                break
            time.sleep(0.2)
        time.sleep(1.0)
        t0 = {p.pid: cpu_ticks(p.pid) for p in waiters}
        time.sleep(a.idle)
        used = sum(cpu_ticks(p.pid) - t0[p.pid] for p in waiters)
        hz = os.sysconf("SC_CLK_TCK")
        per = 100.0 * used / hz / a.idle / max(1, a.waiters)
        subprocess.run([gpuctl, "release", "--all"], env=env, stdout=subprocess.DEVNULL)
        for p in waiters:
            p.wait(300)
        # mixed launches with SIGKILLs
        running, started, killed, t1 = [], 0, 0, time.monotonic()
        while started < a.launches or running:
            while started < a.launches and len(running) < a.concurrency:
                n = rnd.randint(1, 4)
                argv = [gpuctl, "run", "-n", str(n)]
                if rnd.random() < 0.5:
                    argv.append("--wait=30")
                p = subprocess.Popen(argv + ["--", "bash", "-c", JOB], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                started += 1
                if started % a.kill_every == 0:
                    time.sleep(rnd.random() * 0.05)
                    p.send_signal(signal.SIGKILL)
                    killed += 1
                running.append(p)
            running = [p for p in running if p.poll() is None]
            time.sleep(0.005)
        launch_s = time.monotonic() - t1
        deadline = time.monotonic() + 30
        leaked = None
        while time.monotonic() < deadline:
            doc = json.loads(subprocess.run([gpuctl, "ps", "--format", "json"], env=env,
                                            capture_output=True, text=True).stdout)
            leaked = [d["device"] for d in doc["devices"] if d["state"] != "free"]
            if not leaked:
                break
            time.sleep(0.2)
        doubles = 0
        if os.path.exists(os.path.join(tmp, "double")):
            with open(os.path.join(tmp, "double")) as f:
                doubles = len(f.read().split())
        print("| waiters | exporter s | CPU %/idle waiter | launches | SIGKILLed | seconds | "
              "double grants | leaked leases |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        print("| %d | 0.1 | %.2f | %d | %d | %.1f | %d | %d |" % (
            a.waiters, per, a.launches, killed, launch_s, doubles, len(leaked or [])))
        return 1 if doubles or leaked else 0
    finally:
        subprocess.run([gpuctl, "release", "--all"], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(10)
        shutil.rmtree(tmp, True)


if __name__ == "__main__":
    sys.exit(main())
