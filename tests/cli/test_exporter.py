"""gpuctl exporter: /metrics in the Prometheus text format over simulated machines, checked by
promtool and scraped by a real Prometheus server; HTTP edge cases; a hung NVML call (the
overdue page, /healthz 503, SIGTERM); options.

Expected metric names, labels and units come from dcgm-exporter's defaults as
/work/shared/reference/health-monitoring.md section 5.1 records them (copied below as
DCGM_DEFAULTS), and values from the scenario files (cli_facts.Machine), never from gpuctl.

Every exporter runs on a loopback port found free just before (bind to port 0, close) and is
retried on "address in use"; every process a test starts is stopped in tearDown/finally, killed
if it does not stop. Waits are bounded (deadlines below).
"""
import json
import os
import re
import shutil
import select
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request
from http.client import HTTPConnection

import workload_layouts
from cli_facts import Machine, MIB
from gpuctl_test import (EMPTY_CONFIG, EXIT_FAILURE, EXIT_NODRIVER, EXIT_OK, EXIT_USAGE, GPUCTL,
                         LEASE_DIR, NVSIM, SCENARIOS, SIMLIB, SRC, GpuctlTestCase, gpuctl, run,
                         scenario_names)

PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus")

# dcgm-exporter's default metrics (health-monitoring.md 5.1): name -> (type, unit).
DCGM_DEFAULTS = {
    "DCGM_FI_DEV_SM_CLOCK": ("gauge", "MHz"),
    "DCGM_FI_DEV_MEM_CLOCK": ("gauge", "MHz"),
    "DCGM_FI_DEV_MEMORY_TEMP": ("gauge", "C"),
    "DCGM_FI_DEV_GPU_TEMP": ("gauge", "C"),
    "DCGM_FI_DEV_POWER_USAGE": ("gauge", "W"),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("counter", "mJ"),
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": ("counter", ""),
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "%"),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("gauge", "%"),
    "DCGM_FI_DEV_ENC_UTIL": ("gauge", "%"),
    "DCGM_FI_DEV_DEC_UTIL": ("gauge", "%"),
    "DCGM_FI_DEV_XID_ERRORS": ("gauge", ""),
    "DCGM_FI_DEV_FB_FREE": ("gauge", "MiB"),
    "DCGM_FI_DEV_FB_USED": ("gauge", "MiB"),
    "DCGM_FI_DEV_FB_RESERVED": ("gauge", "MiB"),
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": ("counter", ""),
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS": ("gauge", ""),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": ("counter", "rows"),
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": ("counter", "rows"),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": ("gauge", "flag"),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gauge", "ratio"),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("gauge", "ratio"),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("gauge", "ratio"),
    "DCGM_FI_PROF_PCIE_TX_BYTES": ("gauge", "bytes/s"),
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("gauge", "bytes/s"),
}
# The last one: dcgm-exporter's etc/default-counters.csv makes DCGM_FI_DRIVER_VERSION a label
# of every series (health-monitoring.md 5.1, "Series format").
DCGM_LABELS = {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname",
               "DCGM_FI_DRIVER_VERSION"}

# What promtool's linter says about dcgm-exporter's own naming (camelCase label modelName,
# counters without _total): accepted for DCGM_* families only, never for gpuctl_*.
DCGM_LINT = re.compile(r"^DCGM_FI_\w+ (counter metrics should have \"_total\" suffix|"
                       r"label names should be written in 'snake_case' not 'camelCase'|"
                       r"metric name should not include type 'counter')$")

START_S = 20    # an exporter answers /healthz within this
STOP_S = 10     # and exits within this after SIGTERM
INTERVAL = "0.2"


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_env(extra=None):
    e = dict(os.environ)
    for k in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES",
              "SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "NVSIM_STATE_DIR", "NVSIM_SCENARIO"):
        e.pop(k, None)
    e["GPUCTL_LEASE_DIR"] = LEASE_DIR
    e["GPUCTL_CONFIG"] = EMPTY_CONFIG
    if extra:
        e.update(extra)
    return e


def http(port, path, method="GET", data=None, headers=None, timeout=10):
    """(status, headers, body) of one request; HTTP errors are answers too."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method, data=data,
                                 headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode(errors="replace")


def wait_answer(proc, port, path, timeout, step=0.05):
    """Polls http://127.0.0.1:port/path until it answers 200 (True), proc exits or timeout
    seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if http(port, path, timeout=2)[0] == 200:
                return True
        except OSError:
            pass
        time.sleep(step)
    return False


def parse_metrics(text):
    """{name: [(labels dict, value float)]} of the text format (the subset gpuctl writes)."""
    out = {}
    line_re = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})? (\S+)$')
    label_re = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = line_re.match(line)
        if not m:
            raise AssertionError("unparsable line: %r" % line)
        labels = {k: v.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
                  for k, v in label_re.findall(m.group(2) or "")}
        out.setdefault(m.group(1), []).append((labels, float(m.group(3))))
    return out


def by_gpu(metrics, name):
    return {int(l["gpu"]): v for l, v in metrics.get(name, [])}


