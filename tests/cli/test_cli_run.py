"""gpuctl run: the truth test (the simulated CUDA driver's ledger shows the workload on exactly
the devices `gpuctl select` reports, on several machines), the child's environment, exit
statuses, signal forwarding, --each (ranks, one device each, first failure stops the rest),
CPU and memory binding as /proc shows it, --no-bind, --dry-run and -n 0.
Expected values come from the scenario files and from `gpuctl select` with the same filters;
CPU expectations are the scenario's affinity intersected with what this test process may use."""
import copy
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from cli_facts import Machine
from gpuctl_test import (BUILD, EXIT_NOMATCH, EXIT_USAGE, GPUCTL, SCENARIOS, SIMLIB, SRC,
                         communicate_or_explain,
                         GpuctlTestCase, gpuctl, scenario_names, sim, sim_sh)

LOAD = os.path.join(BUILD, "bin", "nvsim-load")
A100 = Machine("dgx-a100")


def cpulist(text):
    out = set()
    for part in text.split(","):
        if "-" in part:
            a, b = part.split("-")
            out.update(range(int(a), int(b) + 1))
        elif part:
            out.add(int(part))
    return out


def proc_status(text, key):
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return line.split(":", 1)[1].strip()
    return None


class Truth(GpuctlTestCase):
    """The workload runs on what select reports: CUDA (the simulated libcuda.so.1) agrees."""

    def check(self, scenario, n, *filters):
        script = ("$GPUCTL select -n %d %s\n"
                  "$GPUCTL run -n %d %s -- $LOAD --seconds 0 --mem 1MiB --fail-if-none\n"
                  "echo rc=$?\ncat \"$NVSIM_STATE_DIR/ledger.jsonl\"\n"
                  % (n, " ".join(filters), n, " ".join(filters)))
        r = sim_sh(scenario, script, env={"LOAD": LOAD})
        self.assertEqual(r.rc, 0, r)
        lines = r.out.splitlines()  # nvsim-load also says "ready ..." on stdout
        want = next(l for l in lines if l.startswith("CUDA_VISIBLE_DEVICES="))
        want = want.split("=", 1)[1].split(",")
        self.assertIn("rc=0", lines, r)
        runs = [json.loads(l) for l in lines if l.startswith("{")]
        self.assertEqual(len(runs), 1, r)
        got = [d["uuid"] for d in runs[0]["devices"]]
        self.assertEqual(sorted(got), sorted(want), r)
        self.assertEqual(runs[0]["cuda_device_order"], "PCI_BUS_ID")
        self.assertEqual(runs[0]["cuda_visible_devices"], ",".join(want))
        self.assertNotIn("error", runs[0], r)
        return got

    @unittest.skipUnless(os.path.exists(LOAD), "nvsim-load not built")
    def test_machines(self):
        for scenario, n in (("dgx-a100", 2), ("dgx-a100", 5), ("dgx1-v100", 4), ("rtx4090-8", 3),
                            ("workstation-mixed", 2)):
            with self.subTest(scenario=scenario, n=n):
                self.check(scenario, n)

    @unittest.skipUnless(os.path.exists(LOAD), "nvsim-load not built")
    def test_every_scenario(self):
        # 1, 2 and 4 whole GPUs (as many as the machine has outside MIG mode) on every machine.
        for scenario in scenario_names():
            m = Machine(scenario)
            whole = sum(1 for i in range(len(m)) if not (m.mig(i) or {}).get("enabled"))
            for n in sorted({min(k, whole) for k in (1, 2, 4)} - {0}):
                with self.subTest(scenario=scenario, n=n):
                    self.check(scenario, n)

    @unittest.skipUnless(os.path.exists(LOAD), "nvsim-load not built")
    def test_workstation_index_mismatch(self):
        # NVML 0 is the P1000; CUDA's default order would make index 0 the A6000.
        m = Machine("workstation-mixed")
        self.assertEqual(self.check("workstation-mixed", 1, "--only", "0"), [m.gpus[0]["uuid"]])
        self.assertEqual(self.check("workstation-mixed", 1, "--only", "1"), [m.gpus[1]["uuid"]])

    @unittest.skipUnless(os.path.exists(LOAD), "nvsim-load not built")
    def test_mig(self):
        m = Machine("a100-mig")
        profile = m.mig(0)["instances"][0]["profile"]
        got = self.check("a100-mig", 1, "--mig", profile)
        self.assertTrue(got[0].startswith("MIG-"), got)

    @unittest.skipUnless(os.path.exists(LOAD), "nvsim-load not built")
    def test_each_ranks_in_ledger(self):
        script = ("$GPUCTL select -n 3\n"
                  "$GPUCTL run -n 3 --each -- $LOAD --seconds 0 --mem 1MiB --fail-if-none\n"
                  "cat \"$NVSIM_STATE_DIR/ledger.jsonl\"\n")
        r = sim_sh("dgx-a100", script, env={"LOAD": LOAD})
        self.assertOk(r)
        lines = r.out.splitlines()
        want = lines[0].split("=", 1)[1].split(",")
        runs = sorted((json.loads(l) for l in lines if l.startswith("{")),
                      key=lambda x: int(x["env"]["RANK"]))
        self.assertEqual(len(runs), 3, r)
        for i, run in enumerate(runs):
            self.assertEqual(run["env"], {"LOCAL_RANK": str(i), "RANK": str(i), "WORLD_SIZE": "3",
                                          "GPUCTL_SHARE_MEM": None})
            self.assertEqual([d["uuid"] for d in run["devices"]], [want[i]])


