"""gpuctl.lease() and gpuctl.use(): what a lease excludes, how long it lives (release, the with
block, SIGKILL of its holder, fork, exec), waiting in line (deadline, a holder releasing,
Ctrl-C, a signal handler that returns), shared leases, use() before CUDA, and the errors.

Who holds what is read with `gpuctl ps --format json` (the kernel's locks through the
library's gpuctl_lease_list), never from the package's own objects."""
import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import types

import pytest

import gpuctl

from conftest import NVSIM_LOAD, cuda_set, scenario, wait_until

HOLDER = textwrap.dedent("""
    import gpuctl, sys
    held = gpuctl.lease(%s)
    print(held.cuda_visible_devices, flush=True)
    sys.stdin.readline()
""")


def start(m, code):
    p = m.popen_python(textwrap.dedent(code), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    return p


def readline(p):
    line = p.stdout.readline()
    assert line, p.stderr.read()
    return line.strip()


def finish(p):
    """Ends a helper: a line on its stdin lets it clean up and exit; else SIGKILL."""
    if p.poll() is None:
        try:
            p.communicate("\n", timeout=30)
        except (subprocess.TimeoutExpired, BrokenPipeError, ValueError):
            p.kill()
            p.wait(30)


def test_a_lease_excludes_others_until_released(sim):
    m = sim("dgx-a100")
    with gpuctl.lease(2, label="py-test") as held:
        uuids = held.cuda_visible_devices.split(",")
        assert uuids == [d.uuid for d in held.devices] == held.uuids
        assert set(uuids) <= set(m.uuids)
        ps = {d["uuid"]: d for d in m.ps()["devices"]}
        for u in uuids:
            assert ps[u]["state"] == "leased"
            assert ps[u]["owner"]["pid"] == os.getpid()
            assert ps[u]["owner"]["label"] == "py-test"
            assert "python" in ps[u]["owner"]["command"]
        assert held.lease_dir == m.leases
        idx = sorted(m.uuids.index(u) for u in uuids)
        r = m.gpuctl("select", "-n", "8")
        assert r.returncode == 3
        assert r.stderr.strip().endswith("leased: %d,%d" % tuple(idx))
        with pytest.raises(gpuctl.NoDeviceError) as e:
            gpuctl.select(8)
        assert "gpuctl: select: " + str(e.value) == r.stderr.strip()
        assert not set(uuids) & set(cuda_set(m.gpuctl("select", "-n", "6").stdout))
    assert held.released
    assert m.held() == {}
    held.release()  # idempotent


def test_same_choice_as_gpuctl_run(sim):
    m = sim("dgx-a100")
    m.hold("-n", "1", "--only", "0")
    for n in (1, 2, 3):
        r = m.gpuctl("run", "-n", str(n), "--", "sh", "-c", "echo $CUDA_VISIBLE_DEVICES")
        assert r.returncode == 0, r.stderr
        with gpuctl.lease(n) as held:
            assert held.cuda_visible_devices == r.stdout.strip()


def test_apply_sets_the_environment_as_run_does(sim, monkeypatch):
    m = sim("dgx-a100")
    monkeypatch.setenv("NVIDIA_VISIBLE_DEVICES", "all")
    with gpuctl.lease(2, ignore_outer=True) as held:
        held.apply()
        assert os.environ["CUDA_VISIBLE_DEVICES"] == held.cuda_visible_devices
        assert os.environ["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
        assert os.environ["NVIDIA_VISIBLE_DEVICES"] == held.cuda_visible_devices
        # what CUDA makes of it: nvsim-load opens the devices through the simulated driver
        r = subprocess.run([NVSIM_LOAD, "--seconds", "0"], env=dict(os.environ),
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    ran = m.ledger()[-1]
    assert [d["uuid"] for d in ran["devices"]] == held.uuids
    assert ran["cuda_device_order"] == "PCI_BUS_ID"


def test_apply_refuses_more_mig_devices_than_one_cuda_process_uses(sim, monkeypatch):
    # a100-mig runs driver 550: one MIG device per CUDA process (MIG user guide, "CUDA device
    # enumeration"), so two in one process's CUDA_VISIBLE_DEVICES would leave one unused
    sim("a100-mig")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with gpuctl.lease(2, mig="1g.5gb") as held:
        with pytest.raises(gpuctl.RequestError) as e:
            held.apply()
        assert "before R570" in str(e.value)
        assert "CUDA_VISIBLE_DEVICES" not in os.environ
    with gpuctl.lease(1, mig="1g.5gb") as held:
        held.apply()
        assert os.environ["CUDA_VISIBLE_DEVICES"] == held.uuids[0]


def test_the_lease_ends_when_its_holder_is_killed(sim):
    m = sim("dgx-a100")
    p = start(m, HOLDER % "3")
    try:
        uuids = readline(p).split(",")
        assert {u: [p.pid] for u in uuids} == m.held()
        p.send_signal(signal.SIGKILL)
        p.wait(30)
        wait_until(lambda: m.held() == {}, what="the lease to end with its holder")
        assert len(cuda_set(m.gpuctl("select", "-n", "8").stdout)) == 8
    finally:
        finish(p)


FORK = """
    import gpuctl, multiprocessing, os, sys, time
    held = gpuctl.lease(1)
    print(held.cuda_visible_devices, flush=True)
    if sys.argv[-1] == "os.fork":
        pid = os.fork()
        if pid == 0:
            time.sleep(300)
            os._exit(0)
    else:
        child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(300,))
        child.start()
        pid = child.pid
    held.release()
    print(pid, flush=True)
    sys.stdin.readline()
"""


@pytest.mark.parametrize("how", ["os.fork", "multiprocessing fork"])
def test_a_forked_child_keeps_the_lease(sim, how):
    m = sim("dgx-a100")
    p = m.popen_python(textwrap.dedent(FORK).replace("sys.argv[-1]", repr(how)),
                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        uuid = readline(p)
        child = int(readline(p))
        # the parent released; the child shares the lock's open file description: still held
        assert uuid in m.held()
        r = m.gpuctl("select", "-n", "8")
        assert r.returncode == 3 and "leased: %d" % m.uuids.index(uuid) in r.stderr
        os.kill(child, signal.SIGKILL)
        wait_until(lambda: m.held() == {}, what="the lease to end with the forked child")
        assert p.poll() is None  # the parent lives on: its release was real
    finally:
        finish(p)


EXEC = """
    import gpuctl, multiprocessing, os, subprocess, sys, time
    held = gpuctl.lease(2)
    print(held.cuda_visible_devices, flush=True)
    # a child that would inherit every descriptor that is not close-on-exec
    sub = subprocess.Popen(["sleep", "300"], close_fds=False, stdout=subprocess.DEVNULL)
    spawned = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(300,))
    spawned.start()
    held.release()
    print(sub.pid, spawned.pid, flush=True)
    sys.stdin.readline()
    sub.kill()
    spawned.kill()
    sub.wait()
    spawned.join()
"""


def test_exec_children_do_not_inherit_the_lease(sim):
    m = sim("dgx-a100")
    p = start(m, EXEC)
    try:
        readline(p)
        pids = [int(x) for x in readline(p).split()]
        for pid in pids:
            targets = []
            for fd in os.listdir("/proc/%d/fd" % pid):
                try:  # a starting interpreter opens and closes files meanwhile
                    targets.append(os.readlink("/proc/%d/fd/%s" % (pid, fd)))
                except FileNotFoundError:
                    pass
            assert not [t for t in targets if t.startswith(m.leases)], (pid, targets)
        assert m.held() == {}  # released by the parent, while both children run
    finally:
        finish(p)


def test_wait_with_a_deadline(sim):
    m = sim("dgx-a100")
    m.hold("-n", "8")
    with pytest.raises(gpuctl.NoDeviceError) as e:
        gpuctl.lease(1, wait=1)
    assert e.value.errno == errno.ETIMEDOUT
    r = m.gpuctl("run", "-n", "1", "--wait=1", "--", "true")
    assert r.returncode == 3
    assert r.stderr.strip() == "gpuctl: run: " + str(e.value)
    assert str(e.value).startswith("waited 1 s: ")
    # a request no lease could ever satisfy fails at once, however long the wait
    with pytest.raises(gpuctl.NoDeviceError) as e:
        gpuctl.lease(9, wait=3600)
    assert "can never be satisfied" in str(e.value)
    assert m.waiting() == []


def test_held_select_lock_is_lock_busy_error(sim):
    # another process holds select.lock (as anyone who can read it can): the wait for it ends at
    # the request's deadline with its own exception, as `gpuctl run` exits 6 (not 3: no device
    # was found wanting; nothing is leased, no ticket stays)
    m = sim("dgx-a100")
    gpuctl.lease(1).release()  # the lease directory, with its select.lock
    holder = m.popen_python(textwrap.dedent("""
        import fcntl, os, sys
        f = open(os.path.join(os.environ["GPUCTL_LEASE_DIR"], "select.lock"))
        fcntl.flock(f, fcntl.LOCK_EX)
        print("held", flush=True)
        sys.stdin.readline()
    """), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert readline(holder) == "held"
        with pytest.raises(gpuctl.LockBusyError) as e:
            gpuctl.lease(1, wait=1)
        assert isinstance(e.value, gpuctl.Error)
        assert e.value.errno == errno.EAGAIN
        assert "select.lock" in str(e.value) and "pid %d" % holder.pid in str(e.value)
        r = m.gpuctl("run", "-n", "1", "--wait=1", "--", "true")
        assert r.returncode == 6, r
    finally:
        finish(holder)
    assert m.waiting() == []
    assert all(d["state"] == "free" for d in m.ps()["devices"])


WAITER = """
    import gpuctl, signal, sys
    def note(sig, frame):
        print("signal", sig, flush=True)
    signal.signal(signal.SIGUSR1, note)
    try:
        held = gpuctl.lease(1, wait=%s)
    except KeyboardInterrupt:
        print("KeyboardInterrupt", flush=True)
        sys.exit(130)
    print(held.cuda_visible_devices, flush=True)
    sys.stdin.readline()
"""


def in_line(m, pid):
    return [w for w in m.waiting() if w["pid"] == pid]


def test_a_waiter_gets_the_device_a_holder_releases(sim):
    m = sim("dgx-a100")
    m.hold("-n", "7", "--exclude", "5")
    (last,) = m.hold("-n", "1")
    assert last == m.uuids[5]
    p = start(m, WAITER % "60")
    try:
        wait_until(lambda: in_line(m, p.pid), what="the waiter in line")
        # a signal whose handler returns: the wait goes on
        p.send_signal(signal.SIGUSR1)
        assert readline(p) == "signal %d" % signal.SIGUSR1
        wait_until(lambda: in_line(m, p.pid), what="the waiter back in line")
        r = m.gpuctl("release", "-i", "5")
        assert r.returncode == 0, r.stderr
        assert readline(p) == last
        assert m.held()[last] == [p.pid]
    finally:
        finish(p)


def test_waiting_in_another_thread(sim):
    # no signal.set_wakeup_fd outside the main thread: the wait still ends when a holder
    # releases, and other threads run meanwhile (ctypes releases the GIL)
    import threading
    m = sim("dgx-a100")
    (held_uuid,) = m.hold("-n", "1", "--only", "4")
    m.hold("-n", "7", "--exclude", "4")
    got = []
    t = threading.Thread(target=lambda: got.append(gpuctl.lease(1, wait=60)))
    t.start()
    wait_until(lambda: in_line(m, os.getpid()), what="the thread in line")
    assert m.gpuctl("release", "-i", "4").returncode == 0
    t.join(60)
    assert not t.is_alive() and got[0].uuids == [held_uuid]
    assert m.held()[held_uuid] == [os.getpid()]
    got[0].release()


def test_ctrl_c_while_waiting(sim):
    m = sim("dgx-a100")
    m.hold("-n", "8")
    p = start(m, WAITER % "True")
    try:
        wait_until(lambda: in_line(m, p.pid), what="the waiter in line")
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
        assert p.returncode == 130, err
        assert out.strip() == "KeyboardInterrupt"
        assert in_line(m, p.pid) == []
        assert all(p.pid not in pids for pids in m.held().values())
    finally:
        finish(p)


def test_shared_leases(sim):
    m = sim("dgx-a100")
    with gpuctl.lease(1, share_mem="30GiB") as a:
        assert a.share_mem == 30 << 30
        # the next shared request of a size that fits is given the same device, as the
        # command line chooses it
        chosen = gpuctl.select(1, share_mem="30GiB")
        assert [d.uuid for d in chosen] == cuda_set(
            m.gpuctl("select", "-n", "1", "--share", "--mem", "30GiB").stdout) == a.uuids
        with gpuctl.lease(1, share_mem=30 << 30) as b:
            assert b.uuids == a.uuids
            d = {x["uuid"]: x for x in m.ps()["devices"]}[a.uuids[0]]
            assert d["state"] == "shared" and d["shared_declared"] == 60 << 30
            # an exclusive request never gets it; a third share does not fit in 80 GiB less 5 %
            assert a.uuids[0] not in [x.uuid for x in gpuctl.select(7)]
            with gpuctl.lease(1, share_mem="30GiB") as c:
                assert c.uuids != a.uuids
    assert m.held() == {}


USE = """
    import gpuctl, os, subprocess, sys
    held = gpuctl.use(2, label="use-test")
    print(os.environ["CUDA_VISIBLE_DEVICES"], os.environ["CUDA_DEVICE_ORDER"], flush=True)
    subprocess.run([%r, "--seconds", "0"], check=True, stdout=subprocess.DEVNULL)
    print("torch" in sys.modules, flush=True)
"""


def test_use_leases_applies_and_releases_at_exit(sim):
    m = sim("dgx-a100")
    r = m.python(textwrap.dedent(USE % NVSIM_LOAD))
    assert r.returncode == 0, r.stderr
    visible, order, imported = r.stdout.split()
    assert order == "PCI_BUS_ID" and imported == "False"
    ran = m.ledger()[-1]
    assert [d["uuid"] for d in ran["devices"]] == visible.split(",")
    assert set(visible.split(",")) <= set(m.uuids)
    assert m.held() == {}


def test_use_refuses_after_cuda_initialised(sim, monkeypatch):
    m = sim("dgx-a100")
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(is_initialized=lambda: True)
    monkeypatch.setitem(sys.modules, "torch", torch)
    with pytest.raises(RuntimeError) as e:
        gpuctl.use(1)
    assert "torch.cuda.is_initialized()" in str(e.value)
    assert "before" in str(e.value)
    assert m.held() == {}
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    torch.cuda = types.SimpleNamespace(is_initialized=lambda: False)
    held = gpuctl.use(1)
    try:
        assert os.environ["CUDA_VISIBLE_DEVICES"] == held.cuda_visible_devices
        assert list(m.held()) == held.uuids
    finally:
        held.release()
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)


def test_bad_lease_arguments(sim):
    m = sim("dgx-a100")
    for kw, exc in ((dict(wait="soon"), TypeError), (dict(wait=-1), ValueError),
                    (dict(wait=float("nan")), ValueError), (dict(label=3), TypeError),
                    (dict(probe="yes"), TypeError), (dict(probe=True, probe_timeout=0),
                                                    ValueError),
                    (dict(share_mem="0"), ValueError), (dict(colour="red"), ValueError),
                    (dict(max_util=101), ValueError)):
        with pytest.raises(exc):
            gpuctl.lease(1, **kw)
    with pytest.raises(ValueError):
        gpuctl.select(1, wait=1)  # only a lease waits: an unknown keyword of select
    assert m.held() == {}
    assert not os.path.exists(m.leases) or m.held() == {}


def test_unsafe_lease_directory_is_an_error(sim, tmp_path, monkeypatch):
    m = sim("dgx-a100")
    os.makedirs(m.leases + "-real", mode=0o700)
    os.symlink(m.leases + "-real", m.leases)
    with pytest.raises(gpuctl.Error) as e:
        gpuctl.lease(1)
    assert e.value.errno == errno.EPERM
    assert not isinstance(e.value, (gpuctl.NoDeviceError, ValueError))
    r = m.gpuctl("run", "-n", "1", "--", "true")
    assert r.returncode == 1 and r.stderr.strip() == "gpuctl: run: " + str(e.value)
    assert json.loads(json.dumps(scenario("dgx-a100")[0]))["uuid"] == m.uuids[0]
