"""The Debian packages (debian/, docs/packaging.md): `dpkg-buildpackage -b -us -uc` builds them
from a copy of the source tree; lintian finds no error in them; installed with apt-get they put
gpuctl, its bash completion, the library, the Python package and the two systemd units where
Debian looks for them; `gpuctl --version` prints the project's version, Debian's python3 imports the package from
/usr and, on a simulated machine, chooses what the installed gpuctl chooses; `systemd-analyze
verify` accepts the installed units, whose ExecStart names /usr/bin/gpuctl and whose
DeviceAllow names every NVIDIA device group; the boot unit's command creates a lock file per
GPU; purging the packages leaves none of their files behind.

Not part of `make test` (it installs into /usr, on a machine others may share): `make
package-check` runs it, and so does `make fresh-check`. It runs as root, and refuses to start
when any of the packages or their files are already there (it would remove them at the end).
Run by hand: GPUCTL_BUILD_DIR=build python3 -m unittest -v test_debian_packages (in tests/cli).
"""
import glob
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from gpuctl_test import NVSIM, PYTHON, SRC, GpuctlTestCase, run, scenario_gpus

# Nothing may lead Debian's python3 to the source tree's package or the build's library.
for _k in ("GPUCTL_LIBRARY", "PYTHONPATH", "LD_LIBRARY_PATH"):
    os.environ.pop(_k, None)

PACKAGES = ("gpuctl", "libgpuctl0", "libgpuctl-dev", "python3-gpuctl", "gpuctl-exporter")
UNITDIR = "/lib/systemd/system"
UNITS = ("gpuctl-exporter.service", "gpuctl-agent.service", "gpuctl-lease-init.service")
SITE = "/usr/lib/python3/dist-packages"
# apt-get waits for the dpkg lock instead of failing while another apt-get runs.
APT = ["apt-get", "-y", "-q", "-o", "DPkg::Lock::Timeout=300"]


