"""One allocation call, three clients: for a table of conditions on a simulated DGX A100, the
command line (`gpuctl select -n N` for CHOOSE, `gpuctl run --dry-run` for PREVIEW, `gpuctl
run` for LEASE), a C program calling gpuctl_alloc() (build/tests/alloc-client, tests/cli/
alloc-client.c) and the Python package (python/gpuctl: select(), select(preview=True),
lease()) choose the same devices in the same order, or fail the same way: the same class
(exit 2 / -EINVAL / RequestError, 3 / -ENOSPC / NoDeviceError, 4 / -ENODEV / DriverError, 1 /
other -errno / gpuctl.Error) and the same one-line message.

Each condition also asserts what it must do from an independent source: the scenario's UUIDs
(sim/scenarios/dgx-a100.json) and the condition itself (the GPU given a fence-class XID is never
chosen, the leased one neither, the outer allocation bounds the choice, ...), never the output
of one of the clients.

The pool condition needs a user who is not in the pool: as root (who may draw from every
pool), a throwaway user made with useradd runs all three clients through setpriv; otherwise
the pool is restricted to a user name that does not exist."""
import json
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import textwrap
import unittest

from gpuctl_test import (BUILD, GPUCTL, LIBGPUCTL, NVSIM, PYDIR, PYTHON, SCENARIOS, SIMLIB,
                         GpuctlTestCase, python_env)

CLIENT = os.path.join(BUILD, "tests", "alloc-client")
LOAD = os.path.join(BUILD, "bin", "nvsim-load")
GIB = 1 << 30

with open(os.path.join(SCENARIOS, "dgx-a100.json")) as f:
    UUIDS = [g["uuid"] for g in json.load(f)["gpus"]]

PY_CLIENT = textwrap.dedent("""
    import errno, json, sys
    import gpuctl
    mode, n, kw = json.loads(sys.argv[1])
    try:
        if mode == "lease":
            with gpuctl.lease(n, **kw) as held:
                print(held.cuda_visible_devices)
        else:
            print(",".join(d.uuid for d in gpuctl.select(n, preview=mode == "preview", **kw)))
    except gpuctl.Error as e:
        print("ERROR", type(e).__name__, errno.errorcode.get(e.errno, e.errno), e)
""")

# exit classes: what each client says for the same failure
CLI_CLASS = {2: "bad request", 3: "nothing qualifies", 4: "no driver", 1: "failure"}
C_CLASS = {"EINVAL": "bad request", "ENOSPC": "nothing qualifies",
           "ETIMEDOUT": "nothing qualifies", "ENODEV": "no driver"}
PY_CLASS = {"RequestError": "bad request", "NoDeviceError": "nothing qualifies",
            "DriverError": "no driver", "Error": "failure"}
DRIVER_PREFIX = "no NVIDIA driver: "


