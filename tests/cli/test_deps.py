"""scripts/deps.sh enables Debian's contrib and non-free components (where nvtop, gpustat,
python3-pynvml and libnvidia-ml1 live) in a sources file of its own, for the Debian archive the
machine already uses, in either sources format, and only where they are missing.

Each case points apt at a private configuration (APT_CONFIG: its own sources.list, sources.list.d
and lists directory, never the machine's) and asks `scripts/deps.sh sources` what it would write.
The expected stanzas are written here from Debian's sources.list(5) rules: one deb822 stanza per
archive URI and suite of this release that has `main` without contrib or non-free."""
import os
import shutil
import subprocess
import tempfile
import unittest

from gpuctl_test import SRC

DEPS = os.path.join(SRC, "scripts", "deps.sh")
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"


def codename():
    with open("/etc/os-release") as f:
        facts = dict(l.rstrip("\n").split("=", 1) for l in f if "=" in l)
    return facts["VERSION_CODENAME"].strip('"')


class DepsSourcesTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gpuctl-test-apt-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.parts = os.path.join(self.dir, "sources.list.d")
        os.makedirs(self.parts)
        os.makedirs(os.path.join(self.dir, "lists", "partial"))
        self.conf = os.path.join(self.dir, "apt.conf")
        with open(self.conf, "w") as f:
            f.write(f'Dir::Etc::sourcelist "{self.dir}/sources.list";\n'
                    f'Dir::Etc::sourceparts "{self.parts}";\n'
                    f'Dir::State::lists "{self.dir}/lists";\n')
        self.c = codename()

    def write(self, name, text):
        with open(os.path.join(self.dir, name), "w") as f:
            f.write(text)

    def sources(self):
        env = dict(os.environ, APT_CONFIG=self.conf)
        p = subprocess.run(["sh", DEPS, "sources"], env=env, capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "")
        return p.stdout.rstrip("\n")

    def stanza(self, uri, suite, comps):
        s = f"Types: deb\nURIs: {uri}\nSuites: {suite}\nComponents: {comps}\n"
        if os.access(KEYRING, os.R_OK):
            s += f"Signed-By: {KEYRING}\n"
        return s + "\n"

    def test_deb822_main_only(self):
        """A fresh Debian 12: one deb822 file, main only, for the release, its updates and
        security."""
        c = self.c
        self.write("sources.list.d/debian.sources",
                   f"Types: deb\nURIs: http://deb.debian.org/debian\nSuites: {c} {c}-updates\n"
                   f"Components: main\nSigned-By: {KEYRING}\n\n"
                   f"Types: deb\nURIs: http://deb.debian.org/debian-security\n"
                   f"Suites: {c}-security\nComponents: main\nSigned-By: {KEYRING}\n")
        self.assertEqual(self.sources(), "".join([
            self.stanza("http://deb.debian.org/debian-security/", f"{c}-security", "contrib non-free"),
            self.stanza("http://deb.debian.org/debian/", c, "contrib non-free"),
            self.stanza("http://deb.debian.org/debian/", f"{c}-updates", "contrib non-free"),
        ]).rstrip("\n"))

    def test_classic_sources_list_partly_enabled(self):
        """The one-line format, a mirror of the user's choice, contrib already on for one suite:
        the same mirror, and only the missing component."""
        c = self.c
        self.write("sources.list",
                   f"deb http://ftp.de.debian.org/debian {c} main\n"
                   f"deb http://ftp.de.debian.org/debian {c}-updates main contrib\n"
                   f"deb-src http://ftp.de.debian.org/debian {c} main\n"
                   "deb http://example.org/other stable main\n")
        self.assertEqual(self.sources(), "".join([
            self.stanza("http://ftp.de.debian.org/debian/", c, "contrib non-free"),
            self.stanza("http://ftp.de.debian.org/debian/", f"{c}-updates", "non-free"),
        ]).rstrip("\n"))

    def test_already_enabled(self):
        c = self.c
        self.write("sources.list", f"deb http://deb.debian.org/debian {c} main contrib non-free "
                                   "non-free-firmware\n")
        self.assertEqual(self.sources(), "")

    def test_own_file_present(self):
        """A second run never writes again: our file is there (whatever the others say)."""
        c = self.c
        self.write("sources.list", f"deb http://deb.debian.org/debian {c} main\n")
        self.assertNotEqual(self.sources(), "")
        self.write("sources.list.d/gpuctl-contrib-non-free.sources",
                   self.stanza("http://deb.debian.org/debian/", c, "contrib non-free"))
        self.assertEqual(self.sources(), "")

    def test_this_machine(self):
        """After `scripts/deps.sh test` the packages are installed, and installable from the
        components this machine has enabled."""
        for pkg in ("nvtop", "gpustat", "python3-pynvml", "libnvidia-ml1", "tmux", "libfaketime"):
            p = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True,
                               text=True)
            self.assertIn("ok installed", p.stdout, f"{pkg}: run scripts/deps.sh test")
        p = subprocess.run(["sh", DEPS, "sources"], capture_output=True, text=True, timeout=60)
        self.assertEqual((p.returncode, p.stdout), (0, ""))


if __name__ == "__main__":
    unittest.main()
