"""gpuctl.workload(pid) and Process.workload on real processes the kernel places in cgroups this
test makes (tests/cli/workload_layouts.py): a pod's container under the kubelet's systemd
driver on cgroup v2 with containerd's OCI bundle under a scratch GPUCTL_WORKLOAD_ROOT, and a
Slurm step on cgroup v1, registered with the simulated driver.

Expected values come from what the test made (the names it wrote, the pod uid and container id
it chose, the job and step) and the short forms and sentinels include/gpuctl/workload.h
documents ("pod NAMESPACE/NAME/CONTAINER", "slurm JOB.STEP"; UINT32_MAX and 0 for unknown),
never from the library's output."""
import os
import subprocess

import pytest

import gpuctl
import workload_layouts


@pytest.fixture
def layouts():
    why = workload_layouts.why_not()
    if why:
        pytest.skip(why)
    lay = workload_layouts.Layouts()
    yield lay
    lay.close()


def test_process_workload_of_a_pod_and_a_slurm_step(sim, layouts, monkeypatch):
    m = sim("dgx-a100")
    pod, pod_uid, cid = layouts.pod("trainer-7", "ml", "main")
    job = layouts.slurm_v1(4242, "0")
    monkeypatch.setenv("GPUCTL_WORKLOAD_ROOT", layouts.root)
    m.nvsim("proc", "add", "--pid", str(pod.pid), "-i", "0", "--mem", "2GiB")
    m.nvsim("proc", "add", "--pid", str(job.pid), "-i", "1", "--mem", "2GiB")

    devs = gpuctl.devices()
    [p0] = devs[0].processes
    [p1] = devs[1].processes
    assert all(not d.processes for d in devs[2:])
    w = p0.workload
    assert isinstance(w, gpuctl.Workload)
    assert (w.kind, w.pid, w.uid) == ("pod", pod.pid, 0)
    assert w.ns_pid == pod.pid  # no PID namespace of its own
    assert (w.name, w.pod_namespace, w.container) == ("trainer-7", "ml", "main")
    assert (w.pod_uid, w.id, w.runtime) == (pod_uid, cid, "containerd")
    assert w.cgroup.endswith("/cri-containerd-%s.scope" % cid)
    assert w.label == "pod ml/trainer-7/main"
    assert (w.slurm_job, w.slurm_step, w.slurm_array_job, w.slurm_array_task) == (None,) * 4
    assert (w.unit_uid, w.truncated) == (None, False)

    j = p1.workload
    assert (j.kind, j.pid, j.slurm_job, j.slurm_step) == ("slurm", job.pid, 4242, "0")
    assert j.cgroup == "/%s/slurm/uid_0/job_4242/step_0" % layouts.prefix
    assert j.label == "slurm 4242.0"
    assert (j.slurm_array_job, j.slurm_array_task, j.name, j.pod_uid) == (None,) * 4

    # the one-PID call gives the same record
    one = gpuctl.workload(pod.pid)
    assert {k: getattr(one, k) for k in one.__slots__} == {k: getattr(w, k) for k in w.__slots__}


def test_gone_process_is_unknown_and_bad_pids_refused():
    p = subprocess.Popen(["true"])
    p.wait()
    w = gpuctl.workload(p.pid)
    assert (w.kind, w.pid) == ("unknown", p.pid)
    assert w.uid is None
    for bad in (0, -1, 1 << 32, "1", 1.0, True):
        with pytest.raises(gpuctl.RequestError):
            gpuctl.workload(bad)


def test_every_kind_name():
    # the kind names of docs/workloads.md, by the header's enum values
    names = [gpuctl._lib.text(gpuctl._lib.lib().gpuctl_workload_kind_name(k)) for k in range(7)]
    assert names == ["unknown", "bare", "slurm", "pod", "container", "unit", "session"]
    assert os.getpid() > 0
