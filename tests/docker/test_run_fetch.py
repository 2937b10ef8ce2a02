"""A Run on FetchPush-v4 end to end: dict observations, the package's Feedback and the Run's records."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from support.scripted_runs import assert_every_episode_completed, run_baseline_and_random

REPO = Path(__file__).resolve().parents[2]
FETCH = REPO / "environments" / "fetch"
END_CAUSES = {"time_limit", "policy_failure"}
TRACE_LIMIT_CHARS = 2000


def assert_push_feedback(document: dict, indices: list[int]) -> None:
    """The package's Feedback: one row per Episode of 50 steps whose summary, return and trace agree."""
    assert_every_episode_completed(document, indices)
    values = document["values"]
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
    # "fetchpush" is the package's alias of FetchPush-v4.
    # Two Episodes per Submission (and of the Validation and the Assessment): enough for every claim below.
    run = run_baseline_and_random("fetchpush", FETCH, 2, benchmark_id="FetchPush-v4", tmp_path=tmp_path, scope=scope, timeout=1200)
    train = {}
    for submission_id, published in run.feedback.items():
        assert_push_feedback(published, [0, 1])
        rows = list(csv.DictReader(io.StringIO(run.artifact_text(submission_id, "episodes.csv"))))
        assert [row["index"] for row in rows] == ["0", "1"] and "trace" not in rows[0]
        train[submission_id] = published["values"]
    # Both Submissions replayed the same two pool Episodes: the same start distance, whatever the Program did.
    starts = {sid: [r["summary"]["trace"].split("; ")[0] for r in values["episodes"]] for sid, values in train.items()}
    # (The start tokens are rounded to 0.1, so two Episodes may share one: only their order and count are asserted.)
    assert starts["s0001"] == starts["s0002"] and len(starts["s0001"]) == 2
    assert all(token.startswith("0:") for token in starts["s0001"])
