"""Shared leases end to end (docs/leases.md, "Sharing"): `--share --mem SIZE` lets several jobs use
one GPU while the memory they declare, plus the safety margin, fits; a shared lease never
coexists with an exclusive one; an exclusive request waits for the shared ones to end; what a
job declared must also be free on the GPU now.

Expected values come from the published memory size of the scenario's GPUs (dgx-a100: A100
SXM4 80GB, 81920 MiB) and the documented default margin (5 % of the device's memory, rounded up
to the byte): 81920 MiB - 4096 MiB = 77824 MiB (76 GiB) may be declared per GPU. Never from
gpuctl's own output. The simulated CUDA driver's ledger (nvsim-load) is the witness of who ran
when."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import textwrap
import time
import unittest

from cli_facts import Machine
from gpuctl_test import (BUILD, EXIT_NOMATCH, EXIT_OK, EXIT_USAGE, GPUCTL, LIBGPUCTL, NVSIM, PYDIR,
                         PYTHON, GpuctlTestCase, python_env, run)
from test_leases import direct_env, wait_until

LOAD = os.path.join(BUILD, "bin", "nvsim-load")
A100 = Machine("dgx-a100")
GIB = 1 << 30
MIB = 1 << 20
CAPACITY = (81920 - 4096) * MIB  # per A100 80GB GPU, default margin


class ShareCase(GpuctlTestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gpuctl-share-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.dir = os.path.join(self.tmp, "leases")
        self.env = direct_env(self.dir)
        self.addCleanup(self.release_all)

    def release_all(self):
        self.g("release", "--all")

    def g(self, *args, **kw):
        return run([GPUCTL, *args], env=self.env, **kw)

    def hold(self, *args):
        r = self.g("select", "-n", "1", "--hold", "60", *args)
        return r

    def device(self, index):
        r = self.g("ps", "--all", "--format", "json")
        self.assertEqual(r.rc, EXIT_OK, r)
        return next(d for d in r.json()["devices"] if d["index"] == index and d["mig_index"] is None)

    def test_declared_memory_and_margin_are_honoured(self):
        for mem in ("30GiB", "30GiB"):
            r = self.hold("--only", "0", "--share", "--mem", mem)
            self.assertEqual(r.rc, EXIT_OK, r)
            self.assertEqual(r.out.strip(), "CUDA_VISIBLE_DEVICES=" + A100.gpus[0]["uuid"])
        d = self.device(0)
        self.assertEqual(d["state"], "shared")
        self.assertEqual(d["shared_declared"], 60 * GIB)
        self.assertEqual(d["shared_room"], CAPACITY - 60 * GIB)
        self.assertEqual(sorted(s["share_mem"] for s in d["shares"]), [30 * GIB, 30 * GIB])
        # 16 GiB + 1 MiB would pass the margin: refused, and the line says why
        r = self.hold("--only", "0", "--share", "--mem", str(16 * 1024 + 1) + "MiB")
        self.assertOneLineError(r, EXIT_NOMATCH, "no room to share", "16385 MiB", ": 0")
        # exactly what is left fits
        r = self.hold("--only", "0", "--share", "--mem", "16GiB")
        self.assertEqual(r.rc, EXIT_OK, r)
        d = self.device(0)
        self.assertEqual(d["shared_declared"], CAPACITY)
        self.assertEqual(d["shared_room"], 0)
        self.assertEqual(len(d["shares"]), 3)
        # without --only, a shared request goes elsewhere
        r = self.hold("--share", "--mem", "1GiB")
        self.assertEqual(r.rc, EXIT_OK, r)
        self.assertNotIn(A100.gpus[0]["uuid"], r.out)

    def test_a_device_larger_than_any_gpu_is_refused(self):
        # 77825 MiB: more than an A100 80GB may share even empty (its memory less the margin)
        r = self.hold("--share", "--mem", "77825MiB")
        self.assertOneLineError(r, EXIT_NOMATCH, "gpuctl: select: --mem 77825 MiB: more than any "
                                "GPU may share (largest 76 GiB: its memory less share_margin): "
                                "can never be satisfied")
        r = self.hold("--share", "--mem", "77824MiB")
        self.assertEqual(r.rc, EXIT_OK, r)

    def test_larger_than_any_gpu_can_never_be_satisfied(self):
        """docs/leases.md, "Can never be satisfied": a size above every device's memory is exit 3
        at once with the reason, also with --wait (which would otherwise wait for ever: the
        test's timeout fails it), whatever the command and the API."""
        largest = max(g["memory_total_mib"] for g in A100.gpus)  # 81920: the scenario file
        self.assertEqual(largest, 80 * 1024)
        want = ("--mem 200 GiB: larger than any GPU's memory (largest 80 GiB): can never be "
                "satisfied")
        for argv in (("select", "-n", "1"), ("select", "-n", "1", "--hold", "60"),
                     ("select", "-n", "1", "--hold", "60", "--wait"), ("run", "-n", "1"),
                     ("run", "-n", "1", "--wait"), ("run", "-n", "1", "--wait=3600"),
                     ("run", "-n", "1", "--dry-run")):
            with self.subTest(argv=argv):
                tail = ("--", "true") if argv[0] == "run" else ()
                r = self.g(*argv, "--share", "--mem", "200GiB", *tail)
                self.assertOneLineError(r, EXIT_NOMATCH, f"gpuctl: {argv[0]}: {want}")
                self.assertNotIn("leased", r.err)
        # one MiB above the memory: the memory is the limit named
        r = self.g("run", "-n", "1", "--wait", "--share", "--mem", f"{largest + 1}MiB", "--",
                   "true")
        self.assertOneLineError(r, EXIT_NOMATCH, f"--mem {largest + 1} MiB: larger than any "
                                "GPU's memory (largest 80 GiB): can never be satisfied")
        # nothing was leased and nobody waits
        self.assertEqual(self.g("ps", "--format", "json").json()["devices"], [])
        self.assertEqual(self.g("ps", "--waiting", "--format", "json").rc, EXIT_OK)

    def test_never_satisfied_on_too_few_large_enough_gpus(self):
        """workstation-mixed: a Quadro P1000 (4096 MiB) and an RTX A6000 (49140 MiB), from the
        scenario file: 8 GiB fits the A6000 only, so two such devices, or the P1000, never."""
        mixed = Machine("workstation-mixed")
        sizes = [g["memory_total_mib"] for g in mixed.gpus]
        self.assertEqual(sizes, [4096, 49140])
        env = direct_env(self.dir, "workstation-mixed")
        r = run([GPUCTL, "run", "-n", "2", "--wait", "--share", "--mem", "8GiB", "--", "true"],
                env=env)
        self.assertOneLineError(r, EXIT_NOMATCH, "--mem 8 GiB: fewer than 2 of the GPUs this "
                                "request may use can share that much", "can never be satisfied")
        r = run([GPUCTL, "run", "-n", "1", "--only", "0", "--wait", "--share", "--mem", "8GiB",
                 "--", "true"], env=env)
        self.assertOneLineError(r, EXIT_NOMATCH, "--mem 8 GiB: none of the GPUs this request "
                                "may use can share that much", "can never be satisfied")
        r = run([GPUCTL, "run", "-n", "1", "--share", "--mem", "8GiB", "--", "true"], env=env)
        self.assertEqual(r.rc, EXIT_OK, r)
        # larger than both: the larger one's memory is named (49140 MiB)
        r = run([GPUCTL, "select", "-n", "1", "--share", "--mem", "48GiB"], env=env)
        self.assertOneLineError(r, EXIT_NOMATCH, "--mem 48 GiB: larger than any GPU's memory "
                                "(largest 49140 MiB): can never be satisfied")

    def test_python_package_says_the_same(self):
        """gpuctl.lease() and gpuctl.select() go through the same library call: NoDeviceError
        at once, with the same reason, also with wait=True."""
        code = textwrap.dedent("""
            import gpuctl
            for call in (lambda: gpuctl.lease(1, share_mem="200GiB", wait=True),
                         lambda: gpuctl.lease(1, share_mem="200GiB"),
                         lambda: gpuctl.select(1, share_mem="200GiB")):
                try:
                    call()
                except gpuctl.NoDeviceError as e:
                    print(e)
                else:
                    print("granted")
        """)
        r = run([PYTHON, "-c", code], env={**self.env, **python_env(
            {"PYTHONPATH": PYDIR, "GPUCTL_LIBRARY": LIBGPUCTL})})
        self.assertEqual(r.rc, 0, r)
        lines = r.out.splitlines()
        self.assertEqual(len(lines), 3, r)
        for line in lines:
            # the package's keyword, not the command line's --mem (issue 25, item 3)
            self.assertIn("share_mem 200 GiB: larger than any GPU's memory (largest 80 GiB): can "
                          "never be satisfied", line)

    def test_shared_and_exclusive_never_mix(self):
        r = self.hold("--only", "1")
        self.assertEqual(r.rc, EXIT_OK, r)
        r = self.hold("--only", "1", "--share", "--mem", "1GiB")
        self.assertOneLineError(r, EXIT_NOMATCH, "leased: 1")
        r = self.hold("--only", "2", "--share", "--mem", "1GiB")
        self.assertEqual(r.rc, EXIT_OK, r)
        r = self.hold("--only", "2")
        self.assertOneLineError(r, EXIT_NOMATCH, "leased: 1,2")
        # a plain select predicts the same
        r = self.g("select", "-n", "1", "--only", "2")
        self.assertOneLineError(r, EXIT_NOMATCH, "leased: 1,2")
        r = self.g("select", "-n", "1", "--only", "2", "--share", "--mem", "1GiB")
        self.assertEqual(r.rc, EXIT_OK, r)
        r = self.g("select", "-n", "1", "--only", "1", "--share", "--mem", "1GiB")
        self.assertOneLineError(r, EXIT_NOMATCH, "leased: 1")

    def test_release_ends_only_the_callers_share(self):
        for label in ("a", "b"):
            r = self.hold("--only", "3", "--share", "--mem", "10GiB", "--label", label)
            self.assertEqual(r.rc, EXIT_OK, r)
        d = self.device(3)
        self.assertEqual(sorted(s["label"] for s in d["shares"]), ["a", "b"])
        r = self.g("release", "-i", "3")
        self.assertEqual(r.rc, EXIT_OK, r)
        self.assertTrue(wait_until(lambda: self.device(3)["state"] == "free"), self.device(3))
        self.assertEqual(self.device(3)["shares"], [])
        # the records of ended shared leases do not pile up
        r = self.hold("--only", "3", "--share", "--mem", "10GiB", "--label", "c")
        self.assertEqual(r.rc, EXIT_OK, r)
        recs = os.listdir(os.path.join(self.dir, "owners", str(os.geteuid())))
        shared = [f for f in recs if "@" in f and not f.startswith(".")]
        self.assertEqual(len(shared), 1, recs)

    def test_free_memory_now_is_checked_too(self):
        # Declarations leave room, but something already uses 70 GiB of GPU 4 (nvsim: memory
        # in use without a process of ours): a 20 GiB share cannot have it.
        script = ('$GPUCTL select -n 1 --only 4 --hold 60 --share --mem 20GiB; echo rc=$?\n'
                  '$NVSIM set -i 4 memory.used=70GiB\n'
                  '$GPUCTL select -n 1 --only 4 --hold 60 --share --mem 20GiB; echo rc=$?\n'
                  '$GPUCTL select -n 1 --only 4 --hold 60 --share --mem 4GiB; echo rc=$?\n'
                  '$GPUCTL release --all\n')
        r = run([NVSIM, "exec", "dgx-a100", "--", "sh", "-c", script],
                env=dict(self.env, GPUCTL=GPUCTL, NVSIM=NVSIM))
        self.assertEqual(r.rc, 0, r)
        rcs = [l for l in r.out.splitlines() if l.startswith("rc=")]
        self.assertEqual(rcs, ["rc=0", "rc=3", "rc=0"], r)
        self.assertIn("free", r.err)

    def test_usage_errors(self):
        for args, needle in ((["--share"], "--share needs --mem"),
                             (["--mem", "1GiB"], "add --share"),
                             (["--share", "--mem", "0"], "more than 0"),
                             (["--share", "--mem", "12"], "--mem: '12'"),
                             (["--share", "--mem", "1XB"], "--mem: '1XB'")):
            with self.subTest(args=args):
                r = self.g("select", "-n", "1", *args)
                self.assertOneLineError(r, EXIT_USAGE, needle)


@unittest.skipUnless(os.path.exists(LOAD), "nvsim-load not built")
class ShareLedger(GpuctlTestCase):
    """Real jobs (nvsim-load through the simulated CUDA) on one simulated machine."""

    def test_exclusive_waits_for_shared_jobs_and_shared_jobs_overlap(self):
        tmp = tempfile.mkdtemp(prefix="gpuctl-share-")
        self.addCleanup(shutil.rmtree, tmp, True)
        driver = textwrap.dedent(r'''
            import json, os, subprocess, time
            G, L = os.environ["GPUCTL"], os.environ["LOAD"]
            def start(*a):
                return subprocess.Popen([G, "run", "-n", "1", "--only", "0", *a],
                                        stderr=subprocess.PIPE, text=True)
            def ps(*a):
                return json.loads(subprocess.run([G, "ps", "--format", "json", *a],
                                                 capture_output=True, text=True).stdout)
            def until(pred):  # polls what ps says (a bound against hanging, not a timing)
                deadline = time.monotonic() + 60
                while not pred():
                    if time.monotonic() > deadline:
                        raise SystemExit("timed out: %s" % json.dumps(ps("--all")))
                    time.sleep(0.05)
            s1 = start("--share", "--mem", "20GiB", "--", L, "--seconds", "3", "--mem", "20GiB")
            s2 = start("--share", "--mem", "20GiB", "--", L, "--seconds", "3", "--mem", "20GiB")
            until(lambda: any(d["index"] == 0 and len(d["shares"]) == 2
                              for d in ps()["devices"]))
            now = subprocess.run([G, "run", "-n", "1", "--only", "0", "--", L, "--seconds", "0.1"],
                                 capture_output=True, text=True)
            ex = start("--wait=30", "--", L, "--seconds", "0.3")
            until(lambda: any(w["pid"] == ex.pid for w in ps("--waiting")["waiting"]))
            # a shared request that arrives after the exclusive waiter waits behind it
            s3 = start("--share", "--mem", "1GiB", "--wait=30", "--", L, "--seconds", "0.2",
                       "--mem", "1GiB")
            rcs = [p.wait(60) for p in (s1, s2, ex, s3)]
            print(json.dumps({"now_rc": now.returncode, "now_err": now.stderr, "rcs": rcs,
                              "errs": [p.stderr.read() for p in (s1, s2, ex, s3)]}))
        ''')
        env = direct_env(os.path.join(tmp, "leases"))
        env.pop("GPUCTL_NVML_LIBRARY")
        env.pop("NVSIM_SCENARIO")
        env.update(GPUCTL=GPUCTL, LOAD=LOAD, LEDGER_OUT=os.path.join(tmp, "ledger.jsonl"))
        r = run([NVSIM, "exec", "dgx-a100", "--", "sh", "-c",
                 'python3 -c "$DRIVER" && cp "$NVSIM_STATE_DIR/ledger.jsonl" "$LEDGER_OUT"'],
                env=dict(env, DRIVER=driver), timeout=120)
        self.assertEqual(r.rc, 0, r)
        res = json.loads(r.out.strip().splitlines()[-1])
        self.assertEqual(res["now_rc"], EXIT_NOMATCH, res)
        self.assertIn("leased: 0", res["now_err"])
        self.assertEqual(res["rcs"], [0, 0, 0, 0], res)
        with open(env["LEDGER_OUT"]) as f:
            jobs = [json.loads(l) for l in f if l.startswith("{")]
        self.assertEqual(len(jobs), 4, jobs)
        for j in jobs:
            self.assertEqual([d["uuid"] for d in j["devices"]], [A100.gpus[0]["uuid"]], j)
        shared = [j for j in jobs if j["env"]["GPUCTL_SHARE_MEM"]]
        exclusive = [j for j in jobs if not j["env"]["GPUCTL_SHARE_MEM"]]
        self.assertEqual(len(shared), 3, jobs)
        self.assertEqual(sorted(int(j["env"]["GPUCTL_SHARE_MEM"]) for j in shared),
                         [1 * GIB, 20 * GIB, 20 * GIB])
        self.assertEqual(len(exclusive), 1, jobs)
        ex = exclusive[0]
        for j in shared:
            self.assertTrue(j["end"] <= ex["start"] or ex["end"] <= j["start"],
                            "exclusive job overlapped a shared one: %s %s" % (ex, j))
        first, second = sorted((j for j in shared if j["env"]["GPUCTL_SHARE_MEM"] == str(20 * GIB)),
                               key=lambda j: j["start"])
        self.assertLess(second["start"], first["end"], "the two shared jobs did not share")
        late = next(j for j in shared if j["env"]["GPUCTL_SHARE_MEM"] == str(GIB))
        self.assertGreaterEqual(late["start"], ex["end"], "a later shared job overtook the waiter")


if __name__ == "__main__":
    unittest.main()
