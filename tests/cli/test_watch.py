"""gpuctl watch: nvidia-smi dmon's layout, groups, CSV and JSON lines, --procs, a GPU lost
mid-stream, SIGINT, NVML calls per interval, bad input.

Expected rows are not taken from gpuctl: they are computed here from the scenario files
(sim/scenarios/*.json) with the simulator's documented rules (sim/SCENARIO.md: defaults merge
into each GPU, utilisation is NOT_SUPPORTED with MIG enabled, ECC counters only with ECC on,
absent optional keys are NOT_SUPPORTED) and dmon's published format (two '#' header lines,
names then units; columns right-aligned in five characters after a space; '-' for a value the
GPU does not give)."""
import csv
import io
import json
import os
import re
import select
import signal
import subprocess
import tempfile
import time
import unittest

from gpuctl_test import (EXIT_USAGE, GPUCTL, NVSIM, GpuctlTestCase, run, scenario_gpus,
                         scenario_names, sim, sim_sh)

# dmon's groups, in dmon's order, with its header names and units (nvidia-smi dmon output as
# published; docs/metrics.md "gpuctl watch").
GROUPS = {
    "p": [("pwr", "W"), ("gtemp", "C"), ("mtemp", "C")],
    "u": [("sm", "%"), ("mem", "%"), ("enc", "%"), ("dec", "%")],
    "c": [("mclk", "MHz"), ("pclk", "MHz")],
    "v": [("pviol", "%"), ("tviol", "bool")],
    "m": [("fb", "MB"), ("bar1", "MB")],
    "e": [("sbecc", "errs"), ("dbecc", "errs"), ("pci", "errs")],
    "t": [("rxpci", "MB/s"), ("txpci", "MB/s")],
}
ORDER = "pucvmet"
MIB = 1 << 20


def expected_values(g, first_row=True):
    """Column name -> the integer dmon shows, or None for '-', from one merged scenario GPU."""
    mig_on = isinstance(g.get("mig"), dict) and g["mig"].get("enabled", False)
    ecc = g.get("ecc", False)
    ecc_on = isinstance(ecc, dict) and ecc.get("enabled", False)
    errs = g.get("ecc_errors", {})
    clocks = g.get("clocks_mhz")
    tp = g.get("pcie_throughput_kbs")
    v = {
        "pwr": (g["power_draw_mw"] + 500) // 1000 if "power_draw_mw" in g else None,
        "gtemp": g.get("temperature_c", 35),
        "mtemp": g.get("temperature_memory_c"),
        "sm": None if mig_on else g.get("utilization_gpu", 0),
        "mem": None if mig_on else g.get("utilization_memory", 0),
        "enc": g.get("utilization_encoder"),
        "dec": g.get("utilization_decoder"),
        "mclk": clocks["mem"] if clocks else None,
        "pclk": clocks["sm"] if clocks else None,
        "fb": g.get("memory_used_mib", 0),
        "bar1": g.get("bar1_used_mib", 0) if "bar1_total_mib" in g else None,
        "sbecc": errs.get("volatile_corrected", 0) if ecc_on else None,
        "dbecc": errs.get("volatile_uncorrected", 0) if ecc_on else None,
        "pci": g["pcie"].get("replay_counter", 0),
        "rxpci": tp["rx"] // 1024 if tp else None,
        "txpci": tp["tx"] // 1024 if tp else None,
    }
    # violations are over an interval: none on the first row
    pv, tv = g.get("violation_power_pct"), g.get("violation_thermal_pct")
    v["pviol"] = None if first_row or pv is None else pv
    v["tviol"] = None if first_row or tv is None else int(tv > 0)
    return v


def cell(x):
    return "%5s" % ("-" if x is None else x)


def expected_dmon(scenario, groups, rows=1):
    cols = [c for grp in ORDER if grp in groups for c in GROUPS[grp]]
    lines = ["# gpu" + "".join(" %5s" % n for n, _ in cols),
             "# Idx" + "".join(" %5s" % u for _, u in cols)]
    gpus = scenario_gpus(scenario)
    for r in range(rows):
        for i, g in enumerate(gpus):
            v = expected_values(g, first_row=(r == 0))
            lines.append("%5d" % i + "".join(" " + cell(v[n]) for n, _ in cols))
    return "\n".join(lines) + "\n"


