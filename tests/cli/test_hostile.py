"""One user against another (docs/leases.md "What one user can do to another"): a second,
unprivileged user who holds select.lock, plants directories, or feeds odd bytes must not stall,
blind or trick the first. Each test reproduces a defect of issue 16 and fails without its fix.

Expected values come from docs/leases.md and docs/gpuctl.1 (exit statuses, what the lines
name), /proc (the holder's pid) and the scenario files, never from gpuctl's own output. The
throwaway users are made and removed by TwoUserCase (test_leases.py)."""
import fcntl
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from gpuctl_test import (EMPTY_CONFIG, EXIT_FAILURE, EXIT_NOMATCH, EXIT_OK, GPUCTL, NVSIM, GpuctlTestCase,
                         run)
from test_exporter import Exporter
from test_leases import UUIDS, TwoUserCase, direct_env, wait_until

EXIT_BUSY = 6  # docs/gpuctl.1 EXIT STATUS: select.lock held past its bound
LOCK_WAIT = "1"  # GPUCTL_LOCK_WAIT for these tests (default 10 s): keeps them short


class HostileUser(TwoUserCase):
    """A shared lease directory owned by root; user B is the adversary, user A the victim."""
    PREFIX = "gpuctlh"

    def setUp(self):
        subprocess.run(["rm", "-rf", self.dir])
        self.env = direct_env(self.dir, extra={"GPUCTL_LOCK_WAIT": LOCK_WAIT})
        r = run([GPUCTL, "lease", "init", "--lease-dir", self.dir], env=self.env)
        self.assertEqual(r.rc, 0, r)
        self.addCleanup(self.release_all)

    def spawn_as(self, user, argv, **kw):
        """argv as user, in the background (killed at cleanup)."""
        p = subprocess.Popen(["setpriv", "--reuid", str(self.uid[user]), "--regid",
                              str(self.gid[user]), "--init-groups", *argv], env=self.env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)

        def stop():
            if p.poll() is None:
                p.kill()
            p.communicate()
        self.addCleanup(stop)
        return p

    def select_lock_held(self):
        with open(os.path.join(self.dir, "select.lock")) as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return False
            except BlockingIOError:
                return True

    def hold_select_lock(self, user, kind="LOCK_EX"):
        """user holds DIR/select.lock (as anyone who can read the file can: `flock -x
        select.lock sleep 600`, here in one process); returns that process."""
        code = ("import fcntl, sys, time\n"
                "f = open(sys.argv[1])\n"
                "fcntl.flock(f, getattr(fcntl, sys.argv[2]))\n"
                "time.sleep(600)\n")
        p = self.spawn_as(user, ["/usr/bin/python3", "-c", code,
                                 os.path.join(self.dir, "select.lock"), kind])
        self.assertTrue(wait_until(self.select_lock_held), "flock never took select.lock")
        return p

    def assertNamesHolder(self, r, holder, user):
        self.assertEqual(r.rc, EXIT_BUSY, r)
        self.assertEqual(len(r.err.strip().splitlines()), 1, r)
        self.assertIn("select.lock", r.err)
        self.assertIn("pid %d" % holder.pid, r.err)
        self.assertIn("user %s" % user, r.err)

    def test_held_select_lock_bounds_every_command(self):
        a, b = self.users
        holder = self.hold_select_lock(b)
        # select-and-lease, a dry run (it reads the foreign processes), ps: one line, exit 6
        for args in (("run", "-n", "1", "--", "true"), ("run", "--dry-run", "-n", "1", "--",
                     "true"), ("select", "-n", "1", "--hold", "60"), ("ps",)):
            self.assertNamesHolder(self.as_user(a, *args), holder, b)
        # --wait=SECONDS honours its deadline while select.lock is held, whatever
        # GPUCTL_LOCK_WAIT says
        r = self.as_user(a, "run", "--wait=2", "-n", "1", "--", "true",
                         env={"GPUCTL_LOCK_WAIT": "3600"})
        self.assertNamesHolder(r, holder, b)
        # release ends the caller's own holders without select.lock
        r = self.as_user(a, "release", "--all")
        self.assertEqual((r.rc, r.out.strip()), (EXIT_OK, "released 0 holders"), r)
        # a shared hold by B blocks select-and-lease the same way
        holder.kill()
        holder.communicate()
        holder = self.hold_select_lock(b, "LOCK_SH")
        self.assertNamesHolder(self.as_user(a, "run", "-n", "1", "--", "true"), holder, b)

    def test_signals_end_a_wait_for_select_lock(self):
        a, b = self.users
        self.hold_select_lock(b)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            p = self.spawn_as(a, [GPUCTL, "run", "--wait", "-n", "1", "--", "true"])
            # gpuctl blocks the signal (to take it through its signalfd) before it waits. Its
            # helper threads are made with every signal blocked for a moment (watchdog.c,
            # sampler.c), which is not yet the wait: then SIGUSR1 is blocked too, and a
            # signal sent in that moment meets the default action once the mask is restored.
            self.assertTrue(wait_until(lambda: blocks_only_stop_signals(p.pid, sig)), p.pid)
            p.send_signal(sig)
            out, err = p.communicate(timeout=30)
            self.assertEqual(p.returncode, 128 + sig, (sig, out, err))

    def test_sighup_while_waiting_in_line_removes_the_ticket(self):
        a, b = self.users
        r = self.as_user(b, "select", "-n", "8", "--hold", "120")
        self.assertEqual(r.rc, 0, r)
        p = self.spawn_as(a, [GPUCTL, "run", "--wait", "-n", "1", "--", "true"])
        qdir = os.path.join(self.dir, "queue", str(self.uid[a]))
        tickets = lambda: [n for n in os.listdir(qdir) if not n.startswith(".")] \
            if os.path.isdir(qdir) else []
        self.assertTrue(wait_until(tickets), "no ticket appeared")
        p.send_signal(signal.SIGHUP)
        out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 128 + signal.SIGHUP, (out, err))
        self.assertEqual(tickets(), [])

    def test_exporter_keeps_sampling_while_select_lock_is_held(self):
        a, b = self.users
        with Exporter("dgx-a100", env={"GPUCTL_LEASE_DIR": self.dir}) as ex:
            r = run([GPUCTL, "select", "-n", "1", "--hold", "60", "--label", "seen"],
                    env=direct_env(self.dir))
            self.assertEqual(r.rc, 0, r)
            ex.wait_for(lambda m: "gpuctl_lease_holder_info" in m, "the lease")
            holder = self.hold_select_lock(b)
            ex.wait_for(lambda m: m["gpuctl_exporter_last_lease_success"][0][1] == 0,
                        "lease facts marked missing")
            # NVML sampling goes on: a GPU lost now shows on the next samples
            ex.nvsim("set", "-i", "2", "lost=1")
            m = ex.wait_for(lambda m: by_gpu(m, "gpuctl_gpu_lost").get(2) == 1, "lost GPU")
            self.assertEqual(m["gpuctl_exporter_last_sample_success"][0][1], 1)
            self.assertNotIn("gpuctl_lease_holder_info", m)
            holder.kill()
            holder.communicate()
            m = ex.wait_for(lambda m: m["gpuctl_exporter_last_lease_success"][0][1] == 1,
                            "lease facts back")
            self.assertIn("gpuctl_lease_holder_info", m)
            self.assertEqual(run([GPUCTL, "release", "--all"], env=direct_env(self.dir)).rc, 0)

    def plant_user_dirs(self, planter, victim):
        """planter makes owners/<victim's uid> and queue/<victim's uid> (both parents are
        world-writable with the sticky bit) before the victim's first lease: a directory, and
        a symlink to one of the planter's own."""
        code = ("import os, sys\n"
                "d, uid = sys.argv[1], sys.argv[2]\n"
                "os.mkdir(os.path.join(d, 'owners', uid), 0o755)\n"
                "os.mkdir(os.path.join(d, 'queue', uid + '.x'), 0o777)\n"
                "os.symlink(uid + '.x', os.path.join(d, 'queue', uid))\n")
        r = self.as_user(planter, cmd=["/usr/bin/python3", "-c", code, self.dir,
                                       str(self.uid[victim])])
        self.assertEqual(r.rc, 0, r)

    def test_planted_user_directories_do_not_break_hold_ps_release_wait(self):
        a, b = self.users
        self.plant_user_dirs(b, a)
        r = self.as_user(a, "select", "-n", "1", "--hold", "120", "--label", "A's")
        self.assertEqual(r.rc, 0, r)
        uuid = r.out.strip().split("=", 1)[1]
        # ps (anyone's) names A as the holder, with A's label
        doc = json.loads(run([GPUCTL, "ps", "--format", "json"], env=self.env).out)
        held = [d for d in doc["devices"] if d["state"] == "leased"]
        self.assertEqual([d["uuid"] for d in held], [uuid])
        self.assertEqual((held[0]["owner"]["user"], held[0]["owner"]["label"]), (a, "A's"))
        # A waits in line for all 8 GPUs (a ticket of A's despite the planted queue/<uid>)...
        p = self.spawn_as(a, [GPUCTL, "run", "--wait=120", "-n", "8", "--", "true"])
        self.assertTrue(wait_until(lambda: len(waiting(self.env)) == 1), "A never got in line")
        self.assertEqual(waiting(self.env)[0]["user"], a)
        # ... and A's release ends A's hold, after which the waiter runs
        r = self.as_user(a, "release", "--all")
        self.assertEqual((r.rc, r.out.strip()), (EXIT_OK, "released 1 holder"), r)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, (out, err))
        # B's planted directories were never used: nothing of A's is in them
        for sub in ("owners", "queue"):
            planted = os.path.join(self.dir, sub, str(self.uid[a]))
            if os.path.isdir(planted) and not os.path.islink(planted):
                self.assertEqual(os.listdir(planted), [])

    def test_wrong_owner_names_the_expected_owner(self):
        a, b = self.users
        os.chown(os.path.join(self.dir, "select.lock"), self.uid[b], -1)
        r = self.as_user(a, "run", "-n", "1", "--", "true")
        self.assertEqual(r.rc, EXIT_FAILURE, r)
        self.assertEqual(len(r.err.strip().splitlines()), 1, r)
        # the directory belongs to root: uid 0 is expected, B's uid is found
        self.assertIn("owned by uid %d, not by uid 0" % self.uid[b], r.err)

    def test_planted_ticket_numbers_cannot_wrap_the_queue(self):
        a, b = self.users
        r = self.as_user(a, "select", "-n", "8", "--hold", "120")
        self.assertEqual(r.rc, 0, r)
        # B waits first (a live ticket), then plants a ticket numbered 2^64-1 of B's own
        pb = self.spawn_as(b, [GPUCTL, "run", "--wait=120", "-n", "1", "--", "true"])
        self.assertTrue(wait_until(lambda: len(waiting(self.env)) == 1), "B never got in line")
        qb = [os.path.join(self.dir, "queue", n) for n in os.listdir(os.path.join(self.dir, "queue"))
              if n.split(".")[0] == str(self.uid[b])][0]
        # (live: B holds its lock, so B's own waiter does not clean it away)
        code = ("import fcntl, os, sys, time\n"
                "f = open(sys.argv[1] + '/.plant', 'w')\n"
                "fcntl.flock(f, fcntl.LOCK_EX)\n"
                "os.rename(sys.argv[1] + '/.plant', sys.argv[1] + '/18446744073709551615-1')\n"
                "print('planted', flush=True)\n"
                "time.sleep(600)\n")
        planter = self.spawn_as(b, ["/usr/bin/python3", "-c", code, qb])
        self.assertEqual(planter.stdout.readline().strip(), "planted")
        # A's waiter comes second and must stay behind B's (first come, first served)
        pa = self.spawn_as(a, [GPUCTL, "run", "--wait=120", "-n", "1", "--", "true"])
        self.assertTrue(wait_until(lambda: len(waiting(self.env)) == 2), "A never got in line")
        self.assertEqual([w["user"] for w in waiting(self.env)], [b, a])

    def test_root_refuses_a_lease_directory_under_a_users_symlink_or_directory(self):
        a, b = self.users
        pub = os.path.join(self.tmp, "pub")  # like /tmp: root's, world-writable, sticky
        target = os.path.join(self.tmp, "etcish")  # like /etc: root's, 0755
        for d, mode in ((pub, 0o1777), (target, 0o755)):
            os.makedirs(d, exist_ok=True)
            os.chmod(d, mode)
        self.addCleanup(shutil.rmtree, pub, True)
        self.addCleanup(shutil.rmtree, target, True)
        link, udir = os.path.join(pub, "x"), os.path.join(pub, "ud")
        r = self.as_user(b, cmd=["ln", "-s", target, link])
        self.assertEqual(r.rc, 0, r)
        r = self.as_user(b, cmd=["mkdir", "-m", "755", udir])
        self.assertEqual(r.rc, 0, r)
        for d, culprit in ((os.path.join(link, "sub"), link), (os.path.join(udir, "sub"), udir)):
            r = run([GPUCTL, "run", "--lease-dir", d, "-n", "1", "--", "true"], env=self.env)
            self.assertEqual(r.rc, EXIT_FAILURE, r)
            self.assertEqual(len(r.err.strip().splitlines()), 1, r)
            self.assertIn("'%s'" % culprit, r.err)
        self.assertEqual(os.listdir(target), [])  # nothing created where B's symlink points
        self.assertEqual(os.listdir(udir), [])
        # a symlink of root's is followed (/var/run -> /run), and a sticky parent is fine
        os.symlink(target, os.path.join(self.tmp, "rootlink"))
        self.addCleanup(os.unlink, os.path.join(self.tmp, "rootlink"))
        for d in (os.path.join(self.tmp, "rootlink", "ld"), os.path.join(pub, "ld")):
            r = run([GPUCTL, "run", "--lease-dir", d, "-n", "1", "--", "true"], env=self.env)
            self.assertEqual(r.rc, EXIT_OK, r)

    def test_personal_lease_directory_respects_the_system_ones_leases_and_pools(self):
        a, b = self.users
        conf = os.path.join(self.tmp, "hostile.conf")
        with open(conf, "w") as f:
            f.write("lease_dir = %s\n[pool theirs]\ngpus = 6,7\nusers = %s\n" % (self.dir, b))
        os.chmod(conf, 0o644)
        self.addCleanup(os.unlink, conf)
        r = run([GPUCTL, "--config", conf, "lease", "init", "--lease-dir", self.dir],
                env=self.env)
        self.assertEqual(r.rc, 0, r)
        r = self.as_user(b, "select", "-n", "1", "--only", "0", "--hold", "60",
                         env={"GPUCTL_CONFIG": conf})
        self.assertEqual(r.rc, 0, r)
        # A's own configuration names the system directory and has no pools (a personal
        # directory may follow any file): the system directory's file still decides them
        own = os.path.join(self.tmp, "own.conf")
        with open(own, "w") as f:
            f.write("lease_dir = %s\n" % self.dir)
        os.chmod(own, 0o644)
        self.addCleanup(os.unlink, own)
        env = {"GPUCTL_CONFIG": own, "GPUCTL_SYSTEM_LEASE_DIR": ""}
        # A's own directory (A owns its parent): GPU 0 is leased in the system directory,
        # GPUs 6 and 7 are in a pool A is not in; neither is A's to take there
        home = os.path.join(self.tmp, "home-a")
        os.makedirs(home, exist_ok=True)
        os.chown(home, self.uid[a], self.gid[a])
        self.addCleanup(shutil.rmtree, home, True)
        mine = os.path.join(home, "ld")
        r = self.as_user(a, "run", "--lease-dir", mine, "-n", "8", "--", "true", env=env)
        self.assertEqual(r.rc, EXIT_NOMATCH, r)
        self.assertEqual(len(r.err.strip().splitlines()), 1, r)
        self.assertIn("system lease directory %s: leased there: 0" % self.dir, r.err)
        self.assertIn("; in a pool not yours: 6,7)", r.err)
        r = self.as_user(a, "run", "--lease-dir", mine, "-n", "5", "--", "sh", "-c",
                         "echo $CUDA_VISIBLE_DEVICES", env=env)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(set(r.out.strip().split(",")), {UUIDS[i] for i in (1, 2, 3, 4, 5)})


