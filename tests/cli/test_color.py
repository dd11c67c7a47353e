"""Colour: --color=auto|always|never (global, and on list, ps and health), NO_COLOR
(https://no-color.org: set and not empty, no colour; an explicit --color=always still colours),
auto colouring only on a terminal, and never in JSON or CSV.

Expected cells come from the documented thresholds (docs/gpuctl.1 "COLOUR", after gpustat's:
temperature red below 50 C, bold red from 50; utilisation green below 30 %, bold green from 30;
memory yellow below half used, bold yellow from half; power magenta below 40 % of the limit,
bold magenta from 40; health OK green, WARN yellow, FAIL bold red) applied to values this test
sets with nvsim, and from ECMA-48's SGR sequences (ESC [ params m, reset ESC [ 0 m)."""
import re
import unittest

from gpuctl_test import EXIT_USAGE, GpuctlTestCase, sim, sim_sh

ESC = "\x1b"
SGR = re.compile("\x1b\\[[0-9;]*m")


def sgr(params, text):
    return "%s[%sm%s%s[0m" % (ESC, params, text, ESC)


# GPU 1 at each threshold, GPU 2 just below; GPU 3 FAIL (XID 79), GPU 4 WARN (XID 31).
# dgx-a100: 81920 MiB per GPU, power limit 400 W.
SETUP = ("$NVSIM set -i 1 temperature=50 utilization.gpu=30 memory.used=40960MiB "
         "power.draw=160\n"
         "$NVSIM set -i 2 temperature=49 utilization.gpu=29 memory.used=40959MiB "
         "power.draw=159\n"
         "$NVSIM xid -i 3 79\n"
         "$NVSIM xid -i 4 31\n")


class ColorAlways(GpuctlTestCase):
    def test_list_cells_by_load_and_health(self):
        for how in ("$GPUCTL --color=always list", "$GPUCTL list --color always"):
            r = sim_sh("dgx-a100", SETUP + how + "\necho ---\n$GPUCTL list --color=never\n")
            self.assertOk(r)
            colored, plain = r.out.split("---\n")
            rows = colored.splitlines()
            self.assertNotIn(ESC, rows[0], "the header is not coloured")
            hot, cool = rows[2], rows[3]
            for cell in (sgr("36", "1"), sgr("1;31", "50C"), sgr("1;32", "30%"),
                         sgr("1;33", "40960 / 81920 MiB"), sgr("1;35", "160 / 400 W"),
                         sgr("32", "OK")):
                self.assertIn(cell, hot, r)
            for cell in (sgr("31", "49C"), sgr("32", "29%"), sgr("33", "40959 / 81920 MiB"),
                         sgr("35", "159 / 400 W"), sgr("34", "NVIDIA A100-SXM4-80GB")):
                self.assertIn(cell, cool, r)
            self.assertIn(sgr("1;31", "FAIL"), rows[4], r)
            self.assertIn(sgr("33", "WARN"), rows[5], r)
            # the colour wraps the text only: without it, the table is the plain one
            self.assertEqual(SGR.sub("", colored), plain)
            self.assertNotIn(ESC, plain)

    def test_health_verdicts(self):
        r = sim_sh("dgx-a100", SETUP + "$GPUCTL health --color=always -i 0,3,4 || true\n")
        lines = r.out.splitlines()
        self.assertTrue(lines[0].endswith(" " + sgr("32", "OK")), r)
        self.assertTrue(lines[1].endswith(" " + sgr("1;31", "FAIL")), r)
        self.assertTrue(lines[2].startswith("  " + sgr("1;31", "FAIL") + "  xid "), r)
        warn = [l for l in lines if l.startswith("GPU 4 ")]
        self.assertTrue(warn[0].endswith(" " + sgr("33", "WARN")), r)
        self.assertIn("  " + sgr("33", "WARN") + "  xid ", r.out)

    def test_ps_state_and_health(self):
        r = sim_sh("dgx-a100", SETUP + "$GPUCTL ps --all --color=always\n")
        self.assertOk(r)
        rows = r.out.splitlines()
        self.assertTrue(rows[1].startswith("0       GPU-7678cc1a  free   " + sgr("32", "OK")), r)
        self.assertIn(sgr("1;31", "FAIL"), rows[4], r)
        self.assertIn(sgr("33", "WARN"), rows[5], r)

    def test_machine_formats_never(self):
        for args in (("list", "--format", "json"), ("list", "--format", "csv"),
                     ("list", "--query", "index,temperature.gpu"), ("health", "--format", "json"),
                     ("ps", "--format", "json")):
            r = sim("dgx-a100", "--color=always", *args)
            self.assertOk(r)
            self.assertNotIn(ESC, r.out, args)


class ColorAuto(GpuctlTestCase):
    def test_not_in_a_pipe(self):
        for args in (("list",), ("health",), ("ps", "--all"), ("list", "--wide")):
            r = sim("dgx-a100", *args)
            self.assertOk(r)
            self.assertNotIn(ESC, r.out, args)

    def on_a_terminal(self, cmd, env):
        # script(1) runs the command on a pseudo-terminal, its stdout a tty
        e = {"TERM": "xterm"}
        e.update(env)
        return sim_sh("dgx-a100", "script -qec '%s' /dev/null\n" % cmd, env=e)

    def test_on_a_terminal(self):
        r = self.on_a_terminal("$GPUCTL list", {})
        self.assertOk(r)
        self.assertIn(sgr("32", "OK"), r.out)
        r = self.on_a_terminal("$GPUCTL list", {"NO_COLOR": ""})  # empty: as if unset
        self.assertIn(sgr("32", "OK"), r.out)

    def test_no_color(self):
        for value in ("1", "0", "false"):  # any value but empty
            r = self.on_a_terminal("$GPUCTL list", {"NO_COLOR": value})
            self.assertOk(r)
            self.assertIn("OK", r.out)
            self.assertNotIn(ESC, r.out, value)
        r = self.on_a_terminal("$GPUCTL --color=never list", {})
        self.assertNotIn(ESC, r.out)
        r = self.on_a_terminal("$GPUCTL list", {"TERM": "dumb"})
        self.assertNotIn(ESC, r.out)
        # an explicit request beats the environment (no-color.org's FAQ)
        r = sim("dgx-a100", "--color=always", "list", env={"NO_COLOR": "1"})
        self.assertIn(sgr("32", "OK"), r.out)


class ColorUsage(GpuctlTestCase):
    def test_bad_value_is_a_usage_error(self):
        self.assertOneLineError(sim("dgx-a100", "--color=bogus", "list"), EXIT_USAGE,
                                "--color", "'bogus'")
        for cmd in ("list", "ps", "health"):
            self.assertOneLineError(sim("dgx-a100", cmd, "--color=bogus"), EXIT_USAGE,
                                    cmd, "--color", "'bogus'")
        self.assertOneLineError(sim("dgx-a100", "list", "--color"), EXIT_USAGE, "--color")


if __name__ == "__main__":
    unittest.main()
