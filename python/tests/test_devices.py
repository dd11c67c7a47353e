"""gpuctl.devices(), topology() and health() against the scenario files and against the
command line (`gpuctl list`, `gpuctl topo`, `gpuctl health`, all --format json) on the same
simulated machine; processes, MIG devices, lost GPUs; the errors without a driver or without
the library."""
import errno
import json
import os
import signal
import subprocess
import sys

import pytest

import gpuctl

from conftest import GPUCTL, NVSIM_LOAD, scenario, tool_env

MIB = 1 << 20


@pytest.mark.parametrize("name", ["dgx-a100", "dgx1-v100", "workstation-mixed", "a100-mig"])
def test_devices_are_the_scenarios_gpus(sim, name):
    m = sim(name)
    want = scenario(name)
    got = gpuctl.devices()
    assert [d.index for d in got] == list(range(len(want)))
    assert [d.uuid for d in got] == [g["uuid"] for g in want]
    assert [d.pci_bus_id for d in got] == [g["pci_bus_id"] for g in want]
    assert [d.name for d in got] == [g["name"] for g in want]
    assert [d.numa_node for d in got] == [g.get("numa_node") for g in want]
    assert [d.memory_total for d in got] == [g["memory_total_mib"] * MIB for g in want]
    assert [d.power for d in got] == [g["power_draw_mw"] / 1000.0 for g in want]
    assert all(d.health == "OK" and not d.lost and d.processes == () for d in got)
    assert m.name == name


def test_every_field_as_gpuctl_list_json(sim):
    m = sim("dgx-a100")
    m.nvsim("set", "-i", "2", "utilization.gpu=35", "memory.used=10GiB", "temperature=71")
    devs = gpuctl.devices()
    r = m.gpuctl("list", "--format", "json")
    assert r.returncode == 0, r.stderr
    cli = json.loads(r.stdout)["gpus"]
    assert len(cli) == len(devs) == 8
    for d, c in zip(devs, cli):
        for key, value in d.fields.items():
            if key == "compute_mode":  # the CLI prints the mode's name, the field its number
                assert {0: "Default", 2: "Prohibited", 3: "Exclusive_Process"}[value] == c[key]
            elif key == "pstate":  # the CLI prints nvidia-smi's P0..P15, the field 0..15
                assert "P%d" % value == c[key]
            elif key in ("violation_power", "violation_thermal", "energy_total"):
                assert isinstance(value, int) == isinstance(c[key], int), key  # counters move
            else:
                assert c[key] == value, key
        assert c["health"] == d.health
    assert (devs[2].utilization, devs[2].memory_used, devs[2].temperature) == (35, 10 << 30, 71)


