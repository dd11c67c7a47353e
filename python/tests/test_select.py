"""gpuctl.select(): the choice of `gpuctl select` (same devices, same order, same reasons), the
arguments it takes (sizes with the command line's units, id lists), what it refuses (ValueError,
TypeError) and the exceptions of the library's failures."""
import errno
import re
import subprocess

import pytest

import gpuctl

from conftest import NVSIM_LOAD, cuda_set, scenario, tool_env

GIB = 1 << 30


def cli_select(m, *args):
    r = m.gpuctl("select", *args)
    assert r.returncode == 0, r.stderr
    return cuda_set(r.stdout)


def same(m, n, kw, args):
    """select(n, **kw) and `gpuctl select -n n ARGS` agree: the same devices in the same order,
    or the same reason. Returns the UUIDs chosen (None when nothing qualified)."""
    try:
        got = [d.uuid for d in gpuctl.select(n, **kw)]
    except gpuctl.NoDeviceError as e:
        assert str(e) == cli_error(m, "-n", str(n), *args, rc=3), (kw, n)
        return None
    assert got == cli_select(m, "-n", str(n), *args), (kw, n)
    assert len(got) == n and set(got) <= set(m.uuids)
    return got


# docs/library.md's table: each option -> the keyword that asks the same (issue 25, item 3:
# the command line names its options, the package its keywords)
KEYWORD_OF_OPTION = {"--min-free-mem": "min_free_mem", "--max-util": "max_util",
                     "--no-procs": "no_procs", "--numa": "numa", "--only": "only",
                     "--exclude": "exclude", "--mig": "mig", "--mem": "share_mem",
                     "--ignore-outer": "ignore_outer"}


def cli_error(m, *args, rc):
    """`gpuctl select ARGS`'s one line, with its options spelled as the package's keywords:
    what the package's exception must say."""
    r = m.gpuctl("select", *args)
    assert r.returncode == rc, r
    line = r.stderr.strip()
    assert line.startswith("gpuctl: select: ") and "\n" not in line, r.stderr
    line = line[len("gpuctl: select: "):]
    return re.sub(r"--[a-z-]+\b", lambda o: KEYWORD_OF_OPTION.get(o.group(0), o.group(0)), line)


@pytest.mark.parametrize("name", ["dgx-a100", "dgx1-v100", "pcie-8gpu", "hgx-h100",
                                  "workstation-mixed", "synthetic-64"])
