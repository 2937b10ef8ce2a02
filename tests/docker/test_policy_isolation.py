"""What a policy can and cannot do, checked from inside: a policy container under runc and under gVisor, and a forked
sandbox in a lane container (forked isolation: no /proc or /sys inside, so the probe asks the kernel instead)."""

from __future__ import annotations

import errno
import json
import os
import socket
import threading

import pytest

from orchestrator.backends.container_spec import RUNTIMES, ContainerSpec
from orchestrator.backends.labels import LabelSet, owner_id, selector
from orchestrator.backends.settings import SandboxTuning
from orchestrator.kernel.program import capture_program

PROBE = '''
import ctypes, json, os, socket, sys

def facts(host_port, host_path):
    result = {}
    result["uid"] = os.getuid()
    libc = ctypes.CDLL(None, use_errno=True)
    # Asked of the kernel (prctl PR_GET_NO_NEW_PRIVS): gVisor's /proc/self/status has no NoNewPrivs line.
    result["no_new_privs"] = libc.prctl(39, 0, 0, 0, 0)
    # The effective set from capget (version 3 header, this thread): a forked sandbox has no /proc to read it from.
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    data = (ctypes.c_uint32 * 6)()
    result["cap_eff"] = format(data[0] | data[3] << 32, "x") if libc.capget(header, data) == 0 else "capget failed"
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
    # The interfaces from the kernel (if_nameindex, over netlink), /sys and /proc only where they are mounted.
    try:
        result["interfaces"] = sorted(name for _, name in socket.if_nameindex())
    except OSError as exc:
        result["interfaces"] = f"refused: errno {exc.errno}"
    result["proc"] = os.path.exists("/proc/self")
    result["sys"] = os.path.exists("/sys/class")
    if result["proc"]:
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


@pytest.fixture(scope="module")
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


# (runtime, isolation): a policy container under each runtime, and a forked sandbox (its lane container under runc).
UNDER = [("runc", "container"), ("runsc", "container"), ("runc", "forked")]


def _descendants(pid: int) -> list[int]:
    """The processes below pid on this host (each thread's children file), depth first."""
    found: list[int] = []
    pending = [pid]
    while pending:
        parent = pending.pop()
        for task in os.listdir(f"/proc/{parent}/task"):
            try:
                children = [int(c) for c in open(f"/proc/{parent}/task/{task}/children").read().split()]
            except OSError:
                continue
            found += children
            pending += children
    return found


def _network_of(pid: int) -> tuple[list[str], list[str]] | None:
    """The interfaces and the routes' interfaces of pid's network namespace, as the host reads them."""
    try:
        devices = open(f"/proc/{pid}/net/dev").read().splitlines()[2:]
        routes = open(f"/proc/{pid}/net/route").read().splitlines()[1:]
    except OSError:  # it ended meanwhile
        return None
    return sorted(line.split(":")[0].strip() for line in devices), [line.split()[0] for line in routes if line.strip()]


def _netns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/net")
    except OSError:  # it ended meanwhile
        return None


def _host_side(engine, sandbox, isolation: str) -> dict:
    """What the host sees: the runtimes of the containers the policies run in, and the network namespaces of the
    processes a policy runs as (a policy container's init; a forked sandbox's processes below its lane's zygote)."""
    role = "policy" if isolation == "container" else "lane"
    containers = engine.client.containers.list(filters={"label": selector(sandbox=sandbox.labels.sandbox, role=role)})
    assert containers, f"the sandbox started no {role} container"
    # State.Pid is the container's init under runc and gVisor's sandbox process under runsc.
    inits = [c.attrs["State"]["Pid"] for c in containers]
    networks: list[tuple[list[str], list[str]]] = []
    if isolation == "container":
        namespaces = {_netns(pid) for pid in inits}
    else:  # the sandboxes forked ahead, waiting for their Episodes: each in a namespace of its own, not its lane's
        lane_namespaces = {_netns(pid) for pid in inits}
        sandboxed = [child for pid in inits for child in _descendants(pid) if _netns(child) not in lane_namespaces]
        namespaces = {_netns(child) for child in sandboxed}
        assert namespaces - {None}, "no forked sandbox was seen waiting below the lanes' zygotes"
        networks = [network for network in map(_network_of, sandboxed) if network is not None]
    return {"runtimes": sorted({c.attrs["HostConfig"]["Runtime"] for c in containers}), "netns": sorted(namespaces - {None}),
            "networks": networks}


# Module-scoped: one sandbox and one probe per (runtime, isolation), read by every test below.
@pytest.fixture(scope="module", params=UNDER, ids=["-".join(under) for under in UNDER])
def facts(request, engine, open_sandbox, tmp_path_factory, host_listener):
    """What the probe saw from inside, plus what the host sees of the policies' processes, under one runtime and
    isolation mode."""
    runtime, isolation = request.param
    port, accepted = host_listener
    accepted.clear()
    root = tmp_path_factory.mktemp("isolation")
    secret = root / "host-secret.txt"
    secret.write_text("host only")
    program = root / "program"
    program.mkdir()
    (program / "policy.py").write_text(PROBE)
    (program / "probe.json").write_text(json.dumps({"port": port, "host_path": str(secret)}))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EPG_TEST_SECRET", "must-not-leak")
        with open_sandbox(runtime=runtime, tuning=SandboxTuning(pool_size=2, isolation=isolation)) as sandbox:
            assert sandbox.container_pool.wait_until_full(60)
            host_side = _host_side(engine, sandbox, isolation)
            (episode,) = sandbox.plan("train", 0, 1)
            outcome = sandbox.run_episode(episode, capture_program(program))
    assert outcome.failure is None, outcome.traceback or outcome.reason
    line = next(line for line in outcome.output_tail.splitlines() if line.startswith("FACTS "))
    return json.loads(line[len("FACTS "):]) | {"accepted": len(accepted), "runtime": runtime, "isolation": isolation, "host": host_side}


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
    # Seen from the host, every policy's process sits in a namespace of its own.
    host_netns = os.readlink("/proc/self/ns/net")
    assert facts["host"]["netns"] and host_netns not in facts["host"]["netns"]
    if facts["isolation"] == "forked":
        # No /proc or /sys inside, and no socket but a Unix one (the inner filter refuses the others, netlink too):
        # the host reads the sandboxes' namespaces instead (a new one each, neither the host's nor the lane's), and
        # each has only its loopback and no route.
        assert facts["proc"] is False and facts["sys"] is False
        assert "netns" not in facts and "routes" not in facts
        assert facts["interfaces"] == f"refused: errno {errno.EAFNOSUPPORT}"
        assert facts["host"]["networks"] and all(network == (["lo"], []) for network in facts["host"]["networks"])
    elif facts["runtime"] == "runc":
        assert facts["netns"] != host_netns
        assert facts["routes"] == []
    else:
        # Under gVisor the namespace the policy reads is the Sentry's own (its
        # inode numbers are not the host's, so comparing them would prove
        # nothing); the interfaces and routes below are those of gVisor's
        # network stack, which has no device but its loopback.
        assert facts["netns"].startswith("net:[")
        assert facts["routes"] == []
    if facts["isolation"] == "container":
        assert facts["interfaces"] == ["lo"]
    assert facts["resolver"] is False
    # The host's own loopback service is out of reach: 127.0.0.1 is the policy's own.
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

