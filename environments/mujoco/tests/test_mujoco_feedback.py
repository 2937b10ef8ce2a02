"""What the MuJoCo Benchmarks publish: end causes, means of the summary values, a bounded trace and Feedback, the CSV."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from epg_env_mujoco import END_CAUSES, POLICY_FAILURE, make_ant_benchmark, make_halfcheetah_benchmark
from epg_env_mujoco.mujoco_benchmark import MAX_DETAILED_EPISODES
from epg_sdk.benchmark import Benchmark, EpisodeRecord
from epg_sdk.checks import FEEDBACK_LIMIT_BYTES, feedback_bytes
from epg_sdk.protocol import values
from epg_sdk.trace import TRACE_LIMIT_CHARS


@pytest.fixture(scope="module")
def ant() -> Benchmark:
    return make_ant_benchmark()


def _records(count: int, failed: set[int]) -> list[EpisodeRecord]:
    return [
        EpisodeRecord(
            index=i, status="policy_failure" if i in failed else "completed", failure="timeout" if i in failed else None,
            steps=1000, total_reward=900.0 + i, terminated=False, truncated=True,
            summary={"end": "time_limit", "steps": 1000, "x_distance_m": float(i), "mean_x_velocity_mps": 0.5,
                     "control_cost": 10.0, "forward_reward": 50.0, "healthy_steps": 1000, "contact_cost": 1.0,
                     "final_torso_z_m": 0.5, "trace": "x" * TRACE_LIMIT_CHARS, "trace_truncated": True},
        )
        for i in range(count)
    ]


def test_feedback_counts_end_causes_averages_the_completed_episodes_and_marks_failures(ant: Benchmark) -> None:
    feedback = ant.feedback(_records(4, failed={1}))
    assert feedback.values["ends"] == {**dict.fromkeys(END_CAUSES, 0), "time_limit": 3, POLICY_FAILURE: 1}
    assert feedback.values["means"]["x_distance_m"] == pytest.approx((0 + 2 + 3) / 3, abs=1e-3)
    assert feedback.values["means"]["healthy_steps"] == 1000 and feedback.values["mean_steps"] == 1000
    failed = feedback.values["episodes"][1]
    assert (failed["status"], failed["scored_return"], failed["summary"]["end"]) == ("policy_failure", -10000.0, POLICY_FAILURE)
    assert feedback.score == pytest.approx((900 + 902 + 903 - 10000) / 4)


def test_feedback_of_many_episodes_stays_bounded_and_the_csv_keeps_every_one(ant: Benchmark) -> None:
    count = 1024
    feedback = ant.feedback(_records(count, failed=set()))
    assert feedback_bytes(feedback) < FEEDBACK_LIMIT_BYTES
    assert feedback.values["shortened_summaries"] == count - MAX_DETAILED_EPISODES
    late = feedback.values["episodes"][MAX_DETAILED_EPISODES]["summary"]
    assert late == {"end": "time_limit", "steps": 1000}
    rows = list(csv.DictReader(io.StringIO(feedback.artifacts["episodes.csv"].decode())))
    assert len(rows) == count and rows[-1]["x_distance_m"] == str(float(count - 1)) and "trace" not in rows[0]
    assert list(rows[0])[-7:] == ["x_distance_m", "mean_x_velocity_mps", "control_cost", "forward_reward",
                                   "healthy_steps", "contact_cost", "final_torso_z_m"]


def test_the_trace_of_a_whole_halfcheetah_episode_is_bounded_and_ends_at_the_last_step() -> None:
    benchmark = make_halfcheetah_benchmark()
    environment = benchmark.make_environment(benchmark.plan("train", 0, 1)[0])
    environment.reset()
    for step in range(1000):
        environment.step(np.full(6, 0.3 if step % 20 < 10 else -0.3, dtype=np.float32))
    summary = environment.summary()
    environment.close()
    assert summary["end"] == "time_limit" and summary["steps"] == 1000
    tokens = summary["trace"].split("; ")
    assert 0 < len(summary["trace"]) <= TRACE_LIMIT_CHARS
    assert tokens[0].startswith("t50 x") and tokens[-1].startswith("t1000 x") and len(tokens) == 20
    assert len(values.encode(summary).SerializeToString()) < 4096
