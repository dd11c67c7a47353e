"""Fault behaviour of the real gpuctl binary: a GPU lost between two NVML calls, NVML errors on
one device, NOT_SUPPORTED everywhere, an older or minimal NVML (missing symbols), NVML libraries
that are not NVML at all, malformed or hostile scenario files, and bad arguments.

Expected values come from independent sources: the scenario files (cli_facts.Machine), the
simulator variants' linker maps (sim/libnvidia-ml-*.map: which functions exist), nvidia-smi's
documented CSV spellings ("[N/A]", "81920 MiB", "61.00 W", "30 %") and the exit codes of
docs/gpuctl.1. The suite also runs in an ASan/UBSan build, so every test checks that stderr
holds nothing but the lines it expects (no sanitizer report, no stray debug output)."""
import collections
import copy
import json
import os
import re
import shlex
import tempfile
import unittest

from cli_facts import MIB, Machine
from gpuctl_test import (BUILD, EXIT_FAILURE, EXIT_NODRIVER, EXIT_USAGE, GPUCTL, NVSIM, SCENARIOS,
                         SIMLIB, SRC, GpuctlTestCase, run, sim, sim_sh)

M = "dgx-a100"  # 8 GPUs on NVSwitches, ECC, Ampere: every field group is populated
LOST = 3

MARK = "@@@ "
LOG_LINE = re.compile(r"^gpuctl: (debug|info|warning): ")
SANITIZER = re.compile(r"AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|"
                       r"runtime error:|^==\d+==|^SUMMARY: ")


def variant_lib(name):
    return os.path.join(BUILD, "sim", name, "libnvidia-ml.so.1")


def variant_exports(name):
    """The functions a simulator variant exports, from its linker version script."""
    path = os.path.join(SRC, "sim", "libnvidia-ml-%s.map" % name)
    with open(path) as f:
        text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
    glob = text.split("global:", 1)[1].split("local:", 1)[0]
    return {s.strip() for s in glob.split(";") if s.strip()}


def split_marked(text):
    """Splits output written between 'MARK name' lines into {name: text}."""
    parts, name = {}, None
    for line in text.splitlines(keepends=True):
        if line.startswith(MARK):
            name = line[len(MARK):].strip()
            parts[name] = ""
        elif name is not None:
            parts[name] += line
    return parts


def steps_script(steps, setup="", prefix=""):
    """A shell script that runs setup, then each (name, gpuctl args) with a marker line on
    stdout and stderr, so the outputs can be told apart afterwards."""
    lines = [setup] if setup else []
    for name, args in steps:
        lines.append("echo '%s%s'; echo '%s%s' >&2" % (MARK, name, MARK, name))
        lines.append("%s$GPUCTL %s" % (prefix, " ".join(shlex.quote(a) for a in args)))
    return "\n".join(lines) + "\n"


def cells(line):
    """The cells of a row of gpuctl's aligned text table (two or more blanks between cells)."""
    return re.split(r" {2,}", line.strip())


def smi_value(g, i, name):
    """nvidia-smi --query-gpu's spelling of a scenario fact (CSV header name, units kept)."""
    base = name.split(" [")[0]
    return {
        "index": str(i),
        "uuid": g["uuid"],
        "name": g["name"],
        "pci.bus_id": g["pci_bus_id"],
        "temperature.gpu": str(g.get("temperature_c", 35)),
        "utilization.gpu": "%d %%" % g.get("utilization_gpu", 0),
        "utilization.memory": "%d %%" % g.get("utilization_memory", 0),
        "memory.used": "%d MiB" % g.get("memory_used_mib", 0),
        "memory.total": "%d MiB" % g["memory_total_mib"],
        "power.draw": "%.2f W" % (g["power_draw_mw"] / 1000),
        "enforced.power.limit": "%.2f W" % (g["power_limit_mw"] / 1000),
    }[base]


def json_facts(g, i):
    """JSON values (base units, docs/json.md) of scenario facts."""
    return {
        "index": i,
        "uuid": g["uuid"],
        "pci_bus_id": g["pci_bus_id"],
        "name": g["name"],
        "pci_device_id": int(g["pci_device_id"], 16),
        "memory_total": g["memory_total_mib"] * MIB,
        "memory_used": g.get("memory_used_mib", 0) * MIB,
        "temperature_gpu": g.get("temperature_c", 35),
        "utilization_gpu": g.get("utilization_gpu", 0),
        "power_draw": g["power_draw_mw"],
        "power_limit": g["power_limit_mw"],
        "clocks_event_reasons": g.get("clocks_event_reasons", 1),
    }


def table_power(g):
    # The at-a-glance table rounds watts to the nearest integer.
    return "%d / %d W" % (int(g["power_draw_mw"] / 1000 + 0.5), int(g["power_limit_mw"] / 1000 + 0.5))


