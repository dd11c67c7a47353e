"""README.md's library example (the C block after <!-- test: readme-example -->) is a correct
program: compiled as shown against the built library (-Wall -Wextra -Werror, and with the build's
sanitizer flags under GPUCTL_SANITIZE, where LeakSanitizer checks that nothing leaks), it prints
each GPU's UUID and memory in use as the scenario has them, says which GPU it cannot read, and
fails with one line and exit status 1, freeing what it made, when there is no driver."""
import os
import shutil
import subprocess
import tempfile
import unittest

from gpuctl_test import (BUILD, CC, NVSIM, SANITIZE_FLAGS, SRC, GpuctlTestCase, readme_example,
                         run, scenario_gpus, sim_sh)

SCENARIO = "workstation-mixed"  # GPU 0 has memory in use, GPU 1 none


class ReadmeExample(GpuctlTestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gpuctl-readme-")
        cls.exe = os.path.join(cls.tmp, "example")
        src = os.path.join(cls.tmp, "example.c")
        with open(src, "w") as f:
            f.write(readme_example())
        lib = os.path.join(BUILD, "lib")
        p = subprocess.run([CC, "-std=c17", "-Wall", "-Wextra", "-Wpedantic", "-Werror",
                            *SANITIZE_FLAGS, "-I", os.path.join(SRC, "include"), src, "-o",
                            cls.exe, "-L", lib, "-lgpuctl", "-Wl,-rpath," + lib],
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_prints_memory_used_per_gpu(self):
        r = run([NVSIM, "exec", SCENARIO, "--", self.exe])
        self.assertEqual(r.rc, 0, r)
        self.assertEqual(r.err, "")
        want = [f"{g['uuid']} {g.get('memory_used_mib', 0)} MiB used"
                for g in scenario_gpus(SCENARIO)]
        self.assertIn("312 MiB used", want[0])  # the fact the scenario is chosen for
        self.assertEqual(r.out.splitlines(), want)

    def test_lost_gpu_is_named(self):
        r = sim_sh(SCENARIO, "$NVSIM set -i 1 lost=1\n$EXAMPLE\n", env={"EXAMPLE": self.exe})
        self.assertEqual(r.rc, 0, r)
        uuid0 = scenario_gpus(SCENARIO)[0]["uuid"]
        self.assertEqual(r.out.splitlines(), [f"{uuid0} 312 MiB used", "GPU 1: not readable (lost)"])

    def test_no_driver_fails_cleanly(self):
        r = run([self.exe], env={"GPUCTL_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1"})
        self.assertEqual(r.rc, 1, r)
        self.assertEqual(r.out, "")
        lines = r.err.splitlines()
        self.assertEqual(len(lines), 1, r)  # also: no sanitizer report, no leak
        self.assertRegex(lines[0], r"^gpuctl: no NVIDIA driver: .*/nonexistent/")

    def test_not_nvml_fails_cleanly(self):
        # a library that loads but is no NVML: the context exists and must be freed
        r = run([self.exe], env={"GPUCTL_NVML_LIBRARY": os.path.join(BUILD, "lib",
                                                                     "libgpuctl.so.0")})
        self.assertEqual(r.rc, 1, r)
        lines = r.err.splitlines()
        self.assertEqual(len(lines), 1, r)
        self.assertIn("is not an NVML library", lines[0])


if __name__ == "__main__":
    unittest.main()
