#!/usr/bin/env bash
# bench/real-gpu.sh: gpuctl against a real NVIDIA driver, compared with nvidia-smi.
#
# For a fresh Debian or Ubuntu machine with an NVIDIA GPU and its driver. It
#   1. installs what building needs when it is missing (a C compiler, make, cmake, pkg-config,
#      jansson, libnuma, libmicrohttpd, SQLite, python3): as root, `apt-get update` and then
#      `apt-get install` of the Debian/Ubuntu packages; otherwise, or when that fails, one line
#      naming what is missing and the command that installs it, exit 2. Then it builds gpuctl
#      (Release, no tests) into BUILD (default build-real);
#   2. compares `gpuctl list --query F --format csv` field by field with
#      `nvidia-smi --query-gpu=F --format=csv` (static fields exactly, live ones within a
#      tolerance; a field one side lacks must be N/A on the other: gpuctl's [N/A] and
#      nvidia-smi's [N/A], N/A or [Not Supported] are the same thing);
#   3. compares the `gpuctl topo` matrix, CPU affinity, NUMA affinity and GPU NUMA id with
#      `nvidia-smi topo -m` (current drivers print two tabs after the NUMA affinity column);
#   4. checks `gpuctl info` against nvidia-smi's driver and CUDA versions;
#   5. compares `gpuctl watch -c 1 -s pucm` with `nvidia-smi dmon -c 1 -s pucm`, column by column
#      by header name (newer dmon versions print columns gpuctl does not): the same GPUs, the
#      same columns supported ('-' in both or in neither), live values within a tolerance;
#   6. runs `gpuctl health` and `gpuctl health --probe` (a CUDA allocation on every GPU): each
#      must give a verdict (exit 0, 10 or 20) for exactly nvidia-smi's GPUs, and no probe may fail;
#   7. prints one summary table (each part: values compared, mismatches) and the timings.
# Exits 0 when everything matches, 1 on any mismatch (each printed as one MISMATCH line), 2 when
# it cannot run. Finishes well within 5 minutes (the build dominates). NVIDIA_SMI and GPUCTL
# override the tools (tests use a stand-in nvidia-smi); SKIP_BUILD=1 uses an existing build.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
build=${BUILD:-build-real}
smi=${NVIDIA_SMI:-nvidia-smi}
start=$(date +%s)

say() { printf '== %s\n' "$*"; }

command -v "$smi" >/dev/null || { echo "real-gpu: '$smi' not found: is the NVIDIA driver installed?" >&2; exit 2; }

# What building needs, as "test package" pairs: a command, or a pkg-config module (pc:NAME),
# and the Debian/Ubuntu package that provides it.
build_needs="cc:gcc make:make cmake:cmake pkg-config:pkg-config python3:python3
pc:jansson:libjansson-dev pc:numa:libnuma-dev pc:libmicrohttpd:libmicrohttpd-dev
pc:sqlite3:libsqlite3-dev"
missing_pkgs() {
	local need pkg what
	for need in $build_needs; do
		pkg=${need##*:}
		what=${need%:*}
		case $what in
		pc:*) command -v pkg-config >/dev/null && pkg-config --exists "${what#pc:}" && continue ;;
		*) command -v "$what" >/dev/null && continue ;;
		esac
		printf ' %s' "$pkg"
	done
}

if [ "${SKIP_BUILD:-0}" != 1 ]; then
	say "build ($build)"
	missing=$(missing_pkgs)
	if [ -n "$missing" ] && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
		# shellcheck disable=SC2086,SC2015 # the list splits on purpose; failure is checked below
		DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null 2>&1 &&
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing >/dev/null 2>&1 || true
		missing=$(missing_pkgs)
	fi
	if [ -n "$missing" ]; then
		echo "real-gpu: cannot build: missing$missing (as root: apt-get update && apt-get install -y$missing)" >&2
		exit 2
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
import csv, io, json, re, subprocess, sys, time

gpuctl, smi, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
bad = []
parts = {}  # part -> [values compared, mismatches], in order
part = None


def begin(name):
    global part
    part = name
    parts[name] = [0, 0]
    print(f"== {name}")


def result(same, text):
    """One comparison of the current part: printed as ok or MISMATCH, counted."""
    parts[part][0] += 1
    if not same:
        parts[part][1] += 1
        bad.append(text)
    print(f"{'ok' if same else 'MISMATCH':8} {text}")


