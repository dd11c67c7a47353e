"""gpuctl select: every output form for a fixed choice, --ids index, the filters (each removing
what it should, exit 3 naming it), usage errors, the outer allocation (CUDA_VISIBLE_DEVICES with
and without CUDA_DEVICE_ORDER, UUIDs, NVIDIA_VISIBLE_DEVICES, SLURM_JOB_GPUS), -n 0 and
--explain. Expected UUIDs and NUMA nodes come from the scenario files (cli_facts); the choice is
forced with --only where the expectation must not depend on the engine's tie-breaks."""
import copy
import json
import os
import tempfile
import unittest

from cli_facts import Machine
from gpuctl_test import (EXIT_NODRIVER, EXIT_NOMATCH, EXIT_USAGE, GpuctlTestCase, gpuctl, sim,
                         sim_sh)

A100 = Machine("dgx-a100")
WS = Machine("workstation-mixed")


def uuids(m, *idx):
    return [m.gpus[i]["uuid"] for i in idx]


def cuda_uuids(out):
    """The UUID list of a `--format cuda` line."""
    line = out.strip()
    assert line.startswith("CUDA_VISIBLE_DEVICES="), out
    v = line.split("=", 1)[1]
    return v.split(",") if v else []


class Formats(GpuctlTestCase):
    """--only 2,3 -n 2 leaves the engine one choice: GPUs 2 and 3 (in index order)."""

    def sel(self, *args):
        r = sim("dgx-a100", "select", "-n", "2", "--only", "2,3", *args)
        self.assertOk(r)
        return r.out

    def test_cuda_default(self):
        u = ",".join(uuids(A100, 2, 3))
        self.assertEqual(self.sel(), "CUDA_VISIBLE_DEVICES=%s\n" % u)
        self.assertEqual(self.sel("--format", "cuda"), "CUDA_VISIBLE_DEVICES=%s\n" % u)

    def test_env(self):
        u = ",".join(uuids(A100, 2, 3))
        self.assertEqual(self.sel("--format", "env"),
                         "export CUDA_VISIBLE_DEVICES=%s\nexport CUDA_DEVICE_ORDER=PCI_BUS_ID\n" % u)

    def test_docker_quotes_the_list(self):
        # docker/cli opts/gpus.go: unquoted, "device=a,b" splits into a device and a count.
        u = ",".join(uuids(A100, 2, 3))
        self.assertEqual(self.sel("--format", "docker"), "--gpus '\"device=%s\"'\n" % u)

    def test_nvidia(self):
        u = ",".join(uuids(A100, 2, 3))
        self.assertEqual(self.sel("--format", "nvidia"), "NVIDIA_VISIBLE_DEVICES=%s\n" % u)

    def test_cdi(self):
        self.assertEqual(self.sel("--format", "cdi"),
                         "".join("nvidia.com/gpu=%s\n" % u for u in uuids(A100, 2, 3)))

    def test_k8s(self):
        out = self.sel("--format", "k8s")
        self.assertIn("nvidia.com/gpu: 2", out)
        self.assertIn(",".join(uuids(A100, 2, 3)), out)

    def test_json(self):
        doc = json.loads(self.sel("--format", "json"))
        devs = doc["devices"]
        self.assertEqual([d["index"] for d in devs], [2, 3])
        self.assertEqual([d["uuid"] for d in devs], uuids(A100, 2, 3))
        self.assertEqual([d["pci_bus_id"] for d in devs],
                         [A100.gpus[i]["pci_bus_id"] for i in (2, 3)])

    def test_ids_index_carries_pci_bus_order(self):
        out = self.sel("--ids", "index")
        words = sorted(out.split())
        self.assertEqual(words, ["CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=2,3"], out)
        self.assertEqual(self.sel("--ids", "index", "--format", "nvidia"),
                         "NVIDIA_VISIBLE_DEVICES=2,3\n")

    def test_n0_is_the_empty_set(self):
        r = sim("dgx-a100", "select", "-n", "0")
        self.assertOk(r)
        self.assertEqual(r.out, "CUDA_VISIBLE_DEVICES=\n")

    def test_n_too_large_is_exit_3(self):
        r = sim("dgx-a100", "select", "-n", str(len(A100) + 1))
        self.assertOneLineError(r, EXIT_NOMATCH, "select: need %d GPUs, %d qualify"
                                % (len(A100) + 1, len(A100)))
        self.assertEqual(r.out, "")