def sizes(b):
    return "%dGiB" % (b // GIB)


class Site:
    """A simulated dgx-a100 with its own state, lease directory and configuration, and the three
    clients run against it (as `user` through setpriv when given)."""

    def __init__(self, config_text="", user=None):
        self.tmp = tempfile.mkdtemp(prefix="gpuctl-parity-")
        self.user = user
        os.chmod(self.tmp, 0o755)
        self.state = os.path.join(self.tmp, "state")
        self.config = os.path.join(self.tmp, "gpuctl.conf")
        with open(self.config, "w") as f:
            f.write(config_text)
        os.chmod(self.config, 0o644)
        r = subprocess.run([NVSIM, "exec", "--state-dir", self.state, "dgx-a100", "--", "true"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        if user:
            pw = pwd.getpwnam(user)
            os.chown(self.tmp, pw.pw_uid, pw.pw_gid)
        self.env = dict(os.environ)
        for k in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES",
                  "SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "GPUCTL_LIBRARY", "PYTHONPATH"):
            self.env.pop(k, None)
        self.env.update({"NVSIM_STATE_DIR": self.state, "GPUCTL_NVML_LIBRARY": SIMLIB,
                         "GPUCTL_KMSG": os.path.join(self.state, "kmsg"),
                         "LD_LIBRARY_PATH": os.path.dirname(SIMLIB),
                         "GPUCTL_LEASE_DIR": os.path.join(self.tmp, "leases"),
                         "GPUCTL_CONFIG": self.config,
                         "GPUCTL_HEALTH_STATE": os.path.join(self.tmp, "health.state")})

    def close(self):
        subprocess.run([GPUCTL, "release", "--all"], env=self.env, capture_output=True)
        shutil.rmtree(self.tmp, True)

    def run(self, argv, env=None, python=False):
        e = dict(self.env)
        if python:
            e.update(python_env({"PYTHONPATH": PYDIR, "GPUCTL_LIBRARY": LIBGPUCTL}))
        if env:
            e.update(env)
        if self.user:
            pw = pwd.getpwnam(self.user)
            argv = ["setpriv", "--reuid", str(pw.pw_uid), "--regid", str(pw.pw_gid),
                    "--init-groups", *argv]
        return subprocess.run(argv, env=e, capture_output=True, text=True, timeout=120)

    def nvsim(self, *args):
        r = subprocess.run([NVSIM, *args], env=self.env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr

    # ---- the three clients; each returns ("ok", [uuids]) or ("error", class, message) ----

    def cli(self, mode, n, req, env=None):
        args = ["-n", str(n)]
        for k, v in req.items():
            if k in ("min_free_mem",):
                args += ["--min-free-mem", sizes(v)]
            elif k == "share_mem":
                args += ["--share", "--mem", sizes(v)]
            elif isinstance(v, bool):
                args += ["--" + k.replace("_", "-")] if v else []
            else:
                args += ["--" + k.replace("_", "-"), str(v)]
        if mode == "choose":
            argv, cmd = [GPUCTL, "select", *args], "select"
        elif mode == "preview":
            argv, cmd = [GPUCTL, "run", *args, "--dry-run", "--", "true"], "run"
        else:
            argv = [GPUCTL, "run", *args, "--", "sh", "-c", 'echo "$CUDA_VISIBLE_DEVICES"']
            cmd = "run"
        r = self.run(argv, env)
        if r.returncode == 0:
            line = r.stdout.split("\n")[0]
            if mode != "lease":
                line = line.split()[0] if line else line
                assert line.startswith("CUDA_VISIBLE_DEVICES="), r.stdout
                line = line.split("=", 1)[1]
            return ("ok", line.split(",") if line else [])
        err = r.stderr.strip()
        assert "\n" not in err and err.startswith("gpuctl: "), r.stderr
        msg = err[len("gpuctl: "):]
        if msg.startswith(cmd + ": "):
            msg = msg[len(cmd) + 2:]
        return ("error", CLI_CLASS[r.returncode], msg)

    def c(self, mode, n, req, env=None):
        args = [CLIENT, mode, str(n)]
        for k, v in req.items():
            if isinstance(v, bool):
                args += ["--" + k.replace("_", "-")] if v else []
            else:
                args += ["--" + k.replace("_", "-"), str(v)]
        r = self.run(args, env)
        assert r.returncode in (0, 1), r.stderr
        line = r.stdout.rstrip("\n")
        if r.returncode == 0:
            return ("ok", line.split(",") if line else [])
        _, name, msg = line.split(" ", 2)
        return ("error", C_CLASS.get(name, "failure"), msg)

    def py(self, mode, n, req, env=None):
        kw = {k: (sizes(v) if k in ("min_free_mem", "share_mem") else v) for k, v in req.items()}
        r = self.run([PYTHON, "-c", PY_CLIENT, json.dumps([mode, n, kw])], env, python=True)
        assert r.returncode == 0, r.stderr
        line = r.stdout.rstrip("\n")
        if not line.startswith("ERROR "):
            return ("ok", line.split(",") if line else [])
        _, cls, _, msg = line.split(" ", 3)
        return ("error", PY_CLASS[cls], msg)

    def all_three(self, mode, n, req=None, env=None):
        """The three answers, checked equal (a driver's message may lack the prefix the
        command line adds; the command line names its options and the package its keywords
        where the library names the request's fields: docs/library.md's table, spelled back);
        returns the answer (the library's words)."""
        req = req or {}
        out = [self.cli(mode, n, req, env), self.c(mode, n, req, env),
               self.py(mode, n, req, env)]
        out[0] = fields_of(out[0], CLI_FIELDS)
        out[2] = fields_of(out[2], PY_FIELDS)
        norm = [o if o[0] == "ok" or o[1] != "no driver" or o[2].startswith(DRIVER_PREFIX)
                else (o[0], o[1], DRIVER_PREFIX + o[2]) for o in out]
        assert norm[0] == norm[1] == norm[2], "%s n=%d %r %r:\n  cli %r\n  c   %r\n  py  %r" % (
            mode, n, req, env, *out)
        return norm[0]


# docs/library.md, the table of C fields, Python keywords and options: each spelling -> field
CLI_FIELDS = [(r"--min-free-mem\b", "min_free_mem"), (r"--mem\b", "share_mem"),
              (r"--max-util\b", "max_util"), (r"--no-procs\b", "no_procs"),
              (r"--numa\b", "numa_node"), (r"--only\b", "only"), (r"--exclude\b", "exclude"),
              (r"--mig\b", "mig_profile"), (r"--ignore-outer\b", "ignore_outer"),
              (r"--allow-unhealthy\b", "allow_unhealthy"),
              (r"--ignore-foreign\b", "ignore_foreign")]
PY_FIELDS = [(r"(?<![\w.-])numa(?= \d)", "numa_node"), (r"(?<![\w.-])mig(?= ')", "mig_profile")]


def fields_of(answer, spellings):
    """An error answer with a client's spellings put back as the request's field names."""
    if answer[0] != "error":
        return answer
    msg = answer[2]
    for pattern, field in spellings:
        msg = re.sub(pattern, field, msg)
    return (answer[0], answer[1], msg)


def indices(answer):
    assert answer[0] == "ok", answer
    return [UUIDS.index(u) for u in answer[1]]


class AllocParity(GpuctlTestCase):
    def site(self, config_text="", user=None):
        s = Site(config_text, user)
        self.addCleanup(s.close)
        return s

    def check(self, s, modes=("choose", "preview", "lease"), counts=(1, 2, 4, 8, 9), req=None,
              env=None):
        """The three clients agree for every mode and count; {(mode, n): answer}."""
        out = {}
        for mode in modes:
            for n in counts:
                with self.subTest(mode=mode, n=n, req=req, env=env):
                    out[(mode, n)] = s.all_three(mode, n, req, env)
        return out

    def test_healthy_machine(self):
        s = self.site()
        got = self.check(s)
        for mode in ("choose", "preview", "lease"):
            self.assertEqual(sorted(indices(got[(mode, 8)])), list(range(8)))
            self.assertEqual(got[(mode, 9)][:2], ("error", "nothing qualifies"))
            self.assertTrue(got[(mode, 9)][2].startswith("need 9 GPUs, 8 qualify"))

    def test_fail_gpu(self):
        s = self.site()
        s.nvsim("xid", "-i", "0", "48")  # a fence-class XID (docs/health.md): FAIL
        got = self.check(s)
        for (mode, n), a in got.items():
            if n <= 7:
                self.assertNotIn(0, indices(a))
            else:
                self.assertEqual(a[:2], ("error", "nothing qualifies"))
                self.assertIn("unhealthy: 0", a[2])

    def test_warn_gpus(self):
        s = self.site()
        for gpu in ("0", "1"):  # application-class XIDs (docs/health.md): WARN
            s.nvsim("xid", "-i", gpu, "13")
        got = self.check(s, counts=(2, 6, 7, 8))
        for (mode, n), a in got.items():
            # WARN GPUs only when the request cannot be met without them (docs/selection.md:
            # then a second pass admits them like any other)
            if n <= 6:
                self.assertFalse({0, 1} & set(indices(a)), (mode, n))
            else:
                self.assertGreaterEqual(len(set(indices(a)) & {0, 1}), n - 6, (mode, n))

    def test_pool_the_user_is_not_in(self):
        user = None
        allowed = "nobody-gpuctl-parity"  # a name that does not exist: nobody is in the pool
        if os.geteuid() == 0:
            # root may draw from every pool: a throwaway user asks instead
            user = "gpuctlp%d" % os.getpid()
            subprocess.run(["useradd", "-M", "-r", "-s", "/usr/sbin/nologin", user], check=True,
                           capture_output=True)
            self.addCleanup(subprocess.run, ["userdel", user], capture_output=True)
        s = self.site("[pool restricted]\ngpus = 0-3\nusers = %s\n" % allowed, user)
        got = self.check(s, counts=(1, 4, 5), req={"pool": "restricted"})
        for a in got.values():
            self.assertEqual(a[:2], ("error", "failure"))
            self.assertIn("pool restricted: not allowed", a[2])
            self.assertIn(allowed, a[2])
        got = self.check(s, counts=(2, 4, 5))
        for (mode, n), a in got.items():
            if n <= 4:
                self.assertTrue(set(indices(a)) <= {4, 5, 6, 7})
            else:
                self.assertEqual(a[:2], ("error", "nothing qualifies"))
                self.assertIn("outside pool default: 0,1,2,3", a[2])

    def test_leased_gpu(self):
        s = self.site()
        r = s.run([GPUCTL, "select", "-n", "1", "--only", "0", "--hold", "120"])
        self.assertEqual(r.returncode, 0, r.stderr)
        got = self.check(s)
        for (mode, n), a in got.items():
            if n <= 7:
                self.assertNotIn(0, indices(a))
            else:
                self.assertIn("leased: 0", a[2])

    def test_foreign_process(self):
        s = self.site()
        load = subprocess.Popen([LOAD, "--mem", "2GiB"], env=dict(s.env,
                                CUDA_VISIBLE_DEVICES=UUIDS[0]), stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        self.addCleanup(load.stdout.close)
        self.addCleanup(load.wait)
        self.addCleanup(load.terminate)
        self.assertTrue(load.stdout.readline().startswith("ready"))
        # select does not look at processes: GPU 0 is still a candidate
        got = self.check(s, modes=("choose",), counts=(8,))
        self.assertEqual(sorted(indices(got[("choose", 8)])), list(range(8)))
        # a preview and a lease leave it out
        got = self.check(s, modes=("preview", "lease"), counts=(1, 7, 8))
        for (mode, n), a in got.items():
            if n <= 7:
                self.assertNotIn(0, indices(a))
            else:
                self.assertIn("in use without a lease: 0", a[2])
        got = self.check(s, modes=("preview",), counts=(8,), req={"ignore_foreign": True})
        self.assertEqual(sorted(indices(got[("preview", 8)])), list(range(8)))

    def test_outer_allocations(self):
        s = self.site()
        cases = (({"CUDA_VISIBLE_DEVICES": ",".join(UUIDS[i] for i in (5, 2, 7))}, {2, 5, 7}),
                 ({"CUDA_VISIBLE_DEVICES": "3,1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, {1, 3}),
                 ({"SLURM_JOB_GPUS": "0,4,6"}, {0, 4, 6}),
                 ({"SLURM_STEP_GPUS": "1,2", "SLURM_JOB_GPUS": "0,1,2,3"}, {1, 2}))
        for env, allowed in cases:
            got = self.check(s, counts=(1, 2, len(allowed), len(allowed) + 1), env=env)
            for (mode, n), a in got.items():
                if n <= len(allowed):
                    self.assertTrue(set(indices(a)) <= allowed, (env, mode, n))
                else:
                    self.assertEqual(a[:2], ("error", "nothing qualifies"))
        got = self.check(s, counts=(8,), req={"ignore_outer": True},
                         env={"SLURM_JOB_GPUS": "0"})
        self.assertEqual(sorted(indices(got[("choose", 8)])), list(range(8)))
        got = self.check(s, counts=(1,), env={"NVIDIA_VISIBLE_DEVICES": "12"})
        for a in got.values():
            self.assertEqual(a[:2], ("error", "bad request"))
            self.assertIn("NVIDIA_VISIBLE_DEVICES", a[2])

    def test_shared_lease(self):
        s = self.site()
        r = s.run([GPUCTL, "select", "-n", "1", "--only", "3", "--share", "--mem", "30GiB",
                   "--hold", "120"])
        self.assertEqual(r.returncode, 0, r.stderr)
        # exclusive requests never get the shared device
        got = self.check(s, counts=(7, 8))
        for (mode, n), a in got.items():
            if n == 7:
                self.assertNotIn(3, indices(a))
            else:
                self.assertIn("leased: 3", a[2])
        # shared ones do while the declared memory fits (80 GiB less the 5 % margin)
        got = self.check(s, counts=(1, 8), req={"share_mem": 30 * GIB, "only": "3"})
        self.assertEqual(indices(got[("choose", 1)]), [3])
        got = self.check(s, counts=(1,), req={"share_mem": 50 * GIB, "only": "3"})
        for a in got.values():
            self.assertEqual(a[:2], ("error", "nothing qualifies"))

    def test_bad_requests_and_no_driver(self):
        s = self.site()
        for req in ({"only": "9"}, {"exclude": "GPU-zzzz"}, {"mig": "1g"}, {"pool": "nope"}):
            got = self.check(s, counts=(1,), req=req)
            for a in got.values():
                self.assertEqual(a[:2], ("error", "bad request"), req)
        got = self.check(s, counts=(1,), env={"GPUCTL_NVML_LIBRARY": "/nonexistent"})
        for a in got.values():
            self.assertEqual(a, ("error", "no driver",
                                 "no NVIDIA driver: /nonexistent not found (set by "
                                 "GPUCTL_NVML_LIBRARY)"))


if __name__ == "__main__":
    unittest.main()