def run(argv, ok=(0,)):
    t = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    ms = (time.perf_counter() - t) * 1e3
    if p.returncode not in ok:
        result(False, f"{' '.join(argv)} exited {p.returncode}: {p.stderr.strip()}")
    return p.stdout, ms, p.returncode


def rows(text):
    return [[c.strip() for c in r] for r in csv.reader(io.StringIO(text)) if r]


# What the driver does not give: gpuctl prints [N/A], nvidia-smi [N/A], N/A or [Not Supported].
NA = {"[N/A]", "N/A", "[Not Supported]", "Not Supported", "-"}


def na(v):
    return v in NA


# Static facts must be equal; live ones may move between the two reads.
STATIC = ["index", "uuid", "name", "pci.bus_id", "serial", "compute_cap", "memory.total",
          "persistence_mode", "compute_mode", "ecc.mode.current", "mig.mode.current",
          "pcie.link.gen.max", "pcie.link.width.max", "clocks.max.sm", "clocks.max.memory",
          "enforced.power.limit", "retired_pages.pending", "remapped_rows.pending",
          "remapped_rows.failure"]
LIVE = {"memory.used": 256, "temperature.gpu": 5, "utilization.gpu": 100, "power.draw": 150,
        "clocks.current.sm": 2000, "pcie.link.gen.current": 5, "pcie.link.width.current": 16}
num = re.compile(r"[-+]?\d+(\.\d+)?")


def same_value(va, vb, tol=None):
    if na(va) or na(vb):
        return na(va) and na(vb)  # N/A on both sides, or a real difference
    if va == vb or tol is None:
        return va == vb
    ma, mb = num.search(va), num.search(vb)
    return ma is not None and mb is not None and abs(float(ma.group()) - float(mb.group())) <= tol


begin("list vs nvidia-smi --query-gpu")
fields = STATIC + list(LIVE)
ours, t_ours, _ = run([gpuctl, "list", "--query", ",".join(fields), "--format", "csv"])
theirs, t_smi, _ = run([smi, "--query-gpu=" + ",".join(fields), "--format=csv"])
a, b = rows(ours), rows(theirs)
result(len(a) == len(b), f"rows: gpuctl {len(a)} nvidia-smi {len(b)}")
for r, (ra, rb) in enumerate(zip(a[1:], b[1:])):
    for c, f in enumerate(fields):
        va = ra[c] if c < len(ra) else "<missing>"
        vb = rb[c] if c < len(rb) else "<missing>"
        result(same_value(va, vb, LIVE.get(f)), f"gpu{r} {f:26} gpuctl={va!r:40} nvidia-smi={vb!r}")

begin("topo vs nvidia-smi topo -m")


def matrix(text):
    """Rows GPUi of a topo -m matrix as {column: cell}. Current drivers put two tabs after the
    NUMA affinity cell (an empty cell the header does not name): empty cells are dropped."""
    lines = [l for l in text.splitlines() if l.strip()]
    head = [h.strip() for h in lines[0].split("\t") if h.strip()]
    out = {}
    for l in lines[1:]:
        cells = [c.strip() for c in l.split("\t")]
        cells = [c for c in cells[:1]] + [c for c in cells[1:] if c != ""]
        if not re.fullmatch(r"GPU\d+", cells[0]):
            if out:
                break
            continue
        out[cells[0]] = dict(zip(head, cells[1:]))
    return out


