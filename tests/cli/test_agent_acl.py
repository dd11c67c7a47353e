"""enforce = acl (issue 28; docs/agent.md, "Enforcement: acl"): the real agent on the simulated
DGX A100 keeps the GPUs' device nodes closed to users and opens each, with a POSIX ACL entry,
to the users holding a lease on it. Real kernel, no driver: the nodes are made with mknod
(character major 195, the minors the scenario gives: sim/SCENARIO.md's minor_number, default the
index) in a scratch directory the agent is pointed at (dev_dir), and two throwaway users
(useradd; removed after the class) open them through setpriv.

Expected errnos are the kernel's, not gpuctl's: open(2) of a node its permission bits and ACL
deny is EACCES (acl(5), "Access check algorithm"); one they allow reaches the character device's
driver, and with no driver registered for the major the kernel answers ENXIO (chrdev_open). A
lease's end is seen at the first sample after it (docs/agent.md, "Resolution"): within one
interval plus the time a sample takes on this loaded machine (SLACK_S)."""
import os
import shutil
import signal
import stat
import subprocess
import time
import unittest

import test_exporter as tx
from gpuctl_test import EXIT_USAGE, GPUCTL, SIMLIB, run
from test_agent import AgentCase
from test_leases import A100, UUIDS, TwoUserCase, wait_until

INTERVAL = 0.2
SLACK_S = 0.8
PATIENCE_S = 15
PY = "/usr/bin/python3"  # Debian's, runnable by the throwaway users
OPEN = ("import errno, os, sys\n"
        "for p in sys.argv[1:]:\n"
        "    try:\n"
        "        os.close(os.open(p, os.O_RDWR if '/nvidia-caps/' not in p else os.O_RDONLY))\n"
        "        print('OK')\n"
        "    except OSError as e:\n"
        "        print(errno.errorcode[e.errno])\n")


