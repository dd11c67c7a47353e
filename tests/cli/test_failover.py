"""`gpuctl run --retry N` end to end (issue 5, "Failover"): when a GPU of the job fails (lost,
uncorrectable ECC errors, a row-remap failure: the failures a health snapshot shows), gpuctl stops
the job (SIGTERM to its process group, SIGKILL after --grace), selects again without the failed
GPU while still holding the job's GPUs (issue 16: the healthy ones are kept, nobody can take them
in between; no replacement: one line, released only after it, exit 3) and relaunches with GPUCTL_RESTART_COUNT set; at most N times; a job that
fails by itself on healthy GPUs is not relaunched unless --retry-on any; exit 5 when a GPU
failed once more and no failover was left.

The witness is the simulated CUDA driver's ledger (nvsim-load: which GPUs each launch really
used, and when). Expected values come from the documented behaviour, never from gpuctl's
output. Each test runs on a fresh simulated dgx-a100 with a lease directory of its own."""
import json
import os
import shutil
import tempfile
import textwrap
import unittest

from gpuctl_test import BUILD, EXIT_USAGE, GPUCTL, NVSIM, GpuctlTestCase, run
from test_leases import direct_env

LOAD = os.path.join(BUILD, "bin", "nvsim-load")

# A job whose first launch runs for a long time and whose relaunches are short; it says which
# launch it is. EXTRA: what the relaunch does after its load (exit status).
JOB = ('if [ "$GPUCTL_RESTART_COUNT" = 0 ]; then exec "$LOAD" --seconds 30; '
       'else "$LOAD" --seconds 0.3; exit ${RELAUNCH_STATUS:-0}; fi')

DRIVER = textwrap.dedent(r'''
    import json, os, subprocess, sys, time
    G, NV = os.environ["GPUCTL"], os.environ["NVSIM"]
    state = os.environ["NVSIM_STATE_DIR"]
    def ledger():
        try:
            with open(os.path.join(state, "ledger.jsonl")) as f:
                return [json.loads(l) for l in f if l.startswith("{")]
        except FileNotFoundError:
            return []
    def leased():
        p = subprocess.run([G, "ps", "--format", "json"], capture_output=True, text=True)
        return sorted(d["index"] for d in json.loads(p.stdout)["devices"]
                      if d["state"] == "leased")
    args = json.loads(os.environ["RUN_ARGS"])
    err_path = os.path.join(state, "job.err")  # a file: the rival reads what was said so far
    job = subprocess.Popen([G, "run", *args, "--", "sh", "-c", os.environ["JOB"]],
                           stdout=subprocess.DEVNULL, stderr=open(err_path, "w"), text=True)
    injected = []
    compete = os.environ.get("COMPETE")  # "1": another job waits for the healthy GPU
    rival = None
    for step in json.loads(os.environ["INJECT"]):
        # wait until the launch numbered step["launch"] holds its GPUs, then break one of them
        # and its job has its CUDA contexts there (nvsim-load's processes on every GPU it holds:
        # gpuctl watches them from before the job starts, and a GPU lost before the contexts
        # exist would make the job fail by itself)
        def busy(gpus):
            p = subprocess.run([G, "list", "--format", "json"], capture_output=True, text=True)
            return all(json.loads(p.stdout)["gpus"][i]["processes"] for i in gpus)
        end = time.time() + 60
        while time.time() < end:
            held = leased()
            if len(held) == step["count"] and len(ledger()) == step["launch"] and busy(held):
                break
            time.sleep(0.02)
        gpu = held[0]
        if compete and rival is None:
            # a rival waits in line for the job's other (healthy) GPU; when it starts it
            # copies what the job's gpuctl had said by then
            saw = os.path.join(state, "rival-saw")
            rival = subprocess.Popen(
                [G, "run", "--wait=60", "-n", "1", "--only", str(held[1]), "--", "sh", "-c",
                 'cp %s %s; exec "$LOAD" --seconds 0' % (err_path, saw)],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            end = time.time() + 20
            while time.time() < end:
                p = subprocess.run([G, "ps", "--waiting", "--format", "json"],
                                   capture_output=True, text=True)
                if any(w["pid"] == rival.pid for w in json.loads(p.stdout)["waiting"]):
                    break
                time.sleep(0.02)
            rival_gpu = held[1]
        injected.append({"gpu": gpu, "at": time.time()})
        if step["what"].startswith("xid:"):
            subprocess.run([NV, "xid", "-i", str(gpu), step["what"][4:]], check=True)
        else:
            subprocess.run([NV, "set", "-i", str(gpu), step["what"]], check=True)
    rc = job.wait(90)
    with open(err_path) as f:
        out = {"rc": rc, "err": f.read(), "injected": injected}
    if rival is not None:
        out["rival_gpu"] = rival_gpu
        out["rival_rc"] = rival.wait(60)
        try:
            with open(os.path.join(state, "rival-saw")) as f:
                out["said_at_rival_start"] = f.read()
        except FileNotFoundError:
            out["said_at_rival_start"] = None
    out["ledger"] = ledger()
    print(json.dumps(out))
''')


