"""The node agent's idle actions (docs/idle.md, "Acting on idle leases"; docs/config.md "Idle
actions") and the ledger's "evicted" ending (docs/agent.md, "Endings"): the real agent on the
simulated DGX A100 with a configuration the test writes, leases taken by the test.

Expected values come from the configuration the test wrote (the durations, the pool `default`),
docs/idle.md (when a lease is idle, which leases each action takes) and the test's own clock:
a lease is taken back no sooner than its idle_release (or max_lease_age) after the test took it.
Upper bounds are only the test's patience (no speed is asserted)."""
import os
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time

import test_exporter as tx
from gpuctl_test import GPUCTL, NVSIM, SIMLIB, GpuctlTestCase, run
from test_agent import AgentCase
from test_leases import alive, direct_env

INTERVAL = "0.1"
PATIENCE_S = 15


class ConfiguredAgentCase(AgentCase):
    """The agent with a configuration the test writes (and env for it); gpuctl beside it."""
    AGENT_ARGS = ["--idle-window", "1"]
    SCENARIO = "dgx-a100"

    def start(self, conf, env=None):
        self.conf = os.path.join(self.tmp, "gpuctl.conf")
        with open(self.conf, "w") as f:
            f.write(conf)
        e = {"GPUCTL_CONFIG": self.conf}
        e.update(env or {})
        ag = tx.Exporter(self.SCENARIO, command="agent", interval=INTERVAL,
                         args=["--ledger", self.ledger, "--lease-dir", self.leases,
                               *self.AGENT_ARGS], env=e)
        self.addCleanup(ag.close)
        ag.start()
        os.chmod(ag.tmp, 0o755)
        self.ag = ag
        self.e = {"NVSIM_STATE_DIR": ag.state, "GPUCTL_NVML_LIBRARY": SIMLIB,
                  "GPUCTL_LEASE_DIR": self.leases, "GPUCTL_CONFIG": self.conf, "TZ": "UTC"}
        self.addCleanup(run, [GPUCTL, "release", "--all"], env=self.e)
        return ag

    def g(self, *args):
        return run([GPUCTL, *args], env=self.e)

    def wait_for(self, pred, timeout=PATIENCE_S):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            v = pred()
            if v:
                return v
            time.sleep(0.05)
        return pred()

    def agent_lines(self, needle):
        return [l for l in self.ag.stderr().splitlines() if needle in l]