class Exporter:
    """`nvsim exec SCENARIO -- gpuctl exporter` on a free loopback port."""

    def __init__(self, scenario, args=(), env=None, interval=INTERVAL, calls_out=None,
                 command="exporter", preexec_fn=None):
        self.command = command  # "agent" serves the same page (test_agent.py)
        self.preexec_fn = preexec_fn
        self.scenario = scenario
        self.args = list(args)
        self.env = env or {}
        self.interval = interval
        self.calls_out = calls_out
        self.tmp = tempfile.mkdtemp(prefix="gpuctl-exporter-test-")
        self.state = os.path.join(self.tmp, "state")
        self.proc = None
        self.port = None

    def start(self):
        for _ in range(5):
            self.port = free_port()
            shutil.rmtree(self.state, ignore_errors=True)
            self.errf = open(os.path.join(self.tmp, "stderr"), "w+")
            opts = ["--state-dir", self.state]
            if self.calls_out:
                opts += ["--calls-out", self.calls_out]
            argv = [NVSIM, "exec", *opts, self.scenario, "--", GPUCTL, self.command, "--listen",
                    f"127.0.0.1:{self.port}", "--interval", self.interval, *self.args]
            self.proc = subprocess.Popen(argv, env=test_env(self.env), stdout=subprocess.DEVNULL,
                                         stderr=self.errf, preexec_fn=self.preexec_fn)
            deadline = time.monotonic() + START_S
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    if http(self.port, "/healthz", timeout=2)[0] == 200:
                        return self
                except OSError:
                    pass
                time.sleep(0.05)
            if self.proc.poll() is None:
                self.stop()
                raise AssertionError("exporter did not answer within %ds" % START_S)
            if "in use" not in self.stderr():
                raise AssertionError("exporter exited %d: %s" % (self.proc.returncode,
                                                                 self.stderr()))
        raise AssertionError("no free port after 5 tries")

    def stderr(self):
        self.errf.flush()
        self.errf.seek(0)
        return self.errf.read()

    def stop(self, sig=signal.SIGTERM):
        """Stops it; returns its exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(STOP_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("exporter did not stop within %ds" % STOP_S)
        return self.proc.returncode

    def close(self):
        try:
            self.stop()
        finally:
            self.errf.close()
            shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc):
        self.close()

    def get(self, path="/metrics", **kw):
        return http(self.port, path, **kw)

    def metrics(self):
        status, _, body = self.get()
        assert status == 200, (status, body)
        return parse_metrics(body)

    def nvsim(self, *args):
        r = run([NVSIM, *args], env={"NVSIM_STATE_DIR": self.state})
        assert r.rc == 0, r
        return r

    def wait_for(self, pred, what, timeout=15):
        """Scrapes until pred(metrics) holds."""
        deadline = time.monotonic() + timeout
        m = None
        while time.monotonic() < deadline:
            m = self.metrics()
            if pred(m):
                return m
            time.sleep(0.1)
        raise AssertionError("timed out waiting for %s; last scrape: %r" % (what, m))


def promtool_problems(text):
    """promtool check metrics: (exit status, its problem lines)."""
    p = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=60)
    lines = [l for l in (p.stdout + p.stderr).splitlines() if l.strip()]
    return p.returncode, lines


def only_gpuctl_families(text):
    keep, out = False, []
    for line in text.splitlines():
        name = line.split()[2] if line.startswith("# ") else re.split(r"[{ ]", line)[0]
        keep = name.startswith("gpuctl_")
        if keep:
            out.append(line)
    return "\n".join(out) + "\n"


@unittest.skipUnless(PROMTOOL, "promtool (Debian package prometheus) not installed")
class TestPromtool(GpuctlTestCase):
    def check(self, text):
        rc, lines = promtool_problems(text)
        self.assertIn(rc, (0, 3), "\n".join(lines))  # 1: the text does not parse
        bad = [l for l in lines if not DCGM_LINT.match(l)]
        self.assertEqual(bad, [], text)
        # gpuctl's own families pass the linter outright
        rc, lines = promtool_problems(only_gpuctl_families(text))
        self.assertEqual((rc, lines), (0, []), text)

    def test_every_scenario(self):
        for name in scenario_names():
            with self.subTest(scenario=name), Exporter(name) as ex:
                status, headers, body = ex.get()
                self.assertEqual(status, 200)
                self.assertEqual(headers["Content-Type"],
                                 "text/plain; version=0.0.4; charset=utf-8")
                self.assertIn("DCGM_FI_DEV_GPU_TEMP{", body)
                self.check(body)

    def test_leases_processes_lost_gpu_and_escaping(self):
        """Every optional family at once: a lease with a label that needs escaping, a compute
        process, MIG devices, a lost GPU."""
        label = 'a "quoted" back\\slash'
        with Exporter("a100-mig") as ex:
            sleeper = subprocess.Popen(["sleep", "60"])
            holder = subprocess.Popen(
                [GPUCTL, "run", "-n", "1", "--mig", "1g.5gb", "--label", label, "--", "sleep",
                 "60"], env=test_env({"NVSIM_STATE_DIR": ex.state, "GPUCTL_NVML_LIBRARY": SIMLIB}),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                ex.nvsim("proc", "add", "--pid", str(sleeper.pid), "-i", "1", "--mem", "1GiB")
                m = ex.wait_for(lambda m: "gpuctl_lease_holder_info" in m and
                                "gpuctl_process_memory_used_bytes" in m, "lease and process")
                labels = [l for l, _ in m["gpuctl_lease_holder_info"]]
                self.assertEqual([l["label"] for l in labels], [label])
                self.assertTrue(labels[0]["mig"].isdigit(), labels)
                ex.nvsim("set", "-i", "0", "lost=1")
                m = ex.wait_for(lambda m: by_gpu(m, "gpuctl_gpu_lost").get(0) == 1, "lost GPU")
                self.check(ex.get()[2])
            finally:
                for p in (holder, sleeper):
                    p.terminate()
                    p.wait(10)


# A pod name anyone could give (the API server refuses most of it, a runtime's state does not):
# ESC, newline, quote, backslash, and 300 bytes in all.
HOSTILE = ("\x1b[31mevil\n\"pod\"\\" + "x" * 300)[:300]
# What a scrape must show of it: ESC as '?' (docs/metrics.md), the rest unescaped by the parser,
# cut to the library's GPUCTL_WORKLOAD_NAME_MAX, 253 bytes (include/gpuctl/workload.h).
HOSTILE_SHOWN = ("?" + HOSTILE[1:])[:253]


@unittest.skipUnless(PROMTOOL, "promtool (Debian package prometheus) not installed")
class TestWorkloadLabels(GpuctlTestCase):
    """Real processes in a pod's and a Slurm step's cgroups, on simulated GPUs: dcgm-exporter's
    pod/namespace/container and hpc_job labels (names from dcgm-exporter's
    internal/pkg/transformation/const.go, docs/metrics.md), the per-process workload labels, and
    a page promtool accepts with a hostile pod name in it."""

    def setUp(self):
        why = workload_layouts.why_not()
        if why:
            self.skipTest(why)
        self.layouts = workload_layouts.Layouts()
        self.addCleanup(self.layouts.close)

    def test_pod_and_slurm_labels(self):
        pod, _, _ = self.layouts.pod("trainer-7", "ml", "main")
        job = self.layouts.slurm_v1(4242, "0")
        bad, _, _ = self.layouts.pod(HOSTILE, "ns", "c")
        other, _, _ = self.layouts.pod("other", "ml", "main")
        bare = subprocess.Popen(["sleep", "600"])
        self.addCleanup(lambda: (bare.kill(), bare.wait(10)))
        env = {"GPUCTL_WORKLOAD_ROOT": self.layouts.root}
        with Exporter("dgx-a100", env=env) as ex:
            ex.nvsim("proc", "add", "--pid", str(pod.pid), "-i", "0", "--mem", "2GiB")
            ex.nvsim("proc", "add", "--pid", str(job.pid), "-i", "1", "--mem", "2GiB")
            ex.nvsim("proc", "add", "--pid", str(bad.pid), "-i", "2", "--mem", "2GiB")
            # GPU 3: a pod's process and one in no workload: no one holds it
            ex.nvsim("proc", "add", "--pid", str(other.pid), "-i", "3", "--mem", "1GiB")
            ex.nvsim("proc", "add", "--pid", str(bare.pid), "-i", "3", "--mem", "1GiB")
            m = ex.wait_for(lambda m: len(m.get("gpuctl_process_memory_used_bytes", [])) == 5,
                            "five processes")
            body = ex.get()[2]
        util = {int(l["gpu"]): l for l, _ in m["DCGM_FI_DEV_GPU_UTIL"]}
        extra = {g: {k: v for k, v in l.items() if k not in DCGM_LABELS}
                 for g, l in util.items()}
        self.assertEqual(extra[0], {"pod": "trainer-7", "namespace": "ml", "container": "main"})
        self.assertEqual(extra[1], {"hpc_job": "4242"})
        self.assertEqual(extra[2], {"pod": HOSTILE_SHOWN, "namespace": "ns", "container": "c"})
        for g in range(3, 8):
            self.assertEqual(extra[g], {}, g)
        info = {int(l["gpu"]): (l["kind"], l.get("pod"), l.get("hpc_job"))
                for l, _ in m["gpuctl_gpu_workload_info"]}
        self.assertEqual(info, {0: ("pod", "trainer-7", None), 1: ("slurm", None, "4242"),
                                2: ("pod", HOSTILE_SHOWN, None)})
        procs = {(int(l["gpu"]), int(l["pid"])): l
                 for l, _ in m["gpuctl_process_memory_used_bytes"]}
        self.assertEqual(procs[(0, pod.pid)]["workload_kind"], "pod")
        self.assertEqual(procs[(0, pod.pid)]["workload"], "pod ml/trainer-7/main")
        self.assertEqual(procs[(3, other.pid)]["pod"], "other")
        self.assertEqual(procs[(1, job.pid)]["workload_kind"], "slurm")
        self.assertEqual(procs[(1, job.pid)]["hpc_job"], "4242")
        self.assertEqual(procs[(3, bare.pid)]["workload_kind"], "bare")
        self.assertNotIn("pod", procs[(3, bare.pid)])
        self.assertEqual(m["gpuctl_exporter_processes_dropped"], [({}, 0.0)])
        # the hostile name is escaped, never raw: no ESC, a newline only as \n
        self.assertNotIn("\x1b", body)
        TestPromtool.check(self, body)

    def test_process_cap(self):
        sleeps = [self.layouts.slurm_v1(4243, str(i)) for i in range(4)]
        with Exporter("dgx-a100", args=["--max-processes", "2"]) as ex:
            for i, p in enumerate(sleeps):
                ex.nvsim("proc", "add", "--pid", str(p.pid), "-i", str(i), "--mem", "1GiB")
            m = ex.wait_for(lambda m: sum(v for _, v in m["gpuctl_gpu_processes"]) == 4,
                            "four processes")
        self.assertEqual(sorted(int(l["gpu"]) for l, _ in m["gpuctl_process_memory_used_bytes"]),
                         [0, 1])
        self.assertEqual(m["gpuctl_exporter_processes_dropped"], [({}, 2.0)])


def stop_prometheus(p, log):
    p.terminate()
    try:
        p.wait(15)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    log.close()


@unittest.skipUnless(PROMETHEUS, "prometheus (Debian package prometheus) not installed")
class TestPrometheusScrapes(GpuctlTestCase):
    """A real Prometheus server scrapes the exporter over simulated dgx-a100."""

    def start_prometheus(self, target, rules=None):
        """A Prometheus scraping target every second (rules: a rule file to load too), in a
        scratch directory of its own; stopped and removed at the test's cleanup. Its port."""
        tmp = tempfile.mkdtemp(prefix="gpuctl-prometheus-test-")
        self.addCleanup(shutil.rmtree, tmp, True)
        if rules:
            shutil.copy(rules, tmp)
            rules = os.path.basename(rules)
        for _ in range(5):
            port = free_port()
            cfg = os.path.join(tmp, "prometheus.yml")
            with open(cfg, "w") as f:
                f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n")
                if rules:
                    f.write("rule_files:\n  - %s\n" % rules)
                f.write("scrape_configs:\n  - job_name: gpuctl\n    static_configs:\n"
                        "      - targets: ['%s']\n" % target)
                # the relabelling docs/metrics.md gives for dashboards that want `hostname`
                f.write("  - job_name: relabelled\n    static_configs:\n"
                        "      - targets: ['%s']\n" % target + documented_relabelling())
            log = open(os.path.join(tmp, "prometheus.log"), "w+")
            p = subprocess.Popen([PROMETHEUS, "--config.file", cfg, "--storage.tsdb.path",
                                  os.path.join(tmp, "data"), "--web.listen-address",
                                  f"127.0.0.1:{port}"], stdout=log, stderr=log,
                                 cwd=tmp)
            if wait_answer(p, port, "/-/ready", 30, step=0.1):
                self.addCleanup(stop_prometheus, p, log)
                return port
            if p.poll() is None:
                p.kill()
                p.wait()
                log.seek(0)
                raise AssertionError("prometheus not ready: " + log.read()[-2000:])
            log.seek(0)
            text = log.read()
            log.close()
            if "address already in use" not in text:
                raise AssertionError("prometheus exited: " + text[-2000:])
        raise AssertionError("no free port for prometheus")

    def test_gpu_util_reaches_prometheus(self):
        values = {i: 11 + 7 * i for i in range(8)}
        with Exporter("dgx-a100", interval="0.5") as ex:
            for i, v in values.items():
                ex.nvsim("set", "-i", str(i), "utilization.gpu=%d" % v)
            port = self.start_prometheus(f"127.0.0.1:{ex.port}")
            deadline = time.monotonic() + 60
            got = None
            while time.monotonic() < deadline:
                status, _, body = http(port, "/api/v1/query?query=DCGM_FI_DEV_GPU_UTIL"
                                   "%7Bjob%3D%22gpuctl%22%7D")
                if status == 200:
                    res = json.loads(body)["data"]["result"]
                    got = {int(r["metric"]["gpu"]): float(r["value"][1]) for r in res}
                    if got == values:
                        break
                time.sleep(0.5)
            self.assertEqual(got, values)
            # the series carry dcgm-exporter's labels (plus Prometheus' job and instance)
            status, _, body = http(port, "/api/v1/query?query=DCGM_FI_DEV_GPU_UTIL"
                                   "%7Bgpu%3D%220%22%2Cjob%3D%22gpuctl%22%7D")
            labels = set(json.loads(body)["data"]["result"][0]["metric"])
            self.assertEqual(labels, DCGM_LABELS | {"__name__", "job", "instance"})
            # the documented relabelling adds `hostname` with the host's name
            query = "/api/v1/query?query=DCGM_FI_DEV_GPU_UTIL%7Bjob%3D%22relabelled%22%7D"
            deadline = time.monotonic() + 30
            res = []
            while time.monotonic() < deadline and len(res) < 8:
                res = json.loads(http(port, query)[2])["data"]["result"]
                time.sleep(0.5)
            self.assertEqual(len(res), 8)
            for r in res:
                self.assertEqual(r["metric"]["hostname"], r["metric"]["Hostname"])
                self.assertTrue(r["metric"]["hostname"])

    def test_agent_series_reach_prometheus(self):
        """The real Prometheus scrapes `gpuctl agent` (issue 27): the agent serves the
        exporter's page, with the usage counters (docs/metrics.md, "Usage counters"), and the
        shipped recording rule reads them. A lease on GPU 3 makes its held seconds grow."""
        tmp = tempfile.mkdtemp(prefix="gpuctl-prometheus-agent-")
        self.addCleanup(shutil.rmtree, tmp, True)
        leases = os.path.join(tmp, "leases")
        with Exporter("dgx-a100", command="agent", interval="0.5",
                      args=["--ledger", os.path.join(tmp, "ledger.db"),
                            "--lease-dir", leases]) as ag:
            env = {"NVSIM_STATE_DIR": ag.state, "GPUCTL_NVML_LIBRARY": SIMLIB,
                   "GPUCTL_LEASE_DIR": leases, "GPUCTL_CONFIG": EMPTY_CONFIG}
            r = run([GPUCTL, "select", "-n", "1", "--only", "3", "--hold", "120"], env=env)
            self.assertEqual(r.rc, 0, r)
            try:
                port = self.start_prometheus(
                        f"127.0.0.1:{ag.port}",
                        rules=os.path.join(SRC, "dist", "prometheus", "gpuctl.rules.yml"))

                def query(q):
                    status, _, body = http(port, "/api/v1/query?query=" +
                                           urllib.parse.quote(q))
                    return json.loads(body)["data"]["result"] if status == 200 else []
                deadline = time.monotonic() + 60
                held = {}
                while time.monotonic() < deadline:
                    held = {r["metric"]["gpu"]: float(r["value"][1]) for r in
                            query('gpuctl_gpu_held_seconds_total{job="gpuctl"}')}
                    if held.get("3", 0) > 0 and query("gpuctl:gpus_held:rate5m"):
                        break
                    time.sleep(0.5)
                self.assertEqual(set(held), {str(i) for i in range(8)}, held)
                self.assertGreater(held["3"], 0)
                self.assertEqual([g for g, v in held.items() if v > 0], ["3"])
                # the agent's page is the exporter's: the DCGM series too
                self.assertEqual(len(query('DCGM_FI_DEV_GPU_UTIL{job="gpuctl"}')), 8)
                (rec,) = query('gpuctl:gpus_held:rate5m{pool="default"}')
                self.assertGreater(float(rec["value"][1]), 0)
            finally:
                run([GPUCTL, "release", "--all"], env=env)