class Filters(GpuctlTestCase):
    def chosen(self, script):
        r = sim_sh("dgx-a100", script)
        return r, r.out

    def test_max_util(self):
        r = sim_sh("dgx-a100", "$NVSIM set -i 0 utilization.gpu=90\n"
                   "$GPUCTL select -n 7 --max-util 50\n")
        self.assertOk(r)
        self.assertEqual(sorted(cuda_uuids(r.out)), sorted(uuids(A100, *range(1, 8))))
        r = sim_sh("dgx-a100", "$NVSIM set -i 0 utilization.gpu=90\n"
                   "$GPUCTL select -n 8 --max-util 50%\n")
        self.assertOneLineError(r, EXIT_NOMATCH, "need 8 GPUs, 7 qualify", "--max-util 50: 0")

    def test_min_free_mem(self):
        r = sim_sh("dgx-a100", "$NVSIM set -i 1,4 memory.used=75GiB\n"
                   "$GPUCTL select -n 6 --min-free-mem 10GiB\n")
        self.assertOk(r)
        self.assertEqual(sorted(cuda_uuids(r.out)), sorted(uuids(A100, 0, 2, 3, 5, 6, 7)))
        r = sim_sh("dgx-a100", "$NVSIM set -i 1,4 memory.used=75GiB\n"
                   "$GPUCTL select -n 7 --min-free-mem 10G\n")
        self.assertOneLineError(r, EXIT_NOMATCH, "need 7 GPUs, 6 qualify", "--min-free-mem", "1,4")
        # 5 GiB free on 1 and 4 (80 - 75): 4.5GiB passes, 5.5GiB does not.
        r = sim_sh("dgx-a100", "$NVSIM set -i 1,4 memory.used=75GiB\n"
                   "$GPUCTL select -n 8 --min-free-mem 4.5GiB\n")
        self.assertOk(r)

    def test_no_procs(self):
        r = sim_sh("dgx-a100", "sleep 60 & pid=$!\n$NVSIM proc add --pid $pid -i 6 --mem 1GiB\n"
                   "$GPUCTL select -n 7 --no-procs; rc=$?\n"
                   "$GPUCTL select -n 8 --no-procs || rc2=$?\nkill $pid\necho rc2=$rc2\n")
        lines = r.out.splitlines()
        self.assertEqual(sorted(cuda_uuids(lines[0])), sorted(uuids(A100, 0, 1, 2, 3, 4, 5, 7)), r)
        self.assertEqual(lines[-1], "rc2=3", r)
        self.assertIn("--no-procs: 6", r.err)

    def test_numa(self):
        nodes = {g["numa_node"] for g in A100.gpus}
        for node in sorted(nodes):
            want = [i for i, g in enumerate(A100.gpus) if g["numa_node"] == node]
            r = sim("dgx-a100", "select", "-n", str(len(want)), "--numa", str(node))
            self.assertOk(r)
            self.assertEqual(sorted(cuda_uuids(r.out)), sorted(uuids(A100, *want)))
            r = sim("dgx-a100", "select", "-n", str(len(want) + 1), "--numa", str(node))
            self.assertOneLineError(r, EXIT_NOMATCH, "--numa")

    def test_only_and_exclude(self):
        r = sim("dgx-a100", "select", "-n", "7", "--exclude", A100.gpus[5]["uuid"][:12])
        self.assertOk(r)
        self.assertNotIn(A100.gpus[5]["uuid"], r.out)
        r = sim("dgx-a100", "select", "-n", "1", "--only", A100.gpus[6]["pci_bus_id"])
        self.assertOk(r)
        self.assertEqual(cuda_uuids(r.out), uuids(A100, 6))
        r = sim("dgx-a100", "select", "-n", "2", "--only", "6")
        self.assertOneLineError(r, EXIT_NOMATCH, "need 2 GPUs, 1 qualifies", "--only")

    def test_unhealthy_gpus_are_skipped_unless_allowed(self):
        script = ("$NVSIM set -i 2 ecc.volatile.uncorrected=3\n$NVSIM set -i 5 remap.failure=1\n"
                  "$GPUCTL select -n 6\n$GPUCTL select -n 8 --allow-unhealthy\n"
                  "$GPUCTL select -n 7 || echo rc=$?\n")
        r = sim_sh("dgx-a100", script)
        lines = r.out.splitlines()
        self.assertEqual(sorted(cuda_uuids(lines[0])), sorted(uuids(A100, 0, 1, 3, 4, 6, 7)), r)
        self.assertEqual(sorted(cuda_uuids(lines[1])), sorted(uuids(A100, *range(8))), r)
        self.assertEqual(lines[2], "rc=3", r)
        self.assertIn("uncorrectable ECC errors: 2", r.err)
        self.assertIn("row-remap failure: 5", r.err)

    def test_lost_gpu_is_skipped(self):
        r = sim_sh("dgx-a100", "$NVSIM set -i 3 lost=1\n$GPUCTL select -n 7\n"
                   "$GPUCTL select -n 8 || echo rc=$?\n")
        lines = r.out.splitlines()
        self.assertEqual(sorted(cuda_uuids(lines[0])), sorted(uuids(A100, 0, 1, 2, 4, 5, 6, 7)), r)
        self.assertEqual(lines[1], "rc=3", r)
        self.assertIn("lost or unidentified: 3", r.err)

    def test_mig_profile(self):
        m = Machine("a100-mig")
        inst = m.mig(0)["instances"]
        profile = inst[0]["profile"]
        want = {i["uuid"] for g in range(len(m)) for i in (m.mig(g) or {}).get("instances", [])
                if i["profile"] == profile}
        r = sim("a100-mig", "select", "-n", "1", "--mig", profile)
        self.assertOk(r)
        got = cuda_uuids(r.out)
        self.assertEqual(len(got), 1)
        self.assertIn(got[0], want)
        self.assertTrue(got[0].startswith("MIG-"))
        r = sim("a100-mig", "select", "-n", str(len(want) + 1), "--mig", profile)
        self.assertOneLineError(r, EXIT_NOMATCH, "need %d MIG devices" % (len(want) + 1))


