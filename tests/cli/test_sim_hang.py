"""The simulator's hung-driver fault: `nvsim hang FUNCTION [-i GPU]` blocks matching NVML calls
until `nvsim unhang`, and `nvsim hung` names the calls blocked now (sim/README.md, "Hangs").

The program under test is an NVML client written here with ctypes (no gpuctl code), so what is
checked is the simulator alone: a hung call does not return while the rule stands, another
GPU's call answers meanwhile from another thread, and the hung call answers with the scenario's
value once the rule is gone. Expected values come from the scenario file.
"""
import json
import os
import tempfile
import textwrap
import unittest

from gpuctl_test import EXIT_USAGE, PYTHON, SCENARIOS, GpuctlTestCase, python_env, sim_sh

# The client: two threads of one process. Thread B calls nvmlDeviceGetPowerUsage on GPU 1 and
# records when it returns; the main thread waits for the simulator's mark that B is hung (an
# event, not a guessed time), reads GPU 0's power while B is blocked, says whether B had
# returned by then, writes "ready", and waits for B.
CLIENT = textwrap.dedent("""\
    import ctypes, os, sys, threading, time
    lib = ctypes.CDLL(os.environ["GPUCTL_NVML_LIBRARY"])
    assert lib.nvmlInit_v2() == 0
    h = [ctypes.c_void_p(), ctypes.c_void_p()]
    for i in (0, 1):
        assert lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h[i])) == 0
    out = {}
    def b():
        mw = ctypes.c_uint()
        out["rc1"] = lib.nvmlDeviceGetPowerUsage(h[1], ctypes.byref(mw))
        out["mw1"] = mw.value
    t = threading.Thread(target=b)
    t.start()
    hung = os.path.join(os.environ["NVSIM_STATE_DIR"], "hung")
    for _ in range(6000):
        if os.path.isdir(hung) and os.listdir(hung):
            break
        time.sleep(0.01)
    mw = ctypes.c_uint()
    rc0 = lib.nvmlDeviceGetPowerUsage(h[0], ctypes.byref(mw))
    print("gpu0", rc0, mw.value, "b-returned-before-unhang", "rc1" in out, flush=True)
    open(sys.argv[1], "w").close()
    t.join()
    print("gpu1", out["rc1"], out["mw1"], flush=True)
    """)


class Hang(GpuctlTestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory(prefix="gpuctl-hang-")
        self.addCleanup(tmp.cleanup)
        self.tmp = tmp.name
        self.client = os.path.join(self.tmp, "client.py")
        with open(self.client, "w") as f:
            f.write(CLIENT)
        with open(os.path.join(SCENARIOS, "dgx-a100.json")) as f:
            doc = json.load(f)
        self.power_mw = [g.get("power_draw_mw", doc["defaults"]["power_draw_mw"])
                         for g in doc["gpus"]]

    def test_call_blocks_until_unhang(self):
        ready = os.path.join(self.tmp, "ready")
        script = f"""
            $NVSIM hang nvmlDeviceGetPowerUsage -i 1
            $PY {self.client} {ready} > {self.tmp}/out &
            while [ ! -e {ready} ]; do sleep 0.01; done
            $NVSIM hung > {self.tmp}/hung
            $NVSIM unhang
            wait
            $NVSIM hung > {self.tmp}/hung-after
            cat {self.tmp}/out
        """
        r = sim_sh("dgx-a100", script, env=python_env({"PY": PYTHON}))
        self.assertOk(r)
        lines = r.out.splitlines()
        self.assertEqual(lines[0].split(),
                         ["gpu0", "0", str(self.power_mw[0]), "b-returned-before-unhang",
                          "False"])
        self.assertEqual(lines[1].split(), ["gpu1", "0", str(self.power_mw[1])])
        with open(os.path.join(self.tmp, "hung")) as f:
            hung = [line.split() for line in f.read().splitlines()]
        self.assertEqual(len(hung), 1, hung)
        self.assertEqual(hung[0][2:], ["nvmlDeviceGetPowerUsage", "1"])
        self.assertNotEqual(hung[0][0], hung[0][1], "the hung call is the client's thread B")
        with open(os.path.join(self.tmp, "hung-after")) as f:
            self.assertEqual(f.read(), "", "no call is hung once the rule is gone")

    def test_unhang_of_one_function_keeps_the_others(self):
        r = sim_sh("dgx-a100", """
            $NVSIM hang nvmlDeviceGetPowerUsage -i 0,2
            $NVSIM hang nvmlDeviceGetTemperature
            $NVSIM unhang nvmlDeviceGetPowerUsage
            $NVSIM show
        """)
        self.assertOk(r)
        self.assertEqual(json.loads(r.out)["state"]["hang"],
                         [{"function": "nvmlDeviceGetTemperature"}])

    def test_bad_arguments(self):
        for args, needle in ((["hang", "nvmlNoSuchCall"], "nvmlNoSuchCall"),
                             (["hang"], "usage"),
                             (["hang", "nvmlDeviceGetPowerUsage", "-i", "99"], "-i 99"),
                             (["unhang", "a", "b"], "usage"),
                             (["hung", "--yaml"], "usage")):
            with self.subTest(args=args):
                r = sim_sh("dgx-a100", "exec $NVSIM " + " ".join(args))
                self.assertEqual(r.rc, EXIT_USAGE, r)
                self.assertIn(needle, r.err)
                self.assertEqual(len(r.err.splitlines()), 1, r.err)

    def test_killed_while_hung_is_not_listed(self):
        r = sim_sh("dgx-a100", """
            $NVSIM hang nvmlDeviceGetCount_v2
            $GPUCTL list >/dev/null 2>&1 &
            pid=$!
            i=0; until [ -n "$($NVSIM hung)" ]; do i=$((i+1)); [ $i -lt 6000 ]; sleep 0.01; done
            $NVSIM hung | cut -d' ' -f1,3
            echo pid $pid
            kill -9 $pid; wait $pid || true
            echo after; $NVSIM hung
        """)
        self.assertOk(r)
        lines = r.out.splitlines()
        pid = lines[1].split()[1]
        self.assertEqual(lines[0], f"{pid} nvmlDeviceGetCount_v2")
        self.assertEqual(lines[2:], ["after"])


if __name__ == "__main__":
    unittest.main()
