"""Only the agent's uid (and root) can connect to the relay's socket: another local user cannot spend the credential."""

from __future__ import annotations

import os
import socket
import stat

import pytest
from support.other_uid import AGENT_UID, OTHER_UID, as_uid
from support.relay_harness import FakeUpstream, Relays, clear_proxy_variables, serving

from orchestrator.relay.policy import RelayPolicy, StaticCredential
from orchestrator.relay.server import ModelRelay


@pytest.fixture
def start(monkeypatch):
    """Returns start(**ModelRelay options) -> StartedRelay, its directory traversable by every uid, as a run's host/ is."""
    clear_proxy_variables(monkeypatch)
    with serving(FakeUpstream()) as upstream, Relays() as relays:
        os.chmod(relays.directory, 0o755)

        def make(**options):
            policy = RelayPolicy(upstream=upstream.url, allow_paths=("/v1/echo",),
                                 credential=StaticCredential(header="authorization", value="k"))
            return relays.start(policy, **options)

        yield make


def status_as(uid: int, path: str) -> str:
    """As uid: connect to path and POST /v1/echo; the answer's status line, or "refused: ERRNO-NAME"."""

    def post() -> str:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(5)
            client.connect(path)
            client.sendall(b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
            return client.recv(4096).split(b"\r\n", 1)[0].decode()

    return as_uid(uid, post)


def test_the_relay_socket_refuses_another_uid_and_admits_the_agents(start):
    agent = start(owner_uid=AGENT_UID if os.geteuid() == 0 else None)
    info = os.stat(agent.socket)
    assert stat.S_IMODE(info.st_mode) == 0o600
    if os.geteuid() != 0:  # only root can become another uid: the mode and owner are what keep others out
        assert info.st_uid == os.geteuid()
        return
    assert info.st_uid == AGENT_UID
    assert status_as(OTHER_UID, str(agent.socket)) == "refused: PermissionError"
    assert status_as(AGENT_UID, str(agent.socket)) == "HTTP/1.1 200 OK"
    assert agent.relay.counters.requests == 1


def test_by_default_the_relay_socket_is_the_hosts_own_and_refuses_every_other_uid(start):
    started = start()  # no owner given: a Host that forgot to name the agent's uid fails closed
    info = os.stat(started.socket)
    assert (stat.S_IMODE(info.st_mode), info.st_uid) == (0o600, os.geteuid())
    if os.geteuid() != 0:
        return
    assert status_as(AGENT_UID, str(started.socket)) == "refused: PermissionError"
    assert status_as(OTHER_UID, str(started.socket)) == "refused: PermissionError"
    assert started.relay.counters.requests == 0


def test_the_relay_serves_at_a_socket_path_longer_than_a_unix_socket_address_allows(tmp_path, monkeypatch):
    clear_proxy_variables(monkeypatch)
    deep = tmp_path / ("d" * 60) / ("e" * 60)  # a Run directory below a deep checkout
    deep.mkdir(parents=True)
    socket_path = deep / "relay.sock"
    assert len(os.fsencode(socket_path)) > 108
    with serving(FakeUpstream()) as upstream:
        policy = RelayPolicy(upstream=upstream.url, allow_paths=("/v1/echo",), credential=StaticCredential(header="authorization", value="k"))
        relay = ModelRelay(policy, socket_path, tmp_path / "records.jsonl")
        directory = os.open(deep, os.O_RDONLY | os.O_DIRECTORY)
        try:
            assert stat.S_IMODE(os.stat(socket_path).st_mode) == 0o600
            assert status_as(os.geteuid(), f"/proc/self/fd/{directory}/relay.sock") == "HTTP/1.1 200 OK"
            assert relay.counters.requests == 1
        finally:
            os.close(directory)
            relay.close()
