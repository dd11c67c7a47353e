"""gpuctl against a real Slurm 22.05 (Debian's daemons, tests/cli/slurm_cluster.py): the
generated gres.conf as slurmd reads it, jobs landing on the GPUs Slurm allotted, and the
HealthCheckProgram draining and resuming the node.

Expected values come from the published topologies (sim/scenarios/*.json sources: DGX A100's
two 64-core EPYC 7742 with SMT and GPU pairs on NUMA nodes 3, 1, 7, 5; DGX-1's hybrid cube
mesh), from Slurm's own reading (slurmd's DebugFlags=Gres log, slurmd -C through hwloc,
scontrol) and from the gres.conf each test writes, never from gpuctl's output alone."""
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest

from gpuctl_test import BUILD, GPUCTL, SRC, scenario_gpus
from slurm_cluster import HWLOC_ENV, NVSIM_LOAD, Cluster, Machine, wait_for

# (sockets, cores per socket, threads per core) as published (scenario sources)
PUBLISHED_CPUS = {
    "dgx-a100": (2, 64, 2),   # two AMD EPYC 7742, 64 cores, SMT2
    "dgx1-v100": (2, 20, 2),  # two Xeon E5-2698 v4, 20 cores, HT
    "pcie-8gpu": (2, 32, 2),  # two 32-core Xeons with HT (the scenario's own declaration)
}


