"""A Run on CarRacing-v3 end to end: pixel observations, the package's Feedback and the Run's records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from orchestrator.kernel.program import capture_program

REPO = Path(__file__).resolve().parents[2]
BOX2D = REPO / "environments" / "box2d"
BASELINE, RANDOM = BOX2D / "baseline", BOX2D / "random"
END_CAUSES = {"fell", "finished", "left_playfield", "time_limit", "policy_failure"}
TRACE_LIMIT_CHARS = 2000


def run_cli(args: list[str], scope: str, timeout: float = 1500) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli.app", *args], capture_output=True, text=True,
        env={**os.environ, "EPG_SCOPE": scope}, cwd=REPO, timeout=timeout,
    )


def assert_carracing_feedback(document: dict, indices: list[int]) -> None:
    """The package's Feedback: one row per Episode with a summary whose end, steps, tiles and trace agree."""
    assert [(e["index"], e["status"], e["failure"]) for e in document["episodes"]] == [(i, "completed", None) for i in indices]
    values = document["values"]
    assert values["policy_failures"] == 0 and [row["index"] for row in values["episodes"]] == indices
    assert sum(values["ends"].values()) == len(indices) and set(values["ends"]) == END_CAUSES
    assert "episodes.csv" in document["artifacts"]
    for row in values["episodes"]:
        summary = row["summary"]
        assert summary["end"] in ("finished", "left_playfield", "time_limit") and summary["steps"] == row["steps"]
        assert 0 <= summary["tiles_visited"] <= summary["track_tiles"] and 0 <= summary["off_track_steps"] <= summary["steps"]
        assert isinstance(summary["trace"], str) and 0 < len(summary["trace"]) <= TRACE_LIMIT_CHARS
        assert summary["trace"].startswith("50 t")


def test_scripted_run_on_carracing_submits_the_baseline_and_the_random_program(tmp_path, scope):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "benchmark": "carracing",  # the package's alias of CarRacing-v3
        "seed": 0,
        "budget": {"episodes": 4, "max_submissions": 2, "pool_size": 4},
        "validation": {"episodes": 2, "max_candidates": 2},
        "assessment": {"episodes": 2},
        "agent": {"kind": "scripted", "steps": [{"program": str(BASELINE), "episodes": "0:2"}, {"program": str(RANDOM), "episodes": "0:2"}],
                  "finish": "all"},
    }))
    run_dir = tmp_path / "run"
    result = run_cli(["run", str(spec), "-o", str(run_dir), "--json"], scope)
    assert result.returncode == 0, result.stderr[-4000:]
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["terminal_reason"] == "finished" and manifest["phase"] == "done"
    assert manifest["validation"]["candidates"] == ["s0001", "s0002"]

    digests = {"s0001": capture_program(BASELINE).digest, "s0002": capture_program(RANDOM).digest}
    train = {}
    for submission_id, digest in digests.items():
        record = json.loads((run_dir / "submissions" / submission_id / "record.json").read_text())
        assert (record["program_digest"], record["selector"], record["indices"]) == (digest, "0:2", [0, 1])
        published = json.loads((run_dir / "workspace" / "feedback" / submission_id / "feedback.json").read_text())
        assert published == record["feedback"]
        assert_carracing_feedback(published, [0, 1])
        csv_header = (run_dir / "workspace" / "feedback" / submission_id / "artifacts" / "episodes.csv").read_text().splitlines()[0]
        assert csv_header.endswith("end,tiles_visited,track_tiles,tiles_fraction,off_track_steps,off_track_fraction")
        train[submission_id] = published["values"]
    # Both Submissions replayed the same two pool Episodes: the same tracks, whatever the Program did.
    assert [r["summary"]["track_tiles"] for r in train["s0001"]["episodes"]] == [r["summary"]["track_tiles"] for r in train["s0002"]["episodes"]]
    # The road follower covers far more of the track than uniform-random pedals do.
    assert min(r["summary"]["tiles_visited"] for r in train["s0001"]["episodes"]) > max(r["summary"]["tiles_visited"] for r in train["s0002"]["episodes"])

    validation = json.loads((run_dir / "validation.json").read_text())
    scores = {r["submission_id"]: r["score"] for r in validation["results"]}
    assert validation["selected"] == max(scores, key=scores.get) == "s0001" == manifest["final"]["submission_id"]
    assert manifest["final"]["program_digest"] == digests["s0001"] and manifest["final"]["is_initial_program"] is True
    assessment = json.loads((run_dir / "assessment.json").read_text())
    assert len(assessment["episodes"]) == 2 and assessment["program_digest"] == digests["s0001"]
    assert manifest["assessment"]["score"] == assessment["score"] > 0.0 and manifest["assessment"]["policy_failures"] == 0

    # No hidden Episode reaches the agent's side.
    pool_payloads = [p["payload"] for p in json.loads((run_dir / "private" / "pool.json").read_text())]
    workspace_text = "".join(p.read_text(errors="replace") for p in (run_dir / "workspace").rglob("*") if p.is_file())
    assert pool_payloads and not any(payload in workspace_text for payload in pool_payloads)
    assert "CarRacing-v3" in (run_dir / "workspace" / "TASK.md").read_text()
