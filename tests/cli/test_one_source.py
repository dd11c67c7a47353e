"""Help, man page and README tell the same story: every command of `gpuctl --help` has its entry
in the man page's COMMANDS and is mentioned in README.md; every option the man page documents
(OPTIONS, SYNOPSIS) is one that command's --help lists (the reverse of test_cli_main's check
that every --help option is in the SYNOPSIS); README's synopsis of each command lists every
option of its --help (long or short form; run's "[filters as for select]" stands for select's)
and no other. The help text is the source: it is what gpuctl accepts."""
import os
import re
import unittest

from gpuctl_test import SRC, GpuctlTestCase, gpuctl


def man():
    with open(os.path.join(SRC, "docs", "gpuctl.1")) as f:
        return f.read()


def section(text, name):
    start = text.index(".SH " + name)
    end = text.find("\n.SH ", start + 1)
    return text[start:end if end >= 0 else len(text)]


def commands():
    out = gpuctl("--help").out
    block = out.split("Commands:\n", 1)[1].split("\n\n", 1)[0]
    return [l.split()[0] for l in block.splitlines()]


def help_options(cmd=None):
    """The long and short options a --help lists (its "Options:" block, or the global one)."""
    h = gpuctl(cmd, "--help").out if cmd else gpuctl("--help").out
    opts = set(re.findall(r"^  (?:-\w, )?(--[a-z][a-z-]*)", h, re.M))
    opts |= set(re.findall(r"^  (-\w)[, ]", h, re.M))
    opts |= set(re.findall(r"^  (-\w), --", h, re.M))
    return opts, h


class OneSource(GpuctlTestCase):
    def test_every_command_in_the_man_page_and_readme(self):
        cmds = commands()
        self.assertIn("list", cmds)
        described = section(man(), "COMMANDS")
        with open(os.path.join(SRC, "README.md")) as f:
            readme = f.read()
        for c in cmds:
            with self.subTest(command=c):
                self.assertRegex(described, r"\.TP\n\.B %s(?:\s|\\)" % c,
                                 "%s: no entry in the man page's COMMANDS" % c)
                self.assertRegex(readme, r"gpuctl (?:[^`\n]* )?%s\b" % c,
                                 "%s: README.md never mentions it" % c)

    def test_man_options_are_in_help(self):
        text = man().replace("\\-", "-")
        opts = section(text, "OPTIONS")
        subs = re.split(r"^\.SS ", opts, flags=re.M)[1:]
        self.assertGreater(len(subs), 8)
        for sub in subs:
            title, body = sub.split("\n", 1)
            cmds = {"Global options": [None],
                    "select and run: filters": ["select", "run"]}.get(title, [title])
            # the option each .TP describes: the first word of the line after it
            documented = set(re.findall(r"^\.TP\n\.[A-Z]+ (--?[a-z][a-z-]*|-\w)\b", body, re.M))
            self.assertTrue(documented, title)
            for c in cmds:
                with self.subTest(section=title, command=c):
                    have, h = help_options(c)
                    self.assertNotIn("unknown command", h)
                    for o in documented:
                        self.assertIn(o, have, "man page OPTIONS %s: %s is not in %s --help"
                                      % (title, o, c or "gpuctl"))

    def test_synopsis_options_are_in_help(self):
        text = man().replace("\\-", "-")
        syn = section(text, "SYNOPSIS")
        for m in re.finditer(r"\.B gpuctl((?: [a-z]+)*)\n(.*?)(?=\.br\n|\.SH|\Z)", syn, re.S):
            words = m[1].split()
            cmd = words[0] if words else None
            if cmd in ("help",):
                continue
            have, _ = help_options(cmd)
            if cmd in ("select", "run"):  # [FILTERS]: the options of select --help
                have |= help_options("select")[0]
            for o in set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-[a-zA-Z])\b", m[2])):
                with self.subTest(command=cmd, option=o):
                    self.assertIn(o, have, "SYNOPSIS of %s: %s is not in its --help"
                                  % (cmd or "gpuctl", o))

    def test_readme_synopses_match_help(self):
        with open(os.path.join(SRC, "README.md")) as f:
            text = f.read()
        # README's synopses: the plain fenced blocks that start with a gpuctl command line
        found = set()
        for m in re.finditer(r"^```\n((?:sudo )?gpuctl ([a-z]+)[^`]*?)^```", text, re.M):
            block, cmd = m[1], m[2]
            found.add(cmd)
            shown = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-[a-zA-Z])\b", block))
            h = gpuctl(cmd, "--help").out
            accepted = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-[a-zA-Z])\b",
                                      h.split("Options:", 1)[-1]))
            pairs = re.findall(r"^  (?:(-\w), )?(--[a-z][a-z-]*)", h, re.M)
            if "filters as for select" in block:
                sel = gpuctl("select", "--help").out
                accepted |= set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-[a-zA-Z])\b", sel))
                pairs = [p for p in pairs if p[1] not in sel]
            with self.subTest(command=cmd):
                self.assertEqual(shown - accepted, set(), "README's synopsis of %s" % cmd)
                for short, long_ in pairs:
                    if long_ != "--help":
                        self.assertTrue(long_ in shown or (short and short in shown),
                                        "README's synopsis of %s lacks %s" % (cmd, long_))
        self.assertEqual(set(commands()) - found, {"help"}, "commands without a synopsis")


if __name__ == "__main__":
    unittest.main()
