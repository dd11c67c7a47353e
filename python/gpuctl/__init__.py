"""gpuctl: which GPUs should this job get, and keep them to it (python/README.md).

The Python face of libgpuctl (pure Python over libgpuctl.so.0 with ctypes): the same choice,
rules and leases as the `gpuctl` command line, because both call the library's one allocation
call, gpuctl_alloc (docs/library.md).

    import gpuctl
    gpuctl.use(1, min_free_mem="10GiB")   # before torch/tensorflow touch CUDA
    import torch                          # sees only the leased GPU, as cuda:0

Functions: devices(), topology(), health(), select(), lease(), use(), release(), each(),
workload().
Exceptions: Error (base, .errno), NoDeviceError, LockBusyError, QuotaError, DriverError,
RequestError (a ValueError).
The library is $GPUCTL_LIBRARY, else the copy a wheel of the build bundles (gpuctl/
libgpuctl.so.0), else the one `make install` put beside this package, else libgpuctl.so.0
through the dynamic linker; it is loaded at the first call.
"""
from __future__ import annotations

from . import _lib, _model
from ._errors import (DriverError, Error, LockBusyError, NoDeviceError, QuotaError,
                      RequestError)
from ._lease import Lease, lease, release, use
from ._model import Device, Finding, GpuHealth, Link, MigDevice, Process, Workload
from ._request import FILTERS, check_keywords

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__version__ = "0.1.0"

__all__ = ["devices", "topology", "health", "select", "lease", "use", "release", "each",
           "workload", "Device", "MigDevice", "Process", "Workload", "Link", "Finding", "GpuHealth", "Lease", "Error",
           "NoDeviceError", "LockBusyError", "QuotaError", "DriverError", "RequestError"]


def _site(c, flags: int, config: str | None = None):
    """gpuctl_site_open with the environment's configuration and lease directory."""
    import ctypes
    site = ctypes.c_void_p()
    c.check(c.lib.gpuctl_site_open(c.ctx, config.encode() if config else None, None, flags,
                                   ctypes.byref(site)))
    return site.value


def _snapshot(c, flags: int, fields: Iterable[int] | None):
    import ctypes
    snap = ctypes.c_void_p()
    if fields is None:
        arr, n = None, 0
    else:
        fields = list(fields)
        arr, n = (ctypes.c_int * len(fields))(*fields), len(fields)
    c.check(c.lib.gpuctl_snapshot_take_fields(c.ctx, flags, arr, n, ctypes.byref(snap)),
            nvml=True)
    return snap.value


def _health_fields(L) -> list:
    import ctypes
    n = ctypes.c_size_t()
    p = L.gpuctl_health_fields(ctypes.byref(n))
    return [p[i] for i in range(n.value)]


def _judged(c, snap, config: str | None):
    """The health report of snap as `gpuctl health` makes it (gpuctl_site_health)."""
    import ctypes
    site = _site(c, _lib.SITE_NO_LEASES, config)
    rep = ctypes.c_void_p()
    try:
        c.check(c.lib.gpuctl_site_health(c.ctx, site, snap, ctypes.byref(rep)))
    finally:
        c.lib.gpuctl_site_free(site)
    return rep.value


def devices(*, config: str | None = None) -> list[Device]:
    """Every GPU of the machine, in NVML's index order, with everything NVML tells about it
    (Device), its compute processes, its MIG devices and its health verdict as `gpuctl health`
    gives it (the rules of docs/health.md, the kernel log's XIDs, what `gpuctl health --watch`
    recorded). A lost GPU is listed, lost=True. config: the configuration file (default
    $GPUCTL_CONFIG, else /etc/gpuctl/gpuctl.conf), which says where the health state is.

    Raises DriverError without a driver."""
    with _lib.Context() as c:
        L = c.lib
        snap = _snapshot(c, _lib.SNAP_PROCESSES | _lib.SNAP_MIG | _lib.SNAP_HEALTH
                         | _lib.SNAP_TOPOLOGY, None)
        rep = None
        wls = None
        try:
            rep = _judged(c, snap, config)
            n = L.gpuctl_snapshot_gpu_count(snap)
            names = _model.verdicts(L, rep, n)
            wls = _model.Workloads(c)
            return [_model.device(L, snap, i, names, wls) for i in range(n)]
        finally:
            if wls is not None:
                wls.close()
            L.gpuctl_health_report_free(rep)
            L.gpuctl_snapshot_free(snap)


def workload(pid: int) -> Workload:
    """Who process pid works for: its Slurm job step, Kubernetes pod, container, systemd unit or
    login session (Workload; docs/workloads.md), read from /proc/PID/cgroup and /proc/PID/status
    and, for pod and container names, the runtime's local state (no network call). A process
    that is gone or hidden is kind "unknown". Needs no driver. Raises RequestError for pid 0
    or a pid out of range."""
    if not isinstance(pid, int) or isinstance(pid, bool) or not 0 < pid <= 0xFFFFFFFF:
        raise RequestError(22, "pid %r: not a process id" % (pid,))
    with _lib.Context() as c:
        wls = _model.Workloads(c)
        try:
            return wls.get(pid)
        finally:
            wls.close()


