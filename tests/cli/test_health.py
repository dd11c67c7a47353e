"""`gpuctl health` end to end: conditions injected with nvsim on fitting scenarios, the verdict,
the finding (check id, severity, message numbers, action), the exit status, the JSON shape, bad
input, and --watch (findings as they come, the state file, a hung NVML call).

Expected values come from the issue's rules and DCGM's thresholds (docs/health.md): volatile DBE
> 0 FAIL, remap failure FAIL, pending remap/retirement WARN (FAIL with --strict), 63 retired pages
FAIL, 512 uncorrectable remaps WARN, within 5 C of the slowdown threshold WARN (the threshold is
the scenario's temperature_slowdown_c), HW slowdown/thermal/power-brake bits WARN, PCIe width
below its maximum WARN, fence-class XIDs FAIL, application-class XIDs and 999 WARN; exit 0 / 10 /
20 for OK / WARN / FAIL (docs/gpuctl.1). Parts without a signal (Volta: no row remapping;
GeForce: no ECC) must not raise anything."""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
import zlib

from gpuctl_test import (EXIT_FAILURE, EXIT_NODRIVER, EXIT_OK, EXIT_USAGE, GPUCTL, NVSIM,
                         SCENARIOS, SIMLIB, GpuctlTestCase, gpuctl, run, sim, sim_sh)

EXIT_WARN = 10
EXIT_FAIL = 20


def scenario(name):
    with open(os.path.join(SCENARIOS, name + ".json")) as f:
        return json.load(f)


def gpu_fact(name, i, key):
    """A GPU's scenario fact: its own entry, else the scenario's defaults."""
    d = scenario(name)
    g = d["gpus"][i]
    return g[key] if key in g else d["defaults"][key]


def driver_bus(name, i):
    """The bus id as the NVIDIA driver prints it in an XID line: 0000:07:00."""
    bus = gpu_fact(name, i, "pci_bus_id")  # 00000000:07:00.0
    dom, b, rest = bus.split(":")
    return "%s:%s:%s" % (dom[-4:], b, rest.split(".")[0])


class HealthCase(GpuctlTestCase):
    def setUp(self):
        # a state file of this test's own: a --watch of one test must not feed another
        d = tempfile.TemporaryDirectory()
        self.addCleanup(d.cleanup)
        self.state = os.path.join(d.name, "health.state")
        old = os.environ.get("GPUCTL_HEALTH_STATE")
        os.environ["GPUCTL_HEALTH_STATE"] = self.state
        self.addCleanup(os.environ.__setitem__, "GPUCTL_HEALTH_STATE", old or "")

    def health_json(self, name, script, *args, rc=None):
        r = sim_sh(name, script + '\n"$GPUCTL" health --format json %s' % " ".join(args))
        if rc is not None:
            self.assertEqual(r.rc, rc, r)
        self.assertEqual(r.err, "", r)
        return r, r.json()

    def finding(self, doc, gpu, check):
        g = [x for x in doc["gpus"] if x["index"] == gpu]
        self.assertEqual(len(g), 1, doc)
        hits = [f for f in g[0]["findings"] if f["check"] == check]
        self.assertEqual(len(hits), 1, doc)
        return g[0], hits[0]

    def only_finding(self, doc, gpu, check, severity):
        """GPU gpu has exactly this one finding; every other GPU is OK without findings."""
        for g in doc["gpus"]:
            if g["index"] == gpu:
                self.assertEqual([f["check"] for f in g["findings"]], [check], doc)
                self.assertEqual(g["findings"][0]["severity"], severity, doc)
                self.assertEqual(g["verdict"], severity, doc)
            else:
                self.assertEqual(g["findings"], [], doc)
                self.assertEqual(g["verdict"], "OK", doc)
        return self.finding(doc, gpu, check)[1]


class TestHealthy(HealthCase):
    def test_every_scenario_is_healthy_as_shipped(self):
        for name in ("dgx-a100", "dgx1-v100", "rtx4090-8", "hgx-h100", "a100-mig",
                     "pcie-nvlink-bridged", "pcie-8gpu", "workstation-mixed"):
            with self.subTest(name):
                r = sim(name, "health", "--format", "json")
                self.assertEqual(r.rc, EXIT_OK, r)
                doc = r.json()
                n = len(scenario(name)["gpus"])
                self.assertEqual(doc["verdict"], "OK")
                self.assertEqual(doc["summary"], {"ok": n, "warn": 0, "fail": 0})
                self.assertEqual(len(doc["gpus"]), n)

    def test_table(self):
        r = sim("dgx-a100", "health")
        self.assertEqual(r.rc, EXIT_OK, r)
        self.assertEqual(r.err, "")
        lines = r.out.splitlines()
        self.assertEqual(len(lines), 9, r)
        self.assertTrue(lines[0].startswith("GPU 0  GPU-"), r)
        self.assertIn(gpu_fact("dgx-a100", 0, "pci_bus_id"), lines[0])
        self.assertTrue(lines[0].endswith("  OK"), r)
        self.assertEqual(lines[-1], "8 GPUs checked: 8 OK, 0 WARN, 0 FAIL")

    def test_json_shape(self):
        r = sim("dgx-a100", "health", "--format", "json", "-i", "1,0")
        self.assertEqual(r.rc, EXIT_OK, r)
        doc = r.json()
        self.assertEqual(set(doc), {"verdict", "strict", "kernel_log", "state_file", "summary",
                                    "gpus", "probe"})
        self.assertIsNone(doc["state_file"])  # no --watch ran: no state file
        self.assertIs(doc["strict"], False)
        self.assertTrue(doc["kernel_log"].endswith("/kmsg"), doc)  # nvsim's GPUCTL_KMSG
        self.assertEqual([g["index"] for g in doc["gpus"]], [1, 0])
        g = doc["gpus"][0]
        self.assertEqual(set(g), {"index", "uuid", "pci_bus_id", "name", "lost", "verdict",
                                  "findings", "probe"})
        self.assertEqual(g["uuid"], gpu_fact("dgx-a100", 1, "uuid"))
        self.assertEqual(g["pci_bus_id"], gpu_fact("dgx-a100", 1, "pci_bus_id"))
        self.assertIs(g["lost"], False)


