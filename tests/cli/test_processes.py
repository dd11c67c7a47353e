"""Compute processes as gpuctl reports them: registered with `nvsim proc add` (real, live
PIDs), read back through NVML's process list, and attributed to their owner and command via
/proc. The expected values are what the test registered.

The same machine is also read through build/sim/r530/libnvidia-ml.so.1, which writes the
32-byte _v3 entries of the first R535-branch drivers (NVML 12.2): several processes on one GPU expose a reader that
steps through them at the wrong stride."""
import os
import pwd
import unittest

from gpuctl_test import BUILD, GPUCTL, NVSIM, SCENARIOS, GpuctlTestCase, run

R530 = os.path.join(BUILD, "sim", "r530", "libnvidia-ml.so.1")

# Three sleepers on GPU 1 (sizes in MiB), one on GPU 4: started by the shell below, which
# prints gpuctl's JSON with the default library and then with the R530 one.
SCRIPT = r"""
sleep 60 & p1=$!; sleep 60 & p2=$!; sleep 60 & p3=$!; sleep 60 & p4=$!
trap 'kill $p1 $p2 $p3 $p4 2>/dev/null' EXIT
"$NVSIM" proc add --pid $p1 -i 1 --mem 1024MiB
"$NVSIM" proc add --pid $p2 -i 1 --mem 3GiB
"$NVSIM" proc add --pid $p3 -i 1 --mem 7MiB
"$NVSIM" proc add --pid $p4 -i 4 --mem 2GiB
echo "pids $p1 $p2 $p3 $p4"
echo "=== default"
"$GPUCTL" list --format json
echo "=== r530"
GPUCTL_NVML_LIBRARY="$R530" "$GPUCTL" list --format json
echo "=== table"
"$GPUCTL" list
"""


class ProcessesTest(GpuctlTestCase):
    @classmethod
    def setUpClass(cls):
        r = run([NVSIM, "exec", "dgx-a100", "--", "sh", "-ec", SCRIPT],
                env={"GPUCTL": GPUCTL, "NVSIM": NVSIM, "R530": R530})
        assert r.rc == 0, r
        head, rest = r.out.split("=== default\n")
        cls.pids = [int(p) for p in head.split()[1:5]]
        default, rest = rest.split("=== r530\n")
        r530, cls.table = rest.split("=== table\n")
        import json
        cls.docs = {"default": json.loads(default), "r530": json.loads(r530)}

    def expected(self):
        p1, p2, p3, p4 = self.pids
        mib = 1 << 20
        return {1: {p1: 1024 * mib, p2: 3072 * mib, p3: 7 * mib}, 4: {p4: 2048 * mib}}

    def check(self, doc):
        user = pwd.getpwuid(os.getuid()).pw_name
        want = self.expected()
        for g in doc["gpus"]:
            got = {p["pid"]: p for p in g["processes"]}
            self.assertEqual(set(got), set(want.get(g["index"], {})), f"GPU{g['index']}")
            for pid, mem in want.get(g["index"], {}).items():
                self.assertEqual(got[pid]["used_memory"], mem)
                self.assertEqual(got[pid]["user"], user)
                self.assertEqual(got[pid]["command"], "sleep")

    def test_current_driver_layout(self):
        self.check(self.docs["default"])

    def test_r530_driver_layout(self):
        self.check(self.docs["r530"])

    def test_memory_used_includes_processes(self):
        # The simulator adds registered processes' memory to the GPU's used memory.
        gpus = {g["index"]: g for g in self.docs["default"]["gpus"]}
        self.assertEqual(gpus[1]["memory_used"], sum(self.expected()[1].values()))

    def test_table_shows_user_pid_mem(self):
        user = pwd.getpwuid(os.getuid()).pw_name
        line = [l for l in self.table.splitlines() if l.startswith("1 ")][0]
        for pid, mem in self.expected()[1].items():
            self.assertIn(f"{user}:{pid}({mem >> 20}MiB)", line)


# Processes on two MIG devices of a100-mig's GPU 0 (the devices the scenario file lists, by
# UUID), read by root and by a caller the simulator treats as unprivileged (NVSIM_UNPRIVILEGED=1:
# the GPU handle's aggregated list answers NO_PERMISSION, as nvml.h allows for callers without
# the privileges to see it).
MIG_SCRIPT = r"""
sleep 60 & p1=$!; sleep 60 & p2=$!
trap 'kill $p1 $p2 2>/dev/null' EXIT
"$NVSIM" proc add --pid $p1 -i "$MIG1" --mem 100MiB
"$NVSIM" proc add --pid $p2 -i "$MIG2" --mem 200MiB
echo "pids $p1 $p2"
echo "=== root"
"$GPUCTL" list --format json
echo "=== user"
NVSIM_UNPRIVILEGED=1 "$GPUCTL" list --format json
"""


class MigProcessesWithoutPrivilege(GpuctlTestCase):
    def test_same_processes_for_root_and_others(self):
        import json
        with open(os.path.join(SCENARIOS, "a100-mig.json")) as f:
            doc = json.load(f)
        gpu0 = {**doc.get("defaults", {}), **doc["gpus"][0]}
        inst = gpu0["mig"]["instances"]
        r = run([NVSIM, "exec", "a100-mig", "--", "sh", "-ec", MIG_SCRIPT],
                env={"GPUCTL": GPUCTL, "NVSIM": NVSIM, "MIG1": inst[1]["uuid"],
                     "MIG2": inst[3]["uuid"]})
        self.assertEqual(r.rc, 0, r)
        head, rest = r.out.split("=== root\n")
        p1, p2 = (int(p) for p in head.split()[1:3])
        root, user = (json.loads(t) for t in rest.split("=== user\n"))
        mib = 1 << 20
        want = {p1: (100 * mib, inst[1]["gi"], inst[1]["ci"]),
                p2: (200 * mib, inst[3]["gi"], inst[3]["ci"])}
        for name, d in (("root", root), ("unprivileged", user)):
            got = {p["pid"]: (p["used_memory"], p["gpu_instance_id"], p["compute_instance_id"])
                   for p in d["gpus"][0]["processes"]}
            self.assertEqual(got, want, name)


if __name__ == "__main__":
    unittest.main()
