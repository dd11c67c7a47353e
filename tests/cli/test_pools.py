"""The configuration file end to end (docs/config.md): pools for select and run (the default pool,
--pool NAME, restricted pools never given to anyone else), the busy thresholds, the share margin,
lease_dir, `info` and `ps` showing pools, one-line errors with line numbers, and, as root with
two throwaway users, the trust rules of a shared lease directory.

Expected values come from the configuration files written here and the scenario (dgx-a100:
eight GPUs, their UUIDs from the scenario file), never from gpuctl's own output."""
import json
import os
import pwd
import grp
import shutil
import subprocess
import tempfile
import time
import unittest

from cli_facts import Machine
from gpuctl_test import (EXIT_FAILURE, EXIT_NOMATCH, EXIT_OK, EXIT_USAGE, GPUCTL, NVSIM,
                         GpuctlTestCase, run)
from test_leases import TwoUserCase, direct_env

A100 = Machine("dgx-a100")
UUIDS = [g["uuid"] for g in A100.gpus]
GIB = 1 << 30
MIB = 1 << 20

# GPUs 0-3 for the training team, GPU 5 (named by a UUID prefix) set aside for anyone who asks;
# 4, 6 and 7 are the default pool.
HYBRID = """# a hybrid machine
[pool training]
description = the training team
gpus = 0-3
users = %(users)s

[pool spare]
gpus = %(spare)s
"""


def cuda_set(out):
    line = out.strip()
    assert line.startswith("CUDA_VISIBLE_DEVICES="), out
    return {UUIDS.index(u) for u in line.split("=", 1)[1].split(",") if u}


class ConfigCase(GpuctlTestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gpuctl-pools-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        os.chmod(self.tmp, 0o755)
        self.dir = os.path.join(self.tmp, "leases")
        self.env = direct_env(self.dir)
        self.addCleanup(lambda: self.g("release", "--all"))

    def conf(self, text, name="gpuctl.conf"):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o644)
        return path

    def g(self, *args, config=None, env=None):
        e = dict(self.env)
        if config:
            e["GPUCTL_CONFIG"] = config
        if env:
            e.update(env)
        return run([GPUCTL, *args], env=e)


