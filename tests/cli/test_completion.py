"""Bash completion (dist/gpuctl.bash): the _gpuctl function, called by a plain bash exactly as
bash's programmable completion calls it (COMP_WORDS, COMP_CWORD), offers the commands, a
command's options, the simulated machine's GPU indices and UUIDs (from the scenario file) for
options taking GPU ids, also inside a comma-separated list and after `--opt=`, and the pools of
the configuration file (from the file the test writes) for --pool."""
import os
import tempfile
import unittest

from gpuctl_test import GPUCTL, NVSIM, SRC, GpuctlTestCase, run, scenario_gpus

SCRIPT = os.path.join(SRC, "dist", "gpuctl.bash")
# The commands of the README's table and the man page, written down here.
COMMANDS = {"agent", "exporter", "health", "help", "info", "lease", "list", "ps", "quota", "release",
            "report", "run", "select", "slurm", "top", "topo", "watch"}
DRIVER = ('source "$0"; complete -p gpuctl >/dev/null || exit 9; '
          'COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _gpuctl; '
          'printf "%s\\n" "${COMPREPLY[@]}"')


def complete(*words, scenario="dgx-a100", env=None):
    """What completion offers for the command line words (the last one being completed)."""
    argv = ["bash", "--norc", "--noprofile", "-c", DRIVER, SCRIPT, GPUCTL, *words]
    r = run([NVSIM, "exec", scenario, "--", *argv], env=env)
    assert r.rc == 0, r
    return set(l for l in r.out.splitlines() if l)


class CompletionTest(GpuctlTestCase):
    def setUp(self):
        gpus = scenario_gpus("dgx-a100")
        self.ids = {str(i) for i in range(len(gpus))} | {g["uuid"] for g in gpus}

    def test_commands(self):
        self.assertEqual(complete(""), COMMANDS)
        self.assertEqual(complete("s"), {"select", "slurm"})
        self.assertEqual(complete("-v", "--config", "/dev/null", "to"), {"top", "topo"})
        self.assertEqual(complete("help", "wa"), {"watch"})
        self.assertEqual(complete("lease", ""), {"init"})

    def test_options(self):
        self.assertEqual(complete("select", "--mi"), {"--min-free-mem", "--mig"})
        self.assertEqual(complete("list", "--for"), {"--format"})
        self.assertEqual(complete("list", "--lo"), {"--loop"})
        self.assertEqual(complete("list", "--query-c"), {"--query-compute-apps"})
        self.assertEqual(complete("list", "-l", ""), set())  # SECONDS: nothing to offer
        self.assertEqual(complete("--vers"), {"--version"})
        self.assertEqual(complete("--ver"), {"--verbose", "--version"})
        self.assertIn("--retry", complete("run", "-n", "1", "--re"))
        # a flag's next word is free: options again
        self.assertIn("--hold", complete("select", "--whole", "--h"))
        # an option with a value of its own kind (a count) offers nothing
        self.assertEqual(complete("select", "-n", ""), set())
        # --color's values, before the command or after list/ps/health; its value is no command
        self.assertEqual(complete("--color", "a"), {"auto", "always"})
        self.assertEqual(complete("list", "--color", ""), {"auto", "always", "never"})
        self.assertEqual(complete("--color", "never", "l"), {"list", "lease"})
        self.assertIn("--wide", complete("--color", "never", "list", "--w"))
        # report: its groupings after --by, files after --ledger
        self.assertEqual(complete("report", "--by", ""),
                         {"user", "group", "pool", "workload", "gpu", "day"})
        self.assertEqual(complete("report", "--by", "g"), {"group", "gpu"})
        self.assertEqual(complete("report", "--l"), {"--ledger"})
        self.assertEqual(complete("report", "--ledger", "/dev/nul"), {"/dev/null"})

    def test_quota(self):
        # quota's options; user names after --user (root is in every passwd), pools after --pool
        self.assertEqual(complete("q"), {"quota"})
        self.assertEqual(complete("quota", "--fo"), {"--format"})
        self.assertEqual(complete("quota", "--u"), {"--user"})
        self.assertIn("root", complete("quota", "--user", "roo"))
        self.assertEqual(complete("quota", "--user", "--"), set())  # a value: no options
        with tempfile.NamedTemporaryFile("w", suffix=".conf") as f:
            f.write("[pool training]\ngpus = 0,1\n")
            f.flush()
            self.assertEqual(complete("--config", f.name, "quota", "--pool", ""),
                             {"default", "training"})

    def test_run_job(self):
        # after "--" the job's command line: commands, then its arguments, never gpuctl's options
        self.assertIn("true", complete("run", "-n", "1", "--", "tru"))
        self.assertNotIn("--retry", complete("run", "-n", "1", "--", "sh", "--re"))
        self.assertEqual(complete("run", "-n", "1", "--", "sh", "--re"), set())

    def test_gpu_ids(self):
        self.assertEqual(complete("list", "-i", ""), self.ids)
        self.assertEqual(complete("health", "--id", ""), self.ids)
        # --only, nvitop's name for -i, completes as -i does
        self.assertEqual(complete("list", "--only", ""), self.ids)
        self.assertEqual(complete("watch", "--only", "=", ""), self.ids)
        self.assertIn("--only", complete("release", "--on"))
        self.assertEqual(complete("select", "-n", "1", "--only", "GPU-"),
                         {u for u in self.ids if u.startswith("GPU-")})
        # the last element of a list
        self.assertEqual(complete("select", "-n", "1", "--exclude", "0,"),
                         {"0," + i for i in self.ids})
        # --opt=VALUE, split by COMP_WORDBREAKS into --opt, =, VALUE
        self.assertEqual(complete("select", "-n", "1", "--exclude", "=", ""), self.ids)

    def test_pools(self):
        with tempfile.NamedTemporaryFile("w", suffix=".conf") as f:
            f.write("[pool training]\ngpus = 0,1\n[ pool  infer.v2 ]\ngpus = 2\n")
            f.flush()
            self.assertEqual(complete("--config", f.name, "select", "-n", "1", "--pool", ""),
                             {"default", "training", "infer.v2"})
            self.assertEqual(complete("run", "--pool", "t", env={"GPUCTL_CONFIG": f.name}),
                             {"training"})


if __name__ == "__main__":
    unittest.main()
