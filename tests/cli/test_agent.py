"""gpuctl agent (docs/agent.md): the real binary on the simulated DGX A100 (nvsim exec), with
its page served by the exporter's code and its ledger read back by `gpuctl report` and sqlite3.

The expected usage is what the test itself schedules and times with its own clock: a lease is
held from the moment `select --hold` returns (the lock is taken before it prints) to the moment
`release` returns (the lock is dropped before it does); a foreign process from its registration
with the simulator to its kill (for a real container's init or Slurm step's task, to the moment
the kernel no longer has it: killed and reaped). The agent sees a holder at the first sample after it appears and
ends it at the first sample after it is gone (docs/agent.md, "Resolution"), so each GPU of a
record may differ from the schedule by up to one interval, plus the time one sample takes on
this loaded two-core machine (SLACK_S)."""
import json
import os
import pwd
import resource
import signal
import sqlite3
import subprocess
import tempfile
import time
import unittest

import test_exporter as tx
from containers import start_container
from gpuctl_test import EMPTY_CONFIG, GPUCTL, NVSIM, SCENARIOS, SIMLIB, GpuctlTestCase, run
from slurm_cluster import cgroup_cluster

INTERVAL = 0.2
# One sample's own time and the scheduling of two processes on a loaded two-core machine, where
# an ASan build's sample of a DGX A100 takes tens of milliseconds and a busy scheduler can hold a
# process back for a few hundred: each GPU of a record is still right to the second (the issue's
# precision). 0.15 s failed once in about nine runs beside another build.
SLACK_S = 0.5
TOL_PER_GPU = INTERVAL + SLACK_S


def _useradd(name):
    subprocess.run(["useradd", "-M", "-r", "-s", "/usr/sbin/nologin", name], check=True,
                   capture_output=True)


def _userdel(name):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
        if subprocess.run(["userdel", name], capture_output=True).returncode == 0:
            return
        time.sleep(0.05)


class AgentCase(GpuctlTestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gpuctl-agent-test-")
        os.chmod(self.tmp, 0o755)
        self.addCleanup(subprocess.run, ["rm", "-rf", self.tmp])
        self.leases = os.path.join(self.tmp, "leases")
        self.ledger = os.path.join(self.tmp, "ledger.db")
        self.pids = self.kill_on_cleanup()

    def agent(self, preexec_fn=None, scenario="dgx-a100", env=None):
        ag = tx.Exporter(scenario, command="agent", interval=str(INTERVAL), env=env,
                         args=["--ledger", self.ledger, "--lease-dir", self.leases],
                         preexec_fn=preexec_fn)
        self.addCleanup(ag.close)
        ag.start()
        os.chmod(ag.tmp, 0o755)  # the simulator's state, read by the other users' gpuctl
        return ag

    def env(self, ag):
        return {"NVSIM_STATE_DIR": ag.state, "GPUCTL_NVML_LIBRARY": SIMLIB,
                "GPUCTL_LEASE_DIR": self.leases, "GPUCTL_CONFIG": EMPTY_CONFIG}

    def records(self):
        con = sqlite3.connect("file:%s?mode=ro" % self.ledger, uri=True)
        try:
            con.row_factory = sqlite3.Row
            return [dict(r) for r in con.execute("SELECT * FROM records ORDER BY id")]
        finally:
            con.close()

    def report(self, by="user"):
        r = run([GPUCTL, "report", "--ledger", self.ledger, "--by", by, "--format", "json"])
        self.assertEqual(r.rc, 0, r)
        return {g["key"]: g for g in r.json()["groups"]}


class Serving(AgentCase):
    def test_serves_the_exporters_page_and_stops_with_exit_0(self):
        ag = self.agent()
        m = ag.metrics()
        self.assertEqual(len(m["DCGM_FI_DEV_GPU_UTIL"]), 8, m.keys())  # dgx-a100: 8 GPUs
        self.assertEqual(ag.stop(signal.SIGTERM), 0, ag.stderr())
        self.assertTrue(os.path.exists(self.ledger))

    def test_help_and_usage(self):
        r = run([GPUCTL, "agent", "--help"])
        self.assertEqual(r.rc, 0)
        self.assertIn("--ledger PATH", r.out)
        r = run([GPUCTL, "agent", "--ledger", ""])
        self.assertEqual((r.rc, r.err.strip()),
                         (2, "gpuctl: agent: --ledger: empty path (see 'gpuctl agent --help')"))


class Restart(AgentCase):
    def test_restart_closes_the_open_records_as_agent_restart(self):
        ag = self.agent()
        env = self.env(ag)
        r = run([GPUCTL, "select", "-n", "1", "--hold", "60"], env=env)
        self.assertEqual(r.rc, 0, r)
        self.addCleanup(run, [GPUCTL, "release", "--all"], env=env)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not self.records():
            time.sleep(0.1)
        self.assertEqual(ag.stop(), 0, ag.stderr())
        (rec,) = self.records()
        self.assertIsNone(rec["end_reason"])  # left open by a stopped agent (docs/ledger.md)
        # the same machine's state: start the agent again on it
        ag.proc = None
        argv = [NVSIM, "exec", "--state-dir", ag.state + "2", "dgx-a100", "--", GPUCTL, "agent",
                "--listen", "127.0.0.1:%d" % tx.free_port(), "--interval", str(INTERVAL),
                "--ledger", self.ledger, "--lease-dir", self.leases]
        p = subprocess.Popen(argv, env=tx.test_env(), stderr=subprocess.PIPE, text=True)
        self.pids.append(p.pid)
        self.addCleanup(p.stderr.close)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.records()[0]["end_reason"] is None:
            time.sleep(0.1)
        p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(10), 0, p.stderr.read())
        first = self.records()[0]
        self.assertEqual(first["end_reason"], "agent-restart")
        self.assertEqual(first["end_s"], first["last_s"])


