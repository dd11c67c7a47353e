"""The agent's reliability (issue 27, "Reliability (tests, not promises)"; docs/agent.md,
"Failures" and "Endings"; docs/ledger.md, "Crash safety" and "Clocks"): the real `gpuctl agent`
on the simulated DGX A100, killed with SIGKILL 1,000 times while it writes, on a file system
that fills up, with a wall clock stepped back an hour, with a GPU lost and found again, and read
by `gpuctl report` while it writes.

The agent runs here directly (not under `nvsim exec`, which forks it: a SIGKILL must reach the
agent itself) on a simulated machine whose state `nvsim exec --state-dir` made, with the
variables `nvsim exec` would set (sim/README.md). Expected usage is what each test schedules and
times with its own clock: a lease is held from the moment `select --hold` returns to the moment
`release` returns (test_agent.py); the agent sees a holder at the first sample after it appears
and ends it at the first sample after it is gone (docs/agent.md, "Resolution"), so each GPU of a
record may differ from the schedule by one interval plus the time a sample takes on a loaded
two-core machine (test_agent.SLACK_S).

The kill test's count: 1,000 in the normal build (about a minute: an agent reaches its first
committed sample in about 10 ms here), GPUCTL_AGENT_KILLS in the AddressSanitizer build, where
tests/cli/CMakeLists.txt sets it lower (an instrumented agent starts several times slower, and
the kill test of the ledger itself, test_ledger_crash.py, runs its 1,000 there as well)."""
import json
import os
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import tempfile
import time
import unittest

import test_exporter as tx
from gpuctl_test import (EMPTY_CONFIG, GPUCTL, NVSIM, SIMLIB, GpuctlTestCase, run,
                         wait_until)
from test_agent import SLACK_S

KILLS = int(os.environ.get("GPUCTL_AGENT_KILLS", "1000"))
INTERVAL = 0.1  # the agent's shortest (docs/agent.md): a write every 0.1 s
TOL_PER_GPU = INTERVAL + SLACK_S
SANITIZED = os.environ.get("GPUCTL_SANITIZE") == "1"
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"  # Debian's libfaketime