def topology() -> list[Link]:
    """The facts about every pair of GPUs (a < b, by NVML index), as `gpuctl topo --format
    json` lists them: PCIe level, NVLinks, NVSwitch, P2P status, modelled bandwidth (Link).

    Raises DriverError without a driver."""
    with _lib.Context() as c:
        fields = [_model.field_id(k) for k in ("numa_node", "cpu_affinity", "gpu_numa_node")]
        snap = _snapshot(c, _lib.SNAP_TOPOLOGY, fields)
        try:
            return _model.links(c.lib, snap)
        finally:
            c.lib.gpuctl_snapshot_free(snap)


def health(*, config: str | None = None) -> list[GpuHealth]:
    """Each GPU's health as `gpuctl health` judges it (docs/health.md): its verdict ("OK",
    "WARN", "FAIL") and findings (check id, severity, message, action, XID). XIDs come from
    $GPUCTL_KMSG, else /dev/kmsg when readable, and from the state file `gpuctl health
    --watch` keeps. (The CUDA probe is lease(probe=True)'s.)

    Raises DriverError without a driver."""
    with _lib.Context() as c:
        L = c.lib
        snap = _snapshot(c, _lib.SNAP_HEALTH | _lib.SNAP_TOPOLOGY, _health_fields(L))
        rep = None
        try:
            rep = _judged(c, snap, config)
            return _model.health(L, snap, rep)
        finally:
            L.gpuctl_health_report_free(rep)
            L.gpuctl_snapshot_free(snap)


def select(n: int = 1, *, min_free_mem: int | str | None = None, max_util: int | None = None,
           no_procs: bool = False, pool: str | None = None, mig: str | None = None,
           only: str | Iterable[str | int] | None = None,
           exclude: str | Iterable[str | int] | None = None, numa: int | None = None,
           allow_unhealthy: bool = False, ignore_outer: bool = False,
           ignore_foreign: bool = False, share_mem: int | str | None = None,
           preview: bool = False, config: str | None = None, lease_dir: str | None = None,
           **unknown: object) -> list[Device]:
    """The n devices a job should get, best first, exactly as `gpuctl select -n N` chooses
    them: healthy (a FAIL GPU never, a WARN one only when needed), within the allocation the
    process runs in (CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, Slurm's SLURM_*_GPUS) unless
    ignore_outer, from the pool (default: the GPUs no pool lists), not leased by anyone, then
    the best connected set (docs/selection.md). Takes no lease: someone may take them before
    they are used (gpuctl.lease() chooses and leases in one step).

    min_free_mem: bytes free at least, an int or a size such as "10GiB" (B, KiB, MiB, GiB, TiB
    or K, M, G, T, alone or as KB, MB, GB, TB; all binary: GB is GiB). max_util: GPU utilisation at most, percent. no_procs: no compute
    process on the device. only / exclude: GPU ids (indices, UUIDs or their prefixes, PCI bus
    ids) as a comma-separated string or a list. numa: only GPUs attached to this NUMA node.
    mig: MIG devices of this profile ("1g.10gb") instead of whole GPUs (MigDevice). pool: a
    pool of the configuration file. allow_unhealthy: judge no health. share_mem: choose as a
    shared lease of that size would. preview: choose as gpuctl.lease() would (also leaving out
    devices busy with processes of no lease, unless ignore_foreign): `gpuctl run --dry-run`.
    config / lease_dir: instead of $GPUCTL_CONFIG / $GPUCTL_LEASE_DIR.

    Raises NoDeviceError when too few qualify (its text is `gpuctl select`'s reason line),
    DriverError without a driver, RequestError (a ValueError) for a bad request, TypeError for
    a wrong type, Error (errno.EACCES) for a pool you may not use."""
    check_keywords(unknown, FILTERS + ("share_mem", "preview"), "select")
    if not isinstance(preview, bool):
        raise TypeError("preview: expected True or False, got %r" % (preview,))
    filters = {"min_free_mem": min_free_mem, "max_util": max_util, "no_procs": no_procs,
               "pool": pool, "mig": mig, "only": only, "exclude": exclude, "numa": numa,
               "allow_unhealthy": allow_unhealthy, "ignore_outer": ignore_outer,
               "ignore_foreign": ignore_foreign, "config": config, "lease_dir": lease_dir}
    from ._lease import _allocate
    mode = _lib.ALLOC_PREVIEW if preview else _lib.ALLOC_CHOOSE
    return _allocate(mode, n, filters, share_mem=share_mem)


def each(fn: Callable, n: int, *, args: tuple = (), grace: float = 30.0,
         **kwargs: object) -> list:
    """Leases n devices and runs fn(*args) once per device, each in its own "spawn" process
    that sees only its device, with LOCAL_RANK, RANK, WORLD_SIZE and LOCAL_WORLD_SIZE as
    `gpuctl run --each` sets them (and MASTER_ADDR/MASTER_PORT, unless set, for
    torch.distributed); returns the results in rank order, or raises the first
    failure after stopping the other ranks (SIGTERM, SIGKILL after grace seconds). Keywords
    as gpuctl.lease(). See gpuctl._each for the details."""
    from ._each import each as run_each
    return run_each(fn, n, args=args, grace=grace, **kwargs)
