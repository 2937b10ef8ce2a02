"""Baseline Program for parking-v0 and roundabout-v0 (context.benchmark_id says which); its numbers live in params.json.

Parking: proportional steering at a point in front of the goal spot that slides into it.
Roundabout: slow down while another vehicle is close, otherwise get back to a cruise speed.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

# Roundabout meta-actions (Discrete(5)).
IDLE, FASTER, SLOWER = 1, 3, 4


def _wrap(angle: float) -> float:
    return (angle + math.pi) % (2 * math.pi) - math.pi


class ParkingController:
    """Steer at a carrot on the spot's axis, in front of the spot, that slides into it as the car nears.

    The carrot sits min(lookahead_m, approach_gain * distance) before the goal along
    the goal's heading, so the car swings round to enter the spot head first. The
    target speed is distance_gain * distance, capped at max_speed_mps, and at
    turn_speed_mps while the carrot is more than turn_angle_rad off the car's axis;
    acceleration and steering are proportional (speed_gain, steer_gain), forward only.
    """

    def __init__(self, params: dict[str, float], scales: list[float]) -> None:
        self._lookahead = float(params["lookahead_m"])
        self._approach = float(params["approach_gain"])
        self._max_speed = float(params["max_speed_mps"])
        self._distance_gain = float(params["distance_gain"])
        self._speed_gain = float(params["speed_gain"])
        self._steer_gain = float(params["steer_gain"])
        self._turn_angle = float(params["turn_angle_rad"])
        self._turn_speed = float(params["turn_speed_mps"])
        self._scales = np.asarray(scales, dtype=np.float64)

    def act(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        state = observation["observation"] * self._scales  # x, y (m), vx, vy (m/s), cos h, sin h
        goal = observation["desired_goal"] * self._scales
        heading = math.atan2(state[5], state[4])
        speed = state[2] * state[4] + state[3] * state[5]  # along the car's axis
        distance = math.hypot(goal[0] - state[0], goal[1] - state[1])
        back = min(self._lookahead, self._approach * distance)
        carrot_x, carrot_y = goal[0] - goal[4] * back, goal[1] - goal[5] * back
        bearing = _wrap(math.atan2(carrot_y - state[1], carrot_x - state[0]) - heading)
        target_speed = min(self._max_speed, self._distance_gain * distance)
        if abs(bearing) > self._turn_angle:
            target_speed = min(target_speed, self._turn_speed)
        acceleration = float(np.clip(self._speed_gain * (target_speed - speed), -1.0, 1.0))
        steering = float(np.clip(self._steer_gain * bearing, -1.0, 1.0))
        return np.array([acceleration, steering], dtype=np.float32)


class RoundaboutRule:
    """SLOWER while a vehicle is within danger_distance_m, else FASTER up to cruise_speed_mps, else IDLE."""

    def __init__(self, params: dict[str, float], features_range: dict[str, list[float]]) -> None:
        self._danger = float(params["danger_distance_m"])
        self._cruise = float(params["cruise_speed_mps"])
        self._position_span = (features_range["x"][1] - features_range["x"][0]) / 2  # metres per unit
        self._speed_span = (features_range["vx"][1] - features_range["vx"][0]) / 2

    def act(self, observation: np.ndarray) -> int:
        ego, others = observation[0], observation[1:]
        speed = self._speed_span * math.hypot(float(ego[3]), float(ego[4]))
        for row in others:
            if row[0] > 0.5:  # present
                distance = self._position_span * math.hypot(float(row[1] - ego[1]), float(row[2] - ego[2]))
                if distance < self._danger:
                    return SLOWER
        return FASTER if speed < self._cruise - 1.0 else IDLE


def make_policy(context: Any) -> Any:
    """The controller of the Benchmark named by context.benchmark_id, with its numbers from params.json."""
    params = json.loads((context.program_dir / "params.json").read_text(encoding="utf-8"))
    if context.benchmark_id.startswith("parking"):
        return ParkingController(params["parking"], context.parameters["scales"])
    if context.benchmark_id.startswith("roundabout"):
        return RoundaboutRule(params["roundabout"], context.parameters["features_range"])
    raise ValueError(f"this baseline drives parking-v0 and roundabout-v0, not {context.benchmark_id}")