class FaultTestCase(GpuctlTestCase):
    def assertStderr(self, r, *allowed):
        """stderr holds only marker lines and lines matching one of the allowed regexes; never a
        sanitizer report."""
        for line in r.err.splitlines():
            self.assertNotRegex(line, SANITIZER, r)
            if line.startswith(MARK) or not line.strip():
                continue
            self.assertTrue(any(re.search(a, line) for a in allowed),
                            "unexpected stderr line %r\n%r" % (line, r))

    def assertNoStdout(self, r):
        self.assertEqual(r.out, "", r)


class LostBetweenCalls(FaultTestCase):
    """nvsim set -i 3 lost_after_calls=N: GPU 3 answers GPU_IS_LOST from its N+1st call on, in
    each gpuctl process (sim/README.md). The others must come out whole."""

    STEPS = (("table", ["list"]),
             ("json", ["list", "--format", "json"]),
             ("csv", ["list", "--format", "csv"]),
             ("topo", ["topo"]),
             ("info", ["info", "--format", "json"]))

    def run_lost(self, n):
        r = sim_sh(M, steps_script(self.STEPS, "$NVSIM set -i %d lost_after_calls=%d" % (LOST, n)))
        self.assertOk(r)
        # Without -v gpuctl says nothing about a lost GPU on stderr: the output shows it.
        self.assertStderr(r)
        out = split_marked(r.out)
        self.assertEqual(set(out), {s[0] for s in self.STEPS}, r)
        return out

    def check_table(self, m, text):
        """Checks the at-a-glance table; returns whether GPU 3's row says lost."""
        lost = False
        lines = text.splitlines()
        self.assertEqual(cells(lines[0])[:3], ["GPU", "UUID", "NAME"], text)
        rows = [cells(l) for l in lines[1:]]
        self.assertEqual(len(rows), len(m), text)
        for i, (row, g) in enumerate(zip(rows, m.gpus)):
            self.assertEqual(row[0], str(i), text)
            if i == LOST and row[3] == "lost":
                self.assertIn(row[1], (g["uuid"][:12], "N/A"), text)
                self.assertIn(row[2], (g["name"], "N/A"), text)
                lost = True
                continue
            self.assertEqual(row[1:7], [g["uuid"][:12], g["name"], "%dC" % g.get("temperature_c", 35),
                                        "%d%%" % g.get("utilization_gpu", 0),
                                        "%d / %d MiB" % (g.get("memory_used_mib", 0),
                                                         g["memory_total_mib"]),
                                        table_power(g)], text)
        return lost

    def check_json(self, m, text):
        gpus = json.loads(text)["gpus"]
        self.assertEqual(len(gpus), len(m))
        for i, (got, g) in enumerate(zip(gpus, m.gpus)):
            want = json_facts(g, i)
            if i != LOST:
                self.assertIs(got["lost"], False, (i, got))
            for k, v in want.items():
                if got["lost"] and k != "index":
                    # Read before the loss or not at all: never a wrong value.
                    self.assertIn(got[k], (v, None), (i, k, got))
                else:
                    self.assertEqual(got[k], v, (i, k, got))
        return gpus[LOST]["lost"]

    def check_csv(self, m, text):
        """Checks the CSV; returns whether a value of GPU 3 reads "[GPU is lost]"."""
        lines = text.splitlines()
        header = lines[0].split(", ")
        self.assertEqual(len(lines), len(m) + 1, text)
        lost_seen = False
        for i, (line, g) in enumerate(zip(lines[1:], m.gpus)):
            vals = line.split(", ")
            self.assertEqual(len(vals), len(header), line)
            for name, v in zip(header, vals):
                want = smi_value(g, i, name)
                if i == LOST and name != "index":
                    self.assertIn(v, (want, "[GPU is lost]"), (name, line))
                    lost_seen |= v == "[GPU is lost]"
                else:
                    self.assertEqual(v, want, (i, name, line))
        return lost_seen

    def check_topo(self, m, text):
        """Checks the matrix; returns whether GPU 3's pairs all read N/A."""
        n = len(m)
        rows = [l.split("\t") for l in text.splitlines()[1:1 + n]]
        nv = "NV%d" % m.nvswitch_links()
        for i, row in enumerate(rows):
            self.assertEqual(row[0], "GPU%d" % i)
            for j in range(n):
                cell = row[1 + j]
                if i == j:
                    self.assertEqual(cell, " X ")
                elif LOST in (i, j):
                    self.assertIn(cell, ("N/A", nv), (i, j, text))
                else:
                    self.assertEqual(cell, nv, (i, j, text))
            aff = [m.cpu_affinity(i), str(m.gpus[i]["numa_node"])]
            if i == LOST:
                for got, want in zip(row[1 + n:3 + n], aff):
                    self.assertIn(got, (want, "N/A"), text)
            else:
                self.assertEqual(row[1 + n:3 + n], aff, text)
        return all(rows[LOST][1 + j] == "N/A" for j in range(n) if j != LOST)

    def check_info(self, m, text):
        gpus = json.loads(text)["gpus"]
        for i, (got, g) in enumerate(zip(gpus, m.gpus)):
            if i != LOST:
                self.assertIs(got["lost"], False, (i, got))
            for k in ("uuid", "pci_bus_id", "name"):
                if got["lost"]:
                    self.assertIn(got[k], (g[k], None))
                else:
                    self.assertEqual(got[k], g[k])
        return gpus[LOST]["lost"]

    def test_lost_after_n_calls(self):
        # Each command reads only what it shows, so how many calls it makes with GPU 3 differs:
        # with N=1 (only the first call answers) every command must see GPU 3 lost; with a
        # larger N a command may finish with GPU 3 before it falls, and then shows it whole.
        # Either way the other GPUs are intact and GPU 3's values are right or unavailable.
        # N=20 falls inside topo's NVLink walk (see test_topo_lost_during_nvlink_walk).
        m = Machine(M)
        for n in (1, 5, 20):
            with self.subTest(lost_after_calls=n):
                out = self.run_lost(n)
                seen = {"table": self.check_table(m, out["table"]),
                        "json": self.check_json(m, out["json"]),
                        "csv": self.check_csv(m, out["csv"]),
                        "topo": self.check_topo(m, out["topo"]),
                        "info": self.check_info(m, out["info"])}
                if n == 1:
                    self.assertEqual([k for k, v in seen.items() if not v], [], out)

    def test_lost_at_every_point_of_the_listing(self):
        # Whichever call the GPU falls off the bus at, the JSON of the others stays whole and
        # the lost GPU's values are right or null, never wrong.
        m = Machine(M)
        script = ("for n in $(seq 1 70); do\n"
                  "  $NVSIM set -i %d lost_after_calls=$n\n"
                  "  echo '%s'$n; $GPUCTL list --format json\n"
                  "done\n" % (LOST, MARK))
        r = sim_sh(M, script)
        self.assertOk(r)
        self.assertStderr(r)
        out = split_marked(r.out)
        self.assertEqual(len(out), 70, r)
        lost_at = []
        for n, text in out.items():
            gpus = json.loads(text)["gpus"]
            for i, (got, g) in enumerate(zip(gpus, m.gpus)):
                if i != LOST:
                    self.assertIs(got["lost"], False, (n, i))
                for k, v in json_facts(g, i).items():
                    self.assertIn(got[k], (v, None) if i == LOST else (v,), (n, i, k))
            lost_at += [int(n)] if gpus[LOST]["lost"] else []
        # The sweep covered the loss: GPU 3 is lost for N = 1..K (K >= 1) and whole after.
        self.assertGreaterEqual(len(lost_at), 1)
        self.assertEqual(lost_at, list(range(1, len(lost_at) + 1)), lost_at)

    def test_topo_lost_during_nvlink_walk(self):
        # Regression: a GPU lost part-way through its NVLink walk used to keep the links
        # counted before the loss, and `gpuctl topo` showed e.g. NV4 or NV9 for its pairs where
        # the machine has 12 links per GPU. A lost GPU's pairs read N/A (or the true NV12 when
        # the walk finished before the loss), never a partial count.
        m = Machine(M)
        script = ("for n in $(seq 1 80); do\n"
                  "  $NVSIM set -i %d lost_after_calls=$n\n"
                  "  echo '%s'$n; $GPUCTL topo\n"
                  "done\n" % (LOST, MARK))
        r = sim_sh(M, script)
        self.assertOk(r)
        self.assertStderr(r)
        out = split_marked(r.out)
        self.assertEqual(len(out), 80, r)
        wrong = {}  # N -> the cells that are wrong
        for n, text in out.items():
            try:
                self.check_topo(m, text)
            except AssertionError:
                rows = [l.split("\t") for l in text.splitlines()[1:1 + len(m)]]
                wrong[int(n)] = sorted({rows[i][1 + j] for i in range(len(m)) for j in range(len(m))
                                        if LOST in (i, j) and i != j} - {"N/A"})
        self.assertEqual(wrong, {}, "lost_after_calls=N -> NVLink cells shown for GPU %d" % LOST)


