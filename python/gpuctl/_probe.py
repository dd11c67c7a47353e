"""The CUDA allocation probe of lease(probe=True): a context, 64 MiB allocated and freed, on one
GPU, as `gpuctl health --probe` does (docs/health.md, check "cuda-probe").

Decisions:
- Each probe runs in a fresh process (this interpreter, `-c`, this package's directory first on
  its path, the library this process loaded in GPUCTL_LIBRARY) with CUDA_VISIBLE_DEVICES set to
  that GPU's UUID: a fresh process cannot inherit a broken CUDA state, and CUDA in the caller
  stays uninitialised (gpuctl.use() must run before CUDA does). The child calls
  gpuctl_cuda_probe_here and prints "ok" or the library's one-line reason.
- Probes run in parallel, each in its own session, under one deadline; one still running at
  the deadline is killed with its process group: a hung GPU cannot hang the caller.
"""
from __future__ import annotations

import os
import sys

PROBE_BYTES = 64 << 20  # as gpuctl health --probe

_CHILD = ("import sys; sys.path.insert(0, %r); from gpuctl._probe import main; main()")


def main() -> None:
    """The child: probes the one GPU its CUDA_VISIBLE_DEVICES shows."""
    from . import _lib
    with _lib.Context() as c:
        r = c.lib.gpuctl_cuda_probe_here(c.ctx, PROBE_BYTES)
        print("ok" if r >= 0 else c.message(), flush=True)
    sys.exit(0 if r >= 0 else 1)


def _python() -> str:
    return sys.executable if sys.executable and os.access(sys.executable, os.X_OK) \
        else "/usr/bin/python3"


def run(uuids: list, timeout: float) -> dict:
    """Probes each GPU (by UUID); returns {uuid: reason} for those that failed or hung."""
    import signal
    import subprocess
    import time
    from . import _lib
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, GPUCTL_LIBRARY=_lib.library_path())
    kids = {}
    failed = {}
    try:
        for u in uuids:
            env["CUDA_VISIBLE_DEVICES"] = u
            kids[u] = subprocess.Popen([_python(), "-c", _CHILD % here], env=env,
                                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        for u, p in kids.items():
            try:
                out, _ = p.communicate(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                failed[u] = "hung: no answer within %g s" % timeout
                continue
            line = out.decode("utf-8", "replace").strip().split("\n")[0]
            if p.returncode != 0 or line != "ok":
                if not line:
                    line = ("killed by signal %d" % -p.returncode if p.returncode < 0
                            else "exited with status %d" % p.returncode)
                failed[u] = line
    finally:
        for p in kids.values():
            if p.returncode is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
            if p.stdout:
                p.stdout.close()
    return failed


def describe(failed: dict) -> str:
    return "; ".join("%s: %s" % (u, why) for u, why in failed.items())