def test_same_choice_as_gpuctl_select(sim, name):
    m = sim(name)
    n = len(scenario(name))
    for k in sorted({0, 1, 2, 3, 4, n // 2, n}):
        same(m, k, {}, [])


def test_filters_as_the_command_line(sim):
    m = sim("dgx-a100")
    m.nvsim("set", "-i", "0", "memory.used=75GiB")
    m.nvsim("set", "-i", "1", "utilization.gpu=90")
    m.nvsim("set", "-i", "6", "memory.used=60GiB")
    cases = [
        (dict(min_free_mem="10GiB"), ["--min-free-mem", "10GiB"]),
        (dict(min_free_mem=10 * GIB), ["--min-free-mem", "10GiB"]),
        (dict(min_free_mem="25G"), ["--min-free-mem", "25G"]),
        (dict(min_free_mem="1.5t"), ["--min-free-mem", "1.5t"]),
        (dict(max_util=50), ["--max-util", "50"]),
        (dict(numa=1), ["--numa", "1"]),
        (dict(only="2,3,GPU-18bd2210"), ["--only", "2,3,GPU-18bd2210"]),
        (dict(only=[7, "6", m.uuids[5]]), ["--only", "7,6,%s" % m.uuids[5]]),
        (dict(exclude=(0, 1, 2)), ["--exclude", "0,1,2"]),
        (dict(exclude="00000000:07:00.0"), ["--exclude", "00000000:07:00.0"]),
    ]
    for kw, args in cases:
        for n in (1, 2, 4):
            same(m, n, kw, args)
    # from the scenario: GPU 0 has 5 GiB free of 80, so 10 GiB never picks it
    assert m.uuids[0] not in [d.uuid for d in gpuctl.select(7, min_free_mem="10GiB")]


def test_no_device_error_is_the_command_lines_reason(sim):
    m = sim("dgx-a100")
    for n, args in ((9, ()), (8, ("--numa", "3")), (3, ("--only", "0,1"))):
        kw = {"numa": 3} if "--numa" in args else {"only": "0,1"} if args else {}
        with pytest.raises(gpuctl.NoDeviceError) as e:
            gpuctl.select(n, **kw)
        assert e.value.errno == errno.ENOSPC
        assert str(e.value) == cli_error(m, "-n", str(n), *args, rc=3)
    assert str(e.value).startswith("need 3 GPUs, 2 qualify")


def test_bad_values_are_value_errors(sim):
    m = sim("dgx-a100")
    bad = [
        (dict(n=-1), "n: -1"), (dict(n=4097), "n: 4097"),
        (dict(max_util=101), "max_util: 101"), (dict(max_util=-1), "max_util: -1"),
        (dict(numa=-2), "numa: -2"),
        (dict(min_free_mem="10Gib"), "min_free_mem: '10Gib': unknown unit"),
        (dict(min_free_mem="10"), "min_free_mem: '10': needs a unit"),
        (dict(min_free_mem="ten"), "min_free_mem: 'ten'"),
        (dict(min_free_mem=-5), "min_free_mem: -5"),
        (dict(only=""), "only: empty"), (dict(exclude=[]), "exclude: empty"),
        (dict(mig=""), "mig: empty"), (dict(pool=""), "pool: empty"),
        (dict(share_mem=0), "share_mem"),
        (dict(colour="red"), "unknown keyword 'colour'"),
    ]
    for kw, needle in bad:
        n = kw.pop("n", 1)
        with pytest.raises(ValueError) as e:
            gpuctl.select(n, **kw)
        assert isinstance(e.value, gpuctl.RequestError) and e.value.errno == errno.EINVAL
        assert needle in str(e.value), kw
    # the command line refuses the same sizes with the same words
    assert "'10Gib': unknown unit" in m.gpuctl("select", "-n", "1", "--min-free-mem",
                                               "10Gib").stderr
    for kw in (dict(n="2"), dict(n=2.0), dict(n=True), dict(max_util="50"),
               dict(min_free_mem=1.5), dict(only={1.5}), dict(no_procs=1), dict(numa="0"),
               dict(preview="yes")):
        n = kw.pop("n", 1)
        with pytest.raises(TypeError):
            gpuctl.select(n, **kw)


def test_refusals_name_the_keywords_given(sim, monkeypatch):
    """Issue 25, item 3: an exception names the keyword the caller passed (docs/library.md's
    table), never a command-line option, and a stale CUDA_VISIBLE_DEVICES is named with the way
    out (ignore_outer). dgx-a100: GPUs 0,1 on NUMA node 3 (the scenario file), 80 GiB each."""
    m = sim("dgx-a100")
    cases = ((dict(numa=3, only="2,3"), 2, "need 2 GPUs, 0 qualify: only: 0,1,4,5,6,7; numa 3: 2,3"),
             (dict(only="0", exclude="0"), 1, "exclude: 0"),
             (dict(mig="1g.99gb"), 1, "mig '1g.99gb': no MIG device of that profile"),
             (dict(share_mem="200GiB"), 1, "share_mem 200 GiB: larger than any GPU's memory"),
             (dict(only="9"), 1, "only: '9': no GPU with that index"))
    for kw, n, want in cases:
        with pytest.raises(gpuctl.Error) as e:
            gpuctl.select(n, **kw)
        assert want in str(e.value), (kw, str(e.value))
        assert "--" not in str(e.value), (kw, str(e.value))
    # a shared request short of free memory names share_mem, not min_free_mem
    m.nvsim("set", "-i", "0,1,2,3,4,5,6", "memory.used=78GiB")
    with pytest.raises(gpuctl.NoDeviceError) as e:
        gpuctl.select(2, share_mem="4GiB")
    assert "share_mem 4 GiB not free: 0,1,2,3,4,5,6" in str(e.value)
    assert "min_free_mem" not in str(e.value)
    # a CUDA_VISIBLE_DEVICES left in the environment: named, with the way out
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "6")
    with pytest.raises(gpuctl.NoDeviceError) as e:
        gpuctl.select(2)
    assert str(e.value) == ("need 2 GPUs, 1 qualifies: outside the allocation of "
                            "CUDA_VISIBLE_DEVICES: 0,1,2,3,4,5,7 (ignore_outer chooses among "
                            "all GPUs)")
    assert len(gpuctl.select(2, ignore_outer=True)) == 2


def test_bad_ids_and_profiles_are_the_librarys_refusals(sim):
    m = sim("a100-mig")
    for kw, args in ((dict(only="9"), ["--only", "9"]), (dict(exclude="GPU-zz"),
                                                         ["--exclude", "GPU-zz"]),
                     (dict(mig="9/9"), ["--mig", "9/9"]),
                     (dict(pool="nope"), ["--pool", "nope"])):
        with pytest.raises(gpuctl.RequestError) as e:
            gpuctl.select(1, **kw)
        assert str(e.value) == cli_error(m, "-n", "1", *args, rc=2)
    # a well-formed profile no GPU has: nothing qualifies (exit 3), not a bad request
    with pytest.raises(gpuctl.NoDeviceError) as e:
        gpuctl.select(1, mig="7g.80gb")
    assert str(e.value) == cli_error(m, "-n", "1", "--mig", "7g.80gb", rc=3)


def test_mig_devices(sim):
    m = sim("a100-mig")
    inst = {x["uuid"] for g in scenario("a100-mig") for x in g.get("mig", {}).get("instances", [])
            if x["profile"] == "1g.5gb"}
    got = gpuctl.select(3, mig="1g.5gb")
    # three MIG devices are more than one CUDA process uses on driver 550 (select refuses the
    # cuda form: docs/device-strings.md); the container form names the same choice
    r = m.gpuctl("select", "-n", "3", "--mig", "1g.5gb", "--format", "nvidia")
    assert r.returncode == 0, r.stderr
    assert [d.uuid for d in got] == r.stdout.strip().split("=", 1)[1].split(",")
    assert all(isinstance(d, gpuctl.MigDevice) and d.profile == "1g.5gb" for d in got)
    assert {d.uuid for d in got} <= inst
    assert all(d.parent.uuid in m.uuids and d in d.parent.mig_devices for d in got)


def test_outer_allocation_limits_the_choice(sim, monkeypatch):
    m = sim("dgx-a100")
    for var, value, allowed in (("CUDA_VISIBLE_DEVICES", "%s,%s,%s" % (m.uuids[5], m.uuids[2],
                                                                       m.uuids[7]), {2, 5, 7}),
                                ("SLURM_STEP_GPUS", "1,3", {1, 3}),
                                ("NVIDIA_VISIBLE_DEVICES", "4,6", {4, 6})):
        monkeypatch.setenv(var, value)
        got = [d.uuid for d in gpuctl.select(2)]
        assert got == cli_select(m, "-n", "2")
        assert {m.uuids.index(u) for u in got} <= allowed
        with pytest.raises(gpuctl.NoDeviceError) as e:
            gpuctl.select(len(allowed) + 1)
        assert str(e.value) == cli_error(m, "-n", str(len(allowed) + 1), rc=3)
        assert sorted(d.uuid for d in gpuctl.select(8, ignore_outer=True)) == sorted(m.uuids)
        monkeypatch.delenv(var)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-nonexistent")
    monkeypatch.setenv("NVIDIA_VISIBLE_DEVICES", "17")
    with pytest.raises(gpuctl.RequestError) as e:
        gpuctl.select(1)
    assert str(e.value) == cli_error(m, "-n", "1", rc=2)
    assert "NVIDIA_VISIBLE_DEVICES" in str(e.value)


def test_preview_leaves_out_foreign_processes_as_run_dry_run(sim):
    m = sim("dgx-a100")
    # a process of no lease on GPU 0 (started without gpuctl)
    load = subprocess.Popen([NVSIM_LOAD, "--mem", "1GiB"],
                            env=tool_env({"CUDA_VISIBLE_DEVICES": m.uuids[0]}),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert load.stdout.readline().startswith("ready")
        # select (CHOOSE) does not look at processes: GPU 0 is still chosen when asked for
        assert [d.uuid for d in gpuctl.select(1, only="0")] == [m.uuids[0]]
        assert cli_select(m, "-n", "1", "--only", "0") == [m.uuids[0]]
        # preview (run --dry-run, and what lease() takes) leaves it out
        with pytest.raises(gpuctl.NoDeviceError) as e:
            gpuctl.select(1, only="0", preview=True)
        r = m.gpuctl("run", "-n", "1", "--only", "0", "--dry-run", "--", "true")
        assert r.returncode == 3 and r.stderr.strip() == (
            "gpuctl: run: " + str(e.value).replace("only:", "--only:"))
        assert "in use without a lease: 0" in str(e.value)
        for n in (1, 7):
            preview = [d.uuid for d in gpuctl.select(n, preview=True)]
            r = m.gpuctl("run", "-n", str(n), "--dry-run", "--", "true")
            assert r.returncode == 0, r.stderr
            assert r.stdout.split()[0] == "CUDA_VISIBLE_DEVICES=" + ",".join(preview)
            assert m.uuids[0] not in preview
        assert [d.uuid for d in gpuctl.select(1, only="0", preview=True,
                                              ignore_foreign=True)] == [m.uuids[0]]
    finally:
        load.terminate()
        load.wait(30)


def test_devices_carry_their_state(sim):
    m = sim("dgx-a100")
    m.nvsim("set", "-i", "0", "memory.used=8GiB", "utilization.gpu=10")
    d = gpuctl.select(1, only="0")[0]
    assert isinstance(d, gpuctl.Device)
    assert (d.index, d.uuid, d.memory_used, d.utilization, d.health) == \
        (0, m.uuids[0], 8 * GIB, 10, "OK")
    assert d == gpuctl.devices()[0] and hash(d) == hash(m.uuids[0])
    assert gpuctl.select(0) == []
