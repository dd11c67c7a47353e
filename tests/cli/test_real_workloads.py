"""The real workloads of issue 26's tests: a process in a real podman container
(tests/cli/containers.py) and one in a real Slurm step under Slurm's cgroup plugins
(tests/cli/slurm_cluster.py, cgroup_cluster()). These tests prove the fixtures: the kernel's
/proc/PID/cgroup puts each process where the runtime's documentation says, named by the identity
the runtime itself reports; the consumers' tests (gpuctl ps, top, JSON, exporter) build on them.

Expected layouts, from the runtimes' documentation:
- podman-run(1), --cgroup-parent: with the cgroupfs manager the container's cgroup is made
  under /libpod_parent; podman names it libpod-<container id> (the Id of podman inspect).
- Slurm's cgroup.conf(5) and Cgroups Guide: with cgroup/v1, proctrack/cgroup (the freezer
  hierarchy) and task/cgroup (memory, for ConstrainRAMSpace) a step's tasks live in
  <prefix>/uid_<uid>/job_<job>/step_<step> (memory adds /task_<n>). The prefix is "/slurm", or
  "/slurm_<node name>" when Slurm is built with --enable-multiple-slurmd, as Debian's 22.05 is
  (its cgroup plugin holds the default "/slurm_%n").
The job and step ids come from Slurm itself: squeue's step list, and the SLURM_JOB_ID and
SLURM_STEP_ID slurmstepd puts in the task's environment (srun(1), "OUTPUT ENVIRONMENT VARIABLES").
"""
import json
import os
import re
import shutil
import tempfile
import unittest

from containers import cgroup_hierarchies, start_container
from gpuctl_test import LIBGPUCTL, PYDIR, PYTHON, python_env, sim_sh
from slurm_cluster import cgroup_cluster
from test_exporter import Exporter


def proc_cgroup(pid):
    """/proc/PID/cgroup as (hierarchy id, controllers, path) triples, as the kernel wrote it."""
    with open("/proc/%d/cgroup" % pid) as f:
        return [tuple(ln.rstrip("\n").split(":", 2)) for ln in f if ln.strip()]


def proc_environ(pid):
    with open("/proc/%d/environ" % pid, "rb") as f:
        return dict(kv.decode(errors="replace").split("=", 1)
                    for kv in f.read().split(b"\0") if b"=" in kv)


class PodmanContainer(unittest.TestCase):
    def test_process_is_in_the_libpod_cgroup_of_its_id(self):
        p, c = start_container(self, "gpuctl-web-1")
        self.assertRegex(c.id, r"^[0-9a-f]{64}$")
        lines = proc_cgroup(c.pid)
        # every hierarchy this machine mounts (v1 controllers and v2) names the container
        self.assertEqual(len(lines), len(cgroup_hierarchies()), lines)
        for hid, ctrl, path in lines:
            self.assertEqual(path, "/libpod_parent/libpod-" + c.id, (hid, ctrl))
        self.assertIn(("0", "", "/libpod_parent/libpod-" + c.id), lines)
        # the process is the container's init: PID 1 in its own PID namespace
        with open("/proc/%d/status" % c.pid) as f:
            nspid = [ln.split()[1:] for ln in f if ln.startswith("NSpid:")][0]
        self.assertEqual(nspid, [str(c.pid), "1"])

    def test_name_in_the_storage_under_a_root_prefix(self):
        """containers/storage's record of the container, where a reader joining a root prefix
        (GPUCTL_WORKLOAD_ROOT=p.root) to podman's default storage path finds it."""
        p, c = start_container(self, "gpuctl-web-2")
        path = os.path.join(p.root, "var/lib/containers/storage/overlay-containers/"
                                    "containers.json")
        with open(path) as f:
            records = json.load(f)
        self.assertEqual([(r["id"], r["names"]) for r in records], [(c.id, [c.name])])

    def test_cleanup_removes_container_storage_and_cgroups(self):
        p, c = start_container(self, "gpuctl-web-3")
        dirs = [os.path.join(h, "libpod_parent", "libpod-" + c.id) for h in cgroup_hierarchies()]
        self.assertTrue(all(os.path.isdir(d) for d in dirs), dirs)
        p.close()
        self.assertFalse(os.path.exists("/proc/%d" % c.pid))
        self.assertFalse(os.path.exists(p.root))
        self.assertEqual([d for d in dirs if os.path.exists(d)], [])


