"""torch.distributed of the test double: init_process_group reads what torchrun (or
gpuctl.each / gpuctl run --each) sets, as the real one does with init_method "env://", and
meets the other ranks over TCP at MASTER_ADDR:MASTER_PORT as its TCPStore does: rank 0 listens
there, every other rank connects (retrying until it listens) and sends its rank, and rank 0
answers once all WORLD_SIZE ranks are in. A port another program took, or ranks told different
ports, fail here as they fail in torch."""
import os
import socket
import time

import _cuda

TIMEOUT_S = 60.0


def _meet(addr: str, port: int, rank: int, world: int) -> None:
    if rank == 0:
        with socket.create_server((addr, port)) as srv:  # EADDRINUSE: the port was taken
            srv.settimeout(TIMEOUT_S)
            peers = []
            while len(peers) < world - 1:
                conn, _ = srv.accept()
                conn.settimeout(TIMEOUT_S)
                peers.append((int(conn.recv(16).decode()), conn))
            if sorted(r for r, _ in peers) != list(range(1, world)):
                raise RuntimeError("ranks %s met rank 0" % sorted(r for r, _ in peers))
            for _, conn in peers:
                conn.sendall(b"ok")
                conn.close()
        return
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        try:
            with socket.create_connection((addr, port), timeout=TIMEOUT_S) as c:
                c.sendall(str(rank).encode())
                if c.recv(2) != b"ok":
                    raise RuntimeError("rank 0 did not answer")
                return
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise TimeoutError("rank %d: nobody listens at %s:%d" % (rank, addr, port))
            time.sleep(0.05)


def init_process_group(backend: str) -> None:
    missing = [k for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")
               if k not in os.environ]
    if missing:
        raise ValueError("Error initializing torch.distributed using env:// rendezvous: "
                         "environment variable %s expected, but not set" % missing[0])
    if backend == "nccl" and not _cuda.devices():
        raise RuntimeError("ProcessGroupNCCL is only supported with GPUs, no GPUs found!")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    _meet(addr, port, rank, world)
    _cuda.log("torch.distributed.init_process_group", 0, backend=backend, rank=rank,
              world_size=world, local_rank=int(os.environ.get("LOCAL_RANK", -1)),
              master="%s:%d" % (addr, port))