class IdleActions(ConfiguredAgentCase):
    def leased(self):
        r = self.g("ps", "--format", "json")
        self.assertEqual(r.rc, 0, r)
        return {d["index"]: d for d in r.json()["devices"] if d["state"] == "leased"}

    def hold(self, idx):
        """Holds GPU idx: the holder's pid, and a time before the lease was taken."""
        t = time.monotonic()
        r = self.g("select", "-n", "1", "--only", str(idx), "--hold", "120")
        self.assertEqual(r.rc, 0, r)
        return self.leased()[idx]["owner"]["pid"], t

    def run_job(self, idx):
        """`gpuctl run --only IDX -- sleep 60`, in the background: its Popen."""
        p = subprocess.Popen([GPUCTL, "run", "-n", "1", "--only", str(idx), "--", "sleep", "60"],
                             env=tx.test_env(self.e), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        self.addCleanup(p.wait)
        self.addCleanup(p.kill)
        return p

    def ended(self, pid):
        con = sqlite3.connect("file:%s?mode=ro" % self.ledger, uri=True)
        try:
            rows = con.execute("SELECT end_reason FROM records WHERE kind = 'lease' AND "
                               "key LIKE ?", ("%d@%%" % pid,)).fetchall()
        finally:
            con.close()
        return [r[0] for r in rows]

    def test_idle_hold_is_warned_once_then_taken_back_and_recorded(self):
        self.start("idle_warn = 1s\nidle_release = 2s\n")
        holder, t0 = self.hold(2)
        self.assertTrue(self.wait_for(lambda: not alive(holder)), "the hold was never released")
        t1 = time.monotonic()
        # not before it was idle idle_release long: idle from the first sample that saw it,
        # whose time is when that sample began, at most one interval before the lease
        self.assertGreaterEqual(t1 - t0, 2.0 - float(INTERVAL))
        # the holder's next command (the test's next gpuctl: root holds) says why, once
        r = self.g("ps")
        lines = [l for l in r.err.splitlines() if "your lease of GPU 2 " in l]
        self.assertEqual(len(lines), 1, r)
        self.assertTrue(lines[0].endswith(": idle for 2s (idle_release of pool default)"), r)
        self.assertEqual([l for l in self.g("ps").err.splitlines() if "your lease" in l], [])
        self.assertNotIn(2, self.leased())
        warn = self.agent_lines("agent: idle: GPU 2 ")
        self.assertEqual(len(warn), 1, self.ag.stderr())
        self.assertIn("(pid %d, --hold)" % holder, warn[0])
        self.assertIn("(idle_warn 1s of pool default; released at 2s)", warn[0])
        took = self.agent_lines("agent: took back GPU 2 ")
        self.assertEqual(len(took), 1, self.ag.stderr())
        self.assertTrue(took[0].endswith(": idle for 2s (idle_release of pool default)"), took)
        # the ledger ends the lease's record "evicted" (docs/agent.md, "Endings")
        self.assertEqual(self.wait_for(lambda: self.ended(holder) == ["evicted"] and ["ok"]),
                         ["ok"], self.ended(holder))

    def test_hold_with_a_busy_process_is_never_released(self):
        self.start("idle_warn = 1s\nidle_release = 2s\n")
        holder, _ = self.hold(3)
        busy = subprocess.Popen(["sleep", "60"])
        self.addCleanup(busy.wait)
        self.addCleanup(busy.kill)
        r = run([NVSIM, "proc", "add", "--pid", str(busy.pid), "-i", "3", "--mem", "4GiB",
                 "--util", "90"], env=self.e)
        self.assertEqual(r.rc, 0, r)
        time.sleep(4.0)  # twice idle_release
        self.assertTrue(alive(holder))
        self.assertIn(3, self.leased())
        self.assertEqual(self.agent_lines("agent: took back"), [])
        # idle only before the process came (the first samples): at most that warning
        self.assertLessEqual(len(self.agent_lines("agent: idle: GPU 3 ")), 1)

    def test_run_lease_is_warned_but_not_taken_by_idle_release(self):
        self.start("idle_warn = 1s\nidle_release = 2s\n")
        p = self.run_job(4)
        self.assertTrue(self.wait_for(lambda: self.agent_lines("agent: idle: GPU 4 ")),
                        self.ag.stderr())
        time.sleep(3.0)  # past idle_release
        self.assertIsNone(p.poll())
        self.assertIn(4, self.leased())
        warn = self.agent_lines("agent: idle: GPU 4 ")
        self.assertEqual(len(warn), 1, warn)
        self.assertNotIn("released at", warn[0])  # a job's lease: idle_release does not apply
        self.assertEqual(self.agent_lines("agent: took back"), [])

    def test_max_lease_age_takes_a_run_lease_back_and_the_job_runs_on(self):
        self.start("max_lease_age = 2s\n")
        p = self.run_job(5)
        t0 = time.monotonic()
        owner = self.wait_for(lambda: ((self.leased().get(5) or {}).get("owner") or {})
                              .get("job_pid") and self.leased()[5]["owner"])
        self.assertTrue(owner)
        self.assertTrue(self.wait_for(lambda: 5 not in self.leased()), self.ag.stderr())
        # leased_since is whole seconds (rounded down): the age reaches 2 s at least 1 s after
        # the lease was taken
        self.assertGreaterEqual(time.monotonic() - t0, 1.0)
        self.assertIsNone(p.poll())  # nothing is killed
        self.assertTrue(alive(owner["job_pid"]))
        took = self.agent_lines("agent: took back GPU 5 ")
        self.assertEqual(len(took), 1, self.ag.stderr())
        self.assertTrue(took[0].endswith(": leased for more than 2s (max_lease_age of pool "
                                         "default)"), took)
        self.assertEqual(self.wait_for(lambda: self.ended(owner["pid"]) == ["evicted"] and ["ok"]),
                         ["ok"], self.ended(owner["pid"]))

    def test_release_force_is_recorded_evicted(self):
        self.start("")
        holder, _ = self.hold(6)
        self.assertTrue(self.wait_for(lambda: self.ended(holder) == [None] and ["ok"]))
        r = self.g("release", "--force", "-i", "6")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(self.wait_for(lambda: self.ended(holder) == ["evicted"] and ["ok"]),
                         ["ok"], self.ended(holder))
        # a plain release stays "release"
        holder, _ = self.hold(7)
        self.assertTrue(self.wait_for(lambda: self.ended(holder) == [None] and ["ok"]))
        self.assertEqual(self.g("release", "-i", "7").rc, 0)
        self.assertEqual(self.wait_for(lambda: self.ended(holder) == ["release"] and ["ok"]),
                         ["ok"], self.ended(holder))
        self.assertEqual(self.ag.stop(signal.SIGTERM), 0, self.ag.stderr())


class PsPlan(GpuctlTestCase):
    """`gpuctl ps` tells the holder what the agent will do with an idle or old lease (docs/idle.md,
    "Acting on idle leases"), by the configuration the test wrote; one sample knows "idle now",
    not since when."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gpuctl-psplan-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.conf = os.path.join(self.tmp, "gpuctl.conf")
        self.env = direct_env(os.path.join(self.tmp, "leases"),
                              extra={"GPUCTL_CONFIG": self.conf})
        self.addCleanup(run, [GPUCTL, "release", "--all"], env=self.env)

    def note(self, conf, *take):
        with open(self.conf, "w") as f:
            f.write(conf)
        if take[0] == "select":
            r = run([GPUCTL, *take], env=self.env)
            self.assertEqual(r.rc, 0, r)
        else:
            p = subprocess.Popen([GPUCTL, *take], env=tx.test_env(self.env),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.addCleanup(p.wait)
            self.addCleanup(p.kill)
        deadline = time.monotonic() + PATIENCE_S
        while time.monotonic() < deadline:
            r = run([GPUCTL, "ps", "--format", "json"], env=self.env)
            devs = [d for d in r.json()["devices"] if d["state"] == "leased" and d["owner"]
                    and (take[0] == "select" or d["owner"]["job_pid"])]
            if devs:
                break
            time.sleep(0.05)
        r = run([GPUCTL, "ps"], env=self.env)
        self.assertEqual(r.rc, 0, r)
        (line,) = [l for l in r.out.splitlines() if " leased " in l]
        return line

    def test_idle_hold_under_idle_release(self):
        line = self.note("idle_warn = 10m\nidle_release = 30m\n",
                         "select", "-n", "1", "--hold", "60")
        self.assertIn("idle: lease", line)
        self.assertIn("released after 30m idle", line)

    def test_idle_run_lease_is_only_warned(self):
        line = self.note("idle_warn = 10m\nidle_release = 30m\n",
                         "run", "-n", "1", "--", "sleep", "60")
        self.assertIn("warned after 10m idle", line)
        self.assertNotIn("released", line)

    def test_max_lease_age(self):
        line = self.note("max_lease_age = 8h\n", "select", "-n", "1", "--hold", "60")
        self.assertRegex(line, r"taken back at 8h old \(in [78]h\)")

    def test_pool_overrides_the_global_setting(self):
        line = self.note("idle_release = 30m\n[pool p]\ngpus = 0-7\nidle_release = 0\n"
                         "idle_warn = 1h\nusers = *\n",
                         "select", "-n", "1", "--pool", "p", "--hold", "60")
        self.assertIn("warned after 1h idle", line)
        self.assertNotIn("released", line)