class MigProfiles(GpuctlTestCase):
    """The MIG user guide's profile names (supported profiles: 1g.5gb+me on A100, 1g.24gb-me,
    1g.24gb+me.all, 2g.48gb+me.all, 1g.24gb+gfx on RTX PRO Blackwell) are requests like any
    other, and --format k8s names a profile as NVIDIA's device plugin does ('+' written '.')."""

    def with_me(self):
        # a100-mig with GPU 1's 1g.5gb instance made 1g.5gb+me (the A100-SXM4-40GB profile with
        # media extensions, one per GPU: MIG user guide, supported profiles)
        d = copy.deepcopy(Machine("a100-mig").doc)
        inst = [i for i in d["gpus"][1]["mig"]["instances"] if i["profile"] == "1g.5gb"][0]
        inst["profile"] = "1g.5gb+me"
        t = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        self.addCleanup(os.unlink, t.name)
        json.dump(d, t)
        t.close()
        return t.name, inst["uuid"]

    def test_official_names_are_profiles(self):
        for p in ("1g.24gb-me", "1g.24gb+me.all", "2g.48gb+me.all", "1g.24gb+gfx",
                  "1c.3g.20gb", "1g.10gb+me"):
            with self.subTest(profile=p):
                r = sim("a100-mig", "select", "-n", "1", "--mig", p)
                # a well-formed profile this machine does not have: nothing qualifies
                self.assertOneLineError(r, EXIT_NOMATCH, "")
                self.assertNotIn("not a MIG profile", r.err)

    def test_errors_list_the_profiles(self):
        """A --mig request that finds nothing names the profiles the machine has, with their
        counts (issue 25, item 9): the instances of sim/scenarios/a100-mig.json."""
        counts = {}
        for g in Machine("a100-mig").doc["gpus"]:
            for inst in g.get("mig", {}).get("instances", []):
                counts[inst["profile"]] = counts.get(inst["profile"], 0) + 1
        have = ", ".join("%s (%d)" % kv for kv in counts.items())
        self.assertEqual(have, "1g.5gb (8), 3g.20gb (1), 2g.10gb (1)")
        for cmd in ("select", "run"):
            tail = ["--", "true"] if cmd == "run" else []
            with self.subTest(cmd=cmd, what="unknown"):
                r = sim("a100-mig", cmd, "-n", "1", "--mig", "3g.40gb", *tail)
                self.assertOneLineError(r, EXIT_NOMATCH, "--mig '3g.40gb': no MIG device of "
                                        "that profile on this machine (its MIG profiles: %s)"
                                        % have)
            with self.subTest(cmd=cmd, what="too few"):
                r = sim("a100-mig", cmd, "-n", "2", "--mig", "3g.20gb", *tail)
                self.assertOneLineError(r, EXIT_NOMATCH, "need 2 MIG devices, 1 qualifies; MIG "
                                        "profiles on this machine: %s" % have)
        r = sim("dgx-a100", "select", "-n", "1", "--mig", "1g.10gb")
        self.assertOneLineError(r, EXIT_NOMATCH, "(its MIG profiles: none)")

    def test_malformed_names(self):
        for p, why in (("1g.5gb+me+gfx", "attribute"), ("1g.5gb+me-gfx", "attribute"),
                       ("1g.5gb+", "empty attribute"), ("1g.5gb+me,me", "twice"),
                       ("5gb", "expected"), ("1g.5gb+1me", "start with a letter")):
            with self.subTest(profile=p):
                r = sim("a100-mig", "select", "-n", "1", "--mig", p)
                self.assertOneLineError(r, EXIT_USAGE, "--mig '%s': not a MIG profile" % p)
                self.assertIn(why, r.err)

    def test_me_profile_selected_and_named_for_kubernetes(self):
        path, uuid = self.with_me()
        r = sim(path, "select", "-n", "1", "--mig", "1g.5gb+me")
        self.assertOk(r)
        self.assertEqual(r.out.strip(), "CUDA_VISIBLE_DEVICES=" + uuid)
        r = sim(path, "select", "-n", "1", "--mig", "1G.5GB+ME")  # any case
        self.assertEqual(r.out.strip(), "CUDA_VISIBLE_DEVICES=" + uuid)
        # 1g.5gb is another profile: the +me instance is not among them
        r = sim(path, "select", "-n", "1", "--mig", "1g.5gb", "--only", "1")
        self.assertOneLineError(r, EXIT_NOMATCH, "")
        r = sim(path, "select", "-n", "1", "--mig", "1g.5gb+me", "--format", "k8s")
        self.assertOk(r)
        self.assertIn("    nvidia.com/mig-1g.5gb.me: 1\n", r.out)
        self.assertNotIn("+", r.out.split("env:")[0])


