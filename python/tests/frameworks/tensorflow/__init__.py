"""Test double of TensorFlow (see ../README.md): the device calls the documented code makes."""
import contextlib
import types

import _cuda
from _cuda import Tensor


class PhysicalDevice:
    def __init__(self, ordinal: int):
        self.name, self.device_type = "/physical_device:GPU:%d" % ordinal, "GPU"

    def __repr__(self):
        return "PhysicalDevice(name=%r, device_type='GPU')" % self.name


def _list_physical_devices(kind=None):
    if kind not in (None, "GPU"):
        return []
    _cuda.log("tf.config.list_physical_devices")
    return [PhysicalDevice(i) for i in range(len(_cuda.devices()))]


def _set_memory_growth(dev, enable: bool) -> None:
    if not isinstance(dev, PhysicalDevice):
        raise ValueError("Unrecognized device: %r" % (dev,))


config = types.SimpleNamespace(
    list_physical_devices=_list_physical_devices,
    experimental=types.SimpleNamespace(set_memory_growth=_set_memory_growth))

_placement = ["/CPU:0"]


@contextlib.contextmanager
def device(name: str):
    if "GPU" in name:
        _cuda.on_device(name, "tf.device")
    _placement.append(name)
    try:
        yield
    finally:
        _placement.pop()


def _normal(shape):
    return Tensor(shape, _placement[-1])


random = types.SimpleNamespace(normal=_normal)


def matmul(a, b):
    return a @ b


def reduce_sum(t):
    return t.sum()
