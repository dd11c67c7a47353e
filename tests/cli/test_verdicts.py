"""One verdict per GPU, whoever asks (issue 24; docs/health.md, "One verdict"): for each fault
injected with the simulator, `list` (its JSON and its table's HEALTH column), `health`, `ps`,
`select`, the exporter's gpuctl_gpu_health gauge and the Python package give the faulty GPU the
same verdict, and it is the one docs/health.md says the fault makes. The faults: every NVML
function whose answer a verdict depends on (on dgx-a100: an Ampere with ECC on, its NVLinks into
NVSwitches), failing with a real error (UNKNOWN: the fact is unreadable, WARN), with GPU_IS_LOST
(FAIL) and with NOT_SUPPORTED on every GPU (a part or driver without the signal: no finding);
and the conditions `nvsim set` and `nvsim xid` make, each at, or just short of, its threshold.
The thresholds come from docs/health.md and the scenario file, never from gpuctl's output."""
import json
import os
import subprocess
import time

from cli_facts import Machine
from gpuctl_test import (GPUCTL, LIBGPUCTL, NVSIM, PYDIR, PYTHON, GpuctlTestCase, python_env,
                         run, sim_sh)
from test_exporter import by_gpu, free_port, http, parse_metrics, test_env

M = "dgx-a100"
GPU = 2  # the GPU every fault is put on
FACTS = Machine(M)
N = len(FACTS)
SLOWDOWN_C = FACTS.gpus[GPU]["temperature_slowdown_c"]
MAX_WIDTH = FACTS.gpus[GPU]["pcie"]["max_width"]
UUIDS = [g["uuid"] for g in FACTS.gpus]

# The NVML functions a verdict reads on this machine (docs/health.md, "One verdict": the
# fields of gpuctl_health_fields(), the ECC mode their reading depends on, the NVLink states and
# whether the GPU reaches NVSwitches). The ECC totals, remapped rows, PCIe replays and NVSwitch
# links are asked in the one field-values call first, and their own functions when it does not
# answer them; the simulator fails those entries too (sim/README.md).
FUNCTIONS = ("nvmlDeviceGetUUID", "nvmlDeviceGetName",
             "nvmlDeviceGetEccMode", "nvmlDeviceGetFieldValues",
             "nvmlDeviceGetTemperature", "nvmlDeviceGetTemperatureThreshold",
             "nvmlDeviceGetCurrentClocksEventReasons",
             "nvmlDeviceGetCurrPcieLinkWidth", "nvmlDeviceGetMaxPcieLinkWidth",
             "nvmlDeviceGetPcieReplayCounter", "nvmlDeviceGetTotalEccErrors",
             "nvmlDeviceGetRemappedRows", "nvmlDeviceGetNvLinkState",
             "nvmlDeviceGetNvLinkRemoteDeviceType")

# docs/health.md, "One verdict": what an answer makes of a health fact.
BY_ERROR = {"UNKNOWN": "WARN", "GPU_IS_LOST": "FAIL"}


def faults():
    """(name, nvsim commands, verdict of GPU and of the others) per fault."""
    out = []
    for fn in FUNCTIONS:
        for err, verdict in BY_ERROR.items():
            out.append((f"{fn} {err}", f'"$NVSIM" fail {fn} {err} -i {GPU}', verdict, "OK"))
        # a signal no GPU here has: never a finding (not even nvlink-down: no GPU of the
        # model has a link up)
        out.append((f"{fn} NOT_SUPPORTED", f'"$NVSIM" fail {fn} NOT_SUPPORTED', "OK", "OK"))
    # the handle: nothing can be read about the GPU (FAIL), or it is lost
    for err in ("UNKNOWN", "GPU_IS_LOST"):
        out.append((f"nvmlDeviceGetHandleByIndex_v2 {err}",
                    f'"$NVSIM" fail nvmlDeviceGetHandleByIndex_v2 {err} -i {GPU}', "FAIL", "OK"))
    # a function no verdict reads: the value is N/A, the verdict is untouched. Among them
    # (issue 29): the MIG mode, which a utilisation read says is off (nvml.h: utilisation is not
    # supported on MIG-enabled GPUs); the architecture, which only chooses between retired
    # pages and remapped rows, and this GPU's remapped-row entries answer; the PCIe generation,
    # which only budgets the replay rate, and there is no earlier sample to rate against
    for fn in ("nvmlDeviceGetPowerUsage", "nvmlDeviceGetUtilizationRates",
               "nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetMigMode",
               "nvmlDeviceGetArchitecture", "nvmlDeviceGetCurrPcieLinkGeneration"):
        out.append((f"{fn} UNKNOWN", f'"$NVSIM" fail {fn} UNKNOWN -i {GPU}', "OK", "OK"))
    # the checks' conditions (docs/health.md, "Checks")
    for what, verdict in (
            ("ecc.volatile.uncorrected=1", "FAIL"),
            ("remap.failure=1", "FAIL"),
            ("remap.pending=1", "WARN"),
            ("remap.uncorrected=512", "WARN"),
            ("remap.uncorrected=511", "OK"),
            ("recovery_action=1", "FAIL"),
            ("recovery_action=3", "WARN"),
            (f"temperature={SLOWDOWN_C - 5}", "WARN"),
            (f"temperature={SLOWDOWN_C - 6}", "OK"),
            ("clocks_event_reasons=0x8", "WARN"),
            ("clocks_event_reasons=0x4", "OK"),  # SW power cap: not a HW slowdown
            (f"pcie.width={MAX_WIDTH // 2}", "WARN"),
            ("nvlink.3=down", "WARN"),
            ("lost=1", "FAIL")):
        out.append((what, f'"$NVSIM" set -i {GPU} {what}', verdict, "OK"))
    # XIDs in the kernel log, by class (docs/health.md, "XIDs")
    for xid, verdict in ((79, "FAIL"), (13, "WARN"), (63, "OK")):
        out.append((f"XID {xid}", f'"$NVSIM" xid -i {GPU} {xid}', verdict, "OK"))
    return out