def mig_uuids(name_or_doc, profile):
    d = name_or_doc if isinstance(name_or_doc, dict) else Machine(name_or_doc).doc
    return [i["uuid"] for g in d["gpus"] for i in (g.get("mig") or {}).get("instances", [])
            if i["profile"] == profile]


class MigEnumeration(GpuctlTestCase):
    """MIG user guide, "CUDA device enumeration": before driver R570 a CUDA process enumerates
    one MIG device (the first listed) and nothing beside it; from R570 one compute instance per
    GPU instance. a100-mig runs driver 550.54.15; its R570 copy changes only the driver version.
    gpuctl never gives one process more MIG devices than CUDA uses (docs/device-strings.md)."""

    def r570(self):
        d = copy.deepcopy(Machine("a100-mig").doc)
        d["system"]["driver_version"] = "570.172.08"
        d["system"]["nvml_version"] = "12.570.172.08"
        d["system"]["cuda_driver_version"] = 12080
        t = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        self.addCleanup(os.unlink, t.name)
        json.dump(d, t)
        t.close()
        return t.name, d

    @unittest.skipUnless(os.path.exists(LOAD), "nvsim-load not built")
    def test_sim_cuda_r550_enumerates_the_first_mig_device(self):
        u = mig_uuids("a100-mig", "1g.5gb")
        r = sim_sh("a100-mig", "CUDA_VISIBLE_DEVICES=%s,%s $LOAD --seconds 0 --fail-if-none\n"
                   "cat \"$NVSIM_STATE_DIR/ledger.jsonl\"" % (u[1], u[0]), env={"LOAD": LOAD})
        self.assertOk(r)
        runs = [json.loads(l) for l in r.out.splitlines() if l.startswith("{")]
        self.assertEqual([d["uuid"] for d in runs[0]["devices"]], [u[1]])

    def test_select_r550_refuses_several_mig_devices_for_cuda(self):
        r = sim("a100-mig", "select", "-n", "3", "--mig", "1g.5gb")
        self.assertOneLineError(r, EXIT_USAGE, "before R570")
        self.assertIn("550.54.15", r.err)
        self.assertIn("--each", r.err)
        r = sim("a100-mig", "select", "-n", "3", "--mig", "1g.5gb", "--format", "env")
        self.assertOneLineError(r, EXIT_USAGE, "before R570")
        # one MIG device is what CUDA uses; a container form may carry several
        r = sim("a100-mig", "select", "-n", "1", "--mig", "1g.5gb")
        self.assertOk(r)
        r = sim("a100-mig", "select", "-n", "3", "--mig", "1g.5gb", "--format", "nvidia")
        self.assertOk(r)
        got = r.out.strip().split("=", 1)[1].split(",")
        self.assertEqual(len(got), 3)
        self.assertTrue(set(got) <= set(mig_uuids("a100-mig", "1g.5gb")), r)

    @unittest.skipUnless(os.path.exists(LOAD), "nvsim-load not built")
    def test_run_r550_refuses_then_each_runs_one_per_process(self):
        script = ("$GPUCTL run -n 2 --mig 1g.5gb -- $LOAD --seconds 0 || echo rc=$?\n"
                  "test ! -e \"$NVSIM_STATE_DIR/ledger.jsonl\" && echo nothing-ran\n"
                  "$GPUCTL run -n 2 --mig 1g.5gb --each -- $LOAD --seconds 0 --fail-if-none\n"
                  "cat \"$NVSIM_STATE_DIR/ledger.jsonl\"\n")
        r = sim_sh("a100-mig", script, env={"LOAD": LOAD})
        self.assertEqual(r.rc, 0, r)
        lines = r.out.splitlines()
        self.assertEqual(lines[:2], ["rc=2", "nothing-ran"], r)
        self.assertEqual(len([l for l in r.err.splitlines() if l.startswith("gpuctl:")]), 1, r)
        runs = [json.loads(l) for l in lines if l.startswith("{")]
        self.assertEqual(len(runs), 2, r)
        got = [d["uuid"] for run in runs for d in run["devices"]]
        self.assertEqual([len(run["devices"]) for run in runs], [1, 1], r)
        self.assertEqual(len(set(got)), 2)
        self.assertTrue(set(got) <= set(mig_uuids("a100-mig", "1g.5gb")), r)

    @unittest.skipUnless(os.path.exists(LOAD), "nvsim-load not built")
    def test_run_r570_gives_one_process_mig_devices_of_distinct_gpu_instances(self):
        path, d = self.r570()
        script = ("$GPUCTL select -n 3 --mig 1g.5gb\n"
                  "$GPUCTL run -n 3 --mig 1g.5gb -- $LOAD --seconds 0 --fail-if-none\n"
                  "cat \"$NVSIM_STATE_DIR/ledger.jsonl\"\n")
        r = sim_sh(path, script, env={"LOAD": LOAD})
        self.assertOk(r)
        lines = r.out.splitlines()
        want = lines[0].split("=", 1)[1].split(",")
        self.assertEqual(len(want), 3)
        runs = [json.loads(l) for l in lines if l.startswith("{")]
        self.assertEqual(len(runs), 1, r)
        # the simulated CUDA enumerates all three: one compute instance of each GPU instance
        self.assertEqual(sorted(x["uuid"] for x in runs[0]["devices"]), sorted(want), r)

    @unittest.skipUnless(os.path.exists(LOAD), "nvsim-load not built")
    def test_sim_cuda_r570_one_compute_instance_per_gpu_instance(self):
        path, d = self.r570()
        u = mig_uuids(d, "1g.5gb")
        # two compute instances named of one GPU instance: a copy with GI 8's UUID on GI 7
        d["gpus"][0]["mig"]["instances"][1]["gi"] = 7
        d["gpus"][0]["mig"]["instances"][1]["ci"] = 1
        with open(path, "w") as f:
            json.dump(d, f)
        r = sim_sh(path, "CUDA_VISIBLE_DEVICES=%s,%s,%s $LOAD --seconds 0 --fail-if-none\n"
                   "cat \"$NVSIM_STATE_DIR/ledger.jsonl\"" % (u[1], u[0], u[2]),
                   env={"LOAD": LOAD})
        self.assertOk(r)
        runs = [json.loads(l) for l in r.out.splitlines() if l.startswith("{")]
        self.assertEqual([x["uuid"] for x in runs[0]["devices"]], [u[1], u[2]])
        # and gpuctl refuses to hand those two to one process
        r = sim(path, "select", "-n", "2", "--mig", "1g.5gb", "--only", "0")
        self.assertOneLineError(r, EXIT_USAGE, "share GPU instance 7")


