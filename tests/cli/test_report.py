"""gpuctl report (docs/ledger.md, docs/gpuctl.1): a ledger written by build/tests/ledger-writer
(the public API, standing in for the agent) from a schedule this test makes, and the report of it
in each format and grouping, clipped to windows, with bad input, no ledger, and a report taken
while a writer writes.

Expected values are computed by hand below from the schedule and the rule docs/ledger.md states
(a sample's values hold until the next sample), never from gpuctl's output."""
import csv
import io
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import unittest

from gpuctl_test import BUILD, GpuctlTestCase, gpuctl

WRITER = os.path.join(BUILD, "tests", "ledger-writer")
EXIT_USAGE, EXIT_FAILURE, EXIT_NOLEDGER = 2, 1, 8

W0 = 1704067200  # 2024-01-01T00:00:00Z
DAY = 86400
POWER_MJ_S = 100000  # GPU-A draws 100 W: its energy counter climbs 100,000 mJ a second


def schedule():
    """The samples: (wall, [observation line fields]).

    alice: lease 10:1 on GPU-A (pool p0, group ml, workload slurm:1, waited 60 s), samples every
      600 s from W0 to W0+3600, 100 % until W0+1800 and 0 % after, released at W0+3600:
      3600 GPU-s, 1800 busy; energy 100 W x 3600 s = 0.1 kWh.
    bob: workload pod:b on GPU-B (pool p1, group cv), no energy counter, seen W0+1800 to W0+5400
      at 50 %, gone at the sample of W0+6000: 4200 GPU-s, all busy.
    carol: lease 11:1 on GPU-A and GPU-B (pool p0, group ml, workload slurm:2, waited 120 s),
      W0+DAY to W0+DAY+3600 at 5 % (idle), exits at W0+DAY+3600: 2 x 3600 GPU-s, none busy;
      energy from GPU-A only, 0.1 kWh."""
    samples = {}

    def add(t, line):
        samples.setdefault(t, []).append(line)

    for t in range(0, 3601, 600):
        util = 100 if t < 1800 else 0
        end = 3 if t == 3600 else 0  # GPUCTL_LEDGER_END_RELEASE
        add(W0 + t, f"obs lease 10:1 alice ml slurm:1 p0 GPU-A {util} 1000 {t * POWER_MJ_S} 60 {end}")
    for t in range(1800, 5401, 600):
        add(W0 + t, "obs workload pod:b bob cv pod:b p1 GPU-B 50 2000 -1 -1 0")
    samples.setdefault(W0 + 6000, [])
    for t in range(DAY, DAY + 3601, 600):
        end = 2 if t == DAY + 3600 else 0  # GPUCTL_LEDGER_END_EXIT
        add(W0 + t, f"obs lease 11:1 carol ml slurm:2 p0 GPU-A 5 3000 {t * POWER_MJ_S} 120 {end}")
        add(W0 + t, f"obs lease 11:1 carol ml slurm:2 p0 GPU-B 5 3000 -1 120 {end}")
    text = ""
    for t in sorted(samples):
        text += f"sample {t} {t - W0}\n" + "".join(l + "\n" for l in samples[t])
    return text


H = 3600.0
# by user over everything: (gpu_h, busy_h, jobs, waits, wait_mean, wait_p95, kwh)
BY_USER = {
    "alice": (1.0, 0.5, 1, 1, 60.0, 60.0, 0.1),
    "bob": (4200 / H, 4200 / H, 1, 0, None, None, None),
    "carol": (2.0, 0.0, 1, 1, 120.0, 120.0, 0.1),
}
TOTAL = (1.0 + 4200 / H + 2.0, 0.5 + 4200 / H, 3, 2, 90.0, 120.0, 0.2)
BY = {
    "user": BY_USER,
    "group": {"ml": (3.0, 0.5, 2, 2, 90.0, 120.0, 0.2),
              "cv": (4200 / H, 4200 / H, 1, 0, None, None, None)},
    "pool": {"p0": (3.0, 0.5, 2, 2, 90.0, 120.0, 0.2),
             "p1": (4200 / H, 4200 / H, 1, 0, None, None, None)},
    "workload": {"slurm:1": BY_USER["alice"], "pod:b": BY_USER["bob"],
                 "slurm:2": BY_USER["carol"]},
    # carol is a job of each of her GPUs
    "gpu": {"GPU-A": (2.0, 0.5, 2, 2, 90.0, 120.0, 0.2),
            "GPU-B": (7800 / H, 4200 / H, 2, 1, 120.0, 120.0, None)},
    "day": {"2024-01-01": (7800 / H, 0.5 + 4200 / H, 2, 1, 60.0, 60.0, 0.1),
            "2024-01-02": (2.0, 0.0, 1, 1, 120.0, 120.0, 0.1)},
}


