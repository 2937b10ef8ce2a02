"""The baseline, the uniform-random Program and a probe of what a policy receives, through the local policy runtime."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from epg_env_highway import make_parking_benchmark, make_roundabout_benchmark
from epg_env_highway.highway_benchmark import END_CAUSES
from epg_sdk.benchmark import Feedback
from epg_sdk.testing import evaluate_locally, summary_values

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
BASELINE = PACKAGE_ROOT / "baseline"
RANDOM = PACKAGE_ROOT / "random"

PROBE = '''
import numpy as np

KEYS = {"observation", "achieved_goal", "desired_goal"}


class Probe:
    """Raises, failing the Episode with a readable message, unless each observation is a dict of float64[6] arrays."""

    def act(self, observation):
        if type(observation) is not dict or set(observation) != KEYS:
            raise TypeError(f"observation is {type(observation).__name__} {sorted(observation)}")
        for key, value in observation.items():
            if type(value) is not np.ndarray or value.dtype != np.DTYPE or value.shape != (6,):
                raise TypeError(f"{key} is {type(value).__name__} {getattr(value, 'dtype', '')} {np.shape(value)}")
        return np.zeros(2, dtype=np.float32)


def make_policy(context):
    space = context.observation_space
    if space["type"] != "dict" or set(space["spaces"]) != KEYS:
        raise TypeError(f"context.observation_space is {space}")
    for key, sub in space["spaces"].items():
        if (sub["type"], sub["shape"], sub["dtype"]) != ("box", [6], "float64") or type(sub["low"]) is not np.ndarray:
            raise TypeError(f"context.observation_space['spaces'][{key!r}] is {sub}")
    if context.parameters["scales"] != [100.0, 100.0, 5.0, 5.0, 1.0, 1.0]:
        raise TypeError(f"context.parameters is {context.parameters}")
    return Probe()
'''


def write_probe(directory: Path, dtype: str) -> Path:
    directory.mkdir()
    (directory / "policy.py").write_text(textwrap.dedent(PROBE).replace("np.DTYPE", f"np.{dtype}"))
    return directory


def test_parking_policies_receive_dicts_of_float64_arrays_and_their_spaces(tmp_path: Path) -> None:
    feedback = evaluate_locally(make_parking_benchmark(), write_probe(tmp_path / "probe", "float64"), episodes=2, seed=4)
    assert feedback.values["policy_failures"] == 0
    assert [row["steps"] for row in feedback.values["episodes"]] == [500, 500]  # zero action: the car stands still


def test_the_probe_would_see_a_dtype_other_than_the_one_sent(tmp_path: Path) -> None:
    feedback = evaluate_locally(make_parking_benchmark(), write_probe(tmp_path / "probe", "float32"), episodes=1, seed=4)
    (row,) = feedback.values["episodes"]
    assert (row["status"], row["failure"], row["steps"]) == ("policy_failure", "exception", 0)
    assert row["summary"]["end"] == "policy_failure"


@pytest.fixture(scope="module")
def baseline_and_random() -> Callable[[str], tuple[Feedback, Feedback]]:
    """The Feedback of the baseline and of the uniform-random Program on the same six train Episodes of a Benchmark
    ("parking" or "roundabout"), each evaluated once for the tests of this file that read them."""
    made: dict[str, tuple[Feedback, Feedback]] = {}

    def evaluated(name: str) -> tuple[Feedback, Feedback]:
        if name not in made:
            make_benchmark = {"parking": make_parking_benchmark, "roundabout": make_roundabout_benchmark}[name]
            made[name] = (evaluate_locally(make_benchmark(), BASELINE, episodes=6, split="train", seed=0),
                          evaluate_locally(make_benchmark(), RANDOM, episodes=6, split="train", seed=0))
        return made[name]

    return evaluated


@pytest.mark.parametrize("name", ["parking", "roundabout"])
def test_baseline_runs_without_failures_and_beats_uniform_random(baseline_and_random, name: str) -> None:
    baseline, uniform = baseline_and_random(name)
    for feedback in (baseline, uniform):
        assert feedback.values["policy_failures"] == 0
        assert set(feedback.values["ends"]) == set(END_CAUSES) and sum(feedback.values["ends"].values()) == 6
        for row in feedback.values["episodes"]:
            assert row["summary"]["end"] in END_CAUSES and row["summary"]["steps"] == row["steps"] > 0
    assert baseline.score > uniform.score
    assert baseline.values["success_rate"] > 0.0


def test_parking_baseline_parks_some_cars_where_random_parks_none(baseline_and_random) -> None:
    # On these six Episodes (the baseline parks four); uniform-random driving parks about one car in a hundred, and crashes most.
    baseline, uniform = baseline_and_random("parking")
    assert 0 < baseline.values["ends"]["goal_reached"] < 6
    assert uniform.values["ends"]["goal_reached"] == 0 and uniform.values["ends"]["crash"] >= 3


def test_random_program_replays_its_actions_for_the_same_episode() -> None:
    traces = [summary_values(evaluate_locally(make_roundabout_benchmark(), RANDOM, episodes=3, split="train", seed=seed), "trace") for seed in (7, 7, 8)]
    assert traces[0] == traces[1] and traces[0] != traces[2]
    actions = {token.split()[1] for trace in traces[0] for token in trace.split("; ")}
    assert len(actions) >= 3  # uniform over five meta-actions, not one repeated
