"""The Python the documentation shows runs as written: every ```python block of README.md,
python/README.md and docs/library.md, and the two examples that need a framework
(examples/python/pytorch_device.py, tensorflow_device.py), on a simulated DGX A100.

Neither PyTorch nor TensorFlow is in Debian 12, so frameworks/ stands in for them (its
README.md): each call that touches a GPU logs the UUIDs the CUDA driver (the simulated
libcuda.so.1) showed the process. Expected devices come from the command line: `gpuctl select`
with the same request. A block added to the docs fails test_every_block_has_an_expectation until
this file says what it must do."""
import json
import os
import re
import subprocess
import sys

import pytest

from conftest import EXAMPLES, SRC, cuda_set, scenario

FRAMEWORKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "frameworks")
DOCS = ("README.md", "python/README.md", "docs/library.md")


def blocks():
    """(file, line, code) of every ```python block of DOCS, in order."""
    out = []
    for rel in DOCS:
        with open(os.path.join(SRC, rel)) as f:
            text = f.read()
        for m in re.finditer(r"^```python\n(.*?)^```$", text, re.S | re.M):
            out.append((rel, text.count("\n", 0, m.start()) + 1, m.group(1)))
    return out


# Per block, in order: what it does (which framework calls it makes, checked below) and the
# `gpuctl select` arguments of its request.
EXPECT = {
    "README.md": [
        ("torch", ["-n", "1", "--min-free-mem", "10GiB"]),
        ("tensorflow", ["-n", "1", "--min-free-mem", "8GiB", "--max-util", "20"]),
        ("each", ["-n", "4", "--min-free-mem", "20GiB"]),
        ("failover", ["-n", "2", "--exclude", "0"]),  # GPU 0 fails its CUDA probe below
        ("environment", ["-n", "1", "--min-free-mem", "4GiB"]),
    ],
    "python/README.md": [("environment", ["-n", "1", "--min-free-mem", "10GiB"]),
                         ("workload", ["-n", "1"]),
                         ("restored", ["-n", "1"])],
    "docs/library.md": [("restored", ["-n", "2", "--min-free-mem", "20GiB"])],
}

# The block's environment after it ran, printed by a line the test appends (only to blocks that
# start no other process, which would run it too).
EPILOGUE = "\nimport os as _os\nprint('CVD=' + _os.environ.get('CUDA_VISIBLE_DEVICES', ''))\n"

# A block whose lease ended (a with block, gpuctl.release()): its `lease` had the devices, and
# the environment is as it was before apply() (CUDA_VISIBLE_DEVICES unset here).
RESTORED = ("\nimport os as _os\nprint('LEASE=' + lease.cuda_visible_devices)\n"
            "print('CVD=' + _os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>'))\n")

# train.py of the failover block: the job it starts, which reports what CUDA showed it.
TRAIN = "import _cuda\n_cuda.log('train.py')\n"


def framework_run(tmp_path, argv):
    """Runs argv (a Python program) in tmp_path with the framework doubles importable; returns
    (the CompletedProcess, the log's entries)."""
    log = tmp_path / "framework.jsonl"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (FRAMEWORKS, env.get("PYTHONPATH")) if p)
    env["FRAMEWORK_LOG"] = str(log)
    r = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    entries = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return r, entries


def chosen(m, args):
    r = m.gpuctl("select", *args)
    assert r.returncode == 0, r.stderr
    return cuda_set(r.stdout)


def test_every_block_has_an_expectation():
    found = {}
    for rel, _, _ in blocks():
        found[rel] = found.get(rel, 0) + 1
    assert found == {rel: len(v) for rel, v in EXPECT.items()}


