"""Health-aware selection end to end (issue 5, "Selection and launch"): `select` and `run` never
choose a GPU whose health verdict is FAIL (unless --allow-unhealthy) and use a WARN GPU only when
the request cannot be met without it. The verdicts are those of docs/health.md: a fence-class XID
in the kernel log (79) is FAIL, a pending row remap is WARN. Expected sets follow from the rules
and the scenario (dgx-a100: 8 GPUs), never from gpuctl's output."""
import json
import os
import tempfile

from cli_facts import Machine
from gpuctl_test import EXIT_NOMATCH, EXIT_OK, SCENARIOS, GpuctlTestCase, sim_sh

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
                      # the first check's sample is written (the file appears whole)
                      'for i in $(seq 600); do [ -s "$STATE" ] && break; sleep 0.1; done\n'
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
                      # the watcher is up (its first check written) before the XID comes
                      'for i in $(seq 600); do [ -s "$STATE" ] && break; sleep 0.1; done\n'
                      '$NVSIM xid -i 5 48\n'
                      # the XID's own line: "48" alone also matches boot ids and times
                      'for i in $(seq 600); do grep -Eq "^xid GPU-[0-9a-f-]+ 48( |$)" '
                      '"$STATE" && break; sleep 0.1; done\n'
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


def degraded_dgx1(down):
    """dgx1-v100 as a scenario file with nvlink.down = down (sim/SCENARIO.md)."""
    with open(os.path.join(SCENARIOS, "dgx1-v100.json")) as f:
        doc = json.load(f)
    doc["nvlink"]["down"] = down
    f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump(doc, f)
    f.close()
    return f.name


def indices(out):
    """The index lists of every `--format json` selection in out, in order."""
    return [[d["index"] for d in json.loads(l)["devices"]]
            for l in out.splitlines() if l.startswith("{")]


class DegradedNvlink(GpuctlTestCase):
    """Issue 13: a DGX-1V with one of GPU 2-3's two NVLinks down. GPUs 2 and 3 still compute:
    health says WARN (nvlink-down, naming the link), never FAIL; every request that needs them
    succeeds; the bandwidth model rates the pair at one link (25 GB/s, the DGX-1V paper's
    per-link figure), so 2-GPU jobs take an intact double-link pair (50) while one is free."""

    def setUp(self):
        self.path = degraded_dgx1([[2, 3, 1]])
        self.addCleanup(os.unlink, self.path)

    def test_health_warns_and_names_the_link(self):
        r = sim_sh(self.path, '$GPUCTL health --format json || echo rc=$?\n')
        doc = json.loads(r.out[:r.out.rindex("}") + 1])
        verdicts = {g["index"]: g["verdict"] for g in doc["gpus"]}
        self.assertEqual({i for i, v in verdicts.items() if v != "OK"}, {2, 3}, doc)
        for i in (2, 3):
            g = [x for x in doc["gpus"] if x["index"] == i][0]
            self.assertEqual(g["verdict"], "WARN")
            f = [x for x in g["findings"] if x["check"] == "nvlink-down"][0]
            self.assertIn("5 of 6", f["message"])
            self.assertIn("down: ", f["message"])

    def test_all_and_seven_gpus(self):
        r = sim_sh(self.path, '$GPUCTL select -n 8 --format json\n'
                   '$GPUCTL select -n 7 --format json\n')
        self.assertEqual(r.rc, EXIT_OK, r)
        sets = indices(r.out)
        self.assertEqual(sets[0], list(range(8)))
        self.assertEqual(len(sets[1]), 7)

    def test_pair_rated_at_the_links_up(self):
        r = sim_sh(self.path, '$GPUCTL topo --format json\n')
        links = {(l["a"], l["b"]): l for l in json.loads(r.out)["links"]}
        self.assertEqual(links[(2, 3)]["nvlinks"], 1)
        self.assertAlmostEqual(links[(2, 3)]["bandwidth_gbps"], 25.0)
        self.assertAlmostEqual(links[(6, 7)]["bandwidth_gbps"], 50.0)

    def test_two_gpu_jobs_avoid_the_degraded_pair(self):
        # Among 2, 3, 6, 7 the intact machine ties {2,3} and {6,7} (both NV2, one socket
        # each) and takes the lower indices; the degraded one takes {6,7}. Then four 2-GPU
        # jobs in a row: the intact double-link pairs still match every GPU ((0,3) (1,2)
        # (4,7) (5,6), reference S2), so each job gets 50 GB/s.
        intact = degraded_dgx1([])
        self.addCleanup(os.unlink, intact)
        r = sim_sh(intact, '$GPUCTL select -n 2 --only 2,3,6,7 --format json\n')
        self.assertEqual(indices(r.out), [[2, 3]], r)
        d = tempfile.TemporaryDirectory()
        self.addCleanup(d.cleanup)
        script = ('$GPUCTL select -n 2 --only 2,3,6,7 --format json\n'
                  + '$GPUCTL select -n 2 --format json --hold 60 --lease-dir %s\n' % d.name * 4
                  + '$GPUCTL release --all --lease-dir %s\n' % d.name)
        r = sim_sh(self.path, script)
        sets = indices(r.out)
        self.assertEqual(sets[0], [6, 7], r)
        double = {(0, 3), (0, 4), (1, 2), (1, 5), (4, 7), (5, 6), (6, 7)}  # 2-3 degraded
        self.assertEqual(len(sets), 5, r)
        for s in sets[1:]:
            self.assertIn(tuple(s), double, sets)
