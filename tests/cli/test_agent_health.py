"""gpuctl agent's health watch and its health-failover endings (docs/agent.md, "The health watch"
and "Endings"): the real binary on a simulated DGX A100 (nvsim exec), with every file it writes
(ledger, health state file, lease directory) in a scratch directory of the test's own.

Expected values come from the documentation and the injected faults: docs/health.md's check
table (XID 79 is of the fence class: check `xid`, FAIL; a pending row remap: `remap-pending`,
WARN), the line format of "Watching" (`TIME  GPU N  UUID  SEVERITY  CHECK  MESSAGE (action:
...)`, `OK    CHECK  cleared`), the scenario's UUIDs (cli_facts), and docs/agent.md's rule for
health failovers."""
import json
import os
import re
import shutil
import sqlite3
import tempfile
import textwrap
import unittest

import test_exporter as tx
from cli_facts import Machine
from gpuctl_test import BUILD, EMPTY_CONFIG, GPUCTL, NVSIM, GpuctlTestCase, run

LOAD = os.path.join(BUILD, "bin", "nvsim-load")
SCENARIO = "dgx-a100"

# A finding line of health --watch's text (docs/health.md, "Watching"), after its time stamp.
LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ  (GPU \S+  \S+  (OK|WARN|FAIL) +\S+  .*)$")

# Inside the simulated machine: runs the agent (and, for the comparison, health --watch) while
# the script in STEPS changes the machine; helpers wait for what the test needs, with deadlines.
DRIVER = textwrap.dedent(r'''
    import json, os, re, signal, subprocess, sys, time
    G, NV, T = os.environ["GPUCTL"], os.environ["NVSIM"], os.environ["TMPD"]
    out = {}
    def wait(what, cond, secs=30):
        end = time.time() + secs
        while time.time() < end:
            if cond():
                return
            time.sleep(0.05)
        raise SystemExit("timed out waiting for " + what)
    def text(path):
        try:
            with open(path) as f:
                return f.read()
        except FileNotFoundError:
            return ""
    agent = subprocess.Popen([G, "agent", "--listen", "127.0.0.1:" + os.environ["PORT"],
                              "--interval", "0.2", "--ledger", T + "/ledger.db",
                              "--lease-dir", T + "/leases", "--health-state",
                              T + "/agent.state"],
                             stdout=subprocess.DEVNULL, stderr=open(T + "/agent.err", "w"))
    wait("the agent's state file", lambda: os.path.exists(T + "/agent.state"))
    exec(os.environ["STEPS"])
    agent.send_signal(signal.SIGTERM)
    out["agent_rc"] = agent.wait(20)
    out["agent_err"] = text(T + "/agent.err")
    print(json.dumps(out))
''')

COMPARE = textwrap.dedent(r'''
    watch = subprocess.Popen([G, "health", "--watch", "--interval", "1", "--state",
                              T + "/watch.state"],
                             stdout=open(T + "/watch.out", "w"), stderr=subprocess.DEVNULL)
    wait("the watch's state file", lambda: os.path.exists(T + "/watch.state"))
    subprocess.run([NV, "xid", "-i", "2", "79"], check=True)
    subprocess.run([NV, "set", "-i", "1", "remap.pending=1"], check=True)
    both = lambda s: s in text(T + "/agent.err") and s in text(T + "/watch.out")
    wait("the findings", lambda: both("  xid  ") and both("  remap-pending  a row"))
    subprocess.run([NV, "set", "-i", "1", "remap.pending=0"], check=True)
    wait("the clearing", lambda: both("remap-pending  cleared"))
    watch.send_signal(signal.SIGTERM)
    watch.wait(20)
    out["watch_out"] = text(T + "/watch.out")
    # one-shot, without the kernel log: the XID NVML delivered to the agent, from its file
    env = dict(os.environ, GPUCTL_HEALTH_STATE=T + "/agent.state")
    p = subprocess.run([G, "health", "--format", "json", "--kmsg", "/dev/null"], env=env,
                       capture_output=True, text=True)
    out["oneshot"] = {"rc": p.returncode, "out": p.stdout, "err": p.stderr}
''')

