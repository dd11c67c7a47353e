"""The simulated CUDA driver end to end: `nvsim exec` puts build/sim first on LD_LIBRARY_PATH so
programs that dlopen libcuda.so.1 see the simulated machine; nvsim-load records in its ledger
where it ran and shows up in `gpuctl list` (memory, utilisation) while it runs; SIGTERM ends
it and its registration goes; `nvsim set cuda.alloc=fail|hang`; and examples/select-device
lands on the GPU gpuctl chose, whatever CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER say.

Expected devices come from the scenario files and the documented CUDA rules, modelled here a
third time (visible() below: FASTEST_FIRST = compute capability, max SM clock, memory
descending, then PCI bus id; PCI_BUS_ID; indices; GPU- UUIDs and prefixes)."""
import json
import os
import re
import signal
import subprocess
import tempfile
import unittest

from gpuctl_test import BUILD, GPUCTL, NVSIM, GpuctlTestCase, run, scenario_gpus

LOAD = os.path.join(BUILD, "bin", "nvsim-load")
EXAMPLE = os.path.join(BUILD, "examples", "select-device")
SIMDIR = os.path.join(BUILD, "sim")
MIB = 1 << 20


gpus = scenario_gpus


def bus_key(g):
    dom, bus, rest = g["pci_bus_id"].split(":")
    dev, fn = rest.split(".")
    return (int(dom, 16), int(bus, 16), int(dev, 16), int(fn, 16))


def cuda_bus_id(g):
    dom, bus, dev, fn = bus_key(g)
    return "%04X:%02X:%02X.%X" % (dom, bus, dev, fn)


def visible(name, cvd=None, order=None):
    """UUIDs CUDA shows, by ordinal, for the forms these tests use (no MIG GPUs here)."""
    gs = [g for g in gpus(name) if not g.get("mig", {}).get("enabled")]
    if order == "PCI_BUS_ID":
        gs.sort(key=bus_key)
    else:
        def fastest(g):
            major, minor = (int(x) for x in g["compute_capability"].split("."))
            return (-major, -minor, -g.get("max_clocks_mhz", {}).get("sm", 0),
                    -g["memory_total_mib"], bus_key(g))
        gs.sort(key=fastest)
    if cvd is None:
        return [g["uuid"] for g in gs]
    out = []
    for entry in cvd.split(","):
        entry = entry.strip()
        if entry.startswith("GPU-"):
            match = [g for g in gs if g["uuid"].lower().startswith(entry.lower())]
        elif entry.isdigit() and int(entry) < len(gs):
            match = [gs[int(entry)]]
        else:
            match = []
        if len(match) != 1:
            break
        if match[0]["uuid"] in out:
            return []
        out.append(match[0]["uuid"])
    return out


def env_for(cvd, order, extra=None):
    e = dict(extra or {})
    if cvd is not None:
        e["CUDA_VISIBLE_DEVICES"] = cvd
    if order is not None:
        e["CUDA_DEVICE_ORDER"] = order
    return e


def sh(scenario, script, env=None, timeout=60):
    e = {"GPUCTL": GPUCTL, "NVSIM": NVSIM, "LOAD": LOAD, "EXAMPLE": EXAMPLE}
    e.update(env or {})
    return run([NVSIM, "exec", scenario, "--", "sh", "-ec", script], env=e, timeout=timeout)


# Starts CMD in the background with stdout in $out, waits for its first line, then runs BODY.
BACKGROUND = r"""
out=$(mktemp); {cmd} > "$out" & pid=$!
i=0; while [ ! -s "$out" ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i+1)); done
echo "=== started $pid"; cat "$out"
{body}
"""


