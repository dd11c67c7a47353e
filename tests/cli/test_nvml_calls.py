"""How many NVML calls each command makes, as the simulator counts them: a figure that does
not depend on the machine, so it is asserted here (timings are only measured, in make bench).

Rules checked (issue: "NVML calls no more than one per field per device"; "static facts are
read once"): a command reads only what it prints, and no NVML function is called more often
per GPU than the number of distinct facts it answers."""
import json
import os
import tempfile
import unittest

from gpuctl_test import BUILD, GPUCTL, NVSIM, SCENARIOS, GpuctlTestCase, run

# Functions that answer several facts, one per argument value: how many calls per GPU that
# makes at most (NVML's API: clock type SM/MEM, threshold SLOWDOWN/SHUTDOWN, ECC
# corrected/uncorrected x volatile/aggregate, retired-page cause SBE/DBE).
PER_GPU_MAX = {
    "nvmlDeviceGetClockInfo": 2,
    "nvmlDeviceGetMaxClockInfo": 2,
    "nvmlDeviceGetTemperatureThreshold": 2,
    "nvmlDeviceGetTotalEccErrors": 4,
    "nvmlDeviceGetRetiredPages": 2,
    "nvmlDeviceGetViolationStatus": 2,  # power, thermal
    "nvmlDeviceGetPcieThroughput": 2,  # rx, tx
}
TELEMETRY = ("nvmlDeviceGetTemperature", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetUtilizationRates",
             "nvmlDeviceGetClockInfo", "nvmlDeviceGetEnforcedPowerLimit",
             "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetTotalEccErrors")
# Health counters that nvmlDeviceGetFieldValues answers in the same call as the other field values
HEALTH_COUNTERS = ("nvmlDeviceGetRemappedRows", "nvmlDeviceGetPcieReplayCounter",
                   "nvmlDeviceGetTotalEccErrors")
# Per-link and per-pair functions of the topology reading (counted separately).
TOPOLOGY = ("nvmlDeviceGetNvLinkState", "nvmlDeviceGetNvLinkRemoteDeviceType",
            "nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetTopologyCommonAncestor",
            "nvmlDeviceGetP2PStatus")


# The five fields of bench/pynvml_five.py, the bare pynvml script issue 29 compares with.
FIVE = "index,name,temperature.gpu,utilization.gpu,memory.used"
SCENARIO_NAMES = sorted(f[:-5] for f in os.listdir(SCENARIOS) if f.endswith(".json"))


def gpu_count(scenario):
    with open(os.path.join(SCENARIOS, scenario + ".json")) as f:
        return len(json.load(f)["gpus"])


def calls(scenario, *args, env=None):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "calls.json")
        r = run([NVSIM, "exec", "--calls-out", out, scenario, "--", GPUCTL, *args], env=env)
        assert r.rc == 0, r
        with open(out) as f:
            return json.load(f)["functions"]


