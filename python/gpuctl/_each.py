"""gpuctl.each(): one process per leased GPU, like `gpuctl run --each` (src/cli/run-exec.c).

Decisions:
- This process leases the devices and holds the lease until every rank has ended; the ranks
  are multiprocessing "spawn" children (a fresh interpreter: no CUDA state, no lock descriptors
  inherited), each started with only its device visible: CUDA_VISIBLE_DEVICES=<its UUID>,
  CUDA_DEVICE_ORDER=PCI_BUS_ID, GPUCTL_GPUS=<index>:<UUID>, LOCAL_RANK=RANK=<rank>,
  WORLD_SIZE=LOCAL_WORLD_SIZE=<n> (NVIDIA_VISIBLE_DEVICES rewritten when it is set), and
  unless this process has them, MASTER_ADDR=127.0.0.1 and MASTER_PORT=<a free TCP port there>
  for torch.distributed's env:// rendezvous (torchrun --standalone's): the values
  `gpuctl run --each` gives its ranks. The environment is the child's from its first
  instruction (it is set in os.environ, under a lock, while the child is started, because the
  spawn start method passes the parent's environment), so even module-level CUDA work in the
  main module sees only its GPU; it is set again in the child before fn runs.
- A rank does not outlive this process: it asks the kernel for SIGKILL when its parent dies
  (prctl PR_SET_PDEATHSIG through libc, Linux) and exits if the parent is already gone. The
  kernel sends that signal when the thread that started the rank ends, and each() waits in that
  thread, so this only fires when this process dies (a SIGKILL, which also ends the lease).
- Each rank leads a process group of its own (as `run --retry` children do), so stopping a rank
  stops what it started too (a data loader, a tool it runs).
- torchrun's failure policy, as `run --each`: the first rank to fail (an exception, a non-zero
  exit, a signal) stops the others with SIGTERM, then SIGKILL after `grace` seconds (30, as
  run's), each to the rank's process group, and its failure is raised: the rank's own
  exception when it pickles (with the rank's traceback added as a note), else
  ChildProcessError. KeyboardInterrupt stops them the same way.
"""
from __future__ import annotations

import os
import signal
import sys
import time

from ._lease import lease

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
GRACE_S = 30.0         # src/cli/run.h RUN_KILL_TIMEOUT_S

_env_lock = None


def _rank_main(fn, args, rank: int, env: dict, parent: int, conn) -> None:
    """A rank: dies with its parent, sees only its device, runs fn, sends the outcome."""
    import ctypes
    import traceback
    os.setpgid(0, 0)  # a group of its own: stopping the rank stops what it started
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before prctl: nobody holds the lease
        os._exit(1)
    os.environ.update(env)
    try:
        result = fn(*args)
    except BaseException as e:  # noqa: B036 (a rank reports everything, SystemExit included)
        tb = traceback.format_exc()
        try:
            conn.send(("error", e, tb))
        except Exception:
            conn.send(("error", None, tb))
        conn.close()
        sys.exit(1)
    try:
        conn.send(("ok", result, None))
    except Exception:
        conn.send(("error", None, traceback.format_exc()))
        conn.close()
        sys.exit(1)
    conn.close()


def _rendezvous() -> dict:
    """MASTER_ADDR and MASTER_PORT for the ranks, those this process does not set already: the
    loopback address and a TCP port free on it now (the kernel's pick for port 0, let go before
    the ranks start, as `gpuctl run --each` and torchrun --standalone do). When the caller set
    MASTER_ADDR, nothing: a port free here would mean nothing on that host."""
    import socket
    env = {}
    if "MASTER_ADDR" in os.environ:
        return env  # the caller's rendezvous (another host's address: no port of ours)
    env["MASTER_ADDR"] = "127.0.0.1"
    if "MASTER_PORT" not in os.environ:
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
                env["MASTER_PORT"] = str(s.getsockname()[1])
        except OSError:
            pass  # no loopback: torch.distributed will say MASTER_PORT is missing
    return env


