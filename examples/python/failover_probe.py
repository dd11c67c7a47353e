#!/usr/bin/python3
"""Start a job only on GPUs that really work, instead of parsing nvidia-smi and trying a test
allocation by hand.

    python3 examples/python/failover_probe.py N -- COMMAND [ARGS...]

gpuctl.lease(probe=True) leases N GPUs that gpuctl judges healthy (XIDs, ECC, row remapping,
NVLinks, ...: docs/health.md), then tries a CUDA allocation on each in a child process under a
timeout; a GPU that fails or hangs is skipped and the next best taken. The command runs with
CUDA_VISIBLE_DEVICES set to the leased GPUs; the lease ends when it exits.
"""
import subprocess
import sys

import gpuctl


def main() -> int:
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit("usage: failover_probe.py N -- COMMAND [ARGS...]")
    n = int(sys.argv[1])
    try:
        lease = gpuctl.lease(n, probe=True, probe_timeout=10, label="failover example")
    except gpuctl.NoDeviceError as e:
        sys.exit(f"failover_probe: no working GPUs: {e}")
    with lease:
        lease.apply()
        print("running on", lease.cuda_visible_devices, file=sys.stderr)
        return subprocess.run(sys.argv[3:]).returncode


if __name__ == "__main__":
    sys.exit(main())
