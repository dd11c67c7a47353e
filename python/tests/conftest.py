"""Fixtures of the gpuctl package's tests (pytest): paths from the environment ctest sets, one
fresh simulated machine per test, and helpers that run the real `gpuctl` and `nvsim`.

Run one module by hand (from the source root, after a build):
    GPUCTL_BUILD_DIR=build GPUCTL_LIBRARY=build/lib/libgpuctl.so.0 PYTHONPATH=python \\
        /usr/bin/python3 -m pytest -q python/tests/test_select.py
or simply `ctest --test-dir build -R python/test_select`.

Hermetic, as tests/cli/gpuctl_test.py: every test gets its own simulated machine (a state
directory made by `nvsim exec --state-dir`), an empty configuration file, a lease directory
and a health state file of its own, and no inherited CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_
DEVICES or Slurm variables. The package reads the environment at every call, but keeps its NVML
session per thread (python/gpuctl/_lib.py), as a real driver would be one machine for the whole
process: a new simulated machine per test means a new session, so each test starts with
gpuctl._lib.reset(); pointing os.environ at the machine is then all it takes, for this process
and for every child it starts.

Expected values come from the scenario files (sim/scenarios/*.json), nvsim-load's ledger (what
the simulated CUDA driver really opened) and the command line's own output for parity, never
from the package under test. No test is skipped: a skip fails the run (hook below).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

SRC = os.path.abspath(os.environ.get("GPUCTL_SOURCE_DIR",
                                     os.path.join(os.path.dirname(__file__), "..", "..")))
BUILD = os.path.abspath(os.environ.get("GPUCTL_BUILD_DIR", os.path.join(SRC, "build")))
GPUCTL = os.path.join(BUILD, "bin", "gpuctl")
NVSIM = os.path.join(BUILD, "bin", "nvsim")
NVSIM_LOAD = os.path.join(BUILD, "bin", "nvsim-load")
SIMDIR = os.path.join(BUILD, "sim")
SIMLIB = os.path.join(SIMDIR, "libnvidia-ml.so.1")
SCENARIOS = os.path.join(SRC, "sim", "scenarios")
EXAMPLES = os.path.join(SRC, "examples", "python")
PYDIR = os.path.join(SRC, "python")
SANITIZE = os.environ.get("GPUCTL_SANITIZE") == "1"
TIMEOUT = 60

OUTER = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES", "SLURM_JOB_GPUS",
         "SLURM_STEP_GPUS")

# The scenario reader the end-to-end tests use (sim/SCENARIO.md's defaults applied). Importing
# gpuctl_test also points GPUCTL_LEASE_DIR, GPUCTL_CONFIG and GPUCTL_HEALTH_STATE at private
# places for this process; every test then points them at its own machine's.
sys.path.insert(0, os.path.join(SRC, "tests", "cli"))
from gpuctl_test import scenario_gpus as scenario  # noqa: E402

# The package and the library of this build, for this process and every Python it starts.
os.environ.setdefault("GPUCTL_LIBRARY", os.path.join(BUILD, "lib", "libgpuctl.so.0"))
if PYDIR not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (PYDIR, os.environ.get("PYTHONPATH")) if p)
if PYDIR not in sys.path:
    sys.path.insert(0, PYDIR)
from gpuctl import _lib  # noqa: E402


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A skipped test counts as failed: nothing passes by not running."""
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped and not hasattr(rep, "wasxfail"):
        rep.outcome = "failed"
        rep.longrepr = "skipped, which this suite counts as a failure: %r" % (rep.longrepr,)


def uuids(name):
    return [g["uuid"] for g in scenario(name)]