class Rig:
    """A simulated dgx-a100 (its state kept in a scratch directory), a lease directory and a
    ledger path, and the environment the agent and the test's gpuctl commands run with."""

    def __init__(self, case):
        self.case = case
        self.tmp = tempfile.mkdtemp(prefix="gpuctl-agent-rel-")
        os.chmod(self.tmp, 0o755)
        case.addCleanup(shutil.rmtree, self.tmp, True)
        self.state = os.path.join(self.tmp, "state")
        self.leases = os.path.join(self.tmp, "leases")
        self.ledger = os.path.join(self.tmp, "ledger.db")
        r = run([NVSIM, "exec", "--state-dir", self.state, "dgx-a100", "--", "true"])
        case.assertEqual(r.rc, 0, r)
        self.env = {"NVSIM_STATE_DIR": self.state, "GPUCTL_NVML_LIBRARY": SIMLIB,
                    "GPUCTL_NVIDIA_PROC": os.path.join(self.state, "root", "proc", "driver",
                                                       "nvidia"),
                    "GPUCTL_LEASE_DIR": self.leases, "GPUCTL_CONFIG": EMPTY_CONFIG}
        self.procs = []
        case.addCleanup(self.stop_all)
        case.addCleanup(run, [GPUCTL, "release", "--all"], env=self.env)

    def stop_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()

    def agent_argv(self, port, ledger=None, interval=INTERVAL):
        return [GPUCTL, "agent", "--listen", "127.0.0.1:%d" % port, "--interval", str(interval),
                "--ledger", ledger or self.ledger, "--lease-dir", self.leases]

    def spawn(self, argv, env=None, stderr=subprocess.DEVNULL):
        p = subprocess.Popen(argv, env=tx.test_env(dict(self.env, **(env or {}))),
                             stdout=subprocess.DEVNULL, stderr=stderr)
        self.procs.append(p)
        return p

    def serve(self, argv_of_port, env=None):
        """Starts an agent on a free port and waits for its /healthz: (process, port, its
        stderr file)."""
        for _ in range(5):
            port = tx.free_port()
            errf = open(os.path.join(self.tmp, "agent-%d.err" % port), "w+")
            self.case.addCleanup(errf.close)
            p = self.spawn(argv_of_port(port), env=env, stderr=errf)
            if tx.wait_answer(p, port, "/healthz", tx.START_S, step=0.02):
                return p, port, errf
            if p.poll() is None:
                p.kill()
                p.wait()
                raise AssertionError("the agent did not answer within %ds" % tx.START_S)
            errf.seek(0)
            err = errf.read()
            if "in use" not in err:
                raise AssertionError("the agent exited %d: %s" % (p.returncode, err))
        raise AssertionError("no free port after 5 tries")

    def hold(self, n, only=None):
        """Takes a lease of n GPUs: (the time select returned, the GPUs' UUIDs)."""
        args = [GPUCTL, "select", "-n", str(n), "--hold", "600"]
        if only:
            args += ["--only", only]
        r = run(args, env=self.env)
        t = time.monotonic()
        self.case.assertEqual(r.rc, 0, r)
        return t, r.out.strip().split("=", 1)[1].split(",")

    def release_all(self):
        r = run([GPUCTL, "release", "--all"], env=self.env)
        t = time.monotonic()
        self.case.assertEqual(r.rc, 0, r)
        return t

    def nvsim(self, *args):
        r = run([NVSIM, *args], env={"NVSIM_STATE_DIR": self.state})
        self.case.assertEqual(r.rc, 0, r)

    def foreign(self, index):
        """A bare process of root's on GPU index, with no lease (a workload record)."""
        p = subprocess.Popen(["sleep", "600"])
        self.procs.append(p)
        self.nvsim("proc", "add", "--pid", str(p.pid), "-i", str(index), "--mem", "1GiB",
                   "--util", "50")
        return p


def query(path, sql, args=()):
    """Rows of sql on the ledger at path, opened read-only as gpuctl report opens it."""
    con = sqlite3.connect("file:%s?mode=ro" % path, uri=True, timeout=10)
    try:
        con.row_factory = sqlite3.Row
        return [dict(r) for r in con.execute(sql, args)]
    finally:
        con.close()


def report(path, by="user", ns_of=None):
    """`gpuctl report` of the ledger at path (in the mount namespace of process ns_of)."""
    argv = [GPUCTL, "report", "--ledger", path, "--by", by, "--format", "json"]
    if ns_of:
        argv = ["nsenter", "-t", str(ns_of), "-m", "--", *argv]
    r = run(argv)
    return r, (json.loads(r.out) if r.rc == 0 else None)


# query() run in another process's mount namespace: SQLite resolves the symbolic links of a
# path, and /proc/PID/root reads as "/" (proc(5)), so the ledger is read from inside
NS_QUERY = ("import json, sqlite3, sys\n"
            "con = sqlite3.connect('file:%s?mode=ro' % sys.argv[1], uri=True, timeout=10)\n"
            "con.row_factory = sqlite3.Row\n"
            "print(json.dumps([dict(r) for r in con.execute(sys.argv[2])]))\n")


def query_ns(pid, path, sql):
    r = run(["nsenter", "-t", str(pid), "-m", "--", "python3", "-c", NS_QUERY, path, sql])
    assert r.rc == 0, r
    return json.loads(r.out)




