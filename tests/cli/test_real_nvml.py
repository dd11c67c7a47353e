"""NVIDIA's own libnvidia-ml.so.1 (Debian's libnvidia-ml1, driver 535, installed by scripts/deps.sh
test) as the reference:

- for names: every NVML function gpuctl resolves and every function each simulator variant
  exports exists in the real library, the same name with the same version suffix; functions
  NVIDIA added after driver 535 are listed below with the NVML version that introduced them;
- for the no-driver case: on this machine the real library loads but cannot initialise (no
  kernel module), and every gpuctl command then prints one line and exits 4, never crashing.

The real library's names are read from its dynamic symbol table (nm -D), not from a header."""
import os
import re
import socket
import subprocess
import unittest

from gpuctl_test import BUILD, EXIT_NODRIVER, GPUCTL, NM, SRC, GpuctlTestCase, gpuctl

REAL = "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"
SIM_VARIANTS = ["", "old", "minimal", "r530"]

# Functions newer than driver 535 (NVML 12.2), with the NVML version that introduced them,
# from NVIDIA's nvml.h history as NVIDIA/go-nvml records it (gen/nvml/nvml.h: absent in its
# "Bump to NVML version 12.3" commit b57740a, present in "Bump to NVML version 12.4" f7ceebd).
NEWER_THAN_535 = {
    "nvmlDeviceGetNumaNodeId": "12.4",
}


def dynamic_functions(path):
    """The functions a shared library defines and exports."""
    p = subprocess.run([NM, "-D", "--defined-only", path], capture_output=True, text=True,
                       check=True)
    return {f[2].split("@")[0] for f in (l.split() for l in p.stdout.splitlines())
            if len(f) == 3 and f[1] in "TtWi"}


def gpuctl_resolved():
    """Every NVML name gpuctl's loader looks up: its symbol table and its dlsym probes, in the
    sources of src/lib/nvml/ (the only room that knows NVML)."""
    names = set()
    room = os.path.join(SRC, "src", "lib", "nvml")
    for name in sorted(os.listdir(room)):
        if name.endswith(".c"):
            with open(os.path.join(room, name)) as f:
                names |= set(re.findall(r'"(nvml[A-Z][A-Za-z0-9_]*)"', f.read()))
    return names


class RealNvmlNamesTest(GpuctlTestCase):
    @classmethod
    def setUpClass(cls):
        cls.real = {f for f in dynamic_functions(REAL) if f.startswith("nvml")}

    def test_reference_is_nvidias_library(self):
        """The library is NVIDIA's driver-535 NVML, not the simulator."""
        self.assertRegex(os.path.basename(os.path.realpath(REAL)), r"^libnvidia-ml\.so\.535\.")
        self.assertGreater(len(self.real), 300)
        self.assertIn("nvmlDeviceGetComputeRunningProcesses_v3", self.real)
        self.assertNotIn("nvsim_core_version", self.real)

    def test_exception_table_is_needed(self):
        """Every listed exception is really missing from the real library (else drop it)."""
        for name in NEWER_THAN_535:
            self.assertNotIn(name, self.real)

    def test_gpuctl_names(self):
        names = gpuctl_resolved()
        self.assertGreater(len(names), 60)
        missing = sorted(n for n in names - self.real if n not in NEWER_THAN_535)
        self.assertEqual(missing, [], "gpuctl resolves names NVIDIA's library lacks")

    def test_simulator_names(self):
        for v in SIM_VARIANTS:
            with self.subTest(variant=v or "full"):
                path = os.path.join(BUILD, "sim", v, "libnvidia-ml.so.1")
                exported = dynamic_functions(path)
                self.assertTrue(exported, path)
                self.assertEqual(sorted(n for n in exported if not n.startswith("nvml")), [],
                                 "the simulator exports nothing but NVML names")
                missing = sorted(n for n in exported - self.real if n not in NEWER_THAN_535)
                self.assertEqual(missing, [], f"{path} exports names NVIDIA's library lacks")


class RealNvmlNoDriverTest(GpuctlTestCase):
    """Every command, on NVIDIA's library without a driver: one line, exit 4."""

    COMMANDS = [
        ["list"], ["list", "--format", "json"], ["list", "--query", "index,uuid"],
        ["topo"], ["info"], ["select", "-n", "1"], ["select", "-n", "1", "--hold", "1"],
        ["run", "-n", "1", "--", "true"], ["run", "-n", "1", "--dry-run", "--", "true"],
        ["health"], ["health", "--probe"], ["ps"], ["watch", "--count", "1"],
        ["release", "--all"], ["lease", "init"],
    ]

    def test_every_command(self):
        env = {"GPUCTL_NVML_LIBRARY": REAL}
        # the exporter takes its first sample before it listens: a free port, never bound
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        for argv in self.COMMANDS + [["exporter", "--listen", f"127.0.0.1:{port}"]]:
            with self.subTest(command=" ".join(argv)):
                r = gpuctl(*argv, env=env, timeout=30)
                self.assertOneLineError(r, EXIT_NODRIVER, "no NVIDIA driver",
                                        "NVML cannot initialise", "Driver Not Loaded", REAL)
                self.assertEqual(r.out, "")

    def test_default_search_finds_it(self):
        """Without GPUCTL_NVML_LIBRARY gpuctl's dlopen finds the installed library too."""
        r = gpuctl("list", env={"GPUCTL_NVML_LIBRARY": ""}, timeout=30)
        self.assertOneLineError(r, EXIT_NODRIVER, "no NVIDIA driver", "Driver Not Loaded")


if __name__ == "__main__":
    unittest.main()
