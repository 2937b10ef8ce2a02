"""What a policy container can and cannot do, checked from inside a real container, under runc and under gVisor."""

from __future__ import annotations

import json
import os
import socket
import threading

import pytest

from orchestrator.backends.container_spec import RUNTIMES, ContainerSpec
from orchestrator.backends.labels import LabelSet, owner_id, selector
from orchestrator.kernel.program import capture_program

PROBE = '''
import ctypes, json, os, socket, sys

def facts(host_port, host_path):
    result = {}
    result["uid"] = os.getuid()
    status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\\t" in line)
    # Asked of the kernel (prctl PR_GET_NO_NEW_PRIVS): gVisor's /proc/self/status has no NoNewPrivs line.
    result["no_new_privs"] = ctypes.CDLL(None, use_errno=True).prctl(39, 0, 0, 0, 0)
    result["cap_eff"] = status.get("CapEff", "").strip()
    result["kernel"] = os.uname().release
    try:
        open("/written-by-policy", "w").write("x")
        result["root_writable"] = True
    except OSError as exc:
        result["root_writable"] = False
    try:
        open(os.path.join(os.getcwd(), "new-file"), "w").write("x")
        result["program_writable"] = True
    except OSError:
        result["program_writable"] = False
    try:
        import gymnasium  # noqa: F401
        result["gymnasium"] = True
    except ImportError:
        result["gymnasium"] = False
    result["interfaces"] = sorted(os.listdir("/sys/class/net"))
    result["netns"] = os.readlink("/proc/self/ns/net")
    routes = open("/proc/net/route").read().splitlines()[1:]
    result["routes"] = [line.split()[0] for line in routes if line.strip()]
    try:
        with socket.create_connection(("127.0.0.1", host_port), timeout=1):
            result["host_loopback_reached"] = True
    except OSError:
        result["host_loopback_reached"] = False
    try:
        socket.getaddrinfo("localhost.localdomain.invalid", 80)
        result["resolver"] = True
    except OSError:
        result["resolver"] = False
    result["host_env"] = {k: v for k, v in os.environ.items() if k.startswith("EPG_TEST_")}
    result["host_path_visible"] = os.path.exists(host_path)
    result["docker_socket"] = os.path.exists("/var/run/docker.sock") or os.path.exists("/run/docker.sock")
    result["tmp_writable"] = bool(open("/tmp/probe", "w").write("ok"))
    return result

class Policy:
    def act(self, observation):
        return 0

def make_policy(context):
    params = json.loads((context.program_dir / "probe.json").read_text())
    print("FACTS " + json.dumps(facts(params["port"], params["host_path"])))
    return Policy()
'''


