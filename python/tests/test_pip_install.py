"""pip installs of the package into virtual environments made here (`python3 -m venv`, Debian's
python3-venv, with the pip it bundles): `pip install ./python` from the source tree (pure: it
finds the library through GPUCTL_LIBRARY or the dynamic linker), the wheel the build makes
(build/python/dist/, the library bundled), the sdist, and an editable install; then the
installed package chooses on a simulated machine and its choice is compared with
`gpuctl select -n 2 --format json` (the command line). No package index is reachable here, nor
needed: pip's index is pointed at a local server that records every request, and it must get
none (the in-tree build backend, python/backend/gpuctl_backend.py, requires nothing).

Interpreters: every CPython >= 3.9 in /usr/bin (Debian 12 ships only 3.11, so on Debian 12 this
is one interpreter: there is no second Debian one to test), and those named in
$GPUCTL_TEST_PYTHONS (space-separated paths: a pyenv or conda python, by hand).

The wheel's files are checked against its RECORD with hashlib here, and an uninstall must leave
the environment's site-packages as it was before the install."""
import base64
import csv
import glob
import hashlib
import http.server
import io
import json
import os
import re
import subprocess
import tarfile
import threading
import zipfile

import pytest

from conftest import BUILD, PYDIR, SRC, TIMEOUT

WHEEL = os.environ.get("GPUCTL_WHEEL") or (
    glob.glob(os.path.join(BUILD, "python", "dist", "gpuctl-*-py3-none-*.whl")) or [""])[0]
SDIST = os.environ.get("GPUCTL_SDIST") or (
    glob.glob(os.path.join(BUILD, "python", "dist", "gpuctl-*.tar.gz")) or [""])[0]
BUILD_LIB = os.path.join(BUILD, "lib", "libgpuctl.so.0")


def interpreters():
    found = []
    for p in sorted(glob.glob("/usr/bin/python3.[0-9]*")):
        if re.fullmatch(r"/usr/bin/python3\.\d+", p) and int(p.rsplit(".", 1)[1]) >= 9:
            found.append(p)
    found += os.environ.get("GPUCTL_TEST_PYTHONS", "").split()
    return found


def project_version():
    """The version CMakeLists.txt's project() says (the library's, and the package's)."""
    with open(os.path.join(SRC, "CMakeLists.txt")) as f:
        return re.search(r"project\(gpuctl VERSION ([0-9.]+)", f.read()).group(1)


