"""Root takes a lease back (docs/leases.md "Taking a lease back"; issue 27 point 4):
`gpuctl release --force` ends another user's `select --hold` holder, takes a `gpuctl run` job's
lease without ending the job (its lock file replaced: the job runs on, its GPU busy with a foreign
process), is refused to anyone but root, and leaves a notice that the holder's next command shows
exactly once.

Two throwaway users (useradd, removed after the class) and a root-owned shared lease directory in a
private temporary directory; never /run/gpuctl. Expected values come from the scenario file
(UUIDs), docs/leases.md (the lines and the notice's place and modes) and the test's own clock."""
import calendar
import json
import os
import re
import stat
import time
import unittest

from gpuctl_test import EXIT_FAILURE, EXIT_USAGE, GPUCTL, NVSIM, run
from test_leases import UUIDS, TwoUserCase, alive

# docs/leases.md: the line a holder's next command prints for each notice
NOTICE_RE = re.compile(r"^gpuctl: your lease of GPU (\d+) \((\S+)\) was taken back by (\S+) at "
                       r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d): (.*)$")


class ForceRelease(TwoUserCase):
    PREFIX = "gpuctlv"

    def setUp(self):
        self.make_shared_dir()
        self.addCleanup(lambda: run([GPUCTL, "release", "--all"], env=self.env))

    def hold(self, user, *args):
        r = self.as_user(user, "select", "-n", "1", "--hold", "60", *args)
        self.assertEqual(r.rc, 0, r)
        uuid = r.out.strip().split("=", 1)[1]
        self.assertIn(uuid, UUIDS)
        return uuid

    def leased(self):
        doc = json.loads(run([GPUCTL, "ps", "--format", "json"], env=self.env).out)
        return {d["uuid"]: d for d in doc["devices"] if d["state"] in ("leased", "shared")}

    def notices(self, user):
        """The notice lines (and the rest of stderr) of the user's next command, in UTC."""
        r = self.as_user(user, "ps", env={"TZ": "UTC"})
        self.assertEqual(r.rc, 0, r)
        lines = r.err.splitlines()
        return [NOTICE_RE.match(l) for l in lines if NOTICE_RE.match(l)], \
            [l for l in lines if not NOTICE_RE.match(l)]

    def test_root_takes_back_another_users_hold(self):
        a, b = self.users
        uuid = self.hold(a, "--label", "A's")
        idx = UUIDS.index(uuid)
        holder = self.leased()[uuid]["owner"]["pid"]
        t0 = int(time.time())
        r = run([GPUCTL, "release", "--force", "-i", str(idx), "--reason", "maintenance"],
                env=self.env)
        t1 = int(time.time())
        self.assertEqual((r.rc, r.err), (0, ""), r)
        self.assertEqual(r.out.splitlines(), [
            "took back 1 lease",
            "GPU %d (%s): from %s, pid %d: the --hold holder was ended" % (idx, uuid, a, holder)])
        # the holder is gone when release returns, and the GPU is free for anyone
        self.assertFalse(alive(holder))
        self.assertNotIn(uuid, self.leased())
        r = self.as_user(b, "select", "-n", "1", "--only", str(idx), "--hold", "60")
        self.assertEqual((r.rc, r.out.strip()), (0, "CUDA_VISIBLE_DEVICES=" + uuid), r)
        # the notice: DIR/notices/<uid of A>, A's own and private, the file root's
        ndir = os.path.join(self.dir, "notices", str(self.uid[a]))
        st = os.stat(ndir)
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (self.uid[a], 0o700))
        (name,) = os.listdir(ndir)
        self.assertEqual(os.stat(os.path.join(ndir, name)).st_uid, 0)
        # A's next command says why, once; B is told nothing
        found, rest = self.notices(a)
        self.assertEqual(len(found), 1, rest)
        m = found[0]
        self.assertEqual((int(m.group(1)), m.group(2), m.group(3), m.group(5)),
                         (idx, uuid, "root", "release --force: maintenance"))
        when = calendar.timegm(time.strptime(m.group(4), "%Y-%m-%d %H:%M:%S"))
        self.assertTrue(t0 <= when <= t1, (t0, when, t1))
        self.assertEqual(rest, [])
        self.assertEqual(self.notices(a), ([], []))
        self.assertEqual(self.notices(b), ([], []))

    def test_root_takes_back_a_run_jobs_lease_and_the_job_runs_on(self):
        a = self.users[0]
        work = os.path.join(self.tmp, "w")
        os.makedirs(work, exist_ok=True)
        os.chmod(work, 0o1777)
        jobfile = os.path.join(work, "job")
        if os.path.exists(jobfile):
            os.unlink(jobfile)
        # user A's `gpuctl run` on GPU 3, its job a compute process there (registered by root);
        # root takes the lease back; the rest is read from inside the simulated machine.
        script = (
            'chmod -R a+rX "$NVSIM_STATE_DIR"\n'
            'setpriv --reuid %(uid)d --regid %(gid)d --init-groups "$GPUCTL" run -n 1 --only 3 '
            '-- sh -c \'echo $$ > %(job)s; exec sleep 60\' > /dev/null 2>&1 &\n'
            'i=0; until [ -s %(job)s ] && "$GPUCTL" ps --format json | grep -q \'"job_pid": [1-9]\'; '
            'do i=$((i+1)); [ $i -lt 500 ] || exit 9; sleep 0.02; done\n'
            'J=$(cat %(job)s); "$NVSIM" proc add --pid $J -i 3 --mem 1GiB\n'
            '"$GPUCTL" release --force -i 3 > %(w)s/out\n'
            'kill -0 $J && echo alive > %(w)s/alive\n'
            '"$GPUCTL" ps --format json > %(w)s/ps1.json\n'
            '"$GPUCTL" select -n 1 --only 3 --hold 30 --ignore-foreign > %(w)s/sel\n'
            '"$GPUCTL" ps --format json > %(w)s/ps2.json\n'
            '"$GPUCTL" release --all > /dev/null\n'
            'kill $J\n') % {"uid": self.uid[a], "gid": self.gid[a], "job": jobfile, "w": work}
        r = run([NVSIM, "exec", "dgx-a100", "--", "sh", "-ec", script],
                env={"GPUCTL": GPUCTL, "NVSIM": NVSIM, "GPUCTL_LEASE_DIR": self.dir})
        self.assertEqual(r.rc, 0, r)

        def read(name):
            with open(os.path.join(work, name)) as f:
                return f.read()
        job = int(read("job"))
        out = read("out").splitlines()
        self.assertEqual(out[0], "took back 1 lease")
        self.assertRegex(out[1], r"^GPU 3 \(%s\): from %s, pid \d+: lock file replaced; its "
                         r"processes run on, no longer leased$" % (UUIDS[3], a))
        self.assertEqual(read("alive"), "alive\n")
        # the job runs on, now a foreign process of a GPU nobody leases
        (d,) = [d for d in json.loads(read("ps1.json"))["devices"] if d["index"] == 3]
        self.assertEqual((d["state"], d["owner"]), ("busy", None))
        self.assertEqual([f["pid"] for f in d["foreign"]], [job])
        # the GPU is free for a lease; the evicted job is not the new lease's
        self.assertEqual(read("sel").strip(), "CUDA_VISIBLE_DEVICES=" + UUIDS[3])
        (d,) = [d for d in json.loads(read("ps2.json"))["devices"] if d["index"] == 3]
        self.assertEqual((d["state"], d["owner"]["user"]), ("leased", "root"))
        self.assertEqual([f["pid"] for f in d["foreign"]], [job])
        # A is told, once, that the job runs on
        found, rest = self.notices(a)
        self.assertEqual(len(found), 1, rest)
        self.assertEqual(found[0].group(5),
                         "release --force (your processes on it run on, no longer leased)")
        self.assertEqual(self.notices(a)[0], [])

    def test_only_root_may_force(self):
        a, b = self.users
        uuid = self.hold(a)
        for args in (["--all"], ["-i", str(UUIDS.index(uuid))]):
            r = self.as_user(b, "release", "--force", *args)
            self.assertOneLineError(r, EXIT_FAILURE, "only root")
            r = self.as_user(a, "release", "--force", *args)
            self.assertOneLineError(r, EXIT_FAILURE, "only root")
        self.assertIn(uuid, self.leased())
        self.assertFalse(os.path.exists(os.path.join(self.dir, "notices", str(self.uid[a]))))

    def test_bad_reason_is_a_usage_error(self):
        a = self.users[0]
        uuid = self.hold(a)
        for args, needle in ((["--reason", "a\x01b"], "control character"),
                             (["--reason", "line\nbreak"], "control character"),
                             (["--reason", ""], "empty"),
                             (["--reason", "x" * 181], "180"),
                             ):
            r = run([GPUCTL, "release", "--force", "--all", *args], env=self.env)
            self.assertOneLineError(r, EXIT_USAGE, "--reason", needle)
        r = run([GPUCTL, "release", "--all", "--reason", "why"], env=self.env)
        self.assertOneLineError(r, EXIT_USAGE, "--reason needs --force")
        self.assertIn(uuid, self.leased())

    def test_a_notice_the_user_wrote_is_not_shown(self):
        # notices are root's files: one a user writes into their own notice directory is
        # ignored (docs/leases.md)
        a = self.users[0]
        uuid = self.hold(a)
        r = run([GPUCTL, "release", "--force", "--all", "--reason", "x"], env=self.env)
        self.assertEqual(r.rc, 0, r)
        ndir = os.path.join(self.dir, "notices", str(self.uid[a]))
        (name,) = os.listdir(ndir)
        with open(os.path.join(ndir, name)) as f:
            text = f.read()
        forged = ("import os, sys\n"
                  "d, t = sys.argv[1], sys.argv[2]\n"
                  "open(os.path.join(d, '1-1-%s.notice'), 'w').write(t)\n" % uuid)
        r = self.as_user(a, cmd=["/usr/bin/python3", "-c", forged, ndir, text.replace("x", "forged")])
        self.assertEqual(r.rc, 0, r)
        found, rest = self.notices(a)
        self.assertEqual([m.group(5) for m in found], ["release --force: x"], rest)


if __name__ == "__main__":
    unittest.main()
