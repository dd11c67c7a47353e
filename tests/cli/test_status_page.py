"""The status page of `gpuctl agent` and `gpuctl exporter` (issue 30; docs/status-page.md):
/api/v1/status checked against its documented schema (docs/status.schema.json, with Debian's
python3-jsonschema) and against the scenario files, the access rules (read-only, status_page,
status_page_users, CORS for configured peers only), the page's NVML cost (none: the
simulator's call counter compares an agent that served a hundred page requests with one that
served none), and the page itself in a real browser: Debian's `chromium`, headless, loading the
page a real agent serves on the simulator and dumping its DOM after the page's script has drawn
(--virtual-time-budget: virtual time pauses while fetches are pending). The DOM must show every
GPU of the scenario, a lost GPU as LOST, a hostile label and command as text, a dead peer and a
peer that does not allow our origin as UNREACHABLE with no GPU of theirs, and two local agents
side by side.

Screenshots: each browser case takes its own (into a scratch directory, or with
GPUCTL_SCREENSHOT_DIR set there): the busy server's status-page.png (laptop, light) and
status-page-dark-phone.png (phone, dark), the hostile names' status-page-hostile.png, the peers'
status-page-peers.png; docs/ keeps the ones README and docs/status-page.md show (tests/README.md
says how to renew them).
"""
import base64
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request
from html.parser import HTMLParser

from gpuctl_test import (EMPTY_CONFIG, GPUCTL, NVSIM, SIMLIB, SRC, GpuctlTestCase, run,
                         scenario_gpus, wait_until)
import test_exporter as tx
import workload_layouts

try:
    import jsonschema
except ImportError:  # scripts/deps.sh test installs python3-jsonschema
    jsonschema = None

CHROMIUM = shutil.which("chromium")
SCHEMA = os.path.join(SRC, "docs", "status.schema.json")
HOSTILE_LABEL = "<script>document.title='owned'</script><img src=x onerror=alert(1)>"
HOSTILE_ARG = "</p><b id=injected>bold</b>"
HOSTILE_POD = "<script>alert(1)</script><i>pod</i>"
SCENARIO = "dgx-a100"


def uuids(scenario, lost=()):
    """The scenario's UUIDs; "" for the lost GPUs (NVML answers nothing for a lost GPU, its
    UUID included)."""
    return ["" if i in lost else g["uuid"] for i, g in enumerate(scenario_gpus(scenario))]


def killpg(pgid):
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass


def children(pid):
    """The children of pid, oldest first (/proc/PID/task/PID/children, proc(5))."""
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


class Dom(HTMLParser):
    """The few things the tests read from a dumped DOM: each server section and each GPU item
    (their data- attributes and text), every element's tag."""

    def __init__(self, html):
        super().__init__()
        self.sections = []  # {"attrs": ..., "text": ..., "gpus": [{"attrs":..., "text":...}]}
        self.tags = []
        self.stack = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        cls = (a.get("class") or "").split()
        node = None
        if tag == "section" and "server" in cls:
            node = {"attrs": a, "text": "", "gpus": []}
            self.sections.append(node)
        elif tag == "li" and "gpu" in cls and self.sections:
            node = {"attrs": a, "text": ""}
            self.sections[-1]["gpus"].append(node)
        if tag not in ("br", "img", "meta", "link", "input", "hr"):
            self.stack.append(node)

    def handle_endtag(self, tag):
        if self.stack:
            self.stack.pop()

    def handle_data(self, data):
        for n in self.stack:
            if n is not None:
                n["text"] += data


class Server(tx.Exporter):
    """tx.Exporter on a port chosen before it starts (fixed_port), for peers that name each
    other in their configurations."""
    fixed_port = None

    def start(self):
        if self.fixed_port is None:
            return super().start()
        chosen = tx.free_port
        tx.free_port = lambda: self.fixed_port
        try:
            return super().start()
        finally:
            tx.free_port = chosen


