#!/usr/bin/env python3
"""The simulator's coverage of NVIDIA's NVML, for bench/RESULTS.md: the functions each simulator
variant exports against those NVIDIA's own libnvidia-ml.so.1 (Debian's libnvidia-ml1, driver 535)
exports, read from both dynamic symbol tables with nm. tests/cli/test_real_nvml.py checks that
every simulator name is a real one; this counts how much of the real library that is.

    python3 bench/nvml_coverage.py [BUILD]     prints the Markdown section"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
REAL = "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
VARIANTS = [("full", ""), ("old", "old"), ("minimal", "minimal"), ("r530", "r530")]


def functions(path):
    p = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True,
                       check=True)
    return {f[2].split("@")[0] for f in (l.split() for l in p.stdout.splitlines())
            if len(f) == 3 and f[1] in "TtWi" and f[2].startswith("nvml")}


def section(build):
    if not os.path.exists(REAL):
        return ["", "## NVML coverage", "",
                f"Not measured: {REAL} is missing (`scripts/deps.sh test` installs libnvidia-ml1)."]
    real = functions(REAL)
    lines = ["", "## NVML coverage", "",
             f"Command: `python3 bench/nvml_coverage.py {os.path.relpath(build, SRC)}`. NVML functions",
             f"exported by each simulator variant against NVIDIA's own library "
             f"(`{os.path.basename(os.path.realpath(REAL))}`, {len(real)} functions), both read with "
             "`nm -D`.", "",
             "| library | functions | also in NVIDIA's | not in NVIDIA's (newer than 535) | coverage |",
             "|---|---:|---:|---|---:|"]
    for label, sub in VARIANTS:
        sim = functions(os.path.join(build, "sim", sub, "libnvidia-ml.so.1"))
        both = sim & real
        extra = ", ".join(f"`{n}`" for n in sorted(sim - real)) or "none"
        lines.append(f"| simulator ({label}) | {len(sim)} | {len(both)} | {extra} | "
                     f"{100.0 * len(both) / len(real):.1f}% |")
    used = set()
    room = os.path.join(SRC, "src", "lib", "nvml")  # the only room that knows NVML
    for name in sorted(os.listdir(room)):
        if name.endswith(".c"):
            with open(os.path.join(room, name)) as f:
                used |= set(re.findall(r'"(nvml[A-Z][A-Za-z0-9_]*)"', f.read()))
    lines.append(f"| gpuctl's loader (names it looks up) | {len(used)} | {len(used & real)} | "
                 f"{', '.join(f'`{n}`' for n in sorted(used - real)) or 'none'} | "
                 f"{100.0 * len(used & real) / len(real):.1f}% |")
    return lines


if __name__ == "__main__":
    print("\n".join(section(os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build"))))