class SlurmStep(unittest.TestCase):
    def test_task_is_in_its_job_and_step_cgroup(self):
        cl = cgroup_cluster(self)
        job, step, pid = cl.start_step()
        env = proc_environ(pid)
        self.assertEqual((env.get("SLURM_JOB_ID"), env.get("SLURM_STEP_ID")),
                         (str(job), str(step)))
        lines = proc_cgroup(pid)
        want = r"/slurm(_localhost)?/uid_0/job_%d/step_%d" % (job, step)
        by_ctrl = {ctrl: path for _, ctrl, path in lines}
        # proctrack/cgroup: the freezer; task/cgroup with ConstrainRAMSpace: memory, per task
        self.assertRegex(by_ctrl["freezer"], "^%s$" % want)
        self.assertRegex(by_ctrl["memory"], r"^%s/task_0$" % want)
        # and a second step of the same job would differ only in step_S: the path names this one
        self.assertEqual([p for p in by_ctrl.values() if re.search("/job_", p) and
                          not re.search(r"/job_%d/step_%d(/|$)" % (job, step), p)], [])

    def test_cleanup_ends_the_step_and_removes_the_cgroups(self):
        cl = cgroup_cluster(self)
        created = list(cl.new_cgroups)  # the /slurm* directories absent before the cluster
        job, step, pid = cl.start_step()
        made = [d for d in created if os.path.isdir(d)]
        self.assertTrue(made or not created, created)
        cl.stop()
        self.assertFalse(os.path.exists("/proc/%d" % pid))
        self.assertEqual([d for d in created if os.path.exists(d)], [])


# What each real workload must be shown as, everywhere (issue 26, "Done when"): gpuctl ps (table
# and JSON), top, list's JSON, the Python package and the exporter's labels. The process is put
# on simulated GPU 2 with `nvsim proc add --pid`; the expected values are the runtime's own
# words (podman inspect's Id and the name given to podman run; squeue's job and step) and the
# label forms docs/workloads.md fixes ("podman NAME", "slurm JOB.STEP").
SHOW_SH = r"""
$NVSIM proc add --pid "$PID" -i 2 --mem 2GiB
$GPUCTL ps --format json > "$OUT/ps.json"
$GPUCTL ps > "$OUT/ps.txt"
$GPUCTL ps --workload "$PATTERN" --format json > "$OUT/ps-filtered.json"
COLUMNS=200 $GPUCTL top --once -i 2 > "$OUT/top.txt"
$GPUCTL list --format json > "$OUT/list.json"
$GPUCTL list > "$OUT/list.txt"
"$PYTHON" -c '
import json, os, sys, gpuctl
pid = int(os.environ["PID"])
procs = [p for d in gpuctl.devices() for p in d.processes if p.pid == pid]
w = gpuctl.workload(pid)
json.dump({"direct": {k: getattr(w, k) for k in ("kind", "label", "id", "name", "runtime",
                                                 "ns_pid", "slurm_job", "slurm_step")},
           "device": [p.workload.label for p in procs]}, sys.stdout)
' > "$OUT/python.json"
"""