# gpuctl run --retry on two GPUs (test_failover.py's job: its first launch runs long, its
# relaunch briefly); XID 79 on the first of them once the job's processes are on both.
FAILOVER = textwrap.dedent(r'''
    os.environ["GPUCTL_LEASE_DIR"] = T + "/leases"
    job_sh = ('if [ "$GPUCTL_RESTART_COUNT" = 0 ]; then exec "$LOAD" --seconds 30; '
              'else exec "$LOAD" --seconds 2; fi')
    job = subprocess.Popen([G, "run", "-n", "2", "--retry", "2", "--", "sh", "-c", job_sh],
                           stdout=subprocess.DEVNULL, stderr=open(T + "/job.err", "w"))
    def leased():
        p = subprocess.run([G, "ps", "--format", "json"], capture_output=True, text=True)
        return sorted(d["index"] for d in json.loads(p.stdout)["devices"]
                      if d["state"] == "leased")
    def busy():
        held = leased()
        p = subprocess.run([G, "list", "--format", "json"], capture_output=True, text=True)
        gpus = json.loads(p.stdout)["gpus"]
        return len(held) == 2 and all(gpus[i]["processes"] for i in held)
    wait("the job on its GPUs", busy, 60)
    held = leased()
    time.sleep(1)  # a few samples of the agent see it on healthy GPUs
    subprocess.run([NV, "xid", "-i", str(held[0]), "79"], check=True)
    out["held"] = held
    out["job_rc"] = job.wait(90)
    out["job_err"] = text(T + "/job.err")
    time.sleep(1)  # the agent's samples see the lease released
''')

# NVML stops answering (sim/README.md: `nvsim hang`), then answers again.
HANG = textwrap.dedent(r'''
    subprocess.run([NV, "hang", "nvmlDeviceGetCount_v2"], check=True)
    wait("the hang", lambda: subprocess.run([NV, "hung"], capture_output=True,
                                            text=True).stdout.strip())
    wait("the finding", lambda: "nvml-hang  NVML" in text(T + "/agent.err"))
    subprocess.run([NV, "unhang"], check=True)
    wait("the clearing", lambda: "nvml-hang  cleared" in text(T + "/agent.err"))
''')

# Two --hold leases: one on a GPU that failed before it was taken (--allow-unhealthy), one on a
# GPU that fails under it; then both are released.
HOLDS = textwrap.dedent(r'''
    os.environ["GPUCTL_LEASE_DIR"] = T + "/leases"
    def agent_saw(gpu):
        return lambda: re.search(r"GPU %d  \S+  FAIL  xid  XID 79 " % gpu, text(T + "/agent.err"))
    subprocess.run([NV, "xid", "-i", "3", "79"], check=True)
    wait("the agent's finding", agent_saw(3))
    for args in (["--only", "3", "--allow-unhealthy"], ["--only", "5"]):
        subprocess.run([G, "select", "-n", "1", "--hold", "60", *args], check=True,
                       stdout=subprocess.DEVNULL)
    time.sleep(1)  # a few samples see both held
    subprocess.run([NV, "xid", "-i", "5", "79"], check=True)
    wait("the agent's finding", agent_saw(5))
    time.sleep(1)
    subprocess.run([G, "release", "--all"], check=True, stdout=subprocess.DEVNULL)
    time.sleep(1)  # the agent's samples see them released
''')


