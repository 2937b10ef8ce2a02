"""The relay cannot be used to exhaust the Host: bodies refused unread, bounded threads and requests in flight, read
deadlines, refusals recorded as summaries and counted against limits, the Run's relay record bounded in size."""

from __future__ import annotations

import http.client
import json
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import pytest
from support.relay_harness import Relays, post, read_records

from orchestrator.relay.bounds import RelayBounds
from orchestrator.relay.policy import RelayPolicy, StaticCredential
from orchestrator.relay.record import SUMMARY_ROOM
from orchestrator.relay.server import ModelRelay

MIB = 1024 * 1024


@pytest.fixture
def start(upstream):
    """Returns start(**policy fields) -> StartedRelay (allowed: /v1/responses, /v1/echo, /v1/stall)."""
    with Relays() as relays:
        def make(**fields):
            fields = {"upstream": upstream.url, "allow_paths": ("/v1/responses", "/v1/echo", "/v1/stall"),
                      "credential": StaticCredential(header="authorization", value="k"), "timeout_s": 20, **fields}
            return relays.start(RelayPolicy(**fields))

        yield make


def connect(path: Path, timeout: float = 5.0) -> socket.socket:
    """A connection to the relay's socket, waiting while its listen queue is full; reads time out after timeout."""
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(timeout)
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.connect(str(path))
            return client
        except BlockingIOError:  # the listen queue is full for a moment
            if time.monotonic() > deadline:
                raise
            time.sleep(0.001)


def read_answer(client: socket.socket) -> bytes:
    """Everything the relay sends until it closes the connection or stops for 5 s (the client's timeout)."""
    data = b""
    try:
        while chunk := client.recv(65536):
            data += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return data


def test_refused_request_is_answered_from_its_head_without_its_body_being_read(start, upstream):
    started = start()
    cases = (("/v1/files", 20 * MIB, b"403"), ("http://elsewhere.invalid/v1/responses", 20 * MIB, b"403"),
             ("/v1/responses", 100 * MIB, b"413"))
    for path, length, status in cases:
        with connect(started.socket) as client:
            began = time.monotonic()
            client.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n".encode())
            answer = read_answer(client)  # not one byte of the body was sent
            assert time.monotonic() - began < 2.0, path
            assert answer.split(b" ", 2)[1] == status, answer[:200]
            assert b"Connection: close" in answer
    assert upstream.seen == []
    entries = read_records(started.records, 3)
    assert [e["refused"] for e in entries] == ["path /v1/files is not allowed", "host elsewhere.invalid is not the allowed upstream",
                                               f"request body over {32 * MIB} bytes"]
    assert started.relay.counters.refused == 3 and started.relay.counters.refused_bytes < 3 * 1024


