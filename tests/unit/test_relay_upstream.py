"""The relay's upstream side: chunked request bodies, bounds, timeouts and errors, proxies, a model server on loopback."""

from __future__ import annotations

import http.client
import importlib.util
import io
import json
import ssl
import subprocess
import time
from pathlib import Path

import pytest
from support.relay_harness import FakeUpstream, Relays, free_port, read_records, serving

from orchestrator.relay.http_body import BodyError, read_request_body
from orchestrator.relay.policy import RelayPolicy, StaticCredential

REPO = Path(__file__).resolve().parents[2]
SECRET = "sk-upstream-test-credential"


def _load_fake(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "tests" / "fakes" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def harness(upstream):
    """Returns make(**policy fields) -> (relay, bridge port, record path)."""
    with Relays() as relays:
        def make(**fields):
            fields = {"upstream": upstream.url, "allow_paths": ("/v1/",),
                      "credential": StaticCredential(header="authorization", value=SECRET), **fields}
            started = relays.start(RelayPolicy(**fields))
            return started.relay, started.port, started.records

        yield make


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
    (entry,) = read_records(records, 1)
    assert entry["request"] == b"".join(parts).decode() and entry["error"] is None and entry["tokens"] == 3


def test_connections_to_the_upstream_are_kept_alive_and_reused(harness, upstream):
    relay, port, records = harness()
    for _ in range(3):
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("POST", "/v1/echo", body=b"{}")
        response = connection.getresponse()
        assert response.status == 200 and json.loads(response.read())["body"] == "{}"
        connection.close()
    assert len(upstream.seen) == 3 and len({seen["peer"] for seen in upstream.seen}) == 1


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
    (entry,) = read_records(records, 1)
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
    (entry,) = read_records(records, 1)
    assert entry["status"] == 200 and entry["error"] == "upstream timed out (read, 0.5 s)"
    assert entry["response"] == 'data: {"n": 0}\n\n'


def test_unreachable_upstream_is_a_recorded_502(harness):
    relay, port, records = harness(upstream=f"http://127.0.0.1:{free_port()}")
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request("POST", "/v1/echo", body=b"{}")
    response = connection.getresponse()
    assert response.status == 502 and b"upstream unreachable" in response.read()
    (entry,) = read_records(records, 1)
    assert entry["status"] == 502 and entry["error"].startswith("upstream unreachable")


def test_request_and_response_sizes_are_bounded(harness, upstream):
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
    first, second, third = read_records(records, 3)
    assert first["refused"] == second["refused"] == "request body over 1000 bytes"
    assert third["error"] == "upstream response over 1000 bytes" and len(upstream.seen) == 1


def test_requests_reach_the_upstream_through_the_hosts_http_proxy(harness, upstream, monkeypatch):
    with serving(_load_fake("http_proxy").Proxy()) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        relay, port, records = harness()
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("POST", "/v1/echo", body=b'{"via": "proxy"}')
        response = connection.getresponse()
        assert response.status == 200 and json.loads(response.read())["body"] == '{"via": "proxy"}'
        assert proxy.seen == [("POST", f"http://127.0.0.1:{upstream.server_address[1]}/v1/echo")]
        assert upstream.seen[0]["headers"]["authorization"] == f"Bearer {SECRET}"

        # NO_PROXY names the upstream: the relay goes direct.
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        relay, port, records = harness()
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("POST", "/v1/echo", body=b'{"via": "direct"}')
        assert connection.getresponse().status == 200
        assert len(proxy.seen) == 1 and len(upstream.seen) == 2


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
    tls_upstream = FakeUpstream()
    tls_upstream.socket = context.wrap_socket(tls_upstream.socket, server_side=True)
    with serving(tls_upstream), serving(_load_fake("http_proxy").Proxy()) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "cert.pem"))
        tls_port = tls_upstream.server_address[1]
        relay, port, records = harness(upstream=f"https://127.0.0.1:{tls_port}")
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        connection.request("POST", "/v1/echo", body=b'{"via": "tunnel"}')
        response = connection.getresponse()
        assert response.status == 200 and json.loads(response.read())["body"] == '{"via": "tunnel"}'
        assert proxy.seen == [("CONNECT", f"127.0.0.1:{tls_port}")]
        assert tls_upstream.seen[0]["headers"]["authorization"] == f"Bearer {SECRET}"