class LibraryPathTest(GpuctlTestCase):
    def test_sim_dir_first(self):
        r = sh("workstation-mixed", 'echo "$LD_LIBRARY_PATH"', env={"LD_LIBRARY_PATH": "/opt/x"})
        self.assertOk(r)
        self.assertEqual(r.out.strip(), os.path.realpath(SIMDIR) + ":/opt/x")
        r = sh("workstation-mixed", 'echo "$LD_LIBRARY_PATH"', env={"LD_LIBRARY_PATH": ""})
        self.assertEqual(r.out.strip(), os.path.realpath(SIMDIR))

    @unittest.skipIf(os.environ.get("GPUCTL_SANITIZE") == "1",
                     "an instrumented libcuda.so.1 cannot load into an uninstrumented python")
    def test_plain_program_dlopens_the_sim(self):
        prog = ("import ctypes; c = ctypes.CDLL('libcuda.so.1'); n = ctypes.c_int(); "
                "print(c.cuInit(0), c.cuDeviceGetCount(ctypes.byref(n)), n.value)")
        r = run([NVSIM, "exec", "dgx-a100", "--", "python3", "-c", prog])
        self.assertOk(r)
        self.assertEqual(r.out.split(), ["0", "0", str(len(gpus("dgx-a100")))])

    def test_outside_nvsim_there_is_no_sim(self):
        # The library itself without a machine: no device, silently.
        r = run([LOAD, "--seconds", "0", "--fail-if-none", "--ledger", os.devnull],
                env={"LD_LIBRARY_PATH": SIMDIR, "NVSIM_STATE_DIR": "", "NVSIM_SCENARIO": ""})
        self.assertEqual(r.rc, 1, r)
        self.assertIn("no CUDA device visible", r.err)


class LedgerTest(GpuctlTestCase):
    def load(self, scenario, cvd=None, order=None, args=(), extra=None):
        with tempfile.TemporaryDirectory() as d:
            ledger = os.path.join(d, "ledger.jsonl")
            r = run([NVSIM, "exec", scenario, "--", LOAD, "--seconds", "0", "--ledger", ledger,
                     *args], env=env_for(cvd, order, extra))
            with open(ledger) as f:
                lines = [json.loads(l) for l in f]
        self.assertEqual(len(lines), 1, r)
        return r, lines[0]

    def check(self, scenario, cvd, order):
        r, line = self.load(scenario, cvd, order, extra={"RANK": "3", "WORLD_SIZE": "8"})
        self.assertOk(r)
        want = visible(scenario, cvd, order)
        by_uuid = {g["uuid"]: g for g in gpus(scenario)}
        self.assertEqual([d["uuid"] for d in line["devices"]], want, (cvd, order))
        self.assertEqual([d["ordinal"] for d in line["devices"]], list(range(len(want))))
        self.assertEqual([d["pci_bus_id"] for d in line["devices"]],
                         [cuda_bus_id(by_uuid[u]) for u in want])
        self.assertEqual(line["cuda_visible_devices"], cvd)
        self.assertEqual(line["cuda_device_order"], order)
        self.assertEqual(line["env"], {"LOCAL_RANK": None, "RANK": "3", "WORLD_SIZE": "8",
                                       "GPUCTL_SHARE_MEM": None})
        self.assertGreater(line["pid"], 0)
        self.assertGreaterEqual(line["end"], line["start"])

    def test_workstation_orders(self):
        # The A6000 (8.6, bus 41) is CUDA device 0 by default; the P1000 (6.1, bus 01) with
        # PCI_BUS_ID.
        ws = gpus("workstation-mixed")
        self.assertEqual(visible("workstation-mixed"), [ws[1]["uuid"], ws[0]["uuid"]])
        for cvd in (None, "0", "1", "1,0", " 1", "0,0", "2", "0,-1,1", ws[0]["uuid"][:8]):
            for order in (None, "PCI_BUS_ID", "FASTEST_FIRST"):
                with self.subTest(cvd=cvd, order=order):
                    self.check("workstation-mixed", cvd, order)

    def test_dgx_a100(self):
        g = gpus("dgx-a100")
        for cvd in (None, "7,0,3", "%s,%s" % (g[5]["uuid"], g[2]["uuid"]), g[6]["uuid"][:10]):
            with self.subTest(cvd=cvd):
                self.check("dgx-a100", cvd, None)

    def test_empty_means_none(self):
        r, line = self.load("workstation-mixed", "")
        self.assertOk(r)
        self.assertEqual(line["devices"], [])
        r, line = self.load("workstation-mixed", "", args=["--fail-if-none"])
        self.assertEqual(r.rc, 1, r)
        self.assertEqual(line["devices"], [])
        self.assertEqual(line["error"], "no CUDA device visible")

    def test_default_ledger_in_state_dir(self):
        r = sh("workstation-mixed",
               '"$LOAD" --seconds 0 --mem 0 >/dev/null; "$LOAD" --seconds 0 >/dev/null; '
               'cat "$NVSIM_STATE_DIR/ledger.jsonl"')
        self.assertOk(r)
        lines = [json.loads(l) for l in r.out.splitlines()]
        self.assertEqual(len(lines), 2)
        self.assertNotEqual(lines[0]["pid"], lines[1]["pid"])

    def test_concurrent_appends_do_not_interleave(self):
        r = sh("dgx-a100", 'for i in 1 2 3 4 5 6 7 8; do "$LOAD" --seconds 0 --mem 1 >/dev/null & '
               'done; wait; cat "$NVSIM_STATE_DIR/ledger.jsonl"')
        self.assertOk(r)
        lines = [json.loads(l) for l in r.out.splitlines()]
        self.assertEqual(len(lines), 8)
        self.assertEqual(len({l["pid"] for l in lines}), 8)


