"""gpuctl's global behaviour: --help/--version/help COMMAND, usage errors, exit codes, no
driver, a library that is not NVML, -v debug output. Exit codes from docs/gpuctl.1."""
import os
import re
import unittest

from gpuctl_test import (EXIT_FAILURE, EXIT_NODRIVER, EXIT_USAGE, SRC, GpuctlTestCase, gpuctl,
                         scenario_gpus, sim)

COMMANDS = ("help", "info", "list", "topo", "watch")
NO_LIB = {"GPUCTL_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1"}


class Help(GpuctlTestCase):
    def test_global_help(self):
        for args in (["--help"], ["-h"], ["help"]):
            r = gpuctl(*args)
            self.assertOk(r)
            for c in COMMANDS:
                self.assertIn("  %s " % c, r.out)
            for code in range(5):
                self.assertIn("  %d  " % code, r.out)
            self.assertIn("GPUCTL_NVML_LIBRARY", r.out)

    def test_command_help(self):
        for c in COMMANDS:
            r = gpuctl(c, "--help")
            self.assertOk(r)
            self.assertTrue(r.out.startswith("Usage: gpuctl %s" % c), r)
            self.assertIn("Exit status:", r.out)
            self.assertEqual(gpuctl("help", c).out, r.out)

    def test_each_help_lists_the_statuses_its_command_can_end_with(self):
        # docs/gpuctl.1, EXIT STATUS: 3 is select's and run's, 5 run --retry's, 10 and 20
        # health's; 4 (no driver) every command's that reads NVML; the top level lists all
        def codes(text):
            block = text.split("Exit status:", 1)[1]
            return {int(m) for m in re.findall(r"^  (\d+) ", block, re.M)}
        # 6 (select.lock held too long: docs/leases.md "Bounds") is select's, run's, ps's and
        # release's (--force takes it exclusively: docs/leases.md "Taking a lease back");
        # 7 (an NVML call past GPUCTL_NVML_TIMEOUT) every one-shot command's that reads NVML,
        # not the live ones' (top, watch, exporter, agent); 8 (no ledger) report's, which reads no NVML;
        # 9 (over a quota: docs/config.md "Quotas") select's and run's; 11 (enforce = cgroup and
        # the agent did not confine the job: docs/agent.md "Enforcement: cgroup") run's; quota
        # reads NVML (the pools' GPUs) and takes select.lock shared (the held devices), as ps
        want = {"quota": {0, 1, 2, 4, 6, 7}, "select": {0, 1, 2, 3, 4, 6, 7, 9}, "run": {0, 1, 2, 3, 4, 5, 6, 7, 9, 11},
                "ps": {0, 1, 2, 4, 6, 7}, "health": {0, 1, 2, 4, 7, 10, 20},
                "topo": {0, 1, 2, 4, 7}, "list": {0, 1, 2, 4, 7}, "info": {0, 1, 2, 4, 7},
                "release": {0, 1, 2, 4, 6, 7}, "slurm": {0, 1, 2, 4, 7}, "lease": {0, 1, 2, 4, 7},
                "top": {0, 1, 2, 4}, "watch": {0, 1, 2, 4}, "exporter": {0, 1, 2, 4}, "agent": {0, 1, 2, 4},
                "report": {0, 1, 2, 8}, "help": {0, 1, 2}}
        for c, w in want.items():
            with self.subTest(command=c):
                self.assertEqual(codes(gpuctl(c, "--help").out), w)
        self.assertEqual(codes(gpuctl("--help").out), {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 20})
        self.assertIn("its own status", gpuctl("run", "--help").out)

    def test_global_help_names_every_environment_variable_read(self):
        # every GPUCTL_* variable the sources read with getenv/secure_getenv is in --help
        read = set()
        for d in ("src/lib", "src/cli"):
            for root, _, files in os.walk(os.path.join(SRC, d)):
                for name in files:
                    if name.endswith(".c"):
                        with open(os.path.join(root, name)) as f:
                            read |= set(re.findall(r'getenv\("(GPUCTL_[A-Z_]+)"\)', f.read()))
        out = gpuctl("--help").out
        self.assertTrue(read)
        for v in sorted(read):
            self.assertIn(v, out)

    def test_man_synopsis_lists_every_option_of_each_command(self):
        # docs/gpuctl.1's SYNOPSIS against each command's --help: every long option appears,
        # by its long form, by its short form, or (select, run) as one of the FILTERS
        with open(os.path.join(SRC, "docs", "gpuctl.1")) as f:
            man = f.read()
        syn = man[man.index(".SH SYNOPSIS"):man.index(".SH DESCRIPTION")].replace("\\-", "-")
        blocks = {}
        for m in re.finditer(r"\.B gpuctl ([a-z]+)[^\n]*\n(.*?)(?=\.br\n|\Z)", syn, re.S):
            blocks.setdefault(m[1], "")
            blocks[m[1]] += m[2]
        filters = gpuctl("select", "--help").out.split("Options:", 1)[1]
        filter_opts = set(re.findall(r"^  (?:-\w, )?--([a-z][a-z-]*)", filters, re.M))
        self.assertIn("min-free-mem", filter_opts)
        for cmd, block in blocks.items():
            with self.subTest(command=cmd):
                h = gpuctl(cmd, "--help").out
                for short, long_ in re.findall(r"^  (?:-(\w), )?--([a-z][a-z-]*)", h, re.M):
                    if long_ == "help" or (cmd in ("select", "run") and long_ in filter_opts
                                           and "[FILTERS]" in gpuctl(cmd, "--help").out):
                        continue
                    self.assertTrue("--" + long_ in block or (short and "-" + short in block),
                                    "%s: --%s is not in the man page's SYNOPSIS" % (cmd, long_))

    def test_version(self):
        # the library's run-time version (gpuctl_version), which is CMake's project version
        with open(os.path.join(SRC, "CMakeLists.txt")) as f:
            want = re.search(r"project\(gpuctl VERSION (\d+\.\d+\.\d+)", f.read()).group(1)
        r = gpuctl("--version")
        self.assertOk(r)
        self.assertEqual(r.out, f"gpuctl {want}\n")


