#!/usr/bin/env python3
"""Writes the expected facts of the synthetic machines (synthetic-64.json, synthetic-72.json here).

    gen-expected-synthetic.py           write them next to this script
    gen-expected-synthetic.py --check   compare with the committed files; exit 1 naming the ones that differ

The cells come from the layout *as stated* in the docstring of sim/scenarios/gen-synthetic.py,
by index arithmetic and the nvidia-smi legend; this script never reads the scenario files, so
a mistake in how the scenario generator encodes pcie_path or links shows up as a test failure.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _fmt(o, ind):
    pad = "  " * ind
    one = json.dumps(o)
    if isinstance(o, dict):
        if ind > 0 and len(one) + len(pad) <= 118:
            return one
        items = [f"{pad}  {json.dumps(k)}: {_fmt(v, ind + 1)}" for k, v in o.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(o, list):
        if len(one) + len(pad) <= 118 or (o and all(isinstance(x, str) for x in o)):
            return one
        items = [f"{pad}  {_fmt(v, ind + 1)}" for v in o]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return one


def expected(name, n, gpu_name, level, nvl, cpu_aff, numa_aff, gpu_numa, nvswitch, driver, facts, inferred):
    m = [["X" if a == b else (f"NV{nvl(a, b)}" if nvl(a, b) else level(a, b)) for b in range(n)] for a in range(n)]
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    return {
        "scenario": name,
        "facts_from": facts,
        "inferred": inferred,
        "gpu_count": n,
        "names": [gpu_name] * n,
        "topo_matrix": m,
        "cpu_affinity": cpu_aff,
        "numa_affinity": numa_aff,
        "gpu_numa_id": gpu_numa,
        "pcie_levels": {f"{a}-{b}": level(a, b) for a, b in pairs},
        "nvlinks": {f"{a}-{b}": nvl(a, b) for a, b in pairs if nvl(a, b)},
        "nvswitch": nvswitch,
        "p2p": {"default": "ok", "pairs": {}},
        "mig": {},
        "driver_version": driver[0],
        "nvml_version": driver[1],
        "cuda_driver_version": driver[2],
    }


def synthetic_64():
    # 4 sockets x 16; root complex = 8 GPUs; switch = 4 GPUs.
    def level(a, b):
        if a // 4 == b // 4:
            return "PIX"
        if a // 8 == b // 8:
            return "PHB"
        if a // 16 == b // 16:
            return "NODE"
        return "SYS"

    def nvl(a, b):
        if a // 4 != b // 4:
            return 0
        qa, qb = sorted((a % 4, b % 4))
        return {(0, 1): 12, (2, 3): 12, (0, 2): 2, (1, 3): 2}.get((qa, qb), 0)

    cpus = [f"{32 * s}-{32 * s + 31},{128 + 32 * s}-{128 + 32 * s + 31}" for s in range(4)]
    return expected("synthetic-64", 64, "NVIDIA H100 NVL", level, nvl,
                    [cpus[i // 16] for i in range(64)], [str(i // 16) for i in range(64)], ["N/A"] * 64,
                    False, ("550.54.15", "12.550.54.15", "12.4"),
                    ["layout stated in sim/scenarios/gen-synthetic.py (synthetic, not a product)"],
                    ["everything: a synthetic machine; cells follow the stated layout and the nvidia-smi legend"])


def synthetic_72():
    return expected("synthetic-72", 72, "NVIDIA GB200", lambda a, b: "SYS", lambda a, b: 18,
                    [f"{72 * (i // 2)}-{72 * (i // 2) + 71}" for i in range(72)], [str(i // 2) for i in range(72)],
                    [str(36 + 8 * i) for i in range(72)], True, ("570.172.08", "12.570.172.08", "12.8"),
                    ["layout stated in sim/scenarios/gen-synthetic.py; per-tray facts as in sgl-project/sglang#11208 (NV18, two GPUs per Grace, all pairs SYS over PCIe)"],
                    ["everything: a 72-GPU host does not exist; this is a stand-in for one NVL72 NVLink domain"])


GENERATORS = {"synthetic-64": synthetic_64, "synthetic-72": synthetic_72}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    bad = []
    for name, gen in GENERATORS.items():
        obj = gen()
        text = _fmt(obj, 0) + "\n"
        assert json.loads(text) == obj
        path = os.path.join(HERE, name + ".json")
        if args.check:
            try:
                with open(path) as f:
                    if f.read() != text:
                        bad.append(path)
            except OSError:
                bad.append(path)
        else:
            with open(path, "w") as f:
                f.write(text)
    for p in bad:
        print(f"gen-expected-synthetic.py: {p}: differs from the generator's output", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
