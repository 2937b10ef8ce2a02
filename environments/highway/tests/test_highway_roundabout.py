"""Tests of the roundabout-v0 Benchmark: spec, conformance, kinematic observations, reward, termination, actions and summary."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from epg_env_highway import make_roundabout_benchmark
from epg_env_highway.highway_benchmark import CRASH, OFF_ROAD, TIME_LIMIT
from epg_env_highway.roundabout import RoundaboutEnvironment
from epg_sdk.benchmark import Benchmark, InvalidAction
from epg_sdk.checks import check_benchmark, cycle_actions
from epg_sdk.testing import drive_environment

LANE_LEFT, IDLE, LANE_RIGHT, FASTER, SLOWER = range(5)


def normalised(value: float) -> float:
    """highway-env's roundabout reward: the weighted sum mapped from [-1, 0.2] onto [0, 1]."""
    return (value + 1.0) / 1.2


@pytest.fixture(scope="module")
def benchmark() -> Benchmark:
    return make_roundabout_benchmark()


def test_spec(benchmark: Benchmark) -> None:
    spec = benchmark.spec
    assert spec.id == "roundabout-v0"
    assert (spec.horizon, spec.failure_return) == (11, -1.0)
    assert (spec.primary_metric, spec.direction) == ("mean_return", "maximize")
    observation = spec.observation_space
    assert (observation["type"], observation["shape"], observation["dtype"]) == ("box", [5, 5], "float32")
    assert spec.action_space == {"type": "discrete", "n": 5, "start": 0}
    assert spec.parameters["actions"] == ["LANE_LEFT", "IDLE", "LANE_RIGHT", "FASTER", "SLOWER"]
    assert spec.parameters["features"] == ["presence", "x", "y", "vx", "vy"]
    assert spec.parameters["features_range"] == {"x": [-100.0, 100.0], "y": [-100.0, 100.0], "vx": [-15.0, 15.0], "vy": [-15.0, 15.0]}
    assert spec.parameters["target_speeds"] == [0.0, 8.0, 16.0]
    assert (spec.parameters["policy_frequency"], spec.parameters["duration_s"], spec.parameters["absolute"]) == (1, 11.0, True)
    assert "## roundabout-v0" in spec.readme and not {"## Versions", "## Programs", "## Tests"} & set(spec.readme.splitlines())


def test_benchmark_passes_the_conformance_checks(benchmark: Benchmark) -> None:
    actions = [FASTER, IDLE, LANE_LEFT, SLOWER, LANE_RIGHT, FASTER]
    report = check_benchmark(benchmark, action=cycle_actions(actions))
    assert report.ok, report.failures()


def test_observation_rows_are_the_ego_then_nearby_vehicles_normalised(benchmark: Benchmark) -> None:
    payload, other = benchmark.plan("train", 0, 2)
    _, observations, _ = drive_environment(benchmark, payload, lambda o, step: IDLE)
    first = observations[0]
    assert type(first) is np.ndarray and first.dtype == np.float32 and first.shape == (5, 5)
    # The ego starts on the south entry at (2 m, 45 m), heading north (-y) at 8 m/s.
    np.testing.assert_allclose(first[0], [1.0, 0.02, 0.45, 0.0, -8.0 / 15.0], atol=1e-6)
    for observation in observations:
        assert np.all(np.abs(observation) <= 1.0)
        presence = observation[:, 0]
        assert set(presence.tolist()) <= {0.0, 1.0} and presence[0] == 1.0
        np.testing.assert_array_equal(observation[presence == 0.0], 0.0)  # rows of absent vehicles are zero
    assert any(observation[1:, 0].any() for observation in observations)
    # The payload's seed places the other vehicles.
    assert not np.array_equal(benchmark.make_environment(other).reset(), first)


def test_a_stopped_car_collects_the_slow_reward_until_the_time_limit(benchmark: Benchmark) -> None:
    for payload in benchmark.plan("validation", 0, 3):
        environment, _, results = drive_environment(benchmark, payload, lambda o, step: SLOWER)
        assert len(results) == 11 and results[-1].truncated and not any(r.terminated for r in results)
        assert [r.reward for r in results] == pytest.approx([normalised(0.0)] * 11)  # speed index 0, no lane change
        summary = environment.summary()
        assert (summary["success"], summary["end"], summary["steps"], summary["crashed"]) == (True, TIME_LIMIT, 11, False)
        tokens = summary["trace"].split("; ")
        assert len(tokens) == 11 and summary["trace_truncated"] is False
        assert tokens[0].startswith("1s SLOWER v") and tokens[-1].startswith("11s SLOWER v0.0 ")


def test_rushing_in_ends_some_episodes_on_a_crash(benchmark: Benchmark) -> None:
    crashes = 0
    for payload in benchmark.plan("train", 5, 8):
        environment, _, results = drive_environment(benchmark, payload, lambda o, step: FASTER)
        summary = environment.summary()
        if results[-1].terminated:
            crashes += 1
            # Top speed (index 2 of 2) and a collision: (-1 + 0.2) mapped onto [0, 1].
            assert results[-1].reward == pytest.approx(normalised(-1.0 + 0.2))
            assert (summary["end"], summary["success"], summary["crashed"]) == (CRASH, False, True)
            assert summary["steps"] == len(results) < 11
        else:
            assert summary["end"] == TIME_LIMIT and len(results) == 11
        assert all(r.reward == pytest.approx(normalised(0.2)) for r in results[1:-1])
    assert crashes >= 1


def test_a_car_off_the_road_earns_nothing_and_ends_off_road() -> None:
    env = gym.make("roundabout-v0", disable_env_checker=True).unwrapped
    environment = RoundaboutEnvironment(env, seed=3)
    environment.reset()
    env.vehicle.position = np.array([400.0, 400.0])  # far from every lane, out of reach within 11 s
    rewards = [environment.step(IDLE).reward for _ in range(11)]
    assert rewards == [0.0] * 11
    summary = environment.summary()
    assert (summary["end"], summary["success"], summary["off_road_steps"]) == (OFF_ROAD, False, 11)
    assert summary["trace"].count(" off-road") == 11
    environment.close()


def test_lane_changes_and_speeds_are_summarised(benchmark: Benchmark) -> None:
    actions = [LANE_LEFT, LANE_RIGHT, SLOWER, SLOWER, IDLE, IDLE, IDLE, IDLE, IDLE, IDLE, IDLE]
    environment, _, results = drive_environment(benchmark, benchmark.plan("test", 2, 1)[0], lambda o, step: actions[step])
    summary = environment.summary()
    assert summary["lane_changes"] == 2
    assert results[0].reward == pytest.approx(normalised(0.1 - 0.05))  # speed index 1, a lane change
    assert 0.0 <= summary["mean_speed_mps"] <= 8.5 and summary["final_speed_mps"] == pytest.approx(0.0, abs=0.5)
    assert summary["final_lane"].count("-") == 2


@pytest.mark.parametrize("action", [0, 1, 4, np.int64(3), np.int32(2), np.uint8(1), 2.0, [3], np.array([4]), np.array(0)], ids=repr)
def test_validate_action_accepts_the_forms_a_policy_may_send(benchmark: Benchmark, action: Any) -> None:
    assert int(benchmark.validate_action(action)) == int(np.asarray(action).reshape(()))


@pytest.mark.parametrize("action", [5, -1, np.int64(7), 1.5, float("nan"), [0, 1], np.zeros(2, np.int64), [], "1", None], ids=repr)
def test_validate_action_rejects_invalid_actions(benchmark: Benchmark, action: Any) -> None:
    with pytest.raises(InvalidAction):
        benchmark.validate_action(action)
