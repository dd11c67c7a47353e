"""gpuctl list: the table, nvidia-smi-style CSV and --query, JSON, -i, MIG, lost GPUs, NVML
errors. Expected values come from the scenario files (cli_facts) and nvidia-smi's documented
CSV format (units in the header in brackets, "[N/A]", ", " between values)."""
import json
import os
import pwd
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from cli_facts import MIB, Machine
from gpuctl_test import (EXIT_USAGE, GPUCTL, NVSIM, SCENARIOS, SETTLED_SH, GpuctlTestCase,
                         gpuctl, scenario_gpus_of, sim, sim_sh)


def short_uuid(uuid):
    return uuid[:12]  # "GPU-" + first group of 8 hex digits


class ListTable(GpuctlTestCase):
    def test_one_line_per_gpu_with_identity(self):
        m = Machine("dgx-a100")
        r = sim("dgx-a100", "list")
        self.assertOk(r)
        lines = r.out.splitlines()
        self.assertTrue(lines[0].split()[:3] == ["GPU", "UUID", "NAME"], r)
        rows = lines[1:]
        self.assertEqual(len(rows), len(m), r)
        for i, g in enumerate(m.gpus):
            self.assertEqual(rows[i].split()[0], str(i), r)
            self.assertIn(short_uuid(g["uuid"]), rows[i])
            self.assertIn(g["name"], rows[i])
            self.assertIn("%d MiB" % g["memory_total_mib"], rows[i])
            self.assertIn("%dC" % g["temperature_c"], rows[i])
            self.assertIn("%d W" % round(g["power_limit_mw"] / 1000), rows[i])

    def test_processes_as_user_pid_mem(self):
        user = pwd.getpwuid(os.getuid()).pw_name
        script = ("sleep 60 & pid=$!\n"
                  "$NVSIM proc add --pid $pid -i 1 --mem 1GiB\n"
                  "echo $pid\n"
                  "$GPUCTL list --noheader\n"
                  "$GPUCTL list --format json\n"
                  "kill $pid\n")
        r = sim_sh("dgx-a100", script)
        self.assertOk(r)
        pid, rest = r.out.split("\n", 1)
        table, js = rest[:rest.index("{")], rest[rest.index("{"):]
        rows = table.splitlines()
        self.assertTrue(rows[1].endswith("%s:%s(1024MiB)" % (user, pid)), r)
        self.assertNotIn(":%s(" % pid, rows[0])
        procs = json.loads(js)["gpus"][1]["processes"]
        self.assertEqual(len(procs), 1, r)
        self.assertEqual(procs[0]["pid"], int(pid))
        self.assertEqual(procs[0]["user"], user)
        self.assertEqual(procs[0]["used_memory"], 1024 * MIB)
        self.assertEqual(procs[0]["command"], "sleep")

    def test_noheader(self):
        r = sim("dgx-a100", "list", "--noheader")
        self.assertOk(r)
        self.assertEqual(len(r.out.splitlines()), len(Machine("dgx-a100")), r)
        self.assertFalse(r.out.startswith("GPU"), r)

    def test_mig_devices_under_their_parent(self):
        m = Machine("a100-mig")
        r = sim("a100-mig", "list")
        self.assertOk(r)
        lines = r.out.splitlines()[1:]
        mig_total = sum(len(m.mig(i)["instances"]) for i in range(len(m)))
        self.assertEqual(len(lines), len(m) + mig_total, r)
        pos = 0
        for i, g in enumerate(m.gpus):
            self.assertIn(short_uuid(g["uuid"]), lines[pos], r)
            pos += 1
            for inst in g["mig"]["instances"]:
                self.assertIn(inst["uuid"][:12], lines[pos], r)
                self.assertIn(inst["profile"], lines[pos], r)
                self.assertIn("%d MiB" % inst["memory_mib"], lines[pos], r)
                pos += 1
        # Utilisation is not supported on a MIG-enabled GPU (sim/SCENARIO.md).
        self.assertIn("N/A", lines[0], r)


