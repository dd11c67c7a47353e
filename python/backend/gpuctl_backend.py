"""The PEP 517 build backend of the gpuctl Python package: standard library only, in the tree.

`pip install ./python` builds the package with this module (pyproject.toml: requires = [],
backend-path = ["backend"]), so pip's isolated build environment needs nothing from a package
index: it works on a machine that reaches none (CI, offline servers; this project installs only
from Debian's archive). It implements the PEP 517 hooks (build_wheel, build_sdist,
get_requires_for_build_*, prepare_metadata_for_build_wheel) and PEP 660's build_editable.

Decisions:
- The metadata is written here (core metadata 2.1), the version read from gpuctl/__init__.py's
  __version__ (python/tests/test_abi.py checks it is the library's), the long description
  python/README.md. pyproject.toml has no [project] table: one place says it, this module.
- A wheel from the source tree is pure (py3-none-any): gpuctl/*.py and py.typed; the package
  finds libgpuctl.so.0 at run time (GPUCTL_LIBRARY, the system's: python/README.md).
  `_install.py` is never packed: it is what `make install` writes for its own install.
- config_settings "bundle" (a path to a built libgpuctl.so.0: the build's `python-wheel`
  target, python/CMakeLists.txt) packs that file as gpuctl/libgpuctl.so.0 and makes the wheel a
  platform wheel, tagged py3-none-<this machine's platform> (linux_x86_64; not manylinux: the
  library is built against this system's glibc).
- Reproducible: files in sorted order, timestamps from SOURCE_DATE_EPOCH (else 1980-01-01, the
  zip format's earliest), owners root, modes 0644 (0755 for the library).
- An editable install (`pip install -e ./python`) is a .pth file naming this source directory.

Run by hand (what the build does): python3 backend/gpuctl_backend.py OUTDIR [--bundle LIB]
writes the sdist and the wheel into OUTDIR.
"""
import base64
import hashlib
import io
import os
import re
import sys
import sysconfig
import tarfile
import time
import zipfile

NAME = "gpuctl"
SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/ (or the sdist)
SONAME = "libgpuctl.so.0"
SUMMARY = "Which GPUs should this job get, and keep them to it: Python over libgpuctl"
REQUIRES_PYTHON = ">=3.9"
# Built by this module, run as the build's backend (the files an sdist carries besides the
# package itself).
SDIST_FILES = ("pyproject.toml", "README.md", "backend/gpuctl_backend.py")


def version():
    """__version__ of gpuctl/__init__.py, read without importing the package."""
    with open(os.path.join(SOURCE, NAME, "__init__.py"), encoding="utf-8") as f:
        m = re.search(r'^__version__ = "([^"]+)"$', f.read(), re.M)
    if not m:
        raise RuntimeError("gpuctl/__init__.py has no __version__ line")
    return m.group(1)


