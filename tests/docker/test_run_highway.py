"""A Run on highway-env's parking-v0 end to end: dict observations, the package's Feedback and the Run's records."""

from __future__ import annotations

from pathlib import Path

from support.scripted_runs import assert_every_episode_completed, run_baseline_and_random

REPO = Path(__file__).resolve().parents[2]
HIGHWAY = REPO / "environments" / "highway"
END_CAUSES = {"goal_reached", "crash", "off_road", "time_limit", "policy_failure"}
TRACE_LIMIT_CHARS = 2000


def assert_parking_feedback(document: dict, indices: list[int]) -> None:
    """The package's Feedback: one row per Episode with a summary whose end, success, steps and trace agree."""
    assert_every_episode_completed(document, indices)
    values = document["values"]
    assert sum(values["ends"].values()) == len(indices) and set(values["ends"]) == END_CAUSES
    assert 0.0 <= values["success_rate"] <= 1.0 and "episodes.csv" in document["artifacts"]
    for row in values["episodes"]:
        summary = row["summary"]
        assert summary["end"] in END_CAUSES and summary["steps"] == row["steps"]
        assert summary["success"] is (summary["end"] == "goal_reached")
        assert isinstance(summary["trace"], str) and 0 < len(summary["trace"]) <= TRACE_LIMIT_CHARS
        assert summary["trace"].startswith(("0.", "1.0s ")) and summary["goal_spot"][:3] in ("a-b", "b-c")


def test_scripted_run_on_parking_submits_the_baseline_and_the_random_program(tmp_path, scope):
    # "parking" is the catalogue's name for parking-v0 without its version.
    # Two Episodes per Submission (and of the Validation and the Assessment): enough for every claim below.
    run = run_baseline_and_random("parking", HIGHWAY, 2, benchmark_id="parking-v0", tmp_path=tmp_path, scope=scope, timeout=1200)
    for submission_id, published in run.feedback.items():
        assert_parking_feedback(published, [0, 1])
        csv_header = run.artifact_text(submission_id, "episodes.csv").splitlines()[0]
        assert csv_header.endswith("success,end,final_distance_m,min_distance_m,final_heading_error_deg,final_speed_mps")
    train = {sid: published["values"] for sid, published in run.feedback.items()}
    # Both Submissions replayed the same two pool Episodes: the same goal spots, whatever the Program did.
    assert [r["summary"]["goal_spot"] for r in train["s0001"]["episodes"]] == [r["summary"]["goal_spot"] for r in train["s0002"]["episodes"]]
