"""lease(probe=True): a CUDA allocation test on each chosen GPU, in a child process that sees
only that GPU, under a timeout; a GPU whose simulated CUDA allocation fails or hangs
(`nvsim set -i N cuda.alloc=fail|hang`, sim/README.md) is left out and the next best taken.
`gpuctl health --probe` on the same machine is the independent judge of which GPUs fail."""
import json
import time

import pytest

import gpuctl

from conftest import cuda_set


def cli_probe_fails(m, timeout="2"):
    r = m.gpuctl("health", "--probe", "--probe-timeout", timeout, "--format", "json")
    assert r.returncode in (0, 20), r.stderr
    return {g["index"] for g in json.loads(r.stdout)["gpus"] if g["verdict"] == "FAIL"}


def test_probe_skips_a_failing_and_a_hung_gpu(sim):
    m = sim("dgx-a100")
    assert [d.uuid for d in gpuctl.select(2)] == m.uuids[:2]  # the best pair, unprobed
    m.nvsim("set", "-i", "0", "cuda.alloc=fail")
    m.nvsim("set", "-i", "1", "cuda.alloc=hang")
    assert cli_probe_fails(m) == {0, 1}
    # the next best pair: what gpuctl would lease without the failed GPUs
    want = cuda_set(m.gpuctl("run", "-n", "2", "--exclude", "0,1", "--dry-run", "--",
                             "true").stdout.split()[0])
    t0 = time.monotonic()
    with gpuctl.lease(2, probe=True, probe_timeout=2) as held:
        assert not {m.uuids[0], m.uuids[1]} & set(held.uuids)
        assert held.uuids == want
        assert sorted(m.held()) == sorted(held.uuids)
    assert time.monotonic() - t0 < 60  # a bound against hanging, not a speed
    # the hung probe was killed with its process group: no CUDA process is left on GPU 1
    devs = gpuctl.devices()
    assert devs[1].processes == () and devs[0].processes == ()
    assert m.held() == {}


def test_probe_passes_healthy_gpus(sim):
    m = sim("dgx-a100")
    with gpuctl.lease(3, probe=True) as held:
        with_probe = held.uuids
    with gpuctl.lease(3) as held:
        assert held.uuids == with_probe
    assert m.held() == {}


def test_probe_gives_up_with_the_reasons(sim):
    m = sim("dgx-a100")
    m.nvsim("set", "cuda.alloc=fail:OUT_OF_MEMORY")  # every GPU
    with pytest.raises(gpuctl.NoDeviceError) as e:
        gpuctl.lease(1, probe=True, probe_timeout=5)
    assert "CUDA probe failed" in str(e.value)
    assert "cuMemAlloc" in str(e.value) and "CUDA_ERROR_OUT_OF_MEMORY" in str(e.value)
    # four GPUs at a time: two rounds fail all eight, then nothing qualifies, with the reasons
    with pytest.raises(gpuctl.NoDeviceError) as e:
        gpuctl.lease(4, probe=True, probe_timeout=5)
    msg = str(e.value)
    assert msg.startswith("need 4 GPUs, 0 qualify")
    assert all(u in msg for u in m.uuids)
    assert m.held() == {}
