"""A real rootful podman container (Debian's podman 4.3 with runc and the cgroupfs manager) in a
scratch directory, for the workload tests of issue 26 (tests/cli/test_real_workloads.py).

Nothing system-wide is used: podman's storage, run root, tmp dir, network configuration, lock
files and event log live in the scratch directory, named by a containers.conf and storage.conf
of its own (CONTAINERS_CONF, CONTAINERS_STORAGE_CONF; containers.conf(5),
containers-storage.conf(5)).
The storage root is <scratch>/var/lib/containers/storage, so that a reader that joins a root
prefix to podman's default path (GPUCTL_WORKLOAD_ROOT=<scratch>) finds it where it would find
the machine's. The image is `podman import` of a tar of Debian's static busybox (package
busybox-static) with a few applet links: no registry, no network. Both take well under a second
here, so nothing is cached between tests.

Facts this rests on, seen on this machine (Debian 12, kernel 6.x, hybrid cgroups, the tests' own
container with no CAP_SYS_RESOURCE):
- podman asks runc for RLIMIT_NOFILE and RLIMIT_NPROC of 1048576 when none is given, and lowers
  its own RLIMIT_NPROC to 32768 before starting runc; raising a hard limit needs
  CAP_SYS_RESOURCE (setrlimit(2)), so runc fails with "error setting rlimit type 7 (then 6):
  operation not permitted". The container gets small limits of its own (--ulimit) instead.
- the netavark backend (podman's default) keeps its rootful run directory at
  /run/containers/networks whatever the configuration says; the CNI backend with a scratch
  network_config_dir and --network none creates nothing outside the scratch directory.
- containers/image keeps root's blob-info cache at the fixed /var/lib/containers/cache, so the
  import runs in a private mount namespace with <scratch>/var/lib bound over /var/lib: the cache
  lands in the scratch directory.
- the default "shm" lock type makes /dev/shm/libpod_lock; lock_type "file" keeps the locks in
  the tmp dir.
- with --cgroup-manager cgroupfs and the default --cgroup-parent, podman makes
  /libpod_parent/libpod-<id> in every hierarchy (the container) and /libpod_parent/conmon in
  the v1 controllers (conmon); `podman rm` removes the first, the second and libpod_parent stay:
  the cleanup removes them when they are empty and were not there before.
"""
import collections
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

PODMAN = shutil.which("podman")
RUNC = shutil.which("runc")
BUSYBOX = "/bin/busybox"  # Debian's busybox-static installs its static binary here
IMAGE = "gpuctl-busybox"
APPLETS = ("sh", "sleep", "cat", "true")

Container = collections.namedtuple("Container", "pid id name")


