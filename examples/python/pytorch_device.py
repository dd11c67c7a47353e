#!/usr/bin/python3
"""PyTorch on the GPU gpuctl chooses, instead of a hand-typed CUDA_VISIBLE_DEVICES=0,2 or a
guessed torch.cuda.set_device(1).

    python3 examples/python/pytorch_device.py [N]

gpuctl.use() leases N GPUs (default 1) with at least 10 GiB free, healthy, not leased by
anyone else and not busy with processes of no lease, and sets CUDA_VISIBLE_DEVICES to their
UUIDs before PyTorch starts CUDA. PyTorch then sees exactly those GPUs, as cuda:0 ... cuda:N-1,
whatever their NVML indices; the lease ends when the script exits (or is killed).
"""
import sys

import gpuctl


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    lease = gpuctl.use(n, min_free_mem="10GiB", label="pytorch example")
    import torch  # after gpuctl.use(): CUDA reads CUDA_VISIBLE_DEVICES when it starts

    assert torch.cuda.device_count() == len(lease.devices)
    for ordinal, dev in enumerate(lease.devices):
        print(f"cuda:{ordinal} is GPU {dev.index} ({dev.name}, {dev.uuid})")
    device = torch.device("cuda:0")
    x = torch.randn(4096, 4096, device=device)
    print("checksum", float((x @ x).sum()))


if __name__ == "__main__":
    main()
