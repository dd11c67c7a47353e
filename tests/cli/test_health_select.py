"""Health-aware selection end to end (issue 5, "Selection and launch"): `select` and `run` never
choose a GPU whose health verdict is FAIL (unless --allow-unhealthy) and use a WARN GPU only when
the request cannot be met without it. The verdicts are those of docs/health.md: a fence-class XID
in the kernel log (79) is FAIL, a pending row remap is WARN. Expected sets follow from the rules
and the scenario (dgx-a100: 8 GPUs), never from gpuctl's output."""
import os

from cli_facts import Machine
from gpuctl_test import EXIT_NOMATCH, EXIT_OK, GpuctlTestCase, sim_sh

UUIDS = [g["uuid"] for g in Machine("dgx-a100").gpus]


def chosen(out):
    line = [l for l in out.splitlines() if l.startswith("CUDA_VISIBLE_DEVICES=")][-1]
    return {UUIDS.index(u) for u in line.split("=", 1)[1].split(",") if u}


class HealthSelect(GpuctlTestCase):
    def test_fail_never_chosen(self):
        r = sim_sh("dgx-a100", '$NVSIM xid -i 3 79\n'
                   '$GPUCTL select -n 8 || echo rc=$?\n'
                   '$GPUCTL select -n 7\n'
                   '$GPUCTL select -n 8 --allow-unhealthy\n'
                   '$GPUCTL run -n 7 -- sh -c "echo CUDA_VISIBLE_DEVICES=\\$CUDA_VISIBLE_DEVICES"\n')
        self.assertEqual(r.rc, 0, r)
        self.assertIn("rc=%d" % EXIT_NOMATCH, r.out)
        self.assertIn("unhealthy: 3", r.err)
        lines = [l for l in r.out.splitlines() if l.startswith("CUDA_VISIBLE_DEVICES=")]
        self.assertEqual(len(lines), 3, r)
        self.assertEqual(chosen(lines[0]), set(range(8)) - {3})
        self.assertEqual(chosen(lines[1]), set(range(8)))
        self.assertEqual(chosen(lines[2]), set(range(8)) - {3})

    def test_warn_only_when_needed(self):
        r = sim_sh("dgx-a100", '$NVSIM set -i 0 remap.pending=1\n'
                   'for n in 1 2 4 7 8; do $GPUCTL select -n $n; done\n')
        self.assertEqual(r.rc, EXIT_OK, r)
        sets = [chosen(l) for l in r.out.splitlines() if l.startswith("CUDA_VISIBLE_DEVICES=")]
        self.assertEqual(len(sets), 5, r)
        for s in sets[:3]:
            self.assertNotIn(0, s)
        self.assertEqual(sets[3], set(range(1, 8)))  # the only 7 without GPU 0
        self.assertEqual(sets[4], set(range(8)))     # all 8: GPU 0 is needed

    def test_ps_shows_verdicts(self):
        # ps lists an unhealthy GPU even when it is free, with its verdict; --all lists the rest
        r = sim_sh("dgx-a100", '$NVSIM xid -i 3 79\n$NVSIM set -i 1 remap.pending=1\n'
                   '$GPUCTL ps --format json\necho ---\n$GPUCTL ps --all --format json\n')
        self.assertEqual(r.rc, EXIT_OK, r)
        import json
        short, full = (json.loads(p) for p in r.out.split("---\n"))
        self.assertEqual({d["index"]: d["health"] for d in short["devices"]},
                         {1: "WARN", 3: "FAIL"})
        self.assertEqual({d["index"]: d["health"] for d in full["devices"]},
                         {0: "OK", 1: "WARN", 2: "OK", 3: "FAIL", 4: "OK", 5: "OK", 6: "OK",
                          7: "OK"})

    def test_nvlink_errors_since_the_recorded_sample(self):
        # select reads the NVLink error counters when a state file holds an earlier sample
        # (and only then: tests/cli/test_nvml_calls.py), and judges their rate by DCGM's rule:
        # CRC errors at 100 a second or more are FAIL (docs/health.md), so the GPU is left out.
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            state = os.path.join(tmp, "health.state")
            script = ('$GPUCTL health --watch --interval 1 --state "$STATE" >/dev/null &\n'
                      'W=$!\n'
                      'for i in $(seq 100); do grep -q nvlink "$STATE" 2>/dev/null && break; '
                      'sleep 0.1; done\n'
                      'kill $W; wait $W 2>/dev/null || true\n'
                      '$NVSIM set -i 2 nvlink.3.crc_flit=10000000\n'
                      '$GPUCTL select -n 8 || echo rc=$?\n'
                      '$GPUCTL select -n 7\n')
            r = sim_sh("dgx-a100", script, env={"STATE": state, "GPUCTL_HEALTH_STATE": state})
        self.assertEqual(r.rc, 0, r)
        self.assertIn("rc=%d" % EXIT_NOMATCH, r.out, r)
        self.assertIn("unhealthy: 2", r.err)
        self.assertEqual(chosen(r.out), set(range(8)) - {2})

    def test_select_honours_what_health_watch_recorded(self):
        # `health --watch` sees an XID through NVML's events and records it in its state file;
        # a later select that cannot read the kernel log (GPUCTL_KMSG an empty file) still keeps
        # the GPU out, from the state file alone.
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            state, empty = os.path.join(tmp, "health.state"), os.path.join(tmp, "empty.log")
            open(empty, "w").close()
            script = ('$GPUCTL health --watch --interval 1 --state "$STATE" >/dev/null &\n'
                      'W=$!\n'
                      # the watch writes its state file after registering NVML's events:
                      # only events after that count (a fixed sleep raced under load)
                      'for i in $(seq 100); do [ -s "$STATE" ] && break; sleep 0.1; done\n'
                      '$NVSIM xid -i 5 48\n'
                      'for i in $(seq 50); do [ -s "$STATE" ] && grep -q 48 "$STATE" && break; '
                      'sleep 0.1; done\n'
                      'kill $W; wait $W 2>/dev/null || true\n'
                      'GPUCTL_KMSG="$EMPTY" $GPUCTL select -n 8 || echo rc=$?\n'
                      'GPUCTL_KMSG="$EMPTY" GPUCTL_HEALTH_STATE=/nonexistent $GPUCTL select -n 8\n')
            r = sim_sh("dgx-a100", script,
                       env={"STATE": state, "EMPTY": empty, "GPUCTL_HEALTH_STATE": state})
        self.assertEqual(r.rc, 0, r)
        self.assertIn("rc=%d" % EXIT_NOMATCH, r.out, r)
        self.assertIn("unhealthy: 5", r.err)
        # without the state file (and with no kernel log) nothing says GPU 5 failed
        self.assertEqual(chosen(r.out), set(range(8)))