class ShownEverywhere(unittest.TestCase):
    """A process in a real podman container and one in a real Slurm step, as gpuctl shows them."""

    def show(self, pid, pattern, env=None):
        out = self.scratch()
        e = {"PID": str(pid), "OUT": out, "PATTERN": pattern, "PYTHON": PYTHON,
             "PYTHONPATH": PYDIR, "GPUCTL_LIBRARY": LIBGPUCTL}
        e.update(python_env(env or {}))
        r = sim_sh("dgx-a100", SHOW_SH, env=e)
        self.assertEqual(r.rc, 0, r)

        def read(name):
            with open(os.path.join(out, name)) as f:
                return f.read()
        return read

    def scratch(self):
        d = tempfile.mkdtemp(prefix="gpuctl-real-wl-")
        self.addCleanup(shutil.rmtree, d, True)
        return d

    def workload_of(self, ps_json, pid):
        """ps JSON: the workload of pid among device 2's processes (every one, leased or not)."""
        dev = [d for d in json.loads(ps_json)["devices"] if d["index"] == 2]
        self.assertEqual(len(dev), 1, ps_json)
        ws = [p["workload"] for p in dev[0]["processes"] if p["pid"] == pid]
        self.assertEqual(len(ws), 1, dev)
        return ws[0]

    def check_everywhere(self, read, pid, label, fields):
        w = self.workload_of(read("ps.json"), pid)
        for k, v in fields.items():
            self.assertEqual(w[k], v, (k, w))
        self.assertEqual(w["label"], label)
        self.assertEqual(w["pid"], pid)
        # the table's WORKLOAD column, top's process list and list's PROCESSES cell
        row = [l for l in read("ps.txt").splitlines() if l.startswith("2 ")]
        self.assertEqual(len(row), 1, read("ps.txt"))
        self.assertIn(label, row[0])
        # top's process row: "[mark] GPU PID USER ..." (a frame as wide as $COLUMNS)
        top = [l for l in read("top.txt").splitlines() if re.match(r"^\W*2\s+%d\s" % pid, l)]
        self.assertTrue(top and label in top[0], read("top.txt"))
        self.assertIn("%s: " % label, read("list.txt"))
        # the filter keeps the device; list's JSON has the same object
        kept = [d["index"] for d in json.loads(read("ps-filtered.json"))["devices"]]
        self.assertEqual(kept, [2])
        lst = json.loads(read("list.json"))
        lw = [p["workload"] for g in lst["gpus"] if g["index"] == 2 for p in g["processes"]
              if p["pid"] == pid]
        self.assertEqual(lw, [w])
        py = json.loads(read("python.json"))
        self.assertEqual(py["direct"]["label"], label)
        self.assertEqual(py["device"], [label])
        for k, v in fields.items():
            if k in py["direct"]:
                self.assertEqual(py["direct"][k], v, k)

    def scrape(self, pid, env=None):
        with Exporter("dgx-a100", env=env or {}) as ex:
            ex.nvsim("proc", "add", "--pid", str(pid), "-i", "2", "--mem", "2GiB")
            m = ex.wait_for(lambda m: len(m.get("gpuctl_process_memory_used_bytes", [])) == 1,
                            "the process")
        return m

    def test_podman_container(self):
        p, c = start_container(self, "gpuctl-shown-1")
        env = {"GPUCTL_WORKLOAD_ROOT": p.root}
        read = self.show(c.pid, "container:podman gpuctl-shown-*", env)
        self.check_everywhere(read, c.pid, "podman " + c.name,
                              {"kind": "container", "runtime": "podman", "id": c.id,
                               "name": c.name, "ns_pid": 1})
        m = self.scrape(c.pid, env)
        (labels, _), = m["gpuctl_process_memory_used_bytes"]
        self.assertEqual((labels["workload_kind"], labels["workload"]),
                         ("container", "podman " + c.name))
        info = [l for l, _ in m["gpuctl_gpu_workload_info"] if l["gpu"] == "2"]
        self.assertEqual([(l["kind"], l["workload"]) for l in info],
                         [("container", "podman " + c.name)])

    def test_slurm_step(self):
        cl = cgroup_cluster(self)
        job, step, pid = cl.start_step()
        label = "slurm %d.%d" % (job, step)
        read = self.show(pid, "slurm:%s" % label)
        self.check_everywhere(read, pid, label,
                              {"kind": "slurm", "slurm_job": job, "slurm_step": str(step)})
        m = self.scrape(pid)
        util = [l for l, _ in m["DCGM_FI_DEV_GPU_UTIL"] if l["gpu"] == "2"]
        self.assertEqual([l.get("hpc_job") for l in util], [str(job)])
        (labels, _), = m["gpuctl_process_memory_used_bytes"]
        self.assertEqual((labels["workload_kind"], labels["hpc_job"]), ("slurm", str(job)))


if __name__ == "__main__":
    unittest.main()
