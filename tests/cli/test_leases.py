"""Leases end to end (docs/leases.md): concurrent `gpuctl run`s never share a GPU (the simulated
CUDA driver's ledger is the witness), a lease lives while gpuctl or its job lives, `select --hold`
and `release`, `ps` (table and JSON), `lease init`, and, as root, the safety rules of a shared
lease directory against a second user.

Expected values come from docs/leases.md, docs/json.md and the scenario files (UUIDs, GPU and MIG
counts), never from gpuctl's own output. Every test uses a lease directory of its own under a
private temporary directory: never /run/gpuctl."""
import errno
import fcntl
import json
import os
import pwd
import random
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import unittest

from cli_facts import Machine
from gpuctl_test import (BUILD, EMPTY_CONFIG, EXIT_FAILURE, EXIT_NOMATCH, EXIT_OK, EXIT_USAGE, GPUCTL,
                         NVSIM, SCENARIOS, SIMLIB, GpuctlTestCase, run, sim_sh)

LOAD = os.path.join(BUILD, "bin", "nvsim-load")
A100 = Machine("dgx-a100")
UUIDS = [g["uuid"] for g in A100.gpus]
EXIT_BUSY = 6  # docs/gpuctl.1 EXIT STATUS: select.lock held past its bound


def short_uuid(u):
    # format_short_uuid: the prefix and the first group of hex digits ("GPU-1a2b3c4d").
    return "-".join(u.split("-")[:2])


def me():
    return pwd.getpwuid(os.geteuid()).pw_name


def direct_env(lease_dir, scenario="dgx-a100", extra=None):
    """gpuctl on a read-only simulated machine (no nvsim exec): the test can signal it."""
    env = dict(os.environ)
    for k in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES",
              "SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "NVSIM_STATE_DIR"):
        env.pop(k, None)
    env.update({"GPUCTL_NVML_LIBRARY": SIMLIB,
                "NVSIM_SCENARIO": os.path.join(SCENARIOS, scenario + ".json"),
                "GPUCTL_LEASE_DIR": lease_dir})
    if extra:
        env.update(extra)
    return env


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def proc_state(pid):
    """The one-letter state of process pid (proc(5): /proc/PID/stat, after the name)."""
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def pending_signals(pid):
    """The signals pending on process pid (its own and its thread group's), from
    /proc/PID/status (proc(5): SigPnd and ShdPnd, hexadecimal masks, bit n-1 for signal n)."""
    mask = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(("SigPnd:", "ShdPnd:")):
                mask |= int(line.split()[1], 16)
    return {s for s in signal.Signals if mask >> (s - 1) & 1}


def wait_until(pred, timeout=15.0, step=0.02):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return pred()


def holders_of(path):
    """The processes with a descriptor of a file under path (their /proc/PID/fd links)."""
    out = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fds = os.listdir("/proc/%s/fd" % name)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink("/proc/%s/fd/%s" % (name, fd))
            except OSError:
                continue
            if target.startswith(path + "/"):
                out.add(int(name))
                break
    return out


def ancestors(pid):
    """The parents of pid up to init, from /proc/PID/stat (proc(5): field 4)."""
    chain = []
    while pid > 1:
        with open("/proc/%d/stat" % pid) as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
        chain.append(pid)
    return chain


