"""torch.distributed of the test double: init_process_group reads what torchrun (or
gpuctl.each) sets, as the real one does with init_method "env://"."""
import os

import _cuda


def init_process_group(backend: str) -> None:
    missing = [k for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")
               if k not in os.environ]
    if missing:
        raise ValueError("Error initializing torch.distributed using env:// rendezvous: "
                         "environment variable %s expected, but not set" % missing[0])
    if backend == "nccl" and not _cuda.devices():
        raise RuntimeError("ProcessGroupNCCL is only supported with GPUs, no GPUs found!")
    _cuda.log("torch.distributed.init_process_group", 0, backend=backend,
              rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]),
              local_rank=int(os.environ.get("LOCAL_RANK", -1)))
