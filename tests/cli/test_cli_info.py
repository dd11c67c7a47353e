"""gpuctl info: versions (CUDA 12040 -> "12.4"), numeric minimum-version warnings, libraries,
modes. Expected values come from the scenario's `system` block and GPU facts."""
import json
import os
import shutil
import tempfile
import unittest

from cli_facts import Machine
from gpuctl_test import SCENARIOS, SIMLIB, GpuctlTestCase, sim


class InfoJson(GpuctlTestCase):
    def test_versions_libraries_and_modes(self):
        m = Machine("a100-mig")
        r = sim("a100-mig", "info", "--format", "json")
        self.assertOk(r)
        doc = r.json()
        self.assertEqual(doc["driver_version"], m.system.get("driver_version", "550.54.15"))
        self.assertEqual(doc["nvml_version"], m.system.get("nvml_version", "12.550.54.15"))
        self.assertEqual(doc["cuda_driver_version"], m.cuda_version_text())
        self.assertEqual(doc["warnings"], [])
        self.assertEqual(os.path.realpath(doc["nvml_library"]), os.path.realpath(SIMLIB))
        self.assertTrue(doc["cuda_library"] is None or isinstance(doc["cuda_library"], str))
        # MIG user guide, "CUDA device enumeration": one MIG device per process before R570
        self.assertEqual(doc["cuda_mig_devices_per_process"], 1)
        self.assertEqual(len(doc["gpus"]), len(m))
        for i, g in enumerate(doc["gpus"]):
            want = m.gpus[i]
            self.assertEqual(g["index"], i)
            self.assertEqual(g["uuid"], want["uuid"])
            self.assertEqual(g["pci_bus_id"], want["pci_bus_id"])
            self.assertEqual(g["name"], want["name"])
            self.assertIs(g["persistence_mode"], want.get("persistence_mode", True))
            self.assertIs(g["mig_mode"], want["mig"]["enabled"])
            self.assertIs(g["mig_mode_pending"], want["mig"]["pending"])


class InfoMigRule(GpuctlTestCase):
    def test_mig_devices_per_process_by_branch(self):
        # before R570 one MIG device per CUDA process, from R570 one per GPU instance, 64 at most
        # (MIG user guide, "CUDA device enumeration")
        r = sim("a100-mig", "info")
        self.assertIn("MIG devices per CUDA process: 1 (driver before R570)", r.out)
        with open(os.path.join(SCENARIOS, "a100-mig.json")) as f:
            doc = json.load(f)
        doc["system"] = {"driver_version": "570.172.08", "nvml_version": "12.570.172.08",
                         "cuda_driver_version": 12080}
        d = tempfile.mkdtemp(prefix="gpuctl-test-")
        try:
            path = os.path.join(d, "r570.json")
            with open(path, "w") as f:
                json.dump(doc, f)
            r = sim(path, "info", "--format", "json")
            self.assertEqual(r.json()["cuda_mig_devices_per_process"], 64)
            r = sim(path, "info")
            self.assertIn("MIG devices per CUDA process: one per GPU instance, 64 at most",
                          r.out)
        finally:
            shutil.rmtree(d)


class InfoText(GpuctlTestCase):
    def test_text(self):
        m = Machine("rtx4090-8")
        r = sim("rtx4090-8", "info")
        self.assertOk(r)
        self.assertIn("Driver version:", r.out)
        self.assertIn(m.system["driver_version"], r.out)
        self.assertIn("CUDA driver version:  " + m.cuda_version_text(), r.out)
        self.assertIn("NVML library:", r.out)
        self.assertNotIn("Warning", r.out)
        for g in m.gpus:
            line = next(l for l in r.out.splitlines() if g["uuid"] in l)
            self.assertIn("Disabled", line)  # persistence off on these GeForce cards


class InfoWarnings(GpuctlTestCase):
    """Old drivers: the versions are compared as numbers, so 450.102.04 is newer than
    450.80.02 although it sorts lower as a string."""

    def run_with(self, driver, cuda):
        with open(os.path.join(SCENARIOS, "workstation-mixed.json")) as f:
            doc = json.load(f)
        doc["name"] = "old-driver"
        doc["system"] = {"driver_version": driver, "nvml_version": "11." + driver,
                         "cuda_driver_version": cuda}
        d = tempfile.mkdtemp(prefix="gpuctl-test-")
        try:
            path = os.path.join(d, "old-driver.json")
            with open(path, "w") as f:
                json.dump(doc, f)
            r = sim(path, "info", "--format", "json")
        finally:
            shutil.rmtree(d)
        self.assertOk(r)
        return r.json()

    def test_old_driver_and_cuda(self):
        doc = self.run_with("418.67", 10010)
        self.assertEqual(doc["cuda_driver_version"], "10.1")
        self.assertEqual(len(doc["warnings"]), 2, doc)
        self.assertTrue(any("418.67" in w for w in doc["warnings"]))
        self.assertTrue(any("10.1" in w for w in doc["warnings"]))

    def test_just_below_minimum(self):
        doc = self.run_with("450.80.01", 11000)
        self.assertEqual(len(doc["warnings"]), 1, doc)
        self.assertIn("450.80.01", doc["warnings"][0])

    def test_numeric_not_string_comparison(self):
        self.assertEqual(self.run_with("450.102.04", 11000)["warnings"], [])
        self.assertEqual(self.run_with("450.80.02", 11000)["warnings"], [])


if __name__ == "__main__":
    unittest.main()