class KillNine(GpuctlTestCase):
    def records_after(self, last_id):
        if not os.path.exists(self.rig.ledger):
            return None
        return query(self.rig.ledger, "SELECT * FROM records WHERE id > ? ORDER BY id",
                     (last_id,))

    def test_kill_9_during_writes(self):
        """KILLS runs of the real agent, each killed with SIGKILL at a moment spread over its
        start (opening the ledger, ending the last run's records, the first samples) and, one
        run in ten, over its steady writes. Two leases (2 GPUs and 1 GPU) and a foreign process
        are held throughout, so every sample writes three records. After each kill:
        - what the test read from the ledger just before the kill is still there (records, their
          last sample, their GPU-seconds), every record of the killed run is open, and its
          GPU-seconds are its GPUs times its span (no interval lost inside a run);
        - the last committed sample is at most one interval (plus a sample's time) before the
          kill: the interval in flight, no more (the median of the steady runs' lags is below
          one interval; each is below 1.1 s, for a sampler held back on a loaded machine);
        - a run that wrote a sample had first ended every earlier record.
        Every 100 kills PRAGMA integrity_check says ok, every 50 `gpuctl report` exits 0. At
        the end, every record of a killed run is ended agent-restart at its last sample."""
        self.rig = rig = Rig(self)
        rig.hold(2)
        rig.hold(1)
        rig.foreign(7)
        port = tx.free_port()
        argv = rig.agent_argv(port)

        # calibrate: how long an agent takes, on this machine now, to commit its first sample
        firsts = []
        last_id = 0
        for _ in range(5):
            t0 = time.monotonic()
            p = rig.spawn(argv, stderr=subprocess.PIPE)
            recs = wait_until(lambda: self.records_after(last_id), "a first sample")
            firsts.append(time.monotonic() - t0)
            p.kill()
            _, err = p.communicate()
            self.assertEqual(p.returncode, -signal.SIGKILL, err)
            last_id = max(r["id"] for r in recs)
        first = sorted(firsts)[2]

        rnd = random.Random(2027)
        outcomes = {"untouched": 0, "opened": 0, "sampled": 0}
        left_open = True  # records of an earlier run are open (the calibration's)
        lags = []  # steady runs: the kill minus the last committed sample's wall clock
        gpu_hours = 0.0
        t_start = time.monotonic()
        for i in range(KILLS):
            steady = i % 10 == 9
            delay = rnd.uniform(first, first + 3 * INTERVAL) if steady else \
                rnd.uniform(0, 1.5 * first)
            p = rig.spawn(argv, stderr=subprocess.PIPE)
            time.sleep(delay)
            seen = self.records_after(last_id) or []
            t_kill = time.time()
            p.send_signal(signal.SIGKILL)
            _, err = p.communicate()
            # killed; it exiting on its own (the port taken, a ledger error) would be a bug
            self.assertEqual(p.returncode, -signal.SIGKILL, (i, err))
            after = {r["id"]: r for r in self.records_after(last_id) or []}
            for r in seen:
                a = after.get(r["id"])
                self.assertIsNotNone(a, (i, r))
                self.assertGreaterEqual(a["last_s"], r["last_s"], (i, r, a))
                self.assertGreaterEqual(a["gpu_s"], r["gpu_s"], (i, r, a))
            for a in after.values():
                self.assertIsNone(a["end_s"], (i, a))
                n_gpus = len(a["gpus"].split(","))
                # (wall and monotonic clocks are read a moment apart: a preempted sampler
                # may shift one by milliseconds; a lost interval is 0.1 s a GPU)
                self.assertAlmostEqual(a["gpu_s"], n_gpus * (a["last_s"] - a["start_s"]),
                                       delta=n_gpus * INTERVAL / 2, msg=(i, a))
            open_before = query(rig.ledger, "SELECT count(*) AS n FROM records"
                                " WHERE id <= ? AND end_s IS NULL", (last_id,))[0]["n"]
            if after:
                outcomes["sampled"] += 1
                self.assertEqual(len(after), 3, (i, after))  # two leases, one workload
                self.assertEqual(open_before, 0, i)  # it ended the earlier ones first
                lag = t_kill - max(a["last_s"] for a in after.values())
                # one interval and a sample's time; a generous bound for one kill on a loaded
                # machine, the strict one for the median below
                self.assertLess(lag, INTERVAL + 2 * SLACK_S, (i, lag))
                if steady:
                    lags.append(lag)
                last_id = max(after)
                left_open = True
            elif left_open:
                # killed before it ended the earlier records, or after (and before a sample)
                outcomes["opened" if open_before == 0 else "untouched"] += 1
                left_open = open_before > 0
            if i % 100 == 99:
                self.assertEqual(query(rig.ledger, "PRAGMA integrity_check")[0]
                                 ["integrity_check"], "ok", i)
            if i % 50 == 49:
                r, rep = report(rig.ledger)
                self.assertEqual(r.rc, 0, (i, r))
                self.assertGreaterEqual(rep["total"]["gpu_hours"], gpu_hours, i)
                gpu_hours = rep["total"]["gpu_hours"]
        took = time.monotonic() - t_start
        print("\n%d kills in %.1f s (first sample after %.1f ms; outcomes %s; median lag %.3f s)"
              % (KILLS, took, first * 1000, outcomes,
                 statistics.median(lags) if lags else float("nan")))
        # the kills landed before the ledger was touched, between its opening (the earlier
        # runs' records ended) and the first sample, and after samples were written
        if KILLS >= 100:
            self.assertTrue(outcomes["untouched"] and outcomes["sampled"], outcomes)
            # a steady run loses half an interval on average, not more
            self.assertLess(statistics.median(lags), INTERVAL, lags)
        if KILLS >= 500:  # about 3 % of kills land there
            self.assertTrue(outcomes["opened"], outcomes)

        # a last agent that runs and stops: every record of a killed run is ended at its last
        # sample as agent-restart
        p, _, errf = rig.serve(lambda port: rig.agent_argv(port))
        wait_until(lambda: self.records_after(last_id), "the last agent's first sample")
        p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(tx.STOP_S), 0)
        self.assertEqual(query(rig.ledger, "PRAGMA integrity_check")[0]["integrity_check"], "ok")
        rows = query(rig.ledger, "SELECT end_reason, count(*) AS n, sum(end_s != last_s) AS bad"
                     " FROM records WHERE id <= ? GROUP BY end_reason", (last_id,))
        self.assertEqual([(r["end_reason"], r["bad"]) for r in rows], [("agent-restart", 0)])
        self.assertEqual(rows[0]["n"], last_id)
        r, _ = report(rig.ledger)
        self.assertEqual(r.rc, 0, r)