mo, t_topo, _ = run([gpuctl, "topo"])
ms_, t_smitopo, _ = run([smi, "topo", "-m"])
A, B = matrix(mo), matrix(ms_)
result(set(A) == set(B), f"rows: gpuctl {sorted(A)} nvidia-smi {sorted(B)}")
for g in sorted(set(A) & set(B), key=lambda s: int(s[3:])):
    for col, vb in B[g].items():
        if not (col.startswith("GPU") or col in ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")):
            continue  # NIC columns: gpuctl shows GPUs only
        va = A[g].get(col, "<missing>")
        result(same_value(va, vb), f"{g} {col:14} gpuctl={va!r} nvidia-smi={vb!r}")

begin("info vs nvidia-smi")
info, _, _ = run([gpuctl, "info", "--format", "json"])
try:
    j = json.loads(info)
    drv = rows(run([smi, "--query-gpu=driver_version", "--format=csv,noheader"])[0])[0][0]
    result(j.get("driver_version") == drv,
           f"driver_version gpuctl={j.get('driver_version')!r} nvidia-smi={drv!r}")
    m = re.search(r"CUDA Version:\s*([\d.]+)", run([smi])[0])
    if m:
        result(j.get("cuda_driver_version") == m.group(1),
               f"cuda_driver_version gpuctl={j.get('cuda_driver_version')!r} nvidia-smi={m.group(1)!r}")
except (ValueError, IndexError) as e:
    result(False, f"info: {e}")

begin("watch vs nvidia-smi dmon")
# Live values may move between the two reads; what must agree is which GPUs there are and which
# columns each supports. Columns by header name: dmon adds jpg/ofa/ccpm on newer drivers.
DMON_TOL = {"pwr": 150, "gtemp": 5, "mtemp": 5, "sm": 100, "mem": 100, "enc": 100, "dec": 100,
            "mclk": 3000, "pclk": 3000, "fb": 1024, "bar1": 1024}
ours, t_watch, _ = run([gpuctl, "watch", "-c", "1", "-s", "pucm"])
theirs, t_dmon, _ = run([smi, "dmon", "-c", "1", "-s", "pucm"])


def dmon_table(text):
    lines = [l for l in text.splitlines() if l.strip()]
    head = next((l for l in lines if l.startswith("#") and "gpu" in l), "")
    names = head.lstrip("#").split()
    return names, {r.split()[0]: dict(zip(names, r.split())) for r in lines if not r.startswith("#")}


na_, ra = dmon_table(ours)
nb, rb = dmon_table(theirs)
result(ours.splitlines()[:1] == ["# gpu   pwr gtemp mtemp    sm   mem   enc   dec  mclk  pclk    fb  bar1"],
       f"watch header {ours.splitlines()[:1]!r}")
result(sorted(ra) == sorted(rb), f"dmon GPUs: gpuctl {sorted(ra)} nvidia-smi {sorted(rb)}")
for g in sorted(ra, key=int):
    for col in na_[1:]:
        if col not in nb:
            result(False, f"gpu{g} {col:6} not in nvidia-smi dmon's header {nb!r}")
            continue
        va, vb = ra[g].get(col, "<missing>"), rb.get(g, {}).get(col, "<missing>")
        if va.isdigit() and vb.isdigit():
            same = abs(int(va) - int(vb)) <= DMON_TOL[col]
        else:
            same = same_value(va, vb)
        result(same, f"gpu{g} dmon {col:6} gpuctl={va!r:8} nvidia-smi={vb!r}")

uuids = [r[0] for r in rows(run([smi, "--query-gpu=uuid", "--format=csv,noheader"])[0])]
for label, args in (("health", []), ("health --probe", ["--probe"])):
    begin(f"gpuctl {label}")
    # 0 all OK, 10 some WARN, 20 some FAIL: a verdict; 1 would be "could not check"
    out, t_h, rc = run([gpuctl, "health", *args, "--format", "json"], ok=(0, 10, 20))
    try:
        h = json.loads(out)
    except ValueError as e:
        result(False, f"{label}: no JSON: {e}")
        continue
    got = [g["uuid"] for g in h["gpus"]]
    result(got == uuids, f"{label}: GPUs gpuctl={len(got)} nvidia-smi={len(uuids)}")
    for g in h["gpus"]:
        probe = [f for f in g["findings"]
                 if f["check"] == "cuda-probe" and f["severity"] != "OK"]
        result(not probe, f"gpu{g['index']} {label}: verdict {g['verdict']}"
               + "".join(f"; {f['check']}: {f['message']}" for f in g["findings"]))

print("== timings (one run each, ms)")
_, t_list, _ = run([gpuctl, "list"])
_, t_smiq, _ = run([smi])
print(f"gpuctl list            {t_list:8.1f}    nvidia-smi           {t_smiq:8.1f}")
print(f"gpuctl list --query    {t_ours:8.1f}    nvidia-smi --query-gpu {t_smi:6.1f}")
print(f"gpuctl topo            {t_topo:8.1f}    nvidia-smi topo -m   {t_smitopo:8.1f}")
print(f"gpuctl watch -c 1      {t_watch:8.1f}    nvidia-smi dmon -c 1 {t_dmon:8.1f}")

print("== summary")
print(f"| {'part':34} | compared | mismatches |")
print(f"|{'-' * 36}|---------:|-----------:|")
for name, (n, m) in parts.items():
    print(f"| {name:34} | {n:8} | {m:10} |")
print(f"total script time {time.time() - start:.0f} s")
print(f"real-gpu: {'PASS' if not bad else 'FAIL: ' + str(len(bad)) + ' mismatches'}")
sys.exit(1 if bad else 0)
PY