class TestMemory(HealthCase):
    def test_volatile_dbe_fails(self):
        r, doc = self.health_json("dgx-a100", '"$NVSIM" set -i 2 ecc.volatile.uncorrected=3',
                                  rc=EXIT_FAIL)
        f = self.only_finding(doc, 2, "ecc-dbe", "FAIL")
        self.assertIn("3 uncorrectable", f["message"])
        self.assertIn("reset", f["action"])
        self.assertIsNone(f["xid"])
        self.assertEqual(doc["summary"], {"ok": 7, "warn": 0, "fail": 1})

    def test_corrected_errors_are_fine(self):
        self.health_json("dgx-a100", '"$NVSIM" set -i 2 ecc.volatile.corrected=1000 '
                         'ecc.aggregate.corrected=5000', rc=EXIT_OK)

    def test_remap_failure_fails(self):
        _, doc = self.health_json("dgx-a100", '"$NVSIM" set -i 4 remap.failure=1', rc=EXIT_FAIL)
        self.only_finding(doc, 4, "remap-failure", "FAIL")

    def test_remap_pending_warns_and_strict_fails(self):
        _, doc = self.health_json("dgx-a100", '"$NVSIM" set -i 5 remap.pending=1', rc=EXIT_WARN)
        f = self.only_finding(doc, 5, "remap-pending", "WARN")
        self.assertIn("next GPU reset", f["message"])
        self.assertIn("--strict", f["action"])
        _, doc = self.health_json("dgx-a100", '"$NVSIM" set -i 5 remap.pending=1', "--strict",
                                  rc=EXIT_FAIL)
        self.assertIs(doc["strict"], True)
        self.only_finding(doc, 5, "remap-pending", "FAIL")

    def test_uncorrectable_remaps_boundary(self):
        self.health_json("dgx-a100", '"$NVSIM" set -i 1 remap.uncorrected=511', rc=EXIT_OK)
        _, doc = self.health_json("dgx-a100", '"$NVSIM" set -i 1 remap.uncorrected=512',
                                  rc=EXIT_WARN)
        f = self.only_finding(doc, 1, "remap-uncorrectable", "WARN")
        self.assertIn("512", f["message"])

    def test_volta_retired_pages(self):
        # DCGM: 63 or more retired pages (single- plus double-bit) FAIL
        self.health_json("dgx1-v100", '"$NVSIM" set -i 3 retired.sbe=60 retired.dbe=2',
                         rc=EXIT_OK)
        _, doc = self.health_json("dgx1-v100", '"$NVSIM" set -i 3 retired.sbe=60 retired.dbe=3',
                                  rc=EXIT_FAIL)
        f = self.only_finding(doc, 3, "retired-pages", "FAIL")
        self.assertIn("63 retired pages", f["message"])

    def test_volta_pending_retirement_warns(self):
        _, doc = self.health_json("dgx1-v100", '"$NVSIM" set -i 0 retired.pending=1',
                                  rc=EXIT_WARN)
        self.only_finding(doc, 0, "retired-pending", "WARN")

    def test_volta_has_no_row_remapping(self):
        # remap state injected on a V100 is not something NVML reports there: no alarm
        self.health_json("dgx1-v100", '"$NVSIM" set -i 1 remap.failure=1 remap.pending=1 '
                         'remap.uncorrected=600', rc=EXIT_OK)

    def test_geforce_has_no_ecc(self):
        # ECC counters and retired pages on a GeForce are NOT_SUPPORTED: no alarm
        self.health_json("rtx4090-8", '"$NVSIM" set -i 1 ecc.volatile.uncorrected=5 '
                         'retired.pending=1 remap.failure=1', rc=EXIT_OK)


class TestThermalAndLinks(HealthCase):
    def test_temperature_near_slowdown(self):
        slow = gpu_fact("dgx-a100", 0, "temperature_slowdown_c")
        self.health_json("dgx-a100", '"$NVSIM" set -i 0 temperature=%d' % (slow - 6),
                         rc=EXIT_OK)
        _, doc = self.health_json("dgx-a100", '"$NVSIM" set -i 0 temperature=%d' % (slow - 5),
                                  rc=EXIT_WARN)
        f = self.only_finding(doc, 0, "temperature", "WARN")
        self.assertIn("%d C" % (slow - 5), f["message"])
        self.assertIn("%d C" % slow, f["message"])

    def test_geforce_temperature(self):
        slow = gpu_fact("rtx4090-8", 0, "temperature_slowdown_c")
        _, doc = self.health_json("rtx4090-8", '"$NVSIM" set -i 7 temperature=%d' % slow,
                                  rc=EXIT_WARN)
        self.only_finding(doc, 7, "temperature", "WARN")

    def test_clock_event_reasons(self):
        # idle, application clocks, SW power cap, SW thermal: benign
        self.health_json("dgx-a100", '"$NVSIM" set -i 6 clocks_event_reasons=0x27', rc=EXIT_OK)
        for bits, text in ((0x8, "HW slowdown"), (0x40, "HW thermal slowdown"),
                           (0x80, "HW power brake")):
            with self.subTest(bits=bits):
                _, doc = self.health_json(
                    "dgx-a100", '"$NVSIM" set -i 6 clocks_event_reasons=%#x' % bits,
                    rc=EXIT_WARN)
                f = self.only_finding(doc, 6, "clocks-event", "WARN")
                self.assertIn(text, f["message"])

    def test_pcie_width(self):
        _, doc = self.health_json("hgx-h100", '"$NVSIM" set -i 2 pcie.width=8', rc=EXIT_WARN)
        f = self.only_finding(doc, 2, "pcie-width", "WARN")
        self.assertIn("x8", f["message"])
        self.assertIn("x16", f["message"])

    def test_nvlink_down_on_nvswitch(self):
        # WARN, not FAIL: the GPU computes; it lost bandwidth, which the model rates (issue 13)
        _, doc = self.health_json("dgx-a100", '"$NVSIM" set -i 3 nvlink.5=down', rc=EXIT_WARN)
        f = self.only_finding(doc, 3, "nvlink-down", "WARN")
        self.assertIn("11 of 12", f["message"])
        self.assertIn("down: 5", f["message"])

    def test_nvlink_down_between_gpus(self):
        # DGX-1: a link down at GPU 0 is down at its peer's end too: both lose a link
        _, doc = self.health_json("dgx1-v100", '"$NVSIM" set -i 0 nvlink.0=down', rc=EXIT_WARN)
        failed = [g["index"] for g in doc["gpus"] if g["verdict"] == "WARN"]
        self.assertEqual(len(failed), 2, doc)
        self.assertIn(0, failed)
        for i in failed:
            g, f = self.finding(doc, i, "nvlink-down")
            self.assertIn("5 of 6", f["message"])

    def test_mig_links_are_no_alarm(self):
        # a100-mig: MIG-enabled GPUs report their links inactive, as does their peer's end
        self.health_json("a100-mig", "true", rc=EXIT_OK)


class TestLostAndErrors(HealthCase):
    def test_lost_gpu(self):
        _, doc = self.health_json("dgx-a100", '"$NVSIM" set -i 6 lost=1', rc=EXIT_FAIL)
        f = self.only_finding(doc, 6, "lost", "FAIL")
        self.assertIn("lost", f["message"])
        self.assertIs(doc["gpus"][6]["lost"], True)

    def test_recovery_action(self):
        # DCGM: reset / reboot / drain-and-reset FAIL, drain P2P WARN; 0 and unknown field: none
        # NVML 615 added bus reset (6) and system reboot (7): a reset and a reboot, FAIL
        for value, severity, text in ((1, "FAIL", "GPU reset"), (2, "FAIL", "node reboot"),
                                      (4, "FAIL", "reset"), (3, "WARN", "peer-to-peer"),
                                      (5, "WARN", "IMEX"), (6, "FAIL", "bus reset"),
                                      (7, "FAIL", "system reboot")):
            with self.subTest(value=value):
                _, doc = self.health_json("hgx-h100", '"$NVSIM" set -i 5 recovery_action=%d'
                                          % value, rc=EXIT_FAIL if severity == "FAIL"
                                          else EXIT_WARN)
                f = self.only_finding(doc, 5, "recovery-action", severity)
                self.assertIn(text, f["message"])
        self.health_json("hgx-h100", '"$NVSIM" set -i 5 recovery_action=0', rc=EXIT_OK)

    def test_nvml_errors_on_one_device(self):
        # a health fact NVML cannot read: WARN, naming the fact and the call (docs/health.md)
        r, doc = self.health_json("dgx-a100",
                                  '"$NVSIM" fail nvmlDeviceGetTemperature UNKNOWN -i 2',
                                  rc=EXIT_WARN)
        f = self.only_finding(doc, 2, "nvml", "WARN")
        self.assertIn("temperature_gpu: nvmlDeviceGetTemperature: Unknown Error", f["message"])
        # nothing NVML can say of the GPU (its handle fails): FAIL
        r, doc = self.health_json("dgx-a100",
                                  '"$NVSIM" fail nvmlDeviceGetHandleByIndex_v2 UNKNOWN -i 2',
                                  rc=EXIT_FAIL)
        f = self.only_finding(doc, 2, "nvml", "FAIL")
        self.assertIn("nvmlDeviceGetHandleByIndex_v2: Unknown Error", f["message"])

    def test_minimal_nvml(self):
        # an NVML with only the identity calls: nothing to check but the kernel log, no alarm
        lib = os.path.join(os.path.dirname(GPUCTL), "..", "sim", "minimal", "libnvidia-ml.so.1")
        r = sim_sh("dgx-a100", 'GPUCTL_NVML_LIBRARY=%s "$GPUCTL" health --format json' % lib)
        self.assertEqual(r.rc, EXIT_OK, r)
        r = sim_sh("dgx-a100", '"$NVSIM" xid -i 7 95\n'
                   'GPUCTL_NVML_LIBRARY=%s "$GPUCTL" health --format json' % lib)
        self.assertEqual(r.rc, EXIT_FAIL, r)
        self.only_finding(r.json(), 7, "xid", "FAIL")

    def test_not_supported_everywhere_is_no_alarm(self):
        self.health_json("dgx-a100", '"$NVSIM" fail "*" NOT_SUPPORTED', rc=EXIT_OK)


