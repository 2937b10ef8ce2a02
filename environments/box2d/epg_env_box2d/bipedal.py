"""The BipedalWalker-v3 Benchmark: gymnasium's Box2D walker on its default (not hardcore) terrain."""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.box2d import bipedal_walker as _walker

from epg_env_box2d.box2d_benchmark import FAILURE_SUMMARY, FELL, FINISHED, NOT_ENDED, TIME_LIMIT, Box2DBenchmark, PeriodicTrace
from epg_sdk.benchmark import Benchmark, StepResult
from epg_sdk.readme import package_readme

__all__ = ["BIPEDAL_FAILURE_RETURN", "BIPEDAL_HORIZON", "BIPEDAL_ID", "BipedalEnvironment", "make_bipedal_benchmark"]

BIPEDAL_ID = "BipedalWalker-v3"
BIPEDAL_HORIZON = 1600  # gymnasium's max_episode_steps for BipedalWalker-v3
# Below every completed Episode: a fall costs 100 once, the motors at most 0.112 per step, and a
# walk backwards off the start at most about 25 of shaping.
BIPEDAL_FAILURE_RETURN = -400.0
FPS = int(_walker.FPS)
TRACE_EVERY = FPS  # one trace token per simulated second
START_X = _walker.TERRAIN_STEP * _walker.TERRAIN_STARTPAD / 2  # where the hull starts, in metres
FINISH_X = (_walker.TERRAIN_LENGTH - _walker.TERRAIN_GRASS) * _walker.TERRAIN_STEP  # the end of the terrain

DESCRIPTION = (
    "Walk a two-legged robot to the end of rough terrain. Observation: float32[24] (hull angle, "
    "angular velocity, horizontal and vertical speed, hip and knee angles and speeds, leg contacts, "
    "10 lidar readings). Action: float32[4] in [-1, 1], the torques of hip 1, knee 1, hip 2, knee 2. "
    "Reward per step: 130 x forward progress / 30 - 5 x |change in hull angle| - 0.00035 x 80 x "
    "sum |torque|; -100 when the hull touches the ground. Ends on a fall, at the end of the terrain, "
    "or after 1600 steps."
)

CSV_COLUMNS = ("distance_m", "max_distance_m", "fell")


class BipedalEnvironment:
    """One BipedalWalker-v3 Episode, seeded by the Episode's hidden seed, with its bounded public summary.

    The trace holds one token per simulated second (50 steps) and the last step:
    `STEP x DISTANCE a HULL_ANGLE c CONTACTS`, e.g. `150 x3.2 a+0.05 c10`.
    """

    def __init__(self, env: gym.Env, seed: int) -> None:
        self._env = env
        self._seed = seed
        self._steps = 0
        self._terminated = False
        self._fell = False
        self._max_distance = 0.0
        self._trace = PeriodicTrace(TRACE_EVERY)

    def reset(self) -> np.ndarray:
        observation, _info = self._env.reset(seed=self._seed)
        return np.array(observation, dtype=np.float32)

    def step(self, action: np.ndarray) -> StepResult:
        observation, reward, terminated, truncated, _info = self._env.step(action)
        self._steps += 1
        self._terminated = bool(terminated)
        self._fell = bool(self._env.game_over or self._hull_x() < 0)
        self._max_distance = max(self._max_distance, self._distance())
        self._trace.step(self._steps, self._token(observation))
        return StepResult(observation=np.array(observation, dtype=np.float32), reward=float(reward),
                          terminated=bool(terminated), truncated=bool(truncated))

    def summary(self) -> dict[str, Any]:
        """The end cause, the steps, the distance travelled, whether the walker fell, and the trace."""
        trace, truncated = self._trace.render()
        return {
            "end": self._end(),
            "steps": self._steps,
            "fell": self._fell,
            "distance_m": round(self._distance(), 3),
            "max_distance_m": round(self._max_distance, 3),
            "final_hull_angle_rad": round(float(self._env.hull.angle), 3),
            "trace": trace,
            "trace_truncated": truncated,
        }

    def close(self) -> None:
        self._env.close()

    def _end(self) -> str:
        if self._fell:
            return FELL
        if self._terminated:
            return FINISHED
        if self._steps >= BIPEDAL_HORIZON:
            return TIME_LIMIT
        return NOT_ENDED

    def _hull_x(self) -> float:
        return float(self._env.hull.position[0])

    def _distance(self) -> float:
        value = self._hull_x() - START_X
        return value if math.isfinite(value) else 0.0

    def _token(self, observation: np.ndarray) -> str:
        contacts = f"{int(observation[8] > 0.5)}{int(observation[13] > 0.5)}"
        return f"{self._steps} x{self._distance():.1f} a{float(self._env.hull.angle):+.2f} c{contacts}"


def make_bipedal_benchmark() -> Benchmark:
    """Return the BipedalWalker-v3 Benchmark (horizon 1600, failure_return -400.0)."""
    return Box2DBenchmark(
        env_id=BIPEDAL_ID,
        description=DESCRIPTION,
        horizon=BIPEDAL_HORIZON,
        failure_return=BIPEDAL_FAILURE_RETURN,
        parameters={
            "fps": FPS,
            "hardcore": False,
            "start_x_m": round(START_X, 4),
            "finish_x_m": round(FINISH_X, 4),
            "fall_reward": -100.0,
            "motors_torque": float(_walker.MOTORS_TORQUE),
        },
        readme=package_readme(__file__),
        environment_factory=BipedalEnvironment,
        failure_summary=FAILURE_SUMMARY,
        summary_columns=("end", *CSV_COLUMNS),
    )
