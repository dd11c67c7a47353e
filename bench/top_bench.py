#!/usr/bin/env python3
"""gpuctl top's cost next to nvtop's, both on the NVML simulator in a tmux pane (a real
terminal): CPU seconds per refresh and resident memory (VmRSS, VmHWM), at 8 GPUs (dgx-a100)
and 64 (synthetic-64), on an idle machine (the scenario as it is: no compute process, an
empty lease directory) and a busy one (class Busy: compute processes that are real host
processes, held and shared GPUs, a waiter), both programs under the same conditions.

Each program runs with a 0.5 s refresh (gpuctl top -d 0.5, nvtop -d 5 in tenths) for
SECONDS after a 2 s warm-up; CPU is the time on a CPU from /proc/PID/schedstat over that
window, divided by the refreshes in it (window / 0.5). Each run measures top then nvtop on
the same machine set-up; the table gives the median of RUNS runs. nvtop is measured when
installed (Debian contrib, `apt-get install nvtop`), else its rows say so; one that ends by
itself gets a row saying that. A timing benchmark: figures move with the machine's load;
bench/RESULTS.md records them with the command.
Run by bench.py (`make bench`, one run), or alone:
python3 bench/top_bench.py --build build [--seconds 15] [--runs 3] [--machine idle|busy|both]
"""
import argparse
import json
import os
import shutil
import signal
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


