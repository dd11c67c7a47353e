"""libgpuctl.so.0 through ctypes: finding the library, the C declarations this package uses, one
context per thread, and the library's -errno codes as exceptions.

Decisions:
- The library is found at $GPUCTL_LIBRARY when it is set (that file only, as
  GPUCTL_NVML_LIBRARY is for NVML), else beside this module (gpuctl/libgpuctl.so.0: the copy
  the build's wheel bundles, python/backend/gpuctl_backend.py), else in the directory
  `make install` wrote into gpuctl/_install.py, else by its soname through the dynamic linker
  (the system's, LD_LIBRARY_PATH). It is loaded at the first call, not at import, so
  `import gpuctl` is cheap and never fails.
- Every function used has its argtypes and restype declared here, in one table; opaque handles
  are c_void_p. Structures mirror include/gpuctl/*.h field by field (python/tests/
  test_abi.py compares every offset and size with a C program compiled against the headers).
  Requests are filled by gpuctl_alloc_request_init(req, sizeof(req)), never by defaults
  written here, and the first load checks that the defaults landed where this mirror expects.
- One context per thread, made at its first call and kept (freed when the thread ends): a
  context belongs to one thread at a time (gpuctl.h), and it holds the loaded NVML, whose
  initialisation costs a real driver milliseconds or more, so a program that calls devices()
  and then lease() loads NVML once, not twice. Everything else is read afresh at every call
  (configuration, lease directory, outer allocation: gpuctl_alloc reads them). A changed
  $GPUCTL_NVML_LIBRARY makes a new context; a child made by fork() makes its own and never
  frees the parent's (NVML is not fork-safe). reset() drops this thread's context.
- ctypes releases the GIL around every foreign call, so a waiting gpuctl_alloc never blocks
  other Python threads.
"""
from __future__ import annotations

import ctypes
import errno
import os
import re
import _thread

from ._errors import (DriverError, Error, LockBusyError, NoDeviceError, QuotaError,
                      RequestError)

SONAME = "libgpuctl.so.0"

c_void_p = ctypes.c_void_p
c_char_p = ctypes.c_char_p
c_int = ctypes.c_int
c_uint = ctypes.c_uint
c_bool = ctypes.c_bool
c_size_t = ctypes.c_size_t
c_int64 = ctypes.c_int64
c_uint32 = ctypes.c_uint32
c_uint64 = ctypes.c_uint64
c_double = ctypes.c_double
P = ctypes.POINTER

# ---- constants of the C ABI (include/gpuctl/*.h; test_abi.py checks each) ----

SNAP_PROCESSES = 1 << 0
SNAP_TOPOLOGY = 1 << 1
SNAP_MIG = 1 << 2
SNAP_HEALTH = 1 << 3

FT_INT = 0
FT_STR = 1
FU_BOOL = 6   # enum gpuctl_field_unit: shown Enabled/Disabled
FU_YESNO = 7  # ... and Yes/No: both are booleans

MIG_INDEX, MIG_GI, MIG_CI, MIG_MEMORY_TOTAL, MIG_MEMORY_USED = 0, 1, 2, 3, 4

SITE_CREATE = 1 << 0
SITE_NO_LEASES = 1 << 1

ALLOC_CHOOSE = 0
ALLOC_PREVIEW = 1
ALLOC_LEASE = 2

HEALTH_OK, HEALTH_WARN, HEALTH_FAIL = 0, 1, 2

# enum gpuctl_workload_kind (include/gpuctl/workload.h); the names come from the library
WORKLOAD_UNKNOWN, WORKLOAD_BARE, WORKLOAD_SLURM, WORKLOAD_POD = 0, 1, 2, 3
WORKLOAD_CONTAINER, WORKLOAD_UNIT, WORKLOAD_SESSION = 4, 5, 6