class Environment(GpuctlTestCase):
    def env_of(self, *args, env=None, scenario="dgx-a100"):
        r = sim(scenario, "run", *args, "--", sys.executable, "-c",
                "import json, os; print(json.dumps(dict(os.environ)))", env=env)
        self.assertOk(r)
        return json.loads(r.out)

    def test_uuids_order_and_gpus(self):
        e = self.env_of("-n", "2", "--only", "2,5")
        u = [A100.gpus[i]["uuid"] for i in (2, 5)]
        self.assertEqual(sorted(e["CUDA_VISIBLE_DEVICES"].split(",")), sorted(u))
        self.assertEqual(e["CUDA_DEVICE_ORDER"], "PCI_BUS_ID")
        pairs = dict(p.split(":", 1) for p in e["GPUCTL_GPUS"].split(","))
        self.assertEqual(pairs, {"2": u[0], "5": u[1]})
        self.assertNotIn("NVIDIA_VISIBLE_DEVICES", e)

    def test_n0_empty_not_minus_one(self):
        e = self.env_of("-n", "0")
        self.assertEqual(e["CUDA_VISIBLE_DEVICES"], "")
        self.assertEqual(e["GPUCTL_GPUS"], "")

    def test_inherited_nvidia_visible_devices_is_rewritten(self):
        e = self.env_of("-n", "1", "--only", "3", env={"NVIDIA_VISIBLE_DEVICES": "all"})
        self.assertEqual(e["NVIDIA_VISIBLE_DEVICES"], A100.gpus[3]["uuid"])
        e = self.env_of("-n", "0", env={"NVIDIA_VISIBLE_DEVICES": "all"})
        self.assertEqual(e["NVIDIA_VISIBLE_DEVICES"], "void")

    def test_outer_allocation_restricts_run(self):
        e = self.env_of("-n", "1", env={"SLURM_JOB_GPUS": "6"})
        self.assertEqual(e["CUDA_VISIBLE_DEVICES"], A100.gpus[6]["uuid"])

    def test_outer_allocation_each_variable(self):
        # Each variable alone confines the job to the GPUs it names (dgx-a100: NVML index =
        # PCI order; CUDA indices need CUDA_DEVICE_ORDER=PCI_BUS_ID to mean the same).
        u = [g["uuid"] for g in A100.gpus]
        cases = (
            ({"CUDA_VISIBLE_DEVICES": "5,7", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, {5, 7}),
            ({"CUDA_VISIBLE_DEVICES": u[1] + "," + u[4]}, {1, 4}),
            ({"NVIDIA_VISIBLE_DEVICES": "2,3"}, {2, 3}),
            ({"NVIDIA_VISIBLE_DEVICES": u[6] + "," + u[0]}, {0, 6}),
            ({"SLURM_STEP_GPUS": "4,6"}, {4, 6}),
            ({"SLURM_JOB_GPUS": "0,1,2", "SLURM_STEP_GPUS": "1,2"}, {1, 2}),
        )
        for env, allowed in cases:
            with self.subTest(env=env):
                e = self.env_of("-n", "2", env=env)
                got = set(e["CUDA_VISIBLE_DEVICES"].split(","))
                self.assertEqual(got, {u[i] for i in allowed})
                r = sim("dgx-a100", "run", "-n", str(len(allowed) + 1), "--", "true", env=env)
                self.assertEqual(r.rc, EXIT_NOMATCH, r)

    def test_each_env(self):
        r = sim("dgx-a100", "run", "-n", "3", "--only", "1,4,7", "--each", "--", "sh", "-c",
                'echo "$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $CUDA_VISIBLE_DEVICES"')
        self.assertOk(r)
        rows = sorted(l.split() for l in r.out.splitlines())
        self.assertEqual([x[:4] for x in rows], [[str(i), str(i), "3", "3"] for i in range(3)])
        self.assertEqual(sorted(x[4] for x in rows),
                         sorted(A100.gpus[i]["uuid"] for i in (1, 4, 7)))


    def test_each_rendezvous(self):
        # torch.distributed's env:// needs MASTER_ADDR and MASTER_PORT, which torchrun
        # --standalone sets: --each gives every rank the same loopback address and free port,
        # and the ranks really meet there over TCP (rank 0 listens, the others connect: the
        # framework double's rendezvous, python/tests/frameworks/torch/distributed.py)
        meet = ("import os, torch.distributed as d\n"
                "e = os.environ\n"
                "d._meet(e['MASTER_ADDR'], int(e['MASTER_PORT']), int(e['RANK']),"
                " int(e['WORLD_SIZE']))\n"
                # one write(2) per rank: lines of ranks sharing a pipe never interleave
                "os.write(1, ('%s %s %s\\n' % (e['RANK'], e['MASTER_ADDR'],"
                " e['MASTER_PORT'])).encode())\n")
        env = {"PYTHONPATH": os.path.join(SRC, "python", "tests", "frameworks")}
        r = sim("dgx-a100", "run", "-n", "4", "--each", "--", "/usr/bin/python3", "-c", meet,
                env=env)
        self.assertOk(r)
        rows = sorted(line.split() for line in r.out.splitlines())
        self.assertEqual([x[0] for x in rows], ["0", "1", "2", "3"], r)
        self.assertEqual({x[1] for x in rows}, {"127.0.0.1"})
        self.assertEqual(len({x[2] for x in rows}), 1, r)
        self.assertTrue(1 <= int(rows[0][2]) <= 65535)
        # a job's own rendezvous (a multi-node launch) is kept, and --dry-run shows gpuctl's
        r = sim("dgx-a100", "run", "-n", "2", "--each", "--", "sh", "-c",
                'echo "$MASTER_ADDR $MASTER_PORT"',
                env={"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"})
        self.assertOk(r)
        self.assertEqual(r.out.splitlines(), ["10.0.0.1 29500"] * 2)
        r = sim("dgx-a100", "run", "-n", "2", "--each", "--dry-run", "--", "true",
                env={"MASTER_PORT": "29500"})
        self.assertOk(r)
        envs = [dict(w.split("=", 1) for w in shlex.split(b.splitlines()[1]))
                for b in r.out.strip().split("\n\n")]
        self.assertEqual([(e["MASTER_ADDR"], "MASTER_PORT" in e) for e in envs],
                         [("127.0.0.1", False)] * 2)
        # another host's address without a port: no port free here is made up for it
        r = sim("dgx-a100", "run", "-n", "2", "--each", "--", "sh", "-c",
                'echo "$MASTER_ADDR ${MASTER_PORT-unset}"', env={"MASTER_ADDR": "10.0.0.1"})
        self.assertOk(r)
        self.assertEqual(r.out.splitlines(), ["10.0.0.1 unset"] * 2)
        # without --each one process gets every GPU and no rendezvous is invented
        r = sim("dgx-a100", "run", "-n", "2", "--", "sh", "-c",
                'echo "${MASTER_ADDR-unset} ${MASTER_PORT-unset}"')
        self.assertOk(r)
        self.assertEqual(r.out, "unset unset\n")


class ExitStatus(GpuctlTestCase):
    def run_sh(self, code, *args):
        return sim("dgx-a100", "run", "-n", "1", *args, "--", "sh", "-c", code)

    def test_statuses(self):
        for code, rc in (("exit 0", 0), ("exit 1", 1), ("exit 42", 42), ("kill -TERM $$", 143),
                         ("kill -KILL $$", 137)):
            with self.subTest(code=code):
                self.assertEqual(self.run_sh(code).rc, rc)

    def test_not_found_127(self):
        r = sim("dgx-a100", "run", "-n", "1", "--", "/nonexistent/cmd")
        self.assertOneLineError(r, 127, "run:", "'/nonexistent/cmd'", "not found")
        r = sim("dgx-a100", "run", "-n", "1", "--", "no-such-command-gpuctl")
        self.assertOneLineError(r, 127, "'no-such-command-gpuctl'")

    def test_not_executable_126(self):
        with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as f:
            f.write("#!/bin/sh\nexit 0\n")
        try:
            os.chmod(f.name, 0o644)
            r = sim("dgx-a100", "run", "-n", "1", "--", f.name)
            self.assertOneLineError(r, 126, "cannot execute")
        finally:
            os.unlink(f.name)

    def test_nothing_satisfies_starts_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            mark = os.path.join(d, "ran")
            r = sim("dgx-a100", "run", "-n", "9", "--", "touch", mark)
            self.assertOneLineError(r, EXIT_NOMATCH, "run: need 9 GPUs")
            self.assertFalse(os.path.exists(mark))

    def test_usage(self):
        env = {"GPUCTL_NVML_LIBRARY": "/nonexistent"}
        for argv, needle in ((["run", "--", "true"], "-n"), (["run", "-n", "1"], "no command"),
                             (["run", "-n", "0", "--each", "--", "true"], "--each"),
                             (["run", "-n", "1", "--min-free-mem", "1XB", "--", "true"], "'1XB'"),
                             (["run", "-n", "1", "--mig", "1g.5gb", "--whole", "--", "true"],
                              "--whole")):
            with self.subTest(argv=argv):
                self.assertOneLineError(gpuctl(*argv, env=env), EXIT_USAGE, "run:", needle)

    def test_help(self):
        r = gpuctl("run", "--help")
        self.assertOk(r)
        for opt in ("-n, --count", "--min-free-mem", "--max-util", "--no-procs", "--only",
                    "--exclude", "--numa", "--mig", "--whole", "--allow-unhealthy",
                    "--ignore-outer", "--each", "--dry-run", "--no-bind", "--help",
                    "--lease-dir", "--label", "--ignore-foreign", "GPUCTL_LEASE_FDS",
                    "3  no GPU satisfies"):
            self.assertIn(opt, r.out)


CHILD = r"""
import os, signal, sys
out, ready = sys.argv[1], sys.argv[2]
# The signals are taken synchronously (blocked, then sigwait), not by handlers: Python runs a
# handler only between bytecodes, and an exception a handler raises inside a finalizer is
# printed and dropped, which would leave this process asleep. With --each a rank may also get
# gpuctl's SIGTERM (sent once another rank has exited, so after the forwarded signal): it
# records the forwarded one, as Linux hands out the lowest-numbered pending signal first and
# SIGTERM (15) is above every other signal here.
sigs = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
        signal.SIGUSR2}
signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
open(ready + os.environ.get("RANK", ""), "w").close()
sig = signal.sigwait(sigs)
with open(out, "a") as f:
    f.write("%d %s\n" % (sig, os.environ.get("RANK", "-")))
sys.exit(100 + sig)
"""


class Signals(GpuctlTestCase):
    """gpuctl is started directly (read-only scenario) so the test signals gpuctl itself."""

    def start(self, d, *args):
        script = os.path.join(d, "child.py")
        with open(script, "w") as f:
            f.write(CHILD)
        env = dict(os.environ)
        for k in ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "SLURM_JOB_GPUS",
                  "SLURM_STEP_GPUS"):
            env.pop(k, None)
        env.update({"GPUCTL_NVML_LIBRARY": SIMLIB,
                    "NVSIM_SCENARIO": os.path.join(SCENARIOS, "dgx-a100.json")})
        env.pop("NVSIM_STATE_DIR", None)
        p = subprocess.Popen([GPUCTL, "run", *args, "--", sys.executable, script,
                              os.path.join(d, "got"), os.path.join(d, "ready")], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return p

    def wait_ready(self, d, names):
        deadline = time.time() + 20
        while time.time() < deadline:
            if all(os.path.exists(os.path.join(d, n)) for n in names):
                return
            time.sleep(0.02)
        self.fail("child not ready")

    def test_each_signal_is_forwarded(self):
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT,
                    signal.SIGUSR1, signal.SIGUSR2):
            with self.subTest(sig=sig.name), tempfile.TemporaryDirectory() as d:
                p = self.start(d, "-n", "1")
                self.wait_ready(d, ["ready"])
                os.kill(p.pid, sig)
                out, err = communicate_or_explain(p, 30, [os.path.join(d, "got")])
                self.assertEqual(p.returncode, 100 + sig, err)
                with open(os.path.join(d, "got")) as f:
                    self.assertEqual(f.read().split(), [str(int(sig)), "-"])

    def test_signal_to_every_child_with_each(self):
        with tempfile.TemporaryDirectory() as d:
            p = self.start(d, "-n", "3", "--each")
            self.wait_ready(d, ["ready0", "ready1", "ready2"])
            os.kill(p.pid, signal.SIGUSR1)
            out, err = communicate_or_explain(p, 30, [os.path.join(d, "got")])
            self.assertEqual(p.returncode, 100 + signal.SIGUSR1, err)
            with open(os.path.join(d, "got")) as f:
                got = sorted(l.split()[1] for l in f.read().splitlines())
            # Each child got SIGUSR1 once (the others may then also get gpuctl's SIGTERM).
            with open(os.path.join(d, "got")) as f:
                usr1 = [l.split()[1] for l in f.read().splitlines()
                        if l.split()[0] == str(int(signal.SIGUSR1))]
            self.assertEqual(sorted(usr1), ["0", "1", "2"], got)

    def test_signal_ignored_at_start_stays_ignored(self):
        # nohup: gpuctl started with SIGHUP (and here SIGINT) ignored. Those stay ignored by
        # gpuctl (a SIGHUP to it is neither forwarded nor fatal) and by the command, which
        # inherits them as ignored, as it would without gpuctl; SIGUSR1 is still forwarded.
        child = (r"""
import signal, sys
sigign, ready = sys.argv[1], sys.argv[2]
with open("/proc/self/status") as f:
    mask = next(int(l.split()[1], 16) for l in f if l.startswith("SigIgn:"))
with open(sigign, "w") as f:
    f.write(" ".join(str(n) for n in range(1, 65) if mask >> (n - 1) & 1))
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
open(ready, "w").close()
sys.exit(100 + signal.sigwait({signal.SIGUSR1}))
""")

        def ignore():
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)

        with tempfile.TemporaryDirectory() as d:
            script = os.path.join(d, "child.py")
            with open(script, "w") as f:
                f.write(child)
            env = dict(os.environ, GPUCTL_NVML_LIBRARY=SIMLIB,
                       NVSIM_SCENARIO=os.path.join(SCENARIOS, "dgx-a100.json"))
            env.pop("NVSIM_STATE_DIR", None)
            p = subprocess.Popen([GPUCTL, "run", "-n", "1", "--", sys.executable, script,
                                  os.path.join(d, "sigign"), os.path.join(d, "ready")],
                                 env=env, preexec_fn=ignore, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            self.wait_ready(d, ["ready"])
            os.kill(p.pid, signal.SIGHUP)
            os.kill(p.pid, signal.SIGUSR1)
            out, err = communicate_or_explain(p, 30)
            self.assertEqual(p.returncode, 100 + signal.SIGUSR1, err)
            with open(os.path.join(d, "sigign")) as f:
                ignored = {int(n) for n in f.read().split()}
            self.assertLessEqual({int(signal.SIGHUP), int(signal.SIGINT)}, ignored)
            self.assertNotIn(int(signal.SIGUSR1), ignored)

    def test_child_killed_by_signal_is_128_plus_n(self):
        with tempfile.TemporaryDirectory() as d:
            r = sim("dgx-a100", "run", "-n", "1", "--", "sh", "-c", "kill -USR1 $$")
            self.assertEqual(r.rc, 128 + signal.SIGUSR1, r)


class Each(GpuctlTestCase):
    def test_first_failure_in_time_stops_the_rest(self):
        with tempfile.TemporaryDirectory() as d:
            # Ranks 0 and 2 wait (their TERM trap set first, then a ready file); rank 1 fails
            # once both are ready, so the stop always finds the traps in place. Rank 2 would
            # fail later with 9: the status is the first failure's.
            code = ('D=%s\n'
                    'if [ "$RANK" = 1 ]; then\n'
                    '  while [ ! -e $D/ready0 ] || [ ! -e $D/ready2 ]; do sleep 0.02; done\n'
                    '  exit 7\n'
                    'fi\n'
                    'trap \'echo $RANK >> $D/terminated; kill $!; exit 0\' TERM\n'
                    ': > $D/ready$RANK\n'
                    'sleep 60 & wait\n'
                    'exit 9\n' % d)
            r = sim("dgx-a100", "run", "-n", "3", "--each", "--", "sh", "-c", code)
            self.assertEqual(r.rc, 7, r)
            with open(os.path.join(d, "terminated")) as f:
                self.assertEqual(sorted(f.read().split()), ["0", "2"])

    def test_all_succeed(self):
        r = sim("dgx-a100", "run", "-n", "4", "--each", "--", "true")
        self.assertOk(r)


def binding_scenario(d):
    """A copy of workstation-mixed whose CPUs are this machine's first CPUs: GPU 0 on the
    lowest CPU this process may use, GPU 1 on the next (or the same on a one-CPU machine)."""
    with open(os.path.join(SCENARIOS, "workstation-mixed.json")) as f:
        doc = json.load(f)
    cpus = sorted(os.sched_getaffinity(0))
    c0, c1 = cpus[0], cpus[1] if len(cpus) > 1 else cpus[0]
    doc["cpus"]["numa_nodes"][0]["cpus"] = "%d-%d" % (min(c0, c1), max(c0, c1))
    doc["gpus"][0]["cpu_affinity"] = str(c0)
    doc["gpus"][1]["cpu_affinity"] = str(c1)
    path = os.path.join(d, "binding.json")
    with open(path, "w") as f:
        json.dump(doc, f)
    return path, {c0}, {c1}


def mem_policy():
    """'prefer:0' when node 0 is a NUMA node this process may allocate on, else 'default'."""
    with open("/proc/self/status") as f:
        mems = proc_status(f.read(), "Mems_allowed_list")
    if os.path.exists("/sys/devices/system/node/node0") and 0 in cpulist(mems):
        return "prefer:0"
    return "default"


SHOW = "grep -E 'Cpus_allowed_list|Mems_allowed_list' /proc/self/status; head -n 1 /proc/self/numa_maps"


class Binding(GpuctlTestCase):
    def child(self, path, *args):
        r = sim(path, "run", *args, "--", "sh", "-c", SHOW)
        self.assertOk(r)
        return r.out

    def test_cpus_and_memory_follow_the_gpu(self):
        with tempfile.TemporaryDirectory() as d:
            path, cpu0, cpu1 = binding_scenario(d)
            mine = os.sched_getaffinity(0)
            for only, want in (("0", cpu0), ("1", cpu1), ("0,1", cpu0 | cpu1)):
                with self.subTest(only=only):
                    n = len(only.split(","))
                    out = self.child(path, "-n", str(n), "--only", only)
                    self.assertEqual(cpulist(proc_status(out, "Cpus_allowed_list")), want & mine)
                    self.assertEqual(out.splitlines()[2].split()[1], mem_policy(), out)

    def test_each_binds_each_child_to_its_gpu(self):
        with tempfile.TemporaryDirectory() as d:
            path, cpu0, cpu1 = binding_scenario(d)
            r = sim(path, "run", "-n", "2", "--only", "0,1", "--each", "--", "sh", "-c",
                    'echo "$GPUCTL_GPUS $(grep Cpus_allowed_list /proc/self/status | cut -f2)"')
            self.assertOk(r)
            for line in r.out.splitlines():
                gpus, cpus = line.split()
                want = cpu0 if gpus.startswith("0:") else cpu1
                self.assertEqual(cpulist(cpus), want, r)

    def test_no_bind_leaves_affinity_alone(self):
        with tempfile.TemporaryDirectory() as d:
            path, _, _ = binding_scenario(d)
            out = self.child(path, "-n", "1", "--only", "0", "--no-bind")
            self.assertEqual(cpulist(proc_status(out, "Cpus_allowed_list")), os.sched_getaffinity(0))
            self.assertEqual(out.splitlines()[2].split()[1], "default", out)

    def test_no_intersection_no_binding(self):
        # dgx-a100's GPU CPUs (48-63,...) are outside this machine's CPUs unless it is large.
        mine = os.sched_getaffinity(0)
        aff = cpulist(A100.cpu_affinity(0))
        if aff & mine:
            self.skipTest("this machine has the DGX's CPUs")
        r = sim("dgx-a100", "-v", "run", "-n", "1", "--only", "0", "--", "sh", "-c", SHOW)
        self.assertOk(r)
        self.assertEqual(cpulist(proc_status(r.out, "Cpus_allowed_list")), mine)
        self.assertIn("not bound", r.err)


class DryRun(GpuctlTestCase):
    def test_prints_and_starts_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            mark = os.path.join(d, "ran")
            r = sim("dgx-a100", "run", "-n", "2", "--only", "2,3", "--dry-run", "--",
                    "touch", mark, "it's")
            self.assertOk(r)
            self.assertFalse(os.path.exists(mark))
            lines = r.out.splitlines()
            env = dict(w.split("=", 1) for w in shlex.split(lines[0]))
            u = [A100.gpus[i]["uuid"] for i in (2, 3)]
            self.assertEqual(sorted(env["CUDA_VISIBLE_DEVICES"].split(",")), sorted(u))
            self.assertEqual(env["CUDA_DEVICE_ORDER"], "PCI_BUS_ID")
            self.assertTrue(lines[1].startswith("cpus: "), r)
            self.assertTrue(lines[2].startswith("memory: "), r)
            self.assertEqual(shlex.split(lines[3][len("command:"):]), ["touch", mark, "it's"])

    def test_each_one_block_per_child(self):
        r = sim("dgx-a100", "run", "-n", "3", "--each", "--dry-run", "--", "true")
        self.assertOk(r)
        blocks = r.out.strip().split("\n\n")
        self.assertEqual(len(blocks), 3, r)
        for i, b in enumerate(blocks):
            lines = b.splitlines()
            self.assertEqual(lines[0], "# rank %d" % i)
            env = dict(w.split("=", 1) for w in shlex.split(lines[1]))
            self.assertEqual(env["RANK"], str(i))
            self.assertEqual(env["WORLD_SIZE"], "3")
            self.assertEqual(len(env["CUDA_VISIBLE_DEVICES"].split(",")), 1)

    def test_n0(self):
        r = sim("dgx-a100", "run", "-n", "0", "--dry-run", "--", "true")
        self.assertOk(r)
        env = dict(w.split("=", 1) for w in shlex.split(r.out.splitlines()[0]))
        self.assertEqual(env["CUDA_VISIBLE_DEVICES"], "")


if __name__ == "__main__":
    unittest.main()