class NvmlErrorOnOneDevice(FaultTestCase):
    """nvsim fail FUNCTION ERROR -i GPU: only the fields that function gives, on that GPU, turn
    N/A; -v logs one warning about it."""

    FIELDS = ("index", "temperature.gpu", "power.draw", "enforced.power.limit", "utilization.gpu",
              "utilization.memory", "memory.used", "memory.total")
    CASES = (
        # function, error, gpu, the fields it gives (nvidia-smi names)
        ("nvmlDeviceGetTemperature", "UNKNOWN", 2, {"temperature.gpu"}),
        ("nvmlDeviceGetPowerUsage", "TIMEOUT", 5, {"power.draw"}),
        ("nvmlDeviceGetEnforcedPowerLimit", "IRQ_ISSUE", 0, {"enforced.power.limit"}),
        ("nvmlDeviceGetUtilizationRates", "UNKNOWN", 7, {"utilization.gpu", "utilization.memory"}),
    )

    def run_case(self, fn, err, gpu_opt):
        q = ",".join(self.FIELDS)
        steps = (("csv", ["list", "--query", q, "--format", "csv,noheader"]),
                 ("verbose", ["-v", "list", "--query", q]),
                 ("table", ["list"]))
        r = sim_sh(M, steps_script(steps, "$NVSIM fail %s %s %s" % (fn, err, gpu_opt)))
        self.assertOk(r)
        return r, split_marked(r.out), split_marked(r.err)

    def test_only_that_field_of_that_gpu(self):
        m = Machine(M)
        for fn, err, gpu, fields in self.CASES:
            with self.subTest(function=fn):
                r, out, err_parts = self.run_case(fn, err, "-i %d" % gpu)
                self.assertStderr(r, LOG_LINE.pattern)
                self.assertEqual(err_parts["csv"], "", r)  # quiet without -v
                rows = [l.split(", ") for l in out["csv"].splitlines()]
                self.assertEqual(len(rows), len(m), r)
                for i, row in enumerate(rows):
                    for name, v in zip(self.FIELDS, row):
                        if i == gpu and name in fields:
                            self.assertEqual(v, "[N/A]", (i, name, r))
                        else:
                            self.assertEqual(v, smi_value(m.gpus[i], i, name), (i, name, r))
                # -v changes stderr only: the CSV (after its header) is the same.
                self.assertEqual(out["verbose"].split("\n", 1)[1], out["csv"], r)
                warnings = [l for l in err_parts["verbose"].splitlines()
                            if l.startswith("gpuctl: warning: ") and fn + ":" in l]
                self.assertEqual(len(warnings), 1, r)
                self.assertIn("GPU %d" % gpu, warnings[0], r)
                rows = [cells(l) for l in out["table"].splitlines()[1:]]
                self.assertEqual(len(rows), len(m), r)
                if "temperature.gpu" in fields:
                    self.assertEqual(rows[gpu][3], "N/A", r)
                if "utilization.gpu" in fields:
                    self.assertEqual(rows[gpu][4], "N/A", r)

    def test_same_error_on_every_gpu_warns_at_most_once(self):
        m = Machine(M)
        r, out, err_parts = self.run_case("nvmlDeviceGetTemperature", "UNKNOWN", "")
        self.assertStderr(r, LOG_LINE.pattern)
        for i, line in enumerate(out["csv"].splitlines()):
            row = line.split(", ")
            self.assertEqual(row[1], "[N/A]", r)
            self.assertEqual(row[2], smi_value(m.gpus[i], i, "power.draw"), r)
        warnings = [l for l in err_parts["verbose"].splitlines()
                    if "nvmlDeviceGetTemperature:" in l]
        self.assertLessEqual(len(warnings), 1, r)
        # No log line is ever repeated within one run.
        counts = collections.Counter(err_parts["verbose"].splitlines())
        self.assertEqual([l for l, c in counts.items() if c > 1], [], r)


