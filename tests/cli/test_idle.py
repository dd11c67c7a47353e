"""Idle devices end to end (docs/idle.md): `gpuctl ps --format json` and `list --format json`
show a lease with no process and ghost memory from one sample; the exporter's
gpuctl_gpu_idle_seconds and `gpuctl top` find an idle notebook-like process after a short
--idle-window and count its idle time up.

Each test writes its own trace on a simulated DGX A100 (dgx-a100: eight GPUs, 0 % utilisation and
no memory used unless set): a real `sleep` registered as a compute process with `nvsim proc add
--util 0 --mem 4GiB` (an idle notebook kernel), `nvsim set memory.used=2GiB` on a GPU with no
process (ghost memory), `gpuctl select --only 2 --hold` (a lease with no process). Expected values
come from those traces and docs/idle.md's rules (ghost above 256 MiB, threshold 5 % strictly
below, the window), never from gpuctl's output.
"""
import json
import os
import re
import subprocess
import tempfile
import time
import unittest

from gpuctl_test import GPUCTL, NVSIM, GpuctlTestCase, run, sim_sh
from test_exporter import Exporter

SCRIPT_SETUP = r'''
T=$(mktemp -d)
export GPUCTL_LEASE_DIR="$T/leases"
cleanup() { kill $S $B $H 2>/dev/null || true; wait || true; rm -rf "$T"; }
trap cleanup EXIT
sleep 600 & S=$!
sleep 600 & B=$!
$NVSIM proc add --pid $S -i 0 --mem 4GiB --util 0
$NVSIM proc add --pid $B -i 3 --mem 8GiB --util 90
$NVSIM set -i 1 memory.used=2GiB
$GPUCTL select -n 1 --only 2 --hold 120 > "$T/hold" & H=$!
i=0; until grep -q = "$T/hold"; do i=$((i+1)); [ $i -lt 600 ] || exit 9; sleep 0.05; done
'''


class OneShotTest(GpuctlTestCase):
    def run_script(self, cmd):
        r = sim_sh("dgx-a100", SCRIPT_SETUP + cmd + "\nrc=$?\ntrap - EXIT\ncleanup\nexit $rc\n")
        self.assertOk(r)
        return r

    def test_ps_json_shows_lease_and_ghost_now(self):
        devs = {d["device"]: d for d in
                json.loads(self.run_script("$GPUCTL ps --format json").out)["devices"]}
        # GPU 1: free, 2 GiB used, no process: ghost, listed without --all, "now" only
        self.assertEqual(set(devs["1"]["idle"]), {"ghost"})
        self.assertIsNone(devs["1"]["idle"]["ghost"]["seconds"])
        self.assertIn("no compute process listed", devs["1"]["idle"]["ghost"]["cause"])
        # GPU 2: leased by a holder with no process on it
        self.assertEqual(devs["2"]["state"], "leased")
        self.assertEqual(devs["2"]["idle"], {"lease": {"seconds": None}})
        # GPU 0: an idle process, but one sample never finds (b); GPU 3 busy
        self.assertEqual(devs["0"]["idle"], {})
        self.assertEqual(devs["3"]["idle"], {})

    def test_ps_table_notes(self):
        out = self.run_script("$GPUCTL ps").out
        rows = {l.split()[0]: l for l in out.splitlines()[1:] if l.strip()}
        self.assertTrue(rows["1"].rstrip().endswith("idle: ghost memory"), out)
        self.assertTrue(rows["2"].rstrip().endswith("idle: lease"), out)
        self.assertNotIn("idle", rows["0"], out)

    def test_list_json_idle_per_gpu(self):
        gpus = json.loads(self.run_script("$GPUCTL list --format json").out)["gpus"]
        idle = [g["idle"] for g in gpus]
        self.assertEqual(set(idle[1]), {"ghost"})
        self.assertEqual(idle[2], {"lease": {"seconds": None}})
        for i in (0, 3, 4, 5, 6, 7):
            self.assertEqual(idle[i], {}, i)


def idle_series(m):
    """{(gpu, case): seconds} of gpuctl_gpu_idle_seconds."""
    return {(int(l["gpu"]), l["case"]): v for l, v in m.get("gpuctl_gpu_idle_seconds", [])}


class ExporterTest(GpuctlTestCase):
    def test_idle_notebook_found_after_the_window_and_growing(self):
        window = 2
        with Exporter("dgx-a100", args=["--idle-window", str(window)]) as ex:
            nb = subprocess.Popen(["sleep", "600"])
            busy = subprocess.Popen(["sleep", "600"])
            self.addCleanup(busy.wait)
            self.addCleanup(busy.kill)
            self.addCleanup(nb.wait)
            self.addCleanup(nb.kill)
            ex.nvsim("proc", "add", "--pid", str(nb.pid), "-i", "4", "--mem", "4GiB",
                     "--util", "0")
            ex.nvsim("proc", "add", "--pid", str(busy.pid), "-i", "5", "--mem", "4GiB",
                     "--util", "90")
            ex.nvsim("set", "-i", "6", "memory.used=1GiB")
            t0 = time.monotonic()
            m = ex.wait_for(lambda m: (4, "process") in idle_series(m), "the idle notebook")
            # not before one window of samples after it was registered
            self.assertGreaterEqual(time.monotonic() - t0, window - 0.5)
            first = idle_series(m)[(4, "process")]
            self.assertGreaterEqual(first, window)
            m = ex.wait_for(lambda m: idle_series(m).get((4, "process"), 0) >= first + 1,
                            "the idle time growing")
            s = idle_series(m)
            self.assertNotIn((5, "process"), s)  # 90 % is busy
            self.assertIn((6, "ghost"), s)      # 1 GiB, no process
            self.assertEqual({k for k in s if k[0] not in (4, 6)}, set(), s)

    def test_bad_window_is_usage_error(self):
        r = run([GPUCTL, "exporter", "--idle-window", "0"])
        self.assertOneLineError(r, 2, "--idle-window", "'0'")


class TopTest(GpuctlTestCase):
    def test_top_shows_idle_process_and_gpu(self):
        r = sim_sh("dgx-a100", r'''
sleep 600 & S=$!
trap 'kill $S' EXIT
$NVSIM proc add --pid $S -i 0 --mem 4GiB --util 0
$NVSIM set -i 1 memory.used=2GiB
COLUMNS=200 $GPUCTL top --batch -d 0.5 -n 7 --idle-window 2
''')
        self.assertOk(r)
        frames = r.out.split("gpuctl top - ")[1:]
        self.assertEqual(len(frames), 7, r.out)

        def gpu_second_line(frame, g):
            lines = frame.splitlines()
            k = next(i for i, l in enumerate(lines) if re.match(r"^\s*%d GPU-" % g, l))
            return lines[k + 1]

        # the first frame: one sample, no (b); the ghost holds for 0 s
        self.assertNotIn("[idle", frames[0])
        self.assertRegex(gpu_second_line(frames[0], 1), r"idle 0s: ghost memory")
        # the last, 3 s later: the process below 5 % for more than the 2 s window
        last = frames[-1]
        self.assertRegex(gpu_second_line(last, 0), r"idle [23]s: process")
        proc = next(l for l in last.splitlines() if re.search(r"\[idle \d+s\]", l))
        self.assertRegex(proc, r"^\W*0\s")  # GPU 0's process (a marker may come first)
        self.assertRegex(gpu_second_line(last, 1), r"idle [23]s: ghost memory")


if __name__ == "__main__":
    unittest.main()
