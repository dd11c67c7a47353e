"""Issue 26, item 2: the workload of every GPU process in `gpuctl ps`, `top` and `list`, their
JSON, and the filters `ps --job`, `ps --workload`, `top --workload`.

Real parts: the kernel writes /proc/PID/cgroup. Each test process is a real `sleep` that the test
moves into cgroups it creates on this hybrid machine, in the layouts their owners document, from
the one table of them, tests/cli/workload_layouts.py (each row cites its source):
- Layouts: five of them with no runtime state (so containers and pods are shown by id): a Slurm
  v1 step, a pod under the systemd driver, docker, a system service and a login session, one
  GPU each, for ps, top, list and their filters;
- EveryLayoutShownEverywhere: all eight (adding a pod under the cgroupfs driver, rootful and
  rootless podman) with their runtimes' state files under a scratch GPUCTL_WORKLOAD_ROOT, one on
  each GPU of dgx-a100, in ps (table and JSON), top, list, Python and the exporter's labels
  (issue 26, "Done when").
The simulator is told each PID uses a GPU (`nvsim proc add --pid`).

Expected values come from the table, which writes them from docs/workloads.md and
include/gpuctl/workload.h ("slurm 4242.0", "unit jupyter.service", "session 3"; a container or
pod with no local runtime state by its id's first 12 digits, a pod by its uid's first 8) and
docs/metrics.md, never from gpuctl's output.
Every cgroup, process, user and scratch directory made is removed (a process moved back to each
hierarchy's root and killed first), even when a test fails, and the class cleanup fails if any
is left (workload_layouts.Layouts.close); skipped, and said so, when not root or a hierarchy is
missing.
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import workload_layouts
from gpuctl_test import (EMPTY_CONFIG, EXIT_USAGE, GPUCTL, LEASE_DIR, LIBGPUCTL, NVSIM, PYDIR,
                         PYTHON, SIMLIB, GpuctlTestCase, python_env, run)
from test_exporter import DCGM_LABELS, Exporter
from test_top import Tmux

V2 = workload_layouts.UNIFIED
# the layouts that need no runtime state, one per GPU from 0: (name, hierarchy, path, GPU, the
# workload's fields that path documents)
TABLE = workload_layouts.table()[:5]
LAYOUTS = [(l.name, l.hierarchy, l.path, gpu, l.want(with_state=False))
           for gpu, l in enumerate(TABLE)]
JOB = TABLE[0].fields["slurm_job"]
POD_UID = TABLE[1].fields["pod_uid"]
DOCKER = TABLE[2].fields["id"]
KEYS = workload_layouts.KEYS
# A unit named with every byte a terminal or a JSON reader could trip on (a name component
# holds at most 255 bytes, NAME_MAX; the kernel refuses a cgroup name with a newline).
HOSTILE = (b"evil\x1b]0;owned\x07\x1b[2J\t\"'\\" + b"A" * 200 + b"\xff\xfe\x9b.service")
CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f\u0080-\u009f]")


def can_run():
    return workload_layouts.why_not()


class Machine(workload_layouts.Layouts):
    """The sleepers in their cgroups and the simulated machine that sees them; undone by
    close() whatever happened."""

    def __init__(self):
        super().__init__()
        self.state = os.path.join(self.tmp, "state")
        self.pids = {}  # layout name -> PID

    def env(self):
        return {"GPUCTL_NVML_LIBRARY": SIMLIB, "NVSIM_STATE_DIR": self.state,
                "GPUCTL_LEASE_DIR": LEASE_DIR, "GPUCTL_CONFIG": EMPTY_CONFIG, "LANG": "C",
                "GPUCTL_KMSG": os.path.join(self.state, "kmsg")}

    def start(self, name, hierarchy, path, gpu):
        p = self.sleeper(hierarchy, path)
        self.pids[name] = p.pid
        self.gpu(p.pid, gpu)
        return p.pid

    def gpu(self, pid, gpu):
        r = run([NVSIM, "proc", "add", "--pid", str(pid), "-i", str(gpu), "--mem", "2GiB"],
                env=self.env())
        assert r.rc == 0, r

    def open(self):
        r = run([NVSIM, "exec", "--keep", "--state-dir", self.state, "dgx-a100", "--", "true"])
        assert r.rc == 0, r


@unittest.skipIf(can_run(), can_run())
class Layouts(GpuctlTestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = Machine()
        cls.addClassCleanup(cls.m.close)
        cls.m.open()
        cls.pids = {}
        for name, h, path, gpu, _ in LAYOUTS:
            cls.pids[name] = cls.m.start(name, h, path, gpu)

    def g(self, *args, env=None):
        return run([GPUCTL, *args], env={**self.m.env(), **(env or {})})

    def ps_json(self, *args):
        r = self.g("ps", "--format", "json", *args)
        self.assertOk(r)
        return r.json()

    def check(self, wl, name, want):
        self.assertEqual(set(wl), KEYS, wl)
        self.assertEqual(wl["pid"], self.pids[name])
        self.assertEqual(wl["uid"], 0)  # the test runs as root
        self.assertEqual(wl["ns_pid"], self.pids[name])  # no PID namespace of its own
        self.assertFalse(wl["truncated"])
        for k, v in want.items():
            self.assertEqual(wl[k], v, (name, k, wl))

    def test_kernel_has_the_layouts(self):
        """The premise: /proc/PID/cgroup names the cgroups made (else nothing below means
        anything)."""
        for name, h, path, _, _ in LAYOUTS:
            with open("/proc/%d/cgroup" % self.pids[name]) as f:
                self.assertIn(":/%s/%s\n" % (self.m.prefix, path), f.read())

    def test_ps_json_every_process_attributed(self):
        doc = self.ps_json()
        rows = {d["index"]: d for d in doc["devices"]}
        for name, _, _, gpu, want in LAYOUTS:
            row = rows[gpu]
            self.assertEqual([p["pid"] for p in row["processes"]], [self.pids[name]], row)
            self.check(row["processes"][0]["workload"], name, want)
            self.assertTrue(row["processes"][0]["foreign"])
            # the process of no lease is also in foreign[], with the same workload
            self.assertEqual(row["foreign"][0]["workload"], row["processes"][0]["workload"])
            self.assertIsNone(row["owner"])

    def test_ps_table_workload_column(self):
        r = self.g("ps")
        self.assertOk(r)
        lines = r.out.splitlines()
        head = lines[0].split()
        self.assertEqual(head[:8], ["DEVICE", "UUID", "STATE", "HEALTH", "USER", "PID", "JOB",
                                    "WORKLOAD"])
        col = lines[0].index("WORKLOAD")
        for name, _, _, gpu, want in LAYOUTS:
            line = next(l for l in lines if l.split()[0] == str(gpu))
            self.assertTrue(line[col:].startswith(want["label"] + "  "), (line, want))

    def test_ps_job(self):
        for arg in (str(JOB), "%d.0" % JOB):
            doc = self.ps_json("--job", arg)
            self.assertEqual([d["index"] for d in doc["devices"]], [0], arg)
        for arg in ("%d.1" % JOB, "%d.batch" % JOB, "%d_0" % JOB, str(JOB + 1)):
            self.assertEqual(self.ps_json("--job", arg)["devices"], [], arg)
        r = self.g("ps", "--job", str(JOB))
        self.assertOk(r)
        self.assertEqual(len(r.out.splitlines()), 2, r)
        self.assertIn("slurm %d.0" % JOB, r.out)
        r = self.g("ps", "--job", str(JOB + 1))
        self.assertOk(r)
        self.assertEqual(r.out, "no device is used by a workload that matches\n")
        for bad in ("x", "0", "%d." % JOB, "%d_" % JOB, "-5", "%d.0.0" % JOB, ""):
            self.assertOneLineError(self.g("ps", "--job", bad), EXIT_USAGE, "--job",
                                    "'%s'" % bad)

    def test_ps_workload(self):
        cases = {"unit:": [3], "session:": [4], "container:": [2], "pod:": [1], "slurm:": [0],
                 "jupyter": [3], "docker*": [2], DOCKER[:10]: [2], "pod:%s" % POD_UID[:8]: [1],
                 "*on 3": [4], "bare:": [], "unit:docker": []}
        for pat, want in cases.items():
            doc = self.ps_json("--workload", pat)
            self.assertEqual([d["index"] for d in doc["devices"]], want, pat)
        doc = self.ps_json("--job", str(JOB), "--workload", "unit:")
        self.assertEqual(doc["devices"], [])
        self.assertOneLineError(self.g("ps", "--workload", ""), EXIT_USAGE, "--workload")
        self.assertOneLineError(self.g("ps", "--waiting", "--job", "1"), EXIT_USAGE,
                                "--waiting", "--job")

    def test_list(self):
        r = self.g("list", "--format", "json")
        self.assertOk(r)
        gpus = {g["index"]: g for g in r.json()["gpus"]}
        for name, _, _, gpu, want in LAYOUTS:
            procs = gpus[gpu]["processes"]
            self.assertEqual([p["pid"] for p in procs], [self.pids[name]])
            self.check(procs[0]["workload"], name, want)
        # the table: the GPU's processes after the one workload that holds them all
        r = self.g("list")
        self.assertOk(r)
        for name, _, _, gpu, want in LAYOUTS:
            line = next(l for l in r.out.splitlines() if l.split()[0] == str(gpu))
            self.assertTrue(line.endswith("%s: root:%d(2048MiB)" % (want["label"],
                                                                     self.pids[name])), line)
        r = self.g("list", "--wide")
        self.assertOk(r)
        procs = r.out.split("\n\n", 1)[1].splitlines()
        self.assertEqual(procs[0].split(), ["GPU", "PID", "USER", "GPU_MEM", "%CPU", "RSS",
                                            "ELAPSED", "WORKLOAD", "COMMAND"])
        col = procs[0].index("WORKLOAD")
        for name, _, _, gpu, want in LAYOUTS:
            line = next(l for l in procs if l.split()[1] == str(self.pids[name]))
            self.assertTrue(line[col:].startswith(want["label"] + "  "), line)

    def top_rows(self, out):
        return {int(m.group(1)): l for l in out.splitlines()
                for m in [re.match(r"^[! ] *\d+ +(\d+) ", l)] if m}

    def test_top(self):
        r = self.g("top", "--once", env={"COLUMNS": "160"})
        self.assertOk(r)
        head = next(l for l in r.out.splitlines() if "WORKLOAD" in l)
        col = head.index("WORKLOAD")
        rows = self.top_rows(r.out)
        for name, _, _, _, want in LAYOUTS:
            self.assertTrue(rows[self.pids[name]][col:].startswith(want["label"] + " "),
                            rows[self.pids[name]])
        r = self.g("top", "--once", "--workload", "slurm:", env={"COLUMNS": "160"})
        self.assertOk(r)
        self.assertEqual(list(self.top_rows(r.out)), [self.pids["slurm"]])
        r = self.g("top", "--once", "--workload", "unit jupyter.*")
        self.assertEqual(list(self.top_rows(r.out)), [self.pids["unit"]])
        self.assertOneLineError(self.g("top", "--once", "--workload", ""), EXIT_USAGE,
                                "--workload")

    @unittest.skipUnless(shutil.which("strace"), "needs strace to see the files top opens")
    def test_top_refresh_reads_no_file_for_known_processes(self):
        """Issue 26 item 4, seen by the kernel's side (strace): over 5 refreshes top opens
        each process's /proc/PID/stat every time (its own facts) but its /proc/PID directory,
        through which the workload's files are read, and cgroup once; and the cache's count
        (top -v --batch) stops growing after the first frame."""
        log = os.path.join(self.m.tmp, "strace.log")
        # LeakSanitizer cannot run under ptrace (the ASan build): the leak check is the other
        # tests' business
        asan = (os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")
        r = run(["strace", "-f", "-e", "trace=openat,open", "-o", log, GPUCTL, "-v", "top",
                 "--batch", "-d", "0.1", "-n", "5"], env={**self.m.env(), "ASAN_OPTIONS": asan})
        self.assertOk(r)
        with open(log) as f:
            calls = f.read()
        for name, pid in self.pids.items():
            stat = re.findall(r'"/proc/%d/stat"' % pid, calls)
            self.assertEqual(len(stat), 5, name)  # five refreshes did read it
            whole = re.findall(r'"/proc/%d", [^)]*O_DIRECTORY' % pid, calls)
            self.assertEqual(len(whole), 1, (name, whole))
        self.assertEqual(len(re.findall(r'openat\(\d+, "cgroup"', calls)), len(self.pids))
        counts = [int(n) for n in re.findall(
            r"^gpuctl: top: refresh \d+: workload files read in all: (\d+)$", r.err, re.M)]
        self.assertEqual(len(counts), 5, r.err)
        self.assertGreater(counts[0], 0)
        self.assertEqual(counts, [counts[0]] * 5, r.err)

    def test_top_screen_80x24(self):
        """The screen at 80x24 keeps WORKLOAD (HOST-MEM and ELAPSED go: docs/gpuctl.1, "top")
        and every line fits."""
        tmp = tempfile.mkdtemp(prefix="gpuctl-wl-tmux-")
        self.addCleanup(shutil.rmtree, tmp, True)
        tm = Tmux(tmp, 80, 24)
        self.addCleanup(tm.stop)
        tm.start("%s top -d 0.2\n" % GPUCTL, self.m.env())
        label = "slurm %d.0" % JOB
        s = tm.wait_for(lambda s: label in s and "WORKLOAD" in s, "the workload")
        lines = s.splitlines()
        self.assertTrue(all(len(l) <= 80 for l in lines), s)
        head = next(l for l in lines if "WORKLOAD" in l)
        self.assertNotIn("HOST-MEM", head)
        self.assertNotIn("ELAPSED", head)
        tm.keys("q")


# Python's view of every process: gpuctl.workload(pid) and each Process.workload of
# gpuctl.devices(), every field (Workload.__slots__), as JSON on stdout.
PYTHON_SNAPSHOT = r"""
import json, sys, gpuctl
pids = [int(a) for a in sys.argv[1:]]
fields = lambda w: {k: getattr(w, k) for k in w.__slots__}
json.dump({"direct": {p: fields(gpuctl.workload(p)) for p in pids},
           "device": {p.pid: [d.index, fields(p.workload)]
                      for d in gpuctl.devices() for p in d.processes}}, sys.stdout)
