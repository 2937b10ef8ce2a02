"""The Fetch Benchmarks: a 7-DoF arm pushes (FetchPush-v4) or carries (FetchPickAndPlace-v4) a block to a goal.

State observations only: nothing here renders, so no GL library is needed.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from epg_sdk.benchmark import (
    EPISODE_COLUMNS,
    Benchmark,
    EpisodeRecord,
    Feedback,
    StepResult,
    count_ends,
    episodes_csv,
    mean_steps,
    shorten_summaries,
    success_rate,
    with_failure_summaries,
)
from epg_sdk.gym_adapter import GymnasiumBenchmark, probe_environment
from epg_sdk.readme import package_readme
from epg_sdk.trace import BoundedTrace

__all__ = [
    "END_CAUSES", "FETCH_FAILURE_RETURN", "FETCH_HORIZON", "PICK_AND_PLACE_ID", "PUSH_ID", "FetchEnvironment",
    "make_pick_and_place_benchmark", "make_push_benchmark",
]

PUSH_ID = "FetchPush-v4"
PICK_AND_PLACE_ID = "FetchPickAndPlace-v4"
FETCH_HORIZON = 50  # gymnasium-robotics' max_episode_steps for both ids
FETCH_FAILURE_RETURN = -50.0  # the worst completed Episode: -1 on each of its 50 steps
TRACE_EVERY = 5  # steps between two trace tokens (and the last step)
DISTANCE_THRESHOLD = 0.05  # gymnasium-robotics' success radius for both ids (published as distance_threshold)

# Why an Episode ended: a closed set, the value of every Episode summary's `end`.
TIME_LIMIT = "time_limit"  # the Fetch tasks never terminate: every completed Episode runs its 50 steps
POLICY_FAILURE = "policy_failure"  # the Program failed (crash, timeout, invalid action); set by feedback()
NOT_ENDED = "not_ended"  # what an Environment says when asked before its Episode ended
END_CAUSES = (TIME_LIMIT, POLICY_FAILURE)

# Feedback keeps the whole summary, trace included, of this many Episodes (in plan order); later
# Episodes keep only SHORT_SUMMARY_KEYS, so that Feedback stays bounded.
MAX_DETAILED_EPISODES = 128
SHORT_SUMMARY_KEYS = ("success", "end", "final_distance_m")
# episodes.csv: each Episode's index, status, failure, steps, return and scored_return (not terminated and
# truncated), then these values of its summary.
CSV_SUMMARY_COLUMNS = ("success", "end", "final_distance_m", "min_distance_m", "success_steps", "first_success_step")

# The 25 entries of `observation`, in order (gymnasium-robotics' fetch_env._get_obs).
# Each name maps to [start, stop) within the vector.
OBSERVATION_LAYOUT = {
    "grip_pos": [0, 3], "object_pos": [3, 6], "object_rel_pos": [6, 9], "gripper_state": [9, 11],
    "object_rot": [11, 14], "object_velp": [14, 17], "object_velr": [17, 20], "grip_velp": [20, 23],
    "gripper_vel": [23, 25],
}

_COMMON = (
    "Observation: a dict of float64 vectors: observation[25] (gripper position, object position, object "
    "relative to gripper, finger state, object rotation, object and gripper velocities; see parameters."
    "observation_layout), achieved_goal[3] (the object's position, m) and desired_goal[3] (the goal, m). "
    "Action: float32[4] in [-1, 1]: gripper displacement dx, dy, dz (x0.05 m per step) and finger command "
    "(+1 opens, -1 closes). Reward per step: 0 when the object is within 0.05 m of the goal, else -1. "
    "50 steps, never terminated early."
)
PUSH_DESCRIPTION = "Push a block on a table to a goal on the table with a 7-DoF Fetch arm (fingers locked). " + _COMMON
PICK_AND_PLACE_DESCRIPTION = ("Pick up a block and place it at a goal on or above the table with a 7-DoF Fetch arm. "
                              + _COMMON)


class FetchEnvironment:
    """One Fetch Episode, seeded by the Episode's hidden seed, with its bounded public summary.

    The trace holds one token every TRACE_EVERY steps and one for the last step:
    `STEP:DISTANCE_CM` plus `*` while the object is within the goal threshold, e.g. `25:7.3`, `50:2.1*`.
    """

    def __init__(self, env: gym.Env, seed: int) -> None:
        self._env = env
        self._seed = seed
        self._steps = 0
        self._success = False
        self._success_steps = 0
        self._first_success: int | None = None
        self._distance = float("nan")
        self._min_distance = float("inf")
        self._trace = BoundedTrace()
        self._traced_step = -1

    def reset(self) -> dict[str, np.ndarray]:
        observation, _info = self._env.reset(seed=self._seed)
        self._observe(observation)
        self._trace.add(self._token())
        self._traced_step = 0
        return _plain(observation)

    def step(self, action: np.ndarray) -> StepResult:
        observation, reward, terminated, truncated, info = self._env.step(action)
        self._steps += 1
        self._observe(observation)
        self._success = bool(info["is_success"])
        if self._success:
            self._success_steps += 1
            if self._first_success is None:
                self._first_success = self._steps
        if self._steps % TRACE_EVERY == 0:
            self._trace.add(self._token())
            self._traced_step = self._steps
        return StepResult(observation=_plain(observation), reward=float(reward), terminated=bool(terminated),
                          truncated=bool(truncated))

    def summary(self) -> dict[str, Any]:
        """Success at the last step, the end cause, the steps, the object-to-goal distances and the trace."""
        if self._traced_step != self._steps:
            self._trace.add(self._token())
            self._traced_step = self._steps
        trace, truncated = self._trace.render()
        return {
            "success": self._success,
            "end": TIME_LIMIT if self._steps >= FETCH_HORIZON else NOT_ENDED,
            "steps": self._steps,
            "final_distance_m": round(self._distance, 4),
            "min_distance_m": round(self._min_distance, 4),
            "success_steps": self._success_steps,
            "first_success_step": -1 if self._first_success is None else self._first_success,
            "trace": trace,
            "trace_truncated": truncated,
        }

    def close(self) -> None:
        self._env.close()

    def _observe(self, observation: dict[str, np.ndarray]) -> None:
        self._distance = float(np.linalg.norm(observation["achieved_goal"] - observation["desired_goal"]))
        self._min_distance = min(self._min_distance, self._distance)

    def _token(self) -> str:
        within = "*" if self._distance < DISTANCE_THRESHOLD else ""
        return f"{self._steps}:{100 * self._distance:.1f}{within}"



class FetchBenchmark(GymnasiumBenchmark):
    """A GymnasiumBenchmark over a Fetch id whose Feedback adds success rate, end causes and distances."""

    def feedback(self, records: list[EpisodeRecord]) -> Feedback:
        """The SDK's default Feedback, plus `success_rate`, `ends` (count per end cause), `mean_final_distance_m`,
        `mean_steps` and `shortened_summaries`; an `episodes.csv` artifact with every Episode's summary values.

        A failed Episode's summary says `end: policy_failure` and `success: false`. Episodes after
        the first MAX_DETAILED_EPISODES keep only SHORT_SUMMARY_KEYS in their summary.
        """
        base = super().feedback(records)
        episodes = with_failure_summaries(base.values["episodes"], {"end": POLICY_FAILURE, "success": False})
        distances = [float(row["summary"]["final_distance_m"]) for row in episodes if "final_distance_m" in row["summary"]]
        values = {
            **base.values,
            "episodes": shorten_summaries(episodes, detailed=MAX_DETAILED_EPISODES, keys=SHORT_SUMMARY_KEYS),
            "success_rate": success_rate(episodes),
            "ends": count_ends(episodes, END_CAUSES),
            "mean_final_distance_m": round(sum(distances) / len(distances), 4) if distances else -1.0,
            "mean_steps": mean_steps(episodes),
            "shortened_summaries": max(0, len(episodes) - MAX_DETAILED_EPISODES),
        }
        table = episodes_csv(episodes, EPISODE_COLUMNS[:6], CSV_SUMMARY_COLUMNS)
        return Feedback(score=base.score, values=values, artifacts={"episodes.csv": table})


def _plain(observation: Any) -> dict[str, np.ndarray]:
    """The observation as a plain dict of float64 arrays (copies: the policy may not alias the simulator)."""
    return {key: np.array(value, dtype=np.float64) for key, value in observation.items()}


def _parameters(env_id: str) -> dict[str, Any]:
    with probe_environment(env_id) as env:
        return {
            "distance_threshold": float(env.distance_threshold),
            "reward_type": str(env.reward_type),
            "action_scale_m": 0.05,
            "n_substeps": int(env.n_substeps),
            "step_seconds": float(env.dt),
            "has_object": bool(env.has_object),
            "block_gripper": bool(env.block_gripper),
            "target_in_the_air": bool(env.target_in_the_air),
            "target_range_m": float(env.target_range),
            "obj_range_m": float(env.obj_range),
            "observation_layout": {name: list(span) for name, span in OBSERVATION_LAYOUT.items()},
        }


def _make(env_id: str, description: str) -> Benchmark:
    return FetchBenchmark(
        env_id=env_id,
        description=description,
        horizon=FETCH_HORIZON,
        failure_return=FETCH_FAILURE_RETURN,
        parameters=_parameters(env_id),
        readme=package_readme(__file__),
        environment_factory=FetchEnvironment,
    )


def make_push_benchmark() -> Benchmark:
    """Return the FetchPush-v4 Benchmark (horizon 50, failure_return -50.0)."""
    return _make(PUSH_ID, PUSH_DESCRIPTION)


def make_pick_and_place_benchmark() -> Benchmark:
    """Return the FetchPickAndPlace-v4 Benchmark (horizon 50, failure_return -50.0)."""
    return _make(PICK_AND_PLACE_ID, PICK_AND_PLACE_DESCRIPTION)
