"""The relay's upstream side: chunked request bodies, bounds, timeouts and errors, proxies, a model server on loopback."""

from __future__ import annotations

import http.client
import importlib.util
import io
import json
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from orchestrator.relay.http_body import BodyError, read_request_body
from orchestrator.relay.policy import RelayPolicy, StaticCredential
from orchestrator.relay.server import ModelRelay
from orchestrator.session.relay_bridge import serve as serve_bridge

REPO = Path(__file__).resolve().parents[2]
SECRET = "sk-upstream-test-credential"
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy", "no_proxy")


def _load_fake(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "tests" / "fakes" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Upstream(BaseHTTPRequestHandler):
    """/echo answers with what it got; /stall never answers; /stall-mid stops after one event; /big sends 4096 bytes."""

    protocol_version = "HTTP/1.1"
    seen: list[dict] = []
    release = threading.Event()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        Upstream.seen.append({"path": self.path, "headers": self.headers, "body": body,
                              "peer": self.client_address[1]})
        if self.path.endswith("/stall"):
            Upstream.release.wait(30)
            return
        if self.path.endswith("/stall-mid"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            event = b'data: {"n": 0}\n\n'
            self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
            self.wfile.flush()
            Upstream.release.wait(30)
            self.close_connection = True
            return
        data = b"x" * 4096 if self.path.endswith("/big") else json.dumps(
            {"body": body.decode(), "transfer_encoding": self.headers.get("transfer-encoding"),
             "usage": {"total_tokens": 3}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def harness(monkeypatch):
    """Returns make(**policy fields) -> (relay, bridge port, record path); proxy variables cleared unless a test sets them."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    Upstream.seen = []
    Upstream.release = threading.Event()
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    upstream.daemon_threads = True
    threading.Thread(target=upstream.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    directory = Path(tempfile.mkdtemp(dir="/tmp", prefix="epg-relay-up-"))
    made: list[ModelRelay] = []

    def make(**fields):
        fields = {"upstream": f"http://127.0.0.1:{upstream.server_address[1]}", "allow_paths": ("/v1/",),
                  "credential": StaticCredential(header="authorization", value=SECRET), **fields}
        number = len(made)
        relay = ModelRelay(RelayPolicy(**fields), directory / f"relay{number}.sock", directory / f"records{number}.jsonl")
        made.append(relay)
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        ready = threading.Event()
        threading.Thread(target=serve_bridge, args=(port, str(directory / f"relay{number}.sock"), ready), daemon=True).start()
        assert ready.wait(5)
        return relay, port, directory / f"records{number}.jsonl"

    make.upstream_port = upstream.server_address[1]
    yield make
    Upstream.release.set()
    for relay in made:
        relay.close()
    upstream.shutdown()
    upstream.server_close()


def records_of(path: Path, count: int) -> list[dict]:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        if len(lines) >= count:
            return [json.loads(line) for line in lines]
        time.sleep(0.01)
    raise AssertionError(f"fewer than {count} relay records")


def test_chunked_request_body_arrives_whole_upstream(harness):
    relay, port, records = harness()
    parts = [b'{"model": "m", ', b'"input": "' + b"a" * 70000 + b'", ', b'"stream": false}']
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("POST", "/v1/echo", body=iter(parts), encode_chunked=True,
                       headers={"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
    response = connection.getresponse()
    answer = json.loads(response.read())
    connection.close()
    assert response.status == 200
    assert answer["body"] == b"".join(parts).decode()
    assert answer["transfer_encoding"] is None  # sent on with its length
    (entry,) = records_of(records, 1)
    assert entry["request"] == b"".join(parts).decode() and entry["error"] is None and entry["tokens"] == 3


def test_connections_to_the_upstream_are_kept_alive_and_reused(harness):
    relay, port, records = harness()
    for _ in range(3):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("POST", "/v1/echo", body=b"{}")
        response = connection.getresponse()
        assert response.status == 200 and json.loads(response.read())["body"] == "{}"
        connection.close()
    assert len(Upstream.seen) == 3 and len({seen["peer"] for seen in Upstream.seen}) == 1


def test_stalled_upstream_gets_the_agent_a_504_within_the_timeout_and_is_recorded(harness):
    relay, port, records = harness(timeout_s=0.5)
    began = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("POST", "/v1/stall", body=b"{}")
    response = connection.getresponse()
    document = json.loads(response.read())
    elapsed = time.monotonic() - began
    assert response.status == 504 and document["error"]["type"] == "relay_upstream_error"
    assert 0.4 < elapsed < 3.0
    (entry,) = records_of(records, 1)
    assert entry["status"] == 504 and entry["error"] == "upstream timed out (read, 0.5 s)"
    assert relay.counters.errors == 1


def test_upstream_stalling_mid_stream_ends_the_agents_stream_within_the_timeout(harness):
    relay, port, records = harness(timeout_s=0.5)
    began = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("POST", "/v1/stall-mid", body=b"{}")
    response = connection.getresponse()
    assert response.status == 200
    assert response.readline() == b'data: {"n": 0}\n'
    with pytest.raises(http.client.IncompleteRead):  # the stream ends without its last chunk
        response.read()
    assert time.monotonic() - began < 3.0
    (entry,) = records_of(records, 1)
    assert entry["status"] == 200 and entry["error"] == "upstream timed out (read, 0.5 s)"
    assert entry["response"] == 'data: {"n": 0}\n\n'


def test_unreachable_upstream_is_a_recorded_502(harness):
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    dead = closed.getsockname()[1]
    closed.close()
    relay, port, records = harness(upstream=f"http://127.0.0.1:{dead}")
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("POST", "/v1/echo", body=b"{}")
    response = connection.getresponse()
    assert response.status == 502 and b"upstream unreachable" in response.read()
    (entry,) = records_of(records, 1)
    assert entry["status"] == 502 and entry["error"].startswith("upstream unreachable")


def test_request_and_response_sizes_are_bounded(harness):
    relay, port, records = harness(max_request_bytes=1000, max_response_bytes=1000)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("POST", "/v1/echo", body=b"y" * 1001)
    response = connection.getresponse()
    assert response.status == 413 and b"over 1000 bytes" in response.read()
    connection.close()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("POST", "/v1/echo", body=iter([b"y" * 600, b"y" * 600]), encode_chunked=True,
                       headers={"Transfer-Encoding": "chunked"})
    response = connection.getresponse()
    assert response.status == 413
    connection.close()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("POST", "/v1/big", body=b"{}")
    response = connection.getresponse()
    assert response.status == 200
    with pytest.raises(http.client.IncompleteRead):
        response.read()
    first, second, third = records_of(records, 3)
    assert first["refused"] == second["refused"] == "request body over 1000 bytes"
    assert third["error"] == "upstream response over 1000 bytes" and len(Upstream.seen) == 1


def test_requests_reach_the_upstream_through_the_hosts_http_proxy(harness, monkeypatch):
    proxy = _load_fake("http_proxy").Proxy()
    threading.Thread(target=proxy.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        relay, port, records = harness()
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("POST", "/v1/echo", body=b'{"via": "proxy"}')
        response = connection.getresponse()
        assert response.status == 200 and json.loads(response.read())["body"] == '{"via": "proxy"}'
        assert proxy.seen == [("POST", f"http://127.0.0.1:{harness.upstream_port}/v1/echo")]
        assert Upstream.seen[0]["headers"]["authorization"] == f"Bearer {SECRET}"

        # NO_PROXY names the upstream: the relay goes direct.
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        relay, port, records = harness()
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("POST", "/v1/echo", body=b'{"via": "direct"}')
        assert connection.getresponse().status == 200
        assert len(proxy.seen) == 1 and len(Upstream.seen) == 2
    finally:
        proxy.shutdown()
        proxy.server_close()


@pytest.mark.parametrize("raw, reason", [
    (b"5\r\nabc", "truncated chunk"),
    (b"zz\r\nabc\r\n0\r\n\r\n", "malformed chunk size"),
    (b"-1\r\n", "malformed chunk size"),
    (b"3\r\nabc\r\n0\r\n", "truncated chunked body"),
])
def test_malformed_chunked_bodies_are_refused(raw, reason):
    with pytest.raises(BodyError, match=reason) as caught:
        read_request_body(io.BytesIO(raw), {"transfer-encoding": "chunked"}, 100)
    assert caught.value.status == 400


def test_chunked_body_with_extensions_and_trailers_is_decoded():
    raw = b"3;name=x\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT"
    stream = io.BytesIO(raw)
    assert read_request_body(stream, {"transfer-encoding": "chunked"}, 100) == b"abcde"
    assert stream.read() == b"NEXT"


def test_https_upstream_is_reached_through_a_connect_tunnel_of_the_hosts_proxy(harness, monkeypatch, tmp_path):
    # A TLS upstream on loopback with a certificate made for it, which SSL_CERT_FILE tells the relay to trust.
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "cert.pem")],
                   check=True, capture_output=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    upstream.socket = context.wrap_socket(upstream.socket, server_side=True)
    threading.Thread(target=upstream.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    proxy = _load_fake("http_proxy").Proxy()
    threading.Thread(target=proxy.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "cert.pem"))
        tls_port = upstream.server_address[1]
        relay, port, records = harness(upstream=f"https://127.0.0.1:{tls_port}")
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("POST", "/v1/echo", body=b'{"via": "tunnel"}')
        response = connection.getresponse()
        assert response.status == 200 and json.loads(response.read())["body"] == '{"via": "tunnel"}'
        assert proxy.seen == [("CONNECT", f"127.0.0.1:{tls_port}")]
        assert Upstream.seen[0]["headers"]["authorization"] == f"Bearer {SECRET}"
    finally:
        proxy.shutdown()
        proxy.server_close()
        upstream.shutdown()
        upstream.server_close()
