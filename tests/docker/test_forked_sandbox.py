"""Forked Episode isolation: Episodes run in sandboxes a lane's zygote forks, and an attacker inside one reaches
neither the zygote, nor a sibling, nor the next Episode."""

from __future__ import annotations

import json
import os
import secrets
import signal
import time
from dataclasses import replace

import pytest
from programs import MEMORY_BOMB, STEADY

from epg_sdk.codes import EpisodeStatus, FailureCode
from epg_sdk.runtime.episode_loop import EpisodeLimits
from orchestrator.backends.labels import LabelSet, owner_id, selector
from orchestrator.backends.settings import SandboxLimits, SandboxTuning
from orchestrator.backends.zygote import LaneZygote, lane_spec
from orchestrator.kernel.infrastructure import InfraErrorCode, InfrastructureError
from orchestrator.kernel.program import capture_program

FORKED = SandboxTuning(pool_size=2, isolation="forked", concurrency=1)

# Prints what it found as one FACTS line (the output tail carries it back) and ends the Episode at once.
REPORTING = '''
import json

dumps = json.dumps

def report(facts):
    print("FACTS " + dumps(facts))

class Policy:
    def act(self, observation):
        return 0

def make_policy(context):
    report(facts())
    return Policy()
'''

# Leaves everything it can behind: a file in /tmp and /dev/shm, a daemon, a changed module, an environment variable.
PLANTER = REPORTING + '''
import os, sys, subprocess

def facts():
    open("/tmp/planted", "w").write("left behind")
    open("/dev/shm/planted", "w").write("left behind")
    os.environ["EPG_PLANTED"] = "1"
    json.dumps = lambda *args, **kwargs: "planted"
    sys.modules["numpy"].planted = True
    daemon = subprocess.Popen(["sleep", "4242"], start_new_session=True)
    return {"daemon": daemon.pid}
'''

LOOKER = REPORTING + '''
import os, sys

def facts():
    import numpy
    return {
        "tmp": sorted(os.listdir("/tmp")), "shm": sorted(os.listdir("/dev/shm")),
        "environment": sorted(os.environ), "json_patched": json.dumps(1) == "planted",
        "numpy_planted": hasattr(numpy, "planted"), "hash": hash("same seed?"),
        "numpy_draw": float(numpy.random.random()),
    }
'''

# Tries every way out it knows of.
ATTACKER = REPORTING + r'''
import ctypes, errno, os, signal, socket, stat

libc = ctypes.CDLL(None, use_errno=True)

def call(function, *args):
    result = function(*args)
    return 0 if result == 0 else -ctypes.get_errno() if result == -1 else result

def refused(action):
    try:
        action()
        return "allowed"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))

def facts():
    found = {}
    found["uid"] = os.getuid()
    found["pid"] = os.getpid()
    found["proc"] = os.path.exists("/proc")
    found["sys"] = os.path.exists("/sys")
    found["root"] = sorted(os.listdir("/"))
    found["visible_pids"] = [pid for pid in range(1, 4096) if refused(lambda: os.kill(pid, 0)) == "allowed"]
    found["kill_all"] = refused(lambda: os.kill(-1, signal.SIGKILL))
    found["ptrace_attach_1"] = call(libc.ptrace, 16, 1, None, None)
    found["unshare_user"] = call(libc.unshare, 0x10000000)
    found["unshare_net"] = call(libc.unshare, 0x40000000)
    found["mount_tmpfs"] = call(libc.mount, b"none", b"/tmp", b"tmpfs", 0, None)
    found["chroot"] = refused(lambda: os.chroot("/tmp"))
    found["setns"] = call(libc.setns, 0, 0)
    for name, family in (("inet", socket.AF_INET), ("inet6", socket.AF_INET6), ("netlink", socket.AF_NETLINK),
                         ("packet", socket.AF_PACKET)):
        found["socket_" + name] = refused(lambda: socket.socket(family, socket.SOCK_RAW if name == "packet" else socket.SOCK_STREAM).close())
    found["socket_unix"] = refused(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close())
    found["bpf"] = call(libc.syscall, 321, 0, None, 0)
    found["userfaultfd"] = call(libc.syscall, 323, 0)
    found["io_uring_setup"] = call(libc.syscall, 425, 1, None)
    found["keyctl"] = call(libc.syscall, 250, 0, 0, 0, 0)
    found["process_vm_readv"] = call(libc.syscall, 310, 1, None, 0, None, 0, 0)
    open_fds = {}
    for fd in range(3, 1024):
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            continue
        open_fds[fd] = "socket" if stat.S_ISSOCK(mode) else "fifo" if stat.S_ISFIFO(mode) else oct(mode)
    found["fds"] = open_fds
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    data = (ctypes.c_uint32 * 6)()
    found["capget"] = call(libc.syscall, 125, header, data)
    found["capabilities"] = list(data)
    found["no_new_privs"] = libc.prctl(39, 0, 0, 0, 0)
    found["seccomp_mode"] = libc.prctl(21, 0, 0, 0, 0)
    found["root_writable"] = refused(lambda: open("/planted", "w").close())
    found["program_writable"] = refused(lambda: open("/epg/program/planted", "w").close())
    found["devices"] = sorted(os.listdir("/dev"))
    return found
'''