def metadata():
    """The METADATA file (core metadata 2.1), the README as the long description."""
    with open(os.path.join(SOURCE, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    head = [
        ("Metadata-Version", "2.1"),
        ("Name", NAME),
        ("Version", version()),
        ("Summary", SUMMARY),
        ("License", "MIT"),
        ("Requires-Python", REQUIRES_PYTHON),
        ("Classifier", "License :: OSI Approved :: MIT License"),
        ("Classifier", "Operating System :: POSIX :: Linux"),
        ("Classifier", "Programming Language :: Python :: 3"),
        ("Classifier", "Typing :: Typed"),
        ("Description-Content-Type", "text/markdown"),
    ]
    return "".join("%s: %s\n" % kv for kv in head) + "\n" + readme


def package_files():
    """(path in the wheel, path here) of the package: its modules and py.typed."""
    pkg = os.path.join(SOURCE, NAME)
    names = sorted(n for n in os.listdir(pkg)
                   if (n.endswith(".py") and n != "_install.py") or n == "py.typed")
    return [(NAME + "/" + n, os.path.join(pkg, n)) for n in names]


def dist_info():
    return "%s-%s.dist-info" % (NAME, version())


def platform_tag():
    """This machine's platform as a wheel tag (PEP 425): linux-x86_64 is linux_x86_64."""
    return re.sub(r"[^A-Za-z0-9]", "_", sysconfig.get_platform())


def wheel_file(tag):
    return ("Wheel-Version: 1.0\nGenerator: gpuctl_backend %s\nRoot-Is-Purelib: %s\nTag: %s\n"
            % (version(), "true" if tag.endswith("-any") else "false", tag))


def _epoch():
    t = int(os.environ.get("SOURCE_DATE_EPOCH", 315532800))
    return max(t, 315532800)  # zip cannot say earlier than 1980


def _record_hash(data):
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _write_wheel(directory, tag, entries):
    """Writes NAME-VERSION-TAG.whl into directory: entries ((arcname, bytes, mode)), then the
    dist-info's METADATA, WHEEL and RECORD (every file's sha256 and size; RECORD itself
    without). Returns the file's name."""
    info = dist_info()
    entries = list(entries) + [
        (info + "/METADATA", metadata().encode("utf-8"), 0o644),
        (info + "/WHEEL", wheel_file(tag).encode("ascii"), 0o644),
    ]
    record = "".join("%s,%s,%d\n" % (a, _record_hash(d), len(d)) for a, d, _ in entries)
    record += info + "/RECORD,,\n"
    entries.append((info + "/RECORD", record.encode("utf-8"), 0o644))
    name = "%s-%s-%s.whl" % (NAME, version(), tag)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    stamp = time.gmtime(_epoch())[:6]
    with zipfile.ZipFile(path + ".part", "w", zipfile.ZIP_DEFLATED) as z:
        for arcname, data, mode in entries:
            zi = zipfile.ZipInfo(arcname, stamp)
            zi.external_attr = (0o100000 | mode) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    os.replace(path + ".part", path)
    return name


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _bundle(config_settings):
    lib = (config_settings or {}).get("bundle")
    if lib is not None and not os.path.isfile(lib):
        raise FileNotFoundError("gpuctl_backend: bundle: %s is not a file" % lib)
    return lib


# ---- PEP 517 ----

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = os.path.join(metadata_directory, dist_info())
    os.makedirs(info, exist_ok=True)
    tag = "py3-none-" + (platform_tag() if _bundle(config_settings) else "any")
    with open(os.path.join(info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(metadata())
    with open(os.path.join(info, "WHEEL"), "w", encoding="ascii") as f:
        f.write(wheel_file(tag))
    return dist_info()


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    entries = [(a, _read(p), 0o644) for a, p in package_files()]
    lib = _bundle(config_settings)
    tag = "py3-none-any"
    if lib:
        entries.append((NAME + "/" + SONAME, _read(lib), 0o755))
        tag = "py3-none-" + platform_tag()
    return _write_wheel(wheel_directory, tag, entries)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    pth = (SOURCE + "\n").encode(sys.getfilesystemencoding())
    return _write_wheel(wheel_directory, "py3-none-any", [(NAME + ".pth", pth, 0o644)])


def build_sdist(sdist_directory, config_settings=None):
    base = "%s-%s" % (NAME, version())
    files = [(f, os.path.join(SOURCE, f)) for f in SDIST_FILES] + package_files()
    os.makedirs(sdist_directory, exist_ok=True)
    path = os.path.join(sdist_directory, base + ".tar.gz")

    def add(tar, arcname, data):
        ti = tarfile.TarInfo(base + "/" + arcname)
        ti.size, ti.mtime, ti.mode = len(data), _epoch(), 0o644
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = "root"
        tar.addfile(ti, io.BytesIO(data))

    with open(path + ".part", "wb") as raw:
        import gzip
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=_epoch()) as gz:
            with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
                for arcname, p in sorted(files):
                    add(tar, arcname, _read(p))
                add(tar, "PKG-INFO", metadata().encode("utf-8"))
    os.replace(path + ".part", path)
    return base + ".tar.gz"


def main(argv):
    """python3 gpuctl_backend.py OUTDIR [--bundle LIB]: the sdist and the wheel into OUTDIR."""
    if len(argv) not in (1, 3) or (len(argv) == 3 and argv[1] != "--bundle"):
        sys.stderr.write("usage: gpuctl_backend.py OUTDIR [--bundle LIBGPUCTL]\n")
        return 2
    settings = {"bundle": argv[2]} if len(argv) == 3 else {}
    try:
        print(build_sdist(argv[0]))
        print(build_wheel(argv[0], settings))
    except OSError as e:
        sys.stderr.write("gpuctl_backend: %s\n" % e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
