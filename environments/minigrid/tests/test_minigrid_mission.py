"""The mission as a policy receives it: text it can read and act on, through the real policy runtime and value codec.

Each Episode runs the Program in a local policy runtime (`epg_sdk.testing.run_local_episode`): the
observation crosses the same framed protobuf codec as in the sandbox, so what a Program does with
the mission shows in the Feedback's per-step trace, and a Program that takes the mission for
anything but a str fails its Episodes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from epg.v1 import runner_pb2
from epg_env_minigrid import make_fourrooms, make_keycorridor
from epg_sdk.benchmark import Benchmark, Feedback
from epg_sdk.runtime.episode_loop import EpisodeLimits, feedback_records
from epg_sdk.testing import run_local_episode

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


def write_program(directory: Path, source: str) -> Path:
    directory.mkdir()
    (directory / "policy.py").write_text(source)
    return directory


def evaluate(benchmark: Benchmark, program: Path, episodes: int) -> tuple[Feedback, list[str]]:
    """The Benchmark's Feedback on the first `episodes` train Episodes of seed 0, and the runtime's message of each Episode."""
    records = [run_local_episode(benchmark, runner_pb2.EpisodeSpec(split="train", index=i, payload=payload), program, 0, EpisodeLimits())
               for i, payload in enumerate(benchmark.plan("train", 0, episodes))]
    return benchmark.feedback(feedback_records(records)), [record.message for record in records]


def _actions(summary: dict) -> set[str]:
    return {entry.split()[1] for entry in summary["trace"] if not entry.startswith("...")}


@pytest.mark.parametrize("make_benchmark, turn, steps", [(make_fourrooms, "left", 100), (make_keycorridor, "right", 480)],
                         ids=["fourrooms", "keycorridor"])
def test_policy_reads_the_mission_as_text_and_acts_on_it(tmp_path: Path, make_benchmark, turn, steps) -> None:
    benchmark = make_benchmark()
    feedback, _messages = evaluate(benchmark, write_program(tmp_path / "reader", MISSION_READER), 3)
    rows = feedback.values["episodes"]
    assert [(e["status"], e["failure"], e["steps"]) for e in rows] == [("completed", None, steps)] * 3, rows
    summaries = [row["summary"] for row in rows]
    for summary in summaries:
        assert isinstance(summary["mission"], str)
        assert _actions(summary) == {turn}
        assert (summary["termination"], summary["success"], summary["steps"]) == ("time_limit", False, steps)
        # Turning in place: the agent ends where it started.
        assert (summary["end"]["x"], summary["end"]["y"]) == (summary["start"]["x"], summary["start"]["y"])
    if benchmark.spec.id == "MiniGrid-KeyCorridorS4R3-v0":
        assert all(s["mission"].startswith("pick up the ") and s["mission"].endswith(" ball") for s in summaries)
    else:
        assert {s["mission"] for s in summaries} == {"reach the goal"}
    assert feedback.score == 0.0 and feedback.values["terminations"] == {"goal_reached": 0, "time_limit": 3, "stopped": 0}


def test_a_program_that_takes_the_mission_for_bytes_fails_its_episodes(tmp_path: Path) -> None:
    feedback, messages = evaluate(make_fourrooms(), write_program(tmp_path / "bytes", MISSION_AS_BYTES), 2)
    rows = feedback.values["episodes"]
    assert [(e["status"], e["failure"], e["steps"]) for e in rows] == [("policy_failure", "exception", 0)] * 2
    assert all("'str' object has no attribute 'decode'" in message for message in messages), messages
    assert [e["summary"]["termination"] for e in rows] == ["stopped", "stopped"]
    assert feedback.values["policy_failures"] == 2 and feedback.score == 0.0