class NotReadyOrDeprecated(FaultTestCase):
    """NVML_ERROR_DEPRECATED (26) and NOT_READY (27) from a query leave that fact N/A and are no
    finding (the loader counts them as unavailable, not as NVML failures); a real error on the
    same call, the control, makes the health fact unreadable: health's "nvml" WARN
    (docs/health.md)."""

    def test_health_and_list(self):
        for err, verdict in (("DEPRECATED", "OK"), ("NOT_READY", "OK"), ("UNKNOWN", "WARN")):
            for fn in ("nvmlDeviceGetTemperature", "nvmlDeviceGetTotalEccErrors"):
                with self.subTest(error=err, function=fn):
                    r = sim_sh(M, f"$NVSIM fail {fn} {err} -i 1\n"
                                  "$GPUCTL health --format json || true\n"
                                  "$GPUCTL list --query index,temperature.gpu --format csv,noheader")
                    self.assertOk(r)
                    doc, end = json.JSONDecoder().raw_decode(r.out)
                    got = {g["index"]: g["verdict"] for g in doc["gpus"]}
                    self.assertEqual(got, {i: verdict if i == 1 else "OK" for i in got}, r)
                    temps = [l.split(", ")[1] for l in r.out[end:].strip().splitlines()]
                    self.assertEqual([i for i, t in enumerate(temps) if t == "[N/A]"],
                                     [1] if fn == "nvmlDeviceGetTemperature" else [], r)