class TestXid(HealthCase):
    def xid(self, gpu, code):
        return '"$NVSIM" xid -i %d %d' % (gpu, code)

    def test_fence_xid_fails(self):
        # NVIDIA's XID catalog: RESET_GPU (156 resource retirement event among them),
        # RESTART_BM; 167/169/171 by meaning (docs/health.md)
        for code in (48, 79, 95, 109, 119, 156, 158, 167, 169, 171):
            with self.subTest(code=code):
                _, doc = self.health_json("dgx-a100", self.xid(1, code), rc=EXIT_FAIL)
                f = self.only_finding(doc, 1, "xid", "FAIL")
                self.assertEqual(f["xid"], code)
                self.assertEqual(f["xid_class"], "fence")

    def test_application_xid_warns(self):
        for code in (13, 31, 43, 94):
            with self.subTest(code=code):
                _, doc = self.health_json("dgx-a100", self.xid(0, code), rc=EXIT_WARN)
                f = self.only_finding(doc, 0, "xid", "WARN")
                self.assertEqual(f["xid_class"], "application")
                self.assertIn("restart the job", f["action"])

    def test_unknown_xids_warn(self):
        for code in (999, 201):
            with self.subTest(code=code):
                _, doc = self.health_json("dgx-a100", self.xid(3, code), rc=EXIT_WARN)
                f = self.only_finding(doc, 3, "xid", "WARN")
                self.assertEqual(f["xid_class"], "unknown")

    def test_unknown_xid_advice_never_says_fine(self):
        for code in (201, 165):
            with self.subTest(code=code):
                _, doc = self.health_json("dgx-a100", self.xid(3, code), rc=EXIT_WARN)
                f = self.only_finding(doc, 3, "xid", "WARN")
                self.assertEqual(f["xid_class"], "unknown")
                self.assertNotIn("usable", f["action"])
                self.assertIn("before trusting the GPU", f["action"])

    def test_nvlink5_xid_graded_by_status(self):
        # The catalog's XID 144-150 decode: RLW_RXPIPE status 0x8 is IGNORE (a production line
        # quoted in leptonai/gpud's tests), RLW_REMAP 0x40 is RESET_GPU, RLW_SRC_TRACK 0x8 is
        # XID_154_EVAL; without a status (no text) the XID is "check", never a blind FAIL.
        cases = (("RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000001 "
                  "0x00000000 0x00100000 0x00000004)", EXIT_OK, "OK", "info"),
                 ("RLW_REMAP Fatal XC0 i0 Link 05 (0x00000082 0x00000040 0x00000000 0x00000000 "
                  "0x00000000 0x00000000)", EXIT_FAIL, "FAIL", "fence"),
                 ("RLW_SRC_TRACK Nonfatal XC1 i0 Link 12 (0x040988e2 0x00000008 0x00000000 "
                  "0x00000000 0x00000000 0x00000000)", EXIT_WARN, "WARN", "check"),
                 ("", EXIT_WARN, "WARN", "check"))
        for text, rc, severity, cls in cases:
            with self.subTest(text=text):
                script = '"$NVSIM" xid -i 2 145' + (" '%s'" % text if text else "")
                _, doc = self.health_json("gb200-node", script, rc=rc)
                f = self.only_finding(doc, 2, "xid", severity)
                self.assertEqual((f["xid"], f["xid_class"]), (145, cls))

    def test_info_xid_is_ok(self):
        _, doc = self.health_json("dgx-a100", self.xid(3, 63), rc=EXIT_OK)
        f = self.only_finding(doc, 3, "xid", "OK")
        self.assertEqual(f["xid_class"], "info")

    def test_repeated_xid_counts(self):
        _, doc = self.health_json("dgx-a100", "\n".join(self.xid(2, 13) for _ in range(3)),
                                  rc=EXIT_WARN)
        f = self.only_finding(doc, 2, "xid", "WARN")
        self.assertIn("3 times", f["message"])

    def test_kmsg_file_forms(self):
        name = "dgx1-v100"
        with tempfile.NamedTemporaryFile("w", suffix=".log") as log:
            log.write("[   12.000001] NVRM: Xid (PCI:%s): 79, pid=1, GPU has fallen off the bus.\n"
                      % driver_bus(name, 4))
            log.write("garbage line\nNVRM: Xid (PCI:%s): banana\n" % driver_bus(name, 4))
            log.write("NVRM: Xid (PCI:0000:ee:00): 79, no GPU of this machine\n")
            log.flush()
            r = sim(name, "health", "--format", "json", "--kmsg", log.name)
            self.assertEqual(r.rc, EXIT_FAIL, r)
            doc = r.json()
            self.assertEqual(doc["kernel_log"], log.name)
            f = self.only_finding(doc, 4, "xid", "FAIL")
            self.assertEqual(f["xid"], 79)
            # GPUCTL_KMSG does the same
            r = sim(name, "health", env={"GPUCTL_KMSG": log.name})
            self.assertEqual(r.rc, EXIT_OK, r)  # nvsim exec sets its own GPUCTL_KMSG
            r = sim_sh(name, 'GPUCTL_KMSG=%s "$GPUCTL" health' % log.name)
            self.assertEqual(r.rc, EXIT_FAIL, r)

    def test_driver_reload_forgets(self):
        name = "dgx-a100"
        with tempfile.NamedTemporaryFile("w") as log:
            log.write("NVRM: Xid (PCI:%s): 79, before\n" % driver_bus(name, 0))
            log.write("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15\n")
            log.flush()
            r = sim(name, "health", "--kmsg", log.name)
            self.assertEqual(r.rc, EXIT_OK, r)

    def test_nvsim_xid_line(self):
        r = sim_sh("dgx-a100", '"$NVSIM" xid -i 1 79 "GPU has fallen off the bus."\n'
                   'cat "$NVSIM_STATE_DIR/kmsg"')
        self.assertEqual(r.rc, 0, r)
        self.assertRegex(r.out, r"^\d+,\d+,\d+,-;NVRM: Xid \(PCI:%s\): 79, pid=\d+, "
                         r"name=nvsim, GPU has fallen off the bus\.\n$" % driver_bus("dgx-a100", 1))

    def test_nvsim_xid_usage(self):
        for script, needle in (('"$NVSIM" xid 79', "usage"),
                               ('"$NVSIM" xid -i 1 0', "XID code"),
                               ('"$NVSIM" xid -i 1 abc', "abc"),
                               ('"$NVSIM" xid -i 99 79', "99")):
            with self.subTest(script=script):
                r = sim_sh("dgx-a100", script)
                self.assertOneLineError(r, EXIT_USAGE, needle)


