"""Real processes in the cgroups that Slurm, the kubelet, the container runtimes and systemd make,
for every workload test of issue 26: tests/cli/test_workloads.py (ps, top, list, and every layout
shown everywhere), tests/cli/test_exporter.py and python/tests/test_workload.py (which reaches
this directory through python/tests/conftest.py's sys.path).

The kernel writes /proc/PID/cgroup: a test makes the directories the managers make, moves a real
`sleep` into one, and the library reads what the kernel says of it. LAYOUTS below is the one
table of them: for each, the hierarchy, the path and its documented source, the runtime state
file it needs for names (written under a scratch GPUCTL_WORKLOAD_ROOT, where docs/workloads.md
"Names" and src/lib/workload/workload-state.c look), and the workload the docs say it is. The
expected fields and labels are written from docs/workloads.md ("Kinds", "Labels", "JSON"),
include/gpuctl/workload.h and docs/metrics.md ("Workloads": dcgm-exporter's pod, namespace,
container and hpc_job), never from gpuctl's output.

Everything made is undone by close(), which the tests call through addCleanup: the sleeps are
moved back to each hierarchy's root, killed and reaped, each cgroup directory made here removed
deepest first, the throwaway user deleted, the scratch directories removed; then close() checks
that nothing is left and fails the test if anything is.
"""
import json
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import time
import uuid

UNIFIED = "/sys/fs/cgroup/unified"  # cgroup v2 on this hybrid machine
FREEZER = "/sys/fs/cgroup/freezer"  # a v1 controller's hierarchy
SYSTEMD = "/sys/fs/cgroup/systemd"  # v1 name=systemd, no controller
HIERARCHIES = (UNIFIED, FREEZER, SYSTEMD)

# docs/workloads.md "JSON": the workload object's keys
KEYS = {"kind", "pid", "ns_pid", "uid", "cgroup", "runtime", "id", "name", "pod_namespace",
        "pod_uid", "container", "slurm_job", "slurm_step", "slurm_array_job",
        "slurm_array_task", "unit_uid", "label", "truncated"}


def why_not():
    """None when this machine lets a test make the layouts, else the reason to skip."""
    if os.geteuid() != 0:
        return "making cgroups needs root"
    for d in HIERARCHIES:
        if not os.access(os.path.join(d, "cgroup.procs"), os.W_OK):
            return "no writable cgroup hierarchy at %s" % d
    return None


def hexid():
    return secrets.token_hex(32)


class Layout:
    """One row of the table.

    name: the layout's name; hierarchy, path: where its process goes; source: the document that
    fixes the path; state: [(path under the state root, JSON document, owner uid or None)], the
    runtime's files that name it; user: the uid its process runs as (None: root); fields: the
    workload's JSON fields the path alone gives (docs/workloads.md "Kinds"); named: the fields
    the state adds; label, label_unnamed: its short form with and without the state
    (docs/workloads.md "Labels"); dcgm: dcgm-exporter's labels for it (docs/metrics.md)."""

    def __init__(self, name, hierarchy, path, source, fields, label, state=(), named=None,
                 label_unnamed=None, dcgm=None, user=None):
        self.name, self.hierarchy, self.path, self.source = name, hierarchy, path, source
        self.fields, self.label, self.state = fields, label, list(state)
        self.named = named or {}
        self.label_unnamed = label_unnamed or label
        self.dcgm = dcgm or {}
        self.user = user

    def want(self, with_state=True):
        """The fields of its JSON workload object (a subset: those the docs fix for it)."""
        w = dict(self.fields)
        if with_state:
            w.update(self.named)
        w["label"] = self.label if with_state else self.label_unnamed
        return w


def slurm_v1(job, step, uid=1000):
    return Layout(
        "slurm", FREEZER, "slurm/uid_%d/job_%d/step_%s" % (uid, job, step),
        "Slurm's cgroup.conf(5) and Cgroups Guide, cgroup/v1: /slurm/uid_U/job_J/step_S",
        {"kind": "slurm", "slurm_job": job, "slurm_step": str(step), "slurm_array_job": None,
         "slurm_array_task": None, "pod_uid": None, "name": None},
        "slurm %d.%s" % (job, step), dcgm={"hpc_job": str(job)})


