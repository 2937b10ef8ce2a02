"""Tests of the CartPole-v1 Benchmark package: spec, conformance checks, dynamics, action validation and baseline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from epg_env_cartpole import make_benchmark
from epg_sdk.benchmark import Benchmark, InvalidAction
from epg_sdk.checks import check_benchmark, cycle_actions

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
BASELINE = PACKAGE_ROOT / "baseline"


@pytest.fixture(scope="module")
def benchmark() -> Benchmark:
    return make_benchmark()


def test_spec(benchmark: Benchmark) -> None:
    spec = benchmark.spec
    assert spec.id == "CartPole-v1"
    assert spec.horizon == 500
    assert spec.failure_return == 0.0
    assert (spec.primary_metric, spec.direction) == ("mean_return", "maximize")
    observation = spec.observation_space
    assert (observation["type"], observation["shape"], observation["dtype"]) == ("box", [4], "float32")
    np.testing.assert_allclose(observation["high"][[0, 2]], [4.8, 0.41887903], rtol=1e-6)
    np.testing.assert_array_equal(observation["low"], -observation["high"])
    assert np.isinf(observation["high"][[1, 3]]).all()
    assert spec.action_space == {"type": "discrete", "n": 2, "start": 0}
    assert spec.parameters["x_threshold"] == 2.4
    assert spec.parameters["theta_threshold_radians"] == pytest.approx(12 * 2 * np.pi / 360)
    assert "## Observation" in spec.readme and "## Baseline" not in spec.readme  # the agent's part of the README


def test_benchmark_passes_the_conformance_checks(benchmark: Benchmark) -> None:
    # The replay checks drive the Environment with mixed actions rather than the default first one.
    actions = [0, 1, 1, 0, 1, 1, 0, 0, 1, 0]
    report = check_benchmark(benchmark, action=cycle_actions(actions))
    assert report.ok, report.failures()


def test_observations_rewards_and_termination(benchmark: Benchmark) -> None:
    payload, other = benchmark.plan("train", 0, 2)
    environment = benchmark.make_environment(payload)
    observation = environment.reset()
    assert observation.shape == (4,) and observation.dtype == np.float32
    assert np.all(np.abs(observation) <= 0.05)
    # The payload's seed decides the start.
    assert not np.array_equal(benchmark.make_environment(other).reset(), observation)
    rewards: list[float] = []
    terminated = False
    # Always pushing right topples the pole well before the horizon; every step pays 1.0.
    while not terminated and len(rewards) < benchmark.spec.horizon:
        result = environment.step(benchmark.validate_action(1))
        terminated = result.terminated
        rewards.append(result.reward)
    environment.close()
    assert terminated is True
    assert 5 < len(rewards) < 100
    assert rewards == [1.0] * len(rewards)


@pytest.mark.parametrize(
    "action",
    [0, 1, np.int64(1), np.int32(0), np.uint8(1), 1.0, [1], np.array([0]), np.array(1)],
    ids=repr,
)
def test_validate_action_accepts_the_forms_a_policy_may_send(benchmark: Benchmark, action: Any) -> None:
    assert int(benchmark.validate_action(action)) == int(np.asarray(action).reshape(()))


@pytest.mark.parametrize(
    "action",
    [2, -1, np.int64(7), 0.5, float("nan"), float("inf"), [0, 1], np.zeros(2, dtype=np.int64), [], "1", None],
    ids=repr,
)
def test_validate_action_rejects_invalid_actions(benchmark: Benchmark, action: Any) -> None:
    with pytest.raises(InvalidAction):
        benchmark.validate_action(action)




def test_baseline_is_weak_but_working() -> None:
    from epg_sdk.testing import evaluate_locally

    feedback = evaluate_locally(make_benchmark(), BASELINE, episodes=10, split="train", seed=0)
    assert feedback.values["policy_failures"] == 0
    # The angle-only rule balances a few dozen steps (about 42 on these seeds), far from 500.
    assert 20.0 < feedback.score < 200.0
    assert feedback.values["max_return"] < 500.0
    assert b"scored_return" in feedback.artifacts["episodes.csv"]


def test_the_random_program_completes_every_episode_with_a_random_score() -> None:
    from epg_sdk.testing import evaluate_locally

    feedback = evaluate_locally(make_benchmark(), PACKAGE_ROOT / "random", episodes=10, split="train", seed=0)
    assert feedback.values["policy_failures"] == 0
    assert 10.0 < feedback.score < 40.0