@unittest.skipUnless(os.geteuid() == 0, "needs root (mknod, useradd, setpriv)")
class AclEnforce(AgentCase):
    PREFIX = "gpuctlacl"  # the users: TwoUserCase's, made for the class and removed after it

    @classmethod
    def setUpClass(cls):
        TwoUserCase.setUpClass.__func__(cls)

    @classmethod
    def tearDownClass(cls):
        TwoUserCase.tearDownClass.__func__(cls)

    def setUp(self):
        super().setUp()
        # the nodes as udev and nvidia-modprobe leave them: root's, 0666
        self.dev = os.path.join(self.tmp, "dev")
        os.makedirs(os.path.join(self.dev, "nvidia-caps"))
        os.chmod(self.dev, 0o755)
        for i in range(8):
            self.mknod("nvidia%d" % i, 195, i)
        self.mknod("nvidiactl", 195, 255)
        self.mknod("nvidia-modeset", 195, 254)
        self.conf = os.path.join(self.tmp, "gpuctl.conf")
        self.write_conf("enforce = acl\ndev_dir = %s\n" % self.dev)

    def write_conf(self, text):
        with open(self.conf, "w") as f:
            f.write(text)
        os.chmod(self.conf, 0o644)

    def mknod(self, name, major, minor, mode=0o666):
        path = os.path.join(self.dev, name)
        os.mknod(path, stat.S_IFCHR | mode, os.makedev(major, minor))
        os.chmod(path, mode)
        return path

    def node(self, i):
        return os.path.join(self.dev, "nvidia%d" % i)

    def start(self, scenario="dgx-a100", closed=range(8)):
        """The agent; returns once a sample has closed the nodes of the GPUs `closed` (those
        in acl mode), so what a test sees next is the agent's doing."""
        ag = tx.Exporter(scenario, command="agent", interval=str(INTERVAL),
                         args=["--ledger", self.ledger, "--lease-dir", self.leases],
                         env={"GPUCTL_CONFIG": self.conf})
        self.addCleanup(ag.close)
        ag.start()
        os.chmod(ag.tmp, 0o755)
        subprocess.run(["chmod", "-R", "a+rX", ag.state], check=True)
        self.e = {"NVSIM_STATE_DIR": ag.state, "GPUCTL_NVML_LIBRARY": SIMLIB,
                  "GPUCTL_LEASE_DIR": self.leases, "GPUCTL_CONFIG": self.conf}
        if not os.path.exists(self.leases):
            r = run([GPUCTL, "lease", "init"], env=self.e)
            self.assertEqual(r.rc, 0, r)
        for u in self.users:
            self.addCleanup(self.as_user, u, GPUCTL, "release", "--all")
        self.assertTrue(self.wait_for(
            lambda: all(stat.S_IMODE(os.stat(self.node(i)).st_mode) in (0o600, 0o660)
                        for i in closed)), ag.stderr())
        return ag

    def as_user(self, user, *argv):
        return run(["setpriv", "--reuid", str(self.uid[user]), "--regid", str(self.gid[user]),
                    "--init-groups", *argv], env=self.e)

    def opens(self, user, *paths):
        """What open(2) read-write of each path gives user: 'OK' or the errno's name."""
        r = self.as_user(user, PY, "-c", OPEN, *paths)
        self.assertEqual(r.rc, 0, r)
        return r.out.split()

    def hold(self, user, idx, *args):
        r = self.as_user(user, GPUCTL, "select", "-n", "1", "--only", str(idx), "--hold", "120",
                         *args)
        self.assertEqual(r.rc, 0, r)

    def wait_for(self, pred):
        return wait_until(pred, timeout=PATIENCE_S)

    def acl_text(self, path):
        r = run(["getfacl", "-cpn", path])
        self.assertEqual(r.rc, 0, r)
        return sorted(r.out.split())

    def test_holder_opens_others_get_eacces_and_the_end_revokes(self):
        a, b = self.users
        ag = self.start()
        # closed at the first sample, before any lease: nobody but root
        self.assertEqual(stat.S_IMODE(os.stat(self.node(2)).st_mode), 0o600)
        self.assertEqual(self.opens(a, self.node(2), self.node(5)), ["EACCES", "EACCES"])
        self.hold(a, 2)
        self.assertTrue(self.wait_for(lambda: self.opens(a, self.node(2)) == ["ENXIO"]),
                        ag.stderr())
        # B is refused A's GPU and an unleased one; both reach the shared nodes as before
        self.assertEqual(self.opens(b, self.node(2), self.node(5)), ["EACCES", "EACCES"])
        self.assertEqual(self.opens(a, self.node(5)), ["EACCES"])
        for u in (a, b):
            self.assertEqual(self.opens(u, os.path.join(self.dev, "nvidiactl"),
                                        os.path.join(self.dev, "nvidia-modeset")),
                             ["ENXIO", "ENXIO"])
        st = os.stat(os.path.join(self.dev, "nvidiactl"))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o666)
        # the node: root's, the ACL of docs/agent.md
        st = os.stat(self.node(2))
        self.assertEqual((st.st_uid, st.st_gid), (0, 0))
        self.assertEqual(self.acl_text(self.node(2)), sorted(
            ["user::rw-", "user:%d:rw-" % self.uid[a], "group::---", "mask::rw-",
             "other::---"]))
        # the lease ends: A is refused within one interval (and a sample's time)
        r = self.as_user(a, GPUCTL, "release", "--all")
        self.assertEqual(r.rc, 0, r)
        t0 = time.monotonic()
        self.assertTrue(self.wait_for(lambda: self.opens(a, self.node(2)) == ["EACCES"]))
        # the time to start python as A is in it too: an upper bound of the agent's delay
        self.assertLess(time.monotonic() - t0, INTERVAL + SLACK_S + 1.0)
        self.assertEqual(self.acl_text(self.node(2)),
                         sorted(["user::rw-", "group::---", "other::---"]))

    def test_a_forged_owner_record_grants_nothing(self):
        a, b = self.users
        ag = self.start()
        self.hold(a, 2)
        self.assertTrue(self.wait_for(lambda: self.opens(a, self.node(2)) == ["ENXIO"]),
                        ag.stderr())
        # B copies A's owner record into B's own owners directory (a record of B's, naming A's
        # holder and GPU), and writes one for the free GPU 5
        adir = os.path.join(self.leases, "owners", str(self.uid[a]))
        bdir = os.path.join(self.leases, "owners", str(self.uid[b]))
        (rec,) = [f for f in os.listdir(adir) if f.endswith(".json")]
        with open(os.path.join(adir, rec)) as f:
            text = f.read()
        plant = ("import os, sys\n"
                 "d, name, text = sys.argv[1], sys.argv[2], sys.argv[3]\n"
                 "os.makedirs(d, exist_ok=True)\n"
                 "open(os.path.join(d, name), 'w').write(text)\n")
        r = self.as_user(b, PY, "-c", plant, bdir, rec, text)
        self.assertEqual(r.rc, 0, r)
        r = self.as_user(b, PY, "-c", plant, bdir, UUIDS[5] + ".json", text)
        self.assertEqual(r.rc, 0, r)
        time.sleep(3 * INTERVAL)  # samples that read the planted records
        self.assertEqual(self.opens(b, self.node(2), self.node(5)), ["EACCES", "EACCES"],
                         ag.stderr())
        self.assertEqual(self.opens(a, self.node(2)), ["ENXIO"])

    def test_shared_lease_opens_to_every_sharer(self):
        a, b = self.users
        ag = self.start()
        self.hold(a, 4, "--share", "--mem", "1GiB")
        self.hold(b, 4, "--share", "--mem", "1GiB")
        self.assertTrue(self.wait_for(
            lambda: self.opens(a, self.node(4)) + self.opens(b, self.node(4)) ==
            ["ENXIO", "ENXIO"]), ag.stderr())
        self.assertEqual(self.opens(a, self.node(3)), ["EACCES"])
        # B leaves: A keeps it, B is refused
        r = self.as_user(b, GPUCTL, "release", "--all")
        self.assertEqual(r.rc, 0, r)
        self.assertTrue(self.wait_for(lambda: self.opens(b, self.node(4)) == ["EACCES"]))
        self.assertEqual(self.opens(a, self.node(4)), ["ENXIO"])

    def test_stop_restores_the_original_owner_mode_and_acl(self):
        a, b = self.users
        # one node with an owner, group, mode and ACL of its own
        odd = self.node(6)
        os.chown(odd, self.uid[b], 0)
        os.chmod(odd, 0o640)
        r = run(["setfacl", "-m", "u:%d:r" % self.uid[a], odd])
        self.assertEqual(r.rc, 0, r)
        before = {i: os.stat(self.node(i)) for i in range(8)}
        acl_before = self.acl_text(odd)
        ag = self.start()
        self.hold(a, 1)
        self.assertTrue(self.wait_for(lambda: self.opens(a, self.node(1)) == ["ENXIO"]),
                        ag.stderr())
        # B owned node 6: it is root's now, and B is refused it
        self.assertEqual(os.stat(odd).st_uid, 0)
        self.assertEqual(self.opens(b, odd), ["EACCES"])
        self.assertEqual(ag.stop(), 0, ag.stderr())
        for i in range(8):
            st = os.stat(self.node(i))
            self.assertEqual((st.st_mode, st.st_uid, st.st_gid),
                             (before[i].st_mode, before[i].st_uid, before[i].st_gid), i)
        self.assertEqual(self.acl_text(odd), acl_before)
        self.assertEqual(self.acl_text(self.node(1)),
                         sorted(["user::rw-", "group::rw-", "other::rw-"]))
        # A's lease goes on; without the agent the node is open again, as before
        self.assertEqual(self.opens(b, self.node(1)), ["ENXIO"])

    def test_a_crash_leaves_nodes_closed_and_the_next_agent_restores(self):
        a, b = self.users
        ag = self.start()
        self.hold(a, 3)
        self.assertTrue(self.wait_for(lambda: self.opens(a, self.node(3)) == ["ENXIO"]),
                        ag.stderr())
        # SIGKILL the agent itself (nvsim exec's child)
        r = run(["pgrep", "-P", str(ag.proc.pid)])
        self.assertEqual(r.rc, 0, r)
        os.kill(int(r.out.split()[0]), signal.SIGKILL)
        ag.proc.wait(10)
        # closed still: B is refused, A keeps its grant of that moment
        self.assertEqual(self.opens(b, self.node(3), self.node(0)), ["EACCES", "EACCES"])
        r = self.as_user(a, GPUCTL, "release", "--all")
        self.assertEqual(r.rc, 0, r)
        # the next agent re-derives the grants from the leases (none now)...
        ag2 = self.start()
        self.assertTrue(self.wait_for(lambda: self.opens(a, self.node(3)) == ["EACCES"]),
                        ag2.stderr())
        # ... and its stop restores the originals the first one saved (0666), not its closed
        # state
        self.assertEqual(ag2.stop(), 0, ag2.stderr())
        for i in range(8):
            self.assertEqual(stat.S_IMODE(os.stat(self.node(i)).st_mode), 0o666, i)
        self.assertEqual(self.opens(b, self.node(3)), ["ENXIO"])

    def test_gpus_that_leave_acl_mode_are_restored(self):
        a, b = self.users
        ag = self.start()
        self.hold(a, 6)
        self.assertTrue(self.wait_for(lambda: self.opens(a, self.node(6)) == ["ENXIO"]),
                        ag.stderr())
        r = run(["pgrep", "-P", str(ag.proc.pid)])
        self.assertEqual(r.rc, 0, r)
        os.kill(int(r.out.split()[0]), signal.SIGKILL)
        ag.proc.wait(10)
        # GPUs 6 and 7 leave acl mode: the next agent's first sample gives them back their
        # originals (0666, from the state file), the others stay closed
        self.write_conf("enforce = acl\ndev_dir = %s\n[pool open]\ngpus = 6-7\nenforce = off\n"
                        % self.dev)
        ag2 = self.start(closed=range(6))
        self.assertTrue(self.wait_for(
            lambda: stat.S_IMODE(os.stat(self.node(7)).st_mode) == 0o666), ag2.stderr())
        self.assertEqual(self.opens(b, self.node(6), self.node(7), self.node(5)),
                         ["ENXIO", "ENXIO", "EACCES"])
        self.assertEqual(self.acl_text(self.node(6)),
                         sorted(["user::rw-", "group::rw-", "other::rw-"]))

    def test_a_node_recreated_open_is_closed_again(self):
        a, b = self.users
        ag = self.start()
        # as a driver reload does: the node made anew with udev's mode
        os.unlink(self.node(5))
        self.mknod("nvidia5", 195, 5)
        self.assertTrue(self.wait_for(lambda: self.opens(b, self.node(5)) == ["EACCES"]),
                        ag.stderr())
        self.assertEqual(stat.S_IMODE(os.stat(self.node(5)).st_mode), 0o600, ag.stderr())
        # and its original is still the first one's: the stop gives back 0666
        self.assertEqual(ag.stop(), 0, ag.stderr())
        self.assertEqual(stat.S_IMODE(os.stat(self.node(5)).st_mode), 0o666)

    def test_a_planted_state_file_changes_nothing(self):
        a, b = self.users
        state = self.leases + "-acl.state"  # docs/agent.md: beside the lease directory
        victim = os.path.join(self.tmp, "victim")
        os.mknod(victim, stat.S_IFCHR | 0o600, os.makedev(1, 3))
        # root's own file may only name nodes under the dev directory
        with open(state, "w") as f:
            f.write("666 %d 0 1:3 - %s\n" % (self.uid[b], victim))
        ag = self.start()
        self.assertEqual(ag.stop(), 0, ag.stderr())
        st = os.stat(victim)
        self.assertEqual((stat.S_IMODE(st.st_mode), st.st_uid), (0o600, 0))
        # a file another user owns is not believed at all: node 5 keeps its true original
        with open(state, "w") as f:
            f.write("666 %d 0 195:5 - %s\n" % (self.uid[b], self.node(5)))
        os.chown(state, self.uid[b], 0)
        ag = self.start()
        self.assertIn("acl: state file %s: %s" % (state, os.strerror(1)), ag.stderr())
        self.assertEqual(ag.stop(), 0, ag.stderr())
        st = os.stat(self.node(5))
        self.assertEqual((stat.S_IMODE(st.st_mode), st.st_uid), (0o666, 0))

    def test_a_node_no_longer_known_stays_closed(self):
        a, b = self.users
        ag = self.start()
        # the driver's file of GPU 5 goes (its bus id from the scenario file): its minor, so its
        # node, is unknown from the next sample on
        bus = A100.gpus[5]["pci_bus_id"].lower()[4:]  # the driver's spelling: 4-digit domain
        info = os.path.join(ag.state, "root", "proc", "driver", "nvidia", "gpus", bus)
        self.assertTrue(os.path.isdir(info), info)
        shutil.rmtree(info)
        self.assertTrue(self.wait_for(
            lambda: "acl: GPU 5: its device node is not known" in ag.stderr()), ag.stderr())
        time.sleep(3 * INTERVAL)
        self.assertEqual(stat.S_IMODE(os.stat(self.node(5)).st_mode), 0o600)
        self.assertEqual(self.opens(b, self.node(5)), ["EACCES"])

    def test_dev_dir_must_be_absolute(self):
        r = run([GPUCTL, "agent", "--dev-dir", "dev"])
        self.assertOneLineError(r, EXIT_USAGE, "--dev-dir")
        self.write_conf("enforce = acl\ndev_dir = dev\n")
        r = run([GPUCTL, "--config", self.conf, "agent"])
        self.assertOneLineError(r, EXIT_USAGE, "dev_dir 'dev': not an absolute path")

    def test_pool_not_in_acl_mode_is_left_alone(self):
        a, b = self.users
        self.write_conf("enforce = acl\ndev_dir = %s\n[pool open]\ngpus = 6-7\nenforce = off\n"
                        % self.dev)
        self.start(closed=range(6))
        self.assertEqual(self.opens(b, self.node(6), self.node(7), self.node(0)),
                         ["ENXIO", "ENXIO", "EACCES"])
        self.assertEqual(stat.S_IMODE(os.stat(self.node(6)).st_mode), 0o666)

    def test_mig_device_opens_its_capabilities_and_its_gpus_node(self):
        a, b = self.users
        ag = self.start("a100-mig", closed=range(4))
        # the capability minors and the nvidia-caps major from the simulated machine's
        # /proc files (nvsim writes them as the driver lays them out; sim/procfs.c)
        proc = os.path.join(ag.state, "root", "proc")
        with open(os.path.join(proc, "driver", "nvidia-caps", "mig-minors")) as f:
            minors = dict(l.split() for l in f.read().splitlines())
        with open(os.path.join(proc, "devices")) as f:
            (major,) = [int(l.split()[0]) for l in f.read().splitlines()
                        if l.endswith(" nvidia-caps")]
        # GPU 0 (minor 0: sim/SCENARIO.md's default) and its MIG devices (the scenario file)
        migs = [(m["uuid"], m["gi"], m["ci"]) for m in self.scenario_migs("a100-mig", 0)]
        caps = {}
        for uuid, gi, ci in migs:
            caps[uuid] = [int(minors["gpu0/gi%d/access" % gi]),
                          int(minors["gpu0/gi%d/ci%d/access" % (gi, ci)])]
            for n in caps[uuid]:
                p = os.path.join(self.dev, "nvidia-caps", "nvidia-cap%d" % n)
                if not os.path.exists(p):
                    self.mknod(os.path.join("nvidia-caps", "nvidia-cap%d" % n), major, n,
                               mode=0o444)
        # every capability of GPU 0's MIG devices closed at a sample after the nodes appeared
        every = [os.path.join(self.dev, "nvidia-caps", "nvidia-cap%d" % n)
                 for u in caps for n in caps[u]]
        self.assertTrue(self.wait_for(
            lambda: all(stat.S_IMODE(os.stat(p).st_mode) == 0o600 for p in every)),
            ag.stderr())
        r = self.as_user(a, GPUCTL, "select", "-n", "1", "--mig", "1g.5gb", "--only", "0",
                         "--hold", "120")
        self.assertEqual(r.rc, 0, r)
        mine = r.out.strip().split("=", 1)[1]
        self.assertIn(mine, caps)
        other = [u for u, _, _ in migs if u != mine][0]

        def cap(u, k):
            return os.path.join(self.dev, "nvidia-caps", "nvidia-cap%d" % caps[u][k])
        # caps are opened read-only by CUDA (nvidia-modprobe makes them 0444)
        self.assertTrue(self.wait_for(
            lambda: self.opens(a, self.node(0), cap(mine, 0), cap(mine, 1)) ==
            ["ENXIO"] * 3), ag.stderr())
        self.assertEqual(self.opens(b, self.node(0), cap(mine, 0), cap(mine, 1)),
                         ["EACCES"] * 3)
        self.assertEqual(self.opens(a, cap(other, 0), cap(other, 1)), ["EACCES"] * 2,
                         ag.stderr())

    @staticmethod
    def scenario_migs(name, gpu):
        import json
        from gpuctl_test import SCENARIOS
        with open(os.path.join(SCENARIOS, name + ".json")) as f:
            return json.load(f)["gpus"][gpu]["mig"]["instances"]


if __name__ == "__main__":
    unittest.main()