def pod_systemd(name, namespace, container, qos="burstable", uid=None, cid=None):
    """A pod's container under the kubelet's systemd driver, containerd's CRI plugin."""
    uid = uid or str(uuid.uuid4())
    cid = cid or hexid()
    path = "kubepods.slice/kubepods-{q}.slice/kubepods-{q}-pod{u}.slice/" \
           "cri-containerd-{c}.scope".format(q=qos, u=uid.replace("-", "_"), c=cid)
    bundle = {"ociVersion": "1.1.0", "annotations": {
        "io.kubernetes.cri.container-type": "container",
        "io.kubernetes.cri.sandbox-name": name,
        "io.kubernetes.cri.sandbox-namespace": namespace,
        "io.kubernetes.cri.sandbox-uid": uid,
        "io.kubernetes.cri.container-name": container}}
    return Layout(
        "pod-systemd", UNIFIED, path,
        "Kubernetes 'Configuring a cgroup driver' and 'Pod Quality of Service Classes'; "
        "systemd.slice(5) writes the uid's '-' as '_'; containerd's CRI plugin names the scope "
        "and sets the annotations (pkg/cri/annotations)",
        {"kind": "pod", "pod_uid": uid, "id": cid, "runtime": "containerd", "slurm_job": None},
        "pod %s/%s/%s" % (namespace, name, container),
        state=[("run/containerd/io.containerd.runtime.v2.task/k8s.io/%s/config.json" % cid,
                bundle, None)],
        named={"name": name, "pod_namespace": namespace, "container": container},
        label_unnamed="pod %s/%s" % (uid[:8], cid[:12]),
        dcgm={"pod": name, "namespace": namespace, "container": container})


def pod_cgroupfs(name, namespace, container):
    """A pod's container under the kubelet's cgroupfs driver in the v1 name=systemd
    hierarchy; CRI-O's bundle says the runtime and the names."""
    uid, cid = str(uuid.uuid4()), hexid()
    bundle = {"ociVersion": "1.0.2", "annotations": {
        "io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": namespace,
        "io.kubernetes.pod.uid": uid, "io.kubernetes.container.name": container}}
    return Layout(
        "pod-cgroupfs", SYSTEMD, "kubepods/burstable/pod%s/%s" % (uid, cid),
        "Kubernetes 'Configuring a cgroup driver' (cgroupfs: /kubepods/<qos>/pod<uid>/<id>); "
        "CRI-O's bundle in containers/storage's run root, CRI-O pkg/annotations",
        {"kind": "pod", "pod_uid": uid, "id": cid},
        "pod %s/%s/%s" % (namespace, name, container),
        state=[("run/containers/storage/overlay-containers/%s/userdata/config.json" % cid,
                bundle, None)],
        named={"name": name, "pod_namespace": namespace, "container": container,
               "runtime": "cri-o"},  # the cgroupfs path does not say; the state file does
        label_unnamed="pod %s/%s" % (uid[:8], cid[:12]),
        dcgm={"pod": name, "namespace": namespace, "container": container})


def container(layout, runtime, cid, path, source, name, state, **fields):
    """A container outside Kubernetes, named by its runtime's state file."""
    return Layout(layout, UNIFIED, path, source,
                  {"kind": "container", "runtime": runtime, "id": cid, **fields},
                  "%s %s" % (runtime, name), state=[state], named={"name": name},
                  label_unnamed="%s %s" % (runtime, cid[:12]))


def docker(name):
    cid = hexid()
    return container(
        "docker", "docker", cid, "system.slice/docker-%s.scope" % cid,
        "docker's 'Runtime metrics' page (systemd driver); its data root's "
        "containers/<id>/config.v2.json", name,
        ("var/lib/docker/containers/%s/config.v2.json" % cid,
         {"ID": cid, "Name": "/" + name, "Config": {"Labels": {}}}, None),
        slurm_job=None, pod_uid=None)


def storage(cid, name):
    """containers/storage's containers.json with one container."""
    return [{"id": cid, "names": [name], "image": hexid(), "layer": hexid(), "metadata": "{}"}]


def podman_cgroupfs(name):
    cid = hexid()
    return container(
        "podman", "podman", cid, "libpod_parent/libpod-%s" % cid,
        "podman-run(1) --cgroup-manager cgroupfs (--cgroup-parent /libpod_parent); "
        "containers-storage.conf(5) graph root /var/lib/containers/storage", name,
        ("var/lib/containers/storage/overlay-containers/containers.json", storage(cid, name),
         None))


def podman_rootless(name, uid, home):
    """The user's own podman under their user@UID.service (systemd manager), its storage in
    their home (as the passwd entry gives it), owned by them; its process runs as them."""
    cid = hexid()
    lay = container(
        "podman-rootless", "podman", cid,
        "user.slice/user-{u}.slice/user@{u}.service/user.slice/libpod-{c}.scope".format(
            u=uid, c=cid),
        "podman-run(1) (rootless, systemd manager); user@.service(5); containers-storage.conf(5)"
        " rootless graph root $HOME/.local/share/containers/storage", name,
        (home.lstrip("/") + "/.local/share/containers/storage/overlay-containers/"
         "containers.json", storage(cid, name), uid),
        uid=uid, unit_uid=None)
    lay.user = uid
    return lay


def unit(name="jupyter.service"):
    return Layout("unit", UNIFIED, "system.slice/" + name, "systemd.special(7): system.slice",
                  {"kind": "unit", "name": name, "unit_uid": None, "runtime": None},
                  "unit " + name)


def session(uid=1000, n=3):
    return Layout("session", UNIFIED, "user.slice/user-%d.slice/session-%d.scope" % (uid, n),
                  "systemd-logind.service(8): user-UID.slice/session-N.scope",
                  {"kind": "session", "name": "session-%d.scope" % n, "unit_uid": uid},
                  "session %d" % n)