class Layout(GpuctlTestCase):
    def test_dgx_a100_default_golden(self):
        # by hand from sim/scenarios/dgx-a100.json: 61 W, 30 C, no HBM sensor, idle, no video
        # engines reported, memory clock 1593 MHz, SM clock 210 MHz
        r = sim("dgx-a100", "watch", "-c", "1", "-i", "0,7")
        self.assertOk(r)
        self.assertEqual(r.out,
                         "# gpu   pwr gtemp mtemp    sm   mem   enc   dec  mclk  pclk\n"
                         "# Idx     W     C     C     %     %     %     %   MHz   MHz\n"
                         "    0    61    30     -     0     0     -     -  1593   210\n"
                         "    7    61    30     -     0     0     -     -  1593   210\n")
        self.assertEqual(r.err, "")

    def test_every_scenario_and_group(self):
        for scenario in scenario_names():
            for grp in ORDER:
                with self.subTest(scenario=scenario, group=grp):
                    r = sim(scenario, "watch", "-c", "1", "-s", grp)
                    self.assertOk(r)
                    self.assertEqual(r.out, expected_dmon(scenario, grp))

    def test_all_groups_two_rows(self):
        # the second row has the violations over the first interval
        for scenario in ("dgx-a100", "pcie-8gpu", "a100-mig", "rtx4090-8", "workstation-mixed"):
            with self.subTest(scenario=scenario):
                r = sim(scenario, "watch", "-c", "2", "-d", "0.2", "-s", "tempucv")
                self.assertOk(r)
                self.assertEqual(r.out, expected_dmon(scenario, "pucvmet", rows=2))

    def test_group_order_is_dmons(self):
        a = sim("dgx-a100", "watch", "-c", "1", "-s", "cp")
        b = sim("dgx-a100", "watch", "-c", "1", "-s", "pc")
        self.assertOk(a)
        self.assertEqual(a.out, b.out)
        self.assertTrue(a.out.startswith("# gpu   pwr gtemp mtemp  mclk  pclk\n"), a.out)

    def test_date_time_prefix(self):
        r = sim("dgx-a100", "watch", "-c", "1", "-i", "0", "-o", "DT", "-s", "p")
        self.assertOk(r)
        lines = r.out.splitlines()
        self.assertEqual(lines[0], "#Date     Time       gpu   pwr gtemp mtemp")
        self.assertEqual(lines[1], "#YYYYMMDD HH:MM:SS   Idx     W     C     C")
        m = re.fullmatch(r" (\d{8}) (\d\d:\d\d:\d\d)     0    61    30     -", lines[2])
        self.assertIsNotNone(m, lines[2])
        now = time.time()
        stamps = {time.strftime("%Y%m%d", time.localtime(now + d)) for d in (-60, 0)}
        self.assertIn(m.group(1), stamps)
        r = sim("dgx-a100", "watch", "-c", "1", "-i", "0", "-o", "T", "-s", "p")
        self.assertRegex(r.out.splitlines()[2], r"^ \d\d:\d\d:\d\d     0    61")


class Formats(GpuctlTestCase):
    def test_csv_same_values_with_units(self):
        r = sim("dgx-a100", "watch", "-c", "1", "-s", "pucvmet", "--format", "csv")
        self.assertOk(r)
        lines = r.out.splitlines()
        self.assertEqual(lines[0],
                         "gpu, pwr [W], gtemp [C], mtemp [C], sm [%], mem [%], enc [%], dec [%], "
                         "mclk [MHz], pclk [MHz], pviol [%], tviol [bool], fb [MiB], bar1 [MiB], "
                         "sbecc [errs], dbecc [errs], pci [errs], rxpci [MiB/s], txpci [MiB/s]")
        names = [n for grp in ORDER for n, _ in GROUPS[grp]]
        for i, g in enumerate(scenario_gpus("dgx-a100")):
            v = expected_values(g)
            want = [str(i)] + ["[N/A]" if v[n] is None else str(v[n]) for n in names]
            self.assertEqual(lines[1 + i].split(", "), want)

    def test_jsonl_same_values(self):
        r = sim("dgx-a100", "watch", "-c", "2", "-d", "0.1", "-s", "pucvmet", "--format", "jsonl",
                "-o", "D")
        self.assertOk(r)
        rows = [json.loads(l) for l in r.out.splitlines()]
        gpus = scenario_gpus("dgx-a100")
        self.assertEqual(len(rows), 2 * len(gpus))
        keys = {"pwr": "pwr_w", "gtemp": "gtemp_c", "mtemp": "mtemp_c", "sm": "sm_pct",
                "mem": "mem_pct", "enc": "enc_pct", "dec": "dec_pct", "mclk": "mclk_mhz",
                "pclk": "pclk_mhz", "pviol": "pviol_pct", "tviol": "tviol", "fb": "fb_mib",
                "bar1": "bar1_mib", "sbecc": "sbecc", "dbecc": "dbecc", "pci": "pci",
                "rxpci": "rxpci_mibps", "txpci": "txpci_mibps"}
        for k, row in enumerate(rows):
            i = k % len(gpus)
            v = expected_values(gpus[i], first_row=k < len(gpus))
            self.assertEqual(row["gpu"], i)
            self.assertEqual(row["uuid"], gpus[i]["uuid"])
            self.assertIs(row["lost"], False)
            self.assertRegex(row["date"], r"^\d{8}$")
            self.assertNotIn("time", row)
            for name, key in keys.items():
                self.assertEqual(row[key], v[name], (k, key))


