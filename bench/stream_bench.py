"""Job streams for `make bench` (issue 13): gpuctl's selection against restated anchors
(lowest free index, go-gpuallocator best-effort, DCGM dcgmSelectGpusByTopology) on every
scenario of 8 to 16 GPUs, by build/bin/stream-bench (bench/stream-bench.c, which states the
stream, the score and each anchor's rules). Used by bench.py; runnable alone:
python3 bench/stream_bench.py [BUILD] prints the section."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = os.path.join(HERE, "..", "sim", "scenarios")
SEEDS, JOBS, LONG_SEEDS, LONG_JOBS = 32, 80, 3, 1000


def scenarios():
    """Every scenario of 8 to 16 GPUs, by name."""
    out = []
    for f in sorted(os.listdir(SCENARIOS)):
        if f.endswith(".json"):
            with open(os.path.join(SCENARIOS, f)) as fh:
                if 8 <= len(json.load(fh)["gpus"]) <= 16:
                    out.append(f[:-5])
    return out


def section(build):
    """Markdown lines for bench/RESULTS.md."""
    nvsim = os.path.join(build, "bin", "nvsim")
    prog = os.path.join(build, "bin", "stream-bench")
    args = [str(SEEDS), str(JOBS), str(LONG_SEEDS), str(LONG_JOBS)]
    lines = ["", "## Job streams", "",
             f"Command: `nvsim exec S -- {os.path.relpath(prog)} S {' '.join(args)}` for every",
             "scenario S of 8 to 16 GPUs (bench/stream-bench.c, bench/stream_bench.py). Jobs of",
             "sizes 1, 1, 1, 2, 2, 4, durations uniform 1..20, exponential arrivals (about 80 % busy),",
             "strict arrival order; every policy sees the same stream and the same start times. A",
             "multi-GPU job scores its set's ring bandwidth / the best ring of its size on the empty",
             "machine (gpuctl's bandwidth model, with the scenario's CPU; rings by brute force). Cells:",
             f"mean over {SEEDS} seeds x {JOBS} jobs ± standard deviation of the per-seed means (min",
             f"seed); then the mean of {LONG_SEEDS} streams of {LONG_JOBS} jobs. 'empty optimal': gpuctl's",
             "choice on the empty machine has the optimum ring for every size 2..GPUs.", "",
             "| scenario | GPUs | CPU | empty optimal | gpuctl | lowest index | go-gpuallocator best-effort | DCGM |",
             "|---|---:|---|---|---|---|---|---|"]
    for s in scenarios():
        p = subprocess.run([nvsim, "exec", s, "--", prog, s, *args], capture_output=True,
                           text=True, timeout=1800)
        if p.returncode != 0:
            raise SystemExit(f"bench: stream-bench {s} failed ({p.returncode}):\n{p.stderr}")
        print(p.stdout, end="", flush=True)
        lines.append(p.stdout.strip())
    lines += ["",
              "Honest limits: the score is gpuctl's own bandwidth model (docs/topology.md), which gpuctl also",
              "optimises; the anchors are restated from their published rules (sources in",
              "bench/stream-bench.c), not run. On NVSwitch machines every pair is equal, so every policy is",
              "optimal. Measured with the objective of docs/selection.md; the order's measured effect per",
              "criterion is there."]
    return lines


if __name__ == "__main__":
    print("\n".join(section(sys.argv[1] if len(sys.argv) > 1 else "build")))
