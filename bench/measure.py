#!/usr/bin/env python3
"""Runs CMD REPEAT times (output discarded) and writes median wall and CPU ms per run to OUT.

Usage: measure.py OUT REPEAT CMD ARGS...   (run inside `nvsim exec`, see bench.py)
CPU time is user+sys of each child, read from the kernel's rusage for waited-for children.
"""
import json
import os
import resource
import statistics
import subprocess
import sys
import time


def main():
    out, repeat, cmd = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).returncode
        walls.append((time.perf_counter() - t) * 1e3)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1e3)
        if rc != 0:
            sys.exit(f"measure: {' '.join(cmd)} exited {rc}")
    with open(out, "w") as f:
        json.dump({"wall_ms": statistics.median(walls), "cpu_ms": statistics.median(cpus),
                   "runs": repeat}, f)


if __name__ == "__main__":
    main()
