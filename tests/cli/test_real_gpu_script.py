"""bench/real-gpu.sh, the check for machines with a real GPU, exercised here with a stand-in
nvidia-smi (tests/cli/fake-nvidia-smi.py) that reads the simulated machine's scenario on its
own: the script must pass when gpuctl and the stand-in agree, and fail, naming the field,
when they do not."""
import os
import re
import unittest

from gpuctl_test import BUILD, NVSIM, SCENARIOS, SRC, GpuctlTestCase, run

FAKE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake-nvidia-smi.py")
SCRIPT = os.path.join(SRC, "bench", "real-gpu.sh")


def real_gpu(scenario, corrupt=None):
    env = {
        "SKIP_BUILD": "1",
        "GPUCTL": os.path.join(BUILD, "bin", "gpuctl"),
        "NVIDIA_SMI": FAKE,
        "FAKE_SMI_SCENARIO": os.path.join(SCENARIOS, scenario + ".json"),
    }
    if corrupt:
        env["FAKE_SMI_CORRUPT"] = corrupt
    return run([NVSIM, "exec", scenario, "--", "bash", SCRIPT], env=env, timeout=120)


class RealGpuScriptTest(GpuctlTestCase):
    def test_agrees_on_dgx_a100(self):
        r = real_gpu("dgx-a100")
        self.assertEqual(r.rc, 0, r)
        self.assertIn("real-gpu: PASS", r.out)
        self.assertNotIn("MISMATCH", r.out)
        # every GPU's static fields and every matrix cell were compared
        self.assertGreaterEqual(r.out.count("ok       gpu7 "), 10, r)
        self.assertIn("GPU7 GPU0", r.out)

    def test_agrees_on_geforce_without_ecc(self):
        r = real_gpu("rtx4090-8")
        self.assertEqual(r.rc, 0, r)

    def test_notices_a_wrong_static_field(self):
        r = real_gpu("dgx-a100", corrupt="memory.total")
        self.assertEqual(r.rc, 1, r)
        self.assertIn("MISMATCH gpu0 memory.total", r.out)
        self.assertIn("real-gpu: FAIL", r.out)

    def test_compares_watch_with_dmon(self):
        r = real_gpu("dgx-a100")
        self.assertIn("== watch vs nvidia-smi dmon", r.out)
        # all 8 GPUs x the 11 columns gpuctl prints for pucm, matched by name past dmon's
        # extra ones
        self.assertEqual(len(re.findall(r"^ok +gpu\d dmon ", r.out, re.M)), 8 * 11, r.out)
        self.assertIn("ok       gpu7 dmon bar1   gpuctl='4'", r.out)

    def test_notices_a_dmon_column_supported_on_one_side(self):
        r = real_gpu("dgx-a100", corrupt="dmon")
        self.assertEqual(r.rc, 1, r)
        self.assertIn("MISMATCH gpu0 dmon pwr", r.out)

    def test_notices_a_wrong_uuid(self):
        r = real_gpu("hgx-h100", corrupt="uuid")
        self.assertEqual(r.rc, 1, r)
        self.assertIn("MISMATCH gpu0 uuid", r.out)


if __name__ == "__main__":
    unittest.main()
