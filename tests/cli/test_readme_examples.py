"""Every shell example in README.md runs as shown on the demo's machine (`make demo`: the
simulated DGX A100, sim/scenarios/dgx-a100.json).

The examples are README's fenced ```sh blocks and the plain ``` blocks whose lines start with
"$ " (the others are synopses). In a block with "$ " lines each of those is a command and the
lines after it are what it prints (stdout, then stderr); in a ```sh block without them every line
is a command that shows no output. The commands of a block run in order on one fresh simulated
machine with a lease directory of its own, as a reader would type them (a hold taken by one is
seen by the next); a block whose commands all start nvsim runs them as they are.

Each command must exit with the status the README implies (0, or the code its exit-code table
gives for the error or verdict shown: STATUS), and where output is shown, the output must be it:
line for line with blanks collapsed, "..." standing for any text within a line and, alone on a
line, for any lines. The few samples that show another machine's particulars (other users' jobs,
a real driver's paths) are checked for their shape instead (SHAPE: the header lines are printed,
every GPU id shown exists on the machine). Jobs the examples start (python, docker) are stubs on
PATH that print their arguments and succeed: what is checked is gpuctl, not the job.

No example is silently left out: NOT_RUNNABLE names each one that cannot run here and why, and
the test fails when the README's examples and the tables here disagree in either direction.

DocCommands (issue 25, "a doc test") widens this to docs/*.md: every gpuctl command line in a
code block of README.md or docs/ either runs as written on a fresh simulated DGX A100 and exits
0 (README's through ReadmeExamples above, with their output), or is an error example listed in
DOC_ERRORS with its status and reason; every synopsis names only options its command's --help
has; and every Prometheus scrape target uses the exporter's default port."""
import os
import re
import shlex
import shutil
import tempfile
import unittest

from gpuctl_test import BUILD, NVSIM, SRC, GpuctlTestCase, run, scenario_gpus

README = os.path.join(SRC, "README.md")
MACHINE = "dgx-a100"

# Examples that do not run inside this test, with the reason.
NOT_RUNNABLE = {
    "make demo": "builds the project and runs the demo: this test runs on that build, and the "
                 "demo's own gpuctl commands are among these examples",
    "make test": "runs the whole suite this test is part of",
}

# Statuses other than 0, from README's "Exit codes" table.
STATUS = {
    "gpuctl select -n 9": 3,                     # no GPU satisfies the request
    "gpuctl select -n 8": 3,
    "gpuctl select -n 4": 3,
    "gpuctl health -i 1": 20,                    # some GPU is FAIL
}

# What the machine needs before a command, as nvsim changes it (sim/README.md).
SETUP = {
    # the FAIL and the WARN the sample shows: XID 79 and a pending row remap on GPU 1
    "gpuctl health -i 1": "nvsim xid -i 1 79; nvsim set -i 1 remap.pending=1",
    # a device that is leased, so that ps prints its table
    "gpuctl ps": "gpuctl select -n 1 --only 1 --hold 3600 --label interactive >/dev/null",
}

# Samples of another machine: checked for shape (see the module's text), with the reason.
SHAPE = {
    "gpuctl info": "a real driver's library paths and the reader's configuration file",
    "gpuctl ps": "other users' jobs (alice's, bob's, carol's, shared leases)",
    "gpuctl top --once": "the host name, the time, a job of alice's",
}

# Output lines that depend on the host running the example, not on the GPUs: the CPUs and
# memory run binds to are the simulated GPUs' (48-63 on node 3), which this host may not have.
HOST_LINES = ("cpus: ", "memory: ")

# Blocks whose commands need a configuration file: the README block that holds this line.
CONFIG_BLOCK = "[pool training]"
CONFIG_COMMANDS = {"gpuctl select -n 4", "gpuctl run -n 2 --pool training -- python train.py"}
# Commands README shows for a member of the training pool (alice): root may use every pool
# (docs/config.md); anyone else gets exit 1 and the line that says the pool is restricted.
POOL_MEMBER = {"gpuctl run -n 2 --pool training -- python train.py"}


def blocks():
    """[(line number of the fence, info string, [lines])] of README's fenced blocks."""
    out, cur = [], None
    with open(README) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if cur is None and line.startswith("```"):
                cur = (n, line[3:].strip(), [])
            elif cur is not None and line.startswith("```"):
                out.append(cur)
                cur = None
            elif cur is not None:
                cur[2].append(line)
    return out


