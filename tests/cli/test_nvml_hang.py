"""A driver that stops answering: one-shot commands give up after GPUCTL_NVML_TIMEOUT seconds
(docs/gpuctl.1, ENVIRONMENT and EXIT STATUS 7) with one line naming the call and the GPU, print
nothing else, leave no lease and start no job; live commands, and run while its job runs, are not
ended by it.

The hang is the simulator's (`nvsim hang FUNCTION [-i GPU]`, sim/README.md): the call blocks until
`nvsim unhang`, and `nvsim hung` names the calls blocked now, so a test waits for the hang itself
and never for a guessed time. GPUCTL_NVML_TIMEOUT=1 is a configured limit, not a speed. Expected
PCI bus ids and UUIDs come from the scenario file.
"""
import json
import os
import shlex
import tempfile
import unittest

from gpuctl_test import EXIT_NVML_HUNG, EXIT_OK, EXIT_USAGE, SCENARIOS, GpuctlTestCase, sim_sh

SCENARIO = "dgx-a100"

# Every gpuctl under test runs under `timeout -s KILL 50` (GUARD) and every script ends by killing
# the processes its hang rules caught: a gpuctl that fails to give up fails the test instead of
# outliving it (the 120 s the whole script may take, SCRIPT_TIMEOUT, is beyond any of that).
# Neither is a speed: a bound of 1 s is given up on long before.
GUARD = "timeout -s KILL 50"
SCRIPT_TIMEOUT = 120
# Shell: `hung_child PID` prints the pid of the process with parent PID that `nvsim hung` lists
# (a gpuctl started by GUARD, once its call hangs), waiting for it at most 30 s; `cleanup` kills
# what is still hung, and the background processes in $bg.
HUNG_SH = ('hung_child() {\n'
           '  i=0\n'
           '  while :; do\n'
           '    for p in $($NVSIM hung | cut -d" " -f1); do\n'
           '      pp=$(sed -n "s/^PPid:[[:space:]]*//p" /proc/$p/status 2>/dev/null || true)\n'
           '      [ "$pp" != "$1" ] || { echo $p; return 0; }\n'
           '    done\n'
           '    i=$((i + 1)); [ $i -lt 3000 ] || { echo "nothing of $1 hung" >&2; return 9; }\n'
           '    sleep 0.01\n'
           '  done\n'
           '}\n'
           'bg=""\n'
           'cleanup() {\n'
           '  for p in $bg $($NVSIM hung | cut -d" " -f1); do kill -9 $p 2>/dev/null || true; done\n'
           '}\n'
           'trap cleanup EXIT\n')


def line(function, gpu=None, bus=None, bound="1"):
    where = ""
    if gpu is not None:
        where = " for GPU %d" % gpu + (" (%s)" % bus if bus else "")
    return ("gpuctl: NVML did not answer %s%s within %s s (GPUCTL_NVML_TIMEOUT)"
            % (function, where, bound))


