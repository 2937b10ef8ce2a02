"""The opencode, Aider, mini-SWE-agent and Cline agent kinds without a container: spec, relay defaults, invocation, config,
images, and the fake provider's side of their protocols."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from orchestrator.agents.cli_agent import (
    AIDER_TURNS,
    MCP_TOOL_TIMEOUT_S,
    PLACEHOLDER_KEY,
    SKILL_DIRS,
    aider_command,
    cline_command,
    link_skills,
    mini_swe_agent_command,
    opencode_command,
)
from orchestrator.images.pins import parse_lock
from orchestrator.images.recipes import AGENT_BASE, IMAGES, cli_agent_recipes
from orchestrator.run.agent_container import agent_command
from orchestrator.run.relay_setup import AGENT_IMAGES, RelayConfigError, relay_policy
from orchestrator.run.spec import AiderAgent, ClineAgent, MiniSweAgent, OpencodeAgent, RunSpec

KINDS = [("opencode", OpencodeAgent), ("aider", AiderAgent), ("mini-swe-agent", MiniSweAgent), ("cline", ClineAgent)]
REPO = Path(__file__).resolve().parents[2]


def spec_of(agent: dict) -> RunSpec:
    return RunSpec.model_validate({"benchmark": "CartPole-v1", "agent": agent})


@pytest.mark.parametrize("kind, cls", KINDS)
def test_a_new_cli_kind_needs_a_model_and_nothing_else(kind, cls):
    assert isinstance(spec_of({"kind": kind, "model": "m"}).agent, cls)
    with pytest.raises(ValueError):
        spec_of({"kind": kind})
    with pytest.raises(ValueError):
        spec_of({"kind": kind, "model": "m", "effort": "low"})


@pytest.mark.parametrize("kind, _", KINDS)
def test_a_new_cli_kind_sends_the_openai_key_as_a_bearer_token_to_chat_completions_only(kind, _):
    policy = relay_policy(spec_of({"kind": kind, "model": "gpt-x"}), {"OPENAI_API_KEY": "k3"})
    assert policy.upstream == "https://api.openai.com"
    assert policy.credential.headers() == {"Authorization": "Bearer k3"} and policy.allow_paths == ("/v1/chat/completions",)
    assert AGENT_IMAGES[kind] == f"agent-{kind}"
    with pytest.raises(RelayConfigError, match="OPENAI_API_KEY"):
        relay_policy(spec_of({"kind": kind, "model": "m"}), {})


@pytest.mark.parametrize("kind, _", KINDS)
def test_the_agent_container_runs_the_launcher_with_the_new_kind_and_model(kind, _):
    assert agent_command(spec_of({"kind": kind, "model": "m-1"})) == (
        "python3", "-m", "orchestrator.agents.cli_agent", "--cli", kind, "--model", "m-1", "--workspace", "/workspace")


def test_opencode_runs_headless_with_its_event_stream_on_an_openai_compatible_provider_at_the_bridge(tmp_path):
    argv, environment = opencode_command("om", 8765, tmp_path)
    assert argv[:-1] == ["opencode", "run", "--format", "json", "-m", "epg/om"] and "TASK.md" in argv[-1]
    config = json.loads(Path(environment["OPENCODE_CONFIG"]).read_text())
    assert Path(environment["OPENCODE_CONFIG"]) == tmp_path / ".config" / "opencode" / "opencode.json"
    provider = config["provider"]["epg"]
    assert provider["npm"] == "@ai-sdk/openai-compatible"  # bundled in the executable: nothing is installed at run time
    assert provider["options"] == {"baseURL": "http://127.0.0.1:8765/v1", "apiKey": PLACEHOLDER_KEY}
    assert list(provider["models"]) == ["om"] and config["model"] == config["small_model"] == "epg/om"
    assert config["permission"] == {"edit": "allow", "bash": "allow", "webfetch": "deny"}
    assert config["autoupdate"] is False and config["share"] == "disabled"
    for switch in ("AUTOUPDATE", "MODELS_FETCH", "DEFAULT_PLUGINS", "LSP_DOWNLOAD", "SHARE"):
        assert environment[f"OPENCODE_DISABLE_{switch}"] == "1"


def test_aider_is_given_the_task_then_yes_to_everything_and_keeps_its_histories_out_of_the_workspace(tmp_path):
    argv, environment, feed = aider_command("am", 9000, tmp_path)
    assert argv[:3] == ["aider", "--model", "openai/am"]
    for flag in ("--no-git", "--no-auto-commits", "--no-check-update", "--analytics-disable", "--no-fancy-input"):
        assert flag in argv
    assert argv[argv.index("--edit-format") + 1] == "diff"  # the format whose answers carry shell commands
    assert argv[argv.index("--map-tokens") + 1] == "0"
    for option in ("--chat-history-file", "--input-history-file"):
        assert Path(argv[argv.index(option) + 1]).parent == tmp_path / ".aider"
    lines = feed.splitlines()
    assert "TASK.md" in lines[0] and lines[1:] == ["yes"] * AIDER_TURNS
    assert environment["OPENAI_API_BASE"] == "http://127.0.0.1:9000/v1" and environment["OPENAI_API_KEY"] == PLACEHOLDER_KEY
    assert environment["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"


def test_mini_swe_agent_runs_without_confirmation_or_cost_limit_and_exits_when_done(tmp_path):
    argv, environment = mini_swe_agent_command("mm", 9001, tmp_path)
    assert argv[0] == "mini" and argv[argv.index("--model") + 1] == "openai/mm"
    assert {"--yolo", "--exit-immediately"} <= set(argv) and argv[argv.index("--cost-limit") + 1] == "0"
    assert "TASK.md" in argv[argv.index("--task") + 1]
    # its default configuration, with a shell command's time limit that lets a submit finish
    configs = [argv[i + 1] for i, word in enumerate(argv) if word == "-c"]
    assert configs == ["mini.yaml", f"environment.timeout={MCP_TOOL_TIMEOUT_S}"] and MCP_TOOL_TIMEOUT_S >= 3600
    assert Path(argv[argv.index("--output") + 1]).parent == tmp_path / ".mini-swe-agent"
    assert environment["OPENAI_API_BASE"] == "http://127.0.0.1:9001/v1" and environment["OPENAI_API_KEY"] == PLACEHOLDER_KEY
    assert environment["MSWEA_CONFIGURED"] == "true" and environment["MSWEA_COST_TRACKING"] == "ignore_errors"


def test_cline_runs_with_its_json_messages_and_tools_approved_on_an_openai_compatible_provider_at_the_bridge(tmp_path):
    argv, environment = cline_command("cm", 9002, tmp_path)
    assert argv[:-1] == ["cline", "--json", "--auto-approve", "true", "-P", "openai-compatible", "-m", "cm"]
    assert "TASK.md" in argv[-1] and environment == {}
    providers = json.loads((tmp_path / ".cline" / "data" / "settings" / "providers.json").read_text())
    assert providers["lastUsedProvider"] == "openai-compatible"
    assert providers["providers"]["openai-compatible"]["settings"] == {
        "provider": "openai-compatible", "apiKey": PLACEHOLDER_KEY, "model": "cm", "baseUrl": "http://127.0.0.1:9002/v1"}
    assert providers["providers"]["openai-compatible"]["updatedAt"]  # without it Cline drops the key and the URL


def test_skills_are_linked_for_opencode_and_cline_and_not_for_the_clis_that_read_none(tmp_path):
    mounted = tmp_path / "skills"
    (mounted / "tuning").mkdir(parents=True)
    assert link_skills("opencode", tmp_path / "home", mounted) == [tmp_path / "home" / ".config/opencode/skills/tuning"]
    assert link_skills("cline", tmp_path / "home", mounted) == [tmp_path / "home" / ".cline/skills/tuning"]
    assert link_skills("aider", tmp_path / "home", mounted) == [] and SKILL_DIRS["mini-swe-agent"] == ()


def test_the_new_images_share_the_agent_base_and_pin_every_wheel():
    recipes = {recipe.name: recipe for recipe in cli_agent_recipes()}
    opencode, cline = recipes["agent-opencode"], recipes["agent-cline"]
    assert opencode.parent == AGENT_BASE and opencode.npm[0].package == "opencode-linux-x64@1.18.33"
    assert cline.parent == AGENT_BASE and cline.npm[0].package == "@cline/cli-linux-x64@3.0.65"
    assert cline.npm[0].member == "package/bin/cline" and cline.build_args == {"CLI": "cline"}
    for name, package, command in (("agent-aider", "aider-chat", "aider"), ("agent-mini-swe-agent", "mini-swe-agent", "mini")):
        recipe = recipes[name]
        assert recipe.parent == AGENT_BASE and recipe.build_args == {"CLI": command}
        assert recipe.dockerfile == IMAGES / "agent-python-cli" / "Dockerfile"
        assert all("==" in pin for pin in recipe.requirements)
        assert any(pin.startswith(f"{package}==") for pin in recipe.requirements)
        assert recipe.labels["org.evopolicygym.cli"].startswith(package + " ")
    locked = parse_lock((IMAGES / "agent-python-cli" / "aider.lock").read_text(), "aider.lock")
    assert "litellm==1.81.10" in locked and len(locked) == len(set(locked))


def _fake():
    spec = importlib.util.spec_from_file_location("fake_provider_new_kinds", REPO / "tests" / "fakes" / "fake_provider.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_fake_provider_calls_the_bash_tool_of_opencode_and_mini_swe_agent():
    fake = _fake()
    body = {"tools": [{"type": "function", "function": {"name": "bash", "parameters": {
        "type": "object", "properties": {"command": {"type": "string"}, "description": {"type": "string"}}}}}],
        "messages": [{"role": "user", "content": "go"}]}
    tool = fake.chat_find_shell_tool(body)
    assert tool["name"] == "bash"
    call = fake.chat_completion(fake.chat_chunks(body, {"shell": "ls"}, tool, "c1", 0))["choices"][0]["message"]["tool_calls"][0]
    assert call["function"]["name"] == "bash" and json.loads(call["function"]["arguments"])["command"] == "ls"


def test_the_fake_provider_gives_cline_its_command_as_a_list():
    fake = _fake()
    body = {"tools": [{"type": "function", "function": {"name": "run_commands", "parameters": {
        "type": "object", "properties": {"commands": {"type": "array", "items": {"type": "string"}}}}}}]}
    tool = fake.chat_find_shell_tool(body)
    call = fake.chat_completion(fake.chat_chunks(body, {"shell": "ls"}, tool, "c2", 0))["choices"][0]["message"]["tool_calls"][0]
    assert call["function"]["name"] == "run_commands" and json.loads(call["function"]["arguments"]) == {"commands": ["ls"]}


def test_the_fake_provider_answers_aider_with_marked_turns_and_shell_blocks():
    fake = _fake()
    system = {"role": "system", "content": "Act as an expert software developer. Use *SEARCH/REPLACE* blocks."}
    first = {"messages": [system, {"role": "user", "content": "do it"}]}
    assert fake.text_client(first) and not fake.text_client({"messages": [{"role": "system", "content": "summarize"}]})
    assert fake.text_turn_index(first) == 0
    answer = fake.text_answer({"shell": "epg-session status", "text": "Reading."})
    assert answer.startswith(fake.TEXT_TURN_MARK) and "```bash\nepg-session status\n```" in answer
    later = {"messages": [system, {"role": "user", "content": "do it"}, {"role": "assistant", "content": answer},
                          {"role": "user", "content": "output"}, {"role": "assistant", "content": "Ok."}]}
    assert fake.text_turn_index(later) == 1