class AgentHealthCase(GpuctlTestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gpuctl-agent-health-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def drive(self, steps):
        env = tx.test_env({"GPUCTL": GPUCTL, "NVSIM": NVSIM, "LOAD": LOAD, "TMPD": self.tmp,
                           "DRIVER": DRIVER, "STEPS": steps, "PORT": str(tx.free_port()),
                           "GPUCTL_CONFIG": EMPTY_CONFIG})
        r = run([NVSIM, "exec", SCENARIO, "--", "sh", "-c", 'python3 -c "$DRIVER"'], env=env,
                timeout=180)
        self.assertEqual(r.rc, 0, r)
        res = json.loads(r.out.strip().splitlines()[-1])
        self.assertEqual(res["agent_rc"], 0, res)
        return res

    @staticmethod
    def findings(text):
        """The finding lines of a text, without their time stamps."""
        return [m.group(1) for m in map(LINE.match, text.splitlines()) if m]


class Findings(AgentHealthCase):
    def test_agent_logs_what_health_watch_prints_and_keeps_the_state_file(self):
        res = self.drive(COMPARE)
        agent = self.findings(res["agent_err"])
        uuid1 = Machine(SCENARIO).gpus[1]["uuid"][:12]  # short form: GPU- and 8 hex digits
        uuid2 = Machine(SCENARIO).gpus[2]["uuid"][:12]
        # docs/health.md: XID 79 is fence class, FAIL; a pending remap WARN; cleared is OK
        xid = [l for l in agent if re.match(r"GPU 2  %s  FAIL  xid  XID 79 " % uuid2, l)]
        self.assertEqual(len(xid), 1, res["agent_err"])
        self.assertIn("(action: ", xid[0])
        self.assertEqual(len([l for l in agent if l.startswith(
            "GPU 1  %s  WARN  remap-pending  " % uuid1)]), 1, res["agent_err"])
        self.assertIn("GPU 1  %s  OK    remap-pending  cleared" % uuid1, agent)
        self.assertEqual(len(agent), 3, res["agent_err"])  # each once; nothing else found
        # the same lines as health --watch printed for the same faults
        self.assertEqual(sorted(agent), sorted(self.findings(res["watch_out"])), res)
        # a one-shot check that cannot read the kernel log has the XID from the agent's file
        one = res["oneshot"]
        self.assertEqual(one["rc"], 20, one)  # docs/health.md: some FAIL
        doc = json.loads(one["out"])
        self.assertEqual(doc["state_file"], os.path.join(self.tmp, "agent.state"))
        for g in doc["gpus"]:
            checks = [(f["check"], f["severity"], f.get("xid")) for f in g["findings"]]
            self.assertEqual(checks, [("xid", "FAIL", 79)] if g["index"] == 2 else [], doc)

    def test_nvml_not_answering_is_one_finding_cleared_when_it_answers(self):
        res = self.drive(HANG)
        # docs/health.md, "A hung driver": check nvml-hang, WARN, no GPU; said once, cleared
        lines = self.findings(res["agent_err"])
        self.assertEqual(len(lines), 2, res["agent_err"])
        self.assertRegex(lines[0], r"^GPU -  -  WARN  nvml-hang  NVML not answering for \d+ s "
                         r"\(action: ")
        self.assertEqual(lines[1], "GPU -  -  OK    nvml-hang  cleared")


@unittest.skipUnless(os.path.exists(LOAD), "nvsim-load not built")
class Failover(AgentHealthCase):
    def records(self):
        con = sqlite3.connect("file:%s?mode=ro" % os.path.join(self.tmp, "ledger.db"), uri=True)
        try:
            con.row_factory = sqlite3.Row
            return [dict(r) for r in con.execute(
                "SELECT * FROM records WHERE kind = 'lease' ORDER BY id")]
        finally:
            con.close()

    def test_run_retry_moved_off_a_failed_gpu_ends_health_failover(self):
        res = self.drive(FAILOVER)
        self.assertEqual(res["job_rc"], 0, res)  # its relaunch succeeded (test_failover.py)
        gpus = Machine(SCENARIO).gpus
        failed = gpus[res["held"][0]]["uuid"]
        other = gpus[res["held"][1]]["uuid"]
        recs = self.records()
        # docs/agent.md, "Endings": the record of the launch on the failed GPU ends
        # health-failover; the same holder goes on in a new record from the same sample, on
        # the GPUs of its relaunch (the healthy one kept only when chosen again:
        # docs/leases.md, "Failover"), and ends release
        self.assertEqual(len(recs), 2, recs)
        first, second = recs
        self.assertEqual(first["key"], second["key"], recs)
        self.assertEqual(first["end_reason"], "health-failover", recs)
        self.assertEqual(set(first["gpus"].split(",")), {failed, other}, recs)
        self.assertEqual(second["start_s"], first["end_s"], recs)
        self.assertEqual(second["end_reason"], "release", recs)
        second_gpus = second["gpus"].split(",")
        self.assertNotIn(failed, second_gpus, recs)
        self.assertEqual(len(second_gpus), 2, recs)
        # and the agent said why: the XID on that GPU (docs/health.md: fence class, FAIL)
        self.assertRegex(res["agent_err"], r"GPU %d  %s  FAIL  xid  XID 79 "
                         % (res["held"][0], failed[:12]))

    def test_a_lease_ends_health_failover_only_when_its_gpu_failed_under_it(self):
        self.drive(HOLDS)
        gpus = Machine(SCENARIO).gpus
        ends = {r["gpus"]: r["end_reason"] for r in self.records()}
        # docs/agent.md, "Endings": GPU 5 failed under its holder; GPU 3 was FAIL already
        self.assertEqual(ends, {gpus[3]["uuid"]: "release", gpus[5]["uuid"]: "health-failover"})


if __name__ == "__main__":
    unittest.main()
