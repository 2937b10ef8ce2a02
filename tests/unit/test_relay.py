"""The model relay: allowed paths only, the Host's credential added, streams passed through, every exchange recorded."""

from __future__ import annotations

import http.client
import json
import socket
import threading

import pytest
from support.relay_harness import RESPONSES_SSE, FakeUpstream, Relays, clear_proxy_variables, post, read_records, serving

from orchestrator.relay.policy import RelayPolicy, StaticCredential, path_allowed
from orchestrator.relay.usage import count_tokens

SECRET = "sk-host-only-credential"


@pytest.fixture
def upstream(monkeypatch):
    """The fake upstream, answering a streamed Responses answer; proxy variables cleared."""
    clear_proxy_variables(monkeypatch)
    with serving(FakeUpstream(answer=RESPONSES_SSE)) as server:
        yield server


@pytest.fixture
def relay_setup(upstream):
    """Returns make(credential header, **policy fields) -> (relay, bridge port, record path)."""
    with Relays() as relays:
        def make(credential_header="authorization", **fields):
            fields = {"allow_paths": ("/v1/responses",), "credential": StaticCredential(header=credential_header, value=SECRET),
                      **fields}
            started = relays.start(RelayPolicy(upstream=upstream.url, **fields))
            return started.relay, started.port, started.records

        yield make


def test_allowed_request_is_forwarded_with_the_hosts_credential_and_streamed_back(relay_setup, upstream):
    relay, port, records = relay_setup()
    status, body = post(port, "/v1/responses", json.dumps({"model": "m", "stream": True}).encode(), {"Authorization": "Bearer agent-guess"})
    assert status == 200 and body == RESPONSES_SSE
    (seen,) = upstream.seen
    assert seen["path"] == "/v1/responses"
    assert seen["headers"]["Authorization"] == f"Bearer {SECRET}"
    (entry,) = read_records(records, 1)
    assert entry["path"] == "/v1/responses" and entry["status"] == 200 and entry["tokens"] == 12
    assert json.loads(entry["request"]) == {"model": "m", "stream": True}
    assert entry["response"] == RESPONSES_SSE.decode()
    assert SECRET not in records.read_text()
    assert relay.counters.requests == 1 and relay.counters.tokens == 12


def test_disallowed_path_is_refused_and_recorded(relay_setup, upstream):
    relay, port, records = relay_setup()
    status, body = post(port, "/v1/files", json.dumps({"purpose": "x"}).encode())
    assert status == 403 and b"not allowed" in body
    assert upstream.seen == []
    (entry,) = read_records(records, 1)
    assert entry["refused"] == "path /v1/files is not allowed"
    assert relay.counters.refused == 1 and relay.counters.requests == 0


def test_request_for_another_host_is_refused(relay_setup, upstream):
    relay, port, records = relay_setup()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
        connection.sendall(b"POST http://other.invalid/v1/responses HTTP/1.1\r\nHost: other.invalid\r\nContent-Length: 2\r\n\r\n{}")
        reply = b""
        while b"other.invalid" not in reply:  # the status line and the body may arrive apart
            chunk = connection.recv(65536)
            if not chunk:
                break
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 403") and b"other.invalid" in reply
    assert upstream.seen == []
    assert read_records(records, 1)[0]["refused"].startswith("host other.invalid")


def test_request_limit_ends_with_a_clear_refusal(relay_setup):
    relay, port, records = relay_setup(max_requests=2)
    assert [post(port, "/v1/responses", json.dumps({"n": i}).encode())[0] for i in range(3)] == [200, 200, 429]
    assert relay.counters.limit_reached == "2 requests"
    assert [e["seq"] for e in read_records(records, 3)] == [1, 2, 3]


def test_token_counts_read_openai_anthropic_and_gemini_usage():
    anthropic = (
        b'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}\n\n'
        b'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":20}}\n\n'
    )
    assert count_tokens(RESPONSES_SSE) == 12
    assert count_tokens(anthropic) == 31
    assert count_tokens(b'{"usage": {"input_tokens": 3, "output_tokens": 4}}') == 7
    assert count_tokens(b"not json") == 0
    gemini = (  # every streamed chunk may carry the running total: the last one counts
        b'data: {"candidates": [], "usageMetadata": {"promptTokenCount": 5, "totalTokenCount": 6}}\n\n'
        b'data: {"candidates": [], "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 4, "totalTokenCount": 9}}\n\n'
    )
    assert count_tokens(gemini) == 9


def test_allowed_paths_are_exact_unless_they_end_in_slash_or_star():
    assert path_allowed("/v1beta/models/gemini-x:streamGenerateContent", "/v1beta/models/")
    assert path_allowed("/v1beta/models/gemini-x:generateContent", "/v1beta/models/gemini-*")
    assert not path_allowed("/v1beta/files", "/v1beta/models/")
    assert not path_allowed("/v1beta/modelsx", "/v1beta/models/")
    assert path_allowed("/v1/responses", "/v1/responses")
    assert not path_allowed("/v1/responses/r1", "/v1/responses")  # nothing below an exact entry
    assert not path_allowed("/v1/messages/batches", "/v1/messages")
    assert not path_allowed("/v1/responsesx", "/v1/responses")
    # A "*" inside an entry is one run of characters without "/" or ":": one model, one method.
    gemini = "/v1beta/models/*:generateContent"
    assert path_allowed("/v1beta/models/gemini-2.5-pro:generateContent", gemini)
    assert not path_allowed("/v1beta/models/gemini-2.5-pro:batchGenerateContent", gemini)
    assert not path_allowed("/v1beta/models/x/y:generateContent", gemini)
    assert not path_allowed("/v1beta/models/x:y:generateContent", gemini)
    assert not path_allowed("/v1beta/models/:generateContent", gemini)
    # Dot segments and encoded separators never pass a prefix: the upstream could resolve them elsewhere.
    assert not path_allowed("/v1beta/models/../files", "/v1beta/models/")
    assert not path_allowed("/v1beta/models/%2e%2e/files", "/v1beta/models/")
    assert not path_allowed("/v1beta/models/x%2Ffiles", "/v1beta/models/")


def test_goog_api_key_is_sent_raw_and_the_agents_own_key_is_dropped(relay_setup, upstream):
    relay, port, records = relay_setup(allow_paths=("/v1beta/models/",), credential_header="x-goog-api-key")
    status, _ = post(port, "/v1beta/models/m:streamGenerateContent?alt=sse&key=agent-guess", json.dumps({"contents": []}).encode(),
                     {"X-Goog-Api-Key": "agent-guess", "Authorization": "Bearer agent-guess"})
    assert status == 200
    (seen,) = upstream.seen
    assert seen["path"] == "/v1beta/models/m:streamGenerateContent?alt=sse"
    assert seen["headers"].get_all("x-goog-api-key") == [SECRET]
    assert seen["headers"].get("authorization") is None
    assert "agent-guess" not in str(seen["headers"])


def test_server_sent_events_reach_the_agent_as_the_upstream_sends_them(relay_setup, upstream):
    relay, port, records = relay_setup()
    received = [threading.Event() for _ in range(3)]
    upstream.paced = received
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
    (entry,) = read_records(records, 1)
    assert entry["response"].count("data:") == 3
