"""enforce = cgroup (issue 28, point 1; docs/agent.md "Enforcement: cgroup"): the node agent puts each
`gpuctl run` job in a cgroup whose device filter lets it open only its own GPUs' nodes, through
the cgroup v1 devices controller and through a cgroup v2 eBPF device program; its socket
confines only a caller that holds a lease, by the kernel's word.

Real kernel, no driver: device nodes made with mknod (char 195:minor) in a scratch directory;
real users (useradd, removed after the class); the agent on the simulated DGX A100, its job
cgroups under a scratch parent of /sys/fs/cgroup/devices (v1) or /sys/fs/cgroup/unified (v2),
removed after each test, even on failure. Expected values come from independent sources:
- the minor of GPU i: the simulated driver's /proc/driver/nvidia/gpus/<bus>/information
  "Device Minor:" line, matched by the scenario file's bus id;
- what the kernel answers: an open the device cgroup lets through reaches the character device
  layer, which has no driver for major 195 here: ENXIO (chrdev_open); an open the filter denies
  fails with EPERM (Documentation/admin-guide/cgroup-v1/devices.rst: the devices controller
  "denies" the access; cgroup-v2.rst, "Device controller": "a return value of 0 rejects the
  access", -EPERM);
- the refusals' wording and the exit status 11: docs/agent.md and docs/gpuctl.1, EXIT STATUS."""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

import test_exporter as tx
from gpuctl_test import GPUCTL, SIMLIB, run
from test_leases import UUIDS, TwoUserCase, wait_until

EXIT_CONFINE = 11  # docs/gpuctl.1 EXIT STATUS: enforce = cgroup and the job was not confined
INTERVAL = "0.2"
PATIENCE_S = 15
V1_ROOT = "/sys/fs/cgroup/devices"
V2_ROOT = "/sys/fs/cgroup/unified"
# the system's python for the users' processes (a PATH of root's, such as pyenv's, is not theirs)
PY = "/usr/bin/python3"
SCENARIOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sim",
                         "scenarios")

# The job: open each node given, print "name errno-name" ("ok" when it opened), then its cgroups.
JOB = r"""
import errno, os, sys
for path in sys.argv[1:]:
    try:
        os.close(os.open(path, os.O_RDWR))
        print(os.path.basename(path), "ok")
    except OSError as e:
        print(os.path.basename(path), errno.errorcode[e.errno])
with open("/proc/self/cgroup") as f:
    for line in f:
        print("cgroup", line.strip())
sys.stdout.flush()
"""

# A client of the agent's socket: sends argv[2] (JSON text, with "$$" replaced by its own pid)
# to the socket argv[1] and prints the reply line.
CLIENT = r"""
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].replace("$$", str(os.getpid())).encode() + b"\n")
print(s.makefile().readline().strip())
"""


def minors(state, scenario):
    """GPU index -> minor, from the simulated driver's information files (by bus id)."""
    root = os.path.join(state, "root", "proc", "driver", "nvidia", "gpus")
    by_bus = {}
    for bus in os.listdir(root):
        with open(os.path.join(root, bus, "information")) as f:
            for line in f:
                if line.startswith("Device Minor:"):
                    by_bus[bus.lower()] = int(line.split(":", 1)[1])
    with open(os.path.join(SCENARIOS, scenario + ".json")) as f:
        gpus = json.load(f)["gpus"]
    out = {}
    for i, g in enumerate(gpus):
        bus = g["pci_bus_id"].lower()
        # the driver writes "0000:07:00.0", NVML "00000000:07:00.0"
        key = [b for b in by_bus if b.endswith(bus.split(":", 1)[1]) and
               int(b.split(":")[0], 16) == int(bus.split(":")[0], 16)]
        out[i] = by_bus[key[0]]
    return out