@pytest.mark.parametrize("rel,line,code", blocks(), ids=["%s:%d" % b[:2] for b in blocks()])
def test_block_runs_as_written(sim, tmp_path, rel, line, code):
    m = sim("dgx-a100")
    nth = [b[1] for b in blocks() if b[0] == rel].index(line)
    kind, args = EXPECT[rel][nth]
    if kind == "failover":
        m.nvsim("set", "-i", "0", "cuda.alloc=fail")
    want = chosen(m, args)
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "block.py").write_text(code + {"environment": EPILOGUE,
                                                "restored": RESTORED}.get(kind, ""))
    r, log = framework_run(tmp_path, [sys.executable, "block.py"])
    where = "%s:%d" % (rel, line)
    assert r.returncode == 0, "%s: %s" % (where, r.stderr)
    assert r.stderr == "", where
    if kind == "torch":  # cuda:0 is the leased GPU, and the only one
        assert [(e["call"], e["ordinal"], e["cuda"]) for e in log] == \
            [("torch.randn", 0, want)], where
    elif kind == "tensorflow":
        assert [(e["call"], e["cuda"]) for e in log] == \
            [("tf.config.list_physical_devices", want)], where
    elif kind == "each":  # one rank per GPU, each seeing its own as cuda:0, as torchrun sets
        ranks = sorted(log, key=lambda e: e["rank"])
        assert [(e["call"], e["backend"], e["rank"], e["local_rank"], e["world_size"], e["cuda"])
                for e in ranks] == \
            [("torch.distributed.init_process_group", "nccl", i, i, 4, [u])
             for i, u in enumerate(want)], where
        assert len({e["pid"] for e in log}) == 4
        # they met at one rendezvous gpuctl.each gave them (the block sets none)
        assert len({e["master"] for e in log}) == 1 and log[0]["master"].startswith("127.0.0.1:")
    elif kind == "failover":  # the job saw the two GPUs that passed the probe, GPU 0 not
        assert [(e["call"], e["cuda"]) for e in log] == [("train.py", want)], where
        assert m.uuids[0] not in want
    elif kind == "workload":  # its own process's kind and label; no GPU process to list
        assert log == [], where
        [line] = r.stdout.splitlines()
        assert line.split()[0] in ("unknown", "bare", "slurm", "pod", "container", "unit",
                                   "session"), where
    elif kind == "restored":
        assert log == [], where
        assert r.stdout.splitlines()[-2:] == ["LEASE=" + ",".join(want), "CVD=<unset>"], where
    else:
        assert log == [], where
        assert r.stdout.splitlines() == ["CVD=" + ",".join(want)], where
    assert m.held() == {}, where  # every lease ended with the script


def described(m, uuid):
    i = m.uuids.index(uuid)
    return "GPU %d (%s, %s)" % (i, scenario(m.name)[i]["name"], uuid)


def test_pytorch_example(sim, tmp_path):
    m = sim("dgx-a100")
    m.hold("-n", "1", "--only", "0")  # someone else's: the example must go around it
    want = chosen(m, ["-n", "2", "--min-free-mem", "10GiB"])
    r, log = framework_run(tmp_path,
                           [sys.executable, os.path.join(EXAMPLES, "pytorch_device.py"), "2"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["cuda:%d is %s" % (i, described(m, u))
                                     for i, u in enumerate(want)] + ["checksum 0.0"]
    assert [(e["call"], e["ordinal"], e["cuda"]) for e in log] == \
        [("torch.cuda.device_count", None, want), ("torch.randn", 0, want)]
    assert m.uuids[0] not in want


def test_tensorflow_example(sim, tmp_path):
    m = sim("dgx-a100")
    m.nvsim("set", "-i", "0,1", "utilization.gpu=90")  # above the example's max_util=20
    want = chosen(m, ["-n", "1", "--min-free-mem", "8GiB", "--max-util", "20"])
    r, log = framework_run(tmp_path,
                           [sys.executable, os.path.join(EXAMPLES, "tensorflow_device.py")])
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["/GPU:0 is " + described(m, want[0]), "checksum 0.0"]
    assert [(e["call"], e["ordinal"], e["cuda"]) for e in log] == \
        [("tf.config.list_physical_devices", None, want), ("tf.device", 0, want)]
    assert want[0] not in m.uuids[:2]


def test_the_doubles_fail_where_cuda_would(sim, tmp_path):
    # The doubles are not lenient: a framework that touched CUDA before gpuctl.use() makes it
    # refuse (python/gpuctl/_lease.py), and an ordinal CUDA does not show fails.
    m = sim("dgx-a100")
    code = ("import torch, gpuctl\ntorch.cuda.device_count()\n"
            "try:\n    gpuctl.use(1)\nexcept RuntimeError as e:\n    print('refused')\n"
            "torch.randn(2, 2, device='cuda:8')\n")
    (tmp_path / "early.py").write_text(code)
    r, log = framework_run(tmp_path, [sys.executable, "early.py"])
    assert r.stdout == "refused\n"
    assert r.returncode == 1 and "invalid device ordinal 8 (8 visible)" in r.stderr
    assert [e["cuda"] for e in log] == [m.uuids]
