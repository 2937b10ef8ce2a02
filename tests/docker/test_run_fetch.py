"""A Run on FetchPush-v4 end to end: dict observations, the package's Feedback and the Run's records."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from orchestrator.kernel.program import capture_program

REPO = Path(__file__).resolve().parents[2]
FETCH = REPO / "environments" / "fetch"
BASELINE, RANDOM = FETCH / "baseline", FETCH / "random"
END_CAUSES = {"time_limit", "policy_failure"}
TRACE_LIMIT_CHARS = 2000


def run_cli(args: list[str], scope: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.cli.app", *args], capture_output=True, text=True,
        env={**os.environ, "EPG_SCOPE": scope}, cwd=REPO, timeout=timeout,
    )


def assert_push_feedback(document: dict, indices: list[int]) -> None:
    """The package's Feedback: one row per Episode of 50 steps whose summary, return and trace agree."""
    assert [(e["index"], e["status"], e["failure"]) for e in document["episodes"]] == [(i, "completed", None) for i in indices]
    values = document["values"]
    assert values["policy_failures"] == 0 and [row["index"] for row in values["episodes"]] == indices
    assert values["ends"] == {"time_limit": len(indices), "policy_failure": 0}
    assert 0.0 <= values["success_rate"] <= 1.0 and values["mean_steps"] == 50.0 and "episodes.csv" in document["artifacts"]
    for row in values["episodes"]:
        summary = row["summary"]
        assert summary["end"] == "time_limit" and summary["steps"] == row["steps"] == 50
        assert row["return"] == -50.0 + summary["success_steps"]
        # success is the unrounded distance under 5 cm; the summary rounds it to 0.1 mm, so 0.05 may be either
        assert (summary["final_distance_m"] <= 0.05) if summary["success"] else (summary["final_distance_m"] >= 0.05)
        tokens = summary["trace"].split("; ")
        assert len(summary["trace"]) <= TRACE_LIMIT_CHARS and [t.split(":")[0] for t in tokens] == [str(s) for s in range(0, 51, 5)]
        assert abs(float(tokens[-1].split(":")[1].rstrip("*")) - 100 * summary["final_distance_m"]) <= 0.051  # cm, from metres


def test_scripted_run_on_fetch_push_submits_the_baseline_and_the_random_program(tmp_path, scope):
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump({
        "benchmark": "fetchpush",  # the package's alias of FetchPush-v4
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
    assert {key: printed[key] for key in manifest} == manifest
    assert manifest["terminal_reason"] == "finished" and manifest["phase"] == "done"
    assert manifest["validation"]["candidates"] == ["s0001", "s0002"]

    digests = {"s0001": capture_program(BASELINE).digest, "s0002": capture_program(RANDOM).digest}
    train = {}
    for submission_id, digest in digests.items():
        record = json.loads((run_dir / "submissions" / submission_id / "record.json").read_text())
        assert (record["program_digest"], record["selector"], record["indices"]) == (digest, "0:4", [0, 1, 2, 3])
        published = json.loads((run_dir / "workspace" / "feedback" / submission_id / "feedback.json").read_text())
        assert published == record["feedback"]
        assert_push_feedback(published, [0, 1, 2, 3])
        rows = list(csv.DictReader(io.StringIO((run_dir / "workspace" / "feedback" / submission_id / "artifacts" / "episodes.csv").read_text())))
        assert [row["index"] for row in rows] == ["0", "1", "2", "3"] and "trace" not in rows[0]
        train[submission_id] = published["values"]
    # Both Submissions replayed the same four pool Episodes: the same start distance, whatever the Program did.
    starts = {sid: [r["summary"]["trace"].split("; ")[0] for r in values["episodes"]] for sid, values in train.items()}
    # (The start tokens are rounded to 0.1, so two Episodes may share one: only their order and count are asserted.)
    assert starts["s0001"] == starts["s0002"] and len(starts["s0001"]) == 4
    assert all(token.startswith("0:") for token in starts["s0001"])

    validation = json.loads((run_dir / "validation.json").read_text())
    scores = {r["submission_id"]: r["score"] for r in validation["results"]}
    assert validation["selected"] == max(scores, key=scores.get) == manifest["final"]["submission_id"]
    assert manifest["final"]["program_digest"] == digests[validation["selected"]]
    assert manifest["final"]["is_initial_program"] is (validation["selected"] == "s0001")
    assessment = json.loads((run_dir / "assessment.json").read_text())
    assert len(assessment["episodes"]) == 4 and assessment["program_digest"] == manifest["final"]["program_digest"]
    assert manifest["assessment"]["score"] == assessment["score"] and manifest["assessment"]["policy_failures"] == 0

    pool_payloads = [p["payload"] for p in json.loads((run_dir / "private" / "pool.json").read_text())]
    workspace_text = "".join(p.read_text(errors="replace") for p in (run_dir / "workspace").rglob("*") if p.is_file())
    assert pool_payloads and not any(payload in workspace_text for payload in pool_payloads)
    assert "FetchPush-v4" in (run_dir / "workspace" / "TASK.md").read_text()