# nvidia-smi topo -p2p's abbreviations of NVML's P2P status values (as `gpuctl topo` prints).
P2P_CODES = {0: "OK", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DR", 5: "NS"}


# ---- structures (field for field as in include/gpuctl/*.h) ----

class AllocRequest(ctypes.Structure):
    """struct gpuctl_alloc_request."""
    _fields_ = [
        ("struct_size", c_size_t),
        ("mode", c_int),
        ("count", c_uint),
        ("min_free_mem", c_uint64),
        ("max_util", c_int),
        ("no_procs", c_bool),
        ("only", c_char_p),
        ("exclude", c_char_p),
        ("numa_node", c_int),
        ("mig_profile", c_char_p),
        ("pool", c_char_p),
        ("allow_unhealthy", c_bool),
        ("ignore_outer", c_bool),
        ("ignore_foreign", c_bool),
        ("share_mem", c_uint64),
        ("label", c_char_p),
        ("command", c_char_p),
        ("wait", c_bool),
        ("wait_timeout_s", c_double),
        ("cancel_fd", c_int),
        ("config_path", c_char_p),
        ("lease_dir", c_char_p),
        ("avoid", P(c_char_p)),
        ("n_avoid", c_size_t),
        ("replace", c_void_p),  # a failover's current allocation (unused by the package)
        ("lease_length_s", c_uint64),  # unknown (0): a Python lease states no length
    ]


class Link(ctypes.Structure):
    """struct gpuctl_link (struct_size: set it to ctypes.sizeof before the call)."""
    _fields_ = [
        ("struct_size", c_size_t),
        ("level", c_int),
        ("nvlinks", c_int),
        ("nvswitch", c_bool),
        ("p2p", c_int),
        ("bandwidth", c_double),
    ]


class HealthFinding(ctypes.Structure):
    """struct gpuctl_health_finding."""
    _fields_ = [
        ("check", c_char_p),
        ("gpu", c_size_t),
        ("severity", c_int),
        ("message", c_char_p),
        ("action", c_char_p),
        ("xid", c_uint),
        ("xid_class", c_int),
    ]


class XidInfo(ctypes.Structure):
    """struct gpuctl_xid_info (struct_size: set it to ctypes.sizeof before the call)."""
    _fields_ = [
        ("struct_size", c_size_t),
        ("code", c_uint),
        ("class_", c_int),
        ("meaning", c_char_p),
        ("action", c_char_p),
    ]


class FieldInfo(ctypes.Structure):
    """struct gpuctl_field_info."""
    _fields_ = [
        ("id", c_int),
        ("key", c_char_p),
        ("smi_name", c_char_p),
        ("csv_unit", c_char_p),
        ("type", c_int),
        ("unit", c_int),
        ("snap_flag", c_uint),
        ("doc", c_char_p),
    ]


class Workload(ctypes.Structure):
    """struct gpuctl_workload: read through the library's pointer only, never allocated here
    (it grows at its end)."""
    _fields_ = [
        ("kind", c_int),
        ("pid", c_uint32),
        ("ns_pid", c_uint32),
        ("uid", c_uint32),
        ("cgroup", c_char_p),
        ("runtime", c_char_p),
        ("id", c_char_p),
        ("name", c_char_p),
        ("pod_namespace", c_char_p),
        ("pod_uid", c_char_p),
        ("container", c_char_p),
        ("slurm_job", c_uint32),
        ("slurm_step", c_char_p),
        ("slurm_array_job", c_uint32),
        ("slurm_array_task", c_uint32),
        ("unit_uid", c_uint32),
        ("label", c_char_p),
        ("truncated", c_bool),
    ]


STRUCTS = {
    "gpuctl_alloc_request": AllocRequest,
    "gpuctl_link": Link,
    "gpuctl_health_finding": HealthFinding,
    "gpuctl_xid_info": XidInfo,
    "gpuctl_field_info": FieldInfo,
    "gpuctl_workload": Workload,
}

# ---- the functions used: name -> (restype, argtypes) ----

FUNCTIONS = {
    "gpuctl_ctx_new": (c_int, [P(c_void_p)]),
    "gpuctl_ctx_free": (None, [c_void_p]),
    "gpuctl_errmsg": (c_char_p, [c_void_p]),
    "gpuctl_size_parse": (c_int, [c_char_p, P(c_uint64), P(c_char_p)]),
    # snapshots and fields
    "gpuctl_snapshot_take_fields": (c_int, [c_void_p, c_uint, P(c_int), c_size_t, P(c_void_p)]),
    "gpuctl_snapshot_free": (None, [c_void_p]),
    "gpuctl_snapshot_gpu_count": (c_size_t, [c_void_p]),
    "gpuctl_snapshot_gpu": (c_void_p, [c_void_p, c_size_t]),
    "gpuctl_field_info": (P(FieldInfo), [c_int]),
    "gpuctl_field_lookup": (c_int, [c_char_p]),
    "gpuctl_gpu_int": (c_int, [c_void_p, c_int, P(c_int64)]),
    "gpuctl_gpu_str": (c_char_p, [c_void_p, c_int]),
    "gpuctl_gpu_lost": (c_bool, [c_void_p]),
    "gpuctl_gpu_index": (c_size_t, [c_void_p]),
    # MIG devices
    "gpuctl_gpu_mig_count": (c_size_t, [c_void_p]),
    "gpuctl_gpu_mig": (c_void_p, [c_void_p, c_size_t]),
    "gpuctl_mig_uuid": (c_char_p, [c_void_p]),
    "gpuctl_mig_profile": (c_char_p, [c_void_p]),
    "gpuctl_mig_int": (c_int, [c_void_p, c_int, P(c_int64)]),
    # processes
    "gpuctl_gpu_proc_count": (c_size_t, [c_void_p]),
    "gpuctl_gpu_proc": (c_void_p, [c_void_p, c_size_t]),
    "gpuctl_proc_pid": (c_uint32, [c_void_p]),
    "gpuctl_proc_used_memory": (c_int, [c_void_p, P(c_int64)]),
    "gpuctl_proc_uid": (c_int, [c_void_p, P(c_uint32)]),
    "gpuctl_proc_user": (c_char_p, [c_void_p]),
    "gpuctl_proc_command": (c_char_p, [c_void_p]),
    # workloads (one cache per public call: gpuctl._model.Workloads)
    "gpuctl_workloads_new": (c_int, [c_void_p, P(c_void_p)]),
    "gpuctl_workloads_free": (None, [c_void_p]),
    "gpuctl_workloads_get": (c_int, [c_void_p, c_void_p, c_uint32, c_uint64, P(P(Workload))]),
    "gpuctl_workloads_sweep": (c_size_t, [c_void_p]),
    "gpuctl_workloads_files_read": (c_uint64, [c_void_p]),
    "gpuctl_workload_kind_name": (c_char_p, [c_int]),
    # pair facts
    "gpuctl_snapshot_link": (c_int, [c_void_p, c_size_t, c_size_t, P(Link)]),
    "gpuctl_topo_level_code": (c_char_p, [c_int]),
    # device sets
    "gpuctl_devset_count": (c_size_t, [c_void_p]),
    "gpuctl_devset_get": (c_int, [c_void_p, c_size_t, P(c_size_t), P(c_int)]),
    "gpuctl_devset_uuid": (c_char_p, [c_void_p, c_void_p, c_size_t]),
    "gpuctl_device_label": (None, [c_void_p, c_size_t, c_int, c_char_p, c_size_t]),
    # the site and health
    "gpuctl_site_open": (c_int, [c_void_p, c_char_p, c_char_p, c_uint, P(c_void_p)]),
    "gpuctl_site_free": (None, [c_void_p]),
    "gpuctl_site_health": (c_int, [c_void_p, c_void_p, c_void_p, P(c_void_p)]),
    "gpuctl_health_fields": (P(c_int), [P(c_size_t)]),
    "gpuctl_health_report_free": (None, [c_void_p]),
    "gpuctl_health_finding_count": (c_size_t, [c_void_p]),
    "gpuctl_health_finding": (P(HealthFinding), [c_void_p, c_size_t]),
    "gpuctl_health_verdict": (c_int, [c_void_p, c_size_t]),
    "gpuctl_health_severity_name": (c_char_p, [c_int]),
    "gpuctl_xid_lookup": (c_int, [c_uint, P(XidInfo)]),
    "gpuctl_xid_class_name": (c_char_p, [c_int]),
    # the allocation call
    "gpuctl_alloc_request_init": (c_int, [P(AllocRequest), c_size_t]),
    "gpuctl_alloc": (c_int, [c_void_p, P(AllocRequest), P(c_void_p)]),
    "gpuctl_alloc_free": (None, [c_void_p]),
    "gpuctl_alloc_snapshot": (c_void_p, [c_void_p]),
    "gpuctl_alloc_devices": (c_void_p, [c_void_p]),
    "gpuctl_devset_cuda_check": (c_int, [c_void_p, c_void_p, c_void_p]),
    "gpuctl_alloc_cuda_visible_devices": (c_char_p, [c_void_p]),
    "gpuctl_alloc_lease": (c_void_p, [c_void_p]),
    "gpuctl_alloc_lease_dir_path": (c_char_p, [c_void_p]),
    "gpuctl_alloc_health": (c_void_p, [c_void_p]),
    "gpuctl_lease_fds": (c_size_t, [c_void_p, P(c_int), c_size_t]),
    # the CUDA probe (run in a child process: gpuctl._probe)
    "gpuctl_cuda_probe_here": (c_int, [c_void_p, c_size_t]),
}

_lib = None
_path = None
_load_lock = _thread.allocate_lock()  # not threading: its import costs more than ours
_local = _thread._local()             # this thread's context (threading.local, without import)


class _Owned:
    """A gpuctl_ctx of this thread, freed with the thread's storage (when the thread ends), in
    the process that made it only."""
    __slots__ = ("ctx", "pid", "key")

    def __init__(self, ctx: int, key: str | None) -> None:
        self.ctx, self.pid, self.key = ctx, os.getpid(), key

    def __del__(self) -> None:
        if self.ctx and self.pid == os.getpid() and _lib is not None:
            _lib.gpuctl_ctx_free(self.ctx)
            self.ctx = None


def reset() -> None:
    """Drops this thread's context: the next call makes a new one and loads NVML again."""
    _local.__dict__.pop("owned", None)


def _candidates() -> list[str]:
    """Where to look for the library, in order (see the module's docstring)."""
    env = os.environ.get("GPUCTL_LIBRARY")
    if env:
        return [env]
    out = []
    bundled = os.path.join(os.path.dirname(os.path.abspath(__file__)), SONAME)
    if os.path.exists(bundled):
        out.append(bundled)
    try:
        from . import _install  # written by `make install` (python/CMakeLists.txt)
        out.append(os.path.join(_install.LIBDIR, SONAME))
    except ImportError:
        pass
    out.append(SONAME)
    return out


def _check_defaults(lib: ctypes.CDLL) -> None:
    """Fills a request with the library's defaults and checks that they landed in the fields
    this mirror expects: a layout that drifted from the header fails here, loudly, instead of
    sending the library a request it reads differently."""
    req = AllocRequest()
    r = lib.gpuctl_alloc_request_init(ctypes.byref(req), ctypes.sizeof(req))
    got = (req.struct_size, req.count, req.max_util, req.numa_node, req.wait_timeout_s,
           req.cancel_fd, req.mode, bool(req.wait))
    want = (ctypes.sizeof(req), 1, -1, -1, -1.0, -1, ALLOC_CHOOSE, False)
    if r != 0 or got != want:
        raise Error(errno.EPROTO, "%s: struct gpuctl_alloc_request does not match this "
                    "package (init returned %d, defaults %r)" % (_path, r, got))


def lib() -> ctypes.CDLL:
    """The loaded library, loading it on first use. Raises Error (ENOENT) when it cannot be
    found or lacks a function this package needs."""
    global _lib, _path
    if _lib is not None:
        return _lib
    with _load_lock:
        if _lib is not None:
            return _lib
        tried = []
        handle = None
        for c in _candidates():
            if os.sep in c and not os.path.exists(c) and not os.environ.get("GPUCTL_LIBRARY"):
                continue  # an install directory that is gone: try the next place
            try:
                handle = ctypes.CDLL(c)
                _path = c
                break
            except OSError as e:
                tried.append(str(e))
        if handle is None:
            src = "GPUCTL_LIBRARY" if os.environ.get("GPUCTL_LIBRARY") else "the install"
            raise Error(errno.ENOENT, "cannot load libgpuctl (from %s): %s; install gpuctl "
                        "(make install) or set GPUCTL_LIBRARY to libgpuctl.so.0"
                        % (src, "; ".join(tried) or SONAME + " not found"))
        for name, (res, args) in FUNCTIONS.items():
            try:
                f = getattr(handle, name)
            except AttributeError:
                raise Error(errno.ENOENT, "%s lacks %s: an older libgpuctl than this package"
                            % (_path, name)) from None
            f.restype = res
            f.argtypes = args
        _check_defaults(handle)
        _lib = handle
        return _lib


def library_path() -> str:
    """The file (or soname) the library was loaded from."""
    lib()
    return _path


def text(b: bytes | None) -> str | None:
    """A C string as str (None for NULL). Invalid UTF-8 (a command name) is replaced."""
    return None if b is None else b.decode("utf-8", "replace")


# The library's messages name struct gpuctl_alloc_request's fields ("numa_node 1",
# "ignore_outer"); these two our keywords spell otherwise (the rest are the same words), so an
# error names the argument the caller passed, as the command line respells them as its options.
_KEYWORD_OF = {"numa_node": "numa", "mig_profile": "mig"}
_FIELD_RE = re.compile(r"(?<![\w.-])(%s)(?![\w.-])" % "|".join(_KEYWORD_OF))


def keywords(message: str) -> str:
    """A library message with each request field respelled as this package's keyword."""
    return _FIELD_RE.sub(lambda m: _KEYWORD_OF[m.group(1)], message)


def error(code: int, message: str, nvml: bool = False) -> Error:
    """The exception for a library failure: -code with its one-line message. nvml: the call
    loaded NVML, so ENOENT means no driver (gpuctl_nvml_load), not a missing lease directory."""
    if not message:
        message = os.strerror(code)
    message = keywords(message)
    if code == errno.EINVAL:
        return RequestError(code, message)
    if code in (errno.ENOSPC, errno.ETIMEDOUT):
        return NoDeviceError(code, message)
    if code == errno.EAGAIN:
        return LockBusyError(code, message)
    if code == errno.EDQUOT:
        return QuotaError(code, message)
    if code in (errno.ENODEV, errno.ENOEXEC) or (nvml and code == errno.ENOENT):
        if code != errno.ENOEXEC and not message.startswith("no NVIDIA driver"):
            message = "no NVIDIA driver: " + message  # as the command line says it
        return DriverError(code, message)
    if code == errno.ENOMEM:
        return MemoryError(message)
    return Error(code, message)


class Context:
    """This thread's gpuctl_ctx for the length of a with block (one public call)."""
    __slots__ = ("lib", "ctx")

    def __enter__(self) -> "Context":
        self.lib = lib()
        key = os.environ.get("GPUCTL_NVML_LIBRARY")
        owned = getattr(_local, "owned", None)
        if owned is None or owned.pid != os.getpid() or owned.key != key:
            p = c_void_p()
            if self.lib.gpuctl_ctx_new(ctypes.byref(p)) < 0:
                raise MemoryError("gpuctl: out of memory")
            owned = _local.owned = _Owned(p.value, key)
        self.ctx = owned.ctx
        return self

    def __exit__(self, *exc) -> None:
        self.ctx = None  # kept for the thread's next call

    def message(self) -> str:
        return keywords(text(self.lib.gpuctl_errmsg(self.ctx)) or "")

    def check(self, r: int, nvml: bool = False) -> int:
        """r, or the exception for -r with the context's message."""
        if r < 0:
            raise error(-r, self.message(), nvml)
        return r