class Pools(ConfigCase):
    def hybrid(self, users="nobody-at-all"):
        return self.conf(HYBRID % {"users": users, "spare": UUIDS[5][:12]})

    def test_default_pool_is_what_no_pool_lists(self):
        c = self.hybrid()
        r = self.g("select", "-n", "3", config=c)
        self.assertEqual(r.rc, EXIT_OK, r)
        self.assertEqual(cuda_set(r.out), {4, 6, 7})
        r = self.g("select", "-n", "4", config=c)
        self.assertOneLineError(r, EXIT_NOMATCH, "outside pool default: 0,1,2,3,5")
        r = self.g("select", "-n", "3", "--pool", "default", config=c)
        self.assertEqual(cuda_set(r.out), {4, 6, 7})
        # run draws from the same pool, and a lease there is a lease like any other
        r = self.g("run", "-n", "3", "--", "sh", "-c", "echo CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES",
                   config=c)
        self.assertEqual(r.rc, EXIT_OK, r)
        self.assertEqual(cuda_set(r.out), {4, 6, 7})

    def test_named_pool(self):
        c = self.hybrid()
        r = self.g("select", "-n", "1", "--pool", "spare", "--hold", "60", config=c)
        self.assertEqual(r.rc, EXIT_OK, r)
        self.assertEqual(cuda_set(r.out), {5})
        # the pool's only GPU is leased: wait at most 1 s, then one line; never another GPU
        r = self.g("run", "-n", "1", "--pool", "spare", "--wait=1", "--", "true", config=c)
        self.assertOneLineError(r, EXIT_NOMATCH, "waited", "leased: 5")
        # more than the pool has: at once, however long --wait says
        r = self.g("run", "-n", "2", "--pool", "spare", "--wait=30", "--", "true", config=c)
        self.assertOneLineError(r, EXIT_NOMATCH, "can never be satisfied", "outside pool spare")
        # a waiter in line for the pool: ps --waiting says which pool
        env = dict(self.env, GPUCTL_CONFIG=c)
        waiter = subprocess.Popen([GPUCTL, "run", "-n", "1", "--pool", "spare", "--wait=30", "--",
                                   "true"], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        self.addCleanup(waiter.kill)
        line = []
        for _ in range(200):
            line = self.g("ps", "--waiting", "--format", "json", config=c).json()["waiting"]
            if line:
                break
            time.sleep(0.02)
        self.assertEqual([(w["pid"], w["pool"]) for w in line], [(waiter.pid, "spare")])
        r = self.g("ps", "--waiting", config=c)
        self.assertIn("1 GPU, pool spare", r.out)
        waiter.kill()
        waiter.wait()
        r = self.g("select", "-n", "1", "--pool", "nope", config=c)
        self.assertOneLineError(r, EXIT_USAGE, "'nope'", "training", "spare", "default")
        # pools are shown: ps (each device's pool) and info (the pools and who may use them)
        r = self.g("ps", "--all", "--format", "json", config=c)
        pools = {d["index"]: d["pool"] for d in r.json()["devices"]}
        self.assertEqual(pools, {0: "training", 1: "training", 2: "training", 3: "training",
                                 4: "default", 5: "spare", 6: "default", 7: "default"})
        r = self.g("ps", config=c)
        self.assertIn("POOL", r.out.splitlines()[0])
        self.assertRegex(r.out, r"\n5\s+GPU-\S+\s+leased\s+OK\s+spare\s")
        r = self.g("info", "--format", "json", config=c)
        doc = r.json()
        self.assertEqual(doc["config"], c)
        self.assertEqual([(p["name"], p["gpus"], p["restricted"]) for p in doc["pools"]],
                         [("training", [0, 1, 2, 3], True), ("spare", [5], False)])
        self.assertEqual([g["pool"] for g in doc["gpus"]],
                         ["training"] * 4 + ["default", "spare", "default", "default"])
        r = self.g("info", config=c)
        self.assertRegex(r.out, r"\ntraining\s+0,1,2,3\s+nobody-at-all\s+-\s+(yes|no)\s+the training team")

    @unittest.skipIf(os.geteuid() == 0, "root may draw from every pool")
    def test_restricted_pool_refuses_others(self):
        c = self.hybrid()
        r = self.g("select", "-n", "1", "--pool", "training", config=c)
        self.assertOneLineError(r, EXIT_FAILURE, "not allowed", "nobody-at-all")
        me = pwd.getpwuid(os.geteuid()).pw_name
        r = self.g("select", "-n", "4", "--pool", "training", config=self.hybrid(me))
        self.assertEqual(cuda_set(r.out), {0, 1, 2, 3})

    def test_no_pools(self):
        r = self.g("select", "-n", "1", "--pool", "spare")
        self.assertOneLineError(r, EXIT_USAGE, "pool 'spare'", "no pools")
        r = self.g("select", "-n", "8", "--pool", "default")
        self.assertEqual(cuda_set(r.out), set(range(8)))

    def test_errors_name_file_and_line(self):
        cases = (
            ("busy_memory = 1GiB\n\n[pool a]\ngpu = 0\n", 4, "unknown key 'gpu'"),
            ("[pool a]\ngpus = 0\n[pool b]\ngpus = 1, 0\n", 4, "'a'"),
            ("[pool a]\ngpus = 0\nusers = x\n[pool z]\ngpus = 9\n", 5, "'9'"),
            ("share_margin = 60%\n", 1, "share_margin"),
            ("[pool default]\ngpus = 1\n", 1, "default"),
        )
        for text, line, needle in cases:
            with self.subTest(text=text):
                c = self.conf(text, "bad.conf")
                for args in (("select", "-n", "1"), ("run", "-n", "1", "--", "true"),
                             ("ps",), ("info",)):
                    r = self.g(*args, config=c)
                    self.assertOneLineError(r, EXIT_USAGE, "%s:%d: " % (c, line), needle)
        r = self.g("select", "-n", "1", config=os.path.join(self.tmp, "missing.conf"))
        self.assertOneLineError(r, EXIT_USAGE, "missing.conf")
        r = self.g("select", "-n", "1", config=self.tmp)  # a directory
        self.assertOneLineError(r, EXIT_FAILURE, self.tmp)
        r = run([GPUCTL, "--config", "", "info"], env=self.env)
        self.assertOneLineError(r, EXIT_USAGE, "--config")

    def test_global_option_names_the_file(self):
        c = self.hybrid()
        r = run([GPUCTL, "--config", c, "select", "-n", "4"], env=self.env)
        self.assertOneLineError(r, EXIT_NOMATCH, "outside pool default")


class LeaseInitRecordsTheConfiguration(ConfigCase):
    def test_named_then_default(self):
        c = self.conf("[pool a]\ngpus = 0\n")
        r = self.g("lease", "init", config=c)
        self.assertEqual(r.rc, EXIT_OK, r)
        self.assertEqual(r.out.splitlines()[1], "configuration: " + os.path.realpath(c))
        with open(os.path.join(self.dir, "config")) as f:
            self.assertEqual(f.read(), os.path.realpath(c) + "\n")
        # back to the default file (whether or not this machine has one): DIR/config goes
        r = self.g("lease", "init", env={"GPUCTL_CONFIG": ""})
        self.assertEqual(r.rc, EXIT_OK, r)
        self.assertEqual(r.out.splitlines()[1],
                         "configuration: /etc/gpuctl/gpuctl.conf (the default)")
        self.assertFalse(os.path.exists(os.path.join(self.dir, "config")))


class Settings(ConfigCase):
    def test_busy_thresholds(self):
        # A foreign process (no lease) of 512 MiB on GPU 2: busy by default, not with
        # busy_memory = 1GiB, busy again when the GPU is more than 10 % utilised with it.
        lenient = self.conf("busy_memory = 1GiB\n", "lenient.conf")
        both = self.conf("busy_memory = 1GiB\nbusy_utilization = 10\n", "both.conf")
        script = ("sleep 60 & P=$!\n"
                  "$NVSIM proc add --pid $P -i 2 --mem 512MiB\n"
                  "$GPUCTL select -n 8 --hold 60 >/dev/null; echo strict=$?\n"
                  "GPUCTL_CONFIG=%s $GPUCTL select -n 8 --hold 60 >/dev/null; echo lenient=$?\n"
                  "GPUCTL_CONFIG=%s $GPUCTL ps --format json > %s/ps.json\n"
                  "$GPUCTL release --all >/dev/null\n"
                  "$NVSIM set -i 2 utilization.gpu=50\n"
                  "GPUCTL_CONFIG=%s $GPUCTL select -n 8 --hold 60 >/dev/null; echo busy=$?\n"
                  "kill $P\n" % (lenient, lenient, self.tmp, both))
        env = dict(self.env, GPUCTL=GPUCTL, NVSIM=NVSIM)
        env.pop("GPUCTL_NVML_LIBRARY")
        env.pop("NVSIM_SCENARIO")
        r = run([NVSIM, "exec", "dgx-a100", "--", "sh", "-c", script], env=env)
        self.assertEqual(r.rc, 0, r)
        self.assertEqual([l for l in r.out.splitlines() if "=" in l],
                         ["strict=3", "lenient=0", "busy=3"], r)
        self.assertIn("in use without a lease: 2", r.err)
        with open(os.path.join(self.tmp, "ps.json")) as f:
            gpu2 = next(d for d in json.load(f)["devices"] if d["index"] == 2)
        self.assertEqual(gpu2["state"], "leased")  # the lenient hold got it
        self.assertEqual(len(gpu2["foreign"]), 1)
        self.assertEqual(gpu2["foreign"][0]["used_memory"], 512 * MIB)

    def test_share_margin(self):
        # 2 GiB kept free: 80 GiB - 2 GiB = 78 GiB may be declared on an A100 80GB
        c = self.conf("share_margin = 2GiB\n")
        r = self.g("select", "-n", "1", "--only", "0", "--share", "--mem", "78GiB", "--hold", "60",
                   config=c)
        self.assertEqual(r.rc, EXIT_OK, r)
        r = self.g("select", "-n", "1", "--only", "0", "--share", "--mem", "1MiB", config=c)
        self.assertOneLineError(r, EXIT_NOMATCH, "no room to share")
        r = self.g("ps", "--format", "json", config=c)
        gpu0 = next(d for d in r.json()["devices"] if d["index"] == 0)
        self.assertEqual((gpu0["shared_declared"], gpu0["shared_room"]), (78 * GIB, 0))
        c0 = self.conf("share_margin = 0%\n", "zero.conf")
        r = self.g("select", "-n", "1", "--only", "0", "--share", "--mem", "2GiB", config=c0)
        self.assertEqual(r.rc, EXIT_OK, r)

    def test_lease_dir_setting(self):
        target = os.path.join(self.tmp, "from-config")
        c = self.conf("lease_dir = %s\n" % target)
        env = {"GPUCTL_LEASE_DIR": ""}
        r = self.g("select", "-n", "1", "--hold", "60", config=c, env=env)
        self.assertEqual(r.rc, EXIT_OK, r)
        self.assertTrue(os.path.isdir(os.path.join(target, "locks")))
        r = self.g("ps", "--format", "json", config=c, env=env)
        self.assertEqual(r.json()["lease_dir"], target)
        self.assertEqual([d["state"] for d in r.json()["devices"]], ["leased"])
        self.g("release", "--all", config=c, env=env)


class TwoUsers(TwoUserCase):
    """A shared (root-owned) lease directory, a root-owned configuration; users A and B."""
    PREFIX = "gpuctlp"

    def setUp(self):
        shutil.rmtree(self.dir, True)
        a, _ = self.users
        # A by name; the group entry names A's primary group, which B is not in
        self.config = self.conf("[pool training]\ngpus = 0-3\nusers = %s\n"
                                "[pool ops]\ngpus = 4\ngroups = %s\n"
                                % (a, grp.getgrgid(self.gid[a]).gr_name))
        self.env = direct_env(self.dir, extra={"GPUCTL_CONFIG": self.config})
        r = run([GPUCTL, "lease", "init"], env=self.env)
        self.assertEqual(r.rc, 0, r)
        self.assertIn("configuration: " + self.config, r.out)
        self.addCleanup(self.release_all)

    def conf(self, text, name="gpuctl.conf"):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o644)
        return path

    def test_restricted_gpus_never_go_to_others(self):
        a, b = self.users
        r = self.as_user(b, "select", "-n", "1", "--pool", "training")
        self.assertOneLineError(r, EXIT_FAILURE, "not allowed", a)
        r = self.as_user(b, "select", "-n", "1", "--pool", "ops")
        self.assertOneLineError(r, EXIT_FAILURE, "not allowed")
        # B gets the default pool only, whatever is free elsewhere
        r = self.as_user(b, "run", "-n", "3", "--", "sh", "-c",
                         "echo CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES")
        self.assertEqual(r.rc, EXIT_OK, r)
        self.assertEqual(cuda_set(r.out), {5, 6, 7})
        r = self.as_user(b, "run", "-n", "4", "--wait=1", "--", "true")
        self.assertOneLineError(r, EXIT_NOMATCH, "can never be satisfied", "outside pool default")
        # A may draw from both (by name, and by primary group)
        r = self.as_user(a, "select", "-n", "4", "--pool", "training", "--hold", "60")
        self.assertEqual(cuda_set(r.out), {0, 1, 2, 3})
        r = self.as_user(a, "select", "-n", "1", "--pool", "ops")
        self.assertEqual(cuda_set(r.out), {4})
        # without naming any configuration, users follow the directory's (not the empty
        # default): B still never gets the training GPUs
        r = self.as_user(b, "ps", "--all", "--format", "json", env={"GPUCTL_CONFIG": ""})
        self.assertEqual(r.rc, EXIT_OK, r)
        self.assertEqual({d["index"]: d["pool"] for d in r.json()["devices"]}[0], "training")
        r = self.as_user(b, "select", "-n", "4", env={"GPUCTL_CONFIG": ""})
        self.assertOneLineError(r, EXIT_NOMATCH, "outside pool default: 0,1,2,3,4")

    def test_a_user_cannot_escape_with_another_configuration(self):
        _, b = self.users
        mine = os.path.join(self.tmp, "mine.conf")
        with open(mine, "w") as f:
            f.write("# no pools\n")
        os.chmod(mine, 0o644)
        r = self.as_user(b, "select", "-n", "8", "--hold", "60", env={"GPUCTL_CONFIG": mine})
        self.assertOneLineError(r, EXIT_USAGE, "follows", self.config)
        # another root-owned file: it does not even parse, and is not the directory's either
        r = self.as_user(b, "select", "-n", "8", "--hold", "60",
                         env={"GPUCTL_CONFIG": "/etc/hostname"})
        self.assertOneLineError(r, EXIT_USAGE, "/etc/hostname")
        # the global option is refused the same way
        r = self.as_user(b, "--config", mine, "run", "-n", "8", "--", "true")
        self.assertOneLineError(r, EXIT_USAGE, "follows")
        # a configuration others may write does not govern a shared directory
        os.chmod(self.config, 0o666)
        self.addCleanup(os.chmod, self.config, 0o644)
        r = self.as_user(b, "select", "-n", "1")
        self.assertOneLineError(r, EXIT_FAILURE, "writable by group or others")


if __name__ == "__main__":
    unittest.main()
