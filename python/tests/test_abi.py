"""The ctypes mirror of the C API against the headers themselves: a C program compiled here against
include/gpuctl/gpuctl.h (the umbrella of include/gpuctl/*.h) prints, with offsetof and sizeof, the
layout of every structure the package mirrors, and the values of the constants it uses; they
must equal the package's. A field added, moved or retyped in a header fails this test (so does a
struct_size the library refuses), where it would otherwise send the library a request it reads
differently."""
import ctypes
import errno
import json
import os
import subprocess

import gpuctl
from gpuctl import _lib

from conftest import SRC, tool_env

# struct name -> its fields, as the package mirrors them (the C program prints these).
STRUCTS = {name: [f[0] for f in cls._fields_] for name, cls in _lib.STRUCTS.items()}

CONSTANTS = {
    "SNAP_PROCESSES": "GPUCTL_SNAP_PROCESSES", "SNAP_TOPOLOGY": "GPUCTL_SNAP_TOPOLOGY",
    "SNAP_MIG": "GPUCTL_SNAP_MIG", "SNAP_HEALTH": "GPUCTL_SNAP_HEALTH",
    "FT_INT": "GPUCTL_FT_INT", "FT_STR": "GPUCTL_FT_STR",
    "MIG_INDEX": "GPUCTL_MIG_INDEX", "MIG_GI": "GPUCTL_MIG_GI", "MIG_CI": "GPUCTL_MIG_CI",
    "MIG_MEMORY_TOTAL": "GPUCTL_MIG_MEMORY_TOTAL", "MIG_MEMORY_USED": "GPUCTL_MIG_MEMORY_USED",
    "SITE_CREATE": "GPUCTL_SITE_CREATE", "SITE_NO_LEASES": "GPUCTL_SITE_NO_LEASES",
    "ALLOC_CHOOSE": "GPUCTL_ALLOC_CHOOSE", "ALLOC_PREVIEW": "GPUCTL_ALLOC_PREVIEW",
    "ALLOC_LEASE": "GPUCTL_ALLOC_LEASE", "HEALTH_OK": "GPUCTL_HEALTH_OK",
    "HEALTH_WARN": "GPUCTL_HEALTH_WARN", "HEALTH_FAIL": "GPUCTL_HEALTH_FAIL",
    "FU_BOOL": "GPUCTL_FU_BOOL", "FU_YESNO": "GPUCTL_FU_YESNO",
    "WORKLOAD_UNKNOWN": "GPUCTL_WORKLOAD_UNKNOWN", "WORKLOAD_BARE": "GPUCTL_WORKLOAD_BARE",
    "WORKLOAD_SLURM": "GPUCTL_WORKLOAD_SLURM", "WORKLOAD_POD": "GPUCTL_WORKLOAD_POD",
    "WORKLOAD_CONTAINER": "GPUCTL_WORKLOAD_CONTAINER", "WORKLOAD_UNIT": "GPUCTL_WORKLOAD_UNIT",
    "WORKLOAD_SESSION": "GPUCTL_WORKLOAD_SESSION",
}
P2P = {"GPUCTL_P2P_OK": "OK", "GPUCTL_P2P_CHIPSET_NOT_SUPPORTED": "CNS",
       "GPUCTL_P2P_GPU_NOT_SUPPORTED": "GNS", "GPUCTL_P2P_TOPOLOGY_NOT_SUPPORTED": "TNS",
       "GPUCTL_P2P_DISABLED_BY_REGKEY": "DR", "GPUCTL_P2P_NOT_SUPPORTED": "NS"}


def header_text():
    """Every public header's text: gpuctl.h is the umbrella of include/gpuctl/*.h."""
    d = os.path.join(SRC, "include", "gpuctl")
    texts = []
    for name in sorted(os.listdir(d)):
        if name.endswith(".h"):
            with open(os.path.join(d, name)) as f:
                texts.append(f.read())
    return "\n".join(texts)


