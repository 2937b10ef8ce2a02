"""opencode, Aider, mini-SWE-agent and Cline in their containers, each driven through a whole CartPole Run by the fake provider
through the Host's model relay (all four speak OpenAI Chat Completions). One Run per kind: opencode and Cline, which
have the Host API's MCP server, play the script the older kinds play (the Submission, a malformed submit, the Feedback
read and the finish through the MCP tools); Aider and mini-SWE-agent, which have none, play a short shell script: read
the task, write the Program, submit, read the Feedback, look for the credential, finish."""

from __future__ import annotations

import base64
import json

import pytest
from cli_runs import (
    BASELINE,
    GOOD_PARAMS,
    SECRET,
    SECRET_PROBE,
    assert_finished_through_the_relay,
    assert_submitted_and_finished_through_mcp,
    fake_provider,
    run_cli_agent,
)

from orchestrator.agents.cli_agent import MCP_TOOL_TIMEOUT_S, PLACEHOLDER_KEY, mini_swe_agent_command
from orchestrator.kernel.program import ProgramFile, program_digest


def _one_line(heredoc: str) -> str:
    """A `python3 - <<'EOF' ... EOF` command as one line (Aider runs each line of a shell block as its own command)."""
    source = heredoc.split("\n", 1)[1].rsplit("\nEOF", 1)[0]
    return f"echo {base64.b64encode(source.encode()).decode()} | base64 -d | python3 -"


FEEDBACK_LINE = ("python3 -c \"import json; f = json.load(open('feedback/s0001/feedback.json')); "
                 "print('feedback score:', json.dumps(f['score']))\"")
