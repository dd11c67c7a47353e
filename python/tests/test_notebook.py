"""A notebook's cells run again: gpuctl.use() in one long-lived interpreter, the same cell
executed twice (exec() of its source, as Jupyter's kernel runs a cell: one interpreter, the
modules imported once), another request while a lease is held, gpuctl.release(), a with block,
and the release at exit, with the environment put back each time.

The interpreter is a child Python (the kernel) that runs the cells the test sends it on stdin,
one per line, and answers each with one JSON line: the cell's result and its environment. Who
holds what is read with `gpuctl ps --format json` (the command line, through the kernel's locks),
never from the package's objects."""
import json
import os
import subprocess
import sys
import textwrap

from conftest import GPUCTL, tool_env

KERNEL = textwrap.dedent("""
    import atexit, json, os, subprocess, sys

    def leased_at_exit():
        # registered before any gpuctl.use(), so it runs after the release use() registers
        # (atexit runs last-in, first-out): what `gpuctl ps` sees while this process lives on
        ps = json.loads(subprocess.run([%(gpuctl)r, "ps", "--format", "json"], env=%(env)r,
                                       capture_output=True, text=True, check=True).stdout)
        mine = [d["uuid"] for d in ps["devices"]
                if d["state"] == "leased" and d["owner"]["pid"] == os.getpid()]
        print(json.dumps({"at_exit": mine, "env": env()}), flush=True)

    atexit.register(leased_at_exit)

    def env():
        return {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
                                               "NVIDIA_VISIBLE_DEVICES")}

    cell_globals = {"__name__": "__main__"}
    for line in sys.stdin:
        source = json.loads(line)
        try:
            exec(compile(source, "<cell>", "exec"), cell_globals)
            out = {"result": cell_globals.pop("result", None)}
        except Exception as e:
            out = {"error": type(e).__name__, "message": str(e),
                   "errno": getattr(e, "errno", None)}
        out["env"] = env()
        print(json.dumps(out), flush=True)
""")

USE_CELL = """
import gpuctl
lease = gpuctl.use(2, label="cell")
result = {"uuids": lease.uuids, "id": id(lease)}
"""


