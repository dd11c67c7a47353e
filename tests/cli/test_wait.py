"""Waiting for leases end to end (docs/leases.md, "Waiting"): `run --wait` and
`select --hold --wait` wait in line without polling, give up after --wait=SECONDS (exit 3, one
line), fail at once when no lease could ever satisfy them, serve the first in line first (a
4-GPU request is not starved by 1-GPU ones), leave nothing behind on SIGTERM, and `ps --waiting`
lists the line. The race test runs 200 waiters with random kills; the simulated CUDA driver's
ledger is the witness that no two jobs ever share a GPU.

Expected values come from docs/leases.md and the scenario (dgx-a100: 8 GPUs), never from
gpuctl's own output. Each test has a lease directory of its own; seeds are fixed.

GPUCTL_WAIT_RACE_N sizes the race test (default 200; the ASan build may use fewer)."""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

from gpuctl_test import (BUILD, EXIT_NOMATCH, GPUCTL, NVSIM, GpuctlTestCase, run)

LOAD = os.path.join(BUILD, "bin", "nvsim-load")

# Helpers of the driver, a Python program run inside `nvsim exec dgx-a100` (one simulated
# machine with a ledger), so that it can start, signal and time gpuctl processes itself.
DRIVER_HEAD = textwrap.dedent(r'''
    import json, os, random, signal, subprocess, sys, time
    GPUCTL, LOAD = os.environ["GPUCTL"], os.environ["LOAD"]

    def g(*args, timeout=60):
        p = subprocess.run([GPUCTL, *args], capture_output=True, text=True, timeout=timeout)
        return {"rc": p.returncode, "out": p.stdout, "err": p.stderr}

    def spawn(*args, out=subprocess.DEVNULL):
        return subprocess.Popen([GPUCTL, *args], stdout=out, stderr=subprocess.PIPE, text=True)

    def load(seconds):
        return ["--", LOAD, "--seconds", str(seconds), "--mem", "1MiB"]

    def waiting():
        return json.loads(g("ps", "--waiting", "--format", "json")["out"])["waiting"]

    def leased():
        return [d for d in json.loads(g("ps", "--format", "json")["out"])["devices"]
                if d["state"] == "leased"]

    def ledger():
        try:
            with open(os.path.join(os.environ["NVSIM_STATE_DIR"], "ledger.jsonl")) as f:
                return [json.loads(l) for l in f if l.startswith("{")]
        except FileNotFoundError:
            return []

    def until(pred, timeout=20.0):
        end = time.time() + timeout
        while time.time() < end:
            if pred():
                return True
            time.sleep(0.02)
        return pred()

    RESULT = {}
''')
DRIVER_TAIL = "\nprint(json.dumps(RESULT))\n"