"""


@unittest.skipIf(can_run(), can_run())
class EveryLayoutShownEverywhere(GpuctlTestCase):
    """Issue 26, "Done when": one process in each layout of workload_layouts.table() (a Slurm
    v1 step, pods under the systemd and cgroupfs drivers, docker, rootful and rootless podman, a
    system service, a login session), each alone on its own GPU of dgx-a100 and named by its
    runtime's state under a scratch GPUCTL_WORKLOAD_ROOT, is shown with the workload the table
    writes from the docs by ps (JSON and table), top, list's JSON, Python (gpuctl.workload and
    Process.workload) and the exporter (per-process workload_kind and workload, dcgm-exporter's
    per-GPU labels, gpuctl_gpu_workload_info). One run of each command serves every layout.
    The rootless podman process runs as a throwaway user made with useradd, whose home (under
    the state root) holds the containers.json it owns."""

    @classmethod
    def setUpClass(cls):
        cls.m = Machine()
        cls.addClassCleanup(cls.m.close)
        cls.m.open()
        cls.table = workload_layouts.table(cls.m.add_user())
        assert len(cls.table) == 8, [l.name for l in cls.table]
        cls.pids = {}
        for gpu, lay in enumerate(cls.table):
            cls.pids[lay.name] = cls.m.start_layout(lay).pid
            cls.m.gpu(cls.pids[lay.name], gpu)
        cls.env = {**cls.m.env(), "GPUCTL_WORKLOAD_ROOT": cls.m.root, "COLUMNS": "200"}
        cls.out = {}
        for key, args in (("ps.json", ("ps", "--format", "json")), ("ps", ("ps",)),
                          ("top", ("top", "--once")), ("list.json", ("list", "--format", "json"))):
            cls.out[key] = run([GPUCTL, *args], env=cls.env)
        cls.out["python"] = run([PYTHON, "-c", PYTHON_SNAPSHOT, *map(str, cls.pids.values())],
                                env=python_env({**cls.env, "PYTHONPATH": PYDIR,
                                                "GPUCTL_LIBRARY": LIBGPUCTL}))

    def rows(self):
        """(GPU, layout, its PID)"""
        return [(gpu, lay, self.pids[lay.name]) for gpu, lay in enumerate(self.table)]

    def output(self, key):
        r = self.out[key]
        self.assertOk(r)
        return r

    def check(self, wl, lay, pid):
        """A JSON or Python workload against the table's row."""
        self.assertEqual(set(wl), KEYS, wl)
        want = {"pid": pid, "ns_pid": pid, "uid": lay.user or 0, "truncated": False,
                **lay.want()}
        self.assertEqual({k: wl[k] for k in want}, want, (lay.name, wl))
        self.assertTrue(wl["cgroup"].endswith("/" + lay.path), (lay.name, wl["cgroup"]))

    def test_premise(self):
        """The kernel has each process where its row says, and every GPU has one of them."""
        for gpu, lay, pid in self.rows():
            h = "name=systemd" if lay.hierarchy == workload_layouts.SYSTEMD else \
                "" if lay.hierarchy == workload_layouts.UNIFIED else "freezer"
            with open("/proc/%d/cgroup" % pid) as f:
                self.assertIn(":%s:/%s/%s\n" % (h, self.m.prefix, lay.path), f.read(),
                              lay.name)
            with open("/proc/%d/status" % pid) as f:
                uid = [l.split()[1] for l in f if l.startswith("Uid:")][0]
            self.assertEqual(int(uid), lay.user or 0)

    def check_gpus(self, gpus):
        """ps's devices[] or list's gpus[]: each GPU's one process and its workload."""
        by_index = {g["index"]: g for g in gpus}
        for gpu, lay, pid in self.rows():
            procs = by_index[gpu]["processes"]
            self.assertEqual([p["pid"] for p in procs], [pid], lay.name)
            self.check(procs[0]["workload"], lay, pid)

    def test_ps_json(self):
        self.check_gpus(self.output("ps.json").json()["devices"])

    def test_ps_table(self):
        lines = self.output("ps").out.splitlines()
        col = lines[0].index("WORKLOAD")
        for gpu, lay, pid in self.rows():
            line = [l for l in lines if l.split()[0] == str(gpu)]
            self.assertEqual(len(line), 1, lines)
            self.assertTrue(line[0][col:].startswith(lay.label + "  "), (lay.name, line[0]))

    def test_top(self):
        out = self.output("top").out
        col = next(l for l in out.splitlines() if "WORKLOAD" in l).index("WORKLOAD")
        rows = {int(m.group(2)): (int(m.group(1)), l) for l in out.splitlines()
                for m in [re.match(r"^[! ] *(\d+) +(\d+) ", l)] if m}
        for gpu, lay, pid in self.rows():
            self.assertIn(pid, rows, (lay.name, out))
            self.assertEqual(rows[pid][0], gpu)
            self.assertTrue(rows[pid][1][col:].startswith(lay.label + " "),
                            (lay.name, rows[pid][1]))

    def test_list_json(self):
        self.check_gpus(self.output("list.json").json()["gpus"])

    def test_python(self):
        doc = json.loads(self.output("python").out)
        for gpu, lay, pid in self.rows():
            self.check(doc["direct"][str(pid)], lay, pid)
            where, wl = doc["device"][str(pid)]
            self.assertEqual(where, gpu)
            self.check(wl, lay, pid)

    def test_exporter(self):
        with Exporter("dgx-a100", env={"GPUCTL_WORKLOAD_ROOT": self.m.root}) as ex:
            for gpu, lay, pid in self.rows():
                ex.nvsim("proc", "add", "--pid", str(pid), "-i", str(gpu), "--mem", "2GiB")
            m = ex.wait_for(lambda m: len(m.get("gpuctl_process_memory_used_bytes", [])) == 8,
                            "eight processes")
        util = {int(l["gpu"]): {k: v for k, v in l.items() if k not in DCGM_LABELS}
                for l, _ in m["DCGM_FI_DEV_GPU_UTIL"]}
        info = {int(l["gpu"]): l for l, _ in m["gpuctl_gpu_workload_info"]}
        procs = {int(l["pid"]): l for l, _ in m["gpuctl_process_memory_used_bytes"]}
        for gpu, lay, pid in self.rows():
            kind = lay.fields["kind"]
            # dcgm-exporter's own labels on the GPU's series: a pod's or a Slurm job's only
            self.assertEqual(util[gpu], lay.dcgm, lay.name)
            self.assertEqual(info[gpu], {"gpu": str(gpu), "UUID": info[gpu]["UUID"],
                                         "kind": kind, "workload": lay.label, **lay.dcgm},
                             lay.name)
            p = procs[pid]
            self.assertEqual(p["gpu"], str(gpu))
            self.assertEqual({k: p.get(k) for k in ("workload_kind", "workload", *lay.dcgm)},
                             {"workload_kind": kind, "workload": lay.label, **lay.dcgm},
                             lay.name)
            self.assertEqual({"pod", "namespace", "container", "hpc_job"} & set(p) - set(lay.dcgm),
                             set(), (lay.name, p))
        self.assertEqual(sorted(info), list(range(8)))


