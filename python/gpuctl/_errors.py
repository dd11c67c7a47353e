"""The exceptions of the gpuctl package (docs/library.md, "Errors", has the table).

Each carries the library's one-line message as its text, naming the input and what is wrong:
the words `gpuctl select` prints after "gpuctl: select: ", with the arguments spelled as this
package's keywords (numa, mig, share_mem, ignore_outer) where the command line has its options.
"""
from __future__ import annotations


class Error(Exception):
    """A gpuctl failure. .errno is the library's error code (errno.ENOSPC, errno.EACCES, ...);
    str(e) is its one-line message."""

    def __init__(self, errno: int, message: str) -> None:
        super().__init__(message)
        self.errno = errno

    def __reduce__(self):  # pickled as it was made (each() sends errors between processes)
        return (type(self), (self.errno, str(self)))


class NoDeviceError(Error):
    """Too few devices satisfy the request now (errno.ENOSPC), or a wait ended without them
    (errno.ETIMEDOUT). The message says which filter removed which GPUs, e.g.
    "need 2 GPUs, 1 qualify: leased: 0,1,2,3,4,5,6"."""


class LockBusyError(Error):
    """The lease directory's select.lock was held by another process past the bound
    (errno.EAGAIN; `gpuctl` exits 6): 10 s, or a waiting request's deadline. The message names
    the holder ("... held by pid 4242 (user bob) for 10 s"); docs/leases.md, "Bounds"."""


class QuotaError(Error):
    """Over a quota of the pool (errno.EDQUOT; `gpuctl` exits 9): GPUs held at once, lease
    length or GPU-hours a day or week (docs/config.md "Quotas"). The message names the quota,
    what is used and when it frees, e.g. "pool 'training': quota of 4 GPUs at once for user
    alice: 4 held (GPU 0,1,2,3), 1 asked for; frees when one is released". A waiting lease()
    waits while over a quota and raises this only for one that can never be met."""


class DriverError(Error):
    """No NVIDIA driver, NVML cannot initialise (errno.ENODEV, or ENOENT when the NVML library
    is missing), or the library loaded is not NVML (errno.ENOEXEC)."""


class RequestError(Error, ValueError):
    """A bad request (errno.EINVAL): an unknown or malformed GPU id, MIG profile, pool or size,
    a value out of range, an unknown keyword, a configuration file that does not parse, an
    outer allocation (CUDA_VISIBLE_DEVICES, Slurm) that cannot be read. A ValueError."""
