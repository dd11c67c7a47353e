"""make install's result is usable: `cmake --install` into a staging DESTDIR puts the program,
the man page, the headers, both libraries and the pkg-config file where PREFIX says; a C
program built with `pkg-config --cflags --libs libgpuctl` against that tree (the README's
example) runs on a simulated machine and prints what the scenario holds."""
import filecmp
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from gpuctl_test import BUILD, NVSIM, SCENARIOS, GpuctlTestCase, run

PREFIX = "/opt/gpuctl-test"

EXAMPLE = r"""
#include <stdio.h>
#include <gpuctl/gpuctl.h>

int main(void)
{
	struct gpuctl_ctx *ctx = NULL;
	struct gpuctl_snapshot *snap = NULL;

	if (gpuctl_ctx_new(&ctx) < 0 || gpuctl_snapshot_take(ctx, GPUCTL_SNAP_BASIC, &snap) < 0) {
		fprintf(stderr, "%s\n", ctx ? gpuctl_errmsg(ctx) : "out of memory");
		return 1;
	}
	for (size_t i = 0; i < gpuctl_snapshot_gpu_count(snap); i++) {
		const struct gpuctl_gpu *g = gpuctl_snapshot_gpu(snap, i);
		int64_t total;
		if (gpuctl_gpu_int(g, GPUCTL_F_MEMORY_TOTAL, &total) == 0)
			printf("%s %lld\n", gpuctl_gpu_str(g, GPUCTL_F_UUID), (long long)(total >> 20));
	}
	gpuctl_snapshot_free(snap);
	gpuctl_ctx_free(ctx);
	return 0;
}
"""


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
            f.write(EXAMPLE)
        san = ["-fsanitize=address,undefined"] if os.environ.get("GPUCTL_SANITIZE") == "1" else []
        p = subprocess.run(["cc", "-std=c17", "-Wall", "-Werror", *san, src, "-o", exe, *flags],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        libdir = os.path.join(self.root, lib)
        r = run([NVSIM, "exec", "hgx-h100", "--", exe], env={"LD_LIBRARY_PATH": libdir})
        self.assertEqual(r.rc, 0, r)
        with open(os.path.join(SCENARIOS, "hgx-h100.json")) as f:
            s = json.load(f)
        mem = s["defaults"].get("memory_total_mib")
        want = [f"{g['uuid']} {g.get('memory_total_mib', mem)}" for g in s["gpus"]]
        self.assertEqual(r.out.split("\n")[:-1], want)


if __name__ == "__main__":
    unittest.main()
