"""make install's result is usable: `cmake --install` into a staging DESTDIR puts the program,
the man page, the bash completion, the headers, both libraries, the pkg-config file, the Python package,
the documents --help names with an example configuration file (that parses) and the systemd
units (ExecStart naming PREFIX's gpuctl; the exporter's address configurable) where PREFIX says; the README's example, built as its first line says (`pkg-config --cflags --libs
libgpuctl`) against that tree, runs on a simulated machine and prints what the scenario holds;
the installed Python package, with nothing but the install tree (no GPUCTL_LIBRARY, no source
tree on its path), finds the installed library and chooses what the installed gpuctl does."""
import filecmp
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from gpuctl_test import (BUILD, CC, GPUCTL, NVSIM, PYTHON, SANITIZE_FLAGS, SCENARIOS, SRC,
                         GpuctlTestCase, python_env, readme_example, run, scenario_gpus)

PREFIX = "/opt/gpuctl-test"


def python_minor():
    return subprocess.run([PYTHON, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                          capture_output=True, text=True, check=True).stdout.strip()


def site_dir(prefix):
    """Where Debian's python3 looks for packages under prefix: /usr/lib/python3/dist-packages,
    else PREFIX/lib/python3.MINOR/dist-packages (/usr/local's, in python3's sys.path)."""
    if prefix == "/usr":
        return "/usr/lib/python3/dist-packages"
    return "%s/lib/python%s/dist-packages" % (prefix, python_minor())


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
        for rel in ("bin/gpuctl", "include/gpuctl/gpuctl.h", "share/man/man1/gpuctl.1",
                    "share/bash-completion/completions/gpuctl"):
            self.assertTrue(os.path.isfile(os.path.join(self.root, rel)), rel)
        # every public header beside the umbrella gpuctl.h, which includes them
        headers = sorted(n for n in os.listdir(os.path.join(SRC, "include", "gpuctl"))
                         if n.endswith(".h"))
        self.assertGreater(len(headers), 1, headers)
        self.assertEqual(sorted(os.listdir(os.path.join(self.root, "include", "gpuctl"))), headers)
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

    def test_systemd_units_follow_the_prefix(self):
        # PREFIX/lib/systemd/system (systemd.unit(5) searches it for /usr and /usr/local), each
        # ExecStart naming this install's gpuctl, the prefix given at install time
        unitdir = os.path.join(self.root, "lib", "systemd", "system")
        self.assertEqual(sorted(os.listdir(unitdir)),
                         ["gpuctl-agent.service", "gpuctl-exporter.service",
                          "gpuctl-lease-init.service"])
        want = {"gpuctl-exporter.service": PREFIX + "/bin/gpuctl exporter --listen "
                                           "${GPUCTL_EXPORTER_LISTEN}",
                "gpuctl-agent.service": PREFIX + "/bin/gpuctl agent --listen "
                                        "${GPUCTL_AGENT_LISTEN}",
                "gpuctl-lease-init.service": PREFIX + "/bin/gpuctl lease init"}
        for unit, cmd in want.items():
            with open(os.path.join(unitdir, unit)) as f:
                lines = [l for l in f.read().splitlines() if l.startswith("ExecStart=")]
            self.assertEqual(len(lines), 1, lines)
            self.assertTrue(lines[0].startswith("ExecStart=" + cmd), lines)
            self.assertNotIn("@", lines[0])

    def test_exporter_address_is_configurable(self):
        # where it listens: a default in the unit (docs/metrics.md: :9409, every address,
        # every 5 s), overridden by /etc/default/gpuctl-exporter, read after it (systemd.exec(5))
        path = os.path.join(self.root, "lib", "systemd", "system", "gpuctl-exporter.service")
        with open(path) as f:
            lines = f.read().splitlines()
        env = [l for l in lines if l.startswith("Environment=")]
        self.assertEqual(env, ["Environment=GPUCTL_EXPORTER_LISTEN=:9409 "
                               "GPUCTL_EXPORTER_INTERVAL=5"])
        files = [l for l in lines if l.startswith("EnvironmentFile=")]
        self.assertEqual(files, ["EnvironmentFile=-/etc/default/gpuctl-exporter"])
        self.assertLess(lines.index(env[0]), lines.index(files[0]))
        (start,) = [l for l in lines if l.startswith("ExecStart=")]
        self.assertTrue(start.endswith(" --listen ${GPUCTL_EXPORTER_LISTEN} "
                                       "--interval ${GPUCTL_EXPORTER_INTERVAL}"), start)
        # the Debian package's /etc/default file sets the same defaults
        with open(os.path.join(SRC, "debian", "gpuctl-exporter.default")) as f:
            assigned = [l for l in f.read().splitlines() if l and not l.startswith("#")]
        self.assertEqual(assigned, ["GPUCTL_EXPORTER_LISTEN=:9409", "GPUCTL_EXPORTER_INTERVAL=5"])

    def test_docs_and_example_config_installed_where_help_says(self):
        docdir = os.path.join(self.root, "share", "doc", "gpuctl")
        want = sorted(n for n in os.listdir(os.path.join(SRC, "docs")) if n.endswith(".md"))
        self.assertIn("config.md", want)
        self.assertEqual(sorted(n for n in os.listdir(docdir) if n.endswith(".md")), want)
        # --help names the configured prefix's documents directory, and every docs/NAME.md it
        # names is there
        cache = open(os.path.join(BUILD, "CMakeCache.txt")).read()
        prefix = re.search(r"^CMAKE_INSTALL_PREFIX:PATH=(.*)$", cache, re.M).group(1)
        r = run([GPUCTL, "--help"])
        self.assertEqual(r.rc, 0, r)
        self.assertIn("installed in %s/share/doc/gpuctl/," % prefix, r.out)
        self.assertIn("%s/share/doc/gpuctl/examples/gpuctl.conf" % prefix, r.out)
        for name in set(re.findall(r"docs/([a-z][a-z-]*\.md)", r.out)):
            self.assertIn(name, want)
        # the example configuration parses, as written (no pools) and with its commented pool
        # example switched on (docs/config.md: the pools it describes)
        example = os.path.join(docdir, "examples", "gpuctl.conf")
        r = run([NVSIM, "exec", "dgx-a100", "--", GPUCTL, "--config", example, "info"])
        self.assertEqual(r.rc, 0, r)
        self.assertIn("none (every GPU is in the default pool)", r.out)
        on = os.path.join(self.tmp, "pools.conf")
        with open(example) as f, open(on, "w") as g:
            g.write(re.sub(r"^#(?=\[pool|description|gpus|users|groups)", "", f.read(),
                           flags=re.M))
        r = run([NVSIM, "exec", "dgx-a100", "--", GPUCTL, "--config", on, "info"])
        self.assertEqual(r.rc, 0, r)
        pools = {l.split()[0]: l.split()[1] for l in r.out.splitlines()
                 if re.match(r"^(training|scratch|default) ", l)}
        self.assertEqual(pools, {"training": "0,1,2,3", "scratch": "6", "default": "4,5,7"})

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


class PythonInstallTest(GpuctlTestCase):
    PACKAGE = ("__init__.py", "_each.py", "_errors.py", "_install.py", "_lease.py", "_lib.py",
               "_model.py", "_probe.py", "_request.py")

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gpuctl-pyinstall-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def install(self, prefix, destdir=None):
        env = dict(os.environ)
        env.pop("DESTDIR", None)
        if destdir:
            env["DESTDIR"] = destdir
        p = subprocess.run(["cmake", "--install", BUILD, "--prefix", prefix], env=env,
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)

    def libdir(self, root):
        return [d for d in ("lib", "lib64", "lib/x86_64-linux-gnu")
                if os.path.exists(os.path.join(root, d, "libgpuctl.so.0"))]

    def test_where_debians_python_looks(self):
        # staged with DESTDIR: the files under DESTDIR, _install.py naming the final place
        for prefix in ("/usr", "/usr/local", PREFIX):
            with self.subTest(prefix=prefix):
                dest = os.path.join(self.tmp, prefix.strip("/").replace("/", "-"))
                self.install(prefix, dest)
                pkg = dest + site_dir(prefix) + "/gpuctl"
                self.assertEqual(sorted(os.listdir(pkg)),
                                 sorted(self.PACKAGE + ("__pycache__", "py.typed")))
                # byte-compiled at install (users cannot write __pycache__ there)
                tag = "cpython-%s" % python_minor().replace(".", "")
                self.assertEqual(sorted(os.listdir(os.path.join(pkg, "__pycache__"))),
                                 sorted(m[:-3] + "." + tag + ".pyc" for m in self.PACKAGE))
                (lib,) = self.libdir(dest + prefix)
                ns = {}
                with open(os.path.join(pkg, "_install.py")) as f:
                    exec(f.read(), ns)
                self.assertEqual(ns["LIBDIR"], os.path.join(prefix, lib))
        # the dist-packages of /usr and /usr/local are on Debian's python3's path
        path = subprocess.run([PYTHON, "-c", "import sys; print(sys.path)"], cwd="/",
                              capture_output=True, text=True, check=True).stdout
        self.assertIn("'%s'" % site_dir("/usr"), path)
        self.assertIn("'%s'" % site_dir("/usr/local"), path)

    def test_installed_package_finds_the_installed_library(self):
        prefix = os.path.join(self.tmp, "prefix")
        self.install(prefix)
        (lib,) = self.libdir(prefix)
        site = site_dir(prefix)
        self.assertTrue(os.path.isfile(os.path.join(site, "gpuctl", "__init__.py")))
        code = ("import gpuctl, gpuctl._lib as lib\n"
                "print(gpuctl.__file__)\n"
                "print(lib.library_path())\n"
                "print('CUDA_VISIBLE_DEVICES=' + ','.join(d.uuid for d in gpuctl.select(2)))\n")
        # nothing of the source or build tree: no GPUCTL_LIBRARY, only dist-packages on the
        # path, run from / (so no python/ directory is found by accident)
        env = dict(os.environ)
        for k in ("GPUCTL_LIBRARY", "PYTHONPATH", "LD_LIBRARY_PATH"):
            env.pop(k, None)
        env.update(python_env({"PYTHONPATH": site}))
        p = subprocess.run([NVSIM, "exec", "dgx-a100", "--", PYTHON, "-c", code], env=env,
                           cwd="/", capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        module, path, chosen = p.stdout.splitlines()
        self.assertEqual(module, os.path.join(site, "gpuctl", "__init__.py"))
        self.assertEqual(path, os.path.join(prefix, lib, "libgpuctl.so.0"))
        want = run([NVSIM, "exec", "dgx-a100", "--", os.path.join(prefix, "bin", "gpuctl"),
                    "select", "-n", "2"])
        self.assertEqual(want.rc, 0, want)
        self.assertEqual(chosen, want.out.strip())
        with open(os.path.join(SCENARIOS, "dgx-a100.json")) as f:
            uuids = [g["uuid"] for g in json.load(f)["gpus"]]
        self.assertTrue(set(chosen.split("=")[1].split(",")) <= set(uuids))


if __name__ == "__main__":
    unittest.main()
