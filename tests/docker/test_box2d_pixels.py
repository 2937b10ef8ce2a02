"""CarRacing-v3 on the real engine: the policy receives each 96x96x3 pixel observation as a NumPy uint8 array.

The Episode runs in a fresh hardened policy container against the env-box2d image; the
observation travels as one raw tensor (epg_sdk.protocol.values), so the policy gets an ndarray of
the environment's shape and dtype, never nested lists. A Program that expects anything else
fails its Episode at its first step.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.package_sandbox import package_sandbox_factory

from epg_sdk.codes import EpisodeStatus, FailureCode
from orchestrator.kernel.evaluation import evaluate_program
from orchestrator.kernel.program import capture_program

PACKAGE = Path(__file__).resolve().parents[2] / "environments" / "box2d"

# Raises unless every observation is a uint8 ndarray of shape (96, 96, 3) showing grass and road;
# rolls gently straight on for two seconds, then brakes to a stop, so that the Episode runs its 1000 steps.
PIXEL_CHECKER = '''
import numpy as np


class PixelChecker:
    def __init__(self):
        self.steps = 0

    def act(self, obs):
        self.steps += 1
        if not (isinstance(obs, np.ndarray) and obs.shape == (96, 96, 3) and obs.dtype == np.uint8):
            raise TypeError(f"the observation is {type(obs).__name__} {getattr(obs, 'dtype', '')} {np.shape(obs)}")
        view = obs[:84].astype(np.int16)
        if not ((view[..., 1] - view[..., 0]) > 40).any():
            raise ValueError("no grass in the view")
        return np.array([0.0, 0.05, 0.0] if self.steps <= 100 else [0.0, 0.0, 1.0], dtype=np.float32)


def make_policy(context):
    return PixelChecker()
'''

# The same check against float32, which the observation is not.
FLOAT_CHECKER = PIXEL_CHECKER.replace("obs.dtype == np.uint8", "obs.dtype == np.float32")


@pytest.fixture(scope="module")
def box2d_sandbox(engine, scope):
    """A factory: box2d_sandbox(name) -> a started DockerSandbox on env-box2d for the Benchmark named, labelled with the run's scope."""
    return package_sandbox_factory(engine, PACKAGE, "env-box2d", scope, pool_size=1)


def test_the_policy_receives_uint8_pixel_arrays_for_a_whole_episode(box2d_sandbox, write_program):
    program = capture_program(write_program(PIXEL_CHECKER))
    with box2d_sandbox("carracing") as sandbox:
        described = sandbox.describe()
        assert described.id == "CarRacing-v3"
        assert (described.observation_space["shape"], described.observation_space["dtype"]) == ([96, 96, 3], "uint8")
        feedback = evaluate_program(sandbox, program, split="train", seed=0, episodes=1).feedback
    assert [(e.status, e.failure, e.steps) for e in feedback.episodes] == [(EpisodeStatus.COMPLETED, None, 1000)], feedback.episodes
    (row,) = feedback.values["episodes"]
    # Two seconds of gentle gas cover ten tiles of this track, and the car stops on the road (as evaluate_locally shows too).
    assert (row["summary"]["end"], row["summary"]["tiles_visited"], row["summary"]["off_track_steps"]) == ("time_limit", 10, 0)


def test_a_program_expecting_another_dtype_fails_at_its_first_step(box2d_sandbox, write_program):
    program = capture_program(write_program(FLOAT_CHECKER))
    with box2d_sandbox("CarRacing-v3") as sandbox:
        feedback = evaluate_program(sandbox, program, split="train", seed=0, episodes=1).feedback
    assert [(e.status, e.failure, e.steps) for e in feedback.episodes] == [(EpisodeStatus.POLICY_FAILURE, FailureCode.EXCEPTION, 0)]
    assert "the observation is ndarray uint8 (96, 96, 3)" in feedback.episodes[0].reason, feedback.episodes[0].reason
    assert feedback.values["ends"]["policy_failure"] == 1 and feedback.score == -200.0