class SlurmCase(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="gpuctl-slurm-")
        os.chmod(self.root, 0o755)
        self.clusters = []

    def tearDown(self):
        for c in self.clusters:
            c.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def machine(self, scenario):
        return Machine(self.root, scenario)

    def gres(self, m, *extra):
        r = subprocess.run([GPUCTL, "slurm", "gres", "--node", "localhost", "--dev-dir",
                            os.path.join(self.root, "dev"), *extra],
                           env={**os.environ, **m.env}, capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def cluster(self, m, gres_conf, gres, **kw):
        c = Cluster(m, self.root, gres_conf, gres, PUBLISHED_CPUS[m.scenario], **kw)
        self.clusters.append(c)
        return c

    def records(self, c):
        """slurmd's own reading of gres.conf (DebugFlags=Gres): one dict per GPU record."""
        out = []
        for line in c.log("slurmd").splitlines():
            m = re.search(r"Gres Name=gpu Type=(\S+) Count=1 Index=\d+ ID=\d+ File=(\S+)"
                          r"(?: Cores=(\S+) CoreCnt=\d+)? Links=(\S+)", line)
            if m:
                out.append({"type": m[1], "file": m[2], "cores": m[3], "links": m[4]})
        return out


class GeneratedGres(SlurmCase):
    def check_accepted(self, scenario, want_type, want_cores, want_links):
        m = self.machine(scenario)
        text = self.gres(m)
        info = json.loads(self.gres(m, "--format", "json"))
        n = len(scenario_gpus(scenario))
        # slurmd -C reads the same CPU topology through hwloc: the published counts
        r = subprocess.run(["slurmd", "-C"], env={**os.environ, **HWLOC_ENV,
                                                  "HWLOC_FSROOT": m.fsroot},
                           capture_output=True, text=True, timeout=60)
        s, c, t = PUBLISHED_CPUS[scenario]
        self.assertIn("CPUs=%d Boards=1 SocketsPerBoard=%d CoresPerSocket=%d ThreadsPerCore=%d"
                      % (s * c * t, s, c, t), r.stdout)
        self.assertEqual(info["cpus"], {"cpus": s * c * t, "sockets": s, "cores_per_socket": c,
                                        "threads_per_core": t})
        self.assertEqual(info["gres"], "gpu:%s:%d" % (want_type, n))
        cl = self.cluster(m, text, info["gres"])
        self.assertEqual(cl.node_state(), "idle", cl.log("slurmd")[-3000:])
        recs = self.records(cl)
        self.assertEqual(len(recs), n, cl.log("slurmd")[-3000:])
        for i, rec in enumerate(recs):
            self.assertEqual(rec["type"], want_type)
            self.assertEqual(rec["file"], os.path.join(self.root, "dev", "nvidia%d" % i))
            self.assertEqual(rec["cores"], want_cores[i], rec)
            self.assertEqual(rec["links"], want_links[i], rec)
        self.assertNotRegex(cl.log("slurmd"), r"(?i)(error|fatal).*gres")
        # Slurm turns the Cores into sockets for the node's GRES
        self.assertIn("Gres=gpu:%s:%d(S:0-1)" % (want_type, n),
                      cl.run(["scontrol", "show", "node", "-d", "localhost"]).stdout)
        return m, cl

    def test_dgx_a100(self):
        # NUMA 3 (CPUs 48-63) for GPUs 0-1, 1 (16-31) for 2-3, 7 (112-127) for 4-5, 5 (80-95)
        # for 6-7; CPUs 176-191 are the SMT siblings of 48-63, so the same cores. NVSwitch:
        # twelve links from every GPU into the fabric, so every pair counts 12.
        cores = ["48-63", "48-63", "16-31", "16-31", "112-127", "112-127", "80-95", "80-95"]
        links = [",".join("-1" if j == i else "12" for j in range(8)) for i in range(8)]
        self.check_accepted("dgx-a100", "a100", cores, links)

    def test_dgx1_v100(self):
        # DGX-1 hybrid cube mesh (NVIDIA's DGX-1 whitepaper, scenario sources): NVLinks per pair
        mesh = [[-1, 1, 1, 2, 2, 0, 0, 0], [1, -1, 2, 1, 0, 2, 0, 0],
                [1, 2, -1, 2, 0, 0, 1, 0], [2, 1, 2, -1, 0, 0, 0, 1],
                [2, 0, 0, 0, -1, 1, 1, 2], [0, 2, 0, 0, 1, -1, 2, 1],
                [0, 0, 1, 0, 1, 2, -1, 2], [0, 0, 0, 1, 2, 1, 2, -1]]
        cores = ["0-19"] * 4 + ["20-39"] * 4
        m, cl = self.check_accepted("dgx1-v100", "v100", cores,
                                    [",".join(map(str, row)) for row in mesh])
        # What cons_tres does with our Links on a 2-GPU request (recorded, docs/slurm.md): it
        # takes GPUs 0 and 3, a pair with two NVLinks, not 0 and 1 (one link) nor the lowest
        # indices.
        r = cl.srun("--gres=gpu:2", "/usr/bin/printenv", "SLURM_STEP_GPUS")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = [int(x) for x in r.stdout.strip().split(",")]
        self.assertEqual(len(got), 2)
        self.assertEqual(mesh[got[0]][got[1]], 2, "cons_tres chose %s" % got)

    def test_lost_gpu_is_left_out(self):
        # issue 24, finding 9c: one lost GPU made the whole gres.conf fail. Now the others'
        # lines are written (the hybrid cube mesh of test_dgx1_v100 without GPU 3), a warning
        # names the lost GPU, exit 1 (docs/slurm.md).
        mesh = [[-1, 1, 1, 2, 2, 0, 0, 0], [1, -1, 2, 1, 0, 2, 0, 0],
                [1, 2, -1, 2, 0, 0, 1, 0], [2, 1, 2, -1, 0, 0, 0, 1],
                [2, 0, 0, 0, -1, 1, 1, 2], [0, 2, 0, 0, 1, -1, 2, 1],
                [0, 0, 1, 0, 1, 2, -1, 2], [0, 0, 0, 1, 2, 1, 2, -1]]
        kept = [0, 1, 2, 4, 5, 6, 7]
        m = self.machine("dgx1-v100")
        m.nvsim("set", "-i", "3", "lost=1")
        outs = []
        for fmt in ("text", "json"):
            r = subprocess.run([GPUCTL, "slurm", "gres", "--node", "localhost", "--dev-dir",
                                os.path.join(self.root, "dev"), "--format", fmt],
                               env={**os.environ, **m.env}, capture_output=True, text=True,
                               timeout=60)
            self.assertEqual(r.returncode, 1, r)
            lines = r.stderr.splitlines()
            self.assertEqual(len(lines), 1, r.stderr)
            self.assertTrue(lines[0].startswith("gpuctl: slurm gres: warning: GPU 3 is lost"),
                            r.stderr)
            outs.append(r.stdout)
        text, info = outs[0], json.loads(outs[1])
        self.assertEqual(info["lost"], [3])
        self.assertEqual([g["index"] for g in info["gpus"]], kept)
        self.assertEqual(info["gres"], "gpu:v100:7")
        self.assertIn("# Left out, lost (NVML cannot reach it): GPU 3.", text)
        # slurmd takes the seven records, with the links among them
        cl = self.cluster(m, text, info["gres"])
        self.assertEqual(cl.node_state(), "idle", cl.log("slurmd")[-3000:])
        recs = self.records(cl)
        self.assertEqual([r["file"] for r in recs],
                         [os.path.join(self.root, "dev", "nvidia%d" % i) for i in kept])
        self.assertEqual([r["links"] for r in recs],
                         [",".join(str(mesh[i][j]) for j in kept) for i in kept])

    def test_lost_gpu_drains_a_node_configured_with_it(self):
        # docs/slurm.md: a slurm.conf that still counts the lost GPU gets the node refused
        m = self.machine("dgx1-v100")
        m.nvsim("set", "-i", "3", "lost=1")
        r = subprocess.run([GPUCTL, "slurm", "gres", "--node", "localhost", "--dev-dir",
                            os.path.join(self.root, "dev")], env={**os.environ, **m.env},
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1, r)
        cl = self.cluster(m, r.stdout, "gpu:v100:8")
        self.assertEqual(cl.node_state(), "inval")
        self.assertIn("gres/gpu count reported lower than configured (7 < 8)", cl.show_node())

    def test_pcie_8gpu(self):
        cores = ["0-31"] * 4 + ["32-63"] * 4
        links = [",".join("-1" if j == i else "0" for j in range(8)) for i in range(8)]
        self.check_accepted("pcie-8gpu", "a100", cores, links)


class JobsLand(SlurmCase):
    """A gres.conf listing a subset out of PCI order: Slurm's GPU i is the i-th line's file."""

    def setUp(self):
        super().setUp()
        self.m = self.machine("dgx1-v100")
        self.uuids = [g["uuid"] for g in scenario_gpus("dgx1-v100")]
        lines = {int(re.search(r"nvidia(\d+)", ln)[1]): re.sub(r" Links=\S+", "", ln)
                 for ln in self.gres(self.m).splitlines() if "Name=gpu" in ln}
        self.order = [6, 3, 2, 5]  # Slurm's GPUs 0..3 are /dev/nvidia6, 3, 2, 5
        text = "NodeName=localhost AutoDetect=off\n" + "\n".join(lines[k] for k in self.order)
        self.c = self.cluster(self.m, text + "\n", "gpu:v100:4")

    def ledger(self):
        try:
            with open(self.m.ledger) as f:
                return [json.loads(x) for x in f]
        except FileNotFoundError:
            return []

    def test_run_inside_srun_lands_on_the_allotted_gpus(self):
        for count in (1, 2, 3):
            before = len(self.ledger())
            r = self.c.srun("--gres=gpu:%d" % count, "/bin/sh", "-c",
                            'echo "$SLURM_STEP_GPUS"; exec %s run -n %d -- %s --seconds 0 '
                            '--ledger %s' % (GPUCTL, count, NVSIM_LOAD, self.m.ledger))
            self.assertEqual(r.returncode, 0, r.stderr)
            slurm = [int(x) for x in r.stdout.splitlines()[0].split(",")]
            want = {self.uuids[self.order[p]] for p in slurm}
            rows = self.ledger()[before:]
            self.assertEqual(len(rows), 1, rows)
            self.assertEqual({d["uuid"] for d in rows[0]["devices"]}, want,
                             "Slurm allotted %s" % slurm)

    def test_each_ranks_follow_the_steps_gpus(self):
        before = len(self.ledger())
        r = self.c.srun("--gres=gpu:3", "/bin/sh", "-c",
                        'echo "$SLURM_STEP_GPUS"; exec %s run -n 3 --each -- %s --seconds 0 '
                        '--ledger %s' % (GPUCTL, NVSIM_LOAD, self.m.ledger))
        self.assertEqual(r.returncode, 0, r.stderr)
        slurm = [int(x) for x in r.stdout.splitlines()[0].split(",")]
        rows = self.ledger()[before:]
        self.assertEqual(len(rows), 3, rows)
        got = [d["uuid"] for row in rows for d in row["devices"]]
        self.assertEqual(sorted(got), sorted(self.uuids[self.order[p]] for p in slurm))

    def test_select_and_python_inside_srun_choose_within_the_step(self):
        # the CLI and the Python package (one allocation call in libgpuctl) see the same GPUs
        py = ("import gpuctl, os; print(os.environ['SLURM_STEP_GPUS']); "
              "print(','.join(sorted(d.uuid for d in gpuctl.select(2))))")
        pyenv = {"PYTHONPATH": os.path.join(SRC, "python"),
                 "GPUCTL_LIBRARY": os.path.join(BUILD, "lib", "libgpuctl.so.0")}
        if os.environ.get("GPUCTL_PYTHON_PRELOAD"):
            pyenv["LD_PRELOAD"] = os.environ["GPUCTL_PYTHON_PRELOAD"]
            pyenv["ASAN_OPTIONS"] = "detect_leaks=0"
        r = self.c.run(["srun", "-N1", "-n1", "--gres=gpu:2", "/usr/bin/python3", "-c", py],
                       env=pyenv, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        slurm, chosen = r.stdout.splitlines()[:2]
        want = sorted(self.uuids[self.order[int(p)]] for p in slurm.split(","))
        self.assertEqual(chosen.split(","), want)
        r = self.c.srun("--gres=gpu:2", "/bin/sh", "-c",
                        'echo "$SLURM_STEP_GPUS"; exec %s select -n 2' % GPUCTL)
        self.assertEqual(r.returncode, 0, r.stderr)
        slurm, line = r.stdout.splitlines()[:2]
        want = sorted(self.uuids[self.order[int(p)]] for p in slurm.split(","))
        self.assertEqual(sorted(line.split("=", 1)[1].split(",")), want)
        # asking for more than the step has is refused: everything else is outside
        r = self.c.srun("--gres=gpu:2", "/bin/sh", "-c",
                        'echo "$SLURM_STEP_GPUS"; exec %s select -n 3' % GPUCTL)
        self.assertEqual(r.returncode, 3, r.stderr)
        inside = {self.order[int(p)] for p in r.stdout.split()[0].split(",")}
        outside = ",".join(str(i) for i in range(8) if i not in inside)
        self.assertIn("need 3 GPUs, 2 qualify: outside the allocation of SLURM_STEP_GPUS: %s "
                      "(--ignore-outer chooses among all GPUs)\n" % outside, r.stderr)

    def test_sbatch_job_gpus(self):
        # a batch script sees SLURM_JOB_GPUS (no step variable) and Slurm's CUDA_VISIBLE_DEVICES
        script = os.path.join(self.m.state, "..", "job.sh")
        out = os.path.join(self.m.state, "..", "job.out")
        with open(script, "w") as f:
            f.write("#!/bin/sh\necho \"$SLURM_JOB_GPUS\"\n"
                    "exec %s run -n 2 --each -- %s --seconds 0 --ledger %s\n"
                    % (GPUCTL, NVSIM_LOAD, self.m.ledger))
        r = self.c.run(["sbatch", "--wait", "--gres=gpu:2", "-o", out, script], timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(out) as f:
            lines = f.read().splitlines()
        slurm = [int(x) for x in lines[0].split(",")]
        got = sorted(d["uuid"] for row in self.ledger() for d in row["devices"])
        self.assertEqual(got, sorted(self.uuids[self.order[p]] for p in slurm), lines)

    def test_concurrent_steps_stay_disjoint(self):
        script = ('echo "$SLURM_STEP_GPUS"; exec %s run -n 2 -- %s --seconds 3 --ledger %s'
                  % (GPUCTL, NVSIM_LOAD, self.m.ledger))
        procs = [subprocess.Popen(["srun", "-N1", "-n1", "--gres=gpu:2", "/bin/sh", "-c",
                                   script], env=self.c.env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(2)]
        outs = [p.communicate(timeout=120) for p in procs]
        for p, (out, err) in zip(procs, outs):
            self.assertEqual(p.returncode, 0, err)
        steps = [[int(x) for x in out.splitlines()[0].split(",")] for out, _ in outs]
        self.assertFalse(set(steps[0]) & set(steps[1]), steps)
        rows = self.ledger()
        self.assertEqual(len(rows), 2)
        got = [frozenset(d["uuid"] for d in row["devices"]) for row in rows]
        want = {frozenset(self.uuids[self.order[p]] for p in s) for s in steps}
        self.assertEqual(set(got), want)


class HealthCheck(SlurmCase):
    def test_drain_resume_and_an_admins_drain(self):
        m = self.machine("dgx-a100")
        info = json.loads(self.gres(m, "--format", "json"))
        c = self.cluster(m, self.gres(m), info["gres"], health=True)
        wait_for(lambda: c.node_state() == "idle", 60, "idle")
        m.nvsim("xid", "-i", "0", "79")
        wait_for(lambda: "DRAIN" in c.show_node(), 60,
                 "the drain (health.log: %s)" % c.log("health"))
        reason = re.search(r"Reason=(.*?) \[", c.show_node())[1]
        self.assertTrue(reason.startswith("gpuctl: GPU 0 FAIL"), reason)
        self.assertIn("79", reason)
        # the driver reloads: the XID no longer counts, and gpuctl resumes its own drain
        with open(m.env["GPUCTL_KMSG"], "a") as f:
            f.write("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15\n")
        wait_for(lambda: "DRAIN" not in c.show_node(), 60, "the resume")
        # an administrator's drain is never resumed by gpuctl
        r = c.run(["scontrol", "update", "NodeName=localhost", "State=DRAIN",
                   "Reason=maintenance"])
        self.assertEqual(r.returncode, 0, r.stderr)
        n = c.log("health").count("\n")
        wait_for(lambda: c.log("health").count("\n") > n + 1, 60, "two more checks")
        self.assertIn("DRAIN", c.show_node())
        self.assertIn("Reason=maintenance", c.show_node())


if __name__ == "__main__":
    unittest.main()
