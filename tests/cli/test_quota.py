"""Quotas (docs/config.md "Quotas"; issue 28 point 3): GPUs held at once, lease length and GPU-hours
a day or a week, per pool, per user and per group, enforced by select-and-lease under select.lock:
`select --hold` and `--wait` refuse with exit 9 (docs/gpuctl.1 EXIT STATUS) and one line naming the
quota, what is used and when it frees; racing requests of one user cannot both pass; a waiter over
its quota waits and is served once it frees; the Python package raises QuotaError with the same line.

Two throwaway users and a throwaway group (useradd/groupadd, removed after the class), a root-owned
shared lease directory that follows the test's configuration file, and a ledger written by
build/tests/ledger-writer with a schedule the test makes. Expected values come from the
configuration, the schedule, docs/config.md and the scenario file (dgx-a100: 8 GPUs)."""
import os
import re
import subprocess
import sys
import time
import unittest

import test_exporter as tx
from gpuctl_test import BUILD, GPUCTL, LIBGPUCTL, PYDIR, SIMLIB, python_env, run
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
        lines = "sample %d 0\n" % t0
        for g in range(gpus):
            lines += "obs lease 99:1 %s - - - %s 50 1000 -1 -1 0\n" % (user, UUIDS[g])
        lines += "sample %d %d\n" % (t0 + seconds, seconds)
        for g in range(gpus):
            lines += "obs lease 99:1 %s - - - %s 50 1000 -1 -1 2\n" % (user, UUIDS[g])
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