PY = ("import gpuctl, json\n"
      "print(json.dumps({'devices': [d.health for d in gpuctl.devices()],\n"
      "                  'health': [h.verdict for h in gpuctl.health()]}))\n")

STEPS = (("list_json", '"$GPUCTL" list --format json'),
         ("list", '"$GPUCTL" list --color never'),
         ("health", '"$GPUCTL" health --format json || true'),
         ("ps", '"$GPUCTL" ps --all --format json'),
         ("select8", '"$GPUCTL" select -n 8 || echo "rc=$?"'),
         ("select7", '"$GPUCTL" select -n 7 || echo "rc=$?"'),
         ("python", '"$PYTHON" -c "$PY"'))


def script(fault):
    return "\n".join([fault] + [f'echo "@@{name}"\n{cmd}' for name, cmd in STEPS]) + "\n"


def split(out):
    parts, name = {}, None
    for line in out.splitlines(keepends=True):
        if line.startswith("@@"):
            name = line[2:].strip()
            parts[name] = ""
        elif name:
            parts[name] += line
    return parts


def table_verdicts(text):
    """The HEALTH column of `gpuctl list`, by GPU row (MIG rows have none here)."""
    lines = text.splitlines()
    col = lines[0].index("HEALTH")
    out = {}
    for line in lines[1:]:
        first = line.split()[0]
        if first.isdigit():
            out[int(first)] = line[col:].split()[0]
    return out


def chosen(out):
    """The GPUs `gpuctl select` printed (CUDA_VISIBLE_DEVICES=UUID,...), None when it failed."""
    for line in out.splitlines():
        if line.startswith("CUDA_VISIBLE_DEVICES="):
            return {UUIDS.index(u) for u in line.split("=", 1)[1].split(",")}
        if line.startswith("rc="):
            return None
    raise AssertionError("no selection in %r" % out)


class OneVerdict(GpuctlTestCase):
    def exporter_verdicts(self, fault):
        """gpuctl_gpu_health of the exporter's first sample, the fault put before it starts."""
        for _ in range(5):
            port = free_port()
            p = subprocess.Popen(
                [NVSIM, "exec", M, "--", "sh", "-ec",
                 fault + f'\nexec "$GPUCTL" exporter --listen 127.0.0.1:{port} --interval 3600'],
                env=test_env({"GPUCTL": GPUCTL, "NVSIM": NVSIM}), stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, text=True)
            try:
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline and p.poll() is None:
                    try:
                        status, _, body = http(port, "/metrics", timeout=5)
                    except OSError:
                        time.sleep(0.05)
                        continue
                    self.assertEqual(status, 200, body)
                    gauge = by_gpu(parse_metrics(body), "gpuctl_gpu_health")
                    return {g: ("OK", "WARN", "FAIL")[int(v)] for g, v in gauge.items()}
            finally:
                p.terminate()
                err = p.communicate(timeout=30)[1]
            if "in use" not in err:
                raise AssertionError("exporter gave no metrics: rc=%s %s" % (p.returncode, err))
        raise AssertionError("no free port after 5 tries")

    def test_every_command_every_fault(self):
        env = python_env({"PYTHON": PYTHON, "PY": PY, "PYTHONPATH": PYDIR,
                          "GPUCTL_LIBRARY": LIBGPUCTL})
        for name, fault, verdict, others in faults():
            with self.subTest(fault=name):
                want = {i: verdict if i == GPU else others for i in range(N)}
                r = sim_sh(M, script(fault), env=env)
                self.assertEqual(r.rc, 0, r)
                out = split(r.out)
                got = {
                    "list --format json": {g["index"]: g["health"]
                                           for g in json.loads(out["list_json"])["gpus"]},
                    "list": table_verdicts(out["list"]),
                    "health --format json": {g["index"]: g["verdict"]
                                             for g in json.loads(out["health"])["gpus"]},
                    "ps --all --format json": {d["index"]: d["health"]
                                               for d in json.loads(out["ps"])["devices"]},
                }
                py = json.loads(out["python"])
                got["gpuctl.devices()"] = dict(enumerate(py["devices"]))
                got["gpuctl.health()"] = dict(enumerate(py["health"]))
                got["exporter"] = self.exporter_verdicts(fault)
                # one verdict, whoever asks; and the one the docs say
                ref = got["health --format json"]
                for who, verdicts in got.items():
                    self.assertEqual(verdicts, ref, f"{who} and health differ: {r}")
                self.assertEqual(ref, want, r)
                # select keeps work off a FAIL GPU, and off a WARN one while others qualify
                # (docs/selection.md); an OK GPU is chosen when all eight are asked for. A GPU
                # without a UUID is never chosen, whatever its verdict (docs/selection.md,
                # "lost or unidentified")
                all8, seven = chosen(out["select8"]), chosen(out["select7"])
                if fault.startswith('"$NVSIM" fail nvmlDeviceGetUUID '):
                    self.assertIsNone(all8, r)
                    self.assertIn("lost or unidentified: ", r.err)
                elif verdict == "FAIL":
                    self.assertIsNone(all8, r)
                    self.assertEqual(seven, set(range(N)) - {GPU}, r)
                elif verdict == "WARN":
                    self.assertEqual(all8, set(range(N)), r)
                    self.assertEqual(seven, set(range(N)) - {GPU}, r)
                else:
                    self.assertEqual(all8, set(range(N)), r)
                    self.assertIsNotNone(seven, r)
