"""`evopolicygym-session` on our Host API: their selector, their outputs and exit codes, their Feedback view.

In-process: the real gRPC server over a real RunHost and a deterministic fake sandbox (test_host_api's), the
command's main() with the agent's environment.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_host_api import POOL_SIZE, TOKEN, FakeSandbox, Served, budget, expected_reward
from test_host_api import serve_run as serve_run  # a fixture

from epg.v1 import host_api_pb2 as pb
from orchestrator.hostclient import evopolicygym_session as session
from orchestrator.hostclient.evopolicygym_session import THEIR_CODES, our_selector, parse_episodes
from orchestrator.images.recipes import IMAGES, agent_base_recipe
from orchestrator.kernel.ports import EvaluationFeedback
from orchestrator.kernel.session import FinishPolicy
from orchestrator.run.agent_container import prepare_feedback_view

TRACE = b"step 0: left\nstep 1: right\n"


class ArtifactSandbox(FakeSandbox):
    """The fake sandbox, its Feedback with one artifact."""

    def feedback(self, outcomes: list[Any]) -> EvaluationFeedback:
        plain = super().feedback(outcomes)
        return EvaluationFeedback(score=plain.score, values=plain.values, artifacts={"trace.txt": TRACE}, episodes=plain.episodes)


def command(served: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *argv: str
            ) -> tuple[int, dict[str, Any] | None, dict[str, Any] | None]:
    """Run evopolicygym-session argv as the agent would in its workspace; return (exit status, stdout JSON, stderr JSON)."""
    monkeypatch.setenv("EPG_HOST_API", str(served.socket_path))
    monkeypatch.setenv("EPG_SESSION_TOKEN", TOKEN)
    monkeypatch.setenv("EPG_WORKSPACE", str(served.records.workspace))
    monkeypatch.delenv("EVOPOLICYGYM_WORKSPACE", raising=False)
    monkeypatch.chdir(served.records.workspace)
    try:
        status = session.main(list(argv))
    except SystemExit as exc:  # argparse
        status = int(exc.code or 0)
    out, err = capsys.readouterr()
    return status, (json.loads(out) if out.strip() else None), (json.loads(err) if err.strip().startswith("{") else None)


@pytest.fixture
def agent_run(serve_run: Callable[..., Served]) -> Served:
    served = serve_run(sandbox=ArtifactSandbox(policy_failures={5}))
    prepare_feedback_view(served.records.workspace)
    return served


# the selector ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "indices", "ours"), [
    ("0:2,4:8", (0, 1, 4, 5, 6, 7), "0:2,4:8"),
    ("7", (7,), "7"),
    ("0,1,2,5", (0, 1, 2, 5), "0:3,5"),
    ("3:4,4:6,9", (3, 4, 5, 9), "3:6,9"),
    ("007,8", (7, 8), "7:9"),
])
def test_their_selector_names_the_same_indices_and_is_sent_as_our_ranges(text: str, indices: tuple[int, ...], ours: str):
    assert parse_episodes(text) == indices
    assert our_selector(indices) == ours


REFUSED_SELECTORS = ["", " 0:2", "0:2, 4", "0:2\t", "2:2", "3:1", "0:2,1", "1,1", "a", "-1", "+1", "0:2:4", "0,,1", ",0",
                     "0:", ":3", "0:2049", "18446744073709551616", "0:18446744073709551617"]


@pytest.mark.parametrize("text", REFUSED_SELECTORS)
def test_a_selector_their_parser_refuses_is_refused_with_exit_2_before_the_host_is_called(
        agent_run: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], text: str):
    with pytest.raises(ValueError):
        parse_episodes(text)

    status, out, _ = command(agent_run, monkeypatch, capsys, "submit", "program", "--episodes", text)

    assert (status, out) == (2, None)
    assert agent_run.sandbox.calls == []
    assert agent_run.event_types() == []


def test_the_largest_selector_theirs_admits_has_2048_indices():
    assert len(parse_episodes("0:2048")) == 2048
    assert parse_episodes("18446744073709551614:18446744073709551616") == (2**64 - 2, 2**64 - 1)


# submit --------------------------------------------------------------------------------------------------------------
def test_submit_prints_their_receipt_and_writes_latest_json_and_the_submissions_feedback(
        agent_run: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    digest = agent_run.digest()
    score = (sum(expected_reward(digest, i) for i in (0, 1, 4)) - 1.0) / 4  # index 5 fails: the failure return, -1

    status, out, err = command(agent_run, monkeypatch, capsys, "submit", "program", "--episodes", "0:2,4:6")

    assert (status, err) == (0, None)
    assert out == {
        "protocol": "agent-session/v3", "ok": True,
        "result": {
            "submission_id": "s0001", "program_digest": digest, "score": score,
            "episode_indices": [0, 1, 4, 5], "episodes_used": 4, "episodes_remaining": 6,
            "feedback": "feedback/submissions/s0001/feedback.json",
        },
    }
    assert agent_run.host.status().submissions[0].selector == "0:2,4:6"
    workspace = agent_run.records.workspace
    latest = json.loads((workspace / "feedback" / "latest.json").read_text())
    assert latest == {"schema": "evopolicygym/feedback/v2", "submission_id": "s0001", "program_digest": digest,
                      "score": out["result"]["score"], "feedback": "submissions/s0001/feedback.json"}
    feedback = json.loads((workspace / "feedback" / latest["feedback"]).read_text())
    assert feedback["schema"] == "evopolicygym/feedback/v2"
    assert (feedback["submission_id"], feedback["program_digest"], feedback["score"]) == ("s0001", digest, out["result"]["score"])
    assert (feedback["episode_indices"], feedback["episodes_used"], feedback["episodes_remaining"]) == ([0, 1, 4, 5], 4, 6)
    assert feedback["content"] == {"mean_reward": out["result"]["score"], "episodes": 4}
    assert feedback["episodes"] == [
        {"episode_index": 0, "status": "completed", "reward": expected_reward(digest, 0), "steps": 7, "failure": None},
        {"episode_index": 1, "status": "completed", "reward": expected_reward(digest, 1), "steps": 7, "failure": None},
        {"episode_index": 4, "status": "completed", "reward": expected_reward(digest, 4), "steps": 7, "failure": None},
        {"episode_index": 5, "status": "policy_failed", "reward": None, "steps": 1, "failure": "exception"},
    ]
    assert feedback["artifacts"] == [{"name": "trace.txt", "media_type": "text/plain", "path": "artifacts/trace.txt",
                                      "size": len(TRACE), "sha256": hashlib.sha256(TRACE).hexdigest(), "retention": "permanent"}]
    submission = workspace / "feedback" / "submissions" / "s0001"
    assert (submission / "artifacts" / "trace.txt").read_bytes() == TRACE
    assert json.loads((submission / "availability.json").read_text()) == {
        "schema": "evopolicygym/artifact-availability/v1", "submission_id": "s0001", "bulk_status": "available", "bulk_artifacts": []}
    assert sorted(p.name for p in (workspace / ".evopolicygym" / "submissions").iterdir()) == ["s0001"]  # no staging left


def test_latest_json_follows_the_newest_submission_and_earlier_ones_stay(
        agent_run: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    command(agent_run, monkeypatch, capsys, "submit", "program", "--episodes", "0:2")
    (agent_run.program_dir / "policy.py").write_text((agent_run.program_dir / "policy.py").read_text() + "\n# second\n")

    status, out, _ = command(agent_run, monkeypatch, capsys, "submit", str(agent_run.program_dir), "--episodes", "3")

    assert status == 0
    feedback = agent_run.records.workspace / "feedback"
    assert json.loads((feedback / "latest.json").read_text())["submission_id"] == "s0002"
    assert json.loads((feedback / "submissions" / "s0001" / "feedback.json").read_text())["episode_indices"] == [0, 1]
    assert json.loads((feedback / "submissions" / "s0002" / "feedback.json").read_text())["program_digest"] == agent_run.digest()


@pytest.mark.parametrize(("argv", "code"), [
    (("submit", "program", "--episodes", f"0:{POOL_SIZE + 1}"), "invalid_request"),  # ours: index_out_of_range
    (("submit", "program", "--episodes", "0:7"), "episode_limit"),  # ours: too_many_episodes (6 per Submission)
    (("finish", "s0009"), "unknown_submission"),
    (("finish", "s0001", "s0001"), "duplicate_submission"),
])
def test_a_refusal_prints_their_error_on_stderr_and_exits_1(
        agent_run: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], code: str):
    command(agent_run, monkeypatch, capsys, "submit", "program", "--episodes", "0")
    calls = len(agent_run.sandbox.calls)

    status, out, err = command(agent_run, monkeypatch, capsys, *argv)

    assert (status, out) == (1, None)
    assert err is not None
    assert (err["protocol"], err["ok"], err["error"]["code"]) == ("agent-session/v3", False, code)
    assert err["error"]["message"]
    assert len(agent_run.sandbox.calls) == calls


def test_finish_before_the_budget_is_spent_under_require_exhaustion_is_their_budget_remaining(
        serve_run: Callable[..., Served], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    served = serve_run(budget(finish_policy=FinishPolicy.REQUIRE_EXHAUSTION))
    prepare_feedback_view(served.records.workspace)
    command(served, monkeypatch, capsys, "submit", "program", "--episodes", "0:2")

    status, _, err = command(served, monkeypatch, capsys, "finish", "s0001")

    assert status == 1
    assert err is not None and err["error"]["code"] == "budget_remaining"
    assert not served.host.status().finished


def test_finish_prints_the_candidates_and_ends_the_agents_authority(
        agent_run: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    command(agent_run, monkeypatch, capsys, "submit", "program", "--episodes", "0")
    command(agent_run, monkeypatch, capsys, "submit", "program", "--episodes", "1")

    status, out, err = command(agent_run, monkeypatch, capsys, "finish", "s0002", "s0001")

    assert (status, err) == (0, None)
    assert out == {"protocol": "agent-session/v3", "ok": True,
                   "result": {"candidate_submission_ids": ["s0002", "s0001"], "agent_authority_closed": True}}
    assert agent_run.host.status().candidates == ("s0002", "s0001")
    status, _, err = command(agent_run, monkeypatch, capsys, "submit", "program", "--episodes", "2")
    assert status == 1 and err is not None and err["error"]["code"] == "session_closed"


# faults of the command -----------------------------------------------------------------------------------------------
def test_a_program_other_than_the_workspaces_is_a_client_error_and_spends_nothing(
        agent_run: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    other = agent_run.records.workspace / "analysis" / "program"
    other.mkdir()
    (other / "policy.py").write_text("def make_policy(context):\n    return None\n")

    for program in (str(other), "analysis", "no-such-dir"):
        status, out, err = command(agent_run, monkeypatch, capsys, "submit", program, "--episodes", "0")
        assert (status, out) == (2, None)
        assert err is not None and err == {"ok": False, "error": {"code": "client_error", "message": err["error"]["message"]}}
    assert agent_run.sandbox.calls == []


def test_without_a_host_to_reach_the_command_is_a_client_error(
        agent_run: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path):
    agent_run.socket_path.rename(tmp_path / "moved.sock")

    status, out, err = command(agent_run, monkeypatch, capsys, "finish", "s0001")

    assert (status, out) == (2, None)
    assert err is not None and err["error"]["code"] == "client_error"


def test_a_submission_whose_view_cannot_be_written_says_it_was_spent_and_where_our_feedback_is(
        serve_run: Callable[..., Served], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    served = serve_run()  # no Feedback view: not prepared by a Run's Host

    status, out, err = command(served, monkeypatch, capsys, "submit", "program", "--episodes", "0:2")

    assert (status, out) == (1, None)
    assert err is not None and err["error"]["code"] == "publication_failed"
    assert "s0001" in err["error"]["message"] and "feedback/s0001/feedback.json" in err["error"]["message"]
    assert served.host.status().episodes_used == 2


def test_version_names_their_release(capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as done:
        session.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == "evopolicygym-session 0.3.0"


# mappings and the view's links ---------------------------------------------------------------------------------------
SAME_OR_OURS = {"budget_exhausted", "unknown_submission", "session_closed",  # the same code in theirs
                "busy", "unauthenticated", "request_too_large", "internal"}  # no counterpart: given as ours


def test_every_host_api_error_code_is_mapped_to_theirs_or_named_as_kept():
    ours = {name.removeprefix("ERROR_CODE_").lower() for name in pb.ErrorCode.keys()} - {"unspecified"}
    assert session.HOST_CODES == ours
    assert set(THEIR_CODES) | SAME_OR_OURS == ours
    assert not set(THEIR_CODES) & SAME_OR_OURS


def test_the_feedback_view_links_are_the_hosts_and_lead_into_the_agents_directory(tmp_path: Path):
    workspace = tmp_path / "workspace"
    (workspace / "feedback").mkdir(parents=True)

    prepare_feedback_view(workspace)
    prepare_feedback_view(workspace)  # a second attempt of the agent: unchanged

    assert os.readlink(workspace / "feedback" / "latest.json") == "../.evopolicygym/latest.json"
    assert os.readlink(workspace / "feedback" / "submissions") == "../.evopolicygym/submissions"
    assert (workspace / ".evopolicygym").is_dir() and not (workspace / ".evopolicygym").is_symlink()


def test_agent_base_carries_the_evopolicygym_session_launcher_and_its_modules():
    recipe = agent_base_recipe()
    assert recipe.context_files["evopolicygym-session"] == IMAGES / "agent-base" / "evopolicygym-session"
    assert "COPY evopolicygym-session /usr/local/bin/evopolicygym-session" in recipe.dockerfile.read_text()
    assert "orchestrator.hostclient.evopolicygym_session" in (IMAGES / "agent-base" / "evopolicygym-session").read_text()
    assert {"orchestrator/hostclient/evopolicygym_session.py", "orchestrator/hostclient/feedback_view.py"} <= set(recipe.files)


def test_handing_the_view_to_the_agent_never_chowns_through_what_the_agent_planted_there(tmp_path: Path):
    if os.geteuid() != 0:
        pytest.fail("a root Host hands the workspace to another uid: this test must run as root", pytrace=False)
    from orchestrator.records.run_dir import RunDirectory
    from orchestrator.run.agent_container import AGENT_UID, hand_workspace_to_agent

    records = RunDirectory(tmp_path / "run")
    records.create("benchmark: b\n")
    host_file, linked = tmp_path / "host-secret", tmp_path / "host-other"
    host_file.write_text("the Host's")
    linked.write_text("the Host's too")
    hand_workspace_to_agent(records)  # a first attempt: the agent owns its view
    view = records.workspace / ".evopolicygym"
    (view / "latest.json").symlink_to(host_file)
    os.link(linked, view / "hard")
    (view / "submissions").mkdir()
    (view / "submissions" / "up").symlink_to(tmp_path)

    hand_workspace_to_agent(records)  # the next attempt

    assert (host_file.stat().st_uid, linked.stat().st_uid, tmp_path.stat().st_uid) == (0, 0, 0)
    assert (view.stat().st_uid, (view / "submissions").stat().st_uid) == (AGENT_UID, AGENT_UID)
    assert os.readlink(records.workspace / "feedback" / "latest.json") == "../.evopolicygym/latest.json"