def _run(sandbox, program_dir, index=0):
    episode = sandbox.plan("train", 0, index + 1)[index]
    return sandbox.run_episode(episode, capture_program(program_dir))


def _facts(outcome):
    assert outcome.status is EpisodeStatus.COMPLETED, outcome
    line = next(line for line in outcome.output_tail.splitlines() if line.startswith("FACTS "))
    return json.loads(line[len("FACTS "):])


def _lane_processes(engine, sandbox) -> list[str]:
    (lane,) = engine.client.containers.list(filters={"label": selector(sandbox=sandbox.labels.sandbox, role="lane")})
    return [" ".join(row[-1:]) for row in lane.top(ps_args="-eo pid,args")["Processes"]]


def test_cartpole_baseline_runs_in_a_forked_sandbox(open_sandbox, write_program, engine):
    with open_sandbox(tuning=FORKED) as sandbox:
        first = _run(sandbox, write_program(STEADY))
        second = _run(sandbox, write_program(STEADY), index=1)
        (lane,) = engine.client.containers.list(filters={"label": selector(sandbox=sandbox.labels.sandbox, role="lane")})
        policies = engine.client.containers.list(filters={"label": selector(sandbox=sandbox.labels.sandbox, role="policy")})
    assert first.status is EpisodeStatus.COMPLETED and first.steps == 500, first
    assert second.status is EpisodeStatus.COMPLETED and second.steps == 500, second
    assert policies == []  # no policy container: the lane's zygote forked both
    host = lane.attrs["HostConfig"]
    assert host["ReadonlyRootfs"] is True and host["CapDrop"] == ["ALL"] and host["NetworkMode"] == "none"
    assert host["SecurityOpt"][0] == "no-new-privileges" and host["SecurityOpt"][1].startswith("seccomp=")
    assert lane.attrs["Config"]["User"] == "10001:10001"


def test_nothing_an_episode_leaves_behind_reaches_the_next(open_sandbox, write_program, engine):
    with open_sandbox(tuning=FORKED) as sandbox:
        planted = _facts(_run(sandbox, write_program(PLANTER)))
        time.sleep(0.5)  # the sandbox's PID 1 has returned; its namespace's processes are being killed
        processes = _lane_processes(engine, sandbox)
        first = _facts(_run(sandbox, write_program(LOOKER)))
        second = _facts(_run(sandbox, write_program(LOOKER), index=1))
    assert planted["daemon"] > 1
    assert not any("sleep 4242" in process for process in processes), processes
    for seen in (first, second):
        assert seen["tmp"] == [] and seen["shm"] == []
        assert "EPG_PLANTED" not in seen["environment"]
        assert seen["json_patched"] is False and seen["numpy_planted"] is False
    # Forked from one zygote: the same str hash seed (ARCHITECTURE.md says what follows), but NumPy's global
    # random state is drawn afresh in each sandbox.
    assert first["hash"] == second["hash"]
    assert first["numpy_draw"] != second["numpy_draw"]


