"""The model relay: allowed paths only, the Host's credential added, streams passed through, every exchange recorded."""

from __future__ import annotations

import http.client
import json
import socket
import tempfile
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from orchestrator.relay.policy import RelayPolicy, StaticCredential, path_allowed
from orchestrator.relay.server import ModelRelay
from orchestrator.relay.usage import count_tokens
from orchestrator.session.relay_bridge import serve as serve_bridge

SECRET = "sk-host-only-credential"
SSE = (
    b'event: response.created\ndata: {"type":"response.created"}\n\n'
    b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"hel"}\n\n'
    b'event: response.completed\ndata: {"type":"response.completed","response":{"usage":{"input_tokens":7,"output_tokens":5,"total_tokens":12}}}\n\n'
)


class Upstream(BaseHTTPRequestHandler):
    seen: list[dict] = []
    # Set by a test to stream events one by one: each waits for the test to say the agent got the one before.
    paced: list[threading.Event] | None = None

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        Upstream.seen.append({"path": self.path, "headers": self.headers, "body": body})
        if Upstream.paced is not None:
            self._paced(Upstream.paced)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(SSE)))
        self.end_headers()
        self.wfile.write(SSE)

    def _paced(self, received: list[threading.Event]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        for number, event in enumerate(received):
            self.wfile.write(f'data: {{"n": {number}}}\n\n'.encode())
            self.wfile.flush()
            if not event.wait(5):
                return
        self.close_connection = True

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def relay_setup(monkeypatch):
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    Upstream.seen, Upstream.paced = [], None
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=upstream.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    directory = Path(tempfile.mkdtemp(dir="/tmp", prefix="epg-relay-"))
    made = []

    def make(credential_header="authorization", **fields):
        fields = {"allow_paths": ("/v1/responses",), "credential": StaticCredential(header=credential_header, value=SECRET),
                  **fields}
        policy = RelayPolicy(upstream=f"http://127.0.0.1:{upstream.server_address[1]}", **fields)
        relay = ModelRelay(policy, directory / f"relay{len(made)}.sock", directory / f"records{len(made)}.jsonl")
        made.append(relay)
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        ready = threading.Event()
        threading.Thread(target=serve_bridge, args=(port, str(directory / f"relay{len(made) - 1}.sock"), ready), daemon=True).start()
        ready.wait(5)
        return relay, f"http://127.0.0.1:{port}", directory / f"records{len(made) - 1}.jsonl"

    yield make
    for relay in made:
        relay.close()
    upstream.shutdown()


def entries(records: Path, count: int) -> list[dict]:
    """The record's entries, once `count` are written (a record follows the end of its response)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        lines = records.read_text().splitlines() if records.exists() else []
        if len(lines) >= count:
            return [json.loads(line) for line in lines]
        time.sleep(0.01)
    raise AssertionError(f"fewer than {count} relay records")


def post(base: str, path: str, body: dict, headers: dict | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_allowed_request_is_forwarded_with_the_hosts_credential_and_streamed_back(relay_setup):
    relay, base, records = relay_setup()
    status, body = post(base, "/v1/responses", {"model": "m", "stream": True}, {"Authorization": "Bearer agent-guess"})
    assert status == 200 and body == SSE
    (seen,) = Upstream.seen
    assert seen["path"] == "/v1/responses"
    assert seen["headers"]["Authorization"] == f"Bearer {SECRET}"
    (entry,) = entries(records, 1)
    assert entry["path"] == "/v1/responses" and entry["status"] == 200 and entry["tokens"] == 12
    assert json.loads(entry["request"]) == {"model": "m", "stream": True}
    assert entry["response"] == SSE.decode()
    assert SECRET not in records.read_text()
    assert relay.counters.requests == 1 and relay.counters.tokens == 12


def test_disallowed_path_is_refused_and_recorded(relay_setup):
    relay, base, records = relay_setup()
    status, body = post(base, "/v1/files", {"purpose": "x"})
    assert status == 403 and b"not allowed" in body
    assert Upstream.seen == []
    (entry,) = entries(records, 1)
    assert entry["refused"] == "path /v1/files is not allowed"
    assert relay.counters.refused == 1 and relay.counters.requests == 0


def test_request_for_another_host_is_refused(relay_setup):
    relay, base, records = relay_setup()
    port = int(base.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
        connection.sendall(b"POST http://other.invalid/v1/responses HTTP/1.1\r\nHost: other.invalid\r\nContent-Length: 2\r\n\r\n{}")
        reply = b""
        while b"other.invalid" not in reply:  # the status line and the body may arrive apart
            chunk = connection.recv(65536)
            if not chunk:
                break
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 403") and b"other.invalid" in reply
    assert Upstream.seen == []
    assert entries(records, 1)[0]["refused"].startswith("host other.invalid")


def test_request_limit_ends_with_a_clear_refusal(relay_setup):
    relay, base, records = relay_setup(max_requests=2)
    assert [post(base, "/v1/responses", {"n": i})[0] for i in range(3)] == [200, 200, 429]
    assert relay.counters.limit_reached == "2 requests"
    assert [e["seq"] for e in entries(records, 3)] == [1, 2, 3]


def test_token_counts_read_openai_anthropic_and_gemini_usage():
    anthropic = (
        b'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":20}}\n\n'
    )
    assert count_tokens(SSE) == 12
    assert count_tokens(anthropic) == 31
    assert count_tokens(b'{"usage": {"input_tokens": 3, "output_tokens": 4}}') == 7
    assert count_tokens(b"not json") == 0
    gemini = (  # every streamed chunk may carry the running total: the last one counts
        b'data: {"candidates": [], "usageMetadata": {"promptTokenCount": 5, "totalTokenCount": 6}}\n\n'
        b'data: {"candidates": [], "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 4, "totalTokenCount": 9}}\n\n'
    )
    assert count_tokens(gemini) == 9


def test_allowed_paths_ending_in_slash_or_star_match_by_prefix():
    assert path_allowed("/v1beta/models/gemini-x:streamGenerateContent", "/v1beta/models/")
    assert path_allowed("/v1beta/models/gemini-x:generateContent", "/v1beta/models/gemini-*")
    assert not path_allowed("/v1beta/files", "/v1beta/models/")
    assert not path_allowed("/v1beta/modelsx", "/v1beta/models/")
    assert path_allowed("/v1/responses", "/v1/responses") and path_allowed("/v1/responses/r1", "/v1/responses")
    assert not path_allowed("/v1/responsesx", "/v1/responses")
    # Dot segments and encoded separators never pass a prefix: the upstream could resolve them elsewhere.
    assert not path_allowed("/v1beta/models/../files", "/v1beta/models/")
    assert not path_allowed("/v1beta/models/%2e%2e/files", "/v1beta/models/")
    assert not path_allowed("/v1beta/models/x%2Ffiles", "/v1beta/models/")


def test_goog_api_key_is_sent_raw_and_the_agents_own_key_is_dropped(relay_setup):
    relay, base, records = relay_setup(allow_paths=("/v1beta/models/",), credential_header="x-goog-api-key")
    status, _ = post(base, "/v1beta/models/m:streamGenerateContent?alt=sse&key=agent-guess", {"contents": []},
                     {"X-Goog-Api-Key": "agent-guess", "Authorization": "Bearer agent-guess"})
    assert status == 200
    (seen,) = Upstream.seen
    assert seen["path"] == "/v1beta/models/m:streamGenerateContent?alt=sse"
    assert seen["headers"].get_all("x-goog-api-key") == [SECRET]
    assert seen["headers"].get("authorization") is None
    assert "agent-guess" not in str(seen["headers"])


def test_server_sent_events_reach_the_agent_as_the_upstream_sends_them(relay_setup):
    relay, base, records = relay_setup()
    received = [threading.Event() for _ in range(3)]
    Upstream.paced = received
    port = int(base.rsplit(":", 1)[1])
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("POST", "/v1/responses", body=b"{}", headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    assert response.status == 200
    for number, event in enumerate(received):
        # The upstream sends the next event only once this one has reached the agent: a buffering relay stalls here.
        assert response.readline() == f'data: {{"n": {number}}}\n'.encode()
        assert response.readline() == b"\n"
        event.set()
    assert response.read() == b""
    connection.close()
    (entry,) = entries(records, 1)
    assert entry["response"].count("data:") == 3
