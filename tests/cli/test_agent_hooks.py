"""The node agent's hooks (docs/hooks.md; docs/config.md "Hooks"): the real agent on the
simulated DGX A100 with a configuration the test writes, hook programs the test writes (shell
scripts that keep their stdin, argument and environment in files), leases taken and faults
injected by the test.

Expected values come from docs/hooks.md (the event fields, the environment, the log lines), the
configuration the test wrote (pools, durations, limits), the scenario file (GPU UUIDs), the
lease the test took (its holder's pid, label) and docs/idle.md / docs/health.md (the reasons and
findings those rules give). Upper bounds are only the test's patience (no speed is asserted)."""
import glob
import json
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
import unittest

import test_exporter as tx
from cli_facts import Machine
from gpuctl_test import (EXIT_USAGE, GPUCTL, NVSIM, SIMLIB, SRC, GpuctlTestCase, run,
                         wait_until)
from test_agent import AgentCase

INTERVAL = "0.1"
PATIENCE_S = 20
DGX = Machine("dgx-a100")

# A hook that keeps what it was given: its stdin (the event), its argument and environment, one
# set of files per run under OUT.
RECORD = """#!/bin/sh
f=$(mktemp "{out}/run.XXXXXX")
cat > "$f.json"
printf '%s\\n' "$#" "$@" > "$f.args"
env > "$f.env"
touch "$f.done"
"""