class ListCsv(GpuctlTestCase):
    def assertRectangular(self, rows, header=True):
        width = len(rows[0])
        for row in rows:
            self.assertEqual(len(row), width, rows)

    def test_default_csv(self):
        m = Machine("rtx4090-8")
        r = sim("rtx4090-8", "list", "--format", "csv")
        self.assertOk(r)
        rows = r.csv()
        self.assertRectangular(rows)
        self.assertEqual(len(rows), len(m) + 1, r)
        header = rows[0]
        self.assertIn("uuid", header)
        self.assertIn("memory.total [MiB]", header)
        for i, g in enumerate(m.gpus):
            row = dict(zip(header, rows[i + 1]))
            self.assertEqual(row["index"], str(i))
            self.assertEqual(row["uuid"], g["uuid"])
            self.assertEqual(row["memory.total [MiB]"], "%d MiB" % g["memory_total_mib"])

    def test_query_smi_names_header_and_values(self):
        m = Machine("dgx-a100")
        fields = ("index,uuid,name,pci.bus_id,memory.total,memory.used,utilization.gpu,"
                  "temperature.gpu,power.draw,enforced.power.limit,clocks.current.sm,"
                  "pci.device_id,compute_mode,persistence_mode,clocks_event_reasons.active")
        r = sim("dgx-a100", "list", "--query", fields)
        self.assertOk(r)
        lines = r.out.splitlines()
        # nvidia-smi: names as typed, bracketed units, ", " between columns.
        self.assertEqual(lines[0], "index, uuid, name, pci.bus_id, memory.total [MiB], "
                         "memory.used [MiB], utilization.gpu [%], temperature.gpu, power.draw [W], "
                         "enforced.power.limit [W], clocks.current.sm [MHz], pci.device_id, "
                         "compute_mode, persistence_mode, clocks_event_reasons.active")
        rows = r.csv()
        self.assertRectangular(rows)
        self.assertEqual(len(rows), len(m) + 1)
        for i, g in enumerate(m.gpus):
            v = rows[i + 1]
            self.assertEqual(v[0], str(i))
            self.assertEqual(v[1], g["uuid"])
            self.assertEqual(v[2], g["name"])
            self.assertEqual(v[3], g["pci_bus_id"])
            self.assertEqual(v[4], "%d MiB" % g["memory_total_mib"])
            self.assertEqual(v[5], "%d MiB" % g.get("memory_used_mib", 0))
            self.assertEqual(v[6], "%d %%" % g.get("utilization_gpu", 0))
            self.assertEqual(v[7], str(g["temperature_c"]))
            self.assertEqual(v[8], "%.2f W" % (g["power_draw_mw"] / 1000))
            self.assertEqual(v[9], "%.2f W" % (g["power_limit_mw"] / 1000))
            self.assertEqual(v[10], "%d MHz" % g["clocks_mhz"]["sm"])
            self.assertEqual(v[11], g["pci_device_id"].upper().replace("0X", "0x"))
            self.assertEqual(v[12], "Default")
            self.assertEqual(v[13], "Enabled" if g.get("persistence_mode", True) else "Disabled")
            self.assertEqual(v[14], "0x%016X" % g.get("clocks_event_reasons", 1))

    def test_our_keys_and_case_as_typed(self):
        r = sim("dgx-a100", "list", "--query", "MEMORY.TOTAL,memory_total,Index")
        self.assertOk(r)
        self.assertEqual(r.out.splitlines()[0], "MEMORY.TOTAL [MiB], memory_total [MiB], Index")
        for row in r.csv()[1:]:
            self.assertEqual(row[0], row[1])

    def test_noheader_nounits_both_spellings(self):
        m = Machine("dgx-a100")
        want = ["%d, %.2f, %d" % (g["memory_total_mib"], g["power_draw_mw"] / 1000,
                                  g.get("utilization_gpu", 0)) for g in m.gpus]
        q = "memory.total,power.draw,utilization.gpu"
        for args in (["--format=csv,noheader,nounits"], ["--format", "csv", "--noheader", "--nounits"],
                     ["--noheader", "--nounits"]):
            r = sim("dgx-a100", "list", "--query", q, *args)
            self.assertOk(r)
            self.assertEqual(r.out.splitlines(), want, (args, r))

    def test_nounits_keeps_header_units(self):
        # nvidia-smi's csv,nounits keeps "[MiB]" in the header and drops it from the values.
        r = sim("dgx-a100", "list", "--query", "memory.total", "--format=csv,nounits")
        self.assertOk(r)
        lines = r.out.splitlines()
        self.assertEqual(lines[0], "memory.total [MiB]")
        self.assertTrue(all(re.fullmatch(r"\d+", l) for l in lines[1:]), r)

    def test_na_for_unsupported(self):
        # GeForce has no ECC (sim/SCENARIO.md): nvidia-smi prints [N/A].
        r = sim("rtx4090-8", "list", "--query",
                "index,ecc.mode.current,ecc.errors.corrected.volatile.total,serial")
        self.assertOk(r)
        for row in r.csv()[1:]:
            self.assertEqual(row[1:], ["[N/A]", "[N/A]", "[N/A]"], r)

    def test_na_utilisation_on_mig_gpu(self):
        m = Machine("a100-mig")
        r = sim("a100-mig", "list", "--query", "index,utilization.gpu,mig.mode.current")
        self.assertOk(r)
        for i, row in enumerate(r.csv()[1:]):
            enabled = m.mig(i)["enabled"]
            self.assertEqual(row[1], "[N/A]" if enabled else "0 %", r)
            self.assertEqual(row[2], "Enabled" if enabled else "Disabled", r)

    def test_query_table_format(self):
        r = sim("dgx-a100", "list", "--query", "index,uuid", "--format", "table")
        self.assertOk(r)
        lines = r.out.splitlines()
        self.assertEqual(lines[0].split(), ["index", "uuid"])
        self.assertEqual(len(lines), len(Machine("dgx-a100")) + 1)


