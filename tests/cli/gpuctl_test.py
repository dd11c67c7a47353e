"""Shared helpers for the end-to-end tests: run the real binaries against simulated machines.

Paths come from the environment ctest sets (GPUCTL_BUILD_DIR, GPUCTL_SOURCE_DIR); run one
module by hand with:
    GPUCTL_BUILD_DIR=build GPUCTL_SOURCE_DIR=. python3 -m unittest -v tests/cli/test_x.py
(from the source root, with tests/cli on PYTHONPATH) or simply `ctest -R cli/test_x`.
"""
import atexit
import csv
import io
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

SRC = os.path.abspath(os.environ.get("GPUCTL_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", "..")))
BUILD = os.path.abspath(os.environ.get("GPUCTL_BUILD_DIR", os.path.join(SRC, "build")))
GPUCTL = os.path.join(BUILD, "bin", "gpuctl")
NVSIM = os.path.join(BUILD, "bin", "nvsim")
SIMLIB = os.path.join(BUILD, "sim", "libnvidia-ml.so.1")
SCENARIOS = os.path.join(SRC, "sim", "scenarios")
EXPECTED = os.path.join(SRC, "tests", "cli", "expected")

# Exit codes documented in docs/gpuctl.1 ("EXIT STATUS").
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_NOMATCH = 3
EXIT_NODRIVER = 4
EXIT_NVML_HUNG = 7  # an NVML call did not return within GPUCTL_NVML_TIMEOUT

TIMEOUT = 60

# Programs compiled against the built library (the README's example, the export checks) use the
# build's compiler, and its sanitizer flags when the library has them (tests/cli/CMakeLists.txt).
CC = os.environ.get("GPUCTL_CC") or "cc"
NM = os.environ.get("GPUCTL_NM") or "nm"
SANITIZE_FLAGS = (["-fsanitize=address,undefined", "-fno-sanitize-recover=all"]
                  if os.environ.get("GPUCTL_SANITIZE") == "1" else [])

# gpuctl run (and select --hold) take leases in $GPUCTL_LEASE_DIR, else /run/gpuctl. A test must
# never touch the machine's real lease directory: every test process gets a private one
# (personal: owned by us, mode 0700), created once at import and removed at exit, and exports it
# in os.environ so that tests that build their own environment from os.environ get it too. An
# inherited GPUCTL_LEASE_DIR is overridden on purpose; a caller's env= may still name another.
LEASE_DIR = tempfile.mkdtemp(prefix="gpuctl-test-leases-")
atexit.register(shutil.rmtree, LEASE_DIR, True)
os.environ["GPUCTL_LEASE_DIR"] = LEASE_DIR
# Likewise `gpuctl health`'s state file (by default beside the lease directory, here in /tmp
# where other test processes would share it): a private path per test process, which tests of
# health state override per test.
HEALTH_STATE = os.path.join(LEASE_DIR + "-health", "health.state")
os.makedirs(os.path.dirname(HEALTH_STATE), mode=0o700)
atexit.register(shutil.rmtree, os.path.dirname(HEALTH_STATE), True)
os.environ["GPUCTL_HEALTH_STATE"] = HEALTH_STATE

# Nor the machine's configuration (/etc/gpuctl/gpuctl.conf, docs/config.md): every test process
# names an empty file of its own in GPUCTL_CONFIG (readable by the throwaway users of the root-only
# tests); a caller's env= may name another.
CONFIG_DIR = tempfile.mkdtemp(prefix="gpuctl-test-config-")
atexit.register(shutil.rmtree, CONFIG_DIR, True)
os.chmod(CONFIG_DIR, 0o755)
EMPTY_CONFIG = os.path.join(CONFIG_DIR, "empty.conf")
with open(EMPTY_CONFIG, "w"):
    pass
os.chmod(EMPTY_CONFIG, 0o644)
os.environ["GPUCTL_CONFIG"] = EMPTY_CONFIG
# Nor the machine's usage ledger (/var/lib/gpuctl/ledger.db, docs/ledger.md): `gpuctl report`
# reads $GPUCTL_LEDGER, here a path where there is none; tests of the ledger name their own.
os.environ["GPUCTL_LEDGER"] = os.path.join(CONFIG_DIR, "no-ledger.db")
# No test sees the machine's own /run/gpuctl as the system lease directory (docs/leases.md
# "Personal lease directories"): a test's leases are its own.
os.environ["GPUCTL_SYSTEM_LEASE_DIR"] = os.path.join(CONFIG_DIR, "no-system-lease-dir")
# Nor the host driver's /proc/driver/nvidia (where a lost GPU's bus id is read): `nvsim exec`
# points GPUCTL_NVIDIA_PROC at the simulated machine's; anything else sees none.
os.environ["GPUCTL_NVIDIA_PROC"] = os.path.join(CONFIG_DIR, "no-nvidia-proc")
# Likewise the MIG capability table and /proc/devices the device-node map reads (`nvsim exec`
# names the simulated machine's).
os.environ["GPUCTL_NVIDIA_CAPS_PROC"] = os.path.join(CONFIG_DIR, "no-nvidia-caps-proc")
os.environ["GPUCTL_PROC_DEVICES"] = os.path.join(CONFIG_DIR, "no-proc-devices")
# Nor the user's facts cache ($XDG_RUNTIME_DIR/gpuctl-facts, docs/ARCHITECTURE.md): every NVML
# fact a test's fault touches is read of its own call. test_facts_cache.py, test_nvml_calls.py
# and the benchmarks (bench/bench.py, clients_bench.py, nvml_calls.py) name their own file.
os.environ["GPUCTL_FACTS_CACHE"] = "off"

