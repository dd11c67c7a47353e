"""The objects the package returns (Device, MigDevice, Process, Workload, Link, Finding,
GpuHealth) and their making from the library's snapshots, pair facts, workloads and health
reports.

Decisions:
- Plain Python values copied out of a snapshot while it lives: nothing returned points into C
  memory, so objects outlive the call, cross threads and pickle (each() sends them).
- Units are the library's base units (bytes, percent, degrees C), except power, in watts (the
  library's milliwatts / 1000). A value the GPU does not report is None, never 0.
- Device.fields holds every per-GPU field the snapshot read, under the library's own keys (the
  JSON keys of `gpuctl list --format json`), so a fact added to the library's field table
  reaches Python without a change here. Field ids are looked up by key (gpuctl_field_lookup),
  not copied from the header's enum.
- Devices compare and hash by UUID: the same GPU read twice is the same device.
- Plain classes with __slots__, not dataclasses: importing dataclasses costs more than this
  whole package (bench/RESULTS.md, "Python").
"""
from __future__ import annotations

import ctypes

from . import _lib
from ._lib import text

_field_ids: dict[str, int] = {}
_field_table: list[tuple[int, str, int, int]] | None = None


def field_id(key: str) -> int:
    """The library's field id for a key ("memory.used" or "memory_used")."""
    f = _field_ids.get(key)
    if f is None:
        f = _lib.lib().gpuctl_field_lookup(key.encode())
        if f < 0:
            raise KeyError(key)
        _field_ids[key] = f
    return f


def field_table() -> list[tuple[int, str, int, int]]:
    """Every field as (id, key, type, unit), from the library's table."""
    global _field_table
    if _field_table is None:
        L = _lib.lib()
        out = []
        i = 0
        while True:
            fi = L.gpuctl_field_info(i)
            if not fi:
                break
            out.append((fi.contents.id, text(fi.contents.key), fi.contents.type,
                        fi.contents.unit))
            i += 1
        _field_table = out
    return _field_table


def _int(L, gpu, key: str) -> int | None:
    v = ctypes.c_int64()
    return v.value if L.gpuctl_gpu_int(gpu, field_id(key), ctypes.byref(v)) == 0 else None


def _fields(L, gpu) -> dict:
    out = {}
    v = ctypes.c_int64()
    for fid, key, ftype, unit in field_table():
        if ftype == _lib.FT_STR:
            out[key] = text(L.gpuctl_gpu_str(gpu, fid))
        elif L.gpuctl_gpu_int(gpu, fid, ctypes.byref(v)) == 0:
            out[key] = bool(v.value) if unit in (_lib.FU_BOOL, _lib.FU_YESNO) else v.value
        else:
            out[key] = None
    return out


class _Record:
    """A plain record: its __slots__ given as keywords (missing ones None)."""
    __slots__ = ()

    def __init__(self, **kw) -> None:
        for k in self.__slots__:
            setattr(self, k, kw.get(k))


class _Identified(_Record):
    """A device: the same device (UUID) read twice compares equal."""
    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.uuid == self.uuid

    def __hash__(self) -> int:
        return hash(self.uuid)


_NO_ID = 0xFFFFFFFF  # the header's UINT32_MAX: a uid that is not known