class ListSmiSpellings(GpuctlTestCase):
    """Values and names as nvidia-smi writes them, from its real output: the query-gpu CSV and
    --help-query-gpu text of drivers 590.48.01 to 610.57.04 captured on H100, H200, L40S and
    GeForce RTX 2080/4080 SUPER boards (utkuozdemir/nvidia_gpu_exporter,
    internal/captures/*.txt; docs/nvidia-smi-csv.md)."""

    def test_memory_temperature_na_without_brackets(self):
        # "temperature.memory" reads "N/A" on every captured GPU without a memory sensor,
        # while the other unavailable fields of the same rows read "[N/A]"
        r = sim_sh("rtx4090-8", '"$GPUCTL" list --query index,temperature.memory,serial -i 0,1\n'
                   '"$NVSIM" set -i 1 temperature.memory=60\n'
                   '"$GPUCTL" list --query temperature.memory -i 1 --format csv,noheader\n')
        self.assertOk(r)
        self.assertEqual(r.out.splitlines(), ["index, temperature.memory, serial",
                                              "0, N/A, [N/A]", "1, N/A, [N/A]", "60"])

    def test_recovery_action_none(self):
        # "gpu_recovery_action" reads "None" for NVML_GPU_RECOVERY_ACTION_NONE on every
        # capture; without the field (drivers before it) "[N/A]"
        r = sim_sh("hgx-h100", '"$NVSIM" set -i 5 recovery_action=0\n'
                   '"$GPUCTL" list --query index,gpu_recovery_action -i 4,5 --format csv,noheader\n')
        self.assertOk(r)
        self.assertEqual(r.out.splitlines(), ["4, [N/A]", "5, None"])

    def test_power_limit_is_the_software_limit(self):
        # --help-query-gpu: "power.limit": the software power limit in watts, set by
        # software like nvidia-smi; no "power.management.limit" (kept as gpuctl's older name)
        r = sim("workstation-mixed", "list", "--query", "power.limit,power.management.limit",
                "--format", "csv,nounits")
        self.assertOk(r)
        lines = r.out.splitlines()
        self.assertEqual(lines[0], "power.limit [W], power.management.limit [W]")
        for line, g in zip(lines[1:], Machine("workstation-mixed").gpus):
            self.assertEqual(line, "%.2f, %.2f" % ((g["power_limit_mw"] / 1000,) * 2))
        r = gpuctl("list", "--help-query", env={"GPUCTL_NVML_LIBRARY": "/nonexistent"})
        self.assertIn("\n  power.limit [W] (power_management_limit)\n", r.out)

    def test_gpumax_is_another_fact(self):
        # --help-query-gpu: pcie.link.gen.gpumax is the GPU's own maximum, pcie.link.gen.max
        # that of GPU and slot together: gpuctl reads the latter only
        r = sim("dgx-a100", "list", "--query", "pcie.link.gen.gpumax")
        self.assertOneLineError(r, EXIT_USAGE, "pcie.link.gen.gpumax")


