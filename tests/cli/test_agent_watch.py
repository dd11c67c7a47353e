"""The agent's watch, `enforce = watch` (docs/agent.md "Violations"; docs/config.md
"Enforcement"; issue 28 points 1 and 2): the real agent on the simulated DGX A100 with a
configuration the test writes, leases taken by the test (`gpuctl run`, `select --hold`), and real
processes put on simulated GPUs with `nvsim proc add --pid`.

Expected values come from the configuration the test wrote (enforce, violation_action,
terminate_grace, share_margin 1GiB), the schedule the test made (which process it put on which
GPU with how much memory, which leases it took) and docs/agent.md (the log line, the ledger row,
the counter, the notify line). A DGX A100's GPUs have 80 GiB (sim/scenarios/dgx-a100.json).
Upper bounds are only the test's patience.

Users for terminate and notify are real: made with useradd (a uid from 1000 up, Debian's range
for people), removed after the class; their processes are started by the test (setpriv) and
killed by it. Terminals for notify are ptys the test opens and hands to the user, listed in a
scratch utmp file the agent reads through $GPUCTL_UTMP (utmp(5) layout)."""
import json
import os
import pwd
import select
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import time
import unittest

import test_exporter as tx
from gpuctl_test import GPUCTL, NVSIM, SCENARIOS, run
from test_agent_idle import PATIENCE_S, ConfiguredAgentCase
from test_leases import alive

GiB = 1 << 30
MARGIN = "share_margin = 1GiB\n"
LINE = "gpuctl: agent: violation: "


def useradd(name):
    subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", name], check=True,
                   capture_output=True)