class HookCase(AgentCase):
    def setUp(self):
        super().setUp()
        self.out = os.path.join(self.tmp, "out")
        os.mkdir(self.out)
        # a health state file of the test's own: the XIDs one test injects stay in it
        self.state = os.path.join(self.tmp, "health.state")

    def script(self, name, text, mode=0o755):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text.format(out=self.out))
        os.chmod(path, mode)
        return path

    def start(self, conf):
        self.conf = os.path.join(self.tmp, "gpuctl.conf")
        with open(self.conf, "w") as f:
            f.write(conf)
        ag = tx.Exporter("dgx-a100", command="agent", interval=INTERVAL,
                         args=["--ledger", self.ledger, "--lease-dir", self.leases,
                               "--idle-window", "1"],
                         env={"GPUCTL_CONFIG": self.conf, "GPUCTL_HEALTH_STATE": self.state})
        self.addCleanup(ag.close)
        ag.start()
        os.chmod(ag.tmp, 0o755)
        self.ag = ag
        # the simulated kernel log, as nvsim exec gives the agent (sim/README.md)
        self.e = {"NVSIM_STATE_DIR": ag.state, "GPUCTL_NVML_LIBRARY": SIMLIB,
                  "GPUCTL_LEASE_DIR": self.leases, "GPUCTL_CONFIG": self.conf,
                  "GPUCTL_KMSG": os.path.join(ag.state, "kmsg"), "GPUCTL_HEALTH_STATE": self.state}
        self.addCleanup(run, [GPUCTL, "release", "--all"], env=self.e)
        return ag

    def g(self, *args):
        return run([GPUCTL, *args], env=self.e)

    def nv(self, *args):
        r = run([NVSIM, *args], env={"NVSIM_STATE_DIR": self.ag.state})
        self.assertEqual(r.rc, 0, r)

    def hold(self, idx, *extra):
        r = self.g("select", "-n", "1", "--only", str(idx), "--hold", "120", *extra)
        self.assertEqual(r.rc, 0, r)
        r = self.g("ps", "--format", "json")
        return [d for d in r.json()["devices"] if d["index"] == idx][0]["owner"]["pid"]

    def wait_for(self, pred, what, timeout=PATIENCE_S):
        try:
            return wait_until(pred, what, timeout, step=0.05)
        except AssertionError as e:
            self.fail("%s; agent: %s" % (e, self.ag.stderr()))

    def runs(self):
        """Each finished run's event, argv and environment, in the order they ran."""
        out = []
        for done in sorted(glob.glob(os.path.join(self.out, "run.*.done")),
                           key=os.path.getmtime):
            base = done[:-len(".done")]
            with open(base + ".json") as f:
                text = f.read()
            with open(base + ".args") as f:
                args = f.read().split("\n")
            with open(base + ".env") as f:
                env = dict(l.split("=", 1) for l in f.read().splitlines() if "=" in l)
            self.assertTrue(text.endswith("\n") and text.count("\n") == 1, text)
            out.append((json.loads(text), args[1:1 + int(args[0])], env))
        return out

    def events(self, name):
        return [e for e, _, _ in self.runs() if e["event"] == name]

    def lines(self, needle):
        return [l for l in self.ag.stderr().splitlines() if needle in l]

    def samples(self):
        return tx.parse_metrics(tx.http(self.ag.port, "/metrics")[2])[
            "gpuctl_exporter_samples_total"][0][1]

    def envelope(self, e, name):
        """The fields every event has (docs/hooks.md, "Every event")."""
        self.assertEqual(e["version"], 1)
        self.assertEqual(e["event"], name)
        self.assertRegex(e["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertEqual(e["host"], socket.gethostname())


class Events(HookCase):
    def test_health_findings_and_their_clearing_reach_on_health(self):
        hook = self.script("record", RECORD)
        self.start("on_health = %s\n" % hook)
        self.nv("set", "-i", "1", "remap.pending=1")
        # a WARN finding (docs/health.md: remap-pending is WARN), with the watch's JSON fields
        w = self.wait_for(lambda: [e for e in self.events("health")
                                   if e["check"] == "remap-pending"], "remap-pending")
        self.assertEqual(len(w), 1, w)
        self.envelope(w[0], "health")
        self.assertEqual((w[0]["index"], w[0]["uuid"], w[0]["severity"], w[0]["cleared"],
                          w[0]["xid"]), (1, DGX.gpus[1]["uuid"], "WARN", False, None))
        self.assertTrue(w[0]["message"] and w[0]["action"], w[0])
        # a FAIL one: XID 79 is of the fence class
        self.nv("xid", "-i", "2", "79")
        x = self.wait_for(lambda: [e for e in self.events("health") if e["check"] == "xid"],
                          "the XID")
        self.assertEqual((x[0]["index"], x[0]["uuid"], x[0]["severity"], x[0]["xid"]),
                         (2, DGX.gpus[2]["uuid"], "FAIL", 79))
        # its clearing
        self.nv("set", "-i", "1", "remap.pending=0")
        c = self.wait_for(lambda: [e for e in self.events("health")
                                   if e["check"] == "remap-pending" and e["cleared"]],
                          "the clearing")
        self.assertEqual((c[0]["index"], c[0]["severity"], c[0]["message"]), (1, "OK", None))
        # argv: the event's name alone; a minimal environment, never the agent's
        for _, args, env in self.runs():
            self.assertEqual(args, ["health"])
            self.assertEqual(env["PATH"], "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
                             "/sbin:/bin")
            self.assertEqual((env["LANG"], env["HOME"], env["PWD"]), ("C.UTF-8", "/", "/"))
            self.assertEqual(set(env) - {"PATH", "LANG", "HOME", "PWD", "SHLVL", "OLDPWD", "_"},
                             set(), env)
        # informational findings are not events; each finding once
        self.assertEqual(len(self.events("health")), 3, self.events("health"))

    def test_a_lease_start_and_end_reach_their_hooks(self):
        hook = self.script("record", RECORD)
        self.start("on_lease_start = %s\non_lease_end = %s\n[pool training]\ngpus = 2-3\n"
                   % (hook, hook))
        pid = self.hold(3, "--pool", "training", "--label", "exp 7")
        s = self.wait_for(lambda: self.events("lease_start"), "lease_start")
        self.assertEqual(len(s), 1, s)
        self.envelope(s[0], "lease_start")
        me = pwd.getpwuid(os.getuid())
        want = {"pid": pid, "user": me.pw_name, "uid": os.getuid(), "label": "exp 7",
                "pool": "training", "gpus": [{"index": 3, "uuid": DGX.gpus[3]["uuid"]}]}
        self.assertEqual({k: s[0][k] for k in want}, want, s[0])
        self.assertTrue(s[0]["key"].startswith("%d@" % pid), s[0])
        self.assertIs(s[0]["agent_start"], False)
        r = self.g("release", "--all")
        self.assertEqual(r.rc, 0, r)
        e = self.wait_for(lambda: self.events("lease_end"), "lease_end")
        self.assertEqual(len(e), 1, e)
        self.envelope(e[0], "lease_end")
        self.assertEqual({k: e[0][k] for k in want}, want, e[0])
        self.assertEqual((e[0]["key"], e[0]["reason"]), (s[0]["key"], "release"))
        self.assertEqual([a for _, a, _ in self.runs()], [["lease_start"], ["lease_end"]])

    def test_a_restarted_agent_says_which_leases_it_found(self):
        hook = self.script("record", RECORD)
        self.start("on_lease_start = %s\non_lease_end = %s\n" % (hook, hook))
        pid = self.hold(6)
        first = self.wait_for(lambda: self.events("lease_start"), "lease_start")
        self.assertIs(first[0]["agent_start"], False)
        self.assertEqual(self.ag.stop(), 0)
        self.ag.start()  # the same ledger and lease directory; the lease is still held
        both = self.wait_for(lambda: len(self.events("lease_start")) == 2 and
                             self.events("lease_start"), "the second lease_start")
        self.assertEqual((both[1]["pid"], both[1]["key"]), (pid, first[0]["key"]))
        self.assertIs(both[1]["agent_start"], True)
        self.assertEqual(self.events("lease_end"), [])  # stopping ends nothing

    def test_idle_warning_and_take_back_reach_on_idle(self):
        hook = self.script("record", RECORD)
        self.start("on_idle = %s\non_lease_end = %s\nidle_warn = 1s\nidle_release = 2s\n"
                   % (hook, hook))
        pid = self.hold(5, "--label", "notebook")
        ev = self.wait_for(lambda: len(self.events("idle")) >= 2 and self.events("idle"),
                           "the warning and the take-back")
        for e in ev:
            self.envelope(e, "idle")
            want = {"pid": pid, "uid": os.getuid(), "label": "notebook", "pool": "default",
                    "hold": True, "shared": False,
                    "gpus": [{"index": 5, "uuid": DGX.gpus[5]["uuid"]}]}
            self.assertEqual({k: e[k] for k in want}, want, e)
        self.assertEqual([(e["action"], e["rule"], e["limit_seconds"]) for e in ev],
                         [("warn", "idle_warn", 1), ("take-back", "idle_release", 2)])
        self.assertIsNone(ev[0]["reason"])
        self.assertGreaterEqual(ev[0]["idle_seconds"], 1)
        # the reason docs/idle.md gives the holder
        self.assertEqual(ev[1]["reason"], "idle for 2s (idle_release of pool default)")
        end = self.wait_for(lambda: self.events("lease_end"), "lease_end")
        self.assertEqual((end[0]["pid"], end[0]["reason"]), (pid, "evicted"))

    def test_a_violation_reaches_on_violation(self):
        """enforce = watch and a process of root's on GPU 6 with no lease of root's: one
        violation, kind foreign (docs/agent.md, "Violations"), handed to on_violation once with
        the fields agent_violation_json gives; the same process seen at later samples is no
        new violation, so no second run."""
        hook = self.script("record", RECORD)
        self.start("enforce = watch\non_violation = %s\n" % hook)
        p = subprocess.Popen(["sleep", "60"])
        self.addCleanup(p.wait)
        self.addCleanup(p.kill)
        self.nv("proc", "add", "--pid", str(p.pid), "-i", "6", "--mem", "1GiB")
        ev = self.wait_for(lambda: self.events("violation"), "the violation")
        self.envelope(ev[0], "violation")
        want = {"kind": "foreign", "user": "root", "uid": 0, "pid": p.pid, "comm": "sleep",
                "gpu": 6, "uuid": DGX.gpus[6]["uuid"], "pool": "default", "enforce": "watch",
                "holder_pid": None, "action": "log",
                "detail": "no lease of root covers GPU 6"}
        self.assertEqual({k: ev[0][k] for k in want}, want, ev[0])
        first = self.samples()
        self.wait_for(lambda: self.samples() >= first + 5, "five more samples")
        self.assertEqual(len(self.events("violation")), 1, self.runs())
        self.assertEqual([a for _, a, _ in self.runs()], [["violation"]])


# Runs that overlap: each run marks itself running, notes how many are, waits for the test's
# "go", unmarks.
COUNT = """#!/bin/sh
touch "{out}/running.$$"
ls "{out}" | grep -c '^running' > "{out}/seen.$$"
cat > "{out}/event.$$"
while [ ! -e "{out}/go" ]; do sleep 0.05; done
rm "{out}/running.$$"
"""

# A hook that never ends by itself: it ignores SIGTERM, and so does what it started.
HANG = """#!/bin/sh
trap '' TERM
echo $$ > "{out}/leader"
sleep 60 &
echo $! > "{out}/child"
echo "waiting for ever"
wait
"""

# A hook that exits at once and leaves a process holding its output.
ORPHAN = """#!/bin/sh
sleep 60 &
echo $! > "{out}/child"
exit 0
"""

FAIL = """#!/bin/sh
echo "oops: $1"
exit 3
"""


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open("/proc/%d/stat" % pid) as f:
        return f.read().split(")")[-1].split()[0] != "Z"


class Runs(HookCase):
    def test_a_hook_past_its_timeout_is_killed_with_its_group_and_sampling_goes_on(self):
        hook = self.script("hang", HANG)
        self.start("on_lease_start = %s\nhook_timeout = 3s\n" % hook)
        self.hold(4)
        lead = os.path.join(self.out, "leader")
        child = os.path.join(self.out, "child")
        self.wait_for(lambda: os.path.exists(child) and os.path.getsize(child), "the hook")
        with open(lead) as f:
            leader = int(f.read())
        with open(child) as f:
            sleeper = int(f.read())
        # the agent samples on while its hook hangs
        n0 = self.samples()
        self.wait_for(lambda: self.samples() >= n0 + 5, "5 samples while the hook runs")
        self.assertTrue(alive(leader))
        # SIGTERM at 3s (ignored), SIGKILL 2s later: the leader and what it started
        self.wait_for(lambda: not alive(leader) and not alive(sleeper), "the kill")
        line = self.wait_for(lambda: self.lines("timed out"), "the log line")
        self.assertEqual(line, ["gpuctl: agent: hook on_lease_start (%s, pid %d): timed out "
                                "after 3s (SIGTERM to its process group, SIGKILL 2s later)"
                                % (hook, leader)])
        self.assertEqual(self.lines("waiting for ever"),
                         ["gpuctl: agent: hook on_lease_start (%s, pid %d): waiting for ever"
                          % (hook, leader)])
        n1 = self.samples()
        self.wait_for(lambda: self.samples() >= n1 + 3, "samples after the kill")

    def test_what_a_hook_leaves_holding_its_output_is_killed_at_the_timeout(self):
        hook = self.script("orphan", ORPHAN)
        self.start("on_lease_start = %s\nhook_timeout = 1s\n" % hook)
        self.hold(6)
        child = os.path.join(self.out, "child")
        self.wait_for(lambda: os.path.exists(child) and os.path.getsize(child), "the hook")
        with open(child) as f:
            sleeper = int(f.read())
        line = self.wait_for(lambda: self.lines("held its output"), "the log line")
        self.assertEqual(len(line), 1, line)
        self.assertRegex(line[0], r"^gpuctl: agent: hook on_lease_start \(%s, pid \d+\): what it "
                         r"started held its output past 1s: killed$" % re.escape(hook))
        self.wait_for(lambda: not alive(sleeper), "the kill")

    def test_the_agent_stops_soon_with_a_hook_running_and_drops_what_waits(self):
        hook = self.script("hang", HANG)
        self.start("on_lease_start = %s\nhook_timeout = 1h\nhook_max_running = 1\n" % hook)
        self.hold(4)
        child = os.path.join(self.out, "child")
        self.wait_for(lambda: os.path.exists(child) and os.path.getsize(child), "the hook")
        with open(child) as f:
            sleeper = int(f.read())
        self.hold(5)  # waits for the one run
        n = self.samples()
        self.wait_for(lambda: self.samples() >= n + 3, "the second holder sampled")
        t0 = time.monotonic()
        self.ag.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.ag.proc.wait(PATIENCE_S), 0)
        # 5 s more, then SIGTERM (ignored) and SIGKILL 2 s later: not the hour of hook_timeout
        self.assertGreaterEqual(time.monotonic() - t0, 5 + 2 - 0.5)
        self.assertFalse(alive(sleeper))
        self.assertEqual(self.lines("not run"),
                         ["gpuctl: agent: hooks: 1 event not run: the agent stops"])
        self.assertEqual(len(self.lines(": not done 5s after the agent stopped (SIGTERM to its "
                                        "process group, SIGKILL 2s later)")), 1,
                         self.ag.stderr())

    def test_more_events_than_hook_max_running_wait_and_the_bound_holds(self):
        hook = self.script("count", COUNT)
        self.start("on_health = %s\nhook_max_running = 2\nhook_timeout = 1m\n" % hook)
        for i in range(8):  # eight FAIL findings, one per GPU
            self.nv("xid", "-i", str(i), "79")
        running = lambda: glob.glob(os.path.join(self.out, "running.*"))
        self.wait_for(lambda: len(running()) == 2, "two runs")
        # two run (they wait for "go"), six wait; the sample loop goes on meanwhile
        n0 = self.samples()
        self.wait_for(lambda: self.samples() >= n0 + 5, "5 samples while hooks run")
        self.assertEqual(len(running()), 2)
        self.assertEqual(len(glob.glob(os.path.join(self.out, "event.*"))), 2)
        open(os.path.join(self.out, "go"), "w").close()
        self.wait_for(lambda: len(glob.glob(os.path.join(self.out, "event.*"))) == 8 and
                      not running(), "all eight runs")
        seen = []
        for p in glob.glob(os.path.join(self.out, "seen.*")):
            with open(p) as f:
                seen.append(int(f.read()))
        self.assertEqual(len(seen), 8)
        self.assertLessEqual(max(seen), 2, seen)
        gpus = set()
        for p in glob.glob(os.path.join(self.out, "event.*")):
            with open(p) as f:
                e = json.loads(f.read())
            self.assertEqual((e["check"], e["xid"]), ("xid", 79))
            gpus.add(e["index"])
        self.assertEqual(gpus, set(range(8)))
        self.assertEqual(self.lines("dropped"), [])
        self.assertEqual(self.lines("hook on_health"), [])  # all exited 0, said nothing

    def test_a_failing_hook_is_logged_once_per_failure(self):
        hook = self.script("fail", FAIL)
        gone = os.path.join(self.tmp, "nointerpreter")
        self.script("nointerpreter", "#!/nonexistent/sh\nexit 0\n")
        self.start("on_lease_start = %s\non_lease_end = %s\n" % (hook, gone))
        self.hold(1)
        self.hold(2)
        st = self.wait_for(lambda: len(self.lines("exited with status 3")) == 2 and
                           self.lines("exited with status 3"), "two failures")
        self.assertTrue(all(l.startswith("gpuctl: agent: hook on_lease_start (%s, pid " % hook)
                            for l in st), st)
        self.assertEqual(len(self.lines(": oops: lease_start")), 2)
        self.assertEqual(self.g("release", "--all").rc, 0)
        ex = self.wait_for(lambda: len(self.lines("cannot run")) == 2 and
                           self.lines("cannot run"), "two exec failures")
        self.assertEqual(set(ex), {"gpuctl: agent: hook on_lease_end (%s): cannot run: "
                                   "No such file or directory" % gone})
        time.sleep(1)  # nothing more comes of them
        self.assertEqual(len(self.lines("exited with status 3")), 2)
        self.assertEqual(len(self.lines("cannot run")), 2)

    def test_a_hook_made_unsafe_after_the_start_is_not_run(self):
        hook = self.script("record", RECORD)
        self.start("on_lease_start = %s\n" % hook)
        os.chmod(hook, 0o775)
        self.hold(0)
        line = self.wait_for(lambda: self.lines("not run"), "the refusal")
        self.assertEqual(line, ["gpuctl: agent: hook on_lease_start (%s): not run: writable "
                                "by group or others" % hook])
        self.assertEqual(self.runs(), [])


class Unsafe(HookCase):
    """A hook root should not run is a configuration error naming FILE:LINE (exit 2)."""

    def agent(self, conf_text):
        conf = os.path.join(self.tmp, "gpuctl.conf")
        with open(conf, "w") as f:
            f.write(conf_text)
        return conf, run([GPUCTL, "agent", "--listen", "127.0.0.1:1", "--ledger", self.ledger,
                          "--lease-dir", self.leases],
                         env={"GPUCTL_CONFIG": conf, "GPUCTL_NVML_LIBRARY": "/nonexistent"})

    def test_group_writable_and_relative_hooks_are_config_errors(self):
        hook = self.script("hook", RECORD, mode=0o775)
        conf, r = self.agent("# hooks\n\non_idle = %s\n" % hook)
        self.assertOneLineError(r, EXIT_USAGE, "gpuctl: %s:3: on_idle '%s': writable by group "
                                "or others (the agent runs it as root)" % (conf, hook))
        conf, r = self.agent("on_health = hooks/slack\n")
        self.assertOneLineError(r, EXIT_USAGE, "%s:1: on_health 'hooks/slack': not an "
                                "absolute path" % conf)

    def test_other_unsafe_programs(self):
        ok = self.script("ok", RECORD)
        cases = [("not executable", self.script("plain", RECORD, mode=0o644), None),
                 ("writable by group or others", self.script("o", RECORD, mode=0o757), None),
                 ("not a regular file", self.out, None),
                 ("No such file or directory", os.path.join(self.tmp, "missing"), None)]
        # owned by another user (nobody), and a directory others may write to
        other = self.script("other", RECORD)
        os.chown(other, pwd.getpwnam("nobody").pw_uid, -1)
        cases.append(("owned by uid %d" % pwd.getpwnam("nobody").pw_uid, other, None))
        open_dir = os.path.join(self.tmp, "open")
        os.mkdir(open_dir)
        os.chmod(open_dir, 0o777)
        inside = os.path.join(open_dir, "hook")
        os.link(ok, inside)
        cases.append(("its directory %s is writable by group or others" % open_dir, inside,
                      None))
        for why, path, _ in cases:
            conf, r = self.agent("on_lease_end = %s\n" % path)
            self.assertOneLineError(r, EXIT_USAGE, "%s:1: on_lease_end '%s': %s" % (conf, path,
                                                                                    why))
        # a sticky directory (as /tmp) is fine: others cannot replace root's file in it
        os.chmod(open_dir, 0o1777)
        self.assertTrue(stat.S_ISVTX & os.stat(open_dir).st_mode)
        conf, r = self.agent("on_lease_end = %s\n" % inside)
        self.assertNotIn("on_lease_end", r.err, r)


# A stand-in for curl and sendmail: keeps its arguments, its stdin, and (curl) the configuration
# it was given on descriptor 3.
FAKE = """#!/bin/sh
d="{out}/$(basename "$0").$$"
printf '%s\\n' "$@" > "$d.args"
cat > "$d.stdin"
if [ -e /dev/fd/3 ]; then cat /dev/fd/3 > "$d.conf"; fi
exit 0
"""


def documented_events():
    """The example events of docs/hooks.md (```json blocks), by name."""
    with open(os.path.join(SRC, "docs", "hooks.md")) as f:
        blocks = re.findall(r"```json\n(.*?)\n```", f.read(), re.S)
    return {json.loads(b)["event"]: b + "\n" for b in blocks}


class Examples(GpuctlTestCase):
    """dist/hooks/slack and dist/hooks/mail on docs/hooks.md's events, with a stand-in curl and
    sendmail first on PATH."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gpuctl-hook-examples-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.bin = os.path.join(self.tmp, "bin")
        os.mkdir(self.bin)
        for name in ("curl", "sendmail"):
            path = os.path.join(self.bin, name)
            with open(path, "w") as f:
                f.write(FAKE.format(out=self.tmp))
            os.chmod(path, 0o755)
        self.events = documented_events()
        self.assertEqual(set(self.events), {"health", "lease_end", "idle", "violation"})

    def hook(self, name, event, env):
        e = {"PATH": self.bin + ":/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/"}
        e.update(env)
        return subprocess.run([os.path.join(SRC, "dist", "hooks", name), event],
                              input=self.events[event], env=e, capture_output=True, text=True,
                              timeout=30)

    def given(self, name):
        """What the stand-in was given: (argv, stdin, descriptor 3), one run."""
        runs = glob.glob(os.path.join(self.tmp, name + ".*.args"))
        self.assertEqual(len(runs), 1, runs)
        base = runs[0][:-len(".args")]
        with open(base + ".args") as f:
            args = f.read().splitlines()
        with open(base + ".stdin") as f:
            stdin = f.read()
        conf = None
        if os.path.exists(base + ".conf"):
            with open(base + ".conf") as f:
                conf = f.read()
        for p in glob.glob(base + ".*"):
            os.unlink(p)
        return args, stdin, conf

    def test_slack_posts_each_event_to_the_webhook_it_reads_from_a_file(self):
        url = "https://hooks.slack.com/services/T000/B000/XXXXXXXX"
        secret = os.path.join(self.tmp, "slack-webhook")
        with open(secret, "w") as f:
            f.write(url + "\n")
        os.chmod(secret, 0o600)
        for event, text in self.events.items():
            r = self.hook("slack", event, {"GPUCTL_SLACK_WEBHOOK_FILE": secret})
            self.assertEqual((r.returncode, r.stderr), (0, ""), r)
            args, body, conf = self.given("curl")
            # the webhook's format: a POST of JSON with a "text" (api.slack.com/messaging/webhooks)
            self.assertIn("--data", args)
            self.assertEqual(args[args.index("--data") + 1], "@-")
            self.assertIn("Content-Type: application/json", args)
            self.assertIn("--fail", args)
            # the URL in the configuration curl read, never on its command line
            self.assertNotIn(url, " ".join(args))
            self.assertEqual(args[args.index("--config") + 1], "/dev/fd/3")
            self.assertEqual(conf, 'url = "%s"\n' % url)
            msg = json.loads(body)
            self.assertEqual(list(msg), ["text"])
            head, quoted = msg["text"].split("\n", 1)
            self.assertEqual(head, "gpuctl: *%s* on gpu-07" % event)
            self.assertTrue(quoted.startswith("```") and quoted.endswith("```"), quoted)
            self.assertEqual(json.loads(quoted[3:-3]), json.loads(text))
        # no URL: said, and curl never runs
        os.unlink(secret)
        r = self.hook("slack", "health", {"GPUCTL_SLACK_WEBHOOK_FILE": secret})
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no https:// webhook URL", r.stderr)
        self.assertEqual(glob.glob(os.path.join(self.tmp, "curl.*")), [])

    def test_mail_sends_each_event_with_sendmail_t(self):
        to = os.path.join(self.tmp, "mail-to")
        with open(to, "w") as f:
            f.write("gpu-admins@example.org\n")
        for event, text in self.events.items():
            r = self.hook("mail", event, {"GPUCTL_MAIL_TO_FILE": to})
            self.assertEqual((r.returncode, r.stderr), (0, ""), r)
            args, msg, _ = self.given("sendmail")
            self.assertEqual(args, ["-t", "-oi"])  # recipients from the message's To: line
            head, body = msg.split("\n\n", 1)  # RFC 5322: header fields, an empty line, body
            fields = dict(l.split(": ", 1) for l in head.split("\n"))
            self.assertEqual(fields["To"], "gpu-admins@example.org")
            self.assertEqual(fields["Subject"], "gpuctl: %s on gpu-07" % event)
            self.assertIn(text, body)
        # no recipient file: root
        os.unlink(to)
        r = self.hook("mail", "idle", {"GPUCTL_MAIL_TO_FILE": to})
        self.assertEqual(r.returncode, 0, r)
        self.assertIn("To: root\n", self.given("sendmail")[1])

    @unittest.skipUnless(shutil.which("shellcheck"), "shellcheck not installed")
    def test_shellcheck(self):
        r = subprocess.run(["shellcheck", "slack", "mail"], capture_output=True, text=True,
                           cwd=os.path.join(SRC, "dist", "hooks"))
        self.assertEqual(r.returncode, 0, r.stdout)


if __name__ == "__main__":
    unittest.main()