class OddBytes(GpuctlTestCase):
    """Labels, command lines and process names are bytes; every JSON output stays JSON, with
    U+FFFD for each byte that is not UTF-8 (docs/json.md "Text")."""

    def test_invalid_utf8_in_label_command_and_process_name(self):
        tmp = tempfile.mkdtemp(prefix="gpuctl-oddbytes-")
        self.addCleanup(shutil.rmtree, tmp, True)
        prog = os.path.join(tmp.encode(), b"\xff")  # a program named with byte 0xff
        shutil.copy("/bin/sleep", prog)
        script = (b'"$GPUCTL" run --lease-dir "$D" -n 1 --label "$(printf \'\\376\')" -- '
                  b'sh -c "exec sleep 30" "$(printf \'\\377\')" & g=$!\n'
                  b'"$P" 30 & p=$!\n'
                  b'"$NVSIM" proc add --pid $p -i 3 --mem 1GiB\n'
                  b'i=0; until "$GPUCTL" ps --lease-dir "$D" --format json | grep -q leased; do\n'
                  b'  i=$((i+1)); [ $i -lt 500 ] || exit 9; sleep 0.02; done\n'
                  b'"$GPUCTL" ps --lease-dir "$D" --format json > "$T/ps.json"\n'
                  b'"$GPUCTL" list --format json > "$T/list.json"\n'
                  b'"$GPUCTL" watch --procs --format jsonl -c 1 > "$T/watch.jsonl"\n'
                  b'kill $g $p\n')
        r = run([NVSIM, "exec", "dgx-a100", "--", "sh", "-ec", script],
                env={"GPUCTL": GPUCTL, "NVSIM": NVSIM, "D": os.path.join(tmp, "ld"), "T": tmp,
                     "P": prog.decode(errors="surrogateescape"), "GPUCTL_CONFIG": EMPTY_CONFIG})
        self.assertEqual(r.rc, 0, r)

        def load(name):  # strict: bytes must be UTF-8 and the text JSON
            with open(os.path.join(tmp, name), "rb") as f:
                return f.read().decode("utf-8")
        ps = json.loads(load("ps.json"))
        owners = [d["owner"] for d in ps["devices"] if d.get("owner")]
        self.assertEqual(len(owners), 1, ps)
        owner = owners[0]
        self.assertEqual(owner["label"], "\ufffd")
        self.assertEqual(owner["command"], "sh -c exec sleep 30 \ufffd")
        names = [p["command"] for g in json.loads(load("list.json"))["gpus"]
                 for p in g.get("processes") or []]
        self.assertIn("\ufffd", names)
        rows = [json.loads(l) for l in load("watch.jsonl").splitlines()]
        self.assertIn("\ufffd", [row.get("command") for row in rows])


