#!/usr/bin/env python3
"""A stand-in nvidia-smi for testing bench/real-gpu.sh on machines without a GPU.

It answers the few invocations real-gpu.sh makes, from a scenario file ($FAKE_SMI_SCENARIO),
in nvidia-smi's documented output formats -- independently of gpuctl, so the script's
comparison is tested against a second reading of the same machine:
  nvidia-smi                               banner with "CUDA Version: X.Y"
  nvidia-smi -L                            one "GPU i: NAME (UUID: ...)" line per GPU
  nvidia-smi --query-gpu=F,... --format=csv[,noheader][,nounits]
  nvidia-smi topo -m                       the matrix, from tests/cli/expected/<scenario>.json,
                                           with the two tabs after NUMA Affinity current drivers print
  nvidia-smi dmon -c 1 -s pucm             dmon's layout as a newer driver prints it (with the
                                           jpg, ofa and ccpm columns gpuctl does not show)
FAKE_SMI_CORRUPT=FIELD makes that field wrong on GPU 0, to prove the script notices;
FAKE_SMI_CORRUPT=na:FIELD makes it [Not Supported] there.
"""
import json
import os
import sys

scen_path = os.environ["FAKE_SMI_SCENARIO"]
with open(scen_path) as f:
    S = json.load(f)
name = S["name"]
expected = os.path.join(os.path.dirname(os.path.abspath(__file__)), "expected", name + ".json")
system = S.get("system", {})
driver = system.get("driver_version", "550.54.15")
cuda = system.get("cuda_driver_version", 12040)


def merged(g):
    out = json.loads(json.dumps(S.get("defaults", {})))
    for k, v in g.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k].update(v)
        else:
            out[k] = v
    return out


GPUS = [merged(g) for g in S["gpus"]]
ARCH_ORDER = ["kepler", "maxwell", "pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell"]
NA = "[N/A]"


def enabled(b):
    return "Enabled" if b else "Disabled"


def value(i, g, field):
    ecc = g.get("ecc", False)
    arch = ARCH_ORDER.index(g.get("architecture", "ampere"))
    mig = g.get("mig")
    pcie = g.get("pcie", {})
    clocks, maxc = g.get("clocks_mhz"), g.get("max_clocks_mhz")
    used = g.get("memory_used_mib", 0)
    v = {
        "index": str(i),
        "uuid": g["uuid"],
        "name": g["name"],
        "pci.bus_id": g["pci_bus_id"],
        "serial": g.get("serial", NA) if g.get("brand") != "geforce" else NA,
        "compute_cap": g.get("compute_capability", NA),
        "memory.total": f"{g['memory_total_mib']} MiB",
        "memory.used": f"{used} MiB",
        "persistence_mode": enabled(g.get("persistence_mode", True)),
        "compute_mode": {"default": "Default", "exclusive_process": "Exclusive_Process",
                         "prohibited": "Prohibited"}[g.get("compute_mode", "default")],
        "ecc.mode.current": enabled(ecc.get("enabled")) if ecc else NA,
        "mig.mode.current": enabled(mig.get("enabled")) if mig else NA,
        "pcie.link.gen.max": str(pcie.get("max_gen", pcie.get("gen"))),
        "pcie.link.width.max": str(pcie.get("max_width", pcie.get("width"))),
        "pcie.link.gen.current": str(pcie.get("gen")),
        "pcie.link.width.current": str(pcie.get("width")),
        "clocks.max.sm": f"{maxc['sm']} MHz" if maxc else NA,
        "clocks.max.memory": f"{maxc['mem']} MHz" if maxc else NA,
        "clocks.current.sm": f"{clocks['sm']} MHz" if clocks else NA,
        "enforced.power.limit": f"{g['power_limit_mw'] / 1000:.2f} W" if "power_limit_mw" in g else NA,
        "power.draw": f"{g['power_draw_mw'] / 1000:.2f} W" if "power_draw_mw" in g else NA,
        "temperature.gpu": str(g.get("temperature_c", 35)),
        "utilization.gpu": NA if (mig and mig.get("enabled")) else f"{g.get('utilization_gpu', 0)} %",
        # Retired pages exist before Ampere, remapped rows from Ampere on; both need ECC.
        "retired_pages.pending": ("Yes" if g.get("retired_pages", {}).get("pending") else "No")
        if ecc and arch < ARCH_ORDER.index("ampere") else NA,
        "remapped_rows.pending": ("Yes" if g.get("remapped_rows", {}).get("pending") else "No")
        if ecc and arch >= ARCH_ORDER.index("ampere") else NA,
        "remapped_rows.failure": ("Yes" if g.get("remapped_rows", {}).get("failure") else "No")
        if ecc and arch >= ARCH_ORDER.index("ampere") else NA,
        "driver_version": driver,
    }[field]
    corrupt = os.environ.get("FAKE_SMI_CORRUPT", "")
    if i == 0 and corrupt == field:
        v = "corrupted-" + v
    if i == 0 and corrupt == "na:" + field:
        v = "[Not Supported]"  # what nvidia-smi prints for what the driver does not give
    return v


