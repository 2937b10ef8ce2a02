"""Tests of what the Box2D Benchmarks publish: end causes, bounded summaries and traces, the CSV artifact, no seeds."""

from __future__ import annotations

import csv
import io
import json

import pytest

from epg_env_box2d import make_bipedal_benchmark, make_carracing_benchmark
from epg_env_box2d.box2d_benchmark import END_CAUSES, MAX_DETAILED_EPISODES, POLICY_FAILURE
from epg_sdk.benchmark import Benchmark, EpisodeRecord
from epg_sdk.checks import FEEDBACK_LIMIT_BYTES, feedback_bytes
from epg_sdk.trace import TRACE_LIMIT_CHARS, BoundedTrace


@pytest.fixture(scope="module")
def bipedal() -> Benchmark:
    return make_bipedal_benchmark()


@pytest.fixture(scope="module")
def carracing() -> Benchmark:
    return make_carracing_benchmark()


def _records(count: int, failed: set[int]) -> list[EpisodeRecord]:
    return [
        EpisodeRecord(
            index=i, status="policy_failure" if i in failed else "completed", failure="timeout" if i in failed else None,
            steps=1000, total_reward=500.0, terminated=False, truncated=True,
            summary={"end": "time_limit", "steps": 1000, "tiles_visited": 150, "track_tiles": 300, "tiles_fraction": 0.5,
                     "off_track_steps": 12, "off_track_fraction": 0.012, "trace": "x" * TRACE_LIMIT_CHARS, "trace_truncated": True},
        )
        for i in range(count)
    ]


def test_a_long_episode_trace_stays_within_its_bound() -> None:
    trace = BoundedTrace()
    for step in range(1, 1601):
        trace.add(f"{step} x{step / 10:.1f} a+0.00 c10")
    text, truncated = trace.render()
    assert truncated and len(text) <= TRACE_LIMIT_CHARS
    assert text.startswith("1 x0.1 ") and text.endswith("1600 x160.0 a+0.00 c10") and "steps omitted" in text


def test_feedback_counts_the_end_causes_and_marks_policy_failures(carracing: Benchmark) -> None:
    feedback = carracing.feedback(_records(4, failed={2}))
    assert feedback.values["ends"] == {**dict.fromkeys(END_CAUSES, 0), "time_limit": 3, POLICY_FAILURE: 1}
    assert feedback.values["mean_steps"] == 1000.0 and feedback.values["policy_failures"] == 1
    failed = feedback.values["episodes"][2]
    assert (failed["status"], failed["scored_return"], failed["summary"]["end"]) == ("policy_failure", -200.0, POLICY_FAILURE)
    assert feedback.score == pytest.approx((3 * 500.0 - 200.0) / 4)


def test_feedback_of_many_episodes_is_bounded_and_shortens_later_summaries(bipedal: Benchmark) -> None:
    count = 1024
    feedback = bipedal.feedback(_records(count, failed={5}))
    size = feedback_bytes(feedback)
    assert size <= FEEDBACK_LIMIT_BYTES, size
    rows = feedback.values["episodes"]
    assert len(rows) == count and feedback.values["shortened_summaries"] == count - MAX_DETAILED_EPISODES
    assert "trace" in rows[MAX_DETAILED_EPISODES - 1]["summary"]
    assert rows[MAX_DETAILED_EPISODES]["summary"] == {"end": "time_limit", "steps": 1000}


def test_the_csv_artifact_has_one_row_per_episode_without_the_trace(carracing: Benchmark) -> None:
    feedback = carracing.feedback(_records(3, failed={1}))
    rows = list(csv.DictReader(io.StringIO(feedback.artifacts["episodes.csv"].decode())))
    assert [row["index"] for row in rows] == ["0", "1", "2"]
    assert [row["end"] for row in rows] == ["time_limit", POLICY_FAILURE, "time_limit"]
    assert rows[0]["tiles_visited"] == "150" and rows[0]["off_track_steps"] == "12" and "trace" not in rows[0]


def test_real_feedback_holds_no_episode_seed(bipedal: Benchmark) -> None:
    payloads = bipedal.plan("validation", 3, 2)
    records = []
    for index, payload in enumerate(payloads):
        environment = bipedal.make_environment(payload)
        environment.reset()
        for _ in range(5):
            environment.step(bipedal.validate_action([0.0, 0.0, 0.0, 0.0]))
        records.append(EpisodeRecord(index=index, status="completed", failure=None, steps=5, total_reward=0.0, terminated=False,
                                     truncated=False, summary=environment.summary()))
        environment.close()
    feedback = bipedal.feedback(records)
    text = json.dumps(feedback.values, default=str) + feedback.artifacts["episodes.csv"].decode()
    for payload in payloads:
        seed = str(json.loads(payload)["seed"])
        assert seed not in text
