"""MiniGrid on the real engine: the policy reads observation["mission"] as text and acts on it.

Each Episode runs in a fresh hardened policy container against the env-minigrid image; what a
Program does with the mission shows in the Feedback's per-step trace, and a Program that takes
the mission for anything but a str fails its Episodes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.package_sandbox import package_sandbox_factory

from epg_sdk.codes import EpisodeStatus, FailureCode
from orchestrator.kernel.evaluation import evaluate_program
from orchestrator.kernel.program import capture_program

PACKAGE = Path(__file__).resolve().parents[2] / "environments" / "minigrid"

# Checks the whole observation contract, then steers by the mission's words: a mission that ends
# in "goal" turns left every step, one that names a ball to pick up turns right. A mission that is
# not a str raises; one the Benchmark does not list gets an invalid action. Either fails the Episode.
MISSION_READER = '''
import re

import numpy as np

LEFT, RIGHT = 0, 1
PICK_UP = re.compile(r"^pick up the (blue|green|grey|purple|red|yellow) ball$")


class MissionReader:
    def __init__(self, context):
        mission_space = context.observation_space["spaces"]["mission"]
        if mission_space != {"type": "text"}:
            raise TypeError(f"the mission space is described as {mission_space!r}")
        self.missions = context.parameters["missions"]

    def act(self, observation):
        mission = observation["mission"]
        if not isinstance(mission, str):
            raise TypeError(f"the mission is a {type(mission).__name__}, not a str")
        image, direction = observation["image"], observation["direction"]
        if not (isinstance(image, np.ndarray) and image.dtype == np.uint8 and image.shape == (7, 7, 3)):
            raise TypeError(f"the image is {type(image).__name__} {getattr(image, 'dtype', '')} {getattr(image, 'shape', '')}")
        if type(direction) is not int or not 0 <= direction <= 3:
            raise TypeError(f"the direction is {direction!r}")
        if mission not in self.missions:
            return 99
        if mission.split()[-1] == "goal":
            return LEFT
        if PICK_UP.match(mission):
            return RIGHT
        return 99


def make_policy(context):
    return MissionReader(context)
'''

# Takes the mission for bytes, as a Program written against another codec might.
MISSION_AS_BYTES = '''
class Policy:
    def act(self, observation):
        return len(observation["mission"].decode("ascii")) % 2

def make_policy(context):
    return Policy()
'''


@pytest.fixture(scope="module")
def minigrid_sandbox(engine, scope):
    """A factory: minigrid_sandbox(name) -> a started DockerSandbox on env-minigrid for the Benchmark named, labelled with the run's scope."""
    return package_sandbox_factory(engine, PACKAGE, "env-minigrid", scope, pool_size=2)


def _actions(summary: dict) -> set[str]:
    return {entry.split()[1] for entry in summary["trace"] if not entry.startswith("...")}


@pytest.mark.parametrize(
    "alias, benchmark_id, turn, steps",
    [("fourrooms", "MiniGrid-FourRooms-v0", "left", 100), ("keycorridor", "MiniGrid-KeyCorridorS4R3-v0", "right", 480)],
)
def test_policy_reads_the_mission_as_text_and_acts_on_it(minigrid_sandbox, write_program, alias, benchmark_id, turn, steps):
    program = capture_program(write_program(MISSION_READER))
    with minigrid_sandbox(alias) as sandbox:
        assert sandbox.describe().id == benchmark_id
        feedback = evaluate_program(sandbox, program, split="train", seed=0, episodes=3).feedback
    assert [(e.status, e.failure, e.steps) for e in feedback.episodes] == [(EpisodeStatus.COMPLETED, None, steps)] * 3, feedback.episodes
    summaries = [e["summary"] for e in feedback.values["episodes"]]
    for summary in summaries:
        assert isinstance(summary["mission"], str)
        assert _actions(summary) == {turn}
        assert (summary["termination"], summary["success"], summary["steps"]) == ("time_limit", False, steps)
        # Turning in place: the agent ends where it started.
        assert (summary["end"]["x"], summary["end"]["y"]) == (summary["start"]["x"], summary["start"]["y"])
    if benchmark_id == "MiniGrid-KeyCorridorS4R3-v0":
        assert all(s["mission"].startswith("pick up the ") and s["mission"].endswith(" ball") for s in summaries)
    else:
        assert {s["mission"] for s in summaries} == {"reach the goal"}
    assert feedback.score == 0.0 and feedback.values["terminations"] == {"goal_reached": 0, "time_limit": 3, "stopped": 0}


def test_a_program_that_takes_the_mission_for_bytes_fails_its_episodes(minigrid_sandbox, write_program):
    program = capture_program(write_program(MISSION_AS_BYTES))
    with minigrid_sandbox("MiniGrid-FourRooms-v0") as sandbox:
        feedback = evaluate_program(sandbox, program, split="train", seed=0, episodes=2).feedback
    assert [(e.status, e.failure, e.steps) for e in feedback.episodes] == [(EpisodeStatus.POLICY_FAILURE, FailureCode.EXCEPTION, 0)] * 2
    assert all("'str' object has no attribute 'decode'" in e.reason for e in feedback.episodes), [e.reason for e in feedback.episodes]
    assert [e["summary"]["termination"] for e in feedback.values["episodes"]] == ["stopped", "stopped"]
    assert feedback.values["policy_failures"] == 2 and feedback.score == 0.0
