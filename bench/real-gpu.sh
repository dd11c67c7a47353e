#!/usr/bin/env bash
# bench/real-gpu.sh: gpuctl against a real NVIDIA driver, compared with nvidia-smi.
#
# For a machine with a real NVIDIA GPU and no network. It
#   1. builds gpuctl (Release, no tests) into BUILD (default build-real); when jansson's
#      development files are missing and cannot be installed, it unpacks .deb files from
#      $GPUCTL_DEB_DIR (default .debs/; fetch them elsewhere with
#      `apt-get download libjansson-dev libjansson4`) into a private prefix;
#   2. compares `gpuctl list --query F --format csv` field by field with
#      `nvidia-smi --query-gpu=F --format=csv` (static fields exactly, live ones within a tolerance);
#   3. compares the `gpuctl topo` matrix, CPU affinity and NUMA affinity with `nvidia-smi topo -m`;
#   4. checks `gpuctl info` against nvidia-smi's driver and CUDA versions;
#   5. compares `gpuctl watch -c 1 -s pucm` with `nvidia-smi dmon -c 1 -s pucm`, column by column
#      by header name (newer dmon versions print columns gpuctl does not): the same GPUs, the
#      same columns supported ('-' in both or in neither), live values within a tolerance;
#   6. prints timings of both tools.
# Exits 0 when everything matches, 1 on any mismatch (each printed as one MISMATCH line).
# Finishes in well under 5 minutes (the build dominates). NVIDIA_SMI and GPUCTL override the
# tools (tests use a stand-in nvidia-smi); SKIP_BUILD=1 uses an existing build.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
build=${BUILD:-build-real}
smi=${NVIDIA_SMI:-nvidia-smi}
start=$(date +%s)

say() { printf '== %s\n' "$*"; }

command -v "$smi" >/dev/null || { echo "real-gpu: '$smi' not found: is the NVIDIA driver installed?" >&2; exit 2; }