def metric(port, name):
    return tx.parse_metrics(tx.http(port, "/metrics")[2])[name][0][1]


def metric_of(port, name, **labels):
    """The value of the series of name with these labels on the page, None without one."""
    for l, v in tx.parse_metrics(tx.http(port, "/metrics")[2]).get(name, []):
        if all(l.get(k) == want for k, want in labels.items()):
            return v
    return None


def stderr_lines(errf, what):
    errf.flush()
    errf.seek(0)
    return [l for l in errf.read().splitlines() if what in l]


@unittest.skipUnless(os.geteuid() == 0 and shutil.which("unshare") and shutil.which("nsenter"),
                     "needs root, unshare(1) and nsenter(1): mounts a tmpfs in a mount"
                     " namespace of its own")
class DiskFull(GpuctlTestCase):
    SIZE_KIB = 640  # the tmpfs: room for a new ledger and its log (at most about 450 KiB)

    def start(self, rig, env=None):
        """The agent with its ledger on a tmpfs of its own: (process, port, stderr, ledger
        path, the tmpfs's path from outside the namespace, records())."""
        disk = os.path.join(rig.tmp, "disk")
        os.mkdir(disk)
        ledger = os.path.join(disk, "ledger.db")

        def argv(port):
            return ["unshare", "-m", "sh", "-c",
                    'mount -t tmpfs -o size=%dk gpuctl-test-full "$0" && exec "$@"' %
                    self.SIZE_KIB, disk, *rig.agent_argv(port, ledger=ledger)]

        p, port, errf = rig.serve(argv, env=env)
        # the agent's view of the tmpfs, from outside its namespace (proc(5), /proc/PID/root)
        inside = "/proc/%d/root%s" % (p.pid, disk)
        wait_until(lambda: os.path.exists(inside + "/ledger.db"), "the ledger")
        self.assertFalse(os.path.exists(ledger), "the tmpfs is visible outside its namespace")

        def records(where=""):
            return query_ns(p.pid, ledger, "SELECT * FROM records " + where)

        return p, port, errf, ledger, inside, records

    def fill(self, inside):
        """Fills the tmpfs: whole blocks, then what is left byte by byte."""
        with open(inside + "/filler", "wb", buffering=0) as f:
            for chunk in (65536, 4096, 1):
                try:
                    while True:
                        f.write(b"\0" * chunk)
                except OSError as e:
                    self.assertEqual(e.errno, 28, e)  # ENOSPC

    def test_enforcement_goes_on_while_the_disk_is_full(self):
        """enforce = watch with the ledger's disk full: a process of no lease of its user's
        (root's, on GPU 7, root holding GPUs 0 and 1) is logged and counted as at any time
        (docs/agent.md, "Violations"), and that its row cannot be recorded is said once."""
        rig = Rig(self)
        conf = os.path.join(rig.tmp, "watch.conf")
        with open(conf, "w") as f:
            f.write("enforce = watch\n")
        p, port, errf, _, inside, records = self.start(rig, env={"GPUCTL_CONFIG": conf})
        rig.hold(2, only="0,1")
        wait_until(records, "a record")
        self.fill(inside)
        wait_until(lambda: stderr_lines(errf, "agent: ledger"), "the full disk said")
        intruder = rig.foreign(7)
        line = wait_until(lambda: stderr_lines(errf, "violation: foreign: pid %d " %
                                               intruder.pid), "the violation")
        self.assertIn("on GPU 7 ", line[0])
        wait_until(lambda: stderr_lines(errf, "violations are logged but not recorded"),
                   "the lost row said")
        # counted on the next sample's page (docs/agent.md, "Violations")
        wait_until(lambda: metric_of(port, "gpuctl_violations_total", kind="foreign") == 1,
                   "the violation counted")
        self.assertIsNone(p.poll())
        p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(tx.STOP_S), 0)

    def test_the_log_does_not_fill_a_small_disk(self):
        """Left alone on its 640 KiB tmpfs, the agent writing three records every 0.1 s never
        fills it: SQLite's log is checkpointed and written again from its start (docs/ledger.md,
        "Crash safety"). With SQLite's default (a checkpoint every 1,000 pages, 4 MiB) the log
        filled this disk in about 5 s and the ledger stopped for good."""
        rig = Rig(self)
        p, _, errf, ledger, inside, records = self.start(rig)
        t0, _ = rig.hold(2)
        rig.foreign(7)
        time.sleep(8)
        self.assertEqual(stderr_lines(errf, "agent: ledger"), [])
        t1 = rig.release_all()
        wait_until(lambda: records("WHERE end_reason = 'release'"), "the release")
        self.assertLess(os.path.getsize(inside + "/ledger.db-wal"), 120 * 4096)
        (lease,) = records("WHERE kind = 'lease'")
        self.assertAlmostEqual(lease["gpu_s"], 2 * (t1 - t0), delta=2 * TOL_PER_GPU)
        p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(tx.STOP_S), 0)

    def test_full_disk_is_said_once_and_the_gap_is_caught_up(self):
        """The ledger on a real file system that fills up: a tmpfs mounted in a mount namespace
        of the agent's own (unshare -m: private propagation by default, unshare(1); the mount
        goes with the namespace when the agent, its last process, exits, so nothing is left
        behind whatever happens), filled by a filler file while a lease of 2 GPUs is held. The
        agent keeps sampling and serving (gpuctl_exporter_samples_total grows), says so once
        (docs/agent.md, "Failures"), says "writing again" once the filler is gone, and the
        lease's record integrates the gap: its GPU-seconds are the held time on each GPU."""
        rig = Rig(self)
        p, port, errf, ledger, inside, records = self.start(rig)
        t0, gpus = rig.hold(2)
        wait_until(records, "a record")

        self.fill(inside)
        wait_until(lambda: stderr_lines(errf, "agent: ledger"), "the agent to say so")
        n0 = metric(port, "gpuctl_exporter_samples_total")
        time.sleep(1.5)
        n1 = metric(port, "gpuctl_exporter_samples_total")
        self.assertGreaterEqual(n1 - n0, 5, "sampling went on: %d -> %d" % (n0, n1))
        self.assertIsNone(p.poll())
        (line,) = stderr_lines(errf, "agent: ledger")  # once, whatever the number of samples
        self.assertRegex(line, r"^gpuctl: agent: ledger %s: .*full.* \(sampling and serving go"
                               r" on; trying again every sample\)$" % ledger)

        os.unlink(inside + "/filler")
        wait_until(lambda: stderr_lines(errf, "writing again"), "writing again")
        time.sleep(0.5)
        t1 = rig.release_all()
        wait_until(lambda: records("WHERE end_reason = 'release'"), "the release")
        lines = stderr_lines(errf, "agent: ledger")
        self.assertEqual(lines[1:], ["gpuctl: agent: ledger %s: writing again" % ledger], lines)
        r, rep = report(ledger, ns_of=p.pid)
        self.assertEqual(r.rc, 0, r)
        (group,) = rep["groups"]
        got, want = group["gpu_hours"] * 3600, 2 * (t1 - t0)
        self.assertAlmostEqual(got, want, delta=2 * TOL_PER_GPU,
                               msg="ledger %.3f GPU-s, held %.3f" % (got, want))
        (rec,) = records()
        self.assertEqual(sorted(rec["gpus"].split(",")), sorted(gpus))
        p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(tx.STOP_S), 0)