def key(cmd):
    """A command without its trailing comment, blanks collapsed: the tables' keys."""
    words = shlex.split(cmd, comments=True)
    return " ".join(words)


def complete(cmd):
    """Whether cmd is a whole shell command: no quote left open (a quoted argument may span
    lines; an apostrophe in a trailing comment opens nothing)."""
    try:
        shlex.split(cmd, comments=True)
        return True
    except ValueError:
        return False


def examples():
    """[(line, [(command, [shown lines])])] for each example block."""
    out = []
    for n, info, lines in blocks():
        if any(l.startswith("$ ") for l in lines):
            cmds = []
            for l in lines:
                if l.startswith("$ "):
                    cmds.append((l[2:], []))
                elif cmds:
                    cmds[-1][1].append(l)
            out.append((n, cmds))
        elif info == "sh":
            cmds, pending = [], ""
            for l in lines:
                pending = pending + "\n" + l if pending else l
                if complete(pending):
                    if pending.strip():
                        cmds.append((pending, []))
                    pending = ""
            out.append((n, cmds))
    return out


def norm(line):
    return " ".join(line.split())


def pattern(shown):
    """A regular expression for the shown lines (see the module's text)."""
    parts = []
    for l in shown:
        t = norm(l)
        if t == "...":
            parts.append("(?:[^\n]*\n)*?")
            continue
        if t.startswith(HOST_LINES):
            prefix = next(p for p in HOST_LINES if t.startswith(p))
            parts.append(re.escape(prefix) + "[^\n]*\n")
            continue
        parts.append(".*".join(re.escape(s) for s in t.split("...")) + "\n")
    return "".join(parts)


STUB = "#!/bin/sh\necho \"stub: $(basename \"$0\") $*\"\n"


def make_stubs(tmp):
    """A folder in tmp of the jobs the examples start (python, docker) as STUB; its path."""
    stubs = os.path.join(tmp, "stubs")
    os.mkdir(stubs)
    for name in ("python", "docker"):
        p = os.path.join(stubs, name)
        with open(p, "w") as f:
            f.write(STUB)
        os.chmod(p, 0o755)
    return stubs