class Usage(GpuctlTestCase):
    def test_help_lists_every_option_and_exit_codes(self):
        r = gpuctl("select", "--help")
        self.assertOk(r)
        for opt in ("-n, --count", "--min-free-mem", "--max-util", "--no-procs", "--only",
                    "--exclude", "--numa", "--mig", "--whole", "--allow-unhealthy",
                    "--ignore-outer", "--format", "--ids", "--explain", "--help"):
            self.assertIn(opt, r.out)
        for code in ("0  success", "2  usage", "3  no GPU satisfies", "4  no NVIDIA driver"):
            self.assertIn(code, r.out)

    def test_usage_errors_need_no_driver(self):
        env = {"GPUCTL_NVML_LIBRARY": "/nonexistent"}
        cases = [
            (["select"], "-n"),
            (["select", "-n", "x"], "'x'"),
            (["select", "-n", "-1"], "'-1'"),
            (["select", "-n", "1", "--min-free-mem", "10"], "'10'"),
            (["select", "-n", "1", "--min-free-mem", "10Gib"], "'10Gib'"),
            (["select", "-n", "1", "--min-free-mem", "ten"], "'ten'"),
            (["select", "-n", "1", "--min-free-mem", "-1GiB"], "'-1GiB'"),
            (["select", "-n", "1", "--min-free-mem", "1.GiB"], "'1.GiB'"),
            (["select", "-n", "1", "--min-free-mem", "99999999999TiB"], "'99999999999TiB'"),
            (["select", "-n", "1", "--max-util", "101"], "'101'"),
            (["select", "-n", "1", "--numa", "a"], "'a'"),
            (["select", "-n", "1", "--mig", "1g.5gb", "--whole"], "--whole"),
            (["select", "-n", "1", "--only", ""], "--only"),
            (["select", "-n", "1", "--format", "yaml"], "'yaml'"),
            (["select", "-n", "1", "--ids", "serial"], "'serial'"),
            # CUDA names MIG devices only by UUID (CUDA_VISIBLE_DEVICES in the CUDA docs)
            (["select", "-n", "1", "--mig", "1g.5gb", "--ids", "index"], "--ids index"),
            (["select", "-n", "1", "--mig", "1g.5gb", "--ids", "index", "--format", "env"],
             "--ids index"),
            (["select", "-n", "1", "--bogus"], "'--bogus'"),
            (["select", "-n", "1", "extra"], "'extra'"),
        ]
        for argv, needle in cases:
            with self.subTest(argv=argv):
                self.assertOneLineError(gpuctl(*argv, env=env), EXIT_USAGE, "select:", needle)

    def test_unknown_ids_are_usage_errors(self):
        r = sim("dgx-a100", "select", "-n", "1", "--only", "99")
        self.assertOneLineError(r, EXIT_USAGE, "'99'")
        r = sim("dgx-a100", "select", "-n", "1", "--exclude", "GPU-zzzz")
        self.assertOneLineError(r, EXIT_USAGE, "GPU-zzzz")

    def test_no_driver(self):
        r = gpuctl("select", "-n", "1", env={"GPUCTL_NVML_LIBRARY": "/nonexistent"})
        self.assertOneLineError(r, EXIT_NODRIVER)


