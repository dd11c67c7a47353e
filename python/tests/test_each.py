"""gpuctl.each(): one "spawn" process per leased GPU. Where each rank really ran is read from
nvsim-load's ledger (the rank runs nvsim-load, which opens its GPUs through the simulated CUDA
driver and inherits the rank's environment), and compared with `gpuctl run --each` on the same
machine; failures stop the other ranks; ranks die with the parent."""
import os
import signal
import subprocess
import textwrap

import pytest

import gpuctl

from conftest import NVSIM_LOAD, scenario, wait_until

import each_workers


def by_rank(rows):
    return sorted(rows, key=lambda r: int(r["env"]["LOCAL_RANK"]))


def test_each_rank_lands_on_its_gpu(sim):
    m = sim("dgx-a100")
    m.hold("-n", "1", "--only", "2")
    results = gpuctl.each(each_workers.run_load, 4, args=(NVSIM_LOAD,), label="each-test")
    assert [r["RANK"] for r in results] == ["0", "1", "2", "3"]
    runs = by_rank(m.ledger())
    assert [len(r["devices"]) for r in runs] == [1, 1, 1, 1]
    got = [r["devices"][0]["uuid"] for r in runs]
    # what the simulated CUDA opened is what each rank was told, in rank order
    assert got == [r["CUDA_VISIBLE_DEVICES"] for r in results]
    assert len(set(got)) == 4 and set(got) <= set(m.uuids) and m.uuids[2] not in got
    # the same devices, in the same rank order, and the same variables as gpuctl run --each
    m.gpuctl("release", "--all")
    m.hold("-n", "1", "--only", "2")
    before = len(m.ledger())
    r = m.gpuctl("run", "-n", "4", "--each", "--", NVSIM_LOAD, "--seconds", "0")
    assert r.returncode == 0, r.stderr
    cli = by_rank(m.ledger()[before:])
    assert [c["devices"][0]["uuid"] for c in cli] == got
    assert [c["env"] for c in cli] == [r["env"] for r in runs]
    for rank, res in enumerate(results):
        assert (res["LOCAL_RANK"], res["RANK"], res["WORLD_SIZE"], res["LOCAL_WORLD_SIZE"],
                res["CUDA_DEVICE_ORDER"]) == (str(rank), str(rank), "4", "4", "PCI_BUS_ID")
        assert res["GPUCTL_GPUS"] == "%d:%s" % (m.uuids.index(got[rank]), got[rank])
        assert res["pid"] != os.getpid()
        assert (res["MASTER_ADDR"], res["MASTER_PORT"]) == \
            ("127.0.0.1", results[0]["MASTER_PORT"])  # one rendezvous (torchrun --standalone)
    # the lease ended with each()
    m.gpuctl("release", "--all")
    assert m.held() == {}


def test_each_on_mig_devices_sets_what_run_each_sets(sim):
    m = sim("a100-mig")
    r = m.gpuctl("run", "-n", "3", "--mig", "1g.5gb", "--each", "--dry-run", "--", "true")
    assert r.returncode == 0, r.stderr
    want = [dict(w.split("=", 1) for w in line.split())
            for line in r.stdout.splitlines() if line.startswith("CUDA_VISIBLE_DEVICES=")]
    results = gpuctl.each(each_workers.run_load, 3, args=(NVSIM_LOAD,), mig="1g.5gb")
    # the same variables; MASTER_PORT is a port free at the time, the same for every rank
    assert len({w.pop("MASTER_PORT") for w in want}) == 1
    assert len({res.pop("MASTER_PORT") for res in results}) == 1
    assert [{k: v for k, v in res.items() if k != "pid"} for res in results] == want
    # what the simulated CUDA opened: the MIG devices of the scenario, one per rank
    inst = [x["uuid"] for g in scenario("a100-mig")
            for x in (g.get("mig") or {}).get("instances", [])]
    runs = by_rank(m.ledger())
    assert [r["devices"][0]["uuid"] for r in runs] == [w["CUDA_VISIBLE_DEVICES"] for w in want]
    assert all(r["devices"][0]["uuid"] in inst for r in runs)


