"""bench/real-gpu.sh, the check for machines with a real GPU, exercised here with a stand-in
nvidia-smi (tests/cli/fake-nvidia-smi.py) that reads the simulated machine's scenario on its
own: the script must pass when gpuctl and the stand-in agree, and fail, naming the field,
when they do not."""
import os
import re
import shutil
import tempfile
import unittest

from gpuctl_test import BUILD, NVSIM, SCENARIOS, SRC, GpuctlTestCase, run

FAKE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake-nvidia-smi.py")
SCRIPT = os.path.join(SRC, "bench", "real-gpu.sh")


def real_gpu(scenario, corrupt=None, setup=None):
    """The script on a simulated machine; setup: nvsim arguments applied first."""
    env = {
        "SKIP_BUILD": "1",
        "GPUCTL": os.path.join(BUILD, "bin", "gpuctl"),
        "NVIDIA_SMI": FAKE,
        "FAKE_SMI_SCENARIO": os.path.join(SCENARIOS, scenario + ".json"),
        "NVSIM": NVSIM,
        "SCRIPT": SCRIPT,
    }
    if corrupt:
        env["FAKE_SMI_CORRUPT"] = corrupt
    pre = ('"$NVSIM" ' + " ".join(setup) + " && ") if setup else ""
    return run([NVSIM, "exec", scenario, "--", "sh", "-c", pre + 'exec bash "$SCRIPT"'], env=env,
               timeout=120)


def summary(out):
    """The summary table: part -> (compared, mismatches)."""
    table = out[out.index("== summary"):].splitlines()
    return {c[0]: (int(c[1]), int(c[2])) for c in
            ([x.strip() for x in l.strip("|").split("|")] for l in table if l.startswith("| "))
            if c[0] != "part"}


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

    def test_summary_table_and_health(self):
        r = real_gpu("dgx-a100")
        self.assertEqual(r.rc, 0, r)
        got = summary(r.out)
        # 8 GPUs: 26 fields each plus the row count; 8 rows of 8 GPU cells and 3 affinity
        # columns plus the row set; health: the GPU list and one verdict per GPU
        self.assertEqual(got["list vs nvidia-smi --query-gpu"], (8 * 26 + 1, 0), r.out)
        self.assertEqual(got["topo vs nvidia-smi topo -m"], (8 * (8 + 3) + 1, 0), r.out)
        self.assertEqual(got["gpuctl health"], (9, 0), r.out)
        self.assertEqual(got["gpuctl health --probe"], (9, 0), r.out)
        # the stand-in prints two tabs after NUMA Affinity, as current drivers do, and the GPU
        # NUMA id after them is still compared with gpuctl's
        self.assertIn("ok       GPU7 GPU NUMA ID    gpuctl='N/A' nvidia-smi='N/A'", r.out)

    def test_gpu_numa_id_after_the_two_tabs(self):
        """GB200 GPUs are NUMA nodes of their own: a real value in the last column."""
        r = real_gpu("gb200-node")
        self.assertEqual(r.rc, 0, r)
        self.assertRegex(r.out, r"ok +GPU0 GPU NUMA ID +gpuctl='\d+' nvidia-smi='\d+'")

    def test_probe_failure_is_a_mismatch(self):
        r = real_gpu("dgx-a100", setup=["set", "-i", "2", "cuda.alloc=fail"])
        self.assertEqual(r.rc, 1, r)
        self.assertRegex(r.out, r"MISMATCH gpu2 health --probe: verdict FAIL; cuda-probe: ")
        self.assertEqual(summary(r.out)["gpuctl health --probe"], (9, 1), r.out)
        self.assertEqual(summary(r.out)["gpuctl health"], (9, 0), r.out)

    def test_na_on_one_side_only_is_a_mismatch(self):
        """A fact gpuctl reads and nvidia-smi calls [Not Supported] (or the other way) differs;
        [N/A] against [Not Supported] is the same."""
        r = real_gpu("dgx-a100", corrupt="na:power.draw")
        self.assertEqual(r.rc, 1, r)
        self.assertIn("MISMATCH gpu0 power.draw", r.out)
        r = real_gpu("rtx4090-8", corrupt="na:serial")
        self.assertEqual(r.rc, 0, r)
        self.assertRegex(r.out, r"ok +gpu0 serial +gpuctl='\[N/A\]' +nvidia-smi='\[Not Supported\]'")

    def test_missing_build_tools_one_line(self):
        """No compiler, cmake or pkg-config and not root: one line naming the packages and the
        command, exit 2, nothing built."""
        bindir = tempfile.mkdtemp(prefix="gpuctl-test-realgpu-")
        self.addCleanup(shutil.rmtree, bindir, True)
        for tool in ("dirname", "date", "bash"):
            os.symlink(shutil.which(tool), os.path.join(bindir, tool))
        os.symlink(FAKE, os.path.join(bindir, "nvidia-smi"))
        with open(os.path.join(bindir, "id"), "w") as f:
            f.write("#!/bin/sh\necho 1000\n")  # not root: nothing is installed
        os.chmod(os.path.join(bindir, "id"), 0o755)
        r = run([os.path.join(bindir, "bash"), SCRIPT],
                env={"PATH": bindir, "BUILD": os.path.join(bindir, "build")}, timeout=60)
        self.assertEqual(r.rc, 2, r)
        lines = r.err.strip().splitlines()
        self.assertEqual(len(lines), 1, r)
        self.assertEqual(lines[0], "real-gpu: cannot build: missing gcc make cmake pkg-config "
                         "python3 libjansson-dev libnuma-dev libmicrohttpd-dev libsqlite3-dev (as root: "
                         "apt-get update && apt-get install -y gcc make cmake pkg-config python3 "
                         "libjansson-dev libnuma-dev libmicrohttpd-dev libsqlite3-dev)")
        self.assertFalse(os.path.exists(os.path.join(bindir, "build")))

    def test_notices_a_wrong_uuid(self):
        r = real_gpu("hgx-h100", corrupt="uuid")
        self.assertEqual(r.rc, 1, r)
        self.assertIn("MISMATCH gpu0 uuid", r.out)


if __name__ == "__main__":
    unittest.main()
