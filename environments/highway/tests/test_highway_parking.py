"""Tests of the parking-v0 Benchmark: spec, conformance, dict observations, reward, termination, actions and summary."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from epg_env_highway import make_parking_benchmark
from epg_env_highway.highway_benchmark import CRASH, GOAL_REACHED, TIME_LIMIT
from epg_sdk.benchmark import Benchmark, InvalidAction
from epg_sdk.checks import check_benchmark
from epg_sdk.protocol import values
from epg_sdk.testing import drive_environment
from epg_sdk.trace import TRACE_LIMIT_CHARS

KEYS = {"observation", "achieved_goal", "desired_goal"}
SCALES = np.array([100.0, 100.0, 5.0, 5.0, 1.0, 1.0])
WEIGHTS = np.array([1.0, 0.3, 0.0, 0.0, 0.02, 0.02])


@pytest.fixture(scope="module")
def benchmark() -> Benchmark:
    return make_parking_benchmark()


def park(observation: dict[str, np.ndarray]) -> np.ndarray:
    """Steer at a point in front of the spot that slides into it (the baseline's rule, tuned to park)."""
    state, goal = observation["observation"] * SCALES, observation["desired_goal"] * SCALES
    heading = math.atan2(state[5], state[4])
    distance = math.hypot(goal[0] - state[0], goal[1] - state[1])
    back = min(8.0, 0.8 * distance)
    bearing = math.atan2(goal[1] - goal[5] * back - state[1], goal[0] - goal[4] * back - state[0]) - heading
    bearing = (bearing + math.pi) % (2 * math.pi) - math.pi
    target = min(4.0, 0.6 * distance, 2.0 if abs(bearing) > 1.2 else 4.0)
    speed = state[2] * state[4] + state[3] * state[5]
    return np.array([np.clip(0.5 * (target - speed), -1, 1), np.clip(3.0 * bearing, -1, 1)], dtype=np.float32)


def test_spec_describes_every_sub_space_of_the_dict_observation(benchmark: Benchmark) -> None:
    spec = benchmark.spec
    assert spec.id == "parking-v0"
    assert (spec.horizon, spec.failure_return) == (500, -500.0)
    assert (spec.primary_metric, spec.direction) == ("mean_return", "maximize")
    observation = spec.observation_space
    assert observation["type"] == "dict" and set(observation["spaces"]) == KEYS
    for space in observation["spaces"].values():
        assert (space["type"], space["shape"], space["dtype"]) == ("box", [6], "float64")
        assert np.isneginf(space["low"]).all() and np.isposinf(space["high"]).all()
    action = spec.action_space
    assert (action["type"], action["shape"], action["dtype"]) == ("box", [2], "float32")
    np.testing.assert_array_equal(action["low"], [-1.0, -1.0])
    np.testing.assert_array_equal(action["high"], [1.0, 1.0])
    assert spec.parameters["features"] == ["x", "y", "vx", "vy", "cos_h", "sin_h"]
    assert spec.parameters["scales"] == SCALES.tolist()
    assert spec.parameters["reward_weights"] == WEIGHTS.tolist()
    assert spec.parameters["acceleration_range"] == [-5.0, 5.0]
    assert spec.parameters["steering_range"] == pytest.approx([-math.pi / 4, math.pi / 4])
    assert (spec.parameters["policy_frequency"], spec.parameters["duration_s"]) == (5, 100.0)
    assert "## parking-v0" in spec.readme and not {"## Versions", "## Programs", "## Tests"} & set(spec.readme.splitlines())


def test_benchmark_passes_the_conformance_checks(benchmark: Benchmark) -> None:
    # The replay checks steer in a circle and brake now and then rather than sending the default zero action.
    report = check_benchmark(benchmark, action=lambda observation, step: np.array([math.sin(step / 3), math.cos(step / 5)], np.float32))
    assert report.ok, report.failures()


def test_observations_are_dicts_of_float64_vectors_scaled_as_published(benchmark: Benchmark) -> None:
    payload, other = benchmark.plan("train", 0, 2)
    environment, observations, _ = drive_environment(benchmark, payload, lambda o, s: np.array([1.0, 0.3], np.float32), limit=10)
    first = observations[0]
    assert type(first) is dict and set(first) == KEYS
    assert all(type(v) is np.ndarray and v.dtype == np.float64 and v.shape == (6,) for v in first.values())
    # The car starts at rest at the origin, heading anywhere: x = y = vx = vy = 0, (cos h, sin h) on the unit circle.
    np.testing.assert_array_equal(first["observation"][:4], np.zeros(4))
    assert math.hypot(*first["observation"][4:]) == pytest.approx(1.0)
    # The goal is the centre of a spot 14 m up or down the lot, at rest, heading along the spot (+-y).
    goal = first["desired_goal"] * SCALES
    assert abs(goal[1]) == pytest.approx(14.0) and abs(goal[0]) <= 26.0 and abs(goal[5]) == pytest.approx(1.0)
    for observation in observations:
        np.testing.assert_array_equal(observation["achieved_goal"], observation["observation"])
        np.testing.assert_array_equal(observation["desired_goal"], first["desired_goal"])
    moved = observations[-1]["observation"] * SCALES
    assert math.hypot(moved[0], moved[1]) > 0.5 and math.hypot(moved[2], moved[3]) > 1.0
    environment.close()
    # The payload's seed decides the start.
    other_start = benchmark.make_environment(other).reset()
    assert not all(np.array_equal(other_start[k], first[k]) for k in KEYS)


def test_dict_observations_survive_the_value_codec_as_dicts_of_arrays(benchmark: Benchmark) -> None:
    observation = benchmark.make_environment(benchmark.plan("validation", 1, 1)[0]).reset()
    decoded = values.decode(values.encode(observation))
    assert type(decoded) is dict and set(decoded) == KEYS
    for key in KEYS:
        assert type(decoded[key]) is np.ndarray and decoded[key].dtype == np.float64
        np.testing.assert_array_equal(decoded[key], observation[key])
        assert decoded[key].flags.writeable


def test_reward_is_minus_the_root_of_the_weighted_distance_to_the_goal(benchmark: Benchmark) -> None:
    _, observations, results = drive_environment(benchmark, benchmark.plan("train", 3, 1)[0], lambda o, s: np.array([0.4, -0.2], np.float32), limit=15)
    for observation, result in zip(observations[1:], results, strict=True):
        gap = np.abs(observation["achieved_goal"] - observation["desired_goal"])
        assert result.reward == pytest.approx(-math.sqrt(float(gap @ WEIGHTS)))


def test_an_episode_that_parks_ends_on_success(benchmark: Benchmark) -> None:
    environment, observations, results = drive_environment(benchmark, benchmark.plan("train", 0, 1)[0], lambda o, s: park(o))
    assert results[-1].terminated and len(results) < benchmark.spec.horizon
    gap = np.abs(observations[-1]["achieved_goal"] - observations[-1]["desired_goal"])
    assert float(gap @ WEIGHTS) < 0.12**2  # highway-env's success: reward above -0.12
    summary = environment.summary()
    assert (summary["success"], summary["end"], summary["crashed"], summary["steps"]) == (True, GOAL_REACHED, False, len(results))
    # Within the success threshold the car may stand up to about 4.8 m off along the spot (weight 0.3).
    assert summary["final_distance_m"] < 4.8 and summary["min_distance_m"] <= summary["final_distance_m"]


def test_driving_into_a_wall_ends_on_a_crash_that_costs_five(benchmark: Benchmark) -> None:
    environment, observations, results = drive_environment(benchmark, benchmark.plan("train", 0, 1)[0], lambda o, s: np.array([1.0, 0.0], np.float32))
    assert results[-1].terminated and not results[-1].truncated
    gap = np.abs(observations[-1]["achieved_goal"] - observations[-1]["desired_goal"])
    assert results[-1].reward == pytest.approx(-math.sqrt(float(gap @ WEIGHTS)) - 5.0)
    summary = environment.summary()
    assert (summary["success"], summary["end"], summary["crashed"]) == (False, CRASH, True)


def test_a_car_that_stands_still_runs_into_the_time_limit_with_a_bounded_trace(benchmark: Benchmark) -> None:
    environment, _, results = drive_environment(benchmark, benchmark.plan("test", 0, 1)[0], lambda o, s: np.zeros(2, np.float32))
    assert len(results) == 500 and not any(r.terminated for r in results)
    summary = environment.summary()
    assert (summary["success"], summary["end"], summary["steps"], summary["final_speed_mps"]) == (False, TIME_LIMIT, 500, 0.0)
    # One token per simulated second (100 of them) does not fit: the head and the tail, around a marker.
    trace = summary["trace"]
    assert summary["trace_truncated"] is True and len(trace) <= TRACE_LIMIT_CHARS
    assert trace.startswith("1.0s v+0.0 d")
    assert "steps omitted] ..." in trace and trace.split("; ")[-1].startswith("100.0s ")
    assert trace.isascii() and "seed" not in trace


@pytest.mark.parametrize(
    "action",
    [[0.5, -0.5], (1.0, -1.0), np.array([0.0, 0.25], np.float32), np.array([0.1, 0.2], np.float64), np.array([[0.3, 0.4]]).reshape(2)],
    ids=repr,
)
def test_validate_action_accepts_two_numbers_in_bounds(benchmark: Benchmark, action: Any) -> None:
    value = benchmark.validate_action(action)
    assert value.shape == (2,) and value.dtype == np.float32
    np.testing.assert_array_equal(value, np.asarray(action, dtype=np.float32))


@pytest.mark.parametrize(
    "action",
    [[1.5, 0.0], [0.0, -1.01], [float("nan"), 0.0], [0.0, float("inf")], 0.5, [0.5], [0.1, 0.2, 0.3], np.zeros((2, 2)), [], None, "0.5",
     {"acceleration": 0.0, "steering": 0.0}],
    ids=repr,
)
def test_validate_action_rejects_anything_else(benchmark: Benchmark, action: Any) -> None:
    with pytest.raises(InvalidAction):
        benchmark.validate_action(action)
