"""The baseline and the uniform-random Program on every Benchmark, in-process (epg_sdk.testing.evaluate_locally)."""

from __future__ import annotations

from pathlib import Path

import pytest

import epg_env_mujoco
from epg_env_mujoco import ANT_ID, HALFCHEETAH_ID, HORIZONS, PUSHER_ID, REACHER_ID
from epg_sdk.testing import evaluate_locally

PACKAGE = Path(__file__).resolve().parents[1]
FACTORIES = {
    HALFCHEETAH_ID: epg_env_mujoco.make_halfcheetah_benchmark,
    ANT_ID: epg_env_mujoco.make_ant_benchmark,
    PUSHER_ID: epg_env_mujoco.make_pusher_benchmark,
    REACHER_ID: epg_env_mujoco.make_reacher_benchmark,
}
EPISODES = 2


@pytest.fixture(scope="module")
def feedbacks() -> dict[tuple[str, str], object]:
    return {(benchmark_id, program): evaluate_locally(factory(), PACKAGE / program, episodes=EPISODES)
            for benchmark_id, factory in FACTORIES.items() for program in ("baseline", "random")}


@pytest.mark.parametrize("program", ["baseline", "random"])
@pytest.mark.parametrize("benchmark_id", list(FACTORIES))
def test_the_program_completes_every_episode(feedbacks, benchmark_id, program) -> None:
    feedback = feedbacks[(benchmark_id, program)]
    episodes = feedback.values["episodes"]
    assert [(e["status"], e["failure"]) for e in episodes] == [("completed", None)] * EPISODES
    assert feedback.values["policy_failures"] == 0 and sum(feedback.values["ends"].values()) == EPISODES
    for row in episodes:
        summary = row["summary"]
        assert summary["steps"] == row["steps"] and 0 < row["steps"] <= HORIZONS[benchmark_id]
        assert summary["end"] == ("time_limit" if row["steps"] == HORIZONS[benchmark_id] else "unhealthy")
        assert summary["control_cost"] >= 0 and isinstance(summary["trace"], str) and summary["trace"]


@pytest.mark.parametrize("benchmark_id", list(FACTORIES))
def test_the_baseline_beats_the_uniform_random_program(feedbacks, benchmark_id) -> None:
    assert feedbacks[(benchmark_id, "baseline")].score > feedbacks[(benchmark_id, "random")].score


def test_the_baseline_runs_the_cheetah_forwards_and_keeps_the_ant_healthy(feedbacks) -> None:
    cheetah = feedbacks[(HALFCHEETAH_ID, "baseline")].values["means"]
    assert cheetah["x_distance_m"] > 20 and cheetah["mean_x_velocity_mps"] > 0.4
    ant = feedbacks[(ANT_ID, "baseline")].values
    assert ant["ends"]["time_limit"] == EPISODES and ant["means"]["healthy_steps"] == 1000


def test_the_baseline_brings_the_reacher_fingertip_to_its_target(feedbacks) -> None:
    means = feedbacks[(REACHER_ID, "baseline")].values["means"]
    assert means["final_fingertip_target_distance_m"] < 0.5 * means["initial_fingertip_target_distance_m"]


def test_random_actions_span_the_box_and_cost_what_uniform_draws_cost(feedbacks) -> None:
    # E|a|^2 of a uniform draw in [-b, b]^n is n b^2 / 3: Reacher's control cost is about 2/3 per step.
    means = feedbacks[(REACHER_ID, "random")].values["means"]
    assert means["control_cost"] == pytest.approx(50 * 2 / 3, rel=0.25)
    pusher = feedbacks[(PUSHER_ID, "random")].values["means"]
    assert pusher["control_cost"] == pytest.approx(100 * 0.1 * 7 * 4 / 3, rel=0.25)