class LedgerWriteErrors(AgentCase):
    def test_a_file_size_limit_is_said_once_and_serving_goes_on(self):
        # RLIMIT_FSIZE on the agent (and its nvsim exec parent): the ledger's writes fail with
        # EFBIG once the WAL reaches it (SIGXFSZ is ignored by the agent: setrlimit(2)).
        limit = 256 * 1024

        def small_files():
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

        ag = self.agent(preexec_fn=small_files)
        env = self.env(ag)
        r = run([GPUCTL, "select", "-n", "8", "--hold", "120"], env=env)
        self.assertEqual(r.rc, 0, r)
        self.addCleanup(run, [GPUCTL, "release", "--all"], env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "agent: ledger" not in ag.stderr():
            time.sleep(0.2)
        time.sleep(5 * INTERVAL)
        lines = [l for l in ag.stderr().splitlines() if "agent: ledger" in l]
        self.assertEqual(len(lines), 1, ag.stderr())
        self.assertRegex(lines[0], r"^gpuctl: agent: ledger .*: .* \(sampling and serving go on;"
                                   r" trying again every sample\)$")
        self.assertIn("DCGM_FI_DEV_GPU_UTIL", ag.metrics())
        self.assertEqual(ag.stop(), 0, ag.stderr())


def utc(t):
    """Unix seconds as report's TIME (UTC, whole seconds: docs/gpuctl.1, report's NOTE)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t))


def counters(m, name):
    """{UUID: value} of a per-GPU family of a parsed page."""
    return {labels["UUID"]: v for labels, v in m.get(name, [])}


class CountersAgreeWithLedger(AgentCase):
    """Issue 27: the exporter's counters agree with the ledger within 1 % over the same window.
    The agent's page is scraped at the window's start and end; `report --since/--until` over
    that window must give the same held and busy GPU-seconds per GPU and the same energy
    (docs/metrics.md, "Usage counters"). The window starts and ends with nothing held, so its
    whole-second edges (report's TIME) cut no record."""

    KWH_MJ = 3.6e9  # 1 kWh in mJ

    def page_after(self, ag, t):
        """The first page of a sample that began after wall-clock time t."""
        return ag.wait_for(lambda m: m["gpuctl_exporter_last_sample_timestamp_seconds"][0][1] > t,
                           "a sample after %.3f" % t)

    def scenario_with_energy(self):
        """dgx-a100 with NVML's energy counter (an A100 has one: nvmlDeviceGetTotalEnergyConsumption
        is for Volta and newer; the bundled scenario leaves it out), at 1 kWh."""
        with open(os.path.join(SCENARIOS, "dgx-a100.json")) as f:
            sc = json.load(f)
        sc["defaults"]["energy_mj"] = int(self.KWH_MJ)
        path = os.path.join(self.tmp, "dgx-a100-energy.json")
        with open(path, "w") as f:
            json.dump(sc, f)
        return path

    def test_held_busy_and_energy_agree_with_the_report(self):
        ag = self.agent(scenario=self.scenario_with_energy())
        env = self.env(ag)
        r = run([GPUCTL, "lease", "init", "--lease-dir", self.leases], env=env)
        self.assertEqual(r.rc, 0, r)
        self.addCleanup(run, [GPUCTL, "release", "--all"], env=env)
        # GPUs 0-3 busy (60 % > the 10 % threshold), 4-7 not (3 %); every energy counter at 1 kWh
        for i in range(8):
            ag.nvsim("set", "-i", str(i), "utilization.gpu=%d" % (60 if i < 4 else 3))
        m0 = self.page_after(ag, time.time())
        since = m0["gpuctl_exporter_last_sample_timestamp_seconds"][0][1]
        # held: GPUs 0 and 4 by a lease for about 2 s, GPU 6 by a bare process for about 1.5 s
        r = run([GPUCTL, "select", "-n", "2", "--only", "0,4", "--hold", "120"], env=env)
        self.assertEqual(r.rc, 0, r)
        sleeper = subprocess.Popen(["sleep", "600"])
        self.pids.append(sleeper.pid)
        ag.nvsim("proc", "add", "--pid", str(sleeper.pid), "-i", "6", "--mem", "1GiB")
        time.sleep(1.0)
        # 1 kWh more on every GPU: the held ones (0, 4, 6) count it, the others not
        for i in range(8):
            ag.nvsim("set", "-i", str(i), "energy=%d" % (2 * self.KWH_MJ))
        time.sleep(0.5)
        sleeper.kill()
        sleeper.wait()
        time.sleep(0.5)
        r = run([GPUCTL, "release", "--all"], env=env)
        self.assertEqual(r.rc, 0, r)
        # a sample that saw them gone, and one more that integrated nothing
        m1 = self.page_after(ag, time.time() + 2 * INTERVAL)
        until = m1["gpuctl_exporter_last_sample_timestamp_seconds"][0][1]
        self.assertEqual(ag.stop(), 0, ag.stderr())

        r = run([GPUCTL, "report", "--ledger", self.ledger, "--by", "gpu", "--format", "json",
                 "--since", utc(int(since)), "--until", utc(int(until) + 1)])
        self.assertEqual(r.rc, 0, r)
        rep = r.json()
        by_gpu = {g["key"]: g for g in rep["groups"]}
        uuids = {l["gpu"]: l["UUID"] for l, _ in m0["gpuctl_gpu_info"]}
        held = {uuids[i] for i in ("0", "4", "6")}
        self.assertEqual(set(by_gpu), held, rep)
        for fam, col in (("gpuctl_gpu_held_seconds_total", "gpu_hours"),
                         ("gpuctl_gpu_busy_held_seconds_total", "busy_gpu_hours")):
            c0, c1 = counters(m0, fam), counters(m1, fam)
            self.assertEqual(set(c1), set(uuids.values()), fam)
            for u in uuids.values():
                with self.subTest(family=fam, gpu=u):
                    delta = c1[u] - c0.get(u, 0.0)
                    ledger = by_gpu[u][col] * 3600 if u in by_gpu else 0.0
                    self.assertAlmostEqual(delta, ledger, delta=0.01 * max(ledger, delta) + 1e-6,
                                           msg="%s: counter %.3f s, ledger %.3f s" %
                                           (fam, delta, ledger))
        # GPU 0 was busy all along, 4 and 6 never
        self.assertGreater(by_gpu[uuids["0"]]["busy_gpu_hours"], 0)
        self.assertEqual(by_gpu[uuids["4"]]["busy_gpu_hours"], 0)
        # energy: the 1 kWh each held GPU took, by the held-energy counter (J), by
        # DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION's rise (mJ) and by the ledger (kWh)
        e0 = counters(m0, "gpuctl_gpu_held_energy_joules_total")
        e1 = counters(m1, "gpuctl_gpu_held_energy_joules_total")
        d0 = counters(m0, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
        d1 = counters(m1, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
        for u in held:
            with self.subTest(energy=u):
                kwh = by_gpu[u]["kwh"]
                self.assertAlmostEqual(kwh, 1.0, delta=0.01)
                self.assertAlmostEqual((e1[u] - e0[u]) / 3.6e6, kwh, delta=0.01 * kwh)
                self.assertAlmostEqual((d1[u] - d0[u]) / self.KWH_MJ, kwh, delta=0.01 * kwh)
        for u in set(uuids.values()) - held:
            self.assertEqual(e1[u] - e0[u], 0.0, u)
        self.assertAlmostEqual(rep["total"]["kwh"], 3.0, delta=0.03)


def _gone(pid, timeout=20):
    """Waits until the kernel has no process pid (killed and reaped: a zombie still has its
    /proc/PID/stat, and the agent counts it as alive); the moment, by time.monotonic()."""
    deadline = time.monotonic() + timeout
    while os.path.exists("/proc/%d" % pid):
        if time.monotonic() > deadline:
            raise AssertionError("process %d still there after %ds" % (pid, timeout))
        time.sleep(0.01)
    return time.monotonic()


def _start_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:  # proc(5): field 22, after the name
        return int(f.read().rsplit(")", 1)[1].split()[19])


@unittest.skipUnless(os.geteuid() == 0, "needs root: creates two throwaway users")
class Session(AgentCase):
    """Issue 27's "done when": one agent on the simulated DGX A100 while two users lease GPUs
    for scheduled times, and GPU processes of no lease run for scheduled times on GPUs of their
    own: a bare process, the init of a real podman container and the task of a real Slurm step
    (tests/cli/containers.py, slurm_cluster.py: the fixtures of test_real_workloads.py, with
    their convention: no podman here skips, a missing Slurm fails). `report --by user` must
    match what was scheduled, per user, within one interval per GPU plus a sample's time
    (docs/agent.md, "Resolution"), and `report --by workload` name the container and the
    step as docs/workloads.md labels them."""

    def setUp(self):
        super().setUp()
        tag = "%d" % os.getpid()
        self.users = ["gpuctlag" + tag, "gpuctlbg" + tag]
        for u in self.users:
            _useradd(u)
            self.addCleanup(_userdel, u)

    def as_user(self, user, env, *args):
        pw = pwd.getpwnam(user)
        return run(["setpriv", "--reuid", str(pw.pw_uid), "--regid", str(pw.pw_gid),
                    "--init-groups", GPUCTL, *args], env=env)

    def hold(self, user, env, n):
        r = self.as_user(user, env, "select", "-n", str(n), "--hold", "120")
        self.assertEqual(r.rc, 0, r)
        return time.monotonic()

    def release(self, user, env):
        r = self.as_user(user, env, "release", "--all")
        self.assertEqual(r.rc, 0, r)
        return time.monotonic()

    def on_gpu(self, ag, pid, gpu):
        """Registers pid as a compute process on simulated GPU gpu (1 GiB, 50 %); the moment."""
        ag.nvsim("proc", "add", "--pid", str(pid), "-i", str(gpu), "--mem", "1GiB",
                 "--util", "50")
        return time.monotonic()

    def test_report_by_user_matches_the_schedule(self):
        a, b = self.users
        # the real workloads first (seconds to start), on no GPU yet
        pm, ctr = start_container(self, "gpuctl-session-%d" % os.getpid())
        cl = cgroup_cluster(self)
        job, step, task = cl.start_step("gpuctl-session")
        ag = self.agent(env={"GPUCTL_WORKLOAD_ROOT": pm.root})  # the container's name
        env = self.env(ag)
        r = run([GPUCTL, "lease", "init", "--lease-dir", self.leases], env=env)
        self.assertEqual(r.rc, 0, r)
        for u in self.users:
            self.addCleanup(self.as_user, u, env, "release", "--all")
        want = {}  # user: GPU-seconds scheduled
        gpus = {}  # user: GPU-records (for the tolerance)
        want_wl = {}  # the workloads of no lease: GPU-seconds scheduled
        # the container on GPU 6 and the step on GPU 7, from now until they are killed below
        t_ctr = self.on_gpu(ag, ctr.pid, 6)
        t_step = self.on_gpu(ag, task, 7)
        # A holds 2 GPUs for about 3 s; B holds 1 GPU for about 1.5 s meanwhile (select takes
        # none of GPUs 6 and 7: their processes of no lease make them busy)
        ta = self.hold(a, env, 2)
        time.sleep(0.5)
        tb = self.hold(b, env, 1)
        time.sleep(1.5)
        want[b] = 1 * (self.release(b, env) - tb)
        time.sleep(1.0)
        want[a] = 2 * (self.release(a, env) - ta)
        gpus[a], gpus[b] = 2, 1
        # then B again, 3 GPUs for about 1 s: a second record of B's
        tb = self.hold(b, env, 3)
        time.sleep(1.0)
        want[b] += 3 * (self.release(b, env) - tb)
        gpus[b] += 3
        # the container's init and the step's task end (killed; gone when reaped)
        label_ctr, label_step = "podman " + ctr.name, "slurm %d.%d" % (job, step)
        os.kill(ctr.pid, signal.SIGKILL)
        want_wl[label_ctr] = _gone(ctr.pid) - t_ctr
        os.kill(task, signal.SIGKILL)
        want_wl[label_step] = _gone(task) - t_step
        # a bare process of root's on GPU 5, no lease, for about 2 s
        sleeper = subprocess.Popen(["sleep", "600"])
        self.pids.append(sleeper.pid)
        t0 = self.on_gpu(ag, sleeper.pid, 5)
        ticks = _start_ticks(sleeper.pid)
        time.sleep(2.0)
        sleeper.kill()
        sleeper.wait()
        want_wl["bare"] = time.monotonic() - t0
        want["root"] = sum(want_wl.values())
        gpus["root"] = 3
        time.sleep(3 * INTERVAL)  # the sample that sees it gone
        self.assertEqual(ag.stop(), 0, ag.stderr())

        got = self.report("user")
        self.assertEqual(set(got), set(want), got)
        for user, s in want.items():
            with self.subTest(user=user):
                gpu_s = got[user]["gpu_hours"] * 3600
                self.assertAlmostEqual(gpu_s, s, delta=gpus[user] * TOL_PER_GPU,
                                       msg="%s: ledger %.3f GPU-s, scheduled %.3f" %
                                       (user, gpu_s, s))
        self.assertEqual(got[a]["jobs"], 1)
        self.assertEqual(got[b]["jobs"], 2)
        self.assertEqual(got["root"]["jobs"], 3)
        recs = self.records()
        ends = sorted((r["kind"], r["user"], r["end_reason"]) for r in recs)
        self.assertEqual(ends, sorted([("lease", a, "release"), ("lease", b, "release"),
                                       ("lease", b, "release")] +
                                      [("workload", "root", "exit")] * 3))
        wl = {r["workload"]: r for r in recs if r["kind"] == "workload"}
        # docs/workloads.md's labels, of the runtimes' own names (podman run's --name, squeue's
        # job and step); docs/agent.md's keys
        self.assertEqual(set(wl), {"bare", label_ctr, label_step}, recs)
        self.assertEqual((wl["bare"]["peak_mem"], wl["bare"]["util_mean"]), (1 << 30, 50.0))
        self.assertEqual(wl["bare"]["key"], "pid:%d@%d" % (sleeper.pid, ticks))
        self.assertEqual(wl[label_ctr]["key"], "container:podman/" + ctr.id)
        self.assertEqual(wl[label_step]["key"], "slurm:%d.%d" % (job, step))
        by_wl = self.report("workload")
        for label, s in want_wl.items():
            with self.subTest(workload=label):
                self.assertIn(label, by_wl)
                self.assertEqual(by_wl[label]["jobs"], 1)
                gpu_s = by_wl[label]["gpu_hours"] * 3600
                self.assertAlmostEqual(gpu_s, s, delta=TOL_PER_GPU,
                                       msg="%s: ledger %.3f GPU-s, scheduled %.3f" %
                                       (label, gpu_s, s))
        groups = self.report("group")
        for u in self.users:  # useradd -r makes each user a group of its name (useradd(8))
            self.assertIn(u, groups)


if __name__ == "__main__":
    unittest.main()
