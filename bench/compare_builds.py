#!/usr/bin/env python3
"""compare_builds.py: two builds of gpuctl side by side, for a change that must not change what
gpuctl costs (a refactor: issue 23's rooms and splits).

Usage: compare_builds.py OLD_BUILD NEW_BUILD [--repeat N] [--rounds N]
  OLD_BUILD, NEW_BUILD  build folders (bin/gpuctl, bin/nvsim), e.g. a `git worktree` of the
                        commit before the change built with `cmake --build`, and build/

For every scenario and command below it reports:
  - whether the NVML calls are the same, function by function (the simulator's count: the same on
    any machine, so "same" is the result that matters), and the exit statuses;
  - median wall and CPU ms per run of each build (bench/measure.py inside one `nvsim exec`),
    the two builds measured in alternating rounds so that both see the same machine load.
Exits 1 when any command's calls or exit status differ.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = ["dgx-a100", "hgx-h100", "a100-mig", "dgx2", "workstation-mixed", "synthetic-64"]
COMMANDS = [["list"], ["list", "--query", "index,uuid,memory.used,temperature.gpu"],
            ["list", "-w"], ["topo"], ["info"], ["health"], ["select", "-n", "2"],
            ["run", "-n", "1", "--", "true"], ["ps"], ["watch", "-c", "2", "-d", "0.1"],
            ["slurm", "gres"]]
# commands timed as well as counted (the rest are counted only: watch sleeps between samples)
TIMED = {"list", "topo", "info", "health", "select", "run", "ps"}


def env_for(d):
    """A hermetic environment: an empty configuration and lease directories of its own."""
    conf = os.path.join(d, "empty.conf")
    open(conf, "w").close()
    return dict(os.environ, GPUCTL_CONFIG=conf, GPUCTL_LEASE_DIR=os.path.join(d, "leases"),
                GPUCTL_SYSTEM_LEASE_DIR=os.path.join(d, "none"))


def calls(build, scenario, cmd):
    """(exit status, {NVML function: calls}) of one run."""
    with tempfile.TemporaryDirectory() as d:
        r = subprocess.run([os.path.join(build, "bin", "nvsim"), "exec", "--calls-out",
                            os.path.join(d, "calls"), scenario, "--",
                            os.path.join(build, "bin", "gpuctl"), *cmd],
                           env=env_for(d), cwd=d, capture_output=True, text=True)
        with open(os.path.join(d, "calls")) as f:
            return r.returncode, json.load(f).get("functions", {})


def timed(build, scenario, cmd, repeat):
    """(wall ms, CPU ms) medians of repeat runs."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "m.json")
        subprocess.run([os.path.join(build, "bin", "nvsim"), "exec", scenario, "--",
                        sys.executable, os.path.join(HERE, "measure.py"), out, str(repeat),
                        os.path.join(build, "bin", "gpuctl"), *cmd],
                       env=env_for(d), cwd=d, capture_output=True, check=True)
        with open(out) as f:
            m = json.load(f)
        return m["wall_ms"], m["cpu_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    print("| scenario | command | NVML calls old/new | same calls and status | "
          "wall ms old/new | CPU ms old/new |")
    print("|---|---|---:|---|---:|---:|")
    differ = 0
    for sc in SCENARIOS:
        for cmd in COMMANDS:
            ro, co = calls(a.old, sc, cmd)
            rn, cn = calls(a.new, sc, cmd)
            same = co == cn and ro == rn
            differ += not same
            wall = cpu = "-"
            if cmd[0] in TIMED and ro == 0:
                w = {a.old: [], a.new: []}
                c = {a.old: [], a.new: []}
                for _ in range(a.rounds):
                    for b in (a.old, a.new):
                        tw, tc = timed(b, sc, cmd, a.repeat)
                        w[b].append(tw)
                        c[b].append(tc)
                wall = "%.2f / %.2f" % (statistics.median(w[a.old]), statistics.median(w[a.new]))
                cpu = "%.2f / %.2f" % (statistics.median(c[a.old]), statistics.median(c[a.new]))
            print("| %s | `gpuctl %s` | %d / %d | %s | %s | %s |" %
                  (sc, " ".join(cmd), sum(co.values()), sum(cn.values()),
                   "yes" if same else "**no**", wall, cpu))
    print()
    print("%d commands, %d with different NVML calls or exit status" %
          (len(SCENARIOS) * len(COMMANDS), differ))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
