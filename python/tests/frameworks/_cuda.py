"""The CUDA driver's view, as a framework gets it: libcuda.so.1 through ctypes, read once per
process (CUDA reads CUDA_VISIBLE_DEVICES at cuInit and never again), and the log the tests
read ($FRAMEWORK_LOG, one JSON object per line)."""
import ctypes
import json
import os

_seen = None


def _uuid(raw) -> str:
    h = bytes(raw).hex()
    return "GPU-%s-%s-%s-%s-%s" % (h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])


def devices() -> list:
    """UUIDs of the CUDA devices of this process, in ordinal order (cached, as CUDA does)."""
    global _seen
    if _seen is None:
        drv = ctypes.CDLL("libcuda.so.1")
        n, handle = ctypes.c_int(0), ctypes.c_int(0)
        raw = (ctypes.c_ubyte * 16)()
        if drv.cuInit(ctypes.c_uint(0)) != 0:
            raise RuntimeError("CUDA: cuInit failed (no CUDA-capable device is detected)")
        drv.cuDeviceGetCount(ctypes.byref(n))
        found = []
        for ordinal in range(n.value):
            drv.cuDeviceGet(ctypes.byref(handle), ctypes.c_int(ordinal))
            drv.cuDeviceGetUuid_v2(ctypes.byref(raw), handle)
            found.append(_uuid(raw))
        _seen = found
    return _seen


def initialised() -> bool:
    return _seen is not None


def log(call: str, ordinal=None, **extra) -> None:
    """Appends what this call saw to $FRAMEWORK_LOG."""
    entry = dict(call=call, pid=os.getpid(), ordinal=ordinal, cuda=devices(), **extra)
    with open(os.environ["FRAMEWORK_LOG"], "a") as f:
        f.write(json.dumps(entry) + "\n")


def on_device(name: str, call: str) -> int:
    """The ordinal of "cuda:K" (or "/GPU:K"); logs the call; a missing device fails as the
    frameworks fail ("invalid device ordinal")."""
    ordinal = int(name.rsplit(":", 1)[1]) if ":" in name else 0
    if ordinal >= len(devices()):
        raise RuntimeError("CUDA error: invalid device ordinal %d (%d visible)"
                           % (ordinal, len(devices())))
    log(call, ordinal)
    return ordinal


class Tensor:
    """A stand-in for a tensor on a device: shapes are checked, values are not computed."""

    def __init__(self, shape, device):
        self.shape, self.device = tuple(shape), device

    def __matmul__(self, other):
        if self.shape[-1] != other.shape[0] or self.device != other.device:
            raise ValueError("mat1 and mat2 shapes cannot be multiplied")
        return Tensor(self.shape[:-1] + other.shape[1:], self.device)

    def sum(self):
        return Tensor((), self.device)

    def __float__(self):
        if self.shape != ():
            raise ValueError("only one element tensors can be converted to Python scalars")
        return 0.0
