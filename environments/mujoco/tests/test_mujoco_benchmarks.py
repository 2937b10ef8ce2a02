"""The four MuJoCo Benchmarks: their specs, the conformance checks, observations, action validation and end causes."""

from __future__ import annotations

import json

import numpy as np
import pytest

import epg_env_mujoco
from epg_env_mujoco import ANT_ID, HALFCHEETAH_ID, PUSHER_ID, REACHER_ID, TIME_LIMIT, UNHEALTHY
from epg_sdk.benchmark import Benchmark, InvalidAction
from epg_sdk.checks import check_benchmark

# id: (factory, observation shape, action shape, action bound, horizon)
EXPECTED = {
    HALFCHEETAH_ID: (epg_env_mujoco.make_halfcheetah_benchmark, [17], [6], 1.0, 1000),
    ANT_ID: (epg_env_mujoco.make_ant_benchmark, [105], [8], 1.0, 1000),
    PUSHER_ID: (epg_env_mujoco.make_pusher_benchmark, [23], [7], 2.0, 100),
    REACHER_ID: (epg_env_mujoco.make_reacher_benchmark, [10], [2], 1.0, 50),
}


@pytest.fixture(scope="module")
def benchmarks() -> dict[str, Benchmark]:
    return {benchmark_id: expected[0]() for benchmark_id, expected in EXPECTED.items()}


def _environment(benchmark: Benchmark, index: int = 0):
    return benchmark.make_environment(benchmark.plan("train", 0, index + 1)[index])


@pytest.mark.parametrize("benchmark_id", list(EXPECTED))
def test_the_spec_publishes_gymnasiums_spaces_horizon_and_reward_constants(benchmarks, benchmark_id) -> None:
    _, obs_shape, action_shape, bound, horizon = EXPECTED[benchmark_id]
    spec = benchmarks[benchmark_id].spec
    assert (spec.id, spec.horizon, spec.direction, spec.primary_metric) == (benchmark_id, horizon, "maximize", "mean_return")
    assert spec.observation_space["type"] == "box" and spec.observation_space["dtype"] == "float64"
    assert spec.observation_space["shape"] == obs_shape and np.isinf(spec.observation_space["low"]).all()
    action = spec.action_space
    assert (action["type"], action["shape"], action["dtype"]) == ("box", action_shape, "float32")
    assert np.all(action["low"] == -bound) and np.all(action["high"] == bound)
    assert spec.failure_return == epg_env_mujoco.FAILURE_RETURNS[benchmark_id] < 0
    assert spec.parameters["dt"] > 0 and spec.parameters["frame_skip"] in (2, 5)
    assert "HalfCheetah-v5" in spec.readme and "Feedback" in spec.readme
    assert not {"## Programs", "## Held-out means", "## Rendering"} & set(spec.readme.splitlines())


def test_reward_constants_are_gymnasiums_defaults(benchmarks) -> None:
    assert benchmarks[HALFCHEETAH_ID].spec.parameters["ctrl_cost_weight"] == 0.1
    ant = benchmarks[ANT_ID].spec.parameters
    assert (ant["ctrl_cost_weight"], ant["healthy_reward"], ant["healthy_z_range"], ant["contact_cost_weight"]) == (0.5, 1.0, [0.2, 1.0], 5e-4)
    assert benchmarks[PUSHER_ID].spec.parameters["reward_control_weight"] == 0.1
    assert benchmarks[REACHER_ID].spec.parameters["reward_control_weight"] == 1.0


@pytest.mark.parametrize("benchmark_id", list(EXPECTED))
def test_the_benchmark_passes_the_conformance_checks(benchmarks, benchmark_id) -> None:
    report = check_benchmark(benchmarks[benchmark_id])
    assert report.ok, report.failures()
    assert len(report.checks) >= 6


@pytest.mark.parametrize("benchmark_id", list(EXPECTED))
def test_observations_are_float64_arrays_of_the_published_shape_and_differ_between_episodes(benchmarks, benchmark_id) -> None:
    benchmark = benchmarks[benchmark_id]
    first, second = _environment(benchmark, 0), _environment(benchmark, 1)
    try:
        a, b = first.reset(), second.reset()
        for observation in (a, b):
            assert isinstance(observation, np.ndarray) and observation.dtype == np.float64
            assert list(observation.shape) == EXPECTED[benchmark_id][1] and np.isfinite(observation).all()
        assert not np.array_equal(a, b)  # two planned Episodes start from two different states
        result = first.step(benchmark.validate_action(np.zeros(EXPECTED[benchmark_id][2], dtype=np.float32)))
        assert result.observation.dtype == np.float64 and result.observation.shape == a.shape
        assert isinstance(result.reward, float) and result.terminated is False
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize("benchmark_id", list(EXPECTED))
def test_action_validation_accepts_the_box_and_refuses_everything_else(benchmarks, benchmark_id) -> None:
    benchmark = benchmarks[benchmark_id]
    _, _, shape, bound, _ = EXPECTED[benchmark_id]
    accepted = benchmark.validate_action([bound] * shape[0])
    assert accepted.dtype == np.float32 and accepted.shape == tuple(shape) and np.all(accepted == bound)
    for bad in (np.zeros(shape[0] + 1), np.full(shape, np.nan), np.full(shape, bound * 1.5), "left", [[0.0] * shape[0]] * 2):
        with pytest.raises(InvalidAction):
            benchmark.validate_action(bad)


