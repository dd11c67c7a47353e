"""Quotas (docs/config.md "Quotas"; issue 28 point 3): GPUs held at once, lease length and GPU-hours
a day or a week, per pool, per user and per group, enforced by select-and-lease under select.lock:
`select --hold` and `--wait` refuse with exit 9 (docs/gpuctl.1 EXIT STATUS) and one line naming the
quota, what is used and when it frees; racing requests of one user cannot both pass; a waiter over
its quota waits and is served once it frees; the Python package raises QuotaError with the same line.
`gpuctl quota` shows each pool's limits (from the file the test writes), the devices held (the
holds the test takes) and the GPU-hours of the day and the week (from ledger records the test
writes, summed by hand, the windows from Python's calendar), says so where the ledger cannot be
read, and shows a quota used up exactly when select or run is refused with exit 9.

Two throwaway users and a throwaway group (useradd/groupadd, removed after the class), a root-owned
shared lease directory that follows the test's configuration file, and a ledger written by
build/tests/ledger-writer with a schedule the test makes. Expected values come from the
configuration, the schedule, docs/config.md and the scenario file (dgx-a100: 8 GPUs)."""
import datetime
import json
import os
import re
import subprocess
import sys
import time
import unittest

import test_exporter as tx
from gpuctl_test import (BUILD, EXIT_FAILURE, EXIT_NODRIVER, EXIT_USAGE, GPUCTL, LIBGPUCTL, PYDIR,
                         SIMLIB, python_env, run)
from test_leases import UUIDS, TwoUserCase

EXIT_QUOTA = 9  # docs/gpuctl.1 EXIT STATUS
WRITER = os.path.join(BUILD, "tests", "ledger-writer")