class StatusCase(GpuctlTestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gpuctl-status-page-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.leases = os.path.join(self.tmp, "leases")
        self.servers = 0  # each agent its own ledger

    def config(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def server(self, command="agent", conf=None, scenario=SCENARIO, interval="0.5", calls_out=None,
               start=True, env=None):
        args = ["--lease-dir", self.leases]
        self.servers += 1
        if command == "agent":
            args += ["--ledger", os.path.join(self.tmp, "ledger-%d.db" % self.servers)]
        s = Server(scenario, command=command, interval=interval, args=args,
                        env={"GPUCTL_CONFIG": conf or EMPTY_CONFIG, **(env or {})},
                        calls_out=calls_out)
        self.addCleanup(s.close)
        if start:
            s.start()
        return s

    def env(self, s):
        return {"NVSIM_STATE_DIR": s.state, "GPUCTL_NVML_LIBRARY": SIMLIB,
                "GPUCTL_LEASE_DIR": self.leases, "GPUCTL_CONFIG": EMPTY_CONFIG}

    def status(self, s, headers=None):
        code, hdrs, body = s.get("/api/v1/status", headers=headers)
        self.assertEqual(code, 200, body)
        self.assertEqual(hdrs["Content-Type"], "application/json")
        return hdrs, json.loads(body)

    def wait_status(self, s, pred, what, timeout=20):
        deadline = time.monotonic() + timeout
        doc = None
        while time.monotonic() < deadline:
            doc = self.status(s)[1]
            if pred(doc):
                return doc
            time.sleep(0.1)
        raise AssertionError("timed out waiting for %s; last document: %r" % (what, doc))

    def hold(self, s, *argv):
        """gpuctl run ARGV... in the background, in a process group of its own that its job
        shares (docs/gpuctl.1, run): the group is killed at cleanup, then run is reaped."""
        p = subprocess.Popen([GPUCTL, "run", *argv], env=tx.test_env(self.env(s)),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        self.addCleanup(p.wait)
        self.addCleanup(killpg, p.pid)
        return p


@unittest.skipUnless(jsonschema, "python3-jsonschema is not installed (scripts/deps.sh test)")
class Api(StatusCase):
    def validate(self, doc):
        with open(SCHEMA) as f:
            jsonschema.validate(doc, json.load(f))

    def test_document_follows_the_schema_and_the_scenario(self):
        for command in ("exporter", "agent"):
            with self.subTest(command=command):
                s = self.server(command)
                _, doc = self.status(s)
                self.validate(doc)
                self.assertEqual(doc["source"], command)
                self.assertEqual([g["uuid"] for g in doc["gpus"]], uuids(SCENARIO))
                self.assertEqual([g["name"] for g in doc["gpus"]],
                                 [g["name"] for g in scenario_gpus(SCENARIO)])
                self.assertEqual([g["memory_total"] for g in doc["gpus"]],
                                 [g["memory_total_mib"] * tx.MIB for g in scenario_gpus(SCENARIO)])
                self.assertEqual(doc["pools"], [{"name": "default", "description": None,
                                                 "restricted": False,
                                                 "gpus": list(range(8))}])
                self.assertEqual(doc["peers"], [])
                s.close()

    def test_holder_waiter_utilisation_and_lost_gpu(self):
        s = self.server("agent")
        s.nvsim("set", "-i", "2", "utilization.gpu=42", "temperature=71")
        self.hold(s, "-n", "8", "--label", "all of them", "--", "sleep", "60")
        doc = self.wait_status(s, lambda d: all(g["holders"] for g in d["gpus"]), "the holder")
        waiter = self.hold(s, "-n", "1", "--wait", "--", "true")
        doc = self.wait_status(s, lambda d: d["waiting"], "the waiter")
        s.nvsim("set", "-i", "5", "lost=1")
        doc = self.wait_status(s, lambda d: d["gpus"][5]["lost"], "the lost GPU")
        self.validate(doc)
        g2 = doc["gpus"][2]
        self.assertEqual((g2["utilization"], g2["temperature"]), (42, 71))
        # the newest bucket's mean: of the samples before the change (0 %) and after (42 %)
        last = [v for v in g2["history"] if v is not None][-1]
        self.assertTrue(0 < last <= 42, g2["history"][-2:])
        h = g2["holders"][0]
        self.assertEqual((h["user"], h["uid"], h["kind"], h["label"], h["shared"]),
                         ("root", 0, "run", "all of them", False))
        self.assertEqual(g2["lease"], "held")
        (w,) = doc["waiting"]
        self.assertEqual((w["position"], w["user"], w["uid"]), (1, "root", 0))
        self.assertIn("1", w["request"])
        self.assertIn("first in line", w["reason"])
        g5 = doc["gpus"][5]
        self.assertEqual((g5["health"], g5["lease"], g5["utilization"]), ("LOST", "lost", None))
        waiter.kill()

    def test_a_mig_device_held(self):
        # a100-mig: GPU 0 in MIG mode with seven 1g.5gb devices (sim/scenarios/a100-mig.json).
        # A job on one of them: GPU 0 counts as held (docs/leases.md, "MIG"), its holder names
        # the MIG device's place, the one whose UUID the job was given in CUDA_VISIBLE_DEVICES
        s = self.server("agent", scenario="a100-mig")
        got = os.path.join(self.tmp, "cvd")
        self.hold(s, "-n", "1", "--mig", "1g.5gb", "--only", "0", "--label", "mig job", "--",
                  "sh", "-c", 'echo "$CUDA_VISIBLE_DEVICES" > "$0"; sleep 60', got)
        doc = self.wait_status(s, lambda d: d["gpus"][0]["holders"], "the MIG holder")
        self.validate(doc)
        with open(got) as f:
            uuid = f.read().strip()
        migs = [m["uuid"] for m in scenario_gpus("a100-mig")[0]["mig"]["instances"]]
        (h,) = doc["gpus"][0]["holders"]
        self.assertEqual((h["label"], h["kind"], h["mig"]), ("mig job", "run", migs.index(uuid)))
        self.assertEqual(doc["gpus"][0]["lease"], "held")
        self.assertEqual([g["lease"] for g in doc["gpus"][1:]], ["free"] * 3)

    def test_hidden_users(self):
        conf = self.config("hide.conf", "status_page_users = hide\n")
        s = self.server("agent", conf)
        self.hold(s, "-n", "1", "--", "sleep", "60")
        doc = self.wait_status(s, lambda d: any(g["holders"] for g in d["gpus"]), "the holder")
        self.validate(doc)
        self.assertFalse(doc["users_shown"])
        (h,) = [h for g in doc["gpus"] for h in g["holders"]]
        self.assertEqual((h["user"], h["uid"], h["command"], h["kind"]), (None, None, None, "run"))

    def test_read_only_and_cors_for_peers_only(self):
        peer = "http://127.0.0.1:9"
        conf = self.config("peers.conf", "peers = %s/, http://Gpu2.example:80\n" % peer)
        s = self.server("exporter", conf)
        for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
            for path in ("/", "/api/v1/status"):
                code, hdrs, _ = s.get(path, method=method)
                self.assertEqual((code, hdrs["Allow"]), (405, "GET, HEAD"), (method, path))
        code, hdrs, body = s.get("/api/v1/status", method="HEAD")
        self.assertEqual((code, body), (200, ""))
        hdrs, doc = self.status(s, headers={"Origin": peer})
        self.assertEqual(hdrs["Access-Control-Allow-Origin"], peer)
        self.assertEqual(doc["peers"], [peer, "http://Gpu2.example:80"])
        # RFC 6454: the browser sends the origin in lower case, without the default port
        hdrs, _ = self.status(s, headers={"Origin": "http://gpu2.example"})
        self.assertEqual(hdrs["Access-Control-Allow-Origin"], "http://gpu2.example")
        for origin in ("http://127.0.0.1:10", "http://evil.example", "null"):
            hdrs, _ = self.status(s, headers={"Origin": origin})
            self.assertIsNone(hdrs["Access-Control-Allow-Origin"], origin)
        code, hdrs, body = s.get("/")
        self.assertEqual(code, 200)
        csp = hdrs["Content-Security-Policy"]
        self.assertIn("default-src 'none'", csp)
        # the page's own script by its hash (CSP Level 2, "hash-source": base64 of the
        # SHA-256 of the script element's text), so no injected script or handler runs
        script = body[body.rindex("<script>") + 8:body.rindex("</script>")]
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        self.assertIn("script-src 'sha256-%s';" % digest, csp)
        self.assertNotIn("unsafe", csp.split("script-src")[1].split(";")[0])
        self.assertIn("connect-src 'self' %s http://gpu2.example" % peer, csp)
        script = body[body.rindex("<script>"):]
        self.assertNotRegex(script, r"\.innerHTML|outerHTML|insertAdjacentHTML|document\.write")

    def test_status_page_off_keeps_the_old_index(self):
        conf = self.config("off.conf", "status_page = off\n")
        s = self.server("exporter", conf)
        code, _, body = s.get("/")
        self.assertEqual(code, 200)
        self.assertIn('href="/metrics"', body)
        self.assertNotIn("<script", body)
        self.assertEqual(s.get("/api/v1/status")[0], 404)


def outside_address():
    """An IPv4 address of this host that is not loopback (the kernel's choice of source address
    for a route out; no packet is sent), or None."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            u.connect(("198.51.100.1", 9))  # TEST-NET-2 (RFC 5737)
            a = u.getsockname()[0]
    except OSError:
        return None
    return None if a.startswith("127.") or a == "0.0.0.0" else a


class Access(StatusCase):
    """status_page (docs/config.md): local answers loopback clients only, network every client;
    a client on another address of this host is not loopback (its source address is that
    address), which stands for another host."""

    def get_from(self, addr, port, path):
        try:
            with urllib.request.urlopen("http://%s:%d%s" % (addr, port, path), timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def test_local_by_default_network_when_configured(self):
        addr = outside_address()
        if not addr:
            self.skipTest("this host has no address but loopback")
        for conf, outside in ((None, 403), ("status_page = network\n", 200)):
            with self.subTest(conf=conf):
                s = self.server("exporter", self.config("a.conf", conf) if conf else None,
                                start=False)
                s.fixed_port = tx.free_port()
                s.args += ["--listen", ":%d" % s.fixed_port]  # every address (the last wins)
                s.start()
                for path in ("/", "/api/v1/status"):
                    self.assertEqual(self.get_from("127.0.0.1", s.port, path)[0], 200)
                    code, body = self.get_from(addr, s.port, path)
                    self.assertEqual(code, outside, (path, body))
                    if code == 403:
                        self.assertIn("status_page = network", body)
                self.assertEqual(self.get_from(addr, s.port, "/metrics")[0], 200)
                s.close()


class NvmlCost(StatusCase):
    def calls(self, requests):
        """The agent's NVML calls, by function, over a life with one sample (--interval of a
        day) in which it answered requests page and document requests."""
        out = os.path.join(self.tmp, "calls-%d.json" % requests)
        s = self.server("agent", interval="86400", calls_out=out)
        for _ in range(requests):
            self.assertEqual(s.get("/")[0], 200)
            self.assertEqual(s.get("/api/v1/status")[0], 200)
        self.assertEqual(s.stop(), 0, s.stderr())
        with open(out) as f:
            return json.load(f)["functions"]

    def test_the_page_costs_no_nvml_call(self):
        quiet = self.calls(0)
        busy = self.calls(50)
        self.assertTrue(quiet.get("nvmlDeviceGetUtilizationRates"), quiet)
        self.assertEqual(busy, quiet)


@unittest.skipUnless(CHROMIUM, "chromium is not installed (scripts/deps.sh test)")
class Browser(StatusCase):
    def chromium(self, url, *args, budget=4000):
        prof = tempfile.mkdtemp(prefix="chromium-", dir=self.tmp)
        argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--user-data-dir=" + prof, "--virtual-time-budget=%d" % budget, *args, url]
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        try:
            out, _ = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.fail("chromium did not finish in 60 s (did the page open a dialog?)")
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            else:  # helpers it left behind
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
        self.assertEqual(p.returncode, 0)
        return out.decode()

    def dom(self, port):
        return Dom(self.chromium("http://127.0.0.1:%d/" % port, "--dump-dom"))

    def screenshot(self, port, name, size, dark):
        d = os.environ.get("GPUCTL_SCREENSHOT_DIR") or self.tmp
        path = os.path.join(d, name)
        self.chromium("http://127.0.0.1:%d/" % port, "--window-size=%d,%d" % size,
                      "--hide-scrollbars",
                      "--blink-settings=preferredColorScheme=%d" % (0 if dark else 1),
                      "--screenshot=" + path)
        with open(path, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_gpus_lost_gpu_hostile_text_and_screenshots(self):
        # a real process in a pod's cgroup (workload_layouts, as test_exporter's workload
        # labels) whose name is HTML, on GPU 2
        # where cgroups cannot be made (not root), the pod is left out and said so
        why = workload_layouts.why_not()
        env = {}
        if not why:
            layouts = workload_layouts.Layouts()
            self.addCleanup(layouts.close)
            pod, _, _ = layouts.pod(HOSTILE_POD, "ns", "c")
            env["GPUCTL_WORKLOAD_ROOT"] = layouts.root
        s = self.server("agent", env=env)
        if not why:
            s.nvsim("proc", "add", "--pid", str(pod.pid), "-i", "2", "--mem", "2GiB")
        s.nvsim("set", "-i", "1", "utilization.gpu=87", "temperature=74")
        s.nvsim("set", "-i", "6", "remap.pending=1")
        self.hold(s, "-n", "2", "--only", "0,1", "--label", HOSTILE_LABEL, "--", "sh", "-c",
                  "sleep 60", HOSTILE_ARG)
        s.nvsim("set", "-i", "3", "lost=1")
        self.wait_status(s, lambda d: d["gpus"][0]["holders"], "the holder")
        # GPU 0 cannot be had while it is held: this waits, first in line
        self.hold(s, "-n", "1", "--only", "0", "--wait", "--", "true")
        doc = self.wait_status(s, lambda d: d["gpus"][3]["lost"] and d["waiting"]
                               and (why or d["gpus"][2]["processes"]),
                               "the lost GPU, the holder and the pod's process")
        # docs/workloads.md: a pod's label is "pod NAMESPACE/NAME/CONTAINER"
        pod_label = "pod ns/%s/c" % HOSTILE_POD
        if not why:
            self.assertEqual(doc["gpus"][2]["processes"][0]["workload"], pod_label)
        dom = self.dom(s.port)
        (sec,) = dom.sections
        self.assertEqual(sec["attrs"]["data-state"], "fresh")
        self.assertEqual([g["attrs"]["data-uuid"] for g in sec["gpus"]], uuids(SCENARIO, [3]))
        self.assertEqual([g["text"].split("GPU ")[1].split(" ")[0] for g in sec["gpus"]],
                         [str(i) for i in range(8)])
        lost = sec["gpus"][3]
        self.assertEqual(lost["attrs"]["data-health"], "LOST")
        self.assertIn("LOST", lost["text"])
        self.assertIn("lost", lost["text"].lower().replace("LOST", ""))
        self.assertEqual(sec["gpus"][6]["attrs"]["data-health"], "WARN")
        self.assertIn("WARN", sec["gpus"][6]["text"])
        self.assertIn("87 %", sec["gpus"][1]["text"])
        # the hostile text is text: in the GPU's words, and no element of it exists
        self.assertIn(HOSTILE_LABEL, sec["gpus"][0]["text"])
        self.assertIn(HOSTILE_ARG, sec["gpus"][0]["text"])
        if not why:
            self.assertIn(pod_label, sec["gpus"][2]["text"])
        else:
            print("no hostile pod name: %s" % why)
        self.assertEqual([t for t, _ in dom.tags].count("script"), 1)
        self.assertFalse([a for t, a in dom.tags if t in ("img", "b", "i")])
        # keyboard: every GPU can take the focus
        self.assertTrue(all(g["attrs"].get("tabindex") == "0" for g in sec["gpus"]))
        # the queue: position, who, why
        self.assertRegex(sec["text"], r"Waiting#userwaitedrequestwhy1root\d+ s.*first in line")
        if os.environ.get("GPUCTL_SCREENSHOT_DIR"):
            self.screenshot(s.port, "status-page-hostile.png", (1280, 900), dark=False)

    def test_a_busy_server(self):
        # what README shows: a 4-GPU job (one process per GPU) and a 1-GPU job with their
        # labels, utilisation and memory, a job waiting for the first one's GPUs, a GPU with a
        # row remap pending, the rest free; each said in words on the page
        s = self.server("agent")
        busy = {0: (97, 71, "62GiB"), 1: (95, 70, "61GiB"), 2: (96, 73, "62GiB"),
                3: (94, 69, "60GiB"), 4: (38, 52, "9GiB")}
        s.nvsim("set", "-i", "6", "remap.pending=1")
        big = self.hold(s, "-n", "4", "--only", "0,1,2,3", "--label", "llama-70b-sft", "--",
                        "sh", "-c", "for r in 0 1 2 3; do sleep 120 & done; wait")
        small = self.hold(s, "-n", "1", "--only", "4", "--label", "eval-sweep", "--",
                          "sleep", "120")
        # the processes on the GPUs: the big job's four ranks, the small job itself
        (shell,) = wait_until(lambda: children(big.pid), "the big job")
        ranks = wait_until(lambda: len(children(shell)) == 4 and children(shell), "its ranks")
        (sweep,) = wait_until(lambda: children(small.pid), "the small job")
        for i, pid in enumerate(ranks + [sweep]):
            util, temp, mem = busy[i]
            s.nvsim("proc", "add", "--pid", str(pid), "-i", str(i), "--mem", mem, "--util",
                    str(util))
            s.nvsim("set", "-i", str(i), "temperature=%d" % temp)
        self.wait_status(s, lambda d: all(d["gpus"][i]["holders"] and d["gpus"][i]["processes"]
                                          for i in busy), "the holders and their processes")
        self.hold(s, "-n", "4", "--only", "0,1,2,3", "--wait", "--label", "llama-70b-dpo", "--",
                  "true")
        self.wait_status(s, lambda d: d["waiting"], "the waiter")
        (sec,) = self.dom(s.port).sections
        gpus = sec["gpus"]
        for i, (util, temp, mem) in busy.items():
            self.assertIn("util %d %%" % util, gpus[i]["text"])
            self.assertIn("temp %d" % temp, gpus[i]["text"])
            self.assertIn("mem %s.0 / 80.0 GiB" % mem[:-3], gpus[i]["text"])
            self.assertIn("lease held", gpus[i]["text"])
            self.assertIn("llama-70b-sft" if i < 4 else "eval-sweep", gpus[i]["text"])
            self.assertNotIn("idle", gpus[i]["text"])  # its processes use it (docs/idle.md)
        self.assertEqual([g["attrs"]["data-health"] for g in gpus],
                         ["OK"] * 6 + ["WARN", "OK"])
        for i in (5, 6, 7):
            self.assertIn("lease free", gpus[i]["text"])
        self.assertIn("LIVE", sec["text"])
        self.assertRegex(sec["text"], r"Waiting#userwaitedrequestwhy1root\d+ s.*first in line")
        self.screenshot(s.port, "status-page.png", (1280, 900), dark=False)
        self.screenshot(s.port, "status-page-dark-phone.png", (390, 844), dark=True)

    def test_two_agents_side_by_side_and_dead_peers(self):
        # a and b name each other; c answers but does not name a (its CORS refuses a's page);
        # the last peer is a port nobody listens on
        a = self.server("agent", start=False)
        b = self.server("agent", start=False)
        c = self.server("exporter")
        a.fixed_port, b.fixed_port, dead = tx.free_port(), tx.free_port(), tx.free_port()
        url = "http://127.0.0.1:%d"
        conf_a = self.config("a.conf", "peers = %s, %s, %s\n" % (url % b.fixed_port,
                                                                  url % c.port, url % dead))
        conf_b = self.config("b.conf", "peers = %s\n" % (url % a.fixed_port))
        for s, conf in ((a, conf_a), (b, conf_b)):
            s.env["GPUCTL_CONFIG"] = conf
            s.start()
        b.nvsim("set", "-i", "4", "lost=1")
        self.wait_status(b, lambda d: d["gpus"][4]["lost"], "b's lost GPU")
        dom = self.dom(a.port)
        states = [(x["attrs"]["data-url"], x["attrs"]["data-state"]) for x in dom.sections]
        self.assertEqual(states, [("self", "fresh"), (url % b.port, "fresh"),
                                  (url % c.port, "unreachable"), (url % dead, "unreachable")])
        self_, peer_b, peer_c, peer_dead = dom.sections
        self.assertEqual([g["attrs"]["data-uuid"] for g in self_["gpus"]], uuids(SCENARIO))
        self.assertEqual([g["attrs"]["data-uuid"] for g in peer_b["gpus"]], uuids(SCENARIO, [4]))
        self.assertEqual(peer_b["gpus"][4]["attrs"]["data-health"], "LOST")
        self.assertEqual(self_["gpus"][4]["attrs"]["data-health"], "OK")
        for sec in (peer_c, peer_dead):
            self.assertEqual(sec["gpus"], [])  # never shown as idle GPUs
            self.assertIn("UNREACHABLE", sec["text"])
            self.assertNotIn("free", sec["text"])
        if os.environ.get("GPUCTL_SCREENSHOT_DIR"):
            self.screenshot(a.port, "status-page-peers.png", (1600, 1000), dark=False)


if __name__ == "__main__":
    unittest.main()