class TestProbe(HealthCase):
    def test_probe_all_ok(self):
        _, doc = self.health_json("dgx-a100", "true", "--probe", rc=EXIT_OK)
        self.assertEqual(doc["summary"], {"ok": 8, "warn": 0, "fail": 0})

    def test_probe_hang_and_failures(self):
        # a hung allocation is killed at the timeout: FAIL, and gpuctl returns (probed alone,
        # so the short timeout never races the healthy probes of a loaded machine)
        _, doc = self.health_json("dgx-a100", '"$NVSIM" set -i 1 cuda.alloc=hang', "--probe",
                                  "--probe-timeout", "2", "-i", "1", rc=EXIT_FAIL)
        _, f = self.finding(doc, 1, "cuda-probe")
        self.assertEqual(f["severity"], "FAIL")
        self.assertIn("hung", f["message"])
        self.assertIn("2 s", f["message"])
        self.assertEqual(doc["summary"], {"ok": 0, "warn": 0, "fail": 1})
        _, doc = self.health_json(
            "dgx-a100", '"$NVSIM" set -i 2 cuda.alloc=fail:OUT_OF_MEMORY\n'
            '"$NVSIM" set -i 3 cuda.alloc=fail', "--probe", "-i", "0,2,3", rc=EXIT_FAIL)
        self.assertEqual(doc["gpus"][0]["verdict"], "OK", doc)
        _, f = self.finding(doc, 2, "cuda-probe")
        self.assertEqual(f["severity"], "FAIL")
        self.assertIn("cuMemAlloc", f["message"])
        self.assertIn("CUDA_ERROR_OUT_OF_MEMORY", f["message"])
        _, f = self.finding(doc, 3, "cuda-probe")
        self.assertIn("CUDA_ERROR_UNKNOWN", f["message"])
        self.assertEqual(doc["summary"], {"ok": 1, "warn": 0, "fail": 2})

    def test_probe_mig(self):
        # a100-mig: GPUs 0 and 1 in MIG mode with instances, GPU 2 in MIG mode without any,
        # GPU 3 whole. CUDA uses a MIG-mode GPU only through its MIG devices (MIG user guide,
        # "CUDA device enumeration"), so each is probed through them: no false FAIL, and a GPU
        # with MIG on and no instance is said to be so, as an OK finding.
        r, doc = self.health_json("a100-mig", "true", "--probe", rc=EXIT_OK)
        self.assertEqual(doc["summary"], {"ok": 4, "warn": 0, "fail": 0})
        d = scenario("a100-mig")
        for i in (0, 1, 3):
            g, f = self.finding(doc, i, "cuda-probe")
            self.assertEqual((g["verdict"], f["severity"]), ("OK", "OK"))
            if i < 3:  # one probe per MIG device, each its own
                self.assertIn("on each of its %d MIG devices (cuInit, only that MIG device "
                              "visible" % len(d["gpus"][i]["mig"]["instances"]), f["message"])
        g, f = self.finding(doc, 2, "cuda-probe")
        self.assertEqual((g["verdict"], f["severity"]), ("OK", "OK"))
        self.assertIn("MIG mode is on and the GPU has no MIG device", f["message"])

    def test_probe_mig_failure_names_the_mig_device(self):
        d = scenario("a100-mig")
        first = d["gpus"][1]["mig"]["instances"][0]
        _, doc = self.health_json("a100-mig", '"$NVSIM" set -i 1 cuda.alloc=fail', "--probe",
                                  rc=EXIT_FAIL)
        g, f = self.finding(doc, 1, "cuda-probe")
        self.assertEqual((g["verdict"], f["severity"]), ("FAIL", "FAIL"))
        self.assertEqual(doc["summary"], {"ok": 3, "warn": 0, "fail": 1})
        self.assertIn("MIG device %s (%s): cuMemAlloc" % (first["profile"], first["uuid"]),
                      f["message"])
        _, doc = self.health_json("a100-mig", '"$NVSIM" set -i 0 cuda.alloc=hang', "--probe",
                                  "--probe-timeout", "2", rc=EXIT_FAIL)
        g, f = self.finding(doc, 0, "cuda-probe")
        self.assertEqual((g["verdict"], f["severity"]), ("FAIL", "FAIL"))
        self.assertIn("hung", f["message"])
        self.assertIn("MIG device 1g.5gb (MIG-", f["message"])

    def test_probe_only_with_option(self):
        self.health_json("dgx-a100", '"$NVSIM" set -i 1 cuda.alloc=hang', rc=EXIT_OK)

    def test_probe_skips_lost_gpu(self):
        _, doc = self.health_json("rtx4090-8", '"$NVSIM" set -i 4 lost=1', "--probe",
                                  rc=EXIT_FAIL)
        for g in doc["gpus"]:
            self.assertEqual([(f["check"], f["severity"]) for f in g["findings"]],
                             [("lost", "FAIL")] if g["index"] == 4 else [("cuda-probe", "OK")],
                             doc)
        self.assertIsNone(doc["gpus"][4]["probe"], doc)
        self.assertEqual(doc["probe"]["not_probed"], [4], doc)

    # The probe's calls (docs/health.md, "The CUDA probe"; src/lib/cuda/cuda.c): the driver
    # initialised, exactly one device visible, a context, 64 MiB allocated and freed.
    CALLS = ["cuInit", "cuDeviceGetCount", "cuDeviceGet", "cuCtxCreate", "cuMemAlloc",
             "cuMemFree", "cuCtxDestroy"]

    def test_probe_says_what_passed(self):
        # issue 25, item 9: `health --probe` printed OK and a count, not what passed
        fail = '"$NVSIM" set -i 2 cuda.alloc=fail\n'
        r = sim_sh("dgx-a100", fail + '"$GPUCTL" health --probe -i 0,1,2')
        self.assertEqual(r.rc, EXIT_FAIL, r)
        lines = r.out.splitlines()
        for i in (0, 1):
            at = lines.index(next(l for l in lines if l.startswith("GPU %d " % i)))
            self.assertRegex(lines[at + 1],
                             r"^  OK    cuda-probe +CUDA allocation probe passed in \d+\.\d\d s: "
                             r"cuInit, only that GPU visible, context created, 64 MiB "
                             r"allocated and freed, context destroyed$")
        self.assertEqual(lines[-2], "3 GPUs checked: 2 OK, 0 WARN, 1 FAIL")
        self.assertEqual(lines[-1], "CUDA probe passed on GPU 0, 1; failed on GPU 2")
        # the JSON: per GPU the calls that succeeded, and the GPUs by outcome
        _, doc = self.health_json("dgx-a100", fail, "--probe", "-i", "0,1,2", rc=EXIT_FAIL)
        for g in doc["gpus"][:2]:
            self.assertEqual((g["probe"]["result"], g["probe"]["passed"]),
                             ("passed", self.CALLS), doc)
            self.assertIsInstance(g["probe"]["ms"], int)
        self.assertEqual((doc["gpus"][2]["probe"]["result"], doc["gpus"][2]["probe"]["passed"]),
                         ("failed", self.CALLS[:self.CALLS.index("cuMemAlloc")]), doc)
        self.assertEqual(doc["probe"], {"passed": [0, 1], "failed": [2], "not_probed": []})
        # without --probe: nothing probed, nothing said
        _, doc = self.health_json("dgx-a100", "true", "-i", "0", rc=EXIT_OK)
        self.assertIsNone(doc["probe"])
        self.assertIsNone(doc["gpus"][0]["probe"])

    def test_probe_timeout_usage(self):
        for bad in ("0", "-1", "abc", "3601", ""):
            with self.subTest(bad=bad):
                self.assertOneLineError(gpuctl("health", "--probe", "--probe-timeout", bad),
                                        EXIT_USAGE, "--probe-timeout")


