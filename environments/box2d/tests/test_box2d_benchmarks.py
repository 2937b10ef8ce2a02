"""Tests of both Box2D Benchmarks: spec, conformance, observation types, actions, rewards, end causes and summaries."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from epg_env_box2d import make_bipedal_benchmark, make_carracing_benchmark
from epg_env_box2d.bipedal import START_X
from epg_env_box2d.box2d_benchmark import FELL, LEFT_PLAYFIELD, NOT_ENDED, TIME_LIMIT
from epg_sdk.benchmark import Benchmark, InvalidAction
from epg_sdk.checks import check_benchmark
from epg_sdk.protocol import values
from epg_sdk.testing import drive_environment
from epg_sdk.trace import TRACE_LIMIT_CHARS


@pytest.fixture(scope="module")
def bipedal() -> Benchmark:
    return make_bipedal_benchmark()


@pytest.fixture(scope="module")
def carracing() -> Benchmark:
    return make_carracing_benchmark()


def test_bipedal_spec(bipedal: Benchmark) -> None:
    spec = bipedal.spec
    assert (spec.id, spec.horizon, spec.failure_return, spec.direction) == ("BipedalWalker-v3", 1600, -400.0, "maximize")
    observation, action = spec.observation_space, spec.action_space
    assert (observation["type"], observation["shape"], observation["dtype"]) == ("box", [24], "float32")
    assert (action["type"], action["shape"], action["dtype"]) == ("box", [4], "float32")
    assert action["low"].tolist() == [-1.0] * 4 and action["high"].tolist() == [1.0] * 4
    assert spec.parameters["hardcore"] is False and spec.parameters["start_x_m"] == pytest.approx(START_X, abs=1e-4)
    assert "BipedalWalker-v3" in spec.readme and "distance_m" in spec.readme
    assert not {"## Programs", "## Measured"} & set(spec.readme.splitlines())


def test_carracing_spec(carracing: Benchmark) -> None:
    spec = carracing.spec
    assert (spec.id, spec.horizon, spec.failure_return, spec.direction) == ("CarRacing-v3", 1000, -200.0, "maximize")
    observation, action = spec.observation_space, spec.action_space
    assert (observation["type"], observation["shape"], observation["dtype"]) == ("box", [96, 96, 3], "uint8")
    assert int(observation["low"].min()) == 0 and int(observation["high"].max()) == 255
    assert (action["type"], action["shape"], action["dtype"]) == ("box", [3], "float32")
    assert action["low"].tolist() == [-1.0, 0.0, 0.0] and action["high"].tolist() == [1.0, 1.0, 1.0]
    assert spec.parameters["continuous"] is True and spec.parameters["lap_complete_percent"] == 0.95


def test_bipedal_passes_the_conformance_checks(bipedal: Benchmark) -> None:
    report = check_benchmark(bipedal, action=lambda observation, step: np.array([np.sin(step / 4), 0.5, -0.5, np.cos(step / 4)], np.float32),
                             plan_count=8, steps=20)
    assert report.ok, report.failures()
    assert len(report.checks) >= 6


def test_carracing_passes_the_conformance_checks(carracing: Benchmark) -> None:
    report = check_benchmark(carracing, action=lambda observation, step: np.array([np.sin(step / 3), 0.3, 0.0], np.float32),
                             plan_count=4, steps=10)
    assert report.ok, report.failures()


def test_bipedal_observations_are_float32_vectors_that_encode_as_tensors(bipedal: Benchmark) -> None:
    _env, observations, results = drive_environment(bipedal, bipedal.plan("train", 0, 1)[0], lambda o, s: np.zeros(4, np.float32), limit=5)
    for observation in observations:
        assert type(observation) is np.ndarray and observation.dtype == np.float32 and observation.shape == (24,)
    assert values.encode(observations[-1]).WhichOneof("kind") == "tensor"
    assert np.array_equal(values.decode(values.encode(observations[-1])), observations[-1])
    assert all(isinstance(r.reward, float) for r in results)


def test_carracing_observations_are_uint8_images_that_encode_as_raw_tensors(carracing: Benchmark) -> None:
    _env, observations, _results = drive_environment(carracing, carracing.plan("train", 0, 1)[0], lambda o, s: np.array([0.0, 0.2, 0.0], np.float32), limit=3)
    for observation in observations:
        assert type(observation) is np.ndarray and observation.dtype == np.uint8 and observation.shape == (96, 96, 3)
    encoded = values.encode(observations[-1])
    assert encoded.WhichOneof("kind") == "tensor" and len(encoded.tensor.data) == 96 * 96 * 3
    decoded = values.decode(encoded)
    assert decoded.dtype == np.uint8 and decoded.shape == (96, 96, 3) and np.array_equal(decoded, observations[-1])
    # The image shows grass and road: green-dominant and grey pixels.
    image = observations[-1][:84].astype(int)
    assert ((image[..., 1] - image[..., 0]) > 40).any()
    assert ((abs(image[..., 0] - image[..., 1]) < 10) & (image[..., 0] > 90) & (image[..., 0] < 120)).any()


def test_the_observation_is_a_copy_the_policy_cannot_alias(carracing: Benchmark) -> None:
    environment = carracing.make_environment(carracing.plan("train", 0, 1)[0])
    first = environment.reset()
    first[:] = 0
    second = environment.step(carracing.validate_action([0.0, 0.0, 0.0])).observation
    assert second.any()
    environment.close()


@pytest.mark.parametrize("action", [[0.0, 0.0, 0.0], [0.0] * 5, [[0.0] * 4], "walk", None, [np.nan, 0, 0, 0], [1.5, 0, 0, 0], [0, 0, 0, -1.01]])
def test_bipedal_refuses_malformed_actions(bipedal: Benchmark, action: Any) -> None:
    with pytest.raises(InvalidAction):
        bipedal.validate_action(action)


@pytest.mark.parametrize("action", [[0.0, 0.0], [0.0, 0.5, -0.1], [0.0, 1.2, 0.0], [-1.5, 0.0, 0.0], [0.0, 0.0, np.inf], "go"])
def test_carracing_refuses_malformed_actions(carracing: Benchmark, action: Any) -> None:
    with pytest.raises(InvalidAction):
        carracing.validate_action(action)


def test_valid_actions_become_float32_arrays_of_the_space(bipedal: Benchmark, carracing: Benchmark) -> None:
    walked = bipedal.validate_action([1, -1, 0.5, 0])
    raced = carracing.validate_action((-1.0, 1.0, 0.0))
    assert walked.dtype == raced.dtype == np.float32
    assert walked.tolist() == [1.0, -1.0, 0.5, 0.0] and raced.tolist() == [-1.0, 1.0, 0.0]


def test_bipedal_without_torque_falls_and_the_summary_says_so(bipedal: Benchmark) -> None:
    environment, _obs, results = drive_environment(bipedal, bipedal.plan("train", 0, 1)[0], lambda o, s: np.zeros(4, np.float32), limit=1600)
    assert results[-1].terminated and results[-1].reward == -100.0
    summary = environment.summary()
    assert (summary["end"], summary["fell"], summary["steps"]) == (FELL, True, len(results))
    assert summary["distance_m"] == pytest.approx(float(environment._env.hull.position[0]) - START_X, abs=1e-3)
    assert summary["max_distance_m"] >= summary["distance_m"]
    assert summary["trace"].split("; ")[-1].startswith(f"{len(results)} x")
    assert set(summary) == {"end", "steps", "fell", "distance_m", "max_distance_m", "final_hull_angle_rad", "trace", "trace_truncated"}


def test_bipedal_summary_before_the_end_says_not_ended(bipedal: Benchmark) -> None:
    environment, _obs, _results = drive_environment(bipedal, bipedal.plan("train", 0, 1)[0], lambda o, s: np.zeros(4, np.float32), limit=10)
    summary = environment.summary()
    assert (summary["end"], summary["fell"], summary["steps"]) == (NOT_ENDED, False, 10)


def test_carracing_standing_still_costs_a_tenth_per_step_and_stays_on_the_track(carracing: Benchmark) -> None:
    environment, _obs, results = drive_environment(carracing, carracing.plan("train", 1, 1)[0], lambda o, s: np.zeros(3, np.float32), limit=60)
    assert [round(r.reward, 6) for r in results[1:]] == [-0.1] * 59  # the first step may touch a start tile
    summary = environment.summary()
    assert summary["off_track_steps"] == 0 and summary["steps"] == 60 and summary["end"] == NOT_ENDED
    assert 200 <= summary["track_tiles"] <= 400 and summary["tiles_visited"] <= 3
    assert summary["trace"] == f"50 t{summary['tiles_visited']} v0.0 on; 60 t{summary['tiles_visited']} v0.0 on"


def test_carracing_counts_tiles_and_off_track_steps_and_ends_off_the_playfield(carracing: Benchmark) -> None:
    # Full gas, steering hard right: the car leaves the road, circles on the grass and eventually leaves the playfield or runs out of time.
    environment, _obs, results = drive_environment(carracing, carracing.plan("train", 2, 1)[0],
                                                   lambda o, s: np.array([0.0 if s < 40 else 1.0, 1.0, 0.0], np.float32), limit=400)
    summary = environment.summary()
    assert summary["tiles_visited"] > 0 and 0 < summary["off_track_steps"] <= summary["steps"] == len(results)
    assert summary["off_track_fraction"] == round(summary["off_track_steps"] / summary["steps"], 4)
    total = sum(r.reward for r in results)
    expected = 1000.0 * summary["tiles_visited"] / summary["track_tiles"] - 0.1 * len(results)
    if summary["end"] == LEFT_PLAYFIELD:
        expected -= 100.0 - 0.1  # that step's -0.1 is replaced by -100
    else:
        assert summary["end"] == NOT_ENDED
    assert total == pytest.approx(expected, abs=1e-3)
    assert "off" in summary["trace"] and len(summary["trace"]) <= TRACE_LIMIT_CHARS


def test_the_same_payload_replays_the_same_track_and_another_seed_another(carracing: Benchmark) -> None:
    first, again = carracing.plan("train", 0, 2), carracing.plan("train", 0, 2)
    assert first == again
    tracks = []
    for payload in (first[0], first[0], first[1]):
        environment = carracing.make_environment(payload)
        tracks.append(environment.reset().tobytes())
        environment.step(carracing.validate_action([0.0, 0.0, 0.0]))
        tracks[-1] = (tracks[-1], environment.summary()["track_tiles"])
        environment.close()
    assert tracks[0] == tracks[1] and tracks[0] != tracks[2]


def test_horizon_is_a_time_limit_end(bipedal: Benchmark) -> None:
    environment = bipedal.make_environment(bipedal.plan("train", 0, 1)[0])
    environment.reset()
    environment._steps = bipedal.spec.horizon  # as if the runner had reached the horizon
    assert environment.summary()["end"] == TIME_LIMIT