def test_each_keeps_the_callers_rendezvous(sim, monkeypatch):
    sim("dgx-a100")
    monkeypatch.setenv("MASTER_ADDR", "10.0.0.1")  # a multi-node launch sets its own
    monkeypatch.setenv("MASTER_PORT", "29500")
    results = gpuctl.each(each_workers.run_load, 2, args=(NVSIM_LOAD,))
    assert [(r["MASTER_ADDR"], r["MASTER_PORT"]) for r in results] == [("10.0.0.1", "29500")] * 2
    # another host's address without a port: no port free here is made up for it
    monkeypatch.delenv("MASTER_PORT")
    results = gpuctl.each(each_workers.run_load, 2, args=(NVSIM_LOAD,))
    assert [(r["MASTER_ADDR"], r.get("MASTER_PORT")) for r in results] == [("10.0.0.1", None)] * 2


def test_a_failing_rank_stops_the_others(sim):
    m = sim("dgx-a100")
    with pytest.raises(ValueError) as e:
        gpuctl.each(each_workers.fail_on, 3, args=(1, NVSIM_LOAD), grace=5)
    assert str(e.value) == "rank 1 gave up"
    notes = "\n".join(getattr(e.value, "__notes__", []))
    assert "gpuctl.each: rank 1 on GPU-" in notes and "Traceback" in notes
    # the other ranks were stopped with what they started (SIGTERM to their process groups:
    # nvsim-load writes its ledger line when it ends)
    runs = wait_until(lambda: len(m.ledger()) == 2 and m.ledger(), what="both loads to end")
    assert sorted(r["env"]["RANK"] for r in runs) == ["0", "2"]
    assert all(r["end"] - r["start"] < 60 for r in runs)
    assert m.held() == {}


def test_a_rank_killed_by_a_signal(sim):
    m = sim("dgx-a100")
    with pytest.raises(ChildProcessError) as e:
        gpuctl.each(each_workers.die_on, 2, args=(0,), grace=1)
    assert "rank 0" in str(e.value) and "signal %d" % signal.SIGKILL in str(e.value)
    assert e.value.rank == 0 and e.value.exitcode == -signal.SIGKILL
    assert m.held() == {}


def test_an_exception_that_does_not_pickle(sim):
    sim("dgx-a100")
    with pytest.raises(ChildProcessError) as e:
        gpuctl.each(each_workers.raise_unpicklable, 1)
    assert "Unpicklable: cannot travel" in str(e.value)


def test_each_refuses_what_cannot_run(sim):
    m = sim("dgx-a100")
    with pytest.raises(TypeError):
        gpuctl.each("not callable", 1)
    with pytest.raises(TypeError):
        gpuctl.each(each_workers.run_load, 1, args=[NVSIM_LOAD])
    with pytest.raises(gpuctl.NoDeviceError):
        gpuctl.each(each_workers.run_load, 9, args=(NVSIM_LOAD,))
    with pytest.raises(ValueError):
        gpuctl.each(each_workers.run_load, 1, colour="red")
    assert m.held() == {}


PARENT = """
    import gpuctl, sys
    sys.path.insert(0, %r)
    import each_workers
    if __name__ == "__main__":
        gpuctl.each(each_workers.sleep_forever, 2, args=(%r,))
"""


def test_ranks_die_with_the_parent(sim, tmp_path):
    m = sim("dgx-a100")
    pidfile = str(tmp_path / "rank")
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent(PARENT % (os.path.dirname(__file__), pidfile)))
    p = subprocess.Popen([os.environ.get("PYTHON", "/usr/bin/python3"), str(script)],
                         env=dict(os.environ), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        def ranks():
            try:
                return [int(open(pidfile + "." + r).read()) for r in ("0", "1")]
            except (OSError, ValueError):
                return None
        pids = wait_until(ranks, what="both ranks started")
        assert len(m.held()) == 2
        p.send_signal(signal.SIGKILL)
        p.wait(30)
        wait_until(lambda: not any(os.path.exists("/proc/%d" % q) and not zombie(q)
                                   for q in pids), what="the ranks to die with their parent")
        wait_until(lambda: m.held() == {}, what="the lease to end")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def zombie(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