class Hang(GpuctlTestCase):
    def setUp(self):
        tmp = tempfile.TemporaryDirectory(prefix="gpuctl-nvml-hang-")
        self.addCleanup(tmp.cleanup)
        self.tmp = tmp.name
        self.env = {"GPUCTL_LEASE_DIR": os.path.join(self.tmp, "leases")}
        with open(os.path.join(SCENARIOS, SCENARIO + ".json")) as f:
            doc = json.load(f)
        self.bus = [g["pci_bus_id"] for g in doc["gpus"]]
        self.uuid = [g["uuid"] for g in doc["gpus"]]

    def path(self, name):
        return os.path.join(self.tmp, name)

    def read(self, name):
        with open(self.path(name)) as f:
            return f.read()

    def leased(self):
        """The devices `gpuctl ps` says are leased, read after the test's script."""
        return [d for d in json.loads(self.read("ps"))["devices"] if d["state"] == "leased"]

    def hung_command(self, hangs, args, timeout="1"):
        """Runs `gpuctl ARGS` with the hang rules given as (function, gpu or None) under
        GPUCTL_NVML_TIMEOUT=timeout; then, the rules gone, `gpuctl ps`. Returns (rc, stdout,
        stderr) of the command."""
        rules = "".join("$NVSIM hang %s%s\n" % (f, "" if g is None else " -i %d" % g)
                        for f, g in hangs)
        t = shlex.quote(self.tmp)
        script = (HUNG_SH + rules +
                  "rc=0\n"
                  "GPUCTL_NVML_TIMEOUT=%s %s $GPUCTL %s >%s/out 2>%s/err || rc=$?\n"
                  "echo $rc >%s/rc\n"
                  "cleanup\n"
                  "$NVSIM unhang\n"
                  "$GPUCTL ps --format json >%s/ps\n" % (timeout, GUARD, args, t, t, t, t))
        r = sim_sh(SCENARIO, script, env=self.env, timeout=SCRIPT_TIMEOUT)
        self.assertOk(r)
        return int(self.read("rc")), self.read("out"), self.read("err")

    def assertGaveUp(self, got, want_line):
        rc, out, err = got
        self.assertEqual(rc, EXIT_NVML_HUNG, got)
        self.assertEqual(err.splitlines(), [want_line], got)
        self.assertEqual(out, "", "nothing but the line is printed")

    def test_list_names_the_call_and_the_gpu(self):
        got = self.hung_command([("nvmlDeviceGetTemperature", 3)], "list")
        self.assertGaveUp(got, line("nvmlDeviceGetTemperature", 3, self.bus[3]))

    def test_no_device_yet(self):
        # init and the device count are about no GPU: the line names the call alone
        ran = self.path("ran")
        for fn in ("nvmlInit_v2", "nvmlDeviceGetCount_v2"):
            for args in ("list", "select -n 1", "run -n 1 -- touch " + shlex.quote(ran)):
                with self.subTest(function=fn, command=args):
                    got = self.hung_command([(fn, None)], args)
                    self.assertGaveUp(got, line(fn))
                    self.assertEqual(self.leased(), [])
                    self.assertFalse(os.path.exists(ran), "run started its command")

    def test_select_hands_out_no_gpu_it_could_not_read(self):
        # the memory is read after the PCI bus id, so the line has both
        for args in ("select -n 2", "select -n 1 --format env", "select -n 1 --hold 60"):
            with self.subTest(command=args):
                got = self.hung_command([("nvmlDeviceGetMemoryInfo_v2", 5)], args)
                self.assertGaveUp(got, line("nvmlDeviceGetMemoryInfo_v2", 5, self.bus[5]))
                self.assertEqual(self.leased(), [], "no lease, no holder left")

    def test_run_starts_nothing_when_its_gpus_cannot_be_read(self):
        ran = self.path("ran")
        got = self.hung_command([("nvmlDeviceGetTemperature", 6)],
                                "run -n 8 -- touch " + shlex.quote(ran))
        self.assertGaveUp(got, line("nvmlDeviceGetTemperature", 6, self.bus[6]))
        self.assertFalse(os.path.exists(ran), "run started its command")
        self.assertEqual(self.leased(), [])

    def test_run_hung_after_its_lease_was_taken_leaves_none(self):
        # run --retry sets up its XID event set after the lease is taken and before the job
        # starts: a hang there finds the lease held (ps says so while it hangs), and after
        # the line neither the lease nor the job exists
        t = shlex.quote(self.tmp)
        ran = shlex.quote(self.path("ran"))
        script = (HUNG_SH +
                  "$NVSIM hang nvmlDeviceRegisterEvents -i 3\n"
                  "GPUCTL_NVML_TIMEOUT=1 %s $GPUCTL run -n 1 --retry 1 -- touch %s"
                  " >%s/out 2>%s/err &\n"
                  "bg=$!\n"
                  "hung_child $bg >/dev/null\n"
                  "$GPUCTL ps --format json >%s/ps-during\n"
                  "rc=0; wait $bg || rc=$?\n"
                  "echo $rc >%s/rc\n"
                  "cleanup\n"
                  "$NVSIM unhang\n"
                  "$GPUCTL ps --format json >%s/ps\n" % (GUARD, ran, t, t, t, t, t))
        r = sim_sh(SCENARIO, script, env=self.env, timeout=SCRIPT_TIMEOUT)
        self.assertOk(r)
        during = [d for d in json.loads(self.read("ps-during"))["devices"]
                  if d["state"] == "leased"]
        self.assertEqual(len(during), 1, "the lease was held when the call hung")
        got = (int(self.read("rc")), self.read("out"), self.read("err"))
        self.assertGaveUp(got, line("nvmlDeviceRegisterEvents", 3, self.bus[3]))
        self.assertFalse(os.path.exists(self.path("ran")), "run started its command")
        self.assertEqual(self.leased(), [], "the lease ended with the process")

    def test_other_one_shot_commands(self):
        # a handle lookup comes before anything is read of that GPU: no bus id yet
        for args in ("topo", "info", "health", "ps", "slurm gres", "lease init",
                     "list --query index,uuid --format csv"):
            with self.subTest(command=args):
                got = self.hung_command([("nvmlDeviceGetHandleByIndex_v2", 4)], args)
                self.assertGaveUp(got, line("nvmlDeviceGetHandleByIndex_v2", 4))

    def test_hung_shutdown_keeps_the_output_and_the_status(self):
        rc, out, err = self.hung_command([("nvmlShutdown", None)], "list")
        self.assertEqual(rc, EXIT_OK, (rc, out, err))
        self.assertEqual(err.splitlines(), [line("nvmlShutdown")])
        rows = out.splitlines()[1:]
        self.assertEqual([r.split()[1] for r in rows], [u[:12] for u in self.uuid])

    def test_select_hold_returns_though_its_holder_hangs_letting_go_of_nvml(self):
        # the holder frees its NVML context once it holds the lease; a hung nvmlShutdown there
        # must not keep `$(gpuctl select --hold)` waiting for the holder's stdout to close
        t = shlex.quote(self.tmp)
        script = (HUNG_SH +
                  "$NVSIM hang nvmlShutdown\n"
                  "rc=0; out=$(GPUCTL_NVML_TIMEOUT=1 %s $GPUCTL select -n 1 --hold 60 2>%s/err)"
                  " || rc=$?\n"
                  "echo \"$rc $out\"\n"
                  "i=0; until [ -n \"$($NVSIM hung)\" ]; do i=$((i + 1)); [ $i -lt 3000 ];"
                  " sleep 0.01; done\n"
                  "$NVSIM hung | cut -d' ' -f3\n" % (GUARD, t))
        r = sim_sh(SCENARIO, script, env=self.env, timeout=SCRIPT_TIMEOUT)
        self.assertOk(r)
        self.assertEqual(r.out.splitlines(),
                         ["0 CUDA_VISIBLE_DEVICES=" + self.uuid[0], "nvmlShutdown"],
                         self.read("err"))

    def test_bad_values_are_usage_errors(self):
        for v in ("abc", "-1", "1e9", "86401", "1 s", " 1", "inf", "nan", "0x10", "OFF"):
            with self.subTest(value=v):
                got = self.hung_command([], "list", timeout=shlex.quote(v))
                rc, out, err = got
                self.assertEqual(rc, EXIT_USAGE, got)
                self.assertEqual(out, "")
                self.assertEqual(len(err.splitlines()), 1, got)
                self.assertTrue(err.startswith("gpuctl: GPUCTL_NVML_TIMEOUT: '%s'" % v), got)

    def test_good_values_are_accepted(self):
        for v in ("0", "off", "0.5", "86400", "30", ""):
            with self.subTest(value=v):
                rc, out, err = self.hung_command([], "list --query index --format csv",
                                                 timeout=shlex.quote(v))
                self.assertEqual((rc, err), (EXIT_OK, ""))
                self.assertEqual(out.split(), ["index"] + [str(i) for i in range(8)])

    def keeps_waiting(self, args, timeout, done_sh=""):
        """Starts `gpuctl ARGS` (GPUCTL_NVML_TIMEOUT=timeout) on a hung call, waits until it
        hangs, then lets a `gpuctl list` with a bound of 1 s hang on the same call and give up:
        by then the first has been hung for longer than 1 s. Returns the script's output:
        'alive' when the first still runs at that point, then done_sh's."""
        t = shlex.quote(self.tmp)
        script = (HUNG_SH +
                  "$NVSIM hang nvmlDeviceGetCount_v2\n"
                  "GPUCTL_NVML_TIMEOUT=%s %s $GPUCTL %s >%s/out 2>%s/err &\n"
                  "top=$!; bg=$top\n"
                  "pid=$(hung_child $top); bg=\"$bg $pid\"\n"
                  "rc=0; GPUCTL_NVML_TIMEOUT=1 %s $GPUCTL list >/dev/null 2>&1 || rc=$?\n"
                  "[ $rc = 7 ] || { echo \"the bounded list exited $rc\" >&2; exit 1; }\n"
                  "kill -0 $pid && echo alive\n"
                  "$NVSIM unhang\n" % (timeout, GUARD, args, t, t, GUARD) + done_sh)
        r = sim_sh(SCENARIO, script, env=self.env, timeout=SCRIPT_TIMEOUT)
        self.assertOk(r)
        return r.out

    def test_off_sets_no_bound(self):
        for v in ("off", "0"):
            with self.subTest(value=v):
                out = self.keeps_waiting("list --query index,power.draw --format csv", v,
                                         "rc=0; wait $top || rc=$?; echo rc $rc\n")
                self.assertEqual(out.splitlines(), ["alive", "rc 0"])
                rows = self.read("out").splitlines()
                self.assertEqual([r.split(",")[0] for r in rows[1:]],
                                 [str(i) for i in range(8)], "the whole answer, once unhung")

    def test_live_commands_are_not_ended(self):
        # they read NVML again and again: a hung reading is theirs to show, not an exit
        for args in ("watch -c 1", "health --watch --interval 1"):
            with self.subTest(command=args):
                out = self.keeps_waiting(args, "1")
                self.assertEqual(out.splitlines()[:1], ["alive"])

    def test_run_is_not_ended_while_its_job_runs(self):
        # run --retry checks the job's GPUs while it runs; a hung check must not end gpuctl
        # (the job would lose its parent): the bound is for the time before the job starts
        t = shlex.quote(self.tmp)
        job = ("touch %s/started; i=0; until [ -e %s/go ]; do i=$((i + 1));"
               " [ $i -lt 6000 ] || exit 9; sleep 0.01; done" % (t, t))
        script = (HUNG_SH +
                  "GPUCTL_NVML_TIMEOUT=1 %s $GPUCTL run -n 1 --retry 1 -- sh -c %s"
                  " >%s/out 2>%s/err &\n"
                  "top=$!; bg=$top\n"
                  "i=0; until [ -e %s/started ]; do i=$((i + 1)); [ $i -lt 3000 ]; sleep 0.01;"
                  " done\n"
                  "$NVSIM hang nvmlDeviceGetCount_v2\n"
                  "pid=$(hung_child $top); bg=\"$bg $pid\"\n"
                  "rc=0; GPUCTL_NVML_TIMEOUT=1 %s $GPUCTL list >/dev/null 2>&1 || rc=$?\n"
                  "[ $rc = 7 ] || { echo \"the bounded list exited $rc\" >&2; exit 1; }\n"
                  "kill -0 $pid && echo alive\n"
                  "$NVSIM unhang\n"
                  "touch %s/go\n"
                  "rc=0; wait $top || rc=$?; echo rc $rc\n"
                  % (GUARD, shlex.quote(job), t, t, t, GUARD, t))
        r = sim_sh(SCENARIO, script, env=self.env, timeout=SCRIPT_TIMEOUT)
        self.assertOk(r)
        self.assertEqual(r.out.splitlines(), ["alive", "rc 0"], self.read("err"))


if __name__ == "__main__":
    unittest.main()