class WatchCase(ConfiguredAgentCase):
    AGENT_ARGS = []

    def spawn(self, argv):
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(p.wait)
        self.addCleanup(lambda: p.poll() is None and p.kill())
        return p

    def on_gpu(self, pid, idx, mem="1GiB"):
        r = run([NVSIM, "proc", "add", "--pid", str(pid), "-i", str(idx), "--mem", mem],
                env=self.e)
        self.assertEqual(r.rc, 0, r)

    def off_gpu(self, pid):
        r = run([NVSIM, "proc", "rm", str(pid)], env=self.e)
        self.assertEqual(r.rc, 0, r)

    def devices(self):
        r = self.g("ps", "--all", "--format", "json")
        self.assertEqual(r.rc, 0, r)
        out = {}
        for d in r.json()["devices"]:
            out.setdefault(d["index"], d)  # the GPU, before its MIG devices
        return out

    def run_job(self, only, *opts, cmd=("sleep", "60")):
        """`gpuctl run -n N --only ONLY [opts] -- cmd` in the background: (run pid, job pid)."""
        n = len(str(only).split(","))
        p = subprocess.Popen([GPUCTL, "run", "-n", str(n), "--only", str(only), *opts, "--",
                              *cmd], env=tx.test_env(self.e), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        self.addCleanup(p.wait)
        self.addCleanup(p.kill)
        first = int(str(only).split(",")[0])
        d = self.wait_for(lambda: (self.devices()[first].get("owner") or {}).get("job_pid"))
        self.assertTrue(d, "the job never started")
        return p.pid, d

    def lines(self, needle=""):
        return [l for l in self.ag.stderr().splitlines() if l.startswith(LINE) and needle in l]

    def violations(self):
        if not os.path.exists(self.ledger):
            return []
        con = sqlite3.connect("file:%s?mode=ro" % self.ledger, uri=True)
        try:
            return con.execute("SELECT kind, user, uid, pid, gpu, detail, action FROM violations"
                               " ORDER BY id").fetchall()
        except sqlite3.OperationalError:
            return []
        finally:
            con.close()

    def counts(self):
        m = self.ag.metrics()
        return {l["kind"]: v for l, v in m.get("gpuctl_violations_total", [])}

    def uuid(self, idx):
        return self.devices()[idx]["uuid"]

    def samples(self, n):
        """Waits until n more samples have been taken (the exporter's counter)."""
        m = self.ag.metrics()
        first = m["gpuctl_exporter_samples_total"][0][1]
        self.assertTrue(self.wait_for(
            lambda: self.ag.metrics()["gpuctl_exporter_samples_total"][0][1] >= first + n))


class Violations(WatchCase):
    def test_foreign_process_is_found_once_counted_recorded_and_again_after_it_came_back(self):
        self.start("enforce = watch\n")
        p = self.spawn(["sleep", "60"])
        self.on_gpu(p.pid, 6)
        uuid = self.uuid(6)
        self.assertTrue(self.wait_for(lambda: self.lines("pid %d " % p.pid)), self.ag.stderr())
        self.samples(5)
        got = self.lines("pid %d " % p.pid)
        self.assertEqual(len(got), 1, got)
        # docs/agent.md: KIND: pid PID (COMM, user USER, uid UID) on GPU N (UUID, pool P): ...
        self.assertEqual(got[0], LINE + "foreign: pid %d (sleep, user root, uid 0) on GPU 6 "
                         "(%s, pool default): no lease of root covers GPU 6; action: log"
                         % (p.pid, uuid))
        self.assertEqual(self.wait_for(lambda: self.counts().get("foreign") == 1 and "ok"), "ok",
                         self.counts())
        self.assertEqual(self.counts(), {"foreign": 1, "overuse": 0, "outside": 0})
        self.assertEqual(self.wait_for(self.violations),
                         [("foreign", "root", 0, p.pid, uuid, "no lease of root covers GPU 6",
                           "log")])
        # it leaves the GPU and comes back: a new violation
        self.off_gpu(p.pid)
        self.samples(3)
        self.assertEqual(len(self.lines("pid %d " % p.pid)), 1)
        self.on_gpu(p.pid, 6)
        self.assertTrue(self.wait_for(lambda: len(self.lines("pid %d " % p.pid)) == 2),
                        self.ag.stderr())
        self.assertTrue(self.wait_for(lambda: self.counts().get("foreign") == 2))
        self.assertEqual(len(self.violations()), 2)

    def test_overuse_of_a_shared_lease(self):
        self.start("enforce = watch\n" + MARGIN)
        run_pid, job = self.run_job(0, "--share", "--mem", "4GiB")
        self.on_gpu(job, 0, mem="8GiB")  # 8 GiB > 4 GiB declared + 1 GiB margin
        self.assertTrue(self.wait_for(lambda: self.lines("overuse")), self.ag.stderr())
        self.samples(5)
        got = self.lines("overuse")
        self.assertEqual(len(got), 1, got)
        self.assertIn("overuse: pid %d (sleep, user root, uid 0) on GPU 0 " % job, got[0])
        self.assertIn(": the shared lease of pid %d uses 8 GiB on GPU 0, declared 4 GiB (margin "
                      "1 GiB); action: log" % run_pid, got[0])
        self.assertTrue(self.wait_for(lambda: self.counts().get("overuse") == 1))
        rows = self.wait_for(self.violations)
        self.assertEqual([(r[0], r[3], r[4]) for r in rows], [("overuse", job, self.uuid(0))])

    def test_job_process_outside_its_lease(self):
        self.start("enforce = watch\n")
        run_pid, job = self.run_job(1)
        self.on_gpu(job, 7)
        self.assertTrue(self.wait_for(lambda: self.lines("outside")), self.ag.stderr())
        self.samples(5)
        got = self.lines("outside")
        self.assertEqual(len(got), 1, got)
        self.assertIn("outside: pid %d (sleep, user root, uid 0) on GPU 7 " % job, got[0])
        self.assertIn(": a process of the job of pid %d, whose lease holds GPU 1, on GPU 7 "
                      "outside it; action: log" % run_pid, got[0])
        # root holds no lease on GPU 7, yet the job's process is "outside", not "foreign"
        self.assertEqual(self.lines("foreign"), [])
        self.assertTrue(self.wait_for(lambda: self.counts().get("outside") == 1))
        self.assertEqual([r[0] for r in self.wait_for(self.violations)], ["outside"])

    def test_legitimate_leases_give_no_violation(self):
        self.start("enforce = watch\n" + MARGIN)
        # a run job on two GPUs, with a child, each on the job's GPUs
        _, job = self.run_job("2,3", cmd=("sh", "-c", "sleep 60 & wait"))
        child = self.wait_for(lambda: children(job))
        self.assertTrue(child)
        self.on_gpu(job, 2)
        self.on_gpu(child[0], 3)
        # an exclusive hold, and its user's own process beside it (the hold covers it)
        r = self.g("select", "-n", "1", "--only", "4", "--hold", "120")
        self.assertEqual(r.rc, 0, r)
        mine = self.spawn(["sleep", "60"])
        self.on_gpu(mine.pid, 4, mem="20GiB")
        # a shared lease within its declaration plus the margin (4.5 GiB <= 4 + 1)
        _, shared = self.run_job(5, "--share", "--mem", "4GiB")
        self.on_gpu(shared, 5, mem="4608MiB")
        self.samples(10)
        self.assertEqual(self.lines(), [], self.ag.stderr())
        self.assertEqual(self.counts(), {"foreign": 0, "overuse": 0, "outside": 0})
        self.assertEqual(self.violations(), [])

    def test_enforce_off_finds_nothing(self):
        self.start(MARGIN)  # enforce is off by default
        p = self.spawn(["sleep", "60"])
        self.on_gpu(p.pid, 6)
        _, job = self.run_job(1)
        self.on_gpu(job, 7)
        self.samples(10)
        self.assertEqual(self.lines(), [], self.ag.stderr())
        self.assertEqual(self.counts(), {"foreign": 0, "overuse": 0, "outside": 0})
        self.assertEqual(self.violations(), [])

    def test_a_pool_overrides_the_global_enforce(self):
        self.start("enforce = off\n[pool watched]\ngpus = 6\nenforce = watch\n")
        p = self.spawn(["sleep", "60"])
        q = self.spawn(["sleep", "60"])
        self.on_gpu(p.pid, 6)
        self.on_gpu(q.pid, 5)
        self.assertTrue(self.wait_for(lambda: self.lines("pid %d " % p.pid)), self.ag.stderr())
        self.samples(5)
        self.assertIn("(%s, pool watched)" % self.uuid(6), self.lines("pid %d " % p.pid)[0])
        self.assertEqual(self.lines("pid %d " % q.pid), [])


def children(pid):
    """The pids whose parent is pid (/proc/PID/stat field 4, proc(5))."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(d))
    return out


class MigViolations(WatchCase):
    """On MIG devices (sim/scenarios/a100-mig.json: GPU 0 in MIG mode with seven 1g.5gb
    devices): a lease of one MIG device covers that device only."""
    SCENARIO = "a100-mig"

    def migs(self):
        with open(os.path.join(SCENARIOS, "a100-mig.json")) as f:
            return [m["uuid"] for m in json.load(f)["gpus"][0]["mig"]["instances"]]

    def test_a_mig_lease_covers_its_own_device_only(self):
        self.start("enforce = watch\n")
        r = self.g("select", "-n", "1", "--mig", "1g.5gb", "--only", "0", "--hold", "120")
        self.assertEqual(r.rc, 0, r)
        mine = r.out.strip().split("=", 1)[1]
        migs = self.migs()
        self.assertIn(mine, migs)
        other = [u for u in migs if u != mine][0]
        inside = self.spawn(["sleep", "60"])
        outside = self.spawn(["sleep", "60"])
        for p, dev in ((inside, mine), (outside, other)):
            r = run([NVSIM, "proc", "add", "--pid", str(p.pid), "-i", dev, "--mem", "1GiB"],
                    env=self.e)
            self.assertEqual(r.rc, 0, r)
        self.assertTrue(self.wait_for(lambda: self.lines("pid %d " % outside.pid)),
                        self.ag.stderr())
        self.samples(3)
        got = self.lines("pid %d " % outside.pid)
        self.assertEqual(len(got), 1, got)
        # the MIG device's place on its GPU: the order the scenario lists them
        self.assertIn("foreign: pid %d (sleep, user root, uid 0) on GPU 0 " % outside.pid,
                      got[0])
        self.assertTrue(got[0].endswith(": no lease of root covers MIG device 0:%d; action: log"
                                        % migs.index(other)), got[0])
        self.assertEqual(self.lines("pid %d " % inside.pid), [], self.ag.stderr())


# utmp(5), glibc on Linux: struct utmp { short ut_type; pid_t ut_pid; char ut_line[32];
# char ut_id[4]; char ut_user[32]; char ut_host[256]; struct exit_status {short, short};
# int32 ut_session; struct { int32 tv_sec, tv_usec } ut_tv; int32 ut_addr_v6[4];
# char __unused[20]; }, 384 bytes; USER_PROCESS is 7.
UTMP = struct.Struct("hi32s4s32s256shhiii4i20s")
USER_PROCESS = 7


def utmp_entry(user, line, pid):
    return UTMP.pack(USER_PROCESS, pid, line.encode(), line[-4:].encode(), user.encode(), b"",
                     0, 0, 0, int(time.time()), 0, 0, 0, 0, 0, b"")


@unittest.skipUnless(os.geteuid() == 0, "needs root: makes a user, signals their processes")
@unittest.skipUnless(shutil.which("useradd") and shutil.which("setpriv"), "needs useradd, setpriv")
@unittest.skipUnless(UTMP.size == 384, "utmp layout of glibc on Linux")
class Actions(WatchCase):
    @classmethod
    def setUpClass(cls):
        cls.user = "gpuctlw%d" % os.getpid()
        useradd(cls.user)
        pw = pwd.getpwnam(cls.user)
        cls.uid, cls.gid = pw.pw_uid, pw.pw_gid

    @classmethod
    def tearDownClass(cls):
        # the processes the tests started are killed and reaped by their cleanups
        deadline = time.monotonic() + 10
        while subprocess.run(["userdel", cls.user], capture_output=True).returncode != 0:
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)

    def as_user(self, *argv):
        return self.spawn(["setpriv", "--reuid", str(self.uid), "--regid", str(self.gid),
                           "--clear-groups", *argv])

    def test_uid_is_a_person(self):
        self.assertGreaterEqual(self.uid, 1000)  # else terminate would never touch it

    def test_terminate_ends_the_process_on_sigterm(self):
        self.start("enforce = watch\nviolation_action = terminate\nterminate_grace = 5s\n")
        p = self.as_user("sleep", "60")
        self.assertTrue(self.wait_for(lambda: alive(p.pid) and proc_uid(p.pid) == self.uid))
        self.on_gpu(p.pid, 6)
        self.assertEqual(self.wait_for(lambda: p.poll() is not None and "ended"), "ended",
                         self.ag.stderr())
        self.assertEqual(p.returncode, -signal.SIGTERM)
        got = self.lines("pid %d " % p.pid)
        self.assertEqual(len(got), 1, got)
        self.assertIn("foreign: pid %d (sleep, user %s, uid %d) on GPU 6 " % (p.pid, self.user,
                                                                           self.uid), got[0])
        self.assertTrue(got[0].endswith("; action: terminate: SIGTERM"), got[0])
        rows = self.wait_for(self.violations)
        self.assertEqual([(r[0], r[1], r[2], r[3], r[6]) for r in rows],
                         [("foreign", self.user, self.uid, p.pid, "terminate: SIGTERM")])

    def test_terminate_kills_a_process_that_ignores_sigterm_after_the_grace(self):
        self.start("enforce = watch\nviolation_action = terminate\nterminate_grace = 2s\n")
        p = self.as_user(sys.executable, "-c",
                         "import signal, time\n"
                         "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                         "time.sleep(60)\n")
        # the handler is set before the interpreter sleeps: wait for it to reach the sleep
        self.assertTrue(self.wait_for(lambda: sig_ignored(p.pid, signal.SIGTERM)))
        t0 = time.monotonic()
        self.on_gpu(p.pid, 6)
        self.assertEqual(self.wait_for(lambda: p.poll() is not None and "ended"), "ended",
                         self.ag.stderr())
        t1 = time.monotonic()
        self.assertEqual(p.returncode, -signal.SIGKILL)
        # not before the grace (2s) after the SIGTERM, which followed the test's nvsim call
        self.assertGreaterEqual(t1 - t0, 2.0)
        self.assertEqual(len(self.lines("pid %d " % p.pid)), 2, self.ag.stderr())
        kill = self.lines("alive 2s after SIGTERM")
        self.assertEqual(len(kill), 1, self.ag.stderr())
        self.assertTrue(kill[0].endswith("; action: terminate: SIGTERM, SIGKILL after 2s"), kill)
        rows = self.wait_for(lambda: [r for r in self.violations() if "SIGKILL" in r[6]])
        self.assertEqual([(r[3], r[6]) for r in rows],
                         [(p.pid, "terminate: SIGTERM, SIGKILL after 2s")])

    def test_terminate_never_ends_a_system_process_unless_told(self):
        self.start("enforce = watch\nviolation_action = terminate\nterminate_grace = 1s\n")
        p = self.spawn(["sleep", "60"])  # root's
        self.on_gpu(p.pid, 6)
        self.assertTrue(self.wait_for(lambda: self.lines("pid %d " % p.pid)), self.ag.stderr())
        self.samples(15)  # past the grace
        self.assertIsNone(p.poll())
        got = self.lines("pid %d " % p.pid)
        self.assertEqual(len(got), 1, got)
        self.assertTrue(got[0].endswith(
            "; action: terminate: not done (uid 0 < 1000; terminate_system = no)"), got)

    def test_terminate_system_yes_ends_root_processes_too(self):
        self.start("enforce = watch\n[pool sys]\ngpus = 6\nviolation_action = terminate\n"
                   "terminate_system = yes\nterminate_grace = 1s\n")
        p = self.spawn(["sleep", "60"])
        self.on_gpu(p.pid, 6)
        self.assertEqual(self.wait_for(lambda: p.poll() is not None and "ended"), "ended",
                         self.ag.stderr())
        self.assertEqual(p.returncode, -signal.SIGTERM)

    def test_a_forged_owner_record_does_not_cover_a_process(self):
        # anyone may write records into their own owners/<uid>/ (docs/leases.md, "Owner
        # records"). One naming the user's own live process and a GPU that root's job holds is
        # not that lease's record (the job's gpuctl took the lock: "Which record"), so the
        # user's process on that GPU is still foreign there
        self.forged_record(shared=False)

    def test_a_forged_shared_record_does_not_cover_a_process(self):
        # the same beside a shared lease: a shared record counts only when its pid took one of
        # the device's read locks
        self.forged_record(shared=True)

    def forged_record(self, shared):
        self.start("enforce = watch\n")
        self.run_job(3, *(("--share", "--mem", "4GiB") if shared else ()))
        uuid = self.uuid(3)
        p = self.as_user("sleep", "60")
        self.assertTrue(self.wait_for(lambda: alive(p.pid) and proc_uid(p.pid) == self.uid))
        with open("/proc/%d/stat" % p.pid) as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22, proc(5)
        record = {"version": 1, "device": uuid, "pid": p.pid, "pid_start_ticks": ticks,
                  "start_time": int(time.time()), "job_pid": p.pid, "job_start_ticks": ticks,
                  "uid": self.uid, "user": self.user, "command": "sleep 60", "label": None,
                  "created": int(time.time())}
        owners = os.path.join(self.leases, "owners", str(self.uid))
        code = ("import os, sys\n"
                "os.makedirs(sys.argv[1], exist_ok=True); os.chmod(sys.argv[1], 0o755)\n"
                "with open(os.path.join(sys.argv[1], sys.argv[2] + '.json'), 'w') as f:\n"
                "    f.write(sys.argv[3])\n")
        name = uuid + ("@%d" % p.pid if shared else "")  # <UUID>@<tag>.json: shared
        w = self.as_user(sys.executable, "-c", code, owners, name, json.dumps(record))
        self.assertEqual(w.wait(), 0)
        self.assertEqual(os.stat(owners).st_uid, self.uid)
        self.on_gpu(p.pid, 3)
        self.assertTrue(self.wait_for(lambda: self.lines("pid %d " % p.pid)), self.ag.stderr())
        got = self.lines("pid %d " % p.pid)
        self.assertIn("foreign: pid %d (sleep, user %s, uid %d) on GPU 3 " % (
            p.pid, self.user, self.uid), got[0])

    def test_notify_writes_a_line_to_the_users_terminals(self):
        utmp = os.path.join(self.tmp, "utmp")
        mine_m, mine_s = os.openpty()
        other_m, other_s = os.openpty()
        for fd in (mine_m, mine_s, other_m, other_s):
            self.addCleanup(os.close, fd)
        mine, other = os.ttyname(mine_s), os.ttyname(other_s)
        os.chown(mine, self.uid, -1)  # the user's terminal
        # a stale entry: the user's name on a terminal someone else (root) owns now
        with open(utmp, "wb") as f:
            f.write(utmp_entry(self.user, mine[len("/dev/"):], os.getpid()))
            f.write(utmp_entry(self.user, other[len("/dev/"):], os.getpid()))
        self.start("enforce = watch\nviolation_action = notify\n", env={"GPUCTL_UTMP": utmp})
        p = self.as_user("sleep", "60")
        self.assertTrue(self.wait_for(lambda: alive(p.pid) and proc_uid(p.pid) == self.uid))
        self.on_gpu(p.pid, 6)
        text = read_until(mine_m, b"\n", PATIENCE_S)
        self.assertIn("gpuctl agent: violation (foreign): your process %d (sleep) on GPU 6: no "
                      "lease of %s covers GPU 6" % (p.pid, self.user), text)
        self.samples(5)
        self.assertEqual(read_until(other_m, b"\n", 0.2), "")  # not the user's terminal
        self.assertNotIn("violation", read_until(mine_m, b"\n", 0.2))  # once
        got = self.lines("pid %d " % p.pid)
        self.assertEqual(len(got), 1, got)
        self.assertTrue(got[0].endswith("; action: notify: 1 terminal"), got)
        self.assertEqual([r[6] for r in self.wait_for(self.violations)], ["notify: 1 terminal"])
        self.assertIsNone(p.poll())  # notify ends nothing


def proc_uid(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for l in f:
                if l.startswith("Uid:"):
                    return int(l.split()[1])
    except OSError:
        return None
    return None


def sig_ignored(pid, sig):
    """Whether pid ignores sig (SigIgn in /proc/PID/status, proc(5))."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for l in f:
                if l.startswith("SigIgn:"):
                    return bool(int(l.split()[1], 16) & (1 << (sig - 1)))
    except OSError:
        return False
    return False


def read_until(fd, end, timeout):
    """What the pty master fd gives within timeout, until a byte string end has come after
    some text."""
    out = b""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            break
        try:
            out += os.read(fd, 4096)
        except OSError:
            break
        if out.strip() and out.rstrip(b"\r").endswith(end) and b"violation" in out:
            break
    return out.decode(errors="replace")


if __name__ == "__main__":
    unittest.main()
