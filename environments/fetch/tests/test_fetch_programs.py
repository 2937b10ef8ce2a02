"""The baseline, the uniform-random Program and a probe of what a policy receives, through the local policy runtime."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from epg_env_fetch import END_CAUSES, make_pick_and_place_benchmark, make_push_benchmark
from epg_sdk.testing import evaluate_locally, summary_values

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
BASELINE = PACKAGE_ROOT / "baseline"
RANDOM = PACKAGE_ROOT / "random"

PROBE = '''
import numpy as np

SHAPES = {"observation": (25,), "achieved_goal": (3,), "desired_goal": (3,)}


class Probe:
    """Raises, failing the Episode with a readable message, unless each observation is a dict of float64 arrays."""

    def act(self, observation):
        if type(observation) is not dict or set(observation) != set(SHAPES):
            raise TypeError(f"observation is {type(observation).__name__} {sorted(observation)}")
        for key, value in observation.items():
            if type(value) is not np.ndarray or value.dtype != np.DTYPE or value.shape != SHAPES[key]:
                raise TypeError(f"{key} is {type(value).__name__} {getattr(value, 'dtype', '')} {np.shape(value)}")
        return np.zeros(4, dtype=np.float32)


def make_policy(context):
    space = context.observation_space
    if space["type"] != "dict" or set(space["spaces"]) != set(SHAPES):
        raise TypeError(f"context.observation_space is {space}")
    for key, sub in space["spaces"].items():
        if (sub["type"], tuple(sub["shape"]), sub["dtype"]) != ("box", SHAPES[key], "float64") or type(sub["low"]) is not np.ndarray:
            raise TypeError(f"context.observation_space['spaces'][{key!r}] is {sub}")
    if context.parameters["distance_threshold"] != 0.05 or context.action_space["shape"] != [4]:
        raise TypeError(f"context.parameters is {context.parameters}")
    return Probe()
'''

MAKERS = [make_push_benchmark, make_pick_and_place_benchmark]
IDS = ["push", "pick_and_place"]


def write_probe(directory: Path, dtype: str) -> Path:
    directory.mkdir()
    (directory / "policy.py").write_text(textwrap.dedent(PROBE).replace("np.DTYPE", f"np.{dtype}"))
    return directory


@pytest.mark.parametrize("make_benchmark", MAKERS, ids=IDS)
def test_policies_receive_dicts_of_float64_arrays_and_their_spaces(tmp_path: Path, make_benchmark) -> None:
    feedback = evaluate_locally(make_benchmark(), write_probe(tmp_path / "probe", "float64"), episodes=2, seed=4)
    assert feedback.values["policy_failures"] == 0
    assert [row["steps"] for row in feedback.values["episodes"]] == [50, 50]
    assert feedback.values["ends"] == {"time_limit": 2, "policy_failure": 0}


def test_the_probe_would_see_a_dtype_other_than_the_one_sent(tmp_path: Path) -> None:
    feedback = evaluate_locally(make_push_benchmark(), write_probe(tmp_path / "probe", "float32"), episodes=1, seed=4)
    (row,) = feedback.values["episodes"]
    assert (row["status"], row["failure"], row["steps"], row["scored_return"]) == ("policy_failure", "exception", 0, -50.0)
    assert (row["summary"]["end"], row["summary"]["success"]) == ("policy_failure", False)


@pytest.mark.parametrize("make_benchmark", MAKERS, ids=IDS)
def test_baseline_runs_without_failures_and_beats_uniform_random(make_benchmark) -> None:
    baseline = evaluate_locally(make_benchmark(), BASELINE, episodes=6, split="train", seed=0)
    uniform = evaluate_locally(make_benchmark(), RANDOM, episodes=6, split="train", seed=0)
    for feedback in (baseline, uniform):
        assert feedback.values["policy_failures"] == 0
        assert feedback.values["ends"] == dict.fromkeys(END_CAUSES, 0) | {"time_limit": 6}
        for row in feedback.values["episodes"]:
            summary = row["summary"]
            assert summary["steps"] == row["steps"] == 50 and -50.0 <= row["return"] <= 0.0
            assert row["return"] == -50.0 + summary["success_steps"]
    assert baseline.score > uniform.score + 10.0
    assert baseline.values["success_rate"] >= 0.5 > uniform.values["success_rate"]
    assert baseline.values["mean_final_distance_m"] < uniform.values["mean_final_distance_m"]


def test_baseline_rejects_a_benchmark_it_does_not_drive(tmp_path: Path) -> None:
    from epg_env_fetch.fetch_benchmark import FetchBenchmark, FetchEnvironment

    reach = FetchBenchmark(env_id="FetchReach-v4", description="reach", horizon=50, failure_return=-50.0, environment_factory=FetchEnvironment)
    feedback = evaluate_locally(reach, BASELINE, episodes=1, seed=0)
    (row,) = feedback.values["episodes"]
    assert (row["status"], row["failure"]) == ("policy_failure", "exception")


def test_random_program_replays_its_actions_for_the_same_episode() -> None:
    traces = [summary_values(evaluate_locally(make_pick_and_place_benchmark(), RANDOM, episodes=3, split="train", seed=seed), "trace") for seed in (7, 7, 8)]
    assert traces[0] == traces[1] and traces[0] != traces[2]
