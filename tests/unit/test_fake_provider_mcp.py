"""The fake provider's MCP turns: each API's answer calls the MCP server's tool under the name the CLI offered it, and
a CLI that offers none gets the turn's shell command instead. On loopback, without a CLI."""

from __future__ import annotations

import importlib.util
import json
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
TURNS = [{"mcp": "submit", "args": {"episodes": "0:4"}, "shell": "epg-session submit --episodes 0:4"}]
SHELL_RESPONSES = {"type": "function", "name": "exec_command", "parameters": {"properties": {"cmd": {}}}}
SHELL_FUNCTION = {"name": "run_shell_command", "parameters": {"properties": {"command": {}}}}


def _fake() -> Any:
    spec = importlib.util.spec_from_file_location("fake_provider_under_test", REPO / "tests" / "fakes" / "fake_provider.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def post(tmp_path: Path) -> Iterator[Any]:
    fake = _fake()
    server = fake.Server(0, fake.Script(TURNS), fake.JsonlLog(str(tmp_path / "log.jsonl")))
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def send(path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(f"http://127.0.0.1:{server.server_address[1]}{path}", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    yield send
    server.shutdown()
    server.server_close()


def test_codex_gets_a_call_of_the_tool_in_its_mcp_namespace(post):
    namespace = {"type": "namespace", "name": "mcp__epg", "tools": [{"type": "function", "name": "submit", "parameters": {}}]}

    answer = post("/v1/responses", {"model": "m", "input": [], "tools": [SHELL_RESPONSES, namespace]})

    (call,) = [item for item in answer["output"] if item["type"] == "function_call"]
    assert (call["namespace"], call["name"], json.loads(call["arguments"])) == ("mcp__epg", "submit", {"episodes": "0:4"})


def test_claude_code_gets_a_tool_use_of_mcp__epg__submit(post):
    tools = [{"name": "Bash", "input_schema": {"properties": {"command": {}}}}, {"name": "mcp__epg__submit", "input_schema": {}}]

    answer = post("/v1/messages", {"model": "m", "messages": [], "tools": tools})

    (use,) = [block for block in answer["content"] if block["type"] == "tool_use"]
    assert (use["name"], use["input"]) == ("mcp__epg__submit", {"episodes": "0:4"})


def test_gemini_cli_gets_a_function_call_of_mcp_epg_submit(post):
    tools = [{"functionDeclarations": [SHELL_FUNCTION, {"name": "mcp_epg_submit", "parametersJsonSchema": {}}]}]

    answer = post("/v1beta/models/m:generateContent", {"contents": [], "tools": tools})

    (call,) = [part["functionCall"] for part in answer["candidates"][0]["content"]["parts"] if "functionCall" in part]
    assert (call["name"], call["args"]) == ("mcp_epg_submit", {"episodes": "0:4"})


def test_qwen_code_gets_a_tool_call_of_mcp__epg__submit(post):
    tools = [{"type": "function", "function": SHELL_FUNCTION}, {"type": "function", "function": {"name": "mcp__epg__submit"}}]

    answer = post("/v1/chat/completions", {"model": "m", "messages": [], "tools": tools})

    (call,) = answer["choices"][0]["message"]["tool_calls"]
    assert (call["function"]["name"], json.loads(call["function"]["arguments"])) == ("mcp__epg__submit", {"episodes": "0:4"})


@pytest.mark.parametrize(("shell", "name"), [("bash", "epg_submit"), ("run_commands", "epg__submit")])
def test_opencode_and_cline_get_a_tool_call_of_the_servers_tool_by_their_name_for_it(post, shell, name):
    # opencode offers an MCP tool as SERVER_TOOL, Cline as SERVER__TOOL, each beside its own shell tool.
    tools = [{"type": "function", "function": {"name": shell, "parameters": {"properties": {"command": {}}}}},
             {"type": "function", "function": {"name": name, "parameters": {"properties": {"episodes": {"type": "string"}}}}}]

    answer = post("/v1/chat/completions", {"model": "m", "messages": [], "tools": tools})

    (call,) = answer["choices"][0]["message"]["tool_calls"]
    assert (call["function"]["name"], json.loads(call["function"]["arguments"])) == (name, {"episodes": "0:4"})


@pytest.mark.parametrize("name", ["epg_submit", "epg__submit", "mcp__epg__submit", "mcp_epg_submit"])
def test_every_clis_name_for_the_submit_tool_is_recognised_and_another_servers_is_not(name):
    fake = _fake()

    assert fake.is_mcp_tool(name, "submit")
    assert not fake.is_mcp_tool(name.replace("epg", "other"), "submit")
    assert not fake.is_mcp_tool(name, "finish")


def test_a_cli_without_the_mcp_server_gets_the_turns_shell_command(post):
    tools = [{"type": "function", "function": SHELL_FUNCTION}, {"type": "function", "function": {"name": "mcp__other__submit"}}]

    answer = post("/v1/chat/completions", {"model": "m", "messages": [], "tools": tools})

    (call,) = answer["choices"][0]["message"]["tool_calls"]
    assert (call["function"]["name"], json.loads(call["function"]["arguments"])) == ("run_shell_command", {"command": TURNS[0]["shell"]})
