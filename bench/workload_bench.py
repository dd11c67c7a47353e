#!/usr/bin/env python3
"""workload_bench.py: what workload attribution costs (issue 26, item 4).

Usage: workload_bench.py --build BUILD [--old OLD_BUILD] [--procs N] [--repeat N]

On a simulated dgx-a100 with N real `sleep` processes registered as GPU compute processes
(`nvsim proc add`, spread over the 8 GPUs), it reports:
  1. /proc and runtime-state files read per refresh by one workload cache, as the exporter keeps
     it (gpuctl_workloads_files_read through ctypes on BUILD's libgpuctl.so.0): a snapshot of the
     processes, a lookup of each, one sweep; the first refresh, a second with the same
     processes, and a third after 10 of them were replaced by new ones;
  2. `gpuctl ps` wall time (median of --repeat runs) and its NVML calls (the simulator's
     counter) with the same N processes, for BUILD and, given --old, OLD_BUILD (main's build:
     without workload resolution), and the NVML calls of `gpuctl list` for both.
Prints Markdown for bench/RESULTS.md. Needs root only to start N processes (no cgroups made).
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SCENARIO = "dgx-a100"
NGPU = 8
SNAP_PROCESSES = 1  # GPUCTL_SNAP_PROCESSES (include/gpuctl/snapshot.h)


def env_for(build, d):
    conf = os.path.join(d, "empty.conf")
    if not os.path.exists(conf):
        open(conf, "w").close()
    return dict(os.environ, GPUCTL_CONFIG=conf, GPUCTL_LEASE_DIR=os.path.join(d, "leases"),
                GPUCTL_SYSTEM_LEASE_DIR=os.path.join(d, "none"),
                GPUCTL_NVML_LIBRARY=os.path.join(build, "sim", "libnvidia-ml.so.1"),
                NVSIM_STATE_DIR=os.path.join(d, "state"))


def nvsim(build, env, *args):
    return subprocess.run([os.path.join(build, "bin", "nvsim"), *args], env=env, check=True,
                          capture_output=True, text=True).stdout


class Lib:
    """The few libgpuctl calls the cache measurement makes."""

    def __init__(self, build):
        L = self.L = ctypes.CDLL(os.path.join(build, "lib", "libgpuctl.so.0"))
        vp, P = ctypes.c_void_p, ctypes.POINTER
        for name, res, args in [
                ("gpuctl_ctx_new", ctypes.c_int, [P(vp)]),
                ("gpuctl_snapshot_take_fields", ctypes.c_int,
                 [vp, ctypes.c_uint, vp, ctypes.c_size_t, P(vp)]),
                ("gpuctl_snapshot_free", None, [vp]),
                ("gpuctl_snapshot_gpu_count", ctypes.c_size_t, [vp]),
                ("gpuctl_snapshot_gpu", vp, [vp, ctypes.c_size_t]),
                ("gpuctl_gpu_proc_count", ctypes.c_size_t, [vp]),
                ("gpuctl_gpu_proc", vp, [vp, ctypes.c_size_t]),
                ("gpuctl_proc_pid", ctypes.c_uint32, [vp]),
                ("gpuctl_workloads_new", ctypes.c_int, [vp, P(vp)]),
                ("gpuctl_workloads_get", ctypes.c_int,
                 [vp, vp, ctypes.c_uint32, ctypes.c_uint64, P(vp)]),
                ("gpuctl_workloads_sweep", ctypes.c_size_t, [vp]),
                ("gpuctl_workloads_files_read", ctypes.c_uint64, [vp])]:
            f = getattr(L, name)
            f.restype, f.argtypes = res, args
        self.ctx = vp()
        assert L.gpuctl_ctx_new(ctypes.byref(self.ctx)) == 0
        self.wls = vp()
        assert L.gpuctl_workloads_new(self.ctx, ctypes.byref(self.wls)) == 0

    def refresh(self):
        """One refresh as the exporter makes it: (processes, files read, ms of the lookups)."""
        L, snap = self.L, ctypes.c_void_p()
        assert L.gpuctl_snapshot_take_fields(self.ctx, SNAP_PROCESSES, None, 0,
                                             ctypes.byref(snap)) == 0
        pids = []
        for g in range(L.gpuctl_snapshot_gpu_count(snap)):
            gpu = L.gpuctl_snapshot_gpu(snap, g)
            pids += [L.gpuctl_proc_pid(L.gpuctl_gpu_proc(gpu, k))
                     for k in range(L.gpuctl_gpu_proc_count(gpu))]
        L.gpuctl_snapshot_free(snap)
        before = L.gpuctl_workloads_files_read(self.wls)
        t0 = time.perf_counter()
        w = ctypes.c_void_p()
        for pid in pids:
            assert L.gpuctl_workloads_get(self.ctx, self.wls, pid, 0, ctypes.byref(w)) == 0
        L.gpuctl_workloads_sweep(self.wls)
        ms = (time.perf_counter() - t0) * 1000
        return len(pids), L.gpuctl_workloads_files_read(self.wls) - before, ms


def start_sleeps(build, env, n, first_gpu=0):
    procs = []
    for i in range(n):
        p = subprocess.Popen(["sleep", "3600"])
        procs.append(p)
        nvsim(build, env, "proc", "add", "--pid", str(p.pid), "-i", str((first_gpu + i) % NGPU),
              "--mem", "64MiB")
    return procs


def ps_run(build, env, repeat):
    """(median wall ms, NVML calls of one run) of `gpuctl ps`."""
    gpuctl = os.path.join(build, "bin", "gpuctl")
    walls = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run([gpuctl, "ps"], env=env, check=True, capture_output=True)
        walls.append((time.perf_counter() - t0) * 1000)
    return statistics.median(walls), calls(build, env, ["ps"])


def calls(build, env, cmd):
    nvsim(build, env, "calls", "--reset")
    subprocess.run([os.path.join(build, "bin", "gpuctl"), *cmd], env=env, check=True,
                   capture_output=True)
    return json.loads(nvsim(build, env, "calls", "--json"))["total"]


def run(build, old=None, nprocs=1000, repeat=10):
    """The Markdown lines of the measurements (see the module's docstring)."""
    out = []
    procs = []
    with tempfile.TemporaryDirectory(prefix="gpuctl-wl-bench-") as d:
        env = env_for(build, d)
        nvsim(build, env, "exec", "--state-dir", env["NVSIM_STATE_DIR"], SCENARIO, "--", "true")
        saved = {k: os.environ.get(k) for k in ("GPUCTL_NVML_LIBRARY", "NVSIM_STATE_DIR")}
        try:
            procs = start_sleeps(build, env, nprocs)
            os.environ.update({k: env[k] for k in saved})
            lib = Lib(build)
            rows = [("first refresh",) + lib.refresh(), ("second, same processes",) + lib.refresh()]
            for p in procs[:10]:
                nvsim(build, env, "proc", "rm", str(p.pid))
                p.kill()
                p.wait()
            procs = procs[10:] + start_sleeps(build, env, 10)
            rows.append(("third, 10 replaced",) + lib.refresh())
            out += ["Workload cache (one `struct gpuctl_workloads`, as the exporter keeps it), %d "
                    "real `sleep`s registered as GPU processes on simulated %s "
                    "(`bench/workload_bench.py`):" % (nprocs, SCENARIO), "",
                    "| refresh | processes | files read | lookups + sweep ms |",
                    "|---|---:|---:|---:|"]
            out += ["| %s | %d | %d | %.2f |" % r for r in rows]
            out += ["", "| build | `gpuctl ps` wall ms (median of %d) | NVML calls `ps` | "
                    "NVML calls `list` |" % repeat, "|---|---:|---:|---:|"]
            for name, b in (("old: " + str(old), old), ("new: " + build, build)):
                if b:
                    e = env_for(b, d)
                    wall, n = ps_run(b, e, repeat)
                    out.append("| %s | %.1f | %d | %d |" % (name, wall, n, calls(b, e, ["list"])))
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            for p in procs:
                p.kill()
                p.wait()
    return out + [""]


def section(build):
    """bench.py's section: BUILD alone (two builds: run this script with --old)."""
    return ["## Workloads", ""] + run(build)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--old", help="a build without workload resolution (main's)")
    ap.add_argument("--procs", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=10)
    a = ap.parse_args()
    print("\n".join(run(a.build, a.old, a.procs, a.repeat)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