# Slurm's GPU numbers map to devices through the node's gres.conf (docs/slurm.md), found beside
# $SLURM_CONF: every test process gets a private Slurm configuration directory whose gres.conf
# says AutoDetect=nvml, under which Slurm numbers GPUs as NVML does (readable by the throwaway
# users too). Tests of the gres.conf mapping point SLURM_CONF at their own.
SLURM_DIR = tempfile.mkdtemp(prefix="gpuctl-test-slurm-")
atexit.register(shutil.rmtree, SLURM_DIR, True)
os.chmod(SLURM_DIR, 0o755)
with open(os.path.join(SLURM_DIR, "gres.conf"), "w") as f:
    f.write("AutoDetect=nvml\n")
os.chmod(os.path.join(SLURM_DIR, "gres.conf"), 0o644)
os.environ["SLURM_CONF"] = os.path.join(SLURM_DIR, "slurm.conf")


def wait_until(pred, what, timeout=15, step=0.02):
    """pred()'s first true value, asked every step seconds; AssertionError naming what after
    timeout seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    raise AssertionError("timed out waiting for %s" % what)


class Result:
    def __init__(self, proc):
        self.rc = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr

    def json(self):
        return json.loads(self.out)

    def csv(self):
        return list(csv.reader(io.StringIO(self.out), skipinitialspace=True))

    def __repr__(self):
        return f"rc={self.rc}\nstdout:\n{self.out}\nstderr:\n{self.err}"


def run(argv, env=None, input=None, timeout=TIMEOUT):
    e = dict(os.environ)
    # A test never reaches a real driver by accident, and never inherits an outer allocation.
    for k in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES", "SLURM_STEP_GPUS",
              "SLURM_JOB_GPUS"):
        e.pop(k, None)
    e["GPUCTL_LEASE_DIR"] = LEASE_DIR
    e["GPUCTL_CONFIG"] = EMPTY_CONFIG
    if env:
        e.update(env)
    p = subprocess.run(argv, env=e, input=input, capture_output=True, text=True, timeout=timeout)
    return Result(p)


# The Python package (python/gpuctl) and the library of this build, for tests that run it. In the
# sanitizer build Debian's python3 must preload the ASan and UBSan runtimes to load the
# instrumented library (tests/cli/CMakeLists.txt), and CPython's objects alive at exit are no leak.
PYTHON = "/usr/bin/python3"
PYDIR = os.path.join(SRC, "python")
LIBGPUCTL = os.path.join(BUILD, "lib", "libgpuctl.so.0")


def python_env(env=None):
    """The variables a python3 running the package needs, beyond the test's: env, plus the
    sanitizer runtimes when the build has them."""
    e = {"PYTHONDONTWRITEBYTECODE": "1"}
    if os.environ.get("GPUCTL_PYTHON_PRELOAD"):
        e["LD_PRELOAD"] = os.environ["GPUCTL_PYTHON_PRELOAD"]
        e["ASAN_OPTIONS"] = "detect_leaks=0:abort_on_error=1"
    if env:
        e.update(env)
    return e


def gpuctl(*args, env=None, **kw):
    """Runs gpuctl directly (no simulator unless env says so)."""
    return run([GPUCTL, *args], env=env, **kw)


def sim(scenario, *args, nvsim_args=(), env=None, **kw):
    """Runs `nvsim exec SCENARIO -- gpuctl ARGS...` on a fresh simulated machine."""
    return run([NVSIM, "exec", *nvsim_args, scenario, "--", GPUCTL, *args], env=env, **kw)


def sim_sh(scenario, script, nvsim_args=(), env=None, **kw):
    """Runs a shell script on one simulated machine, so nvsim can change it between gpuctl calls.
    $GPUCTL and $NVSIM name the binaries."""
    e = {"GPUCTL": GPUCTL, "NVSIM": NVSIM}
    if env:
        e.update(env)
    return run([NVSIM, "exec", *nvsim_args, scenario, "--", "sh", "-ec", script], env=e, **kw)


# Shell: `settled PID` waits until PID, a `sleep` just started in the background, has exec'd
# and sleeps, so that its RSS and CPU time no longer change while a test compares what gpuctl
# shows with /proc (on a loaded machine it may still be in the dynamic loader).
SETTLED_SH = ('settled() {\n'
              '  i=0\n'
              '  until [ "$(cat /proc/$1/comm 2>/dev/null)" = sleep ] &&'
              ' grep -q "^State:[[:space:]]*S" /proc/$1/status; do\n'
              '    i=$((i + 1)); [ $i -lt 3000 ] || return 9; sleep 0.01\n'
              '  done\n'
              '}\n')


def wait_settled(pid, timeout=30.0):
    """SETTLED_SH's wait, from Python."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open("/proc/%d/comm" % pid) as f:
                comm = f.read().strip()
            with open("/proc/%d/status" % pid) as f:
                state = next(l for l in f if l.startswith("State:")).split()[1]
        except (OSError, StopIteration):
            comm, state = "", ""
        if comm == "sleep" and state == "S":
            return
        if time.monotonic() > deadline:
            raise AssertionError("process %d never settled into sleep" % pid)
        time.sleep(0.01)