def test_processes_and_mig_devices(sim):
    m = sim("a100-mig")
    want = scenario("a100-mig")
    load = subprocess.Popen([NVSIM_LOAD, "--mem", "300MiB", "--util", "40"],
                            env=tool_env({"CUDA_VISIBLE_DEVICES": want[3]["uuid"]}),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert load.stdout.readline().startswith("ready")
        devs = gpuctl.devices()
        procs = devs[3].processes
        assert [p.pid for p in procs] == [load.pid]
        assert procs[0].used_memory == 300 * MIB
        assert procs[0].command == "nvsim-load"
        assert procs[0].uid == os.getuid()
        assert devs[3].utilization == 40
        for i in (0, 1):
            inst = want[i]["mig"]["instances"]
            got = devs[i].mig_devices
            assert [x.uuid for x in got] == [x["uuid"] for x in inst]
            assert [x.profile for x in got] == [x["profile"] for x in inst]
            assert [x.gpu_instance_id for x in got] == [x["gi"] for x in inst]
            assert [x.memory_total for x in got] == [x["memory_mib"] * MIB for x in inst]
            assert all(x.parent is devs[i] for x in got)
        assert devs[2].mig_devices == () and devs[3].mig_devices == ()
    finally:
        load.send_signal(signal.SIGTERM)
        load.wait(30)
    assert m.ledger()[-1]["devices"][0]["uuid"] == want[3]["uuid"]


def test_health_verdicts_as_gpuctl_health(sim):
    m = sim("dgx-a100")
    m.nvsim("xid", "-i", "1", "79")                 # fence class: FAIL (docs/health.md)
    m.nvsim("xid", "-i", "2", "13")                 # application class: WARN
    m.nvsim("set", "-i", "3", "ecc.volatile.uncorrected=2")  # ecc-dbe: FAIL
    m.nvsim("set", "-i", "5", "lost=1")
    r = m.gpuctl("health", "--format", "json")
    assert r.returncode == 20, r.stderr
    cli = json.loads(r.stdout)["gpus"]
    got = gpuctl.health()
    assert [g.verdict for g in got] == [c["verdict"] for c in cli]
    assert [g.verdict for g in got] == ["OK", "FAIL", "WARN", "FAIL", "OK", "FAIL", "OK", "OK"]
    for g, c in zip(got, cli):
        assert (g.index, g.uuid, g.pci_bus_id, g.name, g.lost) == \
            (c["index"], c["uuid"], c["pci_bus_id"], c["name"], c["lost"])
        assert [(f.check, f.severity, f.message, f.action, f.xid, f.xid_class)
                for f in g.findings] == \
            [(f["check"], f["severity"], f["message"], f["action"], f.get("xid"),
              f.get("xid_class")) for f in c["findings"]]
    assert got[1].findings[0].xid == 79 and got[1].findings[0].xid_class == "fence"
    assert got[5].lost
    # devices() gives the same verdicts
    assert [d.health for d in gpuctl.devices()] == [c["verdict"] for c in cli]


@pytest.mark.parametrize("name,sets,state,checks", [
    # pending retirement (WARN, FAIL in the strict mode), DBE pages retired above 15 with no
    # earlier sample (WARN: watch the GPU): docs/health.md's table, on Volta
    ("dgx1-v100", [("0", "retired.pending=1"), ("1", "retired.dbe=20")], None,
     {(0, "retired-pending"), (1, "retired-pages")}),
    ("dgx-a100", [("5", "remap.pending=1")], None, {(5, "remap-pending")}),
    # a state file that is not one: every GPU WARN "state" (docs/health.md, "State file")
    ("dgx-a100", [], b"not a state file\n", {(i, "state") for i in range(8)}),
])
def test_health_actions_name_no_cli_option(sim, name, sets, state, checks):
    # issue 25, item 3: Python's findings spoke of the command line's options
    m = sim(name)
    for i, what in sets:
        m.nvsim("set", "-i", i, what)
    if state is not None:
        with open(m.env["GPUCTL_HEALTH_STATE"], "wb") as f:
            f.write(state)
    got = gpuctl.health()
    found = {(g.index, f.check): f for g in got for f in g.findings}
    assert checks <= set(found), found
    for g in got:
        for f in g.findings:
            assert "--" not in (f.action or ""), f.action
            assert "--" not in f.message, f.message


@pytest.mark.parametrize("name", ["dgx-a100", "dgx1-v100", "pcie-8gpu"])
def test_topology_as_gpuctl_topo(sim, name):
    m = sim(name)
    r = m.gpuctl("topo", "--format", "json")
    assert r.returncode == 0, r.stderr
    cli = json.loads(r.stdout)["links"]
    got = gpuctl.topology()
    assert [(l.a, l.b) for l in got] == [(c["a"], c["b"]) for c in cli]
    for l, c in zip(got, cli):
        assert (l.level, l.level_value, l.nvlinks, l.nvswitch, l.p2p, l.bandwidth) == \
            (c["level"], c["level_value"], c["nvlinks"], c["nvswitch"], c["p2p"],
             c["bandwidth_gbps"])
    u = [g["uuid"] for g in scenario(name)]
    assert all((l.a_uuid, l.b_uuid) == (u[l.a], u[l.b]) for l in got)


def test_topology_facts_from_the_scenario(sim):
    # DGX A100: every pair all-to-all through NVSwitch, 12 links each (nvidia-smi topo -m
    # prints NV12 on a DGX A100: docs/topology.md, sim/scenarios/dgx-a100.json)
    sim("dgx-a100")
    got = gpuctl.topology()
    assert len(got) == 8 * 7 // 2
    assert all(l.nvswitch and l.nvlinks == 12 and l.p2p == "OK" for l in got)


def test_no_driver_is_driver_error(sim, monkeypatch):
    sim("dgx-a100")
    monkeypatch.setenv("GPUCTL_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1")
    cli = subprocess.run([GPUCTL, "select", "-n", "2"], env=tool_env(), capture_output=True,
                         text=True)
    assert cli.returncode == 4
    for call in (gpuctl.devices, gpuctl.topology, gpuctl.health, gpuctl.select,
                 lambda: gpuctl.lease(1)):
        with pytest.raises(gpuctl.DriverError) as e:
            call()
        assert "no NVIDIA driver" in str(e.value)
        assert "/nonexistent/libnvidia-ml.so.1" in str(e.value)
        assert e.value.errno in (errno.ENOENT, errno.ENODEV)
    with pytest.raises(gpuctl.DriverError) as e:
        gpuctl.select(2)
    assert "gpuctl: " + str(e.value) == cli.stderr.strip().replace(
        " (set GPUCTL_NVML_LIBRARY to use another library)", "")


def test_nvml_that_cannot_initialise_is_driver_error(sim, monkeypatch):
    # the simulator without a machine answers nvmlInit with DRIVER_NOT_LOADED (sim/README.md)
    sim("dgx-a100")
    monkeypatch.delenv("NVSIM_STATE_DIR")
    with pytest.raises(gpuctl.DriverError) as e:
        gpuctl.devices()
    assert e.value.errno == errno.ENODEV


def test_missing_library_is_an_error_at_the_first_call(sim):
    m = sim("dgx-a100")
    code = ("import gpuctl\n"                       # the import itself never fails
            "try:\n    gpuctl.select(1)\n"
            "except gpuctl.Error as e:\n    print(type(e).__name__, e.errno, e)\n")
    r = m.python(code, env={"GPUCTL_LIBRARY": "/nonexistent/libgpuctl.so.0"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Error %d " % errno.ENOENT)
    assert "/nonexistent/libgpuctl.so.0" in r.stdout and "GPUCTL_LIBRARY" in r.stdout


def test_lost_gpu_is_listed(sim):
    m = sim("rtx4090-8")
    m.nvsim("set", "-i", "4", "lost=1")
    devs = gpuctl.devices()
    assert [d.lost for d in devs] == [i == 4 for i in range(8)]
    assert devs[4].health == "FAIL" and devs[4].memory_used is None
    # NVML answers nothing for a lost GPU, its UUID included (as `gpuctl list` shows it)
    assert devs[4].uuid is None
    assert [d.uuid for i, d in enumerate(devs) if i != 4] == \
        [g["uuid"] for i, g in enumerate(scenario("rtx4090-8")) if i != 4]


ONE_SESSION = """
import os, threading, gpuctl
gpuctl.devices(); gpuctl.select(1); gpuctl.health(); gpuctl.topology()
with gpuctl.lease(1):
    pass
t = threading.Thread(target=gpuctl.devices)
t.start(); t.join()
pid = os.fork()
if pid == 0:  # a forked child makes its own context and never frees the parent's
    ok = len(gpuctl.devices()) == 8
    gpuctl._lib.reset()
    os._exit(0 if ok else 1)  # _exit: the simulator's counts of the child are not written
_, status = os.waitpid(pid, 0)
assert status == 0, status
assert len(gpuctl.devices()) == 8  # the parent's session survived the child
"""


def test_one_nvml_session_per_thread(sim):
    # NVML's initialisation is the costly part of a call on a real driver: the package opens
    # it once per thread (and per forked process), not once per call. The simulator counts
    # nvmlInit in the process: the main thread and the second thread, 2 for 7 calls.
    m = sim("dgx-a100")
    m.nvsim("calls", "--reset")
    r = subprocess.run([sys.executable, "-c", ONE_SESSION], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    calls = json.loads(m.nvsim("calls", "--json"))["functions"]
    assert calls.get("nvmlInit_v2") == 2, calls