@unittest.skipUnless(os.path.exists(FAKETIME_LIB), "needs libfaketime (Debian package libfaketime)")
class WallClockStepsBack(GpuctlTestCase):
    def test_ntp_steps_make_no_negative_duration(self):
        """The agent's wall clock stepped back an hour while a lease of 2 GPUs is held, as NTP
        steps a clock, and a second later forward again. libfaketime (Debian's libfaketime
        0.9.10, README "Changing the 'x' modifier during run-time": a FAKETIME_TIMESTAMP_FILE
        with FAKETIME_NO_CACHE=1 is read at every call, so an offset written there takes effect
        at once) fakes CLOCK_REALTIME only: FAKETIME_DONT_FAKE_MONOTONIC=1 (README, "usage
        basics") leaves CLOCK_MONOTONIC, where the agent's durations come from (docs/ledger.md,
        "Clocks"), as it is. The middle second's usage is then stamped an hour early, yet the
        record's GPU-seconds, every usage row's and the report's are the held time: none
        negative, no hour gained."""
        rig = Rig(self)
        rc = os.path.join(rig.tmp, "faketime.rc")

        def offset(text):
            with open(rc + ".new", "w") as f:
                f.write(text + "\n")
            os.rename(rc + ".new", rc)  # whole, for a reader that reads it at every call

        offset("+0")
        preload = FAKETIME_LIB
        if SANITIZED:  # the ASan runtime must come first in the list (ASan's link-order check)
            preload = os.environ["GPUCTL_PYTHON_PRELOAD"] + ":" + preload
        env = {"LD_PRELOAD": preload, "FAKETIME_TIMESTAMP_FILE": rc, "FAKETIME_NO_CACHE": "1",
               "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
        p, _, errf = rig.serve(lambda port: rig.agent_argv(port), env=env)
        # libfaketime's shared memory, named after the process (README: left behind by a killed
        # one)
        for f in ("faketime_shm_%d", "sem.faketime_sem_%d"):
            self.addCleanup(lambda path: os.path.exists(path) and os.unlink(path),
                            "/dev/shm/" + f % p.pid)
        t0, _ = rig.hold(2)
        time.sleep(1.0)
        offset("-3600")  # back an hour
        time.sleep(1.0)
        offset("+0")  # and forward again, an hour at once
        time.sleep(1.0)
        t1 = rig.release_all()
        wait_until(lambda: query(rig.ledger, "SELECT id FROM records WHERE end_s IS NOT NULL"),
                   "the release")
        p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(tx.STOP_S), 0, errf.read())
        held = t1 - t0
        (rec,) = query(rig.ledger, "SELECT * FROM records")
        self.assertEqual(rec["end_reason"], "release")
        # the steps happened: the middle second's usage is stamped an hour before the start
        early = query(rig.ledger, "SELECT sum(gpu_s) AS s FROM usage WHERE t0 < ?",
                      (rec["start_s"] - 3000,))[0]["s"]
        self.assertAlmostEqual(early, 2 * 1.0, delta=2 * TOL_PER_GPU)
        self.assertAlmostEqual(rec["end_s"] - rec["start_s"], held, delta=TOL_PER_GPU)
        self.assertAlmostEqual(rec["gpu_s"], 2 * held, delta=2 * TOL_PER_GPU)
        for u in query(rig.ledger, "SELECT * FROM usage"):
            self.assertGreaterEqual(u["gpu_s"], 0, u)
            self.assertGreaterEqual(u["busy_s"], 0, u)
            self.assertGreaterEqual(u["t1"], u["t0"], u)
        self.assertAlmostEqual(sum(u["gpu_s"] for u in query(rig.ledger, "SELECT * FROM usage")),
                               rec["gpu_s"], delta=1e-4)
        for by in ("user", "day", "gpu"):
            r, rep = report(rig.ledger, by)
            self.assertEqual(r.rc, 0, r)
            for g in rep["groups"] + [rep["total"]]:
                for k in ("gpu_hours", "busy_gpu_hours", "idle_gpu_hours"):
                    self.assertGreaterEqual(g[k], 0, (by, g))
            self.assertAlmostEqual(rep["total"]["gpu_hours"] * 3600, 2 * held,
                                   delta=2 * TOL_PER_GPU, msg=by)


