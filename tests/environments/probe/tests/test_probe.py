"""Tests of the probe Benchmark package: spec, planning, determinism, action validation, faults and baseline."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from epg_env_probe import CRASH_MESSAGE, make_benchmark, make_crash_benchmark, make_slow_benchmark
from orchestrator.sdk.benchmark import Benchmark, InvalidAction
from orchestrator.sdk.planning import SPLITS

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
BASELINE = PACKAGE_ROOT / "baseline"

FACTORIES = {
    "Probe-v0": (make_benchmark, 20),
    "ProbeSlow-v0": (make_slow_benchmark, 4),
    "ProbeCrash-v0": (make_crash_benchmark, 20),
}


@pytest.fixture(scope="module")
def benchmark() -> Benchmark:
    return make_benchmark()


@pytest.mark.parametrize("benchmark_id", FACTORIES)
def test_spec(benchmark_id: str) -> None:
    factory, horizon = FACTORIES[benchmark_id]
    spec = factory().spec
    assert spec.id == benchmark_id
    assert spec.horizon == horizon
    assert spec.failure_return == 0.0
    assert (spec.primary_metric, spec.direction) == ("mean_return", "maximize")
    observation = spec.observation_space
    assert (observation["type"], observation["shape"], observation["dtype"]) == ("box", [2], "float32")
    np.testing.assert_array_equal(observation["low"], [0, 0])
    np.testing.assert_array_equal(observation["high"], [horizon, 999])
    assert spec.action_space == {"type": "discrete", "n": 3, "start": 0}
    assert spec.readme.startswith("# Probe benchmarks")


def test_space_descriptions_match_the_gymnasium_adapter_format(benchmark: Benchmark) -> None:
    gymnasium = pytest.importorskip("gymnasium")
    from orchestrator.sdk.gym_adapter import describe_space

    spec = benchmark.spec
    box = gymnasium.spaces.Box(low=np.zeros(2, np.float32), high=np.array([20, 999], np.float32), dtype=np.float32)
    expected = describe_space(box)
    assert set(spec.observation_space) == set(expected)
    for key, value in expected.items():
        np.testing.assert_array_equal(spec.observation_space[key], value)
        assert type(spec.observation_space[key]) is type(value)
        if isinstance(value, np.ndarray):
            assert spec.observation_space[key].dtype == value.dtype
    assert spec.action_space == describe_space(gymnasium.spaces.Discrete(3))


def test_plan_is_deterministic_and_splits_are_disjoint(benchmark: Benchmark) -> None:
    train = benchmark.plan("train", 7, 20)
    assert train == benchmark.plan("train", 7, 20)
    assert len(set(train)) == 20
    planned = {(split, seed): set(benchmark.plan(split, seed, 50)) for split in SPLITS for seed in (0, 1)}
    for (split_a, seed_a), (split_b, seed_b) in itertools.combinations(planned, 2):
        if split_a != split_b:
            assert not planned[split_a, seed_a] & planned[split_b, seed_b]


def test_observations_and_rewards(benchmark: Benchmark) -> None:
    payload = benchmark.plan("train", 0, 1)[0]
    seed_view = json.loads(payload)["seed"] % 1000
    environment = benchmark.make_environment(payload)
    observation = environment.reset()
    assert observation.dtype == np.float32
    np.testing.assert_array_equal(observation, [0, seed_view])
    rewards: list[float] = []
    # Right on even steps, wrong (one ahead) on odd steps; past the horizon it still never terminates.
    for index in range(25):
        action = index % 3 if index % 2 == 0 else (index + 1) % 3
        result = environment.step(benchmark.validate_action(action))
        np.testing.assert_array_equal(result.observation, [index + 1, seed_view])
        assert not result.terminated and not result.truncated
        rewards.append(result.reward)
    assert rewards == [1.0 if index % 2 == 0 else 0.0 for index in range(25)]
    assert environment.summary() == {"hits": 13}
    environment.close()


def test_same_payload_gives_the_same_trajectory(benchmark: Benchmark) -> None:
    payload, other = benchmark.plan("test", 5, 2)

    def trajectory(payload: bytes) -> list[tuple[list[float], float]]:
        environment = benchmark.make_environment(payload)
        steps = [(environment.reset().tolist(), 0.0)]
        for action in [0, 2, 1, 2, 0, 1]:
            result = environment.step(benchmark.validate_action(action))
            steps.append((result.observation.tolist(), result.reward))
        return steps

    assert trajectory(payload) == trajectory(payload)
    assert trajectory(other)[0] == ([0.0, float(json.loads(other)["seed"] % 1000)], 0.0)


@pytest.mark.parametrize("action", [0, 1, 2, np.int64(2), np.int8(1), np.uint16(0), np.array(1)], ids=repr)
def test_validate_action_accepts_integers_in_range(benchmark: Benchmark, action: Any) -> None:
    value = benchmark.validate_action(action)
    assert type(value) is int and value == int(action)


@pytest.mark.parametrize(
    "action",
    [3, -1, np.int64(3), 1.0, float("nan"), True, np.bool_(False), [1], np.array([1]), np.array(1.0), "1", None],
    ids=repr,
)
def test_validate_action_rejects_anything_else(benchmark: Benchmark, action: Any) -> None:
    with pytest.raises(InvalidAction):
        benchmark.validate_action(action)


def test_crash_benchmark_raises_in_its_third_step() -> None:
    crash = make_crash_benchmark()
    environment = crash.make_environment(crash.plan("train", 0, 1)[0])
    environment.reset()
    environment.step(0)
    environment.step(1)
    with pytest.raises(RuntimeError, match=CRASH_MESSAGE):
        environment.step(2)


def test_slow_benchmark_sleeps_in_every_step() -> None:
    slow = make_slow_benchmark()
    environment = slow.make_environment(slow.plan("train", 0, 1)[0])
    environment.reset()
    began = time.monotonic()
    result = environment.step(0)
    assert time.monotonic() - began >= 0.5
    assert result.reward == 1.0


def test_baseline_scores_perfectly() -> None:
    from orchestrator.sdk.testing import evaluate_locally

    feedback = evaluate_locally(make_benchmark(), BASELINE, episodes=3)
    assert feedback.score == 20.0
    assert feedback.values["policy_failures"] == 0
    assert [row["steps"] for row in feedback.values["episodes"]] == [20, 20, 20]
    assert all(row["truncated"] and not row["terminated"] for row in feedback.values["episodes"])


def test_environment_time_is_not_charged_to_the_policy() -> None:
    from orchestrator.runtimes.episode_loop import EpisodeLimits
    from orchestrator.sdk.testing import evaluate_locally

    # Each environment step takes 0.5 s, twice the policy's step deadline and,
    # over the Episode, twice its Episode deadline.
    limits = EpisodeLimits(step_deadline_s=0.25, episode_deadline_s=1.0)
    feedback = evaluate_locally(make_slow_benchmark(), BASELINE, episodes=1, limits=limits)
    assert feedback.values["policy_failures"] == 0
    assert feedback.score == 4.0


def test_environment_crash_is_not_a_policy_failure() -> None:
    from orchestrator.sdk.testing import evaluate_locally

    with pytest.raises(RuntimeError, match=CRASH_MESSAGE):
        evaluate_locally(make_crash_benchmark(), BASELINE, episodes=1)
