"""What the end-to-end Runs of the real coding-agent CLIs share: the scripted turns, the probes the agent runs in its
container, the fake provider, the Run itself and the checks of its records."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import yaml
from support.cli import run_cli
from support.scripted_runs import FORKED

from orchestrator.kernel.program import ProgramFile, program_digest

REPO = Path(__file__).resolve().parents[2]
BASELINE = REPO / "environments" / "cartpole" / "baseline"
SECRET = "sk-test-" + os.urandom(12).hex()
GOOD_PARAMS = '{"weights": [0, 0, 1, 0.5], "bias": 0}'

# The secret travels hex-encoded so that the command itself (which a CLI may keep in its session log) does not hold it;
# grep gets it on stdin and searches the whole file system in C, fast enough for one shell turn on a loaded machine.
SECRET_PROBE = f'''python3 - <<'EOF'
import json, os, subprocess
secret = bytes.fromhex("{SECRET.encode().hex()}")
hits = [k for k, v in os.environ.items() if secret.decode() in v]
found = subprocess.run(["grep", "-rlsF", "-D", "skip", "--exclude-dir=proc", "--exclude-dir=sys", "--exclude-dir=dev", "-f", "-", "/"],
                       input=secret + b"\\n", capture_output=True)
hits += found.stdout.decode(errors="replace").split()
json.dump({{"hits": hits, "grep_status": found.returncode, "interfaces": sorted(os.listdir("/sys/class/net"))}}, open("analysis/secret.tmp", "w"))
os.rename("analysis/secret.tmp", "analysis/secret.json")
EOF'''

# A CLI may yield a shell command that is still running and go on (Codex does after its longest wait): the next turn
# waits for the probe's report before the agent finishes and its container stops.
AWAIT_SECRET_PROBE = "for i in $(seq 250); do test -e analysis/secret.json && break; sleep 0.2; done; ls analysis"

REFUSAL_PROBE = '''python3 - <<'EOF'
import json, socket, urllib.error, urllib.request
result = {}
try:
    urllib.request.urlopen(urllib.request.Request("http://127.0.0.1:8765/v1/files", data=b"{}", method="POST"), timeout=10)
    result["path"] = 200
except urllib.error.HTTPError as exc:
    result["path"] = exc.code
with socket.create_connection(("127.0.0.1", 8765), timeout=10) as connection:
    connection.sendall(b"POST http://elsewhere.invalid/v1/responses HTTP/1.1\\r\\nHost: elsewhere.invalid\\r\\nContent-Length: 2\\r\\n\\r\\n{}")
    result["host"] = connection.recv(100).split()[1].decode()
json.dump(result, open("analysis/refusal.json", "w"))
EOF'''

FEEDBACK_READER = '''python3 - <<'EOF'
import json
feedback = json.load(open("feedback/s0001/feedback.json"))
json.dump({"score": feedback["score"], "program_digest": feedback["program_digest"]}, open("analysis/feedback_read.json", "w"))
print("feedback score:", json.dumps(feedback["score"]))
EOF'''

# The Submission, a malformed submit, a read of its Feedback and the finish are calls of the Host API's MCP tools (the fake provider finds
# each tool under the name the CLI gives it); a CLI without the MCP server runs the same through `epg-session`.
# The malformed selector fits the tool's schema (a string), so the call reaches the Host, which refuses it with its code.
MALFORMED_SELECTOR, MALFORMED_CODE = "4:2", "invalid_selector"
TURNS = [
    {"shell": "head -3 TASK.md && epg-session status", "text": "Reading the task."},
    {"shell": f"printf '%s' '{GOOD_PARAMS}' > program/params.json"},
    {"mcp": "submit", "args": {"episodes": "0:4"}, "shell": "epg-session submit --episodes 0:4"},
    {"mcp": "submit", "args": {"episodes": MALFORMED_SELECTOR}, "shell": f"epg-session submit --episodes {MALFORMED_SELECTOR}"},
    {"shell": FEEDBACK_READER},
    {"mcp": "feedback", "args": {"submission_id": "s0001"}, "shell": "cat feedback/s0001/feedback.json"},
    {"shell": SECRET_PROBE},
    {"shell": AWAIT_SECRET_PROBE},
    {"shell": REFUSAL_PROBE},
    {"mcp": "finish", "args": {"ids": ["s0001"]}, "shell": "epg-session finish s0001"},
    {"text": "Submitted and finished."},
]


def _fake_provider_module():
    spec = importlib.util.spec_from_file_location("fake_provider", REPO / "tests" / "fakes" / "fake_provider.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tool_outputs(body: dict) -> list[str]:
    """The shell outputs a CLI sent back to the model in one request (Responses, Messages, Gemini or Chat Completions API)."""
    def text(value) -> str:
        return value if isinstance(value, str) else json.dumps(value)

    items = [item for item in body.get("input") or [] if isinstance(item, dict)]  # Codex
    blocks = [block for message in body.get("messages") or [] if isinstance(message.get("content"), list)
              for block in message["content"] if isinstance(block, dict)]  # Claude Code
    parts = [part["functionResponse"] for content in body.get("contents") or [] if isinstance(content, dict)
             for part in content.get("parts") or [] if isinstance(part, dict) and "functionResponse" in part]  # Gemini CLI
    tool_messages = [message for message in body.get("messages") or [] if message.get("role") == "tool"]  # Qwen Code
    return ([text(item.get("output")) for item in items if item.get("type") in ("function_call_output", "custom_tool_call_output")]
            + [text(block.get("content")) for block in blocks if block.get("type") == "tool_result"]
            + [text(part.get("response")) for part in parts]
            + [text(message.get("content")) for message in tool_messages])


@contextmanager
def fake_provider(tmp_path: Path, turns: list[dict] | None = None) -> Iterator[tuple[str, Path]]:
    """The fake provider playing turns (TURNS by default) on a loopback port: yields its base URL and its JSONL log."""
    fake = _fake_provider_module()
    log = tmp_path / "provider.jsonl"
    server = fake.Server(0, fake.Script(TURNS if turns is None else turns), fake.JsonlLog(str(log)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", log
    finally:
        server.shutdown()
        server.server_close()


def run_cli_agent(agent: dict, upstream: str, tmp_path: Path, scope: str) -> tuple[dict, Path]:
    """Run `epg-orchestrate run` on CartPole with agent driven through the relay to upstream; return its manifest and run directory."""
    spec = {
        "benchmark": "CartPole-v1",
        "agent": agent,
        "budget": {"episodes": 8, "max_submissions": 2, "pool_size": 8},
        "validation": {"episodes": 2, "max_candidates": 1},
        "assessment": {"episodes": 2, "include_initial_program": False},
        "limits": {"agent_wall_clock_s": 300},
        "sandbox": {"pool_size": 4, **FORKED},
        "relay": {"upstream": upstream, "credential_env": "EPG_TEST_PROVIDER_KEY"},
    }
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    run_dir = tmp_path / "run"
    result = run_cli("run", str(tmp_path / "spec.yaml"), "-o", str(run_dir), "--json",
                     "--allow-credential", f"EPG_TEST_PROVIDER_KEY@{upstream.removeprefix('http://')}",
                     scope=scope, env={"EPG_TEST_PROVIDER_KEY": SECRET}, timeout=1500)
    assert result.exit_code == 0, result.stderr[-3000:]
    return json.loads(result.stdout), run_dir


def assert_finished_through_the_relay(manifest: dict, run_dir: Path, provider_log: Path) -> None:
    """The Run ended finished with the scripted Program selected; the agent read its task and Feedback and sent them
    to the model; the credential never reached the container; refusals were recorded; the relay's record holds every
    model request and response, in order."""
    expected = program_digest([
        ProgramFile(path="params.json", data=GOOD_PARAMS.encode()),
        ProgramFile(path="policy.py", data=(BASELINE / "policy.py").read_bytes()),
    ])
    assert manifest["terminal_reason"] == "finish_called", (run_dir / "agent" / "stdout.log").read_text()[-3000:]
    assert manifest["final"]["submission_id"] == "s0001"
    assert manifest["final"]["program_digest"] == expected
    assert manifest["assessment"]["score"] == 500.0

    # The agent read its Feedback and its task inside the container, and the CLI sent what it read to the model.
    record = json.loads((run_dir / "submissions" / "s0001" / "record.json").read_text())
    read = json.loads((run_dir / "workspace" / "analysis" / "feedback_read.json").read_text())
    assert read == {"score": record["feedback"]["score"], "program_digest": expected}
    provided = [json.loads(line) for line in provider_log.read_text().splitlines()]
    sent_back = [o for p in provided if p["dir"] == "request" and isinstance(p["body"], dict) for o in tool_outputs(p["body"])]
    scores = {float(m) for o in sent_back for m in re.findall(r"feedback score: (-?[0-9][0-9.eE+-]*)", o)}
    assert scores == {record["feedback"]["score"]}, sent_back
    task_title = (run_dir / "workspace" / "TASK.md").read_text().splitlines()[0]
    assert task_title == "# Task: improve a policy for CartPole-v1"
    assert any(task_title in o for o in sent_back), sent_back

    # The credential never reached the container: not in its environment, not in any file it could read.
    secret_report = json.loads((run_dir / "workspace" / "analysis" / "secret.json").read_text())
    assert secret_report["grep_status"] in (1, 2), secret_report  # grep ran to the end: 1 nothing found, 2 some file unreadable
    assert (secret_report["hits"], secret_report["interfaces"]) == ([], ["lo"])
    readable = "".join(p.read_text(errors="replace") for p in (run_dir / "workspace").rglob("*") if p.is_file())
    assert SECRET not in readable and SECRET not in (run_dir / "agent" / "stdout.log").read_text()

    # Another path or another host through the relay is refused, and recorded.
    assert json.loads((run_dir / "workspace" / "analysis" / "refusal.json").read_text()) == {"path": 403, "host": "403"}
    exchanges = [json.loads(line) for line in (run_dir / "relay" / "exchanges.1.jsonl").read_text().splitlines()]
    refused = [e for e in exchanges if e["refused"]]
    assert [e["path"] for e in refused] == ["/v1/files", "http://elsewhere.invalid/v1/responses"]

    # The relay's record holds every model request and response, in order.
    forwarded = [e for e in exchanges if not e["refused"]]
    requests = sorted((p for p in provided if p["dir"] == "request"), key=lambda p: p["seq"])
    responses = {p["seq"]: p for p in provided if p["dir"] == "response"}
    assert [json.loads(e["request"]) for e in forwarded] == [p["body"] for p in requests]
    assert len(forwarded) >= len(TURNS) - 1
    for entry, request in zip(forwarded, requests, strict=False):  # the last request may have no forwarded twin yet
        events = responses[request["seq"]].get("sse") or []
        assert entry["status"] == 200
        assert all(json.dumps(event) in entry["response"] for event in events)
    assert [e["seq"] for e in exchanges] == list(range(1, len(exchanges) + 1))
    assert manifest["relay"]["requests"] == len(forwarded) and manifest["relay"]["refused"] == 2
    assert SECRET not in (run_dir / "relay" / "exchanges.1.jsonl").read_text()


def assert_submitted_and_finished_through_mcp(run_dir: Path, provider_log: Path) -> None:
    """The Submission, the malformed submit, the Feedback read and the finish were calls of the MCP server's tools: the
    model's answers the relay forwarded call them by the CLI's names for them, the tool results the CLI sent back carry
    the receipt, the Host's typed error, the Feedback and the finish; the Host recorded that one Submission, of those
    Episodes, and the finish."""
    provided = [json.loads(line) for line in provider_log.read_text().splitlines()]
    requests = sorted((p for p in provided if p["dir"] == "request"), key=lambda p: p["seq"])
    exchanges = [json.loads(line) for line in (run_dir / "relay" / "exchanges.1.jsonl").read_text().splitlines()]
    relayed = dict(zip((p["seq"] for p in requests), (e for e in exchanges if not e["refused"]), strict=False))
    calls = [(p["seq"], p["note"].split(" mcp ", 1)[1]) for p in provided if p["dir"] == "response" and " mcp " in p.get("note", "")]
    played = {p["note"].split(" mcp ", 1)[0]: p["note"].split(" mcp ", 1)[1] for p in provided  # by turn: a retry plays it again
              if p["dir"] == "response" and " mcp " in p.get("note", "")}
    names = [played[turn] for turn in sorted(played, key=lambda turn: int(turn.split()[1]))]
    assert all("epg" in name for name in names), calls
    assert [name.rsplit("_", 1)[-1].rsplit(".", 1)[-1] for name in names] == ["submit", "submit", "feedback", "finish"], calls
    # The relay's transcript holds each call as the model made it: the tool's name (Codex's: namespace and name) and
    # the selector.
    for seq, name in calls:
        assert all(f'"{part}"' in relayed[seq]["response"].replace('\\"', '"') for part in name.split(".")), relayed[seq]["response"][:2000]
    submits = [seq for seq, name in calls if name.endswith("submit")]
    assert any("0:4" in relayed[seq]["response"] for seq in submits)
    assert any(MALFORMED_SELECTOR in relayed[seq]["response"] for seq in submits)

    # What came back to the model as tool results: the receipt, the typed error, the finish.
    sent_back = [o for p in requests if isinstance(p["body"], dict) for o in tool_outputs(p["body"])]
    assert any("submission_id" in o and "s0001" in o for o in sent_back), sent_back
    refusals = [o for o in sent_back if MALFORMED_CODE in o]
    assert refusals and all('error' in o and "code" in o for o in refusals), sent_back
    assert any("candidates" in o and "s0001" in o for o in sent_back), sent_back
    digest = json.loads((run_dir / "submissions" / "s0001" / "record.json").read_text())["feedback"]["program_digest"]
    assert any(re.search(r'episodes\\?"\s*:\s*\[', o) and digest in o for o in sent_back), sent_back  # the Feedback

    # The Host's records: one Submission, of the selector the tool sent, and the finish naming it.
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert [(e["id"], e["indices"]) for e in events if e["type"] == "submission_admitted"] == [("s0001", [0, 1, 2, 3])]
    assert [e["candidates"] for e in events if e["type"] == "finished"] == [["s0001"]]