class LostAndFound(GpuctlTestCase):
    def test_a_gpu_lost_and_found_again(self):
        """Two leases: A holds GPU 3 alone, B holds GPUs 4 and 5. GPUs 3 and 4 are lost
        (`nvsim set lost=1`: every query of them answers GPU_IS_LOST) for about 1.5 s and then
        found again. docs/agent.md, "Endings": a lost GPU is a failed one, so a holder seen on
        it before ends "health-failover" when it is lost; seen again, it is a new record of the
        same key. A holder with a GPU left ends "health-failover" too and goes on at once in a
        new record on that GPU, which the found GPU joins: its usage shows the gap."""
        rig = Rig(self)
        p, _, errf = rig.serve(lambda port: rig.agent_argv(port))
        ta, (gpu3,) = rig.hold(1, only="3")
        tb, gpus_b = rig.hold(2, only="4,5")
        time.sleep(1.0)
        for i in (3, 4):
            rig.nvsim("set", "-i", str(i), "lost=1")
        t_lost = time.monotonic()
        time.sleep(1.5)
        for i in (3, 4):
            rig.nvsim("set", "-i", str(i), "lost=0")
        t_found = time.monotonic()
        time.sleep(1.0)
        t_end = rig.release_all()
        wait_until(lambda: len(query(rig.ledger, "SELECT id FROM records"
                                     " WHERE end_s IS NOT NULL")) == 4, "four records ended")
        p.send_signal(signal.SIGTERM)
        self.assertEqual(p.wait(tx.STOP_S), 0)
        r = run([GPUCTL, "list", "--format", "json"], env=rig.env)
        self.assertEqual(r.rc, 0, r)
        uuid = {g["index"]: g["uuid"] for g in r.json()["gpus"]}
        self.assertEqual((gpu3, sorted(gpus_b)), (uuid[3], sorted([uuid[4], uuid[5]])))
        a1, b1, b2, a2 = query(rig.ledger, "SELECT * FROM records ORDER BY id")
        # A: ended when its GPU was lost, a new record of the same key when found again
        self.assertEqual((a1["key"], a1["gpus"], a1["end_reason"]),
                         (a2["key"], uuid[3], "health-failover"))
        self.assertEqual((a2["gpus"], a2["end_reason"]), (uuid[3], "release"))
        self.assertAlmostEqual(a1["gpu_s"], t_lost - ta, delta=TOL_PER_GPU)
        self.assertAlmostEqual(a2["gpu_s"], t_end - t_found, delta=TOL_PER_GPU)
        self.assertAlmostEqual(a2["start_s"] - a1["end_s"], t_found - t_lost,
                               delta=2 * TOL_PER_GPU)
        # B: ended on both GPUs when GPU 4 was lost, and at once a new record of the same key
        # on GPU 5, which GPU 4 joined when it was found again
        self.assertEqual((b1["end_reason"], sorted(b1["gpus"].split(","))),
                         ("health-failover", sorted([uuid[4], uuid[5]])))
        self.assertEqual((b2["key"], b2["end_reason"], sorted(b2["gpus"].split(","))),
                         (b1["key"], "release", sorted([uuid[4], uuid[5]])))
        self.assertEqual(b2["start_s"], b1["end_s"])

        def usage(rec):
            return {u["gpu"]: u["s"] for u in query(
                rig.ledger, "SELECT gpu, sum(gpu_s) AS s FROM usage WHERE record = ?"
                " GROUP BY gpu", (rec["id"],))}
        u1, u2 = usage(b1), usage(b2)
        self.assertAlmostEqual(u1[uuid[4]], t_lost - tb, delta=TOL_PER_GPU)
        self.assertAlmostEqual(u1[uuid[5]], t_lost - tb, delta=TOL_PER_GPU)
        self.assertAlmostEqual(u2[uuid[4]], t_end - t_found, delta=TOL_PER_GPU)
        self.assertAlmostEqual(u2[uuid[5]], t_end - t_lost, delta=TOL_PER_GPU)
        # GPU 5 was held throughout: the two records together lose no second of it
        self.assertAlmostEqual(u1[uuid[5]] + u2[uuid[5]], t_end - tb, delta=TOL_PER_GPU)