class NotSupportedEverywhere(FaultTestCase):
    def test_everything_na(self):
        m = Machine(M)
        n = len(m)
        steps = (("table", ["list"]),
                 ("json", ["list", "--format", "json"]),
                 ("csv", ["list", "--query", "index,uuid,name,memory.total,power.draw,"
                          "ecc.mode.current,clocks_event_reasons.active", "--format", "csv,noheader"]),
                 ("topo", ["topo"]),
                 ("info", ["info"]),
                 ("infojson", ["info", "--format", "json"]))
        r = sim_sh(M, steps_script(steps, "$NVSIM fail '*' NOT_SUPPORTED"))
        self.assertOk(r)
        self.assertStderr(r)
        out = split_marked(r.out)
        rows = [cells(l) for l in out["table"].splitlines()[1:]]
        self.assertEqual(len(rows), n, r)
        for i, row in enumerate(rows):
            self.assertEqual(row[0], str(i))
            self.assertEqual(row[1:5], ["N/A"] * 4, r)  # uuid, name, temp, util
        for i, g in enumerate(json.loads(out["json"])["gpus"]):
            self.assertEqual(g["index"], i)
            self.assertIs(g["lost"], False)
            # idle is an object of the cases that hold (docs/idle.md): none, with nothing read
            self.assertEqual(g["idle"], {}, g)
            nonnull = {k for k, v in g.items() if v not in (None, [], {})}
            # the verdict is gpuctl's own: nothing NVML could not say is a finding
            self.assertEqual(nonnull, {"index", "lost", "health"}, g)
            self.assertEqual(g["health"], "OK")
        for i, line in enumerate(out["csv"].splitlines()):
            self.assertEqual(line, "%d" % i + ", [N/A]" * 6, r)
        topo = [l.split("\t") for l in out["topo"].splitlines()[1:1 + n]]
        for i, row in enumerate(topo):
            self.assertEqual(row[1:], [" X " if j == i else "N/A" for j in range(n)] + ["N/A"] * 3)
        info = json.loads(out["infojson"])
        # System queries are outside '*' (sim/README.md): the driver version still reads.
        self.assertEqual(info["driver_version"], m.system["driver_version"])
        for g in info["gpus"]:
            # the pool comes from the configuration (none: every GPU in "default"), not NVML
            self.assertEqual({k for k, v in g.items() if v is not None}, {"index", "lost", "pool"},
                             g)
            self.assertEqual(g["pool"], "default")
        self.assertIn(m.system["driver_version"], out["info"])


class MissingSymbols(FaultTestCase):
    """An older (old/) or bare (minimal/) NVML: gpuctl works with what is there."""

    def run_variant(self, variant, steps):
        env = {"VARIANT": variant_lib(variant)}
        r = sim_sh(M, steps_script(steps, prefix='GPUCTL_NVML_LIBRARY="$VARIANT" '), env=env)
        self.assertOk(r)
        self.assertStderr(r, LOG_LINE.pattern)
        return r, split_marked(r.out), split_marked(r.err)

    def check_missing_logged_once(self, variant, err, must_name):
        exports = variant_exports(variant)
        counts = collections.Counter(err.splitlines())
        self.assertEqual([l for l, c in counts.items() if c > 1], [], err)
        missing = []
        for line in err.splitlines():
            mo = re.match(r"gpuctl: debug: (nvml\w+): not in this NVML library(, using (nvml\w+))?",
                          line)
            if mo:
                self.assertNotIn(mo.group(1), exports, line)
                if mo.group(3):
                    self.assertIn(mo.group(3), exports, line)
                missing.append(mo.group(1))
        for fn in must_name:
            self.assertNotIn(fn, exports)
            self.assertEqual(missing.count(fn), 1, (fn, err))

    def test_old_driver(self):
        m = Machine(M)
        n = len(m)
        r, out, err = self.run_variant("old", (("json", ["-v", "list", "--format", "json"]),
                                               ("table", ["list"]),
                                               ("topo", ["topo"]),
                                               ("info", ["info", "--format", "json"])))
        self.assertEqual(err["table"] + err["topo"] + err["info"], "", r)  # quiet without -v
        self.check_missing_logged_once("old", err["json"], ["nvmlDeviceGetRemappedRows"])
        for i, (got, g) in enumerate(zip(json.loads(out["json"])["gpus"], m.gpus)):
            for k, v in json_facts(g, i).items():
                self.assertEqual(got[k], v, (i, k))
            # Ampere with ECC has remapped rows (SCENARIO.md), but this NVML cannot say.
            for k in ("remapped_rows_correctable", "remapped_rows_uncorrectable",
                      "remapped_rows_pending", "remapped_rows_failure"):
                self.assertIsNone(got[k], (i, k))
            self.assertIs(got["lost"], False)
        rows = [cells(l) for l in out["table"].splitlines()[1:]]
        self.assertEqual([row[1] for row in rows], [g["uuid"][:12] for g in m.gpus], r)
        topo = [l.split("\t") for l in out["topo"].splitlines()[1:1 + n]]
        nv = "NV%d" % m.nvswitch_links()
        for i, row in enumerate(topo):
            self.assertEqual(row[1:1 + n], [" X " if j == i else nv for j in range(n)], r)
        info = json.loads(out["info"])
        self.assertEqual(info["driver_version"], m.system["driver_version"])
        self.assertEqual(info["cuda_driver_version"], m.cuda_version_text())
        self.assertEqual(info["nvml_library"], variant_lib("old"))

    def test_minimal_driver(self):
        m = Machine(M)
        n = len(m)
        r, out, err = self.run_variant("minimal", (("json", ["-v", "list", "--format", "json"]),
                                                   ("table", ["list"]),
                                                   ("topo", ["-v", "topo"]),
                                                   ("info", ["info", "--format", "json"])))
        self.assertEqual(err["table"] + err["info"], "", r)
        self.check_missing_logged_once("minimal", err["json"],
                                       ["nvmlDeviceGetTemperature", "nvmlDeviceGetPowerUsage",
                                        "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetUtilizationRates",
                                        "nvmlDeviceGetSerial"])
        self.check_missing_logged_once("minimal", err["topo"], [])
        identity = {"index", "uuid", "name", "pci_bus_id", "pci_device_id"}  # GetPciInfo_v2
        for i, (got, g) in enumerate(zip(json.loads(out["json"])["gpus"], m.gpus)):
            want = json_facts(g, i)
            for k in identity:
                self.assertEqual(got[k], want[k], (i, k))
            self.assertEqual(got["idle"], {}, got)  # no idle case from what was not read
            nonnull = {k for k, v in got.items() if v not in (None, [], {})}
            self.assertEqual(nonnull, identity | {"lost", "health"}, got)
            self.assertIs(got["lost"], False)
            self.assertEqual(got["health"], "OK")  # no signal, no finding
        rows = [cells(l) for l in out["table"].splitlines()[1:]]
        for i, (row, g) in enumerate(zip(rows, m.gpus)):
            self.assertEqual(row[:5], [str(i), g["uuid"][:12], g["name"], "N/A", "N/A"], r)
        topo = [l.split("\t") for l in out["topo"].splitlines()[1:1 + n]]
        for i, row in enumerate(topo):
            self.assertEqual(row[1:], [" X " if j == i else "N/A" for j in range(n)] + ["N/A"] * 3)
        info = json.loads(out["info"])
        self.assertEqual(info["driver_version"], m.system["driver_version"])
        self.assertIsNone(info["nvml_version"])
        self.assertIsNone(info["cuda_driver_version"])
        for got, g in zip(info["gpus"], m.gpus):
            self.assertEqual((got["uuid"], got["pci_bus_id"], got["name"]),
                             (g["uuid"], g["pci_bus_id"], g["name"]))
            self.assertIsNone(got["persistence_mode"])


