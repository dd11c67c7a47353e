"""The host's facts of GPU processes (user, %CPU, resident memory, elapsed time, full command
line) in `gpuctl list --wide` and `gpuctl ps` (table and JSON). Expected values are what proc(5)
says of the process, read by this test itself: rss is /proc/PID/stat field 24 (pages), the start
time field 22 (clock ticks after boot), the CPU time fields 14 + 15; the command line is
/proc/PID/cmdline. A process in its first clock tick has elapsed 0 and %CPU 0, as ps(1) shows."""
import json
import os
import re
import pwd
import tempfile
import unittest

from gpuctl_test import EXIT_USAGE, SCENARIOS, SETTLED_SH, GpuctlTestCase, sim, sim_sh

PAGE = os.sysconf("SC_PAGESIZE")
HZ = os.sysconf("SC_CLK_TCK")


def me():
    return pwd.getpwuid(os.getuid()).pw_name


def bytes_text(n):
    """format_bytes without its blank, as docs/gpuctl.1 describes RSS: binary units, at most
    one decimal."""
    units = ["B", "KiB", "MiB", "GiB", "TiB"]
    v, u = float(n), 0
    while u + 1 < len(units) and v >= 1024:
        v /= 1024
        u += 1
    return "%d%s" % (v, units[u]) if u == 0 or v == int(v) else "%.1f%s" % (v, units[u])


def etime(s):
    """ps(1)'s etime: [[DD-]hh:]mm:ss."""
    d, h, m = s // 86400, s // 3600 % 24, s // 60 % 60
    if d:
        return "%d-%02d:%02d:%02d" % (d, h, m, s % 60)
    if h:
        return "%02d:%02d:%02d" % (h, m, s % 60)
    return "%02d:%02d" % (m, s % 60)


def stat_of(line):
    return line.rsplit(")", 1)[1].split()  # index k is field k + 3


class ListWide(GpuctlTestCase):
    def test_one_line_per_process_with_host_facts(self):
        script = (SETTLED_SH +
                  'sleep 60 & P=$!\n'
                  '"$NVSIM" proc add --pid $P -i 1 --mem 1GiB\n'
                  'sleep 61 & Q=$!\n'
                  '"$NVSIM" proc add --pid $Q -i 5 --mem 300MiB\n'
                  'settled $P; settled $Q\n'
                  'echo $P $Q\n'
                  'cat /proc/$P/stat /proc/$Q/stat /proc/uptime\n'
                  '"$GPUCTL" list --wide\n'
                  'cat /proc/$P/stat /proc/$Q/stat /proc/uptime\n'
                  'kill $P $Q\n')
        r = sim_sh("dgx-a100", script)
        self.assertOk(r)
        lines = r.out.splitlines()
        p, q = (int(x) for x in lines[0].split())
        before = [stat_of(lines[1]), stat_of(lines[2]), float(lines[3].split()[0])]
        after = [stat_of(lines[-3]), stat_of(lines[-2]), float(lines[-1].split()[0])]
        table = lines[4:-3]
        blank = table.index("")
        gpus, procs = table[:blank], table[blank + 1:]
        self.assertEqual(gpus[0].split(), ["GPU", "UUID", "NAME", "TEMP", "UTIL", "MEMORY",
                                           "POWER", "HEALTH"], r)  # no PROCESSES column
        self.assertEqual(len(gpus), 9, r)
        self.assertEqual(procs[0].split(), ["GPU", "PID", "USER", "GPU_MEM", "%CPU", "RSS",
                                            "ELAPSED", "WORKLOAD", "COMMAND"], r)
        self.assertEqual(len(procs), 3, r)
        # WORKLOAD and COMMAND are text, left-aligned under their headings; WORKLOAD is what
        # the kernel's cgroups say of the test's own processes (one or more words)
        at_wl, at_cmd = procs[0].index("WORKLOAD"), procs[0].index("COMMAND")
        for row, pid, gpu, mem, cmd, k in ((procs[1], p, "1", "1024MiB", "sleep 60", 0),
                                           (procs[2], q, "5", "300MiB", "sleep 61", 1)):
            cells = row[:at_wl].split() + [row[at_wl:at_cmd].strip(), row[at_cmd:]]
            self.assertEqual(cells[:4], [gpu, str(pid), me(), mem], r)
            self.assertEqual(cells[8], cmd)
            # rss: the same before and after (sleep does not grow)
            self.assertEqual(before[k][21], after[k][21])
            self.assertEqual(cells[5], bytes_text(int(after[k][21]) * PAGE), r)
            start = int(after[k][19]) / HZ
            lo, hi = int(max(0, before[2] - start)), int(after[2] - start) + 1
            self.assertIn(cells[6], [etime(s) for s in range(lo, hi + 1)], r)
            self.assertGreaterEqual(float(cells[4]), 0.0)
            cpu_s = (int(after[k][11]) + int(after[k][12])) / HZ
            if after[2] - start >= 1:  # past the first second: %CPU is CPU time / elapsed
                self.assertLessEqual(float(cells[4]), cpu_s / (before[2] - start) * 100 + 0.1)

    def test_process_on_a_mig_device(self):
        # GPU:MIG, the MIG device's index being its place among the GPU's instances (NVML's
        # nvmlDeviceGetMigDeviceHandleByIndex order, the scenario's order)
        with open(os.path.join(SCENARIOS, "a100-mig.json")) as f:
            inst = json.load(f)["gpus"][0]["mig"]["instances"]
        script = ('sleep 60 & P=$!\n'
                  '"$NVSIM" proc add --pid $P -i %s --mem 1GiB\n'
                  'echo $P\n'
                  '"$GPUCTL" list -w\n'
                  'kill $P\n' % inst[1]["uuid"])
        r = sim_sh("a100-mig", script)
        self.assertOk(r)
        pid = r.out.split("\n", 1)[0]
        (row,) = [l for l in r.out.splitlines() if l.split()[1:2] == [pid]]
        self.assertEqual(row.split()[:4], ["0:1", pid, me(), "1024MiB"], r)

    def test_no_processes(self):
        r = sim("dgx-a100", "list", "-w")
        self.assertOk(r)
        self.assertEqual(r.out.split("\n\n", 1)[1], "no GPU processes\n")

    def test_only_for_the_table(self):
        for args in (("--format", "json"), ("--format", "csv"), ("--query", "index")):
            self.assertOneLineError(sim("dgx-a100", "list", "--wide", *args), EXIT_USAGE,
                                    "--wide")