TURNS = [
    {"shell": "head -3 TASK.md && epg-session status", "text": "Reading the task."},
    {"shell": f"printf '%s' '{GOOD_PARAMS}' > program/params.json"},
    {"shell": "epg-session submit --episodes 0:4"},
    {"shell": FEEDBACK_LINE},
    {"shell": _one_line(SECRET_PROBE)},
    {"shell": "epg-session finish s0001"},
    {"shell": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"},  # how mini-SWE-agent says it is done; a no-op for Aider
    {"text": "Submitted and finished."},
]


@pytest.mark.parametrize("kind", ["opencode", "cline"])
def test_new_mcp_capable_agent_run_submits_and_finishes_through_the_mcp_tools(kind, tmp_path, scope, builder):
    with fake_provider(tmp_path) as (upstream, provider_log):
        manifest, run_dir = run_cli_agent({"kind": kind, "model": "fake-model"}, upstream, tmp_path, scope)
    assert_finished_through_the_relay(manifest, run_dir, provider_log)
    assert_submitted_and_finished_through_mcp(run_dir, provider_log)
    assert "## Tools (the MCP server `epg`)" in (run_dir / "workspace" / "TASK.md").read_text()  # the task names the tools

    # Every model request reached the provider with the Host's credential in place of the CLI's placeholder.
    requests = [json.loads(line) for line in provider_log.read_text().splitlines() if '"dir": "request"' in line]
    assert requests
    for request in requests:
        headers = {key.lower(): value for key, value in request["headers"].items()}
        assert headers["authorization"] == f"Bearer {SECRET}" and PLACEHOLDER_KEY not in json.dumps(headers)


@pytest.mark.parametrize("kind", ["aider", "mini-swe-agent"])
def test_new_cli_agent_run_is_driven_through_the_relay_and_ends_finished(kind, tmp_path, scope, builder):
    with fake_provider(tmp_path, TURNS) as (upstream, provider_log):
        manifest, run_dir = run_cli_agent({"kind": kind, "model": "fake-model"}, upstream, tmp_path, scope)
    stdout = (run_dir / "agent" / "stdout.log").read_text(errors="replace")
    expected = program_digest([
        ProgramFile(path="params.json", data=GOOD_PARAMS.encode()),
        ProgramFile(path="policy.py", data=(BASELINE / "policy.py").read_bytes()),
    ])
    assert manifest["terminal_reason"] == "finish_called", stdout[-3000:]
    assert manifest["final"]["submission_id"] == "s0001" and manifest["final"]["program_digest"] == expected
    assert manifest["assessment"]["score"] == 500.0

    # The CLI ran the scripted commands and sent their output (the task's title, the Feedback's score) to the model.
    record = json.loads((run_dir / "submissions" / "s0001" / "record.json").read_text())
    provided = [json.loads(line) for line in provider_log.read_text().splitlines()]
    requests = [p for p in provided if p["dir"] == "request"]
    bodies = [json.dumps(p["body"]) for p in requests]
    assert any(f"feedback score: {json.dumps(record['feedback']['score'])}" in body for body in bodies), bodies[-1][-3000:]
    assert any("# Task: improve a policy for CartPole-v1" in body for body in bodies)

    # The credential stayed on the Host: the provider got it in place of the placeholder, the container never saw it.
    for request in requests:
        headers = {key.lower(): value for key, value in request["headers"].items()}
        assert headers["authorization"] == f"Bearer {SECRET}" and PLACEHOLDER_KEY not in json.dumps(headers)
    secret_report = json.loads((run_dir / "workspace" / "analysis" / "secret.json").read_text())
    assert secret_report["grep_status"] in (1, 2), secret_report
    assert (secret_report["hits"], secret_report["interfaces"]) == ([], ["lo"])
    assert SECRET not in stdout

    # The relay recorded every model request, in order, as the provider received it.
    exchanges = [json.loads(line) for line in (run_dir / "relay" / "exchanges.1.jsonl").read_text().splitlines()]
    assert [e["seq"] for e in exchanges] == list(range(1, len(exchanges) + 1)) and not any(e["refused"] for e in exchanges)
    assert {e["path"] for e in exchanges} == {"/v1/chat/completions"}
    assert [json.loads(e["request"]) for e in exchanges] == [p["body"] for p in sorted(requests, key=lambda p: p["seq"])][:len(exchanges)]
    assert manifest["relay"]["requests"] == len(exchanges) >= len(TURNS) - 2


MINI_CONFIG = """
import json, sys
from minisweagent.config import get_config_from_spec
from minisweagent.environments.local import LocalEnvironment
from minisweagent.utils.serialize import recursive_merge
config = recursive_merge(*[get_config_from_spec(spec) for spec in json.loads(sys.argv[1])])
environment = LocalEnvironment(**config["environment"])
print(json.dumps({"timeout": environment.config.timeout, "agent_keys": sorted(config["agent"])}))
"""


def test_mini_swe_agent_takes_its_default_configuration_with_a_command_time_limit_as_long_as_a_submits(builder, engine, tmp_path):
    """The `-c` specs mini is started with, read by mini itself in its image: its own mini.yaml (the agent's templates)
    and a command time limit of MCP_TOOL_TIMEOUT_S, where its default of 30 s kills a long submit or probe."""
    argv, _ = mini_swe_agent_command("m", 9000, tmp_path)
    specs = [argv[i + 1] for i, word in enumerate(argv) if word == "-c"] or ["mini.yaml"]  # without -c, mini reads mini.yaml
    image = {result.name: result.tag for result in builder.ensure(["agent-mini-swe-agent"])}["agent-mini-swe-agent"]
    printed = engine.client.containers.run(image, ["/opt/epg/venv/mini/bin/python", "-c", MINI_CONFIG, json.dumps(specs)],
                                           entrypoint=[], network_mode="none", remove=True, user="10001:10001", working_dir="/tmp",
                                           environment={"HOME": "/tmp", "MSWEA_GLOBAL_CONFIG_DIR": "/tmp/mini"})
    found = json.loads(printed.decode().strip().splitlines()[-1])
    assert found["timeout"] == MCP_TOOL_TIMEOUT_S
    assert {"system_template", "instance_template"} <= set(found["agent_keys"])  # mini.yaml, not a bare key-value config
