"""Real processes in the cgroups a kubelet and Slurm would make, for the workload tests of the
exporter (tests/cli/test_exporter.py) and the Python package (python/tests/test_workload.py).

The kernel writes /proc/PID/cgroup: a test makes the directories the managers make, moves a real
`sleep` into one, and the library reads what the kernel says of it. The layouts, each from its
manager's documentation:

- a Kubernetes pod under the systemd cgroup driver, on the cgroup v2 hierarchy
  (/sys/fs/cgroup/unified on this hybrid machine): kubepods.slice/kubepods-<qos>.slice/
  kubepods-<qos>-pod<uid with _ for ->.slice/cri-containerd-<64 hex>.scope (the kubelet's
  "Configuring a cgroup driver" page; containerd's CRI plugin names the scope), with the OCI
  bundle's config.json that containerd's runtime v2 shim keeps under
  /run/containerd/io.containerd.runtime.v2.task/k8s.io/<id>/ written under a scratch state root
  (GPUCTL_WORKLOAD_ROOT), carrying the CRI plugin's annotations io.kubernetes.cri.sandbox-name,
  io.kubernetes.cri.sandbox-namespace and io.kubernetes.cri.container-name (containerd,
  pkg/cri/annotations);
- a Slurm step on cgroup v1 (task/cgroup, "cgroup/v1" plugin): /slurm/uid_U/job_J/step_S in a
  controller's hierarchy (Slurm's cgroup.conf and cgroup_v1 documentation); the freezer here.

Everything made is removed by close(), which the tests call through addCleanup/finally: the
sleeps are killed and reaped first, then each directory this module created, deepest first.
"""
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
import uuid

UNIFIED = "/sys/fs/cgroup/unified"
FREEZER = "/sys/fs/cgroup/freezer"


def why_not():
    """None when this machine lets a test make the layouts, else the reason to skip."""
    if os.geteuid() != 0:
        return "making cgroups needs root"
    for d in (UNIFIED, FREEZER):
        if not os.access(os.path.join(d, "cgroup.procs"), os.W_OK):
            return "no writable cgroup hierarchy at %s" % d
    return None


class Layouts:
    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="gpuctl-workload-root-")  # GPUCTL_WORKLOAD_ROOT
        self.dirs = []   # cgroup directories made here, in the order made
        self.procs = []  # the sleeps started here

    def _mkcgroup(self, hierarchy, rel):
        path = hierarchy
        for part in rel.split("/"):
            path = os.path.join(path, part)
            if not os.path.isdir(path):
                os.mkdir(path)
                self.dirs.append(path)
        return path

    def sleeper(self, hierarchy, rel):
        """A real `sleep` moved into cgroup rel of hierarchy; its Popen."""
        path = self._mkcgroup(hierarchy, rel)
        p = subprocess.Popen(["sleep", "600"])
        self.procs.append(p)
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write("%d\n" % p.pid)
        return p

    def pod(self, name, namespace, container, qos="besteffort"):
        """(Popen, pod uid, container id) of a sleep in a pod's container (systemd driver,
        containerd), whose names the state root gives."""
        uid = str(uuid.uuid4())
        cid = secrets.token_hex(32)
        rel = "kubepods.slice/kubepods-{q}.slice/kubepods-{q}-pod{u}.slice/cri-containerd-{c}.scope"
        p = self.sleeper(UNIFIED, rel.format(q=qos, u=uid.replace("-", "_"), c=cid))
        bundle = os.path.join(self.root, "run/containerd/io.containerd.runtime.v2.task/k8s.io",
                              cid)
        os.makedirs(bundle)
        with open(os.path.join(bundle, "config.json"), "w") as f:
            json.dump({"ociVersion": "1.1.0", "annotations": {
                "io.kubernetes.cri.container-type": "container",
                "io.kubernetes.cri.sandbox-name": name,
                "io.kubernetes.cri.sandbox-namespace": namespace,
                "io.kubernetes.cri.sandbox-uid": uid,
                "io.kubernetes.cri.container-name": container}}, f)
        return p, uid, cid

    def slurm_v1(self, job, step, uid=0):
        """Popen of a sleep in Slurm step job.step of user uid (cgroup v1, the freezer)."""
        return self.sleeper(FREEZER, "slurm/uid_%d/job_%d/step_%s" % (uid, job, step))

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait(10)
        for d in reversed(self.dirs):
            for _ in range(50):  # an exiting task leaves its cgroup a moment later
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
        shutil.rmtree(self.root, ignore_errors=True)
        left = [d for d in self.dirs if os.path.isdir(d)]
        self.dirs = []
        self.procs = []
        assert not left, "cgroups left behind: %r" % left