class LeaseAge(GpuctlTestCase):
    """ps's AGE counts from when the lease was taken, not from when its gpuctl started (which
    may have waited in line first)."""

    def test_age_excludes_the_wait_in_line(self):
        tmp = tempfile.mkdtemp(prefix="gpuctl-age-")
        self.addCleanup(shutil.rmtree, tmp, True)
        env = direct_env(os.path.join(tmp, "ld"))
        r = run([GPUCTL, "select", "-n", "8", "--hold", "120"], env=env)
        self.assertEqual(r.rc, 0, r)
        p = subprocess.Popen([GPUCTL, "run", "--wait=120", "-n", "1", "--", "sleep", "30"],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(p.wait)
        self.addCleanup(p.terminate)
        self.assertTrue(wait_until(lambda: len(waiting(env)) == 1), "never got in line")
        released_at = int(time.time())  # whole seconds, as records keep them
        r = run([GPUCTL, "release", "--all"], env=env)
        self.assertEqual(r.rc, 0, r)

        def owner():
            doc = json.loads(run([GPUCTL, "ps", "--format", "json"], env=env).out)
            got = [d["owner"] for d in doc["devices"] if d.get("owner")]
            return got[0] if got and got[0]["command"] == "sleep 30" else None
        o = wait_until(owner)
        self.assertTrue(o, "the waiter never got its lease")
        self.assertGreaterEqual(o["leased_since"], released_at)
        self.assertLessEqual(o["start_time"], released_at)  # gpuctl run started before

    def test_orphaned_grandchild_is_named_as_the_holder(self):
        tmp = tempfile.mkdtemp(prefix="gpuctl-orphan-")
        self.addCleanup(shutil.rmtree, tmp, True)
        env = direct_env(os.path.join(tmp, "ld"))
        # the job starts a grandchild that inherits the lock descriptors, then the job and
        # gpuctl run end: the grandchild alone keeps the lease (docs/leases.md)
        r = run([GPUCTL, "run", "-n", "1", "--", "sh", "-c",
                 "sleep 60 >/dev/null 2>&1 & echo $!"], env=env)
        self.assertEqual(r.rc, 0, r)
        orphan = int(r.out.strip())
        self.addCleanup(os.kill, orphan, signal.SIGKILL)
        doc = json.loads(run([GPUCTL, "ps", "--format", "json"], env=env).out)
        held = [d for d in doc["devices"] if d["state"] == "leased"]
        self.assertEqual(len(held), 1, doc)
        self.assertIsNotNone(held[0]["owner"], held[0])
        self.assertEqual((held[0]["owner"]["pid"], held[0]["owner"]["command"]),
                         (orphan, "sleep"))


def waiting(env):
    """The live tickets in line, in order (gpuctl ps --waiting --format json, docs/json.md)."""
    r = run([GPUCTL, "ps", "--waiting", "--format", "json"], env=env)
    assert r.rc == 0, r
    return json.loads(r.out)["waiting"]


def blocks_only_stop_signals(pid, sig):
    """pid blocks sig but not SIGUSR1: it takes sig through its signalfd, and is not in the
    moment a helper thread is made with every signal blocked (one reading of the mask)."""
    blocked = blocked_signals(pid)
    return sig in blocked and signal.SIGUSR1 not in blocked


def blocked_signals(pid):
    """The signals process pid blocks, from /proc/PID/status (proc(5): SigBlk, bit n-1 for
    signal n)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("SigBlk:"):
                    mask = int(line.split()[1], 16)
                    return {s for s in signal.Signals if mask >> (s - 1) & 1}
    except OSError:
        pass
    return set()


def by_gpu(metrics, name):
    return {int(l["gpu"]): v for l, v in metrics.get(name, [])}


if __name__ == "__main__":
    unittest.main()