class RunningLoadTest(GpuctlTestCase):
    def test_visible_while_running_gone_after_sigterm(self):
        g = gpus("dgx-a100")
        cvd = "%s,%s" % (g[2]["uuid"], g[6]["uuid"])
        body = r"""
"$GPUCTL" list --format json; echo "=== procs"; ls "$NVSIM_STATE_DIR/procs"
kill -TERM $pid; set +e; wait $pid; echo "=== rc $?"; set -e
"$GPUCTL" list --format json; echo "=== procs"; ls "$NVSIM_STATE_DIR/procs"
echo "=== ledger"; cat "$NVSIM_STATE_DIR/ledger.jsonl"
"""
        script = BACKGROUND.format(cmd='"$LOAD" --mem 3GiB --util 30', body=body)
        r = sh("dgx-a100", script, env={"CUDA_VISIBLE_DEVICES": cvd})
        self.assertOk(r)
        head, during, procs1, rc, after, procs2, ledger = self._split(r.out)
        pid = int(head.split()[0])
        self.assertIn("ready pid=%d devices=2" % pid, head)
        doc = json.loads(during)
        for x in doc["gpus"]:
            mine = [p for p in x["processes"] if p["pid"] == pid]
            if x["uuid"] in (g[2]["uuid"], g[6]["uuid"]):
                self.assertEqual(len(mine), 1, x["uuid"])
                self.assertEqual(mine[0]["used_memory"], 3072 * MIB)
                self.assertEqual(x["utilization_gpu"], 30)  # dgx-a100 starts idle (0 %)
                self.assertEqual(x["memory_used"], 3072 * MIB)
            else:
                self.assertEqual(mine, [], x["uuid"])
                self.assertEqual(x["utilization_gpu"], 0)
        self.assertEqual(procs1.split(), ["%d.json" % pid])
        self.assertEqual(rc.strip(), "0")  # SIGTERM is a normal end for nvsim-load
        doc = json.loads(after)
        self.assertEqual([p for x in doc["gpus"] for p in x["processes"]], [])
        self.assertEqual(procs2.split(), [])
        line = json.loads(ledger)
        self.assertEqual(line["pid"], pid)
        self.assertEqual([d["uuid"] for d in line["devices"]], [g[2]["uuid"], g[6]["uuid"]])

    @staticmethod
    def _split(out):
        """started PID / ready line + JSON / procs / rc + JSON / procs / ledger."""
        parts = re.split(r"^=== ", out, flags=re.M)
        pid, ready, during = parts[1][len("started "):].split("\n", 2)
        rc, after = parts[3][len("rc "):].split("\n", 1)
        return (pid + " " + ready, during, parts[2][len("procs"):], rc, after,
                parts[4][len("procs"):], parts[5][len("ledger\n"):])

    def test_alloc_fail_and_hang(self):
        g = gpus("workstation-mixed")
        script = r"""
"$NVSIM" set -i 1 cuda.alloc=fail:OUT_OF_MEMORY
set +e; "$LOAD" --seconds 0; echo "=== rc $?"; set -e
"$NVSIM" set -i 1 cuda.alloc=hang
"$LOAD" --seconds 0 > "$NVSIM_STATE_DIR/out" & pid=$!
sleep 0.5; kill -0 $pid; echo "=== alive"
kill -TERM $pid; sleep 0.3; kill -0 $pid; echo "=== still alive after SIGTERM"
kill -KILL $pid; set +e; wait $pid; echo "=== rc $?"; set -e
"$NVSIM" set -i 1 cuda.alloc=ok; "$LOAD" --seconds 0 >/dev/null; echo "=== ok"
cat "$NVSIM_STATE_DIR/ledger.jsonl"
"""
        r = sh("workstation-mixed", script)
        self.assertOk(r)
        self.assertIn("=== rc 1", r.out)
        self.assertIn("CUDA_ERROR_OUT_OF_MEMORY", r.err)
        self.assertIn("=== still alive after SIGTERM", r.out)
        self.assertIn("=== rc %d" % (128 + signal.SIGKILL), r.out)
        lines = [json.loads(l) for l in r.out.split("=== ok\n")[1].splitlines()]
        self.assertEqual(len(lines), 2)  # the killed run wrote nothing
        self.assertIn("CUDA_ERROR_OUT_OF_MEMORY", lines[0]["error"])
        self.assertIn(g[1]["uuid"], lines[0]["error"])  # NVML index 1 = the A6000
        self.assertNotIn("error", lines[1])


