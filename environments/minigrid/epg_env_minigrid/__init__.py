"""Four MiniGrid Benchmarks (DoorKey-16x16, KeyCorridorS4R3, FourRooms, ObstructedMaze-1Q) behind the epg SDK."""

from __future__ import annotations

import os

# pygame, which minigrid imports when its first environment is made, prints a banner on stdout
# unless this variable is set. stdout belongs to the runner and the checks: set it before anything loads pygame.
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import itertools  # noqa: E402
from dataclasses import dataclass, replace  # noqa: E402
from functools import partial  # noqa: E402
from typing import Any  # noqa: E402

import minigrid  # noqa: E402,F401  (importing it registers the MiniGrid ids with gymnasium)
from minigrid.core.constants import COLOR_TO_IDX, OBJECT_TO_IDX, STATE_TO_IDX  # noqa: E402

from epg_env_minigrid.episode import ACTION_NAMES, DIRECTION_NAMES, GOAL_REACHED, STOPPED, TIME_LIMIT, MiniGridEpisode  # noqa: E402
from epg_sdk.benchmark import Benchmark, EpisodeRecord, Feedback  # noqa: E402
from epg_sdk.gym_adapter import GymnasiumBenchmark, probe_environment  # noqa: E402
from epg_sdk.readme import package_readme  # noqa: E402

__all__ = ["FAILURE_RETURN", "TASKS", "TRACED_EPISODES", "MiniGridBenchmark", "Task",
           "make_doorkey", "make_fourrooms", "make_keycorridor", "make_obstructedmaze"]

FAILURE_RETURN = 0.0  # the return of an Episode that never accomplishes its mission
# Feedback carries the per-step trace of the first TRACED_EPISODES Episodes (plan order) of an
# evaluation, the published maximum of one Submission; later Episodes keep every other summary value.
TRACED_EPISODES = 128


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """One MiniGrid Benchmark: its gymnasium id (also the Benchmark id), its horizon and its one-line description."""

    env_id: str
    horizon: int
    description: str


_COMMON = (
    "Observation: a dict of image (uint8 7x7x3 egocentric view: object, colour, state codes), "
    "direction (int 0-3) and mission (str). Action: Discrete(7): left, right, forward, pickup, drop, toggle, done. "
    "Reward on success 1 - 0.9 * step_count / max_steps, else 0."
)

TASKS = {
    "MiniGrid-DoorKey-16x16-v0": Task(
        env_id="MiniGrid-DoorKey-16x16-v0", horizon=1000,
        description="Pick up the key, unlock the door in the wall and reach the green goal square of a 16x16 grid; "
                    "at most 1000 steps (max_steps 2560). " + _COMMON),
    "MiniGrid-KeyCorridorS4R3-v0": Task(
        env_id="MiniGrid-KeyCorridorS4R3-v0", horizon=480,
        description="Find the key in a side room, unlock the locked room off the corridor and pick up the ball "
                    "the mission names; at most 480 steps. " + _COMMON),
    "MiniGrid-FourRooms-v0": Task(
        env_id="MiniGrid-FourRooms-v0", horizon=100,
        description="Reach the green goal square somewhere in four rooms joined by gaps; at most 100 steps. " + _COMMON),
    "MiniGrid-ObstructedMaze-1Q-v1": Task(
        env_id="MiniGrid-ObstructedMaze-1Q-v1", horizon=720,
        description="Pick up the blue ball in a corner room behind locked doors blocked by balls, their keys hidden "
                    "in boxes; at most 720 steps. " + _COMMON),
}


def _missions(space: Any) -> list[str]:
    """Every mission string a MissionSpace can produce, sorted."""
    if space.ordered_placeholders is None:
        return [space.mission_func()]
    return sorted({space.mission_func(*choice) for choice in itertools.product(*space.ordered_placeholders)})


def _public_parameters(env_id: str) -> dict[str, Any]:
    """What a policy may know without the simulator: the grid, the step limit of the reward, the codes."""
    with probe_environment(env_id) as env:
        return {
            "max_steps": int(env.max_steps),
            "grid_width": int(env.width),
            "grid_height": int(env.height),
            "agent_view_size": int(env.agent_view_size),
            "missions": _missions(env.observation_space["mission"]),
            "actions": list(ACTION_NAMES),
            "directions": list(DIRECTION_NAMES),
            "object_codes": dict(OBJECT_TO_IDX),
            "color_codes": dict(COLOR_TO_IDX),
            "state_codes": dict(STATE_TO_IDX),
        }


def _without_trace(record: EpisodeRecord) -> EpisodeRecord:
    summary = {key: value for key, value in record.summary.items() if key != "trace"}
    if "trace" in record.summary:
        summary["trace_omitted"] = True
    return replace(record, summary=summary)


class MiniGridBenchmark(GymnasiumBenchmark):
    """A MiniGrid task with the default keyword arguments of its registration, its Episodes recorded for Feedback."""

    def __init__(self, task: Task) -> None:
        super().__init__(
            env_id=task.env_id,
            description=task.description,
            horizon=task.horizon,
            failure_return=FAILURE_RETURN,
            parameters=_public_parameters(task.env_id),
            readme=package_readme(__file__),
            environment_factory=partial(MiniGridEpisode, horizon=task.horizon),
        )

    def feedback(self, records: list[EpisodeRecord]) -> Feedback:
        """The default Feedback (mean return, per-Episode table with each summary, episodes.csv) plus
        success_rate and the count of each termination cause; traces only for the first TRACED_EPISODES Episodes."""
        kept = [record if position < TRACED_EPISODES else _without_trace(record) for position, record in enumerate(records)]
        feedback = super().feedback(kept)
        successes = sum(1 for r in records if r.status == "completed" and r.summary.get("success") is True)
        causes = [r.summary.get("termination", STOPPED) for r in records]
        values = {
            **feedback.values,
            "success_rate": successes / len(records) if records else 0.0,
            "terminations": {cause: causes.count(cause) for cause in (GOAL_REACHED, TIME_LIMIT, STOPPED)},
        }
        return Feedback(score=feedback.score, values=values, artifacts=feedback.artifacts)


def make_doorkey() -> Benchmark:
    """MiniGrid-DoorKey-16x16-v0 (horizon 1000)."""
    return MiniGridBenchmark(TASKS["MiniGrid-DoorKey-16x16-v0"])


def make_keycorridor() -> Benchmark:
    """MiniGrid-KeyCorridorS4R3-v0 (horizon 480)."""
    return MiniGridBenchmark(TASKS["MiniGrid-KeyCorridorS4R3-v0"])


def make_fourrooms() -> Benchmark:
    """MiniGrid-FourRooms-v0 (horizon 100)."""
    return MiniGridBenchmark(TASKS["MiniGrid-FourRooms-v0"])


def make_obstructedmaze() -> Benchmark:
    """MiniGrid-ObstructedMaze-1Q-v1 (horizon 720)."""
    return MiniGridBenchmark(TASKS["MiniGrid-ObstructedMaze-1Q-v1"])
