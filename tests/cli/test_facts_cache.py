"""The facts cache (docs/ARCHITECTURE.md, the nvml room's facts cache; issue 29): what a GPU cannot
change while the machine runs (name, PCI bus id and device id, slowdown temperature, maximum
PCIe width) is kept per user, boot and driver, found by UUID, and not asked of NVML again; a
file of another boot or driver, of another user, writable by others, or not exactly of the
format is not used.
Expected facts come from the scenario file (cli_facts), the boot id from the kernel."""
import json
import os
import shutil
import tempfile

from cli_facts import Machine
from gpuctl_test import GPUCTL, GpuctlTestCase, sim_sh

M = "dgx-a100"
FACTS = Machine(M)
N = len(FACTS)
CACHED = ("nvmlDeviceGetName", "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetTemperatureThreshold",
          "nvmlDeviceGetMaxPcieLinkWidth")


def boot_id():
    with open("/proc/sys/kernel/random/boot_id") as f:
        return f.read().strip()


def driver_line():
    """The driver line the simulator's /proc/driver/nvidia/version gives (sim/procfs.c), with
    the scenario's driver version."""
    return ("driver NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  (nvsim)"
            % FACTS.system["driver_version"])


def expected_lines():
    """The cache file's GPU lines, from the scenario."""
    out = []
    for g in FACTS.gpus:
        out.append("\t".join(["gpu", g["uuid"], g["pci_bus_id"], str(int(g["pci_device_id"], 16)),
                              str(g["temperature_slowdown_c"]), str(g["pcie"]["max_width"]),
                              g["name"]]))
    return out


