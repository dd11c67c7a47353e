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
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from gpuctl_test import GPUCTL, NVSIM, SRC, BUILD, EMPTY_CONFIG

NVSIM_LOAD = os.path.join(BUILD, "bin", "nvsim-load")
NVIDIA_MAJOR = 195  # /dev/nvidiaN's major number (NVIDIA's driver README, "Device files")
HWLOC_ENV = {"HWLOC_THISSYSTEM": "0", "HWLOC_COMPONENTS": "-x86"}


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
                 extra_conf=""):
        self.m = machine
        self.root = root
        self.procs = []
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
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
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
        self._spawn(["slurmctld", "-D", "-f", self.conf], "slurmctld")
        denv = dict(self.env)
        denv.update(HWLOC_ENV)
        denv["HWLOC_FSROOT"] = self.m.fsroot
        self._spawn(["slurmd", "-D", "-N", "localhost", "-f", self.conf], "slurmd", env=denv)
        # inval: registered with less than slurm.conf says (gres/gpu count lower)
        wait_for(lambda: self.node_state() in ("idle", "drain", "drng", "drained", "inval"), 60,
                 "the node to come up (slurmd.log: %s)" % self.log("slurmd")[-2000:])

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
        for name, p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=10)
        self.procs = []

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