@unittest.skipUnless(os.path.exists(LOAD), "nvsim-load not built")
class Failover(GpuctlTestCase):
    def go(self, args, inject, job=JOB, extra=None):
        tmp = tempfile.mkdtemp(prefix="gpuctl-failover-")
        self.addCleanup(shutil.rmtree, tmp, True)
        env = direct_env(os.path.join(tmp, "leases"))
        env.pop("GPUCTL_NVML_LIBRARY")
        env.pop("NVSIM_SCENARIO")
        env.update(GPUCTL=GPUCTL, NVSIM=NVSIM, LOAD=LOAD, DRIVER=DRIVER, JOB=job,
                   RUN_ARGS=json.dumps(args), INJECT=json.dumps(inject))
        if extra:
            env.update(extra)
        r = run([NVSIM, "exec", "dgx-a100", "--", "sh", "-c", 'python3 -c "$DRIVER"'], env=env,
                timeout=120)
        self.assertEqual(r.rc, 0, r)
        return json.loads(r.out.strip().splitlines()[-1])

    @staticmethod
    def gpus(entry):
        return {d["uuid"] for d in entry["devices"]}

    def uuid_of(self, res, k):
        # the injected GPU by index: the scenario's UUID at that index
        from cli_facts import Machine
        return Machine("dgx-a100").gpus[res["injected"][k]["gpu"]]["uuid"]

    def test_lost_gpu_relaunches_elsewhere(self):
        res = self.go(["-n", "2", "--retry", "2"], [{"launch": 0, "count": 2, "what": "lost=1"}])
        self.assertEqual(res["rc"], 0, res)  # the job's status: its relaunch succeeded
        first, second = res["ledger"]
        failed = self.uuid_of(res, 0)
        self.assertIn(failed, self.gpus(first))
        self.assertNotIn(failed, self.gpus(second), res)
        self.assertEqual(len(self.gpus(second)), 2)
        # how soon: bench/health_bench.py measures it (bench/RESULTS.md, "Health and
        # failover"), never a timed test
        self.assertIn("lost", res["err"])
        self.assertIn("failover 1 of 2", res["err"])

    def test_xid_79_relaunches_elsewhere(self):
        # the case: a fence-class XID (79, fallen off the bus) through NVML's events
        res = self.go(["-n", "2", "--retry", "2"], [{"launch": 0, "count": 2, "what": "xid:79"}])
        self.assertEqual(res["rc"], 0, res)
        first, second = res["ledger"]
        failed = self.uuid_of(res, 0)
        self.assertIn(failed, self.gpus(first))
        self.assertNotIn(failed, self.gpus(second), res)
        self.assertGreater(second["start"], res["injected"][0]["at"])  # because of the XID
        self.assertIn("79", res["err"])

    def test_application_xid_does_not_move_the_job(self):
        # XID 13 (graphics engine exception) is of the application class: WARN, no failover
        res = self.go(["-n", "1", "--retry", "2"], [{"launch": 0, "count": 1, "what": "xid:13"}],
                      job='"$LOAD" --seconds 1.5')
        self.assertEqual(res["rc"], 0, res)
        self.assertEqual(len(res["ledger"]), 1, res)

    def test_ecc_and_remap_failures(self):
        for what in ("ecc.volatile.uncorrected=2", "remap.failure=1"):
            with self.subTest(what=what):
                res = self.go(["-n", "1", "--retry", "1"],
                              [{"launch": 0, "count": 1, "what": what}])
                self.assertEqual(res["rc"], 0, res)
                first, second = res["ledger"]
                self.assertNotEqual(self.gpus(first), self.gpus(second))
                self.assertIn(self.uuid_of(res, 0), self.gpus(first))

    def test_failed_gpu_stays_out_even_when_unhealthy_gpus_are_allowed(self):
        # --allow-unhealthy lets GPUs with ECC errors be chosen; the one that failed under this
        # job is still never chosen again (here the other GPU of --only is the only choice)
        res = self.go(["-n", "1", "--retry", "1", "--allow-unhealthy", "--only", "0,1"],
                      [{"launch": 0, "count": 1, "what": "ecc.volatile.uncorrected=1"}])
        self.assertEqual(res["rc"], 0, res)
        first, second = res["ledger"]
        self.assertIn(self.uuid_of(res, 0), self.gpus(first))
        self.assertNotIn(self.uuid_of(res, 0), self.gpus(second))

    def test_failover_keeps_the_healthy_gpu_until_the_replacement_is_leased(self):
        # issue 16: the job's healthy GPU is never let go while a replacement is sought. A
        # rival waits in line for exactly that GPU; the job (2 of GPUs 0-2) loses one GPU and
        # moves to the healthy one plus GPU 2. The rival gets the healthy GPU only after the
        # job has ended. With --wait too: the rival, older in line, waits for that very GPU,
        # but the job's own GPUs are not the rival's to reserve.
        for wait in ([], ["--wait=60"]):
            with self.subTest(wait=wait):
                self.keeps_the_healthy_gpu(wait)

    def keeps_the_healthy_gpu(self, wait):
        res = self.go(["-n", "2", "--only", "0,1,2", "--retry", "1"] + wait,
                      [{"launch": 0, "count": 2, "what": "xid:79"}], extra={"COMPETE": "1"})
        self.assertEqual(res["rc"], 0, res)
        job = [e for e in res["ledger"] if e["cuda_visible_devices"] and
               len(e["devices"]) == 2]
        self.assertEqual(len(job), 2, res)
        first, second = job
        failed = self.uuid_of(res, 0)
        from cli_facts import Machine
        healthy = Machine("dgx-a100").gpus[res["rival_gpu"]]["uuid"]
        self.assertEqual(self.gpus(first), {failed, healthy}, res)
        self.assertIn(healthy, self.gpus(second), res)
        self.assertNotIn(failed, self.gpus(second), res)
        self.assertEqual(res["rival_rc"], 0, res)
        # the rival's run (the ledger, what the simulated CUDA opened) began on the healthy GPU
        # after the relaunched job's had ended: never in between the two launches
        (rival,) = [e for e in res["ledger"] if len(e["devices"]) == 1]
        self.assertEqual(self.gpus(rival), {healthy}, res)
        self.assertGreaterEqual(rival["start"], second["end"], res)

    def test_failover_without_a_replacement_holds_until_it_says_so(self):
        # no replacement (the job may use GPUs 0 and 1 only): one line saying so, exit 3, and
        # the healthy GPU stays the job's until that line is written. With --wait too: without
        # the failed GPU the request can never be satisfied, so it does not wait.
        for wait in ([], ["--wait=60"]):
            with self.subTest(wait=wait):
                self.no_replacement(wait)

    def no_replacement(self, wait):
        res = self.go(["-n", "2", "--only", "0,1", "--retry", "1"] + wait,
                      [{"launch": 0, "count": 2, "what": "xid:79"}], extra={"COMPETE": "1"})
        self.assertEqual(res["rc"], 3, res)
        self.assertIn("no replacement", res["err"], res)
        if wait:
            self.assertIn("can never be satisfied", res["err"], res)
        self.assertEqual(len([l for l in res["err"].splitlines() if "no replacement" in l]), 1)
        self.assertEqual(res["rival_rc"], 0, res)
        # the healthy GPU was let go only after the line saying there is no replacement (the
        # rival copied gpuctl's messages when it started; gpuctl's exit itself may come a little
        # later, as the lease ends before the process does)
        self.assertIn("no replacement", res["said_at_rival_start"] or "", res)

    def test_gives_up_after_n_failovers(self):
        res = self.go(["-n", "1", "--retry", "1", "--grace", "1"],
                      [{"launch": 0, "count": 1, "what": "lost=1"},
                       {"launch": 1, "count": 1, "what": "lost=1"}],
                      job='exec "$LOAD" --seconds 30')
        self.assertEqual(res["rc"], 5, res)
        self.assertIn("gave up after 1 failover", res["err"])
        self.assertEqual(len(res["ledger"]), 2)

    def test_relaunch_status_is_the_jobs(self):
        res = self.go(["-n", "1", "--retry", "2"], [{"launch": 0, "count": 1, "what": "lost=1"}],
                      extra={"RELAUNCH_STATUS": "7"})
        self.assertEqual(res["rc"], 7, res)  # the relaunched job's own failure, not retried
        self.assertEqual(len(res["ledger"]), 2)

    def test_job_failure_on_healthy_gpus(self):
        job = '"$LOAD" --seconds 0.2; echo $GPUCTL_RESTART_COUNT >> "$NVSIM_STATE_DIR/n"; exit 3'
        res = self.go(["-n", "1", "--retry", "2"], [], job=job)
        self.assertEqual(res["rc"], 3, res)
        self.assertEqual(len(res["ledger"]), 1)
        res = self.go(["-n", "1", "--retry", "2", "--retry-on", "any"], [], job=job)
        self.assertEqual(res["rc"], 3, res)
        self.assertEqual(len(res["ledger"]), 3)  # the first launch and two relaunches

    def test_grace_then_sigkill(self):
        # the job ignores SIGTERM: after --grace 1 it gets SIGKILL, whole process group
        job = ('if [ "$GPUCTL_RESTART_COUNT" = 0 ]; then trap "" TERM; "$LOAD" --seconds 30 & '
               'trap "" TERM; wait; else exit 0; fi')
        res = self.go(["-n", "1", "--retry", "1", "--grace", "1"],
                      [{"launch": 0, "count": 1, "what": "lost=1"}], job=job)
        self.assertEqual(res["rc"], 0, res)
        self.assertIn("SIGKILL after 1 s", res["err"])

    def test_usage(self):
        tmp = tempfile.mkdtemp(prefix="gpuctl-failover-")
        self.addCleanup(shutil.rmtree, tmp, True)
        env = direct_env(tmp)
        for args, needle in ((["--retry", "x"], "--retry"), (["--retry", "101"], "--retry"),
                             (["--grace", "-1"], "--grace"), (["--retry-on", "all"], "--retry-on"),
                             (["--retry", "1", "--dry-run"], "--dry-run"),
                             (["-n", "0", "--retry", "1"], "-n 0")):
            with self.subTest(args=args):
                argv = [GPUCTL, "run"] + (["-n", "1"] if "-n" not in args else []) + args
                r = run(argv + ["--", "true"], env=env)
                self.assertOneLineError(r, EXIT_USAGE, needle)


if __name__ == "__main__":
    unittest.main()
