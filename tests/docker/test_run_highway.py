"""A Run on highway-env's parking-v0 end to end: dict observations, the package's Feedback and the Run's records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from orchestrator.kernel.program import capture_program

REPO = Path(__file__).resolve().parents[2]
HIGHWAY = REPO / "environments" / "highway"
BASELINE, RANDOM = HIGHWAY / "baseline", HIGHWAY / "random"
END_CAUSES = {"goal_reached", "crash", "off_road", "time_limit", "policy_failure"}
TRACE_LIMIT_CHARS = 2000


def run_cli(args: list[str], scope: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli.app", *args], capture_output=True, text=True,
        env={**os.environ, "EPG_SCOPE": scope}, cwd=REPO, timeout=timeout,
    )


def assert_parking_feedback(document: dict, indices: list[int]) -> None:
    """The package's Feedback: one row per Episode with a summary whose end, success, steps and trace agree."""
    assert [(e["index"], e["status"], e["failure"]) for e in document["episodes"]] == [(i, "completed", None) for i in indices]
    values = document["values"]
    assert values["policy_failures"] == 0 and [row["index"] for row in values["episodes"]] == indices
    assert sum(values["ends"].values()) == len(indices) and set(values["ends"]) == END_CAUSES
    assert 0.0 <= values["success_rate"] <= 1.0 and "episodes.csv" in document["artifacts"]
    for row in values["episodes"]:
        summary = row["summary"]
        assert summary["end"] in END_CAUSES and summary["steps"] == row["steps"]
        assert summary["success"] is (summary["end"] == "goal_reached")
        assert isinstance(summary["trace"], str) and 0 < len(summary["trace"]) <= TRACE_LIMIT_CHARS
        assert summary["trace"].startswith(("0.", "1.0s ")) and summary["goal_spot"][:3] in ("a-b", "b-c")


def test_scripted_run_on_parking_submits_the_baseline_and_the_random_program(tmp_path, scope):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "benchmark": "parking",  # the catalogue's name for parking-v0 without its version
        "seed": 0,
        "budget": {"episodes": 8, "max_submissions": 2, "pool_size": 8},
        "validation": {"episodes": 4, "max_candidates": 2},
        "assessment": {"episodes": 4},
        "agent": {"kind": "scripted", "steps": [{"program": str(BASELINE), "episodes": "0:4"}, {"program": str(RANDOM), "episodes": "0:4"}],
                  "finish": "all"},
    }))
    run_dir = tmp_path / "run"
    result = run_cli(["run", str(spec), "-o", str(run_dir), "--json"], scope)
    assert result.returncode == 0, result.stderr[-4000:]
    manifest = json.loads((run_dir / "run.json").read_text())
    printed = json.loads(result.stdout)
    assert {key: printed[key] for key in manifest} == manifest  # what the CLI printed is run.json (and maybe more)
    assert manifest["terminal_reason"] == "finished" and manifest["phase"] == "done"
    assert manifest["validation"]["candidates"] == ["s0001", "s0002"]

    digests = {"s0001": capture_program(BASELINE).digest, "s0002": capture_program(RANDOM).digest}
    train = {}
    for submission_id, digest in digests.items():
        record = json.loads((run_dir / "submissions" / submission_id / "record.json").read_text())
        assert (record["program_digest"], record["selector"], record["indices"]) == (digest, "0:4", [0, 1, 2, 3])
        published = json.loads((run_dir / "workspace" / "feedback" / submission_id / "feedback.json").read_text())
        assert published == record["feedback"]
        assert_parking_feedback(published, [0, 1, 2, 3])
        csv_header = (run_dir / "workspace" / "feedback" / submission_id / "artifacts" / "episodes.csv").read_text().splitlines()[0]
        assert csv_header.endswith("success,end,final_distance_m,min_distance_m,final_heading_error_deg,final_speed_mps")
        train[submission_id] = published["values"]
    # Both Submissions replayed the same four pool Episodes: the same goal spots, whatever the Program did.
    assert [r["summary"]["goal_spot"] for r in train["s0001"]["episodes"]] == [r["summary"]["goal_spot"] for r in train["s0002"]["episodes"]]

    validation = json.loads((run_dir / "validation.json").read_text())
    scores = {r["submission_id"]: r["score"] for r in validation["results"]}
    assert validation["selected"] == max(scores, key=scores.get) == manifest["final"]["submission_id"]
    assert manifest["final"]["program_digest"] == digests[validation["selected"]]
    # The baseline is the Run's initial Program, assessed beside the selected one on the same held-out Episodes.
    assert manifest["final"]["is_initial_program"] is (validation["selected"] == "s0001")
    assessment = json.loads((run_dir / "assessment.json").read_text())
    assert len(assessment["episodes"]) == 4 and assessment["program_digest"] == manifest["final"]["program_digest"]
    assert manifest["assessment"]["score"] == assessment["score"] and manifest["assessment"]["policy_failures"] == 0

    # No hidden Episode reaches the agent's side.
    pool_payloads = [p["payload"] for p in json.loads((run_dir / "private" / "pool.json").read_text())]
    workspace_text = "".join(p.read_text(errors="replace") for p in (run_dir / "workspace").rglob("*") if p.is_file())
    assert pool_payloads and not any(payload in workspace_text for payload in pool_payloads)
    assert "parking-v0" in (run_dir / "workspace" / "TASK.md").read_text()
