#!/usr/bin/python3
"""One process per GPU, each seeing only its own, instead of mp.Process per GPU with
torch.cuda.set_device(rank) and a hand-written device list.

    python3 examples/python/one_process_per_gpu.py [N]

gpuctl.each() leases N GPUs (default 2) and starts one "spawn" process per GPU with
CUDA_VISIBLE_DEVICES set to that GPU alone and LOCAL_RANK, RANK, WORLD_SIZE and
LOCAL_WORLD_SIZE set as torchrun (and `gpuctl run --each`) sets them, and, unless the parent
has them already, MASTER_ADDR=127.0.0.1 and a free MASTER_PORT: the rendezvous that
torch.distributed.init_process_group("nccl") reads. It returns the results in rank order; when
one rank fails it stops the others and raises that rank's exception. The lease ends when it
returns. In a real job the worker would call init_process_group and use cuda:0; here it asks
the CUDA driver itself (libcuda.so.1, through ctypes) which GPU it sees and prints one line per
rank, so it runs without a framework.
"""
import ctypes
import os
import sys

import gpuctl


def cuda_sees() -> list:
    """The UUIDs of the devices the CUDA driver shows this process."""
    cu = ctypes.CDLL("libcuda.so.1")
    cu.cuInit.argtypes = [ctypes.c_uint]
    cu.cuDeviceGetCount.argtypes = [ctypes.POINTER(ctypes.c_int)]
    cu.cuDeviceGet.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    cu.cuDeviceGetUuid.argtypes = [ctypes.POINTER(ctypes.c_ubyte * 16), ctypes.c_int]
    if cu.cuInit(0) != 0:
        return []
    count = ctypes.c_int()
    cu.cuDeviceGetCount(ctypes.byref(count))
    out = []
    for i in range(count.value):
        dev = ctypes.c_int()
        raw = (ctypes.c_ubyte * 16)()
        cu.cuDeviceGet(ctypes.byref(dev), i)
        cu.cuDeviceGetUuid(ctypes.byref(raw), dev)
        h = bytes(raw).hex()
        out.append(f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
    return out


def worker() -> str:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    seen = cuda_sees()
    return f"rank {rank}/{world}: CUDA sees {len(seen)} device(s): {', '.join(seen)}"


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    for line in gpuctl.each(worker, n, label="one process per GPU"):
        print(line)


if __name__ == "__main__":  # required with "spawn": each rank imports this module
    main()