SCONTROL = """#!/bin/sh
# stand-in scontrol: records its arguments, answers `show node` from $SCONTROL_DIR/state
printf '%s\\n' "$*" >> "$SCONTROL_DIR/calls"
[ -f "$SCONTROL_DIR/fail" ] && exit 1
if [ "$1" = show ]; then
    cat "$SCONTROL_DIR/state"
fi
exit 0
"""

# `scontrol show node` as Slurm prints it (slurm.conf and scontrol(1) documentation)
NODE = """NodeName=node7 Arch=x86_64 CoresPerSocket=32
   CPUAlloc=0 CPUEfctv=128 CPUTot=128 CPULoad=0.10
   Gres=gpu:a100:8
   NodeAddr=node7 NodeHostName=node7 Version=23.11.4
   State=%s ThreadsPerCore=2 TmpDisk=0 Weight=1
   Partitions=gpu
   %s
"""


class TestSlurm(HealthCase):
    def setUp(self):
        super().setUp()
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        d = self.dir.name
        os.mkdir(os.path.join(d, "bin"))
        path = os.path.join(d, "bin", "scontrol")
        with open(path, "w") as f:
            f.write(SCONTROL)
        os.chmod(path, 0o755)
        self.env = {"SCONTROL_DIR": d, "SLURMD_NODENAME": "node7",
                    "PATH": os.path.join(d, "bin") + ":" + os.environ.get("PATH", "")}

    def node(self, state, reason):
        with open(os.path.join(self.dir.name, "state"), "w") as f:
            f.write(NODE % (state, reason))

    def calls(self):
        try:
            with open(os.path.join(self.dir.name, "calls")) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def run_health(self, script, rc):
        r = sim_sh("dgx-a100", script + '\n"$GPUCTL" health --slurm --format json',
                   env=self.env)
        self.assertEqual(r.rc, rc, r)
        self.assertEqual(r.err, "", r)
        return r.json()

    def test_fail_drains(self):
        self.node("IDLE", "Reason=(null)")
        doc = self.run_health('"$NVSIM" set -i 2 ecc.volatile.uncorrected=1\n'
                              '"$NVSIM" xid -i 5 79', EXIT_FAIL)
        calls = self.calls()
        self.assertEqual(calls[0], "show node node7")
        self.assertEqual(len(calls), 2, calls)
        self.assertTrue(calls[1].startswith("update NodeName=node7 State=DRAIN Reason=gpuctl: "),
                        calls)
        self.assertIn("GPU 2 FAIL (ecc-dbe)", calls[1])
        self.assertIn("GPU 5 FAIL (xid 79)", calls[1])
        self.assertEqual(doc["slurm"]["node"], "node7")
        self.assertEqual(doc["slurm"]["action"], "drain")
        self.assertTrue(doc["slurm"]["reason"].startswith("gpuctl: "))

    def test_already_drained_is_left_alone(self):
        self.node("IDLE+DRAIN", "Reason=disk replacement [root@2026-11-30T10:00:00]")
        doc = self.run_health('"$NVSIM" set -i 2 remap.failure=1', EXIT_FAIL)
        self.assertEqual(self.calls(), ["show node node7"])
        self.assertEqual(doc["slurm"]["action"], "none")

    def test_healthy_resumes_our_drain(self):
        self.node("IDLE+DRAIN", "Reason=gpuctl: GPU 2 FAIL (ecc-dbe) [root@2026-11-30T10:00:00]")
        doc = self.run_health("true", EXIT_OK)
        self.assertEqual(self.calls(), ["show node node7",
                                        "update NodeName=node7 State=RESUME"])
        self.assertEqual(doc["slurm"]["action"], "resume")
        self.assertIsNone(doc["slurm"]["reason"])

    def test_warn_also_resumes_our_drain(self):
        self.node("DRAINED", "Reason=gpuctl: GPU 2 FAIL (ecc-dbe) [slurm@2026-11-30T10:00:00]")
        self.run_health('"$NVSIM" set -i 2 remap.pending=1', EXIT_WARN)
        self.assertEqual(self.calls()[-1], "update NodeName=node7 State=RESUME")

    def test_healthy_never_resumes_someone_elses_drain(self):
        self.node("MIXED+DRAIN", "Reason=memory test [admin@2026-11-30T10:00:00]")
        doc = self.run_health("true", EXIT_OK)
        self.assertEqual(self.calls(), ["show node node7"])
        self.assertEqual(doc["slurm"]["action"], "none")

    def test_healthy_idle_node_untouched(self):
        self.node("IDLE", "Reason=(null)")
        self.run_health("true", EXIT_OK)
        self.assertEqual(self.calls(), ["show node node7"])

    def test_table_says_what_it_did(self):
        self.node("IDLE", "Reason=(null)")
        r = sim_sh("dgx-a100", '"$NVSIM" set -i 0 lost=1\n"$GPUCTL" health --slurm',
                   env=self.env)
        self.assertEqual(r.rc, EXIT_FAIL, r)
        self.assertEqual(r.out.splitlines()[-1],
                         "slurm: drained node node7: gpuctl: GPU 0 FAIL (lost)")

    def test_scontrol_failure_is_one_line_error(self):
        self.node("IDLE", "Reason=(null)")
        open(os.path.join(self.dir.name, "fail"), "w").close()
        r = sim_sh("dgx-a100", '"$GPUCTL" health --slurm', env=self.env)
        self.assertOneLineError(r, EXIT_FAILURE, "scontrol")

    def test_no_scontrol(self):
        env = dict(self.env, PATH="/nonexistent")
        r = sim("dgx-a100", "health", "--slurm", env=env)
        self.assertOneLineError(r, EXIT_FAILURE, "scontrol")


# Shell: waits until a running --watch has saved its state file N more times. It saves after
# every check (and after an XID event), and each save has a new "time" line (docs/health.md,
# "State file"), so N=3 after a change means at least one whole check began after it, printed
# what it found and saved.
SAVES = ('saves() {\n'
         '  n=0; t=$(grep "^time " "$GPUCTL_HEALTH_STATE" 2>/dev/null)\n'
         '  for i in $(seq 1200); do\n'
         '    u=$(grep "^time " "$GPUCTL_HEALTH_STATE" 2>/dev/null)\n'
         '    if [ "$u" != "$t" ]; then n=$((n + 1)); t=$u; [ $n -lt $1 ] || return 0; fi\n'
         '    sleep 0.05\n'
         '  done\n'
         '  echo "the watch saved its state $n times in 60 s, not $1" >&2; return 9\n'
         '}\n')


