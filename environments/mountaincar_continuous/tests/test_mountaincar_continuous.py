"""Tests of the MountainCarContinuous-v0 Benchmark package: spec, conformance checks, dynamics, action validation and baseline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from epg_env_mountaincar_continuous import make_benchmark
from epg_sdk.benchmark import Benchmark, InvalidAction
from epg_sdk.checks import check_benchmark, cycle_actions

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
BASELINE = PACKAGE_ROOT / "baseline"


@pytest.fixture(scope="module")
def benchmark() -> Benchmark:
    return make_benchmark()


def test_spec(benchmark: Benchmark) -> None:
    spec = benchmark.spec
    assert spec.id == "MountainCarContinuous-v0"
    assert spec.horizon == 999
    assert spec.failure_return == -100.0
    assert (spec.primary_metric, spec.direction) == ("mean_return", "maximize")
    observation = spec.observation_space
    assert (observation["type"], observation["shape"], observation["dtype"]) == ("box", [2], "float32")
    np.testing.assert_allclose(observation["low"], [-1.2, -0.07], rtol=1e-6)
    np.testing.assert_allclose(observation["high"], [0.6, 0.07], rtol=1e-6)
    action = spec.action_space
    assert (action["type"], action["shape"], action["dtype"]) == ("box", [1], "float32")
    np.testing.assert_array_equal(action["low"], [-1.0])
    np.testing.assert_array_equal(action["high"], [1.0])
    assert spec.parameters["goal_position"] == 0.45
    assert spec.parameters["power"] == 0.0015
    assert "## Observation" in spec.readme and "## Baseline" not in spec.readme  # the agent's part of the README


def test_benchmark_passes_the_conformance_checks(benchmark: Benchmark) -> None:
    # The replay checks drive the Environment with mixed actions rather than the default first one.
    actions: list[Any] = [[1.0], [-0.5], 0.25, np.array([0.75], dtype=np.float32), [-1.0]]
    report = check_benchmark(benchmark, action=cycle_actions(actions))
    assert report.ok, report.failures()


def test_observations_rewards_and_termination(benchmark: Benchmark) -> None:
    payload, other = benchmark.plan("train", 0, 2)
    environment = benchmark.make_environment(payload)
    observation = environment.reset()
    assert observation.shape == (2,) and observation.dtype == np.float32
    assert -0.6 <= observation[0] <= -0.4 and observation[1] == 0.0
    # The payload's seed decides the start.
    assert not np.array_equal(benchmark.make_environment(other).reset(), observation)
    forces: list[float] = []
    rewards: list[float] = []
    terminated = False
    # Full force along the velocity reaches the flag well within the horizon.
    while not terminated and len(rewards) < benchmark.spec.horizon:
        force = 1.0 if observation[1] >= 0 else -1.0
        result = environment.step(benchmark.validate_action([force]))
        observation, terminated = result.observation, result.terminated
        forces.append(force)
        rewards.append(result.reward)
    environment.close()
    assert terminated and observation[0] >= 0.45
    assert rewards[:-1] == pytest.approx([-0.1 * f * f for f in forces[:-1]])
    assert rewards[-1] == pytest.approx(100.0 - 0.1 * forces[-1] ** 2)


@pytest.mark.parametrize(
    "action",
    [0.5, -1.0, 1.0, 1, 0, np.float32(0.3), np.float64(-0.2), [0.5], np.array([-0.5]), np.array(0.5), np.array([[0.25]])],
    ids=repr,
)
def test_validate_action_accepts_the_forms_a_policy_may_send(benchmark: Benchmark, action: Any) -> None:
    value = benchmark.validate_action(action)
    assert value.shape == (1,) and value.dtype == np.float32
    assert value[0] == np.float32(np.asarray(action).reshape(()))


@pytest.mark.parametrize(
    "action",
    [1.5, -1.01, [2.0], np.array([-3.0]), float("nan"), [float("nan")], float("inf"), [0.1, 0.2], np.zeros((2, 1)), [], None],
    ids=repr,
)
def test_validate_action_rejects_invalid_actions(benchmark: Benchmark, action: Any) -> None:
    with pytest.raises(InvalidAction):
        benchmark.validate_action(action)




def test_baseline_is_weak_but_working() -> None:
    from epg_sdk.testing import evaluate_locally

    feedback = evaluate_locally(make_benchmark(), BASELINE, episodes=10, split="train", seed=0)
    assert feedback.values["policy_failures"] == 0
    # Reaches the flag in most Episodes but not all (about 69 on these seeds); a good policy scores above 90.
    assert 0.0 < feedback.score < 95.0
    assert feedback.values["max_return"] > 90.0
    assert feedback.values["min_return"] < 0.0


def test_the_random_program_completes_every_episode_with_a_random_score() -> None:
    from epg_sdk.testing import evaluate_locally

    feedback = evaluate_locally(make_benchmark(), PACKAGE_ROOT / "random", episodes=10, split="train", seed=0)
    assert feedback.values["policy_failures"] == 0
    assert -40.0 < feedback.score < -25.0