class Procs(GpuctlTestCase):
    def test_pmon_rows(self):
        script = ('sleep 60 & p=$!; "$NVSIM" proc add --pid $p -i 1 --mem 2GiB --util 40; '
                  'echo "pid=$p"; "$GPUCTL" watch --procs -c 1 -i 0,1; '
                  '"$GPUCTL" watch --procs -c 1 -i 1 --format jsonl; kill $p')
        r = sim_sh("dgx-a100", script)
        self.assertOk(r)
        lines = r.out.splitlines()
        pid = int(lines[0].split("=")[1])
        self.assertEqual(lines[1], "# gpu        pid  type    sm   mem   enc   dec    fb   command")
        self.assertEqual(lines[2], "# Idx          #   C/G     %     %     %     %    MB   name")
        self.assertEqual(lines[3], "    0          -     -     -     -     -     -     -   -")
        # util 40 is the process's SM share; the simulator gives 0 for memory and video
        self.assertEqual(lines[4], "    1 %10d     C    40     0     0     0  2048   sleep" % pid)
        row = json.loads(lines[5])
        self.assertEqual((row["gpu"], row["pid"], row["type"], row["sm_pct"], row["fb_mib"],
                          row["command"]), (1, pid, "C", 40, 2048, "sleep"))

    def test_hostile_command_name(self):
        # a process name can hold anything: a newline must not forge a row, a comma must not
        # shift CSV columns
        with tempfile.TemporaryDirectory() as d:
            prog = os.path.join(d, 'sl,"e\np')
            os.symlink("/bin/sleep", prog)
            script = ('"$PROG" 60 & p=$!; "$NVSIM" proc add --pid $p -i 1 --mem 1GiB; '
                      '"$GPUCTL" watch --procs -c 1 -i 1; '
                      '"$GPUCTL" watch --procs -c 1 -i 1 --format csv; kill $p')
            r = sim_sh("dgx-a100", script, env={"PROG": prog})
        self.assertOk(r)
        lines = r.out.splitlines()
        self.assertEqual(len(lines), 5, r.out)
        self.assertTrue(lines[2].endswith('  1024   sl,"e?p'), lines[2])
        rows = list(csv.reader(io.StringIO("\n".join(lines[3:])), skipinitialspace=True))
        self.assertEqual(len(rows[1]), 9, rows)
        self.assertEqual(rows[1][8], 'sl,"e?p')

    def test_procs_rejects_groups(self):
        r = sim("dgx-a100", "watch", "--procs", "-s", "p", "-c", "1")
        self.assertOneLineError(r, EXIT_USAGE, "--procs")