if [ "${SKIP_BUILD:-0}" != 1 ]; then
	say "build ($build)"
	if ! pkg-config --exists jansson 2>/dev/null; then
		if [ "$(id -u)" -eq 0 ] && apt-get install -y -q libjansson-dev >/dev/null 2>&1; then
			:
		else
			debs=${GPUCTL_DEB_DIR:-.debs}
			prefix="$here/$build-deps"
			ls "$debs"/*.deb >/dev/null 2>&1 || {
				echo "real-gpu: jansson development files missing and no .deb files in '$debs'" >&2
				exit 2
			}
			for d in "$debs"/*.deb; do dpkg -x "$d" "$prefix"; done
			pc=$(dirname "$(find "$prefix" -name jansson.pc | head -n 1)")
			# The .pc file names /usr as its prefix: point it at the private copy.
			sed -i "s|^prefix=.*|prefix=$prefix/usr|" "$pc/jansson.pc"
			export PKG_CONFIG_PATH="$pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
			export LIBRARY_PATH="$(dirname "$pc")${LIBRARY_PATH:+:$LIBRARY_PATH}"
			export LD_LIBRARY_PATH="$(dirname "$pc")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
		fi
	fi
	cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DGPUCTL_TESTS=OFF >/dev/null
	cmake --build "$build" -j"$(nproc)" --target gpuctl_cli >/dev/null
fi
gpuctl=${GPUCTL:-$build/bin/gpuctl}
[ -x "$gpuctl" ] || { echo "real-gpu: '$gpuctl' not built" >&2; exit 2; }

say "driver"
"$smi" -L
"$gpuctl" info

exec python3 - "$gpuctl" "$smi" "$start" <<'PY'
import csv, io, re, subprocess, sys, time

gpuctl, smi, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
bad = []

def run(argv):
    t = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    ms = (time.perf_counter() - t) * 1e3
    if p.returncode != 0:
        print(f"MISMATCH {' '.join(argv)} exited {p.returncode}: {p.stderr.strip()}")
        bad.append(argv)
    return p.stdout, ms

def rows(text):
    return [[c.strip() for c in r] for r in csv.reader(io.StringIO(text)) if r]

# Static facts must be equal; live ones may move between the two reads.
STATIC = ["index", "uuid", "name", "pci.bus_id", "serial", "compute_cap", "memory.total",
          "persistence_mode", "compute_mode", "ecc.mode.current", "mig.mode.current",
          "pcie.link.gen.max", "pcie.link.width.max", "clocks.max.sm", "clocks.max.memory",
          "enforced.power.limit", "retired_pages.pending", "remapped_rows.pending",
          "remapped_rows.failure"]
LIVE = {"memory.used": 256, "temperature.gpu": 5, "utilization.gpu": 100, "power.draw": 150,
        "clocks.current.sm": 2000, "pcie.link.gen.current": 5, "pcie.link.width.current": 16}

print("== list vs nvidia-smi --query-gpu")
fields = STATIC + list(LIVE)
ours, t_ours = run([gpuctl, "list", "--query", ",".join(fields), "--format", "csv"])
theirs, t_smi = run([smi, "--query-gpu=" + ",".join(fields), "--format=csv"])
a, b = rows(ours), rows(theirs)
if len(a) != len(b):
    print(f"MISMATCH row count: gpuctl {len(a)} nvidia-smi {len(b)}"); bad.append("rows")
num = re.compile(r"[-+]?\d+(\.\d+)?")
for r, (ra, rb) in enumerate(zip(a, b)):
    for c, f in enumerate(fields):
        va = ra[c] if c < len(ra) else "<missing>"
        vb = rb[c] if c < len(rb) else "<missing>"
        if r == 0 or f not in LIVE:
            # nvidia-smi says [Not Supported] or [N/A] for what the driver does not give.
            same = va == vb or (va == "[N/A]" and vb in ("[Not Supported]", "[N/A]", "N/A"))
        else:
            ma, mb = num.search(va), num.search(vb)
            same = (va == vb) or (ma is not None and mb is not None and
                                  abs(float(ma.group()) - float(mb.group())) <= LIVE[f])
        status = "ok" if same else "MISMATCH"
        if not same:
            bad.append(f)
        if r > 0:
            print(f"{status:8} gpu{r - 1} {f:26} gpuctl={va!r:40} nvidia-smi={vb!r}")

print("== topo vs nvidia-smi topo -m")
def matrix(text):
    lines = [l for l in text.splitlines() if l.strip()]
    head = [h.strip() for h in lines[0].split("\t") if h.strip()]
    out = {}
    for l in lines[1:]:
        cells = [c.strip() for c in l.split("\t")]
        if not re.fullmatch(r"GPU\d+", cells[0]):
            if out:
                break
            continue
        out[cells[0]] = dict(zip(head, [c for c in cells[1:]]))
    return out
mo, t_topo = run([gpuctl, "topo"])
ms_, t_smitopo = run([smi, "topo", "-m"])
A, B = matrix(mo), matrix(ms_)
if set(A) != set(B):
    print(f"MISMATCH topo rows: gpuctl {sorted(A)} nvidia-smi {sorted(B)}"); bad.append("topo")
for g in sorted(set(A) & set(B)):
    for col, vb in B[g].items():
        if not (col.startswith("GPU") or col in ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")):
            continue  # NIC columns: gpuctl shows GPUs only
        va = A[g].get(col, "<missing>")
        same = va == vb
        print(f"{'ok' if same else 'MISMATCH':8} {g} {col:14} gpuctl={va!r} nvidia-smi={vb!r}")
        if not same:
            bad.append(f"{g}/{col}")

print("== info vs nvidia-smi")
info, _ = run([gpuctl, "info", "--format", "json"])
import json
try:
    j = json.loads(info)
    drv = rows(run([smi, "--query-gpu=driver_version", "--format=csv,noheader"])[0])[0][0]
    same = j.get("driver_version") == drv
    print(f"{'ok' if same else 'MISMATCH':8} driver_version gpuctl={j.get('driver_version')!r} nvidia-smi={drv!r}")
    if not same:
        bad.append("driver_version")
    m = re.search(r"CUDA Version:\s*([\d.]+)", run([smi])[0])
    if m:
        same = j.get("cuda_driver_version") == m.group(1)
        print(f"{'ok' if same else 'MISMATCH':8} cuda_driver_version gpuctl={j.get('cuda_driver_version')!r} nvidia-smi={m.group(1)!r}")
        if not same:
            bad.append("cuda")
except (ValueError, IndexError) as e:
    print(f"MISMATCH info: {e}"); bad.append("info")

print("== watch vs nvidia-smi dmon")
# Live values may move between the two reads; what must agree is which GPUs there are and which
# columns each supports. Columns by header name: dmon adds jpg/ofa/ccpm on newer drivers.
DMON_TOL = {"pwr": 150, "gtemp": 5, "mtemp": 5, "sm": 100, "mem": 100, "enc": 100, "dec": 100,
            "mclk": 3000, "pclk": 3000, "fb": 1024, "bar1": 1024}
ours, t_watch = run([gpuctl, "watch", "-c", "1", "-s", "pucm"])
theirs, t_dmon = run([smi, "dmon", "-c", "1", "-s", "pucm"])

def dmon_table(text):
    lines = [l for l in text.splitlines() if l.strip()]
    head = next((l for l in lines if l.startswith("#") and "gpu" in l), "")
    names = head.lstrip("#").split()
    return names, {r.split()[0]: dict(zip(names, r.split())) for r in lines if not r.startswith("#")}

na, ra = dmon_table(ours)
nb, rb = dmon_table(theirs)
if ours.splitlines()[:1] != ["# gpu   pwr gtemp mtemp    sm   mem   enc   dec  mclk  pclk    fb  bar1"]:
    print(f"MISMATCH watch header: {ours.splitlines()[:1]!r}"); bad.append("watch-header")
if sorted(ra) != sorted(rb):
    print(f"MISMATCH dmon GPUs: gpuctl {sorted(ra)} nvidia-smi {sorted(rb)}"); bad.append("dmon-gpus")
for g in sorted(ra, key=int):
    for col in na[1:]:
        if col not in nb:
            print(f"MISMATCH gpu{g} {col:6} not in nvidia-smi dmon's header {nb!r}"); bad.append(col)
            continue
        va, vb = ra[g].get(col, "<missing>"), rb.get(g, {}).get(col, "<missing>")
        if va == "-" or vb == "-" or not (va.isdigit() and vb.isdigit()):
            same = va == vb
        else:
            same = abs(int(va) - int(vb)) <= DMON_TOL[col]
        print(f"{'ok' if same else 'MISMATCH':8} gpu{g} dmon {col:6} gpuctl={va!r:8} nvidia-smi={vb!r}")
        if not same:
            bad.append("dmon-" + col)

print("== timings (one run each, ms)")
_, t_list = run([gpuctl, "list"])
_, t_smiq = run([smi])
print(f"gpuctl list            {t_list:8.1f}    nvidia-smi           {t_smiq:8.1f}")
print(f"gpuctl list --query    {t_ours:8.1f}    nvidia-smi --query-gpu {t_smi:6.1f}")
print(f"gpuctl topo            {t_topo:8.1f}    nvidia-smi topo -m   {t_smitopo:8.1f}")
print(f"gpuctl watch -c 1      {t_watch:8.1f}    nvidia-smi dmon -c 1 {t_dmon:8.1f}")
print(f"total script time {time.time() - start:.0f} s")
print(f"real-gpu: {'PASS' if not bad else 'FAIL: ' + str(len(bad)) + ' mismatches'}")
sys.exit(1 if bad else 0)
PY
