"""The parking-v0 Benchmark: highway-env's goal-conditioned parking task, state observations, continuous control."""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
from highway_env.envs.common.action import ContinuousAction
from highway_env.envs.parking_env import ParkingEnv

from epg_env_highway.highway_benchmark import CRASH, FAILURE_SUMMARY, GOAL_REACHED, NOT_ENDED, TIME_LIMIT, HighwayBenchmark, lane_name, timing_parameters
from epg_sdk.benchmark import Benchmark, StepResult
from epg_sdk.readme import package_readme
from epg_sdk.trace import BoundedTrace

__all__ = ["PARKING_FAILURE_RETURN", "PARKING_HORIZON", "PARKING_ID", "ParkingEnvironment", "make_parking_benchmark"]

PARKING_ID = "parking-v0"
_CONFIG = ParkingEnv.default_config()  # the published defaults; environments are made without overrides
POLICY_FREQUENCY = int(_CONFIG["policy_frequency"])  # decisions per simulated second
PARKING_HORIZON = int(_CONFIG["duration"]) * POLICY_FREQUENCY  # 100 s at 5 Hz
# Below every completed Episode: a step costs at most about 0.9 and a crash 5 more, once.
PARKING_FAILURE_RETURN = -500.0

DESCRIPTION = (
    "Park a car in its goal spot of a parking lot with walls. Observation: a dict of three float64[6] "
    "vectors (observation, achieved_goal, desired_goal), each [x/100, y/100, vx/5, vy/5, cos h, sin h]. "
    "Action: float32[2] in [-1, 1], acceleration (x5 m/s^2) and steering (x45 deg). Reward per step: "
    "-sqrt(|achieved - desired| . [1, 0.3, 0, 0, 0.02, 0.02]), -5 on a crash. Ends on success, on a "
    "crash, or after 500 steps (100 s at 5 Hz)."
)

CSV_COLUMNS = ("final_distance_m", "min_distance_m", "final_heading_error_deg", "final_speed_mps")


def _wrapped_degrees(radians: float) -> float:
    return math.degrees((radians + math.pi) % (2 * math.pi) - math.pi)


class ParkingEnvironment:
    """One parking-v0 Episode, seeded by the Episode's hidden seed, with its bounded public summary.

    The trace holds one token per simulated second and the last step:
    `TIME v SPEED d DISTANCE h HEADING_ERROR LANE`, e.g. `12.0s v+1.3 d4.2 h-15 b-c-5`.
    """

    def __init__(self, env: gym.Env, seed: int) -> None:
        self._env = env
        self._seed = seed
        self._steps = 0
        self._crashed = False
        self._success = False
        self._truncated = False
        self._min_distance = math.inf
        self._trace = BoundedTrace()
        self._last_token = ""

    def reset(self) -> dict[str, np.ndarray]:
        observation, _info = self._env.reset(seed=self._seed)
        self._min_distance = self._distance()
        return _plain(observation)

    def step(self, action: np.ndarray) -> StepResult:
        observation, reward, terminated, truncated, info = self._env.step(action)
        self._steps += 1
        self._crashed = bool(info["crashed"])
        self._success = bool(info["is_success"])
        self._truncated = bool(truncated)
        self._min_distance = min(self._min_distance, self._distance())
        self._last_token = self._token()
        if self._steps % POLICY_FREQUENCY == 0:
            self._trace.add(self._last_token)
            self._last_token = ""
        return StepResult(observation=_plain(observation), reward=float(reward), terminated=bool(terminated), truncated=bool(truncated))

    def summary(self) -> dict[str, Any]:
        """Success, the end cause, the steps, the final state relative to the goal and the trace."""
        if self._last_token:
            self._trace.add(self._last_token)
            self._last_token = ""
        trace, truncated = self._trace.render()
        vehicle = self._env.vehicle
        return {
            "success": self._success and not self._crashed,
            "end": self._end(),
            "steps": self._steps,
            "crashed": self._crashed,
            "final_distance_m": round(self._distance(), 3),
            "min_distance_m": round(self._min_distance, 3),
            "final_heading_error_deg": round(self._heading_error(), 1),
            "final_speed_mps": round(float(vehicle.speed), 3),
            "goal_spot": lane_name(self._goal_lane()),
            "trace": trace,
            "trace_truncated": truncated,
        }

    def close(self) -> None:
        self._env.close()

    def _end(self) -> str:
        if self._crashed:
            return CRASH
        if self._success:
            return GOAL_REACHED
        if self._truncated or self._steps >= PARKING_HORIZON:
            return TIME_LIMIT
        return NOT_ENDED

    def _distance(self) -> float:
        vehicle = self._env.vehicle
        return float(np.linalg.norm(vehicle.position - vehicle.goal.position))

    def _heading_error(self) -> float:
        vehicle = self._env.vehicle
        return _wrapped_degrees(float(vehicle.heading) - float(vehicle.goal.heading))

    def _goal_lane(self) -> Any:
        goal = self._env.vehicle.goal
        return self._env.road.network.get_closest_lane_index(goal.position, goal.heading)

    def _token(self) -> str:
        vehicle = self._env.vehicle
        seconds = self._steps / POLICY_FREQUENCY
        return (f"{seconds:.1f}s v{float(vehicle.speed):+.1f} d{self._distance():.1f} "
                f"h{self._heading_error():+.0f} {lane_name(vehicle.lane_index)}")


def _plain(observation: Any) -> dict[str, np.ndarray]:
    """highway-env's OrderedDict as a plain dict of float64 arrays (copies: the policy may not alias the simulator)."""
    return {key: np.array(value, dtype=np.float64) for key, value in observation.items()}


def _parameters() -> dict[str, Any]:
    observation = _CONFIG["observation"]
    return {
        "features": list(observation["features"]),
        "scales": [float(s) for s in observation["scales"]],
        "reward_weights": [float(w) for w in _CONFIG["reward_weights"]],
        "reward_p": 0.5,
        "success_goal_reward": float(_CONFIG["success_goal_reward"]),
        "collision_reward": float(_CONFIG["collision_reward"]),
        "acceleration_range": [float(a) for a in ContinuousAction.ACCELERATION_RANGE],
        "steering_range": [float(s) for s in ContinuousAction.STEERING_RANGE],
        **timing_parameters(_CONFIG),
    }


def make_parking_benchmark() -> Benchmark:
    """Return the parking-v0 Benchmark (horizon 500, failure_return -500.0)."""
    return HighwayBenchmark(
        env_id=PARKING_ID,
        description=DESCRIPTION,
        horizon=PARKING_HORIZON,
        failure_return=PARKING_FAILURE_RETURN,
        parameters=_parameters(),
        readme=package_readme(__file__),
        environment_factory=ParkingEnvironment,
        failure_summary=FAILURE_SUMMARY,
        summary_columns=("success", "end", *CSV_COLUMNS),
    )
