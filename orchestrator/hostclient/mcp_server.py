"""The Host API as MCP tools (status, submit, feedback, finish), served over stdio to a coding-agent CLI.

`epg-session-mcp` (`python3 -m orchestrator.hostclient.mcp_server`) runs inside the agent container, started by the
CLI as the MCP server its configuration names. Each tool calls the Host API through `SessionClient`, exactly as
`epg-session` does, and returns the Host's answer both as structured content and as the same JSON in a text block.
The tools declare input schemas and no output schema: Gemini CLI 0.61.0's MCP client checks a result against the
output schema even when it is an error (`isError`), so a refusal would reach the model as a schema mismatch instead
of its code. The models below (`RESULT_MODELS`) state the results' shapes; a unit test checks them against the Host.

A refusal is a tool error (`isError`) whose text is the JSON that `epg-session` prints for it, `{"error": {"code":
CODE, "message": MESSAGE}}`, CODE one of the Host API's error codes (e.g. `invalid_selector`, `budget_exhausted`)
or, for a call that did not reach the Host, the gRPC status in lower case (`unavailable`). Arguments that do not fit
a tool's input schema are refused by the MCP SDK before the Host is called, as `malformed_request` (one `field:
reason` per line), and an unknown tool as `unknown_method`.

Imports: the standard library, pydantic, mcp, and the Host API client.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, InputRequiredResult, TextContent
from pydantic import BaseModel, Field, ValidationError

from orchestrator.hostclient.client import HostApiError, SessionClient

SERVER_NAME = "epg"
FEEDBACK_READ_LIMIT = 4 * 1024 * 1024  # bytes of one feedback.json the feedback tool returns; past it, a refusal
INSTRUCTIONS = (
    "Tools of the Host of this EvoPolicyGym Run: check the budget (status), evaluate program/ on Episodes of the "
    "hidden train pool (submit), read a Submission's Feedback (feedback), and hand back your best Submissions "
    "(finish). A refused call returns an error whose text is {\"error\": {\"code\": ..., \"message\": ...}}; "
    "a refused request costs nothing."
)
STATUS_DESCRIPTION = (
    "The budget of this Run: Episodes and Submissions used and left, the Episode pool's size (indices 0 to "
    "pool_size - 1), the most Episodes one Submission may use (0: no limit), the finish policy, the most candidates "
    "finish takes, and every Submission so far with its selector, state, score and Feedback path. Costs nothing."
)
SUBMIT_DESCRIPTION = (
    "Evaluate program/ as it is now on Episodes of the hidden train pool and return the receipt: the Submission id "
    "(e.g. s0001), its score, the Episodes and Submissions left, the policy failures and the workspace path of its "
    "Feedback. Give exactly one of `episodes`, an index selector such as \"0:8,12,20:24\" (half-open ranges and "
    "single indices, strictly increasing: 0 to 7, 12, 20 to 23), or `count`, the first `count` indices of the pool "
    "(the same as episodes \"0:count\"). Every selected index costs one Episode; reusing an index replays the same "
    "hidden Episode. Blocks until the evaluation is done. A refusal (invalid_selector, index_out_of_range, "
    "too_many_episodes, budget_exhausted, submissions_exhausted, invalid_program, session_closed) costs nothing."
)
FEEDBACK_DESCRIPTION = (
    "The Feedback of one of your Submissions (its feedback.json, also readable in the workspace at "
    "feedback/<submission_id>/feedback.json): the score, the Benchmark's values, and per Episode its index, status, "
    "failure code and reason, steps, reward, the tail of the policy's output and a crash's traceback. Costs nothing; "
    "an id that is not one of yours is refused with unknown_submission."
)
FINISH_DESCRIPTION = (
    "Hand back your best Submission ids as candidates, best first (e.g. [\"s0003\", \"s0001\"]), and end your turn: "
    "the Host validates the candidates on private Episodes and measures the one it selects on held-out Episodes. "
    "Refused with no_candidates, unknown_submission, duplicate_candidate, too_many_candidates, finish_not_allowed "
    "(the finish policy requires the budget spent first) or already_finished."
)


class SubmissionSummary(BaseModel):
    """One Submission as status lists it."""

    id: str
    number: int
    program_digest: str
    selector: str
    state: str = Field(description="running, completed or voided")
    score: float
    has_score: bool
    policy_failures: int
    feedback_path: str = Field(description="workspace-relative path of its feedback.json")


class Status(BaseModel):
    """The Host API's Status."""

    episodes_total: int
    episodes_used: int
    episodes_left: int
    submissions_used: int
    submissions_left: int
    pool_size: int
    max_episodes_per_submission: int = Field(description="0: no limit")
    finish_policy: str
    max_candidates: int
    finished: bool
    candidates: list[str]
    submissions: list[SubmissionSummary]


class SubmitReceipt(BaseModel):
    """The Host API's receipt of an evaluated Submission."""

    submission_id: str
    program_digest: str
    score: float
    episodes_used: int
    episodes_left: int
    submissions_left: int
    policy_failures: int
    feedback_path: str = Field(description="workspace-relative path of the published feedback.json")


class FinishReceipt(BaseModel):
    """The candidates the Host took."""

    candidates: list[str]