def test_100_continue_is_sent_only_once_the_head_passed_its_checks(start, upstream):
    started = start()
    with connect(started.socket) as client:
        client.sendall(b"POST /v1/files HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 1000000\r\n\r\n")
        assert read_answer(client).startswith(b"HTTP/1.1 403")  # no "100 Continue" first: the body is not wanted
    with connect(started.socket) as client:
        client.sendall(b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nConnection: close\r\nContent-Length: 2\r\n\r\n")
        assert client.recv(25) == b"HTTP/1.1 100 Continue\r\n\r\n"
        client.sendall(b"{}")
        assert read_answer(client).startswith(b"HTTP/1.1 200")
    assert [seen["body"] for seen in upstream.seen] == [b"{}"]


def test_a_thousand_idle_connections_hold_a_bounded_number_of_threads(start):
    started = start()
    before = threading.active_count()
    clients = []
    try:
        for _ in range(1000):
            clients.append(connect(started.socket))
        time.sleep(0.5)  # the relay has accepted every connection it will
        assert threading.active_count() <= before + 64
        assert started.relay.open_connections == 64
        assert started.relay.counters.refused_connections == 1000 - 64
    finally:
        for client in clients:
            client.close()
    deadline = time.monotonic() + 5
    while started.relay.open_connections and time.monotonic() < deadline:
        time.sleep(0.05)
    assert started.relay.open_connections == 0
    assert post(started.port, "/v1/echo", b'{"after": "the flood"}')[0] == 200  # served again once they are gone


def test_connections_over_the_cap_end_the_phase_once_too_many_were_refused(start):
    started = start(bounds=RelayBounds(max_connections=2, max_refused_connections=10))
    clients = [connect(started.socket) for _ in range(12)]
    deadline = time.monotonic() + 5
    while not started.relay.counters.limit_reached and time.monotonic() < deadline:
        time.sleep(0.02)
    for client in clients:
        client.close()
    assert started.relay.counters.limit_reached == "too many refused connections (10, over 2 at once)"


def test_idle_connection_is_closed_after_its_timeout(start):
    started = start(bounds=RelayBounds(idle_timeout_s=0.5))
    with connect(started.socket) as client:
        began = time.monotonic()
        assert client.recv(1) == b""  # closed by the relay, not by the client's 5 s timeout
        assert 0.4 < time.monotonic() - began < 3.0
    with connect(started.socket) as client:  # after an answered request too
        client.sendall(b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        began = time.monotonic()
        answer = read_answer(client)
        assert answer.startswith(b"HTTP/1.1 200") and 0.4 < time.monotonic() - began < 3.0


@pytest.mark.parametrize("head, trickled, reason", [
    (b"", b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100, "request head not received within 1 s"),
    (b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n", b"{" * 100, "request body not received within 1 s"),
], ids=["head", "body"])
def test_request_trickling_in_is_refused_when_its_deadline_passes(start, upstream, head, trickled, reason):
    started = start(bounds=RelayBounds(read_timeout_s=1.0))
    with connect(started.socket) as client:
        client.sendall(head)
        began = time.monotonic()
        try:
            for byte in trickled:  # a byte every 50 ms: each read is quick, the request never ends
                client.sendall(bytes([byte]))
                time.sleep(0.05)
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = read_answer(client)
    assert time.monotonic() - began < 6.0
    assert answer == b"" or answer.startswith(b"HTTP/1.1 408")
    (entry,) = read_records(started.records, 1)
    assert entry["refused"] == reason and entry["status"] == 408 and entry["request"] == ""
    assert upstream.seen == []


def test_refused_requests_are_recorded_as_short_summaries_never_their_bodies(start, upstream):
    started = start(max_request_bytes=2 * MIB)
    junk = b"\xff" * (3 * MIB)
    with connect(started.socket) as client:  # a refused path, a body under max_request_bytes sent anyway
        client.sendall(f"POST /v1/files HTTP/1.1\r\nHost: x\r\nContent-Length: {MIB + MIB // 2}\r\n\r\n".encode())
        try:
            client.sendall(junk[:MIB + MIB // 2])
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert read_answer(client).startswith(b"HTTP/1.1 403")
    with connect(started.socket) as client:  # an allowed path, chunked, over max_request_bytes
        client.sendall(b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        try:
            for offset in range(0, len(junk), 256 * 1024):
                client.sendall(b"40000\r\n" + junk[offset:offset + 256 * 1024] + b"\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert read_answer(client).startswith(b"HTTP/1.1 413")
    with connect(started.socket) as client:  # an allowed path, a background request
        body = json.dumps({"model": "m", "background": True, "input": "a" * (MIB // 2)}).encode()
        client.sendall(f"POST /v1/responses HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                       + body)
        assert read_answer(client).startswith(b"HTTP/1.1 403")
    with connect(started.socket) as client:  # a request line of 60 KiB to a refused path
        client.sendall(b"GET /v1/" + b"\xff" * 60000 + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert read_answer(client).startswith(b"HTTP/1.1 403")
    entries = read_records(started.records, 4)
    assert [e["status"] for e in entries] == [403, 413, 403, 403]
    assert all(e["request"] == "" and e["response"] == "" for e in entries)
    assert entries[2]["refused"] == "background requests are not relayed" and entries[2]["request_bytes"] == len(body)
    assert started.records.stat().st_size < 4096
    assert upstream.seen == []


def test_request_head_over_its_bound_is_refused_before_it_is_parsed_whole(start, upstream):
    started = start()
    padding = b"".join(b"X-Pad-%d: %s\r\n" % (number, b"a" * 1000) for number in range(90))  # 90 kB of headers
    with connect(started.socket) as client:
        client.sendall(b"POST /v1/echo HTTP/1.1\r\nHost: x\r\n" + padding + b"Content-Length: 2\r\n\r\n{}")
        answer = read_answer(client)
    assert answer.startswith(b"HTTP/1.1 431") and b"request head over 65536 bytes" in answer
    assert upstream.seen == []
    (entry,) = read_records(started.records, 1)
    assert entry["status"] == 431 and entry["request"] == ""


def test_too_many_refused_requests_end_the_phase_and_later_ones_are_only_counted(start):
    started = start()
    statuses = []
    with connect(started.socket) as client:
        for _ in range(300):  # one kept-alive connection, a refused path each time, no body
            client.sendall(b"GET /v1/files HTTP/1.1\r\nHost: x\r\n\r\n")
            response = http.client.HTTPResponse(client)
            response.begin()
            response.read()
            statuses.append(response.status)
    assert statuses == [403] * 256 + [429] * 44
    counters = started.relay.counters
    assert counters.limit_reached == "too many refused requests (256)"
    assert counters.refused == 300 and counters.unrecorded == 300 - 256
    assert len(started.records.read_text().splitlines()) == 256
    started.relay.close()
    last = json.loads(started.records.read_text().splitlines()[-1])
    assert last["refused"].startswith("44 more requests refused after the limit")


def test_refused_bytes_end_the_phase(start):
    started = start(bounds=RelayBounds(max_refused_bytes=150_000), max_request_bytes=100_000)
    for _ in range(2):  # about 100 kB read of each before it is refused
        with connect(started.socket) as client:
            client.sendall(b"POST /v1/echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
            try:
                for _ in range(20):
                    client.sendall(b"2000\r\n" + b"y" * 0x2000 + b"\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
            assert read_answer(client).startswith(b"HTTP/1.1 413")
    assert started.relay.counters.limit_reached == "refused requests reached 150000 bytes"


def test_requests_in_flight_are_capped_and_the_one_beyond_is_refused_at_once(start, upstream):
    started = start()
    stalled = [connect(started.socket, timeout=30) for _ in range(8)]
    try:
        for client in stalled:
            client.sendall(b"POST /v1/stall HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        deadline = time.monotonic() + 5
        while len(upstream.seen) < 8 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(upstream.seen) == 8
        began = time.monotonic()
        status, body = post(started.port, "/v1/echo", b"{}")
        assert status == 503 and b"too many requests in flight (8)" in body
        assert time.monotonic() - began < 2.0
    finally:
        upstream.release.set()
        for client in stalled:
            client.close()
    assert len(upstream.seen) == 8


def test_the_runs_relay_record_is_bounded_and_reaching_it_ends_the_phase(upstream, tmp_path):
    folder = tmp_path / "relay"
    folder.mkdir()
    (folder / "exchanges.1.jsonl").write_bytes(b"x" * 30_000)  # an earlier agent attempt's record counts too
    bound = SUMMARY_ROOM + 60_000
    policy = RelayPolicy(upstream=upstream.url, allow_paths=("/v1/echo",), credential=StaticCredential(header="authorization", value="k"),
                         bounds=RelayBounds(max_record_bytes=bound))
    socket_path = Path(tempfile.mkdtemp(dir="/tmp", prefix="epg-relay-")) / "relay.sock"  # a socket's path stays short
    relay = ModelRelay(policy, socket_path, folder / "exchanges.2.jsonl")
    try:
        statuses = []
        for number in range(6):
            with connect(socket_path) as client:
                body = json.dumps({"n": number, "text": "z" * 10_000}).encode()
                client.sendall(f"POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
                statuses.append(read_answer(client).split(b" ", 2)[1])
    finally:
        relay.close()
        shutil.rmtree(socket_path.parent)
    entries = [json.loads(line) for line in (folder / "exchanges.2.jsonl").read_text().splitlines()]
    with_bodies = [e for e in entries if e["request"]]
    assert len(with_bodies) == 1  # 30 kB + one entry of 2 x 10 kB fit; the next would pass the bound
    assert entries[1]["omitted"] == "bodies: the relay record reached its bound" and entries[1]["status"] == 200
    assert relay.counters.limit_reached == f"the relay record reached {bound} bytes"
    assert statuses[:2] == [b"200", b"200"] and set(statuses[2:]) == {b"429"}
    assert 30_000 + (folder / "exchanges.2.jsonl").stat().st_size <= bound