class ReportWhileWriting(GpuctlTestCase):
    REPORTS = 50

    def test_report_50_times_while_the_agent_writes(self):
        """`gpuctl report` 50 times while the agent writes every 0.1 s (a lease of 3 GPUs and a
        foreign process, so every sample writes): each exits 0, reads one consistent snapshot
        (its groups add up to its total, busy plus idle is the total, no record half written:
        the jobs are the two holders) and no total is below the one before."""
        rig = Rig(self)
        p, _, errf = rig.serve(lambda port: rig.agent_argv(port))
        rig.hold(3)
        rig.foreign(7)
        wait_until(lambda: len(query(rig.ledger, "SELECT id FROM records WHERE gpu_s > 0")) == 2,
                   "both holders in the ledger")
        last = first = None
        for i in range(self.REPORTS):
            time.sleep(0.02)  # reports spread over a few seconds of samples
            for by in ("user", "gpu"):
                r, rep = report(rig.ledger, by)
                self.assertEqual(r.rc, 0, (i, r))
                t = rep["total"]
                self.assertAlmostEqual(sum(g["gpu_hours"] for g in rep["groups"]),
                                       t["gpu_hours"], delta=1e-9)
                self.assertAlmostEqual(t["busy_gpu_hours"] + t["idle_gpu_hours"],
                                       t["gpu_hours"], delta=1e-9)
                self.assertEqual(t["jobs"], 2, (i, by, rep))
                if by == "user":
                    for k in ("gpu_hours", "busy_gpu_hours"):
                        self.assertGreaterEqual(t[k], (last or t)[k], (i, k))
                    self.assertGreater(t["gpu_hours"], 0, i)
                    first, last = first or t, t
        self.assertIsNone(p.poll(), "the agent wrote all along")
        # and it wrote meanwhile: the reports saw the totals grow, to no more than it has now
        self.assertGreater(last["gpu_hours"], first["gpu_hours"])
        n = query(rig.ledger, "SELECT sum(gpu_s) AS s FROM records")[0]["s"]
        self.assertGreaterEqual(n, last["gpu_hours"] * 3600 - 1e-5)


if __name__ == "__main__":
    unittest.main()
