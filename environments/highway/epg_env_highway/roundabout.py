"""The roundabout-v0 Benchmark: highway-env's roundabout entry, kinematic observations, discrete meta-actions."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from highway_env.envs.common.abstract import AbstractEnv
from highway_env.envs.common.action import DiscreteMetaAction
from highway_env.envs.common.observation import KinematicObservation
from highway_env.envs.roundabout_env import RoundaboutEnv

from epg_env_highway.highway_benchmark import CRASH, FAILURE_SUMMARY, NOT_ENDED, OFF_ROAD, TIME_LIMIT, HighwayBenchmark, lane_name, timing_parameters
from epg_sdk.benchmark import Benchmark, StepResult
from epg_sdk.readme import package_readme
from epg_sdk.trace import BoundedTrace

__all__ = ["ROUNDABOUT_FAILURE_RETURN", "ROUNDABOUT_HORIZON", "ROUNDABOUT_ID", "RoundaboutEnvironment", "make_roundabout_benchmark"]

ROUNDABOUT_ID = "roundabout-v0"
_CONFIG = RoundaboutEnv.default_config()  # the published defaults; environments are made without overrides
POLICY_FREQUENCY = int(_CONFIG["policy_frequency"])  # decisions per simulated second
ROUNDABOUT_HORIZON = int(_CONFIG["duration"]) * POLICY_FREQUENCY  # 11 s at 1 Hz
# Below every completed Episode: a step's reward is at least -0.05 / 1.2, and a crash ends the Episode.
ROUNDABOUT_FAILURE_RETURN = -1.0
ACTIONS = dict(DiscreteMetaAction.ACTIONS_ALL)  # index -> meta-action name
LANE_CHANGES = frozenset(index for index, name in ACTIONS.items() if name in ("LANE_LEFT", "LANE_RIGHT"))

DESCRIPTION = (
    "Drive through a busy roundabout without crashing. Observation: float32[5, 5], one row per vehicle "
    "(the ego first, then up to 4 nearby vehicles), columns presence, x, y, vx, vy in absolute coordinates, "
    "normalised to [-1, 1] (x, y over +-100 m, vx, vy over +-15 m/s). Action: Discrete(5) meta-actions "
    "0 LANE_LEFT, 1 IDLE, 2 LANE_RIGHT, 3 FASTER, 4 SLOWER (target speeds 0, 8, 16 m/s). Reward per step "
    "in about [0, 1]: higher for speed, lower for lane changes, 0 off the road. Ends on a crash or after "
    "11 steps (11 s at 1 Hz)."
)

CSV_COLUMNS = ("off_road_steps", "lane_changes", "mean_speed_mps", "final_speed_mps", "final_lane")


class RoundaboutEnvironment:
    """One roundabout-v0 Episode, seeded by the Episode's hidden seed, with its bounded public summary.

    The trace holds one token per step: `TIME ACTION v SPEED LANE r REWARD`, plus
    ` off-road` on a step that ends off the road, e.g. `3s FASTER v12.4 se-ex-1 r0.92`.
    """

    def __init__(self, env: gym.Env, seed: int) -> None:
        self._env: AbstractEnv = env
        self._seed = seed
        self._steps = 0
        self._crashed = False
        self._truncated = False
        self._on_road = True
        self._off_road_steps = 0
        self._lane_changes = 0
        self._speeds: list[float] = []
        self._trace = BoundedTrace()

    def reset(self) -> np.ndarray:
        observation, _info = self._env.reset(seed=self._seed)
        return np.array(observation, dtype=np.float32)

    def step(self, action: Any) -> StepResult:
        index = int(action)
        observation, reward, terminated, truncated, info = self._env.step(index)
        vehicle = self._env.vehicle
        self._steps += 1
        self._crashed = bool(info["crashed"])
        self._truncated = bool(truncated)
        self._on_road = bool(vehicle.on_road)
        self._off_road_steps += 0 if self._on_road else 1
        self._lane_changes += 1 if index in LANE_CHANGES else 0
        self._speeds.append(float(vehicle.speed))
        token = f"{self._steps}s {ACTIONS[index]} v{float(vehicle.speed):.1f} {lane_name(vehicle.lane_index)} r{float(reward):.2f}"
        self._trace.add(token if self._on_road else token + " off-road")
        return StepResult(observation=np.array(observation, dtype=np.float32), reward=float(reward),
                          terminated=bool(terminated), truncated=bool(truncated))

    def summary(self) -> dict[str, Any]:
        """Success (no crash to the time limit), the end cause, the steps, speeds and lanes, and the trace."""
        trace, truncated = self._trace.render()
        end = self._end()
        vehicle = self._env.vehicle
        return {
            "success": end == TIME_LIMIT,
            "end": end,
            "steps": self._steps,
            "crashed": self._crashed,
            "off_road_steps": self._off_road_steps,
            "lane_changes": self._lane_changes,
            "mean_speed_mps": round(sum(self._speeds) / len(self._speeds), 3) if self._speeds else 0.0,
            "final_speed_mps": round(float(vehicle.speed), 3),
            "final_lane": lane_name(vehicle.lane_index),
            "trace": trace,
            "trace_truncated": truncated,
        }

    def close(self) -> None:
        self._env.close()

    def _end(self) -> str:
        if self._crashed:
            return CRASH
        if self._truncated or self._steps >= ROUNDABOUT_HORIZON:
            return TIME_LIMIT if self._on_road else OFF_ROAD
        return NOT_ENDED


def _parameters() -> dict[str, Any]:
    observation, action = _CONFIG["observation"], _CONFIG["action"]
    return {
        "features": list(KinematicObservation.FEATURES),  # the columns; the rows are the observation's shape
        "absolute": bool(observation["absolute"]),
        "features_range": {name: [float(low), float(high)] for name, (low, high) in observation["features_range"].items()},
        "actions": [ACTIONS[index] for index in sorted(ACTIONS)],
        "target_speeds": [float(s) for s in action["target_speeds"]],
        "collision_reward": float(_CONFIG["collision_reward"]),
        "high_speed_reward": float(_CONFIG["high_speed_reward"]),
        "lane_change_reward": float(_CONFIG["lane_change_reward"]),
        "normalize_reward": bool(_CONFIG["normalize_reward"]),
        **timing_parameters(_CONFIG),
    }


def make_roundabout_benchmark() -> Benchmark:
    """Return the roundabout-v0 Benchmark (horizon 11, failure_return -1.0)."""
    return HighwayBenchmark(
        env_id=ROUNDABOUT_ID,
        description=DESCRIPTION,
        horizon=ROUNDABOUT_HORIZON,
        failure_return=ROUNDABOUT_FAILURE_RETURN,
        parameters=_parameters(),
        readme=package_readme(__file__),
        environment_factory=RoundaboutEnvironment,
        failure_summary=FAILURE_SUMMARY,
        summary_columns=("success", "end", *CSV_COLUMNS),
    )
