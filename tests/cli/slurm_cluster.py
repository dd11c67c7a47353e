"""A real single-node Slurm (slurmctld, slurmd, munge) in a scratch directory, over a simulated
GPU machine, for tests/cli/test_slurm.py: Debian 12's Slurm 22.05 installed on this machine, or
Debian 13's Slurm 24.11 in a trixie root (SLURM_VERSIONS, slurm_root()).

Facts it rests on (checked on Slurm 22.05, ../shared/reference/slurm-ci.md, and 24.11): munged
runs as the munge user, here with a private socket and a key made for each cluster, so it never
meets a system munged; slurmctld -D and slurmd -D run in the foreground and are stopped by their
own PIDs, also when a test fails; gres.conf File= and MultipleFiles= must name character
devices, so /dev/nvidiaN (NVIDIA's major number 195, the GPU's minor number) and
/dev/nvidia-caps/nvidia-capN (the nvidia-caps major of the simulated /proc/devices) are
mknod'ed in the scratch directory; slurmd sees the scenario's CPU topology through hwloc's
HWLOC_FSROOT on the tree `nvsim exec --sysfs` writes (HWLOC_THISSYSTEM=0, and the x86 CPUID
backend off so the host's caches do not mix in).

Slurm 24.11 runs from the root scripts/slurm-trixie-root.sh makes once and caches outside the
clone (/var/cache/gpuctl-test/trixie-slurm). A 22.05 slurmctld cannot talk to a newer slurmd,
so each version runs its own munged, slurmctld, slurmd and clients. Each 24.11 program runs as
`unshare -m` + chroot: in a mount namespace of its own, /proc, /sys and /dev are bind-mounted
into the root, a tmpfs over the root's /tmp, and the scratch directory (under /tmp) at its own
path, so every path in the configuration means the same inside and out. The mounts live only
in that namespace: they go when its processes end, however the test ends (a killed runner
included), and nothing is ever mounted in the cached root as the host sees it (stop() checks).
"""
import collections
import json
import os
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
SLURM_VERSIONS = ("22.05", "24.11")  # Debian 12's, Debian 13's
TRIXIE_SCRIPT = os.path.join(SRC, "scripts", "slurm-trixie-root.sh")
# what runs a program inside the trixie root: $1 the root, $2 the scratch directory, then argv
CHROOT_SH = (
    'r=$1 s=$2; shift 2; '
    'mount --rbind /proc "$r/proc" && mount --rbind /sys "$r/sys" && '
    'mount --rbind /dev "$r/dev" && mount -t tmpfs -o mode=1777 tmpfs "$r/tmp" && '
    'mkdir -p "$r$s" && mount --bind "$s" "$r$s" && exec chroot "$r" "$@"')