def sh(argv, cwd=None, env=None, timeout=1800):
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def multiarch():
    return sh(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"]).stdout.strip()


def status(pkg):
    """dpkg's state of pkg ("installed", "unpacked", "config-files", ...; "" when unknown)."""
    p = sh(["dpkg-query", "-W", "-f=${Status}", pkg])
    return p.stdout.split()[-1] if p.returncode == 0 and p.stdout.split() else ""


def installed(pkg):
    return status(pkg) == "installed"


def known(pkg):
    """Installed, or any part of it on the machine (half-installed, config files)."""
    return status(pkg) not in ("", "not-installed")


def project_version():
    """The version in CMakeLists.txt's project() line, the one source of the version."""
    with open(os.path.join(SRC, "CMakeLists.txt")) as f:
        return re.search(r"project\(gpuctl VERSION ([0-9.]+)", f.read()).group(1)


def our_paths():
    """Files the packages own; none may exist before the test (else purge would remove them)."""
    lib = "/usr/lib/%s" % multiarch()
    return ["/usr/bin/gpuctl", "/usr/share/man/man1/gpuctl.1.gz", "/usr/include/gpuctl",
            "/usr/share/bash-completion/completions/gpuctl",
            lib + "/libgpuctl.so.0", lib + "/libgpuctl.so", lib + "/libgpuctl.a",
            lib + "/pkgconfig/libgpuctl.pc", SITE + "/gpuctl", "/usr/share/doc/gpuctl",
            "/etc/default/gpuctl-exporter"] + \
           [os.path.join(UNITDIR, u) for u in UNITS]


def copy_source(dest):
    """The source tree without build outputs or version control (a clean clone's files)."""
    def ignore(d, names):
        top = os.path.abspath(d) == SRC
        return [n for n in names if n == "__pycache__" or
                (top and (n.startswith(("build", "obj-", ".git")) or n == "debian"))]
    shutil.copytree(SRC, dest, ignore=ignore, symlinks=True)
    # debian/ without what an earlier dpkg-buildpackage in the tree left there
    shutil.copytree(os.path.join(SRC, "debian"), os.path.join(dest, "debian"),
                    ignore=lambda d, names: [n for n in names if n in PACKAGES or n in (
                        "tmp", ".debhelper", "files", "debhelper-build-stamp") or
                        n.endswith((".substvars", ".debhelper.log"))])


class DebianPackagesTest(GpuctlTestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise AssertionError("installs packages into /usr: run it as root")
        there = [p for p in PACKAGES if known(p)] + [p for p in our_paths()
                                                         if os.path.lexists(p)]
        if there:
            raise AssertionError("refusing to run: already on this machine (the test would "
                                 "remove them): %s" % ", ".join(there))
        cls.tmp = tempfile.mkdtemp(prefix="gpuctl-deb-")
        src = os.path.join(cls.tmp, "gpuctl")
        copy_source(src)
        p = sh(["dpkg-buildpackage", "-b", "-us", "-uc"], cwd=src)
        assert p.returncode == 0, "dpkg-buildpackage failed:\n" + (p.stdout + p.stderr)[-4000:]
        cls.debs = sorted(glob.glob(os.path.join(cls.tmp, "*.deb")))
        cls.changes = glob.glob(os.path.join(cls.tmp, "*.changes"))
        cls.installed = False
        cls.install = sh(APT + ["install", "--no-install-recommends"] + cls.debs)
        cls.installed = True

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "installed", False):
            left = [p for p in PACKAGES if known(p)]
            if left:
                sh(APT + ["purge"] + left)
        shutil.rmtree(getattr(cls, "tmp", "/nonexistent"), ignore_errors=True)

    def test_0_packages_built_and_installed(self):
        names = sorted(os.path.basename(d).split("_")[0] for d in self.debs
                       if not os.path.basename(d).split("_")[0].endswith("-dbgsym"))
        self.assertEqual(names, sorted(PACKAGES))
        self.assertEqual(self.install.returncode, 0, self.install.stdout + self.install.stderr)
        for p in PACKAGES:
            self.assertTrue(installed(p), p)

    def test_lintian_finds_no_error(self):
        self.assertEqual(len(self.changes), 1, self.changes)
        p = sh(["lintian", "--tag-display-limit", "0", self.changes[0]])
        errors = [l for l in p.stdout.splitlines() if l.startswith("E:")]
        self.assertEqual(errors, [], p.stdout)

    def test_files_where_debian_looks(self):
        lib = "/usr/lib/%s" % multiarch()
        owner = {
            "/usr/bin/gpuctl": "gpuctl",
            "/usr/share/man/man1/gpuctl.1.gz": "gpuctl",
            "/usr/share/bash-completion/completions/gpuctl": "gpuctl",
            UNITDIR + "/gpuctl-lease-init.service": "gpuctl",
            lib + "/libgpuctl.so.0": "libgpuctl0",
            lib + "/libgpuctl.so": "libgpuctl-dev",
            lib + "/libgpuctl.a": "libgpuctl-dev",
            lib + "/pkgconfig/libgpuctl.pc": "libgpuctl-dev",
            "/usr/include/gpuctl/gpuctl.h": "libgpuctl-dev",
            "/usr/include/gpuctl/alloc.h": "libgpuctl-dev",  # one of the headers it includes
            SITE + "/gpuctl/__init__.py": "python3-gpuctl",
            UNITDIR + "/gpuctl-exporter.service": "gpuctl-exporter",
            UNITDIR + "/gpuctl-agent.service": "gpuctl-exporter",
            # uncompressed, where --help and the man page name them
            "/usr/share/doc/gpuctl/config.md": "gpuctl",
            "/usr/share/doc/gpuctl/examples/gpuctl.conf": "gpuctl",
            "/etc/default/gpuctl-exporter": "gpuctl-exporter",
        }
        for path, pkg in owner.items():
            with self.subTest(path=path):
                self.assertTrue(os.path.exists(path), path)
                p = sh(["dpkg-query", "-S", path])
                self.assertEqual(p.stdout.split(":")[0], pkg, p.stdout + p.stderr)
        # the soname's package: libgpuctl.so.0 is what libgpuctl0 is named after
        p = sh(["objdump", "-p", lib + "/libgpuctl.so.0"])
        self.assertIn("SONAME               libgpuctl.so.0", p.stdout)
        # pkg-config finds the installed library with no PKG_CONFIG_PATH
        p = sh(["pkg-config", "--modversion", "libgpuctl"],
               env={"PATH": "/usr/bin:/bin"})
        self.assertEqual(p.stdout.strip(), project_version(), p.stderr)

    def test_version(self):
        p = sh(["/usr/bin/gpuctl", "--version"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(project_version(), p.stdout)

    def test_bash_completion_installed(self):
        # where bash-completion loads it from, completing with the installed gpuctl
        script = ('source /usr/share/bash-completion/completions/gpuctl; '
                  'COMP_WORDS=(gpuctl s); COMP_CWORD=1; _gpuctl; echo "${COMPREPLY[@]}"')
        p = sh(["bash", "--norc", "--noprofile", "-c", script], env={"PATH": "/usr/bin:/bin"})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(sorted(p.stdout.split()), ["select", "slurm"])

    def test_python_package_from_usr(self):
        code = ("import gpuctl, gpuctl._lib as lib\n"
                "print(gpuctl.__file__)\n"
                "print(lib.library_path())\n"
                "print('CUDA_VISIBLE_DEVICES=' + ','.join(d.uuid for d in gpuctl.select(2)))\n")
        env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"}
        p = sh([PYTHON, "-c", "import gpuctl; print(gpuctl.__file__)"], env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip(), SITE + "/gpuctl/__init__.py")
        # on a simulated machine, nothing of the source or build tree but the simulator (no
        # GPUCTL_LIBRARY, no PYTHONPATH: removed from this process's environment below)
        r = run([NVSIM, "exec", "dgx-a100", "--", PYTHON, "-c", code])
        self.assertEqual(r.rc, 0, r)
        module, path, chosen = r.out.splitlines()
        self.assertEqual(module, SITE + "/gpuctl/__init__.py")
        self.assertEqual(path, "/usr/lib/%s/libgpuctl.so.0" % multiarch())
        want = run([NVSIM, "exec", "dgx-a100", "--", "/usr/bin/gpuctl", "select", "-n", "2"])
        self.assertEqual(want.rc, 0, want)
        self.assertEqual(chosen, want.out.strip())
        uuids = {g["uuid"] for g in scenario_gpus("dgx-a100")}
        self.assertEqual(len(set(chosen.split("=")[1].split(",")) & uuids), 2, chosen)

    def unit(self, name):
        with open(os.path.join(UNITDIR, name)) as f:
            return f.read()

    def test_units_verify(self):
        p = sh(["systemd-analyze", "verify"] + [os.path.join(UNITDIR, u) for u in UNITS])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        # verify prints nothing for units it has nothing to say about; what it may print about
        # units we do not ship (the host's own) is not ours
        ours = [l for l in (p.stdout + p.stderr).splitlines() if "gpuctl" in l]
        self.assertEqual(ours, [], p.stdout + p.stderr)

    def test_exporter_unit(self):
        text = self.unit("gpuctl-exporter.service")
        self.assertIn("\nExecStart=/usr/bin/gpuctl exporter ", text)
        allowed = re.findall(r"^DeviceAllow=(\S+) (\S+)$", text, re.M)
        groups = {g for g, _ in allowed}
        # /dev/nvidiactl and /dev/nvidiaN: "nvidia-frontend" before the 545 drivers, "nvidia"
        # and "nvidiactl" since (NVIDIA 550.40.07 release notes); uvm; MIG capabilities
        for g in ("char-nvidia-frontend", "char-nvidia", "char-nvidiactl", "char-nvidia-uvm",
                  "char-nvidia-caps"):
            self.assertIn(g, groups)
        self.assertIn("\nDevicePolicy=closed\n", text)
        # where it listens: the unit's default, then the package's conffile
        self.assertIn("\nEnvironmentFile=-/etc/default/gpuctl-exporter\n", text)
        self.assertIn(" --listen ${GPUCTL_EXPORTER_LISTEN} ", text)
        p = sh(["dpkg-query", "-W", "-f", "${Conffiles}", "gpuctl-exporter"])
        self.assertIn("/etc/default/gpuctl-exporter", p.stdout)

    def test_agent_unit(self):
        # docs/agent.md, "The service": sandboxed, its state directory the one place it
        # writes, installed but not enabled (it serves on the exporter's port)
        text = self.unit("gpuctl-agent.service")
        self.assertIn("\nExecStart=/usr/bin/gpuctl agent ", text)
        for line in ("ProtectSystem=strict", "StateDirectory=gpuctl", "DevicePolicy=closed",
                     "Conflicts=gpuctl-exporter.service",
                     # the health state file, /run/gpuctl-health.state (docs/agent.md)
                     "ReadWritePaths=/run"):
            self.assertIn("\n%s\n" % line, text)
        p = sh(["systemctl", "is-enabled", "gpuctl-agent.service"])
        self.assertNotEqual(p.stdout.strip(), "enabled", p.stdout + p.stderr)

    def test_help_names_the_installed_docs(self):
        p = sh(["/usr/bin/gpuctl", "--help"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("installed in /usr/share/doc/gpuctl/,", p.stdout)
        for name in set(re.findall(r"docs/([a-z][a-z-]*\.md)", p.stdout)):
            self.assertTrue(os.path.isfile("/usr/share/doc/gpuctl/" + name), name)

    def test_lease_init_unit_creates_the_lock_files(self):
        text = self.unit("gpuctl-lease-init.service")
        m = re.search(r"^ExecStart=(.*)$", text, re.M)
        self.assertEqual(m.group(1), "/usr/bin/gpuctl lease init")
        self.assertIn("\nType=oneshot\n", text)
        self.assertIn("\nWantedBy=multi-user.target\n", text)
        # the unit's command, as systemd would run it, on a simulated machine (in a lease
        # directory of the test's: /run/gpuctl is the machine's own)
        lease_dir = os.path.join(self.tmp, "leases")
        r = run([NVSIM, "exec", "dgx-a100", "--"] + m.group(1).split(),
                env={"GPUCTL_LEASE_DIR": lease_dir})
        self.assertEqual(r.rc, 0, r)
        locks = sorted(os.listdir(os.path.join(lease_dir, "locks")))
        want = sorted(g["uuid"] + ".lock" for g in scenario_gpus("dgx-a100"))
        self.assertEqual(locks, want)

    def test_z_purge_leaves_nothing(self):
        # run last (unittest orders by name): purge now, and check what it left
        cls = type(self)
        p = sh(APT + ["purge"] + list(PACKAGES))
        cls.installed = False
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        for pkg in PACKAGES:
            self.assertFalse(installed(pkg), pkg)
        self.assertEqual([x for x in our_paths() if os.path.lexists(x)], [])


if __name__ == "__main__":
    unittest.main()