def _rank_env(rank: int, world: int, device, rendezvous: dict) -> dict:
    env = {"CUDA_VISIBLE_DEVICES": device.uuid, "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
           "GPUCTL_GPUS": "%s:%s" % (device.label, device.uuid), "LOCAL_RANK": str(rank),
           "RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world)}
    if "NVIDIA_VISIBLE_DEVICES" in os.environ:
        env["NVIDIA_VISIBLE_DEVICES"] = device.uuid
    env.update(rendezvous)
    return env


def _start(proc, env: dict) -> None:
    """proc.start() with env in os.environ for the moment the child is made."""
    global _env_lock
    if _env_lock is None:
        import threading
        _env_lock = threading.Lock()
    with _env_lock:
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            proc.start()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def _signal(p, sig: int) -> None:
    """sig to rank p's process group (the rank and what it started), else to the rank alone
    (it may not have made its group yet)."""
    try:
        os.killpg(p.pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(p.pid, sig)
        except ProcessLookupError:
            pass


def _stop(procs: list, grace: float) -> None:
    """SIGTERM to the ranks still running (with their process groups), SIGKILL to those left
    after grace seconds."""
    alive = [p for p in procs if p.is_alive()]
    for p in alive:
        _signal(p, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for p in alive:
        p.join(max(0.0, deadline - time.monotonic()))
    for p in alive:
        if p.is_alive():
            _signal(p, signal.SIGKILL)
            p.join()


def _failure(rank: int, device, msg: tuple | None, exitcode: int | None) -> BaseException:
    where = "gpuctl.each: rank %d on %s" % (rank, device.uuid)
    if msg is not None:
        _, exc, tb = msg
        if isinstance(exc, BaseException):
            exc.add_note("%s failed:\n%s" % (where, tb.rstrip()))
            return exc
        last = tb.rstrip().split("\n")[-1] if tb else "an exception that does not pickle"
        e = ChildProcessError("%s failed: %s" % (where, last))
        e.add_note(tb.rstrip())
    elif exitcode is not None and exitcode < 0:
        e = ChildProcessError("%s was killed by signal %d" % (where, -exitcode))
    else:
        e = ChildProcessError("%s exited with status %s without a result" % (where, exitcode))
    e.rank, e.uuid, e.exitcode = rank, device.uuid, exitcode
    return e


def each(fn, n: int, *, args: tuple = (), grace: float = GRACE_S, **kwargs) -> list:
    """Leases n devices (keywords as gpuctl.lease()) and runs fn(*args) once per device, each
    in its own process (multiprocessing's "spawn") that sees only that device, with LOCAL_RANK,
    RANK, WORLD_SIZE and LOCAL_WORLD_SIZE set as `gpuctl run --each` (and torchrun on one node)
    sets them, and MASTER_ADDR/MASTER_PORT (127.0.0.1 and a free port, unless set) for
    torch.distributed.init_process_group. Returns fn's results in rank order. When a rank fails, the others are stopped
    (SIGTERM, then SIGKILL after grace seconds) and the first failure is raised: the rank's
    exception (its traceback in a note), or ChildProcessError when it died without one. The
    lease ends when each() returns; the ranks die with this process.

    fn, args and the results must pickle (fn: a module-level function), and, as always with
    "spawn", the main module must not start work on import (use `if __name__ == "__main__":`).
    """
    if not callable(fn):
        raise TypeError("fn: expected a callable, got %r" % (fn,))
    if not isinstance(args, tuple):
        raise TypeError("args: expected a tuple, got %r" % (args,))
    if not isinstance(grace, (int, float)) or not grace >= 0:
        raise ValueError("grace: %r is not a number of seconds" % (grace,))
    import multiprocessing
    from multiprocessing.connection import wait
    ctx = multiprocessing.get_context("spawn")
    with lease(n, **kwargs) as held:
        world = len(held.devices)
        rendezvous = _rendezvous()
        procs, conns = [], []
        try:
            for rank, device in enumerate(held.devices):
                env = _rank_env(rank, world, device, rendezvous)
                r, w = ctx.Pipe(duplex=False)
                p = ctx.Process(target=_rank_main, name="gpuctl-rank-%d" % rank,
                                args=(fn, args, rank, env, os.getpid(), w))
                _start(p, env)
                w.close()
                procs.append(p)
                conns.append(r)
            results = [None] * world
            done: set = set()
            while len(done) < world:
                pending = [i for i in range(world) if i not in done]
                ready = wait([conns[i] for i in pending] + [procs[i].sentinel for i in pending])
                for i in pending:
                    if conns[i] not in ready and procs[i].sentinel not in ready:
                        continue
                    msg = None
                    try:
                        if conns[i].poll():
                            msg = conns[i].recv()
                    except (EOFError, OSError):
                        msg = None  # it closed the pipe without a word: it is ending
                    if msg is not None and msg[0] == "ok":
                        results[i] = msg[1]
                        done.add(i)
                        continue
                    procs[i].join()
                    raise _failure(i, held.devices[i], msg, procs[i].exitcode)
            for p in procs:
                p.join()
            return results
        finally:
            _stop(procs, grace)
            for c in conns:
                c.close()