class LeaseCase(GpuctlTestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gpuctl-leases-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.dir = os.path.join(self.tmp, "leases")  # personal: created by gpuctl itself
        self.env = direct_env(self.dir)
        self.pids = self.kill_on_cleanup()

    def g(self, *args, env=None, **kw):
        e = dict(self.env)
        if env:
            e.update(env)
        return run([GPUCTL, *args], env=e, **kw)

    def ps(self, *args, env=None):
        r = self.g("ps", "--format", "json", *args, env=env)
        self.assertEqual(r.rc, 0, r)
        return r.json()

    def leased(self, env=None):
        return {d["uuid"]: d for d in self.ps(env=env)["devices"] if d["state"] == "leased"}


@unittest.skipUnless(os.path.exists(LOAD), "nvsim-load not built")
class Concurrency(GpuctlTestCase):
    def test_40_concurrent_runs_never_share_a_gpu(self):
        rnd = random.Random(4)
        ks = [rnd.randint(1, 4) for _ in range(40)]
        script = ("D=$(mktemp -d)\n"
                  "i=0\n"
                  "for k in $KS; do\n"
                  "  ( $GPUCTL run -n $k -- $LOAD --seconds 0.3 --mem 1MiB >/dev/null 2>$D/err.$i"
                  " && echo 0 >$D/rc.$i || echo $? >$D/rc.$i ) &\n"
                  "  i=$((i+1))\n"
                  "done\n"
                  "wait\n"
                  "i=0\n"
                  "for k in $KS; do echo \"run $i $(cat $D/rc.$i) $(tr '\\n' ' ' <$D/err.$i)\";"
                  " i=$((i+1)); done\n"
                  "cat \"$NVSIM_STATE_DIR/ledger.jsonl\" 2>/dev/null || true\n"
                  "echo PS; $GPUCTL ps --format json\n"
                  "rm -rf $D\n")
        # The timeout only guards against a hang (a few seconds in practice, ASan included).
        r = sim_sh("dgx-a100", script, env={"LOAD": LOAD, "KS": " ".join(map(str, ks))},
                   timeout=90)
        self.assertEqual(r.rc, 0, r)
        head, ps = r.out.split("\nPS\n", 1)
        lines = head.splitlines()
        runs = [l.split(" ", 3) for l in lines if l.startswith("run ")]
        ledger = [json.loads(l) for l in lines if l.startswith("{")]
        self.assertEqual(len(runs), 40, r)
        ok = []
        for _, i, rc, err in runs:
            if rc == "0":
                ok.append(ks[int(i)])
            else:
                self.assertEqual(rc, str(EXIT_NOMATCH), r)
                # one line, naming the leased devices (docs/leases.md, step 3)
                self.assertEqual(err.count("gpuctl: "), 1, err)
                self.assertIn("leased", err)
        self.assertTrue(ok, r)
        self.assertLess(len(ok), 40, "no run was refused: the test did not contend")
        # One ledger line per run that ran, on as many GPUs as it asked for.
        self.assertEqual(sorted(ok), sorted(len(l["devices"]) for l in ledger), r)
        for l in ledger:
            self.assertNotIn("error", l)
        # No two runs overlap in time on one GPU.
        by_gpu = {}
        for l in ledger:
            for d in l["devices"]:
                self.assertIn(d["uuid"], UUIDS)
                by_gpu.setdefault(d["uuid"], []).append((l["start"], l["end"], l["pid"]))
        for uuid, spans in by_gpu.items():
            spans.sort()
            for (s1, e1, p1), (s2, e2, p2) in zip(spans, spans[1:]):
                self.assertLessEqual(e1, s2, "pids %d and %d overlap on %s" % (p1, p2, uuid))
        # Every lease ended with its run.
        self.assertEqual(json.loads(ps)["devices"], [], ps)


class Lifetime(LeaseCase):
    def test_job_inherits_the_lock_descriptors(self):
        # GPUCTL_LEASE_FDS names open descriptors of the job on DIR/locks/<UUID>.lock of exactly
        # the devices in CUDA_VISIBLE_DEVICES (docs/leases.md).
        code = ('echo "$CUDA_VISIBLE_DEVICES"; echo "$GPUCTL_LEASE_DIR"; '
                'for f in $(echo "$GPUCTL_LEASE_FDS" | tr , " "); do readlink /proc/$$/fd/$f; done')
        r = self.g("run", "-n", "3", "--", "sh", "-c", code)
        self.assertEqual(r.rc, 0, r)
        lines = r.out.splitlines()
        uuids = lines[0].split(",")
        self.assertEqual(len(uuids), 3)
        self.assertEqual(os.path.realpath(lines[1]), os.path.realpath(self.dir))
        want = sorted(os.path.join(os.path.realpath(self.dir), "locks", u + ".lock") for u in uuids)
        self.assertEqual(sorted(lines[2:]), want, r)

    def test_kill_9_of_gpuctl_leaves_the_job_holding_the_lease(self):
        p = subprocess.Popen([GPUCTL, "run", "-n", "1", "--label", "life", "--", "sleep", "30"],
                             env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.pids.append(p.pid)

        def owned():
            ls = self.leased()
            return ls if ls and all(d["owner"] and d["owner"]["job_pid"] for d in ls.values()) else None
        ls = wait_until(owned)
        self.assertTrue(ls, "the lease never showed up with its job")
        self.assertEqual(len(ls), 1)
        uuid, d = next(iter(ls.items()))
        self.assertIn(uuid, UUIDS)
        self.assertEqual(d["owner"]["pid"], p.pid)
        self.assertEqual(d["owner"]["label"], "life")
        self.assertEqual(d["owner"]["user"], me())
        job = d["owner"]["job_pid"]
        self.pids.append(job)
        with open("/proc/%d/cmdline" % job, "rb") as f:
            self.assertEqual(f.read().split(b"\0")[0], b"sleep")

        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
        self.assertTrue(alive(job))
        # Still leased: the job holds the inherited descriptor.
        self.assertIn(uuid, self.leased())
        r = self.g("run", "-n", "8", "--", "true")
        self.assertOneLineError(r, EXIT_NOMATCH, "leased")

        os.kill(job, signal.SIGKILL)
        self.assertTrue(wait_until(lambda: not alive(job)), "sleep did not die")
        self.assertTrue(wait_until(lambda: not self.leased()), self.ps())
        r = self.g("run", "-n", "8", "--", "true")
        self.assertEqual(r.rc, 0, r)

    def test_lease_ends_with_the_run(self):
        r = self.g("run", "-n", "8", "--", "true")
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(self.leased(), {})
        self.assertEqual(self.g("run", "-n", "8", "--", "true").rc, 0)

    def test_dry_run_takes_no_lease(self):
        h = self.g("select", "-n", "2", "--hold", "60")
        self.assertEqual(h.rc, 0, h)
        self.addCleanup(self.g, "release", "--all")
        held = h.out.strip().split("=", 1)[1].split(",")
        r = self.g("run", "-n", "6", "--dry-run", "--", "true")
        self.assertEqual(r.rc, 0, r)
        got = r.out.split("CUDA_VISIBLE_DEVICES=", 1)[1].split()[0].split(",")
        self.assertFalse(set(got) & set(held), r)
        self.assertEqual(set(self.leased()), set(held))
        r = self.g("run", "-n", "7", "--dry-run", "--", "true")
        self.assertOneLineError(r, EXIT_NOMATCH, "leased")


class HoldRelease(LeaseCase):
    def hold(self, *args):
        r = self.g("select", *args, timeout=20)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.err, "", r)
        line = r.out.strip()
        self.assertTrue(line.startswith("CUDA_VISIBLE_DEVICES="), r)
        uuids = line.split("=", 1)[1].split(",")
        for u in uuids:
            self.assertIn(u, UUIDS)
        return uuids

    def test_hold_ps_release(self):
        (uuid,) = self.hold("-n", "1", "--hold", "60", "--label", "nightly build")
        ls = self.leased()
        self.assertEqual(set(ls), {uuid})
        owner = ls[uuid]["owner"]
        self.assertIsNotNone(owner, ls)
        holder = owner["pid"]
        self.pids.append(holder)
        self.assertTrue(alive(holder))
        # Its own session (double fork: the session leader is the intermediate process).
        self.assertNotEqual(os.getsid(holder), os.getsid(0), "the holder has its own session")
        self.assertIsNone(owner["job_pid"])
        self.assertEqual(owner["label"], "nightly build")
        self.assertEqual(owner["uid"], os.geteuid())
        self.assertEqual(owner["user"], me())
        self.assertEqual(ls[uuid]["index"], UUIDS.index(uuid))
        self.assertEqual(ls[uuid]["device"], str(UUIDS.index(uuid)))
        self.assertIsInstance(owner["age_s"], int)
        self.assertGreaterEqual(owner["age_s"], 0)
        self.assertLess(owner["age_s"], 60)

        # The table: one row for the held GPU, with its label and user.
        t = self.g("ps")
        self.assertEqual(t.rc, 0, t)
        rows = t.out.splitlines()
        self.assertEqual(rows[0].split()[:7],
                         ["DEVICE", "UUID", "STATE", "HEALTH", "USER", "PID", "JOB"])
        self.assertEqual(len(rows), 2, t)
        cells = rows[1].split()
        self.assertEqual(cells[:6], [str(UUIDS.index(uuid)), short_uuid(uuid), "leased", "OK",
                                     me(), str(holder)])
        self.assertIn("nightly build", rows[1])

        # Nobody gets it: run, a plain select, another hold.
        self.assertOneLineError(self.g("run", "-n", "8", "--", "true"), EXIT_NOMATCH, "leased")
        self.assertOneLineError(self.g("select", "-n", "8"), EXIT_NOMATCH, "leased")
        r = self.g("select", "-n", "7")
        self.assertEqual(r.rc, 0, r)
        self.assertNotIn(uuid, r.out)

        # release by id (the GPU's index), then nothing is held and the holder is gone.
        r = self.g("release", "-i", str(UUIDS.index(uuid)))
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.out.strip(), "released 1 holder")
        # release returns once the holder has gone: `release && run` finds the GPU free.
        self.assertEqual(self.g("run", "-n", "8", "--", "true").rc, 0)
        self.assertFalse(self.leased())
        self.assertTrue(wait_until(lambda: not alive(holder)), "holder still alive")
        r = self.g("release", "--all")
        self.assertEqual((r.rc, r.out.strip()), (0, "released 0 holders"), r)

    def test_release_ends_a_holder_whose_record_is_gone(self):
        # A hold whose owner record was deleted or damaged (issue 24) is still a holder: the
        # kernel's lock says so, and release finds it through the lock (docs/leases.md
        # "Release"), by id and with --all.
        for how, args in (("deleted", ("-i",)), ("corrupt", ("--all",))):
            with self.subTest(how=how):
                (uuid,) = self.hold("-n", "1", "--hold", "60")
                holder = self.leased()[uuid]["owner"]["pid"]
                self.pids.append(holder)
                rec = os.path.join(self.dir, "owners", str(os.geteuid()), uuid + ".json")
                self.assertTrue(os.path.isfile(rec), rec)
                if how == "deleted":
                    os.unlink(rec)
                else:
                    with open(rec, "w") as f:
                        f.write('{"pid": "not a number"')
                if args == ("-i",):
                    args = ("-i", str(UUIDS.index(uuid)))
                r = self.g("release", *args)
                self.assertEqual((r.rc, r.out.strip(), r.err), (0, "released 1 holder", ""), r)
                # release returns once the holder has gone
                self.assertFalse(alive(holder), "release returned before the holder ended")
                self.assertEqual(self.leased(), {})

    def test_release_says_what_else_it_freed(self):
        # issue 25, item 9: a holder holds all its devices' locks and ending it frees them all
        # (docs/leases.md "Release"), so `release -i 6` ends the hold of 6 and 7: a second line
        # says so, the first stays as it was
        held = self.hold("--only", "6,7", "-n", "2", "--hold", "60")
        self.assertEqual(sorted(UUIDS.index(u) for u in held), [6, 7])
        self.pids.append(self.leased()[held[0]]["owner"]["pid"])
        r = self.g("release", "-i", "6")
        self.assertEqual((r.rc, r.err), (0, ""), r)
        self.assertEqual(r.out.splitlines(),
                         ["released 1 holder", "also freed: 7 (held by the same holder as 6)"])
        self.assertEqual(self.leased(), {})  # 7 is free
        self.assertEqual(self.g("select", "--only", "7", "-n", "1").rc, 0)
        # every device of the hold named (or --all): nothing beyond, no second line
        for args in (("-i", "6,7"), ("-i", "%s,7" % UUIDS[6]), ("--all",)):
            with self.subTest(args=args):
                held = self.hold("--only", "6,7", "-n", "2", "--hold", "60")
                self.pids.append(self.leased()[held[0]]["owner"]["pid"])
                r = self.g("release", *args)
                self.assertEqual((r.rc, r.out, r.err), (0, "released 1 holder\n", ""), r)
                self.assertEqual(self.leased(), {})
        # two holders, one of them on a named GPU: only that one's other GPU is named
        a = self.hold("--only", "5,6", "-n", "2", "--hold", "60")
        b = self.hold("--only", "7", "-n", "1", "--hold", "60")
        for u in a + b:
            self.pids.append(self.leased()[u]["owner"]["pid"])
        r = self.g("release", "-i", "6,7")
        self.assertEqual(r.out.splitlines(),
                         ["released 2 holders",
                          "also freed: 5 (held by the same holder as one of 6,7)"], r)
        self.assertEqual(self.leased(), {})

    def test_release_all_ends_every_hold(self):
        a = self.hold("-n", "2", "--hold", "60")
        b = self.hold("-n", "3", "--hold", "60")
        self.assertFalse(set(a) & set(b))
        self.assertEqual(set(self.leased()), set(a) | set(b))
        r = self.g("release", "--all")
        self.assertEqual((r.rc, r.out.strip()), (0, "released 2 holders"), r)
        self.assertEqual(self.leased(), {})

    def test_release_waits_for_the_holder_to_go(self):
        (uuid,) = self.hold("-n", "1", "--hold", "60")
        holder = self.leased()[uuid]["owner"]["pid"]
        self.pids.append(holder)
        os.kill(holder, signal.SIGSTOP)  # SIGTERM stays pending until SIGCONT
        try:
            # stopped for certain before release runs: a SIGTERM that came while the SIGSTOP
            # was still undelivered would be taken by the holder's sigtimedwait first
            self.assertTrue(wait_until(lambda: proc_state(holder) == "T", timeout=60))
            p = subprocess.Popen([GPUCTL, "release", "--all"], env=self.env, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            # the SIGTERM has been sent (pending on the stopped holder) and release still waits
            self.assertTrue(wait_until(lambda: signal.SIGTERM in pending_signals(holder) or
                                       p.poll() is not None, timeout=60),
                            "release never signalled the holder")
            self.assertIn(signal.SIGTERM, pending_signals(holder),
                          "release ended without signalling the holder")
            self.assertIsNone(p.poll(), "release returned while the holder still held the GPU")
            self.assertIn(uuid, self.leased())
        finally:
            os.kill(holder, signal.SIGCONT)
        out, err = p.communicate(timeout=20)
        self.assertEqual((p.returncode, out.strip(), err), (0, "released 1 holder", ""))
        self.assertFalse(alive(holder))
        self.assertEqual(self.leased(), {})

    def test_release_never_ends_a_running_job(self):
        # release ends --hold holders only; a job's lease ends when the job does.
        p = subprocess.Popen([GPUCTL, "run", "-n", "1", "--", "sleep", "30"], env=self.env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.pids.append(p.pid)
        job = wait_until(lambda: next((d["owner"]["job_pid"] for d in self.leased().values()
                                       if d["owner"] and d["owner"]["job_pid"]), None))
        self.assertTrue(job, "the run's lease never showed up")
        self.pids.append(job)
        held = self.hold("-n", "2", "--hold", "60")
        r = self.g("release", "--all")
        self.assertEqual((r.rc, r.out.strip()), (0, "released 1 holder"), r)
        self.assertTrue(wait_until(lambda: not (set(held) & set(self.leased()))))
        self.assertTrue(alive(job))
        self.assertIsNone(p.poll())
        self.assertEqual(len(self.leased()), 1)
        os.kill(job, signal.SIGKILL)
        p.wait(timeout=10)

    def test_waiting_processes_let_go_of_nvml(self):
        # A gpuctl run parent (for the job's whole life) and a --hold holder keep only the lock
        # descriptors: NVML (on a real machine, the driver's device files) is unloaded.
        def maps_nvml(pid):
            with open("/proc/%d/maps" % pid) as f:
                return "libnvidia-ml" in f.read()
        p = subprocess.Popen([GPUCTL, "run", "-n", "1", "--", "sleep", "30"], env=self.env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.pids.append(p.pid)
        job = wait_until(lambda: next((d["owner"]["job_pid"] for d in self.leased().values()
                                       if d["owner"] and d["owner"]["job_pid"]), None))
        self.assertTrue(job, "the run's lease never showed up")
        self.pids.append(job)
        self.assertTrue(wait_until(lambda: not maps_nvml(p.pid)), "gpuctl run still maps NVML")
        held = self.hold("-n", "1", "--hold", "60")
        holder = next(d["owner"]["pid"] for u, d in self.leased().items() if u in held)
        self.assertTrue(wait_until(lambda: not maps_nvml(holder)), "the holder still maps NVML")
        self.g("release", "--all")
        os.kill(job, signal.SIGKILL)
        p.wait(timeout=10)

    def test_hold_expires(self):
        (uuid,) = self.hold("-n", "1", "--hold", "1")
        self.assertIn(uuid, self.leased())
        self.assertTrue(wait_until(lambda: not self.leased(), timeout=10), self.ps())

    def test_bad_hold_values(self):
        for v in ("0", "-1", "abc", "1.5", "", "1s", "99999999999999999999"):
            with self.subTest(v=v):
                r = self.g("select", "-n", "1", "--hold", v)
                self.assertOneLineError(r, EXIT_USAGE, "--hold")
        self.assertOneLineError(self.g("select", "-n", "1", "--hold"), EXIT_USAGE, "--hold")
        self.assertFalse(os.path.exists(self.dir), "a usage error touched the lease directory")

    def test_release_usage(self):
        self.assertOneLineError(self.g("release"), EXIT_USAGE, "--all")
        self.assertOneLineError(self.g("release", "-i", "0", "--all"), EXIT_USAGE, "conflict")
        self.assertOneLineError(self.g("release", "-i", "9"), EXIT_USAGE, "9")


class Ps(LeaseCase):
    def test_long_command_is_cut_in_the_table_whole_in_json(self):
        # README "gpuctl ps": a COMMAND over 40 characters is cut to its first 37 and "...", so
        # the table stays readable; JSON keeps the whole command line.
        argv = ["sh", "-c", "sleep 30; : " + "x" * 150 + " --and-a-very-long-option=" + "y" * 80]
        whole = " ".join(argv)
        p = subprocess.Popen([GPUCTL, "run", "-n", "1", "--", *argv], env=self.env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(lambda: (p.kill(), p.wait()))
        ls = wait_until(lambda: [d for d in self.leased().values()
                                 if d["owner"] and d["owner"]["job_pid"]])
        self.assertTrue(ls, "the run's lease never showed up")
        self.assertEqual(ls[0]["owner"]["command"], whole)
        r = self.g("ps")
        self.assertEqual(r.rc, 0, r)
        row = r.out.splitlines()[1]
        self.assertIn("  " + whole[:37] + "...  ", row)
        self.assertNotIn(whole[:38], row)
        self.assertLess(len(row), 200, r)

    def test_empty_and_all(self):
        doc = self.ps()
        self.assertEqual(doc["devices"], [])
        self.assertEqual(doc["lease_dir"], self.dir)
        doc = self.ps("--all")
        self.assertEqual([d["uuid"] for d in doc["devices"]], UUIDS)
        for i, d in enumerate(doc["devices"]):
            self.assertEqual((d["index"], d["device"], d["mig_index"], d["state"], d["owner"],
                              d["reason"], d["foreign"]),
                             (i, str(i), None, "free", None, None, []))
        r = self.g("ps")
        self.assertEqual(r.rc, 0, r)
        self.assertNotIn("GPU-", r.out)
        r = self.g("ps", "--all")
        self.assertEqual(len(r.out.splitlines()), 1 + len(UUIDS), r)

    def test_missing_dir_is_not_created(self):
        doc = self.ps()
        self.assertFalse(doc["lease_dir_exists"])
        self.assertFalse(os.path.exists(self.dir), "ps created the lease directory")

    def test_mig_devices(self):
        m = Machine("a100-mig")
        env = direct_env(self.dir, "a100-mig")
        r = run([GPUCTL, "ps", "--all", "--format", "json"], env=env)
        self.assertEqual(r.rc, 0, r)
        got = [(d["index"], d["mig_index"] is not None, d["uuid"]) for d in r.json()["devices"]]
        want = []
        for i, g in enumerate(m.gpus):
            want.append((i, False, g["uuid"]))
            for inst in (g.get("mig") or {}).get("instances", []) if (g.get("mig") or {}).get("enabled") else []:
                want.append((i, True, inst["uuid"]))
        self.assertEqual(got, want)

    def with_foreign_process(self, commands):
        """Runs the shell commands while a compute process of no lease (a sleep registered with
        the simulator, $P) uses 1 GiB on GPU 2."""
        script = ("sleep 30 & P=$!\n"
                  "$NVSIM proc add --pid $P -i 2 --mem 1GiB\n" + commands + "kill $P\n")
        return sim_sh("dgx-a100", script, env={"GPUCTL_LEASE_DIR": self.dir})

    def test_foreign_process(self):
        # A compute process of no lease (registered with the simulator): "busy", listed as
        # user:pid(memory); run avoids it unless --ignore-foreign.
        r = self.with_foreign_process(
            "echo P=$P\n"
            "$GPUCTL ps --format json; echo TABLE; $GPUCTL ps\n"
            "$GPUCTL run -n 8 -- true 2>&1 && echo rc=0 || echo rc=$?\n"
            "$GPUCTL run -n 8 --ignore-foreign -- true && echo rc=0 || echo rc=$?\n")
        self.assertEqual(r.rc, 0, r)
        out = r.out
        pid = int(out.split("P=", 1)[1].split()[0])
        js, rest = out.split("P=%d\n" % pid, 1)[1].split("TABLE\n", 1)
        devs = json.loads(js)["devices"]
        self.assertEqual(len(devs), 1, js)
        d = devs[0]
        self.assertEqual((d["index"], d["uuid"], d["state"], d["owner"]), (2, UUIDS[2], "busy", None))
        self.assertEqual(len(d["foreign"]), 1)
        f = d["foreign"][0]
        self.assertEqual((f["pid"], f["uid"], f["user"], f["used_memory"]),
                         (pid, os.geteuid(), me(), 1 << 30))
        table = rest.split("gpuctl: ", 1)[0]
        self.assertIn("%s:%d(1024MiB)" % (me(), pid), table)
        self.assertIn("gpuctl: run: ", rest)
        self.assertIn("in use without a lease", rest)
        self.assertIn("rc=%d" % EXIT_NOMATCH, rest)
        self.assertIn("rc=0", rest)

    def test_job_wandering_onto_another_gpu(self):
        # The job of a lease on GPU 0 also uses GPU 1, which it did not lease (docs/leases.md,
        # "Foreign processes": a lease's processes are its own only on its own devices). ps
        # must name that process on GPU 1, as the allocation call judges it: GPU 1 is busy,
        # and run --dry-run avoids it.
        # "ready" comes from this script once ps sees GPU 1 busy, not from the job: the job's
        # echo could come after the ps below on a loaded machine (make fresh-check saw it).
        # It looks for the state, not the word: every leased device has a "busy" key (the
        # project's CI broke out of this loop as soon as GPU 0 was leased, before GPU 1 was);
        # and for the job's pid, which gpuctl records after the fork (the job may be first)
        script = ("$GPUCTL run -n 1 --only 0 -- sh -c "
                  "'$NVSIM proc add --pid $$ -i 1 --mem 1GiB; exec sleep 30' &\n"
                  "R=$!\n"
                  "for i in $(seq 300); do J=$($GPUCTL ps --format json); "
                  "echo \"$J\" | grep -q '\"state\": \"busy\"' && "
                  "echo \"$J\" | grep -q '\"job_pid\": [0-9]' && break; sleep 0.1; done\n"
                  "echo ready; $GPUCTL ps --format json; echo DRY\n"
                  "$GPUCTL run -n 7 --dry-run -- true 2>&1 && echo rc=0 || echo rc=$?\n"
                  "$GPUCTL run -n 6 --exclude 0 --dry-run -- true | head -1\n"
                  "kill $(pgrep -P $R) $R 2>/dev/null || true\nwait\n")
        r = sim_sh("dgx-a100", script, env={"GPUCTL_LEASE_DIR": self.dir})
        self.assertEqual(r.rc, 0, r)
        js, dry = r.out.split("ready\n", 1)[1].split("DRY\n", 1)
        devs = {d["index"]: d for d in json.loads(js)["devices"]}
        self.assertEqual(devs[0]["state"], "leased", js)
        self.assertEqual(devs[0]["foreign"], [], js)
        self.assertEqual(devs[1]["state"], "busy", js)
        self.assertEqual(len(devs[1]["foreign"]), 1, js)
        job = devs[0]["owner"]["job_pid"]
        # the registered process is the job's own shell (exec'd into sleep), yet foreign on 1
        self.assertEqual(devs[1]["foreign"][0]["pid"], job, js)
        self.assertIn("in use without a lease", dry)
        self.assertIn("rc=%d" % EXIT_NOMATCH, dry)
        # with GPU 0 excluded and GPU 1 busy, six GPUs remain: exactly 2-7
        chosen = dry.split("CUDA_VISIBLE_DEVICES=", 1)[1].split()[0].split(",")
        self.assertEqual(sorted(chosen), sorted(UUIDS[2:]))

    def test_foreign_without_lease_directory(self):
        # No lease directory: nothing is leased, so every compute process is foreign; the
        # configuration's busy_memory decides which make their device busy.
        conf = os.path.join(self.tmp, "busy.conf")
        with open(conf, "w") as f:
            f.write("busy_memory = 2GiB\n")
        script = ("sleep 30 & P=$!\nsleep 30 & Q=$!\n"
                  "$NVSIM proc add --pid $P -i 2 --mem 1GiB\n"
                  "$NVSIM proc add --pid $Q -i 3 --mem 3GiB\n"
                  "$GPUCTL ps --all --format json\nkill $P $Q\n")
        r = sim_sh("dgx-a100", script, env={"GPUCTL_LEASE_DIR": self.dir, "GPUCTL_CONFIG": conf})
        self.assertEqual(r.rc, 0, r)
        doc = json.loads(r.out)
        self.assertFalse(doc["lease_dir_exists"])
        devs = {d["index"]: d for d in doc["devices"]}
        self.assertEqual((devs[2]["state"], len(devs[2]["foreign"])), ("free", 1), r.out)
        self.assertEqual((devs[3]["state"], len(devs[3]["foreign"])), ("busy", 1), r.out)
        self.assertEqual(devs[4]["foreign"], [], r.out)

    def test_daemonised_job_is_its_leases_own(self):
        # A job that daemonises (setsid, parent gone: reparented away from gpuctl's tree) but
        # keeps the inherited lease descriptors holds the lease's lock, so it is the lease's
        # process, not foreign (issue 24; docs/leases.md "Busy without a lease"): while the run
        # lives, and after it ended with the daemon holding the lease alone, when release
        # ends it (no record accounts for it then).
        t = self.tmp
        with open(os.path.join(t, "daemon.sh"), "w") as f:
            f.write('"$NVSIM" proc add --pid $$ -i 0 --mem 1GiB\n'
                    'echo $$ >"$T/daemon.new" && mv "$T/daemon.new" "$T/daemon.pid"\n'
                    'exec sleep 30\n')
        with open(os.path.join(t, "job.sh"), "w") as f:
            f.write('(setsid sh "$T/daemon.sh" </dev/null >/dev/null 2>&1 &)\n'
                    'exec sleep 30\n')
        script = (
            "trap 'kill $(cat \"$T/daemon.pid\" 2>/dev/null) 2>/dev/null' EXIT\n"
            "$GPUCTL run -n 1 --only 0 -- sh \"$T/job.sh\" >/dev/null 2>\"$T/run.err\" &\n"
            "R=$!\n"
            "for i in $(seq 300); do [ -s \"$T/daemon.pid\" ] && $GPUCTL ps --format json | "
            "grep -q '\"job_pid\": [0-9]' && break; sleep 0.1; done\n"
            "D=$(cat \"$T/daemon.pid\"); J=$(pgrep -P $R)\n"
            "echo \"R=$R J=$J D=$D\"\n"
            "p=$D; chain=; while [ \"$p\" -gt 1 ]; do p=$(cut -d' ' -f4 /proc/$p/stat); "
            "chain=\"$chain $p\"; done; echo \"chain=$chain\"\n"
            "echo \"flocks=$(cat /proc/$D/fdinfo/* | grep -c FLOCK)\"\n"
            "echo LIVE; $GPUCTL ps --format json\n"
            "echo RELEASE-LIVE; $GPUCTL release -i 0\n"
            "kill $J; wait $R || true\n"
            "echo ALONE; $GPUCTL ps --format json\n"
            "echo RELEASE; $GPUCTL release -i 0\n"
            "echo AFTER; $GPUCTL ps --format json\n"
            # gone, or a zombie its new parent has not reaped (proc(5): state Z)
            "echo \"daemon=$(cut -d' ' -f3 /proc/$D/stat 2>/dev/null || echo gone)\"\n")
        r = sim_sh("dgx-a100", script, env={"GPUCTL_LEASE_DIR": self.dir, "T": t})
        self.assertEqual(r.rc, 0, r)
        head, rest = r.out.split("LIVE\n", 1)
        facts = dict(w.split("=", 1) for w in head.split() if "=" in w and
                     w.split("=", 1)[0] in ("R", "J", "D", "flocks"))
        run_pid, job, daemon = int(facts["R"]), int(facts["J"]), int(facts["D"])
        self.pids.append(daemon)
        chain = [int(p) for p in head.split("chain=", 1)[1].splitlines()[0].split()]
        # the scenario is the one claimed: the daemon is outside gpuctl's tree and holds a flock
        self.assertNotIn(run_pid, chain, r)
        self.assertNotIn(job, chain, r)
        self.assertGreaterEqual(int(facts["flocks"]), 1, r)
        live, rest = rest.split("RELEASE-LIVE\n", 1)
        released_live, rest = rest.split("ALONE\n", 1)
        alone, rest = rest.split("RELEASE\n", 1)
        released, rest = rest.split("AFTER\n", 1)
        after, tail = rest.rsplit("}\n", 1)
        devs = {d["index"]: d for d in json.loads(live)["devices"]}
        self.assertEqual(devs[0]["state"], "leased", live)
        self.assertEqual(devs[0]["owner"]["job_pid"], job, live)
        self.assertEqual(devs[0]["foreign"], [], live)
        self.assertFalse(devs[0]["busy"], live)
        # the run's lease is not a hold: release leaves it, daemon included
        self.assertEqual(released_live.strip(), "released 0 holders", r)
        devs = {d["index"]: d for d in json.loads(alone)["devices"]}
        self.assertEqual(devs[0]["state"], "leased", alone)
        self.assertEqual(devs[0]["owner"]["pid"], daemon, alone)
        self.assertEqual(devs[0]["foreign"], [], alone)
        self.assertEqual(released.strip(), "released 1 holder", r)
        # nothing leased any more (the simulator still lists the process it was told of)
        self.assertEqual([d["index"] for d in json.loads(after + "}")["devices"]
                          if d["state"] == "leased"], [], r)
        self.assertIn(tail.strip(), ("daemon=gone", "daemon=Z"), r)

    def test_dry_run_sees_foreign_processes_before_any_lease(self):
        # No lease directory yet: run --dry-run still chooses as run would, leaving out the
        # GPU a process of no lease uses (it once counted nothing as busy without the
        # directory), and creates nothing.
        r = self.with_foreign_process(
            "$GPUCTL run -n 8 --dry-run -- true 2>&1 && echo rc=0 || echo rc=$?\n"
            "$GPUCTL run -n 7 --dry-run -- true | head -1\n")
        self.assertEqual(r.rc, 0, r)
        first, rest = r.out.split("\n", 1)
        self.assertEqual(first, "gpuctl: run: need 8 GPUs, 7 qualify: in use without a lease: 2")
        self.assertTrue(rest.startswith("rc=%d\n" % EXIT_NOMATCH), r)
        got = rest.split("CUDA_VISIBLE_DEVICES=", 1)[1].split()[0].split(",")
        self.assertEqual(sorted(got), sorted(u for i, u in enumerate(UUIDS) if i != 2))
        self.assertFalse(os.path.exists(self.dir), "a dry run created the lease directory")

    def test_usage(self):
        self.assertOneLineError(self.g("ps", "--format", "csv"), EXIT_USAGE, "csv")
        self.assertOneLineError(self.g("ps", "extra"), EXIT_USAGE, "extra")
        for cmd in ("ps", "release", "lease"):
            with self.subTest(cmd=cmd):
                r = self.g(cmd, "--help")
                self.assertEqual(r.rc, 0, r)
                self.assertIn("--lease-dir", r.out)
                self.assertIn("Exit status:", r.out)


class LeaseInit(LeaseCase):
    def test_init_creates_one_lock_per_device(self):
        for scenario in ("dgx-a100", "a100-mig"):
            with self.subTest(scenario=scenario):
                m = Machine(scenario)
                d = os.path.join(self.tmp, scenario)
                env = direct_env(d, scenario)
                uuids = []
                for g in m.gpus:
                    uuids.append(g["uuid"])
                    mig = g.get("mig") or {}
                    if mig.get("enabled"):
                        uuids += [i["uuid"] for i in mig.get("instances", [])]
                r = run([GPUCTL, "lease", "init", "--lease-dir", d], env=env)
                self.assertEqual(r.rc, 0, r)
                # the directory records the configuration read (the harness's empty file)
                conf = os.path.realpath(EMPTY_CONFIG)
                self.assertEqual(r.out.splitlines(),
                                 ["created %d lock files in %s" % (len(uuids), d),
                                  "configuration: " + conf])
                with open(os.path.join(d, "config")) as f:
                    self.assertEqual(f.read(), conf + "\n")
                self.assertEqual(sorted(os.listdir(os.path.join(d, "locks"))),
                                 sorted(u + ".lock" for u in uuids))
                r = run([GPUCTL, "lease", "init"], env=env)  # $GPUCTL_LEASE_DIR, nothing missing
                self.assertEqual(r.out.splitlines()[0], "created 0 lock files in %s" % d, r)

    def spoil(self, how):
        """Makes the lock file of a GPU unusable (docs/leases.md: a symlink, not a regular
        file, not the directory owner's, more than one link); returns (path, reason)."""
        i = {"symlink": 1, "fifo": 2, "hardlink": 5, "owner": 6}[how]
        lock = os.path.join(self.dir, "locks", UUIDS[i] + ".lock")
        if how == "symlink":
            os.unlink(lock)
            os.symlink(os.path.join(self.tmp, "elsewhere"), lock)
            return lock, "is a symlink"
        if how == "fifo":
            os.unlink(lock)
            os.mkfifo(lock)
            return lock, "not a regular file"
        if how == "hardlink":
            os.link(lock, os.path.join(self.tmp, "second-name"))
            return lock, "has 2 links"
        os.chown(lock, 65534, 65534)
        return lock, "owned by uid 65534"

    def assertNamesUnusable(self, spoiled):
        # issue 24, finding 9b: said "created 0" and nothing else
        r = self.g("lease", "init")
        self.assertEqual(r.rc, EXIT_FAILURE, r)
        self.assertEqual(r.out.splitlines()[0], "created 0 lock files in %s" % self.dir, r)
        lines = r.err.splitlines()
        self.assertEqual(len(lines), len(spoiled), r)
        for (path, why), line in zip(sorted(spoiled), sorted(lines)):
            self.assertTrue(line.startswith("gpuctl: lease: init: '%s': %s" % (path, why)), r)
            self.assertIn("remove it and run `gpuctl lease init` again", line)
        # what the line says repairs it
        for path, _ in spoiled:
            os.unlink(path)
        r = self.g("lease", "init")
        self.assertEqual((r.rc, r.err), (0, ""), r)
        n = len(spoiled)
        self.assertEqual(r.out.splitlines()[0], "created %d lock file%s in %s"
                         % (n, "" if n == 1 else "s", self.dir), r)

    def test_init_names_unusable_lock_files(self):
        self.assertEqual(self.g("lease", "init").rc, 0)
        self.assertNamesUnusable([self.spoil(h) for h in ("symlink", "fifo", "hardlink")])

    @unittest.skipUnless(os.geteuid() == 0, "needs root: gives a lock file to another owner")
    def test_init_names_lock_file_of_another_owner(self):
        self.assertEqual(self.g("lease", "init").rc, 0)
        self.assertNamesUnusable([self.spoil("owner")])

    def test_usage(self):
        self.assertOneLineError(self.g("lease"), EXIT_USAGE, "init")
        self.assertOneLineError(self.g("lease", "frob"), EXIT_USAGE, "frob")
        self.assertOneLineError(self.g("lease", "init", "x"), EXIT_USAGE, "'x'")


class PersonalDirectory(LeaseCase):
    """docs/leases.md: a personal directory such as $HOME/.cache/gpuctl is created and filled by
    its user, also when ~/.cache does not exist yet (the XDG Base Directory Specification: a
    missing $XDG_CACHE_HOME is created, mode 0700)."""

    def test_missing_cache_directory_is_created(self):
        home = os.path.join(self.tmp, "home")
        os.mkdir(home, 0o700)
        cache = os.path.join(home, ".cache")
        ld = os.path.join(cache, "gpuctl")
        for args in (("run", "-n", "1", "--", "true"), ("select", "-n", "1", "--hold", "1"),
                     ("lease", "init")):
            with self.subTest(args=args):
                shutil.rmtree(cache, ignore_errors=True)
                r = self.g(*args, env={"HOME": home, "GPUCTL_LEASE_DIR": ld})
                self.assertEqual(r.rc, EXIT_OK, r)
                self.assertEqual(r.err, "")
                # XDG's mode for a missing cache directory; root's may lead to a shared one
                self.assertEqual(stat.S_IMODE(os.stat(cache).st_mode),
                                 0o755 if os.geteuid() == 0 else 0o700)
                self.assertEqual(os.stat(cache).st_uid, os.geteuid())
                self.assertTrue(os.path.isfile(os.path.join(ld, "select.lock")))

    def test_parents_are_made_only_below_a_directory_of_ones_own(self):
        if os.geteuid() == 0:
            self.skipTest("root owns every directory it may create in")
        r = self.g("run", "-n", "1", "--", "true",
                   env={"GPUCTL_LEASE_DIR": "/proc/gpuctl-test/leases"})
        self.assertOneLineError(r, EXIT_FAILURE, "/proc/gpuctl-test/leases")


class LockWait(LeaseCase):
    def test_bound_is_reported_as_given(self):
        # issue 24, finding 9d: GPUCTL_LOCK_WAIT=1.5 was reported as "2 s or more". The line
        # says the bound gpuctl waited (docs/leases.md, "Bounds"): 1 s for ps unless
        # GPUCTL_LOCK_WAIT is shorter
        self.assertEqual(self.g("lease", "init").rc, 0)
        with open(os.path.join(self.dir, "select.lock")) as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            for args, wait, shown in ((("run", "-n", "1", "--", "true"), "1.5", "1.5"),
                                      (("select", "-n", "1", "--hold", "5"), "0.25", "0.25"),
                                      (("ps",), "0.3", "0.3"), (("ps",), "2.5", "1"),
                                      (("run", "-n", "1", "--", "true"), "1.001", "1.001")):
                with self.subTest(args=args, wait=wait):
                    r = self.g(*args, env={"GPUCTL_LOCK_WAIT": wait})
                    self.assertOneLineError(r, EXIT_BUSY, "select.lock",
                                            "pid %d" % os.getpid(),
                                            " for %s s or more" % shown)


class UnsafeDirectory(LeaseCase):
    def test_world_writable_without_sticky_is_refused(self):
        os.mkdir(self.dir)
        os.chmod(self.dir, 0o777)
        for args in (("run", "-n", "1", "--", "true"), ("select", "-n", "1", "--hold", "5"),
                     ("select", "-n", "1"), ("ps",), ("lease", "init")):
            with self.subTest(args=args):
                self.assertOneLineError(self.g(*args), EXIT_FAILURE, self.dir)

    def test_symlink_is_refused(self):
        real = os.path.join(self.tmp, "real")
        os.mkdir(real, 0o700)
        os.symlink(real, self.dir)
        for args in (("run", "-n", "1", "--", "true"), ("ps",)):
            with self.subTest(args=args):
                self.assertOneLineError(self.g(*args), EXIT_FAILURE, self.dir)

    def test_refusal_names_the_directory_once(self):
        # issue 25: "gpuctl: run: lease directory X: lease directory 'X': ..." said it twice
        os.mkdir(self.dir)
        os.chmod(self.dir, 0o777)
        for args in (("run", "-n", "1", "--", "true"), ("lease", "init")):
            with self.subTest(args=args):
                r = self.g(*args)
                self.assertOneLineError(r, EXIT_FAILURE, self.dir)
                self.assertEqual(r.err.count("lease directory"), 1, r)

    def test_lock_file_replaced_by_symlink_is_unusable(self):
        r = self.g("lease", "init")
        self.assertEqual(r.rc, 0, r)
        lock = os.path.join(self.dir, "locks", UUIDS[3] + ".lock")
        os.unlink(lock)
        other = os.path.join(self.tmp, "elsewhere")
        open(other, "w").close()
        os.symlink(other, lock)
        doc = self.ps()
        self.assertEqual([(d["index"], d["state"]) for d in doc["devices"]], [(3, "unusable")])
        self.assertTrue(doc["devices"][0]["reason"])
        r = self.g("run", "-n", "7", "--", "true")
        self.assertEqual(r.rc, 0, r)
        r = self.g("run", "-n", "8", "--", "true")
        self.assertEqual(r.rc, EXIT_NOMATCH, r)
        r = self.g("run", "-n", "7", "--", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES")
        self.assertNotIn(UUIDS[3], r.out)
        # A plain select never offers it either.
        self.assertEqual(self.g("select", "-n", "8").rc, EXIT_NOMATCH)
        r = self.g("select", "-n", "7")
        self.assertEqual(r.rc, 0, r)
        self.assertNotIn(UUIDS[3], r.out)


@unittest.skipUnless(os.geteuid() == 0, "needs root: mounts a small tmpfs")
@unittest.skipUnless(shutil.which("mount") and shutil.which("umount"), "needs mount, umount")
class FullLeaseDirectory(LeaseCase):
    """The lease directory on a full file system (issue 24): a hold or run whose owner record
    cannot be written is refused before it starts, one line naming the directory and the
    cause, exit 1 (docs/gpuctl.1, EXIT STATUS), nothing held. The file system is a 64 KiB tmpfs
    of the test's own, unmounted in its cleanup whatever happened."""

    def setUp(self):
        super().setUp()
        self.mnt = os.path.join(self.tmp, "small")
        os.mkdir(self.mnt)
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs",
                            self.mnt], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.addCleanup(self.unmount)
        self.dir = os.path.join(self.mnt, "leases")
        self.env = direct_env(self.dir)
        self.filler = os.path.join(self.mnt, "filler")
        # the lock files exist already: what a full disk refuses is the record
        r = self.g("lease", "init")
        self.assertEqual(r.rc, 0, r)

    def unmount(self):
        # a holder left by a failed test keeps lock files open: end it first
        for _ in range(100):
            pids = holders_of(self.mnt)
            if not pids:
                break
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
            wait_until(lambda: not (pids & holders_of(self.mnt)), timeout=5)
        if subprocess.run(["umount", self.mnt], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", self.mnt], capture_output=True)

    def fill(self, leave_pages=0):
        """Fills the file system, then gives back leave_pages pages (statvfs confirms)."""
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        size = 0
        try:
            while True:
                size += os.write(fd, b"\0" * 4096)
        except OSError as e:
            self.assertEqual(e.errno, errno.ENOSPC)
        if leave_pages:
            os.ftruncate(fd, size - leave_pages * 4096)
        os.close(fd)
        st = os.statvfs(self.mnt)
        self.assertEqual(st.f_bavail * st.f_frsize, leave_pages * 4096)

    def assert_nothing_held(self):
        self.assertEqual(self.leased(), {})
        # no process keeps a lock file (the holder of a refused hold has exited)
        self.assertTrue(wait_until(lambda: not holders_of(self.dir)), holders_of(self.dir))
        owners = os.path.join(self.dir, "owners")
        for d in os.listdir(owners):
            tmp = [f for f in os.listdir(os.path.join(owners, d)) if f.startswith(".tmp")]
            self.assertEqual(tmp, [], "temporary record files left")

    def test_hold_and_run_are_refused_on_a_full_directory(self):
        self.fill()
        why = os.strerror(errno.ENOSPC)
        r = self.g("select", "-n", "1", "--hold", "60", timeout=20)
        self.assertOneLineError(r, EXIT_FAILURE, "'%s'" % self.dir,
                                "cannot write the lease record", why)
        self.assertEqual(r.out, "", r)
        self.assert_nothing_held()
        marker = os.path.join(self.tmp, "started")
        r = self.g("run", "-n", "1", "--", "touch", marker)
        self.assertOneLineError(r, EXIT_FAILURE, "'%s'" % self.dir,
                                "cannot write the lease record", why)
        self.assertFalse(os.path.exists(marker), "the job was started")
        self.assert_nothing_held()
        # with room again, the same hold works and release ends it
        os.unlink(self.filler)
        r = self.g("select", "-n", "1", "--hold", "60", timeout=20)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(len(self.leased()), 1)
        r = self.g("release", "--all")
        self.assertEqual((r.rc, r.out.strip()), (0, "released 1 holder"), r)
        self.assert_nothing_held()

    def test_run_whose_job_record_cannot_be_written_starts_nothing(self):
        # Room for one record page: the lease's first record (naming gpuctl) fits, the record
        # that adds the job's pid does not. Without it `release` would take the run for a
        # hold, so the job must not start.
        self.fill(leave_pages=1)
        marker = os.path.join(self.tmp, "started")
        r = self.g("run", "-n", "1", "--only", "0", "--", "touch", marker)
        self.assertOneLineError(r, EXIT_FAILURE, "'%s'" % self.dir,
                                "cannot write the lease record", os.strerror(errno.ENOSPC))
        self.assertFalse(os.path.exists(marker), "the job was started")
        self.assert_nothing_held()


def _useradd(name):
    subprocess.run(["useradd", "-M", "-r", "-s", "/usr/sbin/nologin", name], check=True,
                   capture_output=True)


@unittest.skipUnless(os.geteuid() == 0, "needs root: creates two throwaway users")
@unittest.skipUnless(shutil.which("useradd") and shutil.which("setpriv"), "needs useradd, setpriv")
class TwoUserCase(GpuctlTestCase):
    """Two throwaway users A and B (created for the class, removed after it) and a root-owned
    temporary directory whose `leases` is the shared lease directory; `as_user` runs gpuctl (or
    cmd) as one of them, with their own primary group and supplementary groups. Subclasses set
    PREFIX (unique per module) and make the lease directory in setUp."""
    PREFIX = "gpuctlt"

    @classmethod
    def setUpClass(cls):
        tag = "%d" % os.getpid()
        cls.users = [cls.PREFIX + "a" + tag, cls.PREFIX + "b" + tag]
        cls.made = []
        for u in cls.users:
            _useradd(u)
            cls.made.append(u)
        cls.uid = {u: pwd.getpwnam(u).pw_uid for u in cls.users}
        cls.gid = {u: pwd.getpwnam(u).pw_gid for u in cls.users}
        cls.tmp = tempfile.mkdtemp(prefix="gpuctl-shared-")
        os.chmod(cls.tmp, 0o755)
        cls.dir = os.path.join(cls.tmp, "leases")

    @classmethod
    def tearDownClass(cls):
        for u in cls.made:
            # userdel refuses while the user has processes; pkill's kills take a moment
            deadline = time.monotonic() + 10
            while True:
                subprocess.run(["pkill", "-KILL", "-u", u], capture_output=True)
                if subprocess.run(["userdel", u], capture_output=True).returncode == 0:
                    break
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
        shutil.rmtree(cls.tmp, True)

    def release_all(self):
        for u in self.users:
            self.as_user(u, "release", "--all")

    def make_shared_dir(self):
        """A fresh shared lease directory (root's, `lease init`) in self.dir; the users' holds
        are released after the test."""
        shutil.rmtree(self.dir, True)
        self.env = direct_env(self.dir)
        r = run([GPUCTL, "lease", "init", "--lease-dir", self.dir], env=self.env)
        self.assertEqual(r.rc, 0, r)
        self.addCleanup(self.release_all)

    def as_user(self, user, *args, cmd=None, env=None):
        e = dict(self.env)
        if env:
            e.update(env)
        argv = cmd if cmd is not None else [GPUCTL, *args]
        return run(["setpriv", "--reuid", str(self.uid[user]), "--regid", str(self.gid[user]),
                    "--init-groups", *argv], env=e)


class SharedDirectorySafety(TwoUserCase):
    """A shared lease directory owned by root; users A and B (docs/leases.md)."""

    def setUp(self):
        self.make_shared_dir()

    def test_other_user_cannot_take_release_or_tamper(self):
        a, b = self.users
        r = self.as_user(a, "select", "-n", "1", "--hold", "60", "--label", "A's")
        self.assertEqual(r.rc, 0, r)
        uuid = r.out.strip().split("=", 1)[1]
        self.assertIn(uuid, UUIDS)
        idx = UUIDS.index(uuid)

        # B cannot release A's hold.
        r = self.as_user(b, "release", "-i", str(idx))
        self.assertOneLineError(r, EXIT_FAILURE)
        # B cannot delete or replace the lock file (locks/ belongs to root, 0755).
        lock = os.path.join(self.dir, "locks", uuid + ".lock")
        code = ("import os, sys\n"
                "p = sys.argv[1]\n"
                "for f in (lambda: os.unlink(p), lambda: os.rename(p, p + '.x'),\n"
                "          lambda: open(p + '.new', 'w'), lambda: open(p, 'w')):\n"
                "    try:\n"
                "        f(); print('allowed')\n"
                "    except PermissionError:\n"
                "        print('EPERM')\n")
        r = self.as_user(b, cmd=[sys.executable, "-c", code, lock])
        self.assertEqual(r.out.split(), ["EPERM"] * 4, r)
        # B plants a symlink and garbage as records in B's own owners dir for A's device.
        bdir = os.path.join(self.dir, "owners", str(self.uid[b]))
        plant = ("import os, sys\n"
                 "d, u = sys.argv[1], sys.argv[2]\n"
                 "os.makedirs(d, exist_ok=True)\n"
                 "os.symlink('/etc/passwd', os.path.join(d, u + '.json'))\n"
                 "open(os.path.join(d, 'GPU-00000000-0000-0000-0000-000000000000.json'), 'w')"
                 ".write('{garbage')\n")
        r = self.as_user(b, cmd=[sys.executable, "-c", plant, bdir, uuid])
        self.assertEqual(r.rc, 0, r)
        doc = json.loads(run([GPUCTL, "ps", "--format", "json"], env=self.env).out)
        held = [d for d in doc["devices"] if d["state"] == "leased"]
        self.assertEqual([d["uuid"] for d in held], [uuid])
        self.assertEqual(held[0]["owner"]["user"], a)
        self.assertEqual(held[0]["owner"]["label"], "A's")
        # B's run never gets A's GPU.
        r = self.as_user(b, "run", "-n", "7", "--", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES")
        self.assertEqual(r.rc, 0, r)
        self.assertNotIn(uuid, r.out)
        self.assertOneLineError(self.as_user(b, "run", "-n", "8", "--", "true"), EXIT_NOMATCH,
                                "leased")
        # A can.
        r = self.as_user(a, "release", "-i", str(idx))
        self.assertEqual((r.rc, r.out.strip()), (0, "released 1 holder"), r)

    def test_user_cannot_init_the_shared_directory(self):
        r = self.as_user(self.users[0], "lease", "init")
        self.assertOneLineError(r, EXIT_FAILURE)

    def test_users_missing_cache_directory_is_created(self):
        # issue 25: $HOME/.cache/gpuctl on a fresh account without ~/.cache (docs/leases.md)
        user = self.users[0]
        home = os.path.join(self.tmp, "home-" + user)
        os.mkdir(home, 0o700)
        os.chown(home, self.uid[user], self.gid[user])
        self.addCleanup(shutil.rmtree, home, True)
        cache = os.path.join(home, ".cache")
        env = {"HOME": home, "GPUCTL_LEASE_DIR": os.path.join(cache, "gpuctl")}
        r = self.as_user(user, "run", "-n", "1", "--", "true", env=env)
        self.assertEqual(r.rc, EXIT_OK, r)
        st = os.stat(cache)
        self.assertEqual((stat.S_IMODE(st.st_mode), st.st_uid), (0o700, self.uid[user]))
        # but nothing is made below a directory of root's
        deep = os.path.join(self.tmp, "missing", "deeper")
        r = self.as_user(user, "run", "-n", "1", "--", "true", env={"GPUCTL_LEASE_DIR": deep})
        self.assertOneLineError(r, EXIT_FAILURE, "lease init")
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "missing")))

    def test_missing_shared_directory_names_lease_init(self):
        # Not ours to create (its parent belongs to root): one line naming the fix, exit 1.
        env = {"GPUCTL_LEASE_DIR": os.path.join(self.tmp, "missing")}
        uid = self.uid[self.users[0]]
        e = dict(self.env, **env)
        r = run(["setpriv", "--reuid", str(uid), "--regid", str(uid), "--clear-groups",
                 GPUCTL, "run", "-n", "1", "--", "true"], env=e)
        self.assertOneLineError(r, EXIT_FAILURE, "lease init")
        self.assertFalse(os.path.exists(env["GPUCTL_LEASE_DIR"]))

    def test_missing_lock_file_names_lease_init(self):
        os.unlink(os.path.join(self.dir, "locks", UUIDS[0] + ".lock"))
        r = self.as_user(self.users[0], "run", "-n", "8", "--", "true")
        self.assertEqual(r.rc in (EXIT_FAILURE, EXIT_NOMATCH), True, r)
        self.assertIn("lease init", r.err)


if __name__ == "__main__":
    unittest.main()