class Workload:
    """Who a process works for (docs/workloads.md): its Slurm job step, Kubernetes pod,
    container, systemd unit or login session, as the library read it from /proc/PID/cgroup,
    /proc/PID/status and the runtime's local state. Every field of struct gpuctl_workload, in
    snake_case; a value the library does not know is None. It informs; it grants nothing:
    anyone can name a container or unit anything (names are bounded to 253 bytes, and bytes
    that are not UTF-8 are replaced)."""
    kind: str
    pid: int
    ns_pid: int | None
    uid: int | None
    cgroup: str | None
    runtime: str | None
    id: str | None
    name: str | None
    pod_namespace: str | None
    pod_uid: str | None
    container: str | None
    slurm_job: int | None
    slurm_step: str | None
    slurm_array_job: int | None
    slurm_array_task: int | None
    unit_uid: int | None
    label: str
    truncated: bool
    __slots__ = ("kind", "pid", "ns_pid", "uid", "cgroup", "runtime", "id", "name",
                 "pod_namespace", "pod_uid", "container", "slurm_job", "slurm_step",
                 "slurm_array_job", "slurm_array_task", "unit_uid", "label", "truncated")

    def __init__(self, w: "_lib.Workload") -> None:
        """A copy of the library's struct (nothing here points into C memory)."""
        slurm = w.kind == _lib.WORKLOAD_SLURM
        #: "unknown", "bare", "slurm", "pod", "container", "unit" or "session"
        self.kind = text(_lib.lib().gpuctl_workload_kind_name(w.kind)) or "unknown"
        self.pid = w.pid                                          #: host PID (as NVML's)
        self.ns_pid = w.ns_pid or None     #: PID in its innermost PID namespace (NSpid)
        self.uid = None if w.uid == _NO_ID else w.uid             #: real uid
        self.cgroup = text(w.cgroup)       #: the cgroup path that decided the kind
        self.runtime = text(w.runtime)     #: pod, container: "docker", "podman", "containerd", ...
        self.id = text(w.id)               #: pod, container: the container id
        self.name = text(w.name)           #: container, pod, unit or session scope name
        self.pod_namespace = text(w.pod_namespace)  #: pod: its namespace
        self.pod_uid = text(w.pod_uid)              #: pod: its uid
        self.container = text(w.container)          #: pod: the container's name in it
        self.slurm_job = w.slurm_job if slurm else None    #: slurm: the job id
        self.slurm_step = text(w.slurm_step)  #: slurm: "0", "batch", ...; None: in no step
        #: slurm: the array's job id, None when the job is not an array task
        self.slurm_array_job = w.slurm_array_job if slurm and w.slurm_array_job else None
        #: slurm: the array task id, None when the job is not an array task
        self.slurm_array_task = w.slurm_array_task if self.slurm_array_job else None
        #: unit, session: the user whose manager or session it is; None for the system's
        self.unit_uid = (w.unit_uid if w.kind in (_lib.WORKLOAD_UNIT, _lib.WORKLOAD_SESSION)
                         and w.unit_uid != _NO_ID else None)
        self.label = text(w.label) or "?"  #: the short form `gpuctl ps` shows: "slurm 4242.0"
        self.truncated = bool(w.truncated)  #: a name was cut at 253 bytes

    def __repr__(self) -> str:
        return "Workload(kind=%r, label=%r, pid=%d)" % (self.kind, self.label, self.pid)


class Workloads:
    """A library workload cache for one public call (gpuctl_workloads_*): each PID read once."""
    __slots__ = ("c", "wls", "_memo")

    def __init__(self, c) -> None:
        self.c = c
        p = ctypes.c_void_p()
        c.check(c.lib.gpuctl_workloads_new(c.ctx, ctypes.byref(p)))
        self.wls = p.value
        self._memo: dict[int, Workload] = {}

    def get(self, pid: int) -> Workload:
        """The workload of pid (a process that cannot be read is kind "unknown")."""
        w = self._memo.get(pid)
        if w is None:
            ptr = ctypes.POINTER(_lib.Workload)()
            self.c.check(self.c.lib.gpuctl_workloads_get(self.c.ctx, self.wls, pid, 0,
                                                         ctypes.byref(ptr)))
            w = self._memo[pid] = Workload(ptr.contents)
        return w

    def close(self) -> None:
        self.c.lib.gpuctl_workloads_free(self.wls)
        self.wls = None


