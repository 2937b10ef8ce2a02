"""Real coding-agent CLIs that run on Node.js (Gemini CLI on the Gemini API, Qwen Code on the OpenAI Chat Completions
API) in their containers, driven through the Host's model relay by a fake provider."""

from __future__ import annotations

import json

import pytest
from cli_runs import SECRET, assert_finished_through_the_relay, assert_submitted_and_finished_through_mcp, fake_provider, run_cli_agent

from orchestrator.agents.cli_agent import PLACEHOLDER_KEY

# Where each provider takes its key: the relay sets it, raw or as a bearer token, in place of the CLI's placeholder.
CREDENTIAL_HEADERS = {"gemini": ("x-goog-api-key", SECRET), "qwen-code": ("authorization", f"Bearer {SECRET}")}


@pytest.mark.parametrize("kind", ["gemini", "qwen-code"])
def test_node_cli_agent_run_is_driven_through_the_relay_and_ends_finished(kind, tmp_path, scope, builder):
    with fake_provider(tmp_path) as (upstream, provider_log):
        manifest, run_dir = run_cli_agent({"kind": kind, "model": "fake-model"}, upstream, tmp_path, scope)
    assert_finished_through_the_relay(manifest, run_dir, provider_log)
    assert_submitted_and_finished_through_mcp(run_dir, provider_log)

    # The CLI's JSON event stream is kept: every line of the agent's stdout is a JSON event.
    lines = [line for line in (run_dir / "agent" / "stdout.log").read_text().splitlines() if line.strip()]
    assert lines and all(isinstance(json.loads(line), dict) for line in lines), lines[:5]

    # Every model request reached the provider with the Host's credential, once, and without the CLI's placeholder.
    name, value = CREDENTIAL_HEADERS[kind]
    requests = [json.loads(line) for line in provider_log.read_text().splitlines() if '"dir": "request"' in line]
    for request in requests:
        headers = [(key.lower(), text) for key, text in request["headers"].items()]
        assert [text for key, text in headers if key == name] == [value], headers
        assert PLACEHOLDER_KEY not in json.dumps(headers)
