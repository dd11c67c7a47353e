"""The ledger survives kill -9 of its writer (docs/ledger.md, "Crash safety"; issue 27's
"Reliability"): build/tests/ledger-writer samples as fast as it can and is killed with SIGKILL at
a random moment (spread over four times what a writer takes here to commit its first sample),
1,000 times over one database. After each kill the database opens (the next writer opens it;
PRAGMA integrity_check says ok), and nothing committed is lost: the writer
reports each committed sample on stdout, and its records hold at least that much usage and at
most one sample more (the one in flight, committed but not yet reported). At the next open the
records it left open are ended "agent-restart" at the last sample that observed them."""
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time
import unittest

from gpuctl_test import BUILD, GpuctlTestCase

WRITER = os.path.join(BUILD, "tests", "ledger-writer")
KILLS = 1000
W0 = 1704067200


class LedgerCrashTest(GpuctlTestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gpuctl-ledger-crash-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.db = os.path.join(self.tmp, "ledger.db")

    # The checks open the database read-only, as gpuctl report does: a ledger file, once it
    # exists, is whole (docs/ledger.md, "Crash safety"), so a reader never meets a hot journal
    # that only a writer could roll back, nor a file without tables.
    def connect(self):
        return sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)

    def integrity(self):
        c = self.connect()
        try:
            return c.execute("PRAGMA integrity_check").fetchone()[0]
        finally:
            c.close()

    def usage_of(self, pid):
        c = self.connect()
        try:
            return c.execute("SELECT count(*), coalesce(sum(gpu_s), 0), max(end_s IS NULL)"
                             " FROM records WHERE key LIKE ?", (f"{pid}/%",)).fetchone()
        finally:
            c.close()

    def writer_time(self, until):
        """How long a writer takes, on this machine now, until until(writer, its ledger's path)
        returns: the median of five writers on ledgers of their own, each killed after."""
        took = []
        for i in range(5):
            db = os.path.join(self.tmp, "calibrate-%d.db" % i)
            t0 = time.monotonic()
            w = subprocess.Popen([WRITER, "loop", db, str(W0)], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL)
            until(w, db)
            took.append(time.monotonic() - t0)
            w.kill()
            w.communicate()
        return sorted(took)[2]

    def test_kill_9_a_thousand_times(self):
        rnd = random.Random(27)
        # how long a writer takes, on this machine now (an ASan build, a loaded CI), to commit
        # its first sample: the kills are spread over four times that (at least 20 ms), so
        # that most runs commit some samples and the rest die before, while or just after
        spread = max(0.02, 4 * self.writer_time(lambda w, db: w.stdout.readline()))
        deadline = time.monotonic() + 120 + KILLS * spread
        runs = []  # (pid, last committed sample reported or -1)
        for i in range(KILLS):
            # each run's clock starts after the last one's (a restart), 10^5 s apart
            w = subprocess.Popen([WRITER, "loop", self.db, str(W0 + i * 100000)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            time.sleep(rnd.uniform(0, spread))
            w.send_signal(signal.SIGKILL)
            out, err = w.communicate()
            # killed, or (rarely) it failed on its own: that would be a bug
            self.assertEqual(w.returncode, -signal.SIGKILL, err)
            lines = out.decode().split()
            last = int(lines[-1]) if lines else -1
            runs.append((w.pid, last))
            if not os.path.exists(self.db):  # killed before the first ledger was whole
                self.assertEqual(last, -1, (i, w.pid))
                continue
            n, gpu_s, still_open = self.usage_of(w.pid)
            # samples 0..last committed: last seconds on each of its 2 GPUs, or one more
            if last < 0:
                self.assertIn(gpu_s, (0, 2), (i, w.pid))
            else:
                self.assertEqual(n, 2, (i, w.pid))
                self.assertIn(gpu_s, (2 * last, 2 * last + 2), (i, w.pid, last))
                self.assertEqual(still_open, 1)
            if i % 100 == 0:
                self.assertEqual(self.integrity(), "ok", i)
            self.assertLess(time.monotonic(), deadline, "the test took too long")
        # a last writer that runs to its end: the restart closes every record left open
        p = subprocess.run([WRITER, "loop", self.db, str(W0 + KILLS * 100000), "3"],
                           capture_output=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.integrity(), "ok")
        c = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        try:
            killed = [pid for pid, last in runs if last >= 0]
            reasons = dict(c.execute("SELECT end_reason, count(*) FROM records"
                                     " WHERE end_s IS NOT NULL GROUP BY end_reason"))
            # every record of a killed run was ended as agent-restart, at its last sample
            self.assertGreaterEqual(reasons.get("agent-restart", 0), 2 * len(killed))
            bad = c.execute("SELECT count(*) FROM records WHERE end_reason = 'agent-restart'"
                            " AND end_s != last_s").fetchone()[0]
            self.assertEqual(bad, 0)
        finally:
            c.close()
        self.assertGreater(len(killed), KILLS // 2, "too few runs got to commit a sample")


    def test_killed_while_creating_leaves_a_readable_ledger_or_none(self):
        """A writer killed while it creates a new ledger (within its first few ms): afterwards
        either no ledger exists, or a read-only reader, as gpuctl report is, opens it and finds
        its tables. 300 tries; before a new ledger was made whole under a name of its own,
        about one in twenty left a hot rollback journal ("attempt to write a readonly
        database") or a file with no tables."""
        rnd = random.Random(2027)
        # how long a writer takes, on this machine now, until its ledger exists: the kills are
        # spread over one and a half times that, so they land before and after it
        def made(w, db):
            t0 = time.monotonic()
            while not os.path.exists(db) and time.monotonic() - t0 < 10:
                time.sleep(0.0005)

        spread = 1.5 * self.writer_time(made)
        seen = set()
        for i in range(300):
            db = os.path.join(self.tmp, "new-%d.db" % i)
            w = subprocess.Popen([WRITER, "loop", db, str(W0)], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE)
            time.sleep(rnd.uniform(0, spread))
            w.send_signal(signal.SIGKILL)
            _, err = w.communicate()
            self.assertEqual(w.returncode, -signal.SIGKILL, err)
            if not os.path.exists(db):
                seen.add("none")
                continue
            c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            try:
                c.execute("SELECT count(*) FROM records").fetchone()
            finally:
                c.close()
            seen.add("ledger")
        # the kills landed both before and after the ledger was whole
        self.assertEqual(seen, {"none", "ledger"})


if __name__ == "__main__":
    unittest.main()