def cgroup_hierarchies():
    """The mounted cgroup hierarchies' directories (v1 controllers and v2)."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, _, post = line.partition(" - ")
            if post.split(" ")[0] in ("cgroup", "cgroup2"):
                out.append(pre.split(" ")[4])
    return out


def remove_cgroups(dirs):
    """Removes each cgroup directory in dirs with the empty directories below it, deepest
    first. One that still holds a process (another test's container or step) stays: rmdir(2)
    refuses it, and it is not ours alone to remove."""
    for top in dirs:
        for d, subs, _ in sorted(os.walk(top), key=lambda w: -w[0].count("/")):
            try:
                os.rmdir(d)
            except OSError:
                pass


def missing():
    """Why a podman container cannot be started here, or None. Only a missing program is a
    reason: a podman that is installed but fails is a test failure, with podman's message."""
    for prog, pkg in ((PODMAN, "podman"), (RUNC, "runc")):
        if not prog:
            return "%s is not installed (scripts/deps.sh test installs Debian's %s)" % (pkg, pkg)
    if not os.access(BUSYBOX, os.X_OK):
        return BUSYBOX + " is missing (scripts/deps.sh test installs Debian's busybox-static)"
    if os.geteuid() != 0:
        return "rootful podman with the cgroupfs manager needs root"
    return None


class Podman:
    """A scratch podman. root: the scratch directory (GPUCTL_WORKLOAD_ROOT for readers);
    storage: its storage root, root + /var/lib/containers/storage."""

    def __init__(self):
        why = missing()
        if why:
            raise unittest.SkipTest(why)
        self.root = tempfile.mkdtemp(prefix="gpuctl-podman-")
        self.storage = os.path.join(self.root, "var", "lib", "containers", "storage")
        self.runroot = os.path.join(self.root, "run")
        self.tmpdir = os.path.join(self.root, "tmp")
        self.names = []
        self.started = []
        # the cgroup directories podman may make that were not there before (removed at close)
        self.new_cgroups = [d for d in (os.path.join(h, "libpod_parent")
                                        for h in cgroup_hierarchies()) if not os.path.exists(d)]
        try:
            self._configure()
            t = time.monotonic()
            self._import()
            self.import_seconds = time.monotonic() - t
        except BaseException:
            self.close()
            raise

    def _configure(self):
        for d in (self.storage, self.runroot, self.tmpdir, os.path.join(self.root, "networks")):
            os.makedirs(d)
        self.env = dict(os.environ)
        self.env["CONTAINERS_CONF"] = os.path.join(self.root, "containers.conf")
        self.env["CONTAINERS_STORAGE_CONF"] = os.path.join(self.root, "storage.conf")
        self.env["CONTAINERS_REGISTRIES_CONF"] = os.path.join(self.root, "registries.conf")
        with open(self.env["CONTAINERS_CONF"], "w") as f:
            f.write('[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\n'
                    'lock_type = "file"\nevents_logger = "file"\n'
                    'events_logfile_path = "%s/events.log"\ntmp_dir = "%s"\n'
                    '[network]\nnetwork_backend = "cni"\nnetwork_config_dir = "%s/networks"\n'
                    % (self.root, self.tmpdir, self.root))
        with open(self.env["CONTAINERS_STORAGE_CONF"], "w") as f:
            f.write('[storage]\ndriver = "overlay"\ngraphroot = "%s"\nrunroot = "%s"\n'
                    % (self.storage, self.runroot))
        with open(self.env["CONTAINERS_REGISTRIES_CONF"], "w") as f:
            f.write("unqualified-search-registries = []\n")

    def _import(self):
        rootfs = os.path.join(self.root, "rootfs")
        os.makedirs(os.path.join(rootfs, "bin"))
        shutil.copy(BUSYBOX, os.path.join(rootfs, "bin", "busybox"))
        for a in APPLETS:
            os.symlink("busybox", os.path.join(rootfs, "bin", a))
        tar = os.path.join(self.root, "busybox.tar")
        subprocess.run(["tar", "-C", rootfs, "-cf", tar, "."], check=True, timeout=60)
        # a private mount namespace with <scratch>/var/lib over /var/lib: the blob-info cache
        argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                'mount --bind "$1" /var/lib && shift && exec "$@"', "sh",
                os.path.join(self.root, "var", "lib"), *self.argv("import", tar, IMAGE)]
        self._check(argv)

    def argv(self, *args):
        return [PODMAN, "--root", self.storage, "--runroot", self.runroot, "--tmpdir",
                self.tmpdir, "--runtime", "runc", "--cgroup-manager", "cgroupfs", *args]

    def _check(self, argv, timeout=60):
        r = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise AssertionError("%s exited %d: %s" % (" ".join(argv), r.returncode,
                                                       r.stderr.strip()))
        return r.stdout

    def podman(self, *args, timeout=60):
        """podman on the scratch storage; its stdout, or AssertionError with its stderr."""
        return self._check(self.argv(*args), timeout)

    def start(self, name, *command):
        """Starts container `name` running `command` (default sleep 600), detached, with no
        network; returns Container(pid (on the host), id (64 hex digits), name)."""
        self.names.append(name)
        self.podman("run", "-d", "--name", name, "--network", "none", "--ulimit",
                    "nofile=1024:1024", "--ulimit", "nproc=1024:1024", IMAGE,
                    *(command or ("/bin/sleep", "600")))
        pid, cid = self.podman("inspect", "--format", "{{.State.Pid}} {{.Id}}",
                               name).split()
        self.started.append(Container(int(pid), cid, name))
        return self.started[-1]

    def stop(self, name):
        r = subprocess.run(self.argv("rm", "-f", "-t", "0", name), env=self.env,
                           capture_output=True, text=True, timeout=60)
        if name in self.names:
            self.names.remove(name)
        return r.returncode == 0

    def close(self):
        """Removes every container, the scratch storage (and the mounts in it) and the cgroup
        directories podman made; safe to call twice, and after a failed start."""
        for name in list(self.names):
            self.stop(name)
        # a container podman failed to remove: its process, while the kernel still has it in
        # the container's cgroup (so a reused PID is never hit)
        for c in self.started:
            try:
                with open("/proc/%d/cgroup" % c.pid) as f:
                    if "/libpod-%s\n" % c.id in f.read():
                        os.kill(c.pid, signal.SIGKILL)
            except OSError:
                pass
        self.started = []
        if os.path.isdir(self.storage):
            subprocess.run(self.argv("rm", "-a", "-f", "-t", "0"), env=self.env,
                           capture_output=True, timeout=60)
        mounts = []
        with open("/proc/self/mountinfo") as f:
            for line in f:
                point = line.split(" ")[4]
                if point == self.root or point.startswith(self.root + "/"):
                    mounts.append(point)
        for point in sorted(mounts, reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True, timeout=60)
        shutil.rmtree(self.root, ignore_errors=True)
        remove_cgroups(self.new_cgroups)
        self.new_cgroups = []


def start_container(test, name=None):
    """For a unittest.TestCase: a scratch podman and one running container named `name` (by
    default a unique one), both removed by the test's cleanup even when it fails. Returns
    (Podman, Container)."""
    p = Podman()
    test.addCleanup(p.close)
    return p, p.start(name or "gpuctl-test-%d" % os.getpid())
