"""Tests of both Fetch Benchmarks: spec, conformance, dict observations, sparse reward, the summary and actions."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from epg_env_fetch import FETCH_FAILURE_RETURN, PICK_AND_PLACE_ID, PUSH_ID, make_pick_and_place_benchmark, make_push_benchmark
from epg_env_fetch.fetch_benchmark import NOT_ENDED, TIME_LIMIT, TRACE_EVERY
from epg_sdk.benchmark import Benchmark, InvalidAction
from epg_sdk.checks import check_benchmark
from epg_sdk.protocol import values
from epg_sdk.testing import drive_environment
from epg_sdk.trace import TRACE_LIMIT_CHARS

KEYS = {"observation", "achieved_goal", "desired_goal"}
SHAPES = {"observation": [25], "achieved_goal": [3], "desired_goal": [3]}
MAKERS = {PUSH_ID: make_push_benchmark, PICK_AND_PLACE_ID: make_pick_and_place_benchmark}


@pytest.fixture(scope="module", params=sorted(MAKERS))
def benchmark(request) -> Benchmark:
    return MAKERS[request.param]()


def test_spec_describes_the_dict_observation_and_the_four_number_action(benchmark: Benchmark) -> None:
    spec = benchmark.spec
    assert spec.id in MAKERS
    assert (spec.horizon, spec.failure_return, spec.failure_return) == (50, -50.0, FETCH_FAILURE_RETURN)
    assert (spec.primary_metric, spec.direction) == ("mean_return", "maximize")
    observation = spec.observation_space
    assert observation["type"] == "dict" and set(observation["spaces"]) == KEYS
    for key, space in observation["spaces"].items():
        assert (space["type"], space["shape"], space["dtype"]) == ("box", SHAPES[key], "float64")
        assert np.isneginf(space["low"]).all() and np.isposinf(space["high"]).all()
    action = spec.action_space
    assert (action["type"], action["shape"], action["dtype"]) == ("box", [4], "float32")
    np.testing.assert_array_equal(action["low"], -np.ones(4))
    np.testing.assert_array_equal(action["high"], np.ones(4))
    parameters = spec.parameters
    assert (parameters["distance_threshold"], parameters["reward_type"], parameters["action_scale_m"]) == (0.05, "sparse", 0.05)
    assert parameters["has_object"] is True
    assert parameters["block_gripper"] is (spec.id == PUSH_ID) and parameters["target_in_the_air"] is (spec.id == PICK_AND_PLACE_ID)
    layout = parameters["observation_layout"]
    assert sum(stop - start for start, stop in layout.values()) == 25 and layout["object_pos"] == [3, 6]
    assert "## Observation" in spec.readme and not {"## Versions", "## Programs", "## Tests"} & set(spec.readme.splitlines())


def test_benchmark_passes_the_conformance_checks(benchmark: Benchmark) -> None:
    # The replay checks move the arm around and work the fingers rather than sending the zero action.
    report = check_benchmark(benchmark, action=lambda observation, step: np.array(
        [np.sin(step / 3), np.cos(step / 4), np.sin(step / 5), np.cos(step / 2)], np.float32))
    assert report.ok, report.failures()


def test_observations_are_dicts_of_float64_arrays_whose_goals_are_the_block_and_the_target(benchmark: Benchmark) -> None:
    payload, other = benchmark.plan("train", 0, 2)
    environment, observations, _ = drive_environment(benchmark, payload, lambda o, s: np.array([0.5, 0.0, 0.0, 1.0], np.float32), limit=6)
    first = observations[0]
    assert type(first) is dict and set(first) == KEYS
    for key, value in first.items():
        assert type(value) is np.ndarray and value.dtype == np.float64 and list(value.shape) == SHAPES[key]
    for observation in observations:
        # achieved_goal is the block's position, observation[3:6]; object_rel_pos is the block minus the gripper.
        np.testing.assert_array_equal(observation["achieved_goal"], observation["observation"][3:6])
        np.testing.assert_allclose(observation["observation"][6:9], observation["observation"][3:6] - observation["observation"][0:3])
        np.testing.assert_array_equal(observation["desired_goal"], first["desired_goal"])
    moved = observations[-1]["observation"][0] - first["observation"][0]
    assert moved > 0.05  # six steps at +0.5 along x: about 2.5 cm each
    environment.close()
    other_start = benchmark.make_environment(other).reset()
    assert not np.array_equal(other_start["desired_goal"], first["desired_goal"])  # the payload's seed decides the goal


def test_dict_observations_survive_the_value_codec_as_dicts_of_arrays(benchmark: Benchmark) -> None:
    observation = benchmark.make_environment(benchmark.plan("validation", 1, 1)[0]).reset()
    decoded = values.decode(values.encode(observation))
    assert type(decoded) is dict and set(decoded) == KEYS
    for key in KEYS:
        assert type(decoded[key]) is np.ndarray and decoded[key].dtype == np.float64
        np.testing.assert_array_equal(decoded[key], observation[key])


def test_reward_is_zero_within_five_centimetres_of_the_goal_and_minus_one_elsewhere(benchmark: Benchmark) -> None:
    rng = np.random.default_rng(0)
    environment, observations, results = drive_environment(benchmark, benchmark.plan("train", 3, 1)[0],
                                                           lambda o, s: rng.uniform(-1, 1, 4).astype(np.float32))
    assert len(results) == 50 and not any(r.terminated or r.truncated for r in results)  # never ends early
    for observation, result in zip(observations[1:], results, strict=True):
        distance = np.linalg.norm(observation["achieved_goal"] - observation["desired_goal"])
        assert result.reward == (0.0 if distance < 0.05 else -1.0)
    summary = environment.summary()
    final = float(np.linalg.norm(observations[-1]["achieved_goal"] - observations[-1]["desired_goal"]))
    assert (summary["end"], summary["steps"], summary["success"]) == (TIME_LIMIT, 50, results[-1].reward == 0.0)
    assert summary["final_distance_m"] == round(final, 4) and summary["min_distance_m"] <= summary["final_distance_m"]
    assert summary["success_steps"] == sum(1 for r in results if r.reward == 0.0)


def test_the_summary_trace_has_the_distance_every_five_steps(benchmark: Benchmark) -> None:
    environment, observations, _ = drive_environment(benchmark, benchmark.plan("test", 0, 1)[0], lambda o, s: np.zeros(4, np.float32), limit=12)
    summary = environment.summary()
    assert summary["end"] == NOT_ENDED and summary["steps"] == 12  # asked before its 50 steps
    tokens = summary["trace"].split("; ")
    assert [token.split(":")[0] for token in tokens] == ["0", str(TRACE_EVERY), str(2 * TRACE_EVERY), "12"]
    distance = 100 * np.linalg.norm(observations[0]["achieved_goal"] - observations[0]["desired_goal"])
    assert tokens[0].rstrip("*") == f"0:{distance:.1f}" and tokens[0].endswith("*") is bool(distance < 5.0)
    assert summary["trace_truncated"] is False and len(summary["trace"]) <= TRACE_LIMIT_CHARS
    assert summary["first_success_step"] == -1 or 1 <= summary["first_success_step"] <= 12
    assert environment.summary()["trace"] == summary["trace"]  # asking again adds nothing


def test_summaries_hold_no_hidden_payload(benchmark: Benchmark) -> None:
    payload = benchmark.plan("test", 9, 1)[0]
    environment = benchmark.make_environment(payload)
    environment.reset()
    for _ in range(3):
        environment.step(benchmark.validate_action([0.5, 0.5, 0.0, -1.0]))
    summary = environment.summary()
    encoded = values.encode(summary).SerializeToString()
    seed = str(int(payload.decode().split(":")[1].strip(" }")))
    assert payload not in encoded and seed.encode() not in encoded and "seed" not in summary


@pytest.mark.parametrize(
    "action",
    [[0.5, -0.5, 0.0, 1.0], (1.0, -1.0, 1.0, -1.0), np.zeros(4, np.float32), np.array([0.1, 0.2, 0.3, 0.4], np.float64)],
    ids=repr,
)
def test_validate_action_accepts_four_numbers_in_bounds(benchmark: Benchmark, action: Any) -> None:
    value = benchmark.validate_action(action)
    assert value.shape == (4,) and value.dtype == np.float32
    np.testing.assert_array_equal(value, np.asarray(action, dtype=np.float32))


@pytest.mark.parametrize(
    "action",
    [[1.5, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, -1.01], [float("nan"), 0.0, 0.0, 0.0], [0.0, float("inf"), 0.0, 0.0], 0.5,
     [0.5, 0.5, 0.5], [0.1] * 5, np.zeros((2, 2)), [], None, "0.5", {"dx": 0.0}],
    ids=repr,
)
def test_validate_action_rejects_anything_else(benchmark: Benchmark, action: Any) -> None:
    with pytest.raises(InvalidAction):
        benchmark.validate_action(action)