def tool_env(env=None):
    """The environment for the project's C programs and other tools: the test's, without the
    ASan runtime preloaded for Python (the programs of the sanitizer build carry their own) and
    with leak checking on again for them."""
    e = dict(os.environ)
    e.pop("LD_PRELOAD", None)
    if SANITIZE:
        e["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=1"
    if env:
        e.update(env)
    return e


def cuda_set(out):
    """The UUIDs of a `CUDA_VISIBLE_DEVICES=...` line."""
    line = out.strip()
    assert line.startswith("CUDA_VISIBLE_DEVICES="), out
    v = line.split("=", 1)[1]
    return v.split(",") if v else []


class Machine:
    """A simulated machine for one test, and the variables that point gpuctl at it."""

    def __init__(self, tmp, name, monkeypatch):
        self.name = name
        self.tmp = tmp
        self.state = os.path.join(tmp, "state")
        self.leases = os.path.join(tmp, "leases")
        self.config = os.path.join(tmp, "empty.conf")
        self.ledger_path = os.path.join(self.state, "ledger.jsonl")
        with open(self.config, "w"):
            pass
        self.uuids = uuids(name)
        r = subprocess.run([NVSIM, "exec", "--state-dir", self.state, name, "--", "true"],
                           env=tool_env(), capture_output=True, text=True, timeout=TIMEOUT)
        assert r.returncode == 0, r.stderr
        old = os.environ.get("LD_LIBRARY_PATH")
        self.env = {
            "NVSIM_STATE_DIR": self.state,
            "GPUCTL_NVML_LIBRARY": SIMLIB,
            "GPUCTL_KMSG": os.path.join(self.state, "kmsg"),
            # the simulated driver's /proc/driver/nvidia (a lost GPU's bus id), never the host's
            "GPUCTL_NVIDIA_PROC": os.path.join(self.state, "root", "proc", "driver", "nvidia"),
            "LD_LIBRARY_PATH": SIMDIR + (":" + old if old else ""),
            "GPUCTL_LEASE_DIR": self.leases,
            "GPUCTL_CONFIG": self.config,
            "GPUCTL_HEALTH_STATE": os.path.join(tmp, "health.state"),
        }
        for k in OUTER:
            monkeypatch.delenv(k, raising=False)
        for k, v in self.env.items():
            monkeypatch.setenv(k, v)
        _lib.reset()  # the simulated driver reads its machine when NVML initialises

    def nvsim(self, *args):
        r = subprocess.run([NVSIM, *args], env=tool_env(), capture_output=True, text=True,
                           timeout=TIMEOUT)
        assert r.returncode == 0, r.stderr
        return r.stdout

    def gpuctl(self, *args, env=None, timeout=TIMEOUT):
        """Runs the command line; a CompletedProcess (text)."""
        return subprocess.run([GPUCTL, *args], env=tool_env(env), capture_output=True,
                              text=True, timeout=timeout)

    def python(self, code, env=None, timeout=TIMEOUT):
        """Runs code in a fresh Debian python3 with the package (and, in the sanitizer build,
        the ASan runtime) as this test has them."""
        e = dict(os.environ)
        if env:
            e.update(env)
        return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True,
                              text=True, timeout=timeout)

    def popen_python(self, code, env=None, **kw):
        e = dict(os.environ)
        if env:
            e.update(env)
        return subprocess.Popen([sys.executable, "-c", code], env=e, text=True, **kw)

    def ps(self):
        """`gpuctl ps --all --format json`: the lease states as the command line sees them."""
        r = self.gpuctl("ps", "--all", "--format", "json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def held(self):
        """{uuid: holder pids} of the devices leased (exclusively or shared) now, as `gpuctl
        ps` reads them from the kernel's locks and the owner records."""
        out = {}
        for d in self.ps()["devices"]:
            if d["state"] in ("leased", "shared"):
                owners = [d["owner"]] if d.get("owner") else []
                owners += d.get("shares") or []
                out[d["uuid"]] = sorted(o["pid"] for o in owners if o.get("pid"))
        return out

    def waiting(self):
        r = self.gpuctl("ps", "--waiting", "--format", "json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["waiting"]

    def ledger(self):
        try:
            with open(self.ledger_path) as f:
                return [json.loads(line) for line in f if line.startswith("{")]
        except FileNotFoundError:
            return []

    def hold(self, *args, seconds=120):
        """`gpuctl select --hold` of the given request; the UUIDs it holds."""
        r = self.gpuctl("select", *args, "--hold", str(seconds))
        assert r.returncode == 0, r.stderr
        self.holds = True
        return cuda_set(r.stdout)

    def release_all(self):
        self.gpuctl("release", "--all")


@pytest.fixture
def sim(monkeypatch):
    """sim(NAME) -> a fresh Machine of scenario NAME, the environment pointed at it."""
    made = []

    def make(name="dgx-a100"):
        tmp = tempfile.mkdtemp(prefix="gpuctl-py-")
        m = Machine(tmp, name, monkeypatch)
        made.append(m)
        return m

    yield make
    for m in made:
        m.release_all()
        shutil.rmtree(m.tmp, ignore_errors=True)


def wait_until(pred, timeout=30.0, what="condition"):
    """Polls pred() until it is true (not a timing assertion: a bound against hanging)."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.02)
