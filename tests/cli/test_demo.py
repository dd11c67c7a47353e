"""`make demo` (scripts/demo.sh) is meant for a newcomer, who should understand every line it
prints (issue 25, item 10): no GPU is busy without a process that explains it, no process is
named after the demo's own script, every command is introduced by a comment, `gpuctl top
--once` is printed wide enough that none of its lines is cut, its symbols are explained by a
legend, and the stand-in processes are gone when the demo ends."""
import os
import re
import subprocess
import unittest

from gpuctl_test import BUILD, SRC, GpuctlTestCase

DEMO = os.path.join(SRC, "scripts", "demo.sh")
COLUMNS = 140  # the width the demo gives top (scripts/demo.sh, DEMO_COLUMNS)


def section(lines, command):
    """The output lines of `$ command`: up to the next comment line (top's frame has blank
    lines inside)."""
    start = next(i for i, l in enumerate(lines) if l.startswith("$ " + command))
    out = []
    for l in lines[start + 1:]:
        if l.startswith("# ") or l.startswith("$ "):
            break
        out.append(l)
    return out


class DemoTest(GpuctlTestCase):
    @classmethod
    def setUpClass(cls):
        env = dict(os.environ)
        env.pop("DEMO_COLUMNS", None)
        p = subprocess.run(["sh", DEMO, BUILD], capture_output=True, text=True, timeout=120,
                           env=env)
        cls.rc, cls.out, cls.err = p.returncode, p.stdout, p.stderr
        cls.lines = p.stdout.splitlines()

    def test_runs(self):
        self.assertEqual(self.rc, 0, self.err)
        self.assertEqual(self.err, "")

    def test_no_gpu_busy_without_a_process(self):
        rows = [l for l in section(self.lines, "gpuctl list")[1:] if l.strip()]
        self.assertEqual(len(rows), 8, rows)  # the DGX A100 scenario's 8 GPUs
        busy = 0
        for row in rows:
            util = int(re.search(r"\s(\d+)%\s", row).group(1))
            procs = re.findall(r"\w+:\d+\(\d+MiB\)", row)
            if util > 0:
                busy += 1
                self.assertTrue(procs, "a GPU at work with no process: " + row)
        self.assertGreater(busy, 0)

    def test_process_names_are_not_the_demo_script(self):
        frame = section(self.lines, "gpuctl top --once")
        procs = [l for l in frame if l.startswith("! ")]
        self.assertEqual(len(procs), 3, procs)
        # the process list's heading: ... ELAPSED WORKLOAD COMMAND, COMMAND last and aligned
        heading = [l for l in frame if l.startswith("GPU") and l.rstrip().endswith("COMMAND")]
        self.assertEqual(len(heading), 1, frame)
        at = heading[0].index("COMMAND")
        for l in procs:
            command = l[at:]
            self.assertNotIn("sh -eu", command)
            self.assertNotIn("?", command)
            self.assertRegex(command, r"^(train|serve) ")

    def test_every_command_is_introduced(self):
        for i, l in enumerate(self.lines):
            if l.startswith("$ "):
                self.assertTrue(self.lines[i - 1].startswith("# "),
                                "no comment before: " + l)

    def test_top_lines_are_not_cut(self):
        frame = section(self.lines, "gpuctl top --once")
        self.assertGreater(len(frame), 10, frame)
        for l in frame:
            # top cuts a line at the width: a line that reaches it may have been cut
            self.assertLess(len(l.rstrip()), COLUMNS, l)
        # the shared GPU's line names both holders (the demo's two notebooks)
        shared = [l for l in frame if "shared by 2" in l]
        self.assertEqual(len(shared), 1, frame)
        self.assertEqual(shared[0].count("'notebook'"), 2, shared)

    def test_top_symbols_are_explained(self):
        start = self.lines.index("$ gpuctl top --once   # (gpuctl top: the same, live and full "
                                 "screen)")
        legend = " ".join(l for l in self.lines[start:] if l.startswith("# "))
        self.assertIn("Legend", legend)
        # every history character top printed after "util" and "mem", and every word the
        # second lines use, is in the legend
        for l in section(self.lines, "gpuctl top --once"):
            m = re.match(r"^\s+util\s+(\S)\s+mem\s+(\S)\s", l)
            if m:
                for ch in m.groups():
                    self.assertIn(ch, legend.split("from", 1)[1], l)
        for word in ('"util"', '"mem"', "HLTH", "FOREIGN", "shared by", "held by", "free",
                     "! before"):
            self.assertIn(word, legend)

    def test_stand_ins_end_with_the_demo(self):
        pids = [int(l.split()[2]) for l in section(self.lines, "gpuctl top --once")
                if l.startswith("! ")]
        self.assertTrue(pids)
        for pid in pids:
            self.assertFalse(os.path.exists("/proc/%d/cmdline" % pid)
                             and open("/proc/%d/cmdline" % pid, "rb").read().startswith(
                                 (b"train", b"serve")), pid)


if __name__ == "__main__":
    unittest.main()