class ReportTest(GpuctlTestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gpuctl-report-")
        cls.db = os.path.join(cls.tmp, "ledger.db")
        p = subprocess.run([WRITER, "script", cls.db], input=schedule(), text=True,
                           capture_output=True, timeout=60)
        assert p.returncode == 0, p.stderr

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def report(self, *args, env=None):
        return gpuctl("report", "--ledger", self.db, "--since", "2024-01-01", "--until",
                      "2024-02-01", *args, env=env)

    def check_json_group(self, g, want):
        gpu_h, busy_h, jobs, waits, mean, p95, kwh = want
        self.assertAlmostEqual(g["gpu_hours"], gpu_h, places=9, msg=g)
        self.assertAlmostEqual(g["busy_gpu_hours"], busy_h, places=9, msg=g)
        self.assertAlmostEqual(g["idle_gpu_hours"], gpu_h - busy_h, places=9, msg=g)
        if gpu_h:
            self.assertAlmostEqual(g["efficiency"], busy_h / gpu_h, places=9, msg=g)
        else:
            self.assertIsNone(g["efficiency"])
        self.assertEqual(g["jobs"], jobs, g)
        self.assertEqual(g["waits"], waits, g)
        for key, v in (("wait_mean_s", mean), ("wait_p95_s", p95), ("kwh", kwh)):
            if v is None:
                self.assertIsNone(g[key], (key, g))
            else:
                self.assertAlmostEqual(g[key], v, places=9, msg=(key, g))

    def test_json_each_grouping(self):
        for by, want in BY.items():
            with self.subTest(by=by):
                r = self.report("--by", by, "--format", "json")
                self.assertOk(r)
                doc = r.json()
                self.assertEqual(doc["by"], by)
                self.assertEqual(doc["since"], "2024-01-01T00:00:00Z")
                self.assertEqual(doc["until"], "2024-02-01T00:00:00Z")
                self.assertEqual([g["key"] for g in doc["groups"]], sorted(want))
                for g in doc["groups"]:
                    self.check_json_group(g, want[g["key"]])
                self.check_json_group(doc["total"], TOTAL)

    def test_default_is_by_user_table(self):
        r = self.report()
        self.assertOk(r)
        lines = r.out.splitlines()
        self.assertEqual(lines[0].split(), ["USER", "GPU-HOURS", "BUSY", "IDLE", "EFFICIENCY",
                                            "JOBS", "WAIT-MEAN", "WAIT-P95", "KWH"])
        rows = {l.split()[0]: l.split()[1:] for l in lines[1:]}
        self.assertEqual(rows["alice"], ["1.00", "0.50", "0.50", "50%", "1", "60s", "60s", "0.10"])
        self.assertEqual(rows["bob"], ["1.17", "1.17", "0.00", "100%", "1", "N/A", "N/A", "N/A"])
        self.assertEqual(rows["carol"], ["2.00", "0.00", "2.00", "0%", "1", "120s", "120s", "0.10"])
        self.assertEqual(rows["total"], ["4.17", "1.67", "2.50", "40%", "3", "90s", "120s", "0.20"])
        self.assertEqual(list(rows), ["alice", "bob", "carol", "total"])

    def test_csv(self):
        r = self.report("--by", "gpu", "--format", "csv")
        self.assertOk(r)
        rows = list(csv.reader(io.StringIO(r.out)))
        self.assertEqual(rows[0], ["gpu", "gpu_hours", "busy_gpu_hours", "idle_gpu_hours",
                                   "efficiency", "jobs", "wait_mean_s", "wait_p95_s", "kwh"])
        got = {row[0]: row[1:] for row in rows[1:]}
        self.assertEqual(sorted(got), ["GPU-A", "GPU-B"])
        a, b = got["GPU-A"], got["GPU-B"]
        self.assertAlmostEqual(float(a[0]), 2.0, places=6)
        self.assertAlmostEqual(float(b[0]), 7800 / H, places=6)
        self.assertAlmostEqual(float(b[3]), 4200 / 7800, places=4)
        self.assertEqual(a[4], "2")
        self.assertEqual(b[7], "")  # no energy counter on GPU-B: empty
        self.assertAlmostEqual(float(a[7]), 0.2, places=6)

    def test_windows_clip(self):
        # from 01:00 on the first day: bob's [01:00, 01:40] only (alice ended at 01:00)
        r = gpuctl("report", "--ledger", self.db, "--since", "2024-01-01T01:00:00Z",
                   "--until", "2024-01-02", "--format", "json")
        self.assertOk(r)
        groups = {g["key"]: g for g in r.json()["groups"]}
        self.assertEqual(list(groups), ["bob"])
        self.assertAlmostEqual(groups["bob"]["gpu_hours"], 2400 / H, places=9)
        # until 01:00 (an offset: 02:00+01:00 is 01:00Z): alice whole, bob's [00:30, 01:00]
        r = gpuctl("report", "--ledger", self.db, "--since", "2023-12-31",
                   "--until", "2024-01-01T02:00+01:00", "--format", "json")
        self.assertOk(r)
        groups = {g["key"]: g for g in r.json()["groups"]}
        self.assertEqual(sorted(groups), ["alice", "bob"])
        self.assertAlmostEqual(groups["alice"]["gpu_hours"], 1.0, places=9)
        self.assertAlmostEqual(groups["bob"]["gpu_hours"], 0.5, places=9)
        # the last hour: nothing was recorded then (the schedule is in 2024)
        r = gpuctl("report", "--ledger", self.db, "--since", "-1h", "--format", "json")
        self.assertOk(r)
        doc = r.json()
        self.assertEqual(doc["groups"], [])
        self.assertEqual(doc["total"]["gpu_hours"], 0)
        self.assertIsNone(doc["total"]["efficiency"])
        r = gpuctl("report", "--ledger", self.db, "--since", "-1h")
        self.assertOk(r)
        self.assertEqual(r.out.splitlines()[1].split()[:5], ["total", "0.00", "0.00", "0.00", "N/A"])
        # the default window is everything up to now
        r = gpuctl("report", "--ledger", self.db, "--format", "json")
        self.assertOk(r)
        self.assertAlmostEqual(r.json()["total"]["gpu_hours"], TOTAL[0], places=9)

    def test_path_from_env_and_configuration(self):
        r = gpuctl("report", "--format", "json", env={"GPUCTL_LEDGER": self.db})
        self.assertOk(r)
        self.assertEqual(r.json()["ledger"], self.db)
        conf = os.path.join(self.tmp, "gpuctl.conf")
        with open(conf, "w") as f:
            f.write(f"ledger = {self.db}\n")
        env = {"GPUCTL_CONFIG": conf}
        r = subprocess.run([os.path.join(BUILD, "bin", "gpuctl"), "report", "--format", "json"],
                           env={k: v for k, v in {**os.environ, **env}.items()
                                if k != "GPUCTL_LEDGER"},
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(json.loads(r.stdout)["ledger"], self.db)
        # --ledger comes first
        r = gpuctl("report", "--ledger", os.path.join(self.tmp, "other.db"),
                   env={"GPUCTL_LEDGER": self.db})
        self.assertOneLineError(r, EXIT_NOLEDGER, "other.db")

    def test_bad_input(self):
        for args, needles in (
                (["--since", "yesterday"], ["--since", "'yesterday'"]),
                (["--until", "2024-02-30"], ["--until", "'2024-02-30'", "no such date"]),
                (["--since", "2024-01-01T25:00"], ["'2024-01-01T25:00'", "no such time"]),
                (["--since", "-7y"], ["'-7y'", "unit"]),
                (["--since", "-d"], ["'-d'"]),
                (["--since", ""], ["--since", "empty"]),
                (["--by", "colour"], ["--by", "'colour'"]),
                (["--format", "xml"], ["'xml'"]),
                (["--since", "now", "--until", "-1d"], ["--until '-1d'", "--since 'now'"]),
                (["--ledger", ""], ["--ledger"]),
                (["extra"], ["'extra'"]),
                (["--bogus"], ["--bogus"])):
            with self.subTest(args=args):
                r = gpuctl("report", "--ledger", self.db, *args)
                self.assertOneLineError(r, EXIT_USAGE, *needles)
                self.assertEqual(r.out, "")

    def test_no_ledger(self):
        missing = os.path.join(self.tmp, "nowhere", "ledger.db")
        r = gpuctl("report", "--ledger", missing)
        self.assertOneLineError(r, EXIT_NOLEDGER, f"'{missing}'", "no agent has written one yet")
        self.assertFalse(os.path.exists(missing))
        # the test environment's $GPUCTL_LEDGER names none either
        r = gpuctl("report")
        self.assertOneLineError(r, EXIT_NOLEDGER, "no agent has written one yet")

    def test_newer_schema_and_not_a_ledger(self):
        newer = os.path.join(self.tmp, "newer.db")
        shutil.copy(self.db, newer)
        c = sqlite3.connect(newer)
        c.execute("PRAGMA user_version = 99")
        c.commit()
        c.close()
        r = gpuctl("report", "--ledger", newer)
        self.assertOneLineError(r, EXIT_FAILURE, "newer.db", "schema version 99", "newer")
        junk = os.path.join(self.tmp, "junk.db")
        with open(junk, "w") as f:
            f.write("not a database\n" * 100)
        r = gpuctl("report", "--ledger", junk)
        self.assertOneLineError(r, EXIT_FAILURE, "junk.db")

    def test_schema_readable_with_sqlite(self):
        # docs/ledger.md's schema, read with Python's sqlite3 as an admin would
        c = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        rows = c.execute("SELECT user, gpus, end_reason, gpu_s, busy_s, wait_s, peak_mem"
                         " FROM records ORDER BY start_s").fetchall()
        c.close()
        self.assertEqual(rows, [("alice", "GPU-A", "release", 3600.0, 1800.0, 60.0, 1000),
                                ("bob", "GPU-B", "gone", 4200.0, 4200.0, None, 2000),
                                ("carol", "GPU-A,GPU-B", "exit", 7200.0, 0.0, 120.0, 3000)])

    def test_default_until_is_now_to_the_fraction_of_a_second(self):
        """The default window ends now, not at the last whole second: a record whose last
        interval ended 0.3 s ago counts whole (it lost up to a second a GPU before)."""
        import time
        while not 0.6 <= time.time() % 1 <= 0.7:
            time.sleep(0.01)
        now = time.time()
        db = os.path.join(self.tmp, "recent.db")
        text = ("sample %r 0\nobs lease 12:1 dave ml - p0 GPU-A 50 1 -1 0 0\n"
                "sample %r 1.2\nobs lease 12:1 dave ml - p0 GPU-A 50 1 -1 0 3\n"
                % (now - 1.5, now - 0.3))
        p = subprocess.run([WRITER, "script", db], input=text, text=True, capture_output=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        r = gpuctl("report", "--ledger", db, "--format", "json")
        self.assertOk(r)
        self.assertAlmostEqual(r.json()["total"]["gpu_hours"] * 3600, 1.2, places=6)

    def test_report_while_writing(self):
        db = os.path.join(self.tmp, "live.db")
        w = subprocess.Popen([WRITER, "loop", db, str(W0)], stdout=subprocess.PIPE)
        try:
            # two samples committed: the first interval is in the ledger
            self.assertTrue(w.stdout.readline() and w.stdout.readline())
            for _ in range(20):
                r = gpuctl("report", "--ledger", db, "--since", "2023-12-31", "--format", "json")
                self.assertOk(r)
                total = r.json()["total"]
                self.assertEqual(total["jobs"], 2)
                self.assertGreaterEqual(total["gpu_hours"], 0)
            self.assertIsNone(w.poll())  # it was writing all along
        finally:
            w.kill()
            w.wait()
            w.stdout.close()


if __name__ == "__main__":
    unittest.main()
