"""A real single-node Slurm (Debian's slurmctld, slurmd, munge) in a scratch directory, over a
simulated GPU machine, for tests/cli/test_slurm.py.

Facts it rests on (checked on Slurm 22.05, ../shared/reference/slurm-ci.md): munged runs as the
munge user, here with a private socket and key copy so it never meets a system munged;
slurmctld -D and slurmd -D run in the foreground and are stopped by their own PIDs, also when a
test fails; gres.conf File= must name character devices, so /dev/nvidiaN is mknod'ed in the
scratch directory with NVIDIA's major number 195 and the GPU's minor number; slurmd sees the
scenario's CPU topology through hwloc's HWLOC_FSROOT on the tree `nvsim exec --sysfs` writes
(HWLOC_THISSYSTEM=0, and the x86 CPUID backend off so the host's caches do not mix in).
"""
import collections
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from containers import cgroup_hierarchies, remove_cgroups
from gpuctl_test import GPUCTL, NVSIM, SRC, BUILD, EMPTY_CONFIG

NVSIM_LOAD = os.path.join(BUILD, "bin", "nvsim-load")
NVIDIA_MAJOR = 195  # /dev/nvidiaN's major number (NVIDIA's driver README, "Device files")
HWLOC_ENV = {"HWLOC_THISSYSTEM": "0", "HWLOC_COMPONENTS": "-x86"}
Step = collections.namedtuple("Step", "job step pid")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pred, timeout=60.0, what="condition", step=0.2):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(step)