def remove_cgroups(parent):
    """Ends what is left in the job cgroups under parent and removes them and parent."""
    if not os.path.isdir(parent):
        return
    for name in os.listdir(parent):
        d = os.path.join(parent, name)
        if not os.path.isdir(d):
            continue
        for _ in range(100):
            try:
                with open(os.path.join(d, "cgroup.procs")) as f:
                    pids = [int(p) for p in f.read().split()]
            except OSError:
                break
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
            try:
                os.rmdir(d)
                break
            except OSError:
                time.sleep(0.05)
    try:
        os.rmdir(parent)
    except OSError:
        pass


class CgroupCase(TwoUserCase):
    PREFIX = "gpuctlc"
    VERSION = None  # "v1" or "v2"

    def setUp(self):
        if self.VERSION is None:
            self.skipTest("base class")
        root = V1_ROOT if self.VERSION == "v1" else V2_ROOT
        if not os.path.isdir(root):
            self.skipTest("no %s" % root)
        self.scratch = tempfile.mkdtemp(prefix="gpuctl-cgroup-")
        os.chmod(self.scratch, 0o755)
        self.addCleanup(shutil.rmtree, self.scratch, True)
        self.parent_name = "gpuctl-test-%d-%s" % (os.getpid(), os.path.basename(self.scratch))
        self.parent = os.path.join(root, self.parent_name)
        self.addCleanup(remove_cgroups, self.parent)
        self.sock = os.path.join(self.scratch, "agent.sock")
        self.conf = os.path.join(self.scratch, "gpuctl.conf")
        with open(self.conf, "w") as f:
            f.write("enforce = cgroup\nagent_socket = %s\n" % self.sock)
        os.chmod(self.conf, 0o644)
        self.dir = os.path.join(self.scratch, "leases")
        self.ledger = os.path.join(self.scratch, "ledger.db")

    def start_agent(self, scenario="dgx-a100"):
        r = run([GPUCTL, "--config", self.conf, "lease", "init", "--lease-dir", self.dir],
                env=tx.test_env({"GPUCTL_NVML_LIBRARY": SIMLIB,
                                 "NVSIM_SCENARIO": os.path.join(SCENARIOS, scenario + ".json")}))
        self.assertEqual(r.rc, 0, r)
        ag = tx.Exporter(scenario, command="agent", interval=INTERVAL,
                         args=["--ledger", self.ledger, "--lease-dir", self.dir, "--socket",
                               self.sock, "--cgroup", self.VERSION, "--cgroup-parent",
                               self.parent_name],
                         env={"GPUCTL_CONFIG": self.conf})
        self.addCleanup(ag.close)
        self.addCleanup(self.agent_clean)
        ag.start()
        os.chmod(ag.tmp, 0o755)
        self.ag = ag
        self.env = tx.test_env({"NVSIM_STATE_DIR": ag.state, "GPUCTL_NVML_LIBRARY": SIMLIB,
                                "GPUCTL_LEASE_DIR": self.dir, "GPUCTL_CONFIG": self.conf})
        self.addCleanup(self.release_all)
        # the device nodes: one per GPU, char 195:minor, and nvidiactl (195:255)
        self.minor = minors(ag.state, scenario)
        self.dev = os.path.join(self.scratch, "dev")
        os.mkdir(self.dev)
        os.chmod(self.dev, 0o755)
        for i, m in self.minor.items():
            p = os.path.join(self.dev, "nvidia%d" % m)
            os.mknod(p, 0o666 | 0o020000, os.makedev(195, m))
            os.chmod(p, 0o666)
        ctl = os.path.join(self.dev, "nvidiactl")
        os.mknod(ctl, 0o666 | 0o020000, os.makedev(195, 255))
        os.chmod(ctl, 0o666)
        return ag

    def agent_clean(self):
        """The agent stops with status 0 and says nothing a sanitizer says (build-asan)."""
        self.assertEqual(self.ag.stop(), 0, self.ag.stderr())
        for bad in ("Sanitizer", "runtime error"):
            self.assertNotIn(bad, self.ag.stderr())

    def node(self, idx):
        return os.path.join(self.dev, "nvidia%d" % self.minor[idx])

    def job(self, user, idx, nodes, env=None, run_env=None):
        """`gpuctl run --only IDX` of the JOB as user, opening nodes: the RunResult."""
        cmd = [PY, "-c", JOB, *nodes]
        if env:
            cmd = ["env", *("%s=%s" % kv for kv in env.items()), *cmd]
        return self.as_user(user, "run", "-n", "1", "--only", str(idx), "--", *cmd,
                            env=run_env)

    def opened(self, r):
        return dict(l.split(" ", 1) for l in r.out.splitlines() if not l.startswith("cgroup "))

    def cgroups(self, r):
        return [l.split(" ", 1)[1] for l in r.out.splitlines() if l.startswith("cgroup ")]

    def client(self, user, request, wait=False):
        """The agent's reply (a dict) to request sent by a process of user."""
        r = self.as_user(user, cmd=[PY, "-c", CLIENT, self.sock, request])
        self.assertEqual(r.rc, 0, r)
        return json.loads(r.out)

    def jobs(self):
        return sorted(n for n in os.listdir(self.parent) if n.startswith("job-")) \
            if os.path.isdir(self.parent) else []

    def background(self, user, *args, **kw):
        """gpuctl ARGS as user in the background: its Popen (killed after the test)."""
        p = subprocess.Popen(["setpriv", "--reuid", str(self.uid[user]), "--regid",
                              str(self.gid[user]), "--init-groups", GPUCTL, *args],
                             env=self.env, **kw)
        self.addCleanup(p.wait)
        self.addCleanup(p.kill)
        return p

    def confined_job(self, user, idx):
        """`gpuctl run --only IDX -- sleep 60` as user, once confined: its job cgroup's name and
        the job's pid (from the name, job-PID-TICKS: docs/agent.md)."""
        self.background(user, "run", "-n", "1", "--only", str(idx), "--", "sleep", "60",
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.assertTrue(wait_until(lambda: len(self.jobs()) == 1), self.ag.stderr())
        (job,) = self.jobs()
        return job, int(job.split("-")[1])

    def opening_job(self, user, idx):
        """`gpuctl run --only IDX` as user of a job that opens GPU IDX's node once confined and
        again when told: its job cgroup's name and a function that tells it and returns both
        outcomes (["before ERRNO", "after ERRNO"])."""
        go = os.path.join(self.scratch, "go")
        code = ("import errno, os, sys, time\n"
                "def try_open():\n"
                "    try: os.close(os.open(sys.argv[1], os.O_RDWR)); return 'ok'\n"
                "    except OSError as e: return errno.errorcode[e.errno]\n"
                "print('before', try_open(), flush=True)\n"
                "while not os.path.exists(sys.argv[2]): time.sleep(0.05)\n"
                "print('after', try_open(), flush=True)\n")
        p = self.background(user, "run", "-n", "1", "--only", str(idx), "--", PY, "-c", code,
                            self.node(idx), go, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
        self.assertTrue(wait_until(lambda: len(self.jobs()) == 1), self.ag.stderr())
        (job,) = self.jobs()

        def opens_after():
            with open(go, "w"):
                pass
            out, err = p.communicate(timeout=PATIENCE_S)
            self.assertEqual(p.returncode, 0, err)
            return out.splitlines()
        return job, opens_after

    # ---- the tests ----

    def test_job_opens_its_gpu_only(self):
        a, _ = self.users
        self.start_agent()
        r = self.job(a, 2, [self.node(2), self.node(5), os.path.join(self.dev, "nvidiactl"),
                            "/dev/null"])
        self.assertEqual(r.rc, 0, r)
        got = self.opened(r)
        self.assertEqual(got, {"nvidia%d" % self.minor[2]: "ENXIO",
                               "nvidia%d" % self.minor[5]: "EPERM",
                               "nvidiactl": "ENXIO", "null": "ok"}, r)
        # it ran in a job cgroup of the scratch parent, in the hierarchy asked for
        want = ("devices" if self.VERSION == "v1" else "") + ":/" + self.parent_name + "/job-"
        self.assertTrue([c for c in self.cgroups(r) if want in c], r.out)
        # the cgroup goes once the job has ended (at a sample after)
        self.assertEqual(wait_until(lambda: self.jobs() == [] and ["gone"]), ["gone"],
                         self.jobs())

    def test_environment_cannot_widen(self):
        a, _ = self.users
        self.start_agent()
        r = self.job(a, 3, [self.node(3), self.node(4)],
                     env={"CUDA_VISIBLE_DEVICES": UUIDS[4]})
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(self.opened(r), {"nvidia%d" % self.minor[3]: "ENXIO",
                                          "nvidia%d" % self.minor[4]: "EPERM"}, r)

    def test_each_user_gets_their_own(self):
        # A's job cannot open B's GPU and B's cannot open A's, while both run
        a, b = self.users
        self.start_agent()
        ra = self.job(a, 0, [self.node(0), self.node(1)])
        rb = self.job(b, 1, [self.node(1), self.node(0)])
        self.assertEqual(self.opened(ra), {"nvidia%d" % self.minor[0]: "ENXIO",
                                           "nvidia%d" % self.minor[1]: "EPERM"}, ra)
        self.assertEqual(self.opened(rb), {"nvidia%d" % self.minor[1]: "ENXIO",
                                           "nvidia%d" % self.minor[0]: "EPERM"}, rb)

    def test_no_agent_no_job(self):
        # the pool says cgroup and no agent listens: the job never starts unconfined
        a, _ = self.users
        self.start_agent()
        self.ag.stop()
        marker = os.path.join(self.scratch, "ran")
        r = self.as_user(a, "run", "-n", "1", "--", "sh", "-c", "echo > " + marker)
        self.assertOneLineError(r, EXIT_CONFINE)
        self.assertIn("cannot reach the agent at '%s'" % self.sock, r.err)
        self.assertFalse(os.path.exists(marker))

    def test_socket_refuses_a_caller_without_a_lease(self):
        _, b = self.users
        self.start_agent()
        rep = self.client(b, '{"request": "confine"}')
        self.assertFalse(rep["ok"], rep)
        self.assertIn("holds no lease", rep["error"])
        self.assertEqual(self.jobs(), [])

    def test_socket_refuses_a_forged_owner_record(self):
        # B writes an owner record of its own that names A's job (and B's client as the job) on
        # A's GPU: records are display only, the kernel's locks decide
        a, b = self.users
        self.start_agent()
        job, a_job = self.confined_job(a, 6)
        code = (
            "import json, os, socket, sys\n"
            "d, uuid, a_job, sock = sys.argv[1:]\n"
            "mine = os.path.join(d, 'owners', str(os.getuid()))\n"
            "os.makedirs(mine, exist_ok=True)\n"
            "ticks = int(open('/proc/self/stat').read().rsplit(')', 1)[1].split()[19])\n"
            "rec = {'version': 1, 'device': uuid, 'pid': int(a_job), 'pid_start_ticks': 1,\n"
            "       'start_time': 1, 'job_pid': os.getpid(), 'job_start_ticks': ticks}\n"
            "with open(os.path.join(mine, uuid + '.json'), 'w') as f: json.dump(rec, f)\n"
            "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(sock)\n"
            "s.sendall(b'{\"request\": \"confine\"}\\n')\n"
            "print(s.makefile().readline().strip())\n")
        r = self.as_user(b, cmd=[PY, "-c", code, self.dir, UUIDS[6], str(a_job),
                                 self.sock])
        self.assertEqual(r.rc, 0, r)
        rep = json.loads(r.out)
        self.assertFalse(rep["ok"], rep)
        self.assertIn("holds no lease", rep["error"])
        self.assertEqual(self.jobs(), [job])

    def test_socket_refuses_another_users_job(self):
        a, b = self.users
        self.start_agent()
        job, a_job = self.confined_job(a, 7)
        rep = self.client(b, '{"request": "confine", "pid": %d}' % a_job)
        self.assertFalse(rep["ok"], rep)
        self.assertIn("can only confine itself", rep["error"])
        self.assertEqual(self.jobs(), [job])

    def test_lease_taken_back_then_refused(self):
        # the race with a lease's end: A's job asks again after root took its lease back (its
        # lock file replaced: docs/leases.md "Taking a lease back"): refused
        a, _ = self.users
        self.start_agent()
        go = os.path.join(self.scratch, "go")
        code = ("import os, socket, sys, time\n"
                "while not os.path.exists(sys.argv[2]): time.sleep(0.05)\n"
                "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(sys.argv[1])\n"
                "s.sendall(b'{\"request\": \"confine\"}\\n')\n"
                "print(s.makefile().readline().strip())\n")
        p = self.background(a, "run", "-n", "1", "--only", "4", "--", PY, "-c", code, self.sock,
                            go, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.assertTrue(wait_until(lambda: len(self.jobs()) == 1), self.ag.stderr())
        r = run([GPUCTL, "release", "--force", "-i", "4", "--reason", "test"], env=self.env)
        self.assertEqual(r.rc, 0, r)
        with open(go, "w"):
            pass
        out, err = p.communicate(timeout=PATIENCE_S)
        rep = json.loads(out)
        self.assertFalse(rep["ok"], (out, err))
        self.assertIn("holds no lease", rep["error"])


    def test_lease_taken_back_revokes_within_a_sample(self):
        # issue 28, "Done when": the lease's end revokes the job's access within one sample
        # interval. Root takes A's running job's lease back (release --force: its lock file is
        # replaced, the job runs on; docs/leases.md): the next sample narrows the job's filter,
        # so the job's next open of its former GPU's node is denied
        a, _ = self.users
        self.start_agent()
        job, opens_after = self.opening_job(a, 5)
        r = run([GPUCTL, "release", "--force", "-i", "5", "--reason", "test"], env=self.env)
        self.assertEqual(r.rc, 0, r)
        said = "the lease of %s ended: the job may no longer open it" % UUIDS[5]
        self.assertTrue(wait_until(lambda: said in self.ag.stderr()), self.ag.stderr())
        self.assertEqual(opens_after(), ["before ENXIO", "after EPERM"])
        self.assertIn(job, self.ag.stderr())


    def test_restarted_agent_still_narrows(self):
        # the jobs confined outlive the agent (docs/agent.md, "Confining jobs"): A's job is
        # confined, the agent is stopped and started again, then root takes the lease back;
        # the new agent narrows the job's filter as the first would have, from the root-only
        # state file the first left beside the lease directory
        a, _ = self.users
        self.start_agent()
        job, opens_after = self.opening_job(a, 6)
        state = self.dir + "-cgroup.state"
        # written once the job is confined (its cgroup is made before)
        self.assertTrue(wait_until(lambda: os.path.exists(state)), self.ag.stderr())
        st = os.stat(state)
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (0, 0o600))
        self.assertEqual(self.ag.stop(), 0, self.ag.stderr())
        self.ag.start()
        self.assertEqual(self.jobs(), [job])
        r = run([GPUCTL, "release", "--force", "-i", "6", "--reason", "test"], env=self.env)
        self.assertEqual(r.rc, 0, r)
        said = "%s: the lease of %s ended: the job may no longer open it" % (job, UUIDS[6])
        self.assertTrue(wait_until(lambda: said in self.ag.stderr()), self.ag.stderr())
        self.assertEqual(opens_after(), ["before ENXIO", "after EPERM"])
        # the job ended: its cgroup is swept and the state file goes with the last job
        self.assertTrue(wait_until(lambda: not self.jobs() and not os.path.exists(state)),
                        (self.jobs(), self.ag.stderr()))

    def test_state_file_not_roots_is_not_believed(self):
        # a state file anyone but root could have written names nothing the agent narrows:
        # the agent says so at start and confines new jobs as always
        a, _ = self.users
        state = self.dir + "-cgroup.state"
        with open(state, "w") as f:
            f.write("1 1 job-1-1 %s\n" % UUIDS[0])
        os.chmod(state, 0o666)
        self.start_agent()
        self.assertTrue(wait_until(lambda: state in self.ag.stderr()), self.ag.stderr())
        self.assertIn("not narrowed", self.ag.stderr())
        r = self.job(a, 1, [self.node(1), self.node(2)])
        self.assertEqual(self.opened(r), {"nvidia%d" % self.minor[1]: "ENXIO",
                                          "nvidia%d" % self.minor[2]: "EPERM"}, r)

    def test_silent_clients_do_not_stop_it(self):
        # anyone may connect (docs/agent.md): connections that say nothing are dropped after
        # 250 ms with a reason, and a job asking meanwhile is still confined
        a, _ = self.users
        self.start_agent()
        silent = []
        for _ in range(8):
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.addCleanup(c.close)
            c.connect(self.sock)
            silent.append(c)
        r = self.job(a, 1, [self.node(1), self.node(2)])
        self.assertEqual(self.opened(r), {"nvidia%d" % self.minor[1]: "ENXIO",
                                          "nvidia%d" % self.minor[2]: "EPERM"}, r)
        for c in silent:
            c.settimeout(PATIENCE_S)
            rep = json.loads(c.makefile().readline())
            self.assertFalse(rep["ok"], rep)
            self.assertIn("no request line", rep["error"])


    def test_mig_job_opens_its_capabilities_only(self):
        # a MIG device's nodes (docs/agent.md): its GPU's node and its GPU and compute
        # instances' access capabilities, /dev/nvidia-caps/nvidia-capN; N from the driver's
        # mig-minors table ("gpuG/giI/access N", "gpuG/giI/ciC/access N", NVIDIA's MIG user
        # guide), the major from /proc/devices "nvidia-caps" (the simulated driver writes both)
        a, _ = self.users
        ag = self.start_agent("a100-mig")
        proc = os.path.join(ag.state, "root", "proc")
        with open(os.path.join(proc, "driver", "nvidia-caps", "mig-minors")) as f:
            caps = dict(l.split() for l in f if l.strip())
        caps = {k: int(v) for k, v in caps.items()}
        with open(os.path.join(proc, "devices")) as f:
            major = [int(l.split()[0]) for l in f if l.split()[1:] == ["nvidia-caps"]][0]
        with open(os.path.join(SCENARIOS, "a100-mig.json")) as f:
            insts = json.load(f)["gpus"][0]["mig"]["instances"]
        g = self.minor[0]
        nodes = []
        for inst in insts[:3]:
            for what in ("gi%d/access" % inst["gi"], "gi%d/ci%d/access" % (inst["gi"], inst["ci"])):
                p = os.path.join(self.dev, "cap-" + what.replace("/", "-"))
                os.mknod(p, 0o666 | 0o020000, os.makedev(major, caps["gpu%d/%s" % (g, what)]))
                os.chmod(p, 0o666)
                nodes.append(p)
        r = self.as_user(a, "run", "-n", "1", "--only", "0", "--mig", insts[0]["profile"], "--",
                         "sh", "-c", 'echo "$CUDA_VISIBLE_DEVICES"; exec "$0" "$@"', PY, "-c",
                         JOB, self.node(0), *nodes)
        self.assertEqual(r.rc, 0, r)
        mine = [i for i in insts if i["uuid"] == r.out.splitlines()[0]]
        self.assertEqual(len(mine), 1, r)
        own = ("cap-gi%d-access" % mine[0]["gi"], "cap-gi%d-ci%d-access" % (mine[0]["gi"],
                                                                          mine[0]["ci"]))
        got = dict(l.split(" ", 1) for l in r.out.splitlines()[1:] if not l.startswith("cgroup "))
        want = {os.path.basename(p): "ENXIO" if os.path.basename(p) in own else "EPERM"
                for p in nodes}
        want["nvidia%d" % g] = "ENXIO"
        self.assertEqual(got, want, r)


class CgroupV1(CgroupCase):
    VERSION = "v1"


class CgroupV2(CgroupCase):
    VERSION = "v2"


if __name__ == "__main__":
    unittest.main()
