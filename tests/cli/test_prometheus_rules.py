"""The Prometheus rules gpuctl ships (dist/prometheus/gpuctl.rules.yml, docs/metrics.md "Rules"):
the real `promtool` (Debian's prometheus package, installed by scripts/deps.sh) checks them and
runs their unit tests (tests/cli/prometheus-rules-test.yml), whose expected alerts were worked out
by hand from each rule and its input series. The metric names the rules read must be ones the
exporter serves (docs/metrics.md's tables), so a renamed metric cannot leave a rule that never
fires."""
import os
import re
import shutil
import subprocess
import unittest

from gpuctl_test import SRC

PROMTOOL = shutil.which("promtool")
RULES = os.path.join(SRC, "dist", "prometheus", "gpuctl.rules.yml")
TESTS = os.path.join(SRC, "tests", "cli", "prometheus-rules-test.yml")


class Rules(unittest.TestCase):
    def promtool(self, *args):
        self.assertIsNotNone(PROMTOOL, "promtool missing: run scripts/deps.sh test")
        p = subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=120,
                           cwd=os.path.dirname(TESTS))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return p.stdout

    def test_check_rules(self):
        self.assertIn("SUCCESS: 7 rules found", self.promtool("check", "rules", RULES))

    def test_unit_tests_of_the_rules(self):
        self.assertIn("SUCCESS", self.promtool("test", "rules", TESTS))

    def test_rules_read_only_metrics_the_exporter_serves(self):
        with open(RULES) as f:
            exprs = [l.split("expr:", 1)[1] for l in f if "expr:" in l]
        used = {m for e in exprs for m in re.findall(r"\b(gpuctl_[a-z_]+|DCGM_FI_[A-Z_]+)\b", e)}
        self.assertTrue(used)
        with open(os.path.join(SRC, "docs", "metrics.md")) as f:
            documented = set(re.findall(r"^\| `([A-Za-z_:]+)` \|", f.read(), re.M))
        self.assertEqual(used - documented, set())


if __name__ == "__main__":
    unittest.main()
