"""Baseline Program for BipedalWalker-v3 and CarRacing-v3 (context.benchmark_id says which); its numbers live in params.json.

Bipedal: a three-phase gait rule (swing one leg forward, put it down, push off with the other),
with proportional joint targets and a term that keeps the hull level.
CarRacing: gentle constant gas, steering towards the grey road in one row of pixels ahead of the car.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

# Observation indices of BipedalWalker-v3: hull angle, angular velocity, vx, vy; per leg: hip angle,
# hip speed, knee angle, knee speed, ground contact (leg 0 from 4, leg 1 from 9).
HULL_ANGLE, HULL_SPIN, SPEED_X, SPEED_Y = 0, 1, 2, 3
LEG_BASE = (4, 9)
SWING, PLANT, PUSH = "swing", "plant", "push"


class GaitRule:
    """Alternate the legs: the moving leg swings forward, is put down when the supporting leg is behind,
    and the supporting leg pushes off once the moving one touches the ground."""

    def __init__(self, p: dict[str, float]) -> None:
        self._p = p
        self._phase = SWING
        self._moving = 0
        self._support_knee = p["support_knee"]

    def act(self, s: np.ndarray) -> np.ndarray:
        p = self._p
        moving, supporting = self._moving, 1 - self._moving
        mb, sb = LEG_BASE[moving], LEG_BASE[supporting]
        hip_target: list[float | None] = [None, None]
        knee_target: list[float | None] = [None, None]
        if self._phase == SWING:
            hip_target[moving], knee_target[moving] = p["swing_hip"], p["swing_knee"]
            self._support_knee += 0.03 * (2 if s[SPEED_X] > p["target_speed"] else 1)
            self._support_knee = min(self._support_knee, p["support_knee"])
            knee_target[supporting] = self._support_knee
            if s[sb] < 0.10:  # the supporting leg is behind the hull
                self._phase = PLANT
        if self._phase == PLANT:
            hip_target[moving], knee_target[moving] = p["plant_hip"], p["support_knee"]
            knee_target[supporting] = self._support_knee
            if s[mb + 4] > 0.5:  # the moving leg touches the ground
                self._phase = PUSH
                self._support_knee = min(float(s[mb + 2]), p["support_knee"])
        if self._phase == PUSH:
            knee_target[moving], knee_target[supporting] = self._support_knee, p["push_knee"]
            if s[sb + 2] > p["push_done_knee"] or s[SPEED_X] > 1.2 * p["target_speed"]:
                self._phase, self._moving = SWING, supporting
        hips, knees = [0.0, 0.0], [0.0, 0.0]
        for leg in (0, 1):
            base = LEG_BASE[leg]
            if hip_target[leg] is not None:
                hips[leg] = p["hip_gain"] * (hip_target[leg] - s[base]) - p["damping"] * s[base + 1]
            if knee_target[leg] is not None:
                knees[leg] = p["knee_gain"] * (knee_target[leg] - s[base + 2]) - p["damping"] * s[base + 3]
            hips[leg] += p["upright_gain"] * s[HULL_ANGLE] + p["upright_damping"] * s[HULL_SPIN]
            knees[leg] -= p["bounce_damping"] * s[SPEED_Y]
        action = np.array([hips[0], knees[0], hips[1], knees[1]], dtype=np.float64) * p["output_scale"]
        return np.clip(action, -1.0, 1.0).astype(np.float32)


class RoadFollower:
    """Constant gentle gas; steer towards the middle of the grey road pixels in one row ahead of the car."""

    def __init__(self, p: dict[str, float]) -> None:
        self._row = int(p["look_row"])
        self._gain = float(p["steer_gain"])
        self._gas = float(p["gas"])
        self._brake = float(p["brake"])
        self._steer = 0.0

    def act(self, observation: np.ndarray) -> np.ndarray:
        row = observation[self._row].astype(np.int16)
        red, green, blue = row[:, 0], row[:, 1], row[:, 2]
        road = (np.abs(red - green) < 20) & (np.abs(green - blue) < 20) & (red > 80) & (red < 140)
        columns = np.flatnonzero(road)
        if columns.size:
            centre = (columns.mean() - (observation.shape[1] - 1) / 2) / (observation.shape[1] / 2)
            self._steer = float(np.clip(self._gain * centre, -1.0, 1.0))
        # No road in sight: keep the last steering, which turns back towards where the road was.
        return np.array([self._steer, self._gas, self._brake], dtype=np.float32)


def make_policy(context: Any) -> Any:
    params = json.loads((context.program_dir / "params.json").read_text())
    if context.benchmark_id.startswith("BipedalWalker"):
        return GaitRule(params["bipedal"])
    if context.benchmark_id.startswith("CarRacing"):
        return RoadFollower(params["carracing"])
    raise ValueError(f"this Program plays BipedalWalker-v3 and CarRacing-v3, not {context.benchmark_id}")
