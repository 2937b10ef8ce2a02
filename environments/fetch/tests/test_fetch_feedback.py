"""Tests of what the Fetch Benchmarks publish: end causes, success rate, distances, the CSV artifact and the bound."""

from __future__ import annotations

import csv
import io

import pytest

from epg_env_fetch import END_CAUSES, make_pick_and_place_benchmark, make_push_benchmark
from epg_env_fetch.fetch_benchmark import MAX_DETAILED_EPISODES, POLICY_FAILURE, TIME_LIMIT
from epg_sdk.benchmark import Benchmark, EpisodeRecord
from epg_sdk.checks import FEEDBACK_LIMIT_BYTES, feedback_bytes

TRACE = "; ".join(f"{step}:{12.3 - step / 10:.1f}" for step in range(0, 51, 5))


@pytest.fixture(scope="module")
def push() -> Benchmark:
    return make_push_benchmark()


def _records(count: int, failed: set[int], success: set[int] = frozenset()) -> list[EpisodeRecord]:
    return [
        EpisodeRecord(
            index=i, status="policy_failure" if i in failed else "completed", failure="timeout" if i in failed else None,
            steps=50, total_reward=-10.0 if i in success else -50.0, terminated=False, truncated=True,
            summary={"success": i in success, "end": TIME_LIMIT, "steps": 50, "final_distance_m": 0.02 if i in success else 0.12,
                     "min_distance_m": 0.01, "success_steps": 40 if i in success else 0, "first_success_step": 11 if i in success else -1,
                     "trace": TRACE, "trace_truncated": False},
        )
        for i in range(count)
    ]


def test_feedback_counts_ends_successes_and_distances_and_marks_policy_failures(push: Benchmark) -> None:
    feedback = push.feedback(_records(4, failed={1}, success={0, 1, 2}))
    assert feedback.values["ends"] == {TIME_LIMIT: 3, POLICY_FAILURE: 1}
    assert feedback.values["success_rate"] == 0.5  # the failed Episode's success is withdrawn
    assert feedback.values["mean_final_distance_m"] == pytest.approx((0.02 * 3 + 0.12) / 4)
    assert feedback.values["mean_steps"] == 50.0 and feedback.values["shortened_summaries"] == 0
    failed = feedback.values["episodes"][1]
    assert (failed["status"], failed["failure"], failed["scored_return"]) == ("policy_failure", "timeout", -50.0)
    assert (failed["summary"]["end"], failed["summary"]["success"]) == (POLICY_FAILURE, False)
    assert feedback.score == pytest.approx((-10.0 - 50.0 - 10.0 - 50.0) / 4)
    assert set(END_CAUSES) == {TIME_LIMIT, POLICY_FAILURE}


def test_feedback_keeps_the_whole_summaries_of_the_first_episodes_only(push: Benchmark) -> None:
    count = MAX_DETAILED_EPISODES + 10
    feedback = push.feedback(_records(count, failed={MAX_DETAILED_EPISODES + 1}))
    summaries = [row["summary"] for row in feedback.values["episodes"]]
    assert [s["trace"] for s in summaries[:MAX_DETAILED_EPISODES]] == [TRACE] * MAX_DETAILED_EPISODES
    assert summaries[MAX_DETAILED_EPISODES] == {"success": False, "end": TIME_LIMIT, "final_distance_m": 0.12}
    assert summaries[MAX_DETAILED_EPISODES + 1] == {"success": False, "end": POLICY_FAILURE, "final_distance_m": 0.12}
    assert feedback.values["shortened_summaries"] == 10 and len(summaries) == count
    rows = list(csv.DictReader(io.StringIO(feedback.artifacts["episodes.csv"].decode())))
    assert len(rows) == count and rows[-1]["min_distance_m"] == "0.01" and "trace" not in rows[-1]


def test_the_csv_artifact_carries_one_row_per_episode_with_its_summary_values(push: Benchmark) -> None:
    feedback = push.feedback(_records(3, failed={2}, success={0}))
    rows = list(csv.DictReader(io.StringIO(feedback.artifacts["episodes.csv"].decode())))
    assert [(r["index"], r["status"], r["end"], r["success"], r["final_distance_m"]) for r in rows] == [
        ("0", "completed", TIME_LIMIT, "True", "0.02"), ("1", "completed", TIME_LIMIT, "False", "0.12"),
        ("2", "policy_failure", POLICY_FAILURE, "False", "0.12")]
    assert (rows[0]["success_steps"], rows[0]["first_success_step"], rows[1]["first_success_step"]) == ("40", "11", "-1")


@pytest.mark.parametrize("make", [make_push_benchmark, make_pick_and_place_benchmark], ids=["push", "pick_and_place"])
def test_feedback_of_an_evaluation_far_beyond_a_submission_stays_within_the_bound(make) -> None:
    feedback = make().feedback(_records(2048, failed=set(range(0, 2048, 7)), success=set(range(0, 2048, 3))))
    size = feedback_bytes(feedback)
    assert 0 < size < FEEDBACK_LIMIT_BYTES


def test_a_feedback_of_no_episodes_is_well_formed(push: Benchmark) -> None:
    feedback = push.feedback([])
    assert (feedback.values["success_rate"], feedback.values["mean_final_distance_m"], feedback.values["mean_steps"]) == (0.0, -1.0, 0.0)
    assert feedback.artifacts["episodes.csv"].decode().splitlines() == [
        "index,status,failure,steps,return,scored_return,success,end,final_distance_m,min_distance_m,success_steps,first_success_step"]
