"""Tests of the probe Benchmark package: spec, conformance checks, dynamics, action validation, faults and baseline."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from epg_env_probe import CRASH_MESSAGE, make_benchmark, make_crash_benchmark, make_slow_benchmark
from epg_sdk.benchmark import Benchmark, InvalidAction
from epg_sdk.checks import check_benchmark

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
    from epg_sdk.gym_adapter import describe_space

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


@pytest.mark.parametrize(
    ("benchmark_id", "steps"),
    # ProbeSlow-v0 sleeps 0.5 s in every step and never terminates: one step in
    # each of the three Episodes the checks drive keeps it at about 1.5 s.
    [("Probe-v0", 30), ("ProbeSlow-v0", 1), ("ProbeCrash-v0", 30)],
)
def test_benchmark_passes_the_conformance_checks(benchmark_id: str, steps: int) -> None:
    factory, _ = FACTORIES[benchmark_id]
    report = check_benchmark(factory(), steps=steps)
    if benchmark_id == "ProbeCrash-v0":
        # The one Probe that must not pass: its environment raises in the 3rd step.
        assert not report.ok
        assert any(CRASH_MESSAGE in failure for failure in report.failures()), report.failures()
    else:
        assert report.ok, report.failures()


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
    from epg_sdk.testing import evaluate_locally

    feedback = evaluate_locally(make_benchmark(), BASELINE, episodes=3)
    assert feedback.score == 20.0
    assert feedback.values["policy_failures"] == 0
    assert [row["steps"] for row in feedback.values["episodes"]] == [20, 20, 20]
    assert all(row["truncated"] and not row["terminated"] for row in feedback.values["episodes"])


def test_environment_time_is_not_charged_to_the_policy() -> None:
    from epg_sdk.runtime.episode_loop import EpisodeLimits
    from epg_sdk.testing import evaluate_locally

    # Each environment step takes 0.5 s, twice the policy's step deadline and,
    # over the Episode, twice its Episode deadline.
    limits = EpisodeLimits(step_deadline_s=0.25, episode_deadline_s=1.0)
    feedback = evaluate_locally(make_slow_benchmark(), BASELINE, episodes=1, limits=limits)
    assert feedback.values["policy_failures"] == 0
    assert feedback.score == 4.0


def test_environment_crash_is_not_a_policy_failure() -> None:
    from epg_sdk.testing import evaluate_locally

    with pytest.raises(RuntimeError, match=CRASH_MESSAGE):
        evaluate_locally(make_crash_benchmark(), BASELINE, episodes=1)
