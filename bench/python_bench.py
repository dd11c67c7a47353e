"""The Python package's figures for `make bench`: `python3 -c 'import gpuctl; gpuctl.select(2)'`
against `gpuctl select -n 2` on the simulated dgx-a100 (8 GPUs) and synthetic-64 (64 GPUs):
median wall and CPU ms per run (bench/measure.py) and NVML calls per run (the simulator's
counts); then where a Python run's time goes: the interpreter's own start (`python3 -c pass`),
`import gpuctl` (the same -c with only the import), and the select call inside one process
(loading the library on the first call, then repeated calls). Aim: import plus select under
30 ms at 8 GPUs. Used by bench.py; runnable alone: python3 bench/python_bench.py [BUILD]."""
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
PYTHON = "/usr/bin/python3"
SCENARIOS = ("dgx-a100", "synthetic-64")

# select() inside one process: the first call (it loads libgpuctl and NVML), then the median of
# the calls after it; and the import of the package alone.
IN_PROCESS = r"""
import json, statistics, sys, time
t = time.perf_counter()
import gpuctl
t_import = time.perf_counter() - t
t = time.perf_counter()
gpuctl.select(2)
first = time.perf_counter() - t
again = []
for _ in range(int(sys.argv[1])):
    t = time.perf_counter()
    gpuctl.select(2)
    again.append(time.perf_counter() - t)
print(json.dumps({"import_ms": t_import * 1e3, "first_ms": first * 1e3,
                  "again_ms": statistics.median(again) * 1e3}))
"""


def environment(build, tmp):
    env = dict(os.environ)
    for k in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "SLURM_JOB_GPUS",
              "SLURM_STEP_GPUS", "LD_PRELOAD"):
        env.pop(k, None)
    config = os.path.join(tmp, "empty.conf")
    open(config, "w").close()
    # a lease directory that does not exist (nothing leased), an empty configuration: the
    # same site for both clients
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: byte-compiled (install.cmake)
    env.update({"PYTHONPATH": os.path.join(SRC, "python"),
                "GPUCTL_LIBRARY": os.path.join(build, "lib", "libgpuctl.so.0"),
                "GPUCTL_LEASE_DIR": os.path.join(tmp, "leases"), "GPUCTL_CONFIG": config,
                "GPUCTL_HEALTH_STATE": os.path.join(tmp, "health.state")})
    return env


def measure(build, scenario, argv, repeat, env, tmp):
    nvsim = os.path.join(build, "bin", "nvsim")
    calls = os.path.join(tmp, "calls.json")
    out = os.path.join(tmp, "times.json")
    if os.path.exists(calls):
        os.unlink(calls)
    cmd = [nvsim, "exec", "--calls-out", calls, scenario, "--", sys.executable,
           os.path.join(HERE, "measure.py"), out, str(repeat), *argv]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    if p.returncode != 0:
        raise SystemExit(f"bench: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    with open(out) as f:
        t = json.load(f)
    n = 0
    if os.path.exists(calls):
        with open(calls) as f:
            n = json.load(f).get("total", 0)
    return t, n / repeat


def in_process(build, scenario, repeat, env):
    nvsim = os.path.join(build, "bin", "nvsim")
    runs = []
    for _ in range(7):
        p = subprocess.run([nvsim, "exec", scenario, "--", PYTHON, "-c", IN_PROCESS,
                            str(repeat)], capture_output=True, text=True, timeout=600, env=env)
        if p.returncode != 0:
            raise SystemExit(f"bench: python in-process ({scenario}) failed:\n{p.stderr}")
        runs.append(json.loads(p.stdout))
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def section(build, repeat=30):
    build = os.path.abspath(build)
    gpuctl = os.path.join(build, "bin", "gpuctl")
    rows, inner = [], {}
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.access("/dev/shm", os.W_OK)
                                     else None) as tmp:
        env = environment(build, tmp)
        # the package's byte code, as `make install` leaves it (python/install.cmake.in)
        subprocess.run([PYTHON, "-m", "compileall", "-q",
                        os.path.join(SRC, "python", "gpuctl")], check=True,
                       stdout=subprocess.DEVNULL)
        for sc in SCENARIOS:
            for label, argv in (
                    ("gpuctl select -n 2", [gpuctl, "select", "-n", "2"]),
                    ("python3 -c 'import gpuctl; gpuctl.select(2)'",
                     [PYTHON, "-c", "import gpuctl; gpuctl.select(2)"]),
                    ("python3 -c 'import gpuctl'", [PYTHON, "-c", "import gpuctl"]),
                    ("python3 -B -c 'import gpuctl; gpuctl.select(2)'  (no byte code)",
                     ["env", "PYTHONPYCACHEPREFIX=" + os.path.join(tmp, "nocache"), PYTHON,
                      "-B", "-c", "import gpuctl; gpuctl.select(2)"]),
                    ("python3 -c pass", [PYTHON, "-c", "pass"])):
                t, calls = measure(build, sc, argv, repeat, env, tmp)
                rows.append((sc, label, t, calls))
                print(f"python: {sc:14} {label:48} wall {t['wall_ms']:6.2f} ms  "
                      f"cpu {t['cpu_ms']:6.2f} ms  calls {calls:6.0f}", flush=True)
            inner[sc] = in_process(build, sc, repeat, env)
            print(f"python: {sc:14} in-process: {inner[sc]}", flush=True)
    sys.path.insert(0, HERE)
    from bench import machine
    lines = ["", "## Python", "",
             f"Command: `make bench` (bench/python_bench.py, {repeat} runs per row inside one "
             "`nvsim exec`, NVML at 0 us per call).  ",
             f"Machine: {machine()}, {datetime.date.today().isoformat()}  ",
             "The package (python/gpuctl, Debian's /usr/bin/python3) against the command line,",
             "both on the same site: an empty configuration, no lease directory. Median ms per",
             "run; NVML calls per run, counted by the simulator. Aim: import plus select under",
             "30 ms at 8 GPUs.", "",
             "| scenario | command | wall ms | CPU ms | NVML calls |", "|---|---|---:|---:|---:|"]
    for sc, label, t, calls in rows:
        cmd, _, note = label.partition("  ")
        note = " " + note if note else ""
        lines.append(f"| {sc} | `{cmd}`{note} | {t['wall_ms']:.2f} | {t['cpu_ms']:.2f} | "
                     f"{calls:.0f} |")
    lines += ["", "The package is byte-compiled, as `make install` leaves it; the rows marked \"no",
              "byte code\" (an empty PYTHONPYCACHEPREFIX) compile its sources at every start.", "",
              "Inside one process (median of 7 processes): the import of the package, the "
              "first `select(2)` (it loads libgpuctl, then NVML) and the median of "
              f"{repeat} further calls.", "",
              "| scenario | import gpuctl ms | first select(2) ms | next select(2) ms |",
              "|---|---:|---:|---:|"]
    for sc in SCENARIOS:
        r = inner[sc]
        lines.append(f"| {sc} | {r['import_ms']:.2f} | {r['first_ms']:.2f} | "
                     f"{r['again_ms']:.2f} |")
    return lines


if __name__ == "__main__":
    print("\n".join(section(sys.argv[1] if len(sys.argv) > 1 else os.path.join(SRC, "build"))))