def table(user=None):
    """Every layout with fresh ids, in GPU order (dgx-a100 has 8: one each). The rootless
    podman layout needs a user, (uid, home), from Layouts.add_user(); without one it is left
    out."""
    rows = [slurm_v1(secrets.randbelow(900000) + 100000, 0),
            pod_systemd("trainer-7", "ml", "main"),
            docker("web-1"),
            unit(),
            session(),
            pod_cgroupfs("infer-3", "serving", "server"),
            podman_cgroupfs("db-2")]
    if user:
        rows.append(podman_rootless("notebook-4", *user))
    return rows


class Layouts:
    """Sleeps in layouts, their runtime state under self.root, and what undoes them."""

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="gpuctl-workload-")
        self.root = os.path.join(self.tmp, "root")  # GPUCTL_WORKLOAD_ROOT
        os.mkdir(self.root)
        # Every cgroup made here lies below a component of this run's own: the layouts are
        # matched wherever they stand in a path (docs/workloads.md, "Layouts"), and two runs
        # (ctest -j2 runs the CLI, exporter and Python tests at once; another checkout's
        # suite may run beside this one) never share a parent such as kubepods.slice that
        # one of them would then fail to remove.
        self.prefix = "gpuctl-test-" + secrets.token_hex(4)
        self.dirs = []   # cgroup directories made here, in the order made
        self.procs = []  # the sleeps started here
        self.users = []  # user names added here

    def mkcgroup(self, hierarchy, rel):
        sep = b"/" if isinstance(rel, bytes) else "/"
        prefix = self.prefix.encode() if isinstance(rel, bytes) else self.prefix
        path = hierarchy
        for part in [prefix] + rel.split(sep):
            path = os.path.join(path, part)
            if not os.path.isdir(path):
                os.mkdir(path)
                self.dirs.append(path)
        return path

    def sleeper(self, hierarchy, rel, user=None):
        """A real `sleep` (as uid user, or root) moved into cgroup rel of hierarchy."""
        path = self.mkcgroup(hierarchy, rel)
        p = subprocess.Popen(["sleep", "600"], user=user)
        self.procs.append(p)
        procs = b"cgroup.procs" if isinstance(path, bytes) else "cgroup.procs"
        with open(os.path.join(path, procs), "w") as f:
            f.write("%d\n" % p.pid)
        return p

    def write_state(self, layout):
        for rel, doc, owner in layout.state:
            path = os.path.join(self.root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                json.dump(doc, f)
            if owner is not None:
                os.chown(path, owner, owner)

    def start_layout(self, layout):
        """Its state written and a sleep in its cgroup: the Popen."""
        self.write_state(layout)
        return self.sleeper(layout.hierarchy, layout.path, layout.user)

    def add_user(self):
        """A throwaway user (no home made: its files live under the state root): (uid, home)."""
        name = "gpuctl-wl-" + secrets.token_hex(4)
        home = "/home/" + name
        for _ in range(20):  # another useradd may hold /etc/passwd's lock a moment
            r = subprocess.run(["useradd", "--no-create-home", "--no-log-init", "--home-dir",
                                home, "--shell", "/usr/sbin/nologin", name],
                               capture_output=True, text=True)
            if r.returncode != 10:
                break
            time.sleep(0.1)
        assert r.returncode == 0, r
        self.users.append(name)
        return pwd.getpwnam(name).pw_uid, home

    # the old helpers' short ways, for the exporter's and the Python tests
    def pod(self, name, namespace, container, qos="besteffort"):
        """(Popen, pod uid, container id) of a sleep in a pod's container (systemd driver,
        containerd), whose names the state root gives."""
        lay = pod_systemd(name, namespace, container, qos)
        return self.start_layout(lay), lay.fields["pod_uid"], lay.fields["id"]

    def slurm_v1(self, job, step, uid=0):
        """Popen of a sleep in Slurm step job.step of user uid (cgroup v1, the freezer)."""
        return self.start_layout(slurm_v1(job, step, uid))

    def close(self):
        for p in self.procs:
            for h in HIERARCHIES:  # back to the root, so that its cgroup can go at once
                try:
                    with open(os.path.join(h, "cgroup.procs"), "w") as f:
                        f.write(str(p.pid))
                except OSError:
                    pass
            if p.poll() is None:
                p.kill()
            p.wait(10)
        for d in reversed(self.dirs):  # deepest first
            for _ in range(50):  # an exiting task leaves its cgroup a moment later
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
        for name in self.users:
            subprocess.run(["userdel", name], capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)
        left = [d for d in self.dirs if os.path.isdir(d)]
        left += ["pid %d" % p.pid for p in self.procs if os.path.exists("/proc/%d" % p.pid)]
        left += ["user " + n for n in self.users if user_exists(n)]
        left += [self.tmp] if os.path.exists(self.tmp) else []
        self.dirs, self.procs, self.users = [], [], []
        assert not left, "left behind: %r" % left


def user_exists(name):
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False