class Usage(GpuctlTestCase):
    def test_usage_errors(self):
        for args, needle in ((["nosuch"], "'nosuch'"),
                             (["--bogus", "list"], "--bogus"),
                             (["help", "nosuch"], "'nosuch'"),
                             (["info", "--format", "yaml"], "yaml")):
            r = gpuctl(*args, env=NO_LIB)
            self.assertOneLineError(r, EXIT_USAGE, needle)


class NoCommand(GpuctlTestCase):
    def test_no_command_lists_the_gpus(self):
        # a bare gpuctl is `gpuctl list` (issue 25: as a bare nvidia-smi shows the GPUs): one
        # row per GPU of the scenario after the header, global options still taken
        gpus = scenario_gpus("dgx-a100")
        for args in ((), ("--color", "never")):
            r = sim("dgx-a100", *args)
            self.assertOk(r)
            rows = r.out.splitlines()
            self.assertEqual(rows[0].split()[:3], ["GPU", "UUID", "NAME"], r)
            self.assertEqual([l.split()[0] for l in rows[1:]],
                             [str(i) for i in range(len(gpus))], r)
            for g, row in zip(gpus, rows[1:]):
                self.assertIn(g["uuid"][:12], row)
        # without a driver it fails as list does, and --help is still the help
        r = gpuctl(env=NO_LIB)
        self.assertOneLineError(r, EXIT_NODRIVER, "no NVIDIA driver")
        r = gpuctl("--help", env=NO_LIB)
        self.assertOk(r)
        self.assertTrue(r.out.startswith("Usage: gpuctl"), r)


class NoDriver(GpuctlTestCase):
    def test_library_missing(self):
        for c in ("list", "topo", "info"):
            r = gpuctl(c, env=NO_LIB)
            self.assertOneLineError(r, EXIT_NODRIVER, "no NVIDIA driver")
            self.assertEqual(r.out, "")

    def test_not_an_nvml_library(self):
        lib = "/lib/x86_64-linux-gnu/libm.so.6"
        r = gpuctl("list", env={"GPUCTL_NVML_LIBRARY": lib})
        # The library says -ENOEXEC: a misconfiguration, not a missing driver (exit 1).
        self.assertOneLineError(r, EXIT_FAILURE, "libm.so.6")
        self.assertEqual(r.out, "")


class Verbose(GpuctlTestCase):
    def test_debug_lines(self):
        r = sim("rtx4090-8", "-v", "list", "--query", "index,ecc.mode.current")
        self.assertOk(r)
        for line in r.err.splitlines():
            self.assertRegex(line, r"^gpuctl: (debug|info|warning): ", r)
        quiet = sim("rtx4090-8", "list", "--query", "index,ecc.mode.current")
        self.assertEqual(quiet.err, "")
        self.assertEqual(quiet.out, r.out)


if __name__ == "__main__":
    unittest.main()