class LibraryProblems(FaultTestCase):
    """GPUCTL_NVML_LIBRARY naming something that is not a working NVML: one line, the exit
    code of docs/gpuctl.1 (4: not found or NVML cannot initialise; 1: not an NVML library)."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def no_sim_env(self, lib, *args):
        # The simulator library must see neither NVSIM_STATE_DIR nor NVSIM_SCENARIO.
        return run(["env", "-u", "NVSIM_STATE_DIR", "-u", "NVSIM_SCENARIO",
                    "GPUCTL_NVML_LIBRARY=" + lib, GPUCTL, *args])

    def check(self, lib, rc, needle):
        for cmd in (["list"], ["list", "--format", "json"], ["topo"], ["info"]):
            with self.subTest(lib=lib, cmd=cmd):
                r = self.no_sim_env(lib, *cmd)
                self.assertOneLineError(r, rc, needle)
                self.assertTrue(r.err.startswith("gpuctl: "), r)
                self.assertNoStdout(r)
                self.assertStderr(r, r"^gpuctl: ")

    def test_not_found(self):
        self.check("/nonexistent", EXIT_NODRIVER, "/nonexistent")
        self.check(os.path.join(self.tmp.name, "missing", "libnvidia-ml.so.1"), EXIT_NODRIVER,
                   "missing/libnvidia-ml.so.1")

    def test_not_a_shared_object(self):
        d = os.path.join(self.tmp.name, "dir.so")
        os.mkdir(d)
        empty = os.path.join(self.tmp.name, "empty.so")
        open(empty, "w").close()
        text = os.path.join(self.tmp.name, "text.so")
        with open(text, "w") as f:
            f.write("#!/bin/sh\n# not a library at all, just a long enough line of text\n" * 4)
        for path in (d, empty, text):
            self.check(path, EXIT_FAILURE, path)

    def test_shared_object_without_nvml(self):
        self.check("libm.so.6", EXIT_FAILURE, "libm.so.6")

    def test_simulator_without_a_scenario(self):
        # sim/README.md: no NVSIM_STATE_DIR/NVSIM_SCENARIO -> nvmlInit says DRIVER_NOT_LOADED,
        # silently; gpuctl: NVML cannot initialise -> exit 4, one line.
        self.check(SIMLIB, EXIT_NODRIVER, SIMLIB)


class NotARegularFile(FaultTestCase):
    """GPUCTL_NVML_LIBRARY and GPUCTL_CPUINFO naming a FIFO (or a directory, a device): one
    line naming the variable and the path, exit 1, at once (issue 24, finding 9a: opening a
    FIFO blocks until a writer comes, so gpuctl hung). gpuctl runs directly, not under nvsim
    exec, so that the guard's timeout ends it if it blocks."""

    GUARD_S = 20  # a blocked gpuctl is killed and the test fails, rather than hang

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.fifo = os.path.join(self.tmp.name, "fifo")
        os.mkfifo(self.fifo)

    def gpuctl(self, env, *args):
        e = {"NVSIM_SCENARIO": os.path.join(SCENARIOS, "dgx-a100.json"),
             "GPUCTL_NVML_LIBRARY": SIMLIB}
        e.update(env)
        return run(["env", "-u", "NVSIM_STATE_DIR", GPUCTL, *args], env=e,
                   timeout=self.GUARD_S)

    def test_nvml_library(self):
        for path in (self.fifo, self.tmp.name, "/dev/null"):
            for args in (("list",), ("select", "-n", "1")):
                with self.subTest(path=path, args=args):
                    r = self.gpuctl({"GPUCTL_NVML_LIBRARY": path}, *args)
                    self.assertOneLineError(r, EXIT_FAILURE, "GPUCTL_NVML_LIBRARY '%s'" % path)
                    self.assertIn("not a regular file", r.err)

    def test_cpuinfo(self):
        for path in (self.fifo, self.tmp.name, "/dev/null"):
            # the commands that read the CPU (the bandwidth model: docs/topology.md)
            for args in (("topo",), ("select", "-n", "1"), ("health",)):
                with self.subTest(path=path, args=args):
                    r = self.gpuctl({"GPUCTL_CPUINFO": path}, *args)
                    self.assertOneLineError(r, EXIT_FAILURE, "GPUCTL_CPUINFO '%s'" % path)
                    self.assertIn("not a regular file", r.err)
        # a missing file is still the default CPU (docs/topology.md)
        r = self.gpuctl({"GPUCTL_CPUINFO": os.path.join(self.tmp.name, "missing")}, "topo")
        self.assertEqual(r.rc, 0, r)

    def test_config(self):
        """GPUCTL_CONFIG naming the null device is no configuration (docs/config.md, as
        systemd's masks and git's GIT_CONFIG_GLOBAL=/dev/null; issue 25, item 9); every other
        file that is not a regular one is still refused, a FIFO at once."""
        null_link = os.path.join(self.tmp.name, "masked.conf")
        os.symlink("/dev/null", null_link)
        for path in ("/dev/null", null_link):
            with self.subTest(path=path):
                r = self.gpuctl({"GPUCTL_CONFIG": path}, "list")
                self.assertEqual((r.rc, r.err), (0, ""), r)
                r = self.gpuctl({"GPUCTL_CONFIG": path}, "info")
                self.assertEqual(r.rc, 0, r)
                self.assertIn("Configuration:        none (%s)" % path, r.out)
                self.assertIn("Pools:                none", r.out)
        for path in (self.fifo, self.tmp.name, "/dev/zero"):
            with self.subTest(path=path):
                r = self.gpuctl({"GPUCTL_CONFIG": path}, "list")
                self.assertOneLineError(r, EXIT_FAILURE, path, "not a regular file")