@unittest.skipUnless(os.path.exists(LOAD), "nvsim-load not built")
class Wait(GpuctlTestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gpuctl-wait-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.dir = os.path.join(self.tmp, "leases")  # personal: created by gpuctl itself

    def drive(self, body, timeout=120):
        path = os.path.join(self.tmp, "driver.py")
        with open(path, "w") as f:
            f.write(DRIVER_HEAD + textwrap.dedent(body) + textwrap.dedent(self.TAIL) + DRIVER_TAIL)
        r = run([NVSIM, "exec", "dgx-a100", "--", sys.executable, path],
                env={"GPUCTL": GPUCTL, "LOAD": LOAD, "GPUCTL_LEASE_DIR": self.dir},
                timeout=timeout)
        self.assertEqual(r.rc, 0, r)
        return json.loads(r.out.strip().splitlines()[-1])

    def assertNothingLeft(self, res):
        self.assertEqual(res["leased_after"], [], res)
        self.assertEqual(res["waiting_after"], [], res)
        self.assertEqual(res["tickets_after"], [], res)

    # What every driver records at its end: leases, live waiters and ticket files left.
    TAIL = '''
        until(lambda: not leased(), timeout=10)  # a released holder takes a moment to exit
        RESULT["leased_after"] = leased()
        RESULT["waiting_after"] = waiting()
        q = os.path.join(os.environ["GPUCTL_LEASE_DIR"], "queue")
        RESULT["tickets_after"] = sorted(
            os.path.join(u, t) for u in (os.listdir(q) if os.path.isdir(q) else [])
            for t in os.listdir(os.path.join(q, u)))
    '''

    def test_fallback_retry_is_not_put_off_by_events_that_change_nothing(self):
        # issue 16: a waiter's 2 s fallback (for what changes without a file event, here a
        # foreign process ending) counts from its last try, not from its last event: a reader
        # opening the lease directory again and again does not put it off for ever
        res = self.drive('''
            RESULT["hold"] = g("select", "-n", "7", "--only", "1-7", "--hold", "60")["rc"]
            env = dict(os.environ, CUDA_VISIBLE_DEVICES="0")
            busy = subprocess.Popen([LOAD, "--seconds", "60"], env=env)
            def gpu0_busy():
                ps = json.loads(g("ps", "--format", "json")["out"])["devices"]
                return any(d["index"] == 0 and d["state"] == "busy" for d in ps)
            RESULT["busy"] = until(gpu0_busy)
            w = spawn("run", "-n", "1", "--wait=60", *load(0))
            RESULT["queued"] = until(lambda: len(waiting()) == 1)
            busy.kill()
            busy.wait()
            end = time.time() + 20
            while w.poll() is None and time.time() < end:
                g("ps")  # opens the lease directory: events, nothing changed
            RESULT["rc"] = w.poll()
            if RESULT["rc"] is None:
                w.kill()
            RESULT["err"] = w.communicate(timeout=30)[1]
            g("release", "--all")
        ''')
        self.assertEqual(res["hold"], 0, res)
        self.assertTrue(res["busy"], res)
        self.assertTrue(res["queued"], res)
        self.assertEqual(res["rc"], 0, res)  # it got GPU 0 once the foreign process ended
        self.assertNothingLeft(res)

    def test_waits_then_runs_when_released(self):
        res = self.drive('''
            h = g("select", "-n", "8", "--hold", "60")
            RESULT["hold"] = h["rc"]
            w = spawn("run", "-n", "2", "--wait", *load(0.1))
            until(lambda: len(waiting()) == 1 or w.poll() is not None)
            RESULT["running_after_wait"] = w.poll() is None
            RESULT["ledger_before"] = len(ledger())
            RESULT["line"] = waiting()
            RESULT["pid"] = w.pid
            RESULT["release"] = g("release", "--all")["rc"]
            _, err = w.communicate(timeout=30)
            RESULT["rc"], RESULT["err"] = w.returncode, err
            RESULT["ledger"] = ledger()
        ''')
        self.assertEqual(res["hold"], 0, res)
        self.assertTrue(res["running_after_wait"], res)
        self.assertEqual(res["ledger_before"], 0, res)
        (w,) = res["line"]
        self.assertEqual((w["position"], w["pid"], w["count"]), (1, res["pid"], 2), res)
        self.assertEqual(res["release"], 0, res)
        self.assertEqual(res["rc"], 0, res)
        self.assertEqual([len(l["devices"]) for l in res["ledger"]], [2], res)
        self.assertNothingLeft(res)

    def test_wait_timeout_gives_up(self):
        res = self.drive('''
            g("select", "-n", "7", "--hold", "60")
            t = time.time()
            RESULT["r"] = g("run", "-n", "2", "--wait=1", *load(0.1))
            RESULT["took"] = time.time() - t
            g("release", "--all")
        ''')
        r = res["r"]
        self.assertEqual(r["rc"], EXIT_NOMATCH, res)
        lines = [l for l in r["err"].splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, res)
        self.assertTrue(lines[0].startswith("gpuctl: run: waited 1 s: "), res)
        self.assertIn("leased", lines[0], res)
        self.assertGreaterEqual(res["took"], 0.9, res)
        self.assertNothingLeft(res)

    def test_never_satisfiable_fails_at_once(self):
        res = self.drive('''
            g("select", "-n", "8", "--hold", "60")
            RESULT["more"] = g("run", "-n", "9", "--wait", *load(0.1), timeout=20)
            RESULT["only"] = g("run", "-n", "3", "--only", "0,1", "--wait", *load(0.1),
                               timeout=20)
            RESULT["hold"] = g("select", "-n", "2", "--exclude", "0,1,2,3,4,5,6", "--hold", "60",
                               "--wait", timeout=20)
            g("release", "--all")
        ''')
        for k in ("more", "only", "hold"):
            r = res[k]
            self.assertEqual(r["rc"], EXIT_NOMATCH, res)
            lines = [l for l in r["err"].splitlines() if l.strip()]
            self.assertEqual(len(lines), 1, res)
            self.assertIn("can never be satisfied", lines[0], res)
        self.assertNothingLeft(res)

    def test_first_in_line_is_not_starved(self):
        # Two holders of 4 GPUs each. A (4 GPUs) waits first, then six 1-GPU Bs. Releasing the
        # first holder frees 4 GPUs that every B could use: first come, first served gives all
        # four to A while every B keeps waiting (no backfill: A could use each of them).
        res = self.drive('''
            h1 = g("select", "-n", "4", "--hold", "60", "--label", "H1")["out"]
            h2 = g("select", "-n", "4", "--hold", "60", "--label", "H2")["out"]
            def held(label):
                return [d["device"] for d in leased() if (d["owner"] or {}).get("label") == label]
            RESULT["h"] = [len(held("H1")), len(held("H2"))]
            a_out = os.path.join(os.environ["NVSIM_STATE_DIR"], "a.out")
            a = spawn("run", "-n", "4", "--wait", "--label", "A", *load(1.0),
                      out=open(a_out, "w"))
            until(lambda: len(waiting()) == 1)
            bs = []
            for i in range(6):
                bs.append(spawn("run", "-n", "1", "--wait", "--label", "B", *load(0.2)))
            until(lambda: len(waiting()) == 7)
            RESULT["line"] = [(w["pid"], w["count"]) for w in waiting()]
            RESULT["a"], RESULT["bs"] = a.pid, [b.pid for b in bs]
            h1_devices = held("H1")
            g("release", "-i", ",".join(h1_devices))
            RESULT["a_started"] = until(lambda: len(held("A")) == 4)
            RESULT["a_devices"] = sorted(held("A")) == sorted(h1_devices)
            RESULT["b_held"] = len(held("B"))
            RESULT["b_waiting"] = len(waiting())
            # A's job is running (nvsim-load says "ready" once its GPUs are open; its ledger
            # start is taken before that) before the Bs may have any GPU
            until(lambda: open(a_out).read().startswith("ready"))
            g("release", "--all")
            RESULT["rcs"] = [p.wait(timeout=60) for p in [a] + bs]
            RESULT["ledger"] = ledger()
        ''')
        self.assertEqual(res["h"], [4, 4], res)
        # A came first and is first in line; the Bs follow.
        self.assertEqual(res["line"][0], [res["a"], 4], res)
        self.assertEqual(sorted(p for p, _ in res["line"][1:]), sorted(res["bs"]), res)
        self.assertTrue(res["a_started"], res)
        self.assertTrue(res["a_devices"], res)
        self.assertEqual((res["b_held"], res["b_waiting"]), (0, 6), res)
        self.assertEqual(res["rcs"], [0] * 7, res)
        led = res["ledger"]
        self.assertEqual(sorted(len(l["devices"]) for l in led), [1] * 6 + [4], res)
        (a,) = [l for l in led if len(l["devices"]) == 4]
        # Every B could use every GPU: none started before A did.
        for l in led:
            if l is not a:
                self.assertGreaterEqual(l["start"], a["start"], res)
        self.assertNothingLeft(res)

    def test_plain_select_keeps_off_what_a_waiter_could_use(self):
        # Issue 25, item 6: a plain `select` (no lease) must not point a job at a GPU that a
        # waiter is first in line for (docs/leases.md, "Fairness"): a holder has 0-5, A waits
        # for 4 of 0,1,2,3,6. Of the free 6 and 7, 6 is A's first; 7 A could never use.
        res = self.drive('''
            g("select", "-n", "6", "--only", "0,1,2,3,4,5", "--hold", "60", "--label", "H")
            a = spawn("run", "-n", "4", "--only", "0,1,2,3,6", "--wait", "--label", "A",
                      *load(0.2))
            RESULT["queued"] = until(lambda: len(waiting()) == 1)
            RESULT["one"] = g("select", "-n", "1", "--ids", "index")
            RESULT["two"] = g("select", "-n", "2", "--ids", "index")
            RESULT["hold"] = g("select", "-n", "2", "--hold", "5")
            g("release", "--all")
            RESULT["a_rc"] = a.wait(timeout=60)
        ''')
        self.assertTrue(res["queued"], res)
        self.assertEqual(res["one"]["rc"], 0, res)
        self.assertTrue(res["one"]["out"].endswith(" CUDA_VISIBLE_DEVICES=7\n"), res)
        for r in (res["two"], res["hold"]):
            self.assertEqual(r["rc"], EXIT_NOMATCH, res)
            self.assertEqual(r["err"].count("\n"), 1, res)
            self.assertIn("leased: 0,1,2,3,4,5,6", r["err"], res)
            self.assertIn("(1 waiter(s) ahead, who could use 5 device(s))", r["err"], res)
        self.assertEqual(res["a_rc"], 0, res)
        self.assertNothingLeft(res)

    def test_sigterm_leaves_nothing(self):
        res = self.drive('''
            g("select", "-n", "8", "--hold", "60")
            w = spawn("run", "-n", "1", "--wait", *load(0.1))
            until(lambda: len(waiting()) == 1)
            w.send_signal(signal.SIGTERM)
            RESULT["rc"] = w.wait(timeout=10)
            i = spawn("run", "-n", "1", "--wait", *load(0.1))
            until(lambda: len(waiting()) == 1)
            i.send_signal(signal.SIGINT)
            RESULT["rc_int"] = i.wait(timeout=10)
            RESULT["line"] = waiting()
            g("release", "--all")
            RESULT["ledger"] = ledger()
        ''')
        self.assertEqual(res["rc"], 143, res)
        self.assertEqual(res["rc_int"], 130, res)
        self.assertEqual(res["line"], [], res)
        self.assertEqual(res["ledger"], [], res)
        self.assertNothingLeft(res)

    def test_race(self):
        n = int(os.environ.get("GPUCTL_WAIT_RACE_N", "200"))
        res = self.drive('''
            N, MAXC = %d, 40
            rnd = random.Random(7)
            plan = []
            for i in range(N):
                k, s = rnd.randint(1, 4), round(rnd.uniform(0.05, 0.3), 3)
                kill = rnd.random() < 0.2
                plan.append({"k": k, "s": s, "kill": kill,
                             "target": rnd.choice(["gpuctl", "job"]) if kill else None,
                             "at": rnd.uniform(0.0, 1.5)})
            running, todo, t0 = {}, list(range(N)), time.time()
            def children(pid):
                try:
                    with open("/proc/%%d/task/%%d/children" %% (pid, pid)) as f:
                        return [int(x) for x in f.read().split()]
                except OSError:
                    return []
            while todo or running:
                while todo and len(running) < MAXC:
                    i = todo.pop(0)
                    p = plan[i]
                    p["proc"] = spawn("run", "-n", str(p["k"]), "--wait", *load(p["s"]))
                    p["t"] = time.time()
                    running[i] = p
                for i, p in list(running.items()):
                    if p["kill"] and "killed" not in p and time.time() - p["t"] >= p["at"]:
                        kids = children(p["proc"].pid) if p["target"] == "job" else []
                        victim = kids[0] if kids else p["proc"].pid
                        p["killed"] = "job" if kids else "gpuctl"
                        try:
                            os.kill(victim, signal.SIGKILL)
                        except OSError:
                            pass
                    rc = p["proc"].poll()
                    if rc is not None and (not p["kill"] or "killed" in p):
                        p["rc"] = rc
                        p["err"] = p["proc"].stderr.read()
                        del running[i]
                time.sleep(0.01)
            # a job whose gpuctl was killed lives on: wait until every lease has ended
            until(lambda: not leased(), timeout=30)
            # dead waiters' tickets go with the user's next select-and-lease
            RESULT["last"] = g("run", "-n", "1", "--", "true")["rc"]
            RESULT["took"] = time.time() - t0
            RESULT["runs"] = [{"k": p["k"], "kill": p["kill"], "rc": p["rc"], "err": p["err"]}
                              for p in plan]
            RESULT["ledger"] = ledger()
        ''' % n, timeout=300)
        runs, led = res["runs"], res["ledger"]
        self.assertEqual(res["last"], 0, res)
        for r in runs:
            if not r["kill"]:
                self.assertEqual(r["rc"], 0, r)
        ok = sum(1 for r in runs if not r["kill"])
        self.assertGreaterEqual(len(led), ok, res["took"])
        by_gpu = {}
        for l in led:
            for d in l["devices"]:
                by_gpu.setdefault(d["uuid"], []).append((l["start"], l["end"], l["pid"]))
        for uuid, spans in by_gpu.items():
            spans.sort()
            for (s1, e1, p1), (s2, e2, p2) in zip(spans, spans[1:]):
                self.assertLessEqual(e1, s2, "pids %d and %d overlap on %s" % (p1, p2, uuid))
        self.assertNothingLeft(res)
        sys.stderr.write("race: %d requests in %.1f s\n" % (len(runs), res["took"]))


class LockDirEvents:
    """inotify on DIR/locks for what wakes a waiter (docs/leases.md "Wake-ups": the close of a
    lock file, written or not) and opens; read with the kernel's own event stream."""
    MASK = 0x20 | 0x08 | 0x10  # IN_OPEN | IN_CLOSE_WRITE | IN_CLOSE_NOWRITE

    def __init__(self, path):
        import ctypes
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        assert self.fd >= 0, ctypes.get_errno()
        wd = self.libc.inotify_add_watch(self.fd, os.fsencode(path), self.MASK)
        assert wd >= 0, ctypes.get_errno()

    def names(self):
        """The file names of the events since the last call (those of locks/ itself, which
        every gpuctl opening the lease directory causes and waiters ignore, left out)."""
        import struct
        out = []
        while True:
            try:
                buf = os.read(self.fd, 65536)
            except BlockingIOError:
                return out
            i = 0
            while i < len(buf):
                _, _, _, n = struct.unpack_from("iIII", buf, i)
                if n:
                    out.append(buf[i + 16:i + 16 + n].rstrip(b"\0").decode())
                i += 16 + n

    def close(self):
        os.close(self.fd)


class ProbesWakeNoWaiter(GpuctlTestCase):
    """Issue 16: readers (ps, the exporter, select) and select-and-lease tries that fail tell
    held from free lock files from /proc/locks, opening none: so they cause none of the
    events an idle waiter wakes up on. Only what changes a lease does."""

    def test_reads_and_failed_tries_open_no_lock_file(self):
        from test_exporter import Exporter
        from test_leases import direct_env
        d = tempfile.mkdtemp(prefix="gpuctl-wake-")
        self.addCleanup(shutil.rmtree, d, True)
        ld = os.path.join(d, "leases")
        env = direct_env(ld)
        r = run([GPUCTL, "select", "-n", "8", "--hold", "60"], env=env)
        self.assertEqual(r.rc, 0, r)
        self.addCleanup(run, [GPUCTL, "release", "--all"], env=env)
        ev = LockDirEvents(os.path.join(ld, "locks"))
        self.addCleanup(ev.close)
        for argv in (["ps"], ["ps", "--format", "json"], ["select", "-n", "1"],
                     ["run", "-n", "1", "--", "true"], ["select", "-n", "1", "--hold", "5"]):
            r = run([GPUCTL, *argv], env=env)
            self.assertEqual(r.rc, EXIT_NOMATCH if argv[0] != "ps" else 0, (argv, r))
            self.assertEqual(ev.names(), [], argv)
        # the exporter, sampling leases every 0.1 s
        with Exporter("dgx-a100", env={"GPUCTL_LEASE_DIR": ld}, interval="0.1") as ex:
            ex.wait_for(lambda m: m["gpuctl_exporter_samples_total"][0][1] >= 10 and
                        m["gpuctl_exporter_last_lease_success"][0][1] == 1, "10 samples")
        self.assertEqual(ev.names(), [], "exporter")
        # the control: a lease that ends is seen (the watch works)
        self.assertEqual(run([GPUCTL, "release", "--all"], env=env).rc, 0)
        self.assertTrue(any(n.endswith(".lock") for n in ev.names()))


if __name__ == "__main__":
    unittest.main()
