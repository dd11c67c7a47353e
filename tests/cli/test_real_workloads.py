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
import unittest

from containers import cgroup_hierarchies, start_container
from slurm_cluster import cgroup_cluster


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


if __name__ == "__main__":
    unittest.main()