def test_a_reacher_episode_runs_its_horizon_and_says_time_limit(benchmarks) -> None:
    benchmark = benchmarks[REACHER_ID]
    environment = _environment(benchmark)
    environment.reset()
    steps = [environment.step(np.zeros(2, dtype=np.float32)) for _ in range(50)]
    summary = environment.summary()
    environment.close()
    assert not any(s.terminated for s in steps)
    assert (summary["end"], summary["steps"]) == (TIME_LIMIT, 50)
    assert summary["control_cost"] == 0.0
    # With no torque the fingertip stays put: its final distance to the target is the initial one.
    assert summary["final_fingertip_target_distance_m"] == pytest.approx(summary["initial_fingertip_target_distance_m"], abs=1e-3)
    assert summary["min_fingertip_target_distance_m"] <= summary["final_fingertip_target_distance_m"]
    assert abs(sum(s.reward for s in steps) + 50 * summary["final_fingertip_target_distance_m"]) < 0.1


def test_an_ant_whose_torso_leaves_the_healthy_range_ends_unhealthy(benchmarks) -> None:
    benchmark = benchmarks[ANT_ID]
    environment = _environment(benchmark)
    environment.reset()
    for _ in range(3):
        assert environment.step(np.zeros(8, dtype=np.float32)).terminated is False
    env = environment._env  # the unwrapped gymnasium Ant: lift its torso above 1.0 m
    qpos = env.data.qpos.copy()
    qpos[2] = 1.5
    env.set_state(qpos, env.data.qvel.copy())
    result = environment.step(np.zeros(8, dtype=np.float32))
    summary = environment.summary()
    environment.close()
    assert result.terminated is True
    assert (summary["end"], summary["steps"], summary["healthy_steps"]) == (UNHEALTHY, 4, 3)
    assert summary["final_torso_z_m"] > 1.0


def test_halfcheetah_summary_measures_the_x_distance_and_the_control_cost(benchmarks) -> None:
    benchmark = benchmarks[HALFCHEETAH_ID]
    environment = _environment(benchmark)
    environment.reset()
    env = environment._env
    start = float(env.data.qpos[0])
    rewards = [environment.step(np.full(6, 0.5, dtype=np.float32)).reward for _ in range(20)]
    end = float(env.data.qpos[0])
    summary = environment.summary()
    environment.close()
    assert (summary["end"], summary["steps"]) == ("not_ended", 20)
    assert summary["x_distance_m"] == pytest.approx(end - start, abs=1e-3)
    assert summary["control_cost"] == pytest.approx(20 * 0.1 * 6 * 0.25, abs=1e-3)
    assert sum(rewards) == pytest.approx(summary["forward_reward"] - summary["control_cost"], abs=1e-3)
    assert summary["mean_x_velocity_mps"] == pytest.approx(summary["forward_reward"] / 20, abs=1e-3)


def test_pusher_summary_measures_the_object_to_goal_distance(benchmarks) -> None:
    benchmark = benchmarks[PUSHER_ID]
    environment = _environment(benchmark)
    environment.reset()
    env = environment._env
    for _ in range(5):
        environment.step(np.zeros(7, dtype=np.float32))
    summary = environment.summary()
    expected = float(np.linalg.norm(env.get_body_com("object") - env.get_body_com("goal")))
    environment.close()
    assert summary["final_object_goal_distance_m"] == pytest.approx(expected, abs=1e-4) and expected > 0
    assert 0 < summary["final_fingertip_object_distance_m"] < 2.0 and summary["control_cost"] == 0.0


def test_the_payload_is_a_seed_that_the_summary_never_shows(benchmarks) -> None:
    benchmark = benchmarks[REACHER_ID]
    payload = benchmark.plan("test", 3, 1)[0]
    seed = json.loads(payload)["seed"]
    environment = benchmark.make_environment(payload)
    environment.reset()
    environment.step(np.zeros(2, dtype=np.float32))
    summary = environment.summary()
    environment.close()
    assert not any("seed" in key for key in summary)
    assert str(seed) not in json.dumps(summary)
