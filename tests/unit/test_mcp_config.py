"""Each MCP-capable coding-agent CLI gets the Host API's MCP server in its own configuration, and the task text
describes the tools; without a container."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from orchestrator.agents.cli_agent import (
    MCP_COMMAND,
    MCP_KINDS,
    MCP_PROMPT,
    MCP_SERVER,
    MCP_TOOL_TIMEOUT_S,
    PROMPT,
    claude_command,
    cline_command,
    codex_command,
    gemini_command,
    opencode_command,
    qwen_command,
)
from orchestrator.images.recipes import AGENT_FILES, IMAGES, agent_base_recipe
from orchestrator.kernel.ports import BenchmarkInfo
from orchestrator.kernel.session import Budget
from orchestrator.run.instructions import render_instructions

WORKSPACE = Path("/workspace")
SOCKET, TOKEN = "/epg/host/api.sock", "tok-" + "ab" * 16
SERVER = {"command": MCP_COMMAND, "args": ["--workspace", "/workspace"], "env": {"EPG_HOST_API": SOCKET, "EPG_SESSION_TOKEN": TOKEN}}


@pytest.fixture(autouse=True)
def session_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EPG_HOST_API", SOCKET)
    monkeypatch.setenv("EPG_SESSION_TOKEN", TOKEN)


def test_the_mcp_capable_kinds_are_the_four_older_ones_opencode_and_cline():
    assert MCP_KINDS == ("codex", "claude-code", "gemini", "qwen-code", "opencode", "cline")


def test_codex_gets_the_server_in_config_toml_with_its_environment_and_a_submit_long_timeout(tmp_path):
    argv, environment = codex_command("m", "low", 8765, tmp_path, WORKSPACE)

    config = tomllib.loads((tmp_path / ".codex" / "config.toml").read_text())
    assert config["mcp_servers"] == {MCP_SERVER: {**SERVER, "required": True, "startup_timeout_sec": 60,
                                                  "tool_timeout_sec": MCP_TOOL_TIMEOUT_S}}
    assert config["model_providers"]["epg_relay"]["base_url"] == "http://127.0.0.1:8765/v1"  # the rest is unchanged
    assert argv[-1] == MCP_PROMPT and environment["CODEX_HOME"] == str(tmp_path / ".codex")


def test_claude_code_gets_a_strict_mcp_config_file_and_a_tool_timeout(tmp_path):
    argv, environment = claude_command("m", None, 8765, tmp_path, WORKSPACE)

    path = Path(argv[argv.index("--mcp-config") + 1])
    assert path.parent == tmp_path and "--strict-mcp-config" in argv and "--dangerously-skip-permissions" in argv
    assert json.loads(path.read_text()) == {"mcpServers": {MCP_SERVER: {"type": "stdio", **SERVER}}}
    assert argv[argv.index("-p") + 1] == MCP_PROMPT
    assert environment["MCP_TOOL_TIMEOUT"] == str(MCP_TOOL_TIMEOUT_S * 1000)
    assert environment["ENABLE_TOOL_SEARCH"] == "false"  # the tools offered at once, not deferred behind ToolSearch


@pytest.mark.parametrize(("command", "directory"), [(gemini_command, ".gemini"), (qwen_command, ".qwen")])
def test_gemini_cli_and_qwen_code_get_the_server_in_settings_json_trusted(tmp_path, command, directory):
    argv, _ = command("m", 8765, tmp_path, WORKSPACE)

    settings = json.loads((tmp_path / directory / "settings.json").read_text())
    assert settings["mcpServers"] == {MCP_SERVER: {**SERVER, "trust": True, "timeout": MCP_TOOL_TIMEOUT_S * 1000}}
    assert settings["telemetry"] == {"enabled": False}  # the quiet settings stay
    assert MCP_PROMPT in argv and PROMPT not in argv


def test_qwen_code_offers_the_tools_at_once_not_behind_its_tool_search(tmp_path):
    qwen_command("m", 8765, tmp_path, WORKSPACE)

    settings = json.loads((tmp_path / ".qwen" / "settings.json").read_text())
    assert settings["tools"]["visible"] == ["mcp__epg__status", "mcp__epg__submit", "mcp__epg__feedback", "mcp__epg__finish"]


def test_opencode_gets_the_server_as_a_local_server_in_opencode_json_its_tools_allowed(tmp_path):
    argv, environment = opencode_command("m", 8765, tmp_path, WORKSPACE)

    config = json.loads(Path(environment["OPENCODE_CONFIG"]).read_text())
    assert config["mcp"] == {MCP_SERVER: {"type": "local", "command": [MCP_COMMAND, "--workspace", "/workspace"],
                                          "environment": SERVER["env"], "enabled": True,
                                          "timeout": MCP_TOOL_TIMEOUT_S * 1000}}
    # opencode names the tools epg_status, epg_submit, ...: all allowed, web fetches still denied.
    assert config["permission"] == {"edit": "allow", "bash": "allow", "webfetch": "deny", "epg_*": "allow"}
    assert config["provider"]["epg"]["options"]["baseURL"] == "http://127.0.0.1:8765/v1"  # the rest is unchanged
    assert argv[-1] == MCP_PROMPT


def test_cline_gets_the_server_in_its_mcp_settings_file_beside_its_providers(tmp_path):
    argv, environment = cline_command("m", 8765, tmp_path, WORKSPACE)

    settings = tmp_path / ".cline" / "data" / "settings"
    assert json.loads((settings / "cline_mcp_settings.json").read_text()) == {
        "mcpServers": {MCP_SERVER: {"type": "stdio", **SERVER, "disabled": False, "timeout": MCP_TOOL_TIMEOUT_S}}}
    assert MCP_TOOL_TIMEOUT_S <= 3600  # Cline caps a server's timeout (seconds) at an hour
    assert (settings / "providers.json").is_file() and environment == {}
    assert argv[argv.index("--auto-approve") + 1] == "true"  # every tool, the MCP server's too, runs unasked
    assert argv[-1] == MCP_PROMPT


def test_without_a_workspace_no_cli_gets_an_mcp_server_and_the_prompt_names_the_shell_command(tmp_path):
    codex, _ = codex_command("m", "low", 8765, tmp_path)
    claude, _ = claude_command("m", None, 8765)
    gemini, _ = gemini_command("m", 8765, tmp_path)
    qwen, _ = qwen_command("m", 8765, tmp_path)
    opencode, environment = opencode_command("m", 8765, tmp_path)
    cline, _ = cline_command("m", 8765, tmp_path)

    assert "mcp_servers" not in tomllib.loads((tmp_path / ".codex" / "config.toml").read_text())
    assert "--mcp-config" not in claude
    assert "mcpServers" not in json.loads((tmp_path / ".gemini" / "settings.json").read_text())
    assert "mcpServers" not in json.loads((tmp_path / ".qwen" / "settings.json").read_text())
    config = json.loads(Path(environment["OPENCODE_CONFIG"]).read_text())
    assert "mcp" not in config and "epg_*" not in config["permission"]
    assert not (tmp_path / ".cline" / "data" / "settings" / "cline_mcp_settings.json").exists()
    assert all(PROMPT in argv and MCP_PROMPT not in argv for argv in (codex, claude, gemini, qwen, opencode, cline))


def test_the_prompt_names_the_tools_and_keeps_the_shell_command():
    assert all(f"`{tool}`" in MCP_PROMPT for tool in ("status", "submit", "feedback", "finish"))
    assert "epg-session" in MCP_PROMPT


def test_agent_base_carries_the_server_its_launcher_and_the_mcp_sdk():
    recipe = agent_base_recipe()

    assert recipe.context_files[MCP_COMMAND] == IMAGES / "agent-base" / MCP_COMMAND
    assert "orchestrator.hostclient.mcp_server" in (IMAGES / "agent-base" / MCP_COMMAND).read_text()
    assert "orchestrator/hostclient/mcp_server.py" in AGENT_FILES
    assert "orchestrator.hostclient.mcp_server" in recipe.build_args["SMOKE"]
    assert any(pin.startswith("mcp==") for pin in recipe.requirements)


def _task(mcp_tools: bool) -> str:
    benchmark = BenchmarkInfo(id="CartPole-v1", description="Balance.", observation_space=None, action_space=None, horizon=500,
                              primary_metric="mean_return", direction="maximize", parameters={}, failure_return=0.0)
    budget = Budget(episodes=8, max_submissions=2, pool_size=8, max_candidates=1)
    return render_instructions(benchmark, budget, mcp_tools=mcp_tools)


def test_the_task_text_describes_the_tools_where_they_are_configured_and_the_command_elsewhere():
    with_tools, without = _task(True), _task(False)

    assert "## Tools (the MCP server `epg`)" in with_tools and "## Commands" not in with_tools
    assert all(f"- `{tool}`" in with_tools for tool in ("status", "submit", "feedback", "finish"))
    assert "epg-session submit" in with_tools  # the shell command stays available
    assert "## Commands (`epg-session`, prints JSON)" in without and "MCP" not in without
