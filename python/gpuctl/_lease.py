"""Leases from Python: gpuctl.lease(), gpuctl.use() and the Lease object, over gpuctl_alloc in
GPUCTL_ALLOC_LEASE mode (docs/library.md).

Decisions:
- A lease is the kernel's flock on descriptors this process holds (docs/leases.md), kept in
  the gpuctl_alloc handle. It ends with release(), the with block, or the process (SIGKILL
  included). A Lease dropped without release() keeps its devices until the process ends: a
  garbage-collected lease would free GPUs a script still uses (`gpuctl.lease(1).apply()`).
- fork() shares the lock's open file descriptions: a child made with os.fork or
  multiprocessing's "fork" holds the lease too, and the devices stay leased until every
  process holding them has released or ended. Programs started with exec (subprocess,
  multiprocessing "spawn") do not inherit them: the library opens them O_CLOEXEC.
- Waiting (wait=): the library polls a cancel descriptor. In the main thread it is the read end
  of a pipe given to signal.set_wakeup_fd, so any signal with a Python handler ends the call
  at once, also one that arrived between two tries of the wait (where poll(2) would not see
  it); the library's -EINTR is the fallback elsewhere. Then Python's handlers run
  (PyErr_CheckSignals): Ctrl-C raises KeyboardInterrupt with nothing leased; a handler that
  returns normally lets the wait go on for the time left, with a new place in the line.
- Environment: apply() remembers what each variable it sets was before (unset included), and
  release() puts back those it set that still hold its value (one changed since is someone
  else's and stays), so a released lease leaves no CUDA_VISIBLE_DEVICES pointing at devices
  that may be leased to another job by now.
- use() is the one call of a process (a script, a notebook): it keeps the lease in this
  module, so running its cell again, with the same request, returns the lease it holds instead
  of asking for more devices (the old one excluding them: "leased: 6"); another request while
  it holds one fails with both named and how to release it (gpuctl.release()). lease() makes a
  new lease at every call, also for the same request: two leases of one request are two sets
  of devices (one per worker) or two shares of one device, and a program asks for them so.
- probe=True: each chosen GPU gets a CUDA allocation test in a fresh child process that sees
  only that GPU, under a timeout (gpuctl._probe); failed GPUs join the request's avoid list
  and the devices are allocated again, PROBE_ROUNDS times at most.
"""
from __future__ import annotations

import _thread
import ctypes
import errno
import os
import sys
import time

from . import _lib, _model
from ._errors import Error, NoDeviceError, RequestError
from ._request import FILTERS, Request, check_keywords, wait_seconds

PROBE_ROUNDS = 3          # allocations tried with probe=True before giving up
PROBE_TIMEOUT_S = 10.0    # as `gpuctl health --probe-timeout`'s default

LEASE_KEYWORDS = FILTERS + ("share_mem", "wait", "label", "probe", "probe_timeout")