class PsHostFacts(GpuctlTestCase):
    def test_holder_job_and_foreign_process(self):
        # a lease whose job is sleep, and a foreign process on another GPU
        script = (SETTLED_SH +
                  '"$GPUCTL" run -n 1 --only 2 --label facts -- sleep 60 >/dev/null 2>&1 &\n'
                  'R=$!\n'
                  'i=0\n'
                  'until "$GPUCTL" ps --format json | grep -q \'"job_pid": [0-9]\'; do\n'
                  '  i=$((i+1)); [ $i -lt 400 ] || { kill $R; exit 9; }; sleep 0.05\n'
                  'done\n'
                  'sleep 62 & F=$!\n'
                  '"$NVSIM" proc add --pid $F -i 6 --mem 2GiB\n'
                  '"$GPUCTL" ps --format json > "$T/ps.json"\n'
                  'J=$(/usr/bin/python3 -c \'import json,sys; '
                  'print(json.load(open(sys.argv[1]))["devices"][0]["owner"]["job_pid"])\' '
                  '"$T/ps.json")\n'
                  'settled $J; settled $F\n'
                  '"$GPUCTL" ps --format json > "$T/ps.json"\n'
                  'cat "$T/ps.json"\n'
                  'echo ---\n'
                  '"$GPUCTL" ps\n'
                  'echo ---\n'
                  'echo $J $F\n'
                  'cat /proc/$J/stat /proc/$F/stat /proc/uptime\n'
                  'kill $J $F; wait $R || true\n')
        with tempfile.TemporaryDirectory() as t:
            r = sim_sh("dgx-a100", script, env={"T": t})
        self.assertOk(r)
        js, table, tail = r.out.split("---\n")
        doc = json.loads(js)
        tail = tail.splitlines()
        job, foreign = (int(x) for x in tail[0].split())
        sj, sf, up = stat_of(tail[1]), stat_of(tail[2]), float(tail[3].split()[0])
        leased, busy = doc["devices"]
        owner = leased["owner"]
        self.assertEqual(owner["job_pid"], job)
        self.assertEqual(owner["host_pid"], job)  # the job's facts, not gpuctl run's
        self.assertEqual(owner["cmdline"], "sleep 60")
        self.assertEqual(owner["host_memory"], int(sj[21]) * PAGE)
        self.assertTrue(0 <= owner["elapsed"] <= up - int(sj[19]) / HZ + 1, owner)
        self.assertGreaterEqual(owner["cpu_percent"], 0)
        (fp,) = busy["foreign"]
        self.assertEqual(fp["pid"], foreign)
        self.assertEqual(fp["cmdline"], "sleep 62")
        self.assertEqual(fp["host_memory"], int(sf[21]) * PAGE)
        self.assertTrue(0 <= fp["elapsed"] <= up - int(sf[19]) / HZ + 1, fp)
        self.assertGreaterEqual(fp["cpu_percent"], 0)

        rows = table.splitlines()
        self.assertEqual(rows[0].split()[:10], ["DEVICE", "UUID", "STATE", "HEALTH", "USER",
                                                "PID", "JOB", "WORKLOAD", "%CPU", "RSS"], r)
        # WORKLOAD (text, left-aligned under its heading, one or more words: what the kernel's
        # cgroups say of the test's processes) is cut out; the cells after it follow
        at_wl = rows[0].index("WORKLOAD")

        def cells_of(row):
            after = re.split(r"\s{2,}", row[at_wl:].strip(), maxsplit=1)
            return row[:at_wl].split() + after[:1] + (after[1].split() if len(after) > 1 else [])
        cells = cells_of(rows[1])
        self.assertEqual(cells[0], "2")
        self.assertEqual(cells[6], str(job))
        self.assertGreaterEqual(float(cells[8]), 0.0)
        self.assertEqual(cells[9], bytes_text(int(sj[21]) * PAGE), r)
        self.assertEqual(cells[10:12], ["sleep", "60"], r)
        self.assertEqual(cells_of(rows[2])[8:10], ["-", "-"], r)  # no holder: no facts


if __name__ == "__main__":
    unittest.main()