class TestWatch(HealthCase):
    WATCH = (SAVES +
             '"$GPUCTL" health --watch --interval 1 --format json %s > "$NVSIM_STATE_DIR/out" &\n'
             'pid=$!\n'
             # ready: its first check printed what it found, then saved the state file
             'for i in $(seq 600); do [ -s "$GPUCTL_HEALTH_STATE" ] && break; sleep 0.1; done\n'
             'sleep 1\n'
             '%s\n'
             'saves 3\n'
             'kill $pid\n'
             'rc=0; wait $pid || rc=$?\n'
             'cat "$NVSIM_STATE_DIR/out"\n'
             'exit $rc\n')

    def watch(self, before, during, *args):
        r = sim_sh("dgx-a100", before + "\n" + self.WATCH % (" ".join(args), during))
        self.assertEqual(r.err, "", r)
        return r, [json.loads(l) for l in r.out.splitlines()]

    def test_findings_as_they_happen(self):
        r, lines = self.watch('"$NVSIM" set -i 1 remap.pending=1',
                              '"$NVSIM" xid -i 2 79\n'
                              '"$NVSIM" set -i 4 ecc.volatile.uncorrected=1\n'
                              '"$NVSIM" set -i 1 remap.pending=0')
        self.assertEqual(r.rc, EXIT_FAIL, r)  # the worst verdict of the last check
        seen = [(l["index"], l["check"], l["severity"], l["cleared"]) for l in lines]
        self.assertEqual(seen[0], (1, "remap-pending", "WARN", False), r)
        self.assertIn((2, "xid", "FAIL", False), seen)
        self.assertIn((4, "ecc-dbe", "FAIL", False), seen)
        self.assertIn((1, "remap-pending", "OK", True), seen)
        self.assertEqual(len(seen), 4, r)  # each printed once
        x = [l for l in lines if l["check"] == "xid"][0]
        self.assertEqual(x["xid"], 79)
        self.assertEqual(x["uuid"], gpu_fact("dgx-a100", 2, "uuid"))
        self.assertRegex(x["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")

    def test_nvlink_counters_rising(self):
        # rates need two samples: --watch compares each snapshot with the one before
        r, lines = self.watch('"$NVSIM" set -i 1 remap.pending=1 nvlink.3.replay=5',
                              '"$NVSIM" set -i 1 nvlink.3.replay=9 nvlink.3.crc_flit=2')
        hits = [l for l in lines if l["check"] == "nvlink-errors" and not l["cleared"]]
        self.assertEqual(len(hits), 1, r)
        self.assertEqual(hits[0]["index"], 1)
        self.assertEqual(hits[0]["severity"], "WARN")
        self.assertIn("4 replays", hits[0]["message"])
        self.assertIn("2 CRC errors", hits[0]["message"])

    def test_pcie_replay_rate(self):
        # Gen4 x16: DCGM allows ceil(0.96 x 16) = 16 replays a minute (a shorter interval
        # gets a whole minute's budget)
        r, lines = self.watch('"$NVSIM" set -i 6 remap.pending=1 pcie.replay=10',
                              '"$NVSIM" set -i 6 pcie.replay=27')
        hits = [l for l in lines if l["check"] == "pcie-replay" and not l["cleared"]]
        self.assertEqual(len(hits), 1, r)
        self.assertEqual(hits[0]["severity"], "WARN")
        self.assertIn("17 PCIe replays", hits[0]["message"])
        self.assertIn("budget of 16", hits[0]["message"])

    def test_one_shot_has_no_rate(self):
        self.health_json("dgx-a100", '"$NVSIM" set -i 1 nvlink.3.replay=500 pcie.replay=100000',
                         rc=EXIT_OK)

    def test_quiet_when_healthy(self):
        r, lines = self.watch("true", '"$NVSIM" set -i 3 utilization.gpu=90')
        self.assertEqual(r.rc, EXIT_OK, r)
        self.assertEqual(lines, [])

    def test_watch_usage(self):
        self.assertOneLineError(gpuctl("health", "--watch", "--probe"), EXIT_USAGE, "--watch")
        self.assertOneLineError(gpuctl("health", "--watch", "--slurm"), EXIT_USAGE, "--watch")
        self.assertOneLineError(gpuctl("health", "--watch", "--interval", "0"), EXIT_USAGE,
                                "--interval")


class TestWatchHang(HealthCase):
    """--watch while an NVML call does not return (`nvsim hang`, sim/README.md): the snapshots
    wait on the sampler's thread, so SIGTERM still ends the watch, an XID (NVML's events, or
    without them the kernel log) is printed while the hang lasts, and one `nvml-hang` finding
    says NVML is not answering, cleared when it answers again (docs/health.md, "Watching").
    Each test waits for the hang itself (`nvsim hung`), then for the line, within a bound."""

    HUNG = "nvmlDeviceGetCount_v2"  # every snapshot counts the GPUs first
    BOUND = 30  # seconds a line has to appear (polled)

    def start(self, lib=SIMLIB):
        tmp = tempfile.mkdtemp(prefix="gpuctl-watch-hang-")
        self.addCleanup(shutil.rmtree, tmp, True)
        self.sim_state = os.path.join(tmp, "state")
        r = run([NVSIM, "exec", "--keep", "--state-dir", self.sim_state, "dgx-a100", "--", "true"])
        self.assertEqual(r.rc, 0, r)
        self.out = os.path.join(tmp, "out")
        env = dict(os.environ, NVSIM_STATE_DIR=self.sim_state, GPUCTL_NVML_LIBRARY=lib,
                   GPUCTL_KMSG=os.path.join(self.sim_state, "kmsg"),
                   GPUCTL_CPUINFO=os.path.join(self.sim_state, "cpuinfo"))
        with open(self.out, "w") as out:
            self.p = subprocess.Popen([GPUCTL, "health", "--watch", "--interval", "1",
                                       "--format", "json"], env=env, stdout=out,
                                      stderr=subprocess.PIPE, text=True)
        self.addCleanup(self.kill)
        # ready: its first check printed what it found, then saved the state file
        self.until(lambda: os.path.exists(self.state) and os.path.getsize(self.state) > 0,
                   "the first check")

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        self.p.stderr.close()

    def nvsim(self, *args):
        r = run([NVSIM, *args], env={"NVSIM_STATE_DIR": self.sim_state})
        self.assertEqual(r.rc, 0, r)
        return r.out

    def until(self, pred, what):
        deadline = time.monotonic() + self.BOUND
        while not pred():
            self.assertIsNone(self.p.poll(), "the watch ended waiting for %s" % what)
            self.assertLess(time.monotonic(), deadline, "no %s within %d s" % (what, self.BOUND))
            time.sleep(0.05)

    def lines(self):
        with open(self.out) as f:
            return [json.loads(l) for l in f.read().splitlines() if l.endswith("}")]

    def hang(self):
        self.nvsim("hang", self.HUNG)
        self.until(lambda: self.nvsim("hung").strip(), "hung call")

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        try:
            return self.p.wait(self.BOUND)
        except subprocess.TimeoutExpired:
            self.fail("the watch did not end on SIGTERM")

    def test_sigterm_while_hung(self):
        self.start()
        self.hang()
        self.assertEqual(self.stop(), EXIT_OK)

    def xid_while_hung(self, lib):
        self.start(lib)
        self.hang()
        self.nvsim("xid", "-i", "2", "79")
        self.until(lambda: [l for l in self.lines() if l["check"] == "xid"], "XID line")
        self.assertTrue(self.nvsim("hung").strip(), "the hang lasted")
        x = [l for l in self.lines() if l["check"] == "xid"][0]
        self.assertEqual((x["index"], x["severity"], x["xid"]), (2, "FAIL", 79))
        self.assertEqual(x["uuid"], gpu_fact("dgx-a100", 2, "uuid"))
        self.nvsim("unhang")
        self.assertEqual(self.stop(), EXIT_FAIL)  # XID 79 is FAIL (docs/health.md)

    def test_xid_event_while_hung(self):
        self.xid_while_hung(SIMLIB)

    def test_xid_in_kernel_log_while_hung(self):
        # the minimal simulated NVML has no event API: the kernel log is the XIDs' source
        lib = os.path.join(os.path.dirname(GPUCTL), "..", "sim", "minimal", "libnvidia-ml.so.1")
        self.xid_while_hung(lib)

    def test_not_answering_then_answering(self):
        self.start()
        self.hang()

        def hangs(cleared):
            return [l for l in self.lines() if l["check"] == "nvml-hang" and
                    l["cleared"] == cleared]
        self.until(lambda: hangs(False), "nvml-hang finding")
        f = hangs(False)[0]
        self.assertEqual((f["index"], f["uuid"], f["severity"], f["xid"]),
                         (None, None, "WARN", None))
        self.assertRegex(f["message"], r"^NVML not answering for \d+ s$")
        self.nvsim("unhang")
        self.until(lambda: hangs(True), "the finding cleared")
        self.assertEqual(len(hangs(False)), 1, self.lines())  # said once
        c = hangs(True)[0]
        self.assertEqual((c["severity"], c["message"]), ("OK", None))
        self.assertEqual(self.stop(), EXIT_OK)


def boot_id():
    with open("/proc/sys/kernel/random/boot_id") as f:
        return f.read().strip()


class TestState(HealthCase):
    """--watch records what it saw in the state file; one-shot checks use it
    (docs/health.md, "State file")."""
    RECORD = (SAVES +
              '"$GPUCTL" health --watch --interval 1 > /dev/null &\n'
              'pid=$!\n'
              'for i in $(seq 600); do [ -s "$GPUCTL_HEALTH_STATE" ] && break; sleep 0.1; done\n'
              '%s\n'
              'saves 3\n'
              'kill $pid; wait $pid || true\n')

    def test_watch_xids_reach_one_shot(self):
        # the NVML event is recorded; a one-shot check that cannot read the kernel log gets it
        r = sim_sh("dgx-a100", self.RECORD % '"$NVSIM" xid -i 2 79' +
                   '"$GPUCTL" health --format json --kmsg /dev/null')
        self.assertEqual(r.rc, EXIT_FAIL, r)
        doc = r.json()
        self.assertEqual(doc["state_file"], self.state)
        f = self.only_finding(doc, 2, "xid", "FAIL")
        self.assertEqual(f["xid"], 79)
        # with the kernel log too, the XID counts once
        r = sim_sh("dgx-a100", self.RECORD % '"$NVSIM" xid -i 2 79' +
                   '"$GPUCTL" health --format json')
        f = self.only_finding(r.json(), 2, "xid", "FAIL")
        self.assertNotIn("times", f["message"])

    def test_rates_in_one_shot(self):
        # the watch's last sample makes the replay rate checkable: Gen4 x16, 16 a minute
        r = sim_sh("dgx-a100", '"$NVSIM" set -i 4 pcie.replay=10\n' + self.RECORD % "true" +
                   '"$NVSIM" set -i 4 pcie.replay=1000\n'
                   '"$GPUCTL" health --format json')
        self.assertEqual(r.rc, EXIT_WARN, r)
        f = self.only_finding(r.json(), 4, "pcie-replay", "WARN")
        self.assertIn("990 PCIe replays", f["message"])

    def write_state(self, text, mode=0o644):
        with open(self.state, "w") as f:
            f.write(text)
        os.chmod(self.state, mode)

    def test_hand_written_state(self):
        # format 1, as the gpuctl before the end line wrote it, still reads
        uuid = gpu_fact("dgx-a100", 3, "uuid")
        self.write_state("gpuctl-health-state 1\nboot %s\ntime 1\n"
                         "xid %s 48 pid=1, double bit\nxid GPU-nope 79 x\n"
                         "gpu %s replay 5 dbe 1 nvlink - - -\n"
                         % (boot_id(), uuid, uuid))
        _, doc = self.health_json("dgx-a100", "true", "--kmsg", "/dev/null", rc=EXIT_FAIL)
        f = self.only_finding(doc, 3, "xid", "FAIL")
        self.assertEqual(f["xid"], 48)
        self.assertIn("double bit", f["message"])

    def test_hand_written_format2(self):
        # the end line is zlib's CRC-32 of what comes before it (docs/health.md)
        uuid = gpu_fact("dgx-a100", 5, "uuid")
        body = "gpuctl-health-state 2\nboot %s\ntime 1\nxid %s 79 off the bus\n" % (
            boot_id(), uuid)
        self.write_state(body + "end %08x\n" % zlib.crc32(body.encode()))
        _, doc = self.health_json("dgx-a100", "true", "--kmsg", "/dev/null", rc=EXIT_FAIL)
        self.assertEqual(self.only_finding(doc, 5, "xid", "FAIL")["xid"], 79)

    def recorded(self):
        """The state file a --watch wrote after NVML delivered XID 79 on GPU 2."""
        r = sim_sh("dgx-a100", self.RECORD % '"$NVSIM" xid -i 2 79')
        self.assertEqual(r.rc, 0, r)
        with open(self.state, "rb") as f:
            data = f.read()
        self.assertIn(b"\nxid %s 79" % gpu_fact("dgx-a100", 2, "uuid").encode(), data)
        return data

    def assertUnreadable(self, data, why):
        """data as the state file: every GPU WARN "state" naming the file, nothing else."""
        with open(self.state, "wb") as f:
            f.write(data)
        _, doc = self.health_json("dgx-a100", "true", "--kmsg", "/dev/null", rc=EXIT_WARN)
        self.assertIsNone(doc["state_file"])
        for g in doc["gpus"]:
            self.assertEqual([(f["check"], f["severity"]) for f in g["findings"]],
                             [("state", "WARN")], g)
            msg = g["findings"][0]["message"]
            self.assertIn("state unreadable", msg)
            self.assertIn(self.state, msg)
            self.assertIn(why, msg)
        # list (and select, run: the same library call) see the same verdicts
        r = sim("dgx-a100", "list", "--format", "json", env={"GPUCTL_KMSG": "/dev/null"})
        self.assertEqual(r.rc, EXIT_OK, r)
        self.assertEqual({g["health"] for g in r.json()["gpus"]}, {"WARN"}, r)

    def test_cut_state_is_not_ok(self):
        # issue 24, finding 8: cut right before the xid line, the FAIL was forgotten (OK)
        data = self.recorded()
        self.assertUnreadable(data[:data.index(b"\nxid ") + 1], "truncated")

    def test_nul_in_state_is_not_another_xid(self):
        # issue 24, finding 8: a NUL over the 9 of "79" made it XID 7; in a file of the
        # previous format (no end line) too
        data = self.recorded()
        at = data.index(b" 79", data.index(b"\nxid ")) + 2
        nul = data[:at] + b"\0" + data[at + 1:]
        self.assertUnreadable(nul, "checksum")
        # line 12: the magic, boot, time, the 8 GPUs of dgx-a100, then the xid record
        self.assertUnreadable(self.format1(nul), "line 12: a control or non-ASCII byte (0x00)")

    def test_changed_byte_in_state(self):
        data = self.recorded()
        at = data.index(b" 79") + 1
        self.assertUnreadable(data[:at] + b"8" + data[at + 1:], "checksum")

    def test_unknown_format_is_not_ignored(self):
        self.assertUnreadable(b"gpuctl-health-state 9\nboot x\ntime 1\n", "format '9'")

    def format1(self, data):
        """data as the gpuctl before format 2 wrote it: the same records, "1", no end line."""
        lines = data.split(b"\n")
        self.assertEqual(lines[0], b"gpuctl-health-state 2")
        self.assertTrue(lines[-2].startswith(b"end ") and lines[-1] == b"", lines)
        return b"\n".join([b"gpuctl-health-state 1"] + lines[1:-2] + [b""])

    def test_state_of_the_previous_gpuctl(self):
        self.write_state(self.format1(self.recorded()).decode())
        _, doc = self.health_json("dgx-a100", "true", "--kmsg", "/dev/null", rc=EXIT_FAIL)
        self.assertEqual(doc["state_file"], self.state)
        self.assertEqual(self.only_finding(doc, 2, "xid", "FAIL")["xid"], 79)

    def test_watch_over_a_corrupt_state(self):
        # --watch says so once and writes the file afresh, which then reads
        self.write_state("gpuctl-health-state 2\nboot x\ntime 1\n")
        record = self.RECORD.replace("> /dev/null &", '> /dev/null 2> "$NVSIM_STATE_DIR/err" &')
        r = sim_sh("dgx-a100", record % "true" + 'cat "$NVSIM_STATE_DIR/err"')
        self.assertEqual(r.rc, 0, r)
        lines = r.out.splitlines()
        self.assertEqual(len(lines), 1, r)
        self.assertTrue(lines[0].startswith("gpuctl: warning: health state '%s': " % self.state), r)
        self.assertIn("truncated", lines[0])
        _, doc = self.health_json("dgx-a100", "true", "--kmsg", "/dev/null", rc=EXIT_OK)
        self.assertEqual(doc["state_file"], self.state)

    def test_reset_clears_the_fail(self):
        # docs/health.md, "After a reset": a fence XID FAILs until the GPU is reset; the reset
        # is known from the kernel log: NVSentinel's "GPU reset executed: GPU-<uuid>" (what an
        # administrator writes to /dev/kmsg after nvidia-smi -r), or the driver's
        # "NVRM: GPU at PCI:...: GPU-<uuid>", printed when the reset GPU logs its next XID.
        name = "dgx-a100"
        uuid = gpu_fact(name, 1, "uuid")
        kmsg = 'printf "%%s\\n" "%s" >> "$NVSIM_STATE_DIR/kmsg"\n'
        self.health_json(name, self.xid_line(1, 79), rc=EXIT_FAIL)
        _, doc = self.health_json(name, self.xid_line(1, 79) +
                                  kmsg % ("GPU reset executed: " + uuid), rc=EXIT_OK)
        self.assertEqual(doc["gpus"][1]["findings"], [])
        # the state file of a watch from before the reset no longer counts either
        self.write_state("gpuctl-health-state 1\nboot %s\ntime 1\nxid %s 79 old\n"
                         % (boot_id(), uuid))
        self.health_json(name, self.xid_line(1, 79) + kmsg % ("GPU reset executed: " + uuid),
                         rc=EXIT_OK)
        # after the reset, a new XID counts again (the driver's init line announces it)
        _, doc = self.health_json(
            name, self.xid_line(1, 79) + kmsg % ("GPU reset executed: " + uuid) +
            kmsg % ("NVRM: GPU at PCI:%s: %s" % (driver_bus(name, 1), uuid)) +
            self.xid_line(1, 13), rc=EXIT_WARN)
        f = self.only_finding(doc, 1, "xid", "WARN")
        self.assertEqual(f["xid"], 13)

    def test_watch_forgets_a_reset_gpu(self):
        # a running watch drops a GPU's XIDs when the kernel log shows it reset, and its state
        # file then no longer fences the GPU
        uuid = gpu_fact("dgx-a100", 2, "uuid")
        r = sim_sh("dgx-a100", self.RECORD % (
            '"$NVSIM" xid -i 2 79\nsaves 3\n'
            'printf "GPU reset executed: %s\\n" >> "$NVSIM_STATE_DIR/kmsg"' % uuid) +
            'grep -c "^xid %s" "$GPUCTL_HEALTH_STATE" || true\n'
            '"$GPUCTL" health --format json --kmsg /dev/null >/dev/null; echo rc=$?\n' % uuid)
        self.assertEqual(r.out.split(), ["0", "rc=0"], r)

    def xid_line(self, gpu, code):
        return '"$NVSIM" xid -i %d %d\n' % (gpu, code)

    def test_other_boot_is_ignored(self):
        uuid = gpu_fact("dgx-a100", 3, "uuid")
        self.write_state("gpuctl-health-state 1\nboot 00000000-0000-0000-0000-000000000000\n"
                         "time 1\nxid %s 48 old\n" % uuid)
        self.health_json("dgx-a100", "true", "--kmsg", "/dev/null", rc=EXIT_OK)

    def test_untrusted_file_is_ignored(self):
        uuid = gpu_fact("dgx-a100", 3, "uuid")
        self.write_state("gpuctl-health-state 1\nboot %s\ntime 1\nxid %s 48 x\n"
                         % (boot_id(), uuid), mode=0o666)
        _, doc = self.health_json("dgx-a100", "true", "--kmsg", "/dev/null", rc=EXIT_OK)
        self.assertIsNone(doc["state_file"])
        r = sim("dgx-a100", "-v", "health", "--kmsg", "/dev/null")
        self.assertEqual(r.rc, EXIT_OK, r)
        self.assertIn("writable only by its owner", r.err)

    def test_state_option(self):
        other = self.state + ".other"
        r = sim_sh("dgx-a100", (SAVES +
                                '"$GPUCTL" health --watch --interval 1 --state %s > /dev/null &\n'
                                'pid=$!; export GPUCTL_HEALTH_STATE=%s\n'
                                'for i in $(seq 600); do [ -s %s ] && break; sleep 0.1; done\n'
                                '"$NVSIM" xid -i 1 95; saves 3\n'
                                'kill $pid; wait $pid || true\n'
                                '"$GPUCTL" health --format json --kmsg /dev/null --state %s')
                   % (other, other, other, other))
        self.assertEqual(r.rc, EXIT_FAIL, r)
        self.assertFalse(os.path.exists(self.state))
        self.only_finding(r.json(), 1, "xid", "FAIL")

    def test_unwritable_state_warns_once(self):
        r = sim_sh("dgx-a100", '"$GPUCTL" health --watch --interval 1 --state /nonexistent/s '
                   '> /dev/null 2> "$NVSIM_STATE_DIR/err" &\n'
                   'pid=$!\n'
                   # the first check warned; then two more checks, which must not warn again
                   'for i in $(seq 600); do [ -s "$NVSIM_STATE_DIR/err" ] && break; sleep 0.1;'
                   ' done\n'
                   'sleep 2.5; kill $pid; wait $pid || true; cat "$NVSIM_STATE_DIR/err"')
        lines = r.out.splitlines()
        self.assertEqual(len(lines), 1, r)
        self.assertIn("/nonexistent/s", lines[0])
        self.assertTrue(lines[0].startswith("gpuctl: warning: "), r)


class TestUsage(HealthCase):
    def test_help(self):
        r = gpuctl("health", "--help")
        self.assertEqual(r.rc, EXIT_OK, r)
        for needle in ("--format", "--strict", "--kmsg", "10", "20"):
            self.assertIn(needle, r.out)
        r = gpuctl("--help")
        self.assertIn("  health ", r.out)

    def test_bad_input(self):
        self.assertOneLineError(gpuctl("health", "--format", "xml"), EXIT_USAGE, "'xml'")
        self.assertOneLineError(gpuctl("health", "--bogus"), EXIT_USAGE, "--bogus")
        self.assertOneLineError(gpuctl("health", "extra"), EXIT_USAGE, "'extra'")
        self.assertOneLineError(gpuctl("health", "--kmsg", ""), EXIT_USAGE, "--kmsg")
        self.assertOneLineError(sim("dgx-a100", "health", "-i", "9"), EXIT_USAGE, "9")

    def test_unreadable_kmsg_named(self):
        r = sim("dgx-a100", "health", "--kmsg", "/nonexistent/kmsg")
        self.assertOneLineError(r, EXIT_FAILURE, "/nonexistent/kmsg")
        self.assertEqual(r.out, "")

    def test_no_driver(self):
        r = gpuctl("health", env={"GPUCTL_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1"})
        self.assertOneLineError(r, EXIT_NODRIVER)


if __name__ == "__main__":
    unittest.main()
