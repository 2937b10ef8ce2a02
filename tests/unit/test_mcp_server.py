"""The Host API's MCP tools against a real Host API server (the gRPC server over a RunHost and a fake sandbox).

The SDK's client talks to the server in process, and once over stdio to `python -m orchestrator.hostclient.mcp_server`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult
from test_host_api import CALL_TIMEOUT_S, TOKEN, Served, expected_score, serve_run  # noqa: F401 (serve_run: a fixture)

from orchestrator.hostclient.client import SessionClient
from orchestrator.hostclient.mcp_server import RESULT_MODELS, build_server

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def served(serve_run: Callable[..., Served]) -> Served:  # noqa: F811 (the fixture imported above)
    return serve_run()


def calls(served: Served, *requests: tuple[str, dict[str, Any]]) -> list[CallToolResult]:
    """Call each (tool, arguments) in order through an in-process MCP client of the server for served."""
    def client() -> SessionClient:
        return SessionClient(socket_path=str(served.socket_path), token=TOKEN, timeout_s=CALL_TIMEOUT_S)

    async def go() -> list[CallToolResult]:
        async with Client(build_server(client, served.records.workspace)) as session:
            return [await session.call_tool(name, arguments) for name, arguments in requests]

    return anyio.run(go)


def error_of(result: CallToolResult) -> dict[str, str]:
    assert result.is_error, result
    assert result.structured_content is None
    return json.loads(result.content[0].text)["error"]


def test_the_four_tools_are_listed_with_typed_schemas_and_descriptions(served: Served):
    async def go() -> list[Any]:
        async with Client(build_server(lambda: served.new_client(), served.records.workspace)) as session:
            return (await session.list_tools()).tools

    tools = {tool.name: tool for tool in anyio.run(go)}

    assert sorted(tools) == ["feedback", "finish", "status", "submit"]
    submit = tools["submit"].input_schema["properties"]
    assert (submit["episodes"]["type"], submit["count"]["type"], submit["count"]["minimum"]) == ("string", "integer", 0)
    assert tools["finish"].input_schema["properties"]["ids"]["type"] == "array"
    assert tools["finish"].input_schema["required"] == ["ids"]
    assert tools["feedback"].input_schema["required"] == ["submission_id"]
    assert all(tool.output_schema is None for tool in tools.values())  # a CLI would check a refusal against one
    assert all(len(tool.description or "") > 100 for tool in tools.values())
    assert "0:8,12,20:24" in (tools["submit"].description or "")


def test_submit_through_the_tool_returns_the_receipt_and_the_host_records_the_submission(served: Served):
    digest = served.digest()

    submitted, status, feedback = calls(served, ("submit", {"episodes": "0:3,5"}), ("status", {}),
                                        ("feedback", {"submission_id": "s0001"}))

    score = expected_score(digest, [0, 1, 2, 5])
    receipt = {"submission_id": "s0001", "program_digest": digest, "score": score, "episodes_used": 4,
               "episodes_left": 6, "submissions_left": 2, "policy_failures": 0,
               "feedback_path": "feedback/s0001/feedback.json"}
    assert not submitted.is_error
    assert submitted.structured_content == receipt
    for result, name in ((submitted, "submit"), (status, "status"), (feedback, "feedback")):
        assert RESULT_MODELS[name].model_validate(result.structured_content).model_dump() == result.structured_content
    assert json.loads(submitted.content[0].text) == receipt
    assert served.sandbox.calls == [(i, digest) for i in (0, 1, 2, 5)]
    assert [(e["type"], e["id"]) for e in served.events()] == [("submission_admitted", "s0001"), ("submission_completed", "s0001")]
    assert status.structured_content["episodes_left"] == 6
    assert [(s["id"], s["selector"], s["score"]) for s in status.structured_content["submissions"]] == [("s0001", "0:3,5", score)]
    published = json.loads((served.records.workspace / "feedback" / "s0001" / "feedback.json").read_text())
    assert feedback.structured_content == published
    assert [e["index"] for e in feedback.structured_content["episodes"]] == [0, 1, 2, 5]


def test_count_submits_the_first_indices_of_the_pool(served: Served):
    (submitted,) = calls(served, ("submit", {"count": 3}))

    assert submitted.structured_content["episodes_used"] == 3
    assert served.events()[0]["indices"] == [0, 1, 2]


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        pytest.param({"episodes": "4:2"}, "invalid_selector", id="empty-range"),
        pytest.param({"episodes": "0:3,2"}, "invalid_selector", id="overlapping"),
        pytest.param({"episodes": "0:99"}, "index_out_of_range", id="past-the-pool"),
        pytest.param({"episodes": "0:7"}, "too_many_episodes", id="more-than-per-submission"),
        pytest.param({}, "invalid_selector", id="neither-episodes-nor-count"),
        pytest.param({"episodes": "0:2", "count": 2}, "invalid_selector", id="both"),
        pytest.param({"episodes": 4}, "malformed_request", id="episodes-not-a-string"),
        pytest.param({"count": -1}, "malformed_request", id="negative-count"),
        pytest.param({"count": "all"}, "malformed_request", id="count-not-an-integer"),
    ],
)
def test_a_malformed_submit_is_a_tool_error_with_its_code_and_costs_nothing(served: Served, arguments: dict[str, Any], code: str):
    before = served.snapshot()

    (result,) = calls(served, ("submit", arguments))

    assert error_of(result)["code"] == code
    assert served.snapshot() == before


def test_a_malformed_argument_names_its_field(served: Served):
    (result,) = calls(served, ("submit", {"episodes": ["0:2"]}))

    assert error_of(result)["message"].startswith("episodes: ")


def test_finish_through_the_tool_takes_the_candidates(served: Served):
    submitted, wrong, finished, again = calls(served, ("submit", {"episodes": "0:2"}), ("finish", {"ids": ["s0009"]}),
                                              ("finish", {"ids": ["s0001"]}), ("finish", {"ids": ["s0001"]}))

    assert submitted.structured_content["submission_id"] == "s0001"
    assert error_of(wrong)["code"] == "unknown_submission"
    assert finished.structured_content == {"candidates": ["s0001"]}
    assert error_of(again)["code"] == "already_finished"
    assert served.event_types()[-1] == "finished"


@pytest.mark.parametrize(
    ("name", "arguments", "code"),
    [
        pytest.param("finish", {"ids": []}, "no_candidates", id="finish-no-ids"),
        pytest.param("finish", {"ids": "s0001"}, "malformed_request", id="finish-ids-not-a-list"),
        pytest.param("finish", {}, "malformed_request", id="finish-without-ids"),
        pytest.param("feedback", {"submission_id": "s0001"}, "unknown_submission", id="feedback-of-no-submission"),
        pytest.param("feedback", {}, "malformed_request", id="feedback-without-id"),
        pytest.param("shell", {"command": "ls"}, "unknown_method", id="unknown-tool"),
    ],
)
def test_other_refused_calls_are_tool_errors_with_their_codes(served: Served, name: str, arguments: dict[str, Any], code: str):
    before = served.snapshot()

    (result,) = calls(served, (name, arguments))

    assert error_of(result)["code"] == code
    assert served.snapshot() == before


def test_a_wrong_token_reaches_the_agent_as_unauthenticated(served: Served):
    async def go() -> CallToolResult:
        server = build_server(lambda: served.new_client(token="tok-wrong"), served.records.workspace)
        async with Client(server) as session:
            return await session.call_tool("status", {})

    assert error_of(anyio.run(go))["code"] == "unauthenticated"


def test_the_module_serves_the_tools_over_stdio(served: Served, tmp_path: Path):
    environment = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "sdk")]),
        "EPG_HOST_API": str(served.socket_path),
        "EPG_SESSION_TOKEN": TOKEN,
    }
    command = StdioServerParameters(command=sys.executable, args=["-m", "orchestrator.hostclient.mcp_server", "--workspace",
                                                                  str(served.records.workspace)], env=environment, cwd=str(tmp_path))

    async def go() -> tuple[list[str], CallToolResult, CallToolResult]:
        async with Client(command, read_timeout_seconds=60) as session:
            names = sorted(tool.name for tool in (await session.list_tools()).tools)
            return names, await session.call_tool("submit", {"episodes": "1:3"}), await session.call_tool("submit", {"episodes": "x"})

    names, submitted, refused = anyio.run(go)

    assert names == ["feedback", "finish", "status", "submit"]
    assert submitted.structured_content["submission_id"] == "s0001"
    assert served.events()[0]["indices"] == [1, 2]
    assert error_of(refused)["code"] == "invalid_selector"
