"""Baseline MountainCarContinuous-v0 Program: velocity pumping with a gain read from params.json."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

VELOCITY = 1  # index of the velocity in the observation


class VelocityPumpPolicy:
    """Push along the current velocity: ``force = clip(gain * velocity, low, high)``.

    Pushing with the motion adds energy each swing; with a small gain the swing
    grows slowly and the car may not reach the flag before the horizon.
    """

    def __init__(self, gain: float, low: float, high: float) -> None:
        self._gain = gain
        self._low = low
        self._high = high

    def act(self, observation: np.ndarray) -> list[float]:
        force = self._gain * float(observation[VELOCITY])
        return [min(max(force, self._low), self._high)]


def make_policy(context: Any) -> VelocityPumpPolicy:
    """Build the policy from params.json: ``gain`` (force per unit of velocity)."""
    params = json.loads((context.program_dir / "params.json").read_text(encoding="utf-8"))
    space = context.action_space
    low = float(np.asarray(space["low"]).reshape(-1)[0])
    high = float(np.asarray(space["high"]).reshape(-1)[0])
    return VelocityPumpPolicy(float(params["gain"]), low, high)
