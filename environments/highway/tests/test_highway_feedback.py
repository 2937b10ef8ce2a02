"""Tests of what the highway-env Benchmarks publish: the bounded trace, end causes, rates and the CSV artifact."""

from __future__ import annotations

import csv
import io

import pytest

from epg_env_highway import make_parking_benchmark, make_roundabout_benchmark
from epg_env_highway.highway_benchmark import END_CAUSES, MAX_DETAILED_EPISODES, POLICY_FAILURE
from epg_sdk.benchmark import Benchmark, EpisodeRecord
from epg_sdk.checks import FEEDBACK_LIMIT_BYTES, feedback_bytes
from epg_sdk.protocol import values
from epg_sdk.trace import TRACE_LIMIT_CHARS, BoundedTrace, omission_marker


@pytest.fixture(scope="module")
def parking() -> Benchmark:
    return make_parking_benchmark()


@pytest.fixture(scope="module")
def roundabout() -> Benchmark:
    return make_roundabout_benchmark()


def test_a_short_trace_is_kept_whole() -> None:
    trace = BoundedTrace(limit=100)
    for step in range(5):
        trace.add(f"{step}s IDLE")
    assert trace.render() == ("0s IDLE; 1s IDLE; 2s IDLE; 3s IDLE; 4s IDLE", False)


def test_a_long_trace_keeps_its_head_and_a_longer_tail_around_a_marker() -> None:
    trace = BoundedTrace(limit=200)
    for step in range(1000):
        trace.add(f"step{step:04d}")
    text, truncated = trace.render()
    assert truncated and len(text) <= 200
    tokens = text.split("; ")
    marker = next(t for t in tokens if t.startswith("..."))
    head, tail = tokens[: tokens.index(marker)], tokens[tokens.index(marker) + 1:]
    assert head == [f"step{i:04d}" for i in range(len(head))] and len(head) >= 3
    assert tail == [f"step{i:04d}" for i in range(1000 - len(tail), 1000)] and len(tail) > len(head)
    assert marker == omission_marker(1000 - len(head) - len(tail))


def test_trace_tokens_stay_ascii_and_cannot_forge_a_separator() -> None:
    trace = BoundedTrace(limit=100)
    trace.add("v=1.0; crash")
    trace.add("caf\u00e9")
    assert trace.render() == ("v=1.0, crash; caf?", False)


def test_a_trace_bound_below_the_marker_is_refused() -> None:
    with pytest.raises(ValueError):
        BoundedTrace(limit=20)


def _records(count: int, failed: set[int]) -> list[EpisodeRecord]:
    return [
        EpisodeRecord(
            index=i, status="policy_failure" if i in failed else "completed", failure="timeout" if i in failed else None,
            steps=11, total_reward=9.0, terminated=False, truncated=True,
            summary={"success": True, "end": "time_limit", "steps": 11, "off_road_steps": 0, "lane_changes": 1,
                     "mean_speed_mps": 8.0, "final_speed_mps": 8.0, "final_lane": "se-ex-1", "trace": "x" * TRACE_LIMIT_CHARS,
                     "trace_truncated": True},
        )
        for i in range(count)
    ]


def test_feedback_counts_the_end_causes_and_marks_policy_failures(roundabout: Benchmark) -> None:
    feedback = roundabout.feedback(_records(4, failed={1}))
    assert feedback.values["ends"] == {**dict.fromkeys(END_CAUSES, 0), "time_limit": 3, POLICY_FAILURE: 1}
    assert feedback.values["success_rate"] == 0.75 and feedback.values["mean_steps"] == 11.0
    failed = feedback.values["episodes"][1]
    assert (failed["status"], failed["failure"], failed["scored_return"]) == ("policy_failure", "timeout", -1.0)
    assert (failed["summary"]["end"], failed["summary"]["success"]) == (POLICY_FAILURE, False)
    assert feedback.score == pytest.approx((3 * 9.0 - 1.0) / 4)


def test_feedback_keeps_the_whole_summaries_of_the_first_episodes_only(roundabout: Benchmark) -> None:
    count = MAX_DETAILED_EPISODES + 72
    feedback = roundabout.feedback(_records(count, failed={MAX_DETAILED_EPISODES + 1}))
    summaries = [row["summary"] for row in feedback.values["episodes"]]
    assert [s["trace"] for s in summaries[:MAX_DETAILED_EPISODES]] == ["x" * TRACE_LIMIT_CHARS] * MAX_DETAILED_EPISODES
    assert summaries[MAX_DETAILED_EPISODES] == {"success": True, "end": "time_limit"}
    assert summaries[MAX_DETAILED_EPISODES + 1] == {"success": False, "end": POLICY_FAILURE}
    assert feedback.values["shortened_summaries"] == 72 and len(summaries) == count
    assert feedback.values["ends"]["time_limit"] == count - 1  # counted from the whole summaries
    # The CSV keeps every Episode's summary values.
    rows = list(csv.DictReader(io.StringIO(feedback.artifacts["episodes.csv"].decode())))
    assert len(rows) == count and rows[-1]["final_lane"] == "se-ex-1"


def test_feedback_of_an_evaluation_far_beyond_a_submission_stays_within_the_bound(parking: Benchmark) -> None:
    feedback = parking.feedback(_records(2048, failed=set(range(0, 2048, 7))))
    assert feedback_bytes(feedback) < FEEDBACK_LIMIT_BYTES


def test_the_csv_artifact_carries_the_end_and_the_benchmark_columns(roundabout: Benchmark) -> None:
    feedback = roundabout.feedback(_records(3, failed={2}))
    rows = list(csv.DictReader(io.StringIO(feedback.artifacts["episodes.csv"].decode())))
    assert [(r["index"], r["status"], r["end"], r["success"]) for r in rows] == [
        ("0", "completed", "time_limit", "True"), ("1", "completed", "time_limit", "True"), ("2", "policy_failure", "policy_failure", "False")]
    assert rows[0]["lane_changes"] == "1" and rows[0]["final_lane"] == "se-ex-1"
    assert "trace" not in rows[0]


def test_summaries_hold_no_hidden_payload(parking: Benchmark, roundabout: Benchmark) -> None:
    for benchmark in (parking, roundabout):
        payload = benchmark.plan("test", 9, 1)[0]
        environment = benchmark.make_environment(payload)
        environment.reset()
        for _ in range(3):
            environment.step(benchmark.validate_action(1 if benchmark is roundabout else [0.5, 0.5]))
        summary = environment.summary()
        encoded = values.encode(summary).SerializeToString()
        seed = str(int(payload.decode().split(":")[1].strip(" }")))
        assert payload not in encoded and seed.encode() not in encoded
        assert "seed" not in summary