class ListScriptFields(GpuctlTestCase):
    """The nvidia-smi --query-gpu fields scripts ask for, in nvidia-smi's spellings and units,
    with values from the scenario file (a copy of workstation-mixed whose GPU 1 declares a fan
    and a P-state)."""

    def setUp(self):
        with open(os.path.join(SCENARIOS, "workstation-mixed.json")) as f:
            self.doc = json.load(f)
        self.doc["gpus"][1]["fan_speed_pct"] = 42
        self.doc["gpus"][1]["performance_state"] = 2
        self.tmp = tempfile.mkdtemp(prefix="gpuctl-fields-")
        self.path = os.path.join(self.tmp, "fans.json")
        with open(self.path, "w") as f:
            json.dump(self.doc, f)
        self.gpus = scenario_gpus_of(self.doc)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_csv(self):
        before = time.time()
        r = sim(self.path, "list", "--query", "index,fan.speed,pstate,power.management.limit,"
                "power.limit,persistence_mode,compute_mode,clocks.max.sm,clocks.max.memory,"
                "driver_version,timestamp")
        after = time.time()
        self.assertOk(r)
        lines = r.out.splitlines()
        self.assertEqual(lines[0], "index, fan.speed [%], pstate, power.management.limit [W], "
                         "power.limit [W], persistence_mode, compute_mode, "
                         "clocks.max.sm [MHz], clocks.max.memory [MHz], driver_version, "
                         "timestamp")
        rows = [l.split(", ") for l in lines[1:]]
        self.assertEqual(len(rows), len(self.gpus))
        for i, (row, g) in enumerate(zip(rows, self.gpus)):
            self.assertEqual(row[0], str(i))
            # no fan declared: NOT_SUPPORTED, as nvidia-smi prints it
            self.assertEqual(row[1], "%d %%" % g["fan_speed_pct"] if "fan_speed_pct" in g
                             else "[N/A]")
            self.assertEqual(row[2], "P%d" % g.get("performance_state", 0))
            self.assertEqual(row[3], "%.2f W" % (g["power_limit_mw"] / 1000))
            self.assertEqual(row[4], row[3])  # power.limit, nvidia-smi's name of the same limit
            self.assertEqual(row[7], "%d MHz" % g["max_clocks_mhz"]["sm"])
            self.assertEqual(row[8], "%d MHz" % g["max_clocks_mhz"]["mem"])
            self.assertEqual(row[9], self.doc["system"]["driver_version"])
            # nvidia-smi's "YYYY/MM/DD HH:MM:SS.mmm", local time, taken during the call
            m = re.fullmatch(r"(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d)\.(\d{3})", row[10])
            self.assertTrue(m, row[10])
            t = time.mktime(time.strptime(m[1], "%Y/%m/%d %H:%M:%S")) + int(m[2]) / 1000
            self.assertTrue(int(before) <= t <= after + 0.001, (before, t, after))
        self.assertEqual(rows[1][1], "42 %")
        self.assertEqual(rows[1][2], "P2")

    def test_json(self):
        r = sim(self.path, "list", "--query", "fan.speed,pstate,driver_version",
                "--format", "json")
        self.assertOk(r)
        gpus = json.loads(r.out)["gpus"]
        self.assertEqual([g["fan_speed"] for g in gpus],
                         [g.get("fan_speed_pct") for g in self.gpus])
        self.assertEqual([g["pstate"] for g in gpus],
                         ["P%d" % g.get("performance_state", 0) for g in self.gpus])
        self.assertEqual({g["driver_version"] for g in gpus},
                         {self.doc["system"]["driver_version"]})


class ListIds(GpuctlTestCase):
    M = "rtx4090-8"

    def uuids(self, *args):
        r = sim(self.M, "list", "--query", "uuid", "--noheader", *args)
        self.assertOk(r)
        return r.out.splitlines()

    def test_index_uuid_prefix_bus_id(self):
        m = Machine(self.M)
        u = [g["uuid"] for g in m.gpus]
        self.assertEqual(self.uuids("-i", "3"), [u[3]])
        self.assertEqual(self.uuids("-i", "5,1"), [u[5], u[1]])
        self.assertEqual(self.uuids("--id", u[2]), [u[2]])
        self.assertEqual(self.uuids("-i", u[4][:10]), [u[4]])
        self.assertEqual(self.uuids("-i", u[4][4:12]), [u[4]])  # prefix without "GPU-"
        bus = m.gpus[6]["pci_bus_id"]  # "00000000:D0:00.0"
        self.assertEqual(self.uuids("-i", bus), [u[6]])
        self.assertEqual(self.uuids("-i", bus[4:].lower()), [u[6]])
        self.assertEqual(self.uuids("-i", bus[9:]), [u[6]])

    def test_unknown_id(self):
        r = sim(self.M, "list", "-i", "42")
        self.assertOneLineError(r, EXIT_USAGE, "42")

    def test_ambiguous_prefix(self):
        # Three UUIDs of rtx4090-8 start with "GPU-6".
        m = Machine(self.M)
        self.assertGreater(sum(g["uuid"].startswith("GPU-6") for g in m.gpus), 1)
        r = sim(self.M, "list", "-i", "GPU-6")
        self.assertOneLineError(r, EXIT_USAGE, "GPU-6")


class OnlyIsId(GpuctlTestCase):
    """--only (nvitop's name) is -i/--id wherever -i is: list, health, watch, release."""
    M = "rtx4090-8"

    def test_list(self):
        u = [g["uuid"] for g in Machine(self.M).gpus]
        r = sim(self.M, "list", "--query", "uuid", "--noheader", "--only", "5,1")
        self.assertOk(r)
        self.assertEqual(r.out.splitlines(), [u[5], u[1]])
        r = sim(self.M, "list", "--only=" + u[2][:12], "--format", "json")
        self.assertOk(r)
        self.assertEqual([g["uuid"] for g in r.json()["gpus"]], [u[2]])

    def test_health_watch_release(self):
        u = [g["uuid"] for g in Machine(self.M).gpus]
        r = sim(self.M, "health", "--format", "json", "--only", "3,0")
        self.assertOk(r)
        self.assertEqual([g["uuid"] for g in r.json()["gpus"]], [u[3], u[0]])
        r = sim(self.M, "watch", "-c", "1", "--only", "6")
        self.assertOk(r)
        self.assertEqual([l.split()[0] for l in r.out.splitlines() if not l.startswith("#")],
                         ["6"], r)
        # release checks the ids as -i does: an index the machine lacks is named
        r = sim(self.M, "release", "--only", "42")
        self.assertOneLineError(r, EXIT_USAGE, "'42'")

    def test_bad_id(self):
        r = sim(self.M, "list", "--only", "42")
        self.assertOneLineError(r, EXIT_USAGE, "'42'")