@pytest.fixture
def host_listener():
    """A TCP server on the host's loopback: a policy must not reach it."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    accepted = []

    def serve() -> None:
        try:
            while True:
                connection, _ = server.accept()
                accepted.append(connection)
        except OSError:
            return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    server.close()


@pytest.fixture(params=RUNTIMES)
def facts(request, engine, open_sandbox, write_program, tmp_path, host_listener, monkeypatch):
    """What the probe saw from inside, plus what the host sees of the policy containers, under one runtime."""
    port, accepted = host_listener
    secret = tmp_path / "host-secret.txt"
    secret.write_text("host only")
    monkeypatch.setenv("EPG_TEST_SECRET", "must-not-leak")
    program = write_program(PROBE, **{"probe.json": json.dumps({"port": port, "host_path": str(secret)})})
    with open_sandbox(runtime=request.param) as sandbox:
        assert sandbox.container_pool.wait_until_full(60)
        pooled = engine.client.containers.list(filters={"label": selector(sandbox=sandbox.labels.sandbox, role="policy")})
        # State.Pid is the container's init under runc and gVisor's sandbox process under runsc.
        host_side = {
            "runtimes": sorted({c.attrs["HostConfig"]["Runtime"] for c in pooled}),
            "netns": sorted({os.readlink(f"/proc/{c.attrs['State']['Pid']}/ns/net") for c in pooled}),
        }
        (episode,) = sandbox.plan("train", 0, 1)
        outcome = sandbox.run_episode(episode, capture_program(program))
    assert pooled, "the pool started no policy container"
    assert outcome.failure is None, outcome.traceback or outcome.reason
    line = next(line for line in outcome.output_tail.splitlines() if line.startswith("FACTS "))
    return json.loads(line[len("FACTS "):]) | {"accepted": len(accepted), "runtime": request.param, "host": host_side}


def test_policy_runs_under_the_requested_runtime(facts):
    assert facts["host"]["runtimes"] == [facts["runtime"]]
    if facts["runtime"] == "runsc":
        # gVisor's Sentry answers the policy's system calls: it reports its own
        # kernel release, never the host's.
        assert facts["kernel"] != os.uname().release
    else:
        assert facts["kernel"] == os.uname().release


def test_policy_runs_as_non_root(facts):
    assert facts["uid"] != 0


def test_policy_has_no_new_privileges_and_no_capabilities(facts):
    assert facts["no_new_privs"] == 1
    assert int(facts["cap_eff"], 16) == 0


def test_policy_cannot_write_root_filesystem_or_program(facts):
    assert facts["root_writable"] is False
    assert facts["program_writable"] is False
    assert facts["tmp_writable"] is True


def test_policy_cannot_import_the_simulator(facts):
    assert facts["gymnasium"] is False


def test_policy_cannot_reach_network(facts):
    # Structure: a network namespace of its own, only a loopback interface, no route at all.
    # Seen from the host, every policy container's process sits in a namespace of its own.
    host_netns = os.readlink("/proc/self/ns/net")
    assert host_netns not in facts["host"]["netns"]
    if facts["runtime"] == "runc":
        assert facts["netns"] != host_netns
    else:
        # Under gVisor the namespace the policy reads is the Sentry's own (its
        # inode numbers are not the host's, so comparing them would prove
        # nothing); the interfaces and routes below are those of gVisor's
        # network stack, which has no device but its loopback.
        assert facts["netns"].startswith("net:[")
    assert facts["interfaces"] == ["lo"]
    assert facts["routes"] == []
    assert facts["resolver"] is False
    # The host's own loopback service is out of reach: 127.0.0.1 is the container's.
    assert facts["host_loopback_reached"] is False
    assert facts["accepted"] == 0


def test_policy_sees_no_host_environment_or_files(facts):
    assert facts["host_env"] == {}
    assert facts["host_path_visible"] is False
    assert facts["docker_socket"] is False


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_container_spec_translation_matches_the_real_container(engine, images, scope, runtime):
    labels = LabelSet(sandbox="spec-check", owner=owner_id(), scope=scope).for_role("policy")
    spec = ContainerSpec(
        image=images["policy-runtime"], command=("sleep", "30"), labels=labels, memory_bytes=96 * 1024 * 1024, pids_limit=32, runtime=runtime
    )
    container = engine.start(spec)
    try:
        container.reload()
        host = container.attrs["HostConfig"]
        assert host["Runtime"] == runtime
        assert host["NetworkMode"] == "none"
        assert container.attrs["Config"]["NetworkDisabled"] is True
        assert not container.attrs["NetworkSettings"]["Networks"]
        assert host["ReadonlyRootfs"] is True
        assert host["CapDrop"] == ["ALL"]
        assert host["SecurityOpt"] == ["no-new-privileges"]
        assert host["Init"] is True
        assert host["PidsLimit"] == 32
        assert host["Memory"] == host["MemorySwap"] == 96 * 1024 * 1024
        assert host["NanoCpus"] == 1_000_000_000
        assert container.attrs["Config"]["User"] == "10001:10001"
        assert container.attrs["Config"]["Labels"]["org.evopolicygym.scope"] == scope
        assert "/tmp" in host["Tmpfs"]
    finally:
        engine.remove(container)