def hostile_scenarios():
    """(file name, bytes, what the nvsim line must name besides the file)."""
    with open(os.path.join(SCENARIOS, "rtx4090-8.json")) as f:
        base = json.load(f)

    def edit(fn):
        d = copy.deepcopy(base)
        fn(d)
        return json.dumps(d, indent=1).encode()

    def setkey(path, value):
        def fn(d):
            for k in path[:-1]:
                d = d[k]
            d[path[-1]] = value
        return fn

    full = json.dumps(base, indent=1).encode()
    return [
        ("not-json.json", b"this is not JSON\n", "line 1"),
        ("empty.json", b"", "line 1"),
        ("truncated.json", full[:len(full) // 2], "line "),
        ("top-array.json", b"[1, 2, 3]\n", "top level"),
        ("wrong-type.json", edit(setkey(["gpus", 2, "numa_node"], "zero")), "gpus[2].numa_node"),
        ("wrong-type-gpus.json", edit(setkey(["gpus"], {"0": {}})), "gpus"),
        ("unknown-key.json", edit(setkey(["gpus", 1, "colour"], "green")), "gpus[1].colour"),
        ("duplicate-uuid.json", edit(lambda d: d["gpus"][5].update(uuid=d["gpus"][2]["uuid"])),
         "gpus[5].uuid"),
        ("nvlink-missing-gpu.json", edit(setkey(["nvlink"], {"links": [[0, 9, 2]]})),
         "nvlink.links[0]"),
        ("nested.json", b"[" * (5 << 20) + b"]" * (5 << 20), "line 1"),
        ("nul-escaped.json", edit(setkey(["defaults", "name"], "NVIDIA\u0000Evil")), "line "),
        ("nul-raw.json", full.replace(b"NVIDIA GeForce RTX 4090", b"NVIDIA\x00GeForce", 1), "line "),
        ("huge-int.json", full.replace(b'"memory_total_mib": 24564',
                                       b'"memory_total_mib": ' + b"9" * 40, 1), "line "),
        ("huge-int64.json", edit(setkey(["gpus", 4, "power_draw_mw"], 2**63 - 1)),
         "gpus[4].power_draw_mw"),
        ("huge-float.json", edit(setkey(["gpus", 3, "temperature_c"], 1e308)),
         "gpus[3].temperature_c"),
        ("huge-mib.json", edit(setkey(["gpus", 0, "memory_total_mib"], 2**44)),
         "gpus[0].memory_total_mib"),
    ]


class HostileScenarios(FaultTestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.files = []
        for name, data, needle in hostile_scenarios():
            path = os.path.join(cls.tmp.name, name)
            with open(path, "wb") as f:
                f.write(data)
            cls.files.append((path, needle))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_nvsim_exec_refuses_and_never_runs_the_command(self):
        for path, needle in self.files:
            with self.subTest(scenario=os.path.basename(path)):
                marker = path + ".ran"
                r = run([NVSIM, "exec", path, "--", "sh", "-c", 'touch "$0"; exec "$1" list',
                         marker, GPUCTL])
                self.assertOneLineError(r, EXIT_USAGE, path, needle)
                self.assertTrue(r.err.startswith("nvsim: "), r)
                self.assertNoStdout(r)
                self.assertStderr(r, r"^nvsim: ")
                self.assertFalse(os.path.exists(marker), r)

    def test_simulator_library_refuses_and_gpuctl_says_no_driver(self):
        for path, _ in self.files:
            with self.subTest(scenario=os.path.basename(path)):
                r = run(["env", "-u", "NVSIM_STATE_DIR", "NVSIM_SCENARIO=" + path,
                         "GPUCTL_NVML_LIBRARY=" + SIMLIB, GPUCTL, "list"])
                self.assertEqual(r.rc, EXIT_NODRIVER, r)
                self.assertNoStdout(r)
                self.assertStderr(r, r"^gpuctl: ", r"^nvsim: ")
                lines = r.err.splitlines()
                self.assertEqual(len([l for l in lines if l.startswith("gpuctl: ")]), 1, r)
                self.assertLessEqual(len([l for l in lines if l.startswith("nvsim: ")]), 1, r)


class BadArguments(FaultTestCase):
    def test_usage_errors_one_line_exit_2(self):
        cases = ((["list", "-i", "99"], "'99'"),
                 (["list", "-i", "GPU-zzzz"], "GPU-zzzz"),
                 (["list", "-i", ""], "--id"),
                 (["list", "-i", "0,,1"], "0,,1"),
                 (["list", "--query", ""], "--query"),
                 (["list", "--query", "index,,uuid"], "index,,uuid"),
                 (["list", "--query", "index,memory"], "'memory'"),
                 (["list", "--format", "yaml"], "yaml"),
                 (["list", "--format", "csv,yaml"], "yaml"),
                 (["list", "--format", ""], "--format"),
                 (["list", "--bogus"], "--bogus"),
                 (["list", "-Z"], "-Z"),
                 (["list", "--query"], "--query"),
                 (["topo", "--format", "yaml"], "yaml"),
                 (["topo", "--bogus"], "--bogus"),
                 (["info", "--format", "csv"], "csv"),
                 (["info", "stray"], "stray"),
                 (["--bogus", "list"], "--bogus"))
        for args, needle in cases:
            with self.subTest(args=args):
                r = sim(M, *args)
                self.assertOneLineError(r, EXIT_USAGE, needle)
                self.assertTrue(r.err.startswith("gpuctl: "), r)
                self.assertNoStdout(r)
                self.assertStderr(r, r"^gpuctl: ")

    def test_option_given_a_value_it_does_not_take(self):
        # Regression: for a long option given a value ("--noheader=1") getopt_long leaves the
        # option's internal value in optopt, and the message printed it as a character
        # ("unknown option '-\x02'", or a NUL cutting the line for --version=1). The message
        # names the word typed. (The needles start with a quote: every list/topo message already
        # ends in "(see 'gpuctl list --help')".)
        for args, needle in ((["list", "--noheader=1"], "'--noheader"),
                             (["list", "--nounits=yes"], "'--nounits"),
                             (["list", "--help=x"], "'--help"),
                             (["topo", "--bandwidth=1"], "'--bandwidth"),
                             (["--version=1"], "'--version")):
            with self.subTest(args=args):
                r = sim(M, *args)
                self.assertOneLineError(r, EXIT_USAGE, needle)
                self.assertNoStdout(r)
                self.assertRegex(r.err, r"^[\x20-\x7e]*\n$", r)


if __name__ == "__main__":
    unittest.main()
