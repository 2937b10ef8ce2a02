"""The Gemini CLI and Qwen Code agent kinds without a container: spec, relay defaults, invocation, settings, token counts."""

from __future__ import annotations

import json

import pytest

from orchestrator.agents.cli_agent import PLACEHOLDER_KEY, gemini_command, qwen_command
from orchestrator.relay.usage import count_tokens
from orchestrator.run.agent_container import agent_command
from orchestrator.run.relay_setup import AGENT_IMAGES, RelayConfigError, relay_policy
from orchestrator.run.spec import GeminiAgent, QwenCodeAgent, RunSpec


def spec_of(agent: dict) -> RunSpec:
    return RunSpec.model_validate({"benchmark": "CartPole-v1", "agent": agent})


@pytest.mark.parametrize("kind, cls", [("gemini", GeminiAgent), ("qwen-code", QwenCodeAgent)])
def test_a_node_cli_kind_needs_a_model_and_nothing_else(kind, cls):
    assert isinstance(spec_of({"kind": kind, "model": "m"}).agent, cls)
    with pytest.raises(ValueError):
        spec_of({"kind": kind})
    with pytest.raises(ValueError):
        spec_of({"kind": kind, "model": "m", "effort": "low"})


def test_gemini_relay_sends_the_key_raw_in_x_goog_api_key_below_v1beta_models():
    policy = relay_policy(spec_of({"kind": "gemini", "model": "gemini-2.5-pro"}), {"GEMINI_API_KEY": "k1"})
    assert policy.upstream == "https://generativelanguage.googleapis.com"
    assert policy.credential.headers() == {"x-goog-api-key": "k1"}
    assert policy.allow_paths == ("/v1beta/models/*:generateContent", "/v1beta/models/*:streamGenerateContent",
                                  "/v1beta/models/*:countTokens")
    assert AGENT_IMAGES["gemini"] == "agent-gemini"


def test_qwen_relay_sends_a_bearer_token_to_an_openai_compatible_chat_completions_upstream():
    policy = relay_policy(spec_of({"kind": "qwen-code", "model": "qwen3-coder-plus"}), {"DASHSCOPE_API_KEY": "k2"})
    assert policy.upstream == "https://dashscope-intl.aliyuncs.com/compatible-mode"
    assert policy.credential.headers() == {"Authorization": "Bearer k2"} and policy.allow_paths == ("/v1/chat/completions",)
    assert AGENT_IMAGES["qwen-code"] == "agent-qwen-code"
    with pytest.raises(RelayConfigError, match="DASHSCOPE_API_KEY"):
        relay_policy(spec_of({"kind": "qwen-code", "model": "m"}), {})


@pytest.mark.parametrize("kind", ["gemini", "qwen-code"])
def test_the_agent_container_runs_the_launcher_with_the_kind_and_model(kind):
    assert agent_command(spec_of({"kind": kind, "model": "m-1"})) == (
        "python3", "-m", "orchestrator.agents.cli_agent", "--cli", kind, "--model", "m-1", "--workspace", "/workspace")


def test_gemini_runs_headless_with_its_event_stream_against_the_bridge_and_nothing_else_on(tmp_path):
    argv, environment = gemini_command("gm", 8765, tmp_path)
    assert argv[:3] == ["gemini", "-p", argv[2]] and "TASK.md" in argv[2]
    assert argv[3:] == ["--output-format", "stream-json", "--approval-mode", "yolo", "--skip-trust", "-m", "gm"]
    assert environment["GOOGLE_GEMINI_BASE_URL"] == "http://127.0.0.1:8765" and environment["GEMINI_API_KEY"] == PLACEHOLDER_KEY
    settings = json.loads((tmp_path / ".gemini" / "settings.json").read_text())
    assert settings["privacy"] == {"usageStatisticsEnabled": False} and settings["telemetry"] == {"enabled": False}
    assert settings["general"]["enableAutoUpdate"] is False and settings["ide"] == {"enabled": False}
    assert settings["security"]["auth"] == {"selectedType": "gemini-api-key"}


def test_qwen_runs_headless_with_its_event_stream_on_an_openai_provider_at_the_bridge(tmp_path):
    argv, environment = qwen_command("qm", 9000, tmp_path)
    assert argv[:-1] == ["qwen", "--output-format", "stream-json", "--approval-mode", "yolo", "--auth-type", "openai", "-m", "qm"]
    assert "TASK.md" in argv[-1]
    assert environment["OPENAI_BASE_URL"] == "http://127.0.0.1:9000/v1" and environment["OPENAI_API_KEY"] == PLACEHOLDER_KEY
    settings = json.loads((tmp_path / ".qwen" / "settings.json").read_text())
    assert settings["model"] == {"name": "qm"} and settings["security"]["auth"] == {"selectedType": "openai"}
    assert settings["privacy"] == {"usageStatisticsEnabled": False} and settings["telemetry"] == {"enabled": False}


def test_gemini_usage_counts_once_though_every_streamed_chunk_repeats_it():
    chunk = {"candidates": [{"content": {"role": "model", "parts": [{"text": "a"}]}}]}
    stream = b"".join(b"data: " + json.dumps(dict(chunk, usageMetadata={"totalTokenCount": n})).encode() + b"\r\n\r\n"
                      for n in (40, 41, 45))
    assert count_tokens(stream) == 45
    assert count_tokens(json.dumps(dict(chunk, usageMetadata={"totalTokenCount": 12})).encode()) == 12


def test_chat_completions_usage_is_read_from_the_last_chunk():
    stream = (b'data: {"choices": [{"delta": {"content": "hi"}}]}\n\n'
              b'data: {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}\n\n'
              b"data: [DONE]\n\n")
    assert count_tokens(stream) == 7