def slurm_root(version):
    """The root whose Slurm is version: "/" for 22.05 (this machine's), the trixie root for
    24.11, built on first use (about a minute, with network). A root that cannot be built
    fails the test with the script's reason: a missing Slurm version is a failure, never a
    skip."""
    if version == "22.05":
        return "/"
    assert version == "24.11", version
    r = subprocess.run([TRIXIE_SCRIPT], capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise AssertionError("Slurm 24.11 is needed and its Debian 13 root could not be made "
                             "(%s exited %d): %s" % (TRIXIE_SCRIPT, r.returncode,
                                                     r.stderr.strip()[-1500:]))
    return r.stdout.strip().splitlines()[-1]


def mounts_under(path):
    """Mount points at or below path, as this process's mount namespace sees them."""
    with open("/proc/self/mountinfo") as f:
        points = [ln.split()[4] for ln in f]
    return [p for p in points if p == path or p.startswith(path.rstrip("/") + "/")]


def caps_major(machine):
    """The nvidia-caps character major of the simulated machine's /proc/devices."""
    with open(machine.env["GPUCTL_PROC_DEVICES"]) as f:
        for ln in f:
            if ln.split()[1:] == ["nvidia-caps"]:
                return int(ln.split()[0])
    raise AssertionError("no nvidia-caps in " + machine.env["GPUCTL_PROC_DEVICES"])
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
                                          "GPUCTL_KMSG", "GPUCTL_SYSFS", "LD_LIBRARY_PATH",
                                          "GPUCTL_NVIDIA_PROC", "GPUCTL_NVIDIA_CAPS_PROC",
                                          "GPUCTL_PROC_DEVICES")}
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
    node_cpus: (sockets, cores_per_socket, threads_per_core) of the slurm.conf node line.
    version: the Slurm version (SLURM_VERSIONS) whose daemons and clients run. root is the
    scratch directory (its dev/ holds the device files); home, a directory in it, takes this
    cluster's own files (configuration, state, logs, munge) when several clusters use one
    root in turn; default root itself."""

    def __init__(self, machine, root, gres_conf, gres, node_cpus, health=False,
                 extra_conf="", cgroup=False, version="22.05", home=None):
        self.m = machine
        self.scratch = root
        self.root = home or root
        os.makedirs(self.root, exist_ok=True)
        self.version = version
        self.sysroot = slurm_root(version)
        assert self.sysroot == "/" or root.startswith("/tmp/"), root
        assert not (cgroup or health) or self.sysroot == "/", "22.05 only"
        self.procs = []
        self.steps = []
        self.cgroup = cgroup
        # cgroup=True: slurmd's own cgroup layout (cgroup_conf()); the /slurm directories it
        # makes in the hierarchies that did not have one are removed by stop()
        self.new_cgroups = [d for h in cgroup_hierarchies() for d in
                            (os.path.join(h, "slurm"), os.path.join(h, "slurm_localhost"))
                            if not os.path.exists(d)] if cgroup else []
        self.conf = os.path.join(self.root, "slurm.conf")
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
        uid, gid = self._munge_ids()
        mdir = os.path.join(self.root, "munge")
        os.makedirs(mdir)
        # a key of this cluster's own (munge.key(5): random bytes, 1024 by default)
        with open(os.path.join(mdir, "munge.key"), "wb") as f:
            f.write(os.urandom(1024))
        for p in (mdir, os.path.join(mdir, "munge.key")):
            os.chown(p, uid, gid)
        os.chmod(os.path.join(mdir, "munge.key"), 0o600)
        os.chmod(mdir, 0o755)
        self.munge_socket = os.path.join(mdir, "munge.socket")
        self._spawn(["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid, "--clear-groups",
                     "munged", "--foreground", "--socket=" + self.munge_socket,
                     "--key-file=" + os.path.join(mdir, "munge.key"),
                     "--pid-file=" + os.path.join(mdir, "munged.pid"),
                     "--log-file=" + os.path.join(mdir, "munged.log"),
                     "--seed-file=" + os.path.join(mdir, "munged.seed")], "munged")
        wait_for(lambda: os.path.exists(self.munge_socket), 20, "munged's socket")
        for d in ("state", "spool"):
            os.makedirs(os.path.join(self.root, d))
        os.makedirs(os.path.join(self.scratch, "dev"), exist_ok=True)
        sockets, cores, threads = node_cpus
        ncpus = sockets * cores * threads
        self._mknod_files(gres_conf)
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

    def _munge_ids(self):
        """The munge user's uid and gid in the root the daemons run from."""
        with open(os.path.join(self.sysroot, "etc", "passwd")) as f:
            for ln in f:
                fields = ln.split(":")
                if fields[0] == "munge":
                    return int(fields[2]), int(fields[3])
        raise AssertionError("no munge user in %s/etc/passwd" % self.sysroot)

    def _mknod_files(self, gres_conf):
        """The device files gres.conf names under the scratch dev/: /dev/nvidiaN with the GPU's
        minor number, /dev/nvidia-caps/nvidia-capN with the capability's."""
        dev = os.path.join(self.scratch, "dev")
        for value in re.findall(r"(?:Multiple)?Files?=(\S+)", gres_conf):
            for path in value.split(","):
                rel = os.path.relpath(path, dev)
                m = re.fullmatch(r"nvidia(\d+)|nvidia-caps/nvidia-cap(\d+)", rel)
                if not m or os.path.exists(path):
                    continue
                major = NVIDIA_MAJOR if m[1] else caps_major(self.m)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                os.mknod(path, 0o600 | 0o020000, os.makedev(major, int(m[1] or m[2])))

    def wrap(self, argv):
        """argv as it runs for this cluster's Slurm version (inside the trixie root for 24.11)."""
        if self.sysroot == "/":
            return list(argv)
        return ["unshare", "-m", "--propagation", "private", "sh", "-c", CHROOT_SH, "sh",
                self.sysroot, self.scratch, *argv]

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
        p = subprocess.Popen(self.wrap(argv), env=env or self.env, stdout=out,
                             stderr=subprocess.STDOUT, start_new_session=True)
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
        if self.sysroot != "/":
            left = mounts_under(self.sysroot)
            assert not left, "mounts left in the Slurm root: %s" % left

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
        return subprocess.run(self.wrap(argv), env=e, capture_output=True, text=True,
                              timeout=timeout)

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