class Lease:
    """Devices leased to this process (docs/leases.md): nobody else is given them until the
    lease ends, by release(), the end of a with block, or the end of the process (SIGKILL
    included: the lease is the kernel's lock on descriptors the process holds). A Lease that is
    merely dropped keeps its devices until the process ends.

    Fork: a child made with fork() (os.fork, multiprocessing's "fork" start method) shares the
    lock's open file descriptions, so the devices stay leased until every process holding them
    has released or ended; release() in one process ends only that process's hold. Children
    started with exec (subprocess, multiprocessing's "spawn", gpuctl.each) do not inherit the
    descriptors (they are close-on-exec): give them the devices through the environment.

    Environment: release() puts back the variables apply() set (CUDA_VISIBLE_DEVICES,
    CUDA_DEVICE_ORDER, NVIDIA_VISIBLE_DEVICES) as they were before it, unset if they were,
    except one changed since apply() (that value is someone else's, and stays).

    Attributes: devices (Device or MigDevice, best first), cuda_visible_devices (the
    CUDA_VISIBLE_DEVICES value: their full UUIDs, comma-separated), lease_dir (where the lease
    is), share_mem (bytes declared per device for a shared lease, else None)."""

    def __init__(self, alloc: int, devices: list, cuda_visible: str, lease_dir: str | None,
                 share_mem: int | None) -> None:
        self._alloc = alloc
        self._lock = _thread.allocate_lock()  # release() from two threads frees once
        self._saved: dict[str, str | None] = {}  # what apply() changed: the earlier values
        self._set: dict[str, str] = {}           # ... and what it set them to
        self.devices: list[_model.Device | _model.MigDevice] = devices
        self.cuda_visible_devices = cuda_visible
        self.lease_dir = lease_dir
        self.share_mem = share_mem

    @property
    def released(self) -> bool:
        """Whether this process has released its hold."""
        return self._alloc is None

    @property
    def uuids(self) -> list[str | None]:
        """The devices' UUIDs, in order."""
        return [d.uuid for d in self.devices]

    def apply(self) -> None:
        """Sets CUDA_VISIBLE_DEVICES to the devices' UUIDs and CUDA_DEVICE_ORDER=PCI_BUS_ID in
        os.environ (and NVIDIA_VISIBLE_DEVICES to the same UUIDs when it is set), as
        `gpuctl run` does for its job. CUDA reads them once, when it initialises: call this
        before any CUDA work in this process, or before starting the processes that will
        use the devices.

        One process is given every device, so a set that CUDA would not use whole in one
        process (more than one MIG device before driver R570, two MIG devices of one GPU
        instance from R570: MIG user guide, "CUDA device enumeration") raises RequestError and
        changes nothing: give each process one device (gpuctl.each, or apply per process)."""
        a = self._alloc
        if a is not None:
            L = _lib.lib()
            with _lib.Context() as c:
                r = L.gpuctl_devset_cuda_check(c.ctx, L.gpuctl_alloc_snapshot(a),
                                               L.gpuctl_alloc_devices(a))
                if r < 0:
                    raise RequestError(-r, c.message() + "; give each process one device "
                                       "(gpuctl.each)")
        values = {"CUDA_VISIBLE_DEVICES": self.cuda_visible_devices,
                  "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
        if "NVIDIA_VISIBLE_DEVICES" in os.environ:
            values["NVIDIA_VISIBLE_DEVICES"] = self.cuda_visible_devices or "void"
        with self._lock:
            for k, v in values.items():
                if k not in self._saved:  # a second apply() keeps the first one's record
                    self._saved[k] = os.environ.get(k)
                os.environ[k] = v
                self._set[k] = v

    def release(self) -> None:
        """Ends this process's hold on the devices (a forked child's hold stays) and puts back
        the environment apply() changed (see the class). Idempotent."""
        with self._lock:
            a, self._alloc = self._alloc, None
            saved, self._saved = self._saved, {}
            mine, self._set = self._set, {}
        if a:
            _lib.lib().gpuctl_alloc_free(a)
        for k, old in saved.items():
            if os.environ.get(k) != mine.get(k):
                continue  # changed since apply(): not ours to undo
            if old is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = old

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def __repr__(self) -> str:
        return "Lease(%s%s)" % (self.cuda_visible_devices or "no devices",
                                ", released" if self._alloc is None else "")


class _Wakeup:
    """The cancel descriptor of a wait: a pipe signal.set_wakeup_fd writes to (main thread, no
    other wakeup descriptor set); -1 elsewhere (the library's -EINTR is the fallback)."""

    def __enter__(self) -> int:
        import signal
        self.fds = None
        self.signal = signal
        r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        except ValueError:  # not the main thread
            os.close(r)
            os.close(w)
            return -1
        if old != -1:  # someone else's (an event loop): leave it to them
            signal.set_wakeup_fd(old)
            os.close(r)
            os.close(w)
            return -1
        self.fds = (r, w)
        return r

    def drain(self) -> None:
        if self.fds:
            try:
                while os.read(self.fds[0], 512):
                    pass
            except BlockingIOError:
                pass

    def __exit__(self, *exc) -> None:
        if self.fds:
            self.signal.set_wakeup_fd(-1)
            os.close(self.fds[0])
            os.close(self.fds[1])


def _run_signal_handlers() -> None:
    """Runs Python's handlers of the signals that came (KeyboardInterrupt for SIGINT), raising
    what they raise. ctypes.pythonapi calls hold the GIL and raise a set exception."""
    check = ctypes.pythonapi.PyErr_CheckSignals
    check.argtypes = []
    check.restype = ctypes.c_int
    check()


def _allocate(mode: int, n: object, filters: dict, *, share_mem: object = None,
              wait: object = None, label: object = None, avoid: list | tuple = ()):
    """gpuctl_alloc, waiting as asked. Returns the Lease in LEASE mode, else the devices
    chosen (the allocation freed). The allocation is freed on every way out but the Lease's,
    so an exception anywhere (KeyboardInterrupt included) leaves nothing leased."""
    wait_s = wait_seconds(wait)
    if wait_s is not None and mode != _lib.ALLOC_LEASE:
        raise TypeError("wait: only a lease waits")
    request = Request(mode, n, filters, share_mem=share_mem, label=label, avoid=avoid)
    req = request.req
    deadline = None if wait_s is None or wait_s < 0 else time.monotonic() + wait_s
    L = _lib.lib()
    resumed = False
    while True:
        if wait_s is not None:
            req.wait = True
            req.wait_timeout_s = wait_s if not resumed or deadline is None else max(
                0.0, deadline - time.monotonic())
        with _lib.Context() as c:
            out = ctypes.c_void_p()
            try:
                if wait_s is None:
                    r = L.gpuctl_alloc(c.ctx, ctypes.byref(req), ctypes.byref(out))
                else:
                    wake = _Wakeup()
                    with wake as fd:
                        req.cancel_fd = fd
                        r = L.gpuctl_alloc(c.ctx, ctypes.byref(req), ctypes.byref(out))
                        wake.drain()
                    if r in (-errno.EINTR, -errno.ECANCELED):
                        _run_signal_handlers()  # raises KeyboardInterrupt for Ctrl-C
                        resumed = True          # a handler returned: wait on
                        continue
                    if r >= 0:
                        _run_signal_handlers()  # a signal came with the devices: it wins
                    if r == -errno.ETIMEDOUT and resumed:
                        # say the whole wait, not the rest after the last interruption
                        raise NoDeviceError(errno.ETIMEDOUT, _whole_wait(c.message(), wait_s))
                c.check(r)  # gpuctl_alloc: no driver is -ENODEV, -ENOENT the lease dir
                a = out.value
                devices = _model.devset(L, L.gpuctl_alloc_snapshot(a), L.gpuctl_alloc_devices(a),
                                        L.gpuctl_alloc_health(a))
                if mode != _lib.ALLOC_LEASE:
                    return devices
                held = Lease(a, devices, _lib.text(L.gpuctl_alloc_cuda_visible_devices(a)),
                             _lib.text(L.gpuctl_alloc_lease_dir_path(a)),
                             req.share_mem or None)
                out = None  # the Lease owns it now
                return held
            finally:
                if out is not None and out.value:
                    L.gpuctl_alloc_free(out.value)


def _whole_wait(message: str, wait_s: float) -> str:
    """The library's "waited N s: why" with N the wait asked for."""
    if message.startswith("waited ") and " s: " in message:
        return "waited %g s: %s" % (wait_s, message.split(" s: ", 1)[1])
    return message


def _lease_once(n, filters, share_mem, wait, label, avoid) -> Lease:
    return _allocate(_lib.ALLOC_LEASE, n, filters, share_mem=share_mem, wait=wait, label=label,
                     avoid=avoid)


def lease(n: int = 1, *, share_mem: int | str | None = None, wait: bool | float | None = None,
          label: str | None = None, probe: bool = False, probe_timeout: float = PROBE_TIMEOUT_S,
          **filters) -> Lease:
    """Chooses n devices as gpuctl.select() does and leases them in the same step, so that no
    other gpuctl user (the command line, C programs, other Python processes) gets them until
    the lease ends (see Lease). Devices busy with compute processes of no lease are not chosen
    (unless ignore_foreign=True). Use it as a context manager:

        with gpuctl.lease(2, min_free_mem="20GiB") as l:
            l.apply()          # CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER for this process
            ...

    share_mem: a shared lease declaring this much memory (bytes or a size such as "12GiB") on
    each device: other shared leases may use the same devices while the declared memory fits
    (`gpuctl run --share --mem`); a size no device could ever take raises NoDeviceError at
    once, also with wait ("can never be satisfied"). wait: True waits in line (first come, first served) until
    the devices are free, a number waits at most that many seconds (then NoDeviceError);
    Ctrl-C while waiting raises KeyboardInterrupt with nothing leased. label: shown by
    `gpuctl ps`. probe: test each chosen GPU with a CUDA allocation in a child process (at
    most probe_timeout seconds each); a GPU that fails or hangs is left out and the next best
    taken. filters: as gpuctl.select().

    Raises NoDeviceError (too few devices qualify, or the wait ended), DriverError (no
    driver), RequestError / ValueError (a bad request), TypeError (a wrong type), Error
    (errno.EACCES: a pool you may not use; EPERM, ENOENT: the lease directory)."""
    check_keywords(filters, FILTERS, "lease")
    if not isinstance(probe, bool):
        raise TypeError("probe: expected True or False, got %r" % (probe,))
    if not probe:
        return _lease_once(n, filters, share_mem, wait, label, ())
    if not isinstance(probe_timeout, (int, float)) or not 0 < probe_timeout <= 3600:
        raise ValueError("probe_timeout: %r is not a number of seconds (0 to 3600)"
                         % (probe_timeout,))
    from . import _probe
    failed: dict[str, str] = {}
    w = wait_seconds(wait)
    deadline = None if w is None or w < 0 else time.monotonic() + w
    for _ in range(PROBE_ROUNDS):
        left = wait if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            held = _lease_once(n, filters, share_mem, left, label, tuple(failed))
        except NoDeviceError as e:
            if not failed:
                raise
            raise NoDeviceError(e.errno, "%s (CUDA probe failed: %s)"
                                % (e, _probe.describe(failed))) from None
        try:
            bad = _probe.run([d.uuid for d in held.devices], float(probe_timeout))
        except BaseException:
            held.release()
            raise
        if not bad:
            return held
        held.release()
        failed.update(bad)
    raise NoDeviceError(errno.ENOSPC, "CUDA probe failed in %d rounds: %s"
                        % (PROBE_ROUNDS, _probe.describe(failed)))


def _cuda_initialised() -> str | None:
    """Why CUDA is already initialised in this process, or None. Looks at modules already
    imported only (sys.modules): never imports a framework itself."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None) if torch is not None else None
    init = getattr(cuda, "is_initialized", None)
    if callable(init) and init():
        return "torch.cuda.is_initialized() is true"
    return None


_use_lock = _thread.allocate_lock()
_used: list = []      # [Lease, the request's key, the call as text] of use()'s last lease
_at_exit: list = []   # [True] once _release_at_exit is registered with atexit


def _call_text(n: object, kwargs: dict) -> str:
    args = [repr(n)] + ["%s=%r" % kv for kv in sorted(kwargs.items())]
    return "gpuctl.use(%s)" % ", ".join(args)


def _held_by_use() -> list | None:
    """use()'s [Lease, key, call] while its lease is held (not released by any means)."""
    if _used and not _used[0].released:
        return list(_used)
    return None


def use(n: int = 1, **kwargs) -> Lease:
    """The one line at the top of a training script or notebook: leases n devices (keywords
    as gpuctl.lease()), sets CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER in os.environ
    (Lease.apply), and releases them when the interpreter exits (atexit; a kill ends the lease
    too), or at the end of a with block, or with gpuctl.release(). Returns the Lease.

    Called again while its lease is held (a notebook cell run twice), with the same request
    (the same n and keywords), it returns that lease; with another request it raises Error
    (errno.EBUSY) naming the lease held and how to release it (gpuctl.release()). Releasing
    puts back the environment it changed.

    It must run before CUDA initialises in this process, because CUDA reads
    CUDA_VISIBLE_DEVICES only then: if PyTorch is imported and has initialised CUDA, it raises
    RuntimeError instead of pretending (it never imports a framework itself)."""
    given = {k: v for k, v in kwargs.items() if v is not None}  # label=None is no label
    key = (repr(n), sorted((k, repr(v)) for k, v in given.items()))
    with _use_lock:
        held = _held_by_use()
        if held is not None:
            if held[1] == key:
                return held[0]
            raise Error(errno.EBUSY, "%s: this process holds %s from %s: release it first "
                        "with gpuctl.release()" % (_call_text(n, given),
                                                   held[0].cuda_visible_devices or "a lease",
                                                   held[2]))
        why = _cuda_initialised()
        if why:
            raise RuntimeError("gpuctl.use: CUDA is already initialised in this process (%s), "
                               "so it would not see the leased devices: call gpuctl.use() "
                               "before any CUDA work (before torch.cuda, model.to('cuda'), ...)"
                               % why)
        lease_ = lease(n, **kwargs)
        try:
            lease_.apply()
        except BaseException:
            lease_.release()
            raise
        if not _at_exit:
            import atexit
            atexit.register(_release_at_exit)
            _at_exit.append(True)
        _used[:] = [lease_, key, _call_text(n, given)]
        return lease_


def release() -> None:
    """Releases the lease gpuctl.use() holds in this process, if any, and puts back the
    environment it changed (Lease.release). The next gpuctl.use() leases afresh. Also run at
    exit."""
    with _use_lock:
        held = _held_by_use()
        _used.clear()
    if held is not None:
        held[0].release()


def _release_at_exit() -> None:
    """release() at interpreter exit, without _use_lock: a daemon thread may still be inside
    use() (waiting for devices) holding it, and exit must not wait for that."""
    held = list(_used)
    if held:
        held[0].release()
