"""Tests of the Acrobot-v1 Benchmark package: spec, conformance checks, dynamics, action validation and baseline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from epg_env_acrobot import make_benchmark
from epg_sdk.benchmark import Benchmark, InvalidAction
from epg_sdk.checks import check_benchmark, cycle_actions

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
BASELINE = PACKAGE_ROOT / "baseline"


@pytest.fixture(scope="module")
def benchmark() -> Benchmark:
    return make_benchmark()


def test_spec(benchmark: Benchmark) -> None:
    spec = benchmark.spec
    assert spec.id == "Acrobot-v1"
    assert spec.horizon == 500
    assert spec.failure_return == -500.0
    assert (spec.primary_metric, spec.direction) == ("mean_return", "maximize")
    observation = spec.observation_space
    assert (observation["type"], observation["shape"], observation["dtype"]) == ("box", [6], "float32")
    np.testing.assert_allclose(observation["high"], [1, 1, 1, 1, 4 * np.pi, 9 * np.pi], rtol=1e-6)
    np.testing.assert_array_equal(observation["low"], -observation["high"])
    assert spec.action_space == {"type": "discrete", "n": 3, "start": 0}
    assert spec.parameters["torques"] == [-1.0, 0.0, 1.0]
    assert spec.parameters["dt"] == 0.2
    assert "## Observation" in spec.readme and "## Baseline" not in spec.readme  # the agent's part of the README


def test_benchmark_passes_the_conformance_checks(benchmark: Benchmark) -> None:
    # The replay checks drive the Environment with mixed actions rather than the default first one.
    actions = [0, 2, 2, 1, 0, 0, 2, 1, 1, 0]
    report = check_benchmark(benchmark, action=cycle_actions(actions))
    assert report.ok, report.failures()


def test_observations_rewards_and_termination(benchmark: Benchmark) -> None:
    payload, other = benchmark.plan("train", 0, 2)
    environment = benchmark.make_environment(payload)
    observation = environment.reset()
    assert observation.shape == (6,) and observation.dtype == np.float32
    # Hanging down at rest: cos(theta1) and cos(theta2) near 1, small velocities.
    assert observation[0] > 0.99 and observation[2] > 0.99
    # The payload's seed decides the start.
    assert not np.array_equal(benchmark.make_environment(other).reset(), observation)
    rewards: list[float] = []
    terminated = False
    # Strong torque against the first link's velocity swings the tip up well within the horizon.
    while not terminated and len(rewards) < benchmark.spec.horizon:
        action = 0 if observation[4] > 0.05 else 2 if observation[4] < -0.05 else 1
        result = environment.step(benchmark.validate_action(action))
        observation, terminated = result.observation, result.terminated
        rewards.append(result.reward)
    environment.close()
    assert terminated
    assert rewards == [-1.0] * (len(rewards) - 1) + [0.0]


@pytest.mark.parametrize(
    "action",
    [0, 1, 2, np.int64(2), np.int32(0), np.uint8(1), 2.0, [1], np.array([2]), np.array(0)],
    ids=repr,
)
def test_validate_action_accepts_the_forms_a_policy_may_send(benchmark: Benchmark, action: Any) -> None:
    assert int(benchmark.validate_action(action)) == int(np.asarray(action).reshape(()))


@pytest.mark.parametrize(
    "action",
    [3, -1, np.int64(9), 1.5, float("nan"), float("inf"), [0, 1], np.zeros(3, dtype=np.int64), [], "1", None],
    ids=repr,
)
def test_validate_action_rejects_invalid_actions(benchmark: Benchmark, action: Any) -> None:
    with pytest.raises(InvalidAction):
        benchmark.validate_action(action)




def test_baseline_is_weak_but_working() -> None:
    from epg_sdk.testing import evaluate_locally

    feedback = evaluate_locally(make_benchmark(), BASELINE, episodes=10, split="train", seed=0)
    assert feedback.values["policy_failures"] == 0
    # Reaches the goal in some Episodes (about -416 on these seeds), far from a good swing-up (-100).
    assert -500.0 < feedback.score < -150.0
    assert feedback.values["max_return"] > -500.0
    assert feedback.values["min_return"] == -500.0


def test_the_random_program_completes_every_episode_with_a_random_score() -> None:
    from epg_sdk.testing import evaluate_locally

    feedback = evaluate_locally(make_benchmark(), PACKAGE_ROOT / "random", episodes=10, split="train", seed=0)
    assert feedback.values["policy_failures"] == 0
    assert feedback.score < -450.0