class TestUsageCounters(GpuctlTestCase):
    """`gpuctl exporter` alone has the usage counters (docs/metrics.md, "Usage counters"): a
    GPU held by a lease, or by a live process of no lease, counts the seconds the test held it
    (to within an interval plus a sample's time on this loaded machine); busy ones count only
    above 10 %; the other GPUs count nothing."""

    SLACK_S = 0.5

    def test_held_and_busy_seconds_follow_a_lease_and_a_process(self):
        tmp = tempfile.mkdtemp(prefix="gpuctl-usage-counters-")
        self.addCleanup(shutil.rmtree, tmp, True)
        leases = os.path.join(tmp, "leases")
        with Exporter("dgx-a100", args=["--lease-dir", leases]) as ex:
            env = {"NVSIM_STATE_DIR": ex.state, "GPUCTL_NVML_LIBRARY": SIMLIB,
                   "GPUCTL_LEASE_DIR": leases, "GPUCTL_CONFIG": EMPTY_CONFIG}
            ex.nvsim("set", "-i", "2", "utilization.gpu=50")
            ex.nvsim("set", "-i", "5", "utilization.gpu=5")
            r = run([GPUCTL, "select", "-n", "1", "--only", "2", "--hold", "120"], env=env)
            self.assertEqual(r.rc, 0, r)
            t_lease = time.monotonic()
            try:
                sleeper = subprocess.Popen(["sleep", "600"])
                try:
                    ex.nvsim("proc", "add", "--pid", str(sleeper.pid), "-i", "5", "--mem",
                             "1GiB")
                    t_proc = time.monotonic()
                    time.sleep(1.5)
                finally:
                    sleeper.kill()
                    sleeper.wait()
                held_proc = time.monotonic() - t_proc
                time.sleep(0.5)
            finally:
                r = run([GPUCTL, "release", "--all"], env=env)
            self.assertEqual(r.rc, 0, r)
            held_lease = time.monotonic() - t_lease
            time.sleep(3 * float(INTERVAL))  # samples that see both gone
            m = ex.metrics()
        held = {l["gpu"]: v for l, v in m["gpuctl_gpu_held_seconds_total"]}
        busy = {l["gpu"]: v for l, v in m["gpuctl_gpu_busy_held_seconds_total"]}
        tol = float(INTERVAL) + self.SLACK_S
        self.assertAlmostEqual(held["2"], held_lease, delta=tol)
        self.assertAlmostEqual(busy["2"], held_lease, delta=tol)  # 50 % > 10 %
        self.assertAlmostEqual(held["5"], held_proc, delta=tol)
        self.assertEqual(busy["5"], 0)  # 5 % is not busy
        self.assertEqual({g: v for g, v in held.items() if g not in ("2", "5")},
                         {str(i): 0 for i in range(8) if i not in (2, 5)})
        # dgx-a100 has no energy counter: no held-energy series (never 0 for unknown)
        self.assertNotIn("gpuctl_gpu_held_energy_joules_total", m)