def test_an_attacker_reaches_neither_the_zygote_nor_a_sibling_nor_the_kernel_s_extras(open_sandbox, write_program):
    with open_sandbox(tuning=FORKED) as sandbox:
        assert sandbox.container_pool.wait_until_full(60)  # siblings waiting in the same lane
        found = _facts(_run(sandbox, write_program(ATTACKER)))
        after = _run(sandbox, write_program(STEADY))
        status = sandbox.zygotes[0].status()
    assert found["uid"] == 10001 and found["pid"] == 2  # the sandbox's init is 1
    assert found["proc"] is False and found["sys"] is False
    assert found["root"] == ["bin", "dev", "epg", "etc", "lib", "lib64", "opt", "sbin", "tmp", "usr"]
    assert found["visible_pids"] == [1, 2]  # its init and itself: neither the zygote nor a sibling has a pid here
    assert found["ptrace_attach_1"] == -1  # EPERM
    for call in ("unshare_user", "unshare_net", "mount_tmpfs", "setns", "bpf", "userfaultfd", "io_uring_setup",
                 "keyctl", "process_vm_readv"):
        assert found[call] == -1, (call, found[call])  # -EPERM
    assert found["chroot"] == "EPERM"
    for family in ("inet", "inet6", "netlink", "packet"):
        assert found[f"socket_{family}"] == "EAFNOSUPPORT", (family, found)
    assert found["socket_unix"] == "allowed"
    assert found["fds"] == {"3": "socket"} or list(found["fds"].values()) == ["socket"], found["fds"]
    assert found["capget"] == 0 and found["capabilities"] == [0, 0, 0, 0, 0, 0]
    assert found["no_new_privs"] == 1 and found["seccomp_mode"] == 2
    assert found["root_writable"] == "EROFS" and found["program_writable"] == "EROFS"
    assert found["devices"] == ["null", "random", "shm", "urandom", "zero"]
    # kill(-1, SIGKILL) from the sandbox's PID 1 reached no other process: the siblings and the zygote serve on.
    assert after.status is EpisodeStatus.COMPLETED and after.steps == 500
    assert status["threads"] == 1 and status["program_imported"] is False and status["frozen_objects"] > 10_000


def test_memory_exhaustion_is_out_of_memory_and_the_lane_serves_on(open_sandbox, write_program):
    bomb = write_program(MEMORY_BOMB)
    limits = SandboxLimits(memory_bytes=128 * 1024 * 1024, episode=EpisodeLimits(step_deadline_s=10.0))
    with open_sandbox(limits=limits, tuning=FORKED) as sandbox:
        outcome = _run(sandbox, bomb)
        after = _run(sandbox, write_program(LOOKER.replace("return 0", "return 1 if observation[2] + 0.5 * observation[3] > 0 else 0")))
        status = sandbox.zygotes[0].status()
    assert outcome.status is EpisodeStatus.POLICY_FAILURE
    assert outcome.failure is FailureCode.OUT_OF_MEMORY, outcome.reason
    assert after.status is EpisodeStatus.COMPLETED and after.steps == 500
    assert _facts(after)["tmp"] == []
    assert status["threads"] == 1


def test_a_crash_and_a_timeout_are_classified_as_in_a_container(open_sandbox, write_program):
    crash = write_program('''
        import os
        class Policy:
            def act(self, observation):
                os.write(2, b"about to die\\n")
                os.abort()
        def make_policy(context):
            return Policy()
    ''')
    spin = write_program('''
        class Policy:
            def act(self, observation):
                while True:
                    pass
        def make_policy(context):
            return Policy()
    ''')
    limits = SandboxLimits(episode=EpisodeLimits(step_deadline_s=0.5, episode_deadline_s=60.0))
    with open_sandbox(limits=limits, tuning=FORKED) as sandbox:
        crashed = _run(sandbox, crash)
        timed_out = _run(sandbox, spin)
        after = _run(sandbox, write_program(STEADY))
    assert crashed.failure is FailureCode.CRASHED, crashed
    assert "about to die" in crashed.output_tail
    assert timed_out.failure is FailureCode.TIMEOUT, timed_out
    assert after.status is EpisodeStatus.COMPLETED


