"""Baseline Program for HalfCheetah-v5, Ant-v5, Pusher-v5 and Reacher-v5 (context.benchmark_id says which); its numbers live in params.json.

HalfCheetah and Ant: an open-loop sinusoid per joint, a_j = amplitude_j sin(2 pi f t + phase_j),
t the simulated time (steps x context.parameters["dt"]).
Pusher: joint velocity damping only, a = -velocity_damping x joint velocities (it keeps the control cost low).
Reacher: Jacobian-transpose control of the planar two-link arm towards the target, with velocity damping.
Every action is clipped into the action space's bounds.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np


class Sinusoid:
    def __init__(self, params: dict[str, Any], dt: float, low: np.ndarray, high: np.ndarray) -> None:
        self._omega = 2 * math.pi * float(params["frequency_hz"])
        self._amplitude = np.asarray(params["amplitude"], dtype=np.float64)
        self._phase = np.asarray(params["phase_rad"], dtype=np.float64)
        self._dt, self._low, self._high = dt, low, high
        self._step = 0

    def act(self, observation: np.ndarray) -> np.ndarray:
        t = self._step * self._dt
        self._step += 1
        return np.clip(self._amplitude * np.sin(self._omega * t + self._phase), self._low, self._high).astype(np.float32)


class Damping:
    def __init__(self, params: dict[str, Any], low: np.ndarray, high: np.ndarray) -> None:
        self._kd = float(params["velocity_damping"])
        self._low, self._high = low, high

    def act(self, observation: np.ndarray) -> np.ndarray:
        return np.clip(-self._kd * np.asarray(observation[7:14]), self._low, self._high).astype(np.float32)


class ReacherJacobian:
    def __init__(self, params: dict[str, Any], low: np.ndarray, high: np.ndarray) -> None:
        self._l1, self._l2 = (float(x) for x in params["link_lengths_m"])
        self._kp = float(params["position_gain"])
        self._kd = float(params["velocity_damping"])
        self._low, self._high = low, high

    def act(self, observation: np.ndarray) -> np.ndarray:
        c1, c2, s1, s2 = (float(x) for x in observation[:4])
        velocities = np.asarray(observation[6:8], dtype=np.float64)
        error = np.asarray(observation[8:10], dtype=np.float64)  # fingertip - target, xy
        c12, s12 = c1 * c2 - s1 * s2, s1 * c2 + c1 * s2
        jacobian = np.array([[-self._l1 * s1 - self._l2 * s12, -self._l2 * s12],
                             [self._l1 * c1 + self._l2 * c12, self._l2 * c12]])
        torque = -self._kp * jacobian.T @ error - self._kd * velocities
        return np.clip(torque, self._low, self._high).astype(np.float32)


def make_policy(context: Any) -> Any:
    """The controller of the Benchmark named by context.benchmark_id, with its numbers from params.json."""
    params = json.loads((context.program_dir / "params.json").read_text(encoding="utf-8"))
    low = np.asarray(context.action_space["low"], dtype=np.float64)
    high = np.asarray(context.action_space["high"], dtype=np.float64)
    name = context.benchmark_id.split("-")[0]
    if name in ("HalfCheetah", "Ant"):
        return Sinusoid(params[name], float(context.parameters["dt"]), low, high)
    if name == "Pusher":
        return Damping(params[name], low, high)
    if name == "Reacher":
        return ReacherJacobian(params[name], low, high)
    raise ValueError(f"this baseline drives HalfCheetah-v5, Ant-v5, Pusher-v5 and Reacher-v5, not {context.benchmark_id}")