class TestValues(GpuctlTestCase):
    def test_names_labels_and_scenario_values(self):
        mach = Machine("dgx-a100")
        with Exporter("dgx-a100") as ex:
            status, _, body = ex.get()
            m = parse_metrics(body)
        types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", body, re.M))
        dcgm = {n for n in m if n.startswith("DCGM_")}
        self.assertLessEqual(dcgm, set(DCGM_DEFAULTS))
        self.assertFalse({n for n in m if not n.startswith(("DCGM_", "gpuctl_"))})
        for name in dcgm:
            self.assertEqual(types[name], DCGM_DEFAULTS[name][0], name)
            for labels, _ in m[name]:
                self.assertEqual(set(labels), DCGM_LABELS, name)
        for name in ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_FB_USED",
                     "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL",
                     "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK",
                     "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_ROW_REMAP_FAILURE",
                     "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
                     "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"):
            self.assertEqual(len(m.get(name, [])), len(mach), name)
        hostname = socket.gethostname()
        for labels, _ in m["DCGM_FI_DEV_GPU_TEMP"]:
            i = int(labels["gpu"])
            g = mach.gpus[i]
            self.assertEqual(labels["UUID"], g["uuid"])
            self.assertEqual(labels["pci_bus_id"], g["pci_bus_id"])
            self.assertEqual(labels["device"], "nvidia%d" % i)
            self.assertEqual(labels["modelName"], g["name"])
            self.assertEqual(labels["Hostname"], hostname)
            self.assertEqual(labels["DCGM_FI_DRIVER_VERSION"], mach.system["driver_version"])
        for i, g in enumerate(mach.gpus):
            used = g.get("memory_used_mib", 0)
            free = g["memory_total_mib"] - used - g.get("memory_reserved_mib", 0)
            self.assertEqual(by_gpu(m, "DCGM_FI_DEV_GPU_TEMP")[i], g["temperature_c"])
            self.assertEqual(by_gpu(m, "DCGM_FI_DEV_POWER_USAGE")[i], g["power_draw_mw"] / 1000)
            self.assertEqual(by_gpu(m, "DCGM_FI_DEV_FB_USED")[i], used)
            self.assertEqual(by_gpu(m, "DCGM_FI_DEV_FB_FREE")[i], free)
            self.assertEqual(by_gpu(m, "DCGM_FI_DEV_SM_CLOCK")[i], g["clocks_mhz"]["sm"])
            self.assertEqual(by_gpu(m, "DCGM_FI_DEV_MEM_CLOCK")[i], g["clocks_mhz"]["mem"])
            self.assertEqual(by_gpu(m, "DCGM_FI_DEV_GPU_UTIL")[i], g.get("utilization_gpu", 0))
            self.assertEqual(by_gpu(m, "gpuctl_gpu_lost")[i], 0)
        # one HELP and one TYPE per family, every family in one block
        seen, last = set(), None
        for line in body.splitlines():
            if line.startswith("#"):
                continue
            name = re.split(r"[{ ]", line)[0]
            if name != last:
                self.assertNotIn(name, seen, "family %s split" % name)
                seen.add(name)
                last = name
        self.assertEqual(len(re.findall(r"^# HELP ", body, re.M)), len(types))

    def test_pool_label(self):
        """gpuctl_gpu_info names each GPU's pool (docs/metrics.md): a configured pool's name,
        "default" for the GPUs no pool lists (docs/config.md); the page still lints clean."""
        tmp = tempfile.mkdtemp(prefix="gpuctl-exporter-pool-")
        try:
            conf = os.path.join(tmp, "pools.conf")
            with open(conf, "w") as f:
                f.write("[pool training]\ngpus = 0, 1\n[pool inference]\ngpus = 6\n")
            with Exporter("dgx-a100", env={"GPUCTL_CONFIG": conf}) as ex:
                body = ex.get()[2]
            pools = {int(l["gpu"]): l["pool"] for l, _ in parse_metrics(body)["gpuctl_gpu_info"]}
            self.assertEqual(pools, {0: "training", 1: "training", 2: "default", 3: "default",
                                     4: "default", 5: "default", 6: "inference", 7: "default"})
            if PROMTOOL:
                rc, lines = promtool_problems(only_gpuctl_families(body))
                self.assertEqual((rc, lines), (0, []))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        with Exporter("dgx-a100") as ex:
            m = ex.metrics()
        self.assertEqual({l["pool"] for l, _ in m["gpuctl_gpu_info"]}, {"default"})

    def test_changes_appear_after_an_interval(self):
        with Exporter("dgx-a100") as ex:
            ex.nvsim("set", "-i", "2", "temperature=77", "power.draw=123.456")
            m = ex.wait_for(lambda m: by_gpu(m, "DCGM_FI_DEV_GPU_TEMP").get(2) == 77, "temp")
            self.assertEqual(by_gpu(m, "DCGM_FI_DEV_POWER_USAGE")[2], 123.456)
            self.assertEqual(by_gpu(m, "DCGM_FI_DEV_GPU_TEMP")[1], 30)

    def test_video_engines_memory_temperature_energy(self):
        # absent from the scenario: NOT_SUPPORTED, so no series (never 0); given for GPU 2:
        # the values, in dcgm-exporter's units (%, C, mJ), and their changes
        with open(os.path.join(SCENARIOS, "dgx-a100.json")) as f:
            doc = json.load(f)
        doc["gpus"][2].update({"utilization_encoder": 10, "utilization_decoder": 20,
                               "temperature_memory_c": 55, "energy_mj": 123456789})
        tmp = tempfile.mkdtemp(prefix="gpuctl-exporter-scenario-")
        path = os.path.join(tmp, "engines.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        try:
            with Exporter(path) as ex:
                m = ex.wait_for(lambda m: "DCGM_FI_DEV_GPU_UTIL" in m, "first page")
                self.assertEqual(by_gpu(m, "DCGM_FI_DEV_ENC_UTIL"), {2: 10})
                self.assertEqual(by_gpu(m, "DCGM_FI_DEV_DEC_UTIL"), {2: 20})
                self.assertEqual(by_gpu(m, "DCGM_FI_DEV_MEMORY_TEMP"), {2: 55})
                self.assertEqual(by_gpu(m, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"),
                                 {2: 123456789})
                ex.nvsim("set", "-i", "2", "utilization.encoder=11", "temperature.memory=60",
                         "energy=123456999")
                m = ex.wait_for(lambda m: by_gpu(m, "DCGM_FI_DEV_MEMORY_TEMP") == {2: 60},
                                "the new values")
                self.assertEqual(by_gpu(m, "DCGM_FI_DEV_ENC_UTIL"), {2: 11})
                self.assertEqual(by_gpu(m, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"),
                                 {2: 123456999})
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_samples_refresh_between_whole_snapshots(self):
        """After the first sample, identity and static facts are not read again (a whole
        snapshot comes once a minute) and a value the GPU does not support is not asked
        again: per sample, one device count and the dynamic facts (docs/metrics.md)."""
        tmp = tempfile.mkdtemp(prefix="gpuctl-exporter-calls-")
        try:
            out = os.path.join(tmp, "calls.json")
            with Exporter("dgx-a100", calls_out=out) as ex:
                ex.wait_for(lambda m: m["gpuctl_exporter_samples_total"][0][1] >= 5, "5 samples")
                self.assertEqual(ex.stop(), 0)
            with open(out) as f:
                fns = json.load(f)["functions"]
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        samples = fns["nvmlDeviceGetCount_v2"]  # one per sample, the first snapshot's included
        self.assertGreaterEqual(samples, 5)
        # the health counters (remapped rows, PCIe replays, ECC) and the power draw and limit
        # come in one field-value call
        for fn in ("nvmlDeviceGetUtilizationRates", "nvmlDeviceGetTemperature",
                   "nvmlDeviceGetFieldValues"):
            self.assertEqual(fns[fn], 8 * samples, fn)
        # nor the ECC mode and the NVLink states, which come in the first snapshot's
        # field-value call, the power draw and enforced limit, which come in every sample's,
        # and the architecture, which the remapped-row entries that answered make needless
        # (issue 29)
        for fn in ("nvmlDeviceGetRemappedRows", "nvmlDeviceGetPcieReplayCounter",
                   "nvmlDeviceGetEccMode", "nvmlDeviceGetNvLinkState", "nvmlDeviceGetPowerUsage",
                   "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetArchitecture"):
            self.assertNotIn(fn, fns)
        # identity, static facts (the MIG mode, which the exporter shows) and what dgx-a100
        # does not support: once per GPU
        for fn in ("nvmlDeviceGetUUID", "nvmlDeviceGetName", "nvmlDeviceGetPciInfo_v3",
                   "nvmlDeviceGetMigMode", "nvmlDeviceGetMaxPcieLinkWidth",
                   "nvmlDeviceGetEncoderUtilization", "nvmlDeviceGetTotalEnergyConsumption"):
            self.assertEqual(fns.get(fn), 8, fn)

    def test_health_verdicts_checks_and_xids(self):
        # docs/health.md: a fence-class XID (79) is FAIL, an application one (13) WARN, a
        # pending row remap WARN; the XIDs come through NVML's events (counted per code) and
        # DCGM_FI_DEV_XID_ERRORS is the last one's code
        with Exporter("dgx-a100") as ex:
            m = ex.wait_for(lambda m: "gpuctl_gpu_health" in m, "verdicts")
            self.assertEqual(set(by_gpu(m, "gpuctl_gpu_health").values()), {0})
            self.assertNotIn("DCGM_FI_DEV_XID_ERRORS", m)  # none yet: omitted, not 0
            ex.nvsim("xid", "-i", "3", "79")
            ex.nvsim("xid", "-i", "3", "79")
            ex.nvsim("xid", "-i", "5", "13")
            ex.nvsim("set", "-i", "1", "remap.pending=1")
            m = ex.wait_for(lambda m: by_gpu(m, "gpuctl_gpu_health").get(1) == 1 and
                            by_gpu(m, "gpuctl_gpu_health").get(3) == 2 and
                            len(m.get("gpuctl_gpu_xid_total", [])) == 2, "findings")
            self.assertEqual(by_gpu(m, "gpuctl_gpu_health"),
                             {0: 0, 1: 1, 2: 0, 3: 2, 4: 0, 5: 1, 6: 0, 7: 0})
            xids = {(l["gpu"], l["xid"], l["class"]): v for l, v in m["gpuctl_gpu_xid_total"]}
            self.assertEqual(xids, {("3", "79", "fence"): 2, ("5", "13", "application"): 1})
            self.assertEqual(by_gpu(m, "DCGM_FI_DEV_XID_ERRORS"), {3: 79, 5: 13})
            # dcgm-exporter's err_code and err_msg (its collector's toMetric): the code, and
            # for 79 NVIDIA's catalog text, the same in dcgm-exporter's xid_errors.go and in
            # docs/health.md; for 13 the meaning docs/health.md's watch example prints
            xid = {l["gpu"]: l for l, _ in m["DCGM_FI_DEV_XID_ERRORS"]}
            self.assertEqual(set(xid["3"]), DCGM_LABELS | {"err_code", "err_msg"})
            self.assertEqual((xid["3"]["err_code"], xid["3"]["err_msg"]),
                             ("79", "GPU has fallen off the bus"))
            self.assertEqual((xid["5"]["err_code"], xid["5"]["err_msg"]),
                             ("13", "graphics engine exception"))
            self.assertEqual(xid["3"]["DCGM_FI_DRIVER_VERSION"],
                             Machine("dgx-a100").system["driver_version"])
            checks = {(l["gpu"], l["check"]): v for l, v in m["gpuctl_gpu_health_check"]}
            self.assertEqual(checks, {("1", "remap-pending"): 1})

    def test_unsupported_value_is_omitted(self):
        with Exporter("dgx-a100") as ex:
            ex.nvsim("fail", "nvmlDeviceGetPowerUsage", "NOT_SUPPORTED", "-i", "5")
            m = ex.wait_for(lambda m: 5 not in by_gpu(m, "DCGM_FI_DEV_POWER_USAGE"),
                            "power of GPU 5 omitted")
            self.assertEqual(len(m["DCGM_FI_DEV_POWER_USAGE"]), 7)
            self.assertEqual(len(m["DCGM_FI_DEV_GPU_TEMP"]), 8)

    def test_nothing_supported(self):
        """Every device query NOT_SUPPORTED: no DCGM series at all (never zeros), the GPUs
        still listed by gpuctl_gpu_info, the page still valid."""
        with Exporter("dgx-a100") as ex:
            ex.nvsim("fail", "*", "NOT_SUPPORTED")
            m = ex.wait_for(lambda m: "DCGM_FI_DEV_GPU_TEMP" not in m, "DCGM series gone")
            self.assertFalse([n for n in m if n.startswith("DCGM_")])
            self.assertEqual(len(m["gpuctl_gpu_info"]), 8)
            self.assertEqual(m["gpuctl_exporter_last_sample_success"][0][1], 1)
            if PROMTOOL:
                rc, lines = promtool_problems(ex.get()[2])
                self.assertEqual((rc, lines), (0, []))

    def test_lost_gpu_disappears_and_exporter_keeps_serving(self):
        with Exporter("dgx-a100") as ex:
            ex.nvsim("set", "-i", "3", "lost=1")
            m = ex.wait_for(lambda m: by_gpu(m, "gpuctl_gpu_lost").get(3) == 1, "lost GPU 3")
            for name in m:
                if name.startswith("DCGM_"):
                    self.assertNotIn(3, by_gpu(m, name), name)
                    self.assertEqual(len(m[name]), 7, name)
            self.assertEqual(ex.get("/healthz")[0], 200)

    def test_lost_gpu_comes_back_within_an_interval(self):
        with Exporter("dgx-a100") as ex:
            ex.nvsim("set", "-i", "1", "lost=1")
            ex.wait_for(lambda m: by_gpu(m, "gpuctl_gpu_lost").get(1) == 1, "GPU 1 lost")
            ex.nvsim("set", "-i", "1", "lost=0")
            # a whole snapshot every sample while a GPU is lost, not once a minute
            ex.wait_for(lambda m: by_gpu(m, "gpuctl_gpu_lost").get(1) == 0, "GPU 1 back")

    def test_nvml_failure_then_recovery(self):
        with Exporter("dgx-a100") as ex:
            ex.nvsim("fail", "nvmlDeviceGetCount_v2", "UNKNOWN")
            m = ex.wait_for(lambda m: m["gpuctl_exporter_last_sample_success"][0][1] == 0,
                            "a failed sample")
            self.assertGreater(m["gpuctl_exporter_nvml_errors_total"][0][1], 0)
            self.assertFalse([n for n in m if n.startswith("DCGM_")])
            ex.nvsim("fail", "--clear")
            m = ex.wait_for(lambda m: "DCGM_FI_DEV_GPU_TEMP" in m, "recovery")
            self.assertEqual(m["gpuctl_exporter_last_sample_success"][0][1], 1)
            self.assertIn("NVML", ex.stderr())

    def test_processes_and_mig(self):
        mach = Machine("a100-mig")
        with Exporter("a100-mig") as ex:
            sleeper = subprocess.Popen(["sleep", "60"])
            try:
                ex.nvsim("proc", "add", "--pid", str(sleeper.pid), "-i", "1", "--mem", "1GiB")
                m = ex.wait_for(lambda m: "gpuctl_process_memory_used_bytes" in m, "process")
            finally:
                sleeper.terminate()
                sleeper.wait(10)
        procs = m["gpuctl_process_memory_used_bytes"]
        self.assertEqual([(l["gpu"], l["pid"], v) for l, v in procs],
                         [("1", str(sleeper.pid), 1024 * MIB)])
        self.assertEqual(by_gpu(m, "gpuctl_gpu_processes")[1], 1)
        want = sorted((i, inst["uuid"], inst["profile"], str(inst["gi"]), str(inst["ci"]))
                      for i in range(len(mach))
                      for inst in (mach.gpus[i].get("mig") or {}).get("instances", []))
        got = sorted((int(l["gpu"]), l["mig_uuid"], l["profile"], l["gpu_instance"],
                      l["compute_instance"]) for l, _ in m["gpuctl_mig_device_info"])
        self.assertEqual(got, want)
        uuid_of = {(l["gpu"], l["mig"]): l["mig_uuid"] for l, _ in m["gpuctl_mig_device_info"]}
        totals = {uuid_of[(l["gpu"], l["mig"])]: v for l, v in m["gpuctl_mig_memory_total_bytes"]}
        for i in range(len(mach)):
            for inst in (mach.gpus[i].get("mig") or {}).get("instances", []):
                self.assertEqual(totals[inst["uuid"]], inst["memory_mib"] * MIB)

    def test_scrapes_cost_no_nvml_calls(self):
        """Sampling is decoupled from scraping: 50 scrapes make no NVML call (one sample only,
        --interval 3600), so the call counts with and without scrapes are equal."""
        totals = []
        tmp = tempfile.mkdtemp(prefix="gpuctl-exporter-calls-")
        try:
            for scrapes in (0, 50):
                out = os.path.join(tmp, "calls-%d.json" % scrapes)
                with Exporter("dgx-a100", interval="3600", calls_out=out) as ex:
                    for _ in range(scrapes):
                        self.assertEqual(ex.get()[0], 200)
                    self.assertEqual(ex.stop(), 0)
                with open(out) as f:
                    totals.append(json.load(f)["total"])
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self.assertEqual(totals[0], totals[1])
        self.assertGreater(totals[0], 0)


def documented_relabelling():
    """The metric_relabel_configs block docs/metrics.md gives (the YAML after "copy the label
    in the scrape job:"), so the test checks what the page says."""
    with open(os.path.join(SRC, "docs", "metrics.md")) as f:
        text = f.read()
    m = re.search(r"copy the label in the scrape job:\n\n```yaml\n(.*?)```", text, re.S)
    assert m, "docs/metrics.md: the relabelling example is gone"
    return m.group(1)


def raw(port, data, timeout=10):
    """Sends bytes, returns what comes back until the server closes (or timeout)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(data)
        except OSError:
            pass
        chunks = []
        try:
            while True:
                c = s.recv(65536)
                if not c:
                    break
                chunks.append(c)
        except (ConnectionResetError, socket.timeout):
            pass
        return b"".join(chunks)


def trickle(port, sources, n, stop):
    """n connections from each source address (127.0.0.0/8 is all loopback on Linux) that
    send a request line, then a header line every 0.3 s until stop is set (slowloris):
    the idle timer never fires. Returns the sockets the server accepted, and the feeder."""
    socks = []
    for src in sources:
        for _ in range(n):
            try:
                c = socket.create_connection(("127.0.0.1", port), timeout=5,
                                             source_address=(src, 0))
                c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                socks.append(c)
            except OSError:
                pass

    def feed():
        while not stop.wait(0.3):
            for c in socks:
                try:
                    c.sendall(b"X-Slow: 1\r\n")
                except OSError:
                    pass
    t = threading.Thread(target=feed, daemon=True)
    t.start()
    return socks, t


def still_open(sock):
    """True while the server has neither closed nor reset the connection: nothing to read, or
    data (a peek, without waiting: the socket's own timeout is not used)."""
    p = select.poll()
    p.register(sock, select.POLLIN)
    if not p.poll(0):
        return True
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except OSError:
        return False


class TestHttp(GpuctlTestCase):
    @classmethod
    def setUpClass(cls):
        cls.ex = Exporter("dgx-a100", env={"GPUCTL_EXPORTER_TIMEOUT": "1"}).start()

    @classmethod
    def tearDownClass(cls):
        cls.ex.close()

    def assertServing(self):
        status, _, body = self.ex.get("/healthz")
        self.assertEqual((status, body), (200, "ok\n"))

    def test_paths(self):
        status, headers, body = self.ex.get("/")
        self.assertEqual(status, 200)
        self.assertIn('href="/metrics"', body)
        self.assertTrue(headers["Content-Type"].startswith("text/html"))
        self.assertEqual(self.ex.get("/healthz")[2], "ok\n")
        self.assertEqual(self.ex.get("/metrics?debug=1")[0], 200)
        for path in ("/nope", "/metrics/", "/metricsx", "/healthz/x", "/index.html"):
            self.assertEqual(self.ex.get(path)[0], 404, path)

    def test_keep_alive(self):
        # Prometheus reuses its connection from scrape to scrape: three requests on one
        # HTTP/1.1 connection are all answered on it (the same local port; HTTPConnection would
        # open a new connection after a "Connection: close").
        c = HTTPConnection("127.0.0.1", self.ex.port, timeout=10)
        try:
            ports = []
            for path in ("/metrics", "/healthz", "/metrics"):
                c.request("GET", path)
                r = c.getresponse()
                body = r.read()
                self.assertEqual(r.status, 200, path)
                self.assertTrue(body, path)
                self.assertNotEqual((r.getheader("Connection") or "").lower(), "close", path)
                ports.append(c.sock.getsockname()[1])
            self.assertEqual(len(set(ports)), 1, ports)
        finally:
            c.close()

    def test_head(self):
        status, headers, body = self.ex.get("/metrics", method="HEAD")
        self.assertEqual((status, body), (200, ""))

    def test_other_methods(self):
        for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
            status, headers, _ = self.ex.get("/metrics", method=method)
            self.assertEqual(status, 405, method)
            self.assertEqual(headers["Allow"], "GET, HEAD", method)
        self.assertServing()

    def test_body_refused(self):
        status, _, _ = self.ex.get("/metrics", method="GET", data=b"x" * 1000)
        self.assertEqual(status, 413)
        self.assertServing()

    def test_oversized_request_line_and_header(self):
        for req in (b"GET /" + b"a" * 200000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
                    b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 200000 + b"\r\n\r\n"):
            reply = raw(self.ex.port, req)
            # cut off: MHD's error status (414 URI Too Long, 431 Request Header Fields Too
            # Large) or a closed connection, never a page
            self.assertTrue(reply == b"" or re.match(rb"HTTP/1\.1 4\d\d ", reply), reply[:200])
            self.assertServing()

    # RFC 9112: a server MUST answer 400 to these (issue 24, finding 9e: each was answered 200,
    # and /metrics%00 served the page)
    MALFORMED = (
        ("two Content-Length values (§6.3)",
         b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\n"),
        ("obsolete line folding (§5.2)", b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-A: b\r\n c\r\n\r\n"),
        ("folding with a tab (§5.2)", b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-A: b\r\n\tc\r\n\r\n"),
        ("white space before the first header (§2.2)",
         b"GET /metrics HTTP/1.1\r\n X-A: b\r\nHost: x\r\n\r\n"),
        ("a NUL in a header value", b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-A: b\x00c\r\n\r\n"),
        ("a bare CR in a header value (§2.2)",
         b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-A: b\rc\r\n\r\n"),
        ("white space before a colon (§5.1)", b"GET /metrics HTTP/1.1\r\nHost : x\r\n\r\n"),
        ("a NUL in the path", b"GET /metrics\x00x HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("%00 in the path", b"GET /metrics%00 HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("%00 in the query", b"GET /metrics?x=%00 HTTP/1.1\r\nHost: x\r\n\r\n"),
    )

    def test_malformed_heads_are_refused(self):
        for what, req in self.MALFORMED:
            with self.subTest(what=what):
                reply = raw(self.ex.port, req)
                self.assertTrue(reply.startswith(b"HTTP/1.1 400 "), reply[:200])
                self.assertNotIn(b"DCGM_FI_", reply)
                self.assertServing()
        # a repeated, equal Content-Length is one value (§6.3 lets a server take it)
        reply = raw(self.ex.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                    b"Content-Length: 0\r\nConnection: close\r\n\r\n")
        self.assertTrue(reply.startswith(b"HTTP/1.1 200 "), reply[:200])

    def test_malformed_head_after_a_kept_alive_request(self):
        # the check covers every request of a connection, and answers in order: the good one
        # first, then 400, then the connection is closed
        for what, bad in self.MALFORMED:
            with self.subTest(what=what):
                reply = raw(self.ex.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" + bad)
                self.assertTrue(reply.startswith(b"HTTP/1.1 200 "), reply[:200])
                self.assertRegex(reply, rb"\r\n\r\nok\nHTTP/1\.1 400 ")
                self.assertEqual(reply.count(b"HTTP/1.1 "), 2, reply)

    def test_slow_client_is_cut_off(self):
        t0 = time.monotonic()
        reply = raw(self.ex.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n", timeout=15)
        elapsed = time.monotonic() - t0
        self.assertFalse(reply.startswith(b"HTTP/1.1 200"), reply[:200])
        # GPUCTL_EXPORTER_TIMEOUT=1: closed after the idle second, not before, not much later
        self.assertGreaterEqual(elapsed, 0.9)
        self.assertLess(elapsed, 10)
        self.assertServing()

    def test_many_idle_connections(self):
        socks = []
        try:
            for _ in range(200):
                try:
                    socks.append(socket.create_connection(("127.0.0.1", self.ex.port), timeout=5))
                except OSError:
                    break
        finally:
            for s in socks:
                s.close()
        deadline = time.monotonic() + 10
        while True:
            try:
                self.assertServing()
                break
            except (AssertionError, OSError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def test_trickling_request_is_cut_by_the_deadline(self):
        # GPUCTL_EXPORTER_TIMEOUT=1: the whole request may last 1 s, however often bytes come
        stop = threading.Event()
        socks, t = trickle(self.ex.port, ["127.0.0.4"], 1, stop)
        try:
            self.assertEqual(len(socks), 1)
            socks[0].settimeout(15)
            try:
                reply = socks[0].recv(4096)  # b"" (closed) or MHD's error answer
            except ConnectionResetError:
                reply = b""
            except socket.timeout:
                self.fail("a request trickling a header line every 0.3 s was never cut off")
            self.assertFalse(reply.startswith(b"HTTP/1.1 200"), reply[:200])
        finally:
            stop.set()
            t.join()
            for c in socks:
                c.close()
        self.assertServing()


class TestSlowloris(GpuctlTestCase):
    """Scrapes are served while slowloris connections are held open. The server's deadline is
    60 s here and the scrape's 30 s, so a scrape must be answered while the slow connections
    last: where they fill the server's connection slots (the old fault: no per-address limit,
    128 connections) it is answered only once the deadline cuts them, and the test fails. After
    each answer, connections from both slow addresses must still be open. How fast scrapes are
    under slowloris is measured, not asserted: bench/exporter_slowloris.py, bench/RESULTS.md
    (issue 16's aim: within 1 s)."""

    def test_scrapes_served_while_200_slowloris_connections_are_open(self):
        stop = threading.Event()
        with Exporter("dgx-a100", env={"GPUCTL_EXPORTER_TIMEOUT": "60"}) as ex:
            sources = ["127.0.0.2", "127.0.0.3"]
            socks, t = trickle(ex.port, sources, 100, stop)
            try:
                for _ in range(3):
                    status, _, body = http(ex.port, "/metrics", timeout=30)
                    self.assertEqual(status, 200)
                    self.assertIn("gpuctl_exporter_last_sample_success 1", body)
                    held = {c.getsockname()[0] for c in socks if still_open(c)}
                    self.assertEqual(held, set(sources))
            finally:
                stop.set()
                t.join()
                for c in socks:
                    c.close()


def wait_hung(state, what="a hung NVML call"):
    """Waits (bounded) until `nvsim hung` lists a call blocked by a hang rule: the hang itself,
    not a guessed time (sim/README.md, "hang")."""
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        r = run([NVSIM, "hung"], env={"NVSIM_STATE_DIR": state})
        assert r.rc == 0, r
        if r.out.strip():
            return r.out
        time.sleep(0.05)
    raise AssertionError("never saw %s" % what)


class TestHang(GpuctlTestCase):
    """A driver call that does not return (nvsim hang): the page says so (docs/metrics.md, "A
    hung driver"): gpuctl_exporter_last_sample_success 0, gpuctl_exporter_sample_overdue_seconds
    above 0, no GPU series, /healthz 503; all back once the call answers; SIGTERM ends the
    exporter while the call hangs, at start as later."""

    def test_overdue_while_hung_then_back(self):
        with Exporter("dgx-a100") as ex:
            ex.wait_for(lambda m: "DCGM_FI_DEV_GPU_TEMP" in m, "a first page")
            # every sample counts the GPUs first (the refresh's guard, docs/ARCHITECTURE.md)
            ex.nvsim("hang", "nvmlDeviceGetCount_v2")
            wait_hung(ex.state)
            m = ex.wait_for(lambda m: m["gpuctl_exporter_last_sample_success"][0][1] == 0,
                            "last_sample_success 0 while the call hangs")
            self.assertGreater(m["gpuctl_exporter_sample_overdue_seconds"][0][1], 0)
            self.assertFalse([n for n in m if not n.startswith("gpuctl_exporter_")], m)
            status, _, body = ex.get("/healthz")
            self.assertEqual(status, 503, body)
            if PROMTOOL:
                TestPromtool.check(self, ex.get()[2])
            ex.nvsim("unhang")
            m = ex.wait_for(lambda m: m["gpuctl_exporter_last_sample_success"][0][1] == 1 and
                            "DCGM_FI_DEV_GPU_TEMP" in m, "the GPU metrics back")
            self.assertEqual(m["gpuctl_exporter_sample_overdue_seconds"][0][1], 0)
            self.assertEqual(ex.get("/healthz")[0], 200)
            err = ex.stderr()
            self.assertIn("NVML not answering for", err)
            self.assertIn("NVML answering again", err)

    def test_sigterm_while_hung(self):
        with Exporter("dgx-a100") as ex:
            ex.nvsim("hang", "nvmlDeviceGetCount_v2")
            wait_hung(ex.state)
            self.assertEqual(ex.stop(signal.SIGTERM), EXIT_OK)

    def test_sigterm_while_the_first_sample_hangs(self):
        tmp = tempfile.mkdtemp(prefix="gpuctl-exporter-hang-")
        self.addCleanup(shutil.rmtree, tmp, True)
        state = os.path.join(tmp, "state")
        r = run([NVSIM, "exec", "--keep", "--state-dir", state, "dgx-a100", "--", "true"])
        self.assertOk(r)
        r = run([NVSIM, "hang", "nvmlDeviceGetCount_v2"], env={"NVSIM_STATE_DIR": state})
        self.assertOk(r)
        p = subprocess.Popen([GPUCTL, "exporter", "--listen", "127.0.0.1:%d" % free_port(),
                              "--interval", INTERVAL],
                             env=test_env({"NVSIM_STATE_DIR": state,
                                           "GPUCTL_NVML_LIBRARY": SIMLIB}),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            wait_hung(state)
            p.send_signal(signal.SIGTERM)
            p.wait(STOP_S)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            err = p.stderr.read()
            p.stderr.close()
        self.assertEqual(p.returncode, EXIT_OK, err)


class TestCommandLine(GpuctlTestCase):
    def test_help(self):
        r = gpuctl("exporter", "--help")
        self.assertOk(r)
        for word in ("--listen", "--interval", "/metrics", "/healthz", ":9409"):
            self.assertIn(word, r.out)

    def test_bad_listen(self):
        for bad in ("", "9409", "localhost", ":", ":0", ":65536", ":99999", ":-1", ":+80",
                    ": 80", ":80 ", "1.2.3:80", "1.2.3.4.5:80", "256.1.1.1:80", "::1:80",
                    "[::1]80", "[::1", "[]:80", "[zz::1]:80", "[1.2.3.4]:80", "-host:80",
                    "host-:80", "ho_st:80", "a..b:80", ":80x", "0x7f.1:80", "a.b.123:80"):
            with self.subTest(listen=bad):
                r = gpuctl("exporter", "--listen", bad)
                self.assertOneLineError(r, EXIT_USAGE, "--listen", "'%s'" % bad)

    def test_bad_interval(self):
        for bad in ("", "0", "0.05", "0.09", "-1", "abc", "1e3", "nan", "inf", "1.", ".5",
                    "86401", "5s", " 5"):
            with self.subTest(interval=bad):
                r = gpuctl("exporter", "--interval", bad)
                self.assertOneLineError(r, EXIT_USAGE, "--interval", "'%s'" % bad)

    def test_bad_max_processes(self):
        for bad in ("", "-1", "abc", "100001", "1.5", " 5"):
            with self.subTest(max_processes=bad):
                r = gpuctl("exporter", "--max-processes", bad)
                self.assertOneLineError(r, EXIT_USAGE, "--max-processes", "'%s'" % bad)

    def test_bad_timeout_environment(self):
        for bad in ("0", "x", "-1", "3601", "1.5"):
            r = gpuctl("exporter", env={"GPUCTL_EXPORTER_TIMEOUT": bad})
            self.assertOneLineError(r, EXIT_USAGE, "GPUCTL_EXPORTER_TIMEOUT")

    def test_unexpected_argument(self):
        self.assertOneLineError(gpuctl("exporter", "extra"), EXIT_USAGE, "'extra'")
        self.assertOneLineError(gpuctl("exporter", "--bogus"), EXIT_USAGE, "--bogus")

    def test_port_in_use(self):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            s.listen(1)
            listen = "127.0.0.1:%d" % s.getsockname()[1]
            r = run([NVSIM, "exec", "dgx-a100", "--", GPUCTL, "exporter", "--listen", listen])
        self.assertOneLineError(r, EXIT_FAILURE, "'%s'" % listen, "in use")

    def test_unresolvable_host(self):
        listen = "no-such-host.invalid:%d" % free_port()
        r = run([NVSIM, "exec", "dgx-a100", "--", GPUCTL, "exporter", "--listen", listen])
        self.assertOneLineError(r, EXIT_FAILURE, "'%s'" % listen)

    def test_no_driver(self):
        r = gpuctl("exporter", "--listen", "127.0.0.1:%d" % free_port(),
                   env={"GPUCTL_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1"})
        self.assertOneLineError(r, EXIT_NODRIVER)

    def test_signals_stop_cleanly(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            with self.subTest(sig=sig), Exporter("dgx-a100") as ex:
                self.assertEqual(ex.stop(sig), EXIT_OK)
                self.assertEqual(ex.stderr(), "")

    def test_stop_during_the_first_sample_is_clean(self):
        """The port is open before the first sample ends (slow NVML: 20 ms a call here); a
        SIGTERM then still ends the exporter cleanly (exit 0), not by the signal."""
        port = free_port()
        p = subprocess.Popen([NVSIM, "exec", "--latency-us", "20000", "dgx-a100", "--", GPUCTL,
                              "exporter", "--listen", "127.0.0.1:%d" % port], env=test_env(),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + START_S
            ok = False
            while time.monotonic() < deadline and p.poll() is None and not ok:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=2):
                        ok = True
                except OSError:
                    time.sleep(0.01)
            self.assertTrue(ok, "the port never opened")
        finally:
            p.terminate()
            try:
                p.wait(STOP_S + 30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            err = p.stderr.read()
            p.stderr.close()
        self.assertEqual(p.returncode, 0, err)

    def test_listen_forms(self):
        """IPv6 loopback in brackets and a host name bind (where the host has them)."""
        for form in ("[::1]:%d", "localhost:%d"):
            port = free_port()
            listen = form % port
            with self.subTest(listen=listen):
                env = test_env()
                p = subprocess.Popen([NVSIM, "exec", "dgx-a100", "--", GPUCTL, "exporter",
                                      "--listen", listen], env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
                try:
                    ok = False
                    deadline = time.monotonic() + START_S
                    host = "::1" if form.startswith("[") else "localhost"
                    while time.monotonic() < deadline and p.poll() is None:
                        try:
                            with socket.create_connection((host, port), timeout=2):
                                ok = True
                                break
                        except OSError:
                            time.sleep(0.05)
                    if not ok and p.poll() is not None:
                        err = p.stderr.read()
                        if "in use" in err or "not available" in err or "Cannot assign" in err:
                            self.skipTest("cannot bind %s here: %s" % (listen, err))
                    self.assertTrue(ok, listen)
                finally:
                    p.terminate()
                    try:
                        p.wait(STOP_S)
                    except subprocess.TimeoutExpired:
                        p.kill()
                        p.wait()
                    p.stderr.close()
                self.assertEqual(p.returncode, 0)


if __name__ == "__main__":
    unittest.main()