def test_forked_isolation_under_gvisor_is_refused_by_name(open_sandbox):
    with pytest.raises(InfrastructureError, match="forked isolation runs its lane containers under runc"):
        with open_sandbox(tuning=replace(FORKED, runtime="runsc")):
            pass


@pytest.mark.parametrize(("profile", "said"), [
    ("", "the kernel refused a forked Episode sandbox"),  # the engine's default profile: no namespaces
    ('{"defaultAction": "SCMP_ACT_NO_SUCH_ACTION"}', "the engine refused the lane container"),
])
def test_a_lane_the_kernel_or_the_engine_refuses_fails_at_once_naming_the_fix(engine, images, scope, tmp_path, profile, said):
    labels = LabelSet(sandbox=secrets.token_hex(6), owner=owner_id(), scope=scope)
    directories = {name: tmp_path / name for name in ("exchange", "programs", "control")}
    for directory in directories.values():
        directory.mkdir()
        directory.chmod(0o777)
    spec = lane_spec(image=images["policy-runtime"], labels=labels.for_role("lane"), name=f"epg-lane-{labels.sandbox}-0",
                     limits=SandboxLimits(), cpu="", tail_bytes=1024, **directories)
    try:
        with pytest.raises(InfrastructureError) as caught:
            LaneZygote.start(engine, replace(spec, seccomp_profile=profile), directories["control"])
    finally:
        engine.reap(selector(sandbox=labels.sandbox))
    assert caught.value.code is InfraErrorCode.CONTAINER_FAILED
    assert said in caught.value.message
    assert "isolation \"container\"" in caught.value.message  # the way out is named
    if not profile:
        assert "clone" in caught.value.evidence and "Operation not permitted" in caught.value.evidence


def test_a_sandbox_that_died_before_its_episode_is_an_infrastructure_error_not_a_policy_failure(open_sandbox, write_program, engine):
    with open_sandbox(tuning=replace(FORKED, pool_size=1)) as sandbox:
        assert sandbox.container_pool.wait_until_full(60)
        (lane,) = engine.client.containers.list(filters={"label": selector(sandbox=sandbox.labels.sandbox, role="lane")})
        rows = lane.top(ps_args="-eo pid,ppid,args")["Processes"]
        docker_init = next(int(pid) for pid, _, args in rows if args.startswith("/sbin/docker-init"))
        zygote = next(int(pid) for pid, ppid, _ in rows if int(ppid) == docker_init)
        inits = [int(pid) for pid, ppid, _ in rows if int(ppid) == zygote]
        assert inits, rows
        for pid in inits:  # from the host, as a kernel fault or an operator might
            os.kill(pid, signal.SIGKILL)
        time.sleep(1)
        with pytest.raises(InfrastructureError, match="ended before its Episode") as caught:
            _run(sandbox, write_program(STEADY))
    assert caught.value.code is InfraErrorCode.CONTAINER_FAILED


def test_a_sandbox_flooding_its_output_descriptors_times_out_and_the_lane_serves_on(open_sandbox, write_program):
    flood = write_program('''
        import os
        class Policy:
            def act(self, observation):
                line = b"x" * 65536
                while True:
                    os.write(1, line)
                    os.write(2, line)
        def make_policy(context):
            return Policy()
    ''')
    limits = SandboxLimits(episode=EpisodeLimits(step_deadline_s=0.5, episode_deadline_s=60.0))
    with open_sandbox(limits=limits, tuning=FORKED) as sandbox:
        began = time.monotonic()
        flooded = _run(sandbox, flood)
        elapsed = time.monotonic() - began
        after = _run(sandbox, write_program(STEADY))
        status = sandbox.zygotes[0].status()
    assert flooded.failure is FailureCode.TIMEOUT, flooded
    assert elapsed < 30
    assert after.status is EpisodeStatus.COMPLETED and after.steps == 500
    assert status["threads"] == 1
