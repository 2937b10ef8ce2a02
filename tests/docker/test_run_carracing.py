"""A Run on CarRacing-v3 end to end: pixel observations, the package's Feedback and the Run's records."""

from __future__ import annotations

from pathlib import Path

from support.scripted_runs import assert_every_episode_completed, run_baseline_and_random

REPO = Path(__file__).resolve().parents[2]
BOX2D = REPO / "environments" / "box2d"
END_CAUSES = {"fell", "finished", "left_playfield", "time_limit", "policy_failure"}
TRACE_LIMIT_CHARS = 2000


def assert_carracing_feedback(document: dict, indices: list[int]) -> None:
    """The package's Feedback: one row per Episode with a summary whose end, steps, tiles and trace agree."""
    assert_every_episode_completed(document, indices)
    values = document["values"]
    assert sum(values["ends"].values()) == len(indices) and set(values["ends"]) == END_CAUSES
    assert "episodes.csv" in document["artifacts"]
    for row in values["episodes"]:
        summary = row["summary"]
        assert summary["end"] in ("finished", "left_playfield", "time_limit") and summary["steps"] == row["steps"]
        assert 0 <= summary["tiles_visited"] <= summary["track_tiles"] and 0 <= summary["off_track_steps"] <= summary["steps"]
        assert isinstance(summary["trace"], str) and 0 < len(summary["trace"]) <= TRACE_LIMIT_CHARS
        assert summary["trace"].startswith("50 t")


def test_scripted_run_on_carracing_submits_the_baseline_and_the_random_program(tmp_path, scope):
    # "carracing" is the package's alias of CarRacing-v3.
    run = run_baseline_and_random("carracing", BOX2D, 2, benchmark_id="CarRacing-v3", tmp_path=tmp_path, scope=scope, timeout=1500)
    for submission_id, published in run.feedback.items():
        assert_carracing_feedback(published, [0, 1])
        csv_header = run.artifact_text(submission_id, "episodes.csv").splitlines()[0]
        assert csv_header.endswith("end,tiles_visited,track_tiles,tiles_fraction,off_track_steps,off_track_fraction")
    train = {sid: published["values"] for sid, published in run.feedback.items()}
    # Both Submissions replayed the same two pool Episodes: the same tracks, whatever the Program did.
    assert [r["summary"]["track_tiles"] for r in train["s0001"]["episodes"]] == [r["summary"]["track_tiles"] for r in train["s0002"]["episodes"]]
    # The road follower covers far more of the track than uniform-random pedals do.
    assert min(r["summary"]["tiles_visited"] for r in train["s0001"]["episodes"]) > max(r["summary"]["tiles_visited"] for r in train["s0002"]["episodes"])

    # The road follower is selected, so the final Program is the initial one, and it scores above zero on held-out tracks.
    assert run.validation["selected"] == "s0001" == run.manifest["final"]["submission_id"]
    assert run.manifest["final"]["program_digest"] == run.digests["s0001"] and run.manifest["final"]["is_initial_program"] is True
    assert run.assessment["program_digest"] == run.digests["s0001"] and run.manifest["assessment"]["score"] > 0.0
