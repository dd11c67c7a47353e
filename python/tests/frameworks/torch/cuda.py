"""torch.cuda of the test double."""
import _cuda


def is_initialized() -> bool:
    return _cuda.initialised()


def device_count() -> int:
    _cuda.log("torch.cuda.device_count")
    return len(_cuda.devices())