class OuterAllocation(GpuctlTestCase):
    def test_cuda_indices_follow_cuda_device_order(self):
        # workstation-mixed: NVML 0 is the P1000, 1 the A6000; CUDA's default FASTEST_FIRST
        # order makes the A6000 CUDA device 0 (scenario description).
        r = sim("workstation-mixed", "select", "-n", "1", env={"CUDA_VISIBLE_DEVICES": "0"})
        self.assertOk(r)
        self.assertEqual(cuda_uuids(r.out), uuids(WS, 1))
        r = sim("workstation-mixed", "select", "-n", "1",
                env={"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
        self.assertOk(r)
        self.assertEqual(cuda_uuids(r.out), uuids(WS, 0))

    def test_cuda_uuids(self):
        env = {"CUDA_VISIBLE_DEVICES": ",".join(uuids(A100, 5, 6))}
        r = sim("dgx-a100", "select", "-n", "2", env=env)
        self.assertOk(r)
        self.assertEqual(sorted(cuda_uuids(r.out)), sorted(uuids(A100, 5, 6)))
        r = sim("dgx-a100", "select", "-n", "3", env=env)
        self.assertOneLineError(r, EXIT_NOMATCH, "need 3 GPUs, 2 qualify", "outside the allocation")
        r = sim("dgx-a100", "select", "-n", "3", "--ignore-outer", env=env)
        self.assertOk(r)

    def test_cuda_empty_allows_nothing(self):
        r = sim("dgx-a100", "select", "-n", "1", env={"CUDA_VISIBLE_DEVICES": ""})
        self.assertOneLineError(r, EXIT_NOMATCH, "need 1 GPU")

    def test_nvidia_visible_devices(self):
        r = sim("dgx-a100", "select", "-n", "2", env={"NVIDIA_VISIBLE_DEVICES": "2,3"})
        self.assertOk(r)
        self.assertEqual(sorted(cuda_uuids(r.out)), sorted(uuids(A100, 2, 3)))

    def test_slurm_job_gpus(self):
        r = sim("dgx-a100", "select", "-n", "2", env={"SLURM_JOB_GPUS": "4,5"})
        self.assertOk(r)
        self.assertEqual(sorted(cuda_uuids(r.out)), sorted(uuids(A100, 4, 5)))

    def test_verbose_names_the_variable(self):
        r = sim("dgx-a100", "-v", "select", "-n", "1", env={"SLURM_JOB_GPUS": "4,5"})
        self.assertOk(r)
        self.assertIn("SLURM_JOB_GPUS", r.err)

    def test_unreadable_outer_value_is_usage_error(self):
        r = sim("dgx-a100", "select", "-n", "1", env={"NVIDIA_VISIBLE_DEVICES": "GPU-nope"})
        self.assertOneLineError(r, EXIT_USAGE, "NVIDIA_VISIBLE_DEVICES")


class Refusals(GpuctlTestCase):
    """Issue 25, item 3: every refusal names what the user gave, as they spelled it (the
    library names the request's fields; select and run respell them as their options:
    docs/selection.md, "Labels name the request"), and the way out. dgx-a100: GPUs 0,1 on NUMA
    node 3, 80 GiB each (sim/scenarios/dgx-a100.json)."""

    def test_stale_cuda_visible_devices_is_named_with_the_way_out(self):
        env = {"CUDA_VISIBLE_DEVICES": "6", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
        want = ("need 2 GPUs, 1 qualifies: outside the allocation of CUDA_VISIBLE_DEVICES: "
                "0,1,2,3,4,5,7 (--ignore-outer chooses among all GPUs)")
        r = sim("dgx-a100", "select", "-n", "2", env=env)
        self.assertOneLineError(r, EXIT_NOMATCH, "gpuctl: select: " + want)
        r = sim("dgx-a100", "run", "-n", "2", "--", "true", env=env)
        self.assertOneLineError(r, EXIT_NOMATCH, "gpuctl: run: " + want)
        self.assertOk(sim("dgx-a100", "select", "-n", "2", "--ignore-outer", env=env))

    def test_unreadable_outer_allocation_is_named_with_the_way_out(self):
        r = sim("dgx-a100", "select", "-n", "1", env={"NVIDIA_VISIBLE_DEVICES": "GPU-nope"})
        self.assertOneLineError(r, EXIT_USAGE, "gpuctl: select: outer allocation: "
                                "NVIDIA_VISIBLE_DEVICES: 'GPU-nope'",
                                "(--ignore-outer chooses among all GPUs)")

    def test_share_mem_is_named_as_given(self):
        # --share --mem is not --min-free-mem: the refusal says what was typed
        r = sim_sh("dgx-a100", "$NVSIM set -i 0,1,2,3,4,5,6 memory.used=78GiB\n"
                   "$GPUCTL select -n 2 --share --mem 4GiB\n")
        self.assertOneLineError(r, EXIT_NOMATCH, "need 2 GPUs, 1 qualifies: --mem 4 GiB not "
                                "free: 0,1,2,3,4,5,6")
        self.assertNotIn("--min-free-mem", r.err)

    def test_filters_are_named_as_options(self):
        r = sim("dgx-a100", "select", "-n", "2", "--numa", "3", "--only", "2,3")
        self.assertOneLineError(r, EXIT_NOMATCH, "need 2 GPUs, 0 qualify: --only: 0,1,4,5,6,7; "
                                "--numa 3: 2,3")
        r = sim("dgx-a100", "select", "-n", "1", "--only", "9")
        self.assertOneLineError(r, EXIT_USAGE, "gpuctl: select: --only: '9': ")
        r = sim("dgx-a100", "run", "-n", "1", "--mig", "1g.99gb", "--", "true")
        self.assertOneLineError(r, EXIT_NOMATCH, "gpuctl: run: --mig '1g.99gb': no MIG device")


class Explain(GpuctlTestCase):
    def test_both_sets_and_scores_on_stderr(self):
        r = sim("dgx1-v100", "select", "-n", "2", "--explain")
        self.assertOk(r)
        chosen = cuda_uuids(r.out)
        self.assertEqual(len(chosen), 2)
        err = r.err
        self.assertIn("chosen: ", err)
        self.assertIn("runner-up: ", err)
        self.assertEqual(err.count("ring bandwidth"), 2, r)
        self.assertIn("GB/s", err)
        self.assertIn("decided by: ", err)
        chosen_line = next(l for l in err.splitlines() if l.startswith("chosen: "))
        runner_line = next(l for l in err.splitlines() if l.startswith("runner-up: "))
        for u in chosen:
            self.assertIn(u[:12], chosen_line)
        self.assertNotEqual(chosen_line[len("chosen: "):], runner_line[len("runner-up: "):])

    def test_whole_numa_node_kept(self):
        # docs/selection.md, criterion 4 (issue 29 item 7): pcie-8gpu's NUMA node 0 holds GPUs
        # 0-3 and node 1 GPUs 4-7 (the scenario file), same-switch pairs {0,1} {2,3} {4,5};
        # with 6 and 7 excluded, {4,5} and {0,1} have the same ring and each leaves two
        # same-switch pairs, but only {4,5} leaves node 0 whole (the runner-up is {0,1})
        mach = Machine("pcie-8gpu")
        self.assertEqual([mach.gpus[i]["numa_node"] for i in range(8)], [0] * 4 + [1] * 4)
        r = sim("pcie-8gpu", "select", "-n", "2", "--exclude", "6,7", "--explain")
        self.assertOk(r)
        self.assertEqual(cuda_uuids(r.out), [mach.gpus[4]["uuid"], mach.gpus[5]["uuid"]])
        self.assertIn("decided by: whole NUMA nodes taken (0 vs 1, fewer is better", r.err)

    def test_no_runner_up(self):
        r = sim("dgx-a100", "select", "-n", "8", "--explain")
        self.assertOk(r)
        self.assertIn("runner-up: none", r.err)


if __name__ == "__main__":
    unittest.main()