class Process:
    """A compute process on a GPU (or MIG device), as NVML reports it."""
    pid: int
    used_memory: int | None
    uid: int | None
    user: str | None
    command: str | None
    workload: Workload | None
    __slots__ = ("pid", "used_memory", "uid", "user", "command", "workload")

    def __init__(self, pid: int, used_memory: int | None, uid: int | None, user: str | None,
                 command: str | None, workload: Workload | None = None) -> None:
        self.pid = pid                  #: process id
        self.used_memory = used_memory  #: bytes of GPU memory, None when the driver hides it
        self.uid = uid                  #: owner's uid, None when unknown
        self.user = user                #: owner's name (or uid in decimal), None when unknown
        self.command = command          #: argv[0] without directories, None when unknown
        self.workload = workload        #: who it works for (Workload); None if not looked up

    def __repr__(self) -> str:
        return "Process(pid=%d, user=%r, command=%r, used_memory=%r, workload=%r)" % (
            self.pid, self.user, self.command, self.used_memory,
            self.workload.label if self.workload else None)


def _processes(L, gpu, workloads: Workloads | None = None) -> tuple:
    out = []
    mem = ctypes.c_int64()
    uid = ctypes.c_uint32()
    for i in range(L.gpuctl_gpu_proc_count(gpu)):
        p = L.gpuctl_gpu_proc(gpu, i)
        pid = L.gpuctl_proc_pid(p)
        out.append(Process(
            pid,
            mem.value if L.gpuctl_proc_used_memory(p, ctypes.byref(mem)) == 0 else None,
            uid.value if L.gpuctl_proc_uid(p, ctypes.byref(uid)) == 0 else None,
            text(L.gpuctl_proc_user(p)), text(L.gpuctl_proc_command(p)),
            workloads.get(pid) if workloads else None))
    return tuple(out)


class Device(_Identified):
    """One GPU as a snapshot saw it. Values the GPU does not report (or the call did not read)
    are None. Compares and hashes by UUID.

    Attributes: index (NVML's, PCI bus order: for people, not for CUDA), label (the index as
    gpuctl prints it, "3"), uuid (what CUDA is given), pci_bus_id, name, memory_total /
    memory_used / memory_free (bytes), utilization (percent), temperature (C), power (W),
    numa_node (the CPU NUMA node it is attached to), health ("OK", "WARN", "FAIL" as
    `gpuctl health` judges it; None when not judged), lost (fell off the bus), processes
    (Process), mig_devices (MigDevice), fields (every field read, by the library's keys, in its
    units)."""
    # the attributes' types, for type checkers (py.typed); values are set by _Record
    index: int
    label: str
    uuid: str | None
    pci_bus_id: str | None
    name: str | None
    memory_total: int | None
    memory_used: int | None
    memory_free: int | None
    utilization: int | None
    temperature: int | None
    power: float | None
    numa_node: int | None
    health: str | None
    lost: bool
    processes: tuple[Process, ...]
    mig_devices: tuple[MigDevice, ...]
    fields: dict[str, int | str | bool | None]
    __slots__ = ("index", "label", "uuid", "pci_bus_id", "name", "memory_total", "memory_used",
                 "memory_free", "utilization", "temperature", "power", "numa_node", "health",
                 "lost", "processes", "mig_devices", "fields")

    def __repr__(self) -> str:
        return "Device(index=%r, uuid=%r, name=%r, health=%r)" % (
            self.index, self.uuid, self.name, self.health)


class MigDevice(_Identified):
    """A MIG device: a slice of a GPU in MIG mode, with its own UUID ("MIG-...") that CUDA
    accepts in CUDA_VISIBLE_DEVICES. parent is its GPU (a Device); index its place among the
    GPU's MIG devices (as `gpuctl list --format json`); label "GPU:MIG" with NVML's MIG index,
    as gpuctl prints it and NVIDIA_VISIBLE_DEVICES reads it."""
    index: int
    label: str
    uuid: str | None
    profile: str | None
    gpu_instance_id: int | None
    compute_instance_id: int | None
    memory_total: int | None
    memory_used: int | None
    parent: Device
    __slots__ = ("index", "label", "uuid", "profile", "gpu_instance_id", "compute_instance_id",
                 "memory_total", "memory_used", "parent")

    def __repr__(self) -> str:
        return "MigDevice(uuid=%r, profile=%r, parent=%r)" % (
            self.uuid, self.profile, self.parent.index if self.parent else None)