class Index:
    """A package index on 127.0.0.1 that answers 404 and records every path asked for."""

    def __init__(self):
        self.hits = []
        hits = self.hits

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                hits.append(self.path)
                self.send_error(404)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d/simple/" % self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Venv:
    """A virtual environment made by `interpreter -m venv` in a scratch directory."""

    def __init__(self, interpreter, where):
        self.dir = os.path.join(where, "venv")
        r = subprocess.run([interpreter, "-m", "venv", self.dir], env=self.env(),
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        self.python = os.path.join(self.dir, "bin", "python")
        self.site = self.run_python(
            "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
        assert self.site.startswith(self.dir + "/"), self.site

    def env(self, extra=None):
        """The test's environment without the source tree on the path or GPUCTL_LIBRARY (each
        test says which library), pip told to read no configuration file and to keep no cache
        (nothing of this user's is touched)."""
        e = dict(os.environ)
        for k in list(e):
            if k in ("PYTHONPATH", "PYTHONHOME", "GPUCTL_LIBRARY") or k.startswith("PIP_"):
                del e[k]
        e.update({"PIP_CONFIG_FILE": os.devnull, "PIP_NO_CACHE_DIR": "1",
                  "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
        if extra:
            e.update(extra)
        return e

    def run_python(self, code, extra=None):
        return subprocess.run([self.python, "-c", code], env=self.env(extra), cwd=self.dir,
                              capture_output=True, text=True, timeout=TIMEOUT)

    def pip(self, *args, extra=None, cwd=None):
        r = subprocess.run([self.python, "-m", "pip", *args], env=self.env(extra),
                           cwd=cwd or self.dir, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        return r

    def files(self):
        """Every path under site-packages, and every script in bin/."""
        out = set()
        for top in (self.site, os.path.join(self.dir, "bin")):
            for root, dirs, names in os.walk(top):
                for n in names + dirs:
                    out.add(os.path.relpath(os.path.join(root, n), self.dir))
        return out


@pytest.fixture(params=interpreters(), ids=str)
def venv(request, tmp_path):
    return Venv(request.param, str(tmp_path))


CHOOSE = """
import json, pydoc, gpuctl, gpuctl._lib as lib
print(json.dumps({"module": gpuctl.__file__, "library": lib.library_path(),
                  "chosen": [d.uuid for d in gpuctl.select(2)]}))
"""


def cli_choice(m):
    r = m.gpuctl("select", "-n", "2", "--format", "json")
    assert r.returncode == 0, r.stderr
    return [d["uuid"] for d in json.loads(r.stdout)["devices"]]


def check_choice(m, venv, extra):
    r = venv.run_python(CHOOSE, extra)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["module"] == os.path.join(venv.site, "gpuctl", "__init__.py")
    want = cli_choice(m)
    assert got["chosen"] == want and len(want) == 2 and set(want) <= set(m.uuids)
    return got


def select_docstring():
    """select()'s docstring as the source file has it (read with ast, not imported)."""
    import ast
    with open(os.path.join(PYDIR, "gpuctl", "__init__.py")) as f:
        tree = ast.parse(f.read())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "select")
    return ast.get_docstring(fn)


def check_help_and_types(venv, extra):
    # help() in a pipe prints the page without a pager
    r = venv.run_python("import gpuctl; help(gpuctl.select)", dict(extra, PAGER="cat"))
    assert r.returncode == 0, r.stderr
    page = " ".join(r.stdout.split())
    for line in select_docstring().splitlines():
        assert " ".join(line.split()) in page
    # the signature with its type hints (3.13's pydoc puts each parameter on a line)
    assert re.search(r"select\(\s*n: '?int'? = 1,\s*\*,\s*min_free_mem: '?int \| str \| None",
                     r.stdout), r.stdout
    assert os.path.isfile(os.path.join(venv.site, "gpuctl", "py.typed"))


def record(venv):
    info = glob.glob(os.path.join(venv.site, "gpuctl-*.dist-info"))
    assert len(info) == 1, info
    with open(os.path.join(info[0], "RECORD"), newline="") as f:
        return {row[0] for row in csv.reader(f)}


def check_uninstall(venv, before):
    installed = venv.files() - before
    # RECORD names every file the install made (directories are not files)
    listed = record(venv)
    for rel in installed:
        path = os.path.join(venv.dir, rel)
        if os.path.isfile(path):
            assert os.path.relpath(path, venv.site) in listed, rel
    venv.pip("uninstall", "-y", "gpuctl")
    assert venv.files() == before


def test_pip_install_source_tree_offline(sim, venv):
    m = sim("dgx-a100")
    before = venv.files()
    index = Index()
    try:
        # plain `pip install ./python`, as a user types it, from the source root: pip's
        # isolated build needs nothing from the index (requires = [])
        r = venv.pip("install", "./python", cwd=SRC,
                     extra={"PIP_INDEX_URL": index.url, "PIP_RETRIES": "0"})
    finally:
        index.close()
    assert index.hits == [], index.hits
    assert "Successfully installed gpuctl-%s" % project_version() in r.stdout
    # nothing is written into the source tree
    assert not os.path.exists(os.path.join(PYDIR, "build"))
    assert not glob.glob(os.path.join(PYDIR, "*.egg-info"))
    # pure: no library in it; GPUCTL_LIBRARY names one, else the dynamic linker finds it
    assert not os.path.exists(os.path.join(venv.site, "gpuctl", "libgpuctl.so.0"))
    got = check_choice(m, venv, {"GPUCTL_LIBRARY": BUILD_LIB})
    assert got["library"] == BUILD_LIB
    linker = {"LD_LIBRARY_PATH": os.path.dirname(BUILD_LIB) + ":" + os.environ["LD_LIBRARY_PATH"]}
    got = check_choice(m, venv, linker)
    assert got["library"] == "libgpuctl.so.0"
    check_help_and_types(venv, {"GPUCTL_LIBRARY": BUILD_LIB})
    check_uninstall(venv, before)


def test_built_wheel_bundles_the_library(sim, venv):
    m = sim("dgx-a100")
    assert os.path.isfile(WHEEL), "no wheel: build the python-wheel target"
    # named and tagged for this machine (PEP 425: linux_<machine>), not pure
    name = os.path.basename(WHEEL)
    assert name == "gpuctl-%s-py3-none-linux_%s.whl" % (project_version(), os.uname().machine)
    with zipfile.ZipFile(WHEEL) as z:
        names = z.namelist()
        info = "gpuctl-%s.dist-info/" % project_version()
        wheel = z.read(info + "WHEEL").decode()
        assert "Root-Is-Purelib: false\n" in wheel
        assert "Tag: py3-none-linux_%s\n" % os.uname().machine in wheel
        meta = z.read(info + "METADATA").decode()
        head = meta.split("\n\n", 1)[0].splitlines()
        assert head[:3] == ["Metadata-Version: 2.1", "Name: gpuctl",
                            "Version: " + project_version()]
        assert "Requires-Python: >=3.9" in head
        # every file has its RECORD line, with the sha256 and size of what is in the zip
        rows = list(csv.reader(io.StringIO(z.read(info + "RECORD").decode())))
        assert sorted(r[0] for r in rows) == sorted(names)
        for path, digest, size in rows:
            if path == info + "RECORD":
                assert digest == size == ""
                continue
            data = z.read(path)
            want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            assert (digest, int(size)) == ("sha256=" + want.decode(), len(data)), path
        # the modules of the source tree, py.typed and the library this build made
        modules = sorted(os.path.basename(p) for p in glob.glob(os.path.join(PYDIR, "gpuctl",
                                                                             "*.py")))
        assert sorted(n for n in names if not n.startswith(info)) == sorted(
            ["gpuctl/" + p for p in modules if p != "_install.py"]
            + ["gpuctl/py.typed", "gpuctl/libgpuctl.so.0"])
        with open(BUILD_LIB, "rb") as f:
            assert z.read("gpuctl/libgpuctl.so.0") == f.read()
    before = venv.files()
    venv.pip("install", "--no-index", WHEEL)
    # no GPUCTL_LIBRARY, no build tree on the linker's path: the bundled copy
    got = check_choice(m, venv, {})
    assert got["library"] == os.path.join(venv.site, "gpuctl", "libgpuctl.so.0")
    check_help_and_types(venv, {})
    check_uninstall(venv, before)


def test_sdist_installs(sim, venv):
    m = sim("dgx-a100")
    assert os.path.isfile(SDIST), "no sdist: build the python-wheel target"
    base = "gpuctl-%s/" % project_version()
    with tarfile.open(SDIST) as t:
        names = t.getnames()
        pkginfo = t.extractfile(base + "PKG-INFO").read().decode()
    assert base + "pyproject.toml" in names and base + "gpuctl/py.typed" in names
    assert base + "gpuctl/_install.py" not in names
    assert pkginfo.startswith("Metadata-Version: 2.1\nName: gpuctl\n")
    before = venv.files()
    venv.pip("install", "--no-index", SDIST)
    assert not os.path.exists(os.path.join(venv.site, "gpuctl", "libgpuctl.so.0"))
    check_choice(m, venv, {"GPUCTL_LIBRARY": BUILD_LIB})
    check_uninstall(venv, before)


def test_editable_install_is_the_source_tree(sim, venv):
    m = sim("dgx-a100")
    before = venv.files()
    venv.pip("install", "--no-index", "-e", PYDIR)
    r = venv.run_python(CHOOSE, {"GPUCTL_LIBRARY": BUILD_LIB})
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["module"] == os.path.join(PYDIR, "gpuctl", "__init__.py")
    assert got["chosen"] == cli_choice(m)
    venv.pip("uninstall", "-y", "gpuctl")
    assert venv.files() == before


def test_modules_are_python_39():
    # the oldest Python the package says it runs on (Requires-Python: >=3.9): its grammar
    import ast
    paths = glob.glob(os.path.join(PYDIR, "gpuctl", "*.py")) + \
        [os.path.join(PYDIR, "backend", "gpuctl_backend.py")]
    for p in paths:
        with open(p) as f:
            ast.parse(f.read(), p, feature_version=(3, 9))

