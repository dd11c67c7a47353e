"""Python arguments -> struct gpuctl_alloc_request: checked here, before the library is called,
with messages that name the argument and the value (as the command line's options do), and
written into a request the library initialised itself (gpuctl_alloc_request_init).

Decisions:
- Wrong types are TypeError; wrong values (n=-1, max_util=101, a size without a unit, an empty
  id list) and unknown keywords are RequestError, a ValueError. What needs the machine (an
  unknown GPU id, MIG profile or pool) is the library's to refuse, with the same words.
- Sizes are read by the library's own parser (gpuctl_size_parse): exactly the units
  `--min-free-mem` takes. A bare int is bytes.
- The ranges are the command line's: n at most 4096 devices, NUMA node at most 65535, a wait
  of at most a year.
"""
from __future__ import annotations

import ctypes
import errno
import os
import sys

from . import _lib
from ._errors import RequestError

MAX_COUNT = 4096          # filters.h FILTERS_MAX_COUNT
MAX_NUMA = 65535          # the CLI's --numa bound
MAX_WAIT_S = 31536000.0   # filters.h FILTERS_WAIT_MAX_S: a year

# The filters select(), lease(), use() and each() take by keyword.
FILTERS = ("min_free_mem", "max_util", "no_procs", "pool", "mig", "only", "exclude", "numa",
           "allow_unhealthy", "ignore_outer", "ignore_foreign", "config", "lease_dir")


def _bad(message: str) -> RequestError:
    return RequestError(errno.EINVAL, message)


def check_keywords(kw: dict, allowed: tuple, what: str) -> None:
    for k in kw:
        if k not in allowed:
            raise _bad("%s: unknown keyword '%s' (known: %s)" % (what, k, ", ".join(allowed)))


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def count(n: object) -> int:
    if not _is_int(n):
        raise TypeError("n: expected a number of devices (int), got %r" % (n,))
    if n < 0 or n > MAX_COUNT:
        raise _bad("n: %d is not a number of devices (0 to %d)" % (n, MAX_COUNT))
    return n


def size(name: str, v: object) -> int:
    """Bytes from an int (bytes) or a size string ("10GiB", "512M")."""
    if _is_int(v):
        if v < 0 or v >= 1 << 64:
            raise _bad("%s: %d is not a number of bytes" % (name, v))
        return v
    if not isinstance(v, str):
        raise TypeError("%s: expected bytes (int) or a size such as '10GiB', got %r" % (name, v))
    out = ctypes.c_uint64()
    why = ctypes.c_char_p()
    if _lib.lib().gpuctl_size_parse(v.encode(), ctypes.byref(out), ctypes.byref(why)) < 0:
        raise _bad("%s: '%s': %s" % (name, v, _lib.text(why.value)))
    return out.value


def _ids(name: str, v: object) -> bytes:
    """A comma-separated id list from a string or an iterable of ids (int or str)."""
    if isinstance(v, str):
        s = v
    elif _is_int(v):
        s = str(v)
    else:
        try:
            parts = list(v)
        except TypeError:
            raise TypeError("%s: expected GPU ids (a string or a list), got %r"
                            % (name, v)) from None
        for p in parts:
            if not (isinstance(p, str) or _is_int(p)):
                raise TypeError("%s: a GPU id is an index or a string, got %r" % (name, p))
        s = ",".join(str(p) for p in parts)
    if not s:
        raise _bad("%s: empty GPU id list" % name)
    return s.encode()


def _text(name: str, v: object) -> bytes:
    if not isinstance(v, str):
        raise TypeError("%s: expected a string, got %r" % (name, v))
    if not v:
        raise _bad("%s: empty" % name)
    return v.encode()


def _flag(name: str, v: object) -> bool:
    if not isinstance(v, bool):
        raise TypeError("%s: expected True or False, got %r" % (name, v))
    return v


def wait_seconds(wait: object) -> float | None:
    """None (no waiting), or the seconds to wait at most (-1: for ever)."""
    if wait is None or wait is False:
        return None
    if wait is True:
        return -1.0
    if not isinstance(wait, (int, float)):
        raise TypeError("wait: expected True or a number of seconds, got %r" % (wait,))
    if not 0 <= wait <= MAX_WAIT_S:  # also refuses NaN
        raise _bad("wait: %r is not a number of seconds (0 to %d)" % (wait, MAX_WAIT_S))
    return float(wait)


def command_line() -> bytes:
    """This process's command line, for the owner record `gpuctl ps` shows."""
    try:
        with open("/proc/self/cmdline", "rb") as f:
            words = f.read().rstrip(b"\0").split(b"\0")
    except OSError:
        words = [w.encode(errors="replace") for w in [sys.executable] + sys.argv]
    if words:
        words[0] = os.path.basename(words[0])
    return b" ".join(words)[:1024]


class Request:
    """A struct gpuctl_alloc_request and the bytes its pointers point to."""
    __slots__ = ("req", "_keep")

    def __init__(self, mode: int, n: object, filters: dict, *, share_mem: object = None,
                 label: object = None, avoid: list | tuple = ()) -> None:
        L = _lib.lib()
        req = self.req = _lib.AllocRequest()
        if L.gpuctl_alloc_request_init(ctypes.byref(req), ctypes.sizeof(req)) < 0:
            raise _bad("the library refused the request's size %d" % ctypes.sizeof(req))
        req.mode = mode
        req.count = count(n)
        f = filters
        if f.get("min_free_mem") is not None:
            req.min_free_mem = size("min_free_mem", f["min_free_mem"])
        if f.get("max_util") is not None:
            u = f["max_util"]
            if not _is_int(u):
                raise TypeError("max_util: expected a percentage (int), got %r" % (u,))
            if not 0 <= u <= 100:
                raise _bad("max_util: %d is not a percentage 0-100" % u)
            req.max_util = u
        if f.get("numa") is not None:
            v = f["numa"]
            if not _is_int(v):
                raise TypeError("numa: expected a NUMA node number (int), got %r" % (v,))
            if not 0 <= v <= MAX_NUMA:
                raise _bad("numa: %d is not a NUMA node number" % v)
            req.numa_node = v
        for name in ("no_procs", "allow_unhealthy", "ignore_outer", "ignore_foreign"):
            if f.get(name) is not None:
                setattr(req, name, _flag(name, f[name]))
        if f.get("only") is not None:
            req.only = _ids("only", f["only"])
        if f.get("exclude") is not None:
            req.exclude = _ids("exclude", f["exclude"])
        if f.get("mig") is not None:
            req.mig_profile = _text("mig", f["mig"])
        if f.get("pool") is not None:
            req.pool = _text("pool", f["pool"])
        if f.get("config") is not None:
            req.config_path = _text("config", os.fspath(f["config"]))
        if f.get("lease_dir") is not None:
            req.lease_dir = _text("lease_dir", os.fspath(f["lease_dir"]))
        if share_mem is not None:
            req.share_mem = size("share_mem", share_mem)
            if req.share_mem == 0:
                raise _bad("share_mem: %r: a shared lease declares more than 0" % (share_mem,))
        if label is not None:
            if not isinstance(label, str):
                raise TypeError("label: expected a string, got %r" % (label,))
            req.label = label.encode()
        if avoid:
            arr = (ctypes.c_char_p * len(avoid))(*[u.encode() for u in avoid])
            req.avoid = ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p))
            req.n_avoid = len(avoid)
            self._keep = arr
        if mode == _lib.ALLOC_LEASE:
            req.command = command_line()