class NvmlCallsTest(GpuctlTestCase):
    N = 8  # GPUs of dgx-a100

    def assertAtMostOncePerFact(self, fns, n=N):
        for fn, count in fns.items():
            if fn in TOPOLOGY:
                continue
            limit = PER_GPU_MAX.get(fn, 1) * n
            self.assertLessEqual(count, limit, f"{fn} called {count} times for {n} GPUs")

    def test_query_reads_only_the_queried_fields(self):
        fns = calls("dgx-a100", "list", "--query", "index,uuid")
        self.assertEqual(fns.get("nvmlDeviceGetUUID"), self.N)
        for fn in TELEMETRY + ("nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetSerial",
                               "nvmlDeviceGetCpuAffinity", "nvmlDeviceGetComputeRunningProcesses_v3"):
            self.assertNotIn(fn, fns)
        # count + per GPU: handle, UUID, PCI info, name; plus init/shutdown and system facts
        per_gpu = sum(c for f, c in fns.items() if f.startswith("nvmlDevice")) - fns["nvmlDeviceGetCount_v2"]
        self.assertLessEqual(per_gpu, 4 * self.N, fns)

    def test_query_of_one_health_field(self):
        fns = calls("dgx-a100", "list", "--query", "uuid,remapped_rows.pending")
        # one field-value call per GPU, with that one field in it
        self.assertEqual(fns.get("nvmlDeviceGetFieldValues"), self.N)
        for fn in HEALTH_COUNTERS:
            self.assertNotIn(fn, fns)

    def test_table_reads_what_it_shows_once(self):
        fns = calls("dgx-a100", "list")
        self.assertAtMostOncePerFact(fns)
        for fn in ("nvmlDeviceGetTemperature", "nvmlDeviceGetUtilizationRates",
                   "nvmlDeviceGetMemoryInfo_v2"):
            self.assertEqual(fns.get(fn), self.N, fn)
        # issue 29: the power draw and enforced limit come in the field values (fields 185/186
        # and 190 of nvml.h); a utilisation that was read says the GPU is not in MIG mode
        # (nvml.h: not supported on MIG-enabled GPUs); the remapped-row entries that answered
        # say the GPU remaps rows, so its architecture is not asked; without a health state
        # file there is no replay rate to budget, so no PCIe generation; and the table shows
        # no driver, NVML or CUDA version
        for fn in ("nvmlDeviceGetPowerUsage", "nvmlDeviceGetEnforcedPowerLimit",
                   "nvmlDeviceGetMigMode", "nvmlDeviceGetArchitecture",
                   "nvmlDeviceGetCurrPcieLinkGeneration", "nvmlSystemGetDriverVersion",
                   "nvmlSystemGetNVMLVersion", "nvmlSystemGetCudaDriverVersion_v2"):
            self.assertNotIn(fn, fns)
        # the HEALTH column reads the health facts (once each); the counters (PCIe replays, ECC
        # totals, remapped rows) come with the GPU's one field-value call, so their own
        # functions are not called (the fallback: test_health_counters_...)
        self.assertEqual(fns.get("nvmlDeviceGetFieldValues"), self.N)
        for fn in HEALTH_COUNTERS:
            self.assertNotIn(fn, fns)
        # and the NVLink states nvlink-down judges: the 12 links of an A100 SXM4 and the ECC
        # mode come in that same field-values call (NVML_FI_DEV_NVLINK_GET_STATE per link,
        # NVML_FI_DEV_ECC_CURRENT), so neither nvmlDeviceGetNvLinkState nor
        # nvmlDeviceGetEccMode is called; so does whether the GPU reaches NVSwitches
        # (NVML_FI_DEV_NVSWITCH_CONNECTED_LINK_COUNT), so no link's far end is asked; no pair
        # facts, and without a health state file no error counters
        # (test_select_reads_nvlink_error_counters_only_to_compare)
        for fn in ("nvmlDeviceGetNvLinkState", "nvmlDeviceGetEccMode",
                   "nvmlDeviceGetNvLinkRemoteDeviceType",
                   "nvmlDeviceGetSerial", "nvmlDeviceGetClockInfo", "nvmlDeviceGetCpuAffinity",
                   "nvmlDeviceGetNvLinkErrorCounter", "nvmlDeviceGetNvLinkRemotePciInfo_v2",
                   "nvmlDeviceGetTopologyCommonAncestor", "nvmlDeviceGetP2PStatus"):
            self.assertNotIn(fn, fns)

    def test_table_ceiling(self):
        """`gpuctl list`, the default table and its HEALTH column, on the issue's machines
        (dgx-a100, hgx-h100: 12 NVLinks or more per GPU, ECC on) and the PCIe ones: issue 29's
        12 NVML calls per GPU with the facts cache of this boot (docs/ARCHITECTURE.md), and 14
        for the first listing of a boot, which fills it (262 on dgx-a100, 32.75 per GPU, while
        each link's state and the ECC mode had calls of their own; 158 before issue 29's
        work). The calls left, one per fact the table and the verdict use, are listed in
        bench/RESULTS.md."""
        for name in ("dgx-a100", "hgx-h100", "pcie-8gpu", "synthetic-64"):
            with self.subTest(scenario=name), tempfile.TemporaryDirectory() as d:
                env = {"GPUCTL_FACTS_CACHE": os.path.join(d, "facts")}
                n = gpu_count(name)
                first = calls(name, "list", env=env)
                self.assertLessEqual(sum(first.values()), 14 * n, first)
                again = calls(name, "list", env=env)
                self.assertLessEqual(sum(again.values()), 12 * n, again)
                # what the cache holds is not asked again
                for fn in ("nvmlDeviceGetName", "nvmlDeviceGetPciInfo_v3",
                           "nvmlDeviceGetTemperatureThreshold", "nvmlDeviceGetMaxPcieLinkWidth"):
                    self.assertEqual(first.get(fn), n, (fn, first))
                    self.assertNotIn(fn, again)
                self.assertNotIn("nvmlDeviceGetNvLinkState", first)

    def test_power_without_field_answers(self):
        """A driver older than the power fields (the simulator's old variant, which stands for
        one before NVML 12.2's fields 185, 186 and 190) gets the draw and the limit of their own
        calls, once each per GPU; a current one not at all."""
        old = os.path.join(BUILD, "sim", "old", "libnvidia-ml.so.1")
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "calls.json")
            r = run([NVSIM, "exec", "--calls-out", out, "dgx-a100", "--", "sh", "-ec",
                     'GPUCTL_NVML_LIBRARY="$OLD" "$GPUCTL" list >/dev/null'],
                    env={"GPUCTL": GPUCTL, "OLD": old})
            self.assertEqual(r.rc, 0, r)
            with open(out) as f:
                fns = json.load(f)["functions"]
        for fn in ("nvmlDeviceGetPowerUsage", "nvmlDeviceGetEnforcedPowerLimit"):
            self.assertEqual(fns.get(fn), self.N, fn)
        fns = calls("dgx-a100", "list")
        for fn in ("nvmlDeviceGetPowerUsage", "nvmlDeviceGetEnforcedPowerLimit"):
            self.assertNotIn(fn, fns)

    def test_link_states_without_field_answers(self):
        """A driver that counts the links (field 91) but answers no link's state in the field
        values (one older than field 165 says NOT_SUPPORTED in each entry; here nvsim fails
        nvmlDeviceGetNvLinkState, which the simulator's field 165 answers as) must not look
        like a GPU without NVLinks: the walk asks nvmlDeviceGetNvLinkState per link again."""
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "calls.json")
            script = ('"$NVSIM" fail nvmlDeviceGetNvLinkState NOT_SUPPORTED -i 3\n'
                      '"$GPUCTL" list >/dev/null\n')
            r = run([NVSIM, "exec", "--calls-out", out, "dgx-a100", "--", "sh", "-ec", script],
                    env={"GPUCTL": GPUCTL, "NVSIM": NVSIM})
            self.assertEqual(r.rc, 0, r)
            with open(out) as f:
                fns = json.load(f)["functions"]
        # GPU 3 only: every link number NVML allows (none answers), the others none
        self.assertEqual(fns.get("nvmlDeviceGetNvLinkState"), 36, fns)

    def test_query_of_five_fields_ceiling(self):
        """`gpuctl list --query` of the five fields bench/pynvml_five.py reads with pynvml
        (index, name, temperature.gpu, utilization.gpu, memory.used): at most 6 NVML calls per
        GPU on every scenario (issue 29): per GPU the handle and the four calls the fields
        need, no UUID, PCI or name of the identity (GPUCTL_SNAP_ONLY_FIELDS), plus init,
        count and shutdown (no system fact: no driver_version column)."""
        for name in SCENARIO_NAMES:
            with self.subTest(scenario=name):
                fns = calls(name, "list", "--query", FIVE)
                n = gpu_count(name)
                self.assertLessEqual(sum(fns.values()), 5 * n + 3, fns)
                for fn in ("nvmlDeviceGetUUID", "nvmlDeviceGetPciInfo_v3",
                           "nvmlSystemGetDriverVersion"):
                    self.assertNotIn(fn, fns)
        # the driver_version column reads it
        fns = calls("dgx-a100", "list", "--query", "index,driver_version")
        self.assertEqual(fns.get("nvmlSystemGetDriverVersion"), 1)
        # -i needs the identity (ids by UUID or bus id), and so does the JSON
        for args in (("-i", "0,1"), ("--format", "json")):
            with self.subTest(args=args):
                fns = calls("dgx-a100", "list", "--query", FIVE, *args)
                self.assertEqual(fns.get("nvmlDeviceGetUUID"), self.N)
                self.assertEqual(fns.get("nvmlDeviceGetPciInfo_v3"), self.N)

    def test_json_reads_every_fact_once(self):
        fns = calls("dgx-a100", "list", "--format", "json")
        self.assertAtMostOncePerFact(fns)
        self.assertEqual(fns.get("nvmlDeviceGetSerial"), self.N)
        self.assertEqual(fns.get("nvmlDeviceGetFieldValues"), self.N)
        for fn in HEALTH_COUNTERS:
            self.assertNotIn(fn, fns)

    def with_and_without_field_values(self, scenario, setup, keys):
        """`list --format json` on scenario after `nvsim set SETUP`, then again with
        nvmlDeviceGetFieldValues failing as a whole: (each run's keys of each GPU, the NVML
        calls of both runs)."""
        script = (f'"$NVSIM" set {setup}\n"$GPUCTL" list --format json\n'
                  '"$NVSIM" fail nvmlDeviceGetFieldValues NOT_SUPPORTED\n'
                  '"$GPUCTL" list --format json\n')
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "calls.json")
            r = run([NVSIM, "exec", "--calls-out", out, scenario, "--", "sh", "-ec", script],
                    env={"GPUCTL": GPUCTL, "NVSIM": NVSIM})
            self.assertEqual(r.rc, 0, r)
            with open(out) as f:
                fns = json.load(f)["functions"]
        dec = json.JSONDecoder()
        first, end = dec.raw_decode(r.out)
        second, _ = dec.raw_decode(r.out[end:].lstrip())
        return [[{k: g[k] for k in keys} for g in doc["gpus"]] for doc in (first, second)], fns

    def test_health_counters_without_field_values(self):
        """A driver that cannot answer the field values (here: nvmlDeviceGetFieldValues fails
        as a whole) gets the same counters from their own functions, once each."""
        keys = ("pcie_replay_counter", "ecc_volatile_corrected", "ecc_volatile_uncorrected",
                "ecc_aggregate_corrected", "ecc_aggregate_uncorrected",
                "remapped_rows_correctable", "remapped_rows_uncorrectable",
                "remapped_rows_pending", "remapped_rows_failure")
        got, fns = self.with_and_without_field_values(
            "dgx-a100", "-i 2 ecc.volatile.corrected=5 remap.uncorrected=2 remap.pending=1 "
            "pcie.replay=9", keys)
        self.assertEqual(got[0], got[1])
        self.assertEqual(got[0][2], {**got[0][0], "pcie_replay_counter": 9,
                                     "ecc_volatile_corrected": 5,
                                     "remapped_rows_uncorrectable": 2,
                                     "remapped_rows_pending": True})
        # the second run's: one each per GPU (four ECC totals)
        self.assertEqual(fns.get("nvmlDeviceGetRemappedRows"), self.N)
        self.assertEqual(fns.get("nvmlDeviceGetPcieReplayCounter"), self.N)
        self.assertEqual(fns.get("nvmlDeviceGetTotalEccErrors"), 4 * self.N)

    def test_retired_pages_in_the_field_values(self):
        """Before Ampere a GPU retires pages (sim/README.md; NVIDIA's "GPU Memory Error
        Management"): on dgx1-v100 the retired-page counts and pending state come in the field
        values (nvml.h fields 29-31), so neither their own functions nor the architecture are
        called; a driver whose field values do not answer gets the same values of their own
        calls (one per cause, one pending state)."""
        first = calls("dgx1-v100", "list")
        for fn in ("nvmlDeviceGetRetiredPages", "nvmlDeviceGetRetiredPagesPendingStatus",
                   "nvmlDeviceGetArchitecture", "nvmlDeviceGetRemappedRows"):
            self.assertNotIn(fn, first)
        got, fns = self.with_and_without_field_values(
            "dgx1-v100", "-i 5 retired.sbe=3 retired.dbe=1 retired.pending=1",
            ("retired_pages_sbe", "retired_pages_dbe", "retired_pages_pending"))
        self.assertEqual(got[0], got[1])
        self.assertEqual(got[0][5], {"retired_pages_sbe": 3, "retired_pages_dbe": 1,
                                     "retired_pages_pending": True})
        self.assertEqual(got[0][0], {"retired_pages_sbe": 0, "retired_pages_dbe": 0,
                                     "retired_pages_pending": False})
        # the second run's own calls: two causes and the pending state per GPU
        self.assertEqual(fns.get("nvmlDeviceGetRetiredPages"), 2 * self.N)
        self.assertEqual(fns.get("nvmlDeviceGetRetiredPagesPendingStatus"), self.N)

    def test_topo_reads_no_telemetry(self):
        fns = calls("dgx-a100", "topo")
        self.assertAtMostOncePerFact(fns)
        for fn in TELEMETRY:
            self.assertNotIn(fn, fns)
        pairs = self.N * (self.N - 1) // 2
        self.assertLessEqual(fns.get("nvmlDeviceGetTopologyCommonAncestor", 0), pairs)
        self.assertLessEqual(fns.get("nvmlDeviceGetP2PStatus", 0), pairs)
        # NVLink: each of the 12 links per GPU read once (state, remote type), stopping at
        # the first link past the GPU's last.
        self.assertLessEqual(fns.get("nvmlDeviceGetNvLinkState", 0), self.N * 13)

    def test_select_reads_nvlink_error_counters_only_to_compare(self):
        # The NVLink error counters (and the PCIe generation) serve rate checks: their rate
        # since the sample that `gpuctl health --watch` recorded in its state file. Without that file select reads
        # none; with it, all four (replay, recovery, CRC flit, CRC data) of each active link:
        # 12 NVLinks per A100 SXM4, 8 GPUs.
        # Every command that shows verdicts reads the same (docs/health.md, "One verdict").
        for argv in (("select", "-n", "1"), ("list",), ("list", "--format", "json"), ("ps",)):
            with self.subTest(argv=argv), tempfile.TemporaryDirectory() as d:
                state = os.path.join(d, "gpuctl-health.state")
                fns = calls("dgx-a100", *argv, env={"GPUCTL_HEALTH_STATE": state})
                self.assertNotIn("nvmlDeviceGetNvLinkErrorCounter", fns)
                # nor the PCIe generation, which only budgets the replay rate (issue 29), but
                # for the JSON, which shows it
                if argv[-1] != "json":
                    self.assertNotIn("nvmlDeviceGetCurrPcieLinkGeneration", fns)
                self.assertAtMostOncePerFact(fns)
                open(state, "w").close()
                fns = calls("dgx-a100", *argv, env={"GPUCTL_HEALTH_STATE": state})
                self.assertEqual(fns.get("nvmlDeviceGetNvLinkErrorCounter"), 4 * 12 * self.N)
                self.assertEqual(fns.get("nvmlDeviceGetCurrPcieLinkGeneration"), self.N)

    def test_info_reads_modes_only(self):
        fns = calls("dgx-a100", "info")
        self.assertAtMostOncePerFact(fns)
        self.assertEqual(fns.get("nvmlDeviceGetPersistenceMode"), self.N)
        self.assertEqual(fns.get("nvmlDeviceGetMigMode"), self.N)
        for fn in TELEMETRY + TOPOLOGY:
            self.assertNotIn(fn, fns)


if __name__ == "__main__":
    unittest.main()