class ListHelpQuery(GpuctlTestCase):
    """--help-query (as nvidia-smi --help-query-gpu) and the count column."""

    def test_count_is_the_machines_gpus(self):
        for name in ("dgx-a100", "rtx4090-8"):
            n = len(Machine(name).gpus)
            r = sim(name, "list", "--query", "index,count", "-i", "1")
            self.assertOk(r)
            self.assertEqual(r.out, "index, count\n1, %d\n" % n)
            r = sim(name, "list", "--query", "count", "--format", "json", "-i", "0")
            self.assertOk(r)
            self.assertEqual(r.json()["gpus"][0]["count"], n)

    def test_lists_every_field_without_a_driver(self):
        r = gpuctl("list", "--help-query", env={"GPUCTL_NVML_LIBRARY": "/nonexistent"})
        self.assertOk(r)
        # nvidia-smi --help-query-gpu's names and units (its CSV header spelling), and ours
        for want in ("memory.used [MiB] (memory_used)", "power.draw [W] (power_draw)",
                     "utilization.gpu [%] (utilization_gpu)", "pci.bus_id (pci_bus_id)",
                     "driver_version", "timestamp", "count", "used_gpu_memory [MiB]",
                     "gpu_bus_id"):
            self.assertIn("\n  %s\n" % want, r.out)
        self.assertEqual(gpuctl("list", "--help-query-gpu").out, r.out)
        # every name it lists is one --query takes
        names = [l.split()[0] for l in r.out.split("--query-compute-apps, ")[0].splitlines()
                 if l.startswith("  ") and not l.startswith("   ")]
        self.assertGreater(len(names), 40)
        r = sim("dgx-a100", "list", "--query", ",".join(names), "-i", "0", "--noheader")
        self.assertOk(r)


class ListComputeApps(GpuctlTestCase):
    """--query-compute-apps: nvidia-smi's CSV of the compute processes (its header spelling:
    "pid, process_name, used_gpu_memory [MiB]", whichever alias was typed; values "N MiB")."""

    def test_csv(self):
        g = Machine("dgx-a100").gpus[1]
        script = ("sleep 60 & pid=$!\n"
                  "$NVSIM proc add --pid $pid -i 1 --mem 1GiB\n"
                  "echo $pid\n"
                  "$GPUCTL list --query-compute-apps=pid,process_name,used_memory,gpu_uuid,"
                  "gpu_bus_id,gpu_name,name,used_gpu_memory --format=csv\n"
                  "$GPUCTL list --query-compute-apps PID,used_memory --format csv,noheader,nounits\n"
                  "$GPUCTL list --query-compute-apps pid --only 0\n"
                  "kill $pid\n")
        r = sim_sh("dgx-a100", script)
        self.assertOk(r)
        lines = r.out.splitlines()
        pid = lines[0]
        self.assertEqual(lines[1], "pid, process_name, used_gpu_memory [MiB], gpu_uuid, "
                                   "gpu_bus_id, gpu_name, process_name, used_gpu_memory [MiB]")
        self.assertEqual(lines[2], "%s, sleep, 1024 MiB, %s, %s, %s, sleep, 1024 MiB"
                         % (pid, g["uuid"], g["pci_bus_id"], g["name"]))
        self.assertEqual(lines[3], "%s, 1024" % pid)
        self.assertEqual(lines[4:], ["pid"])  # GPU 0 runs nothing: the header alone

    def test_bad_input(self):
        for args, needle in ((["--query-compute-apps", "pid,bogus"], "'bogus'"),
                             (["--query-compute-apps", "pid,"], "''"),
                             (["--query-compute-apps", "pid", "--format", "json"], "CSV only"),
                             (["--query-compute-apps", "pid", "--query", "index"], "CSV only")):
            r = sim("dgx-a100", "list", *args)
            self.assertOneLineError(r, EXIT_USAGE, needle)


