#!/usr/bin/python3
"""Safe initialisation: the first lines of a training script, before anything touches CUDA.

    python3 examples/python/safe_init.py

CUDA reads CUDA_VISIBLE_DEVICES once, when it initialises; setting it afterwards changes
nothing, silently (the classic "os.environ['CUDA_VISIBLE_DEVICES'] = ..." after `import torch`
and a first tensor). gpuctl.use() goes first, waits in line for a free GPU (up to 10 minutes
here), and refuses with a clear error if PyTorch has already started CUDA. Every failure is
one line that says what is wrong.
"""
import os
import sys

import gpuctl

try:
    lease = gpuctl.use(1, min_free_mem="4GiB", wait=600, label="safe init example")
except gpuctl.NoDeviceError as e:  # nothing qualified within the wait: says which filter
    sys.exit(f"safe_init: no GPU for this job: {e}")
except gpuctl.DriverError as e:  # no NVIDIA driver on this machine
    sys.exit(f"safe_init: {e}")
except RuntimeError as e:  # CUDA was already initialised: gpuctl.use() came too late
    sys.exit(f"safe_init: {e}")

# From here on, CUDA (in this process and in every process it starts) sees only the lease.
dev = lease.devices[0]
print(f"CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']}")
print(f"GPU {dev.index}: {dev.name}, {dev.memory_free >> 30} GiB free, health {dev.health}")
try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    print("torch sees", torch.cuda.device_count(), "device(s)")