class Quotas(TwoUserCase):
    PREFIX = "gpuctlq"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.group = cls.PREFIX + "g%d" % os.getpid()
        subprocess.run(["groupadd", cls.group], check=True, capture_output=True)
        cls.made_group = True
        # user A is in the group, B is not
        subprocess.run(["usermod", "-aG", cls.group, cls.users[0]], check=True,
                       capture_output=True)

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        if getattr(cls, "made_group", False):
            subprocess.run(["groupdel", cls.group], capture_output=True)

    def setUp(self):
        self.conf = os.path.join(self.tmp, "gpuctl.conf")
        self.ledger = os.path.join(self.tmp, "ledger.db")
        for f in (self.ledger, self.ledger + "-wal", self.ledger + "-shm"):
            if os.path.exists(f):
                os.unlink(f)

    def configure(self, text):
        """The configuration file (root's, 0644) and a fresh shared lease directory that follows
        it (`lease init` records it)."""
        if "ledger =" not in text:
            # never the machine's ledger (/var/lib/gpuctl): a scratch path with none there
            text = "ledger = %s.none\n%s" % (self.ledger, text)
        with open(self.conf, "w") as f:
            f.write(text)
        os.chmod(self.conf, 0o644)
        self.make_shared_dir()
        self.env["GPUCTL_CONFIG"] = self.conf
        r = run([GPUCTL, "--config", self.conf, "lease", "init", "--lease-dir", self.dir],
                env=self.env)
        self.assertEqual(r.rc, 0, r)

    def hold(self, user, n=1, secs=600, *args):
        return self.as_user(user, "select", "-n", str(n), "--hold", str(secs), *args)

    def held_indices(self, r):
        uuids = r.out.strip().split("=", 1)[1].split(",")
        return sorted(UUIDS.index(u) for u in uuids)

    def assertQuota(self, r, pattern):
        self.assertEqual(r.rc, EXIT_QUOTA, r)
        lines = r.err.splitlines()
        self.assertEqual(len(lines), 1, r)
        self.assertRegex(lines[0], "^gpuctl: select: " + pattern + "$")

    # ---- (a) GPUs held at once ----

    def test_racing_holds_of_one_user_pass_the_quota_exactly(self):
        a, b = self.users
        self.configure("quota_gpus = 2, %s:unlimited\n" % b)
        procs = [subprocess.Popen(
            ["setpriv", "--reuid", str(self.uid[a]), "--regid", str(self.gid[a]), "--init-groups",
             GPUCTL, "select", "-n", "1", "--hold", "600"],
            env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(8)]
        results = [(p.wait(60), p.stdout.read(), p.stderr.read()) for p in procs]
        for p in procs:
            p.stdout.close()
            p.stderr.close()
        ok = [res for res in results if res[0] == 0]
        refused = [res for res in results if res[0] == EXIT_QUOTA]
        self.assertEqual(len(ok), 2, results)
        self.assertEqual(len(refused), 6, results)
        for _, _, err in refused:
            self.assertRegex(
                err.strip(),
                r"^gpuctl: select: pool 'default': quota of 2 GPUs at once for user %s: "
                r"2 held \(GPU \d,\d\), 1 asked for; frees when one is released$" % a)
        # B's requests are not A's: 6 GPUs are left and B may take them all
        r = self.hold(b, 6)
        self.assertEqual(r.rc, 0, r)

    def test_user_group_and_pool_entries(self):
        a, b = self.users
        self.configure("quota_gpus = 1, %s:3, @%s:2\n"
                       "[pool p]\ngpus = 6-7\nquota_gpus = 0, %s:unlimited\n"
                       % (b, self.group, a))
        # A is in the group: 2 in the default pool (GPUs 0-5)
        self.assertEqual(self.hold(a, 2).rc, 0)
        self.assertQuota(self.hold(a, 1),
                         r"pool 'default': quota of 2 GPUs at once for user %s: 2 held "
                         r"\(GPU \d,\d\), 1 asked for; frees when one is released" % a)
        # B's own entry: 3
        self.assertEqual(self.hold(b, 3).rc, 0)
        self.assertQuota(self.hold(b, 1),
                         r"pool 'default': quota of 3 GPUs at once for user %s: 3 held "
                         r"\(GPU \d,\d,\d\), 1 asked for; frees when one is released" % b)
        # the pool replaces the key: B may hold none there, A any number
        self.assertQuota(self.hold(b, 1, 600, "--pool", "p"),
                         r"pool 'p': quota of 0 GPUs at once for user %s: 1 asked for, more "
                         r"than the quota: can never be satisfied" % b)
        r = self.hold(a, 2, 600, "--pool", "p")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(self.held_indices(r), [6, 7])

    def test_wait_over_quota_is_served_after_a_release_and_blocks_no_one(self):
        a, b = self.users
        self.configure("quota_gpus = 1, %s:unlimited\n" % b)
        r = self.hold(a, 1)
        self.assertEqual(r.rc, 0, r)
        first = self.held_indices(r)[0]
        e = dict(self.env)
        waiter = subprocess.Popen(
            ["setpriv", "--reuid", str(self.uid[a]), "--regid", str(self.gid[a]), "--init-groups",
             GPUCTL, "select", "-n", "1", "--hold", "600", "--wait=60"],
            env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(1.5)
            self.assertIsNone(waiter.poll(), "the waiter over its quota did not wait")
            # B, behind A's waiter in line, is not held back by it: 7 GPUs are free
            r = self.hold(b, 7)
            self.assertEqual(r.rc, 0, r)
            self.assertIsNone(waiter.poll())
            # B lets one go; A's waiter is still over its quota
            r = self.as_user(b, "release", "--all")
            self.assertEqual(r.rc, 0, r)
            time.sleep(1.0)
            self.assertIsNone(waiter.poll())
            # A releases its hold: the waiter is served
            r = self.as_user(a, "release", "-i", str(first))
            self.assertEqual(r.rc, 0, r)
            out, err = waiter.communicate(timeout=30)
        finally:
            if waiter.poll() is None:
                waiter.kill()
                waiter.communicate()
        self.assertEqual(waiter.returncode, 0, err)
        self.assertRegex(out.strip(), r"^CUDA_VISIBLE_DEVICES=GPU-")

    def test_removing_ones_own_records_does_not_lower_the_count(self):
        a, _ = self.users
        self.configure("quota_gpus = 1\n")
        self.assertEqual(self.hold(a, 1).rc, 0)
        owners = os.path.join(self.dir, "owners", str(self.uid[a]))
        names = os.listdir(owners)
        self.assertEqual(len(names), 1, names)
        r = self.as_user(a, cmd=["rm", "-f", os.path.join(owners, names[0])])
        self.assertEqual(r.rc, 0, r)
        self.assertQuota(self.hold(a, 1),
                         r"pool 'default': quota of 1 GPU at once for user %s: 1 held "
                         r"\(GPU \d\), 1 asked for; frees when it is released" % a)

    def test_run_is_refused_with_the_same_line(self):
        a, _ = self.users
        self.configure("quota_gpus = 1\n")
        self.assertEqual(self.hold(a, 1).rc, 0)
        r = self.as_user(a, "run", "-n", "1", "--", "true")
        self.assertEqual(r.rc, EXIT_QUOTA, r)
        self.assertRegex(r.err.strip(),
                         r"^gpuctl: run: pool 'default': quota of 1 GPU at once for user %s: "
                         r"1 held \(GPU \d\), 1 asked for; frees when it is released$" % a)

    # ---- (b) lease length ----

    def test_hold_longer_than_the_lease_length_quota_is_refused(self):
        a, b = self.users
        self.configure("quota_lease_length = 1h, %s:unlimited\n" % b)
        self.assertQuota(self.hold(a, 1, 3601),
                         r"pool 'default': quota of 3600 s a lease for user %s: 3601 s asked "
                         r"for: can never be satisfied" % a)
        self.assertEqual(self.hold(a, 1, 3600).rc, 0)
        self.assertEqual(self.hold(b, 1, 86400).rc, 0)

    def test_agent_takes_back_a_run_lease_older_than_the_quota(self):
        a, _ = self.users
        self.configure("quota_lease_length = 2s\n")
        ag = tx.Exporter("dgx-a100", command="agent", interval="0.1",
                         args=["--ledger", os.path.join(self.tmp, "agent.db"), "--lease-dir",
                               self.dir], env={"GPUCTL_CONFIG": self.conf})
        self.addCleanup(ag.close)
        ag.start()
        os.chmod(ag.tmp, 0o755)  # the simulator's state, read by the user's gpuctl
        env = {"NVSIM_STATE_DIR": ag.state, "GPUCTL_NVML_LIBRARY": SIMLIB}
        job = subprocess.Popen(
            ["setpriv", "--reuid", str(self.uid[a]), "--regid", str(self.gid[a]), "--init-groups",
             GPUCTL, "run", "-n", "1", "--only", "5", "--", "sleep", "60"],
            env=tx.test_env(dict(self.env, **env)), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        self.addCleanup(job.wait)
        self.addCleanup(job.kill)
        t0 = time.monotonic()
        took = []
        while time.monotonic() < t0 + 20 and not took:
            took = [l for l in ag.stderr().splitlines() if "agent: took back GPU 5 " in l]
            time.sleep(0.1)
        self.assertEqual(len(took), 1, ag.stderr())
        self.assertGreaterEqual(time.monotonic() - t0, 1.0)  # leased_since is whole seconds
        self.assertTrue(took[0].endswith(": leased for more than 2s (quota_lease_length of pool "
                                         "default for user %s)" % a), took)
        self.assertIsNone(job.poll())  # the job runs on (docs/leases.md "Quotas")

    def test_failover_at_the_quota_replaces_the_lease(self):
        # docs/leases.md "Quotas": a failover's replacement does not count the lease it replaces
        a, _ = self.users
        self.configure("quota_gpus = 2\n")
        ag = tx.Exporter("dgx-a100", command="agent", interval="0.1",
                         args=["--ledger", os.path.join(self.tmp, "agent.db"), "--lease-dir",
                               self.dir], env={"GPUCTL_CONFIG": self.conf})
        self.addCleanup(ag.close)
        ag.start()
        os.chmod(ag.tmp, 0o755)
        env = tx.test_env(dict(self.env, NVSIM_STATE_DIR=ag.state, GPUCTL_NVML_LIBRARY=SIMLIB))
        job = subprocess.Popen(
            ["setpriv", "--reuid", str(self.uid[a]), "--regid", str(self.gid[a]), "--init-groups",
             GPUCTL, "run", "-n", "2", "--only", "0,1,2", "--retry", "1", "--grace", "1", "--",
             "sleep", "60"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.addCleanup(job.wait)
        self.addCleanup(job.kill)

        def leased():
            r = run([GPUCTL, "ps", "--format", "json"], env=env)
            return sorted(d["index"] for d in r.json()["devices"] if d["state"] == "leased")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len(leased()) != 2:
            time.sleep(0.05)
        held = leased()
        self.assertEqual(len(held), 2, held)
        ag.nvsim("set", "-i", str(held[0]), "lost=1")
        want = sorted({0, 1, 2} - {held[0]})
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and leased() != want and job.poll() is None:
            time.sleep(0.05)
        self.assertIsNone(job.poll(), job.stderr.read() if job.poll() is not None else "")
        self.assertEqual(leased(), want)

    # ---- (c) GPU-hours from the ledger ----

    def write_ledger(self, user, seconds, gpus=2):
        """user's lease on GPUs 0..gpus-1 for `seconds`, ending now: gpus * seconds GPU-s."""
        now = int(time.time())
        t0 = now - seconds - 1
        day0 = now - now % 86400
        if t0 < day0:
            self.skipTest("too close to 00:00 UTC for a usage of today")
        self.write_records([(user, list(range(gpus)), t0, seconds)])

    def write_records(self, records):
        """Leases [(user, [GPU index], start, seconds)], one after the other (they must not
        overlap in time): each seen at its start and ended ("exit") `seconds` later, so each is
        len(GPUs) * seconds GPU-seconds (docs/ledger.md, "Integration")."""
        lines = ""
        base = min(r[2] for r in records) - 1
        for k, (user, gpus, t0, seconds) in enumerate(sorted(records, key=lambda r: r[2])):
            for t, end in ((t0, 0), (t0 + seconds, 2)):
                lines += "sample %d %d\n" % (t, t - base)
                for g in gpus:
                    lines += "obs lease 99:%d %s - - - %s 50 1000 -1 -1 %d\n" % (
                        k + 1, user, UUIDS[g], end)
        r = run([WRITER, "script", self.ledger], input=lines)
        self.assertEqual(r.rc, 0, r)
        for f in (self.ledger, self.ledger + "-wal", self.ledger + "-shm"):
            if os.path.exists(f):
                os.chmod(f, 0o644)

    def test_gpu_hours_a_day_counted_from_the_ledger(self):
        a, b = self.users
        # 2 GPUs for 90 s: 0.05 GPU-hours today
        self.write_ledger(a, 90)
        self.configure("ledger = %s\nquota_gpu_hours_day = 0.05, %s:1\n" % (self.ledger, b))
        self.assertQuota(self.hold(a, 1, 60),
                         r"pool 'default': quota of 0.05 GPU-hours a day for user %s: 0.05 "
                         r"used; resets at 00:00 UTC" % a)
        # B used nothing: within its own quota, but a hold of 2 GPUs for an hour is 2 GPU-hours
        self.assertQuota(self.hold(b, 2, 3600),
                         r"pool 'default': quota of 1 GPU-hours a day for user %s: 0 used, 2 "
                         r"more asked for \(2 GPUs for 3600 s\); resets at 00:00 UTC" % b)
        self.assertEqual(self.hold(b, 2, 1800).rc, 0)

    def test_gpu_hours_a_week_and_without_a_ledger(self):
        a, _ = self.users
        self.write_ledger(a, 90)
        self.configure("ledger = %s\nquota_gpu_hours_week = 0.04\n" % self.ledger)
        self.assertQuota(self.hold(a, 1, 60),
                         r"pool 'default': quota of 0.04 GPU-hours a week for user %s: 0.05 "
                         r"used; resets Monday 00:00 UTC" % a)
        # no ledger at the path: the hour quotas are not enforced
        self.configure("ledger = %s\nquota_gpu_hours_week = 0.04\n" % (self.ledger + ".none"))
        self.assertEqual(self.hold(a, 1, 60).rc, 0)

    # ---- (d) `gpuctl quota`: the quotas and what counts against them, before a refusal ----

    def quota(self, user=None, *args):
        """`gpuctl quota --format json` as user (None: root), parsed; its rows by pool."""
        argv = ["quota", "--format", "json", *args]
        r = self.as_user(user, *argv) if user else run([GPUCTL, *argv], env=self.env)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.err, "", r)
        doc = json.loads(r.out)
        self.assertEqual(doc["version"], 1)
        return doc, {p["pool"]: p for p in doc["pools"]}

    def quota_table(self, user=None, *args):
        r = self.as_user(user, "quota", *args) if user else run([GPUCTL, "quota", *args],
                                                               env=self.env)
        self.assertEqual(r.rc, 0, r)
        lines = r.out.splitlines()
        self.assertEqual(lines[1].split(), ["POOL", "GPUS", "LEASE", "TODAY", "RESETS", "(UTC)",
                                            "WEEK", "RESETS", "(UTC)"], r)
        return lines, {l.split()[0]: l.split() for l in lines[2:]
                       if l.split() and not l.startswith("GPU-hours: ")}

    def configure_quota(self, text):
        """configure() with the test's own ledger path (none there unless written), so that no
        ledger of the machine's (/var/lib/gpuctl) is read."""
        self.configure("ledger = %s\n%s" % (self.ledger, text))

    @staticmethod
    def windows():
        """00:00 UTC today and Monday 00:00 UTC of this ISO week, as Unix seconds, from
        Python's calendar (not gpuctl's arithmetic)."""
        today = datetime.datetime.now(datetime.timezone.utc).replace(
            hour=0, minute=0, second=0, microsecond=0)
        monday = today - datetime.timedelta(days=today.isoweekday() - 1)
        return today.timestamp(), monday.timestamp()

    def test_quota_shows_each_pools_limits_from_the_file(self):
        a, b = self.users
        self.configure_quota("quota_gpus = 2, %s:3\nquota_gpu_hours_week = 40.5\n"
                       "[pool p]\ngpus = 6-7\nquota_lease_length = 90m\n"
                       "quota_gpu_hours_day = 0.125, %s:unlimited\n" % (a, b))
        # A: its own entry (3) in both pools (p does not set quota_gpus: the global list is
        # its default); p's lease length and day quota; the global week quota in both
        doc, rows = self.quota(a)
        self.assertEqual((doc["user"], doc["uid"], doc["configured"]), (a, self.uid[a], True))
        self.assertEqual(list(rows), ["default", "p"])
        self.assertEqual([(r["gpus_limit"], r["lease_length_limit_s"], r["gpu_hours_day_limit"],
                           r["gpu_hours_week_limit"]) for r in rows.values()],
                         [(3, None, None, 40.5), (3, 5400, 0.125, 40.5)])
        # B: the default (2), and unlimited hours a day in p
        _, rows = self.quota(b)
        self.assertEqual([(r["gpus_limit"], r["gpu_hours_day_limit"]) for r in rows.values()],
                         [(2, None), (2, None)])
        # root has no quota; root may ask for A by name or uid
        _, rows = self.quota(None)
        self.assertEqual({k for r in rows.values() for k, v in r.items()
                          if k.endswith("_limit") or k.endswith("_limit_s")
                          if v is not None}, set())
        for who in (a, str(self.uid[a])):
            doc, rows = self.quota(None, "--user", who)
            self.assertEqual((doc["user"], rows["p"]["lease_length_limit_s"]), (a, 5400))
        # the table: one row per pool, "unlimited" where there is no limit
        lines, rows = self.quota_table(a)
        self.assertEqual(lines[0], "Quotas of user %s (uid %d): GPUs held now, lease length, "
                                   "GPU-hours" % (a, self.uid[a]))
        self.assertEqual(list(rows), ["default", "p"])
        self.assertEqual(rows["default"][1:3], ["0/3", "unlimited"])
        self.assertEqual(rows["p"][1:3], ["0/3", "90m"])
        # --pool: that one only
        _, rows = self.quota(a, "--pool", "p")
        self.assertEqual(list(rows), ["p"])

    def test_quota_counts_the_devices_the_user_holds_in_each_pool(self):
        a, b = self.users
        self.configure_quota("quota_gpus = 4\n[pool p]\ngpus = 6-7\n")
        self.assertEqual(self.hold(a, 2).rc, 0)
        self.assertEqual(self.hold(a, 1, 600, "--pool", "p").rc, 0)
        self.assertEqual(self.hold(b, 3).rc, 0)
        _, rows = self.quota(a)
        self.assertEqual({k: (r["gpus_held"], r["gpus_limit"]) for k, r in rows.items()},
                         {"default": (2, 4), "p": (1, 4)})
        _, rows = self.quota(b)
        self.assertEqual({k: r["gpus_held"] for k, r in rows.items()}, {"default": 3, "p": 0})
        _, rows = self.quota_table(a)
        self.assertEqual((rows["default"][1], rows["p"][1]), ("2/4", "1/4"))
        # a release lowers it at once
        self.assertEqual(self.as_user(a, "release", "--all").rc, 0)
        _, rows = self.quota(a)
        self.assertEqual({k: r["gpus_held"] for k, r in rows.items()}, {"default": 0, "p": 0})

    def test_quota_counts_gpu_hours_of_the_day_and_the_week(self):
        a, b = self.users
        now = time.time()
        day0, week0 = self.windows()
        if now - day0 < 600:
            self.skipTest("too close to 00:00 UTC for usage of today")
        t = int(now) - 400
        recs = [
            (a, [0, 1], t, 90),            # today, default pool: 180 GPU-s = 0.05 h
            (a, [6], t + 100, 180),        # today, pool p: 0.05 h
            (b, [2], t + 300, 36),         # B's: not A's
            (a, [0], int(day0) - 8 * 86400 + 3600, 3600),  # last week: in no window
        ]
        week_extra = 0.0
        if day0 > week0:                   # not Monday: yesterday 01:00 is this week's
            recs.append((a, [0, 1, 2], int(day0) - 86400 + 3600, 120))  # 360 GPU-s = 0.1 h
            week_extra = 0.1
        self.write_records(recs)
        self.configure("ledger = %s\nquota_gpu_hours_day = 2\n[pool p]\ngpus = 6-7\n"
                       % self.ledger)
        doc, rows = self.quota(a)
        self.assertIsNone(doc["ledger_error"])
        self.assertEqual(doc["ledger"], self.ledger)
        self.assertAlmostEqual(rows["default"]["gpu_hours_day"], 0.05, places=6)
        self.assertAlmostEqual(rows["default"]["gpu_hours_week"], 0.05 + week_extra, places=6)
        self.assertAlmostEqual(rows["p"]["gpu_hours_day"], 0.05, places=6)
        self.assertAlmostEqual(rows["p"]["gpu_hours_week"], 0.05, places=6)
        self.assertEqual(rows["default"]["gpu_hours_day_limit"], 2)
        _, rows = self.quota(b)
        self.assertAlmostEqual(rows["default"]["gpu_hours_day"], 0.01, places=6)
        self.assertEqual(rows["p"]["gpu_hours_day"], 0)
        # the windows and when they reset: 00:00 UTC, and Monday 00:00 UTC
        stamp = lambda ts: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
        self.assertEqual((doc["day_start"], doc["day_resets"], doc["week_start"],
                          doc["week_resets"]),
                         (stamp(day0), stamp(day0 + 86400), stamp(week0),
                          stamp(week0 + 7 * 86400)))
        lines, rows = self.quota_table(a)
        self.assertEqual(rows["default"][3:6],
                         ["0.05/2", time.strftime("%Y-%m-%d", time.gmtime(day0 + 86400)),
                          "00:00"])
        self.assertEqual(rows["default"][7:], [
            "Mon", time.strftime("%Y-%m-%d", time.gmtime(week0 + 7 * 86400)), "00:00"])
        self.assertEqual(rows["default"][6], "%g/unlimited" % round(0.05 + week_extra, 2))

    def test_quota_says_when_the_ledger_cannot_be_read(self):
        a, _ = self.users
        for ledger, cell, why in ((self.ledger + ".none", "no ledger", "no ledger at the path"),
                                  (self.conf, "unreadable", None)):  # not a ledger
            with self.subTest(ledger=ledger):
                self.configure("ledger = %s\nquota_gpu_hours_day = 1\n" % ledger)
                doc, rows = self.quota(a)
                self.assertEqual((rows["default"]["gpu_hours_day"],
                                  rows["default"]["gpu_hours_week"]), (None, None))
                self.assertEqual(rows["default"]["gpu_hours_day_limit"], 1)
                if why:
                    self.assertEqual(doc["ledger_error"], why)
                else:
                    self.assertTrue(doc["ledger_error"])
                r = self.as_user(a, "quota")
                self.assertEqual(r.rc, 0, r)
                self.assertIn(" %s/1 " % cell, r.out)
                self.assertIn(" %s/unlimited " % cell, r.out)
                self.assertRegex(r.out.splitlines()[-1],
                                 "^GPU-hours: ledger %s: .*: not counted, and the GPU-hour "
                                 "quotas are not enforced$" % re.escape(ledger))

    def test_quota_shown_exhausted_is_when_select_is_refused(self):
        a, _ = self.users
        # GPUs at once: held < limit: one more is granted; held == limit: refused
        self.configure_quota("quota_gpus = 2\n")
        for _ in range(3):
            _, rows = self.quota(a)
            d = rows["default"]
            r = self.hold(a, 1)
            if d["gpus_held"] < d["gpus_limit"]:
                self.assertEqual(r.rc, 0, (d, r))
            else:
                self.assertEqual(d["gpus_held"], 2)
                self.assertQuota(r, r"pool 'default': quota of 2 GPUs at once .*")
        # lease length: what quota shows is the longest hold granted
        self.release_all()
        self.configure_quota("quota_lease_length = 1h\n")
        _, rows = self.quota(a)
        longest = rows["default"]["lease_length_limit_s"]
        self.assertEqual(longest, 3600)
        self.assertQuota(self.hold(a, 1, longest + 1), r"pool 'default': quota of 3600 s .*")
        self.assertEqual(self.hold(a, 1, longest).rc, 0)
        self.release_all()
        # GPU-hours: 0.05 used today (by hand: 2 GPUs x 90 s); below the limit `run` (which
        # states no length) is granted, at the limit refused, for the day and for the week
        self.write_ledger(a, 90)
        for key in ("day", "week"):
            for limit in (0.06, 0.05):
                with self.subTest(key=key, limit=limit):
                    self.configure("ledger = %s\nquota_gpu_hours_%s = %g\n"
                                   % (self.ledger, key, limit))
                    _, rows = self.quota(a)
                    d = rows["default"]
                    used, lim = d["gpu_hours_" + key], d["gpu_hours_%s_limit" % key]
                    self.assertAlmostEqual(used, 0.05, places=6)
                    self.assertEqual(lim, limit)
                    r = self.as_user(a, "run", "-n", "1", "--", "true")
                    if used < lim:
                        self.assertEqual(r.rc, 0, r)
                    else:
                        self.assertEqual(r.rc, EXIT_QUOTA, r)
                        self.assertIn("quota of 0.05 GPU-hours a %s for user %s: 0.05 used"
                                      % (key, a), r.err)

    def test_quota_without_quota_keys_says_so(self):
        a, _ = self.users
        self.configure_quota("[pool p]\ngpus = 6-7\n")
        r = self.as_user(a, "quota")
        self.assertEqual((r.rc, r.err), (0, ""), r)
        self.assertEqual(r.out, 'No quotas are configured (docs/config.md "Quotas"): user %s '
                                'has no limits\n' % a)
        doc, rows = self.quota(a)
        self.assertEqual((doc["configured"], rows), (False, {}))

    def test_quota_bad_input(self):
        a, b = self.users
        self.configure_quota("quota_gpus = 2\n[pool p]\ngpus = 6-7\n")
        # another user's quotas: root only (docs/gpuctl.1 EXIT STATUS: 1), by name or uid
        for who in (b, str(self.uid[b])):
            r = self.as_user(a, "quota", "--user", who)
            self.assertOneLineError(r, EXIT_FAILURE, "quota: --user '%s'" % who,
                                    "only root may see another user's quotas")
            self.assertEqual(r.out, "")
        # one's own, named, is fine
        self.assertEqual(self.quota(a, "--user", a)[0]["user"], a)
        # unknown user, unknown pool, bad format, stray argument: usage errors (2)
        for args, needle in ((["--user", "gpuctl-no-such-user"], "'gpuctl-no-such-user'"),
                             (["--pool", "nosuch"], "no pool 'nosuch'"),
                             (["--format", "csv"], "unknown format 'csv'"),
                             (["--pool", ""], "--pool: empty"),
                             (["extra"], "'extra'")):
            with self.subTest(args=args):
                r = run([GPUCTL, "quota", *args], env=self.env)
                self.assertOneLineError(r, EXIT_USAGE, needle)
        # the pool is checked before NVML; without a driver a good request is exit 4
        r = run([GPUCTL, "quota", "--pool", "nosuch"],
                env=dict(self.env, GPUCTL_NVML_LIBRARY="/nonexistent/libnvidia-ml.so.1"))
        self.assertOneLineError(r, EXIT_USAGE, "no pool 'nosuch'")
        r = run([GPUCTL, "quota"],
                env=dict(self.env, GPUCTL_NVML_LIBRARY="/nonexistent/libnvidia-ml.so.1"))
        self.assertOneLineError(r, EXIT_NODRIVER)
        r = run([GPUCTL, "quota", "--help"], env=self.env)
        self.assertEqual(r.rc, 0, r)
        self.assertTrue(r.out.startswith("Usage: gpuctl quota [--user USER] [--pool NAME]"), r)


    # ---- the Python package ----

    def test_python_lease_raises_quota_error_with_the_line(self):
        a, _ = self.users
        self.configure("quota_gpus = 1\n")
        self.assertEqual(self.hold(a, 1).rc, 0)
        code = ("import sys, gpuctl\n"
                "try:\n"
                "    gpuctl.lease(1)\n"
                "except gpuctl.QuotaError as e:\n"
                "    print(e.errno); print(e)\n")
        r = self.as_user(a, cmd=[sys.executable, "-c", code],
                         env=python_env({"PYTHONPATH": PYDIR, "GPUCTL_LIBRARY": LIBGPUCTL}))
        self.assertEqual(r.rc, 0, r)
        lines = r.out.splitlines()
        self.assertEqual(lines[0], "122", r)  # EDQUOT on Linux
        self.assertRegex(lines[1],
                         r"^pool 'default': quota of 1 GPU at once for user %s: 1 held "
                         r"\(GPU \d\), 1 asked for; frees when it is released$" % a)


if __name__ == "__main__":
    unittest.main()