def c_facts(tmp_path):
    """Compiles and runs the C program; its JSON: sizes, offsets, constants."""
    lines = ['#include <stddef.h>', '#include <stdio.h>', '#include <gpuctl/gpuctl.h>',
             'int main(void)', '{', '\tprintf("{\\"structs\\": {");']
    for k, (name, fields) in enumerate(STRUCTS.items()):
        lines.append('\tprintf("%s\\"%s\\": {\\"size\\": %%zu", sizeof(struct %s));'
                     % ("," if k else "", name, name))
        for f in fields:
            lines.append('\tprintf(", \\"%s\\": [%%zu, %%zu]", offsetof(struct %s, %s), '
                         'sizeof(((struct %s *)0)->%s));' % (f, name, f, name, f))
        lines.append('\tprintf("}");')
    lines.append('\tprintf("}, \\"constants\\": {");')
    names = list(CONSTANTS.values()) + list(P2P)
    for k, c in enumerate(names):
        lines.append('\tprintf("%s\\"%s\\": %%lld", (long long)%s);' % ("," if k else "", c, c))
    lines += ['\tprintf("}}\\n");', '\treturn 0;', '}']
    src = tmp_path / "abi.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "abi"
    r = subprocess.run(["cc", "-std=c17", "-Wall", "-Werror", "-I", os.path.join(SRC, "include"),
                        str(src), "-o", str(exe)], env=tool_env(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([str(exe)], env=tool_env(), capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def test_struct_layouts_and_constants_match_the_header(tmp_path):
    facts = c_facts(tmp_path)
    for name, cls in _lib.STRUCTS.items():
        c = facts["structs"][name]
        assert ctypes.sizeof(cls) == c["size"], name
        for fname, ftype in cls._fields_:
            off, size = c[fname]
            assert getattr(cls, fname).offset == off, (name, fname)
            assert ctypes.sizeof(ftype) == size, (name, fname)
    for py, cname in CONSTANTS.items():
        assert getattr(_lib, py) == facts["constants"][cname], cname
    assert {facts["constants"][k]: v for k, v in P2P.items()} == _lib.P2P_CODES


def header_fields(h, struct):
    """The field names of a struct, in order, from the header's text."""
    body = h[h.index("struct %s {" % struct):]
    body = body[:body.index("};")]
    names = []
    for line in body.split("\n")[1:]:
        code = line.split("/*")[0].strip()
        if code.endswith(";"):
            names.append(code.rstrip(";").split()[-1].lstrip("*"))
    return names


def test_every_alloc_request_field_is_mirrored(tmp_path):
    # the header's struct, field by field, from the header's text: nothing the mirror lacks
    assert header_fields(header_text(), "gpuctl_alloc_request") == STRUCTS["gpuctl_alloc_request"]


def test_every_workload_field_is_mirrored():
    # and struct gpuctl_workload, which the package reads through the library's pointer
    assert header_fields(header_text(), "gpuctl_workload") == STRUCTS["gpuctl_workload"]


def test_the_library_fills_and_checks_the_request():
    L = _lib.lib()
    req = _lib.AllocRequest()
    assert L.gpuctl_alloc_request_init(ctypes.byref(req), ctypes.sizeof(req)) == 0
    # GPUCTL_ALLOC_REQUEST_INIT's values, read back through the mirror's fields
    assert (req.struct_size, req.count, req.max_util, req.numa_node, req.wait_timeout_s,
            req.cancel_fd) == (ctypes.sizeof(req), 1, -1, -1, -1.0, -1)
    # a struct of the library's first release (it ended with n_avoid) is served; a smaller one
    # is refused
    first = _lib.AllocRequest.n_avoid.offset + ctypes.sizeof(ctypes.c_size_t)
    assert L.gpuctl_alloc_request_init(ctypes.byref(req), first) == 0
    assert L.gpuctl_alloc_request_init(ctypes.byref(req), first - 8) == -errno.EINVAL


def test_every_declared_function_is_in_the_header():
    h = header_text()
    for name in _lib.FUNCTIONS:
        assert " %s(" % name in h or "*%s(" % name in h, name


def test_library_path_is_the_one_asked_for():
    assert gpuctl._lib.library_path() == os.environ["GPUCTL_LIBRARY"]


def test_version_is_the_librarys():
    # gpuctl.__version__ is a constant (importing gpuctl loads no library); it must be the
    # version of the libgpuctl it wraps, which CMake's project() gives (tests/unit/test-version.c)
    f = _lib.lib().gpuctl_version
    f.restype = ctypes.c_char_p
    f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    assert gpuctl.__version__ == f(None, None, None).decode()