class Feedback(BaseModel, extra="allow"):
    """A Submission's feedback.json (schema epg.feedback/1): its fields beyond these are kept as they are."""

    score: float
    episodes: list[dict[str, Any]]


RESULT_MODELS: dict[str, type[BaseModel]] = {"status": Status, "submit": SubmitReceipt, "feedback": Feedback, "finish": FinishReceipt}


def refusal(code: str, message: str) -> CallToolResult:
    """The tool error of a refused call: the JSON `epg-session` prints for it."""
    text = json.dumps({"error": {"code": code, "message": message}})
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def answer(result: dict[str, Any]) -> CallToolResult:
    """A tool's result: structured, and the same JSON as text for a client that reads only text."""
    return CallToolResult(content=[TextContent(type="text", text=json.dumps(result, indent=2))], structured_content=result)


def selector_of(episodes: str, count: int) -> str:
    """The selector of submit's arguments: episodes as given, or "0:count". Raises HostApiError (invalid_selector)
    unless exactly one is given (a non-empty episodes, a positive count)."""
    if bool(episodes) == bool(count):
        raise HostApiError(code="invalid_selector", message="give exactly one of episodes (a selector) or count")
    return episodes or f"0:{count}"


def read_feedback(client: SessionClient, workspace: Path, submission_id: str) -> dict[str, Any]:
    """The feedback.json of submission_id, found through status. Raises HostApiError: unknown_submission for an id
    status does not list, unavailable for a Feedback not (yet) readable or over FEEDBACK_READ_LIMIT."""
    listed = {item["id"]: item for item in client.status()["submissions"]}
    if submission_id not in listed:
        raise HostApiError(code="unknown_submission", message=f"no Submission {submission_id!r}; see status")
    relative = listed[submission_id]["feedback_path"]
    try:
        with open(workspace / relative, "rb") as handle:
            data = handle.read(FEEDBACK_READ_LIMIT + 1)
    except OSError as exc:
        raise HostApiError(code="unavailable", message=f"{relative}: {exc.strerror or exc}") from None
    if len(data) > FEEDBACK_READ_LIMIT:
        raise HostApiError(code="unavailable", message=f"{relative} is over {FEEDBACK_READ_LIMIT} bytes: read it from the workspace")
    try:
        document = json.loads(data)
    except ValueError:
        raise HostApiError(code="unavailable", message=f"{relative} is not JSON (yet): try again") from None
    if not isinstance(document, dict):
        raise HostApiError(code="unavailable", message=f"{relative} is not a JSON object")
    return document


def _call(client_factory: Callable[[], SessionClient], call: Callable[[SessionClient], dict[str, Any]]) -> CallToolResult:
    """Run call with a fresh client; a HostApiError becomes the tool error carrying its code."""
    client = client_factory()
    try:
        return answer(call(client))
    except HostApiError as exc:
        return refusal(exc.code, exc.message)
    finally:
        client.close()


class HostApiTools(MCPServer):
    """The SDK's server, its argument refusals turned into the Host API's codes."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        """Call tool name; arguments off its input schema: malformed_request; no such tool: unknown_method."""
        if name not in {tool.name for tool in await self.list_tools()}:
            return refusal("unknown_method", f"no tool {name!r}; the tools are status, submit, feedback and finish")
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            reasons = [f"{'.'.join(str(part) for part in error['loc']) or name}: {error['msg']}" for error in exc.__cause__.errors()]
            return refusal("malformed_request", "\n".join(reasons))


def build_server(client_factory: Callable[[], SessionClient] = SessionClient, workspace: Path | None = None) -> HostApiTools:
    """The MCP server `epg`, its four tools calling the Host API through clients client_factory makes.

    workspace: where Feedback paths are read from (default: the current directory, the CLI's workspace).
    """
    root = workspace or Path.cwd()
    server = HostApiTools(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool(name="status", description=STATUS_DESCRIPTION)
    def status() -> CallToolResult:
        return _call(client_factory, lambda client: client.status())

    @server.tool(name="submit", description=SUBMIT_DESCRIPTION)
    def submit(
        episodes: Annotated[str, Field(description="index selector, e.g. \"0:8,12,20:24\" (\"\": use count)")] = "",
        count: Annotated[int, Field(description="evaluate on pool indices 0 to count - 1 (0: use episodes)", ge=0)] = 0,
    ) -> CallToolResult:
        return _call(client_factory, lambda client: client.submit(selector_of(episodes, count)))

    @server.tool(name="feedback", description=FEEDBACK_DESCRIPTION)
    def feedback(
        submission_id: Annotated[str, Field(description="a Submission id from submit or status, e.g. \"s0001\"")],
    ) -> CallToolResult:
        return _call(client_factory, lambda client: read_feedback(client, root, submission_id))

    @server.tool(name="finish", description=FINISH_DESCRIPTION)
    def finish(
        ids: Annotated[list[str], Field(description="candidate Submission ids, best first")],
    ) -> CallToolResult:
        return _call(client_factory, lambda client: client.finish(ids))

    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="epg-session-mcp", description="The Host API of this Run as MCP tools, over stdio.")
    parser.add_argument("--workspace", type=Path, default=None, help="the agent's workspace (default: the current directory)")
    args = parser.parse_args(argv)
    build_server(SessionClient, args.workspace).run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
