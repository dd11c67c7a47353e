"""examples/python: every script compiles, and those that need no framework run on a simulated
machine and do what their docstring says; what CUDA saw comes from the simulated driver
(the UUIDs it reports, nvsim-load's ledger), the choice from the command line. The two that
need PyTorch or TensorFlow run in test_documented_python.py, with its framework doubles."""
import ast
import os
import py_compile
import re
import subprocess
import sys

import pytest

from conftest import EXAMPLES, NVSIM_LOAD, SRC, cuda_set

SCRIPTS = sorted(f for f in os.listdir(EXAMPLES) if f.endswith(".py"))


def example(m, name, *args, env=None):
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.run([sys.executable, os.path.join(EXAMPLES, name), *args], env=e,
                          capture_output=True, text=True, timeout=120)


def test_there_are_the_five_cases():
    assert SCRIPTS == ["failover_probe.py", "one_process_per_gpu.py", "pytorch_device.py",
                       "safe_init.py", "tensorflow_device.py"]


@pytest.mark.parametrize("name", SCRIPTS)
def test_compiles(name, tmp_path):
    py_compile.compile(os.path.join(EXAMPLES, name), cfile=str(tmp_path / "x.pyc"),
                       doraise=True)


def test_importing_gpuctl_imports_no_framework(sim):
    m = sim("dgx-a100")
    r = m.python("import sys, gpuctl\ngpuctl.select(1)\n"
                 "print(sorted(k for k in ('torch', 'tensorflow', 'jax') if k in sys.modules))")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_one_process_per_gpu(sim):
    m = sim("dgx-a100")
    want = cuda_set(m.gpuctl("select", "-n", "3").stdout)
    r = example(m, "one_process_per_gpu.py", "3")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["rank %d/3: CUDA sees 1 device(s): %s" % (i, u)
                                     for i, u in enumerate(want)]
    assert m.held() == {}


def each_variables_of_the_man_page():
    """The variables `gpuctl run --each` gives each rank, as docs/gpuctl.1 lists them (the
    `--each` entry under `.SS run`): what gpuctl.each() sets too (its docstring says so)."""
    with open(os.path.join(SRC, "docs", "gpuctl.1")) as f:
        man = f.read()
    entry = man.split(".SS run", 1)[1].split(".B \\-\\-each\n", 1)[1].split(".TP", 1)[0]
    return set(re.findall(r'^\.BI?R? ([A-Z][A-Z_]+)(?:=| |$)', entry, re.M))


def test_one_process_per_gpu_docstring_is_true():
    # issue 25: the docstring said MASTER_ADDR and MASTER_PORT had to be set in the parent's
    # environment, though each() sets them, and left out LOCAL_WORLD_SIZE
    with open(os.path.join(EXAMPLES, "one_process_per_gpu.py")) as f:
        doc = ast.get_docstring(ast.parse(f.read()))
    names = each_variables_of_the_man_page()
    assert {"CUDA_VISIBLE_DEVICES", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"} <= names, names
    words = set(re.findall(r"[A-Z][A-Z_]+", doc))
    assert names - words == set(), "the docstring leaves out what each() sets"
    flat = " ".join(doc.split())
    assert "in the parent's environment" not in flat
    assert "python3 examples/python/one_process_per_gpu.py [N]" in flat


def test_failover_probe(sim):
    m = sim("dgx-a100")
    m.nvsim("set", "-i", "0", "cuda.alloc=fail")
    want = cuda_set(m.gpuctl("run", "-n", "2", "--exclude", "0", "--dry-run", "--",
                             "true").stdout.split()[0])
    r = example(m, "failover_probe.py", "2", "--", NVSIM_LOAD, "--seconds", "0", "--mem", "1MiB")
    assert r.returncode == 0, r.stderr
    ran = m.ledger()[-1]
    assert [d["uuid"] for d in ran["devices"]] == want
    assert m.uuids[0] not in want
    r = example(m, "failover_probe.py", "9", "--", "true")
    assert r.returncode == 1 and "no working GPUs: need 9 GPUs" in r.stderr


def test_safe_init(sim):
    m = sim("dgx-a100")
    r = example(m, "safe_init.py")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "CUDA_VISIBLE_DEVICES=" + cuda_set(m.gpuctl("select", "-n", "1").stdout)[0]
    assert lines[1] == "GPU 0: NVIDIA A100-SXM4-80GB, 80 GiB free, health OK"
    # without a driver: one line, the library's
    r = example(m, "safe_init.py", env={"GPUCTL_NVML_LIBRARY": "/nonexistent"})
    assert r.returncode == 1
    assert r.stderr.strip() == "safe_init: no NVIDIA driver: /nonexistent not found " \
        "(set by GPUCTL_NVML_LIBRARY)"