@unittest.skipIf(can_run(), can_run())
class Hostile(GpuctlTestCase):
    """Issue 26 item 5: a unit named with ESC, BEL, a tab, quotes, a backslash, invalid
    UTF-8 and a C1 CSI, nested deep enough for a path over 300 bytes: no output of ps, top or
    list carries a raw control byte, and JSON parses."""

    @classmethod
    def setUpClass(cls):
        cls.m = Machine()
        cls.addClassCleanup(cls.m.close)
        cls.m.open()
        path = b"system.slice/" + b"d" * 120 + b"/" + HOSTILE
        cls.pid = cls.m.start("hostile", V2.encode(), path, 5)

    def g(self, *args):
        e = {**os.environ, **self.m.env(), "COLUMNS": "200"}
        p = subprocess.run([GPUCTL, *args], env=e, capture_output=True, timeout=60)
        return p.returncode, p.stdout

    def test_no_control_byte_in_text(self):
        with open("/proc/%d/cgroup" % self.pid, "rb") as f:
            self.assertIn(HOSTILE, f.read())  # the premise
        for args in (("ps",), ("ps", "--all"), ("list",), ("list", "--wide"),
                     ("top", "--once")):
            rc, out = self.g(*args)
            self.assertEqual(rc, 0, (args, out))
            text = out.decode("utf-8", "replace")
            self.assertIsNone(CONTROL.search(text), (args, text))
            if args[0] != "top":  # top keeps the words that fit: this one is too long
                self.assertIn(b"evil", out, args)

    def test_json_parses(self):
        for args in (("ps", "--format", "json"), ("list", "--format", "json")):
            rc, out = self.g(*args)
            self.assertEqual(rc, 0, args)
            doc = json.loads(out.decode("utf-8"))  # strict UTF-8 too
            text = json.dumps(doc)
            self.assertIn("evil", text)
            self.assertNotIn("\x1b", out.decode("utf-8"))  # escaped as \u001b in JSON


if __name__ == "__main__":
    unittest.main()