class ReadmeExamples(GpuctlTestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gpuctl-readme-ex-")
        cls.stubs = make_stubs(cls.tmp)
        config = next(b for b in blocks() if CONFIG_BLOCK in b[2])
        cls.config = os.path.join(cls.tmp, "gpuctl.conf")
        with open(cls.config, "w") as f:
            f.write("\n".join(config[2]) + "\n")
        cls.ids = set()
        for g in scenario_gpus(MACHINE):
            cls.ids.add(g["uuid"])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_every_example_is_accounted_for(self):
        keys = {key(c) for _, cmds in examples() for c, _ in cmds}
        self.assertGreater(len(keys), 20)
        for table in (NOT_RUNNABLE, STATUS, SETUP, SHAPE):
            self.assertEqual(set(table) - keys, set(), "entries for examples README lacks")
        self.assertEqual((CONFIG_COMMANDS | POOL_MEMBER) - keys, set())
        # an example that shows an error line says so in STATUS, and the reverse
        for _, cmds in examples():
            for c, shown in cmds:
                shows_error = any(l.startswith("gpuctl: ") for l in shown)
                verdict = any(re.search(r"\d+ FAIL$", l) for l in shown)
                self.assertEqual(shows_error or verdict, key(c) in STATUS, c)

    def run_block(self, n, cmds):
        """Runs a block's commands in order; [(rc, stdout, stderr)] of each."""
        d = tempfile.mkdtemp(dir=self.tmp, prefix="block-%d-" % n)
        leases = os.path.join(d, "leases")
        os.mkdir(leases, 0o700)  # a personal lease directory (docs/leases.md)
        script = []
        for i, (c, _) in enumerate(cmds):
            k = key(c)
            c = c.replace("build/bin/", os.path.join(BUILD, "bin") + "/")
            if k in SETUP:
                script.append("{ %s; } >/dev/null 2>&1" % SETUP[k])
            script.append("( %s\n) >'%s/%d.out' 2>'%s/%d.err'; echo $? >'%s/%d.rc'"
                          % (c, d, i, d, i, d, i))
        script.append("gpuctl release --all >/dev/null 2>&1 || true")
        env = {"PATH": "%s:%s:%s" % (os.path.join(BUILD, "bin"), self.stubs, os.environ["PATH"]),
               "GPUCTL_LEASE_DIR": leases}
        if any(key(c) in CONFIG_COMMANDS for c, _ in cmds):
            env["GPUCTL_CONFIG"] = self.config
        text = "\n".join(script) + "\n"
        if all(key(c).startswith(("nvsim ", "build/bin/nvsim ")) for c, _ in cmds):
            argv = ["sh", "-c", text]
        else:
            argv = [NVSIM, "exec", MACHINE, "--", "sh", "-c", text]
        p = subprocess_run(argv, env, SRC)
        self.assertEqual(p.rc, 0, p)
        res = []
        for i in range(len(cmds)):
            with open("%s/%d.rc" % (d, i)) as f:
                rc = int(f.read())
            with open("%s/%d.out" % (d, i)) as f:
                out = f.read()
            with open("%s/%d.err" % (d, i)) as f:
                err = f.read()
            res.append((rc, out, err))
        return res

    def check_shape(self, c, shown, out):
        heads = [norm(l) for l in shown
                 if re.fullmatch(r"[A-Z][A-Z0-9%^_/ -]*", l.strip()) and len(l.split()) >= 3]
        self.assertTrue(heads, "a SHAPE sample shows a header: %s" % c)
        got = {norm(l) for l in out.splitlines()}
        for h in heads:
            self.assertIn(h, got, "%s: header %r\n%s" % (c, h, out))
        for u in re.findall(r"GPU-[0-9a-f]{8}[0-9a-f-]*", "\n".join(shown)):
            self.assertTrue(any(i.startswith(u) for i in self.ids), "%s: no GPU %s" % (c, u))

    def test_examples_run_as_shown(self):
        for n, cmds in examples():
            runnable = [(c, s) for c, s in cmds if key(c) not in NOT_RUNNABLE]
            if not runnable:
                continue
            with self.subTest(block=n):
                results = self.run_block(n, runnable)
                for (c, shown), (rc, out, err) in zip(runnable, results):
                    k = key(c)
                    want = STATUS.get(k, 0)
                    if k in POOL_MEMBER and os.geteuid() != 0:
                        self.assertEqual(rc, 1, (c, out, err))
                        self.assertIn("restricted", err)
                        continue
                    self.assertEqual(rc, want, "README.md:%d: %s\nstdout:\n%s\nstderr:\n%s"
                                     % (n, c, out, err))
                    if not shown:
                        continue
                    if k in SHAPE:
                        self.check_shape(c, shown, out)
                        continue
                    text = "".join(norm(l) + "\n" for l in (out + err).splitlines())
                    self.assertRegex(text, "\\A" + pattern(shown) + "\\Z",
                                     "README.md:%d: %s" % (n, c))

    def test_config_block_ids_exist(self):
        # the pool example's GPUs are the demo machine's
        config = next(b for b in blocks() if CONFIG_BLOCK in b[2])
        for u in re.findall(r"GPU-[0-9a-f]+", "\n".join(config[2])):
            self.assertTrue(any(i.startswith(u) for i in self.ids), u)


def subprocess_run(argv, env, cwd):
    """run() from the source directory (README's paths are relative to it)."""
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return run(argv, env=env, timeout=300)
    finally:
        os.chdir(old)


# ---- every gpuctl command of README.md and docs/*.md (issue 25: "a doc test") ----

DOCS = [README] + sorted(os.path.join(SRC, "docs", f) for f in os.listdir(os.path.join(SRC, "docs"))
                         if f.endswith(".md"))
# A command line: optional VAR=value assignments, sudo, srun with its options or eval "$(, then
# gpuctl (DocCommands strips srun: see there).
COMMAND = re.compile(r"^(?:[A-Z_]+=\S*\s+)*(?:sudo\s+|srun(?:\s+-\S+)*\s+|eval\s+\"\$\()?"
                     r"(?:build/bin/)?gpuctl(?:\s|$)")
# A synopsis: a command written with placeholders ([-i IDS], -n N, DIR), not runnable as written.
SYNOPSIS = re.compile(r"\[|\b(?:N|IDS|DIR|FILE|SECONDS|PCT|SIZE|NAME|ADDR|PORT|COUNT)\b")

# Deliberate error examples of docs/: the exit status the docs' "Exit codes" table gives for
# what they show, and why they fail.
DOC_ERRORS = {
    "SLURM_STEP_GPUS=3 gpuctl select -n 1":
        (2, "docs/slurm.md shows the refusal of a Slurm GPU number that the node's gres.conf "
            "does not list (an outer allocation that cannot be read: exit 2)"),
}
# What a command needs around it, as the docs describe the machine it runs on: files written
# into the command's scratch directory ($DOCDIR) and variables.
DOC_SETUP = {
    # the node gpu02 whose gres.conf lists 3 GPUs (docs/slurm.md, "2.")
    "SLURM_STEP_GPUS=3 gpuctl select -n 1": (
        {"gres.conf": "".join("NodeName=gpu02 Name=gpu File=/dev/nvidia%d\n" % i
                              for i in range(3))},
        {"SLURMD_NODENAME": "gpu02", "SLURM_CONF": "$DOCDIR/slurm.conf"}),
}
# Commands run other than as written, with the reason.
DOC_REWRITE = {
    'gpuctl slurm gres --node "$(hostname -s)" > /etc/slurm/gres.d/$(hostname -s).conf':
        ('gpuctl slurm gres --node "$(hostname -s)" > "$DOCDIR/$(hostname -s).conf"',
         "the test writes nothing under /etc: the same output goes to its scratch directory"),
}
# Commands not run at all, with the reason (a skip is not a pass: keep it short).
DOC_SKIPPED = {}


def doc_blocks(path):
    """[(line of the fence, info string, [(line number, line)])] of a Markdown file's fenced
    blocks (also indented ones, inside list items)."""
    out, cur = [], None
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if line.lstrip().startswith("```"):
                if cur is None:
                    cur = (n, line.strip()[3:].strip(), [])
                else:
                    out.append(cur)
                    cur = None
            elif cur is not None:
                cur[2].append((n, line))
    return out


def doc_commands():
    """[(file, line, command, synopsis?)] of every gpuctl command line in the docs' shell-like
    code blocks: in a block with "$ " lines those (the rest is output), else every line, with
    a trailing backslash joining the next."""
    out = []
    for path in DOCS:
        name = os.path.relpath(path, SRC)
        for _, info, lines in doc_blocks(path):
            if info not in ("", "sh", "shell", "bash", "console"):
                continue
            prompt = any(l.lstrip().startswith("$ ") for _, l in lines)
            pending, sep, last = None, "\n", None
            for n, l in lines:
                t = l.strip()
                if prompt:
                    if not t.startswith("$ "):
                        continue
                    t = t[2:]
                pending = (pending[0], pending[1] + sep + t) if pending else (n, t)
                sep = "\n"
                if t.endswith("\\"):  # continued on the next line
                    pending, sep = (pending[0], pending[1][:-1].rstrip()), " "
                    continue
                if not complete(pending[1]):  # a quoted argument spans lines
                    continue
                n0, cmd = pending
                pending = None
                if not prompt and l[:1].isspace() and t.startswith("[") and last == n - 1:
                    # a synopsis continued, indented: "             [--exclude IDS] ..."
                    out[-1] = (name, out[-1][1], out[-1][2] + " " + cmd, True)
                    last = n
                elif COMMAND.match(cmd):
                    out.append((name, n0, cmd, bool(SYNOPSIS.search(cmd))))
                    last = n if out[-1][3] else None
    return out


def help_options(command):
    """The options `gpuctl COMMAND --help` names (its usage line and its option column)."""
    r = run([os.path.join(BUILD, "bin", "gpuctl"), *command.split(), "--help"])
    assert r.rc == 0, r
    return set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", r.out))


class DocCommands(GpuctlTestCase):
    """Every gpuctl command line in the code blocks of README.md and docs/*.md: each one written
    to run is run as written (srun's options aside: there is no Slurm here, so the gpuctl part
    runs on the whole simulated machine; tests/cli/test_slurm.py runs it under real Slurm) on a
    fresh simulated DGX A100 with a lease directory of its own, and exits 0, or the status
    DOC_ERRORS gives with the reason; README's are run, with their output checked, by
    ReadmeExamples. Each synopsis (a line with placeholders) names only options that its
    command's --help has. A usage error (exit 2) is what this catches first."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="gpuctl-doc-commands-")
        cls.stubs = make_stubs(cls.tmp)
        cls.commands = doc_commands()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_tables_name_documented_commands(self):
        docs = {key(c) for f, _, c, syn in self.commands if not syn and f != "README.md"}
        self.assertGreater(len(docs), 5)
        for table in (DOC_ERRORS, DOC_SETUP, DOC_SKIPPED):
            self.assertEqual(set(table) - docs, set(), "entries for commands docs/ lacks")
        written = {c for f, _, c, syn in self.commands if not syn}
        self.assertEqual(set(DOC_REWRITE) - written, set())

    def test_readme_commands_are_its_examples(self):
        # README's runnable commands are ReadmeExamples' (run there with their output)
        ran = {key(c) for _, cmds in examples() for c, _ in cmds}
        for f, n, c, syn in self.commands:
            if f == "README.md" and not syn:
                self.assertIn(key(c), ran, "README.md:%d: %s" % (n, c))

    def test_synopses_name_real_options(self):
        seen = 0
        for f, n, c, syn in self.commands:
            if not syn:
                continue
            words = shlex.split(c.replace("|", " | "))
            words = words[words.index("gpuctl") + 1:]
            sub = [w for w in words[:2] if re.fullmatch(r"[a-z]+", w)]
            if sub[1:] and sub[0] not in ("slurm", "lease"):
                sub = sub[:1]
            opts = set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", " ".join(words)))
            with self.subTest(doc="%s:%d" % (f, n)):
                self.assertEqual(opts - help_options(" ".join(sub)), set(),
                                 "%s:%d: %s" % (f, n, c))
            seen += 1
        self.assertGreater(seen, 10)

    def test_commands_run_as_written(self):
        ran = 0
        for f, n, c, syn in self.commands:
            k = key(c)
            if syn or f == "README.md" or k in DOC_SKIPPED:
                continue
            with self.subTest(doc="%s:%d" % (f, n)):
                self.run_doc_command(f, n, c)
            ran += 1
        self.assertGreater(ran, 5)

    def run_doc_command(self, f, n, c):
        k = key(c)
        d = tempfile.mkdtemp(dir=self.tmp, prefix="cmd-%d-" % n)
        os.mkdir(os.path.join(d, "leases"), 0o700)
        files, extra = DOC_SETUP.get(k, ({}, {}))
        for name, text in files.items():
            with open(os.path.join(d, name), "w") as fh:
                fh.write(text)
        c = DOC_REWRITE.get(c, (c,))[0]
        c = re.sub(r"^srun(?:\s+-\S+)*\s+", "", c)
        env = {"PATH": "%s:%s:%s" % (os.path.join(BUILD, "bin"), self.stubs, os.environ["PATH"]),
               "GPUCTL_LEASE_DIR": os.path.join(d, "leases"), "DOCDIR": d}
        env.update({v: x.replace("$DOCDIR", d) for v, x in extra.items()})
        script = "cd \"$DOCDIR\"\n%s\nrc=$?\ngpuctl release --all >/dev/null 2>&1\nexit $rc\n" % c
        r = run([NVSIM, "exec", "--sysfs", MACHINE, "--", "sh", "-c", script], env=env,
                timeout=120)
        want = DOC_ERRORS.get(k, (0, ""))[0]
        self.assertEqual(r.rc, want, "%s:%d: %s\n%s" % (f, n, c, r))

    def test_scrape_targets_use_the_exporters_port(self):
        # docs/slurm.md once scraped 9400 (dcgm-exporter's port) where gpuctl listens on 9409
        with open(os.path.join(SRC, "docs", "metrics.md")) as fh:
            m = re.search(r"default listen address is `:(\d+)`", fh.read())
        self.assertTrue(m, "docs/metrics.md no longer states the default port")
        port = m.group(1)
        r = run([os.path.join(BUILD, "bin", "gpuctl"), "exporter", "--help"])
        self.assertIn("(default :%s)" % port, r.out)
        targets = 0
        for path in DOCS:
            for _, _, lines in doc_blocks(path):
                for n, l in lines:
                    for t in re.findall(r"targets:\s*\[([^\]]*)\]", l):
                        for host in re.findall(r"'([^']+)'", t):
                            targets += 1
                            self.assertEqual(host.rsplit(":", 1)[1], port,
                                             "%s:%d: %s" % (os.path.relpath(path, SRC), n, l))
        self.assertGreaterEqual(targets, 2)


if __name__ == "__main__":
    unittest.main()