class Machine:
    """A simulated machine kept in a state directory (nvsim exec --keep --sysfs), and the
    environment that points programs at it."""

    def __init__(self, root, scenario):
        self.scenario = scenario
        self.state = os.path.join(root, "sim")
        r = subprocess.run([NVSIM, "exec", "--sysfs", "--state-dir", self.state, scenario, "--",
                            "/usr/bin/env", "-0"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        given = dict(kv.split("=", 1) for kv in r.stdout.split("\0") if "=" in kv)
        self.env = {k: given[k] for k in ("NVSIM_STATE_DIR", "GPUCTL_NVML_LIBRARY",
                                          "GPUCTL_KMSG", "GPUCTL_SYSFS", "LD_LIBRARY_PATH")}
        self.env["GPUCTL_CONFIG"] = EMPTY_CONFIG
        self.env["GPUCTL_LEASE_DIR"] = os.path.join(root, "leases")
        self.env["GPUCTL_HEALTH_STATE"] = os.path.join(root, "health.state")
        self.ledger = os.path.join(root, "ledger.jsonl")
        self.fsroot = os.path.dirname(self.env["GPUCTL_SYSFS"])

    def nvsim(self, *args):
        r = subprocess.run([NVSIM, *args], env={**os.environ, **self.env}, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout


class Cluster:
    """munged + slurmctld + slurmd for node 'localhost' with the given gres.conf text.
    node_cpus: (sockets, cores_per_socket, threads_per_core) of the slurm.conf node line."""

    def __init__(self, machine, root, gres_conf, gres, node_cpus, health=False,
                 extra_conf="", cgroup=False):
        self.m = machine
        self.root = root
        self.procs = []
        self.steps = []
        self.cgroup = cgroup
        # cgroup=True: slurmd's own cgroup layout (cgroup_conf()); the /slurm directories it
        # makes in the hierarchies that did not have one are removed by stop()
        self.new_cgroups = [d for h in cgroup_hierarchies() for d in
                            (os.path.join(h, "slurm"), os.path.join(h, "slurm_localhost"))
                            if not os.path.exists(d)] if cgroup else []
        self.conf = os.path.join(root, "slurm.conf")
        self.env = dict(os.environ)
        self.env.update(machine.env)
        self.env["SLURM_CONF"] = self.conf
        for k in ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES",
                  "NVIDIA_VISIBLE_DEVICES", "SLURMD_NODENAME"):
            self.env.pop(k, None)
        try:
            self._start(gres_conf, gres, node_cpus, health, extra_conf)
        except BaseException:
            self.stop()
            raise

    def _start(self, gres_conf, gres, node_cpus, health, extra_conf):
        munge = pwd.getpwnam("munge")
        mdir = os.path.join(self.root, "munge")
        os.makedirs(mdir)
        shutil.copy("/etc/munge/munge.key", os.path.join(mdir, "munge.key"))
        for p in (mdir, os.path.join(mdir, "munge.key")):
            os.chown(p, munge.pw_uid, munge.pw_gid)
        os.chmod(os.path.join(mdir, "munge.key"), 0o600)
        os.chmod(mdir, 0o755)
        self.munge_socket = os.path.join(mdir, "munge.socket")
        self._spawn(["setpriv", "--reuid=munge", "--regid=munge", "--init-groups",
                     "munged", "--foreground", "--socket=" + self.munge_socket,
                     "--key-file=" + os.path.join(mdir, "munge.key"),
                     "--pid-file=" + os.path.join(mdir, "munged.pid"),
                     "--log-file=" + os.path.join(mdir, "munged.log"),
                     "--seed-file=" + os.path.join(mdir, "munged.seed")], "munged")
        wait_for(lambda: os.path.exists(self.munge_socket), 20, "munged's socket")
        for d in ("state", "spool", "dev"):
            os.makedirs(os.path.join(self.root, d))
        sockets, cores, threads = node_cpus
        ncpus = sockets * cores * threads
        # the device files gres.conf names: /dev/nvidiaN with the GPU's minor number
        for minor in re.findall(r"File=\S*/nvidia(\d+)", gres_conf):
            path = os.path.join(self.root, "dev", "nvidia" + minor)
            if not os.path.exists(path):
                os.mknod(path, 0o600 | 0o020000, os.makedev(NVIDIA_MAJOR, int(minor)))
        with open(os.path.join(self.root, "gres.conf"), "w") as f:
            f.write(gres_conf)
        lines = [
            "ClusterName=gpuctltest", "SlurmctldHost=localhost",
            "SlurmctldPort=%d" % free_port(), "SlurmdPort=%d" % free_port(),
            "SlurmUser=root", "AuthType=auth/munge", "AuthInfo=socket=" + self.munge_socket,
            "CredType=cred/munge",
            "StateSaveLocation=" + os.path.join(self.root, "state"),
            "SlurmdSpoolDir=" + os.path.join(self.root, "spool"),
            "SlurmctldPidFile=" + os.path.join(self.root, "slurmctld.pid"),
            "SlurmdPidFile=" + os.path.join(self.root, "slurmd.pid"),
            "SlurmctldLogFile=" + os.path.join(self.root, "slurmctld.log"),
            "SlurmdLogFile=" + os.path.join(self.root, "slurmd.log"),
            "ProctrackType=proctrack/" + ("cgroup" if self.cgroup else "linuxproc"),
            "TaskPlugin=task/" + ("cgroup" if self.cgroup else "none"),
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none", "MpiDefault=none",
            "MailProg=/bin/true", "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core", "ReturnToService=2", "GresTypes=gpu",
            "DebugFlags=Gres", "SlurmdDebug=verbose",
        ]
        if health:
            lines += ["HealthCheckProgram=" + self._health_wrapper(),
                      "HealthCheckInterval=2", "HealthCheckNodeState=ANY"]
        lines += [extra_conf] if extra_conf else []
        lines += ["NodeName=localhost CPUs=%d Sockets=%d CoresPerSocket=%d ThreadsPerCore=%d "
                  "RealMemory=1000 Gres=%s State=UNKNOWN" % (ncpus, sockets, cores, threads,
                                                             gres),
                  "PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP"]
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")
        if self.cgroup:
            self._cgroup_conf()
        self._spawn(["slurmctld", "-D", "-f", self.conf], "slurmctld")
        denv = dict(self.env)
        denv.update(HWLOC_ENV)
        denv["HWLOC_FSROOT"] = self.m.fsroot
        self._spawn(["slurmd", "-D", "-N", "localhost", "-f", self.conf], "slurmd", env=denv)
        # inval: registered with less than slurm.conf says (gres/gpu count lower)
        wait_for(lambda: self.node_state() in ("idle", "drain", "drng", "drained", "inval"), 60,
                 "the node to come up (slurmd.log: %s)" % self.log("slurmd")[-2000:])

    def _cgroup_conf(self):
        """cgroup.conf beside slurm.conf (Slurm reads it from slurm.conf's directory): the
        cgroup/v1 plugin of Slurm 22.05 on the v1 controllers at /sys/fs/cgroup. With
        proctrack/cgroup and task/cgroup each step's processes go to
        /slurm/uid_U/job_J/step_S in the freezer, cpuset, memory hierarchies it uses
        (Slurm's cgroup.conf(5) and "Cgroups Guide")."""
        with open(os.path.join(self.root, "cgroup.conf"), "w") as f:
            f.write("CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\n"
                    "ConstrainCores=no\nConstrainRAMSpace=yes\nConstrainDevices=no\n")

    def start_step(self, name="gpuctl-step", command=("sleep", "600")):
        """Starts `srun -J name command` in the background and waits until its task runs;
        returns Step(job, step, pid) from squeue's step list and `scontrol listpids` (the
        step's own task, not slurmstepd). stop() cancels it."""
        p = self._spawn(["srun", "-N1", "-n1", "-J", name, *command], "srun-" + name)
        self.steps.append(p)

        def listed():
            r = self.run(["squeue", "-h", "-s", "-n", name, "-o", "%i"], timeout=20)
            ids = [ln for ln in r.stdout.split() if re.fullmatch(r"\d+\.\d+", ln)]
            if not ids or p.poll() is not None:
                return p.poll() is not None and "exited"
            job, step = (int(x) for x in ids[0].split("."))
            r = self.run(["scontrol", "listpids", "%d.%d" % (job, step)], timeout=20)
            for ln in r.stdout.splitlines()[1:]:
                f = ln.split()
                pid = int(f[0])
                try:
                    with open("/proc/%d/comm" % pid) as c:
                        if c.read().strip() == os.path.basename(command[0]):
                            return Step(job, step, pid)
                except OSError:
                    pass
            return None

        got = wait_for(listed, 60, "the step's task (srun: %s)" % self.log("slurmd")[-2000:])
        if got == "exited":
            with open(os.path.join(self.root, "srun-" + name + ".out")) as f:
                raise AssertionError("srun exited %s: %s" % (p.returncode, f.read()))
        return got

    def _health_wrapper(self):
        """slurmd runs its HealthCheckProgram as root with only SLURMD_NODENAME and PWD: no
        PATH, no SLURM_CONF. The wrapper keeps that (env -i) and adds only what points gpuctl at
        the simulated machine, then `health --slurm --slurm-conf`, as docs/slurm.md shows."""
        path = os.path.join(self.root, "gpu-health.sh")
        sim = " ".join("%s=%s" % (k, v) for k, v in sorted(self.m.env.items())
                       if k != "LD_LIBRARY_PATH")
        with open(path, "w") as f:
            f.write("#!/bin/sh\n"
                    "exec /usr/bin/env -i SLURMD_NODENAME=\"$SLURMD_NODENAME\" %s %s health "
                    "--slurm --slurm-conf %s >>%s 2>&1\n"
                    % (sim, GPUCTL, self.conf, os.path.join(self.root, "health.log")))
        os.chmod(path, 0o755)
        return path

    def _spawn(self, argv, name, env=None):
        out = open(os.path.join(self.root, name + ".out"), "w")
        p = subprocess.Popen(argv, env=env or self.env, stdout=out, stderr=subprocess.STDOUT,
                             start_new_session=True)
        out.close()
        self.procs.append((name, p))
        return p

    def stop(self):
        if self.steps and any(p.poll() is None for name, p in self.procs if name == "slurmctld"):
            self.run(["scancel", "--full", "--user", "root"], timeout=20)
            for p in self.steps:
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    pass
        self.steps = []
        for name, p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=10)
        self.procs = []
        # A cgroup whose last process has just exited may still refuse rmdir(2) for a moment
        # (its tasks are released after the exit is reaped; a loaded machine makes that
        # longer), so the removal is tried again for a while rather than once.
        deadline = time.monotonic() + 10
        remove_cgroups(self.new_cgroups)
        while any(os.path.exists(d) for d in self.new_cgroups) and time.monotonic() < deadline:
            time.sleep(0.1)
            remove_cgroups(self.new_cgroups)
        self.new_cgroups = []

    def log(self, name):
        try:
            with open(os.path.join(self.root, name + ".log"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def run(self, argv, timeout=60, env=None):
        e = dict(self.env)
        if env:
            e.update(env)
        return subprocess.run(argv, env=e, capture_output=True, text=True, timeout=timeout)

    def node_state(self):
        r = self.run(["sinfo", "-h", "-n", "localhost", "-o", "%t"], timeout=20)
        return r.stdout.strip().rstrip("*~#!%$@^-")

    def show_node(self):
        r = self.run(["scontrol", "show", "node", "localhost"], timeout=20)
        assert r.returncode == 0, r.stderr
        return r.stdout

    def srun(self, *args, timeout=120):
        return self.run(["srun", "-N1", "-n1", *args], timeout=timeout)


# (sockets, cores per socket, threads per core) of pcie-8gpu as its scenario declares them
CGROUP_SCENARIO, CGROUP_CPUS = "pcie-8gpu", (2, 32, 2)


def cgroup_cluster(test):
    """For a unittest.TestCase: a simulated pcie-8gpu, gpuctl's gres.conf for it, and a Slurm
    with proctrack/cgroup and task/cgroup (Cluster(cgroup=True)); everything, the steps and the
    cgroup directories included, is removed by the test's cleanup even when it fails.
    start_step() on the result gives Step(job, step, pid)."""
    root = tempfile.mkdtemp(prefix="gpuctl-slurm-cg-")
    test.addCleanup(shutil.rmtree, root, True)
    os.chmod(root, 0o755)
    m = Machine(root, CGROUP_SCENARIO)
    args = [GPUCTL, "slurm", "gres", "--node", "localhost", "--dev-dir", os.path.join(root, "dev")]
    env = {**os.environ, **m.env}
    text = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60, check=True)
    info = subprocess.run(args + ["--format", "json"], env=env, capture_output=True, text=True,
                          timeout=60, check=True)
    c = Cluster(m, root, text.stdout, json.loads(info.stdout)["gres"], CGROUP_CPUS, cgroup=True)
    test.addCleanup(c.stop)
    return c