class ExampleTest(GpuctlTestCase):
    def land(self, scenario, cvd=None, order=None, args=()):
        body = r"""
"$GPUCTL" list --format json; wait $pid; echo "=== rc $?"
"""
        script = BACKGROUND.format(cmd='"$EXAMPLE" --hold 2 --mem 100 ' + " ".join(args),
                                   body=body)
        r = sh(scenario, script, env=env_for(cvd, order))
        self.assertOk(r)
        started, rest = r.out.split("=== started ", 1)[1].split("\n", 1)
        chosen, rest = rest.split("\n", 1)
        listing, rc = rest.split("=== rc ")
        self.assertEqual(rc.strip(), "0", r)
        words = chosen.split()
        self.assertEqual((words[0], words[2]), ("chosen", "ordinal"), r)
        uuid, ordinal = words[1], int(words[3])
        want = visible(scenario, cvd, order)
        self.assertIn(uuid, want, (cvd, order))
        self.assertEqual(ordinal, want.index(uuid), (cvd, order))
        doc = json.loads(listing)
        where = [x["uuid"] for x in doc["gpus"] for p in x["processes"]
                 if p["pid"] == int(started) and p["used_memory"] == 100 * MIB]
        self.assertEqual(where, [uuid], r)
        return uuid

    def test_workstation(self):
        ws = gpus("workstation-mixed")
        for cvd in (None, "1,0", "1", ws[0]["uuid"]):
            for order in (None, "PCI_BUS_ID"):
                with self.subTest(cvd=cvd, order=order):
                    self.land("workstation-mixed", cvd, order)

    def test_leases_and_follows_the_health_rules(self):
        # The example chooses through gpuctl_alloc, as gpuctl run does: a GPU that gpuctl
        # health calls FAIL (XID 79, docs/health.md) is never chosen, the chosen GPU is leased
        # (gpuctl ps names the example's label) while it runs, and a second instance gets
        # the other GPU of the two left in its outer allocation.
        uuids = [x["uuid"] for x in gpus("dgx-a100")]
        body = r"""
"$EXAMPLE" --hold 0 --mem 10 > "$out.2" || echo "=== second rc $?"
echo "=== second"; cat "$out.2"
echo "=== ps"; "$GPUCTL" ps --format json; wait $pid; echo "=== rc $?"
"""
        script = '"$NVSIM" xid -i 0 79\n' + BACKGROUND.format(
            cmd='"$EXAMPLE" --hold 2 --mem 100', body=body)
        r = sh("dgx-a100", script, env={"CUDA_VISIBLE_DEVICES": ",".join(uuids[:3]),
                                        "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
        self.assertOk(r)
        self.assertNotIn("=== second rc", r.out, r)
        first = r.out.split("=== started ", 1)[1].splitlines()[1].split()[1]
        second = r.out.split("=== second\n", 1)[1].split()[1]
        self.assertEqual(sorted((first, second)), sorted(uuids[1:3]), r)  # never GPU 0
        doc = json.loads(r.out.split("=== ps\n", 1)[1].split("=== rc ")[0])
        held = {d["uuid"]: d["owner"]["label"] for d in doc["devices"] if d["owner"]}
        self.assertEqual(held, {first: "select-device"}, r)
        self.assertIn("=== rc 0", r.out)

    def test_dgx_a100(self):
        g = gpus("dgx-a100")
        for cvd, order in ((None, None), ("5,2,7", None), ("6,1", "PCI_BUS_ID"),
                           ("%s,%s" % (g[4]["uuid"], g[3]["uuid"][:12]), None)):
            with self.subTest(cvd=cvd, order=order):
                self.land("dgx-a100", cvd, order, args=["--min-free-mem", "1024"])


if __name__ == "__main__":
    unittest.main()
