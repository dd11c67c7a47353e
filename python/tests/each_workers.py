"""Rank functions for test_each.py: importable by the "spawn" children gpuctl.each() starts (a
function defined in a test module would be, too, but a plain module keeps pytest out of the
children)."""
import os
import signal
import subprocess
import time

RANK_VARS = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "GPUCTL_GPUS", "LOCAL_RANK", "RANK",
             "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def run_load(load, seconds="0"):
    """Runs nvsim-load, which opens the GPUs this process's environment shows through the
    simulated CUDA driver and writes them to the ledger; returns what the rank saw. Once
    nvsim-load is ready (it reads SIGTERM from then on), ready.RANK appears in the state
    directory."""
    state, rank = os.environ["NVSIM_STATE_DIR"], os.environ["RANK"]
    out = os.path.join(state, "out." + rank)
    with open(out, "w") as f:  # a file, not a pipe: it outlives this process if SIGTERM comes
        p = subprocess.Popen([load, "--seconds", seconds, "--fail-if-none"], stdout=f)
    while p.poll() is None:
        with open(out) as f:
            if f.read().startswith("ready"):
                open(os.path.join(state, "ready." + rank), "w").close()
                break
        time.sleep(0.01)
    if p.wait() != 0:
        raise RuntimeError("nvsim-load failed")
    return {k: os.environ.get(k) for k in RANK_VARS} | {"pid": os.getpid()}


def fail_on(rank, load):
    """Rank `rank` raises once the others run nvsim-load (for a long time)."""
    world = int(os.environ["WORLD_SIZE"])
    if os.environ["RANK"] == str(rank):
        state = os.environ["NVSIM_STATE_DIR"]
        deadline = time.monotonic() + 60
        while (len([f for f in os.listdir(state) if f.startswith("ready.")]) < world - 1
               and time.monotonic() < deadline):
            time.sleep(0.02)
        raise ValueError("rank %s gave up" % rank)
    return run_load(load, "120")


def die_on(rank):
    if os.environ["RANK"] == str(rank):
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(120)


def sleep_forever(pidfile):
    with open(pidfile + "." + os.environ["RANK"], "w") as f:
        f.write(str(os.getpid()))
    time.sleep(300)


class Unpicklable(Exception):
    def __init__(self, handle):
        super().__init__("cannot travel")
        self.handle = handle

    def __reduce__(self):
        raise TypeError("no")


def raise_unpicklable():
    raise Unpicklable(lambda: None)