class Stream(GpuctlTestCase):
    def start(self, state_dir, *args):
        self.pending = b""
        return subprocess.Popen([NVSIM, "exec", "--state-dir", state_dir, "dgx-a100", "--",
                                 GPUCTL, "watch", *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def read_lines(self, p, n, timeout=20):
        """The next n lines, as soon as gpuctl has written them (raw reads: no buffer of ours
        may hold lines select() cannot see)."""
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
        return [l.decode() + "\n" for l in lines[:n]]

    def finish(self, p):
        out, err = p.communicate(timeout=30)
        return (self.pending + out).decode(), err.decode()

    def change_between_intervals(self, p, state_dir, *nvsim_args):
        """Runs nvsim with the watch (nvsim exec p's child) stopped, so the change comes
        before its next interval however slowly nvsim starts on a loaded machine."""
        with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
            (watch,) = [int(x) for x in f.read().split()]
        os.kill(watch, signal.SIGSTOP)
        try:
            r = run([NVSIM, *nvsim_args], env={"NVSIM_STATE_DIR": state_dir})
        finally:
            os.kill(watch, signal.SIGCONT)
        self.assertOk(r)

    def test_gpu_lost_mid_stream(self):
        with tempfile.TemporaryDirectory() as d:
            p = self.start(d, "-i", "2,3", "-s", "pu", "-d", "1", "-c", "4")
            try:
                first = self.read_lines(p, 4)  # two header lines, then GPU 2 and 3
                self.assertIsNone(p.poll())    # flushed while still running
                self.change_between_intervals(p, d, "set", "-i", "3", "lost=1")
                out, err = self.finish(p)
            finally:
                p.kill()
        self.assertEqual(p.returncode, 0, err)
        rows = first[2:] + out.splitlines(True)
        self.assertEqual(len(rows), 8)
        values = "    61    30     -     0     0     -     -\n"
        lost = "     -" * 7 + "\n"
        for k in range(4):
            self.assertEqual(rows[2 * k], "    2" + values)  # the other GPU goes on
        self.assertEqual(rows[1], "    3" + values)
        # lost from the next interval on (the set came well before it), and stays lost
        for k in range(1, 4):
            self.assertEqual(rows[2 * k + 1], "    3" + lost)
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertRegex(err, r"^gpuctl: watch: GPU 3 \(GPU-[0-9a-f-]+\) is lost")

    def test_nvml_failing_mid_stream_ends_with_one_line(self):
        with tempfile.TemporaryDirectory() as d:
            p = self.start(d, "-i", "0", "-s", "p", "-d", "1", "-c", "5")
            try:
                first = self.read_lines(p, 3)
                self.change_between_intervals(p, d, "fail", "nvmlDeviceGetCount_v2", "UNKNOWN")
                out, err = self.finish(p)
            finally:
                p.kill()
        self.assertEqual(p.returncode, 1, err)
        self.assertEqual(first[2], "    0    61    30     -\n")
        self.assertEqual(out, "")  # no half interval
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertRegex(err, r"^gpuctl: watch: NVML: nvmlDeviceGetCount")

    def test_sigint_ends_cleanly(self):
        with tempfile.TemporaryDirectory() as d:
            p = self.start(d, "-i", "0", "-s", "p", "-d", "0.2")
            try:
                lines = self.read_lines(p, 4)  # header and two intervals
                p.send_signal(signal.SIGINT)   # nvsim exec forwards it
                out, err = self.finish(p)
            finally:
                p.kill()
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(err, "")
        for line in lines[2:] + out.splitlines(True):
            self.assertEqual(line, "    0    61    30     -\n")

    def test_count_bounds_rows(self):
        r = sim("dgx-a100", "watch", "-c", "3", "-d", "0.1", "-s", "c")
        self.assertOk(r)
        self.assertEqual(len(r.out.splitlines()), 2 + 3 * 8)


class Calls(GpuctlTestCase):
    def calls(self, *args):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "calls.json")
            r = run([NVSIM, "exec", "--calls-out", out, "dgx-a100", "--", GPUCTL, "watch", *args])
            self.assertOk(r)
            with open(out) as f:
                return json.load(f)["functions"]

    def test_an_interval_reads_only_what_it_prints(self):
        one = self.calls("-c", "1", "-d", "0.1")
        four = self.calls("-c", "4", "-d", "0.1")
        per = {f: (four.get(f, 0) - one.get(f, 0)) / 3 for f in set(one) | set(four)}
        per = {f: c for f, c in per.items() if c}
        # dgx-a100 supports power, temperature, utilisation and two clocks (no HBM sensor, no
        # video engine): 5 calls per GPU (the power draw in the field values, nvml-health.c),
        # and one device count that guards the kept handles; nothing else (no handles, no
        # identity)
        self.assertEqual(per, {"nvmlDeviceGetCount_v2": 1, "nvmlDeviceGetFieldValues": 8,
                               "nvmlDeviceGetTemperature": 8,
                               "nvmlDeviceGetUtilizationRates": 8, "nvmlDeviceGetClockInfo": 16})


class BadInput(GpuctlTestCase):
    def test_usage_errors(self):
        for args, needle in ((["-s", "x"], "'x'"), (["-s", "pp"], "twice"), (["-s", ""], "-s"),
                             (["-d", "0"], "'0'"), (["-d", "abc"], "'abc'"),
                             (["-d", "1e3"], "'1e3'"), (["-c", "0"], "'0'"),
                             (["-c", "-1"], "'-1'"), (["-o", "X"], "'X'"), (["-o", "DD"], "'DD'"),
                             (["--format", "xml"], "'xml'"), (["-i", "99"], "99"),
                             (["extra"], "'extra'"), (["--bogus"], "--bogus")):
            with self.subTest(args=args):
                r = sim("dgx-a100", "watch", "-c", "1", *args)
                self.assertOneLineError(r, EXIT_USAGE, needle)
                self.assertEqual(r.out, "")


if __name__ == "__main__":
    unittest.main()
