"""The baseline, the uniform-random Program and a probe of what a policy receives, through the local policy runtime."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from epg.v1 import runner_pb2
from epg_env_box2d import make_bipedal_benchmark, make_carracing_benchmark
from epg_env_box2d.box2d_benchmark import END_CAUSES, NOT_ENDED
from epg_sdk.runtime.episode_loop import EpisodeLimits, feedback_records
from epg_sdk.testing import drive_environment, evaluate_locally, run_local_episode, summary_values

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
BASELINE = PACKAGE_ROOT / "baseline"
RANDOM = PACKAGE_ROOT / "random"

# Checks every observation, then ends its Episode on purpose at step 50 with an action outside the Box:
# a wrong observation fails the Episode with an exception at its first step instead.
PROBE = '''
import numpy as np


class Probe:
    def __init__(self):
        self.steps = 0

    def act(self, observation):
        if not (isinstance(observation, np.ndarray) and observation.shape == SHAPE and observation.dtype == np.DTYPE):
            raise TypeError(f"observation is {type(observation).__name__} {getattr(observation, 'dtype', '')} {np.shape(observation)}")
        self.steps += 1
        return np.full(WIDTH, 0.0 if self.steps <= 50 else 7.0, dtype=np.float32)


def make_policy(context):
    space = context.observation_space
    if (space["type"], space["shape"], space["dtype"]) != ("box", list(SHAPE), "DTYPE") or type(space["low"]) is not np.ndarray:
        raise TypeError(f"context.observation_space is {space}")
    return Probe()
'''


# Expects float32 frames, which CarRacing's are not: it raises at its first step, saying what it got.
FLOAT_EXPECTATION = '''
import numpy as np


class Policy:
    def act(self, obs):
        if not (isinstance(obs, np.ndarray) and obs.shape == (96, 96, 3) and obs.dtype == np.float32):
            raise TypeError(f"the observation is {type(obs).__name__} {getattr(obs, 'dtype', '')} {np.shape(obs)}")
        return np.zeros(3, dtype=np.float32)


def make_policy(context):
    return Policy()
'''


def write_probe(directory: Path, shape: tuple[int, ...], dtype: str, width: int) -> Path:
    directory.mkdir()
    source = textwrap.dedent(PROBE).replace("SHAPE", repr(shape)).replace("DTYPE", dtype).replace("WIDTH", str(width))
    (directory / "policy.py").write_text(source)
    return directory


def test_carracing_policies_receive_uint8_images_of_96_by_96_by_3(tmp_path: Path) -> None:
    feedback = evaluate_locally(make_carracing_benchmark(), write_probe(tmp_path / "probe", (96, 96, 3), "uint8", 3), episodes=1, seed=4)
    (row,) = feedback.values["episodes"]
    assert (row["status"], row["failure"], row["steps"]) == ("policy_failure", "invalid_action", 50)
    assert row["summary"]["end"] == "policy_failure"


def test_a_carracing_program_expecting_another_dtype_fails_at_its_first_step_saying_what_it_got(tmp_path: Path) -> None:
    carracing = make_carracing_benchmark()
    program = tmp_path / "float"
    program.mkdir()
    (program / "policy.py").write_text(FLOAT_EXPECTATION)
    episode = runner_pb2.EpisodeSpec(split="train", index=0, payload=carracing.plan("train", 0, 1)[0])
    record = run_local_episode(carracing, episode, program, 0, EpisodeLimits())
    feedback = carracing.feedback(feedback_records([record]))
    assert [(r["status"], r["failure"], r["steps"]) for r in feedback.values["episodes"]] == [("policy_failure", "exception", 0)]
    assert "the observation is ndarray uint8 (96, 96, 3)" in record.message, record.message
    assert feedback.values["ends"]["policy_failure"] == 1 and feedback.score == -200.0


def test_carracing_frames_show_grass_and_two_seconds_of_gentle_gas_cover_ten_tiles_then_the_car_stops_on_the_road() -> None:
    carracing = make_carracing_benchmark()

    def gentle_gas_then_brake(observation: np.ndarray, step: int) -> np.ndarray:
        view = observation[:84].astype(np.int16)  # above the dashboard
        assert ((view[..., 1] - view[..., 0]) > 40).any(), f"no grass in the view at step {step}"
        return np.array([0.0, 0.05, 0.0] if step < 100 else [0.0, 0.0, 1.0], dtype=np.float32)

    # 300 steps: the car has stopped by then, so the rest of the Episode's 1000 adds no tile and no off-track step.
    environment, observations, results = drive_environment(carracing, carracing.plan("train", 0, 1)[0], gentle_gas_then_brake, limit=300)
    summary = environment.summary()
    environment.close()
    assert len(results) == 300 and all(o.dtype == np.uint8 and o.shape == (96, 96, 3) for o in observations[::50])
    assert (summary["end"], summary["tiles_visited"], summary["off_track_steps"]) == (NOT_ENDED, 10, 0)
    assert summary["trace"].split("; ")[-1] == "300 t10 v0.0 on", summary["trace"]


def test_bipedal_policies_receive_float32_vectors_and_a_wrong_expectation_fails_at_once(tmp_path: Path) -> None:
    right = evaluate_locally(make_bipedal_benchmark(), write_probe(tmp_path / "right", (24,), "float32", 4), episodes=1, seed=4)
    wrong = evaluate_locally(make_bipedal_benchmark(), write_probe(tmp_path / "wrong", (24,), "float64", 4), episodes=1, seed=4)
    assert [(r["status"], r["failure"], r["steps"]) for r in right.values["episodes"]] == [("policy_failure", "invalid_action", 50)]
    assert [(r["status"], r["failure"], r["steps"]) for r in wrong.values["episodes"]] == [("policy_failure", "exception", 0)]


def test_bipedal_baseline_walks_further_than_uniform_random() -> None:
    baseline = evaluate_locally(make_bipedal_benchmark(), BASELINE, episodes=4, split="train", seed=0)
    uniform = evaluate_locally(make_bipedal_benchmark(), RANDOM, episodes=4, split="train", seed=0)
    for feedback in (baseline, uniform):
        assert feedback.values["policy_failures"] == 0
        assert set(feedback.values["ends"]) == set(END_CAUSES) and sum(feedback.values["ends"].values()) == 4
        for row in feedback.values["episodes"]:
            assert row["summary"]["end"] in ("fell", "finished", "time_limit") and row["summary"]["steps"] == row["steps"] > 0
    distances = {name: [row["summary"]["distance_m"] for row in f.values["episodes"]] for name, f in (("baseline", baseline), ("random", uniform))}
    assert min(distances["baseline"]) > 10.0 > max(distances["random"]), distances
    assert baseline.score > uniform.score
    assert uniform.values["ends"]["fell"] >= 3  # uniform torques topple the walker, or it kneels until the time limit


def test_carracing_baseline_follows_the_road_where_random_barely_moves() -> None:
    baseline = evaluate_locally(make_carracing_benchmark(), BASELINE, episodes=1, split="train", seed=0)
    uniform = evaluate_locally(make_carracing_benchmark(), RANDOM, episodes=1, split="train", seed=0)
    (driven,), (jittered,) = baseline.values["episodes"], uniform.values["episodes"]
    for row in (driven, jittered):
        assert (row["status"], row["steps"], row["summary"]["end"]) == ("completed", 1000, "time_limit")
    assert driven["summary"]["tiles_fraction"] > 0.5 > 0.2 > jittered["summary"]["tiles_fraction"]
    assert driven["summary"]["off_track_fraction"] < 0.2
    assert baseline.score > 300.0 > 0.0 > uniform.score


def test_random_program_replays_its_actions_for_the_same_episode() -> None:
    traces = [summary_values(evaluate_locally(make_bipedal_benchmark(), RANDOM, episodes=2, split="train", seed=seed), "trace") for seed in (7, 7, 8)]
    assert traces[0] == traces[1] and traces[0] != traces[2]