class Busy:
    """A busy simulated machine for measure(): PER_GPU `sleep` processes on each GPU,
    registered as its compute processes (`nvsim proc add`, 1 GiB each); GPUs 0 and 1 held by
    a `gpuctl select --hold`, GPU 2 shared by two `--share` holders and a waiter in line for
    GPUs 0 and 1 (`--wait`), all in the lease directory the measured program reads. The
    lists top reads at every refresh while a device is shared or someone waits, the
    foreign-process scan and the /proc reads of each process: what the idle scenario spares.
    nvtop sees the same processes (NVML's process lists, /proc)."""

    def __init__(self, build, scenario, per_gpu, gpus, env):
        self.procs, self.env = [], env
        nvsim, gpuctl = os.path.join(build, "bin", "nvsim"), os.path.join(build, "bin", "gpuctl")
        self.gpuctl = gpuctl
        subprocess.run([nvsim, "exec", "--keep", "--state-dir", env["NVSIM_STATE_DIR"],
                        scenario, "--", "true"], check=True, capture_output=True)
        full = dict(os.environ, **env)
        try:
            self.start(nvsim, gpuctl, per_gpu, gpus, full)
        except BaseException:
            self.stop()
            raise

    def start(self, nvsim, gpuctl, per_gpu, gpus, full):
        # the leases first: a GPU with a process of no lease does not qualify for them
        holds = (["-n", "2", "--only", "0,1", "--label", "bench"],
                 ["-n", "1", "--only", "2", "--share", "--mem", "10GiB"],
                 ["-n", "1", "--only", "2", "--share", "--mem", "20GiB"])
        for args in holds:
            p = subprocess.Popen([gpuctl, "select", *args, "--hold", "3600"], env=full,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self.procs.append(p)
            if "GPU-" not in p.stdout.readline():
                raise SystemExit("top_bench: select %s held nothing" % " ".join(args))
        p = subprocess.Popen([gpuctl, "select", "-n", "2", "--only", "0,1", "--hold", "3600",
                              "--wait=3600"], env=full, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
        self.procs.append(p)
        deadline = time.monotonic() + 20
        while not self.waiters():
            if time.monotonic() > deadline:
                raise SystemExit("top_bench: the waiter never waited")
            time.sleep(0.05)
        for g in range(gpus):
            for k in range(per_gpu):
                p = subprocess.Popen(["sleep", "%d" % (100000 + g * 10 + k)])
                self.procs.append(p)
                subprocess.run([nvsim, "proc", "add", "--pid", str(p.pid), "-i", str(g),
                                "--mem", "1GiB"], check=True, capture_output=True, env=full)

    def waiters(self):
        r = subprocess.run([self.gpuctl, "ps", "--waiting", "--format", "json"],
                           capture_output=True, text=True, env=dict(os.environ, **self.env))
        return [w["pid"] for w in json.loads(r.stdout)["waiting"]] if r.returncode == 0 else []

    def stop(self):
        """The waiters first (else a release hands them the GPUs), then the holders."""
        for pid in self.waiters():
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        subprocess.run([self.gpuctl, "release", "--all"], capture_output=True,
                       env=dict(os.environ, **self.env))
        for p in self.procs:
            p.kill()
            p.wait()
            if p.stdout:
                p.stdout.close()


def measure(build, scenario, argv, seconds, busy=None):
    """(CPU ms per refresh, VmRSS KiB, VmHWM KiB) of argv in a tmux pane on scenario, None if
    it ended by itself; busy: (processes per GPU, GPUs) for a Busy machine, None for idle."""
    tmp = tempfile.mkdtemp(prefix="gpuctl-top-bench-")
    sock = os.path.join(tmp, "sock")
    pidf = os.path.join(tmp, "pid")
    leases = os.path.join(tmp, "leases")
    os.mkdir(leases, 0o700)
    conf = os.path.join(tmp, "empty.conf")
    open(conf, "w").close()
    nvsim = os.path.join(build, "bin", "nvsim")
    script = os.path.join(tmp, "pane.sh")
    machine = None
    env = {"GPUCTL_LEASE_DIR": leases, "GPUCTL_CONFIG": conf, "LANG": "C.UTF-8"}
    run = "sh -c 'echo $$ > %s; exec %s'" % (pidf, " ".join(argv))
    tmux = ["tmux", "-S", sock, "-f", "/dev/null"]
    pid = None
    try:
        if busy:
            # the state directory outlives `nvsim exec --keep`: the processes registered in
            # it, the program measured reads it (the simulator's library by name too: nvtop)
            state = os.path.join(tmp, "state")
            lib = os.path.join(build, "sim", "libnvidia-ml.so.1")
            env.update(NVSIM_STATE_DIR=state, GPUCTL_NVML_LIBRARY=lib,
                       GPUCTL_KMSG=os.path.join(state, "kmsg"),
                       LD_LIBRARY_PATH=os.path.dirname(lib))
            machine = Busy(build, scenario, busy[0], busy[1], env)
        else:
            run = "%s exec %s -- %s" % (nvsim, scenario, run)
        with open(script, "w") as f:
            f.write("export %s\n" % " ".join("%s=%s" % kv for kv in env.items()))
            f.write("exec %s\n" % run)
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
        # the program ends on the hangup; the simulator's library writes its call counts
        # into the state directory as it exits: wait for that before removing it (bounded)
        deadline = time.monotonic() + 5
        while pid and os.path.exists("/proc/%d" % pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if machine:
            machine.stop()
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
BUSY = {8: 2, 64: 1}  # compute processes per GPU on the busy machine


def section(build, seconds=15, runs=1, variants=("idle", "busy")):
    """Markdown lines for bench/RESULTS.md: runs of each program on each machine (variants)."""
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
              "`-d 0.5` (nvtop `-d 5`) for %g s after a 2 s warm-up, CPU time (/proc/PID/schedstat)"
              % seconds,
              "over the window / refreshes in it; VmRSS and VmHWM at the end (the simulator",
              "library and ncurses included). Idle: the scenario as it is (no compute process, an",
              "empty lease directory). Busy: %d processes per GPU at 8 GPUs, %d at 64 (`sleep`s"
              % (BUSY[8], BUSY[64]),
              "registered with `nvsim proc add`), GPUs 0-1 held, GPU 2 shared by two, one waiter",
              "(class Busy). Median of %d runs, each measuring both programs back to back, the"
              % runs,
              "values in brackets. A timing figure: it moves with the machine's load.", "",
              "| program | GPUs | machine | CPU ms per refresh | VmRSS KiB | VmHWM KiB |",
              "|---|---:|---|---:|---:|---:|"]
    nvtop = shutil.which("nvtop")
    tools = [("gpuctl top", [os.path.join(build, "bin", "gpuctl"), "top", "-d", str(DELAY)])]
    if nvtop:
        tools.append(("nvtop", [nvtop, "-d", str(int(DELAY * 10))]))
    for scenario, n in SCENARIOS:
        for variant in variants:
            busy = (BUSY[n], n) if variant == "busy" else None
            got = {name: [] for name, _ in tools}
            for _ in range(runs):
                for name, argv in tools:
                    got[name].append(measure(build, scenario, argv, seconds, busy))
            for name, _ in tools:
                runs_ok = [g for g in got[name] if g is not None]
                if not runs_ok:
                    row = ("| %s | %d | %s | exited at start on the simulator | - | - |"
                           % (name, n, variant))
                else:
                    cpu = sorted(g[0] for g in runs_ok)
                    mid = sorted(runs_ok, key=lambda g: g[0])[len(runs_ok) // 2]
                    each = (" (%s)" % ", ".join("%.2f" % g[0] for g in runs_ok)
                            if len(runs_ok) > 1 else "")
                    row = ("| %s | %d | %s | %.2f%s | %d | %d |"
                           % (name, n, variant, cpu[len(cpu) // 2], each, mid[1], mid[2]))
                print(row, flush=True)
                lines.append(row)
            if not nvtop:
                lines.append("| nvtop | %d | %s | not installed (Debian contrib) | - | - |"
                             % (n, variant))
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--runs", type=int, default=3, help="runs of each pair (the median)")
    ap.add_argument("--machine", choices=("idle", "busy", "both"), default="both",
                    help="idle: the scenario as it is; busy: compute processes, leases, a "
                    "waiter (class Busy)")
    a = ap.parse_args()
    variants = ("idle", "busy") if a.machine == "both" else (a.machine,)
    print("\n".join(section(a.build, a.seconds, a.runs, variants)))


if __name__ == "__main__":
    main()
