"""relay.max_tokens is a bound: each request's most is reserved before it is forwarded; batch, file and background
endpoints, whose usage the relay never sees, are refused; each provider profile allows its exact endpoints."""

from __future__ import annotations

import json
import threading

import pytest
from support.relay_harness import Relays, post, read_records

from orchestrator.relay.policy import RelayPolicy, StaticCredential, path_allowed, unmetered_reason
from orchestrator.relay.spend import TokenLedger, output_cap, reservation
from orchestrator.run.relay_setup import relay_policy
from orchestrator.run.spec import RunSpec


@pytest.fixture
def start(upstream):
    with Relays() as relays:
        def make(**fields):
            fields = {"upstream": upstream.url, "credential": StaticCredential(header="authorization", value="k"), **fields}
            return relays.start(RelayPolicy(**fields))

        yield make


def test_twenty_concurrent_requests_never_forward_more_than_max_tokens(start, upstream):
    started = start(allow_paths=("/v1/spend",), max_tokens=5000)
    statuses: list[int] = []

    def ask(number: int) -> None:
        body = json.dumps({"model": "m", "max_tokens": 1000, "input": f"request {number:02d} " + "w" * 150}).encode()
        statuses.append(post(started.port, "/v1/spend", body)[0])

    threads = [threading.Thread(target=ask, args=(number,)) for number in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    # Each request may use its body's bytes (~180) plus its 1000 output tokens: four fit in 5000 at once, and once they
    # are counted the rest of the budget fits no other.
    assert sum(upstream.spent) <= 5000
    assert len(upstream.spent) == statuses.count(200) >= 1
    assert started.relay.counters.tokens == sum(upstream.spent)
    assert set(statuses) <= {200, 429, 503} and len(statuses) == 20
    # Another such request cannot fit in what is left: the agent's phase ends.
    assert post(started.port, "/v1/spend", json.dumps({"max_tokens": 1000}).encode())[0] == 429
    assert started.relay.counters.limit_reached == "5000 tokens"


def test_request_whose_reservation_never_fits_ends_the_phase_without_reaching_the_upstream(start, upstream):
    started = start(allow_paths=("/v1/spend",), max_tokens=500)
    status, body = post(started.port, "/v1/spend", json.dumps({"max_tokens": 1000}).encode())
    assert status == 429 and b"relay limit reached: 500 tokens" in body
    assert upstream.seen == [] and started.relay.counters.limit_reached == "500 tokens"


@pytest.mark.parametrize("path, body", [
    ("/v1/batches", {"input_file_id": "f"}),
    ("/v1/files", {"purpose": "batch"}),
    ("/v1/messages/batches", {"requests": []}),
    ("/v1/uploads", {}),
    ("/v1beta/models/gemini-x:batchGenerateContent", {"batch": {}}),
    ("/v1beta/models/gemini-x:asyncBatchEmbedContent", {}),
    ("/v1/responses", {"model": "m", "background": True, "input": "hi"}),
])
def test_batch_file_and_background_requests_are_refused_even_under_a_broad_prefix(start, upstream, path, body):
    started = start(allow_paths=("/v1/", "/v1beta/"))
    status, answer = post(started.port, path, json.dumps(body).encode())
    assert status == 403, answer
    assert "not relayed" in json.loads(answer)["error"]["message"]
    assert upstream.seen == []
    (entry,) = read_records(started.records, 1)
    assert entry["refused"] and entry["request"] == ""


def spec_of(agent: dict, relay: dict | None = None) -> RunSpec:
    return RunSpec.model_validate({"benchmark": "CartPole-v1", "agent": agent, "relay": relay or {}})


PROFILES = {
    "codex": ({"kind": "codex", "model": "m"}, {}, ["/v1/responses"],
              ["/v1/responses/resp_1", "/v1/responses/resp_1/cancel", "/v1/batches", "/v1/files", "/v1/models"]),
    "claude-code": ({"kind": "claude-code", "model": "m"}, {}, ["/v1/messages", "/v1/messages/count_tokens"],
                    ["/v1/messages/batches", "/v1/messages/batches/b1/results", "/v1/files"]),
    "gemini": ({"kind": "gemini", "model": "m"}, {},
               [f"/v1beta/models/gemini-2.5-pro:{m}" for m in ("generateContent", "streamGenerateContent", "countTokens")],
               ["/v1beta/models/gemini-2.5-pro:batchGenerateContent", "/v1beta/models/gemini-2.5-pro:embedContent",
                "/v1beta/models/gemini-2.5-pro:predictLongRunning", "/v1beta/models", "/v1beta/files", "/v1beta/cachedContents"]),
    "openai-compatible": ({"kind": "command", "image": "agent-base", "argv": ["true"]}, {"profile": "openai-compatible", "upstream": "http://127.0.0.1:9"},
                          ["/v1/chat/completions", "/v1/responses", "/v1/models"], ["/v1/batches", "/v1/files", "/v1/responses/r1"]),
}


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_each_provider_profile_allows_exactly_its_generation_endpoints(name):
    agent, relay, allowed, refused = PROFILES[name]
    environ = {"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k", "GEMINI_API_KEY": "k"}
    policy = relay_policy(spec_of(agent, relay), environ)
    assert policy is not None
    for path in allowed:
        assert any(path_allowed(path, entry) for entry in policy.allow_paths), path
        assert unmetered_reason(path, {"model": "m"}) == ""
    for path in refused:
        assert not any(path_allowed(path, entry) for entry in policy.allow_paths), path


def test_output_caps_are_read_from_every_providers_request_shape():
    assert output_cap({"max_tokens": 100}) == 100  # Anthropic Messages, Chat Completions
    assert output_cap({"max_output_tokens": 200}) == 200  # OpenAI Responses
    assert output_cap({"max_completion_tokens": 300, "max_tokens": 10}) == 300  # the larger of two
    assert output_cap({"generationConfig": {"maxOutputTokens": 400}}) == 400  # Gemini
    assert output_cap({"max_tokens": True}) is None and output_cap({"max_tokens": "9"}) is None
    assert output_cap({"model": "m"}) is None and output_cap([1]) is None and output_cap(None) is None


def test_a_reservation_is_the_body_bytes_plus_the_output_cap_or_the_default():
    body = json.dumps({"max_output_tokens": 50, "input": "x"}).encode()
    assert reservation(body, json.loads(body), default_output=32768) == len(body) + 50
    assert reservation(b'{"input": "x"}', {"input": "x"}, default_output=32768) == 14 + 32768
    assert reservation(b"", None, default_output=32768) == 0


def test_the_ledger_holds_reservations_until_they_are_settled_to_what_was_used():
    ledger = TokenLedger(limit=1000)
    assert ledger.reserve(600) and not ledger.reserve(500)  # 1100 would pass the limit while the first is in flight
    assert not ledger.never_fits(500)
    ledger.settle(600, 100)  # it used 100 of its 600
    assert ledger.reserve(500) and (ledger.counted, ledger.reserved) == (100, 500)
    ledger.settle(500, 900)  # a provider that ignored the cap is counted in full
    assert ledger.exhausted() and ledger.never_fits(1)
    unlimited = TokenLedger(limit=None)
    assert unlimited.reserve(10**12) and not unlimited.never_fits(10**12) and not unlimited.exhausted()
