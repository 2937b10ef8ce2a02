"""A Run on MiniGrid FourRooms end to end: a scripted agent submits the baseline and the uniform-random Program."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from support.cli import run_cli
from support.scripted_runs import FORKED

from orchestrator.kernel.program import capture_program

REPO = Path(__file__).resolve().parents[2]
PROGRAMS = REPO / "environments" / "minigrid"
BASELINE, RANDOM = PROGRAMS / "baseline", PROGRAMS / "random"
TRACE_ENTRIES_AT_MOST = 65
EPISODES = 4  # per Submission, and of the Validation and the Assessment


def test_scripted_run_on_fourrooms_records_missions_traces_validation_and_assessment(tmp_path, scope):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "benchmark": "MiniGrid-FourRooms-v0",
        "budget": {"episodes": 2 * EPISODES, "max_submissions": 4, "pool_size": EPISODES},
        "validation": {"episodes": EPISODES, "max_candidates": 2},
        "assessment": {"episodes": EPISODES},
        "sandbox": FORKED,
        "agent": {"kind": "scripted", "steps": [{"program": str(BASELINE), "episodes": f"0:{EPISODES}"},
                                                {"program": str(RANDOM), "episodes": f"0:{EPISODES}"}], "finish": "all"},
    }))
    run_dir = tmp_path / "run"
    result = run_cli("run", str(spec), "-o", str(run_dir), "--json", scope=scope, timeout=900)
    assert result.exit_code == 0, result.stderr[-4000:]
    manifest = json.loads(result.stdout)
    recorded = json.loads((run_dir / "run.json").read_text())
    for key in ("benchmark", "phase", "agent", "initial_program_digest", "terminal_reason", "validation", "final", "assessment"):
        assert recorded[key] == manifest[key], key
    assert (recorded["benchmark"], recorded["phase"], recorded["agent"]) == ("MiniGrid-FourRooms-v0", "done", "scripted")
    # No initial_program in the spec: the Run starts from the package's baseline.
    assert recorded["initial_program_digest"] == capture_program(BASELINE).digest
    assert manifest["terminal_reason"] == "finish_called"
    assert manifest["validation"]["candidates"] == ["s0001", "s0002"]

    digests = {"s0001": capture_program(BASELINE).digest, "s0002": capture_program(RANDOM).digest}
    for submission_id, digest in digests.items():
        record = json.loads((run_dir / "submissions" / submission_id / "record.json").read_text())
        assert (record["program_digest"], record["selector"], record["indices"]) == (digest, f"0:{EPISODES}", list(range(EPISODES)))
        feedback = record["feedback"]
        assert json.loads((run_dir / "workspace" / "feedback" / submission_id / "feedback.json").read_text()) == feedback
        values = feedback["values"]
        assert values["policy_failures"] == 0 and len(values["episodes"]) == EPISODES
        assert sum(values["terminations"].values()) == EPISODES and values["terminations"]["stopped"] == 0
        assert values["success_rate"] == sum(e["summary"]["success"] for e in values["episodes"]) / EPISODES
        for episode in values["episodes"]:
            summary = episode["summary"]
            assert summary["mission"] == "reach the goal"
            assert summary["steps"] == episode["steps"] and 1 <= len(summary["trace"]) <= TRACE_ENTRIES_AT_MOST
            assert summary["termination"] == ("goal_reached" if summary["success"] else "time_limit")
            assert episode["return"] > 0.0 if summary["success"] else episode["return"] == 0.0
        assert (run_dir / "programs" / digest.removeprefix("sha256:") / "policy.py").exists()

    validation = json.loads((run_dir / "validation.json").read_text())
    selected = validation["selected"]
    assert selected in digests and manifest["final"]["submission_id"] == selected
    assert manifest["final"]["program_digest"] == digests[selected]
    assessment = json.loads((run_dir / "assessment.json").read_text())
    assert assessment["program_digest"] == digests[selected] and len(assessment["episodes"]) == EPISODES
    assert 0.0 <= manifest["assessment"]["score"] < 1.0
    kinds = [json.loads(line)["type"] for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    assert kinds.count("submission_completed") == 2 and "validation_done" in kinds and "assessment_done" in kinds
    # Hidden Episodes never reach the agent's side.
    pool_payloads = [p["payload"] for p in json.loads((run_dir / "private" / "pool.json").read_text())]
    workspace_text = "".join(p.read_text(errors="replace") for p in (run_dir / "workspace").rglob("*") if p.is_file())
    assert pool_payloads and not any(payload in workspace_text for payload in pool_payloads)
    assert "MiniGrid-FourRooms-v0" in (run_dir / "workspace" / "TASK.md").read_text()
