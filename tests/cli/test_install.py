"""make install's result is usable: `cmake --install` into a staging DESTDIR puts the program,
the man page, the headers, both libraries and the pkg-config file where PREFIX says; the README's
example, built as its first line says (`pkg-config --cflags --libs libgpuctl`) against that tree,
runs on a simulated machine and prints what the scenario holds."""
import filecmp
import os
import shutil
import subprocess
import tempfile
import unittest

from gpuctl_test import (BUILD, CC, NVSIM, SANITIZE_FLAGS, GpuctlTestCase, readme_example, run,
                         scenario_gpus)

PREFIX = "/opt/gpuctl-test"


class InstallTest(GpuctlTestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gpuctl-install-")
        cls.dest = os.path.join(cls.tmp, "dest")
        env = dict(os.environ, DESTDIR=cls.dest)
        p = subprocess.run(["cmake", "--install", BUILD, "--prefix", PREFIX], env=env,
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        cls.root = cls.dest + PREFIX

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_files_in_place(self):
        for rel in ("bin/gpuctl", "include/gpuctl/gpuctl.h", "share/man/man1/gpuctl.1"):
            self.assertTrue(os.path.isfile(os.path.join(self.root, rel)), rel)
        libdirs = [d for d in ("lib", "lib64", "lib/x86_64-linux-gnu") if
                   os.path.isfile(os.path.join(self.root, d, "libgpuctl.a"))]
        self.assertEqual(len(libdirs), 1, os.listdir(self.root))
        lib = os.path.join(self.root, libdirs[0])
        self.assertTrue(os.path.exists(os.path.join(lib, "libgpuctl.so")))
        # the static library installed is the public one, with only gpuctl.h's names global
        # (tests/cli/test_exports.py checks build/lib/libgpuctl.a); the internal one stays here
        self.assertTrue(filecmp.cmp(os.path.join(lib, "libgpuctl.a"),
                                    os.path.join(BUILD, "lib", "libgpuctl.a"), shallow=False))
        self.assertFalse(os.path.exists(os.path.join(lib, "libgpuctl-internal.a")))
        self.assertTrue(os.path.isfile(os.path.join(lib, "pkgconfig", "libgpuctl.pc")))
        # nothing of the simulator is installed: it is never part of the product
        for dirpath, _, files in os.walk(self.dest):
            self.assertNotIn("nvsim", files)
            self.assertNotIn("libnvidia-ml.so.1", files)

    def test_example_builds_with_pkg_config_and_runs(self):
        lib = [d for d in ("lib", "lib64", "lib/x86_64-linux-gnu")
               if os.path.isdir(os.path.join(self.root, d, "pkgconfig"))][0]
        pcdir = os.path.join(self.root, lib, "pkgconfig")
        # The .pc file locates its prefix from its own place, so the staged tree works as is.
        env = dict(os.environ, PKG_CONFIG_PATH=pcdir)
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libgpuctl"], env=env,
                               capture_output=True, text=True, check=True).stdout.split()
        src = os.path.join(self.tmp, "example.c")
        exe = os.path.join(self.tmp, "example")
        with open(src, "w") as f:
            f.write(readme_example())
        p = subprocess.run([CC, "-std=c17", "-Wall", "-Werror", *SANITIZE_FLAGS, src, "-o", exe,
                            *flags],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        libdir = os.path.join(self.root, lib)
        r = run([NVSIM, "exec", "workstation-mixed", "--", exe], env={"LD_LIBRARY_PATH": libdir})
        self.assertEqual(r.rc, 0, r)
        want = [f"{g['uuid']} {g.get('memory_used_mib', 0)} MiB used"
                for g in scenario_gpus("workstation-mixed")]
        self.assertEqual(r.out.splitlines(), want)


if __name__ == "__main__":
    unittest.main()