UNITS = {"memory.total": "MiB", "memory.used": "MiB", "clocks.max.sm": "MHz", "clocks.max.memory": "MHz",
         "clocks.current.sm": "MHz", "enforced.power.limit": "W", "power.draw": "W", "utilization.gpu": "%"}


def query(spec, fmt):
    fields = spec.split(",")
    opts = fmt.split(",")
    if "noheader" not in opts:
        # nounits drops the units "for numerical values" (nvidia-smi -h); the header is no
        # value and keeps its brackets (docs/nvidia-smi-csv.md)
        print(", ".join(f + (f" [{UNITS[f]}]" if f in UNITS else "") for f in fields))
    for i, g in enumerate(GPUS):
        vals = [value(i, g, f) for f in fields]
        if "nounits" in opts:
            vals = [v.rsplit(" ", 1)[0] if v.endswith((" MiB", " MHz", " W", " %")) else v for v in vals]
        print(", ".join(vals))


def topo():
    with open(expected) as f:
        E = json.load(f)
    m = E["topo_matrix"]
    n = len(m)
    head = "".join(f"\tGPU{j}" for j in range(n)) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"
    print(head)
    for i in range(n):
        g = GPUS[i]
        cells = [" X " if i == j else m[i][j] for j in range(n)]
        gnuma = str(g["gpu_numa_node"]) if "gpu_numa_node" in g else "N/A"
        # current drivers (R535 and later) print two tabs after the NUMA affinity cell
        print(f"GPU{i}\t" + "\t".join(cells) + f"\t{E['cpu_affinity'][i]}\t{E['numa_affinity'][i]}\t\t{gnuma}")
    print("\nLegend:\n\n  X    = Self\n  SYS  = (stand-in legend)")


def dmon(groups):
    """One interval of `nvidia-smi dmon -s GROUPS` (p, u, c, m only)."""
    def cols(g):
        mig_on = isinstance(g.get("mig"), dict) and g["mig"].get("enabled", False)
        clocks = g.get("clocks_mhz")
        c = []
        if "p" in groups:
            c += [("pwr", "W", round(g["power_draw_mw"] / 1000) if "power_draw_mw" in g else None),
                  ("gtemp", "C", g.get("temperature_c", 35)),
                  ("mtemp", "C", g.get("temperature_memory_c"))]
        if "u" in groups:
            c += [("sm", "%", None if mig_on else g.get("utilization_gpu", 0)),
                  ("mem", "%", None if mig_on else g.get("utilization_memory", 0)),
                  ("enc", "%", g.get("utilization_encoder")), ("dec", "%", g.get("utilization_decoder")),
                  ("jpg", "%", None), ("ofa", "%", None)]
        if "c" in groups:
            c += [("mclk", "MHz", clocks["mem"] if clocks else None),
                  ("pclk", "MHz", clocks["sm"] if clocks else None)]
        if "m" in groups:
            c += [("fb", "MB", g.get("memory_used_mib", 0)),
                  ("bar1", "MB", g.get("bar1_used_mib", 0) if "bar1_total_mib" in g else None),
                  ("ccpm", "MB", 0)]
        return c
    first = cols(GPUS[0])
    print("# gpu" + "".join(f" {n:>5}" for n, _, _ in first))
    print("# Idx" + "".join(f" {u:>5}" for _, u, _ in first))
    for i, g in enumerate(GPUS):
        vals = ["-" if v is None else str(v) for _, _, v in cols(g)]
        if i == 0 and os.environ.get("FAKE_SMI_CORRUPT") == "dmon":
            vals[0] = "-" if vals[0] != "-" else "1"
        print(f"{i:>5}" + "".join(f" {v:>5}" for v in vals))


def main(argv):
    if not argv:
        print(f"| NVIDIA-SMI {driver}    Driver Version: {driver}    CUDA Version: {cuda // 1000}.{cuda % 1000 // 10} |")
        return 0
    if argv == ["-L"]:
        for i, g in enumerate(GPUS):
            print(f"GPU {i}: {g['name']} (UUID: {g['uuid']})")
        return 0
    if argv[:2] == ["topo", "-m"]:
        topo()
        return 0
    if argv[:1] == ["dmon"] and "-c" in argv and "-s" in argv:
        dmon(argv[argv.index("-s") + 1])
        return 0
    q = [a for a in argv if a.startswith("--query-gpu=")]
    f = [a for a in argv if a.startswith("--format=")]
    if q and f:
        query(q[0].split("=", 1)[1], f[0].split("=", 1)[1])
        return 0
    print(f"fake-nvidia-smi: unsupported arguments {argv}", file=sys.stderr)
    return 2


sys.exit(main(sys.argv[1:]))
