"""Health and failover figures for `make bench` (issue 5): a full `gpuctl health` on 8 and 64
simulated GPUs (time and NVML calls, without --probe), how long `gpuctl health --watch` takes
from an XID's injection to the line reporting it, and how long `gpuctl run --retry` takes from
a GPU's failure to the relaunch of the job (the simulated CUDA driver's ledger says when the
relaunch started). Used by bench.py; runnable alone: python3 bench/health_bench.py [BUILD]."""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))

WATCH = textwrap.dedent(r'''
    import os, subprocess, sys, time, json
    G, NV, rounds = os.environ["GPUCTL"], os.environ["NVSIM"], int(os.environ["ROUNDS"])
    p = subprocess.Popen([G, "health", "--watch", "--interval", "5"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, bufsize=1)
    time.sleep(1.0)
    lat = []
    for i in range(rounds):
        gpu, code = i % 8, (79, 48, 62)[i % 3]
        t0 = time.time()
        subprocess.run([NV, "xid", "-i", str(gpu), str(code)], check=True)
        while True:
            line = p.stdout.readline()
            if not line:
                sys.exit("watch ended")
            if "XID %d " % code in line and " GPU %d " % gpu in line:
                lat.append(time.time() - t0)
                break
    p.terminate()
    print(json.dumps(lat))
''')

FAILOVER = textwrap.dedent(r'''
    import json, os, subprocess, time
    G, NV, LOAD = os.environ["GPUCTL"], os.environ["NVSIM"], os.environ["LOAD"]
    job = ('if [ "$GPUCTL_RESTART_COUNT" = 0 ]; then exec "$LOAD" --seconds 30; '
           'else exec "$LOAD" --seconds 0.2; fi')
    led = os.path.join(os.environ["NVSIM_STATE_DIR"], "ledger.jsonl")
    p = subprocess.Popen([G, "run", "-n", "1", "--retry", "1", "--", "sh", "-c", job],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dict(os.environ, LOAD=LOAD))
    while True:
        ps = json.loads(subprocess.run([G, "ps", "--format", "json"], capture_output=True,
                                       text=True).stdout)
        held = [d["index"] for d in ps["devices"] if d["state"] == "leased"]
        if held:
            break
        time.sleep(0.02)
    time.sleep(0.3)
    t0 = time.time()
    subprocess.run([NV, "set", "-i", str(held[0]), "lost=1"], check=True)
    p.wait(60)
    with open(led) as f:
        runs = [json.loads(l) for l in f if l.startswith("{")]
    print(json.dumps(runs[-1]["start"] - t0))
''')


def run_in_sim(build, scenario, code, env=None, timeout=300):
    nvsim = os.path.join(build, "bin", "nvsim")
    e = dict(os.environ, GPUCTL=os.path.join(build, "bin", "gpuctl"), NVSIM=nvsim,
             LOAD=os.path.join(build, "bin", "nvsim-load"), CODE=code)
    if env:
        e.update(env)
    with tempfile.TemporaryDirectory(dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None) as t:
        e["GPUCTL_LEASE_DIR"] = os.path.join(t, "leases")
        e["GPUCTL_HEALTH_STATE"] = os.path.join(t, "health.state")
        p = subprocess.run([nvsim, "exec", scenario, "--", sys.executable, "-c", code],
                           capture_output=True, text=True, env=e, timeout=timeout)
    if p.returncode != 0:
        raise SystemExit(f"bench: health ({scenario}) failed:\n{p.stderr}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def one_shot(build, scenario, repeat):
    nvsim = os.path.join(build, "bin", "nvsim")
    with tempfile.TemporaryDirectory() as t:
        calls, out = os.path.join(t, "calls.json"), os.path.join(t, "times.json")
        env = dict(os.environ, GPUCTL_HEALTH_STATE=os.path.join(t, "none.state"))
        p = subprocess.run([nvsim, "exec", "--calls-out", calls, scenario, "--", sys.executable,
                            os.path.join(HERE, "measure.py"), out, str(repeat),
                            os.path.join(build, "bin", "gpuctl"), "health"],
                           capture_output=True, text=True, env=env, timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"bench: gpuctl health on {scenario} failed:\n{p.stderr}")
        with open(out) as f:
            times = json.load(f)
        with open(calls) as f:
            total = json.load(f)["total"]
    return times, total / repeat


def section(build, repeat=10):
    lines = ["", "## Health and failover", "",
             "Command: `make bench` (bench/health_bench.py). `gpuctl health` without `--probe`,",
             "median of runs inside one `nvsim exec` (NVML at 0 us per call; calls counted by the",
             "simulator). Detection: `gpuctl health --watch` running, an XID injected with `nvsim xid`",
             "(delivered through NVML's event API), until the line naming it (median of 12; aim: under",
             "1 s). Failover: `gpuctl run -n 1 --retry 1`, a GPU of the job made lost with `nvsim set`,",
             "until the relaunched job's ledger start (median of 3; includes the 0.5 s first backoff).",
             "", "| measure | value |", "|---|---:|"]
    for scen, n in (("dgx-a100", 8), ("synthetic-64", 64)):
        t, calls = one_shot(build, scen, repeat)
        print(f"health {scen}: {t['wall_ms']:.2f} ms, {calls:.0f} NVML calls", flush=True)
        lines.append(f"| `gpuctl health`, {n} GPUs ({scen}): wall / CPU | {t['wall_ms']:.2f} ms / "
                     f"{t['cpu_ms']:.2f} ms |")
        lines.append(f"| ... NVML calls (per GPU) | {calls:.0f} ({calls / n:.1f}) |")
    lat = run_in_sim(build, "dgx-a100", WATCH, env={"ROUNDS": "12"})
    print(f"health --watch detection: median {statistics.median(lat) * 1e3:.1f} ms", flush=True)
    lines.append(f"| XID to `health --watch` line: median / max | {statistics.median(lat) * 1e3:.1f} ms"
                 f" / {max(lat) * 1e3:.1f} ms |")
    fo = [run_in_sim(build, "dgx-a100", FAILOVER) for _ in range(3)]
    print(f"failover: median {statistics.median(fo) * 1e3:.0f} ms", flush=True)
    lines.append(f"| GPU lost to relaunch (`run --retry`): median / max | "
                 f"{statistics.median(fo) * 1e3:.0f} ms / {max(fo) * 1e3:.0f} ms |")
    return lines


if __name__ == "__main__":
    print("\n".join(section(os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build"))))