class ListLoop(GpuctlTestCase):
    """-l/--loop SECONDS: the listing again every SECONDS until SIGINT (exit 0), as nvidia-smi
    -l; with --query the CSV header once, then the rows of each listing."""

    def start(self, *args):
        self.pending = b""
        return subprocess.Popen([NVSIM, "exec", "dgx-a100", "--", GPUCTL, "list", *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def read_lines(self, p, n, timeout=20):
        """The next n lines, as soon as gpuctl has written them."""
        fd = p.stdout.fileno()
        deadline = time.monotonic() + timeout
        while self.pending.count(b"\n") < n:
            left = deadline - time.monotonic()
            self.assertGreater(left, 0, "timed out after %r" % self.pending)
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                self.assertNotEqual(chunk, b"", "output ended after %r" % self.pending)
                self.pending += chunk
        lines = self.pending.split(b"\n")
        self.pending = b"\n".join(lines[n:])
        return [l.decode() for l in lines[:n]]

    def interrupt(self, p):
        """SIGINT (nvsim exec forwards it); the rest of the output and stderr."""
        try:
            p.send_signal(signal.SIGINT)
            out, err = p.communicate(timeout=30)
        finally:
            p.kill()
        return (self.pending + out).decode(), err.decode()

    def test_query_csv_header_once(self):
        u = [g["uuid"] for g in Machine("dgx-a100").gpus]
        p = self.start("--query", "index,uuid", "--only", "0,1", "-l", "0.2")
        lines = self.read_lines(p, 5)  # the header, then two listings of two rows
        out, err = self.interrupt(p)
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(err, "")
        self.assertEqual(lines[0], "index, uuid")
        rows = lines[1:] + out.splitlines()
        self.assertGreaterEqual(len(rows), 4)
        for k, row in enumerate(rows):
            i = k % 2
            self.assertEqual(row, "%d, %s" % (i, u[i]))

    def test_table_again_after_a_blank_line(self):
        m = Machine("dgx-a100")
        p = self.start("--loop", "0.2", "--only", "3")
        lines = self.read_lines(p, 5)  # header, row, blank, header, row
        out, err = self.interrupt(p)
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(lines[2], "")
        for head, row in ((lines[0], lines[1]), (lines[3], lines[4])):
            self.assertEqual(head.split()[:3], ["GPU", "UUID", "NAME"])
            self.assertEqual(row.split()[0], "3")
            self.assertIn(short_uuid(m.gpus[3]["uuid"]), row)

    def test_bad_interval(self):
        for v in ("0", "x", "-1"):
            r = sim("dgx-a100", "list", "-l", v)
            self.assertOneLineError(r, EXIT_USAGE, "'%s'" % v)


class ListJson(GpuctlTestCase):
    IDENTITY = ("index", "uuid", "pci_bus_id", "name")

    def test_every_gpu_has_identity_and_fields(self):
        for name in ("dgx-a100", "rtx4090-8", "workstation-mixed"):
            m = Machine(name)
            r = sim(name, "list", "--format", "json")
            self.assertOk(r)
            gpus = r.json()["gpus"]
            self.assertEqual(len(gpus), len(m))
            for i, (g, want) in enumerate(zip(gpus, m.gpus)):
                self.assertEqual(g["index"], i)
                self.assertEqual(g["uuid"], want["uuid"])
                self.assertEqual(g["pci_bus_id"], want["pci_bus_id"])
                self.assertEqual(g["name"], want["name"])
                self.assertEqual(g["memory_total"], want["memory_total_mib"] * MIB)
                self.assertEqual(g["power_limit"], want["power_limit_mw"])
                self.assertIs(g["persistence_mode"], want.get("persistence_mode", True))
                self.assertIs(g["lost"], False)
                self.assertIsInstance(g["mig_devices"], list)
                self.assertIsInstance(g["processes"], list)
                for key in ("memory_used", "utilization_gpu", "temperature_gpu", "power_draw",
                            "ecc_mode", "mig_mode", "compute_mode", "numa_node", "cpu_affinity",
                            "clocks_event_reasons", "remapped_rows_pending"):
                    self.assertIn(key, g)
                if want.get("ecc") is False:
                    self.assertIsNone(g["ecc_mode"])  # GeForce: no ECC
                    self.assertIsNone(g["ecc_volatile_corrected"])

    def test_processes_carry_host_facts(self):
        # the GPU process is this script's own child; its host facts are compared with what
        # /proc says of it (proc(5)), read here independently after gpuctl ran
        script = (SETTLED_SH +
                  'sleep 60 & P=$!\n'
                  '"$NVSIM" proc add --pid $P -i 1 --mem 1GiB\n'
                  'settled $P\n'
                  'echo $P\n'
                  '"$GPUCTL" list --format json\n'
                  'cat /proc/$P/stat /proc/uptime\n'
                  'kill $P\n')
        r = sim_sh("dgx-a100", script)
        self.assertOk(r)
        lines = r.out.splitlines()
        pid = int(lines[0])
        end = next(i for i, l in enumerate(lines) if l == "}")
        doc = json.loads("\n".join(lines[1:end + 1]))
        stat = lines[end + 1].rsplit(")", 1)[1].split()
        uptime = float(lines[end + 2].split()[0])
        (p,) = [p for p in doc["gpus"][1]["processes"] if p["pid"] == pid]
        # proc(5): rss is field 24 (index 21 after the name), start time field 22 (19)
        self.assertEqual(p["host_memory"], int(stat[21]) * os.sysconf("SC_PAGESIZE"))
        self.assertEqual(p["cmdline"], "sleep 60")
        start = int(stat[19]) / os.sysconf("SC_CLK_TCK")
        self.assertTrue(0 <= p["elapsed"] <= uptime - start + 1, (p, uptime, start))
        self.assertIsInstance(p["cpu_percent"], (int, float))
        self.assertGreaterEqual(p["cpu_percent"], 0)
        for other in doc["gpus"][0]["processes"]:
            self.assertIn("host_memory", other)

    def test_query_json_has_identity_and_asked_fields(self):
        r = sim("dgx-a100", "list", "--format", "json", "--query", "memory.used,power.draw")
        self.assertOk(r)
        for g in r.json()["gpus"]:
            self.assertEqual(set(g), set(self.IDENTITY) | {"memory_used", "power_draw", "lost"})

    def test_mig_devices(self):
        m = Machine("a100-mig")
        r = sim("a100-mig", "list", "--format", "json")
        self.assertOk(r)
        for i, g in enumerate(r.json()["gpus"]):
            want = m.mig(i)
            self.assertIs(g["mig_mode"], want["enabled"])
            self.assertIs(g["mig_mode_pending"], want["pending"])
            if want["enabled"]:
                self.assertIsNone(g["utilization_gpu"])  # not supported under MIG
            got = g["mig_devices"]
            self.assertEqual(len(got), len(want["instances"]))
            for d, w in zip(got, want["instances"]):
                self.assertEqual(d["uuid"], w["uuid"])
                self.assertEqual(d["profile"], w["profile"])
                self.assertEqual(d["gpu_instance_id"], w["gi"])
                self.assertEqual(d["compute_instance_id"], w["ci"])
                self.assertEqual(d["memory_total"], w["memory_mib"] * MIB)
                self.assertIn("memory_used", d)
                self.assertIsInstance(d["index"], int)


class ListFaults(GpuctlTestCase):
    def test_lost_gpu_keeps_the_list_going(self):
        m = Machine("rtx4090-8")
        script = ('$NVSIM set -i 3 lost=1\n'
                  '$GPUCTL list --noheader\n'
                  'echo ---\n'
                  '$GPUCTL list --format csv --noheader\n'
                  'echo ---\n'
                  '$GPUCTL list --format json\n')
        r = sim_sh("rtx4090-8", script)
        self.assertOk(r)
        table, csv_text, js = r.out.split("---\n")
        rows = table.splitlines()
        self.assertEqual(len(rows), len(m), r)
        self.assertIn("lost", rows[3].split(), r)
        for i, row in enumerate(rows):
            if i != 3:
                self.assertNotIn("lost", row.split())
        csv_rows = [l.split(", ") for l in csv_text.splitlines()]
        self.assertEqual(len(csv_rows), len(m))
        self.assertEqual(len({len(x) for x in csv_rows}), 1, csv_text)
        self.assertEqual(csv_rows[3][0], "3")
        gpus = json.loads(js)["gpus"]
        self.assertEqual([g["lost"] for g in gpus], [i == 3 for i in range(len(m))])

    def test_lost_gpu_shows_its_bus_id(self):
        # issue 25, item 9: NVML answers GPU_IS_LOST to everything about a lost GPU (handle
        # included: sim/README.md), so its bus id comes from the driver's list,
        # /proc/driver/nvidia/gpus/<bus id>/information (nvsim exec writes the scenario's under
        # $GPUCTL_NVIDIA_PROC). Expected: the scenario file's bus ids.
        for name, lost in (("rtx4090-8", [3]), ("dgx-a100", [0, 5, 7])):
            with self.subTest(name=name):
                m = Machine(name)
                buses = [g["pci_bus_id"] for g in m.gpus]
                script = "".join("$NVSIM set -i %d lost=1\n" % i for i in lost) + (
                    '$GPUCTL list --noheader\necho ---\n'
                    '$GPUCTL list --format json\necho ---\n'
                    '$GPUCTL health || true\necho ---\n'
                    '$GPUCTL health --format json || true\necho ---\n'
                    '$GPUCTL info --format json\n')
                r = sim_sh(name, script)
                self.assertOk(r)
                table, lj, health, hj, ij = r.out.split("---\n")
                rows = table.splitlines()
                for i in lost:
                    self.assertTrue(rows[i].endswith("lost at %s" % buses[i]), rows[i])
                    self.assertIn("GPU %d  N/A  %s  FAIL\n" % (i, buses[i]), health)
                for doc in (json.loads(lj), json.loads(hj), json.loads(ij)):
                    self.assertEqual([g["pci_bus_id"] for g in doc["gpus"]], buses, doc)
                    self.assertEqual([g["lost"] for g in doc["gpus"]],
                                     [i in lost for i in range(len(m))], doc)

    def test_lost_gpu_bus_id_never_guessed(self):
        # the driver's list does not settle which file is the lost GPU's (empty, or a GPU NVML
        # does not see beside it): no bus id rather than a wrong one
        tmp = tempfile.mkdtemp(prefix="gpuctl-nvproc-")
        self.addCleanup(shutil.rmtree, tmp, True)
        for how in ("empty", "extra"):
            with self.subTest(how=how):
                setup = ""
                if how == "extra":
                    setup = ('cp -r "$GPUCTL_NVIDIA_PROC/gpus" %s/\n'
                             'mkdir %s/gpus/0000:ff:00.0\n'
                             'printf "Bus Location: \\t 0000:ff:00.0\\n" '
                             '> %s/gpus/0000:ff:00.0/information\n' % (tmp, tmp, tmp))
                r = sim_sh("rtx4090-8", setup + "$NVSIM set -i 3 lost=1\n"
                           "GPUCTL_NVIDIA_PROC=%s $GPUCTL list --format json\n" % tmp)
                self.assertOk(r)
                gpus = json.loads(r.out)["gpus"]
                self.assertIs(gpus[3]["lost"], True)
                self.assertIsNone(gpus[3]["pci_bus_id"], r)
                self.assertEqual(gpus[4]["pci_bus_id"], Machine("rtx4090-8").gpus[4]["pci_bus_id"])

    def test_not_supported_everywhere(self):
        script = ("$NVSIM fail '*' NOT_SUPPORTED\n"
                  "$GPUCTL list\n"
                  "$GPUCTL list --query index,temperature.gpu,power.draw --noheader\n")
        r = sim_sh("dgx-a100", script)
        self.assertOk(r)
        self.assertIn("N/A", r.out)
        self.assertIn("[N/A], [N/A]", r.out)

    def test_nvml_error_on_one_device(self):
        # An NVML error reading one GPU's temperature leaves that value unavailable; the other
        # GPUs and the exit status are untouched.
        script = ("$NVSIM fail nvmlDeviceGetTemperature UNKNOWN -i 1\n"
                  "$GPUCTL list --query index,temperature.gpu --noheader\n")
        r = sim_sh("dgx-a100", script)
        self.assertOk(r)
        m = Machine("dgx-a100")
        rows = [l.split(", ") for l in r.out.splitlines()]
        self.assertEqual(len(rows), len(m), r)
        self.assertEqual(rows[1][1], "[N/A]", r)
        self.assertEqual(rows[0][1], str(m.gpus[0]["temperature_c"]), r)


class ListUsage(GpuctlTestCase):
    def test_unknown_field(self):
        r = sim("dgx-a100", "list", "--query", "memory")
        # like every usage error: the command, the input, and where the help is
        self.assertOneLineError(r, EXIT_USAGE, "gpuctl: list: --query: unknown field 'memory'",
                                "(see 'gpuctl list --help')")

    def test_unknown_format_is_named_once(self):
        r = sim("dgx-a100", "list", "--format", "yaml")
        self.assertOneLineError(r, EXIT_USAGE, "list: --format: unknown format 'yaml' (")
        self.assertNotIn("in 'yaml'", r.err)
        r = sim("dgx-a100", "list", "--format", "csv,yaml")
        self.assertOneLineError(r, EXIT_USAGE, "unknown format 'yaml' in 'csv,yaml'")

    def test_unknown_field_without_driver(self):
        # A typo is a usage error even where there is no driver: NVML is not touched.
        r = gpuctl("list", "--query", "index,bogus.field",
                   env={"GPUCTL_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1"})
        self.assertOneLineError(r, EXIT_USAGE, "'bogus.field'")

    def test_bad_arguments(self):
        env = {"GPUCTL_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1"}
        for args, needle in ((["list", "--format", "xml"], "xml"),
                             (["list", "--format=csv,json"], "json"),
                             (["list", "--bogus"], "--bogus"),
                             (["list", "-x"], "-x"),
                             (["list", "-i"], "-i"),
                             (["list", "extra"], "extra"),
                             (["list", "--query", "index,,uuid"], "--query"),
                             (["list", "--query", ""], "--query")):
            r = gpuctl(*args, env=env)
            self.assertOneLineError(r, EXIT_USAGE, needle)


if __name__ == "__main__":
    unittest.main()