def label(L, snap, gpu: int, mig: int) -> str:
    """A device's label for people, from the library: "3", or "3:1" for a MIG device."""
    buf = ctypes.create_string_buffer(48)
    L.gpuctl_device_label(snap, gpu, mig, buf, len(buf))
    return text(buf.value)


def _mig(L, snap, gpu, m: int, parent: Device) -> MigDevice:
    mig = L.gpuctl_gpu_mig(gpu, m)
    v = ctypes.c_int64()

    def get(f: int) -> int | None:
        return v.value if L.gpuctl_mig_int(mig, f, ctypes.byref(v)) == 0 else None

    return MigDevice(index=m, label=label(L, snap, parent.index, m),
                     uuid=text(L.gpuctl_mig_uuid(mig)),
                     profile=text(L.gpuctl_mig_profile(mig)), gpu_instance_id=get(_lib.MIG_GI),
                     compute_instance_id=get(_lib.MIG_CI),
                     memory_total=get(_lib.MIG_MEMORY_TOTAL),
                     memory_used=get(_lib.MIG_MEMORY_USED), parent=parent)


def device(L, snap, i: int, verdicts: list | None,
           workloads: Workloads | None = None) -> Device:
    """Device i of a snapshot, with its verdict from verdicts (None: not judged) and each
    process's workload from workloads (None: not looked up)."""
    gpu = L.gpuctl_snapshot_gpu(snap, i)
    f = _fields(L, gpu)
    power = f.get("power_draw")
    d = Device(index=L.gpuctl_gpu_index(gpu), label=label(L, snap, i, -1), uuid=f.get("uuid"),
               pci_bus_id=f.get("pci_bus_id"), name=f.get("name"),
               memory_total=f.get("memory_total"), memory_used=f.get("memory_used"),
               memory_free=f.get("memory_free"), utilization=f.get("utilization_gpu"),
               temperature=f.get("temperature_gpu"),
               power=None if power is None else power / 1000.0,
               numa_node=f.get("numa_node"), lost=bool(L.gpuctl_gpu_lost(gpu)),
               health=verdicts[i] if verdicts else None, processes=_processes(L, gpu, workloads),
               fields=f)
    d.mig_devices = tuple(_mig(L, snap, gpu, m, d) for m in range(L.gpuctl_gpu_mig_count(gpu)))
    return d


def verdicts(L, report, n: int) -> list | None:
    """Each GPU's verdict name from a health report (None without a report)."""
    if not report:
        return None
    return [text(L.gpuctl_health_severity_name(L.gpuctl_health_verdict(report, i)))
            for i in range(n)]


def devset(L, snap, dset, report) -> list:
    """The devices of a device set (whole GPUs as Device, MIG devices as MigDevice), in its
    order, each GPU read once."""
    n = L.gpuctl_snapshot_gpu_count(snap)
    names = verdicts(L, report, n)
    gpus: dict[int, Device] = {}
    out = []
    g = ctypes.c_size_t()
    m = ctypes.c_int()
    for i in range(L.gpuctl_devset_count(dset)):
        if L.gpuctl_devset_get(dset, i, ctypes.byref(g), ctypes.byref(m)) < 0:
            continue
        d = gpus.get(g.value)
        if d is None:
            d = gpus[g.value] = device(L, snap, g.value, names)
        out.append(d if m.value < 0 else d.mig_devices[m.value])
    return out


class Link(_Record):
    """The facts about one pair of GPUs, as `gpuctl topo --format json` gives them: level
    (nvidia-smi topo's PCIe code: "PIX", "PXB", "PHB", "NODE", "SYS"; None if unknown) and
    level_value (NVML's number), nvlinks (NVLinks between them; for an NVSwitch fabric, the
    links each has into it), nvswitch, p2p (nvidia-smi topo -p2p's code: "OK", "CNS", "GNS",
    "TNS", "DR", "NS", "U"), bandwidth (modelled GB/s per direction, docs/topology.md)."""
    a: int
    b: int
    a_uuid: str | None
    b_uuid: str | None
    level: str | None
    level_value: int | None
    nvlinks: int | None
    nvswitch: bool | None
    p2p: str | None
    bandwidth: float | None
    __slots__ = ("a", "b", "a_uuid", "b_uuid", "level", "level_value", "nvlinks", "nvswitch",
                 "p2p", "bandwidth")

    def __repr__(self) -> str:
        return "Link(a=%d, b=%d, level=%r, nvlinks=%r, nvswitch=%r, p2p=%r, bandwidth=%r)" % (
            self.a, self.b, self.level, self.nvlinks, self.nvswitch, self.p2p, self.bandwidth)


