"""The CarRacing-v3 Benchmark: gymnasium's Box2D top-down racer, continuous control, 96x96 RGB pixels."""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.box2d import car_racing as _racing

from epg_env_box2d.box2d_benchmark import FAILURE_SUMMARY, FINISHED, LEFT_PLAYFIELD, NOT_ENDED, TIME_LIMIT, Box2DBenchmark, PeriodicTrace
from epg_sdk.benchmark import Benchmark, StepResult
from epg_sdk.readme import package_readme

__all__ = ["CARRACING_FAILURE_RETURN", "CARRACING_HORIZON", "CARRACING_ID", "CarRacingEnvironment", "make_carracing_benchmark"]

CARRACING_ID = "CarRacing-v3"
CARRACING_HORIZON = 1000  # gymnasium's max_episode_steps for CarRacing-v3
# Below every completed Episode: -0.1 per step for at most 1000 steps, and -100 once for leaving the playfield.
CARRACING_FAILURE_RETURN = -200.0
FPS = int(_racing.FPS)
TRACE_EVERY = FPS  # one trace token per simulated second
LAP_COMPLETE_PERCENT = 0.95  # gymnasium's default: the share of tiles that completes the lap

DESCRIPTION = (
    "Drive a car round a randomly generated track, from pixels. Observation: uint8[96, 96, 3], a "
    "top-down RGB view that turns with the car, with a dashboard strip at the bottom. Action: "
    "float32[3]: steering in [-1, 1] (negative left), gas in [0, 1], brake in [0, 1]. Reward: -0.1 per "
    "step, +1000/N for each of the track's N tiles first touched, -100 for leaving the playfield. "
    "Ends when 95% of the tiles are visited, when the car leaves the playfield, or after 1000 steps."
)

CSV_COLUMNS = ("tiles_visited", "track_tiles", "tiles_fraction", "off_track_steps", "off_track_fraction")


class CarRacingEnvironment:
    """One CarRacing-v3 Episode, seeded by the Episode's hidden seed, with its bounded public summary.

    A step is off the track when none of the four wheels touches a track tile. The trace
    holds one token per simulated second (50 steps) and the last step:
    `STEP t TILES v SPEED on|off`, e.g. `100 t31 v27.4 on`.
    """

    def __init__(self, env: gym.Env, seed: int) -> None:
        self._env = env
        self._seed = seed
        self._steps = 0
        self._off_track_steps = 0
        self._finished = False
        self._left_playfield = False
        self._trace = PeriodicTrace(TRACE_EVERY)

    def reset(self) -> np.ndarray:
        observation, _info = self._env.reset(seed=self._seed)
        return np.array(observation, dtype=np.uint8)  # a copy: the policy may not alias the simulator

    def step(self, action: np.ndarray) -> StepResult:
        observation, reward, terminated, truncated, info = self._env.step(action)
        self._steps += 1
        if terminated:
            self._finished = bool(info.get("lap_finished", False))
            self._left_playfield = not self._finished
        on_track = self._on_track()
        self._off_track_steps += 0 if on_track else 1
        self._trace.step(self._steps, self._token(on_track))
        return StepResult(observation=np.array(observation, dtype=np.uint8), reward=float(reward),
                          terminated=bool(terminated), truncated=bool(truncated))

    def summary(self) -> dict[str, Any]:
        """The end cause, the steps, the tiles visited, the time off the track, and the trace."""
        trace, truncated = self._trace.render()
        tiles = int(self._env.tile_visited_count)
        track = len(self._env.track)
        return {
            "end": self._end(),
            "steps": self._steps,
            "tiles_visited": tiles,
            "track_tiles": track,
            "tiles_fraction": round(tiles / track, 4) if track else 0.0,
            "off_track_steps": self._off_track_steps,
            "off_track_fraction": round(self._off_track_steps / self._steps, 4) if self._steps else 0.0,
            "trace": trace,
            "trace_truncated": truncated,
        }

    def close(self) -> None:
        self._env.close()

    def _end(self) -> str:
        if self._finished:
            return FINISHED
        if self._left_playfield:
            return LEFT_PLAYFIELD
        if self._steps >= CARRACING_HORIZON:
            return TIME_LIMIT
        return NOT_ENDED

    def _on_track(self) -> bool:
        return any(len(wheel.tiles) > 0 for wheel in self._env.car.wheels)

    def _token(self, on_track: bool) -> str:
        velocity = self._env.car.hull.linearVelocity
        speed = math.hypot(float(velocity[0]), float(velocity[1]))
        return f"{self._steps} t{int(self._env.tile_visited_count)} v{speed:.1f} {'on' if on_track else 'off'}"


def make_carracing_benchmark() -> Benchmark:
    """Return the CarRacing-v3 Benchmark (continuous, horizon 1000, failure_return -200.0)."""
    return Box2DBenchmark(
        env_id=CARRACING_ID,
        description=DESCRIPTION,
        horizon=CARRACING_HORIZON,
        failure_return=CARRACING_FAILURE_RETURN,
        parameters={
            "fps": FPS,
            "continuous": True,
            "lap_complete_percent": LAP_COMPLETE_PERCENT,
            "domain_randomize": False,
            "step_reward": -0.1,
            "track_reward_total": 1000.0,
            "left_playfield_reward": -100.0,
        },
        readme=package_readme(__file__),
        environment_factory=CarRacingEnvironment,
        failure_summary=FAILURE_SUMMARY,
        summary_columns=("end", *CSV_COLUMNS),
    )