class FactsCache(GpuctlTestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="gpuctl-test-facts-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.file = os.path.join(self.dir, "facts")

    def list(self, script="", env=None, args="list --color never"):
        """`gpuctl ARGS` on M after script, with the cache file self.file: (output, calls)."""
        calls = os.path.join(self.dir, "calls.json")
        e = {"GPUCTL_FACTS_CACHE": self.file}
        e.update(env or {})
        r = sim_sh(M, script + f'"$GPUCTL" {args}\n', ("--calls-out", calls), env=e)
        self.assertOk(r)
        with open(calls) as f:
            return r.out, json.load(f)["functions"]

    def read_file(self):
        with open(self.file) as f:
            return f.read().splitlines()

    def assertReads(self, fns, read):
        for fn in CACHED:
            self.assertEqual(fns.get(fn), N if read else None, fn)

    def test_second_listing_asks_nvml_less_and_shows_the_same(self):
        first, fns1 = self.list()
        self.assertReads(fns1, True)
        st = os.stat(self.file)
        self.assertEqual(st.st_mode & 0o777, 0o600)
        self.assertEqual(st.st_uid, os.geteuid())
        self.assertEqual(self.read_file(), ["gpuctl-facts 2", "boot " + boot_id(),
                                            driver_line()] + expected_lines())
        again, fns2 = self.list()
        self.assertReads(fns2, False)
        self.assertEqual(again, first)
        # what changes is still read every time
        for fn in ("nvmlDeviceGetUUID", "nvmlDeviceGetTemperature", "nvmlDeviceGetMemoryInfo_v2"):
            self.assertEqual(fns2.get(fn), N, fn)

    def test_cached_facts_are_used_and_judged(self):
        self.list()
        # the cache is what the listing shows: a name changed in it shows (the file is the
        # user's own, so this is no attack: it proves the facts come from it)
        lines = self.read_file()
        lines[3] = lines[3].replace("NVIDIA A100-SXM4-80GB", "NVIDIA Cached Name")
        with open(self.file, "w") as f:
            f.write("\n".join(lines) + "\n")
        out, _ = self.list()
        self.assertIn("NVIDIA Cached Name", out.splitlines()[1])
        # the slowdown temperature from the cache still makes the temperature check: 5 C
        # short of it is WARN (docs/health.md)
        slow = FACTS.gpus[3]["temperature_slowdown_c"]
        out, fns = self.list(f'"$NVSIM" set -i 3 temperature={slow - 5}\n',
                             args="list --format json")
        # one threshold call per GPU: the shutdown one (the JSON shows it), not the slowdown
        self.assertEqual(fns.get("nvmlDeviceGetTemperatureThreshold"), N)
        gpus = json.loads(out)["gpus"]
        self.assertEqual(gpus[3]["health"], "WARN")
        self.assertEqual(gpus[3]["temperature_slowdown"], slow)

    def test_unusable_files_are_not_used(self):
        good = None

        def reset():
            nonlocal good
            if os.path.lexists(self.file):
                os.unlink(self.file)
            if good is None:
                self.list()
                with open(self.file) as f:
                    good = f.read()
            with open(self.file, "w") as f:
                f.write(good)
            os.chmod(self.file, 0o600)

        cases = {
            "another boot": lambda: self.rewrite(good.replace(boot_id(), "0" * 8 + boot_id()[8:])),
            # a driver upgraded without a reboot may name a GPU otherwise
            "another driver": lambda: self.rewrite(good.replace(" (nvsim)", " (other)")),
            "a bad line": lambda: self.rewrite(good + "gpu\tGPU-x\n"),
            "no header": lambda: self.rewrite(good.split("\n", 1)[1]),
            "cut short": lambda: self.rewrite(good[:-3]),
            "writable by others": lambda: os.chmod(self.file, 0o666),
            "another user's": lambda: os.chown(self.file, 65534, 65534),
            "a symbolic link": self.symlink,
        }
        for what, spoil in cases.items():
            with self.subTest(what):
                reset()
                spoil()
                # the name changed in the file would show if it were used
                self.poison_name()
                out, fns = self.list()
                self.assertReads(fns, True)
                self.assertNotIn("Poisoned", out)

    def rewrite(self, text):
        with open(self.file, "w") as f:
            f.write(text)

    def poison_name(self):
        """Puts a name no GPU has into the file (whatever its state), keeping its owner and mode."""
        path = os.path.realpath(self.file)
        with open(path) as f:
            text = f.read()
        st = os.stat(path)
        with open(path, "w") as f:
            f.write(text.replace("NVIDIA A100-SXM4-80GB", "NVIDIA Poisoned"))
        os.chown(path, st.st_uid, st.st_gid)
        os.chmod(path, st.st_mode & 0o777)

    def symlink(self):
        target = self.file + ".target"
        os.rename(self.file, target)
        os.symlink(target, self.file)

    def test_runtime_dir_default(self):
        runtime = os.path.join(self.dir, "run-user")
        os.mkdir(runtime, 0o700)
        env = {"GPUCTL_FACTS_CACHE": "", "XDG_RUNTIME_DIR": runtime}
        # GPUCTL_FACTS_CACHE empty or off: none, whatever XDG_RUNTIME_DIR says
        for off in ("", "off"):
            env["GPUCTL_FACTS_CACHE"] = off
            _, fns = self.list(env=env)
            self.assertEqual(os.listdir(runtime), [])
        # unset: the user's runtime directory
        r = sim_sh(M, 'unset GPUCTL_FACTS_CACHE\n"$GPUCTL" list >/dev/null\n',
                   env={"XDG_RUNTIME_DIR": runtime})
        self.assertOk(r)
        self.assertEqual(os.listdir(runtime), ["gpuctl-facts"])
        # a runtime directory others may write is not used
        shared = os.path.join(self.dir, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o777)
        r = sim_sh(M, 'unset GPUCTL_FACTS_CACHE\n"$GPUCTL" list >/dev/null\n',
                   env={"XDG_RUNTIME_DIR": shared})
        self.assertOk(r)
        self.assertEqual(os.listdir(shared), [])

    def test_another_machine_view_keeps_its_entries(self):
        """A GPU the file knows that this snapshot does not have (another NVML view of the
        machine) keeps its entry when the file is written again; a UUID the file does not know
        is read."""
        self.list()
        lines = self.read_file()
        extra = "gpu\tGPU-00000000-1111-2222-3333-444444444444\t\t\t\t\tNVIDIA Elsewhere"
        # drop GPU 5's entry: it must be read again, and the file written with it
        gone = lines.pop(3 + 5)
        with open(self.file, "w") as f:
            f.write("\n".join(lines + [extra]) + "\n")
        _, fns = self.list()
        self.assertEqual(fns.get("nvmlDeviceGetName"), 1)
        self.assertEqual(fns.get("nvmlDeviceGetPciInfo_v3"), 1)
        now = self.read_file()
        self.assertIn(gone, now)
        self.assertIn(extra, now)
        self.assertEqual(len(now), 3 + N + 1)