def links(L, snap) -> list:
    n = L.gpuctl_snapshot_gpu_count(snap)
    uuids = [text(L.gpuctl_gpu_str(L.gpuctl_snapshot_gpu(snap, i), field_id("uuid")))
             for i in range(n)]
    out = []
    link = _lib.Link(struct_size=ctypes.sizeof(_lib.Link))
    for a in range(n):
        for b in range(a + 1, n):
            ok = L.gpuctl_snapshot_link(snap, a, b, ctypes.byref(link)) >= 0
            code = text(L.gpuctl_topo_level_code(link.level)) if ok and link.level >= 0 else None
            out.append(Link(a=a, b=b, a_uuid=uuids[a], b_uuid=uuids[b], level=code,
                            level_value=link.level if code else None,
                            nvlinks=link.nvlinks if ok else None,
                            nvswitch=bool(link.nvswitch) if ok else None,
                            p2p=_lib.P2P_CODES.get(link.p2p, "U") if ok else None,
                            bandwidth=link.bandwidth if ok else None))
    return out


class Finding(_Record):
    """One health finding: check (its id in docs/health.md, e.g. "xid", "ecc-dbe"), severity
    ("OK", "WARN", "FAIL"), message (what was seen, with the numbers), action (what to do),
    xid and xid_class ("fence", "application", "check", "info", "unknown") for an XID, else
    None."""
    check: str
    severity: str
    message: str
    action: str | None
    xid: int | None
    xid_class: str | None
    __slots__ = ("check", "severity", "message", "action", "xid", "xid_class")

    def __repr__(self) -> str:
        return "Finding(check=%r, severity=%r, message=%r)" % (
            self.check, self.severity, self.message)


class GpuHealth(_Record):
    """One GPU's health: index, uuid, pci_bus_id, name, lost, verdict ("OK", "WARN", "FAIL"),
    findings (Finding, worst first)."""
    index: int
    uuid: str | None
    pci_bus_id: str | None
    name: str | None
    lost: bool
    verdict: str | None
    findings: list[Finding]
    __slots__ = ("index", "uuid", "pci_bus_id", "name", "lost", "verdict", "findings")

    def __repr__(self) -> str:
        return "GpuHealth(index=%r, uuid=%r, verdict=%r, findings=%d)" % (
            self.index, self.uuid, self.verdict, len(self.findings))


def health(L, snap, report) -> list:
    n = L.gpuctl_snapshot_gpu_count(snap)
    names = verdicts(L, report, n)
    out = []
    for i in range(n):
        gpu = L.gpuctl_snapshot_gpu(snap, i)
        out.append(GpuHealth(index=L.gpuctl_gpu_index(gpu),
                             uuid=text(L.gpuctl_gpu_str(gpu, field_id("uuid"))),
                             pci_bus_id=text(L.gpuctl_gpu_str(gpu, field_id("pci_bus_id"))),
                             name=text(L.gpuctl_gpu_str(gpu, field_id("name"))),
                             lost=bool(L.gpuctl_gpu_lost(gpu)), verdict=names[i], findings=[]))
    for k in range(L.gpuctl_health_finding_count(report)):
        f = L.gpuctl_health_finding(report, k).contents
        xid = xid_class = None
        if f.xid:
            xid = f.xid
            xid_class = text(L.gpuctl_xid_class_name(f.xid_class))
        out[f.gpu].findings.append(Finding(
            check=text(f.check), severity=text(L.gpuctl_health_severity_name(f.severity)),
            message=text(f.message), action=text(f.action), xid=xid, xid_class=xid_class))
    return out
