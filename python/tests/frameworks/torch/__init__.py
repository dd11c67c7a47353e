"""Test double of PyTorch (see ../README.md): the device calls the documented code makes."""
from _cuda import Tensor, on_device

from . import cuda, distributed  # noqa: F401


class device:  # noqa: N801 (torch's spelling)
    def __init__(self, name: str):
        if not name.startswith("cuda"):
            raise RuntimeError("this test double knows CUDA devices only: %r" % name)
        self.name = name if ":" in name else name + ":0"

    def __str__(self):
        return self.name


def randn(*shape, device="cpu"):
    name = str(device)
    on_device(name, "torch.randn")
    return Tensor(shape, name)