class Kernel:
    """The child interpreter, with env added to the test's environment."""

    def __init__(self, env):
        e = dict(os.environ)
        e.update(env)
        self.p = subprocess.Popen(
            [sys.executable, "-c", KERNEL % {"gpuctl": GPUCTL, "env": tool_env()}], env=e,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def run(self, source):
        self.p.stdin.write(json.dumps(textwrap.dedent(source)) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        assert line, self.p.stderr.read()
        return json.loads(line)

    def exit(self):
        out, err = self.p.communicate(timeout=60)
        assert self.p.returncode == 0, err
        return json.loads(out.strip().splitlines()[-1])

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(30)


def leased(m):
    """{uuid: (holder pid, label)} of the devices leased now, as `gpuctl ps` shows them."""
    return {d["uuid"]: (d["owner"]["pid"], d["owner"]["label"])
            for d in m.ps()["devices"] if d["state"] == "leased"}


def kernel(m, **env):
    return Kernel(env)


def test_same_cell_twice_keeps_its_lease_and_release_restores(sim):
    m = sim("dgx-a100")
    # an outer allocation of every GPU, so the earlier CUDA_VISIBLE_DEVICES is a value (to be
    # put back), CUDA_DEVICE_ORDER unset before (to be unset again)
    outer = ",".join(m.uuids)
    k = kernel(m, CUDA_VISIBLE_DEVICES=outer)
    try:
        first = k.run(USE_CELL)
        assert "error" not in first, first
        uuids = first["result"]["uuids"]
        assert len(uuids) == 2 and set(uuids) <= set(m.uuids)
        assert first["env"]["CUDA_VISIBLE_DEVICES"] == ",".join(uuids)
        assert first["env"]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
        held = leased(m)
        assert held == {u: (k.p.pid, "cell") for u in uuids}

        # the cell again: the same lease, no more devices leased
        second = k.run(USE_CELL)
        assert "error" not in second, second
        assert second["result"] == first["result"]
        assert leased(m) == held

        # another request while it holds one: one line naming what is held and the way out
        other = k.run("import gpuctl\ngpuctl.use(1)\n")
        assert other["error"] == "Error" and other["errno"] == 16  # EBUSY
        assert "\n" not in other["message"]
        assert ",".join(uuids) in other["message"]
        assert "gpuctl.use(2, label='cell')" in other["message"]
        assert "gpuctl.release()" in other["message"]
        assert leased(m) == held and other["env"] == first["env"]

        # release(): nothing leased, the environment as it was before use()
        gone = k.run("import gpuctl\ngpuctl.release()\n")
        assert "error" not in gone, gone
        assert leased(m) == {}
        assert gone["env"] == {"CUDA_VISIBLE_DEVICES": outer, "CUDA_DEVICE_ORDER": None,
                               "NVIDIA_VISIBLE_DEVICES": None}

        # the cell after release() leases afresh (a new Lease)
        third = k.run(USE_CELL)
        assert "error" not in third, third
        assert leased(m) == {u: (k.p.pid, "cell") for u in third["result"]["uuids"]}
        # ... and the end of the interpreter releases it (atexit) before the process ends
        last = k.exit()
        assert last["at_exit"] == []
        assert last["env"]["CUDA_VISIBLE_DEVICES"] == outer
        assert last["env"]["CUDA_DEVICE_ORDER"] is None
    finally:
        k.kill()
    assert leased(m) == {}


def test_use_in_a_with_block_releases_and_restores(sim):
    m = sim("dgx-a100")
    k = kernel(m, NVIDIA_VISIBLE_DEVICES="all", CUDA_DEVICE_ORDER="FASTEST_FIRST")
    try:
        cell = """
        import gpuctl, json, os, subprocess
        with gpuctl.use(1) as l:
            inside = dict(os.environ)
        result = {"uuids": l.uuids, "visible": inside.get("CUDA_VISIBLE_DEVICES"),
                  "nvidia": inside.get("NVIDIA_VISIBLE_DEVICES"),
                  "order": inside.get("CUDA_DEVICE_ORDER")}
        """
        for _ in range(2):  # the cell twice: each run leases and releases
            r = k.run(cell)
            assert "error" not in r, r
            res = r["result"]
            assert res["visible"] == res["nvidia"] == ",".join(res["uuids"])
            assert res["order"] == "PCI_BUS_ID"
            assert leased(m) == {}
            assert r["env"] == {"CUDA_VISIBLE_DEVICES": None,
                                "CUDA_DEVICE_ORDER": "FASTEST_FIRST",
                                "NVIDIA_VISIBLE_DEVICES": "all"}
        # a variable the user changed after use() is theirs: release() leaves it
        r = k.run("""
        import gpuctl, os
        l = gpuctl.use(1)
        os.environ["CUDA_DEVICE_ORDER"] = "mine"
        gpuctl.release()
        result = l.released
        """)
        assert r["result"] is True
        assert r["env"] == {"CUDA_VISIBLE_DEVICES": None, "CUDA_DEVICE_ORDER": "mine",
                            "NVIDIA_VISIBLE_DEVICES": "all"}
        assert leased(m) == {}
        last = k.exit()
        assert last["at_exit"] == []
    finally:
        k.kill()


def test_lease_release_restores_what_apply_set(sim):
    m = sim("dgx-a100")
    k = kernel(m, CUDA_DEVICE_ORDER="FASTEST_FIRST")
    try:
        r = k.run("""
        import gpuctl, os
        l = gpuctl.lease(2)
        l.apply()
        l.apply()   # a second apply() keeps the first one's record of what was before
        applied = os.environ["CUDA_VISIBLE_DEVICES"]
        l.release()
        result = {"uuids": l.uuids, "applied": applied}
        """)
        assert "error" not in r, r
        assert r["result"]["applied"] == ",".join(r["result"]["uuids"])
        assert r["env"] == {"CUDA_VISIBLE_DEVICES": None, "CUDA_DEVICE_ORDER": "FASTEST_FIRST",
                            "NVIDIA_VISIBLE_DEVICES": None}
        assert leased(m) == {}
        k.exit()
    finally:
        k.kill()