def _descendants(pid):
    """pid and every process below it, parents first (from /proc/*/stat)."""
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop(0)
        out.append(p)
        todo.extend(sorted(children.get(p, [])))
    return out


def _proc_facts(pid):
    """What a hung process is doing: its command, state, signal masks, tracer, kernel wait
    channel and system call, for a test's failure message."""
    facts = ["pid %d" % pid]
    for name, keep in (("cmdline", None), ("status", ("State", "SigQ", "SigPnd", "ShdPnd",
                                                      "SigBlk", "SigIgn", "SigCgt",
                                                      "TracerPid", "Threads")),
                       ("wchan", None), ("syscall", None), ("stack", None)):
        try:
            with open("/proc/%d/%s" % (pid, name), "rb") as f:
                text = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError as e:
            text = "(%s)" % e.strerror
        if keep:
            text = " ".join(l.replace("\t", " ") for l in text.splitlines()
                            if l.split(":")[0] in keep)
        facts.append("  %s: %s" % (name, text.replace("\n", " | ")))
    return "\n".join(facts)


def communicate_or_explain(p, timeout, files=()):
    """p.communicate(timeout), but a process still running after timeout seconds is a test
    failure that says what it and everything it started were doing (and what the named files
    held) before it is killed, instead of a bare TimeoutExpired."""
    try:
        return p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        pids = _descendants(p.pid)
        report = ["%s still running after %s s" % (p.args, timeout)]
        report += [_proc_facts(q) for q in pids]
        for path in files:
            try:
                with open(path) as f:
                    report.append("%s: %r" % (path, f.read()))
            except OSError as e:
                report.append("%s: (%s)" % (path, e.strerror))
        for q in reversed(pids):
            try:
                os.kill(q, 9)
            except OSError:
                pass
        out, err = p.communicate()
        report.append("stdout: %r\nstderr: %r" % (out, err))
        raise AssertionError("\n".join(report)) from None


def readme_example():
    """The C program of README.md's "Using the library": the fenced block after the marker
    <!-- test: readme-example -->, exactly as shown."""
    with open(os.path.join(SRC, "README.md")) as f:
        text = f.read()
    marker = text.index("<!-- test: readme-example -->")
    start = text.index("```c\n", marker) + len("```c\n")
    return text[start:text.index("```\n", start)]


def scenario_names():
    return sorted(f[:-5] for f in os.listdir(SCENARIOS) if f.endswith(".json"))


def scenario_gpus(name):
    """The scenario's GPUs with its defaults applied, as the simulator applies them
    (sim/SCENARIO.md: a GPU's own keys override, objects merge key by key)."""
    with open(os.path.join(SCENARIOS, name + ".json")) as f:
        return scenario_gpus_of(json.load(f))


def scenario_gpus_of(doc):
    """scenario_gpus() of a scenario document already read."""
    out = []
    for g in doc["gpus"]:
        m = dict(doc.get("defaults", {}))
        for k, v in g.items():
            m[k] = {**m[k], **v} if isinstance(v, dict) and isinstance(m.get(k), dict) else v
        out.append(m)
    return out


def load_expected(name):
    with open(os.path.join(EXPECTED, name)) as f:
        return json.load(f)


class GpuctlTestCase(unittest.TestCase):
    def kill_on_cleanup(self):
        """A list the test appends the pids it starts to; each is sent SIGKILL at cleanup (one
        already gone is passed over)."""
        pids = []

        def kill_all():
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
        self.addCleanup(kill_all)
        return pids

    def assertOk(self, r):
        self.assertEqual(r.rc, 0, r)

    def assertOneLineError(self, r, rc, *needles):
        """A failure prints exactly one line on stderr, 'gpuctl: ...', naming the input."""
        self.assertEqual(r.rc, rc, r)
        lines = [l for l in r.err.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, r)
        self.assertTrue(lines[0].startswith(("gpuctl: ", "nvsim: ")), r)
        for n in needles:
            self.assertIn(n, lines[0], r)
