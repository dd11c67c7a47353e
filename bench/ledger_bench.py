#!/usr/bin/env python3
"""ledger_bench.py: the usage ledger at issue 27's size (docs/ledger.md).

Usage: ledger_bench.py --build BUILD [--records N] [--repeat N]

Writes a ledger of N records (default 1,000,000) through the library as the agent will
(build/bin/ledger-bench: 8 GPUs, 64 holders at a time, a sample every 300 s; its write cost per
sample and the library's report time for each grouping, full window and last 7 days), then times
`gpuctl report --format csv` on the same file for each grouping (wall clock, median of --repeat
runs: a process started, the ledger opened read-only, the report, the output). Prints Markdown
for bench/RESULTS.md. The ledger lives in a temporary directory, removed at the end.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

GROUPINGS = ("user", "group", "pool", "workload", "gpu", "day")


def run(build, records=1000000, repeat=3):
    d = tempfile.mkdtemp(prefix="gpuctl-ledger-bench-")
    try:
        db = os.path.join(d, "ledger.db")
        out = subprocess.run([os.path.join(build, "bin", "ledger-bench"), db, str(records)],
                             check=True, capture_output=True, text=True).stdout
        lines = ["Library (`build/bin/ledger-bench`):", ""] + out.splitlines() + [""]
        lines += ["`gpuctl report --since 2023-01-01 --by KEY --format csv` on that file, wall "
                  f"clock, median of {repeat}:", "", "| --by | wall ms |", "|---|---:|"]
        gpuctl = os.path.join(build, "bin", "gpuctl")
        for by in GROUPINGS:
            times = []
            for _ in range(repeat):
                t0 = time.monotonic()
                subprocess.run([gpuctl, "report", "--ledger", db, "--since", "2023-01-01",
                                "--by", by, "--format", "csv"], check=True,
                               stdout=subprocess.DEVNULL)
                times.append(time.monotonic() - t0)
            lines.append(f"| {by} | {1000 * statistics.median(times):.0f} |")
        return lines
    finally:
        shutil.rmtree(d, ignore_errors=True)


def section(build):
    """bench.py's section."""
    return ["## Ledger", ""] + run(build)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--records", type=int, default=1000000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    print("\n".join(run(a.build, a.records, a.repeat)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
